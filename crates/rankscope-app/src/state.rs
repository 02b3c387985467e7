//! The UI's state as a reducer: every change is an [`Action`], applied in one place.
//!
//! The state holds what the views show: the files and how far each has come, the small per-rank
//! summaries, the job facts made from them once every file is done, the active view and the
//! timeline window. The big tables are not here: they stay in the workers (see
//! [`crate::protocol`]).
//!
//! The analysis arrives the way the summaries do: each worker sends its rank's
//! `analyze::RankPart` with `Loaded`. Once every file is done the ranks are decided across files,
//! once ([`Assembly`], `job::decide` over the summaries' claims): the decision is the key each
//! file's summary and part are filed under (no figure of a part depends on the rank's number),
//! and the reducer runs the core's job API (`job::combine_ranked`), exactly what `rankscope
//! analyze` runs: the [`JobView`] exists as soon as the last file is read. Workers never learn
//! the decision: the exports they write are asked for under the job's rank (the export plan).
//!
//! A job digest (`rankscope combine --digest`, [`job::digest`]) is decoded by the worker that
//! read it ([`Action::Digest`]: a lean [`job::JobDigest`], its parts without what only a new
//! `combine` reads), and its parts and stored analysis are the job (no worker parses events).
//! Traces added later ([`Action::Add`]) are placed on the digest's ranks by the core
//! ([`job::JobDigest::place`]) and give those ranks their timeline, on the digest's offsets; the
//! figures stay the digest's.
//!
//! Adding a view: a [`View`] variant with its name, a component in `views/`, and, for data, one
//! more field of [`JobView`] filled when the job is assembled.

use std::collections::BTreeMap;
use std::rc::Rc;

use rankscope_core::analyze::{self, Analysis, RankPart};
use rankscope_core::export::{self, ExportPlan};
use rankscope_core::normalize::JobError;
use rankscope_core::view::{apply_decision, JobFacts, RankClaim, RankDecision, RankSummary};
use yew::Reducible;

use crate::protocol::{FileId, InputKind, Phase};
use rankscope_core::job;

/// The views, in the order of the navigation bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Summary,
    Layout,
    Steps,
    Timeline,
    Collectives,
    Alignment,
    Fabric,
    Diagnostics,
    Pipeline,
}

impl View {
    pub const ALL: [View; 9] = [
        View::Summary,
        View::Layout,
        View::Steps,
        View::Timeline,
        View::Collectives,
        View::Alignment,
        View::Fabric,
        View::Diagnostics,
        View::Pipeline,
    ];

