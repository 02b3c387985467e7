//! What noise looks like in this run: how much the step time varies from step to step, and
//! which steps stand out (docs/metrics.md, "Noise"). Steps are samples: a finding is judged
//! against the run's own spread, not against a constant.
//!
//! The step's time is the job's: per step, the longest wall time of any rank (every rank leaves
//! the step at its last collective, so the slowest rank's wall is the step's). The spread is a
//! robust one (1.4826 × the median absolute deviation: the standard deviation for normal noise,
//! unmoved by the one step that stands out). A step **stands out** when it exceeds the median
//! by more than [`BURST_SIGMAS`] spreads and [`BURST_MIN_SHARE`] of the median step: a burst
//! of host noise, a periodic stall (a checkpoint, an evaluation), or a one-off.

use serde::{Deserialize, Serialize};

use super::stats::median;

/// The fewest steps with which a spread means anything.
pub const MIN_STEPS: usize = 3;
/// A step stands out beyond this many spreads above the median...
pub const BURST_SIGMAS: f64 = 3.0;
/// ...and beyond this share of the median step.
pub const BURST_MIN_SHARE: f64 = 0.05;
/// Lateness is burst-like when steps that stand out hold at least this share of the time it
/// cost (the late rank's burst rule and the jitter's, in the judging layer).
pub const BURST_SHARE: f64 = 2.0 / 3.0;

/// The run's step-to-step variation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Noise {
    /// Steps compared (every profiled step with a wall time).
    pub steps: u32,
    /// The median step (per step, the longest wall time of any rank).
    pub step_ns: i64,
    /// 1.4826 × the median absolute deviation of the step time: how much a step varies.
    pub spread_ns: i64,
    /// The steps that stand out, in step order.
    pub outliers: Vec<Outlier>,
}

/// A step far above the run's usual one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Outlier {
    pub step: u32,
    /// Its time.
    pub step_ns: i64,
    /// What it took beyond the median step.
    pub excess_ns: i64,
}

impl Noise {
    /// Whether `step` stands out.
    pub fn stands_out(&self, step: u32) -> bool {
        self.outliers.iter().any(|o| o.step == step)
    }
}

/// The run's noise from its steps (`(step, its time)`: the longest wall time of any rank);
/// `None` under [`MIN_STEPS`].
pub fn measure(steps: impl IntoIterator<Item = (u32, i64)>) -> Option<Noise> {
    let walls: Vec<(u32, i64)> = steps.into_iter().collect();
    if walls.len() < MIN_STEPS {
        return None;
    }
    let med = median(walls.iter().map(|x| x.1).collect());
    let mad = median(walls.iter().map(|x| (x.1 - med).abs()).collect());
    let spread = (1.4826 * mad as f64).round() as i64;
    let bar = (BURST_SIGMAS * spread as f64).max(BURST_MIN_SHARE * med as f64);
    let outliers = walls
        .iter()
        .filter(|(_, w)| (w - med) as f64 > bar)
        .map(|&(step, w)| Outlier { step, step_ns: w, excess_ns: w - med })
        .collect();
    Some(Noise { steps: walls.len() as u32, step_ns: med, spread_ns: spread, outliers })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_step_far_above_the_others_stands_out() {
        let n = measure([(2, 171), (3, 415), (4, 172), (5, 175)]).unwrap_or_else(|| panic!("no noise"));
        assert_eq!((n.steps, n.step_ns), (4, 173));
        assert_eq!(n.outliers.iter().map(|o| (o.step, o.excess_ns)).collect::<Vec<_>>(), [(3, 242)]);
        assert!(n.stands_out(3) && !n.stands_out(2));
    }

    #[test]
    fn steady_noise_has_no_outlier_and_few_steps_no_measure() {
        let data = [(0, 100), (1, 104), (2, 98), (3, 103)];
        let n = measure(data).unwrap_or_else(|| panic!("no noise"));
        assert!(n.outliers.is_empty(), "{n:?}");
        assert!(n.spread_ns > 0);
        assert!(measure(data[..2].iter().copied()).is_none());
    }
}
