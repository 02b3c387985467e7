//! What-if: the job replayed from its traces, as recorded and with a cause taken away
//! (docs/metrics.md, "What-if").
//!
//! A dependency model of the job: each rank's steps as programs ([`program`]: its own time, the
//! collectives it issues, the waits for them), the collectives as synchronization points of
//! their members with their recorded transfer, each running on its lane after the lane's
//! previous one ([`replay`]). Replayed with the recorded durations it must give the recorded
//! step times: the error per step says how far the model holds. Then counterfactuals, each a
//! replay with some durations changed, their gain the difference of the two replays' mean
//! step (replay against replay, so the model's own error cancels):
//! - **a late rank brought to its peers**: each of its own times no longer than the median of
//!   the other ranks' own time in the same place of the same step (before issuing the same
//!   collective, before waiting for it, or in the tail);
//! - **every rank at the typical speed**: the same for every rank: the job's *ideal* step, what
//!   it would take without a rank slower than its peers anywhere;
//! - the judging layer's own ([`Scenario`]): some ranks brought to their peers and some
//!   collectives' transfers changed (small collectives merged, now and once the late ranks are
//!   fixed); a group's work spread evenly over its members (an expert-parallel group's tokens
//!   routed evenly, [`Scenario::even`]).
//!
//! Point-to-point exchanges are synchronization points of their two ends: a send paired with
//! its recv ([`crate::analyze::pipeline::p2p::match_p2p`]) completes the recorded transfer
//! after both ends started; a recv held open by its host's wait for another request of its
//! batch ends with its send, and a wait for it is a wait for that request too ([`Model::burst`]).
//! A rank with no peers doing the same work (a pipeline stage without replicas) cannot be
//! brought to them: it gets no gain ([`WhatIf::alone`]).

pub mod cut;
pub mod overlap;
pub mod program;
pub mod replay;
pub mod timeline;

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{CollKind, FxHashMap};
use serde::{Deserialize, Serialize};

use super::collectives::{Offsets, Op};
use super::instances::Instance;
use super::RankPart;
use program::Item;
pub use replay::Line;
use replay::{replay, AsRecorded, Change, Slot};

/// A collective or a point-to-point exchange of the model: its members and its transfer.
#[derive(Debug, Clone)]
pub struct ModelOp {
    pub ranks: Vec<u32>,
    pub transfer_ns: i64,
    /// Its index in the job's matched collectives (`Measured::ops`); none for an exchange.
    pub src: Option<usize>,
    /// An exchange whose send ended before its recv started (sent eagerly, into the peer's
    /// buffers): the sender (the first member) is done this long after it started, whatever the
    /// receiver does.
    pub eager_ns: Option<i64>,
}

/// One rank's step, on the aligned clock, with the slot of each item.
#[derive(Debug, Clone)]
pub struct Prog {
    pub start_ns: i64,
    pub end_ns: i64,
    pub items: Vec<Item>,
    pub slots: Vec<Slot>,
}

/// The job as the replay runs it.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// Step → rank → its program.
    pub steps: BTreeMap<u32, BTreeMap<u32, Prog>>,
    pub ops: Vec<ModelOp>,
    /// (rank, its instance index) → the collective.
    pub op_of: FxHashMap<(u32, u32), usize>,
    /// (collective, rank) → the collective before it on the rank's lane.
    pub lane_prev: FxHashMap<(usize, u32), usize>,
    /// (collective, rank) → how much later than the collective's completion the rank saw it
    /// complete (its recorded end after the last member's start plus the transfer); absent
    /// when none.
    pub lag: FxHashMap<(usize, u32), i64>,
    /// (collective, rank) → how long after it was issued and its lane was free it started on
    /// the rank (the backend's worker picking it up, the stream reaching it); absent when none.
    pub dispatch: FxHashMap<(usize, u32), i64>,
    /// (rank, its instance index) → the other exchanges its host waited for together with it
    /// (their spans closed within [`BURST_NS`] of each other: gloo waits for a batch's requests
    /// one after the other, so a recv whose data was there long before closes just after the
    /// send the host was really waiting for); a wait for one is a wait for all of them.
    pub burst: FxHashMap<(u32, u32), Vec<usize>>,
    /// Some rank has point-to-point exchanges ([`WhatIf::p2p`]).
    pub p2p: bool,
    /// Exchanges paired into the model.
    pub exchanges: u32,
    /// (step, slot) → the ranks' own time there, for the counterfactuals that bring a rank to
    /// its peers (computed once, read by every replay).
    pub own: BTreeMap<(u32, Slot), OwnAt>,
    /// The operator-free time of the regions that hold much of it, per place
    /// ([`Scenario::without_region`]).
    pub region_free: cut::RegionFree,
}

