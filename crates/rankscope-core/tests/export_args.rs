//! The hand-off without loss: the merged trace and every member of the Perfetto archive keep
//! each event's source `args` verbatim (plus rankscope's under `args.rankscope`), read back with
//! serde_json and compared with the source files event for event, on real traces (HTA's kernel
//! args and `Input Dims`, PARAM DLRM's collectives, the zoo's runs) and on a fixture of the
//! cases the parser repairs.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::*;
use rankscope_core::diagnose::analyze;
use rankscope_core::export::{self, ExportPlan};
use rankscope_core::model::{DiagKind, RankTrace};
use rankscope_core::normalize::{assemble, Job, Rules};
use rankscope_core::parse::FileIngest;
use serde_json::{Map, Value};

/// A file ingested keeping its args (as the CLI's exports read it), in 64 KiB chunks.
fn ingest_args(name: &str, bytes: &[u8]) -> RankTrace {
    let mut f = FileIngest::new(name);
    f.keep_args();
    for c in bytes.chunks(64 << 10) {
        f.feed(c);
    }
    let t = f.finish().unwrap_or_else(|e| panic!("{e}"));
    t.check(&t.strings).unwrap_or_else(|e| panic!("{name}: {e}"));
    t
}

/// One slice or instant, as the comparison sees it: `(name, cat, ph, dur ns)` is the key, the
/// start (µs on the rank's own clock, as a float: the sources write epoch microseconds) and the
/// args object the payload.
#[derive(Debug, Clone)]
struct Ev {
    key: (String, String, char, i64),
    own_us: f64,
    args: Value,
}

fn ns(v: &Value) -> i64 {
    (v.as_f64().unwrap_or(0.0) * 1000.0).round() as i64
}

/// The source's slices and instants, read with serde_json (not with the core's parser).
fn source_events(text: &[u8]) -> Vec<Ev> {
    let doc: Value = serde_json::from_slice(text).unwrap_or_else(|e| panic!("source: {e}"));
    let base_us = doc.get("baseTimeNanoseconds").and_then(Value::as_i64).map_or(0.0, |b| b as f64 / 1000.0);
    let events = doc.get("traceEvents").or(Some(&doc)).and_then(Value::as_array).cloned().unwrap_or_default();
    events
        .iter()
        .filter_map(|e| {
            let ph = e.get("ph")?.as_str()?;
            let ph = match ph {
                "X" => 'X',
                "i" | "I" => 'i',
                _ => return None,
            };
            let ts = e.get("ts")?.as_f64()?;
            let text = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let dur = if ph == 'X' { e.get("dur").map_or(0, ns).max(0) } else { 0 };
            Some(Ev {
                key: (text("name"), text("cat"), ph, dur),
                own_us: ts + base_us,
                args: e.get("args").cloned().unwrap_or_else(|| Value::Object(Map::new())),
            })
        })
        .collect()
}

/// A written document's slices and instants by `pid`, each start put back on the rank's own
/// clock by `zero_ns(pid)` (what the writer subtracted); the args without `rankscope`, which
/// is checked to hold rankscope's own fields.
fn written_events(doc: &Value, zero_ns: impl Fn(u64) -> i64) -> BTreeMap<u64, Vec<Ev>> {
    let mut out: BTreeMap<u64, Vec<Ev>> = BTreeMap::new();
    for e in doc["traceEvents"].as_array().unwrap_or_else(|| panic!("traceEvents")) {
        let ph = match e["ph"].as_str() {
            Some("X") => 'X',
            Some("i") => 'i',
            _ => continue,
        };
        let pid = e["pid"].as_u64().unwrap_or_else(|| panic!("pid: {e}"));
        let mut args = e["args"].as_object().cloned().unwrap_or_else(|| panic!("args object: {e}"));
        let ours = args.remove("rankscope").unwrap_or_else(|| panic!("args.rankscope: {e}"));
        assert!(ours["class"].is_string() && ours["aligned_ts_ns"].is_i64(), "rankscope's args: {ours}");
        let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
        out.entry(pid).or_default().push(Ev {
            key: (s("name"), s("cat"), ph, if ph == 'X' { ns(&e["dur"]) } else { 0 }),
            own_us: e["ts"].as_f64().unwrap_or(0.0) + zero_ns(pid) as f64 / 1000.0,
            args: Value::Object(args),
        });
    }
    out
}

