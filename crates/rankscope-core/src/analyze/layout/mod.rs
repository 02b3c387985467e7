//! The job as its parallel layout: every process group its collectives ran on, with its ranks,
//! its role (tensor, context, pipeline, data, shard, replicate, expert) and why, and each
//! collective instance put in its group before anything is matched across ranks.
//!
//! **Groups** come from every source the inputs have, in this order of trust: the user's
//! `--layout`; `distributedInfo.pg_config` of each trace (each rank lists the groups it is in:
//! torch names groups from one global counter, so a name means the same group on every rank);
//! the `Process Group Name` / `Process Group Description` / `Process Group Ranks` arguments that
//! recent Kineto writes on communication kernels and `record_param_comms`. A group seen only as
//! a name on collectives keeps the name and the ranks that ran it.
//!
//! **Which group ran each collective.** A collective that carries its group's name is in that
//! group. A collective that does not (gloo on CPU writes no group on its `gloo:*` spans nor on
//! the `c10d::*` ops) is placed by the backend's structure: a backend runs each process group
//! on lanes of its own (gloo: worker threads per group; NCCL: a stream per communicator). On
//! each rank, lanes whose collectives share a kind and size are one **channel** (gloo runs a
//! group's work on two threads). A channel of rank r is in group G when it is the one that
//! matches G's other members: the same collectives, step by step (kind, size, count), that end
//! together (a collective completes on all its members at once; on one host's clock the ends
//! agree within the transfer, and across clocks they differ by one constant). Groups are decided
//! most confident first (the largest margin between the best channel and the next), the job's
//! own groups before torch's default group, each channel joins one group, and a rank's channel
//! left without a fit stays unplaced (its collectives keep an empty group, as before layouts
//! were known). On gloo the order the groups were made in bounds which channel can be which
//! (thread ids grow with creation: `place::Order`). Point-to-point exchanges go
//! with their lane's group, else to the smallest group holding both ends.
//!
//! **Roles**, each with the evidence said in words: from names first (Megatron-LM's group
//! descriptions `TENSOR_MODEL_PARALLEL_GROUP`, `DATA_PARALLEL_GROUP`, …; DeviceMesh's
//! `mesh_tp`, `mesh_dp_shard`, …); then from use: point-to-point along a chain is a pipeline,
//! along a ring a context-parallel ring; all_to_all is expert parallelism; all_gather with
//! reduce_scatter is a sharded data-parallel group (FSDP / ZeRO-3); an all_reduce issued in
//! forward is tensor parallelism (activations, in forward and backward), one issued from
//! backward or after it carries gradients (data parallel; replicate when another group
//! shards). The world group is data parallel when it alone carries gradients.
//!
//! **The mesh**: groups of one role that partition the world are a dimension of size n and
//! stride s (their ranks r, r + s, …); the dimensions in stride order are the job's layout
//! (tensor 2 × data 2 for Megatron's TP 2 × DP 2).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::instances::Instance;
use super::RankPart;

crate::named_enum! {
    /// What a process group is for.
    pub enum Role {
        /// Tensor parallelism (activations all-reduced in every layer).
        Tensor => "tensor",
        /// Context (sequence) parallelism: a ring of point-to-point exchanges or all-gathers of
        /// keys and values.
        Context => "context",
        /// Pipeline parallelism: activations sent between neighbour stages.
        Pipeline => "pipeline",
        /// Expert parallelism: all_to_all dispatch and combine.
        Expert => "expert",
        /// Data parallelism: gradients all-reduced once per step.
        Data => "data",
        /// Sharded data parallelism (FSDP / ZeRO-3): parameters gathered, gradients
        /// reduce-scattered.
        Shard => "shard",
        /// The replicas of a sharded data-parallel job (HSDP): gradients all-reduced across them.
        Replicate => "replicate",
        /// The whole world, for what is not one of the above (a loss, a barrier, metrics).
        World => "world",
        /// Not known.
        Unknown => "unknown",
    }
}

