//! Checking a [`SynthConfig`]: every out-of-range value brought into range with a note
//! ([`SynthConfig::sanitized`]), or every problem listed ([`SynthConfig::validate`]).

use crate::{HangKind, HostStall, Schedule, SynthConfig, SynthError};

impl SynthConfig {
    /// Every problem with this configuration, or `Ok`.
    pub fn validate(&self) -> Result<(), SynthError> {
        let problems = self.sanitized().1;
        if problems.is_empty() {
            Ok(())
        } else {
            Err(SynthError::InvalidConfig(problems.join("; ")))
        }
    }

    /// The same total gradient bytes in 1 MiB buckets (at least as many buckets as before): many
    /// small, latency-bound all_reduces, the "too small buckets" pattern.
    pub fn with_small_buckets(mut self) -> Self {
        let total = self.bucket_bytes.saturating_mul(u64::from(self.bucket_count));
        self.bucket_bytes = 1 << 20;
        self.bucket_count =
            u32::try_from(total.div_ceil(1 << 20)).unwrap_or(u32::MAX).clamp(self.bucket_count, 4096);
        self
    }

    /// This config with every out-of-range value brought into range, and a note per change.
    pub fn sanitized(&self) -> (SynthConfig, Vec<String>) {
        let mut c = self.clone();
        let mut notes = Vec::new();
        let mut fix = |ok: bool, note: String| {
            if !ok {
                notes.push(note);
            }
        };
        fix((1..=4096).contains(&c.ranks), format!("ranks {} not in 1..=4096", c.ranks));
        c.ranks = c.ranks.clamp(1, 4096);
        fix((1..=64).contains(&c.gpus_per_node), format!("gpus_per_node {} not in 1..=64", c.gpus_per_node));
        c.gpus_per_node = c.gpus_per_node.clamp(1, 64);
        fix(c.steps >= 1, "steps must be at least 1".into());
        c.steps = c.steps.max(1);
        fix(
            (1..=1_000_000).contains(&c.kernels_per_step),
            format!("kernels_per_step {} not in 1..=1000000", c.kernels_per_step),
        );
        c.kernels_per_step = c.kernels_per_step.clamp(1, 1_000_000);
        fix(
            (1..=65_536).contains(&c.bucket_count),
            format!("bucket_count {} not in 1..=65536", c.bucket_count),
        );
        c.bucket_count = c.bucket_count.clamp(1, 65_536);
        fix(
            (4..=1 << 40).contains(&c.bucket_bytes),
            format!("bucket_bytes {} not in 4..=2^40", c.bucket_bytes),
        );
        c.bucket_bytes = c.bucket_bytes.clamp(4, 1 << 40);
        let f = c.exposed_comm_fraction;
        fix((0.0..=1.0).contains(&f), format!("exposed_comm_fraction {f} not in 0..=1"));
        c.exposed_comm_fraction = if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
        let bw = c.busbw_gbps;
        fix(bw.is_finite() && bw >= 0.001, format!("busbw_gbps {bw} must be a positive number"));
        if !(bw.is_finite() && bw >= 0.001) {
            c.busbw_gbps = 80.0;
        }
        fix(
            (0..=1_000_000_000).contains(&c.collective_latency_ns),
            format!("collective_latency_ns {} not in 0..=1e9", c.collective_latency_ns),
        );
        c.collective_latency_ns = c.collective_latency_ns.clamp(0, 1_000_000_000);
        if let Some(s) = c.straggler_rank {
            fix(s < c.ranks, format!("straggler_rank {s} is not a rank (ranks = {})", c.ranks));
            if s >= c.ranks {
                c.straggler_rank = None;
            }
        }
        fix(
            (0..=10_000_000_000).contains(&c.straggler_delay_ns),
            format!("straggler_delay_ns {} not in 0..=1e10", c.straggler_delay_ns),
        );
        c.straggler_delay_ns = c.straggler_delay_ns.clamp(0, 10_000_000_000);
        let j = c.compute_jitter;
        fix((0.0..=0.5).contains(&j), format!("compute_jitter {j} not in 0..=0.5"));
        c.compute_jitter = if j.is_nan() { 0.0 } else { j.clamp(0.0, 0.5) };
        if !c.clock_offsets_ns.is_empty() {
            let n = c.clock_offsets_ns.len();
            fix(n == c.ranks as usize, format!("clock_offsets_ns has {n} entries for {} ranks", c.ranks));
            c.clock_offsets_ns.resize(c.ranks as usize, 0);
            let bad = c.clock_offsets_ns.iter().any(|o| o.abs() > 1_000_000_000_000);
            fix(!bad, "clock offsets must be within ±1000 s".into());
            for o in &mut c.clock_offsets_ns {
                *o = (*o).clamp(-1_000_000_000_000, 1_000_000_000_000);
            }
        }
        fix(
            (0..=1_000_000_000_000).contains(&c.clock_offset_max_ns),
            format!("clock_offset_max_ns {} not in 0..=1e12", c.clock_offset_max_ns),
        );
        c.clock_offset_max_ns = c.clock_offset_max_ns.clamp(0, 1_000_000_000_000);
        if let Some(t) = c.target_bytes {
            fix(t >= 4096, format!("target_bytes {t} is below 4096"));
            c.target_bytes = Some(t.max(4096));
        }
        c.sanitize_scenario_knobs(&mut fix);
        (c, notes)
    }

