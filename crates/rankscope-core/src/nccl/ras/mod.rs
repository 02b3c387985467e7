//! NCCL RAS status reports: what `ncclras` (NCCL 2.24 and later) prints when asked about a
//! running job, read back into which communicators exist, how many ranks each has, and which
//! ranks are dead, not responding, missing or in error, on which host and GPU.
//!
//! Two forms, both from NVIDIA/nccl `src/ras/client_support.cc` and
//! `docs/userguide/source/troubleshooting/ras.rst`:
//!
//! - **JSON** (`ncclras -f json`, NCCL 2.28.7 and later; wire command `SET FORMAT json`): one
//!   document `{nccl_version, cuda_runtime_version, cuda_driver_version, timestamp,
//!   communicators_count, communicators: [{hash, secondary_hash, size, ranks_count,
//!   missing_ranks_count, ranks: [{rank, host, pid, cuda_dev, nvml_dev, status {init_state,
//!   async_error, finalize_called, destroy_flag, abort_flag}, collective_counts {Broadcast:
//!   n, …}}], missing_ranks: [{rank, host, pid, cuda_dev, nvml_dev, status {unresponsive,
//!   considered_dead}}]}], ras {collection_time_sec, timeouts_count}}`. `host` is the process's
//!   IP address as RAS knows it, or `unknown`. `init_state` / `async_error` are `ncclResult_t`:
//!   0 success, 7 in progress, anything else an error. It is a dump of what RAS gathered; the
//!   judgement ("dead", "missing") is ours, as RAS's own text report makes it.
//! - **Text** (`ncclras`, `ncclras -v`; every version): "Job summary", the communicators' group
//!   table (`Group  Comms  Nodes  Ranks … Status  Errors`), then "Errors" (`INCOMPLETE`: job
//!   processes that sent no data; `DEAD`: processes RAS declared dead; `#g-c (hash) INCOMPLETE`:
//!   a communicator's missing ranks, `Rank R -- GPU G managed by process P on node H`, or in
//!   2.24 `The missing rank(s): …`; `#g-c (hash) ERROR`: initialization or asynchronous errors
//!   per rank) and "Warnings" (`TIMEOUT`, `#g-c (hash) MISMATCH`). Ranks are listed only when
//!   they are outliers (RAS's rule: at most 10 and at most 25% of the total, 50% with `-v`); the
//!   counts are always printed, so a count without names is kept as a count.
//!
//! Monitoring mode (`ncclras -m`, 2.29) prints events, not a status: not read here.
//!
//! Reading never panics and never allocates by a count the input claims (a communicator of
//! 10^9 ranks is a number, not a vector); a rank list in the 2.24 form is expanded up to
//! [`MAX_LISTED`] ranks per communicator. Input that is neither form is an [`RasError`] naming
//! the file, the format and the byte offset.

mod text;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Version of the JSON shape of [`RasStatus`]; bump on incompatible changes.
pub const RAS_REPORT_VERSION: u32 = 1;

/// Ranks kept per communicator and processes per list; beyond it only the count grows.
pub const MAX_LISTED: usize = 4096;

crate::named_enum! {
    /// Which form of `ncclras` output a file is.
    pub enum RasFormat {
        /// `ncclras -f json` (NCCL 2.28.7 and later).
        Json => "json",
        /// The text report (`ncclras`, `ncclras -v`).
        Text => "text",
    }
}

crate::named_enum! {
    /// What is wrong with a rank of a communicator, the worst first.
    pub enum Problem {
        /// Its process is declared dead by RAS (unreachable for 60 s).
        Dead => "dead",
        /// Its process did not answer RAS's query (stopped, hung, or slow to answer).
        NotResponding => "not_responding",
        /// RAS has no data from it for this communicator (its process answered, or RAS does
        /// not say why).
        Missing => "missing",
        /// Its initialization failed (`init_state` neither success nor in progress).
        InitError => "init_error",
        /// `ncclCommGetAsyncError` would return an error.
        AsyncError => "async_error",
        /// The communicator was aborted on it.
        Aborted => "aborted",
    }
}

