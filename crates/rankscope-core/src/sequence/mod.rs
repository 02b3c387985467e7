//! The mismatch engine: a hang is a sequence mismatch.
//!
//! Input: per rank, the collectives it issued, in issue order ([`RankSeq`]), from a trace
//! (the analysis' collective instances) or a Flight Recorder dump ([`crate::fr`]). Build a
//! [`CollRecord`] from (process group, kind, seq or nothing, bytes, start, end, step, label);
//! every other field is optional (`..CollRecord::default()`).
//!
//! The rules, per process group (`pg`, the group's *name*, which is the same on every rank;
//! a Flight Recorder `pg_id` is local to each process and is not used):
//!
//! 1. **Records.** Point-to-point records (`p2p`, or kind send / recv / send_recv) pair two
//!    ranks, not the group: they are counted and left out of the alignment.
//! 2. **Alignment.** When every record of every rank in the group has a sequence number
//!    (`collective_seq_id`, Kineto's `Seq`), a record's position is its number; otherwise it is
//!    its ordinal in the group on its rank (1, 2, ...). Records sharing a number on one rank
//!    (the ops of a coalesced group) are told apart by their order. A rank's *window* is
//!    [first position, last position]: a position before a rank's window (a Flight Recorder
//!    ring buffer that wrapped, a profiling window that started later) says nothing about it.
//! 3. **Members** of a group are the ranks with a record in it, plus the ranks the caller
//!    says belong to it ([`SeqOptions::groups`]), plus every expected rank for the group that
//!    holds every rank ([`SeqOptions::world`], with `world_group`).
//! 4. **Positions.** At each position, each member in its window either issued a record or
//!    did not. Records issued there are compared: kind always; input shapes and dtypes when
//!    both ranks know them (element counts × dtype size as bytes otherwise); output shapes
//!    too except for all_to_all, gather and scatter, whose buffers legitimately differ.
//!    A position *diverges* when a member past its window did not issue it (its records end
//!    before: it never issued it), a member inside its window did not (it skipped it), or the
//!    records differ ([`DivergenceClass`]). The first diverging position of a group is its
//!    cause; later ones are usually the consequence and are only counted.
//! 5. **Shift.** At a mismatch, a minority rank whose next records equal the majority's from
//!    one to four positions later *skipped* those collectives; one whose records from a few
//!    positions later equal the majority's from here *issued extra* ones ([`Shift`]) — only
//!    when the unshifted records disagree at least twice in the next eight (periodic
//!    sequences match themselves shifted by a period). A job stuck at the mismatch has no
//!    records to compare; then the steps tell: a minority record in a later step than the
//!    majority's means the rank skipped the rest of the majority's step (in an earlier step:
//!    it issued extra ones).
//! 6. **Entered / completed.** The last record of a rank in a group is the last it entered.
//!    The last it completed is the last with state `completed` when states are trusted
//!    (not on gloo: Flight Recorder leaves every gloo entry `scheduled`); otherwise it is
//!    inferred: the last position every member issued alike and after which some member issued
//!    another record in the group (it got past it), or whose record has an end time on the rank
//!    ([`CompletedBasis::Inferred`]).
//! 7. **Waits.** A rank that issued a diverging record waited in it from its start to its end
//!    when the end is known (a trace), or is still waiting (a dump). The group's timeout is the
//!    dump's `timeout_ms`, else [`SeqOptions::timeout_ms`], else the waits themselves when two or
//!    more agree within 5% and exceed 1 s (a wait ended by the timeout), else the backend's
//!    default (NCCL 10 min, gloo 30 min). A wait of at least 80% of it is *near the timeout*;
//!    so is any record anywhere that lasted that long.
//! 8. **Ranks.** An expected rank with no records at all has no input (no dump: it may have
//!    crashed). A rank whose window ends before another member's in some group *ends early*.
//! 9. **Diagnoses**, most important first: the first divergence of each group (hang or
//!    mismatch), earliest start first; missing inputs; ends early not explained by a
//!    divergence; near-timeout waits. Each carries the expert's sentence ([`text`]). A
//!    "not issued" tail whose waits are all known and under 1 s is no hang (profilers that
//!    stopped at different collectives). A rank that did not issue a collective but went on in
//!    another group is said to be there ("and it is stuck in all_reduce #5 of group `0`").
//!
//! Output is deterministic: ranks and groups sorted, maps are `BTreeMap`s.
//!
//! By concern: this module builds each rank's lanes and runs the engine ([`analyze`]); `group`
//! holds one group's report (rules 2–4, 6–8); `divergence` compares the records at a position
//! and looks for shifts (rules 4 and 5); `diagnose` words the findings (rule 9).

