//! The members of each collective across ranks, for the timeline: given the event a user
//! clicked on one rank, the same collective's event on every other rank.
//!
//! The collectives are matched as the job half matches them ([`crate::analyze::combine`]):
//! every instance placed in its process group ([`crate::analyze::layout::build`]), point-to-point
//! exchanges left out, then [`instances::match_instances`]. Each member carries its own-clock
//! times (where the timeline draws it), its aligned entry, and what can be told of its time in
//! the collective: the wait (from its entry to the last member's, within its duration, as
//! [`crate::analyze::chain`] counts a wait) and the time after the last member entered.

use std::collections::{BTreeMap, HashMap};

use crate::analyze::{instances, layout, RankPart};
use crate::model::CollKind;

/// One rank's instance of a matched collective.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub rank: u32,
    /// Its event row on its rank.
    pub event: u32,
    /// The lane (thread or stream) it ran on.
    pub lane: u32,
    /// Own clock.
    pub start_ns: i64,
    pub end_ns: i64,
    /// Its entry on the aligned clock (own time − the rank's alignment offset).
    pub aligned_ns: i64,
    /// From its entry to the last member's entry, within its own duration.
    pub wait_ns: i64,
    /// From the last member's entry (or its own, when later) to its end.
    pub after_last_ns: i64,
    /// When its host issued it (own clock): the launch call of a kernel, the `c10d::` op of a
    /// backend span ([`instances::Instance::issued_ns`]).
    pub issued_ns: i64,
}

/// A collective matched across ranks.
#[derive(Debug, Clone, PartialEq)]
pub struct Collective {
    pub kind: CollKind,
    pub pg: String,
    pub step: u32,
    /// Its members, in rank order.
    pub members: Vec<Member>,
}

impl Collective {
    /// The earliest member's aligned entry.
    pub fn first_ns(&self) -> i64 {
        self.members.iter().map(|m| m.aligned_ns).min().unwrap_or(0)
    }
}

/// Every matched collective, and where each member event is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Members {
    pub collectives: Vec<Collective>,
    /// (rank, event) → index in `collectives`.
    index: HashMap<(u32, u32), usize>,
}

impl Members {
    /// The collective whose member is `event` of `rank`.
    pub fn of(&self, rank: u32, event: u32) -> Option<(usize, &Collective)> {
        let &k = self.index.get(&(rank, event))?;
        self.collectives.get(k).map(|c| (k, c))
    }

    /// The collective a host op of `rank` spanning `[from_ns, to_ns)` (own clock) issued: a
    /// `c10d::allreduce_` or `nccl:all_reduce` around the kernel's launch. The member issued
    /// first in the span when several are (a coalesced group).
    pub fn issued_in(&self, rank: u32, from_ns: i64, to_ns: i64) -> Option<(usize, &Collective)> {
        self.collectives
            .iter()
            .enumerate()
            .filter_map(|(k, c)| {
                let m = c.members.iter().find(|m| m.rank == rank)?;
                (from_ns <= m.issued_ns && m.issued_ns < to_ns).then_some((m.issued_ns, k, c))
            })
            .min_by_key(|x| x.0)
            .map(|(_, k, c)| (k, c))
    }

    pub fn is_empty(&self) -> bool {
        self.collectives.is_empty()
    }
}

/// Matches the collectives of `parts` (each filed under its rank, `info.rank`) across ranks;
/// `offsets` are each rank's alignment offset (aligned = own − offset; a rank absent: 0).
pub fn members(mut parts: Vec<RankPart>, offsets: &BTreeMap<u32, i64>) -> Members {
    parts.sort_by_key(|p| p.info.rank);
    let ranks: Vec<u32> = parts.iter().map(|p| p.info.rank).collect();
    let steps_known = parts.iter().all(|p| !p.steps_synthetic);
    let mut insts: Vec<Vec<instances::Instance>> =
        parts.iter_mut().map(|p| std::mem::take(&mut p.instances)).collect();
    let _ = layout::build(&parts, &mut insts, None);
    for v in &mut insts {
        v.retain(|x| !x.p2p);
    }
    let (matched, _) = instances::match_instances(&ranks, steps_known, &insts);
    let mut out = Members::default();
    for m in matched {
        let off = |r: u32| offsets.get(&r).copied().unwrap_or(0);
        let last_entry =
            m.ranks.iter().zip(&m.per_rank).map(|(&r, x)| x.start_ns - off(r)).max().unwrap_or(0);
        let mut members: Vec<Member> = m
            .ranks
            .iter()
            .zip(&m.per_rank)
            .map(|(&r, x)| {
                let (a, dur) = (x.start_ns - off(r), (x.end_ns - x.start_ns).max(0));
                let wait = (last_entry - a).clamp(0, dur);
                Member {
                    rank: r,
                    event: x.event.0,
                    lane: x.lane,
                    start_ns: x.start_ns,
                    end_ns: x.end_ns,
                    aligned_ns: a,
                    wait_ns: wait,
                    after_last_ns: dur - wait,
                    issued_ns: x.issued_ns,
                }
            })
            .collect();
        members.sort_by_key(|x| (x.rank, x.start_ns));
        let k = out.collectives.len();
        for x in &members {
            out.index.insert((x.rank, x.event), k);
        }
        let step = m.per_rank.first().map_or(0, |x| x.step);
        out.collectives.push(Collective { kind: m.kind, pg: m.pg, step, members });
    }
    out
}
