//! The analysis engine: per-rank, per-step truth across the whole job.
//!
//! `rank_part` per rank and `combine` per job run, in order: collective instances per rank
//! ([`instances`]), matching across ranks, clock alignment ([`align`]), per rank × step
//! breakdown ([`breakdown`]), GPU idle and launch analysis ([`idle`]), collective statistics
//! ([`collectives`]), stragglers and balance ([`balance`]) and the critical path
//! ([`critical_path`]). Every metric's definition is in the doc comment of the module that
//! computes it and in docs/metrics.md. This layer measures; the findings are judged from its
//! figures by [`crate::diagnose`], which it never imports.

pub mod align;
pub mod attribution;
pub mod balance;
pub mod beside;
pub mod breakdown;
pub mod capture;
pub mod chain;
pub mod collectives;
mod combine;
pub mod critical_path;
pub mod fabric;
pub mod framework;
pub mod gaps;
pub mod idle;
pub mod inspector_join;
pub mod instances;
pub mod intervals;
pub mod issued;
pub mod jobs;
pub mod layout;
pub mod memory;
pub mod noise;
pub mod operators;
pub mod pipeline;
pub mod reading;
pub mod regions;
pub mod report;
pub mod roles;
pub mod serving;
pub mod stats;
pub mod waits;
pub mod whatif;
pub mod work;

use serde::{Deserialize, Serialize};

use crate::model::{Diagnostic, StringTable};
use crate::normalize::job::RankEntry;
use crate::normalize::{Job, JobError, RankSource};

pub use combine::{combine, measure, Measured};

pub const ANALYSIS_SCHEMA_VERSION: u32 = 2;

/// A spread of collective waits across ranks below this is noise, not a late rank.
pub const WAIT_NOISE_NS: i64 = 50_000;

/// What the user can set.
#[derive(Debug, Clone)]
pub struct Options {
    /// `(rank, offset_ns)` given by the user; they win over estimates.
    pub offsets: Vec<(u32, i64)>,
    pub thresholds: crate::finding::Thresholds,
    pub kernel_wait_threshold_ns: i64,
    /// nccl-tests results of the same fabric, to place the trace's collectives against.
    pub fabric: Option<crate::nccl::TestsReport>,
    /// The parallel layout the user states (`--layout tp=2,dp=4`), beside what the traces say.
    pub layout: Option<layout::UserLayout>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            offsets: Vec::new(),
            thresholds: crate::finding::Thresholds::default(),
            kernel_wait_threshold_ns: idle::DEFAULT_KERNEL_WAIT_THRESHOLD_NS,
            fabric: None,
            layout: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankInfo {
    pub rank: u32,
    /// The file it came from.
    pub source: String,
    pub rank_source: RankSource,
    pub world_size: Option<i64>,
    pub backend: Option<String>,
    pub events: u64,
    pub steps: Vec<u32>,
    /// Which lanes the time figures come from: `gpu` or `cpu` (CPU-only traces).
    pub metrics_from: breakdown::MetricsFrom,
    /// Distinct device names of `deviceProperties`.
    #[serde(default)]
    pub devices: Vec<String>,
    /// The host the trace was written on (`host_name` / `hostname`), when it says: ranks on
    /// one host share one clock ([`align`]).
    #[serde(default)]
    pub host: Option<String>,
    /// The file a rank was cut from when one file held several ranks
    /// ([`crate::normalize::multirank`]): its ranks are on the file's one clock ([`align`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    /// What the trace was recorded without, each fixed by a profiler setting
    /// ([`capture::CaptureGap`]; never `no_rank`, which `rank_source: load_order` says and
    /// [`capture::rank_gaps`] adds).
    #[serde(default)]
    pub capture_gaps: Vec<capture::CaptureGap>,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct StepEntry {
    pub step: u32,
    pub per_rank: Vec<breakdown::StepRank>,
}

/// Whole-trace figures of one rank (sums over its steps, and trace-wide overlap).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RankTotals {
    pub rank: u32,
    pub steps: usize,
    pub wall_ns: i64,
    pub compute_ns: i64,
    pub comm_ns: i64,
    pub overlap_ns: i64,
    pub exposed_comm_ns: i64,
    pub memory_ns: i64,
    pub idle_ns: i64,
    pub cpu_bound_ns: i64,
    pub launch_overhead_ns: i64,
    pub host_sync_ns: i64,
    pub data_loading_ns: i64,
    /// Idle time during which the host was loading data.
    #[serde(default)]
    pub input_ns: i64,
    /// Communication moving data vs waiting for other ranks, and the exposed part of each.
    #[serde(default)]
    pub comm_transfer_ns: i64,
    #[serde(default)]
    pub comm_wait_ns: i64,
    #[serde(default)]
    pub exposed_transfer_ns: i64,
    #[serde(default)]
    pub exposed_wait_ns: i64,
    /// exposed_comm / wall.
    pub exposed_comm_ratio: f64,
    /// comm / wall.
    pub comm_ratio: f64,
    /// overlap / comm: the share of communication hidden under compute.
    pub overlap_coverage: f64,
    /// HTA's overlap percentage: 100 × |C ∩ M| / |M| over the whole trace (not per step).
    pub overlap_pct_hta: Option<f64>,
    pub step_time: Option<balance::StepTimeStats>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileDiagnostic {
    pub file: String,
    pub rank: u32,
    #[serde(flatten)]
    pub diagnostic: Diagnostic,
}

crate::named_enum! {
    /// The schema name of the analysis JSON.
    pub enum AnalysisSchema {
        Analysis => "rankscope.analysis",
    }
}

/// What the classification understood of one rank ([`crate::normalize::coverage`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankCoverage {
    pub rank: u32,
    #[serde(flatten)]
    pub coverage: crate::normalize::coverage::Coverage,
}

/// The work per step of one rank, from its ops' shapes ([`work`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankWork {
    pub rank: u32,
    #[serde(flatten)]
    pub work: work::Work,
}

