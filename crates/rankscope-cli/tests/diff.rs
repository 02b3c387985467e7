//! `rankscope diff BASE NEW` as a user runs it on real runs (`tests/zoo/`): the verdict first in
//! every format, the versioned JSON, gates that fail only on a change beyond noise, an input
//! error before any gate, and a job digest as a side.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rankscope"))
}

fn zoo(name: &str) -> String {
    format!("{}/../../tests/zoo/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = bin().args(args).output().unwrap_or_else(|e| panic!("{e}"));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_host_stall_is_named_first_in_every_format() {
    let (base, new) = (zoo("baseline"), zoo("host_stall"));
    let (code, text, err) = run(&["diff", &base, &new]);
    assert_eq!(code, Some(0), "{err}");
    let first = text.lines().next().unwrap_or_default();
    assert!(first.starts_with("step time +"), "{first}");
    assert!(first.contains("rank 2's forward > straggler_sleep"), "{first}");

    let (_, md, _) = run(&["diff", "--md", &base, &new]);
    assert_eq!(md.lines().next(), Some(first));
    assert!(md.contains("## Per step: the job and each rank"));

    let (_, json, _) = run(&["diff", "--json", &base, &new]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["schema"], "rankscope.diff/1");
    assert_eq!(v["verdict"]["line"], first);
    assert_eq!(v["verdict"]["cause"]["ranks"], serde_json::json!([2]));

    let (_, csv, _) = run(&["diff", "--csv", &base, &new]);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("section,rank,item,parent,presence,base_ns,new_ns,delta_ns,lo_ns,hi_ns,confidence,beyond_noise")
    );
    assert!(lines.next().is_some_and(|l| l.starts_with("step_time,,step_time,") && l.ends_with(",true")));
    assert!(csv.lines().any(|l| l.starts_with("operator,,straggler_sleep,annotation,new,")), "{csv}");

    // The operators that changed, then with `--all` every matched one.
    assert!(text.contains("Operators and kernels") && text.contains("straggler_sleep (new)"), "{text}");
    let (code, all, err) = run(&["diff", "--all", &base, &new]);
    assert_eq!(code, Some(0), "{err}");
    let rows =
        |t: &str| t.lines().filter(|l| l.starts_with("  cpu_op ") || l.starts_with("  annotation ")).count();
    assert!(rows(&all) > rows(&text) + 10, "{} vs {} rows", rows(&all), rows(&text));
}

