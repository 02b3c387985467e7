//! Collective instances matched across ranks: by sequence number, else by ordinal per step, else
//! by whole-trace ordinal with small per-rank shifts (see the parent module's doc).

use serde::{Deserialize, Serialize};

use super::Instance;
use crate::analyze::stats::lower_median;
use crate::model::*;

/// A collective matched across ranks: `per_rank[k]` is rank `ranks[k]`'s instance.
#[derive(Debug, Clone)]
pub struct Matched {
    pub kind: CollKind,
    pub pg: String,
    /// `Seq` when matched by it, else the ordinal within (pg, kind).
    pub key: i64,
    pub by_seq: bool,
    pub ranks: Vec<u32>,
    pub per_rank: Vec<Instance>,
}

/// Per process group: how many loaded ranks have a (non point-to-point) instance in it.
pub fn group_members(insts: &[Vec<Instance>]) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for v in insts {
        let mut pgs: Vec<&str> = v.iter().filter(|x| !x.kind.is_p2p()).map(|x| x.pg.as_str()).collect();
        pgs.sort_unstable();
        pgs.dedup();
        for pg in pgs {
            *out.entry(pg.to_string()).or_insert(0) += 1;
        }
    }
    out
}

/// Whether a matched collective misses a loaded member of its group (point-to-point
/// exchanges pair two ranks by nature and never are).
pub fn is_partial(m: &Matched, members: &std::collections::BTreeMap<String, usize>) -> bool {
    !m.kind.is_p2p() && members.get(&m.pg).is_some_and(|&n| m.ranks.len() < n)
}

crate::named_enum! {
    /// How collective instances were matched across ranks.
    pub enum MatchMethod {
        /// By the process group's sequence number (`Seq` / `Comms Id`) on every rank.
        ProcessGroupSeq => "process_group_seq",
        /// By ordinal within (step, process group, kind).
        OrdinalPerStep => "ordinal_per_step_group_and_kind",
        /// By ordinal within (process group, kind): steps are not known on every rank.
        Ordinal => "ordinal_per_group_and_kind",
    }
}

/// How instances were matched.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MatchInfo {
    pub method: MatchMethod,
    /// Per rank, the ordinal shift applied (0 when matched by sequence number).
    pub shifts: Vec<(u32, i64)>,
}

