//! The facts every cause reads: the analysis, the matched collectives, the thresholds, and the
//! steps that ran to the end, with a few per-rank means computed once.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use crate::analyze::breakdown::{MetricsFrom, StepRank};
use crate::analyze::collectives::Op;
use crate::analyze::framework::Framework;
use crate::analyze::whatif::timeline::{Counterfactual, ReplayedFix};
use crate::analyze::whatif::Model;
use crate::analyze::Analysis;
use crate::finding::{Finding, Severity, Thresholds};

/// Shared facts the causes read.
#[derive(Debug)]
pub struct Ctx<'a> {
    pub a: &'a Analysis,
    /// The job's collectives matched across ranks (a hang's partial ones flagged).
    pub ops: &'a [Op],
    pub th: &'a Thresholds,
    /// The steps that ran to the end (a stopped job's last steps are no steady state), each
    /// with its rows.
    pub per_step: BTreeMap<u32, Vec<&'a StepRank>>,
    /// Mean step wall time over ranks and steps.
    pub step_ns: f64,
    pub all_steps: Vec<u32>,
    pub ranks: Vec<u32>,
    pub cpu_only: bool,
    /// Ranks whose metrics come from the CPU (looked up per rank: a set, not a scan).
    cpu_ranks: BTreeSet<u32>,
    /// Per rank: the mean of its steps' wall time (computed once; read per rank).
    rank_step: BTreeMap<u32, f64>,
    /// The job's what-if model, for counterfactual replays ([`crate::analyze::whatif`]).
    pub model: Option<&'a Model>,
    /// The changes the causes replayed their findings' gains with ([`Ctx::replayed_with`]),
    /// taken by the candidates they found ([`super::run`]).
    replays: RefCell<Vec<ReplayedFix>>,
}

