//! The reducer's tests: the job assembled from the ranks the workers send, as the CLI makes it.

use std::rc::Rc;

use rankscope_core::job;
use rankscope_core::model::RankTrace;
use rankscope_core::normalize::Rules;
use yew::Reducible;

use super::*;
use crate::protocol::{FileId, Phase, RankId};

/// What the worker that reads `trace` as file `file` sends: one `Loaded` per rank it holds, made
/// as the worker makes them ([`crate::worker::rank_views`]).
fn loaded_trace(file: FileId, trace: RankTrace) -> Vec<Action> {
    let rules = Rules::default();
    let (of, views) = crate::worker::rank_views(trace, &rules);
    (0u32..)
        .zip(views)
        .map(|(index, (claim, v))| Action::Loaded {
            id: RankId { file, index },
            of,
            claim,
            summary: Box::new(v.summary().unwrap_or_else(|| panic!("summary"))),
            part: Box::new(v.analysis_part().unwrap_or_else(|| panic!("part"))),
            first_ns: v.first_ns(),
        })
        .collect()
}

fn ingest(name: &str, bytes: &[u8]) -> RankTrace {
    rankscope_core::parse::ingest_bytes(name, bytes).unwrap_or_else(|e| panic!("{e}"))
}

/// The one `Loaded` of a one-event file, with `distributedInfo.rank` when `claimed`.
fn loaded(file: FileId, name: &str, claimed: Option<i64>) -> Action {
    let json = match claimed {
        Some(r) => format!(
            r#"{{"distributedInfo":{{"rank":{r},"world_size":4}},"traceEvents":[{{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2}}]}}"#
        ),
        None => r#"{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2}]}"#.to_string(),
    };
    let mut one = loaded_trace(file, ingest(name, json.as_bytes()));
    assert_eq!(one.len(), 1, "a file of one rank");
    one.remove(0)
}

fn reduce_all(mut s: Rc<State>, actions: Vec<Action>) -> Rc<State> {
    for a in actions {
        s = s.reduce(a);
    }
    s
}

#[test]
fn the_job_is_assembled_when_every_file_is_done() {
    let mut s = Rc::new(State::default());
    let files = vec![("b.json".to_string(), 10), ("a.json".to_string(), 10), ("bad.png".to_string(), 5)];
    s = s.reduce(Action::Start { files, demo: false });
    s = s.reduce(Action::Started { file: 0, now_ms: 1000.0 });
    s = s.reduce(Action::Progress {
        file: 0,
        phase: Phase::Reading,
        input_bytes: 2_000_000,
        events: 5,
        workers: 1,
        now_ms: 2000.0,
    });
    assert!(
        matches!(s.files[0].status, FileStatus::Loading { mb_per_s, .. } if (mb_per_s - 2.0).abs() < 1e-9)
    );
    s = s.reduce(loaded(0, "b.json", None));
    s = s.reduce(Action::Failed { file: 2, error: "bad.png: not a trace".into() });
    assert!(s.job.is_none() && !s.ready(), "a file is still loading");
    s = s.reduce(loaded(1, "a.json", Some(0)));
    // b.json's worker normalized it alone (rank 0); the job decides rank 1 for it, once, and
    // files its summary and part under that key: the worker is never told.
    assert!(s.ready(), "the job is there as soon as the last file is read");
    let a = s.assembly.clone().unwrap_or_else(|| panic!("assembly"));
    let keys: Vec<(FileId, u32)> = a.decisions.iter().map(|(id, d)| (id.file, d.rank)).collect();
    assert_eq!(keys, [(0, 1), (1, 0)]);
    let job = s.job.clone().unwrap_or_else(|| panic!("job"));
    // The exports ask each worker for its rank under the job's number.
    let planned: Vec<(RankId, u32)> =
        job.export_ids.iter().zip(&job.export.ranks).map(|(id, p)| (*id, p.rank)).collect();
    assert_eq!(planned, [(RankId::whole(1), 0), (RankId::whole(0), 1)]);
    // a.json claims rank 0; b.json gets the smallest free rank by load order.
    let got: Vec<(u32, &str, &str)> =
        job.ranks.iter().map(|(_, r)| (r.rank, r.file.as_str(), r.rank_source.as_str())).collect();
    assert_eq!(got, [(0, "a.json", "distributed_info"), (1, "b.json", "load_order")]);
    assert_eq!(job.facts.missing_ranks, [2, 3]);
    let ranks: Vec<(u32, &str)> = job.analysis.ranks.iter().map(|r| (r.rank, r.source.as_str())).collect();
    assert_eq!(ranks, [(0, "a.json"), (1, "b.json")]);
    assert!(job.analysis.rank_totals.iter().zip([0, 1]).all(|(t, r)| t.rank == r));
    // Late progress does not revive a finished file.
    let s2 = s.clone().reduce(Action::Progress {
        file: 2,
        phase: Phase::Reading,
        input_bytes: 1,
        events: 0,
        workers: 1,
        now_ms: 3.0,
    });
    assert!(matches!(s2.files[2].status, FileStatus::Failed(_)));
    let s3 = s.reduce(Action::Reset);
    assert!(s3.files.is_empty() && s3.job.is_none());
}

