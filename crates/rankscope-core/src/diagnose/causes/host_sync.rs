//! `host_sync` on the device: the host blocks in device synchronization for more than
//! [`crate::finding::Thresholds::host_sync_ratio`] of the step, less the part spent waiting for
//! other ranks (a host blocked on a stream whose collective waits for a late peer is waiting
//! for that peer). A host that waits for a busy device costs nothing; it costs when the device
//! then idles until the host has launched again: the gain is bounded by the CPU-bound idle,
//! and its time is part of [`super::cpu_bound`]'s. The late ranks are left out.

use super::prelude::*;

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::HostSync,
    finds: &[FindingId::HostSync],
    stage: Stage::SteadyState,
    explains: &[],
    part_of: Some(FindingId::CpuBound),
    excludes: &[],
    names_part: None,
    find,
};

fn find(cx: &Ctx<'_>, found: &Found) -> Vec<Finding> {
    let late: Vec<u32> = found.of(CauseId::LateRank).flat_map(|f| f.ranks.iter().copied()).collect();
    host_sync(cx, &late).into_iter().collect()
}

fn host_sync(cx: &Ctx<'_>, exclude: &[u32]) -> Option<Finding> {
    // A host that waits for a busy device costs nothing; it costs when the device then idles
    // until the host has launched again: bounded by the CPU-bound idle.
    let exclude: BTreeSet<u32> = exclude.iter().copied().collect();
    // Less the part spent waiting for other ranks: a host blocked on a stream whose collective
    // waits for a late peer is waiting for that peer (the late rank's cost, `waits[]`), not
    // paying for its own synchronization. The step's region has that part (`sync_wait_ns` of
    // `ProfilerStep`: DLRM's early ranks block 1.2-6.7 ms per step in syncs, all but 0.1 ms of
    // it waiting for ranks 2, 6 and 7).
    let mut waiting: BTreeMap<(u32, u32), i64> = BTreeMap::new();
    for x in cx.a.regions.iter().filter(|x| x.name == "ProfilerStep" && x.parent.is_empty()) {
        *waiting.entry((x.rank, x.step)).or_default() += x.sync_wait_ns;
    }
    let sync = cx.per_rank_mean_step(|r, step| {
        (r.host_sync_ns - waiting.get(&(r.rank, step)).copied().unwrap_or(0)).max(0)
    });
    let cpu_b = cx.per_rank_mean(|r| r.cpu_bound_ns);
    let bad: Vec<(u32, f64, f64)> = sync
        .iter()
        .zip(&cpu_b)
        .filter(|((r, _), _)| !cx.is_cpu(*r) && !exclude.contains(r))
        .map(|(&(r, s), &(_, c))| (r, s.min(c), s / cx.rank_step_ns(r).max(1.0)))
        .filter(|x| x.2 > cx.th.host_sync_ratio && x.1 > 0.0)
        .collect();
    if bad.is_empty() {
        return None;
    }
    let saving = median_f(bad.iter().map(|x| x.1).collect());
    let worst = bad.iter().map(|x| x.2).fold(0.0, f64::max);
    Some(Finding {
        id: FindingId::HostSync,
        severity: severity_for(saving, cx.step_ns),
        message: format!(
            "The host blocks in device synchronization for up to {} of the step, and the device then idles until new work is launched ({} per step).",
            pct(worst),
            dur_range(bad.iter().map(|x| x.1).collect())
        ),
        fix: "Remove synchronizations from the step: `.item()`, `.cpu()`, printing tensors, `torch.cuda.synchronize()`, boolean masks that need a host copy; log metrics every N steps or asynchronously.".into(),
        ranks: bad.iter().map(|x| x.0).collect(),
        steps: cx.all_steps.clone(),
        evidence: Evidence::from([(K::MaxHostSyncRatio, worst), (K::Threshold, cx.th.host_sync_ratio)]),
        quotes: Vec::new(),
        quotes_total: 0,
        symptoms: vec![FindingId::CpuBound],
        location: None,
        impact_ns: saving as i64,
    })
}
