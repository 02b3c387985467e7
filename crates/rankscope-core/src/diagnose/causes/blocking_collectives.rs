//! `host_sync` for collectives: small collectives the host blocks on in the middle of the step
//! (a metric all_reduce followed by `.item()`, a barrier), each a synchronization point of every
//! rank. Per issuing region and kind, on most ranks, calls of at most
//! [`attribution::TINY_COLLECTIVE_BYTES`] (or unsized all_reduces the loop issues itself) the
//! host is blocked in for at least half their time. Gradient communication issued from inside
//! autograd is never one (its time is overlap or waiting), nor is a point-to-point exchange (a
//! pipeline's bubble), nor a collective of a group of the parallel layout (a tensor-parallel
//! layer's all_reduce in forward, FSDP's gathers: the parallelism's own traffic). Taking them out saves what the region costs the rank that reaches it
//! last, for a region that is there for the synchronization (a `log_metrics`); for a region of
//! real work around them, the least-blocked rank's blocked time. Their time is part of the
//! exposed communication's.

use super::prelude::*;
use crate::analyze::attribution;
use crate::analyze::framework::{of_name, Framework};

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::BlockingCollectives,
    finds: &[FindingId::HostSync],
    stage: Stage::SteadyState,
    explains: &[],
    part_of: Some(FindingId::ExposedComm),
    excludes: &[],
    names_part: None,
    find,
};

const SMALL_BYTES: i64 = attribution::TINY_COLLECTIVE_BYTES;

/// Per (region, kind): the blocking calls of every rank there, and what taking them out saves.
fn find(cx: &Ctx<'_>, _: &Found) -> Vec<Finding> {
    groups(cx).into_iter().filter_map(|((region, kind), rows)| blocking(cx, &region, kind, &rows)).collect()
}

/// Issuing regions and kinds whose collectives all ran on a group whose traffic is the model's
/// own (tensor, context, expert, pipeline, shard: activations and parameters), which the model
/// needs where it is (a tensor-parallel layer's all_reduce in forward), never a synchronization
/// the loop could take out. Its cost is the exposed communication's. (A data-parallel or world
/// group's small blocking calls are the loop's: a metric, a loss read back.)
fn framework_traffic(cx: &Ctx<'_>) -> BTreeSet<(String, CollKind)> {
    use crate::analyze::layout::Role;
    let Some(layout) = cx.a.layout.as_ref() else { return BTreeSet::new() };
    let mut by: BTreeMap<(String, CollKind), (usize, usize)> = BTreeMap::new();
    for o in cx.ops {
        let e = by.entry((o.origin.clone(), o.kind)).or_default();
        e.0 += 1;
        let role = layout.role_of(&o.pg);
        if role.moves_activations() || role == Role::Shard {
            e.1 += 1;
        }
    }
    by.into_iter().filter(|(_, (n, framework))| *n > 0 && framework == n).map(|(k, _)| k).collect()
}

