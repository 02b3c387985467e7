//! The one plan of an export, for every shell: which ranks are written, in which order, under
//! which rank number (the key the job filed them under, not whatever their tables were
//! normalized with), on which alignment, and where time 0 is. The CLI writes a whole export from
//! it in one go ([`ExportPlan::write_merged`], [`ExportPlan::write_perfetto`]); the app hands each
//! planned rank to the worker holding its events and joins the pieces with the plan's head and
//! tail. Both write the same bytes (the e2e tests compare them).

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use super::{perfetto, Placement};
use crate::analyze::align::RankAlignment;

/// The alignment offset of `rank` (aligned time = rank time − offset; 0 for a rank the analysis
/// did not align): the one lookup of it.
pub fn offset_of(alignment: &[RankAlignment], rank: u32) -> i64 {
    alignment_of(alignment, rank).map_or(0, |x| x.offset_ns)
}

fn alignment_of(alignment: &[RankAlignment], rank: u32) -> Option<&RankAlignment> {
    alignment.iter().find(|x| x.rank == rank)
}

/// One rank of an export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planned {
    /// The rank the job filed the file under (its `pid`, its process name, its member's name).
    pub rank: u32,
    /// Its alignment offset (aligned time = own time − this).
    pub offset_ns: i64,
    /// How the offset was found (the alignment's method; empty when the rank was not aligned).
    pub method: String,
}

/// What an export writes (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportPlan {
    /// The ranks whose events are written, in the order they are written.
    pub ranks: Vec<Planned>,
    /// The merged trace's time 0: the earliest aligned event start over the planned ranks.
    pub origin_ns: i64,
    /// Every rank's alignment `(rank, offset, method)`, as the merged trace's header records it.
    alignment: Vec<(u32, i64, String)>,
    /// What the job's ranks say of it (`distributedInfo` without a rank: world size, backend),
    /// written in the merged trace's head so that reading it back knows them.
    job: super::JobInfo,
}

impl ExportPlan {
    /// The plan for `ranks`: every rank whose events are at hand, as `(rank, its earliest event
    /// start on its own clock)`, in the order they are written (the job's: by rank, then file);
    /// `alignment` is the analysis's.
    pub fn new(
        alignment: &[RankAlignment],
        ranks: impl IntoIterator<Item = (u32, Option<i64>)>,
    ) -> ExportPlan {
        let mut origin: Option<i64> = None;
        let ranks = ranks
            .into_iter()
            .map(|(rank, first_ns)| {
                let a = alignment_of(alignment, rank);
                let offset_ns = a.map_or(0, |x| x.offset_ns);
                if let Some(t) = first_ns {
                    origin = Some(origin.map_or(t - offset_ns, |o| o.min(t - offset_ns)));
                }
                Planned {
                    rank,
                    offset_ns,
                    method: a.map_or_else(String::new, |x| x.method.as_str().to_string()),
                }
            })
            .collect();
        let alignment =
            alignment.iter().map(|x| (x.rank, x.offset_ns, x.method.as_str().to_string())).collect();
        ExportPlan { ranks, origin_ns: origin.unwrap_or(0), alignment, job: super::JobInfo::default() }
    }

    /// [`ExportPlan::new`] for a job's analysis: its alignment, and the world size and backend
    /// its ranks state (the merged trace's head records them; every shell plans this way).
    pub fn of(
        a: &crate::analyze::Analysis,
        ranks: impl IntoIterator<Item = (u32, Option<i64>)>,
    ) -> ExportPlan {
        let mut plan = ExportPlan::new(&a.alignment, ranks);
        plan.job = super::JobInfo {
            world_size: a.ranks.iter().filter_map(|r| r.world_size).max(),
            backend: a.ranks.iter().find_map(|r| r.backend.clone()),
        };
        plan
    }

    /// Whether the plan has no rank (then time 0 is no event's, and an export holds no events).
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    /// The merged trace's opening ([`super::write_header`]), before the ranks' pieces.
    pub fn merged_head(&self) -> Vec<u8> {
        let methods: Vec<(u32, i64, &str)> =
            self.alignment.iter().map(|(r, o, m)| (*r, *o, m.as_str())).collect();
        let mut out = Vec::new();
        // Writing into a Vec cannot fail.
        let _ = super::write_header(&mut out, self.origin_ns, &methods, &self.job);
        out
    }

