//! `input_bound` on every rank: data loading takes more than [`crate::finding::Thresholds::input_ratio`]
//! of the step on most ranks (CPU ranks: the DataLoader runs on the training thread, all of it
//! is step time; GPU ranks: the device idle while the host loads, `input_ns`). Its gain is the
//! ranks' median loading time per step.
//!
//! With a late rank that is input-bound too ([`super::late_rank`]), which is the cause is which
//! part is bigger: what that rank loads beyond the others (its own problem: its shard, its
//! disk) or what every rank loads (the job's input pipeline). When the shared part is, this
//! finding takes the late rank's in (its extra wait is part of the same fix, more workers
//! everywhere) and explains it; else the late rank's finding stands alone.

use super::prelude::*;

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::InputBound,
    finds: &[FindingId::InputBound],
    stage: Stage::SteadyState,
    explains: &[FindingId::InputBound, FindingId::StepJitter],
    part_of: None,
    excludes: &[],
    names_part: None,
    find,
};

fn find(cx: &Ctx<'_>, found: &Found) -> Vec<Finding> {
    let Some(mut all) = every_rank(cx) else { return Vec::new() };
    let late = found.of(CauseId::LateRank).find(|f| f.id == FindingId::InputBound);
    match late {
        Some(late) if shared_bigger(late) => {
            let ev = |k| late.evidence.or_zero(k);
            all.message = format!(
                "{} {}, the slowest, also makes the other ranks wait {} per step for it ({} of {} steps).",
                all.message,
                ranks_word(&late.ranks),
                dur_range(vec![ev(K::OthersExposedWaitNsMin), ev(K::OthersExposedWaitNsMax)]),
                late.steps.len(),
                cx.all_steps.len()
            );
            all.symptoms.extend(late.symptoms.iter().copied());
            all.location = late.location.clone();
            vec![all]
        }
        Some(_) => Vec::new(),
        None => vec![all],
    }
}

/// Whether what every rank loads exceeds what the late rank loads beyond the others.
fn shared_bigger(late: &Finding) -> bool {
    let ev = |k| late.evidence.or_zero(k);
    ev(K::DataLoadingNs) - ev(K::OthersDataLoadingNs) < ev(K::OthersDataLoadingNs)
}

fn every_rank(cx: &Ctx<'_>) -> Option<Finding> {
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
        quotes: Vec::new(),
        quotes_total: 0,
        symptoms: Vec::new(),
        location: None,
        impact_ns: saving as i64,
    })
}

/// Whether the ranks' DataLoaders run worker processes: the training thread's iteration is
/// `enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__` (it waits for a worker's
/// batch), not `_SingleProcessDataLoaderIter` (it loads the batch itself).
fn loads_with_workers(cx: &Ctx<'_>) -> bool {
    cx.a.regions
        .iter()
        .any(|r| r.phase == Phase::DataLoading && r.name.contains("MultiProcessingDataLoaderIter"))
}
