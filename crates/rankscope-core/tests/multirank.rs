//! Multi-rank single files (issue 34, item 4; docs/metrics.md "One file, several ranks"): the
//! zoo's real 4-rank gloo runs merged into one file as a Perfetto / Chrome merge tool writes it
//! (`pid` = rank; with processes named `Rank N`, or bare), and rankscope's own merged export read
//! back, give the figures and the findings the per-rank files give.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // the tests read the zoo's files

mod common;

use std::io::Read;

use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::analyze;
use rankscope_core::job;
use rankscope_core::model::{DiagKind, RankTrace};
use rankscope_core::normalize::{assemble, RankSource, Rules};
use serde_json::Value;

fn zoo_file(name: &str, rank: u32) -> (String, Vec<u8>) {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/zoo")
        .join(name)
        .join(format!("rank{rank}.pt.trace.json.gz"));
    (p.display().to_string(), common::read(&p))
}

fn ingest(name: &str, bytes: &[u8]) -> RankTrace {
    common::ingest_chunked(name, bytes, 1 << 16).unwrap_or_else(|e| panic!("{e}"))
}

/// How the test's merge tool writes the job.
#[derive(Clone, Copy, Debug)]
enum Merge {
    /// `{"traceEvents": …}` with rank 0's top-level metadata (its `distributedInfo` says rank
    /// 0), `pid` = rank, each process named `Rank N`.
    Named,
    /// A bare array, `pid` = rank, the processes' names as the ranks wrote them (`python`).
    Bare,
    /// A bare array, each rank's events under a pid of its own that is not its rank.
    PidOrder,
}

/// The ranks' files merged into one: every event of rank `r` moved to one process (as a merge
/// tool that maps each input to a process does); times as written (the zoo's ranks share
/// `baseTimeNanoseconds`, so their `ts` are on one axis already).
fn merge(name: &str, ranks: u32, how: Merge) -> Vec<u8> {
    let mut events = Vec::new();
    let mut top = serde_json::Map::new();
    for r in 0..ranks {
        let (_, gz) = zoo_file(name, r);
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut text).unwrap_or_else(|e| panic!("{e}"));
        let v: Value = serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{e}"));
        let Value::Object(mut o) = v else { panic!("not an object") };
        let evs = match o.remove("traceEvents") {
            Some(Value::Array(a)) => a,
            _ => panic!("no events"),
        };
        if r == 0 {
            top = o;
        }
        let pid = match how {
            Merge::Named | Merge::Bare => i64::from(r),
            Merge::PidOrder => 40_000 - 17 * i64::from(r),
        };
        for mut e in evs {
            e["pid"] = Value::from(pid);
            events.push(e);
        }
        if let Merge::Named = how {
            events.push(serde_json::json!({
                "ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": format!("Rank {r}")}
            }));
        }
    }
    let doc = match how {
        Merge::Named => {
            top.insert("traceEvents".into(), Value::Array(events));
            Value::Object(top)
        }
        Merge::Bare | Merge::PidOrder => Value::Array(events),
    };
    serde_json::to_vec(&doc).unwrap_or_else(|e| panic!("{e}"))
}

fn separate(name: &str, ranks: u32) -> Analysis {
    let traces = (0..ranks)
        .map(|r| {
            let (n, b) = zoo_file(name, r);
            ingest(&n, &b)
        })
        .collect();
    analyze(&assemble(traces, &[], &Rules::default()), &Options::default())
}

/// The per-rank figures of `b` equal `a`'s within `tol_ns` per figure, and the lead finding
/// is the same, on the same ranks.
fn same_figures(a: &Analysis, b: &Analysis, tol_ns: i64, what: &str) {
    let ranks = |x: &Analysis| x.ranks.iter().map(|r| r.rank).collect::<Vec<_>>();
    assert_eq!(ranks(a), ranks(b), "{what}: ranks");
    for (x, y) in a.rank_totals.iter().zip(&b.rank_totals) {
        assert_eq!((x.rank, x.steps), (y.rank, y.steps), "{what}");
        for (f, p, q) in [
            ("wall", x.wall_ns, y.wall_ns),
            ("compute", x.compute_ns, y.compute_ns),
            ("comm", x.comm_ns, y.comm_ns),
            ("exposed_comm", x.exposed_comm_ns, y.exposed_comm_ns),
            ("idle", x.idle_ns, y.idle_ns),
        ] {
            assert!((p - q).abs() <= tol_ns, "{what}: rank {} {f}: {p} against {q}", x.rank);
        }
    }
    let lead = |x: &Analysis| x.findings.first().map(|f| (f.id.as_str().to_string(), f.ranks.clone()));
    assert_eq!(lead(a), lead(b), "{what}: lead finding");
}

