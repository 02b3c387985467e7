//! `exposed_comm`: communication transfer not hidden behind compute. Per rank, the exposed
//! *transfer* (waiting for other ranks never counts) above
//! [`crate::finding::Thresholds::exposed_comm_ratio`] of the step; with perfect overlap only
//! the transfer beyond the compute would stay exposed, and overlap achieves 70% of what could
//! hide in practice ([`OVERLAP_ACHIEVABLE`]): the gain. It names the collectives' origin with
//! the most of it and, for a single DDP bucket all_reduced at the end of backward, the advice
//! that splits it. Small collectives and blocking calls are part of it
//! ([`super::small_collectives`], [`super::blocking_collectives`]): its advice follows the
//! small-collectives finding when one is reported.

use super::prelude::*;
use crate::analyze::collectives::Op;
use crate::analyze::framework::Framework;
use crate::analyze::whatif::overlap;
use crate::analyze::whatif::timeline::Counterfactual;

pub(super) static CAUSE: Cause = Cause {
    id: CauseId::ExposedComm,
    finds: &[FindingId::ExposedComm],
    stage: Stage::SteadyState,
    explains: &[],
    part_of: None,
    excludes: &[],
    names_part: None,
    find,
};

fn find(cx: &Ctx<'_>, found: &Found) -> Vec<Finding> {
    let late: BTreeSet<u32> = found.of(CauseId::LateRank).flat_map(|f| f.ranks.iter().copied()).collect();
    exposed_comm(cx, small_calls(cx, found), &late).into_iter().collect()
}

/// What the small-collectives cause found, for the advice: only a finding that will be
/// reported can be referred to; many small calls of unknown fixed cost are said here instead.
fn small_calls(cx: &Ctx<'_>, found: &Found) -> SmallCalls {
    let floor = cx.floor_ns();
    let unknown_cost = |f: &&Finding| f.evidence.contains(K::FixedCostUnknown);
    let mut small = found.of(CauseId::SmallCollectives);
    if found.of(CauseId::SmallCollectives).any(|f| !unknown_cost(&f) && f.impact_ns as f64 >= floor) {
        SmallCalls::Reported
    } else if let Some(f) = small.find(unknown_cost) {
        SmallCalls::Unquantified(f.evidence.or_zero(K::CallsPerStep), f.evidence.or_zero(K::MedianBytes))
    } else {
        SmallCalls::None
    }
}

/// The share of hideable exposed transfer that better overlap removes in practice.
pub const OVERLAP_ACHIEVABLE: f64 = 0.7;

/// What the small-collectives rule found, for the advice on exposed transfer.
enum SmallCalls {
    None,
    /// A small-collectives finding is reported: its advice is the one to follow.
    Reported,
    /// Many small calls whose fixed cost the trace cannot tell: (calls per step, median bytes).
    Unquantified(f64, f64),
}

