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

/// Most buckets one [`MemorySeries::buckets`] query returns (a screen is a few thousand pixels;
/// a larger ask is cut to this, never allocated).
pub const MAX_BUCKETS: usize = 1 << 16;

/// One device's allocated (and reserved) bytes of one rank over time, for a chart: the rank's
/// `[memory]` samples sorted once, on the rank's own clock (a view adds the rank's alignment
/// offset as it does to its events). Allocated is a step function: after each sample it holds
/// until the next; before the first sample it was the first sample's total less its change.
#[derive(Debug, Clone, Default)]
pub struct MemorySeries {
    /// The CUDA device index, or [`HOST_MEMORY`].
    pub device: i32,
    /// Allocated is relative to the trace's first sample (the trace has no totals).
    pub relative: bool,
    ts: Vec<i64>,
    allocated: Vec<i64>,
    /// Reserved after each sample, when the trace has the totals.
    reserved: Option<Vec<i64>>,
    /// Allocated just before the first sample.
    before: i64,
}

/// What a chart draws over one bucket of time `[t_ns, next bucket)`: the least and most
/// allocated at any moment in it (the value carried in from before it included, so a peak
/// between two pixels is never lost), and the most reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryBucket {
    pub t_ns: i64,
    pub min: i64,
    pub max: i64,
    pub reserved_max: Option<i64>,
}

/// A series in a few figures: which device, how many samples, over what span (own clock), the
/// most allocated and reserved at any sample (the scale of a chart).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryTrack {
    pub device: i32,
    pub samples: u64,
    pub first_ns: i64,
    pub last_ns: i64,
    pub max_allocated: i64,
    pub max_reserved: Option<i64>,
    pub relative: bool,
}

/// The rank's series, one per device with samples (in device order: the host's first).
pub fn series(r: &RankEntry, strings: &StringTable) -> Vec<MemorySeries> {
    samples(r, strings)
        .into_iter()
        .map(|(device, (v, relative))| {
            let at = |s: &Sample| s.allocated.unwrap_or(0);
            let before = v.first().map_or(0, |s| at(s).saturating_sub(s.bytes));
            let reserved = v
                .iter()
                .all(|s| s.reserved.is_some())
                .then(|| v.iter().map(|s| s.reserved.unwrap_or(0)).collect());
            MemorySeries {
                device,
                relative,
                ts: v.iter().map(|s| s.ts).collect(),
                allocated: v.iter().map(at).collect(),
                reserved,
                before,
            }
        })
        .collect()
}

impl MemorySeries {
    pub fn len(&self) -> usize {
        self.ts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }

    /// The series in a few figures ([`MemoryTrack`]).
    pub fn track(&self) -> MemoryTrack {
        MemoryTrack {
            device: self.device,
            samples: self.ts.len() as u64,
            first_ns: self.ts.first().copied().unwrap_or(0),
            last_ns: self.ts.last().copied().unwrap_or(0),
            max_allocated: self.allocated.iter().copied().max().unwrap_or(0).max(self.before),
            max_reserved: self.reserved.as_ref().and_then(|r| r.iter().copied().max()),
            relative: self.relative,
        }
    }

