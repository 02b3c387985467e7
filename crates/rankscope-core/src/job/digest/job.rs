//! The job digest: one file holding a whole job's analysis and what it was made of, so that a
//! 1,024-rank job can be opened (in the app, by `rankscope analyze`, in a notebook) without its
//! traces. `rankscope combine PARTS... --digest job.rsdigest` writes it (docs/digest.md).
//!
//! It is the job-level sibling of the per-input part ([`super::part`], `RSPART`): a part is
//! one input's contribution before the job is decided; a digest is every trace's part after it
//! (each filed under the job's rank), the text inputs (NCCL logs,
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
//!                   N lines    {"claim":RankClaim,"part":RankPart}, in load order (combine's)
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

use serde::{Deserialize, Serialize};

use super::frame::{self, Led, Unframed};
use crate::analyze::{Analysis, RankPart};
use crate::input::InputKind;
use crate::job::read::{Text, TextRef};
use crate::view::summary::{sort_diagnostics, DeviceSummary, StepSpan};
use crate::view::{RankClaim, RankDecision, RankSummary};

/// The first bytes of every job digest.
pub const MAGIC: &[u8; 8] = b"RSDIGEST";
/// The format version this build writes and reads.
pub const VERSION: u16 = 1;
/// Most bytes a digest may inflate to (a guard against a gzip bomb; 10,000 ranks inflate to
/// about 1 GB).
pub const MAX_INFLATED: u64 = 4 << 30;

const SCHEMA: &str = "rankscope.digest";