impl Model {
    /// Per rank, the share of its own time that sits in places where other ranks have own time
    /// too (so it can be brought to their median); 0 without own time. One pass over the places.
    pub fn compared_shares(&self) -> BTreeMap<u32, f64> {
        let mut acc: BTreeMap<u32, (i64, i64)> = BTreeMap::new();
        for at in self.own.values() {
            let shared = at.sorted.len() >= 2;
            for (&rank, &mine) in &at.by_rank {
                let e = acc.entry(rank).or_default();
                e.0 += mine.max(0);
                if shared {
                    e.1 += mine.max(0);
                }
            }
        }
        acc.into_iter()
            .map(|(r, (all, compared))| (r, if all > 0 { compared as f64 / all as f64 } else { 0.0 }))
            .collect()
    }
}

/// The ranks' own time in one place of one step (summed when a rank has several there).
#[derive(Debug, Clone, Default)]
pub struct OwnAt {
    by_rank: FxHashMap<u32, i64>,
    /// Every rank's, sorted.
    sorted: Vec<i64>,
}

impl OwnAt {
    /// The rank's own time here and the median of the other ranks' (the convention of
    /// `median_f`: the mean of the two middle ones for an even count); `None` without others.
    fn mine_and_peers(&self, rank: u32) -> Option<(i64, f64)> {
        let mine = *self.by_rank.get(&rank)?;
        if self.sorted.len() < 2 {
            return None;
        }
        Some((mine, crate::analyze::stats::median_without(&self.sorted, mine, 0)))
    }
}

/// The replay against the record, and what taking causes away gives.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WhatIf {
    /// Per step: the recorded step time and the replayed one (from the previous step's end, its
    /// last rank's, to this step's: the steps add up to the job's time).
    pub steps: Vec<ReplayStep>,
    /// The largest |replayed − recorded| / recorded over the steps, and the mean.
    pub max_error: f64,
    pub mean_error: f64,
    /// Waits the replay could not resolve (they kept their recorded time).
    pub unresolved: u32,
    /// The job has point-to-point exchanges, replayed as pairs (`exchanges` of them).
    pub p2p: bool,
    /// Point-to-point exchanges paired into the replay.
    #[serde(default)]
    pub exchanges: u32,
    /// The mean step as replayed, and with every rank at the typical speed (the ideal step).
    pub replayed_ns: i64,
    pub ideal_ns: i64,
    /// Per rank the others waited for: the mean step gained by bringing it to its peers.
    pub ranks: Vec<RankGain>,
    /// Ranks with peers for less than [`MIN_COMPARED_SHARE`] of their own time (pipeline stages
    /// without replicas): no gain is said for them, and the ideal step leaves them as recorded.
    #[serde(default)]
    pub alone: Vec<u32>,
    /// The typical step recorded, replayed and with the lead finding's cause taken away
    /// ([`timeline`]); set once the findings are judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<timeline::Timeline>,
}

