//! A merged, aligned Chrome trace of the whole job, for Perfetto and chrome://tracing.
//!
//! One process per rank (`pid` = rank, named `rank N · file`), one thread per lane (CPU threads
//! first, then GPU streams, in the order `inspect` lists them), every slice and instant with its
//! time moved onto the aligned clock (rank time − the rank's offset) and written relative to the
//! job's first event, in microseconds with three decimals (ns resolution), launch → kernel
//! flows (`ac2g`), and `args` holding rankscope's class, step and the original ids. The
//! alignment used is recorded under `otherData.rankscope`, the job's world size and backend in
//! a top-level `distributedInfo` without a rank. Read back, the file is its ranks again
//! ([`crate::normalize::multirank`]: processes named `rank N`).
//!
//! Written as a stream, rank by rank, so the app can build the file from per-worker pieces:
//! [`write_header`], then [`write_rank`] for every rank (each writes a leading comma when it is
//! not the first), then [`write_footer`]. Which ranks, in which order, under which number and on
//! which offsets is the [`ExportPlan`]'s, one for every shell ([`plan`]).
//!
//! [`perfetto`] packs the same per-rank events, each on its rank's own clock, into a Perfetto
//! multi-trace archive whose manifest carries the alignment ([`tar`] is its container).

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
fn us<W: Write>(out: &mut W, ns: i64) -> io::Result<()> {
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

/// One rank's events, written as rank `rank` (the job's key for the file, [`Planned::rank`]:
/// the entry's own number is whatever its tables were normalized with). `first` tells whether
/// this is the first piece after the header.
pub fn write_rank<W: Write>(
    out: &mut W,
    r: &RankEntry,
    strings: &StringTable,
    rank: u32,
    offset_ns: i64,
    origin_ns: i64,
    first: bool,
) -> io::Result<u64> {
    let t = &r.trace;
    let e = &t.events;
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
    let at = |ts: i64| ts - offset_ns - origin_ns;
    for i in 0..e.len() {
        sep(out, &mut n)?;
        let ph = if e.kind[i] == EventKind::Slice { "X" } else { "i" };
        write!(out, "{{\"ph\": \"{ph}\", \"pid\": {pid}, \"tid\": {}, \"ts\": ", e.lane[i].0)?;
        us(out, at(e.ts_ns[i]))?;
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
        write!(out, ", \"args\": {{\"class\": \"{}\"", e.class[i].name())?;
        let coll = e.coll_kind(i);
        if coll != CollKind::Unknown {
            write!(out, ", \"collective\": \"{}\"", coll.name())?;
        }
        if e.step[i] != NONE_U32 {
            write!(out, ", \"step\": {}", e.step[i])?;
        }
        if e.correlation[i] != NONE_U64 {
            write!(out, ", \"correlation\": {}", e.correlation[i])?;
        }
        if e.external_id[i] != NONE_U64 {
            write!(out, ", \"External id\": {}", e.external_id[i])?;
        }
        out.write_all(b"}}")?;
    }
    // Launch → GPU flows, ids unique across ranks.
    for (k, (g, l)) in r.norm.links.gpu.iter().zip(&r.norm.links.launch).enumerate() {
        let (g, l) = (g.0 as usize, l.0 as usize);
        let id = (u64::from(rank) << 40) | k as u64;
        sep(out, &mut n)?;
        write!(out, "{{\"ph\": \"s\", \"id\": {id}, \"pid\": {pid}, \"tid\": {}, \"ts\": ", e.lane[l].0)?;
        us(out, at(e.ts_ns[l]))?;
        out.write_all(b", \"cat\": \"ac2g\", \"name\": \"ac2g\"}")?;
        sep(out, &mut n)?;
        write!(out, "{{\"ph\": \"f\", \"id\": {id}, \"pid\": {pid}, \"tid\": {}, \"ts\": ", e.lane[g].0)?;
        us(out, at(e.ts_ns[g]))?;
        out.write_all(b", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}")?;
    }
    Ok(n)
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
