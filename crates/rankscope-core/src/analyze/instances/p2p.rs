//! The host side of point-to-point exchanges: process-group ranks, the peer in PGNCCL's titles,
//! the enqueue op of each CPU backend span, the members of a batch (see the parent module's doc).

use super::is_p2p_kind;
use super::rank::Spans;
use crate::model::*;

/// A process group's ranks from `Process Group Ranks` text (`[0, 1]`); empty when cut (`...`)
/// or unreadable.
pub(crate) fn parse_ranks(text: &str) -> Vec<i64> {
    if text.contains("...") {
        return Vec::new();
    }
    let v: Option<Vec<i64>> = text
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse().ok())
        .collect();
    v.unwrap_or_default()
}

/// The peer in PGNCCL's profiling title: `nccl:send 0->1` (to 1), `nccl:recv 1<-0` (from 0);
/// ranks in the op's process group.
pub(super) fn peer_in_title(name: &str) -> Option<(CollKind, i64)> {
    let rest = name.strip_prefix("nccl:")?;
    let (op, ranks) = rest.split_once(' ')?;
    let (kind, sep) = match op {
        "send" => (CollKind::Send, "->"),
        "recv" => (CollKind::Recv, "<-"),
        _ => return None,
    };
    let (_, peer) = ranks.split_once(sep)?;
    Some((kind, peer.trim().parse().ok()?))
}

/// Elements of the first input of an event's communication args, when written.
fn elements_of(t: &RankTrace, i: usize) -> Option<i64> {
    let a = t.events.args[i];
    if a == NONE_U32 {
        return None;
    }
    let a = a as usize;
    [t.comm.in_nelems.get(a), t.comm.input_elems.get(a)].into_iter().flatten().copied().find(|&n| n >= 0)
}

/// For each backend span (sorted by start), the enqueue op (sorted by start) it runs: the
/// earliest unpaired op that began before the span with the same element count when both say,
/// else the earliest unpaired op that began before it (in order when neither says).
pub(super) fn pair_enqueues(t: &RankTrace, spans: &[usize], ops: &[usize]) -> Vec<Option<usize>> {
    let e = &t.events;
    let mut used = vec![false; ops.len()];
    let mut first_free = 0;
    let mut out = Vec::with_capacity(spans.len());
    for &sp in spans {
        while first_free < ops.len() && used[first_free] {
            first_free += 1;
        }
        let before = ops.partition_point(|&q| e.ts_ns[q] <= e.ts_ns[sp]);
        let n = elements_of(t, sp);
        // Only a few ops can be in flight at once: look at the next few unpaired ones.
        let same = n.and_then(|n| {
            (first_free..before).filter(|&j| !used[j]).take(8).find(|&j| elements_of(t, ops[j]) == Some(n))
        });
        let j = same.or_else(|| (first_free..ops.len()).find(|&j| !used[j]));
        if let Some(j) = j {
            used[j] = true;
        }
        out.push(j.map(|j| ops[j]));
    }
    out
}

/// The members of a batched point-to-point exchange launched inside host op `h` (an NCCL group,
/// `nccl:coalesced`): the sends and recvs recorded on its thread inside it, or since the
/// previous communication op ended when they precede it (PGNCCL records each `isend` / `irecv`
/// of a coalescing block, then launches the group at its end).
pub(super) fn p2p_batch(
    t: &RankTrace,
    strings: &StringTable,
    h: usize,
    host_comm_by_lane: &FxHashMap<LaneId, Spans>,
    global: &dyn Fn(i64) -> Option<u32>,
) -> Vec<(CollKind, Option<u32>)> {
    let e = &t.events;
    let Some(v) = host_comm_by_lane.get(&e.lane[h]).map(|s| &s.rows) else { return Vec::new() };
    let dir = |q: usize| match e.coll_kind(q) {
        k @ (CollKind::Send | CollKind::Recv) => Some(k),
        _ => None,
    };
    // Where the block starts: the end of the previous op on the thread that is not a send or
    // recv (nor inside `h`).
    let start = v
        .iter()
        .filter(|&&q| e.end_ns(q) <= e.ts_ns[h] && dir(q).is_none() && q != h)
        .map(|&q| e.end_ns(q))
        .max()
        .unwrap_or(i64::MIN);
    let mut out = Vec::new();
    let mut last_end = i64::MIN;
    for &q in v {
        let inside = e.ts_ns[q] >= e.ts_ns[h] && e.end_ns(q) <= e.end_ns(h) && q != h;
        let before = e.ts_ns[q] >= start && e.end_ns(q) <= e.ts_ns[h];
        let Some(k) = dir(q) else { continue };
        // One member per op: an op and the `record_param_comms` nested in it are one.
        if !(inside || before) || e.ts_ns[q] < last_end {
            continue;
        }
        last_end = e.end_ns(q);
        let a = e.args[q] as usize;
        let c = &t.comm;
        let raw = match k {
            CollKind::Send => c.dst_rank.get(a).copied(),
            _ => c.src_rank.get(a).copied(),
        }
        .filter(|&x| x >= 0);
        let group_local = strings.get(e.name[q]).starts_with("c10d::");
        let peer = raw.and_then(|x| if group_local { global(i64::from(x)) } else { u32::try_from(x).ok() });
        out.push((k, peer));
    }
    out
}

