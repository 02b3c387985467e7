//! The fifth blind check (`tests/zoo/make_zoo_blind5.py`, tests/zoo/README.md): six real runs
//! of shapes the zoo lacked (ZeroRedundancyOptimizer, activation checkpointing on one rank with
//! two hosts' clocks, gradient accumulation with a loader that stalls every third step, a 1F1B
//! pipeline with a heavy stage, two causes at once), made on a loaded 2-core machine, each read
//! as a new user would read its first finding.

// Tests read the zoo from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::zoo::*;

use rankscope_core::analyze::framework::Framework;
use rankscope_core::finding::{EvidenceKey, Severity};

/// ZeRO-1's optimizer with one rank spinning in Python: that rank's host stall, at the size it
/// measured, in the region it spun in; the optimizer is recognised by its own step.
#[test]
fn a_spin_beside_zero1_is_that_ranks_host_stall() {
    let name = "zero1_metrics_spin";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    let l = f.location.as_ref().unwrap_or_else(|| panic!("{name}: no place: {}", f.message));
    assert_eq!(l.regions.last().map(String::as_str), Some("compute_metrics"), "{name}: {:?}", l.regions);
    close(f.evidence[EvidenceKey::StallNs], 120.0, "rank 1's spin");
    assert!(
        a.frameworks.iter().any(|x| x.framework == Framework::ZeroRedundancy),
        "{name}: {:?}",
        a.frameworks
    );
}

/// Activation checkpointing on rank 2 alone: the same operators on the same shapes, more of
/// them (each block's forward again inside backward's autograd nodes). More work, not a slower
/// host, said as recomputation; and the two hosts' clocks (ranks 2 and 3 shifted by 97 ms)
/// are aligned.
#[test]
fn recomputation_on_one_rank_is_more_work() {
    let name = "act_ckpt_rank2";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    assert!(f.message.contains("activation checkpointing"), "{}", f.message);
    assert!(f.fix.contains("activation checkpointing the same on every rank"), "{}", f.fix);
    // 8 blocks recomputed per step: one more `Linear` and `GELU` per block's autograd node
    // (with what they run) in all 8 nodes.
    let extra = f.evidence[EvidenceKey::ExtraOpNs];
    let recompute = measured(&spec, 2, "recompute_in_backward_ms");
    assert!(extra >= 0.5 * recompute * 1e6, "{name}: extra {extra} against {recompute} ms measured");
    assert!(f.evidence[EvidenceKey::ExtraOpRerunNs] >= 0.9 * extra, "{name}: {:?}", f.evidence);
    let shift = spec["clock_shift_ms"]["2"].as_f64().unwrap_or_else(|| panic!("{name}: clock_shift_ms"));
    for x in a.alignment.iter().filter(|x| x.rank >= 2) {
        let off = x.offset_ns as f64 / 1e6;
        assert!((off - shift).abs() < 3.0, "{name}: rank {} offset {off} ms, shifted {shift} ms", x.rank);
    }
}

/// Rank 3's loader stalls in two of six steps, amid lateness that is the loaded host's noise
/// (other ranks late by as much in other steps): the stall comes back in the same rank and
/// phase, and is named in its steps.
#[test]
fn a_loader_that_stalls_every_third_step_stands_out_of_the_noise() {
    let name = "accum_loader_every3";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    let each = &spec["measured"]["per_rank_each"]["3"]["dataset_sleep_ms"];
    let slept: Vec<usize> = each
        .as_array()
        .unwrap_or_else(|| panic!("{name}: dataset_sleep_ms"))
        .iter()
        .enumerate()
        .filter(|(_, v)| v.as_f64().unwrap_or(0.0) > 50.0)
        .map(|(k, _)| k)
        .collect();
    let want: Vec<u32> = slept.iter().map(|&k| a.steps[k].step).collect();
    assert_eq!(f.steps, want, "{name}: {}", f.message);
}

/// 1F1B with stage 1 three times as deep: the bubble, its slowest stage named.
#[test]
fn a_heavy_stage_under_1f1b_makes_the_bubble() {
    let name = "pp1f1b_heavy_stage1";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    assert_eq!(f.evidence[EvidenceKey::SlowestStage], 1.0, "{name}: {:?}", f.evidence);
}

/// A healthy ZeRO-1 job on a loaded host: nothing above low. The ranks take turns being last,
/// but they run the same operators on the same shapes every step: noise, said so. Its
/// per-parameter broadcasts get advice in ZeroRedundancyOptimizer's terms, never a host sync,
/// with shapes or without.
#[test]
fn a_healthy_zero1_job_is_noise_and_broadcasts() {
    let name = "healthy_zero1_w4";
    let (a, spec) = run(name);
    check_expected(name, &a, &spec);
    for f in &a.findings {
        assert!(f.severity <= Severity::Low, "{name}: {} {}", f.id, f.message);
        assert!(f.id != "host_sync", "{name}: {}", f.message);
    }
    let j = a
        .findings
        .iter()
        .find(|f| f.id == "arrival_jitter")
        .unwrap_or_else(|| panic!("{name}: {:?}", ids(&a)));
    assert!(j.message.contains("same input shapes in every step"), "{}", j.message);
    for f in a.findings.iter().filter(|f| f.id == "small_collectives") {
        assert!(
            f.fix.contains("parameters_as_bucket_view=True") && !f.fix.contains("bucket_cap_mb"),
            "{}",
            f.fix
        );
    }
}

