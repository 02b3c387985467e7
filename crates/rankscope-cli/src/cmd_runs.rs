//! `rankscope runs DIR...`: one line per run (`rankscope_core::compare::runs`). Each argument is
//! a run (a folder of rank traces, a job digest, a file); a folder with no input file of its own
//! stands for the runs in its subfolders (`rankscope runs tests/zoo`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rankscope_core::compare::runs;

use crate::load;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Runs: folders of rank traces, job digests, or folders of such folders.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// The table as JSON (schema `rankscope.runs/1`, docs/diff-schema.md).
    #[arg(long, conflicts_with_all = ["md", "csv"])]
    pub json: bool,
    /// The table as Markdown.
    #[arg(long, conflicts_with = "csv")]
    pub md: bool,
    /// The table as CSV.
    #[arg(long)]
    pub csv: bool,
    /// Samples per step of every run (global batch), when the traces cannot say (no
    /// `record_shapes`, a model-parallel layout); wins over the traces.
    #[arg(long, value_name = "N")]
    pub samples_per_step: Option<i64>,
    /// Tokens per step of every run (global), as `--samples-per-step`.
    #[arg(long, value_name = "N")]
    pub tokens_per_step: Option<i64>,
    /// Peak dense TFLOP/s of one device, for MFU (instead of the BF16 table, docs/metrics.md).
    #[arg(long, value_name = "X")]
    pub peak_tflops: Option<f64>,
}

/// Whether a folder holds an input of its own (a file the folder walk would take).
fn holds_input(dir: &Path) -> Result<bool> {
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let p = e?.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_file() && rankscope_core::job::is_folder_candidate(name) && name != "scenario.json" {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The runs a path stands for, in path order.
fn runs_of(p: &Path, out: &mut Vec<PathBuf>, depth: u32) -> Result<()> {
    if !p.is_dir() || holds_input(p)? || depth > 4 {
        out.push(p.to_path_buf());
        return Ok(());
    }
    let mut subs: Vec<PathBuf> = std::fs::read_dir(p)
        .with_context(|| format!("cannot list {}", p.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|q| q.is_dir())
        .collect();
    subs.sort();
    for s in subs {
        runs_of(&s, out, depth + 1)?;
    }
    Ok(())
}

/// Exit codes: 0 fine; 1 a run could not be read (it is left out, said on stderr); 2 usage or
/// I/O error.
pub fn run(a: Args) -> Result<u8> {
    let mut paths = Vec::new();
    for p in &a.paths {
        runs_of(p, &mut paths, 0)?;
    }
    let mut analyses = Vec::new();
    let mut clean = true;
    for p in &paths {
        let req = load::Request { paths: vec![p.clone()], ..Default::default() };
        match load::analyze_paths(&req, &|_, _| {}) {
            Ok(load::Outcome { out, .. }) if out.has_traces() => {
                clean &= out.clean();
                analyses.push((p.display().to_string(), out.analysis));
            }
            Ok(_) => {
                clean = false;
                eprintln!("rankscope: {}: no file could be read as a trace", p.display());
            }
            Err(e) => {
                clean = false;
                eprintln!("rankscope: {}: {e:#}", p.display());
            }
        }
    }
    let given = rankscope_core::compare::rate::Given {
        samples_per_step: a.samples_per_step,
        tokens_per_step: a.tokens_per_step,
        peak_tflops: a.peak_tflops,
    };
    let table = runs::runs(analyses.iter().map(|(n, a)| (n.as_str(), a)), &given);
    let text = if a.json {
        runs::json(&table)
    } else if a.csv {
        runs::csv(&table)
    } else if a.md {
        runs::markdown(&table)
    } else {
        runs::text(&table)
    };
    crate::out::emit(&text)?;
    Ok(if clean { 0 } else { 1 })
}
