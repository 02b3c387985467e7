//! The scenario zoo (`tests/zoo/`): real multi-process PyTorch runs with one injected cause
//! each. For every scenario: the first finding names the injected cause and rank, nothing it
//! lists under `must_not` is reported, no "per step" figure exceeds a step, and the numbers
//! quoted agree within 15% with what the run measured itself (`measured` in scenario.json,
//! `time.perf_counter()` on each rank, independent of the profiler).

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::zoo::*;

use rankscope_core::finding::EvidenceKey;

use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::analyze;
use rankscope_core::normalize::{assemble, Rules};

fn host_stall(name: &str, region: &str) {
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    let late = f.ranks[0];
    close(
        f.evidence[EvidenceKey::StallNs],
        measured(&spec, late, "injected_sleep_ms"),
        &format!("{name}: stall"),
    );
    assert!(
        f.evidence[EvidenceKey::OthersStallNs] < 0.05 * f.evidence[EvidenceKey::StallNs],
        "{name}: {:?}",
        f.evidence
    );
    let loc = f.location.clone().unwrap_or_else(|| panic!("{name}: no location"));
    assert!(loc.regions.iter().any(|r| r == region), "{name}: {:?}", loc.regions);
    assert!(f.message.contains(&format!("`{region}`")), "{name}: {}", f.message);
    // Each waiting rank's wait, against what the run measured.
    for (rank, want) in measured_waits(&spec) {
        if rank != late {
            close(exposed_wait(&a, rank), want, &format!("{name}: rank {rank} wait"));
        }
    }
    assert!(f.message.contains("no operator running"), "{}", f.message);
    assert!(!f.fix.to_lowercase().contains("gpu"), "CPU-only run, GPU advice: {}", f.fix);
}

#[test]
fn host_stall_in_an_annotation_is_named() {
    host_stall("host_stall", "straggler_sleep");
}

#[test]
fn host_stall_on_one_of_eight_ranks_is_named() {
    host_stall("host_stall_8rank", "straggler_sleep");
}

#[test]
fn unannotated_host_stall_is_located_in_forward() {
    host_stall("host_stall_unannotated", "DistributedDataParallel.forward");
}

#[test]
fn slow_dataloader_is_input_bound() {
    let name = "slow_dataloader";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    close(f.evidence[EvidenceKey::DataLoadingNs], measured(&spec, 3, "data_ms"), "rank 3 data loading");
    let others: Vec<f64> = (0..3).map(|r| measured(&spec, r, "data_ms")).collect();
    close(f.evidence[EvidenceKey::OthersDataLoadingNs], others[1], "others' data loading");
    for (rank, want) in measured_waits(&spec) {
        if rank != 3 {
            close(exposed_wait(&a, rank), want, &format!("rank {rank} wait"));
        }
    }
    assert!(f.fix.contains("num_workers"), "{}", f.fix);
}

#[test]
fn uneven_batch_is_compute_imbalance_not_a_slow_device() {
    let name = "uneven_batch";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    assert!(
        f.evidence[EvidenceKey::ComputeNs] > 1.2 * f.evidence[EvidenceKey::OthersComputeNs],
        "{:?}",
        f.evidence
    );
    // The forward phase of every rank against its measured forward time.
    for rank in 0..4 {
        let fwd: Vec<i64> = a
            .phases
            .iter()
            .filter(|p| p.rank == rank && p.phase == rankscope_core::analyze::regions::Phase::Forward)
            .map(|p| p.active_ns)
            .collect();
        let mean = fwd.iter().sum::<i64>() as f64 / a.steps.len().max(1) as f64;
        close(mean, measured(&spec, rank, "forward_ms"), &format!("rank {rank} forward"));
    }
}

#[test]
fn small_buckets_are_small_collectives() {
    let name = "small_buckets";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    assert_eq!(f.evidence[EvidenceKey::CallsPerStep].round(), 19.0, "{}", f.message);
    assert!(f.fix.contains("bucket_cap_mb"));
    // The overlap advice does not contradict it (no "smaller buckets").
    for g in a.findings.iter().filter(|g| g.id == "exposed_comm") {
        assert!(!g.fix.contains("smaller"), "{}", g.fix);
    }
}

