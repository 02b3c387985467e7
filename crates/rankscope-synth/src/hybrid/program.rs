//! What one rank does in a step, as Megatron-LM does it (see the module docs of `hybrid`):
//! the pipeline schedule with its sends and receives, each micro-batch's forward and backward
//! through the stage's layers (tensor all_reduces, context rings, expert all_to_alls), the
//! gradient collectives, the gradient norm, the optimizer and the parameters' all-gather.
//!
//! A step is three CPU phases separated by synchronizations (the gradient norm's `.item()`
//! and the closing `torch.cuda.synchronize()`); between phases the GPU work of all ranks is
//! placed ([`super::place`]), since what comes after a synchronization depends on when the
//! GPU got there.

use super::model::{self, Costs, Kern};
use super::place::Registry;
use super::rank::{CommKind, CommSpec, EvKind, RankRun, AUTOGRAD, MAIN, NONE};
use super::run::HPlan;
use super::{DpCollective, HybridCause};
use crate::Schedule;

/// One step of a pipeline rank's schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    RecvFwd,
    SendFwd,
    SendFwdRecvBwd,
    SendBwdRecvFwd,
    RecvBwd,
    SendBwd,
    Fwd(u32),
    Bwd(u32),
}

/// Pipeline rank `r`'s actions for `m` micro-batches over `p` stages: Megatron-LM's
/// `forward_backward_pipelining_without_interleaving` (1F1B: min(p − r − 1, m) warm-up
/// forwards, then one forward and one backward alternately, then the remaining backwards), or
/// every forward then every backward (GPipe).
pub(crate) fn schedule(schedule: Schedule, p: u32, r: u32, m: u32) -> Vec<Act> {
    let mut out = Vec::new();
    if schedule == Schedule::GPipe {
        for i in 0..m {
            out.extend([Act::RecvFwd, Act::Fwd(i), Act::SendFwd]);
        }
        for i in 0..m {
            out.extend([Act::RecvBwd, Act::Bwd(i), Act::SendBwd]);
        }
        return out;
    }
    let warmup = (p - r - 1).min(m);
    let remaining = m - warmup;
    for i in 0..warmup {
        out.extend([Act::RecvFwd, Act::Fwd(i), Act::SendFwd]);
    }
    if remaining > 0 {
        out.push(Act::RecvFwd);
    }
    for i in 0..remaining {
        out.extend([Act::Fwd(warmup + i), Act::SendFwdRecvBwd, Act::Bwd(i)]);
        out.push(if i + 1 == remaining { Act::SendBwd } else { Act::SendBwdRecvFwd });
    }
    for i in 0..warmup {
        out.extend([Act::RecvBwd, Act::Bwd(remaining + i), Act::SendBwd]);
    }
    out
}

const BF16: &str = "BFloat16";
const F32: &str = "Float";

impl RankRun {
    /// Phase 1: from `ProfilerStep#N` to the gradient norm's `.item()`.
    pub fn body(&mut self, p: &HPlan, reg: &mut Registry, s: u32) {
        self.begin_step(p);
        self.step_ev = self.begin(MAIN, EvKind::Step);
        if let HybridCause::HostStall { rank, ns, .. } = p.h.cause {
            if rank == self.rank {
                // `with record_function(name): time.sleep(...)` before any GPU work of the step.
                let i = self.begin(MAIN, EvKind::Stall);
                self.t += ns;
                self.end(MAIN);
                self.stats.host_stall = self.ev.get(i).map_or(0, |e| e.dur);
            }
        }
        self.begin(MAIN, EvKind::Annot("Optimizer.zero_grad#FusedAdam.zero_grad"));
        self.op(MAIN, "aten::zero_");
        self.memory(MAIN, p.params_of(self.c.pp) * 4, false, true);
        self.end(MAIN);
        self.end(MAIN);
        for act in schedule(p.h.schedule, p.h.pp, self.c.pp, p.h.micro_batches) {
            match act {
                Act::Fwd(mb) => self.forward(p, reg, s, mb),
                Act::Bwd(mb) => self.backward(p, reg, s, mb),
                a => self.communicate(p, reg, a),
            }
        }
        self.grad_sync(p, reg);
        self.grad_norm(p, reg);
    }

