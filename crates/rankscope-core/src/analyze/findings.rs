//! Findings: numbers turned into ranked, plain-language statements with evidence and the fix
//! the field recommends. Each rule below names its threshold (configurable through
//! [`Thresholds`], e.g. `--threshold exposed_comm_ratio=0.15`); the rules of thumb come from
//! shared practice (DOMAIN.md): data-parallel communication above ~10% of the step is not
//! hidden; well-tuned data parallel hides > 90% of it; per-rank spread above ~5% deserves a
//! look; eager kernel launch costs ~3–10 µs per kernel.
//!
//! Findings are ranked by their estimated time cost per step (`impact_ns`), largest first.

use std::collections::BTreeMap;

use serde::Serialize;

use super::collectives::Op;
use super::Analysis;
use crate::model::CollKind;

/// Finding thresholds. Ratios are fractions of the step (0.1 = 10%).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Thresholds {
    /// Exposed communication / step wall time above this is a finding.
    pub exposed_comm_ratio: f64,
    /// Overlap coverage (hidden share of communication) below this is a finding...
    pub overlap_coverage: f64,
    /// ...when communication is at least this share of the step.
    pub min_comm_ratio_for_overlap: f64,
    /// Communication / step above this.
    pub comm_ratio: f64,
    /// A rank is a consistent straggler when named in at least this share of steps...
    pub straggler_consistency: f64,
    /// ...and its lateness is at least this share of the step.
    pub straggler_lateness_ratio: f64,
    /// (max − min) / mean compute across ranks.
    pub compute_imbalance: f64,
    /// GPU idle waiting on the host (CPU-bound gaps) / step.
    pub cpu_bound_ratio: f64,
    /// Host synchronization / step.
    pub host_sync_ratio: f64,
    /// Allocation calls per step after the first step.
    pub alloc_calls_per_step: f64,
    /// Median collective size below this many bytes...
    pub small_collective_bytes: f64,
    /// ...with at least this many collectives per step.
    pub small_collectives_per_step: f64,
    /// Step-time jitter (stdev / mean) above this.
    pub step_jitter: f64,
    /// Achieved busbw below this fraction of what nccl-tests measured at the same size.
    pub fabric_fraction: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            exposed_comm_ratio: 0.10,
            overlap_coverage: 0.90,
            min_comm_ratio_for_overlap: 0.05,
            comm_ratio: 0.40,
            straggler_consistency: 0.5,
            straggler_lateness_ratio: 0.02,
            compute_imbalance: 0.05,
            cpu_bound_ratio: 0.10,
            host_sync_ratio: 0.05,
            alloc_calls_per_step: 1.0,
            small_collective_bytes: 4.0 * 1024.0 * 1024.0,
            small_collectives_per_step: 8.0,
            step_jitter: 0.10,
            fabric_fraction: 0.5,
        }
    }
}

