//! `NCCL_DEBUG=INFO` logs: per-process and per-rank facts, peer transports, warnings, findings.
//!
//! **Line anatomy.** NCCL writes `HOST:PID:TID [DEV] NCCL INFO message` (and
//! `HOST:PID:TID [DEV] file.cc:123 NCCL WARN message`). Anything may precede the header (MPI
//! `[1,R]<stdout>:` tags, srun `R: ` labels, timestamps); a patched build may insert fields
//! between `[DEV]` and `NCCL INFO` (`showVersion, 544`), which is recorded per process. The
//! header is found by its shape (`x:digits:digits` followed by `[digits]`), never by column.
//! `DEV` is the CUDA device of the writing thread; proxy threads of some versions print `[0]`,
//! so the device of a process comes from its main thread (`TID == PID`) or its `comm` line.
//!
//! **Versions covered.**
//! - 2.5: `Ring 00 : a[bus] -> b[bus] via NET/IB/0`;
//! - 2.7–2.18: `Channel 00 : a[bus] -> b[bus] via P2P/IPC/read`,
//!   `comm 0x.. rank R nranks N cudaDev D busId B - Init COMPLETE`;
//! - 2.19+: `Channel 00/0 : a[dev] -> b[dev] [send] via NET/IB/0`,
//!   `comm 0x.. rank R nRanks N nNodes M localRanks L localRank l MNNVL 0`,
//!   `ncclCommInitRank comm .. commId 0x.. - Init START/COMPLETE`, `Init timings`;
//! - network plugins: `NET/AWS Libfabric`, `NET/IBext`, `NET/OFI` messages.
//!
//! **Identity.** A *process* is `(host, pid)`. A *rank* is a member of a communicator: the
//! communicator is named by its `commId` when the version prints it, else by its size
//! (`nranks=16`). Ranks printed by the nccl-tests banner (`#  Rank 3 ... Pid P on HOST`) fill in
//! when `NCCL_DEBUG_SUBSYS` hides the `comm` lines.
//!
//! **Layout.** This file holds the report's types and the reader's state; `line` finds a line's
//! header, `read` walks a file, `info` reads one `NCCL INFO` message, `finish` resolves
//! what was read into the report and `findings` says what is wrong in it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::text::{lines, strip_call_fragments};
use super::{
    sort_findings, DiagKind, Diagnostic, EvidenceLine, Finding, FindingId, Input, Severity, REPORT_VERSION,
};

mod findings;
mod finish;
mod info;
mod line;
mod read;

use findings::*;
use finish::*;
use info::*;
pub(crate) use line::is_nccl_line;
use line::*;
use read::*;

