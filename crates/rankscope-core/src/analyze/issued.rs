//! The collectives a rank's host *issued*, as opposed to those its backend executed.
//!
//! On CPU-only ranks the backend's spans (`gloo:all_reduce` on gloo's threads) are the
//! executions; the `c10d::*` ops on the issuing thread (`c10d::allreduce_`) are the calls the
//! training code made, with their shapes. A call the backend never ran (a wrapper's
//! cross-rank check that failed under `TORCH_DISTRIBUTED_DEBUG=DETAIL`, a call stuck before its
//! work started) is only there, so the mismatch engine ([`crate::sequence`]) compares these
//! calls when the ranks have them. Their message is counted in elements (a `TensorList`'s
//! first input has no single dtype).

use serde::{Deserialize, Serialize};

use crate::model::*;
use crate::normalize::job::RankEntry;

/// One issued collective call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Issued {
    pub start_ns: i64,
    pub end_ns: i64,
    pub kind: CollKind,
    pub step: u32,
    /// Elements of the first input (all tensors of a `TensorList`), when written.
    pub elements: Option<i64>,
}

/// The top-level `c10d::*` collective calls of one rank, in time order.
pub fn issued_ops(r: &RankEntry, strings: &StringTable) -> Vec<Issued> {
    let t = &r.trace;
    let e = &t.events;
    let mut rows: Vec<usize> = (0..e.len())
        .filter(|&i| {
            e.kind[i] == EventKind::Slice
                && e.class[i] == Class::Communication
                && t.lanes.kind.get(e.lane[i].0 as usize) == Some(&LaneKind::Cpu)
                && strings.get(e.name[i]).starts_with("c10d::")
        })
        .collect();
    rows.sort_by_key(|&i| (e.lane[i], e.ts_ns[i], std::cmp::Reverse(e.dur_ns[i])));
    let mut out = Vec::new();
    let mut open: Option<(LaneId, i64)> = None;
    for i in rows {
        if let Some((l, end)) = open {
            if l == e.lane[i] && e.end_ns(i) <= end {
                continue; // nested in another call
            }
        }
        open = Some((e.lane[i], e.end_ns(i)));
        let kind = crate::normalize::coll_kind_of(strings.get(e.name[i]));
        if kind == CollKind::Unknown {
            continue; // `c10d::wait` and the like are not calls of their own
        }
        let a = e.args[i];
        let elements = (a != NONE_U32)
            .then(|| {
                let a = a as usize;
                [t.comm.in_nelems.get(a), t.comm.input_elems.get(a)]
                    .into_iter()
                    .flatten()
                    .copied()
                    .find(|&n| n >= 0)
            })
            .flatten();
        out.push(Issued { start_ns: e.ts_ns[i], end_ns: e.end_ns(i), kind, step: e.step[i], elements });
    }
    out.sort_by_key(|x| (x.start_ns, x.end_ns));
    out
}
