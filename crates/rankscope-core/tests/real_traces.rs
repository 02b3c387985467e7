//! Every real trace in `shared/traces` against expectations derived independently by
//! `tests/oracle/trace_expectations.py` (Python's json module over the same files).

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::collections::BTreeMap;

use common::*;
use rankscope_core::inspect;
use rankscope_core::model::*;
use rankscope_core::normalize::RankSource;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Expect {
    file: String,
    form: String,
    rank: Option<i64>,
    world_size: Option<i64>,
    backend: Option<String>,
    base_time_ns: Option<i64>,
    display_time_unit: Option<String>,
    events_total: u64,
    by_ph: BTreeMap<String, u64>,
    by_cat: BTreeMap<String, u64>,
    x_lanes: usize,
    steps: Vec<u32>,
    gpu_steps: Vec<u32>,
    /// Outermost CPU `Optimizer.step#…` slices.
    optimizer_steps: u32,
    ts_min_ns: Option<i64>,
    end_max_ns: Option<i64>,
    gpu_events: u64,
    comm_kernels: u64,
    runtime_events: u64,
    linked_gpu_events: u64,
    flows: BTreeMap<String, BTreeMap<String, u64>>,
    record_param_comms: u64,
    collective_names: Vec<String>,
    negative_durations: u64,
    x_missing_dur: u64,
}

#[derive(Debug, Deserialize)]
struct ExpectFile {
    traces: Vec<Expect>,
}

fn expectations() -> Vec<Expect> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/trace_expectations.json"))
            .unwrap_or_else(|e| panic!("expectations: {e}"));
    let f: ExpectFile = serde_json::from_str(&text).unwrap_or_else(|e| panic!("expectations: {e}"));
    f.traces
}

/// Compares one file; returns the mismatches.
fn check(x: &Expect, chunk: usize) -> Vec<String> {
    let path = shared().join("traces").join(&x.file);
    let bytes = read(&path);
    let job = job_of(&x.file, &bytes, chunk);
    let r = &job.ranks[0];
    let t = &r.trace;
    let rep = inspect::report(&job, vec![]);
    let f = &rep.files[0];
    let mut bad = Vec::new();
    let mut eq = |what: &str, got: String, want: String| {
        if got != want {
            bad.push(format!("{}: {what}: got {got}, want {want}", x.file));
        }
    };
    eq("form", f.form.to_string(), x.form.clone());
    match x.rank {
        Some(rank) => {
            eq(
                "rank",
                format!("{} {:?}", r.rank, r.source),
                format!("{rank} {:?}", RankSource::DistributedInfo),
            );
        }
        None => eq("rank source", (r.source == RankSource::DistributedInfo).to_string(), "false".into()),
    }
    eq("world_size", format!("{:?}", f.world_size), format!("{:?}", x.world_size));
    eq("backend", format!("{:?}", f.backend), format!("{:?}", x.backend));
    eq("base_time_ns", format!("{:?}", f.base_time_ns), format!("{:?}", x.base_time_ns));
    eq("display_time_unit", format!("{:?}", f.display_time_unit), format!("{:?}", x.display_time_unit));
    eq("events_total", f.events.total.to_string(), x.events_total.to_string());
    eq("by_ph", format!("{:?}", f.events.by_ph), format!("{:?}", x.by_ph));
    eq("by_cat", format!("{:?}", f.events.by_cat), format!("{:?}", x.by_cat));
    let x_lanes: std::collections::BTreeSet<LaneId> = (0..t.events.len())
        .filter(|&i| t.events.kind[i] == EventKind::Slice)
        .map(|i| t.events.lane[i])
        .collect();
    eq("x_lanes", x_lanes.len().to_string(), x.x_lanes.to_string());
    // The independent parser knows `ProfilerStep#N`; an inference engine's iterations
    // (normalize::iterations) are ours; a training loop's without markers are its optimizer's
    // steps, which it counts too: 0, 1, … one per optimizer step, when there are two or more.
    let from_optimizer = r.norm.steps.from_optimizer;
    let ours = f.steps_synthetic
        || from_optimizer
        || r.norm.steps.iterations.as_ref().is_some_and(|i| !i.profiler_steps);
    let steps: Vec<u32> = if ours { vec![] } else { f.steps.iter().map(|s| s.step).collect() };
    eq("steps", format!("{steps:?}"), format!("{:?}", x.steps));
    let by_optimizer = x.steps.is_empty() && x.optimizer_steps >= 2 && r.norm.steps.iterations.is_none();
    eq("steps from the optimizer", from_optimizer.to_string(), by_optimizer.to_string());
    if from_optimizer {
        let want: Vec<u32> = (0..x.optimizer_steps).collect();
        eq(
            "optimizer steps",
            format!("{:?}", f.steps.iter().map(|s| s.step).collect::<Vec<_>>()),
            format!("{want:?}"),
        );
    }
    eq("gpu_steps", format!("{:?}", f.gpu_steps), format!("{:?}", x.gpu_steps));
    if let (Some(lo), Some(hi)) = (x.ts_min_ns, x.end_max_ns) {
        eq("span start", f.span.start_ns.to_string(), lo.to_string());
        eq("span end", f.span.end_ns.to_string(), hi.to_string());
    }
    eq("gpu_events", f.events.gpu_ops.to_string(), x.gpu_events.to_string());
    eq("linked_gpu_events", f.events.gpu_ops_linked.to_string(), x.linked_gpu_events.to_string());
    eq("comm_kernels", f.events.nccl_kernels.to_string(), x.comm_kernels.to_string());
    eq("runtime_events", f.events.runtime_calls.to_string(), x.runtime_events.to_string());
    eq("record_param_comms", f.events.record_param_comms.to_string(), x.record_param_comms.to_string());
    let mut flows: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for i in 0..t.flows.len() {
        let cat = job.strings.get(t.flows.cat[i]).to_string();
        *flows.entry(cat).or_default().entry((t.flows.phase[i] as char).to_string()).or_default() += 1;
    }
    eq("flows", format!("{flows:?}"), format!("{:?}", x.flows));
    let rpc = job.strings.find("record_param_comms");
    let mut names: Vec<String> = (0..t.comm.len())
        .filter(|&k| {
            Some(t.events.name[t.comm.event[k].0 as usize]) == rpc && t.comm.collective[k] != StrId::EMPTY
        })
        .map(|k| job.strings.get(t.comm.collective[k]).to_string())
        .collect();
    names.sort();
    names.dedup();
    eq("collective_names", format!("{names:?}"), format!("{:?}", x.collective_names));
    eq(
        "negative durations",
        t.diagnostics.count(DiagKind::NegativeDuration).to_string(),
        x.negative_durations.to_string(),
    );
    eq(
        "missing dur",
        t.diagnostics.count(DiagKind::MissingDuration).to_string(),
        x.x_missing_dur.to_string(),
    );
    // Real files are well formed: nothing may be lost.
    for d in t.diagnostics.iter() {
        if d.severity >= Severity::DATA_LOSS {
            bad.push(format!("{}: unexpected {:?}: {}", x.file, d.kind, d.message));
        }
    }
    bad
}