impl Problem {
    fn words(self) -> &'static str {
        match self {
            Problem::Dead => "dead",
            Problem::NotResponding => "not responding",
            Problem::Missing => "missing",
            Problem::InitError => "failed to initialize",
            Problem::AsyncError => "in asynchronous error",
            Problem::Aborted => "aborted",
        }
    }
}

/// A process as RAS names it: its host (IP address), pid and GPUs (CUDA device numbers).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Process {
    pub host: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i64>,
    pub gpus: Vec<i64>,
}

/// One rank of a communicator with a problem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankIssue {
    /// The rank in the communicator.
    pub rank: i64,
    pub problem: Problem,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i64>,
    /// CUDA device, and the NVML device when it differs (`CUDA_VISIBLE_DEVICES`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvml_gpu: Option<i64>,
    /// The error RAS names (`Remote process error`, or the `ncclResult_t` code in JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One communicator.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RasComm {
    /// The communicator's hash as NCCL logs it (`0x…`).
    pub hash: String,
    /// The text report's `#group-index` label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Its size (ranks), and how many ranks reported (JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranks_reported: Option<i64>,
    /// How many ranks RAS says are missing (the count, whether or not it lists them).
    pub missing: i64,
    /// The text report's status (`RUNNING`, `INIT`, `FINALIZE`, …) and error column.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    pub issues: Vec<RankIssue>,
    /// Ranks that disagree (`MISMATCH`): what differs, one sentence each.
    pub mismatches: Vec<String>,
    /// The hosts of its ranks, as far as the report names them.
    pub hosts: Vec<String>,
}

/// What one `ncclras` report says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RasStatus {
    pub version: u32,
    pub format: RasFormat,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// The job summary (text): nodes, processes and GPUs in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus: Option<i64>,
    /// Communicators: those with a problem first, then by hash. The text report lists only
    /// those with a problem by hash; the others are counted in `comms_total`.
    pub comms: Vec<RasComm>,
    pub comms_total: i64,
    /// Processes declared dead, and processes that sent no data (counts, and the ones named).
    pub dead: i64,
    pub dead_processes: Vec<Process>,
    pub not_responding: i64,
    pub not_responding_processes: Vec<Process>,
    /// Timeouts RAS met while gathering.
    pub timeouts: i64,
    /// What is wrong, the worst first; or one sentence saying every communicator is complete.
    pub headline: Vec<String>,
    /// Lines or values not understood (`FILE: line N: why`), at most 64.
    pub diagnostics: Vec<String>,
}

impl RasStatus {
    fn new(format: RasFormat) -> RasStatus {
        RasStatus {
            version: RAS_REPORT_VERSION,
            format,
            nccl_version: None,
            timestamp: None,
            nodes: None,
            processes: None,
            gpus: None,
            comms: Vec::new(),
            comms_total: 0,
            dead: 0,
            dead_processes: Vec::new(),
            not_responding: 0,
            not_responding_processes: Vec::new(),
            timeouts: 0,
            headline: Vec::new(),
            diagnostics: Vec::new(),
        }
    }

    /// Whether the report names nothing wrong: no process dead or silent, no rank missing or in
    /// error. Ranks that disagree (`mismatches`) are a warning, as RAS files them: in a running
    /// job NCCL's collectives outpace RAS's query; only counts that stay apart across queries
    /// mean a hang.
    pub fn healthy(&self) -> bool {
        self.dead == 0 && self.not_responding == 0 && self.comms.iter().all(|c| !wrong(c))
    }

    fn note(&mut self, s: String) {
        if self.diagnostics.len() < 64 {
            self.diagnostics.push(s);
        }
    }
}

