//! What rankscope understood of the inputs, said before any finding (the Markdown note's first
//! section): per file, the share of its device and host time the classification understood and
//! what it did not ([`crate::normalize::coverage`]), and the CUDA / HIP graphs each rank captured
//! or replayed ([`crate::analyze::reading`]). When too little was understood to judge, the
//! note says so instead of "no finding".

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use crate::analyze::{Analysis, RankCoverage};
use crate::escape::md_code;
use crate::model::Class;
use crate::words::{dur, pct};

/// Longest name shown (C++ kernel names run to kilobytes).
const NAME_CHARS: usize = 90;

fn short(name: &str) -> String {
    if name.chars().count() <= NAME_CHARS {
        return name.to_string();
    }
    name.chars().take(NAME_CHARS).collect::<String>() + "…"
}

/// The steps in which some rank captures or instantiates a CUDA / HIP graph: set-up, not judged
/// ([`crate::analyze::reading`]).
pub fn capture_steps(a: &Analysis) -> BTreeSet<u32> {
    a.graphs.iter().flat_map(|g| g.graphs.capture_steps.iter().copied()).collect()
}

/// Whether every step of the job is a capture step ([`capture_steps`]).
pub fn only_capture(a: &Analysis) -> bool {
    let c = capture_steps(a);
    !c.is_empty() && a.steps.iter().all(|s| c.contains(&s.step))
}

/// Graph replays per step of `rank` in `steps`, when it replays graphs at all.
pub fn replays_per_step(a: &Analysis, rank: u32) -> Option<f64> {
    let g = &a.graphs.iter().find(|g| g.rank == rank)?.graphs;
    (g.replays > 0).then(|| g.replays as f64 / g.replay_steps.len().max(1) as f64)
}

/// One rank's graphs, in words.
fn graphs_line(g: &crate::analyze::reading::Graphs) -> String {
    let mut parts = Vec::new();
    if g.captures + g.instantiations > 0 {
        parts.push(format!(
            "graph capture: {} stream capture(s) ({} of host time, {} launch(es) recorded into the graph, not run), {} instantiation(s) ({}); step(s) {} are capture, not judged",
            g.captures,
            dur(g.capture_ns as f64),
            g.captured_launches,
            g.instantiations,
            dur(g.instantiate_ns as f64),
            super::markdown::list_of(&g.capture_steps)
        ));
    }
    if g.replays > 0 {
        parts.push(format!(
            "graph replay: {} launch(es) running {} kernel(s) ({} of device time)",
            g.replays,
            g.replay_kernels,
            dur(g.replay_device_ns as f64)
        ));
    }
    parts.join("; ")
}

/// The ranks too little of which was understood to judge ([`crate::normalize::coverage::Coverage::too_little`]).
pub fn too_little(a: &Analysis) -> Vec<u32> {
    a.coverage.iter().filter(|c| c.coverage.too_little()).map(|c| c.rank).collect()
}