impl<'a> Ctx<'a> {
    /// The facts of `a` on every step but the `stopped` ones.
    pub fn new(a: &'a Analysis, ops: &'a [Op], th: &'a Thresholds, stopped: &BTreeSet<u32>) -> Ctx<'a> {
        let mut per_step: BTreeMap<u32, Vec<&StepRank>> = BTreeMap::new();
        for s in a.steps.iter().filter(|s| !stopped.contains(&s.step)) {
            per_step.insert(s.step, s.per_rank.iter().collect());
        }
        let walls: Vec<f64> = per_step.values().flat_map(|v| v.iter().map(|r| r.wall_ns as f64)).collect();
        let step_ns = if walls.is_empty() { 0.0 } else { walls.iter().sum::<f64>() / walls.len() as f64 };
        let mut cx = Ctx {
            a,
            ops,
            th,
            all_steps: per_step.keys().copied().collect(),
            per_step,
            step_ns,
            ranks: a.ranks.iter().map(|r| r.rank).collect(),
            cpu_only: !a.ranks.is_empty() && a.ranks.iter().all(|r| r.metrics_from == MetricsFrom::Cpu),
            cpu_ranks: a
                .ranks
                .iter()
                .filter(|r| r.metrics_from == MetricsFrom::Cpu)
                .map(|r| r.rank)
                .collect(),
            rank_step: BTreeMap::new(),
            model: None,
            replays: RefCell::new(Vec::new()),
        };
        cx.rank_step = cx.per_rank_mean(|r| r.wall_ns).into_iter().collect();
        cx
    }

    /// Says that `f`'s gain was replayed with `change` (in words, `how`), so that the change can
    /// be replayed again for the timeline should `f` lead.
    pub fn replayed_with(&self, f: &Finding, change: Counterfactual, how: String) {
        self.replays.borrow_mut().push(ReplayedFix { finding: f.id, ranks: f.ranks.clone(), change, how });
    }

    /// The change `f`'s gain was replayed with, where its cause said so, taken.
    pub fn take_replayed(&self, f: &Finding) -> Option<(Counterfactual, String)> {
        let mut v = self.replays.borrow_mut();
        let k = v.iter().position(|x| x.finding == f.id && x.ranks == f.ranks)?;
        let x = v.swap_remove(k);
        Some((x.change, x.how))
    }

    pub fn is_cpu(&self, rank: u32) -> bool {
        self.cpu_ranks.contains(&rank)
    }

    /// Per rank: the mean over its steps of `f`.
    pub fn per_rank_mean(&self, f: impl Fn(&StepRank) -> i64) -> Vec<(u32, f64)> {
        self.per_rank_mean_step(|r, _| f(r))
    }

    /// Per rank: the mean over its steps of `f(row, step)`.
    pub fn per_rank_mean_step(&self, f: impl Fn(&StepRank, u32) -> i64) -> Vec<(u32, f64)> {
        let mut acc: BTreeMap<u32, (f64, usize)> = BTreeMap::new();
        for (&step, rows) in &self.per_step {
            for r in rows {
                let e = acc.entry(r.rank).or_default();
                e.0 += f(r, step) as f64;
                e.1 += 1;
            }
        }
        acc.into_iter().map(|(r, (s, n))| (r, s / n.max(1) as f64)).collect()
    }

    /// Whether the replay holds well enough to give gains ([`crate::analyze::whatif::WhatIf::holds`]).
    pub fn replay_usable(&self) -> bool {
        self.a.whatif.as_ref().is_some_and(|w| w.holds())
    }

    /// Whether the trace shows the framework ([`crate::analyze::framework`]).
    pub fn uses(&self, fw: Framework) -> bool {
        self.a.frameworks.iter().any(|f| f.framework == fw)
    }

    /// Whether the job shards its parameters (FSDP, FSDP2): its all-gathers and
    /// reduce-scatters are the framework's design, and DDP's buckets are no advice for it.
    pub fn sharded(&self) -> bool {
        self.a.frameworks.iter().any(|f| f.framework.shards())
    }

    /// "Use fewer, larger collectives" in the terms of the frameworks the job uses: DDP's
    /// buckets, FSDP's units, DeepSpeed's bucket sizes; every one of them when none is seen.
    /// Calls issued from a framework's own step (`origin`, the region that issues them) are
    /// that framework's: ZeroRedundancyOptimizer's broadcasts are no DDP bucket.
    pub fn fewer_larger_calls(&self, origin: &str) -> String {
        if crate::analyze::framework::of_name(origin) == Some(Framework::ZeroRedundancy) {
            return format!(
                "Use fewer, larger broadcasts: `ZeroRedundancyOptimizer` broadcasts every updated parameter tensor on its own, from `{origin}`; construct it with `parameters_as_bucket_view=True` so that each rank's shard goes out as one flat bucket."
            );
        }
        let mut ways = Vec::new();
        if self.uses(Framework::Ddp) {
            ways.push("raise DDP `bucket_cap_mb` (default 25; the first bucket stays small so communication still starts early in backward)");
        }
        if self.sharded() {
            ways.push("shard larger units (`fully_shard` / FSDP wrapping on whole blocks rather than single layers, so each all-gather and reduce-scatter carries more)");
        }
        if self.uses(Framework::DeepSpeed) {
            ways.push("raise DeepSpeed `reduce_bucket_size` / `allgather_bucket_size`");
        }
        if ways.is_empty() {
            ways.push("raise DDP `bucket_cap_mb` (default 25), DeepSpeed `reduce_bucket_size` / `allgather_bucket_size`, coarser FSDP wrapping");
        }
        format!(
            "Use fewer, larger collectives: {}, or coalesce small tensors (`torch.distributed` coalescing, flattening before all_reduce).",
            ways.join("; ")
        )
    }

    pub fn rank_step_ns(&self, rank: u32) -> f64 {
        self.rank_step.get(&rank).copied().unwrap_or(self.step_ns)
    }

    /// The least a finding must save per step to be reported: [`Thresholds::min_saving_ratio`]
    /// of the step, and at least 20 µs.
    pub fn floor_ns(&self) -> f64 {
        (self.th.min_saving_ratio * self.step_ns).max(20_000.0)
    }
}

/// The severity of a saving: high from a fifth of the step, medium from a twentieth.
pub fn severity_for(saving: f64, step: f64) -> Severity {
    let share = if step > 0.0 { saving / step } else { 0.0 };
    if share >= 0.2 {
        Severity::High
    } else if share >= 0.05 {
        Severity::Medium
    } else {
        Severity::Low
    }
}
