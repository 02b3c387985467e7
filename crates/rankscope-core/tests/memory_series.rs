//! The memory track's series (`analyze::memory::MemorySeries`, the app's memory row): asked for
//! one step window in one bucket, or in many, its most allocated equals the step's peak of the
//! analysis (`MemoryStep.peak_allocated`) and the peak counted here from the raw `[memory]`
//! instants (serde_json over the trace, ProfilerStep windows), for the zoo's 2-rank FSDP2 run
//! with `profile_memory` (host memory, device -1) and HTA's GPU trace in ../shared. The tiles
//! the app asks for (`view::memory`) cover a window with the same figures.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is the test failing

mod common;

use std::io::Read as _;
use std::path::Path;

use rankscope_core::analyze::memory::{series, MemorySeries};
use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::analyze;
use rankscope_core::normalize::{assemble, Rules};
use rankscope_core::view::memory::{tiles_covering, MemoryTileKey};
use rankscope_core::view::RankView;
use serde_json::Value;

fn raw(path: &Path) -> Value {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).expect("trace"))
        .read_to_string(&mut text)
        .expect("gzip");
    serde_json::from_str(&text).expect("json")
}

/// Per ProfilerStep `(step, start_ns, end_ns, most Total Allocated of the device's instants in
/// it)`, from the JSON alone (`ts` µs with decimals from `baseTimeNanoseconds`, or epoch µs).
fn raw_peaks(v: &Value, device: i64) -> Vec<(u32, i64, i64, i64)> {
    let base = v["baseTimeNanoseconds"].as_i64().unwrap_or(0);
    let ns = |x: &Value| base + (x.as_f64().expect("a time") * 1000.0).round() as i64;
    let ev = v["traceEvents"].as_array().expect("events");
    let mut out = Vec::new();
    for s in ev
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"].as_str().is_some_and(|n| n.starts_with("ProfilerStep#")))
    {
        let step: u32 = s["name"].as_str().unwrap()["ProfilerStep#".len()..].parse().expect("a step");
        let lo = ns(&s["ts"]);
        let hi = lo + (s["dur"].as_f64().expect("dur") * 1000.0).round() as i64;
        let peak = ev
            .iter()
            .filter(|e| e["name"] == "[memory]")
            .filter(|e| {
                let a = &e["args"];
                let d = if a["Device Type"].as_i64() == Some(0) {
                    -1
                } else {
                    a["Device Id"].as_i64().unwrap_or(-2)
                };
                d == device
            })
            .filter(|e| (lo..hi).contains(&ns(&e["ts"])))
            .filter_map(|e| e["args"]["Total Allocated"].as_i64())
            .max();
        if let Some(p) = peak {
            out.push((step, lo, hi, p));
        }
    }
    out
}

/// Checks one rank's series against its analysis and its raw instants; returns the steps checked.
fn check(path: &Path, device: i32) -> usize {
    let bytes = common::read(path);
    let t = common::ingest_chunked(&path.display().to_string(), &bytes, 1 << 20).expect("a trace");
    let job = assemble(vec![t.clone()], &[], &Rules::default());
    let a: Analysis = analyze(&job, &Options::default());
    let all: Vec<MemorySeries> = series(&job.ranks[0], &job.strings);
    let s = all.iter().find(|s| s.device == device).expect("the device's series");
    let raw = raw_peaks(&raw(path), i64::from(device));
    assert!(!raw.is_empty(), "{}: no step holds instants", path.display());
    let view = RankView::new(t, &Rules::default());
    let track = view.summary().expect("a summary").memory;
    assert!(track.iter().any(|m| m.device == device && m.samples as usize == s.len()), "{track:?}");
    for &(step, lo, hi, peak) in &raw {
        let m = a.memory.iter().find(|m| m.step == step && m.device == device).expect("the step's figures");
        assert_eq!(m.peak_allocated, peak, "step {step}: the analysis against the raw instants");
        // One bucket over the step, and many: the same peak.
        let one = s.buckets(lo, hi, 1);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].max, peak, "step {step}: one bucket");
        for n in [7, 256, 4096] {
            let most = s.buckets(lo, hi, n).iter().map(|b| b.max).max();
            assert_eq!(most, Some(peak), "step {step}: {n} buckets");
        }
        // The tiles the timeline asks for, at the level that puts the step on ~1,000 pixels.
        let level = rankscope_core::view::timeline::level_for((hi - lo) as f64 / 1000.0);
        let most = tiles_covering(device, level, lo, hi)
            .map(|k| view.memory_tile(k))
            .flat_map(|t| t.buckets)
            .filter(|b| b.t_ns >= lo && b.t_ns < hi)
            .map(|b| b.max)
            .max();
        // Buckets are pixels: the first and last pixels of the step may reach outside it (and
        // so hold more), never less.
        assert!(most.is_some_and(|m| m >= peak), "step {step}: tiles {most:?} < {peak}");
    }
    assert_eq!(
        s.track().max_allocated,
        a.memory.iter().filter(|m| m.device == device).map(|m| m.peak_allocated).max().unwrap(),
        "every sample is in a step: the series' most is the steps' most"
    );
    raw.len()
}

#[test]
fn fsdp2_host_memory_peaks_per_step_from_the_series() {
    let dir = common::zoo::zoo("memory/fsdp2_2rank");
    let spec: Value =
        serde_json::from_slice(&common::read(&dir.join("scenario.json"))).expect("scenario.json");
    for r in 0..2 {
        let n = check(&dir.join(format!("rank{r}.pt.trace.json.gz")), -1);
        assert_eq!(n, 3, "3 profiled steps");
        // The generator's own count (make_memory.py `peaks`) agrees too.
        let want: Vec<i64> = spec["expected"][r.to_string()]["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .map(|s| s["peak_allocated"].as_i64().expect("a peak"))
            .collect();
        let got: Vec<i64> =
            raw_peaks(&raw(&dir.join(format!("rank{r}.pt.trace.json.gz"))), -1).iter().map(|p| p.3).collect();
        assert_eq!(got, want, "rank {r}");
    }
}

#[test]
fn gpu_trace_peaks_per_step_from_the_series() {
    let n = check(&common::shared().join("traces/hta/df_index_resolver/df_index_resolver.json.gz"), 1);
    assert_eq!(n, 5);
}

#[test]
fn an_unknown_device_or_no_samples_give_empty_tiles() {
    let dir = common::zoo::zoo("memory/fsdp2_2rank");
    let t = common::ingest_chunked("r0", &common::read(&dir.join("rank0.pt.trace.json.gz")), 1 << 20)
        .expect("trace");
    let view = RankView::new(t, &Rules::default());
    assert!(view.memory_tile(MemoryTileKey { device: 3, level: 20, index: 0 }).buckets.is_empty());
    let (zoo, _) = common::zoo::traces("baseline");
    let v = RankView::new(zoo.into_iter().next().expect("a rank"), &Rules::default());
    assert!(v.summary().expect("summary").memory.is_empty(), "a trace without profile_memory has no track");
}
