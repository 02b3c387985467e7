//! One tiny fixture per malformed-input case (tests/fixtures/edge/NAME), each fed whole and in
//! 1-, 2- and 7-byte chunks, which must agree.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::*;
use rankscope_core::model::*;
use rankscope_core::normalize::{assemble, Job, Rules};
use rankscope_core::parse::IngestError;

/// Ingests a fixture whole and in tiny chunks; checks the results agree; returns the job.
fn check(name: &str) -> Job {
    let bytes = read(&fixture(&format!("edge/{name}")));
    let whole = ingest_chunked(name, &bytes, bytes.len().max(1)).unwrap_or_else(|e| panic!("{e}"));
    for chunk in [1, 2, 7] {
        let t = ingest_chunked(name, &bytes, chunk).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.events.ts_ns, whole.events.ts_ns, "{name} chunk {chunk}");
        assert_eq!(t.events.dur_ns, whole.events.dur_ns, "{name} chunk {chunk}");
        assert_eq!(t.counts.by_ph, whole.counts.by_ph, "{name} chunk {chunk}");
        let kinds = |t: &RankTrace| t.diagnostics.iter().map(|d| (d.kind, d.count)).collect::<Vec<_>>();
        assert_eq!(kinds(&t), kinds(&whole), "{name} chunk {chunk}");
    }
    assemble(vec![whole], &[], &Rules::default())
}

fn fails(name: &str) -> IngestError {
    let bytes = read(&fixture(&format!("edge/{name}")));
    match ingest_chunked(name, &bytes, 3) {
        Ok(_) => panic!("{name} should not be a trace"),
        Err(e) => e,
    }
}

fn names(job: &Job) -> Vec<&str> {
    let t = &job.ranks[0].trace;
    t.events.name.iter().map(|n| job.strings.get(*n)).collect()
}

fn diag(job: &Job, k: DiagKind) -> Option<&Diagnostic> {
    job.ranks[0].trace.diagnostics.get(k)
}

#[test]
fn truncated_mid_event() {
    let job = check("truncated_mid_event.json");
    assert_eq!(names(&job), ["aten::mm", "aten::add"]);
    let d = diag(&job, DiagKind::Truncated).unwrap_or_else(|| panic!("no truncation diagnostic"));
    assert_eq!(d.severity, Severity::DATA_LOSS);
    // The cut event starts line 5.
    let text = std::fs::read(fixture("edge/truncated_mid_event.json")).unwrap_or_default();
    let line5 = text.iter().enumerate().filter(|(_, &b)| b == b'\n').nth(3).map(|(i, _)| i as u64 + 1);
    assert_eq!(d.first_offset, line5);
    assert_eq!(job.ranks[0].rank, 2);
    assert_eq!(job.ranks[0].trace.events.ts_ns[0], 100_500);
}

#[test]
fn int_beyond_64_bits() {
    let job = check("int_beyond_64_bits.json");
    assert_eq!(names(&job), ["k", "aten::add"]);
    let d = diag(&job, DiagKind::IntOverflow).unwrap_or_else(|| panic!("no overflow diagnostic"));
    assert_eq!(d.count, 2);
    // The overflowing timestamp made its event unusable; it is skipped and counted.
    assert_eq!(diag(&job, DiagKind::MissingTimestamp).map(|d| d.count), Some(1));
}

#[test]
fn unquoted_na() {
    let job = check("unquoted_na.json");
    let t = &job.ranks[0].trace;
    assert_eq!(names(&job), ["record_param_comms", "aten::add"]);
    assert_eq!(diag(&job, DiagKind::BareWord).map(|d| d.count), Some(3));
    assert_eq!(t.comm.in_nelems, [-1]);
    assert_eq!(t.comm.out_nelems, [1024]);
    assert_eq!(t.comm.group_size, [8]);
    assert_eq!(diag(&job, DiagKind::MissingDuration).map(|d| d.count), Some(1));
}

#[test]
fn rank_list_cut_with_dots() {
    let job = check("rank_list_cut_with_dots.json");
    let t = &job.ranks[0].trace;
    let d = t.meta.distributed.clone().unwrap_or_default();
    assert_eq!(d.world_size, Some(256));
    assert_eq!(d.pg_config[0].ranks, [0, 1, 2, 3]);
    assert_eq!(job.strings.get(t.comm.pg_ranks[0]), "[0, 1, 2, ...]");
    assert_eq!(job.strings.get(t.comm.pg_ranks[1]), "[0, 1, 2, 3, ..., 255]");
    assert_eq!(t.events.coll_kind(0), CollKind::AllReduce);
    assert_eq!(t.events.coll_kind(1), CollKind::AllGather);
    assert!(diag(&job, DiagKind::BareWord).is_some());
}