/// A file that is not an `ncclras` report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: not an NCCL RAS status ({format}) at byte {offset}: {why}")]
pub struct RasError {
    pub file: String,
    /// The form it was read as (`json`, `text`), or `json or text` when neither applied.
    pub format: String,
    pub offset: usize,
    pub why: String,
}

/// Which form of `ncclras` report `head` (a file's first bytes, say 64 KiB) is, if any: JSON
/// when it opens with `{` and has `"communicators"` and one of RAS's own keys near the start;
/// text when a line is `Job summary` or the communicators table's header.
pub fn sniff(head: &[u8]) -> Option<RasFormat> {
    let body = head.strip_prefix("\u{feff}".as_bytes()).unwrap_or(head);
    let has = |k: &[u8]| memchr::memmem::find(body, k).is_some();
    if body.trim_ascii_start().starts_with(b"{") {
        let json = has(b"\"communicators\"")
            && (has(b"\"nccl_version\"") || has(b"\"missing_ranks\"") || has(b"\"secondary_hash\""));
        return json.then_some(RasFormat::Json);
    }
    super::text::lines(body)
        .take(200)
        .any(|(_, l)| {
            let l = l.trim();
            l == "Job summary" || l.starts_with("Group     Comms     Nodes")
        })
        .then_some(RasFormat::Text)
}

/// Reads one `ncclras` report (any bytes).
pub fn read(name: &str, bytes: &[u8]) -> Result<RasStatus, RasError> {
    let mut s = match sniff(bytes) {
        Some(RasFormat::Json) => json(name, bytes)?,
        Some(RasFormat::Text) => text::read(name, bytes),
        None => {
            let offset = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(0);
            return Err(RasError {
                file: name.to_string(),
                format: "json or text".into(),
                offset,
                why: "neither `ncclras -f json` output (a JSON object with `communicators`) nor its text report (`Job summary`, the `Group  Comms  Nodes` table)".into(),
            });
        }
    };
    finish(&mut s);
    Ok(s)
}

/// The byte offset of a 1-based `line` and `column` in `bytes` (serde_json's error position).
fn offset_of(bytes: &[u8], line: usize, column: usize) -> usize {
    let start = if line <= 1 {
        0
    } else {
        memchr::memchr_iter(b'\n', bytes).nth(line - 2).map_or(bytes.len(), |k| k + 1)
    };
    start.saturating_add(column.saturating_sub(1)).min(bytes.len())
}

