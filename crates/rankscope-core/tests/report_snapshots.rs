//! Snapshots of the reports: for every scenario of the zoo (`tests/zoo/*/rank*.pt.trace.json.gz`)
//! and the shared real sets, the Markdown note (`--md`) and the analysis JSON (`--json`) as the
//! CLI writes them (each file's part, then the job: `job::part_of` + `job::combine`); the Flight
//! Recorder report of the zoo's dumps (`rankscope fr`, JSON and Markdown); the NCCL_DEBUG log
//! and nccl-tests reports of every shared file (`rankscope nccl --json`, `nccl-tests --json`);
//! the inspect report of every edge-case fixture (its diagnostics: kinds, severities, offsets).
//! Each is compared byte for byte with its committed file in `tests/snapshots/`.
//!
//! A change in wording or in a figure shows as a diff in review, not as a surprise to a user.
//! `UPDATE_SNAPSHOTS=1 cargo test -p rankscope-core --test report_snapshots` rewrites them;
//! read the diff before committing it. A failure names the snapshot and shows the first lines
//! that differ.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::path::{Path, PathBuf};

use rankscope_core::analyze::Options;
use rankscope_core::job;
use rankscope_core::normalize::Rules;

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn snapshots() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots"))
}

fn updating() -> bool {
    std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|v| !v.is_empty() && v != "0")
}

/// The files of `dir` whose names satisfy `keep`, sorted.
fn files(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| keep(&n.to_string_lossy())))
        .collect();
    v.sort();
    v
}

/// The job's outputs as the CLI computes them, each trace named `label/file` (a name that does
/// not depend on where the repository is checked out).
fn outputs(label: &str, traces: &[PathBuf]) -> (String, String) {
    let opts = Options::default();
    let rules = Rules::default();
    let parts = traces
        .iter()
        .map(|p| {
            let name = format!("{label}/{}", p.file_name().unwrap_or_default().to_string_lossy());
            let t =
                common::ingest_chunked(&name, &common::read(p), 1 << 20).unwrap_or_else(|e| panic!("{e}"));
            job::part_of(t, &rules, &opts).into_iter().next().unwrap_or_else(|| panic!("{name}: no part"))
        })
        .collect();
    let out = job::combine(parts, &[], &[], &opts);
    (out.markdown(), out.json())
}

/// Where `want` and `got` first differ, with a few lines around it on each side.
fn first_difference(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let at = w.iter().zip(&g).position(|(a, b)| a != b).unwrap_or(w.len().min(g.len()));
    let from = at.saturating_sub(3);
    let mut s =
        format!("first difference at line {} (snapshot {} lines, now {} lines)\n", at + 1, w.len(), g.len());
    let show = |s: &mut String, sign: char, lines: &[&str]| {
        for (k, l) in lines.iter().enumerate().skip(from).take(at - from + 4) {
            let mark = if k < at { ' ' } else { sign };
            let mut l = l.to_string();
            if l.chars().count() > 200 {
                l = l.chars().take(200).collect::<String>() + "…";
            }
            s.push_str(&format!("{mark}{:>6} | {l}\n", k + 1));
        }
    };
    s.push_str("--- snapshot\n");
    show(&mut s, '-', &w);
    s.push_str("+++ now\n");
    show(&mut s, '+', &g);
    s
}

/// Compares `got` with the snapshot `name` (or writes it when updating); `Err` says how they
/// differ.
fn check(name: &str, got: &str) -> Result<(), String> {
    let path = snapshots().join(name);
    if updating() {
        std::fs::create_dir_all(snapshots()).map_err(|e| e.to_string())?;
        let same = std::fs::read_to_string(&path).is_ok_and(|w| w == got);
        if !same {
            std::fs::write(&path, got).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        return Ok(());
    }
    let want = std::fs::read_to_string(&path)
        .map_err(|e| format!("{name}: no snapshot ({e}); write it with UPDATE_SNAPSHOTS=1 and review it"))?;
    if want == got {
        Ok(())
    } else {
        Err(format!("{name}: the report changed; {}", first_difference(&want, got)))
    }
}

/// Both reports of one job; `Err` lists every snapshot that differs.
fn check_job(label: &str, snapshot: &str, traces: &[PathBuf]) -> Result<(), String> {
    assert!(!traces.is_empty(), "{label}: no traces");
    let (md, json) = outputs(label, traces);
    check_both(snapshot, &md, &json)
}

fn check_both(snapshot: &str, md: &str, json: &str) -> Result<(), String> {
    let errs: Vec<String> = [check(&format!("{snapshot}.md"), md), check(&format!("{snapshot}.json"), json)]
        .into_iter()
        .filter_map(Result::err)
        .collect();
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("\n"))
    }
}

