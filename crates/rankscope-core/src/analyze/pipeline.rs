//! Pipeline parallelism: point-to-point exchanges matched send → recv, the stage chain they
//! form, micro-batches, the schedule, and per stage × step the compute, the bubble and the
//! blocking receive wait (docs/metrics.md, "Pipelines").
//!
//! **Matching** (`match_p2p`): a send on rank `s` to peer `d` pairs with a recv on rank `d`
//! from peer `s` of the same process group, by their order within that (group, src, dst) pair;
//! sizes are compared (a pair whose sizes differ is counted as a size mismatch, not dropped). A
//! batch (`batch_isend_irecv`, an NCCL group) is one exchange: its send/recv instance pairs with
//! the batch on the peer by order within the pair. A matched pair is a 2-rank exchange whose
//! group is the pair: it is never matched as a world-size collective and feeds no straggler,
//! small-collective or bucket rule.
//!
//! **Peers.** Where the trace says them ([`super::instances`]: `Src Rank` / `Dst Rank`, the
//! `Concrete Inputs` of `c10d::send` / `c10d::recv_`, PGNCCL titles) they are used as given.
//! Otherwise (a gloo trace recorded without shapes, a kernel without args) the peer is
//! **inferred** under the pipeline assumption that a stage only talks to its neighbours in rank
//! order: a send of unknown peer on rank `r` goes to `r − 1` or `r + 1`, whichever has an
//! unmatched recv of unknown peer of the same size that ends soonest after the send started (a
//! recv cannot complete before its send was posted); recvs left over are paired the same way.
//! Limits: stages not laid out in rank order (PP × DP with the pipeline across the slow
//! dimension, interleaved virtual stages) cannot be inferred this way and stay unmatched, and
//! two sends of equal size to both neighbours at the same instant can be swapped (the figures
//! per stage do not depend on it). `peers_inferred` counts the pairs matched this way.
//!
//! **Stages.** The ranks that exchange form an undirected graph; a component that is a simple
//! path of ≥ 2 ranks is a pipeline. Its head (stage 0) is the end whose first exchange in its
//! first step is a send (activations flow forward first); otherwise the lower rank. Without any
//! point-to-point exchange, ranks with `Forward i` / `Backward i` annotations
//! (torch.distributed.pipelining) are taken as stages in rank order.
//!
//! **Per stage × step** (rank clock, main thread of the exchanges):
//! - *span*: the step window minus the optimizer (`Optimizer.*`, `optimizer` annotations): the
//!   part of the step the schedule runs in.
//! - *compute*: the union of operator runs: a run goes from an operator's start to the end of
//!   the last operator before the next blocking exchange (a `c10d::*` op, or a backend span
//!   such as `gloo:recv` that no operator starts inside; an async `gloo:send` that runs under
//!   later operators is not blocking). Gaps inside a run are the framework's own code between
//!   the operators of one chunk and count as compute; gaps next to an exchange are the
//!   schedule's. On GPU ranks, the compute union of the device.
//! - *bubble* = span − compute: the stage idle, waiting for its neighbours (plus the schedule's
//!   bookkeeping). *bubble share* = bubble / span.
//! - *recv wait*: the union of blocking receives (`c10d::recv_`, `gloo:recv`, recv kernels not
//!   under compute) in the span.
//! - *blocks* (for drawing): the compute set's intervals, `forward` / `backward` where a stage
//!   annotation covers them (host compute only; device compute is `compute`: the host's
//!   annotations are not on the device's clock), the recv-wait set, the optimizer; at most
//!   [`MAX_BLOCKS`] per group, closest neighbours merged beyond. The report carries them (and
//!   the step window) on the aligned clock.
//! - *micro-batches*: `Forward i` annotations of the stage in the step; without them, the
//!   exchanges in the forward direction (sends to the next stage; on the last stage, recvs
//!   from the previous).
//!
//! **Interleaved** schedules (v virtual stages per rank) close the chain into a ring (the last
//! rank sends chunk c's output to the first rank's chunk c + 1): the ring is taken in rank
//! order from the lowest rank, the schedule is `interleaved_1f1b`, and v comes from the
//! `PP:{stage}F{i}` annotations (distinct stages per rank); micro-batches are the rank's
//! forwards / v. Without annotations v (and so m and the theory) cannot be told.
//!
//! **Schedule**: `gpipe` when every stage runs all its forwards before its first backward
//! (annotations; else every forward-direction exchange of a stage precedes its first
//! backward-direction one), `1f1b` when some stage runs a backward before its last forward,
//! `unknown` when neither can be told. **Theory**: (p − 1) / (m + p − 1) for p stages and m
//! micro-batches (GPipe and 1F1B share it; 1F1B saves memory, not bubble).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::instances::Instance;
use super::intervals::{Iv, Set};
use crate::model::*;
use crate::normalize::job::RankEntry;

/// One rank's pipeline figures per step, computed where its tables live.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RankPipe {
    pub steps: Vec<StageStepPart>,
}

/// One rank × step, before the rank's stage is known.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StageStepPart {
    pub step: u32,
    pub start_ns: i64,
    pub end_ns: i64,
    pub span_ns: i64,
    pub compute_ns: i64,
    pub recv_wait_ns: i64,
    /// Of the span, the time the stage's thread runs nothing at all: no operator, no exchange
    /// (blocking or not), no compute run. Waiting for a neighbour is always inside an exchange
    /// (a `gloo:recv`, an async `gloo:send` not yet received, a recv kernel); this is the
    /// stage's own host time (a hook's sleep, blocking I/O), which its neighbours then wait for.
    #[serde(default)]
    pub host_free_ns: i64,
    /// `Forward i` / `Backward i` annotations in the step.
    pub forwards: u32,
    pub backwards: u32,
    /// Their order, `F` and `B` by start time.
    pub order: String,
    /// Distinct stages named by `PP:{stage}F{i}` annotations (0 without them).
    #[serde(default)]
    pub virtual_stages: u32,
    /// What the step looks like, for drawing ([`PipeBlock`], rank clock).
    #[serde(default)]
    pub blocks: Vec<PipeBlock>,
}

