//! `inspect`: what each file holds, as a versioned, serializable report.
//!
//! Schema `rankscope.inspect`, version [`INSPECT_SCHEMA_VERSION`]; documented field by field in
//! `docs/inspect-schema.md`. Additive changes keep the version; anything else bumps it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::*;
use crate::normalize::{job::RankEntry, Job, JobError, RankSource};

pub const INSPECT_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub struct InspectReport {
    pub schema: &'static str,
    pub schema_version: u32,
    pub files: Vec<FileReport>,
    /// Files that are not traces at all.
    pub failed: Vec<FailedFile>,
    pub job: JobSummary,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailedFile {
    pub file: String,
    pub error: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobSummary {
    pub ranks: usize,
    /// Distinct `world_size` values claimed by the files.
    pub world_sizes: Vec<i64>,
    /// Ranks below the largest claimed world size that no file provides.
    pub missing_ranks: Vec<u32>,
    pub errors: Vec<JobError>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    pub file: String,
    pub rank: u32,
    pub rank_source: RankSource,
    pub world_size: Option<i64>,
    pub backend: Option<String>,
    pub nccl_version: Option<String>,
    pub process_groups: Vec<ProcessGroup>,
    pub form: &'static str,
    pub gzip: bool,
    pub input_bytes: u64,
    pub text_bytes: u64,
    pub schema_version: Option<i64>,
    pub trace_name: Option<String>,
    pub host_name: Option<String>,
    pub base_time_ns: Option<i64>,
    pub display_time_unit: Option<String>,
    pub devices: Vec<Device>,
    pub span: Span,
    pub events: EventSummary,
    pub steps: Vec<StepSummary>,
    /// True when there were no step markers (one whole-trace step).
    pub steps_synthetic: bool,
    /// True when there were no step markers and the steps are the training iterations, each
    /// ending with its optimizer's step (`Optimizer.step#…`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub steps_from_optimizer: bool,
    pub gpu_steps: Vec<u32>,
    pub lanes: Vec<LaneSummary>,
    pub collectives: Vec<CollectiveCount>,
    pub diagnostics: Vec<Diagnostic>,
    /// Bytes held by the columnar tables (strings excluded), and per event of the file.
    pub table_bytes: u64,
    pub table_bytes_per_event: f64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Span {
    /// First slice start and last slice end, absolute ns.
    pub start_ns: i64,
    pub end_ns: i64,
    pub dur_ns: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct EventSummary {
    /// Elements of `traceEvents` that were objects.
    pub total: u64,
    pub by_ph: BTreeMap<String, u64>,
    pub by_cat: BTreeMap<String, u64>,
    pub by_class: BTreeMap<String, u64>,
    /// Rows of the event table (slices incl. closed `B`/`E` pairs, instants).
    pub rows: u64,
    pub slices: u64,
    pub instants: u64,
    pub flows: u64,
    pub counter_samples: u64,
    /// The caching allocator's `[memory]` instants read (`profile_memory=True`).
    #[serde(default)]
    pub memory_samples: u64,
    /// GPU kernels and memory operations (categories kernel, gpu_memcpy, gpu_memset, and the
    /// 2021 spellings Kernel, Memcpy, Memset).
    pub gpu_ops: u64,
    /// Of those, how many were linked to their launching runtime call by correlation id.
    pub gpu_ops_linked: u64,
    /// Kernels whose name starts with `ncclKernel` or `ncclDevKernel`.
    pub nccl_kernels: u64,
    /// Host CUDA / HIP runtime and driver calls (categories cuda_runtime, cuda_driver, runtime).
    pub runtime_calls: u64,
    pub record_param_comms: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct StepSummary {
    pub step: u32,
    pub start_ns: i64,
    pub dur_ns: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LaneSummary {
    pub kind: LaneKind,
    pub pid: String,
    pub tid: String,
    pub name: String,
    pub device: Option<i64>,
    pub stream: Option<i64>,
    pub events: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct CollectiveCount {
    pub kind: CollKind,
    /// Where the events are: `gpu` (kernels) or `cpu` (annotations and ops).
    pub side: &'static str,
    pub count: u64,
}

const GPU_OP_CATS: &[&str] = &["kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"];

fn id_text(k: IdKey, s: &StringTable) -> String {
    match k {
        IdKey::Int(v) => v.to_string(),
        IdKey::Str(id) => s.get(id).to_string(),
    }
}

/// Builds the report of a job (plus the files that failed outright).
pub fn report(job: &Job, failed: Vec<FailedFile>) -> InspectReport {
    report_with(job, failed, &crate::join::Serial)
}

/// [`report`], the files' reports and the halves of a large file's rows counted over `j`: the
/// same report.
pub fn report_with(job: &Job, failed: Vec<FailedFile>, j: &impl crate::join::Join) -> InspectReport {
    let ranks: Vec<&RankEntry> = job.ranks.iter().collect();
    let files: Vec<FileReport> = crate::join::map(j, ranks, &|r| file_report(r, &job.strings, j, SPLIT_ROWS));
    let mut world_sizes: Vec<i64> = files.iter().filter_map(|f| f.world_size).collect();
    world_sizes.sort_unstable();
    world_sizes.dedup();
    let present: std::collections::BTreeSet<u32> = files.iter().map(|f| f.rank).collect();
    let missing_ranks = match world_sizes.last() {
        Some(&w) if w > 0 && w <= 100_000 => (0..w as u32).filter(|r| !present.contains(r)).collect(),
        _ => Vec::new(),
    };
    InspectReport {
        schema: "rankscope.inspect",
        schema_version: INSPECT_SCHEMA_VERSION,
        job: JobSummary { ranks: present.len(), world_sizes, missing_ranks, errors: job.errors.clone() },
        files,
        failed,
    }
}

/// What [`file_report`] counts over the rows, for a range of them (the halves of a large file
/// counted side by side and added).
#[derive(Default)]
struct RowCounts {
    slices: u64,
    instants: u64,
    gpu_ops: u64,
    linked: u64,
    nccl: u64,
    runtime: u64,
    rpc: u64,
    class_counts: [u64; Class::ALL.len()],
    colls: BTreeMap<(CollKind, &'static str), u64>,
}

impl RowCounts {
    fn add(mut self, o: RowCounts) -> RowCounts {
        self.slices += o.slices;
        self.instants += o.instants;
        self.gpu_ops += o.gpu_ops;
        self.linked += o.linked;
        self.nccl += o.nccl;
        self.runtime += o.runtime;
        self.rpc += o.rpc;
        for (a, b) in self.class_counts.iter_mut().zip(o.class_counts) {
            *a += b;
        }
        for (k, n) in o.colls {
            *self.colls.entry(k).or_default() += n;
        }
        self
    }
}

/// Rows below which the count is not split (a thread costs more than it saves).
const SPLIT_ROWS: usize = 1 << 17;

/// The counts of rows `lo..hi` (`linked_rows`: the rows linked to a launch, sorted, no
/// repeats), split over `j` when they are `split_rows` or more.
fn row_counts(
    t: &RankTrace,
    strings: &StringTable,
    linked_rows: &[EventIdx],
    (lo, hi): (usize, usize),
    j: &impl crate::join::Join,
    split_rows: usize,
) -> RowCounts {
    if hi - lo >= split_rows.max(2) {
        let mid = lo + (hi - lo) / 2;
        let (a, b) = j.join(
            || row_counts(t, strings, linked_rows, (lo, mid), j, split_rows),
            || row_counts(t, strings, linked_rows, (mid, hi), j, split_rows),
        );
        return a.add(b);
    }
    let e = &t.events;
    let mut c = RowCounts::default();
    let mut cat_memo: FxHashMap<StrId, (bool, bool)> = FxHashMap::default();
    let mut name_memo: FxHashMap<StrId, (bool, bool)> = FxHashMap::default();
    // The linked rows in this range, walked alongside (they are sorted): one comparison per row,
    // not a lookup in a set of millions of ids.
    let first = linked_rows.partition_point(|g| (g.0 as usize) < lo);
    let mut next_linked = linked_rows[first..].iter().map(|g| g.0 as usize).peekable();
    for i in lo..hi {
        let is_linked = next_linked.next_if_eq(&i).is_some();
        if let Some(n) = c.class_counts.get_mut(e.class[i] as usize) {
            *n += 1;
        }
        match e.kind[i] {
            EventKind::Slice => c.slices += 1,
            EventKind::Instant => c.instants += 1,
        }
        let (gpu_op, rt) = *cat_memo.entry(e.cat[i]).or_insert_with(|| {
            let c = strings.get(e.cat[i]);
            (
                GPU_OP_CATS.iter().any(|g| g.eq_ignore_ascii_case(c)),
                crate::normalize::CUDA_RUNTIME_CATS.iter().any(|g| g.eq_ignore_ascii_case(c)),
            )
        });
        if e.kind[i] == EventKind::Slice {
            if gpu_op {
                c.gpu_ops += 1;
                if is_linked {
                    c.linked += 1;
                }
            }
            if rt {
                c.runtime += 1;
            }
            let (is_nccl, is_rpc) = *name_memo.entry(e.name[i]).or_insert_with(|| {
                let n = strings.get(e.name[i]);
                (n.starts_with("ncclKernel") || n.starts_with("ncclDevKernel"), n == "record_param_comms")
            });
            c.nccl += u64::from(is_nccl);
            c.rpc += u64::from(is_rpc);
        }
        if e.class[i] == Class::Communication && e.kind[i] == EventKind::Slice {
            let side = if t.lanes.kind[e.lane[i].0 as usize] == LaneKind::Gpu { "gpu" } else { "cpu" };
            *c.colls.entry((e.coll_kind(i), side)).or_default() += 1;
        }
    }
    c
}

fn file_report(
    r: &RankEntry,
    strings: &StringTable,
    j: &impl crate::join::Join,
    split_rows: usize,
) -> FileReport {
    let t = &r.trace;
    let e = &t.events;
    let (start, end) = r.norm.span;
    // `link` lists the rows in order; sorted here only if something else made the list.
    let gpu = &r.norm.links.gpu;
    let linked_rows: std::borrow::Cow<'_, [EventIdx]> = if gpu.windows(2).all(|w| w[0] < w[1]) {
        std::borrow::Cow::Borrowed(gpu)
    } else {
        let mut v = gpu.clone();
        v.sort_unstable();
        v.dedup();
        std::borrow::Cow::Owned(v)
    };
    let RowCounts { slices, instants, gpu_ops, linked, nccl, runtime, rpc, class_counts, colls } =
        row_counts(t, strings, &linked_rows, (0, e.len()), j, split_rows);
    let d = t.meta.distributed.clone().unwrap_or_default();
    let steps = &r.norm.steps;
    let mut lanes: Vec<LaneSummary> = (0..t.lanes.len())
        .map(|l| LaneSummary {
            kind: t.lanes.kind[l],
            pid: id_text(t.lanes.pid[l], strings),
            tid: id_text(t.lanes.tid[l], strings),
            name: strings.get(t.lanes.name[l]).to_string(),
            device: Some(t.lanes.device[l]).filter(|v| *v >= 0),
            stream: Some(t.lanes.stream[l]).filter(|v| *v >= 0),
            events: t.lanes.events.get(l).copied().unwrap_or(0),
        })
        .collect();
    lanes.sort_by(|a, b| (a.kind, &a.pid, &a.tid).cmp(&(b.kind, &b.pid, &b.tid)));
    let by_class: BTreeMap<String, u64> = Class::ALL
        .iter()
        .zip(class_counts)
        .filter(|&(_, n)| n > 0)
        .map(|(c, n)| (c.name().to_string(), n))
        .collect();
    let is_memory = |k: usize| strings.get(t.counters.name[k]) == MEMORY_EVENT;
    FileReport {
        file: t.source.clone(),
        rank: r.rank,
        rank_source: r.source,
        world_size: d.world_size,
        backend: d.backend,
        nccl_version: d.nccl_version,
        process_groups: d.pg_config,
        form: t.meta.form,
        gzip: t.meta.gzip,
        input_bytes: t.input_bytes,
        text_bytes: t.text_bytes,
        schema_version: t.meta.schema_version,
        trace_name: t.meta.trace_name.clone(),
        host_name: t.meta.host_name.clone(),
        base_time_ns: t.meta.base_time_ns,
        display_time_unit: t.meta.display_time_unit.clone(),
        devices: t.meta.devices.clone(),
        span: Span { start_ns: start, end_ns: end, dur_ns: end - start },
        events: EventSummary {
            total: t.counts.total,
            by_ph: t.counts.by_ph.clone(),
            by_cat: t.counts.by_cat.clone(),
            by_class,
            rows: e.len() as u64,
            slices,
            instants,
            flows: t.flows.len() as u64,
            counter_samples: (0..t.counters.len()).filter(|&k| !is_memory(k)).count() as u64,
            memory_samples: (0..t.counters.len())
                .filter(|&k| is_memory(k) && strings.get(t.counters.series[k]) == "Bytes")
                .count() as u64,
            gpu_ops,
            gpu_ops_linked: linked,
            nccl_kernels: nccl,
            runtime_calls: runtime,
            record_param_comms: rpc,
        },
        steps: (0..steps.len())
            .map(|k| StepSummary {
                step: steps.number[k],
                start_ns: steps.start_ns[k],
                dur_ns: steps.end_ns[k] - steps.start_ns[k],
            })
            .collect(),
        steps_synthetic: steps.synthetic,
        steps_from_optimizer: steps.from_optimizer,
        gpu_steps: steps.gpu_numbers.clone(),
        lanes,
        collectives: colls
            .into_iter()
            .map(|((kind, side), count)| CollectiveCount { kind, side, count })
            .collect(),
        diagnostics: t.diagnostics.sorted(),
        table_bytes: t.table_bytes() as u64,
        table_bytes_per_event: if t.counts.total == 0 {
            0.0
        } else {
            t.table_bytes() as f64 / t.counts.total as f64
        },
    }
}

/// A plain-text rendering for people.
pub fn render_text(r: &InspectReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let ms = |ns: i64| ns as f64 / 1e6;
    for f in &r.files {
        let _ = writeln!(s, "{}", f.file);
        let _ = writeln!(
            s,
            "  rank {} ({}), world size {}, backend {}{}",
            f.rank,
            match f.rank_source {
                RankSource::User => "given by user",
                RankSource::DistributedInfo => "distributedInfo",
                RankSource::InFile => "from its process in a multi-rank file",
                RankSource::FileName => "from file name",
                RankSource::LoadOrder => "by load order",
            },
            f.world_size.map_or("?".to_string(), |w| w.to_string()),
            f.backend.as_deref().unwrap_or("?"),
            f.nccl_version.as_deref().map(|v| format!(", NCCL {v}")).unwrap_or_default(),
        );
        if !f.devices.is_empty() {
            let mut names: Vec<&str> = f.devices.iter().map(|d| d.name.as_str()).collect();
            names.dedup();
            let _ = writeln!(s, "  devices: {} × {}", f.devices.len(), names.join(", "));
        }
        let _ = writeln!(
            s,
            "  {:.1} MB{}, {} events, span {:.3} ms",
            f.text_bytes as f64 / 1e6,
            if f.gzip { format!(" (gzip {:.1} MB)", f.input_bytes as f64 / 1e6) } else { String::new() },
            f.events.total,
            ms(f.span.dur_ns)
        );
        let ph: Vec<String> = f.events.by_ph.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        let _ = writeln!(s, "  by ph: {}", ph.join(" "));
        let mut cats: Vec<(&String, &u64)> = f.events.by_cat.iter().collect();
        cats.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let cats: Vec<String> = cats
            .iter()
            .take(12)
            .map(|(k, v)| format!("{}:{v}", if k.is_empty() { "(none)" } else { k }))
            .collect();
        let _ = writeln!(s, "  by category: {}", cats.join(" "));
        let cls: Vec<String> = f.events.by_class.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        let _ = writeln!(s, "  by class: {}", cls.join(" "));
        let _ = writeln!(
            s,
            "  GPU ops {} ({} linked to their launch), NCCL kernels {}, runtime calls {}",
            f.events.gpu_ops, f.events.gpu_ops_linked, f.events.nccl_kernels, f.events.runtime_calls
        );
        if f.steps_synthetic {
            let _ = writeln!(s, "  steps: none marked (whole trace as one step)");
        } else {
            let st: Vec<String> =
                f.steps.iter().map(|x| format!("#{} {:.2} ms", x.step, ms(x.dur_ns))).collect();
            let by = if f.steps_from_optimizer {
                "none marked; iterations ending at the optimizer's steps: "
            } else {
                ""
            };
            let _ = writeln!(s, "  steps: {by}{}", st.join(", "));
        }
        let cpu = f.lanes.iter().filter(|l| l.kind == LaneKind::Cpu).count();
        let gpu: Vec<String> = f
            .lanes
            .iter()
            .filter(|l| l.kind == LaneKind::Gpu)
            .map(|l| format!("dev {} stream {}", l.device.unwrap_or(-1), l.stream.unwrap_or(-1)))
            .collect();
        let _ = writeln!(
            s,
            "  lanes: {cpu} CPU threads, {} GPU streams{}",
            gpu.len(),
            if gpu.is_empty() { String::new() } else { format!(" ({})", gpu.join(", ")) }
        );
        if !f.collectives.is_empty() {
            let c: Vec<String> =
                f.collectives.iter().map(|c| format!("{} {} ×{}", c.side, c.kind.name(), c.count)).collect();
            let _ = writeln!(s, "  communication: {}", c.join(", "));
        }
        for d in &f.diagnostics {
            let at = d.first_offset.map(|o| format!(" (first at byte {o})")).unwrap_or_default();
            let _ =
                writeln!(s, "  {} {:?} ×{}{}: {}", severity_word(d.severity), d.kind, d.count, at, d.message);
        }
    }
    for f in &r.failed {
        let _ = writeln!(s, "{}\n  ERROR: {}", f.file, f.error);
    }
    let _ = writeln!(
        s,
        "job: {} rank(s), world size {}{}",
        r.job.ranks,
        if r.job.world_sizes.is_empty() {
            "?".to_string()
        } else {
            r.job.world_sizes.iter().map(|w| w.to_string()).collect::<Vec<_>>().join("/")
        },
        if r.job.missing_ranks.is_empty() {
            String::new()
        } else {
            format!(", {} rank(s) missing", r.job.missing_ranks.len())
        }
    );
    for e in &r.job.errors {
        let _ = writeln!(s, "  ERROR: {e}");
    }
    s
}

/// A diagnostic's severity as the text report writes it (`DataLoss`, the JSON's `data_loss`).
fn severity_word(s: Severity) -> &'static str {
    match s {
        Severity::Info => "Info",
        Severity::Low => "Repaired",
        Severity::Medium => "DataLoss",
        Severity::High => "Error",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::join::{Backwards, Serial};
    use crate::normalize::{assemble, Rules};
    use rankscope_synth::{self as synth, SynthConfig};

    /// A file with more rows than one count takes is counted in halves (each half its own
    /// memo of names, the linked rows walked from where the half starts): the report is the one
    /// counted in one pass, whichever half runs first.
    #[test]
    fn a_report_counted_in_halves_is_the_one_pass_report() {
        let cfg = SynthConfig { steps: 8, kernels_per_step: 6000, ..SynthConfig::default() };
        let mut bytes = Vec::new();
        synth::write_rank(&cfg, 1, &mut bytes).unwrap();
        let mut p = crate::parse::FileIngest::new("rank1.json");
        p.feed(&bytes);
        let job = assemble(vec![p.finish().unwrap()], &[], &Rules::default());
        let rows = job.ranks[0].trace.events.len();
        assert!(rows >= 2 * SPLIT_ROWS, "{rows} rows: too few to be split twice");
        let r = &job.ranks[0];
        let one = serde_json::to_string(&file_report(r, &job.strings, &Serial, usize::MAX)).unwrap();
        for split_rows in [SPLIT_ROWS, 1000] {
            let halves =
                serde_json::to_string(&file_report(r, &job.strings, &Backwards, split_rows)).unwrap();
            assert_eq!(one, halves, "split below {split_rows} rows");
        }
        let f = &report_with(&job, Vec::new(), &Serial).files[0];
        assert_eq!(serde_json::to_string(f).unwrap(), one);
        assert!(f.events.gpu_ops_linked > 0 && f.events.gpu_ops_linked == f.events.gpu_ops, "{:?}", f.events);
        assert!(f.events.nccl_kernels > 0 && !f.collectives.is_empty());
    }
}
