//! One process group's report: its members' lanes, the positions compared, entered and
//! completed per rank, waits and timeouts (rules 2–4 and 6–8 of the parent module's doc).

use std::collections::{BTreeMap, BTreeSet};

use super::divergence::{divergence_at, shifts};
use super::*;

/// A rank's records in one group: its collectives' indices, and how many exchanges.
#[derive(Debug, Default)]
pub(super) struct PgRecords {
    pub(super) coll: Vec<usize>,
    pub(super) p2p: u32,
}

/// One process group's report: its members, the positions its members' collectives take (by
/// sequence number when every record has one, else by ordinal), the divergences among them,
/// the timeout and the waits near it, and where each rank stands.
#[allow(clippy::too_many_arguments)]
pub(super) fn group_report(
    pg: &str,
    desc: &str,
    seqs: &[&RankSeq],
    by_pg: &[BTreeMap<&str, PgRecords>],
    no_input: &BTreeSet<u32>,
    world: &BTreeSet<u32>,
    opts: &SeqOptions,
    ctx: &Ctx<'_>,
) -> GroupReport {
    let listed = |r: u32| {
        opts.groups.get(pg).is_some_and(|m| m.contains(&r))
            || (opts.world_group.as_deref() == Some(pg) && world.contains(&r))
    };
    let (lanes, by_seq) = group_lanes(pg, seqs, by_pg, &listed);
    let mut members: BTreeSet<u32> = lanes.iter().map(|l| l.rank).collect();
    let mut absent: Vec<u32> = Vec::new();
    for &r in no_input {
        if listed(r) {
            members.insert(r);
            absent.push(r);
        }
    }
    // Silent: members without a collective where another member issued some (a group of
    // point-to-point exchanges only, a pipeline's, has no collective sequence to miss).
    let any_coll = lanes.iter().any(|l| !l.recs.is_empty());
    let silent: Vec<u32> = lanes.iter().filter(|l| any_coll && l.recs.is_empty()).map(|l| l.rank).collect();
    let lanes: Vec<Lane<'_>> = lanes.into_iter().filter(|l| !l.recs.is_empty()).collect();
    let timeout_dump =
        lanes.iter().flat_map(|l| l.recs.iter().filter_map(|&(_, i)| l.seq.records[i].timeout_ms)).max();
    let backend = lanes.iter().map(|l| l.seq.backend).find(|b| b.default_timeout_ms().is_some());

    // Every position any member issued.
    let keys: BTreeSet<Key> = lanes.iter().flat_map(|l| l.by_key.keys().copied()).collect();
    let mut divergences = Vec::new();
    let mut diverging = 0u32;
    let mut clean: BTreeSet<Key> = BTreeSet::new();
    for &key in &keys {
        match divergence_at(pg, desc, key, &lanes, ctx) {
            Some(d) => {
                diverging += 1;
                if divergences.len() < MAX_LISTED {
                    divergences.push(d);
                }
            }
            None => {
                clean.insert(key);
            }
        }
    }
    // The timeout, then waits against it.
    let timeout = timeout_dump
        .map(|ms| Timeout { ms, source: TimeoutSource::Dump })
        .or(opts.timeout_ms.map(|ms| Timeout { ms, source: TimeoutSource::Given }))
        .or_else(|| observed_timeout(divergences.first()))
        .or_else(|| {
            backend
                .and_then(|b| b.default_timeout_ms())
                .map(|ms| Timeout { ms, source: TimeoutSource::BackendDefault })
        });
    for d in &mut divergences {
        d.timeout = timeout;
        for side in &mut d.sides {
            for w in &mut side.waits {
                w.near_timeout = near(w.waited_ns, timeout);
            }
        }
    }
    if let Some(first) = divergences.first_mut() {
        first.shifts = shifts(first, &lanes, ctx);
    }
    let near_timeout = near_timeout_records(&lanes, &divergences, timeout, ctx);
    let ranks = group_ranks(&lanes, &silent, &keys, &clean, ctx);
    GroupReport {
        pg: pg.to_string(),
        pg_desc: desc.to_string(),
        members: members.into_iter().collect(),
        aligned_by: if by_seq { Alignment::SeqId } else { Alignment::Ordinal },
        positions: keys.len() as u32,
        ranks,
        divergences,
        diverging_positions: diverging,
        silent,
        no_input: absent,
        timeout,
        near_timeout,
    }
}

