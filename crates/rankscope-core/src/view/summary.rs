//! The small per-rank summary a worker sends to the app, and the job facts built from them.
//!
//! The big tables of a rank stay where they were built (a Web Worker in the app); everything the
//! app shows about the job as a whole is computed from these summaries, a few kB per rank. The
//! figures are the `rankscope.inspect` report's (see `docs/inspect-schema.md`), so the app and
//! `rankscope inspect` agree by construction.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::timeline::TimelineIndex;
use crate::inspect::FileReport;
use crate::model::{Diagnostic, LaneKind, Severity};
use crate::normalize::job::RankEntry;
use crate::normalize::RankSource;

/// One rank as the app's Summary and Diagnostics views see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankSummary {
    pub file: String,
    pub rank: u32,
    /// How the rank was decided: `user`, `distributed_info`, `file_name` or `load_order`.
    pub rank_source: RankSource,
    /// `distributedInfo.rank` as written (the input of the job-level rank decision).
    pub claimed_rank: Option<i64>,
    pub world_size: Option<i64>,
    pub backend: Option<String>,
    pub nccl_version: Option<String>,
    pub host_name: Option<String>,
    pub devices: Vec<DeviceSummary>,
    pub gzip: bool,
    pub input_bytes: u64,
    pub text_bytes: u64,
    /// First slice start and last slice end, absolute ns on this rank's own clock.
    pub span_start_ns: i64,
    pub span_end_ns: i64,
    /// Elements of `traceEvents` that were objects (`events.total` of the inspect report).
    pub events: u64,
    /// Rows of the event table.
    pub rows: u64,
    pub gpu_ops: u64,
    /// Communication kernels: GPU-side slices classified as communication.
    pub comm_kernels: u64,
    pub steps: Vec<StepSpan>,
    /// True when there were no step markers (one whole-trace step).
    pub steps_synthetic: bool,
    /// Lanes in display order: CPU threads (by sort index, then id), then GPU streams (by
    /// device, then stream).
    pub lanes: Vec<LaneSummary>,
    /// Most severe first, then by kind ([`sort_diagnostics`]).
    pub diagnostics: Vec<Diagnostic>,
    /// Events too deeply nested to be drawn.
    pub hidden_events: u64,
    /// The allocator's `[memory]` samples per device, in a few figures (the timeline's memory
    /// track; empty without `profile_memory`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<crate::analyze::memory::MemoryTrack>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSummary {
    pub id: i64,
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepSpan {
    pub step: u32,
    pub start_ns: i64,
    pub end_ns: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneSummary {
    /// The lane's id within its rank (what tile queries name).
    pub lane: u32,
    pub gpu: bool,
    /// The thread's name (Kineto writes `thread 123 (python)`), `thread 123`, or `GPU 0 stream 7`.
    pub label: String,
    pub events: u32,
    /// Rows of nested slices the timeline draws for it.
    pub depth: u32,
}

/// Sorts diagnostics as the core does: most severe first, then by kind.
pub fn sort_diagnostics(d: &mut [Diagnostic]) {
    d.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.kind.cmp(&b.kind)));
}

impl RankSummary {
    /// The summary of an assembled rank. `report` is that rank's inspect report entry.
    pub fn new(
        entry: &RankEntry,
        report: &FileReport,
        index: &TimelineIndex,
        strings: &crate::model::StringTable,
    ) -> RankSummary {
        let t = &entry.trace;
        let lanes: Vec<LaneSummary> = t
            .lanes
            .display_order()
            .into_iter()
            .map(|l| LaneSummary {
                lane: l as u32,
                gpu: t.lanes.kind[l] == LaneKind::Gpu,
                label: t.lanes.label(l, strings),
                events: t.lanes.events.get(l).copied().unwrap_or(0),
                depth: index.depth(l as u32),
            })
            .collect();
        let comm_kernels = report.collectives.iter().filter(|c| c.side == "gpu").map(|c| c.count).sum();
        RankSummary {
            file: report.file.clone(),
            rank: report.rank,
            rank_source: report.rank_source,
            claimed_rank: t.meta.distributed.as_ref().and_then(|d| d.rank),
            world_size: report.world_size,
            backend: report.backend.clone(),
            nccl_version: report.nccl_version.clone(),
            host_name: report.host_name.clone(),
            devices: report
                .devices
                .iter()
                .map(|d| DeviceSummary { id: d.id, name: d.name.clone() })
                .collect(),
            gzip: report.gzip,
            input_bytes: report.input_bytes,
            text_bytes: report.text_bytes,
            span_start_ns: report.span.start_ns,
            span_end_ns: report.span.end_ns,
            events: report.events.total,
            rows: report.events.rows,
            gpu_ops: report.events.gpu_ops,
            comm_kernels,
            steps: report
                .steps
                .iter()
                .map(|s| StepSpan { step: s.step, start_ns: s.start_ns, end_ns: s.start_ns + s.dur_ns })
                .collect(),
            steps_synthetic: report.steps_synthetic,
            lanes,
            diagnostics: report.diagnostics.clone(),
            hidden_events: index.hidden,
            memory: Vec::new(),
        }
    }

