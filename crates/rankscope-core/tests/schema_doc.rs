//! docs/analysis-schema.md lists every finding id, every symptom id and every threshold with its
//! default: these tests read its tables and compare them with the code, naming what is missing
//! or different on either side.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use rankscope_core::finding::{FindingId, IdKind, Thresholds};

fn doc() -> String {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/analysis-schema.md");
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// The rows of the first table after `heading`: each row's cells, trimmed, header and rule left
/// out.
fn table(doc: &str, heading: &str) -> Vec<Vec<String>> {
    let at = doc.find(heading).unwrap_or_else(|| panic!("docs/analysis-schema.md has no `{heading}`"));
    let rows: Vec<&str> =
        doc[at..].lines().skip_while(|l| !l.starts_with('|')).take_while(|l| l.starts_with('|')).collect();
    assert!(rows.len() > 2, "`{heading}`: no table");
    rows[2..]
        .iter()
        .map(|r| r.trim().trim_matches('|').split('|').map(|c| c.trim().to_string()).collect())
        .collect()
}

/// `` `name` `` → `name`.
fn code(cell: &str) -> String {
    cell.trim().trim_matches('`').to_string()
}

/// Compares two sets of names; `Err` names what only one side has.
fn same(what: &str, doc: &[String], code: &[String]) -> Result<(), String> {
    let only_doc: Vec<&String> = doc.iter().filter(|d| !code.contains(d)).collect();
    let only_code: Vec<&String> = code.iter().filter(|c| !doc.contains(c)).collect();
    if only_doc.is_empty() && only_code.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{what}: the doc and the code differ: missing from the doc {only_code:?}; in the doc but not in the code {only_doc:?}"
    ))
}

#[test]
fn the_finding_ids_of_the_doc_are_the_codes() {
    let rows = table(&doc(), "### Finding ids");
    let listed: Vec<String> = rows.iter().map(|r| code(&r[0])).collect();
    let causes: Vec<String> = FindingId::causes().map(|f| f.as_str().to_string()).collect();
    if let Err(e) = same("finding ids (docs/analysis-schema.md)", &listed, &causes) {
        panic!("{e}");
    }
    // In the code's order too: the doc reads as the order of reasoning.
    assert_eq!(listed, causes, "finding ids: listed in another order than `FindingId`'s");
}

#[test]
fn the_symptom_ids_of_the_doc_are_the_codes() {
    let d = doc();
    let at = d.find("Symptoms (only in `symptoms[]`").unwrap_or_else(|| panic!("no symptoms paragraph"));
    let para: &str = d[at..].split("\n\n").next().unwrap_or_default();
    let listed: Vec<String> =
        para.split('`').skip(1).step_by(2).map(str::to_string).filter(|s| s != "symptoms[]").collect();
    let symptoms: Vec<String> = FindingId::ALL
        .iter()
        .filter(|f| f.kind() == IdKind::Symptom)
        .map(|f| f.as_str().to_string())
        .collect();
    if let Err(e) = same("symptom ids (docs/analysis-schema.md)", &listed, &symptoms) {
        panic!("{e}");
    }
}

/// `0.10` → 0.1, `4 MiB` → 4194304.
fn value(cell: &str) -> Option<f64> {
    let mut it = cell.split_whitespace();
    let n: f64 = it.next()?.replace(',', "").parse().ok()?;
    let unit = match it.next() {
        None => 1.0,
        Some("KiB") => 1024.0,
        Some("MiB") => 1024.0 * 1024.0,
        Some("GiB") => 1024.0 * 1024.0 * 1024.0,
        Some(_) => return None,
    };
    Some(n * unit)
}

#[test]
fn the_thresholds_of_the_doc_are_the_codes_with_their_defaults() {
    let rows = table(&doc(), "### Thresholds");
    let listed: Vec<String> = rows.iter().map(|r| code(&r[0])).collect();
    let th = Thresholds::default();
    let entries = th.entries();
    let names: Vec<String> = entries.iter().map(|e| e.0.to_string()).collect();
    if let Err(e) = same("thresholds (docs/analysis-schema.md)", &listed, &names) {
        panic!("{e}");
    }
    let mut wrong = Vec::new();
    for r in &rows {
        let name = code(&r[0]);
        let cell = r.get(1).cloned().unwrap_or_default();
        let want = entries.iter().find(|e| e.0 == name).map(|e| e.1);
        match (value(&cell), want) {
            (Some(d), Some(c)) if (d - c).abs() <= 1e-12 * c.abs().max(1.0) => {}
            (d, c) => wrong.push(format!("`{name}`: the doc says {cell:?} ({d:?}), the code {c:?}")),
        }
    }
    assert!(wrong.is_empty(), "threshold defaults differ:\n{}", wrong.join("\n"));
    // Every name the doc gives is one `--threshold` accepts.
    for n in &listed {
        assert!(Thresholds::default().set(n, 1.0).is_ok(), "`{n}` is not settable");
    }
}

#[test]
fn the_tables_are_read_as_tables() {
    let doc = "### T\nintro\n\n| a | b |\n|---|---|\n| `x` | 0.5 |\n| `y` | 4 MiB |\n\nafter | not a row\n";
    let rows = table(doc, "### T");
    assert_eq!(rows, [vec!["`x`".to_string(), "0.5".into()], vec!["`y`".into(), "4 MiB".into()]]);
    assert_eq!(value("4 MiB"), Some(4194304.0));
    assert_eq!(value("0.10"), Some(0.1));
    assert_eq!(value("many"), None);
    assert!(same("x", &["a".into()], &["b".into()])
        .is_err_and(|e| e.contains("[\"b\"]") && e.contains("[\"a\"]")));
}

/// docs/nccl.md lists every finding id of the NCCL reports in its findings tables (first column).
#[test]
fn the_nccl_finding_ids_of_docs_nccl_are_the_codes() {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/nccl.md");
    let doc = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let listed: Vec<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|x| x.0.to_string()))
        .filter(|id| id.starts_with("log.") || id.starts_with("tests."))
        .collect();
    let ids: Vec<String> = FindingId::ALL
        .iter()
        .filter(|f| matches!(f.kind(), IdKind::NcclLog | IdKind::NcclTests))
        .map(|f| f.as_str().to_string())
        .collect();
    if let Err(e) = same("NCCL finding ids (docs/nccl.md)", &listed, &ids) {
        panic!("{e}");
    }
}

#[test]
fn the_beside_finding_ids_of_the_doc_are_the_codes() {
    let rows = table(&doc(), "### Findings from the evidence beside the traces");
    let listed: Vec<String> = rows.iter().map(|r| code(&r[0])).collect();
    let ids: Vec<String> = FindingId::ALL
        .iter()
        .filter(|f| f.kind() == IdKind::Beside)
        .map(|f| f.as_str().to_string())
        .collect();
    if let Err(e) = same("beside finding ids (docs/analysis-schema.md)", &listed, &ids) {
        panic!("{e}");
    }
}
