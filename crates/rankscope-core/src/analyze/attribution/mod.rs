//! Attribution: from the per rank × step figures to causes, as an expert reads a slow step
//! (shared/DOMAIN.md, last section).
//!
//! 1. **Who waits for whom.** Every rank's communication is split into transfer and wait
//!    ([`super::waits`]). Per step, the ranks with the least wait are the step's **late group**
//!    (within a quarter of the spread from the least); the others waited for them. The time the
//!    late group costs the step is what the *least-waiting* of the other ranks waited beyond the
//!    late group, in exposed (not under compute) wait: that much would come off the step if the
//!    late ranks arrived with the others. It is a per-rank figure, bounded by the step.
//! 2. **A consistent straggler** is a rank in the late group of at least
//!    [`crate::finding::Thresholds::straggler_consistency`] of the steps that had a measurable
//!    spread. A late group that changes from step to step is arrival jitter, not a straggler.
//! 3. **Where the straggler's time went**: the same step on the straggler and on the others
//!    (the median over them), compared region by region ([`super::regions`]): annotations by
//!    name and parent, phases, device compute. Time the main thread spent idle or blocked while
//!    the rank's collective waited is taken out first (`active_ns`), so the waiting ranks' long
//!    `backward` does not hide the straggler's stall. The cause is the comparison that explains
//!    most of the excess: data loading (`input_bound`), more device or operator time
//!    (`compute_imbalance`), or time inside an annotation with no operator running
//!    (`host_stall`), found by descending from the step into the child region that explains at
//!    least half of its parent's excess.
//!
//! By concern: this module holds the region and phase rows per rank × step and the late group's
//! cost; [`compare`] compares a rank's step with the others' and descends to the region that
//! explains it; [`origins`] says where each rank's collectives come from; [`op_speed`] measures
//! each rank's operators against the other ranks'.

mod compare;
mod op_speed;
mod origins;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::intervals::{Iv, Set};
use super::regions::Phase;
use super::waits::RankWait;
use super::RankPart;

pub use compare::{locate, ByRankStep, Compare, Diff, Figure, Located};
pub use op_speed::{op_speed, ExtraOps, OpExcess, OpGroup, OpSpeed, MIN_OP_INSTANCES};
pub use origins::{comm_origins, OriginRow, TINY_COLLECTIVE_BYTES};

/// One region of one rank in one step (occurrences with the same name and parent summed).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RegionRow {
    pub rank: u32,
    pub step: u32,
    pub name: String,
    /// The enclosing region's name, or empty at the top.
    pub parent: String,
    pub phase: Phase,
    pub count: u32,
    pub inclusive_ns: i64,
    /// Inclusive time minus the exposed collective wait spent idle or blocked inside it.
    pub active_ns: i64,
    /// Operators running inside it.
    pub ops_ns: i64,
    /// No operator running (and not waiting on a collective).
    pub free_ns: i64,
    /// Of `free_ns`, the longest single stretch in one occurrence with no operator running and
    /// no collective of the rank in flight: a stall is one block (a sleep, a blocking write),
    /// the Python between operators is many short ones. Only gaps of at least
    /// [`crate::analyze::regions::MIN_BLOCKED_GAP_NS`] count (0 when there is none).
    #[serde(default)]
    pub longest_free_ns: i64,
    /// Blocked in a host synchronization (and not waiting on a collective).
    pub sync_ns: i64,
    /// Waiting for the other ranks while inside it.
    pub wait_ns: i64,
    /// Of `wait_ns`, the part the host spent blocked in a synchronization (a sync on a stream
    /// whose collective waits for a late peer).
    #[serde(default)]
    pub sync_wait_ns: i64,
    /// GPU compute launched from inside it.
    pub device_ns: i64,
}

/// One phase of one rank in one step (the main thread's partition of the step).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PhaseRow {
    pub rank: u32,
    pub step: u32,
    pub phase: Phase,
    pub inclusive_ns: i64,
    pub active_ns: i64,
}

/// How many operators of the step's work one rank ran in one step
/// ([`crate::analyze::regions::StepOps`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepOpsRow {
    pub rank: u32,
    pub step: u32,
    pub ops: u32,
}

/// Every rank's [`StepOpsRow`]s (a rank listed twice counts once).
pub fn step_ops(parts: &[RankPart]) -> Vec<StepOpsRow> {
    let mut seen = BTreeSet::new();
    parts
        .iter()
        .filter(|p| seen.insert(p.info.rank))
        .flat_map(|p| {
            p.regions.step_ops.iter().map(|s| StepOpsRow { rank: p.info.rank, step: s.step, ops: s.ops })
        })
        .collect()
}

/// Who waited for whom in one step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepWaits {
    pub step: u32,
    /// Per rank: total wait and exposed wait in the step.
    pub ranks: Vec<u32>,
    pub wait_ns: Vec<i64>,
    pub exposed_wait_ns: Vec<i64>,
    /// The ranks the others waited for (empty when the spread is below the noise).
    pub late: Vec<u32>,
    /// What the late group cost the step (see the module doc).
    pub cost_ns: i64,
}

