//! PyTorch Flight Recorder dumps: one file per rank, as an input next to traces.
//!
//! torch's c10d keeps a ring buffer of the last `TORCH_FR_BUFFER_SIZE` (formerly
//! `TORCH_NCCL_TRACE_BUFFER_SIZE`) collectives each process issued and writes it on a timeout
//! (`TORCH_FR_DUMP_TEMP_FILE<rank>`, formerly `TORCH_NCCL_DEBUG_INFO_TEMP_FILE`) or on request
//! (`torch._C._distributed_c10d._dump_fr_trace()`). The format, as torch 2.15 writes it
//! (`FlightRecorderDetail.hpp`, dump version `"2.10"`), and as we read it:
//!
//! - **Pickle** (the default; [`pickle`]): a dict with `version`, `pg_config` (group name →
//!   `{name, desc, ranks: "[0, 1]"}`), `comm_lib_version` (`""` on gloo), `pg_status`
//!   (`pg_id` as a string → `last_enqueued_collective`, `last_started_collective`,
//!   `last_completed_collective`), `entries` (absent when collectives were not asked for) and,
//!   on NCCL, `nccl_comm_state`.
//! - **JSON** (`_dump_fr_trace_json()`): the same members with sorted keys, no `frames`, the
//!   `pg_status` numbers as strings, `process_group` as a list, and `0` where the pickle has
//!   `None` for a time not seen; `entries` is left out when empty.
//! - **An entry**: `record_id`, `pg_id` (local to the process: group `"1"` may be pg_id 1 on
//!   one rank and pg_id 2 on another; we key groups by name), `process_group` (name, desc),
//!   `collective_seq_id` (per group, per process: the n-th collective this process issued in
//!   the group; coalesced ops share one), `p2p_seq_id`, `op_id`, `profiling_name`
//!   (`nccl:all_reduce`, `gloo:broadcast`), `time_created_ns` (wall clock at enqueue),
//!   `time_discovered_started_ns` / `time_discovered_completed_ns` (when the watchdog saw it;
//!   NCCL only), `duration_ms` (NCCL with timing enabled), `input_sizes` / `output_sizes`
//!   (a shape per tensor), `input_dtypes` / `output_dtypes` (`Float`), `state`
//!   (`scheduled` / `started` / `completed`), `retired`, `timeout_ms`, `is_p2p`,
//!   `thread_name`, `thread_id` and, in the pickle when stacks were asked for, `frames`
//!   (`name`, `filename`, `line`, innermost first).
//!
//! **What is trusted.** On NCCL, `state` and the discovered times come from CUDA events read by
//! the watchdog: a `completed` entry did complete. On gloo, every entry stays `scheduled`,
//! `retired` is true even for the collective a rank hangs in, `pg_status` reports the last
//! enqueued collective as the last completed, and `pg_config` keeps one group (sub-groups
//! overwrite each other): none of these are used on gloo; the sequences are compared instead
//! ([`crate::sequence`]). The dump has no "now": how long a rank has been waiting is not known
//! from a dump alone, only since when.
//!
//! A dump's rank: its `rank` member when present (torch 2.15 writes none), else a number in the
//! file name (`nccl_trace_rank_3`, `fr_trace_rank_3.json`; torch's default writer names files
//! `<prefix><rank>`), else the load order.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::model::{DiagKind, Diagnostic, Diagnostics};
use crate::normalize::coll_kind_of;
use crate::sequence::{self, Backend, CollRecord, Frame, RankSeq, SeqOptions, SequenceReport, Source, State};

mod decode;
pub mod output;
pub mod pickle;

/// Ranks a dump may claim (its `rank`, its file name, `pg_config`) are below this: the limit a
/// trace's world size has ([`crate::parse::kineto::MAX_WORLD_SIZE`], 2^24). A claim beyond it is
/// an `out_of_range` diagnostic on the dump, never a size.
pub const MAX_RANK: u32 = 1 << 24;

/// The ranks below the highest one seen are presumed to be the job's (a world is `0..n`) only
/// up to this many, or 16 per rank the inputs name, whichever is more: a rank number is a claim
/// of a few bytes, the ranks it would presume are a report's rows.
pub const MAX_PRESUMED_RANKS: usize = 1 << 16;

