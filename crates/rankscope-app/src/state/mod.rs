//! The UI's state as a reducer: every change is an [`Action`], applied in one place.
//!
//! The state holds what the views show: the files and how far each has come, the small per-rank
//! summaries, the job facts made from them once every file is done, the active view and the
//! timeline window. The big tables are not here: they stay in the workers (see
//! [`crate::protocol`]).
//!
//! The analysis arrives the way the summaries do: each worker sends, per rank of the file it read
//! (a merged file holds several, cut as `rankscope analyze` cuts them), the rank's claim,
//! summary and `analyze::RankPart` with `Loaded` ([`files`]). Once every file is done the ranks
//! are decided across files, once ([`Assembly`], `job::decide` over the ranks' claims, in load
//! order and each file's ranks in its order, as the CLI decides them): the decision is the key
//! each rank's summary and part are filed under (no figure of a part depends on the rank's number),
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
//! more field of [`JobView`] filled when the job is assembled ([`assembly`]).

mod assembly;
mod compared;
mod files;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::rc::Rc;

use rankscope_core::analyze::RankPart;
use rankscope_core::job;
use rankscope_core::view::{RankClaim, RankSummary};
use yew::Reducible;

pub use self::assembly::{digest_rank, held, Assembly, Fabric, FlightRecorder, JobView};
pub use self::compared::{Baseline, Compared};
pub use self::files::{rank_of, FileEntry, FileRank, FileStatus};
use crate::protocol::{FileId, InputKind, Phase, RankId};

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
    Compare,
}

impl View {
    pub const ALL: [View; 10] = [
        View::Summary,
        View::Layout,
        View::Steps,
        View::Timeline,
        View::Collectives,
        View::Alignment,
        View::Fabric,
        View::Diagnostics,
        View::Pipeline,
        View::Compare,
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
            View::Compare => "compare",
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
            View::Compare => "Compare",
        }
    }

    pub fn from_name(s: &str) -> Option<View> {
        View::ALL.into_iter().find(|v| v.name() == s)
    }
}

/// What the user last clicked: an event on the timeline, or a step or collective that opened it
/// (times on rank `id`'s own clock). A host page hears of it (`embed`).
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    pub id: RankId,
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
    /// Each rank's analysis part, as its worker last sent it.
    pub parts: BTreeMap<RankId, Rc<RankPart>>,
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
    /// Ranks pinned to the timeline's top, in pin order (kept in the URL hash).
    pub pins: Vec<u32>,
    /// The lead finding's path drawn on the timeline (kept in the URL hash).
    pub path: bool,
    /// The baseline the job is compared with (kept when another job is opened; the Compare view).
    pub baseline: Option<Baseline>,
    /// The job compared with its read baseline.
    pub compared: Option<Rc<Compared>>,
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
            pins: Vec::new(),
            path: false,
            baseline: None,
            compared: None,
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
    /// Rank `id` of a file that holds `of` ranks (`FromWorker::Loaded`).
    Loaded {
        id: RankId,
        of: u32,
        claim: RankClaim,
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
    /// The timeline at rank `id` over `[start_ns, end_ns]` of its own clock (with a margin),
    /// from `step` when it came from one.
    Open {
        id: RankId,
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
    /// The ranks pinned to the timeline's top.
    SetPins(Vec<u32>),
    /// The lead finding's path drawn on the timeline, or not.
    ShowPath(bool),
    /// The baseline the job is compared with, as far as it has come (`baseline.rs`).
    SetBaseline(Baseline),
    /// No baseline any more.
    ClearBaseline,
    /// Back to the landing page.
    Reset,
}

impl Reducible for State {
    type Action = Action;

    fn reduce(self: Rc<Self>, action: Action) -> Rc<Self> {
        let mut s = (*self).clone();
        match action {
            load @ (Action::Start { .. }
            | Action::Add { .. }
            | Action::Started { .. }
            | Action::Progress { .. }
            | Action::Loaded { .. }
            | Action::Digest { .. }
            | Action::Text { .. }
            | Action::Lost { .. }
            | Action::Failed { .. }
            | Action::Cancelled { .. }) => s.load(load),
            Action::SetView(v) => s.view = v,
            Action::ToggleHelp => s.help = !s.help,
            Action::CloseHelp => s.help = false,
            Action::SetWindow(w) => s.window = w,
            Action::Open { id, step, start_ns, end_ns } => {
                if let Some(job) = s.job.clone() {
                    let off = if s.aligned { job.offset(id) } else { 0 };
                    let origin = job.facts.span_start_ns;
                    let pad = ((end_ns - start_ns) / 20).max(if step.is_some() { 0 } else { 20_000 });
                    s.view = View::Timeline;
                    s.focus = job.ranks.iter().find(|(r, _)| *r == id).map(|(_, r)| r.rank);
                    s.step = step;
                    s.window = Some((start_ns - off - origin - pad, end_ns - off - origin + pad));
                    s.selection = Some(Selection { id, start_ns, end_ns, name: None });
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
            Action::SetPins(p) => s.pins = p,
            Action::ShowPath(on) => s.path = on,
            Action::SetBaseline(b) => s.baseline = Some(b),
            Action::ClearBaseline => s.baseline = None,
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
        s.assemble_when_read();
        s.compare_when_ready();
        Rc::new(s)
    }
}
