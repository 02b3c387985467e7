//! The fourth blind check (`tests/zoo/make_zoo_blind4.py`, tests/zoo/README.md): real runs
//! written as users write them (no step markers, one profiled step, evaluation or checkpoints
//! on one rank), each read as a new user would read its first finding.

// Tests read the zoo from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::zoo::*;

use rankscope_core::finding::{EvidenceKey, Severity};

/// A profiler wrapped around the loop with no schedule and no `prof.step()`: no ProfilerStep
/// marks the steps, so they end at the optimizer's. Rank 2's sleep in `augment` is then a
/// host stall of that rank, measured per step.
#[test]
fn a_loop_without_step_markers_is_stepped_at_the_optimizer() {
    let name = "no_step_markers";
    let (job, _) = load(name);
    for r in &job.ranks {
        assert!(r.norm.steps.from_optimizer, "{name}: rank {} not stepped by its optimizer", r.rank);
        assert!(r.norm.steps.number.len() >= 3, "{name}: {} steps", r.norm.steps.number.len());
    }
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    let l = f.location.as_ref().unwrap_or_else(|| panic!("{name}: no place: {}", f.message));
    assert_eq!(l.regions.last().map(String::as_str), Some("augment"), "{name}: {:?}", l.regions);
    close(f.evidence[EvidenceKey::StallNs], measured(&spec, 2, "injected_sleep_ms"), "rank 2's stall");
    // Nothing else in these steps is advice: the loop's one-off collectives are no host sync.
    assert!(!ids(&a).contains(&"host_sync"), "{name}: {:?}", ids(&a));
}

/// One profiled step is still a step: rank 1's slow DataLoader is found in it, at the size
/// the rank measured itself.
#[test]
fn one_profiled_step_names_the_slow_loader() {
    let name = "one_step_loader";
    let (a, spec) = run(name);
    assert_eq!(a.steps.len(), 1, "{name}: {} steps", a.steps.len());
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    close(f.evidence[EvidenceKey::DataLoadingNs], measured(&spec, 1, "data_ms"), "rank 1's data loading");
}

/// Evaluation on rank 0 only: more compute on that rank, placed in the region no other rank
/// runs, with the advice to take it off the step.
#[test]
fn evaluation_on_one_rank_is_more_work_in_its_region() {
    let name = "rank0_validate";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    assert!(
        f.message.contains("`validate`") && f.message.contains("which no other rank runs"),
        "{}",
        f.message
    );
    assert!(f.fix.contains("`validate`"), "{}", f.fix);
    assert!(
        f.evidence[EvidenceKey::ComputeNs] > 1.15 * f.evidence[EvidenceKey::OthersComputeNs],
        "{name}: {:?}",
        f.evidence
    );
}

/// A checkpoint saved after backward every other step: the rank starts the next step late,
/// and the words say where that lateness comes from, in the step before.
#[test]
fn a_checkpoint_that_delays_the_next_step_is_found_in_the_step_before() {
    let name = "ckpt_rank0_alternate";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    assert!(f.message.contains("the step before ends with `save_checkpoint`"), "{}", f.message);
    assert!(f.message.contains("which no other rank runs"), "{}", f.message);
    // Every other step: the finding names the steps it holds in, not all of them.
    assert!(f.steps.len() < a.steps.len(), "{name}: {:?} of {}", f.steps, a.steps.len());
}

/// Three healthy ranks whose every weight is larger than a 1 MB bucket: a few all_reduces a
/// step, no bucket advice, no rank to blame. Three ranks on two cores take turns at the CPU;
/// without recorded shapes that cannot be told from a batch that moves, and the words say so.
#[test]
fn large_weights_in_small_buckets_are_not_small_collectives() {
    let name = "world3_1mb_buckets";
    let (a, spec) = run(name);
    check_expected(name, &a, &spec);
    for f in &a.findings {
        assert!(f.id == "arrival_jitter" || f.severity <= Severity::Low, "{name}: {} {}", f.id, f.message);
    }
    for f in a.findings.iter().filter(|f| f.id == "arrival_jitter" && f.message.contains("the work moves")) {
        assert!(f.message.contains("record no input shapes"), "{}", f.message);
    }
}
