//! The latency-bandwidth (Hockney / "α-β") model of a collective and its least-squares fit.
//!
//! **Model.** `T(S) = α + S / B`: the time of one collective on `S` bytes is a fixed latency
//! `α` (launch, synchronisation, per-step network latency) plus the bytes over an asymptotic
//! bandwidth `B`. Small messages are latency-bound, large ones bandwidth-bound.
//!
//! **Units.** `S` in bytes (the nccl-tests `size` column), `T` in µs (the `time` column),
//! `α` in µs, `B` in GB/s with 1 GB = 10⁹ bytes, as nccl-tests counts. So
//! `S / B` in µs is `S / (B · 10³)`.
//!
//! **Which bandwidth.** `B` is an *algorithm* bandwidth (bytes of the user buffer per second,
//! what nccl-tests calls algbw); the matching *bus* bandwidth is `B × factor` with the
//! collective's busbw factor (see [`crate::model::CollKind::busbw_factor`]).
//!
//! **Fit.** Weighted linear least squares on the unknowns `α` and `β = 1/B`, minimising the sum
//! of squared *relative* errors `Σ ((α + β·Sᵢ − Tᵢ) / Tᵢ)²` (weights `1/Tᵢ²`). A plain
//! least-squares fit would be decided by the few largest messages (their times are 10⁴× larger)
//! and would leave the latency term to chance; the relative fit lets an 8-byte point and a
//! 16-GiB point count alike. When the unconstrained solution has `α < 0` (no measurable
//! latency), the fit is redone with `α = 0` and says so (`alpha_clamped`). When the times do
//! not grow with size (`β ≤ 0`, e.g. a 1-rank run whose copy is free) there is no bandwidth
//! term and the fit fails with [`FitError::NoBandwidthTerm`].
//!
//! **Derived sizes.** With `n½ = α · B` (the Hockney half-performance length), the model's
//! bandwidth `S / T(S)` reaches 50% of `B` at `S = n½` and 80% at `S = 4·n½`.
//!
//! **Robust fit.** Calls timed inside a job ([`fit_latency_bandwidth_robust`]) are not a clean
//! sweep: a call issued while compute runs beside it, or while other calls share its links or
//! its host's cores, takes longer than its size says, and only longer. Least squares follows
//! those calls; the Theil–Sen estimator does not: the slope `β` is the median of the slopes
//! between every two calls of different sizes, the latency `α` the median of `Tᵢ − β·Sᵢ`.
//! Up to ~29% of the calls can be slowed by anything without moving it, and `α` is what a
//! typical call pays beyond its bytes, the cost fewer, larger calls save.
//!
//! **Quality.** `rms_rel_err` and `max_rel_err` report how well the model reproduces the measured
//! times (relative errors `(T_model − T_measured) / T_measured`). Real curves bend where NCCL
//! switches protocol (LL → LL128 → Simple) or algorithm (tree → ring), so a two-parameter model
//! is an approximation: read the quality before trusting the model far from the measured sizes.

use serde::{Deserialize, Serialize};

/// A fitted `T(S) = α + S / B`. Serialized for the app; evaluate with [`Self::time_at`],
/// [`Self::algbw_at`], [`Self::busbw_at`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyBandwidthFit {
    /// Latency α in µs.
    pub alpha_us: f64,
    /// Asymptotic algorithm bandwidth B in GB/s (10⁹ B/s).
    pub bw_alg_gbps: f64,
    /// busbw / algbw factor of the collective at the run's rank count, if known.
    pub busbw_factor: Option<f64>,
    /// `B × busbw_factor`: the asymptotic bus bandwidth in GB/s, if the factor is known.
    pub bw_bus_gbps: Option<f64>,
    /// Hockney half-performance length `n½ = α·B` in bytes.
    pub n_half_bytes: f64,
    /// Points used.
    pub points: u32,
    /// Root mean square of the relative time errors over the points.
    pub rms_rel_err: f64,
    /// Largest absolute relative time error over the points.
    pub max_rel_err: f64,
    /// True when the unconstrained fit gave α < 0 and α was fixed at 0.
    pub alpha_clamped: bool,
    pub method: FitMethod,
}

crate::named_enum! {
    /// How the model was fitted.
    pub enum FitMethod {
        /// Least squares on relative time errors (weights 1/T²).
        WlsRelative => "wls-relative",
        /// Theil–Sen: the median of pairwise slopes, the median intercept.
        TheilSen => "theil-sen",
    }
}

/// Why no model could be fitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FitError {
    #[error("fewer than two usable points with distinct sizes")]
    TooFewPoints,
    #[error("time does not grow with message size: no bandwidth term")]
    NoBandwidthTerm,
}

impl LatencyBandwidthFit {
    /// Modelled time in µs for a message of `bytes`.
    pub fn time_at(&self, bytes: f64) -> f64 {
        self.alpha_us + bytes / (self.bw_alg_gbps * 1e3)
    }

