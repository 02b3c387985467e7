//! `--fail-on 'METRIC>VALUE'`: CI gates on the job-level figures and on the findings. A gate
//! is a verdict on the analysis, so it belongs with the judging.

use crate::analyze::{Analysis, RankTotals};
use crate::finding::Severity;

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
    let max = |f: &dyn Fn(&RankTotals) -> f64| {
        t.iter().map(f).fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    let min = |f: &dyn Fn(&RankTotals) -> f64| {
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
        "findings_high" => Some(a.findings.iter().filter(|f| f.severity == Severity::High).count() as f64),
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
