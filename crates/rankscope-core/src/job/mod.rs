//! The job API every shell calls: the CLI, the app's workers and reducer, the wasm / npm
//! package and the Python package. A shell only moves bytes (files, `File.stream()`, paths on a
//! cluster) and prints or draws; what an input is, how ranks are decided, how the parts become
//! one analysis and what the outputs look like are decided here, once.
//!
//! ```text
//!   bytes ──► Reader (kind by content) ──► Trace ──► normalize ──► RankPart (+ its RankClaim)
//!                                      └─► Text  (NCCL log, nccl-tests, Flight Recorder dump,
//!                                                 metrics, RAS status, Inspector log, step log)
//!   [(claim, part)] + [text] ──► combine ──► JobOutput { analysis (+ beside), fabric, flight recorder }
//!                                              └─► json() / csv() / markdown()
//! ```
//!
//! A part may be computed anywhere (a thread, a Web Worker, a Ray task on another machine):
//! its rank is decided at the job level from every file's [`RankClaim`] ([`decide`]), and the
//! decision is the key the part is filed under when the job is combined ([`combine_ranked`]:
//! the rank is written into the part's rows there, once), because no figure of a part depends
//! on the rank's own number. Nothing before the combine reads a part's rank.

pub mod digest;
mod read;
#[cfg(test)]
mod tests;

pub use digest::{JobDigest, JobDigestError};

pub use read::{detect, text_kinds, InputKind, Loaded, Reader, Text, TextRef, SNIFF_BYTES};

use crate::analyze::{self, report, Analysis, Options, RankPart};
use crate::diagnose;
use crate::fr::{self, RankedDump, SkippedDump};
use crate::inspect::FailedFile;
use crate::model::RankTrace;
use crate::nccl::{self, LogReport, TestsReport};
use crate::normalize::{self, JobError, Rules};
pub use crate::normalize::{RankClaim, RankDecision};
use crate::sequence::SequenceReport;

/// Names read when a folder is walked or dropped (files named one by one are all tried):
/// traces (`.json`, `.json.gz`), the logs and text outputs NCCL_DEBUG, nccl-tests and training
/// frameworks write (`.log`, `.txt`, `.out`), NCCL Inspector logs (`.jsonl`) and Prometheus
/// scrapes (`.prom`), case-insensitively. Flight Recorder dumps and the other evidence beside
/// the traces, which carry any name, are recognised by content on top of this where a shell
/// can read a file's start before choosing it ([`detect`], [`InputKind::any_name`]).
pub fn is_folder_candidate(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    FOLDER_SUFFIXES.iter().any(|e| n.ends_with(e))
}

/// The suffixes [`is_folder_candidate`] accepts.
pub const FOLDER_SUFFIXES: [&str; 7] = [".json", ".json.gz", ".log", ".txt", ".out", ".jsonl", ".prom"];

/// What the NCCL text of a job says: the `NCCL_DEBUG` logs' report and the nccl-tests results.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Fabric {
    pub logs: Option<LogReport>,
    pub tests: Option<TestsReport>,
}

/// A job's Flight Recorder dumps: one per rank, their sequence report, and the files that could
/// not be read or were left out (a second dump of a rank).
#[derive(Debug, Clone, PartialEq)]
pub struct FlightRecorder {
    pub dumps: Vec<RankedDump>,
    pub report: SequenceReport,
    pub failed: Vec<FailedFile>,
    pub skipped: Vec<SkippedDump>,
}

impl FlightRecorder {
    /// The pair the JSON and Markdown writers take.
    pub fn as_input(&self) -> (&[RankedDump], &SequenceReport) {
        (&self.dumps, &self.report)
    }

    /// `(file, why)` for every dump that is not in the report.
    pub fn problems(&self) -> Vec<(String, String)> {
        let failed = self.failed.iter().map(|f| (f.file.clone(), f.error.clone()));
        failed.chain(self.skipped.iter().map(|s| (s.file.clone(), s.reason.clone()))).collect()
    }

