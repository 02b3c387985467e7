//! `arrival_jitter`: the ranks wait for each other at the collectives, but the last to arrive
//! changes from step to step: no single straggler. Its gain is every step's late cost, a mean
//! over the steps. When the late ranks spent at least 1.35× the others' median time in forward
//! and backward in the steps that hold two thirds of the time lost, the work moves between the
//! ranks, and the advice leads with balancing it (docs/metrics.md, "Findings", 1). When no work
//! moves, or the time lost sits in steps that stand out of the run's ([`crate::analyze::noise`]),
//! the lateness is the hosts' noise, or cannot be told from it: low at most. Recorded input
//! shapes overrule the timings: when every rank ran its operators on the same shapes in every
//! step and none runs operators the others do not, no work moves. A late rank
//! ([`super::late_rank`]) excludes it; it explains the step-time spread.

use super::prelude::*;
use crate::analyze::attribution::{StepOpsRow, StepWaits};
use crate::analyze::noise::BURST_SHARE;


pub(super) static CAUSE: Cause = Cause {
    id: CauseId::ArrivalJitter,
    finds: &[FindingId::ArrivalJitter],
    stage: Stage::Waiting,
    explains: &[FindingId::StepJitter],
    part_of: None,
    excludes: &[],
    names_part: None,
    find,
};

fn find(cx: &Ctx<'_>, _: &Found) -> Vec<Finding> {
    jitter(cx).into_iter().collect()
}

