//! The host in the steady state: input-bound on every rank, launch-bound (CPU-bound) device
//! idle, host synchronization, allocator churn.

use super::*;

pub(super) fn input_bound_all(cx: &Ctx<'_>) -> Option<Finding> {
    // CPU ranks: the DataLoader runs on the training thread, the whole of it is step time;
    // GPU ranks: what costs is the device idle while the host loads (`input_ns`).
    let share: Vec<(u32, f64, f64)> = cx
        .per_rank_mean(|r| {
            if r.source == crate::analyze::breakdown::MetricsFrom::Cpu {
                r.data_loading_ns
            } else {
                r.input_ns
            }
        })
        .into_iter()
        .map(|(rank, v)| (rank, v, v / cx.rank_step_ns(rank).max(1.0)))
        .collect();
    let flagged: Vec<u32> = share.iter().filter(|x| x.2 > cx.th.input_ratio).map(|x| x.0).collect();
    if flagged.len() * 2 <= cx.ranks.len() {
        return None;
    }
    let saving = median_f(share.iter().map(|x| x.1).collect());
    let worst = share.iter().map(|x| x.2).fold(0.0, f64::max);
    let workers = loads_with_workers(cx);
    Some(Finding {
        id: FindingId::InputBound,
        severity: severity_for(saving, cx.step_ns),
        message: format!(
            "Every rank waits for its input: data loading takes {} per step ({} of the step at most) on {} of {} ranks{}.",
            dur_range(share.iter().map(|x| x.1).collect()),
            pct(worst),
            flagged.len(),
            cx.ranks.len(),
            match (workers, cx.cpu_only) {
                (true, true) => ", the training thread waiting for its DataLoader's worker processes, which do not keep up",
                (true, false) => ", waiting for the DataLoader's worker processes, which do not keep up, while the device has nothing to do",
                (false, true) => ", on the training thread",
                (false, false) => " while the device has nothing to do",
            }
        ),
        fix: if workers {
            "The DataLoader already has worker processes and they cannot keep up: make each item cheaper (decoding, augmentation, a slow read: profile `__getitem__`), add workers where cores are free (`num_workers`; with `persistent_workers=True` and a larger `prefetch_factor`), move decoding and augmentation onto the device, or pre-encode the data; check the storage the items come from.".into()
        } else {
            "Overlap input with training: DataLoader workers (`num_workers` > 0, `persistent_workers=True`, `prefetch_factor`), `pin_memory=True` with non-blocking copies, decoding and augmentation moved off the training process or onto the device, pre-encoded data.".into()
        },
        ranks: flagged,
        steps: cx.all_steps.clone(),
        evidence: Evidence::from([(K::MaxInputRatio, worst), (K::Threshold, cx.th.input_ratio)]),
        symptoms: Vec::new(),
        location: None,
        impact_ns: saving as i64,
    })
}

/// Whether the ranks' DataLoaders run worker processes: the training thread's iteration is
/// `enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__` (it waits for a worker's
/// batch), not `_SingleProcessDataLoaderIter` (it loads the batch itself).
pub(super) fn loads_with_workers(cx: &Ctx<'_>) -> bool {
    cx.a.regions
        .iter()
        .any(|r| r.phase == Phase::DataLoading && r.name.contains("MultiProcessingDataLoaderIter"))
}

pub(super) fn cpu_bound(cx: &Ctx<'_>, exclude: &[u32]) -> Option<Finding> {
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
    let saving = median_f(bad.iter().map(|x| x.1).collect());
    Some(Finding {
        id: FindingId::CpuBound,
        severity: severity_for(saving, cx.step_ns),
        message: format!(
            "The GPU waits for the CPU to launch work: {} per step (up to {} of the step) of device idle ends with a kernel whose launch came after the device ran dry, on {} rank(s).",
            dur_range(bad.iter().map(|x| x.1).collect()),
            pct(worst),
            bad.len()
        ),
        fix: "Cut launch overhead: capture the step with CUDA graphs, fuse small kernels with `torch.compile`, increase work per kernel (batch size), and move Python overhead (logging, `.item()`) out of the step.".into(),
        ranks: bad.iter().map(|x| x.0).collect(),
        steps: cx.all_steps.clone(),
        evidence: Evidence::from([(K::MaxCpuBoundRatio, worst), (K::Threshold, cx.th.cpu_bound_ratio)]),
        symptoms: Vec::new(),
        location: None,
        impact_ns: saving as i64,
    })
}

pub(super) fn host_sync(cx: &Ctx<'_>, exclude: &[u32]) -> Option<Finding> {
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
        symptoms: vec![FindingId::CpuBound],
        location: None,
        impact_ns: saving as i64,
    })
}

pub(super) fn allocator_churn(cx: &Ctx<'_>) -> Option<Finding> {
    let a = cx.a;
    if a.allocations.is_empty() {
        return None;
    }
    let n_steps = cx.all_steps.len().max(1) as f64;
    let steps_after_first = (n_steps - 1.0).max(1.0);
    let mut per_rank: BTreeMap<u32, (usize, i64)> = BTreeMap::new();
    for x in &a.allocations {
        let e = per_rank.entry(x.rank).or_default();
        e.0 += x.calls;
        e.1 += x.time_ns;
    }
    let worst = per_rank.values().map(|v| v.0).max().unwrap_or(0) as f64 / steps_after_first;
    if worst < cx.th.alloc_calls_per_step {
        return None;
    }
    let saving = median_f(per_rank.values().map(|v| v.1 as f64 / steps_after_first).collect());
    let mut steps: Vec<u32> = a.allocations.iter().map(|x| x.step).collect();
    steps.sort_unstable();
    steps.dedup();
    Some(Finding {
        id: FindingId::AllocatorChurn,
        severity: severity_for(saving, cx.step_ns).min(Severity::Medium),
        message: format!(
            "cudaMalloc/cudaFree run inside steps after warm-up ({worst:.1} calls and {} per step on the worst rank): the caching allocator is fragmenting or being emptied.",
            dur(per_rank.values().map(|v| v.1 as f64 / steps_after_first).fold(0.0, f64::max))
        ),
        fix: "Set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` (or tune `max_split_size_mb`), keep shapes fixed (pad variable lengths), and avoid `torch.cuda.empty_cache()` in the loop.".into(),
        ranks: per_rank.keys().copied().collect(),
        steps,
        evidence: Evidence::from([(K::CallsPerStep, worst)]),
        symptoms: Vec::new(),
        location: None,
        impact_ns: saving as i64,
    })
}
