//! Scenario presets (`rankscope synth --scenario NAME`): GPU-shaped jobs with one known, injected
//! cause each, and the manifest's `injected` block that says what was injected.
//!
//! Every preset starts from the same healthy DDP job (4 ranks of one H100 node, 5 profiled steps,
//! no straggler, ±0.5 % speed jitter, default 25 MiB buckets whose all_reduces all overlap
//! backward, `record_shapes=True`, host clocks that disagree by up to ±0.9 ms) and changes only
//! what its name says, so a diagnosis that is right on `baseline` and wrong on a scenario is wrong
//! about that scenario's cause. Each rank's file is 2–5 MB.

use serde::{Deserialize, Serialize};

use super::{
    AllToAll, Hang, HangKind, HostStall, HostSync, ManifestPipeline, ManifestRank, PipeAnnotations, Pipeline,
    Plan, RankFactor, Schedule, SynthConfig,
};

/// A named preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    /// Identical ranks, low jitter, default 25 MiB buckets, communication hidden: nothing to find.
    Baseline,
    /// Rank 2 sleeps 20 ms per step in `straggler_sleep` inside `## forward ##`.
    HostStall,
    /// Rank 1's DataLoader `__next__` takes 5× as long (3 → 15 ms).
    SlowDataloader,
    /// ~40 MB of gradients in 18 buckets of 1–4 MiB: many small, latency-bound all_reduces.
    SmallBuckets,
    /// A twice as deep model (13 layers) with 12 buckets, all launched while backward runs.
    GoodOverlap,
    /// Rank 3 processes a 1.25× batch (10 sequences instead of 8): more work, same GPU.
    UnevenBatch,
    /// Rank 1's GPU is slower: +8 ms of kernel time per step with the same shapes.
    SlowGpu,
    /// Four `.item()` host synchronizations in forward on every rank, each followed by 1.5 ms
    /// of host work.
    HostSync,
    /// A 16 MiB all_to_all per step in forward whose kernels are `ncclDevKernel_SendRecv`.
    AllToAll,
    /// GPipe, 4 stages, 8 micro-batches.
    PipelineGpipe,
    /// 1F1B, 4 stages, 8 micro-batches.
    #[serde(rename = "pipeline_1f1b")]
    Pipeline1f1b,
    /// Interleaved 1F1B, 4 stages × 2 virtual stages, 8 micro-batches.
    PipelineInterleaved,
    /// 1F1B, 4 stages, 8 micro-batches; stage 2's kernels are 1.5× slower.
    PipelineSlowStage,
    /// Rank 1 skips the last bucket all_reduce of step 2; everyone hangs until the 8 s timeout.
    HangSkippedCollective,
    /// Rank 3's trace ends after step 2; the others hang in their next all_reduce for 8 s.
    EarlyExit,
}

impl Scenario {
    pub const ALL: [Scenario; 15] = [
        Scenario::Baseline,
        Scenario::HostStall,
        Scenario::SlowDataloader,
        Scenario::SmallBuckets,
        Scenario::GoodOverlap,
        Scenario::UnevenBatch,
        Scenario::SlowGpu,
        Scenario::HostSync,
        Scenario::AllToAll,
        Scenario::PipelineGpipe,
        Scenario::Pipeline1f1b,
        Scenario::PipelineInterleaved,
        Scenario::PipelineSlowStage,
        Scenario::HangSkippedCollective,
        Scenario::EarlyExit,
    ];

