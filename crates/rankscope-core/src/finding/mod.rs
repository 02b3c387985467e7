//! What a finding is: its id ([`FindingId`]), its severity ([`Severity`], the one ladder), the
//! figures behind it ([`Evidence`], by typed [`EvidenceKey`]), where a late rank's excess is
//! ([`Location`]), and the thresholds that decide it ([`Thresholds`]). The judging layer
//! ([`crate::diagnose`]) makes findings; the analysis carries them (`Analysis::findings`); the
//! shells show them. This module sits below both: it knows the model's words (phases,
//! severities) and nothing of how a finding is reasoned.

mod evidence;
mod id;
mod thresholds;

use serde::{Deserialize, Serialize};

pub use crate::model::{Phase, Severity};
pub use evidence::{Evidence, EvidenceKey};
pub use id::{FindingId, IdKind};
pub use thresholds::Thresholds;

/// Where a late rank's excess time is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Location {
    /// Region names from the step down to the one that holds the excess.
    pub regions: Vec<String>,
    pub phase: Phase,
    /// Per step on the late rank, and the others' median, of the located region's active time.
    pub rank_ns: i64,
    pub others_ns: i64,
    /// How the excess splits: no operator running, operators, host synchronization, device.
    pub free_excess_ns: i64,
    pub ops_excess_ns: i64,
    pub sync_excess_ns: i64,
    pub device_excess_ns: i64,
}

impl Location {
    /// The excess split, in words, for the parts that are there: `[("no operator running",
    /// 402_000_000)]`.
    pub fn excess_parts(&self) -> Vec<(&'static str, i64)> {
        [
            ("no operator running", self.free_excess_ns),
            ("operators", self.ops_excess_ns),
            ("host synchronization", self.sync_excess_ns),
            ("device compute", self.device_excess_ns),
        ]
        .into_iter()
        .filter(|x| x.1 > 0)
        .collect()
    }
}

/// A cause found in a job: what is wrong, where, why, what to do, and what it would save.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Finding {
    /// Stable identifier of the cause (`host_stall`, `exposed_comm`, ...).
    pub id: FindingId,
    pub severity: Severity,
    /// What is wrong, on which rank, why, with the figures.
    pub message: String,
    /// What to do about it.
    pub fix: String,
    pub ranks: Vec<u32>,
    pub steps: Vec<u32>,
    /// The figures behind the message (per-rank, per-step values unless named otherwise).
    pub evidence: Evidence,
    /// Symptoms this cause explains (rule ids that would otherwise have been findings).
    #[serde(default)]
    pub symptoms: Vec<FindingId>,
    /// For a late rank: where its excess time is.
    #[serde(default)]
    pub location: Option<Location>,
    /// Estimated time saved per step on one rank if fixed (ns, ≤ the step), used for ranking.
    pub impact_ns: i64,
}
