//! A merged, aligned Chrome trace of the whole job, for Perfetto and chrome://tracing.
//!
//! One process per rank (`pid` = rank, named `rank N · file`), one thread per lane (CPU threads
//! first, then GPU streams, in the order `inspect` lists them), every slice and instant with its
//! time moved onto the aligned clock (rank time − the rank's offset) and written relative to the
//! job's first event, in microseconds with three decimals (ns resolution), and launch → kernel
//! flows (`ac2g`). The alignment used is recorded under `otherData.rankscope`, the job's world
//! size and backend in a top-level `distributedInfo` without a rank. Read back, the file is its
//! ranks again ([`crate::normalize::multirank`]: processes named `rank N`).
//!
//! **Args: a hand-off without loss.** Each event's `args` is the source event's own object,
//! verbatim (every key — `Input Dims`, `Input type`, `Sequence number`, kernel `grid` / `block` /
//! `registers per thread` / `shared memory` / `est. achieved occupancy %`, `Collective name`,
//! `In msg nelems`, `Process Group Name`, … — nested values, key order and number spelling as
//! the file wrote them), followed by one member of ours, so that no key of ours can collide with
//! the source's:
//!
//! ```json
//! "args": {"External id": 7, "grid": [1, 1, 1], …,
//!          "rankscope": {"class": "communication", "collective": "all_reduce", "step": 3,
//!                        "aligned_ts_ns": 1694128201426556000}}
//! ```
//!
//! `class` and `collective` are the classification's, `step` the `ProfilerStep#N` the event
//! belongs to, `aligned_ts_ns` its start on the job's aligned clock in ns (own time − the rank's
//! offset; the same in the merged trace and in the archive, whose `ts` stay on the rank's own
//! clock; an integer beyond 2^53, so JavaScript's `JSON.parse` rounds it: read it with a
//! big-integer parser there). This needs the source's args, which the analysis never reads: the parser keeps them
//! only when asked ([`crate::parse::FileIngest::keep_args`]; [`crate::model::raw_args`]: one
//! arena of text per trace and 12 bytes per row, so the default analysis pays nothing). The CLI
//! asks whenever it exports (`--no-source-args` declines). A trace read without them (the web
//! app, which reads files in pieces on several workers, and `--no-source-args`) writes the two
//! ids the parser reads (`correlation`, `External id`) in their source names instead, and the
//! same `rankscope` member. An event whose args could not be kept (not an object) says
//! `"source_args": "not kept"` in its `rankscope` member, beside the file's `args_not_kept`
//! diagnostic. Why in the parse and not a second pass over the files at export time: the app's
//! workers merge a file read in pieces and the host reads gzip once; matching rows to source
//! events again would need a row → file-order index kept anyway (and the parser's repairs
//! replayed exactly), for the same bytes in the end. Counters (`C`) and the source's flow and
//! metadata events are not events of the tables: the flows and names are written afresh.
//!
//! Written as a stream, rank by rank, so the app can build the file from per-worker pieces:
//! [`write_header`], then [`write_rank`] for every rank (each writes a leading comma when it is
//! not the first), then [`write_footer`]. Which ranks, in which order, under which number and on
//! which offsets is the [`ExportPlan`]'s, one for every shell ([`plan`]).
//!
//! [`perfetto`] packs the same per-rank events, each on its rank's own clock, into a Perfetto
//! multi-trace archive whose manifest carries the alignment ([`tar`] is its container), and
//! adds our analysis as tracks Perfetto reads: each rank's steps ([`write_step_track`]).

pub mod columnar;
pub mod perfetto;
pub mod plan;
pub mod tar;

pub use plan::{offset_of, ExportPlan, Planned};

use std::io::{self, Write};

use crate::model::*;
use crate::normalize::job::RankEntry;

