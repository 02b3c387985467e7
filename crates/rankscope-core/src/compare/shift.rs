//! How far one run's samples moved from another's, and how sure we are: the steps of a run are
//! samples of its step-to-step noise, so a change is judged against that noise, not against a
//! constant.
//!
//! **Estimate**: the Hodges–Lehmann shift, the median of every difference `new_j − base_i`
//! over the n × m pairs of a base sample and a new one. It is the difference of medians for
//! symmetric noise, and one step that stands out in either run moves it by at most one pair
//! rank (a mean difference moves by the whole excess / n).
//!
//! **Interval** (Moses' distribution-free interval, the one that goes with the Mann–Whitney
//! test): `[d(K), d(nm + 1 − K)]` over the sorted pairwise differences, where K is the largest
//! count with P(U < K) ≤ α/2 under "no shift" (U: the Mann–Whitney statistic). The
//! distribution of U is counted exactly (the Gaussian binomial's coefficients) while n·m ≤
//! [`EXACT_PAIRS`], else its normal approximation. Assumes only that the two runs' noise has
//! one shape: no normality, no equal variances. With few steps the nominal confidence cannot
//! be reached: the interval is then the whole range of the differences and `confidence` says
//! what it holds (4 vs 4 steps: 97.1%; 3 vs 3: 90%; 2 vs 2: 67%).
//!
//! Deterministic: no resampling, no random numbers; the same samples give the same interval.

use serde::{Deserialize, Serialize};

/// The nominal two-sided confidence of every interval.
pub const CONFIDENCE: f64 = 0.95;
/// Exact U distribution up to this many pairs; the normal approximation above.
pub const EXACT_PAIRS: usize = 10_000;
/// Past this many pairs the longer sample is thinned evenly (every k-th value of the sorted
/// sample), so a 10,000-step run costs no more than a 2,000-step one.
pub const MAX_PAIRS: usize = 4_000_000;

/// One shift between two samples (ns).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Shift {
    /// Samples in the base and in the new run.
    pub n_base: u32,
    pub n_new: u32,
    /// Medians of each sample.
    pub base_ns: i64,
    pub new_ns: i64,
    /// The Hodges–Lehmann estimate of new − base.
    pub delta_ns: i64,
    /// The interval of the shift.
    pub lo_ns: i64,
    pub hi_ns: i64,
    /// What the interval holds (≤ [`CONFIDENCE`] with few samples).
    pub confidence: f64,
}

impl Shift {
    /// The interval excludes no shift.
    pub fn excludes_zero(&self) -> bool {
        self.lo_ns > 0 || self.hi_ns < 0
    }
}

/// The shift from `base` to `new`; `None` when either sample is empty.
pub fn shift(base: &[i64], new: &[i64]) -> Option<Shift> {
    if base.is_empty() || new.is_empty() {
        return None;
    }
    let mut a = base.to_vec();
    let mut b = new.to_vec();
    a.sort_unstable();
    b.sort_unstable();
    let (base_ns, new_ns) = (median_sorted(&a), median_sorted(&b));
    thin(&mut a, &mut b);
    let (n, m) = (a.len(), b.len());
    let mut d: Vec<i64> = Vec::with_capacity(n * m);
    for &x in &a {
        for &y in &b {
            d.push(y.saturating_sub(x));
        }
    }
    d.sort_unstable();
    let delta_ns = median_sorted(&d);
    let (k, confidence) = moses_k(n, m, 1.0 - CONFIDENCE);
    let lo = d.get(k - 1).copied().unwrap_or(0);
    let hi = d.get(d.len() - k).copied().unwrap_or(0);
    Some(Shift {
        n_base: u32::try_from(base.len()).unwrap_or(u32::MAX),
        n_new: u32::try_from(new.len()).unwrap_or(u32::MAX),
        base_ns,
        new_ns,
        delta_ns,
        lo_ns: lo,
        hi_ns: hi,
        confidence,
    })
}

/// The median of a sorted sample (the mean of the two middle values for an even count).
fn median_sorted(v: &[i64]) -> i64 {
    let n = v.len();
    match n {
        0 => 0,
        _ if n % 2 == 1 => v[n / 2],
        _ => ((v[n / 2 - 1] as i128 + v[n / 2] as i128) / 2) as i64,
    }
}

/// Keeps n·m ≤ [`MAX_PAIRS`] by taking every k-th value of the longer sorted sample.
fn thin(a: &mut Vec<i64>, b: &mut Vec<i64>) {
    while a.len() * b.len() > MAX_PAIRS {
        let longer = if a.len() >= b.len() { &mut *a } else { &mut *b };
        let kept: Vec<i64> = longer.iter().step_by(2).copied().collect();
        *longer = kept;
    }
}

