//! What each real trace lacks (issue 37, item 8): the capture gaps the analysis lists for a rank
//! against what the file's own text holds, read independently here: `"Input Dims"` (shapes),
//! `"[memory]"` (memory), `"python_function"` (stacks), `"pg_config"`, `ProfilerStep#`.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::*;
use rankscope_core::analyze::capture::{job_gaps, CaptureGap};

/// Every trace file under `shared/traces`, sorted.
fn trace_files() -> Vec<std::path::PathBuf> {
    fn walk(d: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in
            std::fs::read_dir(d).unwrap_or_else(|e| panic!("{}: {e}", d.display())).filter_map(Result::ok)
        {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.to_string_lossy().ends_with(".json") || p.to_string_lossy().ends_with(".json.gz") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&shared().join("traces"), &mut out);
    out.sort();
    out
}

fn holds(text: &[u8], what: &str) -> bool {
    text.windows(what.len()).any(|w| w == what.as_bytes())
}

#[test]
fn the_gaps_of_every_real_trace_are_what_its_text_lacks() {
    let files = trace_files();
    assert!(files.len() >= 35, "{}", files.len());
    let mut seen = std::collections::BTreeMap::<CaptureGap, (usize, usize)>::new();
    for p in &files {
        let name = p.display().to_string();
        let text = text_of(p);
        let job = job_of(&name, &read(p), 1 << 20);
        for r in &job.ranks {
            let part = rankscope_core::analyze::rank_part(r, &job.strings, 0);
            let gaps = &part.info.capture_gaps;
            let has = |g| gaps.contains(&g);
            // Memory and stacks: exactly when the text has none.
            assert_eq!(has(CaptureGap::NoMemory), !holds(&text, "\"[memory]\""), "{name}: memory");
            assert_eq!(has(CaptureGap::NoStack), !holds(&text, "\"python_function\""), "{name}: stack");
            // Shapes: missing exactly when operators ran and no event carries `Input Dims`.
            let ops = holds(&text, "\"cpu_op\"") || holds(&text, "\"Operator\"");
            assert_eq!(has(CaptureGap::NoShapes), ops && !holds(&text, "\"Input Dims\""), "{name}: shapes");
            // Process groups: only for a trace with distributedInfo and no pg_config.
            if has(CaptureGap::NoProcessGroups) {
                assert!(holds(&text, "\"distributedInfo\"") && !holds(&text, "\"pg_config\""), "{name}: pg");
            }
            // Steps: exactly when no ProfilerStep (nor an engine's iteration) marked one.
            if holds(&text, "ProfilerStep#") {
                assert!(!has(CaptureGap::NoSteps), "{name}: steps");
            }
            for g in gaps {
                seen.entry(*g).or_default().0 += 1;
            }
            for g in CaptureGap::ALL.iter().filter(|g| !gaps.contains(g)) {
                seen.entry(*g).or_default().1 += 1;
            }
        }
    }
    // Every gap both present and absent somewhere among the real files, except the rank (every
    // real file names its rank in distributedInfo or its name, or is taken as rank 0 alone).
    for g in [CaptureGap::NoShapes, CaptureGap::NoMemory, CaptureGap::NoStack, CaptureGap::NoProcessGroups] {
        let (with, without) = seen.get(&g).copied().unwrap_or_default();
        assert!(with > 0 && without > 0, "{g}: {with} with, {without} without");
    }
}

#[test]
fn the_dlrm_job_lists_each_gap_once_with_its_ranks() {
    let traces = load_dir("traces/param-dlrm-8rank");
    let a = gloo_job_free_analysis(traces);
    let gaps = job_gaps(&a.ranks);
    let all: Vec<u32> = (0..8).collect();
    // Shapes were recorded (Input Dims on the comm ops), memory and stacks were not, and the
    // 2023 distributedInfo has no pg_config.
    assert_eq!(
        gaps,
        [
            (CaptureGap::NoMemory, all.clone()),
            (CaptureGap::NoStack, all.clone()),
            (CaptureGap::NoProcessGroups, all.clone()),
        ]
    );
    let md = rankscope_core::diagnose::markdown::markdown(&a);
    assert!(md.contains("## What the traces lack"), "{md}");
    assert!(md.contains("- every rank: memory not recorded (no [memory] events); set profile_memory=True."));
}

fn gloo_job_free_analysis(
    traces: Vec<rankscope_core::model::RankTrace>,
) -> rankscope_core::analyze::Analysis {
    let job = checked(rankscope_core::normalize::assemble(
        traces,
        &[],
        &rankscope_core::normalize::Rules::default(),
    ));
    rankscope_core::diagnose::analyze(&job, &rankscope_core::analyze::Options::default())
}
