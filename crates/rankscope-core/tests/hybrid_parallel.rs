//! Hybrid-parallel runs (`tests/zoo/layout/`): real gloo jobs with tensor, pipeline, data,
//! sharded, expert and context-parallel groups, one injected cause each (or none), and the
//! ranks' own measurements of who waited for whom (`measured.derived.waits`). For every run:
//! the groups and their roles are the job's, every collective is matched within its group,
//! ranks on one host keep one clock, the chain of waits is the measured one, and the first
//! finding names the rank where the delay starts, never a rank that only inherited a wait.

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use rankscope_core::analyze::layout::Role;
use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::analyze;
use rankscope_core::normalize::{assemble, Rules};
use serde_json::Value;

fn dir(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/zoo/layout")).join(name)
}

fn scenarios() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir(""))
        .unwrap_or_else(|e| panic!("tests/zoo/layout: {e}"))
        .filter_map(Result::ok)
        .filter(|e| e.path().join("scenario.json").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn run(name: &str) -> (Analysis, Value) {
    common::zoo::run(&format!("layout/{name}"))
}

fn u32s(v: &Value) -> Vec<u32> {
    let mut out: Vec<u32> = v
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_u64().map(|n| n as u32)).collect())
        .unwrap_or_default();
    out.sort_unstable();
    out
}

/// The findings that blame a rank as the cause of the others' wait.
const BLAMING: [&str; 6] =
    ["host_stall", "straggler", "input_bound", "compute_imbalance", "slow_device", "expert_imbalance"];

#[test]
fn the_layout_is_the_jobs() {
    let names = scenarios();
    assert!(names.len() >= 8, "{names:?}");
    for name in &names {
        let (a, spec) = run(name);
        let layout = a.layout.as_ref().unwrap_or_else(|| panic!("{name}: no layout"));
        for g in spec["layout"].as_array().cloned().unwrap_or_default() {
            let ranks = u32s(&g["ranks"]);
            let role = g["role"].as_str().unwrap_or("");
            let ours = layout
                .groups
                .iter()
                .find(|x| x.ranks == ranks && x.name == g["name"].as_str().unwrap_or(""))
                .unwrap_or_else(|| panic!("{name}: group {g} missing: {:#?}", layout.groups));
            // The world group carries the job's gradients where nothing else does: data.
            let fits = ours.role.as_str() == role
                || (role == "world" && matches!(ours.role, Role::Data | Role::World))
                || (role == "world" && ours.instances == 0);
            assert!(
                fits,
                "{name}: group {} is {} ({}), the job's is {role}",
                ours.name, ours.role, ours.role_evidence
            );
        }
        // Every collective ran in one of the job's groups, and every rank's were placed.
        for c in &a.collectives {
            assert!(layout.group(&c.pg).is_some(), "{name}: collective in group {:?}", c.pg);
        }
        assert!(layout.placement.iter().all(|p| p.unplaced == 0), "{name}: {:?}", layout.placement);
        // One host: one clock, never an offset.
        assert!(a.alignment.iter().all(|x| x.offset_ns == 0), "{name}: {:?}", a.alignment);
    }
    // Megatron's tensor 2 × data 2 is a mesh of two dimensions.
    let (a, _) = run("tp2_dp2_stall");
    assert_eq!(a.layout.map(|l| l.mesh_words()).as_deref(), Some("tensor 2 × data 2"));
}

