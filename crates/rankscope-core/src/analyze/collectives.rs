//! Collectives per kind and process group: how many, how big, how long, how much of it was
//! data transfer and how much was waiting, how far apart the ranks arrived, and the bandwidth.
//!
//! For one collective matched across ranks (after clock alignment):
//! - **transfer time** = the minimum duration over the participating ranks (the last rank to
//!   arrive waits for nobody: its duration is the transfer), as the TensorBoard plugin defines
//!   "data transfer time"; **sync wait** of a rank = its duration − the transfer time.
//! - **arrival skew** = latest aligned start − earliest aligned start; the latest is the
//!   collective's **last arriver**.
//! - **algbw** = S / transfer time; **busbw** = algbw × factor, with nccl-tests' factors for n
//!   ranks: all_reduce 2(n−1)/n; all_gather, reduce_scatter, all_to_all (n−1)/n; broadcast,
//!   reduce, send/recv 1. S as nccl-tests counts it (see `instances::args_bytes`). GB/s = 1e9 B/s.
//! - Single-rank traces have no matched partners: durations are reported, transfer and sync are
//!   not, and bandwidth uses the whole duration (`bw_basis: "duration"`), an upper bound on time
//!   and so a lower bound on bandwidth.

use std::collections::BTreeMap;

use serde::Serialize;

use super::align::RankAlignment;
use super::instances::{Instance, Matched};
use super::stats::{lower_median_f, percentile};
use crate::model::CollKind;

/// nccl-tests' bus-bandwidth factor for `kind` over `n` ranks ([`CollKind::busbw_factor`]);
/// a single-rank trace gets 1 (busbw = algbw), since its one rank's figure is all there is.
pub fn busbw_factor(kind: CollKind, n: i64) -> f64 {
    if n <= 1 {
        return 1.0;
    }
    kind.busbw_factor(n)
}

/// One matched collective after alignment.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Op {
    pub kind: CollKind,
    pub pg: String,
    pub key: i64,
    pub step: u32,
    pub ranks: Vec<u32>,
    pub group_size: i64,
    pub bytes: Option<i64>,
    /// Per rank (same order as `ranks`): aligned start, duration, sync wait.
    pub start_ns: Vec<i64>,
    pub dur_ns: Vec<i64>,
    pub sync_wait_ns: Vec<i64>,
    pub transfer_ns: i64,
    pub skew_ns: i64,
    pub last_arriver: u32,
    /// A loaded member of its group never joined it (a hang, a rank that left, a profiling
    /// window that closed earlier): its time is waiting, it has no transfer and no bandwidth.
    #[serde(skip)]
    pub partial: bool,
    /// The region of the host that issued it (on its lowest rank), filled once regions are
    /// known; empty when unknown.
    #[serde(skip)]
    pub origin: String,
    /// Per rank (same order as `ranks`): the instance's event on that rank.
    #[serde(skip)]
    pub events: Vec<crate::model::EventIdx>,
    /// Per rank (same order as `ranks`): its own size of the call (an all_to_all's members
    /// move different amounts).
    #[serde(skip)]
    pub per_rank_bytes: Vec<Option<i64>>,
}

/// Every rank's clock offset, by rank: one lookup per (collective, rank) must not scan the
/// alignment (that made the job's analysis quadratic in the ranks).
#[derive(Debug, Clone, Default)]
pub struct Offsets(BTreeMap<u32, i64>);

impl Offsets {
    /// The first alignment of each rank counts.
    pub fn new(al: &[RankAlignment]) -> Offsets {
        let mut by_rank = BTreeMap::new();
        for a in al {
            by_rank.entry(a.rank).or_insert(a.offset_ns);
        }
        Offsets(by_rank)
    }

    /// The rank's offset (aligned time = rank time − offset), 0 for a rank not aligned.
    pub fn of(&self, rank: u32) -> i64 {
        self.0.get(&rank).copied().unwrap_or(0)
    }
}

