//! Pipeline-parallel training (`SynthConfig::pipeline`), as `torch.distributed.pipelining`
//! runs it on GPUs with NCCL.
//!
//! **Layout.** `stages × dp` ranks; global rank = pipeline rank × dp + replica (torchtitan's
//! `["pp", "dp"]` device mesh). Pipeline rank r holds model chunks c = 0..v, i.e. stages
//! k = c·p + r (`ScheduleInterleaved1F1B`'s placement; v = 1 otherwise). Stage 0 also runs the
//! token embedding, the last stage the loss; every stage runs `layers_per_stage / v` transformer
//! layers per chunk, so stages do nearly the same work (unless `slow_stage`).
//!
//! **The schedule** is each rank's ordered list of actions F(k, i) / B(k, i) for micro-batch
//! i, exactly in the order torch's schedule classes produce (pytorch/pytorch
//! `torch/distributed/pipelining/schedules.py`): `ScheduleGPipe` runs all forwards then all
//! backwards; `Schedule1F1B` runs min(m, p − r) warm-up forwards, then a backward and a forward
//! alternately, then the remaining backwards; `ScheduleInterleaved1F1B` follows
//! `_calculate_single_rank_operations` / `_get_1f1b_rank_ops` (warm-up
//! (v − 1)·m/rounds + 2(p − 1 − r) forwards, rounds = max(1, m / p), then 1F1B pairs, then the
//! cool-down backwards), without the `None` no-ops, which only align its visualisation.
//!
//! **Annotations** (`PipeAnnotations`): `ScheduleGPipe` wraps each action in
//! `record_function(f"Forward {i}")` / `record_function(f"Backward {i}")` (`_step_microbatches`);
//! `Schedule1F1B` adds none; `_PipelineScheduleRuntime` (interleaved and CSV-loaded schedules)
//! wraps each action in `record_function(_get_profiler_function_name(action))`, which is
//! `f"PP:{action}"`: `PP:{stage}F{i}`, `PP:{stage}B{i}`. The same names are written as
//! `gpu_user_annotation`s over each action's compute kernels, as Kineto does for annotated
//! ranges. No `## ... ##` stage annotation exists in torch's pipelining code.
//!
//! **P2P.** Each action receives its input before computing (activations from stage k − 1 for a
//! forward, gradients from stage k + 1 for a backward) and sends its output after, as plain
//! `isend`/`irecv` (`c10d::send` / `c10d::recv_` > `record_param_comms` with `Collective name`
//! `send`/`recv`, `Src Rank`/`Dst Rank`, `Group size` 2 > `nccl:send 0->1` / `nccl:recv 1<-0`,
//! PGNCCL's profiling titles with group-local ranks) on per-edge process groups: torch's
//! `pipeline_per_edge_p2p` mode creates one 2-rank child group per directed rank edge, so a batch
//! that mixes directions is split into one-direction batches, which `_batch_p2p` issues as plain
//! isend/irecv. (The default shared-group mode coalesces mixed batches into one NCCL group;
//! that is not modelled.) Every op is one `ncclDevKernel_SendRecv` kernel on its edge's NCCL
//! stream (forward and backward traffic of one edge on separate streams). As in PGNCCL, the
//! NCCL stream first waits for the compute stream's work issued before the call (so a recv is
//! posted only once the previous action's kernels are done); a send and its recv both end when
//! the later of the two was posted plus the transfer (α + S / `p2p_gbps`); `work.wait()` makes the
//! compute stream wait for a recv before the action's first kernel, and for a send before the
//! next send of the same direction (torch waits for sends one action later; GPipe after the
//! forward loop and after the backward loop).
//!
//! **Time.** The CPU runs ahead of the GPU (the launches of a step take far less time than its
//! kernels): it issues the whole schedule, the optional data-parallel all_reduce of the stage's
//! gradients (`dp` > 1) and the optimizer, and only then blocks in the step's closing sync
//! (`loss.item()` on the last stage, `torch.cuda.synchronize()` elsewhere). So every rank's CPU
//! part of a step is simulated first with its GPU work left unplaced; then the GPU work of all
//! ranks is placed together (each stream in order, cross-stream and cross-rank dependencies
//! honoured), which is what makes the bubbles appear where the schedule puts them.

use std::collections::BTreeMap;

use super::super::{PipeAnnotations, Pipeline, Plan, Schedule};
use super::*;

/// The stream of the data-parallel gradient all_reduce.
const STREAM_DP: u32 = 40;
/// NCCL streams of the four edge directions of a pipeline rank.
const STREAM_FWD_RECV: u32 = 44;
const STREAM_FWD_SEND: u32 = 48;
const STREAM_BWD_RECV: u32 = 52;
const STREAM_BWD_SEND: u32 = 56;

/// One action of a rank's schedule: forward or backward of micro-batch `mb` on stage `stage`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Action {
    pub fwd: bool,
    pub stage: u32,
    pub mb: u32,
}

/// The actions of pipeline rank `r`, in the order its schedule runs them.
pub(crate) fn schedule(p: &Pipeline, r: u32) -> Vec<Action> {
    let (n, m, v) = (p.stages, p.micro_batches, p.virtual_stages.max(1));
    let f = |mb| Action { fwd: true, stage: r, mb };
    let b = |mb| Action { fwd: false, stage: r, mb };
    match p.schedule {
        Schedule::GPipe => (0..m).map(f).chain((0..m).map(b)).collect(),
        Schedule::OneFOneB => {
            // Schedule1F1B._step_microbatches: warm-up, then "1B1F" until the forwards are
            // done, then the cool-down backwards.
            let warmup = m.min(n.saturating_sub(r));
            let mut out: Vec<Action> = (0..warmup).map(f).collect();
            let (mut fi, mut bi) = (warmup, 0);
            loop {
                out.push(b(bi));
                bi += 1;
                if fi >= m {
                    break;
                }
                out.push(f(fi));
                fi += 1;
            }
            out.extend((bi..m).map(b));
            out
        }
        Schedule::Interleaved1F1B => {
            // ScheduleInterleaved1F1B._calculate_single_rank_operations.
            let rounds = (m / n).max(1);
            let per_round = (m / rounds).max(1);
            let warmup = ((v - 1) * per_round + 2 * (n - 1 - r)).min(m * v);
            let fwd_bwd = m * v - warmup;
            let total = warmup + fwd_bwd + warmup;
            let fwd_stage = |step: u32| ((step / per_round) % v) * n + r;
            let bwd_stage = |step: u32| (v - 1 - ((step - warmup) / per_round) % v) * n + r;
            let mut next_f = vec![0u32; (n * v) as usize];
            let mut next_b = vec![0u32; (n * v) as usize];
            let take = |counters: &mut Vec<u32>, stage: u32| {
                let slot = counters.get_mut(stage as usize);
                slot.map_or(0, |c| {
                    *c += 1;
                    *c - 1
                })
            };
            let mut out = Vec::with_capacity((2 * m * v) as usize);
            for op in 0..total {
                if op < warmup + fwd_bwd {
                    let k = fwd_stage(op);
                    out.push(Action { fwd: true, stage: k, mb: take(&mut next_f, k) });
                }
                if op >= warmup {
                    let k = bwd_stage(op);
                    out.push(Action { fwd: false, stage: k, mb: take(&mut next_b, k) });
                }
            }
            out
        }
    }
}

