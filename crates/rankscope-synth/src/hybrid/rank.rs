//! One rank of a hybrid job: its CPU cursor and threads, the events it records, the GPU work it
//! issues (left unplaced until [`super::place`] places every rank's together) and the
//! primitives the step program is written in.

use rankscope_core::model::dtype_bytes;

use super::layout::Coords;
use super::model::Kern;
use super::place::{InstKey, Registry, Transfer};
use super::run::HPlan;
use crate::Rng;

/// CPU threads.
pub(crate) const MAIN: u8 = 0;
pub(crate) const AUTOGRAD: u8 = 1;
/// The compute stream (PyTorch's default stream as CUPTI numbers it).
pub(crate) const STREAM_COMPUTE: u32 = 7;
/// CUPTI ids of the NCCL streams, in the order a rank first uses each communicator.
const FIRST_NCCL_STREAM: u32 = 20;

/// Sentinel: no item / no index.
pub(crate) const NONE: u32 = u32::MAX;

const RNG_SIM: u64 = 21;
const RNG_IDS: u64 = 22;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommKind {
    AllReduce,
    ReduceScatter,
    AllGather,
    AllToAllV,
    Send,
    Recv,
}

impl CommKind {
    /// `Collective name` in `record_param_comms` (PyTorch's spelling).
    pub fn collective_name(self) -> &'static str {
        match self {
            CommKind::AllReduce => "allreduce",
            CommKind::ReduceScatter => "_reduce_scatter_base",
            CommKind::AllGather => "_allgather_base",
            CommKind::AllToAllV => "all_to_allv",
            CommKind::Send => "send",
            CommKind::Recv => "recv",
        }
    }

    /// The c10d operator the Python call dispatches to.
    pub fn op_name(self) -> &'static str {
        match self {
            CommKind::AllReduce => "c10d::allreduce_",
            CommKind::ReduceScatter => "c10d::_reduce_scatter_base_",
            CommKind::AllGather => "c10d::_allgather_base_",
            CommKind::AllToAllV => "c10d::alltoall_base_",
            CommKind::Send => "c10d::send",
            CommKind::Recv => "c10d::recv_",
        }
    }

    /// ProcessGroupNCCL's profiling title (`nccl:send 0->1` carries group ranks, added by the
    /// writer).
    pub fn annotation(self) -> &'static str {
        match self {
            CommKind::AllReduce => "nccl:all_reduce",
            CommKind::ReduceScatter => "nccl:_reduce_scatter_base",
            CommKind::AllGather => "nccl:_all_gather_base",
            CommKind::AllToAllV => "nccl:all_to_all",
            CommKind::Send => "nccl:send",
            CommKind::Recv => "nccl:recv",
        }
    }

    pub fn is_p2p(self) -> bool {
        matches!(self, CommKind::Send | CommKind::Recv)
    }

    /// The core's kind (its bus-bandwidth factor).
    pub fn core(self) -> rankscope_core::model::CollKind {
        use rankscope_core::model::CollKind as C;
        match self {
            CommKind::AllReduce => C::AllReduce,
            CommKind::ReduceScatter => C::ReduceScatter,
            CommKind::AllGather => C::AllGather,
            CommKind::AllToAllV => C::AllToAll,
            CommKind::Send => C::Send,
            CommKind::Recv => C::Recv,
        }
    }
}

/// One communication op of a rank's step.
#[derive(Debug, Clone)]
pub(crate) struct CommOp {
    pub group: usize,
    pub kind: CommKind,
    pub in_nelems: u64,
    pub out_nelems: u64,
    pub dtype: &'static str,
    pub seq: u64,
    /// The other end of a send or receive (global rank).
    pub peer: u32,
    /// `In split size` / `Out split size` of an all_to_allv (rows per member).
    pub splits: Option<Box<(Vec<u64>, Vec<u64>)>>,
    pub item: u32,
    pub kernel: Kern,
}

