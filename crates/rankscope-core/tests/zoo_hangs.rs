//! The scenario zoo's hangs and pipelines (`tests/zoo/`, helpers in `common/zoo.rs`): a job
//! that stopped names the rank and the collective it never issued, or issued otherwise; a
//! pipeline's bubble, its stages and blocks add up, a stalled stage is the cause.

// Tests read the zoo from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::zoo::*;
use rankscope_core::analyze::Options;
use rankscope_core::diagnose::analyze;
use rankscope_core::finding::EvidenceKey;

/// A hung or mismatched run: the first finding names the rank that diverged and the
/// collective; the stuck collective's time is waiting, never transfer or bandwidth.
fn hang(name: &str, words: &[&str]) {
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    for w in words {
        assert!(f.message.contains(w), "{name}: {:?} not in {}", w, f.message);
    }
    // No bandwidth or transfer figure comes from the stuck collective (it lasted seconds).
    for c in &a.collectives {
        assert!(c.transfer_mean_ns.unwrap_or(0) < 1_000_000_000, "{name}: {c:?}");
    }
    for s in &a.steps {
        for r in &s.per_rank {
            assert!(r.exposed_transfer_ns < 1_000_000_000, "{name}: step {} rank {}: {r:?}", s.step, r.rank);
        }
    }
    // The other findings are about the steps that ran to the end.
    for g in a.findings.iter().skip(1) {
        assert!(g.impact_ns < 1_000_000_000, "{name}: {} claims {} ns", g.id, g.impact_ns);
    }
}

/// The timeline's marks on a real hang: every rank of the group has one, at a time of its own
/// trace; the rank that skipped is the one named and is told apart from the waiting ones.
#[test]
fn skipped_allreduce_is_marked_on_every_rank() {
    use rankscope_core::sequence::marks::{marks, MarkKind};
    for (name, odd, kind) in
        [("hang_skipped_allreduce", 1, MarkKind::NotIssued), ("early_exit", 3, MarkKind::NotIssued)]
    {
        let (a, _) = run(name);
        let seq = a.sequence.as_ref().unwrap_or_else(|| panic!("{name}: no sequence report"));
        let m = marks(seq);
        assert_eq!(m.iter().map(|m| m.rank).collect::<Vec<_>>(), [0, 1, 2, 3], "{name}: {m:?}");
        for x in &m {
            let r = a.ranks.iter().find(|r| r.rank == x.rank).map(|r| r.rank);
            assert!(r.is_some() && x.start_ns.is_some() && x.end_ns >= x.start_ns, "{name}: {x:?}");
            assert_eq!(x.named, x.rank == odd, "{name}: {x:?}");
            assert_eq!(x.kind == kind, x.rank == odd, "{name}: {x:?}");
            if x.rank != odd {
                assert!(x.label.contains("waited 8.0"), "{name}: {}", x.label);
            }
            eprintln!("{name}: rank {}: {}", x.rank, x.label);
        }
    }
}

#[test]
fn skipped_allreduce_names_the_rank_and_the_collective() {
    // In its own group (`1`, the metrics group) the skipped all_reduce is the 4th; rank 1 went on
    // to the next gradient all_reduce of the default group and waits there.
    hang(
        "hang_skipped_allreduce",
        &[
            "rank 1 never issued it",
            "all_reduce #4",
            "group `1`",
            "step 3",
            "loss_allreduce",
            "8.0",
            "of group `0`",
        ],
    );
}

#[test]
fn early_exit_names_the_rank_that_never_issued() {
    hang("early_exit", &["rank 3 never issued it", "all_reduce #7", "step 3", "timeout of 8 s"]);
}

#[test]
fn mismatched_shapes_name_both_shapes() {
    hang("mismatch_shapes", &["rank 2", "930831", "930832", "step 3"]);
}

