//! Two runs compared (`compare`, issue 36) on real runs of one DDP job (`tests/zoo/`): one
//! injected cause against the healthy run must name that cause, its rank and about its size as
//! the run measured it itself (`measured` in scenario.json, `time.perf_counter()` on each rank,
//! independent of the profiler); two runs of one configuration (`tests/zoo/repeat/`) and a run
//! against itself must say "no change beyond noise". GPU-shaped pairs come from the generator
//! (`rankscope synth --scenario`), whose manifest says what was injected.

// Tests read the zoo from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::path::PathBuf;

use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::compare::{self, gates, render, Change, Comparison, FindingChange, Presence};
use rankscope_core::diagnose::analyze;
use rankscope_core::finding::FindingId;
use rankscope_core::normalize::{assemble, Rules};
use rankscope_synth::{self as synth, Injected, Scenario, SynthConfig};
use serde_json::Value;

/// The run's analysis (through the job path the other zoo tests use) and its scenario.json.
fn run(name: &str) -> (Analysis, Value) {
    common::zoo::run(name)
}

fn diff(base: &Analysis, new: &Analysis) -> Comparison {
    compare::compare(base, new, &compare::Options::default())
}

/// A rank's mean of a `measured.per_rank_mean` key, in ns.
fn measured_ns(spec: &Value, rank: u32, key: &str) -> f64 {
    spec["measured"]["per_rank_mean"][rank.to_string()][key]
        .as_f64()
        .unwrap_or_else(|| panic!("measured {key} of rank {rank}"))
        * 1e6
}

fn within(got_ns: i64, want_ns: f64, tol: f64, what: &str) {
    let rel = (got_ns as f64 - want_ns).abs() / want_ns.abs().max(1.0);
    assert!(rel <= tol, "{what}: {:.1} ms vs measured {:.1} ms", got_ns as f64 / 1e6, want_ns / 1e6);
}

#[test]
fn a_host_stall_is_named_with_its_rank_region_and_size() {
    let (base, _) = run("baseline");
    let (new, spec) = run("host_stall");
    let c = diff(&base, &new);
    let v = &c.verdict;
    assert_eq!(v.change, Change::Slower, "{}", v.line);
    assert!(c.step_time.beyond_noise && c.step_time.shift.is_some_and(|s| s.lo_ns > 0), "{:?}", c.step_time);
    let cause = v.cause.as_ref().unwrap_or_else(|| panic!("no cause: {}", v.line));
    assert_eq!(cause.ranks, [2], "{}", v.line);
    assert_eq!(cause.region.last().map(String::as_str), Some("straggler_sleep"), "{}", v.line);
    assert_eq!(cause.presence, Some(Presence::New));
    // What rank 2 slept per step, by its own clock.
    within(cause.delta_ns, measured_ns(&spec, 2, "injected_sleep_ms"), 0.05, "the sleep");
    // The others wait for it: about what they measured (the baseline's own waits are small).
    assert_eq!(v.waiting_ranks, [0, 1, 3], "{}", v.line);
    let wait = spec["measured"]["derived"]["collective_wait"]["mean_wait_of_other_ranks_ms"]
        .as_f64()
        .unwrap_or_else(|| panic!("measured wait"));
    within(v.waiting_delta_ns, wait * 1e6, 0.25, "the others' wait");
    assert!(
        v.line.starts_with("step time +") && v.line.contains("rank 2's forward > straggler_sleep"),
        "{}",
        v.line
    );
    // The finding appeared, on rank 2.
    assert!(
        c.findings
            .iter()
            .any(|f| f.id == "host_stall" && f.ranks == [2] && f.change == FindingChange::Appeared),
        "{:?}",
        c.findings
    );
}

#[test]
fn the_reverse_comparison_says_the_stall_is_gone() {
    let (base, _) = run("host_stall");
    let (new, _) = run("baseline");
    let c = diff(&base, &new);
    assert_eq!(c.verdict.change, Change::Faster, "{}", c.verdict.line);
    let cause = c.verdict.cause.as_ref().unwrap_or_else(|| panic!("no cause: {}", c.verdict.line));
    assert_eq!((cause.ranks.as_slice(), cause.presence), (&[2u32][..], Some(Presence::Vanished)));
    assert_eq!(cause.region.last().map(String::as_str), Some("straggler_sleep"));
    // The others no longer wait for it.
    assert_eq!(c.verdict.waiting_ranks, [0, 1, 3], "{}", c.verdict.line);
    assert!(c.verdict.waiting_delta_ns < 0 && c.verdict.line.contains("waited for"), "{}", c.verdict.line);
}

