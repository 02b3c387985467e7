//! Waiting first: the ranks the others waited for, named for why they are late (their
//! DataLoader, more compute, time in an annotation with no operator running), or a late rank
//! that changes from step to step.

use super::*;

/// A consistent late group.
pub(super) struct Late {
    pub(super) ranks: Vec<u32>,
    /// Steps (with a measurable spread) in which the group was late.
    steps: Vec<u32>,
    /// Steps with a measurable spread.
    spread_steps: usize,
    /// Per step the group was late: what it cost the step.
    cost_ns: Vec<i64>,
}

pub(super) fn late_ranks(cx: &Ctx<'_>) -> Option<Late> {
    let waits = &cx.a.waits;
    // A step counts as late only when its lateness costs the step something worth a look (the
    // findings' floor: 1% of the step): a rank last by 0.2 ms in a 50 ms step is not late, and
    // counted so it turned a rank that is last in 2 of 4 steps into a consistent one.
    let floor = cx.floor_ns();
    let spread: Vec<&StepWaits> =
        waits.iter().filter(|w| !w.late.is_empty() && w.cost_ns > 0 && w.cost_ns as f64 >= floor).collect();
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
    let n_steps = cx.all_steps.len().max(spread.len());
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
    if ranks.is_empty() || ranks.len() * 2 > cx.ranks.len() {
        return None;
    }
    let mut steps = Vec::new();
    let mut cost = Vec::new();
    let group: BTreeSet<u32> = ranks.iter().copied().collect();
    for w in waits {
        if w.late.iter().any(|r| group.contains(r)) {
            let c = attribution::late_cost(&w.ranks, &w.exposed_wait_ns, &ranks);
            if c > 0 && c as f64 >= floor {
                steps.push(w.step);
                cost.push(c);
            }
        }
    }
    // The group itself must cost the steps, consistently: a rank that was among the last only
    // with another one (the two of them late together, the other the later) costs nothing
    // alone in those steps, and a finding about it alone would claim steps it did not cost.
    if steps.is_empty() || steps.len() < need {
        return None;
    }
    Some(Late { ranks, steps, spread_steps: spread.len(), cost_ns: cost })
}

/// What the late rank's excess is made of.
pub(super) enum Cause {
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
    },
    Unknown {
        loc: Option<Located>,
    },
}

pub(super) fn classify(cx: &Ctx<'_>, rank: u32, steps: &[u32], excess: f64) -> Cause {
    let cmp = Compare { rank, steps, ranks: &cx.ranks };
    let data = cmp.phase(&cx.a.phases, Phase::DataLoading);
    let compute = cmp.step_figure(&cx.per_step, |r| r.compute_ns);
    let loc = attribution::locate(&cmp, &cx.a.regions);
    let half = 0.5 * excess;
    if data.excess() >= half {
        return Cause::Input { data };
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
    let same_work = match typical {
        Some((work, opt_typical)) => (rc > 1.0
            && (work <= 1.0 + 0.5 * (rc - 1.0) || opt_typical >= 1.0 + 0.5 * (work - 1.0)))
            .then_some(opt.clone()),
        None => {
            let ro = if opt.others_ns > 0.0 { opt.mine_ns / opt.others_ns } else { 1.0 };
            (opt.others_ns > 0.01 * compute.others_ns && rc > 1.0 && ro >= 1.0 + 0.5 * (rc - 1.0))
                .then_some(opt)
        }
    };
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
            return Cause::OpStall { op: t.clone(), loc };
        }
    }
    if compute.excess() >= half {
        return Cause::Compute { compute, loc, same_work, typical };
    }
    let late_start = || {
        let start = start_skew(cx, &cmp);
        (start.excess() >= half).then(|| Cause::LateStart {
            start,
            wall: cmp.step_figure(&cx.per_step, |r| r.wall_ns),
            first: cx.all_steps.first().is_some_and(|f| steps.contains(f)),
        })
    };
    let Some(l) = loc else { return late_start().unwrap_or(Cause::Unknown { loc: None }) };
    let here = l.path.last().map_or(0.0, |x| x.1.excess());
    if l.phase == Phase::DataLoading && here >= half {
        return Cause::Input { data: l.path.last().map(|x| x.1.clone()).unwrap_or_default() };
    }
    let share = |d: &Diff| here > 0.0 && d.excess() >= 0.5 * here;
    if here >= half && share(&l.free) {
        return Cause::Stall { loc: l };
    }
    if here >= half && share(&l.sync) {
        return Cause::Sync { loc: l };
    }
    if here >= half && (share(&l.ops) || share(&l.device)) {
        return Cause::Compute { compute, loc: Some(l), same_work, typical };
    }
    late_start().unwrap_or(Cause::Unknown { loc: Some(l) })
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