#[test]
fn blocking_metric_collectives_are_a_host_sync() {
    let name = "host_sync";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    assert!(f.message.contains("`log_metrics`"), "{}", f.message);
    assert!(!f.fix.contains("cuda"), "CPU-only run: {}", f.fix);
    // What removing it saves: what even the last rank to arrive spends in it, as measured.
    let ranks = 0..4u32;
    let per_rank: Vec<f64> = ranks
        .map(|r| {
            let m = &spec["measured"]["per_rank"][r.to_string()]["steps"];
            let steps = m.as_array().cloned().unwrap_or_default();
            steps
                .iter()
                .map(|s| {
                    s["metric_allreduce_ms"].as_f64().unwrap_or(0.0)
                        + s["metric_item_ms"].as_f64().unwrap_or(0.0)
                })
                .sum::<f64>()
                / steps.len().max(1) as f64
        })
        .collect();
    let least = per_rank.iter().copied().fold(f64::INFINITY, f64::min);
    close(f.impact_ns as f64, least, "host_sync saving");
}

#[test]
fn healthy_runs_report_no_false_cause() {
    for name in [
        "baseline",
        "good_overlap",
        "identical_2rank",
        "fsdp_baseline",
        "embbag_healthy_w5",
        "noise_burst_2rank",
    ] {
        let (a, spec) = run(name);
        check_expected(name, &a, &spec);
        // The hosts' noise is information: lateness that moves between the ranks, or a burst,
        // is never more than low (docs/metrics.md, "Noise").
        for f in a
            .findings
            .iter()
            .filter(|f| matches!(f.id.as_str(), "arrival_jitter" | "step_jitter" | "noise_burst"))
        {
            assert!(
                f.severity <= rankscope_core::finding::Severity::Low,
                "{name}: {:?} {}",
                f.severity,
                f.message
            );
        }
        // Identical work: no rank is called slower or more loaded.
        for f in &a.findings {
            assert!(
                !matches!(
                    f.id.as_str(),
                    "compute_imbalance" | "slow_device" | "straggler" | "host_stall" | "input_bound"
                ),
                "{name}: {}",
                f.message
            );
        }
    }
}

/// Without shapes the first finding is the one with shapes, on every run whose cause does not
/// lie in a size (a shape mismatch, buckets too small are invisible without sizes; a healthy
/// FSDP run has no cause to name). The two that moved before the change: a skipped collective
/// is told from the annotation it was issued in (sequence `origin`), and a loop's unsized
/// metric all_reduces are its blocking calls (`host_sync`), not exposure.
#[test]
fn without_shapes_the_first_finding_holds() {
    // A core shared with another process lengthens the operators longer than the scheduler's
    // slice (forward and backward) and leaves the short ones (the optimizer's) as they were:
    // the timings alone read it as larger inputs; the shapes tell it is the same work.
    let needs_sizes = [
        "hang_allgather_shape",
        "mismatch_shapes",
        "small_buckets",
        "fsdp_baseline",
        "slow_device_hog_2rank",
        // An HSDP job's collectives, with no group on gloo's spans, are placed by their calls'
        // kinds and sizes; without sizes its channels do not separate and the groups are not
        // all found, so the FSDP reductions' exposure is an estimate instead of a replay (with
        // sizes it leads, without it the logging rank does; tests/zoo/README.md, "Sixth
        // blind check").
        "hsdp_rank0_logging_barrier",
        // Expert imbalance is the all_to_all volume a rank moves: without sizes the hot expert's
        // rank is named for its longer compute (`compute_imbalance`, the same rank).
        "moe_hot_expert_r1",
        // Gradients reduced by hand in one flat all_reduce the loop issues: unsized, it cannot
        // be told from a metric's (gloo's per-call times on this loaded host do not tell 4 bytes
        // from 17 MB either), and `host_sync` leads; with sizes the rank with more work does.
        "tp2dp2_debug_rank3",
        // A healthy job whose only findings are low: ZeroRedundancyOptimizer's broadcasts are
        // told small by their sizes (`small_collectives`, a fact of the job) and lead the hosts'
        // noise (`arrival_jitter`); unsized, the noise is all that is left.
        "healthy_zero1_w4",
    ];
    let mut dirs: Vec<String> = std::fs::read_dir(zoo(""))
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .filter(|e| e.path().join("scenario.json").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !needs_sizes.contains(&n.as_str()))
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 25, "{dirs:?}");
    let first = |a: &Analysis| a.findings.first().map(|f| (f.id, f.ranks.clone()));
    for name in &dirs {
        let (with, _) = run(name);
        let without = run_without_shapes(name);
        assert_eq!(first(&without), first(&with), "{name}: {:?} without shapes", ids(&without));
    }
    let a = run_without_shapes("hang_skipped_allreduce");
    let f = &a.findings[0];
    // Its own group's sequence says it: rank 1 never issued the metrics group's 4th call.
    assert!(f.message.contains("rank 1 never issued it") && f.message.contains("group `1`"), "{}", f.message);
    let a = run_without_shapes("hs_many_unann");
    assert!(a.findings[0].message.contains("the trace does not record"), "{}", a.findings[0].message);
    // A healthy run whose rank 0 names its backward differently: its bucket all_reduces are
    // issued "elsewhere" but complete at once; no mismatch.
    let a = run_without_shapes_renamed("baseline", Some(("backward", "bwd_rank0")));
    assert!(!ids(&a).contains(&"collective_mismatch"), "{:?}", ids(&a));
}