impl Role {
    /// The role's words in a sentence ("tensor-parallel", "data-parallel").
    pub fn adjective(self) -> &'static str {
        match self {
            Role::Tensor => "tensor-parallel",
            Role::Context => "context-parallel",
            Role::Pipeline => "pipeline",
            Role::Expert => "expert-parallel",
            Role::Data => "data-parallel",
            Role::Shard => "sharded data-parallel",
            Role::Replicate => "replica",
            Role::World => "world",
            Role::Unknown => "process",
        }
    }

    /// Its traffic is the model's activations (a tensor-parallel layer's all_reduce, a context
    /// ring's keys and values, experts' tokens, a stage's output): the model needs each call
    /// where it is, so their number and size follow from the model and its micro-batches, never
    /// from a bucketing knob or a synchronization the loop could take out.
    pub fn moves_activations(self) -> bool {
        matches!(self, Role::Tensor | Role::Context | Role::Expert | Role::Pipeline)
    }
}

crate::named_enum! {
    /// Where a group's membership was read.
    pub enum GroupSource {
        /// The user's `--layout`.
        User => "user",
        /// `distributedInfo.pg_config` of the traces.
        PgConfig => "pg_config",
        /// The group arguments of the collectives (`Process Group Name` / `Ranks`).
        CommArgs => "comm_args",
        /// Only a name on the collectives; its ranks are those that ran it.
        Collectives => "collectives",
    }
}

crate::named_enum! {
    /// How a rank's collectives were put in their groups.
    pub enum Placement {
        /// Every collective carried its group's name.
        ByName => "by_name",
        /// The rank is in one group only.
        OnlyGroup => "only_group",
        /// By the backend's lanes matched across the group's members (module doc).
        ByLanes => "by_lanes",
        /// Not placed: no group fits.
        Unplaced => "unplaced",
    }
}

crate::named_enum! {
    /// What a role was decided from.
    pub enum RoleFrom {
        User => "user",
        Name => "name",
        Use => "use",
        NotKnown => "not_known",
    }
}

/// A process group as one rank's trace states it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct GroupClaim {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desc: Option<String>,
    /// Global ranks; empty when the trace does not list them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<u32>,
    pub source: GroupSource,
}

/// One process group of the job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Group {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desc: Option<String>,
    pub ranks: Vec<u32>,
    pub source: GroupSource,
    pub role: Role,
    pub role_from: RoleFrom,
    /// Why this role, in words.
    pub role_evidence: String,
    /// Collective instances (all ranks, point-to-point included) placed in it.
    pub instances: u64,
    /// Distinct hosts of its members, when the traces name them (0 when none does).
    pub hosts: u32,
    /// Per member and profiled step (mean): its time in the group's collectives and exchanges
    /// that is exposed transfer (nothing computes and every member is in it), and waiting for
    /// the group's other members ([`crate::analyze::waits`]).
    #[serde(default)]
    pub exposed_transfer_ns: i64,
    #[serde(default)]
    pub wait_ns: i64,
}

/// One dimension of the mesh: groups of one role that partition the world.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MeshDim {
    pub role: Role,
    pub size: u32,
    pub stride: u32,
}

/// How one rank's collectives were placed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RankPlacement {
    pub rank: u32,
    pub placement: Placement,
    /// Instances left without a group.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unplaced: u32,
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}

/// The job's layout.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Layout {
    pub groups: Vec<Group>,
    /// Fastest-varying first (the smallest stride).
    pub mesh: Vec<MeshDim>,
    pub placement: Vec<RankPlacement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Layout {
    /// The group named `name`.
    pub fn group(&self, name: &str) -> Option<&Group> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// The role of the group named `name` (unknown when there is none).
    pub fn role_of(&self, name: &str) -> Role {
        self.group(name).map_or(Role::Unknown, |g| g.role)
    }

    /// "tensor 2 × data 2", or empty without a mesh.
    pub fn mesh_words(&self) -> String {
        self.mesh.iter().map(|d| format!("{} {}", d.role, d.size)).collect::<Vec<_>>().join(" × ")
    }
}

