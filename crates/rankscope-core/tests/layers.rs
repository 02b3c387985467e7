//! The layers of the core (ARCHITECTURE.md, "Invariants"): the analysis measures and never
//! reaches into the judging layer (`diagnose`); the vocabulary of findings (`finding`) and the
//! model sit below both. A doc comment may name a layer above; code may not.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))
}

/// Every `.rs` file under `p` (or `p` itself).
fn rust_files(p: &Path) -> Vec<PathBuf> {
    if p.is_file() {
        return vec![p.to_path_buf()];
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).flatten() {
        let q = e.path();
        if q.is_dir() {
            out.extend(rust_files(&q));
        } else if q.extension().is_some_and(|x| x == "rs") {
            out.push(q);
        }
    }
    out.sort();
    out
}

/// `file:line: text` for every line of code under `dir` (comments left out) that names one of
/// the `layers` as a path (`crate::diagnose`, `diagnose::`, `super::diagnose`).
fn reaches(dir: &str, layers: &[&str]) -> Vec<String> {
    reaches_in(&src().join(dir), layers)
}

fn reaches_in(dir: &Path, layers: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for f in rust_files(dir) {
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for (k, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for l in layers {
                if code.contains(&format!("crate::{l}")) || code.contains(&format!("{l}::")) {
                    out.push(format!("{}:{}: {}", f.display(), k + 1, line.trim()));
                }
            }
        }
    }
    out
}

#[test]
fn analyze_never_imports_diagnose() {
    let bad = reaches("analyze", &["diagnose"]);
    assert!(bad.is_empty(), "analyze/ reaches the judging layer:\n{}", bad.join("\n"));
}

#[test]
fn the_vocabulary_and_the_model_sit_below_analyze_and_diagnose() {
    for dir in ["finding", "model", "words.rs"] {
        let bad = reaches(dir, &["analyze", "diagnose"]);
        assert!(bad.is_empty(), "{dir} reaches a layer above it:\n{}", bad.join("\n"));
    }
}

#[test]
fn a_line_that_names_the_layer_is_found() {
    let dir = std::env::temp_dir().join(format!("rankscope-layers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let f = dir.join("x.rs");
    std::fs::write(&f, "//! [`crate::diagnose`] words it\nuse crate::diagnose::Ctx;\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let found = reaches_in(&dir, &["diagnose"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].ends_with(":2: use crate::diagnose::Ctx;"), "{found:?}");
}
