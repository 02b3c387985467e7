//! One rank's collective instances: which events they are, their kind, message size, process
//! group and issuer (see the parent module's doc).

use super::p2p::{p2p_batch, pair_enqueues, parse_ranks, peer_in_title, P2pHost};
use super::{is_p2p_kind, Instance};
use crate::analyze::roles::is_backend_span;
use crate::model::*;
use crate::normalize::job::RankEntry;

/// The name autograd's engine gives the frame of each backward function it runs.
const AUTOGRAD_FRAME: &str = "autograd::engine::evaluate_function";

/// Per CPU lane, the union of the autograd engine's frames (sorted, disjoint), for telling
/// whether an instant is inside one.
fn autograd_frames(t: &RankTrace, strings: &StringTable) -> FxHashMap<LaneId, Vec<(i64, i64)>> {
    let e = &t.events;
    // Names are interned: look each distinct one up once.
    let mut is_frame: FxHashMap<StrId, bool> = FxHashMap::default();
    let mut by_lane: FxHashMap<LaneId, Vec<(i64, i64)>> = FxHashMap::default();
    for i in 0..e.len() {
        if e.kind[i] != EventKind::Slice {
            continue;
        }
        let frame =
            *is_frame.entry(e.name[i]).or_insert_with(|| strings.get(e.name[i]).starts_with(AUTOGRAD_FRAME));
        if frame {
            by_lane.entry(e.lane[i]).or_default().push((e.ts_ns[i], e.end_ns(i)));
        }
    }
    for v in by_lane.values_mut() {
        v.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(v.len());
        for &(a, b) in v.iter() {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        *v = merged;
    }
    by_lane
}

/// Whether `ts` falls inside one of `frames` (sorted, disjoint).
fn inside(frames: &[(i64, i64)], ts: i64) -> bool {
    let n = frames.partition_point(|f| f.0 <= ts);
    n > 0 && frames[n - 1].1 >= ts
}

/// Bytes of the comm-args row `a`, as nccl-tests counts a collective's size S: the larger of
/// the input and output buffers (all_reduce: either; all_gather: the gathered output;
/// reduce_scatter: the full input). From `In/Out msg size` when written, else `In/Out msg
/// nelems` (or the first input's element count from `Input Dims`) × dtype size.
fn args_bytes(t: &RankTrace, strings: &StringTable, a: usize) -> Option<Size> {
    let c = &t.comm;
    let sizes = [c.in_bytes.get(a), c.out_bytes.get(a)];
    if let Some(b) = sizes.iter().flatten().copied().filter(|&&b| b >= 0).max() {
        return Some(Size { bytes: *b, input_only: false });
    }
    let n = [c.in_nelems.get(a), c.out_nelems.get(a)]
        .iter()
        .flatten()
        .copied()
        .filter(|&&n| n >= 0)
        .max()
        .copied();
    let (n, input_only) = match (n, c.input_elems.get(a)) {
        (Some(n), _) => (n, false),
        (None, Some(&n)) if n >= 0 => (n, true),
        _ => return None,
    };
    let size = crate::model::dtype_bytes(strings.get(*c.dtype.get(a)?))?;
    Some(Size { bytes: n.saturating_mul(size), input_only })
}

/// A message size, and whether only the input tensor was known (`Input Dims` of a `nccl:*`
/// annotation): for all_gather the collective's size is then the input times the group size.
#[derive(Debug, Clone, Copy)]
struct Size {
    bytes: i64,
    input_only: bool,
}

/// The host communication ops of one lane, for finding the one around an instant.
#[derive(Default)]
pub(super) struct Spans {
    /// Rows by start (then row).
    pub(super) rows: Vec<usize>,
    /// `reach[k]`: the latest end among `rows[..=k]`.
    reach: Vec<i64>,
}

impl Spans {
    fn index(&mut self, e: &EventTable) {
        self.rows.sort_by_key(|&h| (e.ts_ns[h], h));
        let mut m = i64::MIN;
        self.reach = self
            .rows
            .iter()
            .map(|&h| {
                m = m.max(e.end_ns(h));
                m
            })
            .collect();
    }

    /// The last op (by start, then row) that started at or before `ts` and ends at or after it:
    /// a binary search for the ops started by `ts`, then back only while an earlier one can
    /// still reach `ts` (linear per query was quadratic in the collectives of a long trace).
    fn enclosing(&self, e: &EventTable, ts: i64) -> Option<usize> {
        let n = self.rows.partition_point(|&h| e.ts_ns[h] <= ts);
        (0..n).rev().take_while(|&k| self.reach[k] >= ts).map(|k| self.rows[k]).find(|&h| e.end_ns(h) >= ts)
    }
}

/// The instances of one rank, in time order.
pub fn rank_instances(r: &RankEntry, strings: &StringTable) -> Vec<Instance> {
    let t = &r.trace;
    let e = &t.events;
    let (mut chosen, gpu_side) = chosen_events(t, strings);
    // Host-side communication ops with their args, by External id and by lane for enclosure.
    let mut by_ext: FxHashMap<u64, usize> = FxHashMap::default();
    let mut host_comm_by_lane: FxHashMap<LaneId, Spans> = FxHashMap::default();
    for i in 0..e.len() {
        if is_comm(t, i) && lane_kind(t, i) == LaneKind::Cpu && e.args[i] != NONE_U32 {
            if e.external_id[i] != NONE_U64 {
                by_ext.entry(e.external_id[i]).or_insert(e.args[i] as usize);
            }
            host_comm_by_lane.entry(e.lane[i]).or_default().rows.push(i);
        }
    }
    for spans in host_comm_by_lane.values_mut() {
        spans.index(e);
    }
    chosen.sort_by_key(|&i| (e.ts_ns[i], i));
    let enqueue = if gpu_side { Vec::new() } else { enqueues(t, strings, &chosen) };
    let p2p_host = if gpu_side { P2pHost::default() } else { P2pHost::new(t, strings, &chosen) };
    let frames = if chosen.is_empty() { FxHashMap::default() } else { autograd_frames(t, strings) };
    let cx = Rank {
        r,
        t,
        strings,
        by_ext,
        host_comm_by_lane,
        enqueue,
        p2p_host,
        world: t.meta.distributed.as_ref().and_then(|d| d.world_size),
        frames,
    };
    let mut out: Vec<Instance> = chosen.into_iter().enumerate().map(|(k, i)| cx.instance(k, i)).collect();
    out.sort_by_key(|x| (x.start_ns, x.event));
    out
}

/// The kind of lane row `i` is on (a CPU thread when the lane is unknown).
fn lane_kind(t: &RankTrace, i: usize) -> LaneKind {
    t.lanes.kind.get(t.events.lane[i].0 as usize).copied().unwrap_or(LaneKind::Cpu)
}

/// Whether row `i` is a communication slice.
fn is_comm(t: &RankTrace, i: usize) -> bool {
    t.events.kind[i] == EventKind::Slice && t.events.class[i] == Class::Communication
}

/// The events that are the rank's instances (unsorted), and whether they are GPU kernels: the
/// GPU's communication kernels when there are any, else the CPU's outermost backend spans (or
/// outermost communication ops when no backend span is there).
fn chosen_events(t: &RankTrace, strings: &StringTable) -> (Vec<usize>, bool) {
    let e = &t.events;
    let gpu: Vec<usize> =
        (0..e.len()).filter(|&i| is_comm(t, i) && lane_kind(t, i) == LaneKind::Gpu).collect();
    if !gpu.is_empty() {
        return (gpu, true);
    }
    let cpu: Vec<usize> =
        (0..e.len()).filter(|&i| is_comm(t, i) && lane_kind(t, i) == LaneKind::Cpu).collect();
    let backend: Vec<usize> = cpu.iter().copied().filter(|&i| is_backend_span(t, strings, i)).collect();
    (top_level(t, if backend.is_empty() { cpu } else { backend }), false)
}

/// Per chosen backend span (sorted by start), the `c10d::*` op that enqueued it, when they are
/// as many (else none).
fn enqueues(t: &RankTrace, strings: &StringTable, chosen: &[usize]) -> Vec<Option<usize>> {
    let e = &t.events;
    // Backend spans run on the backend's threads; the op that enqueued each one (`c10d::*` on
    // the issuing thread) pairs with it, when they are as many. Not simply in order: gloo runs
    // a process group's work on two threads, so two collectives enqueued back to back can
    // start in either order (DDP's 92-byte map of used parameters 2.5 µs before the bucket
    // enqueued ahead of it). Each span takes the earliest unpaired op enqueued before it with
    // the same element count (when both say), else the earliest unpaired one.
    let ops: Vec<usize> = (0..e.len())
        .filter(|&i| {
            is_comm(t, i) && lane_kind(t, i) == LaneKind::Cpu && strings.get(e.name[i]).starts_with("c10d::")
        })
        .collect();
    let mut ops = top_level(t, ops);
    ops.sort_by_key(|&i| (e.ts_ns[i], i));
    if ops.len() == chosen.len() {
        pair_enqueues(t, chosen, &ops)
    } else {
        Vec::new()
    }
}

/// What one rank's instances are read against: its host communication ops (by External id and
/// by lane), the ops that enqueued its backend spans, its point-to-point host ops and its
/// autograd frames.
struct Rank<'a> {
    r: &'a RankEntry,
    t: &'a RankTrace,
    strings: &'a StringTable,
    by_ext: FxHashMap<u64, usize>,
    host_comm_by_lane: FxHashMap<LaneId, Spans>,
    /// Per chosen event (in start order), the `c10d::*` op that enqueued it ([`enqueues`]).
    enqueue: Vec<Option<usize>>,
    p2p_host: P2pHost,
    world: Option<i64>,
    frames: FxHashMap<LaneId, Vec<(i64, i64)>>,
}

