//! Where a delay starts and the way it travels: who waited for whom, through which group.
//!
//! **Edges.** In every matched collective, each member that arrived before the last waited for
//! the last arriver, from its own entry to the last entry (aligned clocks); in every point-to-point exchange the side that posted first waited for the
//! other (a receive for its send, and on gloo a send for its receive), for as long as it posted
//! earlier. Each edge carries the group it went through and that group's role.
//!
//! **Origins.** Per step, the late group of [`super::attribution::step_waits`] (the ranks that
//! waited least: nobody made them wait) is where the delay starts. The **chain** is every edge
//! reachable from an origin by following who waited for whom forward: a rank made to wait
//! passes the delay on to the ranks that then wait for it (rank 3's stall makes its tensor
//! partner 2 wait in the tensor all_reduce, and 2's data-parallel peer 0 then waits for 2).
//! A rank on the chain that is not an origin only inherited its lateness: it is never the
//! cause. Edges are averaged over every profiled step (a step without the edge counts 0);
//! edges below [`MIN_EDGE_SHARE`] of the step (and [`super::WAIT_NOISE_NS`]) are noise.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::attribution::StepWaits;
use super::collectives::{Offsets, Op};
use super::instances::Instance;
use super::layout::{Layout, Role};
use crate::model::CollKind;

/// An edge whose mean wait per step is below this share of the step is not reported.
pub const MIN_EDGE_SHARE: f64 = 0.01;

/// One edge of the chain: `to` waited for `from` in `group`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ChainEdge {
    pub from: u32,
    pub to: u32,
    pub group: String,
    pub role: Role,
    /// Mean over every step of the wait `to` spent on `from` there.
    pub wait_ns: i64,
    /// Steps in which the edge was on the chain.
    pub steps: u32,
}

/// The job's chain of waits.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct WaitChain {
    /// Ranks where the delay starts (late in at least half of the steps the job waited in).
    pub origins: Vec<u32>,
    /// Ranks that waited only because an origin was late, through the chain.
    pub inherited: Vec<u32>,
    /// The edges reachable from the origins, the longest waits first.
    pub edges: Vec<ChainEdge>,
}

/// (waited for, waiter, group).
type EdgeKey = (u32, u32, String);

/// Per step, every edge and its wait.
type StepEdges = BTreeMap<u32, BTreeMap<EdgeKey, i64>>;

/// A member waited for the last arriver from its own entry to the last entry (within its own
/// time in the collective): entries, not durations, say who waited (an all_to_all's members
/// move different amounts, so their durations differ by more than the wait).
fn collective_edges(ops: &[Op], out: &mut StepEdges) {
    for o in ops.iter().filter(|o| !o.partial && o.ranks.len() >= 2) {
        let last = o.last_arriver;
        let last_entry = o.start_ns.iter().copied().max().unwrap_or(0);
        for (k, &r) in o.ranks.iter().enumerate() {
            let (start, dur) =
                (o.start_ns.get(k).copied().unwrap_or(0), o.dur_ns.get(k).copied().unwrap_or(0));
            let w = (last_entry - start).clamp(0, dur.max(0));
            if r != last && w > 0 {
                *out.entry(o.step).or_default().entry((last, r, o.pg.clone())).or_default() += w;
            }
        }
    }
}

/// Point-to-point: a send and the peer's receive of the same group, paired in order per
/// (group, sender, receiver); the one that posted first waited for the other.
fn p2p_edges(insts: &[(u32, Vec<Instance>)], offsets: &Offsets, out: &mut StepEdges) {
    let mut sends: BTreeMap<(String, u32, u32), Vec<&Instance>> = BTreeMap::new();
    let mut recvs: BTreeMap<(String, u32, u32), Vec<&Instance>> = BTreeMap::new();
    for (r, v) in insts {
        let r = *r;
        for x in v.iter().filter(|x| x.p2p && !x.peer_in_group) {
            let Some(peer) = x.peer else { continue };
            match x.kind {
                CollKind::Send => sends.entry((x.pg.clone(), r, peer)).or_default().push(x),
                CollKind::Recv => recvs.entry((x.pg.clone(), peer, r)).or_default().push(x),
                _ => {}
            }
        }
    }
    // Per (step, waiter): the intervals it waited, each on the peer that ended it.
    type Waited = Vec<(i64, i64, u32, String)>;
    let mut waited: BTreeMap<(u32, u32), Waited> = BTreeMap::new();
    for (key, s) in &mut sends {
        let Some(rv) = recvs.get_mut(key) else { continue };
        s.sort_by_key(|x| (x.issued_ns, x.start_ns));
        rv.sort_by_key(|x| (x.issued_ns, x.start_ns));
        let (pg, src, dst) = key;
        for (a, b) in s.iter().zip(rv.iter()) {
            let (sa, sb) = (a.start_ns - offsets.of(*src), b.start_ns - offsets.of(*dst));
            let (ea, eb) = (a.end_ns - offsets.of(*src), b.end_ns - offsets.of(*dst));
            // The receiver waited from its post to the send's, within its receive; the sender
            // (gloo: a send completes once the receive is posted) for the receive's post.
            let (waiter, waited_for, lo, hi) =
                if sa > sb { (*dst, *src, sb, sa.min(eb)) } else { (*src, *dst, sa, sb.min(ea)) };
            if hi > lo {
                waited.entry((a.step, waiter)).or_default().push((lo, hi, waited_for, pg.clone()));
            }
        }
    }
    // A rank waiting on several exchanges at once (a ring's batched send and receive) waited on
    // the one whose peer posted last: each instant goes to the wait that ends latest.
    for ((step, waiter), mut v) in waited {
        v.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        let mut covered = crate::analyze::intervals::Set::new();
        for (lo, hi, waited_for, pg) in v {
            let one = crate::analyze::intervals::Set::from_sorted(vec![(lo, hi)]);
            let w = one.subtract(&covered).len_ns();
            covered = covered.union(&one);
            if w > 0 {
                *out.entry(step).or_default().entry((waited_for, waiter, pg)).or_default() += w;
            }
        }
    }
}