    /// `[t0, t1)` (own clock) cut into `n` equal buckets (at most [`MAX_BUCKETS`]): the
    /// buckets the series covers (from its first sample to its last; the others are left out),
    /// in time order. A binary search for the first sample, then one pass over the samples in
    /// the window.
    pub fn buckets(&self, t0: i64, t1: i64, n: usize) -> Vec<MemoryBucket> {
        let n = n.min(MAX_BUCKETS);
        let (Some(&first), Some(&last)) = (self.ts.first(), self.ts.last()) else { return Vec::new() };
        if t1 <= t0 || n == 0 || t1 <= first || t0 > last {
            return Vec::new();
        }
        let span = i128::from(t1) - i128::from(t0);
        // The start of bucket `k` (k = n: the window's end), exact in i128.
        let edge = |k: usize| (i128::from(t0) + span * k as i128 / n as i128) as i64;
        let reserved_at = |i: usize| self.reserved.as_ref().and_then(|r| r.get(i).copied());
        let mut i = self.ts.partition_point(|&t| t < t0);
        // The value in force when the next bucket starts: the last sample's before it, or the
        // value before the first sample once the series has begun.
        let mut carried: Option<(i64, Option<i64>)> =
            i.checked_sub(1).map(|p| (self.allocated[p], reserved_at(p)));
        let mut out = Vec::with_capacity(n.min(self.ts.len().saturating_sub(i).saturating_add(2)));
        for k in 0..n {
            let (lo, hi) = (edge(k), edge(k + 1));
            if lo > last {
                break;
            }
            if hi <= lo {
                // More buckets than nanoseconds: this one is empty.
                continue;
            }
            let mut b = carried.map(|(a, r)| MemoryBucket { t_ns: lo, min: a, max: a, reserved_max: r });
            while i < self.ts.len() && self.ts[i] < hi {
                let (a, r) = (self.allocated[i], reserved_at(i));
                let into = b.get_or_insert(MemoryBucket { t_ns: lo, min: a, max: a, reserved_max: r });
                if i == 0 {
                    into.min = into.min.min(self.before);
                    into.max = into.max.max(self.before);
                }
                into.min = into.min.min(a);
                into.max = into.max.max(a);
                into.reserved_max = into.reserved_max.max(r);
                carried = Some((a, r));
                i += 1;
            }
            out.extend(b);
        }
        out
    }

    /// Allocated (and reserved) in force at `t` (own clock): after the last sample at or before
    /// it; None before the first sample or after the last.
    pub fn at(&self, t: i64) -> Option<(i64, Option<i64>)> {
        if self.ts.last().is_none_or(|&l| t > l) {
            return None;
        }
        let p = self.ts.partition_point(|&s| s <= t).checked_sub(1)?;
        Some((self.allocated[p], self.reserved.as_ref().and_then(|r| r.get(p).copied())))
    }
}

/// One device's memory over a span: the least and most allocated in it (the value carried in
/// from before it included) and the most reserved, as one bucket starting at the span's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemorySpan {
    pub device: i32,
    pub bucket: MemoryBucket,
}