/// One rank's line: device and host shares, the classes and libraries, what was not understood.
fn line(c: &RankCoverage) -> String {
    let v = &c.coverage;
    let mut parts = Vec::new();
    match v.device_share() {
        Some(share) => {
            let classes: Vec<String> = v
                .device_by_class
                .iter()
                .filter(|x| x.ns > 0)
                .map(|x| format!("{} {}", x.class.name(), dur(x.ns as f64)))
                .collect();
            let fams: Vec<String> = v
                .families
                .iter()
                .filter(|f| f.class == Class::Communication && f.ns > 0)
                .map(|f| format!("{} {}", f.family, dur(f.ns as f64)))
                .collect();
            parts.push(format!(
                "device {} classified {} ({}{})",
                dur(v.device_ns as f64),
                pct(share),
                classes.join(", "),
                if fams.is_empty() {
                    String::new()
                } else {
                    format!("; communication by library: {}", fams.join(", "))
                }
            ));
        }
        None => parts.push("no device work".to_string()),
    }
    if let Some(h) = v.host_share() {
        parts.push(format!("host {} classified {}", dur(v.host_ns as f64), pct(h)));
    }
    let mut s = parts.join("; ");
    let names = |v: &[crate::normalize::coverage::NameTime]| -> String {
        v.iter()
            .take(3)
            .map(|n| format!("{} {}", md_code(&short(&n.name)), dur(n.ns as f64)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !v.unclassified.is_empty() {
        let _ = write!(s, ". Not understood: {}", names(&v.unclassified));
    }
    if !v.by_structure.is_empty() {
        let _ = write!(
            s,
            ". Counted as communication because a communication op launched them: {}",
            names(&v.by_structure)
        );
    }
    for st in &v.comm_streams {
        let _ = write!(
            s,
            ". GPU {} stream {} runs only communication ({}, {})",
            st.device,
            st.stream,
            st.families.join(", "),
            dur(st.ns as f64)
        );
    }
    // Where a library no rule knows would hide: shown when the rank shows no communication.
    if !v.by_category.is_empty() && v.device_share().is_some() && v.device_of(Class::Communication) == 0 {
        let _ = write!(
            s,
            ". Largest kernels counted as compute by category alone (no rule knew the name): {}",
            names(&v.by_category)
        );
    }
    s.push('.');
    s
}

/// The section: one line per file, ranks that read alike grouped when there are many.
pub fn section(s: &mut String, a: &Analysis) {
    if a.coverage.is_empty() {
        return;
    }
    let _ = writeln!(s, "## What was understood\n");
    let file =
        |rank: u32| a.ranks.iter().find(|r| r.rank == rank).map(|r| r.source.clone()).unwrap_or_default();
    if a.coverage.len() <= 8 {
        for c in &a.coverage {
            let _ = writeln!(s, "- rank {} ({}): {}", c.rank, md_code(&file(c.rank)), line(c));
        }
    } else {
        // Many ranks: those whose line reads alike once figures are rounded share one line.
        let mut groups: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for c in &a.coverage {
            groups.entry(signature(c)).or_default().push(c.rank);
        }
        let mut rows: Vec<(Vec<u32>, String)> = groups.into_iter().map(|(k, v)| (v, k)).collect();
        rows.sort();
        for (ranks, sig) in rows {
            let _ = writeln!(s, "- {} rank(s) {}: {sig}", ranks.len(), super::markdown::list_of(&ranks));
        }
    }
    files_of_ranks(s, a);
    if a.graphs.len() <= 8 {
        for g in &a.graphs {
            let _ = writeln!(s, "- rank {} CUDA / HIP graphs: {}.", g.rank, graphs_line(&g.graphs));
        }
    } else {
        // Many ranks: which capture (and in which steps), which replay, and how much.
        let capturing: Vec<u32> = a
            .graphs
            .iter()
            .filter(|g| g.graphs.captures + g.graphs.instantiations > 0)
            .map(|g| g.rank)
            .collect();
        if !capturing.is_empty() {
            let _ = writeln!(
                s,
                "- {} rank(s) {} capture CUDA / HIP graphs: step(s) {} are capture, not judged.",
                capturing.len(),
                super::markdown::list_of(&capturing),
                super::markdown::list_of(&capture_steps(a).into_iter().collect::<Vec<_>>())
            );
        }
        let replaying: Vec<&crate::analyze::RankGraphs> =
            a.graphs.iter().filter(|g| g.graphs.replays > 0).collect();
        if !replaying.is_empty() {
            let ranks: Vec<u32> = replaying.iter().map(|g| g.rank).collect();
            let launches: u64 = replaying.iter().map(|g| u64::from(g.graphs.replays)).sum();
            let kernels: u64 = replaying.iter().map(|g| u64::from(g.graphs.replay_kernels)).sum();
            let _ = writeln!(
                s,
                "- {} rank(s) {} replay CUDA / HIP graphs: {launches} launch(es) running {kernels} kernel(s) in all.",
                ranks.len(),
                super::markdown::list_of(&ranks)
            );
        }
    }
    if !a.frameworks.is_empty() {
        let seen: Vec<String> = a
            .frameworks
            .iter()
            .map(|f| format!("{} ({}, {} rank(s))", f.framework.name(), md_code(&f.evidence), f.ranks))
            .collect();
        let _ = writeln!(
            s,
            "- frameworks, from their own annotations: {}; advice is in their terms.",
            seen.join(", ")
        );
    }
    let few = too_little(a);
    if !few.is_empty() {
        let _ = writeln!(
            s,
            "\n**Too little was understood to judge rank(s) {}**: more than half of their device time (or, without device work, of their host time) is in events no rule classifies. The figures below treat those events as nothing; add rules for them (`--rules FILE`, docs/metrics.md \"Which events\") before trusting any finding.",
            super::markdown::list_of(&few)
        );
    }
    let _ = writeln!(s);
}

/// One line per file that held several ranks ([`crate::normalize::multirank`]): which ranks,
/// told apart how, and the assumption when their numbers were not the file's word.
fn files_of_ranks(s: &mut String, a: &Analysis) {
    use crate::model::DiagKind;
    use crate::normalize::RankSource;
    let mut files: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for r in a.ranks.iter().filter(|r| r.rank_source == RankSource::InFile) {
        if let Some(f) = r.clock.as_deref() {
            files.entry(f).or_default().push(r.rank);
        }
    }
    for (file, ranks) in files {
        let base = file.rsplit(['/', '\\']).next().unwrap_or(file);
        let assumed = a
            .diagnostics
            .iter()
            .any(|d| d.diagnostic.kind == DiagKind::RanksInFileAssumed && ranks.contains(&d.rank));
        let how = if assumed {
            "told apart by the shape of their processes (each with its own steps or GPU streams); which process is which rank was assumed (see the diagnostics): map them with `--rank` if this is wrong"
        } else {
            "told apart by processes named for their ranks"
        };
        let _ = writeln!(
            s,
            "- One file, {}, holds rank(s) {}: {how}. Its ranks are taken to share its clock.",
            md_code(base),
            super::markdown::list_of(&ranks)
        );
    }
}

/// A rank's line with its figures rounded (for grouping many ranks).
fn signature(c: &RankCoverage) -> String {
    let v = &c.coverage;
    let dev = v
        .device_share()
        .map_or("no device work".to_string(), |x| format!("device classified {:.0}%", 100.0 * x));
    let host = v.host_share().map_or(String::new(), |x| format!(", host classified {:.0}%", 100.0 * x));
    let fams: Vec<&str> =
        v.families.iter().filter(|f| f.class == Class::Communication).map(|f| f.family.as_str()).collect();
    let un: Vec<String> = v.unclassified.iter().take(2).map(|n| md_code(&short(&n.name))).collect();
    format!(
        "{dev}{host}{}{}",
        if fams.is_empty() {
            String::new()
        } else {
            format!("; communication by library: {}", fams.join(", "))
        },
        if un.is_empty() { String::new() } else { format!("; not understood: {}", un.join(", ")) }
    )
}
