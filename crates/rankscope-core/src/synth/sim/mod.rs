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

pub(crate) mod pipe;

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

    // ----- the step ---------------------------------------------------------------------------

    /// Input, forward and backward; leaves every collective of DDP's buckets unresolved.
    pub(crate) fn phase_a(&mut self, plan: &Plan, s: u32) {
        self.ev.clear();
        self.colls.clear();
        self.compute_iv.clear();
        self.fwd_stack.clear();
        self.first_gpu = None;
        self.base_sum = 0;
        self.kernels = 0;
        self.point = 0;
        self.next_bucket = 0;
        self.stats = StepStats::default();
        self.texts.clear();
        self.idle_mark = None;
        self.step_idx = s;

        let jitter = self.rng.range(-plan.jitter_ppm, plan.jitter_ppm);
        let mut speed = 1_000_000 + jitter;
        if plan.straggler == Some(self.rank) {
            speed = speed * (1_000_000 + plan.straggler_extra_ppm) / 1_000_000;
        }
        self.speed_ppm = speed;

        self.churn = [u32::MAX; 2];
        if plan.cfg.malloc_churn {
            let bursts = self.rng.range(1, 2);
            let last = i64::from(plan.layers) - 1;
            for b in 0..bursts {
                let l = self.rng.range(0, last);
                if let (Some(slot), Ok(l)) = (self.churn.get_mut(b as usize), u32::try_from(l)) {
                    *slot = l;
                }
            }
        }

        let m = Th::Main;
        let start = self.t[0];
        if s == 0 {
            self.first_step_start = start;
        }
        self.stats.start = start;
        self.step_ev = self.begin_kind(m, "ProfilerStep#", Kind::Annot { step: true });

        self.input_batch(plan);

        self.annot(m, "Optimizer.zero_grad#AdamW.zero_grad");
        self.adv(m, 30_000, 110_000);
        self.end(m);

        self.annot(m, "## forward ##");
        self.annot(m, "DistributedDataParallel.forward");
        self.fwd_embedding();
        if let Some(a2a) = &plan.cfg.all_to_all {
            // The embeddings are exchanged (DLRM's sparse features, an MoE's token dispatch);
            // `work.wait()` makes the compute stream wait for the result.
            self.collective(m, 0, a2a.bytes, CollKind::AllToAll);
            self.runtime(m, "cudaStreamWaitEvent", 147, 800, 2_000);
            self.a2a_pending = Some(self.colls.len() - 1);
        }
    }

    /// The rest of forward, then backward, after the forward all_to_all is resolved (without
    /// one, it simply continues [`RankSim::phase_a`]).
    pub(crate) fn phase_a2(&mut self, plan: &Plan) {
        let m = Th::Main;
        if let Some(end) = self.a2a_pending.take().and_then(|ci| self.colls.get(ci)).map(|c| c.end) {
            self.compute_free = self.compute_free.max(end);
        }
        for l in 0..plan.layers {
            let churn = self.churn.contains(&l);
            self.fwd_layer(churn);
            self.after_layer(plan, l);
        }
        self.fwd_layer_norm();
        self.fwd_lm_head();
        self.fwd_loss();
        self.end(m);
        self.end(m);

        // loss.backward(): the main thread seeds the gradient and waits; the autograd engine's
        // device thread runs the backward ops and DDP's hooks.
        self.annot(m, "## backward ##");
        self.op(m, "aten::ones_like");
        self.leaf(m, "aten::empty_like", 3_000, 8_000);
        self.op(m, "aten::fill_");
        self.launch(m, K_FILL);
        self.end(m);
        self.end(m);
        let handoff = self.t[0] + self.rng.range(8_000, 30_000);
        self.t[1] = self.t[1].max(handoff);
        self.backward(plan);
        let back = self.t[0].max(self.t[1]) + self.rng.range(5_000, 20_000);
        self.t[0] = back;
        self.end(m);
    }

    /// The input pipeline: the DataLoader's `__next__` (collate on the CPU), then one pinned
    /// host-to-device copy of the token batch.
    fn input_batch(&mut self, plan: &Plan) {
        let m = Th::Main;
        self.site = Site::Data;
        let dl = self.annot(m, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
        let factor = if self.dry { 1_000_000 } else { plan.dataloader_ppm(self.rank) };
        match plan.cfg.dataloader_ns {
            None => {
                let scale =
                    |ns: i64| i64::try_from(i128::from(ns) * i128::from(factor) / 1_000_000).unwrap_or(ns);
                self.adv(m, scale(150_000), scale(400_000));
                for _ in 0..2 {
                    self.op(m, "aten::stack");
                    self.leaf(m, "aten::cat", 30_000, 90_000);
                    self.end(m);
                }
                self.adv(m, scale(80_000), scale(300_000));
            }
            Some(mean) => {
                // Decoding and augmentation in the worker-less loader, then collate; ±5 % per step.
                let mean = i128::from(mean) * i128::from(factor) / 1_000_000;
                let target =
                    i64::try_from(mean * i128::from(1_000_000 + self.rng.range(-50_000, 50_000)) / 1_000_000)
                        .unwrap_or(0);
                let t0 = self.ev.get(dl).map_or(self.t[0], |e| e.ts);
                self.adv(m, target * 6 / 10, target * 6 / 10);
                for _ in 0..2 {
                    self.op(m, "aten::stack");
                    self.leaf(m, "aten::cat", 30_000, 90_000);
                    self.end(m);
                }
                // `end` adds 2–6 µs of exit cost; stop short of the target by the mean of it.
                let rest = t0 + target - 4_000 - self.t[0];
                self.t[0] += rest.max(0);
            }
        }
        self.end(m);
        self.stats.data_loading = self.ev.get(dl).map_or(0, |e| e.dur);
        self.op(m, "aten::to");
        self.op(m, "aten::_to_copy");
        self.leaf(m, "aten::empty_strided", 3_000, 9_000);
        self.op(m, "aten::copy_");
        let bytes = if self.work_ppm == 1_000_000 {
            plan.batch_bytes
        } else {
            u64::try_from(i128::from(plan.batch_bytes) * i128::from(self.work_ppm) / 1_000_000).unwrap_or(0)
        };
        self.memcpy(m, MemDir::HtoD, bytes);
        self.end(m);
        self.end(m);
        self.end(m);
        self.site = Site::None;
    }

    /// What the scenario knobs put after forward layer `l`: the host stall, the host syncs.
    fn after_layer(&mut self, plan: &Plan, l: u32) {
        if self.dry {
            return;
        }
        let m = Th::Main;
        if let Some(hs) = plan.cfg.host_stall.as_ref().filter(|h| h.rank == self.rank) {
            let at = hs.after_layer.unwrap_or(plan.layers / 2).min(plan.layers - 1);
            if l == at {
                // `with record_function(name): time.sleep(...)`: an annotation with no op inside.
                let i = self.annot(m, "straggler_sleep");
                self.set_text(i, hs.name.clone());
                let begin = self.ev.get(i).map_or(self.t[0], |e| e.ts);
                self.t[0] += hs.ns;
                self.end(m);
                self.stats.host_stall += self.ev.get(i).map_or(0, |e| e.dur);
                self.idle_mark = Some(self.compute_free.max(begin));
            }
        }
        if let Some(sync) = &plan.cfg.host_sync {
            let n = sync.syncs_per_step;
            let hits = (0..n).any(|i| {
                let at = (u64::from(i) + 1) * u64::from(plan.layers) / (u64::from(n) + 1);
                at.saturating_sub(1) == u64::from(l)
            });
            if hits {
                // `x.item()` in the model's forward: copy a scalar to the host and wait for it.
                self.site = Site::Scalar;
                self.op(m, "aten::item");
                self.op(m, "aten::_local_scalar_dense");
                self.memcpy(m, MemDir::DtoH, 4);
                let wait = (self.compute_free - self.t[0]).max(0) + self.rng.range(1_500, 5_000);
                self.runtime_dur(m, "cudaStreamSynchronize", 131, wait);
                self.stats.host_sync += wait;
                self.end(m);
                self.end(m);
                self.site = Site::None;
                let drained = self.compute_free;
                // The Python that uses the value before the next op is dispatched.
                self.t[0] += sync.host_work_ns;
                self.idle_mark = Some(drained);
            }
        }
    }

    fn fwd_embedding(&mut self) {
        let m = Th::Main;
        self.site = Site::Embed;
        self.fwd_op("aten::embedding");
        self.leaf(m, "aten::reshape", 3_000, 9_000);
        self.op(m, "aten::index_select");
        self.launch(m, K_EMBED);
        self.end(m);
        self.end(m);
    }

    fn fwd_layer_norm(&mut self) {
        let m = Th::Main;
        self.site = Site::Norm;
        self.fwd_op("aten::layer_norm");
        self.op(m, "aten::native_layer_norm");
        self.leaf(m, "aten::empty", 2_000, 6_000);
        self.launch(m, K_LN_FWD);
        self.end(m);
        self.end(m);
    }

    fn fwd_linear(&mut self, k: KernelId, permille: i64, churn: bool) {
        let m = Th::Main;
        self.site = match k {
            K_GEMM_QKV => Site::Qkv,
            K_GEMM_PROJ => Site::Proj,
            K_GEMM_FC1 => Site::Fc1,
            _ => Site::Fc2,
        };
        self.fwd_op("aten::linear");
        self.op(m, "aten::t");
        self.op(m, "aten::transpose");
        self.leaf(m, "aten::as_strided", 2_000, 6_000);
        self.end(m);
        self.end(m);
        self.op(m, "aten::addmm");
        if churn {
            // The caching allocator ran out of free blocks: it releases cached segments
            // (cudaFree synchronizes the whole device) and allocates a fresh one.
            let idle = self.compute_free.max(self.nccl_free[0]).max(self.nccl_free[1]);
            let wait = (idle - self.t[0]).max(0) + self.rng.range(40_000, 160_000);
            self.runtime_dur(m, "cudaFree", 22, wait);
            self.runtime(m, "cudaMalloc", 20, 150_000, 900_000);
            self.stats.malloc_bursts += 1;
        }
        self.launch_scaled(m, k, permille);
        self.end(m);
        self.end(m);
    }

    fn fwd_simple(&mut self, name: &'static str, k: KernelId) {
        self.fwd_op(name);
        self.launch(Th::Main, k);
        self.end(Th::Main);
    }

    fn fwd_layer(&mut self, churn: bool) {
        let m = Th::Main;
        self.fwd_layer_norm();
        self.fwd_linear(K_GEMM_QKV, 1000, false);
        self.site = Site::Attn;
        self.fwd_op("aten::scaled_dot_product_attention");
        self.op(m, "aten::_scaled_dot_product_flash_attention");
        self.op(m, "aten::_flash_attention_forward");
        self.leaf(m, "aten::empty", 2_000, 6_000);
        self.leaf(m, "aten::empty", 2_000, 6_000);
        self.launch(m, K_FLASH_FWD);
        self.end(m);
        self.end(m);
        self.end(m);
        self.fwd_linear(K_GEMM_PROJ, 1000, false);
        self.site = Site::Resid;
        self.fwd_simple("aten::add", K_ADD);
        self.fwd_layer_norm();
        self.fwd_linear(K_GEMM_FC1, 1000, churn);
        self.site = Site::Gelu;
        self.fwd_simple("aten::gelu", K_GELU);
        self.fwd_linear(K_GEMM_FC2, 1000, false);
        self.site = Site::Resid;
        self.fwd_simple("aten::add", K_ADD);
    }

    fn fwd_lm_head(&mut self) {
        let m = Th::Main;
        self.site = Site::Head;
        self.fwd_op("aten::linear");
        self.op(m, "aten::t");
        self.op(m, "aten::transpose");
        self.leaf(m, "aten::as_strided", 2_000, 6_000);
        self.end(m);
        self.end(m);
        self.op(m, "aten::matmul");
        self.op(m, "aten::mm");
        self.launch(m, K_GEMM_LM);
        self.end(m);
        self.end(m);
        self.end(m);
    }

    fn fwd_loss(&mut self) {
        let m = Th::Main;
        self.site = Site::Loss;
        self.op(m, "aten::cross_entropy_loss");
        self.fwd_op("aten::log_softmax");
        self.op(m, "aten::_log_softmax");
        self.launch(m, K_LOGSOFTMAX);
        self.end(m);
        self.end(m);
        self.fwd_op("aten::nll_loss_nd");
        self.op(m, "aten::nll_loss");
        self.op(m, "aten::nll_loss_forward");
        self.launch(m, K_NLL_FWD);
        self.end(m);
        self.end(m);
        self.end(m);
        self.end(m);
    }

    fn bwd_addmm(&mut self, site: Site, permille: i64) {
        let a = Th::Autograd;
        self.site = site;
        self.bwd_begin("autograd::engine::evaluate_function: AddmmBackward0", "AddmmBackward0");
        for k in [K_GEMM_DGRAD, K_GEMM_WGRAD] {
            self.op(a, "aten::t");
            self.op(a, "aten::transpose");
            self.leaf(a, "aten::as_strided", 2_000, 6_000);
            self.end(a);
            self.end(a);
            self.op(a, "aten::mm");
            self.launch_scaled(a, k, permille);
            self.end(a);
        }
        self.op(a, "aten::sum");
        self.launch(a, K_BIAS_SUM);
        self.end(a);
        self.bwd_end();
    }

    fn bwd_layer_norm(&mut self, plan: &Plan) {
        let a = Th::Autograd;
        self.site = Site::Norm;
        self.bwd_begin(
            "autograd::engine::evaluate_function: NativeLayerNormBackward0",
            "NativeLayerNormBackward0",
        );
        self.op(a, "aten::native_layer_norm_backward");
        self.launch(a, K_LN_BWD_INPUT);
        self.launch(a, K_LN_BWD_GAMMA);
        self.end(a);
        self.bwd_end();
        self.accumulate_grad(plan, true);
        self.accumulate_grad(plan, false);
    }

    fn bwd_add(&mut self) {
        self.site = Site::Resid;
        self.bwd_begin("autograd::engine::evaluate_function: AddBackward0", "AddBackward0");
        self.adv(Th::Autograd, 1_000, 4_000);
        self.bwd_end();
    }

    /// DDP's hook on a parameter's gradient: scale it into its bucket; when the bucket is full,
    /// launch its all_reduce.
    fn accumulate_grad(&mut self, plan: &Plan, weight: bool) {
        if self.pipe.is_some() {
            self.pp_accumulate_grad(weight);
            return;
        }
        let a = Th::Autograd;
        self.op(a, "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad");
        self.op(a, "torch::autograd::AccumulateGrad");
        self.op(a, "aten::detach");
        self.leaf(a, "detach", 1_500, 4_000);
        self.end(a);
        self.end(a);
        self.op(a, "torch::distributed::reducer::mul_out");
        self.op(a, "aten::mul");
        self.launch(a, if weight { K_MUL_OUT_W } else { K_MUL_OUT_B });
        self.end(a);
        self.end(a);
        let p = self.point;
        self.point += 1;
        while let Some(&ready) = plan.bucket_ready_point.get(self.next_bucket as usize) {
            if ready > p {
                break;
            }
            self.bucket_allreduce(plan, a);
        }
        self.end(a);
    }

    /// Backward of the loss (`nll_loss` and `log_softmax`).
    fn bwd_loss(&mut self) {
        let a = Th::Autograd;
        self.site = Site::Loss;
        self.bwd_begin("autograd::engine::evaluate_function: NllLossBackward0", "NllLossBackward0");
        self.op(a, "aten::nll_loss_backward");
        self.launch(a, K_FILL);
        self.launch(a, K_NLL_BWD);
        self.end(a);
        self.bwd_end();

        self.bwd_begin("autograd::engine::evaluate_function: LogSoftmaxBackward0", "LogSoftmaxBackward0");
        self.op(a, "aten::_log_softmax_backward_data");
        self.launch(a, K_LOGSOFTMAX_BWD);
        self.end(a);
        self.bwd_end();
    }

    /// Backward of one transformer layer, with the gradient hook of each of its 12 parameters.
    fn bwd_layer(&mut self, plan: &Plan) {
        let a = Th::Autograd;
        self.bwd_add();
        self.bwd_addmm(Site::Fc2, 1150);
        self.accumulate_grad(plan, true);
        self.accumulate_grad(plan, false);
        self.site = Site::Gelu;
        self.bwd_begin("autograd::engine::evaluate_function: GeluBackward0", "GeluBackward0");
        self.op(a, "aten::gelu_backward");
        self.launch(a, K_GELU_BWD);
        self.end(a);
        self.bwd_end();
        self.bwd_addmm(Site::Fc1, 1150);
        self.accumulate_grad(plan, true);
        self.accumulate_grad(plan, false);
        self.bwd_layer_norm(plan);
        self.bwd_add();
        self.bwd_addmm(Site::Proj, 330); // attention output projection
        self.accumulate_grad(plan, true);
        self.accumulate_grad(plan, false);
        self.site = Site::Attn;
        self.bwd_begin(
            "autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward0",
            "ScaledDotProductFlashAttentionBackward0",
        );
        self.op(a, "aten::_scaled_dot_product_flash_attention_backward");
        self.op(a, "aten::_flash_attention_backward");
        self.leaf(a, "aten::empty", 2_000, 6_000);
        self.launch(a, K_FLASH_BWD_DOT);
        self.launch(a, K_FLASH_BWD);
        self.launch(a, K_FLASH_BWD_CONVERT);
        self.end(a);
        self.end(a);
        self.bwd_end();
        self.bwd_addmm(Site::Qkv, 870);
        self.accumulate_grad(plan, true);
        self.accumulate_grad(plan, false);
        self.bwd_layer_norm(plan);
    }

    fn backward(&mut self, plan: &Plan) {
        let a = Th::Autograd;
        self.bwd_loss();

        // LM head (no bias): dgrad and wgrad of the vocabulary projection.
        self.site = Site::Head;
        self.bwd_begin("autograd::engine::evaluate_function: MmBackward0", "MmBackward0");
        for k in [K_GEMM_DGRAD, K_GEMM_WGRAD] {
            self.op(a, "aten::t");
            self.op(a, "aten::transpose");
            self.leaf(a, "aten::as_strided", 2_000, 6_000);
            self.end(a);
            self.end(a);
            self.op(a, "aten::mm");
            self.launch_scaled(a, k, 1800);
            self.end(a);
        }
        self.bwd_end();
        self.accumulate_grad(plan, true);
        self.bwd_layer_norm(plan);

        for _ in 0..plan.layers {
            self.bwd_layer(plan);
        }

        self.bwd_embedding(plan);
        self.accumulate_grad(plan, true);
        // Defensive: every bucket is launched by the last gradient point.
        while self.next_bucket < plan.cfg.bucket_count {
            self.bucket_allreduce(plan, a);
        }
        // DDP's finalize: the compute stream waits for the all_reduces before the optimizer.
        self.runtime(a, "cudaStreamWaitEvent", 147, 800, 2_000);
    }

    /// The token embedding's gradient, the last one autograd produces.
    fn bwd_embedding(&mut self, plan: &Plan) {
        let a = Th::Autograd;
        self.site = Site::Embed;
        self.bwd_begin("autograd::engine::evaluate_function: EmbeddingBackward0", "EmbeddingBackward0");
        self.op(a, "aten::embedding_backward");
        self.op(a, "aten::embedding_dense_backward");
        self.op(a, "aten::zeros");
        self.leaf(a, "aten::empty", 2_000, 6_000);
        self.op(a, "aten::zero_");
        self.op(a, "aten::fill_");
        self.memset(a, plan.embedding_grad_bytes);
        self.end(a);
        self.end(a);
        self.end(a);
        self.launch(a, K_EMBED_BWD);
        self.end(a);
        self.end(a);
        self.bwd_end();
    }

    /// DDP's all_reduce of the next bucket (unless this rank skips it: `hang`).
    fn bucket_allreduce(&mut self, plan: &Plan, th: Th) {
        let b = self.next_bucket;
        self.next_bucket += 1;
        if !self.dry && plan.skips_bucket(self.rank, self.step_idx, b) {
            return;
        }
        self.collective(th, 0, plan.bucket_size(b), CollKind::AllReduce);
    }

    /// One all_reduce on process group `pg` as PyTorch's NCCL backend issues it; the NCCL kernel
    /// is left unresolved (see [`JobSim::resolve`]).
    fn collective(&mut self, th: Th, pg: usize, bytes: u64, kind: CollKind) {
        let c = u32::try_from(self.colls.len()).unwrap_or(u32::MAX);
        let seq = match self.pg_seq.get_mut(pg) {
            Some(s) => {
                *s += 1;
                *s
            }
            None => 0,
        };
        if pg == 0 {
            self.runtime(th, "cudaEventRecord", 135, 1_500, 4_500);
        }
        let site = std::mem::replace(&mut self.site, Site::Comms);
        self.op(th, kind.op_name());
        self.begin_kind(th, "record_param_comms", Kind::Comms { coll: c });
        // Work, tensor checks and the ProcessGroupNCCL bookkeeping of the collective call.
        self.adv(th, 15_000, 40_000);
        self.runtime(th, "cudaStreamIsCapturing", 317, 800, 1_600);
        self.runtime(th, "cudaEventRecord", 135, 1_000, 2_600);
        self.runtime(th, "cudaStreamWaitEvent", 147, 1_000, 1_900);
        let ann = self.annot(th, kind.annotation());
        // ncclAllReduce's enqueue: plan the work, pick channels.
        self.adv(th, 25_000, 60_000);
        self.runtime(th, "cudaStreamGetCaptureInfo_v2", 409, 800, 1_300);
        self.runtime(th, "cudaEventRecord", 135, 900, 1_500);
        self.runtime(th, "cudaStreamWaitEvent", 147, 800, 1_300);
        let li = self.runtime(th, "cudaLaunchKernelExC", 430, 7_000, 14_000);
        let (corr, ext, launch_ready) = self.launched(li);
        let kernel_ev = self.push(Ev {
            ts: 0,
            dur: 0,
            name: KERNELS.get(usize::from(kind.kernel())).map_or("", |s| s.name),
            kind: Kind::Nccl { coll: c },
            th,
            ext,
            corr,
            seq: 0,
            flow: 0,
            site: Site::None,
            text: 0,
        });
        self.runtime(th, "cudaEventRecord", 135, 500, 900);
        self.runtime(th, "cudaStreamWaitEvent", 147, 600, 1_000);
        self.runtime(th, "cudaEventRecord", 135, 500, 900);
        self.end(th);
        self.runtime(th, "cudaEventRecord", 135, 500, 900);
        self.end(th);
        self.end(th);
        let ann_ext = self.ev.get(ann).map_or(0, |e| e.ext);
        let stream = NCCL_STREAMS.get(pg).copied().unwrap_or(NCCL_STREAMS[0]);
        let annot_ev = self.push(Ev {
            ts: 0,
            dur: 0,
            name: kind.annotation(),
            kind: Kind::GpuAnnot { stream, step: false },
            th,
            ext: ann_ext,
            corr: 0,
            seq: 0,
            flow: 0,
            site: Site::None,
            text: 0,
        });
        self.colls.push(CollRec {
            kind,
            pg,
            seq,
            bytes,
            kernel_ev,
            annot_ev,
            launch_ready,
            compute_ready: self.compute_free,
            start: 0,
            end: 0,
            wait: 0,
            resolved: false,
            hung: false,
        });
        self.kernels += 1;
        self.site = site;
    }

    /// This rank's arrival at collective `ci`.
    fn arrival(&self, ci: usize) -> Option<i64> {
        let c = self.colls.get(ci)?;
        let free = self.nccl_free.get(c.pg).copied().unwrap_or(i64::MIN);
        Some(c.launch_ready.max(c.compute_ready).max(free))
    }

    /// Completes collective `ci` given the latest arrival over all ranks and the transfer time.
    fn finish_coll(&mut self, ci: usize, latest: i64, transfer: i64) {
        let skew = self.rng.range(0, 2_500);
        let Some(start) = self.arrival(ci) else {
            return;
        };
        let Some(c) = self.colls.get_mut(ci) else {
            return;
        };
        c.start = start;
        c.end = (latest + transfer + skew).max(start + 1_000);
        c.wait = latest - start;
        c.resolved = true;
        let (end, pg, ke, ae) = (c.end, c.pg, c.kernel_ev, c.annot_ev);
        if let Some(f) = self.nccl_free.get_mut(pg) {
            *f = end;
        }
        for i in [ke, ae] {
            if let Some(e) = self.ev.get_mut(i) {
                e.ts = start;
                e.dur = end - start;
            }
        }
    }

    /// Collective `ci` does not complete. If this rank arrived (before its own abort), its kernel
    /// waits until the timeout and the watchdog aborts the process group: the trace ends there.
    /// Otherwise it never started.
    fn hang_coll(&mut self, ci: usize, timeout: i64) {
        let arrived = self.arrival(ci).filter(|&a| self.abort.is_none_or(|ab| a < ab));
        let Some(c) = self.colls.get_mut(ci) else {
            return;
        };
        c.resolved = true;
        c.hung = true;
        let (start, end) = match arrived {
            Some(a) => (a, a.saturating_add(timeout)),
            None => (NEVER, NEVER),
        };
        c.start = start;
        c.end = end;
        c.wait = if start < NEVER { end - start } else { 0 };
        let (pg, ke, ae) = (c.pg, c.kernel_ev, c.annot_ev);
        if let Some(f) = self.nccl_free.get_mut(pg) {
            *f = end;
        }
        for i in [ke, ae] {
            if let Some(e) = self.ev.get_mut(i) {
                e.ts = start;
                e.dur = end - start;
            }
        }
        if start < NEVER {
            self.abort = Some(self.abort.map_or(end, |ab| ab.min(end)));
        }
    }

    /// The trace ends at `abort`: what had not begun is gone, what was running is cut there
    /// (Kineto writes what it recorded when the profiler is stopped), and flows lose the end
    /// that no longer exists.
    pub(crate) fn truncate(&mut self, abort: i64) {
        let mut gone_corr = Vec::new();
        let mut gone_flow = Vec::new();
        for e in &self.ev {
            if e.ts >= abort {
                if !matches!(
                    e.kind,
                    Kind::CpuOp | Kind::Annot { .. } | Kind::Comms { .. } | Kind::Runtime { .. }
                ) {
                    gone_corr.push(e.corr);
                }
                if e.flow > 0 {
                    gone_flow.push(e.flow);
                }
            }
        }
        gone_corr.sort_unstable();
        gone_flow.sort_unstable();
        // Events are removed; keep the indices the collectives refer to valid by mapping them.
        let mut map = vec![usize::MAX; self.ev.len()];
        let mut kept = Vec::with_capacity(self.ev.len());
        for (i, mut e) in self.ev.drain(..).enumerate() {
            if e.ts >= abort {
                continue;
            }
            e.dur = e.dur.min(abort - e.ts);
            if let Kind::Runtime { cbid, flow: true } = e.kind {
                if gone_corr.binary_search(&e.corr).is_ok() {
                    e.kind = Kind::Runtime { cbid, flow: false };
                }
            }
            if e.flow > 0 && gone_flow.binary_search(&e.flow).is_ok() {
                e.flow = 0;
            }
            if let Some(m) = map.get_mut(i) {
                *m = kept.len();
            }
            kept.push(e);
        }
        self.ev = kept;
        for c in &mut self.colls {
            c.kernel_ev = map.get(c.kernel_ev).copied().unwrap_or(usize::MAX);
            c.annot_ev = map.get(c.annot_ev).copied().unwrap_or(usize::MAX);
        }
        self.last_step_end = abort;
        self.finish_stats(abort);
    }

    /// After DDP's all_reduces: optimizer step, then the loss all_reduce for logging.
    pub(crate) fn phase_b(&mut self, plan: &Plan) {
        let m = Th::Main;
        let last = self.colls.iter().filter(|c| c.pg == 0).map(|c| c.end).max();
        if let Some(last) = last {
            self.compute_free = self.compute_free.max(last);
        }
        self.site = Site::Optim;
        self.annot(m, "Optimizer.step#AdamW.step");
        self.op(m, "aten::_fused_adamw_");
        for _ in 0..plan.opt_kernels {
            self.launch(m, K_ADAMW);
        }
        self.end(m);
        self.end(m);
        if plan.cfg.loss_allreduce {
            self.collective(m, 1, 4, CollKind::AllReduce);
        }
    }

    /// `loss.item()`: wait for the loss all_reduce, copy 4 bytes to the host and synchronize;
    /// then the step ends.
    pub(crate) fn phase_c(&mut self, plan: &Plan) {
        let m = Th::Main;
        if plan.cfg.loss_allreduce {
            let end = self.colls.iter().filter(|c| c.pg == 1).map(|c| c.end).max();
            self.runtime(m, "cudaStreamWaitEvent", 147, 800, 2_000);
            if let Some(end) = end {
                self.compute_free = self.compute_free.max(end);
            }
        }
        self.site = Site::Scalar;
        self.op(m, "aten::item");
        self.op(m, "aten::_local_scalar_dense");
        self.memcpy(m, MemDir::DtoH, 4);
        let wait = (self.compute_free - self.t[0]).max(0) + self.rng.range(1_500, 5_000);
        self.runtime_dur(m, "cudaStreamSynchronize", 131, wait);
        self.end(m);
        self.end(m);
        self.site = Site::None;
        self.adv(m, 8_000, 30_000);
        self.end(m); // ProfilerStep#N
        let step_end = self.t[0];
        self.last_step_end = step_end;

        let g0 = self.first_gpu.unwrap_or(self.stats.start);
        let step_ext = self.ev.get(self.step_ev).map_or(0, |e| e.ext);
        self.push(Ev {
            ts: g0,
            dur: self.compute_free - g0,
            name: "ProfilerStep#",
            kind: Kind::GpuAnnot { stream: STREAM_COMPUTE, step: true },
            th: m,
            ext: step_ext,
            corr: 0,
            seq: 0,
            flow: 0,
            site: Site::None,
            text: 0,
        });
        // profiler.step() and the training loop before the next step begins.
        self.adv(m, 4_000, 25_000);

        self.stats.dur = step_end - self.stats.start;
        self.finish_stats(i64::MAX);
    }

    /// The step's busy, communication and wait figures, counting only what happened before
    /// `until` (the trace's end).
    fn finish_stats(&mut self, until: i64) {
        self.stats.dur = self.stats.dur.min(until - self.stats.start);
        let compute: Vec<(i64, i64)> =
            self.compute_iv.iter().filter(|iv| iv.0 < until).map(|&(s, e)| (s, e.min(until))).collect();
        self.stats.compute_busy = compute.iter().map(|(s, e)| e - s).sum();
        let mut comm: Vec<(i64, i64)> =
            self.colls.iter().filter(|c| c.start < until).map(|c| (c.start, c.end.min(until))).collect();
        comm.sort_unstable();
        let merged = merge(&comm);
        self.stats.comm_busy = merged.iter().map(|(s, e)| e - s).sum();
        self.stats.exposed_comm = merged.iter().map(|&(s, e)| (e - s) - overlap(&compute, s, e)).sum();
        self.stats.comm_wait = self.colls.iter().filter(|c| c.start < until).map(|c| c.wait).sum();
    }
}

