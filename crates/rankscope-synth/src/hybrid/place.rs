//! Placing the GPU work of every rank together, and the rendezvous of collectives and
//! point-to-point transfers.
//!
//! Each stream runs its items in issue order. A kernel starts at `max(launch + latency, stream
//! free)`; a `cudaStreamWaitEvent` holds its stream until the awaited kernel ended; an NCCL
//! kernel's rank *arrives* at `max(launch + latency, stream free, end of the compute work issued
//! before it)` (ProcessGroupNCCL makes the NCCL stream wait for the current stream). An instance
//! (a collective of one group, matched by the group's `Seq`; a send and its receive, matched by
//! their order between the two ranks in that group) completes when all its members arrived: every
//! member's kernel ends at `max(last arrival + transfer, own arrival + 1 µs) + skew` (skew 0–3 µs,
//! drawn by the member), so the members that arrived early wait inside their kernels.
//!
//! Placement is event-driven: a rank's streams advance as far as they can; an instance that
//! completes wakes its members. Work that can never run (a schedule that deadlocks) is an error.

use std::collections::BTreeMap;

use super::rank::{ItemKind, RankRun, State, NONE};

/// Which instance an op is a member of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum InstKey {
    Coll {
        group: usize,
        seq: u64,
    },
    /// The `n`-th message from `src` to `dst` in `group` this step.
    P2p {
        group: usize,
        src: u32,
        dst: u32,
        n: u32,
    },
}

/// How long an instance takes once every member arrived.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Transfer {
    Fixed(i64),
    /// An all_to_all with uneven splits: `alpha` plus the largest of the members' bytes to
    /// and from others over `gbps` (each member gives its own `bytes`).
    PerMember {
        bytes: u64,
        alpha: i64,
        gbps: f64,
    },
}

/// One collective or point-to-point transfer across its members.
#[derive(Debug, Clone)]
pub(crate) struct Inst {
    pub key: InstKey,
    /// `Collective name` of its ops (`send` for a send/receive pair).
    pub coll: &'static str,
    pub expected: usize,
    /// (rank, item) of each member, in the order they issued it.
    pub members: Vec<(u32, u32)>,
    pub arrivals: Vec<i64>,
    pub arrived: usize,
    pub transfer: Transfer,
    /// Bytes of each member (all_to_allv).
    pub bytes: Vec<u64>,
    pub done: bool,
}

/// What a completed instance says, for the truth.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub key: InstKey,
    pub coll: &'static str,
    /// (rank, arrival, end), by rank.
    pub members: Vec<(u32, i64, i64)>,
    pub latest: i64,
    /// The member that arrived last (the lowest rank on ties).
    pub last: u32,
    pub transfer: i64,
}

/// The instances of the current step.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    pub insts: Vec<Inst>,
    index: BTreeMap<InstKey, u32>,
    /// Completed instances, when the truth is collected.
    pub resolved: Option<Vec<Resolved>>,
}

impl Registry {
    pub fn new(collect: bool) -> Registry {
        Registry { insts: Vec::new(), index: BTreeMap::new(), resolved: collect.then(Vec::new) }
    }

    /// Adds `rank`'s item to instance `key` (created by its first member); returns the instance
    /// and the member's slot.
    pub fn join(
        &mut self,
        key: InstKey,
        coll: &'static str,
        expected: usize,
        transfer: Transfer,
        rank: u32,
        item: u32,
    ) -> (u32, u32) {
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                let i = u32::try_from(self.insts.len()).unwrap_or(NONE);
                self.insts.push(Inst {
                    key,
                    coll,
                    expected,
                    members: Vec::with_capacity(expected),
                    arrivals: Vec::with_capacity(expected),
                    arrived: 0,
                    transfer,
                    bytes: Vec::new(),
                    done: false,
                });
                self.index.insert(key, i);
                i
            }
        };
        let Some(inst) = self.insts.get_mut(i as usize) else { return (NONE, 0) };
        let slot = u32::try_from(inst.members.len()).unwrap_or(0);
        inst.members.push((rank, item));
        inst.arrivals.push(i64::MIN);
        if let Transfer::PerMember { bytes, .. } = transfer {
            inst.bytes.push(bytes);
        }
        (i, slot)
    }

    /// The step is over: every instance completed.
    pub fn clear(&mut self) {
        self.insts.clear();
        self.index.clear();
    }

    /// Instances some member never issued (a schedule that cannot complete).
    pub fn incomplete(&self) -> usize {
        self.insts.iter().filter(|x| !x.done).count()
    }
}

