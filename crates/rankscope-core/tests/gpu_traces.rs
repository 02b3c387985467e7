//! Synthetic GPU-shaped traces (`tests/fixtures/gpu/`, written by `make_gpu.py` there; its
//! README says what each models): what they must read as.
//! - `deepep_moe`: DeepEP's dispatch / combine / notify kernels on their own stream are
//!   communication (all_to_all of the expert group), not compute; `--rules` still overrides.

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
    let part = job::part_of(t, rules, &opts).unwrap_or_else(|| panic!("{name}: no part"));
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
