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
use super::Model;

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
/// one (the collective's index in the job's), or the step's tail. Ranks of one job line up by
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    BeforeIssue(usize),
    BeforeWait(usize),
    Tail,
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
struct Cursor {
    t: i64,
    pc: usize,
    step_start: i64,
}

pub fn replay(m: &Model, change: &dyn Change) -> Replayed {
    let mut out = Replayed::default();
    let mut prev_step_end: Option<i64> = None;
    // Per rank: the end of its previous step (replayed) and of the recorded one.
    let mut prev_end: BTreeMap<u32, (i64, i64)> = BTreeMap::new();
    for (&step, ranks) in &m.steps {
        let n_ops = m.ops.len();
        let mut ready: BTreeMap<(usize, u32), i64> = BTreeMap::new();
        let mut started: BTreeMap<(usize, u32), i64> = BTreeMap::new();
        let mut done: Vec<Option<i64>> = vec![None; n_ops];
        let mut open: std::collections::BTreeSet<usize> = std::collections::BTreeSet::new();
        let mut cursors: BTreeMap<u32, Cursor> = BTreeMap::new();
        for (&rank, p) in ranks {
            let start = match prev_end.get(&rank) {
                Some(&(replayed, recorded)) => replayed + (p.start_ns - recorded).max(0),
                None => p.start_ns,
            };
            cursors.insert(rank, Cursor { t: start, pc: 0, step_start: start });
        }
        // The ops of this step's programs, for the starts to resolve.
        let mut pending: Vec<(usize, u32)> = Vec::new();
        loop {
            let mut progress = false;
            for (&rank, p) in ranks {
                let Some(c) = cursors.get_mut(&rank) else { continue };
                while let Some(item) = p.items.get(c.pc) {
                    match *item {
                        Item::Own(d) => {
                            c.t += change.own(rank, step, p.slots[c.pc], d).max(0);
                        }
                        Item::Issue(inst) => {
                            if let Some(&op) = m.op_of.get(&(rank, inst)) {
                                ready.insert((op, rank), c.t);
                                pending.push((op, rank));
                                open.insert(op);
                            }
                        }
                        Item::Wait { inst, .. } => match m.op_of.get(&(rank, inst)).map(|&op| done[op]) {
                            Some(Some(end)) => c.t = c.t.max(end),
                            Some(None) => break,
                            // Not a matched collective: its wait is the rank's own.
                            None => {
                                if let Item::Wait { recorded_ns, .. } = *item {
                                    c.t += recorded_ns;
                                }
                            }
                        },
                    }
                    c.pc += 1;
                    progress = true;
                }
            }
            // Starts: ready, and the lane's previous collective completed.
            let mut still = Vec::new();
            for (op, rank) in pending.drain(..) {
                let lane_free = match m.lane_prev.get(&(op, rank)) {
                    Some(&prev) => match done[prev] {
                        Some(e) => Some(e),
                        None if started.contains_key(&(prev, rank)) || ready.contains_key(&(prev, rank)) => {
                            None
                        }
                        // The previous collective on the lane is not this step's: free.
                        None => Some(i64::MIN),
                    },
                    None => Some(i64::MIN),
                };
                match (lane_free, ready.get(&(op, rank))) {
                    (Some(free), Some(&r)) => {
                        started.insert((op, rank), r.max(free));
                        progress = true;
                    }
                    _ => still.push((op, rank)),
                }
            }
            pending = still;
            // Completions: every member started (only the collectives issued and not done).
            let mut closed = Vec::new();
            for &op in &open {
                let Some(o) = m.ops.get(op) else { continue };
                let starts: Option<Vec<i64>> =
                    o.ranks.iter().map(|r| started.get(&(op, *r)).copied()).collect();
                if let Some(s) = starts.filter(|s| !s.is_empty()) {
                    let last = s.iter().copied().max().unwrap_or(0);
                    done[op] = Some(last + change.transfer(op, o.transfer_ns).max(0));
                    closed.push(op);
                    progress = true;
                }
            }
            for op in closed {
                open.remove(&op);
            }
            if progress {
                continue;
            }
            // Stuck: the rank blocked longest ago takes its wait as recorded.
            let blocked = cursors
                .iter()
                .filter(|(r, c)| ranks.get(r).is_some_and(|p| c.pc < p.items.len()))
                .min_by_key(|(_, c)| c.t)
                .map(|(&r, _)| r);
            let Some(r) = blocked else { break };
            let (Some(c), Some(p)) = (cursors.get_mut(&r), ranks.get(&r)) else { break };
            if let Some(Item::Wait { recorded_ns, .. }) = p.items.get(c.pc) {
                c.t += recorded_ns;
            }
            c.pc += 1;
            out.unresolved += 1;
        }
        let end = cursors.values().map(|c| c.t).max().unwrap_or(0);
        let from =
            prev_step_end.unwrap_or_else(|| cursors.values().map(|c| c.step_start).min().unwrap_or(end));
        for (&rank, c) in &cursors {
            if let Some(p) = ranks.get(&rank) {
                prev_end.insert(rank, (c.t, p.end_ns));
            }
        }
        out.steps.push((step, end - from));
        prev_step_end = Some(end);
    }
    out
}