    /// The scenario knobs' part of [`SynthConfig::sanitized`].
    fn sanitize_scenario_knobs(&mut self, fix: &mut impl FnMut(bool, String)) {
        if self.sanitize_hybrid(fix) {
            return;
        }
        self.sanitize_pipeline(fix);
        let ranks = self.ranks;
        let rank_ok = |what: &str, r: u32, fix: &mut dyn FnMut(bool, String)| {
            fix(r < ranks, format!("{what} {r} is not a rank (ranks = {ranks})"));
            r < ranks
        };
        if !self.bucket_sizes.is_empty() {
            let n = self.bucket_sizes.len();
            fix(n <= 65_536, format!("bucket_sizes has {n} entries (at most 65536)"));
            self.bucket_sizes.truncate(65_536);
            let bad = self.bucket_sizes.iter().any(|b| !(4..=1 << 40).contains(b));
            fix(!bad, "bucket_sizes must each be in 4..=2^40".into());
            for b in &mut self.bucket_sizes {
                *b = (*b).clamp(4, 1 << 40);
            }
            self.bucket_count = u32::try_from(self.bucket_sizes.len()).unwrap_or(65_536);
        }
        if let Some(d) = self.dataloader_ns {
            fix((0..=10_000_000_000).contains(&d), format!("dataloader_ns {d} not in 0..=1e10"));
            self.dataloader_ns = Some(d.clamp(0, 10_000_000_000));
        }
        for (what, knob) in
            [("slow_dataloader", &mut self.slow_dataloader), ("uneven_batch", &mut self.uneven_batch)]
        {
            if let Some(k) = knob {
                let f = k.factor;
                fix(f.is_finite() && (0.1..=16.0).contains(&f), format!("{what}.factor {f} not in 0.1..=16"));
                k.factor = if f.is_finite() { f.clamp(0.1, 16.0) } else { 1.0 };
                if !rank_ok(&format!("{what}.rank"), k.rank, fix) {
                    *knob = None;
                }
            }
        }
        if let Some(b) = &mut self.burst {
            let f = b.factor;
            fix(f.is_finite() && (1.0..=16.0).contains(&f), format!("burst.factor {f} not in 1..=16"));
            b.factor = if f.is_finite() { f.clamp(1.0, 16.0) } else { 1.0 };
            fix(b.step < self.steps.max(1), format!("burst.step {} not below steps {}", b.step, self.steps));
            b.step = b.step.min(self.steps.saturating_sub(1));
            if !rank_ok("burst.rank", b.rank, fix) {
                self.burst = None;
            }
        }
        if let Some(h) = &mut self.host_stall {
            fix((0..=100_000_000_000).contains(&h.ns), format!("host_stall.ns {} not in 0..=1e11", h.ns));
            h.ns = h.ns.clamp(0, 100_000_000_000);
            let name_ok =
                !h.name.is_empty() && h.name.chars().all(|ch| !ch.is_control() && ch != '"' && ch != '\\');
            fix(name_ok, format!("host_stall.name {:?} must be non-empty, without quotes, backslashes or control characters", h.name));
            if !name_ok {
                h.name = HostStall::default().name;
            }
            if !rank_ok("host_stall.rank", h.rank, fix) {
                self.host_stall = None;
            }
        }
        if let Some(h) = &mut self.host_sync {
            let n = h.syncs_per_step;
            fix((1..=64).contains(&n), format!("host_sync.syncs_per_step {n} not in 1..=64"));
            h.syncs_per_step = n.clamp(1, 64);
            let w = h.host_work_ns;
            fix((0..=10_000_000_000).contains(&w), format!("host_sync.host_work_ns {w} not in 0..=1e10"));
            h.host_work_ns = w.clamp(0, 10_000_000_000);
        }
        if let Some(a) = &mut self.all_to_all {
            fix((4..=1 << 36).contains(&a.bytes), format!("all_to_all.bytes {} not in 4..=2^36", a.bytes));
            a.bytes = a.bytes.clamp(4, 1 << 36);
        }
        if let Some(h) = &mut self.hang {
            let t = h.timeout_ns;
            fix(
                (1_000_000..=10_000_000_000_000).contains(&t),
                format!("hang.timeout_ns {t} not in 1e6..=1e13"),
            );
            h.timeout_ns = t.clamp(1_000_000, 10_000_000_000_000);
            fix(ranks >= 2, "hang needs at least 2 ranks".into());
            let steps = self.steps;
            let last = if h.kind == HangKind::EarlyExit { steps.saturating_sub(1) } else { steps };
            fix(h.step < last, format!("hang.step {} must be below {last} (steps = {steps})", h.step));
            h.step = h.step.min(last.saturating_sub(1));
            if let Some(b) = h.bucket {
                let n = self.bucket_count;
                fix(b < n, format!("hang.bucket {b} is not a bucket (bucket_count = {n})"));
                h.bucket = Some(b.min(n.saturating_sub(1)));
            }
            if h.kind == HangKind::SkippedCollective && !self.loss_allreduce {
                fix(false, "hang skipped_collective needs loss_allreduce (the skipping rank's next collective); enabled".into());
                self.loss_allreduce = true;
            }
            if ranks < 2 || !rank_ok("hang.rank", h.rank, fix) {
                self.hang = None;
            }
        }
    }