/// One rank's groups as its trace states them: `distributedInfo.pg_config`, then the group
/// arguments of its communication events.
pub fn rank_claims(t: &crate::model::RankTrace, strings: &crate::model::StringTable) -> Vec<GroupClaim> {
    let mut out: BTreeMap<String, GroupClaim> = BTreeMap::new();
    if let Some(d) = &t.meta.distributed {
        for g in &d.pg_config {
            let ranks: Vec<u32> = g.ranks.iter().filter_map(|&r| u32::try_from(r).ok()).collect();
            out.entry(g.name.clone()).or_insert(GroupClaim {
                name: g.name.clone(),
                desc: g.desc.clone().filter(|d| !d.is_empty() && d != "undefined"),
                ranks,
                source: GroupSource::PgConfig,
            });
        }
    }
    let c = &t.comm;
    let mut seen = BTreeSet::new();
    for a in 0..c.pg_name.len() {
        let (n, d, r) = (c.pg_name[a], c.pg_desc.get(a).copied(), c.pg_ranks.get(a).copied());
        if n == crate::model::StrId::EMPTY || !seen.insert((n, d, r)) {
            continue;
        }
        let name = strings.get(n).to_string();
        let claim = out.entry(name.clone()).or_insert(GroupClaim {
            name,
            desc: None,
            ranks: Vec::new(),
            source: GroupSource::CommArgs,
        });
        if claim.desc.is_none() {
            claim.desc = d.map(|d| strings.get(d).to_string()).filter(|d| !d.is_empty() && d != "undefined");
        }
        if claim.ranks.is_empty() {
            claim.ranks = r
                .map(|r| super::instances::parse_ranks(strings.get(r)))
                .unwrap_or_default()
                .into_iter()
                .filter_map(|x| u32::try_from(x).ok())
                .collect();
        }
    }
    out.into_values().collect()
}

/// Builds the layout from every rank's claims and places each collective instance in its group
/// (`insts[k]` are `parts[k]`'s). Instances that cannot be placed keep their group name (empty
/// when unknown).
pub fn build(parts: &[RankPart], insts: &mut [Vec<Instance>], user: Option<&UserLayout>) -> Layout {
    let mut layout = Layout::default();
    let mut groups = collect_groups(parts, insts, user, &mut layout.notes);
    if groups.is_empty() {
        return layout;
    }
    let ranks: Vec<u32> = parts.iter().map(|p| p.info.rank).collect();
    layout.placement = place::place(parts, insts, &groups);
    // Roles, from names, then use.
    let sharded = groups.iter().any(|g| g.role == Role::Shard);
    let usage = roles::usage(parts, insts);
    let mut any_shard = sharded;
    for g in &mut groups {
        if g.role_from != RoleFrom::NotKnown {
            continue;
        }
        if let Some((role, why)) = roles::role_from_name(g) {
            (g.role, g.role_from, g.role_evidence) = (role, RoleFrom::Name, why);
        }
        // A name gives the dimension, its use how it is run: a data-parallel dimension whose
        // collectives gather the parameters for forward and backward and reduce the gradients
        // is sharded (FSDP on a mesh dimension named `dp`, as PyTorch's 2-D FSDP + TP recipe
        // names it; ZeRO-3 on `data_parallel_group`). Gathers after the optimizer step (ZeRO-1/2,
        // Megatron's distributed optimizer) leave it data-parallel.
        if g.role == Role::Data && g.role_from == RoleFrom::Name {
            let used = usage.get(&g.name).filter(|u| roles::gathers_for_compute(u));
            if let Some((Role::Shard, how)) = used.and_then(|u| roles::role_from_use(u, g)) {
                g.role = Role::Shard;
                g.role_evidence = format!("{}, run sharded: {how}", g.role_evidence);
            }
        }
    }
    for g in &mut groups {
        if g.role_from == RoleFrom::NotKnown {
            if let Some((role, why)) = usage.get(&g.name).and_then(|u| roles::role_from_use(u, g)) {
                (g.role, g.role_from, g.role_evidence) = (role, RoleFrom::Use, why);
            }
        }
        any_shard |= g.role == Role::Shard;
    }
    let world: BTreeSet<u32> = ranks.iter().copied().collect();
    let grad_groups = groups.iter().filter(|g| matches!(g.role, Role::Data | Role::Replicate)).count();
    // Groups with a role of their own that are not the whole world: the job has dimensions
    // besides the one its default group might carry.
    let sub_dims =
        groups.iter().any(|g| g.role != Role::Unknown && g.ranks.len() > 1 && g.ranks.len() < world.len());
    for g in &mut groups {
        if any_shard && g.role == Role::Data && g.role_from == RoleFrom::Use {
            g.role = Role::Replicate;
            g.role_evidence.push_str("; another group shards the parameters, so these are its replicas");
        }
        let is_world = g.ranks.len() >= world.len() && world.iter().all(|r| g.ranks.binary_search(r).is_ok());
        if is_world && g.role_from == RoleFrom::Use && g.role == Role::Data && grad_groups > 1 {
            g.role = Role::World;
        }
        // In a job with other dimensions, the default group carrying exchanges (a job that
        // sends on it with global ranks) is no pipeline or ring of its own: the exchanges chain
        // the stages. In a pure pipeline job the default group is the pipeline.
        let default = g.desc.as_deref() == Some("default_pg");
        if default
            && sub_dims
            && g.role_from == RoleFrom::Use
            && matches!(g.role, Role::Pipeline | Role::Context)
        {
            g.role = Role::World;
            g.role_evidence
                .push_str(" on the whole world: the exchanges chain the stages, the group is every rank");
        }
        if is_world && g.role == Role::Unknown {
            (g.role, g.role_evidence) = (Role::World, "every rank".into());
        }
        g.instances = usage.get(&g.name).map_or(0, |u| u.calls);
        let hosts: BTreeSet<String> = parts
            .iter()
            .filter(|p| g.ranks.binary_search(&p.info.rank).is_ok())
            .filter_map(|p| p.info.host.as_deref().and_then(crate::analyze::align::host_key))
            .collect();
        g.hosts = hosts.len() as u32;
    }
    layout.mesh = mesh(&groups, parts.iter().filter_map(|p| p.world_size).max());
    layout.groups = groups;
    layout
}

