//! What a table measured: the collective and rank count when no banner said them, the
//! latency-bandwidth fit, the busbw plateau and its share of the link's known peak.

use super::*;

/// Infer the collective from the columns when no banner or command line named it.
///
/// Rules (nccl-tests conventions): a root ≥ 0 means Broadcast (`redop none`) or Reduce; else
/// `size / (count × typesize)` is 1 for AllReduce and SendRecv and the rank count for
/// AllGather, ReduceScatter and AllToAll; `redop none` separates AllGather/AllToAll from
/// ReduceScatter; AllToAll and SendRecv print `N/A` for the in-place check; a busbw/algbw
/// ratio of 1 with a `sum` redop and size = count × typesize is SendRecv when the in-place
/// check is `N/A`, else AllReduce. Layouts without a redop column (nccl-tests 2.5) with
/// size > count × typesize are AllGather.
pub fn infer_collective(rows: &[PerfRow]) -> Option<CollKind> {
    let r = rows.iter().rev().find(|r| r.count > 0)?;
    let ts = u64::try_from(crate::model::dtype_bytes(&r.dtype)?).ok()?;
    let ratio = r.size_bytes as f64 / (r.count as f64 * ts as f64);
    let in_place_na = rows.iter().all(|r| r.in_place.check == Check::NotAvailable);
    let none = r.redop.as_deref().is_none_or(|o| o == "none");
    if r.root.is_some_and(|x| x >= 0) {
        return Some(if none { CollKind::Broadcast } else { CollKind::Reduce });
    }
    let per_rank = ratio > 1.5;
    Some(match (r.redop.is_some(), none, per_rank) {
        (false, _, true) => CollKind::AllGather,
        (_, true, true) => {
            if in_place_na {
                CollKind::AllToAll
            } else {
                CollKind::AllGather
            }
        }
        (_, false, true) => CollKind::ReduceScatter,
        (_, _, false) => {
            if in_place_na {
                CollKind::SendRecv
            } else {
                CollKind::AllReduce
            }
        }
    })
}

/// Rank count from busbw/algbw: invert the collective's factor on the row with the largest
/// algbw (small rows print 0.00 and say nothing).
pub(super) fn infer_ranks(c: CollKind, rows: &[PerfRow]) -> Option<u32> {
    let r = rows.iter().max_by(|a, b| a.out_of_place.algbw_gbps.total_cmp(&b.out_of_place.algbw_gbps))?;
    let (a, b) = (r.out_of_place.algbw_gbps, r.out_of_place.busbw_gbps);
    if a < 0.5 {
        return None;
    }
    let f = b / a;
    // The table prints bandwidths with two decimals: propagate ±0.005 on both to n and accept
    // the inference only while n is known to better than ±1.
    let f_err = f * (0.005 / a + 0.005 / b.max(0.005));
    let (n, dn_df) = match c {
        CollKind::AllReduce => (2.0 / (2.0 - f), 2.0 / ((2.0 - f) * (2.0 - f))),
        CollKind::AllGather
        | CollKind::ReduceScatter
        | CollKind::AllToAll
        | CollKind::Gather
        | CollKind::Scatter
        | CollKind::Hypercube => (1.0 / (1.0 - f), 1.0 / ((1.0 - f) * (1.0 - f))),
        _ => return None,
    };
    let ok = n.is_finite() && (0.5..100_000.0).contains(&n) && (f_err * dn_df) < 1.0;
    ok.then(|| n.round() as u32)
}