/// Facts about one process (`host`, `pid`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NcclProcess {
    pub host: String,
    pub pid: u64,
    /// Rank given by the launcher's line tag (`[1,R]<stdout>:` or srun `R: `), if any.
    pub launcher_rank: Option<u32>,
    /// CUDA device of the main thread or of its `comm` line.
    pub cuda_dev: Option<i64>,
    /// The library: `NCCL`, or `RCCL` (AMD's port, recognised by its `RCCL version` banner,
    /// a `+hip` build, `RCCL_*` settings or ROCm runtime lines); absent when nothing said.
    pub library: Option<String>,
    /// NCCL (or RCCL) version, e.g. `2.26.5`.
    pub nccl_version: Option<String>,
    /// CUDA version NCCL was built for (`+cuda12.9` → `12.9`); absent when the build printed
    /// an unexpanded placeholder (`+cudaCUDA_MAJOR.CUDA_MINOR`).
    pub nccl_cuda_version: Option<String>,
    /// RCCL's build suffix after the version (`RCCL version : 2.27.7-HEAD:0d2c4fd` →
    /// `HEAD:0d2c4fd`, `RCCL version 2.13.4+hip5.4 HEAD:6e8e4d1` → `hip5.4 HEAD:6e8e4d1`).
    pub rccl_build: Option<String>,
    /// HIP and ROCm versions of RCCL's banner (`HIP version  : 7.2.26015-fc0010cf6a`,
    /// `ROCm version : 7.2.0.0-43-fc0010cf6a`).
    pub hip_version: Option<String>,
    pub rocm_version: Option<String>,
    /// CUDA driver API version (`cudaDriverVersion 12080` → `12.8`).
    pub cuda_driver: Option<String>,
    /// The network NCCL chose (`Using network IB` / `Socket` / `AWS Libfabric` / `IBext`...).
    pub network: Option<String>,
    /// The network plugin: `internal` or what was loaded (`aws-ofi-nccl 1.13.2-aws`).
    pub net_plugin: Option<String>,
    /// Libfabric provider (`NET/OFI Selected Provider is efa`).
    pub ofi_provider: Option<String>,
    /// The EC2 instance type the network plugin reported (`NET/OFI Running on p4d.24xlarge
    /// platform`, `EC2 platform type is g5.48xlarge`).
    pub platform: Option<String>,
    /// RDMA devices from `NET/IB : Using [0]mlx5_0:1/RoCE ...` (`mlx5_0:1/RoCE`).
    pub ib_devices: Vec<String>,
    /// Interfaces from `NET/Socket : Using [0]eth0:10.0.0.1<0>`.
    pub socket_interfaces: Vec<String>,
    /// Bootstrap interface (`Bootstrap : Using eth0:10.0.0.1<0>`).
    pub bootstrap: Option<String>,
    /// GPUDirect RDMA: true when a network connection used it (`.../GDRDMA`) or a line said
    /// `Enabled`; false when it was reported disabled or network connections went without it;
    /// absent without evidence either way.
    pub gdr: Option<bool>,
    /// `NCCL_*` (and RCCL's `RCCL_*`) variables reported as set by the environment.
    pub env: BTreeMap<String, String>,
    /// Lines carry extra fields between `[DEV]` and `NCCL INFO` (a patched or debug build).
    pub patched_format: bool,
    /// Coll / p2p channel counts from `N coll channels, ... M p2p channels, K p2p channels per peer`
    /// (last seen).
    pub coll_channels: Option<u32>,
    pub p2p_channels: Option<u32>,
    pub p2p_channels_per_peer: Option<u32>,
    pub nvls_channels: Option<u32>,
    pub collnet_channels: Option<u32>,
    /// `Bootstrap timings total X` in seconds (last seen).
    pub bootstrap_total_s: Option<f64>,
    /// NCCL lines written by this process.
    pub nccl_lines: u32,
    pub file: String,
    pub first_line: u32,
}

/// One member of a communicator.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NcclRank {
    /// `commId` (`0x8bc2ef06035e5d2d`) when printed, else `nranks=N`.
    pub comm: String,
    /// The process-local communicator pointer (`0x7fa310000f60`), if printed.
    pub comm_ptr: Option<String>,
    pub rank: u32,
    pub nranks: Option<u32>,
    pub host: String,
    pub pid: u64,
    pub cuda_dev: Option<i64>,
    pub nvml_dev: Option<i64>,
    /// PCI bus id as NCCL prints it (`101c0`, `8000`).
    pub bus_id: Option<String>,
    pub n_nodes: Option<u32>,
    pub local_ranks: Option<u32>,
    pub local_rank: Option<u32>,
    pub init_started: bool,
    pub init_complete: bool,
    /// `Init timings ... total X` in seconds, and its parts (`kernels`, `alloc`, ...).
    pub init_total_s: Option<f64>,
    pub init_parts: BTreeMap<String, f64>,
    /// `comm line` or `nccl-tests banner`.
    pub source: String,
    pub file: String,
    pub line: u32,
}

