//! The truth of a hybrid job (`Manifest::hybrid`): the layout, the hosts and their clocks, the
//! cause and where it starts, who waited for whom through which group, and the chain of waits
//! from the origin.
//!
//! Definitions (times in ns of the true clock; rank r's trace shows true time plus its host's
//! `clock_offset_ns`):
//! - A **wait**: in a collective or a send/receive, a member that arrived before the last one
//!   waited `last arrival − own arrival` inside its kernel, for the last arriver (the lowest rank
//!   among equal last arrivals). `waits` sums them per step × (waiter, waited-for, group,
//!   collective), keeping sums of at least `wait_floor_ns`.
//! - The **chain**: from the origin ranks (hop 0), every rank that waited at least
//!   `chain_threshold_ns` in one step for a rank already in the chain joins it one hop further
//!   (breadth first, steps in order, the first such wait named). Those ranks only inherit waits
//!   (`inherited_ranks`); no rank outside the origin did anything slow itself.
//! - `amount_ns` per cause: `host_stall` the sleep per step; `slow_stage` the slow stage's
//!   compute-stream busy time per step minus the other stages' mean; `tp_spans_hosts` the extra
//!   transfer time per step of one rank of a spanning tensor group (its all_reduces at the
//!   network's bandwidth instead of NVLink's); `expert_imbalance` the hot rank's compute busy
//!   time per step minus the mean of the rest of its expert group; `none` 0.

use std::collections::BTreeMap;

use serde::Serialize;

use super::layout::Role;
use super::place::{InstKey, Resolved};
use super::rank::StepStats;
use super::run::HPlan;
use super::{DpCollective, GroupNaming, HybridCause};
use crate::sim::{merge, overlap};
use crate::Schedule;

/// The layout as configured.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestLayout {
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub cp: u32,
    pub ep: u32,
    pub world: u32,
    /// Rank order, fastest first (Megatron-LM's).
    pub order: String,
    pub gpus_per_node: u32,
    pub schedule: Schedule,
    pub micro_batches: u32,
    /// The schedule's own bubble, (p − 1)/(m + p − 1): present in every job of this shape,
    /// healthy or not (not an injected cause).
    pub formula_bubble_fraction: f64,
    /// Gradient buckets issued during the last micro-batch's backward (Megatron's
    /// `overlap_grad_reduce`); the last bucket is exposed either way.
    pub overlap_grad_reduce: bool,
    /// Transformer layers of each stage.
    pub layers_per_stage: Vec<u32>,
    pub naming: GroupNaming,
    pub dp_collective: DpCollective,
    pub grad_buckets: u32,
    pub hidden: u64,
    pub seq_len: u64,
    pub micro_batch_size: u64,
    pub nvlink_busbw_gbps: f64,
    pub net_busbw_gbps: f64,
}

/// A host: its ranks and its clock.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestHost {
    pub name: String,
    pub ranks: Vec<u32>,
    /// Every rank on the host shows true time + this.
    pub clock_offset_ns: i64,
}

/// A process group as every member's `pg_config` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestHybridGroup {
    pub name: String,
    pub desc: String,
    pub role: Role,
    /// `nccl`, or `gloo` for Megatron's gloo twins (no GPU traffic).
    pub backend: &'static str,
    pub ranks: Vec<u32>,
    pub spans_hosts: bool,
    /// Collectives (and sends) each member issues on it per step (rank 0's of the group in the
    /// last step).
    pub collectives_per_step: u32,
    pub p2p_per_step: u32,
}

/// A rank's place and coordinates.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestHybridRank {
    pub rank: u32,
    pub host: String,
    pub gpu: u32,
    pub tp: u32,
    pub cp: u32,
    pub dp: u32,
    pub pp: u32,
    pub ep: u32,
    /// The groups its traffic goes through, by role (`tensor`, `pipeline`, `data_context`, …)
    /// → group name. (With torchtitan's names the gradient norm uses the default group.)
    pub groups: BTreeMap<&'static str, String>,
}