/// Matches instances across ranks: `insts[k]` belongs to rank `ranks[k]`; `steps_known` when
/// every rank has step markers.
pub fn match_instances(
    ranks: &[u32],
    steps_known: bool,
    insts: &[Vec<Instance>],
) -> (Vec<Matched>, MatchInfo) {
    let all_seq = insts.iter().all(|v| !v.is_empty() && v.iter().all(|x| x.seq.is_some()));
    // Group per rank by (pg, kind) [ordinal matching] or by (pg) [seq matching].
    // Without sequence numbers, ordinals count within a step: `ProfilerStep#N` numbers are the
    // global iteration count on every rank, so a rank whose profiling window started earlier
    // cannot shift the match. Steps that are unknown (no markers) use whole-trace ordinals.
    type Key = (String, CollKind, u32);
    let mut groups: std::collections::BTreeMap<Key, Vec<Vec<&Instance>>> = Default::default();
    for (k, v) in insts.iter().enumerate() {
        for x in v {
            let key = if all_seq {
                (x.pg.clone(), CollKind::Unknown, u32::MAX)
            } else {
                (x.pg.clone(), x.kind, if steps_known { x.step } else { u32::MAX })
            };
            let slot = groups.entry(key).or_insert_with(|| vec![Vec::new(); insts.len()]);
            if let Some(s) = slot.get_mut(k) {
                s.push(x);
            }
        }
    }
    // Ordinals count in the order the host issued the collectives, which is the same on every
    // rank; the order the backend started them need not be (see `pair_enqueues`).
    for per_rank in groups.values_mut() {
        for v in per_rank.iter_mut() {
            v.sort_by_key(|x| (x.issued_ns, x.start_ns, x.event));
        }
    }
    let mut shifts: Vec<(u32, i64)> = ranks.iter().map(|&r| (r, 0)).collect();
    let mut out = Vec::new();
    for ((pg, kind, step), per_rank) in groups {
        if all_seq {
            let mut by_seq: std::collections::BTreeMap<i64, Vec<(u32, &Instance)>> = Default::default();
            for (k, v) in per_rank.iter().enumerate() {
                for x in v {
                    by_seq.entry(x.seq.unwrap_or(-1)).or_default().push((ranks[k], x));
                }
            }
            for (seq, v) in by_seq {
                if v.len() < 2 {
                    continue;
                }
                out.push(Matched {
                    kind: v[0].1.kind,
                    pg: pg.clone(),
                    key: seq,
                    by_seq: true,
                    ranks: v.iter().map(|p| p.0).collect(),
                    per_rank: v.iter().map(|p| p.1.clone()).collect(),
                });
            }
            continue;
        }
        // Ordinal matching against the first rank that has this group.
        let Some(refk) = per_rank.iter().position(|v| !v.is_empty()) else { continue };
        let reference = &per_rank[refk];
        let mut shift_of = vec![0i64; per_rank.len()];
        for (k, v) in per_rank.iter().enumerate() {
            if k == refk || v.is_empty() {
                continue;
            }
            shift_of[k] = if step == u32::MAX { best_shift(reference, v) } else { 0 };
            if let Some(s) = shifts.get_mut(k) {
                if s.1 == 0 {
                    s.1 = shift_of[k];
                }
            }
        }
        for (ord, x0) in reference.iter().enumerate() {
            let mut members_ranks = vec![ranks[refk]];
            let mut members = vec![(*x0).clone()];
            for (k, v) in per_rank.iter().enumerate() {
                if k == refk {
                    continue;
                }
                let j = ord as i64 + shift_of[k];
                if let Some(x) = usize::try_from(j).ok().and_then(|j| v.get(j)) {
                    members_ranks.push(ranks[k]);
                    members.push((*x).clone());
                }
            }
            if members_ranks.len() < 2 {
                continue;
            }
            let mut pairs: Vec<(u32, Instance)> = members_ranks.into_iter().zip(members).collect();
            pairs.sort_by_key(|p| p.0);
            out.push(Matched {
                kind,
                pg: pg.clone(),
                key: ord as i64,
                by_seq: false,
                ranks: pairs.iter().map(|p| p.0).collect(),
                per_rank: pairs.into_iter().map(|p| p.1).collect(),
            });
        }
    }
    out.sort_by_key(|m| (m.per_rank.first().map_or(0, |x| x.end_ns), m.kind, m.key));
    let method = if all_seq {
        MatchMethod::ProcessGroupSeq
    } else if steps_known {
        MatchMethod::OrdinalPerStep
    } else {
        MatchMethod::Ordinal
    };
    (out, MatchInfo { method, shifts })
}

/// The ordinal shift (−3..=3) of `v` against `reference` whose end-time differences are most
/// consistent (smallest median absolute deviation). Shift 0 is kept unless another shift is
/// four times more consistent over at least three quarters of the pairs and does not pair
/// collectives of different sizes: with few collectives a wrong shift can look consistent by
/// chance, and a wrong match is worse than none.
fn best_shift(reference: &[&Instance], v: &[&Instance]) -> i64 {
    let score = |s: i64| -> Option<i64> {
        let mut diffs = Vec::new();
        for (ord, x0) in reference.iter().enumerate() {
            let j = ord as i64 + s;
            let Some(x) = usize::try_from(j).ok().and_then(|j| v.get(j)) else { continue };
            if let (Some(a), Some(b)) = (x0.bytes, x.bytes) {
                if a != b {
                    return None;
                }
            }
            diffs.push(x.end_ns - x0.end_ns);
        }
        if diffs.len() * 4 < reference.len().min(v.len()) * 3 || diffs.is_empty() {
            return None;
        }
        let med = lower_median(&mut diffs.clone());
        let mut dev: Vec<i64> = diffs.iter().map(|d| (d - med).abs()).collect();
        Some(lower_median(&mut dev))
    };
    let base = score(0);
    let mut best = (base, 0i64);
    for s in [-1i64, 1, -2, 2, -3, 3] {
        if let Some(sc) = score(s) {
            let better = match best.0 {
                None => true,
                Some(b) => sc.saturating_mul(4) < b,
            };
            if better {
                best = (Some(sc), s);
            }
        }
    }
    best.1
}