    /// Phase 2: after the `.item()`, the optimizer, the parameters' all-gather and the closing
    /// `torch.cuda.synchronize()`.
    pub fn tail(&mut self, p: &HPlan, reg: &mut Registry) {
        self.finish_sync();
        self.end(MAIN);
        self.end(MAIN);
        self.adv(20_000, 60_000);
        let params = p.params_of(self.c.pp);
        let shard = params / u64::from(p.h.dp * p.h.cp).max(1);
        self.begin(MAIN, EvKind::Annot("Optimizer.step#FusedAdam.step"));
        self.op(MAIN, "aten::_fused_adam_");
        for _ in 0..4 {
            self.launch(MAIN, model::ADAM, Costs::adam_ns(shard) / 4);
        }
        self.end(MAIN);
        self.end(MAIN);
        let g = p.lay.uses.get(self.rank as usize).map_or(usize::MAX, |u| u.grad);
        if p.h.dp_collective == DpCollective::ReduceScatter && g != usize::MAX {
            let n = u64::from(p.h.dp * p.h.cp).max(1);
            let buckets = u64::from(p.h.grad_buckets);
            let out = params * 2 / buckets;
            let mut ops = Vec::new();
            for _ in 0..p.h.grad_buckets {
                let spec = CommSpec {
                    group: g,
                    kind: CommKind::AllGather,
                    in_bytes: out / n,
                    out_bytes: out,
                    dtype: BF16,
                    peer: NONE,
                    splits: None,
                    kernel: model::all_gather_kernel(out),
                    a2a_bytes: 0,
                };
                ops.push(self.comm(p, reg, MAIN, spec));
            }
            for op in ops {
                self.wait(MAIN, op);
            }
        }
        self.adv(30_000, 90_000);
        self.sync(MAIN, true);
    }

    /// Phase 3: the synchronization returned; the step ends.
    pub fn close(&mut self) {
        self.finish_sync();
        self.adv(8_000, 30_000);
        self.end(MAIN);
        self.last_step_end = self.t;
        self.stats.dur = self.t - self.stats.start;
        // profiler.step() and the loop before the next step.
        self.adv(4_000, 25_000);
    }

