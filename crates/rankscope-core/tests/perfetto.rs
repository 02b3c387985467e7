//! The Perfetto multi-trace archive, read back as Perfetto would: a well-formed ustar (magic,
//! checksums, sizes, padding, end blocks), one Chrome JSON per rank on its own clock, and a
//! version 1 `perfetto_manifest.json` whose pins are exactly the analysis' alignment.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::*;
use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::analyze;
use rankscope_core::export::{self, perfetto};
use rankscope_core::model::RankTrace;
use rankscope_core::normalize::{assemble, Job, Rules};
use rankscope_synth::{self as synth, SynthConfig};
use serde_json::Value;

/// The archive as the CLI writes it (the export plan's).
fn archive(job: &Job, a: &Analysis) -> (Vec<u8>, perfetto::Plan) {
    let plan = export::ExportPlan::new(
        &a.alignment,
        job.ranks.iter().map(|r| (r.rank, r.trace.events.ts_ns.iter().min().copied())),
    );
    let mut out = Vec::new();
    plan.write_perfetto(&mut out, |k, mut w, at| {
        export::write_rank(&mut w, &job.ranks[k], &job.strings, at, true)?;
        export::write_step_track(w, &job.ranks[k], at)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    (out, plan.perfetto())
}

/// Reads a ustar archive, checking every header; returns `(path, bytes)` per member.
fn untar(b: &[u8]) -> Vec<(String, Vec<u8>)> {
    assert_eq!(b.len() % 512, 0, "whole blocks");
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let h = &b[at..at + 512];
        if h.iter().all(|&x| x == 0) {
            assert!(b[at..].iter().all(|&x| x == 0) && b.len() - at >= 1024, "two zero blocks end it");
            break;
        }
        let text =
            |r: std::ops::Range<usize>| String::from_utf8_lossy(&h[r]).trim_end_matches('\0').to_string();
        assert_eq!(&h[257..265], b"ustar\x0000", "ustar magic and version");
        assert_eq!(h[156], b'0', "a regular file");
        let mut blank = h.to_vec();
        blank[148..156].fill(b' ');
        let sum: u32 = blank.iter().map(|&x| u32::from(x)).sum();
        assert_eq!(u32::from_str_radix(text(148..155).trim(), 8).ok(), Some(sum), "checksum");
        let size = u64::from_str_radix(&text(124..136), 8).unwrap_or_else(|e| panic!("size: {e}")) as usize;
        let start = at + 512;
        out.push((text(0..100), b[start..start + size].to_vec()));
        let padded = size.div_ceil(512) * 512;
        assert!(b[start + size..start + padded].iter().all(|&x| x == 0), "zero padding");
        at = start + padded;
    }
    out
}

fn check(job: &Job, a: &Analysis) {
    let (bytes, plan) = archive(job, a);
    let members = untar(&bytes);
    let names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
    let mut want: Vec<String> = job.ranks.iter().map(|r| format!("rank{}.json", r.rank)).collect();
    want.push("perfetto_manifest.json".into());
    assert_eq!(names, want);

    let (_, man) = members.last().unwrap_or_else(|| panic!("no manifest"));
    let text = String::from_utf8_lossy(man);
    let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(squeezed.starts_with("{\"perfetto_manifest\""), "detected by content");
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    let m = &v["perfetto_manifest"];
    assert_eq!(m["version"], 1);
    let files = m["files"].as_array().unwrap_or_else(|| panic!("files"));
    assert_eq!(files.len(), job.ranks.len());
    let reference = &a.alignment[0];
    for (f, r) in files.iter().zip(&job.ranks) {
        assert_eq!(f["path"], format!("rank{}.json", r.rank));
        assert_eq!(f["machine"]["name"], format!("rank {}", r.rank), "one machine per rank");
        let al = a.alignment.iter().find(|x| x.rank == r.rank).unwrap_or_else(|| panic!("alignment"));
        if r.rank == reference.rank {
            assert!(f.get("clocks").is_none(), "the reference is not pinned");
        } else {
            let c = &f["clocks"];
            assert_eq!(c["sync_to"]["file"], format!("rank{}.json", reference.rank));
            assert!(
                c.get("clock").is_none() && c["sync_to"].get("clock").is_none(),
                "JSON is clockless: a pin"
            );
            // On the reference's timeline the rank reads own time + offset_ns; the analysis has
            // aligned = own − offset for both: offset_ns = offset(reference) − offset(rank).
            assert_eq!(c["offset_ns"].as_i64(), Some(reference.offset_ns - al.offset_ns), "rank {}", r.rank);
        }
    }

    // Each rank's file: its own events on its own clock less the shift; placed by its pin, the
    // job starts at exactly 0 and nothing is before it.
    let mut earliest = i64::MAX;
    for ((_, body), (r, member)) in members.iter().zip(job.ranks.iter().zip(&plan.members)) {
        let doc: Value = serde_json::from_slice(body).unwrap_or_else(|e| panic!("rank {}: {e}", r.rank));
        assert_eq!(doc["otherData"]["rankscope"]["rank"], r.rank);
        let ev = doc["traceEvents"].as_array().unwrap_or_else(|| panic!("traceEvents"));
        let (ours, timed): (Vec<&Value>, Vec<&Value>) =
            ev.iter().filter(|e| e["ph"] == "X" || e["ph"] == "i").partition(|e| e["cat"] == export::OUR_CAT);
        assert_eq!(timed.len(), r.trace.events.len(), "rank {}: every event row", r.rank);
        assert_eq!(ours.len(), r.norm.steps.len(), "rank {}: the steps track", r.rank);
        let ns = |e: &Value| (e["ts"].as_f64().unwrap_or(f64::NAN) * 1000.0).round() as i64;
        let min_own = r.trace.events.ts_ns.iter().min().copied().unwrap_or(0);
        let min_file = timed.iter().map(|e| ns(e)).min().unwrap_or(0);
        assert!(
            (min_file - (min_own - plan.shift_ns)).abs() <= 1,
            "rank {}: own clock less the shift",
            r.rank
        );
        earliest = earliest.min(min_file + member.pin_ns.unwrap_or(0));
    }
    assert!(earliest.abs() <= 1, "the job starts at 0 on the reference timeline: {earliest}");
}

#[test]
fn synthetic_job_archive_pins_every_rank_with_the_alignment() {
    let cfg = SynthConfig { ranks: 4, steps: 3, straggler_rank: Some(2), ..SynthConfig::default() };
    let outs = synth::write_ranks(&cfg, vec![Vec::new(); 4]).unwrap_or_else(|e| panic!("{e}"));
    let traces: Vec<RankTrace> = outs
        .iter()
        .enumerate()
        .map(|(r, (b, _))| {
            ingest_chunked(&format!("rank{r}.json"), b, 1 << 20).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    let job = assemble(traces, &[], &Rules::default());
    let a = analyze(&job, &Options::default());
    assert!(a.alignment.iter().any(|x| x.offset_ns != 0), "the synthetic clocks are skewed");
    check(&job, &a);
}

#[test]
fn dlrm_archive_is_well_formed_and_pins_every_rank_with_the_alignment() {
    let job = assemble(load_dir("traces/param-dlrm-8rank"), &[], &Rules::default());
    let a = analyze(&job, &Options::default());
    check(&job, &a);
    // With user offsets too (they win over estimates): the pins follow.
    let opts = Options { offsets: vec![(3, 1_500_000), (6, -250_000)], ..Options::default() };
    let b = analyze(&job, &opts);
    assert!(b.alignment.iter().any(|x| x.offset_ns == 1_500_000));
    check(&job, &b);
}
