//! The job simulator: CPU threads and GPU streams of every rank, step by step, in true time.
//!
//! Each rank is a small discrete-event model:
//! - two CPU threads (the Python main thread and the autograd engine's device thread) with a
//!   cursor each; CPU ops nest on a stack and cost a few µs of "profiler-visible" time;
//! - a compute stream (7): a kernel starts at `max(launch end + launch latency, stream free)`, so
//!   the GPU runs behind the CPU when the CPU is ahead and idles when it is not;
//! - one NCCL stream per process group: a collective's kernel starts when this rank *arrives*
//!   (launched, its gradient bucket computed, the previous collective on that stream done) and
//!   ends when the **last** rank has arrived plus the transfer time (the rendezvous), plus 0–2.5 µs
//!   of per-rank skew. Starts therefore differ by each rank's arrival, ends agree.
//!
//! The compute stream never waits for NCCL during backward (DDP overlaps), so the whole step up
//! to the end of backward is simulated per rank first; then every collective of the step is
//! resolved across ranks; then the optimizer (which waits for the last bucket) and the step's
//! closing `.item()` sync follow. All times are `i64` ns of "true" time: a clock all ranks share.
//! Clock offsets are added only when the events are written.

use super::model::*;
use super::rng::Rng;
use super::shapes::Site;
use super::{HangKind, Plan};

mod coll;
mod ddp;
pub(crate) mod pipe;

pub(crate) use coll::{CollTruth, JobSim};

/// Start of a collective a rank never reached (its trace ended first): later than any trace.
pub(crate) const NEVER: i64 = i64::MAX / 8;

/// Stream of all compute kernels, memcpys and memsets (PyTorch's default stream as CUPTI numbers it).
pub(crate) const STREAM_COMPUTE: u32 = 7;
/// The NCCL stream of each process group (index = process group).
pub(crate) const NCCL_STREAMS: [u32; 2] = [40, 48];

/// CPU thread of a rank.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Th {
    Main = 0,
    Autograd = 1,
}

/// Which part of the file an event belongs to. Kineto writes all CPU ops of one thread for the
/// whole trace, then those of the next thread, then all CUDA runtime calls and GPU activities;
/// the generator mirrors that order (one simulation pass per class).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Class {
    Autograd,
    Main,
    Activity,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum MemDir {
    HtoD,
    DtoH,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    /// `cpu_op`.
    CpuOp,
    /// `user_annotation`; `step` marks `ProfilerStep#N` (named with the step number when written).
    Annot {
        step: bool,
    },
    /// `record_param_comms` (`cpu_op`) of collective `coll` (index into [`RankSim::colls`]).
    Comms {
        coll: u32,
    },
    /// `cuda_runtime`; `flow` when it launched GPU work (gets an `ac2g` flow pair).
    Runtime {
        cbid: u16,
        flow: bool,
    },
    /// Compute kernel on the compute stream.
    Kernel {
        k: KernelId,
    },
    /// NCCL kernel of collective `coll` on its process group's stream.
    Nccl {
        coll: u32,
    },
    Memcpy {
        bytes: u64,
    },
    Memset {
        bytes: u64,
    },
    /// `gpu_user_annotation` on `stream`.
    GpuAnnot {
        stream: u32,
        step: bool,
    },
    /// `record_param_comms` of pipeline communication op `comm` (`PipeState::comms`).
    PipeComm {
        comm: u32,
    },
    /// The NCCL kernel of pipeline communication op `comm`.
    PipeKernel {
        comm: u32,
    },
}

/// One trace event of one step, in true time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ev {
    pub ts: i64,
    pub dur: i64,
    pub name: &'static str,
    pub kind: Kind,
    pub th: Th,
    /// `External id`.
    pub ext: u64,
    /// `correlation` for runtime calls and GPU work; `Ev Idx` for CPU ops.
    pub corr: u64,
    /// Autograd `Sequence number` (0: none).
    pub seq: u32,
    /// `fwdbwd` flow id (0: none): an `s` after a forward op, an `f` after a backward op.
    pub flow: u32,
    /// Where in the model a CPU op was called (its `Input Dims` with `record_shapes`).
    pub site: Site,
    /// A name made at run time: `RankSim::texts[text - 1]` replaces `name` (0: none).
    pub text: u16,
}

