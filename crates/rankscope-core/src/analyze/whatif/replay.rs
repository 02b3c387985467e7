//! The replay: every rank's program run again, its collectives synchronizing the members.
//!
//! Per rank, time advances through its program: own time passes; an issue makes the collective
//! ready on this rank; a wait holds the rank until the collective completes. A collective
//! starts on a rank when it is ready there and its lane (the thread or stream it ran on) is
//! free: the previous collective on that lane, in the recorded order, has completed. It
//! completes when its last member has started, plus its transfer. Steps chain: a rank's next
//! step starts when its step ends, plus the recorded gap between them.
//!
//! A wait that can never end in the replay (a member that did not issue the collective within
//! the step, a collective matched across steps) takes its recorded time: said in
//! [`Replayed::unresolved`].

use std::collections::BTreeMap;

use super::program::Item;
use super::timeline::{Span, SpanKind};
use super::Model;
use crate::model::FxHashMap;

/// What a replay changes: a rank's own time by (rank, step, slot), a collective's transfer by
/// its index.
pub trait Change {
    fn own(&self, _rank: u32, _step: u32, _slot: Slot, recorded_ns: i64) -> i64 {
        recorded_ns
    }
    fn transfer(&self, _op: usize, recorded_ns: i64) -> i64 {
        recorded_ns
    }
}

/// The recorded job.
#[derive(Debug)]
pub struct AsRecorded;
impl Change for AsRecorded {}

/// Where an own time sits in a rank's step: before it issues a collective, before it waits for
/// one (the collective's index in the job's), before it issues or waits for its `nth` exchange
/// of the step (point-to-point, in the order it issued them) on its [`Line`], or the step's
/// tail. Ranks of one job
/// line up by it: the members of a collective, the replicas of a pipeline stage, the members
/// of a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    BeforeIssue(usize),
    BeforeWait(usize),
    BeforeExchange { line: Line, nth: u32, wait: bool },
    Tail,
}

/// Who a rank's point-to-point exchanges line up with: a pipeline stage's replicas (the other
/// data-parallel copies of the stage do the same exchanges in the same order), every member of a
/// ring (context parallelism, expert dispatch: each does what the others do), or nobody (a
/// pipeline rank whose stage is not known: a stage is no peer of another).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Line {
    Stage(u32),
    Ring,
    Alone(u32),
}

/// A replay's result: per step, the step time, in step order: from the end of the previous step
/// (its last rank's; for the first, from the first rank's start) to the end of this one's last
/// rank, so that the steps add up to the job's time.
#[derive(Debug, Clone, Default)]
pub struct Replayed {
    pub steps: Vec<(u32, i64)>,
    /// Waits the replay could not resolve (they kept their recorded time).
    pub unresolved: u32,
}

impl Replayed {
    /// The mean step time over the steps.
    pub fn mean_ns(&self) -> f64 {
        if self.steps.is_empty() {
            0.0
        } else {
            self.steps.iter().map(|s| s.1 as f64).sum::<f64>() / self.steps.len() as f64
        }
    }
}

/// The recorded job's step times by the same measure as [`Replayed::steps`].
pub fn recorded(m: &Model) -> Vec<(u32, i64)> {
    let mut out = Vec::new();
    let mut prev: Option<i64> = None;
    for (&step, ranks) in &m.steps {
        let end = ranks.values().map(|p| p.end_ns).max().unwrap_or(0);
        let from = prev.unwrap_or_else(|| ranks.values().map(|p| p.start_ns).min().unwrap_or(end));
        out.push((step, end - from));
        prev = Some(end);
    }
    out
}

/// Per rank: where it is in its program.
struct Cursor<'m> {
    rank: u32,
    prog: &'m super::Prog,
    t: i64,
    pc: usize,
    step_start: i64,
}

/// One step's replay state: event-driven, each item, issue and completion handled once (the
/// work is linear in the model's size, whatever the number of ranks).
struct StepRun<'m, 'c> {
    m: &'m Model,
    change: &'c dyn Change,
    step: u32,
    cursors: Vec<Cursor<'m>>,
    /// (collective, rank) → when the rank issued it.
    ready: FxHashMap<(usize, u32), i64>,
    /// Collective → members started and the latest start.
    started: FxHashMap<usize, (usize, i64)>,
    done: FxHashMap<usize, i64>,
    /// Eager exchange → when its sender was done ([`super::ModelOp::eager_ns`]).
    sent: FxHashMap<usize, i64>,
    /// Collective → the cursors waiting for it.
    waiting: FxHashMap<usize, Vec<usize>>,
    /// Collective → the (collective, rank) starts waiting for its lane to be free of it.
    lane_waiting: FxHashMap<usize, Vec<(usize, u32)>>,
    work: Vec<usize>,
    to_start: Vec<(usize, u32)>,
    /// Per cursor, the spans it went through, when this step is the one traced
    /// ([`replay_traced`]).
    trace: Option<Vec<Vec<Span>>>,
}