/// A point-to-point instance's peer (global rank), whether that is a rank of a group not known
/// here, its tag, and the batch of exchanges it runs with.
struct P2pFields {
    peer: Option<u32>,
    peer_in_group: bool,
    tag: Option<i64>,
    batch: Vec<(CollKind, Option<u32>)>,
}

impl Rank<'_> {
    /// The instance of chosen event `i`, the `k`-th in start order: its size, group and kind
    /// from the comm-args rows linked to it, its peer when it is a point-to-point exchange, and
    /// the host event that issued it.
    fn instance(&self, k: usize, i: usize) -> Instance {
        let (r, t, strings) = (self.r, self.t, self.strings);
        let e = &t.events;
        let row_of = |q: usize| (e.args[q] != NONE_U32).then_some(e.args[q] as usize);
        let own = (e.args[i] != NONE_U32).then_some(e.args[i] as usize);
        let via_ext = self.by_ext.get(&e.external_id[i]).copied().filter(|_| e.external_id[i] != NONE_U64);
        let via_launch = r.norm.links.launch_of(EventIdx(i as u32)).and_then(|l| {
            let l = l.0 as usize;
            self.host_comm_by_lane
                .get(&e.lane[l])
                .and_then(|h| h.enclosing(e, e.ts_ns[l]))
                .map(|h| e.args[h] as usize)
        });
        let enq = self.p2p_host.enqueue_of(i);
        let rows: Vec<usize> =
            [own, via_ext, via_launch, enq.and_then(row_of)].into_iter().flatten().collect();
        let size = rows.iter().find_map(|&a| args_bytes(t, strings, a));
        let pg = rows
            .iter()
            .map(|&a| t.comm.pg_name.get(a).copied().unwrap_or(StrId::EMPTY))
            .find(|s| *s != StrId::EMPTY)
            .map(|s| strings.get(s).to_string())
            .unwrap_or_default();
        let seq = rows.iter().filter_map(|&a| t.comm.seq.get(a).copied()).find(|&s| s >= 0);
        let group_size = rows.iter().filter_map(|&a| t.comm.group_size.get(a).copied()).find(|&g| g > 0);
        // The innermost host op enclosing the launch (`nccl:send 0->1`, `nccl:coalesced`).
        let launch_host = r.norm.links.launch_of(EventIdx(i as u32)).and_then(|l| {
            let l = l.0 as usize;
            self.host_comm_by_lane.get(&e.lane[l]).and_then(|h| h.enclosing(e, e.ts_ns[l]))
        });
        let kind = self.kind_of(i, &rows, launch_host);
        let p2p = is_p2p_kind(kind) && !self.p2p_host.in_collective(i);
        let P2pFields { peer, peer_in_group, tag, batch } = if p2p {
            self.p2p_fields(i, kind, &rows, &pg, launch_host)
        } else {
            P2pFields { peer: None, peer_in_group: false, tag: None, batch: Vec::new() }
        };
        let bytes = size.map(|s| match (kind, s.input_only, group_size.or(self.world)) {
            (CollKind::AllGather, true, Some(n)) if n > 0 => s.bytes.saturating_mul(n),
            _ => s.bytes,
        });
        // The host event that issued it: the launch call, the `c10d::*` op that enqueued it,
        // else itself.
        let issuer = r
            .norm
            .links
            .launch_of(EventIdx(i as u32))
            .map(|l| l.0 as usize)
            .or_else(|| self.enqueue.get(k).copied().flatten())
            .or(enq)
            .unwrap_or(i);
        let issued_ns = e.ts_ns[issuer];
        let from_autograd = self.frames.get(&e.lane[issuer]).is_some_and(|f| inside(f, issued_ns));
        Instance {
            event: EventIdx(i as u32),
            kind,
            pg,
            seq,
            start_ns: e.ts_ns[i],
            end_ns: e.end_ns(i),
            step: e.step[i],
            bytes,
            group_size,
            issued_ns,
            lane: e.lane[i].0,
            tid: match t.lanes.tid.get(e.lane[i].0 as usize) {
                Some(IdKey::Int(n)) => Some(*n),
                _ => None,
            },
            p2p,
            peer,
            peer_in_group,
            tag,
            batch,
            from_autograd,
        }
    }

    /// The collective kind of event `i`: the kernel's, made more specific by its comm-args rows
    /// `rows` and by the host op enclosing its launch (`launch_host`).
    fn kind_of(&self, i: usize, rows: &[usize], launch_host: Option<usize>) -> CollKind {
        let (t, strings) = (self.t, self.strings);
        let e = &t.events;
        let mut kind = e.coll_kind(i);
        let from_args = rows
            .iter()
            .filter_map(|&a| t.comm.collective.get(a).copied())
            .map(|s| crate::normalize::coll_kind_of(strings.get(s)))
            .find(|k| *k != CollKind::Unknown);
        // RCCL's `ncclDevKernel_Generic` says nothing, and NCCL runs all_to_all (and gather,
        // scatter) as SendRecv kernels: the enclosing op's collective name is more specific.
        let p2p_kernel = matches!(kind, CollKind::SendRecv | CollKind::Send | CollKind::Recv);
        if let Some(k) = from_args {
            if kind == CollKind::Unknown
                || (p2p_kernel && matches!(k, CollKind::AllToAll | CollKind::Gather | CollKind::Scatter))
            {
                kind = k;
            }
        }
        if matches!(kind, CollKind::SendRecv) {
            // A send/recv kernel whose op says which.
            if let Some(k) = from_args.filter(|k| matches!(k, CollKind::Send | CollKind::Recv)) {
                kind = k;
            }
        }
        if kind == CollKind::SendRecv {
            // NCCL runs all_to_all, gather and scatter as grouped send/recv: the op says so.
            if let Some(h) = launch_host {
                let k = crate::normalize::coll_kind_of(strings.get(e.name[h]));
                if matches!(k, CollKind::AllToAll | CollKind::Gather | CollKind::Scatter) {
                    kind = k;
                }
            }
        }
        kind
    }

    /// The peer, tag and batch of point-to-point event `i` of kind `kind` in group `pg`: from its
    /// comm-args rows (a group rank made global through the group's ranks), else from the title
    /// of its host op (`nccl:send 0->1`).
    fn p2p_fields(
        &self,
        i: usize,
        kind: CollKind,
        rows: &[usize],
        pg: &str,
        launch_host: Option<usize>,
    ) -> P2pFields {
        let (t, strings) = (self.t, self.strings);
        let e = &t.events;
        let (mut peer, mut tag, mut batch) = (None, None, Vec::new());
        let mut peer_in_group = false;
        let pg_ranks: Vec<i64> = rows
            .iter()
            .filter_map(|&a| t.comm.pg_ranks.get(a).copied())
            .find(|s| *s != StrId::EMPTY)
            .map(|s| parse_ranks(strings.get(s)))
            .filter(|v| !v.is_empty())
            .or_else(|| {
                t.meta.distributed.as_ref().and_then(|d| {
                    d.pg_config.iter().find(|g| g.name == pg && !g.ranks.is_empty()).map(|g| g.ranks.clone())
                })
            })
            .unwrap_or_default();
        let global = |group_rank: i64| -> Option<u32> {
            let g = if pg_ranks.is_empty() {
                group_rank
            } else {
                *pg_ranks.get(usize::try_from(group_rank).ok()?)?
            };
            u32::try_from(g).ok()
        };
        for &a in rows {
            let c = &t.comm;
            let ev = c.event.get(a).map_or(usize::MAX, |x| x.0 as usize);
            let group_local = ev < e.len() && strings.get(e.name[ev]).starts_with("c10d::");
            let v = match kind {
                CollKind::Send => c.dst_rank.get(a).copied(),
                CollKind::Recv => c.src_rank.get(a).copied(),
                _ => None,
            };
            if let Some(v) = v.filter(|&v| v >= 0) {
                if peer.is_none() {
                    peer = if group_local { global(i64::from(v)) } else { u32::try_from(v).ok() };
                    // A group rank whose group is not known here: the default group's until
                    // the layout says which group it was.
                    peer_in_group = group_local && pg_ranks.is_empty() && pg.is_empty();
                }
            }
            if tag.is_none() {
                tag = c.tag.get(a).copied().filter(|&x| x >= 0).map(i64::from);
            }
        }
        if peer.is_none() {
            let title = launch_host.map(|h| strings.get(e.name[h])).or_else(|| {
                let n = strings.get(e.name[i]);
                n.starts_with("nccl:").then_some(n)
            });
            if let Some((k, v)) = title.and_then(peer_in_title) {
                if k == kind {
                    peer = global(v);
                }
            }
        }
        if kind == CollKind::SendRecv {
            batch = launch_host
                .map(|h| p2p_batch(t, strings, h, &self.host_comm_by_lane, &global))
                .unwrap_or_default();
        }
        P2pFields { peer, peer_in_group, tag, batch }
    }
}