    /// One line per dump that is not in the report, as the CLI prints them (a read error names
    /// its file and byte offset).
    pub fn messages(&self) -> Vec<String> {
        let failed = self.failed.iter().map(|f| f.error.clone());
        failed.chain(self.skipped.iter().map(|s| format!("{}: skipped: {}", s.file, s.reason))).collect()
    }

    /// The `rankscope.fr` JSON (what `rankscope fr --json` prints, and `rankscope analyze
    /// --json` for a job of dumps alone).
    pub fn json(&self) -> String {
        fr::output::json(&self.dumps, &self.failed, &self.skipped, &self.report)
    }
}

/// Reads the NCCL text of a job as `rankscope nccl` and `rankscope nccl-tests` do: the logs
/// with [`nccl::analyze_logs`], the tests with [`nccl::analyze_tests`] (a log holding a perf
/// table is read both ways). `None` without NCCL text.
pub fn fabric(texts: &[TextRef<'_>]) -> Option<Fabric> {
    let of = |k: InputKind| -> Vec<nccl::Input<'_>> {
        texts
            .iter()
            .filter(|t| t.kinds.contains(&k))
            .map(|t| nccl::Input { name: t.name, bytes: t.bytes })
            .collect()
    };
    let (logs, tests) = (of(InputKind::NcclLog), of(InputKind::NcclTests));
    if logs.is_empty() && tests.is_empty() {
        return None;
    }
    Some(Fabric {
        logs: (!logs.is_empty()).then(|| nccl::analyze_logs(&logs)),
        tests: (!tests.is_empty()).then(|| nccl::analyze_tests(&tests, None)),
    })
}

