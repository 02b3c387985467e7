//! The engine's input ([`RankSeq`], [`CollRecord`], [`SeqOptions`]) and output
//! ([`SequenceReport`]) types; the rules are in the module above.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::CollKind;

/// NCCL's default process-group timeout (10 min).
pub const NCCL_DEFAULT_TIMEOUT_MS: i64 = 10 * 60 * 1000;
/// gloo's default process-group timeout (30 min).
pub const GLOO_DEFAULT_TIMEOUT_MS: i64 = 30 * 60 * 1000;
/// A wait of at least this share of the timeout is near it.
pub const NEAR_TIMEOUT_SHARE: f64 = 0.8;
/// At most this many diverging positions are listed per group (all are counted).
pub const MAX_LISTED: usize = 8;

/// Where a rank's sequence came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Trace,
    FlightRecorder,
}

/// The communication backend, from the op names (`nccl:*`, `gloo:*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    Nccl,
    Gloo,
    Other,
    #[default]
    Unknown,
}

impl Backend {
    /// The backend a name like `nccl:all_reduce` or `gloo:broadcast` is from.
    pub fn of_name(name: &str) -> Backend {
        let n = name.to_ascii_lowercase();
        if n.starts_with("nccl") || n.starts_with("rccl") || n.contains("nccl") {
            Backend::Nccl
        } else if n.starts_with("gloo") {
            Backend::Gloo
        } else if n.contains(':') {
            Backend::Other
        } else {
            Backend::Unknown
        }
    }

    /// The backend's default process-group timeout.
    pub fn default_timeout_ms(self) -> Option<i64> {
        match self {
            Backend::Nccl => Some(NCCL_DEFAULT_TIMEOUT_MS),
            Backend::Gloo => Some(GLOO_DEFAULT_TIMEOUT_MS),
            _ => None,
        }
    }
}

/// A record's state as its source tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Scheduled,
    Started,
    Completed,
    #[default]
    Unknown,
}

/// One stack frame (innermost first in a record's list).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct Frame {
    pub name: String,
    pub filename: String,
    pub line: i64,
}

impl Frame {
    /// A frame of the user's code rather than of torch itself (Python's
    /// `torch/distributed/*.py`, C++ symbols of libtorch, the interpreter's `<frozen …>`).
    pub fn is_user(&self) -> bool {
        let f = &self.filename;
        let n = &self.name;
        !(f.is_empty()
            || f.starts_with('<')
            || f.contains("/torch/")
            || f.contains("\\torch\\")
            || f.ends_with(".cpp")
            || f.ends_with(".h")
            || f.ends_with(".hpp")
            || f.ends_with(".so")
            || n.starts_with("c10::")
            || n.starts_with("torch::")
            || n.starts_with("at::"))
    }

    /// A frame that only forwards to the collective: a function named like a
    /// `torch.distributed` call (`all_reduce`, `broadcast`, `isend`, ...) or torch's `wrapper`.
    /// `loss_allreduce` is not one.
    pub fn is_forwarder(&self) -> bool {
        let n: String = self.name.chars().filter(|c| *c != '_').collect::<String>().to_ascii_lowercase();
        const API: &[&str] = &[
            "allreduce",
            "allreducecoalesced",
            "allgather",
            "allgatherintotensor",
            "allgatherbase",
            "allgathercoalesced",
            "allgatherobject",
            "reducescatter",
            "reducescattertensor",
            "reducescatterbase",
            "broadcast",
            "broadcastobjectlist",
            "barrier",
            "monitoredbarrier",
            "alltoall",
            "alltoallsingle",
            "send",
            "recv",
            "isend",
            "irecv",
            "batchisendirecv",
            "reduce",
            "gather",
            "scatter",
            "wrapper",
        ];
        API.contains(&n.as_str())
    }
}

