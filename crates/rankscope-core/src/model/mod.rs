//! The columnar model of one rank's trace.
//!
//! One row per event in parallel vectors ([`EventTable`]), sparse side tables for the few events
//! that carry arguments the analyses need ([`CommArgs`]), lanes for CPU threads and GPU streams
//! ([`LaneTable`]), flows, counters and the file's metadata. All strings live in one
//! [`StringTable`]; indices are typed `u32`s so native and wasm32 tables have the same size.

pub mod diag;
mod integrity;
mod phase;
pub mod raw_args;
pub mod severity;
pub mod shaped;
pub mod strings;

use serde::Serialize;

pub use diag::{DiagKind, Diagnostic, Diagnostics, Severity};
pub use phase::Phase;
pub use raw_args::RawArgs;
pub use shaped::ShapedOp;
pub use strings::{FxHashMap, StrId, StringTable};

/// Marker for "no value" in `u32` index columns.
pub const NONE_U32: u32 = u32::MAX;
/// Marker for "no value" in `u64` id columns (correlation, External id).
pub const NONE_U64: u64 = u64::MAX;

/// Index of a lane (a CPU thread or a GPU stream) within one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct LaneId(pub u32);

/// Index of a row in an [`EventTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct EventIdx(pub u32);

/// What an event row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum EventKind {
    /// A duration event: `X`, or a `B`/`E` pair.
    Slice = 0,
    /// An instant event (`i` / `I`).
    Instant = 1,
}

/// What an event does, decided by the classification rules (see [`crate::normalize::classify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Class {
    /// Kernels and CPU operators doing model math.
    Compute = 0,
    /// Collectives and point-to-point transfers: NCCL/RCCL/HCCL kernels, `nccl:*` / `gloo:*`
    /// annotations, `c10d::*` ops, `record_param_comms`.
    Communication = 1,
    /// Memory copies and sets (GPU side) and the runtime calls that issue them.
    Memory = 2,
    /// Host waits for the device: stream/device/event synchronization.
    Sync = 3,
    /// Runtime and driver calls that launch work (`cudaLaunchKernel`, ...).
    Launch = 4,
    /// Data loading (`DataLoader` iteration).
    DataLoading = 5,
    /// Optimizer step annotations.
    Optimizer = 6,
    /// Markers and annotations that contain other work (`ProfilerStep#N`, module names).
    Annotation = 7,
    /// Memory allocation calls (`cudaMalloc`, `cudaFree`, `hipMalloc`...).
    Allocation = 8,
    /// Anything else.
    Other = 9,
}

impl Class {
    pub const ALL: [Class; 10] = [
        Class::Compute,
        Class::Communication,
        Class::Memory,
        Class::Sync,
        Class::Launch,
        Class::DataLoading,
        Class::Optimizer,
        Class::Annotation,
        Class::Allocation,
        Class::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Compute => "compute",
            Class::Communication => "communication",
            Class::Memory => "memory",
            Class::Sync => "sync",
            Class::Launch => "launch",
            Class::DataLoading => "data_loading",
            Class::Optimizer => "optimizer",
            Class::Annotation => "annotation",
            Class::Allocation => "allocation",
            Class::Other => "other",
        }
    }
}

/// Bytes per element of a dtype, as Kineto spells it in a collective's arguments (`Float`,
/// `c10::BFloat16`, `Float8_e4m3fn`) or nccl-tests in its `type` column (`float`, `bfloat16`,
/// `half`, `f8e4m3`): one table for traces and nccl-tests alike. Case and a `c10::` style path
/// are ignored; none for a name that is not a dtype (`Scalar`).
pub fn dtype_bytes(dtype: &str) -> Option<i64> {
    let d = dtype.trim().to_ascii_lowercase();
    let d = d.rsplit("::").next().unwrap_or(&d);
    Some(match d {
        "float" | "float32" | "f32" | "int" | "int32" | "i32" | "uint32" | "complexhalf" => 4,
        "double" | "float64" | "f64" | "long" | "int64" | "i64" | "uint64" | "complexfloat" => 8,
        "half" | "float16" | "f16" | "fp16" | "bfloat16" | "bf16" | "short" | "int16" | "uint16" => 2,
        "byte" | "char" | "bool" | "int8" | "uint8" | "i8" | "u8" | "float8_e4m3fn" | "float8_e5m2"
        | "float8_e4m3fnuz" | "float8_e5m2fnuz" | "f8e4m3" | "f8e5m2" | "fp8_e4m3" | "fp8_e5m2" => 1,
        "complexdouble" => 16,
        _ => return None,
    })
}