    /// Sends and receives of one pipeline communication (Megatron's `_communicate` with
    /// `batch_p2p_comm=False`: `_p2p_ops` issues plain isend/irecv, even stages sending first,
    /// then waits for each).
    fn communicate(&mut self, p: &HPlan, reg: &mut Registry, act: Act) {
        let (stage, last) = (self.c.pp, p.h.pp - 1);
        let (send_next, recv_prev, send_prev, recv_next) = match act {
            Act::RecvFwd => (false, stage > 0, false, false),
            Act::SendFwd => (stage < last, false, false, false),
            Act::SendFwdRecvBwd => (stage < last, false, false, stage < last),
            Act::SendBwdRecvFwd => (false, stage > 0, stage > 0, false),
            Act::RecvBwd => (false, false, false, stage < last),
            Act::SendBwd => (false, false, stage > 0, false),
            Act::Fwd(_) | Act::Bwd(_) => return,
        };
        if !(send_next || recv_prev || send_prev || recv_next) {
            return;
        }
        let u = p.lay.uses.get(self.rank as usize).copied().unwrap_or_default();
        // With two stages one direction goes over the default group so both can overlap.
        let (even_send, even_recv) =
            if p.h.pp == 2 { (u.pipeline, u.world) } else { (u.pipeline, u.pipeline) };
        let next = p.lay.rank_of(self.c.tp, self.c.cp, self.c.dp, (stage + 1).min(last));
        let prev = p.lay.rank_of(self.c.tp, self.c.cp, self.c.dp, stage.saturating_sub(1));
        let bytes = p.costs.act_bytes;
        let even = stage % 2 == 0;
        // (wanted, send?, peer, group)
        let order = if even {
            [
                (send_next, true, next, even_send),
                (recv_prev, false, prev, even_recv),
                (send_prev, true, prev, even_send),
                (recv_next, false, next, even_recv),
            ]
        } else {
            [
                (recv_prev, false, prev, even_send),
                (send_next, true, next, even_recv),
                (recv_next, false, next, even_send),
                (send_prev, true, prev, even_recv),
            ]
        };
        self.adv(10_000, 30_000);
        let mut ops = Vec::new();
        for (wanted, send, peer, group) in order {
            if wanted {
                ops.push(self.p2p(p, reg, MAIN, group, send, peer, bytes));
            }
        }
        for op in ops {
            self.wait(MAIN, op);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn p2p(
        &mut self,
        p: &HPlan,
        reg: &mut Registry,
        th: u8,
        group: usize,
        send: bool,
        peer: u32,
        bytes: u64,
    ) -> u32 {
        let spec = CommSpec {
            group,
            kind: if send { CommKind::Send } else { CommKind::Recv },
            in_bytes: bytes,
            out_bytes: bytes,
            dtype: BF16,
            peer,
            splits: None,
            kernel: model::SENDRECV,
            a2a_bytes: 0,
        };
        self.comm(p, reg, th, spec)
    }

    fn forward(&mut self, p: &HPlan, reg: &mut Registry, s: u32, mb: u32) {
        let c = &p.costs;
        // Python of `forward_step`: the batch, the model's __call__.
        self.adv(40_000, 120_000);
        if self.c.pp == 0 {
            self.kernel(MAIN, "aten::embedding", model::EMBED, c.embed);
        }
        for l in 0..p.layers_of(self.c.pp) {
            self.fwd_layer(p, reg, s, mb, l);
        }
        if self.c.pp + 1 == p.h.pp {
            self.kernel(MAIN, "aten::layer_norm", model::LN_FWD, c.ln);
            self.kernel(MAIN, "aten::linear", model::LM, c.lm);
            self.kernel(MAIN, "aten::log_softmax", model::LOGSOFTMAX, c.softmax);
            self.kernel(MAIN, "aten::nll_loss_nd", model::NLL_FWD, 8_000);
        }
    }

    fn fwd_layer(&mut self, p: &HPlan, reg: &mut Registry, s: u32, mb: u32, l: u32) {
        let c = &p.costs;
        self.kernel(MAIN, "aten::layer_norm", model::LN_FWD, c.ln);
        self.kernel(MAIN, "aten::linear", model::QKV, c.qkv);
        self.attention(p, reg, true);
        self.kernel(MAIN, "aten::linear", model::PROJ, c.proj);
        self.tp_all_reduce(p, reg, MAIN, true);
        self.kernel(MAIN, "aten::add", model::ADD, c.add);
        self.kernel(MAIN, "aten::layer_norm", model::LN_FWD, c.ln);
        if p.h.ep > 1 {
            self.moe(p, reg, s, mb, l, true);
        } else {
            self.kernel(MAIN, "aten::linear", model::FC1, c.fc1);
            self.kernel(MAIN, "aten::gelu", model::GELU, c.gelu);
            self.kernel(MAIN, "aten::linear", model::FC2, c.fc2);
            self.tp_all_reduce(p, reg, MAIN, true);
        }
        self.kernel(MAIN, "aten::add", model::ADD, c.add);
    }

    fn backward(&mut self, p: &HPlan, reg: &mut Registry, s: u32, mb: u32) {
        let c = &p.costs;
        // `torch.autograd.backward`: the main thread hands over to the autograd engine.
        self.adv(30_000, 90_000);
        if self.c.pp + 1 == p.h.pp {
            self.bwd_op("NllLossBackward0", "aten::nll_loss_backward", &[(model::NLL_BWD, 8_000)]);
            self.bwd_op(
                "LogSoftmaxBackward0",
                "aten::_log_softmax_backward_data",
                &[(model::LOGSOFTMAX_BWD, c.softmax)],
            );
            self.bwd_op("MmBackward0", "aten::mm", &[(model::DGRAD, c.lm), (model::WGRAD, c.lm)]);
            self.bwd_op(
                "NativeLayerNormBackward0",
                "aten::native_layer_norm_backward",
                &[(model::LN_BWD_INPUT, c.ln), (model::LN_BWD_GAMMA, c.ln)],
            );
        }
        let layers = p.layers_of(self.c.pp);
        // Megatron's `overlap_grad_reduce`: in the last micro-batch's backward, a bucket's
        // collective starts once its layers' gradients are ready (buckets in backward order).
        let hooks = p.h.overlap_grad_reduce && mb + 1 == p.h.micro_batches;
        for (done, l) in (0..layers).rev().enumerate() {
            self.bwd_layer(p, reg, s, mb, l);
            let done = u32::try_from(done).unwrap_or(0) + 1;
            while hooks
                && self.next_bucket + 1 < p.h.grad_buckets
                && ((self.next_bucket + 1) * layers).div_ceil(p.h.grad_buckets) <= done
            {
                self.grad_bucket(p, reg, AUTOGRAD);
            }
        }
        if self.c.pp == 0 {
            self.bwd_op(
                "EmbeddingBackward0",
                "aten::embedding_dense_backward",
                &[(model::EMBED_BWD, c.embed * 4)],
            );
        }
        while hooks && self.next_bucket < p.h.grad_buckets {
            self.grad_bucket(p, reg, AUTOGRAD);
        }
    }

    /// `autograd::engine::evaluate_function: <name>` > `<name>` > `op` launching `kernels`.
    fn bwd_op(&mut self, name: &'static str, op: &'static str, kernels: &[(Kern, i64)]) {
        let a = AUTOGRAD;
        self.adv(3_000, 12_000);
        self.op(a, eval_name(name));
        self.op(a, name);
        self.op(a, op);
        for &(k, d) in kernels {
            self.launch(a, k, d);
        }
        self.end(a);
        self.end(a);
        self.end(a);
    }

    fn bwd_layer(&mut self, p: &HPlan, reg: &mut Registry, s: u32, mb: u32, l: u32) {
        let c = &p.costs;
        const LINEAR: &str = "LinearWithGradAccumulationAndAsyncCommunicationBackward";
        if p.h.ep > 1 {
            self.moe(p, reg, s, mb, l, false);
        } else {
            self.bwd_op(LINEAR, "aten::mm", &[(model::DGRAD, c.fc2), (model::WGRAD, c.fc2)]);
            self.bwd_op("GeluBackward0", "aten::gelu_backward", &[(model::GELU_BWD, c.gelu)]);
            self.linear_bwd_overlapped(p, reg, c.fc1);
        }
        self.bwd_op(
            "NativeLayerNormBackward0",
            "aten::native_layer_norm_backward",
            &[(model::LN_BWD_INPUT, c.ln), (model::LN_BWD_GAMMA, c.ln)],
        );
        self.bwd_op(LINEAR, "aten::mm", &[(model::DGRAD, c.proj), (model::WGRAD, c.proj)]);
        self.attention(p, reg, false);
        self.linear_bwd_overlapped(p, reg, c.qkv);
        self.bwd_op(
            "NativeLayerNormBackward0",
            "aten::native_layer_norm_backward",
            &[(model::LN_BWD_INPUT, c.ln), (model::LN_BWD_GAMMA, c.ln)],
        );
    }

    /// A column-parallel linear's backward (Megatron's `LinearWithGradAccumulationAndAsync
    /// Communication`): the input gradient, its all_reduce on the tensor group issued
    /// asynchronously, the weight gradient meanwhile, then the wait.
    fn linear_bwd_overlapped(&mut self, p: &HPlan, reg: &mut Registry, gemm: i64) {
        let a = AUTOGRAD;
        self.adv(3_000, 12_000);
        self.op(a, eval_name("LinearWithGradAccumulationAndAsyncCommunicationBackward"));
        self.op(a, "LinearWithGradAccumulationAndAsyncCommunicationBackward");
        self.kernel(a, "aten::matmul", model::DGRAD, gemm);
        let op = self.tp_all_reduce(p, reg, a, false);
        self.kernel(a, "aten::matmul", model::WGRAD, gemm);
        if let Some(op) = op {
            self.wait(a, op);
        }
        self.end(a);
        self.end(a);
    }

    /// An activation all_reduce on the tensor group (tp > 1); in forward the compute stream
    /// waits for it at once (`_ReduceFromModelParallelRegion`), in backward the caller waits.
    fn tp_all_reduce(&mut self, p: &HPlan, reg: &mut Registry, th: u8, wait_now: bool) -> Option<u32> {
        let g = p.lay.uses.get(self.rank as usize).map(|u| u.tensor).filter(|&g| g != usize::MAX)?;
        if p.h.tp < 2 {
            return None;
        }
        let bytes = p.costs.act_bytes;
        let spec = CommSpec {
            group: g,
            kind: CommKind::AllReduce,
            in_bytes: bytes,
            out_bytes: bytes,
            dtype: BF16,
            peer: NONE,
            splits: None,
            kernel: model::all_reduce_kernel(bytes, false),
            a2a_bytes: 0,
        };
        let op = self.comm(p, reg, th, spec);
        if wait_now {
            self.wait(th, op);
        }
        Some(op)
    }

    /// The attention of one layer: one flash kernel, or with cp > 1 a ring over the context
    /// group (cp − 1 exchanges of KV chunks with the ring neighbours, each overlapped with the
    /// attention of the chunk at hand), then the correction of the partial results.
    fn attention(&mut self, p: &HPlan, reg: &mut Registry, fwd: bool) {
        let c = &p.costs;
        let th = if fwd { MAIN } else { AUTOGRAD };
        let cp = p.h.cp;
        let chunk = |d: i64| d / i64::from(cp);
        let flash = |me: &mut RankRun, part: i64| {
            if fwd {
                me.kernel(th, "aten::_scaled_dot_product_flash_attention", model::FLASH_FWD, part);
            } else {
                me.bwd_op(
                    "ScaledDotProductFlashAttentionBackward0",
                    "aten::_flash_attention_backward",
                    &[
                        (model::FLASH_BWD_DOT, 20_000),
                        (model::FLASH_BWD, part * 5 / 2),
                        (model::FLASH_BWD_CONVERT, 15_000),
                    ],
                );
            }
        };
        let g = p.lay.uses.get(self.rank as usize).map_or(usize::MAX, |u| u.context);
        if cp < 2 || g == usize::MAX {
            flash(self, c.attn);
            return;
        }
        let next = p.lay.rank_of(self.c.tp, (self.c.cp + 1) % cp, self.c.dp, self.c.pp);
        let prev = p.lay.rank_of(self.c.tp, (self.c.cp + cp - 1) % cp, self.c.dp, self.c.pp);
        let bytes = if fwd { c.kv_bytes } else { 2 * c.kv_bytes };
        for i in 0..cp {
            let mut ops = Vec::new();
            if i + 1 < cp {
                // Even context ranks send first, odd ones receive first (two ranks share one
                // communicator for both directions).
                let first_send = self.c.cp % 2 == 0;
                for send in [first_send, !first_send] {
                    let peer = if send { next } else { prev };
                    ops.push(self.p2p(p, reg, th, g, send, peer, bytes));
                }
            }
            flash(self, chunk(c.attn));
            for op in ops {
                self.wait(th, op);
            }
        }
        self.kernel(th, "aten::add_", model::ATTN_CORRECT, c.add);
    }

    /// A mixture-of-experts MLP on the expert group: router, dispatch all_to_all (uneven splits),
    /// the experts' GEMMs for the rows received, combine all_to_all; backward in reverse.
    fn moe(&mut self, p: &HPlan, reg: &mut Registry, s: u32, mb: u32, l: u32, fwd: bool) {
        let Some(g) = p.lay.uses.get(self.rank as usize).map(|u| u.expert).filter(|&g| g != usize::MAX)
        else {
            return;
        };
        let rows = p.routing(g, s, mb, l);
        let me = p.lay.group(g).and_then(|x| x.local(self.rank)).unwrap_or(0) as usize;
        let sent: Vec<u64> = rows.get(me).cloned().unwrap_or_default();
        let got: Vec<u64> = rows.iter().map(|r| r.get(me).copied().unwrap_or(0)).collect();
        let received: u64 = got.iter().sum();
        let expert = p.costs.expert_ns(received);
        let th = if fwd { MAIN } else { AUTOGRAD };
        // Dispatch sends `sent` and receives `got`; combine the reverse. Backward runs the
        // combine's gradient (dispatch direction) first, then the dispatch's.
        let dirs: [(&[u64], &[u64]); 2] = [(&sent, &got), (&got, &sent)];
        if fwd {
            self.kernel(th, "aten::linear", model::ROUTER, 8_000 + p.costs.tokens as i64 / 64);
            self.kernel(th, "aten::topk", model::TOPK, 12_000);
            self.kernel(th, "aten::index_select", model::PERMUTE, p.costs.embed);
        } else {
            self.bwd_op("IndexBackward0", "aten::index_add_", &[(model::UNPERMUTE, p.costs.embed)]);
        }
        let (a_in, a_out) = dirs[0];
        self.all_to_all(p, reg, th, g, me, a_in, a_out);
        if fwd {
            self.kernel(th, "aten::linear", model::EXPERT_GEMM, expert / 2);
            self.kernel(
                th,
                "aten::gelu",
                model::GELU,
                p.costs.gelu * received as i64 / p.costs.expert_rows.max(1) as i64,
            );
            self.kernel(th, "aten::linear", model::EXPERT_GEMM, expert / 2);
        } else {
            self.bwd_op(
                "GroupedMlpBackward",
                "aten::mm",
                &[
                    (model::EXPERT_GEMM, expert),
                    (model::GELU_BWD, p.costs.gelu),
                    (model::EXPERT_GEMM, expert),
                ],
            );
        }
        let (b_in, b_out) = dirs[1];
        self.all_to_all(p, reg, th, g, me, b_in, b_out);
        if fwd {
            self.kernel(th, "aten::index_add_", model::UNPERMUTE, p.costs.embed);
        } else {
            self.bwd_op("TopkBackward0", "aten::index_select", &[(model::PERMUTE, p.costs.embed)]);
        }
    }

    /// `all_to_all_single` with split sizes `send` (rows to each member) and `recv` (rows from
    /// each), hidden-sized bf16 rows; the compute stream waits for it.
    #[allow(clippy::too_many_arguments)]
    fn all_to_all(
        &mut self,
        p: &HPlan,
        reg: &mut Registry,
        th: u8,
        g: usize,
        me: usize,
        send: &[u64],
        recv: &[u64],
    ) {
        let row = p.h.hidden * 2;
        let others = |v: &[u64]| v.iter().enumerate().filter(|(i, _)| *i != me).map(|(_, x)| x).sum::<u64>();
        let spec = CommSpec {
            group: g,
            kind: CommKind::AllToAllV,
            in_bytes: send.iter().sum::<u64>() * row,
            out_bytes: recv.iter().sum::<u64>() * row,
            dtype: BF16,
            peer: NONE,
            splits: Some((send.to_vec(), recv.to_vec())),
            kernel: model::SENDRECV,
            a2a_bytes: others(send).max(others(recv)) * row,
        };
        let op = self.comm(p, reg, th, spec);
        self.wait(th, op);
    }

    /// The next gradient bucket's reduce-scatter (or all_reduce) on the data(-context) group,
    /// unless there is no data parallelism.
    fn grad_bucket(&mut self, p: &HPlan, reg: &mut Registry, th: u8) {
        self.next_bucket += 1;
        let g = p.lay.uses.get(self.rank as usize).map_or(usize::MAX, |u| u.grad);
        if g == usize::MAX || p.h.dp * p.h.cp < 2 {
            return;
        }
        let bytes = p.params_of(self.c.pp) * 4 / u64::from(p.h.grad_buckets);
        let n = u64::from(p.h.dp * p.h.cp);
        let (kind, out_bytes, kernel) = match p.h.dp_collective {
            DpCollective::ReduceScatter => {
                (CommKind::ReduceScatter, bytes / n, model::reduce_scatter_kernel(bytes))
            }
            DpCollective::AllReduce => (CommKind::AllReduce, bytes, model::all_reduce_kernel(bytes, true)),
        };
        let spec = CommSpec {
            group: g,
            kind,
            in_bytes: bytes,
            out_bytes,
            dtype: F32,
            peer: NONE,
            splits: None,
            kernel,
            a2a_bytes: 0,
        };
        let op = self.comm(p, reg, th, spec);
        self.grad_ops.push(op);
    }

    /// `finalize_model_grads`: the buckets not yet issued, then the compute stream waits for
    /// every bucket's collective.
    fn grad_sync(&mut self, p: &HPlan, reg: &mut Registry) {
        self.adv(20_000, 60_000);
        while self.next_bucket < p.h.grad_buckets {
            self.grad_bucket(p, reg, MAIN);
        }
        for op in std::mem::take(&mut self.grad_ops) {
            self.wait(MAIN, op);
        }
    }

    /// The gradient norm: local squares, an all_reduce of one float on the model group (all
    /// stages of the tensor groups), and `.item()`, which blocks the CPU (it returns in the
    /// next phase).
    fn grad_norm(&mut self, p: &HPlan, reg: &mut Registry) {
        self.adv(15_000, 40_000);
        let shard = p.params_of(self.c.pp) / u64::from(p.h.dp * p.h.cp).max(1);
        self.kernel(MAIN, "aten::_foreach_norm", model::L2NORM, Costs::l2norm_ns(shard));
        let g = p.lay.uses.get(self.rank as usize).map_or(usize::MAX, |u| u.model);
        if p.lay.group(g).is_some_and(|x| x.ranks.len() > 1) {
            let spec = CommSpec {
                group: g,
                kind: CommKind::AllReduce,
                in_bytes: 4,
                out_bytes: 4,
                dtype: F32,
                peer: NONE,
                splits: None,
                kernel: model::all_reduce_kernel(4, true),
                a2a_bytes: 0,
            };
            let op = self.comm(p, reg, MAIN, spec);
            self.wait(MAIN, op);
        }
        self.op(MAIN, "aten::item");
        self.op(MAIN, "aten::_local_scalar_dense");
        self.memory(MAIN, 4, true, false);
        // Both ops close in [`RankRun::tail`], once the synchronization returned.
        self.sync(MAIN, false);
    }
}

fn eval_name(name: &'static str) -> &'static str {
    match name {
        "NllLossBackward0" => "autograd::engine::evaluate_function: NllLossBackward0",
        "LogSoftmaxBackward0" => "autograd::engine::evaluate_function: LogSoftmaxBackward0",
        "MmBackward0" => "autograd::engine::evaluate_function: MmBackward0",
        "NativeLayerNormBackward0" => "autograd::engine::evaluate_function: NativeLayerNormBackward0",
        "EmbeddingBackward0" => "autograd::engine::evaluate_function: EmbeddingBackward0",
        "GeluBackward0" => "autograd::engine::evaluate_function: GeluBackward0",
        "ScaledDotProductFlashAttentionBackward0" => {
            "autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward0"
        }
        "IndexBackward0" => "autograd::engine::evaluate_function: IndexBackward0",
        "TopkBackward0" => "autograd::engine::evaluate_function: TopkBackward0",
        "GroupedMlpBackward" => "autograd::engine::evaluate_function: GroupedMlpBackward",
        _ => "autograd::engine::evaluate_function: LinearWithGradAccumulationAndAsyncCommunicationBackward",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_f_one_b_is_megatrons() {
        // Last stage: no warm-up, strict 1F1B.
        let last = schedule(Schedule::OneFOneB, 4, 3, 4);
        assert_eq!(
            &last[..5],
            &[Act::RecvFwd, Act::Fwd(0), Act::SendFwdRecvBwd, Act::Bwd(0), Act::SendBwdRecvFwd]
        );
        // First stage: 3 warm-up forwards, then the steady state, then 3 cool-down backwards.
        let first = schedule(Schedule::OneFOneB, 4, 0, 4);
        let fwd: Vec<u32> =
            first.iter().filter_map(|a| if let Act::Fwd(i) = a { Some(*i) } else { None }).collect();
        let bwd: Vec<u32> =
            first.iter().filter_map(|a| if let Act::Bwd(i) = a { Some(*i) } else { None }).collect();
        assert_eq!(fwd, vec![0, 1, 2, 3]);
        assert_eq!(bwd, vec![0, 1, 2, 3]);
        assert_eq!(first.iter().position(|a| *a == Act::Bwd(0)), Some(12));
    }
}
