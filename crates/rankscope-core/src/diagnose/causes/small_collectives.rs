//! `small_collectives`: many small collectives, each paying a fixed cost. Per kind, process
//! group and issuing region, a median size below
//! [`crate::finding::Thresholds::small_collective_bytes`] with at least
//! [`crate::finding::Thresholds::small_collectives_per_step`] calls per step. The trace's own
//! latency + size / bandwidth fit of those calls (pooled over every group of the kind and size
//! when they are all one size) gives the fixed cost per call; the gain is the fixed cost of the
//! calls that fewer, larger buckets ([`crate::finding::Thresholds::bucket_bytes`]) would save,
//! bounded by the exposed transfer. Calls of about one size whose times do not grow with it
//! have no fixed-cost term: a candidate with no saving (`fixed_cost_unknown`), never reported,
//! which the exposed-transfer advice reads. The regions the blocking calls come from
//! ([`super::blocking_collectives`]) are theirs, and the calls of groups that move activations
//! ([`crate::analyze::layout::Role::moves_activations`]: tensor, context, expert, pipeline) are
//! not small collectives at all: no bucket merges them. Their time is part of the exposed
//! communication's.

use super::prelude::*;
use crate::analyze::whatif::timeline::Counterfactual;
use crate::analyze::attribution;
use crate::analyze::collectives::{busbw_factor, Op};
use crate::analyze::intervals::Set;

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::SmallCollectives,
    finds: &[FindingId::SmallCollectives],
    stage: Stage::SteadyState,
    explains: &[],
    part_of: Some(FindingId::ExposedComm),
    excludes: &[],
    names_part: None,
    find,
};

fn find(cx: &Ctx<'_>, found: &Found) -> Vec<Finding> {
    let blocking: Vec<String> = found
        .of(CauseId::BlockingCollectives)
        .filter_map(|f| f.location.as_ref().and_then(|l| l.regions.last().cloned()))
        .collect();
    // The ranks the others wait for: the calls' cost is partly hidden behind that wait now.
    let late: BTreeSet<u32> = found.of(CauseId::LateRank).flat_map(|f| f.ranks.iter().copied()).collect();
    small_collectives(cx, &blocking, &late)
}

/// The fixed cost per call: the trace's own fit, or a lower bound when the calls are about one
/// size or the fit's latency lies below what the calls' times prove.
enum FixedCost {
    /// The latency + size / bandwidth fit, and whether it pooled every group of the kind and size.
    Fit(crate::nccl::fit::LatencyBandwidthFit, bool),
    /// A call takes at least its size over the bandwidth, so the bandwidth is at least the best
    /// throughput the calls achieved; each call's time beyond its size at that throughput is
    /// then at most bandwidth and at least fixed cost. The median of those is a floor of the
    /// fixed cost (µs), with the best throughput (GB/s). `fit`: the fit it overrules, whose
    /// latency lies below the floor (calls of different sizes slowed unevenly, e.g. the
    /// first buckets of backward beside its compute); none when the calls are about one size.
    Bound { alpha_us: f64, bw_gbps: f64, fit: Option<crate::nccl::fit::LatencyBandwidthFit> },
}

impl FixedCost {
    fn alpha_us(&self) -> f64 {
        match self {
            FixedCost::Fit(f, _) => f.alpha_us,
            FixedCost::Bound { alpha_us, .. } => *alpha_us,
        }
    }

    /// The bandwidth (GB/s): the fit's, or the best throughput of the bound.
    fn bw_gbps(&self) -> f64 {
        match self {
            FixedCost::Fit(f, _) => f.bw_alg_gbps,
            FixedCost::Bound { bw_gbps, .. } => *bw_gbps,
        }
    }
}

/// [`FixedCost::Bound`] over `(bytes, µs)` points: `None` with fewer than 5 calls or no floor.
fn fixed_cost_floor(pts: &[(f64, f64)]) -> Option<FixedCost> {
    let pts: Vec<(f64, f64)> = pts.iter().copied().filter(|(s, t)| *s > 0.0 && *t > 0.0).collect();
    if pts.len() < 5 {
        return None;
    }
    // Bytes per µs of the fastest call.
    let best = pts.iter().map(|(s, t)| s / t).fold(0.0_f64, f64::max);
    let alpha_us = median_f(pts.iter().map(|(s, t)| (t - s / best).max(0.0)).collect());
    (alpha_us > 0.0 && best.is_finite()).then_some(FixedCost::Bound { alpha_us, bw_gbps: best / 1e3, fit: None })
}

