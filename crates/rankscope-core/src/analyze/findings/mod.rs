//! Findings: causes, each with its evidence, the rank it concerns, the fix and the time it
//! would save, from one attribution pass ([`super::attribution`]; shared/DOMAIN.md, last section).
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
//!
//! **Layout.** This file holds the types, the thresholds and the order of reasoning
//! ([`findings`]); the causes live by what they concern: `late` (waiting), `comm`
//! (communication), `host` (the host in the steady state) and `course` (hangs, mismatches,
//! the pipeline bubble, step-time spread).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::attribution::{self, Compare, Diff, Located, StepWaits};
use super::breakdown::StepRank;
use super::collectives::{busbw_factor, Op};
use super::regions::Phase;
use super::stats::median_f;
use super::Analysis;
use crate::model::CollKind;

mod comm;
mod course;
mod host;
mod late;

use comm::*;
use course::*;
use host::*;
use late::*;

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

/// The one ladder ([`crate::model::Severity`]), spelled `info`, `low`, `medium`, `high` here.
pub use crate::model::Severity;

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

pub(crate) fn ranks_word(r: &[u32]) -> String {
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
    /// Ranks whose metrics come from the CPU (looked up per rank: a set, not a scan).
    cpu_ranks: BTreeSet<u32>,
    /// Per rank: the mean of its steps' wall time (computed once; read per rank).
    rank_step: BTreeMap<u32, f64>,
}

impl Ctx<'_> {
    fn is_cpu(&self, rank: u32) -> bool {
        self.cpu_ranks.contains(&rank)
    }

    /// Per rank: the mean over its steps of `f`.
    fn per_rank_mean(&self, f: impl Fn(&StepRank) -> i64) -> Vec<(u32, f64)> {
        self.per_rank_mean_step(|r, _| f(r))
    }

    /// Per rank: the mean over its steps of `f(row, step)`.
    fn per_rank_mean_step(&self, f: impl Fn(&StepRank, u32) -> i64) -> Vec<(u32, f64)> {
        let mut acc: BTreeMap<u32, (f64, usize)> = BTreeMap::new();
        for (&step, rows) in &self.per_step {
            for r in rows {
                let e = acc.entry(r.rank).or_default();
                e.0 += f(r, step) as f64;
                e.1 += 1;
            }
        }
        acc.into_iter().map(|(r, (s, n))| (r, s / n.max(1) as f64)).collect()
    }

    fn rank_step_ns(&self, rank: u32) -> f64 {
        self.rank_step.get(&rank).copied().unwrap_or(self.step_ns)
    }

    fn floor_ns(&self) -> f64 {
        (self.th.min_saving_ratio * self.step_ns).max(20_000.0)
    }
}

