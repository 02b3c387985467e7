//! What one input file contributes to a job, as bytes that cross a process or machine boundary
//! (a Ray task, a Slurm array task, a Kubernetes indexed job) to be combined elsewhere with
//! [`crate::job::combine`]: a trace's `(RankClaim, RankPart)` from [`crate::job::part_of`], or
//! a text input (NCCL log, nccl-tests output, Flight Recorder dump) kept whole. The events never
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

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use crate::analyze::RankPart;
use crate::job::{InputKind, Text};
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
    /// A trace: the file's claim on its rank and its part (the rank restamped by `combine`).
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
pub enum DigestError {
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
    let head = Head { schema: SCHEMA.to_string(), producer: producer(), body };
    frame(MAGIC, VERSION, 1024 + payload.len() / 4, |gz| {
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
pub fn decode(name: &str, bytes: &[u8]) -> Result<Piece, DigestError> {
    decode_with_limit(name, bytes, MAX_INFLATED)
}

/// [`decode`] with a bound on the inflated size.
pub fn decode_with_limit(name: &str, bytes: &[u8], limit: u64) -> Result<Piece, DigestError> {
    let name_s = || name.to_string();
    if !bytes.starts_with(MAGIC) {
        return Err(DigestError::NotAPart { name: name_s() });
    }
    let inflated = unframe(bytes, MAGIC.len(), VERSION, limit).map_err(|e| match e {
        Unframed::Damaged { offset, reason } => {
            DigestError::Damaged { name: name_s(), at: "encoded", offset, reason }
        }
        Unframed::Version(found) => DigestError::Version { name: name_s(), found },
        Unframed::TooLarge => DigestError::TooLarge { name: name_s(), limit },
    })?;
    let damaged = |offset: usize, reason: String| DigestError::Damaged {
        name: name.to_string(),
        at: "inflated",
        offset: offset as u64,
        reason,
    };
    let Some(nl) = memchr::memchr(b'\n', &inflated) else {
        return Err(damaged(inflated.len(), "no end of the head line".into()));
    };
    let (line, payload) = (&inflated[..nl], inflated.get(nl + 1..).unwrap_or_default());
    let head: HeadIn = serde_json::from_slice(line).map_err(|e| {
        // serde_json counts columns from 1 on the one line.
        damaged(e.column().saturating_sub(1), e.to_string())
    })?;
    if head.schema != SCHEMA {
        return Err(damaged(0, format!("schema `{}`, expected `{SCHEMA}`", head.schema)));
    }
    let missing = |kind: &str, field: &str| damaged(0, format!("missing field `{field}` of a {kind} part"));
    match head.kind {
        Kind::Trace => {
            let claim = head.claim.ok_or_else(|| missing("trace", "claim"))?;
            let part = head.part.ok_or_else(|| missing("trace", "part"))?;
            if !payload.is_empty() {
                return Err(damaged(nl + 1, format!("{} bytes after a trace part", payload.len())));
            }
            Ok(Piece::Trace { claim, part })
        }
        Kind::Text => {
            let name = head.name.ok_or_else(|| missing("text", "name"))?;
            let kinds = head.kinds.ok_or_else(|| missing("text", "kinds"))?;
            if kinds.is_empty() {
                return Err(damaged(0, "a text part of no kind".into()));
            }
            Ok(Piece::Text(Text { name, kinds, bytes: payload.to_vec() }))
        }
    }
}

fn producer() -> String {
    format!("rankscope {}", env!("CARGO_PKG_VERSION"))
}

/// Why framed bytes did not open (the caller names its format in the message).
pub(crate) enum Unframed {
    /// Cut inside the header, or a gzip stream that does not inflate: at this byte of the input.
    Damaged { offset: u64, reason: String },
    /// Another format version.
    Version(u16),
    /// It inflates beyond the limit.
    TooLarge,
}

/// The envelope of a part and of a job digest: `magic`, the format version (u16 little-endian),
/// then one gzip member written by `body` (buffered: serde_json writes token by token, and a
/// deflate call per token made encoding ~25× slower than compressing). Writing into a `Vec`
/// cannot fail. Level 3, not the default 6: on a 1,024-rank job of 100 steps (1.1 GB of JSON)
/// deflate took 15 s at 6, 5.8 s at 3 and 2.9 s at 1, for a digest of 114, 123 and 148 MB
/// (BENCHMARKS.md); readers take any level.
pub(crate) fn frame(
    magic: &[u8],
    version: u16,
    capacity: usize,
    body: impl FnOnce(&mut dyn Write),
) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    out.extend_from_slice(magic);
    out.extend_from_slice(&version.to_le_bytes());
    let mut gz = std::io::BufWriter::with_capacity(
        1 << 16,
        flate2::write::GzEncoder::new(out, flate2::Compression::new(3)),
    );
    body(&mut gz);
    gz.into_inner().ok().and_then(|g| g.finish().ok()).unwrap_or_default()
}

/// The inflated content of framed `bytes` whose magic (`magic_len` bytes, already checked) is
/// followed by `version`; at most `limit` bytes.
pub(crate) fn unframe(bytes: &[u8], magic_len: usize, version: u16, limit: u64) -> Result<Vec<u8>, Unframed> {
    unframer(bytes, magic_len, version, limit)?.bytes(limit.saturating_add(1))
}

/// The framed content as a reader: the inflated content taken as it is needed, never held whole (a
/// 1,024-rank job of 100 steps inflates to 1.1 GB). Every read past the content's end checks the
/// gzip trailer, so [`Unframer::rest`] must end a reading.
pub(crate) struct Unframer<'a> {
    gz: std::io::BufReader<std::io::Take<flate2::read::GzDecoder<Counted<'a>>>>,
    head: usize,
    limit: u64,
    /// Inflated bytes taken so far.
    pub(crate) at: u64,
}

/// The [`Unframer`] of framed `bytes` whose magic (`magic_len` bytes) was checked.
pub(crate) fn unframer(
    bytes: &[u8],
    magic_len: usize,
    version: u16,
    limit: u64,
) -> Result<Unframer<'_>, Unframed> {
    let head = magic_len + 2;
    let found = match bytes.get(magic_len..head) {
        Some(&[a, b]) => u16::from_le_bytes([a, b]),
        _ => {
            return Err(Unframed::Damaged {
                offset: bytes.len() as u64,
                reason: "ends inside the header".into(),
            })
        }
    };
    if found != version {
        return Err(Unframed::Version(found));
    }
    let counted = Counted { inner: bytes.get(head..).unwrap_or_default(), read: 0 };
    let gz = flate2::read::GzDecoder::new(counted).take(limit.saturating_add(1));
    Ok(Unframer { gz: std::io::BufReader::with_capacity(1 << 16, gz), head, limit, at: 0 })
}

