//! `rankscope diff --fail-on 'step_time>+5%'`: CI gates on a comparison.
//!
//! A gate is `METRIC OP VALUE` with OP one of `>`, `>=`, `<`, `<=`:
//! - `step_time` with a percentage (`+5%`: the change over the base's median step) or a
//!   duration (`+50ms`, `+0.2s`, `+800us`): the estimated change of the job's step time. It
//!   fails only when the change is also **beyond noise** ([`super::StepTime::beyond_noise`]): a
//!   gate must not fail on the runs' own step-to-step noise.
//! - `new_findings` / `new_high_findings`: how many findings (of high severity) appeared.
//! - `comm_exposed`, `compute`, `input`, `idle`: the job-level (mean over ranks) change of that
//!   per-step figure, as a percentage of the base step or a duration, also only beyond noise.

use super::figures::Figure;
use super::tables::FindingChange;
use super::Comparison;
use crate::finding::Severity;

/// The metrics a gate can test.
pub const METRICS: &[&str] =
    &["step_time", "new_findings", "new_high_findings", "comm_exposed", "compute", "input", "idle"];

/// Each metric of [`METRICS`] with what it measures (`rankscope gates`).
pub const DESCRIBED: &[(&str, &str)] = &[
    (
        "step_time",
        "the change of the job's step time, as a share of the base's median step (+5%) or a duration (+50ms)",
    ),
    ("new_findings", "how many findings appeared"),
    ("new_high_findings", "how many findings of high severity appeared"),
    ("comm_exposed", "the change of the exposed communication per step (mean over ranks)"),
    ("compute", "the change of the compute per step (mean over ranks)"),
    ("input", "the change of the input (data loading) time per step (mean over ranks)"),
    ("idle", "the change of the idle time per step (mean over ranks)"),
];

/// What a bound is measured in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    /// A share of the base's median step (`+5%` = 0.05).
    Share,
    /// Nanoseconds.
    Ns,
    /// A count.
    Count,
}

/// One gate.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub text: String,
    pub metric: String,
    pub op: &'static str,
    pub value: f64,
    pub unit: Unit,
}

impl std::str::FromStr for Gate {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        for op in [">=", "<=", ">", "<"] {
            let Some((m, v)) = s.split_once(op) else { continue };
            let metric = m.trim().to_string();
            if !METRICS.contains(&metric.as_str()) {
                return Err(format!("`{s}`: unknown metric `{metric}` (known: {})", METRICS.join(", ")));
            }
            let v = v.trim();
            let bad = || format!("`{s}`: `{v}` is not a number, a percentage or a duration (ms, s, us)");
            let num = |t: &str| t.trim().parse::<f64>().ok().filter(|x| x.is_finite());
            let (value, unit) = if metric.ends_with("findings") {
                (num(v).ok_or_else(bad)?, Unit::Count)
            } else if let Some(p) = v.strip_suffix('%') {
                (num(p).ok_or_else(bad)? / 100.0, Unit::Share)
            } else if let Some(x) = v.strip_suffix("ms") {
                (num(x).ok_or_else(bad)? * 1e6, Unit::Ns)
            } else if let Some(x) = v.strip_suffix("us").or_else(|| v.strip_suffix("µs")) {
                (num(x).ok_or_else(bad)? * 1e3, Unit::Ns)
            } else if let Some(x) = v.strip_suffix('s') {
                (num(x).ok_or_else(bad)? * 1e9, Unit::Ns)
            } else {
                return Err(format!("`{s}`: give `{metric}` a percentage (`+5%`) or a duration (`+50ms`)"));
            };
            return Ok(Gate { text: s.to_string(), metric, op, value, unit });
        }
        Err(format!("`{s}`: expected METRIC>VALUE or METRIC<VALUE, e.g. step_time>+5%"))
    }
}

/// The measured value of a gate's metric in its unit, and whether it counts (a change within
/// noise does not).
pub fn measure(c: &Comparison, g: &Gate) -> Option<(f64, bool)> {
    let base_ns = c.step_time.shift.map(|s| s.base_ns)?;
    let in_unit = |ns: i64| match g.unit {
        Unit::Share if base_ns > 0 => ns as f64 / base_ns as f64,
        Unit::Share => 0.0,
        _ => ns as f64,
    };
    let job = |f: Figure| {
        c.figures
            .iter()
            .find(|d| d.rank.is_none() && d.figure == f)
            .map(|d| (in_unit(d.shift.delta_ns), d.beyond_noise))
    };
    let appeared = |high: bool| {
        c.findings
            .iter()
            .filter(|f| {
                f.change == FindingChange::Appeared && (!high || f.severity_new == Some(Severity::High))
            })
            .count() as f64
    };
    match g.metric.as_str() {
        "step_time" => c.step_time.shift.map(|s| (in_unit(s.delta_ns), c.step_time.beyond_noise)),
        "new_findings" => Some((appeared(false), true)),
        "new_high_findings" => Some((appeared(true), true)),
        "comm_exposed" => {
            let t = job(Figure::ExposedTransfer)?;
            let w = job(Figure::ExposedWait)?;
            Some((t.0 + w.0, t.1 || w.1))
        }
        "compute" => job(Figure::Compute),
        "input" => job(Figure::Input),
        "idle" => job(Figure::Idle),
        _ => None,
    }
}

/// The gates that fail, each with its measured value.
pub fn failed(c: &Comparison, gates: &[Gate]) -> Vec<(Gate, f64)> {
    gates
        .iter()
        .filter_map(|g| {
            let (v, counts) = measure(c, g)?;
            let hit = match g.op {
                ">" => v > g.value,
                ">=" => v >= g.value,
                "<" => v < g.value,
                _ => v <= g.value,
            };
            (hit && counts).then(|| (g.clone(), v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_described_once() {
        let described: Vec<&str> = DESCRIBED.iter().map(|d| d.0).collect();
        assert_eq!(described, METRICS);
    }

    #[test]
    fn gates_parse_shares_durations_and_counts() {
        let g: Gate = "step_time>+5%".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((g.op, g.unit), (">", Unit::Share));
        assert!((g.value - 0.05).abs() < 1e-12);
        let g: Gate = "step_time >= 50ms".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((g.op, g.value, g.unit), (">=", 50e6, Unit::Ns));
        let g: Gate = "new_findings>0".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(g.unit, Unit::Count);
        assert!("step_time>5".parse::<Gate>().is_err());
        assert!("step_speed>5%".parse::<Gate>().is_err());
        assert!("step_time>NaN%".parse::<Gate>().is_err());
    }
}