fn exposed_comm(cx: &Ctx<'_>, small_calls: SmallCalls, late: &BTreeSet<u32>) -> Option<Finding> {
    let small = matches!(small_calls, SmallCalls::Reported);
    // Per rank, per step means.
    let et = cx.per_rank_mean(|r| r.exposed_transfer_ns);
    let tr = cx.per_rank_mean(|r| r.comm_transfer_ns);
    let cp = cx.per_rank_mean(|r| r.compute_ns);
    let wall = cx.per_rank_mean(|r| r.wall_ns);
    let comm = cx.per_rank_mean(|r| r.comm_ns);
    let (flagged, savings, worst) = rank_savings(cx, &et, &tr, &cp, &wall);
    if flagged.is_empty() {
        return None;
    }
    // Overlap removes most, not all, of the visible data-parallel communication cost: 60–80%
    // in practice (DOMAIN.md); the saving claimed is 70% of what could hide.
    let savings_copy = savings.clone();
    let mut saving = OVERLAP_ACHIEVABLE * median_f(savings);
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
    let (mut origin_words, mut one_bucket) = top_origin(cx, &hidden, small);
    // Buckets are DDP's: FSDP's gradients are reduce-scattered per unit, DeepSpeed's and
    // Megatron's have their own sizes.
    if cx.sharded() || (!cx.a.frameworks.is_empty() && !cx.uses(Framework::Ddp)) {
        one_bucket = None;
    }
    if let Some((calls, _)) = one_bucket {
        origin_words.push_str(&format!(
            " The gradients travel in {calls:.0} bucket(s) that are all_reduced only once backward is nearly done, so there is no compute left to hide them behind."
        ));
    }
    let bucket_advice = advice_on_buckets(cx, one_bucket, small, small_calls);
    let gpu_part = if cx.cpu_only {
        ""
    } else {
        " Keep NCCL on its own high-priority stream so compute kernels do not starve it."
    };
    // Whose traffic it is: the layout's role with the most exposed transfer says what to turn.
    let (role, role_words) = dominant_role(cx);
    if !role_words.is_empty() {
        origin_words.push_str(&role_words);
    }
    let bucket_advice = match role_advice(cx, role) {
        Some(a) => a,
        None => bucket_advice,
    };
    let bucket_advice = comm_bound_advice(cx, &tr, &cp, bucket_advice);
    // One story: the gain is what the replay hides by moving the collectives where their
    // framework lets them go; else the part of the exposed transfer that overlap can hide, as
    // overlap achieves it in practice.
    let mut evidence = Evidence::from([(K::MaxExposedTransferRatio, worst),
        (K::CommShareMax, comm_share),
        (K::Threshold, cx.th.exposed_comm_ratio),
    ]);
    // A DDP bucket ready only once backward is done moves nowhere: what it costs is the bucket
    // size's, which the replay does not change.
    let sync = synchronous_origins(cx);
    let overlap = if one_bucket.is_some() {
        Overlap::Nothing
    } else if sync.dominant {
        Overlap::HostBlocking { calls: sync.calls_per_rank_step }
    } else {
        replayed_overlap(cx, late, &sync.origins)
    };
    let mut change = None;
    // The framework's calls hold the host on this CPU process group: nothing overlaps them, and
    // what remains is a trade (memory for the re-gathers) or fewer calls: a low finding.
    let mut synchronous = None;
    match overlap {
        Overlap::Replayed(OverlapReplayed { gain, words, change: fix, how }) => {
            change = Some((fix, how));
            saving = gain;
            origin_words.push_str(&words);
            let exposed = median_f(et.iter().map(|x| x.1).collect());
            if gain > exposed {
                origin_words.push_str(&format!(
                    " That is more than the {} of exposed transfer: the ranks' waits for each other at these collectives run beside compute too.",
                    dur(exposed)
                ));
            }
            evidence.insert(K::ReplayedGainNs, gain);
            evidence.insert(K::ReplayError, cx.a.whatif.as_ref().map_or(0.0, |w| w.max_error));
        }
        Overlap::HostBlocking { calls } => {
            origin_words.push_str(&format!(
                " On this CPU process group the host waits in the sharding framework's calls until their transfer is done ({calls:.0} a step on each rank, the thread blocked for {} of their time): the framework issues them synchronously (FSDP2 with `async_op=False`, which on a GPU only orders the streams), so issued earlier or waited for later they would still hold the thread, and prefetching overlaps nothing here.",
                pct(sync.blocked_share)
            ));
            let kept = kept_gathered(cx, late);
            saving = 0.0;
            if let Some(k) = &kept {
                saving = k.gain;
                origin_words.push_str(&k.words);
                // A replay's gain (else the exposed transfer's estimate, with no change to show).
                if !k.gone.is_empty() {
                    evidence.insert(K::ReplayedGainNs, k.gain);
                    evidence.insert(K::ReplayError, cx.a.whatif.as_ref().map_or(0.0, |w| w.max_error));
                    change = Some((Counterfactual::Removed(k.gone.clone()), k.how.clone()));
                }
            }
            evidence.insert(K::Trade, 1.0);
            if let Some(k) = kept.as_ref().filter(|k| k.bytes > 0.0) {
                evidence.insert(K::MemoryCostBytes, k.bytes);
            }
            synchronous = Some(kept);
        }
        Overlap::Nothing => origin_words.push_str(&format!(
            " Overlap can hide at most the transfer that compute could run beside ({} per step on the median rank); overlap achieves about {:.0}% of that in practice: {} per step.",
            dur(median_f(savings_copy)),
            OVERLAP_ACHIEVABLE * 100.0,
            dur(saving)
        )),
    }
    let (severity, bucket_advice) = match &synchronous {
        Some(kept) => (Severity::Low, synchronous_advice(kept.as_ref())),
        None => (severity_for(saving, cx.step_ns), bucket_advice),
    };
    let f = Finding {
        id: FindingId::ExposedComm,
        severity,
        message: format!(
            "Communication transfer is not hidden behind compute: {} per step of transfer runs with no compute beside it on any rank (up to {} of the step; waiting for other ranks excluded), on {} of {} ranks; {} of the transfer is hidden.{origin_words}",
            dur_range(per_rank),
            pct(worst),
            flagged.len(),
            cx.ranks.len(),
            pct(median_f(hidden.clone()))
        ),
        fix: format!(
            "{}: {bucket_advice}.{gpu_part} If the transfer itself is slow for its size, see the Fabric evidence (nccl-tests, NCCL_DEBUG).",
            if synchronous.is_some() { "Send less, since it cannot overlap here" } else { "Overlap the transfer with compute" }
        ),
        ranks: flagged,
        steps: cx.all_steps.clone(),
        evidence: {
            evidence.insert(K::HiddenTransferShare, median_f(hidden));
            evidence
        },
        quotes: Vec::new(),
        quotes_total: 0,
        symptoms: vec![FindingId::LowOverlap, FindingId::CommHeavy],
        location: None,
        impact_ns: saving as i64,
    };
    if let Some((fix, how)) = change {
        cx.replayed_with(&f, fix, how);
    }
    Some(f)
}