/// The encoding of a dump file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DumpFormat {
    Pickle,
    Json,
}

/// One group as `pg_config` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgConfig {
    /// The key in `pg_config`.
    pub key: String,
    pub name: String,
    pub desc: String,
    /// Global ranks, parsed from the `ranks` text (`"[0, 1, 2]"`).
    pub ranks: Vec<u32>,
}

/// One group as `pg_status` describes it (by the process-local `pg_id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgStatus {
    pub pg_id: String,
    pub last_enqueued: Option<i64>,
    pub last_started: Option<i64>,
    pub last_completed: Option<i64>,
}

/// One entry of the ring buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub record_id: i64,
    pub pg_id: i64,
    pub pg_name: String,
    pub pg_desc: String,
    pub collective_seq_id: i64,
    pub p2p_seq_id: i64,
    pub op_id: i64,
    pub profiling_name: String,
    pub time_created_ns: i64,
    pub time_discovered_started_ns: Option<i64>,
    pub time_discovered_completed_ns: Option<i64>,
    pub duration_ms: Option<f64>,
    pub input_sizes: Vec<Vec<i64>>,
    pub input_dtypes: Vec<String>,
    pub output_sizes: Vec<Vec<i64>>,
    pub output_dtypes: Vec<String>,
    pub state: State,
    pub is_p2p: bool,
    pub retired: bool,
    pub timeout_ms: Option<i64>,
    pub thread_name: String,
    pub thread_id: String,
    /// Indices into [`FrDump::frames`], innermost first.
    pub frames: Vec<u32>,
    /// Byte offset of the entry in a pickle (none for JSON).
    pub offset: Option<u64>,
}

/// One rank's dump.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrDump {
    pub file: String,
    pub format: DumpFormat,
    pub version: String,
    /// The dump's own `rank` member, when it has one.
    pub rank: Option<u32>,
    pub comm_lib_version: String,
    pub pg_config: Vec<PgConfig>,
    pub pg_status: Vec<PgStatus>,
    /// Every distinct stack frame, shared by the entries.
    pub frames: Vec<Frame>,
    pub entries: Vec<Entry>,
    pub diagnostics: Vec<Diagnostic>,
}

impl FrDump {
    /// The backend, from the entries' names.
    pub fn backend(&self) -> Backend {
        self.entries
            .iter()
            .map(|e| Backend::of_name(&e.profiling_name))
            .find(|b| *b != Backend::Unknown)
            .unwrap_or(if self.comm_lib_version.is_empty() { Backend::Unknown } else { Backend::Nccl })
    }

    /// The rank's sequence for the mismatch engine.
    pub fn rank_seq(&self, rank: u32) -> RankSeq {
        let backend = self.backend();
        let records = self
            .entries
            .iter()
            .map(|e| {
                let frames: Vec<Frame> =
                    e.frames.iter().filter_map(|&i| self.frames.get(i as usize).cloned()).collect();
                let label = sequence::user_frame(&frames).map(|f| f.name.clone());
                let kind = coll_kind_of(&e.profiling_name);
                // On gloo the state never leaves `scheduled`: unknown, not "not started".
                let state = if backend == Backend::Gloo { State::Unknown } else { e.state };
                CollRecord {
                    pg: group_key(e),
                    pg_desc: e.pg_desc.clone(),
                    kind,
                    name: e.profiling_name.clone(),
                    seq: (!e.is_p2p).then_some(e.collective_seq_id),
                    p2p_seq: e.is_p2p.then_some(e.p2p_seq_id),
                    p2p: e.is_p2p,
                    in_sizes: e.input_sizes.clone(),
                    in_dtypes: e.input_dtypes.clone(),
                    out_sizes: e.output_sizes.clone(),
                    out_dtypes: e.output_dtypes.clone(),
                    bytes: None,
                    state,
                    start_ns: Some(e.time_created_ns),
                    end_ns: e.time_discovered_completed_ns.filter(|_| backend != Backend::Gloo),
                    step: None,
                    label,
                    frames,
                    timeout_ms: e.timeout_ms,
                }
            })
            .collect();
        RankSeq { rank, source: Source::FlightRecorder, backend, file: self.file.clone(), records }
    }
}