/// Every finding of the analysis, ranked.
pub fn findings(a: &Analysis, ops: &[Op], th: &Thresholds) -> Vec<Finding> {
    // A hang or a mismatch comes first, and the steps it stopped are no steady state: the
    // other findings are read on the steps that ran to the end.
    let stuck = mismatches(a, ops);
    let stopped: BTreeSet<u32> = if stuck.is_empty() {
        BTreeSet::new()
    } else {
        ops.iter()
            .filter(|o| o.partial)
            .map(|o| o.step)
            .chain(stuck.iter().flat_map(|f| f.steps.clone()))
            .collect()
    };
    let mut per_step: BTreeMap<u32, Vec<&StepRank>> = BTreeMap::new();
    for s in a.steps.iter().filter(|s| !stopped.contains(&s.step)) {
        per_step.insert(s.step, s.per_rank.iter().collect());
    }
    let walls: Vec<f64> = per_step.values().flat_map(|v| v.iter().map(|r| r.wall_ns as f64)).collect();
    let step_ns = if walls.is_empty() { 0.0 } else { walls.iter().sum::<f64>() / walls.len() as f64 };
    let mut cx = Ctx {
        a,
        th,
        all_steps: per_step.keys().copied().collect(),
        per_step,
        step_ns,
        ranks: a.ranks.iter().map(|r| r.rank).collect(),
        cpu_only: !a.ranks.is_empty()
            && a.ranks.iter().all(|r| r.metrics_from == super::breakdown::MetricsFrom::Cpu),
        cpu_ranks: a
            .ranks
            .iter()
            .filter(|r| r.metrics_from == super::breakdown::MetricsFrom::Cpu)
            .map(|r| r.rank)
            .collect(),
        rank_step: BTreeMap::new(),
    };
    cx.rank_step = cx.per_rank_mean(|r| r.wall_ns).into_iter().collect();
    let mut out: Vec<Finding> = Vec::new();
    // A stage stalling on its host is the cause of the bubble it makes the others wait in:
    // the bubble keeps only what is left.
    let stall = pipeline_stall(&cx);
    let mut bubble = pipeline_bubble(&cx);
    if let (Some(b), Some(st)) = (bubble.as_mut(), stall.as_ref()) {
        b.impact_ns = (b.impact_ns - st.impact_ns).max(0);
        b.message.push_str(&format!(
            " Most of it is rank {}'s own host time (`host_stall`).",
            st.ranks.first().copied().unwrap_or(0)
        ));
    }
    out.extend(stall);
    out.extend(bubble);
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
    // Only a finding that will be reported can be referred to; many small calls of unknown
    // fixed cost are said in the exposed-transfer advice instead.
    let unknown_cost = |f: &Finding| f.evidence.contains_key("fixed_cost_unknown");
    let small_calls = if small.iter().any(|f| !unknown_cost(f) && f.impact_ns as f64 >= floor) {
        SmallCalls::Reported
    } else if let Some(f) = small.iter().find(|f| unknown_cost(f)) {
        let ev = |k: &str| f.evidence.get(k).copied().unwrap_or(0.0);
        SmallCalls::Unquantified(ev("calls_per_step"), ev("median_bytes"))
    } else {
        SmallCalls::None
    };
    small.retain(|f| !unknown_cost(f));
    let small_reported = matches!(small_calls, SmallCalls::Reported);
    // Small collectives are the cause of (part of) the exposed transfer: one finding for it,
    // and exposed communication only for what fewer, larger calls would leave exposed.
    if let Some(mut f) = exposed_comm(&cx, small_calls) {
        f.impact_ns = (f.impact_ns - blocking_saving).max(0);
        if small_reported {
            f.impact_ns = (f.impact_ns - small_saving).max(0);
            for s in &mut small {
                s.symptoms.push("exposed_comm".into());
            }
        }
        out.push(f);
    }
    out.extend(small);
    out.extend(blocking);
    // A late rank input-bound, and every rank input-bound: which is the cause is which part is
    // bigger, what that rank loads beyond the others (its own problem: its shard, its disk) or
    // what every rank loads (the job's input pipeline). When the shared part is, the late
    // rank's extra wait is a part of the same fix (more workers everywhere), said inside the
    // job-wide finding rather than instead of it.
    if let Some(mut all) = input_bound_all(&cx) {
        let shared_bigger = |late: &Finding| {
            let ev = |k: &str| late.evidence.get(k).copied().unwrap_or(0.0);
            ev("data_loading_ns") - ev("others_data_loading_ns") < ev("others_data_loading_ns")
        };
        match out.iter().position(|f| f.id == "input_bound") {
            Some(k) if shared_bigger(&out[k]) => {
                let late = out.remove(k);
                let ev = |k: &str| late.evidence.get(k).copied().unwrap_or(0.0);
                all.message = format!(
                    "{} {}, the slowest, also makes the other ranks wait {} per step for it ({} of {} steps).",
                    all.message,
                    ranks_word(&late.ranks),
                    dur_range(vec![ev("others_exposed_wait_ns_min"), ev("others_exposed_wait_ns_max")]),
                    late.steps.len(),
                    cx.all_steps.len()
                );
                all.symptoms.extend(late.symptoms);
                all.location = late.location;
                out.push(all);
            }
            Some(_) => {}
            None => out.push(all),
        }
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