use std::collections::{BTreeMap, BTreeSet};

use crate::model::CollKind;

pub mod marks;
pub mod text;

mod diagnose;
mod divergence;
mod group;
mod types;

pub use types::*;

use diagnose::diagnose;
use group::{group_report, PgRecords};

/// A position key: (position, index among the rank's records with that position).
type Key = (i64, u32);

/// One rank's records in one group, by key.
struct Lane<'a> {
    rank: u32,
    seq: &'a RankSeq,
    /// (key, index into `seq.records`) in issue order.
    recs: Vec<(Key, usize)>,
    by_key: BTreeMap<Key, usize>,
    p2p: u32,
    trust_state: bool,
}

impl Lane<'_> {
    fn first(&self) -> Option<Key> {
        self.by_key.keys().next().copied()
    }
    fn last(&self) -> Option<Key> {
        self.by_key.keys().next_back().copied()
    }
    fn rec(&self, i: usize) -> Option<&CollRecord> {
        self.seq.records.get(i)
    }
}

/// Runs the engine.
pub fn analyze(seqs: &[RankSeq], opts: &SeqOptions) -> SequenceReport {
    let mut seqs: Vec<&RankSeq> = seqs.iter().collect();
    seqs.sort_by_key(|s| s.rank);
    seqs.dedup_by_key(|s| s.rank);
    let present: BTreeSet<u32> = seqs.iter().map(|s| s.rank).collect();
    let no_input: BTreeSet<u32> = opts.world.iter().copied().filter(|r| !present.contains(r)).collect();
    // Membership asked once per rank and group: a set, not the list (a `pg_config` of a million
    // ranks made `Vec::contains` here quadratic: 34–56 s).
    let world: BTreeSet<u32> = opts.world.iter().copied().collect();

    // Step ordinals: per rank, per (pg, step), in issue order.
    let step_ordinals: BTreeMap<u32, Vec<Option<u32>>> = seqs
        .iter()
        .map(|s| {
            let mut count: BTreeMap<(&str, u32), u32> = BTreeMap::new();
            let v = s
                .records
                .iter()
                .map(|r| {
                    r.step.map(|st| {
                        let c = count.entry((r.pg.as_str(), st)).or_insert(0);
                        *c += 1;
                        *c
                    })
                })
                .collect();
            (s.rank, v)
        })
        .collect();
    let ctx = Ctx { step_ordinals: &step_ordinals };

    let mut pgs: BTreeMap<&str, &str> = BTreeMap::new();
    for s in &seqs {
        for r in &s.records {
            let d = pgs.entry(r.pg.as_str()).or_insert("");
            if d.is_empty() {
                *d = r.pg_desc.as_str();
            }
        }
    }
    for g in opts.groups.keys() {
        pgs.entry(g.as_str()).or_insert("");
    }

    // Per rank, its records by group, found in one pass (a scan of every record per group
    // was most of the analysis' time at 1,024 ranks and hundreds of groups).
    let by_pg: Vec<BTreeMap<&str, PgRecords>> = seqs
        .iter()
        .map(|s| {
            let mut m: BTreeMap<&str, PgRecords> = BTreeMap::new();
            for (i, r) in s.records.iter().enumerate() {
                let e = m.entry(r.pg.as_str()).or_default();
                if r.is_p2p() {
                    e.p2p += 1;
                } else {
                    e.coll.push(i);
                }
            }
            m
        })
        .collect();
    let mut groups = Vec::new();
    for (pg, desc) in &pgs {
        groups.push(group_report(pg, desc, &seqs, &by_pg, &no_input, &world, opts, &ctx));
    }

    // Per rank, over all groups.
    let mut ends_early: BTreeSet<u32> = BTreeSet::new();
    let mut completed: BTreeMap<u32, Vec<RecordRef>> = BTreeMap::new();
    for g in &groups {
        let max_last = g.ranks.iter().filter_map(|r| r.last_entered.as_ref().map(|x| x.position)).max();
        for r in &g.ranks {
            if let (Some(l), Some(m)) = (r.last_entered.as_ref(), max_last) {
                if l.position < m {
                    ends_early.insert(r.rank);
                }
            }
            if let Some(c) = &r.last_completed {
                completed.entry(r.rank).or_default().push(c.clone());
            }
        }
    }
    let mut ranks = Vec::new();
    for s in &seqs {
        let times = s.records.iter().flat_map(|r| [r.start_ns, r.end_ns]).flatten();
        let (first_ns, last_ns) = (times.clone().min(), times.max());
        let last_entered = s
            .records
            .iter()
            .enumerate()
            .rev()
            .find(|(_, r)| !r.is_p2p())
            .and_then(|(i, _)| find_ref(&groups, s.rank, i, s));
        // The latest completed over the groups, by start time, else by group order.
        let last_completed = completed
            .get(&s.rank)
            .and_then(|v| v.iter().max_by_key(|r| (r.start_ns.unwrap_or(i64::MIN), r.position)).cloned());
        ranks.push(RankSummary {
            rank: s.rank,
            source: Some(s.source),
            backend: s.backend,
            file: s.file.clone(),
            records: s.records.len() as u32,
            no_input: false,
            ends_early: ends_early.contains(&s.rank),
            last_entered,
            last_completed,
            first_ns,
            last_ns,
        });
    }
    for &r in &no_input {
        ranks.push(RankSummary {
            rank: r,
            source: None,
            backend: Backend::Unknown,
            file: String::new(),
            records: 0,
            no_input: true,
            ends_early: false,
            last_entered: None,
            last_completed: None,
            first_ns: None,
            last_ns: None,
        });
    }
    ranks.sort_by_key(|r| r.rank);

    let mut sources: Vec<Source> = seqs.iter().map(|s| s.source).collect();
    sources.sort();
    sources.dedup();
    let mut notes = Vec::new();
    if seqs.iter().any(|s| s.backend == Backend::Gloo && s.source == Source::FlightRecorder) {
        notes.push(
            "gloo: Flight Recorder leaves every entry `scheduled` and reports the last enqueued \
             collective as the last completed; completion is inferred from the sequences"
                .to_string(),
        );
    }
    let mut report = SequenceReport { sources, ranks, groups, diagnoses: Vec::new(), notes };
    report.diagnoses = diagnose(&report);
    report
}

