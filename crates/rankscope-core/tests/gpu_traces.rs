//! Synthetic GPU-shaped traces (`tests/fixtures/gpu/`, written by `make_gpu.py` there; its
//! README says what each models): what they must read as.
//! - `deepep_moe`: DeepEP's dispatch / combine / notify kernels on their own stream are
//!   communication (all_to_all of the expert group), not compute; `--rules` still overrides.
//! - `unclassified`: most device time in events no rule knows: the coverage says what was not
//!   understood, and the report says too little was understood to judge instead of "No finding".
//! - `graph_capture`: CUDA / HIP graph capture is reported as capture and not judged as a step
//!   (no "capture the step with CUDA graphs").
//! - `graph_replay`: a decode loop replaying a graph per step: its kernels are the replay's, and
//!   the host-bound device is not told to use graphs; `graph_warmup`, the same loop whose first
//!   step captures the graph: that step is capture, the others are judged.
//!
//! And real traces that replay graphs (HTA's test traces in `shared/traces/hta`).

// Tests read the zoo and ../shared from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::job;
use rankscope_core::model::{Class, CollKind};
use rankscope_core::normalize::Rules;

fn fixture(name: &str) -> Vec<u8> {
    common::read(&common::fixture("gpu").join(name))
}

/// The job of one file as the CLI reads it, with these rules: the analysis and its Markdown.
fn analyze_with(name: &str, rules: &Rules) -> (Analysis, String) {
    let opts = Options::default();
    let t = common::ingest_chunked(name, &fixture(name), 1 << 16).unwrap_or_else(|e| panic!("{e}"));
    let part = job::part_of(t, rules, &opts).into_iter().next().unwrap_or_else(|| panic!("{name}: no part"));
    let out = job::combine(vec![part], &[], &[], &opts);
    let md = out.markdown();
    (out.analysis, md)
}

fn analyze(name: &str) -> (Analysis, String) {
    analyze_with(name, &Rules::default())
}

/// Per step of `deepep_moe`: 8 layer passes (4 forward, 4 backward), each with notify_dispatch
/// (30 µs), dispatch (800 µs) and combine (700 µs) on stream 40.
const DEEPEP_COMM_PER_STEP_NS: i64 = 8 * (30 + 800 + 700) * 1000;

#[test]
fn deepep_kernels_are_all_to_all_communication() {
    let (a, md) = analyze("deepep_moe.pt.trace.json.gz");
    let t = &a.rank_totals[0];
    assert_eq!(t.steps, 3);
    assert_eq!(t.comm_ns, 3 * DEEPEP_COMM_PER_STEP_NS, "every DeepEP kernel is communication");
    // Compute is the GEMMs and the layout kernel on stream 7, nothing of stream 40.
    assert_eq!(t.compute_ns, 3 * 8 * (300 + 10 + 700 + 600) * 1000);
    // Dispatch and combine are the expert group's all_to_all (notify_dispatch too: one op).
    let kinds: Vec<CollKind> = a.collectives.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [CollKind::AllToAll], "{kinds:?}");
    assert_eq!(a.collectives[0].count, 3 * 8 * 3);
    // The coverage names the library and its stream.
    let c = &a.coverage[0].coverage;
    assert_eq!(c.device_of(Class::Communication), 3 * DEEPEP_COMM_PER_STEP_NS);
    let deepep: i64 = c
        .families
        .iter()
        .filter(|f| f.family == "deepep" && f.class == Class::Communication)
        .map(|f| f.ns)
        .sum();
    assert_eq!(deepep, 3 * DEEPEP_COMM_PER_STEP_NS);
    assert_eq!(
        c.comm_streams.iter().map(|s| (s.stream, s.families.clone())).collect::<Vec<_>>(),
        [(40, vec!["deepep".to_string()])]
    );
    assert_eq!(c.device_share(), Some(1.0));
    assert!(md.contains("communication by library: deepep"), "{md}");
    // The advice is the expert-parallel one.
    let ids: Vec<&str> = a.findings.iter().map(|f| f.id.as_str()).collect();
    assert!(ids.contains(&"exposed_comm"), "{ids:?}");
    assert!(md.contains("expert-parallel all\\_to\\_all"), "{md}");
}

