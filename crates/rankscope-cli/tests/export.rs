//! `rankscope export`: one file per table, in either format, with the rows `analyze --json` and
//! `inspect --json` count; exit codes as `analyze`'s. (tests/py/test_export.py reads the files
//! with pyarrow and compares their values.)
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rankscope"))
}

fn zoo(name: &str) -> String {
    format!("{}/../../tests/zoo/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rankscope-export-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = bin().args(args).output().unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// `path\tN rows` lines: rows by file name.
fn printed(stdout: &[u8]) -> BTreeMap<String, usize> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| {
            let (p, n) = l.split_once('\t')?;
            let name = p.rsplit(['/', '\\']).next()?.to_string();
            Some((name, n.strip_suffix(" rows")?.parse().ok()?))
        })
        .collect()
}

fn len(v: &serde_json::Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}

#[test]
fn every_table_in_both_formats_with_the_analysis_row_counts() {
    let job = zoo("fsdp_straggler");
    let a = json(&["analyze", "--json", &job]);
    let inspect = json(&["inspect", "--json", &job]);
    let steps: usize = a["steps"].as_array().into_iter().flatten().map(|s| len(&s["per_rank"])).sum();
    let groups: usize =
        a["layout"]["groups"].as_array().into_iter().flatten().map(|g| len(&g["ranks"])).sum();
    let ops = len(&a["operators"]["rows"]) * len(&a["operators"]["steps"]);
    let events: u64 =
        inspect["files"].as_array().into_iter().flatten().filter_map(|f| f["events"]["rows"].as_u64()).sum();
    let instances: u64 =
        a["collectives"].as_array().into_iter().flatten().filter_map(|c| c["instances"].as_u64()).sum();
    assert!(steps > 0 && events > 0 && instances > 0 && ops > 0 && groups > 0);
    for (format, magic_head, magic_tail) in
        [("parquet", &b"PAR1"[..], &b"PAR1"[..]), ("arrow", &b"ARROW1\0\0"[..], &b"ARROW1"[..])]
    {
        let dir = scratch(format);
        let out = bin()
            .args(["export", &job, "--format", format, "--out"])
            .arg(&dir)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let rows = printed(&out.stdout);
        let want = [
            ("steps", steps),
            ("collective_stats", len(&a["collectives"])),
            ("findings", len(&a["findings"])),
            ("groups", groups),
            ("operators", ops),
            ("events", events as usize),
            // Every member of every matched collective: this job matches all its collectives.
            ("collectives", instances as usize),
        ];
        for (t, n) in want {
            let file = format!("{t}.{format}");
            assert_eq!(rows.get(&file), Some(&n), "{file}: {rows:?}");
            let bytes = std::fs::read(dir.join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert!(bytes.starts_with(magic_head) && bytes.ends_with(magic_tail), "{file}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn chosen_tables_only_and_exit_codes() {
    let job = zoo("fsdp_straggler");
    let dir = scratch("some");
    let out = bin()
        .args(["export", &job, "--format", "arrow", "--tables", "steps,findings", "--out"])
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["findings.arrow", "steps.arrow"]);

    // An unknown table is a usage error (2), naming the tables there are.
    let bad = bin()
        .args(["export", &job, "--format", "arrow", "--tables", "stepz", "--out"])
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("collective_stats"));

    // A file that is not a trace beside the traces: the tables are written, exit 1.
    let junk = dir.join("junk.json");
    std::fs::write(&junk, b"{ not a trace").unwrap_or_else(|e| panic!("{e}"));
    let t = dir.join("with_junk");
    let out = bin()
        .args(["export", &format!("{job}/rank0.pt.trace.json.gz"), &format!("{job}/rank1.pt.trace.json.gz")])
        .arg(&junk)
        .args(["--format", "parquet", "--tables", "steps", "--out"])
        .arg(&t)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(t.join("steps.parquet").is_file());

    // Nothing readable: no tables, exit 2.
    let none = bin()
        .arg("export")
        .arg(&junk)
        .args(["--format", "parquet", "--out"])
        .arg(dir.join("none"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(none.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_job_digest_gives_the_tables_of_its_analysis() {
    let job = zoo("fsdp_straggler");
    let dir = scratch("digest");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let mut parts = Vec::new();
    for r in 0..3 {
        let p = dir.join(format!("r{r}.part"));
        let out = bin()
            .args(["part", &format!("{job}/rank{r}.pt.trace.json.gz"), "--out"])
            .arg(&p)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        parts.push(p);
    }
    let digest = dir.join("job.rsdigest");
    let out = bin()
        .arg("combine")
        .args(&parts)
        .arg("--digest")
        .arg(&digest)
        .arg("--json")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let a = json(&["analyze", "--json", &digest.display().to_string()]);
    let out = bin()
        .arg("export")
        .arg(&digest)
        .args(["--format", "parquet", "--out"])
        .arg(dir.join("all"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = printed(&out.stdout);
    // No events in a digest: no events nor collectives file, and a note says why.
    assert!(!rows.contains_key("events.parquet") && !rows.contains_key("collectives.parquet"), "{rows:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("a job digest holds no events"));
    assert_eq!(rows.get("findings.parquet"), Some(&len(&a["findings"])));
    assert!(!dir.join("all").join("events.parquet").exists());
    // Asked for by name: an error (2).
    let out = bin()
        .arg("export")
        .arg(&digest)
        .args(["--format", "arrow", "--tables", "events", "--out"])
        .arg(dir.join("ev"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}
