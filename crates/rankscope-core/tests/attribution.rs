//! Attribution on small hand-built CPU (gloo) jobs, one per way the blind generalisation runs
//! (tests/zoo/README.md, "Blind runs") found it wrong: each job is the smallest trace with the
//! shape of the real one, and the test says what an expert concludes from it.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use rankscope_core::finding::EvidenceKey;

use common::gloo_job::*;
use rankscope_core::analyze::Analysis;

/// An event; a `gloo:` span gets the 6,000,000 floats of a gradient bucket as its dims.
fn ev(name: &'static str, cat: &'static str, tid: u32, ts: f64, dur: f64) -> Ev {
    Ev { name, cat, tid, ts, dur, dims: name.starts_with("gloo:").then_some("6000000") }
}

fn ann(name: &'static str, ts: f64, dur: f64) -> Ev {
    ev(name, "user_annotation", 1, ts, dur)
}

/// FSDP on gloo: the ranks that wait for a late peer block inside an autograd node
/// (`autograd::engine::evaluate_function: AddmmBackward0`) whose hook is annotated
/// (`FSDP::all_gather`) and waits for the collective. The operator around the hook is not
/// compute while the hook waits: the waiting ranks' time there is exposed wait, charged to the
/// rank that slept. (Counted as compute, it hid the whole straggler: no finding at all.)
#[test]
fn a_hook_blocked_inside_an_autograd_op_is_waiting_not_compute() {
    let world = 3;
    let traces = (0..world)
        .map(|rank| {
            let steps = (0..4)
                .map(|_| {
                    // Rank 0 sleeps 300 ms in forward; everyone's backward all_gather completes
                    // at 330 ms (the rendezvous), then 70 ms of backward compute, the optimizer.
                    let arrive = if rank == 0 { 321_000.0 } else { 21_000.0 };
                    let mut v = vec![
                        ann("forward", 0.0, arrive - 1_000.0),
                        op("aten::addmm", 0.0, 10_000.0),
                        op("aten::addmm", 10_000.0, 10_000.0),
                        op("autograd::engine::evaluate_function: AddmmBackward0", arrive, 400_000.0 - arrive),
                        ann("FSDP::pre_backward", arrive + 1.0, 330_000.0 - arrive - 2.0),
                        ann("FSDP::all_gather", arrive + 2.0, 330_000.0 - arrive - 4.0),
                        op("c10d::_allgather_base_", arrive + 3.0, 500.0),
                        ev(
                            "gloo:all_gather",
                            "user_annotation",
                            2,
                            arrive + 600.0,
                            330_000.0 - arrive - 600.0,
                        ),
                        op("aten::mm", 330_000.0, 70_000.0),
                        ann("optimizer", 400_000.0, 20_000.0),
                        op("aten::add_", 400_000.0, 20_000.0),
                    ];
                    if rank == 0 {
                        v.push(ann("straggler_sleep", 20_000.0, 300_000.0));
                    }
                    (421_000.0, v)
                })
                .collect::<Vec<_>>();
            trace(rank, world, &steps)
        })
        .collect();
    let a = run(traces);
    let f = a.findings.first().unwrap_or_else(|| panic!("no finding: {:?}", ids(&a)));
    assert_eq!((f.id.as_str(), f.ranks.as_slice()), ("host_stall", &[0][..]), "{}", f.message);
    assert!(f.message.contains("`straggler_sleep`"), "{}", f.message);
    // The waiting ranks: about 300 ms of exposed wait per step, and their compute is the
    // operators that ran (20 + 70 + 20 ms and the enqueue), not the hook's wait.
    for s in &a.steps {
        for r in s.per_rank.iter().filter(|r| r.rank != 0) {
            assert!((r.exposed_wait_ns - 300_000_000).abs() < 10_000_000, "{r:?}");
            assert!(r.compute_ns < 115_000_000, "{r:?}");
        }
    }
}

/// Three ranks, none with a problem of its own: two of them are the late ones together in half
/// the steps (rank 2 the later), rank 1 alone in the others. Rank 1 was among the last in every
/// step but cost the step alone in only two of four: no late-rank finding names it (a healthy
/// run on a host with fewer cores than ranks looks like this).
#[test]
fn a_rank_late_only_beside_a_later_one_is_no_straggler() {
    let world = 3;
    // Per step, each rank's arrival at the all_reduce (ms); it completes at 320 ms everywhere.
    let arrivals: [[f64; 3]; 4] =
        [[100.0, 290.0, 300.0], [100.0, 300.0, 150.0], [100.0, 290.0, 300.0], [100.0, 300.0, 150.0]];
    let traces = (0..world)
        .map(|rank| {
            let steps = arrivals
                .iter()
                .map(|arr| {
                    let a = arr[rank as usize] * 1e3;
                    let v = vec![
                        ann("forward", 0.0, a),
                        op("aten::addmm", 1.0, a - 2.0),
                        ann("backward", a, 320_000.0 - a),
                        ev("gloo:all_reduce", "user_annotation", 2, a, 320_000.0 - a),
                        ann("optimizer", 320_000.0, 10_000.0),
                        op("aten::add_", 320_000.0, 10_000.0),
                    ];
                    (331_000.0, v)
                })
                .collect::<Vec<_>>();
            trace(rank, world, &steps)
        })
        .collect();
    let a = run(traces);
    for f in &a.findings {
        assert!(
            !matches!(f.id.as_str(), "straggler" | "compute_imbalance" | "slow_device" | "host_stall")
                || f.ranks != [1],
            "{}: {}",
            f.id,
            f.message
        );
    }
}

