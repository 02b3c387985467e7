//! The plan: everything derived from a (sanitized) configuration before simulating.

use std::io;

use crate::sim::{CollKind, JobSim, RankSim};
use crate::{generate, model, sim, HangKind, Rng, SynthConfig, BASE_TIME_NS, TRACE_START_NS};

/// Identity of a rank's process as its trace shows it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RankIds {
    pub pid: u64,
    pub main_tid: u64,
    pub autograd_tid: u64,
    pub device: u32,
}

const RNG_OFFSET: u64 = 2;
const RNG_IDS: u64 = 3;

/// Everything derived from a (sanitized) config before simulating.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub cfg: SynthConfig,
    pub steps: u32,
    pub layers: u32,
    pub points: u32,
    /// Per bucket, the gradient-ready point (0-based, in backward order) that completes it.
    pub bucket_ready_point: Vec<u32>,
    pub tail_buckets: u32,
    pub offsets: Vec<i64>,
    pub straggler: Option<u32>,
    pub straggler_extra_ppm: i64,
    pub jitter_ppm: i64,
    pub opt_kernels: u32,
    pub batch_bytes: u64,
    pub embedding_grad_bytes: u64,
    pub base_time_ns: i64,
    pub trace_start_ns: i64,
    /// Nominal compute (kernel) time of one step, and GPU kernels per step.
    pub nominal_compute_ns: i64,
    pub kernels_per_step: u32,
    /// Size of each DDP bucket, in issue order.
    pub bucket_sizes: Vec<u64>,
    /// The pipeline job's layout and groups (pipeline mode).
    pub pipe: Option<sim::pipe::PipePlan>,
    pg_ranks: String,
}

impl Plan {
    /// Plan for a sanitized config with a fixed number of steps.
    pub(crate) fn with_steps(cfg: &SynthConfig, steps: u32) -> Plan {
        let layers = model::layers_for(cfg.kernels_per_step);
        let points = model::grad_points(layers);
        let b = cfg.bucket_count;
        // Round half up, in integers: fraction → number of buckets ready only at the very end.
        let tail = ((cfg.exposed_comm_fraction * f64::from(b) + 0.5).floor() as u32).min(b);
        let spread = b - tail;
        // Non-tail buckets complete at evenly spaced gradient points before the last one (the
        // embedding's); tail buckets complete at the last point.
        let last = points - 1;
        let mut ready = Vec::with_capacity(b as usize);
        for j in 0..spread {
            let p = (u64::from(j) + 1) * u64::from(last) / u64::from(spread);
            ready.push(u32::try_from(p).unwrap_or(last).saturating_sub(1).min(last));
        }
        ready.extend(std::iter::repeat_n(last, tail as usize));

        let offsets = if cfg.clock_offsets_ns.is_empty() {
            (0..cfg.ranks)
                .map(|r| {
                    if r == 0 {
                        0
                    } else {
                        let m = cfg.clock_offset_max_ns;
                        Rng::derive(cfg.seed, r, RNG_OFFSET).range(-m, m)
                    }
                })
                .collect()
        } else {
            cfg.clock_offsets_ns.clone()
        };
        let mut plan = Plan {
            cfg: cfg.clone(),
            steps,
            layers,
            points,
            bucket_ready_point: ready,
            tail_buckets: tail,
            offsets,
            straggler: cfg.straggler_rank,
            straggler_extra_ppm: 0,
            jitter_ppm: (cfg.compute_jitter * 1e6).round() as i64,
            opt_kernels: points.div_ceil(8),
            batch_bytes: 8 * 4096 * 8,
            embedding_grad_bytes: 50_304 * 1024 * 4,
            base_time_ns: BASE_TIME_NS,
            trace_start_ns: TRACE_START_NS,
            nominal_compute_ns: 0,
            kernels_per_step: 0,
            bucket_sizes: if cfg.bucket_sizes.is_empty() {
                vec![cfg.bucket_bytes; cfg.bucket_count as usize]
            } else {
                cfg.bucket_sizes.clone()
            },
            pipe: cfg.pipeline.as_ref().map(|p| sim::pipe::PipePlan::new(p, cfg.ranks)),
            pg_ranks: String::new(),
        };
        let mut text = String::from("[");
        for r in 0..cfg.ranks {
            if r > 0 {
                text.push_str(", ");
            }
            text.push_str(&r.to_string());
        }
        text.push(']');
        plan.pg_ranks = text;
        if plan.pipe.is_some() {
            // A pipeline's ranks differ by stage; its truth is per stage (`Manifest::pipeline`).
            return plan;
        }
        // One dry step of one rank measures the step's nominal compute time; the straggler's
        // slowdown is sized from it so its compute grows by exactly `straggler_delay_ns`.
        let mut dry = JobSim::with_ranks(&plan, vec![RankSim::dry(&plan)], false);
        dry.step(0);
        let (nominal, kernels) = dry.ranks.first().map_or((1, 0), |r| (r.base_sum.max(1), r.kernels));
        plan.nominal_compute_ns = nominal;
        plan.kernels_per_step = kernels;
        plan.straggler_extra_ppm = cfg.straggler_delay_ns.saturating_mul(1_000_000) / nominal;
        plan
    }

