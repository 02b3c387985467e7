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
//!   fixed).
//!
//! Point-to-point exchanges are not in the model yet: a job that has them says so (`p2p`) and
//! takes no gain from the replay.

pub mod program;
pub mod replay;

use std::collections::{BTreeMap, BTreeSet};

use crate::model::FxHashMap;
use serde::{Deserialize, Serialize};

use super::collectives::{Offsets, Op};
use super::instances::Instance;
use super::RankPart;
use program::Item;
use replay::{replay, AsRecorded, Change, Slot};

/// A collective of the model: its members and its transfer.
#[derive(Debug, Clone)]
pub struct ModelOp {
    pub ranks: Vec<u32>,
    pub transfer_ns: i64,
    /// Its index in the job's matched collectives (`Measured::ops`).
    pub src: usize,
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
    /// Some rank has point-to-point exchanges (not modelled).
    pub p2p: bool,
    /// (step, slot) → the ranks' own time there, for the counterfactuals that bring a rank to
    /// its peers (computed once, read by every replay).
    pub own: BTreeMap<(u32, Slot), OwnAt>,
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
        let n = self.sorted.len().checked_sub(1).filter(|&n| n > 0)?;
        // The others: the sorted list without one entry of the rank's value.
        let skip = self.sorted.partition_point(|&x| x < mine);
        let at = |j: usize| self.sorted.get(if j < skip { j } else { j + 1 }).copied().unwrap_or(0) as f64;
        Some((mine, if n % 2 == 1 { at(n / 2) } else { (at(n / 2 - 1) + at(n / 2)) / 2.0 }))
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
    /// The job has point-to-point exchanges, which the model leaves to the ranks' own time.
    pub p2p: bool,
    /// The mean step as replayed, and with every rank at the typical speed (the ideal step).
    pub replayed_ns: i64,
    pub ideal_ns: i64,
    /// Per rank the others waited for: the mean step gained by bringing it to its peers.
    pub ranks: Vec<RankGain>,
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

/// Replays further than this from the record, on average over the steps, are not used for
/// gains; nor those further than [`MAX_STEP_ERROR`] in some step.
pub const MAX_REPLAY_ERROR: f64 = 0.05;
pub const MAX_STEP_ERROR: f64 = 0.15;

/// The model of the job: the parts' programs on the aligned clock, each rank's instances (in
/// the order its part listed them: the programs' indices), the matched collectives.
pub fn model(parts: &[RankPart], insts: &[(u32, Vec<Instance>)], ops: &[Op], offsets: &Offsets) -> Model {
    let mut m = Model::default();
    // (rank, event) → instance index, per rank.
    let mut inst_of: FxHashMap<(u32, u32), u32> = FxHashMap::default();
    for (rank, v) in insts {
        for (k, x) in v.iter().enumerate() {
            inst_of.insert((*rank, x.event.0), k as u32);
        }
    }
    let no_insts: Vec<Instance> = Vec::new();
    m.p2p = insts.iter().any(|(_, v)| v.iter().any(|x| x.p2p));
    for (src, o) in
        ops.iter().enumerate().filter(|(_, o)| !o.partial && o.ranks.len() >= 2 && !o.kind.is_p2p())
    {
        let idx = m.ops.len();
        m.ops.push(ModelOp { ranks: o.ranks.clone(), transfer_ns: o.transfer_ns, src });
        for (r, ev) in o.ranks.iter().zip(&o.events) {
            if let Some(&k) = inst_of.get(&(*r, ev.0)) {
                m.op_of.insert((*r, k), idx);
            }
        }
    }
    for p in parts {
        let rank = p.info.rank;
        let off = offsets.of(rank);
        // The lane order of the rank's collectives.
        let mut by_lane: BTreeMap<u32, Vec<(i64, u32)>> = BTreeMap::new();
        let mine = insts.iter().find(|(r, _)| *r == rank).map_or(&no_insts, |(_, v)| v);
        for (k, x) in mine.iter().enumerate() {
            by_lane.entry(x.lane).or_default().push((x.start_ns, k as u32));
        }
        for v in by_lane.values_mut() {
            v.sort_unstable();
            for w in v.windows(2) {
                if let (Some(&a), Some(&b)) = (m.op_of.get(&(rank, w[0].1)), m.op_of.get(&(rank, w[1].1))) {
                    m.lane_prev.insert((b, rank), a);
                }
            }
        }
        for sp in &p.programs {
            // An own time's slot: the collective of the next issue or wait, else the tail.
            let mut slots = vec![Slot::Tail; sp.items.len()];
            let mut next = Slot::Tail;
            for (i, item) in sp.items.iter().enumerate().rev() {
                match item {
                    Item::Issue(inst) => {
                        if let Some(&op) = m.op_of.get(&(rank, *inst)) {
                            next = Slot::BeforeIssue(op);
                        }
                    }
                    Item::Wait { inst, .. } => {
                        if let Some(&op) = m.op_of.get(&(rank, *inst)) {
                            next = Slot::BeforeWait(op);
                        }
                    }
                    Item::Own(_) => {}
                }
                slots[i] = next;
            }
            for (item, slot) in sp.items.iter().zip(&slots) {
                if let Item::Own(d) = item {
                    *m.own.entry((sp.step, *slot)).or_default().by_rank.entry(rank).or_default() += d;
                }
            }
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

/// A counterfactual for the judging layer: some ranks brought to their peers, some collectives'
/// transfers changed (by their index in the job's matched collectives).
#[derive(Debug)]
pub struct Scenario<'m> {
    peers: Option<ToPeers<'m>>,
    transfer: FxHashMap<usize, i64>,
}

impl<'m> Scenario<'m> {
    /// `late` brought to their peers (none: as recorded), the collectives of `transfer`
    /// (index in the job's matched collectives → new transfer) changed.
    pub fn new(m: &'m Model, late: &BTreeSet<u32>, transfer: &BTreeMap<usize, i64>) -> Scenario<'m> {
        let by_src: FxHashMap<usize, usize> = m.ops.iter().enumerate().map(|(k, o)| (o.src, k)).collect();
        Scenario {
            peers: (!late.is_empty()).then(|| ToPeers { m, who: late.clone() }),
            transfer: transfer.iter().filter_map(|(src, &t)| by_src.get(src).map(|&k| (k, t))).collect(),
        }
    }

    /// The mean step of the job replayed under it.
    pub fn mean_step_ns(&self, m: &Model) -> f64 {
        replay(m, self).mean_ns()
    }
}

impl Change for Scenario<'_> {
    fn own(&self, rank: u32, step: u32, slot: Slot, recorded_ns: i64) -> i64 {
        self.peers.as_ref().map_or(recorded_ns, |p| p.own(rank, step, slot, recorded_ns))
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
    let ideal = replay(m, &ToPeers { m, who: all });
    let ranks = late
        .iter()
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
        replayed_ns: base.mean_ns() as i64,
        ideal_ns: ideal.mean_ns() as i64,
        ranks,
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
}