    /// The name `--scenario` takes (the serde name).
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Baseline => "baseline",
            Scenario::HostStall => "host_stall",
            Scenario::SlowDataloader => "slow_dataloader",
            Scenario::SmallBuckets => "small_buckets",
            Scenario::GoodOverlap => "good_overlap",
            Scenario::UnevenBatch => "uneven_batch",
            Scenario::SlowGpu => "slow_gpu",
            Scenario::HostSync => "host_sync",
            Scenario::AllToAll => "all_to_all",
            Scenario::PipelineGpipe => "pipeline_gpipe",
            Scenario::Pipeline1f1b => "pipeline_1f1b",
            Scenario::PipelineInterleaved => "pipeline_interleaved",
            Scenario::PipelineSlowStage => "pipeline_slow_stage",
            Scenario::HangSkippedCollective => "hang_skipped_collective",
            Scenario::EarlyExit => "early_exit",
        }
    }

    pub fn from_name(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The preset's configuration. Flags given with `--scenario` override it.
    pub fn config(self) -> SynthConfig {
        let base = SynthConfig {
            ranks: 4,
            steps: 5,
            straggler_rank: None,
            compute_jitter: 0.005,
            exposed_comm_fraction: 0.0,
            record_shapes: true,
            scenario: Some(self),
            ..SynthConfig::default()
        };
        let pipeline = |p: Pipeline| SynthConfig {
            steps: 3,
            bucket_count: 1,
            loss_allreduce: false,
            pipeline: Some(p),
            ..base.clone()
        };
        match self {
            Scenario::Baseline => base,
            Scenario::HostStall => {
                SynthConfig { host_stall: Some(HostStall { rank: 2, ..HostStall::default() }), ..base }
            }
            Scenario::SlowDataloader => SynthConfig {
                dataloader_ns: Some(3_000_000),
                slow_dataloader: Some(RankFactor { rank: 1, factor: 5.0 }),
                ..base
            },
            Scenario::SmallBuckets => {
                // DDP with bucket_cap_mb=1 on a ~40 MB model: 1 MiB buckets, and parameters
                // larger than the cap (up to 4 MiB) in buckets of their own.
                let pattern = [1u64, 1, 4, 2, 1, 3, 1, 4, 2, 1, 1, 4, 2, 3, 1, 4, 2, 1];
                SynthConfig { bucket_sizes: pattern.iter().map(|m| m << 20).collect(), ..base }
            }
            Scenario::GoodOverlap => {
                SynthConfig { steps: 3, kernels_per_step: 580, bucket_count: 12, ..base }
            }
            Scenario::UnevenBatch => {
                SynthConfig { uneven_batch: Some(RankFactor { rank: 3, factor: 1.25 }), ..base }
            }
            Scenario::SlowGpu => {
                SynthConfig { straggler_rank: Some(1), straggler_delay_ns: 8_000_000, ..base }
            }
            Scenario::HostSync => SynthConfig { host_sync: Some(HostSync::default()), ..base },
            Scenario::AllToAll => SynthConfig { all_to_all: Some(AllToAll::default()), ..base },
            Scenario::PipelineGpipe => pipeline(Pipeline::default()),
            Scenario::Pipeline1f1b => {
                pipeline(Pipeline { schedule: Schedule::OneFOneB, ..Pipeline::default() })
            }
            Scenario::PipelineInterleaved => pipeline(Pipeline {
                schedule: Schedule::Interleaved1F1B,
                virtual_stages: 2,
                ..Pipeline::default()
            }),
            Scenario::PipelineSlowStage => pipeline(Pipeline {
                schedule: Schedule::OneFOneB,
                slow_stage: Some(2),
                slow_factor: 1.5,
                annotations: PipeAnnotations::Runtime,
                ..Pipeline::default()
            }),
            Scenario::HangSkippedCollective => SynthConfig { steps: 4, hang: Some(Hang::default()), ..base },
            Scenario::EarlyExit => SynthConfig {
                steps: 4,
                hang: Some(Hang { kind: HangKind::EarlyExit, rank: 3, ..Hang::default() }),
                ..base
            },
        }
    }
}

/// Why the job is slow (or stuck), as the manifest's `injected.cause` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// A rank that is late for a reason none of the more specific causes describes. The
    /// generator injects only specific causes; the id exists for diagnoses that cannot tell.
    Straggler,
    HostStall,
    InputBound,
    SmallCollectives,
    ComputeImbalance,
    SlowDevice,
    HostSync,
    PipelineBubble,
    Hang,
    /// A hybrid job's pipeline stage with more layers than the others.
    PipelineStageImbalance,
    /// A hybrid job's tensor group that spans two hosts.
    TensorGroupSpansHosts,
    /// A hybrid job's expert rank that receives most tokens.
    ExpertImbalance,
}

impl Cause {
    /// The id the manifest writes.
    pub fn id(self) -> &'static str {
        match self {
            Cause::Straggler => "straggler",
            Cause::HostStall => "host_stall",
            Cause::InputBound => "input_bound",
            Cause::SmallCollectives => "small_collectives",
            Cause::ComputeImbalance => "compute_imbalance",
            Cause::SlowDevice => "slow_device",
            Cause::HostSync => "host_sync",
            Cause::PipelineBubble => "pipeline_bubble",
            Cause::Hang => "hang",
            Cause::PipelineStageImbalance => "pipeline_stage_imbalance",
            Cause::TensorGroupSpansHosts => "tensor_group_spans_hosts",
            Cause::ExpertImbalance => "expert_imbalance",
        }
    }
}