    /// Modelled algorithm bandwidth `S / T(S)` in GB/s.
    pub fn algbw_at(&self, bytes: f64) -> f64 {
        let t = self.time_at(bytes);
        if t > 0.0 {
            bytes / (t * 1e3)
        } else {
            0.0
        }
    }

    /// Modelled bus bandwidth in GB/s (`algbw_at × busbw_factor`), if the factor is known.
    pub fn busbw_at(&self, bytes: f64) -> Option<f64> {
        self.busbw_factor.map(|f| self.algbw_at(bytes) * f)
    }

    /// Message size at which the modelled algbw reaches `fraction` (0 < f < 1) of `B`:
    /// `S = f/(1−f) · n½`.
    pub fn size_at_fraction(&self, fraction: f64) -> Option<f64> {
        (fraction > 0.0 && fraction < 1.0).then(|| fraction / (1.0 - fraction) * self.n_half_bytes)
    }
}

/// Fit `T(S) = α + S/B` to `(bytes, time_us)` points; see the module docs for the method.
/// Points with a non-finite or non-positive time, or a negative or non-finite size, are skipped.
pub fn fit_latency_bandwidth(
    points: &[(f64, f64)],
    busbw_factor: Option<f64>,
) -> Result<LatencyBandwidthFit, FitError> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(s, t)| s.is_finite() && *s >= 0.0 && t.is_finite() && *t > 0.0)
        .collect();
    let s_max = pts.iter().map(|p| p.0).fold(0.0_f64, f64::max);
    let s_min = pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    if pts.len() < 2 || s_max <= s_min {
        return Err(FitError::TooFewPoints);
    }
    // Solve in scaled units (x = S / s_max) so the normal equations stay well conditioned.
    let (mut sw, mut swx, mut swxx, mut swt, mut swxt) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(s, t) in &pts {
        let x = s / s_max;
        let w = 1.0 / (t * t);
        sw += w;
        swx += w * x;
        swxx += w * x * x;
        swt += w * t;
        swxt += w * x * t;
    }
    let det = sw * swxx - swx * swx;
    if !(det > 0.0 && det.is_finite()) {
        return Err(FitError::TooFewPoints);
    }
    let mut alpha = (swxx * swt - swx * swxt) / det;
    let mut beta_scaled = (sw * swxt - swx * swt) / det;
    let mut clamped = false;
    if alpha < 0.0 {
        alpha = 0.0;
        clamped = true;
        beta_scaled = if swxx > 0.0 { swxt / swxx } else { 0.0 };
    }
    if !(beta_scaled > 0.0 && beta_scaled.is_finite() && alpha.is_finite()) {
        return Err(FitError::NoBandwidthTerm);
    }
    let beta = beta_scaled / s_max; // µs per byte
    Ok(model(alpha, beta, clamped, FitMethod::WlsRelative, busbw_factor, &pts))
}

/// The fitted model of latency `alpha` (µs) and `beta` (µs per byte) with its quality over
/// `pts`.
fn model(
    alpha: f64,
    beta: f64,
    clamped: bool,
    method: FitMethod,
    busbw_factor: Option<f64>,
    pts: &[(f64, f64)],
) -> LatencyBandwidthFit {
    let bw = 1.0 / (beta * 1e3);
    let mut fit = LatencyBandwidthFit {
        alpha_us: alpha,
        bw_alg_gbps: bw,
        busbw_factor,
        bw_bus_gbps: busbw_factor.map(|f| bw * f),
        n_half_bytes: alpha * bw * 1e3,
        points: u32::try_from(pts.len()).unwrap_or(u32::MAX),
        rms_rel_err: 0.0,
        max_rel_err: 0.0,
        alpha_clamped: clamped,
        method,
    };
    let (mut sq, mut mx) = (0.0_f64, 0.0_f64);
    for &(s, t) in pts {
        let e = (fit.time_at(s) - t) / t;
        sq += e * e;
        mx = mx.max(e.abs());
    }
    fit.rms_rel_err = (sq / pts.len().max(1) as f64).sqrt();
    fit.max_rel_err = mx;
    fit
}

/// At most this many points enter [`fit_latency_bandwidth_robust`]'s pairwise slopes (evenly
/// spaced in size order beyond it): the pairs grow with the square of the points.
pub const MAX_ROBUST_POINTS: usize = 1024;