/// The fit, unless the calls' own times prove more fixed cost than its latency: then the floor,
/// naming the fit it overrules.
fn fit_or_floor(fit: crate::nccl::fit::LatencyBandwidthFit, pooled: bool, pts: &[(f64, f64)]) -> FixedCost {
    match fixed_cost_floor(pts) {
        Some(FixedCost::Bound { alpha_us, bw_gbps, .. }) if alpha_us > fit.alpha_us => {
            FixedCost::Bound { alpha_us, bw_gbps, fit: Some(fit) }
        }
        _ => FixedCost::Fit(fit, pooled),
    }
}

/// How many of the calls run at once on a rank: per rank and step, their summed time over the
/// time any of them runs; the median over ranks and steps, at least 1. Fixed costs paid side by
/// side (gloo's two work threads) cost the step once, not twice.
fn concurrency(v: &[&Op]) -> f64 {
    let mut by: BTreeMap<(u32, u32), Vec<(i64, i64)>> = BTreeMap::new();
    for o in v {
        for (k, &r) in o.ranks.iter().enumerate() {
            let (Some(&s), Some(&d)) = (o.start_ns.get(k), o.dur_ns.get(k)) else { continue };
            if d > 0 {
                by.entry((r, o.step)).or_default().push((s, s + d));
            }
        }
    }
    let ratios: Vec<f64> = by
        .into_values()
        .filter_map(|iv| {
            let sum: i64 = iv.iter().map(|(a, b)| b - a).sum();
            let union = Set::from_unsorted(iv).len_ns();
            (union > 0).then(|| sum as f64 / union as f64)
        })
        .collect();
    if ratios.is_empty() {
        1.0
    } else {
        median_f(ratios).max(1.0)
    }
}

/// The findings of the small-collectives cause: per kind, group and origin of collective, many
/// calls per step of a small median size, with their fixed cost and what merging them saves.
fn small_collectives(cx: &Ctx<'_>, exclude_origins: &[String], late: &BTreeSet<u32>) -> Vec<Finding> {
    call_groups(cx, exclude_origins)
        .into_iter()
        .filter_map(|((kind, _pg, origin), members)| group_finding(cx, kind, &origin, &members, late))
        .collect()
}

/// The collectives that may be small calls, by their indices in the job's collectives, per kind,
/// group and origin: not point-to-point, not a group that moves activations, not the calls a
/// blocking-collectives finding took (`exclude_origins`).
fn call_groups(cx: &Ctx<'_>, exclude_origins: &[String]) -> BTreeMap<(CollKind, String, String), Vec<usize>> {
    let ops = cx.ops;
    // Per kind, group and origin: a loss all_reduce issued from the training loop is not a
    // gradient bucket, and blocking host synchronizations have their own finding.
    // Each call by its index in the job's collectives (the replay names them so).
    let mut groups: BTreeMap<(CollKind, String, String), Vec<usize>> = BTreeMap::new();
    // A group whose traffic is the model's activations makes as many calls as its layers and
    // micro-batches need: no bucket merges them (their cost is the exposed communication's).
    let activations = |pg: &str| cx.a.layout.as_ref().is_some_and(|l| l.role_of(pg).moves_activations());
    for (k, o) in ops.iter().enumerate().filter(|(_, o)| {
        o.ranks.len() >= 2
            && !matches!(o.kind, CollKind::Send | CollKind::Recv | CollKind::SendRecv)
            && !activations(&o.pg)
    }) {
        if exclude_origins.contains(&o.origin) {
            // Outside any annotation a blocking finding takes only the calls of a few bytes
            // (`blocking_collectives`): the gradient buckets issued there stay.
            let unannotated = o.origin.is_empty() || o.origin == "ProfilerStep";
            if !unannotated || o.bytes.is_some_and(|b| b <= attribution::TINY_COLLECTIVE_BYTES) {
                continue;
            }
        }
        groups.entry((o.kind, o.pg.clone(), o.origin.clone())).or_default().push(k);
    }
    groups
}

