//! Steps: `ProfilerStep#N` markers split the trace into training iterations.
//!
//! - Step intervals come from the CPU-side markers (category `user_annotation` in current
//!   Kineto, `Operator` in the 2021 format; any category but `gpu_user_annotation`).
//! - A CPU event belongs to the step whose interval holds its start.
//! - A GPU event belongs to the step of the runtime call that launched it (by correlation):
//!   work launched in step N and run after step N's CPU marker ended is still step N's. GPU
//!   events with no launch in the trace fall back to the GPU-side `ProfilerStep#N` marker that
//!   holds them, and otherwise to the CPU interval that holds their start.
//! - A trace without markers is one synthetic whole-trace step numbered 0 (a diagnostic says so).

use super::{Links, StepTable};
use crate::model::*;

/// `N` from `ProfilerStep#N`.
pub fn step_number(name: &str) -> Option<u32> {
    name.strip_prefix("ProfilerStep#").and_then(|n| n.trim().parse().ok())
}

/// Finds the step intervals and writes `events.step` for every row.
pub fn assign(t: &mut RankTrace, links: &Links) -> StepTable {
    let e = &t.events;
    let n = e.len();
    let mut cpu: Vec<(i64, i64, u32)> = Vec::new();
    let mut gpu: Vec<(i64, i64, u32)> = Vec::new();
    let mut memo = FxHashMap::<StrId, Option<u32>>::default();
    let gpu_ann = t.strings.find("gpu_user_annotation");
    for i in 0..n {
        if e.kind[i] != EventKind::Slice {
            continue;
        }
        let Some(num) = *memo.entry(e.name[i]).or_insert_with(|| step_number(t.strings.get(e.name[i])))
        else {
            continue;
        };
        let on_gpu =
            t.lanes.kind.get(e.lane[i].0 as usize) == Some(&LaneKind::Gpu) || Some(e.cat[i]) == gpu_ann;
        let iv = (e.ts_ns[i], e.end_ns(i), num);
        if on_gpu {
            gpu.push(iv);
        } else {
            cpu.push(iv);
        }
    }
    cpu.sort();
    cpu.dedup_by_key(|s| s.2);
    gpu.sort();
    let mut table = StepTable {
        number: cpu.iter().map(|s| s.2).collect(),
        start_ns: cpu.iter().map(|s| s.0).collect(),
        end_ns: cpu.iter().map(|s| s.1).collect(),
        synthetic: false,
        gpu_numbers: {
            let mut g: Vec<u32> = gpu.iter().map(|s| s.2).collect();
            g.sort_unstable();
            g.dedup();
            g
        },
    };
    let mut step = vec![NONE_U32; n];
    if cpu.is_empty() {
        // One whole-trace step.
        let (lo, hi) = span(e);
        table.number = vec![0];
        table.start_ns = vec![lo];
        table.end_ns = vec![hi];
        table.synthetic = true;
        step.iter_mut().for_each(|s| *s = 0);
        t.diagnostics.add(DiagKind::NoSteps, None, || {
            "no `ProfilerStep#N` markers: the whole trace is analysed as one step (numbered 0)".to_string()
        });
        t.events.step = step;
        return table;
    }
    let find = |ivs: &[(i64, i64, u32)], ts: i64| -> u32 {
        // Last interval starting at or before ts that still holds it.
        let k = ivs.partition_point(|s| s.0 <= ts);
        if k == 0 {
            return NONE_U32;
        }
        let s = ivs[k - 1];
        if ts < s.1 || (s.0 == s.1 && ts == s.0) {
            s.2
        } else {
            NONE_U32
        }
    };
    for (i, st) in step.iter_mut().enumerate() {
        let on_gpu = t.lanes.kind.get(e.lane[i].0 as usize) == Some(&LaneKind::Gpu);
        if !on_gpu {
            *st = find(&cpu, e.ts_ns[i]);
        }
    }
    for (k, g) in links.gpu.iter().enumerate() {
        if let Some(l) = links.launch.get(k) {
            let s = step.get(l.0 as usize).copied().unwrap_or(NONE_U32);
            if let Some(slot) = step.get_mut(g.0 as usize) {
                *slot = s;
            }
        }
    }
    // One flag per row (a hash set of millions of ids costs a cache miss per lookup).
    let mut linked = vec![false; step.len()];
    for g in &links.gpu {
        if let Some(f) = linked.get_mut(g.0 as usize) {
            *f = true;
        }
    }
    for (i, st) in step.iter_mut().enumerate() {
        let on_gpu = t.lanes.kind.get(e.lane[i].0 as usize) == Some(&LaneKind::Gpu);
        if on_gpu && !linked.get(i).copied().unwrap_or(false) {
            let s = find(&gpu, e.ts_ns[i]);
            *st = if s != NONE_U32 { s } else { find(&cpu, e.ts_ns[i]) };
        }
    }
    t.events.step = step;
    table
}

/// First start and last end over all slices, leaving out outliers (see [`span_and_outliers`]).
pub fn span(e: &EventTable) -> (i64, i64) {
    span_and_outliers(e).0
}

/// How far (in multiples of the bulk's own width, at least one second) a slice must lie from
/// the bulk of its trace to be an outlier.
const OUTLIER_SLACK: i64 = 10;

/// The span over all slices but the outliers, the number of outliers and the first outlier row.
///
/// An outlier is a slice that starts more than `OUTLIER_SLACK` × W before the bulk or ends
/// that far after it, where the bulk runs from the (k+1)-th earliest start to the (k+1)-th
/// latest end with k = max(1, n/1000) (so one stray event, or 0.1% of them, never defines it)
/// and W is its length, at least one second. One event at ts 0 in a trace on the epoch clock
/// would otherwise stretch the span to 56 years. With fewer than 10 slices nothing is an
/// outlier. The outliers stay in the tables; only the span leaves them out.
pub fn span_and_outliers(e: &EventTable) -> ((i64, i64), u64, Option<usize>) {
    let is_slice = |i: &usize| e.kind[*i] == EventKind::Slice;
    let n = (0..e.len()).filter(is_slice).count();
    let (lo_b, hi_b) = if n < 10 {
        (i64::MIN, i64::MAX)
    } else {
        let k = (n / 1000).max(1);
        // One scratch column, used for the starts and then for the ends.
        let mut v: Vec<i64> = (0..e.len()).filter(is_slice).map(|i| e.ts_ns[i]).collect();
        let lo = *v.select_nth_unstable(k).1;
        v.clear();
        v.extend((0..e.len()).filter(is_slice).map(|i| e.end_ns(i)));
        let hi = *v.select_nth_unstable(n - 1 - k).1;
        let w = hi.saturating_sub(lo).max(1_000_000_000);
        let slack = w.saturating_mul(OUTLIER_SLACK);
        (lo.saturating_sub(slack), hi.saturating_add(slack))
    };
    let mut lo = i64::MAX;
    let mut hi = i64::MIN;
    let mut outliers = 0u64;
    let mut first = None;
    for i in (0..e.len()).filter(is_slice) {
        let (s, t) = (e.ts_ns[i], e.end_ns(i));
        if s < lo_b || t > hi_b {
            outliers += 1;
            first = first.or(Some(i));
            continue;
        }
        lo = lo.min(s);
        hi = hi.max(t);
    }
    if lo > hi {
        ((0, 0), outliers, first)
    } else {
        ((lo, hi), outliers, first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_numbers() {
        assert_eq!(step_number("ProfilerStep#12"), Some(12));
        assert_eq!(step_number("ProfilerStep#x"), None);
        assert_eq!(step_number("ProfilerStep"), None);
    }
}