/// The kind of a collective (or point-to-point) operation: one enum for the traces and for
/// nccl-tests, which names some kinds its own way ([`CollKind::nccl_tests_name`]; its JSON
/// keeps them through [`nccl_tests_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum CollKind {
    Unknown = 0,
    AllReduce = 1,
    AllGather = 2,
    ReduceScatter = 3,
    AllToAll = 4,
    Broadcast = 5,
    Reduce = 6,
    SendRecv = 7,
    Send = 8,
    Recv = 9,
    Barrier = 10,
    Gather = 11,
    Scatter = 12,
    /// nccl-tests' `hypercube_perf`, an all_gather pattern of its own; never in a trace.
    Hypercube = 13,
}

impl CollKind {
    /// nccl-tests' bus-bandwidth factor over `n` ranks (busbw = algbw × factor), the one table
    /// every part of rankscope uses (nccl-tests' `doc/PERFORMANCE.md` and each test's `getBw`):
    /// all_reduce `2(n−1)/n`; all_gather, reduce_scatter, all_to_all, gather, scatter `(n−1)/n`;
    /// the rest `1`. With `n = 1` the `(n−1)/n` factors are 0, as nccl-tests reports them.
    pub fn busbw_factor(self, n: i64) -> f64 {
        let n = n.max(1) as f64;
        match self {
            CollKind::AllReduce => 2.0 * (n - 1.0) / n,
            CollKind::AllGather
            | CollKind::ReduceScatter
            | CollKind::AllToAll
            | CollKind::Gather
            | CollKind::Scatter
            | CollKind::Hypercube => (n - 1.0) / n,
            _ => 1.0,
        }
    }

    /// A point-to-point kind (send, recv, send/recv): it pairs two ranks, not a group.
    pub fn is_p2p(self) -> bool {
        matches!(self, CollKind::Send | CollKind::Recv | CollKind::SendRecv)
    }

    pub fn name(self) -> &'static str {
        match self {
            CollKind::Unknown => "unknown",
            CollKind::AllReduce => "all_reduce",
            CollKind::AllGather => "all_gather",
            CollKind::ReduceScatter => "reduce_scatter",
            CollKind::AllToAll => "all_to_all",
            CollKind::Broadcast => "broadcast",
            CollKind::Reduce => "reduce",
            CollKind::SendRecv => "send_recv",
            CollKind::Send => "send",
            CollKind::Recv => "recv",
            CollKind::Barrier => "barrier",
            CollKind::Gather => "gather",
            CollKind::Scatter => "scatter",
            CollKind::Hypercube => "hypercube",
        }
    }

    /// The kinds nccl-tests measures, in a fixed order.
    pub const NCCL_TESTS: [CollKind; 10] = [
        CollKind::AllReduce,
        CollKind::AllGather,
        CollKind::ReduceScatter,
        CollKind::AllToAll,
        CollKind::SendRecv,
        CollKind::Broadcast,
        CollKind::Reduce,
        CollKind::Gather,
        CollKind::Scatter,
        CollKind::Hypercube,
    ];

    /// The nccl-tests name without `_perf` (`all_reduce`, `alltoall`, `sendrecv`, ...); none
    /// for a kind no test measures.
    pub fn nccl_tests_name(self) -> Option<&'static str> {
        Some(match self {
            CollKind::AllToAll => "alltoall",
            CollKind::SendRecv => "sendrecv",
            CollKind::Unknown | CollKind::Send | CollKind::Recv | CollKind::Barrier => return None,
            k => k.name(),
        })
    }

    /// From an nccl-tests binary or test name: `all_reduce_perf`, `./build/all_gather_perf`,
    /// `alltoall`, `sendrecv_perf_mpi`.
    pub fn from_nccl_tests(s: &str) -> Option<CollKind> {
        let base = s.rsplit('/').next().unwrap_or(s);
        let base = base.strip_suffix("_mpi").unwrap_or(base);
        let base = base.strip_suffix("_perf").unwrap_or(base);
        CollKind::NCCL_TESTS.into_iter().find(|c| c.nccl_tests_name() == Some(base))
    }

    /// The nccl-tests test that measures a trace's collective of this kind (a send or a recv:
    /// `sendrecv`); none for a barrier or an unknown kind.
    pub fn nccl_test(self) -> Option<CollKind> {
        match self {
            CollKind::Send | CollKind::Recv => Some(CollKind::SendRecv),
            k => k.nccl_tests_name().map(|_| k),
        }
    }

    fn from_u8(v: u8) -> CollKind {
        use CollKind::*;
        [
            Unknown,
            AllReduce,
            AllGather,
            ReduceScatter,
            AllToAll,
            Broadcast,
            Reduce,
            SendRecv,
            Send,
            Recv,
            Barrier,
            Gather,
            Scatter,
            Hypercube,
        ]
        .get(v as usize)
        .copied()
        .unwrap_or(Unknown)
    }
}