/// The finding for one group of calls of kind `kind` (`members`: indices in the job's
/// collectives), if they are many and small: their fixed cost (fitted, or a floor the times
/// prove), what fewer larger calls would pay, and the saving (the replay's where it holds, with
/// the `late` ranks fixed first).
fn group_finding(
    cx: &Ctx<'_>,
    kind: CollKind,
    origin: &str,
    members: &[usize],
    late: &BTreeSet<u32>,
) -> Option<Finding> {
    let ops = cx.ops;
    let n_steps = cx.all_steps.len().max(1) as f64;
    let v: Vec<&Op> = members.iter().filter_map(|&k| ops.get(k)).collect();
    let mut sizes: Vec<i64> = v.iter().filter_map(|o| o.bytes).filter(|&b| b > 0).collect();
    if sizes.is_empty() {
        return None;
    }
    sizes.sort_unstable();
    let med = sizes[(sizes.len() - 1) / 2] as f64;
    // Calls of unknown size are not counted: they may be anything.
    let per_step = v.iter().filter(|o| o.bytes.is_some_and(|b| b > 0)).count() as f64 / n_steps;
    if med >= cx.th.small_collective_bytes || per_step < cx.th.small_collectives_per_step {
        return None;
    }
    let pts: Vec<(f64, f64)> =
        v.iter().filter_map(|o| Some((o.bytes? as f64, o.transfer_ns as f64 / 1e3))).collect();
    let group = v.iter().map(|o| o.group_size).max().unwrap_or(2);
    // Calls whose times say nothing of a fixed cost (fewer than five, or each at the
    // fastest call's throughput) cannot tell it from the transfer: the trace says there are
    // many small calls, not what they cost. Kept as a finding with no claimed saving, for
    // the advice of `exposed_comm`.
    let Some(cost) = fitted_cost(ops, kind, group, &pts) else {
        return Some(unknown_cost_finding(cx, kind, per_step, &sizes, med));
    };
    let alpha_ns = cost.alpha_us() * 1e3;
    let (model, bound) = cost_model_words(&cost, &sizes, pts.len(), alpha_ns);
    let bw_gbps = cost.bw_gbps();
    let bytes_per_step = sizes.iter().sum::<i64>() as f64 / n_steps;
    let fewer = (bytes_per_step / cx.th.bucket_bytes.max(1.0)).ceil().max(1.0);
    // Fixed costs paid side by side cost the step once.
    let side_by_side = concurrency(&v);
    let projected = (per_step - fewer).max(0.0) * alpha_ns / side_by_side;
    // Only what is exposed costs step time: bounded by the ranks' exposed transfer.
    let exposed = median_f(cx.per_rank_mean(|r| r.exposed_transfer_ns).into_iter().map(|x| x.1).collect());
    let mut saving = projected.min(exposed);
    let mut replayed = String::new();
    let mut replayed_ns = None;
    let mut change = None;
    if let Some((s, words, merged)) = replayed_saving(cx, members, fewer / per_step, bw_gbps, alpha_ns, late) {
        saving = s;
        replayed = words;
        replayed_ns = Some(s);
        change = Some(merged);
    }
    let mib = |b: f64| b / 1048576.0;
    let hist = size_histogram(&sizes);
    let together = if side_by_side >= 1.2 {
        format!(" ({side_by_side:.1} of them run at once, so the step pays {} of it)", dur(per_step * alpha_ns / side_by_side))
    } else {
        String::new()
    };
    // A late rank hides part of it now; the calls' own cost stays once the rank is fixed.
    let hidden = if late.is_empty() || cx.replay_usable() {
        String::new()
    } else {
        format!(
            " Part of it is hidden now behind the wait for {}; it is the calls' own cost, so it stays, and shows, once {} fixed.",
            ranks_word(&late.iter().copied().collect::<Vec<_>>()).to_lowercase(),
            if late.len() == 1 { "that rank is" } else { "those ranks are" }
        )
    };
    let floor_word = if bound { "at least " } else { "" };
    let mut evidence = Evidence::from([(K::CallsPerStep, per_step),
        (K::MedianBytes, med),
        (K::AlphaNs, alpha_ns),
        (K::BwAlgGbps, bw_gbps),
        (K::ProjectedCallsPerStep, fewer),
        (K::FixedCostNsPerStep, per_step * alpha_ns / side_by_side),
        (K::ConcurrentCalls, side_by_side),
    ]);
    if bound {
        evidence.insert(K::FixedCostBound, 1.0);
    }
    if let Some(g) = replayed_ns {
        evidence.insert(K::ReplayedGainNs, g);
    }
    let f = Finding {
            id: FindingId::SmallCollectives,
            severity: severity_for(saving, cx.step_ns),
            message: format!(
                "{per_step:.0} {} calls per step of {:.2}–{:.2} MiB (median {:.2} MiB; {hist}): {model}, {floor_word}{} per step{together}; {:.0} calls of {:.0} MiB would pay {}.{hidden}{replayed}",
                kind.name(),
                mib(sizes[0] as f64),
                mib(*sizes.last().unwrap_or(&0) as f64),
                mib(med),
                dur(per_step * alpha_ns),
                fewer,
                mib(cx.th.bucket_bytes),
                dur(fewer * alpha_ns / side_by_side)
            ),
            fix: cx.fewer_larger_calls(origin),
            ranks: cx.ranks.clone(),
            steps: cx.all_steps.clone(),
            evidence,
            quotes: Vec::new(),
            quotes_total: 0,
            symptoms: Vec::new(),
            location: None,
            impact_ns: saving as i64,
        };
    if let Some(merged) = change {
        let how = format!(
            "the {} calls merged into {fewer:.0} of {:.0} MiB (each call's transfer less the fixed cost it no longer pays)",
            kind.name(),
            mib(cx.th.bucket_bytes)
        );
        cx.replayed_with(&f, Counterfactual::Transfers(merged), how);
    }
    Some(f)
}