/// Fit `T(S) = α + S/B` robustly (Theil–Sen; module docs) to `(bytes, time_us)` points timed
/// inside a job. Fails as [`fit_latency_bandwidth`] does: fewer than two sizes, or times that do
/// not grow with size (`β ≤ 0`: no bandwidth term). `α` below 0 is clamped to 0 and said so.
pub fn fit_latency_bandwidth_robust(
    points: &[(f64, f64)],
    busbw_factor: Option<f64>,
) -> Result<LatencyBandwidthFit, FitError> {
    let mut pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(s, t)| s.is_finite() && *s >= 0.0 && t.is_finite() && *t > 0.0)
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    if pts.len() > MAX_ROBUST_POINTS {
        let n = pts.len();
        pts = (0..MAX_ROBUST_POINTS).map(|k| pts[k * (n - 1) / (MAX_ROBUST_POINTS - 1)]).collect();
    }
    let mut slopes: Vec<f64> = Vec::new();
    for (i, a) in pts.iter().enumerate() {
        for b in &pts[i + 1..] {
            if b.0 > a.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    if slopes.is_empty() {
        return Err(FitError::TooFewPoints);
    }
    let beta = median(slopes); // µs per byte
    if !(beta > 0.0 && beta.is_finite()) {
        return Err(FitError::NoBandwidthTerm);
    }
    let mut alpha = median(pts.iter().map(|(s, t)| t - beta * s).collect());
    let clamped = alpha < 0.0;
    if clamped {
        alpha = 0.0;
    }
    Ok(model(alpha, beta, clamped, FitMethod::TheilSen, busbw_factor, &pts))
}

/// The median of `v` (the mean of the middle two for an even count); `v` is not empty.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn recovers_exact_model() {
        // α = 20 µs, B = 100 GB/s.
        let pts: Vec<(f64, f64)> = (3..35).map(|k| 2f64.powi(k)).map(|s| (s, 20.0 + s / 100e3)).collect();
        let f = fit_latency_bandwidth(&pts, Some(2.0)).expect("fit");
        assert!((f.alpha_us - 20.0).abs() < 1e-6, "{f:?}");
        assert!((f.bw_alg_gbps - 100.0).abs() < 1e-6, "{f:?}");
        assert!(f.rms_rel_err < 1e-9);
        assert_eq!(f.bw_bus_gbps, Some(200.0));
        assert!((f.n_half_bytes - 2e6).abs() < 1e-3);
        assert!((f.algbw_at(2e6) - 50.0).abs() < 1e-9);
        assert!((f.size_at_fraction(0.8).expect("s") - 8e6).abs() < 1e-3);
    }

    #[test]
    fn clamps_negative_latency_and_rejects_flat() {
        let pts = [(1e6, 10.0), (2e6, 21.0), (4e6, 43.0)];
        let f = fit_latency_bandwidth(&pts, None).expect("fit");
        assert!(f.alpha_clamped && f.alpha_us == 0.0);
        assert_eq!(
            fit_latency_bandwidth(&[(8.0, 1.0), (16.0, 1.0), (32.0, 0.9)], None),
            Err(FitError::NoBandwidthTerm)
        );
        assert_eq!(fit_latency_bandwidth(&[(8.0, 1.0)], None), Err(FitError::TooFewPoints));
        assert_eq!(fit_latency_bandwidth(&[(8.0, 1.0), (8.0, 2.0)], None), Err(FitError::TooFewPoints));
    }

    /// Calls of 1-4 MiB paying 10 ms each beyond 1 GB/s, half of the 4 MiB ones slowed 3-8x by
    /// work beside them (the first buckets of backward): least squares follows the slowed calls
    /// (a bandwidth 30% low), the robust fit recovers what a typical call pays.
    #[test]
    fn robust_fit_ignores_calls_slowed_beside_compute() {
        let mut pts = Vec::new();
        for k in 0..100 {
            let s = (1 + k % 4) as f64 * 1048576.0;
            let t = 10_000.0 + s / 1e3 + (k % 7) as f64 * 50.0;
            let slowed = k % 4 == 3 && (k / 4) % 2 == 0;
            pts.push((s, if slowed { t * (3.0 + (k % 6) as f64) } else { t }));
        }
        let robust = fit_latency_bandwidth_robust(&pts, None).expect("fit");
        assert!((robust.alpha_us - 10_000.0).abs() < 200.0, "{robust:?}");
        assert!((robust.bw_alg_gbps - 1.0).abs() < 0.06, "{robust:?}");
        assert_eq!(robust.method, FitMethod::TheilSen);
        let wls = fit_latency_bandwidth(&pts, None).expect("fit");
        assert!(wls.bw_alg_gbps < 0.8, "{wls:?}");
        // Exact data: the same model.
        let exact: Vec<(f64, f64)> = (10..30).map(|k| 2f64.powi(k)).map(|s| (s, 20.0 + s / 100e3)).collect();
        let f = fit_latency_bandwidth_robust(&exact, None).expect("fit");
        assert!((f.alpha_us - 20.0).abs() < 1e-6 && (f.bw_alg_gbps - 100.0).abs() < 1e-6, "{f:?}");
        // Flat times: no bandwidth term; one size: too few.
        assert_eq!(
            fit_latency_bandwidth_robust(&[(8.0, 1.0), (16.0, 1.0), (32.0, 0.9)], None),
            Err(FitError::NoBandwidthTerm)
        );
        assert_eq!(
            fit_latency_bandwidth_robust(&[(8.0, 1.0), (8.0, 2.0)], None),
            Err(FitError::TooFewPoints)
        );
    }
}