/// The injected cause.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestHybridCause {
    /// `none`, `host_stall`, `slow_stage`, `tp_spans_hosts`, `expert_imbalance`.
    pub kind: &'static str,
    /// Where the delay starts.
    pub origin_ranks: Vec<u32>,
    /// Groups the cause is about (the tensor groups that span hosts, the hot expert group).
    pub groups: Vec<String>,
    pub amount_ns: i64,
    #[serde(rename = "where")]
    pub location: String,
    /// The finding a diagnosis should put first (null: none, the job is healthy).
    pub expected_first_finding: Option<&'static str>,
}

/// Waits of `waiter` for `waited_for` in one step through one group and collective kind.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestWait {
    /// `ProfilerStep#N` number.
    pub step: u32,
    pub waiter: u32,
    pub waited_for: u32,
    pub group: String,
    pub role: Role,
    pub collective: &'static str,
    pub count: u32,
    pub wait_ns: i64,
}

/// A rank of the chain of waits from the origin.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestChainHop {
    pub rank: u32,
    /// 0 for an origin rank.
    pub hop: u32,
    /// The first wait that made it join (absent for origin ranks).
    pub waited_for: Option<u32>,
    pub group: Option<String>,
    pub role: Option<Role>,
    pub collective: Option<&'static str>,
    pub step: Option<u32>,
    pub wait_ns: i64,
}

/// One collective or send/receive across its members (a send/receive pair once, as `send`,
/// members `[src, dst]`).
#[derive(Debug, Clone, Serialize)]
pub struct ManifestHybridColl {
    /// `ProfilerStep#N` number.
    pub step: u32,
    pub group: String,
    pub role: Role,
    pub collective: &'static str,
    /// The group's `Seq` for a collective; for a send/receive the members are (src, dst) and
    /// `seq` is the message's number between them in the step.
    pub seq: u64,
    pub members: Vec<u32>,
    pub arrival_ns: Vec<i64>,
    pub end_ns: Vec<i64>,
    pub last_rank: u32,
    pub transfer_ns: i64,
}

/// The hybrid block of the manifest.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestHybrid {
    pub layout: ManifestLayout,
    pub hosts: Vec<ManifestHost>,
    pub groups: Vec<ManifestHybridGroup>,
    pub ranks: Vec<ManifestHybridRank>,
    pub cause: ManifestHybridCause,
    pub wait_floor_ns: i64,
    pub waits: Vec<ManifestWait>,
    pub chain_threshold_ns: i64,
    pub chain: Vec<ManifestChainHop>,
    pub inherited_ranks: Vec<u32>,
    /// Every collective and send/receive (empty with `collectives_truncated` beyond 20,000).
    pub collectives: Vec<ManifestHybridColl>,
    pub collectives_truncated: bool,
}

const WAIT_FLOOR_NS: i64 = 50_000;
const MAX_COLLS: usize = 20_000;

