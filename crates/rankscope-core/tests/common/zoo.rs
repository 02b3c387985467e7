//! The scenario zoo's helpers (`tests/zoo/`): a scenario's traces, job, analysis and
//! scenario.json, and the checks every scenario gets (`zoo.rs`, `zoo_hangs.rs`).

use std::path::PathBuf;

use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::analyze;
use rankscope_core::finding::Finding;
use rankscope_core::normalize::{assemble, Rules};
use serde_json::Value;

pub fn zoo(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/zoo")).join(name)
}

/// The scenario's analysis and its scenario.json.
pub fn run(name: &str) -> (Analysis, Value) {
    let (job, spec) = load(name);
    (analyze(&job, &Options::default()), spec)
}

/// The scenario's job and its scenario.json.
pub fn load(name: &str) -> (rankscope_core::normalize::Job, Value) {
    let (traces, spec) = traces(name);
    let job = super::checked(assemble(traces, &[], &Rules::default()));
    assert!(job.errors.is_empty(), "{name}: {:?}", job.errors);
    (job, spec)
}

/// The scenario's trace files, in rank order.
pub fn trace_files(name: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(zoo(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".pt.trace.json.gz"))
        .collect();
    files.sort();
    files
}

/// The scenario's traces, rank order, and its scenario.json.
pub fn traces(name: &str) -> (Vec<rankscope_core::model::RankTrace>, Value) {
    let dir = zoo(name);
    let spec: Value = serde_json::from_slice(&super::read(&dir.join("scenario.json")))
        .unwrap_or_else(|e| panic!("{name}/scenario.json: {e}"));
    let traces = trace_files(name)
        .iter()
        .map(|p| {
            super::ingest_chunked(&p.display().to_string(), &super::read(p), 1 << 20)
                .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    (traces, spec)
}

pub fn ids(a: &Analysis) -> Vec<&str> {
    a.findings.iter().map(|f| f.id.as_str()).collect()
}

pub fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

pub fn u32s(v: &Value) -> Vec<u32> {
    let mut out: Vec<u32> = v
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_u64().map(|n| n as u32)).collect())
        .unwrap_or_default();
    out.sort_unstable();
    out
}

/// The checks every scenario gets; returns the first finding when one is expected.
pub fn check_expected(name: &str, a: &Analysis, spec: &Value) -> Option<Finding> {
    let exp = &spec["expected"];
    let must_not = strs(&exp["must_not"]);
    for f in &a.findings {
        assert!(
            !must_not.iter().any(|m| f.id == m.as_str()),
            "{name}: {} must not be reported: {}",
            f.id,
            f.message
        );
        // Waiting is never advised as an overlap problem.
        if f.id == "exposed_comm" {
            assert!(
                !f.message.contains("wait") || f.message.contains("waiting for other ranks excluded"),
                "{name}: {}",
                f.message
            );
        }
    }
    // No "per step" figure exceeds a step.
    let max_step = a.steps.iter().flat_map(|s| s.per_rank.iter().map(|r| r.wall_ns)).max().unwrap_or(0);
    for f in &a.findings {
        assert!(f.impact_ns <= max_step, "{name}: {} saves {} > step {max_step}", f.id, f.impact_ns);
        for (k, v) in f.evidence.iter() {
            if k.name().ends_with("_ns") {
                assert!(
                    v <= max_step as f64 * 1.0001,
                    "{name}: {} evidence {k} = {v} > step {max_step}",
                    f.id
                );
            }
        }
    }
    let want = exp["first_finding"].as_str()?;
    let first = a.findings.first().unwrap_or_else(|| panic!("{name}: no finding, want {want}"));
    assert_eq!(first.id, want, "{name}: first finding {:?}, want {want}: {:#?}", first.message, ids(a));
    let ranks = u32s(&exp["ranks"]);
    let mut got = first.ranks.clone();
    got.sort_unstable();
    assert_eq!(got, ranks, "{name}: {}", first.message);
    Some(first.clone())
}