/// What an event is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum EvKind {
    /// `cpu_op`.
    Op(&'static str),
    /// `user_annotation`: `ProfilerStep#N`.
    Step,
    /// `user_annotation`: the injected host stall (its name from the cause).
    Stall,
    /// `user_annotation` with a fixed name.
    Annot(&'static str),
    /// `record_param_comms` of op `i`.
    Comms(u32),
    /// The `nccl:*` annotation of op `i` on the CPU.
    NcclAnnot(u32),
    Runtime {
        name: &'static str,
        cbid: u16,
        flow: bool,
    },
    Kernel(Kern),
    Memcpy(u64),
    Memset(u64),
    /// Op `i`'s NCCL kernel and its `gpu_user_annotation` twin.
    NcclKernel(u32),
    NcclGpuAnnot(u32),
    /// `ProfilerStep#N` on the compute stream.
    StepGpu,
}

impl EvKind {
    /// CPU ops and annotations of thread `th` are written in the thread's pass; runtime calls
    /// and GPU activities in the last.
    pub fn is_cpu(self) -> bool {
        matches!(
            self,
            EvKind::Op(_)
                | EvKind::Step
                | EvKind::Stall
                | EvKind::Annot(_)
                | EvKind::Comms(_)
                | EvKind::NcclAnnot(_)
        )
    }
}

/// One event, in true time (GPU events get their times from their item once placed).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ev {
    pub ts: i64,
    pub dur: i64,
    pub kind: EvKind,
    pub th: u8,
    pub ext: u64,
    /// `correlation` of runtime calls and GPU work; `Ev Idx` of CPU ops.
    pub corr: u64,
    pub item: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Pending,
    Arrived,
    Done,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum ItemKind {
    /// A kernel, memcpy or memset of `dur` ns.
    Work(i64),
    /// The stream waits for item `i` (`cudaStreamWaitEvent`).
    WaitOn(u32),
    /// An NCCL kernel: member `slot` of instance `inst`; the NCCL stream first waits for the
    /// compute stream's work issued before it (compute item `after`).
    Comm { inst: u32, slot: u32, after: u32, skew: i64 },
}

/// GPU work on one stream, in issue order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Item {
    pub stream: u16,
    /// Earliest start allowed by the CPU launch.
    pub ready: i64,
    pub kind: ItemKind,
    pub start: i64,
    pub end: i64,
    pub state: State,
    /// An NCCL kernel: the instance's last arrival (it waited from `start` to here).
    pub latest: i64,
}

/// A stream: its items in order, how far placement got, and when its last placed item ended.
#[derive(Debug, Clone)]
pub(crate) struct Stream {
    pub cupti: u32,
    /// The communicator it belongs to: (group, the pair's other rank for point-to-point).
    pub key: (usize, u32),
    pub queue: Vec<u32>,
    pub head: usize,
    pub free: i64,
}

/// Truth about one rank's step (true time).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StepStats {
    pub start: i64,
    pub dur: i64,
    pub compute_busy: i64,
    pub comm_busy: i64,
    pub exposed_comm: i64,
    pub comm_wait: i64,
    pub host_stall: i64,
}

#[derive(Debug)]
pub(crate) struct RankRun {
    pub rank: u32,
    pub c: Coords,
    rng: Rng,
    pub pid: u64,
    pub tids: [u64; 2],
    pub device: u32,
    /// The CPU cursor (one thread runs at a time: the main thread waits while autograd runs).
    pub t: i64,
    stacks: [Vec<usize>; 2],
    pub ev: Vec<Ev>,
    pub ops: Vec<CommOp>,
    pub items: Vec<Item>,
    pub streams: Vec<Stream>,
    next_ext: u64,
    next_corr: u64,
    next_idx: u64,
    /// This step's speed (ppm of nominal: jitter).
    speed_ppm: i64,
    /// Collectives issued so far per group (its `Seq`), point-to-point messages per (group,
    /// peer, direction).
    seqs: Vec<(usize, u64)>,
    p2p_count: Vec<((usize, u32, bool), u32)>,
    /// The last compute-stream item issued (what an NCCL stream waits for at issue).
    last_compute: u32,
    /// A synchronization waiting for the GPU: the runtime call's event and whether it waits for
    /// the device (all streams) or the compute stream.
    pub pending_sync: Option<(usize, bool)>,
    pub step_ev: usize,
    /// The gradient buckets' collectives issued this step, and the next bucket to issue.
    pub grad_ops: Vec<u32>,
    pub next_bucket: u32,
    pub stats: StepStats,
    pub first_step_start: i64,
    pub last_step_end: i64,
}

