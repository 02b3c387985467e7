//! What a group is for, read from its name or from what its collectives are ([`super`]'s module
//! doc, "Roles").

use std::collections::{BTreeMap, BTreeSet};

use super::{Group, Role};
use crate::analyze::instances::Instance;
use crate::analyze::regions::Phase;
use crate::analyze::RankPart;
use crate::model::CollKind;

/// What a group's collectives are, over every rank: the facts roles are read from.
#[derive(Debug, Default)]
pub(super) struct Usage {
    pub(super) calls: u64,
    kinds: BTreeMap<CollKind, u64>,
    /// Calls issued in each phase.
    phases: BTreeMap<(CollKind, Phase), u64>,
    from_autograd: u64,
    /// Point-to-point edges (from, to).
    edges: BTreeSet<(u32, u32)>,
    bytes: Vec<i64>,
    steps: BTreeSet<u32>,
}

pub(super) fn usage(parts: &[RankPart], insts: &[Vec<Instance>]) -> BTreeMap<String, Usage> {
    let mut out: BTreeMap<String, Usage> = BTreeMap::new();
    for (p, v) in parts.iter().zip(insts) {
        let main = p.regions.main_occurrences();
        for x in v.iter().filter(|x| !x.pg.is_empty()) {
            let u = out.entry(x.pg.clone()).or_default();
            // A send or receive nested in a collective (TORCH_DISTRIBUTED_DEBUG=DETAIL's checks)
            // is part of that collective, no exchange of the group's.
            if x.kind.is_p2p() && !x.p2p {
                continue;
            }
            u.calls += 1;
            *u.kinds.entry(x.kind).or_default() += 1;
            u.steps.insert(x.step);
            let phase = p
                .regions
                .region_at(&main, x.issued_ns)
                .and_then(|k| p.regions.occurrences.get(k))
                .map_or(Phase::Other, |o| o.phase);
            *u.phases.entry((x.kind, phase)).or_default() += 1;
            u.from_autograd += u64::from(x.from_autograd);
            if let Some(b) = x.bytes {
                u.bytes.push(b);
            }
            if x.p2p {
                if let Some(peer) = x.peer {
                    match x.kind {
                        CollKind::Recv => u.edges.insert((peer, p.info.rank)),
                        _ => u.edges.insert((p.info.rank, peer)),
                    };
                }
            }
        }
    }
    out
}

/// A role named by the group's description or name.
pub(super) fn role_from_name(g: &Group) -> Option<(Role, String)> {
    for (text, what) in [(g.desc.as_deref(), "description"), (Some(g.name.as_str()), "name")] {
        let Some(text) = text else { continue };
        let lower = text.to_ascii_lowercase();
        let tokens: Vec<&str> =
            lower.split(|c: char| !c.is_ascii_alphanumeric()).filter(|t| !t.is_empty()).collect();
        let has = |w: &[&str]| tokens.iter().any(|t| w.contains(t));
        // The default group (`default_pg`) is the world, whose role its use says (a DDP job's
        // gradients).
        if lower == "default_pg" || has(&["world"]) {
            return None;
        }
        let role = if has(&["shard", "fsdp"]) {
            Some(Role::Shard)
        } else if has(&["replicate"]) {
            Some(Role::Replicate)
        } else {
            let of = |t: &str| match t {
                "tp" | "tensor" => Some(Role::Tensor),
                "cp" | "context" => Some(Role::Context),
                "pp" | "pipeline" | "pipe" => Some(Role::Pipeline),
                "ep" | "expert" | "moe" => Some(Role::Expert),
                "dp" | "data" | "ddp" => Some(Role::Data),
                _ => None,
            };
            let named: BTreeSet<Role> = tokens.iter().filter_map(|t| of(t)).collect();
            // `TENSOR_AND_DATA_PARALLEL_GROUP`, `MODEL_PARALLEL_GROUP`-like unions of two
            // dimensions are no dimension of their own; `DATA_PARALLEL_GROUP_WITH_CP` is data.
            if named.len() >= 2 && tokens.contains(&"and") {
                return Some((
                    Role::Unknown,
                    format!("its {what} `{text}` names several dimensions together"),
                ));
            }
            tokens.iter().find_map(|t| of(t))
        };
        if let Some(r) = role {
            return Some((r, format!("its {what} `{text}`")));
        }
    }
    None
}

