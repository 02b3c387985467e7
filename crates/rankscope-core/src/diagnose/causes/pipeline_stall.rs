//! `host_stall` on a pipeline stage: its thread runs nothing at all (no operator, no exchange)
//! far longer than any other stage's. A stage waiting for a neighbour is always inside an
//! exchange (a receive, or a send not yet received), so this time is the stage's own host work,
//! and the other stages' bubble waits for it: its time is part of the pipeline's bubble.

use super::prelude::*;

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::PipelineStall,
    finds: &[FindingId::HostStall],
    stage: Stage::Waiting,
    explains: &[FindingId::StepJitter],
    part_of: Some(FindingId::PipelineBubble),
    excludes: &[],
    names_part: None,
    find,
};

fn find(cx: &Ctx<'_>, _: &Found) -> Vec<Finding> {
    stall(cx).into_iter().collect()
}

/// A pipeline stage that stalls on its host: its thread runs nothing at all (no operator, no
/// exchange) for far longer than any other stage's. A stage waiting for a neighbour is always
/// inside an exchange (a receive, or a send not yet received), so this time is the stage's own
/// (a hook's sleep, blocking I/O, a lock), and the other stages' bubble waits for it: the cause
/// is that stage's host work, not the schedule. Named when the stage's excess over the others'
/// median is more than twice the largest other stage's such time (a distinct outlier, not the
/// schedule's bookkeeping every stage has) and at least 5% of the span (worth a look, as a
/// per-rank spread is). Its gain is that excess: the time the pipeline waits for the stage.
fn stall(cx: &Ctx<'_>) -> Option<Finding> {
    let p = cx.a.pipeline.as_ref()?;
    if p.per_stage.len() < 2 {
        return None;
    }
    let top = p.per_stage.iter().max_by_key(|s| (s.host_free_ns, std::cmp::Reverse(s.stage)))?;
    let others: Vec<f64> =
        p.per_stage.iter().filter(|s| s.stage != top.stage).map(|s| s.host_free_ns as f64).collect();
    let others_max = others.iter().copied().fold(0.0, f64::max);
    let others_med = median_f(others);
    let excess = top.host_free_ns as f64 - others_med;
    if excess <= 2.0 * others_max || excess < 0.05 * top.span_ns as f64 {
        return None;
    }
    let shares: Vec<String> = p
        .per_stage
        .iter()
        .filter(|s| s.stage != top.stage)
        .map(|s| format!("stage {} {}", s.stage, pct(s.bubble_share)))
        .collect();
    Some(Finding {
        id: FindingId::HostStall,
        severity: severity_for(excess, cx.step_ns),
        message: format!(
            "Rank {} (stage {} of the pipeline) stalls on the host: {} per step with neither an operator nor an exchange running on its thread, against {} on the other stages (median), so the other stages wait for it: their idle share is {}. Not the schedule's bubble: a stage waiting for a neighbour is inside a receive or an unfinished send, and this stage is in neither.",
            top.rank,
            top.stage,
            dur(top.host_free_ns as f64),
            dur(others_med),
            shares.join(", ")
        ),
        fix: format!(
            "Find what rank {} does between its exchanges and its compute that the other stages do not: a hook (forward pre-hooks run before each micro-batch's forward), a sleep, blocking I/O (logging, checkpointing, file or network reads), a lock, garbage collection; move it out of the schedule or make it asynchronous. More micro-batches or another schedule would not remove this part of the idle time.",
            top.rank
        ),
        ranks: vec![top.rank],
        steps: {
            let mut v: Vec<u32> = p.steps.iter().map(|s| s.step).collect();
            v.dedup();
            v
        },
        evidence: Evidence::from([(K::StallNs, top.host_free_ns as f64),
            (K::OthersStallNs, others_med),
            (K::Stage, f64::from(top.stage)),
        ]),
        quotes: Vec::new(),
        quotes_total: 0,
        symptoms: vec![FindingId::PipelineBubble, FindingId::Straggler],
        location: None,
        impact_ns: excess as i64,
    })
}