/// What moving the collectives where their framework lets them go gives.
enum Overlap {
    /// Some moved: the replay's answer.
    Replayed(OverlapReplayed),
    /// Most of the exposed transfer is a sharding framework's calls that hold a CPU rank's host
    /// until they are done ([`synchronous_origins`]): this many a step on each rank.
    HostBlocking { calls: f64 },
    /// Nothing the framework moves, or no replay.
    Nothing,
}

/// [`replayed_overlap`]'s answer: the gain claimed and its words, the change replayed and that
/// change in words.
struct OverlapReplayed {
    gain: f64,
    words: String,
    change: Counterfactual,
    how: String,
}

/// Where the replay holds and some collective can move where its framework lets it go (a
/// sharded job's parameter all-gathers prefetched, gradient reductions waited for at the end of
/// backward: [`crate::analyze::whatif::overlap`]), the saving is the replay's, now and once the
/// `late` ranks are fixed (the order of fixing), with the words saying so. Nothing where nothing
/// can move (a DDP bucket ready only once backward is done: its cost is the bucket size's), or
/// where each such collective held the host of a CPU rank (`held`: their issuing region and
/// kind).
fn replayed_overlap(cx: &Ctx<'_>, late: &BTreeSet<u32>, held: &BTreeSet<(String, CollKind)>) -> Overlap {
    use crate::analyze::layout::Role;
    use crate::analyze::whatif::Scenario;
    let Some(m) = cx.model.filter(|_| cx.replay_usable()) else { return Overlap::Nothing };
    let Some(layout) = cx.a.layout.as_ref() else { return Overlap::Nothing };
    let role: BTreeMap<&str, Role> = layout.groups.iter().map(|g| (g.name.as_str(), g.role)).collect();
    let in_backward = issued_in_backward(cx);
    let hide = |k: usize| {
        let o = cx.ops.get(k)?;
        let issued_in_backward = || in_backward(o);
        match (role.get(o.pg.as_str())?, o.kind) {
            (Role::Shard, CollKind::AllGather) => Some(overlap::Hide::Prefetch),
            (Role::Shard | Role::Replicate | Role::Data, CollKind::AllReduce | CollKind::ReduceScatter)
                if issued_in_backward() =>
            {
                Some(overlap::Hide::Defer)
            }
            _ => None,
        }
    };
    // Decided once per collective, kept as the counterfactual's data; a call that held the host
    // stays where it is.
    let hidden: BTreeMap<usize, overlap::Hide> = (0..cx.ops.len())
        .filter(|&k| !held.contains(&(cx.ops[k].origin.clone(), cx.ops[k].kind)))
        .filter_map(|k| Some((k, hide(k)?)))
        .collect();
    let (moved_model, moved) = overlap::overlapped(m, &|k| hidden.get(&k).copied());
    if !moved.any() {
        return Overlap::Nothing;
    }
    let none = BTreeMap::new();
    let gain = |late: &BTreeSet<u32>| {
        let before = Scenario::new(m, late, &none).mean_step_ns(m);
        let after = Scenario::new(&moved_model, late, &none).mean_step_ns(&moved_model);
        (before - after).max(0.0)
    };
    let mut how = Vec::new();
    if moved.prefetched > 0 {
        how.push("each parameter all-gather issued one unit of compute earlier (prefetched)");
    }
    if moved.deferred > 0 {
        how.push("each gradient reduction waited for only where the last one is (at the end of backward)");
    }
    // In the order of fixing: the late ranks first, then the overlap.
    let how = how.join(" and ");
    let lead = format!(" Replayed from the traces with {how} (everything else as recorded), the job's step is ");
    let (gain, words) = super::in_order_of_fixing(late, gain, &lead, " shorter");
    Overlap::Replayed(OverlapReplayed { gain, words, change: Counterfactual::Overlapped(hidden), how })
}