/// The calls' fixed cost: the latency + size / bandwidth fit of the group's calls `pts` (bytes,
/// µs), else of every group's calls of the kind and size (the same fabric), else the floor the
/// times prove; `None` when the times say nothing of a fixed cost.
fn fitted_cost(ops: &[Op], kind: CollKind, group: i64, pts: &[(f64, f64)]) -> Option<FixedCost> {
    // Calls of one size cannot tell the fixed cost from the bandwidth: then the fit pools
    // every group of the same kind and size (the same fabric), e.g. a loss all_reduce of a
    // few bytes next to 1 MiB buckets.
    let pooled: Vec<(f64, f64)> = ops
        .iter()
        .filter(|o| o.kind == kind && o.group_size == group && o.ranks.len() >= 2)
        .filter_map(|o| Some((o.bytes? as f64, o.transfer_ns as f64 / 1e3)))
        .collect();
    let factor = Some(busbw_factor(kind, group));
    match crate::nccl::fit::fit_latency_bandwidth_robust(pts, factor) {
        Ok(f) if !f.alpha_clamped => Some(fit_or_floor(f, false, pts)),
        _ => match crate::nccl::fit::fit_latency_bandwidth_robust(&pooled, factor) {
            Ok(f) if !f.alpha_clamped => Some(fit_or_floor(f, true, pts)),
            // About one size, or times that do not grow with it: a floor of the fixed cost.
            _ => fixed_cost_floor(pts),
        },
    }
}

/// The finding for many small calls whose fixed cost the trace cannot tell: no saving claimed.
fn unknown_cost_finding(cx: &Ctx<'_>, kind: CollKind, per_step: f64, sizes: &[i64], med: f64) -> Finding {
    let hist = size_histogram(sizes);
    Finding {
            id: FindingId::SmallCollectives,
            severity: Severity::Info,
            message: format!(
                "{per_step:.0} {} calls per step of {:.2}–{:.2} MiB (median {:.2} MiB; {hist}): each pays a fixed cost that fewer, larger calls would pay once, but this trace cannot say how much (the calls are about one size and each runs at about the fastest one's throughput: nothing in their times is a fixed cost it can tell from the transfer).",
                kind.name(),
                sizes[0] as f64 / 1048576.0,
                sizes.last().copied().unwrap_or(0) as f64 / 1048576.0,
                med / 1048576.0
            ),
            fix: "Measure the fixed cost of one call on this fabric (nccl-tests, or a timed 1-element all_reduce) before tuning; fewer, larger collectives (DDP `bucket_cap_mb`, default 25) pay it fewer times.".into(),
            ranks: cx.ranks.clone(),
            steps: cx.all_steps.clone(),
            evidence: Evidence::from([(K::CallsPerStep, per_step),
                (K::MedianBytes, med),
                (K::FixedCostUnknown, 1.0),
            ]),
            quotes: Vec::new(),
            quotes_total: 0,
            symptoms: Vec::new(),
            location: None,
            impact_ns: 0,
        }
}

