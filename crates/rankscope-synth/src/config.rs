//! The knobs of a synthetic job ([`SynthConfig`]) and of each injected cause.

use std::io;

use serde::{Deserialize, Serialize};

use crate::hybrid::Hybrid;
use crate::Scenario;

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
    /// Host noise for one step (data-parallel jobs): one rank's GPU work runs `factor`× slower in step `step` (the
    /// step's index among the profiled ones) and at its usual speed in every other step (a
    /// process preempting its launching thread, a throttled clock for a moment). Written only
    /// when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<Burst>,
    /// A hybrid-parallel job instead of DDP (see [`Hybrid`]): tensor × context × expert × data ×
    /// pipeline parallel, one cause; `ranks` becomes the world size. Written only when set, so
    /// the manifests of other jobs do not change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hybrid: Option<Hybrid>,
}

/// A rank and a multiplier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RankFactor {
    pub rank: u32,
    pub factor: f64,
}

/// One rank slower in one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Burst {
    pub rank: u32,
    /// The step's index among the profiled steps (0 is the first).
    pub step: u32,
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
            burst: None,
            host_sync: None,
            all_to_all: None,
            hang: None,
            pipeline: None,
            hybrid: None,
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
