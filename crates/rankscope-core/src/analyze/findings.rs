//! Findings: causes, each with its evidence, the rank it concerns, the fix and the time it
//! would save, from one attribution pass ([`super::diagnose`]; shared/DOMAIN.md, last section).
//!
//! Order of reasoning:
//! 1. **Waiting first.** Exposed wait at collectives is charged to the ranks the others waited
//!    for. A consistent late rank gives one finding named for *why* it is late — `input_bound`
//!    (its DataLoader), `compute_imbalance` (more compute than the others), `host_stall` (time
//!    inside an annotation with no operator running) — or `straggler` when the excess cannot be
//!    located. A late rank that changes from step to step is `arrival_jitter`.
//! 2. **Then the steady state**, on what is left: `exposed_comm` (transfer not hidden behind
//!    compute; waiting never counts), `small_collectives` (the trace's own α + S/B fit: fixed
//!    cost per call against fewer, larger buckets), `input_bound` on every rank, `cpu_bound`,
//!    `host_sync`, `allocator_churn` (GPU ranks only), `below_fabric` (only against nccl-tests
//!    of the same hardware and backend), `step_jitter`.
//! 3. **Worth acting on.** Every finding carries `impact_ns`: the time per step it would
//!    really save on one rank (a per-rank mean, bounded by the step: the wait it removes, the
//!    transfer that could hide, the calls' fixed cost). Findings below
//!    [`Thresholds::min_saving_ratio`] of the step are dropped; the rest are ranked by saving.
//!
//! Symptom rules of thumb (DOMAIN.md): data-parallel communication above ~10% of the step is not
//! hidden; well-tuned data parallel hides > 90% of it; per-rank spread above ~5% deserves a look;
//! eager kernel launch costs ~3–10 µs per kernel.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::breakdown::StepRank;
use super::collectives::{busbw_factor, Op};
use super::diagnose::{self, Compare, Diff, Located, StepWaits};
use super::regions::Phase;
use super::Analysis;
use crate::model::CollKind;

/// Finding thresholds. Ratios are fractions of the step (0.1 = 10%).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Thresholds {
    /// Exposed transfer / step wall time above this is a finding.
    pub exposed_comm_ratio: f64,
    /// A rank is a consistent straggler when late in at least this share of the steps.
    pub straggler_consistency: f64,
    /// A finding must save at least this share of the step.
    pub min_saving_ratio: f64,
    /// (max − min) / mean compute across ranks above this flags a step in `imbalance` (a
    /// table, not a finding: uneven work shows as a late rank).
    pub compute_imbalance: f64,
    /// Data loading (host work the device or the step waits on) / step above this.
    pub input_ratio: f64,
    /// GPU idle waiting on the host (CPU-bound gaps) / step.
    pub cpu_bound_ratio: f64,
    /// Host synchronization / step.
    pub host_sync_ratio: f64,
    /// Allocation calls per step after the first step.
    pub alloc_calls_per_step: f64,
    /// Median collective size below this many bytes...
    pub small_collective_bytes: f64,
    /// ...with at least this many collectives per step.
    pub small_collectives_per_step: f64,
    /// The bucket size fewer, larger collectives are projected with (DDP's default 25 MiB).
    pub bucket_bytes: f64,
    /// Step-time jitter (stdev / mean) above this.
    pub step_jitter: f64,
    /// Achieved busbw below this fraction of what nccl-tests measured at the same size.
    pub fabric_fraction: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            exposed_comm_ratio: 0.10,
            straggler_consistency: 0.6,
            min_saving_ratio: 0.01,
            compute_imbalance: 0.05,
            input_ratio: 0.05,
            cpu_bound_ratio: 0.10,
            host_sync_ratio: 0.05,
            alloc_calls_per_step: 1.0,
            small_collective_bytes: 4.0 * 1024.0 * 1024.0,
            small_collectives_per_step: 8.0,
            bucket_bytes: 25.0 * 1024.0 * 1024.0,
            step_jitter: 0.10,
            fabric_fraction: 0.5,
        }
    }
}

impl Thresholds {
    /// Sets one threshold by name (`exposed_comm_ratio=0.15`).
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), String> {
        let slot = match name {
            "exposed_comm_ratio" => &mut self.exposed_comm_ratio,
            "straggler_consistency" => &mut self.straggler_consistency,
            "min_saving_ratio" => &mut self.min_saving_ratio,
            "compute_imbalance" => &mut self.compute_imbalance,
            "input_ratio" => &mut self.input_ratio,
            "cpu_bound_ratio" => &mut self.cpu_bound_ratio,
            "host_sync_ratio" => &mut self.host_sync_ratio,
            "alloc_calls_per_step" => &mut self.alloc_calls_per_step,
            "small_collective_bytes" => &mut self.small_collective_bytes,
            "small_collectives_per_step" => &mut self.small_collectives_per_step,
            "bucket_bytes" => &mut self.bucket_bytes,
            "step_jitter" => &mut self.step_jitter,
            "fabric_fraction" => &mut self.fabric_fraction,
            _ => return Err(format!("unknown threshold `{name}`")),
        };
        if !value.is_finite() {
            return Err(format!("threshold `{name}` must be a finite number"));
        }
        *slot = value;
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Low,
    Medium,
    High,
}

impl Severity {
    /// As the JSON spells it.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
}

/// Where a late rank's excess time is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Location {
    /// Region names from the step down to the one that holds the excess.
    pub regions: Vec<String>,
    pub phase: Phase,
    /// Per step on the late rank, and the others' median, of the located region's active time.
    pub rank_ns: i64,
    pub others_ns: i64,
    /// How the excess splits: no operator running, operators, host synchronization, device.
    pub free_excess_ns: i64,
    pub ops_excess_ns: i64,
    pub sync_excess_ns: i64,
    pub device_excess_ns: i64,
}