/// The schedule's bubble fraction: (p − 1) / (m + p − 1), or (p − 1) / (m·v + p − 1) interleaved.
pub(crate) fn formula(p: &Pipeline) -> f64 {
    let (n, m, v) = (f64::from(p.stages), f64::from(p.micro_batches), f64::from(p.virtual_stages.max(1)));
    (n - 1.0) / (m * v + n - 1.0)
}

/// A process group of a pipeline job.
#[derive(Debug, Clone)]
pub(crate) struct PgInfo {
    pub name: String,
    pub desc: String,
    pub ranks: Vec<u32>,
    /// `"[0, 1]"`, as `Process Group Ranks` writes it.
    pub ranks_text: String,
}

/// Everything fixed about a pipeline job.
#[derive(Debug, Clone)]
pub(crate) struct PipePlan {
    pub cfg: Pipeline,
    pub layers_per_chunk: u32,
    /// Gradient bytes of one pipeline rank's parameters (fp32), for the data-parallel all_reduce.
    pub grad_bytes: u64,
    /// Every process group: the default group first, then data-parallel groups (`dp` > 1),
    /// then one per directed pipeline edge.
    pub groups: Vec<PgInfo>,
    slow_ppm: i64,
}

fn ranks_text(ranks: &[u32]) -> String {
    let v: Vec<String> = ranks.iter().map(u32::to_string).collect();
    format!("[{}]", v.join(", "))
}

impl PipePlan {
    pub(crate) fn new(cfg: &Pipeline, world: u32) -> PipePlan {
        let (p, dp) = (cfg.stages, cfg.dp);
        let mut groups = vec![PgInfo {
            name: "0".into(),
            desc: "default_pg".into(),
            ranks: (0..world).collect(),
            ranks_text: ranks_text(&(0..world).collect::<Vec<_>>()),
        }];
        let mut add = |desc: String, ranks: Vec<u32>| {
            let name = groups.len().to_string();
            groups.push(PgInfo { name, desc, ranks_text: ranks_text(&ranks), ranks });
        };
        if dp > 1 {
            for r in 0..p {
                add(format!("dp_stage_{r}"), (0..dp).map(|d| r * dp + d).collect());
            }
        }
        for d in 0..dp {
            let mut edges = Vec::new();
            for r in 0..p {
                let next = (r + 1) % p;
                if r + 1 < p || cfg.virtual_stages > 1 {
                    edges.push((r, next));
                    edges.push((next, r));
                }
            }
            edges.sort_unstable();
            edges.dedup();
            for (a, b) in edges {
                let (ga, gb) = (a * dp + d, b * dp + d);
                let mut ranks = vec![ga, gb];
                ranks.sort_unstable();
                add(format!("pp_edge_{ga}_to_{gb}"), ranks);
            }
        }
        PipePlan {
            layers_per_chunk: (cfg.layers_per_stage / cfg.virtual_stages.max(1)).max(1),
            // 12·H² weights and 13·H biases / norms per layer, fp32 gradients.
            grad_bytes: u64::from(cfg.layers_per_stage) * (12 * 1024 * 1024 + 13 * 1024) * 4,
            slow_ppm: (cfg.slow_factor * 1e6).round() as i64,
            cfg: cfg.clone(),
            groups,
        }
    }

    pub(crate) fn stages_total(&self) -> u32 {
        self.cfg.stages * self.cfg.virtual_stages.max(1)
    }

    /// (pipeline rank, replica) of global rank `g`.
    pub(crate) fn coords(&self, g: u32) -> (u32, u32) {
        (g / self.cfg.dp, g % self.cfg.dp)
    }

    pub(crate) fn global(&self, pr: u32, d: u32) -> u32 {
        pr * self.cfg.dp + d
    }

    /// The group of the directed edge `src → dst` (global ranks).
    fn edge_group(&self, src: u32, dst: u32) -> usize {
        let desc = format!("pp_edge_{src}_to_{dst}");
        self.groups.iter().position(|g| g.desc == desc).unwrap_or(0)
    }

    /// The data-parallel group of pipeline rank `pr` (`dp` > 1).
    fn dp_group(&self, pr: u32) -> usize {
        let desc = format!("dp_stage_{pr}");
        self.groups.iter().position(|g| g.desc == desc).unwrap_or(0)
    }

    /// The groups global rank `g` is a member of (its `distributedInfo.pg_config`).
    pub(crate) fn groups_of(&self, g: u32) -> impl Iterator<Item = &PgInfo> {
        self.groups.iter().filter(move |x| x.ranks.contains(&g))
    }

    /// The NCCL streams rank `g` uses.
    pub(crate) fn streams_of(&self, g: u32) -> Vec<u32> {
        let (pr, _) = self.coords(g);
        let last = self.stages_total() - 1;
        let ks: Vec<u32> = (0..self.cfg.virtual_stages.max(1)).map(|c| c * self.cfg.stages + pr).collect();
        let mut v = Vec::new();
        if self.cfg.dp > 1 {
            v.push(STREAM_DP);
        }
        if ks.iter().any(|&k| k > 0) {
            v.push(STREAM_FWD_RECV);
            v.push(STREAM_BWD_SEND);
        }
        if ks.iter().any(|&k| k < last) {
            v.push(STREAM_FWD_SEND);
            v.push(STREAM_BWD_RECV);
        }
        v.sort_unstable();
        v
    }
}

/// What matches a communication op with its partners: (kind, step, and three ids).
type RvKey = (u8, u32, u32, u32, u32);

/// A rendezvous: the op ends when all `members` have started it, plus `transfer` (and a
/// per-rank skew of 0–2.5 µs).
#[derive(Debug, Clone, Copy)]
struct Rv {
    key: RvKey,
    members: u32,
    transfer: i64,
    skew: i64,
}