impl StepRun<'_, '_> {
    /// Runs cursor `ci` as far as its program goes without a collective it has to wait for.
    fn advance(&mut self, ci: usize) {
        let Some(c) = self.cursors.get_mut(ci) else { return };
        while let Some(item) = c.prog.items.get(c.pc) {
            match *item {
                Item::Own(d) => {
                    let slot = c.prog.slots.get(c.pc).copied().unwrap_or(Slot::Tail);
                    let from = c.t;
                    c.t += self.change.own(c.rank, self.step, slot, d).max(0);
                    push_span(&mut self.trace, ci, SpanKind::Own, from, c.t);
                }
                Item::Issue(inst) => {
                    if let Some(&op) = self.m.op_of.get(&(c.rank, inst)) {
                        self.ready.insert((op, c.rank), c.t);
                        self.to_start.push((op, c.rank));
                    }
                }
                Item::Wait { inst, recorded_ns, wake_ns } => match self.m.op_of.get(&(c.rank, inst)) {
                    Some(&op) => {
                        // The exchange and those its host waited for with it ([`Model::burst`]).
                        let burst = self.m.burst.get(&(c.rank, inst)).map_or(&[][..], |v| v.as_slice());
                        let mut end = i64::MIN;
                        for &o in std::iter::once(&op).chain(burst) {
                            match end_on(&self.done, &self.sent, self.m, o, c.rank) {
                                Some(e) => end = end.max(e),
                                None => {
                                    self.waiting.entry(o).or_default().push(ci);
                                    return;
                                }
                            }
                        }
                        let from = c.t;
                        c.t = c.t.max(end + wake_ns);
                        push_span(&mut self.trace, ci, SpanKind::Wait, from, c.t);
                    }
                    // Not a matched collective: its wait is the rank's own.
                    None => {
                        let from = c.t;
                        c.t += recorded_ns;
                        push_span(&mut self.trace, ci, SpanKind::Wait, from, c.t);
                    }
                },
            }
            c.pc += 1;
        }
    }

    /// Starts `op` on `rank` once its lane is free; completes it once every member started.
    fn start(&mut self, op: usize, rank: u32) {
        let Some(&ready) = self.ready.get(&(op, rank)) else { return };
        let free = match self.m.lane_prev.get(&(op, rank)) {
            Some(&prev) => match end_on(&self.done, &self.sent, self.m, prev, rank) {
                Some(e) => e,
                // The lane's previous collective was issued in this step and is not done.
                None if self.ready.contains_key(&(prev, rank)) => {
                    self.lane_waiting.entry(prev).or_default().push((op, rank));
                    return;
                }
                // Not this step's, or not issued yet: the lane is free.
                None => i64::MIN,
            },
            None => i64::MIN,
        };
        let Some(o) = self.m.ops.get(op) else { return };
        if let Some(d) = o.eager_ns.filter(|_| o.ranks.first() == Some(&rank)) {
            // Sent eagerly: the sender goes on; whoever waited for it looks again.
            self.sent.insert(op, ready.max(free) + d);
            self.work.extend(self.waiting.remove(&op).unwrap_or_default());
            self.to_start.extend(self.lane_waiting.remove(&op).unwrap_or_default());
        }
        let dispatch = self.m.dispatch.get(&(op, rank)).copied().unwrap_or(0);
        let e = self.started.entry(op).or_insert((0, i64::MIN));
        e.0 += 1;
        e.1 = e.1.max(ready.max(free) + dispatch);
        if e.0 == o.ranks.len() {
            let end = e.1 + self.change.transfer(op, o.transfer_ns).max(0);
            self.done.insert(op, end);
            self.work.extend(self.waiting.remove(&op).unwrap_or_default());
            self.to_start.extend(self.lane_waiting.remove(&op).unwrap_or_default());
        }
    }

    /// Runs the step to its end; the waits it cannot resolve take their recorded time.
    fn run(&mut self) -> u32 {
        let mut unresolved = 0;
        self.work = (0..self.cursors.len()).collect();
        loop {
            while !self.work.is_empty() || !self.to_start.is_empty() {
                while let Some(ci) = self.work.pop() {
                    self.advance(ci);
                }
                while let Some((op, rank)) = self.to_start.pop() {
                    self.start(op, rank);
                }
            }
            // Stuck: the rank blocked earliest takes its wait as recorded.
            let blocked = self
                .cursors
                .iter()
                .enumerate()
                .filter(|(_, c)| c.pc < c.prog.items.len())
                .min_by_key(|(_, c)| c.t)
                .map(|(k, _)| k);
            let Some(ci) = blocked else { return unresolved };
            if let Some(c) = self.cursors.get_mut(ci) {
                if let Some(Item::Wait { recorded_ns, .. }) = c.prog.items.get(c.pc) {
                    let from = c.t;
                    c.t += recorded_ns;
                    push_span(&mut self.trace, ci, SpanKind::Wait, from, c.t);
                }
                c.pc += 1;
            }
            unresolved += 1;
            self.work.push(ci);
        }
    }
}

