//! Why a late rank is late: its excess against the other ranks, located (`analyze::attribution`
//! compares its regions with the others' median, same step, on active time, and descends from
//! `ProfilerStep` into the child that explains at least half of its parent's excess), and
//! classified (docs/metrics.md, "Findings", 1: input, an operator's own host time, more work
//! or the same work slower, a stall, a synchronization, a late start, or unknown).

use super::super::prelude::*;
use crate::analyze::attribution::{self, Compare, Diff, ExtraOps, Located};
use crate::analyze::breakdown::StepRank;

/// What the late rank's excess is made of.
pub(super) enum Why {
    Input {
        data: Diff,
    },
    /// More time on the same work when `same_work` (its optimizer, whose work does not depend
    /// on the batch, is slower by as much), else more work.
    Compute {
        compute: Diff,
        loc: Option<Located>,
        same_work: Option<Diff>,
        /// CPU ranks: how long its operators typically take against the same operators
        /// elsewhere, in the batch-dependent work and in the optimizer
        /// ([`attribution::op_speed`]).
        typical: Option<(f64, f64)>,
        /// What the recorded input shapes say ([`Inputs`]), when they say it.
        inputs: Option<Inputs>,
        /// CPU ranks: operator instances it runs and the others do not, when they hold at least
        /// half of the compute excess: more work, whatever the shared instances' speed.
        extra: Option<ExtraOps>,
    },
    Stall {
        loc: Located,
    },
    /// Time inside one operator that runs others (an autograd node around its hooks), with
    /// none of them running: host work the region comparison cannot see, since an operator
    /// covers its time.
    OpStall {
        op: attribution::OpExcess,
        loc: Option<Located>,
    },
    Sync {
        loc: Located,
    },
    /// Late before the step begins: it starts its steps later than the others (aligned
    /// clocks) by at least half of what they wait for, and nothing inside the step explains
    /// the rest. `first`: the late steps include the first profiled one, whose before is not
    /// in the trace.
    LateStart {
        start: Diff,
        wall: Diff,
        first: bool,
        /// Where it comes from, when the rank's step before each late step holds it: a region
        /// of that step whose excess over the others' same step is at least half of the late
        /// start (a checkpoint written at the end of a step delays the next one's start).
        before: Option<Located>,
    },
    Unknown {
        loc: Option<Located>,
    },
}

/// The late rank's operators' recorded input shapes against the others' (its forward and
/// backward operator instances shared with them, [`attribution::OpSpeed::same_inputs`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Inputs {
    pub compared: u32,
    pub same: u32,
    /// Nine in ten or more on the others' shapes (else half or fewer).
    pub same_inputs: bool,
}

