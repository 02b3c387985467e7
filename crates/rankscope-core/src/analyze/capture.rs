//! What a trace lacks that rankscope would read, each with the profiler setting that fixes it
//! (issue 37, item 8): sizes without `record_shapes=True`, memory without
//! `profile_memory=True`, steps without a schedule and `prof.step()`, and so on. Per rank, from
//! the trace alone; the report lists each gap once with the ranks that have it
//! (docs/analysis-schema.md `ranks[].capture_gaps`, README "How to capture").

use crate::model::{StringTable, MEMORY_EVENT};
use crate::normalize::job::RankEntry;
use crate::normalize::RankSource;

crate::named_enum! {
    /// One thing a trace was recorded without.
    pub enum CaptureGap {
        /// No `ProfilerStep#N` (nor an inference engine's iterations): the whole trace is one
        /// step, and nothing per step can be told.
        NoSteps => "no_steps",
        /// Operators ran but none carries `Input Dims`: message sizes of annotations, FLOPs,
        /// tokens and shape mismatches are unknown.
        NoShapes => "no_shapes",
        /// No `[memory]` instants: no memory per step, no allocations in the step.
        NoMemory => "no_memory",
        /// No `python_function` events: no Python call stacks for the slow operators.
        NoStack => "no_stack",
        /// The rank came from load order: neither `distributedInfo.rank` nor the file name
        /// said it.
        NoRank => "no_rank",
        /// `distributedInfo` without `pg_config`: process groups are told apart by size only.
        NoProcessGroups => "no_process_groups",
        /// The trace lists GPUs but holds no GPU kernel: the device side was not recorded.
        NoGpuKernels => "no_gpu_kernels",
    }
}

impl CaptureGap {
    /// What is missing, in a few words.
    pub fn missing(self) -> &'static str {
        match self {
            Self::NoSteps => "steps not marked (no ProfilerStep#N)",
            Self::NoShapes => "sizes not recorded (no Input Dims)",
            Self::NoMemory => "memory not recorded (no [memory] events)",
            Self::NoStack => "call stacks not recorded",
            Self::NoRank => "rank not in the trace nor the file name",
            Self::NoProcessGroups => "process groups not listed (no pg_config)",
            Self::NoGpuKernels => "GPU activity not recorded (no kernels)",
        }
    }

    /// The setting that fixes it.
    pub fn fix(self) -> &'static str {
        match self {
            Self::NoSteps => "profile with schedule=torch.profiler.schedule(wait=1, warmup=1, active=3) and call prof.step() once per iteration",
            Self::NoShapes => "set record_shapes=True",
            Self::NoMemory => "set profile_memory=True",
            Self::NoStack => "set with_stack=True (costly: only to locate the callers of slow operators)",
            Self::NoRank => "write one file per rank with the rank in its name (rank3.json), or profile after torch.distributed.init_process_group (distributedInfo)",
            Self::NoProcessGroups => "profile with a newer PyTorch, whose distributedInfo lists pg_config",
            Self::NoGpuKernels => "add ProfilerActivity.CUDA to activities",
        }
    }
}

/// The gaps of one rank's trace, in declaration order: what the trace alone tells
/// ([`super::RankInfo::capture_gaps`]); the rank's own gap is the job's to tell ([`rank_gaps`]).
pub fn gaps_of(r: &RankEntry, strings: &StringTable) -> Vec<CaptureGap> {
    let t = &r.trace;
    let cat = |c: &str| t.counts.by_cat.get(c).copied().unwrap_or(0);
    let mut out = Vec::new();
    if r.norm.steps.synthetic || r.norm.steps.from_optimizer {
        out.push(CaptureGap::NoSteps);
    }
    let ops = cat("cpu_op") + cat("Operator");
    if ops > 0 && t.counts.with_input_dims == 0 {
        out.push(CaptureGap::NoShapes);
    }
    if !(0..t.counters.len()).any(|k| strings.get(t.counters.name[k]) == MEMORY_EVENT) {
        out.push(CaptureGap::NoMemory);
    }
    if cat("python_function") == 0 {
        out.push(CaptureGap::NoStack);
    }
    if t.meta.distributed.as_ref().is_some_and(|d| d.pg_config.is_empty()) {
        out.push(CaptureGap::NoProcessGroups);
    }
    let kernels = cat("kernel") + cat("Kernel");
    if !t.meta.devices.is_empty() && kernels == 0 {
        out.push(CaptureGap::NoGpuKernels);
    }
    out
}

/// Every gap of a rank: its trace's, and [`CaptureGap::NoRank`] when the job took its rank
/// from load order (the job decides ranks over every file: a part alone cannot tell).
pub fn rank_gaps(r: &super::RankInfo) -> Vec<CaptureGap> {
    CaptureGap::ALL
        .iter()
        .copied()
        .filter(|&g| {
            r.capture_gaps.contains(&g) || (g == CaptureGap::NoRank && r.rank_source == RankSource::LoadOrder)
        })
        .collect()
}

/// Each gap of the job once, with the ranks that have it (ranks in order), in declaration
/// order: the report's lines.
pub fn job_gaps(ranks: &[super::RankInfo]) -> Vec<(CaptureGap, Vec<u32>)> {
    CaptureGap::ALL
        .iter()
        .filter_map(|&g| {
            let mut rs: Vec<u32> =
                ranks.iter().filter(|r| rank_gaps(r).contains(&g)).map(|r| r.rank).collect();
            rs.sort_unstable();
            (!rs.is_empty()).then_some((g, rs))
        })
        .collect()
}