/// The CUDA / HIP graphs of one rank ([`reading::Graphs`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankGraphs {
    pub rank: u32,
    #[serde(flatten)]
    pub graphs: reading::Graphs,
}

/// The whole analysis (schema `rankscope.analysis`). It deserializes from its own JSON, so a
/// shell that gets it as text (a worker, a notebook) holds the same value.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Analysis {
    pub schema: AnalysisSchema,
    pub schema_version: u32,
    pub ranks: Vec<RankInfo>,
    /// Per rank: how much of its device and host time the classification understood, by class
    /// and library, and the largest names it did not ([`crate::normalize::coverage`]).
    #[serde(default)]
    pub coverage: Vec<RankCoverage>,
    /// Per rank that captures or replays CUDA / HIP graphs: what it did ([`reading::Graphs`]);
    /// a step in which a rank captures is set-up, not judged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphs: Vec<RankGraphs>,
    /// Per rank whose steps are an inference engine's iterations (no `ProfilerStep#N`): the
    /// iterations by phase, the decode iteration's time and communication, the host gaps
    /// between iterations ([`serving`]). Empty for a training job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serving: Vec<serving::RankServing>,
    /// Per rank whose trace records the shapes of the model's ops: FLOPs, samples and tokens
    /// per step and the model's signature ([`work`]). Empty without shapes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub work: Vec<RankWork>,
    pub steps: Vec<StepEntry>,
    pub rank_totals: Vec<RankTotals>,
    pub alignment: Vec<align::RankAlignment>,
    pub matching: instances::MatchInfo,
    /// The process groups, their roles and the mesh they form ([`layout`]); absent when no
    /// input names a group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<layout::Layout>,
    pub collectives: Vec<collectives::CollectiveStats>,
    pub stragglers: Vec<balance::StepStraggler>,
    pub straggler: Option<balance::StragglerSummary>,
    pub imbalance: Vec<balance::Imbalance>,
    pub gpu_idle: Vec<idle::StreamIdle>,
    pub launches: Vec<idle::LaunchStats>,
    pub allocations: Vec<idle::AllocInStep>,
    /// Per rank, device and step: memory allocated and reserved from the allocator's `[memory]`
    /// instants ([`memory::per_step`]); absent when the traces have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<memory::MemoryStep>,
    pub critical_path: Vec<critical_path::StepPath>,
    /// Per step: who waited for whom (see [`attribution`]).
    pub waits: Vec<attribution::StepWaits>,
    /// Where the delay starts and the way it travelled through the groups ([`chain`]); absent
    /// when no rank is consistently the one waited for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_chain: Option<chain::WaitChain>,
    /// How much the step time varies from step to step and which steps stand out ([`noise`]);
    /// absent with fewer than [`noise::MIN_STEPS`] steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<noise::Noise>,
    /// The job replayed from its traces, and what taking causes away gives ([`whatif`]);
    /// absent without collectives to replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whatif: Option<whatif::WhatIf>,
    /// The training frameworks the trace's own annotations show ([`framework`]): advice is
    /// given in their terms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frameworks: Vec<framework::FrameworkSeen>,
    /// Per rank × step: host time by annotation and by phase, collective waits taken out.
    pub regions: Vec<attribution::RegionRow>,
    pub phases: Vec<attribution::PhaseRow>,
    /// Per rank × step: where its collectives were issued from, and how much of them the host
    /// was blocked on or left exposed.
    pub comm_origins: Vec<attribution::OriginRow>,
    /// Per rank: how long its operators typically take against the same operators on the other
    /// ranks, for the batch-dependent work and for the optimizer ([`attribution::op_speed`]).
    #[serde(default)]
    pub op_speed: Vec<attribution::OpSpeed>,
    /// Per rank × step: how many operators of the step's work its main thread ran
    /// ([`attribution::StepOpsRow`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_ops: Vec<attribution::StepOpsRow>,
    /// The job's operators and kernels per step, by kind, name and shapes, added up over the
    /// ranks ([`operators`]): what `diff` matches across two runs. Empty in analyses written
    /// before it.
    #[serde(default, skip_serializing_if = "operators::Operators::is_empty")]
    pub operators: operators::Operators,
    /// Each rank's collectives as a sequence per process group, compared across ranks: the
    /// first divergence, who did not issue what, the last collective each rank entered
    /// ([`crate::sequence`]). Absent without collectives.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence: Option<crate::sequence::SequenceReport>,
    /// Pipeline parallelism: the stages the point-to-point exchanges chain, micro-batches,
    /// schedule, and per stage × step compute, bubble and receive wait ([`pipeline`]). Absent
    /// without a pipeline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<pipeline::PipelineReport>,
    /// The collectives against nccl-tests (empty without nccl-tests input).
    pub fabric: Vec<fabric::FabricComparison>,
    /// The evidence dropped beside the traces (cluster metrics, NCCL RAS status, NCCL
    /// Inspector logs, step logs), read and joined with them ([`beside`]); absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beside: Option<beside::Beside>,
    /// Filled by the judging layer ([`crate::diagnose::findings`]).
    pub findings: Vec<crate::finding::Finding>,
    pub diagnostics: Vec<FileDiagnostic>,
    pub errors: Vec<JobError>,
}

