//! The order statistics the figures use, each under a name that says its convention (the
//! conventions are part of the documented metrics, docs/metrics.md, and differ on purpose:
//! percentiles of latencies are nearest-rank as nccl-tests and HTA report them; a median that
//! is a typical value of a few ranks is the mean of the two middle ones; a median that must be
//! one of the values, a message size or a micro-batch count, is the lower one).

/// Nearest-rank percentile `p` (0–100) of a sorted slice; 0 for an empty one.
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let k = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[k.clamp(1, sorted.len()) - 1]
}

/// Median (the mean of the two middle values for an even count), 0 for none.
pub fn median(mut v: Vec<i64>) -> i64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2
    }
}

/// Median of floats (the mean of the two middle values for an even count), 0 for none.
pub fn median_f(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Lower median: one of the values (the smaller middle one for an even count); 0 for none.
pub fn lower_median(v: &mut [i64]) -> i64 {
    if v.is_empty() {
        return 0;
    }
    let mid = (v.len() - 1) / 2;
    *v.select_nth_unstable(mid).1
}

/// Lower median of floats; none for no values.
pub fn lower_median_f(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Some(v[(v.len() - 1) / 2])
}

/// The median of `sorted` less one occurrence of `mine` (a rank against the other ranks: one
/// sort serves every rank), with `zeros` zeros added (ranks that have none of it); the mean of
/// the two middle ones for an even count, 0 when nothing is left.
pub fn median_without(sorted: &[i64], mine: i64, zeros: usize) -> f64 {
    let p = sorted.partition_point(|&x| x < mine);
    let others = sorted.len().saturating_sub(1);
    let at = |i: usize| -> f64 {
        if i < zeros {
            0.0
        } else {
            let j = i - zeros;
            sorted.get(if j < p { j } else { j + 1 }).copied().unwrap_or(0) as f64
        }
    };
    match others + zeros {
        0 => 0.0,
        n if n % 2 == 1 => at(n / 2),
        n => (at(n / 2 - 1) + at(n / 2)) / 2.0,
    }
}

/// Weighted median of `(value, weight)` pairs: the smallest value at which the running weight,
/// in value order, reaches half the total; none for no pairs.
pub fn weighted_median_f(mut v: Vec<(f64, f64)>) -> Option<f64> {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let half = v.iter().map(|x| x.1).sum::<f64>() / 2.0;
    let mut run = 0.0;
    v.iter()
        .find(|x| {
            run += x.1;
            run >= half
        })
        .map(|x| x.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conventions() {
        let v: Vec<i64> = (1..=10).collect();
        assert_eq!(percentile(&v, 50.0), 5);
        assert_eq!(percentile(&v, 95.0), 10);
        assert_eq!(percentile(&v, 10.0), 1);
        assert_eq!(percentile(&[], 50.0), 0);
        assert_eq!(median(vec![4, 1, 3, 2]), 2);
        assert_eq!(median(vec![3, 1, 2]), 2);
        assert_eq!(median_f(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(lower_median(&mut [4, 1, 3, 2]), 2);
        assert_eq!(lower_median_f(vec![4.0, 1.0, 3.0, 2.0]), Some(2.0));
        assert_eq!(
            (median(vec![]), median_f(vec![]), lower_median(&mut []), lower_median_f(vec![])),
            (0, 0.0, 0, None)
        );
    }
}