/// Rank 0's slow loader and a log every rank writes: both named, in the order of fixing, each
/// near what the run measured.
#[test]
fn two_causes_are_both_named_in_order() {
    let name = "two_causes_spin_loader";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    close(f.evidence[EvidenceKey::DataLoadingNs], measured(&spec, 0, "data_ms"), "rank 0's data loading");
    let second = &spec["expected"]["second"];
    let s = a
        .findings
        .iter()
        .skip(1)
        .find(|g| g.id == second["finding"].as_str().unwrap_or_default())
        .unwrap_or_else(|| panic!("{name}: no second cause: {:?}", ids(&a)));
    assert_eq!(s.ranks, u32s(&second["ranks"]), "{name}: {}", s.message);
    assert_eq!(s.location.as_ref().and_then(|l| l.regions.last()).map(String::as_str), Some("log_to_disk"));
    let spun: f64 = (0..4).map(|r| measured(&spec, r, "injected_spin_ms")).fold(f64::INFINITY, f64::min);
    close(s.evidence[EvidenceKey::StallNs], spun, "the least spin of any rank");
}

/// The same job made again on a quieter machine: rank 2 recomputes 63 ms per step but is last
/// in only 2 of 6 steps (4 ranks share 2 cores, and who is last is the scheduler's). Its extra
/// operators are still said, with the replay's gain, as its own finding beside the noise.
#[test]
fn recomputation_not_waited_for_is_still_said() {
    let name = "act_ckpt_rank2_quiet";
    let (a, spec) = run(name);
    check_expected(name, &a, &spec);
    let want = &spec["expected"]["reported"];
    let f = a
        .findings
        .iter()
        .find(|f| f.id == want["finding"].as_str().unwrap_or_default())
        .unwrap_or_else(|| panic!("{name}: {:?}", ids(&a)));
    assert_eq!(f.ranks, u32s(&want["ranks"]), "{name}: {}", f.message);
    assert!(f.message.contains("activation checkpointing"), "{}", f.message);
    assert!(f.evidence[EvidenceKey::ReplayedGainNs] > 0.0, "{name}: {:?}", f.evidence);
    assert!(
        f.evidence[EvidenceKey::ExtraOpNs] > f.evidence[EvidenceKey::ReplayedGainNs],
        "{name}: {:?}",
        f.evidence
    );
}

/// The healthy ZeRO-1 job profiled without shapes (the profiler's default: every `Input Dims`
/// taken out of its traces). On CPU hosts the timings alone cannot tell work that moves between
/// the ranks from hosts that slow them in turn (a preempted rank runs every operator longer, as
/// a larger batch does), and every rank ran as many operators in every step: the lateness is
/// said as undecided and stays low. It was a medium that said the work moves.
#[test]
fn a_healthy_job_without_shapes_is_undecided_and_low() {
    let name = "healthy_zero1_w4";
    let a = run_without_shapes(name);
    assert!(a.op_speed.iter().all(|o| o.shapes_compared == 0), "shapes left");
    for f in &a.findings {
        assert!(f.severity <= Severity::Low, "{name}: {} {}", f.id, f.message);
        assert!(f.id != "host_sync", "{name}: {}", f.message);
    }
    let j = a.findings.iter().find(|f| f.id == "arrival_jitter").unwrap_or_else(|| panic!("{:?}", ids(&a)));
    assert!(j.message.contains("running as many operators as in its other steps"), "{}", j.message);
    assert!(!j.message.contains("the work moves between the ranks from step to step"), "{}", j.message);
    // Every rank ran as many forward and backward operators in every step.
    for r in 0..4 {
        let ops: Vec<u32> = a.step_ops.iter().filter(|s| s.rank == r).map(|s| s.ops).collect();
        assert!(ops.len() >= 6 && ops.iter().all(|&n| n == ops[0] && n > 0), "rank {r}: {ops:?}");
    }
}

/// The operators a rank runs per step are counted whole, nested ones included: rank 2's
/// recomputation under activation checkpointing runs inside backward's autograd nodes, and its
/// count is above every other rank's in every step (by 132: the instances `op_speed[].extra`
/// finds, counted another way), and the same in each (one program, every step).
#[test]
fn step_operator_counts_include_the_recompute_nested_in_autograd() {
    let (a, _) = run("act_ckpt_rank2");
    let of = |r: u32| -> Vec<u32> { a.step_ops.iter().filter(|s| s.rank == r).map(|s| s.ops).collect() };
    for r in 0..4 {
        let ops = of(r);
        assert!(ops.len() == 6 && ops.iter().all(|&n| n == ops[0] && n > 0), "rank {r}: {ops:?}");
    }
    for r in [0, 1, 3] {
        assert!(of(2)[0] > of(r)[0] + 100, "rank 2 {:?} against rank {r} {:?}", of(2), of(r));
    }
}