/// Per rank above the threshold, its number; per rank, the exposed transfer that perfect
/// overlap would hide (beyond the transfer that exceeds its compute); and the worst exposed
/// share of the step. Inputs are per rank, per step means.
fn rank_savings(
    cx: &Ctx<'_>,
    et: &[(u32, f64)],
    tr: &[(u32, f64)],
    cp: &[(u32, f64)],
    wall: &[(u32, f64)],
) -> (Vec<u32>, Vec<f64>, f64) {
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
    (flagged, savings, worst)
}

/// The words naming the collectives' origin with the most exposed transfer, and, when it is a
/// DDP gradient all_reduce of one or two buckets at the end of backward mostly exposed (and no
/// small-collectives finding is reported), its calls and MiB per step.
fn top_origin(cx: &Ctx<'_>, hidden: &[f64], small: bool) -> (String, Option<(f64, f64)>) {
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
        let hidden_share = median_f(hidden.to_vec());
        if *kind == CollKind::AllReduce
            && o.phase == Phase::Backward
            && calls <= 2.0
            && hidden_share < 0.3
            && !small
        {
            one_bucket = Some((calls, mib));
        }
    }
    (origin_words, one_bucket)
}

/// The advice on the buckets: split a single bucket, follow the small-collectives finding, fewer
/// larger buckets for many small calls, else make the buckets fire during backward.
fn advice_on_buckets(cx: &Ctx<'_>, one_bucket: Option<(f64, f64)>, small: bool, small_calls: SmallCalls) -> String {
    if let Some((_, mib)) = one_bucket {
        format!("split the gradients into smaller buckets so the first ones are all_reduced while backward still computes (DDP `bucket_cap_mb` around {:.0}, a quarter of the {mib:.0} MiB of gradients per step; the default 25 MiB holds them all)", (mib / 4.0).max(1.0))
    } else if small {
        "raise the bucket size as the small-collectives finding says (fewer, larger all_reduces launched during backward)".to_string()
    } else if let SmallCalls::Unquantified(calls, med) = small_calls {
        format!("the gradients go out in {calls:.0} calls of about {:.1} MiB per step, each paying a fixed cost that fewer, larger buckets (DDP `bucket_cap_mb`, default 25) would pay fewer times; how much that saves, this trace cannot tell (its calls are all about one size): time a 1-element all_reduce on this fabric to know. Also make sure the buckets fire during backward (DDP: avoid `find_unused_parameters=True` stalls; put the parameters used first in forward last in the bucket order)", med / 1048576.0)
    } else {
        let ddp = "make sure gradient buckets fire during backward (DDP: avoid `find_unused_parameters=True` stalls; put the parameters used first in forward last in the bucket order)";
        match (cx.uses(Framework::Ddp), cx.sharded()) {
            (_, true) => fsdp_advice(),
            (true, false) => ddp.to_string(),
            (false, false) => format!("{ddp}, and for FSDP enable forward/backward prefetch"),
        }
    }
}

