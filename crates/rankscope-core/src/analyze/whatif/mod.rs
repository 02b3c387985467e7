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
use super::stats::median_f;
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
            m.steps.entry(sp.step).or_default().insert(
                rank,
                Prog { start_ns: sp.start_ns - off, end_ns: sp.end_ns - off, items: sp.items.clone(), slots },
            );
        }
    }
    m
}

/// A counterfactual for the judging layer: some ranks brought to their peers, some collectives'
/// transfers changed (by their index in the job's matched collectives).
#[derive(Debug)]
pub struct Scenario {
    peers: Option<ToPeers>,
    transfer: FxHashMap<usize, i64>,
}

impl Scenario {
    /// `late` brought to their peers (none: as recorded), the collectives of `transfer`
    /// (index in the job's matched collectives → new transfer) changed.
    pub fn new(m: &Model, late: &BTreeSet<u32>, transfer: &BTreeMap<usize, i64>) -> Scenario {
        let by_src: FxHashMap<usize, usize> = m.ops.iter().enumerate().map(|(k, o)| (o.src, k)).collect();
        Scenario {
            peers: (!late.is_empty()).then(|| ToPeers::new(m, late.clone())),
            transfer: transfer.iter().filter_map(|(src, &t)| by_src.get(src).map(|&k| (k, t))).collect(),
        }
    }

    /// The mean step of the job replayed under it.
    pub fn mean_step_ns(&self, m: &Model) -> f64 {
        replay(m, self).mean_ns()
    }
}

impl Change for Scenario {
    fn own(&self, rank: u32, step: u32, slot: Slot, recorded_ns: i64) -> i64 {
        self.peers.as_ref().map_or(recorded_ns, |p| p.own(rank, step, slot, recorded_ns))
    }
    fn transfer(&self, op: usize, recorded_ns: i64) -> i64 {
        self.transfer.get(&op).copied().unwrap_or(recorded_ns)
    }
}

/// Own times no longer than the peers' median in the same place (the ranks in `who`).
#[derive(Debug)]
struct ToPeers {
    who: BTreeSet<u32>,
    /// (step, slot) → per rank, the own time there (summed when a rank has several).
    own: BTreeMap<(u32, Slot), BTreeMap<u32, i64>>,
}

impl ToPeers {
    fn new(m: &Model, who: BTreeSet<u32>) -> ToPeers {
        let mut own: BTreeMap<(u32, Slot), BTreeMap<u32, i64>> = BTreeMap::new();
        for (&step, ranks) in &m.steps {
            for (&rank, p) in ranks {
                for (item, slot) in p.items.iter().zip(&p.slots) {
                    if let Item::Own(d) = item {
                        *own.entry((step, *slot)).or_default().entry(rank).or_default() += d;
                    }
                }
            }
        }
        ToPeers { who, own }
    }
}

impl Change for ToPeers {
    fn own(&self, rank: u32, step: u32, slot: Slot, recorded_ns: i64) -> i64 {
        if !self.who.contains(&rank) {
            return recorded_ns;
        }
        let Some(by) = self.own.get(&(step, slot)) else { return recorded_ns };
        let mine = by.get(&rank).copied().unwrap_or(0);
        let peers: Vec<f64> = by.iter().filter(|(r, _)| **r != rank).map(|(_, &d)| d as f64).collect();
        if peers.is_empty() || mine <= 0 {
            return recorded_ns;
        }
        let typical = median_f(peers.clone());
        if (mine as f64) <= typical {
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
    let ideal = replay(m, &ToPeers::new(m, all));
    let ranks = late
        .iter()
        .take(8)
        .map(|&rank| {
            let fixed = replay(m, &ToPeers::new(m, BTreeSet::from([rank])));
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