fn json(name: &str, bytes: &[u8]) -> Result<RasStatus, RasError> {
    let err =
        |offset: usize, why: String| RasError { file: name.to_string(), format: "json".into(), offset, why };
    // serde_json places an error at a line and a column (1-based, the byte it stopped at); a
    // document cut short fails at its end.
    let v: Value = serde_json::from_slice(bytes).map_err(|e| {
        let at = if e.is_eof() { bytes.len() } else { offset_of(bytes, e.line(), e.column()) };
        err(at, e.to_string())
    })?;
    let Some(comms) = v.get("communicators").and_then(Value::as_array) else {
        return Err(err(0, "no `communicators` array".into()));
    };
    let mut s = RasStatus::new(RasFormat::Json);
    let text = |o: &Value, k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
    let int = |o: &Value, k: &str| o.get(k).and_then(Value::as_i64);
    s.nccl_version = text(&v, "nccl_version");
    s.timestamp = text(&v, "timestamp");
    s.timeouts = v.get("ras").and_then(|r| int(r, "timeouts_count")).unwrap_or(0);
    let mut dead: Vec<Process> = Vec::new();
    let mut silent: Vec<Process> = Vec::new();
    for (k, c) in comms.iter().enumerate() {
        let Some(hash) = text(c, "hash") else {
            s.note(format!("{name}: communicators[{k}]: no `hash`: skipped"));
            continue;
        };
        let mut comm = RasComm {
            hash,
            size: int(c, "size"),
            ranks_reported: int(c, "ranks_count"),
            missing: int(c, "missing_ranks_count").unwrap_or(0).max(0),
            ..RasComm::default()
        };
        let host_of = |r: &Value| text(r, "host").filter(|h| h != "unknown" && !h.is_empty());
        let pid_of = |r: &Value| int(r, "pid").filter(|&p| p >= 0);
        let mut counts: BTreeMap<String, BTreeMap<u64, Vec<i64>>> = BTreeMap::new();
        for r in c.get("ranks").and_then(Value::as_array).into_iter().flatten() {
            let Some(rank) = int(r, "rank") else { continue };
            if let Some(h) = host_of(r) {
                comm.hosts.push(h);
            }
            let st = r.get("status");
            let code = |k: &str| st.and_then(|st| int(st, k)).filter(|&c| c != 0 && c != 7);
            let flag = |k: &str| st.and_then(|st| st.get(k)).and_then(Value::as_bool).unwrap_or(false);
            let problems = [
                (Problem::InitError, code("init_state")),
                (Problem::AsyncError, code("async_error")),
                (Problem::Aborted, flag("abort_flag").then_some(0)),
            ];
            for (problem, c) in problems {
                let Some(c) = c else { continue };
                if comm.issues.len() < MAX_LISTED {
                    comm.issues.push(RankIssue {
                        rank,
                        problem,
                        host: host_of(r),
                        pid: pid_of(r),
                        gpu: int(r, "cuda_dev"),
                        nvml_gpu: int(r, "nvml_dev").filter(|&n| Some(n) != int(r, "cuda_dev")),
                        error: (problem != Problem::Aborted).then(|| error_name(c)),
                    });
                }
            }
            for (func, n) in r.get("collective_counts").and_then(Value::as_object).into_iter().flatten() {
                if let Some(n) = n.as_u64() {
                    let ranks = counts.entry(func.clone()).or_default().entry(n).or_default();
                    if ranks.len() < MAX_LISTED {
                        ranks.push(rank);
                    }
                }
            }
        }
        // Ranks that launched fewer operations of a kind than the others are behind: in a
        // hang, they are where to look. (A count that moves between two queries is only NCCL
        // outpacing RAS; the report is one snapshot.)
        for (func, by_count) in &counts {
            if by_count.len() > 1 {
                let max = by_count.keys().next_back().copied().unwrap_or(0);
                let behind: Vec<String> = by_count
                    .iter()
                    .filter(|(&n, _)| n < max)
                    .map(|(n, r)| format!("{} at {n} ({})", plural(r.len(), "rank"), list(r)))
                    .collect();
                comm.mismatches
                    .push(format!("{func} counts differ: the others at {max}, {}", behind.join(", ")));
            }
        }
        for r in c.get("missing_ranks").and_then(Value::as_array).into_iter().flatten() {
            let Some(rank) = int(r, "rank") else { continue };
            let st = r.get("status");
            let flag = |k: &str| st.and_then(|st| st.get(k)).and_then(Value::as_bool).unwrap_or(false);
            let problem = if flag("considered_dead") {
                Problem::Dead
            } else if flag("unresponsive") {
                Problem::NotResponding
            } else {
                Problem::Missing
            };
            let issue = RankIssue {
                rank,
                problem,
                host: host_of(r),
                pid: pid_of(r),
                gpu: int(r, "cuda_dev"),
                nvml_gpu: int(r, "nvml_dev").filter(|&n| Some(n) != int(r, "cuda_dev")),
                error: None,
            };
            if let Some(h) = &issue.host {
                comm.hosts.push(h.clone());
                let p = Process { host: h.clone(), pid: issue.pid, gpus: issue.gpu.into_iter().collect() };
                match problem {
                    Problem::Dead => dead.push(p),
                    Problem::NotResponding => silent.push(p),
                    _ => {}
                }
            }
            if comm.issues.len() < MAX_LISTED {
                comm.issues.push(issue);
            }
        }
        comm.missing = comm.missing.max(comm.issues.iter().filter(|i| is_absence(i.problem)).count() as i64);
        s.comms.push(comm);
    }
    s.comms_total = s.comms.len() as i64;
    s.dead_processes = merge_processes(dead);
    s.not_responding_processes = merge_processes(silent);
    s.dead = s.dead_processes.len() as i64;
    s.not_responding = s.not_responding_processes.len() as i64;
    Ok(s)
}