/// Reads the Flight Recorder dumps among `texts` ([`fr::read`]), keeps one per rank
/// ([`fr::decide_ranks`]) and makes their sequence report. `None` without dumps.
pub fn flight_recorder(texts: &[TextRef<'_>]) -> Option<FlightRecorder> {
    let mut dumps = Vec::new();
    let mut failed = Vec::new();
    for t in texts.iter().filter(|t| t.kinds.contains(&InputKind::FlightRecorder)) {
        match fr::read(t.name, t.bytes) {
            Ok(d) => dumps.push(d),
            Err(e) => failed.push(FailedFile { file: t.name.to_string(), error: e.to_string() }),
        }
    }
    if dumps.is_empty() && failed.is_empty() {
        return None;
    }
    let (dumps, skipped) = fr::decide_ranks(dumps);
    let report = fr::job_report(&dumps);
    Some(FlightRecorder { dumps, report, failed, skipped })
}

/// The files that recovered no event and are not a rank the job lacks (`files[i]`: its claim,
/// its events, its world size), by index: a damaged or cut file with nothing in it became a
/// rank beyond the world size, by load order. A file with no event is kept when it claims
/// (`distributedInfo.rank`, else its name) a rank below the world size of the files with events
/// that none of them holds: that rank recorded nothing, which is worth saying. When no file
/// has an event, none is dropped (the report says there is nothing).
pub fn eventless(files: &[(&RankClaim, u64, Option<i64>)]) -> Vec<usize> {
    let with: Vec<&(&RankClaim, u64, Option<i64>)> = files.iter().filter(|f| f.1 > 0).collect();
    if with.is_empty() {
        return Vec::new();
    }
    let world = with.iter().filter_map(|f| f.2).max().unwrap_or(with.len() as i64);
    let rank_of =
        |c: &RankClaim| c.claimed_rank.or_else(|| normalize::job::rank_from_name(&c.file).map(i64::from));
    let held: std::collections::BTreeSet<i64> = with.iter().filter_map(|f| rank_of(f.0)).collect();
    files
        .iter()
        .enumerate()
        .filter(|(_, f)| f.1 == 0)
        .filter(|(_, f)| !rank_of(f.0).is_some_and(|r| (0..world).contains(&r) && !held.contains(&r)))
        .map(|(i, _)| i)
        .collect()
}

/// The note a shell gives for a file [`eventless`] left out.
pub fn eventless_note(file: &str) -> String {
    format!("skipped {file}: no event was recovered from it, and it claims no rank the job lacks")
}

/// Decides every file's rank from the claims of all of them, in load order: `result[i]` is
/// for `claims[i]`. `explicit` maps file names to ranks (`--rank FILE=N`); two files claiming
/// one rank is a job error.
pub fn decide(claims: &[RankClaim], explicit: &[(String, u32)]) -> (Vec<RankDecision>, Vec<JobError>) {
    normalize::decide(claims, explicit)
}

pub use crate::normalize::claim_of;

/// The per-file half for a host that holds one trace: normalizes it alone and computes its
/// part (its rank is the job's to decide: [`combine`] files the part under it). A file that
/// holds several ranks ([`normalize::multirank`]) gives one part per rank, each with its own
/// claim; a file of one rank gives one.
pub fn part_of(trace: RankTrace, rules: &Rules, opts: &Options) -> Vec<(RankClaim, RankPart)> {
    part_of_with(trace, rules, opts, &crate::join::Serial)
}

/// [`part_of`], the passes of normalizing and of the part handed to `j` two at a time (a host
/// with idle cores runs them side by side): the same parts.
pub fn part_of_with(
    trace: RankTrace,
    rules: &Rules,
    opts: &Options,
    j: &impl crate::join::Join,
) -> Vec<(RankClaim, RankPart)> {
    normalize::multirank::split(trace)
        .into_iter()
        .filter_map(|t| {
            let claim = claim_of(&t);
            let job = normalize::assemble_with(vec![t], &[], rules, j);
            let r = job.ranks.first()?;
            Some((claim, analyze::rank_part_with(r, &job.strings, opts.kernel_wait_threshold_ns, j)))
        })
        .collect()
}

/// A job's outputs: the analysis and what the NCCL text and Flight Recorder dumps say.
#[derive(Debug, Clone)]
pub struct JobOutput {
    pub analysis: Analysis,
    pub fabric: Option<Fabric>,
    pub flight_recorder: Option<FlightRecorder>,
    /// Files the shell could not read as anything (the trace reader's message, naming the file
    /// and byte offset), kept for the exit status and the page.
    pub failed: Vec<FailedFile>,
}

impl JobOutput {
    /// Whether there is a trace analysis (else the dumps' report is all there is).
    pub fn has_traces(&self) -> bool {
        !self.analysis.ranks.is_empty()
    }

    /// `rankscope analyze --json`: the `rankscope.analysis` JSON (with a `flight_recorder`
    /// member when there are dumps), or the `rankscope.fr` JSON for dumps alone.
    pub fn json(&self) -> String {
        match (&self.flight_recorder, self.has_traces()) {
            (Some(f), false) => f.json(),
            (f, _) => report::json(&self.analysis, f.as_ref().map(FlightRecorder::as_input)),
        }
    }

    /// `rankscope analyze --md`.
    pub fn markdown(&self) -> String {
        match (&self.flight_recorder, self.has_traces()) {
            (Some(f), false) => fr::output::render(&f.dumps, &f.report),
            (f, _) => {
                diagnose::markdown::with_dumps(&self.analysis, f.as_ref().map(FlightRecorder::as_input))
            }
        }
    }

    /// `rankscope analyze --csv` (the dumps are not part of it).
    pub fn csv(&self) -> String {
        report::csv(&self.analysis)
    }

    /// The clock offset estimated (or given) for a rank: aligned time = rank time − offset.
    pub fn offset_of(&self, rank: u32) -> i64 {
        crate::export::offset_of(&self.analysis.alignment, rank)
    }

    /// Exit status of `rankscope analyze`: 0 when every input was read and the job holds no
    /// error, else 1.
    pub fn clean(&self) -> bool {
        self.failed.is_empty()
            && self.analysis.errors.is_empty()
            && self.flight_recorder.as_ref().is_none_or(|f| f.failed.is_empty())
    }
}

/// The job half: decides ranks across every file's claim ([`decide`]), then
/// [`combine_ranked`]. `files[i]` is in load order (it decides load-order ranks).
pub fn combine(
    files: Vec<(RankClaim, RankPart)>,
    explicit: &[(String, u32)],
    texts: &[TextRef<'_>],
    opts: &Options,
) -> JobOutput {
    let claims: Vec<RankClaim> = files.iter().map(|(c, _)| c.clone()).collect();
    let (decisions, errors) = decide(&claims, explicit);
    combine_ranked(
        decisions.into_iter().zip(files.into_iter().map(|(_, p)| p)).collect(),
        errors,
        texts,
        opts,
    )
}

/// The job half for parts keyed by the job's decision for their files (`(key, part)`, in load
/// order): each part is filed under its key (the rank written into its rows, here and only
/// here: [`file_under`]), the NCCL text and the dumps are read, and the job is measured and
/// judged.
pub fn combine_ranked(
    parts: Vec<(RankDecision, RankPart)>,
    errors: Vec<JobError>,
    texts: &[TextRef<'_>],
    opts: &Options,
) -> JobOutput {
    let parts = parts
        .into_iter()
        .map(|(d, mut p)| {
            file_under(&mut p, &d);
            p
        })
        .collect();
    combine_decided(parts, errors, texts, opts)
}

/// The job half's measures alone (the matched collectives beside the analysis, before any
/// judging) for parts keyed by the job's decision for their files: what a host holding each
/// rank's tables apart measures again for the `collectives` table, as `analyze::measure` does
/// for a job held whole.
pub fn measure_ranked(
    parts: Vec<(RankDecision, RankPart)>,
    errors: Vec<JobError>,
    opts: &Options,
) -> analyze::Measured {
    let parts = parts
        .into_iter()
        .map(|(d, mut p)| {
            file_under(&mut p, &d);
            p
        })
        .collect();
    analyze::combine(parts, errors, opts)
}

/// Every part filed under the rank decided for it across every claim: what a job digest stores
/// ([`digest::encode`]), which [`combine_decided`] then combines.
pub fn decided(
    files: Vec<(RankClaim, RankPart)>,
    explicit: &[(String, u32)],
) -> (Vec<(RankClaim, RankPart)>, Vec<JobError>) {
    let claims: Vec<RankClaim> = files.iter().map(|(c, _)| c.clone()).collect();
    let (decisions, errors) = decide(&claims, explicit);
    let files = files
        .into_iter()
        .zip(&decisions)
        .map(|((c, mut p), d)| {
            file_under(&mut p, d);
            (c, p)
        })
        .collect();
    (files, errors)
}

/// The one job digest among `texts`, decoded, when there is one: `Some(Err)` when it cannot be
/// read or when other inputs come with it (a digest is a whole job; its figures are not
/// combined with other files').
pub fn digest_among(texts: &[TextRef<'_>], other_inputs: usize) -> Option<Result<JobDigest, String>> {
    let mut digests = texts.iter().filter(|t| t.kinds.contains(&InputKind::Digest));
    let d = digests.next()?;
    let others = other_inputs + texts.len() - 1;
    if others > 0 {
        return Some(Err(format!(
            "{}: a job digest is a whole job: analyse it alone (it came with {others} other input(s))",
            d.name
        )));
    }
    // Its analysis and texts are what a reader of a digest gets (`JobDigest::into_output`): the parts
    // are read lean.
    Some(digest::decode_lean(d.name, d.bytes).map_err(|e| e.to_string()))
}

/// What a shell notes when an input is an NCCL_DEBUG log alone (no perf table): the NCCL report
/// reads it (`rankscope nccl`, the analysis' `fabric`), the trace analysis does not.
pub fn nccl_log_note(name: &str) -> String {
    format!("{name} is an NCCL_DEBUG log: its report is `rankscope nccl`'s")
}

/// What a shell notes when options come with a job digest (`--rank` given: `ranks`): it holds
/// the analysis as `combine` made it, which they do not change.
pub fn digest_note(opts: &Options, ranks: bool) -> Option<&'static str> {
    let default = Options::default();
    let changed = ranks || !opts.offsets.is_empty() || opts.thresholds != default.thresholds;
    changed.then_some(
        "the job digest holds the analysis as `combine` made it: --rank, --offset and --threshold do not change it",
    )
}

impl JobDigest {
    /// The job's outputs as `combine` gave them: the stored analysis (moved out, or copied
    /// while something else shares it), and the NCCL and Flight Recorder reports read from the
    /// stored texts ([`JobDigest::reports`]).
    pub fn into_output(self) -> JobOutput {
        let (fabric, flight_recorder) = self.reports();
        let analysis = std::sync::Arc::try_unwrap(self.analysis).unwrap_or_else(|a| (*a).clone());
        JobOutput { analysis, fabric, flight_recorder, failed: Vec::new() }
    }

    /// The NCCL and Flight Recorder reports of the stored texts ([`fabric`],
    /// [`flight_recorder`]: their reports do not deserialize, and the texts are small).
    pub fn reports(&self) -> (Option<Fabric>, Option<FlightRecorder>) {
        let refs: Vec<TextRef<'_>> = self.texts.iter().map(Text::as_ref).collect();
        (fabric(&refs), flight_recorder(&refs))
    }
}

/// [`combine`] for parts already filed under the job's ranks ([`decided`]; a host holding every
/// trace normalizes them together, and computes each part from its decided entry).
pub fn combine_decided(
    parts: Vec<RankPart>,
    errors: Vec<JobError>,
    texts: &[TextRef<'_>],
    opts: &Options,
) -> JobOutput {
    let mut parts = parts;
    check_claims(&mut parts);
    let fabric = fabric(texts);
    let flight_recorder = flight_recorder(texts);
    let mut opts = opts.clone();
    if opts.fabric.is_none() {
        opts.fabric = fabric.as_ref().and_then(|f| f.tests.clone());
    }
    let analysis = diagnose::combine_beside(parts, errors, &opts, &beside_inputs(texts));
    JobOutput { analysis, fabric, flight_recorder, failed: Vec::new() }
}

/// The texts that are evidence beside the traces ([`InputKind::is_beside`]), by kind, for the
/// analysis' `beside` member ([`analyze::beside`]).
pub fn beside_inputs<'a>(texts: &[TextRef<'a>]) -> analyze::beside::Inputs<'a> {
    let of = |k: InputKind| -> Vec<(&'a str, &'a [u8])> {
        texts.iter().filter(|t| t.kinds.contains(&k)).map(|t| (t.name, t.bytes)).collect()
    };
    analyze::beside::Inputs {
        metrics: of(InputKind::Metrics),
        ras: of(InputKind::NcclRas),
        inspector: of(InputKind::NcclInspector),
        steplogs: of(InputKind::StepLog),
    }
}

/// The whole job for a host that holds every trace (the CLI, the Python package): normalizes
/// them together (so exports can write every rank) and analyzes. Returns the normalized job
/// with the outputs.
pub fn analyze_traces(
    traces: Vec<RankTrace>,
    explicit: &[(String, u32)],
    rules: &Rules,
    texts: &[TextRef<'_>],
    opts: &Options,
) -> (normalize::Job, JobOutput) {
    analyze_traces_with(traces, explicit, rules, texts, opts, &crate::join::Serial)
}

/// [`analyze_traces`], each rank's part computed with [`analyze::rank_part_with`] over `j`
/// (a host with threads runs its independent passes side by side): the same output.
pub fn analyze_traces_with(
    traces: Vec<RankTrace>,
    explicit: &[(String, u32)],
    rules: &Rules,
    texts: &[TextRef<'_>],
    opts: &Options,
    j: &impl crate::join::Join,
) -> (normalize::Job, JobOutput) {
    let job = normalize::assemble_with(traces, explicit, rules, j);
    let parts: Vec<RankPart> = crate::join::map(j, job.ranks.iter().collect(), &|r| {
        analyze::rank_part_with(r, &job.strings, opts.kernel_wait_threshold_ns, j)
    });
    let out = combine_decided(parts, job.errors.clone(), texts, opts);
    (job, out)
}

/// A part's claims checked before anything is sized by them (a part is bytes from anywhere: a
/// world size of 10^9 made `combine` allocate 3.9 GB): a world size outside 1 to
/// [`MAX_WORLD_SIZE`](crate::parse::kineto::MAX_WORLD_SIZE), the limit a trace's has, is dropped,
/// and a rank at or beyond the world size its part states is said; each is an `out_of_range`
/// diagnostic on that part, which is kept.
fn check_claims(parts: &mut [RankPart]) {
    use crate::model::{DiagKind, Diagnostics};
    use crate::parse::kineto::MAX_WORLD_SIZE;
    for p in parts {
        let mut d = Diagnostics::default();
        let (rank, world) = (p.info.rank, p.world_size.or(p.info.world_size));
        match world {
            Some(w) if !(1..=MAX_WORLD_SIZE).contains(&w) => {
                d.add(DiagKind::OutOfRange, None, || {
                    format!("the part's world size {w} is not a world size (1 to {MAX_WORLD_SIZE}); ignored")
                });
                p.world_size = None;
                p.info.world_size = None;
            }
            Some(w) if i64::from(rank) >= w => d.add(DiagKind::OutOfRange, None, || {
                format!("rank {rank} is not a rank of the world of {w} the part states")
            }),
            _ => {}
        }
        let file = p.info.source.clone();
        p.diagnostics.extend(d.sorted().into_iter().map(|diagnostic| analyze::FileDiagnostic {
            file: file.clone(),
            rank,
            diagnostic,
        }));
    }
}

/// Files a part under its key: the part's rows are the analysis's per-rank records, each of which
/// names its rank (its info, totals, steps, stream idle, launch figures, allocations, chains and
/// diagnostics), so the key's rank, where it came from and its rank diagnostics (which replace
/// whatever the part was computed with) are written into them here, once, as the job is
/// combined. No figure of a part depends on the rank's number, so this equals computing the part
/// with the job's rank (`tests/job_api.rs`).
fn file_under(part: &mut RankPart, d: &RankDecision) {
    let rank = d.rank;
    part.info.rank = rank;
    part.info.rank_source = d.rank_source;
    part.totals.rank = rank;
    for (_, s) in &mut part.steps {
        s.rank = rank;
    }
    for x in &mut part.gpu_idle {
        x.rank = rank;
    }
    if let Some(l) = part.launch.as_mut() {
        l.rank = rank;
    }
    for a in &mut part.allocations {
        a.rank = rank;
    }
    for c in &mut part.chains {
        c.rank = rank;
    }
    part.diagnostics.retain(|x| !normalize::RANK_KINDS.contains(&x.diagnostic.kind));
    let file = part.info.source.clone();
    part.diagnostics.extend(d.diagnostics.iter().map(|x| analyze::FileDiagnostic {
        file: file.clone(),
        rank,
        diagnostic: x.clone(),
    }));
    for x in &mut part.diagnostics {
        x.rank = rank;
    }
    // The order `Diagnostics::sorted` gives: severity, most severe first, then kind.
    part.diagnostics.sort_by(|a, b| {
        b.diagnostic.severity.cmp(&a.diagnostic.severity).then(a.diagnostic.kind.cmp(&b.diagnostic.kind))
    });
}