/// One collective as one rank issued it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollRecord {
    /// Process group name (the same on every rank), `""` when unknown.
    pub pg: String,
    /// The group's description (`default_pg`, `undefined`), `""` when unknown.
    #[serde(default)]
    pub pg_desc: String,
    pub kind: CollKind,
    /// The op's name as written (`nccl:all_reduce`, `gloo:broadcast`).
    #[serde(default)]
    pub name: String,
    /// Sequence number in the group (`collective_seq_id`, `Seq`); `None` to align by ordinal.
    pub seq: Option<i64>,
    #[serde(default)]
    pub p2p_seq: Option<i64>,
    /// A point-to-point op (send / recv); left out of the group alignment.
    #[serde(default)]
    pub p2p: bool,
    /// Shapes of the input tensors (`[[8, 16]]`; `[[]]` is one scalar; `[]` unknown).
    #[serde(default)]
    pub in_sizes: Vec<Vec<i64>>,
    #[serde(default)]
    pub in_dtypes: Vec<String>,
    #[serde(default)]
    pub out_sizes: Vec<Vec<i64>>,
    #[serde(default)]
    pub out_dtypes: Vec<String>,
    /// Message size in bytes when known (else computed from the input shapes and dtypes).
    pub bytes: Option<i64>,
    #[serde(default)]
    pub state: State,
    /// When the rank entered it (Flight Recorder: `time_created_ns`, the enqueue).
    pub start_ns: Option<i64>,
    /// When it ended on the rank, if it did (or when it was seen completed).
    pub end_ns: Option<i64>,
    pub step: Option<u32>,
    /// The enclosing annotation or user function (`loss_allreduce`).
    pub label: Option<String>,
    #[serde(default)]
    pub frames: Vec<Frame>,
    /// The group's timeout as the record states it (Flight Recorder `timeout_ms`).
    #[serde(default)]
    pub timeout_ms: Option<i64>,
}

impl Default for CollRecord {
    fn default() -> Self {
        CollRecord {
            pg: String::new(),
            pg_desc: String::new(),
            kind: CollKind::Unknown,
            name: String::new(),
            seq: None,
            p2p_seq: None,
            p2p: false,
            in_sizes: Vec::new(),
            in_dtypes: Vec::new(),
            out_sizes: Vec::new(),
            out_dtypes: Vec::new(),
            bytes: None,
            state: State::Unknown,
            start_ns: None,
            end_ns: None,
            step: None,
            label: None,
            frames: Vec::new(),
            timeout_ms: None,
        }
    }
}

impl CollRecord {
    /// A record from the fields a trace has.
    #[allow(clippy::too_many_arguments)]
    pub fn basic(
        pg: &str,
        kind: CollKind,
        seq: Option<i64>,
        bytes: Option<i64>,
        start_ns: Option<i64>,
        end_ns: Option<i64>,
        step: Option<u32>,
        label: Option<&str>,
    ) -> CollRecord {
        CollRecord {
            pg: pg.to_string(),
            kind,
            seq,
            bytes,
            start_ns,
            end_ns,
            step,
            label: label.map(str::to_string),
            p2p: matches!(kind, CollKind::Send | CollKind::Recv | CollKind::SendRecv),
            ..CollRecord::default()
        }
    }

    /// A point-to-point op (flagged, or of a send / recv kind).
    pub fn is_p2p(&self) -> bool {
        self.p2p || matches!(self.kind, CollKind::Send | CollKind::Recv | CollKind::SendRecv)
    }

    /// Bytes of the message: given, or the first input's elements × its dtype size.
    pub fn message_bytes(&self) -> Option<i64> {
        self.bytes.or_else(|| {
            let mut total = 0i64;
            for (i, shape) in self.in_sizes.iter().enumerate() {
                let n = shape.iter().try_fold(1i64, |a, &d| a.checked_mul(d.max(0)))?;
                let dt = self.in_dtypes.get(i).or(self.in_dtypes.first())?;
                total = total.checked_add(n.checked_mul(crate::model::dtype_bytes(dt)?)?)?;
            }
            (!self.in_sizes.is_empty()).then_some(total)
        })
    }

    /// The first user frame (not torch's own, not a wrapper named like the call).
    pub fn user_frame(&self) -> Option<&Frame> {
        user_frame(&self.frames)
    }
}

/// The first frame of the user's code that is not a mere forwarder ([`Frame::is_forwarder`]);
/// the first user frame when all are.
pub fn user_frame(frames: &[Frame]) -> Option<&Frame> {
    frames.iter().find(|f| f.is_user() && !f.is_forwarder()).or_else(|| frames.iter().find(|f| f.is_user()))
}

