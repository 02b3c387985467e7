//! The trace's collectives against what the fabric delivered in nccl-tests.
//!
//! When a run's traces and its nccl-tests output are analysed together, each collective kind
//! and process group of the trace is placed on the nccl-tests curve of the same collective at
//! the same message size: achieved busbw (S / transfer time × the nccl-tests factor, see
//! [`super::collectives`]) against the busbw nccl-tests measured at that size (out-of-place,
//! interpolated in log(size) between its rows). The fraction says how much of the fabric the
//! job's communication used: "this run's all_reduce of 64 MB reaches 35% of what the fabric
//! delivered for 64 MB".
//!
//! Sizes outside the range nccl-tests measured (beyond a factor of 2) are not compared.
//!
//! Fair comparison needs the transfer time (matched across ranks, sync wait removed). On
//! single-rank traces only the whole duration is known (`bw_basis: "duration"`), which includes
//! waiting; the fraction is then a lower bound and says so.

use serde::Serialize;

use super::collectives::CollectiveStats;
use crate::model::CollKind;
use crate::nccl::perf::PerfTest;
use crate::nccl::TestsReport;

#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct FabricComparison {
    /// False when the nccl-tests run is not of this job's hardware or backend (then `reason`
    /// says why and no finding is drawn from it).
    pub comparable: bool,
    pub reason: Option<String>,
    pub kind: CollKind,
    pub pg: String,
    /// Median message size of the trace's collectives of this kind and group.
    pub bytes: i64,
    pub group_size: i64,
    pub achieved_busbw_gbps: f64,
    /// nccl-tests' measured busbw at `bytes`.
    pub fabric_busbw_gbps: f64,
    /// The fitted latency-bandwidth model's busbw at `bytes`, when there is a fit.
    pub model_busbw_gbps: Option<f64>,
    /// achieved / fabric.
    pub fraction: f64,
    /// `transfer` (fair) or `duration` (a lower bound: includes waiting).
    pub basis: super::collectives::BwBasis,
    pub fabric_file: String,
    pub fabric_ranks: Option<u32>,
    /// Hosts the nccl-tests run spanned (its device lines); absent when it names none. One
    /// node: the advice is about the GPUs' links, not a network.
    #[serde(default)]
    pub fabric_nodes: Option<u32>,
    pub message: String,
}

/// The test to compare with: same collective, preferring the same number of ranks, then the
/// most rows.
fn pick(tests: &TestsReport, c: CollKind, n: i64) -> Option<&PerfTest> {
    tests
        .tests
        .iter()
        .filter(|t| t.collective == Some(c) && !t.rows.is_empty())
        .max_by_key(|t| (t.n_ranks.map(i64::from) == Some(n), t.rows.len(), std::cmp::Reverse(t.index)))
}

fn human_bytes(b: i64) -> String {
    let b = b as f64;
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} GiB", b / (1024.0 * 1024.0 * 1024.0))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

/// What the job's traces say about their hardware, to check that a nccl-tests run is of the
/// same fabric before comparing.
#[derive(Debug, Clone, Default)]
pub struct TraceFacts {
    /// `distributedInfo.backend` of the ranks (`nccl`, `gloo`, ...), distinct, sorted.
    pub backends: Vec<String>,
    /// Device names of the ranks' `deviceProperties`, distinct, sorted.
    pub devices: Vec<String>,
    /// Whether the time figures come from CPU lanes only (no GPU work in the traces).
    pub cpu_only: bool,
}

/// The model word of a device name: `Tesla V100-SXM2-32GB` → `v100`, `NVIDIA H100 80GB HBM3`
/// → `h100`, `AMD Instinct MI300X` → `mi300x`: the first word with both letters and digits
/// that is not a memory size.
pub fn device_model(name: &str) -> Option<String> {
    name.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.chars().any(|c| c.is_ascii_digit()) && w.chars().any(|c| c.is_ascii_alphabetic()))
        .find(|w| !(w.ends_with("gb") && w[..w.len() - 2].chars().all(|c| c.is_ascii_digit())))
        .map(str::to_string)
}

