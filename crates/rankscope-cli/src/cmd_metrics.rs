//! `rankscope metrics`: cluster monitoring exports (dcgm-exporter / node-exporter scrapes,
//! `dcgmi dmon` tables, Prometheus `query_range` JSON or CSV; [`rankscope_core::metrics`]),
//! joined with the job's traces when given. Exit code 0, 1 when a file is not a metrics file,
//! 2 on usage or I/O errors.

use std::path::PathBuf;

use anyhow::Context as _;
use rankscope_core::metrics::{self, DmonPlace, ReadOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Metrics files, recognised by content: Prometheus text (`curl node:9400/metrics`, one
    /// scrape or a scrape loop's many), `dcgmi dmon` output, `query_range` JSON, CSV.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The job's traces (what `analyze` takes): the ranks, their hosts, GPUs, clocks and steps
    /// to join with. Without them: the series only, no findings.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    pub traces: Vec<PathBuf>,
    /// Print the report as JSON (schema `rankscope.metrics`).
    #[arg(long)]
    pub json: bool,
    /// The host a `dcgmi dmon` table was taken on (dmon prints none).
    #[arg(long, value_name = "HOST")]
    pub dmon_host: Option<String>,
    /// When the `dcgmi dmon` command started, Unix seconds (`date +%s.%N` before it).
    #[arg(long, value_name = "UNIX_S")]
    pub dmon_start: Option<String>,
    /// The `-d` delay the `dcgmi dmon` command was given, ms.
    #[arg(long, value_name = "MS")]
    pub dmon_delay_ms: Option<u64>,
}

pub fn run(a: Args) -> anyhow::Result<u8> {
    let start_ns = match &a.dmon_start {
        Some(s) => Some(
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0 && *v < 4e9)
                .map(|v| (v * 1e9) as i64)
                .with_context(|| format!("--dmon-start {s}: not Unix seconds"))?,
        ),
        None => None,
    };
    let opts = ReadOptions {
        dmon: DmonPlace {
            host: a.dmon_host.clone(),
            start_ns,
            delay_ns: a.dmon_delay_ms.and_then(|d| i64::try_from(d).ok()?.checked_mul(1_000_000)),
        },
        ..ReadOptions::default()
    };
    let places = if a.traces.is_empty() {
        None
    } else {
        let out = crate::load::traces_output(&a.traces)?;
        Some(rankscope_core::analyze::beside::places(&out.analysis))
    };
    let mut files = Vec::new();
    for p in &a.files {
        let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
        files.push((p.display().to_string(), bytes));
    }
    let (rep, errors) = metrics::report(&files, &opts, places.as_deref());
    for e in &errors {
        crate::out::say(&format!("{e}"));
    }
    if a.json {
        crate::out::emit(&format!("{}\n", serde_json::to_string_pretty(&rep)?))?;
    } else {
        crate::out::emit_text(&metrics::render::text(&rep))?;
    }
    Ok(u8::from(!errors.is_empty()))
}