#[test]
fn every_real_trace_matches_the_independent_parser() {
    let all = expectations();
    assert!(all.len() >= 40, "expected every trace of shared/traces, found {}", all.len());
    let mut bad = Vec::new();
    for x in &all {
        bad.extend(check(x, 1 << 20));
    }
    assert!(bad.is_empty(), "{} mismatches:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn odd_chunk_sizes_give_the_same_answers() {
    // A prime chunk size splits events, strings, numbers and escapes at every possible place.
    let all = expectations();
    let mut bad = Vec::new();
    for x in all.iter().filter(|x| {
        x.file.contains("dlrm-8rank/worker1") || x.file.contains("kineto-tb") || x.file.contains("cpu_only")
    }) {
        bad.extend(check(x, 4099));
        bad.extend(check(x, 61));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn display_time_unit_ns_is_noted_and_ignored() {
    let x = expectations().into_iter().find(|x| x.display_time_unit.as_deref() == Some("ns"));
    let x = x.unwrap_or_else(|| panic!("no trace with displayTimeUnit ns"));
    let bytes = read(&shared().join("traces").join(&x.file));
    let job = job_of(&x.file, &bytes, 1 << 20);
    let t = &job.ranks[0].trace;
    assert_eq!(t.diagnostics.count(DiagKind::DisplayTimeUnitIgnored), 1);
    // Read as microseconds, the first cpu_op (`dur: 63.813`) lasts 63,813 ns.
    let i = (0..t.events.len()).find(|&i| t.events.dur_ns[i] == 63_813);
    assert!(i.is_some(), "a 63.813 µs op should be 63813 ns");
}

#[test]
fn dlrm_set_is_one_job_of_eight_ranks() {
    let traces = load_dir("traces/param-dlrm-8rank");
    let job = rankscope_core::normalize::assemble(traces, &[], &rankscope_core::normalize::Rules::default());
    assert!(job.errors.is_empty(), "{:?}", job.errors);
    let ranks: Vec<u32> = job.ranks.iter().map(|r| r.rank).collect();
    assert_eq!(ranks, (0..8).collect::<Vec<u32>>());
    // One string table: the all_reduce kernel is the same id on every rank.
    let k =
        job.strings.find("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)");
    let per_rank: Vec<usize> =
        job.ranks.iter().map(|r| r.trace.events.name.iter().filter(|n| Some(**n) == k).count()).collect();
    assert!(k.is_some() && per_rank.iter().all(|&n| n == 3), "all_reduce kernels per rank: {per_rank:?}");
    let rep = inspect::report(&job, vec![]);
    assert!(rep.job.missing_ranks.is_empty());
    for f in &rep.files {
        assert_eq!(f.steps.iter().map(|s| s.step).collect::<Vec<_>>(), vec![10]);
        assert!(f.table_bytes_per_event <= 80.0, "{} bytes/event", f.table_bytes_per_event);
    }
}

#[test]
fn two_files_claiming_one_rank_is_an_error_naming_both_unless_mapped() {
    let p = shared().join("traces/param-dlrm-8rank/worker0_step_12.1694128201545.pt.trace.json");
    let bytes = read(&p);
    let a = ingest_chunked("a/worker0.json", &bytes, 1 << 20).unwrap_or_else(|e| panic!("{e}"));
    let b = ingest_chunked("b/worker0.json", &bytes, 1 << 20).unwrap_or_else(|e| panic!("{e}"));
    let job = rankscope_core::normalize::assemble(vec![a.clone(), b.clone()], &[], &Default::default());
    let msg = job.errors.first().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        msg.contains("a/worker0.json") && msg.contains("b/worker0.json") && msg.contains("rank 0"),
        "{msg}"
    );
    let job =
        rankscope_core::normalize::assemble(vec![a, b], &[("b/worker0.json".into(), 1)], &Default::default());
    assert!(job.errors.is_empty());
    assert_eq!(job.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(job.ranks[1].source, RankSource::User);
}
