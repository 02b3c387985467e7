//! The replayed timeline (docs/metrics.md, "What-if"): one typical step of the job three ways,
//! per rank, as spans of own time and of waiting: as recorded, as the replay runs it with the
//! recorded durations, and as the replay runs it with the lead finding's cause taken away (or,
//! when the lead finding's gain is not a replay's, with every rank at its peers' typical
//! speed). What the What-if figures say in numbers, shown: where the waits were, and where
//! they go.
//!
//! A counterfactual is kept as data ([`Counterfactual`]) where the finding's gain is made, so
//! that the same change can be replayed again here.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::overlap::{overlapped, Hide};
use super::replay::{recorded_spans, replay_traced, AsRecorded};
use super::{Model, Scenario, ToPeers};
use crate::finding::FindingId;

/// What a rank does in a span: its own time (compute, the host's work, a stall) or waiting for
/// a collective or an exchange to complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanKind {
    Own,
    Wait,
}

/// A span of one rank's step, in ns from the step's start (its earliest rank's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub kind: SpanKind,
    pub start_ns: i64,
    pub end_ns: i64,
}

/// One rank's step three ways.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineRow {
    pub rank: u32,
    pub recorded: Vec<Span>,
    pub replayed: Vec<Span>,
    pub fixed: Vec<Span>,
}

/// The typical step, recorded, replayed and with a cause taken away.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// The step shown: the one whose recorded time is nearest the median step's.
    pub step: u32,
    /// How long the step took, recorded, replayed and fixed (from its earliest rank's start to
    /// its last rank's end).
    pub recorded_ns: i64,
    pub replayed_ns: i64,
    pub fixed_ns: i64,
    /// The finding whose cause the `fixed` rows take away; none: every rank at its peers'
    /// typical speed (the ideal step).
    pub fixed_by: Option<FindingId>,
    /// The change replayed, in words ("rank 3's own time at its peers' median").
    pub fixed_how: String,
    /// The ranks of the job, and the rows shown (at most [`MAX_ROWS`]: the finding's ranks,
    /// the late ranks, then the others in order).
    pub ranks_total: u32,
    pub rows: Vec<TimelineRow>,
}

/// Rows shown at most.
pub const MAX_ROWS: usize = 16;

/// Spans shorter than this share of the step are joined to the one before them (a pixel of a
/// wide screen), so that a row holds at most a few hundred spans whatever the job.
pub const MIN_SPAN_SHARE: f64 = 0.002;

/// A change the replay can make again: the counterfactual a finding's gain was replayed with.
#[derive(Debug, Clone, PartialEq)]
pub enum Counterfactual {
    /// These ranks' own times at their peers' median ([`Scenario::new`]).
    Peers(BTreeSet<u32>),
    /// A region's operator-free time taken out of every rank ([`Scenario::without_region`]).
    WithoutRegion { name: String, parent: String },
    /// A group's work spread evenly, some transfers changed ([`Scenario::even`]).
    Even { group: BTreeSet<u32>, transfer: BTreeMap<usize, i64> },
    /// Ranks' own times scaled ([`Scenario::scaled`]).
    Scaled(BTreeMap<u32, f64>),
    /// Some collectives' transfers changed, by their index in the job's matched collectives
    /// (calls merged into fewer: [`Scenario::new`] with no rank brought to its peers).
    Transfers(BTreeMap<usize, i64>),
    /// Collectives moved where their framework lets them go, by their index in the job's
    /// matched collectives: a changed model rather than a scenario over it
    /// ([`super::overlap::overlapped`]).
    Overlapped(BTreeMap<usize, Hide>),
    /// Collectives taken out, by their index in the job's matched collectives: a changed model
    /// ([`super::overlap::without`]).
    Removed(BTreeSet<usize>),
}