impl Location {
    /// The excess split, in words, for the parts that are there: `[("no operator running",
    /// 402_000_000)]`.
    pub fn excess_parts(&self) -> Vec<(&'static str, i64)> {
        [
            ("no operator running", self.free_excess_ns),
            ("operators", self.ops_excess_ns),
            ("host synchronization", self.sync_excess_ns),
            ("device compute", self.device_excess_ns),
        ]
        .into_iter()
        .filter(|x| x.1 > 0)
        .collect()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Finding {
    /// Stable identifier of the cause (`host_stall`, `exposed_comm`, ...).
    pub id: String,
    pub severity: Severity,
    /// What is wrong, on which rank, why, with the figures.
    pub message: String,
    /// What to do about it.
    pub fix: String,
    pub ranks: Vec<u32>,
    pub steps: Vec<u32>,
    /// The figures behind the message (per-rank, per-step values unless named otherwise).
    pub evidence: BTreeMap<String, f64>,
    /// Symptoms this cause explains (rule ids that would otherwise have been findings).
    #[serde(default)]
    pub symptoms: Vec<String>,
    /// For a late rank: where its excess time is.
    #[serde(default)]
    pub location: Option<Location>,
    /// Estimated time saved per step on one rank if fixed (ns, ≤ the step), used for ranking.
    pub impact_ns: i64,
}

pub(crate) fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// A duration for a sentence: µs below 1 ms, ms below 1 s, s above.
pub(crate) fn dur(ns: f64) -> String {
    let a = ns.abs();
    if a < 1e6 {
        format!("{:.0} µs", ns / 1e3)
    } else if a < 1e7 {
        format!("{:.1} ms", ns / 1e6)
    } else if a < 1e9 {
        format!("{:.0} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

fn dur_range(mut v: Vec<f64>) -> String {
    v.sort_by(|a, b| a.total_cmp(b));
    match (v.first(), v.last()) {
        (Some(&a), Some(&b)) if (b - a).abs() >= 0.05 * b.abs().max(1.0) => {
            let (x, y) = (dur(a), dur(b));
            // "365–561 ms" rather than "365 ms–561 ms" when the units agree.
            match (x.rsplit_once(' '), y.rsplit_once(' ')) {
                (Some((xa, ux)), Some((yb, uy))) if ux == uy => format!("{xa}–{yb} {uy}"),
                _ => format!("{x}–{y}"),
            }
        }
        (Some(&a), _) => dur(a),
        _ => "0 ms".into(),
    }
}

/// "0", "0 and 3", "0, 1 and 3".
pub(crate) fn rank_list(r: &[u32]) -> String {
    let s: Vec<String> = r.iter().map(|x| x.to_string()).collect();
    match s.len() {
        0 => String::new(),
        1 => s[0].clone(),
        n => format!("{} and {}", s[..n - 1].join(", "), s[n - 1]),
    }
}

fn ranks_word(r: &[u32]) -> String {
    if r.len() == 1 {
        format!("Rank {}", r[0])
    } else {
        format!("Ranks {}", rank_list(r))
    }
}

fn severity_for(saving: f64, step: f64) -> Severity {
    let share = if step > 0.0 { saving / step } else { 0.0 };
    if share >= 0.2 {
        Severity::High
    } else if share >= 0.05 {
        Severity::Medium
    } else {
        Severity::Low
    }
}

/// Shared facts the rules read.
struct Ctx<'a> {
    a: &'a Analysis,
    th: &'a Thresholds,
    per_step: BTreeMap<u32, Vec<&'a StepRank>>,
    /// Mean step wall time over ranks and steps.
    step_ns: f64,
    all_steps: Vec<u32>,
    ranks: Vec<u32>,
    cpu_only: bool,
}

impl Ctx<'_> {
    fn is_cpu(&self, rank: u32) -> bool {
        self.a.ranks.iter().any(|r| r.rank == rank && r.metrics_from == super::breakdown::MetricsFrom::Cpu)
    }

    /// Per rank: the mean over its steps of `f`.
    fn per_rank_mean(&self, f: impl Fn(&StepRank) -> i64) -> Vec<(u32, f64)> {
        let mut acc: BTreeMap<u32, (f64, usize)> = BTreeMap::new();
        for rows in self.per_step.values() {
            for r in rows {
                let e = acc.entry(r.rank).or_default();
                e.0 += f(r) as f64;
                e.1 += 1;
            }
        }
        acc.into_iter().map(|(r, (s, n))| (r, s / n.max(1) as f64)).collect()
    }

    fn rank_step_ns(&self, rank: u32) -> f64 {
        self.per_rank_mean(|r| r.wall_ns).into_iter().find(|x| x.0 == rank).map_or(self.step_ns, |x| x.1)
    }

    fn floor_ns(&self) -> f64 {
        (self.th.min_saving_ratio * self.step_ns).max(20_000.0)
    }
}

pub(crate) fn median_f(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Every finding of the analysis, ranked.
pub fn findings(a: &Analysis, ops: &[Op], th: &Thresholds) -> Vec<Finding> {
    // A hang or a mismatch comes first, and the steps it stopped are no steady state: the
    // other findings are read on the steps that ran to the end.
    let stuck = mismatches(a, ops);
    let stopped: Vec<u32> = if stuck.is_empty() {
        Vec::new()
    } else {
        ops.iter().filter(|o| o.partial).map(|o| o.step).collect()
    };
    let mut per_step: BTreeMap<u32, Vec<&StepRank>> = BTreeMap::new();
    for s in a.steps.iter().filter(|s| !stopped.contains(&s.step)) {
        per_step.insert(s.step, s.per_rank.iter().collect());
    }
    let walls: Vec<f64> = per_step.values().flat_map(|v| v.iter().map(|r| r.wall_ns as f64)).collect();
    let step_ns = if walls.is_empty() { 0.0 } else { walls.iter().sum::<f64>() / walls.len() as f64 };
    let cx = Ctx {
        a,
        th,
        all_steps: per_step.keys().copied().collect(),
        per_step,
        step_ns,
        ranks: a.ranks.iter().map(|r| r.rank).collect(),
        cpu_only: !a.ranks.is_empty()
            && a.ranks.iter().all(|r| r.metrics_from == super::breakdown::MetricsFrom::Cpu),
    };
    let mut out: Vec<Finding> = Vec::new();
    out.extend(pipeline_bubble(&cx));
    let late = if stuck.is_empty() { late_ranks(&cx) } else { None };
    // The late ranks' own symptoms are their finding's; they are kept out of the job-wide
    // ones only when that finding is made.
    let mut straggler_ranks: Vec<u32> = Vec::new();
    let floor = cx.floor_ns();
    if let Some(f) =
        late.as_ref().and_then(|l| late_rank_finding(&cx, l)).filter(|f| f.impact_ns as f64 >= floor)
    {
        straggler_ranks = late.as_ref().map(|l| l.ranks.clone()).unwrap_or_default();
        out.push(f);
    } else if let Some(f) = arrival_jitter(&cx).filter(|_| stuck.is_empty()) {
        out.push(f);
    }
    let blocking = blocking_collectives(&cx);
    let blocking_saving: i64 = blocking.iter().map(|f| f.impact_ns).sum();
    let blocking_regions: Vec<String> =
        blocking.iter().filter_map(|f| f.location.as_ref().and_then(|l| l.regions.last().cloned())).collect();
    let small = small_collectives(&cx, ops, &blocking_regions);
    let small_saving = small.iter().map(|s| s.0.impact_ns).max().unwrap_or(0);
    let mut small: Vec<Finding> = small.into_iter().map(|s| s.0).collect();
    // Small collectives are the cause of (part of) the exposed transfer: one finding for it,
    // and exposed communication only for what fewer, larger calls would leave exposed.
    if let Some(mut f) = exposed_comm(&cx, !small.is_empty()) {
        f.impact_ns = (f.impact_ns - blocking_saving).max(0);
        if !small.is_empty() {
            f.impact_ns = (f.impact_ns - small_saving).max(0);
            for s in &mut small {
                s.symptoms.push("exposed_comm".into());
            }
        }
        out.push(f);
    }
    out.extend(small);
    out.extend(blocking);
    if !out.iter().any(|f| f.id == "input_bound") {
        out.extend(input_bound_all(&cx));
    }
    // Device idle that follows a host sync is host_sync's; cpu_bound keeps the rest of the
    // launch-bound idle, so the two never claim the same time twice.
    let sync = host_sync(&cx, &straggler_ranks);
    let mut launch = cpu_bound(&cx, &straggler_ranks);
    if let (Some(c), Some(h)) = (launch.as_mut(), sync.as_ref()) {
        c.impact_ns = (c.impact_ns - h.impact_ns).max(0);
    }
    out.extend(sync);
    out.extend(launch);
    out.extend(allocator_churn(&cx));
    out.extend(below_fabric(&cx));
    if let Some(f) = step_jitter(&cx, &out).filter(|_| stuck.is_empty()) {
        out.push(f);
    }
    let cap = step_ns.max(0.0) as i64;
    out.retain(|f| f.impact_ns as f64 >= floor);
    for f in &mut out {
        f.impact_ns = f.impact_ns.min(cap);
    }
    out.sort_by(|x, y| y.impact_ns.cmp(&x.impact_ns).then(y.severity.cmp(&x.severity)).then(x.id.cmp(&y.id)));
    // The job stopped: nothing else matters until it runs.
    // One divergence is the cause; the later ones are usually its consequences.
    stuck.into_iter().take(1).chain(out).collect()
}

/// The pipeline's bubble: stages idle waiting for their neighbours, against the schedule's
/// (p − 1) / (m + p − 1), the slowest stage, and the fixes that apply. Its saving is the bubble
/// beyond what the formula leaves at twice the micro-batches (what more micro-batches and
/// balanced stages could reach).
fn pipeline_bubble(cx: &Ctx<'_>) -> Option<Finding> {
    let p = cx.a.pipeline.as_ref()?;
    if p.per_stage.len() < 2 {
        return None;
    }
    let n = p.per_stage.len() as f64;
    let mean = |f: fn(&super::pipeline::StageSummary) -> f64| p.per_stage.iter().map(f).sum::<f64>() / n;
    let bubble_ns = mean(|s| s.bubble_ns as f64);
    let span_ns = mean(|s| s.span_ns as f64);
    let share = mean(|s| s.bubble_share);
    let floor = p.theory_bubble_share_2m.unwrap_or(0.0);
    let impact = (bubble_ns - floor * span_ns).max(0.0);
    let mut by_compute: Vec<&super::pipeline::StageSummary> = p.per_stage.iter().collect();
    by_compute.sort_by(|a, b| b.compute_ns.cmp(&a.compute_ns).then(a.stage.cmp(&b.stage)));
    let slowest = by_compute[0];
    let second = by_compute.get(1).map_or(0, |s| s.compute_ns);
    let mean_compute = mean(|s| s.compute_ns as f64);
    // One stage far slower than every other is the bottleneck and the fix is that stage's: at
    // least 40% more compute than the next slowest (first and last stages are naturally
    // 10–30% heavier, with the embedding and the head).
    let one_slow = slowest.compute_ns as f64 >= 1.4 * second as f64;
    let ranks = if one_slow { vec![slowest.rank] } else { p.stages.clone() };
    let m = p.micro_batches;
    let stages = p.stages.len();
    let shares: Vec<String> =
        p.per_stage.iter().map(|s| format!("stage {} {}", s.stage, pct(s.bubble_share))).collect();
    let theory = match (p.theory_bubble_share, m, p.virtual_stages.filter(|&v| v > 1)) {
        (Some(t), Some(m), Some(v)) => format!(
            ", against (p − 1)/(m·v + p − 1) = {} for {stages} stages, {m} micro-batches and {v} virtual stages per rank",
            pct(t)
        ),
        (Some(t), Some(m), None) => {
            format!(", against (p − 1)/(m + p − 1) = {} for {stages} stages and {m} micro-batches", pct(t))
        }
        _ => String::new(),
    };
    let sched = match p.schedule {
        super::pipeline::Schedule::Unknown => "schedule not told".to_string(),
        s => format!("{} schedule", s.name()),
    };
    let mb = m.map(|m| format!(", {m} micro-batches")).unwrap_or_default();
    let recv = mean(|s| s.recv_wait_ns as f64);
    let message = format!(
        "Pipeline of {stages} stages (ranks {}), {sched}{mb}: the stages are idle {} of the schedule on average waiting for their neighbours (the bubble: {}){theory}; {} per step of it is blocked in receives. Stage {} (rank {}) is the slowest: {} of compute per step, {} above the stages' mean ({}){}.",
        rank_list(&p.stages),
        pct(share),
        shares.join(", "),
        dur(recv),
        slowest.stage,
        slowest.rank,
        dur(slowest.compute_ns as f64),
        pct(p.slowest_excess),
        dur(mean_compute),
        if one_slow { "; the other stages wait for it" } else { "" },
    );
    let mut fixes = Vec::new();
    if one_slow || p.slowest_excess >= 0.1 {
        fixes.push(format!(
            "rebalance the stages: move layers off stage {} (rank {}), whose compute is {} above the mean",
            slowest.stage,
            slowest.rank,
            pct(p.slowest_excess)
        ));
    }
    if let (Some(m), Some(t2)) = (m, p.theory_bubble_share_2m) {
        fixes.push(format!(
            "more micro-batches: at {} the formula's bubble is {} (rule of thumb m ≥ 4p = {})",
            2 * m,
            pct(t2),
            4 * stages
        ));
    } else {
        fixes.push("more micro-batches per step (rule of thumb m ≥ 4p)".to_string());
    }
    fixes.push(match p.schedule {
        super::pipeline::Schedule::Interleaved1f1b => {
            "more virtual stages per rank (v in (p − 1)/(m·v + p − 1)), at the cost of more exchanges".to_string()
        }
        super::pipeline::Schedule::OneFOneB => {
            "an interleaved schedule (ScheduleInterleaved1F1B with v virtual stages per rank: (p − 1)/(m·v + p − 1))".to_string()
        }
        _ => "a 1F1B or interleaved schedule (Schedule1F1B bounds the activations in flight; ScheduleInterleaved1F1B with v virtual stages per rank gives (p − 1)/(m·v + p − 1))".to_string(),
    });
    let mut fix = fixes.join("; ");
    if let Some(c) = fix.get(..1) {
        fix = c.to_uppercase() + &fix[1..];
    }
    fix.push('.');
    let mut evidence = BTreeMap::new();
    for s in &p.per_stage {
        evidence.insert(format!("bubble_share_stage_{}", s.stage), s.bubble_share);
        evidence.insert(format!("compute_ns_stage_{}", s.stage), s.compute_ns as f64);
    }
    evidence.insert("bubble_share".into(), share);
    evidence.insert("bubble_ns".into(), bubble_ns);
    evidence.insert("recv_wait_ns".into(), recv);
    evidence.insert("slowest_stage".into(), f64::from(slowest.stage));
    evidence.insert("slowest_excess".into(), p.slowest_excess);
    evidence.insert("stages".into(), stages as f64);
    if let Some(t) = p.theory_bubble_share {
        evidence.insert("theory_bubble_share".into(), t);
    }
    if let Some(t) = p.theory_bubble_share_2m {
        evidence.insert("theory_bubble_share_2m".into(), t);
    }
    if let Some(m) = m {
        evidence.insert("micro_batches".into(), f64::from(m));
    }
    let mut steps: Vec<u32> = p.steps.iter().map(|s| s.step).collect();
    steps.dedup();
    Some(Finding {
        id: "pipeline_bubble".into(),
        severity: severity_for(impact, cx.step_ns),
        message,
        fix,
        ranks,
        steps,
        evidence,
        symptoms: vec!["exposed_comm".into(), "straggler".into()],
        location: None,
        impact_ns: impact as i64,
    })
}

/// A hang or mismatch the sequence engine found: the first divergence of a group, said the
/// way the engine words it ([`crate::sequence::text`]).
fn mismatches(a: &Analysis, ops: &[Op]) -> Vec<Finding> {
    use crate::sequence::{DiagnosisKind, DivergenceClass};
    let Some(seq) = &a.sequence else { return Vec::new() };
    let mut out = Vec::new();
    for d in seq.diagnoses.iter().filter(|d| matches!(d.kind, DiagnosisKind::Hang | DiagnosisKind::Mismatch))
    {
        let div = seq
            .groups
            .iter()
            .find(|g| Some(&g.pg) == d.pg.as_ref())
            .and_then(|g| g.divergences.iter().find(|v| Some(v.position) == d.position));
        let waited = div
            .map(|v| {
                v.sides.iter().flat_map(|s| s.waits.iter()).filter_map(|w| w.waited_ns).max().unwrap_or(0)
            })
            .unwrap_or(0);
        let steps: Vec<u32> = {
            let mut v: Vec<u32> =
                div.map(|v| v.sides.iter().filter_map(|s| s.record.step).collect()).unwrap_or_default();
            v.sort_unstable();
            v.dedup();
            v
        };
        let label = div.and_then(|v| v.sides.iter().find_map(|s| s.record.label.clone()));
        let shape =
            div.is_some_and(|v| v.class == DivergenceClass::Mismatch && !v.shifts.iter().any(|_| true));
        let fix = if shape {
            "Make every rank pass the same shapes and dtypes to each collective: look for a rank-dependent tensor size (an uneven last batch, a padded or unpadded shard, a parameter only some ranks own). Run once with `TORCH_DISTRIBUTED_DEBUG=DETAIL`, which checks shapes before each collective and names the call.".to_string()
        } else {
            format!(
                "Make every rank issue the same collectives in the same order{}: look on the rank(s) named for a collective inside a rank-dependent branch (`if rank == …`, a metric logged by some ranks only), an early `break`/`return`/`continue`, data-dependent control flow, or an exception caught on one rank. Run once with `TORCH_DISTRIBUTED_DEBUG=DETAIL` to fail fast at the first mismatch, and keep Flight Recorder on (`TORCH_FR_BUFFER_SIZE`, `TORCH_FR_DUMP_TEMP_FILE`) to get the stacks of a hang.",
                label.as_deref().map(|l| format!(" (the one that diverged was issued in `{l}`)")).unwrap_or_default()
            )
        };
        let mut evidence = BTreeMap::new();
        if waited > 0 {
            evidence.insert("waited_ns".to_string(), waited as f64);
        }
        if let Some(t) = div.and_then(|v| v.timeout) {
            evidence.insert("timeout_ms".to_string(), t.ms as f64);
        }
        evidence.insert("partial_collectives".to_string(), ops.iter().filter(|o| o.partial).count() as f64);
        out.push(Finding {
            id: "collective_mismatch".into(),
            severity: Severity::High,
            message: d.sentence.clone(),
            fix,
            ranks: d.ranks.clone(),
            steps,
            evidence,
            symptoms: vec!["hang".into()],
            location: None,
            // The job stops: every step it does not run is lost.
            impact_ns: waited,
        });
    }
    out
}

/// The share of hideable exposed transfer that better overlap removes in practice.
pub const OVERLAP_ACHIEVABLE: f64 = 0.7;

/// A consistent late group.
struct Late {
    ranks: Vec<u32>,
    /// Steps (with a measurable spread) in which the group was late.
    steps: Vec<u32>,
    /// Steps with a measurable spread.
    spread_steps: usize,
    /// Per step the group was late: what it cost the step.
    cost_ns: Vec<i64>,
}

fn late_ranks(cx: &Ctx<'_>) -> Option<Late> {
    let waits = &cx.a.waits;
    let spread: Vec<&StepWaits> = waits.iter().filter(|w| !w.late.is_empty() && w.cost_ns > 0).collect();
    if spread.is_empty() {
        return None;
    }
    let mut count: BTreeMap<u32, usize> = BTreeMap::new();
    for w in &spread {
        for &r in &w.late {
            *count.entry(r).or_default() += 1;
        }
    }
    // Consistent over the steps of the trace, not only over those with a spread: a rank late
    // in 2 of 4 steps is noise. One measured step is named if it is the only step there is.
    let n_steps = cx.all_steps.len().max(spread.len());
    let need = (cx.th.straggler_consistency * n_steps as f64).ceil().max(1.0) as usize;
    let ranks: Vec<u32> = count.iter().filter(|(_, &n)| n >= need).map(|(&r, _)| r).collect();
    if ranks.is_empty() || ranks.len() * 2 > cx.ranks.len() {
        return None;
    }
    let mut steps = Vec::new();
    let mut cost = Vec::new();
    for w in waits {
        if ranks.iter().any(|r| w.late.contains(r)) {
            let c = diagnose::late_cost(&w.ranks, &w.exposed_wait_ns, &ranks);
            if c > 0 {
                steps.push(w.step);
                cost.push(c);
            }
        }
    }
    if steps.is_empty() {
        return None;
    }
    Some(Late { ranks, steps, spread_steps: spread.len(), cost_ns: cost })
}

/// What the late rank's excess is made of.
enum Cause {
    Input {
        data: Diff,
    },
    /// More time on the same work when `same_work` (its optimizer, whose work does not depend
    /// on the batch, is slower by as much), else more work.
    Compute {
        compute: Diff,
        loc: Option<Located>,
        same_work: Option<Diff>,
    },
    Stall {
        loc: Located,
    },
    Sync {
        loc: Located,
    },
    Unknown {
        loc: Option<Located>,
    },
}

fn classify(cx: &Ctx<'_>, rank: u32, steps: &[u32], excess: f64) -> Cause {
    let cmp = Compare { rank, steps, ranks: &cx.ranks };
    let data = cmp.phase(&cx.a.phases, Phase::DataLoading);
    let per_step: BTreeMap<u32, Vec<StepRank>> =
        cx.per_step.iter().map(|(k, v)| (*k, v.iter().map(|r| (*r).clone()).collect())).collect();
    let compute = cmp.step_figure(&per_step, |r| r.compute_ns);
    let loc = diagnose::locate(&cmp, &cx.a.regions);
    let half = 0.5 * excess;
    if data.excess() >= half {
        return Cause::Input { data };
    }
    // Same work on a slower device, or more work? The optimizer's work depends on the
    // parameters, not the batch: uneven batches leave it equal, a slower device (or host) slows
    // it as much as the rest.
    let opt = if cx.is_cpu(rank) {
        cmp.phase(&cx.a.phases, Phase::Optimizer)
    } else {
        cmp.phase_device(&cx.a.regions, Phase::Optimizer)
    };
    let same_work = {
        let rc = if compute.others_ns > 0.0 { compute.mine_ns / compute.others_ns } else { 1.0 };
        let ro = if opt.others_ns > 0.0 { opt.mine_ns / opt.others_ns } else { 1.0 };
        (opt.others_ns > 0.01 * compute.others_ns && rc > 1.0 && ro >= 1.0 + 0.5 * (rc - 1.0)).then_some(opt)
    };
    if compute.excess() >= half {
        return Cause::Compute { compute, loc, same_work };
    }
    let Some(l) = loc else { return Cause::Unknown { loc: None } };
    let here = l.path.last().map_or(0.0, |x| x.1.excess());
    if l.phase == Phase::DataLoading && here >= half {
        return Cause::Input { data: l.path.last().map(|x| x.1.clone()).unwrap_or_default() };
    }
    let share = |d: &Diff| here > 0.0 && d.excess() >= 0.5 * here;
    if here >= half && share(&l.free) {
        return Cause::Stall { loc: l };
    }
    if here >= half && share(&l.sync) {
        return Cause::Sync { loc: l };
    }
    if here >= half && (share(&l.ops) || share(&l.device)) {
        return Cause::Compute { compute, loc: Some(l), same_work };
    }
    Cause::Unknown { loc: Some(l) }
}

fn location(l: &Located) -> Location {
    let last = l.path.last().map(|x| x.1.clone()).unwrap_or_default();
    Location {
        regions: l.path.iter().map(|x| x.0.clone()).collect(),
        phase: l.phase,
        rank_ns: last.mine_ns as i64,
        others_ns: last.others_ns as i64,
        free_excess_ns: l.free.excess() as i64,
        ops_excess_ns: l.ops.excess() as i64,
        sync_excess_ns: l.sync.excess() as i64,
        device_excess_ns: l.device.excess() as i64,
    }
}

/// "`straggler_sleep` inside `forward`", or "the step outside any annotation".
fn where_words(l: &Located) -> String {
    let names: Vec<&str> = l.path.iter().map(|x| x.0.as_str()).filter(|n| *n != "ProfilerStep").collect();
    match names.as_slice() {
        [] => "the step, outside any annotation,".into(),
        [one] => format!("`{one}`"),
        [.., parent, last] => format!("`{last}` inside `{parent}`"),
    }
}

fn late_rank_finding(cx: &Ctx<'_>, late: &Late) -> Option<Finding> {
    let n_steps = cx.all_steps.len().max(1) as f64;
    let cost_late = late.cost_ns.iter().sum::<i64>() as f64 / late.cost_ns.len().max(1) as f64;
    // Ranked by the mean over every step (a straggler in 2 of 10 steps saves less).
    let saving = late.cost_ns.iter().sum::<i64>() as f64 / n_steps;
    // The other ranks' exposed wait, each, over the late steps.
    let others: Vec<u32> = cx.ranks.iter().copied().filter(|r| !late.ranks.contains(r)).collect();
    let mut other_waits: Vec<f64> = Vec::new();
    for &r in &others {
        let v: Vec<f64> =
            cx.a.waits
                .iter()
                .filter(|w| late.steps.contains(&w.step))
                .filter_map(|w| w.ranks.iter().position(|&x| x == r).map(|k| w.exposed_wait_ns[k] as f64))
                .collect();
        if !v.is_empty() {
            other_waits.push(v.iter().sum::<f64>() / v.len() as f64);
        }
    }
    let rank = late.ranks[0];
    let cpu = cx.is_cpu(rank);
    let cause = classify(cx, rank, &late.steps, cost_late);
    let who = ranks_word(&late.ranks);
    let steps_said = format!("{} of {} steps", late.steps.len(), cx.all_steps.len().max(late.spread_steps));
    // One late rank or a late group: the sentences agree in number.
    let group = late.ranks.len() > 1;
    let (it, arrives) = if group { ("them", "arrive") } else { ("it", "arrives") };
    let waited = format!(
        "the other ranks each wait {} per step for {it} ({steps_said})",
        dur_range(other_waits.clone())
    );
    let mut evidence = BTreeMap::from([
        ("others_exposed_wait_ns_max".to_string(), other_waits.iter().copied().fold(0.0, f64::max)),
        ("others_exposed_wait_ns_min".to_string(), other_waits.iter().copied().fold(f64::INFINITY, f64::min)),
        ("cost_ns_per_late_step".to_string(), cost_late),
        ("late_steps".to_string(), late.steps.len() as f64),
        ("consistency".to_string(), late.steps.len() as f64 / late.spread_steps.max(1) as f64),
    ]);
    if !evidence["others_exposed_wait_ns_min"].is_finite() {
        evidence.insert("others_exposed_wait_ns_min".into(), 0.0);
    }
    let others_fix = if group {
        "The other ranks need no tuning: their time in the collectives is waiting for these ranks, not communication to overlap."
    } else {
        "The other ranks need no tuning: their time in the collectives is waiting for this rank, not communication to overlap."
    };
    let (id, message, fix, loc) = match &cause {
        Cause::Input { data } => {
            evidence.insert("data_loading_ns".into(), data.mine_ns);
            evidence.insert("others_data_loading_ns".into(), data.others_ns);
            let ratio = if data.others_ns > 0.0 { data.mine_ns / data.others_ns } else { f64::INFINITY };
            let times = if ratio.is_finite() { format!(" ({ratio:.1}×)") } else { String::new() };
            (
                "input_bound",
                format!(
                    "{who} is input-bound: its data loading takes {} per step against {} on the other ranks{times}, so {waited}.",
                    dur(data.mine_ns),
                    dur(data.others_ns)
                ),
                format!(
                    "Speed up {}'s input pipeline: more DataLoader workers (`num_workers`, `persistent_workers`, `prefetch_factor`), move decoding/augmentation off the training process, and check its storage or data shard (a slower disk, a remote read, larger samples). {others_fix}",
                    who.to_lowercase()
                ),
                None,
            )
        }
        Cause::Compute { compute, loc, same_work: Some(opt) } => {
            evidence.insert("compute_ns".into(), compute.mine_ns);
            evidence.insert("others_compute_ns".into(), compute.others_ns);
            evidence.insert("optimizer_ns".into(), opt.mine_ns);
            evidence.insert("others_optimizer_ns".into(), opt.others_ns);
            let ratio = if compute.others_ns > 0.0 { compute.mine_ns / compute.others_ns } else { 0.0 };
            let ropt = if opt.others_ns > 0.0 { opt.mine_ns / opt.others_ns } else { 0.0 };
            let device = if cpu { "CPU" } else { "GPU" };
            (
                "slow_device",
                format!(
                    "{who} is slower at the same work: {} of {device} compute per step against {} on the other ranks ({ratio:.2}×), and even its optimizer step, whose work does not depend on the batch, takes {ropt:.2}× as long; so {waited}.",
                    dur(compute.mine_ns),
                    dur(compute.others_ns)
                ),
                format!(
                    "Inspect {}'s {}: {}. Rebalancing data will not help: the work is the same. {others_fix}",
                    who.to_lowercase(),
                    if cpu { "host" } else { "GPU" },
                    if cpu { "other processes on its cores, CPU frequency scaling or throttling, a different CPU model, NUMA placement" } else { "clocks and temperature (`nvidia-smi -q -d CLOCK,PERFORMANCE,TEMPERATURE`), power capping, ECC or XID errors, other processes on the GPU, a different GPU model or PCIe/NVLink placement" }
                ),
                loc.as_ref().map(location),
            )
        }
        Cause::Compute { compute, loc, same_work: None } => {
            evidence.insert("compute_ns".into(), compute.mine_ns);
            evidence.insert("others_compute_ns".into(), compute.others_ns);
            let ratio = if compute.others_ns > 0.0 { compute.mine_ns / compute.others_ns } else { 0.0 };
            let place = loc
                .as_ref()
                .filter(|l| l.path.len() > 1)
                .map(|l| format!(", most of it in {}", where_words(l)))
                .unwrap_or_default();
            let device = if cpu { "CPU" } else { "GPU" };
            (
                "compute_imbalance",
                format!(
                    "{who} does more compute than the others: {} of {device} compute per step against {} on the other ranks ({ratio:.2}×){place}, so {waited}.",
                    dur(compute.mine_ns),
                    dur(compute.others_ns)
                ),
                format!(
                    "Give every rank the same work: equal per-rank batch sizes and sequence lengths (check the sampler, padding or bucketing by length), even sharding of embeddings or experts, no rank-dependent code paths. If {} runs the same shapes as the others, its {} is slower: {}. {others_fix}",
                    who.to_lowercase(),
                    if cpu { "host" } else { "device" },
                    if cpu { "look for other processes on its cores, CPU frequency limits or a different CPU model" } else { "check its clocks and temperature (nvidia-smi -q -d CLOCK,PERFORMANCE), ECC errors, and other processes on that GPU" }
                ),
                loc.as_ref().map(location),
            )
        }
        Cause::Stall { loc } => {
            let place = where_words(loc);
            let last = loc.path.last().map(|x| x.1.clone()).unwrap_or_default();
            evidence.insert("stall_ns".into(), loc.free.mine_ns);
            evidence.insert("others_stall_ns".into(), loc.free.others_ns);
            (
                "host_stall",
                format!(
                    "{who} stalls on the host: {} per step in {place} with no operator running, against {} on the other ranks ({} vs {} in the region), so {waited}.",
                    dur(loc.free.mine_ns),
                    dur(loc.free.others_ns),
                    dur(last.mine_ns),
                    dur(last.others_ns)
                ),
                format!(
                    "Find what {} does in {place} that the others do not: a sleep, blocking I/O (logging, checkpoint, file or network reads), a lock, garbage collection, or a rank-specific branch; move it out of the step or make it asynchronous. {others_fix}",
                    who.to_lowercase()
                ),
                Some(location(loc)),
            )
        }
        Cause::Sync { loc } => {
            let place = where_words(loc);
            (
                "straggler",
                format!(
                    "{who} arrives late at the collectives: it spends {} more per step blocked in host synchronization in {place} than the other ranks (its own device finishes later), so {waited}.",
                    dur(loc.sync.excess())
                ),
                format!(
                    "Look at what {}'s device runs before that synchronization: compare its kernels with another rank's in the timeline; remove the synchronization if it is not needed. {others_fix}",
                    who.to_lowercase()
                ),
                Some(location(loc)),
            )
        }
        Cause::Unknown { loc } => {
            let hint = loc
                .as_ref()
                .and_then(|l| {
                    let last = l.path.last()?;
                    (l.path.len() > 1).then(|| {
                        format!(
                            " The largest difference is in {} ({} vs {} per step).",
                            where_words(l),
                            dur(last.1.mine_ns),
                            dur(last.1.others_ns)
                        )
                    })
                })
                .unwrap_or_default();
            (
                "straggler",
                format!("{who} {arrives} last at the collectives, and {waited}.{hint}"),
                format!(
                    "Compare {}'s step with another rank's in the timeline (same step, aligned clocks) to find what it does longer; {}. {others_fix}",
                    who.to_lowercase(),
                    if cpu { "look for other processes on its host or a slower CPU" } else { "check its host and GPU (clocks, other processes), its input and its batch" }
                ),
                loc.as_ref().map(location),
            )
        }
    };
    let mut symptoms = vec!["straggler".to_string()];
    if other_waits.iter().any(|&w| w > cx.th.exposed_comm_ratio * cx.step_ns) {
        symptoms.push("exposed_wait".into());
    }
    Some(Finding {
        id: id.to_string(),
        severity: severity_for(saving, cx.step_ns),
        message,
        fix,
        ranks: late.ranks.clone(),
        steps: late.steps.clone(),
        evidence,
        symptoms,
        location: loc,
        impact_ns: saving as i64,
    })
}

fn arrival_jitter(cx: &Ctx<'_>) -> Option<Finding> {
    let waits: Vec<&StepWaits> = cx.a.waits.iter().filter(|w| w.cost_ns > 0).collect();
    if waits.len() < 2 {
        return None;
    }
    let n_steps = cx.all_steps.len().max(1) as f64;
    let saving = waits.iter().map(|w| w.cost_ns as f64).sum::<f64>() / n_steps;
    let lates: Vec<String> = waits.iter().map(|w| rank_list(&w.late)).collect();
    let per_rank: Vec<f64> = cx.per_rank_mean(|r| r.exposed_wait_ns).into_iter().map(|x| x.1).collect();
    Some(Finding {
        id: "arrival_jitter".into(),
        severity: severity_for(saving, cx.step_ns).min(Severity::Medium),
        message: format!(
            "The ranks wait for each other at the collectives ({} per step of exposed wait, each), but the last to arrive changes from step to step (rank {}): no single straggler.",
            dur_range(per_rank),
            lates.join(", then ")
        ),
        fix: if cx.cpu_only {
            "Look for noise on the hosts rather than for a slow rank: more processes or threads than cores (set `OMP_NUM_THREADS` / `torch.set_num_threads` so ranks do not oversubscribe the CPU), background work, garbage collection pauses; pin each rank to its own cores.".into()
        } else {
            "Look for noise rather than for a slow rank: Python garbage collection (`gc.freeze()` after warm-up), variable batch shapes, periodic host work (logging, checkpointing), CPU oversubscription of the launching threads; pin each rank to its own cores.".into()
        },
        ranks: cx.ranks.clone(),
        steps: waits.iter().map(|w| w.step).collect(),
        evidence: BTreeMap::from([("cost_ns_per_step".into(), saving)]),
        symptoms: vec!["exposed_wait".into()],
        location: None,
        impact_ns: saving as i64,
    })
}

fn exposed_comm(cx: &Ctx<'_>, small: bool) -> Option<Finding> {
    // Per rank, per step means.
    let et = cx.per_rank_mean(|r| r.exposed_transfer_ns);
    let tr = cx.per_rank_mean(|r| r.comm_transfer_ns);
    let cp = cx.per_rank_mean(|r| r.compute_ns);
    let wall = cx.per_rank_mean(|r| r.wall_ns);
    let comm = cx.per_rank_mean(|r| r.comm_ns);
    let mut flagged = Vec::new();
    let mut savings = Vec::new();
    let mut worst: f64 = 0.0;
    for (k, &(rank, e)) in et.iter().enumerate() {
        let w = wall.get(k).map_or(0.0, |x| x.1);
        if w <= 0.0 {
            continue;
        }
        // With perfect overlap only the transfer beyond the compute stays exposed.
        let hideable =
            (e - (tr.get(k).map_or(0.0, |x| x.1) - cp.get(k).map_or(0.0, |x| x.1)).max(0.0)).max(0.0);
        savings.push(hideable);
        if e / w > cx.th.exposed_comm_ratio {
            flagged.push(rank);
            worst = worst.max(e / w);
        }
    }
    if flagged.is_empty() {
        return None;
    }
    // Overlap removes most, not all, of the visible data-parallel communication cost: 60–80%
    // in practice (DOMAIN.md); the saving claimed is 70% of what could hide.
    let saving = OVERLAP_ACHIEVABLE * median_f(savings);
    let per_rank: Vec<f64> = et.iter().map(|x| x.1).collect();
    let hidden: Vec<f64> = et
        .iter()
        .zip(&tr)
        .filter(|(_, t)| t.1 > 0.0)
        .map(|(e, t)| (1.0 - e.1 / t.1).clamp(0.0, 1.0))
        .collect();
    let comm_share =
        comm.iter().zip(&wall).map(|(c, w)| if w.1 > 0.0 { c.1 / w.1 } else { 0.0 }).fold(0.0, f64::max);
    // Where the exposed transfer comes from: the collectives' origin with the most of it.
    let n_steps = cx.all_steps.len().max(1) as f64;
    struct Origin {
        exposed: f64,
        calls: f64,
        bytes: f64,
        phase: Phase,
        region: String,
    }
    let mut origins: BTreeMap<(String, CollKind), Origin> = BTreeMap::new();
    for o in cx.a.comm_origins.iter().filter(|o| cx.per_step.contains_key(&o.step)) {
        let e = origins.entry((o.path.clone(), o.kind)).or_insert(Origin {
            exposed: 0.0,
            calls: 0.0,
            bytes: 0.0,
            phase: o.phase,
            region: o.region.clone(),
        });
        e.exposed += o.exposed_transfer_ns as f64;
        e.calls += f64::from(o.count);
        e.bytes += o.bytes_total as f64;
    }
    let n_ranks = cx.ranks.len().max(1) as f64;
    let top = origins.iter().max_by(|a, b| a.1.exposed.total_cmp(&b.1.exposed));
    let mut origin_words = String::new();
    let mut one_bucket = None;
    if let Some(((_, kind), o)) = top {
        let calls = o.calls / n_ranks / n_steps;
        let mib = o.bytes / n_ranks / n_steps / 1048576.0;
        let region = &o.region;
        if !region.is_empty() && region != "ProfilerStep" {
            origin_words = format!(
                " Most of it is the {} issued in `{region}` ({calls:.0} call(s) per step, {mib:.1} MiB per step).",
                kind.name()
            );
        } else if o.exposed > 0.0 {
            origin_words = format!(
                " Most of it is {} ({calls:.0} call(s) per step, {mib:.1} MiB per step).",
                kind.name()
            );
        }
        let hidden_share = median_f(hidden.clone());
        if *kind == CollKind::AllReduce
            && o.phase == Phase::Backward
            && calls <= 2.0
            && hidden_share < 0.3
            && !small
        {
            one_bucket = Some((calls, mib));
        }
    }
    if let Some((calls, _)) = one_bucket {
        origin_words.push_str(&format!(
            " The gradients travel in {calls:.0} bucket(s) that are all_reduced only once backward is nearly done, so there is no compute left to hide them behind."
        ));
    }
    let bucket_advice = if let Some((_, mib)) = one_bucket {
        format!("split the gradients into smaller buckets so the first ones are all_reduced while backward still computes (DDP `bucket_cap_mb` around {:.0}, a quarter of the {mib:.0} MiB of gradients per step; the default 25 MiB holds them all)", (mib / 4.0).max(1.0))
    } else if small {
        "raise the bucket size as the small-collectives finding says (fewer, larger all_reduces launched during backward)".to_string()
    } else {
        "make sure gradient buckets fire during backward (DDP: avoid `find_unused_parameters=True` stalls; put the parameters used first in forward last in the bucket order), and for FSDP enable forward/backward prefetch".to_string()
    };
    let gpu_part = if cx.cpu_only {
        ""
    } else {
        " Keep NCCL on its own high-priority stream so compute kernels do not starve it."
    };
    Some(Finding {
        id: "exposed_comm".into(),
        severity: severity_for(saving, cx.step_ns),
        message: format!(
            "Communication transfer is not hidden behind compute: {} per step of transfer runs with no compute beside it on any rank (up to {} of the step; waiting for other ranks excluded), on {} of {} ranks; {} of the transfer is hidden.{origin_words}",
            dur_range(per_rank),
            pct(worst),
            flagged.len(),
            cx.ranks.len(),
            pct(median_f(hidden.clone()))
        ),
        fix: format!(
            "Overlap the transfer with compute: {bucket_advice}.{gpu_part} If the transfer itself is slow for its size, see the Fabric evidence (nccl-tests, NCCL_DEBUG)."
        ),
        ranks: flagged,
        steps: cx.all_steps.clone(),
        evidence: BTreeMap::from([
            ("max_exposed_transfer_ratio".into(), worst),
            ("comm_share_max".into(), comm_share),
            ("hidden_transfer_share".into(), median_f(hidden)),
            ("threshold".into(), cx.th.exposed_comm_ratio),
        ]),
        symptoms: vec!["low_overlap".into(), "comm_heavy".into()],
        location: None,
        impact_ns: saving as i64,
    })
}

/// Small collectives the host blocks on in the middle of the step (a metric all_reduce followed
/// by `.item()`, a barrier): each is a synchronization point of every rank.
fn blocking_collectives(cx: &Ctx<'_>) -> Vec<Finding> {
    const SMALL_BYTES: i64 = 64 * 1024;
    let n_steps = cx.all_steps.len().max(1) as f64;
    let mut groups: BTreeMap<(String, CollKind), Vec<&diagnose::OriginRow>> = BTreeMap::new();
    for o in cx.a.comm_origins.iter().filter(|o| cx.per_step.contains_key(&o.step)) {
        // A stage blocked in a receive waits for its neighbour: that is the pipeline's
        // bubble (`pipeline_bubble`), not a host synchronization to move.
        if o.region.is_empty() || o.region == "ProfilerStep" || o.kind.is_p2p() {
            continue;
        }
        groups.entry((o.region.clone(), o.kind)).or_default().push(o);
    }
    let mut out = Vec::new();
    for ((region, kind), rows) in groups {
        let calls: u32 = rows.iter().map(|r| r.count).sum();
        let bytes: i64 = rows.iter().map(|r| r.bytes_total).sum();
        let total: i64 = rows.iter().map(|r| r.dur_ns).sum();
        let blocked: i64 = rows.iter().map(|r| r.blocked_ns).sum();
        if calls == 0
            || total <= 0
            || bytes / i64::from(calls) > SMALL_BYTES
            || (blocked as f64) < 0.5 * total as f64
        {
            continue;
        }
        let mut by_rank: BTreeMap<u32, (f64, f64, f64)> = BTreeMap::new();
        for r in &rows {
            let e = by_rank.entry(r.rank).or_default();
            e.0 += r.blocked_ns as f64 / n_steps;
            e.1 += r.exposed_transfer_ns as f64 / n_steps;
            e.2 += f64::from(r.count) / n_steps;
        }
        if by_rank.len() * 2 <= cx.ranks.len() {
            continue;
        }
        // Taking the synchronizations out saves what the region costs the rank that reaches
        // it last: that rank waits at none of them for a late peer, so all its time there
        // (issuing, transfer, `.item()`, and the waits each call's own jitter adds) is on the
        // step's path. The others' extra time is their wait for that rank, which would only
        // move to the next collective. Per step: the least inclusive time over the ranks.
        let mut per_step: BTreeMap<u32, f64> = BTreeMap::new();
        for r in cx.a.regions.iter().filter(|r| r.name == region && cx.per_step.contains_key(&r.step)) {
            let v = per_step.entry(r.step).or_insert(f64::INFINITY);
            *v = v.min(r.inclusive_ns as f64);
        }
        let transfer = median_f(by_rank.values().map(|v| v.1).collect());
        let saving = if per_step.is_empty() {
            transfer
        } else {
            (per_step.values().sum::<f64>() / n_steps).max(transfer)
        };
        let blocked_each = median_f(by_rank.values().map(|v| v.0).collect());
        let per_step = median_f(by_rank.values().map(|v| v.2).collect());
        let path = rows.first().map(|r| r.path.clone()).unwrap_or_default();
        let inside = path
            .split(" > ")
            .filter(|n| *n != "ProfilerStep" && *n != region.as_str())
            .last()
            .map(|p| format!(" (inside `{p}`)"))
            .unwrap_or_default();
        let size = bytes as f64 / f64::from(calls);
        let size_words =
            if size < 1024.0 { format!("{size:.0} B") } else { format!("{:.1} KiB", size / 1024.0) };
        out.push(Finding {
            id: "host_sync".into(),
            severity: severity_for(saving, cx.step_ns),
            message: format!(
                "Every rank stops the step on {per_step:.0} blocking {} call(s) per step in `{region}`{inside}, of {size_words} each: the host is blocked {} per step in them, and `{region}` costs {} per step even on the rank that gets there last (the others' extra time there is waiting for it).",
                kind.name(),
                dur(blocked_each),
                dur(saving)
            ),
            fix: if cx.cpu_only {
                format!("Take the synchronization out of the step: gather what `{region}` logs into one tensor and reduce it once, every N steps, or with `async_op=True` and read the result (`.item()`) a step later.")
            } else {
                format!("Take the synchronization out of the step: gather what `{region}` logs into one tensor and reduce it once, every N steps, or with `async_op=True` and read it a step later; every `.item()` / `.cpu()` on a device tensor also drains the device queue.")
            },
            ranks: by_rank.keys().copied().collect(),
            steps: cx.all_steps.clone(),
            evidence: BTreeMap::from([
                ("calls_per_step".into(), per_step),
                ("bytes_per_call".into(), size),
                ("blocked_ns".into(), blocked_each),
                ("transfer_ns".into(), transfer),
                ("region_active_ns".into(), saving),
            ]),
            symptoms: vec!["exposed_comm".into()],
            location: Some(Location {
                regions: path.split(" > ").map(str::to_string).collect(),
                phase: rows.first().map_or(Phase::Other, |r| r.phase),
                rank_ns: blocked_each as i64,
                others_ns: 0,
                free_excess_ns: 0,
                ops_excess_ns: 0,
                sync_excess_ns: 0,
                device_excess_ns: 0,
            }),
            impact_ns: saving as i64,
        });
    }
    out
}

/// The trace's own cost model of one kind of collective.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    pub kind: CollKind,
    pub pg: String,
    /// Fixed cost per call (µs) and asymptotic algorithm bandwidth (GB/s) of T ≈ α + S/B.
    pub alpha_us: f64,
    pub bw_alg_gbps: f64,
    pub points: u32,
    pub rms_rel_err: f64,
}

fn small_collectives(cx: &Ctx<'_>, ops: &[Op], exclude_origins: &[String]) -> Vec<(Finding, CollKind)> {
    let n_steps = cx.all_steps.len().max(1) as f64;
    // Per kind, group and origin: a loss all_reduce issued from the training loop is not a
    // gradient bucket, and blocking host synchronizations have their own finding.
    let mut groups: BTreeMap<(CollKind, String, String), Vec<&Op>> = BTreeMap::new();
    for o in ops.iter().filter(|o| {
        o.ranks.len() >= 2 && !matches!(o.kind, CollKind::Send | CollKind::Recv | CollKind::SendRecv)
    }) {
        if exclude_origins.contains(&o.origin) {
            continue;
        }
        groups.entry((o.kind, o.pg.clone(), o.origin.clone())).or_default().push(o);
    }
    let mut out = Vec::new();
    for ((kind, pg, _origin), v) in groups {
        let mut sizes: Vec<i64> = v.iter().filter_map(|o| o.bytes).filter(|&b| b > 0).collect();
        if sizes.is_empty() {
            continue;
        }
        sizes.sort_unstable();
        let med = sizes[(sizes.len() - 1) / 2] as f64;
        // Calls of unknown size are not counted: they may be anything.
        let per_step = v.iter().filter(|o| o.bytes.is_some_and(|b| b > 0)).count() as f64 / n_steps;
        if med >= cx.th.small_collective_bytes || per_step < cx.th.small_collectives_per_step {
            continue;
        }
        let pts: Vec<(f64, f64)> =
            v.iter().filter_map(|o| Some((o.bytes? as f64, o.transfer_ns as f64 / 1e3))).collect();
        let group = v.iter().map(|o| o.group_size).max().unwrap_or(2);
        // Calls of one size cannot tell the fixed cost from the bandwidth: then the fit pools
        // every group of the same kind and size (the same fabric), e.g. a loss all_reduce of a
        // few bytes next to 1 MiB buckets.
        let pooled: Vec<(f64, f64)> = ops
            .iter()
            .filter(|o| o.kind == kind && o.group_size == group && o.ranks.len() >= 2)
            .filter_map(|o| Some((o.bytes? as f64, o.transfer_ns as f64 / 1e3)))
            .collect();
        let factor = Some(busbw_factor(kind, group));
        let (fit, pooled_used) = match crate::nccl::fit::fit_latency_bandwidth(&pts, factor) {
            Ok(f) => (f, false),
            Err(_) => match crate::nccl::fit::fit_latency_bandwidth(&pooled, factor) {
                Ok(f) => (f, true),
                Err(_) => continue,
            },
        };
        let span = sizes.last().copied().unwrap_or(1) as f64 / sizes[0].max(1) as f64;
        let caveat = if pooled_used {
            " (fitted over every group's calls of this kind: these are all one size)".to_string()
        } else if span < 2.0 {
            format!(
                " (sizes span only {span:.1}×, so the split between fixed cost and bandwidth is uncertain)"
            )
        } else {
            String::new()
        };
        let bytes_per_step = sizes.iter().sum::<i64>() as f64 / n_steps;
        let fewer = (bytes_per_step / cx.th.bucket_bytes.max(1.0)).ceil().max(1.0);
        let alpha_ns = fit.alpha_us * 1e3;
        let projected = (per_step - fewer).max(0.0) * alpha_ns;
        // Only what is exposed costs step time: bounded by the ranks' exposed transfer.
        let exposed =
            median_f(cx.per_rank_mean(|r| r.exposed_transfer_ns).into_iter().map(|x| x.1).collect());
        let saving = projected.min(exposed);
        let mib = |b: f64| b / 1048576.0;
        let hist = size_histogram(&sizes);
        out.push((
            Finding {
                id: "small_collectives".into(),
                severity: severity_for(saving, cx.step_ns),
                message: format!(
                    "{per_step:.0} {} calls per step of {:.2}–{:.2} MiB (median {:.2} MiB; {hist}): by this trace's own cost model (T ≈ {} + S / {:.2} GB/s over {} calls, rms error {:.0}%{caveat}), each pays {} of fixed cost, {} per step; {:.0} calls of {:.0} MiB would pay {}.",
                    kind.name(),
                    mib(sizes[0] as f64),
                    mib(*sizes.last().unwrap_or(&0) as f64),
                    mib(med),
                    dur(alpha_ns),
                    fit.bw_alg_gbps,
                    fit.points,
                    100.0 * fit.rms_rel_err,
                    dur(alpha_ns),
                    dur(per_step * alpha_ns),
                    fewer,
                    mib(cx.th.bucket_bytes),
                    dur(fewer * alpha_ns)
                ),
                fix: "Use fewer, larger collectives: raise DDP `bucket_cap_mb` (default 25; the first bucket stays small so communication still starts early in backward), DeepSpeed `reduce_bucket_size` / `allgather_bucket_size`, coarser FSDP wrapping, or coalesce small tensors (`torch.distributed` coalescing, flattening before all_reduce).".into(),
                ranks: cx.ranks.clone(),
                steps: cx.all_steps.clone(),
                evidence: BTreeMap::from([
                    ("calls_per_step".into(), per_step),
                    ("median_bytes".into(), med),
                    ("alpha_ns".into(), alpha_ns),
                    ("bw_alg_gbps".into(), fit.bw_alg_gbps),
                    ("projected_calls_per_step".into(), fewer),
                    ("fixed_cost_ns_per_step".into(), per_step * alpha_ns),
                ]),
                symptoms: Vec::new(),
                location: None,
                impact_ns: saving as i64,
            },
            kind,
        ));
        let _ = &pg;
    }
    out
}

/// "6 × 1–2 MiB, 12 × 2–4 MiB": counts per power-of-two size band.
fn size_histogram(sorted: &[i64]) -> String {
    let mut bands: BTreeMap<u32, usize> = BTreeMap::new();
    for &b in sorted {
        let band = 63 - (b.max(1) as u64).leading_zeros();
        *bands.entry(band).or_default() += 1;
    }
    let human = |p: u32| {
        let b = 1u64 << p;
        if b >= 1 << 30 {
            format!("{} GiB", b >> 30)
        } else if b >= 1 << 20 {
            format!("{} MiB", b >> 20)
        } else if b >= 1 << 10 {
            format!("{} KiB", b >> 10)
        } else {
            format!("{b} B")
        }
    };
    bands.iter().map(|(&p, &n)| format!("{n} × {}–{}", human(p), human(p + 1))).collect::<Vec<_>>().join(", ")
}

fn input_bound_all(cx: &Ctx<'_>) -> Option<Finding> {
    // CPU ranks: the DataLoader runs on the training thread, the whole of it is step time;
    // GPU ranks: what costs is the device idle while the host loads (`input_ns`).
    let share: Vec<(u32, f64, f64)> = cx
        .per_rank_mean(|r| {
            if r.source == super::breakdown::MetricsFrom::Cpu {
                r.data_loading_ns
            } else {
                r.input_ns
            }
        })
        .into_iter()
        .map(|(rank, v)| (rank, v, v / cx.rank_step_ns(rank).max(1.0)))
        .collect();
    let flagged: Vec<u32> = share.iter().filter(|x| x.2 > cx.th.input_ratio).map(|x| x.0).collect();
    if flagged.len() * 2 <= cx.ranks.len() {
        return None;
    }
    let saving = median_f(share.iter().map(|x| x.1).collect());
    let worst = share.iter().map(|x| x.2).fold(0.0, f64::max);
    Some(Finding {
        id: "input_bound".into(),
        severity: severity_for(saving, cx.step_ns),
        message: format!(
            "Every rank waits for its input: data loading takes {} per step ({} of the step at most) on {} of {} ranks{}.",
            dur_range(share.iter().map(|x| x.1).collect()),
            pct(worst),
            flagged.len(),
            cx.ranks.len(),
            if cx.cpu_only { ", on the training thread" } else { " while the device has nothing to do" }
        ),
        fix: "Overlap input with training: DataLoader workers (`num_workers` > 0, `persistent_workers=True`, `prefetch_factor`), `pin_memory=True` with non-blocking copies, decoding and augmentation moved off the training process or onto the device, pre-encoded data.".into(),
        ranks: flagged,
        steps: cx.all_steps.clone(),
        evidence: BTreeMap::from([("max_input_ratio".into(), worst), ("threshold".into(), cx.th.input_ratio)]),
        symptoms: Vec::new(),
        location: None,
        impact_ns: saving as i64,
    })
}

fn cpu_bound(cx: &Ctx<'_>, exclude: &[u32]) -> Option<Finding> {
    let bad: Vec<(u32, f64, f64)> = cx
        .per_rank_mean(|r| r.cpu_bound_ns)
        .into_iter()
        .filter(|(r, _)| !cx.is_cpu(*r) && !exclude.contains(r))
        .map(|(r, v)| (r, v, v / cx.rank_step_ns(r).max(1.0)))
        .filter(|x| x.2 > cx.th.cpu_bound_ratio)
        .collect();
    if bad.is_empty() {
        return None;
    }
    let worst = bad.iter().map(|x| x.2).fold(0.0, f64::max);
    let saving = median_f(bad.iter().map(|x| x.1).collect());
    Some(Finding {
        id: "cpu_bound".into(),
        severity: severity_for(saving, cx.step_ns),
        message: format!(
            "The GPU waits for the CPU to launch work: {} per step (up to {} of the step) of device idle ends with a kernel whose launch came after the device ran dry, on {} rank(s).",
            dur_range(bad.iter().map(|x| x.1).collect()),
            pct(worst),
            bad.len()
        ),
        fix: "Cut launch overhead: capture the step with CUDA graphs, fuse small kernels with `torch.compile`, increase work per kernel (batch size), and move Python overhead (logging, `.item()`) out of the step.".into(),
        ranks: bad.iter().map(|x| x.0).collect(),
        steps: cx.all_steps.clone(),
        evidence: BTreeMap::from([("max_cpu_bound_ratio".into(), worst), ("threshold".into(), cx.th.cpu_bound_ratio)]),
        symptoms: Vec::new(),
        location: None,
        impact_ns: saving as i64,
    })
}

fn host_sync(cx: &Ctx<'_>, exclude: &[u32]) -> Option<Finding> {
    // A host that waits for a busy device costs nothing; it costs when the device then idles
    // until the host has launched again: bounded by the CPU-bound idle.
    let sync = cx.per_rank_mean(|r| r.host_sync_ns);
    let cpu_b = cx.per_rank_mean(|r| r.cpu_bound_ns);
    let bad: Vec<(u32, f64, f64)> = sync
        .iter()
        .zip(&cpu_b)
        .filter(|((r, _), _)| !cx.is_cpu(*r) && !exclude.contains(r))
        .map(|(&(r, s), &(_, c))| (r, s.min(c), s / cx.rank_step_ns(r).max(1.0)))
        .filter(|x| x.2 > cx.th.host_sync_ratio && x.1 > 0.0)
        .collect();
    if bad.is_empty() {
        return None;
    }
    let saving = median_f(bad.iter().map(|x| x.1).collect());
    let worst = bad.iter().map(|x| x.2).fold(0.0, f64::max);
    Some(Finding {
        id: "host_sync".into(),
        severity: severity_for(saving, cx.step_ns),
        message: format!(
            "The host blocks in device synchronization for up to {} of the step, and the device then idles until new work is launched ({} per step).",
            pct(worst),
            dur_range(bad.iter().map(|x| x.1).collect())
        ),
        fix: "Remove synchronizations from the step: `.item()`, `.cpu()`, printing tensors, `torch.cuda.synchronize()`, boolean masks that need a host copy; log metrics every N steps or asynchronously.".into(),
        ranks: bad.iter().map(|x| x.0).collect(),
        steps: cx.all_steps.clone(),
        evidence: BTreeMap::from([("max_host_sync_ratio".into(), worst), ("threshold".into(), cx.th.host_sync_ratio)]),
        symptoms: vec!["cpu_bound".into()],
        location: None,
        impact_ns: saving as i64,
    })
}

fn allocator_churn(cx: &Ctx<'_>) -> Option<Finding> {
    let a = cx.a;
    if a.allocations.is_empty() {
        return None;
    }
    let n_steps = cx.all_steps.len().max(1) as f64;
    let steps_after_first = (n_steps - 1.0).max(1.0);
    let mut per_rank: BTreeMap<u32, (usize, i64)> = BTreeMap::new();
    for x in &a.allocations {
        let e = per_rank.entry(x.rank).or_default();
        e.0 += x.calls;
        e.1 += x.time_ns;
    }
    let worst = per_rank.values().map(|v| v.0).max().unwrap_or(0) as f64 / steps_after_first;
    if worst < cx.th.alloc_calls_per_step {
        return None;
    }
    let saving = median_f(per_rank.values().map(|v| v.1 as f64 / steps_after_first).collect());
    let mut steps: Vec<u32> = a.allocations.iter().map(|x| x.step).collect();
    steps.sort_unstable();
    steps.dedup();
    Some(Finding {
        id: "allocator_churn".into(),
        severity: severity_for(saving, cx.step_ns).min(Severity::Medium),
        message: format!(
            "cudaMalloc/cudaFree run inside steps after warm-up ({worst:.1} calls and {} per step on the worst rank): the caching allocator is fragmenting or being emptied.",
            dur(per_rank.values().map(|v| v.1 as f64 / steps_after_first).fold(0.0, f64::max))
        ),
        fix: "Set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` (or tune `max_split_size_mb`), keep shapes fixed (pad variable lengths), and avoid `torch.cuda.empty_cache()` in the loop.".into(),
        ranks: per_rank.keys().copied().collect(),
        steps,
        evidence: BTreeMap::from([("calls_per_step".into(), worst)]),
        symptoms: Vec::new(),
        location: None,
        impact_ns: saving as i64,
    })
}

fn below_fabric(cx: &Ctx<'_>) -> Vec<Finding> {
    let a = cx.a;
    let n_steps = cx.all_steps.len().max(1) as f64;
    let exposed = median_f(cx.per_rank_mean(|r| r.exposed_transfer_ns).into_iter().map(|x| x.1).collect());
    let mut out = Vec::new();
    for c in a.fabric.iter().filter(|c| {
        c.comparable && c.basis == super::collectives::BwBasis::Transfer && c.fraction < cx.th.fabric_fraction
    }) {
        let per_step: f64 = a
            .collectives
            .iter()
            .filter(|x| x.kind == c.kind && x.pg == c.pg)
            .map(|x| x.transfer_mean_ns.unwrap_or(0) as f64 * x.count as f64)
            .sum::<f64>()
            / n_steps;
        // What a full-speed transfer would save, of what is exposed.
        let saving = (per_step * (1.0 - c.fraction)).min(exposed);
        out.push(Finding {
            id: "below_fabric".into(),
            severity: severity_for(saving, cx.step_ns),
            message: c.message.clone(),
            fix: "The fabric can do better than the job gets: check that the job uses the same NCCL settings and transport as the benchmark (NCCL_DEBUG=INFO: NET/IB vs NET/Socket, GDRDMA), that collectives are not split into small chunks (bucket sizes), that compute kernels do not starve NCCL of SMs (NCCL_MIN_NCHANNELS / stream priorities), and that the process group spans the same topology.".into(),
            ranks: cx.ranks.clone(),
            steps: cx.all_steps.clone(),
            evidence: BTreeMap::from([
                ("fraction".into(), c.fraction),
                ("achieved_busbw_gbps".into(), c.achieved_busbw_gbps),
                ("fabric_busbw_gbps".into(), c.fabric_busbw_gbps),
                ("bytes".into(), c.bytes as f64),
            ]),
            symptoms: Vec::new(),
            location: None,
            impact_ns: saving as i64,
        });
    }
    out
}

fn step_jitter(cx: &Ctx<'_>, found: &[Finding]) -> Option<Finding> {
    let jittery: Vec<(u32, f64, f64)> =
        cx.a.rank_totals
            .iter()
            .filter(|t| t.steps >= 3)
            .filter_map(|t| {
                let s = t.step_time.as_ref()?;
                Some((t.rank, s.jitter, (s.max_ns - s.p50_ns) as f64))
            })
            .filter(|x| x.1 > cx.th.step_jitter)
            .collect();
    if jittery.is_empty() {
        return None;
    }
    // Explained when a cause found above already covers the slow steps.
    if found.iter().any(|f| {
        matches!(
            f.id.as_str(),
            "input_bound" | "host_stall" | "compute_imbalance" | "straggler" | "arrival_jitter"
        )
    }) {
        return None;
    }
    let worst = jittery.iter().map(|x| x.1).fold(0.0, f64::max);
    let n = cx.all_steps.len().max(1) as f64;
    // The slow steps' excess over the median, spread over every step.
    let saving = median_f(jittery.iter().map(|x| x.2).collect()) / n;
    Some(Finding {
        id: "step_jitter".into(),
        severity: Severity::Low,
        message: format!(
            "Step time varies by {} (standard deviation / mean) on the worst rank, with no rank consistently late: look at the slowest steps, not the mean.",
            pct(worst)
        ),
        fix: "Find what differs in the slow steps: periodic work (checkpointing, evaluation, logging), data loading stalls, garbage collection.".into(),
        ranks: jittery.iter().map(|x| x.0).collect(),
        steps: cx.all_steps.clone(),
        evidence: BTreeMap::from([("max_jitter".into(), worst), ("threshold".into(), cx.th.step_jitter)]),
        symptoms: Vec::new(),
        location: None,
        impact_ns: saving as i64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(dur(401_000_000.0), "401 ms");
        assert_eq!(dur(2_500_000.0), "2.5 ms");
        assert_eq!(dur(45_000.0), "45 µs");
        assert_eq!(dur(8_020_000_000.0), "8.02 s");
        assert_eq!(dur_range(vec![365e6, 561e6]), "365–561 ms");
        assert_eq!(dur_range(vec![400e6, 401e6]), "400 ms");
        assert_eq!(rank_list(&[0, 1, 3]), "0, 1 and 3");
    }

    #[test]
    fn size_bands() {
        assert_eq!(size_histogram(&[1 << 20, 3 << 20, 3 << 20]), "1 × 1 MiB–2 MiB, 2 × 2 MiB–4 MiB");
    }
}
