//! Renderings of an [`Analysis`]: CSV (the rank × step table), Markdown (a report a person
//! reads), and `--fail-on` expressions for CI gating.

use std::fmt::Write;

use super::Analysis;
use crate::escape::{csv_field, md_code, md_text};

/// The per rank × step table as CSV (times in ns).
pub fn csv(a: &Analysis) -> String {
    let mut s = String::from(
        "step,rank,source,start_ns,wall_ns,compute_ns,comm_ns,overlap_ns,exposed_comm_ns,memory_ns,busy_ns,idle_ns,host_sync_ns,data_loading_ns,offset_ns\n",
    );
    for st in &a.steps {
        for r in &st.per_rank {
            let off = a.alignment.iter().find(|x| x.rank == r.rank).map_or(0, |x| x.offset_ns);
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                st.step,
                r.rank,
                csv_field(&r.source.to_string()),
                r.start_ns - off,
                r.wall_ns,
                r.compute_ns,
                r.comm_ns,
                r.overlap_ns,
                r.exposed_comm_ns,
                r.memory_ns,
                r.busy_ns,
                r.idle_ns,
                r.host_sync_ns,
                r.data_loading_ns,
                off
            );
        }
    }
    s
}

fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// A Markdown report.
pub fn markdown(a: &Analysis) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# rankscope analysis\n");
    let world = a.ranks.iter().filter_map(|r| r.world_size).max();
    let backend =
        a.ranks.iter().find_map(|r| r.backend.as_deref().map(md_text)).unwrap_or_else(|| "?".into());
    let _ = writeln!(
        s,
        "{} rank(s){}, backend {backend}, {} step(s); time figures from {} lanes.\n",
        a.ranks.len(),
        world.map(|w| format!(" of world size {w}")).unwrap_or_default(),
        a.steps.len(),
        a.ranks.first().map_or("?", |r| r.metrics_from.as_str())
    );
    let _ = writeln!(s, "## Findings\n");
    if a.findings.is_empty() {
        let _ = writeln!(s, "No finding crossed its threshold.\n");
    }
    for f in &a.findings {
        let _ = writeln!(
            s,
            "- **{:?}** `{}`: {}  \n  Fix: {}",
            f.severity,
            f.id,
            md_text(&f.message),
            md_text(&f.fix)
        );
    }
    let _ = writeln!(s, "\n## Per rank (sums over steps, ms)\n");
    let _ = writeln!(s, "| rank | steps | wall | compute | comm | overlap | exposed comm | idle | exposed % | overlap % (HTA) | step p50 | step max |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for t in &a.rank_totals {
        let st = t.step_time.as_ref();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} | {} | {} |",
            t.rank,
            t.steps,
            ms(t.wall_ns),
            ms(t.compute_ns),
            ms(t.comm_ns),
            ms(t.overlap_ns),
            ms(t.exposed_comm_ns),
            ms(t.idle_ns),
            100.0 * t.exposed_comm_ratio,
            t.overlap_pct_hta.map_or("-".into(), |v| format!("{v:.1}")),
            st.map_or("-".into(), |x| ms(x.p50_ns)),
            st.map_or("-".into(), |x| ms(x.max_ns)),
        );
    }
    let _ = writeln!(s, "\n## Clock alignment\n");
    let _ = writeln!(s, "| rank | method | offset (µs) | estimate (µs) | residual (µs) | anchors |");
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for x in &a.alignment {
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} | {:.1} | {:.1} | {} |",
            x.rank,
            x.method,
            x.offset_ns as f64 / 1e3,
            x.estimate_ns as f64 / 1e3,
            x.residual_ns as f64 / 1e3,
            x.anchors
        );
    }
    let _ = writeln!(s, "\n## Collectives\n");
    let _ = writeln!(s, "| kind | group | count | size p50 (MiB) | p50 (ms) | p99 (ms) | sync wait (ms) | skew max (ms) | busbw (GB/s) |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    for c in &a.collectives {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.kind.name(),
            if c.pg.is_empty() { "-".to_string() } else { md_text(&c.pg) },
            c.count,
            c.bytes_p50.map_or("-".into(), |b| format!("{:.2}", b as f64 / 1048576.0)),
            ms(c.dur_p50_ns),
            ms(c.dur_p99_ns),
            c.sync_wait_mean_ns.map_or("-".into(), ms),
            c.skew_max_ns.map_or("-".into(), ms),
            c.busbw_gbps.map_or("-".into(), |b| format!("{b:.1}")),
        );
    }
    pipeline_markdown(&mut s, a);
    if !a.fabric.is_empty() {
        let _ = writeln!(s, "\n## Against the fabric (nccl-tests)\n");
        for c in &a.fabric {
            let _ = writeln!(s, "- {}", md_text(&c.message));
        }
    }
    if !a.stragglers.is_empty() {
        let _ = writeln!(s, "\n## Stragglers\n");
        for x in &a.stragglers {
            let _ = writeln!(
                s,
                "- step {}: rank {} (late by {} ms over {} collectives; others waited {} ms)",
                x.step,
                x.rank,
                ms(x.lateness_ns),
                x.collectives,
                ms(x.others_wait_ns)
            );
        }
    }
    if !a.critical_path.is_empty() {
        let _ = writeln!(s, "\n## Critical path\n");
        for p in &a.critical_path {
            let _ = writeln!(
                s,
                "- step {} ({}): rank {} ({}), {} ms = compute {} + exposed comm {} + memory {} + CPU-bound {} + launch overhead {} + idle {}",
                p.step,
                p.level,
                p.rank,
                p.chosen_as,
                ms(p.length_ns),
                ms(p.split.compute_ns),
                ms(p.split.communication_ns),
                ms(p.split.memory_ns),
                ms(p.split.cpu_bound_ns),
                ms(p.split.launch_overhead_ns),
                ms(p.split.idle_ns)
            );
            if !p.hops.is_empty() {
                let ranks: Vec<String> = p
                    .hops
                    .iter()
                    .map(|h| match h.collective {
                        Some(k) => format!("{}@{}", k.name(), h.rank),
                        None => format!("r{}", h.rank),
                    })
                    .collect();
                let _ = writeln!(s, "  path: {}", ranks.join(" → "));
            }
        }
    }
    let diags: Vec<_> =
        a.diagnostics.iter().filter(|d| d.diagnostic.severity >= crate::model::Severity::Repaired).collect();
    if !diags.is_empty() {
        let _ = writeln!(s, "\n## Input problems\n");
        for d in diags {
            let _ = writeln!(
                s,
                "- rank {} {}: {:?} ×{}: {}",
                d.rank,
                md_code(&d.file),
                d.diagnostic.kind,
                d.diagnostic.count,
                md_text(&d.diagnostic.message)
            );
        }
    }
    s
}