/// `#[serde(with = "crate::model::nccl_tests_kind")]`: an `Option<CollKind>` spelled as
/// nccl-tests names it (`alltoall`, `sendrecv`), as the nccl-tests report has always written it.
pub mod nccl_tests_kind {
    use super::CollKind;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<CollKind>, s: S) -> Result<S::Ok, S::Error> {
        match v.and_then(CollKind::nccl_tests_name) {
            Some(n) => s.serialize_some(n),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<CollKind>, D::Error> {
        let Some(n) = Option::<std::borrow::Cow<'de, str>>::deserialize(d)? else { return Ok(None) };
        CollKind::from_nccl_tests(&n)
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown nccl-tests collective `{n}`")))
    }
}

/// Direction of a memory operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum MemKind {
    Unknown = 0,
    HtoD = 1,
    DtoH = 2,
    DtoD = 3,
    PtoP = 4,
    HtoH = 5,
    Memset = 6,
}

impl MemKind {
    pub fn name(self) -> &'static str {
        match self {
            MemKind::Unknown => "unknown",
            MemKind::HtoD => "htod",
            MemKind::DtoH => "dtoh",
            MemKind::DtoD => "dtod",
            MemKind::PtoP => "ptop",
            MemKind::HtoH => "htoh",
            MemKind::Memset => "memset",
        }
    }

    fn from_u8(v: u8) -> MemKind {
        use MemKind::*;
        [Unknown, HtoD, DtoH, DtoD, PtoP, HtoH, Memset].get(v as usize).copied().unwrap_or(Unknown)
    }
}

/// The events of one rank, one row per event, as parallel columns.
///
/// After [`crate::normalize`] the rows are sorted by `(ts_ns, longer first)`, so a parent slice
/// precedes the slices it contains. Times are absolute nanoseconds: `baseTimeNanoseconds` plus
/// the event's `ts` (or the `ts` itself where the file has no base, as older Kineto files that
/// write epoch microseconds).
#[derive(Debug, Clone, Default)]
pub struct EventTable {
    pub kind: Vec<EventKind>,
    pub ts_ns: Vec<i64>,
    pub dur_ns: Vec<i64>,
    pub name: Vec<StrId>,
    pub cat: Vec<StrId>,
    pub lane: Vec<LaneId>,
    /// `args.correlation` (links a runtime call to the GPU work it launched), or [`NONE_U64`].
    pub correlation: Vec<u64>,
    /// `args["External id"]` (links GPU work and runtime calls to CPU operators), or [`NONE_U64`].
    pub external_id: Vec<u64>,
    /// Row in [`CommArgs`] of this event's communication arguments, or [`NONE_U32`].
    pub args: Vec<u32>,
    /// Filled by normalization.
    pub class: Vec<Class>,
    /// Filled by normalization: a [`CollKind`] for communication, a [`MemKind`] for memory.
    pub detail: Vec<u8>,
    /// Filled by normalization: the `ProfilerStep#N` number, or [`NONE_U32`].
    pub step: Vec<u32>,
}

impl EventTable {
    pub fn len(&self) -> usize {
        self.ts_ns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ts_ns.is_empty()
    }

