//! The ranks the others wait for, named for why they are late (DOMAIN.md, last section, 2 and
//! 3; docs/metrics.md, "Findings", 1).
//!
//! **Who is late.** A step counts as late only when its lateness costs at least the findings'
//! floor. A rank in the late group of at least
//! [`crate::finding::Thresholds::straggler_consistency`] of the steps, whose own lateness
//! costs the step in that many, is late; so is a rank late in fewer steps whose own lateness
//! costs more than half of all the wait, in two steps or more, each more than twice any step in
//! which another rank was the late one (a distinct, repeated mode); so is a rank whose data
//! loading or whose host pauses (no operator running) in two steps or more, far beyond anyone's
//! in any other step, amid lateness that is noise ([`repeated`]). Its gain is the wait it
//! costs the others (`waits[].cost_ns`), a mean over every step; a late rank below the floor is
//! no late rank (the ranks may then take turns: [`super::arrival_jitter`]).
//!
//! **Why** ([`classify`]): `input_bound`, `host_stall`, `compute_imbalance`, `slow_device` or
//! `straggler`; or no cause at all when one step holds the lateness (`noise_burst`, [`burst`]). These five ids are one cause in one folder because they are one measurement
//! (the late group and what it costs the others) read five ways: the classification decides
//! the id, and each id's wording is its own function ([`words`]). A late rank excludes
//! ranks-taking-turns, and explains the step-time spread its lateness makes; its ranks are left
//! out of the steady-state host findings (their idle is its).

mod burst;
mod classify;
mod repeated;
mod words;

pub(super) use words::{extra_fix, extra_words};

use super::prelude::*;
use crate::analyze::attribution::{self, StepWaits};
use classify::{classify, Why};
use words::Say;

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::LateRank,
    finds: &[
        FindingId::InputBound,
        FindingId::HostStall,
        FindingId::ComputeImbalance,
        FindingId::SlowDevice,
        FindingId::Straggler,
        FindingId::NoiseBurst,
    ],
    stage: Stage::Waiting,
    explains: &[FindingId::StepJitter],
    // A late rank in a pipeline job makes every later stage wait: that wait is in the
    // pipeline's bubble, which keeps only the rest.
    part_of: Some(FindingId::PipelineBubble),
    excludes: &[CauseId::ArrivalJitter],
    names_part: None,
    find,
};

fn find(cx: &Ctx<'_>, _: &Found) -> Vec<Finding> {
    let floor = cx.floor_ns();
    let Some(late) = late_ranks(cx) else { return Vec::new() };
    // Lateness that is one step's is a burst, whatever that step looked like ([`burst`]).
    let f = match burst::burst(cx, &late) {
        Some(b) => burst::finding(cx, &late, b),
        None => finding(cx, &late),
    };
    f.filter(|f| f.impact_ns as f64 >= floor).into_iter().collect()
}

/// A consistent late group.
struct Late {
    ranks: Vec<u32>,
    /// Steps (with a measurable spread) in which the group was late.
    steps: Vec<u32>,
    /// The steps whose windows hold why: the late steps, but for a pause after a step's last
    /// collective, which makes the rank late in the next step ([`repeated`]).
    cause_steps: Vec<u32>,
    /// Steps with a measurable spread.
    spread_steps: usize,
    /// Per step the group was late: what it cost the step.
    cost_ns: Vec<i64>,
}

fn late_ranks(cx: &Ctx<'_>) -> Option<Late> {
    late_ranks_without(cx, None)
}