/// Healthy runs and the run whose work moves between ranks: the sentence that says the work
/// moves only where the late rank computed clearly longer in the steps that cost the most, and
/// only with evidence that it was work. Profiled without shapes on CPU hosts, a larger batch and
/// a host that slows the rank look alike: the finding says both, low, and how to tell them
/// apart; its advice still starts with balancing the batches.
#[test]
fn work_that_moves_between_ranks_is_told_from_noise() {
    let (a, spec) = run("rotating_batch_no_shapes");
    let f =
        check_expected("rotating_batch_no_shapes", &a, &spec).unwrap_or_else(|| panic!("nothing expected"));
    assert!(
        f.message.contains("a larger batch on that rank in that step, or its host slowing it"),
        "{}",
        f.message
    );
    assert!(f.message.contains("record_shapes=True"), "{}", f.message);
    assert!(f.severity == rankscope_core::finding::Severity::Low, "{:?}", f.severity);
    assert!(
        f.fix.starts_with("If the batches differ in size") && f.fix.contains("equal tokens"),
        "{}",
        f.fix
    );
    for name in
        ["baseline", "good_overlap", "identical_2rank", "fsdp_baseline", "host_sync", "embbag_healthy_w5"]
    {
        let (a, _) = run(name);
        for f in a.findings.iter().filter(|f| f.id == "arrival_jitter") {
            assert!(!f.message.contains("the work moves"), "{name}: {}", f.message);
        }
    }
}

/// Profiled without `record_shapes` (the profiler's default), DDP's bucket all_reduces carry no
/// size; issued from `AccumulateGrad`'s hook they are gradient communication, not a host
/// synchronization (they were `host_sync` first: "2 blocking all_reduce calls in `backward`,
/// of 0 B each"), and the exposure finding says the sizes are missing rather than "0.0 MiB".
#[test]
fn unsized_ddp_buckets_are_gradient_communication_not_a_host_sync() {
    let (a, _) = run("rotating_batch_no_shapes");
    assert!(!ids(&a).contains(&"host_sync"), "{:?}", ids(&a));
    let backward: Vec<_> = a.comm_origins.iter().filter(|o| o.region == "backward").collect();
    assert!(!backward.is_empty() && backward.iter().all(|o| o.from_autograd && o.bytes_total == 0));
    assert!(a.comm_origins.iter().filter(|o| o.region != "backward").all(|o| !o.from_autograd));
    if let Some(f) = a.findings.iter().find(|f| f.id == "exposed_comm") {
        assert!(f.message.contains("sizes not recorded"), "{}", f.message);
    }
    // With sizes (every other DDP run of the zoo), the same calls are from autograd too.
    let (b, _) = run("uneven_batch");
    assert!(b.comm_origins.iter().any(|o| o.from_autograd && o.bytes_total > 0));
}

#[test]
fn single_bucket_exposure_is_explained_with_the_bucket() {
    let (a, _) = run("baseline");
    let f = a.findings.iter().find(|f| f.id == "exposed_comm").unwrap_or_else(|| panic!("{:?}", ids(&a)));
    assert!(f.message.contains("1 bucket"), "{}", f.message);
    assert!(f.fix.contains("bucket_cap_mb"), "{}", f.fix);
}

