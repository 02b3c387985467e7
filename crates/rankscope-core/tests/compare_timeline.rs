//! Both runs' timelines of one step (`compare::timeline`, the app's Compare view) on real pairs
//! of one job (`tests/zoo/pairs/`): rank 3's slower DataLoader shows as its longer data loading
//! in the new run's row, the others' longer wait for it beside; every row adds up to its rank's
//! step and stays on the one scale.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

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
}
