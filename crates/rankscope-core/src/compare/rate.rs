//! A run's work per step and its rate (`rankscope runs`, docs/metrics.md "Work per step"): the
//! job's samples, tokens and FLOPs per step from its ranks' [`crate::analyze::work`], throughput
//! and MFU. Each figure not known says why.
//!
//! - **Samples (tokens) per step** of the job: the sum over ranks of each rank's, when every rank
//!   has one and the ranks are data-parallel replicas (no tensor, context, pipeline or expert
//!   group in `analysis.layout`: those ranks share a batch); else stated with
//!   `--samples-per-step` / `--tokens-per-step` (which win over the trace).
//! - **FLOPs per step** of the job: the sum over ranks of each rank's counted FLOPs; the ops
//!   counted (union over ranks) and the share of compute time they cover (the lowest over ranks).
//! - **Throughput**: per step ÷ the step time p50.
//! - **MFU** = FLOPs per step ÷ step p50 ÷ (peak per device × ranks). The peak is the device's
//!   dense BF16/FP16 figure ([`super::peak`]) or `--peak-tflops`; a run on CPUs (no device in the
//!   trace), on devices not tabulated, or on several kinds of device has none.

use serde::{Deserialize, Serialize};

use super::peak::{peak_of, PeakFrom, PeakUsed};
use crate::analyze::layout::Role;
use crate::analyze::Analysis;

/// What the user states for every run (the CLI's flags).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Given {
    pub samples_per_step: Option<i64>,
    pub tokens_per_step: Option<i64>,
    pub peak_tflops: Option<f64>,
}

crate::named_enum! {
    /// Where a per-step figure came from.
    pub enum Source {
        /// Read from the traces' shapes.
        Trace => "trace",
        /// Stated by the user (`--samples-per-step`, `--tokens-per-step`).
        Given => "given",
    }
}

/// A count per step (samples or tokens) and where it came from, or why it is not known.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PerStep {
    pub value: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Source>,
    /// Why not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_not: Option<String>,
}

/// The run's work and rate.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Rate {
    pub samples_per_step: PerStep,
    pub tokens_per_step: PerStep,
    /// Forward passes per step (gradient accumulation, micro-batches) when more than one and
    /// every rank has the same ([`crate::analyze::work`]): the counts per step are the
    /// micro-batch's × this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_passes: Option<u32>,
    pub samples_per_s: Option<f64>,
    pub tokens_per_s: Option<f64>,
    /// Of the job: the sum over ranks.
    pub flops_per_step: Option<f64>,
    /// The op names counted.
    pub flops_ops: Vec<String>,
    /// The share of the compute time the counted ops cover (the lowest over ranks).
    pub flops_share: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops_why_not: Option<String>,
    /// FLOPs per step ÷ step p50, in TFLOP/s.
    pub achieved_tflops: Option<f64>,
    pub peak: Option<PeakUsed>,
    pub mfu: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mfu_why_not: Option<String>,
    /// The model's signature when every rank has the same ([`crate::analyze::work`]).
    pub model: Option<String>,
}

const NO_SHAPES: &str = "the traces record no shapes (profile with record_shapes=True)";

/// The job's count per step from the ranks' (`pick` reads one rank's, or why not).
fn job_count(
    a: &Analysis,
    given: Option<i64>,
    pick: &dyn Fn(&crate::analyze::work::Batch) -> Result<i64, String>,
) -> PerStep {
    if let Some(v) = given {
        return PerStep { value: Some(v), from: Some(Source::Given), why_not: None };
    }
    let not = |why: String| PerStep { value: None, from: None, why_not: Some(why) };
    if a.work.is_empty() {
        return not(NO_SHAPES.into());
    }
    let shared: Vec<&str> = a.layout.as_ref().map_or(Vec::new(), |l| {
        let mut v: Vec<&str> = l
            .groups
            .iter()
            .filter(|g| matches!(g.role, Role::Tensor | Role::Context | Role::Pipeline | Role::Expert))
            .map(|g| g.role.as_str())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    });
    if !shared.is_empty() {
        return not(format!("the layout has {} groups, whose ranks share a batch", shared.join(", ")));
    }
    let mut sum = 0i64;
    for r in &a.ranks {
        let Some(w) = a.work.iter().find(|w| w.rank == r.rank) else {
            return not(format!("rank {} records no shapes", r.rank));
        };
        match pick(&w.work.batch) {
            Ok(v) => sum = sum.saturating_add(v),
            Err(why) => return not(format!("rank {}: {why}", r.rank)),
        }
    }
    PerStep { value: Some(sum), from: Some(Source::Trace), why_not: None }
}

