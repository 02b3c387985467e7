//! One file on every core, as a user runs it: `rankscope analyze --json` on a single trace gives
//! the same bytes parsed serially (`RANKSCOPE_PARSE_THREADS=1`), split at seams (plain JSON,
//! read at offsets) and cut from the inflating stream (gzip). The thresholds are lowered so a
//! small synth rank takes each path; `parse::split`'s own tests check the tables for random cuts.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
    d
}

fn analyze(file: &Path, env: &[(&str, &str)]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_rankscope"))
        .args(["analyze", "--json"])
        .arg(file)
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn one_file_on_every_core_gives_the_serial_answer() {
    let dir = scratch("split-one-file");
    let out = Command::new(env!("CARGO_BIN_EXE_rankscope"))
        .args(["synth", "--ranks", "2", "--steps", "6", "--out"])
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let plain = dir.join("rank0.pt.trace.json");
    let text = std::fs::read(&plain).unwrap_or_else(|e| panic!("{e}"));
    assert!(text.len() > 3 << 20, "the cut needs a head, pieces and a kept tail: {} bytes", text.len());
    let gz = dir.join("rank0.pt.trace.json.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&text).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&gz, e.finish().unwrap_or_else(|e| panic!("{e}"))).unwrap_or_else(|e| panic!("{e}"));

    let serial = analyze(&plain, &[("RANKSCOPE_PARSE_THREADS", "1")]);
    for threads in ["2", "3"] {
        let split =
            analyze(&plain, &[("RANKSCOPE_PARSE_THREADS", threads), ("RANKSCOPE_SPLIT_MIN_BYTES", "1")]);
        assert!(split == serial, "plain JSON split {threads} ways differs from the serial answer");
    }
    // Many more pieces than threads: merged in file order as they are parsed, whatever order
    // the threads finish them in.
    for block in ["65536", "262144"] {
        let split = analyze(
            &plain,
            &[
                ("RANKSCOPE_PARSE_THREADS", "2"),
                ("RANKSCOPE_SPLIT_MIN_BYTES", "1"),
                ("RANKSCOPE_CUT_BLOCK_BYTES", block),
            ],
        );
        assert!(split == serial, "plain JSON split into {block}-byte pieces differs from the serial answer");
    }
    // gzip: the report says the input was gzip, so it is compared with gzip read serially.
    let serial_gz = analyze(&gz, &[("RANKSCOPE_PARSE_THREADS", "1")]);
    for block in ["262144", "1048576"] {
        let cut = analyze(
            &gz,
            &[
                ("RANKSCOPE_PARSE_THREADS", "2"),
                ("RANKSCOPE_SPLIT_MIN_BYTES", "1"),
                ("RANKSCOPE_CUT_BLOCK_BYTES", block),
            ],
        );
        assert!(cut == serial_gz, "gzip cut into {block}-byte pieces differs from the serial answer");
    }
}
