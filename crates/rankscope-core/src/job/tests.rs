//! The job API's tests: folder candidates, and the two digest formats round-tripped through
//! `combine` (what the job stores is what it gives back).

use std::io::Read;

use super::digest::{self, decode, decode_lean, decode_lean_raw, decode_with_limit, encode, is_digest};
use super::digest::{JobDigest, JobDigestError, LeanDigest};
use super::*;
use crate::analyze::{Options, RankPart};
use crate::view::RankClaim;

#[test]
fn folder_candidates() {
    for n in ["rank0.json", "w.pt.trace.json.gz", "TESTS.TXT", "nccl.Log", "slurm-1.out"] {
        assert!(is_folder_candidate(n), "{n}");
    }
    for n in ["notes.md", "model.pt", "json", "a.json.bz2"] {
        assert!(!is_folder_candidate(n), "{n}");
    }
}

/// Parts combined from their bytes equal the parts combined as values.
#[test]
fn parts_combined_from_bytes_equal_parts_combined_from_values() {
    use digest::part::{self, Piece};
    let files = parts(4);
    let decoded: Vec<(RankClaim, RankPart)> = files
        .iter()
        .map(|(c, p)| match part::decode("p", &part::encode_trace(c, p)) {
            Ok(Piece::Trace { claim, part }) => (claim, *part),
            other => panic!("{other:?}"),
        })
        .collect();
    let opts = Options::default();
    assert_eq!(combine(decoded, &[], &[], &opts).json(), combine(files, &[], &[], &opts).json());
}

fn parts(ranks: u32) -> Vec<(RankClaim, RankPart)> {
    digest::tests::synth_parts(ranks)
}

fn fr_text() -> Text {
    let mut bytes: Vec<u8> = (0..=255u8).collect();
    bytes.extend_from_slice(b"\n\n");
    Text { name: "fr_rank3".into(), kinds: vec![InputKind::FlightRecorder], bytes }
}

/// `n` synth parts with their decided ranks and a Flight Recorder text, combined.
fn combined(n: u32) -> (Vec<(RankClaim, RankPart)>, [Text; 1], JobOutput) {
    let (files, errors) = decided(parts(n), &[]);
    let texts = [fr_text()];
    let refs: Vec<TextRef<'_>> = texts.iter().map(Text::as_ref).collect();
    let out =
        combine_decided(files.iter().map(|(_, p)| p.clone()).collect(), errors, &refs, &Options::default());
    (files, texts, out)
}

#[test]
fn round_trips_and_gives_back_what_combine_made() {
    let (files, texts, out) = combined(4);
    let refs: Vec<TextRef<'_>> = texts.iter().map(Text::as_ref).collect();
    let enc = encode(&files, &refs, &out.analysis);
    assert!(is_digest(&enc));
    assert_eq!(detect(&enc), InputKind::Digest);
    let d = decode("job.rsdigest", &enc).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.files, files);
    assert_eq!(d.texts, texts.to_vec());
    assert_eq!(d.clone().into_output().json(), out.json());
    // Read lean part by part, it is the whole digest made lean.
    let lean = decode_lean("job.rsdigest", &enc).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lean, d.clone().lean());
    assert_ne!(lean.files, d.files, "lean parts drop what only combine reads");
    // With the analysis left as JSON (the app's worker), sent apart from the rest (the
    // message does not carry it) and parsed where it arrives, it is the same digest.
    let raw = decode_lean_raw("job.rsdigest", &enc).unwrap_or_else(|e| panic!("{e}"));
    let msg = serde_json::to_string(&raw).unwrap_or_default();
    assert!(msg.len() < raw.analysis_json.len() + 50_000 && !msg.contains("\"alignment\""));
    let mut back: LeanDigest = serde_json::from_str(&msg).unwrap_or_else(|e| panic!("{e}"));
    assert!(back.analysis_json.is_empty());
    back.analysis_json = raw.analysis_json.clone();
    assert_eq!(back.with_analysis(), Ok(lean.clone()));
    // A damaged analysis names its byte of the inflated content, as the whole read does,
    // at its start or deep in the line.
    let mut bad = raw.clone();
    let mid = bad.analysis_json.len() / 2;
    bad.analysis_json[mid] = 0;
    let at_mid = bad.clone().with_analysis().err().map(|e| e.to_string()).unwrap_or_default();
    assert!(at_mid.contains(&format!("inflated byte {}", raw.analysis_at + mid as u64)), "{at_mid}");
    bad.analysis_json = raw.analysis_json.clone();
    bad.analysis_json[0] = b'!';
    let e = bad.with_analysis().err().map(|e| e.to_string()).unwrap_or_default();
    let want = format!("job.rsdigest: damaged rankscope job digest (at inflated byte {}): ", raw.analysis_at);
    assert!(e.starts_with(&want), "{e} / {want}");
    // Damaged or cut texts and bytes after them: errors at the inflated byte, as is a cut
    // file or a flipped byte (each read lean or whole).
    let framed = |content: &[u8]| {
        digest::frame::frame(digest::MAGIC, digest::VERSION, 0, |gz| {
            let _ = gz.write_all(content);
        })
    };
    let mut content = Vec::new();
    let mut gz = flate2::read::GzDecoder::new(enc.get(10..).unwrap_or_default());
    let _ = gz.read_to_end(&mut content);
    let e = decode("j", &framed(&content[..content.len() - 3])).err().map(|e| e.to_string());
    assert!(
        e.as_deref().is_some_and(|e| e.starts_with("j: damaged rankscope job digest (at inflated byte ")
            && e.ends_with("ends inside the text `fr_rank3`")),
        "{e:?}"
    );
    let mut more = content.clone();
    more.extend_from_slice(b"xyz");
    let e = decode_lean("j", &framed(&more)).err().map(|e| e.to_string());
    assert_eq!(
        e,
        Some(format!(
            "j: damaged rankscope job digest (at inflated byte {}): 3 bytes after the last text",
            content.len()
        ))
    );
    for i in (10..enc.len()).step_by(13) {
        let mut m = enc.clone();
        m[i] ^= 0x20;
        if let (Ok(a), Ok(b)) = (decode("m", &m), decode_lean("m", &m)) {
            assert_eq!(a.lean(), b);
        }
    }
    // Through the Reader, in small chunks, as every shell reads it.
    let mut r = Reader::new("job.rsdigest");
    for c in enc.chunks(7) {
        r.feed(c);
    }
    match r.finish() {
        Ok(Loaded::Text(t)) => assert_eq!((t.kinds, t.bytes), (vec![InputKind::Digest], enc.clone())),
        other => panic!("{other:?}"),
    }
}

