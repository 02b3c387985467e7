//! The two runs' operators and kernels matched ([`operators`]): per key (kind, name, input
//! shapes; `analysis.operators`, [`crate::analyze::operators`]) the calls, time and share of the
//! step per rank, their changes judged against the runs' noise, and the keys only one run has.
//!
//! **Matching.** A key of both runs is `both`. A name (of one kind) whose shapes are in one run
//! only on both sides — the batch or a layer's width changed — is one `shapes_changed` row: the
//! name's unmatched shapes of each run added up. What is left is `new` or `vanished`; each
//! kind's `other` row (the keys below the part's cut) is matched with the other run's.
//!
//! **Per rank on average.** Every per-step figure is the job's sum over its ranks ÷ its ranks
//! (runs of two world sizes compare), as the regions' `mean` row. `top_*` says on which rank an
//! operator takes the most, so a change on one rank is told from a change on all.
//!
//! **Noise.** The steps are samples, as for every figure of `diff` ([`super::shift`]): the
//! change of an operator's **self time** per step is beyond noise when its interval excludes
//! zero with at least [`super::MIN_CONFIDENCE`] and it is at least the floor (the share of the
//! base's median step that run-to-run noise moves: an operator that moved less than that does
//! not move the step beyond noise, however sure its interval). A **count** changed beyond noise
//! when the interval of the calls per step excludes zero with that confidence (no floor: one
//! call more per step is a change of the program, not of the machine). With 4 vs 4 steps both
//! mean that every step of one run lies beyond every step of the other.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::shift::{self, Shift};
use crate::analyze::operators::{OpKind, OpRow, Operators};
use crate::analyze::Analysis;

crate::named_enum! {
    /// Whether an operator key is in both runs.
    pub enum OpPresence {
        Both => "both",
        /// Only in the new run.
        New => "new",
        /// Only in the base run.
        Vanished => "vanished",
        /// The name ran in both runs with other shapes.
        ShapesChanged => "shapes_changed",
    }
}

/// An operator whose self time per step per rank is below this share of the base's step in
/// both runs may fall below a part's cut on some ranks (`analyze::operators::COVER`): its count
/// is not judged (its time, below the floor, is within noise anyway).
pub const NEGLIGIBLE: f64 = 0.01;

/// Where an operator takes the most: the rank and its median self time per step.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct OpTop {
    pub rank: u32,
    pub self_ns: i64,
}

/// One operator key in both runs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OperatorDiff {
    pub kind: OpKind,
    pub name: String,
    /// The input shapes of each run (several joined with ` | ` for `shapes_changed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shapes_base: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shapes_new: Option<String>,
    /// The kind's `other` row: the keys below a part's cut.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub other: bool,
    pub presence: OpPresence,
    /// Ranks it ran on in each run.
    pub ranks_base: u32,
    pub ranks_new: u32,
    /// Calls per step per rank (median over the steps) and whether the count changed beyond
    /// noise.
    pub count_base: f64,
    pub count_new: f64,
    pub count_beyond_noise: bool,
    /// Inclusive time per step per rank (median over the steps).
    pub dur_base_ns: i64,
    pub dur_new_ns: i64,
    /// Self time per step per rank: the shift and its interval.
    #[serde(flatten)]
    pub shift: Shift,
    /// Self time's share of the run's step (`Analysis::typical_step_ns`).
    pub share_base: f64,
    pub share_new: f64,
    /// The median call (median over the ranks of theirs); absent where it did not run.
    pub call_p50_base_ns: Option<i64>,
    pub call_p50_new_ns: Option<i64>,
    pub top_base: Option<OpTop>,
    pub top_new: Option<OpTop>,
    /// The self time's change is beyond noise.
    pub beyond_noise: bool,
}

impl OperatorDiff {
    /// Anything about it changed beyond noise: its time, its count, or it is in one run only.
    pub fn changed(&self) -> bool {
        self.beyond_noise || self.count_beyond_noise
    }
}

/// One side of a matched key: its rows added up.
struct Side<'a> {
    rows: Vec<&'a OpRow>,
}