/// The late group over every step but `skip` (the burst rule asks whether a group is late
/// without its one outstanding step).
fn late_ranks_without(cx: &Ctx<'_>, skip: Option<u32>) -> Option<Late> {
    let waits: Vec<&StepWaits> = cx.a.waits.iter().filter(|w| Some(w.step) != skip).collect();
    let n_all = cx.all_steps.iter().filter(|&&s| Some(s) != skip).count();
    // A step counts as late only when its lateness costs the step something worth a look (the
    // findings' floor: 1% of the step): a rank last by 0.2 ms in a 50 ms step is not late, and
    // counted so it turned a rank that is last in 2 of 4 steps into a consistent one.
    let floor = cx.floor_ns();
    let spread: Vec<&StepWaits> = waits
        .iter()
        .copied()
        .filter(|w| !w.late.is_empty() && w.cost_ns > 0 && w.cost_ns as f64 >= floor)
        .collect();
    if spread.is_empty() {
        return None;
    }
    let mut count: BTreeMap<u32, usize> = BTreeMap::new();
    for w in &spread {
        for &r in &w.late {
            *count.entry(r).or_default() += 1;
        }
    }
    // Consistent over the steps of the trace, not only over those with a spread: a rank late
    // in 2 of 4 steps is noise. One measured step is named if it is the only step there is.
    let n_steps = n_all.max(spread.len());
    let mut need = (cx.th.straggler_consistency * n_steps as f64).ceil().max(1.0) as usize;
    let mut ranks: Vec<u32> = count.iter().filter(|(_, &n)| n >= need).map(|(&r, _)| r).collect();
    if ranks.is_empty() {
        // Not late in most steps, but the one everybody waits for when the job waits: a rank
        // whose own lateness costs more than half of all the wait, in two steps or more, each
        // time more than twice any step in which another rank was the late one (a distinct,
        // repeated mode, as a bimodal step time is: a stall every other step, a periodic
        // checkpoint or evaluation, a slow every-Nth batch). Random arrival jitter spreads the
        // time lost over the ranks, and its steps' costs are of one order (two ranks that
        // alternate, 17-20 ms against 10 ms, are jitter).
        let total: i64 = spread.iter().map(|w| w.cost_ns).sum();
        // Per rank: the costs of the steps it was late in, alone.
        let mut alone: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
        for w in &spread {
            for &r in &w.late {
                let c = attribution::late_cost(&w.ranks, &w.exposed_wait_ns, &[r]);
                if c > 0 {
                    alone.entry(r).or_default().push(c);
                }
            }
        }
        let others_max =
            |r: u32| spread.iter().filter(|w| !w.late.contains(&r)).map(|w| w.cost_ns).max().unwrap_or(0);
        let best = alone
            .iter()
            .filter(|(&r, v)| {
                let sum: i64 = v.iter().sum();
                v.len() >= 2 && 2 * sum > total && v.iter().min().is_some_and(|&m| m > 2 * others_max(r))
            })
            .max_by_key(|(_, v)| v.iter().sum::<i64>());
        if let Some((&r, _)) = best {
            ranks = vec![r];
            need = 2;
        }
    }
    // The group itself must cost the steps, consistently: a rank that was among the last only
    // with another one (the two of them late together, the other the later) costs nothing
    // alone in those steps, and a finding about it alone would claim steps it did not cost.
    let costs = |ranks: &[u32], need: usize| -> Option<(Vec<u32>, Vec<i64>)> {
        if ranks.is_empty() || ranks.len() * 2 > cx.ranks.len() {
            return None;
        }
        let group: BTreeSet<u32> = ranks.iter().copied().collect();
        let (mut steps, mut cost) = (Vec::new(), Vec::new());
        for w in &waits {
            if w.late.iter().any(|r| group.contains(r)) {
                let c = attribution::late_cost(&w.ranks, &w.exposed_wait_ns, ranks);
                if c > 0 && c as f64 >= floor {
                    steps.push(w.step);
                    cost.push(c);
                }
            }
        }
        (!steps.is_empty() && steps.len() >= need).then_some((steps, cost))
    };
    if let Some((steps, cost_ns)) = costs(&ranks, need) {
        return Some(Late { ranks, cause_steps: steps.clone(), steps, spread_steps: spread.len(), cost_ns });
    }
    // No single rank, or most of them late by turns, or a rank late often that does not cost
    // the steps alone: a data loader or a host pause that comes back on one rank in some steps
    // still stands out of that noise.
    let x = repeated::repeated(cx, &spread)?;
    let (steps, cost_ns) = costs(&[x.rank], 2)?;
    Some(Late {
        ranks: vec![x.rank],
        cause_steps: x.carried.unwrap_or_else(|| steps.clone()),
        steps,
        spread_steps: spread.len(),
        cost_ns,
    })
}