/// `bucket_advice`, preceded by the advice to send less per unit of compute when there is too
/// little compute to hide the transfer behind (the median rank's transfer exceeds its compute).
fn comm_bound_advice(cx: &Ctx<'_>, tr: &[(u32, f64)], cp: &[(u32, f64)], bucket_advice: String) -> String {
    let beyond: Vec<f64> = tr.iter().zip(cp).map(|(t, c)| t.1 - c.1).collect();
    let comm_bound = median_f(beyond) > 0.0;
    let (median_compute, median_transfer) =
        (median_f(cp.iter().map(|x| x.1).collect()), median_f(tr.iter().map(|x| x.1).collect()));
    if comm_bound {
        format!(
            "there is too little compute to hide it behind ({} of compute per step against {} of transfer), so send less per unit of compute: a larger batch per rank, gradient accumulation that synchronizes once every few micro-batches ({}), {}, fewer ranks for this model size, or a faster fabric; then {bucket_advice}",
            dur(median_compute),
            dur(median_transfer),
            if cx.sharded() {
                "FSDP2 `set_requires_gradient_sync(False)` on all but the last"
            } else if cx.uses(Framework::DeepSpeed) {
                "DeepSpeed `gradient_accumulation_steps`"
            } else {
                "DDP `no_sync()` on all but the last"
            },
            if cx.sharded() {
                "gradients reduced in bf16 (FSDP2 `MixedPrecisionPolicy(reduce_dtype=torch.bfloat16)`)"
            } else if cx.uses(Framework::DeepSpeed) {
                "gradients communicated in half precision (DeepSpeed `communication_data_type`)"
            } else {
                "compressed gradients (DDP communication hooks: `bf16_compress_hook`, PowerSGD)"
            }
        )
    } else {
        bucket_advice
    }
}

/// The role of the layout's groups that holds the most exposed transfer (summed over the groups'
/// members), and a sentence saying it when the job has more than one kind of group.
fn dominant_role(cx: &Ctx<'_>) -> (Option<crate::analyze::layout::Role>, String) {
    use crate::analyze::layout::Role;
    let Some(l) = cx.a.layout.as_ref() else { return (None, String::new()) };
    let mut by: BTreeMap<Role, (f64, Vec<&str>)> = BTreeMap::new();
    for g in l.groups.iter().filter(|g| g.exposed_transfer_ns > 0) {
        let e = by.entry(g.role).or_default();
        e.0 += g.exposed_transfer_ns as f64 * g.ranks.len() as f64;
        e.1.push(g.name.as_str());
    }
    let total: f64 = by.values().map(|x| x.0).sum();
    let Some((&role, (t, names))) = by.iter().max_by(|a, b| a.1 .0.total_cmp(&b.1 .0)) else { return (None, String::new()) };
    if total <= 0.0 {
        return (None, String::new());
    }
    let kinds = l.groups.iter().map(|g| g.role).collect::<BTreeSet<Role>>().len();
    let words = if kinds > 1 && !matches!(role, Role::World | Role::Unknown) {
        let shown: Vec<String> = names.iter().take(4).map(|n| format!("`{n}`")).collect();
        let more = if names.len() > 4 { format!(" and {} more", names.len() - 4) } else { String::new() };
        format!(
            " {} of it is {} communication (group{} {}{more}).",
            pct(t / total),
            role.adjective(),
            if names.len() == 1 { "" } else { "s" },
            shown.join(", ")
        )
    } else {
        String::new()
    };
    (Some(role), words)
}