/// A user's rule still comes first: DeepEP declared compute leaves no communication.
#[test]
fn user_rules_override_the_kernel_families() {
    let rules = Rules::with_user_rules(
        r#"{"version":1,"rules":[{"lane":"gpu","name_contains":["deep_ep::"],"class":"compute"}]}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (a, _) = analyze_with("deepep_moe.pt.trace.json.gz", &rules);
    assert_eq!(a.rank_totals[0].comm_ns, 0);
    assert!(a.collectives.is_empty());
}

/// Per file: the share of device and host time classified and the top unclassified names, in
/// the analysis JSON and in the Markdown report; too little understood replaces "No finding".
#[test]
fn too_little_understood_is_said_instead_of_no_finding() {
    let (a, md) = analyze("unclassified.pt.trace.json.gz");
    let c = &a.coverage[0].coverage;
    // Per step one 100 µs kernel and ten 200 µs events of an unknown category.
    assert_eq!(c.device_ns, 3 * 2_100_000);
    assert_eq!(c.device_of(Class::Other), 3 * 2_000_000);
    let share = c.device_share().unwrap_or_default();
    assert!((share - 1.0 / 21.0).abs() < 1e-9, "{share}");
    assert!(c.too_little());
    let top = &c.unclassified[0];
    assert_eq!((top.name.as_str(), top.events, top.ns), ("fused_moe_kernel", 30, 6_000_000));
    assert_eq!(c.host_share(), Some(1.0));
    // The JSON carries it.
    let json: serde_json::Value = serde_json::to_value(&a).unwrap_or_default();
    assert_eq!(json["coverage"][0]["rank"], 0);
    assert_eq!(json["coverage"][0]["device_ns"], 6_300_000);
    assert_eq!(json["coverage"][0]["unclassified"][0]["name"], "fused_moe_kernel");
    assert_eq!(json["coverage"][0]["unclassified"][0]["lane"], "gpu");
    // The report says it before any finding, and no confident "No finding".
    assert!(a.findings.is_empty(), "{:?}", a.findings);
    let understood = md.find("## What was understood").unwrap_or(usize::MAX);
    let findings = md.find("## Findings").unwrap_or(0);
    assert!(understood < findings, "{md}");
    assert!(md.contains("device 6.3 ms classified 4.8%"), "{md}");
    assert!(md.contains("Not understood: `fused_moe_kernel` 6.0 ms"), "{md}");
    assert!(md.contains("**Too little was understood to judge rank(s) 0**"), "{md}");
    assert!(md.contains("No finding, but this is no verdict"), "{md}");
    assert!(!md.contains("No finding crossed its threshold"), "{md}");
}

/// Without device work the host decides: a CPU trace mostly of events no rule knows is too
/// little understood; the same trace with the events known is judged as usual.
#[test]
fn host_coverage_decides_without_device_work() {
    let trace = |cat: &str| {
        format!(
            r#"{{"traceEvents":[
            {{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000}},
            {{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":0,"dur":100}},
            {{"ph":"X","cat":"{cat}","name":"mystery_work","pid":1,"tid":1,"ts":100,"dur":900}},
            {{"ph":"X","cat":"user_annotation","name":"ProfilerStep#2","pid":1,"tid":1,"ts":1000,"dur":1000}},
            {{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":1000,"dur":100}},
            {{"ph":"X","cat":"{cat}","name":"mystery_work","pid":1,"tid":1,"ts":1100,"dur":900}}
        ]}}"#
        )
    };
    let run = |json: String| {
        let opts = Options::default();
        let t =
            common::ingest_chunked("cpu.json", json.as_bytes(), 1 << 16).unwrap_or_else(|e| panic!("{e}"));
        let part =
            job::part_of(t, &Rules::default(), &opts).into_iter().next().unwrap_or_else(|| panic!("no part"));
        let out = job::combine(vec![part], &[], &[], &opts);
        let md = out.markdown();
        (out.analysis, md)
    };
    let (a, md) = run(trace("weird_tool"));
    let c = &a.coverage[0].coverage;
    assert_eq!((c.device_ns, c.device_share()), (0, None));
    // The step markers hold the work, they are none: 2 × 100 µs of 2 × 1 ms understood.
    assert_eq!((c.host_ns, c.host_classified_ns), (2_000_000, 200_000));
    assert!(c.too_little());
    assert_eq!(c.unclassified.first().map(|n| (n.name.as_str(), n.ns)), Some(("mystery_work", 1_800_000)));
    assert!(md.contains("no device work; host 2.0 ms classified 10.0%"), "{md}");
    assert!(md.contains("**Too little was understood to judge rank(s) 0**"), "{md}");
    // The same work known to the rules (`cpu_op`) is understood.
    let (a, md) = run(trace("cpu_op"));
    let c = &a.coverage[0].coverage;
    assert_eq!((c.host_ns, c.host_classified_ns), (2_000_000, 2_000_000));
    assert!(!c.too_little() && c.unclassified.is_empty());
    assert!(!md.contains("Too little was understood"), "{md}");
}

#[test]
fn graph_capture_is_capture_not_a_step() {
    let (a, md) = analyze("graph_capture.pt.trace.json.gz");
    assert_eq!(a.graphs.len(), 1);
    let g = &a.graphs[0].graphs;
    assert_eq!((g.captures, g.captured_launches, g.instantiations, g.replays), (3, 120, 3, 0));
    assert_eq!(g.instantiate_ns, 3 * 3_000_000);
    // Begin (8 µs) … end of capture (50 µs): 40 launches 20 µs apart in between.
    assert_eq!(g.capture_ns, 3 * (10 + 40 * 20 + 50) * 1000);
    assert_eq!(g.capture_steps, [0]);
    // Nothing judged: before, "100% CPU-bound: capture the step with CUDA graphs".
    assert!(a.findings.is_empty(), "{:?}", a.findings.iter().map(|f| f.id.as_str()).collect::<Vec<_>>());
    assert!(md.contains("graph capture: 3 stream capture(s)"), "{md}");
    assert!(md.contains("120 launch(es) recorded into the graph, not run"), "{md}");
    assert!(md.contains("Nothing judged: every step of these traces captures CUDA / HIP graphs"), "{md}");
    assert!(!md.contains("with CUDA graphs"), "{md}");
    assert!(!md.contains("No finding crossed"), "{md}");
    let json: serde_json::Value = serde_json::to_value(&a).unwrap_or_default();
    assert_eq!(json["graphs"][0]["captured_launches"], 120);
}

#[test]
fn graph_replay_is_not_told_to_use_graphs() {
    let (a, md) = analyze("graph_replay.pt.trace.json.gz");
    let g = &a.graphs[0].graphs;
    assert_eq!((g.captures, g.replays, g.replay_kernels), (0, 5, 5 * 425));
    // 85 GEMMs of 20 µs and 340 element-wise kernels of 6 µs per replay.
    assert_eq!(g.replay_device_ns, 5 * (85 * 20 + 340 * 6) * 1000);
    assert_eq!(g.replay_steps, [0, 1, 2, 3, 4]);
    assert!(g.capture_steps.is_empty());
    // The device waits 3.04 ms per step for the host's scheduling: CPU-bound, with the advice
    // for a step that already replays graphs.
    let f = a.findings.iter().find(|f| f.id.as_str() == "cpu_bound").unwrap_or_else(|| panic!("{md}"));
    assert!(f.message.contains("already replays CUDA / HIP graphs (1 launch(es) per step)"), "{}", f.message);
    assert!(f.fix.starts_with("The step already replays graphs"), "{}", f.fix);
    assert!(!md.contains("capture the step with CUDA graphs"), "{md}");
    assert!(md.contains("graph replay: 5 launch(es) running 2125 kernel(s)"), "{md}");
    // The 2 µs between a replay's kernels are the graph's, not launch overhead.
    for s in &a.steps {
        let r = &s.per_rank[0];
        assert_eq!((r.cpu_bound_ns, r.launch_overhead_ns), (3_040_000, 0), "step {}", s.step);
        assert_eq!(r.other_idle_ns, r.idle_ns - r.cpu_bound_ns);
    }
}

/// A capture step among replay steps: it is reported and left out; the replay steps are judged.
#[test]
fn a_capture_step_is_left_out_of_the_judged_steps() {
    let (a, md) = analyze("graph_warmup.pt.trace.json.gz");
    let g = &a.graphs[0].graphs;
    assert_eq!((g.captures, g.captured_launches, g.instantiations, g.replays), (1, 425, 1, 5));
    assert_eq!(g.capture_steps, [0]);
    assert_eq!(g.replay_steps, [0, 1, 2, 3, 4]);
    let f = a.findings.iter().find(|f| f.id.as_str() == "cpu_bound").unwrap_or_else(|| panic!("{md}"));
    assert_eq!(f.steps, [1, 2, 3, 4], "the capture step is not judged");
    assert!(a.findings.iter().all(|f| !f.steps.contains(&0)), "{:?}", a.findings);
    assert!(f.fix.starts_with("The step already replays graphs"), "{}", f.fix);
    assert!(md.contains("graph capture: 1 stream capture(s)"), "{md}");
    assert!(md.contains("step(s) 0 are capture, not judged; graph replay: 5 launch(es)"), "{md}");
    assert!(!md.contains("capture the step with CUDA graphs"), "{md}");
}

/// HTA's test traces replay CUDA graphs (`cudaGraphLaunch`): read as replay, never as capture.
#[test]
fn real_traces_that_replay_graphs() {
    for (path, replays, kernels) in [
        ("traces/hta/trace_diff/test/test.json.gz", 12, 5046),
        ("traces/hta/negative_queue_length_values_check/rank0.json.gz", 70, 345),
    ] {
        let bytes = common::read(&common::shared().join(path));
        let opts = Options::default();
        let t = common::ingest_chunked(path, &bytes, 1 << 20).unwrap_or_else(|e| panic!("{e}"));
        let part = job::part_of(t, &Rules::default(), &opts)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("{path}: no part"));
        let out = job::combine(vec![part], &[], &[], &opts);
        let g = &out.analysis.graphs[0].graphs;
        assert_eq!(
            (g.replays, g.replay_kernels, g.captures, g.instantiations),
            (replays, kernels, 0, 0),
            "{path}"
        );
        assert!(g.capture_steps.is_empty(), "{path}");
        assert!(!out.markdown().contains("with CUDA graphs"), "{path}");
    }
}

/// Many ranks' graphs read as one line per use, not one per rank.
#[test]
fn many_ranks_graphs_are_grouped() {
    let (mut a, _) = analyze("graph_warmup.pt.trace.json.gz");
    let one = a.graphs[0].clone();
    a.graphs = (0..16)
        .map(|rank| {
            let mut g = one.clone();
            g.rank = rank;
            g
        })
        .collect();
    let md = rankscope_core::diagnose::markdown::markdown(&a);
    assert!(
        md.contains("- 16 rank(s) 0–15 capture CUDA / HIP graphs: step(s) 0 are capture, not judged."),
        "{md}"
    );
    assert!(
        md.contains(
            "- 16 rank(s) 0–15 replay CUDA / HIP graphs: 80 launch(es) running 34000 kernel(s) in all."
        ),
        "{md}"
    );
    assert!(!md.contains("- rank 3 CUDA / HIP graphs"), "{md}");
}