/// The group an entry belongs to: its name, the same on every rank. Under
/// `TORCH_DISTRIBUTED_DEBUG=DETAIL` every group is named `("", "")` (the wrapped groups), and
/// the process-local `pg_id` is then the only way to tell them apart (it agrees across ranks
/// when every rank created the same groups in the same order, as torch requires).
pub fn group_key(e: &Entry) -> String {
    if e.pg_name.is_empty() {
        e.pg_id.to_string()
    } else {
        e.pg_name.clone()
    }
}

/// Why a file could not be read as a dump at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {}{what}", offset.map(|o| format!("byte {o}: ")).unwrap_or_default())]
pub struct FrError {
    pub file: String,
    pub offset: Option<u64>,
    pub what: String,
}

const TOP_KEYS: &[&[u8]] =
    &[b"version", b"entries", b"pg_config", b"pg_status", b"comm_lib_version", b"nccl_comm_state"];
const ENTRY_KEYS: &[&[u8]] = &[b"collective_seq_id", b"profiling_name", b"record_id"];

/// Whether `head` (the first bytes of a file, 64 KiB is plenty) is a Flight Recorder dump: a
/// binary pickle naming `version` and one of `entries` / `pg_config` / `pg_status`, or a JSON
/// object whose first member is one of the dump's top-level keys and that names at least two of
/// the dump's keys (torch writes the JSON with sorted keys, so a big `entries` hides `version`
/// beyond the head).
pub fn sniff(head: &[u8]) -> bool {
    if head.starts_with(&[0x1f, 0x8b]) {
        // A gzipped dump: look at what the head inflates to (the head's stream is cut).
        let mut out = Vec::new();
        let mut z = crate::parse::gzip::Gunzip::default();
        z.feed(head, &mut |b| {
            if out.len() < 64 << 10 {
                out.extend_from_slice(b);
            }
        });
        return !out.starts_with(&[0x1f, 0x8b]) && sniff(&out);
    }
    let has = |k: &[u8]| memchr::memmem::find(head, k).is_some();
    if pickle::looks_like_pickle(head) {
        return has(b"version") && (has(b"entries") || has(b"pg_config") || has(b"pg_status"));
    }
    let body = head.strip_prefix(&[0xEF, 0xBB, 0xBF][..]).unwrap_or(head);
    let start = body.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(body.len());
    let rest = &body[start..];
    let Some(rest) = rest.strip_prefix(b"{") else { return false };
    let k0 = rest.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(rest.len());
    let Some(key) = rest[k0..].strip_prefix(b"\"") else { return false };
    let Some(end) = key.iter().position(|&b| b == b'"') else { return false };
    if !TOP_KEYS.contains(&&key[..end]) {
        return false;
    }
    let quoted = |k: &[u8]| {
        let mut q = Vec::with_capacity(k.len() + 3);
        q.push(b'"');
        q.extend_from_slice(k);
        q.extend_from_slice(b"\":");
        memchr::memmem::find(head, &q).is_some()
    };
    TOP_KEYS.iter().chain(ENTRY_KEYS).filter(|k| quoted(k)).count() >= 2
}

/// Reads one dump (pickle or JSON, told by content). Only "not a dump at all" is an error;
/// an entry that cannot be read is skipped and counted in [`FrDump::diagnostics`].
pub fn read(file: &str, bytes: &[u8]) -> Result<FrDump, FrError> {
    decode::read(file, bytes)
}

/// Where a dump's rank came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankFrom {
    /// The dump's own `rank` member.
    Dump,
    FileName,
    LoadOrder,
}

/// A dump with its rank decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankedDump {
    pub rank: u32,
    pub rank_from: RankFrom,
    pub dump: FrDump,
}

/// A dump left out of the job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedDump {
    pub file: String,
    pub reason: String,
}