/// Every device's [`MemorySpan`] over `[t0_ns, t1_ns)` (own clock; the timeline's area
/// selection): the devices with samples in force in it.
pub fn span(series: &[MemorySeries], t0_ns: i64, t1_ns: i64) -> Vec<MemorySpan> {
    series
        .iter()
        .filter_map(|s| Some(MemorySpan { device: s.device, bucket: *s.buckets(t0_ns, t1_ns, 1).first()? }))
        .collect()
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    fn made(ts: &[i64], alloc: &[i64], before: i64) -> MemorySeries {
        MemorySeries {
            device: 0,
            relative: false,
            ts: ts.to_vec(),
            allocated: alloc.to_vec(),
            reserved: Some(alloc.iter().map(|a| a * 2).collect()),
            before,
        }
    }

    /// The least and most over `[lo, hi)` from the samples alone: the value held just before
    /// `lo` (the last sample before it, or the value before the first sample when that falls
    /// in the bucket) and every sample inside, each of several at one time included.
    fn brute(s: &MemorySeries, lo: i64, hi: i64) -> Option<(i64, i64)> {
        let last = *s.ts.last()?;
        if lo > last || hi <= lo {
            return None;
        }
        let mut vals: Vec<i64> =
            (0..s.ts.len()).filter(|&i| s.ts[i] >= lo && s.ts[i] < hi).map(|i| s.allocated[i]).collect();
        match (0..s.ts.len()).rfind(|&i| s.ts[i] < lo) {
            Some(p) => vals.push(s.allocated[p]),
            None if !vals.is_empty() => vals.push(s.before),
            None => {}
        }
        Some((*vals.iter().min()?, *vals.iter().max()?))
    }

    #[test]
    fn buckets_hold_every_peak_of_the_step_function() {
        // A saw-tooth with two samples at one time and peaks between bucket edges.
        let ts = [10, 13, 13, 17, 30, 31, 55, 80, 81, 99];
        let alloc = [5, 9, 40, 7, 8, 60, 3, 3, 90, 1];
        let s = made(&ts, &alloc, 2);
        for n in [1, 2, 3, 7, 13, 64] {
            for (t0, t1) in [(0, 100), (12, 60), (31, 32), (-5, 200), (81, 82)] {
                let got = s.buckets(t0, t1, n);
                for b in &got {
                    let k = (0..n)
                        .rev()
                        .find(|&k| t0 + (t1 - t0) * k as i64 / n as i64 == b.t_ns)
                        .expect("an edge");
                    let hi = t0 + (t1 - t0) * (k as i64 + 1) / n as i64;
                    let want = brute(&s, b.t_ns, hi).expect("covered");
                    assert_eq!((b.min, b.max), want, "n {n} window {t0}..{t1} bucket {b:?}");
                    assert_eq!(b.reserved_max, Some(2 * b.max), "{b:?}");
                }
                // Every bucket that holds a moment of the series is there.
                let covered = (0..n)
                    .filter(|&k| {
                        let lo = t0 + (t1 - t0) * k as i64 / n as i64;
                        let hi = t0 + (t1 - t0) * (k as i64 + 1) / n as i64;
                        brute(&s, lo, hi).is_some()
                    })
                    .count();
                assert_eq!(got.len(), covered, "n {n} window {t0}..{t1}");
            }
        }
        assert_eq!(s.buckets(0, 100, 1)[0].max, 90);
        assert_eq!(s.buckets(0, 100, 1)[0].min, 1);
        assert_eq!(s.track().max_allocated, 90);
    }

    #[test]
    fn a_span_reads_each_device_over_the_selection() {
        let ts = [10, 13, 13, 17, 30, 31, 55, 80, 81, 99];
        let alloc = [5, 9, 40, 7, 8, 60, 3, 3, 90, 1];
        let mut host = made(&ts, &alloc, 2);
        host.device = crate::model::HOST_MEMORY;
        let series = [host, made(&[200], &[7], 0)];
        // Only the host's series is in force over 12..60: the most and least held in it.
        let got = span(&series, 12, 60);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].device, got[0].bucket.min, got[0].bucket.max), (crate::model::HOST_MEMORY, 3, 60));
        assert_eq!(got[0].bucket.reserved_max, Some(120));
        assert_eq!(Some((got[0].bucket.min, got[0].bucket.max)), brute(&series[0], 12, 60));
    }

    #[test]
    #[allow(clippy::disallowed_methods, clippy::disallowed_types)] // a host test: timing only printed
    fn a_window_over_millions_of_samples_is_one_pass() {
        // 3M samples (a 7M-event trace's allocator events): a saw-tooth with one spike.
        let n = 3_000_000i64;
        let ts: Vec<i64> = (0..n).map(|i| i * 100).collect();
        let mut alloc: Vec<i64> = (0..n).map(|i| (i % 1000) * 1024).collect();
        alloc[1_234_567] = 1 << 40;
        let s = made(&ts, &alloc, 0);
        let t = std::time::Instant::now();
        let b = s.buckets(0, n * 100, 1000);
        let whole = t.elapsed();
        assert_eq!(b.len(), 1000);
        assert_eq!(b.iter().map(|b| b.max).max(), Some(1 << 40), "the spike survives 3,000 samples a bucket");
        assert_eq!(b.iter().filter(|b| b.max == 1 << 40).count(), 1);
        // A narrow window costs what its samples cost, not the series'.
        let t = std::time::Instant::now();
        let narrow = s.buckets(123_456_000, 123_476_000, 256);
        let small = t.elapsed();
        assert_eq!(narrow.iter().map(|b| b.max).max(), Some(1 << 40));
        eprintln!(
            "3M samples: whole window in 1,000 buckets {whole:?}, 200 samples in 256 buckets {small:?}"
        );
    }

    #[test]
    fn bad_windows_give_nothing() {
        let s = made(&[10, 20], &[1, 2], 0);
        assert!(s.buckets(50, 40, 10).is_empty());
        assert!(s.buckets(0, 10, 10).is_empty(), "ends where the series starts");
        assert!(s.buckets(21, 40, 10).is_empty());
        assert!(s.buckets(0, 100, 0).is_empty());
        assert_eq!(s.buckets(i64::MIN, i64::MAX, usize::MAX).len(), 1, "cut to MAX_BUCKETS, the edges exact");
        assert!(MemorySeries::default().buckets(0, 100, 4).is_empty());
        assert_eq!(s.at(15), Some((1, Some(2))));
        assert_eq!(s.at(5), None);
        assert_eq!(s.at(25), None);
    }
}