#[test]
fn a_slow_dataloader_is_named_on_its_rank() {
    let (base, bspec) = run("baseline");
    let (new, spec) = run("slow_dataloader");
    let c = diff(&base, &new);
    let v = &c.verdict;
    assert_eq!(v.change, Change::Slower, "{}", v.line);
    let cause = v.cause.as_ref().unwrap_or_else(|| panic!("no cause: {}", v.line));
    assert_eq!(cause.ranks, [3], "{}", v.line);
    assert!(cause.region.iter().any(|r| r.contains("DataLoader")), "{}", v.line);
    assert!(v.line.contains("rank 3's DataLoader"), "{}", v.line);
    // Rank 3's time in the DataLoader grew by what its own clock says.
    let want = measured_ns(&spec, 3, "data_ms") - measured_ns(&bspec, 3, "data_ms");
    within(cause.delta_ns, want, 0.1, "rank 3's data loading");
    assert!(v.waiting_ranks == [0, 1, 2], "{}", v.line);
}

#[test]
fn a_run_against_itself_has_no_change() {
    let (a, _) = run("baseline");
    let c = diff(&a, &a);
    assert_eq!(c.verdict.change, Change::NoChange, "{}", c.verdict.line);
    assert!(c.verdict.line.starts_with("no change beyond noise"), "{}", c.verdict.line);
    assert!(c.figures.iter().all(|f| !f.beyond_noise && f.shift.delta_ns == 0));
    assert!(c.regions.iter().all(|r| !r.beyond_noise && r.presence == Presence::Both));
    assert!(c.config.is_empty() && c.findings.iter().all(|f| f.change == FindingChange::Both));
    assert!(c.verdict.also.is_empty());
    assert!(c.attribution.causes.is_empty(), "{:?}", c.attribution.causes);
    assert_eq!(c.attribution.behind_ideal.as_ref().map(|b| b.delta_ns), Some(0));
}

#[test]
fn two_runs_of_one_configuration_have_no_change_beyond_noise() {
    // Two baselines made one after the other with the same seed (tests/zoo/repeat/).
    let (b, _) = run("repeat/baseline_b");
    let (c, _) = run("repeat/baseline_c");
    for (x, y) in [(&b, &c), (&c, &b)] {
        let d = diff(x, y);
        assert_eq!(d.verdict.change, Change::NoChange, "{}", d.verdict.line);
        let gate: gates::Gate = "step_time>+5%".parse().unwrap_or_else(|e| panic!("{e}"));
        assert!(gates::failed(&d, &[gate]).is_empty());
    }
}

#[test]
fn a_host_stall_made_on_this_machine_is_named_against_its_baseline() {
    // The repeat runs share a machine (the committed zoo ran on a slower, loaded one).
    let (base, _) = run("repeat/baseline_b");
    let (new, spec) = run("repeat/host_stall_b");
    let c = diff(&base, &new);
    let cause = c.verdict.cause.as_ref().unwrap_or_else(|| panic!("no cause: {}", c.verdict.line));
    assert_eq!(c.verdict.change, Change::Slower);
    assert_eq!(cause.ranks, [2], "{}", c.verdict.line);
    assert_eq!(cause.region.last().map(String::as_str), Some("straggler_sleep"));
    within(cause.delta_ns, measured_ns(&spec, 2, "injected_sleep_ms"), 0.05, "the sleep");
    let gate: gates::Gate = "step_time>+5%".parse().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(gates::failed(&c, &[gate]).len(), 1);
    // What explains it, by the what-if replay of both runs: the stall that appeared on rank 2,
    // its replayed saving within 25% of the step's change, and the job's distance from its
    // ideal step moving by as much.
    let delta = c.step_time.shift.map_or(0, |s| s.delta_ns);
    let first = c.attribution.causes.first().unwrap_or_else(|| panic!("nothing explains {delta} ns"));
    assert_eq!((first.id, first.ranks.as_slice(), first.replayed), (FindingId::HostStall, &[2][..], true));
    assert_eq!(first.gain_base_ns, None, "no stall in the baseline");
    within(first.explained_ns, delta as f64, 0.25, "the stall's replayed saving");
    let ideal = c.attribution.behind_ideal.as_ref().unwrap_or_else(|| panic!("both runs are replayed"));
    within(ideal.delta_ns, delta as f64, 0.25, "the distance from the ideal step");
}

