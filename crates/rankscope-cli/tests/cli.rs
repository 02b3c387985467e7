//! The `rankscope` binary as a user runs it: exit codes, output formats, gates.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rankscope"))
}

fn fixtures(rel: &str) -> String {
    format!("{}/../rankscope-core/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn analyze_formats_and_gates() {
    let dir = fixtures("analysis/two_rank_known");
    let out = bin().args(["analyze", "--json", &dir]).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["schema"], "rankscope.analysis");
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["alignment"][1]["offset_ns"], 1_000_000);

    let out = bin().args(["analyze", "--csv", &dir]).output().unwrap_or_else(|e| panic!("{e}"));
    let csv = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0]
        .starts_with("step,rank,source,start_ns,wall_ns,compute_ns,comm_ns,overlap_ns,exposed_comm_ns"));
    assert_eq!(lines.len(), 3);
    assert!(lines[1].starts_with("1,0,gpu,"), "{}", lines[1]);

    let out = bin().args(["analyze", "--md", &dir]).output().unwrap_or_else(|e| panic!("{e}"));
    let md = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(md.contains("## Findings"));
    // Without --md: the same report laid out for a terminal (here a pipe: plain, whole width),
    // no Markdown left in it, every finding id as written.
    let out = bin().args(["analyze", &dir]).output().unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("rankscope analysis\n==="), "{text}");
    assert!(!text.contains("\\_") && !text.contains("**") && !text.contains("| rank |"), "{text}");
    assert!(!text.contains('\x1b'), "no bold on a pipe: {text}");
    let v: serde_json::Value = serde_json::from_slice(
        &bin().args(["analyze", "--json", &dir]).output().unwrap_or_else(|e| panic!("{e}")).stdout,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for f in v["findings"].as_array().into_iter().flatten() {
        let id = f["id"].as_str().unwrap_or_default();
        assert!(text.contains(&format!(" {id} — ")), "{id} not in {text}");
    }
    let narrow =
        bin().args(["analyze", &dir]).env("COLUMNS", "60").output().unwrap_or_else(|e| panic!("{e}"));
    let narrow = String::from_utf8_lossy(&narrow.stdout);
    // A table's rule (dashes under each column, two spaces apart), not a heading's underline.
    let rules: Vec<&str> = narrow.lines().filter(|l| l.starts_with("----") && l.contains("  ")).collect();
    assert!(!rules.is_empty() && rules.iter().all(|l| l.chars().count() <= 60), "{narrow}");

    // Rank 0 exposes 100 of 300 µs: a 0.3 gate passes, a 0.2 gate fails with exit code 3.
    let ok = bin().args(["analyze", "--json", &dir, "--fail-on", "exposed_comm_ratio>0.5"]).output();
    assert_eq!(ok.map(|o| o.status.code()).ok().flatten(), Some(0));
    let bad = bin()
        .args(["analyze", "--json", &dir, "--fail-on", "exposed_comm_ratio>0.2"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bad.status.code(), Some(3));
    // The first release's name is the same figure, said under its new name.
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("gate failed: worst_rank_exposed_comm_share > 0.2"), "{err}");
    assert!(err.contains("`exposed_comm_ratio` is now `worst_rank_exposed_comm_share`"), "{err}");
    // The gates and the headline read one step: the report's "a step takes 0.300 ms".
    let step = bin()
        .args(["analyze", "--json", &dir, "--fail-on", "step_time_ms>0.299", "--fail-on", "step_time_ms>0.3"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&step.stderr);
    assert!(
        err.contains("gate failed: step_time_ms > 0.299 (measured 0.3000)") && !err.contains("> 0.3 "),
        "{err}"
    );
    // An input that is not a trace exits 1 before a failed gate's 3; the gate is still said.
    let not_trace = fixtures("edge/not_a_trace_binary.json");
    let both = bin()
        .args(["analyze", "--json", &dir, &not_trace, "--fail-on", "findings>=0"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(both.status.code(), Some(1), "{}", String::from_utf8_lossy(&both.stderr));
    assert!(String::from_utf8_lossy(&both.stderr).contains("gate failed: findings >= 0"));
    // `rankscope gates` lists every metric with what it measures.
    let list = bin().args(["gates"]).output().unwrap_or_else(|e| panic!("{e}"));
    let list = String::from_utf8_lossy(&list.stdout);
    for m in rankscope_core::diagnose::gates::GateMetric::ALL {
        assert!(list.contains(&format!("  {:<36} {}", m.as_str(), m.describe())), "{m}: {list}");
    }
    assert!(list.contains("step_time") && list.contains("new_high_findings"), "{list}");
    let usage =
        bin().args(["analyze", &dir, "--fail-on", "nonsense>1"]).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(usage.status.code(), Some(2));
    let off =
        bin().args(["analyze", "--json", &dir, "--offset", "1=5"]).output().unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value = serde_json::from_slice(&off.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["alignment"][1]["method"], "user");
}

#[test]
fn inspect_reports_a_broken_file_and_keeps_the_rest() {
    let good = fixtures("edge/truncated_mid_event.json");
    let bad = fixtures("edge/not_a_trace_binary.json");
    let out = bin().args(["inspect", "--json", &good, &bad]).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["files"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["files"][0]["diagnostics"][0]["kind"], "truncated");
    let err = v["failed"][0]["error"].as_str().unwrap_or("");
    assert!(err.contains("not_a_trace_binary.json") && err.contains("at byte 0"), "{err}");
}

#[test]
fn nccl_exits_0_on_a_successful_jobs_log_with_teardown_traces() {
    // Issue 34: a successful 2-node EFA job's teardown traces failed a CI gate (exit 1).
    let log = fixtures("nccl/log_efa-2node_successful-job_teardown-traces_SYNTHETIC.log");
    let out = bin().args(["nccl", &log]).output().unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("log.teardown-warnings") && !text.contains("[ERROR]"), "{text}");
    // The same log cut before the job says it finished: the traces are errors again.
    let body = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{e}"));
    let cut: String = body
        .lines()
        .filter(|l| {
            !(l.contains("train_runtime") || l.contains("Training completed") || l.contains("finished"))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let failed = scratch("nccl-teardown").join("failed.log");
    std::fs::write(&failed, cut).unwrap_or_else(|e| panic!("{e}"));
    let out = bin().arg("nccl").arg(&failed).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn rccl_logs_and_rccl_tests_as_issue_34_gave_them() {
    // `rankscope nccl` did not see the `RCCL version :` banner.
    let log = fixtures("nccl/log_rccl-2node_banners_gdr-peermem_SYNTHETIC.log");
    let out = bin().args(["nccl", &log]).output().unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("; RCCL 2.20.5 (mi300-n1, mi300-n2)"), "{text}");
    // Two MI300X nodes with a ~220 µs floor, 14× one node's, an inversion and a step: "Findings: none".
    let one = fixtures("nccl/tests_rccl-tests_mi300x-1node-8gpu_allreduce_SYNTHETIC.txt");
    let two =
        fixtures("nccl/tests_rccl-tests_mi300x-2node-16gpu_allreduce_latency-step-inversion_SYNTHETIC.txt");
    let out = bin().args(["nccl-tests", "--no-rows", &one, &two]).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "warnings only");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("small-message floor 15.56 us (at 256 B)"), "{text}");
    for id in ["tests.latency-floor", "tests.internode-latency", "tests.non-monotonic", "tests.curve-step"] {
        assert!(text.contains(&format!("[WARN ] {id}: ")), "{id}: {text}");
    }
}

#[test]
fn analyze_recognises_every_nccl_tests_file_by_content() {
    let trace = fixtures("analysis/two_rank_known");
    let dir = format!("{}/../../../shared/nccl-tests", env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(files.len() >= 10);
    for f in files {
        let out =
            bin().args(["analyze", "--json", &trace]).arg(&f).output().unwrap_or_else(|e| panic!("{e}"));
        // mpirun's `[1,0]<stdout>:` tags start with `[` like a bare JSON array: not a trace.
        assert_eq!(out.status.code(), Some(0), "{}: {}", f.display(), String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn fr_reports_the_hang_of_a_dump_set() {
    let dir = fixtures("fr/skip_allreduce/pickle");
    let out = bin().args(["fr", &dir]).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("- Ranks 0, 2 and 3 are stuck in all_reduce #12"), "{text}");
    assert!(text.contains("rank 1 never issued it"), "{text}");

    let out = bin().args(["fr", "--json", &dir]).output().unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["schema"], "rankscope.fr");
    assert_eq!(v["dumps"].as_array().map(Vec::len), Some(4));
    assert_eq!(v["dumps"][1]["rank_from"], "file_name");
    assert_eq!(v["report"]["diagnoses"][0]["kind"], "hang");
    assert_eq!(v["report"]["diagnoses"][0]["ranks"][0], 1);

    // `analyze` with dumps only gives the hang report alone; a file that is not a dump fails.
    let out =
        bin().args(["analyze", &fixtures("fr/early_exit/json")]).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("rank 2 never issued it"));
    let bad = fixtures("edge/not_a_trace_binary.json");
    let out = bin().args(["fr", &dir, &bad]).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn analyze_takes_traces_and_dumps_together() {
    let traces = fixtures("analysis/two_rank_known");
    let dumps = fixtures("fr/shape_mismatch/pickle");
    let out = bin().args(["analyze", "--json", &traces, &dumps]).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["schema"], "rankscope.analysis");
    assert_eq!(v["flight_recorder"]["report"]["diagnoses"][0]["kind"], "mismatch");
    let out = bin().args(["analyze", "--md", &traces, &dumps]).output().unwrap_or_else(|e| panic!("{e}"));
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(md.contains("## Flight Recorder") && md.contains("does not match across ranks (shape)"), "{md}");
    // The default report, laid out for a terminal, says the same without Markdown.
    let out = bin().args(["analyze", &traces, &dumps]).output().unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Flight Recorder\n---") && text.contains("does not match across ranks (shape)"),
        "{text}"
    );
}

fn shared(rel: &str) -> String {
    format!("{}/../../../shared/{rel}", env!("CARGO_MANIFEST_DIR"))
}

/// A fresh, empty directory under the target directory.
fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
    d
}

#[test]
fn a_closed_pipe_ends_every_subcommand_quietly() {
    use std::process::Stdio;
    let dlrm = shared("traces/param-dlrm-8rank");
    let tests = shared("nccl-tests/xxrjun_h100_10node-80rank_multi-collective.txt");
    let log = shared("nccl-logs/aws-efa-eks_2node-16rank-p4d_EFA-OFI_nccl2.9.9.log");
    let out_dir = scratch("pipe-synth");
    let out_dir = out_dir.display().to_string();
    let ras = fixtures("nccl_ras/healthy.json");
    let runs: Vec<Vec<&str>> = vec![
        vec!["nccl-ras", "--json", &ras],
        vec!["inspect", "--json", &dlrm],
        vec!["inspect", &dlrm],
        vec!["analyze", "--json", &dlrm],
        vec!["analyze", "--md", &dlrm],
        vec!["analyze", "--csv", &dlrm],
        vec!["nccl-tests", "--json", &tests],
        vec!["nccl", "--json", &log],
        vec!["synth", "--out", &out_dir, "--ranks", "1", "--steps", "1"],
    ];
    for args in runs {
        let mut child = bin()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        // Close the reading end at once, as `| head -0` would.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}

#[test]
fn option_errors_name_the_option() {
    let dir = fixtures("analysis/two_rank_known");
    let cases: &[(&[&str], &str)] = &[
        (&["--offset", "x=5"], "--offset x=5"),
        (&["--offset", "1=abc"], "--offset 1=abc"),
        (&["--threshold", "exposed_comm_ratio=abc"], "--threshold"),
        (&["--fail-on", "exposed_comm_ratio>NaN"], "--fail-on"),
        (&["--fail-on", "nonsense>1"], "--fail-on"),
        (&["--rank", "nosuchfile.json=1"], "--rank nosuchfile.json=1"),
        (&["--rules", "/nonexistent/rules.json"], "/nonexistent/rules.json"),
        (&["--layout", "tp=x"], "--layout tp=x"),
        (&["--layout", "zz=2"], "--layout zz=2"),
    ];
    for (extra, want) in cases {
        let out = bin().args(["analyze", &dir]).args(*extra).output().unwrap_or_else(|e| panic!("{e}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(want), "{extra:?}: {err}");
    }
    let out = bin().args(["inspect", "/nonexistent/trace.json"]).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent/trace.json"));
}

#[cfg(unix)]
#[test]
fn folders_walk_each_directory_once_and_skip_what_is_not_a_trace() {
    // One level down, so that `up` (a link to `..`) leads only back here, not to other tests'.
    let d = scratch("folder-walk").join("w");
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(fixtures("edge/truncated_mid_event.json"), d.join("rank2.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(d.join("config.json"), br#"[{"lr": 0.1}]"#).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(d.join("settings.json"), br#"{"lr": 0.1, "epochs": 3}"#).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(".", d.join("loop")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink("..", d.join("up")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink("rank2.json", d.join("again.json")).unwrap_or_else(|e| panic!("{e}"));
    // A link named like a trace that leads to a folder (of other people's traces) is not walked.
    let elsewhere = scratch("folder-walk-elsewhere");
    std::fs::copy(fixtures("edge/truncated_mid_event.json"), elsewhere.join("rank7.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&elsewhere, d.join("linked_dir.json")).unwrap_or_else(|e| panic!("{e}"));
    let fifo = Command::new("mkfifo").arg(d.join("pipe.json")).status();
    assert!(fifo.is_ok_and(|s| s.success()));
    let out = bin().args(["inspect", "--json"]).arg(&d).output().unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["files"].as_array().map(Vec::len), Some(1), "{v}");
    for name in ["config.json", "settings.json", "pipe.json", "linked_dir.json"] {
        assert!(err.contains(name), "no note for {name}: {err}");
    }
}

#[test]
fn a_folder_means_what_it_means_in_the_app() {
    // Traces, an nccl-tests output with an upper-case `.TXT` and a non-trace JSON: the app
    // takes the first two from the same folder and skips the third; so does the CLI.
    let dir = scratch("folder_like_the_app");
    let gloo = shared("traces/ddp-gloo-cpu-4rank");
    for e in std::fs::read_dir(&gloo).unwrap_or_else(|e| panic!("{e}")).flatten() {
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap_or_else(|e| panic!("{e}"));
    }
    let tests = shared("nccl-tests/xxrjun_h100_1node-8gpu_multi-collective.txt");
    std::fs::copy(tests, dir.join("NCCL-TESTS.TXT")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join("config.json"), br#"[{"lr": 0.1}]"#).unwrap_or_else(|e| panic!("{e}"));
    let d = dir.display().to_string();
    let out = bin().args(["analyze", "--json", &d]).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["ranks"].as_array().map(Vec::len), Some(4));
    // The H100 NCCL numbers are joined and said not to stand for a gloo CPU job.
    let fabric = v["fabric"].as_array().cloned().unwrap_or_default();
    assert!(!fabric.is_empty(), "the folder's nccl-tests output was read");
    assert!(fabric.iter().all(|f| f["comparable"] == false), "{fabric:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("config.json"));
    // The key order is the analysis's own, as the app writes it.
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("{\n  \"schema\": \"rankscope.analysis\""));
}

/// `--layout` names the groups' roles of a job whose traces list the groups, and the JSON
/// carries the layout and the chain of waits.
#[test]
fn analyze_takes_a_layout() {
    let dir = format!("{}/../../tests/zoo/layout/tp2_dp2_stall", env!("CARGO_MANIFEST_DIR"));
    let out = bin()
        .args(["analyze", "--json", "--layout", "tp=2,dp=2", &dir])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let groups = v["layout"]["groups"].as_array().cloned().unwrap_or_default();
    let tensor = groups.iter().find(|g| g["ranks"] == serde_json::json!([2, 3])).cloned().unwrap_or_default();
    assert_eq!((tensor["role"].as_str(), tensor["role_from"].as_str()), (Some("tensor"), Some("user")));
    assert_eq!(v["wait_chain"]["origins"], serde_json::json!([3]));
    assert_eq!(v["findings"][0]["id"], "host_stall");
}

#[test]
fn synth_writes_a_hybrid_job_from_its_layout_and_cause() {
    let dir = scratch("hybrid-synth").display().to_string();
    let args = [
        "synth",
        "--layout",
        "tp=2,pp=2,dp=4",
        "--cause",
        "host_stall:rank=5,ms=20",
        "--steps",
        "1",
        "--micro-batches",
        "2",
        "--out",
        &dir,
    ];
    let out = bin().args(args).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("16 trace files rank0..rank15.pt.trace.json"), "{text}");
    assert!(text.contains("tp=2 pp=2 dp=4 cp=1 ep=1 on 2 hosts, 1F1B with 2 micro-batches"), "{text}");
    assert!(text.contains("injected: host_stall on ranks [5], 20.0 ms per step"), "{text}");
    assert!(text.contains("expected first finding: host_stall"), "{text}");
    let man: serde_json::Value =
        serde_json::from_slice(&std::fs::read(format!("{dir}/manifest.json")).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(man["hybrid"]["cause"]["origin_ranks"], serde_json::json!([5]));
    assert_eq!(man["hybrid"]["layout"]["world"], 16);
    assert!(std::path::Path::new(&format!("{dir}/rank15.pt.trace.json")).exists());
    // The flags that do not fit a layout say why.
    let cases: &[(&[&str], &str)] = &[
        (&["--layout", "tp=2,pp=2"], "--layout needs dp="),
        (&["--layout", "tp=2,pp=2,dp=2", "--ranks", "4"], "--ranks 4 is not the layout's world size 8"),
        (&["--layout", "tp=2,pp=2,dp=2", "--stages", "4"], "a hybrid job takes them from --layout"),
        (&["--cause", "host_stall:rank=1,ms=5"], "need --layout"),
        (&["--layout", "tp=2,pp=2,dp=2", "--cause", "slow_stage:stage=7"], "is not a stage"),
        (&["--layout", "tp=2,pp=2,dp=2", "--cause", "warp_drive"], "unknown cause"),
    ];
    for (extra, want) in cases {
        let mut a = vec!["synth", "--out", &dir];
        a.extend_from_slice(extra);
        let out = bin().args(&a).output().unwrap_or_else(|e| panic!("{e}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{a:?}");
        assert!(err.contains(want), "{a:?}: {err}");
    }
}

/// Control characters from the input never reach a terminal (issue 39): a file name and an
/// event name holding OSC 0 (window title), OSC 8 (hyperlink) and OSC 52 (clipboard write), a
/// Flight Recorder entry and an NCCL log line holding the same, through every human output.
#[cfg(unix)]
#[test]
fn hostile_names_print_as_characters_not_terminal_commands() {
    let d = scratch("hostile-names");
    let evil = "k\u{1b}]0;pwned\u{7}\u{1b}]8;;http://evil\u{1b}\\click\u{1b}]8;;\u{1b}\\\u{1b}]52;c;ZXZpbA==\u{7}\u{9b}31m";
    let json_evil = serde_json::to_string(evil).unwrap_or_else(|e| panic!("{e}"));
    let trace = d.join("rank0_\u{1b}[31mred.json");
    let event =
        format!(r#"{{"traceEvents":[{{"ph":"X","name":{json_evil},"ts":1,"dur":2,"pid":1,"tid":1}}]}}"#);
    std::fs::write(&trace, event).unwrap_or_else(|e| panic!("{e}"));
    let dump = d.join("fr_trace_rank_\u{1b}]0;x\u{7}1.json");
    let h = std::fs::read_to_string(fixtures("fr/healthy/json/fr_trace_rank_1.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        &dump,
        h.replacen("gloo:broadcast", &format!("gloo:broadcast{}", &json_evil[1..json_evil.len() - 1]), 1),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let log = d.join("nccl_\u{1b}]52;c;eA==\u{7}.log");
    std::fs::write(
        &log,
        format!(
            "nodeA:100:100 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\nnodeA:100:100 [0] NCCL WARN {evil}\n"
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let t = trace.as_os_str();
    let runs: Vec<Vec<&std::ffi::OsStr>> = vec![
        vec!["inspect".as_ref(), t],
        vec!["analyze".as_ref(), t],
        vec!["analyze".as_ref(), "--csv".as_ref(), t],
        vec!["analyze".as_ref(), t, dump.as_os_str()],
        vec!["fr".as_ref(), dump.as_os_str()],
        vec!["nccl".as_ref(), log.as_os_str()],
        vec!["inspect".as_ref(), d.join("missing\u{1b}]0;t\u{7}.json").as_os_str().to_owned().leak()],
    ];
    for args in runs {
        let out = bin().args(&args).output().unwrap_or_else(|e| panic!("{e}"));
        for (what, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            let text = String::from_utf8_lossy(bytes);
            assert!(
                !text.chars().any(|c| c.is_control() && c != '\n' && c != '\t'),
                "{args:?} {what}: {text:?}"
            );
        }
        assert!(!out.stdout.is_empty() || !out.stderr.is_empty(), "{args:?}");
    }
}

/// `synth --merged` writes the job as one file; `analyze` reads it as its ranks (named, or by
/// shape with the assumption said), and `--rank 'FILE (rank K)=N'` names one of them.
#[test]
fn a_merged_job_is_analysed_as_its_ranks() {
    for how in ["named", "bare"] {
        let dir = scratch(&format!("merged-{how}")).display().to_string();
        let out = bin()
            .args(["synth", "--out", &dir, "--ranks", "3", "--steps", "2", "--merged", how])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let man: serde_json::Value =
            serde_json::from_slice(&std::fs::read(format!("{dir}/manifest.json")).unwrap_or_default())
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(man["merged"]["ranks"], 3);
        assert_eq!(man["merged"]["named"], how == "named");
        let file = format!("{dir}/job.pt.trace.json");
        let out = bin()
            .args(["analyze", "--json", &file, "--rank", "job.pt.trace.json (rank 2)=7"])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
        let ranks: Vec<(u64, String)> = v["ranks"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|r| {
                        (
                            r["rank"].as_u64().unwrap_or(99),
                            r["rank_source"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(ranks, vec![(0, "in_file".into()), (1, "in_file".into()), (7, "user".into())], "{how}");
        let kinds: Vec<&str> =
            v["diagnostics"].as_array().into_iter().flatten().filter_map(|d| d["kind"].as_str()).collect();
        let want = if how == "named" { "ranks_in_file" } else { "ranks_in_file_assumed" };
        assert!(kinds.contains(&want), "{how}: {kinds:?}");
    }
}

/// `rankscope steplog`: Megatron's iteration lines and timers over the run; a file without
/// either exits 1 and says so.
#[test]
fn steplog_reads_megatron_iterations_and_timers() {
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("steplog");
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
    let mut log = String::new();
    for (k, ms) in [1001.0, 998.5, 1003.2, 2510.0, 999.9].iter().enumerate() {
        let it = 10 * (k + 1);
        log.push_str(&format!(
            " [2025-01-01 00:00:{k:02}] iteration {it:>8}/     500 | consumed samples: {} | elapsed time per iteration (ms): {ms} | throughput per GPU (TFLOP/s/GPU): 300.0 | global batch size:   128 | number of skipped iterations:   0 | number of nan iterations:   0 |\n(min, max) time across ranks (ms):\n    forward-backward ...............................: (950.00, 990.00)\n    batch-generator ................................: (0.50, 120.00)\n",
            it * 128
        ));
    }
    let path = d.join("train.log");
    std::fs::write(&path, log).unwrap_or_else(|e| panic!("{e}"));
    let out =
        bin().args(["steplog", path.to_str().unwrap_or_default()]).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("5 iteration lines (iterations 10–50), elapsed per iteration: median 1001.0 ms"),
        "{text}"
    );
    assert!(
        text.contains("`batch-generator` takes up to 120.0 ms on its slowest rank, 119.5 ms more"),
        "{text}"
    );
    assert!(
        text.contains("1 of 5 logged iterations took at least 1.5x the median 1001.0 ms: 40 (2510 ms)"),
        "{text}"
    );
    let json = bin()
        .args(["steplog", "--json", path.to_str().unwrap_or_default()])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v[0]["schema"], "rankscope.steplog");
    assert_eq!(v[0]["iterations"].as_array().map(Vec::len), Some(5));
    assert_eq!(v[0]["timers"][1]["name"], "batch-generator");
    let other = d.join("other.log");
    std::fs::write(&other, "nothing here\n").unwrap_or_else(|e| panic!("{e}"));
    let out = bin()
        .args(["steplog", other.to_str().unwrap_or_default()])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a Megatron-style training log"));
}

#[test]
fn nccl_inspector_logs_name_the_last_arriver() {
    let dir = fixtures("nccl_inspector");
    let out = bin().args(["nccl-inspector", "--json", &dir]).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["version"], 1);
    assert_eq!(v["comms"].as_array().map(Vec::len), Some(3));
    assert_eq!(v["comms"][0]["last_arriver"]["rank"], 2, "the costliest communicator first");
    assert_eq!(v["diagnostics"].as_array().map(Vec::len), Some(1), "the cut line");
    // Text for a person; a file that is not an Inspector log is skipped with a word, exit 1.
    let out = bin().args(["nccl-inspector", &dir]).output().unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("rank 2 on node-b arrives last at 18 of the 24"), "{text}");
    let trace = fixtures("analysis/two_rank_known");
    let out = bin().args(["nccl-inspector", &trace]).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an NCCL Inspector log"));
}

#[test]
fn a_step_log_places_the_profiled_steps_of_real_traces_in_its_run() {
    // A log of the run around the zoo's repeat runs: 220 ms a step (as `baseline_b` measured),
    // iterations 1,010–1,100 at 550 ms (as `host_stall_b`, rank 2 sleeping 400 ms a step).
    let log: String = (1..=200)
        .map(|k| {
            let it = k * 10;
            let ms = if (1010..=1100).contains(&it) { 550.0 } else { 220.0 + (k % 5) as f64 };
            format!(" iteration {it:>8}/    2000 | elapsed time per iteration (ms): {ms:.1} |\n")
        })
        .collect();
    let path = scratch("steplog-profile").join("train.log");
    std::fs::write(&path, log).unwrap_or_else(|e| panic!("{e}"));
    let zoo = |run: &str| format!("{}/../../tests/zoo/repeat/{run}", env!("CARGO_MANIFEST_DIR"));
    let said = |run: &str| {
        let out = bin()
            .args(["steplog", path.to_str().unwrap_or_default(), "--traces", &zoo(run)])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let stall = said("host_stall_b");
    assert!(stall.contains("caught a slow phase") && stall.contains("iterations 1010–1100"), "{stall}");
    let usual = said("baseline_b");
    assert!(usual.contains("a usual step; the log also has slow phases"), "{usual}");
}

#[test]
fn nccl_ras_says_what_is_wrong_first_and_exits_by_it() {
    let run = |args: &[&str]| bin().args(args).output().unwrap_or_else(|e| panic!("{e}"));
    let out = run(&["nccl-ras", &fixtures("nccl_ras/dead_rank.json")]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let second = text.lines().nth(1).unwrap_or_default();
    assert!(
        second.starts_with(
            "- communicator 0x3c0ffee000000a01 (4 ranks, 1 reported): rank 1 on 10.0.0.2 GPU 1 is dead"
        ),
        "{text}"
    );
    let out = run(&["nccl-ras", "--json", &fixtures("nccl_ras/dead.txt")]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((v["version"].as_u64(), v["format"].as_str()), (Some(1), Some("text")));
    assert_eq!(v["comms"][0]["issues"][0]["problem"], "dead");
    let out = run(&["nccl-ras", &fixtures("nccl_ras/healthy.txt")]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("every communicator is complete: 9 communicators"));
    // Not a report: exit 2, the file, the form and the byte offset named.
    let out = run(&["nccl-ras", &fixtures("nccl_inspector/expected.json")]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("expected.json: not an NCCL RAS status (json or text) at byte 0"), "{err}");
}

#[test]
fn nccl_inspector_joins_the_traces_of_the_synth_job() {
    let traces = scratch("inspector-join");
    let t = traces.to_str().unwrap_or_default();
    let out = bin()
        .args(["synth", "--scenario", "baseline", "--steps", "2", "--out", t])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let logs = fixtures("nccl_inspector_join");
    let out = bin()
        .args(["nccl-inspector", "--json", &logs, "--traces", t])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let want: serde_json::Value = serde_json::from_slice(
        &std::fs::read(format!("{logs}/expected.json")).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["join"]["matched"], want["matched"]);
    assert_eq!(v["join"]["pairings"][0]["offset"], want["pairings"][0]["offset"]);
    assert_eq!(v["join"]["times"]["disagree"], 1);
    let out = bin().args(["nccl-inspector", &logs, "--traces", t]).output().unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("18 of the traces' 18 collectives matched"), "{text}");
    assert!(text.contains("↔ process group 0: by sequence number, sn = Seq − 1"), "{text}");
}

/// `rankscope metrics`: the throttled case of the cluster-metrics fixtures beside the synthetic
/// job they were written for (docs/cluster-metrics.md): the dmon table placed by the flags, the
/// throttled GPU and the XID found on their ranks; a file that is not metrics exits 1 naming it.
#[test]
fn metrics_joins_dcgm_exports_with_the_traces() {
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("metrics");
    let _ = std::fs::remove_dir_all(&d);
    let job = d.join("job");
    let s = bin()
        .args(["synth", "--layout", "tp=8,pp=1,dp=2", "--out", job.to_str().unwrap_or_default()])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.status.code(), Some(0), "{}", String::from_utf8_lossy(&s.stderr));
    let _ = std::fs::remove_file(job.join("manifest.json"));
    let case = fixtures("cluster_metrics/throttled");
    let out = bin()
        .args([
            "metrics",
            "--json",
            "--dmon-host",
            "node01",
            "--dmon-start",
            "1720912092.0",
            "--dmon-delay-ms",
            "250",
        ])
        .args([
            format!("{case}/dcgm_node00.prom"),
            format!("{case}/dmon_node01.txt"),
            format!("{case}/reasons_node01.csv"),
        ])
        .args(["--traces", job.to_str().unwrap_or_default()])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["schema"], "rankscope.metrics");
    let formats: Vec<&str> =
        v["files"].as_array().into_iter().flatten().filter_map(|f| f["format"].as_str()).collect();
    assert_eq!(formats, ["prometheus_text", "dcgmi_dmon", "prometheus_csv"]);
    let found: Vec<(String, u64)> = v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| (f["id"].as_str().unwrap_or_default().to_string(), f["ranks"][0].as_u64().unwrap_or(99)))
        .collect();
    assert_eq!(found, [("throttled_gpu".to_string(), 11), ("xid_error".to_string(), 5)]);
    let other = d.join("notes.txt");
    std::fs::write(&other, "just words\n").unwrap_or_else(|e| panic!("{e}"));
    let out = bin()
        .args(["metrics", other.to_str().unwrap_or_default()])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("notes.txt: not a cluster metrics file (no known format) at byte 0"), "{err}");
}

/// The exports keep every event's source args by default (`args.rankscope` beside them) and
/// leave them out with `--no-source-args`, in the merged trace and the Perfetto archive alike.
#[test]
fn exports_keep_the_source_args_unless_told_not_to() {
    let dir = format!("{}/../../tests/zoo/baseline", env!("CARGO_MANIFEST_DIR"));
    let out = scratch("export-args");
    let keys = |flags: &[&str]| -> std::collections::BTreeSet<String> {
        let merged = out.join("merged.json");
        let tar = out.join("job.tar");
        let (m, t) = (merged.display().to_string(), tar.display().to_string());
        let mut args = vec!["analyze", "--merged-trace", &m, "--perfetto", &t];
        args.extend_from_slice(flags);
        args.push(&dir);
        let r = bin().args(&args).output().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.status.code(), Some(0), "{}", String::from_utf8_lossy(&r.stderr));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&merged).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
        let tar_bytes = std::fs::read(&tar).unwrap_or_default();
        let mut keys = std::collections::BTreeSet::new();
        for e in v["traceEvents"].as_array().into_iter().flatten().filter(|e| e["ph"] == "X") {
            assert!(e["args"]["rankscope"]["class"].is_string(), "{e}");
            keys.extend(e["args"].as_object().into_iter().flat_map(|o| o.keys().cloned()));
        }
        // The archive's members carry the same args text (a plain tar: searched as bytes).
        let has = |k: &str| tar_bytes.windows(k.len()).any(|w| w == k.as_bytes());
        assert_eq!(has("\"Input Dims\""), keys.contains("Input Dims"), "archive and merged trace agree");
        assert!(has("rankscope · steps"), "the archive's steps track");
        keys
    };
    let kept = keys(&[]);
    for k in ["Input Dims", "Input type", "Sequence number", "External id", "rankscope"] {
        assert!(kept.contains(k), "{k} kept: {kept:?}");
    }
    let lean = keys(&["--no-source-args"]);
    assert!(
        !lean.contains("Input Dims") && lean.contains("External id") && lean.contains("rankscope"),
        "{lean:?}"
    );
}
