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
//!
//! **Scenarios** ([`Scenario`], `rankscope synth --scenario NAME`; `docs/synth.md` has the full
//! table): presets with one known, injected cause each, for tests of the diagnosis. They start
//! from one healthy 4-rank job and switch on knobs that are all off by default (so the demo
//! above is unchanged, byte for byte):
//! - DDP causes: `host_stall` (a `record_function` annotation with nothing inside, in
//!   `## forward ##`, on one rank), `slow_dataloader` (one rank's DataLoader `__next__` k×
//!   longer), `small_buckets` (18 buckets of 1–4 MiB), `uneven_batch` (one rank's batch k×:
//!   longer kernels *and* larger `Input Dims`), `slow_gpu` (slower kernels, same shapes),
//!   `host_sync` (`.item()` syncs in forward on every rank); and two with nothing to find:
//!   `baseline`, `good_overlap`.
//! - `all_to_all`: an all_to_all whose kernels are `ncclDevKernel_SendRecv` (sim `CollKind`).
//! - Hangs (`hang_skipped_collective`, `early_exit`; [`Hang`]): collectives are matched by
//!   order per process group, as NCCL does; a collective some member never reaches makes the
//!   others' kernels run until the process-group timeout, and each stuck rank's trace ends when
//!   its watchdog fires (events that had not begun are gone, running ones are cut there).
//! - Pipelines (`pipeline_*`; [`Pipeline`], module `sim::pipe`): the schedules, annotation
//!   names and point-to-point traffic of `torch.distributed.pipelining`, with the GPU work of all
//!   ranks placed together so the bubbles fall where the schedule puts them.
//!
//! The [`Manifest`]'s `injected` block ([`Injected`]) names the cause, its ranks, where it is and
//! how big; the per rank × step truth (stall, data loading, syncs, GPU idle, waits, hang, per
//! stage bubbles) is beside it.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::{Deserialize, Serialize};

mod emit;
mod model;
mod rng;
mod scenario;
mod shapes;
mod sim;

pub use rng::Rng;
pub use scenario::{Cause, Injected, Scenario};
use sim::{Class, CollKind, JobSim, RankSim};

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

    // ----- scenario knobs (all off by default: the demo above is unchanged) -------------------
    /// The preset this configuration came from (`--scenario`), recorded in the manifest; the
    /// knobs below are what the generator acts on.
    pub scenario: Option<Scenario>,
    /// Write `Input Dims` and `Input type` on every CPU op, as `record_shapes=True` does.
    pub record_shapes: bool,
    /// Explicit size of each DDP bucket in issue order (bytes); when not empty it replaces
    /// `bucket_count` × `bucket_bytes` (DDP's real buckets differ: a parameter larger than
    /// `bucket_cap_mb` gets a bucket of its own).
    pub bucket_sizes: Vec<u64>,
    /// Mean time of the DataLoader's `__next__` per step in ns, on every rank (±5 % per step).
    /// `None`: the demo's 0.3–0.8 ms of collate work.
    pub dataloader_ns: Option<i64>,
    /// One rank's DataLoader `__next__` takes `factor`× as long (needs `dataloader_ns`; without
    /// it the demo's collate time is scaled): an input-bound rank. The GPU idles meanwhile.
    pub slow_dataloader: Option<RankFactor>,
    /// One rank sleeps on the host every step inside a `record_function` annotation nested in
    /// `## forward ##`, with no CPU op running: the GPU drains its queue and idles.
    pub host_stall: Option<HostStall>,
    /// One rank processes `factor`× the batch: its batch-proportional kernels run `factor`×
    /// longer and its CPU ops' `Input Dims` are larger in proportion (real extra work, unlike
    /// `straggler_rank`, whose kernels are slower with the same shapes).
    pub uneven_batch: Option<RankFactor>,
    /// Host synchronizations (`.item()` → `cudaStreamSynchronize`) in the middle of forward on
    /// every rank, every step.
    pub host_sync: Option<HostSync>,
    /// An all_to_all per step in forward (after the embedding), issued as PyTorch does
    /// (`c10d::alltoall_base_` > `record_param_comms` with `Collective name` `all_to_all` >
    /// `nccl:all_to_all`), whose GPU kernel is `ncclDevKernel_SendRecv` (NCCL runs all_to_all
    /// as grouped sends and receives). The compute after it waits for its result.
    pub all_to_all: Option<AllToAll>,
    /// A job that hangs: a rank skips a collective, or exits early (see [`Hang`]).
    pub hang: Option<Hang>,
    /// Pipeline parallelism instead of DDP (see [`Pipeline`]); `ranks` becomes `stages × dp`.
    pub pipeline: Option<Pipeline>,
}