impl Unframer<'_> {
    fn fault(&self, e: &std::io::Error) -> Unframed {
        let read = self.gz.get_ref().get_ref().get_ref().read;
        Unframed::Damaged { offset: self.head as u64 + read, reason: e.to_string() }
    }

    fn took(&mut self, n: usize) -> Result<(), Unframed> {
        self.at += n as u64;
        if self.at > self.limit {
            return Err(Unframed::TooLarge);
        }
        Ok(())
    }

    /// The next line into `buf` (cleared first), without its `\n`: `false` when the content
    /// ended before a `\n` (`buf` holds what came before the end).
    pub(crate) fn line(&mut self, buf: &mut Vec<u8>) -> Result<bool, Unframed> {
        use std::io::BufRead;
        buf.clear();
        let n = match self.gz.read_until(b'\n', buf) {
            Ok(n) => n,
            Err(e) => return Err(self.fault(&e)),
        };
        self.took(n)?;
        if buf.last() == Some(&b'\n') {
            buf.pop();
            return Ok(true);
        }
        Ok(false)
    }

    /// The next `n` bytes, or fewer where the content ends.
    pub(crate) fn bytes(&mut self, n: u64) -> Result<Vec<u8>, Unframed> {
        let mut out = Vec::new();
        if let Err(e) = (&mut self.gz).take(n).read_to_end(&mut out) {
            return Err(self.fault(&e));
        }
        self.took(out.len())?;
        Ok(out)
    }

    /// Reads to the end of the content (checking the gzip trailer): the bytes that were left.
    pub(crate) fn rest(&mut self) -> Result<u64, Unframed> {
        let n = match std::io::copy(&mut self.gz, &mut std::io::sink()) {
            Ok(n) => n,
            Err(e) => return Err(self.fault(&e)),
        };
        self.took(usize::try_from(n).unwrap_or(usize::MAX))?;
        Ok(n)
    }
}