/// Host-side facts of CPU-only point-to-point spans: the `c10d::send` / `c10d::recv_` that
/// enqueued each backend span, and the collective ops the spans may be nested in.
#[derive(Debug, Default)]
pub(super) struct P2pHost {
    /// `(span, enqueue op)`, sorted by span.
    enqueue: Vec<(usize, usize)>,
    /// Spans nested in a collective op (not point-to-point exchanges).
    nested: Vec<usize>,
}

impl P2pHost {
    pub(super) fn new(t: &RankTrace, strings: &StringTable, chosen: &[usize]) -> P2pHost {
        let e = &t.events;
        let c10d =
            |i: usize| e.class[i] == Class::Communication && strings.get(e.name[i]).starts_with("c10d::");
        let mut out = P2pHost::default();
        // Collective ops per lane, to find the spans nested in one.
        let mut coll_ops: FxHashMap<LaneId, Vec<usize>> = FxHashMap::default();
        for i in 0..e.len() {
            if c10d(i) && e.kind[i] == EventKind::Slice && !is_p2p_kind(e.coll_kind(i)) {
                coll_ops.entry(e.lane[i]).or_default().push(i);
            }
        }
        for &i in chosen {
            if !is_p2p_kind(e.coll_kind(i)) {
                continue;
            }
            let inside = coll_ops.get(&e.lane[i]).is_some_and(|v| {
                v.iter().any(|&q| e.ts_ns[q] <= e.ts_ns[i] && e.end_ns(q) >= e.end_ns(i) && q != i)
            });
            if inside {
                out.nested.push(i);
            }
        }
        for kind in [CollKind::Send, CollKind::Recv] {
            let mut spans: Vec<usize> = chosen
                .iter()
                .copied()
                .filter(|&i| e.coll_kind(i) == kind && !out.nested.contains(&i))
                .collect();
            let mut ops: Vec<usize> = (0..e.len())
                .filter(|&i| c10d(i) && e.kind[i] == EventKind::Slice && e.coll_kind(i) == kind)
                .collect();
            spans.sort_by_key(|&i| (e.ts_ns[i], i));
            ops.sort_by_key(|&i| (e.ts_ns[i], i));
            if spans.len() == ops.len() {
                out.enqueue.extend(spans.into_iter().zip(ops));
            } else {
                // Each span with the latest unused op of its direction that began before it.
                let mut used = vec![false; ops.len()];
                for sp in spans {
                    let k = ops.partition_point(|&q| e.ts_ns[q] <= e.ts_ns[sp]);
                    if let Some(j) = (0..k).rev().find(|&j| !used[j]) {
                        used[j] = true;
                        out.enqueue.push((sp, ops[j]));
                    }
                }
            }
        }
        out.enqueue.sort_unstable();
        out.nested.sort_unstable();
        out
    }

    pub(super) fn enqueue_of(&self, span: usize) -> Option<usize> {
        self.enqueue.binary_search_by_key(&span, |x| x.0).ok().map(|k| self.enqueue[k].1)
    }

    pub(super) fn in_collective(&self, span: usize) -> bool {
        self.nested.binary_search(&span).is_ok()
    }
}