impl RankRun {
    pub fn new(p: &HPlan, rank: u32) -> RankRun {
        let mut rng = Rng::derive(p.cfg.seed, rank, RNG_SIM);
        let start = p.trace_start_ns + 28_300_000 + rng.range(0, 400_000);
        let mut ids = Rng::derive(p.cfg.seed, rank, RNG_IDS);
        let pid = 1_000 + ids.range(0, 3_999_000) as u64;
        let autograd = pid + 1 + ids.range(40, 9_000) as u64;
        let first_step = u64::from(p.cfg.first_step);
        RankRun {
            rank,
            c: p.lay.coords(rank),
            rng,
            pid,
            tids: [pid, autograd],
            device: p.lay.places.get(rank as usize).map_or(0, |x| x.gpu),
            t: start,
            stacks: [Vec::new(), Vec::new()],
            ev: Vec::new(),
            ops: Vec::new(),
            items: Vec::new(),
            streams: vec![Stream {
                cupti: STREAM_COMPUTE,
                key: (usize::MAX, NONE),
                queue: Vec::new(),
                head: 0,
                free: start,
            }],
            next_ext: 1,
            next_corr: 19_000 + first_step * 7,
            next_idx: 0,
            speed_ppm: 1_000_000,
            seqs: Vec::new(),
            p2p_count: Vec::new(),
            last_compute: NONE,
            pending_sync: None,
            step_ev: 0,
            grad_ops: Vec::new(),
            next_bucket: 0,
            stats: StepStats::default(),
            first_step_start: start,
            last_step_end: start,
        }
    }

    /// Clears the previous step (all its GPU work is placed) and draws this step's speed.
    pub fn begin_step(&mut self, p: &HPlan) {
        self.ev.clear();
        self.ops.clear();
        self.items.clear();
        for s in &mut self.streams {
            s.queue.clear();
            s.head = 0;
        }
        self.last_compute = NONE;
        self.grad_ops.clear();
        self.next_bucket = 0;
        self.stats = StepStats { start: self.t, ..StepStats::default() };
        let j = p.jitter_ppm;
        self.speed_ppm = 1_000_000 + self.rng.range(-j, j);
    }

    // ----- CPU primitives ---------------------------------------------------------------------

    pub fn adv(&mut self, lo: i64, hi: i64) {
        self.t += self.rng.range(lo, hi);
    }

    fn push(&mut self, e: Ev) -> usize {
        self.ev.push(e);
        self.ev.len() - 1
    }

    /// Opens a CPU op or annotation on thread `th`.
    pub fn begin(&mut self, th: u8, kind: EvKind) -> usize {
        let ext = self.next_ext;
        self.next_ext += 1;
        let idx = self.next_idx;
        self.next_idx += 1;
        let i = self.push(Ev { ts: self.t, dur: 0, kind, th, ext, corr: idx, item: NONE });
        if let Some(s) = self.stacks.get_mut(usize::from(th)) {
            s.push(i);
        }
        // Dispatcher and profiler cost of entering an op.
        self.adv(4_000, 11_000);
        i
    }

    pub fn op(&mut self, th: u8, name: &'static str) -> usize {
        self.begin(th, EvKind::Op(name))
    }

    pub fn end(&mut self, th: u8) {
        self.adv(2_000, 6_000);
        let t = self.t;
        if let Some(i) = self.stacks.get_mut(usize::from(th)).and_then(Vec::pop) {
            if let Some(e) = self.ev.get_mut(i) {
                e.dur = t - e.ts;
            }
        }
    }

