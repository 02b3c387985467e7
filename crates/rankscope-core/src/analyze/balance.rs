//! Stragglers and balance.
//!
//! **The straggler of a step** is the rank the others waited for: over the step's matched
//! blocking collectives, the rank with the greatest total lateness, where a rank's lateness at a
//! collective is its aligned start minus the earliest aligned start. Because the collective ends
//! together everywhere, the latest arriver is also the rank with the least sync wait. This is
//! deliberately *not* the rank with the longest step: data parallel synchronizes step lengths,
//! so every rank's step looks equally long and a tool that ranks by step time names noise.
//! `others_wait_ns` is the sync wait the other ranks accumulated in those collectives.
//!
//! **Compute imbalance** of a step = (max − min) / mean of the ranks' `compute_ns`; flagged above
//! the threshold (default 5%). **Step-time distribution** per rank over its steps' `wall_ns`:
//! mean, p50, p99, max and jitter = standard deviation / mean.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::breakdown::StepRank;
use super::collectives::Op;
use super::stats::percentile;

#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct StepStraggler {
    pub step: u32,
    pub rank: u32,
    /// The straggler's lateness summed over the step's collectives.
    pub lateness_ns: i64,
    /// Sync wait the other ranks spent in those collectives.
    pub others_wait_ns: i64,
    /// Collectives considered.
    pub collectives: usize,
    /// Runner-up lateness, to judge how clear the call is.
    pub runner_up_rank: Option<u32>,
    pub runner_up_lateness_ns: i64,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct StragglerSummary {
    /// The rank named straggler most often.
    pub rank: u32,
    pub steps_as_straggler: usize,
    pub steps: usize,
    /// steps_as_straggler / steps.
    pub consistency: f64,
    pub others_wait_ns: i64,
}

pub fn stragglers(ops: &[Op]) -> (Vec<StepStraggler>, Option<StragglerSummary>) {
    let mut by_step: BTreeMap<u32, Vec<&Op>> = BTreeMap::new();
    for o in ops.iter().filter(|o| o.ranks.len() >= 2 && !o.partial) {
        by_step.entry(o.step).or_default().push(o);
    }
    let mut out = Vec::new();
    for (step, v) in by_step {
        let mut late: BTreeMap<u32, i64> = BTreeMap::new();
        for o in &v {
            let lo = o.start_ns.iter().copied().min().unwrap_or(0);
            for (k, &r) in o.ranks.iter().enumerate() {
                // Saturating: a rank whose clock could not be placed (a file cut before its
                // `baseTimeNanoseconds`, next to a duplicate of its rank) may start 10^18 ns away.
                let e = late.entry(r).or_default();
                *e = e.saturating_add(o.start_ns[k].saturating_sub(lo));
            }
        }
        let mut ranked: Vec<(u32, i64)> = late.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let Some(&(rank, lateness)) = ranked.first() else { continue };
        if lateness <= 0 {
            continue;
        }
        let others_wait: i64 = v
            .iter()
            .map(|o| {
                o.ranks
                    .iter()
                    .zip(&o.sync_wait_ns)
                    .filter(|(r, _)| **r != rank)
                    .fold(0i64, |a, (_, w)| a.saturating_add(*w))
            })
            .fold(0i64, i64::saturating_add);
        out.push(StepStraggler {
            step,
            rank,
            lateness_ns: lateness,
            others_wait_ns: others_wait,
            collectives: v.len(),
            runner_up_rank: ranked.get(1).map(|x| x.0),
            runner_up_lateness_ns: ranked.get(1).map_or(0, |x| x.1),
        });
    }
    let mut count: BTreeMap<u32, usize> = BTreeMap::new();
    for s in &out {
        *count.entry(s.rank).or_default() += 1;
    }
    let summary =
        count.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(&rank, &n)| StragglerSummary {
            rank,
            steps_as_straggler: n,
            steps: out.len(),
            consistency: n as f64 / out.len().max(1) as f64,
            others_wait_ns: out.iter().filter(|s| s.rank == rank).map(|s| s.others_wait_ns).sum(),
        });
    (out, summary)
}

#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Imbalance {
    pub step: u32,
    /// (max − min) / mean of compute_ns over ranks.
    pub compute_imbalance: f64,
    pub max_rank: u32,
    pub min_rank: u32,
    pub flagged: bool,
}

pub fn imbalance(step: u32, per_rank: &[StepRank], threshold: f64) -> Option<Imbalance> {
    if per_rank.len() < 2 {
        return None;
    }
    let max = per_rank.iter().max_by_key(|s| (s.compute_ns, std::cmp::Reverse(s.rank)))?;
    let min = per_rank.iter().min_by_key(|s| (s.compute_ns, s.rank))?;
    let mean = per_rank.iter().map(|s| s.compute_ns as f64).sum::<f64>() / per_rank.len() as f64;
    if mean <= 0.0 {
        return None;
    }
    let v = (max.compute_ns - min.compute_ns) as f64 / mean;
    Some(Imbalance {
        step,
        compute_imbalance: v,
        max_rank: max.rank,
        min_rank: min.rank,
        flagged: v > threshold,
    })
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepTimeStats {
    pub mean_ns: i64,
    pub p50_ns: i64,
    pub p99_ns: i64,
    pub max_ns: i64,
    pub min_ns: i64,
    /// Standard deviation / mean.
    pub jitter: f64,
}

pub fn step_time_stats(walls: &[i64]) -> Option<StepTimeStats> {
    if walls.is_empty() {
        return None;
    }
    let mut v = walls.to_vec();
    v.sort_unstable();
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
    Some(StepTimeStats {
        mean_ns: mean.round() as i64,
        p50_ns: percentile(&v, 50.0),
        p99_ns: percentile(&v, 99.0),
        max_ns: *v.last().unwrap_or(&0),
        min_ns: v[0],
        jitter: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
    })
}
