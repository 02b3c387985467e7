//! Collective instances: on each rank, the events that *are* a collective's execution, with
//! their message size, and their matching across ranks.
//!
//! - GPU ranks: communication kernels on GPU streams (`ncclKernel_*`, `ncclDevKernel_*`, RCCL).
//! - CPU-only ranks: the backend's own spans (`gloo:*`, `nccl:*`, `mpi:*`, `ucc:*`) that are not
//!   nested in another; without those, every top-level communication event.
//!
//! Message size, in order: the kernel's own args (`In msg nelems` × dtype size, or `In msg size`);
//! the CPU communication op with the same `External id`; the communication op enclosing the
//! launch on the host thread (e.g. `nccl:all_reduce` with `Input Dims` and `Input type`).
//!
//! **Point-to-point** (`p2p`): sends, recvs and batches of them (`batch_isend_irecv`, an NCCL
//! group: `nccl:coalesced`) are exchanges between two ranks, not collectives: they are matched
//! send → recv by [`super::pipeline`] and kept out of the collectives' matching below. An instance is
//! point-to-point when its kind is send, recv or send/recv (NCCL's `ncclDevKernel_SendRecv`
//! whose enclosing op does not say all_to_all, gather or scatter) and it is not nested in a
//! collective op (`TORCH_DISTRIBUTED_DEBUG=DETAIL` runs its checks as `gloo:send` / `gloo:recv`
//! inside `c10d::allreduce_`: those belong to the collective). Its peer (the global rank at the
//! other end), in order: `Dst Rank` / `Src Rank` of `record_param_comms` (global); the peer in
//! the `Concrete Inputs` of the `c10d::send` / `c10d::recv_` that enqueued it (gloo: paired with
//! the backend span by order per direction), or in PGNCCL's profiling title (`nccl:send 0->1`,
//! `nccl:recv 1<-0`), both ranks in the op's process group, mapped to global ranks through the
//! group's ranks (`Process Group Ranks`, `distributedInfo.pg_config`; a group that is not known
//! is taken as the default group). Without any of those the peer stays unknown and
//! [`super::pipeline`] infers it from the pipeline's structure.
//!
//! Matching across ranks: by (process group, `Seq`) where the trace has sequence numbers;
//! otherwise by (process group, collective kind, step, ordinal within the step); without step
//! markers by whole-trace ordinal, trying small ordinal shifts per rank and keeping one only
//! when it is clearly more consistent (profiling windows do not always start at the same
//! collective on every rank).

use serde::{Deserialize, Serialize};

use super::roles::is_backend_span;
use super::stats::lower_median;
use crate::model::*;
use crate::normalize::job::RankEntry;

/// One collective as executed on one rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    pub event: EventIdx,
    pub kind: CollKind,
    /// Process group name, or empty when unknown.
    pub pg: String,
    pub seq: Option<i64>,
    pub start_ns: i64,
    pub end_ns: i64,
    pub step: u32,
    /// Message size in bytes (the input buffer), when it can be told.
    pub bytes: Option<i64>,
    pub group_size: Option<i64>,
    /// When the host issued it (rank clock): the launch call of a GPU kernel, the `c10d::*`
    /// op that enqueued a backend span, else its start. Where in the step it comes from.
    #[serde(default)]
    pub issued_ns: i64,
    /// The lane (thread or stream) it ran on: a backend runs each process group on lanes of
    /// its own (gloo: worker threads per group; NCCL: a stream per communicator).
    #[serde(default)]
    pub lane: u32,
    /// The lane's thread id as the trace writes it (an integer), when it is one: a backend
    /// creates a process group's threads one after the other ([`super::layout`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<i64>,
    /// A point-to-point exchange (see the module doc), not a collective.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub p2p: bool,
    /// Point-to-point: the global rank at the other end (a send's destination, a recv's
    /// source), when the trace says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<u32>,
    /// The peer is its index in the exchange's process group, which the rank's trace does not
    /// name (gloo's `c10d::send` / `c10d::recv_` say the group's rank): the job's layout maps
    /// it to the global rank once the group is known ([`super::layout`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub peer_in_group: bool,
    /// Point-to-point: the tag (`c10d::send` / `c10d::recv_`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<i64>,
    /// A batch of sends and recvs run as one exchange (`batch_isend_irecv`, `nccl:coalesced`):
    /// its members' direction (`Send` / `Recv`) and peer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batch: Vec<(CollKind, Option<u32>)>,
    /// Issued from inside an autograd function (`autograd::engine::evaluate_function: …` open
    /// on the issuing thread): a gradient hook's call, DDP's bucket all_reduce from
    /// `AccumulateGrad`, FSDP's post-backward reduce-scatter. Gradient communication, whatever
    /// its size (a trace recorded without `record_shapes` has none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_autograd: bool,
}

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

