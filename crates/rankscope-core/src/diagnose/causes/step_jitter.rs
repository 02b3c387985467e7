//! `step_jitter`: step times that vary (standard deviation / mean above
//! [`crate::finding::Thresholds::step_jitter`], three steps or more) with no rank consistently
//! late. Its gain is the slow steps' excess over the median, spread over every step. A cause
//! found before it that covers the slow steps explains it (a late rank, ranks taking turns, a
//! stalled stage, input); a stopped job excludes it.

use super::prelude::*;

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::StepJitter,
    finds: &[FindingId::StepJitter],
    stage: Stage::Spread,
    explains: &[],
    part_of: None,
    excludes: &[],
    names_part: None,
    find,
};

fn find(cx: &Ctx<'_>, _: &Found) -> Vec<Finding> {
    jitter(cx).into_iter().collect()
}

fn jitter(cx: &Ctx<'_>) -> Option<Finding> {
    let jittery: Vec<(u32, f64, f64)> =
        cx.a.rank_totals
            .iter()
            .filter(|t| t.steps >= 3)
            .filter_map(|t| {
                let s = t.step_time.as_ref()?;
                Some((t.rank, s.jitter, (s.max_ns - s.p50_ns) as f64))
            })
            .filter(|x| x.1 > cx.th.step_jitter)
            .collect();
    if jittery.is_empty() {
        return None;
    }
    let worst = jittery.iter().map(|x| x.1).fold(0.0, f64::max);
    let n = cx.all_steps.len().max(1) as f64;
    // The slow steps' excess over the median, spread over every step.
    let saving = median_f(jittery.iter().map(|x| x.2).collect()) / n;
    Some(Finding {
        id: FindingId::StepJitter,
        severity: Severity::Low,
        message: format!(
            "Step time varies by {} (standard deviation / mean) on the worst rank, with no rank consistently late: look at the slowest steps, not the mean.",
            pct(worst)
        ),
        fix: "Find what differs in the slow steps: periodic work (checkpointing, evaluation, logging), data loading stalls, garbage collection.".into(),
        ranks: jittery.iter().map(|x| x.0).collect(),
        steps: cx.all_steps.clone(),
        evidence: Evidence::from([(K::MaxJitter, worst), (K::Threshold, cx.th.step_jitter)]),
        quotes: Vec::new(),
        quotes_total: 0,
        symptoms: Vec::new(),
        location: None,
        impact_ns: saving as i64,
    })
}