/// Why a nccl-tests run cannot stand for this job's fabric, if it cannot.
fn mismatch(test: &PerfTest, facts: &TraceFacts, group_size: i64) -> Option<String> {
    if facts.cpu_only {
        return Some(
            "the trace's collectives run on the CPU (no GPU work), nccl-tests measures NCCL on GPUs".into(),
        );
    }
    if let Some(b) = facts.backends.iter().find(|b| {
        let b = b.to_ascii_lowercase();
        !(b.contains("nccl") || b.contains("rccl") || b.contains("cuda"))
    }) {
        return Some(format!("the job's backend is {b}, nccl-tests measures NCCL"));
    }
    let trace_models: Vec<String> = facts.devices.iter().filter_map(|d| device_model(d)).collect();
    let test_models: Vec<String> = {
        let mut v: Vec<String> = test.devices.iter().filter_map(|d| device_model(&d.name)).collect();
        v.sort();
        v.dedup();
        v
    };
    if !trace_models.is_empty()
        && !test_models.is_empty()
        && !test_models.iter().any(|m| trace_models.contains(m))
    {
        let names = |v: &[String]| v.join(", ");
        return Some(format!(
            "nccl-tests ran on {} devices, the trace on {}",
            names(&test_models).to_uppercase(),
            names(&trace_models).to_uppercase()
        ));
    }
    if let Some(n) = test.n_ranks {
        if i64::from(n) != group_size && n > 1 {
            return Some(format!("nccl-tests ran {n} ranks, the trace's group has {group_size}"));
        }
    }
    None
}

pub fn compare(colls: &[CollectiveStats], tests: &TestsReport, facts: &TraceFacts) -> Vec<FabricComparison> {
    let mut out = Vec::new();
    for c in colls {
        let (Some(bytes), Some(achieved)) = (c.bytes_p50, c.busbw_gbps) else { continue };
        let Some(kind) = CollKind::nccl_test(c.kind) else { continue };
        let Some(test) = pick(tests, kind, c.group_size) else { continue };
        // Only inside the sizes nccl-tests measured (with a factor-2 margin): the curve is not
        // extrapolated, since bandwidth at 4 B says nothing about bandwidth at 32 MiB.
        let sizes = test.rows.iter().map(|r| r.size_bytes).filter(|&s| s > 0);
        let (lo, hi) = (sizes.clone().min().unwrap_or(0), sizes.max().unwrap_or(0));
        if lo == 0 || (bytes as u64) < lo / 2 || bytes as u64 > hi.saturating_mul(2) {
            continue;
        }
        let Some(fabric) = test.measured_busbw_at(bytes as f64).filter(|v| *v > 0.0) else { continue };
        let model =
            test.analysis.as_ref().and_then(|a| a.fit.as_ref()).and_then(|f| f.busbw_at(bytes as f64));
        let fraction = achieved / fabric;
        let lower = if c.bw_basis == super::collectives::BwBasis::Duration { "at least " } else { "" };
        let reason = mismatch(test, facts, c.group_size);
        let message = match &reason {
            Some(why) => format!(
                "Not compared with {} ({}): {why}.",
                test.file,
                c.kind.name()
            ),
            None => format!(
                "This run's {} of {} reaches {lower}{:.0}% of what the fabric delivered for that size in nccl-tests ({:.1} of {:.1} GB/s busbw).",
                c.kind.name(),
                human_bytes(bytes),
                100.0 * fraction,
                achieved,
                fabric,
            ),
        };
        out.push(FabricComparison {
            comparable: reason.is_none(),
            reason,
            kind: c.kind,
            pg: c.pg.clone(),
            bytes,
            group_size: c.group_size,
            achieved_busbw_gbps: achieved,
            fabric_busbw_gbps: fabric,
            model_busbw_gbps: model,
            fraction,
            basis: c.bw_basis,
            fabric_file: test.file.clone(),
            fabric_ranks: test.n_ranks,
            fabric_nodes: test.topology.nodes,
            message,
        });
    }
    out
}
