//! Attribution on small hand-built CPU (gloo) jobs, one per way the second blind check
//! (tests/zoo/README.md, "Second blind check") found it wrong where no committed run pins it:
//! each job is the smallest trace with the shape of the real one.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::gloo_job::*;

/// `c10d::allreduce_` on the main thread (the enqueue) for a tensor of `elems` floats.
fn enqueue(ts: f64, elems: &'static str) -> Ev {
    Ev { name: "c10d::allreduce_", cat: "cpu_op", tid: 1, ts, dur: 20.0, dims: Some(elems) }
}

/// `gloo:all_reduce` on a worker thread.
fn gloo(tid: u32, ts: f64, dur: f64, elems: &'static str) -> Ev {
    Ev { name: "gloo:all_reduce", cat: "user_annotation", tid, ts, dur, dims: Some(elems) }
}

/// DDP with `find_unused_parameters=True`, no annotations: at the end of backward it enqueues
/// the gradient bucket, then a 23-element map of the used parameters; gloo runs them on its two
/// threads, and on rank 1 the map's span starts first. The host waits for both together. Not a
/// mismatch (the ranks issued the same calls in the same order), and the map is no blocking
/// call of its own (the host would wait for the bucket anyway).
#[test]
fn back_to_back_calls_on_two_threads_are_one_order_and_no_host_sync() {
    let world = 3;
    let traces = (0..world)
        .map(|rank| {
            let steps = (0..4)
                .map(|_| {
                    let swap = rank == 1;
                    let (big, small) = if swap { (60_030.0, 60_028.0) } else { (60_028.0, 60_030.0) };
                    let v = vec![
                        op("aten::addmm", 0.0, 30_000.0),
                        op("autograd::engine::evaluate_function: AddmmBackward0", 30_000.0, 29_000.0),
                        enqueue(59_990.0, "1000000"),
                        enqueue(60_015.0, "23"),
                        gloo(2, big, 39_000.0, "1000000"),
                        gloo(3, small, 38_990.0, "23"),
                        op("aten::add_", 100_000.0, 10_000.0),
                    ];
                    (110_000.0, v)
                })
                .collect::<Vec<_>>();
            trace(rank, world, &steps)
        })
        .collect();
    let a = run(traces);
    assert!(
        !a.findings.iter().any(|f| f.id == "collective_mismatch" || f.id == "host_sync"),
        "{:#?}",
        a.findings
    );
    let seq = a.sequence.as_ref().unwrap_or_else(|| panic!("no sequence report"));
    assert!(seq.diagnoses.is_empty(), "{:?}", seq.diagnoses);
}

/// Two ranks, the last to arrive alternating (rank 1 by 5 ms in steps 0 and 3, rank 0 by 5 ms
/// in step 2), and rank 1 last by 0.1 ms in step 1, a 0.2% of the step that is noise: arrival
/// jitter, not a rank late in 3 of 4 steps.
#[test]
fn a_rank_last_by_a_hair_is_not_late_in_that_step() {
    let late_by = [(1, 5_000.0), (1, 100.0), (0, 5_000.0), (1, 5_000.0)];
    let traces = (0..2)
        .map(|rank| {
            let steps = late_by
                .iter()
                .map(|&(late, by)| {
                    let ready = if rank == late { 40_000.0 + by } else { 40_000.0 };
                    let end = 40_000.0 + by + 2_000.0;
                    let v = vec![
                        op("aten::addmm", 0.0, ready - 1_000.0),
                        enqueue(ready - 500.0, "1000000"),
                        gloo(2, ready, end - ready, "1000000"),
                        op("aten::add_", end + 100.0, 3_000.0),
                    ];
                    (end + 3_200.0, v)
                })
                .collect::<Vec<_>>();
            trace(rank, 2, &steps)
        })
        .collect();
    let a = run(traces);
    for f in &a.findings {
        assert!(
            !matches!(f.id.as_str(), "straggler" | "slow_device" | "compute_imbalance" | "host_stall"),
            "{:?}: {}",
            ids(&a),
            f.message
        );
    }
}

/// Eighteen gradient buckets of 1.5-1.6 MiB whose times do not grow with their size: no fit can
/// tell a fixed cost per call. The trace still bounds it from below (a call takes at least its
/// size at the best throughput any call reached; what is beyond is fixed cost): the
/// small-collectives finding claims that floor and says it is one, no more, and the
/// exposed-transfer advice points at it.
#[test]
fn small_calls_of_one_size_are_costed_at_their_floor() {
    let world = 2;
    let dims = ["393216", "409600"]; // 1.5 MiB and 1.56 MiB of floats
    let traces = (0..world)
        .map(|rank| {
            let steps = (0..4)
                .map(|_| {
                    let mut v = vec![op("aten::addmm", 0.0, 20_000.0)];
                    let mut t = 20_000.0;
                    for k in 0..18 {
                        // The larger calls are not the slower ones: 3.0 ms and 2.9 ms.
                        let (n, d) = if k % 2 == 0 { (dims[0], 3_000.0) } else { (dims[1], 2_900.0) };
                        v.push(enqueue(t - 30.0, n));
                        v.push(gloo(2 + (k % 2) as u32, t, d, n));
                        t += d + 10.0;
                    }
                    v.push(op("aten::add_", t + 100.0, 2_000.0));
                    (t + 2_200.0, v)
                })
                .collect::<Vec<_>>();
            trace(rank, world, &steps)
        })
        .collect();
    let a = run(traces);
    let small =
        a.findings.iter().find(|f| f.id == "small_collectives").unwrap_or_else(|| panic!("{:?}", ids(&a)));
    assert!(small.message.contains("at least"), "{}", small.message);
    // The 3.0 ms calls are 0.22 ms beyond the 2.9 ms calls' throughput, those are at it: the
    // floor is about 0.11 ms a call, 16 calls saved (18 become 2), 1.7 ms a step if they ran
    // back to back. The replay keeps the host's issue times (the host did its own work between
    // the calls), so only the calls after the last issue come earlier: less than that.
    let gain_ms = small.impact_ns as f64 / 1e6;
    assert!((0.5..=2.5).contains(&gain_ms), "{gain_ms} ms: {}", small.message);
    let f = a.findings.iter().find(|f| f.id == "exposed_comm").unwrap_or_else(|| panic!("{:?}", ids(&a)));
    assert!(f.fix.contains("small-collectives finding"), "{}", f.fix);
}