/// Union of sorted intervals.
fn merge(iv: &[(i64, i64)]) -> Vec<(i64, i64)> {
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
fn overlap(iv: &[(i64, i64)], s: i64, e: i64) -> i64 {
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

/// Truth about one collective across ranks (true time).
#[derive(Clone, Debug)]
pub(crate) struct CollTruth {
    pub kind: CollKind,
    pub step: u32,
    pub index: u32,
    pub pg: usize,
    pub seq: u64,
    pub bytes: u64,
    pub transfer_ns: i64,
    /// Per rank: arrival and end; `None` for a rank that never reached it.
    pub arrivals: Vec<Option<i64>>,
    pub ends: Vec<Option<i64>>,
    /// The rank that arrived last (among those that arrived).
    pub last_rank: u32,
    /// Some member never arrived: the others' kernels ran until the timeout.
    pub hung: bool,
}

/// All ranks of the job, advanced in lockstep one step at a time.
#[derive(Debug)]
pub(crate) struct JobSim<'a> {
    plan: &'a Plan,
    pub ranks: Vec<RankSim>,
    /// Per rank, per step stats (when collecting truth).
    pub steps: Option<Vec<Vec<StepStats>>>,
    pub colls: Option<Vec<CollTruth>>,
    /// Pipeline truth (pipeline mode, when collecting truth).
    pub pipe: Option<pipe::PipeTruth>,
}

impl<'a> JobSim<'a> {
    pub(crate) fn new(plan: &'a Plan, collect: bool) -> Self {
        let ranks = (0..plan.cfg.ranks).map(|r| RankSim::new(plan, r)).collect();
        Self::with_ranks(plan, ranks, collect)
    }

    pub(crate) fn with_ranks(plan: &'a Plan, ranks: Vec<RankSim>, collect: bool) -> Self {
        let n = ranks.len();
        JobSim {
            plan,
            ranks,
            steps: collect.then(|| vec![Vec::new(); n]),
            colls: collect.then(Vec::new),
            pipe: (collect && plan.cfg.pipeline.is_some()).then(pipe::PipeTruth::default),
        }
    }

    pub(crate) fn step(&mut self, s: u32) {
        let plan = self.plan;
        if plan.cfg.pipeline.is_some() {
            self.pipe_step(s);
            return;
        }
        if let Some(h) = plan.cfg.hang.as_ref().filter(|h| h.kind == HangKind::EarlyExit) {
            if s == h.step.saturating_add(1) {
                if let Some(r) = self.ranks.get_mut(h.rank as usize) {
                    r.ended = true;
                }
            }
        }
        for r in &mut self.ranks {
            r.active = !r.ended;
        }
        for r in self.ranks.iter_mut().filter(|r| r.active) {
            r.phase_a(plan, s);
        }
        if plan.cfg.all_to_all.is_some() {
            self.resolve(0, s);
        }
        for r in self.ranks.iter_mut().filter(|r| r.active) {
            r.phase_a2(plan);
        }
        self.resolve(0, s);
        for r in self.ranks.iter_mut().filter(|r| r.active) {
            r.phase_b(plan);
        }
        if plan.cfg.loss_allreduce {
            self.resolve(1, s);
        }
        for r in self.ranks.iter_mut().filter(|r| r.active) {
            r.phase_c(plan);
            // A rank whose collective hung: its trace ends when the watchdog aborts.
            if let Some(abort) = r.abort {
                r.truncate(abort);
                r.ended = true;
            }
        }
        if let Some(steps) = &mut self.steps {
            for (acc, r) in steps.iter_mut().zip(&self.ranks).filter(|(_, r)| r.active) {
                acc.push(r.stats);
            }
        }
    }

    /// Resolves the pending collectives of process group `pg`, in issue order. NCCL matches a
    /// communicator's collectives by their order on each rank, so the i-th pending collective of
    /// every rank is one collective: it ends when the last rank has arrived plus the transfer
    /// time. If a member never arrives (it skipped one, exited, or is stuck before it), the
    /// others' kernels run until the process-group timeout (`hang`).
    fn resolve(&mut self, pg: usize, s: u32) {
        let lists: Vec<Vec<usize>> = self
            .ranks
            .iter()
            .map(|r| {
                if !r.active {
                    return Vec::new();
                }
                r.colls
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.pg == pg && !c.resolved)
                    .map(|(i, _)| i)
                    .collect()
            })
            .collect();
        let positions = lists.iter().map(Vec::len).max().unwrap_or(0);
        let timeout = self.plan.cfg.hang.as_ref().map_or(i64::MAX / 8, |h| h.timeout_ns);
        for pos in 0..positions {
            // A rank arrives if it issued this collective and got there before its own abort.
            let arrivals: Vec<Option<i64>> = self
                .ranks
                .iter()
                .zip(&lists)
                .map(|(r, l)| {
                    let a = r.arrival(*l.get(pos)?)?;
                    r.abort.is_none_or(|ab| a < ab).then_some(a)
                })
                .collect();
            let first = self
                .ranks
                .iter()
                .zip(&lists)
                .find_map(|(r, l)| Some((*l.get(pos)?, r.colls.get(*l.get(pos)?)?)));
            let Some((index, &c0)) = first else {
                continue;
            };
            let transfer = self.plan.transfer_ns(c0.kind, c0.bytes);
            let complete = arrivals.iter().all(Option::is_some);
            let mut latest = i64::MIN;
            let mut last_rank = 0;
            for (r, a) in self.ranks.iter().zip(&arrivals) {
                if let Some(a) = *a {
                    if a > latest {
                        latest = a;
                        last_rank = r.rank;
                    }
                }
            }
            for (r, l) in self.ranks.iter_mut().zip(&lists) {
                let Some(&ci) = l.get(pos) else {
                    continue;
                };
                if complete {
                    r.finish_coll(ci, latest, transfer);
                } else {
                    r.hang_coll(ci, timeout);
                }
            }
            // Collectives that no rank reached (issued by CPUs already stuck) leave no truth.
            let reached = arrivals.iter().any(Option::is_some);
            if let Some(colls) = self.colls.as_mut().filter(|_| reached) {
                colls.push(CollTruth {
                    kind: c0.kind,
                    step: s,
                    index: u32::try_from(index).unwrap_or(u32::MAX),
                    pg,
                    seq: c0.seq,
                    bytes: c0.bytes,
                    transfer_ns: transfer,
                    ends: self
                        .ranks
                        .iter()
                        .zip(&lists)
                        .map(|(r, l)| {
                            let c = r.colls.get(*l.get(pos)?)?;
                            (c.start < NEVER).then_some(c.end)
                        })
                        .collect(),
                    arrivals,
                    last_rank,
                    hung: !complete,
                });
            }
        }
    }
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