/// What a [`PipeBlock`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockKind {
    /// Compute inside a `Forward i` / `PP:{s}F{i}` annotation.
    Forward,
    /// Compute inside a `Backward i` / `PP:{s}B{i}` annotation.
    Backward,
    /// Compute the annotations do not place (none in the trace, or device compute: the host's
    /// annotations are not on the device's clock).
    Compute,
    /// A blocking receive (the recv wait).
    RecvWait,
    /// The optimizer, outside the span.
    Optimizer,
}

/// One interval of a stage's step: the compute (forward, backward or unplaced) whose lengths add
/// up to `compute_ns`, then the blocking receives (`recv_wait_ns`), then the optimizer. The
/// step's window minus these is the bubble. At most [`MAX_BLOCKS`] of each of the three groups:
/// beyond, the closest neighbours of the same kind are merged (then any neighbours, as
/// `compute`), so a drawing stays small while the figures stay exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipeBlock {
    pub kind: BlockKind,
    pub start_ns: i64,
    pub end_ns: i64,
}

/// At most this many blocks per group (compute, recv waits, optimizer) of a stage × step.
pub const MAX_BLOCKS: usize = 96;

/// The blocks of `set`, each of `kind`.
fn blocks_of(set: &Set, kind: BlockKind) -> impl Iterator<Item = PipeBlock> + '_ {
    set.intervals().iter().map(move |&(start_ns, end_ns)| PipeBlock { kind, start_ns, end_ns })
}

/// Merges time-ordered blocks until at most `cap` remain: the closest neighbours of the same kind
/// first, then any neighbours (a merge of two kinds is `compute`).
fn coarsen(mut v: Vec<PipeBlock>, cap: usize) -> Vec<PipeBlock> {
    for same_kind in [true, false] {
        if v.len() <= cap {
            break;
        }
        let mut gaps: Vec<i64> = v
            .windows(2)
            .filter(|w| !same_kind || w[0].kind == w[1].kind)
            .map(|w| w[1].start_ns - w[0].end_ns)
            .collect();
        if gaps.is_empty() {
            continue;
        }
        gaps.sort_unstable();
        let excess = (v.len() - cap).min(gaps.len());
        let limit = gaps[excess - 1];
        let mut out: Vec<PipeBlock> = Vec::with_capacity(cap);
        for b in v {
            match out.last_mut() {
                Some(l) if (!same_kind || l.kind == b.kind) && b.start_ns - l.end_ns <= limit => {
                    if l.kind != b.kind {
                        l.kind = BlockKind::Compute;
                    }
                    l.end_ns = l.end_ns.max(b.end_ns);
                }
                _ => out.push(b),
            }
        }
        v = out;
    }
    v
}

crate::named_enum! {
    /// What a pipeline was recognised from.
    pub enum PipeSource {
        /// Point-to-point exchanges chaining the ranks (a ring for interleaved schedules).
        P2pChain => "p2p_chain",
        /// `Forward i` / `Backward i` stage annotations, without exchanges.
        Annotations => "annotations",
    }
}

/// The schedule, as far as the trace tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    Gpipe,
    #[serde(rename = "1f1b")]
    OneFOneB,
    /// Interleaved 1F1B: each rank holds v > 1 virtual stages (the exchanges close a ring, or
    /// `PP:{stage}F{i}` annotations name several stages per rank).
    #[serde(rename = "interleaved_1f1b")]
    Interleaved1f1b,
    Unknown,
}

impl Schedule {
    pub fn name(self) -> &'static str {
        match self {
            Schedule::Gpipe => "GPipe",
            Schedule::OneFOneB => "1F1B",
            Schedule::Interleaved1f1b => "interleaved 1F1B",
            Schedule::Unknown => "unknown",
        }
    }
}

/// Matched point-to-point traffic of one direction of one pair.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct P2pLink {
    pub pg: String,
    pub src: u32,
    pub dst: u32,
    pub matched: usize,
    /// Sends (on `src`) and recvs (on `dst`) left without a partner.
    pub unmatched_sends: usize,
    pub unmatched_recvs: usize,
    /// Matched pairs whose two sizes differ.
    pub size_mismatches: usize,
    /// Median message size of the matched pairs.
    pub bytes: Option<i64>,
    /// Pairs whose peer was inferred (see the module doc).
    pub peers_inferred: usize,
    /// Batched exchanges (`batch_isend_irecv`, NCCL groups) among the matched.
    pub batched: usize,
}

/// One stage × step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StageStep {
    pub stage: u32,
    pub rank: u32,
    pub step: u32,
    pub span_ns: i64,
    pub compute_ns: i64,
    pub bubble_ns: i64,
    pub bubble_share: f64,
    pub recv_wait_ns: i64,
    /// The stage's own host time: its thread runs nothing ([`StageStepPart::host_free_ns`]).
    #[serde(default)]
    pub host_free_ns: i64,
    pub micro_batches: Option<u32>,
    /// The step's window (aligned clock).
    #[serde(default)]
    pub start_ns: i64,
    #[serde(default)]
    pub end_ns: i64,
    /// Compute, recv waits and optimizer of the step ([`PipeBlock`], aligned clock).
    #[serde(default)]
    pub blocks: Vec<PipeBlock>,
}

/// One stage, means over its steps.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StageSummary {
    pub stage: u32,
    pub rank: u32,
    pub steps: usize,
    pub span_ns: i64,
    pub compute_ns: i64,
    pub bubble_ns: i64,
    pub bubble_share: f64,
    pub recv_wait_ns: i64,
    /// The stage's own host time per step ([`StageStepPart::host_free_ns`]).
    #[serde(default)]
    pub host_free_ns: i64,
    pub micro_batches: Option<u32>,
}

/// The `pipeline` section of the analysis.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PipelineReport {
    /// Ranks in stage order (stage 0 first).
    pub stages: Vec<u32>,
    pub detected_from: PipeSource,
    pub schedule: Schedule,
    /// Micro-batches per step (the median over stages and steps).
    pub micro_batches: Option<u32>,
    /// Virtual stages per rank (interleaved schedules), when the annotations tell.
    #[serde(default)]
    pub virtual_stages: Option<u32>,
    /// (p − 1) / (m + p − 1); interleaved (p − 1) / (m·v + p − 1). Absent when m (or, for a
    /// ring without annotations, v) cannot be told.
    pub theory_bubble_share: Option<f64>,
    /// The same with twice the micro-batches.
    pub theory_bubble_share_2m: Option<f64>,
    pub per_stage: Vec<StageSummary>,
    pub steps: Vec<StageStep>,
    /// The stage with the most compute per step, and how much it exceeds the stages' mean.
    pub slowest_stage: Option<u32>,
    pub slowest_excess: f64,
    pub links: Vec<P2pLink>,
    /// Per step: the critical path across stages ([`critical_paths`]).
    #[serde(default)]
    pub critical_path: Vec<PipePath>,
}

