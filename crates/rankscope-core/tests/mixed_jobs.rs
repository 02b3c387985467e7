//! Files of different jobs are said to be, first, and nothing is judged over them
//! (docs/metrics.md, "One job or several"): two real gloo runs of different world sizes dropped
//! together, and one run whose ranks were profiled a year apart.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // the tests read the zoo's files

mod common;

use rankscope_core::analyze::jobs::{self, Claim};
use rankscope_core::analyze::Options;
use rankscope_core::diagnose::{analyze, markdown::markdown};
use rankscope_core::normalize::{assemble, JobError, Rules};

fn zoo(name: &str, file: &str) -> (String, Vec<u8>) {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/zoo").join(name).join(file);
    (p.display().to_string(), common::read(&p))
}

#[test]
fn two_runs_of_different_world_sizes_are_two_jobs() {
    let mut files: Vec<(String, Vec<u8>)> =
        (0..4).map(|r| zoo("baseline", &format!("rank{r}.pt.trace.json.gz"))).collect();
    files.extend((0..2).map(|r| zoo("identical_2rank", &format!("rank{r}.pt.trace.json.gz"))));
    let traces: Vec<_> = files
        .iter()
        .map(|(n, b)| common::ingest_chunked(n, b, 1 << 20).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    // The second run's files named as ranks 4 and 5 (they claim 0 and 1).
    let explicit: Vec<(String, u32)> = vec![(files[4].0.clone(), 4), (files[5].0.clone(), 5)];
    let job = assemble(traces, &explicit, &Rules::default());
    let a = analyze(&job, &Options::default());
    let mixed = a.errors.iter().find_map(|e| match e {
        JobError::MixedJobs { jobs, why } => Some((jobs.clone(), why.clone())),
        _ => None,
    });
    let (jobs, why) = mixed.unwrap_or_else(|| panic!("not told apart: {:?}", a.errors));
    assert_eq!(jobs, vec![vec![0, 1, 2, 3], vec![4, 5]]);
    assert_eq!(why, "world size 4 against 2");
    assert!(a.findings.is_empty(), "{:?}", a.findings.iter().map(|f| f.id.as_str()).collect::<Vec<_>>());
    let md = markdown(&a);
    let lead = md.lines().find(|l| !l.is_empty() && !l.starts_with('#')).unwrap_or_default();
    assert!(lead.starts_with("**These files come from 2 different jobs"), "{lead}");
    // Each run alone is one job.
    for (name, n) in [("baseline", 4), ("identical_2rank", 2)] {
        let traces = (0..n)
            .map(|r| {
                let (p, b) = zoo(name, &format!("rank{r}.pt.trace.json.gz"));
                common::ingest_chunked(&p, &b, 1 << 20).unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        let a = analyze(&assemble(traces, &[], &Rules::default()), &Options::default());
        assert!(a.errors.is_empty(), "{name}: {:?}", a.errors);
    }
}

#[test]
fn ranks_profiled_a_year_apart_are_two_runs_and_a_clock_skew_is_not() {
    let traces = (0..4)
        .map(|r| {
            let (p, b) = zoo("baseline", &format!("rank{r}.pt.trace.json.gz"));
            common::ingest_chunked(&p, &b, 1 << 20).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    let a = analyze(&assemble(traces, &[], &Rules::default()), &Options::default());
    let window = |r: u32| {
        let rows = a.steps.iter().flat_map(|s| s.per_rank.iter().filter(move |x| x.rank == r));
        let (s, e): (Vec<i64>, Vec<i64>) = rows.map(|x| (x.start_ns, x.end_ns)).unzip();
        (s.into_iter().min().unwrap_or(0), e.into_iter().max().unwrap_or(0))
    };
    let year = 365 * 86_400 * 1_000_000_000i64;
    let shifted = |skew: i64| -> (Vec<Vec<u32>>, Option<String>) {
        let claims: Vec<Claim<'_>> = a
            .ranks
            .iter()
            .map(|info| {
                let (s, e) = window(info.rank);
                let d = if info.rank >= 2 { skew } else { 0 };
                Claim { info, window: Some((s + d, e + d)) }
            })
            .collect();
        jobs::split(&claims)
    };
    let (split, why) = shifted(year);
    assert_eq!(split, vec![vec![0, 1], vec![2, 3]]);
    // The gap between the windows: a year less the profiled span.
    assert_eq!(why.as_deref(), Some("profiled 364 days apart"));
    // Hosts whose clocks disagree by seconds are one job.
    let (split, why) = shifted(5_000_000_000);
    assert_eq!((split.len(), why), (1, None));
}