/// The calls that may block the host mid-step, by issuing region and kind.
fn groups<'a>(cx: &Ctx<'a>) -> BTreeMap<(String, CollKind), Vec<&'a attribution::OriginRow>> {
    let mut groups: BTreeMap<(String, CollKind), Vec<&attribution::OriginRow>> = BTreeMap::new();
    let framework = framework_traffic(cx);
    for o in cx.a.comm_origins.iter().filter(|o| cx.per_step.contains_key(&o.step)) {
        if framework.contains(&(o.region.clone(), o.kind)) {
            continue;
        }
        // A sharding framework's parameter gathers and gradient reductions (issued from its
        // own `FSDP::*` regions, or any all-gather or reduce-scatter of a sharded job), and
        // ZeroRedundancyOptimizer's shard broadcasts from its step, are their design: their
        // time is overlap or exposed transfer, never a synchronization to move.
        let sharding_region = of_name(&o.region).is_some_and(Framework::owns_traffic);
        let sharded_kind = cx.sharded() && matches!(o.kind, CollKind::AllGather | CollKind::ReduceScatter);
        if sharding_region || sharded_kind {
            continue;
        }
        // A stage blocked in a receive waits for its neighbour: that is the pipeline's
        // bubble (`pipeline_bubble`), not a host synchronization to move.
        if o.kind.is_p2p() {
            continue;
        }
        // Outside any annotation, the calls told from the gradient buckets: those of a few
        // bytes (their own origin rows: a metric's all_reduce, a barrier), and unsized
        // all_reduces the loop issues itself (not a gradient hook's): what the trace does not
        // size cannot be told small, but DDP's buckets come from autograd and FSDP's calls are
        // gathers and scatters; these are the loop's own blocking calls (metrics, or gradients
        // reduced by hand), whatever their size.
        let unannotated = o.region.is_empty() || o.region == "ProfilerStep";
        let known_small = o.kind == CollKind::Barrier || (o.bytes_total > 0 && o.bytes_max <= SMALL_BYTES);
        let loop_unsized = o.bytes_total == 0 && !o.from_autograd && o.kind == CollKind::AllReduce;
        if unannotated && !known_small && !loop_unsized {
            continue;
        }
        // An all_reduce, reduce_scatter or all_gather issued from inside autograd's backward
        // (DDP's buckets from `AccumulateGrad`'s hook, FSDP's reduce-scatters and its
        // prefetching all_gathers) is gradient communication, whose time is overlap or
        // waiting, not a synchronization the loop could take out. Without `record_shapes` the
        // trace gives these calls no size, and a rank that waits for a late peer at the last
        // bucket is blocked in it. (An all_to_all there is the backward of a model-parallel
        // exchange, on the step's path: left to the rule.)
        let gradient_sync =
            matches!(o.kind, CollKind::AllReduce | CollKind::ReduceScatter | CollKind::AllGather);
        if o.from_autograd && gradient_sync && !known_small {
            continue;
        }
        groups.entry((o.region.clone(), o.kind)).or_default().push(o);
    }
    groups
}

