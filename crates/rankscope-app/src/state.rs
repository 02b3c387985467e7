//! The UI's state as a reducer: every change is an [`Action`], applied in one place.
//!
//! The state holds what the views show: the files and how far each has come, the small per-rank
//! summaries, the job facts made from them once every file is done, the active view and the
//! timeline window. The big tables are not here: they stay in the workers (see
//! [`crate::protocol`]).
//!
//! Adding a view (Ranks × steps, Collectives, Alignment and Findings when the analysis report
//! lands): a [`View`] variant with its name, a component in `views/`, and, for data, one more
//! field of [`JobView`] filled when the job is assembled (the analysis report is computed from the
//! same per-rank inputs, so it arrives the same way the summaries do).

use std::rc::Rc;

use rankscope_core::view::{apply_decision, decide_ranks, JobFacts, RankClaim, RankSummary};
use yew::Reducible;

use crate::protocol::{FileId, Phase};

/// The views, in the order of the navigation bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Summary,
    Timeline,
    Diagnostics,
}

impl View {
    pub const ALL: [View; 3] = [View::Summary, View::Timeline, View::Diagnostics];

    /// The name in the URL hash.
    pub fn name(self) -> &'static str {
        match self {
            View::Summary => "summary",
            View::Timeline => "timeline",
            View::Diagnostics => "diagnostics",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            View::Summary => "Summary",
            View::Timeline => "Timeline",
            View::Diagnostics => "Diagnostics",
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
}

/// The job, assembled once every file is done: ranks decided across files, facts computed.
#[derive(Debug, Clone, PartialEq)]
pub struct JobView {
    /// `(file, summary)` sorted by rank, then file name.
    pub ranks: Vec<(FileId, Rc<RankSummary>)>,
    pub facts: JobFacts,
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
    pub job: Option<Rc<JobView>>,
}

impl Default for State {
    fn default() -> Self {
        State { files: Vec::new(), demo: false, view: View::Summary, help: false, window: None, job: None }
    }
}

impl State {
    /// Every file is done and at least one is a rank: the views can show the job.
    pub fn ready(&self) -> bool {
        self.job.as_ref().is_some_and(|j| !j.ranks.is_empty())
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
    Started {
        file: FileId,
        now_ms: f64,
    },
    Progress {
        file: FileId,
        phase: Phase,
        input_bytes: u64,
        events: u64,
        now_ms: f64,
    },
    Loaded {
        file: FileId,
        summary: Box<RankSummary>,
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
                    .map(|(i, (name, size))| FileEntry {
                        id: i as FileId,
                        name,
                        size,
                        status: FileStatus::Queued,
                        started_ms: None,
                        summary: None,
                    })
                    .collect();
                s.demo = demo;
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
            Action::Progress { file, phase, input_bytes, events, now_ms } => {
                if let Some(f) = s.files.get_mut(file as usize) {
                    if !f.status.is_done() {
                        let secs = f.started_ms.map_or(0.0, |t| (now_ms - t) / 1000.0);
                        let mb_per_s = if secs > 0.0 { input_bytes as f64 / 1e6 / secs } else { 0.0 };
                        f.size = f.size.max(input_bytes);
                        f.status = FileStatus::Loading { phase, input_bytes, events, mb_per_s };
                    }
                }
            }
            Action::Loaded { file, summary } => {
                if let Some(f) = s.files.get_mut(file as usize) {
                    f.size = f.size.max(summary.input_bytes);
                    f.summary = Some(Rc::new(*summary));
                    f.status = FileStatus::Ready;
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
            Action::Reset => s = State { view: s.view, ..State::default() },
        }
        if s.job.is_none() && !s.files.is_empty() && !s.loading() {
            s.job = Some(Rc::new(assemble(&mut s.files)));
        }
        Rc::new(s)
    }
}

/// Decides ranks across the loaded files (as the CLI does) and computes the job facts.
fn assemble(files: &mut [FileEntry]) -> JobView {
    let loaded: Vec<usize> =
        files.iter().enumerate().filter(|(_, f)| f.summary.is_some()).map(|(i, _)| i).collect();
    let claims: Vec<RankClaim> = loaded
        .iter()
        .filter_map(|&i| files[i].summary.as_ref())
        .map(|s| RankClaim { file: s.file.clone(), claimed_rank: s.claimed_rank })
        .collect();
    let decisions = decide_ranks(&claims);
    let mut ranks = Vec::new();
    for (&i, d) in loaded.iter().zip(&decisions) {
        let f = &mut files[i];
        if let Some(s) = f.summary.as_mut() {
            let mut patched = (**s).clone();
            apply_decision(&mut patched, d);
            *s = Rc::new(patched);
            ranks.push((f.id, s.clone()));
        }
    }
    ranks.sort_by(|a, b| (a.1.rank, &a.1.file).cmp(&(b.1.rank, &b.1.file)));
    JobView { facts: JobFacts::from_ranks(ranks.iter().map(|(_, s)| &**s)), ranks }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rankscope_core::view::RankView;

    fn summary(name: &str, claimed: Option<i64>) -> Box<RankSummary> {
        let json = match claimed {
            Some(r) => format!(
                r#"{{"distributedInfo":{{"rank":{r},"world_size":4}},"traceEvents":[{{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2}}]}}"#
            ),
            None => r#"{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2}]}"#.to_string(),
        };
        let t = rankscope_core::parse::ingest_bytes(name, json.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        Box::new(RankView::new(t, &Default::default()).summary().unwrap_or_else(|| panic!("summary")))
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
            now_ms: 2000.0,
        });
        assert!(
            matches!(s.files[0].status, FileStatus::Loading { mb_per_s, .. } if (mb_per_s - 2.0).abs() < 1e-9)
        );
        s = s.reduce(Action::Loaded { file: 0, summary: summary("b.json", None) });
        s = s.reduce(Action::Failed { file: 2, error: "bad.png: not a trace".into() });
        assert!(s.job.is_none() && !s.ready(), "a file is still loading");
        s = s.reduce(Action::Loaded { file: 1, summary: summary("a.json", Some(0)) });
        assert!(s.ready());
        let job = s.job.clone().unwrap_or_else(|| panic!("job"));
        // a.json claims rank 0; b.json gets the smallest free rank by load order.
        let got: Vec<(u32, &str, &str)> =
            job.ranks.iter().map(|(_, r)| (r.rank, r.file.as_str(), r.rank_source.as_str())).collect();
        assert_eq!(got, [(0, "a.json", "distributed_info"), (1, "b.json", "load_order")]);
        assert_eq!(job.facts.missing_ranks, [2, 3]);
        // Late progress does not revive a finished file.
        let s2 = s.clone().reduce(Action::Progress {
            file: 2,
            phase: Phase::Reading,
            input_bytes: 1,
            events: 0,
            now_ms: 3.0,
        });
        assert!(matches!(s2.files[2].status, FileStatus::Failed(_)));
        let s3 = s.reduce(Action::Reset);
        assert!(s3.files.is_empty() && s3.job.is_none());
    }
}
