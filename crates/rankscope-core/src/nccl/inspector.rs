//! NCCL Inspector logs: NCCL's profiler plugin (`plugins/profiler/inspector`, NCCL 2.28 and
//! later; RCCL ships a port) writing one JSON object per line for every collective and
//! point-to-point operation of every communicator a process is in, to
//! `NCCL_INSPECTOR_DUMP_DIR/<host>-pid<pid>.log` (output format `v4.0`, the only one published).
//!
//! Each record: `header {id (the communicator's hash), comm_name (newer builds), rank (in the
//! communicator), n_ranks, nnodes}`, `metadata {inspector_output_format_version, git_rev,
//! rec_mechanism, dump_timestamp_us, hostname, pid}`, and either `coll_perf {coll, coll_sn,
//! coll_msg_size_bytes, coll_exec_time_us, coll_timing_source, coll_algobw_gbs, coll_busbw_gbs}`
//! or `p2p_perf {p2p, p2p_sn, p2p_peer, p2p_msg_size_bytes, p2p_exec_time_us, p2p_timing_source,
//! p2p_algobw_gbs, p2p_busbw_gbs}`; verbose builds add `event_trace_sn` / `event_trace_ts`
//! (microsecond timestamps of the operation and of each channel's kernel). A bandwidth NCCL could
//! not compute is written as the string `"nan"`.
//!
//! How an expert reads it ([`summarize`]): a collective's kernels end together on every member,
//! so a member's execution time is how long it sat in the collective: the member that arrived
//! last has the shortest, and the others' excess over it is their wait for it. The lowest bus
//! bandwidth of a call is therefore the member that waited most, not a slow link; a link is slow
//! when every member's time is long for the size (the calls' bandwidth by size, per
//! communicator). Per communicator, the rank that arrives last in most of its calls, with the
//! wait it costs the others, is a straggler seen by the library itself.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Version of the JSON shape of [`InspectorReport`]; bump on incompatible changes.
pub const INSPECTOR_REPORT_VERSION: u32 = 1;

/// A rank is said to arrive last in a communicator when it does in at least this share of the
/// calls that more than one member reported...
pub const LAST_SHARE: f64 = 0.5;
/// ...and in at least this many of them.
pub const MIN_CALLS: usize = 3;

/// One operation of one member, as the Inspector wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The communicator's hash (`header.id`) and its name, when the build writes it.
    pub comm: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm_name: Option<String>,
    /// The member's rank in the communicator, and the communicator's size and node count.
    pub rank: i64,
    pub n_ranks: i64,
    pub nnodes: i64,
    pub host: String,
    pub pid: u64,
    /// `AllReduce`, `AllGather`, `ReduceScatter`, `Broadcast`, `Reduce`, `All2All`, `AllGatherV`,
    /// or for point-to-point `Send`, `Recv`, `SendRecv`.
    pub func: String,
    /// Point-to-point: the peer (a rank of the communicator).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<i64>,
    /// The operation's sequence number in its communicator: one call, on every member.
    pub sn: u64,
    pub bytes: u64,
    pub exec_us: u64,
    /// `kernel_gpu`, `kernel_cpu`, `collective_cpu`: what timed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub algbw_gbs: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busbw_gbs: Option<f64>,
    /// Verbose builds: when the operation started (µs, the host's clock).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_us: Option<u64>,
}

/// A file's records and what could not be read in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Read {
    pub records: Vec<Record>,
    /// `FILE: line N (byte B): why`, one per line not read.
    pub diagnostics: Vec<String>,
    /// The output format versions seen.
    pub versions: Vec<String>,
}

/// Whether `text` (a file's first bytes) is an Inspector log ([`crate::input::is_nccl_inspector`]:
/// the input layer tells every kind, below this module).
pub fn looks_like(text: &[u8]) -> bool {
    crate::input::is_nccl_inspector(text)
}

/// Reads one Inspector log (any bytes: a line that is not a record is a diagnostic naming its
/// line and byte; the others are kept).
pub fn read(name: &str, bytes: &[u8]) -> Read {
    let mut out = Read::default();
    let mut at = 0usize;
    for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let start = at;
        at += line.len() + 1;
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let why = match serde_json::from_slice::<Value>(line) {
            Ok(v) => match record(&v) {
                Ok((r, version)) => {
                    out.records.push(r);
                    if let Some(v) = version.filter(|v| !out.versions.contains(v)) {
                        out.versions.push(v);
                    }
                    continue;
                }
                Err(why) => why,
            },
            Err(e) => format!("not JSON ({e})"),
        };
        if out.diagnostics.len() < 64 {
            out.diagnostics.push(format!("{name}: line {} (byte {start}): {why}", n + 1));
        }
    }
    out
}

