//! Every trace file of a job read in parallel, the largest first, each on its share of the
//! cores, into traces (or whatever the caller computes from each where it was read).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rankscope_core::inspect::FailedFile;
use rankscope_core::model::RankTrace;
use rankscope_core::normalize::{assemble_with, Job, Rules};

use super::cut::{cut_min_bytes, cut_sizes, read_trace_cutting};
use super::inputs::Input;
use super::read::{is_gzip, read_trace_with, ReadError};
use super::split::read_trace_split;
use super::threads::{core_shares, parse_threads, Threads};

/// Progress of reading: `(bytes done, bytes in all)`, called from the reading threads.
pub type ProgressFn<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// Reads every trace file (in parallel, one thread per core), in the order given. A file found
/// by walking a folder that is not a trace (a `config.json`, a `[{"lr": 0.1}]`) is skipped with
/// a note; a file named explicitly that is not one fails. The largest files are started first,
/// and a file holding more than its share of the bytes is split over as many cores as its share
/// ([`core_shares`]).
pub fn load_traces(
    files: &[Input],
    chunk: usize,
    progress: ProgressFn<'_>,
) -> (Vec<RankTrace>, Vec<FailedFile>, Vec<String>) {
    load_traces_then(files, chunk, progress, &|t, _| t)
}

/// [`load_traces`], each trace handed to `then` on the thread that read it, as soon as it is
/// read (`then(trace, alone)`: `alone` when the file had more than one core, which are then
/// free for `then` to use): what a caller computes per file runs while other files are still
/// being read, with no wait for the slowest file between the stages.
pub fn load_traces_then<T: Send>(
    files: &[Input],
    chunk: usize,
    progress: ProgressFn<'_>,
    then: &(dyn Fn(RankTrace, bool) -> T + Sync),
) -> (Vec<T>, Vec<FailedFile>, Vec<String>) {
    load(files, chunk, false, progress, then)
}

/// [`load_traces`] keeping every event's source `args` (`FileIngest::keep_args`), for the
/// exports: each file is read serially (a file read in pieces would have to join the pieces'
/// arenas; files still go one per core), and holds its args text beside its tables.
pub fn load_traces_keeping_args(
    files: &[Input],
    chunk: usize,
    progress: ProgressFn<'_>,
) -> (Vec<RankTrace>, Vec<FailedFile>, Vec<String>) {
    load(files, chunk, true, progress, &|t, _| t)
}

fn load<T: Send>(
    files: &[Input],
    chunk: usize,
    keep_args: bool,
    progress: ProgressFn<'_>,
    then: &(dyn Fn(RankTrace, bool) -> T + Sync),
) -> (Vec<T>, Vec<FailedFile>, Vec<String>) {
    let sizes: Vec<u64> = files.iter().map(|f| std::fs::metadata(&f.path).map_or(0, |m| m.len())).collect();
    let total: u64 = sizes.iter().sum();
    // The bytes read so far; the lock makes each report's count and its call one step, so the
    // caller sees counts that only grow (two threads adding at once could report out of order).
    let done = Mutex::new(0u64);
    let cores = parse_threads();
    let threads = cores.min(files.len()).max(1);
    let shares = core_shares(&sizes, cores);
    // Largest first: the file that takes longest does not start last.
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sizes.get(i).copied().unwrap_or(0)));
    let next = AtomicU64::new(0);
    let results: Mutex<Vec<(usize, Result<T, ReadError>)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(&i) = order.get(k) else { break };
                let Some(input) = files.get(i) else { break };
                let pieces = if keep_args { 1 } else { shares.get(i).copied().unwrap_or(1) };
                // What this file has reported, taken back if it is read again serially.
                let mine = AtomicU64::new(0);
                let report = |n: u64| {
                    mine.fetch_add(n, Ordering::Relaxed);
                    if let Ok(mut d) = done.lock() {
                        *d += n;
                        progress(*d, total);
                    }
                };
                let cut = pieces > 1
                    && std::fs::metadata(&input.path)
                        .is_ok_and(|m| m.is_file() && m.len() >= cut_min_bytes())
                    && is_gzip(&input.path);
                let tried = if keep_args {
                    None
                } else if cut {
                    // This thread inflates and parses when the others are busy: one fewer.
                    let workers = (pieces - 1).max(1);
                    read_trace_cutting(&input.path, chunk, workers, cut_sizes(), &report)
                        .map(|r| r.map(|(t, _)| t))
                } else {
                    read_trace_split(&input.path, chunk, pieces, &report).map(Ok)
                };
                let r = match tried {
                    Some(r) => r,
                    None => {
                        if let Ok(mut d) = done.lock() {
                            *d = d.saturating_sub(mine.swap(0, Ordering::Relaxed));
                        }
                        read_trace_with(&input.path, chunk, keep_args, &report)
                    }
                };
                let r = r.map(|t| then(t, pieces > 1));
                if let Ok(mut v) = results.lock() {
                    v.push((i, r));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|(i, _)| *i);
    let mut traces = Vec::new();
    let mut failed = Vec::new();
    let mut notes = Vec::new();
    for (i, r) in results {
        let Some(input) = files.get(i) else { continue };
        match r {
            Ok(t) => traces.push(t),
            Err(ReadError { message, not_a_trace: true }) if input.walked => {
                notes.push(format!("skipped {message}"))
            }
            Err(ReadError { message, .. }) => {
                failed.push(FailedFile { file: input.path.display().to_string(), error: message })
            }
        }
    }
    (traces, failed, notes)
}

/// [`load_traces`], then normalizes them into one job (ranks decided across the files).
pub fn load_job(
    files: &[Input],
    explicit: &[(String, u32)],
    rules: &Rules,
    chunk: usize,
    progress: ProgressFn<'_>,
) -> (Job, Vec<FailedFile>, Vec<String>) {
    let (traces, failed, notes) = load_traces(files, chunk, progress);
    (assemble_with(traces, explicit, rules, &Threads), failed, notes)
}