/// Writes `"…"`-quoted JSON string content.
pub(crate) fn esc<W: Write + ?Sized>(out: &mut W, s: &str) -> io::Result<()> {
    out.write_all(b"\"")?;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let rep: Option<&[u8]> = match c {
            '"' => Some(b"\\\""),
            '\\' => Some(b"\\\\"),
            '\n' => Some(b"\\n"),
            '\r' => Some(b"\\r"),
            '\t' => Some(b"\\t"),
            c if (c as u32) < 0x20 => None,
            _ => continue,
        };
        out.write_all(&s.as_bytes()[start..i])?;
        match rep {
            Some(r) => out.write_all(r)?,
            None => write!(out, "\\u{:04x}", c as u32)?,
        }
        start = i + c.len_utf8();
    }
    out.write_all(&s.as_bytes()[start..])?;
    out.write_all(b"\"")
}

/// Nanoseconds as microseconds with three decimals, exactly.
fn us<W: Write + ?Sized>(out: &mut W, ns: i64) -> io::Result<()> {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    write!(out, "{sign}{}.{:03}", a / 1000, a % 1000)
}

/// What the merged trace's head says of the job: the top-level `distributedInfo` without a rank
/// (the ranks are the processes, `rank N · file`), when the ranks state them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobInfo {
    pub world_size: Option<i64>,
    pub backend: Option<String>,
}

/// The document's opening, with the alignment used. `origin_ns` is the aligned time written
/// as 0 ([`ExportPlan::origin_ns`]).
pub fn write_header<W: Write>(
    out: &mut W,
    origin_ns: i64,
    offsets: &[(u32, i64, &str)],
    job: &JobInfo,
) -> io::Result<()> {
    out.write_all(
        b"{\"displayTimeUnit\": \"ms\", \"otherData\": {\"rankscope\": {\"generator\": \"rankscope ",
    )?;
    out.write_all(env!("CARGO_PKG_VERSION").as_bytes())?;
    write!(out, "\", \"origin_ns\": {origin_ns}, \"alignment\": [")?;
    for (k, (rank, off, method)) in offsets.iter().enumerate() {
        if k > 0 {
            out.write_all(b", ")?;
        }
        write!(out, "{{\"rank\": {rank}, \"offset_ns\": {off}, \"method\": ")?;
        esc(out, method)?;
        out.write_all(b"}")?;
    }
    out.write_all(b"]}},\n")?;
    if job.world_size.is_some() || job.backend.is_some() {
        out.write_all(b"\"distributedInfo\": {")?;
        if let Some(b) = &job.backend {
            out.write_all(b"\"backend\": ")?;
            esc(out, b)?;
        }
        if let Some(w) = job.world_size {
            let sep = if job.backend.is_some() { ", " } else { "" };
            write!(out, "{sep}\"world_size\": {w}")?;
        }
        out.write_all(b"},\n")?;
    }
    out.write_all(b"\"traceEvents\": [\n")
}

/// Where one rank's events go: under which rank, on which clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The job's key for the file ([`Planned::rank`]: the entry's own number is whatever its
    /// tables were normalized with): its `pid`.
    pub rank: u32,
    /// Its alignment offset: aligned time = own time − this (`rankscope.aligned_ts_ns`).
    pub offset_ns: i64,
    /// Subtracted from its own times to give the written `ts`: offset + origin in the merged
    /// trace, the archive's shift in a Perfetto member.
    pub zero_ns: i64,
}

impl Placement {
    /// A rank of the merged trace: on the aligned clock, relative to `origin_ns`.
    pub fn merged(p: &Planned, origin_ns: i64) -> Placement {
        Placement { rank: p.rank, offset_ns: p.offset_ns, zero_ns: p.offset_ns.saturating_add(origin_ns) }
    }

    /// A rank's member of the Perfetto archive: on its own clock less the plan's shift.
    pub fn member(m: &perfetto::Member, shift_ns: i64) -> Placement {
        Placement { rank: m.rank, offset_ns: m.alignment_ns, zero_ns: shift_ns }
    }
}