/// (step, waiter, waited_for, group, collective).
type WaitKey = (u32, u32, u32, usize, &'static str);

/// Truth gathered while the job runs.
#[derive(Debug, Default)]
pub(crate) struct TruthAcc {
    /// Per rank, per step.
    pub stats: Vec<Vec<StepStats>>,
    /// (step, waiter, waited_for, group, collective) → (count, wait).
    waits: BTreeMap<WaitKey, (u32, i64)>,
    colls: Vec<ManifestHybridColl>,
    coll_count: usize,
    /// Per group: collectives and point-to-point ops per step (of its first member).
    pub per_step: BTreeMap<usize, (u32, u32)>,
}

impl TruthAcc {
    pub fn new(world: usize) -> TruthAcc {
        TruthAcc { stats: vec![Vec::new(); world], ..TruthAcc::default() }
    }

    /// Takes one step's completed instances.
    pub fn instances(&mut self, p: &HPlan, step: u32, resolved: Vec<Resolved>) {
        for r in resolved {
            let (group, seq) = match r.key {
                InstKey::Coll { group, seq } => (group, seq),
                InstKey::P2p { group, n, .. } => (group, u64::from(n)),
            };
            let coll = r.coll;
            for &(m, a, _) in &r.members {
                let w = r.latest - a;
                if m != r.last && w > 0 {
                    // A send/receive pair: the waiter's own side.
                    let side = match r.key {
                        InstKey::P2p { dst, .. } if dst == m => "recv",
                        InstKey::P2p { .. } => "send",
                        InstKey::Coll { .. } => coll,
                    };
                    let e = self.waits.entry((step, m, r.last, group, side)).or_insert((0, 0));
                    e.0 += 1;
                    e.1 += w;
                }
            }
            self.coll_count += 1;
            if self.coll_count <= MAX_COLLS {
                let g = p.lay.group(group);
                self.colls.push(ManifestHybridColl {
                    step: p.cfg.first_step.saturating_add(step),
                    group: g.map_or_else(String::new, |g| g.name.clone()),
                    role: g.map_or(Role::World, |g| g.role),
                    collective: coll,
                    seq,
                    members: r.members.iter().map(|x| x.0).collect(),
                    arrival_ns: r.members.iter().map(|x| x.1).collect(),
                    end_ns: r.members.iter().map(|x| x.2).collect(),
                    last_rank: r.last,
                    transfer_ns: r.transfer,
                });
            }
        }
    }

    /// The block, once every step ran. `stats` are per rank × step (true time).
    pub fn finish(self, p: &HPlan) -> ManifestHybrid {
        let lay = &p.lay;
        let h = &p.h;
        let group_name = |g: usize| lay.group(g).map_or_else(String::new, |x| x.name.clone());
        let role_of = |g: usize| lay.group(g).map_or(Role::World, |x| x.role);
        let layout = ManifestLayout {
            tp: h.tp,
            pp: h.pp,
            dp: h.dp,
            cp: h.cp,
            ep: h.ep,
            world: lay.world,
            order: "tp-cp-ep-dp-pp".into(),
            gpus_per_node: p.cfg.gpus_per_node,
            schedule: h.schedule,
            micro_batches: h.micro_batches,
            formula_bubble_fraction: f64::from(h.pp - 1) / f64::from(h.micro_batches + h.pp - 1),
            overlap_grad_reduce: h.overlap_grad_reduce,
            layers_per_stage: (0..h.pp).map(|s| p.layers_of(s)).collect(),
            naming: h.naming,
            dp_collective: h.dp_collective,
            grad_buckets: h.grad_buckets,
            hidden: h.hidden,
            seq_len: h.seq_len,
            micro_batch_size: h.micro_batch_size,
            nvlink_busbw_gbps: h.nvlink_busbw_gbps,
            net_busbw_gbps: h.net_busbw_gbps,
        };
        let hosts = (0..lay.hosts)
            .map(|host| ManifestHost {
                name: lay.host_name(host),
                ranks: (0..lay.world)
                    .filter(|&r| lay.places.get(r as usize).is_some_and(|x| x.host == host))
                    .collect(),
                clock_offset_ns: lay.host_offsets.get(host as usize).copied().unwrap_or(0),
            })
            .collect();
        let groups = lay
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let (c, pp) = self.per_step.get(&i).copied().unwrap_or((0, 0));
                ManifestHybridGroup {
                    name: g.name.clone(),
                    desc: g.desc.clone(),
                    role: g.role,
                    backend: if g.gloo { "gloo" } else { "nccl" },
                    ranks: g.ranks.clone(),
                    spans_hosts: g.spans_hosts,
                    collectives_per_step: c,
                    p2p_per_step: pp,
                }
            })
            .collect();
        let ranks = (0..lay.world)
            .map(|r| {
                let c = lay.coords(r);
                let place = lay.places.get(r as usize).copied();
                let u = lay.uses.get(r as usize).copied().unwrap_or_default();
                let mut used = BTreeMap::new();
                for g in [u.tensor, u.context, u.pipeline, u.grad, u.model, u.expert, u.world] {
                    if let Some(x) = lay.group(g).filter(|x| x.role != Role::Expert || h.ep > 1) {
                        used.insert(x.role.name(), x.name.clone());
                    }
                }
                ManifestHybridRank {
                    rank: r,
                    host: lay.host_name(place.map_or(0, |x| x.host)),
                    gpu: place.map_or(0, |x| x.gpu),
                    tp: c.tp,
                    cp: c.cp,
                    dp: c.dp,
                    pp: c.pp,
                    ep: c.ep,
                    groups: used,
                }
            })
            .collect();
        let cause = self.cause(p);
        let first = p.cfg.first_step;
        let waits: Vec<ManifestWait> = self
            .waits
            .iter()
            .filter(|(_, v)| v.1 >= WAIT_FLOOR_NS)
            .map(|(&(s, waiter, waited_for, g, coll), &(count, wait_ns))| ManifestWait {
                step: first.saturating_add(s),
                waiter,
                waited_for,
                group: group_name(g),
                role: role_of(g),
                collective: coll,
                count,
                wait_ns,
            })
            .collect();
        let threshold = (cause.amount_ns / 10).max(200_000);
        let chain = chain(&cause.origin_ranks, &waits, threshold);
        let mut inherited: Vec<u32> = chain.iter().filter(|c| c.hop > 0).map(|c| c.rank).collect();
        inherited.sort_unstable();
        let truncated = self.coll_count > MAX_COLLS;
        ManifestHybrid {
            layout,
            hosts,
            groups,
            ranks,
            cause,
            wait_floor_ns: WAIT_FLOOR_NS,
            waits,
            chain_threshold_ns: threshold,
            chain,
            inherited_ranks: inherited,
            collectives: if truncated { Vec::new() } else { self.colls },
            collectives_truncated: truncated,
        }
    }

    fn mean_compute(&self, ranks: &[u32]) -> i64 {
        let v: Vec<i64> = ranks
            .iter()
            .filter_map(|&r| self.stats.get(r as usize))
            .flat_map(|s| s.iter().map(|x| x.compute_busy))
            .collect();
        if v.is_empty() {
            0
        } else {
            v.iter().sum::<i64>() / v.len() as i64
        }
    }

    fn cause(&self, p: &HPlan) -> ManifestHybridCause {
        let lay = &p.lay;
        let all: Vec<u32> = (0..lay.world).collect();
        let (origin, groups, amount, location, finding): (Vec<u32>, Vec<String>, i64, String, Option<&'static str>) =
            match &p.h.cause {
                HybridCause::None => (Vec::new(), Vec::new(), 0, String::new(), None),
                HybridCause::HostStall { rank, ns, name } => (
                    vec![*rank],
                    Vec::new(),
                    *ns,
                    format!("`{name}` (user_annotation, no CPU op inside) at the start of every step, before the rank issues any GPU work"),
                    Some("host_stall"),
                ),
                HybridCause::SlowStage { stage, extra_layers } => {
                    let on: Vec<u32> = all.iter().copied().filter(|&r| lay.coords(r).pp == *stage).collect();
                    let off: Vec<u32> = all.iter().copied().filter(|&r| lay.coords(r).pp != *stage).collect();
                    let amount = self.mean_compute(&on) - self.mean_compute(&off);
                    (
                        on,
                        Vec::new(),
                        amount,
                        format!(
                            "pipeline stage {stage} holds {} transformer layers ({extra_layers} more than the others' {}): \
                             the other stages wait for it in their receives",
                            p.layers_of(*stage),
                            p.h.layers_per_stage
                        ),
                        Some("pipeline_bubble"),
                    )
                }
                HybridCause::TpSpansHosts { .. } => {
                    let spanning: Vec<&super::layout::Group> =
                        lay.groups.iter().filter(|g| g.role == Role::Tensor && g.spans_hosts).collect();
                    let mut on: Vec<u32> = spanning.iter().flat_map(|g| g.ranks.iter().copied()).collect();
                    on.sort_unstable();
                    let per_ar = p.tp_net_penalty_ns();
                    let ars = spanning
                        .first()
                        .and_then(|g| lay.groups.iter().position(|x| x.name == g.name))
                        .and_then(|i| self.per_step.get(&i))
                        .map_or(0, |x| x.0);
                    (
                        on,
                        spanning.iter().map(|g| g.name.clone()).collect(),
                        per_ar * i64::from(ars),
                        format!(
                            "tensor groups {} span two hosts: their {} all_reduces per step run at {} GB/s instead of {} GB/s",
                            spanning.iter().map(|g| g.name.as_str()).collect::<Vec<_>>().join(", "),
                            ars,
                            p.h.net_busbw_gbps,
                            p.h.nvlink_busbw_gbps
                        ),
                        Some("tensor_group_spans_hosts"),
                    )
                }
                HybridCause::ExpertImbalance { rank, share } => {
                    let g = lay.uses.get(*rank as usize).map_or(usize::MAX, |u| u.expert);
                    let peers: Vec<u32> =
                        lay.group(g).map(|x| x.ranks.iter().copied().filter(|r| r != rank).collect()).unwrap_or_default();
                    let amount = self.mean_compute(&[*rank]) - self.mean_compute(&peers);
                    (
                        vec![*rank],
                        lay.group(g).map(|x| vec![x.name.clone()]).unwrap_or_default(),
                        amount,
                        format!(
                            "every member of expert group {} routes {:.0} % of its tokens to rank {rank}: larger all_to_all splits into it and longer expert GEMMs on it",
                            lay.group(g).map_or("", |x| x.name.as_str()),
                            share * 100.0
                        ),
                        Some("expert_imbalance"),
                    )
                }
            };
        ManifestHybridCause {
            kind: p.h.cause.name(),
            origin_ranks: origin,
            groups,
            amount_ns: amount,
            location,
            expected_first_finding: finding,
        }
    }
}