/// A reader that counts the bytes taken from it (the offset of a gzip fault).
struct Counted<'a> {
    inner: &'a [u8],
    read: u64,
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::Options;
    use crate::job::{self, Loaded, Reader};
    use crate::normalize::Rules;
    use rankscope_synth::{self as synth, SynthConfig};

    fn synth_piece(rank: u32) -> Piece {
        let cfg = SynthConfig {
            ranks: 4,
            steps: 2,
            kernels_per_step: 40,
            straggler_rank: Some(1),
            ..SynthConfig::default()
        };
        let mut bytes = Vec::new();
        synth::write_rank(&cfg, rank, &mut bytes).unwrap_or_else(|e| panic!("{e}"));
        let mut r = Reader::new(&synth::file_name(rank, false));
        for c in bytes.chunks(1 << 16) {
            r.feed(c);
        }
        let Ok(Loaded::Trace(t)) = r.finish() else { panic!("not a trace") };
        let (claim, part) =
            job::part_of(*t, &Rules::default(), &Options::default()).unwrap_or_else(|| panic!("no part"));
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
    fn a_trace_part_is_compact() {
        let piece = synth_piece(1);
        let Piece::Trace { part, .. } = &piece else { panic!() };
        let json = serde_json::to_vec(part).unwrap_or_default();
        let enc = encode(&piece);
        assert!(enc.len() * 4 < json.len(), "{} encoded vs {} JSON", enc.len(), json.len());
    }

    #[test]
    fn combined_from_bytes_equals_combined_from_values() {
        let pieces: Vec<Piece> = (0..4).map(synth_piece).collect();
        let files = |ps: Vec<Piece>| -> Vec<(RankClaim, RankPart)> {
            ps.into_iter()
                .filter_map(|p| match p {
                    Piece::Trace { claim, part } => Some((claim, *part)),
                    Piece::Text(_) => None,
                })
                .collect()
        };
        let decoded: Vec<Piece> =
            pieces.iter().map(|p| decode("p", &encode(p)).unwrap_or_else(|e| panic!("{e}"))).collect();
        let opts = Options::default();
        let a = job::combine(files(pieces), &[], &[], &opts).json();
        let b = job::combine(files(decoded), &[], &[], &opts).json();
        assert_eq!(a, b);
    }

    #[test]
    fn wrong_bytes_are_errors_that_name_the_input() {
        let enc = encode(&synth_piece(0));
        assert_eq!(
            decode("x.part", b"{\"traceEvents\":[]}"),
            Err(DigestError::NotAPart { name: "x.part".into() })
        );
        let mut v2 = enc.clone();
        v2[6] = 2;
        assert_eq!(decode("x.part", &v2), Err(DigestError::Version { name: "x.part".into(), found: 2 }));
        let e = decode("x.part", &enc[..enc.len() / 2]).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("x.part: damaged rankscope part (at encoded byte "), "{e}");
        let big = encode(&text_piece());
        assert_eq!(
            decode_with_limit("t", &big, 100),
            Err(DigestError::TooLarge { name: "t".into(), limit: 100 })
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
