//! Collective instances: on each rank, the events that *are* a collective's execution, with
//! their message size, and their matching across ranks.
//!
//! - GPU ranks: communication kernels on GPU streams (`ncclKernel_*`, `ncclDevKernel_*`, RCCL).
//! - CPU-only ranks: the backend's own spans (`gloo:*`, `nccl:*`, `mpi:*`, `ucc:*`) that are not
//!   nested in another; without those, every top-level communication event.
//!
//! Message size, in order: the kernel's own args (`In msg nelems` × dtype size, or `In msg size`);
//! the CPU communication op with the same `External id`; the communication op enclosing the
//! launch on the host thread (e.g. `nccl:all_reduce` with `Input Dims` and `Input type`).
//!
//! **Point-to-point** (`p2p`): sends, recvs and batches of them (`batch_isend_irecv`, an NCCL
//! group: `nccl:coalesced`) are exchanges between two ranks, not collectives: they are matched
//! send → recv by [`super::pipeline`] and kept out of the collectives' matching below. An instance is
//! point-to-point when its kind is send, recv or send/recv (NCCL's `ncclDevKernel_SendRecv`
//! whose enclosing op does not say all_to_all, gather or scatter) and it is not nested in a
//! collective op (`TORCH_DISTRIBUTED_DEBUG=DETAIL` runs its checks as `gloo:send` / `gloo:recv`
//! inside `c10d::allreduce_`: those belong to the collective). Its peer (the global rank at the
//! other end), in order: `Dst Rank` / `Src Rank` of `record_param_comms` (global); the peer in
//! the `Concrete Inputs` of the `c10d::send` / `c10d::recv_` that enqueued it (gloo: paired with
//! the backend span by order per direction), or in PGNCCL's profiling title (`nccl:send 0->1`,
//! `nccl:recv 1<-0`), both ranks in the op's process group, mapped to global ranks through the
//! group's ranks (`Process Group Ranks`, `distributedInfo.pg_config`; a group that is not known
//! is taken as the default group). Without any of those the peer stays unknown and
//! [`super::pipeline`] infers it from the pipeline's structure.
//!
//! Matching across ranks: by (process group, `Seq`) where the trace has sequence numbers;
//! otherwise by (process group, collective kind, step, ordinal within the step); without step
//! markers by whole-trace ordinal, trying small ordinal shifts per rank and keeping one only
//! when it is clearly more consistent (profiling windows do not always start at the same
//! collective on every rank).
//!
//! By concern: [`rank`] finds one rank's instances with their kind, size and issuer; [`p2p`]
//! reads the host side of point-to-point exchanges (peers, enqueue ops, batches); [`matching`]
//! matches the collectives across ranks.

mod matching;
mod p2p;
mod rank;

use serde::{Deserialize, Serialize};

use crate::model::*;

pub use matching::{group_members, is_partial, match_instances, MatchInfo, MatchMethod, Matched};
pub(crate) use p2p::parse_ranks;
pub use rank::rank_instances;

/// One collective as executed on one rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    pub event: EventIdx,
    pub kind: CollKind,
    /// Process group name, or empty when unknown.
    pub pg: String,
    pub seq: Option<i64>,
    pub start_ns: i64,
    pub end_ns: i64,
    pub step: u32,
    /// Message size in bytes (the input buffer), when it can be told.
    pub bytes: Option<i64>,
    pub group_size: Option<i64>,
    /// When the host issued it (rank clock): the launch call of a GPU kernel, the `c10d::*`
    /// op that enqueued a backend span, else its start. Where in the step it comes from.
    #[serde(default)]
    pub issued_ns: i64,
    /// The lane (thread or stream) it ran on: a backend runs each process group on lanes of
    /// its own (gloo: worker threads per group; NCCL: a stream per communicator).
    #[serde(default)]
    pub lane: u32,
    /// The lane's thread id as the trace writes it (an integer), when it is one: a backend
    /// creates a process group's threads one after the other ([`super::layout`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<i64>,
    /// A point-to-point exchange (see the module doc), not a collective.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub p2p: bool,
    /// Point-to-point: the global rank at the other end (a send's destination, a recv's
    /// source), when the trace says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<u32>,
    /// The peer is its index in the exchange's process group, which the rank's trace does not
    /// name (gloo's `c10d::send` / `c10d::recv_` say the group's rank): the job's layout maps
    /// it to the global rank once the group is known ([`super::layout`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub peer_in_group: bool,
    /// Point-to-point: the tag (`c10d::send` / `c10d::recv_`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<i64>,
    /// A batch of sends and recvs run as one exchange (`batch_isend_irecv`, `nccl:coalesced`):
    /// its members' direction (`Send` / `Recv`) and peer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batch: Vec<(CollKind, Option<u32>)>,
    /// Issued from inside an autograd function (`autograd::engine::evaluate_function: …` open
    /// on the issuing thread): a gradient hook's call, DDP's bucket all_reduce from
    /// `AccumulateGrad`, FSDP's post-backward reduce-scatter. Gradient communication, whatever
    /// its size (a trace recorded without `record_shapes` has none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_autograd: bool,
}

/// Whether `kind` is a point-to-point kind.
pub fn is_p2p_kind(kind: CollKind) -> bool {
    matches!(kind, CollKind::Send | CollKind::Recv | CollKind::SendRecv)
}
