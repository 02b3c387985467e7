//! Clock alignment across ranks, estimated from the trace itself.
//!
//! Every participant leaves a blocking collective at nearly the same instant: the collective
//! completes when the last rank arrives, plus the transfer. So for a collective matched across
//! ranks, the difference of its end times on rank r and on the reference rank is rank r's clock
//! offset plus a few µs of noise (on the 8-rank DLRM set, ends agree within 1–7 µs while starts
//! differ by up to 7.6 ms). The estimate is the **median** of those differences over all matched
//! collectives (robust to outliers such as a mismatched pair); the residual is their median
//! absolute deviation after correction.
//!
//! Methods, in order: `user` (`--offset RANK=NS`), `collectives` (above), `step_starts` (median
//! difference of `ProfilerStep#N` starts, which synchronous data parallel aligns closely),
//! `timestamps` (trust the file's clock: `baseTimeNanoseconds` / epoch µs). Pipeline stages (ranks
//! with point-to-point exchanges or stage annotations) never use step starts: they start their
//! steps apart by design. The reference rank
//! (the lowest) has method `reference`.
//!
//! Never correct what is right: an estimate within the noise (|estimate| ≤ max(3 × residual,
//! 10 µs)) is not applied; `offset_ns` is then 0 and the estimate is still reported.
//! Convention: aligned time = rank time − `offset_ns`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::instances::Matched;
use super::stats::lower_median;
use super::RankPart;

/// The noise floor below which an estimated offset is not applied.
pub const MIN_APPLIED_OFFSET_NS: i64 = 10_000;

crate::named_enum! {
    /// How a rank's clock offset was found.
    pub enum AlignMethod {
        /// Given with `--offset`.
        User => "user",
        /// The reference rank (offset 0 by definition).
        Reference => "reference",
        /// Collective end times matched with the reference rank.
        Collectives => "collectives",
        /// `ProfilerStep#N` starts matched with the reference rank.
        StepStarts => "step_starts",
        /// Nothing to match: the raw timestamps are taken as they are.
        Timestamps => "timestamps",
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankAlignment {
    pub rank: u32,
    /// `reference`, `user`, `collectives`, `step_starts` or `timestamps`.
    pub method: AlignMethod,
    /// Applied offset: aligned time = rank time − offset.
    pub offset_ns: i64,
    /// The estimate before the noise test (equal to `offset_ns` when applied).
    pub estimate_ns: i64,
    /// Median absolute deviation of the per-anchor differences around the estimate.
    pub residual_ns: i64,
    /// Largest absolute deviation.
    pub max_residual_ns: i64,
    /// Anchors used (matched collectives or common steps).
    pub anchors: usize,
    /// Why this method, in words.
    pub note: String,
}

pub fn align(parts: &[RankPart], matched: &[Matched], user: &[(u32, i64)]) -> Vec<RankAlignment> {
    let Some(reference) = parts.first().map(|p| p.info.rank) else { return Vec::new() };
    let ref_part = &parts[0];
    // Each rank is looked up in every collective: by rank, never by a scan of the collective's
    // ranks (that made alignment quadratic in the ranks). The first place of a rank counts, and
    // the first offset the user gave it.
    let slots: Vec<BTreeMap<u32, usize>> = matched
        .iter()
        .map(|m| {
            let mut at = BTreeMap::new();
            if m.ranks.contains(&reference) {
                for (k, &r) in m.ranks.iter().enumerate() {
                    at.entry(r).or_insert(k);
                }
            }
            at
        })
        .collect();
    let mut given: BTreeMap<u32, i64> = BTreeMap::new();
    for &(k, off) in user {
        given.entry(k).or_insert(off);
    }
    parts
        .iter()
        .map(|p| {
            let rank = p.info.rank;
            if let Some(&off) = given.get(&rank) {
                return RankAlignment {
                    rank,
                    method: AlignMethod::User,
                    offset_ns: off,
                    estimate_ns: off,
                    residual_ns: 0,
                    max_residual_ns: 0,
                    anchors: 0,
                    note: "offset given by the user".into(),
                };
            }
            if rank == reference {
                return RankAlignment {
                    rank,
                    method: AlignMethod::Reference,
                    offset_ns: 0,
                    estimate_ns: 0,
                    residual_ns: 0,
                    max_residual_ns: 0,
                    anchors: 0,
                    note: "the reference clock (lowest rank)".into(),
                };
            }
            let diffs: Vec<i64> = matched
                .iter()
                .zip(&slots)
                .filter_map(|(m, at)| {
                    let a = *at.get(&reference)?;
                    let b = *at.get(&rank)?;
                    Some(m.per_rank[b].end_ns - m.per_rank[a].end_ns)
                })
                .collect();
            if !diffs.is_empty() {
                return estimate(
                    rank,
                    AlignMethod::Collectives,
                    diffs,
                    "collective end times matched with the reference rank",
                );
            }
            // Pipeline stages start their steps apart by design (a stage waits for its
            // neighbour's activations; the optimizer runs when its own backward ends): their
            // step starts are no anchors.
            let pipelined = !p.pipe.steps.is_empty() || !ref_part.pipe.steps.is_empty();
            let diffs: Vec<i64> = if p.steps_synthetic || ref_part.steps_synthetic || pipelined {
                Vec::new()
            } else {
                p.step_starts
                    .iter()
                    .filter_map(|&(n, start)| {
                        let &(_, ref_start) = ref_part.step_starts.iter().find(|s| s.0 == n)?;
                        Some(start - ref_start)
                    })
                    .collect()
            };
            if !diffs.is_empty() {
                return estimate(
                    rank,
                    AlignMethod::StepStarts,
                    diffs,
                    "no collective matched with the reference rank: step starts used as anchors",
                );
            }
            RankAlignment {
                rank,
                method: AlignMethod::Timestamps,
                offset_ns: 0,
                estimate_ns: 0,
                residual_ns: 0,
                max_residual_ns: 0,
                anchors: 0,
                note:
                    "no collective or step in common with the reference rank: timestamps trusted as written"
                        .into(),
            }
        })
        .collect()
}

fn estimate(rank: u32, method: AlignMethod, mut diffs: Vec<i64>, why: &str) -> RankAlignment {
    let est = lower_median(&mut diffs);
    let mut dev: Vec<i64> = diffs.iter().map(|d| (d - est).abs()).collect();
    let max_dev = dev.iter().copied().max().unwrap_or(0);
    let mad = lower_median(&mut dev);
    let noise = (3 * mad).max(MIN_APPLIED_OFFSET_NS);
    let applied = est.abs() > noise;
    RankAlignment {
        rank,
        method,
        offset_ns: if applied { est } else { 0 },
        estimate_ns: est,
        residual_ns: mad,
        max_residual_ns: max_dev,
        anchors: diffs.len(),
        note: if applied {
            format!("{why}; median of {} differences", diffs.len())
        } else {
            format!(
                "{why}; the estimate ({}) is within the noise (±{}): clocks taken as shared, not corrected",
                human_ns(est),
                human_ns(noise)
            )
        },
    }
}

/// A duration for people: ns, µs or ms with three significant decimals.
fn human_ns(ns: i64) -> String {
    let a = ns.unsigned_abs();
    if a < 1_000 {
        format!("{ns} ns")
    } else if a < 1_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{:.3} ms", ns as f64 / 1e6)
    }
}
