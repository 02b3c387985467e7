//! Issue 39: no input costs more than its size. Each test is one hostile claim or shape, named
//! for it; sizes are asserted by what was built (world lists, diagnostics), never by time.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // the tests read fixtures from disk

mod common;

use rankscope_core::analyze::Options;
use rankscope_core::fr::{self, FrDump, MAX_PRESUMED_RANKS};
use rankscope_core::job::{self, InputKind, TextRef};
use rankscope_core::model::DiagKind;

/// The healthy JSON dump of rank 0 (torch 2.15, gloo), as text.
fn healthy_json() -> String {
    let p = common::fixture("fr").join("healthy/json/fr_trace_rank_0.json");
    String::from_utf8(common::read(&p)).unwrap_or_else(|e| panic!("{e}"))
}

/// A small dump with `extra` members spliced in at the top level.
fn small_dump(extra: &str) -> String {
    let h = healthy_json();
    // The first entry only: `{"comm_lib_version":"","entries":[{...}` … `]` dropped after it.
    let first_end = h.find("},{").unwrap_or_else(|| panic!("no second entry"));
    format!(
        r#"{{{extra}"comm_lib_version":"","entries":[{}}}],"pg_config":{{"0":{{"desc":"default_pg","name":"0","ranks":"[0, 1]"}}}},"version":"2.10"}}"#,
        &h[h.find("[{").unwrap_or(0) + 1..first_end]
    )
}

