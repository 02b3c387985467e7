//! `rankscope inspect PATH...`: what each trace file holds.

use std::path::PathBuf;

use anyhow::Result;
use rankscope_core::inspect;

use crate::load;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trace files (.json, .json.gz, .pt.trace.json) or directories holding them.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Machine-readable output (schema `rankscope.inspect`, see docs/inspect-schema.md).
    #[arg(long)]
    pub json: bool,
    /// Give a file its rank explicitly: `--rank path/to/file.json=3` (repeatable).
    #[arg(long = "rank", value_name = "FILE=N")]
    pub rank: Vec<String>,
    /// Extra classification rules (JSON, same shape as the default rule table), tried first.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Read size in KiB (the core accepts any chunking; this exists for testing it).
    #[arg(long, default_value_t = 4096, hide = true)]
    pub chunk_kib: usize,
}

/// Exit codes: 0 all good; 1 some file is not a trace or the files conflict (two claim one
/// rank); 2 usage or I/O error.
pub fn run(a: Args) -> Result<u8> {
    let mut notes = Vec::new();
    let (files, explicit, rules) = load::inputs(&a.paths, &a.rank, a.rules.as_deref(), &mut notes)?;
    let line = load::ProgressLine::new();
    let (job, failed, more) =
        load::load_job(&files, &explicit, &rules, a.chunk_kib.max(1) * 1024, &|d, t| line.update(d, t));
    line.end();
    notes.extend(more);
    load::print_notes(&notes);
    let report = inspect::report_with(&job, failed, &load::Threads);
    if a.json {
        crate::out::emit(&format!("{}\n", serde_json::to_string_pretty(&report)?))?;
    } else {
        crate::out::emit_text(&inspect::render_text(&report))?;
    }
    Ok(if report.failed.is_empty() && report.job.errors.is_empty() { 0 } else { 1 })
}
