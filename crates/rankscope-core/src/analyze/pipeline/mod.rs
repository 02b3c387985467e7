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
//!
//! The code follows the two halves: [`rank`] computes one rank's figures per step where its
//! tables live; [`p2p`] matches the exchanges across ranks and finds the stage chain; [`report`]
//! puts the job's pipeline together (stages, schedule, theory, critical paths).

pub(crate) mod p2p;
mod rank;
mod report;

use serde::{Deserialize, Serialize};

pub use rank::rank_pipe;
pub use report::{critical_paths, p2p_intervals, report};

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
