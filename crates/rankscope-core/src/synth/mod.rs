//! Deterministic generator of realistic Kineto-like multi-rank training traces
//! (`rankscope synth`).
//!
//! It simulates a data-parallel (DDP) job training a GPT-style decoder on H100s and writes, per
//! rank, the Chrome-trace JSON document the PyTorch profiler (Kineto) would have written:
//! `schemaVersion`, `deviceProperties`, `distributedInfo` (with `pg_config`), `traceEvents`,
//! `traceName`, `displayTimeUnit`, `baseTimeNanoseconds`, in Kineto's own text layout and event
//! order (all CPU ops of the autograd thread, then of the main thread, then CUDA runtime calls and
//! GPU activities, then metadata). Uses: the ingest benchmark, the app's demo, and ground truth
//! for the analyses (clock alignment, stragglers, small buckets, exposed communication).
//!
//! What a step contains, per rank: `ProfilerStep#N`; the DataLoader's `__next__` and a pinned
//! host-to-device copy; `Optimizer.zero_grad`; `## forward ##` > `DistributedDataParallel.forward`
//! with `aten::*` ops launching kernels on stream 7; `## backward ##` while the autograd thread
//! runs `autograd::engine::evaluate_function: XBackward0` ops (linked to their forward ops by
//! `fwdbwd` flows and `Sequence number`) and DDP's gradient hooks, which launch one all_reduce per
//! bucket (`c10d::allreduce_` > `record_param_comms` > `nccl:all_reduce` > `cudaLaunchKernelExC`
//! of `ncclDevKernel_AllReduce_Sum_f32_RING_LL` on NCCL stream 40, with collective args and
//! per-process-group `Seq`); `Optimizer.step#AdamW.step` (fused AdamW kernels, after the compute
//! stream waited for the last bucket); an all_reduce of the loss on a second process group
//! (stream 48); `aten::item` with a device-to-host copy and a `cudaStreamSynchronize`. Every
//! launch has an `ac2g` flow pair (`s` at the runtime call, `f` with `bp: "e"` at the GPU event,
//! `id` = correlation). `gpu_user_annotation` `ProfilerStep#N` marks the step on the GPU.
//!
//! **Collectives rendezvous**: a rank's NCCL kernel starts when the rank arrives and ends when the
//! last rank has arrived plus the transfer time (`α + 2(N−1)/N · S / busbw`), within 2.5 µs on all
//! ranks; so starts spread by arrival while ends agree, as in real multi-rank traces.
//!
//! **Clocks**: all ranks are simulated on one true clock; rank r's file shows true time plus
//! its clock offset (`clock_offset_ns` in the [`Manifest`]). Timestamps are µs with three decimals
//! relative to `baseTimeNanoseconds` (absolute ns = base + ts·1000).
//!
//! **Determinism**: one splitmix64 stream per (rank, purpose), integer arithmetic only, no hash
//! maps: the same [`SynthConfig`] gives the same bytes on every platform, whichever ranks are
//! written and in which order.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

mod emit;
mod model;
mod rng;
mod sim;

use rng::Rng;
use sim::{Class, JobSim, RankSim};

/// Version of the [`Manifest`] format (bump on any incompatible change).
pub const MANIFEST_VERSION: u32 = 1;

/// `baseTimeNanoseconds` of every generated file (whole seconds, as Kineto writes it).
pub const BASE_TIME_NS: i64 = 1_716_400_000_000_000_000;

/// True time (ns after [`BASE_TIME_NS`]) at which the profiler starts recording.
const TRACE_START_NS: i64 = 4_512_093_771_204_113;

