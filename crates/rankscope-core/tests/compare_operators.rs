//! Operators and kernels matched across two runs (`diff`'s `operators[]`, issue 36) on real runs
//! of one DDP job (`tests/zoo/pairs/`, `tests/zoo/repeat/`): the rows must say what was
//! injected (a slower Dataset on one rank: its DataLoader annotation on that rank, by the
//! amount the rank measured; smaller DDP buckets: more all_reduce calls per step, as many as
//! the collectives matched across ranks say; a doubled batch on one rank: the shaped ops with
//! the new batch, on that rank), and two runs of one configuration must show no operator
//! change beyond noise.

// Tests read the zoo from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::path::PathBuf;

use common::zoo::run;
use rankscope_core::analyze::operators::OpKind;
use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::compare::{self, render, Comparison, OpPresence, OperatorDiff};
use rankscope_core::model::CollKind;
use rankscope_core::normalize::Rules;
use serde_json::Value;

fn diff(base: &Analysis, new: &Analysis) -> Comparison {
    compare::compare(base, new, &compare::Options::default())
}

fn rows<'a>(c: &'a Comparison, kind: OpKind, name: &str) -> Vec<&'a OperatorDiff> {
    c.operators.iter().filter(|o| o.kind == kind && o.name == name && !o.other).collect()
}

fn one<'a>(c: &'a Comparison, kind: OpKind, name: &str) -> &'a OperatorDiff {
    let v = rows(c, kind, name);
    assert_eq!(v.len(), 1, "{name}: {v:?}");
    v[0]
}

fn changed(c: &Comparison) -> Vec<String> {
    c.operators
        .iter()
        .filter(|o| o.changed())
        .map(|o| format!("{} {} {:?} {:+} ns", o.kind, o.name, o.presence, o.shift.delta_ns))
        .collect()
}

fn measured_ms(spec: &Value, rank: u32, key: &str) -> f64 {
    spec["measured"]["per_rank_mean"][rank.to_string()][key]
        .as_f64()
        .unwrap_or_else(|| panic!("measured {key} of rank {rank}"))
}

#[test]
fn the_analysis_keeps_each_kind_of_operator_with_its_shapes() {
    let (a, _) = run("pairs/base");
    let t = &a.operators;
    assert_eq!((t.ranks, t.steps.len(), t.shapes), (4, 4, true), "{:?}", t.steps);
    // The shaped ops carry their Input Dims; the others are keyed by name alone.
    assert!(t
        .rows
        .iter()
        .any(|r| r.name == "aten::mm" && r.shapes.as_deref().is_some_and(|s| s.starts_with("[["))));
    assert!(t.rows.iter().any(|r| r.name == "aten::sqrt" && r.shapes.is_none()));
    // Every rank ran the DataLoader once per step; the step marker is not an operator.
    let dl = t
        .rows
        .iter()
        .find(|r| r.kind == OpKind::Annotation && r.name.contains("DataLoader"))
        .unwrap_or_else(|| panic!("no DataLoader row"));
    assert_eq!((dl.ranks, dl.count.clone()), (4, vec![4; 4]));
    assert!(t.rows.iter().all(|r| !r.name.starts_with("ProfilerStep#")));
    // Self time never exceeds inclusive time, and no rank's self time adds up to more than its
    // threads could hold (the CPU job has a main and a gloo thread and an autograd one at most).
    for r in &t.rows {
        for (s, d) in r.self_ns.iter().zip(&r.dur_ns) {
            assert!(*s >= 0 && s <= d, "{}: self {s} > inclusive {d}", r.name);
        }
    }
    let wall: i64 = a.steps.iter().flat_map(|s| s.per_rank.iter().map(|r| r.wall_ns)).sum();
    let own: i64 = t.rows.iter().flat_map(|r| r.self_ns.iter()).sum();
    assert!(own <= 3 * wall, "self {own} vs wall {wall}");
}

