//! A cause that comes back in one rank, amid lateness that is noise: its data loader stalls, or
//! its host pauses with no operator running (a garbage collection, a periodic save), in some
//! steps only. Noise does not come back in the same rank and the same figure; a stall every N
//! steps does, however large the noise of the other steps (docs/metrics.md, "Findings", 1).

use super::super::prelude::*;
use crate::analyze::attribution::{self, StepWaits};

/// The rank found, and for a pause that makes it late in the step after the one it is in, the
/// steps that hold the pause.
pub(super) struct Repeated {
    pub rank: u32,
    pub carried: Option<Vec<u32>>,
}

/// What comes back: the rank's data loading (a loader stalls at the start of its step, so the
/// rank is late in that step), or its host time with no operator running (a pause anywhere in
/// its step: late in that step or, after the step's last collective, in the next).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Figure {
    Input,
    Pause,
}

/// A rank whose data loading, else whose operator-free host time, exceeds the other ranks'
/// median in two steps or more by at least half of what its lateness costs the step it makes
/// late and by more than twice any other rank's, or its own, excess in any other step.
pub(super) fn repeated(cx: &Ctx<'_>, spread: &[&StepWaits]) -> Option<Repeated> {
    repeated_in(cx, spread, Figure::Input).or_else(|| repeated_in(cx, spread, Figure::Pause))
}

fn repeated_in(cx: &Ctx<'_>, spread: &[&StepWaits], figure: Figure) -> Option<Repeated> {
    let mut value: BTreeMap<(u32, u32), i64> = BTreeMap::new();
    match figure {
        Figure::Input => {
            for p in cx.a.phases.iter().filter(|p| p.phase == Phase::DataLoading) {
                *value.entry((p.step, p.rank)).or_default() += p.active_ns;
            }
        }
        // The top regions (the step marker's) hold the step's operator-free time, their
        // children's included; collective waits are out of it.
        Figure::Pause => {
            for r in cx.a.regions.iter().filter(|r| r.parent.is_empty()) {
                *value.entry((r.step, r.rank)).or_default() += r.free_ns;
            }
        }
    }
    if value.is_empty() {
        return None;
    }
    // Per step, each rank's excess over the median of the others (one sort per step, each
    // rank's own value skipped in it: linear in the ranks).
    let mut excess: BTreeMap<(u32, u32), f64> = BTreeMap::new();
    for &s in &cx.all_steps {
        let of = |r: u32| value.get(&(s, r)).copied().unwrap_or(0);
        let mut sorted: Vec<i64> = cx.ranks.iter().map(|&r| of(r)).collect();
        sorted.sort_unstable();
        if sorted.len() < 2 {
            continue;
        }
        for &r in &cx.ranks {
            let mine = of(r);
            excess.insert((s, r), mine as f64 - crate::analyze::stats::median_without(&sorted, mine, 0));
        }
    }
    let mut ranked: Vec<(f64, (u32, u32))> = excess.iter().map(|(&k, &x)| (x, k)).collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
    let floor = cx.floor_ns();
    let before = |s: u32| cx.all_steps.iter().copied().filter(|&x| x < s).max();
    let last = cx.all_steps.iter().copied().max();
    let mut best: Option<(u32, f64, Vec<u32>, bool)> = None;
    for &r in &cx.ranks {
        // Per late step of the rank, the step that holds its excess: that step, else (a pause)
        // the one before it.
        let mut steps: Vec<u32> = Vec::new();
        let mut carried = false;
        for w in spread.iter().filter(|w| w.late.contains(&r)) {
            let cost = attribution::late_cost(&w.ranks, &w.exposed_wait_ns, &[r]) as f64;
            let holds = |s: u32| {
                let x = excess.get(&(s, r)).copied().unwrap_or(0.0);
                cost > 0.0 && x >= 0.5 * cost && x >= floor
            };
            let candidates = match figure {
                Figure::Input => [Some(w.step), None],
                Figure::Pause => [Some(w.step), before(w.step)],
            };
            if let Some(s) = candidates.into_iter().flatten().find(|&s| holds(s)) {
                carried |= s != w.step;
                steps.push(s);
            }
        }
        steps.sort_unstable();
        steps.dedup();
        if steps.len() < 2 {
            continue;
        }
        let least = steps.iter().filter_map(|s| excess.get(&(*s, r))).copied().fold(f64::INFINITY, f64::min);
        // The largest excess of any other (step, rank): the first of the ranking not in these
        // steps of this rank (at most `steps.len()` + 1 entries skipped). A pause in the last
        // profiled step makes its rank late after the trace ends: it says nothing either way.
        let skipped = |s: u32, q: u32| q == r && (steps.contains(&s) || (figure == Figure::Pause && Some(s) == last));
        let elsewhere = ranked
            .iter()
            .find(|(_, (s, q))| !skipped(*s, *q))
            .map_or(0.0, |x| x.0.max(0.0));
        if least > 2.0 * elsewhere && best.as_ref().is_none_or(|b| least > b.1) {
            best = Some((r, least, steps, carried));
        }
    }
    best.map(|(rank, _, steps, carried)| Repeated { rank, carried: carried.then_some(steps) })
}