/// The lanes of group `pg`'s members (ranks with records in it, or `listed` as members), each
/// record keyed by its position; and whether the positions are sequence numbers (every record
/// has one) rather than ordinals.
fn group_lanes<'a>(
    pg: &str,
    seqs: &[&'a RankSeq],
    by_pg: &[BTreeMap<&str, PgRecords>],
    listed: &dyn Fn(u32) -> bool,
) -> (Vec<Lane<'a>>, bool) {
    let mut lanes: Vec<Lane<'a>> = Vec::new();
    for (s, mine) in seqs.iter().zip(by_pg) {
        let (coll, p2p): (&[usize], u32) = mine.get(pg).map_or((&[], 0), |x| (x.coll.as_slice(), x.p2p));
        let in_group = p2p > 0 || !coll.is_empty() || listed(s.rank);
        if !in_group {
            continue;
        }
        let trust_state = s.backend != Backend::Gloo
            && coll.iter().any(|&i| matches!(s.records[i].state, State::Started | State::Completed));
        lanes.push(Lane {
            rank: s.rank,
            seq: s,
            recs: coll.iter().map(|&i| ((0, 0), i)).collect(),
            by_key: BTreeMap::new(),
            p2p,
            trust_state,
        });
    }
    let by_seq = lanes.iter().all(|l| l.recs.iter().all(|&(_, i)| l.seq.records[i].seq.is_some()))
        && lanes.iter().any(|l| !l.recs.is_empty());
    for l in &mut lanes {
        let mut sub: BTreeMap<i64, u32> = BTreeMap::new();
        for (n, (key, i)) in l.recs.iter_mut().enumerate() {
            let pos = if by_seq { l.seq.records[*i].seq.unwrap_or(0) } else { n as i64 + 1 };
            let s = sub.entry(pos).or_insert(0);
            *key = (pos, *s);
            *s += 1;
            l.by_key.insert(*key, *i);
        }
    }
    (lanes, by_seq)
}

/// The records (at most [`MAX_LISTED`]) that waited near the timeout, outside the positions a
/// divergence already lists for their rank.
fn near_timeout_records(
    lanes: &[Lane<'_>],
    divergences: &[Divergence],
    timeout: Option<Timeout>,
    ctx: &Ctx<'_>,
) -> Vec<RecordRef> {
    let at_divergence: BTreeSet<(u32, i64)> = divergences
        .iter()
        .flat_map(|d| d.sides.iter().flat_map(move |s| s.ranks.iter().map(move |&r| (r, d.position))))
        .collect();
    let mut near_timeout = Vec::new();
    for l in lanes {
        for &(k, i) in &l.recs {
            let r = &l.seq.records[i];
            let w = r.start_ns.zip(r.end_ns).map(|(s, e)| e - s);
            if near(w, timeout) && !at_divergence.contains(&(l.rank, k.0)) && near_timeout.len() < MAX_LISTED
            {
                near_timeout.extend(ctx.record_ref(l, k, i));
            }
        }
    }
    near_timeout
}

/// Where each rank stands (its last entered and last completed record), the `silent` ones with
/// none, by rank. A rank whose states cannot be trusted completed the last record at a clean
/// position (of `keys`, those in `clean`) that a later position or its own end follows.
fn group_ranks(
    lanes: &[Lane<'_>],
    silent: &[u32],
    keys: &BTreeSet<Key>,
    clean: &BTreeSet<Key>,
    ctx: &Ctx<'_>,
) -> Vec<GroupRank> {
    let mut ranks = Vec::new();
    for l in lanes {
        let last_key = l.last();
        let last_entered = last_key.and_then(|k| ctx.record_ref(l, k, *l.by_key.get(&k)?));
        let (last_completed, completed_basis) = if l.trust_state {
            let c = l
                .recs
                .iter()
                .rev()
                .find(|&&(_, i)| l.seq.records[i].state == State::Completed)
                .and_then(|&(k, i)| ctx.record_ref(l, k, i));
            (c, CompletedBasis::State)
        } else {
            let c = l
                .recs
                .iter()
                .rev()
                .find(|&&(k, i)| {
                    clean.contains(&k)
                        && (keys.range((k.0, k.1 + 1)..).next().is_some()
                            || l.seq.records[i].end_ns.is_some())
                })
                .and_then(|&(k, i)| ctx.record_ref(l, k, i));
            (c, CompletedBasis::Inferred)
        };
        ranks.push(GroupRank {
            rank: l.rank,
            records: l.recs.len() as u32,
            first_position: l.first().map(|k| k.0),
            last_entered,
            last_completed,
            completed_basis,
            p2p_records: l.p2p,
        });
    }
    for &r in silent {
        ranks.push(GroupRank {
            rank: r,
            records: 0,
            first_position: None,
            last_entered: None,
            last_completed: None,
            completed_basis: CompletedBasis::Inferred,
            p2p_records: 0,
        });
    }
    ranks.sort_by_key(|r| r.rank);
    ranks
}

fn near(waited_ns: Option<i64>, t: Option<Timeout>) -> bool {
    match (waited_ns, t) {
        (Some(w), Some(t)) => w as f64 >= NEAR_TIMEOUT_SHARE * t.ms as f64 * 1e6,
        _ => false,
    }
}

/// Waits at the first divergence that agree within 5% and exceed 1 s: a timeout ended them.
fn observed_timeout(d: Option<&Divergence>) -> Option<Timeout> {
    let d = d?;
    let mut w: Vec<i64> = d.sides.iter().flat_map(|s| s.waits.iter().filter_map(|w| w.waited_ns)).collect();
    if w.len() < 2 {
        return None;
    }
    w.sort_unstable();
    let (lo, hi) = (w[0], w[w.len() - 1]);
    if lo < 1_000_000_000 || (hi - lo) as f64 > 0.05 * hi as f64 {
        return None;
    }
    // A wait ended by a timeout lasts a little longer than it; timeouts are whole seconds.
    Some(Timeout { ms: lo / 1_000_000_000 * 1000, source: TimeoutSource::Observed })
}
