//! The role an event plays in the per-rank figures, decided once per rank.
//!
//! **Work** is device-style activity (compute, communication or a memory slice) on a lane of one
//! kind: what busy unions, idle gaps, step ends and the critical path's chains are made of. A
//! rank's figures come from its GPU lanes when it has GPU work, else from its CPU threads
//! (gloo DDP), so both sides are collected in one scan and every consumer reads the list.
//!
//! **Backend spans** are a communication backend's own spans (`gloo:*`, `nccl:*`, `mpi:*`,
//! `ucc:*`): on a CPU-only rank they, not the `c10d::*` ops that enqueue them, are the
//! communication.

use std::collections::BTreeMap;

use crate::model::*;

/// Name prefixes of communication backends' own spans.
pub const BACKEND_PREFIXES: &[&str] = &["gloo:", "nccl:", "mpi:", "ucc:"];

/// Whether event `i` is a communication backend's own span (`gloo:*`, `nccl:*`, `mpi:*`,
/// `ucc:*`).
pub fn is_backend_span(t: &RankTrace, strings: &StringTable, i: usize) -> bool {
    let n = strings.get(t.events.name[i]);
    BACKEND_PREFIXES.iter().any(|p| n.starts_with(p))
}

/// Where a CPU thread sits inside an operator, blocked on a collective it issued there: per CPU
/// lane, sorted, disjoint intervals (rank clock).
///
/// A collective called synchronously from inside an operator (Megatron's f/g autograd
/// Functions: `_Reduce` > `c10d::allreduce_` and then the wait for it; a tensor-parallel
/// layer's all_reduce in a custom op; FSDP's unsharding inside a module's forward) returns from
/// its `c10d::*` op at once and then waits, still inside the enclosing operator, until the
/// backend finishes it. The operator's time there is waiting or transfer, never compute. The
/// intervals are those inside the enclosing operator, after its first `c10d::*` call returned,
/// in which no other slice runs on the thread (communication spans aside: gloo's point-to-point
/// `gloo:recv` runs on the calling thread and lasts until the data came) while the rank's
/// backend (`gloo:*`, `nccl:*`, … spans) is running a collective: a thread idle inside an
/// operator while nothing is in flight is its own business. A piece shorter
/// than [`super::regions::MIN_BLOCKED_GAP_NS`] is the operator's own code after an asynchronous
/// call (DDP's gradient hooks enqueue their bucket and return), not a wait.
/// Nothing on GPU ranks, whose collectives run on the device (their host blocks in
/// synchronizations, which are classified as such).
pub fn blocked_waits(t: &RankTrace, strings: &StringTable) -> Vec<(LaneId, crate::analyze::intervals::Iv)> {
    use crate::analyze::intervals::Set;
    let e = &t.events;
    let cpu = |i: usize| t.lanes.kind.get(e.lane[i].0 as usize) == Some(&LaneKind::Cpu);
    let comm = |i: usize| e.kind[i] == EventKind::Slice && e.class[i] == Class::Communication;
    let mut spans = Vec::new();
    let mut issued: Vec<usize> = Vec::new();
    // Each distinct name looked at once.
    let mut c10d: FxHashMap<StrId, bool> = FxHashMap::default();
    for i in 0..e.len() {
        if !comm(i) || !cpu(i) {
            continue;
        }
        if is_backend_span(t, strings, i) {
            spans.push((e.ts_ns[i], e.end_ns(i)));
        } else if *c10d.entry(e.name[i]).or_insert_with(|| strings.get(e.name[i]).starts_with("c10d::")) {
            issued.push(i);
        }
    }
    if spans.is_empty() || issued.is_empty() {
        return Vec::new();
    }
    let in_flight = Set::from_unsorted(spans);
    issued.sort_unstable();
    let is_issued = |i: usize| issued.binary_search(&i).is_ok();
    // Per lane, its slices by start (the longer first), walked once with a stack of the open
    // ones: the innermost open slice that is an operator (not a region, not communication)
    // is the one a call was made from; then, per such operator, the time after its first call
    // in which a collective is in flight and nothing else runs inside it.
    let mut by_lane: FxHashMap<LaneId, Vec<usize>> = FxHashMap::default();
    for i in 0..e.len() {
        if e.kind[i] == EventKind::Slice && cpu(i) {
            by_lane.entry(e.lane[i]).or_default().push(i);
        }
    }
    let mut out: FxHashMap<LaneId, Vec<crate::analyze::intervals::Iv>> = FxHashMap::default();
    for (lane, rows) in by_lane.iter_mut() {
        rows.sort_by_key(|&i| (e.ts_ns[i], std::cmp::Reverse(e.dur_ns[i]), i));
        // (end, position in `rows`, operator?) of the open slices.
        let mut stack: Vec<(i64, usize, bool)> = Vec::new();
        // Per operator that made calls (its position): the earliest end of its calls.
        let mut callers: BTreeMap<usize, i64> = BTreeMap::new();
        for (k, &i) in rows.iter().enumerate() {
            let ts = e.ts_ns[i];
            while stack.last().is_some_and(|o| o.0 <= ts) {
                stack.pop();
            }
            let end = e.end_ns(i);
            if is_issued(i) {
                if let Some(&(_, op, _)) = stack.iter().rev().find(|o| o.2) {
                    let from = callers.entry(op).or_insert(end);
                    *from = (*from).min(end);
                }
            }
            let operator = !comm(i) && !super::regions::is_region(t, strings, i);
            stack.push((end, k, operator));
        }
        for (op, from) in callers {
            let op_end = e.end_ns(rows[op]);
            // What the thread runs inside the operator after the call: not waiting then.
            // (Communication on the thread itself is the wait: gloo runs point-to-point on the
            // calling thread, its `gloo:recv` lasting until the data came.)
            let kids: Vec<crate::analyze::intervals::Iv> = rows[op + 1..]
                .iter()
                .take_while(|&&q| e.ts_ns[q] < op_end)
                .filter(|&&q| !comm(q) && e.end_ns(q) > from)
                .map(|&q| (e.ts_ns[q], e.end_ns(q)))
                .collect();
            let blocked = in_flight.clip(from, op_end).subtract(&Set::from_unsorted(kids));
            out.entry(*lane).or_default().extend(
                blocked.intervals().iter().filter(|iv| iv.1 - iv.0 >= super::regions::MIN_BLOCKED_GAP_NS),
            );
        }
    }
    let mut out: Vec<(LaneId, Vec<crate::analyze::intervals::Iv>)> = out.into_iter().collect();
    out.sort_by_key(|x| x.0);
    out.into_iter()
        .flat_map(|(l, v)| {
            Set::from_unsorted(v).intervals().iter().map(move |&iv| (l, iv)).collect::<Vec<_>>()
        })
        .collect()
}

