//! A rank's steps as programs (computed in the rank's part, where its events live): what the
//! rank does itself, in order, between the points where it meets the others.
//!
//! The rank's *work lane* is the side its figures come from (the GPU streams' compute on GPU
//! ranks, the host threads on CPU ranks): its busy time is compute, data loading and memory
//! work. Walking a step window:
//! - **Issue** of a collective: on CPU ranks when the host enqueued it (the `c10d::*` op), on
//!   GPU ranks when it started on the device (a communication kernel waits for the compute that
//!   produced its data: its place in the compute program is where it started).
//! - **Wait** for a collective: a gap in the work lane whose end is within [`WAIT_SLACK_NS`] (or
//!   a tenth of the gap) of the completion of one of the rank's collectives that completed in
//!   it: the lane was held by it (DDP's wait for its buckets at the end of backward, a
//!   blocking all_reduce, a stream waiting on the communication stream's event).
//! - **Own** time between them: work, and gaps that end at no completion (a sleep, a stall, the
//!   input pipeline): the rank's own, whatever the others do.
//!
//! Point-to-point exchanges (a pipeline's sends and recvs, a ring's) are issued and waited for
//! as collectives are: the replay pairs each send with its recv ([`super::model`]).

use serde::{Deserialize, Serialize};

use crate::analyze::instances::Instance;
use crate::analyze::intervals::{Iv, Set};
use crate::model::{Class, EventKind, LaneId, LaneKind, RankTrace};

/// A gap ending this close after a completion (or within a tenth of the gap) ended because of
/// it: the thread woken, the stream's event seen.
pub const WAIT_SLACK_NS: i64 = 1_000_000;

/// One item of a step's program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Item {
    /// Time the rank spends on its own (ns).
    Own(i64),
    /// The rank issues its instance `.0` (an index into the part's instances).
    Issue(u32),
    /// The rank waits for its instance `inst` to complete; the wait took `recorded_ns`, and
    /// the rank resumed `wake_ns` after the completion (negative: the backend's span closed
    /// after the thread it woke had resumed).
    Wait {
        inst: u32,
        recorded_ns: i64,
        #[serde(default)]
        wake_ns: i64,
    },
}

/// A step of one rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepProgram {
    pub step: u32,
    /// Where the step starts and ends (rank clock).
    pub start_ns: i64,
    pub end_ns: i64,
    pub items: Vec<Item>,
}

/// A CPU rank's work lane: the host thread with the most operator time (the training loop's),
/// busy where an innermost operator runs on it (containers such as annotations, waits for the
/// device, the spans of its point-to-point exchanges, and operators around other operators left
/// out), less the time it sits blocked inside an operator on a collective (`blocked`,
/// [`crate::analyze::roles::blocked_waits`]). gloo's `gloo:send` / `gloo:recv` spans sit on the
/// thread that issued them, open until the host waited for them: not work, and the thread's
/// wait for a recv is a gap that ends at its completion.
pub fn host_busy(t: &RankTrace, blocked: &[(LaneId, Iv)], instances: &[Instance]) -> Set {
    let e = &t.events;
    let cpu = |i: usize| t.lanes.kind.get(e.lane[i].0 as usize) == Some(&LaneKind::Cpu);
    let mut exchange: Vec<u32> = instances.iter().filter(|x| x.p2p).map(|x| x.event.0).collect();
    exchange.sort_unstable();
    let work = |i: usize| {
        e.kind[i] == EventKind::Slice
            && e.dur_ns[i] > 0
            && cpu(i)
            && !matches!(e.class[i], Class::Annotation | Class::Sync | Class::Optimizer)
            && exchange.binary_search(&(i as u32)).is_err()
    };
    let mut per_lane: std::collections::BTreeMap<u32, i64> = std::collections::BTreeMap::new();
    for i in (0..e.len()).filter(|&i| work(i) && e.class[i] == Class::Compute) {
        *per_lane.entry(e.lane[i].0).or_default() += e.dur_ns[i];
    }
    let Some((&lane, _)) = per_lane.iter().max_by_key(|(l, d)| (**d, std::cmp::Reverse(**l))) else {
        return Set::new();
    };
    // Busy where an innermost operator runs: an operator that encloses a wait (FSDP's
    // pre-backward hook gathering parameters inside `AddmmBackward0`, its annotations around
    // the wait) is busy only where its children are.
    let mut ops: Vec<usize> = (0..e.len()).filter(|&i| work(i) && e.lane[i].0 == lane).collect();
    ops.sort_unstable_by_key(|&i| (e.ts_ns[i], std::cmp::Reverse(e.dur_ns[i])));
    let leaves = ops
        .iter()
        .enumerate()
        .filter(|(k, &i)| ops.get(k + 1).is_none_or(|&j| e.ts_ns[j] >= e.end_ns(i)))
        .map(|(_, &i)| (e.ts_ns[i], e.end_ns(i)))
        .collect();
    let busy = Set::from_unsorted(leaves);
    let held = Set::from_unsorted(blocked.iter().filter(|(l, _)| l.0 == lane).map(|(_, iv)| *iv).collect());
    busy.subtract(&held)
}