pub fn ops(matched: &[Matched], al: &[RankAlignment], world: i64) -> Vec<Op> {
    let offsets = Offsets::new(al);
    matched
        .iter()
        .map(|m| {
            let start: Vec<i64> =
                m.ranks.iter().zip(&m.per_rank).map(|(&r, x)| x.start_ns - offsets.of(r)).collect();
            let dur: Vec<i64> = m.per_rank.iter().map(|x| x.end_ns - x.start_ns).collect();
            let transfer = dur.iter().copied().min().unwrap_or(0);
            let (lo, hi) =
                (start.iter().copied().min().unwrap_or(0), start.iter().copied().max().unwrap_or(0));
            let last = start.iter().position(|&s| s == hi).and_then(|k| m.ranks.get(k)).copied().unwrap_or(0);
            Op {
                kind: m.kind,
                pg: m.pg.clone(),
                key: m.key,
                step: m.per_rank.first().map_or(u32::MAX, |x| x.step),
                ranks: m.ranks.clone(),
                group_size: m
                    .per_rank
                    .iter()
                    .find_map(|x| x.group_size)
                    .unwrap_or(world.max(m.ranks.len() as i64)),
                bytes: m.per_rank.iter().find_map(|x| x.bytes),
                sync_wait_ns: dur.iter().map(|d| d - transfer).collect(),
                start_ns: start,
                dur_ns: dur,
                transfer_ns: transfer,
                skew_ns: hi - lo,
                last_arriver: last,
                origin: String::new(),
                partial: false,
                events: m.per_rank.iter().map(|x| x.event).collect(),
                per_rank_bytes: m.per_rank.iter().map(|x| x.bytes).collect(),
            }
        })
        .collect()
}

/// Per kind and process group.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct CollectiveStats {
    pub kind: CollKind,
    pub pg: String,
    /// Collectives (matched across ranks, or per rank when nothing matched).
    pub count: usize,
    /// Executions summed over ranks.
    pub instances: usize,
    pub group_size: i64,
    pub bytes_total: i64,
    pub bytes_p50: Option<i64>,
    pub dur_mean_ns: i64,
    pub dur_p50_ns: i64,
    pub dur_p95_ns: i64,
    pub dur_p99_ns: i64,
    pub dur_max_ns: i64,
    pub transfer_mean_ns: Option<i64>,
    pub sync_wait_mean_ns: Option<i64>,
    pub skew_p50_ns: Option<i64>,
    pub skew_max_ns: Option<i64>,
    pub algbw_gbps: Option<f64>,
    pub busbw_gbps: Option<f64>,
    /// `transfer` (matched across ranks) or `duration` (single rank: includes any waiting).
    pub bw_basis: BwBasis,
}

crate::named_enum! {
    /// What time a collective's bandwidth is computed over.
    pub enum BwBasis {
        /// The transfer, matched across ranks (the last member's arrival to the end).
        Transfer => "transfer",
        /// The whole duration on one rank: includes any waiting, so a lower bound.
        Duration => "duration",
    }
}

/// Cross-rank timing of a group of matched collectives.
struct Timing {
    transfer_mean_ns: i64,
    sync_wait_mean_ns: i64,
    /// Sorted.
    skews: Vec<i64>,
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    kind: CollKind,
    pg: String,
    count: usize,
    group_size: i64,
    mut durs: Vec<i64>,
    mut bytes: Vec<i64>,
    timing: Option<Timing>,
    algbw: Vec<f64>,
) -> CollectiveStats {
    durs.sort_unstable();
    bytes.sort_unstable();
    let alg = lower_median_f(algbw);
    CollectiveStats {
        kind,
        pg,
        count,
        instances: durs.len(),
        group_size,
        bytes_total: bytes.iter().sum(),
        bytes_p50: (!bytes.is_empty()).then(|| percentile(&bytes, 50.0)),
        dur_mean_ns: durs.iter().sum::<i64>() / durs.len().max(1) as i64,
        dur_p50_ns: percentile(&durs, 50.0),
        dur_p95_ns: percentile(&durs, 95.0),
        dur_p99_ns: percentile(&durs, 99.0),
        dur_max_ns: durs.last().copied().unwrap_or(0),
        transfer_mean_ns: timing.as_ref().map(|t| t.transfer_mean_ns),
        sync_wait_mean_ns: timing.as_ref().map(|t| t.sync_wait_mean_ns),
        skew_p50_ns: timing.as_ref().map(|t| percentile(&t.skews, 50.0)),
        skew_max_ns: timing.as_ref().and_then(|t| t.skews.last().copied()),
        algbw_gbps: alg,
        busbw_gbps: alg.map(|a| a * busbw_factor(kind, group_size)),
        bw_basis: if timing.is_some() { BwBasis::Transfer } else { BwBasis::Duration },
    }
}

