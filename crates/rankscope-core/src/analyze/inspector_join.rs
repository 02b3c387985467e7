//! NCCL Inspector records joined with the traces' matched collectives: the library's own view
//! of each call (its sequence number in the communicator, bytes, execution time per member,
//! bandwidth, what timed it) beside the trace's (process group, `Seq`, transfer and wait).
//!
//! **Pairing** a communicator with a process group. The Inspector names a communicator by its
//! hash, the trace a process group by its name: nothing in either says which is which, so the
//! pairing is found from the calls. Two calls are *compatible* when their kinds agree (a trace
//! barrier is an NCCL all_reduce), their group sizes agree, and their sizes agree as NCCL or
//! PyTorch count them (equal, or one n times the other: all_gather and reduce_scatter count the
//! buffer per rank or in all). Then, per communicator C and group G:
//! - **by sequence** (the traces were matched by `Seq`, [`MatchMethod::ProcessGroupSeq`]): NCCL
//!   counts a communicator's collectives from its creation and PyTorch a group's from its own,
//!   so `sn = Seq + d` for one offset `d` per pair. The offset held by the most compatible pairs
//!   is taken; among offsets held equally often (a run's equal gradient buckets fit any shift)
//!   the one whose pairs' member times agree most (below), then the smallest |d|. A call is
//!   matched when the call at `Seq + d` is compatible;
//! - **by kind, size and order** (otherwise): per kind, the Inspector's calls by `sn` and the
//!   trace's by their key (the ordinal PyTorch's matching gave them), shifted by the shift held
//!   by the most compatible pairs.
//!
//! Both are tried and the one matching more is kept. Pairs are then taken greedily, the pair
//! matching most first, each communicator and group once; a pair matching fewer than half the
//! group's collectives is a coincidence, not a pairing.
//!
//! **Members**: a communicator's rank i is the group's i-th rank in rank order (PyTorch creates a
//! group's NCCL communicator with the group's ranks in that order). Per member, the Inspector's
//! execution time (µs) is set against the trace's kernel time (ns): both time the same kernel
//! (the Inspector's `kernel_gpu` timing) so they should agree; they *disagree* when they differ
//! by more than [`DISAGREE_SHARE`] of the kernel time and more than [`DISAGREE_MIN_NS`]
//! (`kernel_cpu` / `collective_cpu` timings include launch and host time).
//!
//! What the Inspector's v4.0 records do not carry: the algorithm and the protocol (they are in
//! `NCCL_DEBUG_SUBSYS=TUNING` lines of NCCL_DEBUG=INFO logs, not here).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::collectives::{busbw_factor, Op};
use super::instances::MatchMethod;
use crate::model::CollKind;
use crate::nccl::inspector::Record;

/// Version of the JSON shape of [`InspectorJoin`]; bump on incompatible changes.
pub const JOIN_VERSION: u32 = 1;
/// Member times disagree beyond this share of the kernel time...
pub const DISAGREE_SHARE: f64 = 0.10;
/// ...and beyond this many ns.
pub const DISAGREE_MIN_NS: i64 = 20_000;
/// Candidate pairs looked at per (communicator, group) when finding the offset.
const MAX_CANDIDATES: usize = 1 << 24;

crate::named_enum! {
    /// How a communicator's calls were paired with a process group's collectives.
    pub enum JoinMethod {
        /// `sn = Seq + offset`.
        Sequence => "sequence",
        /// Per kind, in order, shifted.
        Order => "kind_size_order",
    }
}

/// A communicator paired with a process group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pairing {
    pub comm: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm_name: Option<String>,
    pub pg: String,
    pub method: JoinMethod,
    /// `sn − Seq` ([`JoinMethod::Sequence`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    /// The communicator's collective calls, the group's collectives, and those matched.
    pub inspector_calls: usize,
    pub trace_ops: usize,
    pub matched: usize,
}

/// One member's two times of one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberTimes {
    /// The global rank (the trace's) and the rank in the communicator.
    pub rank: u32,
    pub comm_rank: i64,
    pub exec_ns: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_ns: Option<i64>,
}

