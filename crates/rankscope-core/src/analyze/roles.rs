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

use crate::model::*;

/// Name prefixes of communication backends' own spans.
pub const BACKEND_PREFIXES: &[&str] = &["gloo:", "nccl:", "mpi:", "ucc:"];

/// Whether event `i` is a communication backend's own span (`gloo:*`, `nccl:*`, `mpi:*`,
/// `ucc:*`).
pub fn is_backend_span(t: &RankTrace, strings: &StringTable, i: usize) -> bool {
    let n = strings.get(t.events.name[i]);
    BACKEND_PREFIXES.iter().any(|p| n.starts_with(p))
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
