//! A pipeline rank's step on the CPU: the schedule's actions, their sends and receives, the
//! data-parallel all_reduce and the optimizer, with the GPU work left for [`super::place`].

use super::*;

impl RankSim {
    pub(super) fn ps(&mut self) -> Option<&mut PipeState> {
        self.pipe.as_deref_mut()
    }

    /// Gradient accumulation of one parameter in a pipeline stage (no DDP hook): the first
    /// micro-batch's gradient is stored, later ones are added.
    pub(crate) fn pp_accumulate_grad(&mut self, weight: bool) {
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
    pub(super) fn p2p(
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
    pub(super) fn wait_sends(&mut self, dir: usize, keep_last: bool) {
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
    pub(super) fn pp_action(&mut self, plan: &Plan, pp: &PipePlan, act: Action, step: u32) {
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
    pub(super) fn pp_dp_allreduce(&mut self, plan: &Plan, pp: &PipePlan, s: u32, pr: u32, _d: u32) {
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
        let bytes = pp.grad_bytes;
        let f = CollKind::AllReduce.core().busbw_factor(i64::from(pp.cfg.dp));
        let transfer =
            plan.cfg.collective_latency_ns + (f * bytes as f64 / plan.cfg.busbw_gbps).round() as i64;
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
    pub(super) fn pp_step_finish(&mut self, pp: &PipePlan) {
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