#[test]
fn one_host_runs_share_one_clock() {
    // Every zoo run is one host's processes (`host_name` "vm" in every trace; but for the runs
    // shifted afterwards to two hosts, `clock_shift_ms`): one clock, so no
    // offset, whatever the collectives' end skew (gloo's last arriver leaves 20-30 ms after
    // the others; rank by rank it read as offsets of up to 23 ms).
    let dir = zoo("");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .filter(|e| e.path().join("scenario.json").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 20, "{names:?}");
    for name in &names {
        let (a, spec) = run(name);
        // A run made as two hosts (its traces' clocks shifted afterwards) says so.
        if spec.get("clock_shift_ms").is_some() {
            continue;
        }
        assert!(a.ranks.iter().all(|r| r.host.as_deref() == Some("vm")), "{name}: {:?}", a.ranks);
        for x in &a.alignment {
            assert_eq!((x.offset_ns, x.clock_group), (0, 0), "{name}: {x:?}");
            let want = if x.rank == 0 { "reference" } else { "same_host" };
            assert_eq!(x.method.as_str(), want, "{name}: {x:?}");
        }
    }
}

#[test]
fn two_hosts_made_of_one_get_one_offset_each() {
    // host_stall_8rank as if ranks 4-7 ran on a second host whose clock reads 37 ms ahead: one
    // offset for that host, none inside the first, and the diagnosis of the one-host run.
    let name = "host_stall_8rank";
    let (mut ts, spec) = traces(name);
    let ahead = 37_000_000;
    for t in &mut ts[4..] {
        t.meta.host_name = Some("vm2".into());
        for x in t.events.ts_ns.iter_mut().chain(t.flows.ts_ns.iter_mut()).chain(t.counters.ts_ns.iter_mut())
        {
            *x += ahead;
        }
    }
    let a = analyze(&assemble(ts, &[], &Rules::default()), &Options::default());
    let groups: Vec<u32> = a.alignment.iter().map(|x| x.clock_group).collect();
    assert_eq!(groups, [0, 0, 0, 0, 4, 4, 4, 4], "{:?}", a.alignment);
    assert!(a.alignment[..4].iter().all(|x| x.offset_ns == 0), "{:?}", a.alignment);
    for x in &a.alignment[4..] {
        assert_eq!(x.method.as_str(), "collectives", "{x:?}");
        assert!((x.offset_ns - ahead).abs() <= 2_000_000, "{x:?}");
    }
    // Rank by rank, the end skew inside each host spread the second host's four offsets over
    // more than 20 ms (24.8, 25.0, 34.5 and 47.9 ms on the committed run; the host's: 37.7).
    let own: Vec<i64> = a.alignment[4..].iter().filter_map(|x| x.rank_estimate_ns).collect();
    let spread = own.iter().max().unwrap_or(&0) - own.iter().min().unwrap_or(&0);
    assert!(own.len() == 4 && spread > 20_000_000, "{:?}", a.alignment);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    for (rank, want) in measured_waits(&spec) {
        if rank != f.ranks[0] {
            close(exposed_wait(&a, rank), want, &format!("{name} on two hosts: rank {rank} wait"));
        }
    }
}

// Scenarios from the blind generalisation check (tests/zoo/make_zoo_blind.py).

#[test]
fn fsdp_straggler_is_named_though_the_others_wait_inside_an_autograd_node() {
    host_stall_measured("fsdp_straggler", "straggler_sleep");
}

#[test]
fn a_stall_in_a_backward_hook_is_named_in_its_autograd_node() {
    host_stall_measured(
        "host_stall_backward_hook",
        "autograd::engine::evaluate_function: BackwardHookFunctionBackward",
    );
}

#[test]
fn a_stall_every_other_step_is_named_not_jitter() {
    let name = "intermittent_stall";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    let loc = f.location.clone().unwrap_or_else(|| panic!("{name}: no location"));
    assert!(loc.regions.iter().any(|r| r == "checkpoint"), "{name}: {:?}", loc.regions);
    // The stalled steps are among the named ones; the saving per step over all steps is the
    // others' mean wait as measured (two stalls of 400 ms in four steps).
    for s in &spec["expected"]["steps"].as_array().cloned().unwrap_or_default() {
        let s = s.as_u64().unwrap_or(u64::MAX) as u32;
        assert!(f.steps.contains(&s), "{name}: steps {:?}", f.steps);
    }
    let want =
        spec["measured"]["derived"]["collective_wait"]["mean_wait_of_other_ranks_ms"].as_f64().unwrap_or(0.0);
    close(f.impact_ns as f64, want, &format!("{name}: saving per step"));
    assert!(!a.findings.iter().any(|g| g.id == "arrival_jitter"), "{name}: {:?}", ids(&a));
}