/// A rank late because it computes longer, on a CPU shared with other ranks. `more_work`: its
/// forward and backward operators take twice as long every step (a larger batch), its optimizer's
/// as long as elsewhere, but a few of them, different ones each step, were preempted so long that
/// its optimizer phase took 1.7× the others' (the host's scheduler lets the process that
/// computed longest wait): compute imbalance, not a slower host. Otherwise: the same typical
/// operator durations, with the time lost in preempted bursts: the same work done slower.
fn compute_job(more_work: bool) -> Analysis {
    let world = 3;
    let traces = (0..world)
        .map(|rank| {
            let steps = (0..4)
                .map(|step| {
                    let late = rank == 2;
                    let mut v = Vec::new();
                    let mut t = 0.0;
                    v.push(ann("forward", 0.0, 0.0));
                    for k in 0..10 {
                        // Preempted bursts: two different operators per step on the late rank.
                        let burst = late && !more_work && (k == step || k == step + 5);
                        let d = if late && more_work { 8_000.0 } else { 4_000.0 }
                            + if burst { 20_000.0 } else { 0.0 };
                        v.push(op("aten::addmm", t, d));
                        t += d;
                    }
                    v[0].dur = t;
                    let bwd0 = t;
                    for k in 0..10 {
                        let burst = late && !more_work && k == 9 - step;
                        let d = if late && more_work { 8_000.0 } else { 4_000.0 }
                            + if burst { 20_000.0 } else { 0.0 };
                        v.push(op("aten::mm", t, d));
                        t += d;
                    }
                    let ready = t;
                    // Everyone's all_reduce completes 5 ms after the last rank is ready.
                    let end = if more_work { 165_000.0 } else { 145_000.0 };
                    v.push(ann("backward", bwd0, end - bwd0));
                    v.push(ev("gloo:all_reduce", "user_annotation", 2, ready, end - ready));
                    let mut t = end;
                    let opt0 = t;
                    for k in 0..20 {
                        let burst = late && (k == step || k == 2 * step + 7);
                        let d = 1_000.0 + if burst { 7_000.0 } else { 0.0 };
                        v.push(op("aten::add_", t, d));
                        t += d;
                    }
                    v.push(ann("Optimizer.step#SGD.step", opt0, t - opt0));
                    (t + 1_000.0, v)
                })
                .collect::<Vec<_>>();
            trace(rank, world, &steps)
        })
        .collect();
    run(traces)
}

#[test]
fn more_work_is_told_from_a_slow_host_by_typical_operator_durations() {
    let a = compute_job(true);
    let f = a.findings.first().unwrap_or_else(|| panic!("no finding"));
    assert_eq!((f.id.as_str(), f.ranks.as_slice()), ("compute_imbalance", &[2][..]), "{}", f.message);
    assert!((f.evidence[EvidenceKey::TypicalOpRatio] - 2.0).abs() < 0.05, "{:?}", f.evidence);
    assert!((f.evidence[EvidenceKey::TypicalOptimizerOpRatio] - 1.0).abs() < 0.05, "{:?}", f.evidence);
    assert!(f.message.contains("larger inputs"), "{}", f.message);
    // The per-operator comparison is in the report, per rank.
    let w = a
        .op_speed
        .iter()
        .find(|o| o.rank == 2 && o.group == rankscope_core::analyze::attribution::OpGroup::Work);
    assert!(w.is_some_and(|w| w.instances == 20), "{:?}", a.op_speed);

    let b = compute_job(false);
    let g = b.findings.first().unwrap_or_else(|| panic!("no finding"));
    assert_eq!((g.id.as_str(), g.ranks.as_slice()), ("slow_device", &[2][..]), "{}", g.message);
    assert!((g.evidence[EvidenceKey::TypicalOpRatio] - 1.0).abs() < 0.05, "{:?}", g.evidence);
    assert!(g.message.contains("lost in bursts"), "{}", g.message);
    assert!(!g.fix.to_lowercase().contains("gpu"), "{}", g.fix);
}

