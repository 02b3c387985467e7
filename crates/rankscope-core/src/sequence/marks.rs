//! Where the cause of a hang or mismatch is on each rank, for a timeline: per member of the
//! diverging group, the record it issued at the first divergence (start..end on the rank's own
//! clock, with how long it waited), or, for a rank that never issued it or skipped it, the
//! instant its last record before that position ended.
//!
//! "all_reduce #6 (step 4) — waited 8.02 s" on the waiting ranks, "never issued all_reduce #6;
//! last: all_reduce #5 (step 4)" on the one that did not.

use serde::{Deserialize, Serialize};

use super::text;
use super::*;

/// What a rank did at the first divergence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkKind {
    /// It issued the record of the largest side (and waited in it).
    Issued,
    /// It issued a different record at this position (a mismatch's other side).
    Differs,
    /// Its records in the group end before this position.
    NotIssued,
    /// It issued later records in the group, but not this one.
    Skipped,
}

/// One rank's mark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    pub rank: u32,
    pub kind: MarkKind,
    /// The rank's own clock. An issued record: its start and end (the end when known); a rank
    /// that did not issue it: both the end of its last record before the position (`None` when
    /// it has none: the caller may use the end of its trace).
    pub start_ns: Option<i64>,
    pub end_ns: Option<i64>,
    /// A rank the diagnosis names (the one to look at).
    pub named: bool,
    pub label: String,
}

/// "all_reduce #6 (step 4)", "all_reduce #6 (step 4, 4 B)" with `size`.
fn short(r: &RecordRef, rep: &SequenceReport, size: bool) -> String {
    let mut parts: Vec<String> = r.step.map(|s| format!("step {s}")).into_iter().collect();
    if size {
        parts.extend(text::shape(r));
    }
    let ctx = if parts.is_empty() { String::new() } else { format!(" ({})", parts.join(", ")) };
    format!("{}{ctx}", text::name(r, rep))
}

/// The marks of the report's first hang / mismatch, rank order (empty without one).
pub fn marks(rep: &SequenceReport) -> Vec<Mark> {
    let Some(diag) =
        rep.diagnoses.iter().find(|d| matches!(d.kind, DiagnosisKind::Hang | DiagnosisKind::Mismatch))
    else {
        return Vec::new();
    };
    let Some(d) = rep.first_divergence() else { return Vec::new() };
    let Some(main) = d.sides.first() else { return Vec::new() };
    let mismatch = d.class == DivergenceClass::Mismatch;
    let fields = d.fields.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(", ");
    let mut out = Vec::new();
    for (k, side) in d.sides.iter().enumerate() {
        for &rank in &side.ranks {
            let wait = side.waits.iter().find(|w| w.rank == rank);
            let since =
                wait.and_then(|w| w.since_ns).or(side.record.start_ns.filter(|_| rank == side.record.rank));
            let end = match (since, wait.and_then(|w| w.waited_ns)) {
                (Some(s), Some(w)) => Some(s.saturating_add(w)),
                _ => None,
            };
            let waited = match wait.and_then(|w| w.waited_ns) {
                Some(w) => format!(" — waited {}", text::duration(w)),
                None if since.is_some() => " — still in it".to_string(),
                None => String::new(),
            };
            let here = format!("{}{waited}", short(&side.record, rep, mismatch));
            let label = match d.shifts.iter().find(|s| s.rank == rank && s.by > 0) {
                // It went on past the others' collective: say that first.
                Some(s) => {
                    let skipped: Vec<String> = s.records.iter().map(|r| short(r, rep, false)).collect();
                    format!("skipped {}; in {here}", skipped.join(", "))
                }
                None if k > 0 => format!(
                    "{here}; {fields} differs from {}: {}",
                    text::ranks(&main.ranks, false),
                    short(&main.record, rep, true)
                ),
                None => here,
            };
            out.push(Mark {
                rank,
                kind: if k == 0 { MarkKind::Issued } else { MarkKind::Differs },
                start_ns: since,
                end_ns: end.or(since),
                named: diag.ranks.contains(&rank),
                label,
            });
        }
    }
    let what = text::name(&main.record, rep);
    for m in &d.missing {
        let at = m.last.as_ref().and_then(|l| l.end_ns.or(l.start_ns));
        let last = m.last.as_ref().map_or("none".to_string(), |l| short(l, rep, false));
        let (kind, label) = match m.reason {
            MissingReason::Ended => (MarkKind::NotIssued, format!("never issued {what}; last: {last}")),
            MissingReason::Skipped => {
                let next = m.next.as_ref().map_or("none".to_string(), |n| short(n, rep, false));
                (MarkKind::Skipped, format!("skipped {what}; last: {last}; next: {next}"))
            }
        };
        out.push(Mark {
            rank: m.rank,
            kind,
            start_ns: at,
            end_ns: at,
            named: diag.ranks.contains(&m.rank),
            label,
        });
    }
    out.sort_by_key(|m| m.rank);
    out
}