/// One rank's events, placed as `at` says. `first` tells whether this is the first piece after
/// the header. Each event's `args` are the source's own, verbatim, when its trace kept them
/// ([`RankTrace::raw_args`]), else the two ids the parser reads (`correlation`, `External id`);
/// either way followed by rankscope's under one key, `rankscope` (the module doc).
pub fn write_rank<W: Write>(
    out: &mut W,
    r: &RankEntry,
    strings: &StringTable,
    at: &Placement,
    first: bool,
) -> io::Result<u64> {
    let t = &r.trace;
    let e = &t.events;
    let rank = at.rank;
    let pid = rank;
    let mut n = 0u64;
    let sep = |out: &mut W, n: &mut u64| -> io::Result<()> {
        if !(first && *n == 0) {
            out.write_all(b",\n")?;
        }
        *n += 1;
        Ok(())
    };
    // Process and thread names, with sort indices so ranks and lanes keep their order.
    sep(out, &mut n)?;
    write!(
        out,
        "{{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": {pid}, \"tid\": 0, \"args\": {{\"name\": "
    )?;
    let file = t.source.rsplit(['/', '\\']).next().unwrap_or(&t.source);
    esc(out, &format!("rank {rank} · {file}"))?;
    out.write_all(b"}}")?;
    sep(out, &mut n)?;
    write!(out, "{{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": {pid}, \"tid\": 0, \"args\": {{\"sort_index\": {pid}}}}}")?;
    for (k, &l) in t.lanes.display_order().iter().enumerate() {
        let name = t.lanes.label(l, strings);
        sep(out, &mut n)?;
        write!(out, "{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {pid}, \"tid\": {l}, \"args\": {{\"name\": ")?;
        esc(out, &name)?;
        out.write_all(b"}}")?;
        sep(out, &mut n)?;
        write!(out, "{{\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": {pid}, \"tid\": {l}, \"args\": {{\"sort_index\": {k}}}}}")?;
    }
    let at_ns = |ts: i64| ts - at.zero_ns;
    for i in 0..e.len() {
        sep(out, &mut n)?;
        let ph = if e.kind[i] == EventKind::Slice { "X" } else { "i" };
        write!(out, "{{\"ph\": \"{ph}\", \"pid\": {pid}, \"tid\": {}, \"ts\": ", e.lane[i].0)?;
        us(out, at_ns(e.ts_ns[i]))?;
        if e.kind[i] == EventKind::Slice {
            out.write_all(b", \"dur\": ")?;
            us(out, e.dur_ns[i])?;
        } else {
            out.write_all(b", \"s\": \"t\"")?;
        }
        out.write_all(b", \"name\": ")?;
        esc(out, strings.get(e.name[i]))?;
        out.write_all(b", \"cat\": ")?;
        esc(out, strings.get(e.cat[i]))?;
        out.write_all(b", \"args\": ")?;
        write_args(out, e, i, t.raw_args.as_ref(), at.offset_ns)?;
        out.write_all(b"}")?;
    }
    // Launch → GPU flows, ids unique across ranks.
    for (k, (g, l)) in r.norm.links.gpu.iter().zip(&r.norm.links.launch).enumerate() {
        let (g, l) = (g.0 as usize, l.0 as usize);
        let id = (u64::from(rank) << 40) | k as u64;
        sep(out, &mut n)?;
        write!(out, "{{\"ph\": \"s\", \"id\": {id}, \"pid\": {pid}, \"tid\": {}, \"ts\": ", e.lane[l].0)?;
        us(out, at_ns(e.ts_ns[l]))?;
        out.write_all(b", \"cat\": \"ac2g\", \"name\": \"ac2g\"}")?;
        sep(out, &mut n)?;
        write!(out, "{{\"ph\": \"f\", \"id\": {id}, \"pid\": {pid}, \"tid\": {}, \"ts\": ", e.lane[g].0)?;
        us(out, at_ns(e.ts_ns[g]))?;
        out.write_all(b", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}")?;
    }
    Ok(n)
}

