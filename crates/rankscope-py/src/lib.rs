//! `rankscope._native`, the native half of the `rankscope` Python package: a shell over
//! rankscope-host (paths → the whole job, read on every core) and the core's job API (one file →
//! its part as bytes, [`rankscope_core::job::digest::part`]; parts → the job, [`job::combine`]). Nothing is
//! computed here: options are converted, bytes moved, errors turned into Python exceptions that
//! name the file and byte offset. The GIL is released while Rust works. The Python layer
//! (`python/rankscope/`) makes the report a dict and its tables DataFrames.

use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;
use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::compare;
use rankscope_core::job::digest::part::{self as digest, Piece};
use rankscope_core::job::{self, JobOutput, Loaded, Reader, Text, TextRef};
use rankscope_core::normalize::Rules;
use rankscope_core::parse::IngestError;
use rankscope_core::view::RankClaim;

/// Read size (the CLI's).
const CHUNK: usize = 4 << 20;

/// An exception of `rankscope._errors` (defined in Python so it carries `file` and `offset`).
fn error(py: Python<'_>, class: &str, message: String, file: Option<String>, offset: Option<u64>) -> PyErr {
    let made = py
        .import("rankscope._errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call1((message.clone(), file, offset)));
    match made {
        Ok(e) => PyErr::from_value(e),
        // The package is broken if its own module is missing; still say what happened.
        Err(e) => PyValueError::new_err(format!("{message} (and rankscope._errors: {e})")),
    }
}

fn trace_error(py: Python<'_>, e: IngestError) -> PyErr {
    let IngestError::NotATrace { source_name, offset, .. } = &e;
    let (file, offset) = (source_name.clone(), *offset);
    error(py, "TraceError", e.to_string(), Some(file), Some(offset))
}

fn part_error(py: Python<'_>, e: digest::PartError) -> PyErr {
    let offset = match &e {
        digest::PartError::Damaged { offset, .. } => Some(*offset),
        _ => None,
    };
    let name = match &e {
        digest::PartError::NotAPart { name }
        | digest::PartError::Version { name, .. }
        | digest::PartError::Damaged { name, .. }
        | digest::PartError::TooLarge { name, .. } => name.clone(),
    };
    error(py, "PartError", e.to_string(), Some(name), offset)
}

/// The analysis options of `rankscope analyze --offset / --threshold / --layout`.
fn options(
    offsets: Vec<(u32, i64)>,
    thresholds: Vec<(String, f64)>,
    layout: Option<&str>,
) -> PyResult<Options> {
    let mut opts = Options { offsets, ..Options::default() };
    for (name, value) in thresholds {
        opts.thresholds.set(&name, value).map_err(PyValueError::new_err)?;
    }
    if let Some(l) = layout {
        opts.layout = Some(
            rankscope_core::analyze::layout::UserLayout::parse(l)
                .map_err(|e| PyValueError::new_err(format!("layout {l}: {e}")))?,
        );
    }
    Ok(opts)
}

fn rules_of(text: Option<&str>) -> PyResult<Rules> {
    match text {
        None => Ok(Rules::default()),
        Some(t) => Rules::with_user_rules(t).map_err(|e| PyValueError::new_err(format!("rules: {e}"))),
    }
}

/// A job's outputs: `json()`, `markdown()`, `csv()`, and what the reading noted.
#[pyclass(frozen, module = "rankscope._native")]
struct Output {
    out: JobOutput,
    notes: Vec<String>,
    /// The normalized job and the options it was measured with, when `analyze` was asked to
    /// keep the events (`events=True`): the `collectives` and `events` tables need them.
    job: Option<(rankscope_core::normalize::Job, Options)>,
}

#[pymethods]
impl Output {
    /// `rankscope analyze --json`.
    fn json(&self, py: Python<'_>) -> String {
        py.detach(|| self.out.json())
    }

    /// `rankscope analyze --md` (the default output of `rankscope analyze`).
    fn markdown(&self, py: Python<'_>) -> String {
        py.detach(|| self.out.markdown())
    }

    /// `rankscope analyze --csv`.
    fn csv(&self, py: Python<'_>) -> String {
        py.detach(|| self.out.csv())
    }

    /// One table of `rankscope export` as the bytes of a file: `format` is `parquet` or
    /// `arrow` (the Arrow IPC file format). `collectives` and `events` need the job's events
    /// (`analyze(..., events=True)`).
    fn columnar<'py>(&self, py: Python<'py>, table: &str, format: &str) -> PyResult<Bound<'py, PyBytes>> {
        use rankscope_core::export::columnar::{self, tables, Format, TableName};
        let format = match format {
            "parquet" => Format::Parquet,
            "arrow" => Format::Arrow,
            f => return Err(PyValueError::new_err(format!("format {f:?}: `parquet` or `arrow`"))),
        };
        let name = TableName::ALL.iter().copied().find(|t| t.as_str() == table).ok_or_else(|| {
            let names: Vec<&str> = TableName::ALL.iter().map(|t| t.as_str()).collect();
            PyValueError::new_err(format!("no table {table:?} (the tables: {})", names.join(", ")))
        })?;
        let a = &self.out.analysis;
        let bytes = py.detach(|| -> Result<Option<Vec<u8>>, columnar::ColumnarError> {
            Ok(match (name, &self.job) {
                (TableName::Collectives, Some((job, opts))) => {
                    let ops = rankscope_core::analyze::measure(job, opts).ops;
                    Some(columnar::to_bytes(format, &tables::collectives(&ops))?)
                }
                (TableName::Events, Some((job, _))) => {
                    tables::write_events(format, Vec::new(), job, &a.alignment)?.map(|(b, _)| b)
                }
                (TableName::Collectives | TableName::Events, None) => None,
                (n, _) => tables::from_analysis(a, n).map(|t| columnar::to_bytes(format, &t)).transpose()?,
            })
        });
        match bytes {
            Ok(Some(b)) => Ok(PyBytes::new(py, &b)),
            Ok(None) => Err(error(
                py,
                "RankscopeError",
                format!(
                    "the {table} table needs the job's events: rankscope.analyze(traces, events=True) (a job digest holds none)"
                ),
                None,
                None,
            )),
            Err(e) => Err(error(py, "RankscopeError", e.to_string(), None, None)),
        }
    }

    /// Whether the job's events were kept (`analyze(..., events=True)`).
    #[getter]
    fn has_events(&self) -> bool {
        self.job.is_some()
    }

    /// Files skipped while walking folders, NCCL logs only the NCCL report reads.
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    /// `(file, message)` for every input that could not be read (the message names the byte
    /// offset where it stopped being a trace), Flight Recorder dumps included.
    #[getter]
    fn failed(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> =
            self.out.failed.iter().map(|f| (f.file.clone(), f.error.clone())).collect();
        if let Some(fr) = &self.out.flight_recorder {
            v.extend(fr.failed.iter().map(|f| (f.file.clone(), f.error.clone())));
        }
        v
    }

    /// Whether there is a trace analysis (else the Flight Recorder report is all there is).
    #[getter]
    fn has_traces(&self) -> bool {
        self.out.has_traces()
    }

    /// Whether the job has Flight Recorder dumps that were read.
    #[getter]
    fn has_dumps(&self) -> bool {
        self.out.flight_recorder.as_ref().is_some_and(|f| !f.dumps.is_empty())
    }

    /// `rankscope analyze`'s exit status 0: every input read, no job error.
    #[getter]
    fn clean(&self) -> bool {
        self.out.clean()
    }
}