#[test]
fn a_renamed_annotation_is_matched_and_the_heavier_rank_named() {
    // uneven_batch calls its regions fwd / bwd / opt_step, the baseline forward / backward /
    // optimizer; rank 0 has twice the others' batch.
    let (base, _) = run("baseline");
    let (new, _) = run("uneven_batch");
    let c = diff(&base, &new);
    let renamed: Vec<(&str, &str)> = c
        .regions
        .iter()
        .filter(|r| r.rank.is_none())
        .filter_map(|r| Some((r.renamed_from.as_deref()?, r.name.as_str())))
        .collect();
    for pair in [("forward", "fwd"), ("backward", "bwd"), ("optimizer", "opt_step")] {
        assert!(renamed.contains(&pair), "{renamed:?}");
    }
    let cause = c.verdict.cause.as_ref().unwrap_or_else(|| panic!("no cause: {}", c.verdict.line));
    assert_eq!(cause.ranks.first(), Some(&0), "{}", c.verdict.line);
}

#[test]
fn smaller_buckets_show_as_many_smaller_all_reduces() {
    let (base, _) = run("baseline");
    let (new, _) = run("small_buckets");
    let c = diff(&base, &new);
    let big =
        c.collectives.iter().find(|d| d.size == "16-64 MiB").unwrap_or_else(|| panic!("{:?}", c.collectives));
    assert!(big.base.is_some() && big.new.is_none(), "{big:?}");
    let small =
        c.collectives.iter().find(|d| d.size == "1-4 MiB").unwrap_or_else(|| panic!("{:?}", c.collectives));
    let per_step = small.new.as_ref().map_or(0.0, |s| s.calls_per_step);
    // 19 buckets per step (scenario.json); every call is matched across the 4 ranks.
    assert!(small.base.is_none() && (15.0..=25.0).contains(&per_step), "{small:?}");
    // The configuration read from the traces: same world size, backend, steps.
    assert!(c.config.is_empty(), "{:?}", c.config);
}

#[test]
fn another_world_size_is_a_configuration_difference() {
    let (base, _) = run("baseline");
    let (new, _) = run("identical_2rank");
    let c = diff(&base, &new);
    let keys: Vec<&str> = c.config.iter().map(|d| d.key.as_str()).collect();
    assert!(keys.contains(&"world_size") && keys.contains(&"ranks"), "{:?}", c.config);
    let ws = c.config.iter().find(|d| d.key == "world_size").map(|d| (d.base.as_str(), d.new.as_str()));
    assert_eq!(ws, Some(("4", "2")));
}

#[test]
fn the_json_is_versioned_and_reads_back() {
    let (base, _) = run("baseline");
    let (new, _) = run("host_stall");
    let c = diff(&base, &new);
    let text = render::json(&c);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["schema"], "rankscope.diff/1");
    assert_eq!(v["verdict"]["change"], "slower");
    let back: Comparison = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, c);
    // Every output leads with the verdict; the CSV has a row per figure, region and operator.
    assert!(render::text(&c).starts_with(&c.verdict.line));
    assert!(render::markdown(&c).starts_with(&c.verdict.line));
    let csv = render::csv(&c);
    assert_eq!(csv.lines().count(), 2 + c.figures.len() + c.regions.len() + c.operators.len());
}