/// The critical path of one pipeline step, across stages (aligned times).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PipePath {
    pub step: u32,
    pub start_ns: i64,
    pub end_ns: i64,
    /// Latest first: the work on a stage, then the exchange it waited for, then the sender's
    /// work before it, back to the start of the step.
    pub hops: Vec<PipeHop>,
    /// Time on the path per stage (work only), stage order.
    pub work_ns: Vec<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PipeHop {
    pub stage: u32,
    pub rank: u32,
    /// `work` or `exchange` (from the previous hop's stage to this one's successor).
    pub what: String,
    pub start_ns: i64,
    pub end_ns: i64,
}

/// Whether `name` is a stage annotation of torch.distributed.pipelining, which (`F` / `B`),
/// and the stage when it says: `Forward 3` / `Backward 3` (`ScheduleGPipe`), `PP:5F3` /
/// `PP:5B3` (`_PipelineScheduleRuntime`: stage 5, micro-batch 3; interleaved schedules).
fn fb_annotation(name: &str) -> Option<(char, Option<u32>)> {
    if let Some(rest) = name.strip_prefix("PP:") {
        let k = rest.find(|c: char| !c.is_ascii_digit())?;
        let stage: u32 = rest[..k].parse().ok()?;
        let (c, mb) = rest[k..].split_at(1);
        if mb.is_empty() || !mb.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        return match c {
            "F" => Some(('F', Some(stage))),
            "B" => Some(('B', Some(stage))),
            _ => None,
        };
    }
    fb_plain(name).map(|c| (c, None))
}

fn fb_plain(name: &str) -> Option<char> {
    let (word, n) = name.split_once(' ')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    match word {
        "Forward" => Some('F'),
        "Backward" => Some('B'),
        _ => None,
    }
}

fn is_optimizer(strings: &StringTable, e: &EventTable, i: usize) -> bool {
    if e.class[i] == Class::Optimizer {
        return true;
    }
    let n = strings.get(e.name[i]);
    n.starts_with("Optimizer.") || n.eq_ignore_ascii_case("optimizer")
}