/// A ring: the rank order of one channel (`Channel 00/08 :    0   7   6 ...`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NcclRing {
    /// The communicator, when the writing thread or process identifies it.
    pub comm: Option<String>,
    pub channel: u32,
    pub ranks: Vec<u32>,
    /// How often the ring (as a cycle) steps from one host to another, when every rank's host is
    /// known. The minimum for a ring over `h > 1` hosts is `h`.
    pub host_crossings: Option<u32>,
    pub hosts: Option<u32>,
    pub file: String,
    pub line: u32,
}

/// One rank's place in a tree of one channel (`Trees [0] 1/8/-1->0->-1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NcclTree {
    pub host: String,
    pub pid: u64,
    pub channel: u32,
    pub rank: i64,
    /// Parent rank, −1 for the root.
    pub up: i64,
    /// Children (−1 entries dropped).
    pub down: Vec<i64>,
}

/// How one rank reaches one peer, summarised over channels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerLink {
    /// The communicator, when the writing thread or process identifies it (rank numbers are
    /// per communicator).
    pub comm: Option<String>,
    pub from_rank: u32,
    pub to_rank: u32,
    pub from_host: Option<String>,
    pub to_host: Option<String>,
    /// Both ends on one host (when both hosts are known).
    pub same_host: Option<bool>,
    /// Distinct `via` descriptions, sorted (`P2P/IPC/read`, `NET/IB/0`, `SHM/direct/direct`).
    pub via: Vec<String>,
    /// Transport classes, sorted (`NET`, `P2P`, `SHM`, `COLLNET`, `NVLS`).
    pub transports: Vec<String>,
    /// Connection lines seen (send and receive sides, all channels).
    pub lines: u32,
    pub channels: Vec<u32>,
}

/// One step of the error-return trace NCCL prints after a failure (`proxy.cc:679 -> 6`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceStep {
    pub line: u32,
    /// `transport/net.cc:1134`.
    pub location: String,
    /// The `ncclResult_t` returned (see [`nccl_result_name`]).
    pub code: i64,
    /// Anything after the code (`[Proxy Thread]`).
    pub note: String,
}

/// A `NCCL WARN` line with its continuation and error-return trace (or a trace with no WARN).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NcclWarning {
    pub host: String,
    pub pid: u64,
    pub tid: u64,
    pub file: String,
    pub line: u32,
    /// Source location printed before `NCCL WARN` (`transport/net_ib.cc:1296`), if any.
    pub location: Option<String>,
    /// The message; empty for a trace without a WARN line.
    pub message: String,
    /// Unprefixed lines right after the WARN that continue its message (a wrapped line).
    pub continuation: Vec<String>,
    pub trace: Vec<TraceStep>,
    /// Written during the job's own teardown (see [`LogFile::job_end`] and docs/nccl.md,
    /// "Teardown"): information, not an error.
    pub teardown: bool,
}

/// Per-file facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogFile {
    pub name: String,
    pub lines: u32,
    pub nccl_lines: u32,
    /// `...` lines (output left out by whoever copied the log).
    pub elided_lines: u32,
    /// The file also holds nccl-tests result tables (read them with the nccl-tests parser).
    pub has_perf_table: bool,
    /// The line after which the job is over, by the file's own words: the training framework's
    /// first "finished" line, or the end of the last benchmark (`# Collective test concluded`,
    /// `# Avg bus bandwidth`), when no work (a collective, a communicator init, a result row)
    /// follows it. Warnings after it are teardown.
    pub job_end: Option<EvidenceLine>,
}

