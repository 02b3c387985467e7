//! `rankscope diff BASE NEW`: what changed between two jobs, and why (`rankscope_core::compare`).
//! Each side is anything `analyze` takes (a folder of rank traces, files, a job digest); a side
//! of several paths joins them with commas (`rankscope diff a/,a_tests.txt b/,b_tests.txt`); a
//! side may also be a saved `rankscope analyze --json` (a baseline kept for CI).

use std::path::PathBuf;

use anyhow::{Context, Result};
use rankscope_core::compare::{self, gates, render};

use crate::load;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The base run: a folder of rank traces, a job digest, files (comma-separated), or a saved
    /// `rankscope analyze --json`.
    pub base: String,
    /// The new run, the same way.
    pub new: String,
    /// The comparison as JSON (schema `rankscope.diff/1`, docs/diff-schema.md).
    #[arg(long, conflicts_with_all = ["md", "csv"])]
    pub json: bool,
    /// The comparison as Markdown.
    #[arg(long, conflicts_with = "csv")]
    pub md: bool,
    /// Every per-step figure, region and operator as CSV.
    #[arg(long)]
    pub csv: bool,
    /// List every matched operator and kernel in the text and Markdown, not only the ones that
    /// changed.
    #[arg(long)]
    pub all: bool,
    /// Fail (exit 3) on a change beyond noise, e.g. `--fail-on 'step_time>+5%'`,
    /// `--fail-on 'step_time>+50ms'`, `--fail-on 'new_findings>0'` (docs/diff-schema.md).
    #[arg(long = "fail-on", value_name = "METRIC>VALUE")]
    pub fail_on: Vec<String>,
    /// The smallest change that counts, as a share of the base's median step (run-to-run
    /// noise the steps of one run do not show).
    #[arg(long, default_value_t = compare::DEFAULT_FLOOR, value_name = "SHARE")]
    pub floor: f64,
    /// The job's parallel layout, as `analyze --layout` takes it (for both runs).
    #[arg(long, value_name = "LAYOUT")]
    pub layout: Option<String>,
    /// Extra classification rules (JSON), tried before the defaults (for both runs).
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
}

/// A saved `rankscope analyze --json` (a baseline kept from an earlier run), if `path` is one:
/// its head names the schema.
fn saved_analysis(path: &std::path::Path) -> Result<Option<rankscope_core::analyze::Analysis>> {
    use std::io::Read;
    if !path.is_file() {
        return Ok(None);
    }
    let mut head = [0u8; 256];
    let mut f = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let n = f.read(&mut head)?;
    let text = String::from_utf8_lossy(&head[..n]);
    if !text.trim_start().starts_with('{') || !text.contains("\"rankscope.analysis\"") {
        return Ok(None);
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let a = serde_json::from_slice(&bytes)
        .with_context(|| format!("{}: not a rankscope analysis this version reads", path.display()))?;
    Ok(Some(a))
}

/// One side's analysis, and whether every input was read cleanly.
fn analyze_side(which: &str, spec: &str, a: &Args) -> Result<(rankscope_core::analyze::Analysis, bool)> {
    if !spec.contains(',') {
        if let Some(saved) = saved_analysis(std::path::Path::new(spec))? {
            let clean = saved.errors.is_empty();
            return Ok((saved, clean));
        }
    }
    let mut options = rankscope_core::analyze::Options::default();
    if let Some(l) = &a.layout {
        options.layout = Some(
            rankscope_core::analyze::layout::UserLayout::parse(l)
                .map_err(|e| anyhow::anyhow!("--layout {l}: {e}"))?,
        );
    }
    let req = load::Request {
        paths: spec.split(',').filter(|p| !p.is_empty()).map(PathBuf::from).collect(),
        ranks: Vec::new(),
        rules: a.rules.clone(),
        options,
        chunk: None,
        keep_job: false,
        keep_args: false,
    };
    let line = load::ProgressLine::new();
    let load::Outcome { out, notes, .. } = load::analyze_paths(&req, &|d, t| line.update(d, t))?;
    line.end();
    load::print_notes(&notes);
    for f in &out.failed {
        eprintln!("rankscope: {which}: {}", f.error);
    }
    anyhow::ensure!(out.has_traces(), "{which} `{spec}`: no file could be read as a trace");
    let clean = out.clean();
    Ok((out.analysis, clean))
}

/// Exit codes: 0 fine; 1 an input was not clean (a file not a trace, two files claiming one
/// rank, several jobs in one input), which takes precedence over the gates; 2 usage or I/O
/// error; 3 a `--fail-on` gate failed.
pub fn run(a: Args) -> Result<u8> {
    anyhow::ensure!(a.floor.is_finite() && a.floor >= 0.0, "--floor must be a share ≥ 0, got {}", a.floor);
    let gates: Vec<gates::Gate> = a
        .fail_on
        .iter()
        .map(|g| g.parse::<gates::Gate>().map_err(|e| anyhow::anyhow!("--fail-on {e}")))
        .collect::<Result<_>>()?;
    let (base, clean_base) = analyze_side("base", &a.base, &a)?;
    let (new, clean_new) = analyze_side("new", &a.new, &a)?;
    let c = compare::compare(&base, &new, &compare::Options { floor: a.floor });
    let text = if a.json {
        render::json(&c)
    } else if a.csv {
        render::csv(&c)
    } else if a.all {
        render::with_all_operators(&c, a.md)
    } else if a.md {
        render::markdown(&c)
    } else {
        render::text(&c)
    };
    crate::out::emit(&text)?;
    if !(clean_base && clean_new) {
        return Ok(1);
    }
    if !gates.is_empty() {
        if let Some(why) = &c.verdict.reason {
            eprintln!("rankscope: note: gates on per-step figures cannot fail: {why}");
        }
    }
    let bad = gates::failed(&c, &gates);
    for (g, v) in &bad {
        let shown = match g.unit {
            gates::Unit::Share => format!("{:+.2}%", 100.0 * v),
            gates::Unit::Ns => format!("{:+.1} ms", v / 1e6),
            gates::Unit::Count => format!("{v}"),
        };
        eprintln!("rankscope: gate failed: {} (measured {shown}, beyond noise)", g.text);
    }
    Ok(if bad.is_empty() { 0 } else { 3 })
}
