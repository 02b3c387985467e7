//! Two runs compared (issue 36): what changed between a base job and a new one, and why.
//!
//! Pure: it takes two [`Analysis`] values (what `rankscope analyze --json` writes, or a job
//! digest's stored analysis) and returns a [`Comparison`] (schema `rankscope.diff/1`,
//! docs/diff-schema.md). The shells read the inputs and print it.
//!
//! **Steps are samples.** Every per-step figure (the job's step time, each rank's breakdown,
//! each region) is a sample per profiled step in each run; a change is the Hodges–Lehmann
//! shift between the two samples with its distribution-free interval ([`shift`]). A change is
//! **beyond noise** when the interval excludes no change, the interval holds at least
//! [`MIN_CONFIDENCE`] (3 steps per run at least), and the change is at least the floor
//! ([`Options::floor`] × the base run's median step: two runs of one configuration differ by a
//! few percent from run to run — another load on the machine, another placement — which the
//! steps of one run do not show).
//!
//! **The verdict** ([`verdict`]) names the change that explains the step time's: the rank whose
//! own time (wall minus its wait for the others) moved most in the step's direction, and on
//! it the deepest region that holds most of that move (else the breakdown figure that moved
//! most: compute, input, idle, exposed transfer, host synchronization), the ranks that wait for
//! it, and whether anything else moved beyond noise.

pub mod attribution;
pub mod figures;
pub mod gates;
pub mod inside;
pub mod operators;
pub mod peak;
pub mod rate;
pub mod render;
pub mod runs;
pub mod scaling;
pub mod shift;
pub mod tables;
pub mod timeline;
pub mod verdict;

use serde::{Deserialize, Serialize};

use crate::analyze::noise::Noise;
use crate::analyze::Analysis;
pub use attribution::{Attribution, BehindIdeal, Explained};
pub use figures::{Figure, FigureDiff, Presence, RegionDiff};
pub use inside::OperatorCause;
pub use operators::{OpPresence, OpTop, OperatorDiff};
pub use shift::Shift;
pub use tables::{CollectiveDiff, ConfigDiff, FindingChange, FindingDiff};
pub use verdict::{Cause, Change, Verdict};

/// An interval must hold at least this much for a change to count (3 vs 3 steps: 90%).
pub const MIN_CONFIDENCE: f64 = 0.9;
/// The default floor: changes below this share of the base step are within run-to-run noise.
pub const DEFAULT_FLOOR: f64 = 0.03;

crate::named_enum! {
    /// The schema name and version of the comparison JSON.
    pub enum DiffSchema {
        V1 => "rankscope.diff/1",
    }
}

/// What the comparison is told.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The smallest change that counts, as a share of the base run's median step.
    pub floor: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options { floor: DEFAULT_FLOOR }
    }
}

/// Two runs compared.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    pub schema: DiffSchema,
    /// What changed and why, first.
    pub verdict: Verdict,
    pub step_time: StepTime,
    /// Configuration facts that differ.
    pub config: Vec<ConfigDiff>,
    /// Per-step figures of the job and of each rank.
    pub figures: Vec<FigureDiff>,
    /// Regions per rank and per rank on average.
    pub regions: Vec<RegionDiff>,
    pub collectives: Vec<CollectiveDiff>,
    /// Operators and kernels matched by kind, name and shapes ([`operators`]); empty when a
    /// run's analysis has no operator table.
    #[serde(default)]
    pub operators: Vec<OperatorDiff>,
    pub findings: Vec<FindingDiff>,
    /// What explains the change, by both runs' what-if answers ([`attribution`]).
    #[serde(default)]
    pub attribution: Attribution,
}

/// The job's step time in both runs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepTime {
    /// Absent when a run has no step with a time.
    pub shift: Option<Shift>,
    /// The change and its interval over the base's median step.
    pub ratio: Option<f64>,
    pub ratio_lo: Option<f64>,
    pub ratio_hi: Option<f64>,
    pub beyond_noise: bool,
    /// The floor in ns (the share × the base's median step).
    pub floor_ns: i64,
    /// Each run's own step-to-step noise (`analysis.noise`).
    pub noise_base: Option<Noise>,
    pub noise_new: Option<Noise>,
}

/// Compares two analyses of jobs.
pub fn compare(base: &Analysis, new: &Analysis, opts: &Options) -> Comparison {
    let (sb, sn) = (figures::step_times(base), figures::step_times(new));
    let s = shift::shift(&sb, &sn);
    let floor_ns = s.map_or(0, |s| (opts.floor.max(0.0) * s.base_ns as f64).round() as i64);
    let ratio = |x: i64| s.filter(|s| s.base_ns > 0).map(|s| x as f64 / s.base_ns as f64);
    let step_time = StepTime {
        ratio: s.and_then(|s| ratio(s.delta_ns)),
        ratio_lo: s.and_then(|s| ratio(s.lo_ns)),
        ratio_hi: s.and_then(|s| ratio(s.hi_ns)),
        beyond_noise: s.is_some_and(|s| figures::beyond(&s, floor_ns)),
        shift: s,
        floor_ns,
        noise_base: base.noise.clone(),
        noise_new: new.noise.clone(),
    };
    let figures = figures::figures(base, new, floor_ns);
    let regions = figures::regions(base, new, floor_ns);
    let mut c = Comparison {
        schema: DiffSchema::V1,
        verdict: Verdict::default(),
        step_time,
        config: tables::config(base, new),
        figures,
        regions,
        collectives: tables::collectives(base, new),
        operators: operators::operators(base, new, floor_ns),
        findings: tables::findings(base, new),
        attribution: Attribution::default(),
    };
    let delta = c.step_time.shift.filter(|_| c.step_time.beyond_noise).map_or(0, |s| s.delta_ns);
    c.attribution = attribution::attribute(&c.findings, base, new, delta, floor_ns);
    c.verdict = verdict::verdict(&c, base, new);
    c
}