/// Calls a Python progress callback `(done_bytes, total_bytes)` from the reading threads, at
/// most once per 0.1% of the input; the first exception it raises is kept (and raised when the
/// call returns) and the callback is not called again.
struct Progress {
    callback: Option<Py<PyAny>>,
    last: AtomicU64,
    failed: Mutex<Option<PyErr>>,
}

impl Progress {
    fn new(callback: Option<Py<PyAny>>) -> Self {
        Progress { callback, last: AtomicU64::new(u64::MAX), failed: Mutex::new(None) }
    }

    fn update(&self, done: u64, total: u64) {
        let Some(cb) = &self.callback else { return };
        let permille = (done.saturating_mul(1000)).checked_div(total).unwrap_or(1000);
        if self.last.swap(permille, Ordering::Relaxed) == permille && done != total {
            return;
        }
        let Ok(mut failed) = self.failed.lock() else { return };
        if failed.is_some() {
            return;
        }
        if let Err(e) = Python::attach(|py| cb.call1(py, (done, total)).map(drop)) {
            *failed = Some(e);
        }
    }

    fn take_error(&self) -> Option<PyErr> {
        self.failed.lock().ok().and_then(|mut f| f.take())
    }
}

/// The whole job from files and folders (`rankscope analyze`): `rankscope_host::analyze_paths`.
#[pyfunction]
#[pyo3(signature = (paths, ranks, offsets, thresholds, rules=None, progress=None, chunk=None, layout=None, events=false))]
#[allow(clippy::too_many_arguments)]
fn analyze(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    ranks: Vec<String>,
    offsets: Vec<(u32, i64)>,
    thresholds: Vec<(String, f64)>,
    rules: Option<PathBuf>,
    progress: Option<Py<PyAny>>,
    chunk: Option<usize>,
    layout: Option<String>,
    events: bool,
) -> PyResult<Output> {
    let req = rankscope_host::Request {
        paths,
        ranks,
        rules,
        options: options(offsets, thresholds, layout.as_deref())?,
        chunk: chunk.map(|c| c.max(1)),
        keep_job: events,
        keep_args: false,
    };
    let progress = Progress::new(progress);
    let result = py.detach(|| rankscope_host::analyze_paths(&req, &|d, t| progress.update(d, t)));
    if let Some(e) = progress.take_error() {
        return Err(e);
    }
    let outcome = result.map_err(|e| error(py, "RankscopeError", format!("{e:#}"), None, None))?;
    // A job digest is read without its events: the job the host hands back has no rank.
    let job = outcome.job.filter(|j| !j.ranks.is_empty()).map(|j| (j, req.options.clone()));
    Ok(Output { out: outcome.out, notes: outcome.notes, job })
}

