//! Both runs' timelines of one step (`compare::timeline`, the app's Compare view) on real pairs
//! of one job (`tests/zoo/pairs/`): rank 3's slower DataLoader shows as its longer data loading
//! in the new run's row, the others' longer wait for it beside; every row adds up to its rank's
//! step and stays on the one scale.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use rankscope_core::analyze::layout::Role;
use rankscope_core::compare::timeline::{self, Pick, RunStep, SpanKind};
use rankscope_core::compare::{self, Options};

fn kind_ns(run: &RunStep, rank: u32, kind: SpanKind) -> i64 {
    let row = run.rows.iter().find(|r| r.ranks == [rank]).unwrap_or_else(|| panic!("no row of rank {rank}"));
    row.spans.iter().filter(|s| s.kind == kind).map(|s| s.dur_ns).sum()
}

#[test]
fn a_slow_loader_on_rank_3_shows_in_its_row() {
    let (base, _) = common::zoo::run("pairs/base");
    let (new, _) = common::zoo::run("pairs/slow_loader_r3");
    let c = compare::compare(&base, &new, &Options::default());
    let t = timeline::timelines(&base, &new, &c.verdict, Pick::Typical);
    let (b, n) = (
        t.base.as_ref().unwrap_or_else(|| panic!("base step")),
        t.new.as_ref().unwrap_or_else(|| panic!("new step")),
    );
    for run in [b, n] {
        assert_eq!(run.rows.len(), 4, "4 ranks, a row each");
        for row in &run.rows {
            let sum: i64 = row.spans.iter().map(|s| s.dur_ns).sum();
            assert_eq!(sum, row.end_ns - row.start_ns, "{}", row.label);
            assert!(row.end_ns <= t.scale_ns);
        }
        eprintln!("step {} ({} ms)", run.step, run.step_ns / 1_000_000);
        for row in &run.rows {
            let by: Vec<String> = SpanKind::ALL
                .iter()
                .map(|&k| {
                    format!(
                        "{} {:.1}",
                        k,
                        row.spans.iter().filter(|s| s.kind == k).map(|s| s.dur_ns).sum::<i64>() as f64 / 1e6
                    )
                })
                .collect();
            eprintln!("  {} start {:.1} ms: {}", row.label, row.start_ns as f64 / 1e6, by.join(", "));
        }
    }
    let (lb, ln) = (kind_ns(b, 3, SpanKind::DataLoading), kind_ns(n, 3, SpanKind::DataLoading));
    // The scenario's rank 3 loads ~320 ms more per step.
    assert!(ln - lb > 200_000_000, "rank 3's data loading {lb} → {ln} ns");
    assert!(n.step_ns > b.step_ns);
    assert_eq!(t.delta_ns(), Some(n.step_ns - b.step_ns));
    assert!(t.scale_ns >= n.step_ns);
    // One process group (gloo's default world group, data-parallel): every collective span of
    // the waiting ranks names it.
    // Saved before the rows kept it, the one group that ran all_reduce is still named.
    let old = timeline::timelines(&strip(&base), &strip(&new), &c.verdict, Pick::Typical);
    for t in [&t, &old] {
        let spans = collective_spans(t);
        assert!(spans.iter().any(|(w, r, _)| *w == "new" && *r == 0), "rank 0's wait is in a collective");
        for (which, rank, c) in spans {
            let g = c.group.unwrap_or_else(|| panic!("{which} rank {rank}: no group"));
            assert_eq!((g.name.as_str(), g.role, g.size), ("0", Role::Data, 4), "{which} rank {rank}");
        }
    }
}

/// The analysis as saved before its origin rows kept their group.
fn strip(a: &rankscope_core::analyze::Analysis) -> rankscope_core::analyze::Analysis {
    let mut a = a.clone();
    for o in &mut a.comm_origins {
        o.pg.clear();
    }
    a
}

/// Every collective span of both runs, with the rank drawn.
fn collective_spans(t: &timeline::Timelines) -> Vec<(&'static str, u32, timeline::SpanCollective)> {
    let mut out = Vec::new();
    for (which, run) in [("base", &t.base), ("new", &t.new)] {
        for row in run.iter().flat_map(|r| &r.rows) {
            for s in &row.spans {
                if let Some(c) = &s.collective {
                    out.push((which, row.drawn, c.clone()));
                }
            }
        }
    }
    out
}

#[test]
fn a_collective_span_names_its_process_group() {
    // Tensor 2 × data 2 (Megatron's groups): a rank all-reduces in its tensor group and in its
    // data-parallel group, so only the rows' own groups tell which.
    let (base, _) = common::zoo::run("layout/tp2_dp2_healthy");
    let (new, _) = common::zoo::run("layout/tp2_dp2_stall");
    let c = compare::compare(&base, &new, &Options::default());
    let t = timeline::timelines(&base, &new, &c.verdict, Pick::Typical);
    let spans = collective_spans(&t);
    assert!(!spans.is_empty(), "the pair's steps have exposed collectives");
    let mut roles = std::collections::BTreeSet::new();
    for (which, rank, c) in &spans {
        let a = if *which == "base" { &base } else { &new };
        let layout = a.layout.as_ref().unwrap_or_else(|| panic!("{which}: a layout"));
        let g = c.group.as_ref().unwrap_or_else(|| panic!("{which} rank {rank}: {c:?} names no group"));
        let lg = layout.group(&g.name).unwrap_or_else(|| panic!("{which}: no group {}", g.name));
        assert!(lg.ranks.contains(rank), "{which} rank {rank} is not in {g:?}");
        assert_eq!((g.role, g.size as usize), (lg.role, lg.ranks.len()));
        eprintln!("{which} rank {rank}: {} {} on the {}", c.count, c.kind.name(), g.words());
        roles.insert(g.role);
    }
    assert!(roles.contains(&Role::Tensor) && roles.contains(&Role::Data), "{roles:?}");
    // An analysis without the rows' groups (saved before they were kept) names a group only
    // where one fits, and then the same one.
    let old = timeline::timelines(&strip(&base), &strip(&new), &c.verdict, Pick::Typical);
    let old_spans = collective_spans(&old);
    assert_eq!(old_spans.len(), spans.len());
    for ((_, _, was), (_, _, is)) in old_spans.iter().zip(&spans) {
        if let Some(g) = &was.group {
            assert_eq!(Some(g), is.group.as_ref());
        }
    }
}