    /// Bytes per row held by the columns (strings excluded).
    pub const BYTES_PER_ROW: usize = 1 + 8 + 8 + 4 + 4 + 4 + 8 + 8 + 4 + 1 + 1 + 4;

    /// End time of row `i`.
    pub fn end_ns(&self, i: usize) -> i64 {
        self.ts_ns[i].saturating_add(self.dur_ns[i])
    }

    pub fn coll_kind(&self, i: usize) -> CollKind {
        if self.class[i] == Class::Communication {
            CollKind::from_u8(self.detail[i])
        } else {
            CollKind::Unknown
        }
    }

    pub fn mem_kind(&self, i: usize) -> MemKind {
        if self.class[i] == Class::Memory {
            MemKind::from_u8(self.detail[i])
        } else {
            MemKind::Unknown
        }
    }

    /// Reorders every column by `perm` (row `k` of the result is old row `perm[k]`), the
    /// columns in two groups of about equal bytes over `j`.
    pub(crate) fn permute_with(&mut self, perm: &[u32], j: &impl crate::join::Join) {
        fn apply<T: Copy>(v: &mut Vec<T>, perm: &[u32]) {
            if v.len() == perm.len() {
                *v = perm.iter().map(|&i| v[i as usize]).collect();
            }
        }
        let EventTable {
            kind,
            ts_ns,
            dur_ns,
            name,
            cat,
            lane,
            correlation,
            external_id,
            args,
            class,
            detail,
            step,
        } = self;
        j.join(
            || {
                apply(ts_ns, perm);
                apply(dur_ns, perm);
                apply(correlation, perm);
            },
            || {
                apply(external_id, perm);
                apply(name, perm);
                apply(cat, perm);
                apply(lane, perm);
                apply(args, perm);
                apply(step, perm);
                apply(kind, perm);
                apply(class, perm);
                apply(detail, perm);
            },
        );
    }
}

/// Communication arguments of the few events that carry them (`record_param_comms`, NCCL
/// kernels in newer traces, `nccl:*` / `gloo:*` annotations with input shapes), and the input
/// shapes of the operators whose FLOPs are counted ([`ShapedOp`], `input_dims` alone).
/// Integer fields use `-1` for "absent".
#[derive(Debug, Clone, Default)]
pub struct CommArgs {
    pub event: Vec<EventIdx>,
    /// `Collective name` (e.g. `allreduce`, `_allgather_base`).
    pub collective: Vec<StrId>,
    pub in_nelems: Vec<i64>,
    pub out_nelems: Vec<i64>,
    /// `In msg size` / `Out msg size` in bytes where the trace has them.
    pub in_bytes: Vec<i64>,
    pub out_bytes: Vec<i64>,
    /// `dtype` (e.g. `Float`), or the first `Input type` of an annotation.
    pub dtype: Vec<StrId>,
    pub group_size: Vec<i64>,
    pub pg_name: Vec<StrId>,
    pub pg_desc: Vec<StrId>,
    /// `Process Group Ranks` as written (often a string such as `[0, 1]`, sometimes cut `...`).
    pub pg_ranks: Vec<StrId>,
    /// Per-process-group sequence number (`Seq`), when the trace has it.
    pub seq: Vec<i64>,
    /// Point-to-point ops: the sending and the receiving rank (`Src Rank` / `Dst Rank` of
    /// `record_param_comms`, global ranks), or the peer of `c10d::send` / `c10d::recv_` from
    /// their `Concrete Inputs` (its rank in the op's process group); -1 when absent.
    pub src_rank: Vec<i32>,
    pub dst_rank: Vec<i32>,
    /// The tag of `c10d::send` / `c10d::recv_` (`Concrete Inputs`), or -1.
    pub tag: Vec<i32>,
    /// Number of elements of the first input tensor from `Input Dims` (annotations without
    /// message sizes), or -1.
    pub input_elems: Vec<i64>,
    /// `Input Dims` as written, blanks left out (`[[64,512],[256,512],[256]]`), of the
    /// operators whose FLOPs are counted from shapes ([`ShapedOp`]), or empty. Only those keep a
    /// row for their dims alone: every operator recorded with shapes has `Input Dims`.
    pub input_dims: Vec<StrId>,
}