impl Ev {
    pub(crate) fn class(&self) -> Class {
        match self.kind {
            Kind::CpuOp | Kind::Annot { .. } | Kind::Comms { .. } | Kind::PipeComm { .. } => match self.th {
                Th::Main => Class::Main,
                Th::Autograd => Class::Autograd,
            },
            _ => Class::Activity,
        }
    }
}

/// Which collective, as PyTorch's NCCL backend issues it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum CollKind {
    AllReduce,
    AllToAll,
}

impl CollKind {
    /// The core's kind (its bus-bandwidth factor is the one the analysis uses).
    pub(crate) fn core(self) -> rankscope_core::model::CollKind {
        match self {
            CollKind::AllReduce => rankscope_core::model::CollKind::AllReduce,
            CollKind::AllToAll => rankscope_core::model::CollKind::AllToAll,
        }
    }

    /// `Collective name` in `record_param_comms` (PyTorch's spelling).
    pub(crate) fn collective_name(self) -> &'static str {
        match self {
            CollKind::AllReduce => "allreduce",
            CollKind::AllToAll => "all_to_all",
        }
    }

    fn op_name(self) -> &'static str {
        match self {
            CollKind::AllReduce => "c10d::allreduce_",
            CollKind::AllToAll => "c10d::alltoall_base_",
        }
    }

    /// The `nccl:*` annotation (and its GPU twin on the NCCL stream).
    fn annotation(self) -> &'static str {
        match self {
            CollKind::AllReduce => "nccl:all_reduce",
            CollKind::AllToAll => "nccl:all_to_all",
        }
    }

    pub(crate) fn kernel(self) -> KernelId {
        match self {
            CollKind::AllReduce => K_NCCL_ALLREDUCE,
            CollKind::AllToAll => K_NCCL_SENDRECV,
        }
    }

    /// Bytes per element and `dtype`: fp32 gradients, bf16 activations.
    pub(crate) fn dtype(self) -> (u64, &'static str) {
        match self {
            CollKind::AllReduce => (4, "Float"),
            CollKind::AllToAll => (2, "BFloat16"),
        }
    }
}

/// One collective of one step on one rank.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CollRec {
    pub kind: CollKind,
    /// Process group index (0: DDP's default group, 1: the metrics group).
    pub pg: usize,
    pub seq: u64,
    pub bytes: u64,
    kernel_ev: usize,
    annot_ev: usize,
    /// Earliest GPU start allowed by the CPU launch.
    launch_ready: i64,
    /// When the compute stream finishes the work this collective waits for (its bucket).
    compute_ready: i64,
    /// Arrival: the NCCL kernel's start.
    pub start: i64,
    pub end: i64,
    /// Time spent waiting for the last rank (latest arrival − own arrival; the whole kernel
    /// when it hung).
    pub wait: i64,
    resolved: bool,
    /// It never completed: it ran until the timeout, or never started (`start == NEVER`).
    pub hung: bool,
}

/// Truth about one rank's step (true time).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StepStats {
    pub start: i64,
    pub dur: i64,
    pub compute_busy: i64,
    pub comm_busy: i64,
    pub exposed_comm: i64,
    pub comm_wait: i64,
    pub malloc_bursts: u32,
    /// Duration of the DataLoader `__next__` annotation.
    pub data_loading: i64,
    /// Duration of the injected host-stall annotation (0 when none).
    pub host_stall: i64,
    /// CPU time blocked in the injected mid-forward `cudaStreamSynchronize` calls.
    pub host_sync: i64,
    /// Compute-stream idle caused by the injected stall or syncs: from the moment the GPU ran
    /// out of queued work (or the injection began, if later) to the next GPU work's start.
    pub injected_idle: i64,
}

