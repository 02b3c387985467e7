//! The mismatch engine fed from traces, the way the analysis will feed it: the zoo's hung
//! runs, each rank's collective instances (`analyze::instances::rank_instances`) turned into
//! `CollRecord::basic` records. A worked example of the adapter for the lead's `hang` finding.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::path::PathBuf;

use rankscope_core::analyze::instances::rank_instances;
use rankscope_core::normalize::{assemble, Rules};
use rankscope_core::sequence::{self, Backend, CollRecord, RankSeq, SeqOptions, Source};

fn zoo_traces(case: &str) -> Vec<RankSeq> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/zoo")).join(case);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".pt.trace.json.gz"))
        .collect();
    files.sort();
    let traces = files
        .iter()
        .map(|p| common::ingest_chunked(&p.display().to_string(), &common::read(p), 1 << 20))
        .map(|t| t.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let job = assemble(traces, &[], &Rules::default());
    job.ranks
        .iter()
        .map(|r| {
            let records = rank_instances(r, &job.strings)
                .iter()
                .map(|i| {
                    CollRecord::basic(
                        &i.pg,
                        i.kind,
                        i.seq,
                        i.bytes,
                        Some(i.start_ns),
                        Some(i.end_ns),
                        Some(i.step),
                        None,
                    )
                })
                .collect();
            RankSeq {
                rank: r.rank,
                source: Source::Trace,
                backend: Backend::Gloo,
                file: String::new(),
                records,
            }
        })
        .collect()
}

#[test]
fn early_exit_from_traces() {
    let seqs = zoo_traces("early_exit");
    let r = sequence::analyze(&seqs, &SeqOptions { world: vec![0, 1, 2, 3], ..Default::default() });
    let first = &r.diagnoses[0];
    assert_eq!(first.kind, sequence::DiagnosisKind::Hang, "{:#?}", r.diagnoses);
    assert_eq!(first.ranks, vec![3]);
    // The waits end at the 8 s timeout, seen in the data; rank 3 stopped after step 2.
    assert!(
        first.sentence.starts_with("Ranks 0, 1 and 2 waited 8.0")
            && first.sentence.contains("as by a timeout of 8 s"),
        "{}",
        first.sentence
    );
    assert!(first.sentence.contains("rank 3 never issued it: its last collective was all_reduce #6 (step 2"));
}

#[test]
fn skipped_allreduce_from_traces() {
    let seqs = zoo_traces("hang_skipped_allreduce");
    let r = sequence::analyze(&seqs, &SeqOptions { world: vec![0, 1, 2, 3], ..Default::default() });
    // The gloo traces carry no group names: both groups are one sequence by ordinal. Rank 1's
    // 8th collective is step 4's gradients where the others have step 3's scalar loss.
    let first = &r.diagnoses[0];
    assert_eq!(first.kind, sequence::DiagnosisKind::Mismatch, "{:#?}", r.diagnoses);
    assert_eq!(first.ranks, vec![1]);
    let d = r.first_divergence().unwrap_or_else(|| panic!("no divergence"));
    assert_eq!(d.shifts.len(), 1);
    assert_eq!((d.shifts[0].rank, d.shifts[0].by, d.shifts[0].basis), (1, 1, sequence::ShiftBasis::Step));
    assert!(
        first.sentence.contains("rank 1 is already in step 4: it skipped all_reduce #8 (step 3"),
        "{}",
        first.sentence
    );
}