/// One rank's collectives, in issue order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankSeq {
    pub rank: u32,
    pub source: Source,
    #[serde(default)]
    pub backend: Backend,
    /// The file it came from, for messages.
    #[serde(default)]
    pub file: String,
    pub records: Vec<CollRecord>,
}

/// What the caller knows beyond the records.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeqOptions {
    /// Every rank the job should have (e.g. `0..world_size`); ranks without a sequence are
    /// reported as missing.
    pub world: Vec<u32>,
    /// The group that holds every rank of `world` (the default group), when known.
    pub world_group: Option<String>,
    /// Known members of groups (beyond the ranks that have records in them).
    pub groups: BTreeMap<String, Vec<u32>>,
    /// A process-group timeout the user or the data gave.
    pub timeout_ms: Option<i64>,
}

/// How a group's positions were decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Alignment {
    SeqId,
    Ordinal,
}

/// How a "last completed" was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompletedBasis {
    /// From the record's own state.
    State,
    /// From the sequences (see rule 6).
    Inferred,
}

/// Where a timeout came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutSource {
    Dump,
    Given,
    Observed,
    BackendDefault,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeout {
    pub ms: i64,
    pub source: TimeoutSource,
}

/// A record as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordRef {
    pub rank: u32,
    pub pg: String,
    pub pg_desc: String,
    /// Its position in the group (sequence number or ordinal).
    pub position: i64,
    pub kind: CollKind,
    pub name: String,
    pub in_sizes: Vec<Vec<i64>>,
    pub in_dtypes: Vec<String>,
    pub out_sizes: Vec<Vec<i64>>,
    pub bytes: Option<i64>,
    pub state: State,
    pub start_ns: Option<i64>,
    pub end_ns: Option<i64>,
    pub step: Option<u32>,
    /// 1-based ordinal among the rank's records of this group in the same step.
    pub step_ordinal: Option<u32>,
    pub label: Option<String>,
    /// Up to 8 frames, innermost first.
    pub frames: Vec<Frame>,
}

/// Why a position diverges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DivergenceClass {
    /// Some members' records end before it: they never issued it (the others wait).
    NotIssued,
    /// Some members skipped it and went on (a hole in their sequence).
    Skipped,
    /// The members issued different collectives (kind, shape, dtype or size).
    Mismatch,
}

crate::named_enum! {
    /// A field that differs between records at one position.
    pub enum Field {
        Kind => "kind",
        Shape => "shape",
        Dtype => "dtype",
        Size => "size",
        Origin => "origin",
    }
}

/// Why a member has no record at a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissingReason {
    /// Its records in the group end before this position.
    Ended,
    /// It issued later records in the group but not this one.
    Skipped,
}

/// A rank that issued a diverging record, and how long it waited in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wait {
    pub rank: u32,
    pub since_ns: Option<i64>,
    /// End − start when the end is known.
    pub waited_ns: Option<i64>,
    pub near_timeout: bool,
}

/// Ranks that issued the same record at a diverging position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    pub ranks: Vec<u32>,
    /// The record of the lowest rank of the side.
    pub record: RecordRef,
    pub waits: Vec<Wait>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Missing {
    pub rank: u32,
    pub reason: MissingReason,
    /// Its last record in the group before this position.
    pub last: Option<RecordRef>,
    /// Its next record in the group after this position (when it skipped).
    pub next: Option<RecordRef>,
}

/// A rank whose sequence is shifted against the majority's at a mismatch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shift {
    pub rank: u32,
    /// Positive: it skipped this many of the majority's collectives (listed); negative: it
    /// issued this many extra ones (listed).
    pub by: i64,
    pub records: Vec<RecordRef>,
    pub basis: ShiftBasis,
}

/// What shows a shift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShiftBasis {
    /// The rank's next records equal the majority's from a later position.
    Records,
    /// The rank's record is in a later step than the majority's (it skipped the rest of their
    /// step), or an earlier one (the others skipped the rest of its step): no records needed.
    Step,
}

