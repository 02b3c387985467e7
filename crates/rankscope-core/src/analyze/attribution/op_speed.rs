//! Each rank's operators against the same operators on the other ranks, per phase group
//! ([`op_speed`]): which rank runs the same work slower.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::analyze::regions::Phase;
use crate::analyze::stats::median_without;
use crate::analyze::RankPart;

/// The operators a phase group holds: the work that grows with the batch (forward, backward,
/// the rest of the step) and the optimizer's, whose work depends on the parameters only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpGroup {
    Work,
    Optimizer,
}

impl OpGroup {
    fn of(ph: Phase) -> Option<OpGroup> {
        match ph {
            Phase::Optimizer => Some(OpGroup::Optimizer),
            Phase::DataLoading => None,
            _ => Some(OpGroup::Work),
        }
    }
}

/// How long a rank's operators typically take against the same operators on the other ranks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpSpeed {
    pub rank: u32,
    pub group: OpGroup,
    /// The duration-weighted median, over the operator instances this rank shares with the
    /// others, of (its typical duration / the other ranks' median of theirs); weights are the
    /// others' durations. 1 = the same operators run as long as elsewhere.
    pub ratio: f64,
    /// Instances compared.
    pub instances: u32,
    /// Sums of the compared instances' typical durations: this rank's, the others' medians'.
    pub rank_ns: i64,
    pub others_ns: i64,
    /// The instance of the group whose typical duration exceeds the others' the most.
    #[serde(default)]
    pub top: Option<OpExcess>,
    /// The shared instances whose input shapes this rank and some other rank both recorded
    /// ([`crate::analyze::regions::OpTypical::shapes`]), and of those, the ones on which this
    /// rank's shapes are the other ranks' most common: the same inputs. Equal shapes with
    /// longer durations are the same work done slower; other shapes, other work.
    #[serde(default)]
    pub shapes_compared: u32,
    #[serde(default)]
    pub shapes_same: u32,
    /// The operators this rank runs and its peers do not: work the others do not have
    /// ([`ExtraOps`]).
    #[serde(default, skip_serializing_if = "ExtraOps::is_empty")]
    pub extra: ExtraOps,
}

/// Operators one rank runs that the others do not, per step: the same program run with more in
/// it (a forward computed again in backward by activation checkpointing, extra passes, a
/// rank-dependent branch), which no timing of the shared instances shows. Two kinds count:
/// an instance at least half of the other ranks do not run (its whole duration less their
/// median, the ranks without it at 0), and a shared instance that runs more operators inside
/// it than on the others (an autograd node recomputing its block: its duration less theirs).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ExtraOps {
    /// Operators per step (each counted in the share of the steps it ran in): an instance the
    /// others lack with what it runs, or what a shared one runs beyond the others' median.
    pub instances: f64,
    /// Their typical durations per step, less the other ranks' median (absent = 0).
    pub ns: i64,
    /// Of `ns`, in backward: instances of operators this rank also runs in forward, or shared
    /// ones running more: the forward computed again during backward (activation
    /// checkpointing).
    pub rerun_ns: i64,
    /// The operators with the most of `ns` (the lacking instance's name, or the shared one's
    /// that runs more), with their instances per step (at most [`EXTRA_NAMES`]).
    pub names: Vec<(String, f64)>,
}

impl ExtraOps {
    pub fn is_empty(&self) -> bool {
        self.instances <= 0.0
    }

    /// Whether it is work worth a word beside `shared_ns`, the rank's work it shares with the
    /// others ([`OpSpeed::rank_ns`]): at least [`EXTRA_SHARE`] of it (one `aten::item` more
    /// in a step is not another program).
    pub fn matters(&self, shared_ns: i64) -> bool {
        self.ns as f64 >= EXTRA_SHARE * shared_ns as f64 && self.ns > 0
    }

    /// Whether most of it is the forward computed again in backward (`rerun_ns`).
    pub fn is_rerun(&self) -> bool {
        2 * self.rerun_ns >= self.ns
    }
}

/// Extra operators below this share of the shared work are said in the JSON, and nowhere else.
pub const EXTRA_SHARE: f64 = 0.02;

/// How PyTorch's autograd engine names the frame of each backward node it runs.
const AUTOGRAD_NODE: &str = "autograd::engine::evaluate_function: ";

/// At most this many operator names are kept in [`ExtraOps::names`].
pub const EXTRA_NAMES: usize = 3;