/// A rank and a multiplier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RankFactor {
    pub rank: u32,
    pub factor: f64,
}

/// A host-side stall on one rank, every step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HostStall {
    pub rank: u32,
    /// Length of the sleep in ns.
    pub ns: i64,
    /// Name of the `user_annotation` around the sleep (`with record_function(name):`).
    pub name: String,
    /// The forward layer after which the rank sleeps (0-based; `None`: the middle layer).
    pub after_layer: Option<u32>,
}

impl Default for HostStall {
    fn default() -> Self {
        HostStall { rank: 0, ns: 20_000_000, name: "straggler_sleep".into(), after_layer: None }
    }
}

/// `.item()` calls in forward, on every rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HostSync {
    /// Synchronizations per step, after evenly spaced forward layers.
    pub syncs_per_step: u32,
    /// Host (Python) time after each sync before the next op is dispatched, in ns: the code
    /// that uses the value. The GPU idles during it and until the next kernel is launched.
    pub host_work_ns: i64,
}

impl Default for HostSync {
    fn default() -> Self {
        HostSync { syncs_per_step: 4, host_work_ns: 1_500_000 }
    }
}

/// The all_to_all of the `all_to_all` scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AllToAll {
    /// Bytes each rank sends in total (split evenly over the ranks).
    pub bytes: u64,
}

impl Default for AllToAll {
    fn default() -> Self {
        AllToAll { bytes: 16 << 20 }
    }
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
            scenario: None,
            record_shapes: false,
            bucket_sizes: Vec::new(),
            dataloader_ns: None,
            slow_dataloader: None,
            host_stall: None,
            uneven_batch: None,
            host_sync: None,
            all_to_all: None,
            hang: None,
            pipeline: None,
        }
    }
}

/// How a hanging job goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HangKind {
    /// `rank` does not issue one DDP bucket all_reduce of step `step` (a collective inside an
    /// `if`). NCCL matches a communicator's collectives by order, so the others' last bucket of
    /// that step never completes: their NCCL kernel runs until the timeout. The skipping rank
    /// goes on to its next collective (the loss all_reduce on the second group), which the
    /// others never reach: it is stuck too.
    SkippedCollective,
    /// `rank`'s trace ends after step `step` (the process exited); the others block in their
    /// next collective until the timeout.
    EarlyExit,
}

/// A job that hangs; every waiting rank's trace ends when its process-group timeout fires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Hang {
    pub kind: HangKind,
    pub rank: u32,
    /// 0-based index of the profiled step (the step with the skipped collective, or the last
    /// step the exiting rank completes).
    pub step: u32,
    /// The skipped bucket all_reduce (0-based, in issue order); `None`: the step's last bucket.
    pub bucket: Option<u32>,
    /// Process-group timeout in ns: a stuck NCCL kernel runs this long, then the watchdog
    /// aborts the communicator and the trace ends.
    pub timeout_ns: i64,
}

impl Default for Hang {
    fn default() -> Self {
        Hang { kind: HangKind::SkippedCollective, rank: 1, step: 2, bucket: None, timeout_ns: 8_000_000_000 }
    }
}