/// One piece of GPU work of a pipeline rank, placed after the CPU pass of the step.
#[derive(Debug, Clone)]
pub(crate) struct GpuItem {
    /// Its event in `RankSim::ev`.
    pub ev: usize,
    /// The `gpu_user_annotation` twin of an NCCL op.
    annot: Option<usize>,
    pub stream: u32,
    dur: i64,
    earliest: i64,
    /// Items (same rank) that must end before this one starts.
    after: Vec<usize>,
    rv: Option<Rv>,
    pub start: i64,
    pub end: i64,
    started: bool,
    ended: bool,
}

/// A communication op of a pipeline rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PipeOp {
    Send,
    Recv,
    AllReduce,
}

impl PipeOp {
    pub(crate) fn collective_name(self) -> &'static str {
        match self {
            PipeOp::Send => "send",
            PipeOp::Recv => "recv",
            PipeOp::AllReduce => "allreduce",
        }
    }
}

/// One communication op (its `record_param_comms` and kernel refer to it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommRec {
    pub op: PipeOp,
    /// Index into `PipePlan::groups`.
    pub group: usize,
    /// The other end of a send/recv (global rank).
    pub peer: u32,
    pub bytes: u64,
    pub seq: u64,
    pub item: usize,
    /// The micro-batch and the stages the message goes between (send/recv).
    pub mb: u32,
    pub stage_from: u32,
    pub stage_to: u32,
    pub fwd: bool,
}

/// One action as it ran: its compute items and its annotations.
#[derive(Debug, Clone)]
pub(crate) struct ActRec {
    pub act: Action,
    items: Vec<usize>,
    gpu_annot: Option<usize>,
}

/// (stage, micro-batch).
type StageMb = (u32, u32);
/// (sequence number, flow id) of the forward ops autograd recorded.
type AutogradRecords = Vec<(u32, u32)>;

/// One rank's part of a replica's window: its first forward kernel, its last backward kernel,
/// and its compute-stream busy intervals (merged).
struct Span {
    first: i64,
    last: i64,
    busy: Vec<(i64, i64)>,
}

/// Pipeline state of one rank.
#[derive(Debug, Default)]
pub(crate) struct PipeState {
    /// GPU work is being recorded unplaced (the CPU pass of a step).
    pub deferring: bool,
    pub items: Vec<GpuItem>,
    /// Items the next compute item waits for (`work.wait()` on a recv or send).
    waits: Vec<usize>,
    /// The last compute item issued (what an NCCL op's stream waits for first).
    last_compute: Option<usize>,
    /// Forward autograd records (sequence number, flow id) per (stage, micro-batch).
    saved: Vec<(StageMb, AutogradRecords)>,
    /// Sends not yet waited for, per direction (0 forward, 1 backward).
    sends: [Vec<usize>; 2],
    pub comms: Vec<CommRec>,
    pub acts: Vec<ActRec>,
    /// The compute items of the action being recorded.
    cur_items: Vec<usize>,
    /// The micro-batch's gradients are the first of the step (AccumulateGrad copies them).
    first_grad: bool,
    /// Per process group, the next `Seq`.
    seq: BTreeMap<usize, u64>,
}

impl PipeState {
    pub(crate) fn defer_compute(&mut self, ev: usize, earliest: i64, dur: i64) {
        let i = self.items.len();
        let after = std::mem::take(&mut self.waits);
        self.items.push(GpuItem {
            ev,
            annot: None,
            stream: STREAM_COMPUTE,
            dur,
            earliest,
            after,
            rv: None,
            start: 0,
            end: 0,
            started: false,
            ended: false,
        });
        self.last_compute = Some(i);
        self.cur_items.push(i);
    }
}

/// Per stage × step truth of a pipeline job.
#[derive(Debug, Clone, Default)]
pub(crate) struct PipeTruth {
    /// Per global rank, per step.
    pub ranks: Vec<Vec<StageStep>>,
    /// Every send/recv pair.
    pub p2p: Vec<P2pTruth>,
    /// The GPU placement could not honour every dependency (a bug if ever true).
    pub deadlocked: bool,
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StageStep {
    /// Start of the replica's window (true time).
    pub window_start: i64,
    /// Compute-stream busy time inside the window.
    pub compute: i64,
    /// The replica's pipeline window: first forward kernel start to last backward kernel end
    /// over all its stages.
    pub window: i64,
    /// `window` minus this rank's compute inside it.
    pub bubble: i64,
    /// Σ over its recvs of how long each was posted before the matching send.
    pub recv_wait: i64,
    /// Σ over its sends of how long each was posted before the matching recv.
    pub send_wait: i64,
}

#[derive(Debug, Clone)]
pub(crate) struct P2pTruth {
    pub step: u32,
    pub src: u32,
    pub dst: u32,
    pub stage_from: u32,
    pub stage_to: u32,
    pub mb: u32,
    pub fwd: bool,
    pub bytes: u64,
    pub group: usize,
    pub send_seq: u64,
    pub recv_seq: u64,
    pub send_start: i64,
    pub recv_start: i64,
    pub send_end: i64,
    pub recv_end: i64,
    pub transfer: i64,
}

impl RankSim {
    fn ps(&mut self) -> Option<&mut PipeState> {
        self.pipe.as_deref_mut()
    }

    /// Gradient accumulation of one parameter in a pipeline stage (no DDP hook): the first
    /// micro-batch's gradient is stored, later ones are added.
    pub(super) fn pp_accumulate_grad(&mut self, weight: bool) {
        let a = Th::Autograd;
        let first = self.pipe.as_ref().is_some_and(|p| p.first_grad);
        self.op(a, "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad");
        self.op(a, "torch::autograd::AccumulateGrad");
        if first {
            self.op(a, "aten::detach");
            self.leaf(a, "detach", 1_500, 4_000);
            self.end(a);
        } else {
            self.op(a, "aten::add_");
            self.launch(a, if weight { K_GRAD_ADD_W } else { K_GRAD_ADD_B });
            self.end(a);
        }
        self.end(a);
        self.end(a);
    }