/// A generated GPU job (steps 8) and what its manifest says was injected.
fn synthetic(s: Scenario, seed: u64) -> (Analysis, Injected) {
    let cfg = SynthConfig { steps: 8, seed, ..s.config() };
    let man = synth::manifest(&cfg);
    let traces: Vec<_> = synth::write_ranks(&cfg, vec![Vec::new(); cfg.ranks as usize])
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .enumerate()
        .map(|(r, (b, _))| {
            common::ingest_chunked(&synth::file_name(r as u32, false), &b, 1 << 20)
                .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    let job = assemble(traces, &[], &Rules::default());
    (analyze(&job, &Options::default()), man.injected)
}

#[test]
fn gpu_jobs_name_the_injected_rank_and_a_reseeded_baseline_is_noise() {
    let (base, _) = synthetic(Scenario::Baseline, 7);
    let (again, _) = synthetic(Scenario::Baseline, 8);
    let c = diff(&base, &again);
    assert_eq!(c.verdict.change, Change::NoChange, "{}", c.verdict.line);
    for s in [Scenario::HostStall, Scenario::SlowDataloader, Scenario::SlowGpu, Scenario::UnevenBatch] {
        let (new, inj) = synthetic(s, 7);
        let c = diff(&base, &new);
        let line = &c.verdict.line;
        assert_eq!(c.verdict.change, Change::Slower, "{s:?}: {line}");
        let cause = c.verdict.cause.as_ref().unwrap_or_else(|| panic!("{s:?}: no cause: {line}"));
        assert_eq!(cause.ranks, inj.ranks, "{s:?}: {line}");
        assert!(
            !c.verdict.waiting_ranks.is_empty()
                && !c.verdict.waiting_ranks.iter().any(|r| inj.ranks.contains(r))
        );
        if s == Scenario::HostStall {
            assert_eq!(cause.region.last().map(String::as_str), Some("straggler_sleep"), "{line}");
            within(cause.delta_ns, inj.amount_ns as f64, 0.1, "the generated stall");
        }
    }
}

/// The words of a comparison as a reviewed file (`tests/diff_snapshots/*.md`; apart from
/// `tests/snapshots/`, whose every file is one job's report): a change in
/// wording is a diff in review. `UPDATE_SNAPSHOTS=1` rewrites them.
#[test]
fn the_markdown_of_zoo_pairs_matches_its_snapshots() {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/diff_snapshots"));
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|v| !v.is_empty() && v != "0");
    let (base, _) = run("baseline");
    let mut stale = Vec::new();
    for new in ["host_stall", "slow_dataloader"] {
        let (a, _) = run(new);
        let got = render::markdown(&diff(&base, &a));
        let path = dir.join(format!("baseline_{new}.md"));
        if update {
            std::fs::write(&path, &got).unwrap_or_else(|e| panic!("{e}"));
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if want != got {
            stale.push(path.display().to_string());
        }
    }
    assert!(stale.is_empty(), "differ from their snapshots (UPDATE_SNAPSHOTS=1 rewrites): {stale:?}");
}

#[test]
fn hybrid_parallel_pairs_name_the_injected_rank_and_region() {
    // Pairs of `tests/zoo/layout/` whose config differs only by the injection (and the seed).
    for (healthy, injected) in
        [("tp2_dp2_healthy", "tp2_dp2_stall"), ("hsdp_2x2_healthy", "hsdp_2x2_slow_loader")]
    {
        let (base, bspec) = run(&format!("layout/{healthy}"));
        let (new, spec) = run(&format!("layout/{injected}"));
        let (mut bc, mut nc) = (bspec["config"].clone(), spec["config"].clone());
        for c in [&mut bc, &mut nc] {
            if let Some(o) = c.as_object_mut() {
                o.remove("inject");
                o.remove("seed");
            }
        }
        assert_eq!(bc, nc, "{healthy} and {injected} are not one configuration");
        let c = diff(&base, &new);
        let line = &c.verdict.line;
        assert_eq!(c.verdict.change, Change::Slower, "{line}");
        let cause = c.verdict.cause.as_ref().unwrap_or_else(|| panic!("{injected}: no cause: {line}"));
        let inj = &spec["injected"];
        let ranks: Vec<u32> = inj["ranks"]
            .as_array()
            .map_or(vec![], |v| v.iter().filter_map(|x| x.as_u64()).map(|x| x as u32).collect());
        assert_eq!(cause.ranks, ranks, "{injected}: {line}");
        assert_eq!(cause.region.last().map(String::as_str), inj["where"].as_str(), "{injected}: {line}");
        let amount = inj["amount_ms"].as_f64().unwrap_or_else(|| panic!("{injected}: amount"));
        within(cause.delta_ns, amount * 1e6, 0.15, injected);
    }
}

#[test]
fn a_slower_fabric_is_every_ranks_transfer_with_its_bandwidth() {
    // Generated GPU jobs whose gradient all_reduce is 30% exposed, on a fabric of 80 GB/s and
    // then of 20 GB/s bus bandwidth.
    let job = |busbw: f64, seed: u64| {
        let cfg = SynthConfig {
            ranks: 8,
            steps: 8,
            seed,
            straggler_rank: None,
            exposed_comm_fraction: 0.3,
            busbw_gbps: busbw,
            ..SynthConfig::default()
        };
        let traces: Vec<_> = synth::write_ranks(&cfg, vec![Vec::new(); cfg.ranks as usize])
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .enumerate()
            .map(|(r, (b, _))| {
                common::ingest_chunked(&synth::file_name(r as u32, false), &b, 1 << 20)
                    .unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        analyze(&assemble(traces, &[], &Rules::default()), &Options::default())
    };
    let c = diff(&job(80.0, 1), &job(20.0, 2));
    let line = &c.verdict.line;
    assert_eq!(c.verdict.change, Change::Slower, "{line}");
    let cause = c.verdict.cause.as_ref().unwrap_or_else(|| panic!("no cause: {line}"));
    assert_eq!(cause.figure, Some(compare::Figure::ExposedTransfer), "{line}");
    assert!(cause.every_rank, "{line}");
    let bw = c
        .collectives
        .iter()
        .filter_map(|d| Some((d.base.as_ref()?.busbw_gbps?, d.new.as_ref()?.busbw_gbps?)));
    assert!(bw.clone().any(|(x, y)| x > 3.0 * y), "{:?}", bw.collect::<Vec<_>>());
    assert!(line.contains("GB/s bus bandwidth"), "{line}");
}

/// `tests/zoo/pairs/`: one job (`make_pairs.py`) run as it is, again, and with one change each.
#[test]
fn pairs_of_one_job_with_one_change_each() {
    let (base, bspec) = run("pairs/base");
    let (again, _) = run("pairs/base_again");
    for (x, y) in [(&base, &again), (&again, &base)] {
        let c = diff(x, y);
        assert_eq!(c.verdict.change, Change::NoChange, "{}", c.verdict.line);
    }

    // Rank 3's Dataset 6× slower: its DataLoader, by what its own clock measured.
    let (new, spec) = run("pairs/slow_loader_r3");
    let c = diff(&base, &new);
    let cause = c.verdict.cause.as_ref().unwrap_or_else(|| panic!("no cause: {}", c.verdict.line));
    assert_eq!(
        (c.verdict.change, cause.ranks.as_slice()),
        (Change::Slower, &[3u32][..]),
        "{}",
        c.verdict.line
    );
    assert!(cause.region.iter().any(|r| r.contains("DataLoader")), "{}", c.verdict.line);
    let want = measured_ns(&spec, 3, "data_ms") - measured_ns(&bspec, 3, "data_ms");
    within(cause.delta_ns, want, 0.15, "rank 3's data loading");

    // Rank 0's batch doubled: more compute on rank 0 (its DataLoader also loads twice the
    // items, a smaller change said after it).
    let (new, spec) = run("pairs/uneven_r0");
    let c = diff(&base, &new);
    let cause = c.verdict.cause.as_ref().unwrap_or_else(|| panic!("no cause: {}", c.verdict.line));
    assert_eq!(
        (c.verdict.change, cause.ranks.as_slice()),
        (Change::Slower, &[0u32][..]),
        "{}",
        c.verdict.line
    );
    assert_eq!(cause.figure, Some(compare::Figure::Compute), "{}", c.verdict.line);
    let loader =
        c.verdict.also.iter().find(|a| a.ranks == [0] && a.region.iter().any(|r| r.contains("DataLoader")));
    let want = measured_ns(&spec, 0, "data_ms") - measured_ns(&bspec, 0, "data_ms");
    within(loader.map_or(0, |l| l.delta_ns), want, 0.25, "rank 0's data loading");

    // bucket_cap_mb 25 → 1: the one gradient all_reduce of 16-64 MiB becomes several smaller.
    let (new, _) = run("pairs/buckets_1mb");
    let c = diff(&base, &new);
    let gone =
        c.collectives.iter().find(|d| d.size == "16-64 MiB").unwrap_or_else(|| panic!("{:?}", c.collectives));
    assert!(gone.base.is_some() && gone.new.is_none(), "{gone:?}");
    let calls: f64 = c
        .collectives
        .iter()
        .filter(|d| d.base.is_none())
        .filter_map(|d| d.new.as_ref().map(|n| n.calls_per_step))
        .sum();
    assert!(calls >= 3.0, "{:?}", c.collectives);
    assert!(c.verdict.line.contains("collectives: all_reduce"), "{}", c.verdict.line);
}