#[test]
fn the_first_finding_names_where_the_delay_starts() {
    for name in scenarios() {
        let (a, spec) = run(&name);
        let exp = &spec["expected"];
        let not_blamed = u32s(&exp["not_blamed"]);
        for f in &a.findings {
            if BLAMING.contains(&f.id.as_str()) {
                assert!(
                    f.ranks.iter().all(|r| !not_blamed.contains(r)),
                    "{name}: {} blames {:?}, who only inherited a wait: {}",
                    f.id,
                    f.ranks,
                    f.message
                );
            }
        }
        let must_not: Vec<&str> = exp["must_not"]
            .as_array()
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for f in &a.findings {
            assert!(
                !must_not.contains(&f.id.as_str()),
                "{name}: {} must not be reported: {}",
                f.id,
                f.message
            );
        }
        let Some(want) = exp["first_finding"].as_str() else {
            // A healthy run: no rank is blamed at all.
            assert!(a.findings.iter().all(|f| !BLAMING.contains(&f.id.as_str())), "{name}: {:?}", a.findings);
            continue;
        };
        let first = a.findings.first().unwrap_or_else(|| panic!("{name}: no finding, want {want}"));
        assert_eq!(first.id, want, "{name}: {}", first.message);
        let mut got = first.ranks.clone();
        got.sort_unstable();
        assert_eq!(got, u32s(&exp["ranks"]), "{name}: {}", first.message);
    }
}

/// The chain of waits: the origins are the injected ranks, and every edge the ranks measured
/// (at least 5% of the step) is found through the same kind of group, its wait within 20%
/// (and 10 ms of a shared 2-core host's noise).
#[test]
fn waits_are_traced_through_the_groups_to_their_origin() {
    for name in scenarios() {
        let (a, spec) = run(&name);
        let exp = &spec["expected"];
        let origins = u32s(&exp["origin_ranks"]);
        let Some(chain) = a.wait_chain.as_ref() else {
            assert!(origins.is_empty(), "{name}: no chain, the delay starts on {origins:?}");
            continue;
        };
        assert_eq!(chain.origins, origins, "{name}: {chain:?}");
        let waits = &spec["measured"]["derived"]["waits"];
        let step_ms = waits["mean_step_ms"].as_f64().unwrap_or(0.0);
        // A pipeline stage's wait for its neighbour stage is the bubble up to what the other
        // pipelines' same stages wait (the least measured edge between the two stages): the
        // chain carries only the delay beyond it.
        let stage: std::collections::BTreeMap<u32, usize> = spec["layout"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter(|g| g["role"] == "pipeline")
            .flat_map(|g| u32s(&g["ranks"]).into_iter().enumerate().map(|(k, r)| (r, k)).collect::<Vec<_>>())
            .collect();
        let edges = waits["chain"].as_array().cloned().unwrap_or_default();
        let end = |e: &Value, k: &str| e[k].as_u64().unwrap_or(0) as u32;
        let bubble = |e: &Value| -> f64 {
            if e["role"] != "pipeline" {
                return 0.0;
            }
            let key = (stage.get(&end(e, "from")), stage.get(&end(e, "to")));
            edges
                .iter()
                .filter(|x| {
                    x["role"] == "pipeline" && (stage.get(&end(x, "from")), stage.get(&end(x, "to"))) == key
                })
                .filter_map(|x| x["mean_wait_ms"].as_f64())
                .fold(f64::INFINITY, f64::min)
        };
        for e in &edges {
            let want_ms = e["mean_wait_ms"].as_f64().unwrap_or(0.0) - bubble(e);
            let (from, to) = (end(e, "from"), end(e, "to"));
            let role = e["role"].as_str().unwrap_or("");
            // Only edges the delay travels: out of an origin, or out of a rank it reached.
            if want_ms < 0.05 * step_ms || origins.contains(&to) {
                continue;
            }
            let same_role = |r: Role| r.as_str() == role || (role == "world" && r == Role::Data);
            let got = chain
                .edges
                .iter()
                .find(|x| x.from == from && x.to == to && same_role(x.role))
                .unwrap_or_else(|| {
                    panic!("{name}: edge {from} -> {to} ({role}, {want_ms} ms) missing: {chain:?}")
                });
            let got_ms = got.wait_ns as f64 / 1e6;
            assert!(
                (got_ms - want_ms).abs() <= 0.2 * want_ms + 10.0,
                "{name}: {from} -> {to}: {got_ms:.1} ms, measured {want_ms:.1} ms"
            );
        }
        let inherited: BTreeSet<u32> = chain.inherited.iter().copied().collect();
        for r in u32s(&exp["not_blamed"]) {
            assert!(!chain.origins.contains(&r), "{name}: rank {r} is an origin");
            let _ = inherited.contains(&r);
        }
    }
}

/// Traces that list no groups (an older profiler, or `distributedInfo` stripped) and a layout
/// the user states: the groups are the layout's, placed by the backend's lanes, and the answer
/// is the one the traces' own groups give.
#[test]
fn a_stated_layout_stands_for_groups_the_traces_do_not_list() {
    use rankscope_core::analyze::layout::UserLayout;
    let name = "tp2_dp2_stall";
    let d = dir(name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&d)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".pt.trace.json.gz"))
        .collect();
    files.sort();
    let stripped = || -> Vec<rankscope_core::model::RankTrace> {
        files
            .iter()
            .map(|p| {
                use std::io::Read;
                let mut text = String::new();
                flate2::read::GzDecoder::new(&common::read(p)[..])
                    .read_to_string(&mut text)
                    .unwrap_or_default();
                let mut v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
                if let Some(di) = v.get_mut("distributedInfo").and_then(Value::as_object_mut) {
                    di.remove("pg_config");
                    di.remove("pg_count");
                }
                let bytes = serde_json::to_vec(&v).unwrap_or_default();
                common::ingest_chunked(&p.display().to_string(), &bytes, 1 << 20)
                    .unwrap_or_else(|e| panic!("{e}"))
            })
            .collect()
    };
    // Without groups nothing can place the collectives: none is.
    let bare = analyze(&assemble(stripped(), &[], &Rules::default()), &Options::default());
    assert!(bare.layout.is_none(), "{:?}", bare.layout);
    let layout = UserLayout::parse("tp=2,dp=2").unwrap_or_else(|e| panic!("{e}"));
    let opts = Options { layout: Some(layout), ..Options::default() };
    let a = analyze(&assemble(stripped(), &[], &Rules::default()), &opts);
    let l = a.layout.as_ref().unwrap_or_else(|| panic!("no layout"));
    assert_eq!(l.mesh_words(), "tensor 2 × data 2");
    assert!(l.placement.iter().all(|p| p.unplaced == 0), "{:?}", l.placement);
    let roles: Vec<(Vec<u32>, Role)> = l.groups.iter().map(|g| (g.ranks.clone(), g.role)).collect();
    for want in [
        (vec![0, 1], Role::Tensor),
        (vec![2, 3], Role::Tensor),
        (vec![0, 2], Role::Data),
        (vec![1, 3], Role::Data),
    ] {
        assert!(roles.contains(&want), "{roles:?}");
    }
    let first = a.findings.first().unwrap_or_else(|| panic!("no finding"));
    assert_eq!((first.id.as_str(), first.ranks.as_slice()), ("host_stall", &[3u32][..]), "{}", first.message);
    // A layout of another world size is said not to fit, and not used.
    let opts = Options { layout: UserLayout::parse("tp=2,dp=4").ok(), ..Options::default() };
    let a = analyze(&assemble(stripped(), &[], &Rules::default()), &opts);
    assert!(
        a.layout.is_none()
            || a.layout.as_ref().is_some_and(|l| l.notes.iter().any(|n| n.contains("not used")))
    );
}