impl WhatIf {
    /// Whether the replay holds well enough to give gains: it reproduces the recorded steps
    /// within [`MAX_REPLAY_ERROR`] on average and [`MAX_STEP_ERROR`] in every step. (A rank with
    /// no peers to be brought to, a pipeline stage without replicas, has no gain in `ranks`:
    /// [`MIN_COMPARED_SHARE`].)
    pub fn holds(&self) -> bool {
        self.mean_error <= MAX_REPLAY_ERROR && self.max_error <= MAX_STEP_ERROR
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReplayStep {
    pub step: u32,
    pub recorded_ns: i64,
    pub replayed_ns: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankGain {
    pub rank: u32,
    pub gain_ns: i64,
}

/// A send that ended this long before its receiver even posted the recv went eagerly (into the
/// peer's buffers); closer than that, the two clocks' alignment cannot tell it from a send that
/// waited for the recv (gloo's and NCCL's larger messages do).
pub const EAGER_MARGIN_NS: i64 = 100_000;

/// Exchanges of one rank whose spans overlap and closed this close together were waited for
/// together ([`Model::burst`]).
pub const BURST_NS: i64 = 500_000;

/// A late rank is brought to its peers only where it has peers; with peers for less than this
/// share of its own time (a pipeline stage without replicas, a rank alone on its line) its
/// gain is not said ([`Model::compared_shares`]).
pub const MIN_COMPARED_SHARE: f64 = 0.9;

/// Replays further than this from the record, on average over the steps, are not used for
/// gains; nor those further than [`MAX_STEP_ERROR`] in some step.
pub const MAX_REPLAY_ERROR: f64 = 0.05;
pub const MAX_STEP_ERROR: f64 = 0.15;

/// The model of the job: the parts' programs on the aligned clock, each rank's instances (in
/// the order its part listed them: the programs' indices), the matched collectives, and each
/// rank's [`Line`] for an exchange (`line`).
pub fn model(
    parts: &[RankPart],
    insts: &[(u32, Vec<Instance>)],
    ops: &[Op],
    offsets: &Offsets,
    line: &dyn Fn(u32, &Instance) -> Line,
) -> Model {
    let mut m = Model::default();
    // (rank, event) → instance index, per rank.
    let mut inst_of: FxHashMap<(u32, u32), u32> = FxHashMap::default();
    for (rank, v) in insts {
        for (k, x) in v.iter().enumerate() {
            inst_of.insert((*rank, x.event.0), k as u32);
        }
    }
    let no_insts: Vec<Instance> = Vec::new();
    for (src, o) in
        ops.iter().enumerate().filter(|(_, o)| !o.partial && o.ranks.len() >= 2 && !o.kind.is_p2p())
    {
        let idx = m.ops.len();
        m.ops.push(ModelOp {
            ranks: o.ranks.clone(),
            transfer_ns: o.transfer_ns,
            src: Some(src),
            eager_ns: None,
        });
        let last_start = o.start_ns.iter().copied().max().unwrap_or(0);
        for (j, (r, ev)) in o.ranks.iter().zip(&o.events).enumerate() {
            if let Some(&k) = inst_of.get(&(*r, ev.0)) {
                m.op_of.insert((*r, k), idx);
            }
            // The member's own completion: after the last start by its own duration's end.
            let end = o.start_ns.get(j).zip(o.dur_ns.get(j)).map_or(0, |(s, d)| s + d);
            let lag = end - last_start - o.transfer_ns;
            if lag > 0 {
                m.lag.insert((idx, *r), lag);
            }
        }
    }
    let host_issue: BTreeSet<u32> = parts
        .iter()
        .filter(|p| p.info.metrics_from == crate::analyze::breakdown::MetricsFrom::Cpu)
        .map(|p| p.info.rank)
        .collect();
    exchanges(&mut m, insts, &inst_of, offsets, &host_issue);
    for p in parts {
        let rank = p.info.rank;
        let off = offsets.of(rank);
        // The lane order of the rank's collectives and exchanges: one waits for the one before
        // it on its lane where it did (spans of a lane that overlap ran at once: gloo's async
        // sends and recvs are spans on the thread that issued them).
        let mut by_lane: BTreeMap<u32, Vec<(i64, i64, u32)>> = BTreeMap::new();
        let mine = insts.iter().find(|(r, _)| *r == rank).map_or(&no_insts, |(_, v)| v);
        for (k, x) in mine.iter().enumerate() {
            by_lane.entry(x.lane).or_default().push((x.start_ns, x.end_ns, k as u32));
        }
        let cpu_issue = host_issue.contains(&rank);
        for v in by_lane.values_mut() {
            v.sort_unstable();
            for (j, &(start, _, k)) in v.iter().enumerate() {
                // The one before it on the lane, where their spans did not overlap.
                let prev = j.checked_sub(1).and_then(|i| v.get(i)).filter(|p| p.1 <= start);
                let Some(&b) = m.op_of.get(&(rank, k)) else { continue };
                if let Some(&a) = prev.and_then(|p| m.op_of.get(&(rank, p.2))) {
                    m.lane_prev.insert((b, rank), a);
                }
                // A collective's start after it was ready and its lane free.
                let Some(x) = mine.get(k as usize).filter(|_| m.ops.get(b).is_some_and(|o| o.src.is_some()))
                else {
                    continue;
                };
                let ready = if cpu_issue { x.issued_ns } else { x.start_ns };
                let free = prev.map_or(i64::MIN, |p| p.1);
                let dispatch = start - ready.max(free);
                if dispatch > 0 {
                    m.dispatch.insert((b, rank), dispatch);
                }
            }
        }
        let mut progs = Vec::with_capacity(p.programs.len());
        for sp in &p.programs {
            let slots = slots(&m, rank, &sp.items, mine, line);
            for (item, slot) in sp.items.iter().zip(&slots) {
                if let Item::Own(d) = item {
                    *m.own.entry((sp.step, *slot)).or_default().by_rank.entry(rank).or_default() += d;
                }
            }
            progs.push((sp, slots));
        }
        m.region_free.add(rank, &p.regions, &progs);
        for (sp, slots) in progs {
            m.steps.entry(sp.step).or_default().insert(
                rank,
                Prog { start_ns: sp.start_ns - off, end_ns: sp.end_ns - off, items: sp.items.clone(), slots },
            );
        }
    }
    for at in m.own.values_mut() {
        at.sorted = at.by_rank.values().copied().collect();
        at.sorted.sort_unstable();
    }
    m
}

/// Each send paired with its recv, a two-member op of the model: it completes after both ends
/// are ready, by the recorded transfer (the recv's end after the later of the two, on the
/// aligned clock); a send that ended before its recv was posted was eager ([`ModelOp::eager_ns`]).
/// An end in two pairs (a batch exchanged with two peers) keeps its first; an end left
/// unpaired keeps its recorded wait as the rank's own time.
fn exchanges(
    m: &mut Model,
    insts: &[(u32, Vec<Instance>)],
    inst_of: &FxHashMap<(u32, u32), u32>,
    offsets: &Offsets,
    host_issue: &BTreeSet<u32>,
) {
    // Where an end is ready, as its program issues it ([`program`]): the host's call on CPU
    // ranks (gloo starts a send's span only once the thread is free again), the kernel's start
    // on GPU ranks.
    let ready = |rank: u32, x: &Instance| {
        (if host_issue.contains(&rank) { x.issued_ns } else { x.start_ns }) - offsets.of(rank)
    };
    let ranks: Vec<u32> = insts.iter().map(|(r, _)| *r).collect();
    let lists: Vec<&[Instance]> = insts.iter().map(|(_, v)| v.as_slice()).collect();
    let (pairs, _) = crate::analyze::pipeline::p2p::match_p2p(&ranks, &lists);
    // Each rank's exchanges by end, for [`closed_after_another`].
    let by_end: FxHashMap<u32, Vec<&Instance>> = insts
        .iter()
        .map(|(r, v)| {
            let mut ex: Vec<&Instance> = v.iter().filter(|x| x.p2p).collect();
            ex.sort_unstable_by_key(|x| x.end_ns);
            (*r, ex)
        })
        .collect();
    for (src, dst, send, recv, _) in pairs {
        let (Some(&ks), Some(&kr)) = (inst_of.get(&(src, send.event.0)), inst_of.get(&(dst, recv.event.0)))
        else {
            continue;
        };
        if src == dst || m.op_of.contains_key(&(src, ks)) || m.op_of.contains_key(&(dst, kr)) {
            continue;
        }
        let (os, or) = (offsets.of(src), offsets.of(dst));
        let both = ready(src, send).max(ready(dst, recv));
        let eager = send.kind == CollKind::Send && send.end_ns - os + EAGER_MARGIN_NS < recv.issued_ns - or;
        // A recv whose span closed just after another exchange of its rank (within
        // [`BURST_NS`], their spans overlapping) was held open by the host's wait for that one
        // (gloo waits for a batch's requests in order), not by its data: its data was there
        // once the send was done (a send completes when its bytes left for the peer that
        // posted the recv).
        let mut end = recv.end_ns - or;
        let held = send.kind == CollKind::Send
            && recv.kind == CollKind::Recv
            && by_end.get(&dst).is_some_and(|ex| closed_after_another(ex, recv));
        if held {
            end = end.min((send.end_ns - os).max(both));
        }
        let idx = m.ops.len();
        m.ops.push(ModelOp {
            ranks: vec![src, dst],
            transfer_ns: (end - both).max(0),
            src: None,
            eager_ns: eager.then(|| (send.end_ns - send.start_ns).max(0)),
        });
        m.op_of.insert((src, ks), idx);
        m.op_of.insert((dst, kr), idx);
        m.exchanges += 1;
    }
    m.p2p = insts.iter().any(|(_, v)| v.iter().any(|x| x.p2p));
    bursts(m, insts);
}

/// Whether another exchange of `x`'s rank (`ex`: its exchanges sorted by end) overlapping `x`
/// closed within [`BURST_NS`] before it.
fn closed_after_another(ex: &[&Instance], x: &Instance) -> bool {
    let from = ex.partition_point(|y| y.end_ns < x.end_ns - BURST_NS);
    ex[from..]
        .iter()
        .take_while(|y| y.end_ns <= x.end_ns)
        .any(|y| y.event != x.event && y.start_ns < x.end_ns && x.start_ns < y.end_ns)
}

/// Each rank's exchanges whose spans overlap and closed within [`BURST_NS`] of each other, in
/// one step: the host waited for them together ([`Model::burst`]).
fn bursts(m: &mut Model, insts: &[(u32, Vec<Instance>)]) {
    // Each exchange's steps at its two ends: one whose other end is in another step cannot
    // complete within this one and is left out.
    let mut steps_of: FxHashMap<usize, (u32, u32)> = FxHashMap::default();
    for (rank, v) in insts {
        for (k, x) in v.iter().enumerate() {
            if let Some(&op) = m.op_of.get(&(*rank, k as u32)) {
                let e = steps_of.entry(op).or_insert((x.step, x.step));
                *e = (e.0.min(x.step), e.1.max(x.step));
            }
        }
    }
    let in_one_step = |op: Option<&usize>| op.and_then(|o| steps_of.get(o)).is_some_and(|s| s.0 == s.1);
    for (rank, v) in insts {
        let mut ex: Vec<(i64, i64, u32, u32)> = v
            .iter()
            .enumerate()
            .filter(|(k, x)| x.p2p && in_one_step(m.op_of.get(&(*rank, *k as u32))))
            .map(|(k, x)| (x.end_ns, x.start_ns, x.step, k as u32))
            .collect();
        ex.sort_unstable();
        let mut i = 0;
        while i < ex.len() {
            // A run of ends each within BURST_NS of the one before, in one step, every span
            // started before the first one closed.
            let mut j = i + 1;
            while let Some(n) = ex.get(j) {
                let p = ex[j - 1];
                if n.0 - p.0 > BURST_NS || n.2 != ex[i].2 || n.1 >= ex[i].0 {
                    break;
                }
                j += 1;
            }
            if j - i >= 2 {
                // Each with those that closed before it (the host waits for a batch's
                // requests in order: the ones before held it).
                let group: Vec<(u32, usize)> =
                    ex[i..j].iter().filter_map(|e| m.op_of.get(&(*rank, e.3)).map(|&op| (e.3, op))).collect();
                for (n, &(k, op)) in group.iter().enumerate().skip(1) {
                    let before: Vec<usize> = group[..n].iter().map(|g| g.1).filter(|&o| o != op).collect();
                    m.burst.insert((*rank, k), before);
                }
            }
            i = j;
        }
    }
}

/// An own time's slot: the collective of the next issue or wait, the rank's next exchange item
/// on its line, else the tail.
fn slots(
    m: &Model,
    rank: u32,
    items: &[Item],
    mine: &[Instance],
    line: &dyn Fn(u32, &Instance) -> Line,
) -> Vec<Slot> {
    let inst = |item: &Item| match *item {
        Item::Issue(k) | Item::Wait { inst: k, .. } => Some(k),
        Item::Own(_) => None,
    };
    // Each exchange's place among the rank's exchanges of the step, in the order it issued them
    // (a stage's replicas issue the same ones in the same order; a wait is seen or not).
    let mut nth_of: FxHashMap<u32, u32> = FxHashMap::default();
    for item in items {
        if let Item::Issue(k) = *item {
            if mine.get(k as usize).is_some_and(|x| x.p2p) {
                let n = nth_of.len() as u32;
                nth_of.entry(k).or_insert(n);
            }
        }
    }
    let mut slots = vec![Slot::Tail; items.len()];
    let mut next = Slot::Tail;
    for (i, item) in items.iter().enumerate().rev() {
        if let Some((k, op)) = inst(item).and_then(|k| m.op_of.get(&(rank, k)).map(|&op| (k, op))) {
            let wait = matches!(item, Item::Wait { .. });
            next = match (mine.get(k as usize).filter(|x| x.p2p), nth_of.get(&k)) {
                (Some(x), Some(&nth)) => Slot::BeforeExchange { line: line(rank, x), nth, wait },
                // An exchange waited for in this step but issued in another: no place to line up.
                (Some(_), None) => Slot::BeforeExchange { line: Line::Alone(rank), nth: u32::MAX, wait },
                (None, _) if wait => Slot::BeforeWait(op),
                (None, _) => Slot::BeforeIssue(op),
            };
        }
        slots[i] = next;
    }
    slots
}

/// A counterfactual for the judging layer: some ranks brought to their peers, some collectives'
/// transfers changed (by their index in the job's matched collectives).
#[derive(Debug)]
pub struct Scenario<'m> {
    peers: Option<ToPeers<'m>>,
    even: Option<Even<'m>>,
    /// Rank → the factor every one of its own times is scaled by ([`Scenario::scaled`]).
    scale: BTreeMap<u32, f64>,
    transfer: FxHashMap<usize, i64>,
    /// A region's operator-free time taken out ([`Scenario::without_region`]).
    cut: Option<WithoutRegion<'m>>,
}

impl<'m> Scenario<'m> {
    /// `late` brought to their peers (none: as recorded), the collectives of `transfer`
    /// (index in the job's matched collectives → new transfer) changed.
    pub fn new(m: &'m Model, late: &BTreeSet<u32>, transfer: &BTreeMap<usize, i64>) -> Scenario<'m> {
        let by_src: FxHashMap<usize, usize> =
            m.ops.iter().enumerate().filter_map(|(k, o)| o.src.map(|s| (s, k))).collect();
        Scenario {
            peers: (!late.is_empty()).then(|| ToPeers { m, who: late.clone() }),
            even: None,
            scale: BTreeMap::new(),
            transfer: transfer.iter().filter_map(|(src, &t)| by_src.get(src).map(|&k| (k, t))).collect(),
            cut: None,
        }
    }

    /// Every rank's operator-free time in the region `name` (inside `parent`, "" at the top)
    /// taken out of its own time, where the model kept it ([`cut::RegionFree`]); `None` when it
    /// kept none of it.
    pub fn without_region(m: &'m Model, name: &str, parent: &str) -> Option<Scenario<'m>> {
        let at = m.region_free.by_region.get(&(name.to_string(), parent.to_string()))?;
        let mut s = Scenario::new(m, &BTreeSet::new(), &BTreeMap::new());
        s.cut = Some(WithoutRegion { m, at });
        Some(s)
    }

    /// The work of `group` spread evenly over its members, the total unchanged: each member's
    /// own time in every place at the mean of the members' own time there (an expert-parallel
    /// group's tokens routed evenly: the hot expert's rank computes less, the others more), and
    /// the collectives of `transfer` changed (its all_to_alls moving their members' mean).
    pub fn even(m: &'m Model, group: &BTreeSet<u32>, transfer: &BTreeMap<usize, i64>) -> Scenario<'m> {
        let mut s = Scenario::new(m, &BTreeSet::new(), transfer);
        s.even = Some(Even { m, who: group.clone() });
        s
    }

    /// Each rank of `factors` with every own time scaled by its factor (a pipeline's stages
    /// balanced: work moved from the longest stage to the others, the total unchanged).
    pub fn scaled(m: &'m Model, factors: &BTreeMap<u32, f64>) -> Scenario<'m> {
        let mut s = Scenario::new(m, &BTreeSet::new(), &BTreeMap::new());
        s.scale =
            factors.iter().filter(|(_, k)| k.is_finite() && **k >= 0.0).map(|(&r, &k)| (r, k)).collect();
        s
    }

    /// The mean step of the job replayed under it.
    pub fn mean_step_ns(&self, m: &Model) -> f64 {
        replay(m, self).mean_ns()
    }
}

impl Change for Scenario<'_> {
    fn own(&self, rank: u32, step: u32, slot: Slot, recorded_ns: i64) -> i64 {
        let d = self.peers.as_ref().map_or(recorded_ns, |p| p.own(rank, step, slot, recorded_ns));
        let d = self.even.as_ref().map_or(d, |e| e.own(rank, step, slot, d));
        let d = self.cut.as_ref().map_or(d, |c| c.own(rank, step, slot, d));
        self.scale.get(&rank).map_or(d, |k| (d as f64 * k) as i64)
    }
    fn transfer(&self, op: usize, recorded_ns: i64) -> i64 {
        self.transfer.get(&op).copied().unwrap_or(recorded_ns)
    }
}

/// Own times no longer than the peers' median in the same place (the ranks in `who`).
#[derive(Debug)]
struct ToPeers<'m> {
    m: &'m Model,
    who: BTreeSet<u32>,
}

impl Change for ToPeers<'_> {
    fn own(&self, rank: u32, step: u32, slot: Slot, recorded_ns: i64) -> i64 {
        if !self.who.contains(&rank) {
            return recorded_ns;
        }
        let Some((mine, typical)) = self.m.own.get(&(step, slot)).and_then(|at| at.mine_and_peers(rank))
        else {
            return recorded_ns;
        };
        if mine <= 0 || (mine as f64) <= typical {
            return recorded_ns;
        }
        // The rank's own time in this place, scaled down to the peers' median.
        (recorded_ns as f64 * typical / mine as f64) as i64
    }
}

/// Own times less a region's operator-free time in the same place ([`Scenario::without_region`]):
/// each own time of a place shrinks by the region's share of the rank's own time there.
#[derive(Debug)]
struct WithoutRegion<'m> {
    m: &'m Model,
    at: &'m cut::FreeAt,
}

impl Change for WithoutRegion<'_> {
    fn own(&self, rank: u32, step: u32, slot: Slot, recorded_ns: i64) -> i64 {
        let Some(&free) = self.at.get(&(rank, step, slot)) else { return recorded_ns };
        let total = self.m.own.get(&(step, slot)).and_then(|o| o.by_rank.get(&rank)).copied().unwrap_or(0);
        if total <= 0 {
            return recorded_ns;
        }
        (recorded_ns as f64 * (1.0 - (free as f64 / total as f64).min(1.0))) as i64
    }
}

/// Own times at the mean of the members' of `who` in the same place ([`Scenario::even`]).
#[derive(Debug)]
struct Even<'m> {
    m: &'m Model,
    who: BTreeSet<u32>,
}