    /// One send or recv of a pipeline edge, as PGNCCL issues an unbatched `isend` / `irecv`.
    #[allow(clippy::too_many_arguments)]
    fn p2p(
        &mut self,
        plan: &Plan,
        pp: &PipePlan,
        send: bool,
        peer: u32,
        act: Action,
        stage_to: u32,
        step: u32,
    ) {
        let m = Th::Main;
        let me = self.rank;
        let (src, dst) = if send { (me, peer) } else { (peer, me) };
        let group = pp.edge_group(src, dst);
        let g = pp.groups.get(group);
        let local = |r: u32| g.and_then(|g| g.ranks.iter().position(|&x| x == r)).unwrap_or(0);
        let (mine, theirs) = (local(me), local(peer));
        let op = if send { PipeOp::Send } else { PipeOp::Recv };
        let seq = {
            let ps = self.pipe.get_or_insert_with(Default::default);
            let s = ps.seq.entry(group).or_insert(0);
            *s += 1;
            *s
        };
        let site = std::mem::replace(&mut self.site, Site::P2p);
        self.op(m, if send { "c10d::send" } else { "c10d::recv_" });
        let c = self.pipe.as_ref().map_or(0, |p| p.comms.len());
        self.begin_kind(
            m,
            "record_param_comms",
            Kind::PipeComm { comm: u32::try_from(c).unwrap_or(u32::MAX) },
        );
        self.adv(m, 12_000, 30_000);
        self.runtime(m, "cudaStreamIsCapturing", 317, 800, 1_600);
        self.runtime(m, "cudaEventRecord", 135, 1_000, 2_600);
        self.runtime(m, "cudaStreamWaitEvent", 147, 1_000, 1_900);
        let ann = self.annot(m, if send { "nccl:send" } else { "nccl:recv" });
        // PGNCCL's profiling title: `nccl:send {rank}->{dst}` / `nccl:recv {rank}<-{src}` with the
        // ranks local to the (2-rank) group.
        let title =
            if send { format!("nccl:send {mine}->{theirs}") } else { format!("nccl:recv {mine}<-{theirs}") };
        self.set_text(ann, title.clone());
        self.adv(m, 15_000, 40_000);
        let li = self.runtime(m, "cudaLaunchKernelExC", 430, 7_000, 14_000);
        let (corr, ext, ready) = self.launched(li);
        let kev = self.push(Ev {
            ts: 0,
            dur: 0,
            name: KERNELS.get(usize::from(K_NCCL_SENDRECV)).map_or("", |s| s.name),
            kind: Kind::PipeKernel { comm: u32::try_from(c).unwrap_or(u32::MAX) },
            th: m,
            ext,
            corr,
            seq: 0,
            flow: 0,
            site: Site::None,
            text: 0,
        });
        self.kernels += 1;
        self.runtime(m, "cudaEventRecord", 135, 500, 900);
        self.end(m);
        self.end(m);
        self.end(m);
        let ann_ext = self.ev.get(ann).map_or(0, |e| e.ext);
        let stream = match (act.fwd, send) {
            (true, false) => STREAM_FWD_RECV,
            (true, true) => STREAM_FWD_SEND,
            (false, false) => STREAM_BWD_RECV,
            (false, true) => STREAM_BWD_SEND,
        };
        let aev = self.push(Ev {
            ts: 0,
            dur: 0,
            name: "nccl:send",
            kind: Kind::GpuAnnot { stream, step: false },
            th: m,
            ext: ann_ext,
            corr: 0,
            seq: 0,
            flow: 0,
            site: Site::None,
            text: 0,
        });
        self.set_text(aev, title);
        let bytes = pp.cfg.activation_bytes;
        let transfer = plan.cfg.collective_latency_ns + (bytes as f64 / pp_p2p_gbps(plan)).round() as i64;
        let skew = self.rng.range(0, 2_500);
        // Matched by direction, destination stage and micro-batch (a message is unique in a step).
        let key: RvKey = (u8::from(act.fwd), step, pp.coords(dst).1, stage_to, act.mb);
        let stage_from = if act.fwd { stage_to.saturating_sub(1) } else { stage_to + 1 };
        let Some(ps) = self.ps() else {
            return;
        };
        let i = ps.items.len();
        ps.items.push(GpuItem {
            ev: kev,
            annot: Some(aev),
            stream,
            dur: 0,
            earliest: ready,
            // PGNCCL: the NCCL stream waits for the compute stream's work issued so far.
            after: ps.last_compute.into_iter().collect(),
            rv: Some(Rv { key, members: 2, transfer, skew }),
            start: 0,
            end: 0,
            started: false,
            ended: false,
        });
        ps.comms.push(CommRec {
            op,
            group,
            peer,
            bytes,
            seq,
            item: i,
            mb: act.mb,
            stage_from,
            stage_to,
            fwd: act.fwd,
        });
        if send {
            ps.sends[usize::from(!act.fwd)].push(i);
        } else {
            ps.waits.push(i);
        }
        self.site = site;
        if !send {
            // `work.wait()`: the compute stream waits for the received tensor.
            self.runtime(m, "cudaStreamWaitEvent", 147, 800, 2_000);
        }
    }

    /// `work.wait()` on the outstanding sends of one direction (0 forward, 1 backward): the
    /// compute stream waits for them.
    fn wait_sends(&mut self, dir: usize, keep_last: bool) {
        let Some(ps) = self.ps() else {
            return;
        };
        let Some(list) = ps.sends.get_mut(dir) else {
            return;
        };
        let keep = if keep_last { list.pop() } else { None };
        let n = list.len();
        ps.waits.append(list);
        list.extend(keep);
        for _ in 0..n {
            self.runtime(Th::Main, "cudaStreamWaitEvent", 147, 800, 2_000);
        }
    }

