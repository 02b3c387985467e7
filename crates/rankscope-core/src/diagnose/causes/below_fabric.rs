//! `below_fabric`: a collective whose achieved bus bandwidth is below
//! [`crate::finding::Thresholds::fabric_fraction`] of what nccl-tests measured at the same size
//! on a comparable fabric (same backend family and device model: `analyze::fabric`'s guards).
//! Its gain is what a full-speed transfer would save, bounded by the exposed transfer.

use super::prelude::*;

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::BelowFabric,
    finds: &[FindingId::BelowFabric],
    stage: Stage::SteadyState,
    explains: &[],
    part_of: None,
    excludes: &[],
    names_part: None,
    find,
};

fn find(cx: &Ctx<'_>, _: &Found) -> Vec<Finding> {
    let a = cx.a;
    let n_steps = cx.all_steps.len().max(1) as f64;
    let exposed = median_f(cx.per_rank_mean(|r| r.exposed_transfer_ns).into_iter().map(|x| x.1).collect());
    let mut out = Vec::new();
    for c in a.fabric.iter().filter(|c| {
        c.comparable
            && c.basis == crate::analyze::collectives::BwBasis::Transfer
            && c.fraction < cx.th.fabric_fraction
    }) {
        let per_step: f64 = a
            .collectives
            .iter()
            .filter(|x| x.kind == c.kind && x.pg == c.pg)
            .map(|x| x.transfer_mean_ns.unwrap_or(0) as f64 * x.count as f64)
            .sum::<f64>()
            / n_steps;
        // What a full-speed transfer would save, of what is exposed.
        let saving = (per_step * (1.0 - c.fraction)).min(exposed);
        out.push(Finding {
            id: FindingId::BelowFabric,
            severity: severity_for(saving, cx.step_ns),
            message: c.message.clone(),
            fix: fix_for(c.fabric_nodes).into(),
            ranks: cx.ranks.clone(),
            steps: cx.all_steps.clone(),
            evidence: Evidence::from([(K::Fraction, c.fraction),
                (K::AchievedBusbwGbps, c.achieved_busbw_gbps),
                (K::FabricBusbwGbps, c.fabric_busbw_gbps),
                (K::Bytes, c.bytes as f64),
            ]),
            quotes: Vec::new(),
            quotes_total: 0,
            symptoms: Vec::new(),
            location: None,
            impact_ns: saving as i64,
        });
    }
    out
}

/// The advice for the transports the benchmark used: on one node the GPUs' links (P2P over
/// NVLink or PCIe, not SHM), across nodes (or unknown) the network too.
fn fix_for(fabric_nodes: Option<u32>) -> &'static str {
    if fabric_nodes == Some(1) {
        "The GPUs' links can do better than the job gets (the benchmark ran on one node): check that the job uses the same NCCL settings as the benchmark and reaches its peers by P2P over NVLink / PCIe, not SHM (NCCL_DEBUG=INFO: `via P2P/...`; NCCL_P2P_DISABLE, NCCL_P2P_LEVEL), that collectives are not split into small chunks (bucket sizes), that compute kernels do not starve NCCL of SMs (NCCL_MIN_NCHANNELS / stream priorities), and that the process group spans the same GPUs."
    } else {
        "The fabric can do better than the job gets: check that the job uses the same NCCL settings and transport as the benchmark (NCCL_DEBUG=INFO: NET/IB vs NET/Socket, GDRDMA), that collectives are not split into small chunks (bucket sizes), that compute kernels do not starve NCCL of SMs (NCCL_MIN_NCHANNELS / stream priorities), and that the process group spans the same topology."
    }
}