#[test]
fn a_merged_job_is_read_as_its_ranks_and_blames_the_same_rank() {
    let alone = separate("host_stall", 4);
    let lead = alone.findings.first().map(|f| (f.id.as_str(), f.ranks.clone()));
    assert_eq!(lead, Some(("host_stall", vec![2])), "the per-rank files");
    for how in [Merge::Named, Merge::Bare, Merge::PidOrder] {
        let bytes = merge("host_stall", 4, how);
        let t = ingest("job.json", &bytes);
        let job = common::checked(assemble(vec![t], &[], &Rules::default()));
        assert_eq!(job.ranks.len(), 4, "{how:?}");
        assert!(job.errors.is_empty(), "{how:?}: {:?}", job.errors);
        for (k, r) in job.ranks.iter().enumerate() {
            assert_eq!((r.rank, r.source), (k as u32, RankSource::InFile), "{how:?}");
            let (said, assumed) = (
                r.trace.diagnostics.get(DiagKind::RanksInFile).is_some(),
                r.trace.diagnostics.get(DiagKind::RanksInFileAssumed).map(|d| d.message.clone()),
            );
            match how {
                Merge::Named => assert!(said && assumed.is_none(), "{how:?}"),
                Merge::Bare => {
                    let m = assumed.unwrap_or_else(|| panic!("{how:?}: nothing said"));
                    assert!(m.contains("process ids 0..n are taken for the ranks"), "{m}");
                }
                Merge::PidOrder => {
                    let m = assumed.unwrap_or_else(|| panic!("{how:?}: nothing said"));
                    assert!(m.contains("process id order"), "{m}");
                }
            }
        }
        let merged = analyze(&job, &Options::default());
        // Pids 40000, 39983, 39966, 39949: rank 0 is the lowest pid, the file's rank 3.
        if let Merge::PidOrder = how {
            let blamed = merged.findings.first().map(|f| f.ranks.clone());
            assert_eq!(blamed, Some(vec![1]), "{how:?}: rank 2's pid is the second lowest");
            continue;
        }
        same_figures(&alone, &merged, 1_000, &format!("{how:?}"));
        // One file, one clock: no offset invented between its ranks.
        for a in &merged.alignment {
            assert_eq!(a.offset_ns, 0, "{how:?}: {a:?}");
        }
    }
}

/// The job API's per-file path (what `rankscope analyze` runs on each file where it was read):
/// one file gives one part per rank, and the combined job is the whole job's.
#[test]
fn one_file_gives_a_part_per_rank() {
    let bytes = merge("host_stall", 4, Merge::Bare);
    let parts = job::part_of(ingest("job.json", &bytes), &Rules::default(), &Options::default());
    let claims: Vec<Option<u32>> = parts.iter().map(|(c, _)| c.in_file).collect();
    assert_eq!(claims, vec![Some(0), Some(1), Some(2), Some(3)]);
    let out = job::combine(parts, &[], &[], &Options::default());
    let whole =
        analyze(&assemble(vec![ingest("job.json", &bytes)], &[], &Rules::default()), &Options::default());
    assert_eq!(out.analysis, whole);
}

