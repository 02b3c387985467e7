//! `compute_imbalance` for a rank whose program has more in it than its peers', when it is not
//! the rank the others wait for: the operators it runs and the others do not
//! ([`crate::analyze::attribution::ExtraOps`]: an autograd node that computes its forward again,
//! an instance the others lack) are more work every step, whatever the order the ranks arrive
//! in. On hosts whose noise decides who is last (ranks sharing cores), that work is mostly
//! hidden today; it costs the whole of it where nothing hides it. A configuration that differs
//! between ranks (activation checkpointing on one rank only, an extra pass, another number of
//! micro-batches) is worth saying even then.
//!
//! Said when a CPU rank's extra operators take at least [`MIN_EXTRA_SHARE`] of its step (and no
//! more than the work it shares with the others: a pipeline stage's own layers are another
//! program), the
//! replay holds and bringing that rank to its peers gains at least the findings' floor (its
//! gain: the replay's, [`crate::analyze::whatif::WhatIf::ranks`]); never for a rank a late-rank
//! finding already names.

use super::late_rank::{extra_fix, extra_words};
use super::prelude::*;
use crate::analyze::attribution::OpGroup;

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::UnevenProgram,
    finds: &[FindingId::ComputeImbalance],
    stage: Stage::Waiting,
    explains: &[],
    part_of: None,
    excludes: &[],
    names_part: None,
    find,
};

/// Extra operators below this share of the rank's step are not said.
pub const MIN_EXTRA_SHARE: f64 = 0.05;

fn find(cx: &Ctx<'_>, found: &Found) -> Vec<Finding> {
    let Some(w) = cx.a.whatif.as_ref().filter(|_| cx.replay_usable()) else { return Vec::new() };
    let named: BTreeSet<u32> = found.of(CauseId::LateRank).flat_map(|f| f.ranks.iter().copied()).collect();
    let floor = cx.floor_ns();
    let mut out = Vec::new();
    for o in cx.a.op_speed.iter().filter(|o| o.group == OpGroup::Work && !o.extra.is_empty()) {
        let rank = o.rank;
        let x = &o.extra;
        // More than the work it shares with its peers is another program (a pipeline stage's
        // own layers), not the same one with more in it.
        if named.contains(&rank)
            || !cx.is_cpu(rank)
            || (x.ns as f64) < MIN_EXTRA_SHARE * cx.rank_step_ns(rank)
            || x.ns > o.rank_ns
        {
            continue;
        }
        let Some(gain) = w.ranks.iter().find(|g| g.rank == rank).map(|g| g.gain_ns as f64) else { continue };
        if gain < floor {
            continue;
        }
        let who = ranks_word(&[rank]);
        let rerun = x.is_rerun();
        let mut evidence = Evidence::from([(K::ReplayedGainNs, gain)]);
        let (more, same) = extra_words(&mut evidence, x, Some(o.ratio), None, rerun, true);
        out.push(Finding {
            id: FindingId::ComputeImbalance,
            severity: severity_for(gain, cx.step_ns),
            message: format!(
                "{who} {more}{same}. It is not the rank the others wait for in most steps (who arrives last changes from step to step), so today it costs the step less than its extra work: replayed from the traces with {}'s own time at its peers' median, the job's step is {} shorter; where nothing hides it, up to {} per step.",
                who.to_lowercase(),
                dur(gain),
                dur(x.ns as f64)
            ),
            fix: extra_fix(&who, rerun, "The other ranks need no tuning."),
            ranks: vec![rank],
            steps: cx.all_steps.clone(),
            evidence,
            quotes: Vec::new(),
            quotes_total: 0,
            symptoms: Vec::new(),
            location: None,
            impact_ns: gain as i64,
        });
    }
    out
}