    /// One action: receive the input, compute, send the output.
    fn pp_action(&mut self, plan: &Plan, pp: &PipePlan, act: Action, step: u32) {
        let m = Th::Main;
        let last = pp.stages_total() - 1;
        let style = pp.cfg.annotations;
        let name = match (style, pp.cfg.schedule) {
            (PipeAnnotations::None, _) | (PipeAnnotations::Schedule, Schedule::OneFOneB) => None,
            (PipeAnnotations::Schedule, Schedule::GPipe) => {
                Some(if act.fwd { format!("Forward {}", act.mb) } else { format!("Backward {}", act.mb) })
            }
            _ => Some(format!("PP:{}{}{}", act.stage, if act.fwd { "F" } else { "B" }, act.mb)),
        };
        let ann = name.clone().map(|n| {
            let i = self.annot(m, "Forward");
            self.set_text(i, n);
            i
        });
        if let Some(ps) = self.ps() {
            ps.cur_items.clear();
        }
        let (prev_rank, next_rank) = {
            let (pr, d) = pp.coords(self.rank);
            let n = pp.cfg.stages;
            (pp.global((pr + n - 1) % n, d), pp.global((pr + 1) % n, d))
        };
        if act.fwd {
            if act.stage > 0 {
                self.p2p(plan, pp, false, prev_rank, act, act.stage, step);
            }
            if act.stage == 0 {
                self.fwd_embedding();
            }
            for _ in 0..pp.layers_per_chunk {
                self.fwd_layer(false);
            }
            if act.stage == last {
                self.fwd_loss();
            }
            let saved = std::mem::take(&mut self.fwd_stack);
            if let Some(ps) = self.ps() {
                ps.saved.push(((act.stage, act.mb), saved));
            }
            if act.stage < last {
                if pp.cfg.schedule != Schedule::GPipe {
                    self.wait_sends(0, false);
                }
                self.p2p(plan, pp, true, next_rank, act, act.stage + 1, step);
            }
        } else {
            if act.stage < last {
                self.p2p(plan, pp, false, next_rank, act, act.stage, step);
            }
            let saved = self.ps().and_then(|ps| {
                let i = ps.saved.iter().position(|(k, _)| *k == (act.stage, act.mb))?;
                Some(ps.saved.swap_remove(i).1)
            });
            self.fwd_stack = saved.unwrap_or_default();
            let first_grad = self
                .pipe
                .as_ref()
                .is_some_and(|ps| !ps.acts.iter().any(|a| !a.act.fwd && a.act.stage == act.stage));
            if let Some(ps) = self.ps() {
                ps.first_grad = first_grad;
            }
            // backward_one_chunk: torch.autograd.backward on the main thread; the engine's
            // device thread runs the ops while the main thread waits.
            let handoff = self.t[0] + self.rng.range(8_000, 30_000);
            self.t[1] = self.t[1].max(handoff);
            if act.stage == last {
                self.bwd_loss();
            }
            for _ in 0..pp.layers_per_chunk {
                self.bwd_layer(plan);
            }
            if act.stage == 0 {
                self.bwd_embedding(plan);
                self.accumulate_grad(plan, true);
            }
            self.t[0] = self.t[0].max(self.t[1]) + self.rng.range(5_000, 20_000);
            if act.stage > 0 {
                if pp.cfg.schedule != Schedule::GPipe {
                    self.wait_sends(1, false);
                }
                self.p2p(plan, pp, true, prev_rank, act, act.stage - 1, step);
            }
        }
        if ann.is_some() {
            self.end(m);
        }
        let items = self.ps().map(|ps| std::mem::take(&mut ps.cur_items)).unwrap_or_default();
        let gpu_annot = ann.map(|i| {
            let ext = self.ev.get(i).map_or(0, |e| e.ext);
            let g = self.push(Ev {
                ts: 0,
                dur: 0,
                name: "Forward",
                kind: Kind::GpuAnnot { stream: STREAM_COMPUTE, step: false },
                th: m,
                ext,
                corr: 0,
                seq: 0,
                flow: 0,
                site: Site::None,
                text: 0,
            });
            if let Some(n) = name {
                self.set_text(g, n);
            }
            g
        });
        if let Some(ps) = self.ps() {
            ps.acts.push(ActRec { act, items, gpu_annot });
        }
    }

    /// The CPU part of a pipeline step: input, schedule, gradient all_reduce, optimizer.
    pub(crate) fn pp_step_cpu(&mut self, plan: &Plan, pp: &PipePlan, s: u32) {
        self.ev.clear();
        self.colls.clear();
        self.compute_iv.clear();
        self.fwd_stack.clear();
        self.first_gpu = None;
        self.base_sum = 0;
        self.kernels = 0;
        self.stats = StepStats::default();
        self.texts.clear();
        self.step_idx = s;
        let ps = self.pipe.get_or_insert_with(Default::default);
        ps.deferring = true;
        ps.items.clear();
        ps.waits.clear();
        ps.last_compute = None;
        ps.saved.clear();
        ps.sends = [Vec::new(), Vec::new()];
        ps.comms.clear();
        ps.acts.clear();
        ps.cur_items.clear();

        let (pr, d) = pp.coords(self.rank);
        let jitter = self.rng.range(-plan.jitter_ppm, plan.jitter_ppm);
        let mut speed = 1_000_000 + jitter;
        if pp.cfg.slow_stage == Some(pr) {
            speed = speed * pp.slow_ppm / 1_000_000;
        }
        self.speed_ppm = speed;

        let m = Th::Main;
        let start = self.t[0];
        if s == 0 {
            self.first_step_start = start;
        }
        self.stats.start = start;
        self.step_ev = self.begin_kind(m, "ProfilerStep#", Kind::Annot { step: true });
        // The first stage reads the inputs, the last the labels.
        if pr == 0 || pr + 1 == pp.cfg.stages {
            self.input_batch(plan);
        }
        self.annot(m, "Optimizer.zero_grad#AdamW.zero_grad");
        self.adv(m, 30_000, 110_000);
        self.end(m);
        let actions = schedule(&pp.cfg, pr);
        let mut forwards_left = actions.iter().filter(|a| a.fwd).count();
        for act in actions {
            self.pp_action(plan, pp, act, s);
            if act.fwd {
                forwards_left -= 1;
                if forwards_left == 0 && pp.cfg.schedule == Schedule::GPipe {
                    // ScheduleGPipe waits for every forward send before the backwards.
                    self.wait_sends(0, false);
                }
            }
        }
        self.wait_sends(0, false);
        self.wait_sends(1, false);
        if pp.cfg.dp > 1 {
            self.pp_dp_allreduce(plan, pp, s, pr, d);
        }
        self.site = Site::Optim;
        self.annot(m, "Optimizer.step#AdamW.step");
        self.op(m, "aten::_fused_adamw_");
        let kernels = (pp.cfg.layers_per_stage * 12).div_ceil(8).max(1);
        for _ in 0..kernels {
            self.launch(m, K_ADAMW);
        }
        self.end(m);
        self.end(m);
        self.site = Site::None;
        if let Some(ps) = self.ps() {
            ps.deferring = false;
        }
    }