#[test]
fn missing_fields() {
    let job = check("missing_fields.json");
    assert_eq!(names(&job), ["no_dur", "", "ok"]);
    assert_eq!(diag(&job, DiagKind::MissingTimestamp).map(|d| d.count), Some(1));
    assert_eq!(diag(&job, DiagKind::MissingDuration).map(|d| d.count), Some(1));
    assert_eq!(diag(&job, DiagKind::MissingPhase).map(|d| d.count), Some(1));
}

#[test]
fn negative_duration() {
    let job = check("negative_duration.json");
    let t = &job.ranks[0].trace;
    assert_eq!(t.events.dur_ns, [0, 1000]);
    assert_eq!(t.events.ts_ns, [100_250, 101_000]);
    assert_eq!(diag(&job, DiagKind::NegativeDuration).map(|d| d.severity), Some(Severity::REPAIRED));
}

#[test]
fn unmatched_begin_end() {
    let job = check("unmatched_begin_end.json");
    let t = &job.ranks[0].trace;
    // outer (never closed: closed at its thread's last time, 25 µs), inner, later, the other
    // thread's unclosed B (closed at its own start).
    assert_eq!(names(&job), ["outer", "inner", "later", "never_closed_other_thread"]);
    assert_eq!(t.events.dur_ns, [15_000, 3_000, 5_000, 0]);
    assert_eq!(diag(&job, DiagKind::UnmatchedEnd).map(|d| d.count), Some(1));
    assert_eq!(diag(&job, DiagKind::UnclosedBegin).map(|d| d.count), Some(2));
}

#[test]
fn bare_array_form() {
    let job = check("bare_array_form.json");
    let t = &job.ranks[0].trace;
    assert_eq!(t.meta.form, "array");
    assert_eq!(names(&job), ["a", "mark", "b"]);
    assert_eq!(t.events.kind[1], EventKind::Instant);
    // The array is never closed: that is truncation (allowed by the format, still noted).
    assert!(diag(&job, DiagKind::Truncated).is_some());
}

#[test]
fn counters() {
    let job = check("counters.json");
    let t = &job.ranks[0].trace;
    let series: Vec<(&str, f64)> =
        (0..t.counters.len()).map(|i| (job.strings.get(t.counters.series[i]), t.counters.value[i])).collect();
    assert_eq!(series, [("allocated", 1024.0), ("reserved", 2048.5), ("value", 7.0)]);
}

#[test]
fn trailing_garbage() {
    let job = check("trailing_garbage.json");
    assert_eq!(names(&job), ["a"]);
    assert_eq!(diag(&job, DiagKind::TrailingData).map(|d| d.severity), Some(Severity::Info));
}

#[test]
fn not_a_trace() {
    let e = fails("not_a_trace_object.json");
    assert!(
        e.to_string().contains("not_a_trace_object.json") && e.to_string().contains("not a trace"),
        "{e}"
    );
    let e = fails("not_a_trace_binary.json");
    let msg = e.to_string();
    assert!(msg.contains("at byte 0") && msg.contains("0x89"), "{msg}");
    let e = fails("empty.json");
    assert!(e.to_string().contains("empty"), "{e}");
}

#[test]
fn string_tids_2021() {
    let job = check("string_tids_2021.json");
    let r = &job.ranks[0];
    let t = &r.trace;
    // "25738" on slices and 25738 on flows are one thread.
    let cpu: Vec<usize> = (0..t.lanes.len()).filter(|&l| t.lanes.kind[l] == LaneKind::Cpu).collect();
    assert_eq!(cpu.len(), 1);
    let gpu: Vec<usize> = (0..t.lanes.len()).filter(|&l| t.lanes.kind[l] == LaneKind::Gpu).collect();
    assert_eq!(gpu.len(), 1);
    assert_eq!((t.lanes.device[gpu[0]], t.lanes.stream[gpu[0]]), (0, 7));
    assert_eq!(r.norm.links.gpu.len(), 1);
    assert_eq!(r.norm.steps.number, [5]);
    // The kernel runs after its launch and inherits step 5 from it; the memcpy (no launch) takes
    // the CPU interval holding it.
    assert!(t.events.step.iter().all(|&s| s == 5), "{:?}", t.events.step);
    assert_eq!(t.events.mem_kind(t.events.len() - 1), MemKind::DtoH);
}