fn read(name: &str, text: &str) -> FrDump {
    fr::read(name, text.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
}

fn has(d: &FrDump, kind: DiagKind, words: &str) -> bool {
    d.diagnostics.iter().any(|x| x.kind == kind && x.message.contains(words))
}

#[test]
fn fr_rank_member_beyond_any_world_is_a_diagnostic_not_a_size() {
    let d = read("fr_dump.json", &small_dump(r#""rank":999999999,"#));
    assert_eq!(d.rank, None);
    assert!(has(&d, DiagKind::OutOfRange, "`rank` 999999999 is not a rank"), "{:?}", d.diagnostics);
    let (dumps, skipped) = fr::decide_ranks(vec![d]);
    assert!(skipped.is_empty());
    assert_eq!(dumps[0].rank, 0);
    assert_eq!(fr::options(&dumps).world, vec![0, 1]);
}

#[test]
fn fr_file_name_rank_beyond_any_world_is_a_diagnostic_not_a_size() {
    let d = read("fr_trace_rank_999999999.json", &small_dump(""));
    let (dumps, _) = fr::decide_ranks(vec![d]);
    assert_eq!(dumps[0].rank, 0);
    assert!(
        dumps[0]
            .dump
            .diagnostics
            .iter()
            .any(|x| x.kind == DiagKind::OutOfRange && x.message.contains("999999999")),
        "{:?}",
        dumps[0].dump.diagnostics
    );
    assert_eq!(fr::options(&dumps).world, vec![0, 1]);
}

#[test]
fn fr_pg_config_rank_beyond_any_world_is_dropped() {
    let text =
        small_dump("").replace(r#""ranks":"[0, 1]""#, r#""ranks":"[0, 999999999, 99999999999999999999999]""#);
    let d = read("fr_trace_rank_0.json", &text);
    assert_eq!(d.pg_config[0].ranks, vec![0]);
    assert!(
        d.diagnostics.iter().any(|x| x.kind == DiagKind::OutOfRange && x.count == 2),
        "{:?}",
        d.diagnostics
    );
}

#[test]
fn fr_pg_config_of_many_ranks_presumes_none_beyond_the_cap() {
    // 200,000 ranks listed (1.4 MB): more than the presumed-rank cap, so only the dump's rank is
    // expected and a note says how many were claimed (each presumed rank is a report row).
    let list: Vec<String> = (0..200_000).map(|r| r.to_string()).collect();
    let text = small_dump("").replace(r#""ranks":"[0, 1]""#, &format!(r#""ranks":"[{}]""#, list.join(", ")));
    let d = read("fr_trace_rank_0.json", &text);
    assert_eq!(d.pg_config[0].ranks.len(), 200_000);
    let (dumps, _) = fr::decide_ranks(vec![d]);
    assert_eq!(fr::options(&dumps).world, vec![0]);
    let r = fr::job_report(&dumps);
    assert!(r.ranks.len() <= MAX_PRESUMED_RANKS, "{}", r.ranks.len());
    assert!(r.notes.iter().any(|n| n.contains("at least 200000 ranks")), "{:?}", r.notes);
}

#[test]
fn fr_many_ranks_without_a_dump_are_one_diagnosis() {
    let text =
        small_dump("").replace(r#""ranks":"[0, 1]""#, r#""ranks":"[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]""#);
    let (dumps, _) = fr::decide_ranks(vec![read("fr_trace_rank_0.json", &text)]);
    let r = fr::job_report(&dumps);
    let none: Vec<_> =
        r.diagnoses.iter().filter(|d| d.kind == rankscope_core::sequence::DiagnosisKind::NoInput).collect();
    assert_eq!(none.len(), 1);
    assert_eq!(none[0].ranks, (1..12).collect::<Vec<u32>>());
    assert!(
        none[0].sentence.starts_with("11 ranks (1–11) have no Flight Recorder dump"),
        "{}",
        none[0].sentence
    );
}

#[test]
fn fr_json_non_finite_numbers_keep_the_entries() {
    let h = healthy_json();
    let n = read("fr_trace_rank_0.json", &h).entries.len();
    for bad in ["NaN", "1e400", "-Infinity", "Infinity"] {
        let text = h.replacen(r#""timeout_ms":5000"#, &format!(r#""timeout_ms":{bad}"#), 2);
        assert_ne!(text, h);
        let d = read("fr_trace_rank_0.json", &text);
        assert_eq!(d.entries.len(), n, "{bad}");
        assert_eq!(d.entries[0].timeout_ms, None, "{bad}");
        assert_eq!(d.entries[2].timeout_ms, Some(5000), "{bad}");
        let x =
            d.diagnostics.iter().find(|x| x.kind == DiagKind::OutOfRange).unwrap_or_else(|| panic!("{bad}"));
        assert_eq!(x.count, 2, "{bad}");
    }
    // Inside a string it is text.
    let text = h.replacen(r#""thread_name":"python""#, r#""thread_name":"NaN 1e400""#, 1);
    let d = read("fr_trace_rank_0.json", &text);
    assert_eq!(d.entries[0].thread_name, "NaN 1e400");
    assert!(d.diagnostics.is_empty(), "{:?}", d.diagnostics);
}

#[test]
fn fr_json_with_a_10_mb_name_is_read() {
    let name = format!("gloo:all_reduce{}", "x".repeat(10 << 20));
    let text = small_dump("").replacen("gloo:broadcast", &name, 1);
    let d = read("fr_trace_rank_0.json", &text);
    assert_eq!(d.entries.len(), 1);
    assert_eq!(d.entries[0].profiling_name.len(), name.len());
}

#[test]
fn fr_gzip_of_something_else_is_refused_from_its_head() {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(br#"{"x": ""#).unwrap_or_else(|e| panic!("{e}"));
    let block = vec![b'a'; 1 << 20];
    for _ in 0..64 {
        gz.write_all(&block).unwrap_or_else(|e| panic!("{e}"));
    }
    let bytes = gz.finish().unwrap_or_else(|e| panic!("{e}"));
    let e = fr::read("bomb.json.gz", &bytes).err().unwrap_or_else(|| panic!("read as a dump"));
    assert!(e.what.contains("first 64 KiB inflated"), "{e}");
}

/// Synthetic parts of a 4-rank job, one file at a time.
fn parts() -> Vec<(rankscope_core::view::RankClaim, rankscope_core::analyze::RankPart)> {
    let cfg = rankscope_synth::SynthConfig {
        ranks: 4,
        steps: 2,
        straggler_rank: None,
        ..rankscope_synth::SynthConfig::default()
    };
    (0..4)
        .map(|rank| {
            let mut bytes = Vec::new();
            rankscope_synth::write_rank(&cfg, rank, &mut bytes).unwrap_or_else(|e| panic!("{e}"));
            let t = rankscope_core::parse::ingest_bytes(&rankscope_synth::file_name(rank, false), &bytes)
                .unwrap_or_else(|e| panic!("{e}"));
            job::part_of(t, &rankscope_core::normalize::Rules::default(), &Options::default())
                .into_iter()
                .next()
                .unwrap_or_else(|| panic!("no part"))
        })
        .collect()
}

#[test]
fn part_claiming_a_world_of_a_billion_is_a_diagnostic_not_a_size() {
    let mut files = parts();
    files[3].1.world_size = Some(1_000_000_000);
    files[3].1.info.world_size = Some(1_000_000_000);
    let out = job::combine(files, &[], &[], &Options::default());
    let r3 = out.analysis.ranks.iter().find(|r| r.rank == 3).unwrap_or_else(|| panic!("rank 3 lost"));
    assert_eq!(r3.world_size, None);
    assert_eq!(out.analysis.ranks.len(), 4);
    assert!(
        out.analysis.diagnostics.iter().any(|d| d.rank == 3
            && d.diagnostic.kind == DiagKind::OutOfRange
            && d.diagnostic.message.contains("1000000000")),
        "{:?}",
        out.analysis.diagnostics
    );
}

#[test]
fn part_claiming_a_rank_beyond_its_world_is_said() {
    let mut files = parts();
    files[2].0.claimed_rank = Some(1_000_000_000);
    let out = job::combine(files, &[], &[], &Options::default());
    assert!(
        out.analysis.diagnostics.iter().any(|d| d.rank == 1_000_000_000
            && d.diagnostic.kind == DiagKind::OutOfRange
            && d.diagnostic.message.contains("world of 4")),
        "{:?}",
        out.analysis.diagnostics
    );
}

#[test]
fn dumps_beside_traces_keep_both() {
    let text = small_dump(r#""rank":999999999,"#);
    let texts =
        [TextRef { name: "fr_dump.json", kinds: &[InputKind::FlightRecorder], bytes: text.as_bytes() }];
    let out = job::combine(parts(), &[], &texts, &Options::default());
    assert_eq!(out.analysis.ranks.len(), 4);
    let f = out.flight_recorder.unwrap_or_else(|| panic!("no dumps"));
    assert_eq!(f.dumps.len(), 1);
}

#[test]
fn terminal_text_escapes_osc_title_hyperlink_clipboard_and_bidi() {
    use rankscope_core::escape::terminal;
    let s = "a\u{1b}]0;title\u{7}b\u{1b}]8;;http://x\u{1b}\\c\u{1b}]52;c;ZXZpbA==\u{7}\r\u{9b}\u{202e}d\n\te";
    let t = terminal(s);
    assert_eq!(
        t,
        "a\\x1b]0;title\\x07b\\x1b]8;;http://x\\x1b\\c\\x1b]52;c;ZXZpbA==\\x07\\x0d\\u{9b}\\u{202e}d\n\te"
    );
    assert!(matches!(terminal("plain ✓ text\n"), std::borrow::Cow::Borrowed(_)));
}

#[test]
fn nccl_log_with_cr_only_line_endings_reads_as_with_lf() {
    let p = common::fixture("nccl").join("log_2.21_pxn_two-communicators.log");
    let lf = common::read(&p);
    let cr: Vec<u8> = lf.iter().map(|&b| if b == b'\n' { b'\r' } else { b }).collect();
    let report = |b: &[u8]| {
        let r =
            rankscope_core::nccl::analyze_logs(&[rankscope_core::nccl::Input { name: "x.log", bytes: b }]);
        serde_json::to_string(&r).unwrap_or_default()
    };
    assert_eq!(rankscope_core::nccl::sniff_input(&cr), vec![InputKind::NcclLog]);
    assert_eq!(report(&cr), report(&lf));
}

fn refusal(name: &str, bytes: &[u8]) -> String {
    match rankscope_core::parse::ingest_bytes(name, bytes) {
        Ok(_) => panic!("{name} read as a trace"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn whitespace_and_a_lone_brace_are_not_called_empty() {
    assert!(refusal("ws.json", b"  \n\t ").ends_with("the file holds only whitespace"));
    assert!(refusal("brace.json", b" { \n")
        .ends_with("the file ends right after its opening `{`: cut before any content"));
    assert!(refusal("empty.json", b"").ends_with("the file is empty"));
}

#[test]
fn utf16_traces_and_parts_are_named_with_what_to_do() {
    let text = r#"{"traceEvents":[]}"#;
    let le: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let be_bom: Vec<u8> =
        [0xFE, 0xFF].into_iter().chain(text.encode_utf16().flat_map(u16::to_be_bytes)).collect();
    for b in [le, be_bom] {
        let e = refusal("u16.json", &b);
        assert!(e.contains("UTF-16") && e.contains("iconv"), "{e}");
    }
    let e = refusal("rank0.part", b"RSPART\x01\x00\x1f\x8b");
    assert!(e.contains("rankscope combine"), "{e}");
}

#[test]
fn files_with_no_event_are_not_ranks_beyond_the_world() {
    use rankscope_core::view::RankClaim;
    let c =
        |file: &str, rank: Option<i64>| RankClaim { file: file.into(), claimed_rank: rank, in_file: None };
    let (a, b, cut, lacking, beyond) = (
        c("r0.json", Some(0)),
        c("r1.json", Some(1)),
        c("cut.json", None),
        c("x.json", Some(2)),
        c("rank9.json", None),
    );
    let files = vec![
        (&a, 10, Some(4)),
        (&b, 10, Some(4)),
        (&cut, 0, None),     // load order: would be rank 2, a rank of nothing
        (&lacking, 0, None), // claims rank 2 of 4, which no file holds: kept, it recorded nothing
        (&beyond, 0, None),  // rank 9 of a world of 4
    ];
    assert_eq!(job::eventless(&files), vec![2, 4]);
    // Nothing has events: nothing is dropped.
    assert!(job::eventless(&[(&cut, 0, None)]).is_empty());
}

#[test]
fn a_member_nested_past_128_before_trace_events_keeps_the_events() {
    let events = r#""traceEvents":[{"ph":"X","name":"a","ts":1,"dur":2,"pid":1,"tid":1},{"ph":"X","name":"b","ts":5,"dur":2,"pid":1,"tid":1}]"#;
    for (open, close) in [("[", "]"), (r#"{"a":"#, "}"), (r#"[{"a":"#, "}]")] {
        for depth in [129, 300, 5000] {
            let doc = format!(r#"{{"deep": {}1{}, {events}}}"#, open.repeat(depth), close.repeat(depth));
            for chunk in [1, 7, 4096, 1 << 20] {
                let t = common::ingest_chunked("deep.json", doc.as_bytes(), chunk)
                    .unwrap_or_else(|e| panic!("{open} {depth} {chunk}: {e}"));
                assert_eq!(t.events.len(), 2, "{open} {depth} {chunk}");
                let d: Vec<_> = t.diagnostics.sorted();
                assert_eq!(d.len(), 1, "{open} {depth} {chunk}: {d:?}");
                assert_eq!(d[0].kind, DiagKind::OversizedValue);
                assert!(d[0].message.contains("nests deeper than 128"), "{}", d[0].message);
            }
        }
    }
}

/// Names that differ only past their first bytes spread over the table's buckets (counted, not
/// timed): hashbrown picks a bucket by the hash's low bits, which the multiply alone left equal.
#[test]
fn look_alike_names_spread_over_buckets() {
    use std::hash::{BuildHasher, BuildHasherDefault};
    let b = BuildHasherDefault::<rankscope_core::model::strings::FxHasher>::default();
    let n = 1 << 16;
    let mut buckets = std::collections::BTreeSet::new();
    for i in 0..n {
        let key: Box<[u8]> = format!("void gemm_kernel<{i}>").into_bytes().into_boxed_slice();
        buckets.insert(b.hash_one(&key) & (n as u64 * 2 - 1));
    }
    // A uniform hash fills about 1 − e^(−1/2) ≈ 39% of 2n buckets with n keys.
    assert!(buckets.len() > n * 2 * 35 / 100, "{} of {} buckets", buckets.len(), n * 2);
}

/// Chains of 40,000 slices nested in one another, operators only and regions and operators
/// alternating: the regions pass asks the top of its stack, not the whole stack, per slice, and
/// keeps regions 64 deep at most (the scans and the fold made it quadratic in the depth: 32,000
/// operators deep took 12 s in a debug build, 16,000 alternating 17 s; now 0.1–0.2 s).
#[test]
fn slices_nested_40000_deep_are_analysed() {
    for alternate in [false, true] {
        nested(40_000, alternate);
    }
}

fn nested(n: i64, alternate: bool) {
    let mut ev = vec![format!(
        r#"{{"ph":"X","name":"ProfilerStep#1","ts":0,"dur":{},"pid":1,"tid":1,"cat":"user_annotation"}}"#,
        10 * n + 10
    )];
    for i in 0..n {
        let cat = if alternate && i % 2 == 1 { "user_annotation" } else { "cpu_op" };
        ev.push(format!(
            r#"{{"ph":"X","name":"f","ts":{},"dur":{},"pid":1,"tid":1,"cat":"{cat}"}}"#,
            1 + i,
            10 * n - 2 * i
        ));
    }
    let doc = format!(r#"{{"traceEvents":[{}]}}"#, ev.join(","));
    let t =
        rankscope_core::parse::ingest_bytes("rank0.json", doc.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.events.len() as i64, n + 1);
    let a = rankscope_core::diagnose::analyze(
        &rankscope_core::normalize::assemble(vec![t], &[], &rankscope_core::normalize::Rules::default()),
        &Options::default(),
    );
    assert_eq!(a.ranks.len(), 1);
    assert_eq!(a.steps.len(), 1);
}

/// A part inflates to at most 256 times its size (64 MiB at least), whatever its head says: a
/// log line then 100 MiB of blanks (a 100 kB part) is refused, not held.
#[test]
fn a_part_inflating_far_beyond_its_size_is_refused() {
    use rankscope_core::job::digest::part::{self, PartError, Piece};
    let mut bytes = b"nodeA:100:100 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\n".to_vec();
    bytes.resize(100 << 20, b' ');
    let enc = part::encode(&Piece::Text(job::Text {
        name: "nccl.log".into(),
        kinds: vec![InputKind::NcclLog],
        bytes,
    }));
    assert!(enc.len() < 1 << 20, "{}", enc.len());
    match part::decode("blank.part", &enc) {
        Err(PartError::TooLarge { limit, .. }) => assert_eq!(limit, 64 << 20),
        other => panic!("{:?}", other.map(|p| p.name().to_string())),
    }
}

/// What `fuzz/fuzz_targets/part_digest.rs` does, a few hundred times here: a real trace part's
/// inflated head with bytes replaced (numbers and claims included), encoded again, decoded and
/// combined; never a panic, never a world sized by a claim.
#[test]
fn damaged_part_heads_decode_or_fail_and_combine() {
    use rankscope_core::job::digest::part::{self, Piece};
    let (claim, p) = parts().swap_remove(1);
    let head = serde_json::to_vec(&serde_json::json!({
        "schema": "rankscope.part", "producer": "x", "kind": "trace", "claim": claim, "part": p,
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let mut rng = rankscope_synth::Rng::new(0x39);
    let digits = b"0123456789-e.9999999999";
    let (mut read, mut combined) = (0, 0);
    for _ in 0..300 {
        let mut h = head.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(h.len());
            h[at] = digits[rng.below(digits.len())];
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &h).unwrap_or_else(|e| panic!("{e}"));
        std::io::Write::write_all(&mut gz, b"\n").unwrap_or_else(|e| panic!("{e}"));
        let mut enc = part::MAGIC.to_vec();
        enc.extend_from_slice(&part::VERSION.to_le_bytes());
        enc.extend(gz.finish().unwrap_or_else(|e| panic!("{e}")));
        if let Ok(Piece::Trace { claim, part }) = part::decode("m.part", &enc) {
            read += 1;
            let out = job::combine(vec![(claim, *part)], &[], &[], &Options::default());
            let _ = out.markdown();
            combined += 1;
        }
    }
    assert!(read > 0 && combined == read, "{read} {combined}");
}