    /// The data-parallel all_reduce of this stage's gradients over its replicas.
    fn pp_dp_allreduce(&mut self, plan: &Plan, pp: &PipePlan, s: u32, pr: u32, _d: u32) {
        let m = Th::Main;
        let group = pp.dp_group(pr);
        let seq = {
            let ps = self.pipe.get_or_insert_with(Default::default);
            let x = ps.seq.entry(group).or_insert(0);
            *x += 1;
            *x
        };
        let site = std::mem::replace(&mut self.site, Site::Comms);
        self.runtime(m, "cudaEventRecord", 135, 1_500, 4_500);
        self.op(m, "c10d::allreduce_");
        let c = self.pipe.as_ref().map_or(0, |p| p.comms.len());
        self.begin_kind(
            m,
            "record_param_comms",
            Kind::PipeComm { comm: u32::try_from(c).unwrap_or(u32::MAX) },
        );
        self.adv(m, 15_000, 40_000);
        self.runtime(m, "cudaStreamIsCapturing", 317, 800, 1_600);
        self.runtime(m, "cudaEventRecord", 135, 1_000, 2_600);
        self.runtime(m, "cudaStreamWaitEvent", 147, 1_000, 1_900);
        let ann = self.annot(m, "nccl:all_reduce");
        self.adv(m, 25_000, 60_000);
        let li = self.runtime(m, "cudaLaunchKernelExC", 430, 7_000, 14_000);
        let (corr, ext, ready) = self.launched(li);
        let kev = self.push(Ev {
            ts: 0,
            dur: 0,
            name: KERNELS.get(usize::from(K_NCCL_ALLREDUCE)).map_or("", |s| s.name),
            kind: Kind::PipeKernel { comm: u32::try_from(c).unwrap_or(u32::MAX) },
            th: m,
            ext,
            corr,
            seq: 0,
            flow: 0,
            site: Site::None,
            text: 0,
        });
        self.kernels += 1;
        self.runtime(m, "cudaEventRecord", 135, 500, 900);
        self.end(m);
        self.end(m);
        self.end(m);
        let ann_ext = self.ev.get(ann).map_or(0, |e| e.ext);
        let aev = self.push(Ev {
            ts: 0,
            dur: 0,
            name: "nccl:all_reduce",
            kind: Kind::GpuAnnot { stream: STREAM_DP, step: false },
            th: m,
            ext: ann_ext,
            corr: 0,
            seq: 0,
            flow: 0,
            site: Site::None,
            text: 0,
        });
        let n = f64::from(pp.cfg.dp);
        let bytes = pp.grad_bytes;
        let transfer = plan.cfg.collective_latency_ns
            + (2.0 * (n - 1.0) / n * bytes as f64 / plan.cfg.busbw_gbps).round() as i64;
        let skew = self.rng.range(0, 2_500);
        let key: RvKey = (2, s, pr, 0, 0);
        let peer = self.rank;
        if let Some(ps) = self.ps() {
            let i = ps.items.len();
            ps.items.push(GpuItem {
                ev: kev,
                annot: Some(aev),
                stream: STREAM_DP,
                dur: 0,
                earliest: ready,
                after: ps.last_compute.into_iter().collect(),
                rv: Some(Rv { key, members: pp.cfg.dp, transfer, skew }),
                start: 0,
                end: 0,
                started: false,
                ended: false,
            });
            ps.comms.push(CommRec {
                op: PipeOp::AllReduce,
                group,
                peer,
                bytes,
                seq,
                item: i,
                mb: 0,
                stage_from: 0,
                stage_to: 0,
                fwd: false,
            });
            // The optimizer's kernels wait for the reduced gradients.
            ps.waits.push(i);
        }
        self.site = site;
        self.runtime(m, "cudaStreamWaitEvent", 147, 800, 2_000);
    }

