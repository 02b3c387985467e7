//! What the app's views ask of the pipeline, as pure functions over the tables.
//!
//! The app keeps each rank's tables in the Web Worker that read it and asks small questions:
//! a [`RankView`] is what a worker holds and answers from. [`summary`] is the per-rank summary
//! sent to the UI and the job facts built from several of them, [`ranks`] the job-level rank
//! decision made from those summaries, [`timeline`] the level-of-detail tiles the timeline
//! draws, [`members`] each collective's members across ranks (the timeline's jump from one
//! rank's collective to the others'), [`memory`] the memory track's tiles. Like the rest of the core, nothing here knows of the browser.

pub mod members;
pub mod memory;
pub mod metrics;
pub mod ranks;
pub mod summary;
pub mod timeline;

use serde::{Deserialize, Serialize};

use crate::analyze::{self, RankPart};
use crate::inspect::{self, FileReport};
use crate::model::{EventKind, LaneKind, RankTrace, NONE_U32};
use crate::normalize::{assemble, job::RankEntry, Job, Rules};
pub use ranks::{apply_decision, RankClaim, RankDecision};
pub use summary::{JobFacts, RankSummary};
pub use timeline::{Tile, TileKey, TimelineIndex};

/// One rank, normalized, with its inspect report and timeline index: what a worker holds.
#[derive(Debug, Clone)]
pub struct RankView {
    job: Job,
    report: Option<FileReport>,
    index: TimelineIndex,
    /// The allocator's series per device ([`memory`]), built once.
    memory: Vec<memory::MemorySeries>,
}

impl RankView {
    /// Normalizes one file's trace as a one-rank job. Its rank is the job's to decide (from every
    /// file's claim, [`crate::normalize::decide`]): what is written or shown under a rank takes
    /// the job's key (`write_trace`'s plan, [`apply_decision`] on the summary), never this
    /// view's own number.
    pub fn new(trace: RankTrace, rules: &Rules) -> RankView {
        let job = assemble(vec![trace], &[], rules);
        let report = inspect::report(&job, Vec::new()).files.into_iter().next();
        let index = job.ranks.first().map(|r| TimelineIndex::build(&r.trace)).unwrap_or_default();
        let memory = job.ranks.first().map(|r| analyze::memory::series(r, &job.strings)).unwrap_or_default();
        RankView { job, report, index, memory }
    }

    pub fn entry(&self) -> Option<&RankEntry> {
        self.job.ranks.first()
    }

    /// This file's entry of the `rankscope.inspect` report.
    pub fn inspect(&self) -> Option<&FileReport> {
        self.report.as_ref()
    }

    pub fn job(&self) -> &Job {
        &self.job
    }

    /// Whether each event's source `args` are held ([`crate::model::raw_args`]).
    pub fn has_source_args(&self) -> bool {
        self.entry().is_some_and(|e| e.trace.raw_args.is_some())
    }

    /// Event row `i`'s source `args` object as its text (`Some("")`: the event had none; `None`:
    /// not held, or not kept for this row).
    pub fn source_args(&self, i: u32) -> Option<&str> {
        let raw = self.entry()?.trace.raw_args.as_ref()?.get(i as usize)?;
        std::str::from_utf8(raw).ok()
    }

    /// Takes the source `args` of `other`, a view of the same file read again with them kept
    /// (`FileIngest::keep_args`), when its event rows are this view's row for row (same start,
    /// duration, class and name): true when taken. A file read in pieces and read again whole
    /// gives the same rows; if ever not, nothing is taken and the caller uses `other` itself.
    pub fn adopt_source_args(&mut self, other: &mut RankView) -> bool {
        let (Some(mine), Some(theirs)) = (self.job.ranks.first(), other.job.ranks.first()) else {
            return false;
        };
        let (a, b) = (&mine.trace.events, &theirs.trace.events);
        let same = a.len() == b.len()
            && theirs.trace.raw_args.as_ref().is_some_and(|r| r.rows() == b.len())
            && a.ts_ns == b.ts_ns
            && a.dur_ns == b.dur_ns
            && a.class == b.class
            && a.name.iter().zip(&b.name).all(|(x, y)| self.job.strings.get(*x) == other.job.strings.get(*y));
        if !same {
            return false;
        }
        let raw = other.job.ranks.first_mut().and_then(|e| e.trace.raw_args.take());
        match self.job.ranks.first_mut() {
            Some(e) if raw.is_some() => {
                e.trace.raw_args = raw;
                true
            }
            _ => false,
        }
    }

    /// This rank's half of the analysis (`analyze::rank_part`), with the default kernel-wait
    /// threshold, as `rankscope analyze` computes it.
    pub fn analysis_part(&self) -> Option<RankPart> {
        let e = self.entry()?;
        Some(analyze::rank_part(e, &self.job.strings, analyze::idle::DEFAULT_KERNEL_WAIT_THRESHOLD_NS))
    }

