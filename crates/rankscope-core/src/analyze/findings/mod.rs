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

pub use crate::finding::{Evidence, EvidenceKey, Finding, FindingId, Location, Severity, Thresholds};
pub(crate) use crate::words::{dur, dur_range, pct, rank_list, ranks_word};
use EvidenceKey as K;

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
    let unknown_cost = |f: &Finding| f.evidence.contains(K::FixedCostUnknown);
    let small_calls = if small.iter().any(|f| !unknown_cost(f) && f.impact_ns as f64 >= floor) {
        SmallCalls::Reported
    } else if let Some(f) = small.iter().find(|f| unknown_cost(f)) {
        SmallCalls::Unquantified(f.evidence.or_zero(K::CallsPerStep), f.evidence.or_zero(K::MedianBytes))
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
                s.symptoms.push(FindingId::ExposedComm);
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
            let ev = |k| late.evidence.or_zero(k);
            ev(K::DataLoadingNs) - ev(K::OthersDataLoadingNs) < ev(K::OthersDataLoadingNs)
        };
        match out.iter().position(|f| f.id == FindingId::InputBound) {
            Some(k) if shared_bigger(&out[k]) => {
                let late = out.remove(k);
                let ev = |k| late.evidence.or_zero(k);
                all.message = format!(
                    "{} {}, the slowest, also makes the other ranks wait {} per step for it ({} of {} steps).",
                    all.message,
                    ranks_word(&late.ranks),
                    dur_range(vec![ev(K::OthersExposedWaitNsMin), ev(K::OthersExposedWaitNsMax)]),
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
    out.sort_by(|x, y| {
        y.impact_ns.cmp(&x.impact_ns).then(y.severity.cmp(&x.severity)).then(x.id.as_str().cmp(y.id.as_str()))
    });
    // The job stopped: nothing else matters until it runs.
    // One divergence is the cause; the later ones are usually its consequences.
    stuck.into_iter().take(1).chain(out).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
