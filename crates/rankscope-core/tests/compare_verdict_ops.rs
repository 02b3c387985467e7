//! The diff verdict names the operators whose work changed (issue 36), on real runs of one
//! 2-rank DDP job (`tests/zoo/opchange/`, made by `tests/zoo/make_opchange.py`): `mm_doubled`
//! doubles the rows of one `torch.mm` in forward on every rank; `base` and `base_again` are
//! one configuration run twice. The verdict must name `aten::mm` with its shapes, by about the
//! time the ranks measured around the product, and the two runs of one configuration must say
//! "no change beyond noise" with no operator named. A cause that is not compute (a host stall,
//! a slower Dataset) keeps the line: no operator is named over it.

// Tests read the zoo from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::zoo::run;
use rankscope_core::analyze::operators::OpKind;
use rankscope_core::analyze::Analysis;
use rankscope_core::compare::{self, render, Change, Comparison, OpPresence};
use serde_json::Value;

fn diff(base: &Analysis, new: &Analysis) -> Comparison {
    compare::compare(base, new, &compare::Options::default())
}

/// The mean over ranks and steps of the time the ranks measured around the extra matmul.
fn measured_mm_ms(spec: &Value) -> f64 {
    let per_rank =
        spec["measured"]["per_rank_mean"].as_object().unwrap_or_else(|| panic!("no per_rank_mean"));
    let v: Vec<f64> = per_rank.values().filter_map(|r| r["extra_mm_ms"].as_f64()).collect();
    assert_eq!(v.len(), per_rank.len(), "extra_mm_ms on every rank: {per_rank:?}");
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn a_doubled_matmul_is_named_in_the_verdict_with_its_shapes() {
    let (base, bspec) = run("opchange/base");
    let (new, nspec) = run("opchange/mm_doubled");
    let c = diff(&base, &new);
    let v = &c.verdict;
    assert_eq!(v.change, Change::Slower, "{}", v.line);
    let op = v.operators.first().unwrap_or_else(|| panic!("no operator named: {}", v.line));
    assert_eq!(v.operators.len(), 1, "{:?}", v.operators);
    assert_eq!(
        (op.kind, op.name.as_str(), op.presence),
        (OpKind::CpuOp, "aten::mm", OpPresence::ShapesChanged)
    );
    assert_eq!(op.shapes_base.as_deref(), Some("[[1024,1024],[1024,1024]]"), "{op:?}");
    assert_eq!(op.shapes_new.as_deref(), Some("[[2048,1024],[1024,1024]]"), "{op:?}");
    assert!(op.every_rank && op.even && op.ranks == 2, "{op:?}");
    // By the time the ranks measured around the product, within a fifth.
    let want = measured_mm_ms(&nspec) - measured_mm_ms(&bspec);
    let got = op.delta_ns as f64 / 1e6;
    assert!((got - want).abs() <= 0.2 * want, "aten::mm +{got:.1} ms, measured +{want:.1} ms");
    assert!(op.lo_ns > 0 && op.lo_ns <= op.delta_ns && op.delta_ns <= op.hi_ns, "{op:?}");
    // At least half of the step's change, which is what made it named.
    let step = c.step_time.shift.map_or(0, |s| s.delta_ns);
    assert!(op.delta_ns as f64 >= 0.5 * step as f64, "{op:?} vs step +{step} ns");
    // The line says it first, with its shapes, then the region that holds it.
    let head = v.line.split(": ").nth(1).unwrap_or_default();
    assert!(head.starts_with("aten::mm +"), "{}", v.line);
    assert!(
        v.line.contains("per step on every rank (shapes changed: [[1024,1024],[1024,1024]] → [[2048,1024],[1024,1024]]), in every rank's forward"),
        "{}",
        v.line
    );
    assert!(render::text(&c).starts_with(&v.line) && render::markdown(&c).starts_with(&v.line));
    // The other way round: the smaller product, faster.
    let back = diff(&new, &base);
    let op = back.verdict.operators.first().unwrap_or_else(|| panic!("{}", back.verdict.line));
    assert_eq!(
        (back.verdict.change, op.name.as_str()),
        (Change::Faster, "aten::mm"),
        "{}",
        back.verdict.line
    );
    assert!(op.delta_ns < 0 && back.verdict.line.contains("aten::mm −"), "{}", back.verdict.line);
}

#[test]
fn runs_of_one_configuration_name_no_operator() {
    let (base, _) = run("opchange/base");
    let (again, _) = run("opchange/base_again");
    let (doubled, _) = run("opchange/mm_doubled");
    for (x, y) in [(&base, &again), (&again, &base), (&base, &base), (&doubled, &doubled)] {
        let c = diff(x, y);
        assert_eq!(c.verdict.change, Change::NoChange, "{}", c.verdict.line);
        assert!(c.verdict.line.starts_with("no change beyond noise"), "{}", c.verdict.line);
        assert!(c.verdict.operators.is_empty(), "{:?}", c.verdict.operators);
        assert!(!c.verdict.line.contains("aten::"), "{}", c.verdict.line);
    }
    // The repeat of the noise: the base run again against the doubled one names it as well.
    let c = diff(&again, &doubled);
    assert_eq!(c.verdict.operators.first().map(|o| o.name.as_str()), Some("aten::mm"), "{}", c.verdict.line);
}

#[test]
fn a_cause_that_is_not_compute_keeps_the_line() {
    // A host stall (a new annotation, its time idle) and a slower Dataset (input): no operator's
    // work explains them, so none is named and the cause leads as before.
    for (b, n, says) in [
        ("baseline", "host_stall", "rank 2's forward > straggler_sleep"),
        ("pairs/base", "pairs/slow_loader_r3", "rank 3's DataLoader"),
    ] {
        let (base, _) = run(b);
        let (new, _) = run(n);
        let c = diff(&base, &new);
        assert!(c.verdict.operators.is_empty(), "{n}: {:?}", c.verdict.operators);
        let head = c.verdict.line.split(": ").nth(1).unwrap_or_default();
        assert!(head.starts_with(says), "{n}: {}", c.verdict.line);
    }
}

#[test]
fn the_named_operators_are_in_the_json_and_an_older_verdict_reads() {
    let (base, _) = run("opchange/base");
    let (new, _) = run("opchange/mm_doubled");
    let c = diff(&base, &new);
    let j: Value = serde_json::from_str(&render::json(&c)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(j["schema"], "rankscope.diff/1");
    let op = &j["verdict"]["operators"][0];
    for k in [
        "kind",
        "name",
        "presence",
        "shapes_base",
        "shapes_new",
        "ranks",
        "every_rank",
        "even",
        "delta_ns",
        "lo_ns",
        "hi_ns",
    ] {
        assert!(op.get(k).is_some(), "{k} missing: {op}");
    }
    assert_eq!((op["name"].as_str(), op["presence"].as_str()), (Some("aten::mm"), Some("shapes_changed")));
    let back: Comparison = serde_json::from_value(j.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back.verdict, c.verdict);
    // A comparison written before the field reads, with no operator named.
    let mut old = j;
    old["verdict"].as_object_mut().map(|o| o.remove("operators"));
    let old: Comparison = serde_json::from_value(old).unwrap_or_else(|e| panic!("{e}"));
    assert!(old.verdict.operators.is_empty());
    // With no change the field is left out.
    let same = diff(&base, &base);
    let j: Value = serde_json::from_str(&render::json(&same)).unwrap_or_else(|e| panic!("{e}"));
    assert!(j["verdict"].get("operators").is_none(), "{}", j["verdict"]);
}
