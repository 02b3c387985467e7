//! A job read input by input on one host that keeps what it read: the npm package (in Node or
//! a page), a notebook, a dashboard. It is the [`crate::job`] API with the bookkeeping a
//! streaming shell would otherwise write itself, so that every such shell writes none:
//!
//! ```text
//!   Reader (one per input, fed in chunks) ──► Session::add ──► trace: its part (+ its tables)
//!                                                          └─► text: kept whole
//!                                                          └─► neither: failed / skipped note
//!   Session::finish ──► job::decide (ranks) ──► job::combine_ranked ──► Finished { JobOutput, views }
//!                  └─► a job digest: its stored analysis (job::digest_among) ──┘
//! ```
//!
//! Rules it adds to the job API, each the CLI's (`rankscope analyze`):
//! - An input found by walking a folder that is not ours (a `config.json`) is **skipped with a
//!   note**; one named explicitly that is not ours is **failed** (listed, never thrown: the rest
//!   of the job stands). Neither changes the analysis JSON.
//! - A job digest (`rankscope combine --digest`) is the whole job: opened alone, its stored
//!   analysis is the answer (options do not change it: a note says so); with other inputs it
//!   is refused. Its ranks are listed from its parts, with no tables.
//! - An explicit rank that names no input is an error (it would otherwise be ignored in
//!   silence), as is a job where nothing could be read as a trace or a Flight Recorder dump.
//! - With `keep_tables`, each trace's normalized tables stay ([`RankView`]: tiles, search,
//!   pick), filed under the job's rank decision; without, only its part is kept (the tables
//!   are dropped as soon as the part is computed, so a large job costs one rank at a time).

use serde::Serialize;

use crate::analyze::{Options, RankPart};
use crate::export::columnar::{tables, ColumnarError, Format, Table, TableName, Writer};
use crate::inspect::FailedFile;
use crate::job::{self, InputKind, JobOutput, Loaded, Reader, Text, TextRef};
use crate::normalize::Rules;
use crate::redact::{self, Key, Redactor};
use crate::view::timeline::{level_for, tiles_covering};
use crate::view::{apply_decision, RankClaim, RankDecision, RankSummary, RankView, Tile};

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
                if self.keep_tables {
                    // A file of several ranks is its ranks, each a view of its own.
                    for t in crate::normalize::multirank::split(*t) {
                        let claim = job::claim_of(&t);
                        let view = RankView::new(t, &self.rules);
                        if let Some(part) = view.analysis_part() {
                            self.files.push((claim, part));
                            self.views.push(view);
                        }
                    }
                } else {
                    self.files.extend(job::part_of(*t, &self.rules, &self.opts));
                }
                Added { file, kind: Some(InputKind::Trace), error: None, skipped: false }
            }
            Ok(Loaded::Text(t)) => {
                if t.kinds == [InputKind::NcclLog] {
                    self.notes.push(job::nccl_log_note(&t.name));
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
        let refs: Vec<TextRef<'_>> = self.texts.iter().map(Text::as_ref).collect();
        // A job digest is the whole job, as `rankscope analyze` opens it: alone (every input
        // that is not a text counts against it, as the CLI counts every file that is not one).
        let others = self.names.len() - self.texts.len();
        if let Some(d) = job::digest_among(&refs, others) {
            let d = d.map_err(SessionError)?;
            let mut notes = self.notes;
            notes.extend(job::digest_note(&self.opts, !self.explicit.is_empty()).map(String::from));
            let digest_ranks = (0..d.files.len()).filter_map(|i| d.summary(i)).collect();
            let out = d.into_output();
            if let Some(f) = &out.flight_recorder {
                notes.extend(f.messages());
            }
            return Ok(Finished { out, views: Vec::new(), digest_ranks, notes, opts: self.opts });
        }
        let claims: Vec<RankClaim> = self.files.iter().map(|(c, _)| c.clone()).collect();
        let (decisions, errors) = job::decide(&claims, &self.explicit);
        // The kept tables filed under their keys (`views[i]` is `files[i]`'s).
        let views: Vec<(RankDecision, RankView)> = decisions.iter().cloned().zip(self.views).collect();
        let parts = decisions.into_iter().zip(self.files.into_iter().map(|(_, p)| p)).collect();
        let mut out = job::combine_ranked(parts, errors, &refs, &self.opts);
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
        Ok(Finished { out, views, digest_ranks: Vec::new(), notes, opts: self.opts })
    }
}