    /// After the GPU work of every rank is placed: event times, the step's closing sync, the
    /// step's end and its figures.
    fn pp_step_finish(&mut self, pp: &PipePlan) {
        let m = Th::Main;
        let Some(ps) = self.pipe.take() else {
            return;
        };
        let mut gpu_end = self.t[0];
        for it in &ps.items {
            if let Some(e) = self.ev.get_mut(it.ev) {
                e.ts = it.start;
                e.dur = it.end - it.start;
            }
            if let Some(e) = it.annot.and_then(|a| self.ev.get_mut(a)) {
                e.ts = it.start;
                e.dur = it.end - it.start;
            }
            gpu_end = gpu_end.max(it.end);
            if it.stream == STREAM_COMPUTE {
                self.compute_iv.push((it.start, it.end));
                self.compute_free = self.compute_free.max(it.end);
                if self.first_gpu.is_none_or(|g| it.start < g) {
                    self.first_gpu = Some(it.start);
                }
            }
        }
        for a in &ps.acts {
            let span =
                a.items.iter().filter_map(|&i| ps.items.get(i)).fold(None, |acc: Option<(i64, i64)>, it| {
                    Some(acc.map_or((it.start, it.end), |(s, e)| (s.min(it.start), e.max(it.end))))
                });
            if let (Some(g), Some((s, e))) = (a.gpu_annot, span) {
                if let Some(ev) = self.ev.get_mut(g) {
                    ev.ts = s;
                    ev.dur = e - s;
                }
            }
        }
        // Every NCCL op must be done too before the device is idle.
        self.compute_free = self.compute_free.max(gpu_end);
        let (pr, _) = pp.coords(self.rank);
        self.site = Site::Scalar;
        if pr + 1 == pp.cfg.stages {
            // loss.item() on the last stage.
            self.op(m, "aten::item");
            self.op(m, "aten::_local_scalar_dense");
            self.memcpy(m, MemDir::DtoH, 4);
            let wait = (self.compute_free - self.t[0]).max(0) + self.rng.range(1_500, 5_000);
            self.runtime_dur(m, "cudaStreamSynchronize", 131, wait);
            self.end(m);
            self.end(m);
        } else {
            // torch.cuda.synchronize() before timing the step.
            let wait = (self.compute_free - self.t[0]).max(0) + self.rng.range(1_500, 5_000);
            self.runtime_dur(m, "cudaDeviceSynchronize", 165, wait);
        }
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
        self.adv(m, 4_000, 25_000);
        self.stats.dur = step_end - self.stats.start;
        let mut compute = self.compute_iv.clone();
        compute.sort_unstable();
        let compute = merge(&compute);
        self.stats.compute_busy = compute.iter().map(|(s, e)| e - s).sum();
        let mut comm: Vec<(i64, i64)> =
            ps.comms.iter().filter_map(|c| ps.items.get(c.item)).map(|it| (it.start, it.end)).collect();
        comm.sort_unstable();
        let comm = merge(&comm);
        self.stats.comm_busy = comm.iter().map(|(s, e)| e - s).sum();
        self.stats.exposed_comm = comm.iter().map(|&(s, e)| (e - s) - overlap(&compute, s, e)).sum();
        self.pipe = Some(ps);
    }
}

impl RankSim {
    /// Time this step's communication ops spent waiting for their partners: the union over the
    /// ops of [posted, partner posted), so waits on several NCCL streams at once count once.
    fn pp_comm_wait(&self) -> i64 {
        self.pipe.as_ref().map_or(0, |ps| {
            let mut iv: Vec<(i64, i64)> = ps
                .items
                .iter()
                .filter(|it| it.rv.is_some())
                .map(|it| (it.start, it.end - rv_transfer(it)))
                .filter(|(a, b)| b > a)
                .collect();
            iv.sort_unstable();
            merge(&iv).iter().map(|(a, b)| b - a).sum()
        })
    }
}

fn rv_transfer(it: &GpuItem) -> i64 {
    it.rv.map_or(0, |rv| rv.transfer + rv.skew)
}

/// P2P bandwidth in GB/s (bytes per ns).
fn pp_p2p_gbps(plan: &Plan) -> f64 {
    plan.cfg.pipeline.as_ref().map_or(plan.cfg.busbw_gbps, |p| p.p2p_gbps)
}

/// Places every rank's GPU work of a step: each stream runs its items in order; an item starts
/// when its stream is free, its launch has happened and the items it waits for have ended; a
/// send/recv (or all_reduce) ends when all its members have started plus the transfer. Returns
/// false if some item could not be placed (a dependency cycle; never expected).
fn place(ranks: &mut [RankSim]) -> bool {
    // Starts of each rendezvous' members, by key.
    let mut started: BTreeMap<RvKey, Vec<i64>> = BTreeMap::new();
    let n = ranks.len();
    let mut heads: Vec<BTreeMap<u32, usize>> = vec![BTreeMap::new(); n];
    // Per rank, per stream, the items in issue order.
    let lanes: Vec<BTreeMap<u32, Vec<usize>>> = ranks
        .iter()
        .map(|r| {
            let mut m: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
            if let Some(ps) = &r.pipe {
                for (i, it) in ps.items.iter().enumerate() {
                    m.entry(it.stream).or_default().push(i);
                }
            }
            m
        })
        .collect();
    loop {
        let mut progress = false;
        let mut pending = false;
        for (ri, r) in ranks.iter_mut().enumerate() {
            let Some(ps) = r.pipe.as_deref_mut() else {
                continue;
            };
            let Some(lane_map) = lanes.get(ri) else {
                continue;
            };
            for (stream, lane) in lane_map {
                let head = heads.get_mut(ri).map(|h| h.entry(*stream).or_insert(0));
                let Some(head) = head else {
                    continue;
                };
                while let Some(&i) = lane.get(*head) {
                    let prev_end = head
                        .checked_sub(1)
                        .and_then(|h| lane.get(h))
                        .and_then(|&j| ps.items.get(j))
                        .map_or(i64::MIN, |it| it.end);
                    let Some(it) = ps.items.get(i) else {
                        break;
                    };
                    if !it.started {
                        let mut t = it.earliest.max(prev_end);
                        let mut ready = true;
                        for &a in &it.after {
                            match ps.items.get(a) {
                                Some(x) if x.ended => t = t.max(x.end),
                                Some(_) => ready = false,
                                None => {}
                            }
                        }
                        if !ready {
                            break;
                        }
                        let rv = it.rv;
                        if let Some(x) = ps.items.get_mut(i) {
                            x.start = t;
                            x.started = true;
                        }
                        if let Some(rv) = rv {
                            started.entry(rv.key).or_default().push(t);
                        }
                        progress = true;
                    }
                    let Some(it) = ps.items.get(i) else {
                        break;
                    };
                    let end = match it.rv {
                        None => Some(it.start + it.dur),
                        Some(rv) => started
                            .get(&rv.key)
                            .filter(|v| v.len() as u32 >= rv.members)
                            .and_then(|v| v.iter().max().copied())
                            .map(|latest| (latest + rv.transfer + rv.skew).max(it.start + 1_000)),
                    };
                    let Some(end) = end else {
                        break;
                    };
                    if let Some(x) = ps.items.get_mut(i) {
                        x.end = end;
                        x.ended = true;
                    }
                    *head += 1;
                    progress = true;
                }
                if *head < lane.len() {
                    pending = true;
                }
            }
        }
        if !pending {
            return true;
        }
        if !progress {
            // Never expected: end whatever is stuck where it stands, so the output stays valid.
            for r in ranks.iter_mut() {
                if let Some(ps) = r.pipe.as_deref_mut() {
                    for it in ps.items.iter_mut().filter(|it| !it.ended) {
                        if !it.started {
                            it.start = it.earliest;
                        }
                        it.end = it.start + it.dur.max(1_000);
                        it.started = true;
                        it.ended = true;
                    }
                }
            }
            return false;
        }
    }
}

impl JobSim<'_> {
    /// One step of a pipeline job.
    pub(super) fn pipe_step(&mut self, s: u32) {
        let plan = self.plan;
        let Some(pp) = plan.pipe.as_ref() else {
            return;
        };
        for r in &mut self.ranks {
            r.pp_step_cpu(plan, pp, s);
        }
        let ok = place(&mut self.ranks);
        if let Some(t) = self.pipe.as_mut() {
            t.deadlocked |= !ok;
            t.ranks.resize(self.ranks.len(), Vec::new());
            self.collect_truth(pp, s);
        }
        for r in &mut self.ranks {
            r.pp_step_finish(pp);
            r.stats.comm_wait = r.pp_comm_wait();
        }
        if let Some(steps) = &mut self.steps {
            for (acc, r) in steps.iter_mut().zip(&self.ranks) {
                acc.push(r.stats);
            }
        }
    }

