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

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::text::{lines, strip_call_fragments};
use super::{sort_findings, Diagnostic, Evidence, Finding, Input, Severity, REPORT_VERSION};

/// Facts about one process (`host`, `pid`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NcclProcess {
    pub host: String,
    pub pid: u64,
    /// Rank given by the launcher's line tag (`[1,R]<stdout>:` or srun `R: `), if any.
    pub launcher_rank: Option<u32>,
    /// CUDA device of the main thread or of its `comm` line.
    pub cuda_dev: Option<i64>,
    /// NCCL version, e.g. `2.26.5`.
    pub nccl_version: Option<String>,
    /// CUDA version NCCL was built for (`+cuda12.9` → `12.9`); absent when the build printed
    /// an unexpanded placeholder (`+cudaCUDA_MAJOR.CUDA_MINOR`).
    pub nccl_cuda_version: Option<String>,
    /// CUDA driver API version (`cudaDriverVersion 12080` → `12.8`).
    pub cuda_driver: Option<String>,
    /// The network NCCL chose (`Using network IB` / `Socket` / `AWS Libfabric` / `IBext`...).
    pub network: Option<String>,
    /// The network plugin: `internal` or what was loaded (`aws-ofi-nccl 1.13.2-aws`).
    pub net_plugin: Option<String>,
    /// Libfabric provider (`NET/OFI Selected Provider is efa`).
    pub ofi_provider: Option<String>,
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
    /// `NCCL_*` variables NCCL reported as set by the environment.
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// True when `line` holds an NCCL message (used by [`super::sniff`]).
pub(crate) fn is_nccl_line(line: &str) -> bool {
    line.contains("NCCL INFO") || line.contains("NCCL WARN") || line.contains("NCCL version ")
}

fn split_hpt(tok: &str) -> Option<(&str, u64, u64)> {
    let mut it = tok.rsplitn(3, ':');
    let tid = it.next()?.parse().ok()?;
    let pid = it.next()?.parse().ok()?;
    let rest = it.next()?;
    let host = match rest.rfind([':', '>', ']']) {
        Some(i) => rest.get(i + 1..)?,
        None => rest,
    };
    (!host.is_empty()).then_some((host, pid, tid))
}

fn parse_head(line: &str) -> Option<Head<'_>> {
    let (pos, level, marker) = if let Some(p) = line.find("NCCL INFO") {
        (p, Level::Info, "NCCL INFO")
    } else if let Some(p) = line.find("NCCL WARN") {
        (p, Level::Warn, "NCCL WARN")
    } else {
        return None;
    };
    let left = line.get(..pos)?;
    let msg = line.get(pos + marker.len()..)?.trim();
    // Find `host:pid:tid` followed by `[dev]`.
    let mut words = left.split_whitespace().peekable();
    let mut offset_after_dev = None;
    let mut found = None;
    let mut search_from = 0usize;
    while let Some(w) = words.next() {
        let w_pos = left.get(search_from..)?.find(w).map(|p| p + search_from)?;
        search_from = w_pos + w.len();
        if let Some((host, pid, tid)) = split_hpt(w) {
            if let Some(next) = words.peek() {
                if let Some(d) = next.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
                    if let Ok(dev) = d.parse::<i64>() {
                        let n_pos = left.get(search_from..)?.find(next).map(|p| p + search_from)?;
                        offset_after_dev = Some(n_pos + next.len());
                        found = Some((host, pid, tid, Some(dev)));
                        break;
                    }
                }
            }
        }
    }
    let (host, pid, tid, dev) = found?;
    let extra = left.get(offset_after_dev?..).unwrap_or("").trim();
    Some(Head { host, pid, tid, dev, level, extra, msg })
}

/// The launcher's rank tag in front of a line: MPI `[1,R]<stdout>:`, torchrun `[rankR]:` /
/// `[defaultR]:`, or srun `R: `.
fn launcher_rank(line: &str) -> Option<u32> {
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix('[') {
        let inner = rest.split(']').next()?;
        if let Some(r) = inner.split(',').nth(1) {
            return r.trim().parse().ok();
        }
        let digits = inner.strip_prefix("rank").or_else(|| inner.strip_prefix("default"))?;
        return digits.parse().ok();
    }
    let first = t.split_whitespace().next()?;
    first.strip_suffix(':')?.parse().ok()
}

