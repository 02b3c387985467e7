//! The job digest: one file holding a whole job's analysis and what it was made of, so that a
//! 1,024-rank job can be opened (in the app, by `rankscope analyze`, in a notebook) without its
//! traces. `rankscope combine PARTS... --digest job.rsdigest` writes it (docs/digest.md).
//!
//! It is the job-level sibling of the per-input part ([`crate::digest`], `RSPART`): a part is
//! one input's contribution before the job is decided; a digest is every trace's part after it
//! (each carries the job's rank: [`RankPart::restamp`] was applied), the text inputs (NCCL logs,
//! nccl-tests output, Flight Recorder dumps) whole, and the [`Analysis`] that `combine`
//! printed. Reading it gives that analysis back as it was stored (never recomputed, so the
//! figures cannot drift with the reader's version), and the NCCL and Flight Recorder reports
//! from the texts, as `combine` made them.
//!
//! Layout, version 1:
//!
//! ```text
//!   bytes 0..8    magic  b"RSDIGEST"
//!   bytes 8..10   format version, u16 little-endian (1)
//!   bytes 10..    one gzip member; inflated, it is lines of compact JSON:
//!                   the head   {"schema":"rankscope.digest","producer":…,"ranks":N,
//!                               "texts":[{"name":…,"kinds":[…],"bytes":LEN},…]}
//!                   N lines    {"claim":RankClaim,"part":RankPart}, in the job's rank order
//!                   1 line     the Analysis (schema `rankscope.analysis`)
//!                 then the texts' bytes, one after another, LEN each, in the head's order.
//! ```
//!
//! One line per rank keeps every JSON value small (a reader never holds one string of the
//! whole job). The version changes whenever a reader of the old version could misread the new
//! bytes; fields added with `#[serde(default)]` keep it.
//!
//! Size: gzip of the parts and the analysis, about 11 kB per rank for the synthetic job
//! (BENCHMARKS.md, "Python and Ray"); the texts add what they weigh gzipped.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use super::{Text, TextKind, TextRef};
use crate::analyze::{Analysis, RankPart};
use crate::view::RankClaim;

/// The first bytes of every job digest.
pub const MAGIC: &[u8; 8] = b"RSDIGEST";
/// The format version this build writes and reads.
pub const VERSION: u16 = 1;
/// Most bytes a digest may inflate to (a guard against a gzip bomb; 10,000 ranks inflate to
/// about 1 GB).
pub const MAX_INFLATED: u64 = 4 << 30;

const SCHEMA: &str = "rankscope.digest";

/// A job as a digest holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobDigest {
    /// Every trace's claim and part, with the job's rank stamped on it, in rank order.
    pub files: Vec<(RankClaim, RankPart)>,
    /// The text inputs, in load order.
    pub texts: Vec<Text>,
    /// The analysis `combine` made of them.
    pub analysis: Analysis,
}

/// Why bytes are not a digest this build can read. Every message names the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobDigestError {
    #[error("{name}: not a rankscope job digest (at byte 0: no `RSDIGEST` header)")]
    NotADigest { name: String },
    #[error("{name}: rankscope job digest format version {found}; this build reads version {VERSION}")]
    Version { name: String, found: u16 },
    /// `offset` counts bytes of the file (a damaged gzip stream) or of the inflated content (a
    /// damaged line), as `at` says.
    #[error("{name}: damaged rankscope job digest (at {at} byte {offset}): {reason}")]
    Damaged { name: String, at: &'static str, offset: u64, reason: String },
    #[error("{name}: rankscope job digest inflates beyond {limit} bytes")]
    TooLarge { name: String, limit: u64 },
}

#[derive(Serialize, Deserialize)]
struct Head {
    schema: String,
    /// `rankscope <version>`: who wrote it (information; the format version decides).
    producer: String,
    ranks: usize,
    texts: Vec<TextHead>,
}

#[derive(Serialize, Deserialize)]
struct TextHead {
    name: String,
    kinds: Vec<TextKind>,
    bytes: u64,
}

#[derive(Serialize)]
struct FileLine<'a> {
    claim: &'a RankClaim,
    part: &'a RankPart,
}

#[derive(Deserialize)]
struct FileLineOwned {
    claim: RankClaim,
    part: RankPart,
}