/// A job digest and a trace of one of its ranks, as bytes (synthetic 4-rank job).
fn digest_and_trace() -> (Vec<u8>, Vec<u8>, rankscope_core::job::JobOutput) {
    use rankscope_synth::{self as synth, SynthConfig};
    let cfg = SynthConfig {
        ranks: 4,
        steps: 2,
        kernels_per_step: 30,
        straggler_rank: Some(1),
        ..SynthConfig::default()
    };
    let mut traces = Vec::new();
    let mut files = Vec::new();
    for rank in 0..4 {
        let mut bytes = Vec::new();
        synth::write_rank(&cfg, rank, &mut bytes).unwrap_or_else(|e| panic!("{e}"));
        let t = ingest(&synth::file_name(rank, false), &bytes);
        files.push(
            job::part_of(t, &Default::default(), &Default::default())
                .into_iter()
                .next()
                .unwrap_or_else(|| panic!("part")),
        );
        traces.push(bytes);
    }
    let (files, errors) = job::decided(files, &[]);
    let out = job::combine_decided(
        files.iter().map(|(_, p)| p.clone()).collect(),
        errors,
        &[],
        &Default::default(),
    );
    let digest = job::digest::encode(&files, &[], &out.analysis);
    (digest, traces.swap_remove(2), out)
}

