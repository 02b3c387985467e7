//! The job's course: a divergence that stopped it (hang, mismatch), the pipeline schedule's
//! bubble, and step times that vary.

use super::*;

/// The pipeline's bubble: stages idle waiting for their neighbours, against the schedule's
/// (p − 1) / (m + p − 1), the slowest stage, and the fixes that apply. Its saving is the bubble
/// beyond what the formula leaves at twice the micro-batches (what more micro-batches and
/// balanced stages could reach).
pub(super) fn pipeline_bubble(cx: &Ctx<'_>) -> Option<Finding> {
    let p = cx.a.pipeline.as_ref()?;
    if p.per_stage.len() < 2 {
        return None;
    }
    let n = p.per_stage.len() as f64;
    let mean =
        |f: fn(&crate::analyze::pipeline::StageSummary) -> f64| p.per_stage.iter().map(f).sum::<f64>() / n;
    let bubble_ns = mean(|s| s.bubble_ns as f64);
    let span_ns = mean(|s| s.span_ns as f64);
    let share = mean(|s| s.bubble_share);
    let floor = p.theory_bubble_share_2m.unwrap_or(0.0);
    let impact = (bubble_ns - floor * span_ns).max(0.0);
    let mut by_compute: Vec<&crate::analyze::pipeline::StageSummary> = p.per_stage.iter().collect();
    by_compute.sort_by(|a, b| b.compute_ns.cmp(&a.compute_ns).then(a.stage.cmp(&b.stage)));
    let slowest = by_compute[0];
    let second = by_compute.get(1).map_or(0, |s| s.compute_ns);
    let mean_compute = mean(|s| s.compute_ns as f64);
    // One stage far slower than every other is the bottleneck and the fix is that stage's: at
    // least 40% more compute than the next slowest (first and last stages are naturally
    // 10–30% heavier, with the embedding and the head).
    let one_slow = slowest.compute_ns as f64 >= 1.4 * second as f64;
    let ranks = if one_slow { vec![slowest.rank] } else { p.stages.clone() };
    let m = p.micro_batches;
    let stages = p.stages.len();
    let shares: Vec<String> =
        p.per_stage.iter().map(|s| format!("stage {} {}", s.stage, pct(s.bubble_share))).collect();
    let theory = match (p.theory_bubble_share, m, p.virtual_stages.filter(|&v| v > 1)) {
        (Some(t), Some(m), Some(v)) => format!(
            ", against (p − 1)/(m·v + p − 1) = {} for {stages} stages, {m} micro-batches and {v} virtual stages per rank",
            pct(t)
        ),
        (Some(t), Some(m), None) => {
            format!(", against (p − 1)/(m + p − 1) = {} for {stages} stages and {m} micro-batches", pct(t))
        }
        _ => String::new(),
    };
    let sched = match p.schedule {
        crate::analyze::pipeline::Schedule::Unknown => "schedule not told".to_string(),
        s => format!("{} schedule", s.name()),
    };
    let mb = m.map(|m| format!(", {m} micro-batches")).unwrap_or_default();
    let recv = mean(|s| s.recv_wait_ns as f64);
    let message = format!(
        "Pipeline of {stages} stages (ranks {}), {sched}{mb}: the stages are idle {} of the schedule on average waiting for their neighbours (the bubble: {}){theory}; {} per step of it is blocked in receives. Stage {} (rank {}) is the slowest: {} of compute per step, {} above the stages' mean ({}){}.",
        rank_list(&p.stages),
        pct(share),
        shares.join(", "),
        dur(recv),
        slowest.stage,
        slowest.rank,
        dur(slowest.compute_ns as f64),
        pct(p.slowest_excess),
        dur(mean_compute),
        if one_slow { "; the other stages wait for it" } else { "" },
    );
    // Balanced stages idle far beyond what the schedule leaves: the rest is not the fill and
    // drain but the time around each exchange between micro-batches (the p2p's own cost, the
    // neighbour's turn on a shared core), which more micro-batches would multiply, not shrink.
    let per_exchange = match p.theory_bubble_share {
        Some(t) => !one_slow && p.slowest_excess < 0.1 && share >= 2.0 * t && share - t >= 0.1,
        None => false,
    };
    let mut message = message;
    if per_exchange {
        message.push_str(&format!(
            " The stages are balanced, so the schedule's fill and drain explain only {} of the {}: the rest is spent around the exchanges between micro-batches.",
            pct(p.theory_bubble_share.unwrap_or(0.0)),
            pct(share)
        ));
    }
    let mut fixes = Vec::new();
    if per_exchange {
        fixes.push(format!(
            "make each exchange cheaper rather than adding micro-batches (each one adds exchanges): fewer, larger micro-batches trade a larger fill and drain for fewer exchanges; {}",
            if cx.cpu_only {
                "on CPU ranks give each stage a core of its own so a receive does not wait for its neighbour's turn"
            } else {
                "keep point-to-point transfers on the fastest link (NVLink within a node) and overlapped with compute"
            }
        ));
    }
    if one_slow || p.slowest_excess >= 0.1 {
        fixes.push(format!(
            "rebalance the stages: move layers off stage {} (rank {}), whose compute is {} above the mean",
            slowest.stage,
            slowest.rank,
            pct(p.slowest_excess)
        ));
    }
    if per_exchange {
        // Said above: more micro-batches would not help.
    } else if let (Some(m), Some(t2)) = (m, p.theory_bubble_share_2m) {
        fixes.push(format!(
            "more micro-batches: at {} the formula's bubble is {} (rule of thumb m ≥ 4p = {})",
            2 * m,
            pct(t2),
            4 * stages
        ));
    } else {
        fixes.push("more micro-batches per step (rule of thumb m ≥ 4p)".to_string());
    }
    if !per_exchange {
        fixes.push(match p.schedule {
            crate::analyze::pipeline::Schedule::Interleaved1f1b => {
                "more virtual stages per rank (v in (p − 1)/(m·v + p − 1)), at the cost of more exchanges".to_string()
            }
            crate::analyze::pipeline::Schedule::OneFOneB => {
                "an interleaved schedule (ScheduleInterleaved1F1B with v virtual stages per rank: (p − 1)/(m·v + p − 1))".to_string()
            }
            _ => "a 1F1B or interleaved schedule (Schedule1F1B bounds the activations in flight; ScheduleInterleaved1F1B with v virtual stages per rank gives (p − 1)/(m·v + p − 1))".to_string(),
        });
    }
    let mut fix = fixes.join("; ");
    if let Some(c) = fix.get(..1) {
        fix = c.to_uppercase() + &fix[1..];
    }
    fix.push('.');
    let mut evidence = Evidence::default();
    for s in &p.per_stage {
        evidence.insert(K::BubbleShareStage(s.stage), s.bubble_share);
        evidence.insert(K::ComputeNsStage(s.stage), s.compute_ns as f64);
    }
    evidence.insert(K::BubbleShare, share);
    evidence.insert(K::BubbleNs, bubble_ns);
    evidence.insert(K::RecvWaitNs, recv);
    evidence.insert(K::SlowestStage, f64::from(slowest.stage));
    evidence.insert(K::SlowestExcess, p.slowest_excess);
    evidence.insert(K::Stages, stages as f64);
    if let Some(t) = p.theory_bubble_share {
        evidence.insert(K::TheoryBubbleShare, t);
    }
    if let Some(t) = p.theory_bubble_share_2m {
        evidence.insert(K::TheoryBubbleShare2m, t);
    }
    if let Some(m) = m {
        evidence.insert(K::MicroBatches, f64::from(m));
    }
    let mut steps: Vec<u32> = p.steps.iter().map(|s| s.step).collect();
    steps.dedup();
    Some(Finding {
        id: FindingId::PipelineBubble,
        severity: severity_for(impact, cx.step_ns),
        message,
        fix,
        ranks,
        steps,
        evidence,
        symptoms: vec![FindingId::ExposedComm, FindingId::Straggler],
        location: None,
        impact_ns: impact as i64,
    })
}