    /// Plan of a sanitized config, resolving `target_bytes` into a step count by writing one
    /// and three steps of rank 0 into a byte counter.
    pub(crate) fn resolve(cfg: &SynthConfig) -> Plan {
        let Some(target) = cfg.target_bytes else {
            return Plan::with_steps(cfg, cfg.steps);
        };
        let size = |steps: u32| -> u64 {
            let plan = Plan::with_steps(cfg, steps);
            generate(&plan, vec![(0, io::sink())]).map_or(0, |v| v.first().map_or(0, |x| x.1))
        };
        let (b1, b3) = (size(1), size(3));
        let per_step = (b3.saturating_sub(b1) / 2).max(1);
        let fixed = b1.saturating_sub(per_step);
        let steps = (target.saturating_sub(fixed) + per_step / 2) / per_step;
        Plan::with_steps(cfg, u32::try_from(steps).unwrap_or(u32::MAX).max(1))
    }

    /// Duration of a collective of `bytes` once every rank has arrived: `α + f · S / busbw`
    /// with the bytes each rank moves, f the bus-bandwidth factor (the core's one table,
    /// `model::CollKind::busbw_factor`: 2(N−1)/N for a ring all_reduce, (N−1)/N for an
    /// all_to_all; busbw in GB/s is bytes per ns).
    pub(crate) fn transfer_ns(&self, kind: CollKind, bytes: u64) -> i64 {
        let f = kind.core().busbw_factor(i64::from(self.cfg.ranks));
        let moved = f * bytes as f64;
        self.cfg.collective_latency_ns + (moved / self.cfg.busbw_gbps).round() as i64
    }

    /// Bytes of DDP bucket `i` (issue order).
    pub(crate) fn bucket_size(&self, i: u32) -> u64 {
        self.bucket_sizes.get(i as usize).copied().unwrap_or(self.cfg.bucket_bytes)
    }

    /// Rank `rank`'s work relative to a normal rank, in ppm (`uneven_batch`).
    pub(crate) fn work_ppm(&self, rank: u32) -> i64 {
        match &self.cfg.uneven_batch {
            Some(u) if u.rank == rank => (u.factor * 1e6).round() as i64,
            _ => 1_000_000,
        }
    }

    /// Rank `rank`'s DataLoader time relative to a normal rank, in ppm (`slow_dataloader`).
    pub(crate) fn dataloader_ppm(&self, rank: u32) -> i64 {
        match &self.cfg.slow_dataloader {
            Some(d) if d.rank == rank => (d.factor * 1e6).round() as i64,
            _ => 1_000_000,
        }
    }

    /// Whether rank `rank` skips bucket all_reduce `bucket` of step `step` (`hang`).
    pub(crate) fn skips_bucket(&self, rank: u32, step: u32, bucket: u32) -> bool {
        self.cfg.hang.as_ref().is_some_and(|h| {
            h.kind == HangKind::SkippedCollective
                && h.rank == rank
                && h.step == step
                && bucket == h.bucket.unwrap_or(self.cfg.bucket_count.saturating_sub(1))
        })
    }

    /// Sequences in rank `rank`'s batch (the leading dimension of its activations).
    pub(crate) fn batch_of(&self, rank: u32) -> u64 {
        let ppm = self.work_ppm(rank);
        u64::try_from((8 * ppm + 500_000) / 1_000_000).unwrap_or(8).max(1)
    }

    pub(crate) fn pg_ranks_text(&self) -> &str {
        &self.pg_ranks
    }

    pub(crate) fn rank_ids(&self, rank: u32) -> RankIds {
        let mut rng = Rng::derive(self.cfg.seed, rank, RNG_IDS);
        let pid = 1_000 + rng.range(0, 3_999_000) as u64;
        RankIds {
            pid,
            main_tid: pid,
            autograd_tid: pid + 1 + rng.range(40, 9_000) as u64,
            device: rank % self.cfg.gpus_per_node,
        }
    }
}