impl Side<'_> {
    /// Per step of `t`, the sum of `f` over the rows ÷ the ranks.
    fn samples(&self, t: &Operators, f: fn(&OpRow) -> &[i64]) -> Vec<i64> {
        let ranks = t.ranks.max(1) as f64;
        (0..t.steps.len())
            .map(|k| {
                let sum: i64 = self.rows.iter().map(|r| f(r).get(k).copied().unwrap_or(0)).sum();
                (sum as f64 / ranks).round() as i64
            })
            .collect()
    }

    fn counts(&self, t: &Operators) -> Vec<i64> {
        let ranks = t.ranks.max(1) as f64;
        (0..t.steps.len())
            .map(|k| {
                let sum: u64 = self.rows.iter().map(|r| r.count.get(k).copied().unwrap_or(0)).sum();
                (sum as f64 * 1000.0 / ranks).round() as i64
            })
            .collect()
    }

    fn shapes(&self) -> Option<String> {
        let v: Vec<&str> = self.rows.iter().filter_map(|r| r.shapes.as_deref()).collect();
        (!v.is_empty()).then(|| v.join(" | "))
    }

    fn top(&self) -> Option<OpTop> {
        self.rows
            .iter()
            .max_by_key(|r| r.top_rank_self_ns)
            .map(|r| OpTop { rank: r.top_rank, self_ns: r.top_rank_self_ns })
    }
}

fn median(v: &[i64]) -> i64 {
    crate::analyze::stats::median(v.to_vec())
}

/// One run's table and its typical step (the share's denominator).
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    pub table: &'a Operators,
    pub step_ns: f64,
}

fn row(
    (base, new): (Run<'_>, Run<'_>),
    (b, n): (Side<'_>, Side<'_>),
    presence: OpPresence,
    floor_ns: i64,
) -> Option<OperatorDiff> {
    let first = b.rows.first().or(n.rows.first())?;
    let (tb, tn) = (base.table, new.table);
    fn self_of(r: &OpRow) -> &[i64] {
        &r.self_ns
    }
    fn dur_of(r: &OpRow) -> &[i64] {
        &r.dur_ns
    }
    let (sb, sn) = (b.samples(tb, self_of), n.samples(tn, self_of));
    let s = shift::shift(&sb, &sn)?;
    let (cb, cn) = (b.counts(tb), n.counts(tn));
    let count_shift = shift::shift(&cb, &cn);
    // Its count is complete in both runs: a communication op (never cut), or one whose time is
    // too large to fall below a part's cut.
    let complete = b.rows.iter().chain(&n.rows).any(|r| r.comm)
        || (s.base_ns.max(s.new_ns) as f64) >= NEGLIGIBLE * base.step_ns;
    let share = |a: Run<'_>, v: i64| {
        let step = a.step_ns;
        if step > 0.0 {
            v as f64 / step
        } else {
            0.0
        }
    };
    let p50 = |x: &Side<'_>| {
        (!x.rows.is_empty()).then(|| median(&x.rows.iter().map(|r| r.call_p50_ns).collect::<Vec<_>>()))
    };
    Some(OperatorDiff {
        kind: first.kind,
        name: first.name.clone(),
        shapes_base: b.shapes(),
        shapes_new: n.shapes(),
        other: first.folded > 0,
        presence,
        ranks_base: b.rows.iter().map(|r| r.ranks).max().unwrap_or(0),
        ranks_new: n.rows.iter().map(|r| r.ranks).max().unwrap_or(0),
        count_base: median(&cb) as f64 / 1000.0,
        count_new: median(&cn) as f64 / 1000.0,
        count_beyond_noise: complete
            && first.folded == 0
            && count_shift.is_some_and(|c| c.excludes_zero() && c.confidence + 1e-9 >= super::MIN_CONFIDENCE),
        dur_base_ns: median(&b.samples(tb, dur_of)),
        dur_new_ns: median(&n.samples(tn, dur_of)),
        share_base: share(base, s.base_ns),
        share_new: share(new, s.new_ns),
        call_p50_base_ns: p50(&b),
        call_p50_new_ns: p50(&n),
        top_base: b.top(),
        top_new: n.top(),
        beyond_noise: super::figures::beyond(&s, floor_ns),
        shift: s,
    })
}

/// Every operator key of either run, matched; the largest change of self time per step first.
/// Empty when either run has no operator table (an analysis written before it).
pub fn operators(base: &Analysis, new: &Analysis, floor_ns: i64) -> Vec<OperatorDiff> {
    matched(
        Run { table: &base.operators, step_ns: base.typical_step_ns() },
        Run { table: &new.operators, step_ns: new.typical_step_ns() },
        floor_ns,
    )
}