/// A record from one parsed line, and its output format version.
fn record(v: &Value) -> Result<(Record, Option<String>), String> {
    let h = v.get("header").ok_or("no `header`: not an NCCL Inspector record")?;
    let m = v.get("metadata");
    let (perf, p) = match (v.get("coll_perf"), v.get("p2p_perf")) {
        (Some(c), _) => (c, "coll"),
        (None, Some(p)) => (p, "p2p"),
        _ => return Err("neither `coll_perf` nor `p2p_perf`".into()),
    };
    let int = |o: &Value, k: &str| o.get(k).and_then(Value::as_i64);
    let uint = |o: &Value, k: &str| o.get(k).and_then(Value::as_u64);
    let text = |o: &Value, k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
    // `"nan"` where NCCL could not compute it.
    let num = |o: &Value, k: &str| o.get(k).and_then(Value::as_f64).filter(|x| x.is_finite());
    let key = |k: &str| format!("{p}_{k}");
    let func = text(perf, p).ok_or_else(|| format!("`{p}_perf` has no `{p}`"))?;
    let sn = uint(perf, &key("sn")).ok_or_else(|| format!("`{p}_perf` has no `{p}_sn`"))?;
    let r = Record {
        comm: text(h, "id").unwrap_or_default(),
        comm_name: text(h, "comm_name").filter(|n| n != "unknown"),
        rank: int(h, "rank").ok_or("`header` has no `rank`")?,
        n_ranks: int(h, "n_ranks").unwrap_or(0),
        nnodes: int(h, "nnodes").unwrap_or(0),
        host: m.and_then(|m| text(m, "hostname")).unwrap_or_default(),
        pid: m.and_then(|m| uint(m, "pid")).unwrap_or(0),
        func,
        peer: if p == "p2p" { int(perf, "p2p_peer") } else { None },
        sn,
        bytes: uint(perf, &key("msg_size_bytes")).unwrap_or(0),
        exec_us: uint(perf, &key("exec_time_us")).unwrap_or(0),
        timing: text(perf, &key("timing_source")),
        algbw_gbs: num(perf, &key("algobw_gbs")),
        busbw_gbs: num(perf, &key("busbw_gbs")),
        start_us: perf.get("event_trace_ts").and_then(|t| uint(t, &key("start_ts"))),
    };
    Ok((r, m.and_then(|m| text(m, "inspector_output_format_version"))))
}

/// One communicator's operations of one kind and size band.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Band {
    pub func: String,
    /// The band: powers of 4 from 1 KiB (`16-64 MiB`), as `rankscope diff` names sizes
    /// ([`crate::words::size_bucket`]).
    pub size: String,
    /// Distinct calls (sequence numbers) and member records.
    pub calls: usize,
    pub records: usize,
    /// Medians over the records.
    pub exec_p50_us: f64,
    pub busbw_p50_gbs: Option<f64>,
    /// The best any record reached: what the link delivers when no member waited.
    pub busbw_max_gbs: Option<f64>,
}

/// A member of a communicator that arrived last at most of its calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastArriver {
    pub rank: i64,
    pub host: String,
    /// Calls more than one member reported, and those it arrived last at.
    pub calls: usize,
    pub last: usize,
    /// The others' wait for it: their execution time over its own, median per call and summed.
    pub wait_p50_us: f64,
    pub wait_total_us: u64,
}

/// One communicator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comm {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub n_ranks: i64,
    pub nnodes: i64,
    /// The members whose records were given, and their hosts.
    pub ranks_seen: Vec<i64>,
    pub hosts: Vec<String>,
    pub bands: Vec<Band>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_arriver: Option<LastArriver>,
}

/// What the Inspector logs of a job say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InspectorReport {
    pub version: u32,
    pub records: usize,
    pub versions: Vec<String>,
    pub comms: Vec<Comm>,
    /// Sentences an expert would say, the most costly first.
    pub notes: Vec<String>,
    pub diagnostics: Vec<String>,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The job's communicators from every file's records (see the module doc).
pub fn summarize(reads: &[Read]) -> InspectorReport {
    let mut by_comm: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in reads.iter().flat_map(|x| &x.records) {
        by_comm.entry(r.comm.as_str()).or_default().push(r);
    }
    let mut comms: Vec<Comm> = by_comm.into_iter().map(|(id, recs)| comm(id, &recs)).collect();
    comms.sort_by_key(|c| std::cmp::Reverse(c.last_arriver.as_ref().map_or(0, |l| l.wait_total_us)));
    let notes = comms.iter().filter_map(note).collect();
    let mut versions: Vec<String> = reads.iter().flat_map(|r| r.versions.iter().cloned()).collect();
    versions.sort();
    versions.dedup();
    InspectorReport {
        version: INSPECTOR_REPORT_VERSION,
        records: reads.iter().map(|r| r.records.len()).sum(),
        versions,
        comms,
        notes,
        diagnostics: reads.iter().flat_map(|r| r.diagnostics.iter().cloned()).collect(),
    }
}