/// A job read to its end: the outputs, and the tables when they were kept.
#[derive(Debug)]
pub struct Finished {
    pub out: JobOutput,
    /// The kept tables in load order, each under the job's decision for its file.
    pub views: Vec<(RankDecision, RankView)>,
    /// The ranks of an opened job digest, as its parts know them ([`job::JobDigest::summary`]:
    /// no lanes, no tables: a digest holds no events).
    pub digest_ranks: Vec<RankSummary>,
    /// What the CLI would print on stderr: inputs skipped, NCCL logs that only the fabric
    /// report reads, dumps left out of the Flight Recorder report.
    pub notes: Vec<String>,
    /// The options the job was analyzed with (the `collectives` table measures again with them).
    opts: Options,
}

impl Finished {
    /// Table `name` of `rankscope export` as one file's bytes in `format`: the same bytes the
    /// CLI writes for the same inputs (docs/columnar.md). `events` is written a piece per rank
    /// (in rank order, under the job's rank for each file); `collectives` measures the job
    /// again from the kept tables. Both need the tables (`keep_tables`) and are refused for a
    /// job digest, which holds no events.
    pub fn table(&self, name: TableName, format: Format) -> Result<Vec<u8>, SessionError> {
        self.table_as(name, format, &self.out.analysis, None)
    }

    /// [`Self::table`] redacted as `rankscope export --redact-key` redacts it (docs/redaction.md):
    /// the names of every kept rank's tables and of the analysis gathered first, as the CLI
    /// gathers its whole job's, so the same key gives the same bytes. The events are redacted a
    /// rank at a time (a copy of one rank's tables at once).
    pub fn redacted_table(&self, name: TableName, format: Format, key: Key) -> Result<Vec<u8>, SessionError> {
        let mut r = Redactor::new(key);
        for (_, v) in &self.views {
            redact::job::gather_job(&mut r, v.job());
        }
        let mut out = self.out.clone();
        redact::job::redact_output(&mut r, &mut out).map_err(|e| SessionError(format!("{name}: {e}")))?;
        self.table_as(name, format, &out.analysis, Some(&mut r))
    }

    /// What redacting every table under `key` keeps, hashes and removes: the statement
    /// `rankscope export --redact-key` writes to `redaction.json` for the same inputs (the tables
    /// redacted in the CLI's order, their bytes dropped; a table the job cannot give, a digest's
    /// events, is skipped as the CLI skips it).
    pub fn redaction_statement(&self, key: Key) -> Result<redact::Statement, SessionError> {
        let mut r = Redactor::new(key);
        for (_, v) in &self.views {
            redact::job::gather_job(&mut r, v.job());
        }
        let mut out = self.out.clone();
        redact::job::redact_output(&mut r, &mut out).map_err(|e| SessionError(format!("redaction: {e}")))?;
        for &name in TableName::ALL {
            // Arrow IPC: the cheaper writer; the statement depends on the rows, not the format.
            let _ = self.table_as(name, Format::Arrow, &out.analysis, Some(&mut r));
        }
        Ok(r.statement())
    }