#[test]
fn uneven_batch_without_annotations_is_more_work_not_a_slow_host() {
    let name = "uneven_batch_unannotated";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    // With shapes: rank 3's forward operators ran on other shapes than the others' (its batch).
    assert!(f.evidence[EvidenceKey::ShapesCompared] >= 3.0, "{name}: {:?}", f.evidence);
    assert_eq!(f.evidence[EvidenceKey::ShapesSame], 0.0, "{name}: {:?}", f.evidence);
    assert!(f.evidence[EvidenceKey::TypicalOpRatio] > 1.2, "{name}: {:?}", f.evidence);
    assert!(f.message.contains("larger inputs"), "{name}: {}", f.message);
    // Without shapes the timings say it: the optimizer's operators run as long as elsewhere.
    let a = run_without_shapes(name);
    let f = &a.findings[0];
    assert_eq!(f.id.as_str(), "compute_imbalance", "{name} without shapes: {}", f.message);
    assert!(f.evidence[EvidenceKey::TypicalOpRatio] > 1.2, "{name}: {:?}", f.evidence);
    assert!(
        f.evidence[EvidenceKey::TypicalOptimizerOpRatio]
            < 1.0 + 0.5 * (f.evidence[EvidenceKey::TypicalOpRatio] - 1.0),
        "{name}: {:?}",
        f.evidence
    );
    assert!(f.message.contains("larger inputs"), "{name}: {}", f.message);
}

/// A slow device: another process spins on rank 1's core for the whole run (both ranks pinned),
/// so every operator of rank 1 runs slower in every step. Its forward operators ran on the
/// same shapes as rank 0's: the same work done slower, not more work.
#[test]
fn a_core_shared_with_another_process_is_a_slow_device() {
    let name = "slow_device_hog_2rank";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    let compared = f.evidence[EvidenceKey::ShapesCompared];
    assert!(compared >= 3.0, "{name}: {:?}", f.evidence);
    assert_eq!(f.evidence[EvidenceKey::ShapesSame], compared, "{name}: {:?}", f.evidence);
    assert!(f.evidence[EvidenceKey::TypicalOpRatio] > 1.2, "{name}: {:?}", f.evidence);
    assert!(f.message.contains("slower at the same work"), "{name}: {}", f.message);
    assert!(f.fix.contains("other processes on its cores"), "{name}: {}", f.fix);
}

/// A host stall: named on its rank in its region or operator, the stall as long as the rank
/// measured its sleep, and the saving per step the others' measured wait (DDP) or, for FSDP
/// (no per-gradient hooks to measure a wait), the measured excess of the stalled rank's forward.
fn host_stall_measured(name: &str, region: &str) {
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    let late = f.ranks[0];
    close(
        f.evidence[EvidenceKey::StallNs],
        measured(&spec, late, "injected_sleep_ms"),
        &format!("{name}: stall"),
    );
    assert!(
        f.evidence[EvidenceKey::OthersStallNs] < 0.05 * f.evidence[EvidenceKey::StallNs],
        "{name}: {:?}",
        f.evidence
    );
    let loc = f.location.clone().unwrap_or_else(|| panic!("{name}: no location"));
    assert!(loc.regions.iter().any(|r| r == region), "{name}: {:?}", loc.regions);
    assert!(f.message.contains(&format!("`{region}`")), "{name}: {}", f.message);
    let want = spec["measured"]["derived"]["collective_wait"]["mean_wait_of_other_ranks_ms"]
        .as_f64()
        .unwrap_or_else(|| {
            let others: Vec<f64> = (0..spec["world_size"].as_u64().unwrap_or(0) as u32)
                .filter(|&r| r != late)
                .map(|r| measured(&spec, r, "forward_ms"))
                .collect();
            measured(&spec, late, "forward_ms") - others.iter().sum::<f64>() / others.len().max(1) as f64
        });
    close(f.impact_ns as f64, want, &format!("{name}: saving per step"));
    assert!(!f.fix.to_lowercase().contains("gpu"), "CPU-only run, GPU advice: {}", f.fix);
}

