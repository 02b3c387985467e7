//! The job-level rank decision, made from per-rank summaries.
//!
//! A rank's number depends on the other files (load-order ranks fill the smallest numbers nobody
//! claimed; two files claiming one rank is an error), so a worker that holds one file cannot
//! decide it alone. The app collects each file's claim and decides here, with the very code the
//! CLI runs: [`decide_ranks`] hands empty stand-in traces carrying only what the rules read (the
//! file name and `distributedInfo.rank`) to [`crate::normalize::assemble`].

use serde::{Deserialize, Serialize};

use super::summary::{sort_diagnostics, RankSummary};
use crate::model::{DiagKind, Diagnostic, DistributedInfo, RankTrace};
use crate::normalize::{assemble, JobError, RankSource, Rules};

/// What one file says about its rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankClaim {
    pub file: String,
    /// `distributedInfo.rank`, when the file has it.
    pub claimed_rank: Option<i64>,
}

/// The rank decided for one file, with the diagnostics the decision adds to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankDecision {
    pub rank: u32,
    pub rank_source: RankSource,
    /// The rank diagnostics the decision adds (what a worker puts into its rank's table so
    /// that the analysis it computes lists them as the CLI's does).
    pub diagnostics: Vec<Diagnostic>,
}

pub const RANK_KINDS: [DiagKind; 4] = [
    DiagKind::RankFromFileName,
    DiagKind::RankFromLoadOrder,
    DiagKind::RankFromUser,
    DiagKind::DuplicateRank,
];

/// Decides every file's rank, in load order; `result[i]` is for `claims[i]`.
pub fn decide_ranks(claims: &[RankClaim]) -> Vec<RankDecision> {
    decide_job(claims).0
}

/// [`decide_ranks`], with the job-level errors the CLI reports for the same files (two files
/// claiming one rank).
pub fn decide_job(claims: &[RankClaim]) -> (Vec<RankDecision>, Vec<JobError>) {
    decide_job_with(claims, &[])
}

/// [`decide_job`] with ranks given by the user for some files (`--rank FILE=N`).
pub fn decide_job_with(
    claims: &[RankClaim],
    explicit: &[(String, u32)],
) -> (Vec<RankDecision>, Vec<JobError>) {
    let stand_ins: Vec<RankTrace> = claims
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut t = RankTrace { source: c.file.clone(), ..RankTrace::default() };
            t.meta.distributed =
                c.claimed_rank.map(|r| DistributedInfo { rank: Some(r), ..DistributedInfo::default() });
            // `input_bytes` is not read by the rank rules: it carries the load position back
            // through `assemble`, which sorts its output by rank.
            t.input_bytes = i as u64;
            t
        })
        .collect();
    let job = assemble(stand_ins, explicit, &Rules::default());
    let mut out: Vec<Option<RankDecision>> = vec![None; claims.len()];
    for e in &job.ranks {
        let diagnostics: Vec<Diagnostic> =
            RANK_KINDS.iter().filter_map(|&k| e.trace.diagnostics.get(k)).cloned().collect();
        if let Some(slot) = out.get_mut(e.trace.input_bytes as usize) {
            *slot = Some(RankDecision { rank: e.rank, rank_source: e.source, diagnostics });
        }
    }
    let decisions = out
        .into_iter()
        .map(|d| {
            d.unwrap_or(RankDecision { rank: 0, rank_source: RankSource::LoadOrder, diagnostics: Vec::new() })
        })
        .collect();
    (decisions, job.errors)
}

/// Puts a decision into a summary made by a worker that saw only its own file.
pub fn apply_decision(s: &mut RankSummary, d: &RankDecision) {
    s.rank = d.rank;
    s.rank_source = d.rank_source;
    s.diagnostics.retain(|x| !RANK_KINDS.contains(&x.kind));
    s.diagnostics.extend(d.diagnostics.iter().cloned());
    sort_diagnostics(&mut s.diagnostics);
}
