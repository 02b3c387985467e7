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

/// Expands files and directories into trace files: a directory contributes every `.json` and
/// `.json.gz` below it (sorted); a file named explicitly is taken whatever its name.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).with_context(|| format!("cannot read {}", p.display()))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found)?;
            found.sort();
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.ends_with(".json")
                || name.ends_with(".json.gz")
                || sniff_file(&path) == InputKind::FlightRecorder
            {
                out.push(path);
            }
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

/// Reads one file in chunks through the core's streaming ingest.
pub fn read_trace(path: &Path, chunk: usize, progress: &dyn Fn(u64)) -> Result<RankTrace, String> {
    let name = path.display().to_string();
    let mut f = std::fs::File::open(path).map_err(|e| format!("{name}: cannot open: {e}"))?;
    let mut ingest = FileIngest::new(&name);
    let mut buf = vec![0u8; chunk.max(1)];
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("{name}: read error: {e}")),
        };
        ingest.feed(&buf[..n]);
        progress(n as u64);
        if ingest.failed() {
            break;
        }
    }
    ingest.finish().map_err(|e| e.to_string())
}

/// Reads every file (in parallel, one thread per core) and assembles the job.
pub fn load_job(
    files: &[PathBuf],
    explicit: &[(String, u32)],
    rules: &Rules,
    chunk: usize,
) -> (Job, Vec<FailedFile>) {
    let total: u64 = files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
    let progress = ProgressLine {
        total,
        done: AtomicU64::new(0),
        enabled: std::io::stderr().is_terminal() && total > 64 << 20,
        last: Mutex::new(u64::MAX),
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(files.len()).max(1);
    let next = AtomicU64::new(0);
    let results: Mutex<Vec<(usize, Result<RankTrace, String>)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(path) = files.get(i) else { break };
                let r = read_trace(path, chunk, &|n| progress.add(n));
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
        match r {
            Ok(t) => traces.push(t),
            Err(error) => failed.push(FailedFile { file: files[i].display().to_string(), error }),
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

/// Sniffs a file's first 64 KiB: gzip or a JSON object is a trace; otherwise NCCL text if it
/// looks like it; anything else (a bare JSON array too) is handed to the trace reader, which
/// says precisely why it is not a trace when it is not one.
pub fn sniff_file(path: &Path) -> InputKind {
    let mut head = vec![0u8; 64 << 10];
    let n = std::fs::File::open(path).and_then(|mut f| f.read(&mut head)).unwrap_or(0);
    let head = &head[..n];
    if rankscope_core::fr::sniff(head) {
        return InputKind::FlightRecorder;
    }
    let first = head.iter().copied().find(|b| !b.is_ascii_whitespace());
    if head.starts_with(&[0x1f, 0x8b]) || first == Some(b'{') || head.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return InputKind::Trace;
    }
    // `[` opens a bare-array trace, but also mpirun's `[1,0]<stdout>:` line tags: the NCCL
    // sniffer decides.
    let kinds = rankscope_core::nccl::sniff_all(head);
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

/// The inputs every trace command shares: files from paths, explicit ranks, rules.
pub fn inputs(
    paths: &[PathBuf],
    rank: &[String],
    rules: Option<&Path>,
) -> Result<(Vec<PathBuf>, RankMap, Rules)> {
    let files = expand(paths)?;
    if files.is_empty() {
        anyhow::bail!("no .json or .json.gz files under the given paths");
    }
    Ok((files, parse_rank_map(rank)?, load_rules(rules)?))
}