/// What a read input becomes: a trace's part, or the text whole; else why not (`name` names
/// the input).
fn piece_of(loaded: Loaded, rules: &Rules, name: &str) -> Result<Piece, PartFailure> {
    match loaded {
        // A part is one rank's: a file of several ranks gives none (analyse it whole).
        Loaded::Trace(t) => {
            let mut parts = job::part_of(*t, rules, &Options::default());
            match (parts.pop(), parts.len()) {
                (Some((claim, part)), 0) => Ok(Piece::Trace { claim, part: Box::new(part) }),
                (None, _) => Err(PartFailure::Empty(format!("{name}: no rank"))),
                (Some(_), n) => Err(PartFailure::Empty(format!(
                    "{name} holds {} ranks: a part is one rank's; analyse the file with rankscope.analyze",
                    n + 1
                ))),
            }
        }
        Loaded::Text(t) => Ok(Piece::Text(t)),
    }
}

enum PartFailure {
    Io(String),
    NotATrace(IngestError),
    Empty(String),
}

fn part_failure(py: Python<'_>, f: PartFailure, path: &str) -> PyErr {
    match f {
        PartFailure::Io(m) => PyOSError::new_err(m),
        PartFailure::NotATrace(e) => trace_error(py, e),
        PartFailure::Empty(m) => error(py, "TraceError", m, Some(path.to_string()), None),
    }
}

/// One file's part, as bytes ([`digest`]): the file read in chunks with [`job::Reader`] (its
/// kind decided by content), normalized alone, its per-rank half computed.
#[pyfunction]
#[pyo3(signature = (path, rules=None, chunk=None))]
fn part<'py>(
    py: Python<'py>,
    path: String,
    rules: Option<String>,
    chunk: Option<usize>,
) -> PyResult<Bound<'py, PyBytes>> {
    let rules = rules_of(rules.as_deref())?;
    let chunk = chunk.unwrap_or(CHUNK).max(1);
    let done = py.detach(|| -> Result<Vec<u8>, PartFailure> {
        let mut f =
            std::fs::File::open(&path).map_err(|e| PartFailure::Io(format!("{path}: cannot open: {e}")))?;
        let mut reader = Reader::new(&path);
        let mut buf = vec![0u8; chunk];
        loop {
            let n = match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(PartFailure::Io(format!("{path}: read error: {e}"))),
            };
            reader.feed(buf.get(..n).unwrap_or_default());
            if reader.failed() {
                break;
            }
        }
        let loaded = reader.finish().map_err(PartFailure::NotATrace)?;
        let piece = piece_of(loaded, &rules, &path)?;
        Ok(digest::encode(&piece))
    });
    match done {
        Ok(bytes) => Ok(PyBytes::new(py, &bytes)),
        Err(f) => Err(part_failure(py, f, &path)),
    }
}