/// The pipeline table (nothing without a pipeline): per stage, the means over steps.
fn pipeline_markdown(s: &mut String, a: &Analysis) {
    let Some(p) = &a.pipeline else { return };
    let _ = writeln!(
        s,
        "\n## Pipeline\n\n{} stages (ranks {}), schedule {}, {} micro-batches; theory (p − 1)/(m + p − 1) = {}.\n",
        p.stages.len(),
        p.stages.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(" → "),
        p.schedule.name(),
        p.micro_batches.map_or("?".into(), |m| m.to_string()),
        p.theory_bubble_share.map_or("-".into(), |t| format!("{:.1}%", 100.0 * t)),
    );
    let _ =
        writeln!(s, "| stage | rank | span (ms) | compute (ms) | bubble (ms) | bubble % | recv wait (ms) |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for x in &p.per_stage {
        let slowest = if p.slowest_stage == Some(x.stage) { " (slowest)" } else { "" };
        let _ = writeln!(
            s,
            "| {}{slowest} | {} | {} | {} | {} | {:.1} | {} |",
            x.stage,
            x.rank,
            ms(x.span_ns),
            ms(x.compute_ns),
            ms(x.bubble_ns),
            100.0 * x.bubble_share,
            ms(x.recv_wait_ns),
        );
    }
    if !p.critical_path.is_empty() {
        let _ = writeln!(s);
    }
    for c in &p.critical_path {
        let stages: Vec<String> =
            c.hops.iter().rev().filter(|h| h.what == "work").map(|h| h.stage.to_string()).collect();
        let _ = writeln!(
            s,
            "- step {} critical path ({} ms): stages {}",
            c.step,
            ms(c.end_ns - c.start_ns),
            stages.join(" → ")
        );
    }
}