#[test]
fn gates_fail_only_beyond_noise_and_input_errors_come_first() {
    let (base, new) = (zoo("baseline"), zoo("host_stall"));
    let (code, _, err) = run(&["diff", &base, &new, "--fail-on", "step_time>+5%"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("gate failed: step_time>+5%"), "{err}");
    let (code, _, err) = run(&["diff", &base, &new, "--fail-on", "step_time>+80%"]);
    assert_eq!(code, Some(0), "{err}");
    // Against itself nothing moved: even a bound of 0 does not fail.
    let (code, text, err) = run(&["diff", &base, &base, "--fail-on", "step_time>0%"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(text.starts_with("no change beyond noise"), "{text}");
    // A named file that is not a trace: exit 1, whatever the gates say.
    let junk = format!(
        "{}/../rankscope-core/tests/fixtures/edge/not_a_trace_binary.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let with_junk = format!("{new},{junk}");
    let (code, _, err) = run(&["diff", &base, &with_junk, "--fail-on", "step_time>+5%"]);
    assert_eq!(code, Some(1), "{err}");
    // Usage errors.
    let (code, _, _) = run(&["diff", &base, &new, "--fail-on", "step_time>5"]);
    assert_eq!(code, Some(2));
}

#[test]
fn a_job_digest_is_a_side_like_its_folder() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("diff-digest");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let base = zoo("baseline");
    let mut traces: Vec<PathBuf> = std::fs::read_dir(&base)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".pt.trace.json.gz"))
        .collect();
    traces.sort();
    let s = |p: &Path| p.display().to_string();
    let mut parts = Vec::new();
    for (i, f) in traces.iter().enumerate() {
        let p = dir.join(format!("{i}.part"));
        let (code, _, err) = run(&["part", &s(f), "-o", &s(&p)]);
        assert_eq!(code, Some(0), "{err}");
        parts.push(s(&p));
    }
    let digest = s(&dir.join("job.rsdigest"));
    let mut args = vec!["combine", "--json", "--digest", &digest];
    args.extend(parts.iter().map(String::as_str));
    let (code, _, err) = run(&args);
    assert_eq!(code, Some(0), "{err}");
    let (code, json, err) = run(&["diff", "--json", &base, &digest]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["verdict"]["change"], "no_change", "{}", v["verdict"]["line"]);
    assert_eq!(v["step_time"]["shift"]["delta_ns"], 0);
    let figures = v["figures"].as_array().map_or(0, Vec::len);
    assert!(figures > 0 && v["figures"].as_array().is_some_and(|f| f.iter().all(|x| x["delta_ns"] == 0)));
}

#[test]
fn runs_are_one_line_each_and_a_folder_of_runs_is_walked() {
    let (code, text, err) = run(&["runs", &zoo("repeat")]);
    assert_eq!(code, Some(0), "{err}");
    // The table, then a blank line and what each run's work figures rest on.
    let lines: Vec<&str> = text.lines().take_while(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[0].starts_with("run ") && lines[0].contains("step p50") && lines[0].ends_with("lead finding")
    );
    let stall = lines.iter().find(|l| l.contains("host_stall_b")).unwrap_or_else(|| panic!("{text}"));
    assert!(stall.contains("host_stall (rank 2)") && stall.contains("2026-12-06"), "{stall}");
    let (code, json, _) = run(&["runs", "--json", &zoo("baseline"), &zoo("identical_2rank")]);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["schema"], "rankscope.runs/1");
    assert_eq!((v["runs"][0]["ranks"].as_u64(), v["runs"][1]["ranks"].as_u64()), (Some(4), Some(2)));
    // The step time's median is the analysis' own (`noise.step_ns`, the same steps).
    let (_, a, _) = run(&["analyze", "--json", &zoo("baseline")]);
    let a: serde_json::Value = serde_json::from_str(&a).unwrap_or_else(|e| panic!("{e}"));
    let p50 = v["runs"][0]["step_p50_ns"].as_i64().unwrap_or(0);
    let med = a["noise"]["step_ns"].as_i64().unwrap_or(0);
    assert!(p50 > 0 && (p50 - med).abs() * 10 < med, "{p50} vs {med}");
}

#[test]
fn runs_of_one_model_give_their_scaling_and_a_stated_peak_gives_mfu() {
    let (code, json, err) = run(&["runs", "--json", "--peak-tflops", "0.5", &zoo("scaling")]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
    let runs = v["runs"].as_array().map_or(0, Vec::len);
    assert_eq!(runs, 6, "{json}");
    assert!(v["runs"].as_array().into_iter().flatten().all(|r| r["mfu"].as_f64().is_some_and(|m| m > 0.0)));
    assert_eq!(v["runs"][0]["peak"]["from"], "given");
    let modes: Vec<&str> = v["scaling"][0]["points"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["mode"].as_str())
        .collect();
    assert_eq!(modes, ["base", "strong", "strong", "base", "weak", "weak"]);
    // Stated samples win over the traces' for every run.
    let (_, csv, _) = run(&["runs", "--csv", "--samples-per-step", "256", &zoo("scaling/weak_w2")]);
    let row: Vec<&str> = csv.lines().nth(1).unwrap_or("").split(',').collect();
    assert_eq!((row.get(17), row.get(18)), (Some(&"256"), Some(&"given")), "{csv}");
}

#[test]
fn a_saved_analysis_is_a_side_like_its_folder() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("diff-saved");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let (base, new) = (zoo("baseline"), zoo("host_stall"));
    let (code, saved, err) = run(&["analyze", "--json", &base]);
    assert_eq!(code, Some(0), "{err}");
    let file = dir.join("baseline.analysis.json");
    std::fs::write(&file, saved).unwrap_or_else(|e| panic!("{e}"));
    let (code, from_saved, err) = run(&["diff", "--json", &file.display().to_string(), &new]);
    assert_eq!(code, Some(0), "{err}");
    let (_, from_folder, _) = run(&["diff", "--json", &base, &new]);
    assert_eq!(from_saved, from_folder);
}
