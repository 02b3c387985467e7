//! Critical path per step.
//!
//! **Level 2, `cross_rank_collective_chain`** (used when the step has collectives matched
//! across ranks). Every blocking collective is a rendezvous: it completes when its last rank
//! arrives, plus the transfer. So the step's critical path runs, collective after collective in
//! aligned time order, through the rank that arrived last at each: from the end of the previous
//! collective on the path, along that rank's own timeline to its arrival (its work before the
//! collective: a *segment*), then through the collective's transfer, and finally along the tail
//! of the rank whose step ends last. Each segment is split along the rank's GPU (or, on CPU-only
//! ranks, CPU) timeline into compute, exposed communication, memory, CPU-bound gaps, launch
//! overhead and idle — computed in each rank's part, where its events live. Collectives that run
//! concurrently with the path (another process group, or a collective that started before the
//! path reached it) are not chained; a segment that starts before the path's current time is
//! counted only for the share after it (proportionally). `hops` lists the path, rank by rank.
//!
//! **Level 1, `bottleneck_rank_chain`** (steps without matched collectives, single-rank
//! traces): the rank that bounds the step (the straggler, else the longest step) and its whole
//! window split the same way.
//!
//! Within one rank the path follows the rank's busy union, not individual launch → kernel and
//! stream-order edges, and cross-stream event waits are not modelled.
//!
//! In both, the parts add up to `length_ns`: `compute_ns` (compute busy time, including compute
//! that hides communication), `communication_ns` (communication not hidden by compute, and the
//! collectives' transfer on level 2), `memory_ns`, `cpu_bound_ns` (gaps where the next kernel's
//! launch call ended after the gap began), `launch_overhead_ns` (other gaps shorter than the
//! kernel-wait threshold) and `idle_ns`. `top_events` lists the longest events of the dominant
//! rank.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::align::RankAlignment;
use super::breakdown::RankSets;
use super::collectives::Offsets;
use super::gaps::GapClassifier;
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
    pub level: PathLevel,
    pub rank: u32,
    /// Why this rank: `straggler` or `longest_step`.
    pub chosen_as: String,
    /// Aligned start and end of the chain.
    pub start_ns: i64,
    pub end_ns: i64,
    /// The sum of the parts below. On level 2 it can be shorter than `end_ns − start_ns` where
    /// the path waits in a collective that is not chained.
    pub length_ns: i64,
    /// The parts (flattened into the step's JSON object).
    #[serde(flatten)]
    pub split: Split,
    pub top_events: Vec<PathEvent>,
    /// Level 2: the path, hop by hop (aligned times).
    #[serde(default)]
    pub hops: Vec<Hop>,
}

/// One piece of a level-2 path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Hop {
    pub rank: u32,
    /// `work` (a rank's timeline before its arrival), `collective` (a transfer) or `tail`.
    pub what: String,
    pub collective: Option<CollKind>,
    pub start_ns: i64,
    pub end_ns: i64,
}

/// How an interval of a rank's timeline splits.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Split {
    pub compute_ns: i64,
    pub communication_ns: i64,
    pub memory_ns: i64,
    /// The host was loading data while the device had nothing to do (host work, not idle).
    #[serde(default)]
    pub input_ns: i64,
    pub cpu_bound_ns: i64,
    pub launch_overhead_ns: i64,
    pub idle_ns: i64,
}

impl Split {
    fn total(&self) -> i64 {
        self.compute_ns
            + self.communication_ns
            + self.memory_ns
            + self.input_ns
            + self.cpu_bound_ns
            + self.launch_overhead_ns
            + self.idle_ns
    }

    /// The share `num / den` of every part, rounded down, with the rounding remainder put in
    /// idle so the parts add up to the same share of the total.
    fn scaled(&self, num: i64, den: i64) -> Split {
        if den <= 0 || num >= den {
            return *self;
        }
        let f = |v: i64| ((v as i128 * num as i128) / den as i128) as i64;
        let mut s = Split {
            compute_ns: f(self.compute_ns),
            communication_ns: f(self.communication_ns),
            memory_ns: f(self.memory_ns),
            input_ns: f(self.input_ns),
            cpu_bound_ns: f(self.cpu_bound_ns),
            launch_overhead_ns: f(self.launch_overhead_ns),
            idle_ns: f(self.idle_ns),
        };
        let want = f(self.total());
        s.idle_ns += want - s.total();
        s
    }

    fn add(&mut self, o: &Split) {
        self.compute_ns += o.compute_ns;
        self.communication_ns += o.communication_ns;
        self.memory_ns += o.memory_ns;
        self.input_ns += o.input_ns;
        self.cpu_bound_ns += o.cpu_bound_ns;
        self.launch_overhead_ns += o.launch_overhead_ns;
        self.idle_ns += o.idle_ns;
    }
}

/// A rank's work before one of its collectives (or after its last one in a step: `event` None).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Segment {
    pub step: u32,
    pub event: Option<EventIdx>,
    /// On the rank's own clock.
    pub from_ns: i64,
    pub to_ns: i64,
    pub split: Split,
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
        work: Vec<usize>,
    ) -> Self {
        let e = &rank.trace.events;
        let max_work_dur = work.iter().map(|&i| e.dur_ns[i]).max().unwrap_or(0);
        RankCtx { rank, sets, windows, gaps, work, max_work_dur }
    }
}