/// `2.26.5+cuda12.9` → (`2.26.5`, Some(`12.9`)).
fn split_version(v: &str) -> (String, Option<String>) {
    let v = v.trim();
    match v.split_once('+') {
        Some((a, b)) => {
            let cuda = b
                .strip_prefix("cuda")
                .filter(|c| c.chars().all(|x| x.is_ascii_digit() || x == '.') && !c.is_empty());
            (a.to_string(), cuda.map(str::to_string))
        }
        None => (v.split_whitespace().next().unwrap_or("").to_string(), None),
    }
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

fn bracket_rank(tok: &str) -> Option<(u32, &str)> {
    let (r, rest) = tok.split_once('[')?;
    Some((r.parse().ok()?, rest.strip_suffix(']')?))
}

/// `Channel NN[/MM] : ...` or `Ring NN : ...` → (channel, rest after ':').
fn channel_prefix(msg: &str) -> Option<(u32, &str)> {
    let rest = msg.strip_prefix("Channel ").or_else(|| msg.strip_prefix("Ring "))?;
    let (head, tail) = rest.split_once(':')?;
    let ch = head.trim().split('/').next()?.trim().parse().ok()?;
    Some((ch, tail))
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
    ev_version: BTreeMap<(String, String), Evidence>,
    ev_driver: BTreeMap<(String, String), Evidence>,
    ev_network: BTreeMap<String, Vec<Evidence>>,
    ev_no_ibverbs: Vec<Evidence>,
    ev_gdr_off: Vec<Evidence>,
    ev_patched: BTreeMap<String, Evidence>,
    ev_stock: BTreeMap<String, Evidence>,
    ev_env_net: Vec<Evidence>,
    /// `NCCL_P2P_DISABLE=1`, `NCCL_P2P_LEVEL=..`, `NCCL_SHM_DISABLE=1` as reported by NCCL.
    ev_env_p2p: Vec<Evidence>,
    /// Bootstrap interfaces per host: (host, interface) → first line.
    ev_bootstrap: BTreeMap<(String, String), Evidence>,
    /// NCCL builds per version: (host, version, cuda build) → first line.
    ev_build: BTreeMap<(String, String, String), Evidence>,
    ev_init_start: BTreeMap<(String, u64, String), Evidence>,
    diagnostics: Vec<Diagnostic>,
    max_nodes: u32,
    /// `NCCL version` lines without a header: (launcher rank tag, version, evidence).
    loose_versions: Vec<(Option<u32>, String, Option<String>, Evidence)>,
}

/// Parse NCCL logs (one or several files of one job) and derive findings.
pub fn analyze_logs(inputs: &[Input<'_>]) -> LogReport {
    let mut st = State::default();
    for inp in inputs {
        parse_file(&mut st, inp.name, inp.bytes);
    }
    finish(st)
}

fn proc_entry<'a>(st: &'a mut State, h: &Head<'_>, file: &str, n: u32) -> &'a mut NcclProcess {
    st.procs.entry((h.host.to_string(), h.pid)).or_insert_with(|| NcclProcess {
        host: h.host.to_string(),
        pid: h.pid,
        file: file.to_string(),
        first_line: n,
        ..NcclProcess::default()
    })
}

fn parse_file(st: &mut State, file: &str, bytes: &[u8]) {
    let mut lf =
        LogFile { name: file.to_string(), lines: 0, nccl_lines: 0, elided_lines: 0, has_perf_table: false };
    // The warning a following continuation/trace line may belong to: index into st.warnings,
    // the line it was last extended at.
    let mut open_warn: BTreeMap<(String, u64), (usize, u32)> = BTreeMap::new();
    let mut last_warn_for_continuation: Option<(usize, u32)> = None;
    // nccl-tests banner ranks seen in this file: (rank, host, pid, dev, line).
    let mut banner_ranks: Vec<(u32, String, u64, i64, u32)> = Vec::new();
    // NCCL lines whose `HOST:PID:TID [DEV]` header could not be found: (count, first line).
    let mut headless: (u32, u32) = (0, 0);
    for (n, raw) in lines(bytes) {
        lf.lines = n;
        let line = strip_call_fragments(&raw);
        let trimmed = line.trim();
        if trimmed == "..." || trimmed == "…" || trimmed.ends_with(": ...") {
            lf.elided_lines += 1;
            continue;
        }
        if !lf.has_perf_table && super::perf::is_tests_marker(&line) {
            lf.has_perf_table = line.contains("busbw") || line.contains("Avg bus bandwidth");
        }
        let Some(h) = parse_head(&line) else {
            // `NCCL version 2.9.9+cuda11.2` printed without a header by older nccl-tests runs.
            if let Some(p) = line.find("NCCL version ") {
                let v = line.get(p + "NCCL version ".len()..).unwrap_or("");
                let (ver, cuda) = split_version(v);
                if !ver.is_empty() {
                    lf.nccl_lines += 1;
                    let ev = Evidence::new(file, n, &raw);
                    st.loose_versions.push((launcher_rank(&line), ver, cuda, ev));
                }
                continue;
            }
            if line.contains("NCCL INFO") || line.contains("NCCL WARN") {
                if headless.0 == 0 {
                    headless.1 = n;
                }
                headless.0 += 1;
                continue;
            }
            if let Some(rest) = line.split_once('#').map(|x| x.1) {
                let toks: Vec<&str> = rest.split_whitespace().collect();
                if toks.first() == Some(&"Rank") {
                    if let Some(d) = parse_banner_rank(&toks) {
                        banner_ranks.push((d.0, d.1, d.2, d.3, n));
                    }
                }
            }
            // A wrapped WARN message continues on the next unprefixed line.
            if let Some((wi, wl)) = last_warn_for_continuation {
                if n == wl.saturating_add(1) && !trimmed.is_empty() {
                    if let Some(w) = st.warnings.get_mut(wi) {
                        w.continuation.push(trimmed.chars().take(super::EVIDENCE_TEXT_MAX).collect());
                    }
                    last_warn_for_continuation = Some((wi, n));
                }
            }
            continue;
        };
        lf.nccl_lines += 1;
        last_warn_for_continuation = None;
        let key = (h.host.to_string(), h.pid);
        let lr = launcher_rank(&line);
        {
            let p = proc_entry(st, &h, file, n);
            p.nccl_lines += 1;
            if p.launcher_rank.is_none() {
                p.launcher_rank = lr;
            }
            if h.tid == h.pid && p.cuda_dev.is_none() {
                p.cuda_dev = h.dev;
            }
        }
        if h.level == Level::Warn {
            let w = NcclWarning {
                host: h.host.to_string(),
                pid: h.pid,
                tid: h.tid,
                file: file.to_string(),
                line: n,
                location: (!h.extra.is_empty()).then(|| h.extra.to_string()),
                message: h.msg.to_string(),
                continuation: Vec::new(),
                trace: Vec::new(),
            };
            st.warnings.push(w);
            let wi = st.warnings.len() - 1;
            open_warn.insert(key.clone(), (wi, n));
            last_warn_for_continuation = Some((wi, n));
            continue;
        }
        // Patched builds insert fields between `[dev]` and `NCCL INFO`.
        if h.extra.is_empty() {
            st.ev_stock.entry(h.host.to_string()).or_insert_with(|| Evidence::new(file, n, &raw));
        } else {
            if let Some(p) = st.procs.get_mut(&key) {
                p.patched_format = true;
            }
            st.ev_patched.entry(h.host.to_string()).or_insert_with(|| Evidence::new(file, n, &raw));
        }
        // Error-return trace: `file.cc:123 -> 6 [note]`.
        if let Some(step) = parse_trace_step(h.msg, n) {
            let recent = open_warn.get(&key).filter(|(_, wl)| n.saturating_sub(*wl) <= 200).map(|x| x.0);
            let wi = match recent {
                Some(wi) => wi,
                None => {
                    st.warnings.push(NcclWarning {
                        host: h.host.to_string(),
                        pid: h.pid,
                        tid: h.tid,
                        file: file.to_string(),
                        line: n,
                        location: None,
                        message: String::new(),
                        continuation: Vec::new(),
                        trace: Vec::new(),
                    });
                    st.warnings.len() - 1
                }
            };
            if let Some(w) = st.warnings.get_mut(wi) {
                w.trace.push(step);
            }
            open_warn.insert(key, (wi, n));
            continue;
        }
        info_line(st, &h, file, n, &raw);
    }
    // Ranks from the nccl-tests banner, where no comm line named them.
    for (rank, host, pid, dev, n) in banner_ranks {
        let exists = st.ranks.values().any(|r| r.rank == rank && r.host == host && r.pid == pid);
        if !exists {
            let comm = "nccl-tests".to_string();
            st.ranks.insert(
                (comm.clone(), rank, host.clone(), pid),
                NcclRank {
                    comm,
                    comm_ptr: None,
                    rank,
                    nranks: None,
                    host,
                    pid,
                    cuda_dev: Some(dev),
                    nvml_dev: None,
                    bus_id: None,
                    n_nodes: None,
                    local_ranks: None,
                    local_rank: None,
                    init_started: false,
                    init_complete: false,
                    init_total_s: None,
                    init_parts: BTreeMap::new(),
                    source: "nccl-tests banner".into(),
                    file: file.to_string(),
                    line: n,
                },
            );
        }
    }
    if headless.0 > 0 {
        st.diagnostics.push(Diagnostic {
            severity: Severity::Info,
            kind: "log.headless-lines".into(),
            message: format!(
                "{} NCCL line(s) without a `HOST:PID:TID [DEV]` header were skipped (cannot tell which process wrote them)",
                headless.0
            ),
            file: file.to_string(),
            line: Some(headless.1),
        });
    }
    st.files.push(lf);
}

/// `Rank 3 [Group 0] Pid 98894 on gdr116 device 1 [0x82] ...` → (rank, host, pid, dev).
fn parse_banner_rank(toks: &[&str]) -> Option<(u32, String, u64, i64)> {
    let rank = toks.get(1)?.parse().ok()?;
    let mut i = 2;
    if toks.get(i) == Some(&"Group") {
        i += 2;
    }
    if toks.get(i) != Some(&"Pid") || toks.get(i + 2) != Some(&"on") || toks.get(i + 4) != Some(&"device") {
        return None;
    }
    Some((rank, toks.get(i + 3)?.to_string(), toks.get(i + 1)?.parse().ok()?, toks.get(i + 5)?.parse().ok()?))
}

fn parse_trace_step(msg: &str, n: u32) -> Option<TraceStep> {
    let (loc, rest) = msg.split_once(" -> ")?;
    let loc = loc.trim();
    let (file, line) = loc.rsplit_once(':')?;
    if file.is_empty()
        || file.contains(char::is_whitespace)
        || !line.chars().all(|c| c.is_ascii_digit())
        || line.is_empty()
    {
        return None;
    }
    let mut it = rest.split_whitespace();
    let code = it.next()?.parse().ok()?;
    let note = it.collect::<Vec<_>>().join(" ");
    Some(TraceStep { line: n, location: loc.to_string(), code, note })
}

/// Numbers following `key` in whitespace tokens: `rank 0 nranks 16` → key "nranks" → 16.
fn kv<'a>(toks: &[&'a str], key: &str) -> Option<&'a str> {
    toks.iter().position(|t| *t == key).and_then(|i| toks.get(i + 1)).copied()
}