/// Every source event is written once, with its args, and nothing else is: per key, each
/// source event paired with an unpaired written one whose start is within 1 µs and whose args
/// are equal (starts are floats: the sources write epoch microseconds).
fn same_events(what: &str, src: Vec<Ev>, got: Vec<Ev>, keys: &mut BTreeSet<String>) -> usize {
    assert_eq!(got.len(), src.len(), "{what}: events written");
    let group = |v: Vec<Ev>| {
        let mut m: BTreeMap<(String, String, char, i64), Vec<Ev>> = BTreeMap::new();
        for e in v {
            m.entry(e.key.clone()).or_default().push(e);
        }
        for l in m.values_mut() {
            l.sort_by(|a, b| a.own_us.total_cmp(&b.own_us));
        }
        m
    };
    let (src, got) = (group(src), group(got));
    let mut n = 0;
    for (key, s) in &src {
        let g = got.get(key).unwrap_or_else(|| panic!("{what}: no {key:?} written"));
        assert_eq!(g.len(), s.len(), "{what}: {key:?} written");
        let mut used = vec![false; g.len()];
        let mut from = 0;
        for e in s {
            while from < g.len() && g[from].own_us < e.own_us - 1.0 {
                from += 1;
            }
            let k = (from..g.len())
                .take_while(|&k| g[k].own_us <= e.own_us + 1.0)
                .find(|&k| !used[k] && g[k].args == e.args)
                .unwrap_or_else(|| {
                    let near: Vec<&Value> = (from..g.len()).take(3).map(|k| &g[k].args).collect();
                    panic!(
                        "{what}: {key:?} at {} µs with args {} not written; near: {near:?}",
                        e.own_us, e.args
                    )
                });
            used[k] = true;
            n += 1;
            keys.extend(e.args.as_object().into_iter().flat_map(Map::keys).cloned());
        }
    }
    n
}

/// Reads a ustar archive's members (the archive's own checks are tests/perfetto.rs's).
fn untar(b: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 512 <= b.len() && b[at..at + 512].iter().any(|&x| x != 0) {
        let h = &b[at..at + 512];
        let name = String::from_utf8_lossy(&h[..100]).trim_end_matches('\0').to_string();
        let size = String::from_utf8_lossy(&h[124..136]).trim_end_matches('\0').trim().to_string();
        let size = usize::from_str_radix(&size, 8).unwrap_or_else(|e| panic!("size: {e}"));
        out.push((name, b[at + 512..at + 512 + size].to_vec()));
        at += 512 + size.div_ceil(512) * 512;
    }
    out
}