/// The pipeline schedule of each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Schedule {
    /// All forwards, then all backwards (`ScheduleGPipe`). Bubble (p−1)/(m+p−1).
    #[serde(rename = "gpipe")]
    GPipe,
    /// Warm-up of p−s forwards on stage s, then one backward and one forward alternately, then
    /// the remaining backwards (`Schedule1F1B`). Bubble (p−1)/(m+p−1), less memory.
    #[serde(rename = "1f1b")]
    OneFOneB,
    /// Interleaved 1F1B with v model chunks per rank, stage c·p + r on rank r
    /// (`ScheduleInterleaved1F1B`'s order). Bubble (p−1)/(m·v+p−1).
    #[serde(rename = "interleaved_1f1b")]
    Interleaved1F1B,
}

/// Which CPU annotations mark the micro-batch actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PipeAnnotations {
    /// What the schedule class of `torch.distributed.pipelining` emits: `ScheduleGPipe` wraps
    /// each micro-batch in `Forward {i}` / `Backward {i}`; `Schedule1F1B` emits none;
    /// `_PipelineScheduleRuntime` schedules (interleaved) emit `PP:{stage}F{i}` / `PP:{stage}B{i}`.
    Schedule,
    /// `_PipelineScheduleRuntime`'s `PP:{stage}F{i}` / `PP:{stage}B{i}` for every schedule.
    Runtime,
    /// No per-micro-batch annotations (only the P2P traffic tells the schedule).
    None,
}