/// Whether most of the group's all_gathers are issued in forward or backward: parameters
/// gathered for the compute that needs them (FSDP, ZeRO-3), not after the optimizer step
/// (ZeRO-1/2, Megatron's distributed optimizer, which keep whole parameters on every rank).
pub(super) fn gathers_for_compute(u: &Usage) -> bool {
    let all = u.kinds.get(&CollKind::AllGather).copied().unwrap_or(0);
    let phase = |p: Phase| u.phases.get(&(CollKind::AllGather, p)).copied().unwrap_or(0);
    all > 0 && 2 * (phase(Phase::Forward) + phase(Phase::Backward)) > all
}

/// A role read from what the group's collectives are.
pub(super) fn role_from_use(u: &Usage, g: &Group) -> Option<(Role, String)> {
    if u.calls == 0 {
        return None;
    }
    let count = |k: CollKind| u.kinds.get(&k).copied().unwrap_or(0);
    let p2p = count(CollKind::Send) + count(CollKind::Recv) + count(CollKind::SendRecv);
    let steps = u.steps.len().max(1) as u64;
    let members = g.ranks.len().max(1) as u64;
    let per_step = |n: u64| n as f64 / (steps * members) as f64;
    let size = || {
        let mut b = u.bytes.clone();
        b.sort_unstable();
        b.get(b.len().saturating_sub(1) / 2).map(|&x| format!(" of {}", bytes_words(x))).unwrap_or_default()
    };
    if p2p * 2 > u.calls {
        // A ring closes on itself: some member sends to the lowest from the highest.
        let (lo, hi) = (g.ranks.first().copied()?, g.ranks.last().copied()?);
        let ring = g.ranks.len() > 2 && (u.edges.contains(&(hi, lo)) || u.edges.contains(&(lo, hi)));
        let both_ways = ring && u.edges.iter().all(|&(a, b)| u.edges.contains(&(b, a)) || !ring);
        if ring && !both_ways {
            return Some((
                Role::Context,
                format!("point-to-point exchanges around a ring of {} ranks", g.ranks.len()),
            ));
        }
        return Some((Role::Pipeline, format!("point-to-point exchanges between neighbours ({p2p} calls)")));
    }
    let a2a = count(CollKind::AllToAll);
    if a2a * 2 >= u.calls {
        return Some((
            Role::Expert,
            format!("all_to_all{} ({:.1} per rank and step)", size(), per_step(a2a)),
        ));
    }
    let phase = |k: CollKind, p: Phase| u.phases.get(&(k, p)).copied().unwrap_or(0);
    let ar = count(CollKind::AllReduce);
    let (ag, rs) = (count(CollKind::AllGather), count(CollKind::ReduceScatter));
    // Parameters gathered for the units, gradients reduced after them: reduce-scattered, or
    // (gloo, which has no reduce-scatter of its own) all-reduced from backward.
    let ar_backward = phase(CollKind::AllReduce, Phase::Backward);
    if ag * 4 >= u.calls && (rs > 0 || ar_backward > 0) {
        let how = if rs > 0 { "reduce-scattered" } else { "reduced from backward" };
        return Some((
            Role::Shard,
            format!("parameters all-gathered ({:.1} per rank and step) and gradients {how}", per_step(ag)),
        ));
    }
    let forward = phase(CollKind::AllReduce, Phase::Forward);
    if ar > 0 && forward > 0 {
        return Some((
            Role::Tensor,
            format!(
                "all_reduce{} issued in forward ({:.1} per rank and step): activations",
                size(),
                per_step(ar)
            ),
        ));
    }
    let backward = ar_backward;
    let mut sizes = u.bytes.clone();
    sizes.sort_unstable();
    // The largest calls say what the group carries (a metric's few bytes beside the gradients
    // do not make it a metrics group).
    let gradient_sized = sizes.last().is_some_and(|&b| b >= GRADIENT_BYTES);
    if ar > 0 && (u.from_autograd > 0 || backward > 0 || gradient_sized) {
        let when = if u.from_autograd > 0 { "from gradient hooks" } else { "from backward or after it" };
        let largest = sizes.last().map(|&b| format!(" of up to {}", bytes_words(b))).unwrap_or_default();
        return Some((Role::Data, format!("all_reduce{largest} issued {when}: gradients")));
    }
    None
}

/// A group's all_reduces issued outside backward carry gradients when its largest is at least
/// this (a loss or a metric is a few bytes; a flat gradient buffer or a DDP bucket is MBs).
pub const GRADIENT_BYTES: i64 = 64 * 1024;

fn bytes_words(b: i64) -> String {
    let b = b as f64;
    if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / 1024.0 / 1024.0)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}
