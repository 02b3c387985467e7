//! The layers of the core (ARCHITECTURE.md, "Invariants"): no import circle between its
//! modules; the analysis measures and never reaches into the judging layer (`diagnose`); the
//! vocabulary of findings (`finding`) and the model sit below both; the digest formats sit below
//! the job API. A doc comment may name a layer above; code may not.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

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
fn compare_reads_the_figures_and_findings_never_the_judging() {
    // Two runs are compared on what each analysis says (findings included), never by judging
    // again: the comparison has its own rules (`compare::verdict`).
    let bad = reaches("compare", &["diagnose", "job", "session"]);
    assert!(bad.is_empty(), "compare reaches above the analysis:\n{}", bad.join("\n"));
}

#[test]
fn the_vocabulary_and_the_model_sit_below_analyze_and_diagnose() {
    for dir in ["finding", "model", "words.rs"] {
        let bad = reaches(dir, &["analyze", "diagnose"]);
        assert!(bad.is_empty(), "{dir} reaches a layer above it:\n{}", bad.join("\n"));
    }
}

/// The code of a file without its comments (`//` to the end of a line; string literals that
/// hold `//` are rare in this crate and only hide a path, never add one).
fn code_of(f: &Path) -> String {
    let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    text.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// The top-level modules of the crate (a file or a folder under `src/`, `lib.rs` aside).
fn top_modules() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(src())
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            if e.path().is_dir() {
                Some(name)
            } else {
                name.strip_suffix(".rs").filter(|n| *n != "lib").map(str::to_string)
            }
        })
        .collect();
    out.sort();
    out
}

/// The identifiers that follow `prefix` in `code`: `crate::a` gives `a`, `crate::{a, b::c}`
/// gives `a` and `b`.
fn named_after(code: &str, prefix: &str) -> Vec<String> {
    let ident = |s: &str| -> String { s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(k) = rest.find(prefix) {
        // `xcrate::` is not `crate::`.
        let before = rest[..k].chars().last();
        rest = &rest[k + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // The group's items at its own depth.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(ident(item.trim()));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            out.push(ident(item.trim()));
        } else {
            out.push(ident(rest));
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Which top-level modules each top-level module names in code (`crate::x`, or `super::x` from
/// a file directly under `src/` or a folder's `mod.rs`).
fn module_graph() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let tops = top_modules();
    let mut graph = std::collections::BTreeMap::new();
    for m in &tops {
        let dir = src().join(m);
        let path = if dir.is_dir() { dir } else { src().join(format!("{m}.rs")) };
        let mut deps = std::collections::BTreeSet::new();
        for f in rust_files(&path) {
            let code = code_of(&f);
            let mut named = named_after(&code, "crate::");
            // `super::` from `src/x.rs` or `src/x/mod.rs` is the crate root.
            let rel = f.strip_prefix(src()).unwrap_or(&f);
            let depth = rel.components().count();
            if depth == 1 || (depth == 2 && rel.ends_with("mod.rs")) {
                named.extend(named_after(&code, "super::"));
            }
            deps.extend(named.into_iter().filter(|n| n != m && tops.contains(n)));
        }
        graph.insert(m.clone(), deps);
    }
    graph
}

/// A path from `from` back to `from` through `graph`, if there is one.
fn circle_through(
    graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
    from: &str,
) -> Option<Vec<String>> {
    let mut stack = vec![vec![from.to_string()]];
    let mut seen = std::collections::BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last().cloned().unwrap_or_default();
        for next in graph.get(&last).into_iter().flatten() {
            if next == from {
                let mut p = path.clone();
                p.push(next.clone());
                return Some(p);
            }
            if seen.insert(next.clone()) {
                let mut p = path.clone();
                p.push(next.clone());
                stack.push(p);
            }
        }
    }
    None
}

#[test]
fn no_import_circle_between_the_modules_of_the_core() {
    let graph = module_graph();
    assert!(graph.len() > 10 && graph["job"].contains("analyze"), "the graph is read: {graph:?}");
    let circles: Vec<String> =
        graph.keys().filter_map(|m| circle_through(&graph, m)).map(|c| c.join(" → ")).collect();
    assert!(circles.is_empty(), "import circles:\n{}", circles.join("\n"));
}

#[test]
fn the_digest_formats_sit_below_the_job_api() {
    // From job/digest/, the job module is reached only for its input vocabulary (`read`) and
    // the digest module itself.
    let mut bad = Vec::new();
    for f in rust_files(&src().join("job/digest")) {
        let code = code_of(&f);
        for n in named_after(&code, "crate::job::").into_iter().chain(named_after(&code, "super::super::")) {
            if n != "read" && n != "digest" {
                bad.push(format!("{}: names job::{n}", f.display()));
            }
        }
        for layer in ["session", "diagnose"] {
            if code.contains(&format!("crate::{layer}")) {
                bad.push(format!("{}: names {layer}", f.display()));
            }
        }
    }
    assert!(bad.is_empty(), "the digest formats reach the job API:\n{}", bad.join("\n"));
}

#[test]
fn paths_are_read_from_groups_and_circles_are_found() {
    assert_eq!(named_after("use crate::{a::b, c, d::{e, f}};", "crate::"), ["a", "c", "d"]);
    assert_eq!(named_after("xcrate::a; crate::b::c", "crate::"), ["b"]);
    let g: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = [
        ("a".to_string(), ["b".to_string()].into()),
        ("b".to_string(), ["c".to_string()].into()),
        ("c".to_string(), ["a".to_string()].into()),
        ("d".to_string(), ["a".to_string()].into()),
    ]
    .into();
    assert_eq!(circle_through(&g, "a"), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    assert_eq!(circle_through(&g, "d"), None);
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

#[test]
fn the_core_is_kept_off_the_file_system_clocks_threads_and_processes() {
    // What wasm32-unknown-unknown lacks is disallowed in the core by its clippy.toml, which
    // `cargo clippy` reads for the host and for wasm32 (`./x lint`): the shells do these.
    let conf = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/clippy.toml"))
        .unwrap_or_else(|e| panic!("the core's clippy.toml: {e}"));
    for path in [
        "std::fs::read",
        "std::fs::write",
        "std::fs::read_dir",
        "std::fs::File",
        "std::time::Instant::now",
        "std::time::SystemTime::now",
        "std::thread::spawn",
        "std::thread::scope",
        "std::process::Command",
        "std::process::exit",
        "std::env::var",
        "std::env::args",
    ] {
        assert!(conf.contains(&format!("path = \"{path}\"")), "clippy.toml does not disallow {path}");
    }
}