/// One input fed in chunks from Python (a file opened with fsspec on a worker): `feed(chunk)`
/// as many times as needed, then `finish()` gives the part's bytes. Each chunk is parsed
/// as it comes; the file is never held.
#[pyclass(module = "rankscope._native")]
struct PartReader {
    reader: Option<Reader>,
    rules: Rules,
}

#[pymethods]
impl PartReader {
    #[new]
    #[pyo3(signature = (name, rules=None))]
    fn new(name: &str, rules: Option<String>) -> PyResult<Self> {
        Ok(PartReader { reader: Some(Reader::new(name)), rules: rules_of(rules.as_deref())? })
    }

    /// Feeds the next chunk (any size). Returns False once the input is known not to be a
    /// trace (stop feeding; `finish()` says why).
    fn feed(&mut self, py: Python<'_>, chunk: &[u8]) -> PyResult<bool> {
        let Some(r) = self.reader.as_mut() else {
            return Err(PyValueError::new_err("PartReader: feed() after finish()"));
        };
        Ok(py.detach(|| {
            r.feed(chunk);
            !r.failed()
        }))
    }

    /// Ends the input and returns its part's bytes.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let Some(r) = self.reader.take() else {
            return Err(PyValueError::new_err("PartReader: finish() called twice"));
        };
        let name = r.name().to_string();
        let rules = &self.rules;
        let done = py.detach(|| -> Result<Vec<u8>, PartFailure> {
            let loaded = r.finish().map_err(PartFailure::NotATrace)?;
            let piece = piece_of(loaded, rules, &name)?;
            Ok(digest::encode(&piece))
        });
        match done {
            Ok(bytes) => Ok(PyBytes::new(py, &bytes)),
            Err(f) => Err(part_failure(py, f, &name)),
        }
    }
}

/// What an encoded part holds, for a look without combining: `(kind, name)` with kind `trace`
/// or the text's kinds joined by `+`.
#[pyfunction]
fn part_info(py: Python<'_>, data: &[u8]) -> PyResult<(String, String)> {
    let piece = py.detach(|| digest::decode("part", data)).map_err(|e| part_error(py, e))?;
    Ok(match piece {
        Piece::Trace { claim, .. } => ("trace".to_string(), claim.file),
        Piece::Text(t) => {
            let kinds: Vec<&str> = t.kinds.iter().map(|k| k.as_str()).collect();
            (kinds.join("+"), t.name)
        }
    })
}

/// The job from parts computed anywhere ([`job::combine`]): ranks decided across every part's
/// claim, in the order given (it decides load-order ranks), texts read once. With `digest`, the
/// job digest is written there too (`rankscope combine --digest`).
#[pyfunction]
#[pyo3(signature = (parts, names, ranks, offsets, thresholds, digest=None, layout=None))]
#[allow(clippy::too_many_arguments)]
fn combine(
    py: Python<'_>,
    parts: Vec<PyBackedBytes>,
    names: Vec<String>,
    ranks: Vec<String>,
    offsets: Vec<(u32, i64)>,
    thresholds: Vec<(String, f64)>,
    digest: Option<std::path::PathBuf>,
    layout: Option<String>,
) -> PyResult<Output> {
    let opts = options(offsets, thresholds, layout.as_deref())?;
    let explicit =
        rankscope_host::parse_rank_map(&ranks).map_err(|e| PyValueError::new_err(format!("{e:#}")))?;
    let decoded = py.detach(|| -> Result<Vec<Piece>, digest::PartError> {
        parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let name = names.get(i).cloned().unwrap_or_else(|| format!("parts[{i}]"));
                digest::decode(&name, p)
            })
            .collect()
    });
    let pieces = decoded.map_err(|e| part_error(py, e))?;
    let mut files: Vec<(RankClaim, rankscope_core::analyze::RankPart)> = Vec::new();
    let mut texts: Vec<Text> = Vec::new();
    let mut notes = Vec::new();
    for p in pieces {
        match p {
            Piece::Trace { claim, part } => files.push((claim, *part)),
            Piece::Text(t) => {
                if t.kinds == [job::InputKind::NcclLog] {
                    notes.push(job::nccl_log_note(&t.name));
                }
                texts.push(t)
            }
        }
    }
    for (f, r) in &explicit {
        // The rule `rankscope_host::inputs` applies: a whole name or a trailing path part.
        let hit = files.iter().any(|(c, _)| c.file == *f || c.file.ends_with(&format!("/{f}")));
        if !hit {
            return Err(error(
                py,
                "RankscopeError",
                format!("rank {f}={r}: no part is of a file called `{f}`"),
                None,
                None,
            ));
        }
    }
    if files.is_empty() && texts.is_empty() {
        return Err(error(py, "RankscopeError", "no parts to combine".into(), None, None));
    }
    let out = py.detach(|| -> std::io::Result<JobOutput> {
        let refs: Vec<TextRef<'_>> = texts.iter().map(Text::as_ref).collect();
        let (files, errors) = job::decided(files, &explicit);
        let out = job::combine_decided(files.iter().map(|(_, p)| p.clone()).collect(), errors, &refs, &opts);
        if let Some(path) = &digest {
            std::fs::write(path, job::digest::encode(&files, &refs, &out.analysis))?;
        }
        Ok(out)
    });
    let out = out.map_err(|e| PyOSError::new_err(format!("cannot write the digest: {e}")))?;
    Ok(Output { out, notes, job: None })
}