/// Whether row `i` is device-style work (compute, communication or memory slice) on a lane of
/// kind `side`.
pub fn is_work(t: &RankTrace, i: usize, side: LaneKind) -> bool {
    t.events.kind[i] == EventKind::Slice
        && t.lanes.kind.get(t.events.lane[i].0 as usize) == Some(&side)
        && matches!(t.events.class[i], Class::Compute | Class::Communication | Class::Memory)
}

/// One rank's work events on each lane kind, each list sorted by `(start, row)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Work {
    pub gpu: Vec<usize>,
    pub cpu: Vec<usize>,
}

impl Work {
    /// One scan over the rank's events.
    pub fn of(t: &RankTrace) -> Work {
        let e = &t.events;
        let mut w = Work::default();
        for i in 0..e.len() {
            if e.kind[i] != EventKind::Slice
                || !matches!(e.class[i], Class::Compute | Class::Communication | Class::Memory)
            {
                continue;
            }
            match t.lanes.kind.get(e.lane[i].0 as usize) {
                Some(LaneKind::Gpu) => w.gpu.push(i),
                Some(LaneKind::Cpu) => w.cpu.push(i),
                None => {}
            }
        }
        for v in [&mut w.gpu, &mut w.cpu] {
            v.sort_by_key(|&i| (e.ts_ns[i], i));
        }
        w
    }

    /// The work on lanes of kind `side` (none for other kinds).
    pub fn side(&self, side: LaneKind) -> &[usize] {
        match side {
            LaneKind::Gpu => &self.gpu,
            LaneKind::Cpu => &self.cpu,
        }
    }

    /// The side the rank's figures come from: its GPU lanes when it has GPU work.
    pub fn metrics_side(&self) -> LaneKind {
        if self.gpu.is_empty() {
            LaneKind::Cpu
        } else {
            LaneKind::Gpu
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn one_scan_equals_the_predicate() {
        let json = br#"{"traceEvents":[
            {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":30,"dur":5},
            {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":9,"tid":9,"ts":20,"dur":4},
            {"ph":"X","cat":"kernel","name":"relu","pid":0,"tid":7,"ts":10,"dur":5},
            {"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD","pid":0,"tid":8,"ts":10,"dur":2},
            {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":9,"tid":9,"ts":8,"dur":1},
            {"ph":"i","cat":"cpu_instant_event","name":"mark","pid":9,"tid":9,"ts":12,"s":"t"}
        ]}"#;
        let mut t = crate::parse::ingest_bytes("t.json", json).expect("trace");
        crate::normalize::normalize_rank(&mut t, &crate::normalize::classify::Rules::default());
        let w = Work::of(&t);
        for side in [LaneKind::Gpu, LaneKind::Cpu] {
            let e = &t.events;
            let mut want: Vec<usize> = (0..e.len()).filter(|&i| is_work(&t, i, side)).collect();
            want.sort_by_key(|&i| (e.ts_ns[i], i));
            assert_eq!(w.side(side), want.as_slice());
        }
        assert_eq!((w.gpu.len(), w.cpu.len(), w.metrics_side()), (3, 1, LaneKind::Gpu));
    }
}