    fn collect_truth(&mut self, pp: &PipePlan, s: u32) {
        let Some(truth) = self.pipe.as_mut() else {
            return;
        };
        // Every message: the sender's and receiver's ops.
        let mut sends: BTreeMap<RvKey, (u32, CommRec, GpuItem)> = BTreeMap::new();
        let mut recvs: BTreeMap<RvKey, (u32, CommRec, GpuItem)> = BTreeMap::new();
        for r in &self.ranks {
            let Some(ps) = &r.pipe else {
                continue;
            };
            for c in &ps.comms {
                let Some(it) = ps.items.get(c.item) else {
                    continue;
                };
                let Some(rv) = it.rv else {
                    continue;
                };
                match c.op {
                    PipeOp::Send => {
                        sends.insert(rv.key, (r.rank, *c, it.clone()));
                    }
                    PipeOp::Recv => {
                        recvs.insert(rv.key, (r.rank, *c, it.clone()));
                    }
                    PipeOp::AllReduce => {}
                }
            }
        }
        let first_new = truth.p2p.len();
        let mut recv_wait = vec![0i64; self.ranks.len()];
        let mut send_wait = vec![0i64; self.ranks.len()];
        for (key, (src, sc, si)) in &sends {
            let Some((dst, rc, ri)) = recvs.get(key) else {
                continue;
            };
            if let Some(w) = recv_wait.get_mut(*dst as usize) {
                *w += (si.start - ri.start).max(0);
            }
            if let Some(w) = send_wait.get_mut(*src as usize) {
                *w += (ri.start - si.start).max(0);
            }
            truth.p2p.push(P2pTruth {
                step: s,
                src: *src,
                dst: *dst,
                stage_from: sc.stage_from,
                stage_to: sc.stage_to,
                mb: sc.mb,
                fwd: sc.fwd,
                bytes: sc.bytes,
                group: sc.group,
                send_seq: sc.seq,
                recv_seq: rc.seq,
                send_start: si.start,
                recv_start: ri.start,
                send_end: si.end,
                recv_end: ri.end,
                transfer: si.rv.map_or(0, |rv| rv.transfer),
            });
        }
        if let Some(step_msgs) = truth.p2p.get_mut(first_new..) {
            step_msgs.sort_by_key(|m| (m.send_start.min(m.recv_start), m.src, m.dst));
        }
        // The window of each replica: its first forward kernel to its last backward kernel;
        // and each rank's compute-stream busy intervals (all of them: the optimizer of an early
        // finishing stage is not idle).
        let span = |r: &RankSim| -> Option<Span> {
            let ps = r.pipe.as_ref()?;
            let acts = ps.acts.iter().flat_map(|a| a.items.iter()).filter_map(|&i| ps.items.get(i));
            let first = acts.clone().map(|it| it.start).min()?;
            let last = acts.map(|it| it.end).max()?;
            let mut iv: Vec<(i64, i64)> = ps
                .items
                .iter()
                .filter(|it| it.stream == STREAM_COMPUTE)
                .map(|it| (it.start, it.end))
                .collect();
            iv.sort_unstable();
            Some(Span { first, last, busy: merge(&iv) })
        };
        let spans: Vec<Option<Span>> = self.ranks.iter().map(span).collect();
        for (g, sp) in spans.iter().enumerate() {
            let (_, d) = pp.coords(g as u32);
            let replica: Vec<&Span> = spans
                .iter()
                .enumerate()
                .filter(|(h, _)| pp.coords(*h as u32).1 == d)
                .filter_map(|(_, x)| x.as_ref())
                .collect();
            let w0 = replica.iter().map(|x| x.first).min().unwrap_or(0);
            let w1 = replica.iter().map(|x| x.last).max().unwrap_or(0);
            let compute = sp
                .as_ref()
                .map_or(0, |x| x.busy.iter().map(|&(a, b)| b.min(w1) - a.max(w0)).filter(|&d| d > 0).sum());
            let st = StageStep {
                window_start: w0,
                compute,
                window: w1 - w0,
                bubble: (w1 - w0) - compute,
                recv_wait: recv_wait.get(g).copied().unwrap_or(0),
                send_wait: send_wait.get(g).copied().unwrap_or(0),
            };
            if let Some(v) = truth.ranks.get_mut(g) {
                v.push(st);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(p: u32, v: u32, m: u32, schedule: Schedule, r: u32) -> String {
        let cfg =
            Pipeline { stages: p, virtual_stages: v, micro_batches: m, schedule, ..Pipeline::default() };
        let acts: Vec<String> = schedule_of(&cfg, r);
        acts.join(" ")
    }

    fn schedule_of(cfg: &Pipeline, r: u32) -> Vec<String> {
        schedule(cfg, r)
            .iter()
            .map(|a| format!("{}{}{}", a.stage, if a.fwd { "F" } else { "B" }, a.mb))
            .collect()
    }

    /// The orders `ScheduleInterleaved1F1B._calculate_single_rank_operations` returns in torch
    /// 2.15 (printed by it, `None`s dropped).
    #[test]
    fn interleaved_order_is_torchs() {
        let i = Schedule::Interleaved1F1B;
        assert_eq!(
            text(4, 2, 8, i, 0),
            "0F0 0F1 0F2 0F3 4F0 4F1 4F2 4F3 0F4 0F5 0F6 4B0 0F7 4B1 4F4 4B2 4F5 4B3 4F6 0B0 4F7 0B1 0B2 0B3 4B4 4B5 4B6 4B7 0B4 0B5 0B6 0B7"
        );
        assert_eq!(
            text(4, 2, 8, i, 3),
            "3F0 3F1 3F2 3F3 7F0 7B0 7F1 7B1 7F2 7B2 7F3 7B3 3F4 3B0 3F5 3B1 3F6 3B2 3F7 3B3 7F4 7B4 7F5 7B5 7F6 7B6 7F7 7B7 3B4 3B5 3B6 3B7"
        );
        assert_eq!(
            text(2, 3, 4, i, 0),
            "0F0 0F1 2F0 2F1 4F0 4F1 0F2 4B0 0F3 4B1 2F2 2B0 2F3 2B1 4F2 0B0 4F3 0B1 4B2 4B3 2B2 2B3 0B2 0B3"
        );
        assert_eq!(
            text(2, 3, 4, i, 1),
            "1F0 1F1 3F0 3F1 5F0 5B0 5F1 5B1 1F2 3B0 1F3 3B1 3F2 1B0 3F3 1B1 5F2 5B2 5F3 5B3 3B2 3B3 1B2 1B3"
        );
    }

    #[test]
    fn gpipe_and_1f1b_orders() {
        assert_eq!(text(2, 1, 3, Schedule::GPipe, 1), "1F0 1F1 1F2 1B0 1B1 1B2");
        // Schedule1F1B: p − r warm-up forwards, then 1B1F, then the cool-down.
        assert_eq!(
            text(4, 1, 8, Schedule::OneFOneB, 0),
            "0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0F6 0B3 0F7 0B4 0B5 0B6 0B7"
        );
        assert_eq!(
            text(4, 1, 8, Schedule::OneFOneB, 3),
            "3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5 3F6 3B6 3F7 3B7"
        );
        assert_eq!(text(4, 1, 4, Schedule::OneFOneB, 1), "1F0 1F1 1F2 1B0 1F3 1B1 1B2 1B3");
    }

    #[test]
    fn every_action_once() {
        for schedule in [Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved1F1B] {
            for (p, v, m) in [(2, 1, 2), (4, 1, 8), (4, 2, 8), (3, 2, 6), (2, 3, 4), (8, 1, 16)] {
                let v = if schedule == Schedule::Interleaved1F1B { v } else { 1 };
                let cfg = Pipeline {
                    stages: p,
                    virtual_stages: v,
                    micro_batches: m,
                    schedule,
                    ..Pipeline::default()
                };
                for r in 0..p {
                    let mut got = schedule_of(&cfg, r);
                    got.sort();
                    let mut want: Vec<String> = (0..v)
                        .flat_map(|c| {
                            (0..m).flat_map(move |i| {
                                [format!("{}F{i}", c * p + r), format!("{}B{i}", c * p + r)]
                            })
                        })
                        .collect();
                    want.sort();
                    assert_eq!(got, want, "{schedule:?} p={p} v={v} m={m} rank {r}");
                }
            }
        }
        assert!((formula(&Pipeline::default()) - 3.0 / 11.0).abs() < 1e-12);
    }
}
