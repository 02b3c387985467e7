//! Findings on an inference trace (docs/metrics.md "Inference traces"): the causes judge the
//! same figures, but their advice is a training job's (DDP buckets, the DataLoader, the
//! training loop). When the analysis read any rank as an engine's iterations
//! ([`crate::analyze::serving`]), the findings are worded for serving, after the arbitration:
//! - dropped: `input_bound` (a DataLoader; an engine has none) and `small_collectives` (DDP's
//!   gradient buckets; an engine's all-reduces are one per layer by the model's design);
//! - the fix of `cpu_bound`, `host_sync`, `exposed_comm`, `low_overlap` and `comm_heavy`
//!   replaced by the serving one (CPU scheduling gaps between decode iterations; all-reduce
//!   latency per token), and "training loop" read as the engine's loop.
//!
//! The other findings (a late or slow rank of a tensor-parallel group, step jitter) read the
//! same for serving and stay as they are.
//!
//! **CPU scheduling gaps between iterations.** The steps of an inference trace are its
//! iterations, so the host's work between two of them lies in no step and no step figure sees
//! it. When the device runs nothing for at least [`GAP_SHARE`] of the profiled window in those
//! gaps (`serving[].gap_idle_share`), that is a `cpu_bound` finding of its own (added to the
//! one the steps gave, if any): the gain per iteration is the mean idle gap.

use crate::analyze::Analysis;
use crate::finding::{Evidence, EvidenceKey, Finding, FindingId, Severity};

/// The share of the profiled window the device must idle between iterations for the gaps to be
/// a finding.
pub const GAP_SHARE: f64 = 0.05;

/// The serving fix of a finding whose training fix does not apply to an engine.
fn serving_fix(id: FindingId) -> Option<&'static str> {
    Some(match id {
        FindingId::CpuBound => {
            "The engine's host is the bottleneck: the GPU waits for the scheduler and the Python of each iteration (CPU scheduling gaps between decode steps). Run decode as CUDA graphs (vLLM: do not pass `--enforce-eager`; SGLang: keep CUDA graphs on, with `--cuda-graph-max-bs` at least the running batch), turn on the engine's asynchronous / overlap scheduling, and keep per-token Python (logging, detokenizing, custom logits processors) out of the iteration."
        }
        FindingId::HostSync => {
            "The host blocks on its collectives inside every iteration, so it launches nothing meanwhile: in tensor-parallel serving each layer's all-reduce is synchronous by design, and its latency is paid once per token. Capture the iteration with CUDA graphs that include the all-reduces, use the engine's custom / symmetric-memory all-reduce for small messages, or serve latency-bound decode with a smaller tensor-parallel degree."
        }
        FindingId::ExposedComm | FindingId::LowOverlap | FindingId::CommHeavy => {
            "The tensor-parallel all-reduces are on every token's path (a decode iteration cannot overlap them with backward, there is none): cut their latency with the engine's custom or symmetric-memory all-reduce and fused all-reduce + norm kernels, keep the ranks of a tensor-parallel group on one NVLink / xGMI domain, or use a smaller tensor-parallel degree (or expert / data parallelism) for latency-bound decode."
        }
        _ => return None,
    })
}

/// Findings that are a training job's only.
fn training_only(id: FindingId) -> bool {
    matches!(id, FindingId::InputBound | FindingId::SmallCollectives)
}

/// The findings as they read for serving (module doc); unchanged for a training job.
pub fn for_serving(a: &Analysis, findings: Vec<Finding>) -> Vec<Finding> {
    if a.serving.is_empty() {
        return findings;
    }
    let words =
        |s: &str| s.replace("the training loop", "the engine's loop").replace("training loop", "engine loop");
    let mut findings = findings;
    if let Some(gap) = gap_finding(a) {
        match findings.iter_mut().find(|f| f.id == FindingId::CpuBound) {
            Some(f) => {
                f.message = format!("{} {}", f.message, gap.message);
                f.impact_ns += gap.impact_ns;
                f.severity = f.severity.max(gap.severity);
            }
            None => {
                // Ranked by gain among the advice, as the arbitration ranks (a stopped job's
                // divergence stays first).
                let at = findings
                    .iter()
                    .position(|f| f.impact_ns < gap.impact_ns && f.id != FindingId::CollectiveMismatch)
                    .unwrap_or(findings.len());
                findings.insert(at, gap);
            }
        }
    }
    findings
        .into_iter()
        .filter(|f| !training_only(f.id))
        .map(|mut f| {
            if let Some(fix) = serving_fix(f.id) {
                f.fix = fix.to_string();
            }
            f.message = words(&f.message);
            f.fix = words(&f.fix);
            f
        })
        .collect()
}