impl Analysis {
    /// The job's step time: the median over ranks and steps of the step windows (the mean of
    /// the middle two for an even count). The one "step" every shell reads a gain against: the
    /// report's headline, the gate `step_time_ms`, the app's "% of the step".
    pub fn typical_step_ns(&self) -> f64 {
        stats::median_f(self.steps.iter().flat_map(|s| s.per_rank.iter().map(|r| r.wall_ns as f64)).collect())
    }
}

/// Everything the analysis needs from one rank, computed where the rank's tables live (a Web
/// Worker in the app, one thread per file in the CLI) and small enough to send between threads:
/// instances, per-step rows, totals, idle and launch figures, and the rank's chain per step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankPart {
    pub info: RankInfo,
    pub world_size: Option<i64>,
    pub instances: Vec<instances::Instance>,
    /// `(step, figures)` per step window, in time order.
    pub steps: Vec<(u32, breakdown::StepRank)>,
    /// CPU `ProfilerStep#N` starts, for the step-start alignment fallback.
    pub step_starts: Vec<(u32, i64)>,
    pub steps_synthetic: bool,
    pub totals: RankTotals,
    pub gpu_idle: Vec<idle::StreamIdle>,
    pub launch: Option<idle::LaunchStats>,
    pub allocations: Vec<idle::AllocInStep>,
    /// Memory per device and step ([`memory::per_step`]).
    #[serde(default)]
    pub memory: Vec<memory::MemoryStep>,
    /// This rank's chain for every step (the job level picks the bounding rank's).
    pub chains: Vec<critical_path::StepPath>,
    /// This rank's work before each of its collectives, for the cross-rank critical path.
    pub segments: Vec<critical_path::Segment>,
    /// The communication union `M` and its part under compute `C ∩ M` (rank clock), from
    /// which the job level splits exposed communication into transfer and wait.
    #[serde(default)]
    pub comm_set: Vec<intervals::Iv>,
    #[serde(default)]
    pub overlap_set: Vec<intervals::Iv>,
    /// Where the host's time goes, by annotation and phase.
    #[serde(default)]
    pub regions: regions::RankRegions,
    /// The collective calls the host issued (`c10d::*`), for the mismatch engine.
    #[serde(default)]
    pub issued: Vec<issued::Issued>,
    /// Per step: the stage figures of a pipeline rank (empty without exchanges or stage
    /// annotations).
    #[serde(default)]
    pub pipe: pipeline::RankPipe,
    /// The process groups this rank's trace lists ([`layout::rank_claims`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<layout::GroupClaim>,
    /// How the rank was read: what the classification understood and its CUDA / HIP graphs
    /// ([`reading`]).
    #[serde(default)]
    pub reading: reading::Reading,
    /// Each step as a program for the what-if replay ([`whatif::program`]).
    #[serde(default)]
    pub programs: Vec<whatif::program::StepProgram>,
    /// The work per step from the ops' shapes ([`work`]); `None` without shapes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<work::Work>,
    /// This rank's operators and kernels per step, bounded ([`operators::rank_ops`]).
    #[serde(default, skip_serializing_if = "operators::Operators::is_empty")]
    pub operators: operators::Operators,
    pub diagnostics: Vec<FileDiagnostic>,
}