/// A real pipeline run (torch.distributed.pipelining on gloo): the bubble is the first finding,
/// every stage's bubble share is within 0.05 of what the run measured with `perf_counter()`
/// around the chunks' compute, the slowest stage is the measured one, and no send / recv of
/// activations is called a straggler or a small collective.
fn pipeline(name: &str, schedule: &str) {
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    for g in &a.findings {
        eprintln!(
            "{name}: {} [{} ms] {:?}: {} / {}",
            g.id,
            g.impact_ns / 1_000_000,
            g.ranks,
            g.message,
            g.fix
        );
    }
    let p = a.pipeline.as_ref().unwrap_or_else(|| panic!("{name}: no pipeline"));
    let m = &spec["measured"]["derived"]["pipeline"];
    assert_eq!(p.stages, [0, 1, 2, 3], "{name}");
    assert_eq!(p.micro_batches, Some(8), "{name}");
    assert_eq!(serde_json::to_value(p.schedule).unwrap_or_default(), schedule, "{name}");
    let theory = m["theory_bubble_share"].as_f64().unwrap_or(f64::NAN);
    assert!(
        (p.theory_bubble_share.unwrap_or(f64::NAN) - theory).abs() < 1e-3,
        "{name}: {:?}",
        p.theory_bubble_share
    );
    for s in &p.per_stage {
        let want = m["mean_bubble_share_per_stage"][s.stage.to_string()].as_f64().unwrap_or(f64::NAN);
        eprintln!("{name}: stage {} bubble share {:.3} measured {want:.3}", s.stage, s.bubble_share);
        assert!(
            (s.bubble_share - want).abs() <= 0.05,
            "{name}: stage {}: {:.3} vs {want}",
            s.stage,
            s.bubble_share
        );
    }
    assert_eq!(p.slowest_stage, m["slowest_stage"].as_u64().map(|x| x as u32), "{name}");
    assert!(a.straggler.is_none() && a.stragglers.is_empty(), "{name}: {:?}", a.stragglers);
    assert!(a.collectives.iter().all(|c| !c.kind.is_p2p()), "{name}: {:?}", a.collectives);
    for l in &p.links {
        assert_eq!((l.unmatched_sends, l.unmatched_recvs, l.size_mismatches), (0, 0, 0), "{name}: {l:?}");
    }
    assert!(
        f.message.contains(&format!("stage {}", p.slowest_stage.unwrap_or(u32::MAX))),
        "{name}: {}",
        f.message
    );
    assert!(f.fix.contains("micro-batches"), "{name}: {}", f.fix);
    // The critical path of a step crosses stages: back from the last backward on stage 0
    // through the stages' backward and forward, the slowest among them (a walk can stop early
    // where a stage's input was posted before the stage began its step).
    assert_eq!(p.critical_path.len(), 4, "{name}");
    for c in &p.critical_path {
        let crossed: std::collections::BTreeSet<u32> = c.hops.iter().map(|h| h.stage).collect();
        assert!(crossed.len() >= 3, "{name}: step {}: {:?}", c.step, c.hops);
        assert!(p.slowest_stage.is_some_and(|s| crossed.contains(&s)), "{name}: {:?}", c.hops);
        assert!(c.work_ns.iter().sum::<i64>() <= c.end_ns - c.start_ns, "{name}: {c:?}");
    }
}

#[test]
fn gpipe_bubble_is_the_first_finding() {
    pipeline("pipeline_gpipe", "gpipe");
}

#[test]
fn one_f_one_b_bubble_without_stage_annotations() {
    pipeline("pipeline_1f1b", "1f1b");
}

#[test]
fn slow_stage_is_named() {
    pipeline("pipeline_slow_stage", "gpipe");
}

