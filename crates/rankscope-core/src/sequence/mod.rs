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

use std::collections::{BTreeMap, BTreeSet};

use crate::model::CollKind;

pub mod marks;
pub mod text;
mod types;

pub use types::*;

/// How many records after a mismatch the shift test compares.
const SHIFT_WINDOW: usize = 8;

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

/// Fields that differ between two records (unknowns never differ).
fn differs(a: &CollRecord, b: &CollRecord) -> Vec<Field> {
    let mut f = Vec::new();
    if a.kind != b.kind {
        f.push(Field::Kind);
        return f;
    }
    let loose =
        matches!(a.kind, CollKind::AllToAll | CollKind::Gather | CollKind::Scatter | CollKind::Unknown);
    let known = |s: &Vec<Vec<i64>>| !s.is_empty();
    let mut shapes_compared = false;
    if known(&a.in_sizes) && known(&b.in_sizes) {
        shapes_compared = true;
        if a.in_sizes != b.in_sizes && !loose {
            f.push(Field::Shape);
        }
    }
    if !loose
        && known(&a.out_sizes)
        && known(&b.out_sizes)
        && a.out_sizes != b.out_sizes
        && !f.contains(&Field::Shape)
    {
        f.push(Field::Shape);
    }
    if !a.in_dtypes.is_empty() && !b.in_dtypes.is_empty() && a.in_dtypes != b.in_dtypes {
        f.push(Field::Dtype);
    }
    let mut sizes_compared = shapes_compared;
    if !shapes_compared && !loose {
        if let (Some(x), Some(y)) = (a.message_bytes(), b.message_bytes()) {
            sizes_compared = true;
            if x != y {
                f.push(Field::Size);
            }
        }
    }
    // A trace recorded without `record_shapes` (the profiler's default) sizes nothing: two
    // calls of one kind are then told apart by where the host issued them (the annotation open
    // at the call, `loss_allreduce` against `grad_allreduce`), when both say.
    if !sizes_compared && a.message_bytes().is_none() && b.message_bytes().is_none() {
        if let (Some(x), Some(y)) = (&a.label, &b.label) {
            if x != y {
                f.push(Field::Origin);
            }
        }
    }
    f
}

/// A rank's records in one group: its collectives' indices, and how many exchanges.
#[derive(Debug, Default)]
struct PgRecords {
    coll: Vec<usize>,
    p2p: u32,
}

