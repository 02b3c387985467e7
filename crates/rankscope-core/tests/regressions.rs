//! Issue 14's defects, one named fixture each (`tests/fixtures/regress/NAME`): every fixture is
//! read whole and in 1-, 2-, 7- and 4096-byte chunks, which must agree exactly (events, counts
//! and every diagnostic), then the case's own promise is checked.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::*;
use rankscope_core::model::*;
use rankscope_core::normalize::{assemble, Job, Rules};

fn bytes(name: &str) -> Vec<u8> {
    read(&fixture(&format!("regress/{name}")))
}

fn check(name: &str) -> RankTrace {
    let b = bytes(name);
    let whole = ingest_chunked(name, &b, b.len().max(1)).unwrap_or_else(|e| panic!("{e}"));
    let sig = |t: &RankTrace| {
        (
            t.events.ts_ns.clone(),
            t.events.dur_ns.clone(),
            t.counts.total,
            t.diagnostics
                .iter()
                .map(|d| (d.kind, d.count, d.first_offset, d.message.clone()))
                .collect::<Vec<_>>(),
        )
    };
    for chunk in [1, 2, 7, 4096] {
        let t = ingest_chunked(name, &b, chunk).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sig(&t), sig(&whole), "{name} in {chunk}-byte chunks");
    }
    whole
}

fn job(t: RankTrace) -> Job {
    assemble(vec![t], &[], &Rules::default())
}

fn diag(t: &RankTrace, k: DiagKind) -> &Diagnostic {
    t.diagnostics.get(k).unwrap_or_else(|| panic!("no {k:?} diagnostic in {:?}", t.diagnostics.sorted()))
}

fn names(t: &RankTrace) -> Vec<&str> {
    t.events.name.iter().map(|&n| t.strings.get(n)).collect()
}

/// One damaged event out of eight: seven kept, the skip said where and how much, not truncated.
fn one_lost(name: &str, lost: &str) -> RankTrace {
    let t = check(name);
    let n = names(&t);
    assert_eq!(n.len(), 7, "{name}: {n:?} {:?}", t.diagnostics.sorted());
    assert!(!n.contains(&lost), "{name}: {n:?}");
    assert!(t.diagnostics.get(DiagKind::Truncated).is_none(), "{name}: {:?}", t.diagnostics.sorted());
    let d = diag(&t, DiagKind::MalformedEvent);
    let text = bytes(name);
    let start = memchr::memmem::find(&text, lost.as_bytes()).map(|i| {
        // The damaged event starts at the `{` before its name.
        text[..i].iter().rposition(|&b| b == b'{').unwrap_or(0) as u64
    });
    assert_eq!(d.first_offset, start, "{name}: {}", d.message);
    assert!(
        d.message.contains("bytes, 1 event(s)") && d.message.contains("up to the next event"),
        "{}",
        d.message
    );
    t
}

#[test]
fn quote_flipped_in_name() {
    one_lost("quote_flipped_in_name.json", "op3");
}

#[test]
fn unbalanced_bracket_in_args() {
    one_lost("unbalanced_bracket_in_args.json", "op3");
}

#[test]
fn quote_parity_flipped() {
    one_lost("quote_parity_flipped.json", "op2");
}

#[test]
fn binary_garbage_in_event() {
    let t = check("binary_garbage_in_event.json");
    assert_eq!(names(&t), ["op0", "op1", "op2", "op4", "op5", "op6", "op7"]);
    assert!(t.diagnostics.get(DiagKind::Truncated).is_none());
}

#[test]
fn stray_bracket_between_events() {
    let t = check("stray_bracket_between_events.json");
    assert_eq!(t.events.len(), 8, "{:?}", t.diagnostics.sorted());
    assert_eq!(t.meta.trace_name.as_deref(), Some("x"));
    assert!(t.diagnostics.get(DiagKind::Truncated).is_none());
}

#[test]
fn damaged_last_event_then_metadata() {
    let t = check("damaged_last_event_then_metadata.json");
    assert_eq!(t.events.len(), 7);
    // The base time written after the events still applies.
    assert_eq!(t.events.ts_ns[0], 1_700_000_000_000_000_000 + 1_000_000);
    let d = diag(&t, DiagKind::MalformedEvent);
    assert!(d.message.contains("the end of the event array"), "{}", d.message);
    assert!(t.diagnostics.get(DiagKind::Truncated).is_none());
}