/// Advances rank `r`'s streams as far as they go; returns the instances that completed.
fn advance(rank: &mut RankRun, reg: &mut Registry) -> Vec<u32> {
    let mut complete = Vec::new();
    loop {
        let mut progress = false;
        for s in 0..rank.streams.len() {
            while let Some((it, free)) =
                rank.streams.get(s).and_then(|st| Some((*st.queue.get(st.head)?, st.free)))
            {
                let Some(item) = rank.items.get(it as usize).copied() else { break };
                let placed = match (item.state, item.kind) {
                    (State::Done, _) => Some(item.end),
                    (State::Arrived, _) => None,
                    (State::Pending, ItemKind::Work(dur)) => {
                        let start = item.ready.max(free);
                        set(rank, it, start, start + dur, State::Done);
                        Some(start + dur)
                    }
                    (State::Pending, ItemKind::WaitOn(on)) => match rank.items.get(on as usize) {
                        Some(x) if x.state == State::Done => {
                            let t = free.max(x.end);
                            set(rank, it, t, t, State::Done);
                            Some(t)
                        }
                        _ => None,
                    },
                    (State::Pending, ItemKind::Comm { inst, slot, after, .. }) => {
                        let dep = if after == NONE {
                            Some(i64::MIN)
                        } else {
                            rank.items.get(after as usize).filter(|x| x.state == State::Done).map(|x| x.end)
                        };
                        if let Some(dep) = dep {
                            let arrival = item.ready.max(free).max(dep);
                            set(rank, it, arrival, arrival, State::Arrived);
                            if let Some(x) = reg.insts.get_mut(inst as usize) {
                                if let Some(a) = x.arrivals.get_mut(slot as usize) {
                                    *a = arrival;
                                }
                                x.arrived += 1;
                                if x.arrived == x.expected {
                                    complete.push(inst);
                                }
                            }
                            progress = true;
                        }
                        None
                    }
                };
                let Some(end) = placed else { break };
                if let Some(stream) = rank.streams.get_mut(s) {
                    stream.head += 1;
                    stream.free = end;
                }
                progress = true;
            }
        }
        if !progress || !complete.is_empty() {
            return complete;
        }
    }
}

fn set(rank: &mut RankRun, it: u32, start: i64, end: i64, state: State) {
    if let Some(x) = rank.items.get_mut(it as usize) {
        x.start = start;
        x.end = end;
        x.state = state;
    }
}

/// Places every rank's pending GPU work. Errors when some work can never run.
pub(crate) fn place(ranks: &mut [RankRun], reg: &mut Registry) -> Result<(), String> {
    let n = ranks.len();
    let mut queued = vec![true; n];
    let mut work: Vec<usize> = (0..n).rev().collect();
    while let Some(r) = work.pop() {
        if let Some(q) = queued.get_mut(r) {
            *q = false;
        }
        let Some(rank) = ranks.get_mut(r) else { continue };
        let done = advance(rank, reg);
        let again = !done.is_empty();
        for inst in done {
            for m in resolve(ranks, reg, inst) {
                if let Some(q) = queued.get_mut(m as usize).filter(|q| !**q) {
                    *q = true;
                    work.push(m as usize);
                }
            }
        }
        if again {
            if let Some(q) = queued.get_mut(r).filter(|q| !**q) {
                *q = true;
                work.push(r);
            }
        }
    }
    for rank in ranks.iter() {
        if let Some(s) = rank.streams.iter().find(|s| s.head < s.queue.len()) {
            return Err(format!(
                "rank {}: GPU work on stream {} can never run ({} items left; a schedule that deadlocks)",
                rank.rank,
                s.cupti,
                s.queue.len() - s.head
            ));
        }
    }
    Ok(())
}

/// Completes instance `i`: every member's kernel ends at the rendezvous. Returns the members.
fn resolve(ranks: &mut [RankRun], reg: &mut Registry, i: u32) -> Vec<u32> {
    let Some(inst) = reg.insts.get_mut(i as usize) else { return Vec::new() };
    inst.done = true;
    let transfer = match inst.transfer {
        Transfer::Fixed(t) => t,
        Transfer::PerMember { alpha, gbps, .. } => {
            let most = inst.bytes.iter().copied().max().unwrap_or(0);
            alpha + (most as f64 / gbps).round() as i64
        }
    };
    let latest = inst.arrivals.iter().copied().max().unwrap_or(0);
    let mut out = Vec::with_capacity(inst.members.len());
    let mut truth = Vec::with_capacity(inst.members.len());
    for (&(r, it), &a) in inst.members.iter().zip(&inst.arrivals) {
        out.push(r);
        let Some(rank) = ranks.get_mut(r as usize) else { continue };
        let skew = match rank.items.get(it as usize).map(|x| x.kind) {
            Some(ItemKind::Comm { skew, .. }) => skew,
            _ => 0,
        };
        let end = (latest + transfer).max(a + 1_000) + skew;
        set(rank, it, a, end, State::Done);
        if let Some(x) = rank.items.get_mut(it as usize) {
            x.latest = latest;
        }
        truth.push((r, a, end));
    }
    if let Some(res) = reg.resolved.as_mut() {
        truth.sort_unstable();
        let last = truth.iter().filter(|x| x.1 == latest).map(|x| x.0).min().unwrap_or(0);
        res.push(Resolved { key: inst.key, coll: inst.coll, members: truth, latest, last, transfer });
    }
    out
}
