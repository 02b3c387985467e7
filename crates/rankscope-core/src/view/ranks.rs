//! A rank's summary filed under the job's rank decision. The decision itself is the rank rule's
//! ([`crate::normalize::decide`], over every file's [`RankClaim`]): a worker that holds one file
//! sends its summary, and the job decides the rank where every claim is known.

use super::summary::{sort_diagnostics, RankSummary};
pub use crate::normalize::{RankClaim, RankDecision, RANK_KINDS};

/// Puts a decision into a summary made by a worker that saw only its own file.
pub fn apply_decision(s: &mut RankSummary, d: &RankDecision) {
    s.rank = d.rank;
    s.rank_source = d.rank_source;
    s.diagnostics.retain(|x| !RANK_KINDS.contains(&x.kind));
    s.diagnostics.extend(d.diagnostics.iter().cloned());
    sort_diagnostics(&mut s.diagnostics);
}
