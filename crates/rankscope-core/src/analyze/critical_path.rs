//! Critical path per step — **level 1: the bottleneck rank's chain**.
//!
//! A full cross-rank dependency graph (CPU op → launch → kernel, stream order, event waits,
//! rendezvous edges) is not built yet. What is computed, and labelled `bottleneck_rank_chain`
//! in the output: for each step, the rank that bounds it (the step's straggler when there is
//! one — everybody waited for it — otherwise the rank with the longest step), and its time
//! from the step start to the end of its step window, split along its GPU (or, on CPU-only
//! ranks, CPU) timeline into:
//! - `compute_ns`: compute busy time (including compute that hides communication);
//! - `communication_ns`: communication not hidden by compute (exposed);
//! - `memory_ns`: memory copies/sets not under compute or communication;
//! - `cpu_bound_ns`: gaps where the next kernel's launch call ended after the gap began (the
//!   GPU waited for the host);
//! - `launch_overhead_ns`: other gaps shorter than the kernel-wait threshold;
//! - `idle_ns`: the remaining gaps.
//!
//! These add up to `length_ns`. `top_events` lists the longest events on the chain.

use serde::{Deserialize, Serialize};

use super::align::RankAlignment;
use super::breakdown::RankSets;
use super::collectives::offset_of;
use super::idle::GapClassifier;
use super::StepEntry;
use crate::model::*;
use crate::normalize::job::RankEntry;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PathEvent {
    pub name: String,
    pub class: Class,
    pub start_ns: i64,
    pub dur_ns: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepPath {
    pub step: u32,
    /// Which level of critical-path analysis this is.
    pub level: String,
    pub rank: u32,
    /// Why this rank: `straggler` or `longest_step`.
    pub chosen_as: String,
    /// Aligned start and end of the chain.
    pub start_ns: i64,
    pub end_ns: i64,
    pub length_ns: i64,
    pub compute_ns: i64,
    pub communication_ns: i64,
    pub memory_ns: i64,
    pub cpu_bound_ns: i64,
    pub launch_overhead_ns: i64,
    pub idle_ns: i64,
    pub top_events: Vec<PathEvent>,
}

/// What the chain needs of each rank, computed once per rank by the caller.
#[derive(Debug)]
pub struct RankCtx<'a> {
    pub rank: &'a RankEntry,
    pub sets: RankSets,
    pub windows: Vec<(u32, i64, i64)>,
    pub gaps: GapClassifier,
    /// Work events on the rank's metrics side, sorted by start.
    pub work: Vec<usize>,
    pub max_work_dur: i64,
}

impl<'a> RankCtx<'a> {
    pub fn new(
        rank: &'a RankEntry,
        sets: RankSets,
        windows: Vec<(u32, i64, i64)>,
        gaps: GapClassifier,
    ) -> Self {
        let e = &rank.trace.events;
        let side = if sets.source == "gpu" { LaneKind::Gpu } else { LaneKind::Cpu };
        let mut work: Vec<usize> = (0..e.len())
            .filter(|&i| {
                e.kind[i] == EventKind::Slice
                    && rank.trace.lanes.kind.get(e.lane[i].0 as usize) == Some(&side)
                    && matches!(e.class[i], Class::Compute | Class::Communication | Class::Memory)
            })
            .collect();
        work.sort_by_key(|&i| (e.ts_ns[i], i));
        let max_work_dur = work.iter().map(|&i| e.dur_ns[i]).max().unwrap_or(0);
        RankCtx { rank, sets, windows, gaps, work, max_work_dur }
    }
}

/// The chain of one rank over one step window (on the rank's own clock; `chosen_as` empty
/// until the job level decides which rank bounds the step).
pub fn chain(c: &RankCtx<'_>, strings: &StringTable, step: u32, lo: i64, hi: i64) -> StepPath {
    let sets = &c.sets;
    let comp = sets.compute.clip(lo, hi);
    let m = sets.comm.clip(lo, hi).subtract(&comp);
    let mem = sets.memory.clip(lo, hi).subtract(&comp).subtract(&m);
    let busy = comp.union(&m).union(&mem);
    let split = c.gaps.split(&busy, lo, hi);
    let e = &c.rank.trace.events;
    let from = c.work.partition_point(|&i| e.ts_ns[i] < lo.saturating_sub(c.max_work_dur));
    let to = c.work.partition_point(|&i| e.ts_ns[i] < hi);
    let mut top: Vec<usize> =
        c.work[from..to.max(from)].iter().copied().filter(|&i| e.end_ns(i) > lo && e.ts_ns[i] < hi).collect();
    top.sort_by_key(|&i| (std::cmp::Reverse(e.end_ns(i).min(hi) - e.ts_ns[i].max(lo)), i));
    top.truncate(5);
    StepPath {
        step,
        level: LEVEL.to_string(),
        rank: c.rank.rank,
        chosen_as: String::new(),
        start_ns: lo,
        end_ns: hi,
        length_ns: hi - lo,
        compute_ns: comp.len_ns(),
        communication_ns: m.len_ns(),
        memory_ns: mem.len_ns(),
        cpu_bound_ns: split.cpu_bound_ns,
        launch_overhead_ns: split.launch_overhead_ns,
        idle_ns: split.other_idle_ns,
        top_events: top
            .into_iter()
            .map(|i| PathEvent {
                name: strings.get(e.name[i]).to_string(),
                class: e.class[i],
                start_ns: e.ts_ns[i],
                dur_ns: e.dur_ns[i],
            })
            .collect(),
    }
}

/// The level of critical-path analysis implemented.
pub const LEVEL: &str = "bottleneck_rank_chain";

/// Picks, per step, the chain of the rank that bounds it — the straggler, else the rank with
/// the longest step — and puts it on the aligned clock.
pub fn paths(
    chains: &[Vec<StepPath>],
    stragglers: &[super::balance::StepStraggler],
    al: &[RankAlignment],
    steps: &[StepEntry],
) -> Vec<StepPath> {
    let mut out = Vec::new();
    for s in steps {
        let (rank, chosen_as) = match stragglers.iter().find(|x| x.step == s.step) {
            Some(x) => (x.rank, "straggler"),
            None => match s.per_rank.iter().max_by_key(|r| (r.wall_ns, std::cmp::Reverse(r.rank))) {
                Some(r) => (r.rank, "longest_step"),
                None => continue,
            },
        };
        let Some(p) = chains.iter().flatten().find(|p| p.rank == rank && p.step == s.step) else { continue };
        let off = offset_of(al, rank);
        let mut p = p.clone();
        p.chosen_as = chosen_as.to_string();
        p.start_ns -= off;
        p.end_ns -= off;
        for ev in &mut p.top_events {
            ev.start_ns -= off;
        }
        out.push(p);
    }
    out
}
