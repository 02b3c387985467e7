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

use super::{InputKind, Text, TextRef};
use crate::analyze::{Analysis, RankPart};
use crate::digest::Unframed;
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
    crate::digest::frame(MAGIC, VERSION, 4096 + files.len() * 12_000, |gz| {
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
        Unframed::TooLarge => JobDigestError::TooLarge { name: name_s(), limit },
    };
    let mut content = crate::digest::unframer(bytes, MAGIC.len(), VERSION, limit).map_err(framing)?;
    let damaged = |offset: u64, reason: String| JobDigestError::Damaged {
        name: name.to_string(),
        at: "inflated",
        offset,
        reason,
    };
    let mut buf = Vec::new();
    // The next line of JSON into `buf`, and where it starts.
    let mut line = |buf: &mut Vec<u8>, what: &str| -> Result<u64, JobDigestError> {
        let start = content.at;
        if !content.line(buf).map_err(framing)? {
            return Err(damaged(content.at, format!("ends before the {what}")));
        }
        Ok(start)
    };
    let parse_err = |start: u64, e: serde_json::Error| line_error(name, start, &e);
    let start = line(&mut buf, "head")?;
    let head: Head = serde_json::from_slice(&buf).map_err(|e| parse_err(start, e))?;
    if head.schema != SCHEMA {
        return Err(damaged(0, format!("schema `{}`, expected `{SCHEMA}`", head.schema)));
    }
    let mut files = Vec::with_capacity(head.ranks.min(1 << 20));
    for i in 0..head.ranks {
        let start = line(&mut buf, &format!("part of rank {i}"))?;
        let f: FileLineOwned = serde_json::from_slice(&buf).map_err(|e| parse_err(start, e))?;
        let mut part = f.part;
        if lean {
            part.make_lean();
        }
        files.push((f.claim, part));
    }
    let analysis_at = line(&mut buf, "analysis")?;
    let analysis_json = buf;
    let mut texts = Vec::with_capacity(head.texts.len());
    for t in head.texts {
        let want = t.bytes;
        let bytes = content.bytes(want).map_err(framing)?;
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
    /// critical-path segments, interval sets, regions, issued calls, pipeline figures), keeping
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

    /// The job's outputs as `combine` gave them: the stored analysis (moved out, or copied
    /// while something else shares it), and the NCCL and Flight Recorder reports read from the
    /// stored texts ([`JobDigest::reports`]).
    pub fn into_output(self) -> super::JobOutput {
        let (fabric, flight_recorder) = self.reports();
        let analysis = std::sync::Arc::try_unwrap(self.analysis).unwrap_or_else(|a| (*a).clone());
        super::JobOutput { analysis, fabric, flight_recorder, failed: Vec::new() }
    }

    /// The NCCL and Flight Recorder reports of the stored texts ([`super::fabric`],
    /// [`super::flight_recorder`]: their reports do not deserialize, and the texts are small).
    pub fn reports(&self) -> (Option<super::Fabric>, Option<super::FlightRecorder>) {
        let refs: Vec<TextRef<'_>> = self.texts.iter().map(Text::as_ref).collect();
        (super::fabric(&refs), super::flight_recorder(&refs))
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
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::Options;
    use crate::job::{self, Loaded, Reader};
    use crate::normalize::Rules;
    use rankscope_synth::{self as synth, SynthConfig};
    use std::io::Read;

    fn parts(ranks: u32) -> Vec<(RankClaim, RankPart)> {
        let cfg = SynthConfig {
            ranks,
            steps: 2,
            kernels_per_step: 40,
            straggler_rank: Some(1),
            ..SynthConfig::default()
        };
        (0..ranks)
            .map(|rank| {
                let mut bytes = Vec::new();
                synth::write_rank(&cfg, rank, &mut bytes).unwrap_or_else(|e| panic!("{e}"));
                let mut r = Reader::new(&synth::file_name(rank, false));
                r.feed(&bytes);
                let Ok(Loaded::Trace(t)) = r.finish() else { panic!("not a trace") };
                job::part_of(*t, &Rules::default(), &Options::default()).unwrap_or_else(|| panic!("no part"))
            })
            .collect()
    }

    fn fr_text() -> Text {
        let mut bytes: Vec<u8> = (0..=255u8).collect();
        bytes.extend_from_slice(b"\n\n");
        Text { name: "fr_rank3".into(), kinds: vec![InputKind::FlightRecorder], bytes }
    }

    /// `n` synth parts with their decided ranks and a Flight Recorder text, combined.
    fn combined(n: u32) -> (Vec<(RankClaim, RankPart)>, [Text; 1], job::JobOutput) {
        let (files, errors) = job::decided(parts(n), &[]);
        let texts = [fr_text()];
        let refs: Vec<TextRef<'_>> = texts.iter().map(Text::as_ref).collect();
        let out = job::combine_decided(
            files.iter().map(|(_, p)| p.clone()).collect(),
            errors,
            &refs,
            &Options::default(),
        );
        (files, texts, out)
    }

    #[test]
    fn round_trips_and_gives_back_what_combine_made() {
        let (files, texts, out) = combined(4);
        let refs: Vec<TextRef<'_>> = texts.iter().map(Text::as_ref).collect();
        let enc = encode(&files, &refs, &out.analysis);
        assert!(is_digest(&enc));
        assert_eq!(job::detect(&enc), job::InputKind::Digest);
        let d = decode("job.rsdigest", &enc).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(d.files, files);
        assert_eq!(d.texts, texts.to_vec());
        assert_eq!(d.clone().into_output().json(), out.json());
        // Read lean part by part, it is the whole digest made lean.
        let lean = decode_lean("job.rsdigest", &enc).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(lean, d.clone().lean());
        assert_ne!(lean.files, d.files, "lean parts drop what only combine reads");
        // With the analysis left as JSON (the app's worker), sent apart from the rest (the
        // message does not carry it) and parsed where it arrives, it is the same digest.
        let raw = decode_lean_raw("job.rsdigest", &enc).unwrap_or_else(|e| panic!("{e}"));
        let msg = serde_json::to_string(&raw).unwrap_or_default();
        assert!(msg.len() < raw.analysis_json.len() + 50_000 && !msg.contains("\"alignment\""));
        let mut back: LeanDigest = serde_json::from_str(&msg).unwrap_or_else(|e| panic!("{e}"));
        assert!(back.analysis_json.is_empty());
        back.analysis_json = raw.analysis_json.clone();
        assert_eq!(back.with_analysis(), Ok(lean.clone()));
        // A damaged analysis names its byte of the inflated content, as the whole read does,
        // at its start or deep in the line.
        let mut bad = raw.clone();
        let mid = bad.analysis_json.len() / 2;
        bad.analysis_json[mid] = 0;
        let at_mid = bad.clone().with_analysis().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(at_mid.contains(&format!("inflated byte {}", raw.analysis_at + mid as u64)), "{at_mid}");
        bad.analysis_json = raw.analysis_json.clone();
        bad.analysis_json[0] = b'!';
        let e = bad.with_analysis().err().map(|e| e.to_string()).unwrap_or_default();
        let want =
            format!("job.rsdigest: damaged rankscope job digest (at inflated byte {}): ", raw.analysis_at);
        assert!(e.starts_with(&want), "{e} / {want}");
        // Damaged or cut texts and bytes after them: errors at the inflated byte, as is a cut
        // file or a flipped byte (each read lean or whole).
        let framed = |content: &[u8]| {
            crate::digest::frame(MAGIC, VERSION, 0, |gz| {
                let _ = gz.write_all(content);
            })
        };
        let mut content = Vec::new();
        let mut gz = flate2::read::GzDecoder::new(enc.get(10..).unwrap_or_default());
        let _ = gz.read_to_end(&mut content);
        let e = decode("j", &framed(&content[..content.len() - 3])).err().map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|e| e.starts_with("j: damaged rankscope job digest (at inflated byte ")
                && e.ends_with("ends inside the text `fr_rank3`")),
            "{e:?}"
        );
        let mut more = content.clone();
        more.extend_from_slice(b"xyz");
        let e = decode_lean("j", &framed(&more)).err().map(|e| e.to_string());
        assert_eq!(
            e,
            Some(format!(
                "j: damaged rankscope job digest (at inflated byte {}): 3 bytes after the last text",
                content.len()
            ))
        );
        for i in (10..enc.len()).step_by(13) {
            let mut m = enc.clone();
            m[i] ^= 0x20;
            if let (Ok(a), Ok(b)) = (decode("m", &m), decode_lean("m", &m)) {
                assert_eq!(a.lean(), b);
            }
        }
        // Through the Reader, in small chunks, as every shell reads it.
        let mut r = Reader::new("job.rsdigest");
        for c in enc.chunks(7) {
            r.feed(c);
        }
        match r.finish() {
            Ok(Loaded::Text(t)) => assert_eq!((t.kinds, t.bytes), (vec![InputKind::Digest], enc.clone())),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn traces_added_find_their_rank_by_name_then_by_claim() {
        let (files, _) = job::decided(parts(3), &[]);
        let d = JobDigest {
            files,
            texts: Vec::new(),
            analysis: std::sync::Arc::new(job::combine(parts(3), &[], &[], &Options::default()).analysis),
        };
        let c = |f: &str, r: Option<i64>| RankClaim { file: f.into(), claimed_rank: r };
        let got: Vec<Option<u32>> = d
            .place(&[
                c("/elsewhere/rank2.pt.trace.json", None),
                c("renamed.json", Some(1)),
                c("x.json", Some(1)),
                c("y.json", Some(7)),
            ])
            .into_iter()
            .map(|p| p.map(|p| p.decision.rank))
            .collect();
        assert_eq!(got, [Some(2), Some(1), None, None]);
        let s = d.summary(1).unwrap_or_else(|| panic!("summary"));
        assert_eq!((s.rank, s.steps.len()), (1, 2));
        assert!(s.span_start_ns < s.span_end_ns);
    }

    #[test]
    fn the_lean_digest_places_and_summarizes_as_the_whole_one() {
        let (files, texts, out) = combined(3);
        let refs: Vec<TextRef<'_>> = texts.iter().map(Text::as_ref).collect();
        let enc = encode(&files, &refs, &out.analysis);
        let whole = decode("job.rsdigest", &enc).unwrap_or_else(|e| panic!("{e}"));
        let lean = decode_lean("job.rsdigest", &enc).unwrap_or_else(|e| panic!("{e}"));
        // Copied while shared, moved out when alone: the same output.
        assert_eq!(lean.clone().into_output().json(), out.json());
        let alone = decode_lean("job.rsdigest", &enc).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::sync::Arc::strong_count(&alone.analysis), 1);
        assert_eq!(alone.into_output().json(), out.json());
        assert_eq!(lean.reports(), (out.fabric.clone(), out.flight_recorder.clone()));
        let c = |f: &str, r: Option<i64>| RankClaim { file: f.into(), claimed_rank: r };
        let claims = [c("/elsewhere/rank2.pt.trace.json", None), c("renamed.json", Some(1))];
        assert_eq!(lean.place(&claims), whole.place(&claims));
        for i in 0..3 {
            assert_eq!(lean.summary(i), whole.summary(i));
            assert_eq!(lean.files[i].1.instances, whole.files[i].1.instances);
        }
    }

    #[test]
    fn wrong_bytes_are_errors_that_name_the_input() {
        let (files, errors) = job::decided(parts(2), &[]);
        let out = job::combine_decided(
            files.iter().map(|(_, p)| p.clone()).collect(),
            errors,
            &[],
            &Options::default(),
        );
        let enc = encode(&files, &[], &out.analysis);
        assert_eq!(decode("x", b"RSPART\x01\x00"), Err(JobDigestError::NotADigest { name: "x".into() }));
        let mut v2 = enc.clone();
        v2[8] = 2;
        assert_eq!(decode("x", &v2), Err(JobDigestError::Version { name: "x".into(), found: 2 }));
        for n in (0..enc.len()).step_by(97) {
            assert!(decode("c", &enc[..n]).is_err(), "cut at {n}");
        }
        assert_eq!(
            decode_with_limit("t", &enc, 100),
            Err(JobDigestError::TooLarge { name: "t".into(), limit: 100 })
        );
    }
}