fn info_line(st: &mut State, h: &Head<'_>, file: &str, n: u32, raw: &str) {
    let msg = h.msg;
    let key = (h.host.to_string(), h.pid);
    let ev = || Evidence::new(file, n, raw);
    if let Some(v) = msg.strip_prefix("NCCL version ") {
        let (ver, cuda) = split_version(v);
        if let Some(c) = &cuda {
            st.ev_build.entry((h.host.to_string(), ver.clone(), c.clone())).or_insert_with(ev);
        }
        if let Some(p) = st.procs.get_mut(&key) {
            p.nccl_version = Some(ver.clone());
            p.nccl_cuda_version = cuda;
        }
        st.versions.entry(ver.clone()).or_default().insert(h.host.to_string());
        st.ev_version.entry((h.host.to_string(), ver)).or_insert_with(ev);
        return;
    }
    if let Some(v) = msg.strip_prefix("cudaDriverVersion ") {
        if let Ok(x) = v.trim().parse::<u32>() {
            let s = format!("{}.{}", x / 1000, (x % 1000) / 10);
            if let Some(p) = st.procs.get_mut(&key) {
                p.cuda_driver = Some(s.clone());
            }
            st.ev_driver.entry((h.host.to_string(), s)).or_insert_with(ev);
        }
        return;
    }
    if let Some(v) = msg.strip_prefix("Using network ") {
        let net = v.trim().to_string();
        if let Some(p) = st.procs.get_mut(&key) {
            p.network = Some(net.clone());
        }
        st.ev_network.entry(net).or_default().push(ev());
        return;
    }
    if msg.starts_with("Bootstrap") && msg.contains("Using ") {
        let v = msg.split("Using ").nth(1).unwrap_or("").trim().to_string();
        let iface = v.split(':').next().unwrap_or("").to_string();
        st.ev_bootstrap.entry((h.host.to_string(), iface)).or_insert_with(ev);
        if let Some(p) = st.procs.get_mut(&key) {
            p.bootstrap = Some(v);
        }
        return;
    }
    if let Some(rest) = msg.strip_prefix("Bootstrap timings total ") {
        if let Some(p) = st.procs.get_mut(&key) {
            p.bootstrap_total_s = rest.split_whitespace().next().and_then(super::text::finite);
        }
        return;
    }
    if msg.starts_with("NET/Plugin") {
        let plugin = if msg.contains("No plugin found")
            || msg.contains("Could not find")
            || msg.contains("Plugin load returned")
            || msg.contains("internal")
        {
            Some("internal".to_string())
        } else if let Some(x) = msg.split("Loaded net plugin ").nth(1) {
            Some(x.trim().to_string())
        } else {
            msg.split("Using ").nth(1).filter(|_| msg.contains("plugin")).map(|x| x.trim().to_string())
        };
        if let (Some(pl), Some(p)) = (plugin, st.procs.get_mut(&key)) {
            if p.net_plugin.as_deref().is_none_or(|x| x == "internal") {
                p.net_plugin = Some(pl);
            }
        }
        return;
    }
    if let Some(x) = msg
        .strip_prefix("NET/OFI Initializing ")
        .or_else(|| msg.strip_prefix("NET/OFI Using ").filter(|x| x.starts_with("aws-ofi-nccl")))
    {
        if let Some(p) = st.procs.get_mut(&key) {
            p.net_plugin = Some(x.trim().to_string());
        }
        return;
    }
    if let Some(x) = msg.strip_prefix("NET/OFI Selected Provider is ") {
        if let Some(p) = st.procs.get_mut(&key) {
            p.ofi_provider = Some(x.trim().to_string());
            if p.net_plugin.as_deref().is_none_or(|x| x == "internal") {
                p.net_plugin = Some("aws-ofi-nccl".to_string());
            }
        }
        return;
    }
    if msg.starts_with("Failed to open libibverbs") {
        st.ev_no_ibverbs.push(ev());
        return;
    }
    if msg.contains("GPU Direct RDMA Disabled") {
        if let Some(p) = st.procs.get_mut(&key) {
            if p.gdr != Some(true) {
                p.gdr = Some(false);
            }
        }
        st.ev_gdr_off.push(ev());
        return;
    }
    if msg.contains("GPU Direct RDMA Enabled") {
        if let Some(p) = st.procs.get_mut(&key) {
            p.gdr = Some(true);
        }
        return;
    }
    // 2.19+: `Connected all rings, use ring PXN 0 GDR 1`: whether GDR is used at all.
    if msg.starts_with("Connected all rings") {
        let toks: Vec<&str> = msg.split([' ', ',']).filter(|t| !t.is_empty()).collect();
        if let (Some(g), Some(p)) = (kv(&toks, "GDR"), st.procs.get_mut(&key)) {
            if p.gdr.is_none() && (g == "0" || g == "1") {
                p.gdr = Some(g == "1");
            }
        }
        return;
    }
    if let Some(rest) = msg.strip_prefix("NET/IB : Using ").or_else(|| msg.strip_prefix("NET/IB: Using ")) {
        let devs: Vec<String> = rest
            .split(';')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|t| t.strip_prefix('[').and_then(|x| x.split_once(']')).map(|x| x.1.to_string()))
            .filter(|x| !x.is_empty())
            .collect();
        if let (false, Some(p)) = (devs.is_empty(), st.procs.get_mut(&key)) {
            p.ib_devices = devs;
        }
        return;
    }
    if let Some(rest) =
        msg.strip_prefix("NET/Socket : Using ").or_else(|| msg.strip_prefix("NET/Socket: Using "))
    {
        let ifs: Vec<String> = rest
            .split_whitespace()
            .filter_map(|t| t.strip_prefix('[').and_then(|x| x.split_once(']')).map(|x| x.1.to_string()))
            .collect();
        // `NET/Socket: Using 2 threads and 8 sockets per thread` lists no interface.
        if let (false, Some(p)) = (ifs.is_empty(), st.procs.get_mut(&key)) {
            p.socket_interfaces = ifs;
        }
        return;
    }
    if msg.starts_with("NCCL_") && msg.contains(" set by environment to ") {
        if let Some((k, v)) = msg.split_once(" set by environment to ") {
            let k = k.trim().to_string();
            let v = v.trim().trim_end_matches('.').to_string();
            if (k == "NCCL_IB_DISABLE" && v == "1") || (k == "NCCL_NET" && v.eq_ignore_ascii_case("socket")) {
                st.ev_env_net.push(ev());
            }
            let p2p_off = matches!(k.as_str(), "NCCL_P2P_DISABLE" | "NCCL_SHM_DISABLE") && v == "1";
            if p2p_off || k == "NCCL_P2P_LEVEL" {
                st.ev_env_p2p.push(ev());
            }
            if let Some(p) = st.procs.get_mut(&key) {
                p.env.insert(k, v);
            }
        }
        return;
    }
    if msg.contains(" coll channels") || msg.contains(" p2p channels") {
        let toks: Vec<&str> = msg.split([',', ' ']).filter(|t| !t.is_empty()).collect();
        let mut vals: BTreeMap<String, u32> = BTreeMap::new();
        for (i, t) in toks.iter().enumerate() {
            if let Ok(v) = t.parse::<u32>() {
                let words: Vec<&str> =
                    toks.iter().skip(i + 1).take_while(|w| w.parse::<u32>().is_err()).copied().collect();
                vals.insert(words.join(" "), v);
            }
        }
        if let Some(p) = st.procs.get_mut(&key) {
            p.coll_channels = vals.get("coll channels").copied().or(p.coll_channels);
            p.p2p_channels = vals.get("p2p channels").copied().or(p.p2p_channels);
            p.p2p_channels_per_peer = vals.get("p2p channels per peer").copied().or(p.p2p_channels_per_peer);
            p.nvls_channels = vals.get("nvls channels").copied().or(p.nvls_channels);
            p.collnet_channels = vals.get("collnet channels").copied().or(p.collnet_channels);
        }
        return;
    }
    if let Some(rest) = msg.strip_prefix("Trees") {
        for part in rest.split('[').skip(1) {
            let Some((ch, body)) = part.split_once(']') else {
                continue;
            };
            let Ok(ch) = ch.trim().parse::<u32>() else {
                continue;
            };
            if let Some(t) = parse_tree(body.trim(), h, ch) {
                st.trees.insert((t.host.clone(), t.pid, t.channel, t.rank), t);
            }
        }
        return;
    }
    if let Some(rest) = msg.strip_prefix("Init timings") {
        // `Init timings - ncclCommInitAll: rank 0 nranks 1 total 0.27 (kernels 0.19, ...)`.
        let toks: Vec<&str> = rest.split([' ', ',', '(', ')', ':']).filter(|t| !t.is_empty()).collect();
        let rank = kv(&toks, "rank").and_then(|v| v.parse::<u32>().ok());
        let total = kv(&toks, "total").and_then(super::text::finite);
        let mut parts = BTreeMap::new();
        if let Some(inner) = rest.split_once('(').map(|x| x.1) {
            for kvp in inner.trim_end_matches(')').split(',') {
                let mut it = kvp.split_whitespace();
                if let (Some(k), Some(v)) = (it.next(), it.next().and_then(super::text::finite)) {
                    parts.insert(k.to_string(), v);
                }
            }
        }
        if let Some(r) =
            st.ranks.values_mut().rev().find(|r| r.host == h.host && r.pid == h.pid && Some(r.rank) == rank)
        {
            r.init_total_s = total;
            r.init_parts = parts;
        }
        return;
    }
    if let Some((ch, tail)) = channel_prefix(msg) {
        if tail.contains("->") && tail.contains("via") {
            if let Some(c) = parse_conn(tail, h, ch, file, n, raw) {
                st.conns.push(c);
            }
        } else {
            let ranks: Option<Vec<u32>> = tail.split_whitespace().map(|t| t.parse().ok()).collect();
            if let Some(ranks) = ranks.filter(|r| !r.is_empty()) {
                let ring = NcclRing {
                    comm: None,
                    channel: ch,
                    ranks,
                    host_crossings: None,
                    hosts: None,
                    file: file.to_string(),
                    line: n,
                };
                st.rings.push((ring, (h.host.to_string(), h.pid, h.tid)));
            }
        }
        return;
    }
    // comm lines: `comm 0x.. rank R nranks N cudaDev D busId B - Init COMPLETE`,
    // `comm 0x.. rank R nRanks N nNodes M localRanks L localRank l MNNVL 0`,
    // `ncclCommInitRank comm 0x.. rank R nranks N cudaDev D nvmlDev X busId B commId 0x.. - Init START`.
    let toks: Vec<&str> = msg.split_whitespace().collect();
    if toks.contains(&"comm") && toks.contains(&"rank") {
        let rank = kv(&toks, "rank").and_then(|v| v.parse::<u32>().ok());
        let nranks = kv(&toks, "nranks").or_else(|| kv(&toks, "nRanks")).and_then(|v| v.parse::<u32>().ok());
        let Some(rank) = rank else { return };
        let ptr = kv(&toks, "comm").map(str::to_string);
        if let Some(p) = &ptr {
            st.comm_threads.entry((h.host.to_string(), h.pid, h.tid)).or_default().insert(p.clone());
        }
        let comm_id = kv(&toks, "commId").map(str::to_string);
        // Group under a commId seen for this pointer earlier, else by size.
        let existing_id = st
            .ranks
            .values()
            .find(|r| {
                r.host == h.host
                    && r.pid == h.pid
                    && r.comm_ptr.is_some()
                    && r.comm_ptr == ptr
                    && r.rank == rank
            })
            .map(|r| r.comm.clone());
        let comm = comm_id
            .or(existing_id)
            .or_else(|| nranks.map(|x| format!("nranks={x}")))
            .unwrap_or_else(|| "unknown".to_string());
        // A commId learnt late re-keys an entry made under `nranks=N`.
        let old_key = st
            .ranks
            .iter()
            .find(|(_, r)| {
                r.host == h.host
                    && r.pid == h.pid
                    && r.comm_ptr.is_some()
                    && r.comm_ptr == ptr
                    && r.rank == rank
                    && r.comm != comm
            })
            .map(|(k, _)| k.clone());
        let moved = old_key.and_then(|k| st.ranks.remove(&k));
        let entry = st.ranks.entry((comm.clone(), rank, h.host.to_string(), h.pid)).or_insert_with(|| {
            moved.unwrap_or_else(|| NcclRank {
                comm: comm.clone(),
                comm_ptr: ptr.clone(),
                rank,
                nranks,
                host: h.host.to_string(),
                pid: h.pid,
                cuda_dev: None,
                nvml_dev: None,
                bus_id: None,
                n_nodes: None,
                local_ranks: None,
                local_rank: None,
                init_started: false,
                init_complete: false,
                init_total_s: None,
                init_parts: BTreeMap::new(),
                source: "comm line".into(),
                file: file.to_string(),
                line: n,
            })
        });
        entry.comm = comm.clone();
        entry.comm_ptr = entry.comm_ptr.clone().or(ptr);
        entry.nranks = entry.nranks.or(nranks);
        let num = |k: &str| kv(&toks, k).and_then(|v| v.parse::<i64>().ok());
        entry.cuda_dev = entry.cuda_dev.or(num("cudaDev"));
        entry.nvml_dev = entry.nvml_dev.or(num("nvmlDev"));
        entry.bus_id = entry.bus_id.clone().or(kv(&toks, "busId").map(str::to_string));
        entry.n_nodes = entry.n_nodes.or(num("nNodes").and_then(|v| u32::try_from(v).ok()));
        entry.local_ranks = entry.local_ranks.or(num("localRanks").and_then(|v| u32::try_from(v).ok()));
        entry.local_rank = entry.local_rank.or(num("localRank").and_then(|v| u32::try_from(v).ok()));
        if msg.contains("Init START") {
            entry.init_started = true;
            st.ev_init_start.insert((h.host.to_string(), h.pid, format!("{comm}#{rank}")), ev());
        }
        if msg.contains("Init COMPLETE") {
            entry.init_complete = true;
        }
        let dev = entry.cuda_dev;
        let nodes = entry.n_nodes.unwrap_or(0);
        st.max_nodes = st.max_nodes.max(nodes);
        if let Some(p) = st.procs.get_mut(&key) {
            if p.cuda_dev.is_none() {
                p.cuda_dev = dev;
            }
        }
    }
}

