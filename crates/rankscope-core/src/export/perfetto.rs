//! A Perfetto multi-trace archive of the job: one Chrome JSON trace per rank and a
//! `perfetto_manifest.json` (version 1) that gives every rank its own machine and pins every
//! rank's file to the reference rank's (the lowest rank) with our estimated clock offset, in a
//! plain tar. Perfetto (the UI and `trace_processor`) then shows each rank as a machine of its
//! own on one timeline aligned as rankscope aligned it; the manifest format is Perfetto's
//! docs/reference/perfetto-manifest.md.
//!
//! **Clocks.** Each rank's file keeps the rank's own clock (no offset applied), so the archive
//! carries the raw data plus the relation, and Perfetto does the alignment. Chrome JSON has no
//! clock of its own, so each file is *pinned* (a `clocks` entry without `clock`): "at a common
//! instant the source reads T when the reference reads T + `offset_ns`". With our convention
//! (aligned time = own time − `offset_ns` of the rank, analyze/align.rs), a rank `r` pinned to
//! the reference `q` gets `offset_ns = offset(q) − offset(r)`.
//!
//! **Shift.** Perfetto drops events that a pin moves before time 0. Every file is therefore
//! written with one common shift `S` subtracted from its own times (which leaves every relation
//! unchanged), chosen so that the job's earliest event lands at exactly 0 on the reference's
//! timeline: `S = origin + offset(q)`, where `origin` is the merged trace's time 0 (the earliest
//! aligned start over all ranks, [`super::origin`]).
//!
//! **Streaming.** A rank's file is written twice into the tar (once only counted, for the
//! header's size; [`tar::write_streamed`]), so it is never held whole; in the app each worker
//! writes its own rank's member and the UI appends the manifest and the end of the archive.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use super::{esc, tar};

/// Name of the manifest member (Perfetto recognises a manifest by content; this is the name its
/// UI gives one).
pub const MANIFEST: &str = "perfetto_manifest.json";

/// One rank's file in the archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub rank: u32,
    /// The member's path in the tar (`rank3.json`; `rank3-2.json` for a second file claiming
    /// rank 3).
    pub path: String,
    /// The Perfetto machine it belongs to (`rank 3`).
    pub machine: String,
    /// The rank's alignment offset (aligned time = own time − this).
    pub alignment_ns: i64,
    pub method: String,
    /// The manifest's `offset_ns` pinning this file to the reference file; `None` for the
    /// reference itself.
    pub pin_ns: Option<i64>,
}

/// What goes into the archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// In the order of the ranks given to [`plan`]; the first is the reference.
    pub members: Vec<Member>,
    /// Subtracted from every rank's own times when its file is written.
    pub shift_ns: i64,
}

/// Plans the archive for ranks `(rank, alignment offset, alignment method)` in job order (by
/// rank; the first is the reference), with `origin_ns` the merged trace's time 0.
pub fn plan(ranks: &[(u32, i64, &str)], origin_ns: i64) -> Plan {
    let reference = ranks.first().map_or(0, |r| r.1);
    let mut members: Vec<Member> = Vec::with_capacity(ranks.len());
    for (k, &(rank, off, method)) in ranks.iter().enumerate() {
        let dup = members.iter().filter(|m| m.rank == rank).count();
        let (path, machine) = if dup == 0 {
            (format!("rank{rank}.json"), format!("rank {rank}"))
        } else {
            (format!("rank{rank}-{}.json", dup + 1), format!("rank {rank} #{}", dup + 1))
        };
        members.push(Member {
            rank,
            path,
            machine,
            alignment_ns: off,
            method: method.to_string(),
            pin_ns: (k > 0).then_some(reference - off),
        });
    }
    Plan { members, shift_ns: origin_ns.saturating_add(reference) }
}

#[derive(Serialize)]
struct Doc<'a> {
    perfetto_manifest: Manifest<'a>,
}

#[derive(Serialize)]
struct Manifest<'a> {
    version: u32,
    files: Vec<FileEntry<'a>>,
    attributes: Attributes<'a>,
}

#[derive(Serialize)]
struct FileEntry<'a> {
    path: &'a str,
    machine: Machine<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    clocks: Option<Clocks<'a>>,
}

#[derive(Serialize)]
struct Machine<'a> {
    name: &'a str,
}

#[derive(Serialize)]
struct Clocks<'a> {
    sync_to: SyncTo<'a>,
    offset_ns: i64,
}