/// Everything read from a set of NCCL logs (one job, possibly one file per node or rank).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogReport {
    pub version: u32,
    pub files: Vec<LogFile>,
    /// Distinct hosts that wrote NCCL lines or appear in rank tables, sorted.
    pub hosts: Vec<String>,
    /// max(distinct hosts, largest `nNodes` printed).
    pub n_nodes: u32,
    /// NCCL version → hosts running it (from `NCCL version` lines; `?` = line without host).
    pub nccl_versions: BTreeMap<String, Vec<String>>,
    pub processes: Vec<NcclProcess>,
    pub ranks: Vec<NcclRank>,
    pub rings: Vec<NcclRing>,
    pub trees: Vec<NcclTree>,
    pub peers: Vec<PeerLink>,
    /// Connection lines per `via` description.
    pub transports: BTreeMap<String, u32>,
    pub warnings: Vec<NcclWarning>,
    pub findings: Vec<Finding>,
    pub diagnostics: Vec<Diagnostic>,
}

impl LogReport {
    /// The process record of `(host, pid)`.
    pub fn process(&self, host: &str, pid: u64) -> Option<&NcclProcess> {
        self.processes.iter().find(|p| p.host == host && p.pid == pid)
    }
}

/// The name of an `ncclResult_t` code, as NCCL's `nccl.h` defines them.
pub fn nccl_result_name(code: i64) -> &'static str {
    match code {
        0 => "ncclSuccess",
        1 => "ncclUnhandledCudaError",
        2 => "ncclSystemError",
        3 => "ncclInternalError",
        4 => "ncclInvalidArgument",
        5 => "ncclInvalidUsage",
        6 => "ncclRemoteError",
        7 => "ncclInProgress",
        _ => "unknown ncclResult_t",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Info,
    Warn,
}

/// A parsed NCCL line.
#[derive(Debug)]
struct Head<'a> {
    host: &'a str,
    pid: u64,
    tid: u64,
    dev: Option<i64>,
    level: Level,
    /// Text between `[DEV]` and `NCCL INFO/WARN`.
    extra: &'a str,
    msg: &'a str,
}

/// A connection line: `Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/2`.
#[derive(Debug, Clone)]
struct Conn {
    host: String,
    pid: u64,
    tid: u64,
    /// The communicator, resolved in `finish` from the writing thread.
    comm: Option<String>,
    channel: u32,
    from: u32,
    to: u32,
    dir: Option<bool>, // Some(true) = send, Some(false) = receive
    via: String,
    file: String,
    line: u32,
    text: String,
}

