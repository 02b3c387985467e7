//! Communication on what waiting leaves: transfer not hidden behind compute, blocking calls,
//! many small collectives against the trace's own α + S/B fit, and bandwidth below the fabric's.

use super::*;

/// The share of hideable exposed transfer that better overlap removes in practice.
pub const OVERLAP_ACHIEVABLE: f64 = 0.7;

/// What the small-collectives rule found, for the advice on exposed transfer.
pub(super) enum SmallCalls {
    None,
    /// A small-collectives finding is reported: its advice is the one to follow.
    Reported,
    /// Many small calls whose fixed cost the trace cannot tell: (calls per step, median bytes).
    Unquantified(f64, f64),
}

pub(super) fn exposed_comm(cx: &Ctx<'_>, small_calls: SmallCalls) -> Option<Finding> {
    let small = matches!(small_calls, SmallCalls::Reported);
    // Per rank, per step means.
    let et = cx.per_rank_mean(|r| r.exposed_transfer_ns);
    let tr = cx.per_rank_mean(|r| r.comm_transfer_ns);
    let cp = cx.per_rank_mean(|r| r.compute_ns);
    let wall = cx.per_rank_mean(|r| r.wall_ns);
    let comm = cx.per_rank_mean(|r| r.comm_ns);
    let mut flagged = Vec::new();
    let mut savings = Vec::new();
    let mut worst: f64 = 0.0;
    for (k, &(rank, e)) in et.iter().enumerate() {
        let w = wall.get(k).map_or(0.0, |x| x.1);
        if w <= 0.0 {
            continue;
        }
        // With perfect overlap only the transfer beyond the compute stays exposed.
        let hideable =
            (e - (tr.get(k).map_or(0.0, |x| x.1) - cp.get(k).map_or(0.0, |x| x.1)).max(0.0)).max(0.0);
        savings.push(hideable);
        if e / w > cx.th.exposed_comm_ratio {
            flagged.push(rank);
            worst = worst.max(e / w);
        }
    }
    if flagged.is_empty() {
        return None;
    }
    // Overlap removes most, not all, of the visible data-parallel communication cost: 60–80%
    // in practice (DOMAIN.md); the saving claimed is 70% of what could hide.
    let saving = OVERLAP_ACHIEVABLE * median_f(savings);
    let per_rank: Vec<f64> = et.iter().map(|x| x.1).collect();
    let hidden: Vec<f64> = et
        .iter()
        .zip(&tr)
        .filter(|(_, t)| t.1 > 0.0)
        .map(|(e, t)| (1.0 - e.1 / t.1).clamp(0.0, 1.0))
        .collect();
    let comm_share =
        comm.iter().zip(&wall).map(|(c, w)| if w.1 > 0.0 { c.1 / w.1 } else { 0.0 }).fold(0.0, f64::max);
    // Where the exposed transfer comes from: the collectives' origin with the most of it.
    let n_steps = cx.all_steps.len().max(1) as f64;
    struct Origin {
        exposed: f64,
        calls: f64,
        bytes: f64,
        phase: Phase,
        region: String,
    }
    let mut origins: BTreeMap<(String, CollKind), Origin> = BTreeMap::new();
    for o in cx.a.comm_origins.iter().filter(|o| cx.per_step.contains_key(&o.step)) {
        let e = origins.entry((o.path.clone(), o.kind)).or_insert(Origin {
            exposed: 0.0,
            calls: 0.0,
            bytes: 0.0,
            phase: o.phase,
            region: o.region.clone(),
        });
        e.exposed += o.exposed_transfer_ns as f64;
        e.calls += f64::from(o.count);
        e.bytes += o.bytes_total as f64;
    }
    let n_ranks = cx.ranks.len().max(1) as f64;
    let top = origins.iter().max_by(|a, b| a.1.exposed.total_cmp(&b.1.exposed));
    let mut origin_words = String::new();
    let mut one_bucket = None;
    if let Some(((_, kind), o)) = top {
        let calls = o.calls / n_ranks / n_steps;
        let mib = o.bytes / n_ranks / n_steps / 1048576.0;
        // A trace recorded without `record_shapes` gives the calls no size.
        let size = if o.bytes > 0.0 {
            format!("{mib:.1} MiB per step")
        } else {
            "sizes not recorded: profile with `record_shapes=True`".to_string()
        };
        let region = &o.region;
        if !region.is_empty() && region != "ProfilerStep" {
            origin_words = format!(
                " Most of it is the {} issued in `{region}` ({calls:.0} call(s) per step, {size}).",
                kind.name()
            );
        } else if o.exposed > 0.0 {
            origin_words = format!(" Most of it is {} ({calls:.0} call(s) per step, {size}).", kind.name());
        }
        let hidden_share = median_f(hidden.clone());
        if *kind == CollKind::AllReduce
            && o.phase == Phase::Backward
            && calls <= 2.0
            && hidden_share < 0.3
            && !small
        {
            one_bucket = Some((calls, mib));
        }
    }
    if let Some((calls, _)) = one_bucket {
        origin_words.push_str(&format!(
            " The gradients travel in {calls:.0} bucket(s) that are all_reduced only once backward is nearly done, so there is no compute left to hide them behind."
        ));
    }
    let bucket_advice = if let Some((_, mib)) = one_bucket {
        format!("split the gradients into smaller buckets so the first ones are all_reduced while backward still computes (DDP `bucket_cap_mb` around {:.0}, a quarter of the {mib:.0} MiB of gradients per step; the default 25 MiB holds them all)", (mib / 4.0).max(1.0))
    } else if small {
        "raise the bucket size as the small-collectives finding says (fewer, larger all_reduces launched during backward)".to_string()
    } else if let SmallCalls::Unquantified(calls, med) = small_calls {
        format!("the gradients go out in {calls:.0} calls of about {:.1} MiB per step, each paying a fixed cost that fewer, larger buckets (DDP `bucket_cap_mb`, default 25) would pay fewer times; how much that saves, this trace cannot tell (its calls are all about one size): time a 1-element all_reduce on this fabric to know. Also make sure the buckets fire during backward (DDP: avoid `find_unused_parameters=True` stalls; put the parameters used first in forward last in the bucket order)", med / 1048576.0)
    } else {
        "make sure gradient buckets fire during backward (DDP: avoid `find_unused_parameters=True` stalls; put the parameters used first in forward last in the bucket order), and for FSDP enable forward/backward prefetch".to_string()
    };
    let gpu_part = if cx.cpu_only {
        ""
    } else {
        " Keep NCCL on its own high-priority stream so compute kernels do not starve it."
    };
    Some(Finding {
        id: FindingId::ExposedComm,
        severity: severity_for(saving, cx.step_ns),
        message: format!(
            "Communication transfer is not hidden behind compute: {} per step of transfer runs with no compute beside it on any rank (up to {} of the step; waiting for other ranks excluded), on {} of {} ranks; {} of the transfer is hidden.{origin_words}",
            dur_range(per_rank),
            pct(worst),
            flagged.len(),
            cx.ranks.len(),
            pct(median_f(hidden.clone()))
        ),
        fix: format!(
            "Overlap the transfer with compute: {bucket_advice}.{gpu_part} If the transfer itself is slow for its size, see the Fabric evidence (nccl-tests, NCCL_DEBUG)."
        ),
        ranks: flagged,
        steps: cx.all_steps.clone(),
        evidence: Evidence::from([(K::MaxExposedTransferRatio, worst),
            (K::CommShareMax, comm_share),
            (K::HiddenTransferShare, median_f(hidden)),
            (K::Threshold, cx.th.exposed_comm_ratio),
        ]),
        symptoms: vec![FindingId::LowOverlap, FindingId::CommHeavy],
        location: None,
        impact_ns: saving as i64,
    })
}