/// The per-rank half: figures per step window for a rank with point-to-point exchanges or
/// stage annotations (empty otherwise).
pub fn rank_pipe(
    r: &RankEntry,
    strings: &StringTable,
    windows: &[(u32, i64, i64)],
    insts: &[Instance],
    device_compute: Option<&Set>,
) -> RankPipe {
    let t = &r.trace;
    let e = &t.events;
    let p2p: Vec<&Instance> = insts.iter().filter(|x| x.p2p).collect();
    // The lane of the exchanges on the host: the most common lane of the p2p spans (CPU) or of
    // the stage annotations.
    let mut lanes: BTreeMap<LaneId, usize> = BTreeMap::new();
    for x in &p2p {
        let i = x.event.0 as usize;
        if i < e.len() && t.lanes.kind.get(e.lane[i].0 as usize) == Some(&LaneKind::Cpu) {
            *lanes.entry(e.lane[i]).or_default() += 1;
        }
    }
    // Each distinct name of the rank read once, not each row's (a string search per row was
    // 1.5% of `analyze`); by id, as `strings` may be the whole job's.
    let mut fb_of: FxHashMap<StrId, Option<(char, Option<u32>)>> = FxHashMap::default();
    let mut annotated = Vec::new();
    for i in 0..e.len() {
        if e.kind[i] == EventKind::Slice {
            let fb = *fb_of.entry(e.name[i]).or_insert_with(|| fb_annotation(strings.get(e.name[i])));
            if fb.is_some() {
                annotated.push(i);
            }
        }
    }
    let fb_at = |i: usize| fb_of.get(&e.name[i]).copied().flatten();
    if lanes.is_empty() {
        for &i in &annotated {
            *lanes.entry(e.lane[i]).or_default() += 1;
        }
    }
    if p2p.is_empty() && annotated.is_empty() {
        return RankPipe::default();
    }
    let lane = lanes.iter().max_by_key(|(l, n)| (**n, std::cmp::Reverse(**l))).map(|(l, _)| *l);
    let mut out = RankPipe::default();
    for &(step, lo, hi) in windows {
        let mut row = StageStepPart { step, start_ns: lo, end_ns: hi, ..Default::default() };
        let mut ops: Vec<Iv> = Vec::new();
        let mut barriers: Vec<Iv> = Vec::new();
        let mut backend: Vec<Iv> = Vec::new();
        let mut recvs: Vec<Iv> = Vec::new();
        let mut opt: Vec<Iv> = Vec::new();
        let mut fb: Vec<(i64, char)> = Vec::new();
        let (mut f_ivs, mut b_ivs): (Vec<Iv>, Vec<Iv>) = (Vec::new(), Vec::new());
        let mut vstages: BTreeSet<u32> = BTreeSet::new();
        let mut busy: Vec<Iv> = Vec::new();
        for i in 0..e.len() {
            if e.kind[i] != EventKind::Slice || Some(e.lane[i]) != lane {
                continue;
            }
            let (s, end) = (e.ts_ns[i], e.end_ns(i));
            if end <= lo || s >= hi {
                continue;
            }
            if matches!(e.class[i], Class::Communication | Class::Compute | Class::Memory) {
                busy.push((s, end));
            }
            if let Some((c, stage)) = fb_at(i) {
                if s >= lo {
                    fb.push((s, c));
                    vstages.extend(stage);
                }
                let ivs = if c == 'F' { &mut f_ivs } else { &mut b_ivs };
                ivs.push((s, end));
                continue;
            }
            if is_optimizer(strings, e, i) {
                opt.push((s, end));
                continue;
            }
            match e.class[i] {
                Class::Communication => {
                    let recv = e.coll_kind(i) == CollKind::Recv;
                    if super::roles::is_backend_span(t, strings, i) {
                        backend.push((s, end));
                        if recv {
                            recvs.push((s, end));
                        }
                    } else {
                        barriers.push((s, end));
                        if recv {
                            recvs.push((s, end));
                        }
                    }
                }
                Class::Compute | Class::Memory => ops.push((s, end)),
                _ => {}
            }
        }
        let opt = Set::from_unsorted(opt);
        row.span_ns = (hi - lo) - opt.len_within(lo, hi);
        // Operators nested in a `c10d::*` op belong to it.
        let host_ops = Set::from_unsorted(barriers.clone());
        ops.retain(|&(s, end)| !host_ops.intervals().iter().any(|&(a, b)| a <= s && end <= b));
        ops.sort_unstable();
        // A backend span is blocking when no operator starts inside it.
        for &(a, b) in &backend {
            let k = ops.partition_point(|o| o.0 <= a);
            let inside = ops.get(k).is_some_and(|o| o.0 < b);
            if !inside {
                barriers.push((a, b));
            }
        }
        barriers.extend(opt.intervals().iter().copied());
        barriers.sort_unstable();
        let blocking = Set::from_unsorted(barriers.clone());
        ops.retain(|&(s, end)| !blocking.intervals().iter().any(|&(a, b)| a <= s && end <= b));
        let compute = match device_compute {
            Some(c) => c.clip(lo, hi).subtract(&opt),
            None => {
                // Runs of operators with no blocking exchange in between.
                let mut runs: Vec<Iv> = Vec::new();
                let mut j = 0;
                let mut max_end = i64::MIN;
                for &(s, end) in &ops {
                    while j < barriers.len() && barriers[j].0 < s {
                        max_end = max_end.max(barriers[j].1);
                        j += 1;
                    }
                    match runs.last_mut() {
                        Some(cur) if max_end <= cur.1 => cur.1 = cur.1.max(end),
                        _ => runs.push((s, end)),
                    }
                }
                Set::from_unsorted(runs).subtract(&opt).clip(lo, hi)
            }
        };
        row.compute_ns = compute.len_ns();
        row.host_free_ns =
            ((hi - lo) - Set::from_unsorted(busy).union(&compute).union(&opt).len_within(lo, hi)).max(0);
        let mut recv_set = Set::from_unsorted(recvs);
        if let Some(c) = device_compute {
            // Device recv kernels: the part not under compute is what the stage waited.
            let dev: Vec<Iv> = p2p
                .iter()
                .filter(|x| x.kind == CollKind::Recv && x.step == step)
                .map(|x| (x.start_ns, x.end_ns))
                .collect();
            recv_set = recv_set.union(&Set::from_unsorted(dev).subtract(c));
        }
        let recv_set = recv_set.subtract(&opt).clip(lo, hi);
        row.recv_wait_ns = recv_set.len_ns();
        // The drawing: compute placed by the annotations (host compute only), recv waits,
        // optimizer.
        let mut placed: Vec<PipeBlock> = if device_compute.is_some() {
            blocks_of(&compute, BlockKind::Compute).collect()
        } else {
            let f = Set::from_unsorted(f_ivs);
            let b = Set::from_unsorted(b_ivs).subtract(&f);
            let mut v: Vec<PipeBlock> = blocks_of(&compute.intersect(&f), BlockKind::Forward)
                .chain(blocks_of(&compute.intersect(&b), BlockKind::Backward))
                .chain(blocks_of(&compute.subtract(&f).subtract(&b), BlockKind::Compute))
                .collect();
            v.sort_by_key(|x| (x.start_ns, x.kind));
            v
        };
        placed = coarsen(placed, MAX_BLOCKS);
        placed.extend(coarsen(blocks_of(&recv_set, BlockKind::RecvWait).collect(), MAX_BLOCKS));
        placed.extend(coarsen(blocks_of(&opt.clip(lo, hi), BlockKind::Optimizer).collect(), MAX_BLOCKS));
        row.blocks = placed;
        fb.sort_unstable();
        row.forwards = fb.iter().filter(|x| x.1 == 'F').count() as u32;
        row.backwards = fb.iter().filter(|x| x.1 == 'B').count() as u32;
        row.order = fb.iter().map(|x| x.1).collect();
        row.virtual_stages = vstages.len() as u32;
        out.steps.push(row);
    }
    out
}

/// A point-to-point instance of one rank, for matching.
struct End<'a> {
    x: &'a Instance,
    peer: Option<u32>,
    taken: bool,
    inferred: bool,
}

/// Matched exchanges: `(src, dst, send, recv, inferred)`.
type Pair<'a> = (u32, u32, &'a Instance, &'a Instance, bool);

type Links = BTreeMap<(String, u32, u32), P2pLink>;

/// The link of (group, src, dst), created empty when new.
fn link<'l>(links: &'l mut Links, pg: &str, src: u32, dst: u32) -> &'l mut P2pLink {
    links.entry((pg.to_string(), src, dst)).or_insert_with(|| P2pLink {
        pg: pg.to_string(),
        src,
        dst,
        matched: 0,
        unmatched_sends: 0,
        unmatched_recvs: 0,
        size_mismatches: 0,
        bytes: None,
        peers_inferred: 0,
        batched: 0,
    })
}