    /// `External id` of a runtime call: the innermost enclosing op (not annotation).
    fn cur_ext(&self, th: u8) -> Option<u64> {
        let stack = self.stacks.get(usize::from(th))?;
        stack.iter().rev().find_map(|&i| match self.ev.get(i) {
            Some(e) if matches!(e.kind, EvKind::Op(_) | EvKind::Comms(_)) => Some(e.ext),
            _ => None,
        })
    }

    /// A CUDA runtime call of `dur` ns; returns its event index.
    pub fn runtime_dur(&mut self, th: u8, name: &'static str, cbid: u16, dur: i64) -> usize {
        let corr = self.next_corr;
        self.next_corr += 1;
        let ext = self.cur_ext(th).unwrap_or(corr);
        let i = self.push(Ev {
            ts: self.t,
            dur,
            kind: EvKind::Runtime { name, cbid, flow: false },
            th,
            ext,
            corr,
            item: NONE,
        });
        self.t += dur;
        i
    }

    pub fn runtime(&mut self, th: u8, name: &'static str, cbid: u16, lo: i64, hi: i64) -> usize {
        let d = self.rng.range(lo, hi);
        self.runtime_dur(th, name, cbid, d)
    }

    /// Marks runtime call `i` as a launch: (correlation, External id, earliest GPU start).
    fn launched(&mut self, i: usize) -> (u64, u64, i64) {
        let lat = self.rng.range(600, 2_400);
        match self.ev.get_mut(i) {
            Some(e) => {
                if let EvKind::Runtime { name, cbid, .. } = e.kind {
                    e.kind = EvKind::Runtime { name, cbid, flow: true };
                }
                (e.corr, e.ext, e.ts + e.dur + lat)
            }
            None => (0, 0, lat),
        }
    }

    fn item(&mut self, stream: usize, ready: i64, kind: ItemKind) -> u32 {
        let id = u32::try_from(self.items.len()).unwrap_or(NONE);
        self.items.push(Item {
            stream: u16::try_from(stream).unwrap_or(0),
            ready,
            kind,
            start: 0,
            end: 0,
            state: State::Pending,
            latest: 0,
        });
        if let Some(s) = self.streams.get_mut(stream) {
            s.queue.push(id);
        }
        if stream == 0 {
            self.last_compute = id;
        }
        id
    }

    /// `dur` ns of nominal work at this step's speed, with ±3 % noise.
    fn scaled(&mut self, dur: i64) -> i64 {
        let noise = self.rng.range(-30_000, 30_000);
        let d =
            i128::from(dur) * i128::from(self.speed_ppm) * i128::from(1_000_000 + noise) / 1_000_000_000_000;
        i64::try_from(d).unwrap_or(i64::MAX).max(1_000)
    }

    /// `name` > `cudaLaunchKernel` of kernel `k` running `dur` nominal ns on the compute stream.
    pub fn kernel(&mut self, th: u8, name: &'static str, k: Kern, dur: i64) {
        self.op(th, name);
        self.launch(th, k, dur);
        self.end(th);
    }

    /// `cudaLaunchKernel` of `k` (inside the caller's op).
    pub fn launch(&mut self, th: u8, k: Kern, dur: i64) {
        let li = self.runtime(th, "cudaLaunchKernel", 211, 4_500, 16_000);
        let (corr, ext, ready) = self.launched(li);
        let dur = self.scaled(dur);
        let it = self.item(0, ready, ItemKind::Work(dur));
        self.push(Ev { ts: 0, dur: 0, kind: EvKind::Kernel(k), th, ext, corr, item: it });
    }

    /// A copy of `bytes` (device to host when `dtoh`) or a memset, on the compute stream.
    pub fn memory(&mut self, th: u8, bytes: u64, dtoh: bool, memset: bool) {
        let li = if memset {
            self.runtime(th, "cudaMemsetAsync", 51, 5_000, 16_000)
        } else {
            self.runtime(th, "cudaMemcpyAsync", 41, 9_000, 30_000)
        };
        let (corr, ext, ready) = self.launched(li);
        let dur = if memset {
            super::model::Costs::memset_ns(bytes)
        } else if dtoh {
            self.rng.range(1_300, 2_900)
        } else {
            i64::try_from(bytes / 22).unwrap_or(i64::MAX) + self.rng.range(1_200, 2_500)
        };
        let it = self.item(0, ready, ItemKind::Work(dur));
        let kind = if memset { EvKind::Memset(bytes) } else { EvKind::Memcpy(bytes) };
        self.push(Ev { ts: 0, dur: 0, kind, th, ext, corr, item: it });
    }

