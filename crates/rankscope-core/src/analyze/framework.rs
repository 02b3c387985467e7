//! Which training frameworks the job runs under, read from the names the frameworks give their
//! own work in the trace (docs/metrics.md, "Frameworks"). Advice is given in the terms of the
//! frameworks found and never for one the job does not use: DDP's buckets are no advice for an
//! FSDP job, and FSDP's parameter all-gathers are its design, not a host synchronization.
//!
//! Each framework is recognised by the annotations it writes into every profiled step, whatever
//! the user annotates:
//! - **DDP**: `DistributedDataParallel.forward` (the module's forward under `record_function`).
//! - **FSDP2** (`fully_shard`): `FSDP::pre_forward`, `FSDP::all_gather`,
//!   `FSDP::post_backward_reduce`, … (every label starts with `FSDP::`).
//! - **FSDP1** (`FullyShardedDataParallel`): `FullyShardedDataParallel.forward`,
//!   `FullyShardedDataParallel._pre_forward`, ….
//! - **DeepSpeed**: names that carry `DeepSpeed` or `deepspeed` (the engine's forward, its ZeRO
//!   optimizers' steps).
//! - **Megatron-LM**: names that carry `megatron`.
//! - **ZeroRedundancyOptimizer** (PyTorch's ZeRO-1): its step, `Optimizer.step#ZeroRedundancyOptimizer.step`,
//!   which broadcasts each rank's updated shard.
//! - **torch.distributed.pipelining**: `PipelineStage` and its schedules' `Forward i` /
//!   `Backward i` (also read by [`super::pipeline`]).
//!
//! The list is data ([`SIGNS`]); adding a framework is a line there and its advice in the causes.

use serde::{Deserialize, Serialize};

use super::attribution::{OriginRow, RegionRow};

/// A training framework the trace shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Framework {
    /// `torch.nn.parallel.DistributedDataParallel`.
    Ddp,
    /// FSDP2, `torch.distributed.fsdp.fully_shard`.
    Fsdp2,
    /// FSDP1, `FullyShardedDataParallel`.
    Fsdp1,
    /// DeepSpeed (its engine, ZeRO).
    #[serde(rename = "deepspeed")]
    DeepSpeed,
    /// Megatron-LM.
    Megatron,
    /// `torch.distributed.pipelining`.
    Pipelining,
    /// `torch.distributed.optim.ZeroRedundancyOptimizer` (ZeRO stage 1).
    #[serde(rename = "zero_redundancy_optimizer")]
    ZeroRedundancy,
}

impl Framework {
    /// As users call it.
    pub fn name(self) -> &'static str {
        match self {
            Framework::Ddp => "DDP",
            Framework::Fsdp2 => "FSDP2",
            Framework::Fsdp1 => "FSDP",
            Framework::DeepSpeed => "DeepSpeed",
            Framework::Megatron => "Megatron-LM",
            Framework::Pipelining => "torch.distributed.pipelining",
            Framework::ZeroRedundancy => "ZeroRedundancyOptimizer",
        }
    }

    /// Shards parameters (all-gathers them before use, reduce-scatters gradients).
    pub fn shards(self) -> bool {
        matches!(self, Framework::Fsdp2 | Framework::Fsdp1)
    }

    /// Its own regions issue collectives as part of its design (FSDP's gathers and reductions
    /// per unit, ZeroRedundancyOptimizer's broadcast of each rank's updated shard): never a
    /// synchronization the training loop added.
    pub fn owns_traffic(self) -> bool {
        self.shards() || self == Framework::ZeroRedundancy
    }
}

/// How a name shows a framework.
#[derive(Debug, Clone, Copy)]
enum Sign {
    Prefix(&'static str),
    Contains(&'static str),
    /// `Forward 3`, `Backward 0`: a word and a micro-batch number.
    Numbered(&'static str),
}

/// Every sign, in the order frameworks are listed.
const SIGNS: &[(Framework, Sign)] = &[
    (Framework::Ddp, Sign::Prefix("DistributedDataParallel.")),
    (Framework::Fsdp2, Sign::Prefix("FSDP::")),
    (Framework::Fsdp1, Sign::Prefix("FullyShardedDataParallel.")),
    (Framework::DeepSpeed, Sign::Contains("DeepSpeed")),
    (Framework::DeepSpeed, Sign::Contains("deepspeed")),
    (Framework::Megatron, Sign::Contains("megatron")),
    (Framework::Megatron, Sign::Contains("Megatron")),
    (Framework::Pipelining, Sign::Prefix("PipelineStage")),
    (Framework::Pipelining, Sign::Numbered("Forward ")),
    (Framework::Pipelining, Sign::Numbered("Backward ")),
    (Framework::ZeroRedundancy, Sign::Contains("ZeroRedundancyOptimizer")),
];

impl Sign {
    fn shows(self, name: &str) -> bool {
        match self {
            Sign::Prefix(p) => name.starts_with(p),
            Sign::Contains(c) => name.contains(c),
            Sign::Numbered(w) => {
                name.strip_prefix(w).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            }
        }
    }
}

/// The framework whose own annotation `name` is, if any.
pub fn of_name(name: &str) -> Option<Framework> {
    SIGNS.iter().find(|(_, sign)| sign.shows(name)).map(|&(fw, _)| fw)
}

/// A framework the trace shows, with the name that shows it and on how many ranks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameworkSeen {
    pub framework: Framework,
    /// The first name (in name order) that shows it.
    pub evidence: String,
    pub ranks: u32,
}

/// The frameworks the regions and the collectives' origins name, each once, in [`Framework`]'s
/// order.
pub fn seen(regions: &[RegionRow], origins: &[OriginRow]) -> Vec<FrameworkSeen> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut by: BTreeMap<Framework, (String, BTreeSet<u32>)> = BTreeMap::new();
    let names = regions
        .iter()
        .map(|r| (r.rank, r.name.as_str()))
        .chain(origins.iter().map(|o| (o.rank, o.region.as_str())));
    for (rank, name) in names {
        for &(fw, sign) in SIGNS {
            if sign.shows(name) {
                let e = by.entry(fw).or_insert_with(|| (name.to_string(), BTreeSet::new()));
                if name < e.0.as_str() {
                    e.0 = name.to_string();
                }
                e.1.insert(rank);
            }
        }
    }
    by.into_iter()
        .map(|(framework, (evidence, ranks))| FrameworkSeen {
            framework,
            evidence,
            ranks: u32::try_from(ranks.len()).unwrap_or(u32::MAX),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs() {
        assert!(Sign::Numbered("Forward ").shows("Forward 12"));
        assert!(!Sign::Numbered("Forward ").shows("Forward pass"));
        assert!(!Sign::Numbered("Forward ").shows("Forward "));
        assert!(Sign::Prefix("FSDP::").shows("FSDP::all_gather (2)"));
        assert_eq!(of_name("Optimizer.step#ZeroRedundancyOptimizer.step"), Some(Framework::ZeroRedundancy));
    }
}