/// The late group's finding: what it costs the others (the gain claimed, a mean over every
/// step), named and worded for why it is late.
fn finding(cx: &Ctx<'_>, late: &Late) -> Option<Finding> {
    let n_steps = cx.all_steps.len().max(1) as f64;
    let cost_late = late.cost_ns.iter().sum::<i64>() as f64 / late.cost_ns.len().max(1) as f64;
    // Ranked by the mean over every step (a straggler in 2 of 10 steps saves less).
    let saving = late.cost_ns.iter().sum::<i64>() as f64 / n_steps;
    // The other ranks' exposed wait, each, over the late steps.
    // Each rank's exposed wait in each late step, gathered in one pass over the steps (a rank's
    // first place in a step counts): never a scan of the step's ranks per rank.
    let late_ranks: BTreeSet<u32> = late.ranks.iter().copied().collect();
    let late_steps: BTreeSet<u32> = late.steps.iter().copied().collect();
    let mut waited: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for w in cx.a.waits.iter().filter(|w| late_steps.contains(&w.step)) {
        let mut seen = BTreeSet::new();
        for (k, &r) in w.ranks.iter().enumerate() {
            if let (true, Some(&e)) = (seen.insert(r), w.exposed_wait_ns.get(k)) {
                waited.entry(r).or_default().push(e as f64);
            }
        }
    }
    let mut other_waits: Vec<f64> = Vec::new();
    for r in cx.ranks.iter().filter(|r| !late_ranks.contains(r)) {
        if let Some(v) = waited.get(r).filter(|v| !v.is_empty()) {
            other_waits.push(v.iter().sum::<f64>() / v.len() as f64);
        }
    }
    let rank = late.ranks[0];
    let cpu = cx.is_cpu(rank);
    let why = classify(cx, rank, &late.cause_steps, cost_late);
    let who = ranks_word(&late.ranks);
    let steps_said = format!("{} of {} steps", late.steps.len(), cx.all_steps.len().max(late.spread_steps));
    // One late rank or a late group: the sentences agree in number.
    let group = late.ranks.len() > 1;
    let (it, arrives) = if group { ("them", "arrive") } else { ("it", "arrives") };
    // The verbs the late rank(s) take: "rank 2 stalls", "ranks 1 and 4 stall".
    let (is, stalls, does, its) =
        if group { ("are", "stall", "do", "their") } else { ("is", "stalls", "does", "its") };
    // The others' exposed wait is all of theirs in these steps; where it is more than twice
    // what the late rank costs the step, most of it is not for this rank (a sharded job's
    // gathers waiting on each other, a loaded host): said as the collectives' wait, with the
    // part that is this rank's.
    let least_wait = other_waits.iter().copied().fold(f64::INFINITY, f64::min);
    let waited = if least_wait.is_finite() && least_wait > 2.0 * cost_late.max(1.0) {
        format!(
            "the other ranks each wait {} per step at the collectives ({steps_said}), {} of it for {it}",
            dur_range(other_waits.clone()),
            dur(cost_late)
        )
    } else {
        format!("the other ranks each wait {} per step for {it} ({steps_said})", dur_range(other_waits.clone()))
    };
    let mut evidence = Evidence::from([
        (K::OthersExposedWaitNsMax, other_waits.iter().copied().fold(0.0, f64::max)),
        (K::OthersExposedWaitNsMin, other_waits.iter().copied().fold(f64::INFINITY, f64::min)),
        (K::CostNsPerLateStep, cost_late),
        (K::LateSteps, late.steps.len() as f64),
        (K::Consistency, late.steps.len() as f64 / late.spread_steps.max(1) as f64),
    ]);
    if !evidence.or_zero(K::OthersExposedWaitNsMin).is_finite() {
        evidence.insert(K::OthersExposedWaitNsMin, 0.0);
    }
    let others_fix = if group {
        "The other ranks need no tuning: their time in the collectives is waiting for these ranks, not communication to overlap."
    } else {
        "The other ranks need no tuning: their time in the collectives is waiting for this rank, not communication to overlap."
    };
    let say = Say { who, waited, others_fix, cpu, group, is, stalls, does, its, arrives };
    let (id, message, fix, loc) = match &why {
        Why::Input { data } => words::input(&say, &mut evidence, data),
        Why::Compute { compute, loc, same_work: Some(opt), typical, inputs, .. } => words::slow_device(&say, &mut evidence, compute, loc, opt, typical, inputs),
        Why::Compute { compute, loc, same_work: None, typical, inputs, extra } => words::more_work(&say, &mut evidence, compute, loc, typical, inputs, extra),
        Why::Stall { loc } => words::stall(&say, &mut evidence, loc),
        Why::OpStall { op, loc } => words::op_stall(&say, &mut evidence, op, loc),
        Why::Sync { loc } => words::sync(&say, loc),
        Why::LateStart { start, wall, first, before: None } => words::late_start(&say, &mut evidence, start, wall, first),
        Why::LateStart { start, first, before: Some(l), .. } => words::ended_late(&say, &mut evidence, start, l, *first),
        Why::Unknown { loc } => words::unknown(&say, loc),
    };
    let message = if late.cause_steps != late.steps {
        format!(
            "{message} The pause is in step{} {}, after {its} last collective there: the others wait for {it} at the next step's collectives.",
            if late.cause_steps.len() == 1 { "" } else { "s" },
            crate::words::rank_list(&late.cause_steps)
        )
    } else {
        message
    };
    let message = match chain_sentence(cx, &late.ranks) {
        Some(c) => format!("{message} {c}"),
        None => message,
    };
    let mut symptoms = vec![FindingId::Straggler];
    if other_waits.iter().any(|&w| w > cx.th.exposed_comm_ratio * cx.step_ns) {
        symptoms.push(FindingId::ExposedWait);
    }
    Some(Finding {
        id,
        severity: severity_for(saving, cx.step_ns),
        message,
        fix,
        ranks: late.ranks.clone(),
        steps: late.steps.clone(),
        evidence,
        quotes: Vec::new(),
        quotes_total: 0,
        symptoms,
        location: loc,
        impact_ns: saving as i64,
    })
}