/// `measured.per_rank_mean[rank][key]` in ms.
pub fn measured(spec: &Value, rank: u32, key: &str) -> f64 {
    spec["measured"]["per_rank_mean"][rank.to_string()][key]
        .as_f64()
        .unwrap_or_else(|| panic!("measured.per_rank_mean.{rank}.{key}"))
}

/// Mean over steps of each rank's measured wait for the last arriver (ms).
pub fn measured_waits(spec: &Value) -> Vec<(u32, f64)> {
    let steps =
        spec["measured"]["derived"]["collective_wait"]["steps"].as_array().cloned().unwrap_or_default();
    let mut acc: std::collections::BTreeMap<u32, (f64, usize)> = Default::default();
    for s in &steps {
        if let Some(w) = s["wait_ms"].as_object() {
            for (r, v) in w {
                let e = acc.entry(r.parse().unwrap_or(0)).or_default();
                e.0 += v.as_f64().unwrap_or(0.0);
                e.1 += 1;
            }
        }
    }
    acc.into_iter().map(|(r, (s, n))| (r, s / n.max(1) as f64)).collect()
}

/// Within 15% (and a few ms of scheduling noise on a shared 2-core machine).
pub fn close(got_ns: f64, want_ms: f64, what: &str) {
    let want = want_ms * 1e6;
    assert!(
        (got_ns - want).abs() <= 0.15 * want.abs() + 5e6,
        "{what}: got {:.1} ms, measured {want_ms:.1} ms",
        got_ns / 1e6
    );
}

/// Per rank: its mean exposed wait per step.
pub fn exposed_wait(a: &Analysis, rank: u32) -> f64 {
    let v: Vec<i64> = a
        .steps
        .iter()
        .flat_map(|s| s.per_rank.iter().filter(|r| r.rank == rank).map(|r| r.exposed_wait_ns))
        .collect();
    v.iter().sum::<i64>() as f64 / v.len().max(1) as f64
}

/// The scenario as if profiled without `record_shapes` (the profiler's default): on gloo the
/// communication ops then carry only `External id`, `Record function id` and `Ev Idx`
/// (`rotating_batch_no_shapes`, a real run so profiled), so every argument the shapes add goes.
pub fn run_without_shapes(name: &str) -> Analysis {
    run_without_shapes_renamed(name, None)
}

/// [`run_without_shapes`], with an annotation of rank 0 renamed (`(from, to)`).
pub fn run_without_shapes_renamed(name: &str, rename: Option<(&str, &str)>) -> Analysis {
    use std::io::Read;
    const SHAPE_ARGS: [&str; 6] =
        ["Input Dims", "Input type", "Input Strides", "Concrete Inputs", "Fwd thread id", "Sequence number"];
    let stripped = trace_files(name)
        .iter()
        .map(|p| {
            let mut text = Vec::new();
            flate2::read::GzDecoder::new(&super::read(p)[..])
                .read_to_end(&mut text)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let mut doc: Value = serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{e}"));
            let rank0 = p.file_name().is_some_and(|f| f.to_string_lossy().starts_with("rank0."));
            for e in doc["traceEvents"].as_array_mut().map(|v| v.iter_mut()).into_iter().flatten() {
                if let Some(a) = e.get_mut("args").and_then(Value::as_object_mut) {
                    a.retain(|k, _| !SHAPE_ARGS.contains(&k.as_str()));
                }
                if let (Some((from, to)), true) = (rename, rank0) {
                    if e["name"] == from {
                        e["name"] = Value::from(to);
                    }
                }
            }
            let bytes = serde_json::to_vec(&doc).unwrap_or_default();
            super::ingest_chunked(&p.display().to_string(), &bytes, 1 << 20).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    analyze(&assemble(stripped, &[], &Rules::default()), &Options::default())
}
