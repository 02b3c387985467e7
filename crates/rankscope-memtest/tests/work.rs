//! Work counted, not timed (issue 39, item 2): each hostile shape is run through the pipeline
//! at sizes n, 2n, 4n and 8n, and the allocations it makes and the bytes they ask for must grow
//! at most about linearly: by at most [`PER_DOUBLING`] from one size to the next. No clock is
//! read. `cargo test -p rankscope-memtest --test work -- --nocapture` prints the counts (the
//! "Hostile shapes" table of BENCHMARKS.md).
//!
//! What this catches and what it does not: work that allocates as it goes (a copy per level of
//! nesting, a list rebuilt per rank, a map grown per name) shows here; a loop that only reads (a
//! scan of a stack, `Vec::contains`) allocates nothing and is caught only by the tests that run
//! the sizes that were slow (`crates/rankscope-core/tests/hostile.rs`). Names crafted to collide
//! in the string table cost comparisons, not allocations: their count is the pairs that share a
//! hash (`names_crafted_for_the_fixed_hash_do_not_collide_under_table_keys` in the core's
//! `model/strings.rs` tests and
//! `names_crafted_to_collide_are_interned_in_linear_work` below).

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // fixtures are read from disk

use rankscope_core::analyze::Options;
use rankscope_core::{diagnose, fr, normalize, parse};
use rankscope_memtest::{Counting, Work};

#[global_allocator]
static ALLOC: Counting = Counting::new();

/// The allocator counts every thread: the tests run one at a time so that none counts another.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Most growth of either count from one size to twice it: linear work doubles; 2.5 leaves room
/// for tables that grow by doubling (a size can land just past a doubling) and for n log n
/// (at these sizes log n grows by under 10% a doubling). Quadratic work quadruples.
const PER_DOUBLING: f64 = 2.5;

/// Counts the work of `run(input)` for inputs of sizes n..8n made by `make`, prints them and
/// holds each doubling to [`PER_DOUBLING`].
fn linear<T>(shape: &str, n: usize, make: impl Fn(usize) -> T, run: impl Fn(&T)) {
    let _alone = alone();
    let mut rows: Vec<(usize, Work)> = Vec::new();
    for k in [1, 2, 4, 8] {
        let input = make(n * k);
        ALLOC.reset_work();
        run(&input);
        let w = ALLOC.work();
        drop(input);
        rows.push((n * k, w));
    }
    for (size, w) in &rows {
        println!("| {shape} | {size} | {} | {} |", w.calls, w.bytes);
    }
    for pair in rows.windows(2) {
        let ((a, wa), (b, wb)) = (pair[0], pair[1]);
        for (what, x, y) in [("allocations", wa.calls, wb.calls), ("bytes", wa.bytes, wb.bytes)] {
            let ratio = y as f64 / x.max(1) as f64;
            assert!(
                ratio <= PER_DOUBLING,
                "{shape}: {what} {x} at {a}, {y} at {b}: ×{ratio:.2} for ×2 the input"
            );
        }
    }
}