#[allow(clippy::too_many_arguments)]
fn group_report(
    pg: &str,
    desc: &str,
    seqs: &[&RankSeq],
    by_pg: &[BTreeMap<&str, PgRecords>],
    no_input: &BTreeSet<u32>,
    world: &BTreeSet<u32>,
    opts: &SeqOptions,
    ctx: &Ctx<'_>,
) -> GroupReport {
    let mut lanes: Vec<Lane<'_>> = Vec::new();
    for (s, mine) in seqs.iter().zip(by_pg) {
        let (coll, p2p): (&[usize], u32) = mine.get(pg).map_or((&[], 0), |x| (x.coll.as_slice(), x.p2p));
        let in_group = p2p > 0
            || !coll.is_empty()
            || opts.groups.get(pg).is_some_and(|m| m.contains(&s.rank))
            || (opts.world_group.as_deref() == Some(pg) && world.contains(&s.rank));
        if !in_group {
            continue;
        }
        let trust_state = s.backend != Backend::Gloo
            && coll.iter().any(|&i| matches!(s.records[i].state, State::Started | State::Completed));
        lanes.push(Lane {
            rank: s.rank,
            seq: s,
            recs: coll.iter().map(|&i| ((0, 0), i)).collect(),
            by_key: BTreeMap::new(),
            p2p,
            trust_state,
        });
    }
    let by_seq = lanes.iter().all(|l| l.recs.iter().all(|&(_, i)| l.seq.records[i].seq.is_some()))
        && lanes.iter().any(|l| !l.recs.is_empty());
    for l in &mut lanes {
        let mut sub: BTreeMap<i64, u32> = BTreeMap::new();
        for (n, (key, i)) in l.recs.iter_mut().enumerate() {
            let pos = if by_seq { l.seq.records[*i].seq.unwrap_or(0) } else { n as i64 + 1 };
            let s = sub.entry(pos).or_insert(0);
            *key = (pos, *s);
            *s += 1;
            l.by_key.insert(*key, *i);
        }
    }
    let mut members: BTreeSet<u32> = lanes.iter().map(|l| l.rank).collect();
    let mut absent: Vec<u32> = Vec::new();
    for &r in no_input {
        let listed = opts.groups.get(pg).is_some_and(|m| m.contains(&r))
            || (opts.world_group.as_deref() == Some(pg) && world.contains(&r));
        if listed {
            members.insert(r);
            absent.push(r);
        }
    }
    // Silent: members without a collective where another member issued some (a group of
    // point-to-point exchanges only, a pipeline's, has no collective sequence to miss).
    let any_coll = lanes.iter().any(|l| !l.recs.is_empty());
    let silent: Vec<u32> = lanes.iter().filter(|l| any_coll && l.recs.is_empty()).map(|l| l.rank).collect();
    let lanes: Vec<Lane<'_>> = lanes.into_iter().filter(|l| !l.recs.is_empty()).collect();
    let timeout_dump =
        lanes.iter().flat_map(|l| l.recs.iter().filter_map(|&(_, i)| l.seq.records[i].timeout_ms)).max();
    let backend = lanes.iter().map(|l| l.seq.backend).find(|b| b.default_timeout_ms().is_some());

    // Every position any member issued.
    let keys: BTreeSet<Key> = lanes.iter().flat_map(|l| l.by_key.keys().copied()).collect();
    let mut divergences = Vec::new();
    let mut diverging = 0u32;
    let mut clean: BTreeSet<Key> = BTreeSet::new();
    for &key in &keys {
        match divergence_at(pg, desc, key, &lanes, ctx) {
            Some(d) => {
                diverging += 1;
                if divergences.len() < MAX_LISTED {
                    divergences.push(d);
                }
            }
            None => {
                clean.insert(key);
            }
        }
    }
    // The timeout, then waits against it.
    let timeout = timeout_dump
        .map(|ms| Timeout { ms, source: TimeoutSource::Dump })
        .or(opts.timeout_ms.map(|ms| Timeout { ms, source: TimeoutSource::Given }))
        .or_else(|| observed_timeout(divergences.first()))
        .or_else(|| {
            backend
                .and_then(|b| b.default_timeout_ms())
                .map(|ms| Timeout { ms, source: TimeoutSource::BackendDefault })
        });
    for d in &mut divergences {
        d.timeout = timeout;
        for side in &mut d.sides {
            for w in &mut side.waits {
                w.near_timeout = near(w.waited_ns, timeout);
            }
        }
    }
    if let Some(first) = divergences.first_mut() {
        first.shifts = shifts(first, &lanes, ctx);
    }
    let at_divergence: BTreeSet<(u32, i64)> = divergences
        .iter()
        .flat_map(|d| d.sides.iter().flat_map(move |s| s.ranks.iter().map(move |&r| (r, d.position))))
        .collect();
    let mut near_timeout = Vec::new();
    for l in &lanes {
        for &(k, i) in &l.recs {
            let r = &l.seq.records[i];
            let w = r.start_ns.zip(r.end_ns).map(|(s, e)| e - s);
            if near(w, timeout) && !at_divergence.contains(&(l.rank, k.0)) && near_timeout.len() < MAX_LISTED
            {
                near_timeout.extend(ctx.record_ref(l, k, i));
            }
        }
    }

    let mut ranks = Vec::new();
    for l in &lanes {
        let last_key = l.last();
        let last_entered = last_key.and_then(|k| ctx.record_ref(l, k, *l.by_key.get(&k)?));
        let (last_completed, completed_basis) = if l.trust_state {
            let c = l
                .recs
                .iter()
                .rev()
                .find(|&&(_, i)| l.seq.records[i].state == State::Completed)
                .and_then(|&(k, i)| ctx.record_ref(l, k, i));
            (c, CompletedBasis::State)
        } else {
            let c = l
                .recs
                .iter()
                .rev()
                .find(|&&(k, i)| {
                    clean.contains(&k)
                        && (keys.range((k.0, k.1 + 1)..).next().is_some()
                            || l.seq.records[i].end_ns.is_some())
                })
                .and_then(|&(k, i)| ctx.record_ref(l, k, i));
            (c, CompletedBasis::Inferred)
        };
        ranks.push(GroupRank {
            rank: l.rank,
            records: l.recs.len() as u32,
            first_position: l.first().map(|k| k.0),
            last_entered,
            last_completed,
            completed_basis,
            p2p_records: l.p2p,
        });
    }
    for &r in &silent {
        ranks.push(GroupRank {
            rank: r,
            records: 0,
            first_position: None,
            last_entered: None,
            last_completed: None,
            completed_basis: CompletedBasis::Inferred,
            p2p_records: 0,
        });
    }
    ranks.sort_by_key(|r| r.rank);
    GroupReport {
        pg: pg.to_string(),
        pg_desc: desc.to_string(),
        members: members.into_iter().collect(),
        aligned_by: if by_seq { Alignment::SeqId } else { Alignment::Ordinal },
        positions: keys.len() as u32,
        ranks,
        divergences,
        diverging_positions: diverging,
        silent,
        no_input: absent,
        timeout,
        near_timeout,
    }
}