/// When `op` is done for `rank`: an eager exchange's sender when it sent, everyone else when
/// the op completed.
fn end_on(
    done: &FxHashMap<usize, i64>,
    sent: &FxHashMap<usize, i64>,
    m: &Model,
    op: usize,
    rank: u32,
) -> Option<i64> {
    let sender = m.ops.get(op).is_some_and(|o| o.eager_ns.is_some() && o.ranks.first() == Some(&rank));
    if sender {
        sent.get(&op).copied()
    } else {
        done.get(&op).map(|d| d + m.lag.get(&(op, rank)).copied().unwrap_or(0))
    }
}

/// Appends a span to cursor `ci`'s trace (when tracing), joined to the last one of its kind.
fn push_span(trace: &mut Option<Vec<Vec<Span>>>, ci: usize, kind: SpanKind, start_ns: i64, end_ns: i64) {
    let Some(v) = trace.as_mut().and_then(|t| t.get_mut(ci)) else { return };
    if end_ns <= start_ns {
        return;
    }
    match v.last_mut() {
        Some(last) if last.kind == kind && last.end_ns == start_ns => last.end_ns = end_ns,
        _ => v.push(Span { kind, start_ns, end_ns }),
    }
}

pub fn replay(m: &Model, change: &dyn Change) -> Replayed {
    replay_traced(m, change, None).0
}

/// [`replay`], and for the step `traced` every rank's spans of own time and of waiting, on
/// the replay's clock (the job's aligned clock where it starts).
pub fn replay_traced(
    m: &Model,
    change: &dyn Change,
    traced: Option<u32>,
) -> (Replayed, BTreeMap<u32, Vec<Span>>) {
    let mut spans = BTreeMap::new();
    let mut out = Replayed::default();
    // Per rank: the end of its previous step (replayed) and of the recorded one.
    let mut prev_end: BTreeMap<u32, (i64, i64)> = BTreeMap::new();
    let mut prev_step_end: Option<i64> = None;
    for (&step, ranks) in &m.steps {
        let cursors = ranks
            .iter()
            .map(|(&rank, prog)| {
                let start = match prev_end.get(&rank) {
                    Some(&(replayed, recorded)) => replayed + (prog.start_ns - recorded).max(0),
                    None => prog.start_ns,
                };
                Cursor { rank, prog, t: start, pc: 0, step_start: start }
            })
            .collect();
        let mut run = StepRun {
            m,
            change,
            step,
            cursors,
            ready: FxHashMap::default(),
            started: FxHashMap::default(),
            done: FxHashMap::default(),
            sent: FxHashMap::default(),
            waiting: FxHashMap::default(),
            lane_waiting: FxHashMap::default(),
            work: Vec::new(),
            to_start: Vec::new(),
            trace: (traced == Some(step)).then(|| vec![Vec::new(); ranks.len()]),
        };
        out.unresolved += run.run();
        if let Some(t) = run.trace.take() {
            spans = run.cursors.iter().map(|c| c.rank).zip(t).collect();
        }
        let end = run.cursors.iter().map(|c| c.t).max().unwrap_or(0);
        let from =
            prev_step_end.unwrap_or_else(|| run.cursors.iter().map(|c| c.step_start).min().unwrap_or(end));
        for c in &run.cursors {
            prev_end.insert(c.rank, (c.t, c.prog.end_ns));
        }
        out.steps.push((step, end - from));
        prev_step_end = Some(end);
    }
    (out, spans)
}

/// The step `step` as recorded, in the same spans: each rank's items laid one after the other
/// from its recorded start, each own time and each wait as long as it was.
pub fn recorded_spans(m: &Model, step: u32) -> BTreeMap<u32, Vec<Span>> {
    let Some(ranks) = m.steps.get(&step) else { return BTreeMap::new() };
    let mut out = BTreeMap::new();
    for (&rank, prog) in ranks {
        let mut trace = Some(vec![Vec::new()]);
        let mut t = prog.start_ns;
        for item in &prog.items {
            let (kind, d) = match *item {
                Item::Own(d) => (SpanKind::Own, d),
                Item::Wait { recorded_ns, .. } => (SpanKind::Wait, recorded_ns),
                Item::Issue(_) => continue,
            };
            push_span(&mut trace, 0, kind, t, t + d.max(0));
            t += d.max(0);
        }
        out.insert(rank, trace.and_then(|mut v| v.pop()).unwrap_or_default());
    }
    out
}