/// One side of a comparison: an analysed job (`Analysis._out`), or the text of a saved
/// `rankscope analyze --json` (the analysis is all [`compare::compare`] needs).
#[derive(FromPyObject)]
enum Side<'py> {
    Job(PyRef<'py, Output>),
    Saved(String),
}

impl Side<'_> {
    fn analysis(&self, which: &str) -> PyResult<std::borrow::Cow<'_, Analysis>> {
        match self {
            Side::Job(o) if o.out.has_traces() => Ok(std::borrow::Cow::Borrowed(&o.out.analysis)),
            Side::Job(_) => Err(PyValueError::new_err(format!("{which}: the job has no trace to compare"))),
            Side::Saved(text) => serde_json::from_str(text).map(std::borrow::Cow::Owned).map_err(|e| {
                PyValueError::new_err(format!("{which}: not a rankscope analysis this version reads: {e}"))
            }),
        }
    }
}

/// Two jobs compared (`rankscope diff`): `json()`, `markdown()`, `text()`, `csv()`, and the
/// `--fail-on` gates.
#[pyclass(frozen, module = "rankscope._native")]
struct Diff {
    c: compare::Comparison,
}

#[pymethods]
impl Diff {
    /// `rankscope diff --json` (schema `rankscope.diff/1`).
    fn json(&self) -> String {
        compare::render::json(&self.c)
    }

    /// `rankscope diff --md`.
    fn markdown(&self) -> String {
        compare::render::markdown(&self.c)
    }

    /// `rankscope diff` (the text).
    fn text(&self) -> String {
        compare::render::text(&self.c)
    }

    /// `rankscope diff --csv`.
    fn csv(&self) -> String {
        compare::render::csv(&self.c)
    }

    /// `--fail-on`: `(gate, measured)` of every gate that fails (a change beyond noise that
    /// crosses its bound; measured as a share, ns or a count). Raises ValueError for a gate
    /// that does not parse.
    fn failed(&self, gates: Vec<String>) -> PyResult<Vec<(String, f64)>> {
        let gates: Vec<compare::gates::Gate> = gates
            .iter()
            .map(|g| g.parse().map_err(|e| PyValueError::new_err(format!("fail_on {e}"))))
            .collect::<PyResult<_>>()?;
        Ok(compare::gates::failed(&self.c, &gates).into_iter().map(|(g, v)| (g.text, v)).collect())
    }
}

/// Compares two jobs ([`compare::compare`]); `floor` is `rankscope diff --floor`.
#[pyfunction]
#[pyo3(signature = (base, new, floor=compare::DEFAULT_FLOOR))]
fn diff(py: Python<'_>, base: Side<'_>, new: Side<'_>, floor: f64) -> PyResult<Diff> {
    if !(floor.is_finite() && floor >= 0.0) {
        return Err(PyValueError::new_err(format!("floor must be a share >= 0, got {floor}")));
    }
    let (b, n) = (base.analysis("base")?, new.analysis("new")?);
    let c = py.detach(|| compare::compare(&b, &n, &compare::Options { floor }));
    Ok(Diff { c })
}

/// Many runs, one line each (`rankscope runs`): `json()`, `markdown()`, `text()`, `csv()`.
#[pyclass(frozen, module = "rankscope._native")]
struct Runs {
    r: compare::runs::Runs,
}