/// `1/8/-1->0->-1` (2.7+: down/down/down->rank->up) or `-1->0->1/-1/-1` (older: up->rank->down).
fn parse_tree(body: &str, h: &Head<'_>, ch: u32) -> Option<NcclTree> {
    let parts: Vec<&str> = body.split("->").collect();
    let [a, r, b] = parts.as_slice() else {
        return None;
    };
    let rank = r.trim().parse().ok()?;
    let nums = |s: &str| -> Option<Vec<i64>> { s.trim().split('/').map(|x| x.trim().parse().ok()).collect() };
    let (down, up) = if a.contains('/') || !b.contains('/') {
        (nums(a)?, nums(b)?.first().copied()?)
    } else {
        (nums(b)?, nums(a)?.first().copied()?)
    };
    Some(NcclTree {
        host: h.host.to_string(),
        pid: h.pid,
        channel: ch,
        rank,
        up,
        down: down.into_iter().filter(|&d| d >= 0).collect(),
    })
}

fn parse_conn(tail: &str, h: &Head<'_>, ch: u32, file: &str, n: u32, raw: &str) -> Option<Conn> {
    let (ends, via) = tail.split_once(" via ")?;
    let toks: Vec<&str> = ends.split_whitespace().collect();
    let arrow = toks.iter().position(|t| *t == "->")?;
    let (from, _) = bracket_rank(toks.get(arrow.checked_sub(1)?)?)?;
    let (to, _) = bracket_rank(toks.get(arrow + 1)?)?;
    let dir = if toks.contains(&"[send]") {
        Some(true)
    } else if toks.contains(&"[receive]") {
        Some(false)
    } else {
        None
    };
    Some(Conn {
        host: h.host.to_string(),
        pid: h.pid,
        tid: h.tid,
        comm: None,
        channel: ch,
        from,
        to,
        dir,
        via: via.trim().to_string(),
        file: file.to_string(),
        line: n,
        text: raw.to_string(),
    })
}