impl CommArgs {
    pub fn len(&self) -> usize {
        self.event.len()
    }

    pub fn is_empty(&self) -> bool {
        self.event.is_empty()
    }

    /// Bytes per row held by the columns.
    pub const BYTES_PER_ROW: usize = 4 + 4 + 8 * 4 + 4 + 8 + 4 * 3 + 8 + 4 * 3 + 8 + 4;
}

/// Whether a lane is a CPU thread or a GPU stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneKind {
    Cpu,
    Gpu,
}

/// A `pid` or `tid` as written: Kineto writes integers, the 2021 format strings (`"stream 7"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(untagged)]
pub enum IdKey {
    Int(i64),
    Str(StrId),
}

/// CPU threads and GPU streams of one rank.
#[derive(Debug, Clone, Default)]
pub struct LaneTable {
    pub pid: Vec<IdKey>,
    pub tid: Vec<IdKey>,
    pub kind: Vec<LaneKind>,
    /// `thread_name` metadata, or empty.
    pub name: Vec<StrId>,
    /// `thread_sort_index` metadata, or `i64::MAX`.
    pub sort_index: Vec<i64>,
    /// GPU lanes: the device index; CPU lanes: -1.
    pub device: Vec<i64>,
    /// GPU lanes: the stream id; CPU lanes: -1.
    pub stream: Vec<i64>,
    /// Number of event rows on the lane.
    pub events: Vec<u32>,
}

impl LaneTable {
    pub fn len(&self) -> usize {
        self.pid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pid.is_empty()
    }

    /// How lane `l` is named wherever it is shown (the app's timeline, the merged trace):
    /// `GPU d stream s`, else its `thread_name` (Kineto's already read `thread 123 (python)`),
    /// else `thread tid`.
    pub fn label(&self, l: usize, strings: &StringTable) -> String {
        if self.kind[l] == LaneKind::Gpu {
            return format!("GPU {} stream {}", self.device[l], self.stream[l]);
        }
        let name = strings.get(self.name[l]);
        if !name.is_empty() {
            return name.to_string();
        }
        match self.tid[l] {
            IdKey::Int(v) => format!("thread {v}"),
            IdKey::Str(s) => format!("thread {}", strings.get(s)),
        }
    }

    /// The order lanes are shown in: CPU threads first, by `thread_sort_index` then thread id
    /// (named ids last), then GPU streams by device and stream; first seen breaks ties.
    pub fn display_order(&self) -> Vec<usize> {
        let key = |l: usize| {
            if self.kind[l] == LaneKind::Gpu {
                (true, self.device[l], self.stream[l])
            } else {
                let tid = match self.tid[l] {
                    IdKey::Int(v) => v,
                    IdKey::Str(_) => i64::MAX,
                };
                (false, self.sort_index[l], tid)
            }
        };
        let mut order: Vec<usize> = (0..self.len()).collect();
        order.sort_by_key(|&l| (key(l), l));
        order
    }
}

/// Flow events (`s` / `t` / `f`): arrows between slices, e.g. a CUDA launch to its kernel.
#[derive(Debug, Clone, Default)]
pub struct FlowTable {
    pub id: Vec<u64>,
    pub phase: Vec<u8>,
    pub cat: Vec<StrId>,
    pub ts_ns: Vec<i64>,
    pub lane: Vec<LaneId>,
    /// `bp: "e"`: binds to the enclosing slice rather than the next one.
    pub bind_enclosing: Vec<bool>,
}

impl FlowTable {
    pub fn len(&self) -> usize {
        self.id.len()
    }
    pub fn is_empty(&self) -> bool {
        self.id.is_empty()
    }
}

/// Counter samples: one row per series value of a `C` event, and the caching allocator's
/// `[memory]` instants as the series of their arguments ([`MEMORY_EVENT`]: `Bytes`, and where
/// the trace has them `Total Allocated` / `Total Reserved`) on their device.
#[derive(Debug, Clone, Default)]
pub struct CounterTable {
    pub name: Vec<StrId>,
    pub series: Vec<StrId>,
    pub ts_ns: Vec<i64>,
    pub value: Vec<f64>,
    pub pid: Vec<IdKey>,
    /// A `[memory]` sample's device: the CUDA device index, [`HOST_MEMORY`] for the host's
    /// memory; [`HOST_MEMORY`] for a `C` event too.
    pub device: Vec<i32>,
}