/// How `[lo, hi)` of a rank's timeline splits.
pub fn split_interval(c: &RankCtx<'_>, lo: i64, hi: i64) -> Split {
    if hi <= lo {
        return Split::default();
    }
    let sets = &c.sets;
    let comp = sets.compute.clip(lo, hi);
    let m = sets.comm.clip(lo, hi).subtract(&comp);
    let mem = sets.memory.clip(lo, hi).subtract(&comp).subtract(&m);
    let busy = comp.union(&m).union(&mem);
    let g = c.gaps.split(&busy, &sets.data_loading, lo, hi);
    Split {
        compute_ns: comp.len_ns(),
        communication_ns: m.len_ns(),
        memory_ns: mem.len_ns(),
        input_ns: g.input_ns,
        cpu_bound_ns: g.cpu_bound_ns,
        launch_overhead_ns: g.launch_overhead_ns,
        idle_ns: g.other_idle_ns,
    }
}

/// Every rank-local segment the level-2 path may use: before each collective instance (from
/// the end of the rank's previous instance, or the step start) and after the step's last one.
pub fn segments(c: &RankCtx<'_>, instances: &[super::instances::Instance]) -> Vec<Segment> {
    let mut out = Vec::new();
    for &(step, lo, hi) in &c.windows {
        let mut cursor = lo;
        for x in instances.iter().filter(|x| x.step == step) {
            let to = x.start_ns.clamp(lo, hi);
            out.push(Segment {
                step,
                event: Some(x.event),
                from_ns: cursor.min(to),
                to_ns: to,
                split: split_interval(c, cursor.min(to), to),
            });
            cursor = cursor.max(x.end_ns.min(hi));
        }
        out.push(Segment {
            step,
            event: None,
            from_ns: cursor,
            to_ns: hi,
            split: split_interval(c, cursor, hi),
        });
    }
    out
}