    /// `work.wait()` / `cudaStreamWaitEvent`: the compute stream waits for op `op`'s kernel.
    pub fn wait(&mut self, th: u8, op: u32) {
        self.runtime(th, "cudaStreamWaitEvent", 147, 800, 2_000);
        if let Some(it) = self.ops.get(op as usize).map(|o| o.item) {
            let ready = self.t;
            self.item(0, ready, ItemKind::WaitOn(it));
        }
    }

    /// The stream of the communicator (group, pair peer), created on first use.
    fn comm_stream(&mut self, key: (usize, u32)) -> usize {
        if let Some(i) = self.streams.iter().position(|s| s.key == key) {
            return i;
        }
        let n = u32::try_from(self.streams.len()).unwrap_or(0);
        self.streams.push(Stream {
            cupti: FIRST_NCCL_STREAM + 4 * (n - 1),
            key,
            queue: Vec::new(),
            head: 0,
            free: 0,
        });
        self.streams.len() - 1
    }

    /// The next `Seq` of group `g`: a collective takes it, a point-to-point op only reads it
    /// (ProcessGroupNCCL records `seqCollective_ + 1` for both, and bumps it for collectives).
    fn seq(&mut self, p: &HPlan, g: usize, bump: bool) -> u64 {
        let i = match self.seqs.iter().position(|x| x.0 == g) {
            Some(i) => i,
            None => {
                self.seqs.push((g, p.seq_base(g)));
                self.seqs.len() - 1
            }
        };
        let Some(slot) = self.seqs.get_mut(i) else { return 0 };
        if bump {
            slot.1 += 1;
            slot.1
        } else {
            slot.1 + 1
        }
    }

    fn p2p_ordinal(&mut self, g: usize, peer: u32, send: bool) -> u32 {
        let key = (g, peer, send);
        match self.p2p_count.iter_mut().find(|x| x.0 == key) {
            Some(x) => {
                x.1 += 1;
                x.1
            }
            None => {
                self.p2p_count.push((key, 0));
                0
            }
        }
    }

