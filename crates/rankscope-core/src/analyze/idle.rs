//! GPU idle and launch analysis per stream.
//!
//! **Gaps** are the idle intervals between consecutive kernels (and memory operations) on one
//! GPU stream, inside the rank's step windows. Each gap is classified as HTA does:
//! - **host wait**: the host launched the next kernel only after the previous one had finished
//!   (the launch call ended after the gap began): the GPU starved because the CPU was late —
//!   the CPU-bound symptom;
//! - **kernel wait**: a short gap (below `kernel_wait_threshold_ns`, default 30 µs) between
//!   kernels that were already queued: launch/scheduling overhead between back-to-back kernels;
//! - **other**: the rest (waiting on another stream, on a collective, on data).
//!
//! **Launch statistics** over linked kernels: runtime call duration (the `cudaLaunchKernel` /
//! `hipLaunchKernel` slice) and launch delay = kernel start − launch call end (queueing on the
//! device), as percentiles; `runtime_outliers` counts launch calls longer than 10× the median
//! call.

use serde::Serialize;

use super::collectives::pct;
use crate::model::*;
use crate::normalize::job::RankEntry;
use crate::normalize::Job;

pub const DEFAULT_KERNEL_WAIT_THRESHOLD_NS: i64 = 30_000;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StreamIdle {
    pub rank: u32,
    pub device: i64,
    pub stream: i64,
    pub kernels: usize,
    pub busy_ns: i64,
    pub idle_ns: i64,
    pub host_wait_ns: i64,
    pub kernel_wait_ns: i64,
    pub other_ns: i64,
    /// busy / (busy + idle) inside the step windows.
    pub density: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LaunchStats {
    pub rank: u32,
    pub launches: usize,
    pub runtime_p50_ns: i64,
    pub runtime_p99_ns: i64,
    pub delay_p50_ns: i64,
    pub delay_p99_ns: i64,
    pub delay_max_ns: i64,
    /// Launch calls longer than 10× the median call: outliers worth a look.
    pub runtime_outliers: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AllocInStep {
    pub rank: u32,
    pub step: u32,
    /// `cudaMalloc`/`cudaFree`-family calls inside the step.
    pub calls: usize,
    pub time_ns: i64,
}

/// Per-stream idle breakdown of one rank inside `windows` (`(step, start, end)`).
pub fn stream_idle(r: &RankEntry, windows: &[(u32, i64, i64)], threshold: i64) -> Vec<StreamIdle> {
    let t = &r.trace;
    let e = &t.events;
    let mut by_lane: std::collections::BTreeMap<LaneId, Vec<usize>> = Default::default();
    for i in 0..e.len() {
        if e.kind[i] == EventKind::Slice
            && t.lanes.kind.get(e.lane[i].0 as usize) == Some(&LaneKind::Gpu)
            && matches!(e.class[i], Class::Compute | Class::Communication | Class::Memory)
        {
            by_lane.entry(e.lane[i]).or_default().push(i);
        }
    }
    let mut out = Vec::new();
    for (lane, idx) in by_lane {
        let l = lane.0 as usize;
        let mut s = StreamIdle {
            rank: r.rank,
            device: t.lanes.device.get(l).copied().unwrap_or(-1),
            stream: t.lanes.stream.get(l).copied().unwrap_or(-1),
            kernels: idx.len(),
            busy_ns: 0,
            idle_ns: 0,
            host_wait_ns: 0,
            kernel_wait_ns: 0,
            other_ns: 0,
            density: 0.0,
        };
        for &(_, lo, hi) in windows {
            let inside: Vec<usize> =
                idx.iter().copied().filter(|&i| e.end_ns(i) > lo && e.ts_ns[i] < hi).collect();
            let mut cursor = lo;
            let mut prev_end: Option<i64> = None;
            for &i in &inside {
                let start = e.ts_ns[i].max(lo);
                let end = e.end_ns(i).min(hi);
                if start > cursor {
                    let gap = start - cursor;
                    s.idle_ns += gap;
                    // Only gaps between two kernels are classified; the lead-in before the
                    // window's first kernel counts as other.
                    match prev_end {
                        Some(pe) => {
                            let launch_end =
                                r.norm.links.launch_of(EventIdx(i as u32)).map(|x| e.end_ns(x.0 as usize));
                            if launch_end.is_some_and(|le| le > pe) {
                                s.host_wait_ns += gap;
                            } else if gap < threshold {
                                s.kernel_wait_ns += gap;
                            } else {
                                s.other_ns += gap;
                            }
                        }
                        None => s.other_ns += gap,
                    }
                }
                if end > cursor {
                    s.busy_ns += end - start.max(cursor);
                    cursor = end;
                }
                prev_end = Some(prev_end.map_or(end, |p: i64| p.max(end)));
            }
            if hi > cursor && !inside.is_empty() {
                s.idle_ns += hi - cursor;
                s.other_ns += hi - cursor;
            }
        }
        let total = s.busy_ns + s.idle_ns;
        s.density = if total > 0 { s.busy_ns as f64 / total as f64 } else { 0.0 };
        out.push(s);
    }
    out
}

/// Launch statistics of one rank (CUDA and HIP alike: any linked runtime call).
pub fn launch_stats(r: &RankEntry) -> Option<LaunchStats> {
    let e = &r.trace.events;
    let links = &r.norm.links;
    if links.gpu.is_empty() {
        return None;
    }
    let mut runtime: Vec<i64> = Vec::with_capacity(links.gpu.len());
    let mut delay: Vec<i64> = Vec::with_capacity(links.gpu.len());
    for (g, l) in links.gpu.iter().zip(&links.launch) {
        let (g, l) = (g.0 as usize, l.0 as usize);
        if e.class.get(l) != Some(&Class::Launch) {
            continue;
        }
        runtime.push(e.dur_ns[l]);
        delay.push(e.ts_ns[g] - e.end_ns(l));
    }
    if runtime.is_empty() {
        return None;
    }
    runtime.sort_unstable();
    delay.sort_unstable();
    let p50 = pct(&runtime, 50.0);
    Some(LaunchStats {
        rank: r.rank,
        launches: runtime.len(),
        runtime_p50_ns: p50,
        runtime_p99_ns: pct(&runtime, 99.0),
        delay_p50_ns: pct(&delay, 50.0),
        delay_p99_ns: pct(&delay, 99.0),
        delay_max_ns: delay.last().copied().unwrap_or(0),
        runtime_outliers: runtime.iter().filter(|&&x| p50 > 0 && x > 10 * p50).count(),
    })
}

/// Allocation calls inside steps after the first (warm-up allocations are expected).
pub fn allocations(job: &Job, r: &RankEntry) -> Vec<AllocInStep> {
    let _ = job;
    let e = &r.trace.events;
    let first = r.norm.steps.number.first().copied();
    let mut by_step: std::collections::BTreeMap<u32, (usize, i64)> = Default::default();
    for i in 0..e.len() {
        if e.class[i] == Class::Allocation && e.step[i] != NONE_U32 && Some(e.step[i]) != first {
            let v = by_step.entry(e.step[i]).or_default();
            v.0 += 1;
            v.1 += e.dur_ns[i];
        }
    }
    by_step
        .into_iter()
        .map(|(step, (calls, time_ns))| AllocInStep { rank: r.rank, step, calls, time_ns })
        .collect()
}

/// Classifies the idle gaps of a rank's busy union (all its GPU streams together, or its CPU
/// threads on CPU-only ranks): a gap is **CPU-bound** when the work that ends it was launched by
/// a host call that ended after the gap began (the device waited for the host), **launch
/// overhead** when it is shorter than the kernel-wait threshold, and **other** otherwise.
#[derive(Debug, Clone)]
pub struct GapClassifier {
    /// Work events by start: (start, end of the launching host call or i64::MIN).
    starts: Vec<(i64, i64)>,
    threshold: i64,
}

/// How a window's idle time splits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GapSplit {
    pub cpu_bound_ns: i64,
    pub launch_overhead_ns: i64,
    pub other_idle_ns: i64,
}

impl GapClassifier {
    pub fn new(r: &RankEntry, side: LaneKind, threshold: i64) -> Self {
        let t = &r.trace;
        let e = &t.events;
        let mut starts: Vec<(i64, i64)> = (0..e.len())
            .filter(|&i| {
                e.kind[i] == EventKind::Slice
                    && t.lanes.kind.get(e.lane[i].0 as usize) == Some(&side)
                    && matches!(e.class[i], Class::Compute | Class::Communication | Class::Memory)
            })
            .map(|i| {
                let le =
                    r.norm.links.launch_of(EventIdx(i as u32)).map_or(i64::MIN, |l| e.end_ns(l.0 as usize));
                (e.ts_ns[i], le)
            })
            .collect();
        starts.sort_unstable();
        GapClassifier { starts, threshold }
    }

    /// Splits the gaps of `busy` inside `[lo, hi)`.
    pub fn split(&self, busy: &super::intervals::Set, lo: i64, hi: i64) -> GapSplit {
        let mut s = GapSplit::default();
        for &(g0, g1) in busy.gaps(lo, hi).intervals() {
            let gap = g1 - g0;
            let k = self.starts.partition_point(|x| x.0 < g1);
            let next = self.starts.get(k);
            match next {
                Some(&(start, launch_end)) if start < hi && launch_end > g0 => s.cpu_bound_ns += gap,
                Some(&(start, _)) if start < hi && gap < self.threshold => s.launch_overhead_ns += gap,
                _ => s.other_idle_ns += gap,
            }
        }
        s
    }
}
