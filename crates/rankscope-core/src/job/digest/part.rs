//! The part (`RSPART`): what one input file contributes to a job, as bytes that cross a process
//! or machine boundary (a Ray task, a Slurm array task, a Kubernetes indexed job) to be combined
//! elsewhere by the job API: a trace's `(RankClaim, RankPart)` (the job's `part_of`), or a text
//! input (NCCL log, nccl-tests output, Flight Recorder dump) kept whole. The events never
//! travel: a part is the per-rank half of the analysis (kB to a few MB).
//!
//! Layout, version 1:
//!
//! ```text
//!   bytes 0..6   magic  b"RSPART"
//!   bytes 6..8   format version, u16 little-endian (1)
//!   bytes 8..    one gzip member; inflated, it is
//!                  one line of JSON (the `Head`: schema, producer, kind, and the claim and part
//!                  or the text's name and kinds), a `\n`,
//!                  then the text's bytes (nothing for a trace).
//! ```
//!
//! Compact JSON never holds a raw newline, so the first `\n` ends the head. The version changes
//! whenever a reader of the old version could misread the new bytes (a `RankPart` field whose
//! meaning changes); fields added with `#[serde(default)]` keep it.

use serde::{Deserialize, Serialize};

use super::frame::{self, Unframed};
use crate::analyze::RankPart;
use crate::input::InputKind;
use crate::job::read::Text;
use crate::view::RankClaim;

/// The first bytes of every encoded part.
pub const MAGIC: &[u8; 6] = b"RSPART";
/// The format version this build writes and reads.
pub const VERSION: u16 = 1;
/// Most bytes a part may inflate to (a guard against a gzip bomb handed in as a part; real
/// parts are kB to MB, a Flight Recorder dump tens of MB).
pub const MAX_INFLATED: u64 = 1 << 30;

const SCHEMA: &str = "rankscope.part";

/// One input's contribution to a job.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// A trace: the file's claim on its rank and its part (filed under the job's rank by `combine`).
    Trace { claim: RankClaim, part: Box<RankPart> },
    /// A text input, whole.
    Text(Text),
}

impl Piece {
    /// The input's name (the trace's file, or the text's).
    pub fn name(&self) -> &str {
        match self {
            Piece::Trace { claim, .. } => &claim.file,
            Piece::Text(t) => &t.name,
        }
    }
}

/// Why bytes are not a part this build can read. Every message names the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartError {
    #[error("{name}: not a rankscope part (at byte 0: no `RSPART` header)")]
    NotAPart { name: String },
    #[error("{name}: rankscope part format version {found}; this build reads version {VERSION}")]
    Version { name: String, found: u16 },
    /// `offset` counts bytes of the encoded part (for a damaged gzip stream) or of the
    /// inflated content (for a damaged head), as `at` says.
    #[error("{name}: damaged rankscope part (at {at} byte {offset}): {reason}")]
    Damaged { name: String, at: &'static str, offset: u64, reason: String },
    #[error("{name}: rankscope part inflates beyond {limit} bytes")]
    TooLarge { name: String, limit: u64 },
}

#[derive(Serialize)]
struct Head {
    schema: String,
    /// `rankscope <version>`: who wrote it (information; the format version decides).
    producer: String,
    #[serde(flatten)]
    body: Body,
}

#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Body {
    Trace { claim: RankClaim, part: Box<RankPart> },
    Text { name: String, kinds: Vec<InputKind> },
}

/// The head line as it is read: [`Head`]'s fields, the body's named one by one. Reading `Head`
/// itself (a flattened, internally tagged enum) makes serde first buffer the whole line, part and
/// all, as generic values, then read those again: two thirds of the time `combine` spent
/// decoding 1,024 parts of 100 steps each (BENCHMARKS.md).
#[derive(Deserialize)]
struct HeadIn {
    schema: String,
    #[allow(dead_code)]
    producer: String,
    kind: Kind,
    claim: Option<RankClaim>,
    part: Option<Box<RankPart>>,
    name: Option<String>,
    kinds: Option<Vec<InputKind>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Trace,
    Text,
}

/// Encodes a piece (gzip at level 3: parts are JSON and shrink about 10×; see [`frame`]).
pub fn encode(piece: &Piece) -> Vec<u8> {
    let (body, payload): (Body, &[u8]) = match piece {
        Piece::Trace { claim, part } => (Body::Trace { claim: claim.clone(), part: part.clone() }, &[]),
        Piece::Text(t) => (Body::Text { name: t.name.clone(), kinds: t.kinds.clone() }, &t.bytes),
    };
    let head = Head { schema: SCHEMA.to_string(), producer: frame::producer(), body };
    frame::frame(MAGIC, VERSION, 1024 + payload.len() / 4, |gz| {
        // The head's types always serialize (no map with non-string keys, no non-finite float
        // that serde_json refuses: those become null).
        let _ = serde_json::to_writer(&mut *gz, &head);
        let _ = gz.write_all(b"\n");
        let _ = gz.write_all(payload);
    })
}

