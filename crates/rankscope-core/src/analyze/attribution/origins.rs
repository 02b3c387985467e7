//! Where each rank's collectives come from: the region of the main thread that issued them,
//! per step and kind ([`comm_origins`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::analyze::intervals::{Iv, Set};
use crate::analyze::regions::Phase;
use crate::analyze::waits::RankWait;
use crate::analyze::RankPart;

/// Where a rank's collectives come from: the region of the main thread open when the host
/// issued them, per step and kind.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OriginRow {
    pub rank: u32,
    pub step: u32,
    /// The innermost region open on the main thread at the issue, or empty.
    pub region: String,
    /// From the step down to `region`, joined with ` > `.
    pub path: String,
    pub phase: Phase,
    pub kind: crate::model::CollKind,
    pub count: u32,
    pub bytes_total: i64,
    pub bytes_max: i64,
    /// Union of the collectives' intervals.
    pub dur_ns: i64,
    /// From the first one's start to the last one's end: where no region tells (calls of a
    /// few bytes outside any annotation), the extent the host spends on them.
    #[serde(default)]
    pub span_ns: i64,
    /// Of that, while the main thread ran no operator (or was in a host synchronization): the
    /// host is blocked on these collectives. For calls of a few bytes outside any annotation,
    /// only the part no larger collective of the rank runs under (the host would be blocked on
    /// that one anyway).
    pub blocked_ns: i64,
    pub exposed_transfer_ns: i64,
    pub exposed_wait_ns: i64,
    /// Issued from inside autograd's backward functions (a gradient hook: DDP's buckets,
    /// FSDP's reduce-scatters): gradient communication, sized or not. Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_autograd: bool,
    /// The process group they ran on ([`crate::analyze::layout`]) when they all ran on one;
    /// absent when unknown or when the row holds collectives of several groups.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pg: String,
}

/// A collective of at most this many bytes is a scalar's or a handful of values' (a metric, a
/// flag, a barrier), never a gradient bucket.
pub const TINY_COLLECTIVE_BYTES: i64 = 64 * 1024;

/// The origin of every rank's collectives (`insts[k]` belongs to `parts[k]`), and the region
/// each instance came from by `(rank, event)`.
pub fn comm_origins(
    parts: &[RankPart],
    insts: &[Vec<crate::analyze::instances::Instance>],
    waits: &[RankWait],
) -> (Vec<OriginRow>, BTreeMap<(u32, u32), String>) {
    let mut out = Vec::new();
    let mut of_event = BTreeMap::new();
    for ((p, v), w) in parts.iter().zip(insts).zip(waits) {
        let rr = &p.regions;
        let main = rr.main_occurrences();
        let blocked_host = Set::from_sorted(rr.free_gaps.iter().copied())
            .union(&Set::from_sorted(rr.sync_spans.iter().copied()));
        let name_of = |k: usize| rr.name_of(k).to_string();
        let deepest = |ts: i64| rr.region_at(&main, ts);
        // The rank's larger collectives: a call of a few bytes that runs under one of them (DDP's
        // map of used parameters beside its gradient bucket) blocks the host no longer than the
        // larger call does; only its time outside them is its own.
        let larger = Set::from_unsorted(
            v.iter()
                .filter(|x| {
                    x.kind != crate::model::CollKind::Barrier
                        && x.bytes.is_none_or(|b| b > TINY_COLLECTIVE_BYTES)
                })
                .map(|x| (x.start_ns, x.end_ns))
                .collect(),
        );
        #[derive(Default)]
        struct Acc {
            path: String,
            phase: Option<Phase>,
            ivs: Vec<Iv>,
            bytes_total: i64,
            bytes_max: i64,
            count: u32,
            /// The instances' group while they agree; `None` once two differ.
            pg: Option<Option<String>>,
        }
        let mut groups: BTreeMap<(u32, String, crate::model::CollKind, bool, bool), Acc> = BTreeMap::new();
        for x in v {
            let at = deepest(x.issued_ns);
            let region = at.map_or_else(String::new, name_of);
            of_event.insert((p.info.rank, x.event.0), region.clone());
            // Outside any annotation the region cannot tell a training loop's scalar
            // all_reduces (a metric, a barrier) from the gradient buckets issued in backward:
            // there, calls of a few bytes make a row of their own.
            let unannotated = region.is_empty() || region == "ProfilerStep";
            // Of known size (a call whose size the trace does not say may be anything), or a
            // barrier, which moves no data.
            let tiny = unannotated
                && (x.kind == crate::model::CollKind::Barrier
                    || x.bytes.is_some_and(|b| b <= TINY_COLLECTIVE_BYTES));
            let g = groups.entry((x.step, region, x.kind, tiny, x.from_autograd)).or_default();
            // The group's path and phase are its first instance's: the chain is walked once.
            if g.phase.is_none() {
                let (path, phase) = match at {
                    Some(k) => {
                        let mut chain = vec![name_of(k)];
                        let mut cur = rr.occurrences[k].parent;
                        while let Some(q) = cur {
                            chain.push(name_of(q as usize));
                            cur = rr.occurrences.get(q as usize).and_then(|o| o.parent);
                        }
                        chain.reverse();
                        (chain.join(" > "), rr.occurrences[k].phase)
                    }
                    None => (String::new(), Phase::Other),
                };
                g.path = path;
                g.phase = Some(phase);
            }
            g.ivs.push((x.start_ns, x.end_ns));
            let b = x.bytes.unwrap_or(0).max(0);
            g.bytes_total += b;
            g.bytes_max = g.bytes_max.max(b);
            g.count += 1;
            g.pg = match g.pg.take() {
                None => Some(Some(x.pg.clone())),
                Some(Some(pg)) if pg == x.pg => Some(Some(pg)),
                Some(_) => Some(None),
            };
        }
        for ((step, region, kind, tiny, from_autograd), g) in groups {
            let Acc { path, phase, ivs, bytes_total, bytes_max, count, pg } = g;
            let phase = phase.unwrap_or(Phase::Other);
            let span_ns =
                ivs.iter().map(|x| x.1).max().unwrap_or(0) - ivs.iter().map(|x| x.0).min().unwrap_or(0);
            let set = Set::from_unsorted(ivs);
            out.push(OriginRow {
                span_ns,
                rank: p.info.rank,
                step,
                region,
                path,
                phase,
                kind,
                count,
                bytes_total,
                bytes_max,
                dur_ns: set.len_ns(),
                blocked_ns: if tiny {
                    set.intersect(&blocked_host).subtract(&larger).len_ns()
                } else {
                    set.intersect(&blocked_host).len_ns()
                },
                exposed_transfer_ns: set.intersect(&w.exposed_transfer).len_ns(),
                exposed_wait_ns: set.intersect(&w.exposed_wait).len_ns(),
                from_autograd,
                pg: pg.flatten().unwrap_or_default(),
            });
        }
    }
    (out, of_event)
}