/// Knobs of the synthetic job. [`Default`] is the app's demo: 8 ranks, a straggler, partly
/// exposed gradient communication and host clocks that disagree by hundreds of µs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SynthConfig {
    /// Data-parallel world size: processes (one GPU each), and so trace files.
    pub ranks: u32,
    /// GPUs per host; rank r drives local device `r % gpus_per_node`, and every file lists that
    /// many devices in `deviceProperties`.
    pub gpus_per_node: u32,
    /// Profiled training steps per rank (replaced by a computed count when `target_bytes` is set).
    pub steps: u32,
    /// Number of the first profiled step (`ProfilerStep#N`); profilers start after warm-up steps.
    pub first_step: u32,
    /// Seed of every random choice (timings, pids, clock offsets). Same seed → same bytes.
    pub seed: u64,
    /// Approximate GPU kernels per step; sets the model depth (about 43 kernels per transformer
    /// layer: forward, backward, DDP gradient hooks and optimizer) and so the events per step.
    pub kernels_per_step: u32,
    /// DDP gradient buckets per step; each becomes one all_reduce launched during backward.
    pub bucket_count: u32,
    /// Bytes of each bucket (DDP `bucket_cap_mb`; PyTorch's default is 25 MiB). Small buckets
    /// mean many small, latency-bound all_reduces.
    pub bucket_bytes: u64,
    /// Fraction (0–1) of the buckets whose gradients are ready only when backward ends (in an
    /// LLM: the token embedding's gradient), so their all_reduce cannot overlap compute. Roughly
    /// the fraction of communication time that is exposed, before any waiting for stragglers.
    pub exposed_comm_fraction: f64,
    /// All_reduce bus bandwidth in GB/s (busbw, as nccl-tests reports it).
    pub busbw_gbps: f64,
    /// Fixed cost α of each collective in ns (launch and latency; tens of µs in practice).
    pub collective_latency_ns: i64,
    /// The rank whose GPU is slower (thermal throttling, a noisy neighbour): it arrives last at
    /// every collective and the others wait for it inside theirs. `None`: no straggler.
    pub straggler_rank: Option<u32>,
    /// Extra GPU compute time per step on the straggler, in ns (its kernels are slowed in
    /// proportion so the step's compute grows by this much).
    pub straggler_delay_ns: i64,
    /// Step-to-step variation of each rank's GPU speed: ± this fraction (0.015 = ±1.5 %).
    pub compute_jitter: f64,
    /// Explicit host clock offset of each rank in ns (true time + offset = the rank's timestamps).
    /// Empty: drawn from `seed`, uniformly in ±`clock_offset_max_ns`, rank 0 exactly 0.
    pub clock_offsets_ns: Vec<i64>,
    /// Bound of the drawn clock offsets (ns); 0 gives every rank the same clock.
    pub clock_offset_max_ns: i64,
    /// Add 1–2 caching-allocator bursts per step in forward: a `cudaFree` that synchronizes the
    /// device, then a slow `cudaMalloc` (the fragmentation symptom; the GPU starves meanwhile).
    pub malloc_churn: bool,
    /// All_reduce the loss on a second process group after the optimizer (a common logging
    /// pattern; a tiny, latency-bound collective that also waits for the straggler).
    pub loss_allreduce: bool,
    /// Keep adding steps until one rank's file is about this many bytes (overrides `steps`).
    pub target_bytes: Option<u64>,
}

impl Default for SynthConfig {
    fn default() -> Self {
        SynthConfig {
            ranks: 8,
            gpus_per_node: 8,
            steps: 6,
            first_step: 10,
            seed: 42,
            kernels_per_step: 300,
            bucket_count: 8,
            bucket_bytes: 25 << 20,
            exposed_comm_fraction: 0.25,
            busbw_gbps: 80.0,
            collective_latency_ns: 25_000,
            straggler_rank: Some(5),
            straggler_delay_ns: 6_000_000,
            compute_jitter: 0.015,
            clock_offsets_ns: Vec::new(),
            clock_offset_max_ns: 900_000,
            malloc_churn: false,
            loss_allreduce: true,
            target_bytes: None,
        }
    }
}

/// A configuration the generator cannot honour.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SynthError {
    #[error("invalid synth config: {0}")]
    InvalidConfig(String),
}

impl From<SynthError> for io::Error {
    fn from(e: SynthError) -> Self {
        io::Error::new(io::ErrorKind::InvalidInput, e)
    }
}

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
        (c, notes)
    }
}

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
    pg_ranks: String,
}

