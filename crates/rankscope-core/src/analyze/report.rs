//! Renderings of an [`Analysis`]: CSV (the rank × step table), Markdown (a report a person
//! reads, in [`super::markdown`]), and `--fail-on` expressions for CI gating.

use std::fmt::Write;

use super::Analysis;
use crate::escape::csv_field;

/// The per rank × step table as CSV (times in ns).
pub fn csv(a: &Analysis) -> String {
    let mut s = String::from(
        "step,rank,source,start_ns,wall_ns,compute_ns,comm_ns,overlap_ns,exposed_comm_ns,memory_ns,busy_ns,idle_ns,host_sync_ns,data_loading_ns,offset_ns,input_ns,comm_transfer_ns,comm_wait_ns,exposed_transfer_ns,exposed_wait_ns,cpu_bound_ns,launch_overhead_ns\n",
    );
    for st in &a.steps {
        for r in &st.per_rank {
            let off = a.alignment.iter().find(|x| x.rank == r.rank).map_or(0, |x| x.offset_ns);
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
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
                off,
                r.input_ns,
                r.comm_transfer_ns,
                r.comm_wait_ns,
                r.exposed_transfer_ns,
                r.exposed_wait_ns,
                r.cpu_bound_ns,
                r.launch_overhead_ns
            );
        }
    }
    s
}

pub use super::markdown::markdown;

/// `rankscope analyze --json`: the analysis's fields in their declared order, then, with Flight
/// Recorder dumps among the inputs, their report under `flight_recorder`. The CLI and the app
/// both write it with this function, so their bytes are the same.
pub fn json(
    a: &Analysis,
    dumps: Option<(&[crate::fr::RankedDump], &crate::sequence::SequenceReport)>,
) -> String {
    #[derive(serde::Serialize)]
    struct WithDumps<'a> {
        #[serde(flatten)]
        analysis: &'a Analysis,
        #[serde(skip_serializing_if = "Option::is_none")]
        flight_recorder: Option<crate::fr::output::Member<'a>>,
    }
    let out = WithDumps { analysis: a, flight_recorder: dumps.map(|(d, r)| crate::fr::output::member(d, r)) };
    // Serializing plain values into a string cannot fail (no I/O, string keys only).
    serde_json::to_string_pretty(&out).unwrap_or_default() + "\n"
}

/// `rankscope analyze --md`: the note, then the dumps' section when there are dumps.
pub fn markdown_with_dumps(
    a: &Analysis,
    dumps: Option<(&[crate::fr::RankedDump], &crate::sequence::SequenceReport)>,
) -> String {
    let mut s = markdown(a);
    if let Some((d, r)) = dumps {
        s.push_str(&crate::fr::output::markdown_section(d, r));
    }
    s
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