pub(super) fn classify(cx: &Ctx<'_>, rank: u32, steps: &[u32], excess: f64) -> Why {
    let cmp = Compare { rank, steps, ranks: &cx.ranks };
    let data = cmp.phase(&cx.a.phases, Phase::DataLoading);
    let compute = cmp.step_figure(&cx.per_step, |r| r.compute_ns);
    let loc = attribution::locate(&cmp, &cx.a.regions);
    let half = 0.5 * excess;
    if data.excess() >= half {
        return Why::Input { data };
    }
    // Same work on a slower device, or more work? The optimizer's work depends on the
    // parameters, not the batch: uneven batches leave it equal, a slower device (or host) slows
    // it as much as the rest.
    let opt = if cx.is_cpu(rank) {
        cmp.phase(&cx.a.phases, Phase::Optimizer)
    } else {
        cmp.phase_device(&cx.a.regions, Phase::Optimizer)
    };
    let rc = if compute.others_ns > 0.0 { compute.mine_ns / compute.others_ns } else { 1.0 };
    // On CPU ranks the phases' totals are what the host's scheduler gave each process: the rank
    // that computed longest is also the one it lets wait in its next phase, so its optimizer can
    // take twice as long with the same work. The same operators' typical durations
    // ([`attribution::op_speed`]: medians over the steps, a duration-weighted median over the
    // instances) are the robust comparison: more work makes the forward and backward operators
    // typically longer and leaves the optimizer's alone; a slower host makes both longer; time
    // lost to preemption leaves both typical durations as they are (the operators explain less
    // than half of the compute excess), which is the same work, done slower.
    let speed = |g: attribution::OpGroup| {
        cx.a.op_speed.iter().find(|o| o.rank == rank && o.group == g).map(|o| o.ratio)
    };
    let typical = if cx.is_cpu(rank) {
        speed(attribution::OpGroup::Work).zip(speed(attribution::OpGroup::Optimizer))
    } else {
        None
    };
    // Where the trace records input shapes (`record_shapes=True`), they say it directly: the
    // same operators on the same shapes are the same work, whatever the optimizer's timing (on
    // a host shared with other processes its few short operators are what preemption hits
    // hardest); on other shapes, other work. Timings decide only without shapes.
    let inputs = cx
        .a
        .op_speed
        .iter()
        .find(|o| o.rank == rank && o.group == attribution::OpGroup::Work)
        .and_then(|o| {
            o.same_inputs().map(|same_inputs| Inputs { compared: o.shapes_compared, same: o.shapes_same, same_inputs })
        });
    let same_work = match (inputs, typical) {
        (Some(i), _) => (i.same_inputs && rc > 1.0).then_some(opt.clone()),
        (None, typical) => match typical {
        Some((work, opt_typical)) => (rc > 1.0
            && (work <= 1.0 + 0.5 * (rc - 1.0) || opt_typical >= 1.0 + 0.5 * (work - 1.0)))
            .then_some(opt.clone()),
        None => {
            let ro = if opt.others_ns > 0.0 { opt.mine_ns / opt.others_ns } else { 1.0 };
            (opt.others_ns > 0.01 * compute.others_ns && rc > 1.0 && ro >= 1.0 + 0.5 * (rc - 1.0))
                .then_some(opt)
        }
        },
    };
    // Operator instances the others do not run (a forward computed again in backward, extra
    // passes) are more work too, even when every instance both run took as long and ran on the
    // same shapes: the same operators, more of them.
    let extra = cx
        .a
        .op_speed
        .iter()
        .find(|o| o.rank == rank && o.group == attribution::OpGroup::Work)
        .filter(|o| o.extra.matters(o.rank_ns))
        .map(|o| o.extra.clone())
        .filter(|x| cx.is_cpu(rank) && compute.excess() > 0.0 && x.ns as f64 >= 0.5 * compute.excess());
    let same_work = same_work.filter(|_| extra.is_none());
    // Operators in a region the others do not run at all (rank 0's evaluation, its metrics, a
    // checkpoint's serialization) are more work, whatever their timings say: no other rank
    // has that work to be compared with.
    let same_work = same_work.filter(|_| {
        !loc.as_ref().is_some_and(|l| alone_in(l).is_some() && l.ops.excess() >= 0.5 * compute.excess().max(0.0))
    });
    // One operator instance whose own time (none of the operators it runs running) carries
    // most of the excess, every step: a hook's host work inside an autograd node, a sleep in a
    // custom op. Checked before compute, which counts an operator's whole time.
    if cx.is_cpu(rank) {
        let top =
            cx.a.op_speed
                .iter()
                .filter(|o| o.rank == rank)
                .filter_map(|o| o.top.as_ref())
                .max_by_key(|t| t.own_rank_ns - t.own_others_ns);
        if let Some(t) = top.filter(|t| t.nests && (t.own_rank_ns - t.own_others_ns) as f64 >= half) {
            return Why::OpStall { op: t.clone(), loc };
        }
    }
    if compute.excess() >= half {
        // A located stall (a region with no operator running) larger than the compute excess
        // is the cause, and the compute excess beside it is not: on a shared host the rank
        // whose thread sleeps loses its core and computes in bursts after it.
        let stall = loc.as_ref().filter(|l| {
            let here = l.path.last().map_or(0.0, |x| x.1.excess());
            here >= half && l.free.excess() >= 0.5 * here && l.free.excess() > compute.excess()
        });
        if let Some(l) = stall {
            return Why::Stall { loc: l.clone() };
        }
        return Why::Compute { compute, loc, same_work, typical, inputs, extra };
    }
    let late_start = || {
        let start = start_skew(cx, &cmp);
        if start.excess() < half {
            return None;
        }
        // The step before each late step ends where the late one starts: what the rank did
        // there that the others did not is what delays it.
        let prev: Vec<u32> = steps
            .iter()
            .filter_map(|s| cx.all_steps.iter().copied().take_while(|p| p < s).last())
            .collect();
        let before = (!prev.is_empty())
            .then(|| attribution::locate(&Compare { rank, steps: &prev, ranks: &cx.ranks }, &cx.a.regions))
            .flatten()
            .filter(|l| l.path.len() > 1 && l.path.last().is_some_and(|x| x.1.excess() >= 0.5 * start.excess()));
        Some(Why::LateStart {
            start,
            wall: cmp.step_figure(&cx.per_step, |r| r.wall_ns),
            first: cx.all_steps.first().is_some_and(|f| steps.contains(f)),
            before,
        })
    };
    let Some(l) = loc else { return late_start().unwrap_or(Why::Unknown { loc: None }) };
    let here = l.path.last().map_or(0.0, |x| x.1.excess());
    if l.phase == Phase::DataLoading && here >= half {
        return Why::Input { data: l.path.last().map(|x| x.1.clone()).unwrap_or_default() };
    }
    let share = |d: &Diff| here > 0.0 && d.excess() >= 0.5 * here;
    if here >= half && share(&l.free) {
        return Why::Stall { loc: l };
    }
    if here >= half && share(&l.sync) {
        return Why::Sync { loc: l };
    }
    if here >= half && (share(&l.ops) || share(&l.device)) {
        return Why::Compute { compute, loc: Some(l), same_work, typical, inputs, extra };
    }
    late_start().unwrap_or(Why::Unknown { loc: Some(l) })
}

