//! `allocator_churn`: cudaMalloc / cudaFree-family calls inside steps after the first, at
//! least [`crate::finding::Thresholds::alloc_calls_per_step`] per step on the worst rank: the
//! caching allocator fragments or is emptied. Its gain is the ranks' median time in them.

use super::prelude::*;

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::AllocatorChurn,
    finds: &[FindingId::AllocatorChurn],
    stage: Stage::SteadyState,
    explains: &[],
    part_of: None,
    excludes: &[],
    names_part: None,
    find,
};

fn find(cx: &Ctx<'_>, _: &Found) -> Vec<Finding> {
    churn(cx).into_iter().collect()
}

fn churn(cx: &Ctx<'_>) -> Option<Finding> {
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
        quotes: Vec::new(),
        quotes_total: 0,
        symptoms: Vec::new(),
        location: None,
        impact_ns: saving as i64,
    })
}
