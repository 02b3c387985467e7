//! Figures as sentences say them: durations, shares and rank lists. The findings
//! ([`crate::diagnose`]) and the sequence engine's hang sentences use the same words.

/// A share as a percentage with one decimal: `0.123` → `12.3%`.
pub fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// A duration for a sentence: µs below 1 ms, ms below 1 s, s above.
pub fn dur(ns: f64) -> String {
    let a = ns.abs();
    if a < 1e6 {
        format!("{:.0} µs", ns / 1e3)
    } else if a < 1e7 {
        format!("{:.1} ms", ns / 1e6)
    } else if a < 1e9 {
        format!("{:.0} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// The range of durations: `365–561 ms`, or one duration when they agree within 5%.
pub fn dur_range(mut v: Vec<f64>) -> String {
    v.sort_by(|a, b| a.total_cmp(b));
    match (v.first(), v.last()) {
        (Some(&a), Some(&b)) if (b - a).abs() >= 0.05 * b.abs().max(1.0) => {
            let (x, y) = (dur(a), dur(b));
            // "365–561 ms" rather than "365 ms–561 ms" when the units agree.
            match (x.rsplit_once(' '), y.rsplit_once(' ')) {
                (Some((xa, ux)), Some((yb, uy))) if ux == uy => format!("{xa}–{yb} {uy}"),
                _ => format!("{x}–{y}"),
            }
        }
        (Some(&a), _) => dur(a),
        _ => "0 ms".into(),
    }
}

/// "0", "0 and 3", "0, 1 and 3".
pub fn rank_list(r: &[u32]) -> String {
    let s: Vec<String> = r.iter().map(|x| x.to_string()).collect();
    match s.len() {
        0 => String::new(),
        1 => s[0].clone(),
        n => format!("{} and {}", s[..n - 1].join(", "), s[n - 1]),
    }
}

/// "0, 1 and 3", with runs of three or more as ranges: "0, 1 and 3–31" (for lists of any
/// length: a thousand ranks in a few words).
pub fn rank_runs(ranks: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut k = 0;
    while k < ranks.len() {
        let mut j = k;
        while j + 1 < ranks.len() && ranks[j].checked_add(1) == Some(ranks[j + 1]) {
            j += 1;
        }
        if j >= k + 2 {
            parts.push(format!("{}–{}", ranks[k], ranks[j]));
        } else {
            parts.extend(ranks[k..=j].iter().map(|r| r.to_string()));
        }
        k = j + 1;
    }
    match parts.len() {
        0 => String::new(),
        1 => parts[0].clone(),
        n => format!("{} and {}", parts[..n - 1].join(", "), parts[n - 1]),
    }
}

/// "Rank 2", "Ranks 0 and 3".
pub fn ranks_word(r: &[u32]) -> String {
    if r.len() == 1 {
        format!("Rank {}", r[0])
    } else {
        format!("Ranks {}", rank_list(r))
    }
}

/// The size bucket of a message: powers of 4 from 1 KiB.
pub fn size_bucket(bytes: Option<i64>) -> String {
    let Some(b) = bytes.filter(|&b| b > 0) else { return "unknown".into() };
    if b < 1024 {
        return "<1 KiB".into();
    }
    let units = ["KiB", "MiB", "GiB", "TiB"];
    let mut lo: i64 = 1024;
    let mut k = 0usize;
    while lo.saturating_mul(4) <= b && k < 40 {
        lo = lo.saturating_mul(4);
        k += 1;
    }
    // lo = 1024 · 4^k; say it in the largest unit it is a whole multiple of.
    let exp = 10 + 2 * k; // log2(lo)
    let unit = (exp / 10).min(units.len());
    let scale = 1i64 << (10 * unit);
    let (a, z) = (lo / scale, lo.saturating_mul(4) / scale);
    format!("{a}-{z} {}", units[unit - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(dur(401_000_000.0), "401 ms");
        assert_eq!(dur(2_500_000.0), "2.5 ms");
        assert_eq!(dur(45_000.0), "45 µs");
        assert_eq!(dur(8_020_000_000.0), "8.02 s");
        assert_eq!(dur_range(vec![365e6, 561e6]), "365–561 ms");
        assert_eq!(dur_range(vec![400e6, 401e6]), "400 ms");
        assert_eq!(rank_list(&[0, 1, 3]), "0, 1 and 3");
        assert_eq!(rank_runs(&[2]), "2");
        assert_eq!(rank_runs(&[0, 1, 3]), "0, 1 and 3");
        assert_eq!(rank_runs(&[0, 1, 3, 4, 5, 6, 9]), "0, 1, 3–6 and 9");
        assert_eq!(rank_runs(&[u32::MAX - 1, u32::MAX]), format!("{} and {}", u32::MAX - 1, u32::MAX));
        assert_eq!(ranks_word(&[2]), "Rank 2");
    }
}