/// Breadth-first from the origin ranks over the waits of at least `threshold` (see the module
/// docs).
fn chain(origin: &[u32], waits: &[ManifestWait], threshold: i64) -> Vec<ManifestChainHop> {
    let mut out: Vec<ManifestChainHop> = origin
        .iter()
        .map(|&r| ManifestChainHop {
            rank: r,
            hop: 0,
            waited_for: None,
            group: None,
            role: None,
            collective: None,
            step: None,
            wait_ns: 0,
        })
        .collect();
    if origin.is_empty() {
        return out;
    }
    let mut reached: BTreeMap<u32, u32> = origin.iter().map(|&r| (r, 0)).collect();
    let strong: Vec<&ManifestWait> = waits.iter().filter(|w| w.wait_ns >= threshold).collect();
    let mut hop = 0;
    loop {
        let frontier: Vec<u32> = reached.iter().filter(|(_, &h)| h == hop).map(|(&r, _)| r).collect();
        if frontier.is_empty() {
            break;
        }
        hop += 1;
        for w in &strong {
            if frontier.binary_search(&w.waited_for).is_ok() && !reached.contains_key(&w.waiter) {
                reached.insert(w.waiter, hop);
                out.push(ManifestChainHop {
                    rank: w.waiter,
                    hop,
                    waited_for: Some(w.waited_for),
                    group: Some(w.group.clone()),
                    role: Some(w.role),
                    collective: Some(w.collective),
                    step: Some(w.step),
                    wait_ns: w.wait_ns,
                });
            }
        }
    }
    out
}

/// Per rank, the step's busy and wait figures from its placed items.
pub(crate) fn step_stats(rank: &super::rank::RankRun) -> StepStats {
    use super::rank::ItemKind;
    let mut compute = Vec::new();
    let mut comm = Vec::new();
    let mut wait = Vec::new();
    for it in &rank.items {
        match it.kind {
            ItemKind::Work(_) => compute.push((it.start, it.end)),
            ItemKind::Comm { .. } => {
                comm.push((it.start, it.end));
                if it.latest > it.start {
                    wait.push((it.start, it.latest));
                }
            }
            ItemKind::WaitOn(_) => {}
        }
    }
    for v in [&mut compute, &mut comm, &mut wait] {
        v.sort_unstable();
    }
    let compute = merge(&compute);
    let comm = merge(&comm);
    let wait = merge(&wait);
    let len = |v: &[(i64, i64)]| v.iter().map(|(a, b)| b - a).sum::<i64>();
    StepStats {
        compute_busy: len(&compute),
        comm_busy: len(&comm),
        exposed_comm: comm.iter().map(|&(s, e)| (e - s) - overlap(&compute, s, e)).sum(),
        comm_wait: len(&wait),
        ..rank.stats
    }
}