/// One call in both sources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JoinedCall {
    pub comm: String,
    pub sn: u64,
    pub pg: String,
    /// The trace's key: `Seq`, or the ordinal its matching gave.
    pub key: i64,
    pub kind: CollKind,
    pub step: u32,
    pub bytes: Option<i64>,
    pub inspector_bytes: u64,
    /// What timed the Inspector's records (`kernel_gpu`, …), the first member's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing: Option<String>,
    /// The Inspector's bus bandwidth: the best member's (the last to arrive waited least: the
    /// link's figure) and the median.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busbw_max_gbs: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busbw_p50_gbs: Option<f64>,
    /// The trace's: bytes over the transfer time, times nccl-tests' factor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_busbw_gbs: Option<f64>,
    pub transfer_ns: i64,
    pub wait_max_ns: i64,
    pub members: Vec<MemberTimes>,
}

/// A member whose two times disagree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Disagreement {
    pub comm: String,
    pub sn: u64,
    pub pg: String,
    pub key: i64,
    pub rank: u32,
    pub exec_ns: i64,
    pub kernel_ns: i64,
}

/// The Inspector's execution times against the traces' kernel times.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeAgreement {
    /// Member times compared, and those that disagree.
    pub compared: usize,
    pub disagree: usize,
    /// Median of execution time over kernel time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_p50: Option<f64>,
    /// The largest disagreements (at most 10), the largest first.
    pub worst: Vec<Disagreement>,
}

/// The join.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InspectorJoin {
    pub version: u32,
    /// The Inspector's collective calls (one per communicator and `sn`), the traces' matched
    /// collectives (point-to-point aside), and how many of those found their call.
    pub inspector_calls: usize,
    pub trace_ops: usize,
    pub matched: usize,
    pub pairings: Vec<Pairing>,
    /// Communicators and groups left without a partner.
    pub unpaired_comms: Vec<String>,
    pub unpaired_pgs: Vec<String>,
    pub times: TimeAgreement,
    /// Every matched call, by group and key.
    pub calls: Vec<JoinedCall>,
}

/// One Inspector call: its members' records.
struct Call<'a> {
    sn: u64,
    kind: CollKind,
    n: i64,
    bytes: u64,
    members: Vec<&'a Record>,
}

/// The NCCL function name (`ncclFuncToString`) as a kind.
fn kind_of(func: &str) -> CollKind {
    match func {
        "AllReduce" => CollKind::AllReduce,
        "AllGather" | "AllGatherV" => CollKind::AllGather,
        "ReduceScatter" => CollKind::ReduceScatter,
        "Broadcast" => CollKind::Broadcast,
        "Reduce" => CollKind::Reduce,
        "All2All" | "AllToAll" => CollKind::AllToAll,
        _ => CollKind::Unknown,
    }
}

fn compatible(c: &Call<'_>, o: &Op) -> bool {
    let kind = match o.kind {
        CollKind::Barrier => CollKind::AllReduce,
        k => k,
    };
    let n = c.n.max(1);
    let size = match o.bytes.and_then(|b| u64::try_from(b).ok()) {
        None => true,
        Some(t) => {
            let b = c.bytes;
            let n = n as u64;
            b == t || t.checked_mul(n) == Some(b) || b.checked_mul(n) == Some(t)
        }
    };
    kind == c.kind && (o.group_size <= 0 || o.group_size == c.n) && size
}