/// DDP broadcasts the module's buffers (BatchNorm statistics) from rank 0 at the start of every
/// forward (`broadcast_buffers=True`): small blocking broadcasts inside
/// `DistributedDataParallel.forward`. The advice is DDP's switch, not `async_op=True` on a call
/// the user never wrote.
#[test]
fn ddp_buffer_broadcasts_get_ddps_advice() {
    let world = 2;
    let traces = (0..world)
        .map(|rank| {
            let steps = (0..4)
                .map(|_| {
                    let v = vec![
                        Ev {
                            name: "DistributedDataParallel.forward",
                            cat: "user_annotation",
                            tid: 1,
                            ts: 0.0,
                            dur: 30_000.0,
                            dims: None,
                        },
                        Ev {
                            name: "c10d::broadcast_",
                            cat: "cpu_op",
                            tid: 1,
                            ts: 100.0,
                            dur: 30.0,
                            dims: Some("96"),
                        },
                        Ev {
                            name: "gloo:broadcast",
                            cat: "user_annotation",
                            tid: 2,
                            ts: 200.0,
                            dur: 5_000.0,
                            dims: Some("96"),
                        },
                        op("aten::conv2d", 5_300.0, 24_000.0),
                        op("autograd::engine::evaluate_function: ConvolutionBackward0", 30_000.0, 50_000.0),
                        enqueue(80_100.0, "300000"),
                        gloo(3, 80_200.0, 3_000.0, "300000"),
                        op("aten::add_", 83_300.0, 10_000.0),
                    ];
                    (93_400.0, v)
                })
                .collect::<Vec<_>>();
            trace(rank, world, &steps)
        })
        .collect();
    let a = run(traces);
    let f = a.findings.iter().find(|f| f.id == "host_sync").unwrap_or_else(|| panic!("{:?}", ids(&a)));
    assert!(f.fix.contains("broadcast_buffers=False"), "{}", f.fix);
    assert!(!f.fix.contains("async_op"), "{}", f.fix);
}

/// All_reduces of a size the trace does not say (no `record_shapes`), issued outside any
/// annotation, the host idle meanwhile. Inside an autograd function (HTA's `df_index_resolver`
/// trace: 404 per step under `CompiledFunctionBackward`) they are gradient buckets, no host
/// synchronization (they were a 125 ms `host_sync`); issued by the loop itself, outside any
/// autograd frame, they are its blocking calls, whatever their size, and the finding says the
/// sizes were not recorded.
#[test]
fn unannotated_calls_of_unknown_size_are_host_sync_only_from_the_loop() {
    let world = 2;
    let job = |in_autograd: bool| {
        (0..world)
            .map(|rank| {
                let steps = (0..4)
                    .map(|_| {
                        let mut v = vec![op("aten::addmm", 0.0, 20_000.0)];
                        if in_autograd {
                            v.push(op(
                                "autograd::engine::evaluate_function: CompiledFunctionBackward",
                                19_990.0,
                                22_050.0,
                            ));
                        }
                        let mut t = 20_000.0;
                        for _ in 0..20 {
                            v.push(Ev {
                                name: "c10d::allreduce_",
                                cat: "cpu_op",
                                tid: 1,
                                ts: t,
                                dur: 20.0,
                                dims: None,
                            });
                            v.push(Ev {
                                name: "gloo:all_reduce",
                                cat: "user_annotation",
                                tid: 2,
                                ts: t + 30.0,
                                dur: 1_000.0,
                                dims: None,
                            });
                            t += 1_100.0;
                        }
                        v.push(op("aten::add_", t, 5_000.0));
                        (t + 5_100.0, v)
                    })
                    .collect::<Vec<_>>();
                trace(rank, world, &steps)
            })
            .collect()
    };
    let a = run(job(true));
    assert!(!a.findings.iter().any(|f| f.id == "host_sync"), "{:#?}", a.findings);
    let a = run(job(false));
    let f = a.findings.iter().find(|f| f.id == "host_sync").unwrap_or_else(|| panic!("{:?}", ids(&a)));
    assert!(f.message.contains("sizes the trace does not record"), "{}", f.message);
    assert!(f.fix.contains("gradients reduced by hand"), "{}", f.fix);
}
