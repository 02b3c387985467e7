//! `rankscope nccl-inspector`: NCCL Inspector logs (the profiler plugin's JSON line per
//! operation; [`rankscope_core::nccl::inspector`]) of one job: per communicator its calls by kind
//! and size, and the member that arrives last. With `--traces`, the Inspector's calls joined
//! with the traces' matched collectives ([`rankscope_core::analyze::inspector_join`]). Exit code
//! 0, 1 when no record was read, 2 on usage or I/O errors.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rankscope_core::analyze::inspector_join::{self, InspectorJoin};
use rankscope_core::nccl::inspector::{self, InspectorReport};

/// Decompressed files larger than this are refused (the Inspector writes ~0.5 kB a record).
const MAX_INFLATED: u64 = 4 << 30;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Inspector logs (`NCCL_INSPECTOR_DUMP_DIR/<host>-pid<pid>.log`, `.jsonl`, gzipped or not),
    /// or folders of them (walked).
    #[arg(required = true, value_name = "LOG")]
    pub paths: Vec<PathBuf>,
    /// Print the report as JSON (`version` 1; docs/nccl.md).
    #[arg(long)]
    pub json: bool,
    /// The job's traces (files or folders): join the Inspector's calls with their matched
    /// collectives (by communicator and sequence number, else by kind, size and order).
    #[arg(long, value_name = "PATH")]
    pub traces: Vec<PathBuf>,
}