    /// Table `name` with the analysis `a` (the job's own, or its redacted copy), each table
    /// redacted by `red` when given.
    fn table_as(
        &self,
        name: TableName,
        format: Format,
        a: &crate::analyze::Analysis,
        mut red: Option<&mut Redactor>,
    ) -> Result<Vec<u8>, SessionError> {
        let bad = |e: ColumnarError| SessionError(format!("{name}: {e}"));
        let finish = |mut t: Table, red: Option<&mut Redactor>| {
            if let Some(r) = red {
                redact::table::redact_table(r, &mut t);
            }
            t
        };
        if !self.out.has_traces() {
            return Err(SessionError(format!(
                "{name}: the job holds no trace (Flight Recorder dumps alone)"
            )));
        }
        if let Some(t) = tables::from_analysis(a, name) {
            return crate::export::columnar::to_bytes(format, &finish(t, red)).map_err(bad);
        }
        if self.views.is_empty() {
            return Err(SessionError(if self.digest_ranks.is_empty() {
                format!("{name}: the job did not keep its tables (keep_tables): only the analysis' tables are at hand")
            } else {
                format!(
                    "{name}: a job digest holds no events nor matched collectives: export it from the traces"
                )
            }));
        }
        match name {
            TableName::Collectives => {
                // Measured from the plain tables: the figures are the plain job's.
                let parts =
                    self.views.iter().filter_map(|(d, v)| Some((d.clone(), v.analysis_part()?))).collect();
                let ops = job::measure_ranked(parts, self.out.analysis.errors.clone(), &self.opts).ops;
                crate::export::columnar::to_bytes(format, &finish(tables::collectives(&ops), red))
                    .map_err(bad)
            }
            _ => {
                // The job's order: by rank, then the order the files came in.
                let mut order: Vec<&(RankDecision, RankView)> = self.views.iter().collect();
                order.sort_by_key(|(d, _)| d.rank);
                let mut w: Option<Writer<Vec<u8>>> = None;
                for (d, v) in order {
                    let offset = self.out.offset_of(d.rank);
                    let t = match red.as_deref_mut() {
                        None => v.events_table(d.rank, offset),
                        Some(r) => v
                            .entry()
                            .map(|e| redact::table::redacted_events(r, e, &v.job().strings, d.rank, offset)),
                    };
                    let Some(t) = t else { continue };
                    if w.is_none() {
                        w = Some(Writer::new(format, Vec::new(), t.schema()).map_err(bad)?);
                    }
                    if let Some(w) = &mut w {
                        w.write(&t.columns).map_err(bad)?;
                    }
                }
                match w {
                    Some(w) => w.finish().map_err(bad),
                    None => Err(SessionError(format!("{name}: no rank holds events"))),
                }
            }
        }
    }

    /// The kept tables of rank `rank` (the first in load order if two files claim it: a job
    /// error the analysis lists).
    pub fn view(&self, rank: u32) -> Option<&RankView> {
        self.views.iter().find(|(d, _)| d.rank == rank).map(|(_, v)| v)
    }