/// Pipeline-parallel training: each rank is one stage (or `virtual_stages` chunks), micro-batches
/// flow forward as activations and backward as gradients over NCCL send/recv.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Pipeline {
    /// Pipeline stages p (ranks per pipeline replica).
    pub stages: u32,
    /// Micro-batches m per step.
    pub micro_batches: u32,
    /// Model chunks per rank v (interleaved schedule only; 1 otherwise).
    pub virtual_stages: u32,
    pub schedule: Schedule,
    /// Data-parallel replicas of the pipeline; > 1 adds a gradient all_reduce per stage at the
    /// end of the step over the ranks holding that stage. World size = `stages × dp`.
    pub dp: u32,
    /// Transformer layers per rank (split evenly over its `virtual_stages` chunks).
    pub layers_per_stage: u32,
    /// Bytes of one activation (and of its gradient) sent between stages per micro-batch.
    pub activation_bytes: u64,
    /// Point-to-point bandwidth between neighbouring stages in GB/s (NVLink inside a node).
    pub p2p_gbps: f64,
    /// The stage (rank within a replica) whose kernels are `slow_factor`× slower.
    pub slow_stage: Option<u32>,
    pub slow_factor: f64,
    pub annotations: PipeAnnotations,
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline {
            stages: 4,
            micro_batches: 8,
            virtual_stages: 1,
            schedule: Schedule::GPipe,
            dp: 1,
            layers_per_stage: 2,
            // One micro-batch of 8 sequences × 4096 tokens × 1024 hidden, bf16.
            activation_bytes: 8 * 4096 * 1024 * 2,
            p2p_gbps: 150.0,
            slow_stage: None,
            slow_factor: 1.0,
            annotations: PipeAnnotations::Schedule,
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
        c.sanitize_scenario_knobs(&mut fix);
        (c, notes)
    }

    /// The scenario knobs' part of [`SynthConfig::sanitized`].
    fn sanitize_scenario_knobs(&mut self, fix: &mut impl FnMut(bool, String)) {
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
    /// Size of each DDP bucket, in issue order.
    pub bucket_sizes: Vec<u64>,
    /// The pipeline job's layout and groups (pipeline mode).
    pub pipe: Option<sim::pipe::PipePlan>,
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

    fn new(cfg: &SynthConfig) -> Result<Plan, SynthError> {
        let (cfg, problems) = cfg.sanitized();
        if !problems.is_empty() {
            return Err(SynthError::InvalidConfig(problems.join("; ")));
        }
        // Sanitizing a valid config changes only what it derives (`bucket_count` from
        // `bucket_sizes`).
        Ok(Self::resolve(&cfg))
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

    /// Duration of a collective of `bytes` once every rank has arrived: `α + f · S / busbw`
    /// with the bytes each rank moves, f = 2(N−1)/N for a ring all_reduce and (N−1)/N for an
    /// all_to_all (busbw in GB/s is bytes per ns).
    pub(crate) fn transfer_ns(&self, kind: CollKind, bytes: u64) -> i64 {
        let n = f64::from(self.cfg.ranks);
        let f = match kind {
            CollKind::AllReduce => 2.0 * (n - 1.0) / n,
            CollKind::AllToAll => (n - 1.0) / n,
        };
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
                // A rank that exited or hung in an earlier step writes no more steps.
                if let Some(rs) = job.ranks.get(*r as usize).filter(|rs| rs.active) {
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
///   time this rank's NCCL kernels spent waiting for others (a rank's collectives are serialized
///   on its NCCL stream, so the sum is also the union). A collective that hung counts whole.
///   In a pipeline job: the union over its sends, recvs and all_reduces of [posted, last partner
///   posted).
///
/// `injected` names the cause (see [`Injected`] and `docs/synth.md`); `pipeline` holds a
/// pipeline job's per stage × step truth; the hang truth is in `ranks[].hung_in`,
/// `ranks[].last_completed` and the collectives marked `hung` (with their `absent` ranks).
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
    /// Transformer layers of the model (in a pipeline job: over all its stages).
    pub layers: u32,
    /// Parameters whose gradients DDP buckets (gradient-ready points per backward; in a
    /// pipeline job, every parameter of the model).
    pub grad_tensors: u32,
    /// GPU kernels (compute and NCCL) per step and rank (a pipeline job: rank 0's last step).
    pub kernels_per_step: u32,
    /// Collectives per step and rank (bucket all_reduces, the loss all_reduce, the all_to_all;
    /// a pipeline job: its data-parallel all_reduce, if any; its messages are in `pipeline.p2p`).
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
    /// The preset the configuration came from, if any.
    pub scenario: Option<Scenario>,
    /// Per stage × step truth of a pipeline job (`pipeline` set), else absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<ManifestPipeline>,
    /// What was injected and where; the per rank × step numbers are in `ranks`.
    pub injected: Injected,
    pub ranks: Vec<ManifestRank>,
    /// Every collective of every step (empty with `collectives_truncated` when there would be
    /// more than 100,000; a pipeline job lists none here, its messages are in `pipeline.p2p`).
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
    /// Sequences in this rank's batch (8; more on the `uneven_batch` rank).
    pub batch: u64,
    /// Per step: duration of the DataLoader's `__next__` annotation.
    pub data_loading_ns: Vec<i64>,
    /// Per step: duration of the injected host-stall annotation (0 on other ranks).
    pub host_stall_ns: Vec<i64>,
    /// Per step: CPU time blocked in the injected mid-forward `cudaStreamSynchronize` calls
    /// (the step's closing `.item()` sync is not counted).
    pub host_sync_ns: Vec<i64>,
    /// Per step: compute-stream idle caused by the injected stall or syncs (from when the GPU
    /// ran out of queued work, or the injection began if later, to the next GPU work).
    pub injected_idle_ns: Vec<i64>,
    /// Steps this rank completed (fewer than `steps` when it exited or hung; a hung step is
    /// in the per-step vectors, cut at the end of the trace).
    pub completed_steps: u32,
    /// True time of the trace's last moment (the profiler's `Record Window End`).
    pub trace_end_ns: i64,
    /// The collective this rank's NCCL kernel was stuck in when its trace ended (`hang`).
    pub hung_in: Option<ManifestCollRef>,
    /// Per process group, the last collective this rank completed.
    pub last_completed: BTreeMap<String, ManifestCollRef>,
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
    /// Per rank, the NCCL kernel's start (the rank's arrival) and end, true time (0 for the
    /// ranks in `absent`).
    pub arrival_ns: Vec<i64>,
    pub end_ns: Vec<i64>,
    /// The rank that arrived last (the lowest such rank on ties), among those that arrived.
    pub last_rank: u32,
    /// It never completed: the ranks that arrived waited until the timeout (`hang`). Written
    /// only when true.
    #[serde(skip_serializing_if = "is_false")]
    pub hung: bool,
    /// Ranks that never reached it (skipped it, exited, or were stuck before it). Written only
    /// when not empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<u32>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Ground truth of a pipeline job. Times are ns of the true clock.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestPipeline {
    pub schedule: Schedule,
    pub stages: u32,
    pub micro_batches: u32,
    pub virtual_stages: u32,
    pub dp: u32,
    pub slow_stage: Option<u32>,
    pub slow_factor: f64,
    pub annotations: PipeAnnotations,
    /// The schedule's bubble fraction: (p−1)/(m+p−1), interleaved (p−1)/(m·v+p−1).
    pub formula_bubble_fraction: f64,
    pub activation_bytes: u64,
    /// Duration of one activation or gradient message once both ends are posted.
    pub p2p_transfer_ns: i64,
    /// The GPU placement could not honour a dependency (never expected; tests assert false).
    pub deadlocked: bool,
    /// Per global rank.
    pub ranks: Vec<ManifestStage>,
    /// Every message between stages (send/recv pair), by step, then by when its first end was
    /// posted.
    pub p2p: Vec<ManifestP2p>,
}

/// One pipeline rank's truth per step.
///
/// - `window_start_ns`, `window_ns`: its pipeline replica's window: the first forward kernel
///   start of any of its stages to the last backward kernel end (the same for every stage of
///   the replica).
/// - `compute_ns`: the rank's compute-stream busy time (union of the step's kernels and copies)
///   inside the window. (An early-finishing last stage may also run its `.item()` copy and the
///   next step's input copy inside the window: a few µs not counted here.)
/// - `bubble_ns` = `window_ns` − `compute_ns`: the time the stage idles inside the window
///   (waiting for a neighbour, and the schedule's fill and drain); `bubble_fraction` =
///   `bubble_ns / window_ns`, to compare with `formula_bubble_fraction`.
/// - `recv_wait_ns`: Σ over its recvs of how long each was posted before the matching send
///   (the blocking wait inside the recv kernels); `send_wait_ns` likewise for its sends.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestStage {
    pub rank: u32,
    /// Its rank in the pipeline (the stage for v = 1) and its data-parallel replica.
    pub pipeline_rank: u32,
    pub replica: u32,
    /// The (virtual) stages it holds: c·p + pipeline_rank.
    pub stages: Vec<u32>,
    pub window_start_ns: Vec<i64>,
    pub window_ns: Vec<i64>,
    pub compute_ns: Vec<i64>,
    pub bubble_ns: Vec<i64>,
    pub bubble_fraction: Vec<f64>,
    pub recv_wait_ns: Vec<i64>,
    pub send_wait_ns: Vec<i64>,
}

/// One message between neighbouring stages.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestP2p {
    /// `ProfilerStep#N` number.
    pub step: u32,
    pub src: u32,
    pub dst: u32,
    pub stage_from: u32,
    pub stage_to: u32,
    pub micro_batch: u32,
    /// `activation` (forward) or `gradient` (backward).
    pub kind: String,
    pub bytes: u64,
    /// The per-edge process group it went over, and each end's `Seq` in it.
    pub process_group: String,
    pub send_seq: u64,
    pub recv_seq: u64,
    /// Each end's NCCL kernel start (posting) and end.
    pub send_start_ns: i64,
    pub recv_start_ns: i64,
    pub send_end_ns: i64,
    pub recv_end_ns: i64,
    pub transfer_ns: i64,
}

/// A collective of one rank, as the hang truth names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ManifestCollRef {
    /// `ProfilerStep#N` number.
    pub step: u32,
    pub process_group: String,
    pub seq: u64,
    pub collective: String,
    pub bytes: u64,
    /// The rank's NCCL kernel start and end (true time).
    pub start_ns: i64,
    pub end_ns: i64,
}