/// Every step window's program. `busy` is the work lane's busy union; `cpu_issue` whether the
/// host's enqueue is the issue (CPU ranks) rather than the device start.
pub fn programs(
    windows: &[(u32, i64, i64)],
    instances: &[Instance],
    busy: &Set,
    cpu_issue: bool,
) -> Vec<StepProgram> {
    windows.iter().map(|&(step, lo, hi)| program(step, lo, hi, instances, busy, cpu_issue)).collect()
}

fn program(step: u32, lo: i64, hi: i64, instances: &[Instance], busy: &Set, cpu_issue: bool) -> StepProgram {
    // Waits: gaps of the work lane that end at a completion of a collective (or exchange) in
    // flight.
    let mut ends: Vec<(i64, u32)> = instances
        .iter()
        .enumerate()
        .filter(|(_, x)| x.end_ns > lo && x.start_ns < hi)
        .map(|(k, x)| (x.end_ns, k as u32))
        .collect();
    ends.sort_unstable();
    let mut waits: Vec<(i64, i64, u32)> = Vec::new();
    for &(g0, g1) in busy.gaps(lo, hi).intervals() {
        let slack = WAIT_SLACK_NS.max((g1 - g0) / 10);
        // The completion nearest the gap's end, within the slack either side (a backend's span
        // may close after the thread it woke has resumed), of a collective that started before
        // the gap ended and completed after it began: one done before did not hold it.
        let from = ends.partition_point(|e| e.0 < (g1 - slack).max(g0));
        let to = ends.partition_point(|e| e.0 <= g1 + slack);
        let hit = ends[from..to]
            .iter()
            .filter(|(_, k)| instances[*k as usize].start_ns < g1)
            .min_by_key(|(e, _)| (e - g1).abs());
        if let Some(&(_, k)) = hit {
            waits.push((g0, g1, k));
        }
    }
    // Issues, in time order; one issued inside a wait was issued as the wait began.
    let mut marks: Vec<(i64, u8, Item)> = Vec::new();
    for (k, x) in instances.iter().enumerate() {
        if x.step != step {
            continue;
        }
        let mut t = if cpu_issue { x.issued_ns } else { x.start_ns };
        if let Some(w) = waits.iter().find(|w| w.0 < t && t < w.1) {
            t = w.0;
        }
        marks.push((t.clamp(lo, hi), 0, Item::Issue(k as u32)));
    }
    for &(g0, g1, k) in &waits {
        let wake_ns = instances.get(k as usize).map_or(0, |x| g1 - x.end_ns);
        marks.push((g0, 1, Item::Wait { inst: k, recorded_ns: g1 - g0, wake_ns }));
    }
    marks.sort_by_key(|m| (m.0, m.1));
    let mut items = Vec::with_capacity(marks.len() * 2 + 1);
    let mut t = lo;
    for (at, _, item) in marks {
        if at > t {
            items.push(Item::Own(at - t));
            t = at;
        }
        items.push(item);
        if let Item::Wait { recorded_ns, .. } = item {
            t = t.max(at + recorded_ns);
        }
    }
    if hi > t {
        items.push(Item::Own(hi - t));
    }
    StepProgram { step, start_ns: lo, end_ns: hi, items }
}
