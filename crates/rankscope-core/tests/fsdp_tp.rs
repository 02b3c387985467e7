//! FSDP2 + tensor parallel on a 2-D DeviceMesh as PyTorch's recipe writes it (`tests/zoo/fsdp_tp/`,
//! `make.py`): real gloo runs, world 4, mesh dimensions named `dp` and `tp`. The `dp` dimension
//! is named data-parallel and run sharded (its collectives gather the parameters and reduce the
//! gradients); a host stall on rank 3 is found where it is, though the rank's thread computes in
//! bursts after it on the shared host.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use rankscope_core::analyze::layout::Role;
use rankscope_core::analyze::Analysis;
use serde_json::Value;

fn run(name: &str) -> (Analysis, Value) {
    common::zoo::run(&format!("fsdp_tp/{name}"))
}

#[test]
fn the_dp_dimension_is_sharded_and_the_tp_dimension_tensor() {
    for name in ["healthy", "stall_r3"] {
        let (a, _) = run(name);
        let layout = a.layout.as_ref().unwrap_or_else(|| panic!("{name}: no layout"));
        let pairs: Vec<_> = layout.groups.iter().filter(|g| g.ranks.len() == 2).collect();
        let count = |r: Role| pairs.iter().filter(|g| g.role == r).count();
        assert_eq!((count(Role::Shard), count(Role::Tensor)), (2, 2), "{name}: {:#?}", layout.groups);
        for g in pairs.iter().filter(|g| g.role == Role::Shard) {
            assert!(
                g.role_evidence.contains("mesh_dp") && g.role_evidence.contains("run sharded"),
                "{name}: {}",
                g.role_evidence
            );
        }
        // Tensor-parallel pairs are neighbours (the mesh's last dimension varies fastest).
        for g in pairs.iter().filter(|g| g.role == Role::Tensor) {
            assert_eq!(g.ranks[1], g.ranks[0] + 1, "{name}: {:?}", g.ranks);
        }
        assert_eq!(layout.mesh_words(), "tensor 2 × shard 2", "{name}");
        // FSDP's own traffic is never a host synchronization, and its advice is FSDP's.
        assert!(a.findings.iter().all(|f| f.id.as_str() != "host_sync"), "{name}: {:?}", a.findings);
        assert!(a.findings.iter().all(|f| !f.fix.contains("bucket_cap_mb")), "{name}: {:?}", a.findings);
    }
}

#[test]
fn the_stall_is_found_where_it_is_and_the_healthy_run_blames_no_rank() {
    let (a, spec) = run("stall_r3");
    let f = common::zoo::check_expected("stall_r3", &a, &spec)
        .unwrap_or_else(|| panic!("stall_r3: nothing expected"));
    assert!(f.message.contains("log_to_disk"), "{}", f.message);
    let (a, spec) = run("healthy");
    common::zoo::check_expected("healthy", &a, &spec);
    for f in &a.findings {
        assert!(
            !["straggler", "compute_imbalance", "slow_device", "host_stall", "input_bound"]
                .contains(&f.id.as_str()),
            "healthy: {}",
            f.message
        );
    }
}