    /// The name in the URL hash.
    pub fn name(self) -> &'static str {
        match self {
            View::Summary => "summary",
            View::Layout => "layout",
            View::Steps => "steps",
            View::Timeline => "timeline",
            View::Collectives => "collectives",
            View::Alignment => "alignment",
            View::Fabric => "fabric",
            View::Diagnostics => "diagnostics",
            View::Pipeline => "pipeline",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            View::Summary => "Summary",
            View::Layout => "Layout",
            View::Steps => "Ranks × steps",
            View::Timeline => "Timeline",
            View::Collectives => "Collectives",
            View::Alignment => "Alignment",
            View::Fabric => "Fabric",
            View::Diagnostics => "Diagnostics",
            View::Pipeline => "Pipeline",
        }
    }

    pub fn from_name(s: &str) -> Option<View> {
        View::ALL.into_iter().find(|v| v.name() == s)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum FileStatus {
    Queued,
    Loading { phase: Phase, input_bytes: u64, events: u64, mb_per_s: f64 },
    Ready,
    Failed(String),
    Cancelled,
}

impl FileStatus {
    pub fn is_done(&self) -> bool {
        matches!(self, FileStatus::Ready | FileStatus::Failed(_) | FileStatus::Cancelled)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FileEntry {
    pub id: FileId,
    pub name: String,
    /// Size in bytes (0 for a demo rank until it is generated).
    pub size: u64,
    pub status: FileStatus,
    /// `performance.now()` when its worker started on it.
    pub started_ms: Option<f64>,
    pub summary: Option<Rc<RankSummary>>,
    /// Its earliest event start (absolute ns, own clock).
    pub first_ns: Option<i64>,
    /// NCCL text rather than a trace: what it holds.
    pub text: Option<Vec<InputKind>>,
    /// Workers that parsed it (more than one: a large file read in pieces).
    pub workers: u32,
}

impl FileEntry {
    /// A file chosen and waiting for a worker.
    fn queued(id: FileId, name: String, size: u64) -> FileEntry {
        FileEntry {
            id,
            name,
            size,
            status: FileStatus::Queued,
            started_ms: None,
            summary: None,
            first_ns: None,
            text: None,
            workers: 1,
        }
    }
}

/// The NCCL side of the job (`rankscope nccl` over the NCCL_DEBUG logs, `rankscope nccl-tests`
/// over the nccl-tests outputs) and its Flight Recorder dumps, read by the core's job API.
pub use rankscope_core::job::{Fabric, FlightRecorder};

/// The ranks decided across files.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembly {
    /// `(file, summary)` sorted by rank, then file name.
    pub ranks: Vec<(FileId, Rc<RankSummary>)>,
    pub facts: JobFacts,
    pub errors: Vec<JobError>,
    /// Every loaded trace's decision: the key its summary and part are filed under.
    pub decisions: BTreeMap<FileId, RankDecision>,
}

/// The job, assembled once every file is done: ranks decided across files, facts computed,
/// analysis combined.
#[derive(Debug, Clone, PartialEq)]
pub struct JobView {
    /// `(file, summary)` sorted by rank, then file name.
    pub ranks: Vec<(FileId, Rc<RankSummary>)>,
    pub facts: JobFacts,
    /// `rankscope analyze --json` of the same files.
    /// Shared with the digest it came from, if any (not copied).
    pub analysis: std::sync::Arc<Analysis>,
    /// Per collective (kind, process group): its earliest execution on any rank (aligned):
    /// `(file, start_ns, end_ns)` on that rank's own clock.
    pub first_op: BTreeMap<(String, String), (FileId, i64, i64)>,
    /// Per file: the alignment's offset of its rank (aligned time = own time − offset).
    pub offsets: BTreeMap<FileId, i64>,
    /// Earliest aligned event start over all ranks: time 0 of the merged trace (the export
    /// plan's; without events, the job's earliest start).
    pub origin_ns: i64,
    /// What an export writes (the CLI's plan): the ranks whose trace is loaded, in rank order,
    /// each under its rank with its offset; `export_files[k]` holds the events of
    /// `export.ranks[k]`.
    pub export: ExportPlan,
    pub export_files: Vec<FileId>,
    /// NCCL logs and nccl-tests output, when any were loaded (the tests are also the analysis'
    /// fabric: `analysis.fabric` places the trace's collectives against them).
    pub fabric: Option<Rc<Fabric>>,
    /// Flight Recorder dumps, when any were loaded: their sequence report, as
    /// `rankscope analyze` adds it under `flight_recorder`.
    pub flight_recorder: Option<Rc<FlightRecorder>>,
    /// The job came from a digest: its file's name (ranks without a loaded trace have no
    /// lanes, and their file ids are [`digest_file`]s, held by no worker).
    pub digest: Option<String>,
}

/// The file id of a digest rank that has no trace loaded: above every real file's.
pub fn digest_file(index: usize) -> FileId {
    DIGEST_FILES + index as FileId
}

const DIGEST_FILES: FileId = 1 << 30;

impl JobView {
    /// The file of a rank (the first one when several claim it).
    pub fn file_of(&self, rank: u32) -> Option<FileId> {
        self.ranks.iter().find(|(_, s)| s.rank == rank).map(|(f, _)| *f)
    }

    pub fn offset(&self, file: FileId) -> i64 {
        self.offsets.get(&file).copied().unwrap_or(0)
    }
}

/// What the user last clicked: an event on the timeline, or a step or collective that opened it
/// (times on `file`'s own clock). A host page hears of it (`embed`).
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    pub file: FileId,
    pub start_ns: i64,
    pub end_ns: i64,
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub files: Vec<FileEntry>,
    /// The files are the built-in synthetic demo.
    pub demo: bool,
    pub view: View,
    pub help: bool,
    /// Timeline window, ns relative to the job's first event (None: the whole job).
    pub window: Option<(i64, i64)>,
    /// The rank the timeline shows first (from a heatmap cell, a collective, the URL hash).
    pub focus: Option<u32>,
    /// The step the timeline window came from (kept in the URL hash).
    pub step: Option<u32>,
    /// Timeline on the aligned clock (each rank's time − its alignment offset) or the raw ones.
    pub aligned: bool,
    /// The bytes of the NCCL text files.
    pub texts: BTreeMap<FileId, Rc<Vec<u8>>>,
    /// Each file's analysis part, as its worker last sent it.
    pub parts: BTreeMap<FileId, Rc<RankPart>>,
    pub assembly: Option<Rc<Assembly>>,
    /// Assemblies so far (never reset: tells one job's assembly from the next one's).
    pub assemblies: u32,
    pub job: Option<Rc<JobView>>,
    /// The last selection, and how many there were (tells a new one from the same one again).
    pub selection: Option<Selection>,
    pub selections: u32,
    /// How many times another view opened the timeline (`Action::Open`): the same place opened
    /// again is shown again.
    pub opened: u32,
    /// Messages from origins the embedding protocol does not trust, ignored: count per origin.
    pub untrusted: BTreeMap<String, u32>,
    /// The job's title, when a host page gave one.
    pub title: Option<String>,
    /// The job digest among the files, decoded (its file, its job).
    pub digest: Option<(FileId, Rc<job::JobDigest>)>,
    /// The group or role the views are filtered to (kept in the URL hash).
    pub filter: Option<crate::groups::Filter>,
}

impl Default for State {
    fn default() -> Self {
        State {
            files: Vec::new(),
            demo: false,
            view: View::Summary,
            help: false,
            window: None,
            focus: None,
            step: None,
            aligned: true,
            parts: BTreeMap::new(),
            texts: BTreeMap::new(),
            assembly: None,
            assemblies: 0,
            job: None,
            selection: None,
            selections: 0,
            opened: 0,
            untrusted: BTreeMap::new(),
            title: None,
            digest: None,
            filter: None,
        }
    }
}

impl State {
    /// Every file is done, at least one is a rank, and the analysis is combined: the views can
    /// show the job.
    pub fn ready(&self) -> bool {
        self.job
            .as_ref()
            .is_some_and(|j| !j.ranks.is_empty() || j.fabric.is_some() || j.flight_recorder.is_some())
    }

    pub fn loading(&self) -> bool {
        self.files.iter().any(|f| !f.status.is_done())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A new set of files (or the demo) replaces the current job.
    Start {
        files: Vec<(String, u64)>,
        demo: bool,
    },
    /// Files added to the current job (traces beside an opened digest): their ids follow the
    /// current files'.
    Add {
        files: Vec<(String, u64)>,
    },
    Started {
        file: FileId,
        now_ms: f64,
    },
    Progress {
        file: FileId,
        phase: Phase,
        input_bytes: u64,
        events: u64,
        /// Workers parsing the file (more than one: it is read in pieces).
        workers: u32,
        now_ms: f64,
    },
    Loaded {
        file: FileId,
        summary: Box<RankSummary>,
        part: Box<RankPart>,
        first_ns: Option<i64>,
    },
    /// A job digest, decoded by its worker.
    Digest {
        file: FileId,
        digest: Rc<job::JobDigest>,
    },
    /// A file that is NCCL text, with its bytes.
    Text {
        file: FileId,
        kinds: Vec<InputKind>,
        bytes: Rc<Vec<u8>>,
    },
    /// The worker holding `file` died and it is being read again: the job is made anew when
    /// it is back (its new worker must be told the job's rank).
    Lost {
        file: FileId,
    },
    Failed {
        file: FileId,
        error: String,
    },
    Cancelled {
        file: FileId,
    },
    SetView(View),
    ToggleHelp,
    CloseHelp,
    SetWindow(Option<(i64, i64)>),
    /// The timeline at `file`'s rank over `[start_ns, end_ns]` of its own clock (with a margin),
    /// from `step` when it came from one.
    Open {
        file: FileId,
        step: Option<u32>,
        start_ns: i64,
        end_ns: i64,
    },
    SetFocus(Option<u32>, Option<u32>),
    SetAligned(bool),
    /// An event clicked on the timeline.
    Select(Selection),
    /// A message from an untrusted origin was ignored.
    Untrusted(String),
    SetTitle(Option<String>),
    SetFilter(Option<crate::groups::Filter>),
    /// Back to the landing page.
    Reset,
}

impl Reducible for State {
    type Action = Action;

    fn reduce(self: Rc<Self>, action: Action) -> Rc<Self> {
        let mut s = (*self).clone();
        match action {
            Action::Start { files, demo } => {
                s.files = files
                    .into_iter()
                    .enumerate()
                    .map(|(i, (name, size))| FileEntry::queued(i as FileId, name, size))
                    .collect();
                s.texts.clear();
                s.digest = None;
                s.demo = demo;
                s.parts.clear();
                s.assembly = None;
                s.job = None;
            }
            Action::Add { files } => {
                let base = s.files.len();
                s.files.extend(
                    files
                        .into_iter()
                        .enumerate()
                        .map(|(i, (name, size))| FileEntry::queued((base + i) as FileId, name, size)),
                );
                s.assembly = None;
                s.job = None;
            }
            Action::Started { file, now_ms } => {
                if let Some(f) = s.files.get_mut(file as usize) {
                    f.started_ms = Some(now_ms);
                    f.status = FileStatus::Loading {
                        phase: Phase::Reading,
                        input_bytes: 0,
                        events: 0,
                        mb_per_s: 0.0,
                    };
                }
            }
            Action::Progress { file, phase, input_bytes, events, workers, now_ms } => {
                if let Some(f) = s.files.get_mut(file as usize) {
                    if !f.status.is_done() {
                        f.workers = workers;
                        let secs = f.started_ms.map_or(0.0, |t| (now_ms - t) / 1000.0);
                        let mb_per_s = if secs > 0.0 { input_bytes as f64 / 1e6 / secs } else { 0.0 };
                        f.size = f.size.max(input_bytes);
                        f.status = FileStatus::Loading { phase, input_bytes, events, mb_per_s };
                    }
                }
            }
            Action::Loaded { file, summary, part, first_ns } => {
                if let Some(f) = s.files.get_mut(file as usize) {
                    f.size = f.size.max(summary.input_bytes);
                    f.summary = Some(Rc::new(*summary));
                    f.first_ns = first_ns;
                    f.status = FileStatus::Ready;
                    s.parts.insert(file, Rc::new(*part));
                }
            }
            Action::Digest { file, digest } => {
                if let Some(f) = s.files.get_mut(file as usize) {
                    if s.digest.is_some() {
                        // A second digest is refused: a digest is a whole job.
                        f.status = FileStatus::Failed(format!(
                            "{}: a second job digest (one job at a time)",
                            f.name
                        ));
                    } else {
                        f.text = Some(vec![InputKind::Digest]);
                        f.status = FileStatus::Ready;
                        s.digest = Some((file, digest));
                    }
                }
            }
            Action::Text { file, kinds, bytes } => {
                if let Some(f) = s.files.get_mut(file as usize) {
                    f.size = f.size.max(bytes.len() as u64);
                    f.text = Some(kinds);
                    f.status = FileStatus::Ready;
                    s.texts.insert(file, bytes);
                }
            }
            Action::Lost { file } => {
                if let Some(f) = s.files.get_mut(file as usize) {
                    f.status = FileStatus::Queued;
                    s.assembly = None;
                    s.job = None;
                }
            }
            Action::Failed { file, error } => {
                if let Some(f) = s.files.get_mut(file as usize) {
                    f.status = FileStatus::Failed(error);
                }
            }
            Action::Cancelled { file } => {
                if let Some(f) = s.files.get_mut(file as usize) {
                    if !f.status.is_done() {
                        f.status = FileStatus::Cancelled;
                    }
                }
            }
            Action::SetView(v) => s.view = v,
            Action::ToggleHelp => s.help = !s.help,
            Action::CloseHelp => s.help = false,
            Action::SetWindow(w) => s.window = w,
            Action::Open { file, step, start_ns, end_ns } => {
                if let Some(job) = s.job.clone() {
                    let off = if s.aligned { job.offset(file) } else { 0 };
                    let origin = job.facts.span_start_ns;
                    let pad = ((end_ns - start_ns) / 20).max(if step.is_some() { 0 } else { 20_000 });
                    s.view = View::Timeline;
                    s.focus = job.ranks.iter().find(|(f, _)| *f == file).map(|(_, r)| r.rank);
                    s.step = step;
                    s.window = Some((start_ns - off - origin - pad, end_ns - off - origin + pad));
                    s.selection = Some(Selection { file, start_ns, end_ns, name: None });
                    s.selections = s.selections.wrapping_add(1);
                    s.opened = s.opened.wrapping_add(1);
                }
            }
            Action::SetFocus(rank, step) => {
                s.focus = rank;
                s.step = step;
            }
            Action::SetAligned(a) => s.aligned = a,
            Action::Select(sel) => {
                s.selection = Some(sel);
                s.selections = s.selections.wrapping_add(1);
            }
            Action::Untrusted(origin) => *s.untrusted.entry(origin).or_default() += 1,
            Action::SetTitle(t) => s.title = t,
            Action::SetFilter(f) => s.filter = f,
            Action::Reset => {
                s = State {
                    view: s.view,
                    aligned: s.aligned,
                    assemblies: s.assemblies,
                    selections: s.selections,
                    untrusted: std::mem::take(&mut s.untrusted),
                    ..State::default()
                };
            }
        }
        if s.assembly.is_none() && !s.files.is_empty() && !s.loading() {
            s.assemblies = s.assemblies.wrapping_add(1);
            let a = match &s.digest {
                Some((_, d)) => assemble_digest(d, &mut s.files),
                None => assemble(&mut s.files),
            };
            s.assembly = Some(Rc::new(a));
        }
        if s.job.is_none() {
            if let Some(a) = &s.assembly {
                let job = match &s.digest {
                    Some((file, d)) => combine_digest(a, d, &s.files, *file),
                    None => combine(a, &s.files, &s.parts, &s.texts),
                };
                // NCCL text only: the Fabric view is all there is to see.
                if job.ranks.is_empty() && job.fabric.is_some() {
                    s.view = View::Fabric;
                }
                s.job = Some(Rc::new(job));
            }
        }
        Rc::new(s)
    }
}

/// Runs the job half of the analysis on the final parts (in rank order, as the CLI's job has
/// them), each keyed by the job's decision for its file, and derives what the views need from it.
fn combine(
    a: &Assembly,
    files: &[FileEntry],
    parts: &BTreeMap<FileId, Rc<RankPart>>,
    texts: &BTreeMap<FileId, Rc<Vec<u8>>>,
) -> JobView {
    let keyed: Vec<(FileId, RankDecision, RankPart)> = a
        .ranks
        .iter()
        .filter_map(|(f, _)| Some((*f, a.decisions.get(f)?.clone(), (**parts.get(f)?).clone())))
        .collect();
    // NCCL text and dumps, in load order (as a folder lists them).
    let texts: Vec<job::TextRef<'_>> = files
        .iter()
        .filter_map(|f| {
            let kinds = f.text.as_deref()?;
            texts.get(&f.id).map(|b| job::TextRef { name: &f.name, kinds, bytes: &b[..] })
        })
        .collect();
    let out = job::combine_ranked(
        keyed.iter().map(|(_, d, p)| (d.clone(), p.clone())).collect(),
        a.errors.clone(),
        &texts,
        &analyze::Options::default(),
    );
    let parts: Vec<(FileId, u32, &RankPart)> = keyed.iter().map(|(f, d, p)| (*f, d.rank, p)).collect();
    let reports = (out.fabric, out.flight_recorder);
    job_view(a, files, &parts, std::sync::Arc::new(out.analysis), reports, None)
}

/// What the views need from the job's outputs and its parts (each with its file and the rank
/// the job filed it under).
fn job_view(
    a: &Assembly,
    files: &[FileEntry],
    parts: &[(FileId, u32, &RankPart)],
    analysis: std::sync::Arc<Analysis>,
    (fabric, flight_recorder): (Option<job::Fabric>, Option<job::FlightRecorder>),
    digest: Option<String>,
) -> JobView {
    let offsets: BTreeMap<FileId, i64> =
        parts.iter().map(|(f, rank, _)| (*f, export::offset_of(&analysis.alignment, *rank))).collect();
    let mut first_op: BTreeMap<(String, String), (FileId, i64, i64)> = BTreeMap::new();
    for (f, _, p) in parts {
        let off = offsets.get(f).copied().unwrap_or(0);
        for i in &p.instances {
            let key = (i.kind.name().to_string(), i.pg.clone());
            let better = first_op
                .get(&key)
                .is_none_or(|&(g, s, _)| i.start_ns - off < s - offsets.get(&g).copied().unwrap_or(0));
            if better {
                first_op.insert(key, (*f, i.start_ns, i.end_ns));
            }
        }
    }
    // The export plan (the CLI's): every rank whose trace a worker holds (a digest's ranks
    // without their trace have none), in the job's order, under the rank each is filed under.
    let first_ns = |f: FileId| files.get(f as usize).and_then(|e| e.first_ns);
    let export_files: Vec<FileId> = a.ranks.iter().map(|(f, _)| *f).filter(|f| *f < DIGEST_FILES).collect();
    let export = ExportPlan::of(
        &analysis,
        export_files.iter().map(|f| (a.decisions.get(f).map_or(0, |d| d.rank), first_ns(*f))),
    );
    let events = export_files.iter().any(|f| first_ns(*f).is_some());
    let origin_ns = if events { export.origin_ns } else { a.facts.span_start_ns };
    JobView {
        ranks: a.ranks.clone(),
        facts: a.facts.clone(),
        analysis,
        first_op,
        offsets,
        origin_ns,
        export,
        export_files,
        fabric: fabric.map(Rc::new),
        flight_recorder: flight_recorder.map(Rc::new),
        digest,
    }
}

/// The job of a digest: its stored analysis (never recomputed) and its parts; each rank's
/// file is the trace placed on it, else a [`digest_file`].
fn combine_digest(a: &Assembly, d: &job::JobDigest, files: &[FileEntry], digest: FileId) -> JobView {
    // The digest's parts are filed under its ranks already: their key is the rank they carry.
    let parts: Vec<(FileId, u32, &RankPart)> = d
        .files
        .iter()
        .enumerate()
        .map(|(i, (_, p))| {
            let rank = p.info.rank;
            let file = a.ranks.iter().find(|(_, s)| s.rank == rank).map_or(digest_file(i), |(f, _)| *f);
            (file, rank, p)
        })
        .collect();
    let name = files.get(digest as usize).map(|f| f.name.clone()).unwrap_or_default();
    job_view(a, files, &parts, d.analysis.clone(), d.reports(), Some(name))
}

/// The ranks of a digest: every rank of the job, a trace placed on it by the core
/// ([`job::JobDigest::place`]) giving it its summary (lanes, for the timeline), the others the
/// summary the digest's part gives. Traces of no rank of the job fail with the reason.
fn assemble_digest(d: &job::JobDigest, files: &mut [FileEntry]) -> Assembly {
    let (loaded, claims) = loaded_claims(files);
    let placed = d.place(&claims);
    let mut by_index: BTreeMap<usize, (FileId, Rc<RankSummary>)> = BTreeMap::new();
    let mut decisions = BTreeMap::new();
    for (&i, p) in loaded.iter().zip(placed) {
        let f = &mut files[i];
        let Some(p) = p else {
            f.summary = None;
            f.status = FileStatus::Failed(format!(
                "{}: not a rank of this job's digest (by its name or its rank)",
                f.name
            ));
            continue;
        };
        if let Some(s) = f.summary.as_mut() {
            let mut patched = (**s).clone();
            apply_decision(&mut patched, &p.decision);
            // The rank is the digest's: named as the analysis names it (the file the part was
            // made from), so its row shows the digest's figures.
            if let Some((c, _)) = d.files.get(p.index) {
                patched.file = c.file.clone();
            }
            *s = Rc::new(patched);
            decisions.insert(f.id, p.decision);
            by_index.insert(p.index, (f.id, s.clone()));
        }
    }
    let ranks: Vec<(FileId, Rc<RankSummary>)> = (0..d.files.len())
        .filter_map(|i| by_index.remove(&i).or_else(|| Some((digest_file(i), Rc::new(d.summary(i)?)))))
        .collect();
    let mut ranks = ranks;
    ranks.sort_by(|a, b| (a.1.rank, &a.1.file).cmp(&(b.1.rank, &b.1.file)));
    Assembly {
        facts: JobFacts::from_ranks(ranks.iter().map(|(_, s)| &**s)),
        ranks,
        errors: d.analysis.errors.clone(),
        decisions,
    }
}

/// The loaded files (indices into `files`) and each one's claim on its rank, in load order.
fn loaded_claims(files: &[FileEntry]) -> (Vec<usize>, Vec<RankClaim>) {
    let loaded: Vec<usize> =
        files.iter().enumerate().filter(|(_, f)| f.summary.is_some()).map(|(i, _)| i).collect();
    let claims: Vec<RankClaim> = loaded
        .iter()
        .filter_map(|&i| files[i].summary.as_ref())
        .map(|s| RankClaim { file: s.file.clone(), claimed_rank: s.claimed_rank, in_file: None })
        .collect();
    (loaded, claims)
}

/// Decides ranks across the loaded files, once (as the CLI does: `job::decide` over their
/// claims), files each summary under its decision, and computes the job facts.
fn assemble(files: &mut [FileEntry]) -> Assembly {
    let (loaded, claims) = loaded_claims(files);
    let (decided, errors) = job::decide(&claims, &[]);
    let mut ranks = Vec::new();
    let mut decisions = BTreeMap::new();
    for (&i, d) in loaded.iter().zip(&decided) {
        let f = &mut files[i];
        if let Some(s) = f.summary.as_mut() {
            decisions.insert(f.id, d.clone());
            let mut patched = (**s).clone();
            apply_decision(&mut patched, d);
            *s = Rc::new(patched);
            ranks.push((f.id, s.clone()));
        }
    }
    ranks.sort_by(|a, b| (a.1.rank, &a.1.file).cmp(&(b.1.rank, &b.1.file)));
    Assembly { facts: JobFacts::from_ranks(ranks.iter().map(|(_, s)| &**s)), ranks, errors, decisions }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rankscope_core::view::RankView;

    fn loaded(file: FileId, name: &str, claimed: Option<i64>) -> Action {
        let json = match claimed {
            Some(r) => format!(
                r#"{{"distributedInfo":{{"rank":{r},"world_size":4}},"traceEvents":[{{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2}}]}}"#
            ),
            None => r#"{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2}]}"#.to_string(),
        };
        let t = rankscope_core::parse::ingest_bytes(name, json.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let v = RankView::new(t, &Default::default());
        Action::Loaded {
            file,
            summary: Box::new(v.summary().unwrap_or_else(|| panic!("summary"))),
            part: Box::new(v.analysis_part().unwrap_or_else(|| panic!("part"))),
            first_ns: v.first_ns(),
        }
    }

    #[test]
    fn the_job_is_assembled_when_every_file_is_done() {
        let mut s = Rc::new(State::default());
        let files = vec![("b.json".to_string(), 10), ("a.json".to_string(), 10), ("bad.png".to_string(), 5)];
        s = s.reduce(Action::Start { files, demo: false });
        s = s.reduce(Action::Started { file: 0, now_ms: 1000.0 });
        s = s.reduce(Action::Progress {
            file: 0,
            phase: Phase::Reading,
            input_bytes: 2_000_000,
            events: 5,
            workers: 1,
            now_ms: 2000.0,
        });
        assert!(
            matches!(s.files[0].status, FileStatus::Loading { mb_per_s, .. } if (mb_per_s - 2.0).abs() < 1e-9)
        );
        s = s.reduce(loaded(0, "b.json", None));
        s = s.reduce(Action::Failed { file: 2, error: "bad.png: not a trace".into() });
        assert!(s.job.is_none() && !s.ready(), "a file is still loading");
        s = s.reduce(loaded(1, "a.json", Some(0)));
        // b.json's worker normalized it alone (rank 0); the job decides rank 1 for it, once, and
        // files its summary and part under that key: the worker is never told.
        assert!(s.ready(), "the job is there as soon as the last file is read");
        let a = s.assembly.clone().unwrap_or_else(|| panic!("assembly"));
        let keys: Vec<(FileId, u32)> = a.decisions.iter().map(|(f, d)| (*f, d.rank)).collect();
        assert_eq!(keys, [(0, 1), (1, 0)]);
        let job = s.job.clone().unwrap_or_else(|| panic!("job"));
        // The exports ask each worker for its rank under the job's number.
        let planned: Vec<(FileId, u32)> =
            job.export_files.iter().zip(&job.export.ranks).map(|(f, p)| (*f, p.rank)).collect();
        assert_eq!(planned, [(1, 0), (0, 1)]);
        // a.json claims rank 0; b.json gets the smallest free rank by load order.
        let got: Vec<(u32, &str, &str)> =
            job.ranks.iter().map(|(_, r)| (r.rank, r.file.as_str(), r.rank_source.as_str())).collect();
        assert_eq!(got, [(0, "a.json", "distributed_info"), (1, "b.json", "load_order")]);
        assert_eq!(job.facts.missing_ranks, [2, 3]);
        let ranks: Vec<(u32, &str)> =
            job.analysis.ranks.iter().map(|r| (r.rank, r.source.as_str())).collect();
        assert_eq!(ranks, [(0, "a.json"), (1, "b.json")]);
        assert!(job.analysis.rank_totals.iter().zip([0, 1]).all(|(t, r)| t.rank == r));
        // Late progress does not revive a finished file.
        let s2 = s.clone().reduce(Action::Progress {
            file: 2,
            phase: Phase::Reading,
            input_bytes: 1,
            events: 0,
            workers: 1,
            now_ms: 3.0,
        });
        assert!(matches!(s2.files[2].status, FileStatus::Failed(_)));
        let s3 = s.reduce(Action::Reset);
        assert!(s3.files.is_empty() && s3.job.is_none());
    }

    /// A job digest and a trace of one of its ranks, as bytes (synthetic 4-rank job).
    fn digest_and_trace() -> (Vec<u8>, Vec<u8>, rankscope_core::job::JobOutput) {
        use rankscope_synth::{self as synth, SynthConfig};
        let cfg = SynthConfig {
            ranks: 4,
            steps: 2,
            kernels_per_step: 30,
            straggler_rank: Some(1),
            ..SynthConfig::default()
        };
        let mut traces = Vec::new();
        let mut files = Vec::new();
        for rank in 0..4 {
            let mut bytes = Vec::new();
            synth::write_rank(&cfg, rank, &mut bytes).unwrap_or_else(|e| panic!("{e}"));
            let t = rankscope_core::parse::ingest_bytes(&synth::file_name(rank, false), &bytes)
                .unwrap_or_else(|e| panic!("{e}"));
            files.push(
                job::part_of(t, &Default::default(), &Default::default())
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| panic!("part")),
            );
            traces.push(bytes);
        }
        let (files, errors) = job::decided(files, &[]);
        let out = job::combine_decided(
            files.iter().map(|(_, p)| p.clone()).collect(),
            errors,
            &[],
            &Default::default(),
        );
        let digest = job::digest::encode(&files, &[], &out.analysis);
        (digest, traces.swap_remove(2), out)
    }

    #[test]
    fn a_digest_is_the_job_and_added_traces_land_on_its_ranks() {
        let (digest, trace2, out) = digest_and_trace();
        let mut s = Rc::new(State::default());
        s = s
            .reduce(Action::Start { files: vec![("job.rsdigest".into(), digest.len() as u64)], demo: false });
        let digest = job::digest::decode("job.rsdigest", &digest).unwrap_or_else(|e| panic!("{e}")).lean();
        s = s.reduce(Action::Digest { file: 0, digest: Rc::new(digest) });
        assert!(s.ready());
        let job = s.job.clone().unwrap_or_else(|| panic!("job"));
        assert_eq!(*job.analysis, out.analysis, "the stored analysis, as combine made it");
        assert_eq!(job.ranks.iter().map(|(_, r)| r.rank).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert!(job.export_files.is_empty() && job.export.ranks.is_empty(), "no events: nothing to export");
        assert_eq!(job.digest.as_deref(), Some("job.rsdigest"));
        // A trace of rank 2, under another folder: placed on rank 2 by its name, on its offset.
        s = s.reduce(Action::Add { files: vec![("rank2.pt.trace.json".into(), trace2.len() as u64)] });
        assert!(!s.ready());
        let t = rankscope_core::parse::ingest_bytes("rank2.pt.trace.json", &trace2)
            .unwrap_or_else(|e| panic!("{e}"));
        let v = RankView::new(t, &Default::default());
        s = s.reduce(Action::Loaded {
            file: 1,
            summary: Box::new(v.summary().unwrap_or_else(|| panic!("summary"))),
            part: Box::new(v.analysis_part().unwrap_or_else(|| panic!("part"))),
            first_ns: v.first_ns(),
        });
        let job = s.job.clone().unwrap_or_else(|| panic!("job"));
        assert_eq!(*job.analysis, out.analysis, "adding a trace changes no figure");
        assert_eq!(job.export_files, [1]);
        assert_eq!(
            job.export.ranks.iter().map(|p| p.rank).collect::<Vec<_>>(),
            [2],
            "exported as the digest's rank 2"
        );
        assert_eq!(job.file_of(2), Some(1));
        assert_eq!(job.offset(1), out.offset_of(2));
        // A file that is no rank of the job is refused with the reason.
        let mut s2 = s.clone().reduce(Action::Add { files: vec![("other.json".into(), 10)] });
        let other = rankscope_core::parse::ingest_bytes(
            "other.json",
            br#"{"distributedInfo":{"rank":9},"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2}]}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let v = RankView::new(other, &Default::default());
        s2 = s2.reduce(Action::Loaded {
            file: 2,
            summary: Box::new(v.summary().unwrap_or_else(|| panic!("summary"))),
            part: Box::new(v.analysis_part().unwrap_or_else(|| panic!("part"))),
            first_ns: v.first_ns(),
        });
        assert!(
            matches!(&s2.files[2].status, FileStatus::Failed(e) if e.contains("not a rank of this job's digest"))
        );
        assert!(s2.ready());
    }
}