impl OpSpeed {
    /// What the recorded input shapes say of this rank's work against the others': `Some(true)`
    /// when at least [`MIN_SHAPED_INSTANCES`] shared instances carry shapes and nine in ten of
    /// them ran on the others' shapes, `Some(false)` when half or more did not; `None` without
    /// shapes or in between.
    pub fn same_inputs(&self) -> Option<bool> {
        if (self.shapes_compared as usize) < MIN_SHAPED_INSTANCES {
            return None;
        }
        let same = f64::from(self.shapes_same) / f64::from(self.shapes_compared);
        if same >= 0.9 {
            Some(true)
        } else if same <= 0.5 {
            Some(false)
        } else {
            None
        }
    }
}

/// At least this many shared instances with recorded shapes make [`OpSpeed::same_inputs`] (a
/// model's forward has one `aten::linear` per layer: three layers are enough to tell).
pub const MIN_SHAPED_INSTANCES: usize = 3;

/// One operator instance of a rank against the same instance on the other ranks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpExcess {
    pub phase: Phase,
    pub name: String,
    pub ordinal: u32,
    /// Typical duration here, and the other ranks' median of theirs.
    pub rank_ns: i64,
    pub others_ns: i64,
    /// The same for its own time (no operator nested in it running).
    pub own_rank_ns: i64,
    pub own_others_ns: i64,
    /// It runs other operators (a frame, as an autograd node around its hooks), not a leaf.
    pub nests: bool,
}

/// At least this many shared operator instances make a ratio.
pub const MIN_OP_INSTANCES: usize = 8;

