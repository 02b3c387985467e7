//! `cpu_bound`: the device waits for the host to launch work. Per GPU rank, the device idle
//! that ends with a kernel whose launch came after the device ran dry (`cpu_bound_ns`), above
//! [`crate::finding::Thresholds::cpu_bound_ratio`] of the step; its gain is the ranks' median.
//! The late ranks are left out (their idle is their finding's), and a host synchronization's
//! device idle ([`super::host_sync`]) is part of it. Ranks that replay CUDA / HIP graphs
//! ([`crate::analyze::reading`]) are advised about the host work between replays, not told to
//! capture the step.

use super::prelude::*;

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::CpuBound,
    finds: &[FindingId::CpuBound],
    stage: Stage::SteadyState,
    explains: &[],
    part_of: None,
    excludes: &[],
    names_part: None,
    find,
};

fn find(cx: &Ctx<'_>, found: &Found) -> Vec<Finding> {
    let late: Vec<u32> = found.of(CauseId::LateRank).flat_map(|f| f.ranks.iter().copied()).collect();
    cpu_bound(cx, &late).into_iter().collect()
}

fn cpu_bound(cx: &Ctx<'_>, exclude: &[u32]) -> Option<Finding> {
    let exclude: BTreeSet<u32> = exclude.iter().copied().collect();
    let bad: Vec<(u32, f64, f64)> = cx
        .per_rank_mean(|r| r.cpu_bound_ns)
        .into_iter()
        .filter(|(r, _)| !cx.is_cpu(*r) && !exclude.contains(r))
        .map(|(r, v)| (r, v, v / cx.rank_step_ns(r).max(1.0)))
        .filter(|x| x.2 > cx.th.cpu_bound_ratio)
        .collect();
    if bad.is_empty() {
        return None;
    }
    let worst = bad.iter().map(|x| x.2).fold(0.0, f64::max);
    // Ranks that already replay CUDA / HIP graphs are not told to use them.
    let graphs: Vec<f64> =
        bad.iter().filter_map(|x| crate::diagnose::understood::replays_per_step(cx.a, x.0)).collect();
    let (replaying, fix) = if graphs.len() == bad.len() {
        (
            format!(
                " The step already replays CUDA / HIP graphs ({:.0} launch(es) per step): the device waits for host work outside them.",
                median_f(graphs)
            ),
            "The step already replays graphs: shorten the host work between replays (scheduling, input preparation, sampling) or overlap it with the replay (prepare step N+1 while step N's graph runs, asynchronous scheduling); capture what still runs eagerly around the graph (graph breaks, ops left out of the capture) into it; move Python overhead (logging, `.item()`) out of the step.",
        )
    } else {
        (
            String::new(),
            "Cut launch overhead: capture the step with CUDA graphs, fuse small kernels with `torch.compile`, increase work per kernel (batch size), and move Python overhead (logging, `.item()`) out of the step.",
        )
    };
    let saving = median_f(bad.iter().map(|x| x.1).collect());
    Some(Finding {
        id: FindingId::CpuBound,
        severity: severity_for(saving, cx.step_ns),
        message: format!(
            "The GPU waits for the CPU to launch work: {} per step (up to {} of the step) of device idle ends with a kernel whose launch came after the device ran dry, on {} rank(s).{replaying}",
            dur_range(bad.iter().map(|x| x.1).collect()),
            pct(worst),
            bad.len()
        ),
        fix: fix.into(),
        ranks: bad.iter().map(|x| x.0).collect(),
        steps: cx.all_steps.clone(),
        evidence: Evidence::from([(K::MaxCpuBoundRatio, worst), (K::Threshold, cx.th.cpu_bound_ratio)]),
        quotes: Vec::new(),
        quotes_total: 0,
        symptoms: Vec::new(),
        location: None,
        impact_ns: saving as i64,
    })
}