/// A process per (host, pid), with the GPUs of its ranks.
fn merge_processes(list: Vec<Process>) -> Vec<Process> {
    let mut by: BTreeMap<(String, Option<i64>), Vec<i64>> = BTreeMap::new();
    for p in list {
        by.entry((p.host, p.pid)).or_default().extend(p.gpus);
    }
    by.into_iter()
        .take(MAX_LISTED)
        .map(|((host, pid), mut gpus)| {
            gpus.sort_unstable();
            gpus.dedup();
            Process { host, pid, gpus }
        })
        .collect()
}

/// `ncclResult_t` as RAS's text report names it (`ncclErrorToString` in client_support.cc).
fn error_name(code: i64) -> String {
    let name = match code {
        1 => "Unhandled CUDA error",
        2 => "System error",
        3 => "Internal error",
        4 => "Invalid argument",
        5 => "Invalid usage",
        6 => "Remote process error",
        _ => "Unexpected error",
    };
    format!("{name} ({code})")
}

/// A communicator with a rank missing or in error.
fn wrong(c: &RasComm) -> bool {
    c.missing > 0 || !c.issues.is_empty()
}

fn is_absence(p: Problem) -> bool {
    matches!(p, Problem::Dead | Problem::NotResponding | Problem::Missing)
}

fn plural(n: usize, word: &str) -> String {
    match (n, word.ends_with('s')) {
        (1, _) => format!("1 {word}"),
        (_, true) => format!("{n} {word}es"),
        _ => format!("{n} {word}s"),
    }
}

/// At most 8 ranks by number, then how many more.
fn list(ranks: &[i64]) -> String {
    let mut s: Vec<String> = ranks.iter().take(8).map(i64::to_string).collect();
    if ranks.len() > 8 {
        s.push(format!("{} more", ranks.len() - 8));
    }
    s.join(", ")
}

/// Where a rank is: ` on HOST GPU G` as far as known.
fn place(i: &RankIssue) -> String {
    let mut s = String::new();
    if let Some(h) = &i.host {
        s.push_str(&format!(" on {h}"));
    }
    if let Some(g) = i.gpu {
        s.push_str(&format!(" GPU {g}"));
        if let Some(n) = i.nvml_gpu {
            s.push_str(&format!(" (NVML {n})"));
        }
    }
    s
}