impl Change for Even<'_> {
    fn own(&self, rank: u32, step: u32, slot: Slot, recorded_ns: i64) -> i64 {
        if !self.who.contains(&rank) {
            return recorded_ns;
        }
        let Some(at) = self.m.own.get(&(step, slot)) else { return recorded_ns };
        let Some(&mine) = at.by_rank.get(&rank) else { return recorded_ns };
        let members: Vec<i64> =
            at.by_rank.iter().filter(|(r, _)| self.who.contains(r)).map(|(_, &d)| d.max(0)).collect();
        if mine <= 0 || members.len() < 2 {
            return recorded_ns;
        }
        let mean = members.iter().sum::<i64>() as f64 / members.len() as f64;
        (recorded_ns as f64 * mean / mine as f64) as i64
    }
}

/// The what-if figures of the job: `late` the ranks the others waited for. `None` without
/// collectives to replay.
pub fn measure(m: &Model, late: &BTreeSet<u32>) -> Option<WhatIf> {
    if m.ops.is_empty() || m.steps.is_empty() {
        return None;
    }
    let base = replay(m, &AsRecorded);
    let recorded: BTreeMap<u32, i64> = replay::recorded(m).into_iter().collect();
    let steps: Vec<ReplayStep> = base
        .steps
        .iter()
        .filter_map(|&(step, replayed_ns)| {
            recorded.get(&step).map(|&recorded_ns| ReplayStep { step, recorded_ns, replayed_ns })
        })
        .collect();
    let errors: Vec<f64> = steps
        .iter()
        .filter(|s| s.recorded_ns > 0)
        .map(|s| (s.replayed_ns - s.recorded_ns).abs() as f64 / s.recorded_ns as f64)
        .collect();
    let max_error = errors.iter().copied().fold(0.0, f64::max);
    let mean_error = if errors.is_empty() { 0.0 } else { errors.iter().sum::<f64>() / errors.len() as f64 };
    let all: BTreeSet<u32> = m.steps.values().flat_map(|r| r.keys().copied()).collect();
    let ideal = replay(m, &ToPeers { m, who: all.clone() });
    // A rank with peers for too little of its own time (a pipeline stage without replicas)
    // cannot be brought to them: no gain is said for it.
    let shares = m.compared_shares();
    let share = |rank: u32| shares.get(&rank).copied().unwrap_or(0.0);
    let ranks = late
        .iter()
        .filter(|&&rank| share(rank) >= MIN_COMPARED_SHARE)
        .take(8)
        .map(|&rank| {
            let fixed = replay(m, &ToPeers { m, who: BTreeSet::from([rank]) });
            RankGain { rank, gain_ns: (base.mean_ns() - fixed.mean_ns()).max(0.0) as i64 }
        })
        .collect();
    Some(WhatIf {
        steps,
        max_error,
        mean_error,
        unresolved: base.unresolved,
        p2p: m.p2p,
        exchanges: m.exchanges,
        replayed_ns: base.mean_ns() as i64,
        ideal_ns: ideal.mean_ns() as i64,
        ranks,
        alone: all.iter().copied().filter(|&r| share(r) < MIN_COMPARED_SHARE).collect(),
        timeline: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::stats::median_f;

    #[test]
    fn the_peers_median_is_median_f_of_the_others() {
        let cases: [&[i64]; 5] =
            [&[5, 1], &[3, 3, 3], &[9, 1, 4, 4, 7], &[2, 8, 6, 6], &[10, 20, 30, 40, 50, 60]];
        for vals in cases {
            let by_rank: FxHashMap<u32, i64> = vals.iter().enumerate().map(|(r, &v)| (r as u32, v)).collect();
            let mut sorted = vals.to_vec();
            sorted.sort_unstable();
            let at = OwnAt { by_rank, sorted };
            for (r, &v) in vals.iter().enumerate() {
                let others: Vec<f64> =
                    vals.iter().enumerate().filter(|(q, _)| *q != r).map(|(_, &x)| x as f64).collect();
                assert_eq!(at.mine_and_peers(r as u32), Some((v, median_f(others))), "{vals:?} rank {r}");
            }
        }
        let lone = OwnAt { by_rank: FxHashMap::from_iter([(0, 5)]), sorted: vec![5] };
        assert_eq!(lone.mine_and_peers(0), None);
    }

    /// Two ranks, one step: each does its own work, issues the exchange `0` (rank 0 sends, rank
    /// 1 receives) and waits for it, then a tail (the sender's 20, the receiver's 3).
    fn exchange(send_first: i64, recv_first: i64, transfer_ns: i64, eager_ns: Option<i64>) -> Model {
        let prog = |first: i64, tail: i64| Prog {
            start_ns: 0,
            end_ns: 0,
            items: vec![
                Item::Own(first),
                Item::Issue(0),
                Item::Wait { inst: 0, recorded_ns: 1, wake_ns: 0 },
                Item::Own(tail),
            ],
            slots: vec![Slot::Tail; 4],
        };
        let mut m = Model::default();
        m.ops.push(ModelOp { ranks: vec![0, 1], transfer_ns, src: None, eager_ns });
        m.op_of.insert((0, 0), 0);
        m.op_of.insert((1, 0), 0);
        m.steps.insert(0, BTreeMap::from([(0, prog(send_first, 20)), (1, prog(recv_first, 3))]));
        m
    }

    #[test]
    fn a_collective_keeps_each_members_dispatch_lag_and_wake() {
        // A collective of the job's (`src`): rank 1 picks it up 3 after issuing it (dispatch),
        // rank 0 sees it complete 2 after the others (lag) and resumes 1 after that (wake).
        let mut m = exchange(10, 50, 4, None);
        if let Some(o) = m.ops.first_mut() {
            o.src = Some(0);
        }
        m.dispatch.insert((0, 1), 3);
        m.lag.insert((0, 0), 2);
        if let Some(p) = m.steps.get_mut(&0).and_then(|s| s.get_mut(&0)) {
            p.items[2] = Item::Wait { inst: 0, recorded_ns: 1, wake_ns: 1 };
        }
        // Started on both at 50 + 3, done at 57; rank 0 resumes at 57 + 2 + 1 and ends its
        // tail of 20 at 80; rank 1 at 57 + 3 = 60.
        assert_eq!(replay(&m, &AsRecorded).steps, vec![(0, 80)]);
        // Bringing rank 1's own time to its peer's keeps all three: 10 + 3 + 4 + 2 + 1 + 20.
        let mut own = OwnAt::default();
        own.by_rank.extend([(0, 10), (1, 50)]);
        own.sorted = vec![10, 50];
        let mut m2 = m.clone();
        m2.own.insert((0, Slot::Tail), own);
        let late = ToPeers { m: &m2, who: BTreeSet::from([1]) };
        assert_eq!(replay(&m2, &late).steps, vec![(0, 40)]);
    }

    #[test]
    fn an_exchange_completes_after_both_ends_started_unless_sent_eagerly() {
        // Rendezvous: both ends done at the later start (50) plus the transfer (4); the sender
        // waited for the late receiver: the step ends with its tail, at 54 + 20.
        let r = replay(&exchange(10, 50, 4, None), &AsRecorded);
        assert_eq!(r.steps, vec![(0, 74)]);
        assert_eq!(r.unresolved, 0);
        // Eager: the sender is done 2 after it started (12) and ends at 32; the receiver still
        // waits for the data (54), then its tail: the step ends at 57.
        let r = replay(&exchange(10, 50, 4, Some(2)), &AsRecorded);
        assert_eq!(r.steps, vec![(0, 57)]);
        // A receiver that posts first waits for the sender either way: 40 + 4 + 20.
        assert_eq!(replay(&exchange(40, 5, 4, None), &AsRecorded).steps, vec![(0, 64)]);
    }
}