/// The blocks a stage × step carries for drawing add up to its figures: compute blocks to
/// `compute_ns`, recv-wait blocks to `recv_wait_ns` (no merging below the cap), all inside the
/// step's window, on the aligned clock; with `Forward i` / `Backward i` annotations (GPipe) the
/// compute is placed forward or backward, one of each per micro-batch at least.
fn pipeline_blocks(name: &str, annotated: bool) {
    use rankscope_core::analyze::pipeline::BlockKind;
    let (a, _) = run(name);
    let p = a.pipeline.as_ref().unwrap_or_else(|| panic!("{name}: no pipeline"));
    assert!(!p.steps.is_empty(), "{name}");
    for s in &p.steps {
        let sum = |f: &dyn Fn(BlockKind) -> bool| -> i64 {
            s.blocks.iter().filter(|b| f(b.kind)).map(|b| b.end_ns - b.start_ns).sum()
        };
        let compute = sum(&|k| matches!(k, BlockKind::Forward | BlockKind::Backward | BlockKind::Compute));
        let what = format!("{name}: stage {} step {}", s.stage, s.step);
        assert!(s.blocks.len() <= 3 * rankscope_core::analyze::pipeline::MAX_BLOCKS, "{what}");
        assert!(
            (compute - s.compute_ns).abs() <= s.compute_ns / 100,
            "{what}: {compute} vs {}",
            s.compute_ns
        );
        assert_eq!(sum(&|k| k == BlockKind::RecvWait), s.recv_wait_ns, "{what}");
        assert!(s.end_ns - s.start_ns >= s.span_ns, "{what}");
        for b in &s.blocks {
            assert!(
                s.start_ns <= b.start_ns && b.start_ns < b.end_ns && b.end_ns <= s.end_ns,
                "{what}: {b:?}"
            );
        }
        let n = |k: BlockKind| s.blocks.iter().filter(|b| b.kind == k).count() as u32;
        if annotated {
            let m = s.micro_batches.unwrap_or(0);
            assert!(n(BlockKind::Forward) >= m && n(BlockKind::Backward) >= m, "{what}: {:?}", s.blocks);
        } else {
            assert_eq!(n(BlockKind::Forward) + n(BlockKind::Backward), 0, "{what}");
        }
    }
}

#[test]
fn gpipe_blocks_add_up_to_the_stage_figures() {
    pipeline_blocks("pipeline_gpipe", true);
}

#[test]
fn one_f_one_b_blocks_add_up_to_the_stage_figures() {
    pipeline_blocks("pipeline_1f1b", false);
}

#[test]
fn pipeline_parts_survive_serialization_and_combine_to_the_same_analysis() {
    // The app computes each rank's part (its stage figures included) in a worker.
    let (job, _) = load("pipeline_1f1b");
    let opts = Options::default();
    let direct = analyze(&job, &opts);
    let posted = common::posted_parts(&job, &opts);
    let combined = rankscope_core::diagnose::combine(posted, job.errors.clone(), &opts);
    assert!(direct.pipeline.is_some());
    assert_eq!(combined, direct);
    let md = rankscope_core::diagnose::markdown::markdown(&direct);
    assert!(md.contains("## Pipeline") && md.contains("| 0 (slowest) | 0 |"), "{md}");
}

/// DDP with `find_unused_parameters=True` all_reduces a 92-byte map of the used parameters next
/// to the gradient bucket; gloo's second thread may start it first. The sequences are compared
/// in the order the host issued them, so a healthy run is no mismatch.
#[test]
fn ddp_used_parameter_map_is_no_mismatch() {
    let name = "embbag_healthy_w5";
    let (a, spec) = run(name);
    check_expected(name, &a, &spec);
    let seq = a.sequence.as_ref().unwrap_or_else(|| panic!("{name}: no sequence report"));
    assert!(seq.diagnoses.is_empty(), "{name}: {:?}", seq.diagnoses);
    for f in &a.findings {
        assert!(
            !matches!(f.id.as_str(), "compute_imbalance" | "slow_device" | "straggler" | "host_stall"),
            "{name}: {}",
            f.message
        );
    }
}

/// Every rank timed out in a loss all_reduce they all issued alike; rank 2's went to the
/// default group. The gloo thread that ran it had run only the default group's gradient
/// all_reduces: the finding names rank 2 and says why, and no host_sync claims the timeout.
#[test]
fn a_collective_on_another_process_group_is_named() {
    hang(
        "hang_wrong_group",
        &["rank 2 never issued it", "group `1`", "of group `0`", "another process group"],
    );
    let (a, _) = run("hang_wrong_group");
    let step_ns =
        a.steps.iter().filter(|s| s.step < 2).flat_map(|s| s.per_rank.iter().map(|r| r.wall_ns)).max();
    for f in a.findings.iter().skip(1) {
        assert!(step_ns.is_some_and(|s| f.impact_ns <= s), "{}: {} ns", f.id, f.impact_ns);
    }
}