/// Decides every dump's rank: the dump's `rank` member, else the file name, else the smallest
/// rank nobody claimed, in the order given (a diagnostic on the dump says which). When two
/// dumps claim one rank, one is kept: the pickle over the JSON form (it has the stack frames;
/// torch can write both), else the first given; the other is skipped and said so.
pub fn decide_ranks(dumps: Vec<FrDump>) -> (Vec<RankedDump>, Vec<SkippedDump>) {
    use crate::normalize::job::rank_from_name;
    let claim = |d: &FrDump| {
        d.rank.map(|r| (r, RankFrom::Dump)).or_else(|| {
            rank_from_name(&d.file).or_else(|| trailing_number(&d.file)).map(|r| (r, RankFrom::FileName))
        })
    };
    // A file name's number beyond any world is not a rank ([`MAX_RANK`]): the dump is ranked as
    // if its name had none, and says so.
    let mut refused: Vec<Option<u32>> = Vec::with_capacity(dumps.len());
    let claims: Vec<Option<(u32, RankFrom)>> = dumps
        .iter()
        .map(|d| match claim(d) {
            Some((r, _)) if r >= MAX_RANK => {
                refused.push(Some(r));
                None
            }
            c => {
                refused.push(None);
                c
            }
        })
        .collect();
    // The kept dump of each claimed rank.
    let mut keep: BTreeMap<u32, usize> = BTreeMap::new();
    for (i, c) in claims.iter().enumerate() {
        let Some((r, _)) = c else { continue };
        match keep.get(r) {
            Some(&k) if !(dumps[k].format == DumpFormat::Json && dumps[i].format == DumpFormat::Pickle) => {}
            _ => {
                keep.insert(*r, i);
            }
        }
    }
    let mut taken: BTreeSet<u32> = keep.keys().copied().collect();
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let mut next = 0u32;
    for (i, (mut d, c)) in dumps.into_iter().zip(claims).enumerate() {
        let mut diags = Diagnostics::default();
        for x in d.diagnostics.drain(..) {
            diags.add_n(x.kind, x.count, x.first_offset, || x.message.clone());
        }
        if let Some(r) = refused.get(i).copied().flatten() {
            diags.add(DiagKind::OutOfRange, None, || {
                format!("the file name's number {r} is not a rank (0 to {}); ignored", MAX_RANK - 1)
            });
        }
        let (rank, from) = match c {
            Some((r, from)) => {
                if keep.get(&r) != Some(&i) {
                    skipped.push(SkippedDump {
                        file: d.file.clone(),
                        reason: format!("another dump of rank {r} is read instead"),
                    });
                    continue;
                }
                if from == RankFrom::FileName {
                    diags.add(DiagKind::RankFromFileName, None, || {
                        format!("no `rank` in the dump: rank {r} taken from the file name")
                    });
                }
                (r, from)
            }
            None => {
                while taken.contains(&next) {
                    next += 1;
                }
                taken.insert(next);
                let r = next;
                diags.add(DiagKind::RankFromLoadOrder, None, || {
                    format!("neither the dump nor its file name tells the rank: rank {r} given by load order")
                });
                (r, RankFrom::LoadOrder)
            }
        };
        d.diagnostics = diags.sorted();
        out.push(RankedDump { rank, rank_from: from, dump: d });
    }
    out.sort_by_key(|d| d.rank);
    (out, skipped)
}

/// The digits at the end of a file's base name, extensions removed (`trace_7.json` → 7).
fn trailing_number(path: &str) -> Option<u32> {
    let base = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let stem = base.split('.').next().unwrap_or(base);
    let digits: String = stem.chars().rev().take_while(|c| c.is_ascii_digit()).collect();
    if digits.is_empty() {
        return None;
    }
    digits.chars().rev().collect::<String>().parse().ok()
}