/// The per-rank half of the analysis.
pub fn rank_part(r: &RankEntry, strings: &StringTable, kernel_wait_threshold_ns: i64) -> RankPart {
    rank_part_with(r, strings, kernel_wait_threshold_ns, &crate::join::Serial)
}

/// [`rank_part`], its independent passes handed to `j` two at a time (the regions, the costliest
/// pass, beside the step figures, the idle time, the collectives and the issued ops; then the
/// launch statistics and allocations beside the pipeline and the critical path): the same part
/// whatever `j` does.
pub fn rank_part_with(
    r: &RankEntry,
    strings: &StringTable,
    kernel_wait_threshold_ns: i64,
    j: &impl crate::join::Join,
) -> RankPart {
    let mut work = roles::Work::of(&r.trace);
    let windows = breakdown::step_windows(r, &work.gpu);
    let blocked = roles::blocked_waits(&r.trace, strings);
    let (regions, (sets, gaps, rows, gpu_idle, instances, issued)) = j.join(
        || regions::rank_regions(r, strings, &windows, &blocked),
        || {
            let sets = breakdown::rank_sets(r, strings, &work, &blocked);
            let gaps = gaps::GapClassifier::new(
                r,
                strings,
                work.side(sets.source.lane_kind()),
                kernel_wait_threshold_ns,
            );
            let rows: Vec<breakdown::StepRank> = windows
                .iter()
                .map(|&(_, lo, hi)| breakdown::window(r.rank, &sets, Some(&gaps), lo, hi))
                .collect();
            (
                sets,
                gaps,
                rows,
                idle::stream_idle(r, &work.gpu, kernel_wait_threshold_ns),
                instances::rank_instances(r, strings),
                issued::issued_ops(r, strings),
            )
        },
    );
    let side = sets.source.lane_kind();
    let d = r.trace.meta.distributed.clone().unwrap_or_default();
    let info = RankInfo {
        rank: r.rank,
        source: r.trace.source.clone(),
        rank_source: r.source,
        world_size: d.world_size,
        backend: d.backend,
        events: r.trace.counts.total,
        steps: r.norm.steps.number.clone(),
        metrics_from: sets.source,
        devices: {
            let mut v: Vec<String> = r.trace.meta.devices.iter().map(|d| d.name.clone()).collect();
            v.sort();
            v.dedup();
            v
        },
        host: r.trace.meta.host_name.as_deref().map(str::trim).filter(|h| !h.is_empty()).map(str::to_string),
        clock: r.trace.meta.in_file.as_ref().map(|f| f.file.clone()),
        capture_gaps: capture::gaps_of(r, strings),
    };
    let sum = |f: fn(&breakdown::StepRank) -> i64| rows.iter().map(f).sum::<i64>();
    let wall = sum(|s| s.wall_ns);
    let comm = sum(|s| s.comm_ns);
    let overlap = sum(|s| s.overlap_ns);
    let exposed = sum(|s| s.exposed_comm_ns);
    let whole_comm = sets.comm.len_ns();
    let ratio = |a: i64, b: i64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
    let totals = RankTotals {
        rank: r.rank,
        steps: rows.len(),
        wall_ns: wall,
        compute_ns: sum(|s| s.compute_ns),
        comm_ns: comm,
        overlap_ns: overlap,
        exposed_comm_ns: exposed,
        memory_ns: sum(|s| s.memory_ns),
        idle_ns: sum(|s| s.idle_ns),
        cpu_bound_ns: sum(|s| s.cpu_bound_ns),
        launch_overhead_ns: sum(|s| s.launch_overhead_ns),
        host_sync_ns: sum(|s| s.host_sync_ns),
        data_loading_ns: sum(|s| s.data_loading_ns),
        input_ns: sum(|s| s.input_ns),
        comm_transfer_ns: 0,
        comm_wait_ns: 0,
        exposed_transfer_ns: 0,
        exposed_wait_ns: 0,
        exposed_comm_ratio: ratio(exposed, wall),
        comm_ratio: ratio(comm, wall),
        overlap_coverage: ratio(overlap, comm),
        overlap_pct_hta: (whole_comm > 0)
            .then(|| 100.0 * sets.compute.intersect(&sets.comm).len_ns() as f64 / whole_comm as f64),
        step_time: balance::step_time_stats(&rows.iter().map(|s| s.wall_ns).collect::<Vec<_>>()),
    };
    let steps: Vec<(u32, breakdown::StepRank)> = windows.iter().map(|w| w.0).zip(rows).collect();
    let side_work =
        std::mem::take(if side == crate::model::LaneKind::Gpu { &mut work.gpu } else { &mut work.cpu });
    let memory = memory::per_step(r, strings, &windows);
    let ((launch, allocations), (pipe, comm_set, overlap_set, chains, segments, programs)) = j.join(
        || (idle::launch_stats(r), idle::allocations(r)),
        || {
            let device_compute = (sets.source == breakdown::MetricsFrom::Gpu).then_some(&sets.compute);
            let pipe = pipeline::rank_pipe(r, strings, &windows, &instances, device_compute);
            let comm_set = sets.comm.intervals().to_vec();
            let overlap_set = sets.compute.intersect(&sets.comm).intervals().to_vec();
            let busy = if sets.source == breakdown::MetricsFrom::Cpu {
                whatif::program::host_busy(&r.trace, &blocked, &instances)
            } else {
                sets.compute.union(&sets.memory)
            };
            let programs = whatif::program::programs(
                &windows,
                &instances,
                &busy,
                sets.source == breakdown::MetricsFrom::Cpu,
            );
            let ctx = critical_path::RankCtx::new(r, sets, windows, gaps, side_work);
            let chains: Vec<_> = ctx
                .windows
                .iter()
                .map(|&(step, lo, hi)| critical_path::chain(&ctx, strings, step, lo, hi))
                .collect();
            let segments = critical_path::segments(&ctx, &instances);
            (pipe, comm_set, overlap_set, chains, segments, programs)
        },
    );
    let st = &r.norm.steps;
    let work = work::of(r, strings, totals.compute_ns);
    let operators =
        operators::rank_ops(r, strings, &steps.iter().map(|s| s.0).collect::<Vec<_>>(), totals.wall_ns);
    RankPart {
        info,
        world_size: d.world_size,
        instances,
        steps,
        step_starts: st.number.iter().copied().zip(st.start_ns.iter().copied()).collect(),
        steps_synthetic: st.synthetic,
        totals,
        gpu_idle,
        launch,
        allocations,
        memory,
        chains,
        segments,
        comm_set,
        overlap_set,
        regions,
        issued,
        pipe,
        groups: layout::rank_claims(&r.trace, strings),
        reading: reading::rank_reading(r, strings),
        programs,
        work,
        operators,
        diagnostics: r
            .trace
            .diagnostics
            .sorted()
            .into_iter()
            .map(|d| FileDiagnostic { file: r.trace.source.clone(), rank: r.rank, diagnostic: d })
            .collect(),
    }
}
