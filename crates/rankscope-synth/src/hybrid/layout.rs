//! The layout of a hybrid-parallel job: every rank's coordinates, every process group (in the
//! order the framework creates them, so each gets the name torch's global counter gives it),
//! where each rank runs (host and local GPU) and each host's clock.
//!
//! **Rank order** (Megatron-LM's `RankGenerator`, order `tp-cp-ep-dp-pp`, ep inside dp):
//! `rank = tp_i + tp·(cp_i + cp·(dp_i + dp·pp_i))`. Expert layers use the expert generator
//! (`tp-ep-dp-pp` with the expert tensor-parallel size equal to tp and no cp):
//! `rank = tp_i + tp·(ep_i + ep·(edp_i + edp·pp_i))`, so with `x = cp_i + cp·dp_i`,
//! `ep_i = x mod ep` and `edp_i = x / ep` (ep divides cp·dp). torchtitan's DeviceMesh
//! `[pp, dp, cp, tp]` (last dimension fastest) gives the same order.
//!
//! **Names.** `torch.distributed.new_group` is called by every rank for every group (members or
//! not), and each call takes the next value of the global counter as the group's name (`"0"` is
//! the default group); a rank lists in `distributedInfo.pg_config` only the groups it is a member
//! of. So the same group has the same name on all its members, and names are dense over the job.
//! The groups, in creation order:
//! - Megatron (`parallel_state.initialize_model_parallel`): for each data-parallel group
//!   `DATA_PARALLEL_GROUP` then its gloo twin `DATA_PARALLEL_GROUP_GLOO`; the same for
//!   `DATA_PARALLEL_GROUP_WITH_CP`; `CONTEXT_PARALLEL_GROUP`; `MODEL_PARALLEL_GROUP` (tp × pp);
//!   `TENSOR_MODEL_PARALLEL_GROUP`; for each pipeline group `PIPELINE_MODEL_PARALLEL_GROUP` then
//!   its `EMBEDDING_GROUP` (first and last stage); `TENSOR_AND_DATA_PARALLEL_GROUP`; with
//!   ep > 1 `EXPERT_MODEL_PARALLEL_GROUP` and `EXPERT_DATA_PARALLEL_GROUP`. Groups of one rank
//!   are created too (cp = 1 gives every rank its own context group), as Megatron does.
//! - torchtitan (`init_device_mesh` with the dimensions of size > 1 in the order pp, dp, cp, tp,
//!   then the flattened `dp_cp` when cp > 1, then `ep`): one group per slice of each dimension,
//!   described `mesh_<dim>`, in `DeviceMesh`'s order (`mesh.swapdims(-1, dim).reshape(-1, n)`).
//!
//! **Hosts.** `gpus_per_node` consecutive ranks per host (`node00`, `node01`, …; local GPU =
//! position on the host), except for the `tp_spans_hosts` cause: the second half of the chosen
//! tensor group trades places with as many ranks of the neighbouring host (a rankfile or
//! hostfile mistake), so that group (and the one its new neighbours belong to) spans two hosts.
//! Each host has one clock: every rank on it shows `true time + the host's offset`, exactly.

use serde::Serialize;

use super::{GroupNaming, Hybrid, HybridCause};
use crate::Rng;

/// What a process group is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The default (world) group.
    World,
    /// Data parallel (gradients; the distributed optimizer's parameters).
    Data,
    /// Data parallel × context parallel (Megatron's gradient group).
    DataContext,
    Context,
    /// Tensor × pipeline (Megatron's model-parallel group: the gradient norm).
    Model,
    Tensor,
    Pipeline,
    /// First and last stage of a pipeline (tied embeddings).
    Embedding,
    TensorData,
    Expert,
    ExpertData,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::World => "world",
            Role::Data => "data",
            Role::DataContext => "data_context",
            Role::Context => "context",
            Role::Model => "model",
            Role::Tensor => "tensor",
            Role::Pipeline => "pipeline",
            Role::Embedding => "embedding",
            Role::TensorData => "tensor_data",
            Role::Expert => "expert",
            Role::ExpertData => "expert_data",
        }
    }
}

/// One process group.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// Its name, the global counter's value when it was created (`"0"`: the default group).
    pub name: String,
    pub desc: String,
    pub role: Role,
    /// A gloo twin (`backend_config` `cpu:gloo,cuda:gloo`); never used for GPU traffic.
    pub gloo: bool,
    /// Members, ascending.
    pub ranks: Vec<u32>,
    /// `[0, 8, 16]` as `pg_config` writes it (Python's list).
    pub ranks_json: String,
    /// `Process Group Ranks` as the profiler writes it on events: the list, cut after 30 entries
    /// with `, ...` (torch's `format_list`, `kTruncatLength`).
    pub ranks_arg: String,
    /// Its members run on more than one host.
    pub spans_hosts: bool,
}