/// The whole pipeline on one trace's text: ingest, normalize, analyze and judge.
fn analyze(doc: &String) {
    let t = parse::ingest_bytes("rank0.json", doc.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let a = diagnose::analyze(
        &normalize::assemble(vec![t], &[], &normalize::Rules::default()),
        &Options::default(),
    );
    assert_eq!(a.ranks.len(), 1);
}

fn trace(events: &[String]) -> String {
    format!(r#"{{"traceEvents":[{}]}}"#, events.join(","))
}

fn step(dur: usize) -> String {
    format!(
        r#"{{"ph":"X","name":"ProfilerStep#1","ts":0,"dur":{dur},"pid":1,"tid":1,"cat":"user_annotation"}}"#
    )
}

/// `n` slices each inside the one before, in one step; regions (`user_annotation`) and
/// operators alternating when `alternate`.
fn nested(n: usize, alternate: bool) -> String {
    let mut ev = vec![step(10 * n + 10)];
    for i in 0..n {
        let cat = if alternate && i % 2 == 1 { "user_annotation" } else { "cpu_op" };
        ev.push(format!(
            r#"{{"ph":"X","name":"f","ts":{},"dur":{},"pid":1,"tid":1,"cat":"{cat}"}}"#,
            1 + i,
            10 * n - 2 * i
        ));
    }
    trace(&ev)
}

/// `n` GPU kernels of distinct names, each name `name(i)`, one after another in a step.
fn kernels(n: usize, name: impl Fn(usize) -> String) -> String {
    let mut ev = vec![step(10 * n + 10)];
    for i in 0..n {
        let name = name(i);
        ev.push(format!(
            r#"{{"ph":"X","name":"{name}","ts":{},"dur":5,"pid":0,"tid":7,"cat":"kernel"}}"#,
            1 + 10 * i
        ));
    }
    trace(&ev)
}

#[test]
fn slices_nested_deep() {
    linear("slices nested n deep (operators)", 2_000, |n| nested(n, false), analyze);
}

#[test]
fn regions_and_operators_nested_alternating() {
    linear("slices nested n deep (regions and operators alternating)", 2_000, |n| nested(n, true), analyze);
}

#[test]
fn distinct_kernel_names() {
    linear("n kernels of distinct names `k0`…", 5_000, |n| kernels(n, |i| format!("k{i}")), analyze);
}

#[test]
fn look_alike_kernel_names() {
    linear(
        "n kernels named alike (`void gemm_kernel<i>`)",
        5_000,
        |n| kernels(n, |i| format!("void gemm_kernel<{i}>")),
        analyze,
    );
}

/// Names that all share one value of a fixed multiply-rotate hash whatever its start state:
/// 16-byte blocks, each in one of two forms (a top bit of its first word and bit 4 of its second
/// flipped together). Bytes ≥ 0x80 are kept as the file has them (interned raw, shown repaired).
fn crafted(i: usize, blocks: u32) -> Vec<u8> {
    let mut n = Vec::new();
    for b in 0..blocks {
        let mut block = *b"kernel_gemm_xyz_";
        if i >> b & 1 == 1 {
            block[7] ^= 0x80;
            block[8] ^= 0x10;
        }
        n.extend_from_slice(&block);
    }
    n
}

#[test]
fn names_crafted_to_collide_are_interned_in_linear_work() {
    // 2^12 names at n, 2^15 at 8n, all of 15 blocks (the same length at every size).
    linear(
        "n kernels named to collide under a fixed hash",
        1 << 12,
        |n| {
            let mut doc = br#"{"traceEvents":["#.to_vec();
            doc.extend_from_slice(step(10 * n + 10).as_bytes());
            for i in 0..n {
                doc.extend_from_slice(br#",{"ph":"X","name":""#);
                doc.extend_from_slice(&crafted(i, 15));
                doc.extend_from_slice(
                    format!(r#"","ts":{},"dur":5,"pid":0,"tid":7,"cat":"kernel"}}"#, 1 + 10 * i).as_bytes(),
                );
            }
            doc.extend_from_slice(b"]}");
            doc
        },
        |doc| {
            let t = parse::ingest_bytes("rank0.json", doc).unwrap_or_else(|e| panic!("{e}"));
            assert!(t.strings.len() > t.events.len(), "every kernel's name is its own");
            let a = diagnose::analyze(
                &normalize::assemble(vec![t], &[], &normalize::Rules::default()),
                &Options::default(),
            );
            assert_eq!(a.ranks.len(), 1);
        },
    );
}

/// A member nested `n` deep before `traceEvents` (skipped with a diagnostic; the events kept).
#[test]
fn deep_member_before_trace_events() {
    linear(
        "a member nested n deep before traceEvents",
        2_000,
        |n| {
            format!(
                r#"{{"deep": {}1{}, "traceEvents":[{},{{"ph":"X","name":"a","ts":1,"dur":2,"pid":1,"tid":1,"cat":"cpu_op"}}]}}"#,
                "[".repeat(n),
                "]".repeat(n),
                step(10)
            )
        },
        |doc| {
            let t = parse::ingest_bytes("rank0.json", doc.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(t.events.len(), 2);
        },
    );
}

fn healthy_dump() -> serde_json::Value {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../rankscope-core/tests/fixtures/fr/healthy/json/fr_trace_rank_0.json"
    );
    let text = std::fs::read(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{e}"))
}

/// A Flight Recorder dump read, ranked and reported.
fn fr_report(text: &String) {
    let d = fr::read("fr_trace_rank_0.json", text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let (dumps, _) = fr::decide_ranks(vec![d]);
    let r = fr::job_report(&dumps);
    assert!(!r.ranks.is_empty());
}

#[test]
fn pg_config_of_many_ranks() {
    linear(
        "a Flight Recorder dump whose pg_config lists n ranks",
        25_000,
        |n| {
            let mut d = healthy_dump();
            let list: Vec<String> = (0..n).map(|r| r.to_string()).collect();
            d["pg_config"] = serde_json::json!({"0": {"desc": "default_pg", "name": "0", "ranks": format!("[{}]", list.join(", "))}});
            d.to_string()
        },
        fr_report,
    );
}

#[test]
fn flight_recorder_dump_of_many_entries() {
    linear(
        "a Flight Recorder dump of n entries",
        2_000,
        |n| {
            let mut d = healthy_dump();
            let first = d["entries"][0].clone();
            let entries: Vec<serde_json::Value> = (0..n)
                .map(|i| {
                    let mut e = first.clone();
                    e["record_id"] = i.into();
                    e["collective_seq_id"] = (i + 1).into();
                    e["op_id"] = (i + 1).into();
                    e["profiling_name"] = "gloo:all_reduce".into();
                    e
                })
                .collect();
            d["entries"] = entries.into();
            d.to_string()
        },
        fr_report,
    );
}