fn zoo_scenarios() -> Vec<(String, Vec<PathBuf>)> {
    let zoo = root().join("tests/zoo");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&zoo)
        .unwrap_or_else(|e| panic!("{}: {e}", zoo.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .filter_map(|d| {
            let traces = files(&d, |n| n.starts_with("rank") && n.ends_with(".pt.trace.json.gz"));
            let name = d.file_name()?.to_string_lossy().into_owned();
            (!traces.is_empty()).then_some((name, traces))
        })
        .collect()
}

#[test]
fn zoo_reports_match_their_snapshots() {
    let scenarios = zoo_scenarios();
    assert!(scenarios.len() >= 30, "{} scenarios", scenarios.len());
    // Two threads: the scenarios are independent and the machine has two cores.
    let (a, b): (Vec<_>, Vec<_>) = scenarios.iter().enumerate().partition(|(k, _)| k % 2 == 0);
    let run = |v: Vec<(usize, &(String, Vec<PathBuf>))>| -> Vec<String> {
        v.into_iter()
            .filter_map(|(_, (name, traces))| {
                check_job(&format!("tests/zoo/{name}"), &format!("zoo_{name}"), traces).err()
            })
            .collect()
    };
    let errs: Vec<String> = std::thread::scope(|s| {
        let h = s.spawn(|| run(a));
        let mut errs = run(b);
        errs.extend(h.join().unwrap_or_else(|_| vec!["a scenario's thread panicked".into()]));
        errs
    });
    assert!(errs.is_empty(), "{} report(s) changed:\n{}", errs.len(), errs.join("\n"));
    // Every snapshot belongs to a job that is still checked.
    let mut known: Vec<String> = scenarios.iter().map(|(n, _)| format!("zoo_{n}")).collect();
    known.extend(SHARED.iter().map(|s| format!("shared_{s}")));
    known.extend(dump_scenarios().iter().map(|(n, _)| format!("fr_{n}")));
    known.push(INSPECT.into());
    for (kind, _) in NCCL {
        known.extend(nccl_files(kind).iter().map(|p| nccl_snapshot(kind, p)));
    }
    let stale: Vec<String> = files(&snapshots(), |_| true)
        .iter()
        .filter_map(|p| Some(p.file_stem()?.to_string_lossy().into_owned()))
        .filter(|s| !known.contains(s))
        .collect();
    assert!(stale.is_empty(), "snapshots of no job (delete them): {stale:?}");
}

/// The shared real sets (`../shared/traces`).
const SHARED: [&str; 2] = ["param-dlrm-8rank", "ddp-gloo-cpu-4rank"];

fn shared(set: &str) {
    let traces = files(&common::shared().join("traces").join(set), |n| n.contains(".json"));
    if let Err(e) = check_job(&format!("shared/traces/{set}"), &format!("shared_{set}"), &traces) {
        panic!("{e}");
    }
}

#[test]
fn dlrm_report_matches_its_snapshot() {
    shared("param-dlrm-8rank");
}

#[test]
fn gloo_report_matches_its_snapshot() {
    shared("ddp-gloo-cpu-4rank");
}

/// The zoo's scenarios with Flight Recorder dumps (`fr_rank*.pkl`).
fn dump_scenarios() -> Vec<(String, Vec<PathBuf>)> {
    let zoo = root().join("tests/zoo");
    let mut v: Vec<(String, Vec<PathBuf>)> = zoo_scenarios()
        .into_iter()
        .map(|(name, _)| {
            let dumps = files(&zoo.join(&name), |n| n.starts_with("fr_rank") && n.ends_with(".pkl"));
            (name, dumps)
        })
        .filter(|(_, d)| !d.is_empty())
        .collect();
    v.sort();
    v
}

#[test]
fn flight_recorder_reports_match_their_snapshots() {
    let scenarios = dump_scenarios();
    assert!(scenarios.len() >= 4, "{scenarios:?}");
    let mut errs = Vec::new();
    for (name, dumps) in &scenarios {
        let bytes: Vec<(String, Vec<u8>)> = dumps
            .iter()
            .map(|p| {
                let file = p.file_name().unwrap_or_default().to_string_lossy();
                (format!("tests/zoo/{name}/{file}"), common::read(p))
            })
            .collect();
        let texts: Vec<job::TextRef<'_>> = bytes
            .iter()
            .map(|(n, b)| job::TextRef { name: n, kinds: &[job::InputKind::FlightRecorder], bytes: b })
            .collect();
        let fr = job::flight_recorder(&texts).unwrap_or_else(|| panic!("{name}: no dumps read"));
        let md = rankscope_core::fr::output::render(&fr.dumps, &fr.report);
        errs.extend(check(&format!("fr_{name}.json"), &fr.json()).err());
        errs.extend(check(&format!("fr_{name}.md"), &md).err());
    }
    assert!(errs.is_empty(), "{} report(s) changed:\n{}", errs.len(), errs.join("\n"));
}

/// The shared NCCL text: `(folder, snapshot prefix)`.
const NCCL: [(&str, &str); 2] = [("nccl-logs", "nccl_log"), ("nccl-tests", "nccl_tests")];

fn nccl_files(kind: &str) -> Vec<PathBuf> {
    files(&common::shared().join(kind), |_| true)
}

/// `nccl_log_<file stem>` for a shared file.
fn nccl_snapshot(kind: &str, p: &Path) -> String {
    let prefix = NCCL.iter().find(|x| x.0 == kind).map_or("nccl", |x| x.1);
    let name = p.file_name().unwrap_or_default().to_string_lossy();
    let stem = name.rsplit_once('.').map_or(name.as_ref(), |x| x.0);
    format!("{prefix}_{stem}")
}

#[test]
fn nccl_reports_match_their_snapshots() {
    let mut errs = Vec::new();
    for (kind, _) in NCCL {
        let files = nccl_files(kind);
        assert!(!files.is_empty(), "{kind}: no files");
        for p in &files {
            let name = format!("shared/{kind}/{}", p.file_name().unwrap_or_default().to_string_lossy());
            let bytes = common::read(p);
            let input = [rankscope_core::nccl::Input { name: &name, bytes: &bytes }];
            let json = if kind == "nccl-logs" {
                serde_json::to_string_pretty(&rankscope_core::nccl::analyze_logs(&input))
            } else {
                serde_json::to_string_pretty(&rankscope_core::nccl::analyze_tests(&input, None))
            };
            let json = json.unwrap_or_else(|e| panic!("{name}: {e}")) + "\n";
            errs.extend(check(&format!("{}.json", nccl_snapshot(kind, p)), &json).err());
        }
    }
    assert!(errs.is_empty(), "{} report(s) changed:\n{}", errs.len(), errs.join("\n"));
}

const INSPECT: &str = "inspect_fixtures";

#[test]
fn inspect_reports_of_the_fixtures_match_their_snapshot() {
    // One file: per fixture of `fixtures/edge` and `fixtures/regress`, its inspect JSON as
    // `rankscope inspect --json` writes it for that file alone, or the error that says it is
    // not a trace.
    let mut out = String::new();
    for dir in ["edge", "regress"] {
        for p in files(&common::fixture(dir), |_| true) {
            let name = format!("fixtures/{dir}/{}", p.file_name().unwrap_or_default().to_string_lossy());
            out.push_str(&format!("## {name}\n"));
            let report = match common::ingest_chunked(&name, &common::read(&p), 1 << 20) {
                Ok(t) => {
                    let job = rankscope_core::normalize::assemble(vec![t], &[], &Rules::default());
                    rankscope_core::inspect::report(&job, Vec::new())
                }
                Err(e) => {
                    let failed =
                        rankscope_core::inspect::FailedFile { file: name.clone(), error: e.to_string() };
                    let job = rankscope_core::normalize::assemble(Vec::new(), &[], &Rules::default());
                    rankscope_core::inspect::report(&job, vec![failed])
                }
            };
            out.push_str(&serde_json::to_string_pretty(&report).unwrap_or_else(|e| panic!("{name}: {e}")));
            out.push_str("\n\n");
        }
    }
    if let Err(e) = check(&format!("{INSPECT}.txt"), &out) {
        panic!("{e}");
    }
}

#[test]
fn the_difference_shows_the_first_lines_that_differ() {
    let d = first_difference("a\nb\nc\nd\n", "a\nb\nX\nd\n");
    assert!(d.starts_with("first difference at line 3"), "{d}");
    assert!(d.contains("-     3 | c") && d.contains("+     3 | X"), "{d}");
    assert!(d.contains("      2 | b"), "{d}");
    let d = first_difference("a\n", "a\nb\n");
    assert!(d.contains("line 2") && d.contains("+     2 | b"), "{d}");
}