pub(super) fn location(l: &Located) -> Location {
    let last = l.path.last().map(|x| x.1.clone()).unwrap_or_default();
    Location {
        regions: l.path.iter().map(|x| x.0.clone()).collect(),
        phase: l.phase,
        rank_ns: last.mine_ns as i64,
        others_ns: last.others_ns as i64,
        free_excess_ns: l.free.excess() as i64,
        ops_excess_ns: l.ops.excess() as i64,
        sync_excess_ns: l.sync.excess() as i64,
        device_excess_ns: l.device.excess() as i64,
    }
}

/// "`straggler_sleep` inside `forward`", or "the step outside any annotation".
pub(super) fn where_words(l: &Located) -> String {
    let names: Vec<&str> = l.path.iter().map(|x| x.0.as_str()).filter(|n| *n != "ProfilerStep").collect();
    match names.as_slice() {
        [] => "the step, outside any annotation,".into(),
        [one] => format!("`{one}`"),
        [.., parent, last] => format!("`{last}` inside `{parent}`"),
    }
}

pub(super) fn late_rank_finding(cx: &Ctx<'_>, late: &Late) -> Option<Finding> {
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
    let cause = classify(cx, rank, &late.steps, cost_late);
    let who = ranks_word(&late.ranks);
    let steps_said = format!("{} of {} steps", late.steps.len(), cx.all_steps.len().max(late.spread_steps));
    // One late rank or a late group: the sentences agree in number.
    let group = late.ranks.len() > 1;
    let (it, arrives) = if group { ("them", "arrive") } else { ("it", "arrives") };
    // The verbs the late rank(s) take: "rank 2 stalls", "ranks 1 and 4 stall".
    let (is, stalls, does, its) =
        if group { ("are", "stall", "do", "their") } else { ("is", "stalls", "does", "its") };
    let waited = format!(
        "the other ranks each wait {} per step for {it} ({steps_said})",
        dur_range(other_waits.clone())
    );
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
    let (id, message, fix, loc) = match &cause {
        Cause::Input { data } => {
            evidence.insert(K::DataLoadingNs, data.mine_ns);
            evidence.insert(K::OthersDataLoadingNs, data.others_ns);
            let ratio = if data.others_ns > 0.0 { data.mine_ns / data.others_ns } else { f64::INFINITY };
            let times = if ratio.is_finite() { format!(" ({ratio:.1}×)") } else { String::new() };
            (
                FindingId::InputBound,
                format!(
                    "{who} {is} input-bound: {its} data loading takes {} per step against {} on the other ranks{times}, so {waited}.",
                    dur(data.mine_ns),
                    dur(data.others_ns)
                ),
                format!(
                    "Speed up {}'s input pipeline: more DataLoader workers (`num_workers`, `persistent_workers`, `prefetch_factor`), move decoding/augmentation off the training process, and check its storage or data shard (a slower disk, a remote read, larger samples). {others_fix}",
                    who.to_lowercase()
                ),
                None,
            )
        }
        Cause::Compute { compute, loc, same_work: Some(opt), typical } => {
            evidence.insert(K::ComputeNs, compute.mine_ns);
            evidence.insert(K::OthersComputeNs, compute.others_ns);
            evidence.insert(K::OptimizerNs, opt.mine_ns);
            evidence.insert(K::OthersOptimizerNs, opt.others_ns);
            let ratio = if compute.others_ns > 0.0 { compute.mine_ns / compute.others_ns } else { 0.0 };
            let ropt = if opt.others_ns > 0.0 { opt.mine_ns / opt.others_ns } else { 0.0 };
            let device = if cpu { "CPU" } else { "GPU" };
            let why = match typical {
                Some((work, opt_typical)) => {
                    evidence.insert(K::TypicalOpRatio, *work);
                    evidence.insert(K::TypicalOptimizerOpRatio, *opt_typical);
                    if *work <= 1.0 + 0.5 * (ratio - 1.0) {
                        format!(
                            "; its operators typically run as long as the same operators elsewhere ({work:.2}× in forward and backward, {opt_typical:.2}× in the optimizer), so the time is lost in bursts: the process waits for a core"
                        )
                    } else {
                        format!(
                            "; the same operators typically take {work:.2}× as long in forward and backward and {opt_typical:.2}× in the optimizer, whose work does not depend on the batch"
                        )
                    }
                }
                None => format!(
                    ", and even {its} optimizer step, whose work does not depend on the batch, takes {ropt:.2}× as long"
                ),
            };
            (
                FindingId::SlowDevice,
                format!(
                    "{who} {is} slower at the same work: {} of {device} compute per step against {} on the other ranks ({ratio:.2}×){why}; so {waited}.",
                    dur(compute.mine_ns),
                    dur(compute.others_ns)
                ),
                format!(
                    "Inspect {}'s {}: {}. Rebalancing data will not help: the work is the same. {others_fix}",
                    who.to_lowercase(),
                    if cpu { "host" } else { "GPU" },
                    if cpu { "other processes on its cores, CPU frequency scaling or throttling, a different CPU model, NUMA placement" } else { "clocks and temperature (`nvidia-smi -q -d CLOCK,PERFORMANCE,TEMPERATURE`), power capping, ECC or XID errors, other processes on the GPU, a different GPU model or PCIe/NVLink placement" }
                ),
                loc.as_ref().map(location),
            )
        }
        Cause::Compute { compute, loc, same_work: None, typical } => {
            evidence.insert(K::ComputeNs, compute.mine_ns);
            evidence.insert(K::OthersComputeNs, compute.others_ns);
            let ratio = if compute.others_ns > 0.0 { compute.mine_ns / compute.others_ns } else { 0.0 };
            let mut place = loc
                .as_ref()
                .filter(|l| l.path.len() > 1)
                .map(|l| format!(", most of it in {}", where_words(l)))
                .unwrap_or_default();
            if let Some((work, opt_typical)) = typical {
                evidence.insert(K::TypicalOpRatio, *work);
                evidence.insert(K::TypicalOptimizerOpRatio, *opt_typical);
                place.push_str(&format!(
                    "; the same operators typically take {work:.2}× as long in forward and backward but {opt_typical:.2}× in the optimizer, whose work does not depend on the batch: larger inputs, not a slower host"
                ));
            }
            let device = if cpu { "CPU" } else { "GPU" };
            (
                FindingId::ComputeImbalance,
                format!(
                    "{who} {does} more compute than the others: {} of {device} compute per step against {} on the other ranks ({ratio:.2}×){place}, so {waited}.",
                    dur(compute.mine_ns),
                    dur(compute.others_ns)
                ),
                format!(
                    "Give every rank the same work: equal per-rank batch sizes and sequence lengths (check the sampler, padding or bucketing by length), even sharding of embeddings or experts, no rank-dependent code paths. If {} runs the same shapes as the others, its {} is slower: {}. {others_fix}",
                    who.to_lowercase(),
                    if cpu { "host" } else { "device" },
                    if cpu { "look for other processes on its cores, CPU frequency limits or a different CPU model" } else { "check its clocks and temperature (nvidia-smi -q -d CLOCK,PERFORMANCE), ECC errors, and other processes on that GPU" }
                ),
                loc.as_ref().map(location),
            )
        }
        Cause::Stall { loc } => {
            let place = where_words(loc);
            let last = loc.path.last().map(|x| x.1.clone()).unwrap_or_default();
            evidence.insert(K::StallNs, loc.free.mine_ns);
            evidence.insert(K::OthersStallNs, loc.free.others_ns);
            (
                FindingId::HostStall,
                format!(
                    "{who} {stalls} on the host: {} per step in {place} with no operator running, against {} on the other ranks ({} vs {} in the region), so {waited}.",
                    dur(loc.free.mine_ns),
                    dur(loc.free.others_ns),
                    dur(last.mine_ns),
                    dur(last.others_ns)
                ),
                format!(
                    "Find what {} {does} in {place} that the others do not: a sleep, blocking I/O (logging, checkpoint, file or network reads), a lock, garbage collection, or a rank-specific branch; move it out of the step or make it asynchronous. {others_fix}",
                    who.to_lowercase()
                ),
                Some(location(loc)),
            )
        }
        Cause::OpStall { op, loc } => {
            let region =
                loc.as_ref().and_then(|l| l.path.last()).map(|x| x.0.clone()).filter(|n| n != "ProfilerStep");
            let place = match &region {
                Some(r) => format!("the operator `{}` inside `{r}`", op.name),
                None => format!("the operator `{}` ({})", op.name, op.phase.words()),
            };
            evidence.insert(K::StallNs, op.own_rank_ns as f64);
            evidence.insert(K::OthersStallNs, op.own_others_ns as f64);
            evidence.insert(K::OperatorNs, op.rank_ns as f64);
            evidence.insert(K::OthersOperatorNs, op.others_ns as f64);
            let mut regions: Vec<String> = loc
                .as_ref()
                .map(|l| l.path.iter().map(|x| x.0.clone()).collect())
                .unwrap_or_else(|| vec!["ProfilerStep".to_string()]);
            regions.push(op.name.clone());
            let own = op.own_rank_ns - op.own_others_ns;
            (
                FindingId::HostStall,
                format!(
                    "{who} {stalls} on the host: {} per step inside {place} with no operator running (none of the operators it runs), against {} on the other ranks ({} vs {} for the whole operator), so {waited}.",
                    dur(op.own_rank_ns as f64),
                    dur(op.own_others_ns as f64),
                    dur(op.rank_ns as f64),
                    dur(op.others_ns as f64)
                ),
                format!(
                    "Find what {} {does} inside `{}` that the others do not: a hook on that module or tensor (forward, backward or gradient hooks run inside the autograd node), a sleep, blocking I/O, a lock, garbage collection, or a rank-specific branch; move it out of the step or make it asynchronous. {others_fix}",
                    who.to_lowercase(),
                    op.name
                ),
                Some(Location {
                    regions,
                    phase: op.phase,
                    rank_ns: op.rank_ns,
                    others_ns: op.others_ns,
                    free_excess_ns: own,
                    ops_excess_ns: (op.rank_ns - op.others_ns - own).max(0),
                    sync_excess_ns: 0,
                    device_excess_ns: 0,
                }),
            )
        }
        Cause::Sync { loc } => {
            let place = where_words(loc);
            (
                FindingId::Straggler,
                format!(
                    "{who} {arrives} late at the collectives: {} more per step blocked in host synchronization in {place} than the other ranks ({its} own device finishes later), so {waited}.",
                    dur(loc.sync.excess())
                ),
                format!(
                    "Look at what {}'s device runs before that synchronization: compare its kernels with another rank's in the timeline; remove the synchronization if it is not needed. {others_fix}",
                    who.to_lowercase()
                ),
                Some(location(loc)),
            )
        }
        Cause::LateStart { start, wall, first } => {
            evidence.insert(K::StartSkewNs, start.excess());
            evidence.insert(K::StepWallNs, wall.mine_ns);
            evidence.insert(K::OthersStepWallNs, wall.others_ns);
            let inside = if wall.excess() <= 0.0 {
                format!(
                    "no slower inside it ({} per step against {})",
                    dur(wall.mine_ns),
                    dur(wall.others_ns)
                )
            } else {
                format!(
                    "little slower inside it ({} per step against {})",
                    dur(wall.mine_ns),
                    dur(wall.others_ns)
                )
            };
            let before = if *first {
                " The late steps include the first profiled one: what delays it ran before the trace begins."
            } else {
                ""
            };
            (
                FindingId::Straggler,
                format!(
                    "{who} {arrives} last at the collectives because {} {starts} the step {} after the other ranks, and {is} {inside}: the delay comes before the step begins, and {waited}.{before}",
                    if group { "they" } else { "it" },
                    dur(start.excess()),
                    starts = if group { "start" } else { "starts" },
                ),
                format!(
                    "Look at what {} {does} between steps, or before the first profiled one: the end of the previous step (optimizer, logging, checkpointing, evaluation), loading the next batch where it runs outside the step, garbage collection. Profile more steps (`schedule(wait=…, warmup=…, active=N)`) so that the cause falls inside the trace. {others_fix}",
                    who.to_lowercase()
                ),
                None,
            )
        }
        Cause::Unknown { loc } => {
            let hint = loc
                .as_ref()
                .and_then(|l| {
                    let last = l.path.last()?;
                    (l.path.len() > 1).then(|| {
                        format!(
                            " The largest difference is in {} ({} vs {} per step).",
                            where_words(l),
                            dur(last.1.mine_ns),
                            dur(last.1.others_ns)
                        )
                    })
                })
                .unwrap_or_default();
            (
                FindingId::Straggler,
                format!("{who} {arrives} last at the collectives, and {waited}.{hint}"),
                format!(
                    "Compare {}'s step with another rank's in the timeline (same step, aligned clocks) to find what it does longer; {}. {others_fix}",
                    who.to_lowercase(),
                    if cpu { "look for other processes on its host or a slower CPU" } else { "check its host and GPU (clocks, other processes), its input and its batch" }
                ),
                loc.as_ref().map(location),
            )
        }
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
        symptoms,
        location: loc,
        impact_ns: saving as i64,
    })
}