#[test]
fn a_digest_is_the_job_and_added_traces_land_on_its_ranks() {
    let (digest, trace2, out) = digest_and_trace();
    let mut s = Rc::new(State::default());
    s = s.reduce(Action::Start { files: vec![("job.rsdigest".into(), digest.len() as u64)], demo: false });
    let digest = job::digest::decode("job.rsdigest", &digest).unwrap_or_else(|e| panic!("{e}")).lean();
    s = s.reduce(Action::Digest { file: 0, digest: Rc::new(digest) });
    assert!(s.ready());
    let job = s.job.clone().unwrap_or_else(|| panic!("job"));
    assert_eq!(*job.analysis, out.analysis, "the stored analysis, as combine made it");
    assert_eq!(job.ranks.iter().map(|(_, r)| r.rank).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert!(job.export_ids.is_empty() && job.export.ranks.is_empty(), "no events: nothing to export");
    assert_eq!(job.digest.as_deref(), Some("job.rsdigest"));
    // A trace of rank 2, under another folder: placed on rank 2 by its name, on its offset.
    s = s.reduce(Action::Add { files: vec![("rank2.pt.trace.json".into(), trace2.len() as u64)] });
    assert!(!s.ready());
    s = reduce_all(s, loaded_trace(1, ingest("rank2.pt.trace.json", &trace2)));
    let job = s.job.clone().unwrap_or_else(|| panic!("job"));
    assert_eq!(*job.analysis, out.analysis, "adding a trace changes no figure");
    assert_eq!(job.export_ids, [RankId::whole(1)]);
    assert_eq!(
        job.export.ranks.iter().map(|p| p.rank).collect::<Vec<_>>(),
        [2],
        "exported as the digest's rank 2"
    );
    assert_eq!(job.id_of(2), Some(RankId::whole(1)));
    assert_eq!(job.offset(RankId::whole(1)), out.offset_of(2));
    // A file that is no rank of the job is refused with the reason.
    let mut s2 = s.clone().reduce(Action::Add { files: vec![("other.json".into(), 10)] });
    let other = ingest(
        "other.json",
        br#"{"distributedInfo":{"rank":9},"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2}]}"#,
    );
    s2 = reduce_all(s2, loaded_trace(2, other));
    assert!(
        matches!(&s2.files[2].status, FileStatus::Failed(e) if e.contains("not a rank of this job's digest"))
    );
    assert!(s2.ready());
}

/// A synthetic 4-rank job merged into one file (`rankscope synth --merged`: pid = rank, each
/// process named `rank N`): its worker sends the four ranks it holds, each named as the CLI
/// names it, and the job is `rankscope analyze`'s of that file: the same analysis (figures and
/// findings), the ranks decided from the file, and an export plan asking the file's one worker
/// for each rank under its number.
#[test]
fn a_merged_file_is_its_ranks_as_the_cli_reads_them() {
    use rankscope_synth::{self as synth, SynthConfig};
    let cfg = SynthConfig {
        ranks: 4,
        steps: 3,
        kernels_per_step: 30,
        straggler_rank: Some(3),
        ..SynthConfig::default()
    };
    let docs: Vec<Vec<u8>> = synth::write_ranks(&cfg, vec![Vec::new(); 4])
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|(d, _)| d)
        .collect();
    let offsets: Vec<i64> = synth::manifest(&cfg).ranks.iter().map(|r| r.clock_offset_ns).collect();
    let bytes = synth::merged::merge(&docs, &offsets, true).unwrap_or_else(|e| panic!("{e}"));
    let name = "job.pt.trace.json";
    let (_, cli) = job::analyze_traces(
        vec![ingest(name, &bytes)],
        &[],
        &Rules::default(),
        &[],
        &rankscope_core::analyze::Options::default(),
    );
    let mut s = Rc::new(State::default()).reduce(Action::Start {
        files: vec![(name.to_string(), bytes.len() as u64), ("nccl.log".to_string(), 0)],
        demo: false,
    });
    s = s.reduce(Action::Failed { file: 1, error: "nccl.log: not a trace".into() });
    let mut ranks = loaded_trace(0, ingest(name, &bytes));
    assert_eq!(ranks.len(), 4, "the worker holds the file's four ranks");
    // A rank out of the file's order (a stale message) is dropped; the file is read once its
    // last rank is in.
    let third = ranks.remove(2);
    s = s.reduce(third.clone());
    assert!(s.files[0].ranks.is_empty() && s.parts.is_empty());
    ranks.insert(2, third);
    let last = ranks.pop().unwrap_or_else(|| panic!("four ranks"));
    s = reduce_all(s, ranks);
    assert_eq!((s.files[0].ranks.len(), s.files[0].holds), (3, 4));
    assert!(!s.files[0].status.is_done() && s.job.is_none(), "three of four ranks: still reading");
    s = s.reduce(last);
    assert!(s.ready(), "the job is there once the file's last rank is in");
    let job = s.job.clone().unwrap_or_else(|| panic!("job"));
    assert_eq!(*job.analysis, cli.analysis, "the app's analysis is `rankscope analyze`'s of the file");
    let lead = job.analysis.findings.first().map(|f| (f.id.as_str(), f.ranks.clone()));
    assert_eq!(lead, Some(("slow_device", vec![3])), "the slow rank, found inside the one file");
    let shown: Vec<(RankId, u32, &str, &str)> =
        job.ranks.iter().map(|(id, r)| (*id, r.rank, r.file.as_str(), r.rank_source.as_str())).collect();
    let want: Vec<(RankId, u32, String, &str)> = (0..4)
        .map(|r| {
            (
                RankId { file: 0, index: r },
                r,
                rankscope_core::normalize::multirank::part_name(name, r),
                "in_file",
            )
        })
        .collect();
    assert_eq!(shown, want.iter().map(|(id, r, f, s)| (*id, *r, f.as_str(), *s)).collect::<Vec<_>>());
    assert_eq!(job.export_ids, want.iter().map(|w| w.0).collect::<Vec<_>>());
    assert_eq!(job.export.ranks.iter().map(|p| p.rank).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert!(job.analysis.alignment.iter().all(|a| a.offset_ns == 0), "one file, one clock");
    assert_eq!(s.files[0].events(), job.ranks.iter().map(|(_, r)| r.events).sum::<u64>());
    // The worker that held the file died: its ranks are read again, and come again.
    let lost = s.reduce(Action::Lost { file: 0 });
    assert!(lost.files[0].ranks.is_empty() && lost.parts.is_empty() && lost.job.is_none());
}

#[test]
fn a_baseline_is_compared_with_the_job_and_kept_for_the_next_job() {
    use rankscope_core::compare;
    use std::sync::Arc;
    let open = |s: Rc<State>, name: &str| {
        let files = vec![(name.to_string(), 10)];
        reduce_all(s, vec![Action::Start { files, demo: false }, loaded(0, name, Some(0))])
    };
    let s = open(Rc::new(State::default()), "a.json");
    let job = s.job.clone().unwrap_or_else(|| panic!("job"));
    let base = Arc::new((*job.analysis).clone());
    let s = s.reduce(Action::SetBaseline(Baseline::Reading { name: "b.rsdigest".into() }));
    assert!(s.compared.is_none(), "nothing to compare while the baseline is read");
    let s =
        s.reduce(Action::SetBaseline(Baseline::Ready { name: "b.rsdigest".into(), analysis: base.clone() }));
    let c = s.compared.clone().unwrap_or_else(|| panic!("compared"));
    assert_eq!(c.comparison, compare::compare(&base, &job.analysis, &compare::Options::default()));
    assert!(Arc::ptr_eq(&c.base, &base) && Arc::ptr_eq(&c.new, &job.analysis));
    assert_eq!(c.base_name, "b.rsdigest");
    // Made once per pair: another action keeps it.
    let s = s.reduce(Action::ToggleHelp);
    assert!(s.compared.as_ref().is_some_and(|x| Rc::ptr_eq(x, &c)));
    // Another job is compared with the same baseline.
    let s = open(s, "c.json");
    let next = s.compared.clone().unwrap_or_else(|| panic!("compared with the next job"));
    assert!(Arc::ptr_eq(&next.base, &base) && !Arc::ptr_eq(&next.new, &job.analysis));
    // A failed baseline, or none, compares nothing; the landing page forgets it.
    let failed = Baseline::Failed { name: "x.json".into(), error: "x.json: not a baseline".into() };
    assert!(s.clone().reduce(Action::SetBaseline(failed)).compared.is_none());
    assert!(s.clone().reduce(Action::ClearBaseline).compared.is_none());
    let s = s.reduce(Action::Reset);
    assert!(s.baseline.is_none() && s.compared.is_none());
}