/// Per rank and [`OpGroup`]: its operators' typical durations against the same operator
/// instances on the other ranks ([`crate::analyze::regions::OpTypical`]: median over the steps of each
/// instance).
///
/// **Why.** A rank late because it has more work (a larger batch, longer sequences) runs the
/// same operators on larger inputs: each of its forward and backward operators takes longer
/// every step, while its optimizer's, whose work depends on the parameters only, take as long as
/// elsewhere. A slower device slows every operator alike, the optimizer's too. Preemption on an
/// oversubscribed host lengthens *some* instances in *some* steps, which the median over steps
/// and the weighted median over instances both leave out: a rank whose operators typically run
/// as fast as elsewhere but whose phases took longer lost that time in bursts, not in larger
/// work. Phase totals cannot tell these apart: the rank that computed longest is also the one the
/// host's scheduler lets wait in its next phase.
pub fn op_speed(parts: &[RankPart]) -> Vec<OpSpeed> {
    // Instance (group, phase, name, ordinal) → (rank, its typical figures).
    type Instance<'a> = (OpGroup, Phase, &'a str, u32);
    let mut by_key: BTreeMap<Instance<'_>, Vec<(u32, &crate::analyze::regions::OpTypical)>> = BTreeMap::new();
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    for p in parts {
        if !seen.insert(p.info.rank) {
            continue;
        }
        let rr = &p.regions;
        for o in &rr.op_typical {
            let (Some(g), Some(name)) = (OpGroup::of(o.phase), rr.op_names.get(o.name as usize)) else {
                continue;
            };
            by_key.entry((g, o.phase, name.as_str(), o.ordinal)).or_default().push((p.info.rank, o));
        }
    }
    // The median of the others' values: `sorted` less one occurrence of `mine`.
    // (Durations and counts are not negative: the float's truncation is the integer halving.)
    fn others_median(sorted: &[i64], mine: i64) -> i64 {
        median_without(sorted, mine, 0) as i64
    }
    // Per (rank, group): (ratio, weight) per shared instance, the sums, the largest excess.
    #[derive(Default)]
    struct Acc {
        ratios: Vec<(f64, f64)>,
        rank_ns: i64,
        others_ns: i64,
        top: Option<OpExcess>,
        shapes_compared: u32,
        shapes_same: u32,
        extra: Extra,
    }
    #[derive(Default)]
    struct Extra {
        instances: f64,
        ns: f64,
        rerun_ns: f64,
        by_name: BTreeMap<String, (f64, f64)>,
    }
    // A rank whose kept instances were cut at [`MAX_OP_TYPICAL`] may lack an instance only
    // because it was shorter than its shortest kept one: it is not counted as lacking it then.
    let mut floor: BTreeMap<u32, i64> = BTreeMap::new();
    // Each rank's profiled steps (the most any of its instances ran in), and its forward
    // operators' names.
    let mut n_steps: BTreeMap<u32, u32> = BTreeMap::new();
    let mut forward: BTreeSet<(u32, &str)> = BTreeSet::new();
    {
        let mut seen: BTreeSet<u32> = BTreeSet::new();
        // Ranks with no operator instance (a rank that left early) lack nothing: not counted.
        for p in parts.iter().filter(|p| seen.insert(p.info.rank) && !p.regions.op_typical.is_empty()) {
            let rr = &p.regions;
            let full = rr.op_typical.len() >= crate::analyze::regions::MAX_OP_TYPICAL;
            floor.insert(
                p.info.rank,
                if full { rr.op_typical.iter().map(|o| o.median_ns).min().unwrap_or(0) } else { 0 },
            );
            n_steps.insert(p.info.rank, rr.op_typical.iter().map(|o| o.steps).max().unwrap_or(0));
            for o in rr.op_typical.iter().filter(|o| o.phase == Phase::Forward) {
                if let Some(name) = rr.op_names.get(o.name as usize) {
                    forward.insert((p.info.rank, name.as_str()));
                }
            }
        }
    }
    let mut floors: Vec<i64> = floor.values().copied().collect();
    floors.sort_unstable();
    let mut acc: BTreeMap<(u32, OpGroup), Acc> = BTreeMap::new();
    // An instance only one rank runs (a hook registered on that rank only) took 0 on the
    // others: it has an excess but no ratio.
    for ((g, phase, name, ordinal), v) in &by_key {
        let mut sorted: Vec<i64> = v.iter().map(|x| x.1.median_ns).collect();
        sorted.sort_unstable();
        let mut own_sorted: Vec<i64> = v.iter().map(|x| x.1.own_median_ns).collect();
        own_sorted.sort_unstable();
        let mut nested: Vec<i64> = v.iter().map(|x| i64::from(x.1.nested)).collect();
        nested.sort_unstable();
        // The cut floors of the ranks that run it, sorted: each instance counts the others
        // lacking it in O(log n), whatever the number of ranks.
        let mut having_floors: Vec<i64> = v.iter().map(|x| floor.get(&x.0).copied().unwrap_or(0)).collect();
        having_floors.sort_unstable();
        let nests = v.iter().any(|x| x.1.nests);
        // The instance's recorded shapes on every rank that has them, sorted: the others'
        // most common is what the rank's are compared with.
        let mut shapes: Vec<u64> = v.iter().filter_map(|x| x.1.shapes).collect();
        shapes.sort_unstable();
        for &(rank, o) in v {
            let mine = o.median_ns;
            let others = others_median(&sorted, mine);
            let e = acc.entry((rank, *g)).or_default();
            let share = f64::from(o.steps) / f64::from(n_steps.get(&rank).copied().unwrap_or(1).max(1));
            // The other ranks without this instance, but for those whose kept instances were cut
            // above its duration.
            let cut_above = floors.partition_point(|&f| f < mine);
            // (Saturating: a damaged part may list an instance twice.)
            let lacking = cut_above.saturating_sub(having_floors.partition_point(|&f| f < mine));
            let having = v.len().saturating_sub(1);
            // An instance most others do not run: all of it, and what it runs, is more work. A
            // shared one that runs more operators inside it than on the others (an autograd node
            // recomputing its forward): its excess duration.
            let alone = lacking > 0 && lacking >= having;
            let (more, ops) = if alone {
                ((mine as f64 - median_without(&sorted, mine, lacking)).max(0.0), 1.0 + f64::from(o.nested))
            } else {
                let theirs = others_median(&nested, i64::from(o.nested));
                if having > 0 && i64::from(o.nested) > theirs && mine > others {
                    ((mine - others) as f64, (i64::from(o.nested) - theirs) as f64)
                } else {
                    (0.0, 0.0)
                }
            };
            if let Some(h) = o.shapes.filter(|_| shapes.len() >= 2) {
                e.shapes_compared += 1;
                if others_mode(&shapes, h) == Some(h) {
                    e.shapes_same += 1;
                }
            }
            let x = &mut e.extra;
            if more > 0.0 {
                x.instances += ops * share;
                x.ns += more * share;
                // In backward (or an autograd node: backward's, whatever the annotations say), an
                // operator of the rank's forward, or a node running more: the forward computed
                // again.
                let backward = *phase == Phase::Backward || name.starts_with(AUTOGRAD_NODE);
                if backward && (!alone || forward.contains(&(rank, *name))) {
                    x.rerun_ns += more * share;
                }
                let n = x.by_name.entry(name.to_string()).or_default();
                n.0 += more * share;
                n.1 += share;
            }
            if e.top.as_ref().is_none_or(|t| mine - others > t.rank_ns - t.others_ns) {
                e.top = Some(OpExcess {
                    phase: *phase,
                    name: name.to_string(),
                    ordinal: *ordinal,
                    rank_ns: mine,
                    others_ns: others,
                    own_rank_ns: o.own_median_ns,
                    own_others_ns: others_median(&own_sorted, o.own_median_ns),
                    nests,
                });
            }
            if others <= 0 {
                continue;
            }
            e.ratios.push((mine as f64 / others as f64, others as f64));
            e.rank_ns += mine;
            e.others_ns += others;
        }
    }
    acc.into_iter()
        .filter(|(_, a)| a.ratios.len() >= MIN_OP_INSTANCES)
        .map(|((rank, group), a)| {
            let Acc { ratios, rank_ns, others_ns, top, shapes_compared, shapes_same, extra } = a;
            let mut names: Vec<(String, (f64, f64))> = extra.by_name.into_iter().collect();
            names.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0).then(a.0.cmp(&b.0)));
            let extra = ExtraOps {
                instances: extra.instances,
                ns: extra.ns as i64,
                rerun_ns: extra.rerun_ns as i64,
                names: names.into_iter().take(EXTRA_NAMES).map(|(n, (_, k))| (n, k)).collect(),
            };
            let instances = ratios.len() as u32;
            let ratio = crate::analyze::stats::weighted_median_f(ratios).unwrap_or(1.0);
            OpSpeed {
                rank,
                group,
                ratio,
                instances,
                rank_ns,
                others_ns,
                top,
                shapes_compared,
                shapes_same,
                extra,
            }
        })
        .collect()
}