/// Whether `kind` is a point-to-point kind.
pub fn is_p2p_kind(kind: CollKind) -> bool {
    matches!(kind, CollKind::Send | CollKind::Recv | CollKind::SendRecv)
}

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
fn peer_in_title(name: &str) -> Option<(CollKind, i64)> {
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

/// The instances of one rank, in time order.
/// The host communication ops of one lane, for finding the one around an instant.
#[derive(Default)]
struct Spans {
    /// Rows by start (then row).
    rows: Vec<usize>,
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

pub fn rank_instances(r: &RankEntry, strings: &StringTable) -> Vec<Instance> {
    let t = &r.trace;
    let e = &t.events;
    let lane_kind = |i: usize| t.lanes.kind.get(e.lane[i].0 as usize).copied().unwrap_or(LaneKind::Cpu);
    let comm = |i: usize| e.kind[i] == EventKind::Slice && e.class[i] == Class::Communication;
    let gpu: Vec<usize> = (0..e.len()).filter(|&i| comm(i) && lane_kind(i) == LaneKind::Gpu).collect();
    let gpu_side = !gpu.is_empty();
    let chosen: Vec<usize> = if gpu_side {
        gpu
    } else {
        let cpu: Vec<usize> = (0..e.len()).filter(|&i| comm(i) && lane_kind(i) == LaneKind::Cpu).collect();
        let backend: Vec<usize> = cpu.iter().copied().filter(|&i| is_backend_span(t, strings, i)).collect();
        top_level(t, if backend.is_empty() { cpu } else { backend })
    };
    let row_of = |q: usize| (e.args[q] != NONE_U32).then_some(e.args[q] as usize);
    // Host-side communication ops with their args, by External id and by lane for enclosure.
    let mut by_ext: FxHashMap<u64, usize> = FxHashMap::default();
    let mut host_comm_by_lane: FxHashMap<LaneId, Spans> = FxHashMap::default();
    for i in 0..e.len() {
        if comm(i) && lane_kind(i) == LaneKind::Cpu && e.args[i] != NONE_U32 {
            if e.external_id[i] != NONE_U64 {
                by_ext.entry(e.external_id[i]).or_insert(e.args[i] as usize);
            }
            host_comm_by_lane.entry(e.lane[i]).or_default().rows.push(i);
        }
    }
    for spans in host_comm_by_lane.values_mut() {
        spans.index(e);
    }
    let mut chosen = chosen;
    chosen.sort_by_key(|&i| (e.ts_ns[i], i));
    // Backend spans run on the backend's threads; the op that enqueued each one (`c10d::*` on
    // the issuing thread) pairs with it, when they are as many. Not simply in order: gloo runs
    // a process group's work on two threads, so two collectives enqueued back to back can
    // start in either order (DDP's 92-byte map of used parameters 2.5 µs before the bucket
    // enqueued ahead of it). Each span takes the earliest unpaired op enqueued before it with
    // the same element count (when both say), else the earliest unpaired one.
    let enqueue: Vec<Option<usize>> = if gpu_side {
        Vec::new()
    } else {
        let ops: Vec<usize> = (0..e.len())
            .filter(|&i| {
                comm(i) && lane_kind(i) == LaneKind::Cpu && strings.get(e.name[i]).starts_with("c10d::")
            })
            .collect();
        let mut ops = top_level(t, ops);
        ops.sort_by_key(|&i| (e.ts_ns[i], i));
        if ops.len() == chosen.len() {
            pair_enqueues(t, &chosen, &ops)
        } else {
            Vec::new()
        }
    };
    let p2p_host = if gpu_side { P2pHost::default() } else { P2pHost::new(t, strings, &chosen) };
    let world = t.meta.distributed.as_ref().and_then(|d| d.world_size);
    let frames = if chosen.is_empty() { FxHashMap::default() } else { autograd_frames(t, strings) };
    let mut out = Vec::with_capacity(chosen.len());
    for (k, i) in chosen.into_iter().enumerate() {
        let own = (e.args[i] != NONE_U32).then_some(e.args[i] as usize);
        let via_ext = by_ext.get(&e.external_id[i]).copied().filter(|_| e.external_id[i] != NONE_U64);
        let via_launch = r.norm.links.launch_of(EventIdx(i as u32)).and_then(|l| {
            let l = l.0 as usize;
            host_comm_by_lane
                .get(&e.lane[l])
                .and_then(|h| h.enclosing(e, e.ts_ns[l]))
                .map(|h| e.args[h] as usize)
        });
        let enq = p2p_host.enqueue_of(i);
        let rows: Vec<usize> =
            [own, via_ext, via_launch, enq.and_then(&row_of)].into_iter().flatten().collect();
        let size = rows.iter().find_map(|&a| args_bytes(t, strings, a));
        let pg = rows
            .iter()
            .map(|&a| t.comm.pg_name.get(a).copied().unwrap_or(StrId::EMPTY))
            .find(|s| *s != StrId::EMPTY)
            .map(|s| strings.get(s).to_string())
            .unwrap_or_default();
        let seq = rows.iter().filter_map(|&a| t.comm.seq.get(a).copied()).find(|&s| s >= 0);
        let group_size = rows.iter().filter_map(|&a| t.comm.group_size.get(a).copied()).find(|&g| g > 0);
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
        // The innermost host op enclosing the launch (`nccl:send 0->1`, `nccl:coalesced`).
        let launch_host = r.norm.links.launch_of(EventIdx(i as u32)).and_then(|l| {
            let l = l.0 as usize;
            host_comm_by_lane.get(&e.lane[l]).and_then(|h| h.enclosing(e, e.ts_ns[l]))
        });
        if kind == CollKind::SendRecv {
            // NCCL runs all_to_all, gather and scatter as grouped send/recv: the op says so.
            if let Some(h) = launch_host {
                let k = crate::normalize::coll_kind_of(strings.get(e.name[h]));
                if matches!(k, CollKind::AllToAll | CollKind::Gather | CollKind::Scatter) {
                    kind = k;
                }
            }
        }
        let p2p = is_p2p_kind(kind) && !p2p_host.in_collective(i);
        let (mut peer, mut tag, mut batch) = (None, None, Vec::new());
        let mut peer_in_group = false;
        if p2p {
            let pg_ranks: Vec<i64> = rows
                .iter()
                .filter_map(|&a| t.comm.pg_ranks.get(a).copied())
                .find(|s| *s != StrId::EMPTY)
                .map(|s| parse_ranks(strings.get(s)))
                .filter(|v| !v.is_empty())
                .or_else(|| {
                    t.meta.distributed.as_ref().and_then(|d| {
                        d.pg_config
                            .iter()
                            .find(|g| g.name == pg && !g.ranks.is_empty())
                            .map(|g| g.ranks.clone())
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
            for &a in &rows {
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
                    .map(|h| p2p_batch(t, strings, h, &host_comm_by_lane, &global))
                    .unwrap_or_default();
            }
        }
        let bytes = size.map(|s| match (kind, s.input_only, group_size.or(world)) {
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
            .or_else(|| enqueue.get(k).copied().flatten())
            .or(enq)
            .unwrap_or(i);
        let issued_ns = e.ts_ns[issuer];
        let from_autograd = frames.get(&e.lane[issuer]).is_some_and(|f| inside(f, issued_ns));
        out.push(Instance {
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
        });
    }
    out.sort_by_key(|x| (x.start_ns, x.event));
    out
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
fn pair_enqueues(t: &RankTrace, spans: &[usize], ops: &[usize]) -> Vec<Option<usize>> {
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
fn p2p_batch(
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
struct P2pHost {
    /// `(span, enqueue op)`, sorted by span.
    enqueue: Vec<(usize, usize)>,
    /// Spans nested in a collective op (not point-to-point exchanges).
    nested: Vec<usize>,
}

impl P2pHost {
    fn new(t: &RankTrace, strings: &StringTable, chosen: &[usize]) -> P2pHost {
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

    fn enqueue_of(&self, span: usize) -> Option<usize> {
        self.enqueue.binary_search_by_key(&span, |x| x.0).ok().map(|k| self.enqueue[k].1)
    }

    fn in_collective(&self, span: usize) -> bool {
        self.nested.binary_search(&span).is_ok()
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