/// Matches sends to recvs (see the module doc). `insts[k]` belongs to rank `ranks[k]`.
fn match_p2p<'a>(ranks: &[u32], insts: &'a [Vec<Instance>]) -> (Vec<Pair<'a>>, Vec<P2pLink>) {
    let slot = |rank: u32| ranks.iter().position(|&r| r == rank);
    let mut sends: Vec<Vec<End>> = Vec::new();
    let mut recvs: Vec<Vec<End>> = Vec::new();
    for v in insts {
        let mut s = Vec::new();
        let mut r = Vec::new();
        for x in v.iter().filter(|x| x.p2p) {
            let end = End { x, peer: x.peer, taken: false, inferred: false };
            match x.kind {
                CollKind::Send => s.push(end),
                CollKind::Recv => r.push(end),
                // A batch is an exchange both ways: it pairs with the peer's batch, once, from
                // the lower rank's side.
                _ => {
                    let peer = x.peer.or_else(|| {
                        let mut p: Vec<u32> = x.batch.iter().filter_map(|b| b.1).collect();
                        p.sort_unstable();
                        p.dedup();
                        (p.len() == 1).then(|| p[0])
                    });
                    s.push(End { x, peer, taken: false, inferred: false });
                    r.push(End { x, peer, taken: false, inferred: false });
                }
            }
        }
        s.sort_by_key(|e| (e.x.start_ns, e.x.event));
        r.sort_by_key(|e| (e.x.start_ns, e.x.event));
        sends.push(s);
        recvs.push(r);
    }
    let mut pairs: Vec<Pair> = Vec::new();
    let mut links: Links = BTreeMap::new();
    // Known peers: by order within (group, src, dst).
    for (ks, &src) in ranks.iter().enumerate() {
        let mut dsts: BTreeSet<(String, u32)> = BTreeSet::new();
        for e in &sends[ks] {
            if let Some(p) = e.peer {
                dsts.insert((e.x.pg.clone(), p));
            }
        }
        for (pg, dst) in dsts {
            let Some(kd) = slot(dst) else { continue };
            if kd == ks {
                continue;
            }
            let batch = |x: &Instance| x.kind == CollKind::SendRecv;
            let si: Vec<usize> = (0..sends[ks].len())
                .filter(|&j| sends[ks][j].peer == Some(dst) && sends[ks][j].x.pg == pg)
                .collect();
            let ri: Vec<usize> = (0..recvs[kd].len())
                .filter(|&j| {
                    let r = &recvs[kd][j];
                    r.peer == Some(src) && r.x.pg == pg && !r.taken
                })
                .collect();
            // A batch pairs once per pair of ranks: from the lower rank.
            let si: Vec<usize> = si.into_iter().filter(|&j| !batch(sends[ks][j].x) || src < dst).collect();
            let ri: Vec<usize> = ri.into_iter().filter(|&j| !batch(recvs[kd][j].x) || src < dst).collect();
            for (&a, &b) in si.iter().zip(&ri) {
                sends[ks][a].taken = true;
                recvs[kd][b].taken = true;
                pairs.push((src, dst, sends[ks][a].x, recvs[kd][b].x, false));
            }
        }
    }
    // Unknown peers: the neighbours in rank order (see the module doc).
    for ks in 0..ranks.len() {
        let src = ranks[ks];
        for j in 0..sends[ks].len() {
            let e = &sends[ks][j];
            if e.taken || e.peer.is_some() || e.x.kind != CollKind::Send {
                continue;
            }
            let (t0, bytes, pg) = (e.x.start_ns, e.x.bytes, e.x.pg.clone());
            let mut best: Option<(i64, usize, usize)> = None;
            for kd in [ks.wrapping_sub(1), ks + 1] {
                let Some(rv) = recvs.get(kd) else { continue };
                if let Some(b) = rv.iter().position(|r| {
                    !r.taken
                        && r.peer.is_none()
                        && r.x.kind == CollKind::Recv
                        && r.x.pg == pg
                        && r.x.bytes == bytes
                        && r.x.end_ns >= t0
                }) {
                    let d = rv[b].x.end_ns - t0;
                    if best.is_none_or(|x| d < x.0) {
                        best = Some((d, kd, b));
                    }
                }
            }
            if let Some((_, kd, b)) = best {
                sends[ks][j].taken = true;
                sends[ks][j].inferred = true;
                recvs[kd][b].taken = true;
                recvs[kd][b].inferred = true;
                pairs.push((src, ranks[kd], sends[ks][j].x, recvs[kd][b].x, true));
            }
        }
    }
    for &(s, d, a, b, inferred) in &pairs {
        let l = link(&mut links, &a.pg, s, d);
        l.matched += 1;
        if inferred {
            l.peers_inferred += 1;
        }
        if a.kind == CollKind::SendRecv {
            l.batched += 1;
        }
        if let (Some(x), Some(y)) = (a.bytes, b.bytes) {
            if x != y {
                l.size_mismatches += 1;
            }
        }
    }
    for (k, &rank) in ranks.iter().enumerate() {
        for e in sends[k].iter().filter(|e| !e.taken && e.x.kind == CollKind::Send) {
            link(&mut links, &e.x.pg, rank, e.peer.unwrap_or(u32::MAX)).unmatched_sends += 1;
        }
        for e in recvs[k].iter().filter(|e| !e.taken && e.x.kind == CollKind::Recv) {
            link(&mut links, &e.x.pg, e.peer.unwrap_or(u32::MAX), rank).unmatched_recvs += 1;
        }
    }
    for l in links.values_mut() {
        let mut b: Vec<i64> = pairs
            .iter()
            .filter(|p| p.0 == l.src && p.1 == l.dst && p.2.pg == l.pg)
            .filter_map(|p| p.2.bytes.or(p.3.bytes))
            .collect();
        if !b.is_empty() {
            l.bytes = Some(super::stats::lower_median(&mut b));
        }
    }
    pairs.sort_by_key(|p| (p.2.start_ns, p.0, p.1));
    (pairs, links.into_values().collect())
}