#[pymethods]
impl Runs {
    /// `rankscope runs --json` (schema `rankscope.runs/1`).
    fn json(&self) -> String {
        compare::runs::json(&self.r)
    }

    /// `rankscope runs --md`.
    fn markdown(&self) -> String {
        compare::runs::markdown(&self.r)
    }

    /// `rankscope runs` (the text).
    fn text(&self) -> String {
        compare::runs::text(&self.r)
    }

    /// `rankscope runs --csv`.
    fn csv(&self) -> String {
        compare::runs::csv(&self.r)
    }
}

/// The record table of named runs ([`compare::runs::runs`]); the figures stated for every run
/// are `rankscope runs --samples-per-step`, `--tokens-per-step` and `--peak-tflops`.
#[pyfunction]
#[pyo3(signature = (items, samples_per_step=None, tokens_per_step=None, peak_tflops=None))]
fn runs(
    py: Python<'_>,
    items: Vec<(String, Side<'_>)>,
    samples_per_step: Option<i64>,
    tokens_per_step: Option<i64>,
    peak_tflops: Option<f64>,
) -> PyResult<Runs> {
    if peak_tflops.is_some_and(|p| !(p.is_finite() && p > 0.0)) {
        return Err(PyValueError::new_err("peak_tflops must be a number > 0"));
    }
    let analyses: Vec<(String, std::borrow::Cow<'_, Analysis>)> =
        items.iter().map(|(n, s)| Ok((n.clone(), s.analysis(n)?))).collect::<PyResult<_>>()?;
    let given = compare::rate::Given { samples_per_step, tokens_per_step, peak_tflops };
    let r = py.detach(|| compare::runs::runs(analyses.iter().map(|(n, a)| (n.as_str(), a.as_ref())), &given));
    Ok(Runs { r })
}

/// `([(path, walked)], notes)`.
type Found = (Vec<(String, bool)>, Vec<String>);

/// The input files under `paths`, as `rankscope analyze` finds them.
#[pyfunction]
fn expand(py: Python<'_>, paths: Vec<PathBuf>) -> PyResult<Found> {
    let mut notes = Vec::new();
    let found = py.detach(|| rankscope_host::expand(&paths, &mut notes));
    let inputs = found.map_err(|e| PyOSError::new_err(format!("{e:#}")))?;
    Ok((inputs.into_iter().map(|i| (i.path.display().to_string(), i.walked)).collect(), notes))
}

/// Whether a folder's file of this name is read (`.json`, `.json.gz`, `.log`, `.txt`, `.out`);
/// Flight Recorder dumps of any name are found by content ([`sniff`]).
#[pyfunction]
fn is_folder_candidate(name: &str) -> bool {
    job::is_folder_candidate(name)
}

/// What a file is from its first bytes: `trace`, `nccl_log`, `nccl_tests`, `flight_recorder`,
/// `digest` (a job digest), or evidence beside the traces: `metrics`, `nccl_ras`,
/// `nccl_inspector`, `step_log`.
#[pyfunction]
fn sniff(head: &[u8]) -> &'static str {
    job::detect(head).as_str()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The string tables' hash keys from std's per-process random keys (the core has no OS).
    rankscope_core::model::strings::seed_table_keys(std::hash::BuildHasher::hash_one(
        &std::collections::hash_map::RandomState::new(),
        0x7265_6164_u64,
    ));
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("SNIFF_BYTES", job::SNIFF_BYTES)?;
    m.add("PART_VERSION", digest::VERSION)?;
    m.add("DEFAULT_FLOOR", compare::DEFAULT_FLOOR)?;
    m.add_class::<Output>()?;
    m.add_class::<PartReader>()?;
    m.add_class::<Diff>()?;
    m.add_function(wrap_pyfunction!(diff, m)?)?;
    m.add_class::<Runs>()?;
    m.add_function(wrap_pyfunction!(runs, m)?)?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(part, m)?)?;
    m.add_function(wrap_pyfunction!(part_info, m)?)?;
    m.add_function(wrap_pyfunction!(combine, m)?)?;
    m.add_function(wrap_pyfunction!(expand, m)?)?;
    m.add_function(wrap_pyfunction!(is_folder_candidate, m)?)?;
    m.add_function(wrap_pyfunction!(sniff, m)?)?;
    Ok(())
}
