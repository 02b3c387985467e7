//! Transfer and wait: every rank's communication time split into moving data and waiting for
//! the others.
//!
//! **Whole durations** (`comm_transfer_ns`, `comm_wait_ns`), the TensorBoard plugin's
//! definition generalised to unions: a blocking collective completes together on all its
//! ranks, so the last rank to arrive waits for nobody and its duration is the **transfer**
//! (`transfer_ns` of each matched collective in [`super::collectives`]); a rank that arrived
//! earlier spent the first `duration − transfer` of its collective **waiting** ("synchronizing")
//! and then transferred. Per rank, on its own clock: `T` = the union of the transfer suffixes,
//! `W` = the union of the wait prefixes minus `T` (while one bucket transfers and another waits,
//! the rank is moving data). Communication in no matched collective counts as transfer.
//! `M = T ∪ W`, disjoint.
//!
//! **Exposed parts** (`exposed_transfer_ns`, `exposed_wait_ns`; they add up to the exposed
//! communication `|M − C|` of [`super::breakdown`]): a rank's exposed communication is
//! *transfer* where **every** rank of the collective is in exposed communication of this very
//! collective at the same aligned instant — nobody computes, the job as a whole is moving data,
//! and only overlap or a faster transfer would shorten it — and *wait* where at least one of
//! them is still doing something else (computing, stalled, loading data, or waiting in a
//! collective of another of its groups): this rank is waiting for that one. The
//! prefix rule above cannot see the second case when a long transfer starts early and runs
//! under the compute of the slowest rank (one 25 MB gloo bucket all_reduced during backward):
//! the faster ranks' tail after their own backward is waiting for the slowest rank's backward,
//! not communication to overlap. Exposed communication in no matched collective is transfer.
//!
//! Exposed transfer is an overlap problem (bucket sizes, prefetch, stream priorities). Exposed
//! wait is somebody else's problem: it is charged to the rank the others waited for
//! ([`super::attribution`]).

use std::collections::BTreeMap;

use super::collectives::{Offsets, Op};
use super::intervals::{Iv, Set};
use super::{align::RankAlignment, RankPart};

/// One rank's communication split (rank clock).
#[derive(Debug, Clone, Default)]
pub struct RankWait {
    pub rank: u32,
    pub transfer: Set,
    pub wait: Set,
    pub exposed_wait: Set,
    pub exposed_transfer: Set,
}

/// The split of every rank (same order as `parts`). `orphans[k]` are rank k's collectives that
/// matched no other rank in a job where the others' collectives do match (rank clock): the
/// rank waited in them for peers that never came, so they are wait, as partial collectives are.
pub fn rank_waits(
    parts: &[RankPart],
    ops: &[Op],
    al: &[RankAlignment],
    orphans: &[Vec<Iv>],
) -> Vec<RankWait> {
    let n = parts.len();
    let mut prefixes: Vec<Vec<Iv>> = vec![Vec::new(); n];
    let mut suffixes: Vec<Vec<Iv>> = vec![Vec::new(); n];
    let mut in_ops: Vec<Vec<Iv>> = vec![Vec::new(); n];
    let mut all_exposed: Vec<Vec<Iv>> = vec![Vec::new(); n];
    // Each collective looks its ranks up here: a scan of the parts per rank would make the
    // job quadratic in its ranks. The first part of a rank counts.
    let mut slot_of: BTreeMap<u32, usize> = BTreeMap::new();
    for (k, p) in parts.iter().enumerate() {
        slot_of.entry(p.info.rank).or_insert(k);
    }
    let index = |rank: u32| slot_of.get(&rank).copied();
    let by_rank = Offsets::new(al);
    let offsets: Vec<i64> = parts.iter().map(|p| by_rank.of(p.info.rank)).collect();
    // Exposed communication of each rank, on the aligned clock.
    let exposed_aligned: Vec<Set> = parts
        .iter()
        .zip(&offsets)
        .map(|(p, &off)| {
            Set::from_sorted(p.comm_set.iter().copied())
                .subtract(&Set::from_sorted(p.overlap_set.iter().copied()))
                .shifted(-off)
        })
        .collect();
    for o in ops {
        let slots: Vec<(usize, i64, i64, i64)> = o
            .ranks
            .iter()
            .enumerate()
            .filter_map(|(k, &rank)| {
                let slot = index(rank)?;
                Some((slot, *o.start_ns.get(k)?, *o.dur_ns.get(k)?, *o.sync_wait_ns.get(k)?))
            })
            .collect();
        if slots.len() < 2 {
            continue;
        }
        if o.partial {
            // Nobody transfers in a collective a member never joined: all of it is waiting.
            for &(slot, s, d, _) in &slots {
                let start = s + offsets[slot];
                prefixes[slot].push((start, start + d.max(0)));
                in_ops[slot].push((start, start + d.max(0)));
            }
            continue;
        }
        // Where every participant is in exposed communication at once, each inside this
        // collective (its own [start, end]): a member still waiting in another group's
        // collective is not moving this one's data.
        let mut every = exposed_aligned[slots[0].0].clip(slots[0].1, slots[0].1 + slots[0].2.max(0));
        for s in &slots[1..] {
            every = every.intersect(&exposed_aligned[s.0].clip(s.1, s.1 + s.2.max(0)));
        }
        for &(slot, s, d, w) in &slots {
            let off = offsets[slot];
            let start = s + off;
            let w = w.clamp(0, d.max(0));
            prefixes[slot].push((start, start + w));
            suffixes[slot].push((start + w, start + d));
            in_ops[slot].push((start, start + d));
            all_exposed[slot].extend(every.clip(s, s + d).shifted(off).intervals().iter().copied());
        }
    }
    parts
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let comm = Set::from_sorted(p.comm_set.iter().copied());
            let overlap = Set::from_sorted(p.overlap_set.iter().copied());
            let wait = Set::from_unsorted(std::mem::take(&mut prefixes[k]))
                .intersect(&comm)
                .subtract(&Set::from_unsorted(std::mem::take(&mut suffixes[k])));
            let exposed = comm.subtract(&overlap);
            let orphan = Set::from_unsorted(orphans.get(k).cloned().unwrap_or_default());
            let wait = wait.union(&orphan.intersect(&comm));
            let transfer = comm.subtract(&wait);
            let matched = Set::from_unsorted(std::mem::take(&mut in_ops[k])).union(&orphan);
            let exposed_transfer = exposed
                .intersect(&Set::from_unsorted(std::mem::take(&mut all_exposed[k])))
                .union(&exposed.subtract(&matched));
            RankWait {
                rank: p.info.rank,
                exposed_wait: exposed.subtract(&exposed_transfer),
                exposed_transfer,
                transfer,
                wait,
            }
        })
        .collect()
}