/// Small collectives the host blocks on in the middle of the step (a metric all_reduce followed
/// by `.item()`, a barrier): each is a synchronization point of every rank.
pub(super) fn blocking_collectives(cx: &Ctx<'_>) -> Vec<Finding> {
    const SMALL_BYTES: i64 = attribution::TINY_COLLECTIVE_BYTES;
    let n_steps = cx.all_steps.len().max(1) as f64;
    let mut groups: BTreeMap<(String, CollKind), Vec<&attribution::OriginRow>> = BTreeMap::new();
    for o in cx.a.comm_origins.iter().filter(|o| cx.per_step.contains_key(&o.step)) {
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
    let mut out = Vec::new();
    for ((region, kind), rows) in groups {
        let calls: u32 = rows.iter().map(|r| r.count).sum();
        let bytes: i64 = rows.iter().map(|r| r.bytes_total).sum();
        let total: i64 = rows.iter().map(|r| r.dur_ns).sum();
        let blocked: i64 = rows.iter().map(|r| r.blocked_ns).sum();
        if calls == 0
            || total <= 0
            || bytes / i64::from(calls) > SMALL_BYTES
            || (blocked as f64) < 0.5 * total as f64
        {
            continue;
        }
        let mut by_rank: BTreeMap<u32, (f64, f64, f64)> = BTreeMap::new();
        for r in &rows {
            let e = by_rank.entry(r.rank).or_default();
            e.0 += r.blocked_ns as f64 / n_steps;
            e.1 += r.exposed_transfer_ns as f64 / n_steps;
            e.2 += f64::from(r.count) / n_steps;
        }
        if by_rank.len() * 2 <= cx.ranks.len() {
            continue;
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
            for r in &rows {
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
            .filter(|n| *n != "ProfilerStep" && *n != region.as_str())
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
        out.push(Finding {
            id: FindingId::HostSync,
            severity: severity_for(saving, cx.step_ns),
            message: if unannotated && !about_sync {
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
            },
            fix: match (about_sync, cx.cpu_only) {
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
            },
            ranks: by_rank.keys().copied().collect(),
            steps: cx.all_steps.clone(),
            evidence: Evidence::from([(K::CallsPerStep, per_step),
                (K::BytesPerCall, size),
                (K::BlockedNs, blocked_each),
                (K::TransferNs, transfer),
                (K::RegionActiveNs, saving),
            ]),
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
        });
    }
    out
}

pub(super) fn small_collectives(
    cx: &Ctx<'_>,
    ops: &[Op],
    exclude_origins: &[String],
) -> Vec<(Finding, CollKind)> {
    let n_steps = cx.all_steps.len().max(1) as f64;
    // Per kind, group and origin: a loss all_reduce issued from the training loop is not a
    // gradient bucket, and blocking host synchronizations have their own finding.
    let mut groups: BTreeMap<(CollKind, String, String), Vec<&Op>> = BTreeMap::new();
    for o in ops.iter().filter(|o| {
        o.ranks.len() >= 2 && !matches!(o.kind, CollKind::Send | CollKind::Recv | CollKind::SendRecv)
    }) {
        if exclude_origins.contains(&o.origin) {
            // Outside any annotation a blocking finding takes only the calls of a few bytes
            // (`blocking_collectives`): the gradient buckets issued there stay.
            let unannotated = o.origin.is_empty() || o.origin == "ProfilerStep";
            if !unannotated || o.bytes.is_some_and(|b| b <= attribution::TINY_COLLECTIVE_BYTES) {
                continue;
            }
        }
        groups.entry((o.kind, o.pg.clone(), o.origin.clone())).or_default().push(o);
    }
    let mut out = Vec::new();
    for ((kind, pg, _origin), v) in groups {
        let mut sizes: Vec<i64> = v.iter().filter_map(|o| o.bytes).filter(|&b| b > 0).collect();
        if sizes.is_empty() {
            continue;
        }
        sizes.sort_unstable();
        let med = sizes[(sizes.len() - 1) / 2] as f64;
        // Calls of unknown size are not counted: they may be anything.
        let per_step = v.iter().filter(|o| o.bytes.is_some_and(|b| b > 0)).count() as f64 / n_steps;
        if med >= cx.th.small_collective_bytes || per_step < cx.th.small_collectives_per_step {
            continue;
        }
        let pts: Vec<(f64, f64)> =
            v.iter().filter_map(|o| Some((o.bytes? as f64, o.transfer_ns as f64 / 1e3))).collect();
        let group = v.iter().map(|o| o.group_size).max().unwrap_or(2);
        // Calls of one size cannot tell the fixed cost from the bandwidth: then the fit pools
        // every group of the same kind and size (the same fabric), e.g. a loss all_reduce of a
        // few bytes next to 1 MiB buckets.
        let pooled: Vec<(f64, f64)> = ops
            .iter()
            .filter(|o| o.kind == kind && o.group_size == group && o.ranks.len() >= 2)
            .filter_map(|o| Some((o.bytes? as f64, o.transfer_ns as f64 / 1e3)))
            .collect();
        let factor = Some(busbw_factor(kind, group));
        let fitted = match crate::nccl::fit::fit_latency_bandwidth(&pts, factor) {
            Ok(f) => Some((f, false)),
            Err(_) => crate::nccl::fit::fit_latency_bandwidth(&pooled, factor).ok().map(|f| (f, true)),
        };
        // Calls of about one size whose times do not grow with it (the fit has no bandwidth
        // term, or none without a negative fixed cost) cannot tell the fixed cost per call from
        // the transfer: the trace says there are many small calls, not what they cost. Kept as
        // a finding with no claimed saving, for the advice of `exposed_comm`.
        let Some((fit, pooled_used)) = fitted.filter(|(f, _)| !f.alpha_clamped) else {
            let hist = size_histogram(&sizes);
            out.push((
                Finding {
                    id: FindingId::SmallCollectives,
                    severity: Severity::Info,
                    message: format!(
                        "{per_step:.0} {} calls per step of {:.2}–{:.2} MiB (median {:.2} MiB; {hist}): each pays a fixed cost that fewer, larger calls would pay once, but this trace cannot say how much (the calls are about one size and their times do not grow with it: its own latency + size/bandwidth fit has no fixed-cost term).",
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
                    symptoms: Vec::new(),
                    location: None,
                    impact_ns: 0,
                },
                kind,
            ));
            continue;
        };
        let span = sizes.last().copied().unwrap_or(1) as f64 / sizes[0].max(1) as f64;
        let caveat = if pooled_used {
            " (fitted over every group's calls of this kind: these are all one size)".to_string()
        } else if span < 2.0 {
            format!(
                " (sizes span only {span:.1}×, so the split between fixed cost and bandwidth is uncertain)"
            )
        } else {
            String::new()
        };
        let bytes_per_step = sizes.iter().sum::<i64>() as f64 / n_steps;
        let fewer = (bytes_per_step / cx.th.bucket_bytes.max(1.0)).ceil().max(1.0);
        let alpha_ns = fit.alpha_us * 1e3;
        let projected = (per_step - fewer).max(0.0) * alpha_ns;
        // Only what is exposed costs step time: bounded by the ranks' exposed transfer.
        let exposed =
            median_f(cx.per_rank_mean(|r| r.exposed_transfer_ns).into_iter().map(|x| x.1).collect());
        let saving = projected.min(exposed);
        let mib = |b: f64| b / 1048576.0;
        let hist = size_histogram(&sizes);
        out.push((
            Finding {
                id: FindingId::SmallCollectives,
                severity: severity_for(saving, cx.step_ns),
                message: format!(
                    "{per_step:.0} {} calls per step of {:.2}–{:.2} MiB (median {:.2} MiB; {hist}): by this trace's own cost model (T ≈ {} + S / {:.2} GB/s over {} calls, rms error {:.0}%{caveat}), each pays {} of fixed cost, {} per step; {:.0} calls of {:.0} MiB would pay {}.",
                    kind.name(),
                    mib(sizes[0] as f64),
                    mib(*sizes.last().unwrap_or(&0) as f64),
                    mib(med),
                    dur(alpha_ns),
                    fit.bw_alg_gbps,
                    fit.points,
                    100.0 * fit.rms_rel_err,
                    dur(alpha_ns),
                    dur(per_step * alpha_ns),
                    fewer,
                    mib(cx.th.bucket_bytes),
                    dur(fewer * alpha_ns)
                ),
                fix: "Use fewer, larger collectives: raise DDP `bucket_cap_mb` (default 25; the first bucket stays small so communication still starts early in backward), DeepSpeed `reduce_bucket_size` / `allgather_bucket_size`, coarser FSDP wrapping, or coalesce small tensors (`torch.distributed` coalescing, flattening before all_reduce).".into(),
                ranks: cx.ranks.clone(),
                steps: cx.all_steps.clone(),
                evidence: Evidence::from([(K::CallsPerStep, per_step),
                    (K::MedianBytes, med),
                    (K::AlphaNs, alpha_ns),
                    (K::BwAlgGbps, fit.bw_alg_gbps),
                    (K::ProjectedCallsPerStep, fewer),
                    (K::FixedCostNsPerStep, per_step * alpha_ns),
                ]),
                symptoms: Vec::new(),
                location: None,
                impact_ns: saving as i64,
            },
            kind,
        ));
        let _ = &pg;
    }
    out
}

/// "6 × 1–2 MiB, 12 × 2–4 MiB": counts per power-of-two size band.
pub(super) fn size_histogram(sorted: &[i64]) -> String {
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

pub(super) fn below_fabric(cx: &Ctx<'_>) -> Vec<Finding> {
    let a = cx.a;
    let n_steps = cx.all_steps.len().max(1) as f64;
    let exposed = median_f(cx.per_rank_mean(|r| r.exposed_transfer_ns).into_iter().map(|x| x.1).collect());
    let mut out = Vec::new();
    for c in a.fabric.iter().filter(|c| {
        c.comparable
            && c.basis == crate::analyze::collectives::BwBasis::Transfer
            && c.fraction < cx.th.fabric_fraction
    }) {
        let per_step: f64 = a
            .collectives
            .iter()
            .filter(|x| x.kind == c.kind && x.pg == c.pg)
            .map(|x| x.transfer_mean_ns.unwrap_or(0) as f64 * x.count as f64)
            .sum::<f64>()
            / n_steps;
        // What a full-speed transfer would save, of what is exposed.
        let saving = (per_step * (1.0 - c.fraction)).min(exposed);
        out.push(Finding {
            id: FindingId::BelowFabric,
            severity: severity_for(saving, cx.step_ns),
            message: c.message.clone(),
            fix: "The fabric can do better than the job gets: check that the job uses the same NCCL settings and transport as the benchmark (NCCL_DEBUG=INFO: NET/IB vs NET/Socket, GDRDMA), that collectives are not split into small chunks (bucket sizes), that compute kernels do not starve NCCL of SMs (NCCL_MIN_NCHANNELS / stream priorities), and that the process group spans the same topology.".into(),
            ranks: cx.ranks.clone(),
            steps: cx.all_steps.clone(),
            evidence: Evidence::from([(K::Fraction, c.fraction),
                (K::AchievedBusbwGbps, c.achieved_busbw_gbps),
                (K::FabricBusbwGbps, c.fabric_busbw_gbps),
                (K::Bytes, c.bytes as f64),
            ]),
            symptoms: Vec::new(),
            location: None,
            impact_ns: saving as i64,
        });
    }
    out
}