/// K (1-based, ≥ 1) and the confidence `[d(K), d(nm+1−K)]` holds, for two-sided level α.
fn moses_k(n: usize, m: usize, alpha: f64) -> (usize, f64) {
    let pairs = n * m;
    if pairs <= EXACT_PAIRS {
        let pmf = u_distribution(n, m);
        // The interval [d(K), d(nm+1−K)] misses with probability 2 P(U ≤ K − 1): the largest
        // K with that ≤ α, at least 1 (the whole range: it misses only when every pair lies on
        // one side by chance).
        let mut cdf = 0.0;
        let mut k = 1;
        for (u, p) in pmf.iter().enumerate().take(pairs / 2) {
            if 2.0 * (cdf + p) > alpha {
                break;
            }
            cdf += p;
            k = u + 1;
        }
        let miss: f64 = pmf.iter().take(k).sum();
        let conf = 1.0 - 2.0 * miss;
        (k, conf.clamp(0.0, 1.0))
    } else {
        let (nf, mf) = (n as f64, m as f64);
        let sd = (nf * mf * (nf + mf + 1.0) / 12.0).sqrt();
        let k = (nf * mf / 2.0 - Z_975 * sd).floor().max(1.0) as usize;
        (k, CONFIDENCE)
    }
}

/// The 97.5% quantile of the standard normal.
const Z_975: f64 = 1.959_963_984_540_054;

/// P(U = u) for u = 0..=n·m under no shift: the coefficients of the Gaussian binomial
/// [n+m choose n]_q = ∏_{i=1..n} (1 − q^{m+i}) / (1 − q^i), divided by C(n+m, n).
fn u_distribution(n: usize, m: usize) -> Vec<f64> {
    let len = n * m + 1;
    let mut c = vec![0.0f64; len];
    c[0] = 1.0;
    for i in 1..=n {
        // × (1 − q^{m+i}): from the top down.
        let s = m + i;
        for u in (s..len).rev() {
            c[u] -= c[u - s];
        }
        // ÷ (1 − q^i): a running sum with stride i.
        for u in i..len {
            c[u] += c[u - i];
        }
    }
    let total: f64 = c.iter().sum();
    c.iter().map(|x| x / total).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u_distribution_matches_the_counts() {
        // n = m = 2: C(4, 2) = 6 orderings; U = 0, 1, 2, 2, 3, 4.
        let p = u_distribution(2, 2);
        let want = [1.0, 1.0, 2.0, 1.0, 1.0].map(|x| x / 6.0);
        for (a, b) in p.iter().zip(want) {
            assert!((a - b).abs() < 1e-12, "{p:?}");
        }
        // Symmetric, sums to one.
        let p = u_distribution(7, 5);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        for u in 0..p.len() {
            assert!((p[u] - p[p.len() - 1 - u]).abs() < 1e-12);
        }
    }

    #[test]
    fn few_steps_give_the_whole_range_and_say_their_confidence() {
        let s = shift(&[100, 101, 99, 102], &[130, 129, 131, 128]).unwrap_or_default();
        assert_eq!((s.lo_ns, s.hi_ns), (26, 32));
        assert!((s.confidence - (1.0 - 2.0 / 70.0)).abs() < 1e-9, "{s:?}");
        assert!(s.excludes_zero());
        let s = shift(&[100, 110], &[105, 115]).unwrap_or_default();
        assert!((s.confidence - (1.0 - 2.0 / 6.0)).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn ten_steps_reach_the_tables_k() {
        // n = m = 10: the two-sided 5% critical U is 23 (tables), so K = 24.
        let (k, conf) = moses_k(10, 10, 0.05);
        assert_eq!(k, 24);
        assert!((0.95..0.96).contains(&conf), "{conf}");
    }

    #[test]
    fn one_outlier_moves_the_estimate_little() {
        let base = [100, 101, 99, 100, 102, 98, 100, 101];
        let mut new = [110, 111, 109, 110, 112, 108, 110, 111];
        let calm = shift(&base, &new).unwrap_or_default();
        new[0] = 900;
        let burst = shift(&base, &new).unwrap_or_default();
        assert_eq!(calm.delta_ns, 10);
        assert!((burst.delta_ns - 10).abs() <= 1, "{burst:?}");
        assert!(burst.excludes_zero());
    }

    #[test]
    fn the_same_noise_includes_zero() {
        let s = shift(&[100, 104, 98, 103, 101], &[102, 99, 104, 100, 97]).unwrap_or_default();
        assert!(!s.excludes_zero(), "{s:?}");
    }
}