fn near(waited_ns: Option<i64>, t: Option<Timeout>) -> bool {
    match (waited_ns, t) {
        (Some(w), Some(t)) => w as f64 >= NEAR_TIMEOUT_SHARE * t.ms as f64 * 1e6,
        _ => false,
    }
}

/// Waits at the first divergence that agree within 5% and exceed 1 s: a timeout ended them.
fn observed_timeout(d: Option<&Divergence>) -> Option<Timeout> {
    let d = d?;
    let mut w: Vec<i64> = d.sides.iter().flat_map(|s| s.waits.iter().filter_map(|w| w.waited_ns)).collect();
    if w.len() < 2 {
        return None;
    }
    w.sort_unstable();
    let (lo, hi) = (w[0], w[w.len() - 1]);
    if lo < 1_000_000_000 || (hi - lo) as f64 > 0.05 * hi as f64 {
        return None;
    }
    // A wait ended by a timeout lasts a little longer than it; timeouts are whole seconds.
    Some(Timeout { ms: lo / 1_000_000_000 * 1000, source: TimeoutSource::Observed })
}

fn divergence_at(pg: &str, desc: &str, key: Key, lanes: &[Lane<'_>], ctx: &Ctx<'_>) -> Option<Divergence> {
    let mut sides: Vec<(Vec<u32>, &Lane<'_>, usize)> = Vec::new(); // (ranks, representative lane, record)
    let mut members_present: Vec<(&Lane<'_>, usize)> = Vec::new();
    let mut missing = Vec::new();
    let mut unknown = Vec::new();
    for l in lanes {
        let (Some(first), Some(last)) = (l.first(), l.last()) else { continue };
        if let Some(&i) = l.by_key.get(&key) {
            members_present.push((l, i));
            continue;
        }
        if key < first {
            unknown.push(l.rank);
            continue;
        }
        let before = l.by_key.range(..key).next_back().and_then(|(&k, &i)| ctx.record_ref(l, k, i));
        if key > last {
            missing.push(Missing { rank: l.rank, reason: MissingReason::Ended, last: before, next: None });
        } else {
            let next = l.by_key.range(key..).next().and_then(|(&k, &i)| ctx.record_ref(l, k, i));
            missing.push(Missing { rank: l.rank, reason: MissingReason::Skipped, last: before, next });
        }
    }
    // Sides: each rank joins the first side whose record it does not differ from.
    let mut fields: BTreeSet<Field> = BTreeSet::new();
    for &(l, i) in &members_present {
        let rec = &l.seq.records[i];
        let mut joined = false;
        for side in sides.iter_mut() {
            let rep = &side.1.seq.records[side.2];
            if differs(rep, rec).is_empty() {
                side.0.push(l.rank);
                joined = true;
                break;
            }
        }
        if !joined {
            if let Some(side) = sides.first() {
                fields.extend(differs(&side.1.seq.records[side.2], rec));
            }
            sides.push((vec![l.rank], l, i));
        }
    }
    if sides.len() <= 1 && missing.is_empty() {
        return None;
    }
    let class = if sides.len() > 1 {
        DivergenceClass::Mismatch
    } else if missing.iter().any(|m| m.reason == MissingReason::Skipped) {
        DivergenceClass::Skipped
    } else {
        DivergenceClass::NotIssued
    };
    // Largest side first, then by lowest rank.
    sides.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.first().cmp(&b.0.first())));
    let sides: Vec<Side> = sides
        .into_iter()
        .filter_map(|(ranks, rep, i)| {
            let record = ctx.record_ref(rep, key, i)?;
            let waits = ranks
                .iter()
                .filter_map(|&r| {
                    let l = lanes.iter().find(|l| l.rank == r)?;
                    let rec = l.rec(*l.by_key.get(&key)?)?;
                    Some(Wait {
                        rank: r,
                        since_ns: rec.start_ns,
                        waited_ns: match (rec.start_ns, rec.end_ns) {
                            (Some(s), Some(e)) => Some(e - s),
                            _ => None,
                        },
                        near_timeout: false,
                    })
                })
                .collect();
            Some(Side { ranks, record, waits })
        })
        .collect();
    let waiting: Vec<u32> = sides.first().map(|s| s.ranks.clone()).unwrap_or_default();
    let mut waited_for: Vec<u32> = missing
        .iter()
        .map(|m| m.rank)
        .chain(sides.iter().skip(1).flat_map(|s| s.ranks.iter().copied()))
        .collect();
    waited_for.sort_unstable();
    Some(Divergence {
        waiting,
        waited_for,
        pg: pg.to_string(),
        pg_desc: desc.to_string(),
        position: key.0,
        class,
        fields: fields.into_iter().collect(),
        sides,
        missing,
        unknown,
        shifts: Vec::new(),
        timeout: None,
    })
}

/// Rule 5: minority ranks whose sequence is shifted against the majority's.
fn shifts(d: &Divergence, lanes: &[Lane<'_>], ctx: &Ctx<'_>) -> Vec<Shift> {
    let mut out = Vec::new();
    if d.class == DivergenceClass::NotIssued {
        return steps_ahead(d, lanes, ctx);
    }
    if d.class != DivergenceClass::Mismatch {
        return out;
    }
    let Some(major) = d.sides.first() else { return out };
    let lane = |r: u32| lanes.iter().find(|l| l.rank == r);
    let Some(m) = major.ranks.first().and_then(|&r| lane(r)) else { return out };
    let from = |l: &Lane<'_>| -> Vec<(Key, usize)> {
        l.recs.iter().copied().filter(|(k, _)| k.0 >= d.position).collect()
    };
    let mrecs = from(m);
    for side in d.sides.iter().skip(1) {
        for &r in &side.ranks {
            let Some(l) = lane(r) else { continue };
            let rrecs = from(l);
            // (compared, differing) over the first SHIFT_WINDOW records of the overlap.
            let compare = |a: &[(Key, usize)], b: &[(Key, usize)]| {
                let n = a.len().min(b.len()).min(SHIFT_WINDOW);
                let bad = a
                    .iter()
                    .zip(b)
                    .take(n)
                    .filter(|(x, y)| !differs(&l.seq.records[x.1], &m.seq.records[y.1]).is_empty())
                    .count();
                (n, bad)
            };
            let agree = |a: &[(Key, usize)], b: &[(Key, usize)]| {
                let (n, bad) = compare(a, b);
                n >= 1 && bad == 0
            };
            // A mismatch the next records do not repeat is local (one odd shape), not a shift:
            // periodic sequences (grad, loss, grad, loss) match themselves shifted by a period.
            let before = out.len();
            if compare(&rrecs, &mrecs).1 >= 2 {
                for by in 1..=4usize {
                    if mrecs.len() > by && agree(&rrecs, &mrecs[by..]) {
                        let records =
                            mrecs[..by].iter().filter_map(|&(k, i)| ctx.record_ref(m, k, i)).collect();
                        out.push(Shift { rank: r, by: by as i64, records, basis: ShiftBasis::Records });
                        break;
                    }
                    if rrecs.len() > by && agree(&rrecs[by..], &mrecs) {
                        let records =
                            rrecs[..by].iter().filter_map(|&(k, i)| ctx.record_ref(l, k, i)).collect();
                        out.push(Shift { rank: r, by: -(by as i64), records, basis: ShiftBasis::Records });
                        break;
                    }
                }
            }
            // No records to compare (the job stopped here): the steps tell. A rank already in a
            // later step skipped what the others still had to issue in theirs.
            let step = |l: &Lane<'_>, v: &[(Key, usize)]| v.first().and_then(|&(_, i)| l.seq.records[i].step);
            if out.len() == before {
                if let (Some(ms), Some(rs)) = (step(m, &mrecs), step(l, &rrecs)) {
                    let (who, recs, sign) = if rs > ms { (m, &mrecs, 1) } else { (l, &rrecs, -1) };
                    let s = rs.min(ms);
                    if rs != ms {
                        let records: Vec<RecordRef> = recs
                            .iter()
                            .take_while(|&&(_, i)| who.seq.records[i].step == Some(s))
                            .filter_map(|&(k, i)| ctx.record_ref(who, k, i))
                            .collect();
                        out.push(Shift {
                            rank: r,
                            by: sign * records.len() as i64,
                            records,
                            basis: ShiftBasis::Step,
                        });
                    }
                }
            }
        }
    }
    out
}

/// A rank that never issued the others' last collective, though it issued as many before it
/// of the same kinds and sizes, may have skipped one long before: its records then run a step
/// ahead of the others' from that position on (steps are the global iteration numbers, the
/// same on every rank). The first position before the divergence where its record is in a
/// later step than the majority's is where it skipped the rest of their step
/// ([`ShiftBasis::Step`]); nothing when the steps agree up to the divergence (a rank that left
/// or stopped there).
fn steps_ahead(d: &Divergence, lanes: &[Lane<'_>], ctx: &Ctx<'_>) -> Vec<Shift> {
    let mut out = Vec::new();
    let lane = |r: u32| lanes.iter().find(|l| l.rank == r);
    let Some(m) = d.sides.first().and_then(|s| s.ranks.first()).and_then(|&r| lane(r)) else {
        return out;
    };
    for miss in &d.missing {
        let Some(l) = lane(miss.rank) else { continue };
        let ahead = m.recs.iter().filter(|(k, _)| k.0 < d.position).find_map(|&(k, i)| {
            let j = *l.by_key.get(&k)?;
            let (ms, rs) = (m.seq.records[i].step?, l.seq.records[j].step?);
            (rs > ms).then_some((k, ms))
        });
        if let Some((k, ms)) = ahead {
            let records: Vec<RecordRef> = m
                .recs
                .iter()
                .filter(|(kk, i)| *kk >= k && m.seq.records[*i].step == Some(ms))
                .filter_map(|&(kk, i)| ctx.record_ref(m, kk, i))
                .collect();
            out.push(Shift { rank: miss.rank, by: records.len() as i64, records, basis: ShiftBasis::Step });
        }
    }
    out
}

/// Rule 9.
fn diagnose(rep: &SequenceReport) -> Vec<Diagnosis> {
    let mut out = Vec::new();
    let mut firsts: Vec<&Divergence> = rep.groups.iter().filter_map(|g| g.divergences.first()).collect();
    // Ranks whose windows merely end at different collectives, each of which completed quickly
    // (a profiler stopped at different times), are not a hang.
    firsts.retain(|d| {
        let waits: Vec<Option<i64>> =
            d.sides.iter().flat_map(|s| s.waits.iter().map(|w| w.waited_ns)).collect();
        let quick = !waits.is_empty() && waits.iter().all(|w| w.is_some_and(|w| w < 1_000_000_000));
        // Calls told apart only by where they were issued (no sizes) that all completed quickly
        // are the same call under annotations that differ between ranks, not a mismatch.
        let by_origin_only = d.fields.iter().all(|f| *f == Field::Origin);
        !quick || (d.class == DivergenceClass::Mismatch && !by_origin_only)
    });
    let start = |d: &Divergence| d.sides.iter().flat_map(|s| s.waits.iter().filter_map(|w| w.since_ns)).min();
    firsts.sort_by(|a, b| {
        start(a).unwrap_or(i64::MAX).cmp(&start(b).unwrap_or(i64::MAX)).then(a.pg.cmp(&b.pg))
    });
    let mut explained: BTreeSet<u32> = BTreeSet::new();
    for d in firsts {
        let (kind, ranks) = if d.class == DivergenceClass::Mismatch {
            let minority: Vec<u32> = d.sides.iter().skip(1).flat_map(|s| s.ranks.iter().copied()).collect();
            (DiagnosisKind::Mismatch, minority)
        } else {
            (DiagnosisKind::Hang, d.missing.iter().map(|m| m.rank).collect())
        };
        explained.extend(d.missing.iter().map(|m| m.rank));
        explained.extend(ranks.iter().copied());
        out.push(Diagnosis {
            kind,
            pg: Some(d.pg.clone()),
            position: Some(d.position),
            ranks,
            sentence: text::divergence(d, rep),
            steps: Vec::new(),
            waited_ns: None,
        });
    }
    let missing: Vec<u32> = rep.ranks.iter().filter(|r| r.no_input).map(|r| r.rank).collect();
    if missing.len() > text::MANY_MISSING {
        // One diagnosis for many: a world claimed by a `pg_config` of a million ranks is not a
        // million sentences.
        out.push(Diagnosis {
            kind: DiagnosisKind::NoInput,
            pg: None,
            position: None,
            sentence: text::no_input_many(&missing, &rep.sources),
            ranks: missing,
            steps: Vec::new(),
            waited_ns: None,
        });
    } else {
        for r in missing {
            out.push(Diagnosis {
                kind: DiagnosisKind::NoInput,
                pg: None,
                position: None,
                ranks: vec![r],
                sentence: text::no_input(r, &rep.sources),
                steps: Vec::new(),
                waited_ns: None,
            });
        }
    }
    for r in rep.ranks.iter().filter(|r| r.ends_early && !explained.contains(&r.rank)) {
        out.push(Diagnosis {
            kind: DiagnosisKind::EndsEarly,
            pg: None,
            position: None,
            ranks: vec![r.rank],
            sentence: text::ends_early(r, rep),
            steps: Vec::new(),
            waited_ns: None,
        });
    }
    for g in &rep.groups {
        if g.divergences.is_empty() && !g.silent.is_empty() {
            out.push(Diagnosis {
                kind: DiagnosisKind::Hang,
                pg: Some(g.pg.clone()),
                position: None,
                ranks: g.silent.clone(),
                sentence: text::silent(g),
                steps: Vec::new(),
                waited_ns: None,
            });
        }
        let Some(t) = g.timeout else { continue };
        // One per rank: the first such record.
        let mut seen = BTreeSet::new();
        for rec in &g.near_timeout {
            if seen.insert(rec.rank) {
                let w = rec.start_ns.zip(rec.end_ns).map_or(0, |(s, e)| e - s);
                out.push(Diagnosis {
                    kind: DiagnosisKind::NearTimeout,
                    pg: Some(g.pg.clone()),
                    position: Some(rec.position),
                    ranks: vec![rec.rank],
                    sentence: text::near_timeout(rec, w, t),
                    steps: Vec::new(),
                    waited_ns: None,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