impl Plan {
    /// Plan for a sanitized config with a fixed number of steps.
    fn with_steps(cfg: &SynthConfig, steps: u32) -> Plan {
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
        // One dry step of one rank measures the step's nominal compute time; the straggler's
        // slowdown is sized from it so its compute grows by exactly `straggler_delay_ns`.
        let mut dry = JobSim::with_ranks(&plan, vec![RankSim::new(&plan, 0)], false);
        dry.step(0);
        let (nominal, kernels) = dry.ranks.first().map_or((1, 0), |r| (r.base_sum.max(1), r.kernels));
        plan.nominal_compute_ns = nominal;
        plan.kernels_per_step = kernels;
        plan.straggler_extra_ppm = cfg.straggler_delay_ns.saturating_mul(1_000_000) / nominal;
        plan
    }

    fn new(cfg: &SynthConfig) -> Result<Plan, SynthError> {
        cfg.validate()?;
        Ok(Self::resolve(cfg))
    }

    /// Plan of a sanitized config, resolving `target_bytes` into a step count by writing one
    /// and three steps of rank 0 into a byte counter.
    fn resolve(cfg: &SynthConfig) -> Plan {
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

    /// Duration of an all_reduce of `bytes` once every rank has arrived: `α + 2(N−1)/N · S / busbw`
    /// (ring all_reduce moves 2(N−1)/N of the buffer per rank; busbw in GB/s is bytes per ns).
    pub(crate) fn transfer_ns(&self, bytes: u64) -> i64 {
        let n = f64::from(self.cfg.ranks);
        let moved = 2.0 * (n - 1.0) / n * bytes as f64;
        self.cfg.collective_latency_ns + (moved / self.cfg.busbw_gbps).round() as i64
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

/// Simulates the job three times (one pass per event class, to reproduce Kineto's event order)
/// and writes the listed ranks' documents. Returns each writer with the bytes written to it.
fn generate<W: Write>(plan: &Plan, outs: Vec<(u32, W)>) -> io::Result<Vec<(W, u64)>> {
    let fmts: Vec<emit::RankFmt> = outs.iter().map(|(r, _)| emit::RankFmt::new(plan, *r)).collect();
    let mut outs: Vec<(u32, emit::Out<W>)> = outs.into_iter().map(|(r, w)| (r, emit::Out::new(w))).collect();
    for ((_, o), f) in outs.iter_mut().zip(&fmts) {
        emit::header(o, plan, f);
    }
    for class in [Class::Autograd, Class::Main, Class::Activity] {
        let mut job = JobSim::new(plan, false);
        for s in 0..plan.steps {
            job.step(s);
            let step_no = plan.cfg.first_step.saturating_add(s);
            for ((r, o), f) in outs.iter_mut().zip(&fmts) {
                if let Some(rs) = job.ranks.get(*r as usize) {
                    emit::step(o, plan, f, rs, class, step_no);
                }
                o.flush_if_big()?;
            }
        }
        if class == Class::Activity {
            for ((r, o), f) in outs.iter_mut().zip(&fmts) {
                if let Some(rs) = job.ranks.get(*r as usize) {
                    emit::trailer(o, plan, f, rs);
                }
            }
        }
    }
    outs.into_iter().map(|(_, o)| o.finish()).collect()
}

/// Writes rank `rank`'s trace document to `out`, streaming (memory stays bounded by one step of
/// every rank). Returns the bytes written. Simulates every rank (collectives need them all); to
/// write many ranks use [`write_ranks`], which simulates once for all.
pub fn write_rank<W: Write>(cfg: &SynthConfig, rank: u32, out: W) -> io::Result<u64> {
    let plan = Plan::new(cfg)?;
    if rank >= plan.cfg.ranks {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("rank {rank} is not in the job (ranks = {})", plan.cfg.ranks),
        ));
    }
    let mut done = generate(&plan, vec![(rank, out)])?;
    Ok(done.pop().map_or(0, |(_, n)| n))
}

/// Writes every rank's document in one pass: `outs[r]` receives rank r (`outs.len()` must equal
/// `cfg.ranks`). Returns each writer (so it can be finished, e.g. a gzip encoder) with its byte count.
pub fn write_ranks<W: Write>(cfg: &SynthConfig, outs: Vec<W>) -> io::Result<Vec<(W, u64)>> {
    let plan = Plan::new(cfg)?;
    if outs.len() != plan.cfg.ranks as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} writers for {} ranks", outs.len(), plan.cfg.ranks),
        ));
    }
    let outs = (0..plan.cfg.ranks).zip(outs).collect();
    generate(&plan, outs)
}