/// Exports the job of `files` both ways and compares every event's args with its source;
/// returns the events compared (in the merged trace) and every arg name among them.
fn check_files(what: &str, files: &[PathBuf]) -> (usize, BTreeSet<String>) {
    let mut keys = BTreeSet::new();
    let texts: Vec<(String, Vec<u8>)> = files.iter().map(|p| (p.display().to_string(), text_of(p))).collect();
    let traces: Vec<RankTrace> = texts.iter().map(|(n, t)| ingest_args(n, t)).collect();
    for t in &traces {
        assert!(t.diagnostics.get(DiagKind::ArgsNotKept).is_none(), "{}: args not kept", t.source);
    }
    let job: Job = checked(assemble(traces, &[], &Rules::default()));
    let a = analyze(&job, &rankscope_core::analyze::Options::default());
    let plan =
        ExportPlan::of(&a, job.ranks.iter().map(|r| (r.rank, r.trace.events.ts_ns.iter().min().copied())));
    // Which source file each written rank is (its process name says `rank N · file`).
    let file_of = |rank: u32| -> &[u8] {
        let k = job.ranks.iter().position(|r| r.rank == rank).unwrap_or_else(|| panic!("rank {rank}"));
        let src = &job.ranks[k].trace.source;
        &texts.iter().find(|(n, _)| n == src).unwrap_or_else(|| panic!("{src}")).1
    };

    let mut merged = Vec::new();
    plan.write_merged(&mut merged, |k, out, at, first| {
        export::write_rank(out, &job.ranks[k], &job.strings, at, first).map(drop)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let doc: Value = serde_json::from_slice(&merged).unwrap_or_else(|e| panic!("{what}: merged: {e}"));
    let zero = |pid: u64| {
        plan.ranks.iter().find(|p| u64::from(p.rank) == pid).map_or(0, |p| p.offset_ns) + plan.origin_ns
    };
    let mut compared = 0;
    let written = written_events(&doc, zero);
    assert_eq!(written.len(), job.ranks.len(), "{what}: a process per rank");
    for (pid, got) in written {
        let src = source_events(file_of(pid as u32));
        compared += same_events(&format!("{what}: merged, rank {pid}"), src, got, &mut keys);
    }

    let mut tar = Vec::new();
    plan.write_perfetto(&mut tar, |k, mut w, at| {
        export::write_rank(&mut w, &job.ranks[k], &job.strings, at, true)?;
        export::write_step_track(w, &job.ranks[k], at)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let members = untar(&tar);
    assert_eq!(members.len(), job.ranks.len() + 1, "{what}: a member per rank and the manifest");
    for (path, bytes) in members.iter().filter(|(p, _)| p != export::perfetto::MANIFEST) {
        let doc: Value = serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{what}: {path}: {e}"));
        let shift = doc["otherData"]["rankscope"]["shift_ns"].as_i64().unwrap_or_else(|| panic!("shift"));
        let rank = doc["otherData"]["rankscope"]["rank"].as_u64().unwrap_or_else(|| panic!("rank"));
        let written = written_events(&doc, |_| shift);
        let (ours, got): (Vec<Ev>, Vec<Ev>) = written
            .into_values()
            .next()
            .unwrap_or_default()
            .into_iter()
            .partition(|e| e.key.1 == export::OUR_CAT);
        // The steps track: a slice per step of the rank, each where the step is.
        let r = job.ranks.iter().find(|r| u64::from(r.rank) == rank).unwrap_or_else(|| panic!("rank {rank}"));
        let steps = &r.norm.steps;
        assert_eq!(ours.len(), steps.len(), "{what}: {path}: a slice per step");
        for (e, k) in ours.iter().zip(0..) {
            assert_eq!(e.key.0, format!("step {}", steps.number[k]));
            assert_eq!(e.key.3, steps.end_ns[k] - steps.start_ns[k]);
            assert!((e.own_us - steps.start_ns[k] as f64 / 1000.0).abs() <= 1.0, "{what}: step {k} start");
        }
        same_events(&format!("{what}: {path}"), source_events(file_of(rank as u32)), got, &mut keys);
    }
    (compared, keys)
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.ends_with(".json") || n.ends_with(".json.gz")
        })
        .filter(|p| !p.ends_with("scenario.json"))
        .collect();
    v.sort();
    v
}

#[test]
fn hta_kernel_and_collective_args_and_input_dims_survive_both_exports() {
    let hta = shared().join("traces/hta");
    let mut keys = BTreeSet::new();
    for dir in ["cupti_profiler", "critical_path/alexnet", "amd_trace", "nccl_parser_config"] {
        let files = files_in(&hta.join(dir));
        assert!(!files.is_empty(), "{dir}");
        let (n, k) = check_files(dir, &files);
        assert!(n > 100, "{dir}: {n} events compared");
        keys.extend(k);
    }
    // What the hand-off is for: a kernel's launch geometry, an operator's shapes, a
    // collective's message and group, compared above with the sources'.
    for k in [
        "grid",
        "block",
        "registers per thread",
        "shared memory",
        "est. achieved occupancy %",
        "Input Dims",
        "Input type",
        "Collective name",
        "In msg nelems",
        "Process Group Name",
        "External id",
    ] {
        assert!(keys.contains(k), "no `{k}` among the args compared: {keys:?}");
    }
}

#[test]
fn dlrm_args_survive_both_exports() {
    let files = files_in(&shared().join("traces/param-dlrm-8rank"));
    assert_eq!(files.len(), 8);
    let (n, keys) = check_files("param-dlrm-8rank", &files);
    assert!(n > 10_000, "{n} events compared");
    assert!(keys.contains("Sequence number") && keys.contains("grid"), "{keys:?}");
}

#[test]
fn every_zoo_run_keeps_its_args() {
    let root = common::zoo::zoo("");
    let mut runs: Vec<String> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|name| !common::zoo::trace_files(name).is_empty())
        .collect();
    runs.sort();
    assert!(runs.len() > 10, "{} zoo runs", runs.len());
    // The runs are independent: one thread per core takes the next (the test's time is most
    // of its binary's, and the other tests here are short).
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(name) = runs.get(k) else { break };
                let (n, _) = check_files(name, &common::zoo::trace_files(name));
                assert!(n > 0, "{name}");
            });
        }
    });
}