#[derive(Debug)]
pub(crate) struct RankSim {
    pub rank: u32,
    rng: Rng,
    pub ev: Vec<Ev>,
    pub colls: Vec<CollRec>,
    t: [i64; 2],
    stack: [Vec<usize>; 2],
    compute_free: i64,
    nccl_free: [i64; 2],
    next_ext: u64,
    next_corr: u64,
    next_idx: u64,
    next_seq: u32,
    next_flow: u32,
    pg_seq: [u64; 2],
    speed_ppm: i64,
    fwd_stack: Vec<(u32, u32)>,
    point: u32,
    next_bucket: u32,
    step_ev: usize,
    first_gpu: Option<i64>,
    compute_iv: Vec<(i64, i64)>,
    churn: [u32; 2],
    /// Sum of the nominal durations of the compute kernels launched in the last step.
    pub base_sum: i64,
    /// GPU kernels (compute and NCCL) launched in the last step.
    pub kernels: u32,
    pub stats: StepStats,
    pub first_step_start: i64,
    pub last_step_end: i64,
    /// Model site of the CPU ops being recorded (for `Input Dims`).
    site: Site,
    /// Names made at run time this step (see [`Ev::text`]).
    pub texts: Vec<String>,
    /// This rank's work per step relative to the others, ppm (`uneven_batch`).
    work_ppm: i64,
    /// Set by a host stall or sync: the compute stream's idle starts here; the next GPU work
    /// closes the interval into `stats.injected_idle`.
    idle_mark: Option<i64>,
    /// The planning dry run: no per-rank injection applies.
    dry: bool,
    /// The forward all_to_all whose result the compute stream waits for (index into `colls`).
    a2a_pending: Option<usize>,
    /// The profiled step being simulated (0-based).
    step_idx: u32,
    /// When this rank's process-group watchdog aborted a hung collective: its trace ends here.
    pub abort: Option<i64>,
    /// The rank takes no further steps (it exited, or its trace ended in a hang).
    pub ended: bool,
    /// The rank runs the current step.
    pub active: bool,
    /// Pipeline mode: the GPU work of a step is placed once every rank's is known.
    pub pipe: Option<Box<pipe::PipeState>>,
}

/// Random streams of a rank, by purpose (see [`Rng::derive`]).
pub(crate) const RNG_SIM: u64 = 1;

impl RankSim {
    pub(crate) fn new(plan: &Plan, rank: u32) -> Self {
        let mut rng = Rng::derive(plan.cfg.seed, rank, RNG_SIM);
        // Ranks leave the (unprofiled) previous step's final sync at nearly the same moment.
        let start = plan.trace_start_ns + 28_300_000 + rng.range(0, 400_000);
        let first_step = u64::from(plan.cfg.first_step);
        let per_step_pg0 = u64::from(plan.cfg.bucket_count) + u64::from(plan.cfg.all_to_all.is_some());
        RankSim {
            rank,
            rng,
            ev: Vec::new(),
            colls: Vec::new(),
            t: [start, start],
            stack: [Vec::new(), Vec::new()],
            compute_free: start,
            nccl_free: [start, start],
            // Counters continue from the unprofiled warm-up steps, as in real traces.
            next_ext: 1,
            next_corr: 19_000 + first_step * 7,
            next_idx: 0,
            next_seq: 1_000,
            next_flow: 1,
            // DDP broadcasts parameters and buffers at construction (3 collectives), then one
            // all_reduce per bucket per step.
            pg_seq: [3 + first_step * per_step_pg0, first_step],
            speed_ppm: 1_000_000,
            fwd_stack: Vec::new(),
            point: 0,
            next_bucket: 0,
            step_ev: 0,
            first_gpu: None,
            compute_iv: Vec::new(),
            churn: [u32::MAX; 2],
            base_sum: 0,
            kernels: 0,
            stats: StepStats::default(),
            first_step_start: start,
            last_step_end: start,
            site: Site::None,
            texts: Vec::new(),
            work_ppm: plan.work_ppm(rank),
            idle_mark: None,
            dry: false,
            a2a_pending: None,
            step_idx: 0,
            abort: None,
            ended: false,
            active: true,
            pipe: None,
        }
    }

