//! A late rank whose lateness is one step: a burst, not a cause (docs/metrics.md, "Noise").
//!
//! Steps are samples. A rank can be the late one in most steps by a little, and in one step by
//! a lot: preemption by another process on its cores, a garbage-collection pause, a one-off
//! I/O wait. Read as a mean over the steps, that one step makes a "slow device" or "more work"
//! of a rank whose operators run at the others' speed. The lateness is a **burst** when
//! - the run's noise is measured ([`crate::analyze::noise`]: three steps or more) and the step
//!   stands out of the run's step times;
//! - that step holds at least [`BURST_SHARE`](crate::analyze::noise::BURST_SHARE) of all the time the others lost waiting for the
//!   group; and
//! - without that step, the group is no late group ([`super::late_ranks_without`]: the same
//!   consistency over the other steps finds no group, or another one).
//!
//! Then the finding is `noise_burst`, information (severity info, after all advice): which
//! step, which rank, what it cost, the operators' usual speed where the trace gives it, and
//! that one burst is nothing to change in the job. Whether it recurs (a checkpoint every N
//! steps) takes more profiled steps to tell.

use super::super::prelude::*;
use super::Late;
use crate::analyze::attribution::OpGroup;
use crate::analyze::noise::BURST_SHARE;


/// The burst step and what the group's lateness cost in it, when the lateness is one.
pub(super) fn burst(cx: &Ctx<'_>, late: &Late) -> Option<(u32, i64)> {
    let noise = cx.a.noise.as_ref()?;
    let n = cx.all_steps.len();
    if n < 2 {
        return None;
    }
    let total: i64 = late.cost_ns.iter().sum();
    let (k, &top) = late.cost_ns.iter().enumerate().max_by_key(|x| *x.1)?;
    let step = *late.steps.get(k)?;
    if !noise.stands_out(step) || (top as f64) < BURST_SHARE * total as f64 {
        return None;
    }
    let without = super::late_ranks_without(cx, Some(step));
    without.is_none_or(|w| w.ranks != late.ranks).then_some((step, top))
}

/// The burst's finding.
pub(super) fn finding(cx: &Ctx<'_>, late: &Late, (step, cost): (u32, i64)) -> Option<Finding> {
    let noise = cx.a.noise.as_ref()?;
    let n_steps = cx.all_steps.len().max(1);
    let total: i64 = late.cost_ns.iter().sum();
    let saving = total as f64 / n_steps as f64;
    let who = ranks_word(&late.ranks);
    let step_ns = noise.outliers.iter().find(|o| o.step == step).map_or(0, |o| o.step_ns);
    let share = cost as f64 / total.max(1) as f64;
    let rest = (total - cost) as f64 / (n_steps - 1).max(1) as f64;
    let mut evidence = Evidence::from([
        (K::CostNsPerLateStep, cost as f64),
        (K::Fraction, share),
        (K::StepWallNs, step_ns as f64),
        (K::OthersStepWallNs, noise.step_ns as f64),
        (K::LateSteps, 1.0),
    ]);
    // CPU ranks: the same operators' typical durations against the others' (medians over the
    // steps, unmoved by one step).
    let rank = late.ranks[0];
    let typical = |g: OpGroup| cx.a.op_speed.iter().find(|o| o.rank == rank && o.group == g).map(|o| o.ratio);
    let speed = match typical(OpGroup::Work) {
        Some(w) if late.ranks.len() == 1 && cx.is_cpu(rank) => {
            evidence.insert(K::TypicalOpRatio, w);
            format!(" Its operators typically run at {w:.2}× the others' durations: the same work at the same speed, outside that step.")
        }
        _ => String::new(),
    };
    let message = format!(
        "{who} held the others up in step {step} only: {} that step, {:.0}% of all the time they lost waiting for {} in {n_steps} profiled steps; in the other steps {} per step, no more than the run's noise makes of a rank (steps vary by {} around a usual {}). Step {step} took {}.{speed} A burst of noise on its host (another process on its cores, preemption, a garbage-collection pause, a one-off wait), not a slow device or more work.",
        dur(cost as f64),
        100.0 * share,
        if late.ranks.len() > 1 { "them" } else { "it" },
        dur(rest),
        dur(noise.spread_ns as f64),
        dur(noise.step_ns as f64),
        dur(step_ns as f64),
    );
    let fix = "Nothing to change in the job for one burst. To tell noise from a periodic stall (a checkpoint, an evaluation or logging every N steps), profile more steps (`schedule(active=10)` or more); if bursts recur, keep other work off the training hosts, pin each rank to its own cores, and call `gc.freeze()` after warm-up.".to_string();
    Some(Finding {
        id: FindingId::NoiseBurst,
        severity: Severity::Info,
        message,
        fix,
        ranks: late.ranks.clone(),
        steps: vec![step],
        evidence,
        quotes: Vec::new(),
        quotes_total: 0,
        symptoms: vec![FindingId::Straggler],
        location: None,
        impact_ns: saving as i64,
    })
}
