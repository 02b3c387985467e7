//! Reading trace files from disk in chunks, several files at once, into a job.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use anyhow::{Context, Result};
use rankscope_core::inspect::FailedFile;
use rankscope_core::model::RankTrace;
use rankscope_core::normalize::{assemble, Job, Rules};
use rankscope_core::parse::FileIngest;

/// One input file, and whether it was found by walking a folder (rather than named).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub path: PathBuf,
    pub walked: bool,
}

/// Expands files and directories into input files: a directory contributes every regular file
/// below it whose name the app would take from the same folder
/// ([`rankscope_core::job::is_folder_candidate`]: `.json`, `.json.gz`, `.log`, `.txt`, `.out`,
/// any case) or that is a Flight Recorder dump (sorted); what each is, is decided by content; a file named explicitly is taken whatever its
/// name or kind (`<(zcat trace.gz)` is a pipe). The walk visits each real directory once (a
/// symlink to `.` or to a parent is not a loop), takes each real file once however many links
/// lead to it, and skips special files (a FIFO named `*.json` is never opened), with a note.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<Input>> {
    let mut out = Vec::new();
    let mut dirs = std::collections::BTreeSet::new();
    let mut seen = std::collections::BTreeSet::new();
    for p in paths {
        let meta = std::fs::metadata(p).with_context(|| format!("cannot read {}", p.display()))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found, &mut dirs, &mut seen)?;
            found.sort();
            out.extend(found.into_iter().map(|path| Input { path, walked: true }));
        } else {
            if let Ok(c) = std::fs::canonicalize(p) {
                seen.insert(c);
            }
            out.push(Input { path: p.clone(), walked: false });
        }
    }
    Ok(out)
}

fn walk(
    dir: &Path,
    out: &mut Vec<PathBuf>,
    dirs: &mut std::collections::BTreeSet<PathBuf>,
    seen: &mut std::collections::BTreeSet<PathBuf>,
) -> Result<()> {
    let real = std::fs::canonicalize(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    if !dirs.insert(real) {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        // `metadata` follows symlinks: a link is what it points to (a dangling one is skipped).
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        if meta.is_dir() {
            walk(&path, out, dirs, seen)?;
            continue;
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let json_name = rankscope_core::job::is_folder_candidate(name);
        if !meta.is_file() {
            if json_name {
                eprintln!("rankscope: note: skipped {} (not a regular file)", path.display());
            }
            continue;
        }
        // Flight Recorder dumps carry any name (`fr_rank0`, `*.pkl`): asked by content.
        if !json_name && sniff_file(&path) != InputKind::FlightRecorder {
            continue;
        }
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if seen.insert(real) {
            out.push(path);
        }
    }
    Ok(())
}

/// A progress line on stderr, only when stderr is a terminal.
struct ProgressLine {
    total: u64,
    done: AtomicU64,
    enabled: bool,
    last: Mutex<u64>,
}

impl ProgressLine {
    fn add(&self, n: u64) {
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        if !self.enabled {
            return;
        }
        let pct = (done * 100).checked_div(self.total).unwrap_or(100);
        if let Ok(mut last) = self.last.lock() {
            if pct != *last {
                *last = pct;
                eprint!(
                    "\rreading {:>3}%  {:.0} / {:.0} MB",
                    pct,
                    done as f64 / 1e6,
                    self.total as f64 / 1e6
                );
            }
        }
    }
    fn end(&self) {
        if self.enabled {
            eprint!("\r{:60}\r", "");
        }
    }
}

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    pub message: String,
    /// The bytes were read, and they are not a trace (rather than an I/O failure).
    pub not_a_trace: bool,
}

impl ReadError {
    fn io(message: String) -> Self {
        ReadError { message, not_a_trace: false }
    }
}

/// Reads one file in chunks through the core's streaming ingest.
pub fn read_trace(path: &Path, chunk: usize, progress: &dyn Fn(u64)) -> Result<RankTrace, ReadError> {
    let name = path.display().to_string();
    let mut f = std::fs::File::open(path).map_err(|e| ReadError::io(format!("{name}: cannot open: {e}")))?;
    let mut ingest = FileIngest::new(&name);
    let mut buf = vec![0u8; chunk.max(1)];
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReadError::io(format!("{name}: read error: {e}"))),
        };
        ingest.feed(&buf[..n]);
        progress(n as u64);
        if ingest.failed() {
            break;
        }
    }
    ingest.finish().map_err(|e| ReadError { message: e.to_string(), not_a_trace: true })
}