/// Transport class of a `via` description: `NET`, `P2P`, `SHM`, `COLLNET`, `NVLS`, ...
fn transport_class(via: &str) -> String {
    via.split('/').next().unwrap_or("").trim().to_ascii_uppercase()
}

/// For `NET/<name>/<dev>[(<proxy rank>)][/GDRDMA]`: (network name, GDRDMA used). The
/// parenthesised rank (2.12+, PXN) is the rank whose NIC and proxy carry the traffic.
fn net_of(via: &str) -> Option<(String, bool)> {
    let rest = via.strip_prefix("NET/")?;
    let segs: Vec<&str> = rest.split('/').collect();
    let dev_idx = segs.iter().position(|s| s.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    let name = segs.get(..dev_idx)?.join("/");
    let gdr = segs.iter().skip(dev_idx + 1).any(|s| s.eq_ignore_ascii_case("GDRDMA"));
    Some((name, gdr))
}

fn finish(mut st: State) -> LogReport {
    // Versions printed without a header: attribute them through the launcher's rank tag
    // (`[1,0]<stdout>:NCCL version 2.9.9+cuda11.2` → the process tagged rank 0), else to `?`.
    for (lr, ver, cuda, ev) in std::mem::take(&mut st.loose_versions) {
        let owner =
            lr.and_then(|r| st.procs.values_mut().find(|p| p.launcher_rank == Some(r) && p.file == ev.file));
        let host = match owner {
            Some(p) => {
                if p.nccl_version.is_none() {
                    p.nccl_version = Some(ver.clone());
                    p.nccl_cuda_version = cuda;
                }
                p.host.clone()
            }
            None => "?".to_string(),
        };
        st.versions.entry(ver.clone()).or_default().insert(host.clone());
        st.ev_version.entry((host, ver)).or_insert(ev);
    }
    // The network of versions that do not print `Using network`: from the devices NCCL listed
    // or, failing that, from the process's own network connections.
    let mut conn_nets: BTreeMap<(String, u64), String> = BTreeMap::new();
    for c in &st.conns {
        if let Some((name, _)) = net_of(&c.via) {
            conn_nets.entry((c.host.clone(), c.pid)).or_insert(name);
        }
    }
    for (k, p) in st.procs.iter_mut() {
        if p.network.is_none() {
            p.network = conn_nets.get(k).cloned().or_else(|| {
                if !p.ib_devices.is_empty() {
                    Some("IB".to_string())
                } else if !p.socket_interfaces.is_empty() {
                    Some("Socket".to_string())
                } else {
                    None
                }
            });
        }
    }
    // GDRDMA as seen on network connections.
    for c in &st.conns {
        if let Some((name, gdr)) = net_of(&c.via) {
            if let Some(p) = st.procs.get_mut(&(c.host.clone(), c.pid)) {
                if gdr {
                    p.gdr = Some(true);
                } else if p.gdr.is_none() && !name.eq_ignore_ascii_case("Socket") {
                    p.gdr = Some(false);
                }
            }
        }
    }
    // Which communicator a connection or ring line belongs to: rank numbers are per
    // communicator, and a training job has many (DP, TP, PP groups). NCCL prints connection and
    // ring lines from the thread that initialises the communicator, so the writing thread names
    // it when that thread printed `comm` lines for exactly one communicator; failing that, the
    // process does when it holds the line's local rank in exactly one communicator.
    let ptr_comm: BTreeMap<(&str, u64, &str), &str> = st
        .ranks
        .values()
        .filter_map(|r| r.comm_ptr.as_deref().map(|p| ((r.host.as_str(), r.pid, p), r.comm.as_str())))
        .collect();
    let thread_comm: BTreeMap<(String, u64, u64), String> = st
        .comm_threads
        .iter()
        .filter_map(|((h, pid, tid), ptrs)| {
            let comms: BTreeSet<&str> =
                ptrs.iter().filter_map(|p| ptr_comm.get(&(h.as_str(), *pid, p.as_str())).copied()).collect();
            (comms.len() == 1)
                .then(|| ((h.clone(), *pid, *tid), comms.first().map(|c| c.to_string()).unwrap_or_default()))
        })
        .collect();
    let mut proc_comms: BTreeMap<(&str, u64), Vec<(u32, &str)>> = BTreeMap::new();
    for r in st.ranks.values() {
        proc_comms.entry((r.host.as_str(), r.pid)).or_default().push((r.rank, r.comm.as_str()));
    }
    let resolve = |host: &str, pid: u64, tid: u64, local: Option<u32>| -> Option<String> {
        if let Some(c) = thread_comm.get(&(host.to_string(), pid, tid)) {
            return Some(c.clone());
        }
        let cands: BTreeSet<&str> = proc_comms
            .get(&(host, pid))
            .map(|v| v.iter().filter(|(r, _)| local.is_none_or(|l| *r == l)).map(|(_, c)| *c).collect())
            .unwrap_or_default();
        (cands.len() == 1).then(|| cands.first().map(|c| c.to_string())).flatten()
    };
    let mut conns = std::mem::take(&mut st.conns);
    for c in &mut conns {
        let local = match c.dir {
            Some(false) => c.to,
            _ => c.from,
        };
        c.comm = resolve(&c.host, c.pid, c.tid, Some(local));
    }
    let mut rings: BTreeMap<(Option<String>, u32, Vec<u32>), NcclRing> = BTreeMap::new();
    for (mut ring, (h, pid, tid)) in std::mem::take(&mut st.rings) {
        ring.comm = resolve(&h, pid, tid, None);
        rings.entry((ring.comm.clone(), ring.channel, ring.ranks.clone())).or_insert(ring);
    }

    // Rank → host, per communicator (from comm lines and banners), with a job-wide fallback
    // (ranks of multi-rank communicators and the local end of connection lines; a rank number
    // claimed by two hosts is left out).
    let comm_rank_host: BTreeMap<(&str, u32), &str> =
        st.ranks.values().map(|r| ((r.comm.as_str(), r.rank), r.host.as_str())).collect();
    let mut rank_host: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
    for r in st.ranks.values().filter(|r| r.nranks.is_none_or(|n| n > 1)) {
        rank_host.entry(r.rank).or_default().insert(r.host.clone());
    }
    let mut from_conns: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
    for c in &conns {
        let local = match c.dir {
            Some(false) => c.to,
            _ => c.from,
        };
        from_conns.entry(local).or_default().insert(c.host.clone());
    }
    for (r, hs) in from_conns {
        rank_host.entry(r).or_insert(hs);
    }
    let host_of = |comm: Option<&str>, r: u32| -> Option<String> {
        if let Some(h) = comm.and_then(|c| comm_rank_host.get(&(c, r))) {
            return Some(h.to_string());
        }
        rank_host.get(&r).filter(|s| s.len() == 1).and_then(|s| s.iter().next().cloned())
    };

    // Peers.
    let mut peers: BTreeMap<(Option<String>, u32, u32), PeerLink> = BTreeMap::new();
    let mut transports: BTreeMap<String, u32> = BTreeMap::new();
    for c in &conns {
        *transports.entry(c.via.clone()).or_default() += 1;
        let e = peers.entry((c.comm.clone(), c.from, c.to)).or_insert_with(|| {
            let fh = host_of(c.comm.as_deref(), c.from);
            let th = host_of(c.comm.as_deref(), c.to);
            let same = match (&fh, &th) {
                (Some(a), Some(b)) => Some(a == b),
                _ => None,
            };
            PeerLink {
                comm: c.comm.clone(),
                from_rank: c.from,
                to_rank: c.to,
                from_host: fh,
                to_host: th,
                same_host: same,
                via: Vec::new(),
                transports: Vec::new(),
                lines: 0,
                channels: Vec::new(),
            }
        });
        e.lines += 1;
        if !e.via.contains(&c.via) {
            e.via.push(c.via.clone());
            e.via.sort();
        }
        let tc = transport_class(&c.via);
        if !e.transports.contains(&tc) {
            e.transports.push(tc);
            e.transports.sort();
        }
        if !e.channels.contains(&c.channel) {
            e.channels.push(c.channel);
            e.channels.sort_unstable();
        }
    }

    // Rings: host crossings when every rank's host is known.
    for ring in rings.values_mut() {
        let hosts: Option<Vec<String>> =
            ring.ranks.iter().map(|&r| host_of(ring.comm.as_deref(), r)).collect();
        if let Some(hs) = hosts.filter(|h| h.len() > 1) {
            let distinct: BTreeSet<&String> = hs.iter().collect();
            let crossings = (0..hs.len()).filter(|&i| hs.get(i) != hs.get((i + 1) % hs.len())).count();
            ring.host_crossings = u32::try_from(crossings).ok();
            ring.hosts = u32::try_from(distinct.len()).ok();
        }
    }
    st.conns = conns;
    let rings: Vec<NcclRing> = rings.into_values().collect();

    let mut hosts: BTreeSet<String> = st.procs.keys().map(|k| k.0.clone()).collect();
    hosts.extend(st.ranks.values().map(|r| r.host.clone()));
    let n_nodes = u32::try_from(hosts.len()).unwrap_or(u32::MAX).max(st.max_nodes);

    let peers: Vec<PeerLink> = peers.into_values().collect();
    let findings = {
        let mut f = log_findings(&st, &peers, &rings, &hosts, n_nodes);
        sort_findings(&mut f);
        f
    };
    let nccl_versions = st.versions.iter().map(|(v, hs)| (v.clone(), hs.iter().cloned().collect())).collect();
    let mut ranks: Vec<NcclRank> = st.ranks.into_values().collect();
    ranks.sort_by(|a, b| {
        a.comm.cmp(&b.comm).then(a.rank.cmp(&b.rank)).then(a.host.cmp(&b.host)).then(a.pid.cmp(&b.pid))
    });
    let mut rings = rings;
    rings.sort_by(|a, b| a.channel.cmp(&b.channel).then(a.comm.cmp(&b.comm)).then(a.ranks.cmp(&b.ranks)));
    LogReport {
        version: REPORT_VERSION,
        files: st.files,
        hosts: hosts.into_iter().collect(),
        n_nodes,
        nccl_versions,
        processes: st.procs.into_values().collect(),
        ranks,
        rings,
        trees: st.trees.into_values().collect(),
        peers,
        transports,
        warnings: st.warnings,
        findings,
        diagnostics: st.diagnostics,
    }
}

/// Known WARN patterns and what practitioners do about them.
fn warn_fix(msg: &str) -> &'static str {
    if msg.contains("Got completion from peer") || msg.contains("with error 12") {
        "Error 12 is IBV_WC_RETRY_EXC_ERR: the peer's NIC stopped acknowledging (peer process died, link flap, congestion). Check the peer host first (was it killed? dmesg/Xid), then the fabric (ibstat, port error counters, switch logs); raising NCCL_IB_TIMEOUT only hides a flaky link"
    } else if msg.contains("Cuda failure") || msg.contains("CUDA failure") {
        "A CUDA call failed inside NCCL: check the GPU (nvidia-smi, dmesg Xid), driver/runtime versions, and out-of-memory conditions"
    } else if msg.contains("unhandled system error") || msg.contains("connect") || msg.contains("Connection")
    {
        "A socket/system call failed: check that NCCL_SOCKET_IFNAME picks an interface every host can reach, firewalls between hosts, and that all ranks started"
    } else if msg.contains("timeout") || msg.contains("Timeout") {
        "A timeout: one rank did not arrive (crashed, hung, or collectives mismatched across ranks); look at the other ranks' logs first"
    } else {
        "Read the WARN with the return-code trace below it (the last `-> N` is the ncclResult_t returned to the caller); NCCL_DEBUG_SUBSYS=ALL gives more context"
    }
}

