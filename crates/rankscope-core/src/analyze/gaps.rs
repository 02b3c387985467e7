//! The idle split of a step: each gap in a rank's busy union (all its GPU streams together, or
//! its CPU threads on CPU-only ranks) is input time while the host loads data, else CPU-bound,
//! launch overhead or other by the work that ends it. Used by the per-step breakdown and the
//! critical path alike.

use serde::Serialize;

use super::intervals::Set;
use crate::model::*;
use crate::normalize::job::RankEntry;

/// Classifies the idle gaps of a rank's busy union (all its GPU streams together, or its CPU
/// threads on CPU-only ranks): a gap is **CPU-bound** when the work that ends it was launched by
/// a host call that ended after the gap began (the device waited for the host), **launch
/// overhead** when it is shorter than the kernel-wait threshold and the work was launched on
/// its own, and **other** otherwise. A short gap before a kernel of a CUDA / HIP graph replay
/// (`*GraphLaunch`, [`super::reading`]) is other: the graph's own scheduling, no launch to cut.
#[derive(Debug, Clone)]
pub struct GapClassifier {
    /// Work events by start: (start, end of the launching host call or i64::MIN, launched by
    /// a graph replay).
    starts: Vec<(i64, i64, bool)>,
    threshold: i64,
}

/// How a window's idle time splits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GapSplit {
    /// The host was loading data (inside a DataLoader iteration): input-bound, host work.
    pub input_ns: i64,
    pub cpu_bound_ns: i64,
    pub launch_overhead_ns: i64,
    pub other_idle_ns: i64,
}

impl GapClassifier {
    /// Over `work`, the rank's work events on its metrics side ([`super::roles::Work`]).
    pub fn new(r: &RankEntry, strings: &StringTable, work: &[usize], threshold: i64) -> Self {
        let e = &r.trace.events;
        let mut starts: Vec<(i64, i64, bool)> = work
            .iter()
            .map(|&i| match r.norm.links.launch_of(EventIdx(i as u32)) {
                Some(l) => {
                    let l = l.0 as usize;
                    (e.ts_ns[i], e.end_ns(l), strings.get(e.name[l]).contains("GraphLaunch"))
                }
                None => (e.ts_ns[i], i64::MIN, false),
            })
            .collect();
        starts.sort_unstable();
        GapClassifier { starts, threshold }
    }

    /// Splits the gaps of `busy` inside `[lo, hi)`. The part of a gap during which the host
    /// was loading data (`input`, the DataLoader union) is input time, whatever ends the gap;
    /// the rest of the gap is classified by the work that ends it.
    pub fn split(&self, busy: &Set, input: &Set, lo: i64, hi: i64) -> GapSplit {
        let mut s = GapSplit::default();
        for &(g0, g1) in busy.gaps(lo, hi).intervals() {
            let loading = input.len_within(g0, g1);
            s.input_ns += loading;
            let gap = g1 - g0 - loading;
            let k = self.starts.partition_point(|x| x.0 < g1);
            let next = self.starts.get(k);
            match next {
                Some(&(start, launch_end, _)) if start < hi && launch_end > g0 => s.cpu_bound_ns += gap,
                Some(&(start, _, false)) if start < hi && gap < self.threshold => s.launch_overhead_ns += gap,
                _ => s.other_idle_ns += gap,
            }
        }
        s
    }
}