#[test]
fn a_slower_dataloader_is_its_annotation_on_its_rank() {
    let (base, bspec) = run("pairs/base");
    let (new, spec) = run("pairs/slow_loader_r3");
    let c = diff(&base, &new);
    let dl = c
        .operators
        .iter()
        .find(|o| o.kind == OpKind::Annotation && o.name.contains("DataLoader"))
        .unwrap_or_else(|| panic!("no DataLoader row: {:?}", changed(&c)));
    assert!(dl.beyond_noise && dl.shift.delta_ns > 0, "{dl:?}");
    assert_eq!((dl.count_base, dl.count_new, dl.count_beyond_noise), (1.0, 1.0, false), "{dl:?}");
    let (tb, tn) =
        (dl.top_base.unwrap_or_else(|| panic!("{dl:?}")), dl.top_new.unwrap_or_else(|| panic!("{dl:?}")));
    assert_eq!(tn.rank, 3, "{dl:?}");
    // The time rank 3's Dataset slept more per step, by its own clock.
    let want = measured_ms(&spec, 3, "dataset_sleep_ms") - measured_ms(&bspec, 3, "dataset_sleep_ms");
    let got = (tn.self_ns - tb.self_ns) as f64 / 1e6;
    assert!((got - want).abs() <= 0.15 * want, "rank 3's DataLoader +{got:.1} ms, measured +{want:.1} ms");
    // Per rank on average: a quarter of it (one rank of four).
    assert!((dl.shift.delta_ns as f64 / 1e6 - want / 4.0).abs() <= 0.2 * want / 4.0, "{dl:?}");
    // The Markdown's operator table names it.
    let md = render::markdown(&c);
    assert!(md.contains("## Operators and kernels") && md.contains("enumerate(DataLoader)"), "{md}");
}

#[test]
fn smaller_buckets_are_more_all_reduce_calls_per_step() {
    let (base, _) = run("pairs/base");
    let (new, _) = run("pairs/buckets_1mb");
    let c = diff(&base, &new);
    // The collectives matched across ranks (another path through the traces) say how many
    // all_reduces each step makes.
    let calls = |new_side: bool| -> f64 {
        c.collectives
            .iter()
            .filter(|d| d.kind == CollKind::AllReduce)
            .filter_map(|d| if new_side { d.new.as_ref() } else { d.base.as_ref() })
            .map(|s| s.calls_per_step)
            .sum()
    };
    let (cb, cn) = (calls(false), calls(true));
    assert!(cn >= cb + 2.0, "all_reduce calls per step {cb} → {cn}");
    for name in ["c10d::allreduce_", "gloo:all_reduce"] {
        let o = one(&c, OpKind::CpuOp, name);
        assert!(o.count_beyond_noise && o.changed(), "{o:?}");
        assert_eq!(o.presence, OpPresence::Both);
        assert!(
            (o.count_base - cb).abs() < 0.5 && (o.count_new - cn).abs() < 0.5,
            "{name}: {o:?} vs {cb} → {cn}"
        );
    }
    // The model's own operators run as often as before (a tiny one may fall below a part's
    // cut in one run: new or vanished, but no count change is claimed).
    for o in c.operators.iter().filter(|o| o.name == "aten::mm" || o.name == "aten::addmm") {
        assert!(!o.count_beyond_noise, "{o:?}");
    }
}

#[test]
fn a_doubled_batch_is_new_shapes_on_its_rank() {
    let (base, _) = run("pairs/base");
    let (new, _) = run("pairs/uneven_r0");
    let c = diff(&base, &new);
    // Rank 0's linear layers now take 128 rows: a key of the new run only, on rank 0, while
    // the name still runs with 64 rows on the other three ranks.
    let new_mm: Vec<&OperatorDiff> = c
        .operators
        .iter()
        .filter(|o| o.name == "aten::addmm" && o.presence == OpPresence::New && o.count_beyond_noise)
        .collect();
    assert!(!new_mm.is_empty(), "{:?}", changed(&c));
    for o in &new_mm {
        assert!(o.shapes_new.as_deref().is_some_and(|s| s.contains("128")), "{o:?}");
        assert_eq!((o.ranks_new, o.top_new.map(|t| t.rank)), (1, Some(0)), "{o:?}");
        assert!(o.count_beyond_noise, "{o:?}");
    }
    let same: Vec<&OperatorDiff> = c
        .operators
        .iter()
        .filter(|o| o.name == "aten::addmm" && o.presence == OpPresence::Both && o.count_beyond_noise)
        .collect();
    assert!(!same.is_empty() && same.iter().all(|o| o.ranks_base == 4 && o.ranks_new == 3), "{same:?}");
}