/// Every group, from the user's layout, the claims and the names on the instances.
fn collect_groups(
    parts: &[RankPart],
    insts: &[Vec<Instance>],
    user: Option<&UserLayout>,
    notes: &mut Vec<String>,
) -> Vec<Group> {
    let mut by_name: BTreeMap<String, Group> = BTreeMap::new();
    let new = |name: &str, desc: Option<String>, ranks: Vec<u32>, source: GroupSource| Group {
        name: name.to_string(),
        desc,
        ranks,
        source,
        role: Role::Unknown,
        role_from: RoleFrom::NotKnown,
        role_evidence: String::new(),
        instances: 0,
        hosts: 0,
        exposed_transfer_ns: 0,
        wait_ns: 0,
    };
    // Each rank lists the groups it is in: it is a member of each, whether or not the list of
    // ranks it writes is whole (torch cuts a long list short).
    let mut claimants: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    let mut disagree: BTreeSet<String> = BTreeSet::new();
    for p in parts {
        for c in &p.groups {
            let mut ranks = c.ranks.clone();
            ranks.sort_unstable();
            ranks.dedup();
            if c.source == GroupSource::PgConfig {
                claimants.entry(c.name.clone()).or_default().insert(p.info.rank);
            }
            match by_name.get_mut(&c.name) {
                None => {
                    by_name.insert(c.name.clone(), new(&c.name, c.desc.clone(), ranks, c.source));
                }
                Some(g) => {
                    if g.ranks.is_empty() {
                        g.ranks = ranks;
                    } else if !ranks.is_empty() && ranks != g.ranks && disagree.insert(c.name.clone()) {
                        notes.push(format!(
                            "rank {} lists group `{}` with other ranks than an earlier trace; the first list is kept",
                            p.info.rank, c.name
                        ));
                    }
                    if g.desc.is_none() {
                        g.desc = c.desc.clone();
                    }
                }
            }
        }
    }
    for (name, members) in claimants {
        if let Some(g) = by_name.get_mut(&name) {
            let mut all: BTreeSet<u32> = g.ranks.iter().copied().collect();
            all.extend(members);
            g.ranks = all.into_iter().collect();
        }
    }
    // Names seen only on the collectives: their members are the ranks that ran them.
    for (p, v) in parts.iter().zip(insts) {
        for x in v.iter().filter(|x| !x.pg.is_empty()) {
            let g = by_name
                .entry(x.pg.clone())
                .or_insert_with(|| new(&x.pg, None, Vec::new(), GroupSource::Collectives));
            if g.source == GroupSource::Collectives {
                if let Err(k) = g.ranks.binary_search(&p.info.rank) {
                    g.ranks.insert(k, p.info.rank);
                }
            }
        }
    }
    // The user's layout: its groups name the traces' groups of the same ranks, or stand for
    // them when the traces have none.
    if let Some(u) = user {
        let world = parts.iter().filter_map(|p| p.world_size).max().unwrap_or(parts.len() as i64);
        if i64::from(u.world()) != world {
            notes.push(format!(
                "the layout given describes {} ranks, the traces a world of {world}: it is not used",
                u.world()
            ));
        } else {
            for (role, ranks) in u.groups() {
                let known = by_name.values_mut().find(|g| g.ranks == ranks);
                match known {
                    Some(g) => {
                        (g.role, g.role_from) = (role, RoleFrom::User);
                        g.role_evidence = "as the layout given says".into();
                    }
                    None => {
                        let name = format!("{}:{}", role, ranks.first().copied().unwrap_or(0));
                        let mut g = new(&name, None, ranks, GroupSource::User);
                        (g.role, g.role_from) = (role, RoleFrom::User);
                        g.role_evidence = "as the layout given says".into();
                        by_name.insert(name, g);
                    }
                }
            }
        }
    }
    by_name.into_values().filter(|g| g.ranks.len() >= 2 || g.source == GroupSource::Collectives).collect()
}