impl Counterfactual {
    /// The scenario over `m` that makes this change; `None` for a change of the model itself
    /// ([`Counterfactual::Overlapped`], [`Counterfactual::Removed`]: see
    /// [`Counterfactual::replay_step`]) or a region `m`
    /// does not hold.
    pub fn scenario<'m>(&self, m: &'m Model) -> Option<Scenario<'m>> {
        match self {
            Counterfactual::Peers(ranks) => Some(Scenario::new(m, ranks, &BTreeMap::new())),
            Counterfactual::WithoutRegion { name, parent } => Scenario::without_region(m, name, parent),
            Counterfactual::Even { group, transfer } => Some(Scenario::even(m, group, transfer)),
            Counterfactual::Scaled(factors) => Some(Scenario::scaled(m, factors)),
            Counterfactual::Transfers(transfer) => Some(Scenario::new(m, &BTreeSet::new(), transfer)),
            Counterfactual::Overlapped(_) | Counterfactual::Removed(_) => None,
        }
    }

    /// The step `step` replayed with this change: every rank's spans; `None` where the change
    /// cannot be made on `m`.
    pub fn replay_step(&self, m: &Model, step: u32) -> Option<BTreeMap<u32, Vec<Span>>> {
        match self {
            Counterfactual::Overlapped(hide) => {
                let (moved, _) = overlapped(m, &|k| hide.get(&k).copied());
                let s = Scenario::new(&moved, &BTreeSet::new(), &BTreeMap::new());
                Some(replay_traced(&moved, &s, Some(step)).1)
            }
            Counterfactual::Removed(gone) => {
                let fewer = super::overlap::without(m, gone);
                let s = Scenario::new(&fewer, &BTreeSet::new(), &BTreeMap::new());
                Some(replay_traced(&fewer, &s, Some(step)).1)
            }
            other => Some(replay_traced(m, &other.scenario(m)?, Some(step)).1),
        }
    }
}

/// A finding's counterfactual, as [`build`] takes the lead finding's: the change its gain was
/// replayed with, and that change in words.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayedFix {
    pub finding: FindingId,
    pub ranks: Vec<u32>,
    pub change: Counterfactual,
    pub how: String,
}

/// The timeline of the job's typical step; `None` without steps to replay.
pub fn build(m: &Model, late: &[u32], lead: Option<&ReplayedFix>) -> Option<Timeline> {
    let recorded: Vec<(u32, i64)> = super::replay::recorded(m);
    let step = typical(&recorded)?;
    let rec = recorded_spans(m, step);
    let (_, replayed) = replay_traced(m, &AsRecorded, Some(step));
    let all: BTreeSet<u32> = m.steps.values().flat_map(|r| r.keys().copied()).collect();
    let lead_replayed = lead.and_then(|l| Some((l, l.change.replay_step(m, step)?)));
    let (fixed, fixed_by, fixed_how) = match lead_replayed {
        Some((l, spans)) => (spans, Some(l.finding), l.how.clone()),
        None => (
            replay_traced(m, &ToPeers { m, who: all.clone() }, Some(step)).1,
            None,
            "every rank's own time at its peers' median (the ideal step)".to_string(),
        ),
    };
    // The rows: the finding's ranks, the late ones, then the others in order.
    let mut order: Vec<u32> = Vec::new();
    for r in lead.map_or(&[][..], |l| l.ranks.as_slice()).iter().chain(late).chain(all.iter()) {
        if rec.contains_key(r) && !order.contains(r) {
            order.push(*r);
        }
        if order.len() == MAX_ROWS {
            break;
        }
    }
    order.sort_unstable();
    let (rec_ns, rec) = relative(&rec);
    let (replayed_ns, replayed) = relative(&replayed);
    let (fixed_ns, fixed) = relative(&fixed);
    let res = |total: i64| (total as f64 * MIN_SPAN_SHARE) as i64;
    let row = |v: &BTreeMap<u32, Vec<Span>>, r: u32, total: i64| {
        coarse(v.get(&r).map_or(&[][..], |s| s), res(total))
    };
    let rows = order
        .iter()
        .map(|&rank| TimelineRow {
            rank,
            recorded: row(&rec, rank, rec_ns),
            replayed: row(&replayed, rank, replayed_ns),
            fixed: row(&fixed, rank, fixed_ns),
        })
        .collect();
    Some(Timeline {
        step,
        recorded_ns: rec_ns,
        replayed_ns,
        fixed_ns,
        fixed_by,
        fixed_how,
        ranks_total: all.len() as u32,
        rows,
    })
}