impl Group {
    /// Position of `rank` in the group (its group rank), if a member.
    pub fn local(&self, rank: u32) -> Option<u32> {
        self.ranks.binary_search(&rank).ok().and_then(|i| u32::try_from(i).ok())
    }
}

/// A rank's coordinates in every dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Coords {
    pub tp: u32,
    pub cp: u32,
    pub dp: u32,
    pub pp: u32,
    pub ep: u32,
    pub edp: u32,
}

/// Where a rank runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place {
    pub host: u32,
    pub gpu: u32,
}

/// The groups a rank uses for its traffic (indices into [`Layout::groups`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RankGroups {
    pub tensor: usize,
    pub context: usize,
    pub pipeline: usize,
    /// The gradient (and parameter all-gather) group.
    pub grad: usize,
    pub model: usize,
    pub expert: usize,
    pub world: usize,
}

#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub tp: u32,
    pub cp: u32,
    pub dp: u32,
    pub pp: u32,
    pub ep: u32,
    pub world: u32,
    pub groups: Vec<Group>,
    /// Per rank, the groups it is a member of, in creation order.
    pub member_of: Vec<Vec<usize>>,
    pub uses: Vec<RankGroups>,
    pub places: Vec<Place>,
    pub hosts: u32,
    pub host_offsets: Vec<i64>,
    /// Width of the host number in host names.
    host_digits: usize,
}

const RNG_CLOCK: u64 = 11;