/// rankscope's merged export (one process per rank named `rank N · file`, on the aligned clock)
/// read back gives the same per-rank figures and findings as the files it was written from.
#[test]
fn the_merged_export_round_trips() {
    let traces: Vec<RankTrace> = (0..4)
        .map(|r| {
            let (n, b) = zoo_file("host_stall", r);
            ingest(&n, &b)
        })
        .collect();
    let job = common::checked(assemble(traces, &[], &Rules::default()));
    let a = analyze(&job, &Options::default());
    let plan = rankscope_core::export::ExportPlan::new(
        &a.alignment,
        job.ranks.iter().map(|r| (r.rank, r.trace.events.ts_ns.iter().min().copied())),
    );
    let mut out = Vec::new();
    plan.write_merged(&mut out, |k, out, at, first| {
        rankscope_core::export::write_rank(out, &job.ranks[k], &job.strings, at, first).map(drop)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let back = assemble(vec![ingest("export.json", &out)], &[], &Rules::default());
    assert_eq!(back.ranks.len(), 4);
    for r in &back.ranks {
        let d = r.trace.diagnostics.get(DiagKind::RanksInFile).map(|d| d.message.clone()).unwrap_or_default();
        assert!(d.contains(&format!("its process is named `rank {} · rank{}.pt", r.rank, r.rank)), "{d}");
    }
    let b = analyze(&back, &Options::default());
    // The export writes times in µs with three decimals: exact to the ns.
    same_figures(&a, &b, 1_000, "export");
    let clock = b.alignment.iter().find(|x| x.rank == 1).map(|x| x.note.clone()).unwrap_or_default();
    assert!(clock.contains("file `export.json`: one clock for ranks 0-3"), "{clock}");
    assert!(
        b.alignment[1..].iter().all(|x| x.method == "same_file" && x.offset_ns == 0),
        "{:?}",
        b.alignment
    );
}

/// A single rank's Kineto file (a host process, GPU streams as processes of their own, the
/// profiler's bookkeeping processes) and a synthetic job's files are never cut.
#[test]
fn one_rank_files_stay_whole() {
    for r in 0..4 {
        let (n, b) = zoo_file("host_stall", r);
        let t = ingest(&n, &b);
        assert!(rankscope_core::normalize::multirank::ranks_in(&t).is_none(), "{n}");
    }
    let cfg = rankscope_synth::SynthConfig { ranks: 2, steps: 3, straggler_rank: None, ..Default::default() };
    for rank in 0..2 {
        let mut text = Vec::new();
        rankscope_synth::write_rank(&cfg, rank, &mut text).unwrap_or_else(|e| panic!("{e}"));
        let t = ingest("synth.json", &text);
        assert!(t.lanes.kind.len() > 1);
        assert!(rankscope_core::normalize::multirank::ranks_in(&t).is_none(), "synth rank {rank}");
    }
}

/// A synthetic GPU job (`rankscope synth --merged`: the ranks' documents merged with pid =
/// rank, host threads and GPU streams in one process, on the job's true clock) gives the
/// per-file figures and finding: rank 3's slow GPU.
#[test]
fn a_synthetic_gpu_job_in_one_file() {
    let cfg =
        rankscope_synth::SynthConfig { ranks: 4, steps: 4, straggler_rank: Some(3), ..Default::default() };
    let docs: Vec<Vec<u8>> = rankscope_synth::write_ranks(&cfg, vec![Vec::new(); 4])
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|(d, _)| d)
        .collect();
    let man = rankscope_synth::manifest(&cfg);
    let offsets: Vec<i64> = man.ranks.iter().map(|r| r.clock_offset_ns).collect();
    assert!(offsets.iter().any(|&o| o.abs() > 100_000), "the ranks' clocks differ: {offsets:?}");
    let traces = docs
        .iter()
        .enumerate()
        .map(|(r, d)| ingest(&rankscope_synth::file_name(r as u32, false), d))
        .collect();
    let alone = analyze(&assemble(traces, &[], &Rules::default()), &Options::default());
    let lead = alone.findings.first().map(|f| (f.id.as_str(), f.ranks.clone()));
    assert_eq!(lead, Some(("slow_device", vec![3])), "the per-rank files");
    for named in [true, false] {
        let bytes = rankscope_synth::merged::merge(&docs, &offsets, named).unwrap_or_else(|e| panic!("{e}"));
        let job =
            common::checked(assemble(vec![ingest("job.pt.trace.json", &bytes)], &[], &Rules::default()));
        let merged = analyze(&job, &Options::default());
        // The per-file analysis estimates each clock's offset from the collectives (within a
        // µs of the truth); the merged file is on the true clock: figures within 20 µs.
        same_figures(&alone, &merged, 20_000, if named { "named" } else { "bare" });
        assert!(merged.alignment.iter().all(|a| a.offset_ns == 0 && a.clock_group == 0), "one clock");
        let gpu_lanes = job
            .ranks
            .iter()
            .map(|r| {
                r.trace.lanes.kind.iter().filter(|k| **k == rankscope_core::model::LaneKind::Gpu).count()
            })
            .collect::<Vec<_>>();
        assert!(gpu_lanes.iter().all(|&n| n >= 2), "{gpu_lanes:?}");
    }
}

/// A merge that keeps each rank's device process apart and names only the host processes:
/// the named processes are the ranks, the unnamed device processes are left out and counted.
#[test]
fn unnamed_device_processes_are_left_out_and_said() {
    let mut ev = Vec::new();
    for r in 0..2u32 {
        let (host, dev) = (100 + r, 200 + r);
        ev.push(format!(
            r#"{{"ph":"M","name":"process_name","pid":{host},"tid":0,"args":{{"name":"Rank {r}"}}}}"#
        ));
        for s in 1..3 {
            let ts = 1000 * s;
            ev.push(format!(
                r#"{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{s}","pid":{host},"tid":1,"ts":{ts},"dur":900}}"#
            ));
            ev.push(format!(
                r#"{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":{host},"tid":1,"ts":{},"dur":5,"args":{{"correlation":{s}}}}}"#,
                ts + 10
            ));
            ev.push(format!(
                r#"{{"ph":"X","cat":"kernel","name":"gemm","pid":{dev},"tid":7,"ts":{},"dur":300,"args":{{"correlation":{s}}}}}"#,
                ts + 20
            ));
        }
    }
    let bytes = format!("[{}]", ev.join(","));
    let t = ingest("two.json", bytes.as_bytes());
    let found = rankscope_core::normalize::multirank::ranks_in(&t).unwrap_or_else(|| panic!("not split"));
    assert_eq!(found.ranks.iter().map(|r| r.0).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(found.left_out.len(), 2);
    let job = common::checked(assemble(vec![t], &[], &Rules::default()));
    assert_eq!(job.ranks.len(), 2);
    let d = job.ranks[0].trace.diagnostics.get(DiagKind::ProcessesLeftOut).map(|d| d.message.clone());
    let d = d.unwrap_or_else(|| panic!("nothing said"));
    assert!(d.starts_with("4 event(s) on 2 process(es) of `two.json` that belong to no rank were left out: pid 200 (2), pid 201 (2)"), "{d}");
    assert!(job.ranks[1].trace.diagnostics.get(DiagKind::ProcessesLeftOut).is_none());
    assert_eq!(job.ranks[1].norm.steps.number, vec![1, 2]);
}

/// No trace of shared/traces (each one rank's file: HTA's, TraceLens', the Kineto plugin's,
/// PARAM's DLRM, gloo CPU runs) is cut into ranks, by any of the rules.
#[test]
fn no_shared_single_rank_trace_is_cut() {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.to_string_lossy().ends_with(".json") || p.to_string_lossy().ends_with(".json.gz") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&common::shared().join("traces"), &mut files);
    files.sort();
    let mut cut = Vec::new();
    let mut read = 0;
    for p in &files {
        let name = p.display().to_string();
        let Ok(t) = common::ingest_chunked(&name, &common::read(p), 1 << 20) else { continue };
        read += 1;
        if let Some(f) = rankscope_core::normalize::multirank::ranks_in(&t) {
            cut.push(format!("{name}: {:?}", f.ranks.iter().map(|r| (r.0, r.2.clone())).collect::<Vec<_>>()));
        }
    }
    assert!(read >= 20 || files.is_empty(), "read {read} of {}", files.len());
    assert!(cut.is_empty(), "cut:\n{}", cut.join("\n"));
}

/// A cluster tool's export: one bare array, `pid` = rank, categories no rule knows, no steps
/// and no launches: the pids 0..n are taken for the ranks, and the report says it assumed so
/// and that too little was understood to judge, instead of a confident "No finding".
#[test]
fn pids_numbered_like_ranks_are_ranks_said_as_assumed() {
    let mut ev = Vec::new();
    for r in 0..4u32 {
        for k in 0..120u32 {
            let ts = 1000 * k + r;
            ev.push(format!(
                r#"{{"ph":"X","cat":"tool_slice","name":"region_{k}","pid":{r},"tid":{},"ts":{ts},"dur":800}}"#,
                1000 + r
            ));
        }
    }
    let bytes = format!("[{}]", ev.join(","));
    // A part is never cut again: a shell that reads each part as a job of its own (the app's
    // workers) gets these ranks.
    let parts = rankscope_core::normalize::multirank::split(ingest("cluster.json", bytes.as_bytes()));
    assert_eq!(parts.len(), 4);
    for p in parts {
        let name = p.source.clone();
        let again = rankscope_core::normalize::multirank::split(p);
        assert_eq!(again.iter().map(|t| t.source.as_str()).collect::<Vec<_>>(), [name.as_str()]);
    }
    let job =
        common::checked(assemble(vec![ingest("cluster.json", bytes.as_bytes())], &[], &Rules::default()));
    assert_eq!(job.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    let d = job.ranks[2].trace.diagnostics.get(DiagKind::RanksInFileAssumed).map(|d| d.message.clone());
    let d = d.unwrap_or_default();
    assert!(d.contains("this is rank 2, process 2 holds 120 events, numbered among pids 0..4"), "{d}");
    let a = analyze(&job, &Options::default());
    let md = rankscope_core::diagnose::markdown::markdown(&a);
    assert!(md.contains("holds rank(s) 0–3: told apart by the shape of their processes"), "{md}");
    assert!(md.contains("Too little was understood to judge rank(s) 0–3"), "{md}");
    assert!(!md.contains("No finding crossed its threshold"), "{md}");
}