/// A position where the members do not agree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    pub pg: String,
    pub pg_desc: String,
    pub position: i64,
    pub class: DivergenceClass,
    /// Fields that differ between the sides (mismatch only).
    pub fields: Vec<Field>,
    /// Ranks by the record they issued, the largest side first.
    pub sides: Vec<Side>,
    pub missing: Vec<Missing>,
    /// Members whose window starts after this position (nothing known).
    pub unknown: Vec<u32>,
    pub shifts: Vec<Shift>,
    pub timeout: Option<Timeout>,
    /// Who waits for whom: the ranks that issued a record here (at a mismatch: the largest
    /// side) wait for `waited_for`, the ranks that did not issue it (at a mismatch: also the
    /// other sides).
    pub waiting: Vec<u32>,
    pub waited_for: Vec<u32>,
}

/// One rank in one group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupRank {
    pub rank: u32,
    pub records: u32,
    pub first_position: Option<i64>,
    pub last_entered: Option<RecordRef>,
    pub last_completed: Option<RecordRef>,
    pub completed_basis: CompletedBasis,
    pub p2p_records: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupReport {
    pub pg: String,
    pub pg_desc: String,
    pub members: Vec<u32>,
    pub aligned_by: Alignment,
    pub positions: u32,
    pub ranks: Vec<GroupRank>,
    /// The first diverging positions (at most [`MAX_LISTED`]); the first is the cause.
    pub divergences: Vec<Divergence>,
    pub diverging_positions: u32,
    /// Members that issued no collective in the group (but have input).
    pub silent: Vec<u32>,
    /// Members without input (no dump / trace).
    pub no_input: Vec<u32>,
    pub timeout: Option<Timeout>,
    /// Records outside the divergences that lasted at least 80% of the timeout (at most
    /// [`MAX_LISTED`]).
    pub near_timeout: Vec<RecordRef>,
}

/// One rank over all groups.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankSummary {
    pub rank: u32,
    pub source: Option<Source>,
    pub backend: Backend,
    pub file: String,
    pub records: u32,
    /// Expected, but no sequence was given (no dump or trace).
    pub no_input: bool,
    /// Its window ends before another member's in some group.
    pub ends_early: bool,
    pub last_entered: Option<RecordRef>,
    pub last_completed: Option<RecordRef>,
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagnosisKind {
    /// Some ranks wait in a collective others never issued (or skipped).
    Hang,
    /// The ranks issued different collectives at one position.
    Mismatch,
    /// An expected rank has no dump / trace.
    NoInput,
    /// A rank's records end before the others'.
    EndsEarly,
    /// A collective lasted close to the process-group timeout.
    NearTimeout,
}

/// What the sequence engine concluded about one group: a measurement of the sequences (which
/// ranks, which position, how long they waited), not a finding. The analysis presents a hang or
/// mismatch as the one [`crate::finding::Finding`] (`collective_mismatch`,
/// `diagnose/causes/collective_mismatch.rs`); the Flight Recorder report lists the diagnoses as
/// they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    pub kind: DiagnosisKind,
    pub pg: Option<String>,
    pub position: Option<i64>,
    /// The ranks the diagnosis is about (the ones to look at).
    pub ranks: Vec<u32>,
    pub sentence: String,
    /// Where no position of a group tells (a stuck collective every rank issued alike): the
    /// steps it stopped and how long the ranks waited in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_ns: Option<i64>,
}

/// The engine's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequenceReport {
    pub sources: Vec<Source>,
    pub ranks: Vec<RankSummary>,
    pub groups: Vec<GroupReport>,
    /// Most important first; empty when the sequences agree.
    pub diagnoses: Vec<Diagnosis>,
    pub notes: Vec<String>,
}

impl SequenceReport {
    /// The first divergence of the first group that has one, by the diagnosis order.
    pub fn first_divergence(&self) -> Option<&Divergence> {
        let d = self
            .diagnoses
            .iter()
            .find(|d| matches!(d.kind, DiagnosisKind::Hang | DiagnosisKind::Mismatch))?;
        let g = self.groups.iter().find(|g| Some(&g.pg) == d.pg.as_ref())?;
        g.divergences.first()
    }
}