/// Row `i`'s `args` object: the source's members (or the ids), then `"rankscope": {…}`.
fn write_args<W: Write>(
    out: &mut W,
    e: &EventTable,
    i: usize,
    raw: Option<&RawArgs>,
    offset_ns: i64,
) -> io::Result<()> {
    let source = raw.and_then(|r| r.get(i));
    match source {
        // The event had no `args`.
        Some([]) => out.write_all(b"{")?,
        // The object without its closing brace; a comma only after a member.
        Some(obj) => {
            let inner = obj.strip_suffix(b"}").unwrap_or(obj);
            out.write_all(inner)?;
            let empty = inner.iter().all(|b| b"{ \t\r\n".contains(b));
            if !empty {
                out.write_all(b", ")?;
            }
        }
        None => {
            out.write_all(b"{")?;
            if e.correlation[i] != NONE_U64 {
                write!(out, "\"correlation\": {}, ", e.correlation[i])?;
            }
            if e.external_id[i] != NONE_U64 {
                write!(out, "\"External id\": {}, ", e.external_id[i])?;
            }
        }
    }
    write!(out, "\"rankscope\": {{\"class\": \"{}\"", e.class[i].name())?;
    let coll = e.coll_kind(i);
    if coll != CollKind::Unknown {
        write!(out, ", \"collective\": \"{}\"", coll.name())?;
    }
    if e.step[i] != NONE_U32 {
        write!(out, ", \"step\": {}", e.step[i])?;
    }
    write!(out, ", \"aligned_ts_ns\": {}", e.ts_ns[i].saturating_sub(offset_ns))?;
    if raw.is_some() && source.is_none() {
        // Said per event, beside the file's `args_not_kept` diagnostic.
        out.write_all(b", \"source_args\": \"not kept\"")?;
    }
    out.write_all(b"}}")
}

/// The category of the tracks rankscope adds to a Perfetto member (never a source's).
pub const OUR_CAT: &str = "rankscope";

/// Our analysis as a track of the rank's Perfetto member, after its events: a thread
/// `rankscope · steps` (the `tid` after every lane's, listed first) with a slice per step
/// (`step N`, the step's window on the rank's clock; an inference engine's iterations alike),
/// `cat` [`OUR_CAT`], `args.rankscope` saying the step and its aligned start. Only in the
/// archive: the merged trace is read back as its ranks (`normalize::multirank`), where a track
/// of ours would be read as a thread of the rank's.
pub fn write_step_track<W: Write + ?Sized>(out: &mut W, r: &RankEntry, at: &Placement) -> io::Result<()> {
    let steps = &r.norm.steps;
    if steps.is_empty() {
        return Ok(());
    }
    let (pid, tid) = (at.rank, r.trace.lanes.len());
    write!(out, ",\n{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {pid}, \"tid\": {tid}, \"args\": {{\"name\": \"rankscope · steps\"}}}}")?;
    write!(out, ",\n{{\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": {pid}, \"tid\": {tid}, \"args\": {{\"sort_index\": -1}}}}")?;
    for k in 0..steps.len() {
        let (start, end) = (steps.start_ns[k], steps.end_ns[k]);
        write!(out, ",\n{{\"ph\": \"X\", \"pid\": {pid}, \"tid\": {tid}, \"ts\": ")?;
        us(out, start - at.zero_ns)?;
        out.write_all(b", \"dur\": ")?;
        us(out, end.saturating_sub(start).max(0))?;
        let n = steps.number[k];
        write!(
            out,
            ", \"name\": \"step {n}\", \"cat\": \"{OUR_CAT}\", \"args\": {{\"rankscope\": {{\"class\": \"step\", \"step\": {n}, \"aligned_ts_ns\": {}, \"synthetic\": {}}}}}}}",
            start.saturating_sub(at.offset_ns),
            steps.synthetic
        )?;
    }
    Ok(())
}

pub fn write_footer<W: Write + ?Sized>(out: &mut W) -> io::Result<()> {
    out.write_all(b"\n]}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_are_exact() {
        let mut v = Vec::new();
        us(&mut v, 1_234_567).unwrap_or(());
        us(&mut v, -1_500).unwrap_or(());
        us(&mut v, 7).unwrap_or(());
        assert_eq!(String::from_utf8_lossy(&v), "1234.567-1.5000.007");
    }

    #[test]
    fn strings_are_escaped() {
        let mut v = Vec::new();
        esc(&mut v, "a\"b\\c\nd\u{1}é").unwrap_or(());
        assert_eq!(String::from_utf8_lossy(&v), "\"a\\\"b\\\\c\\nd\\u0001é\"");
    }
}