/// A rank is an origin when it is in the late group of at least this share of the steps whose
/// lateness cost the step [`MIN_EDGE_SHARE`] or more (the findings' default straggler
/// consistency).
pub const ORIGIN_CONSISTENCY: f64 = 0.6;

/// A pipeline stage's usual wait for a neighbour stage is the schedule's (the bubble), not a
/// delay: per step, each pipeline edge from stage a to stage b keeps only what it waited beyond
/// the least any pipeline's edge from a to b waited in that step (its replicas'). With one
/// pipeline (or stages unknown) every exchange wait is the bubble's.
fn drop_bubbles(per_step: &mut StepEdges, stage_of: &BTreeMap<u32, usize>, layout: &Layout) {
    for edges in per_step.values_mut() {
        let mut least: BTreeMap<(usize, usize), (i64, usize)> = BTreeMap::new();
        for ((from, to, g), &w) in edges.iter() {
            if layout.role_of(g) != Role::Pipeline {
                continue;
            }
            if let (Some(&a), Some(&b)) = (stage_of.get(from), stage_of.get(to)) {
                let e = least.entry((a, b)).or_insert((i64::MAX, 0));
                e.0 = e.0.min(w);
                e.1 += 1;
            }
        }
        for ((from, to, g), w) in edges.iter_mut() {
            if layout.role_of(g) != Role::Pipeline {
                continue;
            }
            let usual = match (stage_of.get(from), stage_of.get(to)) {
                (Some(&a), Some(&b)) => least.get(&(a, b)).filter(|x| x.1 >= 2).map_or(*w, |x| x.0),
                _ => *w,
            };
            *w -= usual.min(*w);
        }
    }
}

/// The chain of the job: `ops` its matched collectives (aligned), `insts` each rank's instances
/// (rank clock), `waits` who was late per step, `stage_of` each rank's pipeline stage
/// (when several pipelines run side by side: [`drop_bubbles`]) and `step_ns` the mean step.
#[allow(clippy::too_many_arguments)] // the job's figures it reads, each once
pub fn wait_chain(
    insts: &[(u32, Vec<Instance>)],
    ops: &[Op],
    offsets: &Offsets,
    waits: &[StepWaits],
    stage_of: &BTreeMap<u32, usize>,
    layout: &Layout,
    step_ns: f64,
) -> Option<WaitChain> {
    let mut per_step: StepEdges = BTreeMap::new();
    collective_edges(ops, &mut per_step);
    p2p_edges(insts, offsets, &mut per_step);
    drop_bubbles(&mut per_step, stage_of, layout);
    let n_steps = waits.len().max(1);
    let floor = (MIN_EDGE_SHARE * step_ns).max(super::WAIT_NOISE_NS as f64);
    // Origins: late, consistently, in the steps whose lateness cost something (a rank last by
    // noise in a healthy job starts no chain).
    let mut late_count: BTreeMap<u32, usize> = BTreeMap::new();
    for w in waits.iter().filter(|w| w.cost_ns as f64 >= floor && !w.late.is_empty()) {
        for &r in &w.late {
            *late_count.entry(r).or_default() += 1;
        }
    }
    let need = (ORIGIN_CONSISTENCY * n_steps as f64).ceil().max(1.0) as usize;
    let origins: Vec<u32> = late_count.iter().filter(|(_, &n)| n >= need).map(|(&r, _)| r).collect();
    if origins.is_empty() || origins.len() * 2 > insts.len() {
        return None;
    }
    // Per step, the edges reachable from the origins.
    let mut total: BTreeMap<(u32, u32, String), (i64, u32)> = BTreeMap::new();
    for (_, edges) in per_step {
        let mut reached: BTreeSet<u32> = origins.iter().copied().collect();
        let mut frontier: Vec<u32> = origins.clone();
        let mut by_from: BTreeMap<u32, Vec<(&EdgeKey, i64)>> = BTreeMap::new();
        for (k, &w) in &edges {
            // Edges below the noise carry nothing down the chain.
            if w as f64 >= floor {
                by_from.entry(k.0).or_default().push((k, w));
            }
        }
        while let Some(r) = frontier.pop() {
            for (k, w) in by_from.get(&r).map(Vec::as_slice).unwrap_or(&[]) {
                let t = total.entry((*k).clone()).or_default();
                t.0 += w;
                t.1 += 1;
                if reached.insert(k.1) {
                    frontier.push(k.1);
                }
            }
        }
    }
    let mut edges: Vec<ChainEdge> = total
        .into_iter()
        .map(|((from, to, group), (w, steps))| ChainEdge {
            from,
            to,
            role: layout.role_of(&group),
            group,
            wait_ns: w / n_steps as i64,
            steps,
        })
        .filter(|e| e.wait_ns as f64 >= floor && !origins.contains(&e.to))
        .collect();
    edges.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(a.from.cmp(&b.from)).then(a.to.cmp(&b.to)));
    let inherited: BTreeSet<u32> = edges.iter().map(|e| e.to).collect();
    Some(WaitChain { origins, inherited: inherited.into_iter().collect(), edges })
}

/// "3 → 2 (tensor), 2 → 0 (data), 3 → 1 (data)": the chain in words, the longest waits first.
pub fn chain_words(c: &WaitChain) -> String {
    c.edges
        .iter()
        .map(|e| format!("{} → {} ({})", e.from, e.to, e.role.adjective()))
        .collect::<Vec<_>>()
        .join(", ")
}