    /// A pipeline job's knobs, and the DDP-only knobs it cannot have.
    fn sanitize_pipeline(&mut self, fix: &mut impl FnMut(bool, String)) {
        let ranks = self.ranks;
        if let Some(p) = &mut self.pipeline {
            fix((2..=64).contains(&p.stages), format!("pipeline.stages {} not in 2..=64", p.stages));
            p.stages = p.stages.clamp(2, 64);
            fix((1..=64).contains(&p.dp), format!("pipeline.dp {} not in 1..=64", p.dp));
            p.dp = p.dp.clamp(1, 64);
            fix(
                (1..=1024).contains(&p.micro_batches),
                format!("pipeline.micro_batches {} not in 1..=1024", p.micro_batches),
            );
            p.micro_batches = p.micro_batches.clamp(1, 1024);
            let interleaved = p.schedule == Schedule::Interleaved1F1B;
            let v_ok = if interleaved { (1..=8).contains(&p.virtual_stages) } else { p.virtual_stages == 1 };
            fix(
                v_ok,
                format!("pipeline.virtual_stages {} (1 unless interleaved; at most 8)", p.virtual_stages),
            );
            p.virtual_stages = if interleaved { p.virtual_stages.clamp(1, 8) } else { 1 };
            if p.schedule != Schedule::GPipe {
                // torch.distributed.pipelining: 1F1B needs m ≥ p; interleaved needs m to be a
                // multiple of its rounds, max(1, m / p).
                let rounds = (p.micro_batches / p.stages).max(1);
                let ok = p.micro_batches >= p.stages && p.micro_batches % rounds == 0;
                fix(
                    ok,
                    format!(
                        "pipeline.micro_batches {} must be ≥ stages and a multiple of m / p",
                        p.micro_batches
                    ),
                );
                if !ok {
                    p.micro_batches = p.stages * rounds;
                }
            }
            let l = p.layers_per_stage;
            let l_ok = (1..=64).contains(&l) && l % p.virtual_stages == 0;
            fix(
                l_ok,
                format!("pipeline.layers_per_stage {l} must be 1..=64 and a multiple of virtual_stages"),
            );
            if !l_ok {
                p.layers_per_stage = p.virtual_stages * (l / p.virtual_stages).clamp(1, 8);
            }
            let a = p.activation_bytes;
            fix((2..=1 << 36).contains(&a), format!("pipeline.activation_bytes {a} not in 2..=2^36"));
            p.activation_bytes = a.clamp(2, 1 << 36);
            let bw = p.p2p_gbps;
            fix(bw.is_finite() && bw >= 0.001, format!("pipeline.p2p_gbps {bw} must be a positive number"));
            if !(bw.is_finite() && bw >= 0.001) {
                p.p2p_gbps = 150.0;
            }
            if let Some(s) = p.slow_stage {
                fix(s < p.stages, format!("pipeline.slow_stage {s} is not a stage (stages = {})", p.stages));
                if s >= p.stages {
                    p.slow_stage = None;
                }
            }
            let f = p.slow_factor;
            fix(
                f.is_finite() && (0.1..=16.0).contains(&f),
                format!("pipeline.slow_factor {f} not in 0.1..=16"),
            );
            p.slow_factor = if f.is_finite() { f.clamp(0.1, 16.0) } else { 1.0 };
            let world = p.stages * p.dp;
            fix(ranks == world, format!("ranks {ranks} is not pipeline.stages × pipeline.dp = {world}"));
            self.ranks = world;
            if !self.clock_offsets_ns.is_empty() {
                self.clock_offsets_ns.resize(world as usize, 0);
            }
            // DDP-only knobs have no meaning for a pipeline job.
            let ddp_only = [
                ("straggler_rank", self.straggler_rank.is_some()),
                ("host_stall", self.host_stall.is_some()),
                ("slow_dataloader", self.slow_dataloader.is_some()),
                ("uneven_batch", self.uneven_batch.is_some()),
                ("host_sync", self.host_sync.is_some()),
                ("all_to_all", self.all_to_all.is_some()),
                ("hang", self.hang.is_some()),
                ("malloc_churn", self.malloc_churn),
                ("loss_allreduce", self.loss_allreduce),
            ];
            for (name, set) in ddp_only {
                fix(!set, format!("{name} does not apply to a pipeline job; ignored"));
            }
            self.straggler_rank = None;
            self.host_stall = None;
            self.slow_dataloader = None;
            self.uneven_batch = None;
            self.host_sync = None;
            self.all_to_all = None;
            self.hang = None;
            self.malloc_churn = false;
            self.loss_allreduce = false;
        }
    }