/// The engine's options from a set of dumps: the expected ranks (every rank `pg_config`
/// lists, and every rank below the highest one seen: a world is `0..n`), the group that
/// holds them all.
pub fn options(dumps: &[RankedDump]) -> SeqOptions {
    let world = presumed_world(dumps).0;
    // The group every dump has entries in and with the most entries is the default group
    // (`default_pg`); its name is "0" in torch.
    let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for d in dumps {
        let mut seen = BTreeSet::new();
        for e in &d.dump.entries {
            let k = group_key(e);
            if seen.insert(k.clone()) {
                counts.entry(k.clone()).or_insert((0, 0)).0 += 1;
            }
            counts.entry(k).or_insert((0, 0)).1 += 1;
        }
    }
    let world_group = dumps
        .iter()
        .flat_map(|d| d.dump.entries.iter())
        .find(|e| e.pg_desc == "default_pg")
        .map(group_key)
        .or_else(|| {
            counts
                .iter()
                .filter(|(_, c)| c.0 == dumps.len())
                .max_by_key(|(_, c)| c.1)
                .map(|(k, _)| k.to_string())
        });
    SeqOptions { world: world.into_iter().collect(), world_group, groups: BTreeMap::new(), timeout_ms: None }
}

/// The ranks the job is presumed to have (every rank `pg_config` lists, and every rank below the
/// highest one seen), when they are at most [`MAX_PRESUMED_RANKS`] or 16 per dump; else only the
/// ranks with a dump, and a note saying how many were claimed (each presumed rank is a row of the
/// report: a few bytes of `pg_config` must not make a million).
fn presumed_world(dumps: &[RankedDump]) -> (BTreeSet<u32>, Option<String>) {
    let have: BTreeSet<u32> = dumps.iter().map(|d| d.rank).collect();
    let cap = MAX_PRESUMED_RANKS.max(16 * dumps.len());
    let mut world = have.clone();
    for d in dumps {
        for c in &d.dump.pg_config {
            world.extend(c.ranks.iter().copied());
            if world.len() > cap {
                break;
            }
        }
    }
    let max = world.iter().next_back().copied().unwrap_or(0);
    if world.len() > cap || max as usize >= cap {
        let note = format!(
            "the dumps claim a world of at least {} ranks (`pg_config`, a rank number): more than {cap} \
             presumed ranks are not listed one by one; only the {} ranks with a dump are",
            world.len().max(max as usize + 1),
            have.len()
        );
        return (have, Some(note));
    }
    world.extend(0..max);
    (world, None)
}

/// The hook for the analysis: the sequence report of a job's dumps (one per rank).
pub fn job_report(dumps: &[RankedDump]) -> SequenceReport {
    let seqs: Vec<RankSeq> = dumps.iter().map(|d| d.dump.rank_seq(d.rank)).collect();
    let mut r = sequence::analyze(&seqs, &options(dumps));
    r.notes.extend(presumed_world(dumps).1);
    let entries = dumps.iter().flat_map(|d| d.dump.entries.iter());
    if entries.clone().next().is_some() && entries.clone().all(|e| e.pg_name.is_empty()) {
        r.notes.push(
            "the process groups have no names (TORCH_DISTRIBUTED_DEBUG=DETAIL wraps them): groups are \
             told apart by pg_id, and a mismatch the wrapper's check caught before the collective was \
             enqueued is not in the dumps"
                .to_string(),
        );
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_by_content() {
        assert!(sniff(
            b"\x80\x02}(X\x07\x00\x00\x00versionq\x00X\x04\x00\x00\x002.10q\x01X\x09\x00\x00\x00pg_config"
        ));
        assert!(!sniff(b"\x80\x02}(X\x07\x00\x00\x00other"));
        assert!(sniff(br#"{"comm_lib_version":"","entries":[{"collective_seq_id":1"#));
        assert!(sniff(b" \n{ \"version\": \"2.10\", \"pg_config\": {}}"));
        assert!(!sniff(br#"{"schemaVersion":1,"traceEvents":[]}"#));
        assert!(!sniff(br#"{"version":"1.0"}"#));
        assert!(!sniff(b""));
        assert!(!sniff(b"NCCL INFO"));
    }

    #[test]
    fn trailing_numbers() {
        assert_eq!(trailing_number("/tmp/nccl_trace_rank_12"), Some(12));
        assert_eq!(trailing_number("x/dump7.json"), Some(7));
        assert_eq!(trailing_number("dump.json"), None);
    }
}