    /// The kept ranks' summaries, in load order, each with the job's decision for its file (a
    /// job digest's: its ranks, [`Finished::digest_ranks`]).
    pub fn summaries(&self) -> Vec<RankSummary> {
        if self.views.is_empty() {
            return self.digest_ranks.clone();
        }
        self.views
            .iter()
            .filter_map(|(d, v)| {
                let mut s = v.summary()?;
                apply_decision(&mut s, d);
                Some(s)
            })
            .collect()
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
    fn a_job_digest_is_the_whole_job_as_the_cli_opens_it() {
        // The traces' job, and its digest (what `rankscope combine --digest` writes).
        let traces = |s: &mut Session| {
            s.add(reader("run/rank0.json", TRACE), false);
            s.add(reader("run/rank1.json", TRACE), false);
        };
        let mut s = Session::new(false);
        traces(&mut s);
        let files = s.files.clone();
        let want = s.finish().unwrap_or_else(|e| panic!("{e}"));
        let (decided, _) = job::decided(files, &[]);
        let digest = job::digest::encode(&decided, &[], &want.out.analysis);

        let mut s = Session::new(true);
        let a = s.add(reader("job.rsdigest", &digest), false);
        assert_eq!(a.kind, Some(InputKind::Digest));
        let f = s.finish().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.out.json(), want.out.json(), "the digest's analysis, byte for byte");
        assert!(f.out.clean() && f.notes.is_empty(), "{:?}", f.notes);
        let ranks: Vec<(u32, String)> = f.summaries().into_iter().map(|r| (r.rank, r.file)).collect();
        assert_eq!(ranks, [(0, "run/rank0.json".into()), (1, "run/rank1.json".into())]);
        assert!(f.summaries().iter().all(|r| r.lanes.is_empty()) && f.view(0).is_none(), "no tables");

        // Options do not change it, and the shell says so (the CLI's note).
        let mut s = Session::new(false);
        s.options_mut().offsets.push((1, 5));
        s.add(reader("job.rsdigest", &digest), false);
        let f = s.finish().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.out.json(), want.out.json());
        assert!(f.notes.iter().any(|n| n.starts_with("the job digest holds the analysis")), "{:?}", f.notes);

        // With other inputs (a trace, or a file that is not ours) it is refused, as the CLI
        // refuses it.
        for walked in [false, true] {
            let mut s = Session::new(false);
            s.add(reader("job.rsdigest", &digest), false);
            s.add(reader("dir/config.json", b"hello"), walked);
            let e = s.finish().err().map(|e| e.0).unwrap_or_default();
            assert!(e.starts_with("job.rsdigest: a job digest is a whole job"), "{e}");
        }
        let mut s = Session::new(false);
        traces(&mut s);
        s.add(reader("job.rsdigest", &digest), false);
        assert!(s.finish().is_err());
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

    #[test]
    fn a_redacted_table_hides_the_users_names_under_the_keys_tokens() {
        let trace = br###"{"traceEvents":[
            {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":1,"dur":50},
            {"ph":"X","cat":"user_annotation","name":"## zqx_secret_block ##","pid":1,"tid":1,"ts":2,"dur":9},
            {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":3,"dur":4},
            {"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"zqx_loader_thread"}}]}"###;
        let mut s = Session::new(true);
        s.add(reader("rank0.json", trace), false);
        let f = s.finish().unwrap_or_else(|e| panic!("{e}"));
        let has = |b: &[u8], w: &str| b.windows(w.len()).any(|x| x == w.as_bytes());
        let plain = f.table(TableName::Events, Format::Parquet).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            has(&plain, "zqx_secret_block") && has(&plain, "zqx_loader_thread"),
            "the plain table names them"
        );
        let key = || Key::from_phrase("k");
        let red =
            f.redacted_table(TableName::Events, Format::Parquet, key()).unwrap_or_else(|e| panic!("{e}"));
        assert!(!has(&red, "zqx"), "no user name left");
        assert!(has(&red, "aten::mm") && has(&red, "ProfilerStep#1"), "public names stay");
        // The annotation's token is the key's, as every other output under that key writes it.
        let mut r = Redactor::new(key());
        r.consider("## zqx_secret_block ##");
        let token = r.exact("## zqx_secret_block ##").unwrap_or_else(|| panic!("hashed")).to_string();
        assert!(has(&red, &token), "{token}");
        // One key, one answer; another key, other tokens.
        assert_eq!(red, f.redacted_table(TableName::Events, Format::Parquet, key()).unwrap_or_default());
        let other =
            f.redacted_table(TableName::Events, Format::Parquet, Key::from_phrase("j")).unwrap_or_default();
        assert!(!has(&other, &token) && !has(&other, "zqx"));
        // The analysis' tables too.
        let steps =
            f.redacted_table(TableName::Operators, Format::Arrow, key()).unwrap_or_else(|e| panic!("{e}"));
        assert!(!has(&steps, "zqx"));
    }
}
