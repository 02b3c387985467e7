//! Inference ranks: the figures that matter when serving, from a rank whose steps are an
//! engine's iterations ([`crate::normalize::iterations`]; docs/metrics.md "Inference traces").
//!
//! - **iterations by phase**: how many prefill, decode and mixed (chunked prefill) iterations
//!   the profiled window holds, and how many the names do not tell;
//! - **decode iteration** (`decode_p50_ns`): the median wall time of a decode iteration's step
//!   window (its host span and the device work it launched). A decode iteration makes one
//!   token for every running request, so this is the time per output token of the batch
//!   (inter-token latency), before sampling overheads the trace does not show;
//! - **communication per decode iteration** (`decode_comm_p50_ns`): the median of the
//!   iteration's communication time (a tensor-parallel engine all-reduces every layer's
//!   output): what the collectives cost each token;
//! - **host gaps between iterations** (`gap_p50_ns`, `gap_ns`, `gap_share`): from one
//!   iteration's host span end to the next one's start, the scheduler's work between forwards
//!   (batching, detokenizing, Python); `gap_share` is their sum over the first start to the last
//!   end. While the host is between iterations the device runs nothing of the next one, unless
//!   the engine queued it ahead (asynchronous scheduling): `gap_idle_ns` is the part of the
//!   gaps in which the device ran nothing at all, `gap_idle_share` its share of the window.
//!
//! Medians are lower medians ([`super::stats::lower_median`]).

use serde::{Deserialize, Serialize};

use super::stats::lower_median;
use super::RankPart;
use crate::normalize::iterations::IterPhase;

/// One inference rank's serving figures (module doc).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankServing {
    pub rank: u32,
    /// `vllm` or `sglang`.
    pub engine: String,
    /// The span name family its iterations were read from.
    pub marker: String,
    /// Whether the steps are `ProfilerStep#N` (one per iteration) rather than the spans.
    #[serde(default)]
    pub profiler_steps: bool,
    pub iterations: u32,
    pub prefill: u32,
    pub decode: u32,
    pub mixed: u32,
    pub unknown: u32,
    /// Median decode iteration wall time (null without a decode iteration the names tell).
    pub decode_p50_ns: Option<i64>,
    /// Median communication time of a decode iteration.
    pub decode_comm_p50_ns: Option<i64>,
    /// Median prefill iteration wall time.
    pub prefill_p50_ns: Option<i64>,
    /// Median host gap between consecutive iterations, their sum, and the sum's share of the
    /// first start to the last end (null with one iteration).
    pub gap_p50_ns: Option<i64>,
    pub gap_ns: i64,
    pub gap_share: Option<f64>,
    /// The part of the gaps in which the device ran nothing, and its share of the window.
    #[serde(default)]
    pub gap_idle_ns: i64,
    #[serde(default)]
    pub gap_idle_share: Option<f64>,
}

/// The serving figures of every part whose steps are an engine's iterations, by rank.
pub fn summarize(parts: &[RankPart]) -> Vec<RankServing> {
    parts.iter().filter_map(rank_serving).collect()
}

fn rank_serving(p: &RankPart) -> Option<RankServing> {
    let it = p.reading.iterations.as_ref()?;
    let phases = &it.iterations.phase;
    let count = |ph: IterPhase| phases.iter().filter(|&&x| x == ph).count() as u32;
    // Step k is iteration k: its figures from the step rows.
    let of_phase = |ph: IterPhase, f: fn(&super::breakdown::StepRank) -> i64| {
        let mut v: Vec<i64> =
            p.steps.iter().filter(|(s, _)| phases.get(*s as usize) == Some(&ph)).map(|(_, r)| f(r)).collect();
        (!v.is_empty()).then(|| lower_median(&mut v))
    };
    let mut gaps: Vec<i64> =
        it.start_ns.iter().skip(1).zip(&it.end_ns).map(|(next, end)| (next - end).max(0)).collect();
    let gap_ns: i64 = gaps.iter().sum();
    let gap_idle_ns: i64 = it.gap_idle_ns.iter().sum();
    let span = match (it.start_ns.first(), it.end_ns.iter().max()) {
        (Some(a), Some(b)) if b > a => Some(b - a),
        _ => None,
    };
    Some(RankServing {
        rank: p.info.rank,
        engine: it.iterations.engine.clone(),
        marker: it.iterations.marker.clone(),
        profiler_steps: it.iterations.profiler_steps,
        iterations: phases.len() as u32,
        prefill: count(IterPhase::Prefill),
        decode: count(IterPhase::Decode),
        mixed: count(IterPhase::Mixed),
        unknown: count(IterPhase::Unknown),
        decode_p50_ns: of_phase(IterPhase::Decode, |r| r.wall_ns),
        decode_comm_p50_ns: of_phase(IterPhase::Decode, |r| r.comm_ns),
        prefill_p50_ns: of_phase(IterPhase::Prefill, |r| r.wall_ns),
        gap_p50_ns: (!gaps.is_empty()).then(|| lower_median(&mut gaps)),
        gap_ns,
        gap_share: span.filter(|_| phases.len() > 1).map(|s| gap_ns as f64 / s as f64),
        gap_idle_ns,
        gap_idle_share: span.filter(|_| phases.len() > 1).map(|s| gap_idle_ns as f64 / s as f64),
    })
}