/// The number of steps each rank's file holds (resolves `target_bytes`).
pub fn resolved_steps(cfg: &SynthConfig) -> u32 {
    Plan::resolve(&cfg.sanitized().0).steps
}

/// The conventional file name of rank `rank`'s trace.
pub fn file_name(rank: u32, gzip: bool) -> String {
    if gzip {
        format!("rank{rank}.pt.trace.json.gz")
    } else {
        format!("rank{rank}.pt.trace.json")
    }
}

/// Ground truth of a generated job: what the analyses should find.
///
/// Times are ns of the shared true clock after `base_time_ns`; rank r's trace shows
/// `true + clock_offset_ns[r]` (as µs). Definitions:
/// - `compute_busy_ns`: time the compute stream (7) runs anything (kernels, memcpy, memset).
/// - `comm_busy_ns`: union of the rank's NCCL kernel intervals.
/// - `exposed_comm_ns`: NCCL kernel time during which the compute stream runs nothing, i.e.
///   `|NCCL busy \ compute busy|` within the step. It includes waiting for a late rank at the end
///   of backward, which a trace cannot tell apart from transfer.
/// - `comm_wait_ns`: Σ over the step's collectives of (latest arrival of any rank − own arrival):
///   time this rank's NCCL kernels spent waiting for others.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    pub manifest_version: u32,
    pub generator: String,
    /// The effective (sanitized) configuration.
    pub config: SynthConfig,
    /// What sanitizing changed (empty for a valid config).
    pub adjustments: Vec<String>,
    pub base_time_ns: i64,
    pub steps: u32,
    /// `ProfilerStep#N` numbers, in order.
    pub step_numbers: Vec<u32>,
    pub layers: u32,
    /// Parameters whose gradients DDP buckets (gradient-ready points per backward).
    pub grad_tensors: u32,
    /// GPU kernels (compute and NCCL) per step and rank.
    pub kernels_per_step: u32,
    /// Collectives per step and rank (bucket all_reduces plus the loss all_reduce).
    pub collectives_per_step: u32,
    /// Size of each DDP bucket all_reduce, in issue order.
    pub bucket_bytes: Vec<u64>,
    /// Duration of each bucket all_reduce once all ranks have arrived.
    pub bucket_transfer_ns: Vec<i64>,
    /// Buckets ready only at the end of backward (their transfer is exposed by construction).
    pub tail_buckets: u32,
    /// Σ transfer of the tail buckets: exposed communication per step on a rank that does not
    /// wait for anyone; ranks waiting for the straggler see more (see `ranks[].exposed_comm_ns`).
    pub designed_exposed_comm_ns: i64,
    pub straggler_rank: Option<u32>,
    pub straggler_delay_ns: i64,
    /// Nominal GPU compute per step (before speed jitter and the straggler's slowdown).
    pub nominal_compute_ns: i64,
    pub ranks: Vec<ManifestRank>,
    /// Every collective of every step (empty with `collectives_truncated` when there would be
    /// more than 100,000).
    pub collectives: Vec<ManifestCollective>,
    pub collectives_truncated: bool,
}

/// Ground truth of one rank (see [`Manifest`] for the definitions).
#[derive(Debug, Clone, Serialize)]
pub struct ManifestRank {
    pub rank: u32,
    pub file: String,
    pub device: u32,
    pub pid: u64,
    pub main_tid: u64,
    pub autograd_tid: u64,
    pub clock_offset_ns: i64,
    pub is_straggler: bool,
    /// Per step: start of the CPU `ProfilerStep#N` (true time) and its duration.
    pub step_start_ns: Vec<i64>,
    pub step_dur_ns: Vec<i64>,
    pub compute_busy_ns: Vec<i64>,
    pub comm_busy_ns: Vec<i64>,
    pub exposed_comm_ns: Vec<i64>,
    pub comm_wait_ns: Vec<i64>,
    /// `cudaFree` + `cudaMalloc` bursts per step.
    pub malloc_bursts: Vec<u32>,
}

