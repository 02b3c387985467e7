//! `pipeline_bubble`: a pipeline's stages idle waiting for their neighbours, against the
//! schedule's (p − 1) / (m + p − 1), with the slowest stage and the fixes that apply
//! (docs/metrics.md, "Pipelines"). Its gain is the bubble beyond what the formula leaves at
//! twice the micro-batches (what more micro-batches and balanced stages could reach), or, with
//! one stage far slower than the rest and a replay that holds, the replay with the stages
//! balanced (set by the judging layer, `diagnose::replayed`); a stage's stall on its host
//! ([`super::pipeline_stall`]) is part of it.

use super::prelude::*;
use crate::analyze::pipeline::{PipelineReport, Schedule, StageSummary};

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::PipelineBubble,
    finds: &[FindingId::PipelineBubble],
    stage: Stage::Waiting,
    explains: &[],
    part_of: None,
    excludes: &[],
    names_part: Some(names_stall),
    find,
};

fn find(cx: &Ctx<'_>, _: &Found) -> Vec<Finding> {
    bubble(cx).into_iter().collect()
}

/// A stalled stage's host time is most of the bubble.
fn names_stall(part: &Finding) -> String {
    let who = part.ranks.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    let whose = if part.ranks.len() == 1 { format!("rank {who}'s") } else { format!("ranks {who}'") };
    if part.id == FindingId::HostStall {
        format!(" Part of it is {whose} own host time (`host_stall`).")
    } else {
        format!(" Part of it is the wait for {whose} delay (`{}`).", part.id)
    }
}

/// The pipeline's bubble: stages idle waiting for their neighbours, against the schedule's
/// (p − 1) / (m + p − 1), the slowest stage, and the fixes that apply. Its saving is the bubble
/// beyond what the formula leaves at twice the micro-batches (what more micro-batches and
/// balanced stages could reach).
fn bubble(cx: &Ctx<'_>) -> Option<Finding> {
    let p = cx.a.pipeline.as_ref()?;
    if p.per_stage.len() < 2 {
        return None;
    }
    let n = p.per_stage.len() as f64;
    let mean =
        |f: fn(&StageSummary) -> f64| p.per_stage.iter().map(f).sum::<f64>() / n;
    let bubble_ns = mean(|s| s.bubble_ns as f64);
    let span_ns = mean(|s| s.span_ns as f64);
    let share = mean(|s| s.bubble_share);
    let floor = p.theory_bubble_share_2m.unwrap_or(0.0);
    let impact = (bubble_ns - floor * span_ns).max(0.0);
    let mut by_compute: Vec<&StageSummary> = p.per_stage.iter().collect();
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
        Schedule::Unknown => "schedule not told".to_string(),
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
    let fix = fixes(cx, p, slowest, one_slow, per_exchange);
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
        quotes: Vec::new(),
        quotes_total: 0,
        symptoms: vec![FindingId::ExposedComm, FindingId::Straggler],
        location: None,
        impact_ns: impact as i64,
    })
}

/// The advice: cheaper exchanges when balanced stages idle far beyond the schedule, the slow
/// stage rebalanced, more micro-batches, a schedule with a smaller bubble.
fn fixes(cx: &Ctx<'_>, p: &PipelineReport, slowest: &StageSummary, one_slow: bool, per_exchange: bool) -> String {
    let m = p.micro_batches;
    let stages = p.stages.len();
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
            Schedule::Interleaved1f1b => {
                "more virtual stages per rank (v in (p − 1)/(m·v + p − 1)), at the cost of more exchanges".to_string()
            }
            Schedule::OneFOneB => {
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
    fix
}