fn pipeline_truth(plan: &Plan, pp: &sim::pipe::PipePlan, t: sim::pipe::PipeTruth) -> ManifestPipeline {
    let c = &pp.cfg;
    let ranks = t
        .ranks
        .iter()
        .enumerate()
        .map(|(g, st)| {
            let g = u32::try_from(g).unwrap_or(0);
            let (pr, d) = pp.coords(g);
            ManifestStage {
                rank: g,
                pipeline_rank: pr,
                replica: d,
                stages: (0..c.virtual_stages).map(|v| v * c.stages + pr).collect(),
                window_start_ns: st.iter().map(|x| x.window_start).collect(),
                window_ns: st.iter().map(|x| x.window).collect(),
                compute_ns: st.iter().map(|x| x.compute).collect(),
                bubble_ns: st.iter().map(|x| x.bubble).collect(),
                bubble_fraction: st.iter().map(|x| x.bubble as f64 / x.window.max(1) as f64).collect(),
                recv_wait_ns: st.iter().map(|x| x.recv_wait).collect(),
                send_wait_ns: st.iter().map(|x| x.send_wait).collect(),
            }
        })
        .collect();
    let p2p = t
        .p2p
        .iter()
        .map(|m| ManifestP2p {
            step: plan.cfg.first_step.saturating_add(m.step),
            src: m.src,
            dst: m.dst,
            stage_from: m.stage_from,
            stage_to: m.stage_to,
            micro_batch: m.mb,
            kind: if m.fwd { "activation" } else { "gradient" }.to_string(),
            bytes: m.bytes,
            process_group: pp.groups.get(m.group).map_or_else(String::new, |g| g.name.clone()),
            send_seq: m.send_seq,
            recv_seq: m.recv_seq,
            send_start_ns: m.send_start,
            recv_start_ns: m.recv_start,
            send_end_ns: m.send_end,
            recv_end_ns: m.recv_end,
            transfer_ns: m.transfer,
        })
        .collect();
    ManifestPipeline {
        schedule: c.schedule,
        stages: c.stages,
        micro_batches: c.micro_batches,
        virtual_stages: c.virtual_stages,
        dp: c.dp,
        slow_stage: c.slow_stage,
        slow_factor: c.slow_factor,
        annotations: c.annotations,
        formula_bubble_fraction: sim::pipe::formula(c),
        activation_bytes: c.activation_bytes,
        p2p_transfer_ns: plan.cfg.collective_latency_ns
            + (c.activation_bytes as f64 / c.p2p_gbps).round() as i64,
        deadlocked: t.deadlocked,
        ranks,
        p2p,
    }
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
    let pipeline = job.pipe.take().zip(plan.pipe.as_ref()).map(|(t, pp)| pipeline_truth(&plan, pp, t));
    let coll_ref = |c: &sim::CollTruth, r: usize| -> Option<ManifestCollRef> {
        Some(ManifestCollRef {
            step: plan.cfg.first_step.saturating_add(c.step),
            process_group: emit::PG_NAMES.get(c.pg).map_or("0", |p| p.0).to_string(),
            seq: c.seq,
            collective: c.kind.collective_name().to_string(),
            bytes: c.bytes,
            start_ns: (*c.arrivals.get(r)?)?,
            end_ns: (*c.ends.get(r)?)?,
        })
    };
    let ranks: Vec<ManifestRank> = job
        .ranks
        .iter()
        .zip(steps)
        .map(|(rs, st)| {
            let ids = plan.rank_ids(rs.rank);
            let r = rs.rank as usize;
            let hung_in = colls.iter().filter(|c| c.hung).find_map(|c| coll_ref(c, r));
            let mut last_completed = BTreeMap::new();
            for c in colls.iter().filter(|c| !c.hung) {
                if let Some(x) = coll_ref(c, r) {
                    last_completed.insert(x.process_group.clone(), x);
                }
            }
            let completed_steps = u32::try_from(st.len()).unwrap_or(0) - u32::from(rs.abort.is_some());
            ManifestRank {
                completed_steps,
                trace_end_ns: rs.trace_end(),
                hung_in,
                last_completed,
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
                batch: plan.batch_of(rs.rank),
                data_loading_ns: st.iter().map(|s| s.data_loading).collect(),
                host_stall_ns: st.iter().map(|s| s.host_stall).collect(),
                host_sync_ns: st.iter().map(|s| s.host_sync).collect(),
                injected_idle_ns: st.iter().map(|s| s.injected_idle).collect(),
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
                collective: c.kind.collective_name().to_string(),
                bytes: c.bytes,
                transfer_ns: c.transfer_ns,
                absent: (0u32..).zip(&c.arrivals).filter(|(_, a)| a.is_none()).map(|(r, _)| r).collect(),
                arrival_ns: c.arrivals.iter().map(|a| a.unwrap_or(0)).collect(),
                end_ns: c.ends.iter().map(|a| a.unwrap_or(0)).collect(),
                last_rank: c.last_rank,
                hung: c.hung,
            })
            .collect()
    };
    let bucket_transfer: Vec<i64> =
        plan.bucket_sizes.iter().map(|&b| plan.transfer_ns(CollKind::AllReduce, b)).collect();
    let tail = plan.tail_buckets as usize;
    let designed = bucket_transfer.iter().rev().take(tail).sum();
    let injected = match &pipeline {
        Some(p) => scenario::pipeline_injected(p),
        None => scenario::injected(&plan, &ranks),
    };
    let is_pipe = pipeline.is_some();
    let kernels_per_step =
        if is_pipe { job.ranks.first().map_or(0, |r| r.kernels) } else { plan.kernels_per_step };
    Manifest {
        manifest_version: MANIFEST_VERSION,
        generator: format!("rankscope synth {}", env!("CARGO_PKG_VERSION")),
        adjustments,
        base_time_ns: plan.base_time_ns,
        steps: plan.steps,
        step_numbers: (0..plan.steps).map(|s| plan.cfg.first_step.saturating_add(s)).collect(),
        layers: plan.pipe.as_ref().map_or(plan.layers, |pp| pp.cfg.stages * pp.cfg.layers_per_stage),
        grad_tensors: plan
            .pipe
            .as_ref()
            .map_or(plan.points, |pp| pp.cfg.stages * pp.cfg.layers_per_stage * 12 + 1),
        kernels_per_step,
        collectives_per_step: if is_pipe {
            plan.pipe.as_ref().map_or(0, |pp| u32::from(pp.cfg.dp > 1))
        } else {
            plan.cfg.bucket_count
                + u32::from(plan.cfg.loss_allreduce)
                + u32::from(plan.cfg.all_to_all.is_some())
        },
        bucket_bytes: if is_pipe { Vec::new() } else { plan.bucket_sizes.clone() },
        bucket_transfer_ns: if is_pipe { Vec::new() } else { bucket_transfer },
        tail_buckets: plan.tail_buckets,
        designed_exposed_comm_ns: designed,
        straggler_rank: plan.straggler,
        straggler_delay_ns: plan.cfg.straggler_delay_ns,
        nominal_compute_ns: plan.nominal_compute_ns,
        scenario: plan.cfg.scenario,
        pipeline,
        injected,
        ranks,
        collectives,
        collectives_truncated: truncated,
        config: plan.cfg,
    }
}
