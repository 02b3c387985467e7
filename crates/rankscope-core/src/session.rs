//! A job read input by input on one host that keeps what it read: the npm package (in Node or
//! a page), a notebook, a dashboard. It is the [`crate::job`] API with the bookkeeping a
//! streaming shell would otherwise write itself, so that every such shell writes none:
//!
//! ```text
//!   Reader (one per input, fed in chunks) ──► Session::add ──► trace: its part (+ its tables)
//!                                                          └─► text: kept whole
//!                                                          └─► neither: failed / skipped note
//!   Session::finish ──► job::decide (ranks) ──► job::combine ──► Finished { JobOutput, views }
//! ```
//!
//! Rules it adds to the job API, each the CLI's (`rankscope analyze`):
//! - An input found by walking a folder that is not ours (a `config.json`) is **skipped with a
//!   note**; one named explicitly that is not ours is **failed** (listed, never thrown: the rest
//!   of the job stands). Neither changes the analysis JSON.
//! - An explicit rank that names no input is an error (it would otherwise be ignored in
//!   silence), as is a job where nothing could be read as a trace or a Flight Recorder dump.
//! - With `keep_tables`, each trace's normalized tables stay ([`RankView`]: tiles, search,
//!   pick), with the job's rank decision applied; without, only its part is kept (the tables
//!   are dropped as soon as the part is computed, so a large job costs one rank at a time).

use serde::Serialize;

use crate::analyze::{Options, RankPart};
use crate::inspect::FailedFile;
use crate::job::{self, InputKind, JobOutput, Loaded, Reader, Text, TextRef};
use crate::normalize::Rules;
use crate::view::timeline::{level_for, tiles_covering};
use crate::view::{RankClaim, RankView, Tile};

/// What became of one input given to [`Session::add`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Added {
    pub file: String,
    /// What the input was read as; `None` when it is neither a trace nor a text the job reads.
    pub kind: Option<InputKind>,
    /// Why the input is not part of the job (the reader's message, naming the file and byte
    /// offset).
    pub error: Option<String>,
    /// The input came from a walked folder and is not ours: a note, not a failure.
    pub skipped: bool,
}

/// Why a job could not be made at all (usage, or no readable input).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SessionError(pub String);

/// A job being read (see the module doc).
#[derive(Debug)]
pub struct Session {
    keep_tables: bool,
    rules: Rules,
    opts: Options,
    explicit: Vec<(String, u32)>,
    /// Every input's name, in the order given (for the explicit-rank check).
    names: Vec<String>,
    files: Vec<(RankClaim, RankPart)>,
    /// `views[i]` holds the tables of `files[i]` (with `keep_tables`).
    views: Vec<RankView>,
    texts: Vec<Text>,
    failed: Vec<FailedFile>,
    notes: Vec<String>,
}