/// The dimensions the groups form: per role, groups that partition the world as arithmetic
/// progressions of one stride.
fn mesh(groups: &[Group], world: Option<i64>) -> Vec<MeshDim> {
    let Some(world) = world.and_then(|w| u32::try_from(w).ok()).filter(|&w| w >= 2) else {
        return Vec::new();
    };
    // Per role, per size: the distinct rank sets (a group's gloo twin, Megatron's `*_GLOO`
    // groups, is the same set).
    let mut by_role: BTreeMap<(Role, usize), BTreeSet<&[u32]>> = BTreeMap::new();
    for g in groups.iter().filter(|g| {
        g.ranks.len() >= 2 && (g.ranks.len() as u32) < world && !matches!(g.role, Role::Unknown | Role::World)
    }) {
        by_role.entry((g.role, g.ranks.len())).or_default().insert(g.ranks.as_slice());
    }
    let mut out = Vec::new();
    for ((role, size), sets) in by_role {
        let gs: Vec<&[u32]> = sets.into_iter().collect();
        let size = size as u32;
        let stride = gs[0][1].saturating_sub(gs[0][0]);
        let regular = gs.iter().all(|g| g.windows(2).all(|w| w[1].checked_sub(w[0]) == Some(stride)));
        let covered: BTreeSet<u32> = gs.iter().flat_map(|g| g.iter().copied()).collect();
        if regular
            && stride > 0
            && covered.len() as u32 == world
            && gs.len() as u32 * size == world
            && !out.iter().any(|d: &MeshDim| d.role == role)
        {
            out.push(MeshDim { role, size, stride });
        }
    }
    out.sort_by_key(|d| d.stride);
    out
}

mod place;
mod roles;
mod user;

pub use place::SIBLING_TIDS;
pub use roles::GRADIENT_BYTES;
pub use user::UserLayout;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;

/// Fills each group's exposed transfer and wait (per member and step, [`Group::exposed_transfer_ns`]):
/// per rank, the union of its instances in the group, against its transfer / wait split.
/// `insts[k]` (rank, instances) and `waits[k]` belong together; `steps` the profiled steps.
pub fn fill_costs(
    layout: &mut Layout,
    insts: &[(u32, Vec<Instance>)],
    waits: &[super::waits::RankWait],
    steps: usize,
) {
    use super::intervals::Set;
    let mut acc: BTreeMap<&str, (i64, i64, usize)> = BTreeMap::new();
    for ((_, v), w) in insts.iter().zip(waits) {
        let mut by_group: BTreeMap<&str, Vec<super::intervals::Iv>> = BTreeMap::new();
        for x in v.iter().filter(|x| !x.pg.is_empty()) {
            by_group.entry(x.pg.as_str()).or_default().push((x.start_ns, x.end_ns));
        }
        for (g, ivs) in by_group {
            let set = Set::from_unsorted(ivs);
            let e = acc.entry(g).or_default();
            e.0 += w.exposed_transfer.intersect(&set).len_ns();
            e.1 += w.wait.intersect(&set).len_ns();
            e.2 += 1;
        }
    }
    let steps = steps.max(1) as i64;
    for g in &mut layout.groups {
        if let Some(&(t, wait, members)) = acc.get(g.name.as_str()) {
            let n = members.max(1) as i64 * steps;
            g.exposed_transfer_ns = t / n;
            g.wait_ns = wait / n;
        }
    }
}