    /// The earliest event start (absolute ns, own clock): the merged trace's origin is the
    /// smallest of these minus each rank's offset ([`crate::export::ExportPlan`]).
    pub fn first_ns(&self) -> Option<i64> {
        self.entry()?.trace.events.ts_ns.iter().min().copied()
    }

    /// Writes this rank's member of the Perfetto archive (`export::perfetto::write_member`): its
    /// events on its own clock less the plan's shift (`Plan::shift_ns`), as the member's rank.
    pub fn write_perfetto_member<W: std::io::Write>(
        &self,
        out: &mut W,
        member: &crate::export::perfetto::Member,
        shift_ns: i64,
    ) -> std::io::Result<u64> {
        let at = crate::export::Placement::member(member, shift_ns);
        crate::export::perfetto::write_member(out, member, shift_ns, |mut w| {
            self.write_placed(&mut w, &at, true)?;
            match self.entry() {
                Some(e) => crate::export::write_step_track(w, e, &at),
                None => Ok(()),
            }
        })
    }

    /// Writes this rank's piece of the merged, aligned Chrome trace (`export::write_rank`) as the
    /// plan says: under the job's rank for this file, on its offset.
    pub fn write_trace<W: std::io::Write>(
        &self,
        out: &mut W,
        planned: &crate::export::Planned,
        origin_ns: i64,
        first: bool,
    ) -> std::io::Result<u64> {
        self.write_placed(out, &crate::export::Placement::merged(planned, origin_ns), first)
    }

    fn write_placed<W: std::io::Write>(
        &self,
        out: &mut W,
        at: &crate::export::Placement,
        first: bool,
    ) -> std::io::Result<u64> {
        match self.entry() {
            Some(e) => crate::export::write_rank(out, e, &self.job.strings, at, first),
            None => Ok(0),
        }
    }

    /// This rank's piece of the `events` table (docs/columnar.md) under `rank` (the job's key
    /// for this file) on the aligned clock (`offset_ns`, the rank's offset).
    pub fn events_table(&self, rank: u32, offset_ns: i64) -> Option<crate::export::columnar::Table> {
        Some(crate::export::columnar::tables::events(self.entry()?, &self.job.strings, rank, offset_ns))
    }

    pub fn summary(&self) -> Option<RankSummary> {
        let mut s = RankSummary::new(self.entry()?, self.report.as_ref()?, &self.index, &self.job.strings);
        s.memory = self.memory.iter().map(memory::MemorySeries::track).collect();
        Some(s)
    }

    /// One tile of the memory track ([`memory::tile`]).
    pub fn memory_tile(&self, key: memory::MemoryTileKey) -> memory::MemoryTile {
        memory::tile(&self.memory, key)
    }

    /// Each device's memory over `[t0_ns, t1_ns)` of the rank's own clock ([`memory::span`]).
    pub fn memory_span(&self, t0_ns: i64, t1_ns: i64) -> Vec<memory::MemorySpan> {
        memory::span(&self.memory, t0_ns, t1_ns)
    }

    pub fn tile(&self, key: TileKey) -> Tile {
        match self.entry() {
            Some(e) => self.index.tile(&e.trace, &self.job.strings, key),
            None => Tile { key, ..Tile::default() },
        }
    }

    /// Details of the event drawn at `t_ns` in row `depth` of `lane` (within `slop_ns`).
    pub fn pick(&self, lane: u32, depth: u32, t_ns: i64, slop_ns: i64) -> Option<EventDetail> {
        let e = self.entry()?;
        let i = self.index.pick(&e.trace, lane, depth, t_ns, slop_ns)?;
        self.detail(i)
    }

    /// The events whose name contains `query` (case-insensitive): how many, and where the
    /// timeline draws the first `limit` of them.
    pub fn search(&self, query: &str, limit: usize) -> Found {
        let q = query.trim().to_lowercase();
        let Some(e) = self.entry() else { return Found::default() };
        if q.is_empty() {
            return Found::default();
        }
        // Match each distinct name once, then the events by id.
        let mut hit_ids = vec![false; self.job.strings.len()];
        for (id, s) in self.job.strings.iter() {
            if s.to_lowercase().contains(&q) {
                if let Some(h) = hit_ids.get_mut(id.0 as usize) {
                    *h = true;
                }
            }
        }
        let ev = &e.trace.events;
        let mut found = Found::default();
        for i in 0..ev.len() {
            if !hit_ids.get(ev.name[i].0 as usize).copied().unwrap_or(false) {
                continue;
            }
            let lane = ev.lane[i].0;
            let Some(depth) = self.index.depth_of(lane, i as u32) else { continue };
            found.total += 1;
            if found.hits.len() < limit {
                found.hits.push(Hit { lane, depth, start_ns: ev.ts_ns[i], end_ns: ev.end_ns(i) });
            }
        }
        found
    }