impl Session {
    pub fn new(keep_tables: bool) -> Session {
        Session {
            keep_tables,
            rules: Rules::default(),
            opts: Options::default(),
            explicit: Vec::new(),
            names: Vec::new(),
            files: Vec::new(),
            views: Vec::new(),
            texts: Vec::new(),
            failed: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The analysis options (offsets, thresholds), as `--offset` and `--threshold` set them.
    pub fn options_mut(&mut self) -> &mut Options {
        &mut self.opts
    }

    /// Classification rules with a user rule file (JSON text) in front of the defaults
    /// (`--rules`). Set before adding traces.
    pub fn set_user_rules(&mut self, json: &str) -> Result<(), SessionError> {
        self.rules = Rules::with_user_rules(json).map_err(|e| SessionError(e.to_string()))?;
        Ok(())
    }

    /// Gives the input called `file` (its whole name or a trailing path part) rank `rank`
    /// (`--rank FILE=N`).
    pub fn set_rank(&mut self, file: &str, rank: u32) {
        self.explicit.push((file.to_string(), rank));
    }

    /// Ends `reader` and takes what it read into the job. `walked`: the input was found by
    /// walking a folder rather than named (see the module doc).
    pub fn add(&mut self, reader: Reader, walked: bool) -> Added {
        let file = reader.name().to_string();
        self.names.push(file.clone());
        match reader.finish() {
            Ok(Loaded::Trace(t)) => {
                let claim = job::claim_of(&t);
                if self.keep_tables {
                    let view = RankView::new(*t, &self.rules);
                    if let Some(part) = view.analysis_part() {
                        self.files.push((claim, part));
                        self.views.push(view);
                    }
                } else if let Some(f) = job::part_of(*t, &self.rules, &self.opts) {
                    self.files.push(f);
                }
                Added { file, kind: Some(InputKind::Trace), error: None, skipped: false }
            }
            // A job digest is a whole job (rankscope analyze and the app open it); this session
            // combines inputs, so it says so rather than leave the digest out in silence.
            Ok(Loaded::Text(t)) if t.kinds.contains(&InputKind::Digest) => {
                let error = format!(
                    "{}: a rankscope job digest: open it with `rankscope analyze` or the app",
                    t.name
                );
                self.names.pop();
                self.fail(&t.name, &error)
            }
            Ok(Loaded::Text(t)) => {
                if t.kinds == [InputKind::NcclLog] {
                    self.notes.push(format!(
                        "{} is an NCCL_DEBUG log: it goes into the fabric report, not the trace analysis",
                        t.name
                    ));
                }
                let kind = InputKind::of(&t.kinds);
                self.texts.push(t);
                Added { file, kind: Some(kind), error: None, skipped: false }
            }
            Err(e) => self.not_ours(file, e.to_string(), walked),
        }
    }

    /// Records an input that could not be read at all (an I/O error in the shell): it fails,
    /// the rest of the job stands.
    pub fn fail(&mut self, file: &str, error: &str) -> Added {
        self.names.push(file.to_string());
        self.failed.push(FailedFile { file: file.to_string(), error: error.to_string() });
        Added { file: file.to_string(), kind: None, error: Some(error.to_string()), skipped: false }
    }

    fn not_ours(&mut self, file: String, error: String, walked: bool) -> Added {
        if walked {
            self.notes.push(format!("skipped {error}"));
        } else {
            self.failed.push(FailedFile { file: file.clone(), error: error.clone() });
        }
        Added { file, kind: None, error: Some(error), skipped: walked }
    }

    /// Decides the ranks, combines the parts with the NCCL text and the dumps, and applies the
    /// job's rank decision to the kept tables.
    pub fn finish(self) -> Result<Finished, SessionError> {
        for (f, r) in &self.explicit {
            let hit = self.names.iter().any(|n| n == f || n.ends_with(&format!("/{f}")));
            if !hit {
                return Err(SessionError(format!("rank {f}={r}: no input is called `{f}`")));
            }
        }
        let mut views = self.views;
        if !views.is_empty() {
            let claims: Vec<RankClaim> = self.files.iter().map(|(c, _)| c.clone()).collect();
            let (decisions, _) = job::decide(&claims, &self.explicit);
            for (v, d) in views.iter_mut().zip(&decisions) {
                v.apply_decision(d);
            }
        }
        let refs: Vec<TextRef<'_>> = self.texts.iter().map(Text::as_ref).collect();
        let mut out = job::combine(self.files, &self.explicit, &refs, &self.opts);
        out.failed = self.failed;
        let dumps = out.flight_recorder.as_ref().is_some_and(|f| !f.dumps.is_empty());
        if !out.has_traces() && !dumps {
            let why: Vec<&str> = out.failed.iter().map(|f| f.error.as_str()).collect();
            let mut msg = "no input could be read as a trace or a Flight Recorder dump".to_string();
            if !why.is_empty() {
                msg = format!("{msg} ({})", why.join("; "));
            }
            return Err(SessionError(msg));
        }
        let mut notes = self.notes;
        if let Some(f) = &out.flight_recorder {
            notes.extend(f.messages());
        }
        Ok(Finished { out, views, notes })
    }
}

/// A job read to its end: the outputs, and the tables when they were kept.
#[derive(Debug)]
pub struct Finished {
    pub out: JobOutput,
    /// The kept tables in load order, each with the job's rank.
    pub views: Vec<RankView>,
    /// What the CLI would print on stderr: inputs skipped, NCCL logs that only the fabric
    /// report reads, dumps left out of the Flight Recorder report.
    pub notes: Vec<String>,
}

impl Finished {
    /// The kept tables of rank `rank` (the first in load order if two files claim it: a job
    /// error the analysis lists).
    pub fn view(&self, rank: u32) -> Option<&RankView> {
        self.views.iter().find(|v| v.entry().is_some_and(|e| e.rank == rank))
    }

    /// The tiles of `lane` of rank `rank` that cover `[t0_ns, t1_ns)` drawn `px` pixels wide, at
    /// the finest level whose pixels are no wider than the window's ([`level_for`]). At most
    /// about `px / 128 + 2` tiles.
    pub fn tiles(
        &self,
        rank: u32,
        lane: u32,
        t0_ns: i64,
        t1_ns: i64,
        px: u32,
    ) -> Result<Vec<Tile>, SessionError> {
        let v = self.view(rank).ok_or_else(|| SessionError(format!("no rank {rank} in this job")))?;
        if px == 0 || t1_ns <= t0_ns {
            return Ok(Vec::new());
        }
        let level = level_for((t1_ns as f64 - t0_ns as f64) / f64::from(px));
        Ok(tiles_covering(lane, level, t0_ns, t1_ns).map(|k| v.tile(k)).collect())
    }
}

/// The single kind of a text read with these kinds ([`job::detect`]'s order: a dump, then a
/// perf table, then a log).
#[cfg(test)]
mod tests {
    use super::*;

    fn reader(name: &str, bytes: &[u8]) -> Reader {
        let mut r = Reader::new(name);
        for c in bytes.chunks(3) {
            r.feed(c);
        }
        r
    }

    const TRACE: &[u8] = br#"{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2}]}"#;

    #[test]
    fn walked_non_traces_are_notes_and_named_ones_fail() {
        let mut s = Session::new(false);
        let a = s.add(reader("dir/config.json", b"hello"), true);
        assert!(a.skipped && a.kind.is_none());
        assert!(a
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("dir/config.json: not a trace file (at byte")));
        let b = s.add(reader("notes.json", b"[1, 2"), false);
        assert!(!b.skipped && b.error.is_some());
        let c = s.add(reader("rank0.json", TRACE), false);
        assert_eq!(c.kind, Some(InputKind::Trace));
        let f = s.finish().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.out.failed.len(), 1);
        assert_eq!(f.out.failed[0].file, "notes.json");
        assert!(f.notes.iter().any(|n| n.starts_with("skipped dir/config.json")), "{:?}", f.notes);
        assert!(!f.out.clean());
        assert!(f.out.has_traces());
    }