/// One collective across ranks.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestCollective {
    /// `ProfilerStep#N` number.
    pub step: u32,
    /// Position among the step's collectives.
    pub index: u32,
    pub process_group: String,
    pub seq: u64,
    pub collective: String,
    pub bytes: u64,
    pub transfer_ns: i64,
    /// Per rank, the NCCL kernel's start (the rank's arrival) and end, true time.
    pub arrival_ns: Vec<i64>,
    pub end_ns: Vec<i64>,
    /// The rank that arrived last (the lowest such rank on ties).
    pub last_rank: u32,
}

/// Ground truth for `cfg` (sanitized first; see [`Manifest::adjustments`]). Simulates the whole
/// job once without writing any trace.
pub fn manifest(cfg: &SynthConfig) -> Manifest {
    let (cfg, adjustments) = cfg.sanitized();
    let plan = Plan::resolve(&cfg);
    let mut job = JobSim::new(&plan, true);
    for s in 0..plan.steps {
        job.step(s);
    }
    let steps = job.steps.take().unwrap_or_default();
    let colls = job.colls.take().unwrap_or_default();
    let ranks = job
        .ranks
        .iter()
        .zip(steps)
        .map(|(rs, st)| {
            let ids = plan.rank_ids(rs.rank);
            ManifestRank {
                rank: rs.rank,
                file: file_name(rs.rank, false),
                device: ids.device,
                pid: ids.pid,
                main_tid: ids.main_tid,
                autograd_tid: ids.autograd_tid,
                clock_offset_ns: plan.offsets.get(rs.rank as usize).copied().unwrap_or(0),
                is_straggler: plan.straggler == Some(rs.rank),
                step_start_ns: st.iter().map(|s| s.start).collect(),
                step_dur_ns: st.iter().map(|s| s.dur).collect(),
                compute_busy_ns: st.iter().map(|s| s.compute_busy).collect(),
                comm_busy_ns: st.iter().map(|s| s.comm_busy).collect(),
                exposed_comm_ns: st.iter().map(|s| s.exposed_comm).collect(),
                comm_wait_ns: st.iter().map(|s| s.comm_wait).collect(),
                malloc_bursts: st.iter().map(|s| s.malloc_bursts).collect(),
            }
        })
        .collect();
    let truncated = colls.len() > 100_000;
    let collectives = if truncated {
        Vec::new()
    } else {
        colls
            .into_iter()
            .map(|c| ManifestCollective {
                step: plan.cfg.first_step.saturating_add(c.step),
                index: c.index,
                process_group: emit::PG_NAMES.get(c.pg).map_or("0", |p| p.0).to_string(),
                seq: c.seq,
                collective: "allreduce".to_string(),
                bytes: c.bytes,
                transfer_ns: c.transfer_ns,
                arrival_ns: c.arrivals,
                end_ns: c.ends,
                last_rank: c.last_rank,
            })
            .collect()
    };
    let bucket_transfer = plan.transfer_ns(plan.cfg.bucket_bytes);
    let b = plan.cfg.bucket_count as usize;
    Manifest {
        manifest_version: MANIFEST_VERSION,
        generator: format!("rankscope synth {}", env!("CARGO_PKG_VERSION")),
        adjustments,
        base_time_ns: plan.base_time_ns,
        steps: plan.steps,
        step_numbers: (0..plan.steps).map(|s| plan.cfg.first_step.saturating_add(s)).collect(),
        layers: plan.layers,
        grad_tensors: plan.points,
        kernels_per_step: plan.kernels_per_step,
        collectives_per_step: plan.cfg.bucket_count + u32::from(plan.cfg.loss_allreduce),
        bucket_bytes: vec![plan.cfg.bucket_bytes; b],
        bucket_transfer_ns: vec![bucket_transfer; b],
        tail_buckets: plan.tail_buckets,
        designed_exposed_comm_ns: bucket_transfer * i64::from(plan.tail_buckets),
        straggler_rank: plan.straggler,
        straggler_delay_ns: plan.cfg.straggler_delay_ns,
        nominal_compute_ns: plan.nominal_compute_ns,
        ranks,
        collectives,
        collectives_truncated: truncated,
        config: plan.cfg,
    }
}