/// A backward hook on one rank that sleeps: it runs inside the autograd node the hook adds
/// (`autograd::engine::evaluate_function: BackwardHookFunctionBackward`), an operator whose
/// child node takes microseconds. No region marks it, and an operator covers its time, so the
/// region comparison saw "more compute". The operator instance that only this rank runs, whose
/// own time (none of the operators it runs running) is the excess, is the host stall.
#[test]
fn a_sleep_inside_an_autograd_node_is_a_host_stall_in_that_node() {
    let world = 3;
    let traces = (0..world)
        .map(|rank| {
            let steps = (0..4)
                .map(|_| {
                    let hook = if rank == 1 { 200_000.0 } else { 0.0 };
                    let mut v = vec![ann("forward", 0.0, 40_000.0)];
                    for k in 0..10 {
                        v.push(op("aten::addmm", k as f64 * 4_000.0, 4_000.0));
                    }
                    let mut t = 40_000.0;
                    let bwd0 = t;
                    for k in 0..10 {
                        if k == 5 && rank == 1 {
                            v.push(op(
                                "autograd::engine::evaluate_function: BackwardHookFunctionBackward",
                                t,
                                hook,
                            ));
                            v.push(op("BackwardHookFunctionBackward", t + hook - 20.0, 15.0));
                            t += hook;
                        }
                        v.push(op("autograd::engine::evaluate_function: AddmmBackward0", t, 4_000.0));
                        v.push(op("aten::mm", t + 10.0, 3_900.0));
                        t += 4_000.0;
                    }
                    let end = 40_000.0 + 200_000.0 + 40_000.0 + 5_000.0;
                    v.push(ann("backward", bwd0, end - bwd0));
                    v.push(ev("gloo:all_reduce", "user_annotation", 2, t, end - t));
                    v.push(ann("Optimizer.step#SGD.step", end, 20_000.0));
                    for k in 0..20 {
                        v.push(op("aten::add_", end + k as f64 * 1_000.0, 1_000.0));
                    }
                    (end + 21_000.0, v)
                })
                .collect::<Vec<_>>();
            trace(rank, world, &steps)
        })
        .collect();
    let a = run(traces);
    let f = a.findings.first().unwrap_or_else(|| panic!("no finding"));
    assert_eq!((f.id.as_str(), f.ranks.as_slice()), ("host_stall", &[1][..]), "{}", f.message);
    assert!(
        f.message.contains("`autograd::engine::evaluate_function: BackwardHookFunctionBackward`"),
        "{}",
        f.message
    );
    assert!((f.evidence[EvidenceKey::StallNs] - 200e6).abs() < 1e6, "{:?}", f.evidence);
    let loc = f.location.clone().unwrap_or_else(|| panic!("no location"));
    assert_eq!(
        loc.regions.last().map(String::as_str),
        Some("autograd::engine::evaluate_function: BackwardHookFunctionBackward")
    );
}

/// One rank stalls 400 ms every other step (a periodic checkpoint); in the other steps the last
/// to arrive is somebody else by a few ms. Late in half the steps only, it is still the one the
/// job waits for: nearly all the time lost is lost waiting for it, and every time it is late it
/// costs more than any other step. Named, with its steps, not called arrival jitter.
#[test]
fn a_rank_that_stalls_every_other_step_is_named() {
    let world = 4;
    let traces = (0..world)
        .map(|rank| {
            let steps = (0..4u32)
                .map(|step| {
                    let stall = rank == 2 && step % 2 == 0;
                    // Step 1: rank 1 a little late; step 3: rank 3.
                    let extra =
                        if (step == 1 && rank == 1) || (step == 3 && rank == 3) { 10_000.0 } else { 0.0 };
                    let f = 20_000.0 + extra;
                    let mut v = vec![ann("forward", 0.0, f + if stall { 400_000.0 } else { 0.0 })];
                    v.push(op("aten::addmm", 1.0, f - 2.0));
                    if stall {
                        v.push(ann("checkpoint", f, 400_000.0));
                    }
                    let ready = f + if stall { 400_000.0 } else { 0.0 } + 20_000.0;
                    v.push(ann("backward", ready - 20_000.0, 20_000.0));
                    v.push(op("aten::mm", ready - 20_000.0 + 1.0, 19_998.0));
                    // Completes 5 ms after the last rank is ready.
                    let last = if step % 2 == 0 { 440_000.0 } else { 50_000.0 };
                    let end = last + 5_000.0;
                    v.push(ann("wait", ready, end - ready));
                    v.push(ev("gloo:all_reduce", "user_annotation", 2, ready, end - ready));
                    v.push(ann("optimizer", end, 5_000.0));
                    v.push(op("aten::add_", end + 1.0, 4_998.0));
                    (end + 6_000.0, v)
                })
                .collect::<Vec<_>>();
            trace(rank, world, &steps)
        })
        .collect();
    let a = run(traces);
    let f = a.findings.first().unwrap_or_else(|| panic!("no finding: {:?}", ids(&a)));
    assert_eq!((f.id.as_str(), f.ranks.as_slice()), ("host_stall", &[2][..]), "{}", f.message);
    assert_eq!(f.steps, [0, 2], "{}", f.message);
    assert!(f.message.contains("`checkpoint`") && f.message.contains("2 of 4 steps"), "{}", f.message);
}