    #[test]
    fn nothing_readable_is_an_error_naming_the_inputs() {
        let mut s = Session::new(true);
        s.add(reader("a.json", b"hello"), false);
        let e = s.finish().err().map(|e| e.0).unwrap_or_default();
        assert!(e.contains("a.json: not a trace file"), "{e}");
    }

    #[test]
    fn an_explicit_rank_must_name_an_input() {
        let mut s = Session::new(false);
        s.add(reader("run/a.json", TRACE), false);
        s.set_rank("b.json", 2);
        assert!(s.finish().is_err());
        let mut s = Session::new(true);
        s.add(reader("run/a.json", TRACE), false);
        s.set_rank("a.json", 2);
        let f = s.finish().unwrap_or_else(|e| panic!("{e}"));
        assert!(f.view(2).is_some(), "the kept tables carry the job's rank");
        assert_eq!(f.out.analysis.ranks.first().map(|r| r.rank), Some(2));
    }

    #[test]
    fn tiles_cover_the_window() {
        let mut s = Session::new(true);
        s.add(reader("rank0.json", TRACE), false);
        let f = s.finish().unwrap_or_else(|e| panic!("{e}"));
        let t = f.tiles(0, 0, 0, 10_000, 100).unwrap_or_else(|e| panic!("{e}"));
        // 100 px: at most px / 128 + 2 tiles.
        assert!(!t.is_empty() && t.len() <= 2);
        assert!(t.iter().any(|t| !t.is_empty()));
        assert!(f.tiles(0, 0, 10, 10, 100).is_ok_and(|t| t.is_empty()));
        assert!(f.tiles(7, 0, 0, 10, 100).is_err());
    }
}