/// The run's work and rate; `step_p50_ns` its step time.
pub fn rate(a: &Analysis, devices: &[String], step_p50_ns: Option<i64>, given: &Given) -> Rate {
    let why = |b: &crate::analyze::work::Batch| b.why_not.clone().unwrap_or_else(|| "not known".into());
    let samples = job_count(a, given.samples_per_step, &|b| b.samples.ok_or_else(|| why(b)));
    let tokens = job_count(a, given.tokens_per_step, &|b| b.tokens.ok_or_else(|| why(b)));
    let secs = step_p50_ns.filter(|&t| t > 0).map(|t| t as f64 / 1e9);
    let per_s = |v: Option<i64>| Some(v? as f64 / secs?);
    let mut flops_why_not = None;
    let mut flops = Some(0.0);
    let mut ops: Vec<String> = Vec::new();
    let mut share: Option<f64> = None;
    if a.work.is_empty() {
        flops = None;
        flops_why_not = Some(NO_SHAPES.to_string());
    }
    for r in &a.ranks {
        if flops.is_none() {
            break;
        }
        match a.work.iter().find(|w| w.rank == r.rank) {
            Some(w) if w.work.flops_per_step.is_some() => {
                flops = flops.zip(w.work.flops_per_step).map(|(x, y)| x + y);
                ops.extend(w.work.counted.iter().map(|o| o.name.clone()));
                if let Some(s) = w.work.counted_share {
                    share = Some(share.map_or(s, |m: f64| m.min(s)));
                }
            }
            Some(_) => {
                flops = None;
                flops_why_not =
                    Some(format!("rank {}: no matrix product, linear or attention op counted", r.rank));
            }
            None => {
                flops = None;
                flops_why_not = Some(format!("rank {} records no shapes", r.rank));
            }
        }
    }
    ops.sort();
    ops.dedup();
    let achieved = flops.zip(secs).map(|(f, s)| f / s / 1e12);
    let peak = match (given.peak_tflops, devices) {
        (Some(t), _) => Ok(PeakUsed { tflops: t, from: PeakFrom::Given, device: None }),
        (None, []) => {
            Err("no accelerator in the traces (a CPU run): no peak for CPUs; --peak-tflops gives one"
                .to_string())
        }
        (None, [one]) => peak_of(one)
            .map(|p| PeakUsed {
                tflops: p.bf16_tflops,
                from: PeakFrom::Table,
                device: Some(p.device.to_string()),
            })
            .ok_or_else(|| format!("no peak tabulated for {one}; --peak-tflops gives one")),
        (None, _) => Err("several kinds of device; --peak-tflops gives one peak".to_string()),
    };
    let ranks = a.ranks.len() as f64;
    let (mfu, mfu_why_not) = match (&peak, achieved) {
        (Ok(p), Some(x)) if p.tflops > 0.0 && ranks > 0.0 => (Some(x / (p.tflops * ranks)), None),
        (Ok(_), _) => (None, Some("FLOPs per step or step time not known".to_string())),
        (Err(why), _) => (None, Some(why.clone())),
    };
    let mut sigs: Vec<Option<&str>> = a
        .ranks
        .iter()
        .map(|r| {
            a.work
                .iter()
                .find(|w| w.rank == r.rank)
                .and_then(|w| w.work.signature.as_ref())
                .map(|s| s.hash.as_str())
        })
        .collect();
    sigs.dedup();
    let model = match sigs.as_slice() {
        [Some(one)] => Some(one.to_string()),
        _ => None,
    };
    let mut passes: Vec<Option<u32>> = a.work.iter().map(|w| w.work.batch.forward_passes).collect();
    passes.dedup();
    Rate {
        forward_passes: match passes.as_slice() {
            [one] => *one,
            _ => None,
        },
        samples_per_s: per_s(samples.value),
        tokens_per_s: per_s(tokens.value),
        samples_per_step: samples,
        tokens_per_step: tokens,
        flops_per_step: flops,
        flops_ops: ops,
        flops_share: share,
        flops_why_not,
        achieved_tflops: achieved,
        peak: peak.ok(),
        mfu,
        mfu_why_not,
        model,
    }
}