/// `[a, b, c]` (Python's list repr).
fn list(ranks: &[u32]) -> String {
    let items: Vec<String> = ranks.iter().map(u32::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// torch's `format_list` with truncation: at most 30 entries, then `, ...`.
fn list_arg(ranks: &[u32]) -> String {
    if ranks.len() > 30 {
        let items: Vec<String> = ranks.iter().take(30).map(u32::to_string).collect();
        format!("[{}, ...]", items.join(", "))
    } else {
        list(ranks)
    }
}

impl Layout {
    pub fn coords(&self, r: u32) -> Coords {
        let tp = r % self.tp;
        let rest = r / self.tp;
        let cp = rest % self.cp;
        let rest = rest / self.cp;
        let dp = rest % self.dp;
        let pp = rest / self.dp;
        let x = cp + self.cp * dp;
        Coords { tp, cp, dp, pp, ep: x % self.ep, edp: x / self.ep }
    }

    pub fn rank_of(&self, tp: u32, cp: u32, dp: u32, pp: u32) -> u32 {
        tp + self.tp * (cp + self.cp * (dp + self.dp * pp))
    }

    /// The rank with expert coordinates (tp, ep, edp, pp).
    fn expert_rank(&self, tp: u32, ep: u32, edp: u32, pp: u32) -> u32 {
        tp + self.tp * (ep + self.ep * (edp + (self.cp * self.dp / self.ep) * pp))
    }

    pub fn host_name(&self, host: u32) -> String {
        format!("node{host:0w$}", w = self.host_digits)
    }

    pub fn group(&self, g: usize) -> Option<&Group> {
        self.groups.get(g)
    }

    /// TP group `k` (in rank order): ranks `k·tp .. (k+1)·tp`.
    pub fn tensor_groups(&self) -> u32 {
        self.world / self.tp
    }

    pub fn new(h: &Hybrid, gpus_per_node: u32, seed: u64) -> Layout {
        let world = h.tp * h.cp * h.dp * h.pp;
        let mut lay = Layout {
            tp: h.tp,
            cp: h.cp,
            dp: h.dp,
            pp: h.pp,
            ep: h.ep,
            world,
            groups: Vec::new(),
            member_of: vec![Vec::new(); world as usize],
            uses: vec![RankGroups::default(); world as usize],
            places: Vec::new(),
            hosts: 0,
            host_offsets: Vec::new(),
            host_digits: 2,
        };
        lay.place(h, gpus_per_node);
        match h.naming {
            GroupNaming::Megatron => lay.megatron_groups(),
            GroupNaming::Torchtitan => lay.torchtitan_groups(),
        }
        let n = u64::from(lay.hosts);
        lay.host_offsets = (0..n).map(|host| host_offset(seed, host, h.host_clock_max_ns)).collect();
        lay
    }

    fn place(&mut self, h: &Hybrid, gpus: u32) {
        let gpus = gpus.max(1);
        self.places = (0..self.world).map(|r| Place { host: r / gpus, gpu: r % gpus }).collect();
        self.hosts = self.world.div_ceil(gpus);
        if let HybridCause::TpSpansHosts { group } = h.cause {
            let half = (self.tp / 2).max(1);
            let first = group * self.tp;
            let host = first / gpus;
            // The neighbouring host: the next one, or the previous for the last host.
            let other = if host + 1 < self.hosts { host + 1 } else { host.saturating_sub(1) };
            let moved: Vec<u32> = (first + self.tp - half..first + self.tp).collect();
            let back: Vec<u32> = if other > host {
                (other * gpus..other * gpus + half).collect()
            } else {
                (other * gpus + gpus - half..other * gpus + gpus).collect()
            };
            for (a, b) in moved.into_iter().zip(back) {
                let (ia, ib) = (a as usize, b as usize);
                if let (Some(pa), Some(pb)) = (self.places.get(ia).copied(), self.places.get(ib).copied()) {
                    self.places[ia] = pb;
                    self.places[ib] = pa;
                }
            }
        }
        let digits = self.hosts.saturating_sub(1).to_string().len();
        self.host_digits = digits.max(2);
    }

    fn add(&mut self, desc: &str, role: Role, gloo: bool, mut ranks: Vec<u32>) -> usize {
        ranks.sort_unstable();
        let g = self.groups.len();
        let hosts: Vec<u32> =
            ranks.iter().filter_map(|&r| self.places.get(r as usize)).map(|p| p.host).collect();
        let spans_hosts = hosts.windows(2).any(|w| w[0] != w[1]);
        for &r in &ranks {
            if let Some(m) = self.member_of.get_mut(r as usize) {
                m.push(g);
            }
        }
        self.groups.push(Group {
            name: g.to_string(),
            desc: desc.to_string(),
            role,
            gloo,
            ranks_json: list(&ranks),
            ranks_arg: list_arg(&ranks),
            ranks,
            spans_hosts,
        });
        g
    }

    /// Records that the members of group `g` use it for `role`'s traffic.
    fn use_for(&mut self, g: usize, set: fn(&mut RankGroups, usize)) {
        let ranks = self.groups.get(g).map(|x| x.ranks.clone()).unwrap_or_default();
        for r in ranks {
            if let Some(u) = self.uses.get_mut(r as usize) {
                set(u, g);
            }
        }
    }

    fn megatron_groups(&mut self) {
        let (tp, cp, dp, pp, ep) = (self.tp, self.cp, self.dp, self.pp, self.ep);
        let world = self.add("default_pg", Role::World, false, (0..self.world).collect());
        self.use_for(world, |u, g| u.world = g);
        // RankGenerator's groups of a dimension: the other dimensions enumerated with the first
        // (fastest) one fastest.
        for p in 0..pp {
            for c in 0..cp {
                for t in 0..tp {
                    let ranks: Vec<u32> = (0..dp).map(|d| self.rank_of(t, c, d, p)).collect();
                    self.add("DATA_PARALLEL_GROUP", Role::Data, false, ranks.clone());
                    self.add("DATA_PARALLEL_GROUP_GLOO", Role::Data, true, ranks);
                }
            }
        }
        for p in 0..pp {
            for t in 0..tp {
                let ranks: Vec<u32> = (0..dp)
                    .flat_map(|d| (0..cp).map(move |c| (c, d)))
                    .map(|(c, d)| self.rank_of(t, c, d, p))
                    .collect();
                let g = self.add("DATA_PARALLEL_GROUP_WITH_CP", Role::DataContext, false, ranks.clone());
                self.use_for(g, |u, g| u.grad = g);
                self.add("DATA_PARALLEL_GROUP_WITH_CP_GLOO", Role::DataContext, true, ranks);
            }
        }
        for p in 0..pp {
            for d in 0..dp {
                for t in 0..tp {
                    let g = self.add(
                        "CONTEXT_PARALLEL_GROUP",
                        Role::Context,
                        false,
                        (0..cp).map(|c| self.rank_of(t, c, d, p)).collect(),
                    );
                    self.use_for(g, |u, g| u.context = g);
                }
            }
        }
        for d in 0..dp {
            for c in 0..cp {
                let ranks =
                    (0..pp).flat_map(|p| (0..tp).map(move |t| (t, p))).map(|(t, p)| self.rank_of(t, c, d, p));
                let g = self.add("MODEL_PARALLEL_GROUP", Role::Model, false, ranks.collect());
                self.use_for(g, |u, g| u.model = g);
            }
        }
        for k in 0..self.tensor_groups() {
            let g = self.add(
                "TENSOR_MODEL_PARALLEL_GROUP",
                Role::Tensor,
                false,
                (k * tp..(k + 1) * tp).collect(),
            );
            self.use_for(g, |u, g| u.tensor = g);
        }
        for d in 0..dp {
            for c in 0..cp {
                for t in 0..tp {
                    let ranks: Vec<u32> = (0..pp).map(|p| self.rank_of(t, c, d, p)).collect();
                    let g = self.add("PIPELINE_MODEL_PARALLEL_GROUP", Role::Pipeline, false, ranks.clone());
                    self.use_for(g, |u, g| u.pipeline = g);
                    let mut ends = vec![ranks.first().copied().unwrap_or(0)];
                    if let Some(&last) = ranks.last().filter(|_| pp > 1) {
                        ends.push(last);
                    }
                    self.add("EMBEDDING_GROUP", Role::Embedding, false, ends);
                }
            }
        }
        for p in 0..pp {
            for c in 0..cp {
                let ranks =
                    (0..dp).flat_map(|d| (0..tp).map(move |t| (t, d))).map(|(t, d)| self.rank_of(t, c, d, p));
                self.add("TENSOR_AND_DATA_PARALLEL_GROUP", Role::TensorData, false, ranks.collect());
            }
        }
        if ep > 1 {
            let edp = cp * dp / ep;
            for p in 0..pp {
                for e in 0..edp {
                    for t in 0..tp {
                        let ranks = (0..ep).map(|x| self.expert_rank(t, x, e, p)).collect();
                        let g = self.add("EXPERT_MODEL_PARALLEL_GROUP", Role::Expert, false, ranks);
                        self.use_for(g, |u, g| u.expert = g);
                    }
                }
            }
            for p in 0..pp {
                for x in 0..ep {
                    for t in 0..tp {
                        let ranks = (0..edp).map(|e| self.expert_rank(t, x, e, p)).collect();
                        self.add("EXPERT_DATA_PARALLEL_GROUP", Role::ExpertData, false, ranks);
                    }
                }
            }
        }
    }

    fn torchtitan_groups(&mut self) {
        let world = self.add("default_pg", Role::World, false, (0..self.world).collect());
        self.use_for(world, |u, g| u.world = g);
        // The mesh [pp, dp, cp, tp] without its dimensions of size 1 (torchtitan's
        // ParallelDims builds only the enabled ones), last dimension fastest.
        let dims: Vec<(&str, u32, Role)> = [
            ("pp", self.pp, Role::Pipeline),
            ("dp", self.dp, Role::Data),
            ("cp", self.cp, Role::Context),
            ("tp", self.tp, Role::Tensor),
        ]
        .into_iter()
        .filter(|d| d.1 > 1)
        .collect();
        let sizes: Vec<u32> = dims.iter().map(|d| d.1).collect();
        for (i, &(name, _, role)) in dims.iter().enumerate() {
            for ranks in mesh_groups(&sizes, &[i]) {
                let g = self.add(&format!("mesh_{name}"), role, false, ranks);
                match role {
                    Role::Pipeline => self.use_for(g, |u, g| u.pipeline = g),
                    Role::Context => self.use_for(g, |u, g| u.context = g),
                    Role::Tensor => self.use_for(g, |u, g| u.tensor = g),
                    _ => {}
                }
                if role == Role::Data && self.cp == 1 {
                    self.use_for(g, |u, g| u.grad = g);
                }
            }
        }
        // A missing dimension of size 1 is every rank on its own: no group, no traffic.
        for r in 0..self.world as usize {
            if let Some(u) = self.uses.get_mut(r) {
                if self.tp == 1 {
                    u.tensor = usize::MAX;
                }
                if self.pp == 1 {
                    u.pipeline = usize::MAX;
                }
                if self.cp == 1 {
                    u.context = usize::MAX;
                }
            }
        }
        let pos = |n: &str| dims.iter().position(|d| d.0 == n);
        if self.cp > 1 {
            // `mesh["dp", "cp"]._flatten("dp_cp")`: the gradient group.
            let flat: Vec<usize> = [pos("dp"), pos("cp")].into_iter().flatten().collect();
            for ranks in mesh_groups(&sizes, &flat) {
                let g = self.add("mesh_dp_cp", Role::DataContext, false, ranks);
                self.use_for(g, |u, g| u.grad = g);
            }
        }
        if self.dp == 1 && self.cp == 1 {
            for r in 0..self.world as usize {
                if let Some(u) = self.uses.get_mut(r) {
                    u.grad = usize::MAX;
                }
            }
        }
        // The gradient norm over the model-parallel ranks: torchtitan reduces it over the whole
        // mesh's non-data dimensions; the default group stands in for it here.
        for r in 0..self.world as usize {
            if let Some(u) = self.uses.get_mut(r) {
                u.model = world;
            }
        }
        if self.ep > 1 {
            let edp = self.cp * self.dp / self.ep;
            for p in 0..self.pp {
                for e in 0..edp {
                    for t in 0..self.tp {
                        let ranks = (0..self.ep).map(|x| self.expert_rank(t, x, e, p)).collect();
                        let g = self.add("mesh_ep", Role::Expert, false, ranks);
                        self.use_for(g, |u, g| u.expert = g);
                    }
                }
            }
        }
    }
}

/// The groups of a row-major mesh of `sizes` along the dimensions `along`, in `DeviceMesh`'s
/// order, each group's ranks ascending.
fn mesh_groups(sizes: &[u32], along: &[usize]) -> Vec<Vec<u32>> {
    let n = sizes.len();
    let stride = |d: usize| sizes.iter().skip(d + 1).product::<u32>();
    // One dimension: `swapdims(-1, dim)` puts the last dimension in its place, so the others
    // are enumerated in that order; flattened dimensions: the others in mesh order.
    let rest: Vec<usize> = match along {
        [i] => (0..n.saturating_sub(1)).map(|p| if p == *i { n - 1 } else { p }).filter(|d| d != i).collect(),
        _ => (0..n).filter(|d| !along.contains(d)).collect(),
    };
    let count = |dims: &[usize]| dims.iter().map(|&d| sizes.get(d).copied().unwrap_or(1)).product::<u32>();
    let index = |dims: &[usize], mut i: u32| -> u32 {
        // Row-major digits of `i` over `dims`, as a rank offset.
        let mut off = 0;
        for &d in dims.iter().rev() {
            let s = sizes.get(d).copied().unwrap_or(1).max(1);
            off += (i % s) * stride(d);
            i /= s;
        }
        off
    };
    (0..count(&rest))
        .map(|g| {
            let base = index(&rest, g);
            let mut ranks: Vec<u32> = (0..count(along)).map(|j| base + index(along, j)).collect();
            ranks.sort_unstable();
            ranks
        })
        .collect()
}

/// Host `host`'s clock offset in ns: a magnitude uniform within a random decade from 1 µs to
/// 100 ms (so every decade is as likely; a decade above `max_ns` draws from its last tenth
/// below it), and a random sign; integer draws only, the same on every platform.
fn host_offset(seed: u64, host: u64, max_ns: i64) -> i64 {
    let mut rng = Rng::derive(seed, u32::try_from(host).unwrap_or(u32::MAX), RNG_CLOCK);
    let decade = rng.range(0, 4);
    let mut lo = 1_000i64;
    for _ in 0..decade {
        lo *= 10;
    }
    // The top decades are cut at the bound, not piled on it.
    let hi = (lo * 10 - 1).min(max_ns.max(0));
    let ns = rng.range(lo.min(hi / 10 * 9), hi);
    if rng.range(0, 1) == 0 {
        -ns
    } else {
        ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mesh_groups_follow_device_mesh() {
        // 2 × 3 mesh: rows [0, 1, 2], [3, 4, 5].
        assert_eq!(mesh_groups(&[2, 3], &[1]), vec![vec![0, 1, 2], vec![3, 4, 5]]);
        assert_eq!(mesh_groups(&[2, 3], &[0]), vec![vec![0, 3], vec![1, 4], vec![2, 5]]);
        assert_eq!(mesh_groups(&[2, 3], &[0, 1]), vec![vec![0, 1, 2, 3, 4, 5]]);
        // (pp 2, dp 2, tp 2): pp groups enumerate tp outermost (swapdims(-1, 0)).
        assert_eq!(mesh_groups(&[2, 2, 2], &[0]), vec![vec![0, 4], vec![2, 6], vec![1, 5], vec![3, 7]]);
    }

    #[test]
    fn list_args_are_cut_after_thirty() {
        let r: Vec<u32> = (0..32).collect();
        assert!(list_arg(&r).ends_with("28, 29, ...]"));
        assert_eq!(list_arg(&[1, 2]), "[1, 2]");
    }
}
