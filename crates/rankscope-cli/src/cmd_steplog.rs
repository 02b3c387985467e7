//! `rankscope steplog`: a training framework's own per-iteration log lines and timers
//! (Megatron-LM's; [`rankscope_core::steplog`]) over the whole run. Exit code 0, 1 when a file
//! holds no iteration line or timer block, 2 on usage or I/O errors.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use rankscope_core::steplog::{self, StepLog};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Training logs (Megatron-LM, Megatron-Bridge, NeMo's Megatron backend, MindSpeed): the
    /// `iteration N/M | ... elapsed time per iteration (ms)` lines and the `(min, max) time
    /// across ranks (ms)` timer blocks.
    #[arg(required = true, value_name = "LOG")]
    pub files: Vec<PathBuf>,
    /// Print each file's report as JSON (schema `rankscope.steplog`, one object per file in an
    /// array).
    #[arg(long)]
    pub json: bool,
    /// The run's profiler traces (what `analyze` takes): where their profiled steps sit in the
    /// run the log covers (a usual step, a slow phase caught, or the slow phases missed).
    #[arg(long, value_name = "PATH", num_args = 1..)]
    pub traces: Vec<PathBuf>,
}

/// The profiled steps of the traces (`ProfilerStep#N` and the job's time for it).
fn profiled(paths: &[PathBuf]) -> anyhow::Result<Vec<steplog::ProfiledStep>> {
    Ok(rankscope_core::analyze::beside::profiled_steps(&crate::load::traces_output(paths)?.analysis))
}

fn render(file: &str, s: &StepLog) -> String {
    let mut out = format!("{file}\n");
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1} ms"));
    let _ = writeln!(
        out,
        "  {} iteration lines (iterations {}), elapsed per iteration: median {}, p95 {}, max {}",
        s.iterations.len(),
        match (s.iterations.first(), s.iterations.last()) {
            (Some(a), Some(b)) => format!("{}–{}", a.iteration, b.iteration),
            _ => "-".into(),
        },
        ms(s.elapsed_p50_ms),
        ms(s.elapsed_p95_ms),
        ms(s.elapsed_max_ms)
    );
    let tflops: Vec<f64> = s.iterations.iter().filter_map(|i| i.tflops_per_gpu).collect();
    if !tflops.is_empty() {
        let mut t = tflops.clone();
        t.sort_by(f64::total_cmp);
        let _ = writeln!(out, "  throughput per GPU: median {:.1} TFLOP/s", t[(t.len() - 1) / 2]);
    }
    if !s.timers.is_empty() {
        let _ = writeln!(
            out,
            "  timers (median over {} blocks; slowest rank, and its lead over the fastest):",
            s.timer_blocks.len()
        );
        let w = s.timers.iter().map(|t| t.name.chars().count()).max().unwrap_or(0);
        for t in &s.timers {
            let _ = writeln!(
                out,
                "    {:<w$}  {:>10.2} ms  {:>10}  ({} blocks)",
                t.name,
                t.max_ms,
                t.spread_ms.map_or("-".to_string(), |v| format!("+{v:.2} ms")),
                t.blocks
            );
        }
    }
    if let Some(p) = &s.profile {
        let _ = writeln!(out, "  - {}", p.note);
    }
    for n in &s.notes {
        let _ = writeln!(out, "  - {n}");
    }
    out
}

pub fn run(a: Args) -> anyhow::Result<u8> {
    let steps = if a.traces.is_empty() { Vec::new() } else { profiled(&a.traces)? };
    let mut reports = Vec::new();
    let mut empty = false;
    let mut text = String::new();
    for p in &a.files {
        let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
        let log = String::from_utf8_lossy(&bytes);
        let mut s = steplog::read(&log);
        s.profile = steplog::against_profile(&s, &steps);
        if s.iterations.is_empty() && s.timer_blocks.is_empty() {
            crate::out::say(&format!(
                "{}: no iteration line (`elapsed time per iteration (ms)`) or timer block (`time across ranks (ms):`) found: not a Megatron-style training log",
                p.display()
            ));
            empty = true;
        }
        text.push_str(&render(&p.display().to_string(), &s));
        reports.push(s);
    }
    if a.json {
        crate::out::emit(&format!("{}\n", serde_json::to_string_pretty(&reports)?))?;
    } else {
        crate::out::emit_text(&text)?;
    }
    Ok(u8::from(empty))
}