/// Advice in the terms of the traffic's kind, when it is not gradient buckets (or is FSDP's).
fn role_advice(cx: &Ctx<'_>, role: Option<crate::analyze::layout::Role>) -> Option<String> {
    use crate::analyze::layout::Role;
    let fsdp = cx.sharded();
    let gpu = !cx.cpu_only;
    match role? {
        Role::Tensor | Role::Context => Some(format!(
            "this is tensor-parallel traffic (activations all-reduced in every layer, forward and backward), which overlaps only with the framework's help: Megatron-LM `--sequence-parallel` with `--tp-comm-overlap` (Transformer Engine's userbuffers), torchtitan's async tensor parallelism; {}if it stays above ~30% of the step, a smaller tensor-parallel size (more pipeline or data parallelism) costs less",
            if gpu { "keep every tensor group inside one NVLink domain (tensor-parallel size ≤ the GPUs of a node); " } else { "" }
        )),
        Role::Expert => Some(
            "this is expert-parallel all_to_all (token dispatch and combine): overlap it with the dense or shared-expert compute (Megatron-LM `--moe-shared-expert-overlap`, DeepEP's communication-computation overlap), keep expert groups within a node where the all_to_all is intra-node, and cap the tokens per expert (capacity factor) so no rank's share dominates".to_string(),
        ),
        Role::Shard => Some(fsdp_advice()),
        Role::Replicate | Role::Data | Role::World if fsdp => Some(fsdp_advice()),
        _ => None,
    }
}

fn fsdp_advice() -> String {
    "this is sharded data-parallel traffic (FSDP / ZeRO-3: parameters all-gathered before each unit, gradients reduce-scattered after it): prefetch the next unit's all-gather while this one computes (FSDP2 `set_modules_to_forward_prefetch` / `set_modules_to_backward_prefetch`; FSDP1 `forward_prefetch=True`, `backward_prefetch=BACKWARD_PRE`), keep the last blocks unsharded after forward (`reshard_after_forward=False`), wrap fewer, larger units, or shard within a node and replicate across nodes (HSDP)".to_string()
}

/// Whether a collective was issued in backward (or from autograd's hooks), on its first
/// member's region: a gradient reduction, or a sharded job's parameter re-gather; a loss or
/// metric all_reduce after backward is the step's.
fn issued_in_backward<'a>(cx: &'a Ctx<'a>) -> impl Fn(&Op) -> bool + 'a {
    let backward: BTreeSet<(u32, u32, &str, CollKind)> = cx
        .a
        .comm_origins
        .iter()
        .filter(|o| o.phase == Phase::Backward || o.from_autograd)
        .map(|o| (o.rank, o.step, o.region.as_str(), o.kind))
        .collect();
    move |o: &Op| o.ranks.first().is_some_and(|&r| backward.contains(&(r, o.step, o.origin.as_str(), o.kind)))
}

/// [`synchronous_origins`]' answer.
struct Synchronous {
    /// Issuing regions and kinds of a sharding framework whose calls held the host.
    origins: BTreeSet<(String, CollKind)>,
    /// They hold most of the exposed transfer.
    dominant: bool,
    /// Their calls a step on each rank, and the share of their time the host was blocked.
    calls_per_rank_step: f64,
    blocked_share: f64,
}