#[test]
fn the_csv_rows_carry_each_ranks_groups_by_role() {
    let (a, _) = run("tp2_pp2_dp2_stall");
    let csv = rankscope_core::analyze::report::csv(&a);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    assert_eq!(header.last(), Some(&"groups"));
    let layout = a.layout.as_ref().unwrap_or_else(|| panic!("no layout"));
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        let rank: u32 = cells[1].parse().unwrap_or_else(|e| panic!("{line}: {e}"));
        let said: Vec<&str> = cells.last().map(|c| c.split(';').collect()).unwrap_or_default();
        // Every group of a role below the world that lists the rank, once, and nothing else.
        let mut want: Vec<String> = layout
            .groups
            .iter()
            .filter(|g| g.ranks.contains(&rank) && g.ranks.len() < a.ranks.len())
            .filter(|g| g.role != rankscope_core::analyze::layout::Role::Unknown)
            .map(|g| format!("{}={}", g.role.as_str(), g.name))
            .collect();
        want.sort();
        assert_eq!(said, want, "rank {rank}");
        assert!(
            said.iter().any(|s| s.starts_with("tensor=")) && said.iter().any(|s| s.starts_with("pipeline="))
        );
    }
}

/// Jobs whose delay travels through point-to-point exchanges (a context-parallel ring, a
/// TP×PP×DP pipeline with replicas) take the replay's gain: the injected rank brought to its
/// peers gives back its injected stall within 25% (docs/metrics.md, "What-if": a recv held open
/// by its host's wait for the send before it ends with its own send).
#[test]
fn exchanges_take_the_replays_gain_for_the_injected_rank() {
    for name in ["cp4_ring_stall", "tp2_pp2_dp2_stall"] {
        let (a, spec) = run(name);
        let w = a.whatif.as_ref().unwrap_or_else(|| panic!("{name}: no what-if"));
        assert!(
            w.p2p && w.holds(),
            "{name}: replay {:.1}% / {:.1}%",
            100.0 * w.mean_error,
            100.0 * w.max_error
        );
        assert!(w.alone.is_empty(), "{name}: ranks alone {:?}", w.alone);
        let rank = u32s(&spec["injected"]["ranks"])[0];
        let amount_ms = spec["injected"]["amount_ms"].as_f64().unwrap_or_else(|| panic!("{name}: amount_ms"));
        let gain_ms = w.ranks.iter().find(|g| g.rank == rank).map_or(0.0, |g| g.gain_ns as f64 / 1e6);
        assert!(
            (gain_ms - amount_ms).abs() <= 0.25 * amount_ms,
            "{name}: rank {rank} brought to its peers gains {gain_ms:.1} ms for {amount_ms} ms injected"
        );
        let first = a.findings.first().unwrap_or_else(|| panic!("{name}: no finding"));
        assert!(
            first.ranks == [rank]
                && first.evidence.contains(rankscope_core::finding::EvidenceKey::ReplayedGainNs),
            "{name}: first finding {:?} {:?} without the replay's gain",
            first.id,
            first.ranks
        );
    }
}

