//! The analysis engine against ground truth: the synthetic job (its manifest says what is
//! true), real sets shifted by known clock offsets, and the CPU-only gloo set.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::*;
use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::analyze;
use rankscope_core::model::RankTrace;
use rankscope_core::normalize::{assemble, Job, Rules};
use rankscope_synth::{self as synth, SynthConfig};

fn synth_job(cfg: &SynthConfig) -> Job {
    let outs =
        synth::write_ranks(cfg, vec![Vec::new(); cfg.ranks as usize]).unwrap_or_else(|e| panic!("{e}"));
    let traces: Vec<RankTrace> = outs
        .iter()
        .enumerate()
        .map(|(r, (bytes, _))| {
            ingest_chunked(&format!("rank{r}.json"), bytes, 1 << 20).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    assemble(traces, &[], &Rules::default())
}

/// Moves every timestamp of a trace by `d` ns, as a host clock off by `d` would.
fn shift(t: &mut RankTrace, d: i64) {
    for x in t.events.ts_ns.iter_mut().chain(t.flows.ts_ns.iter_mut()).chain(t.counters.ts_ns.iter_mut()) {
        *x += d;
    }
}

fn all_finite(a: &Analysis) -> bool {
    let v = serde_json::to_value(a).unwrap_or(serde_json::Value::Null);
    fn walk(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::Number(n) => n.as_f64().is_some_and(f64::is_finite),
            serde_json::Value::Array(a) => a.iter().all(walk),
            serde_json::Value::Object(o) => o.values().all(walk),
            serde_json::Value::Null => true,
            _ => true,
        }
    }
    !v.is_null() && walk(&v)
}

#[test]
fn synthetic_job_offsets_straggler_and_exposure_match_the_manifest() {
    let cfg = SynthConfig::default();
    let truth = synth::manifest(&cfg);
    let job = synth_job(&cfg);
    let a = analyze(&job, &Options::default());
    assert!(all_finite(&a));
    // Clock offsets, relative to rank 0, within 5 µs.
    let off0 = truth.ranks[0].clock_offset_ns;
    for al in &a.alignment {
        let want = truth.ranks[al.rank as usize].clock_offset_ns - off0;
        assert!(
            (al.offset_ns - want).abs() <= 5_000,
            "rank {}: offset {} want {want} ({al:?})",
            al.rank,
            al.offset_ns
        );
        if al.rank != 0 {
            assert_eq!(al.method, "collectives");
        }
    }
    // The straggler, every step.
    let s = a.straggler.clone().unwrap_or_else(|| panic!("no straggler"));
    assert_eq!(Some(s.rank), truth.straggler_rank);
    assert_eq!(s.consistency, 1.0);
    // The generator's straggler has a slower GPU (same kernels, longer): the first finding says
    // so, on that rank.
    let first = a.findings.first().unwrap_or_else(|| panic!("no finding"));
    assert_eq!((first.id.as_str(), first.ranks.clone()), ("slow_device", vec![s.rank]), "{:?}", a.findings);
    // Exposed communication and busy times per rank agree with the generator within 3%, over
    // every step but the last: the generator books each step's figures inside its CPU marker,
    // rankscope extends the last step to the end of the GPU work it launched (its tail bucket
    // all_reduce runs after the CPU marker has closed).
    let n = truth.steps as usize - 1;
    for rank in 0..cfg.ranks {
        let m = &truth.ranks[rank as usize];
        let close = |got: i64, want: i64| (got - want).abs() as f64 <= 0.03 * want.max(1) as f64 + 50_000.0;
        let got = |f: fn(&rankscope_core::analyze::breakdown::StepRank) -> i64| -> i64 {
            a.steps.iter().take(n).flat_map(|s| s.per_rank.iter().filter(|r| r.rank == rank).map(f)).sum()
        };
        let want_exposed: i64 = m.exposed_comm_ns.iter().take(n).sum();
        let want_compute: i64 = m.compute_busy_ns.iter().take(n).sum();
        let want_comm: i64 = m.comm_busy_ns.iter().take(n).sum();
        let (e, c, k, mem) =
            (got(|r| r.exposed_comm_ns), got(|r| r.compute_ns), got(|r| r.comm_ns), got(|r| r.memory_ns));
        // The generator counts memcpy/memset on the compute stream as compute; rankscope books
        // them as memory, which hides no communication. The two definitions differ by at most
        // the memory time.
        assert!(close(c + mem, want_compute), "rank {rank} compute+memory {} want {want_compute}", c + mem);
        assert!(
            e >= want_exposed - 50_000 && e <= want_exposed + mem + 50_000,
            "rank {rank} exposed {e} want {want_exposed} (+ up to {mem})"
        );
        assert!(close(k, want_comm), "rank {rank} comm {k} want {want_comm}");
    }
    // Exposed *transfer* is what every rank leaves exposed at once: the straggler's exposed
    // communication (it waits for nobody); the rest of the others' exposure is waiting for it.
    // (The straggler's own exposed communication was checked against the manifest above.)
    let late = truth.straggler_rank.unwrap_or(0);
    let want_transfer: i64 = a
        .steps
        .iter()
        .take(n)
        .flat_map(|s| s.per_rank.iter().filter(|r| r.rank == late).map(|r| r.exposed_comm_ns))
        .sum();
    for rank in 0..cfg.ranks {
        let got: i64 = a
            .steps
            .iter()
            .take(n)
            .flat_map(|s| s.per_rank.iter().filter(|r| r.rank == rank).map(|r| r.exposed_transfer_ns))
            .sum();
        assert!(
            (got - want_transfer).abs() as f64 <= 0.03 * want_transfer as f64 + 50_000.0,
            "rank {rank} exposed transfer {got} want {want_transfer}"
        );
    }
    // 2.4% of the step: below the 10% that makes it worth a finding; the waiting is the
    // straggler's.
    assert!(!a.findings.iter().any(|f| f.id == "exposed_comm"), "{:?}", a.findings);
    assert!(!a.findings.iter().any(|f| f.id == "small_collectives"));
    // busbw of the 25 MiB buckets is near the generator's 80 GB/s.
    let big = a
        .collectives
        .iter()
        .find(|c| c.bytes_p50 == Some(26_214_400))
        .unwrap_or_else(|| panic!("{:?}", a.collectives));
    let bus = big.busbw_gbps.unwrap_or(0.0);
    assert!((bus - cfg.busbw_gbps).abs() < 0.1 * cfg.busbw_gbps, "busbw {bus}");
}

#[test]
fn small_buckets_are_found() {
    let cfg = SynthConfig { steps: 3, ..SynthConfig::default() }.with_small_buckets();
    let job = synth_job(&cfg);
    let a = analyze(&job, &Options::default());
    let f =
        a.findings.iter().find(|f| f.id == "small_collectives").unwrap_or_else(|| panic!("{:?}", a.findings));
    assert!(f.message.contains("all_reduce"), "{}", f.message);
    assert!(f.fix.contains("bucket_cap_mb"));
}

#[test]
fn no_straggler_no_finding() {
    let cfg = SynthConfig { straggler_rank: None, ..SynthConfig::default() };
    let a = analyze(&synth_job(&cfg), &Options::default());
    assert!(!a.findings.iter().any(|f| f.id == "straggler"), "{:?}", a.findings);
}

#[test]
fn shifted_real_dlrm_set_offsets_are_recovered() {
    let mut traces = load_dir("traces/param-dlrm-8rank");
    // Unshifted: the ranks share a host clock; nothing may be "corrected".
    let job = assemble(traces.clone(), &[], &Rules::default());
    let a = analyze(&job, &Options::default());
    assert!(
        a.alignment.iter().all(|x| x.offset_ns == 0 && x.estimate_ns.abs() < 10_000),
        "{:?}",
        a.alignment
    );
    // Shift each rank by a known amount (µs to ms, both signs).
    let shifts: Vec<i64> = (0..8).map(|r| (r as i64 * 1_234_567) % 5_000_000 - 2_000_000).collect();
    for (t, &d) in traces.iter_mut().zip(&shifts) {
        shift(t, d);
    }
    let job = assemble(traces, &[], &Rules::default());
    let a = analyze(&job, &Options::default());
    for al in &a.alignment {
        let want = shifts[al.rank as usize] - shifts[0];
        assert!((al.offset_ns - want).abs() <= 20_000, "rank {}: {} want {want}", al.rank, al.offset_ns);
    }
    // The straggler does not change with the clocks.
    assert_eq!(a.straggler.as_ref().map(|s| s.rank), Some(7));
}

#[test]
fn dlrm_set_split_over_two_hosts_gets_one_offset_per_host() {
    // The 8-rank DLRM set names no host. As if ranks 0-3 and 4-7 were two hosts, the second's
    // clock 2.5 ms ahead: one offset for the second, within the set's µs noise.
    let mut traces = load_dir("traces/param-dlrm-8rank");
    for (r, t) in traces.iter_mut().enumerate() {
        t.meta.host_name = Some(if r < 4 { "node-a" } else { "node-b" }.into());
        if r >= 4 {
            shift(t, 2_500_000);
        }
    }
    let a = analyze(&assemble(traces, &[], &Rules::default()), &Options::default());
    for al in &a.alignment {
        let (want, group) = if al.rank < 4 { (0, 0) } else { (2_500_000, 4) };
        assert_eq!(al.clock_group, group, "{al:?}");
        assert!(
            (al.offset_ns - want).abs() <= 20_000,
            "rank {}: {} want {want} ({al:?})",
            al.rank,
            al.offset_ns
        );
    }
    assert_eq!(a.straggler.as_ref().map(|s| s.rank), Some(7));
}

#[test]
fn shifted_gloo_set_offsets_are_recovered_within_its_noise() {
    let mut traces = load_dir("traces/ddp-gloo-cpu-4rank");
    let shifts = [0i64, 250_000_000, -40_000_000, 900_000_000];
    // Clocks that differ are on different hosts: the set's one host name would pin them.
    for (r, (t, &d)) in traces.iter_mut().zip(&shifts).enumerate() {
        shift(t, d);
        t.meta.host_name = Some(format!("node{r}"));
    }
    let a = analyze(&assemble(traces, &[], &Rules::default()), &Options::default());
    for al in &a.alignment {
        let want = shifts[al.rank as usize];
        // gloo's CPU ring ends spread over milliseconds; the estimate is within that spread.
        assert!(
            (al.offset_ns - want).abs() <= 5_000_000,
            "rank {}: {} want {want} ({al:?})",
            al.rank,
            al.offset_ns
        );
    }
}

#[test]
fn one_host_name_over_clocks_the_collectives_contradict_is_not_one_clock() {
    // The set's four ranks all report host `vm`. Rank 3's clock a second ahead would have it
    // leave collectives before the others entered them: taken off the host's clock and aligned
    // on its own.
    let mut traces = load_dir("traces/ddp-gloo-cpu-4rank");
    shift(&mut traces[3], 900_000_000);
    let a = analyze(&assemble(traces, &[], &Rules::default()), &Options::default());
    let groups: Vec<u32> = a.alignment.iter().map(|x| x.clock_group).collect();
    assert_eq!(groups, [0, 0, 0, 3], "{:?}", a.alignment);
    let r3 = &a.alignment[3];
    assert!((r3.offset_ns - 900_000_000).abs() <= 5_000_000, "{r3:?}");
    assert!(r3.note.contains("not one clock"), "{}", r3.note);
    assert!(a.alignment[..3].iter().all(|x| x.offset_ns == 0), "{:?}", a.alignment);

    // Known limit, asserted: a disagreement shorter than the collectives last goes unseen under
    // one host name (on one host it cannot happen: the processes read one clock).
    let mut traces = load_dir("traces/ddp-gloo-cpu-4rank");
    shift(&mut traces[1], 40_000_000);
    let a = analyze(&assemble(traces, &[], &Rules::default()), &Options::default());
    let r1 = &a.alignment[1];
    assert_eq!((r1.method.as_str(), r1.offset_ns, r1.clock_group), ("same_host", 0, 0), "{r1:?}");
}

#[test]
fn cpu_only_gloo_set_is_analysed_not_rejected() {
    let job = assemble(load_dir("traces/ddp-gloo-cpu-4rank"), &[], &Rules::default());
    let a = analyze(&job, &Options::default());
    assert!(all_finite(&a));
    assert_eq!(a.ranks.len(), 4);
    assert!(a.ranks.iter().all(|r| r.metrics_from == "cpu"));
    assert_eq!(a.steps.iter().map(|s| s.step).collect::<Vec<_>>(), [2, 3, 4]);
    for s in &a.steps {
        assert_eq!(s.per_rank.len(), 4);
        for r in &s.per_rank {
            assert!(r.compute_ns > 0 && r.comm_ns > 0, "{r:?}");
            assert_eq!(r.exposed_comm_ns, r.comm_ns - r.overlap_ns);
            assert_eq!(r.idle_ns, r.wall_ns - r.busy_ns);
            assert!(r.busy_ns <= r.wall_ns);
        }
    }
    // Two DDP buckets per step, all_reduce, matched on all four ranks.
    assert_eq!(a.collectives.len(), 1);
    assert_eq!(a.collectives[0].count, 6);
    assert_eq!(a.collectives[0].instances, 24);
    assert!(a.collectives[0].bytes_p50.is_some());
    // One host (`vm` in every trace), one clock: no correction applied, and said why.
    assert!(a.ranks.iter().all(|r| r.host.as_deref() == Some("vm")), "{:?}", a.ranks);
    assert!(a.alignment.iter().all(|x| x.offset_ns == 0 && x.clock_group == 0), "{:?}", a.alignment);
    assert!(a.alignment[1..].iter().all(|x| x.method == "same_host"), "{:?}", a.alignment);
}

#[test]
fn interval_figures_are_consistent_on_every_real_set() {
    for dir in ["traces/param-dlrm-8rank", "traces/ddp-gloo-cpu-4rank"] {
        let a = analyze(&assemble(load_dir(dir), &[], &Rules::default()), &Options::default());
        for s in &a.steps {
            for r in &s.per_rank {
                assert!(r.overlap_ns <= r.compute_ns.min(r.comm_ns), "{dir} {r:?}");
                assert!(r.busy_ns >= r.compute_ns.max(r.comm_ns), "{dir} {r:?}");
                assert_eq!(
                    r.input_ns + r.cpu_bound_ns + r.launch_overhead_ns + r.other_idle_ns,
                    r.idle_ns,
                    "{dir} {r:?}"
                );
                assert_eq!(r.comm_transfer_ns + r.comm_wait_ns, r.comm_ns, "{dir} {r:?}");
                assert_eq!(r.exposed_transfer_ns + r.exposed_wait_ns, r.exposed_comm_ns, "{dir} {r:?}");
                assert!(r.exposed_wait_ns <= r.wall_ns && r.exposed_transfer_ns <= r.wall_ns, "{dir} {r:?}");
                assert_eq!(
                    r.tb_computation_ns + r.overlap_ns + r.tb_communication_ns + r.tb_other_ns,
                    r.wall_ns
                );
            }
        }
        for p in &a.critical_path {
            // Both real sets have collectives matched across ranks: the cross-rank chain.
            assert_eq!(p.level, "cross_rank_collective_chain");
            assert!(p.hops.windows(2).all(|w| w[0].start_ns <= w[1].start_ns), "{dir} {p:?}");
            assert_eq!(
                p.split.compute_ns
                    + p.split.communication_ns
                    + p.split.memory_ns
                    + p.split.input_ns
                    + p.split.cpu_bound_ns
                    + p.split.launch_overhead_ns
                    + p.split.idle_ns,
                p.length_ns,
                "{dir} {p:?}"
            );
        }
    }
}

#[test]
fn single_rank_traces_analyse_without_partners() {
    for f in [
        "traces/hta/nccl_parser_config/nccl_data.json.gz",
        "traces/tracelens/resnet_act_checkpoint.json.gz",
        "traces/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
        "traces/param-single/resnet_kineto.json.gz",
    ] {
        let p = shared().join(f);
        let t = ingest_chunked(f, &read(&p), 1 << 20).unwrap_or_else(|e| panic!("{e}"));
        let a = analyze(&assemble(vec![t], &[], &Rules::default()), &Options::default());
        assert!(all_finite(&a), "{f}");
        assert!(!a.steps.is_empty(), "{f}");
        assert!(a.stragglers.is_empty(), "{f}");
        assert!(a.collectives.iter().all(|c| c.bw_basis == "duration"), "{f}");
    }
}

/// Two ranks written by hand (tests/fixtures/analysis/two_rank_known): every figure is known.
/// Rank 1's host clock is 1 ms ahead (its base time is 1 ms later for the same instants).
/// rank 0: compute [0,100) ∪ [200,300) µs, all_reduce [80,250); rank 1: compute [0,150),
/// all_reduce [150,250): it arrives 70 µs late, both end at 250.
#[test]
fn hand_written_two_rank_job_gives_the_known_answers() {
    let traces: Vec<RankTrace> = ["rank0.json", "rank1.json"]
        .iter()
        .map(|f| {
            let p = fixture(&format!("analysis/two_rank_known/{f}"));
            ingest_chunked(f, &read(&p), 7).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    let a = analyze(&assemble(traces, &[], &Rules::default()), &Options::default());
    let r0 = &a.steps[0].per_rank[0];
    assert_eq!((r0.wall_ns, r0.compute_ns, r0.comm_ns), (300_000, 200_000, 170_000));
    assert_eq!((r0.overlap_ns, r0.exposed_comm_ns, r0.idle_ns), (70_000, 100_000, 0));
    let r1 = &a.steps[0].per_rank[1];
    assert_eq!(
        (r1.wall_ns, r1.compute_ns, r1.comm_ns, r1.overlap_ns, r1.idle_ns),
        (300_000, 150_000, 100_000, 0, 50_000)
    );
    // The idle tail of rank 1 has no work after it: "other", not CPU-bound.
    assert_eq!(r1.other_idle_ns, 50_000);
    // Rank 1's clock reads 1 ms later for the same instant.
    assert_eq!(a.alignment[1].offset_ns, 1_000_000);
    assert_eq!(a.alignment[1].residual_ns, 0);
    // Transfer = the shorter duration (100 µs); rank 0 waited 70 µs; skew 70 µs.
    let c = &a.collectives[0];
    assert_eq!((c.count, c.instances, c.group_size), (1, 2, 2));
    assert_eq!(c.transfer_mean_ns, Some(100_000));
    assert_eq!(c.sync_wait_mean_ns, Some(35_000));
    assert_eq!(c.skew_max_ns, Some(70_000));
    assert_eq!(c.bytes_total, 4_000_000);
    // algbw = 4e6 B / 100 µs = 40 GB/s; busbw = 40 × 2(n−1)/n = 40 for n = 2.
    assert!((c.algbw_gbps.unwrap_or(0.0) - 40.0).abs() < 1e-9);
    assert!((c.busbw_gbps.unwrap_or(0.0) - 40.0).abs() < 1e-9);
    // Rank 1 is the straggler; rank 0 waited 70 µs for it.
    assert_eq!(a.stragglers[0].rank, 1);
    assert_eq!(a.stragglers[0].lateness_ns, 70_000);
    assert_eq!(a.stragglers[0].others_wait_ns, 70_000);
    // Compute imbalance (200 − 150) / 175.
    assert!((a.imbalance[0].compute_imbalance - 50.0 / 175.0).abs() < 1e-12);
    // The critical path: rank 1's compute up to its (late) arrival, the transfer, then rank 0's
    // tail (both end at 300 µs; the lower rank on the tie): 150 + 100 + 50 µs.
    let p = &a.critical_path[0];
    assert_eq!(p.level, "cross_rank_collective_chain");
    let hops: Vec<(u32, &str, i64)> =
        p.hops.iter().map(|h| (h.rank, h.what.as_str(), h.end_ns - h.start_ns)).collect();
    assert_eq!(hops, [(1, "work", 150_000), (1, "collective", 100_000), (0, "tail", 50_000)]);
    assert_eq!(
        (p.length_ns, p.split.compute_ns, p.split.communication_ns, p.split.idle_ns),
        (300_000, 200_000, 100_000, 0)
    );
    // HTA's overlap on rank 0: 70 / 170.
    assert!((a.rank_totals[0].overlap_pct_hta.unwrap_or(0.0) - 100.0 * 70.0 / 170.0).abs() < 1e-9);
}

#[test]
fn trace_collectives_are_placed_against_nccl_tests() {
    let path = shared().join("nccl-tests/xxrjun_h100_1node-8gpu_multi-collective.txt");
    let bytes = read(&path);
    let tests = rankscope_core::nccl::analyze_tests(
        &[rankscope_core::nccl::Input { name: "xxrjun.txt", bytes: &bytes }],
        None,
    );
    let opts = Options { fabric: Some(tests), ..Options::default() };
    let a = analyze(&synth_job(&SynthConfig::default()), &opts);
    // The 25 MiB bucket all_reduces (80 GB/s busbw by construction) against the H100 node's
    // nccl-tests curve; the 4-byte loss all_reduce is outside the measured sizes (32 MiB up) and
    // is not compared.
    assert_eq!(a.fabric.len(), 1, "{:?}", a.fabric);
    let c = &a.fabric[0];
    assert_eq!(c.bytes, 26_214_400);
    assert!(c.fabric_busbw_gbps > 250.0 && c.fabric_busbw_gbps < 400.0, "{c:?}");
    assert!((c.fraction - c.achieved_busbw_gbps / c.fabric_busbw_gbps).abs() < 1e-12);
    assert!(c.fraction > 0.15 && c.fraction < 0.35, "{c:?}");
    assert!(c.message.contains("all_reduce of 25.0 MiB reaches"), "{}", c.message);
    assert!(a.findings.iter().any(|f| f.id == "below_fabric"));
}

#[test]
fn rank_parts_survive_serialization_and_combine_to_the_same_analysis() {
    // The app computes each rank's part in the worker holding its tables and posts it as JSON.
    let job = assemble(load_dir("traces/param-dlrm-8rank"), &[], &Rules::default());
    let opts = Options::default();
    let direct = analyze(&job, &opts);
    let posted = common::posted_parts(&job, &opts);
    let combined = rankscope_core::diagnose::combine(posted, job.errors.clone(), &opts);
    assert_eq!(combined, direct);
}

#[test]
fn merged_trace_puts_every_rank_on_the_aligned_clock() {
    let mut traces = load_dir("traces/param-dlrm-8rank");
    let shifts: Vec<i64> = (0..8).map(|r| r as i64 * 700_000 - 2_000_000).collect();
    for (t, &d) in traces.iter_mut().zip(&shifts) {
        shift(t, d);
    }
    let job = assemble(traces, &[], &Rules::default());
    let a = analyze(&job, &Options::default());
    let plan = rankscope_core::export::ExportPlan::new(
        &a.alignment,
        job.ranks.iter().map(|r| (r.rank, r.trace.events.ts_ns.iter().min().copied())),
    );
    let mut out = Vec::new();
    plan.write_merged(&mut out, |k, out, at, first| {
        rankscope_core::export::write_rank(out, &job.ranks[k], &job.strings, at, first).map(drop)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    // Valid JSON, one process per rank, every event kept.
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{e}"));
    let events = v["traceEvents"].as_array().cloned().unwrap_or_default();
    for r in &job.ranks {
        let n = events.iter().filter(|e| e["pid"] == r.rank && (e["ph"] == "X" || e["ph"] == "i")).count();
        assert_eq!(n, r.trace.events.len(), "rank {}", r.rank);
    }
    // The last all_reduce kernel ends at the same aligned instant on every rank (±20 µs).
    let ends: Vec<f64> = (0..8u32)
        .map(|rank| {
            events
                .iter()
                .filter(|e| {
                    e["pid"] == rank && e["args"]["collective"] == "all_reduce" && e["cat"] == "kernel"
                })
                .map(|e| e["ts"].as_f64().unwrap_or(0.0) + e["dur"].as_f64().unwrap_or(0.0))
                .fold(f64::MIN, f64::max)
        })
        .collect();
    let spread =
        ends.iter().cloned().fold(f64::MIN, f64::max) - ends.iter().cloned().fold(f64::MAX, f64::min);
    assert!(spread < 20.0, "aligned all_reduce ends spread {spread} µs: {ends:?}");
    // And rankscope reads its own output back as one trace with 8 processes' lanes.
    let back = ingest_chunked("merged.json", &out, 1 << 16).unwrap_or_else(|e| panic!("{e}"));
    let total: usize = job.ranks.iter().map(|r| r.trace.events.len()).sum();
    assert_eq!(back.events.len(), total);
    assert!(back.diagnostics.iter().all(|d| d.severity < rankscope_core::model::Severity::DATA_LOSS));
}

#[test]
fn all_gather_size_from_input_dims_is_the_gathered_output() {
    // B200 vLLM trace: `nccl:_all_gather_base` with Input Dims [[1, 25136]] of BFloat16 on a
    // world of 8: nccl-tests' S for all_gather is the gathered output, 8 × 25136 × 2 bytes.
    let f = "traces/tracelens/b200_eager_trace.json.gz";
    let t = ingest_chunked(f, &read(&shared().join(f)), 1 << 20).unwrap_or_else(|e| panic!("{e}"));
    let a = analyze(&assemble(vec![t], &[], &Rules::default()), &Options::default());
    let ag = a
        .collectives
        .iter()
        .find(|c| c.kind.name() == "all_gather")
        .unwrap_or_else(|| panic!("{:?}", a.collectives));
    assert_eq!(ag.bytes_p50, Some(8 * 25_136 * 2));
}

/// DLRM's embedding all_to_all is a small blocking collective inside `## backward ##`, a region
/// of real work: taking the synchronization out saves the time the host is blocked in it on
/// the rank the others wait for, never the whole backward pass (it was reported as 4.4 ms per
/// step, 27% of the step, with advice to batch logged metrics). The zoo's `host_sync`, whose
/// `log_metrics` region is mostly its blocked calls, keeps the region's cost (tests/zoo.rs).
#[test]
fn a_blocking_collective_inside_real_work_saves_its_blocked_time_only() {
    let job = assemble(load_dir("traces/param-dlrm-8rank"), &[], &Rules::default());
    let a = analyze(&job, &Options::default());
    let backward: Vec<_> =
        a.regions.iter().filter(|r| r.name == "## backward ##").map(|r| r.inclusive_ns).collect();
    assert!(!backward.is_empty(), "the DLRM set has a backward region");
    let least = backward.iter().copied().min().unwrap_or(0);
    for f in a.findings.iter().filter(|f| f.id == "host_sync") {
        let in_backward =
            f.location.as_ref().is_some_and(|l| l.regions.iter().any(|r| r == "## backward ##"));
        if in_backward {
            assert!(f.impact_ns < least / 2, "{}: {} ns of a {least} ns backward", f.message, f.impact_ns);
            assert!(!f.fix.contains("logs into one tensor"), "{}", f.fix);
        }
    }
}

/// DLRM's one profiled step: ranks 2, 6 and 7 reach the collectives last, but they start the
/// step 6-7 ms after ranks 1 and 3 and their step is shorter than the others' (13 ms against
/// 18 ms): nothing inside it makes them late. The finding says the delay comes before the
/// step, and that the trace does not hold it (it is the first profiled step), instead of
/// pointing at a 0.017 ms difference of device compute inside it.
#[test]
fn ranks_late_from_before_the_step_are_said_to_be() {
    let job = assemble(load_dir("traces/param-dlrm-8rank"), &[], &Rules::default());
    let a = analyze(&job, &Options::default());
    let f = a.findings.iter().find(|f| f.id == "straggler");
    assert!(f.is_some(), "{:?}", a.findings.iter().map(|f| &f.id).collect::<Vec<_>>());
    let Some(f) = f else { return };
    assert_eq!(f.ranks, vec![2, 6, 7]);
    let skew = f.evidence.or_zero(rankscope_core::finding::EvidenceKey::StartSkewNs);
    assert!(skew >= 3e6, "start skew {skew} ns");
    assert!(f.message.contains("the delay comes before the step"), "{}", f.message);
    assert!(f.message.contains("first profiled one"), "{}", f.message);
    assert!(f.location.is_none(), "{:?}", f.location);
}

/// A host blocked in a device synchronization while the collective behind it waits for a late
/// peer is waiting for that peer: DLRM's early ranks block 1.2-6.7 ms per step in syncs, all
/// but about 0.1 ms of it inside their exposed wait for ranks 2, 6 and 7 (`sync_wait_ns` of
/// the step's region). That is the straggler's cost, not a synchronization to remove. A trace
/// with nobody to wait for keeps its finding (HTA's `ns_resolution_trace`, one rank).
#[test]
fn a_sync_that_waits_for_a_late_peer_is_not_a_host_sync_finding() {
    let job = assemble(load_dir("traces/param-dlrm-8rank"), &[], &Rules::default());
    let a = analyze(&job, &Options::default());
    let syncs: Vec<_> = a
        .findings
        .iter()
        .filter(|f| f.id == "host_sync" && f.message.contains("device synchronization"))
        .collect();
    assert!(syncs.is_empty(), "{:?}", syncs.iter().map(|f| &f.message).collect::<Vec<_>>());
    let waited: i64 =
        a.regions.iter().filter(|r| r.name == "ProfilerStep" && r.rank == 1).map(|r| r.sync_wait_ns).sum();
    assert!(waited > 5_000_000, "rank 1's syncs waiting for the late ranks: {waited} ns");

    let one = load_dir("traces/hta/ns_resolution_trace");
    let a = analyze(&assemble(one, &[], &Rules::default()), &Options::default());
    assert!(
        a.findings.iter().any(|f| f.id == "host_sync" && f.message.contains("device synchronization")),
        "{:?}",
        a.findings.iter().map(|f| &f.id).collect::<Vec<_>>()
    );
}