/// The name of the caching allocator's instants (`profile_memory=True`).
pub const MEMORY_EVENT: &str = "[memory]";
/// [`CounterTable::device`] of host memory (and of `C` events, which have no device).
pub const HOST_MEMORY: i32 = -1;

impl CounterTable {
    pub fn len(&self) -> usize {
        self.name.len()
    }
    pub fn is_empty(&self) -> bool {
        self.name.is_empty()
    }
}

/// One process group from `distributedInfo.pg_config`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProcessGroup {
    pub name: String,
    pub desc: Option<String>,
    pub backend_config: Option<String>,
    pub size: Option<i64>,
    pub ranks: Vec<i64>,
}

/// `distributedInfo`: the rank's place in the job, as Kineto writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DistributedInfo {
    pub rank: Option<i64>,
    pub world_size: Option<i64>,
    pub backend: Option<String>,
    pub pg_count: Option<i64>,
    pub pg_config: Vec<ProcessGroup>,
    pub nccl_version: Option<String>,
}

/// One entry of `deviceProperties`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Device {
    pub id: i64,
    pub name: String,
    pub total_global_mem: Option<i64>,
    pub num_sms: Option<i64>,
    pub compute_capability: Option<String>,
}

/// What a part cut from a multi-rank file knows about where it came from
/// ([`crate::normalize::multirank`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct InFile {
    /// The rank the file gives this part (its process's name, or the assumption said in the
    /// part's diagnostics).
    pub rank: u32,
    /// The file it was cut from: its ranks share the file's clock.
    pub file: String,
    /// How many ranks the file held.
    pub ranks: u32,
    /// Whether the rank number is the file's word (a process named `rank N`) rather than an
    /// assumption from the pids.
    pub named: bool,
}

/// Top-level facts of the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TraceMeta {
    /// `"object"` (`{"traceEvents": [...]}`) or `"array"` (a bare event array).
    pub form: &'static str,
    pub gzip: bool,
    pub schema_version: Option<i64>,
    pub distributed: Option<DistributedInfo>,
    pub devices: Vec<Device>,
    /// `baseTimeNanoseconds`: absolute time = base + ts.
    pub base_time_ns: Option<i64>,
    pub display_time_unit: Option<String>,
    pub trace_name: Option<String>,
    pub host_name: Option<String>,
    /// `process_name` metadata by pid, sorted.
    pub process_names: Vec<(IdKey, String)>,
    /// `process_labels` metadata by pid, sorted.
    pub process_labels: Vec<(IdKey, String)>,
    /// Set on a rank cut from a file that holds several ([`crate::normalize::multirank`]): its
    /// rank there and the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_file: Option<InFile>,
}

/// Counts of what the file held, by `ph` and by category, as read (before any repair).
#[derive(Debug, Clone, Default)]
pub struct EventCounts {
    /// Every element of `traceEvents` that parsed as an object.
    pub total: u64,
    /// By phase letter (`X`, `B`, `M`, ...), including phases that are only counted.
    pub by_ph: std::collections::BTreeMap<String, u64>,
    /// By category, over `X`/`B`/`E`/`i`/`I` events; events without `cat` count under `""`.
    pub by_cat: std::collections::BTreeMap<String, u64>,
    /// Events whose args carry `Input Dims` (`record_shapes=True` writes it on every
    /// operator): the capture gap "sizes not recorded" when none does.
    pub with_input_dims: u64,
}

/// One rank's trace after ingest: tables, metadata, diagnostics.
#[derive(Debug, Clone, Default)]
pub struct RankTrace {
    /// The name the file was loaded as (for messages and rank-from-name).
    pub source: String,
    pub strings: StringTable,
    pub events: EventTable,
    pub comm: CommArgs,
    pub lanes: LaneTable,
    pub flows: FlowTable,
    pub counters: CounterTable,
    pub meta: TraceMeta,
    pub counts: EventCounts,
    pub diagnostics: Diagnostics,
    /// The source's `args` of every event row, when the parse was asked to keep them
    /// ([`crate::parse::FileIngest::keep_args`]; the exports' hand-off, [`raw_args`]).
    pub raw_args: Option<RawArgs>,
    /// Bytes of (decompressed) JSON text read.
    pub text_bytes: u64,
    /// Bytes of input read (compressed size for gzip).
    pub input_bytes: u64,
}