/// Reads every file (in parallel, one thread per core) and assembles the job. A file found by
/// walking a folder that is not a trace (a `config.json`, a `[{"lr": 0.1}]`) is skipped with a
/// note on stderr; a file named explicitly that is not one fails.
pub fn load_job(
    files: &[Input],
    explicit: &[(String, u32)],
    rules: &Rules,
    chunk: usize,
) -> (Job, Vec<FailedFile>) {
    let total: u64 = files.iter().filter_map(|f| std::fs::metadata(&f.path).ok()).map(|m| m.len()).sum();
    let progress = ProgressLine {
        total,
        done: AtomicU64::new(0),
        enabled: std::io::stderr().is_terminal() && total > 64 << 20,
        last: Mutex::new(u64::MAX),
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(files.len()).max(1);
    let next = AtomicU64::new(0);
    let results: Mutex<Vec<(usize, Result<RankTrace, ReadError>)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(input) = files.get(i) else { break };
                let r = read_trace(&input.path, chunk, &|n| progress.add(n));
                if let Ok(mut v) = results.lock() {
                    v.push((i, r));
                }
            });
        }
    });
    progress.end();
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|(i, _)| *i);
    let mut traces = Vec::new();
    let mut failed = Vec::new();
    for (i, r) in results {
        let Some(input) = files.get(i) else { continue };
        match r {
            Ok(t) => traces.push(t),
            Err(ReadError { message, not_a_trace: true }) if input.walked => {
                eprintln!("rankscope: note: skipped {message}");
            }
            Err(ReadError { message, .. }) => {
                failed.push(FailedFile { file: input.path.display().to_string(), error: message })
            }
        }
    }
    (assemble(traces, explicit, rules), failed)
}

/// Parses `FILE=N` rank mappings.
pub fn parse_rank_map(items: &[String]) -> Result<Vec<(String, u32)>> {
    items
        .iter()
        .map(|s| {
            let (f, r) = s.rsplit_once('=').with_context(|| format!("--rank expects FILE=N, got `{s}`"))?;
            let r: u32 =
                r.trim().parse().with_context(|| format!("--rank {s}: `{r}` is not a rank number"))?;
            Ok((f.to_string(), r))
        })
        .collect()
}

/// The default rules, with a user rule file in front when given.
pub fn load_rules(path: Option<&Path>) -> Result<Rules> {
    match path {
        None => Ok(Rules::default()),
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("cannot read rules {}", p.display()))?;
            Rules::with_user_rules(&text).with_context(|| format!("rules {}", p.display()))
        }
    }
}

/// What an input file is, by content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    Trace,
    NcclTests,
    NcclLog,
    /// A PyTorch Flight Recorder dump (pickle or JSON), whatever its name.
    FlightRecorder,
}

/// Sniffs a file's first 64 KiB with the core's rule ([`rankscope_core::nccl::sniff_input`]).
pub fn sniff_file(path: &Path) -> InputKind {
    let mut head = vec![0u8; 64 << 10];
    let mut n = 0;
    if let Ok(mut f) = std::fs::File::open(path) {
        while n < head.len() {
            match f.read(&mut head[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if rankscope_core::fr::sniff(&head[..n]) {
            return InputKind::FlightRecorder;
        }
    }
    let kinds = rankscope_core::nccl::sniff_input(&head[..n]);
    if kinds.contains(&rankscope_core::nccl::Kind::NcclTests) {
        InputKind::NcclTests
    } else if kinds.contains(&rankscope_core::nccl::Kind::NcclLog) {
        InputKind::NcclLog
    } else {
        InputKind::Trace
    }
}

/// Explicit `FILE=N` rank mappings.
pub type RankMap = Vec<(String, u32)>;

/// The inputs every trace command shares: files from paths, explicit ranks, rules. A `--rank`
/// naming no input file is an error (it would otherwise be ignored in silence).
pub fn inputs(
    paths: &[PathBuf],
    rank: &[String],
    rules: Option<&Path>,
) -> Result<(Vec<Input>, RankMap, Rules)> {
    let files = expand(paths)?;
    if files.is_empty() {
        anyhow::bail!("no input files (.json, .json.gz, .log, .txt, .out or Flight Recorder dumps) under the given paths");
    }
    let map = parse_rank_map(rank)?;
    for (f, r) in &map {
        // The core matches a mapping to a file by its whole name or a trailing path part.
        let hit = files.iter().any(|i| {
            let s = i.path.display().to_string();
            s == *f || s.ends_with(&format!("/{f}"))
        });
        anyhow::ensure!(hit, "--rank {f}={r}: no input file is called `{f}`");
    }
    Ok((files, map, load_rules(rules)?))
}
