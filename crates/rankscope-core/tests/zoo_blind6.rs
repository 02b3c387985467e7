//! The sixth blind check (`tests/zoo/make_zoo_blind6.py`, tests/zoo/README.md): real runs of
//! shapes the zoo lacked (HSDP with a barrier on the world group, a hand-written tensor × data
//! parallel job on two hosts' clocks, a hot expert, a garbage-collection pause every other
//! step), made by a helper that saw neither rankscope's output nor its sources.

// Tests read the zoo from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::zoo::*;

use rankscope_core::finding::{EvidenceKey, Severity};
use rankscope_core::model::CollKind;

/// The kinds, groups and group sizes of the job's collectives.
fn placed(a: &rankscope_core::analyze::Analysis) -> Vec<(CollKind, String, i64)> {
    let mut v: Vec<(CollKind, String, i64)> =
        a.collectives.iter().map(|c| (c.kind, c.pg.clone(), c.group_size)).collect();
    v.sort();
    v
}

/// HSDP on a 2 × 2 mesh whose rank 0 logs while the others wait at a `dist.barrier()`. gloo
/// writes no group on its spans: the barrier is the world group's (its threads were made
/// first), the all-gathers the shard pairs', the gradient all-reduces the replicate pairs' and
/// the shard pairs'. Before, the barrier was placed in the shard pairs and the all-gathers in
/// the world group: the others' 65 ms wait at the barrier read as "transfer" of a 2-rank
/// barrier, and rank 0's logging was not found.
#[test]
fn an_hsdp_barrier_is_the_world_groups_and_the_logging_rank_is_found() {
    let name = "hsdp_rank0_logging_barrier";
    let (a, spec) = run(name);
    let p = placed(&a);
    assert!(p.contains(&(CollKind::Barrier, "0".into(), 4)), "{p:?}");
    for pg in ["3", "4"] {
        assert!(p.contains(&(CollKind::AllGather, pg.into(), 2)), "{p:?}");
    }
    assert!(p.iter().all(|(k, pg, n)| *k == CollKind::Barrier || (pg != "0" && *n == 2)), "{p:?}");
    for f in &a.findings {
        assert!(!["slow_device", "compute_imbalance", "host_sync"].contains(&f.id.as_str()), "{}", f.message);
    }
    let f = a.findings.iter().find(|f| f.id == "host_stall").unwrap_or_else(|| panic!("{:?}", ids(&a)));
    assert_eq!(f.ranks, vec![0], "{}", f.message);
    assert!(
        f.location.as_ref().is_some_and(|l| l.regions.last().is_some_and(|r| r == "log_metrics")),
        "{f:?}"
    );
    assert!(f.severity >= Severity::Medium, "{:?}", f.severity);
    // Its gain is the replay's, near the time the run measured in `log_metrics`.
    let gain = f.evidence.get(EvidenceKey::ReplayedGainNs).unwrap_or_else(|| panic!("{f:?}"));
    close(gain, measured(&spec, 0, "log_metrics_ms"), "replayed gain of rank 0's logging");
}

/// Tensor × data parallel written by hand (Megatron's pair of autograd functions, one flat
/// gradient all-reduce), its second host's clock 136 ms ahead, rank 3 running a numerics check
/// every step: its groups are found, its clock offset, and rank 3 is the one with more work.
#[test]
fn tensor_by_data_parallel_with_a_check_on_one_rank_is_that_ranks_more_work() {
    let name = "tp2dp2_debug_rank3";
    let (a, spec) = run(name);
    check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    let p = placed(&a);
    assert_eq!(p.iter().filter(|(_, _, n)| *n == 2).count(), 4, "{p:?}");
    assert!(p.iter().all(|(_, pg, _)| pg != "0"), "{p:?}");
    for r in [2, 3] {
        let x = a.alignment.iter().find(|x| x.rank == r).unwrap_or_else(|| panic!("rank {r}"));
        let off = x.offset_ns.unsigned_abs() as f64 / 1e6;
        assert!((off - 136.0).abs() < 10.0, "rank {r}: offset {off} ms");
    }
}

/// A gate skewed so one expert gets half the tokens: that expert's rank, as expert imbalance.
#[test]
fn a_hot_expert_is_the_expert_imbalance() {
    let name = "moe_hot_expert_r1";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    assert!(f.severity >= Severity::Medium, "{:?}", f.severity);
}

/// Rank 2 collects garbage (79-92 ms) after backward every other step, unannotated. The pause
/// is after the step's last collective, so the others wait for rank 2 at the next step's first
/// collectives, while its operator-free time is in the step before: the two are tied (the pause
/// in the step before the late one), and it is rank 2's host stall, not noise. Before, a low
/// `arrival_jitter` said the lateness moves between the ranks.
#[test]
fn a_garbage_collection_pause_every_other_step_is_that_ranks_host_stall() {
    let name = "gc_pause_rank2";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    assert!(f.message.contains("after its last collective there"), "{}", f.message);
    // The late steps follow the pauses.
    assert!(f.steps.iter().all(|s| s % 2 == 0), "{:?}", f.steps);
    assert!(!ids(&a).contains(&"arrival_jitter"), "{:?}", ids(&a));
}