/// On the CPU ranks of a sharded job, the sharding framework's own calls (issued from its
/// `FSDP::*` regions, or any all-gather or reduce-scatter) during most of whose time the host ran no
/// operator, per issuing region and kind over every rank and step: the framework issued them
/// synchronously (FSDP2's `async_op=False`), and on a CPU process group the thread waits in
/// them whatever the prefetch settings. A DDP bucket the host waits for at the end of backward
/// is the loop's, not these.
fn synchronous_origins(cx: &Ctx<'_>) -> Synchronous {
    use crate::analyze::framework::of_name;
    let none =
        Synchronous { origins: BTreeSet::new(), dominant: false, calls_per_rank_step: 0.0, blocked_share: 0.0 };
    if !cx.cpu_only || !cx.sharded() {
        return none;
    }
    // (blocked, time, exposed transfer, calls) per issuing region and kind.
    let mut by: BTreeMap<(&str, CollKind), (i64, i64, i64, u32)> = BTreeMap::new();
    let mut exposed_all = 0i64;
    for o in cx.a.comm_origins.iter().filter(|o| cx.per_step.contains_key(&o.step)) {
        exposed_all += o.exposed_transfer_ns;
        let framework = of_name(&o.region).is_some_and(Framework::owns_traffic)
            || matches!(o.kind, CollKind::AllGather | CollKind::ReduceScatter);
        if framework {
            let e = by.entry((o.region.as_str(), o.kind)).or_default();
            e.0 += o.blocked_ns;
            e.1 += o.dur_ns;
            e.2 += o.exposed_transfer_ns;
            e.3 += o.count;
        }
    }
    let held: Vec<_> = by.into_iter().filter(|(_, v)| v.1 > 0 && 2 * v.0 >= v.1).collect();
    if held.is_empty() {
        return none;
    }
    let (blocked, time, exposed, calls) =
        held.iter().fold((0, 0, 0, 0u32), |a, (_, v)| (a.0 + v.0, a.1 + v.1, a.2 + v.2, a.3 + v.3));
    let per = (cx.per_step.len() * cx.ranks.len()).max(1) as f64;
    Synchronous {
        origins: held.iter().map(|((r, k), _)| ((*r).to_string(), *k)).collect(),
        dominant: 2 * exposed >= exposed_all && exposed > 0,
        calls_per_rank_step: f64::from(calls) / per,
        blocked_share: blocked as f64 / time.max(1) as f64,
    }
}

/// [`kept_gathered`]'s answer.
struct KeptGathered {
    gain: f64,
    words: String,
    /// The re-gathers, by their index in the job's matched collectives.
    gone: BTreeSet<usize>,
    how: String,
    /// Re-gathers a step on each rank, and the parameters they gather (bytes, per rank).
    calls: f64,
    bytes: f64,
}

/// A sharded job's parameters kept gathered from forward to backward (FSDP2
/// `reshard_after_forward=False`, FSDP1 `SHARD_GRAD_OP`, ZeRO-2 rather than 3): the job
/// replayed without backward's all-gathers on the shard groups ([`overlap::without`]), now and
/// once the `late` ranks are fixed; the copies into and out of their buffers stay in the
/// ranks' own time, so it is a lower bound. `None` when the job gathers nothing in backward.
fn kept_gathered(cx: &Ctx<'_>, late: &BTreeSet<u32>) -> Option<KeptGathered> {
    if !cx.sharded() {
        return None;
    }
    // Backward's gathers, from the origin rows: per rank, calls, bytes and exposed transfer.
    let mut per_rank: BTreeMap<u32, (u32, i64, i64)> = BTreeMap::new();
    // One region may issue a unit's gather in forward and again in backward (FSDP2 names both
    // `FSDP::all_gather (unit)`): per rank, step and region, how many were backward's.
    let mut in_backward: BTreeMap<(u32, u32, &str), u32> = BTreeMap::new();
    for o in cx.a.comm_origins.iter().filter(|o| o.kind == CollKind::AllGather && cx.per_step.contains_key(&o.step)) {
        if o.phase == Phase::Backward || o.from_autograd {
            *in_backward.entry((o.rank, o.step, o.region.as_str())).or_default() += o.count;
            let e = per_rank.entry(o.rank).or_default();
            e.0 += o.count;
            e.1 += o.bytes_total;
            e.2 += o.exposed_transfer_ns;
        }
    }
    if per_rank.is_empty() {
        return None;
    }
    let steps = cx.per_step.len().max(1) as f64;
    let med = |f: fn(&(u32, i64, i64)) -> f64| median_f(per_rank.values().map(|v| f(v) / steps).collect());
    let (calls, bytes, exposed) = (med(|v| f64::from(v.0)), med(|v| v.1 as f64), med(|v| v.2 as f64));
    let held = if bytes > 0.0 {
        format!(", about {:.1} MiB more of gathered parameters held from forward to backward on each rank", bytes / 1048576.0)
    } else {
        String::new()
    };
    let how = format!("backward's {calls:.0} parameter re-gathers a step taken out (each unit's parameters kept gathered from forward{held}; their copies in and out of the buffers kept, so at least this much)");
    let Some((m, gone)) = regathers(cx, &in_backward) else {
        // No replay: what backward's gathers leave exposed on the median rank.
        let words = format!(" Backward's {calls:.0} parameter re-gathers a step leave {} of transfer exposed on the median rank: about what keeping each unit's parameters gathered from forward would save{held}.", dur(exposed));
        return Some(KeptGathered { gain: exposed, words, gone: BTreeSet::new(), how, calls, bytes });
    };
    let fewer = overlap::without(m, &gone);
    let none = BTreeMap::new();
    let gain = |late: &BTreeSet<u32>| {
        use crate::analyze::whatif::Scenario;
        let before = Scenario::new(m, late, &none).mean_step_ns(m);
        let after = Scenario::new(&fewer, late, &none).mean_step_ns(&fewer);
        (before - after).max(0.0)
    };
    let lead = format!(" Replayed from the traces with {how}, the job's step is ");
    let (gain, words) = super::in_order_of_fixing(late, gain, &lead, " shorter");
    Some(KeptGathered { gain, words, gone, how, calls, bytes })
}