/// Accumulates over all inputs.
#[derive(Default)]
struct State {
    files: Vec<LogFile>,
    procs: BTreeMap<(String, u64), NcclProcess>,
    /// Evidence per process for findings.
    ranks: BTreeMap<(String, u32, String, u64), NcclRank>,
    /// Ring lines with their writer `(host, pid, tid)`; deduplicated per communicator in `finish`.
    rings: Vec<(NcclRing, (String, u64, u64))>,
    /// Communicator pointers each thread printed `comm` lines for: (host, pid, tid) → pointers.
    comm_threads: BTreeMap<(String, u64, u64), BTreeSet<String>>,
    trees: BTreeMap<(String, u64, u32, i64), NcclTree>,
    conns: Vec<Conn>,
    warnings: Vec<NcclWarning>,
    versions: BTreeMap<String, BTreeSet<String>>,
    // Evidence collections.
    ev_version: BTreeMap<(String, String), EvidenceLine>,
    ev_driver: BTreeMap<(String, String), EvidenceLine>,
    ev_network: BTreeMap<String, Vec<EvidenceLine>>,
    ev_no_ibverbs: Vec<EvidenceLine>,
    ev_gdr_off: Vec<EvidenceLine>,
    /// Why GDR is off, in the log's own words: a network plugin's line (`NET/OFI Could not
    /// disable CUDA API usage for HMEM, disabling GDR`), RCCL's peer-memory check (`GDRDMA not
    /// enabled. Could not find memory_peers directory`), `NCCL_NET_GDR_LEVEL` set by the
    /// environment, and the plugin's own warning that a GPUDirect platform runs without it.
    ev_gdr_plugin: Vec<EvidenceLine>,
    ev_gdr_peermem: Vec<EvidenceLine>,
    ev_gdr_env: Vec<EvidenceLine>,
    ev_gdr_required: Vec<EvidenceLine>,
    /// RCCL: `Dmabuf feature disabled without NCCL_DMABUF_ENABLE=1`.
    ev_dmabuf_off: Vec<EvidenceLine>,
    /// The instance type the network plugin named, per host: (host, type) → first line.
    ev_platform: BTreeMap<(String, String), EvidenceLine>,
    ev_patched: BTreeMap<String, EvidenceLine>,
    ev_stock: BTreeMap<String, EvidenceLine>,
    ev_env_net: Vec<EvidenceLine>,
    /// `NCCL_P2P_DISABLE=1`, `NCCL_P2P_LEVEL=..`, `NCCL_SHM_DISABLE=1` as reported by NCCL.
    ev_env_p2p: Vec<EvidenceLine>,
    /// Bootstrap interfaces per host: (host, interface) → first line.
    ev_bootstrap: BTreeMap<(String, String), EvidenceLine>,
    /// Builds per version: (host, version, build: `+cuda12.2`, RCCL's `-HEAD:0d2c4fd`) → first
    /// line.
    ev_build: BTreeMap<(String, String, String), EvidenceLine>,
    ev_init_start: BTreeMap<(String, u64, String), EvidenceLine>,
    diagnostics: Vec<Diagnostic>,
    max_nodes: u32,
    /// Version lines without a header (`NCCL version 2.9.9+cuda11.2` of old nccl-tests runs,
    /// RCCL's stdout banner).
    loose_versions: Vec<LooseVersion>,
    /// Per (file, host, pid): where the process's work and destroy lines are (teardown).
    lives: BTreeMap<(String, String, u64), ProcLife>,
    /// Parallel to `warnings`: what decides whether each one is teardown.
    warn_meta: Vec<WarnMeta>,
}

/// A version line printed without a `HOST:PID:TID [DEV]` header: `[1,0]<stdout>:NCCL version
/// 2.9.9+cuda11.2`, or RCCL's banner on stdout (`RCCL version : 2.27.7-HEAD:0d2c4fd`, then
/// `HIP version`, `ROCm version`, `Hostname`, `Librccl path` lines).
#[derive(Debug, Clone)]
struct LooseVersion {
    launcher_rank: Option<u32>,
    version: String,
    cuda: Option<String>,
    rccl: bool,
    rccl_build: Option<String>,
    hip: Option<String>,
    rocm: Option<String>,
    /// `Hostname     : X` of RCCL's banner.
    host: Option<String>,
    ev: EvidenceLine,
}

/// One process's life in one file, for the teardown rules: its last line of work (a
/// collective, a communicator init, connecting rings and trees) and its destroy lines.
#[derive(Debug, Clone, Default)]
struct ProcLife {
    last_work: u32,
    /// (line, orderly): `Destroy COMPLETE` is the application's orderly `ncclCommDestroy`;
    /// `Abort START` / `Abort COMPLETE` / `Revoke` are aborts.
    destroys: Vec<(u32, bool, EvidenceLine)>,
    /// Warnings (indices) not yet followed by another line of the process: an orderly destroy
    /// next makes them part of it.
    pending: Vec<usize>,
}

/// What decides whether a warning is teardown (see `finish::teardown`).
#[derive(Debug, Clone, Default)]
struct WarnMeta {
    /// The process's next line after the warning was its orderly `Destroy COMPLETE`.
    before_orderly_destroy: bool,
    /// The process had destroyed or aborted a communicator before the warning: its line.
    after_destroy: Option<u32>,
}

/// Parse NCCL logs (one or several files of one job) and derive findings.
pub fn analyze_logs(inputs: &[Input<'_>]) -> LogReport {
    let mut st = State::default();
    for inp in inputs {
        parse_file(&mut st, inp.name, inp.bytes);
    }
    finish(st)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