#[derive(Serialize)]
struct SyncTo<'a> {
    file: &'a str,
}

#[derive(Serialize)]
struct Attributes<'a> {
    #[serde(rename = "rankscope.generator")]
    generator: String,
    #[serde(rename = "rankscope.reference_rank")]
    reference_rank: u32,
    #[serde(rename = "rankscope.shift_ns")]
    shift_ns: i64,
    #[serde(rename = "rankscope.clock")]
    clock: &'a str,
}

/// The manifest's JSON text.
pub fn manifest(p: &Plan) -> String {
    let reference = p.members.first().map_or("", |m| m.path.as_str());
    let doc = Doc {
        perfetto_manifest: Manifest {
            version: 1,
            files: p
                .members
                .iter()
                .map(|m| FileEntry {
                    path: &m.path,
                    machine: Machine { name: &m.machine },
                    clocks: m
                        .pin_ns
                        .map(|offset_ns| Clocks { sync_to: SyncTo { file: reference }, offset_ns }),
                })
                .collect(),
            attributes: Attributes {
                generator: format!("rankscope {}", env!("CARGO_PKG_VERSION")),
                reference_rank: p.members.first().map_or(0, |m| m.rank),
                shift_ns: p.shift_ns,
                clock:
                    "each file is its rank's own clock minus rankscope.shift_ns; the pins carry the alignment",
            },
        },
    };
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

/// The opening of a rank's own document: what the file is and how it relates to the others.
pub fn write_rank_header<W: Write + ?Sized>(out: &mut W, m: &Member, shift_ns: i64) -> io::Result<()> {
    out.write_all(
        b"{\"displayTimeUnit\": \"ms\", \"otherData\": {\"rankscope\": {\"generator\": \"rankscope ",
    )?;
    out.write_all(env!("CARGO_PKG_VERSION").as_bytes())?;
    write!(
        out,
        "\", \"rank\": {}, \"clock\": \"own\", \"shift_ns\": {}, \"offset_ns\": {}, \"method\": ",
        m.rank, shift_ns, m.alignment_ns
    )?;
    esc(out, &m.method)?;
    out.write_all(b"}},\n\"traceEvents\": [\n")
}

/// One rank's member: `events` writes the rank's events (the merged trace's
/// [`super::write_rank`] with offset 0, origin `shift_ns` ([`Plan::shift_ns`]) and `first`
/// true); it is called twice (see the module doc).
pub fn write_member<W, F>(out: &mut W, m: &Member, shift_ns: i64, mut events: F) -> io::Result<u64>
where
    W: Write,
    F: FnMut(&mut dyn Write) -> io::Result<()>,
{
    tar::write_streamed(out, &m.path, |w| {
        write_rank_header(w, m, shift_ns)?;
        events(w)?;
        super::write_footer(w)
    })
}

/// The manifest member and the end of the archive: what follows the ranks' members.
pub fn write_tail<W: Write>(out: &mut W, p: &Plan) -> io::Result<()> {
    tar::write_file(out, MANIFEST, manifest(p).as_bytes())?;
    tar::write_end(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_offsets_to_the_reference_and_the_shift_keeps_time_non_negative() {
        let p = plan(&[(0, 100, "seq"), (1, -2_000, "seq"), (1, 50, "none"), (3, 7_000, "step")], 1_000_000);
        let paths: Vec<&str> = p.members.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(paths, ["rank0.json", "rank1.json", "rank1-2.json", "rank3.json"]);
        let pins: Vec<Option<i64>> = p.members.iter().map(|m| m.pin_ns).collect();
        assert_eq!(pins, [None, Some(2_100), Some(50), Some(-6_900)]);
        assert_eq!(p.shift_ns, 1_000_100);
        let v: serde_json::Value = serde_json::from_str(&manifest(&p)).unwrap_or_default();
        let m = &v["perfetto_manifest"];
        assert_eq!(m["version"], 1);
        assert_eq!(m["files"][0]["machine"]["name"], "rank 0");
        assert!(m["files"][0].get("clocks").is_none());
        assert_eq!(m["files"][3]["clocks"]["sync_to"]["file"], "rank0.json");
        assert!(m["files"][3]["clocks"]["sync_to"].get("clock").is_none(), "a pin, not a relation");
        assert_eq!(m["files"][3]["clocks"]["offset_ns"], -6_900);
        assert_eq!(m["files"][2]["machine"]["name"], "rank 1 #2");
        assert!(manifest(&p).starts_with("{\n  \"perfetto_manifest\""));
    }
}