/// The logs under `p`: the file itself, or a folder's `*.log` / `*.jsonl` (gzipped or not).
fn files(p: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let meta = std::fs::symlink_metadata(p).with_context(|| format!("reading {}", p.display()))?;
    if !meta.is_dir() {
        out.push(p.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
        .with_context(|| format!("reading {}", p.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for e in entries {
        let name = e.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        let is_dir = std::fs::symlink_metadata(&e).is_ok_and(|m| m.is_dir());
        if is_dir {
            files(&e, out)?;
        } else if name.ends_with(".log") || name.ends_with(".jsonl") {
            out.push(e);
        }
    }
    Ok(())
}

fn render(r: &InspectorReport) -> String {
    let mut out = format!(
        "{} records (format {}), {} communicators\n",
        r.records,
        if r.versions.is_empty() { "-".to_string() } else { r.versions.join(", ") },
        r.comms.len()
    );
    for n in &r.notes {
        let _ = writeln!(out, "- {n}");
    }
    for c in &r.comms {
        let _ = writeln!(
            out,
            "\n{}{}: {} ranks on {} nodes, records from {} of them ({}–{})",
            c.id,
            c.name.as_deref().map_or(String::new(), |n| format!(" `{n}`")),
            c.n_ranks,
            c.nnodes,
            c.ranks_seen.len(),
            c.ranks_seen.first().copied().unwrap_or(0),
            c.ranks_seen.last().copied().unwrap_or(0)
        );
        for b in &c.bands {
            let bw = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
            let _ = writeln!(
                out,
                "  {:<14} {:<14} {:>6} calls  exec p50 {:>10.1} µs  busbw p50 {:>7} GB/s, best {:>7}",
                b.func,
                b.size,
                b.calls,
                b.exec_p50_us,
                bw(b.busbw_p50_gbs),
                bw(b.busbw_max_gbs)
            );
        }
    }
    for d in &r.diagnostics {
        let _ = writeln!(out, "note: {d}");
    }
    out
}

pub fn run(a: Args) -> anyhow::Result<u8> {
    let mut paths = Vec::new();
    for p in &a.paths {
        let before = paths.len();
        files(p, &mut paths)?;
        if paths.len() == before {
            crate::out::say(&format!(
                "{}: no `.log` / `.jsonl` file in it: not an NCCL Inspector log folder (the plugin writes `NCCL_INSPECTOR_DUMP_DIR/<host>-pid<pid>.log`)",
                p.display()
            ));
        }
    }
    let mut reads = Vec::new();
    for p in &paths {
        let b = crate::load::read_inflated(p, MAX_INFLATED)?;
        let name = p.display().to_string();
        if !inspector::looks_like(&b[..b.len().min(64 << 10)]) {
            crate::out::say(&format!("{name}: not an NCCL Inspector log (no JSON line with `header` and `coll_perf` / `p2p_perf`): skipped"));
            continue;
        }
        reads.push(inspector::read(&name, &b));
    }
    let report = inspector::summarize(&reads);
    let join = if a.traces.is_empty() { None } else { Some(join_traces(&a.traces, &reads)?) };
    if a.json {
        let v = match &join {
            Some(j) => serde_json::json!({ "inspector": report, "join": j }),
            None => serde_json::to_value(&report)?,
        };
        crate::out::emit(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
    } else {
        let mut text = render(&report);
        if let Some(j) = &join {
            text.push('\n');
            text.push_str(&render_join(j));
        }
        crate::out::emit_text(&text)?;
    }
    Ok(u8::from(report.records == 0))
}

/// The traces under `paths` read and measured as `rankscope analyze` does, their matched
/// collectives joined with every record read.
fn join_traces(paths: &[PathBuf], reads: &[inspector::Read]) -> anyhow::Result<InspectorJoin> {
    use rankscope_core::analyze;
    let mut notes = Vec::new();
    let (files, explicit, rules) = crate::load::inputs(paths, &[], None, &mut notes)?;
    let traces: Vec<crate::load::Input> = files
        .into_iter()
        .filter(|f| crate::load::sniff_file(&f.path) == crate::load::InputKind::Trace)
        .collect();
    anyhow::ensure!(!traces.is_empty(), "--traces: no trace among the given paths");
    let (job, failed, more) = crate::load::load_job(&traces, &explicit, &rules, 4 << 20, &|_, _| {});
    notes.extend(more);
    crate::load::print_notes(&notes);
    for f in &failed {
        crate::out::say(&f.error);
    }
    anyhow::ensure!(!job.ranks.is_empty(), "--traces: no file could be read as a trace");
    let m = analyze::measure(&job, &analyze::Options::default());
    let records: Vec<inspector::Record> = reads.iter().flat_map(|r| r.records.iter().cloned()).collect();
    Ok(inspector_join::join(&records, &m.ops, m.analysis.matching.method))
}

fn render_join(j: &InspectorJoin) -> String {
    let mut out = format!(
        "Inspector ↔ traces: {} of the traces' {} collectives matched to the Inspector's calls ({} calls)\n",
        j.matched, j.trace_ops, j.inspector_calls
    );
    for p in &j.pairings {
        let how = match p.offset {
            Some(d) => format!("by sequence number, sn = Seq {} {}", if d < 0 { '−' } else { '+' }, d.abs()),
            None => "by kind, size and order".to_string(),
        };
        let _ = writeln!(
            out,
            "  communicator {}{} ↔ process group {}: {how}; {} of {} matched ({} Inspector calls)",
            p.comm,
            p.comm_name.as_deref().map_or(String::new(), |n| format!(" `{n}`")),
            p.pg,
            p.matched,
            p.trace_ops,
            p.inspector_calls
        );
    }
    if !j.unpaired_comms.is_empty() {
        let _ = writeln!(out, "  communicators with no group in the traces: {}", j.unpaired_comms.join(", "));
    }
    if !j.unpaired_pgs.is_empty() {
        let _ =
            writeln!(out, "  process groups with no communicator in the logs: {}", j.unpaired_pgs.join(", "));
    }
    let t = &j.times;
    let _ = writeln!(
        out,
        "Execution time (Inspector) against kernel time (trace): {} member times, median ratio {}, {} of them off by more than {:.0}% and {} µs",
        t.compared,
        t.ratio_p50.map_or("-".to_string(), |r| format!("{r:.3}")),
        t.disagree,
        100.0 * inspector_join::DISAGREE_SHARE,
        inspector_join::DISAGREE_MIN_NS / 1000
    );
    for d in &t.worst {
        let _ = writeln!(
            out,
            "  rank {} in group {} Seq/key {} (communicator {} sn {}): Inspector {:.1} µs, kernel {:.1} µs",
            d.rank,
            d.pg,
            d.key,
            d.comm,
            d.sn,
            d.exec_ns as f64 / 1e3,
            d.kernel_ns as f64 / 1e3
        );
    }
    if !j.calls.is_empty() {
        let _ = writeln!(
            out,
            "\n  {:<6} {:>7} {:>7} {:<15} {:>11}  {:<10} {:>13} {:>12} {:>12} {:>12}",
            "group",
            "key",
            "sn",
            "kind",
            "bytes",
            "timing",
            "busbw insp.",
            "busbw trace",
            "transfer µs",
            "wait max µs"
        );
    }
    let bw = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    for c in &j.calls {
        let _ = writeln!(
            out,
            "  {:<6} {:>7} {:>7} {:<15} {:>11}  {:<10} {:>13} {:>12} {:>12.1} {:>12.1}",
            c.pg,
            c.key,
            c.sn,
            c.kind.name(),
            c.bytes.map_or("-".to_string(), |b| b.to_string()),
            c.timing.as_deref().unwrap_or("-"),
            bw(c.busbw_max_gbs),
            bw(c.trace_busbw_gbs),
            c.transfer_ns as f64 / 1e3,
            c.wait_max_ns as f64 / 1e3
        );
    }
    out.push_str("(The Inspector's records carry no algorithm or protocol: NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=TUNING says them.)\n");
    out
}