/// Keeps the events not contained in another of the list on the same lane. A point-to-point
/// span contains nothing: gloo's async `gloo:send` lasts until its recv completed, and the
/// thread's next exchanges (`gloo:recv`, the next `gloo:send`) start inside it.
fn top_level(t: &RankTrace, mut idx: Vec<usize>) -> Vec<usize> {
    let e = &t.events;
    idx.sort_by_key(|&i| (e.lane[i], e.ts_ns[i], std::cmp::Reverse(e.dur_ns[i])));
    let mut out = Vec::new();
    let mut cur: Option<(LaneId, i64)> = None;
    for i in idx {
        match cur {
            Some((l, end)) if l == e.lane[i] && e.end_ns(i) <= end => continue,
            _ => {
                if !is_p2p_kind(e.coll_kind(i)) {
                    cur = Some((e.lane[i], e.end_ns(i)));
                }
                out.push(i);
            }
        }
    }
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rankscope_synth::Rng;

    #[test]
    fn the_enclosing_op_is_the_linear_scans() {
        let mut rng = Rng::from_state(41);
        for round in 0..200 {
            let n = 1 + rng.below(60);
            let mut e = EventTable::default();
            let mut starts: Vec<i64> = (0..n).map(|_| rng.range(0, 1000)).collect();
            starts.sort();
            for &s in &starts {
                e.ts_ns.push(s);
                // Nested, disjoint and long spans alike.
                e.dur_ns.push([rng.range(0, 5), rng.range(0, 50), rng.range(0, 600)][rng.below(3)]);
            }
            let mut spans = Spans { rows: (0..n).filter(|_| rng.below(4) > 0).collect(), reach: Vec::new() };
            let linear = spans.rows.clone();
            spans.index(&e);
            for _ in 0..50 {
                let ts = rng.range(-10, 1700);
                let want = linear.iter().rev().copied().find(|&h| e.ts_ns[h] <= ts && e.end_ns(h) >= ts);
                assert_eq!(spans.enclosing(&e, ts), want, "round {round}, ts {ts}");
            }
        }
    }
}