// Scenarios from the second blind check (tests/zoo/make_zoo_blind2.py).

/// 24 blocking scalar all_reduces per step (metrics read with `.item()`) with no annotation:
/// a host_sync of the calls themselves, whose saving is what even the last arriver spends in
/// them, as measured; the DDP gradient bucket issued in backward is not one of them.
#[test]
fn unannotated_metric_allreduces_are_a_host_sync() {
    let name = "hs_many_unann";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    assert_eq!(f.evidence[EvidenceKey::CallsPerStep].round(), 24.0, "{name}: {:?}", f.evidence);
    assert!(f.evidence[EvidenceKey::BytesPerCall] <= 8.0, "{name}: {:?}", f.evidence);
    // What the last arriver spends in the calls, per step, averaged.
    let per_rank = &spec["measured"]["per_rank"];
    let n = per_rank["0"]["steps"].as_array().map_or(0, Vec::len);
    let save: f64 = (0..n)
        .map(|i| {
            (0..3)
                .map(|r| {
                    let s = &per_rank[r.to_string()]["steps"][i];
                    s["metric_allreduce_ms"].as_f64().unwrap_or(0.0)
                        + s["metric_item_ms"].as_f64().unwrap_or(0.0)
                })
                .fold(f64::INFINITY, f64::min)
        })
        .sum::<f64>()
        / n.max(1) as f64;
    close(f.impact_ns as f64, save, &format!("{name}: saving per step"));
    assert!(f.fix.contains("one tensor"), "{name}: {}", f.fix);
}

/// Every rank waits for DataLoader workers that do not keep up (and one of them a little
/// longer): the job-wide input finding comes first, with the advice for loaders that already
/// have workers.
#[test]
fn input_bound_with_workers_on_every_rank() {
    let name = "input_bound_workers_all";
    let (a, spec) = run(name);
    let f = check_expected(name, &a, &spec).unwrap_or_else(|| panic!("{name}: nothing expected"));
    assert!(f.message.contains("worker processes"), "{name}: {}", f.message);
    assert!(f.fix.contains("already has worker processes"), "{name}: {}", f.fix);
    let mut data: Vec<f64> = (0..3).map(|r| measured(&spec, r, "data_ms")).collect();
    data.sort_by(f64::total_cmp);
    close(f.impact_ns as f64, data[1], &format!("{name}: saving per step"));
}

/// FSDP2 runs (issue 35, item 4): the framework is read from its own `FSDP::*` annotations,
/// its parameter all-gathers and gradient reductions are never a host synchronization, and no
/// finding gives DDP's advice (buckets, `no_sync`) to a job that does not use DDP.
#[test]
fn fsdp_runs_get_fsdp_advice_only() {
    use rankscope_core::analyze::framework::Framework;
    for name in ["fsdp_baseline", "fsdp_straggler", "fsdp_exposed_gathers"] {
        let (a, _) = run(name);
        assert!(a.frameworks.iter().any(|f| f.framework == Framework::Fsdp2), "{name}: {:?}", a.frameworks);
        assert!(!a.frameworks.iter().any(|f| f.framework == Framework::Ddp), "{name}: {:?}", a.frameworks);
        for f in &a.findings {
            assert_ne!(f.id.as_str(), "host_sync", "{name}: {}", f.message);
            for ddp in ["bucket_cap_mb", "no_sync", "DDP "] {
                assert!(!f.fix.contains(ddp), "{name}: {} advises `{ddp}`: {}", f.id, f.fix);
            }
        }
    }
    // Where the exposed transfer is the finding, the advice is FSDP's: on this CPU group, where
    // its calls hold the host, the parameters kept gathered rather than prefetched.
    let (a, _) = run("fsdp_exposed_gathers");
    let f = a
        .findings
        .iter()
        .find(|f| f.id.as_str() == "exposed_comm")
        .unwrap_or_else(|| panic!("no exposed_comm: {:?}", ids(&a)));
    assert!(f.fix.contains("reshard_after_forward=False"), "{}", f.fix);
}