fn log_findings(
    st: &State,
    peers: &[PeerLink],
    rings: &[NcclRing],
    hosts: &BTreeSet<String>,
    n_nodes: u32,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let procs: Vec<&NcclProcess> = st.procs.values().collect();

    // 1. Multi-node job on NET/Socket.
    let socket_conns: Vec<&Conn> = st
        .conns
        .iter()
        .filter(|c| net_of(&c.via).is_some_and(|(n, _)| n.eq_ignore_ascii_case("Socket")))
        .collect();
    let socket_net =
        st.ev_network.iter().filter(|(k, _)| k.eq_ignore_ascii_case("Socket")).flat_map(|x| x.1.iter());
    let socket_hosts: BTreeSet<&str> = procs
        .iter()
        .filter(|p| p.network.as_deref().is_some_and(|n| n.eq_ignore_ascii_case("Socket")))
        .map(|p| p.host.as_str())
        .chain(socket_conns.iter().map(|c| c.host.as_str()))
        .collect();
    if n_nodes > 1 && !socket_hosts.is_empty() {
        let mut ev: Vec<Evidence> = socket_net.cloned().collect();
        ev.extend(st.ev_no_ibverbs.iter().cloned());
        ev.extend(st.ev_env_net.iter().cloned());
        ev.extend(socket_conns.iter().take(2).map(|c| Evidence::new(&c.file, c.line, &c.text)));
        out.push(Finding::new(
            "log.net-socket-multinode",
            Severity::Error,
            format!(
                "multi-node job ({n_nodes} nodes) communicates over NET/Socket (TCP) on {}: the RDMA NIC is not used{}",
                socket_hosts.iter().copied().collect::<Vec<_>>().join(", "),
                if st.ev_no_ibverbs.is_empty() { "" } else { " (libibverbs could not be opened)" }
            ),
            "Make RDMA available to NCCL: install rdma-core/libibverbs in the container (and, on AWS EFA, the aws-ofi-nccl plugin with libfabric), expose the /dev/infiniband devices, and do not set NCCL_IB_DISABLE=1 or NCCL_NET=Socket; the log should then say `Using network IB` (or the plugin's name)",
            ev,
        ));
    }

    // 2. Different networks across processes.
    let nets: BTreeMap<&str, BTreeSet<&str>> = procs
        .iter()
        .filter_map(|p| p.network.as_deref().map(|n| (n, p.host.as_str())))
        .fold(BTreeMap::new(), |mut m, (n, h)| {
            m.entry(n).or_default().insert(h);
            m
        });
    if nets.len() > 1 {
        let ev = st.ev_network.values().filter_map(|v| v.first().cloned()).collect();
        out.push(Finding::new(
            "log.mixed-networks",
            Severity::Warning,
            format!(
                "processes chose different networks: {}",
                nets.iter().map(|(n, hs)| format!("{n} on {}", hs.iter().copied().collect::<Vec<_>>().join(", "))).collect::<Vec<_>>().join("; ")
            ),
            "Give every node the same network stack (drivers, plugin, NCCL_NET / NCCL_IB_* settings): NCCL falls back per host when a library or device is missing",
            ev,
        ));
    }

    // 3. SHM or NET between GPUs of one node.
    let bad: Vec<&PeerLink> = peers
        .iter()
        .filter(|p| p.same_host == Some(true) && p.transports.iter().any(|t| t == "SHM" || t == "NET"))
        .collect();
    if !bad.is_empty() {
        let pairs: BTreeSet<(u32, u32)> =
            bad.iter().map(|p| (p.from_rank.min(p.to_rank), p.from_rank.max(p.to_rank))).collect();
        let ev: Vec<Evidence> = st
            .conns
            .iter()
            .filter(|c| {
                let t = transport_class(&c.via);
                (t == "SHM" || t == "NET")
                    && bad.iter().any(|p| p.comm == c.comm && p.from_rank == c.from && p.to_rank == c.to)
            })
            .map(|c| Evidence::new(&c.file, c.line, &c.text))
            .collect();
        let via: BTreeSet<&str> = bad
            .iter()
            .flat_map(|p| p.via.iter().map(String::as_str))
            .filter(|v| !v.starts_with("P2P"))
            .collect();
        let set: Vec<String> = st
            .ev_env_p2p
            .iter()
            .filter_map(|e| e.text.split("NCCL INFO ").nth(1).map(str::to_string))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut ev = ev;
        ev.extend(st.ev_env_p2p.iter().cloned());
        out.push(Finding::new(
            "log.intra-node-shm-or-net",
            Severity::Warning,
            format!(
                "{} pair(s) of GPUs on the same node talk through {} instead of P2P (NVLink/PCIe): intra-node traffic goes through host memory or the NIC{}",
                pairs.len(),
                via.into_iter().collect::<Vec<_>>().join(", "),
                if set.is_empty() { String::new() } else { format!(" ({})", set.join("; ")) }
            ),
            "Check `nvidia-smi topo -m`, NCCL_P2P_DISABLE / NCCL_P2P_LEVEL / NCCL_SHM_DISABLE settings, PCIe ACS and IOMMU (they block P2P), and containers started without --ipc=host or with GPUs split across containers",
            ev,
        ));
    }

    // 4. GDRDMA disabled on an RDMA network.
    let no_gdr_conns: Vec<&Conn> = st
        .conns
        .iter()
        .filter(|c| net_of(&c.via).is_some_and(|(n, gdr)| !gdr && !n.eq_ignore_ascii_case("Socket")))
        .collect();
    let gdr_off_hosts: BTreeSet<&str> =
        procs.iter().filter(|p| p.gdr == Some(false)).map(|p| p.host.as_str()).collect();
    if !gdr_off_hosts.is_empty() && (n_nodes > 1 || !no_gdr_conns.is_empty()) {
        let mut ev: Vec<Evidence> = st.ev_gdr_off.clone();
        ev.extend(no_gdr_conns.iter().take(2).map(|c| Evidence::new(&c.file, c.line, &c.text)));
        let mut reasons = Vec::new();
        if st.ev_gdr_off.iter().any(|e| e.text.contains("no module")) {
            reasons.push("the peer-memory kernel module is not loaded");
        }
        if st.ev_gdr_off.iter().any(|e| e.text.contains("distance")) {
            reasons.push("GPU and NIC are too far apart in PCIe");
        }
        let why = if reasons.is_empty() { String::new() } else { format!(" ({})", reasons.join("; ")) };
        out.push(Finding::new(
            "log.gdr-disabled",
            Severity::Warning,
            format!(
                "GPUDirect RDMA is off on {}{why}: network transfers are staged through host memory, costing bandwidth and CPU",
                gdr_off_hosts.iter().copied().collect::<Vec<_>>().join(", ")
            ),
            "Load the peer-memory module (nvidia-peermem, or nv_peer_mem on old drivers) on every node; if NCCL reports `distance X >= Y`, the GPU and NIC sit under different PCIe switches/CPUs: use the NIC closest to each GPU or raise NCCL_NET_GDR_LEVEL only if the platform supports it",
            ev,
        ));
    }

    // 5. NCCL versions differ.
    if st.versions.len() > 1 {
        let ev: Vec<Evidence> = st.ev_version.values().cloned().collect();
        out.push(Finding::new(
            "log.nccl-version-mismatch",
            Severity::Error,
            format!(
                "different NCCL versions in one job: {}",
                st.versions
                    .iter()
                    .map(|(v, hs)| format!("{v} on {}", hs.iter().cloned().collect::<Vec<_>>().join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            "Run one NCCL build everywhere (the same container image, or the same LD_LIBRARY_PATH on every host): mixed versions can hang or fail at init because their wire protocols differ",
            ev,
        ));
    }
    let drivers: BTreeSet<&String> = st.ev_driver.keys().map(|k| &k.1).collect();
    if drivers.len() > 1 {
        out.push(Finding::new(
            "log.cuda-driver-mismatch",
            Severity::Warning,
            format!(
                "different CUDA driver versions across hosts: {}",
                st.ev_driver.keys().map(|(h, v)| format!("{v} on {h}")).collect::<Vec<_>>().join(", ")
            ),
            "Install the same GPU driver on every node of a job; mixed drivers are a common source of hard-to-reproduce failures",
            st.ev_driver.values().cloned().collect(),
        ));
    }

    // 5b. Same NCCL version built for different CUDA versions.
    let mut builds: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (_, v, c) in st.ev_build.keys() {
        builds.entry(v.as_str()).or_default().insert(c.as_str());
    }
    if builds.values().any(|c| c.len() > 1) && st.versions.len() == 1 {
        out.push(Finding::new(
            "log.nccl-build-mismatch",
            Severity::Warning,
            format!(
                "the same NCCL version is built for different CUDA versions: {}",
                st.ev_build.keys().map(|(h, v, c)| format!("{v}+cuda{c} on {h}")).collect::<Vec<_>>().join(", ")
            ),
            "Use one NCCL package everywhere (same container image); different builds of one version are a sign of hosts set up differently",
            st.ev_build.values().cloned().collect(),
        ));
    }

    // 5c. Bootstrap over loopback or a container bridge in a multi-node job.
    let bad_boot: Vec<(&String, &Evidence)> = st
        .ev_bootstrap
        .iter()
        .filter(|((_, i), _)| i == "lo" || i.starts_with("docker") || i.starts_with("virbr"))
        .map(|((h, _), e)| (h, e))
        .collect();
    if n_nodes > 1 && !bad_boot.is_empty() {
        let hs: BTreeSet<&str> = bad_boot.iter().map(|(h, _)| h.as_str()).collect();
        out.push(Finding::new(
            "log.bootstrap-interface",
            Severity::Error,
            format!(
                "multi-node job bootstraps over a host-local interface (loopback or container bridge) on {}: other nodes cannot reach it",
                hs.into_iter().collect::<Vec<_>>().join(", ")
            ),
            "Set NCCL_SOCKET_IFNAME to the interface that connects the nodes (e.g. NCCL_SOCKET_IFNAME=eth0 or =^lo,docker)",
            bad_boot.into_iter().map(|(_, e)| e.clone()).collect(),
        ));
    }

    // 6. Patched / differently built NCCL.
    if !st.ev_patched.is_empty() {
        let patched: Vec<&String> = st.ev_patched.keys().collect();
        let stock: Vec<&String> = st.ev_stock.keys().filter(|h| !st.ev_patched.contains_key(*h)).collect();
        let mixed = !stock.is_empty();
        let mut ev: Vec<Evidence> = st.ev_patched.values().cloned().collect();
        ev.extend(stock.iter().filter_map(|h| st.ev_stock.get(*h).cloned()));
        out.push(Finding::new(
            "log.patched-nccl",
            if mixed { Severity::Warning } else { Severity::Info },
            if mixed {
                format!(
                    "{} print(s) extra fields in NCCL lines (a patched or debug build) while {} print(s) the stock format: the hosts run different NCCL builds even if the version strings match",
                    patched.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "),
                    stock.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                )
            } else {
                format!(
                    "{} print(s) extra fields in NCCL lines: a patched or debug NCCL build",
                    patched.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                )
            },
            "Use the same NCCL build on every host; keep debug/patched builds out of production runs",
            ev,
        ));
    }

    // 7. Processes that each formed a 1-rank communicator.
    let single: Vec<&NcclRank> = st.ranks.values().filter(|r| r.nranks == Some(1)).collect();
    let single_procs: BTreeSet<(&str, u64)> = single.iter().map(|r| (r.host.as_str(), r.pid)).collect();
    let multi_exists = st.ranks.values().any(|r| r.nranks.is_some_and(|n| n > 1));
    if single_procs.len() > 1 && !multi_exists {
        out.push(Finding::new(
            "log.single-rank-communicators",
            Severity::Error,
            format!(
                "{} processes on {} host(s) each formed their own 1-rank communicator: they never joined one job",
                single_procs.len(),
                single_procs.iter().map(|x| x.0).collect::<BTreeSet<_>>().len()
            ),
            "A launch misconfiguration: build nccl-tests (or the application) with MPI support (MPI=1) and start it with mpirun/srun/torchrun so every process learns its rank and the world size; check that every host runs the same MPI-enabled binary",
            single.iter().map(|r| Evidence::new(&r.file, r.line, &format!("{}:{} comm {} rank {} nranks 1", r.host, r.pid, r.comm_ptr.as_deref().unwrap_or("?"), r.rank))).collect(),
        ));
    }

    // 8. Rings that leave and re-enter nodes.
    let bad_rings: Vec<&NcclRing> = rings
        .iter()
        .filter(|r| matches!((r.host_crossings, r.hosts), (Some(c), Some(h)) if h > 1 && c > h))
        .collect();
    if !bad_rings.is_empty() {
        out.push(Finding::new(
            "log.ring-crosses-nodes",
            Severity::Warning,
            format!(
                "{} ring(s) leave and re-enter a node more often than needed (e.g. channel {}: {} node crossings for {} nodes): each extra crossing puts inter-node traffic on the ring",
                bad_rings.len(),
                bad_rings.first().map_or(0, |r| r.channel),
                bad_rings.first().and_then(|r| r.host_crossings).unwrap_or(0),
                bad_rings.first().and_then(|r| r.hosts).unwrap_or(0)
            ),
            "NCCL did not see the node topology correctly: provide NCCL_TOPO_FILE (or fix the virtualised PCI topology), and check that ranks are numbered node by node (rank = node × GPUs per node + local rank)",
            bad_rings.iter().map(|r| Evidence::new(&r.file, r.line, &format!("Channel {:02} : {}", r.channel, r.ranks.iter().map(u32::to_string).collect::<Vec<_>>().join(" ")))).collect(),
        ));
    }

    // 9. Init started but never completed.
    let stuck: Vec<&Evidence> = st
        .ranks
        .values()
        .filter(|r| r.init_started && !r.init_complete)
        .filter_map(|r| st.ev_init_start.get(&(r.host.clone(), r.pid, format!("{}#{}", r.comm, r.rank))))
        .collect();
    if !stuck.is_empty() {
        out.push(Finding::new(
            "log.init-incomplete",
            Severity::Warning,
            format!("{} rank(s) started communicator init but the log shows no `Init COMPLETE`: init hung, failed, or the log was cut", stuck.len()),
            "Look for WARN lines and for ranks that never started; a hang at init usually means a rank is missing or the network between two hosts is blocked",
            stuck.into_iter().cloned().collect(),
        ));
    }

    // 10. Warnings and error traces.
    let mut groups: BTreeMap<String, Vec<&NcclWarning>> = BTreeMap::new();
    for w in &st.warnings {
        let key: String = w.message.chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect();
        groups.entry(key).or_default().push(w);
    }
    for ws in groups.values() {
        let Some(first) = ws.first() else { continue };
        let mut ev = Vec::new();
        for w in ws {
            let text = if w.message.is_empty() {
                w.trace.first().map(|t| format!("{} -> {}", t.location, t.code)).unwrap_or_default()
            } else {
                format!("NCCL WARN {}", w.message)
            };
            ev.push(Evidence::new(&w.file, w.line, &text));
            for t in w.trace.iter().take(3) {
                ev.push(Evidence::new(
                    &w.file,
                    t.line,
                    &format!("{} -> {} ({}) {}", t.location, t.code, nccl_result_name(t.code), t.note),
                ));
            }
        }
        let code = first
            .trace
            .last()
            .map(|t| format!(" ; returned {} ({})", t.code, nccl_result_name(t.code)))
            .unwrap_or_default();
        let mut message = if first.message.is_empty() {
            format!("an NCCL error-return trace without a WARN line on {}:{}{code}", first.host, first.pid)
        } else {
            let cont = first.continuation.join(" ");
            format!(
                "NCCL WARN on {}:{}: {}{}{}",
                first.host,
                first.pid,
                first.message,
                if cont.is_empty() { String::new() } else { format!(" {cont}") },
                code
            )
        };
        if ws.len() > 1 {
            message.push_str(&format!(" (and {} more like it)", ws.len() - 1));
        }
        out.push(Finding::new("log.nccl-warn", Severity::Error, message, warn_fix(&first.message), ev));
    }
    let _ = hosts;
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn heads() {
        let h =
            parse_head("[1,4]<stdout>:nccl-tests-efa-16-worker-0:29:29 [4] NCCL INFO Bootstrap : Using eth0")
                .expect("head");
        assert_eq!((h.host, h.pid, h.tid, h.dev), ("nccl-tests-efa-16-worker-0", 29, 29, Some(4)));
        assert_eq!(h.msg, "Bootstrap : Using eth0");
        let h = parse_head("gdr114:1766944:1766944 [0] showVersion, 544 NCCL INFO NCCL version 2.26.6")
            .expect("head");
        assert_eq!(h.extra, "showVersion, 544");
        let h =
            parse_head("node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got").expect("head");
        assert_eq!((h.level, h.extra), (Level::Warn, "transport/net_ib.cc:1296"));
        let h = parse_head("1: p5-dy-gpu-3:47930:47930 [0] NCCL INFO NCCL version 2.26.2+cuda12.2")
            .expect("head");
        assert_eq!(h.host, "p5-dy-gpu-3");
        assert!(parse_head("12:30:45 NCCL INFO x").is_none());
        assert_eq!(launcher_rank("[1,12]<stdout>:x"), Some(12));
        assert_eq!(launcher_rank("2: p5"), Some(2));
        assert_eq!(launcher_rank("[rank3]:host:1:1 [0] NCCL INFO x"), Some(3));
        assert_eq!(launcher_rank("[default1]:host:1:1 [0] NCCL INFO x"), Some(1));
        assert_eq!(launcher_rank("[2025-01-01 10:00:00] host:1:1 [0] NCCL INFO x"), None);
    }

    #[test]
    fn nets_and_trees() {
        assert_eq!(net_of("NET/AWS Libfabric/0/GDRDMA"), Some(("AWS Libfabric".into(), true)));
        assert_eq!(net_of("NET/IB/0"), Some(("IB".into(), false)));
        assert_eq!(net_of("P2P/IPC/read"), None);
        assert_eq!(net_of("NET/IB/0(1)/GDRDMA"), Some(("IB".into(), true)));
        assert_eq!(split_version("2.5.7+cudaCUDA_MAJOR.CUDA_MINOR"), ("2.5.7".into(), None));
        assert_eq!(split_version("2.26.5+cuda12.9"), ("2.26.5".into(), Some("12.9".into())));
        let h = Head { host: "h", pid: 1, tid: 1, dev: Some(0), level: Level::Info, extra: "", msg: "" };
        let t = parse_tree("1/8/-1->0->-1", &h, 0).expect("tree");
        assert_eq!((t.rank, t.up, t.down), (0, -1, vec![1, 8]));
        let t = parse_tree("-1->0->1/-1/-1", &h, 0).expect("tree");
        assert_eq!((t.rank, t.up, t.down), (0, -1, vec![1]));
    }
}
