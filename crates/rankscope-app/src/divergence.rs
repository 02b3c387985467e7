//! The analysis' first hang / mismatch placed on the job's ranks: the timeline's marks
//! ([`rankscope_core::sequence::marks`]) and the window that shows all of them.

use rankscope_core::sequence::marks::{marks, Mark};

use crate::protocol::RankId;
use crate::state::{Action, JobView};

/// Every mark on its rank, times on the rank's own clock; a rank with no time of its own (it
/// never issued a collective before the divergence) is marked at the end of its trace.
pub fn placed(job: &JobView) -> Vec<(RankId, Mark)> {
    let Some(seq) = &job.analysis.sequence else { return Vec::new() };
    marks(seq)
        .into_iter()
        .filter_map(|mut m| {
            let id = job.id_of(m.rank)?;
            let end = job.ranks.iter().find(|(r, _)| *r == id).map(|(_, r)| r.span_end_ns)?;
            m.start_ns = m.start_ns.or(Some(end));
            m.end_ns = m.end_ns.or(m.start_ns);
            Some((id, m))
        })
        .collect()
}

/// The aligned window (own time − offset) covering every mark.
pub fn window(job: &JobView, placed: &[(RankId, Mark)]) -> Option<(i64, i64)> {
    let spans = placed.iter().filter_map(|(id, m)| {
        let off = job.offset(*id);
        Some((m.start_ns? - off, m.end_ns? - off))
    });
    spans.fold(None, |acc, (a, b)| match acc {
        None => Some((a, b.max(a))),
        Some((lo, hi)) => Some((lo.min(a), hi.max(b))),
    })
}

/// Opens the timeline on the divergence: the window of every mark, scrolled to the lowest
/// marked rank (so that as many ranks as fit show from there down; the ranks the diagnosis names
/// carry a ⚠ on their label).
pub fn open(job: &JobView) -> Option<Action> {
    let placed = placed(job);
    let (lo, hi) = window(job, &placed)?;
    let (id, _) = placed.first()?;
    let off = job.offset(*id);
    Some(Action::Open { id: *id, step: None, start_ns: lo + off, end_ns: hi + off })
}