/// [`operators`] of two tables.
pub fn matched(base: Run<'_>, new: Run<'_>, floor_ns: i64) -> Vec<OperatorDiff> {
    let (tb, tn) = (base.table, new.table);
    if tb.is_empty() || tn.is_empty() {
        return Vec::new();
    }
    type Key<'a> = (OpKind, &'a str, Option<&'a str>, bool);
    fn index(t: &Operators) -> BTreeMap<Key<'_>, &OpRow> {
        t.rows.iter().map(|r| (r.key(), r)).collect()
    }
    let (ib, in_) = (index(tb), index(tn));
    let mut out = Vec::new();
    // Unmatched keys per (kind, name) of each run.
    type Sides<'a> = (Vec<&'a OpRow>, Vec<&'a OpRow>);
    let mut left: BTreeMap<(OpKind, &str, bool), Sides<'_>> = BTreeMap::new();
    for (k, r) in &ib {
        match in_.get(k) {
            Some(m) => out.extend(row(
                (base, new),
                (Side { rows: vec![*r] }, Side { rows: vec![*m] }),
                OpPresence::Both,
                floor_ns,
            )),
            None => left.entry((k.0, k.1, k.3)).or_default().0.push(r),
        }
    }
    for (k, r) in &in_ {
        if !ib.contains_key(k) {
            left.entry((k.0, k.1, k.3)).or_default().1.push(r);
        }
    }
    // A negligible key left over may only be below the other run's cut: it is not taken for
    // the name's other shapes.
    let negligible = |r: &OpRow, run: Run<'_>| {
        (median(&r.self_ns) as f64 / run.table.ranks.max(1) as f64) < NEGLIGIBLE * run.step_ns
    };
    for (_, (b, n)) in left {
        let (b_small, b): (Vec<&OpRow>, Vec<&OpRow>) = b.into_iter().partition(|r| negligible(r, base));
        let (n_small, n): (Vec<&OpRow>, Vec<&OpRow>) = n.into_iter().partition(|r| negligible(r, new));
        let (b, n, mut b_small, mut n_small) = match (b.is_empty(), n.is_empty()) {
            (false, false) => {
                out.extend(row(
                    (base, new),
                    (Side { rows: b }, Side { rows: n }),
                    OpPresence::ShapesChanged,
                    floor_ns,
                ));
                (Vec::new(), Vec::new(), b_small, n_small)
            }
            _ => (b, n, b_small, n_small),
        };
        b_small.extend(b);
        n_small.extend(n);
        for r in b_small {
            out.extend(row(
                (base, new),
                (Side { rows: vec![r] }, Side { rows: vec![] }),
                OpPresence::Vanished,
                floor_ns,
            ));
        }
        for r in n_small {
            out.extend(row(
                (base, new),
                (Side { rows: vec![] }, Side { rows: vec![r] }),
                OpPresence::New,
                floor_ns,
            ));
        }
    }
    out.sort_by(|a, b| {
        b.shift
            .delta_ns
            .abs()
            .cmp(&a.shift.delta_ns.abs())
            .then(b.count_beyond_noise.cmp(&a.count_beyond_noise))
            .then((a.kind, &a.name, &a.shapes_base).cmp(&(b.kind, &b.name, &b.shapes_base)))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row over 4 steps: `count` calls of `self_ms` each per step (on one rank).
    fn op(name: &str, shapes: Option<&str>, count: u64, self_ms: &[i64]) -> OpRow {
        let self_ns: Vec<i64> = self_ms.iter().map(|m| m * 1_000_000).collect();
        OpRow {
            count: vec![count; self_ms.len()],
            dur_ns: self_ns.clone(),
            self_ns,
            call_p50_ns: self_ms.first().copied().unwrap_or(0) * 1_000_000 / count.max(1) as i64,
            ranks: 1,
            top_rank: 0,
            top_rank_self_ns: self_ms.first().copied().unwrap_or(0) * 1_000_000,
            comm: name.starts_with("c10d::"),
            ..OpRow::empty(OpKind::CpuOp, name, shapes.map(str::to_string), 0)
        }
    }

    fn table(rows: Vec<OpRow>) -> Operators {
        Operators { steps: vec![1, 2, 3, 4], ranks: 1, shapes: true, rows }
    }

    fn diff(b: &Operators, n: &Operators) -> Vec<OperatorDiff> {
        let run = |t| Run { table: t, step_ns: 100e6 };
        matched(run(b), run(n), 3_000_000)
    }

    fn find<'a>(d: &'a [OperatorDiff], name: &str) -> &'a OperatorDiff {
        d.iter().find(|o| o.name == name).unwrap_or_else(|| panic!("{name} not in {d:?}"))
    }

    #[test]
    fn a_name_with_other_shapes_is_matched_as_shapes_changed() {
        let b = table(vec![op("aten::mm", Some("[[64,512],[512,512]]"), 2, &[10, 11, 10, 12])]);
        let n = table(vec![op("aten::mm", Some("[[128,512],[512,512]]"), 2, &[20, 21, 22, 20])]);
        let d = diff(&b, &n);
        assert_eq!(d.len(), 1, "{d:?}");
        let mm = find(&d, "aten::mm");
        assert_eq!(mm.presence, OpPresence::ShapesChanged);
        assert_eq!(mm.shapes_base.as_deref(), Some("[[64,512],[512,512]]"));
        assert_eq!(mm.shapes_new.as_deref(), Some("[[128,512],[512,512]]"));
        // Every new step above every base step, and 10 ms over the 3 ms floor.
        assert!(mm.beyond_noise && mm.shift.delta_ns > 8_000_000, "{mm:?}");
        assert!(!mm.count_beyond_noise, "same calls: {mm:?}");
        assert!((mm.share_new - 0.205).abs() < 0.01, "{mm:?}");
    }

    #[test]
    fn keys_in_one_run_are_new_or_vanished_with_their_count() {
        let b = table(vec![
            op("aten::addmm", None, 4, &[20, 21, 20, 22]),
            op("c10d::allreduce_", None, 1, &[1, 1, 1, 1]),
        ]);
        let n = table(vec![
            op("aten::addmm", None, 4, &[21, 20, 22, 20]),
            op("aten::gelu", None, 3, &[5, 5, 6, 5]),
        ]);
        let d = diff(&b, &n);
        let gone = find(&d, "c10d::allreduce_");
        assert_eq!((gone.presence, gone.count_base, gone.count_new), (OpPresence::Vanished, 1.0, 0.0));
        // 1 ms below the floor: its time did not move the step, its count did change.
        assert!(gone.count_beyond_noise && !gone.beyond_noise, "{gone:?}");
        let new = find(&d, "aten::gelu");
        assert_eq!((new.presence, new.count_new), (OpPresence::New, 3.0));
        assert!(new.beyond_noise && new.changed() && new.top_base.is_none(), "{new:?}");
        // The same operator, the same time give or take its own spread: no change.
        let same = find(&d, "aten::addmm");
        assert_eq!(same.presence, OpPresence::Both);
        assert!(!same.changed(), "{same:?}");
        // The largest change first.
        assert_eq!(d.first().map(|o| o.name.as_str()), Some("aten::gelu"));
    }

    #[test]
    fn a_change_inside_the_steps_spread_is_within_noise() {
        // The new run's steps overlap the base's: the interval holds zero.
        let b = table(vec![op("aten::mm", None, 4, &[10, 30, 12, 28])]);
        let n = table(vec![op("aten::mm", None, 4, &[25, 11, 29, 14])]);
        let d = diff(&b, &n);
        assert!(!find(&d, "aten::mm").changed(), "{d:?}");
        // Runs of two world sizes compare per rank: twice the ranks, twice the sums.
        let mut n2 = table(vec![op("aten::mm", None, 8, &[20, 60, 24, 56])]);
        n2.ranks = 2;
        let mm = diff(&b, &n2);
        let mm = find(&mm, "aten::mm");
        assert_eq!((mm.count_base, mm.count_new, mm.shift.delta_ns), (4.0, 4.0, 0));
    }

    #[test]
    fn an_analysis_without_a_table_gives_no_rows() {
        let b = table(vec![op("aten::mm", None, 4, &[10, 10, 10, 10])]);
        assert!(diff(&b, &Operators::default()).is_empty());
    }
}