#[test]
fn traces_added_find_their_rank_by_name_then_by_claim() {
    let (files, _) = decided(parts(3), &[]);
    let d = JobDigest {
        files,
        texts: Vec::new(),
        analysis: std::sync::Arc::new(combine(parts(3), &[], &[], &Options::default()).analysis),
    };
    let c = |f: &str, r: Option<i64>| RankClaim { file: f.into(), claimed_rank: r, in_file: None };
    let got: Vec<Option<u32>> = d
        .place(&[
            c("/elsewhere/rank2.pt.trace.json", None),
            c("renamed.json", Some(1)),
            c("x.json", Some(1)),
            c("y.json", Some(7)),
        ])
        .into_iter()
        .map(|p| p.map(|p| p.decision.rank))
        .collect();
    assert_eq!(got, [Some(2), Some(1), None, None]);
    let s = d.summary(1).unwrap_or_else(|| panic!("summary"));
    assert_eq!((s.rank, s.steps.len()), (1, 2));
    assert!(s.span_start_ns < s.span_end_ns);
}

#[test]
fn the_lean_digest_places_and_summarizes_as_the_whole_one() {
    let (files, texts, out) = combined(3);
    let refs: Vec<TextRef<'_>> = texts.iter().map(Text::as_ref).collect();
    let enc = encode(&files, &refs, &out.analysis);
    let whole = decode("job.rsdigest", &enc).unwrap_or_else(|e| panic!("{e}"));
    let lean = decode_lean("job.rsdigest", &enc).unwrap_or_else(|e| panic!("{e}"));
    // Copied while shared, moved out when alone: the same output.
    assert_eq!(lean.clone().into_output().json(), out.json());
    let alone = decode_lean("job.rsdigest", &enc).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(std::sync::Arc::strong_count(&alone.analysis), 1);
    assert_eq!(alone.into_output().json(), out.json());
    assert_eq!(lean.reports(), (out.fabric.clone(), out.flight_recorder.clone()));
    let c = |f: &str, r: Option<i64>| RankClaim { file: f.into(), claimed_rank: r, in_file: None };
    let claims = [c("/elsewhere/rank2.pt.trace.json", None), c("renamed.json", Some(1))];
    assert_eq!(lean.place(&claims), whole.place(&claims));
    for i in 0..3 {
        assert_eq!(lean.summary(i), whole.summary(i));
        assert_eq!(lean.files[i].1.instances, whole.files[i].1.instances);
    }
}

#[test]
fn wrong_bytes_are_errors_that_name_the_input() {
    let (files, errors) = decided(parts(2), &[]);
    let out =
        combine_decided(files.iter().map(|(_, p)| p.clone()).collect(), errors, &[], &Options::default());
    let enc = encode(&files, &[], &out.analysis);
    assert_eq!(decode("x", b"RSPART\x01\x00"), Err(JobDigestError::NotADigest { name: "x".into() }));
    let mut v2 = enc.clone();
    v2[8] = 2;
    assert_eq!(decode("x", &v2), Err(JobDigestError::Version { name: "x".into(), found: 2 }));
    for n in (0..enc.len()).step_by(97) {
        assert!(decode("c", &enc[..n]).is_err(), "cut at {n}");
    }
    assert_eq!(
        decode_with_limit("t", &enc, 100),
        Err(JobDigestError::TooLarge { name: "t".into(), limit: 100 })
    );
}