/// The host's gaps between iterations in which the device idles, when they are worth acting on
/// (module doc).
fn gap_finding(a: &Analysis) -> Option<Finding> {
    let worth: Vec<&crate::analyze::serving::RankServing> =
        a.serving.iter().filter(|r| r.gap_idle_share.is_some_and(|s| s >= GAP_SHARE)).collect();
    let r = worth.first()?;
    let share = r.gap_idle_share.unwrap_or_default();
    let gaps = i64::from(r.iterations.saturating_sub(1)).max(1);
    let per_gap = r.gap_idle_ns / gaps;
    let severity = if share >= 0.2 {
        Severity::High
    } else if share >= 0.1 {
        Severity::Medium
    } else {
        Severity::Low
    };
    let mut evidence = Evidence::default();
    evidence.insert(EvidenceKey::Fraction, share);
    evidence.insert(EvidenceKey::CostNsPerStep, per_gap as f64);
    let ranks: Vec<u32> = worth.iter().map(|r| r.rank).collect();
    Some(Finding {
        id: FindingId::CpuBound,
        severity,
        message: format!(
            "Between iterations the device runs nothing while the host schedules the next batch: {:.3} ms per gap on average ({} gaps), {:.0}% of the profiled window, on rank(s) {}.",
            per_gap as f64 / 1e6,
            gaps,
            100.0 * share,
            super::markdown::list_of(&ranks)
        ),
        fix: serving_fix(FindingId::CpuBound).unwrap_or_default().to_string(),
        ranks,
        steps: a.steps.iter().map(|s| s.step).collect(),
        evidence,
        quotes: Vec::new(),
        quotes_total: 0,
        symptoms: Vec::new(),
        location: None,
        impact_ns: per_gap,
    })
}

/// The report's line for the inference ranks: iterations by phase, the decode iteration and
/// its communication, the host gaps between iterations (the lowest rank's figures, the ranks
/// of a tensor-parallel engine running the same iterations).
pub fn summary_line(a: &Analysis) -> Option<String> {
    let r = a.serving.first()?;
    let ms = |ns: i64| format!("{:.3}", ns as f64 / 1e6);
    let engine = match r.engine.as_str() {
        "vllm" => "vLLM",
        "sglang" => "SGLang",
        e => e,
    };
    let mut phases = Vec::new();
    for (n, what) in [
        (r.prefill, "prefill"),
        (r.decode, "decode"),
        (r.mixed, "mixed"),
        (r.unknown, "of a kind the names do not tell"),
    ] {
        if n > 0 {
            phases.push(format!("{n} {what}"));
        }
    }
    let mut s = format!(
        "**Inference**: {} {} {engine} engine iteration(s) (`{}` spans{}): {}.",
        if r.profiler_steps {
            "the steps (`ProfilerStep#N`, one per iteration) are"
        } else {
            "no `ProfilerStep#N`; the steps are"
        },
        r.iterations,
        r.marker,
        if a.serving.len() > 1 { format!(", rank {}", r.rank) } else { String::new() },
        phases.join(", ")
    );
    if let Some(d) = r.decode_p50_ns {
        s.push_str(&format!(
            " A decode iteration (one token for each running request) takes {} ms (median)",
            ms(d)
        ));
        match r.decode_comm_p50_ns.filter(|&c| c > 0) {
            Some(c) => s.push_str(&format!(", {} ms of it in communication.", ms(c))),
            None => s.push('.'),
        }
    }
    if let (Some(g), Some(share)) = (r.gap_p50_ns, r.gap_share) {
        s.push_str(&format!(
            " The host spends {} ms (median) between iterations, {:.0}% of the profiled window.",
            ms(g),
            100.0 * share
        ));
    }
    s.push_str(" Findings are worded for serving.");
    Some(s)
}