/// A job as a digest holds it (the file format is [`encode`]'s). A decoded digest crosses
/// threads as a [`LeanDigest`].
#[derive(Debug, Clone, PartialEq)]
pub struct JobDigest {
    /// Every trace's claim and part, with the job's rank stamped on it, in rank order.
    pub files: Vec<(RankClaim, RankPart)>,
    /// The text inputs, in load order.
    pub texts: Vec<Text>,
    /// The analysis `combine` made of them: shared, not copied, by the views of a shell that
    /// keeps the digest (the app: the analysis of 1,024 ranks × 100 steps is ~150 MB).
    pub analysis: std::sync::Arc<Analysis>,
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
    kinds: Vec<InputKind>,
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

/// Encodes a job: its parts filed under their decided ranks (the job's `decided`), its texts and
/// the analysis combined from them.
pub fn encode(files: &[(RankClaim, RankPart)], texts: &[TextRef<'_>], analysis: &Analysis) -> Vec<u8> {
    let head = Head {
        schema: SCHEMA.to_string(),
        producer: frame::producer(),
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
    frame::frame(MAGIC, VERSION, 4096 + files.len() * 12_000, |gz| {
        // Writing into a Vec cannot fail, and these types always serialize (string keys only;
        // non-finite floats become null).
        let _ = serde_json::to_writer(&mut *gz, &head);
        let _ = gz.write_all(b"\n");
        for (claim, part) in files {
            let _ = serde_json::to_writer(&mut *gz, &FileLine { claim, part });
            let _ = gz.write_all(b"\n");
        }
        let _ = serde_json::to_writer(&mut *gz, analysis);
        let _ = gz.write_all(b"\n");
        for t in texts {
            let _ = gz.write_all(t.bytes);
        }
    })
}

/// Decodes a job digest; `name` names it in errors.
pub fn decode(name: &str, bytes: &[u8]) -> Result<JobDigest, JobDigestError> {
    decode_with_limit(name, bytes, MAX_INFLATED)
}

/// [`decode`] with a bound on the inflated size.
pub fn decode_with_limit(name: &str, bytes: &[u8], limit: u64) -> Result<JobDigest, JobDigestError> {
    read(name, bytes, limit, false)?.with_analysis()
}

/// [`decode`] then [`JobDigest::lean`], each part made lean as soon as it is read: what a viewer
/// needs, without ever holding every part whole.
pub fn decode_lean(name: &str, bytes: &[u8]) -> Result<JobDigest, JobDigestError> {
    read(name, bytes, MAX_INFLATED, true)?.with_analysis()
}

/// [`decode_lean`] with the stored analysis left as the JSON text it is in the file: for a
/// reader that hands the digest on to be parsed elsewhere (the app's worker to its page), so that
/// the analysis, most of a large digest, is parsed once and never written again.
pub fn decode_lean_raw(name: &str, bytes: &[u8]) -> Result<LeanDigest, JobDigestError> {
    read(name, bytes, MAX_INFLATED, true)
}

/// A digest read with its analysis still JSON ([`decode_lean_raw`]). It serializes without
/// the analysis's bytes, which travel beside it (the app's worker transfers them to the page).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeanDigest {
    /// The digest's name, for the errors of [`LeanDigest::with_analysis`].
    pub name: String,
    pub files: Vec<(RankClaim, RankPart)>,
    pub texts: Vec<Text>,
    /// The analysis line as stored (no `\n`).
    #[serde(skip)]
    pub analysis_json: Vec<u8>,
    /// Where that line starts in the inflated content.
    pub analysis_at: u64,
}

impl LeanDigest {
    /// The digest, its analysis parsed from [`LeanDigest::analysis_json`]; an analysis that is
    /// not one is an error at its inflated byte, as [`decode`] gives it.
    pub fn with_analysis(self) -> Result<JobDigest, JobDigestError> {
        let analysis: Analysis = serde_json::from_slice(&self.analysis_json)
            .map_err(|e| line_error(&self.name, self.analysis_at, &e))?;
        Ok(JobDigest { files: self.files, texts: self.texts, analysis: std::sync::Arc::new(analysis) })
    }
}

/// A line of JSON starting at inflated byte `start` that does not parse: damaged at the byte
/// serde_json names (it counts columns from 1, on the one line).
fn line_error(name: &str, start: u64, e: &serde_json::Error) -> JobDigestError {
    JobDigestError::Damaged {
        name: name.to_string(),
        at: "inflated",
        offset: start + e.column().saturating_sub(1) as u64,
        reason: e.to_string(),
    }
}

/// Reads the inflated content a line at a time: the head, each part (made lean at once when
/// `lean`), the analysis's line, the texts. Only one line is held at a time, never the whole
/// content.
fn read(name: &str, bytes: &[u8], limit: u64, lean: bool) -> Result<LeanDigest, JobDigestError> {
    let name_s = || name.to_string();
    if !is_digest(bytes) {
        return Err(JobDigestError::NotADigest { name: name_s() });
    }
    let framing = |e: Unframed| match e {
        Unframed::Damaged { offset, reason } => {
            JobDigestError::Damaged { name: name_s(), at: "file", offset, reason }
        }
        Unframed::Version(found) => JobDigestError::Version { name: name_s(), found },
        Unframed::TooLarge(limit) => JobDigestError::TooLarge { name: name_s(), limit },
    };
    let mut content = frame::unframer(bytes, MAGIC.len(), VERSION, limit).map_err(framing)?;
    let damaged = |offset: u64, reason: String| JobDigestError::Damaged {
        name: name.to_string(),
        at: "inflated",
        offset,
        reason,
    };
    let mut buf = Vec::new();
    // The next line of JSON into `buf`, and where it starts; judged by its first bytes (what
    // `encode` writes first on such a line) before the rest is read.
    let mut line = |buf: &mut Vec<u8>, lead: &[u8], what: &str| -> Result<u64, JobDigestError> {
        let start = content.at;
        match content.line_led(buf, lead).map_err(framing)? {
            Led::Whole => Ok(start),
            Led::Cut => Err(damaged(content.at, format!("ends before the {what}"))),
            Led::Unlike => Err(damaged(
                start,
                format!("the {what} does not begin as one (`{}`)", String::from_utf8_lossy(lead)),
            )),
        }
    };
    let parse_err = |start: u64, e: serde_json::Error| line_error(name, start, &e);
    let start = line(&mut buf, br#"{"schema":""#, "head")?;
    let head: Head = serde_json::from_slice(&buf).map_err(|e| parse_err(start, e))?;
    if head.schema != SCHEMA {
        return Err(damaged(0, format!("schema `{}`, expected `{SCHEMA}`", head.schema)));
    }
    // Reserved for the ranks the head claims only as far as a part's line could be in the
    // input (a few hundred bytes each at least, compressed): a head claiming a million ranks
    // reserved a million parts, 2.1 GB, from a 2 MB digest.
    let mut files = Vec::with_capacity(head.ranks.min(bytes.len() / 256));
    for i in 0..head.ranks {
        let start = line(&mut buf, br#"{"claim":{"#, &format!("part of rank {i}"))?;
        let f: FileLineOwned = serde_json::from_slice(&buf).map_err(|e| parse_err(start, e))?;
        let mut part = f.part;
        if lean {
            part.make_lean();
        }
        files.push((f.claim, part));
    }
    let analysis_at = line(&mut buf, br#"{"schema":"rankscope.analysis","#, "analysis")?;
    let analysis_json = buf;
    let mut texts = Vec::with_capacity(head.texts.len());
    for t in head.texts {
        let want = t.bytes;
        // Its head first, judged as a file's is (`job::detect`) before the rest inflates: 1 GB
        // of blanks said to be a log is not held to be told it is not one.
        let sniff = crate::job::read::SNIFF_BYTES as u64;
        let mut bytes = content.bytes(want.min(sniff)).map_err(framing)?;
        if bytes.len() as u64 >= sniff && crate::job::read::text_kinds(&bytes).is_empty() {
            return Err(damaged(
                content.at - bytes.len() as u64,
                format!("the text `{}` does not begin as an NCCL log, nccl-tests output or a Flight Recorder dump", t.name),
            ));
        }
        if want > sniff {
            content.append(&mut bytes, want - sniff).map_err(framing)?;
        }
        if (bytes.len() as u64) < want {
            return Err(damaged(content.at, format!("ends inside the text `{}`", t.name)));
        }
        texts.push(Text { name: t.name, kinds: t.kinds, bytes });
    }
    let at = content.at;
    let left = content.rest().map_err(framing)?;
    if left > 0 {
        return Err(damaged(at, format!("{left} bytes after the last text")));
    }
    Ok(LeanDigest { name: name_s(), files, texts, analysis_json, analysis_at })
}

impl RankPart {
    /// Drops what only a new `combine` reads (idle and launch figures, allocations, chains,
    /// critical-path segments, interval sets, regions, issued calls, pipeline figures, the
    /// operator table), keeping
    /// what a viewer of the digest reads: [`JobDigest::lean`] for one part.
    pub fn make_lean(&mut self) {
        self.gpu_idle = Vec::new();
        self.launch = None;
        self.allocations = Vec::new();
        self.chains = Vec::new();
        self.segments = Vec::new();
        self.comm_set = Vec::new();
        self.overlap_set = Vec::new();
        self.regions = Default::default();
        self.issued = Vec::new();
        self.pipe = Default::default();
        self.operators = Default::default();
    }
}

impl JobDigest {
    /// The digest as a viewer of its figures reads it: each part keeps what [`JobDigest::place`],
    /// [`JobDigest::summary`] and the first collective of each group read (its info, world size,
    /// instances, steps, step starts, totals, diagnostics); the rest, which only a new
    /// `combine` would read (idle and launch figures, allocations, chains, critical-path
    /// segments, interval sets, regions, issued calls, pipeline figures), is dropped. The
    /// analysis and the texts stay whole. The app's worker decodes a digest and sends the page
    /// this: a fraction of the parts' bytes to parse on the page's thread.
    pub fn lean(mut self) -> JobDigest {
        for (_, p) in &mut self.files {
            p.make_lean();
        }
        self
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

/// Where a full trace added to an opened digest goes: the index of its rank's part in
/// [`JobDigest::files`] and the job's decision for it (what its worker is told, so that its
/// exports and its timeline row carry the digest's rank).
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    pub index: usize,
    pub decision: RankDecision,
}

impl JobDigest {
    /// Places traces added beside the digest (in load order): each by its file name, else by
    /// its claimed rank ([`JobDigest::find`]); a trace of no rank of the job, or of a rank an
    /// earlier trace took, is `None` (it is not part of this job). The job's figures never
    /// change: they are the digest's.
    pub fn place(&self, claims: &[RankClaim]) -> Vec<Option<Placed>> {
        let mut taken = std::collections::BTreeSet::new();
        claims
            .iter()
            .map(|c| {
                let (claim, part) = self.find(&c.file, c.claimed_rank)?;
                let index = self.files.iter().position(|(x, _)| x == claim)?;
                if !taken.insert(index) {
                    return None;
                }
                let diagnostics: Vec<crate::model::Diagnostic> = part
                    .diagnostics
                    .iter()
                    .filter(|d| crate::view::ranks::RANK_KINDS.contains(&d.diagnostic.kind))
                    .map(|d| d.diagnostic.clone())
                    .collect();
                let decision =
                    RankDecision { rank: part.info.rank, rank_source: part.info.rank_source, diagnostics };
                Some(Placed { index, decision })
            })
            .collect()
    }

    /// A rank's summary as the app lists it, from what its part knows (no lanes: the digest
    /// holds no events). Its span is its steps' (else its collectives') extent on its own clock.
    pub fn summary(&self, index: usize) -> Option<RankSummary> {
        let (claim, p) = self.files.get(index)?;
        let steps: Vec<StepSpan> = p
            .steps
            .iter()
            .map(|(step, s)| StepSpan { step: *step, start_ns: s.start_ns, end_ns: s.end_ns })
            .collect();
        let ends = steps
            .iter()
            .map(|s| (s.start_ns, s.end_ns))
            .chain(p.instances.iter().map(|i| (i.start_ns, i.end_ns)));
        let (start, end) = ends.fold((i64::MAX, i64::MIN), |(a, b), (s, e)| (a.min(s), b.max(e)));
        let (span_start_ns, span_end_ns) = if start <= end { (start, end) } else { (0, 0) };
        let mut diagnostics: Vec<crate::model::Diagnostic> =
            p.diagnostics.iter().map(|d| d.diagnostic.clone()).collect();
        sort_diagnostics(&mut diagnostics);
        let rank_source = p.info.rank_source;
        Some(RankSummary {
            file: claim.file.clone(),
            rank: p.info.rank,
            rank_source,
            claimed_rank: claim.claimed_rank,
            world_size: p.world_size,
            backend: p.info.backend.clone(),
            nccl_version: None,
            host_name: None,
            devices: p
                .info
                .devices
                .iter()
                .enumerate()
                .map(|(i, n)| DeviceSummary { id: i as i64, name: n.clone() })
                .collect(),
            gzip: false,
            input_bytes: 0,
            text_bytes: 0,
            span_start_ns,
            span_end_ns,
            events: p.info.events,
            rows: 0,
            gpu_ops: 0,
            comm_kernels: 0,
            steps,
            steps_synthetic: p.steps_synthetic,
            lanes: Vec::new(),
            diagnostics,
            hidden_events: 0,
            memory: Vec::new(),
        })
    }
}