/// Rank 0 skipped the gradient all_reduce of step 1; the job hung only at step 5. Its records
/// run a step ahead from #2 on: the finding names the skip, not only the last collective.
#[test]
fn a_skip_long_before_the_hang_is_named() {
    hang(
        "hang_skip_r0",
        &["rank 0 never issued it", "rank 0 runs a step ahead", "skipped all_reduce #2 (step 1"],
    );
}

#[test]
fn rank_zero_leaving_early_is_named() {
    hang("hang_early_exit_r0", &["rank 0 never issued it", "all_reduce #3", "step 1", "timeout of 8 s"]);
}

/// A pipeline stage that sleeps before its first micro-batch: its thread runs nothing, while
/// the other stages wait inside exchanges. The stall is the cause (measured sleep), the bubble
/// keeps only what is left.
#[test]
fn a_pipeline_stage_that_stalls_is_a_host_stall_not_the_bubble() {
    let name = "pp_stall_stage";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    close(
        f.evidence[EvidenceKey::StallNs],
        measured(&spec, 1, "injected_sleep_ms"),
        &format!("{name}: stall"),
    );
    assert!(
        f.evidence[EvidenceKey::OthersStallNs] < 0.05 * f.evidence[EvidenceKey::StallNs],
        "{name}: {:?}",
        f.evidence
    );
    let bubble = a.findings.iter().find(|g| g.id == "pipeline_bubble");
    assert!(bubble.is_none_or(|b| b.impact_ns < f.impact_ns / 4), "{name}: {:?}", ids(&a));
    assert!(!f.fix.contains("more micro-batches:"), "{name}: {}", f.fix);
}

/// Rank 3 all_gathers a [3] tensor, the others [2]. The profiler records `c10d::allgather_`'s
/// output list first, as `[]` (`Input Dims: [[], [[2]], [], [], []]`): the size is read from the
/// first input that has dims, so the shapes differ where they do (before, every rank's was one
/// element and the first finding was a straggler).
#[test]
fn an_all_gather_of_another_shape_is_named() {
    hang(
        "hang_allgather_shape",
        &["does not match across ranks (shape)", "rank 3 issued all_gather", "3 elements", "2 elements"],
    );
}

/// A pipeline's exchanges are replayed as pairs (docs/metrics.md, "What-if"): the replay of
/// each pipeline run with its recorded durations comes within the bounds the judging layer
/// holds any replay to (5% on average, 15% in every step), every exchange of theirs paired; no
/// stage has peers to be brought to, so a late stage's finding keeps its own gain.
#[test]
fn pipelines_replay_with_their_exchanges_paired() {
    for name in ["pipeline_gpipe", "pipeline_1f1b", "pipeline_slow_stage", "pp_stall_stage"] {
        let (a, _) = run(name);
        let w =
            a.whatif.as_ref().unwrap_or_else(|| panic!("{name}: a pipeline of exchanges only is replayed"));
        assert!(w.p2p, "{name}: said to have exchanges");
        // A stage without replicas has no peers to be brought to: every rank is alone.
        assert!(
            !w.alone.is_empty() && w.ranks.is_empty(),
            "{name}: alone {:?}, gains {:?}",
            w.alone,
            w.ranks
        );
        let sends: usize = a.pipeline.as_ref().map_or(0, |p| p.links.iter().map(|l| l.matched).sum());
        assert!(
            w.exchanges as usize == sends && sends > 0,
            "{name}: {} exchanges replayed, {sends} matched",
            w.exchanges
        );
        assert!(
            w.mean_error <= 0.05 && w.max_error <= 0.15,
            "{name}: replay {:.1}% off on average, {:.1}% at worst",
            100.0 * w.mean_error,
            100.0 * w.max_error
        );
        // No stage is brought to its peers (it has none); one slow stage's bubble takes the
        // replay of the stages balanced (pipeline_synth.rs checks that figure).
        for f in &a.findings {
            let balanced = f.id == "pipeline_bubble" && f.ranks.len() == 1;
            assert_eq!(
                f.evidence.contains(EvidenceKey::ReplayedGainNs),
                balanced,
                "{name}: {:?} {:?} and the replay's gain",
                f.id,
                f.ranks
            );
        }
    }
    let (a, _) = run("pipeline_slow_stage");
    assert!(a.findings.iter().any(|f| f.id == "pipeline_bubble" && f.ranks == [2]));
}