    /// A hybrid job's knobs (`Hybrid::sanitize`); the DDP and pipeline knobs it cannot have are
    /// reset, with a note when one was set away from its default. False without `hybrid`.
    fn sanitize_hybrid(&mut self, fix: &mut impl FnMut(bool, String)) -> bool {
        let Some(mut h) = self.hybrid.take() else { return false };
        h.sanitize(self.gpus_per_node, fix);
        let world = u32::try_from(h.world()).unwrap_or(4096);
        let d = SynthConfig::default();
        fix(
            self.ranks == world || self.ranks == d.ranks,
            format!("ranks {} is not the layout's world size tp·cp·dp·pp = {world}", self.ranks),
        );
        self.ranks = world;
        // The DDP demo's straggler and loss all_reduce are on by default: off or default is fine.
        let ignored = [
            ("pipeline", self.pipeline.is_some()),
            ("straggler_rank", self.straggler_rank.is_some() && self.straggler_rank != d.straggler_rank),
            ("host_stall (use hybrid.cause)", self.host_stall.is_some()),
            ("slow_dataloader", self.slow_dataloader.is_some()),
            ("uneven_batch", self.uneven_batch.is_some()),
            ("host_sync", self.host_sync.is_some()),
            ("all_to_all", self.all_to_all.is_some()),
            ("hang", self.hang.is_some()),
            ("malloc_churn", self.malloc_churn),
            ("bucket_sizes", !self.bucket_sizes.is_empty()),
            ("dataloader_ns", self.dataloader_ns.is_some()),
            (
                "clock_offsets_ns (hosts have the clocks: hybrid.host_clock_max_ns)",
                !self.clock_offsets_ns.is_empty(),
            ),
            ("target_bytes", self.target_bytes.is_some()),
            ("record_shapes", self.record_shapes),
        ];
        for (name, set) in ignored {
            fix(!set, format!("{name} does not apply to a hybrid job; ignored"));
        }
        self.pipeline = None;
        self.straggler_rank = None;
        self.host_stall = None;
        self.slow_dataloader = None;
        self.uneven_batch = None;
        self.host_sync = None;
        self.all_to_all = None;
        self.hang = None;
        self.malloc_churn = false;
        self.loss_allreduce = false;
        self.bucket_sizes.clear();
        self.dataloader_ns = None;
        self.clock_offsets_ns.clear();
        self.target_bytes = None;
        self.record_shapes = false;
        self.hybrid = Some(h);
        true
    }
}
