//! `--fail-on 'METRIC>VALUE'`: CI gates on the job-level figures and on the findings. A gate
//! is a verdict on the analysis, so it belongs with the judging.
//!
//! Every metric is named for what it measures and is a figure the report shows: the job's step
//! is the report's headline ("a step takes … (median over ranks and steps)"), the `worst_rank_*`
//! shares are the per-rank table's columns at their worst rank. The names of the first release
//! (`exposed_comm_ratio`, `step_time_p50_ms`, …) still parse, as the figures they always gave,
//! and say their new name ([`Gate::renamed_from`]).

use crate::analyze::{Analysis, RankTotals};
use crate::finding::Severity;

crate::named_enum! {
    /// What a gate tests.
    pub enum GateMetric {
        /// The job's step time (ms): the median over ranks and steps, the report's headline.
        StepTimeMs => "step_time_ms",
        /// The slowest rank's median step time (ms).
        SlowestRankStepP50Ms => "slowest_rank_step_p50_ms",
        /// The slowest rank's longest step (ms).
        SlowestRankStepMaxMs => "slowest_rank_step_max_ms",
        /// The largest step-to-step variation of a rank's step time (relative).
        WorstRankStepJitter => "worst_rank_step_jitter",
        /// The largest share of a rank's step spent in exposed transfer (communication with no
        /// compute beside it, waiting for other ranks excluded): what the `exposed_comm`
        /// finding's threshold (`--threshold exposed_comm_ratio`) compares.
        WorstRankExposedTransferShare => "worst_rank_exposed_transfer_share",
        /// The largest share of a rank's step in exposed communication, waiting for other
        /// ranks included (the per-rank table's "exposed %").
        WorstRankExposedCommShare => "worst_rank_exposed_comm_share",
        /// The largest share of a rank's step in communication, hidden or not.
        WorstRankCommShare => "worst_rank_comm_share",
        /// The smallest share of a rank's communication under compute (the per-rank table's
        /// "overlap % (HTA)").
        WorstRankOverlapShare => "worst_rank_overlap_share",
        /// The largest share of a rank's step with nothing running.
        WorstRankIdleShare => "worst_rank_idle_share",
        /// The largest compute imbalance of a step ((max − min) / max of the ranks' compute).
        ComputeImbalance => "compute_imbalance",
        /// How many findings of high severity.
        FindingsHigh => "findings_high",
        /// How many findings.
        Findings => "findings",
    }
}

/// The first release's names, each the figure it always gave.
const RENAMED: &[(&str, GateMetric)] = &[
    ("exposed_comm_ratio", GateMetric::WorstRankExposedCommShare),
    ("comm_ratio", GateMetric::WorstRankCommShare),
    ("overlap_coverage", GateMetric::WorstRankOverlapShare),
    ("idle_ratio", GateMetric::WorstRankIdleShare),
    ("step_time_p50_ms", GateMetric::SlowestRankStepP50Ms),
    ("step_time_max_ms", GateMetric::SlowestRankStepMaxMs),
    ("step_jitter", GateMetric::WorstRankStepJitter),
];