    /// Diagnostics that say something is wrong (anything above `info`).
    pub fn problems(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.severity > Severity::Info).count()
    }
}

/// What the Summary view says about the job as a whole.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobFacts {
    /// Distinct ranks loaded.
    pub ranks: usize,
    /// Distinct `world_size` values claimed by the files.
    pub world_sizes: Vec<i64>,
    /// Ranks below the largest claimed world size that no file provides.
    pub missing_ranks: Vec<u32>,
    /// Ranks claimed by more than one file.
    pub duplicate_ranks: Vec<u32>,
    pub backends: Vec<String>,
    /// Distinct device names, each with the most devices of that name any one file lists.
    pub devices: Vec<(String, usize)>,
    /// Distinct step numbers over all ranks, and whether any rank had no markers.
    pub steps: Vec<u32>,
    pub steps_synthetic: bool,
    /// Earliest start and latest end over all ranks, each on its own clock (not aligned).
    pub span_start_ns: i64,
    pub span_end_ns: i64,
    pub events: u64,
    pub input_bytes: u64,
}

impl JobFacts {
    pub fn from_ranks<'a>(ranks: impl IntoIterator<Item = &'a RankSummary>) -> JobFacts {
        let mut f = JobFacts { span_start_ns: i64::MAX, span_end_ns: i64::MIN, ..JobFacts::default() };
        let mut seen = BTreeSet::new();
        let mut dup = BTreeSet::new();
        let mut ws = BTreeSet::new();
        let mut backends = BTreeSet::new();
        let mut devices: BTreeMap<String, usize> = BTreeMap::new();
        let mut steps = BTreeSet::new();
        for r in ranks {
            if !seen.insert(r.rank) {
                dup.insert(r.rank);
            }
            ws.extend(r.world_size);
            backends.extend(r.backend.clone());
            let mut per: BTreeMap<&str, usize> = BTreeMap::new();
            for d in &r.devices {
                *per.entry(d.name.as_str()).or_default() += 1;
            }
            for (name, n) in per {
                let e = devices.entry(name.to_string()).or_default();
                *e = (*e).max(n);
            }
            steps.extend(r.steps.iter().map(|s| s.step));
            f.steps_synthetic |= r.steps_synthetic;
            if r.span_end_ns > r.span_start_ns || r.rows > 0 {
                f.span_start_ns = f.span_start_ns.min(r.span_start_ns);
                f.span_end_ns = f.span_end_ns.max(r.span_end_ns);
            }
            f.events += r.events;
            f.input_bytes += r.input_bytes;
        }
        if f.span_start_ns > f.span_end_ns {
            f.span_start_ns = 0;
            f.span_end_ns = 0;
        }
        f.ranks = seen.len();
        f.world_sizes = ws.into_iter().collect();
        f.missing_ranks = match f.world_sizes.last() {
            Some(&w) if w > 0 && w <= 100_000 => (0..w as u32).filter(|r| !seen.contains(r)).collect(),
            _ => Vec::new(),
        };
        f.duplicate_ranks = dup.into_iter().collect();
        f.backends = backends.into_iter().collect();
        f.devices = devices.into_iter().collect();
        f.steps = steps.into_iter().collect();
        f
    }
}
