//! `rankscope metrics` as text: the files, the join (how, and its residual), the findings with
//! their evidence, the series of the job's hosts.

use std::fmt::Write as _;

use super::MetricsReport;

fn ms(ns: i64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// A value in a few significant digits (rates in the billions, ratios below one).
fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2}e9", v / 1e9)
    } else if a >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
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
    if !r.series.is_empty() {
        let _ = writeln!(o, "\nseries (min / mean / max over the export; over the job's steps when joined):");
        for s in &r.series {
            let every = s.interval_ns.map_or(String::new(), |i| format!(" every {}", ms(i)));
            let steps = s.steps_mean.map_or(String::new(), |v| format!("; steps {}", num(v)));
            let _ = writeln!(
                o,
                "  {:<24} {:<28} {} samples{every}: {} / {} / {}{steps}",
                s.entity.label(),
                if s.signal == super::Signal::Other { s.name.clone() } else { s.signal.to_string() },
                s.samples,
                num(s.min),
                num(s.mean),
                num(s.max),
            );
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