/// Encodes a trace's part (what `rankscope part` and `rankscope.part()` write).
pub fn encode_trace(claim: &RankClaim, part: &RankPart) -> Vec<u8> {
    encode(&Piece::Trace { claim: claim.clone(), part: Box::new(part.clone()) })
}

/// Whether `bytes` start like an encoded part (any version).
pub fn is_part(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// Decodes an encoded part; `name` names it in errors (a file name, a task id).
pub fn decode(name: &str, bytes: &[u8]) -> Result<Piece, PartError> {
    decode_with_limit(name, bytes, MAX_INFLATED)
}

/// [`decode`] with a bound on the inflated size.
pub fn decode_with_limit(name: &str, bytes: &[u8], limit: u64) -> Result<Piece, PartError> {
    let name_s = || name.to_string();
    if !bytes.starts_with(MAGIC) {
        return Err(PartError::NotAPart { name: name_s() });
    }
    let unframed = |e: Unframed| match e {
        Unframed::Damaged { offset, reason } => {
            PartError::Damaged { name: name_s(), at: "encoded", offset, reason }
        }
        Unframed::Version(found) => PartError::Version { name: name_s(), found },
        Unframed::TooLarge(limit) => PartError::TooLarge { name: name_s(), limit },
    };
    let damaged = |offset: usize, reason: String| PartError::Damaged {
        name: name.to_string(),
        at: "inflated",
        offset: offset as u64,
        reason,
    };
    // The content is taken as a stream: the head line, then (for a text) its first
    // `SNIFF_BYTES`, which must be a text rankscope reads before the rest is inflated (a 0.9 MB
    // part of 1 GB of blanks cost 1.9 GB and a minute), then the rest appended in place.
    let mut u = frame::unframer(bytes, MAGIC.len(), VERSION, limit).map_err(unframed)?;
    let mut line = Vec::new();
    if !u.line(&mut line).map_err(unframed)? {
        return Err(damaged(line.len(), "no end of the head line".into()));
    }
    let nl = line.len();
    let head: HeadIn = serde_json::from_slice(&line).map_err(|e| {
        // serde_json counts columns from 1 on the one line.
        damaged(e.column().saturating_sub(1), e.to_string())
    })?;
    drop(line);
    if head.schema != SCHEMA {
        return Err(damaged(0, format!("schema `{}`, expected `{SCHEMA}`", head.schema)));
    }
    let missing = |kind: &str, field: &str| damaged(0, format!("missing field `{field}` of a {kind} part"));
    match head.kind {
        Kind::Trace => {
            let claim = head.claim.ok_or_else(|| missing("trace", "claim"))?;
            let part = head.part.ok_or_else(|| missing("trace", "part"))?;
            let after = u.rest().map_err(unframed)?;
            if after > 0 {
                return Err(damaged(nl + 1, format!("{after} bytes after a trace part")));
            }
            Ok(Piece::Trace { claim, part })
        }
        Kind::Text => {
            let name = head.name.ok_or_else(|| missing("text", "name"))?;
            let kinds = head.kinds.ok_or_else(|| missing("text", "kinds"))?;
            if kinds.is_empty() {
                return Err(damaged(0, "a text part of no kind".into()));
            }
            let sniff = crate::job::read::SNIFF_BYTES;
            let mut payload = u.bytes(sniff as u64).map_err(unframed)?;
            // A text that ends within its head costs no more than its head: what it is, its
            // reader says; a longer one is judged here, as a file is (`job::detect`).
            if payload.len() >= sniff && crate::job::read::text_kinds(&payload).is_empty() {
                return Err(damaged(
                    nl + 1,
                    "its text does not begin as an NCCL log, nccl-tests output or a Flight Recorder dump"
                        .into(),
                ));
            }
            u.append_rest(&mut payload).map_err(unframed)?;
            Ok(Piece::Text(Text { name, kinds, bytes: payload }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn synth_piece(rank: u32) -> Piece {
        let (claim, part) = crate::job::digest::tests::synth_parts(4).swap_remove(rank as usize);
        Piece::Trace { claim, part: Box::new(part) }
    }

    fn text_piece() -> Piece {
        // Binary bytes (a pickle's), newlines and all: the payload is raw.
        let mut bytes: Vec<u8> = (0..=255u8).collect();
        bytes.extend_from_slice(b"\n\n{\"not\": \"json\"\n");
        Piece::Text(Text { name: "fr_rank3".into(), kinds: vec![InputKind::FlightRecorder], bytes })
    }

    #[test]
    fn round_trips() {
        for piece in [synth_piece(2), text_piece()] {
            let enc = encode(&piece);
            assert!(is_part(&enc));
            assert_eq!(decode("p", &enc), Ok(piece.clone()));
        }
    }

    #[test]
    fn a_text_part_of_blanks_is_refused_from_its_head() {
        // 64 MiB of blanks behind a text head: refused after its first 64 KiB, never held.
        let bytes = vec![b' '; 64 << 20];
        let junk = Piece::Text(Text { name: "nccl.log".into(), kinds: vec![InputKind::NcclLog], bytes });
        let mut enc = encode(&junk);
        let e = decode("blank.part", &enc).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("does not begin as an NCCL log"), "{e}");
        // A real log's head passes.
        let mut log = b"nodeA:100:100 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\n".repeat(2000);
        log.extend_from_slice(&[b' '; 1 << 10]);
        let good = Piece::Text(Text { name: "nccl.log".into(), kinds: vec![InputKind::NcclLog], bytes: log });
        enc = encode(&good);
        assert_eq!(decode("good.part", &enc), Ok(good));
    }

    #[test]
    fn a_trace_part_is_compact() {
        let piece = synth_piece(1);
        let Piece::Trace { part, .. } = &piece else { panic!() };
        let json = serde_json::to_vec(part).unwrap_or_default();
        let enc = encode(&piece);
        assert!(enc.len() * 4 < json.len(), "{} encoded vs {} JSON", enc.len(), json.len());
    }

    #[test]
    fn wrong_bytes_are_errors_that_name_the_input() {
        let enc = encode(&synth_piece(0));
        assert_eq!(
            decode("x.part", b"{\"traceEvents\":[]}"),
            Err(PartError::NotAPart { name: "x.part".into() })
        );
        let mut v2 = enc.clone();
        v2[6] = 2;
        assert_eq!(decode("x.part", &v2), Err(PartError::Version { name: "x.part".into(), found: 2 }));
        let e = decode("x.part", &enc[..enc.len() / 2]).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("x.part: damaged rankscope part (at encoded byte "), "{e}");
        let big = encode(&text_piece());
        assert_eq!(
            decode_with_limit("t", &big, 100),
            Err(PartError::TooLarge { name: "t".into(), limit: 100 })
        );
    }

    #[test]
    fn a_damaged_head_says_where() {
        // A valid gzip stream around a head that is not JSON.
        let mut enc = MAGIC.to_vec();
        enc.extend_from_slice(&VERSION.to_le_bytes());
        let mut gz = flate2::write::GzEncoder::new(enc, flate2::Compression::fast());
        let _ = gz.write_all(b"{\"schema\":\"rankscope.part\",\"producer\":1}\n");
        let enc = gz.finish().unwrap_or_default();
        let e = decode("h", &enc).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("h: damaged rankscope part (at inflated byte "), "{e}");
    }

    #[test]
    fn a_head_missing_its_bodys_fields_or_of_no_known_kind_is_damaged() {
        let framed = |head: &str| {
            let mut enc = MAGIC.to_vec();
            enc.extend_from_slice(&VERSION.to_le_bytes());
            let mut gz = flate2::write::GzEncoder::new(enc, flate2::Compression::fast());
            let _ = gz.write_all(head.as_bytes());
            let _ = gz.write_all(b"\n");
            gz.finish().unwrap_or_default()
        };
        let err = |head: &str| decode("h", &framed(head)).err().map(|e| e.to_string()).unwrap_or_default();
        let e = err(r#"{"schema":"rankscope.part","producer":"x","kind":"trace","claim":null}"#);
        assert!(e.starts_with("h: damaged rankscope part (at inflated byte "), "{e}");
        let e = err(r#"{"schema":"rankscope.part","producer":"x","kind":"text","name":"n"}"#);
        assert_eq!(e, "h: damaged rankscope part (at inflated byte 0): missing field `kinds` of a text part");
        let e = err(r#"{"schema":"rankscope.part","producer":"x","kind":"video"}"#);
        assert!(e.contains("unknown variant `video`"), "{e}");
        // The fields in any order, unknown ones ignored, as the head was read before.
        let Piece::Text(t) = text_piece() else { panic!() };
        let enc = framed(
            r#"{"kinds":["flight_recorder"],"extra":[1,{"a":2}],"kind":"text","name":"fr_rank3","producer":"x","schema":"rankscope.part"}"#,
        );
        assert_eq!(decode("h", &enc), Ok(Piece::Text(Text { bytes: Vec::new(), ..t })));
    }

    #[test]
    fn every_cut_and_flip_is_an_error_or_a_piece_never_a_panic() {
        let enc = encode(&synth_piece(3));
        for n in (0..enc.len()).step_by(7) {
            assert!(decode("c", &enc[..n]).is_err(), "cut at {n}");
        }
        let mut ok = 0;
        for i in (0..enc.len()).step_by(3) {
            let mut m = enc.clone();
            m[i] ^= 0x5a;
            ok += usize::from(decode("m", &m).is_ok());
        }
        // The gzip CRC catches every flip inside the stream; only header-field flips of the
        // gzip member (mtime, OS byte) leave the part readable.
        assert!(ok < 10, "{ok} flipped copies decoded");
    }
}