impl Thresholds {
    /// Sets one threshold by name (`exposed_comm_ratio=0.15`).
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), String> {
        let slot = match name {
            "exposed_comm_ratio" => &mut self.exposed_comm_ratio,
            "overlap_coverage" => &mut self.overlap_coverage,
            "min_comm_ratio_for_overlap" => &mut self.min_comm_ratio_for_overlap,
            "comm_ratio" => &mut self.comm_ratio,
            "straggler_consistency" => &mut self.straggler_consistency,
            "straggler_lateness_ratio" => &mut self.straggler_lateness_ratio,
            "compute_imbalance" => &mut self.compute_imbalance,
            "cpu_bound_ratio" => &mut self.cpu_bound_ratio,
            "host_sync_ratio" => &mut self.host_sync_ratio,
            "alloc_calls_per_step" => &mut self.alloc_calls_per_step,
            "small_collective_bytes" => &mut self.small_collective_bytes,
            "small_collectives_per_step" => &mut self.small_collectives_per_step,
            "step_jitter" => &mut self.step_jitter,
            "fabric_fraction" => &mut self.fabric_fraction,
            _ => return Err(format!("unknown threshold `{name}`")),
        };
        *slot = value;
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Low,
    Medium,
    High,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Finding {
    /// Stable identifier of the rule (`exposed_comm`, `straggler`, ...).
    pub id: &'static str,
    pub severity: Severity,
    /// One sentence: what is wrong, with the figure.
    pub message: String,
    /// What to do about it.
    pub fix: String,
    pub ranks: Vec<u32>,
    pub steps: Vec<u32>,
    /// The figures behind the message.
    pub evidence: BTreeMap<String, f64>,
    /// Estimated time cost per step (ns), used for ranking.
    pub impact_ns: i64,
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn ms(ns: f64) -> String {
    format!("{:.2} ms", ns / 1e6)
}

pub fn findings(a: &Analysis, ops: &[Op], th: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    let totals = &a.rank_totals;
    let n_steps = a.steps.len().max(1) as f64;
    let mean_wall = {
        let w: Vec<f64> =
            totals.iter().filter(|t| t.steps > 0).map(|t| t.wall_ns as f64 / t.steps as f64).collect();
        if w.is_empty() {
            0.0
        } else {
            w.iter().sum::<f64>() / w.len() as f64
        }
    };
    let all_steps: Vec<u32> = a.steps.iter().map(|s| s.step).collect();

    // Exposed communication.
    let exposed: Vec<&super::RankTotals> =
        totals.iter().filter(|t| t.exposed_comm_ratio > th.exposed_comm_ratio).collect();
    if !exposed.is_empty() {
        let worst = exposed.iter().map(|t| t.exposed_comm_ratio).fold(0.0, f64::max);
        let per_step =
            exposed.iter().map(|t| t.exposed_comm_ns as f64 / t.steps.max(1) as f64).fold(0.0, f64::max);
        out.push(Finding {
            id: "exposed_comm",
            severity: if worst > 2.0 * th.exposed_comm_ratio { Severity::High } else { Severity::Medium },
            message: format!(
                "Communication not hidden behind compute takes up to {} of the step ({} per step) on {} of {} ranks.",
                pct(worst),
                ms(per_step),
                exposed.len(),
                totals.len()
            ),
            fix: "Overlap communication with compute: for DDP make sure gradient buckets fire during backward (check `bucket_cap_mb`, avoid `find_unused_parameters` stalls, put the first-used parameters last); for FSDP enable forward/backward prefetch; keep NCCL on its own high-priority stream. If the network itself is slow, look at the Fabric evidence (nccl-tests, NCCL_DEBUG).".into(),
            ranks: exposed.iter().map(|t| t.rank).collect(),
            steps: all_steps.clone(),
            evidence: BTreeMap::from([
                ("max_exposed_comm_ratio".into(), worst),
                ("max_exposed_comm_ns_per_step".into(), per_step),
                ("threshold".into(), th.exposed_comm_ratio),
            ]),
            impact_ns: per_step as i64,
        });
    }

    // Overlap coverage.
    let low_overlap: Vec<&super::RankTotals> = totals
        .iter()
        .filter(|t| t.comm_ratio >= th.min_comm_ratio_for_overlap && t.overlap_coverage < th.overlap_coverage)
        .collect();
    if !low_overlap.is_empty() {
        let worst = low_overlap.iter().map(|t| t.overlap_coverage).fold(1.0, f64::min);
        out.push(Finding {
            id: "low_overlap",
            severity: if worst < 0.5 { Severity::Medium } else { Severity::Low },
            message: format!(
                "Only {} of communication time is hidden under compute on the worst rank (well-tuned data parallel hides more than {}).",
                pct(worst),
                pct(th.overlap_coverage)
            ),
            fix: "Launch collectives earlier so they run under compute: smaller first buckets, DDP `gradient_as_bucket_view`, FSDP `backward_prefetch=BACKWARD_PRE`, and avoid host synchronizations that serialize the streams.".into(),
            ranks: low_overlap.iter().map(|t| t.rank).collect(),
            steps: all_steps.clone(),
            evidence: BTreeMap::from([("min_overlap_coverage".into(), worst), ("threshold".into(), th.overlap_coverage)]),
            impact_ns: low_overlap.iter().map(|t| (t.comm_ns - t.overlap_ns) as f64 / t.steps.max(1) as f64).fold(0.0, f64::max) as i64 / 2,
        });
    }

    // Communication share of the step.
    let heavy: Vec<&super::RankTotals> = totals.iter().filter(|t| t.comm_ratio > th.comm_ratio).collect();
    if !heavy.is_empty() {
        let worst = heavy.iter().map(|t| t.comm_ratio).fold(0.0, f64::max);
        out.push(Finding {
            id: "comm_heavy",
            severity: Severity::Medium,
            message: format!("Communication occupies {} of the step on the worst rank (above {}).", pct(worst), pct(th.comm_ratio)),
            fix: "Reduce communication volume or raise compute per byte: larger per-GPU batch or gradient accumulation, a parallel layout that keeps tensor parallel inside a node, compression, or a faster fabric.".into(),
            ranks: heavy.iter().map(|t| t.rank).collect(),
            steps: all_steps.clone(),
            evidence: BTreeMap::from([("max_comm_ratio".into(), worst), ("threshold".into(), th.comm_ratio)]),
            impact_ns: 0,
        });
    }

    // A consistent straggler.
    if let Some(s) = &a.straggler {
        let lateness: f64 =
            a.stragglers.iter().filter(|x| x.rank == s.rank).map(|x| x.lateness_ns as f64).sum::<f64>()
                / s.steps_as_straggler.max(1) as f64;
        if s.consistency >= th.straggler_consistency
            && mean_wall > 0.0
            && lateness >= th.straggler_lateness_ratio * mean_wall
        {
            let wait = s.others_wait_ns as f64 / s.steps_as_straggler.max(1) as f64;
            out.push(Finding {
                id: "straggler",
                severity: if s.consistency >= 0.8 { Severity::High } else { Severity::Medium },
                message: format!(
                    "Rank {} arrives last at the collectives in {} of {} steps; the other ranks wait {} per step for it.",
                    s.rank, s.steps_as_straggler, s.steps, ms(wait)
                ),
                fix: format!(
                    "Inspect rank {}'s host and GPU (thermal throttling, a slower or shared GPU, a noisy neighbour), and its input pipeline (data skew, slower DataLoader); rebalance work if its shard is larger. Its step time looks like everyone else's because the collectives make the others wait.",
                    s.rank
                ),
                ranks: vec![s.rank],
                steps: a.stragglers.iter().filter(|x| x.rank == s.rank).map(|x| x.step).collect(),
                evidence: BTreeMap::from([
                    ("consistency".into(), s.consistency),
                    ("lateness_ns_per_step".into(), lateness),
                    ("others_wait_ns_per_step".into(), wait),
                ]),
                impact_ns: lateness as i64,
            });
        }
    }

    // Compute imbalance.
    let flagged: Vec<&super::balance::Imbalance> = a.imbalance.iter().filter(|i| i.flagged).collect();
    if !flagged.is_empty() {
        let worst = flagged.iter().map(|i| i.compute_imbalance).fold(0.0, f64::max);
        let mut ranks: Vec<u32> = flagged.iter().map(|i| i.max_rank).collect();
        ranks.sort_unstable();
        ranks.dedup();
        out.push(Finding {
            id: "compute_imbalance",
            severity: if worst > 3.0 * th.compute_imbalance { Severity::Medium } else { Severity::Low },
            message: format!(
                "Compute differs by up to {} across ranks ((max − min) / mean) in {} of {} steps; most: rank {}.",
                pct(worst),
                flagged.len(),
                a.imbalance.len(),
                ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ")
            ),
            fix: "Balance the work per rank: equal batch shapes (pad or bucket sequence lengths), even sharding of embeddings or experts, and the same kernels everywhere (check for rank-dependent code paths).".into(),
            ranks,
            steps: flagged.iter().map(|i| i.step).collect(),
            evidence: BTreeMap::from([("max_compute_imbalance".into(), worst), ("threshold".into(), th.compute_imbalance)]),
            impact_ns: (worst * mean_wall / 2.0) as i64,
        });
    }

    // CPU-bound device (gaps where the next work was launched late).
    let bad: Vec<(u32, f64)> = totals
        .iter()
        .filter(|t| t.wall_ns > 0)
        .map(|t| (t.rank, t.cpu_bound_ns as f64 / t.wall_ns as f64))
        .filter(|x| x.1 > th.cpu_bound_ratio)
        .collect();
    if !bad.is_empty() {
        let worst = bad.iter().map(|x| x.1).fold(0.0, f64::max);
        out.push(Finding {
            id: "cpu_bound",
            severity: if worst > 0.25 { Severity::High } else { Severity::Medium },
            message: format!("The GPU waits for the CPU to launch work for up to {} of the step (kernels launched after the previous one finished).", pct(worst)),
            fix: "Cut launch overhead: capture the step with CUDA graphs, fuse small kernels with `torch.compile`, increase work per kernel (batch size), and move Python overhead (logging, `.item()`) out of the step.".into(),
            ranks: bad.iter().map(|x| x.0).collect(),
            steps: all_steps.clone(),
            evidence: BTreeMap::from([("max_cpu_bound_ratio".into(), worst), ("threshold".into(), th.cpu_bound_ratio)]),
            impact_ns: (worst * mean_wall) as i64,
        });
    }

    // Long host synchronizations.
    // A host that waits for a saturated device costs nothing; it matters when the device then
    // idles (CPU-bound gaps) or on CPU-only ranks.
    let syncs: Vec<(u32, f64)> = totals
        .iter()
        .filter(|t| t.wall_ns > 0)
        .filter(|t| {
            let cpu_only = a.ranks.iter().any(|r| r.rank == t.rank && r.metrics_from == "cpu");
            cpu_only || t.cpu_bound_ns as f64 / t.wall_ns as f64 > th.cpu_bound_ratio / 2.0
        })
        .map(|t| (t.rank, t.host_sync_ns as f64 / t.wall_ns as f64))
        .filter(|x| x.1 > th.host_sync_ratio)
        .collect();
    if !syncs.is_empty() {
        let worst = syncs.iter().map(|x| x.1).fold(0.0, f64::max);
        out.push(Finding {
            id: "host_sync",
            severity: Severity::Medium,
            message: format!("The CPU spends up to {} of the step blocked in device synchronization.", pct(worst)),
            fix: "Remove synchronizations from the step: `.item()`, `.cpu()`, printing tensors, `torch.cuda.synchronize()`, boolean masks that need a host copy; log metrics every N steps.".into(),
            ranks: syncs.iter().map(|x| x.0).collect(),
            steps: all_steps.clone(),
            evidence: BTreeMap::from([("max_host_sync_ratio".into(), worst), ("threshold".into(), th.host_sync_ratio)]),
            impact_ns: (worst * mean_wall / 2.0) as i64,
        });
    }

    // Allocator churn mid-run.
    if !a.allocations.is_empty() {
        let mut per_rank: BTreeMap<u32, usize> = BTreeMap::new();
        for x in &a.allocations {
            *per_rank.entry(x.rank).or_default() += x.calls;
        }
        let steps_after_first = (n_steps - 1.0).max(1.0);
        let worst = per_rank.values().copied().max().unwrap_or(0) as f64 / steps_after_first;
        if worst >= th.alloc_calls_per_step {
            let mut steps: Vec<u32> = a.allocations.iter().map(|x| x.step).collect();
            steps.sort_unstable();
            steps.dedup();
            out.push(Finding {
                id: "allocator_churn",
                severity: Severity::Low,
                message: format!("cudaMalloc/cudaFree run inside steps after warm-up ({worst:.1} calls per step on the worst rank): the caching allocator is fragmenting or being emptied."),
                fix: "Set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` (or tune `max_split_size_mb`), keep shapes fixed (pad variable lengths), and avoid `torch.cuda.empty_cache()` in the loop.".into(),
                ranks: per_rank.keys().copied().collect(),
                steps,
                evidence: BTreeMap::from([("calls_per_step".into(), worst)]),
                impact_ns: a.allocations.iter().map(|x| x.time_ns).max().unwrap_or(0),
            });
        }
    }

    // Many small collectives.
    let mut per_kind: BTreeMap<CollKind, Vec<&Op>> = BTreeMap::new();
    for o in ops {
        per_kind.entry(o.kind).or_default().push(o);
    }
    for (kind, v) in per_kind {
        let mut sizes: Vec<i64> = v.iter().filter_map(|o| o.bytes).collect();
        if sizes.is_empty() {
            continue;
        }
        sizes.sort_unstable();
        let med = sizes[(sizes.len() - 1) / 2] as f64;
        let per_step = v.len() as f64 / n_steps;
        if med < th.small_collective_bytes && per_step >= th.small_collectives_per_step {
            let lat: f64 = v.iter().map(|o| o.transfer_ns as f64).sum::<f64>() / n_steps;
            out.push(Finding {
                id: "small_collectives",
                severity: Severity::Medium,
                message: format!(
                    "{per_step:.0} {} collectives per step with a median size of {:.2} MiB: each pays launch and latency cost.",
                    kind.name(),
                    med / 1048576.0
                ),
                fix: "Use fewer, larger collectives: raise DDP `bucket_cap_mb` (default 25), DeepSpeed `reduce_bucket_size` / `allgather_bucket_size`, FSDP wrapping granularity, or coalesce with `torch.distributed` coalescing managers.".into(),
                ranks: a.ranks.iter().map(|r| r.rank).collect(),
                steps: all_steps.clone(),
                evidence: BTreeMap::from([
                    ("collectives_per_step".into(), per_step),
                    ("median_bytes".into(), med),
                    ("transfer_ns_per_step".into(), lat),
                ]),
                impact_ns: (lat / 4.0) as i64,
            });
        }
    }

    // Step-time jitter.
    let jittery: Vec<(u32, f64)> = totals
        .iter()
        .filter(|t| t.steps >= 3)
        .filter_map(|t| Some((t.rank, t.step_time.as_ref()?.jitter)))
        .filter(|x| x.1 > th.step_jitter)
        .collect();
    if !jittery.is_empty() {
        let worst = jittery.iter().map(|x| x.1).fold(0.0, f64::max);
        out.push(Finding {
            id: "step_jitter",
            severity: Severity::Low,
            message: format!("Step time varies by {} (standard deviation / mean) on the worst rank: look at p99 and max, not the mean.", pct(worst)),
            fix: "Find what differs in the slow steps: periodic work (checkpointing, evaluation, logging), data loading stalls, garbage collection, or an intermittent straggler.".into(),
            ranks: jittery.iter().map(|x| x.0).collect(),
            steps: all_steps.clone(),
            evidence: BTreeMap::from([("max_jitter".into(), worst), ("threshold".into(), th.step_jitter)]),
            impact_ns: (worst * mean_wall) as i64,
        });
    }

    // Collectives far below what the fabric delivers at the same size.
    for c in a.fabric.iter().filter(|c| c.basis == "transfer" && c.fraction < th.fabric_fraction) {
        let per_step: f64 = a
            .collectives
            .iter()
            .filter(|x| x.kind == c.kind && x.pg == c.pg)
            .map(|x| x.transfer_mean_ns.unwrap_or(0) as f64 * x.count as f64)
            .sum::<f64>()
            / n_steps;
        out.push(Finding {
            id: "below_fabric",
            severity: if c.fraction < th.fabric_fraction / 2.0 { Severity::High } else { Severity::Medium },
            message: c.message.clone(),
            fix: "The fabric can do better than the job gets: check that the job uses the same NCCL settings and transport as the benchmark (NCCL_DEBUG=INFO: NET/IB vs NET/Socket, GDRDMA), that collectives are not split into small chunks (bucket sizes), that compute kernels do not starve NCCL of SMs (NCCL_MIN_NCHANNELS / stream priorities), and that the process group spans the same topology.".into(),
            ranks: a.ranks.iter().map(|r| r.rank).collect(),
            steps: all_steps.clone(),
            evidence: BTreeMap::from([
                ("fraction".into(), c.fraction),
                ("achieved_busbw_gbps".into(), c.achieved_busbw_gbps),
                ("fabric_busbw_gbps".into(), c.fabric_busbw_gbps),
                ("bytes".into(), c.bytes as f64),
            ]),
            impact_ns: (per_step * (1.0 - c.fraction)) as i64,
        });
    }

    out.sort_by(|a, b| b.impact_ns.cmp(&a.impact_ns).then(b.severity.cmp(&a.severity)).then(a.id.cmp(b.id)));
    out
}