fn comm(id: &str, recs: &[&Record]) -> Comm {
    let mut ranks: Vec<i64> = recs.iter().map(|r| r.rank).collect();
    ranks.sort_unstable();
    ranks.dedup();
    let mut hosts: Vec<String> = recs.iter().map(|r| r.host.clone()).filter(|h| !h.is_empty()).collect();
    hosts.sort();
    hosts.dedup();
    let mut bands: BTreeMap<(String, u32, String), Vec<&Record>> = BTreeMap::new();
    for r in recs {
        let order = if r.bytes == 0 { 0 } else { 64 - r.bytes.leading_zeros() };
        let size = crate::words::size_bucket(i64::try_from(r.bytes).ok());
        bands.entry((r.func.clone(), order / 2, size)).or_default().push(r);
    }
    let bands = bands
        .into_iter()
        .map(|((func, _, size), v)| {
            let mut sns: Vec<u64> = v.iter().map(|r| r.sn).collect();
            sns.sort_unstable();
            sns.dedup();
            let bw: Vec<f64> = v.iter().filter_map(|r| r.busbw_gbs).collect();
            Band {
                func,
                size,
                calls: sns.len(),
                records: v.len(),
                exec_p50_us: median(v.iter().map(|r| r.exec_us as f64).collect()),
                busbw_max_gbs: bw.iter().copied().reduce(f64::max),
                busbw_p50_gbs: (!bw.is_empty()).then(|| median(bw)),
            }
        })
        .collect();
    let first = recs.first();
    Comm {
        id: id.to_string(),
        name: recs.iter().find_map(|r| r.comm_name.clone()),
        n_ranks: first.map_or(0, |r| r.n_ranks),
        nnodes: first.map_or(0, |r| r.nnodes),
        ranks_seen: ranks,
        hosts,
        bands,
        last_arriver: last_arriver(recs),
    }
}

/// Per collective call (a sequence number) the member with the shortest execution time arrived
/// last; the one that did so most, when it did at [`LAST_SHARE`] of at least [`MIN_CALLS`].
fn last_arriver(recs: &[&Record]) -> Option<LastArriver> {
    let mut calls: BTreeMap<(&str, u64), Vec<&Record>> = BTreeMap::new();
    for r in recs.iter().filter(|r| r.peer.is_none()) {
        calls.entry((r.func.as_str(), r.sn)).or_default().push(r);
    }
    let mut per_rank: BTreeMap<i64, (usize, Vec<u64>, String)> = BTreeMap::new();
    let mut shared = 0;
    for members in calls.values().filter(|m| m.len() >= 2) {
        shared += 1;
        let Some(last) = members.iter().min_by_key(|r| (r.exec_us, r.rank)) else { continue };
        // A tie is no late arrival.
        if members.iter().filter(|r| r.exec_us == last.exec_us).count() > 1 {
            continue;
        }
        let waits: Vec<u64> = members.iter().map(|r| r.exec_us - last.exec_us).filter(|&w| w > 0).collect();
        let e = per_rank.entry(last.rank).or_insert_with(|| (0, Vec::new(), last.host.clone()));
        e.0 += 1;
        e.1.push(median(waits.iter().map(|&w| w as f64).collect()) as u64);
    }
    let (rank, (last, waits, host)) = per_rank.into_iter().max_by_key(|(r, (n, _, _))| (*n, -r))?;
    (shared >= MIN_CALLS && last as f64 >= LAST_SHARE * shared as f64).then(|| LastArriver {
        rank,
        host,
        calls: shared,
        last,
        wait_p50_us: median(waits.iter().map(|&w| w as f64).collect()),
        wait_total_us: waits.iter().sum(),
    })
}

/// What an expert says of a communicator with a last arriver.
fn note(c: &Comm) -> Option<String> {
    let l = c.last_arriver.as_ref()?;
    let name = c
        .name
        .as_ref()
        .map_or_else(|| format!("communicator {}", c.id), |n| format!("communicator `{n}` ({})", c.id));
    let host = if l.host.is_empty() { String::new() } else { format!(" on {}", l.host) };
    Some(format!(
        "{name}: rank {}{host} arrives last at {} of the {} collectives its members reported ({:.0}%); the others wait a median {:.1} ms in each ({:.1} ms in all). Its bus bandwidth is the highest of each call: the lowest is the member that waited longest, not a slow link. Look at what rank {} does before these calls.",
        l.rank,
        l.last,
        l.calls,
        100.0 * l.last as f64 / l.calls.max(1) as f64,
        l.wait_p50_us / 1000.0,
        l.wait_total_us as f64 / 1000.0,
        l.rank
    ))
}
