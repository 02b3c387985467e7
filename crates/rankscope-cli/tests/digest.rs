//! The job digest as a user makes and reads it: `rankscope part` per file, `rankscope combine
//! --digest`, then `rankscope analyze` on the digest alone gives what `combine` printed and what
//! `analyze` prints for the traces, byte for byte.

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

#[test]
fn a_digest_is_the_job_combine_printed_and_analyze_reads_it() {
    let dir = scratch("digest-job");
    let job = dir.join("job");
    let (code, _, err) = run(&["synth", "--out", &s(&job), "--ranks", "8", "--steps", "3"]);
    assert_eq!(code, Some(0), "{err}");
    // nccl-tests output beside the traces: the digest keeps it whole (and the fabric join).
    let tests = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../rankscope-core/tests/fixtures/nccl/tests_2.17_exact-alpha-beta-model.txt"
    );
    std::fs::copy(tests, job.join("nccl-tests.txt")).unwrap_or_else(|e| panic!("{e}"));
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
        assert_eq!(code, Some(0), "{err}");
        parts.push(s(&p));
    }
    let digest = s(&dir.join("job.rsdigest"));
    let mut args = vec!["combine", "--json", "--digest", &digest];
    args.extend(parts.iter().map(String::as_str));
    let (code, combined, err) = run(&args);
    assert_eq!(code, Some(0), "{err}");
    let (code, from_digest, err) = run(&["analyze", "--json", &digest]);
    assert_eq!(code, Some(0), "{err}");
    assert!(from_digest == combined, "analyze of the digest differs from what combine printed");
    let (code, from_traces, err) = run(&["analyze", "--json", &s(&job)]);
    assert_eq!(code, Some(0), "{err}");
    assert!(from_digest == from_traces, "analyze of the digest differs from analyze of the traces");
    let v: serde_json::Value = serde_json::from_slice(&from_digest).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["ranks"].as_array().map(Vec::len), Some(8));
    assert!(v["fabric"].as_array().is_some_and(|f| !f.is_empty()), "the nccl-tests join is in the digest");
    // Markdown and CSV of the digest too.
    let (_, md, _) = run(&["analyze", "--md", &digest]);
    let (_, md_t, _) = run(&["analyze", "--md", &s(&job)]);
    assert!(md == md_t);

    // A digest is a whole job: with other inputs it is refused, with the reason.
    let (code, _, err) = run(&["analyze", "--json", &digest, &s(&inputs[0])]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("a job digest is a whole job"), "{err}");
    // A damaged digest names itself and the byte.
    let mut bytes = std::fs::read(&digest).unwrap_or_else(|e| panic!("{e}"));
    bytes.truncate(bytes.len() / 2);
    let cut = dir.join("cut.rsdigest");
    std::fs::write(&cut, &bytes).unwrap_or_else(|e| panic!("{e}"));
    let (code, _, err) = run(&["analyze", "--json", &s(&cut)]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cut.rsdigest: damaged rankscope job digest (at file byte "), "{err}");
}

/// One damaged part costs that part: `combine` says it and combines the others (exit 1), as
/// `analyze` keeps the ranks it can read (issue 39).
#[test]
fn combine_keeps_the_good_parts_beside_a_damaged_one() {
    let dir = scratch("combine-damaged-part");
    let job = dir.join("job");
    let (code, _, err) = run(&["synth", "--out", &s(&job), "--ranks", "3", "--steps", "2"]);
    assert_eq!(code, Some(0), "{err}");
    let mut parts = Vec::new();
    for r in 0..3 {
        let p = dir.join(format!("r{r}.part"));
        let (code, _, err) = run(&["part", &s(&job.join(format!("rank{r}.pt.trace.json"))), "-o", &s(&p)]);
        assert_eq!(code, Some(0), "{err}");
        parts.push(p);
    }
    let bytes = std::fs::read(&parts[1]).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&parts[1], &bytes[..bytes.len() / 2]).unwrap_or_else(|e| panic!("{e}"));
    let (code, out, err) = run(&["combine", "--json", &s(&parts[0]), &s(&parts[1]), &s(&parts[2])]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("r1.part: damaged rankscope part"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{e}"));
    let ranks: Vec<i64> = v["ranks"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["rank"].as_i64()).collect())
        .unwrap_or_default();
    assert_eq!(ranks, vec![0, 2]);
}