    /// Issues a communication op as PyTorch's NCCL backend does: `c10d::*` >
    /// `record_param_comms` > `nccl:*` > `cudaLaunchKernelExC`, the kernel on the
    /// communicator's stream. Returns the op's index.
    pub fn comm(&mut self, p: &HPlan, reg: &mut Registry, th: u8, spec: CommSpec) -> u32 {
        let CommSpec { group, kind, in_bytes, out_bytes, dtype, peer, splits, kernel, a2a_bytes } = spec;
        let size = dtype_bytes(dtype).and_then(|b| u64::try_from(b).ok()).unwrap_or(2).max(1);
        let collective = !kind.is_p2p();
        let seq = self.seq(p, group, collective);
        let op = u32::try_from(self.ops.len()).unwrap_or(NONE);
        // The instance this op is a member of, and its transfer time.
        let (key, members) = if collective {
            (InstKey::Coll { group, seq }, p.lay.group(group).map_or(1, |g| g.ranks.len()))
        } else {
            let (src, dst) = if kind == CommKind::Send { (self.rank, peer) } else { (peer, self.rank) };
            let n = self.p2p_ordinal(group, peer, kind == CommKind::Send);
            (InstKey::P2p { group, src, dst, n }, 2)
        };
        let transfer = if kind == CommKind::AllToAllV {
            Transfer::PerMember {
                bytes: a2a_bytes,
                alpha: p.cfg.collective_latency_ns,
                gbps: p.group_gbps(group),
            }
        } else {
            Transfer::Fixed(p.transfer_ns(group, kind, in_bytes.max(out_bytes), self.rank, peer))
        };
        self.runtime(th, "cudaEventRecord", 135, 1_500, 4_500);
        self.op(th, kind.op_name());
        self.begin(th, EvKind::Comms(op));
        // Tensor checks and ProcessGroupNCCL's bookkeeping.
        self.adv(15_000, 40_000);
        self.runtime(th, "cudaStreamIsCapturing", 317, 800, 1_600);
        self.runtime(th, "cudaEventRecord", 135, 1_000, 2_600);
        self.runtime(th, "cudaStreamWaitEvent", 147, 1_000, 1_900);
        self.begin(th, EvKind::NcclAnnot(op));
        self.adv(25_000, 60_000);
        let li = self.runtime(th, "cudaLaunchKernelExC", 430, 7_000, 14_000);
        let (corr, ext, ready) = self.launched(li);
        let stream = self.comm_stream((group, if collective { NONE } else { peer }));
        let skew = self.rng.range(0, 3_000);
        let after = self.last_compute;
        let it = self.item(stream, ready, ItemKind::Comm { inst: NONE, slot: 0, after, skew });
        let coll = if collective { kind.collective_name() } else { "send" };
        let (inst, slot) = reg.join(key, coll, members, transfer, self.rank, it);
        if let Some(x) = self.items.get_mut(it as usize) {
            x.kind = ItemKind::Comm { inst, slot, after, skew };
        }
        self.push(Ev { ts: 0, dur: 0, kind: EvKind::NcclKernel(op), th, ext, corr, item: it });
        self.runtime(th, "cudaEventRecord", 135, 500, 900);
        self.end(th);
        self.end(th);
        self.end(th);
        let annot_ext = self
            .ev
            .iter()
            .rev()
            .find(|e| matches!(e.kind, EvKind::NcclAnnot(o) if o == op))
            .map_or(0, |e| e.ext);
        self.push(Ev {
            ts: 0,
            dur: 0,
            kind: EvKind::NcclGpuAnnot(op),
            th,
            ext: annot_ext,
            corr: 0,
            item: it,
        });
        self.ops.push(CommOp {
            group,
            kind,
            in_nelems: in_bytes / size,
            out_nelems: out_bytes / size,
            dtype,
            seq,
            peer,
            splits: splits.map(Box::new),
            item: it,
            kernel,
        });
        op
    }

    /// `x.item()` or `torch.cuda.synchronize()`: the CPU blocks until the GPU is done (the
    /// call's duration is set once the GPU work is placed, [`RankRun::finish_sync`]).
    pub fn sync(&mut self, th: u8, device: bool) {
        let i = if device {
            self.runtime_dur(th, "cudaDeviceSynchronize", 165, 0)
        } else {
            self.runtime_dur(th, "cudaStreamSynchronize", 131, 0)
        };
        self.pending_sync = Some((i, device));
    }

    /// The GPU work is placed: the pending synchronization returns when what it waits for ended.
    pub fn finish_sync(&mut self) {
        let Some((i, device)) = self.pending_sync.take() else { return };
        let done = if device {
            self.streams.iter().map(|s| s.free).max().unwrap_or(self.t)
        } else {
            self.streams.first().map_or(self.t, |s| s.free)
        };
        let t0 = self.ev.get(i).map_or(self.t, |e| e.ts);
        let dur = (done - t0).max(0) + self.rng.range(1_500, 5_000);
        if let Some(e) = self.ev.get_mut(i) {
            e.dur = dur;
        }
        self.t = t0 + dur;
    }
}

/// What [`RankRun::comm`] issues.
#[derive(Debug, Clone)]
pub(crate) struct CommSpec {
    pub group: usize,
    pub kind: CommKind,
    pub in_bytes: u64,
    pub out_bytes: u64,
    pub dtype: &'static str,
    /// Global rank of a send's or receive's other end.
    pub peer: u32,
    pub splits: Option<(Vec<u64>, Vec<u64>)>,
    pub kernel: Kern,
    /// An all_to_allv: the larger of the bytes this member sends to and receives from others.
    pub a2a_bytes: u64,
}