struct Ctx<'a> {
    step_ordinals: &'a BTreeMap<u32, Vec<Option<u32>>>,
}

impl Ctx<'_> {
    fn record_ref(&self, lane: &Lane<'_>, key: Key, i: usize) -> Option<RecordRef> {
        let r = lane.rec(i)?;
        Some(RecordRef {
            rank: lane.rank,
            pg: r.pg.clone(),
            pg_desc: r.pg_desc.clone(),
            position: key.0,
            kind: r.kind,
            name: r.name.clone(),
            in_sizes: r.in_sizes.clone(),
            in_dtypes: r.in_dtypes.clone(),
            out_sizes: r.out_sizes.clone(),
            bytes: r.message_bytes(),
            state: r.state,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
            step: r.step,
            step_ordinal: self.step_ordinals.get(&lane.rank).and_then(|v| v.get(i).copied().flatten()),
            label: r.label.clone().or_else(|| r.user_frame().map(|f| f.name.clone())),
            frames: r.frames.iter().take(8).cloned().collect(),
        })
    }
}

/// The record `i` of rank `rank`, as the group report listed it.
fn find_ref(groups: &[GroupReport], rank: u32, i: usize, s: &RankSeq) -> Option<RecordRef> {
    let r = s.records.get(i)?;
    let g = groups.iter().find(|g| g.pg == r.pg)?;
    let gr = g.ranks.iter().find(|x| x.rank == rank)?;
    // The last record of the rank overall is the last it entered in that group.
    gr.last_entered.clone()
}

#[cfg(test)]
mod tests;
