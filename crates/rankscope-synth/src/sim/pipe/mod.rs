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

mod place;
mod rank;

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

/// P2P bandwidth in GB/s (bytes per ns).
fn pp_p2p_gbps(plan: &Plan) -> f64 {
    plan.cfg.pipeline.as_ref().map_or(plan.cfg.busbw_gbps, |p| p.p2p_gbps)
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
