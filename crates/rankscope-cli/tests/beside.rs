//! `rankscope analyze DIR` with the evidence dropped beside the traces in the folder: cluster
//! metrics (under a name without a suffix: asked by content), a step log and an NCCL RAS status
//! are read with the traces into one analysis, their findings in the findings list, and
//! `rankscope part` + `combine` give the same bytes.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rankscope"))
}

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
    d
}

fn run(args: &[&str]) -> (Option<i32>, Vec<u8>, String) {
    let out = bin().args(args).output().unwrap_or_else(|e| panic!("{e}"));
    (out.status.code(), out.stdout, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn fixture(rel: &str) -> String {
    format!("{}/../rankscope-core/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"))
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn analyze_reads_metrics_a_step_log_and_ras_beside_the_traces() {
    let dir = scratch("beside-job");
    let job = dir.join("job");
    // The job the cluster metrics fixtures were written for.
    let (code, _, err) = run(&["synth", "--layout", "tp=8,pp=1,dp=2", "--out", &s(&job)]);
    assert_eq!(code, Some(0), "{err}");
    let (code, alone, err) = run(&["analyze", "--json", &s(&job)]);
    assert_eq!(code, Some(0), "{err}");
    let alone = json(&alone);
    // The profiled steps: the log is written around them (a slow phase where they are).
    let steps: Vec<(u64, f64)> = alone["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("steps"))
        .iter()
        .map(|st| {
            let wall = st["per_rank"].as_array().into_iter().flatten().filter_map(|r| r["wall_ns"].as_f64());
            (st["step"].as_u64().unwrap_or(0), wall.fold(0.0, f64::max) / 1e6)
        })
        .collect();
    assert!(!steps.is_empty());
    let fastest = steps.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
    let (first, last) = (steps[0].0, steps[steps.len() - 1].0);
    let log: String = (1..=5000u64)
        .map(|it| {
            let slow = (first.saturating_sub(20).max(1)..=last + 20).contains(&it);
            let ms = if slow { fastest } else { fastest / 2.0 };
            format!(" iteration {it:>8}/    5000 | elapsed time per iteration (ms): {ms:.1} |\n")
        })
        .collect();
    std::fs::write(job.join("train.log"), log).unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(fixture("cluster_metrics/comm_bound/query_range.json"), job.join("prom_export"))
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(fixture("nccl_ras/dead_rank.json"), job.join("ras.json")).unwrap_or_else(|e| panic!("{e}"));

    let (code, out, err) = run(&["analyze", "--json", &s(&job)]);
    assert_eq!(code, Some(0), "{err}");
    let v = json(&out);
    let b = &v["beside"];
    assert_eq!(b["metrics"]["join"]["ranks"].as_array().map(Vec::len), Some(16), "{b}");
    assert!(b["metrics"]["join"]["residual"].as_str().is_some_and(|r| !r.is_empty()));
    assert_eq!(b["steplogs"][0]["iterations"], 5000);
    assert_eq!(b["steplogs"][0]["profile"]["representative"], "slower_than_usual");
    assert_eq!(b["ras"][0]["file"].as_str().map(|f| f.ends_with("ras.json")), Some(true));
    let ids: Vec<&str> =
        v["findings"].as_array().into_iter().flatten().filter_map(|f| f["id"].as_str()).collect();
    for id in ["metrics.comm-bound", "steplog.slow-phase-profiled", "ras.job-incomplete"] {
        assert!(ids.contains(&id), "{id} not in {ids:?}");
    }
    // The terminal report has the section; the files are no longer "foreign".
    let (code, text, err) = run(&["analyze", &s(&job)]);
    assert_eq!(code, Some(0), "{err}");
    let text = String::from_utf8_lossy(&text);
    assert!(text.contains("Beside the traces") && text.contains("Cluster metrics"), "{text}");
    for f in ["train.log", "prom_export", "ras.json"] {
        assert!(!err.contains(f), "{f} named on stderr: {err}");
    }

    // Parts and combine: the same answer, byte for byte.
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&job)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n != "manifest.json"))
        .collect();
    inputs.sort();
    let mut parts = Vec::new();
    for (i, f) in inputs.iter().enumerate() {
        let p = dir.join(format!("{i:03}.part"));
        let (code, _, err) = run(&["part", &s(f), "-o", &s(&p)]);
        assert_eq!(code, Some(0), "{}: {err}", f.display());
        parts.push(s(&p));
    }
    let mut args = vec!["combine", "--json"];
    args.extend(parts.iter().map(String::as_str));
    let (code, combined, err) = run(&args);
    assert_eq!(code, Some(0), "{err}");
    assert!(combined == out, "combine differs from analyze");
}