#[test]
fn escaped_strings() {
    let job = check("escaped_strings.json");
    assert_eq!(names(&job), ["say \"hi\" é 😀 \\ /", "weird \\q escape"]);
}

#[test]
fn invalid_utf8() {
    let job = check("invalid_utf8.json");
    assert_eq!(names(&job), ["bad\u{fffd}\u{fffd}name", "fine"]);
    assert_eq!(diag(&job, DiagKind::InvalidUtf8).map(|d| d.count), Some(2));
}

#[test]
fn gzip_truncated() {
    let job = check("gzip_truncated.json.gz");
    let t = &job.ranks[0].trace;
    assert!(t.meta.gzip);
    let n = t.events.len();
    assert!(n > 100 && n < 2000, "{n} events kept before the cut");
    // Every kept event is complete and in order.
    assert!((0..n).all(|i| t.events.ts_ns[i] == i as i64 * 10_000));
    assert!(diag(&job, DiagKind::Truncated).is_some());
}

#[test]
fn gzip_is_detected_by_content_not_name() {
    let job = check("gzip_named_plain.json");
    assert!(job.ranks[0].trace.meta.gzip);
    assert_eq!(names(&job), ["a"]);
}

#[test]
fn base_time_after_events() {
    let job = check("base_time_after_events.json");
    let t = &job.ranks[0].trace;
    assert_eq!(t.events.ts_ns, [1_700_000_000_001_000_001]);
    assert_eq!(t.events.dur_ns, [500]);
    assert!(diag(&job, DiagKind::DisplayTimeUnitIgnored).is_some());
}

#[test]
fn missing_comma_and_trailing_comma() {
    let job = check("missing_comma_and_trailing_comma.json");
    assert_eq!(names(&job), ["a", "b", "c"]);
    assert_eq!(diag(&job, DiagKind::MalformedEvent).map(|d| d.count), Some(1));
}

#[test]
fn malformed_event_in_middle() {
    let job = check("malformed_event_in_middle.json");
    assert_eq!(names(&job), ["a", "c"]);
    let d = diag(&job, DiagKind::MalformedEvent).unwrap_or_else(|| panic!("no diagnostic"));
    assert_eq!(d.count, 1);
    assert!(d.message.contains("\"b\""), "{}", d.message);
}

#[test]
fn no_step_markers() {
    let job = check("no_step_markers.json");
    let r = &job.ranks[0];
    assert!(r.norm.steps.synthetic);
    assert_eq!(r.norm.steps.number, [0]);
    assert_eq!((r.norm.steps.start_ns[0], r.norm.steps.end_ns[0]), (1_000, 7_000));
    assert!(diag(&job, DiagKind::NoSteps).is_some());
}

#[test]
fn async_and_unknown_phases() {
    let job = check("async_and_unknown_phases.json");
    assert_eq!(names(&job), ["a"]);
    assert_eq!(diag(&job, DiagKind::UnsupportedPhase).map(|d| d.count), Some(2));
}

#[test]
fn p2p_peers() {
    let job = check("p2p_peers.json");
    let t = &job.ranks[0].trace;
    // One row per communication op; `aten::mm`'s `Concrete Inputs` are not a peer: its row holds
    // its `Input Dims` alone (the FLOPs of analyze::work). The last event writes `args` before
    // its name, so its peer is not known (never guessed) and it has no other communication
    // argument.
    assert_eq!(names(&job), ["c10d::send", "c10d::recv_", "aten::mm", "record_param_comms", "c10d::recv_"]);
    assert_eq!(t.comm.len(), 4);
    assert_eq!(t.comm.src_rank, [-1, 0, -1, 1]);
    assert_eq!(t.comm.dst_rank, [2, -1, -1, 2]);
    assert_eq!(t.comm.tag, [7, 0, -1, -1]);
    assert_eq!(t.comm.seq, [-1, -1, -1, 3]);
    let dims: Vec<&str> = t.comm.input_dims.iter().map(|&s| job.strings.get(s)).collect();
    assert_eq!(dims, ["", "", "[[32,512],[512,512]]", ""]);
}