#[test]
fn a_host_stall_is_a_new_annotation_on_its_rank() {
    let (base, _) = run("baseline");
    let (new, spec) = run("host_stall");
    let c = diff(&base, &new);
    let s = one(&c, OpKind::Annotation, "straggler_sleep");
    assert_eq!(s.presence, OpPresence::New);
    assert!(s.beyond_noise && s.count_beyond_noise, "{s:?}");
    let top = s.top_new.unwrap_or_else(|| panic!("{s:?}"));
    assert_eq!((s.ranks_new, top.rank), (1, 2));
    let want = measured_ms(&spec, 2, "injected_sleep_ms");
    assert!(((top.self_ns as f64 / 1e6) - want).abs() <= 0.05 * want, "{top:?} vs {want} ms");
}

#[test]
fn runs_of_one_configuration_show_no_operator_change() {
    let (base, _) = run("pairs/base");
    let (again, _) = run("pairs/base_again");
    for (x, y) in [(&base, &again), (&again, &base), (&base, &base)] {
        let c = diff(x, y);
        assert!(!c.operators.is_empty());
        assert_eq!(changed(&c), Vec::<String>::new());
        let md = render::markdown(&c);
        assert!(md.contains("No operator changed beyond noise"), "{md}");
    }
    let (b, _) = run("repeat/baseline_b");
    let (cc, _) = run("repeat/baseline_c");
    let c = diff(&b, &cc);
    assert_eq!(changed(&c), Vec::<String>::new());
}

#[test]
fn the_operators_are_in_the_json_and_the_csv() {
    let (base, _) = run("pairs/base");
    let (new, _) = run("pairs/buckets_1mb");
    let c = diff(&base, &new);
    let j: Value = serde_json::from_str(&render::json(&c)).unwrap_or_else(|e| panic!("{e}"));
    let ops = j["operators"].as_array().unwrap_or_else(|| panic!("no operators[]"));
    let ar =
        ops.iter().find(|o| o["name"] == "c10d::allreduce_").unwrap_or_else(|| panic!("no c10d::allreduce_"));
    for k in [
        "kind",
        "presence",
        "count_base",
        "count_new",
        "count_beyond_noise",
        "delta_ns",
        "lo_ns",
        "hi_ns",
        "share_base",
        "top_new",
        "beyond_noise",
    ] {
        assert!(ar.get(k).is_some(), "{k} missing: {ar}");
    }
    // It reads back.
    let back: Comparison = serde_json::from_value(j).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back.operators, c.operators);
    let csv = render::csv(&c);
    assert!(csv.lines().any(|l| l.starts_with("operator,,c10d::allreduce_,cpu_op,both,")), "{csv}");
    // An analysis written before the table (no `operators` key) reads, and gives no rows.
    let mut old: Value = serde_json::to_value(&base).unwrap_or_else(|e| panic!("{e}"));
    old.as_object_mut().map(|o| o.remove("operators"));
    let old: Analysis = serde_json::from_value(old).unwrap_or_else(|e| panic!("{e}"));
    assert!(old.operators.is_empty() && diff(&old, &new).operators.is_empty());
}

/// What the operator table adds to a part (`rankscope part`'s bytes), on a CPU rank of the zoo
/// and a GPU rank of a real DLRM job: bounded, a fraction of the part.
#[test]
fn the_operator_table_keeps_parts_small() {
    use rankscope_core::job::{self, digest::part};
    let files = [
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/zoo/pairs/base/rank0.pt.trace.json.gz"
        )),
        common::shared().join("traces/param-dlrm-8rank/worker0_step_12.1694128201545.pt.trace.json"),
        common::shared().join("traces/hta/trace_diff/control/control.json.gz"),
    ];
    for f in files.iter().filter(|f| f.exists()) {
        let name = f.display().to_string();
        let t = common::ingest_chunked(&name, &common::read(f), 1 << 20).unwrap_or_else(|e| panic!("{e}"));
        let (claim, p) = job::part_of(t, &Rules::default(), &Options::default())
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("{name}: no part"));
        let with = part::encode_trace(&claim, &p).len();
        let mut bare = p.clone();
        bare.operators = Default::default();
        let without = part::encode_trace(&claim, &bare).len();
        let grew = with as f64 / without as f64 - 1.0;
        println!(
            "{name}: {} rows, part {without} → {with} bytes (+{:.0}%)",
            p.operators.rows.len(),
            100.0 * grew
        );
        assert!(!p.operators.is_empty() && grew < 0.5, "{name}: +{:.0}%", 100.0 * grew);
    }
}