/// What the parser repairs or cannot keep, each said: a `B`/`E` pair (the slice keeps the `B`'s
/// args; the `E`'s are counted as lost), args that are not an object, raw control characters
/// and invalid UTF-8 in a string (escaped, replaced), an export of ours read back (its
/// `rankscope` member replaced, not doubled), nested values, and a file cut short.
#[test]
fn repaired_and_lost_args_are_said() {
    let mut text = br##"{"traceEvents": [
{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"Input Dims": [[2, 3], []], "nested": {"x": [1, {"y": null}]}, "n": 1.250}},
{"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 20, "args": {"from": "B"}},
{"ph": "E", "name": "b", "pid": 1, "tid": 1, "ts": 30, "args": {"from": "E"}},
{"ph": "X", "name": "c", "pid": 1, "tid": 1, "ts": 40, "dur": 1, "args": 7},
{"ph": "i", "name": "d", "pid": 1, "tid": 1, "ts": 50, "s": "t", "args": {"tab": "x	y"}},
{"ph": "X", "name": "e", "pid": 1, "tid": 1, "ts": 60, "dur": 1, "args": {"bad": "~"}},
{"ph": "X", "name": "f", "pid": 1, "tid": 1, "ts": 70, "dur": 1, "args": {"rankscope": {"mine": 3}, "kept": true}},
{"ph": "X", "name": "g", "pid": 1, "tid": 1, "ts": 80, "dur": 1},
{"ph": "X", "name": "h", "pid": 1, "tid": 1, "ts": 90, "dur": 1, "args": {"cut": "##.to_vec();
    // Invalid UTF-8 in a string, and a file that ends inside the last event.
    let at = text.iter().position(|&b| b == b'~').unwrap_or(0);
    text[at] = 0xff;
    let t = ingest_args("fixture.json", &text);
    let count = |k: DiagKind| t.diagnostics.get(k).map_or(0, |d| d.count);
    assert_eq!(count(DiagKind::ArgsNotKept), 2, "the E's args and the non-object: {:?}", t.diagnostics);
    assert_eq!(count(DiagKind::ArgsRepaired), 2, "the tab and the bad byte");
    assert_eq!(count(DiagKind::Truncated), 1);
    let job = checked(assemble(vec![t], &[], &Rules::default()));
    let a = analyze(&job, &rankscope_core::analyze::Options::default());
    let plan =
        ExportPlan::of(&a, job.ranks.iter().map(|r| (r.rank, r.trace.events.ts_ns.iter().min().copied())));
    let mut out = Vec::new();
    plan.write_merged(&mut out, |k, out, at, first| {
        export::write_rank(out, &job.ranks[k], &job.strings, at, first).map(drop)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let doc: Value = serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{e}"));
    let args: BTreeMap<String, Value> = doc["traceEvents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["ph"] == "X" || e["ph"] == "i")
        .map(|e| (e["name"].as_str().unwrap_or("").to_string(), e["args"].clone()))
        .collect();
    let names: Vec<&str> = args.keys().map(String::as_str).collect();
    assert_eq!(names, ["a", "b", "c", "d", "e", "f", "g"], "the cut event is lost with the file's end");
    let a = &args["a"];
    assert_eq!(a["Input Dims"], serde_json::json!([[2, 3], []]));
    assert_eq!(a["nested"], serde_json::json!({"x": [1, {"y": null}]}));
    assert_eq!(a["n"], serde_json::json!(1.25));
    assert_eq!(a["rankscope"]["aligned_ts_ns"], 10_000);
    assert_eq!(args["b"]["from"], "B");
    assert_eq!(args["c"]["rankscope"]["source_args"], "not kept");
    assert_eq!(args["d"]["tab"], "x\ty");
    assert_eq!(args["e"]["bad"], "\u{fffd}");
    assert_eq!(args["f"]["kept"], true);
    assert!(args["f"]["rankscope"].get("mine").is_none(), "ours, not the file's: {}", args["f"]);
    assert_eq!(args["g"].as_object().map(Map::len), Some(1), "only ours: {}", args["g"]);
    // Not asked, not kept: the ids and ours only, and no arena.
    let t = ingest_chunked("fixture.json", &text, 1 << 10).unwrap_or_else(|e| panic!("{e}"));
    assert!(t.raw_args.is_none() && t.diagnostics.get(DiagKind::ArgsNotKept).is_none());
}