/// The step whose recorded time is nearest the median's (the earlier of two as near).
fn typical(steps: &[(u32, i64)]) -> Option<u32> {
    let median = crate::analyze::stats::median_f(steps.iter().map(|s| s.1 as f64).collect());
    steps
        .iter()
        .min_by(|a, b| {
            (a.1 as f64 - median).abs().total_cmp(&(b.1 as f64 - median).abs()).then(a.0.cmp(&b.0))
        })
        .map(|s| s.0)
}

/// The spans from the step's start (its earliest rank's), and the step's length (to its last
/// rank's end).
fn relative(by_rank: &BTreeMap<u32, Vec<Span>>) -> (i64, BTreeMap<u32, Vec<Span>>) {
    let start = by_rank.values().filter_map(|v| v.first()).map(|s| s.start_ns).min().unwrap_or(0);
    let end = by_rank.values().filter_map(|v| v.last()).map(|s| s.end_ns).max().unwrap_or(start);
    let shifted = by_rank
        .iter()
        .map(|(&r, v)| {
            let v = v
                .iter()
                .map(|s| Span { kind: s.kind, start_ns: s.start_ns - start, end_ns: s.end_ns - start })
                .collect();
            (r, v)
        })
        .collect();
    (end - start, shifted)
}

/// Spans shorter than `res` joined to the one before them (or, first, to the one after), then
/// neighbours of one kind joined.
fn coarse(spans: &[Span], res: i64) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::with_capacity(spans.len().min(1024));
    let mut carry: Option<i64> = None;
    for s in spans {
        let start = carry.take().unwrap_or(s.start_ns);
        if s.end_ns - s.start_ns < res {
            match out.last_mut() {
                Some(last) => last.end_ns = s.end_ns,
                None => carry = Some(start),
            }
            continue;
        }
        match out.last_mut() {
            Some(last) if last.kind == s.kind => last.end_ns = s.end_ns,
            _ => out.push(Span { kind: s.kind, start_ns: start, end_ns: s.end_ns }),
        }
    }
    if let (Some(start), Some(last)) = (carry, spans.last()) {
        // Everything was shorter than the resolution: one span of the longest kind.
        let own: i64 = spans.iter().filter(|s| s.kind == SpanKind::Own).map(|s| s.end_ns - s.start_ns).sum();
        let wait: i64 =
            spans.iter().filter(|s| s.kind == SpanKind::Wait).map(|s| s.end_ns - s.start_ns).sum();
        let kind = if own >= wait { SpanKind::Own } else { SpanKind::Wait };
        out.push(Span { kind, start_ns: start, end_ns: last.end_ns });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(kind: SpanKind, start_ns: i64, end_ns: i64) -> Span {
        Span { kind, start_ns, end_ns }
    }

    #[test]
    fn short_spans_join_their_neighbours() {
        use SpanKind::{Own, Wait};
        let v = [sp(Own, 0, 100), sp(Wait, 100, 101), sp(Own, 101, 200), sp(Wait, 200, 300)];
        assert_eq!(coarse(&v, 5), vec![sp(Own, 0, 200), sp(Wait, 200, 300)]);
        // A short first span goes to the one after it.
        let v = [sp(Wait, 0, 2), sp(Own, 2, 50)];
        assert_eq!(coarse(&v, 5), vec![sp(Own, 0, 50)]);
        // All short: one span of the kind that held more.
        let v = [sp(Wait, 0, 2), sp(Own, 2, 3), sp(Wait, 3, 6)];
        assert_eq!(coarse(&v, 10), vec![sp(Wait, 0, 6)]);
        assert_eq!(coarse(&[], 10), vec![]);
    }

    #[test]
    fn the_typical_step_is_the_nearest_the_median() {
        assert_eq!(typical(&[(0, 300), (1, 100), (2, 110), (3, 120)]), Some(2));
        assert_eq!(typical(&[]), None);
    }
}