impl RankTrace {
    /// Bytes held by the tables, strings excluded.
    pub fn table_bytes(&self) -> usize {
        self.events.len() * EventTable::BYTES_PER_ROW
            + self.comm.len() * CommArgs::BYTES_PER_ROW
            + self.flows.len() * (8 + 1 + 4 + 8 + 4 + 1)
            + self.counters.len() * (4 + 4 + 8 + 8 + 16 + 4)
            + self.lanes.len() * 64
            + self.raw_args.as_ref().map_or(0, RawArgs::bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_collective_kind_for_traces_and_nccl_tests() {
        for k in CollKind::NCCL_TESTS {
            let name = k.nccl_tests_name().unwrap_or_default();
            assert_eq!(CollKind::from_nccl_tests(&format!("./build/{name}_perf_mpi")), Some(k));
            assert_eq!(CollKind::from_u8(k as u8), k);
        }
        assert_eq!(
            (CollKind::AllToAll.name(), CollKind::AllToAll.nccl_tests_name()),
            ("all_to_all", Some("alltoall"))
        );
        assert_eq!(CollKind::Send.nccl_test(), Some(CollKind::SendRecv));
        assert_eq!(CollKind::Barrier.nccl_test(), None);
        // Hypercube is an all_gather pattern: (n − 1) / n.
        assert!((CollKind::Hypercube.busbw_factor(8) - 0.875).abs() < 1e-12);
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct T(#[serde(with = "nccl_tests_kind")] Option<CollKind>);
        for v in [T(Some(CollKind::SendRecv)), T(None)] {
            let json = serde_json::to_string(&v).unwrap_or_default();
            assert!(json == "\"sendrecv\"" || json == "null", "{json}");
            assert_eq!(serde_json::from_str::<T>(&json).ok(), Some(v));
        }
    }

    #[test]
    fn one_dtype_table_for_traces_and_nccl_tests() {
        for (name, bytes) in [
            ("Float", 4),
            ("c10::BFloat16", 2),
            ("double", 8),
            ("Float8_e4m3fn", 1),
            ("half", 2),
            ("bfloat16", 2),
            ("f8e4m3", 1),
            ("fp8_e5m2", 1),
            ("int64", 8),
        ] {
            assert_eq!(dtype_bytes(name), Some(bytes), "{name}");
        }
        assert_eq!(dtype_bytes("Scalar"), None);
    }

    #[test]
    fn lanes_have_one_label_and_one_order() {
        let mut strings = StringTable::default();
        let empty = strings.intern("");
        let py = strings.intern("thread 7 (python)");
        let named = strings.intern("worker");
        let mut t = LaneTable::default();
        // (kind, tid, name, sort_index, device, stream)
        for (kind, tid, name, sort, dev, stream) in [
            (LaneKind::Gpu, IdKey::Int(7), empty, i64::MAX, 0, 7),
            (LaneKind::Cpu, IdKey::Int(9), empty, i64::MAX, -1, -1),
            (LaneKind::Cpu, IdKey::Int(7), py, i64::MAX, -1, -1),
            (LaneKind::Gpu, IdKey::Int(3), empty, i64::MAX, 0, 3),
            (LaneKind::Cpu, IdKey::Str(named), empty, 0, -1, -1),
        ] {
            t.pid.push(IdKey::Int(1));
            t.tid.push(tid);
            t.kind.push(kind);
            t.name.push(name);
            t.sort_index.push(sort);
            t.device.push(dev);
            t.stream.push(stream);
            t.events.push(1);
        }
        let labels: Vec<String> = t.display_order().into_iter().map(|l| t.label(l, &strings)).collect();
        assert_eq!(
            labels,
            ["thread worker", "thread 7 (python)", "thread 9", "GPU 0 stream 3", "GPU 0 stream 7"]
        );
    }
}