fn jitter(cx: &Ctx<'_>) -> Option<Finding> {
    let waits: Vec<&StepWaits> = cx.a.waits.iter().filter(|w| w.cost_ns > 0).collect();
    if waits.len() < 2 {
        return None;
    }
    let n_steps = cx.all_steps.len().max(1) as f64;
    let saving = waits.iter().map(|w| w.cost_ns as f64).sum::<f64>() / n_steps;
    let lates: Vec<String> = waits.iter().map(|w| rank_list(&w.late)).collect();
    let per_rank: Vec<f64> = cx.per_rank_mean(|r| r.exposed_wait_ns).into_iter().map(|x| x.1).collect();
    // Does the work move with the lateness? In how many of these steps the last to arrive
    // spent clearly longer in forward and backward (their time with the collective waits
    // inside them taken out) than the others' median in that very step. Noise on a host
    // lengthens the late rank's phases less, and not in most of the time lost (the zoo's and
    // the shared runs, 4 ranks on 2 cores: up to 1.45x in one step, but the steps at 1.35x or
    // more hold at most 58% of it); a batch that is larger this step on this rank, much more
    // (1.34-2.4x for one rank in four with 3x the samples, a different one each step: the
    // steps at 1.35x or more hold 75-100% of the time lost).
    const MORE_WORK: f64 = 1.35;
    let mut work: BTreeMap<(u32, u32), i64> = BTreeMap::new();
    for p in cx.a.phases.iter().filter(|p| matches!(p.phase, Phase::Forward | Phase::Backward)) {
        *work.entry((p.step, p.rank)).or_default() += p.active_ns;
    }
    let more_work = |w: &StepWaits| {
        let of = |r: &u32| work.get(&(w.step, *r)).map(|&x| x as f64);
        let late = w.ranks.iter().filter(|r| w.late.contains(r)).filter_map(of).fold(f64::NAN, f64::max);
        let others: Vec<f64> = w.ranks.iter().filter(|r| !w.late.contains(r)).filter_map(of).collect();
        !others.is_empty() && late >= MORE_WORK * median_f(others).max(1.0)
    };
    // Weighted by what each step's lateness cost: a step where the late rank held the others
    // up for 4 ms says little either way.
    let with_work: Vec<&&StepWaits> = waits.iter().filter(|w| more_work(w)).collect();
    let cost_all: i64 = waits.iter().map(|w| w.cost_ns).sum();
    let cost_work: i64 = with_work.iter().map(|w| w.cost_ns).sum();
    let timing_moves = with_work.len() >= 2 && cost_work as f64 >= 2.0 / 3.0 * cost_all as f64;
    // Recorded shapes say it directly: every rank's forward and backward operators on the
    // others' input shapes in every profiled step (the shapes are hashed over the steps), and
    // no rank running operators the others do not: the same work everywhere, every step, so
    // the longer phases of whoever is last are its host slowing it, in turn.
    let work_ops: Vec<&crate::analyze::attribution::OpSpeed> =
        cx.a.op_speed.iter().filter(|o| o.group == crate::analyze::attribution::OpGroup::Work).collect();
    let same_everywhere = !work_ops.is_empty()
        && cx.ranks.iter().all(|r| work_ops.iter().any(|o| o.rank == *r))
        && work_ops.iter().all(|o| o.same_inputs() == Some(true) && !o.extra.matters(o.rank_ns));
    // Without recorded shapes, on CPU hosts: a late rank that ran more operators in those steps
    // than in its others did more work; one that ran as many, each longer, did more work on
    // larger inputs or was slowed by its host, and on a CPU the two look alike (a preempted
    // rank's every operator runs longer: up to 2.5x the rank's own median in one step on the
    // zoo's healthy 4-rank runs on 2 cores, against 1.3-1.5x for a 3x batch). Said so, low.
    let unshaped = cx.a.op_speed.iter().all(|o| o.shapes_compared == 0);
    let undecided = timing_moves && unshaped && cx.cpu_only && {
        // Each rank's operators per step, and its usual count (the median over its steps).
        let mut per_rank: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
        for s in &cx.a.step_ops {
            per_rank.entry(s.rank).or_default().push(f64::from(s.ops));
        }
        let usual: BTreeMap<u32, f64> = per_rank.into_iter().map(|(r, v)| (r, median_f(v))).collect();
        let ops: BTreeMap<(u32, u32), f64> =
            cx.a.step_ops.iter().map(|s: &StepOpsRow| ((s.rank, s.step), f64::from(s.ops))).collect();
        let more_ops = |w: &StepWaits| {
            w.late.iter().any(|r| ops.get(&(*r, w.step)).zip(usual.get(r)).is_some_and(|(n, u)| n > u))
        };
        let cost_ops: i64 = with_work.iter().filter(|w| more_ops(w)).map(|w| w.cost_ns).sum();
        (cost_ops as f64) < 2.0 / 3.0 * cost_work as f64
    };
    let work_moves = timing_moves && !same_everywhere && !undecided;
    // Noise, measured (docs/metrics.md, "Noise"): lateness that moves between the ranks with
    // no work moving with it is the hosts' noise, information about the machine rather than the
    // job (low at most). Lateness whose cost sits mostly in steps that stand out of the run's
    // step times looks the same as bursts of noise would: low at most, and said so.
    let in_outliers: i64 = cx
        .a
        .noise
        .as_ref()
        .map_or(0, |n| waits.iter().filter(|w| n.stands_out(w.step)).map(|w| w.cost_ns).sum());
    let bursty = cost_all > 0 && in_outliers as f64 >= BURST_SHARE * cost_all as f64;
    // Without recorded shapes nothing tells a larger batch on the late rank from the same
    // batch on a host that ran it slower (3 ranks sharing 2 cores take turns the same way).
    let moves = if work_moves {
        format!(
            " In {} of these {} steps, which hold {:.0}% of the time lost, the last to arrive spent at least {MORE_WORK}x the others' time in forward and backward in that step: {}.",
            with_work.len(),
            waits.len(),
            100.0 * cost_work as f64 / cost_all.max(1) as f64,
            if bursty {
                "more work, or the same work slowed by its host, in that step"
            } else if unshaped {
                "the work moves between the ranks from step to step, or their hosts slow them in turn (the traces record no input shapes to tell more work from the same work run slower; profile with `record_shapes=True`)"
            } else {
                "the work moves between the ranks from step to step"
            }
        )
    } else if undecided {
        format!(
            " In {} of these {} steps, which hold {:.0}% of the time lost, the last to arrive spent at least {MORE_WORK}x the others' time in forward and backward in that step, running as many operators as in its other steps: a larger batch on that rank in that step, or its host slowing it in turn. On CPU hosts the two look alike, and the traces record no input shapes to tell them apart: profile with `record_shapes=True`.",
            with_work.len(),
            waits.len(),
            100.0 * cost_work as f64 / cost_all.max(1) as f64,
        )
    } else {
        String::new()
    };
    let shapes_words = if timing_moves && same_everywhere {
        let (same, compared) = work_ops.iter().fold((0, 0), |a, o| (a.0 + o.shapes_same, a.1 + o.shapes_compared));
        format!(
            " The last to arrive often spent longer in forward and backward (at least {MORE_WORK}x the others in {} of these {} steps), but every rank ran its operators on the same input shapes in every step ({same} of {compared} shaped operator instances) and none runs operators the others do not: the same work, slowed by its host in turn.",
            with_work.len(),
            waits.len()
        )
    } else {
        String::new()
    };
    let noise_words = match cx.a.noise.as_ref() {
        Some(n) if !work_moves && !undecided => format!(
            " No work moves with the lateness: this is the hosts' noise (steps vary by {} around a usual {}), information about the machine more than the job.",
            dur(n.spread_ns as f64),
            dur(n.step_ns as f64)
        ),
        Some(n) if bursty => format!(
            " {:.0}% of the time lost is in steps that stand out of the run's (usually {}, varying by {}): bursts of noise would look the same in {} profiled steps; profile more steps, with `record_shapes=True`, to tell them apart.",
            100.0 * in_outliers as f64 / cost_all as f64,
            dur(n.step_ns as f64),
            dur(n.spread_ns as f64),
            cx.all_steps.len()
        ),
        _ => String::new(),
    };
    let noisy = (cx.a.noise.is_some() && (!work_moves || bursty)) || undecided;
    let balance = if work_moves || undecided {
        "If the batches differ in size from step to step (variable sequence lengths, dynamic batching), balance the work per step across ranks: batches of equal tokens rather than equal samples (bucket or sort samples by length, pack sequences). "
    } else {
        ""
    };
    Some(Finding {
        id: FindingId::ArrivalJitter,
        severity: severity_for(saving, cx.step_ns).min(if noisy { Severity::Low } else { Severity::Medium }),
        message: format!(
            "The ranks wait for each other at the collectives ({} per step of exposed wait, each), but the last to arrive changes from step to step (rank {}): no single straggler.{moves}{shapes_words}{noise_words}",
            dur_range(per_rank),
            lates.join(", then ")
        ),
        fix: if cx.cpu_only {
            format!("{balance}Look for noise on the hosts rather than for a slow rank: more processes or threads than cores (set `OMP_NUM_THREADS` / `torch.set_num_threads` so ranks do not oversubscribe the CPU), background work, garbage collection pauses; pin each rank to its own cores.")
        } else {
            format!("{balance}Look for noise rather than for a slow rank: Python garbage collection (`gc.freeze()` after warm-up), variable batch shapes, periodic host work (logging, checkpointing), CPU oversubscription of the launching threads; pin each rank to its own cores.")
        },
        ranks: cx.ranks.clone(),
        steps: waits.iter().map(|w| w.step).collect(),
        evidence: {
            let mut e = Evidence::from([(K::CostNsPerStep, saving)]);
            if cx.a.noise.is_some() && !work_moves && !undecided {
                e.insert(K::Noise, 1.0);
            }
            e
        },
        quotes: Vec::new(),
        quotes_total: 0,
        symptoms: vec![FindingId::ExposedWait],
        location: None,
        impact_ns: saving as i64,
    })
}