/// The offset between two position lists: the one the most compatible pairs hold, and among
/// those held equally often (identical calls, as a run's equal gradient buckets are, fit any
/// shift; their durations tell them apart) the one whose pairs' member times agree best, then
/// the smallest |d|. At most [`MAX_CANDIDATES`] pairs are looked at, the positions of `b` taken
/// in a stride that spreads them over the list.
fn best_offset(a: &[(i64, &Call<'_>)], b: &[(i64, &Op)]) -> Option<i64> {
    let kern: Vec<Vec<i64>> = b.iter().map(|(_, o)| kernels(o)).collect();
    let mut votes: BTreeMap<i64, (usize, usize)> = BTreeMap::new();
    let mut looked = 0usize;
    'outer: for j in spread(b.len()) {
        let (Some((pb, o)), Some(k)) = (b.get(j), kern.get(j)) else { continue };
        for (pa, c) in a {
            looked += 1;
            if looked > MAX_CANDIDATES {
                break 'outer;
            }
            if compatible(c, o) {
                let v = votes.entry(pa - pb).or_default();
                v.0 += 1;
                v.1 += agreeing(c, k);
            }
        }
    }
    votes.into_iter().max_by(|x, y| x.1.cmp(&y.1).then(y.0.abs().cmp(&x.0.abs()))).map(|(d, _)| d)
}

/// `0..n` in an order that visits the whole range early: 0, n/2, n/4, 3n/4, … (each once).
fn spread(n: usize) -> Vec<usize> {
    let mut out = Vec::with_capacity(n);
    let mut seen = vec![false; n];
    let mut step = n.next_power_of_two();
    while step > 0 {
        let mut i = 0;
        while i < n {
            if let Some(s) = seen.get_mut(i).filter(|s| !**s) {
                *s = true;
                out.push(i);
            }
            i += step;
        }
        step /= 2;
    }
    out
}

/// The op's kernel time per communicator rank (the group's ranks in rank order).
fn kernels(o: &Op) -> Vec<i64> {
    members_in_order(o).into_iter().map(|(_, k)| o.dur_ns.get(k).copied().unwrap_or(0)).collect()
}

/// How many members' execution times agree with their kernel times (`kern`: [`kernels`]).
fn agreeing(c: &Call<'_>, kern: &[i64]) -> usize {
    if kern.len() as i64 != c.n {
        return 0;
    }
    c.members
        .iter()
        .filter(|r| {
            let exec = i64::try_from(r.exec_us).unwrap_or(i64::MAX / 1000).saturating_mul(1000);
            usize::try_from(r.rank)
                .ok()
                .and_then(|i| kern.get(i))
                .is_some_and(|&k| k > 0 && !disagree(exec, k))
        })
        .count()
}

/// The group's ranks in rank order, each with its place in the op's columns: communicator
/// rank i is the i-th.
fn members_in_order(o: &Op) -> Vec<(u32, usize)> {
    let mut order: Vec<(u32, usize)> = o.ranks.iter().enumerate().map(|(k, &r)| (r, k)).collect();
    order.sort_unstable();
    order
}

fn disagree(exec_ns: i64, kernel_ns: i64) -> bool {
    let diff = (exec_ns - kernel_ns).abs();
    diff as f64 > DISAGREE_SHARE * kernel_ns as f64 && diff > DISAGREE_MIN_NS
}

/// The matches of one (communicator, group): `(op, call)` pairs, method and offset.
type Found<'a, 'r> = (Vec<(&'a Op, &'a Call<'r>)>, JoinMethod, Option<i64>);

fn pair<'a, 'r>(calls: &'a [Call<'r>], ops: &[&'a Op], by_seq: bool) -> Found<'a, 'r> {
    let mut best: Found<'a, 'r> = (Vec::new(), JoinMethod::Order, None);
    if by_seq {
        let a: Vec<(i64, &Call<'_>)> =
            calls.iter().filter_map(|c| i64::try_from(c.sn).ok().map(|s| (s, c))).collect();
        let b: Vec<(i64, &Op)> = ops.iter().map(|o| (o.key, *o)).collect();
        if let Some(d) = best_offset(&a, &b) {
            let at: BTreeMap<i64, &Call<'_>> = a.iter().map(|(p, c)| (*p, *c)).collect();
            let m: Vec<(&Op, &Call<'_>)> = ops
                .iter()
                .filter_map(|o| at.get(&(o.key + d)).filter(|c| compatible(c, o)).map(|c| (*o, *c)))
                .collect();
            best = (m, JoinMethod::Sequence, Some(d));
        }
    }
    // Per kind, in order.
    let mut kinds: Vec<CollKind> = calls.iter().map(|c| c.kind).collect();
    kinds.sort();
    kinds.dedup();
    let mut m = Vec::new();
    for k in kinds {
        let a: Vec<(i64, &Call<'_>)> =
            calls.iter().filter(|c| c.kind == k).enumerate().map(|(i, c)| (i as i64, c)).collect();
        let mut of: Vec<&Op> = ops.iter().copied().filter(|o| compatible_kind(o.kind, k)).collect();
        of.sort_by_key(|o| (o.key, o.step));
        let b: Vec<(i64, &Op)> = of.iter().enumerate().map(|(j, o)| (j as i64, *o)).collect();
        if let Some(d) = best_offset(&a, &b) {
            for (j, o) in &b {
                if let Some((_, c)) =
                    usize::try_from(j + d).ok().and_then(|i| a.get(i)).filter(|(_, c)| compatible(c, o))
                {
                    m.push((*o, *c));
                }
            }
        }
    }
    if m.len() > best.0.len() {
        best = (m, JoinMethod::Order, None);
    }
    best
}

fn compatible_kind(trace: CollKind, nccl: CollKind) -> bool {
    trace == nccl || (trace == CollKind::Barrier && nccl == CollKind::AllReduce)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Joins the Inspector's records with the traces' matched collectives (`method`: how the
/// traces' collectives were matched across ranks, which says whether their keys are `Seq`).
pub fn join(records: &[Record], ops: &[Op], method: MatchMethod) -> InspectorJoin {
    // The Inspector's calls per communicator, by sequence number.
    let mut by_comm: BTreeMap<&str, BTreeMap<(u64, CollKind), Vec<&Record>>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.peer.is_none()) {
        let k = kind_of(&r.func);
        if k != CollKind::Unknown {
            by_comm.entry(r.comm.as_str()).or_default().entry((r.sn, k)).or_default().push(r);
        }
    }
    let comms: BTreeMap<&str, Vec<Call<'_>>> = by_comm
        .into_iter()
        .map(|(id, calls)| {
            let calls = calls
                .into_iter()
                .map(|((sn, kind), members)| Call {
                    sn,
                    kind,
                    n: members.iter().map(|r| r.n_ranks).max().unwrap_or(0),
                    bytes: members.iter().map(|r| r.bytes).max().unwrap_or(0),
                    members,
                })
                .collect();
            (id, calls)
        })
        .collect();
    let mut groups: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for o in ops.iter().filter(|o| !o.kind.is_p2p()) {
        groups.entry(o.pg.as_str()).or_default().push(o);
    }
    let by_seq = method == MatchMethod::ProcessGroupSeq;
    let mut candidates = Vec::new();
    for (id, calls) in &comms {
        for (pg, group) in &groups {
            let found = pair(calls, group, by_seq);
            if !found.0.is_empty() && found.0.len() * 2 >= group.len() {
                candidates.push((*id, *pg, found));
            }
        }
    }
    candidates.sort_by(|a, b| b.2 .0.len().cmp(&a.2 .0.len()).then(a.0.cmp(b.0)).then(a.1.cmp(b.1)));
    let mut pairings = Vec::new();
    let mut joined = Vec::new();
    let (mut used_c, mut used_g) = (Vec::new(), Vec::new());
    for (id, pg, (m, how, offset)) in candidates {
        if used_c.contains(&id) || used_g.contains(&pg) {
            continue;
        }
        used_c.push(id);
        used_g.push(pg);
        let calls = comms.get(id).map_or(0, Vec::len);
        let name = m.first().and_then(|(_, c)| c.members.iter().find_map(|r| r.comm_name.clone()));
        pairings.push(Pairing {
            comm: id.to_string(),
            comm_name: name,
            pg: pg.to_string(),
            method: how,
            offset,
            inspector_calls: calls,
            trace_ops: groups.get(pg).map_or(0, Vec::len),
            matched: m.len(),
        });
        joined.extend(m.into_iter().map(|(o, c)| joined_call(id, o, c)));
    }
    joined.sort_by(|a, b| a.pg.cmp(&b.pg).then(a.key.cmp(&b.key)).then(a.comm.cmp(&b.comm)));
    pairings.sort_by(|a, b| a.pg.cmp(&b.pg));
    let unpaired_comms = comms.keys().filter(|c| !used_c.contains(c)).map(|c| c.to_string()).collect();
    let unpaired_pgs = groups.keys().filter(|g| !used_g.contains(g)).map(|g| g.to_string()).collect();
    InspectorJoin {
        version: JOIN_VERSION,
        inspector_calls: comms.values().map(Vec::len).sum(),
        trace_ops: groups.values().map(Vec::len).sum(),
        matched: joined.len(),
        pairings,
        unpaired_comms,
        unpaired_pgs,
        times: agreement(&joined),
        calls: joined,
    }
}

fn joined_call(comm: &str, o: &Op, c: &Call<'_>) -> JoinedCall {
    let order = members_in_order(o);
    let mut members: Vec<MemberTimes> = c
        .members
        .iter()
        .filter_map(|r| {
            let at = usize::try_from(r.rank).ok().filter(|_| order.len() as i64 == c.n);
            let (rank, k) = at.and_then(|i| order.get(i).copied())?;
            Some(MemberTimes {
                rank,
                comm_rank: r.rank,
                exec_ns: i64::try_from(r.exec_us).unwrap_or(i64::MAX / 1000).saturating_mul(1000),
                kernel_ns: o.dur_ns.get(k).copied(),
            })
        })
        .collect();
    members.sort_by_key(|m| m.rank);
    members.dedup_by_key(|m| m.rank);
    let bw: Vec<f64> = c.members.iter().filter_map(|r| r.busbw_gbs).collect();
    let n = c.n.max(o.ranks.len() as i64);
    JoinedCall {
        comm: comm.to_string(),
        sn: c.sn,
        pg: o.pg.clone(),
        key: o.key,
        kind: o.kind,
        step: o.step,
        bytes: o.bytes,
        inspector_bytes: c.bytes,
        timing: c.members.iter().find_map(|r| r.timing.clone()),
        busbw_max_gbs: bw.iter().copied().reduce(f64::max),
        busbw_p50_gbs: median(bw),
        trace_busbw_gbs: o
            .bytes
            .filter(|_| o.transfer_ns > 0 && !o.partial)
            .map(|b| b as f64 / o.transfer_ns as f64 * busbw_factor(o.kind, n)),
        transfer_ns: o.transfer_ns,
        wait_max_ns: o.sync_wait_ns.iter().copied().max().unwrap_or(0),
        members,
    }
}

fn agreement(calls: &[JoinedCall]) -> TimeAgreement {
    let mut ratios = Vec::new();
    let mut off = Vec::new();
    for c in calls {
        for m in &c.members {
            let Some(k) = m.kernel_ns.filter(|&k| k > 0) else { continue };
            ratios.push(m.exec_ns as f64 / k as f64);
            if disagree(m.exec_ns, k) {
                off.push(Disagreement {
                    comm: c.comm.clone(),
                    sn: c.sn,
                    pg: c.pg.clone(),
                    key: c.key,
                    rank: m.rank,
                    exec_ns: m.exec_ns,
                    kernel_ns: k,
                });
            }
        }
    }
    let disagree = off.len();
    off.sort_by(|a, b| {
        (b.exec_ns - b.kernel_ns).abs().cmp(&(a.exec_ns - a.kernel_ns).abs()).then(a.key.cmp(&b.key))
    });
    off.truncate(10);
    TimeAgreement { compared: ratios.len(), disagree, ratio_p50: median(ratios), worst: off }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spread_visits_every_position_once_the_ends_early() {
        for n in [0usize, 1, 2, 5, 16, 33] {
            let s = spread(n);
            let mut sorted = s.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "{n}");
        }
        assert_eq!(&spread(8)[..3], &[0, 4, 2]);
    }
}