pub(super) fn finalize(t: &mut PerfTest) {
    if t.collective.is_none() {
        // nccl-tests names its source file in failures: `Test NCCL failure all_reduce.cu:44`.
        let from_failure = t.failures.iter().find_map(|f| {
            f.text
                .split_whitespace()
                .find_map(|w| w.split_once(".cu:").and_then(|(name, _)| CollKind::from_nccl_tests(name)))
        });
        if let Some(c) = infer_collective(&t.rows).or(from_failure) {
            t.collective = Some(c);
            t.collective_source = CollectiveSource::Inferred;
        }
    }
    let mut hosts: Vec<String> = t.devices.iter().map(|d| d.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    t.hosts = hosts;
    if let Some(max) = t.devices.iter().map(|d| d.rank).max() {
        t.n_ranks = Some(max.saturating_add(1));
        t.n_ranks_source = Some("device lines".into());
    } else if let Some(n) = t.collective.and_then(|c| infer_ranks(c, &t.rows)) {
        t.n_ranks = Some(n);
        t.n_ranks_source = Some("busbw/algbw ratio".into());
    }
}

/// Analyse one test's curve.
///
/// - **Plateau busbw**: the median out-of-place busbw of the (up to) 3 largest sizes, counting
///   only sizes ≥ 1/8 of the largest (so an elided table with rows 8 B, 16 B and 16 GiB uses
///   the 16 GiB row alone): the large-message bandwidth, robust to one noisy row, and not
///   inflated by a lucky mid-size row.
/// - **50% / 80% sizes**: the smallest measured size with busbw ≥ that share of the plateau
///   (no interpolation between rows; see the fit's `n½` for a model-based figure).
/// - **Peak**: kept only while no row's busbw exceeds it (else set aside, with the reason).
/// - **Fit**: [`fit_latency_bandwidth`] on `(size, out-of-place time)` of every row with size > 0.
pub fn analyze_curve(t: &PerfTest, peak: Option<Peak>) -> CurveAnalysis {
    let mut rows: Vec<&PerfRow> = t.rows.iter().collect();
    rows.sort_by_key(|r| r.size_bytes);
    let max_size = rows.last().map_or(0, |r| r.size_bytes);
    let mut top: Vec<f64> = rows
        .iter()
        .rev()
        .take(3)
        .filter(|r| r.size_bytes >= max_size / 8)
        .map(|r| r.out_of_place.busbw_gbps)
        .collect();
    top.sort_by(f64::total_cmp);
    let plateau = top.get(top.len() / 2).copied().unwrap_or(0.0);
    let (max_busbw, max_size) = rows
        .iter()
        .map(|r| (r.out_of_place.busbw_gbps, r.size_bytes))
        .fold((0.0_f64, 0_u64), |acc, x| if x.0 > acc.0 { x } else { acc });
    let at = |frac: f64| {
        (plateau > 0.0)
            .then(|| rows.iter().find(|r| r.out_of_place.busbw_gbps >= frac * plateau).map(|r| r.size_bytes))
            .flatten()
    };
    let factor = match (t.collective, t.n_ranks) {
        (Some(c), Some(n)) => Some(c.busbw_factor(i64::from(n))),
        (Some(c @ (CollKind::Broadcast | CollKind::Reduce | CollKind::SendRecv)), None) => {
            Some(c.busbw_factor(1))
        }
        _ => None,
    };
    let pts: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r.size_bytes > 0)
        .map(|r| (r.size_bytes as f64, r.out_of_place.time_us))
        .collect();
    let (fit, fit_error) = match fit_latency_bandwidth(&pts, factor) {
        Ok(f) => (Some(f), None),
        Err(e) => (None, Some(e)),
    };
    let (peak, peak_set_aside) = super::topology::checked_peak(t, peak, max_busbw);
    let pct = peak.as_ref().map(|p| plateau / p.gbps * 100.0);
    let fl = super::latency::floor(t);
    CurveAnalysis {
        fit,
        fit_error,
        plateau_busbw_gbps: plateau,
        max_busbw_gbps: max_busbw,
        max_busbw_size_bytes: max_size,
        size_at_50pct_plateau_bytes: at(0.5),
        size_at_80pct_plateau_bytes: at(0.8),
        peak,
        peak_set_aside,
        plateau_pct_of_peak: pct,
        floor_us: fl.map(|x| x.0),
        floor_size_bytes: fl.map(|x| x.1.size_bytes),
    }
}
