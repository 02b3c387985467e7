//! `rankscope nccl-inspector`: NCCL Inspector logs (the profiler plugin's JSON line per
//! operation; [`rankscope_core::nccl::inspector`]) of one job: per communicator its calls by kind
//! and size, and the member that arrives last. Exit code 0, 1 when no record was read, 2 on
//! usage or I/O errors.

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
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

/// A file's bytes, inflated when gzipped.
fn bytes(p: &Path) -> anyhow::Result<Vec<u8>> {
    let raw = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
    if !raw.starts_with(&[0x1f, 0x8b]) {
        return Ok(raw);
    }
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(raw.as_slice())
        .take(MAX_INFLATED + 1)
        .read_to_end(&mut out)
        .with_context(|| format!("{}: gzip", p.display()))?;
    anyhow::ensure!(out.len() as u64 <= MAX_INFLATED, "{}: inflates beyond 4 GiB", p.display());
    Ok(out)
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
        let b = bytes(p)?;
        let name = p.display().to_string();
        if !inspector::looks_like(&b[..b.len().min(64 << 10)]) {
            crate::out::say(&format!("{name}: not an NCCL Inspector log (no JSON line with `header` and `coll_perf` / `p2p_perf`): skipped"));
            continue;
        }
        reads.push(inspector::read(&name, &b));
    }
    let report = inspector::summarize(&reads);
    if a.json {
        crate::out::emit(&format!("{}\n", serde_json::to_string_pretty(&report)?))?;
    } else {
        crate::out::emit_text(&render(&report))?;
    }
    Ok(u8::from(report.records == 0))
}