#[test]
fn cut_inside_string_is_truncation() {
    let t = check("cut_inside_string.json");
    assert_eq!(t.events.len(), 7);
    assert!(t.diagnostics.get(DiagKind::Truncated).is_some());
    assert!(t.diagnostics.get(DiagKind::MalformedEvent).is_none());
}

#[test]
fn non_trace_json_is_not_a_trace() {
    for name in ["non_trace_array.json", "non_trace_object.json"] {
        let b = bytes(name);
        let e = ingest_chunked(name, &b, 3).err().unwrap_or_else(|| panic!("{name} read as a trace"));
        assert!(e.to_string().contains("not a trace"), "{e}");
    }
}

#[test]
fn base_time_at_i64_max() {
    let t = check("base_time_at_i64_max.json");
    assert_eq!(t.meta.base_time_ns, None);
    assert_eq!(t.events.ts_ns, [1_000_000, 1_010_000, 1_020_000]);
    assert!(diag(&t, DiagKind::OutOfRange).message.contains("baseTimeNanoseconds"));
}

#[test]
fn ts_far_negative() {
    let t = check("ts_far_negative.json");
    assert_eq!(names(&t), ["op0", "op1"]);
    assert!(diag(&t, DiagKind::OutOfRange).message.contains("`ts`"));
    let j = job(t);
    let r = rankscope_core::inspect::report(&j, vec![]);
    assert!(r.files[0].span.dur_ns >= 0);
}

#[test]
fn rank_1e23() {
    let t = check("rank_1e23.json");
    assert_eq!(t.meta.distributed.as_ref().and_then(|d| d.rank), None);
    assert!(diag(&t, DiagKind::OutOfRange).message.contains("1e23"));
}

#[test]
fn world_size_negative() {
    let t = check("world_size_negative.json");
    assert_eq!(t.meta.distributed.as_ref().and_then(|d| d.world_size), None);
    assert!(diag(&t, DiagKind::OutOfRange).message.contains("-8"));
}

#[test]
fn outlier_at_ts0() {
    let j = job(check("outlier_at_ts0.json"));
    let t = &j.ranks[0].trace;
    // Kept in the table, flagged, and left out of the span (3 ms of real events, not 54 years).
    assert_eq!(t.events.len(), 31);
    assert_eq!(diag(t, DiagKind::TimeOutlier).count, 1);
    let r = rankscope_core::inspect::report(&j, vec![]);
    assert!(r.files[0].span.dur_ns < 10_000_000, "{:?}", r.files[0].span);
}

#[test]
fn hostile_names_stay_text_in_markdown_and_csv() {
    let j = job(check("hostile_names.json"));
    let a = rankscope_core::diagnose::analyze(&j, &Default::default());
    let md = rankscope_core::diagnose::markdown::markdown(&a);
    // Every `<` and `|` that came from the trace is escaped.
    assert!(md.contains("backend \\<img src=x onerror=alert(1)\\>"), "{md}");
    assert!(md.contains("| pg\\|\\`x\\` \\# y |"), "{md}");
    assert!(!md.lines().any(|l| l.starts_with("# y")), "{md}");
}

#[test]
fn trailing_data_is_counted_once() {
    let t = check("trailing_data_long.json");
    let d = diag(&t, DiagKind::TrailingData);
    assert_eq!(d.count, 1);
    assert!(d.message.starts_with("1601 bytes"), "{}", d.message);
}

#[test]
fn gzip_cut_in_header_says_so() {
    let b = bytes("gzip_cut_in_header.json.gz");
    let e = ingest_chunked("cut.json.gz", &b, 2).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("gzip") && !e.contains("empty"), "{e}");
}

#[test]
fn gzip_corrupt_deflate_keeps_what_inflates_whatever_the_read_size() {
    let b = bytes("gzip_corrupt_deflate.json.gz");
    let counts: Vec<(usize, u64)> = [1usize, 7, 4096, 1 << 20]
        .iter()
        .map(|&c| {
            let t = ingest_chunked("c.json.gz", &b, c).unwrap_or_else(|e| panic!("{e}"));
            assert!(t.diagnostics.get(DiagKind::GzipCorrupt).is_some());
            (t.events.len(), t.text_bytes)
        })
        .collect();
    assert!(counts[0].0 > 1000, "{counts:?}");
    assert!(counts.iter().all(|c| *c == counts[0]), "{counts:?}");
}