pub fn stats(ops: &[Op], insts: &[(u32, Vec<Instance>)], world: i64) -> Vec<CollectiveStats> {
    if ops.iter().any(|o| !o.partial) {
        let mut groups: BTreeMap<(CollKind, String), Vec<&Op>> = BTreeMap::new();
        for o in ops.iter().filter(|o| !o.partial) {
            groups.entry((o.kind, o.pg.clone())).or_default().push(o);
        }
        return groups
            .into_iter()
            .map(|((kind, pg), v)| {
                let waits: Vec<i64> = v.iter().flat_map(|o| o.sync_wait_ns.iter().copied()).collect();
                let mut skews: Vec<i64> = v.iter().map(|o| o.skew_ns).collect();
                skews.sort_unstable();
                let timing = Timing {
                    transfer_mean_ns: v.iter().map(|o| o.transfer_ns).sum::<i64>() / v.len() as i64,
                    sync_wait_mean_ns: waits.iter().sum::<i64>() / waits.len().max(1) as i64,
                    skews,
                };
                summarize(
                    kind,
                    pg,
                    v.len(),
                    v.iter().map(|o| o.group_size).max().unwrap_or(world),
                    v.iter().flat_map(|o| o.dur_ns.iter().copied()).collect(),
                    v.iter().filter_map(|o| o.bytes).collect(),
                    Some(timing),
                    v.iter().filter_map(|o| Some(o.bytes? as f64 / o.transfer_ns.max(1) as f64)).collect(),
                )
            })
            .collect();
    }
    // Nothing matched: per-rank durations only.
    let mut groups: BTreeMap<(CollKind, String), Vec<&Instance>> = BTreeMap::new();
    for (_, v) in insts {
        for x in v {
            groups.entry((x.kind, x.pg.clone())).or_default().push(x);
        }
    }
    groups
        .into_iter()
        .map(|((kind, pg), v)| {
            summarize(
                kind,
                pg,
                v.len(),
                v.iter().find_map(|x| x.group_size).unwrap_or(world),
                v.iter().map(|x| x.end_ns - x.start_ns).collect(),
                v.iter().filter_map(|x| x.bytes).collect(),
                None,
                v.iter()
                    .filter_map(|x| Some(x.bytes? as f64 / (x.end_ns - x.start_ns).max(1) as f64))
                    .collect(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_are_nccl_tests() {
        assert!((busbw_factor(CollKind::AllReduce, 8) - 1.75).abs() < 1e-12);
        assert!((busbw_factor(CollKind::AllGather, 8) - 0.875).abs() < 1e-12);
        assert!((busbw_factor(CollKind::AllToAll, 4) - 0.75).abs() < 1e-12);
        assert_eq!(busbw_factor(CollKind::Broadcast, 8), 1.0);
        assert_eq!(busbw_factor(CollKind::SendRecv, 2), 1.0);
        // Gather and scatter as nccl-tests counts them, as the nccl-tests reader does.
        assert!((busbw_factor(CollKind::Gather, 8) - 0.875).abs() < 1e-12);
        assert!((busbw_factor(CollKind::Scatter, 4) - 0.75).abs() < 1e-12);
    }
}