/// The per-rank × step host breakdown, with collective waits taken out.
pub fn host_rows(parts: &[RankPart], waits: &[RankWait]) -> (Vec<RegionRow>, Vec<PhaseRow>) {
    let mut regions = Vec::new();
    let mut phases = Vec::new();
    for (p, w) in parts.iter().zip(waits) {
        let rr = &p.regions;
        let free_gaps = Set::from_sorted(rr.free_gaps.iter().copied());
        let free_wait = free_gaps.intersect(&w.exposed_wait);
        // Blocks: operator-free stretches with no collective in flight (a host blocked on a
        // transfer or on its peers is communicating, not stalled).
        let free_blocks = free_gaps.subtract(&w.wait.union(&w.transfer));
        let sync_wait = Set::from_sorted(rr.sync_spans.iter().copied()).intersect(&w.exposed_wait);
        let mut agg: BTreeMap<(u32, String, String), RegionRow> = BTreeMap::new();
        for o in &rr.occurrences {
            let name = rr.names.get(o.name as usize).cloned().unwrap_or_default();
            let parent = o
                .parent
                .and_then(|k| rr.occurrences.get(k as usize))
                .and_then(|q| rr.names.get(q.name as usize))
                .cloned()
                .unwrap_or_default();
            let (wf, ws, block) = if o.main {
                (
                    free_wait.len_within(o.start_ns, o.end_ns),
                    sync_wait.len_within(o.start_ns, o.end_ns),
                    free_blocks.longest_within(o.start_ns, o.end_ns),
                )
            } else {
                (0, 0, 0)
            };
            let row = agg.entry((o.step, name.clone(), parent.clone())).or_insert_with(|| RegionRow {
                rank: p.info.rank,
                step: o.step,
                name,
                parent,
                phase: o.phase,
                count: 0,
                inclusive_ns: 0,
                active_ns: 0,
                ops_ns: 0,
                free_ns: 0,
                longest_free_ns: 0,
                sync_ns: 0,
                wait_ns: 0,
                sync_wait_ns: 0,
                device_ns: 0,
            });
            let wf = wf.min(o.free_ns);
            let ws = ws.min(o.sync_ns);
            row.count += 1;
            row.inclusive_ns += o.inclusive_ns();
            row.active_ns += o.inclusive_ns() - wf - ws;
            row.ops_ns += o.ops_ns;
            row.free_ns += o.free_ns - wf;
            row.longest_free_ns = row.longest_free_ns.max(block.min(o.free_ns - wf));
            row.sync_ns += o.sync_ns - ws;
            row.wait_ns += wf + ws;
            row.sync_wait_ns += ws;
            row.device_ns += o.device_ns;
        }
        regions.extend(agg.into_values());
        let blocked = free_wait.union(&sync_wait);
        for sp in &rr.phases {
            for (ph, ivs) in &sp.spans {
                let set = Set::from_sorted(ivs.iter().copied());
                let inclusive = set.len_ns();
                let waited = set.intersect(&blocked).len_ns();
                phases.push(PhaseRow {
                    rank: p.info.rank,
                    step: sp.step,
                    phase: *ph,
                    inclusive_ns: inclusive,
                    active_ns: inclusive - waited,
                });
            }
        }
    }
    (regions, phases)
}

/// Who waited for whom, step by step. `rows` are the ranks' step rows with the wait split
/// filled in; `noise_ns` is the smallest spread of waits taken as a real difference.
pub fn step_waits(
    per_step: &BTreeMap<u32, Vec<super::breakdown::StepRank>>,
    noise_ns: i64,
) -> Vec<StepWaits> {
    let mut out = Vec::new();
    for (&step, rows) in per_step {
        if rows.len() < 2 {
            continue;
        }
        let ranks: Vec<u32> = rows.iter().map(|r| r.rank).collect();
        let wait: Vec<i64> = rows.iter().map(|r| r.comm_wait_ns).collect();
        let exposed: Vec<i64> = rows.iter().map(|r| r.exposed_wait_ns).collect();
        let lo = wait.iter().copied().min().unwrap_or(0);
        let hi = wait.iter().copied().max().unwrap_or(0);
        let mut late = Vec::new();
        let mut cost = 0;
        if hi - lo > noise_ns {
            let cut = lo + (hi - lo) / 4;
            late = ranks.iter().zip(&wait).filter(|(_, &w)| w <= cut).map(|(&r, _)| r).collect();
            cost = late_cost(&ranks, &exposed, &late);
        }
        out.push(StepWaits { step, ranks, wait_ns: wait, exposed_wait_ns: exposed, late, cost_ns: cost });
    }
    out
}

/// The step time `late` cost in a step: the least exposed wait among the other ranks beyond the
/// most among the late ones (0 when every rank is late).
pub fn late_cost(ranks: &[u32], exposed: &[i64], late: &[u32]) -> i64 {
    // A set: the late group can be most of the job, and a scan of it per rank is quadratic.
    let late: BTreeSet<u32> = late.iter().copied().collect();
    let others = ranks.iter().zip(exposed).filter(|(r, _)| !late.contains(r)).map(|(_, &w)| w).min();
    let mine = ranks.iter().zip(exposed).filter(|(r, _)| late.contains(r)).map(|(_, &w)| w).max();
    match (others, mine) {
        (Some(o), Some(m)) => (o - m).max(0),
        _ => 0,
    }
}

/// Intervals helper for tests and callers: total length of `ivs` inside `[lo, hi)`.
pub fn len_within(ivs: &[Iv], lo: i64, hi: i64) -> i64 {
    Set::from_sorted(ivs.iter().copied()).len_within(lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_cost_is_the_least_other_wait_beyond_the_late() {
        // Rank 2 waits 0; the others 400, 410, 395: rank 2 costs 395.
        assert_eq!(late_cost(&[0, 1, 2, 3], &[400, 410, 0, 395], &[2]), 395);
        // Everyone late: nothing to gain from one of them.
        assert_eq!(late_cost(&[0, 1], &[5, 5], &[0, 1]), 0);
    }
}