/// The job's model, where the replay holds, and backward's all-gathers on the shard groups in
/// it (by their index in the job's matched collectives): per first member, step and region,
/// the last as many as `in_backward` counts there.
fn regathers<'m>(cx: &Ctx<'m>, in_backward: &BTreeMap<(u32, u32, &str), u32>) -> Option<(&'m crate::analyze::whatif::Model, BTreeSet<usize>)> {
    use crate::analyze::layout::Role;
    let m = cx.model.filter(|_| cx.replay_usable())?;
    let layout = cx.a.layout.as_ref()?;
    let mut by_key: BTreeMap<(u32, u32, &str), Vec<usize>> = BTreeMap::new();
    for (k, o) in cx.ops.iter().enumerate() {
        if o.kind == CollKind::AllGather && cx.per_step.contains_key(&o.step) && layout.role_of(&o.pg) == Role::Shard {
            if let Some(&r) = o.ranks.first() {
                by_key.entry((r, o.step, o.origin.as_str())).or_default().push(k);
            }
        }
    }
    let mut gone = BTreeSet::new();
    for (key, mut ks) in by_key {
        let n = in_backward.get(&key).copied().unwrap_or(0) as usize;
        ks.sort_by_key(|&k| cx.ops[k].start_ns.first().copied().unwrap_or(0));
        gone.extend(ks[ks.len().saturating_sub(n)..].iter().copied());
    }
    (!gone.is_empty()).then_some((m, gone))
}

/// The advice where the framework's calls hold a CPU rank's host: keep the parameters gathered
/// (what it gives and costs, when the job re-gathers in backward), fewer units; overlap where
/// the calls are asynchronous (on GPUs).
fn synchronous_advice(kept: Option<&KeptGathered>) -> String {
    let mut out = String::from("this is the sharding framework's own traffic, issued synchronously on this CPU process group, so prefetching (FSDP2 `set_modules_to_forward_prefetch`) hides none of it; ");
    if let Some(k) = kept {
        let cost = if k.bytes > 0.0 { format!(", at the cost of about {:.1} MiB more memory per rank", k.bytes / 1048576.0) } else { String::new() };
        out.push_str(&format!(
            "keeping each unit's parameters gathered from forward to backward takes out backward's {:.0} re-gathers a step (FSDP2 `reshard_after_forward=False`, FSDP1 `ShardingStrategy.SHARD_GRAD_OP`, DeepSpeed ZeRO stage 2 rather than 3){cost}; ",
            k.calls
        ));
    }
    out.push_str("fewer, larger units pay the per-call cost fewer times; on GPUs the same calls run on their own stream, where prefetch overlaps them with compute");
    out
}