/// At most this many edges of the chain are said; the rest are counted.
const CHAIN_SAID: usize = 6;

/// "The delay travels through the groups: 3 → 2 (tensor-parallel group `2`, 150 ms per step),
/// 2 → 0 (data-parallel group `3`, 145 ms) …; ranks 0, 1 and 2 only inherit it." — when the
/// chain of waits ([`crate::analyze::chain`]) starts at these ranks and goes through more than
/// one group (with one group, "the others wait for it" says it all).
fn chain_sentence(cx: &Ctx<'_>, ranks: &[u32]) -> Option<String> {
    let c = cx.a.wait_chain.as_ref()?;
    if c.origins != ranks {
        return None;
    }
    let groups: BTreeSet<&str> = c.edges.iter().map(|e| e.group.as_str()).collect();
    if groups.len() < 2 {
        return None;
    }
    let floor = 0.05 * cx.step_ns;
    let shown: Vec<String> = c
        .edges
        .iter()
        .filter(|e| e.wait_ns as f64 >= floor)
        .take(CHAIN_SAID)
        .map(|e| format!("{} → {} ({} group `{}`, {} per step)", e.from, e.to, e.role.adjective(), e.group, dur(e.wait_ns as f64)))
        .collect();
    if shown.is_empty() {
        return None;
    }
    let more = c.edges.iter().filter(|e| e.wait_ns as f64 >= floor).count().saturating_sub(CHAIN_SAID);
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    let who = rank_list(&c.inherited);
    let (they, verb) = if c.inherited.len() == 1 { ("rank", "inherits") } else { ("ranks", "inherit") };
    Some(format!("The delay travels through the groups: {}{more}; {they} {who} only {verb} it.", shown.join(", ")))
}
