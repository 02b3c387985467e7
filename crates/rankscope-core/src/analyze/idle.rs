//! GPU idle and launch analysis per stream.
//!
//! **Per-stream gaps, as HTA defines them** (`get_idle_time_breakdown`): on each GPU stream,
//! events (kernels, memcpy, memset) sorted by start; for each event after the first, its gap is
//! its start minus the previous event's end. A gap is
//! - **host wait** when the event's launch call *started* after the previous event had ended
//!   (the host had not even begun to launch it: CPU-bound);
//! - **kernel wait** otherwise, when shorter than the threshold (default 30 µs): back-to-back
//!   kernels already queued, the launch/scheduling overhead between them;
//! - **other** otherwise, including events with no launch in the trace.
//!
//! Over the whole trace, between steps included. One difference from HTA: where events on one
//! stream overlap, HTA sums the negative "gap" as is; rankscope counts it as 0.
//!
//! The per-step idle split in the breakdown (`cpu_bound_ns`, ...) is a different figure: gaps
//! of the union of all streams, inside the step, judged by the launch call's *end*.
//!
//! **Launch statistics** over linked kernels: runtime call duration (the `cudaLaunchKernel` /
//! `hipLaunchKernel` slice) and launch delay = kernel start − launch call end (queueing on the
//! device), as percentiles; `runtime_outliers` counts launch calls longer than 10× the median
//! call.

use serde::{Deserialize, Serialize};

use super::stats::percentile;
use crate::model::*;
use crate::normalize::job::RankEntry;

pub const DEFAULT_KERNEL_WAIT_THRESHOLD_NS: i64 = 30_000;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AllocInStep {
    pub rank: u32,
    pub step: u32,
    /// `cudaMalloc`/`cudaFree`-family calls inside the step.
    pub calls: usize,
    pub time_ns: i64,
}

/// Per-stream idle breakdown of one rank (see the module doc).
/// `gpu_work` is the rank's GPU work ([`super::roles::Work::gpu`]).
pub fn stream_idle(r: &RankEntry, gpu_work: &[usize], threshold: i64) -> Vec<StreamIdle> {
    let t = &r.trace;
    let e = &t.events;
    let mut by_lane: std::collections::BTreeMap<LaneId, Vec<usize>> = Default::default();
    for &i in gpu_work {
        by_lane.entry(e.lane[i]).or_default().push(i);
    }
    let mut out = Vec::new();
    for (lane, mut idx) in by_lane {
        idx.sort_by_key(|&i| (e.ts_ns[i], i));
        let l = lane.0 as usize;
        let mut s = StreamIdle {
            rank: r.rank,
            device: t.lanes.device.get(l).copied().unwrap_or(-1),
            stream: t.lanes.stream.get(l).copied().unwrap_or(-1),
            kernels: idx.len(),
            busy_ns: super::intervals::Set::from_sorted(idx.iter().map(|&i| (e.ts_ns[i], e.end_ns(i))))
                .len_ns(),
            idle_ns: 0,
            host_wait_ns: 0,
            kernel_wait_ns: 0,
            other_ns: 0,
            density: 0.0,
        };
        for w in idx.windows(2) {
            let (prev, cur) = (w[0], w[1]);
            let prev_end = e.end_ns(prev);
            let gap = (e.ts_ns[cur] - prev_end).max(0);
            let launch_start = r.norm.links.launch_of(EventIdx(cur as u32)).map(|x| e.ts_ns[x.0 as usize]);
            if launch_start.is_some_and(|ls| ls > prev_end) {
                s.host_wait_ns += gap;
            } else if launch_start.is_some() && gap < threshold {
                s.kernel_wait_ns += gap;
            } else {
                s.other_ns += gap;
            }
            s.idle_ns += gap;
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
    let p50 = percentile(&runtime, 50.0);
    Some(LaunchStats {
        rank: r.rank,
        launches: runtime.len(),
        runtime_p50_ns: p50,
        runtime_p99_ns: percentile(&runtime, 99.0),
        delay_p50_ns: percentile(&delay, 50.0),
        delay_p99_ns: percentile(&delay, 99.0),
        delay_max_ns: delay.last().copied().unwrap_or(0),
        runtime_outliers: runtime.iter().filter(|&&x| p50 > 0 && x > 10 * p50).count(),
    })
}

/// Allocation calls inside steps after the first (warm-up allocations are expected).
pub fn allocations(r: &RankEntry) -> Vec<AllocInStep> {
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
