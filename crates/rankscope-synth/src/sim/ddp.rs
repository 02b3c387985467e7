//! The DDP step of one rank: input, forward, backward with DDP's gradient hooks and bucket
//! all_reduces, the optimizer, the loss all_reduce and the closing `.item()` sync.

use super::*;

impl RankSim {
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
        if let Some(b) = plan.cfg.burst.as_ref().filter(|b| b.rank == self.rank && b.step == s) {
            speed = (speed as f64 * b.factor).round() as i64;
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
    pub(super) fn input_batch(&mut self, plan: &Plan) {
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
    pub(super) fn after_layer(&mut self, plan: &Plan, l: u32) {
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

    pub(super) fn fwd_embedding(&mut self) {
        let m = Th::Main;
        self.site = Site::Embed;
        self.fwd_op("aten::embedding");
        self.leaf(m, "aten::reshape", 3_000, 9_000);
        self.op(m, "aten::index_select");
        self.launch(m, K_EMBED);
        self.end(m);
        self.end(m);
    }

    pub(super) fn fwd_layer_norm(&mut self) {
        let m = Th::Main;
        self.site = Site::Norm;
        self.fwd_op("aten::layer_norm");
        self.op(m, "aten::native_layer_norm");
        self.leaf(m, "aten::empty", 2_000, 6_000);
        self.launch(m, K_LN_FWD);
        self.end(m);
        self.end(m);
    }

    pub(super) fn fwd_linear(&mut self, k: KernelId, permille: i64, churn: bool) {
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

    pub(super) fn fwd_simple(&mut self, name: &'static str, k: KernelId) {
        self.fwd_op(name);
        self.launch(Th::Main, k);
        self.end(Th::Main);
    }

    pub(super) fn fwd_layer(&mut self, churn: bool) {
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

    pub(super) fn fwd_lm_head(&mut self) {
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

    pub(super) fn fwd_loss(&mut self) {
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

    pub(super) fn bwd_addmm(&mut self, site: Site, permille: i64) {
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

    pub(super) fn bwd_layer_norm(&mut self, plan: &Plan) {
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

    pub(super) fn bwd_add(&mut self) {
        self.site = Site::Resid;
        self.bwd_begin("autograd::engine::evaluate_function: AddBackward0", "AddBackward0");
        self.adv(Th::Autograd, 1_000, 4_000);
        self.bwd_end();
    }

    /// DDP's hook on a parameter's gradient: scale it into its bucket; when the bucket is full,
    /// launch its all_reduce.
    pub(super) fn accumulate_grad(&mut self, plan: &Plan, weight: bool) {
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
    pub(super) fn bwd_loss(&mut self) {
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
    pub(super) fn bwd_layer(&mut self, plan: &Plan) {
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

    pub(super) fn backward(&mut self, plan: &Plan) {
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
    pub(super) fn bwd_embedding(&mut self, plan: &Plan) {
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
    pub(super) fn bucket_allreduce(&mut self, plan: &Plan, th: Th) {
        let b = self.next_bucket;
        self.next_bucket += 1;
        if !self.dry && plan.skips_bucket(self.rank, self.step_idx, b) {
            return;
        }
        self.collective(th, 0, plan.bucket_size(b), CollKind::AllReduce);
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
    pub(super) fn finish_stats(&mut self, until: i64) {
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