/// One region's blocking calls of one kind: what the host is blocked in and what taking them
/// out saves, worded.
fn blocking(cx: &Ctx<'_>, region: &str, kind: CollKind, rows: &[&attribution::OriginRow]) -> Option<Finding> {
    let n_steps = cx.all_steps.len().max(1) as f64;
    let calls: u32 = rows.iter().map(|r| r.count).sum();
    let bytes: i64 = rows.iter().map(|r| r.bytes_total).sum();
    let total: i64 = rows.iter().map(|r| r.dur_ns).sum();
    let blocked: i64 = rows.iter().map(|r| r.blocked_ns).sum();
    if calls == 0
        || total <= 0
        || bytes / i64::from(calls) > SMALL_BYTES
        || (blocked as f64) < 0.5 * total as f64
    {
        return None;
    }
    let mut by_rank: BTreeMap<u32, (f64, f64, f64)> = BTreeMap::new();
    for r in rows {
        let e = by_rank.entry(r.rank).or_default();
        e.0 += r.blocked_ns as f64 / n_steps;
        e.1 += r.exposed_transfer_ns as f64 / n_steps;
        e.2 += f64::from(r.count) / n_steps;
    }
    if by_rank.len() * 2 <= cx.ranks.len() {
        return None;
    }
    // Calls in fewer than half of the steps are a one-off (DDP's first forward broadcasting
    // from rank 0, a barrier before a checkpoint), no cost the step pays every time.
    let with_calls: BTreeSet<u32> = rows.iter().filter(|r| r.count > 0).map(|r| r.step).collect();
    if (with_calls.len() as f64) < 0.5 * n_steps {
        return None;
    }
    // Taking the synchronizations out saves what the region costs the rank that reaches
    // it last: that rank waits at none of them for a late peer, so all its time there
    // (issuing, transfer, `.item()`, and the waits each call's own jitter adds) is on the
    // step's path. The others' extra time is their wait for that rank, which would only
    // move to the next collective. Per step: the least inclusive time over the ranks.
    let mut per_step: BTreeMap<u32, f64> = BTreeMap::new();
    let unannotated = region.is_empty() || region == "ProfilerStep";
    if unannotated {
        // No region around them: the calls' own extent (first start to last end) is the
        // region, its least over the ranks the last arriver's.
        for r in rows {
            let v = per_step.entry(r.step).or_insert(f64::INFINITY);
            *v = v.min(r.span_ns as f64);
        }
    } else {
        for r in cx.a.regions.iter().filter(|r| r.name == region && cx.per_step.contains_key(&r.step)) {
            let v = per_step.entry(r.step).or_insert(f64::INFINITY);
            *v = v.min(r.inclusive_ns as f64);
        }
    }
    let transfer = median_f(by_rank.values().map(|v| v.1).collect());
    let blocked_each = median_f(by_rank.values().map(|v| v.0).collect());
    let region_cost = per_step.values().sum::<f64>() / n_steps;
    // That holds for a region that is there for the synchronization (a `log_metrics`: its
    // time is mostly the blocked calls and the `.item()` after them). A region that holds
    // real work besides (an all_to_all in `backward`) keeps that work: what goes is the time
    // the host is blocked in the calls on the rank least blocked in them, the one the others
    // wait for.
    let about_sync = !per_step.is_empty() && blocked_each >= 0.5 * region_cost;
    let saving = if about_sync {
        region_cost.max(transfer)
    } else {
        by_rank.values().map(|v| v.0).fold(f64::INFINITY, f64::min).max(transfer)
    };
    let per_step = median_f(by_rank.values().map(|v| v.2).collect());
    let path = rows.first().map(|r| r.path.clone()).unwrap_or_default();
    let inside = path
        .split(" > ")
        .filter(|n| *n != "ProfilerStep" && *n != region)
        .last()
        .map(|p| format!(" (inside `{p}`)"))
        .unwrap_or_default();
    let size = bytes as f64 / f64::from(calls);
    // Barriers move nothing; other calls with no bytes are calls the trace does not size.
    let sized = bytes > 0 || kind == CollKind::Barrier;
    let of_each = if sized {
        let w = if size < 1024.0 { format!("{size:.0} B") } else { format!("{:.1} KiB", size / 1024.0) };
        format!("of {w} each")
    } else {
        "of sizes the trace does not record (profiled without `record_shapes`)".to_string()
    };
    let said = Said { region, kind, calls: per_step, of_each, inside, blocked_each, saving, about_sync, sized };
    Some(Finding {
        id: FindingId::HostSync,
        severity: severity_for(saving, cx.step_ns),
        message: message(&said),
        fix: fix(cx, &said),
        ranks: by_rank.keys().copied().collect(),
        steps: cx.all_steps.clone(),
        evidence: Evidence::from([(K::CallsPerStep, per_step),
            (K::BytesPerCall, size),
            (K::BlockedNs, blocked_each),
            (K::TransferNs, transfer),
            (K::RegionActiveNs, saving),
        ]),
        quotes: Vec::new(),
        quotes_total: 0,
        symptoms: vec![FindingId::ExposedComm],
        location: Some(Location {
            regions: path.split(" > ").map(str::to_string).collect(),
            phase: rows.first().map_or(Phase::Other, |r| r.phase),
            rank_ns: blocked_each as i64,
            others_ns: 0,
            free_excess_ns: 0,
            ops_excess_ns: 0,
            sync_excess_ns: 0,
            device_excess_ns: 0,
        }),
        impact_ns: saving as i64,
    })
}

/// What the wording of one region's blocking calls says.
struct Said<'a> {
    region: &'a str,
    kind: CollKind,
    /// Calls per step.
    calls: f64,
    /// "of 8 B each", or that the sizes were not recorded.
    of_each: String,
    /// " (inside `forward`)", when the region is inside another.
    inside: String,
    blocked_each: f64,
    saving: f64,
    /// The region is there for the synchronization (a `log_metrics`).
    about_sync: bool,
    /// The calls have sizes (barriers move nothing and count as sized).
    sized: bool,
}

