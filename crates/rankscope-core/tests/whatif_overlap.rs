//! `exposed_comm`'s gain as the replay of the job with its collectives moved where their
//! framework lets them go (`analyze::whatif::overlap`, docs/metrics.md "What-if"): a sharded
//! job's parameter all-gathers prefetched and its gradient reductions waited for at the end of
//! backward, or, where the framework's calls hold a CPU rank's host, the job without backward's
//! re-gathers; a DDP bucket ready only once backward is done keeps the finding's own estimate.

// Tests read the zoo from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use rankscope_core::finding::{EvidenceKey, Finding};

fn exposed(name: &str) -> Option<Finding> {
    let (a, _) = common::zoo::run(name);
    a.findings.into_iter().find(|f| f.id == "exposed_comm")
}

/// FSDP2 on a CPU process group issues its gathers and reductions synchronously (`async_op=False`
/// holds the thread there): prefetching overlaps nothing, as a paired run measured (docs/metrics.md,
/// "FSDP on a CPU group"). The exposed transfer is information, its gain the replay of the job
/// without backward's re-gathers (`reshard_after_forward=False`), with the memory that costs.
#[test]
fn an_fsdp_job_on_cpu_gets_the_gain_of_keeping_its_parameters_gathered() {
    for name in ["fsdp_exposed_gathers", "fsdp_baseline"] {
        let f = exposed(name).unwrap_or_else(|| panic!("{name}: no exposed_comm"));
        assert_eq!(f.severity, rankscope_core::finding::Severity::Low, "{name}: {}", f.message);
        let Some(gain) = f.evidence.get(EvidenceKey::ReplayedGainNs) else {
            panic!("{name}: the gain is not the replay's: {}", f.message)
        };
        // One story: the gain, the impact and the sentence agree.
        assert_eq!(f.impact_ns, gain as i64, "{name}");
        assert!(gain > 0.0, "{name}: {}", f.message);
        assert!(
            f.message.contains("synchronously") && f.message.contains("re-gathers"),
            "{name}: {}",
            f.message
        );
        assert!(
            !f.message.contains("prefetched"),
            "{name}: a prefetch replayed on a CPU group: {}",
            f.message
        );
        assert!(
            f.fix.contains("reshard_after_forward=False") && f.fix.contains("MiB more memory"),
            "{name}: {}",
            f.fix
        );
        assert!(!f.fix.starts_with("Overlap"), "{name}: {}", f.fix);
        // Never more than the step it is a part of.
        let (a, _) = common::zoo::run(name);
        let step = a.whatif.as_ref().map_or(0, |w| w.replayed_ns);
        assert!(f.impact_ns < step, "{name}: {} of a {} step", f.impact_ns, step);
    }
}

/// The re-gathers are backward's only: FSDP2 names a unit's forward and backward gather alike
/// (`FSDP::all_gather (blocks.2)`), and `fsdp_exposed_gathers` (8 units) gathers each once in
/// backward; its traces record every gather's size.
#[test]
fn only_backwards_gathers_are_taken_out() {
    let (a, _) = common::zoo::run("fsdp_exposed_gathers");
    let f = a.findings.iter().find(|f| f.id == "exposed_comm").unwrap_or_else(|| panic!("no exposed_comm"));
    let backward: Vec<_> = a
        .comm_origins
        .iter()
        .filter(|o| {
            o.kind == rankscope_core::model::CollKind::AllGather
                && o.phase == rankscope_core::model::Phase::Backward
        })
        .collect();
    let ranks = a.ranks.len() as u32;
    let steps: std::collections::BTreeSet<u32> = backward.iter().map(|o| o.step).collect();
    let per = backward.iter().map(|o| o.count).sum::<u32>() / ranks / steps.len() as u32;
    assert!(
        f.message.contains(&format!("backward's {per} parameter re-gathers a step")),
        "{per}: {}",
        f.message
    );
}

#[test]
fn a_ddp_bucket_ready_only_after_backward_keeps_its_estimate() {
    // `baseline`: DDP with the default 25 MiB bucket holding all 18 MiB of gradients, all_reduced
    // once backward is done: nothing can move, the advice is the bucket size's.
    let f = exposed("baseline").unwrap_or_else(|| panic!("baseline: no exposed_comm"));
    assert!(f.evidence.get(EvidenceKey::ReplayedGainNs).is_none(), "{}", f.message);
    assert!(f.fix.contains("bucket_cap_mb"), "{}", f.fix);
}