/// Whether `bytes` start like a job digest (any version).
pub fn is_digest(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// Encodes a job: its decided parts (as [`super::decided`] gives them), its texts and the
/// analysis combined from them.
pub fn encode(files: &[(RankClaim, RankPart)], texts: &[TextRef<'_>], analysis: &Analysis) -> Vec<u8> {
    let head = Head {
        schema: SCHEMA.to_string(),
        producer: format!("rankscope {}", env!("CARGO_PKG_VERSION")),
        ranks: files.len(),
        texts: texts
            .iter()
            .map(|t| TextHead {
                name: t.name.to_string(),
                kinds: t.kinds.to_vec(),
                bytes: t.bytes.len() as u64,
            })
            .collect(),
    };
    let mut out = Vec::with_capacity(4096 + files.len() * 12_000);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    // Writing into a Vec cannot fail, and these types always serialize (string keys only;
    // non-finite floats become null).
    let _ = serde_json::to_writer(&mut gz, &head);
    let _ = gz.write_all(b"\n");
    for (claim, part) in files {
        let _ = serde_json::to_writer(&mut gz, &FileLine { claim, part });
        let _ = gz.write_all(b"\n");
    }
    let _ = serde_json::to_writer(&mut gz, analysis);
    let _ = gz.write_all(b"\n");
    for t in texts {
        let _ = gz.write_all(t.bytes);
    }
    gz.finish().unwrap_or_default()
}

/// Decodes a job digest; `name` names it in errors.
pub fn decode(name: &str, bytes: &[u8]) -> Result<JobDigest, JobDigestError> {
    decode_with_limit(name, bytes, MAX_INFLATED)
}

/// [`decode`] with a bound on the inflated size.
pub fn decode_with_limit(name: &str, bytes: &[u8], limit: u64) -> Result<JobDigest, JobDigestError> {
    let name_s = || name.to_string();
    if !is_digest(bytes) {
        return Err(JobDigestError::NotADigest { name: name_s() });
    }
    let found = match bytes.get(8..10) {
        Some(&[a, b]) => u16::from_le_bytes([a, b]),
        _ => {
            return Err(JobDigestError::Damaged {
                name: name_s(),
                at: "file",
                offset: bytes.len() as u64,
                reason: "ends inside the header".into(),
            })
        }
    };
    if found != VERSION {
        return Err(JobDigestError::Version { name: name_s(), found });
    }
    let body = bytes.get(10..).unwrap_or_default();
    let mut counted = Counted { inner: body, read: 0 };
    let mut inflated = Vec::new();
    let mut gz = flate2::read::GzDecoder::new(&mut counted).take(limit.saturating_add(1));
    if let Err(e) = gz.read_to_end(&mut inflated) {
        drop(gz);
        return Err(JobDigestError::Damaged {
            name: name_s(),
            at: "file",
            offset: 10 + counted.read,
            reason: e.to_string(),
        });
    }
    drop(gz);
    if inflated.len() as u64 > limit {
        return Err(JobDigestError::TooLarge { name: name_s(), limit });
    }
    let damaged = |offset: usize, reason: String| JobDigestError::Damaged {
        name: name.to_string(),
        at: "inflated",
        offset: offset as u64,
        reason,
    };
    let mut at = 0usize;
    // The next line of JSON, and where it starts.
    let mut line = |what: &str| -> Result<(&[u8], usize), JobDigestError> {
        let rest = inflated.get(at..).unwrap_or_default();
        let Some(nl) = memchr::memchr(b'\n', rest) else {
            return Err(damaged(inflated.len(), format!("ends before the {what}")));
        };
        let start = at;
        at += nl + 1;
        Ok((rest.get(..nl).unwrap_or_default(), start))
    };
    let parse_err =
        |start: usize, e: serde_json::Error| damaged(start + e.column().saturating_sub(1), e.to_string());
    let (l, start) = line("head")?;
    let head: Head = serde_json::from_slice(l).map_err(|e| parse_err(start, e))?;
    if head.schema != SCHEMA {
        return Err(damaged(0, format!("schema `{}`, expected `{SCHEMA}`", head.schema)));
    }
    let mut files = Vec::with_capacity(head.ranks.min(1 << 20));
    for i in 0..head.ranks {
        let (l, start) = line(&format!("part of rank {i}"))?;
        let f: FileLineOwned = serde_json::from_slice(l).map_err(|e| parse_err(start, e))?;
        files.push((f.claim, f.part));
    }
    let (l, start) = line("analysis")?;
    let analysis: Analysis = serde_json::from_slice(l).map_err(|e| parse_err(start, e))?;
    let mut texts = Vec::with_capacity(head.texts.len());
    for t in head.texts {
        let end =
            usize::try_from(t.bytes).ok().and_then(|n| at.checked_add(n)).filter(|&e| e <= inflated.len());
        let Some(end) = end else {
            return Err(damaged(inflated.len(), format!("ends inside the text `{}`", t.name)));
        };
        texts.push(Text {
            name: t.name,
            kinds: t.kinds,
            bytes: inflated.get(at..end).unwrap_or_default().to_vec(),
        });
        at = end;
    }
    if at != inflated.len() {
        return Err(damaged(at, format!("{} bytes after the last text", inflated.len() - at)));
    }
    Ok(JobDigest { files, texts, analysis })
}

impl JobDigest {
    /// The job's outputs as `combine` gave them: the stored analysis, and the NCCL and Flight
    /// Recorder reports read from the stored texts ([`super::fabric`],
    /// [`super::flight_recorder`]: their reports do not deserialize, and the texts are small).
    pub fn output(&self) -> super::JobOutput {
        let refs: Vec<TextRef<'_>> = self.texts.iter().map(Text::as_ref).collect();
        super::JobOutput {
            analysis: self.analysis.clone(),
            fabric: super::fabric(&refs),
            flight_recorder: super::flight_recorder(&refs),
            failed: Vec::new(),
        }
    }

    /// The part of the trace called `file` (its whole name, or a trailing path part either
    /// way: `rank3.json` finds `/data/job/rank3.json`, and `/tmp/rank3.json` finds `rank3.json`),
    /// else of the rank `claimed` (a trace's own `distributedInfo.rank`). This is how a full
    /// trace added to an opened digest finds its rank (and so its clock offset).
    pub fn find(&self, file: &str, claimed: Option<i64>) -> Option<&(RankClaim, RankPart)> {
        let base = |s: &str| s.rsplit(['/', '\\']).next().unwrap_or(s).to_string();
        self.files
            .iter()
            .find(|(c, _)| c.file == file)
            .or_else(|| self.files.iter().find(|(c, _)| base(&c.file) == base(file)))
            .or_else(|| {
                let r = u32::try_from(claimed?).ok()?;
                self.files.iter().find(|(_, p)| p.info.rank == r)
            })
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