/// A pipeline stage that stalls on its host: its thread runs nothing at all (no operator, no
/// exchange) for far longer than any other stage's. A stage waiting for a neighbour is always
/// inside an exchange (a receive, or a send not yet received), so this time is the stage's own
/// (a hook's sleep, blocking I/O, a lock), and the other stages' bubble waits for it: the cause
/// is that stage's host work, not the schedule. Named when the stage's excess over the others'
/// median is more than twice the largest other stage's such time (a distinct outlier, not the
/// schedule's bookkeeping every stage has) and at least 5% of the span (worth a look, as a
/// per-rank spread is). Its gain is that excess: the time the pipeline waits for the stage.
pub(super) fn pipeline_stall(cx: &Ctx<'_>) -> Option<Finding> {
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
        symptoms: vec![FindingId::PipelineBubble, FindingId::Straggler],
        location: None,
        impact_ns: excess as i64,
    })
}

/// A hang or mismatch the sequence engine found: the first divergence of a group, said the
/// way the engine words it ([`crate::sequence::text`]).
pub(super) fn mismatches(a: &Analysis, ops: &[Op]) -> Vec<Finding> {
    use crate::sequence::{DiagnosisKind, DivergenceClass};
    let Some(seq) = &a.sequence else { return Vec::new() };
    let mut out = Vec::new();
    for d in seq.diagnoses.iter().filter(|d| matches!(d.kind, DiagnosisKind::Hang | DiagnosisKind::Mismatch))
    {
        let div = seq
            .groups
            .iter()
            .find(|g| Some(&g.pg) == d.pg.as_ref())
            .and_then(|g| g.divergences.iter().find(|v| Some(v.position) == d.position));
        let waited = div
            .map(|v| {
                v.sides.iter().flat_map(|s| s.waits.iter()).filter_map(|w| w.waited_ns).max().unwrap_or(0)
            })
            .or(d.waited_ns)
            .unwrap_or(0);
        let steps: Vec<u32> = {
            let mut v: Vec<u32> = div
                .map(|v| v.sides.iter().filter_map(|s| s.record.step).collect())
                .unwrap_or_else(|| d.steps.clone());
            v.sort_unstable();
            v.dedup();
            v
        };
        let label = div.and_then(|v| v.sides.iter().find_map(|s| s.record.label.clone()));
        let shape =
            div.is_some_and(|v| v.class == DivergenceClass::Mismatch && !v.shifts.iter().any(|_| true));
        let fix = if shape {
            "Make every rank pass the same shapes and dtypes to each collective: look for a rank-dependent tensor size (an uneven last batch, a padded or unpadded shard, a parameter only some ranks own). Run once with `TORCH_DISTRIBUTED_DEBUG=DETAIL`, which checks shapes before each collective and names the call.".to_string()
        } else {
            format!(
                "Make every rank issue the same collectives in the same order{}, on the same process group (a call that forgot `group=` goes to the default group): look on the rank(s) named for a collective inside a rank-dependent branch (`if rank == …`, a metric logged by some ranks only), an early `break`/`return`/`continue`, data-dependent control flow, or an exception caught on one rank. Run once with `TORCH_DISTRIBUTED_DEBUG=DETAIL` to fail fast at the first mismatch, and keep Flight Recorder on (`TORCH_FR_BUFFER_SIZE`, `TORCH_FR_DUMP_TEMP_FILE`) to get the stacks of a hang.",
                label.as_deref().map(|l| format!(" (the one that diverged was issued in `{l}`)")).unwrap_or_default()
            )
        };
        let mut evidence = Evidence::default();
        if waited > 0 {
            evidence.insert(K::WaitedNs, waited as f64);
        }
        if let Some(t) = div.and_then(|v| v.timeout) {
            evidence.insert(K::TimeoutMs, t.ms as f64);
        }
        evidence.insert(K::PartialCollectives, ops.iter().filter(|o| o.partial).count() as f64);
        out.push(Finding {
            id: FindingId::CollectiveMismatch,
            severity: Severity::High,
            message: d.sentence.clone(),
            fix,
            ranks: d.ranks.clone(),
            steps,
            evidence,
            symptoms: vec![FindingId::Hang],
            location: None,
            // The job stops: every step it does not run is lost.
            impact_ns: waited,
        });
    }
    out
}

pub(super) fn step_jitter(cx: &Ctx<'_>, found: &[Finding]) -> Option<Finding> {
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
    // Explained when a cause found above already covers the slow steps.
    if found.iter().any(|f| {
        matches!(
            f.id,
            FindingId::InputBound
                | FindingId::HostStall
                | FindingId::ComputeImbalance
                | FindingId::Straggler
                | FindingId::ArrivalJitter
        )
    }) {
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
        symptoms: Vec::new(),
        location: None,
        impact_ns: saving as i64,
    })
}