/// The chain of one rank over one step window (on the rank's own clock; `chosen_as` empty
/// until the job level decides which rank bounds the step).
pub fn chain(c: &RankCtx<'_>, strings: &StringTable, step: u32, lo: i64, hi: i64) -> StepPath {
    let split = split_interval(c, lo, hi);
    let e = &c.rank.trace.events;
    let from = c.work.partition_point(|&i| e.ts_ns[i] < lo.saturating_sub(c.max_work_dur));
    let to = c.work.partition_point(|&i| e.ts_ns[i] < hi);
    let mut top: Vec<usize> =
        c.work[from..to.max(from)].iter().copied().filter(|&i| e.end_ns(i) > lo && e.ts_ns[i] < hi).collect();
    top.sort_by_key(|&i| (std::cmp::Reverse(e.end_ns(i).min(hi) - e.ts_ns[i].max(lo)), i));
    top.truncate(5);
    StepPath {
        step,
        level: LEVEL,
        rank: c.rank.rank,
        chosen_as: String::new(),
        start_ns: lo,
        end_ns: hi,
        length_ns: hi - lo,
        split,
        hops: Vec::new(),
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

crate::named_enum! {
    /// Which level of critical-path analysis a step's chain is.
    pub enum PathLevel {
        /// Level 1: the chain of the rank that bounds the step.
        BottleneckRankChain => "bottleneck_rank_chain",
        /// Level 2: the chain across ranks through the matched collectives.
        CrossRankCollectiveChain => "cross_rank_collective_chain",
    }
}

/// The level of critical-path analysis implemented.
pub const LEVEL: PathLevel = PathLevel::BottleneckRankChain;

/// The level-2 label.
pub const LEVEL2: PathLevel = PathLevel::CrossRankCollectiveChain;

/// Per step: the level-2 cross-rank chain when the step has matched collectives, else the
/// level-1 chain of the rank that bounds it (the straggler, else the longest step); on the
/// aligned clock.
pub fn paths(
    chains: &[Vec<StepPath>],
    segments: &[(u32, Vec<Segment>)],
    ops: &[super::collectives::Op],
    stragglers: &[super::balance::StepStraggler],
    al: &[RankAlignment],
    steps: &[StepEntry],
) -> Vec<StepPath> {
    // Looked up per step, collective and rank: by rank, never by a scan of the ranks.
    let al = &Offsets::new(al);
    let mut seg_by_rank: BTreeMap<u32, &[Segment]> = BTreeMap::new();
    for (r, v) in segments {
        seg_by_rank.entry(*r).or_insert(v.as_slice());
    }
    let mut chain_of: BTreeMap<(u32, u32), &StepPath> = BTreeMap::new();
    for p in chains.iter().flatten() {
        chain_of.entry((p.rank, p.step)).or_insert(p);
    }
    let ix = Index { segments: seg_by_rank, chains: chain_of, offsets: al };
    let mut out = Vec::new();
    for s in steps {
        if let Some(p) = level2(s, &ix, ops) {
            out.push(p);
            continue;
        }
        let (rank, chosen_as) = match stragglers.iter().find(|x| x.step == s.step) {
            Some(x) => (x.rank, "straggler"),
            None => match s.per_rank.iter().max_by_key(|r| (r.wall_ns, std::cmp::Reverse(r.rank))) {
                Some(r) => (r.rank, "longest_step"),
                None => continue,
            },
        };
        let Some(p) = ix.chains.get(&(rank, s.step)) else { continue };
        out.push(shifted(p, chosen_as, al.of(rank)));
    }
    out
}

fn shifted(p: &StepPath, chosen_as: &str, off: i64) -> StepPath {
    let mut p = p.clone();
    p.chosen_as = chosen_as.to_string();
    p.start_ns -= off;
    p.end_ns -= off;
    for ev in &mut p.top_events {
        ev.start_ns -= off;
    }
    p
}

/// What [`paths`] looks up, by key: each rank's segments (its first list), each (rank, step)'s
/// level-1 chain (the first), each rank's offset.
struct Index<'a> {
    segments: BTreeMap<u32, &'a [Segment]>,
    chains: BTreeMap<(u32, u32), &'a StepPath>,
    offsets: &'a Offsets,
}

fn level2(s: &StepEntry, ix: &Index<'_>, ops: &[super::collectives::Op]) -> Option<StepPath> {
    let al = ix.offsets;
    let mut step_ops: Vec<&super::collectives::Op> =
        ops.iter().filter(|o| o.step == s.step && o.ranks.len() >= 2 && !o.partial).collect();
    if step_ops.is_empty() {
        return None;
    }
    let end_of = |o: &super::collectives::Op| {
        o.ranks.iter().position(|&r| r == o.last_arriver).map_or(i64::MIN, |k| o.start_ns[k] + o.dur_ns[k])
    };
    step_ops.sort_by_key(|o| (end_of(o), o.key));
    let seg_of = |rank: u32| ix.segments.get(&rank).copied().unwrap_or(&[]);
    // The path starts at the earliest aligned step start.
    let start = s.per_rank.iter().map(|r| r.start_ns - al.of(r.rank)).min()?;
    let mut cursor = start;
    let mut total = Split::default();
    let mut hops: Vec<Hop> = Vec::new();
    let mut per_rank: std::collections::BTreeMap<u32, i64> = Default::default();
    for o in step_ops {
        let Some(k) = o.ranks.iter().position(|&r| r == o.last_arriver) else { continue };
        let arrival = o.start_ns[k];
        if arrival < cursor {
            // Concurrent with the path (another group, or already passed): not chained.
            continue;
        }
        let rank = o.last_arriver;
        let off = al.of(rank);
        let event = o.events.get(k).copied();
        if let Some(seg) = seg_of(rank).iter().find(|g| g.step == s.step && g.event == event) {
            let (from, to) = (seg.from_ns - off, seg.to_ns - off);
            let used = to - from.max(cursor);
            if used > 0 {
                total.add(&seg.split.scaled(used, to - from));
                hops.push(Hop {
                    rank,
                    what: "work".into(),
                    collective: None,
                    start_ns: from.max(cursor),
                    end_ns: to,
                });
                *per_rank.entry(rank).or_default() += used;
            }
        }
        let end = arrival + o.transfer_ns;
        total.communication_ns += o.transfer_ns;
        hops.push(Hop {
            rank,
            what: "collective".into(),
            collective: Some(o.kind),
            start_ns: arrival,
            end_ns: end,
        });
        cursor = cursor.max(end);
    }
    // The tail of the rank whose step ends last.
    let last = s.per_rank.iter().max_by_key(|r| (r.end_ns - al.of(r.rank), std::cmp::Reverse(r.rank)))?;
    let off = al.of(last.rank);
    if let Some(seg) = seg_of(last.rank).iter().find(|g| g.step == s.step && g.event.is_none()) {
        let (from, to) = (seg.from_ns - off, seg.to_ns - off);
        let used = to - from.max(cursor);
        if used > 0 {
            total.add(&seg.split.scaled(used, to - from));
            hops.push(Hop {
                rank: last.rank,
                what: "tail".into(),
                collective: None,
                start_ns: from.max(cursor),
                end_ns: to,
            });
            *per_rank.entry(last.rank).or_default() += used;
        }
    }
    let dominant =
        per_rank.iter().max_by_key(|(r, t)| (**t, std::cmp::Reverse(**r))).map_or(last.rank, |(r, _)| *r);
    let top = ix
        .chains
        .get(&(dominant, s.step))
        .map(|p| shifted(p, "", al.of(dominant)).top_events)
        .unwrap_or_default();
    Some(StepPath {
        step: s.step,
        level: LEVEL2,
        rank: dominant,
        chosen_as: "dominant".into(),
        start_ns: hops.first().map_or(start, |h| h.start_ns),
        end_ns: hops.iter().map(|h| h.end_ns).max().unwrap_or(start),
        length_ns: total.total(),
        split: total,
        top_events: top,
        hops,
    })
}
