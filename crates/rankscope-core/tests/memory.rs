//! Memory per step from the allocator's `[memory]` instants (`analysis.memory`,
//! docs/metrics.md "Memory"), against the same figures computed here from the raw JSON with
//! serde_json: for every step window the analysis reports, the largest `Total Allocated` and
//! `Total Reserved` of the device's instants inside it, the count of allocations and frees, and
//! the bytes allocated. HTA's trace with `profile_memory` (one rank, GPU 1, 28,010 instants with
//! totals) and the TensorBoard plugin's 2021 trace (only `Bytes`: allocated relative to the
//! trace's first instant).

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is the test failing

mod common;

use std::io::Read as _;

use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::analyze;
use rankscope_core::normalize::{assemble, Rules};
use serde_json::Value;

fn raw(rel: &str) -> Value {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(common::shared().join(rel)).expect("trace"))
        .read_to_string(&mut text)
        .expect("gzip");
    serde_json::from_str(&text).expect("json")
}

fn analysis(rel: &str) -> Analysis {
    let path = common::shared().join(rel);
    let bytes = common::read(&path);
    let t = common::ingest_chunked(rel, &bytes, 1 << 20).expect("a trace");
    analyze(&assemble(vec![t], &[], &Rules::default()), &Options::default())
}

/// `(ts_ns, device, bytes, total allocated, total reserved)` of a `[memory]` instant; the
/// device -1 for the host.
type Instant = (i64, i64, i64, Option<i64>, Option<i64>);

fn instants(v: &Value) -> Vec<Instant> {
    let base = v["baseTimeNanoseconds"].as_i64().unwrap_or(0);
    v["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["name"] == "[memory]")
        .map(|e| {
            let a = &e["args"];
            let ts = base + (e["ts"].as_f64().expect("ts") * 1000.0).round() as i64;
            let device =
                if a["Device Type"].as_i64() == Some(0) { -1 } else { a["Device Id"].as_i64().expect("id") };
            (
                ts,
                device,
                a["Bytes"].as_i64().expect("bytes"),
                a["Total Allocated"].as_i64(),
                a["Total Reserved"].as_i64(),
            )
        })
        .collect()
}

#[test]
fn peaks_and_blocks_per_step_equal_the_raw_instants() {
    let rel = "traces/hta/df_index_resolver/df_index_resolver.json.gz";
    let a = analysis(rel);
    let inst = instants(&raw(rel));
    assert!(a.memory.iter().any(|m| m.device == 1), "{:?}", a.memory);
    let mut checked = 0;
    for m in &a.memory {
        assert!(!m.relative, "the trace has totals");
        let w = a
            .steps
            .iter()
            .find(|s| s.step == m.step)
            .and_then(|s| s.per_rank.iter().find(|r| r.rank == m.rank));
        let w = w.expect("the step window");
        let inside: Vec<_> = inst
            .iter()
            .filter(|x| x.1 == i64::from(m.device) && x.0 >= w.start_ns && x.0 < w.end_ns)
            .collect();
        assert_eq!(m.peak_allocated, inside.iter().filter_map(|x| x.3).max().expect("samples"), "{m:?}");
        assert_eq!(m.peak_reserved, inside.iter().filter_map(|x| x.4).max(), "{m:?}");
        assert_eq!(m.allocs as usize, inside.iter().filter(|x| x.2 > 0).count(), "{m:?}");
        assert_eq!(m.frees as usize, inside.iter().filter(|x| x.2 < 0).count(), "{m:?}");
        assert_eq!(m.allocated_bytes, inside.iter().filter(|x| x.2 > 0).map(|x| x.2).sum::<i64>(), "{m:?}");
        assert_eq!(m.end_allocated, inside.last().and_then(|x| x.3).expect("end"), "{m:?}");
        checked += 1;
    }
    assert_eq!(checked, 10, "5 steps x (host, cuda:1)");
    // The GPU's steady state: every step returns to where it started, well below its peak.
    for m in a.memory.iter().filter(|m| m.device == 1) {
        assert_eq!(m.start_allocated, m.end_allocated, "{m:?}");
        assert!(m.peak_allocated > m.start_allocated + (1 << 30), "{m:?}");
    }
}

#[test]
fn a_trace_without_totals_counts_from_its_first_instant() {
    let rel = "traces/kineto-tb-plugin/worker0.1623143089861.pt.trace.json.gz";
    let a = analysis(rel);
    let inst = instants(&raw(rel));
    let gpu: Vec<_> = a.memory.iter().filter(|m| m.device == 0).collect();
    assert!(!gpu.is_empty() && gpu.iter().all(|m| m.relative), "{:?}", a.memory);
    for m in gpu {
        let w = a.steps.iter().find(|s| s.step == m.step).and_then(|s| s.per_rank.first()).expect("window");
        // Allocated after each instant: the running sum of the device's changes so far.
        let mut run = 0i64;
        let mut peak = i64::MIN;
        let mut end = None;
        for x in inst.iter().filter(|x| x.1 == 0) {
            run += x.2;
            if x.0 >= w.start_ns && x.0 < w.end_ns {
                peak = peak.max(run);
                end = Some(run);
            }
        }
        assert_eq!(m.end_allocated, end.expect("samples in the step"), "{m:?}");
        assert_eq!(m.peak_allocated, peak.max(m.start_allocated), "{m:?}");
        assert_eq!(m.peak_reserved, None);
    }
    // The report says the figures are relative.
    let md = rankscope_core::diagnose::markdown::markdown(&a);
    assert!(md.contains("## Memory") && md.contains("only each block's size"), "{md}");
}
