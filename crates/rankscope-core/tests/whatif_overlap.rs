//! `exposed_comm`'s gain as the replay of the job with its collectives moved where their
//! framework lets them go (`analyze::whatif::overlap`, docs/metrics.md "What-if"): a sharded
//! job's parameter all-gathers prefetched and its gradient reductions waited for at the end of
//! backward; a DDP bucket ready only once backward is done keeps the finding's own estimate.

// Tests read the zoo from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use rankscope_core::finding::{EvidenceKey, Finding};

fn exposed(name: &str) -> Option<Finding> {
    let (a, _) = common::zoo::run(name);
    a.findings.into_iter().find(|f| f.id == "exposed_comm")
}

#[test]
fn an_fsdp_jobs_exposed_transfer_takes_the_gain_of_its_gathers_prefetched() {
    for name in ["fsdp_exposed_gathers", "fsdp_baseline"] {
        let f = exposed(name).unwrap_or_else(|| panic!("{name}: no exposed_comm"));
        let Some(gain) = f.evidence.get(EvidenceKey::ReplayedGainNs) else {
            panic!("{name}: the gain is not the replay's: {}", f.message)
        };
        // One story: the gain, the impact and the sentence agree.
        assert_eq!(f.impact_ns, gain as i64, "{name}");
        assert!(gain > 0.0, "{name}: {}", f.message);
        assert!(f.message.contains("prefetched"), "{name}: {}", f.message);
        assert!(
            !f.message.contains("70% of that in practice"),
            "{name}: two gains in one finding: {}",
            f.message
        );
        // Never more than the step it is a part of.
        let (a, _) = common::zoo::run(name);
        let step = a.whatif.as_ref().map_or(0, |w| w.replayed_ns);
        assert!(f.impact_ns < step, "{name}: {} of a {} step", f.impact_ns, step);
    }
}

#[test]
fn a_ddp_bucket_ready_only_after_backward_keeps_its_estimate() {
    // `baseline`: DDP with the default 25 MiB bucket holding all 18 MiB of gradients, all_reduced
    // once backward is done: nothing can move, the advice is the bucket size's.
    let f = exposed("baseline").unwrap_or_else(|| panic!("baseline: no exposed_comm"));
    assert!(f.evidence.get(EvidenceKey::ReplayedGainNs).is_none(), "{}", f.message);
    assert!(f.fix.contains("bucket_cap_mb"), "{}", f.fix);
}