    /// Where the timeline draws event row `i` (lane, nesting row, own-clock times): a member of
    /// a collective on another rank is selected with it.
    pub fn place_of(&self, i: u32) -> Option<Hit> {
        self.place(i as usize)
    }

    /// Where the timeline draws event row `i`.
    fn place(&self, i: usize) -> Option<Hit> {
        let e = self.entry()?;
        let ev = &e.trace.events;
        let lane = *ev.lane.get(i)?;
        let depth = self.index.depth_of(lane.0, i as u32)?;
        Some(Hit { lane: lane.0, depth, start_ns: ev.ts_ns[i], end_ns: ev.end_ns(i) })
    }

    /// Details of event row `i`.
    pub fn detail(&self, i: u32) -> Option<EventDetail> {
        let entry = self.entry()?;
        let t = &entry.trace;
        let ev = &t.events;
        let k = i as usize;
        if k >= ev.len() {
            return None;
        }
        let s = &self.job.strings;
        let gpu = t.lanes.kind.get(ev.lane[k].0 as usize) == Some(&LaneKind::Gpu);
        let mut args = Vec::new();
        if let Some(a) = Some(ev.args[k]).filter(|&a| a != NONE_U32).map(|a| a as usize) {
            let c = &t.comm;
            if a < c.len() {
                let mut push = |key: &str, v: String| {
                    if !v.is_empty() && v != "-1" {
                        args.push((key.to_string(), v));
                    }
                };
                push("collective", s.get(c.collective[a]).to_string());
                push("in_nelems", c.in_nelems[a].to_string());
                push("out_nelems", c.out_nelems[a].to_string());
                push("in_bytes", c.in_bytes[a].to_string());
                push("out_bytes", c.out_bytes[a].to_string());
                push("dtype", s.get(c.dtype[a]).to_string());
                push("group_size", c.group_size[a].to_string());
                push("pg_name", s.get(c.pg_name[a]).to_string());
                push("pg_desc", s.get(c.pg_desc[a]).to_string());
                push("seq", c.seq[a].to_string());
                push("input_dims", s.get(c.input_dims[a]).to_string());
            }
        }
        let links = &entry.norm.links;
        let launch = if gpu {
            links.launch_of(crate::model::EventIdx(i)).map(|l| {
                let l = l.0 as usize;
                format!("{} at {} ns", s.get(ev.name[l]), ev.ts_ns[l])
            })
        } else {
            None
        };
        // The other end of the launch → kernel flow: the launch of GPU work, or the first GPU
        // event a runtime call launched.
        let other = if gpu {
            links.launch_of(crate::model::EventIdx(i)).map(|l| l.0 as usize)
        } else {
            links.launch.iter().position(|l| l.0 == i).and_then(|k| links.gpu.get(k)).map(|g| g.0 as usize)
        };
        let link = other.and_then(|o| {
            let place = self.place(o)?;
            Some(FlowEnd { name: s.get(ev.name[o]).to_string(), place })
        });
        Some(EventDetail {
            event: i,
            name: s.get(ev.name[k]).to_string(),
            cat: s.get(ev.cat[k]).to_string(),
            class: ev.class[k].name().to_string(),
            class_id: ev.class[k] as u8,
            instant: ev.kind[k] == EventKind::Instant,
            start_ns: ev.ts_ns[k],
            dur_ns: ev.dur_ns[k],
            step: Some(ev.step[k]).filter(|&x| x != NONE_U32),
            gpu,
            launch,
            link,
            args,
            source_args: self.source_args(i).map(str::to_string),
        })
    }
}

/// What the timeline shows about one event on hover or click.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventDetail {
    pub event: u32,
    pub name: String,
    pub cat: String,
    pub class: String,
    pub class_id: u8,
    pub instant: bool,
    pub start_ns: i64,
    pub dur_ns: i64,
    pub step: Option<u32>,
    pub gpu: bool,
    /// For GPU work: the runtime call that launched it.
    pub launch: Option<String>,
    /// The other end of its launch → kernel flow (the launch of a kernel, the first kernel of a
    /// launch), where the timeline draws it.
    pub link: Option<FlowEnd>,
    /// Communication arguments, as `(name, value)`.
    pub args: Vec<(String, String)>,
    /// The source's own `args` object, verbatim, when the view holds them
    /// ([`RankView::source_args`]; `""`: the event had none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_args: Option<String>,
}

/// One end of a launch → kernel flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowEnd {
    pub name: String,
    pub place: Hit,
}

/// Where the timeline draws an event: lane, nesting row, start and end (absolute ns, own clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hit {
    pub lane: u32,
    pub depth: u32,
    pub start_ns: i64,
    pub end_ns: i64,
}

/// The result of a search by name in one rank.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Found {
    /// Matching events drawn by the timeline.
    pub total: u64,
    /// The first of them, in time order.
    pub hits: Vec<Hit>,
}

#[cfg(test)]
mod tests;