fn message(s: &Said<'_>) -> String {
    let Said { region, kind, calls: per_step, ref of_each, ref inside, blocked_each, saving, about_sync, .. } = *s;
    let unannotated = region.is_empty() || region == "ProfilerStep";
    if unannotated && !about_sync {
        format!(
            "Every rank stops the step on {per_step:.0} blocking {} call(s) per step {of_each}, issued by the training loop outside any annotation: the host is blocked {} per step in them ({} on the rank least blocked, the one the others wait for), and launches nothing meanwhile.",
            kind.name(),
            dur(blocked_each),
            dur(saving)
        )
    } else if unannotated {
        format!(
            "Every rank stops the step on {per_step:.0} blocking {} call(s) per step {of_each}, issued by the training loop outside any annotation: the host is blocked {} per step in them, and they take {} per step from the first to the last even on the rank that gets there last (the others' extra time there is waiting for it).",
            kind.name(),
            dur(blocked_each),
            dur(saving)
        )
    } else if about_sync {
        format!(
            "Every rank stops the step on {per_step:.0} blocking {} call(s) per step in `{region}`{inside}, {of_each}: the host is blocked {} per step in them, and `{region}` costs {} per step even on the rank that gets there last (the others' extra time there is waiting for it).",
            kind.name(),
            dur(blocked_each),
            dur(saving)
        )
    } else {
        format!(
            "Every rank stops the step on {per_step:.0} blocking {} call(s) per step in `{region}`{inside}, {of_each}: the host is blocked {} per step in them ({} on the rank least blocked, the one the others wait for), and launches nothing meanwhile.",
            kind.name(),
            dur(blocked_each),
            dur(saving)
        )
    }
}

fn fix(cx: &Ctx<'_>, s: &Said<'_>) -> String {
    let Said { region, kind, about_sync, sized, .. } = *s;
    let unannotated = region.is_empty() || region == "ProfilerStep";
    match (about_sync, cx.cpu_only) {
        // DDP's own: with `broadcast_buffers=True` (the default) every forward first
        // broadcasts the module's buffers (BatchNorm running statistics) from rank 0.
        _ if kind == CollKind::Broadcast && region.starts_with("DistributedDataParallel.forward") => "These are DDP's own: with `broadcast_buffers=True` (the default) every forward first broadcasts the module's buffers (BatchNorm running statistics) from rank 0. Construct DDP with `broadcast_buffers=False` when the buffers need not be identical on every rank (or synchronize the statistics where they are computed: `SyncBatchNorm`).".to_string(),
        _ if unannotated => format!(
            "Take the synchronization out of the step: {}; gather such values into one tensor and reduce it once, every N steps, or with `async_op=True` and read the result a step later, and drop barriers the step does not need (the gradient all_reduce already brings the ranks together).{}",
            if sized {
                "calls of a few bytes from the training loop are metrics read back with `.item()`, flags or barriers"
            } else {
                "blocking calls from the training loop are metrics read back with `.item()`, flags, or gradients reduced by hand (leave those to DDP, whose buckets overlap backward)"
            },
            if cx.cpu_only { "" } else { " Every `.item()` / `.cpu()` on a device tensor also drains the device queue." }
        ),
        (true, true) => format!("Take the synchronization out of the step: gather what `{region}` logs into one tensor and reduce it once, every N steps, or with `async_op=True` and read the result (`.item()`) a step later."),
        (true, false) => format!("Take the synchronization out of the step: gather what `{region}` logs into one tensor and reduce it once, every N steps, or with `async_op=True` and read it a step later; every `.item()` / `.cpu()` on a device tensor also drains the device queue."),
        (false, _) => format!("Issue the {} with `async_op=True` and wait on its handle only where its result is first needed, so that the host keeps launching the work of `{region}` meanwhile; where the model needs the result at once, overlap it with independent work (the next micro-batch's, or another layer's).", kind.name()),
    }
}