/// A CI gate: `metric>value` or `metric<value` (also `>=`, `<=`), on the job-level metrics
/// listed in [`metric`].
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub metric: String,
    pub op: &'static str,
    pub value: f64,
}

impl std::str::FromStr for Gate {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        for op in [">=", "<=", ">", "<"] {
            if let Some((m, v)) = s.split_once(op) {
                let value: f64 = v.trim().parse().map_err(|_| format!("`{s}`: `{v}` is not a number"))?;
                let metric = m.trim().to_string();
                if !METRICS.contains(&metric.as_str()) {
                    return Err(format!("`{s}`: unknown metric `{metric}` (known: {})", METRICS.join(", ")));
                }
                return Ok(Gate { metric, op, value });
            }
        }
        Err(format!("`{s}`: expected METRIC>VALUE or METRIC<VALUE"))
    }
}

/// Metrics a gate can test (worst over ranks where per rank).
pub const METRICS: &[&str] = &[
    "exposed_comm_ratio",
    "comm_ratio",
    "overlap_coverage",
    "idle_ratio",
    "compute_imbalance",
    "step_time_p50_ms",
    "step_time_max_ms",
    "step_jitter",
    "findings_high",
    "findings",
];

/// The job-level value of a metric.
pub fn metric(a: &Analysis, name: &str) -> Option<f64> {
    let t = &a.rank_totals;
    let max = |f: &dyn Fn(&super::RankTotals) -> f64| {
        t.iter().map(f).fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    let min = |f: &dyn Fn(&super::RankTotals) -> f64| {
        t.iter().map(f).fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.min(v))))
    };
    match name {
        "exposed_comm_ratio" => max(&|x| x.exposed_comm_ratio),
        "comm_ratio" => max(&|x| x.comm_ratio),
        "overlap_coverage" => min(&|x| x.overlap_coverage),
        "idle_ratio" => max(&|x| if x.wall_ns > 0 { x.idle_ns as f64 / x.wall_ns as f64 } else { 0.0 }),
        "compute_imbalance" => a
            .imbalance
            .iter()
            .map(|i| i.compute_imbalance)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
            .or(Some(0.0)),
        "step_time_p50_ms" => max(&|x| x.step_time.as_ref().map_or(0.0, |s| s.p50_ns as f64 / 1e6)),
        "step_time_max_ms" => max(&|x| x.step_time.as_ref().map_or(0.0, |s| s.max_ns as f64 / 1e6)),
        "step_jitter" => max(&|x| x.step_time.as_ref().map_or(0.0, |s| s.jitter)),
        "findings_high" => {
            Some(a.findings.iter().filter(|f| f.severity == super::findings::Severity::High).count() as f64)
        }
        "findings" => Some(a.findings.len() as f64),
        _ => None,
    }
}

/// The gates that fail, each with the measured value.
pub fn failed_gates(a: &Analysis, gates: &[Gate]) -> Vec<(Gate, f64)> {
    gates
        .iter()
        .filter_map(|g| {
            let v = metric(a, &g.metric)?;
            let bad = match g.op {
                ">" => v > g.value,
                "<" => v < g.value,
                ">=" => v >= g.value,
                _ => v <= g.value,
            };
            bad.then(|| (g.clone(), v))
        })
        .collect()
}