pub(super) fn arrival_jitter(cx: &Ctx<'_>) -> Option<Finding> {
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
    let work_moves = with_work.len() >= 2 && cost_work as f64 >= 2.0 / 3.0 * cost_all as f64;
    let moves = if work_moves {
        format!(
            " In {} of these {} steps, which hold {:.0}% of the time lost, the last to arrive spent at least {MORE_WORK}x the others' time in forward and backward in that step: the work moves between the ranks from step to step.",
            with_work.len(),
            waits.len(),
            100.0 * cost_work as f64 / cost_all.max(1) as f64
        )
    } else {
        String::new()
    };
    let balance = if work_moves {
        "If the batches differ in size from step to step (variable sequence lengths, dynamic batching), balance the work per step across ranks: batches of equal tokens rather than equal samples (bucket or sort samples by length, pack sequences). "
    } else {
        ""
    };
    Some(Finding {
        id: FindingId::ArrivalJitter,
        severity: severity_for(saving, cx.step_ns).min(Severity::Medium),
        message: format!(
            "The ranks wait for each other at the collectives ({} per step of exposed wait, each), but the last to arrive changes from step to step (rank {}): no single straggler.{moves}",
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
        evidence: Evidence::from([(K::CostNsPerStep, saving)]),
        symptoms: vec![FindingId::ExposedWait],
        location: None,
        impact_ns: saving as i64,
    })
}