/// A region the others run for less than this share of the late rank's time in it are the
/// late rank's alone ([`alone_in`]).
const ALONE_SHARE: f64 = 0.1;

/// The located region, below the step, when the other ranks do not run it (their median time
/// in it at most [`ALONE_SHARE`] of the late rank's): work this rank does alone.
pub(super) fn alone_in(l: &Located) -> Option<&(String, Diff)> {
    let last = l.path.last().filter(|_| l.path.len() > 1)?;
    (last.1.mine_ns > 0.0 && last.1.others_ns <= ALONE_SHARE * last.1.mine_ns).then_some(last)
}

/// When `cmp.rank` starts its steps against the others, on aligned clocks: per step, each
/// rank's start less the step's earliest start (small numbers, exact in `f64`).
fn start_skew(cx: &Ctx<'_>, cmp: &Compare<'_>) -> Diff {
    let offset = |rank: u32| cx.a.alignment.iter().find(|x| x.rank == rank).map_or(0, |x| x.offset_ns);
    let offsets: BTreeMap<u32, i64> = cx.ranks.iter().map(|&r| (r, offset(r))).collect();
    let mut v = attribution::ByRankStep::new();
    for (&s, rows) in &cx.per_step {
        let at = |r: &StepRank| r.start_ns.saturating_sub(offsets.get(&r.rank).copied().unwrap_or(0));
        let Some(first) = rows.iter().map(|r| at(r)).min() else { continue };
        for r in rows {
            v.entry((r.rank, s)).or_insert_with(|| at(r) - first);
        }
    }
    cmp.diff_of(&v)
}