    /// True time at which this rank's trace ends: the watchdog's abort, or the profiler's
    /// `Record Window End` a little after the last step.
    pub(crate) fn trace_end(&self) -> i64 {
        self.abort.unwrap_or(self.last_step_end + 2_314_000)
    }

    /// The rank of the planning dry run: nothing injected.
    pub(crate) fn dry(plan: &Plan) -> Self {
        let mut r = RankSim::new(plan, 0);
        r.dry = true;
        r.work_ppm = 1_000_000;
        r
    }

    /// The text of event `e`'s name.
    pub(crate) fn name_of<'a>(&'a self, e: &'a Ev) -> &'a str {
        match e.text.checked_sub(1) {
            Some(i) => self.texts.get(usize::from(i)).map_or(e.name, String::as_str),
            None => e.name,
        }
    }

    /// Gives event `i` the run-time name `text`.
    fn set_text(&mut self, i: usize, text: String) {
        self.texts.push(text);
        let id = u16::try_from(self.texts.len()).unwrap_or(u16::MAX);
        if let Some(e) = self.ev.get_mut(i) {
            e.text = id;
        }
    }

    // ----- primitives -------------------------------------------------------------------------

    fn adv(&mut self, th: Th, lo: i64, hi: i64) {
        let d = self.rng.range(lo, hi);
        self.t[th as usize] += d;
    }

    fn push(&mut self, ev: Ev) -> usize {
        self.ev.push(ev);
        self.ev.len() - 1
    }

    fn begin_kind(&mut self, th: Th, name: &'static str, kind: Kind) -> usize {
        let ts = self.t[th as usize];
        let ext = self.next_ext;
        self.next_ext += 1;
        let idx = self.next_idx;
        self.next_idx += 1;
        let site = self.site;
        let i = self.push(Ev { ts, dur: 0, name, kind, th, ext, corr: idx, seq: 0, flow: 0, site, text: 0 });
        self.stack[th as usize].push(i);
        // Dispatcher and profiler cost of entering an op (profiled eager PyTorch spends
        // ~10-30 us per op, most of it in the op's own frame).
        self.adv(th, 4_000, 11_000);
        i
    }

    fn op(&mut self, th: Th, name: &'static str) -> usize {
        self.begin_kind(th, name, Kind::CpuOp)
    }

    fn annot(&mut self, th: Th, name: &'static str) -> usize {
        self.begin_kind(th, name, Kind::Annot { step: false })
    }

    fn end(&mut self, th: Th) {
        self.adv(th, 2_000, 6_000);
        let t = self.t[th as usize];
        if let Some(i) = self.stack[th as usize].pop() {
            if let Some(e) = self.ev.get_mut(i) {
                e.dur = t - e.ts;
            }
        }
    }

    fn leaf(&mut self, th: Th, name: &'static str, lo: i64, hi: i64) {
        self.op(th, name);
        self.adv(th, lo, hi);
        self.end(th);
    }

    /// `External id` for a runtime call: the innermost enclosing *op* (annotations do not
    /// count, as in Kineto), else the call's own correlation id.
    fn cur_ext(&self, th: Th) -> Option<u64> {
        self.stack[th as usize].iter().rev().find_map(|&i| match self.ev.get(i) {
            Some(e) if !matches!(e.kind, Kind::Annot { .. }) => Some(e.ext),
            _ => None,
        })
    }

