//! A late rank's finding, worded for why it is late: one function per classification
//! ([`super::classify::Why`]), each adding its figures to the evidence.

use super::super::prelude::*;
use super::classify::Inputs;
use crate::analyze::attribution::{Diff, ExtraOps, Located, OpExcess};

/// Id, message, fix and location of a late rank's finding.
pub(super) type Worded = (FindingId, String, String, Option<Location>);

/// What every wording of a late rank says the same way: who, in the right number, and what it
/// costs the others.
pub(super) struct Say {
    /// "Rank 2", "Ranks 1 and 4".
    pub(super) who: String,
    /// "the other ranks each wait 365–561 ms per step for it (4 of 4 steps)".
    pub(super) waited: String,
    /// That the other ranks need no tuning.
    pub(super) others_fix: &'static str,
    /// The late rank's metrics come from the CPU (no GPU advice then).
    pub(super) cpu: bool,
    /// More than one late rank: the verbs agree in number.
    pub(super) group: bool,
    pub(super) is: &'static str,
    pub(super) stalls: &'static str,
    pub(super) does: &'static str,
    pub(super) its: &'static str,
    pub(super) arrives: &'static str,
}

/// The late rank loads its input longer than the others (its DataLoader).
pub(super) fn input(s: &Say, evidence: &mut Evidence, data: &Diff) -> Worded {
    let who = &s.who;
    let waited = &s.waited;
    let others_fix = s.others_fix;
    let is = s.is;
    let its = s.its;
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

/// Operators typically this much slower than elsewhere, or less, run "as long as elsewhere":
/// the spread of one operator's median between ranks of a healthy job.
const AS_LONG: f64 = 1.1;

/// The late rank does the same work slower: its optimizer, whose work does not depend on the
/// batch, is slower by as much (or, on CPU ranks, its operators typically run as long as
/// elsewhere and the time is lost in bursts).
pub(super) fn slow_device(
    s: &Say,
    evidence: &mut Evidence,
    compute: &Diff,
    loc: &Option<Located>,
    opt: &Diff,
    typical: &Option<(f64, f64)>,
    inputs: &Option<Inputs>,
) -> Worded {
    let who = &s.who;
    let waited = &s.waited;
    let others_fix = s.others_fix;
    let cpu = s.cpu;
    let is = s.is;
    let its = s.its;
    evidence.insert(K::ComputeNs, compute.mine_ns);
    evidence.insert(K::OthersComputeNs, compute.others_ns);
    evidence.insert(K::OptimizerNs, opt.mine_ns);
    evidence.insert(K::OthersOptimizerNs, opt.others_ns);
    let ratio = if compute.others_ns > 0.0 { compute.mine_ns / compute.others_ns } else { 0.0 };
    let ropt = if opt.others_ns > 0.0 { opt.mine_ns / opt.others_ns } else { 0.0 };
    let device = if cpu { "CPU" } else { "GPU" };
    let shapes = inputs.map(|i| {
        evidence.insert(K::ShapesCompared, f64::from(i.compared));
        evidence.insert(K::ShapesSame, f64::from(i.same));
        format!(
            "; {} of {} of its operators whose input shapes the trace records ran on the same shapes as on the other ranks",
            i.same, i.compared
        )
    });
    let why = match typical {
        Some((work, opt_typical)) if shapes.is_some() => {
            evidence.insert(K::TypicalOpRatio, *work);
            evidence.insert(K::TypicalOptimizerOpRatio, *opt_typical);
            if *work < AS_LONG {
                format!(
                    "{}, and they typically run as long as elsewhere ({work:.2}×), so the time is lost in bursts: the process waits for a core",
                    shapes.unwrap_or_default()
                )
            } else if *work <= 1.0 + 0.5 * (ratio - 1.0) {
                format!(
                    "{}, and typically take {work:.2}× as long, less than half of its excess: the rest is lost in bursts, the process waiting for a core",
                    shapes.unwrap_or_default()
                )
            } else {
                format!("{}, and typically take {work:.2}× as long", shapes.unwrap_or_default())
            }
        }
        _ if shapes.is_some() => shapes.unwrap_or_default(),
        Some((work, opt_typical)) => {
            evidence.insert(K::TypicalOpRatio, *work);
            evidence.insert(K::TypicalOptimizerOpRatio, *opt_typical);
            if *work < AS_LONG {
                format!(
                    "; its operators typically run as long as the same operators elsewhere ({work:.2}× in forward and backward, {opt_typical:.2}× in the optimizer), so the time is lost in bursts: the process waits for a core"
                )
            } else if *work <= 1.0 + 0.5 * (ratio - 1.0) {
                format!(
                    "; the same operators typically take {work:.2}× as long in forward and backward ({opt_typical:.2}× in the optimizer), less than half of its excess: the rest is lost in bursts, the process waiting for a core"
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

/// The late rank does more work than the others (larger inputs).
pub(super) fn more_work(
    s: &Say,
    evidence: &mut Evidence,
    compute: &Diff,
    loc: &Option<Located>,
    typical: &Option<(f64, f64)>,
    inputs: &Option<Inputs>,
    extra: &Option<ExtraOps>,
) -> Worded {
    let who = &s.who;
    let waited = &s.waited;
    let others_fix = s.others_fix;
    let cpu = s.cpu;
    let does = s.does;
    evidence.insert(K::ComputeNs, compute.mine_ns);
    evidence.insert(K::OthersComputeNs, compute.others_ns);
    let ratio = if compute.others_ns > 0.0 { compute.mine_ns / compute.others_ns } else { 0.0 };
    let alone = loc.as_ref().filter(|l| super::classify::alone_in(l).is_some());
    // Instances the others do not run, where no region of its own holds the excess.
    let extra = extra.as_ref().filter(|_| alone.is_none());
    // Most of it the forward's operators again, in backward: activation checkpointing.
    let rerun = extra.filter(|x| x.is_rerun());
    let mut place = loc
        .as_ref()
        .filter(|l| l.path.len() > 1)
        .map(|l| format!(", most of it in {}", where_words(l)))
        .unwrap_or_default();
    if let Some(l) = alone {
        // Work no other rank runs: neither larger inputs nor a slower host.
        evidence.insert(K::OperatorNs, l.ops.mine_ns);
        place = format!(
            ", most of it in {} ({} of operators per step), which no other rank runs",
            where_words(l),
            dur(l.ops.mine_ns)
        );
    } else if let Some(x) = extra {
        let same_inputs = inputs.filter(|i| i.same_inputs).map(|i| (i.same, i.compared));
        let (more, same) = extra_words(evidence, x, typical.map(|t| t.0), same_inputs, rerun.is_some(), cpu);
        place.push_str(&format!("; it {more}{same}"));
    } else if let Some(i) = inputs.filter(|i| !i.same_inputs) {
        evidence.insert(K::ShapesCompared, f64::from(i.compared));
        evidence.insert(K::ShapesSame, f64::from(i.same));
        if let Some((work, _)) = typical {
            evidence.insert(K::TypicalOpRatio, *work);
        }
        place.push_str(&format!(
            "; {} of {} of its operators whose input shapes the trace records ran on other shapes than on the other ranks: larger inputs, not a slower {}",
            i.compared - i.same,
            i.compared,
            if cpu { "host" } else { "device" }
        ));
    } else if let Some((work, opt_typical)) = typical {
        evidence.insert(K::TypicalOpRatio, *work);
        evidence.insert(K::TypicalOptimizerOpRatio, *opt_typical);
        place.push_str(&format!(
            "; the same operators typically take {work:.2}× as long in forward and backward but {opt_typical:.2}× in the optimizer, whose work does not depend on the batch: larger inputs, not a slower host"
        ));
    }
    let device = if cpu { "CPU" } else { "GPU" };
    let fix = match alone {
        None if extra.is_some() => extra_fix(&s.who, rerun.is_some(), others_fix),
        Some(l) => format!(
            "Take {} off the step: work one rank does alone (evaluation, metrics, logging, a checkpoint's serialization) makes every other rank wait for it at the next collective. Run it less often, in a separate thread or process, or split it across the ranks. {others_fix}",
            where_words(l)
        ),
        None => format!(
            "Give every rank the same work: equal per-rank batch sizes and sequence lengths (check the sampler, padding or bucketing by length), even sharding of embeddings or experts, no rank-dependent code paths. If {} runs the same shapes as the others, its {} is slower: {}. {others_fix}",
            who.to_lowercase(),
            if cpu { "host" } else { "device" },
            if cpu { "look for other processes on its cores, CPU frequency limits or a different CPU model" } else { "check its clocks and temperature (nvidia-smi -q -d CLOCK,PERFORMANCE), ECC errors, and other processes on that GPU" }
        ),
    };
    (
        FindingId::ComputeImbalance,
        format!(
            "{who} {does} more compute than the others: {} of {device} compute per step against {} on the other ranks ({ratio:.2}×){place}, so {waited}.",
            dur(compute.mine_ns),
            dur(compute.others_ns)
        ),
        fix,
        loc.as_ref().map(location),
    )
}

/// The late rank stalls on the host: time in a region with no operator running.
pub(super) fn stall(s: &Say, evidence: &mut Evidence, loc: &Located) -> Worded {
    let who = &s.who;
    let waited = &s.waited;
    let others_fix = s.others_fix;
    let stalls = s.stalls;
    let does = s.does;
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

/// The late rank stalls on the host inside one operator that runs others (an autograd node
/// around its hooks), with none of them running.
pub(super) fn op_stall(s: &Say, evidence: &mut Evidence, op: &OpExcess, loc: &Option<Located>) -> Worded {
    let who = &s.who;
    let waited = &s.waited;
    let others_fix = s.others_fix;
    let stalls = s.stalls;
    let does = s.does;
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

/// The late rank is blocked longer in host synchronization: its own device finishes later.
pub(super) fn sync(s: &Say, loc: &Located) -> Worded {
    let who = &s.who;
    let waited = &s.waited;
    let others_fix = s.others_fix;
    let its = s.its;
    let arrives = s.arrives;
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

/// The late rank starts its steps later than the others: the delay comes before the step.
pub(super) fn late_start(s: &Say, evidence: &mut Evidence, start: &Diff, wall: &Diff, first: &bool) -> Worded {
    let who = &s.who;
    let waited = &s.waited;
    let others_fix = s.others_fix;
    let group = s.group;
    let is = s.is;
    let does = s.does;
    let arrives = s.arrives;
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

/// The late rank starts its steps late because of what it does at the end of the step before
/// (`before`: that step's region against the others' same step): a stall there is a host stall,
/// operators there more work.
pub(super) fn ended_late(s: &Say, evidence: &mut Evidence, start: &Diff, before: &Located, first: bool) -> Worded {
    let who = &s.who;
    let waited = &s.waited;
    let others_fix = s.others_fix;
    let does = s.does;
    let starts = if s.group { "start" } else { "starts" };
    let place = where_words(before);
    let last = before.path.last().map(|x| x.1.clone()).unwrap_or_default();
    evidence.insert(K::StartSkewNs, start.excess());
    let alone = if super::classify::alone_in(before).is_some() { ", which no other rank runs" } else { "" };
    let stall = before.free.excess() >= 0.5 * last.excess();
    let (id, what) = if stall {
        evidence.insert(K::StallNs, before.free.mine_ns);
        evidence.insert(K::OthersStallNs, before.free.others_ns);
        (FindingId::HostStall, format!("{} of it with no operator running", dur(before.free.mine_ns)))
    } else {
        evidence.insert(K::OperatorNs, before.ops.mine_ns);
        evidence.insert(K::OthersOperatorNs, before.ops.others_ns);
        (FindingId::ComputeImbalance, format!("{} of it in operators", dur(before.ops.mine_ns)))
    };
    (
        id,
        format!(
            "{who} {starts} the step {} after the other ranks because the step before ends with {place} ({} in that step against {} on the other ranks, {what}){alone}, so {waited}.{}",
            dur(start.excess()),
            dur(last.mine_ns),
            dur(last.others_ns),
            if first { " The late steps include the first profiled one, whose step before is not in the trace." } else { "" },
        ),
        format!(
            "Take {place} off the step boundary: what {} {does} there (a checkpoint's save, evaluation, logging, blocking I/O) delays its next step, and every other rank waits for it at that step's first collective. Run it asynchronously (a separate thread or process, an asynchronous checkpoint), less often, or on every rank at once. {others_fix}",
            who.to_lowercase()
        ),
        Some(location(before)),
    )
}

/// The late rank's excess cannot be located.
pub(super) fn unknown(s: &Say, loc: &Option<Located>) -> Worded {
    let who = &s.who;
    let waited = &s.waited;
    let others_fix = s.others_fix;
    let cpu = s.cpu;
    let arrives = s.arrives;
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

/// A count per step: whole when it is one (to a tenth), else to one decimal.
fn count_words(k: f64) -> String {
    if (k - k.round()).abs() < 0.05 {
        format!("{}", k.round() as i64)
    } else {
        format!("{k:.1}")
    }
}

/// A rank's extra operators ([`ExtraOps`]) in words, its figures put in `evidence`: "runs about
/// N more operators per step than the other ranks, in … (X per step)", with why when most of it
/// is backward computing the forward again (`rerun`); and what the operators both run say,
/// where they say the same work at the same speed (their typical ratio, and `(same, compared)`
/// input shapes when equal).
pub(in crate::diagnose::causes) fn extra_words(
    evidence: &mut Evidence,
    x: &ExtraOps,
    typical: Option<f64>,
    same_inputs: Option<(u32, u32)>,
    rerun: bool,
    cpu: bool,
) -> (String, String) {
    evidence.insert(K::ExtraOpInstances, x.instances);
    evidence.insert(K::ExtraOpNs, x.ns as f64);
    evidence.insert(K::ExtraOpRerunNs, x.rerun_ns as f64);
    let names: Vec<String> = x.names.iter().map(|(n, k)| format!("`{n}` ×{}", count_words(*k))).collect();
    let why = if rerun {
        ": backward's autograd nodes computing the forward again (activation checkpointing) on this rank and not on the others"
    } else {
        ""
    };
    let more = format!(
        "runs about {} more operators per step than the other ranks, in {} ({} per step){why}",
        count_words(x.instances),
        names.join(", "),
        dur(x.ns as f64),
    );
    let mut said = Vec::new();
    if let Some(work) = typical.filter(|&w| w <= 1.1) {
        evidence.insert(K::TypicalOpRatio, work);
        said.push(format!("take as long as elsewhere ({work:.2}×)"));
    }
    if let Some((same, compared)) = same_inputs {
        evidence.insert(K::ShapesCompared, f64::from(compared));
        evidence.insert(K::ShapesSame, f64::from(same));
        said.push(format!("run on the same inputs ({same} of {compared})"));
    }
    let same = if said.is_empty() {
        String::new()
    } else {
        format!(
            "; the operators both run {}: the same program with more in it, not a slower {}",
            said.join(" and "),
            if cpu { "host" } else { "device" }
        )
    };
    (more, same)
}

/// The advice for extra operators: the same activation checkpointing on every rank (`rerun`),
/// else the same program.
pub(in crate::diagnose::causes) fn extra_fix(who: &str, rerun: bool, others_fix: &str) -> String {
    if rerun {
        format!(
            "Make activation checkpointing the same on every rank: {} recomputes its forward during backward and the others do not, so every step waits for its recomputation. Check the per-rank configuration (a flag or a memory-based switch that differs between ranks); if this rank needs the memory, so will the others at the same batch: enable it on all of them, or on none with a smaller micro-batch. {others_fix}",
            who.to_lowercase()
        )
    } else {
        format!(
            "Make every rank run the same program: {} runs operators the others do not (a rank-dependent branch, an extra forward pass, a different model configuration or number of micro-batches). Remove the difference, or spread that work over all ranks. {others_fix}",
            who.to_lowercase()
        )
    }
}
