//! `rankscope metrics` as text: the files, the join (how, and its residual), the findings with
//! their evidence, the series of the job's hosts.

use std::fmt::Write as _;

use super::MetricsReport;

fn ms(ns: i64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// The report as text.
pub fn text(r: &MetricsReport) -> String {
    let mut o = String::new();
    for f in &r.files {
        let _ = writeln!(
            o,
            "{}: {} ({} samples, {} series; hosts: {})",
            f.file,
            f.format,
            f.samples,
            f.series,
            if f.hosts.is_empty() { "none named".to_string() } else { f.hosts.join(", ") }
        );
    }
    match &r.join {
        None => {
            let _ = writeln!(o, "\nno traces given (--traces): series only, no findings");
        }
        Some(j) => {
            let _ = writeln!(o, "\njoin: {}", j.method);
            let _ = writeln!(o, "residual: {}", j.residual);
            for x in &j.ranks {
                let f = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |v| format!("{v:.d$}"));
                let _ = writeln!(
                    o,
                    "  rank {:>3}  {} GPU {}  steps {} (step {}, samples every {}{})  SM active {}  clock {} MHz  power {} W",
                    x.rank,
                    x.host,
                    x.gpu,
                    ms(x.end_ns.saturating_sub(x.start_ns)),
                    ms(x.step_ns),
                    x.interval_ns.map_or("-".to_string(), ms),
                    if x.coarse { ", coarser than the window" } else { "" },
                    f(x.sm_active, 2),
                    f(x.sm_clock_mhz, 0),
                    f(x.power_w, 0),
                );
            }
        }
    }
    if let Some(_j) = &r.join {
        if r.findings.is_empty() {
            let _ = writeln!(o, "\nfindings: none");
        } else {
            let _ = writeln!(o, "\nfindings:");
        }
        for f in &r.findings {
            let _ = writeln!(o, "  [{}] {}", f.id, f.title);
            for e in &f.evidence {
                let _ = writeln!(o, "      - {e}");
            }
        }
    }
    if !r.diagnostics.is_empty() {
        let _ = writeln!(o, "\ndiagnostics:");
        for d in &r.diagnostics {
            let at = d.first_offset.map_or(String::new(), |b| format!(" (first at byte {b})"));
            let file = if d.file.is_empty() { String::new() } else { format!("{}: ", d.file) };
            let _ = writeln!(o, "  {file}{} ×{}{at}: {}", d.kind, d.count, d.detail);
        }
    }
    o
}