    /// A CUDA runtime call of exactly `dur` ns; returns its event index.
    fn runtime_dur(&mut self, th: Th, name: &'static str, cbid: u16, dur: i64) -> usize {
        let ts = self.t[th as usize];
        let corr = self.next_corr;
        self.next_corr += 1;
        let ext = self.cur_ext(th).unwrap_or(corr);
        let i = self.push(Ev {
            ts,
            dur,
            name,
            kind: Kind::Runtime { cbid, flow: false },
            th,
            ext,
            corr,
            seq: 0,
            flow: 0,
            site: Site::None,
            text: 0,
        });
        self.t[th as usize] += dur;
        i
    }

    fn runtime(&mut self, th: Th, name: &'static str, cbid: u16, lo: i64, hi: i64) -> usize {
        let dur = self.rng.range(lo, hi);
        self.runtime_dur(th, name, cbid, dur)
    }

    /// Marks runtime call `i` as a launch and returns (correlation, External id, earliest GPU start).
    fn launched(&mut self, i: usize) -> (u64, u64, i64) {
        let lat = self.rng.range(600, 2_400);
        match self.ev.get_mut(i) {
            Some(e) => {
                if let Kind::Runtime { cbid, .. } = e.kind {
                    e.kind = Kind::Runtime { cbid, flow: true };
                }
                (e.corr, e.ext, e.ts + e.dur + lat)
            }
            None => (0, 0, lat),
        }
    }

    /// Places `dur` ns of work on the compute stream no earlier than `earliest`.
    fn gpu_place(&mut self, earliest: i64, dur: i64) -> i64 {
        if let Some(ps) = self.pipe.as_mut().filter(|ps| ps.deferring) {
            let ev = self.ev.len();
            ps.defer_compute(ev, earliest, dur);
            return 0;
        }
        let start = earliest.max(self.compute_free);
        if let Some(mark) = self.idle_mark.take() {
            self.stats.injected_idle += (start - mark).max(0);
        }
        self.compute_free = start + dur;
        self.compute_iv.push((start, start + dur));
        if self.first_gpu.is_none() {
            self.first_gpu = Some(start);
        }
        start
    }

    /// Duration of compute kernel `k` scaled by `permille` of its nominal size, this step's
    /// speed (jitter, straggler slowdown) and ±6 % per-kernel noise.
    fn kdur(&mut self, k: KernelId, permille: i64) -> i64 {
        let mut base = KERNELS.get(usize::from(k)).map_or(10_000, |s| s.base_ns) * permille / 1000;
        if self.work_ppm != 1_000_000 && scales_with_batch(k) {
            base = i64::try_from(i128::from(base) * i128::from(self.work_ppm) / 1_000_000).unwrap_or(base);
        }
        self.base_sum += base;
        let noise = self.rng.range(-60_000, 60_000);
        let d =
            i128::from(base) * i128::from(self.speed_ppm) * i128::from(1_000_000 + noise) / 1_000_000_000_000;
        i64::try_from(d).unwrap_or(i64::MAX).max(1_000)
    }

    fn launch_scaled(&mut self, th: Th, k: KernelId, permille: i64) {
        let li = self.runtime(th, "cudaLaunchKernel", 211, 4_500, 16_000);
        let (corr, ext, earliest) = self.launched(li);
        let dur = self.kdur(k, permille);
        let ts = self.gpu_place(earliest, dur);
        let name = KERNELS.get(usize::from(k)).map_or("", |s| s.name);
        self.push(Ev {
            ts,
            dur,
            name,
            kind: Kind::Kernel { k },
            th,
            ext,
            corr,
            seq: 0,
            flow: 0,
            site: Site::None,
            text: 0,
        });
        self.kernels += 1;
    }

    fn launch(&mut self, th: Th, k: KernelId) {
        self.launch_scaled(th, k, 1000);
    }