#[test]
fn an_expert_imbalance_takes_the_gain_of_tokens_routed_evenly() {
    // The router sends ~60% of the tokens to rank 2's expert. Routed evenly, each expert would
    // compute the group's mean: the step loses about the hot expert's excess over that mean
    // (its forward and backward, measured around the expert by the script).
    let (a, spec) = run("ep4_moe_skew");
    let w = a.whatif.as_ref().unwrap_or_else(|| panic!("no what-if"));
    assert!(w.holds(), "replay {:.1}%", 100.0 * w.mean_error);
    let f = a.findings.first().unwrap_or_else(|| panic!("no finding"));
    assert_eq!((f.id.as_str(), f.ranks.as_slice()), ("expert_imbalance", &[2][..]), "{}", f.message);
    let gain = f
        .evidence
        .get(rankscope_core::finding::EvidenceKey::ReplayedGainNs)
        .unwrap_or_else(|| panic!("no replayed gain: {}", f.message));
    assert_eq!(f.impact_ns, gain as i64);
    let per_rank = spec["measured"]["per_rank"].as_object().unwrap_or_else(|| panic!("per_rank"));
    let expert_ms = |r: &Value| {
        let steps = r["steps"].as_array().unwrap_or_else(|| panic!("steps"));
        let sum: f64 = steps
            .iter()
            .map(|s| s["expert_fwd_ms"].as_f64().unwrap_or(0.0) + s["expert_bwd_ms"].as_f64().unwrap_or(0.0))
            .sum();
        sum / steps.len() as f64
    };
    let times: Vec<f64> = per_rank.values().map(expert_ms).collect();
    let hot = expert_ms(&per_rank["2"]);
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    let excess = hot - mean;
    let gain_ms = gain / 1e6;
    assert!(
        excess > 10.0 && (gain_ms - excess).abs() <= 0.25 * excess,
        "routed evenly: {gain_ms:.1} ms replayed against the hot expert's {excess:.1} ms over the mean ({hot:.1} ms)"
    );
}
