//! Totals of a time range of the timeline (its area selection): per event name and per class,
//! how many events overlap the range, their time inside it, their mean, and that time's share
//! of the range. Each worker sums its ranks' events ([`Totals::of_range`]) and the page adds
//! the ranks' totals ([`Totals::add`]): the events never leave the worker.
//!
//! An event counts when it overlaps `[from, to)` (an instant when inside it); its time is its
//! part inside the range. Shares are of the range's length: nested slices and parallel lanes
//! each count, so a name's share can pass 100% (eight ranks' kernels all busy: 800%).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One name's (or class') totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Total {
    pub count: u64,
    /// ns inside the range.
    pub total_ns: u64,
}

impl Total {
    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.count as f64
        }
    }

    /// Of a range `range_ns` long, as a fraction (1.0 = the whole range).
    pub fn share(&self, range_ns: i64) -> f64 {
        if range_ns <= 0 {
            0.0
        } else {
            self.total_ns as f64 / range_ns as f64
        }
    }
}

/// Totals by name and by class (`Class::name`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub by_name: BTreeMap<String, Total>,
    pub by_class: BTreeMap<String, Total>,
}

/// One event as the totals read it: name, class, start, duration (0: an instant).
#[derive(Debug)]
pub struct Ev<'a> {
    pub name: &'a str,
    pub class: &'a str,
    pub start_ns: i64,
    pub dur_ns: i64,
}

impl Totals {
    /// The totals of `events` over `[from_ns, to_ns)` (see the module doc).
    pub fn of_range<'a>(events: impl IntoIterator<Item = Ev<'a>>, from_ns: i64, to_ns: i64) -> Totals {
        let mut t = Totals::default();
        if to_ns <= from_ns {
            return t;
        }
        for e in events {
            let end = e.start_ns.saturating_add(e.dur_ns.max(0));
            let inside = if e.dur_ns <= 0 {
                e.start_ns >= from_ns && e.start_ns < to_ns
            } else {
                e.start_ns < to_ns && end > from_ns
            };
            if !inside {
                continue;
            }
            let ns = (end.min(to_ns) - e.start_ns.max(from_ns)).max(0) as u64;
            for total in [
                t.by_name.entry(e.name.to_string()).or_default(),
                t.by_class.entry(e.class.to_string()).or_default(),
            ] {
                total.count += 1;
                total.total_ns += ns;
            }
        }
        t
    }

    /// Adds another rank's totals.
    pub fn add(&mut self, other: &Totals) {
        for (mine, theirs) in [(&mut self.by_name, &other.by_name), (&mut self.by_class, &other.by_class)] {
            for (k, v) in theirs {
                let e = mine.entry(k.clone()).or_default();
                e.count += v.count;
                e.total_ns += v.total_ns;
            }
        }
    }

    /// `by` sorted by time inside the range, most first (then by name).
    pub fn ranked(by: &BTreeMap<String, Total>) -> Vec<(&str, Total)> {
        let mut v: Vec<(&str, Total)> = by.iter().map(|(k, t)| (k.as_str(), *t)).collect();
        v.sort_by(|a, b| b.1.total_ns.cmp(&a.1.total_ns).then(a.0.cmp(b.0)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(name: &'static str, class: &'static str, start_ns: i64, dur_ns: i64) -> Ev<'static> {
        Ev { name, class, start_ns, dur_ns }
    }

    #[test]
    fn events_are_clipped_to_the_range() {
        let t = Totals::of_range(
            [
                ev("a", "compute", 0, 100),  // 50..100 inside: 50
                ev("a", "compute", 120, 10), // whole: 10
                ev("b", "comm", 190, 50),    // 190..200: 10
                ev("b", "comm", 200, 5),     // starts at the end: out
                ev("c", "other", 40, 5),     // ends before: out
                ev("i", "marker", 60, 0),    // an instant inside: counted, 0 ns
                ev("i", "marker", 200, 0),   // an instant at the end: out
            ],
            50,
            200,
        );
        assert_eq!(t.by_name["a"], Total { count: 2, total_ns: 60 });
        assert_eq!(t.by_name["b"], Total { count: 1, total_ns: 10 });
        assert_eq!(t.by_name["i"], Total { count: 1, total_ns: 0 });
        assert!(!t.by_name.contains_key("c"));
        assert_eq!(t.by_class["compute"], Total { count: 2, total_ns: 60 });
        assert_eq!(t.by_name["a"].mean_ns(), 30.0);
        assert!((t.by_name["a"].share(150) - 0.4).abs() < 1e-12);
        assert_eq!(Totals::of_range([ev("a", "x", 0, 10)], 5, 5), Totals::default());
    }

    #[test]
    fn ranks_add_up_and_rank_by_time() {
        let mut a = Totals::of_range([ev("k", "compute", 0, 10), ev("m", "comm", 0, 30)], 0, 100);
        let b = Totals::of_range([ev("k", "compute", 0, 40)], 0, 100);
        a.add(&b);
        assert_eq!(a.by_name["k"], Total { count: 2, total_ns: 50 });
        let ranked = Totals::ranked(&a.by_name);
        assert_eq!(ranked.iter().map(|(n, _)| *n).collect::<Vec<_>>(), vec!["k", "m"]);
        assert_eq!(Total::default().mean_ns(), 0.0);
        assert_eq!(Total { count: 1, total_ns: 5 }.share(0), 0.0);
    }
}