/// The stage chain of the exchanges, head first (see the module doc).
/// The stage chain of the exchanges, head first, and whether it is a ring (see the module doc).
fn chain(ranks: &[u32], pairs: &[Pair<'_>], insts: &[Vec<Instance>]) -> Option<(Vec<u32>, bool)> {
    let mut adj: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for p in pairs {
        adj.entry(p.0).or_default().insert(p.1);
        adj.entry(p.1).or_default().insert(p.0);
    }
    if adj.len() < 2 || adj.values().any(|n| n.len() > 2) {
        return None;
    }
    // The largest component that is a path.
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    let mut best: Option<Vec<u32>> = None;
    for (&start, n) in &adj {
        if seen.contains(&start) || n.len() != 1 {
            continue;
        }
        let mut path = vec![start];
        seen.insert(start);
        let mut prev = None;
        let mut cur = start;
        loop {
            let next = adj[&cur].iter().copied().find(|&x| Some(x) != prev && !seen.contains(&x));
            let Some(nx) = next else { break };
            seen.insert(nx);
            path.push(nx);
            prev = Some(cur);
            cur = nx;
        }
        if best.as_ref().is_none_or(|b| path.len() > b.len()) {
            best = Some(path);
        }
    }
    // Every rank with two neighbours and no end: a ring, which interleaved schedules make (the
    // last stage of chunk c sends to the first rank for chunk c + 1). Stages in rank order from
    // the lowest rank towards its lower-numbered neighbour.
    if best.is_none() && adj.values().all(|n| n.len() == 2) {
        let start = *adj.keys().next()?;
        let mut path = vec![start];
        let mut prev = start;
        let mut cur = *adj[&start].iter().next()?;
        while cur != start && path.len() <= adj.len() {
            path.push(cur);
            let next = adj[&cur].iter().copied().find(|&x| x != prev)?;
            (prev, cur) = (cur, next);
        }
        return (path.len() == adj.len()).then_some((path, true));
    }
    let mut path = best?;
    // The head: the end whose first exchange is a send.
    let first_is_send = |rank: u32| -> Option<bool> {
        let k = ranks.iter().position(|&r| r == rank)?;
        let v = insts.get(k)?;
        let x = v.iter().filter(|x| x.p2p).min_by_key(|x| (x.step, x.start_ns))?;
        Some(x.kind == CollKind::Send)
    };
    let (a, b) = (path[0], path[path.len() - 1]);
    let flip = match (first_is_send(a), first_is_send(b)) {
        (Some(false), Some(true)) => true,
        (Some(true), Some(false)) => false,
        _ => a > b,
    };
    if flip {
        path.reverse();
    }
    Some((path, false))
}

/// The job half: the pipeline from every rank's instances and figures (`None` without one).
pub fn report(
    ranks: &[u32],
    insts: &[Vec<Instance>],
    pipes: &[&RankPipe],
    offsets: &[(u32, i64)],
) -> Option<PipelineReport> {
    let (pairs, links) = match_p2p(ranks, insts);
    let (stages, detected_from, ring) = match chain(ranks, &pairs, insts) {
        Some((c, ring)) => (c, PipeSource::P2pChain, ring),
        None if pairs.is_empty() => {
            let annotated: Vec<u32> = ranks
                .iter()
                .zip(pipes)
                .filter(|(_, p)| p.steps.iter().any(|s| s.forwards > 0))
                .map(|(&r, _)| r)
                .collect();
            if annotated.len() < 2 {
                return None;
            }
            (annotated, PipeSource::Annotations, false)
        }
        None => return None,
    };
    let p = stages.len() as u32;
    let slot = |rank: u32| ranks.iter().position(|&r| r == rank);
    // Aligned = rank clock − offset.
    let off = |rank: u32| offsets.iter().find(|o| o.0 == rank).map_or(0, |o| o.1);
    // Per stage × step: micro-batches and the order of forward / backward work.
    let mut steps: Vec<StageStep> = Vec::new();
    let mut vs: Vec<i64> = stages
        .iter()
        .filter_map(|&r| slot(r))
        .flat_map(|k| pipes[k].steps.iter().map(|s| i64::from(s.virtual_stages)))
        .filter(|&v| v > 0)
        .collect();
    let v = (!vs.is_empty()).then(|| super::stats::lower_median(&mut vs) as u32).filter(|&v| v > 0);
    let per_v = v.unwrap_or(1);
    let mut gpipe_votes = 0usize;
    let mut one_f_votes = 0usize;
    for (stage, &rank) in stages.iter().enumerate() {
        let Some(k) = slot(rank) else { continue };
        let next = stages.get(stage + 1).copied();
        let prev = stage.checked_sub(1).and_then(|s| stages.get(s).copied());
        for row in &pipes[k].steps {
            // Exchanges of this stage in this step: forward and backward direction, with the
            // instant each tells about (a send when posted, a recv when its data arrived).
            let mut fwd: Vec<i64> = Vec::new();
            let mut bwd: Vec<i64> = Vec::new();
            for q in pairs.iter().filter(|q| q.0 == rank || q.1 == rank) {
                let (mine, other, send) = if q.0 == rank { (q.2, q.1, true) } else { (q.3, q.0, false) };
                if mine.step != row.step {
                    continue;
                }
                let t = if send { mine.start_ns } else { mine.end_ns };
                let forward = (send && Some(other) == next) || (!send && Some(other) == prev);
                let backward = (send && Some(other) == prev) || (!send && Some(other) == next);
                if forward {
                    fwd.push(t);
                } else if backward {
                    bwd.push(t);
                }
            }
            // Stage 0 sends its outputs forward; the last stage receives its inputs.
            let dir_count = if next.is_some() {
                pairs.iter().filter(|q| q.0 == rank && Some(q.1) == next && q.2.step == row.step).count()
            } else {
                pairs.iter().filter(|q| q.1 == rank && Some(q.0) == prev && q.3.step == row.step).count()
            } as u32;
            // Interleaved: each micro-batch passes a rank once per virtual stage.
            let m = if row.forwards > 0 {
                Some(row.forwards / per_v).filter(|&m| m > 0)
            } else {
                (dir_count > 0 && !ring).then_some(dir_count / per_v).filter(|&m| m > 0)
            };
            if row.forwards > 0 && row.backwards > 0 {
                let last_f = row.order.rfind('F');
                let first_b = row.order.find('B');
                match (last_f, first_b) {
                    (Some(f), Some(b)) if f < b => gpipe_votes += 1,
                    (Some(_), Some(_)) => one_f_votes += 1,
                    _ => {}
                }
            } else if let (Some(&first_b), Some(m)) = (bwd.iter().min(), m) {
                let before = fwd.iter().filter(|&&t| t < first_b).count() as u32;
                if before >= m {
                    gpipe_votes += 1;
                } else if p > 1 {
                    one_f_votes += 1;
                }
            }
            let bubble = (row.span_ns - row.compute_ns).max(0);
            steps.push(StageStep {
                stage: stage as u32,
                rank,
                step: row.step,
                span_ns: row.span_ns,
                compute_ns: row.compute_ns,
                bubble_ns: bubble,
                bubble_share: if row.span_ns > 0 { bubble as f64 / row.span_ns as f64 } else { 0.0 },
                recv_wait_ns: row.recv_wait_ns,
                host_free_ns: row.host_free_ns,
                micro_batches: m,
                start_ns: row.start_ns - off(rank),
                end_ns: row.end_ns - off(rank),
                blocks: row
                    .blocks
                    .iter()
                    .map(|b| PipeBlock {
                        start_ns: b.start_ns - off(rank),
                        end_ns: b.end_ns - off(rank),
                        ..*b
                    })
                    .collect(),
            });
        }
    }
    // A stage whose steps saw no exchange (outside the profiled window) has nothing to say.
    steps.retain(|s| s.span_ns > 0);
    steps.sort_by_key(|s| (s.step, s.stage));
    let schedule = if ring || v.is_some_and(|v| v > 1) {
        Schedule::Interleaved1f1b
    } else if one_f_votes > 0 && one_f_votes >= gpipe_votes / 4 {
        Schedule::OneFOneB
    } else if gpipe_votes > 0 {
        Schedule::Gpipe
    } else {
        Schedule::Unknown
    };
    let mut ms: Vec<i64> = steps.iter().filter_map(|s| s.micro_batches.map(i64::from)).collect();
    let micro_batches = (!ms.is_empty()).then(|| super::stats::lower_median(&mut ms) as u32);
    let theory = |m: u32| {
        let (p, m, v) = (f64::from(p), f64::from(m), f64::from(per_v));
        (p - 1.0) / (m * v + p - 1.0)
    };
    let per_stage: Vec<StageSummary> = stages
        .iter()
        .enumerate()
        .filter_map(|(stage, &rank)| {
            let v: Vec<&StageStep> = steps.iter().filter(|s| s.rank == rank).collect();
            if v.is_empty() {
                return None;
            }
            let n = v.len() as i64;
            let mean = |f: fn(&StageStep) -> i64| v.iter().copied().map(f).sum::<i64>() / n;
            let mut m: Vec<i64> = v.iter().filter_map(|s| s.micro_batches.map(i64::from)).collect();
            Some(StageSummary {
                stage: stage as u32,
                rank,
                steps: v.len(),
                span_ns: mean(|s| s.span_ns),
                compute_ns: mean(|s| s.compute_ns),
                bubble_ns: mean(|s| s.bubble_ns),
                bubble_share: v.iter().map(|s| s.bubble_share).sum::<f64>() / v.len() as f64,
                recv_wait_ns: mean(|s| s.recv_wait_ns),
                host_free_ns: mean(|s| s.host_free_ns),
                micro_batches: (!m.is_empty()).then(|| super::stats::lower_median(&mut m) as u32),
            })
        })
        .collect();
    let slowest = per_stage.iter().max_by_key(|s| (s.compute_ns, std::cmp::Reverse(s.stage)));
    let mean_compute =
        per_stage.iter().map(|s| s.compute_ns as f64).sum::<f64>() / per_stage.len().max(1) as f64;
    let slowest_excess = match slowest {
        Some(s) if mean_compute > 0.0 => s.compute_ns as f64 / mean_compute - 1.0,
        _ => 0.0,
    };
    let critical_path = critical_paths(&stages, ranks, pipes, &pairs, offsets);
    Some(PipelineReport {
        critical_path,
        detected_from,
        schedule,
        micro_batches,
        virtual_stages: v,
        theory_bubble_share: micro_batches.filter(|&m| m > 0 && (!ring || v.is_some())).map(theory),
        theory_bubble_share_2m: micro_batches
            .filter(|&m| m > 0 && (!ring || v.is_some()))
            .map(|m| theory(2 * m)),
        slowest_stage: slowest.map(|s| s.stage),
        slowest_excess,
        per_stage,
        steps,
        links,
        stages,
    })
}

/// The critical path of each step, walked backwards from the stage whose step ends last: on
/// the current stage, the latest receive before the current time that it waited in (its
/// sender posted the data after the receive began) is where the path came from: the work after
/// it is on this stage, the exchange links it to the sender's post, and the walk continues on
/// the sender from that instant. A receive whose data was already there is no hop. The walk
/// ends at the current stage's step start. Only exchanges whose both ends are in the step count,
/// so a path never leaves the step's windows. Aligned clocks (`offsets`: aligned = rank − offset).
pub fn critical_paths(
    stages: &[u32],
    ranks: &[u32],
    pipes: &[&RankPipe],
    pairs: &[Pair<'_>],
    offsets: &[(u32, i64)],
) -> Vec<PipePath> {
    let off = |rank: u32| offsets.iter().find(|o| o.0 == rank).map_or(0, |o| o.1);
    let stage_of = |rank: u32| stages.iter().position(|&r| r == rank).map_or(u32::MAX, |s| s as u32);
    let window = |rank: u32, step: u32| -> Option<(i64, i64)> {
        let k = ranks.iter().position(|&r| r == rank)?;
        let row = pipes.get(k)?.steps.iter().find(|s| s.step == step)?;
        Some((row.start_ns - off(rank), row.end_ns - off(rank)))
    };
    let mut steps: Vec<u32> = pipes.iter().flat_map(|p| p.steps.iter().map(|s| s.step)).collect();
    steps.sort_unstable();
    steps.dedup();
    let mut out = Vec::new();
    for step in steps {
        let ends: Vec<(i64, u32)> =
            stages.iter().filter_map(|&r| window(r, step).map(|w| (w.1, r))).collect();
        let Some(&(end, last)) = ends.iter().max_by_key(|x| (x.0, std::cmp::Reverse(x.1))) else { continue };
        // Exchanges of the step into each rank: (recv start, recv end, send start, src), aligned.
        let into = |rank: u32| -> Vec<(i64, i64, i64, u32)> {
            let mut v: Vec<(i64, i64, i64, u32)> = pairs
                .iter()
                .filter(|q| q.1 == rank && q.3.step == step && q.2.step == step && stages.contains(&q.0))
                .map(|q| (q.3.start_ns - off(rank), q.3.end_ns - off(rank), q.2.start_ns - off(q.0), q.0))
                .collect();
            v.sort_unstable();
            v
        };
        let mut hops = Vec::new();
        let (mut rank, mut t) = (last, end);
        let mut start = end;
        for _ in 0..pairs.len() + stages.len() + 1 {
            let lo = window(rank, step).map_or(t, |w| w.0);
            let from = into(rank)
                .into_iter()
                .filter(|x| x.1 <= t && x.1 > lo && x.2 > x.0 && x.2 < x.1 && x.3 != rank)
                .max_by_key(|x| x.1);
            let stage = stage_of(rank);
            match from {
                Some((_, recv_end, send_start, src)) => {
                    hops.push(PipeHop { stage, rank, what: "work".into(), start_ns: recv_end, end_ns: t });
                    hops.push(PipeHop {
                        stage: stage_of(src),
                        rank: src,
                        what: "exchange".into(),
                        start_ns: send_start,
                        end_ns: recv_end,
                    });
                    (rank, t) = (src, send_start);
                }
                None => {
                    hops.push(PipeHop { stage, rank, what: "work".into(), start_ns: lo.min(t), end_ns: t });
                    start = lo.min(t);
                    break;
                }
            }
        }
        let mut work_ns = vec![0i64; stages.len()];
        for h in hops.iter().filter(|h| h.what == "work") {
            if let Some(w) = work_ns.get_mut(h.stage as usize) {
                *w += h.end_ns - h.start_ns;
            }
        }
        out.push(PipePath { step, start_ns: start, end_ns: end, hops, work_ns });
    }
    out
}

/// The intervals of every rank's point-to-point exchanges (rank clock): time a stage spends in
/// them is waiting for its neighbour, not a transfer to overlap.
pub fn p2p_intervals(insts: &[Instance]) -> Vec<Iv> {
    insts.iter().filter(|x| x.p2p).map(|x| (x.start_ns, x.end_ns)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(kind: CollKind, peer: Option<u32>, start: i64, end: i64) -> Instance {
        Instance {
            event: EventIdx(start as u32),
            kind,
            pg: String::new(),
            seq: None,
            start_ns: start,
            end_ns: end,
            step: 1,
            bytes: Some(64),
            group_size: None,
            issued_ns: start,
            lane: 0,
            tid: None,
            p2p: true,
            peer,
            peer_in_group: false,
            tag: None,
            batch: Vec::new(),
            from_autograd: false,
        }
    }

    /// Three stages without peers in the trace: the neighbours in rank order are inferred, the
    /// chain runs 0 → 1 → 2 (rank 0's first exchange is a send), two forwards before the
    /// backwards make GPipe.
    #[test]
    fn peers_are_inferred_along_rank_order() {
        use CollKind::{Recv, Send};
        let insts = vec![
            vec![
                inst(Send, None, 0, 50),
                inst(Send, None, 10, 60),
                inst(Recv, None, 100, 120),
                inst(Recv, None, 130, 150),
            ],
            vec![
                inst(Recv, None, 0, 5),
                inst(Send, None, 6, 40),
                inst(Recv, None, 10, 15),
                inst(Send, None, 16, 45),
                inst(Recv, None, 80, 90),
                inst(Send, None, 95, 100),
                inst(Recv, None, 110, 120),
                inst(Send, None, 125, 130),
            ],
            vec![
                inst(Recv, None, 7, 30),
                inst(Recv, None, 17, 35),
                inst(Send, None, 70, 80),
                inst(Send, None, 100, 110),
            ],
        ];
        let pipes: Vec<RankPipe> = (0..3)
            .map(|_| RankPipe {
                steps: vec![StageStepPart { step: 1, span_ns: 200, compute_ns: 50, ..Default::default() }],
            })
            .collect();
        let refs: Vec<&RankPipe> = pipes.iter().collect();
        let Some(r) = report(&[0, 1, 2], &insts, &refs, &[]) else { panic!("no pipeline") };
        assert_eq!(r.stages, [0, 1, 2]);
        assert_eq!(r.micro_batches, Some(2));
        assert_eq!(r.schedule, Schedule::Gpipe);
        let links: Vec<(u32, u32, usize, usize)> =
            r.links.iter().map(|l| (l.src, l.dst, l.matched, l.peers_inferred)).collect();
        assert_eq!(links, [(0, 1, 2, 2), (1, 0, 2, 2), (1, 2, 2, 2), (2, 1, 2, 2)]);
        assert!((r.theory_bubble_share.unwrap_or(f64::NAN) - 2.0 / 4.0).abs() < 1e-9);
        assert_eq!(r.per_stage[0].bubble_ns, 150);
    }

    /// Blocks beyond the cap merge with their closest neighbour of the same kind first; kinds
    /// mix (as `compute`) only when the same-kind merges cannot reach the cap.
    #[test]
    fn coarsen_merges_the_closest_neighbours() {
        let b = |kind, start_ns, end_ns| PipeBlock { kind, start_ns, end_ns };
        use BlockKind::{Backward as B, Compute as C, Forward as F};
        let v = vec![b(F, 0, 10), b(F, 11, 20), b(F, 30, 40), b(B, 41, 50), b(B, 60, 70)];
        assert_eq!(coarsen(v.clone(), 5), v);
        assert_eq!(coarsen(v.clone(), 4), [b(F, 0, 20), b(F, 30, 40), b(B, 41, 50), b(B, 60, 70)]);
        assert_eq!(coarsen(v.clone(), 2), [b(F, 0, 40), b(B, 41, 70)]);
        assert_eq!(coarsen(v, 1), [b(C, 0, 70)]);
        assert_eq!(coarsen(Vec::new(), 0), []);
    }

    /// `batch_isend_irecv` between two ranks (an NCCL group: one SendRecv kernel each side) is
    /// one exchange, counted once.
    #[test]
    fn a_batch_is_one_exchange() {
        let batch = |peer: u32, start: i64| Instance {
            kind: CollKind::SendRecv,
            batch: vec![(CollKind::Send, Some(peer)), (CollKind::Recv, Some(peer))],
            ..inst(CollKind::SendRecv, None, start, start + 10)
        };
        let insts = vec![vec![batch(1, 0), batch(1, 50)], vec![batch(0, 2), batch(0, 52)]];
        let (pairs, links) = match_p2p(&[0, 1], &insts);
        assert_eq!(pairs.len(), 2);
        let l: Vec<(u32, u32, usize, usize, usize, usize)> = links
            .iter()
            .map(|l| (l.src, l.dst, l.matched, l.batched, l.unmatched_sends, l.unmatched_recvs))
            .collect();
        assert_eq!(l, [(0, 1, 2, 2, 0, 0)]);
    }
}