/// The words for the cost model (the fit, or the floor the calls' times prove, and why), and
/// whether the fixed cost is a floor. `sizes` sorted; `n_calls` the calls with a known size.
fn cost_model_words(cost: &FixedCost, sizes: &[i64], n_calls: usize, alpha_ns: f64) -> (String, bool) {
    let span = sizes.last().copied().unwrap_or(1) as f64 / sizes[0].max(1) as f64;
    match cost {
        FixedCost::Fit(fit, pooled) => {
            let caveat = if *pooled {
                " (fitted over every group's calls of this kind: these are all one size)".to_string()
            } else if span < 2.0 {
                format!(" (sizes span only {span:.1}×, so the split between fixed cost and bandwidth is uncertain)")
            } else {
                String::new()
            };
            (
                format!(
                    "by this trace's own cost model (T ≈ {} + S / {:.2} GB/s over {} calls, rms error {:.0}%{caveat}), each pays {} of fixed cost",
                    dur(alpha_ns),
                    fit.bw_alg_gbps,
                    fit.points,
                    100.0 * fit.rms_rel_err,
                    dur(alpha_ns)
                ),
                false,
            )
        }
        FixedCost::Bound { bw_gbps, fit, .. } => {
            let why = match fit {
                None => "the calls are about one size, so this trace cannot fit a fixed cost".to_string(),
                Some(f) => format!(
                    "this trace's own cost model (T ≈ {} + S / {:.2} GB/s over {} calls, rms error {:.0}%) says {} of fixed cost, but the calls' times prove more",
                    dur(f.alpha_us * 1e3),
                    f.bw_alg_gbps,
                    f.points,
                    100.0 * f.rms_rel_err,
                    dur(f.alpha_us * 1e3)
                ),
            };
            (
                format!(
                    "{why}: a call takes at least its size at the best throughput any of them reached ({bw_gbps:.2} GB/s), and beyond that each of the {} calls takes {} (median): at least that much of each is fixed cost",
                    n_calls,
                    dur(alpha_ns)
                ),
                true,
            )
        }
    }
}

/// Where the replay holds, the saving is the replay's: the calls' transfers less the fixed cost
/// the merged calls no longer pay (never below their bytes at the fit's bandwidth), now and once
/// the `late` ranks are fixed; with the words saying so. `keep` is the share of the calls the
/// merged ones still make (capped at 1).
fn replayed_saving(
    cx: &Ctx<'_>,
    members: &[usize],
    keep: f64,
    bw_gbps: f64,
    alpha_ns: f64,
    late: &BTreeSet<u32>,
) -> Option<(f64, String, BTreeMap<usize, i64>)> {
    let ops = cx.ops;
    let m = cx.model.filter(|_| cx.replay_usable())?;
    let keep = keep.min(1.0);
    let bytes_per_ns = bw_gbps.max(1e-9);
    let merged: BTreeMap<usize, i64> = members
        .iter()
        .filter_map(|&k| ops.get(k).map(|o| (k, o)))
        .map(|(k, o)| {
            let floor = o.bytes.map_or(0.0, |b| b as f64 / bytes_per_ns);
            let t = (o.transfer_ns as f64 - alpha_ns * (1.0 - keep)).max(floor).min(o.transfer_ns as f64);
            (k, t as i64)
        })
        .collect();
    let none = BTreeMap::new();
    let gain = |late: &BTreeSet<u32>| {
        let before = crate::analyze::whatif::Scenario::new(m, late, &none).mean_step_ns(m);
        let after = crate::analyze::whatif::Scenario::new(m, late, &merged).mean_step_ns(m);
        (before - after).max(0.0)
    };
    // In the order of fixing: the late ranks first, then these calls.
    let (gain, words) =
        super::in_order_of_fixing(late, gain, " Replayed from the traces with these calls merged: ", " per step");
    Some((gain, words, merged))
}

/// "6 × 1–2 MiB, 12 × 2–4 MiB": counts per power-of-two size band.
fn size_histogram(sorted: &[i64]) -> String {
    let mut bands: BTreeMap<u32, usize> = BTreeMap::new();
    for &b in sorted {
        let band = 63 - (b.max(1) as u64).leading_zeros();
        *bands.entry(band).or_default() += 1;
    }
    let human = |p: u32| {
        let b = 1u64 << p;
        if b >= 1 << 30 {
            format!("{} GiB", b >> 30)
        } else if b >= 1 << 20 {
            format!("{} MiB", b >> 20)
        } else if b >= 1 << 10 {
            format!("{} KiB", b >> 10)
        } else {
            format!("{b} B")
        }
    };
    bands.iter().map(|(&p, &n)| format!("{n} × {}–{}", human(p), human(p + 1))).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_bands() {
        assert_eq!(size_histogram(&[1 << 20, 3 << 20, 3 << 20]), "1 × 1 MiB–2 MiB, 2 × 2 MiB–4 MiB");
    }
}