impl GateMetric {
    /// What it measures, in a sentence (`rankscope gates`, the error for an unknown name).
    pub fn describe(self) -> &'static str {
        match self {
            GateMetric::StepTimeMs => "the job's step time in ms: the median over ranks and steps, the report's headline",
            GateMetric::SlowestRankStepP50Ms => "the slowest rank's median step time in ms",
            GateMetric::SlowestRankStepMaxMs => "the slowest rank's longest step in ms",
            GateMetric::WorstRankStepJitter => "the largest step-to-step variation of a rank's step time (relative)",
            GateMetric::WorstRankExposedTransferShare => "the largest share of a rank's step in exposed transfer (no compute beside it, waiting excluded), as the exposed_comm threshold measures it",
            GateMetric::WorstRankExposedCommShare => "the largest share of a rank's step in exposed communication, waiting for other ranks included (the per-rank table's exposed %)",
            GateMetric::WorstRankCommShare => "the largest share of a rank's step in communication, hidden or not",
            GateMetric::WorstRankOverlapShare => "the smallest share of a rank's communication under compute (the per-rank table's overlap % (HTA), as a fraction)",
            GateMetric::WorstRankIdleShare => "the largest share of a rank's step with nothing running",
            GateMetric::ComputeImbalance => "the largest compute imbalance of a step: (max - min) / max of the ranks' compute",
            GateMetric::FindingsHigh => "how many findings of high severity",
            GateMetric::Findings => "how many findings",
        }
    }

    /// The job's value of this metric (none for a job without the figures).
    pub fn value(self, a: &Analysis) -> Option<f64> {
        let t = &a.rank_totals;
        let worst = |f: &dyn Fn(&RankTotals) -> f64, max: bool| {
            t.iter()
                .map(f)
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| if max { m.max(v) } else { m.min(v) })))
        };
        let share = |ns: i64, x: &RankTotals| if x.wall_ns > 0 { ns as f64 / x.wall_ns as f64 } else { 0.0 };
        let step = |x: &RankTotals, f: &dyn Fn(&crate::analyze::balance::StepTimeStats) -> f64| {
            x.step_time.as_ref().map_or(0.0, f)
        };
        match self {
            GateMetric::StepTimeMs => {
                let ns = a.typical_step_ns();
                (ns > 0.0).then_some(ns / 1e6)
            }
            GateMetric::SlowestRankStepP50Ms => worst(&|x| step(x, &|s| s.p50_ns as f64 / 1e6), true),
            GateMetric::SlowestRankStepMaxMs => worst(&|x| step(x, &|s| s.max_ns as f64 / 1e6), true),
            GateMetric::WorstRankStepJitter => worst(&|x| step(x, &|s| s.jitter), true),
            GateMetric::WorstRankExposedTransferShare => worst(&|x| share(x.exposed_transfer_ns, x), true),
            GateMetric::WorstRankExposedCommShare => worst(&|x| x.exposed_comm_ratio, true),
            GateMetric::WorstRankCommShare => worst(&|x| x.comm_ratio, true),
            GateMetric::WorstRankOverlapShare => worst(&|x| x.overlap_coverage, false),
            GateMetric::WorstRankIdleShare => worst(&|x| share(x.idle_ns, x), true),
            GateMetric::ComputeImbalance => a
                .imbalance
                .iter()
                .map(|i| i.compute_imbalance)
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
                .or(Some(0.0)),
            GateMetric::FindingsHigh => {
                Some(a.findings.iter().filter(|f| f.severity == Severity::High).count() as f64)
            }
            GateMetric::Findings => Some(a.findings.len() as f64),
        }
    }

    /// The metric a name given to `--fail-on` means: its own name or a first-release one.
    pub fn parse(name: &str) -> Option<(GateMetric, Option<&'static str>)> {
        if let Some(m) = GateMetric::ALL.iter().copied().find(|m| m.as_str() == name) {
            return Some((m, None));
        }
        RENAMED.iter().find(|(old, _)| *old == name).map(|(old, m)| (*m, Some(*old)))
    }
}

/// A CI gate: `metric>value` or `metric<value` (also `>=`, `<=`).
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub metric: GateMetric,
    pub op: &'static str,
    pub value: f64,
    /// The first-release name it was given by, if any (the CLI says the new one).
    pub renamed_from: Option<&'static str>,
}

impl std::str::FromStr for Gate {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        for op in [">=", "<=", ">", "<"] {
            if let Some((m, v)) = s.split_once(op) {
                let value: f64 = v.trim().parse().map_err(|_| format!("`{s}`: `{v}` is not a number"))?;
                let name = m.trim();
                let Some((metric, renamed_from)) = GateMetric::parse(name) else {
                    let known: Vec<&str> = GateMetric::ALL.iter().map(|m| m.as_str()).collect();
                    return Err(format!(
                        "`{s}`: unknown metric `{name}` (known: {}; `rankscope gates` says what each measures)",
                        known.join(", ")
                    ));
                };
                return Ok(Gate { metric, op, value, renamed_from });
            }
        }
        Err(format!("`{s}`: expected METRIC>VALUE or METRIC<VALUE"))
    }
}

/// The first-release names and the metrics they now go by, for `rankscope gates`.
pub fn renamed() -> &'static [(&'static str, GateMetric)] {
    RENAMED
}

/// The gates that fail, each with the measured value.
pub fn failed_gates(a: &Analysis, gates: &[Gate]) -> Vec<(Gate, f64)> {
    gates
        .iter()
        .filter_map(|g| {
            let v = g.metric.value(a)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_first_release_names_say_their_new_one() {
        let g: Gate = "step_time_ms>500".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((g.metric, g.op, g.value, g.renamed_from), (GateMetric::StepTimeMs, ">", 500.0, None));
        let g: Gate = "exposed_comm_ratio>=0.3".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (g.metric, g.renamed_from),
            (GateMetric::WorstRankExposedCommShare, Some("exposed_comm_ratio"))
        );
        let err = "nonsense>1".parse::<Gate>().err().unwrap_or_default();
        assert!(
            err.contains("worst_rank_exposed_transfer_share") && err.contains("rankscope gates"),
            "{err}"
        );
        // Every metric describes itself and no old name shadows a new one.
        for m in GateMetric::ALL {
            assert!(!m.describe().is_empty());
            assert!(RENAMED.iter().all(|(old, _)| *old != m.as_str()));
        }
    }
}