/// The most common value of `sorted` less one occurrence of `mine` (ties: the smallest); none
/// when nothing is left.
fn others_mode(sorted: &[u64], mine: u64) -> Option<u64> {
    let skip = sorted.iter().position(|&x| x == mine);
    let mut best: Option<(usize, u64)> = None;
    let mut k = 0;
    while k < sorted.len() {
        let v = sorted[k];
        let run = sorted[k..].iter().take_while(|&&x| x == v).count();
        let n = run - usize::from(skip.is_some_and(|s| s >= k && s < k + run));
        if n > 0 && best.is_none_or(|b| n > b.0) {
            best = Some((n, v));
        }
        k += run;
    }
    best.map(|b| b.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_padded_median_counts_the_ranks_without_the_instance_as_zero() {
        // Mine is 10; the others 4 and 6, and two ranks without it: [0, 0, 4, 6] → 2.
        assert_eq!(median_without(&[4, 6, 10], 10, 2), 2.0);
        // Three ranks without it, one with 8: [0, 0, 0, 8] → 0.
        assert_eq!(median_without(&[8, 10], 10, 3), 0.0);
        // Nobody else has it: [0] → 0; no zeros: the others' median as `others_median` gives it.
        assert_eq!(median_without(&[10], 10, 1), 0.0);
        assert_eq!(median_without(&[3, 5, 7, 10], 10, 0), 5.0);
        // Mine among equal values is skipped once.
        assert_eq!(median_without(&[5, 5, 9], 5, 1), 5.0);
    }

    #[test]
    fn the_others_mode_leaves_one_of_mine_out() {
        // Three ranks on shapes 7, one on 9: each 7 sees 7 among the others, the 9 sees 7.
        assert_eq!(others_mode(&[7, 7, 7, 9], 7), Some(7));
        assert_eq!(others_mode(&[7, 7, 7, 9], 9), Some(7));
        // Two ranks that differ: the other's is the mode, and it is not mine.
        assert_eq!(others_mode(&[3, 5], 3), Some(5));
        assert_eq!(others_mode(&[3, 5], 5), Some(3));
        // Alone: nothing to compare with.
        assert_eq!(others_mode(&[4], 4), None);
        // A tie among the others goes to the smallest.
        assert_eq!(others_mode(&[1, 2, 8], 8), Some(1));
    }

    fn speed(compared: u32, same: u32) -> OpSpeed {
        OpSpeed {
            rank: 0,
            group: OpGroup::Work,
            ratio: 1.0,
            instances: 8,
            rank_ns: 0,
            others_ns: 0,
            top: None,
            shapes_compared: compared,
            shapes_same: same,
            extra: ExtraOps::default(),
        }
    }

    #[test]
    fn shapes_decide_only_when_enough_of_them_agree() {
        assert_eq!(speed(0, 0).same_inputs(), None);
        assert_eq!(speed(2, 2).same_inputs(), None, "fewer than MIN_SHAPED_INSTANCES");
        assert_eq!(speed(6, 6).same_inputs(), Some(true));
        assert_eq!(speed(10, 9).same_inputs(), Some(true));
        assert_eq!(speed(6, 0).same_inputs(), Some(false));
        assert_eq!(speed(6, 3).same_inputs(), Some(false));
        assert_eq!(speed(6, 4).same_inputs(), None, "between: the timings decide");
    }
}