    fn memcpy(&mut self, th: Th, dir: MemDir, bytes: u64) {
        let li = self.runtime(th, "cudaMemcpyAsync", 41, 9_000, 30_000);
        let (corr, ext, earliest) = self.launched(li);
        // ~22 GB/s for pinned host-to-device copies; tiny device-to-host reads are latency.
        let dur = match dir {
            MemDir::HtoD => i64::try_from(bytes / 22).unwrap_or(i64::MAX) + self.rng.range(1_200, 2_500),
            MemDir::DtoH => self.rng.range(1_300, 2_900),
        };
        let ts = self.gpu_place(earliest, dur);
        let name = match dir {
            MemDir::HtoD => "Memcpy HtoD (Pinned -> Device)",
            MemDir::DtoH => "Memcpy DtoH (Device -> Pageable)",
        };
        self.push(Ev {
            ts,
            dur,
            name,
            kind: Kind::Memcpy { bytes },
            th,
            ext,
            corr,
            seq: 0,
            flow: 0,
            site: Site::None,
            text: 0,
        });
    }

    fn memset(&mut self, th: Th, bytes: u64) {
        let li = self.runtime(th, "cudaMemsetAsync", 51, 5_000, 16_000);
        let (corr, ext, earliest) = self.launched(li);
        // ~2 TB/s device memory bandwidth.
        let dur = i64::try_from(bytes / 2_000).unwrap_or(i64::MAX) + self.rng.range(1_500, 3_000);
        let ts = self.gpu_place(earliest, dur);
        self.push(Ev {
            ts,
            dur,
            name: "Memset (Device)",
            kind: Kind::Memset { bytes },
            th,
            ext,
            corr,
            seq: 0,
            flow: 0,
            site: Site::None,
            text: 0,
        });
    }

    /// A forward op autograd records: gets a sequence number and the `s` end of a `fwdbwd` flow
    /// that the matching backward op will close.
    fn fwd_op(&mut self, name: &'static str) {
        // Python: the nn.Module's __call__, hooks and argument handling before the op.
        self.adv(Th::Main, 15_000, 45_000);
        let i = self.op(Th::Main, name);
        let (seq, flow) = (self.next_seq, self.next_flow);
        self.next_seq += 1;
        self.next_flow += 1;
        if let Some(e) = self.ev.get_mut(i) {
            e.seq = seq;
            e.flow = flow;
        }
        self.fwd_stack.push((seq, flow));
    }

    /// `autograd::engine::evaluate_function: X` > `X` for the most recent unmatched forward op.
    fn bwd_begin(&mut self, eval_name: &'static str, name: &'static str) {
        let (seq, flow) = self.fwd_stack.pop().unwrap_or((0, 0));
        let a = Th::Autograd;
        // The engine picks the next ready node from its queue.
        self.adv(a, 3_000, 12_000);
        let i = self.op(a, eval_name);
        let j = self.op(a, name);
        if let Some(e) = self.ev.get_mut(i) {
            e.seq = seq;
        }
        if let Some(e) = self.ev.get_mut(j) {
            e.seq = seq;
            e.flow = flow;
        }
    }

    fn bwd_end(&mut self) {
        self.end(Th::Autograd);
        self.end(Th::Autograd);
    }
}

/// Union of sorted intervals.
pub(crate) fn merge(iv: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(iv.len());
    for &(s, e) in iv {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Time in `[s, e)` covered by `iv` (sorted, non-overlapping).
pub(crate) fn overlap(iv: &[(i64, i64)], s: i64, e: i64) -> i64 {
    let first = iv.partition_point(|&(_, ie)| ie <= s);
    let mut total = 0;
    for &(is, ie) in iv.iter().skip(first) {
        if is >= e {
            break;
        }
        total += ie.min(e) - is.max(s);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::{merge, overlap};

    #[test]
    fn interval_helpers() {
        assert_eq!(merge(&[(0, 5), (3, 8), (10, 12)]), vec![(0, 8), (10, 12)]);
        let iv = [(0, 10), (20, 30), (40, 50)];
        assert_eq!(overlap(&iv, 5, 45), 5 + 10 + 5);
        assert_eq!(overlap(&iv, 10, 20), 0);
        assert_eq!(overlap(&iv, 60, 70), 0);
    }
}
