//! The diagnosis of every `rankscope synth --scenario` preset against what its manifest says
//! was injected: the first finding names the cause on the injected ranks, its estimated gain is
//! the injected amount (within the noise the generator adds), and a preset with nothing
//! injected gets no finding that would send a user after a cause. The real-run counterpart
//! (the zoo) is in `zoo.rs`; these cover GPU traces, which the zoo (gloo on CPU) cannot.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is the test failing

mod common;

use common::ingest_chunked;
use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::analyze;
use rankscope_core::finding::Severity;
use rankscope_core::normalize::{assemble, Rules};
use rankscope_synth::{self as synth, Cause, Injected, Scenario, SynthConfig};

fn run(s: Scenario) -> (Analysis, Injected) {
    let cfg = SynthConfig { steps: 5, ..s.config() };
    let man = synth::manifest(&cfg);
    let traces: Vec<_> = synth::write_ranks(&cfg, vec![Vec::new(); cfg.ranks as usize])
        .expect("write_ranks")
        .into_iter()
        .enumerate()
        .map(|(r, (b, _))| ingest_chunked(&synth::file_name(r as u32, false), &b, 1 << 20).expect("a trace"))
        .collect();
    let job = assemble(traces, &[], &Rules::default());
    (analyze(&job, &Options::default()), man.injected)
}

fn ids(a: &Analysis) -> Vec<String> {
    a.findings.iter().map(|f| format!("{}{:?} {} ns", f.id, f.ranks, f.impact_ns)).collect()
}

/// The id the findings use for an injected cause.
fn finding_id(c: Cause) -> &'static str {
    match c {
        Cause::Hang => "collective_mismatch",
        c => c.id(),
    }
}

/// Checks the first finding against the manifest; `rel` bounds the gain against the injected
/// amount (None: the amount is not a per-step gain, as for a hang).
fn check(s: Scenario, rel: Option<f64>) -> Analysis {
    let (a, inj) = run(s);
    let cause = inj.cause.expect("a cause was injected");
    let f = a.findings.first().unwrap_or_else(|| panic!("{}: no finding; injected {inj:?}", s.name()));
    assert_eq!(f.id, finding_id(cause), "{}: {:?}", s.name(), ids(&a));
    assert_eq!(f.ranks, inj.ranks, "{}: {:?}", s.name(), ids(&a));
    if let Some(rel) = rel {
        let want = inj.amount_ns as f64;
        assert!(
            (f.impact_ns as f64 - want).abs() <= rel * want,
            "{}: gain {} ns against {} injected ({:?})",
            s.name(),
            f.impact_ns,
            inj.amount_ns,
            ids(&a)
        );
    }
    a
}

#[test]
fn host_stall_is_named_in_its_region_with_its_amount() {
    let a = check(Scenario::HostStall, Some(0.4));
    let f = &a.findings[0];
    let l = f.location.as_ref().expect("located");
    assert_eq!(l.regions.last().map(String::as_str), Some("straggler_sleep"), "{l:?}");
    assert!(!a.findings.iter().any(|f| f.id == "exposed_comm"), "{:?}", ids(&a));
}

#[test]
fn slow_dataloader_is_input_bound_on_its_rank() {
    let a = check(Scenario::SlowDataloader, Some(0.4));
    assert!(!a.findings.iter().any(|f| f.id == "host_stall" || f.id == "compute_imbalance"), "{:?}", ids(&a));
}

#[test]
fn uneven_batch_is_compute_imbalance() {
    let a = check(Scenario::UnevenBatch, None);
    assert!(!a.findings.iter().any(|f| f.id == "slow_device"), "{:?}", ids(&a));
}

#[test]
fn slow_gpu_is_a_slow_device_not_more_work() {
    let a = check(Scenario::SlowGpu, Some(0.4));
    assert!(!a.findings.iter().any(|f| f.id == "compute_imbalance"), "{:?}", ids(&a));
}

#[test]
fn host_sync_on_every_rank_is_one_finding_not_a_straggler() {
    let a = check(Scenario::HostSync, None);
    assert!(
        !a.findings.iter().any(|f| f.id == "cpu_bound" && f.impact_ns >= a.findings[0].impact_ns),
        "{:?}",
        ids(&a)
    );
    assert!(!a.findings.iter().any(|f| f.id == "straggler" || f.id == "host_stall"), "{:?}", ids(&a));
}

#[test]
fn hangs_come_first_and_nothing_reads_the_timeout_as_communication() {
    for s in [Scenario::HangSkippedCollective, Scenario::EarlyExit] {
        let a = check(s, None);
        assert!(
            !a.findings.iter().any(|f| f.id == "exposed_comm" || f.id == "straggler"),
            "{}: {:?}",
            s.name(),
            ids(&a)
        );
        assert_eq!(a.findings.iter().filter(|f| f.id == "collective_mismatch").count(), 1, "{:?}", ids(&a));
    }
}

#[test]
fn nothing_injected_nothing_to_chase() {
    for s in [Scenario::Baseline, Scenario::GoodOverlap, Scenario::AllToAll] {
        let (a, inj) = run(s);
        assert_eq!(inj.cause, None);
        assert!(!a.findings.iter().any(|f| f.severity >= Severity::Medium), "{}: {:?}", s.name(), ids(&a));
    }
}

#[test]
fn all_to_all_over_sendrecv_kernels_is_an_all_to_all() {
    let (a, _) = run(Scenario::AllToAll);
    let c = a
        .collectives
        .iter()
        .find(|c| c.bytes_p50 == Some(16 << 20))
        .unwrap_or_else(|| panic!("{:?}", a.collectives));
    assert_eq!(c.kind.name(), "all_to_all");
}

/// The preset's buckets are all launched while backward still runs and finish under it: the
/// small all_reduces cost nothing here, and saying otherwise would be a finding without a gain.
/// (The real run in the zoo, whose buckets are exposed, is diagnosed `small_collectives`.)
#[test]
fn small_buckets_hidden_behind_backward_claim_no_gain() {
    let (a, inj) = run(Scenario::SmallBuckets);
    assert_eq!(inj.cause, Some(Cause::SmallCollectives));
    let exposed: i64 = a.rank_totals.iter().map(|t| t.exposed_transfer_ns).sum();
    let wall: i64 = a.rank_totals.iter().map(|t| t.wall_ns).sum();
    if (exposed as f64) < 0.01 * wall as f64 {
        assert!(!a.findings.iter().any(|f| f.severity >= Severity::Medium), "{:?}", ids(&a));
    } else {
        assert_eq!(a.findings.first().map(|f| f.id.as_str()), Some("small_collectives"), "{:?}", ids(&a));
    }
}
