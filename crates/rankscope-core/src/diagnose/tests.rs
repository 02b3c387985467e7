//! The arbitration on hand-made candidates: each rule of the module doc, one test.

use super::*;
use crate::finding::{Evidence, FindingId, Severity};

fn finding(id: FindingId, impact_ns: i64) -> Finding {
    Finding {
        id,
        severity: Severity::Medium,
        message: format!("{id}."),
        fix: String::new(),
        ranks: vec![1],
        steps: vec![0, 1],
        evidence: Evidence::default(),
        quotes: Vec::new(),
        quotes_total: 0,
        symptoms: Vec::new(),
        location: None,
        impact_ns,
    }
}

fn found(v: &[(CauseId, FindingId, i64)]) -> Found {
    Found {
        list: v
            .iter()
            .map(|&(cause, id, ns)| Candidate { cause, finding: finding(id, ns), replayed: None })
            .collect(),
    }
}

fn ids(v: &[Finding]) -> Vec<(&str, i64)> {
    v.iter().map(|f| (f.id.as_str(), f.impact_ns)).collect()
}

const FLOOR: f64 = 1_000_000.0;
const STEP: f64 = 100_000_000.0;

#[test]
fn parts_take_their_gain_off_the_whole_and_name_it() {
    let out = arbitrate(
        found(&[
            (CauseId::BlockingCollectives, FindingId::HostSync, 2_000_000),
            (CauseId::SmallCollectives, FindingId::SmallCollectives, 3_000_000),
            // Too small to report, and still not the whole's to claim.
            (CauseId::SmallCollectives, FindingId::SmallCollectives, 500_000),
            (CauseId::ExposedComm, FindingId::ExposedComm, 10_000_000),
        ]),
        FLOOR,
        STEP,
    );
    assert_eq!(
        ids(&out),
        [("exposed_comm", 4_500_000), ("small_collectives", 3_000_000), ("host_sync", 2_000_000)]
    );
    assert_eq!(out[1].symptoms, [FindingId::ExposedComm]);
    // A whole smaller than its parts saves nothing of its own, and is dropped.
    let out = arbitrate(
        found(&[
            (CauseId::HostSync, FindingId::HostSync, 8_000_000),
            (CauseId::CpuBound, FindingId::CpuBound, 6_000_000),
        ]),
        FLOOR,
        STEP,
    );
    assert_eq!(ids(&out), [("host_sync", 8_000_000)]);
}

#[test]
fn a_whole_says_what_its_parts_are() {
    let mut f = found(&[
        (CauseId::PipelineStall, FindingId::HostStall, 30_000_000),
        (CauseId::PipelineBubble, FindingId::PipelineBubble, 50_000_000),
    ]);
    f.list[0].finding.ranks = vec![2];
    let out = arbitrate(f, FLOOR, STEP);
    assert_eq!(ids(&out), [("host_stall", 30_000_000), ("pipeline_bubble", 20_000_000)]);
    assert!(
        out[1].message.ends_with("Part of it is rank 2's own host time (`host_stall`)."),
        "{}",
        out[1].message
    );
    assert_eq!(out[0].symptoms, [FindingId::PipelineBubble]);
}

#[test]
fn explained_findings_are_dropped_but_not_a_causes_own() {
    // A late rank explains the spread of step times; the job-wide input finding explains the
    // late rank's input finding (it took it in), not itself.
    let out = arbitrate(
        found(&[
            (CauseId::LateRank, FindingId::InputBound, 20_000_000),
            (CauseId::InputBound, FindingId::InputBound, 30_000_000),
            (CauseId::StepJitter, FindingId::StepJitter, 5_000_000),
        ]),
        FLOOR,
        STEP,
    );
    assert_eq!(ids(&out), [("input_bound", 30_000_000)]);
}

#[test]
fn below_the_floor_is_dropped_and_a_gain_is_capped_at_the_step() {
    let out = arbitrate(
        found(&[
            (CauseId::AllocatorChurn, FindingId::AllocatorChurn, 999_999),
            (CauseId::ExposedComm, FindingId::ExposedComm, 250_000_000),
        ]),
        FLOOR,
        STEP,
    );
    assert_eq!(ids(&out), [("exposed_comm", 100_000_000)]);
}

#[test]
fn ranked_by_gain_then_severity_then_id_name() {
    let mut f = found(&[
        (CauseId::StepJitter, FindingId::StepJitter, 5_000_000),
        (CauseId::CpuBound, FindingId::CpuBound, 5_000_000),
        (CauseId::AllocatorChurn, FindingId::AllocatorChurn, 5_000_000),
        (CauseId::BelowFabric, FindingId::BelowFabric, 7_000_000),
    ]);
    f.list[0].finding.severity = Severity::High;
    let out = arbitrate(f, FLOOR, STEP);
    let got: Vec<&str> = out.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(got, ["below_fabric", "step_jitter", "allocator_churn", "cpu_bound"]);
}

#[test]
fn a_stopped_jobs_first_divergence_comes_first_whatever_its_gain() {
    let out = arbitrate(
        found(&[
            (CauseId::CollectiveMismatch, FindingId::CollectiveMismatch, 0),
            (CauseId::CollectiveMismatch, FindingId::CollectiveMismatch, 9_000_000_000),
            (CauseId::ExposedComm, FindingId::ExposedComm, 20_000_000),
        ]),
        FLOOR,
        STEP,
    );
    assert_eq!(ids(&out), [("collective_mismatch", 0), ("exposed_comm", 20_000_000)]);
}

#[test]
fn a_cause_found_excludes_the_causes_it_names() {
    // The late rank runs before the ranks-taking-turns cause and keeps it from running.
    let late = CAUSES[CauseId::LateRank as usize];
    assert!(late.excludes.contains(&CauseId::ArrivalJitter));
    let mut f = found(&[(CauseId::LateRank, FindingId::HostStall, 20_000_000)]);
    let stub = Cause {
        find: |_, _| vec![finding(FindingId::ArrivalJitter, 1)],
        ..*CAUSES[CauseId::ArrivalJitter as usize]
    };
    // An analysis of no ranks.
    let a = analyze::combine(Vec::new(), Vec::new(), &Options::default()).analysis;
    let th = Thresholds::default();
    let cx = Ctx::new(&a, &[], &th, &BTreeSet::new());
    run(&stub, &cx, &mut f);
    assert_eq!(f.list.len(), 1, "arrival_jitter ran beside a late rank");
    let mut none = Found::default();
    run(&stub, &cx, &mut none);
    assert_eq!(none.list.len(), 1);
}
