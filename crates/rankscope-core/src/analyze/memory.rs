//! Memory over the steps, from the caching allocator's `[memory]` instants
//! (`profile_memory=True`; [`crate::model::MEMORY_EVENT`]): per rank, device and step, what was
//! allocated and reserved at its peak, at the step's start and end, and how many blocks were
//! allocated and freed.
//!
//! **Sources.** Newer PyTorch writes each instant with the allocator's totals after it
//! (`Total Allocated`, `Total Reserved`): those are the figures. Older traces write only the
//! change (`Bytes`): allocated is then the running sum of the changes from the trace's first
//! sample, relative to what was allocated before the profiler started (`relative`), and reserved
//! is unknown.
//!
//! **Why per step.** What an engineer reads first is the peak (how close to the device's
//! capacity a step runs, what a larger batch would need), the growth from a step's start to the
//! next (a leak: allocated keeps rising), the gap between reserved and allocated at the peak (the
//! allocator's cache and its fragmentation), and blocks allocated per step (churn that
//! `cudaMalloc` / `cudaFree` calls show when the cache misses, [`super::idle::allocations`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::*;
use crate::normalize::job::RankEntry;

/// One device's memory in one step of one rank.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemoryStep {
    pub rank: u32,
    pub step: u32,
    /// The CUDA device index, or -1 for the host's memory.
    pub device: i32,
    /// Bytes allocated: the most at any sample in the step, at its start (the last sample
    /// before it, or before its first change) and at its end (after its last change).
    pub peak_allocated: i64,
    pub start_allocated: i64,
    pub end_allocated: i64,
    /// Bytes reserved by the caching allocator at most in the step (none without totals).
    pub peak_reserved: Option<i64>,
    /// Blocks allocated and freed in the step, and the bytes allocated.
    pub allocs: u32,
    pub frees: u32,
    pub allocated_bytes: i64,
    /// Allocated is relative to the trace's first sample (the trace has no totals).
    pub relative: bool,
}

/// One sample: time, change, and the totals after it when the trace has them.
#[derive(Debug, Clone, Copy)]
struct Sample {
    ts: i64,
    bytes: i64,
    allocated: Option<i64>,
    reserved: Option<i64>,
}

/// The rank's `[memory]` samples per device, in time order, each with allocated after it, and
/// whether allocated is relative (module doc).
fn samples(r: &RankEntry, strings: &StringTable) -> BTreeMap<i32, (Vec<Sample>, bool)> {
    let k = &r.trace.counters;
    let mut out: BTreeMap<i32, (Vec<Sample>, bool)> = BTreeMap::new();
    // One instant wrote its rows next to each other, `Bytes` first (the parser's order): a
    // total belongs to the sample its device and time last opened.
    let mut open: Option<(i32, i64)> = None;
    for i in 0..k.len() {
        if strings.get(k.name[i]) != MEMORY_EVENT {
            continue;
        }
        let device = k.device.get(i).copied().unwrap_or(HOST_MEMORY);
        let (ts, v) = (k.ts_ns[i], k.value[i] as i64);
        let list = &mut out.entry(device).or_default().0;
        match strings.get(k.series[i]) {
            "Bytes" => {
                list.push(Sample { ts, bytes: v, allocated: None, reserved: None });
                open = Some((device, ts));
            }
            "Total Allocated" if open == Some((device, ts)) => {
                if let Some(s) = list.last_mut() {
                    s.allocated = Some(v);
                }
            }
            "Total Reserved" if open == Some((device, ts)) => {
                if let Some(s) = list.last_mut() {
                    s.reserved = Some(v);
                }
            }
            _ => {}
        }
    }
    for (v, relative) in out.values_mut() {
        v.sort_by_key(|s| s.ts);
        // Totals on every sample: the allocator's figures; else the running sum of changes.
        *relative = v.iter().any(|s| s.allocated.is_none());
        if *relative {
            let mut run = 0i64;
            for s in v.iter_mut() {
                run = run.saturating_add(s.bytes);
                s.allocated = Some(run);
            }
        }
    }
    out.retain(|_, (v, _)| !v.is_empty());
    out
}

/// Per device and step window `(step, lo, hi)`: [`MemoryStep`]. Empty without `[memory]`
/// samples.
pub fn per_step(r: &RankEntry, strings: &StringTable, windows: &[(u32, i64, i64)]) -> Vec<MemoryStep> {
    let mut out = Vec::new();
    for (device, (v, relative)) in samples(r, strings) {
        let at = |s: &Sample| s.allocated.unwrap_or(0);
        for &(step, lo, hi) in windows {
            let a = v.partition_point(|s| s.ts < lo);
            let b = v.partition_point(|s| s.ts < hi);
            let inside = &v[a..b];
            let Some(first) = inside.first() else { continue };
            let start = a.checked_sub(1).and_then(|p| v.get(p)).map_or(at(first) - first.bytes, at);
            let end = inside.last().map_or(start, at);
            let peak = inside.iter().map(at).max().unwrap_or(start).max(start);
            let reserved = inside.iter().filter_map(|s| s.reserved).max();
            out.push(MemoryStep {
                rank: r.rank,
                step,
                device,
                peak_allocated: peak,
                start_allocated: start,
                end_allocated: end,
                peak_reserved: reserved,
                allocs: inside.iter().filter(|s| s.bytes > 0).count() as u32,
                frees: inside.iter().filter(|s| s.bytes < 0).count() as u32,
                allocated_bytes: inside.iter().filter(|s| s.bytes > 0).map(|s| s.bytes).sum(),
                relative,
            });
        }
    }
    out
}