/// What was injected, for tests that compare a diagnosis against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Injected {
    /// `None` (JSON null): nothing to find (`baseline`, `good_overlap`, `all_to_all`).
    pub cause: Option<Cause>,
    /// The ranks the cause is on (the late rank, the slow stage, the rank that skipped...).
    pub ranks: Vec<u32>,
    /// Where in the step, in words (annotation, phase, collective).
    #[serde(rename = "where")]
    pub location: String,
    /// Size of the injection per step on each of `ranks` in ns (defined per cause in the
    /// module docs of `synth`; the per rank × step truth is in `ranks[]` and `pipeline`).
    pub amount_ns: i64,
    pub notes: Vec<String>,
}

fn mean(v: impl IntoIterator<Item = i64>) -> i64 {
    let (sum, n) = v.into_iter().fold((0i128, 0i128), |(s, n), x| (s + i128::from(x), n + 1));
    if n == 0 {
        0
    } else {
        i64::try_from(sum / n).unwrap_or(0)
    }
}

/// Mean over steps of rank `r`'s value minus the mean of the other ranks' values in that step.
fn excess(ranks: &[ManifestRank], r: u32, field: fn(&ManifestRank) -> &Vec<i64>) -> i64 {
    let Some(me) = ranks.iter().find(|x| x.rank == r) else {
        return 0;
    };
    let steps = field(me).len();
    mean((0..steps).map(|s| {
        let mine = field(me).get(s).copied().unwrap_or(0);
        let others = mean(ranks.iter().filter(|x| x.rank != r).filter_map(|x| field(x).get(s).copied()));
        mine - others
    }))
}

/// The manifest's `injected` block of a DDP job, from the knobs and the simulated truth.
///
/// One cause per job; when a custom configuration combines several, the first of hang,
/// host_stall, input_bound, compute_imbalance, slow_device, host_sync, small_collectives is the
/// cause and the others are listed in `notes`. `amount_ns` per cause: host_stall the sleep;
/// input_bound the slow rank's DataLoader time minus the others' mean; compute_imbalance its
/// compute-stream busy time minus the others' mean; slow_device `straggler_delay_ns`; host_sync
/// the compute-stream idle the syncs cause on a rank (mean over ranks); small_collectives the
/// fixed cost α × buckets; hang the timeout.
pub(crate) fn injected(plan: &Plan, ranks: &[ManifestRank]) -> Injected {
    let cfg = &plan.cfg;
    let mut found: Vec<Injected> = Vec::new();
    let one = |cause, ranks: Vec<u32>, location: String, amount_ns| Injected {
        cause: Some(cause),
        ranks,
        location,
        amount_ns,
        notes: Vec::new(),
    };
    if let Some(h) = &cfg.hang {
        let step = cfg.first_step.saturating_add(h.step);
        let location = match h.kind {
            HangKind::SkippedCollective => {
                let b = h.bucket.unwrap_or(cfg.bucket_count.saturating_sub(1));
                format!(
                    "rank {} does not issue bucket all_reduce {b} of ProfilerStep#{step} (process group 0); the others' \
                     last bucket all_reduce of that step never completes, and rank {}'s next collective (the loss \
                     all_reduce on process group 1) neither",
                    h.rank, h.rank
                )
            }
            HangKind::EarlyExit => format!(
                "rank {}'s trace ends after ProfilerStep#{step}; the others block in their first all_reduce of \
                 ProfilerStep#{}",
                h.rank,
                step.saturating_add(1)
            ),
        };
        found.push(one(Cause::Hang, vec![h.rank], location, h.timeout_ns));
    }
    if let Some(h) = &cfg.host_stall {
        let at = h.after_layer.unwrap_or(plan.layers / 2).min(plan.layers.saturating_sub(1));
        found.push(one(
            Cause::HostStall,
            vec![h.rank],
            format!(
                "`{}` (user_annotation, no CPU op inside) in `## forward ##` after transformer layer {at}, every step",
                h.name
            ),
            h.ns,
        ));
    }
    if let Some(d) = &cfg.slow_dataloader {
        found.push(one(
            Cause::InputBound,
            vec![d.rank],
            format!(
                "DataLoader `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`, {}× the others' time, every step",
                d.factor
            ),
            excess(ranks, d.rank, |r| &r.data_loading_ns),
        ));
    }
    if let Some(u) = &cfg.uneven_batch {
        found.push(one(
            Cause::ComputeImbalance,
            vec![u.rank],
            format!(
                "every forward and backward kernel: a batch of {} sequences instead of 8 (Input Dims larger in proportion)",
                plan.batch_of(u.rank)
            ),
            excess(ranks, u.rank, |r| &r.compute_busy_ns),
        ));
    }
    if let Some(s) = plan.straggler {
        found.push(one(
            Cause::SlowDevice,
            vec![s],
            "every compute kernel is slower, with the same shapes as on the other ranks".into(),
            cfg.straggler_delay_ns,
        ));
    }
    if let Some(h) = &cfg.host_sync {
        found.push(one(
            Cause::HostSync,
            (0..cfg.ranks).collect(),
            format!(
                "{} × `aten::item` → `cudaStreamSynchronize` inside `## forward ##`, each followed by {} µs of host work, every step",
                h.syncs_per_step,
                h.host_work_ns / 1000
            ),
            mean(ranks.iter().map(|r| mean(r.injected_idle_ns.iter().copied()))),
        ));
    }
    let small = plan.bucket_sizes.len() >= 8 && plan.bucket_sizes.iter().all(|&b| b <= 4 << 20);
    if small {
        let (lo, hi) = (plan.bucket_sizes.iter().min(), plan.bucket_sizes.iter().max());
        found.push(one(
            Cause::SmallCollectives,
            (0..cfg.ranks).collect(),
            format!(
                "{} DDP bucket all_reduces of {}–{} KiB per step on process group 0",
                plan.bucket_sizes.len(),
                lo.copied().unwrap_or(0) >> 10,
                hi.copied().unwrap_or(0) >> 10
            ),
            cfg.collective_latency_ns * i64::from(cfg.bucket_count),
        ));
    }
    let mut notes = Vec::new();
    if plan.tail_buckets > 0 {
        notes.push(format!(
            "{} of {} buckets are ready only when backward ends: their all_reduce is exposed by design",
            plan.tail_buckets, cfg.bucket_count
        ));
    }
    if let Some(a) = &cfg.all_to_all {
        notes.push(format!(
            "one all_to_all of {} bytes per step in forward: `nccl:all_to_all` whose kernel is \
             ncclDevKernel_SendRecv; it is an all_to_all (busbw factor (n−1)/n), not a send/recv",
            a.bytes
        ));
    }
    let mut it = found.into_iter();
    let mut first = it.next().unwrap_or(Injected {
        cause: None,
        ranks: Vec::new(),
        location: String::new(),
        amount_ns: 0,
        notes: Vec::new(),
    });
    for other in it {
        notes.push(format!(
            "also injected: {} on ranks {:?} ({})",
            other.cause.map_or("none", Cause::id),
            other.ranks,
            other.location
        ));
    }
    first.notes = notes;
    first
}