/// Sorts, deduplicates and writes the headline.
fn finish(s: &mut RasStatus) {
    for c in &mut s.comms {
        c.hosts.sort();
        c.hosts.dedup();
        c.issues.sort_by(|a, b| a.problem.cmp(&b.problem).then(a.rank.cmp(&b.rank)));
        c.issues.dedup();
    }
    let bad = |c: &RasComm| wrong(c) || !c.mismatches.is_empty();
    let worst = |c: &RasComm| c.issues.iter().map(|i| i.problem).min();
    s.comms.sort_by(|a, b| {
        bad(b)
            .cmp(&bad(a))
            .then_with(|| match (worst(a), worst(b)) {
                (Some(x), Some(y)) => x.cmp(&y),
                (x, y) => y.is_some().cmp(&x.is_some()),
            })
            .then_with(|| a.hash.cmp(&b.hash))
    });
    let mut lines = Vec::new();
    for c in s.comms.iter().filter(|c| wrong(c)) {
        lines.push(comm_sentence(c));
    }
    let named: Vec<&Process> = s.dead_processes.iter().collect();
    if s.dead > 0 {
        lines.push(format!(
            "{} considered dead by RAS (unreachable){}",
            plural(s.dead as usize, "job process"),
            processes(&named)
        ));
    }
    let silent: Vec<&Process> = s.not_responding_processes.iter().collect();
    if s.not_responding > 0 {
        lines.push(format!(
            "{} sent RAS no data (not responding){}",
            plural(s.not_responding as usize, "job process"),
            processes(&silent)
        ));
    }
    if s.timeouts > 0 {
        lines.push(format!("RAS met {} while gathering the data", plural(s.timeouts as usize, "timeout")));
    }
    if lines.is_empty() {
        let ranks: i64 = s.comms.iter().filter_map(|c| c.size).sum();
        let size = if ranks > 0 { format!(" ({ranks} ranks in all)") } else { String::new() };
        lines.push(format!(
            "every communicator is complete: {}{size}, no rank missing, dead or in error",
            plural(s.comms_total.max(0) as usize, "communicator")
        ));
    }
    // Communicators whose only trouble is ranks that disagree come last, as warnings.
    for c in s.comms.iter().filter(|c| !wrong(c) && !c.mismatches.is_empty()) {
        lines.push(format!(
            "warning: {} (NCCL may outpace RAS's query; counts that stay apart across queries mean a hang)",
            comm_sentence(c)
        ));
    }
    s.headline = lines;
}

fn processes(ps: &[&Process]) -> String {
    if ps.is_empty() {
        return String::new();
    }
    let named: Vec<String> = ps
        .iter()
        .take(8)
        .map(|p| {
            let pid = p.pid.map_or(String::new(), |p| format!("process {p} "));
            let gpus: Vec<String> = p.gpus.iter().map(i64::to_string).collect();
            let gpu = match gpus.len() {
                0 => String::new(),
                1 => format!(" GPU {}", gpus.join(",")),
                _ => format!(" GPUs {}", gpus.join(",")),
            };
            format!("{pid}on {}{gpu}", p.host)
        })
        .collect();
    let more = if ps.len() > 8 { format!(", {} more", ps.len() - 8) } else { String::new() };
    format!(": {}{more}", named.join("; "))
}

/// `communicator 0x… (8 ranks): rank 5 on node-2 GPU 3 is dead; 2 ranks missing: …`
fn comm_sentence(c: &RasComm) -> String {
    let label = c.label.as_ref().map_or(String::new(), |l| format!(" {l}"));
    let size = match (c.size, c.ranks_reported) {
        (Some(n), Some(r)) if r != n => format!(" ({n} ranks, {r} reported)"),
        (Some(n), _) => format!(" ({n} ranks)"),
        _ => String::new(),
    };
    let mut parts = Vec::new();
    for p in Problem::ALL {
        let of: Vec<&RankIssue> = c.issues.iter().filter(|i| i.problem == *p).collect();
        match of.len() {
            0 => {}
            1 => {
                let i = of[0];
                let err = i.error.as_ref().map_or(String::new(), |e| format!(" ({e})"));
                parts.push(format!("rank {}{} is {}{err}", i.rank, place(i), p.words()));
            }
            n => {
                let shown: Vec<String> =
                    of.iter().take(8).map(|i| format!("{}{}", i.rank, place(i))).collect();
                let more = if n > 8 { format!(", {} more", n - 8) } else { String::new() };
                parts.push(format!("{n} ranks {}: {}{more}", p.words(), shown.join("; ")));
            }
        }
    }
    let listed = c.issues.iter().filter(|i| is_absence(i.problem)).count() as i64;
    if c.missing > listed {
        let unnamed = (c.missing - listed) as usize;
        parts.push(format!("{} missing that RAS did not name", plural(unnamed, "rank")));
    }
    for m in &c.mismatches {
        parts.push(format!("mismatch: {m}"));
    }
    format!("communicator {}{label}{size}: {}", c.hash, parts.join("; "))
}
