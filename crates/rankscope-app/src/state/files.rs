//! The files of the job and how far each has come: the load actions ([`State::load`]).
//!
//! A file holds one rank or several (a merged trace: its worker cuts it into its ranks, as
//! `rankscope analyze` does), each arriving as its own `Loaded` with how many the file holds; the
//! file is read once the last is in. Its ranks keep their [`RankId`] (the file and the place in
//! it) from the worker to every view: the job's rank number is decided later, across files.

use std::rc::Rc;

use rankscope_core::view::{RankClaim, RankSummary};

use super::{Action, State};
use crate::protocol::{FileId, InputKind, Phase, RankId};

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
    /// The ranks it holds that its worker sent so far, in the file's order (`ranks[k]` is
    /// `RankId { file: id, index: k }`).
    pub ranks: Vec<FileRank>,
    /// How many ranks its worker said it holds (0 until the first came).
    pub holds: u32,
    /// NCCL text rather than a trace: what it holds.
    pub text: Option<Vec<InputKind>>,
    /// Workers that parsed it (more than one: a large file read in pieces).
    pub workers: u32,
}

/// One rank of a file, as its worker sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRank {
    /// What the rank says of its number: the input of the job's rank decision.
    pub claim: RankClaim,
    /// Filed under the job's decision once the job is assembled.
    pub summary: Rc<RankSummary>,
    /// Its earliest event start (absolute ns, own clock).
    pub first_ns: Option<i64>,
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
            ranks: Vec::new(),
            holds: 0,
            text: None,
            workers: 1,
        }
    }

    /// Its ranks' ids, in the file's order.
    pub fn rank_ids(&self) -> impl Iterator<Item = RankId> + '_ {
        (0u32..).zip(&self.ranks).map(|(index, _)| RankId { file: self.id, index })
    }

    /// Events of all its ranks.
    pub fn events(&self) -> u64 {
        self.ranks.iter().map(|r| r.summary.events).sum()
    }
}

/// The rank `id` of `files`, when its worker sent it.
pub fn rank_of(files: &[FileEntry], id: RankId) -> Option<&FileRank> {
    files.get(id.file as usize)?.ranks.get(id.index as usize)
}

impl State {
    /// Applies a load action (a file chosen, read, failed, lost, ...); other actions are the
    /// reducer's own and left alone.
    pub(super) fn load(&mut self, action: Action) {
        let s = self;
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
            Action::Loaded { id, of, claim, summary, part, first_ns } => {
                // Ranks come in the file's order; one out of it (a stale message) is dropped.
                let Some(f) = s.files.get_mut(id.file as usize) else { return };
                if f.status.is_done() || id.index as usize != f.ranks.len() || id.index >= of {
                    return;
                }
                f.holds = of;
                f.ranks.push(FileRank { claim, summary: Rc::new(*summary), first_ns });
                // A part's bytes are its share of the file's.
                f.size = f.size.max(f.ranks.iter().map(|r| r.summary.input_bytes).sum());
                if f.ranks.len() as u32 == of {
                    f.status = FileStatus::Ready;
                }
                s.parts.insert(id, Rc::new(*part));
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
                    // Read again: its ranks come again.
                    f.status = FileStatus::Queued;
                    f.ranks.clear();
                    f.holds = 0;
                    s.parts.retain(|id, _| id.file != file);
                    s.assembly = None;
                    s.job = None;
                }
            }
            Action::Failed { file, error } => {
                if let Some(f) = s.files.get_mut(file as usize) {
                    f.status = FileStatus::Failed(error);
                    f.ranks.clear();
                    s.parts.retain(|id, _| id.file != file);
                }
            }
            Action::Cancelled { file } => {
                if let Some(f) = s.files.get_mut(file as usize) {
                    if !f.status.is_done() {
                        f.status = FileStatus::Cancelled;
                        f.ranks.clear();
                        s.parts.retain(|id, _| id.file != file);
                    }
                }
            }
            _ => {}
        }
    }
}
