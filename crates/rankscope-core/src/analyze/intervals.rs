//! Interval algebra on half-open nanosecond intervals `[start, end)`.
//!
//! Every time figure rankscope reports is computed on **unions**, never on sums: work that
//! overlaps on several streams or threads counts once. A [`Set`] is a sorted list of disjoint,
//! non-adjacent, non-empty intervals; all operations keep that form.

/// A half-open interval `[start, end)` in nanoseconds.
pub type Iv = (i64, i64);

/// A normalized union of intervals: sorted, disjoint, non-empty, with gaps between neighbours.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    ivs: Vec<Iv>,
}

impl Set {
    pub fn new() -> Self {
        Set::default()
    }

    /// The union of arbitrary intervals (empty and inverted ones are ignored).
    pub fn from_unsorted(mut ivs: Vec<Iv>) -> Self {
        ivs.retain(|&(a, b)| b > a);
        ivs.sort_unstable();
        let mut out: Vec<Iv> = Vec::with_capacity(ivs.len());
        for (a, b) in ivs {
            match out.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        Set { ivs: out }
    }

    /// Builds from intervals already sorted by start (cheaper; falls back if they are not).
    pub fn from_sorted(ivs: impl IntoIterator<Item = Iv>) -> Self {
        let mut out: Vec<Iv> = Vec::new();
        let mut sorted = true;
        let mut prev = i64::MIN;
        for (a, b) in ivs {
            if b <= a {
                continue;
            }
            if a < prev {
                sorted = false;
            }
            prev = a;
            out.push((a, b));
        }
        if !sorted {
            return Set::from_unsorted(out);
        }
        let mut merged: Vec<Iv> = Vec::with_capacity(out.len());
        for (a, b) in out {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        Set { ivs: merged }
    }

    pub fn intervals(&self) -> &[Iv] {
        &self.ivs
    }

    pub fn is_empty(&self) -> bool {
        self.ivs.is_empty()
    }

    /// Total covered length.
    pub fn len_ns(&self) -> i64 {
        self.ivs.iter().map(|&(a, b)| b - a).sum()
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &Set) -> Set {
        let mut all = Vec::with_capacity(self.ivs.len() + other.ivs.len());
        let (mut i, mut j) = (0, 0);
        while i < self.ivs.len() || j < other.ivs.len() {
            let take_left = j >= other.ivs.len() || (i < self.ivs.len() && self.ivs[i] <= other.ivs[j]);
            if take_left {
                all.push(self.ivs[i]);
                i += 1;
            } else {
                all.push(other.ivs[j]);
                j += 1;
            }
        }
        Set::from_sorted(all)
    }

    /// `self ∩ other`. Each side starts at its first interval that ends after the other's first
    /// start (a binary search), and the walk ends with the shorter side: a step's few intervals
    /// against a whole rank's set cost a search, not a walk of the rank.
    pub fn intersect(&self, other: &Set) -> Set {
        let (Some(&(a0, _)), Some(&(b0, _))) = (self.ivs.first(), other.ivs.first()) else {
            return Set::new();
        };
        let mut out = Vec::new();
        let (mut i, mut j) =
            (self.ivs.partition_point(|iv| iv.1 <= b0), other.ivs.partition_point(|iv| iv.1 <= a0));
        while i < self.ivs.len() && j < other.ivs.len() {
            let (a0, a1) = self.ivs[i];
            let (b0, b1) = other.ivs[j];
            let lo = a0.max(b0);
            let hi = a1.min(b1);
            if hi > lo {
                out.push((lo, hi));
            }
            if a1 < b1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        Set { ivs: out }
    }

    /// `self − other`.
    pub fn subtract(&self, other: &Set) -> Set {
        let mut out = Vec::new();
        // Past what ends before `self` begins (a binary search, not a walk).
        let mut j = self.ivs.first().map_or(0, |&(a0, _)| other.ivs.partition_point(|iv| iv.1 <= a0));
        for &(a0, a1) in &self.ivs {
            let mut cur = a0;
            while j < other.ivs.len() && other.ivs[j].1 <= cur {
                j += 1;
            }
            let mut k = j;
            while k < other.ivs.len() && other.ivs[k].0 < a1 {
                let (b0, b1) = other.ivs[k];
                if b0 > cur {
                    out.push((cur, b0));
                }
                cur = cur.max(b1);
                if cur >= a1 {
                    break;
                }
                k += 1;
            }
            if cur < a1 {
                out.push((cur, a1));
            }
        }
        Set { ivs: out }
    }

    /// The part of `self` inside `[lo, hi)`.
    pub fn clip(&self, lo: i64, hi: i64) -> Set {
        if hi <= lo {
            return Set::new();
        }
        let start = self.ivs.partition_point(|iv| iv.1 <= lo);
        let mut out = Vec::new();
        for &(a, b) in &self.ivs[start..] {
            if a >= hi {
                break;
            }
            out.push((a.max(lo), b.min(hi)));
        }
        Set { ivs: out }
    }

    /// Length of `self ∩ [lo, hi)` without building it.
    pub fn len_within(&self, lo: i64, hi: i64) -> i64 {
        self.fold_within(lo, hi, |total, len| total + len)
    }

    /// The longest interval of `self ∩ [lo, hi)` (0 when there is none), without building it.
    pub fn longest_within(&self, lo: i64, hi: i64) -> i64 {
        self.fold_within(lo, hi, i64::max)
    }

    /// The lengths of the intervals of `self ∩ [lo, hi)`, folded from 0.
    fn fold_within(&self, lo: i64, hi: i64, f: impl Fn(i64, i64) -> i64) -> i64 {
        if hi <= lo {
            return 0;
        }
        let start = self.ivs.partition_point(|iv| iv.1 <= lo);
        let mut acc = 0;
        for &(a, b) in &self.ivs[start..] {
            if a >= hi {
                break;
            }
            acc = f(acc, b.min(hi) - a.max(lo));
        }
        acc
    }

    /// Every interval moved by `d` (a clock change).
    pub fn shifted(&self, d: i64) -> Set {
        Set { ivs: self.ivs.iter().map(|&(a, b)| (a.saturating_add(d), b.saturating_add(d))).collect() }
    }

    /// The gaps of `self` inside `[lo, hi)` (the complement, clipped).
    pub fn gaps(&self, lo: i64, hi: i64) -> Set {
        Set { ivs: vec![(lo, hi)] }.subtract(self).clip(lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rankscope_synth::Rng;

    const N: usize = 200;

    fn random_ivs(r: &mut Rng) -> Vec<Iv> {
        (0..r.range(0, 11))
            .map(|_| {
                let a = r.range(0, N as i64 - 1);
                (a, a + r.range(0, 39) - 5)
            })
            .collect()
    }

    /// The model: a bitmap of covered nanoseconds.
    fn bits(ivs: &[Iv]) -> Vec<bool> {
        let mut v = vec![false; N + 64];
        for &(a, b) in ivs {
            for t in a.max(0)..b.min(v.len() as i64) {
                v[t as usize] = true;
            }
        }
        v
    }

    fn well_formed(s: &Set) -> bool {
        s.ivs.iter().all(|&(a, b)| b > a) && s.ivs.windows(2).all(|w| w[0].1 < w[1].0)
    }

    #[test]
    fn operations_agree_with_a_bitmap_model() {
        let mut r = Rng::from_state(7);
        for _ in 0..5000 {
            let (x, y) = (random_ivs(&mut r), random_ivs(&mut r));
            let (a, b) = (Set::from_unsorted(x.clone()), Set::from_unsorted(y.clone()));
            let (ba, bb) = (bits(&x), bits(&y));
            let count = |f: &dyn Fn(bool, bool) -> bool| {
                ba.iter().zip(&bb).filter(|(p, q)| f(**p, **q)).count() as i64
            };
            assert!(well_formed(&a) && well_formed(&b));
            assert_eq!(a.len_ns(), count(&|p, _| p));
            let u = a.union(&b);
            let i = a.intersect(&b);
            let d = a.subtract(&b);
            assert!(well_formed(&u) && well_formed(&i) && well_formed(&d), "{a:?} {b:?}");
            assert_eq!(u.len_ns(), count(&|p, q| p || q));
            assert_eq!(i.len_ns(), count(&|p, q| p && q));
            assert_eq!(d.len_ns(), count(&|p, q| p && !q));
            // Point for point, not only in length (the searched starts of intersect and subtract).
            let model = |f: &dyn Fn(bool, bool) -> bool| {
                ba.iter().zip(&bb).map(|(p, q)| f(*p, *q)).collect::<Vec<_>>()
            };
            assert_eq!(bits(i.intervals()), model(&|p, q| p && q), "{a:?} ∩ {b:?}");
            assert_eq!(bits(d.intervals()), model(&|p, q| p && !q), "{a:?} − {b:?}");
            assert_eq!(u, Set::from_unsorted([x.clone(), y.clone()].concat()));
            assert_eq!(Set::from_sorted(x.clone()), a);
            let lo = r.range(0, N as i64 - 1);
            let hi = lo + r.range(0, 79);
            let c = a.clip(lo, hi);
            assert!(well_formed(&c));
            let in_window =
                ba.iter().enumerate().filter(|(t, p)| **p && (*t as i64) >= lo && (*t as i64) < hi).count()
                    as i64;
            assert_eq!(c.len_ns(), in_window);
            assert_eq!(a.len_within(lo, hi), in_window);
            let longest = c.intervals().iter().map(|&(p, q)| q - p).max().unwrap_or(0);
            assert_eq!(a.longest_within(lo, hi), longest);
            assert_eq!(a.gaps(lo, hi).len_ns(), (hi - lo).max(0) - in_window);
            // |A ∪ B| = |A| + |B| − |A ∩ B|
            assert_eq!(u.len_ns(), a.len_ns() + b.len_ns() - i.len_ns());
        }
    }

    #[test]
    fn nested_and_touching_intervals_merge() {
        let s = Set::from_unsorted(vec![(0, 10), (2, 3), (10, 12), (20, 20), (30, 25)]);
        assert_eq!(s.intervals(), &[(0, 12)]);
    }
}