/// The `injected` block of a pipeline job: the bubble. `amount_ns` is the mean bubble per step
/// of a stage; with a slow stage, that stage's compute per step minus the other stages' mean
/// (what makes the others wait).
pub(crate) fn pipeline_injected(p: &ManifestPipeline) -> Injected {
    let mean_of = |v: &[i64]| mean(v.iter().copied());
    let schedule = match p.schedule {
        Schedule::GPipe => "GPipe",
        Schedule::OneFOneB => "1F1B",
        Schedule::Interleaved1F1B => "interleaved 1F1B",
    };
    let formula = if p.virtual_stages > 1 { "(p−1)/(m·v+p−1)" } else { "(p−1)/(m+p−1)" };
    let mut location = format!(
        "{schedule} schedule, p = {} stages, m = {} micro-batches{}: bubble {formula} = {:.1} %",
        p.stages,
        p.micro_batches,
        if p.virtual_stages > 1 { format!(", v = {}", p.virtual_stages) } else { String::new() },
        100.0 * p.formula_bubble_fraction
    );
    let (ranks, amount_ns) = match p.slow_stage {
        Some(slow) => {
            let on: Vec<u32> = p.ranks.iter().filter(|r| r.pipeline_rank == slow).map(|r| r.rank).collect();
            let mine =
                mean(p.ranks.iter().filter(|r| r.pipeline_rank == slow).map(|r| mean_of(&r.compute_ns)));
            let others =
                mean(p.ranks.iter().filter(|r| r.pipeline_rank != slow).map(|r| mean_of(&r.compute_ns)));
            location.push_str(&format!(
                "; stage {slow}'s kernels are {}× slower: the other stages idle waiting for it",
                p.slow_factor
            ));
            (on, mine - others)
        }
        None => {
            (p.ranks.iter().map(|r| r.rank).collect(), mean(p.ranks.iter().map(|r| mean_of(&r.bubble_ns))))
        }
    };
    Injected {
        cause: Some(Cause::PipelineBubble),
        ranks,
        location,
        amount_ns,
        notes: vec![format!(
            "per stage × step truth in `pipeline.ranks` (compute, window, bubble, recv/send wait); every \
             send/recv pair in `pipeline.p2p`; {} bytes per message",
            p.activation_bytes
        )],
    }
}
