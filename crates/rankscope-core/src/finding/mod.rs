//! What a finding is: its id ([`FindingId`]), its severity ([`Severity`], the one ladder), the
//! figures behind it ([`Evidence`], by typed [`EvidenceKey`]) or the lines of text that show it
//! ([`EvidenceLine`]), where a late rank's excess is ([`Location`]), and the thresholds that
//! decide it ([`Thresholds`]). The judging layer ([`crate::diagnose`]) and the NCCL readers
//! ([`crate::nccl`]) make findings; the analysis and the NCCL reports carry them; the shells
//! show them. This module sits below all of them: it knows the model's words (phases,
//! severities) and nothing of how a finding is reasoned.

mod evidence;
mod id;
mod quote;
mod thresholds;
mod wire;

use serde::{Deserialize, Serialize};

pub use crate::model::{Phase, Severity};
pub use evidence::{Evidence, EvidenceKey};
pub use id::{FindingId, IdKind};
pub use quote::{EvidenceLine, EVIDENCE_MAX, EVIDENCE_TEXT_MAX};
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

/// A finding: what is wrong, where, why, what to do, and what fixing it would save. One type for
/// the trace analysis and the NCCL reports, which write it in two JSON shapes (module `wire`,
/// chosen by the id's [`IdKind`]): a finding about a trace cites figures (`evidence{}`, `ranks`,
/// `steps`, `symptoms`, `location`, `impact_ns`: `rankscope.analysis`), a finding about text
/// quotes lines (`evidence[]`, `evidence_total`: the NCCL reports, with their severity words).
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Stable identifier of the cause (`host_stall`, `exposed_comm`, `log.gdr-disabled`, ...).
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
    /// The lines of text that show it, at most [`EVIDENCE_MAX`], in file and line order.
    pub quotes: Vec<EvidenceLine>,
    /// How many lines showed it in all.
    pub quotes_total: u32,
    /// Symptoms this cause explains (rule ids that would otherwise have been findings).
    pub symptoms: Vec<FindingId>,
    /// For a late rank: where its excess time is.
    pub location: Option<Location>,
    /// Estimated time saved per step on one rank if fixed (ns, ≤ the step), used for ranking.
    pub impact_ns: i64,
}

impl Finding {
    /// A finding about text: the lines that show it, sorted and deduplicated, the first
    /// [`EVIDENCE_MAX`] kept and all of them counted.
    pub fn quoting(
        id: FindingId,
        severity: Severity,
        message: String,
        fix: &str,
        mut lines: Vec<EvidenceLine>,
    ) -> Self {
        lines.sort();
        lines.dedup();
        let quotes_total = u32::try_from(lines.len()).unwrap_or(u32::MAX);
        lines.truncate(EVIDENCE_MAX);
        Finding {
            id,
            severity,
            message,
            fix: fix.to_string(),
            ranks: Vec::new(),
            steps: Vec::new(),
            evidence: Evidence::default(),
            quotes: lines,
            quotes_total,
            symptoms: Vec::new(),
            location: None,
            impact_ns: 0,
        }
    }

    /// Whether it is written as a finding about text (its id is the NCCL reports').
    pub fn quotes_text(&self) -> bool {
        matches!(self.id.kind(), IdKind::NcclLog | IdKind::NcclTests)
    }
}