    /// The merged trace's end, after the ranks' pieces.
    pub fn merged_tail(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = super::write_footer(&mut out);
        out
    }

    /// The Perfetto archive's plan: a member per planned rank, the first the reference.
    pub fn perfetto(&self) -> perfetto::Plan {
        let input: Vec<(u32, i64, &str)> =
            self.ranks.iter().map(|p| (p.rank, p.offset_ns, p.method.as_str())).collect();
        perfetto::plan(&input, self.origin_ns)
    }

    /// The Perfetto archive's end: the manifest and the tar's end blocks.
    pub fn perfetto_tail(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = perfetto::write_tail(&mut out, &self.perfetto());
        out
    }

    /// Writes the whole merged trace: the head, then each planned rank's events by
    /// `events(k, out, at, first)` (the `k`-th planned rank, placed on the aligned clock, as
    /// [`super::write_rank`] writes them), then the tail.
    pub fn write_merged<W: Write>(
        &self,
        out: &mut W,
        mut events: impl FnMut(usize, &mut W, &Placement, bool) -> io::Result<()>,
    ) -> io::Result<()> {
        out.write_all(&self.merged_head())?;
        for (k, p) in self.ranks.iter().enumerate() {
            events(k, out, &Placement::merged(p, self.origin_ns), k == 0)?;
        }
        out.write_all(&self.merged_tail())
    }

    /// Writes the whole Perfetto archive: each planned rank's member, its events written by
    /// `events(k, out, at)` (placed on its own clock less the archive's shift,
    /// [`perfetto::write_member`]'s), then the tail.
    pub fn write_perfetto<W: Write>(
        &self,
        out: &mut W,
        mut events: impl FnMut(usize, &mut dyn Write, &Placement) -> io::Result<()>,
    ) -> io::Result<()> {
        let plan = self.perfetto();
        for (k, m) in plan.members.iter().enumerate() {
            let at = Placement::member(m, plan.shift_ns);
            perfetto::write_member(out, m, plan.shift_ns, |w| events(k, w, &at))?;
        }
        perfetto::write_tail(out, &plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::align::AlignMethod;

    fn aligned(rank: u32, method: AlignMethod, offset_ns: i64) -> RankAlignment {
        RankAlignment {
            rank,
            method,
            offset_ns,
            estimate_ns: offset_ns,
            residual_ns: 0,
            max_residual_ns: 0,
            anchors: 0,
            clock_group: rank,
            rank_estimate_ns: None,
            note: String::new(),
        }
    }

    #[test]
    fn the_plan_writes_each_rank_under_its_key_on_its_offset() {
        let alignment = [aligned(0, AlignMethod::Timestamps, 0), aligned(1, AlignMethod::Collectives, 300)];
        // Rank 1's events start at 1,000 on its clock (700 aligned), rank 0's at 900; rank 2 was
        // not aligned and has no events.
        let plan = ExportPlan::new(&alignment, [(0, Some(900)), (1, Some(1_000)), (2, None)]);
        assert_eq!(plan.origin_ns, 700, "the earliest aligned start");
        let got: Vec<(u32, i64, &str)> =
            plan.ranks.iter().map(|p| (p.rank, p.offset_ns, p.method.as_str())).collect();
        assert_eq!(got, [(0, 0, "timestamps"), (1, 300, "collectives"), (2, 0, "")]);
        assert_eq!(offset_of(&alignment, 1), 300);
        assert_eq!(offset_of(&alignment, 2), 0);
        // The merged trace: head, each planned rank's piece in order, tail: valid JSON.
        let mut out = Vec::new();
        let mut seen = Vec::new();
        plan.write_merged(&mut out, |k, _, at, first| {
            seen.push((k, at.rank, at.zero_ns - at.offset_ns, first));
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(seen, [(0, 0, 700, true), (1, 1, 700, false), (2, 2, 700, false)]);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{e}"));
        assert!(v["traceEvents"].as_array().is_some_and(Vec::is_empty));
        // The archive: one member per planned rank, named by its key.
        let members: Vec<(u32, String)> =
            plan.perfetto().members.into_iter().map(|m| (m.rank, m.path)).collect();
        assert_eq!(members, [(0, "rank0.json".into()), (1, "rank1.json".into()), (2, "rank2.json".into())]);
        assert!(ExportPlan::new(&alignment, []).is_empty());
    }
}
