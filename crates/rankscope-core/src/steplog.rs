//! Framework step logs (`rankscope steplog`): the per-iteration lines and timers a training
//! framework prints every logging interval, over the whole run rather than the few steps a
//! profiler records. Megatron-LM (and what derives from it: Megatron-Bridge, NeMo's Megatron
//! backend, MindSpeed) writes, per logging interval:
//!
//! ```text
//!  [2024-01-01 12:00:00] iteration      100/  500000 | consumed samples: 12800 | elapsed time per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 412.3 | learning rate: 1.0E-04 | global batch size:   128 | lm loss: 5.1E+00 | loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
//! (min, max) time across ranks (ms):
//!     forward-backward ...............................: (1100.12, 1105.34)
//!     batch-generator ................................: (0.51, 212.40)
//! ```
//!
//! Timer blocks also come as `max time across ranks (ms):` (one value per timer) and, in a
//! one-rank run, `time (ms):`. Lines may carry any prefix (a logger's, a launcher's rank tag).
//!
//! **What an expert reads.** The iteration time over the whole run (its median, its tail, and
//! the iterations that stand out: checkpoint saves, evaluation, a host's hiccup); per timer, the
//! spread between its fastest and slowest rank, which the timers measure and a profile of one
//! rank cannot: `batch-generator` slow on one rank is a data-loading straggler, a wide
//! `forward-backward` with a narrow `batch-generator` is compute or a pipeline stage, a wide
//! gradient synchronization is ranks waiting for the slowest one there.

use serde::{Deserialize, Serialize};

/// One `iteration N/M | ...` line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Iteration {
    /// 1-based line number in the log.
    pub line: u32,
    pub iteration: u64,
    pub of: Option<u64>,
    /// `elapsed time per iteration (ms)`: the mean over the logging interval.
    pub elapsed_ms: f64,
    pub tflops_per_gpu: Option<f64>,
    pub global_batch_size: Option<u64>,
    pub skipped: Option<u64>,
    pub nan: Option<u64>,
}

/// One timer of a block: its fastest and slowest rank (`min` absent in `max time` blocks).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Timer {
    pub name: String,
    pub min_ms: Option<f64>,
    pub max_ms: f64,
}

/// One timer block, after the iteration line it follows (none before the first).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TimerBlock {
    pub line: u32,
    pub after_iteration: Option<u64>,
    pub timers: Vec<Timer>,
}

/// A timer over the run: its blocks' medians.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TimerSummary {
    pub name: String,
    /// Blocks it appears in.
    pub blocks: u32,
    /// Median over the blocks of its slowest rank's time.
    pub max_ms: f64,
    /// Median over the blocks of (slowest − fastest rank), when the blocks give both.
    pub spread_ms: Option<f64>,
}

/// What the log says about the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepLog {
    pub schema: String,
    pub schema_version: u32,
    pub iterations: Vec<Iteration>,
    pub timer_blocks: Vec<TimerBlock>,
    /// Over the iterations' elapsed times: median, 95th percentile, largest.
    pub elapsed_p50_ms: Option<f64>,
    pub elapsed_p95_ms: Option<f64>,
    pub elapsed_max_ms: Option<f64>,
    /// Iterations whose elapsed time is at least [`SPIKE`]× the median.
    pub spikes: Vec<Iteration>,
    pub timers: Vec<TimerSummary>,
    /// What an expert says, most telling first.
    pub notes: Vec<String>,
    /// Given the run's profiler traces too: where their steps sit in the log's run
    /// ([`against_profile`]; added to schema version 1 without a bump).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileCheck>,
}

/// An iteration this many times the median stands out.
pub const SPIKE: f64 = 1.5;
/// A timer whose slowest rank exceeds its fastest by this share of the slowest, and by at least
/// [`SPREAD_MIN_MS`], is uneven across ranks.
pub const SPREAD_SHARE: f64 = 0.2;
pub const SPREAD_MIN_MS: f64 = 5.0;

/// Whether `text` holds Megatron-style iteration lines or timer blocks.
pub fn looks_like(text: &str) -> bool {
    text.contains("elapsed time per iteration (ms)") || text.contains("time across ranks (ms):")
}

/// The number after `key` up to the next `|` in `line` (`key: 12.5 |`).
fn field(line: &str, key: &str) -> Option<f64> {
    let at = line.find(key)? + key.len();
    let rest = line[at..].trim_start_matches([':', ' ']);
    let end = rest.find('|').unwrap_or(rest.len());
    rest[..end].trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

fn count(line: &str, key: &str) -> Option<u64> {
    field(line, key).filter(|v| *v >= 0.0).map(|v| v as u64)
}

/// `iteration      100/  500000 |` → (100, Some(500000)).
fn iteration_number(line: &str) -> Option<(u64, Option<u64>)> {
    let at = line.find("iteration ")? + "iteration ".len();
    let rest = line[at..].trim_start();
    let end = rest.find('|').unwrap_or(rest.len());
    let (n, of) = match rest[..end].split_once('/') {
        Some((n, of)) => (n.trim(), of.trim().parse().ok()),
        None => (rest[..end].trim(), None),
    };
    Some((n.parse().ok()?, of))
}

/// `    forward-backward ......: (1100.12, 1105.34)` or `....: 1105.34`.
fn timer_line(line: &str) -> Option<Timer> {
    let (name, value) = line.trim().split_once(": ")?;
    let name = name.trim_end_matches(['.', ' ']).trim();
    if name.is_empty() || !line.contains("..") {
        return None;
    }
    let v = value.trim();
    let (min_ms, max_ms) = match v.strip_prefix('(').and_then(|x| x.strip_suffix(')')) {
        Some(pair) => {
            let (a, b) = pair.split_once(',')?;
            (Some(a.trim().parse::<f64>().ok()?), b.trim().parse::<f64>().ok()?)
        }
        None => (None, v.parse::<f64>().ok()?),
    };
    (max_ms.is_finite() && min_ms.is_none_or(f64::is_finite)).then(|| Timer {
        name: name.to_string(),
        min_ms,
        max_ms,
    })
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Reads a step log (module doc).
pub fn read(text: &str) -> StepLog {
    let mut iterations: Vec<Iteration> = Vec::new();
    let mut blocks: Vec<TimerBlock> = Vec::new();
    let mut open: Option<usize> = None;
    for (k, raw) in text.lines().enumerate() {
        let line_no = u32::try_from(k + 1).unwrap_or(u32::MAX);
        if raw.contains("elapsed time per iteration (ms)") {
            open = None;
            let Some((iteration, of)) = iteration_number(raw) else { continue };
            let Some(elapsed_ms) = field(raw, "elapsed time per iteration (ms)") else { continue };
            iterations.push(Iteration {
                line: line_no,
                iteration,
                of,
                elapsed_ms,
                tflops_per_gpu: field(raw, "throughput per GPU (TFLOP/s/GPU)"),
                global_batch_size: count(raw, "global batch size"),
                skipped: count(raw, "number of skipped iterations"),
                nan: count(raw, "number of nan iterations"),
            });
        } else if raw.trim_end().ends_with("time across ranks (ms):") || raw.trim() == "time (ms):" {
            blocks.push(TimerBlock {
                line: line_no,
                after_iteration: iterations.last().map(|i| i.iteration),
                timers: Vec::new(),
            });
            open = Some(blocks.len() - 1);
        } else if let Some(b) = open {
            match timer_line(raw) {
                Some(t) => blocks[b].timers.push(t),
                None => open = None,
            }
        }
    }
    blocks.retain(|b| !b.timers.is_empty());
    summarize(iterations, blocks)
}

fn summarize(iterations: Vec<Iteration>, blocks: Vec<TimerBlock>) -> StepLog {
    let mut elapsed: Vec<f64> = iterations.iter().map(|i| i.elapsed_ms).collect();
    elapsed.sort_by(f64::total_cmp);
    let p50 = median(elapsed.clone());
    let p95 = (!elapsed.is_empty()).then(|| elapsed[((elapsed.len() - 1) as f64 * 0.95).round() as usize]);
    let spikes: Vec<Iteration> = iterations
        .iter()
        .filter(|i| p50.is_some_and(|m| m > 0.0 && i.elapsed_ms >= SPIKE * m))
        .cloned()
        .collect();
    // Per timer, in the order the log first names them.
    let mut order: Vec<String> = Vec::new();
    let mut by: std::collections::BTreeMap<String, (Vec<f64>, Vec<f64>)> = Default::default();
    for b in &blocks {
        for t in &b.timers {
            if !by.contains_key(&t.name) {
                order.push(t.name.clone());
            }
            let e = by.entry(t.name.clone()).or_default();
            e.0.push(t.max_ms);
            if let Some(min) = t.min_ms {
                e.1.push(t.max_ms - min);
            }
        }
    }
    let timers: Vec<TimerSummary> = order
        .iter()
        .filter_map(|name| {
            let (max, spread) = by.get(name)?;
            Some(TimerSummary {
                name: name.clone(),
                blocks: max.len() as u32,
                max_ms: median(max.clone())?,
                spread_ms: median(spread.clone()),
            })
        })
        .collect();
    let notes = notes(&iterations, p50, &spikes, &timers);
    StepLog {
        schema: "rankscope.steplog".into(),
        schema_version: 1,
        iterations,
        timer_blocks: blocks,
        elapsed_p50_ms: p50,
        elapsed_p95_ms: p95,
        elapsed_max_ms: elapsed.last().copied(),
        spikes,
        timers,
        notes,
        profile: None,
    }
}

/// A setup or checkpoint timer, printed once, not a step's.
fn one_off(name: &str) -> bool {
    ["checkpoint", "setup", "load", "save"].iter().any(|w| name.contains(w))
}

fn notes(
    iterations: &[Iteration],
    p50: Option<f64>,
    spikes: &[Iteration],
    timers: &[TimerSummary],
) -> Vec<String> {
    let mut out = Vec::new();
    // Timers uneven across ranks, widest first.
    let mut uneven: Vec<(&TimerSummary, f64)> = timers
        .iter()
        .filter(|t| !one_off(&t.name))
        .filter_map(|t| t.spread_ms.map(|s| (t, s)))
        .filter(|(t, s)| *s >= SPREAD_MIN_MS && *s >= SPREAD_SHARE * t.max_ms)
        .collect();
    uneven.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (t, s) in uneven {
        let what = if t.name.contains("batch-generator") || t.name.contains("data") {
            "one rank loads its batches slower than the others (a data-loading straggler): look at that rank's input pipeline and storage"
        } else if t.name.contains("all-reduce")
            || t.name.contains("sync")
            || t.name.contains("all-gather")
            || t.name.contains("reduce-scatter")
        {
            "the ranks arrive at this communication at different times, so the early ones wait for the slowest: its cause is in the work before it"
        } else if t.name.contains("forward") || t.name.contains("backward") {
            "compute (or, with pipeline parallelism, a stage) takes longer on the slowest rank: profile that rank (`rankscope analyze` over every rank's trace says which and why)"
        } else {
            "the slowest rank takes longer here than the fastest"
        };
        out.push(format!(
            "`{}` takes up to {:.1} ms on its slowest rank, {:.1} ms more than on its fastest (median over {} logging intervals): {what}.",
            t.name, t.max_ms, s, t.blocks
        ));
    }
    if let (Some(m), false) = (p50, spikes.is_empty()) {
        let list: Vec<String> =
            spikes.iter().take(8).map(|i| format!("{} ({:.0} ms)", i.iteration, i.elapsed_ms)).collect();
        out.push(format!(
            "{} of {} logged iterations took at least {SPIKE}x the median {:.1} ms: {}{}. Checkpoint saves, evaluation and garbage collection do this at a fixed interval; otherwise a host's or the fabric's hiccup: profile a window that includes one.",
            spikes.len(),
            iterations.len(),
            m,
            list.join(", "),
            if spikes.len() > 8 { ", ..." } else { "" }
        ));
    }
    let skipped: u64 = iterations.iter().filter_map(|i| i.skipped).max().unwrap_or(0);
    let nan: u64 = iterations.iter().filter_map(|i| i.nan).max().unwrap_or(0);
    if skipped > 0 || nan > 0 {
        out.push(format!(
            "Iterations skipped ({skipped}) or with NaN ({nan}) in a logging interval: loss-scale overflows or bad data, time spent without progress."
        ));
    }
    out
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    const LOG: &str = "\
(min, max) time across ranks (ms):
    model-and-optimizer-setup ......................: (8274.77, 8274.90)
    train/valid/test-data-iterators-setup ..........: (67.42, 80.35)
 [2024-06-21 10:49:03] iteration       10/    1000 | consumed samples:         1280 | elapsed time per iteration (ms): 1010.5 | throughput per GPU (TFLOP/s/GPU): 401.2 | learning rate: 1.0E-05 | global batch size:   128 | lm loss: 7.1E+00 | loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
(min, max) time across ranks (ms):
    forward-backward ...............................: (960.10, 1001.30)
    batch-generator ................................: (0.41, 180.22)
    all-grads-sync .................................: (3.10, 4.00)
[Rank 0] iteration       20/    1000 | consumed samples:         2560 | elapsed time per iteration (ms): 1003.1 | global batch size:   128 | number of skipped iterations:   0 | number of nan iterations:   0 |
(min, max) time across ranks (ms):
    forward-backward ...............................: (955.00, 998.00)
    batch-generator ................................: (0.40, 175.00)
    all-grads-sync .................................: (3.00, 4.10)
 iteration       30/    1000 | elapsed time per iteration (ms): 2950.0 | number of skipped iterations:   2 |
saving checkpoint at iteration      30
(min, max) time across ranks (ms):
    save-checkpoint ................................: (17332.36, 17332.56)
";

    #[test]
    fn megatron_iterations_and_timers() {
        assert!(looks_like(LOG));
        let s = read(LOG);
        assert_eq!(s.iterations.len(), 3);
        let i = &s.iterations[0];
        assert_eq!((i.line, i.iteration, i.of, i.elapsed_ms), (4, 10, Some(1000), 1010.5));
        assert_eq!((i.tflops_per_gpu, i.global_batch_size, i.skipped), (Some(401.2), Some(128), Some(0)));
        assert_eq!(s.timer_blocks.len(), 4);
        assert_eq!(s.timer_blocks[1].after_iteration, Some(10));
        assert_eq!(
            s.timer_blocks[1].timers[1],
            Timer { name: "batch-generator".into(), min_ms: Some(0.41), max_ms: 180.22 }
        );
        assert_eq!(s.elapsed_p50_ms, Some(1010.5));
        assert_eq!(s.spikes.iter().map(|i| i.iteration).collect::<Vec<_>>(), vec![30]);
        let bg = s.timers.iter().find(|t| t.name == "batch-generator").expect("timer");
        assert_eq!(bg.blocks, 2);
        assert!((bg.spread_ms.expect("spread") - (179.81 + 174.6) / 2.0).abs() < 1e-9);
        // The data-loading straggler first; the even timers and the one-off checkpoint not at all.
        assert!(
            s.notes[0].starts_with("`batch-generator`") && s.notes[0].contains("data-loading straggler"),
            "{:?}",
            s.notes
        );
        assert!(
            s.notes.iter().all(|n| !n.contains("all-grads-sync") && !n.contains("save-checkpoint")),
            "{:?}",
            s.notes
        );
        assert!(
            s.notes.iter().any(|n| n.contains("1 of 3 logged iterations") && n.contains("30 (2950 ms)")),
            "{:?}",
            s.notes
        );
        assert!(s.notes.iter().any(|n| n.contains("skipped (2)")), "{:?}", s.notes);
    }

    /// A run logged every 10 iterations to 2,000: 220 ms a step, but iterations 1,010–1,100 at
    /// 560 ms (a slow phase: a data shard on a slow filesystem, say).
    fn run_log() -> String {
        (1..=200)
            .map(|k| {
                let it = k * 10;
                let ms = if (1010..=1100).contains(&it) { 560.0 } else { 220.0 + (k % 7) as f64 };
                format!(" iteration {it:>8}/    2000 | elapsed time per iteration (ms): {ms:.1} | global batch size:   128 |\n")
            })
            .collect()
    }

    fn profiled(ms: &[f64]) -> Vec<ProfiledStep> {
        ms.iter().enumerate().map(|(k, &ms)| ProfiledStep { step: 1040 + k as u32, ms }).collect()
    }

    #[test]
    fn profiled_steps_are_placed_in_the_run_the_log_covers() {
        let log = read(&run_log());
        assert_eq!(log.spikes.len(), 10);
        // A profile of the slow phase: slower than nearly every logged iteration.
        let c = against_profile(&log, &profiled(&[551.0, 560.2, 548.9, 556.0])).expect("a check");
        assert_eq!(c.representative, Representative::SlowerThanUsual);
        assert_eq!(c.slow_phases, vec![(1010, 1100, 560.0)]);
        assert!(
            c.note.contains("caught a slow phase") && c.note.contains("iterations 1010–1100 (560 ms)"),
            "{}",
            c.note
        );
        // Its steps 1040-1043 are logged at 560 ms: no profiler cost said.
        assert!(c.overhead.is_some_and(|o| (o - 0.99).abs() < 0.02), "{:?}", c.overhead);
        assert!(!c.note.contains("profiler's own cost"), "{}", c.note);
        // A usual step, with the slow phase said as one the profile does not show.
        let c = against_profile(&log, &profiled(&[221.0, 223.5, 222.0])).expect("a check");
        assert_eq!(c.representative, Representative::Yes);
        assert!(c.note.contains("does not show (iterations 1010–1100"), "{}", c.note);
        // Slower than 95% of a run that varies by 3%, but 2% over its median: a usual step.
        let c = against_profile(&log, &profiled(&[227.0])).expect("a check");
        assert!(c.percentile > UNUSUAL && c.representative == Representative::Yes, "{c:?}");
        // Faster than the run usually goes: the slow phase missed.
        let c = against_profile(&log, &profiled(&[150.0, 151.0])).expect("a check");
        assert_eq!(c.representative, Representative::FasterThanUsual);
        assert!(c.note.contains("missed the run's slow phases"), "{}", c.note);
        // The profiler's own cost, where the numbers meet: 1.3× the log's 560 ms.
        let c = against_profile(&log, &profiled(&[728.0, 728.0])).expect("a check");
        assert!(c.note.contains("1.30× the log's"), "{}", c.note);
        assert_eq!(against_profile(&log, &[]), None);
    }

    #[test]
    fn max_only_and_one_rank_blocks_and_garbage() {
        let s = read("max time across ranks (ms):\n    forward-backward ....: 12.5\nnot a timer\n    x ....: 3\ntime (ms):\n    optimizer ....: 4.25\n");
        assert_eq!(s.timer_blocks.len(), 2);
        assert_eq!(
            s.timer_blocks[0].timers,
            vec![Timer { name: "forward-backward".into(), min_ms: None, max_ms: 12.5 }]
        );
        assert_eq!(s.timer_blocks[1].timers[0].max_ms, 4.25);
        assert!(s.iterations.is_empty() && s.elapsed_p50_ms.is_none() && s.timers[0].spread_ms.is_none());
        let s = read("iteration x/y | elapsed time per iteration (ms): NaN |\n\u{0}\u{ff}");
        assert!(s.iterations.is_empty() && s.notes.is_empty());
    }
}

/// A profiled step of the traces beside the log: its number (`ProfilerStep#N`) and its time (the
/// job's: its slowest rank's wall time).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProfiledStep {
    pub step: u32,
    pub ms: f64,
}

/// Where the profiled steps sit in the run the log covers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProfileCheck {
    /// The profiled steps' median, and the share of the log's iterations at most that long.
    pub profiled_p50_ms: f64,
    pub percentile: f64,
    pub representative: Representative,
    /// The log's iterations that stand out ([`StepLog::spikes`]) as contiguous phases:
    /// (first, last iteration, their median elapsed time).
    pub slow_phases: Vec<(u64, u64, f64)>,
    /// The profiled steps whose numbers the log covers: the profile's time over the log's for
    /// the same iteration (the profiler's own cost, when above 1).
    pub overhead: Option<f64>,
    /// What an expert says.
    pub note: String,
}

crate::named_enum! {
    /// Whether the profile shows the run as it usually goes.
    pub enum Representative {
        Yes => "yes",
        SlowerThanUsual => "slower_than_usual",
        FasterThanUsual => "faster_than_usual",
    }
}

/// The profiled steps against the run: slower than [`UNUSUAL`] of the log's iterations and more
/// than [`NEAR`] over its median is a slow phase caught; faster than all but `1 − UNUSUAL` and
/// more than [`NEAR`] under it, the slow phases were missed. Within [`NEAR`] of the median is a
/// usual step whatever the percentile (a run whose iterations vary by 1% puts a step 2% over
/// its median past the 90th; the profiler's own cost is a few percent).
pub const UNUSUAL: f64 = 0.9;
pub const NEAR: f64 = 0.15;

/// Where the profiled steps sit in the log's run (`None` without iterations or profiled steps).
pub fn against_profile(log: &StepLog, profiled: &[ProfiledStep]) -> Option<ProfileCheck> {
    let p50 = median(profiled.iter().map(|p| p.ms).collect())?;
    let run_p50 = log.elapsed_p50_ms?;
    let n = log.iterations.len();
    let at_most = log.iterations.iter().filter(|i| i.elapsed_ms <= p50).count();
    let percentile = at_most as f64 / n.max(1) as f64;
    // Spikes in runs of neighbouring lines (a phase), each with its median.
    let mut slow_phases: Vec<(u64, u64, f64)> = Vec::new();
    let mut run: Vec<&Iteration> = Vec::new();
    let flush = |run: &mut Vec<&Iteration>, out: &mut Vec<(u64, u64, f64)>| {
        if let (Some(a), Some(b)) = (run.first(), run.last()) {
            let m = median(run.iter().map(|i| i.elapsed_ms).collect()).unwrap_or(0.0);
            out.push((a.iteration, b.iteration, m));
        }
        run.clear();
    };
    let mut prev_index: Option<usize> = None;
    for s in &log.spikes {
        let idx = log.iterations.iter().position(|i| i.line == s.line);
        if idx.is_some() && prev_index.is_some_and(|p| Some(p + 1) != idx) {
            flush(&mut run, &mut slow_phases);
        }
        run.push(s);
        prev_index = idx;
    }
    flush(&mut run, &mut slow_phases);
    // The same iterations in the log: each profiled step against the logged line covering it
    // (a line reports the mean of the iterations since the one before).
    let ratios: Vec<f64> = profiled
        .iter()
        .filter_map(|p| {
            let it = log.iterations.iter().find(|i| i.iteration >= u64::from(p.step))?;
            let first = log.iterations.first()?;
            (u64::from(p.step) > first.iteration.saturating_sub(1) && it.elapsed_ms > 0.0)
                .then(|| p.ms / it.elapsed_ms)
        })
        .collect();
    let overhead = median(ratios);
    let representative = if percentile >= UNUSUAL && p50 > run_p50 * (1.0 + NEAR) {
        Representative::SlowerThanUsual
    } else if percentile <= 1.0 - UNUSUAL && p50 < run_p50 * (1.0 - NEAR) {
        Representative::FasterThanUsual
    } else {
        Representative::Yes
    };
    let phases =
        slow_phases.iter().take(3).map(|&(a, b, m)| phase_words(a, b, m)).collect::<Vec<_>>().join(", ");
    let head = format!(
        "The profiled steps take {p50:.0} ms (median of {}); the log's {n} iterations take {run_p50:.0} ms (median), the profile slower than {:.0}% of them",
        profiled.len(),
        100.0 * percentile
    );
    let note = match representative {
        Representative::SlowerThanUsual => format!(
            "{head}: it caught a slow phase, not the run's usual step{}; fix what it shows, then profile a usual stretch too.",
            if phases.is_empty() { String::new() } else { format!(" (the log's slow phases: {phases})") }
        ),
        Representative::FasterThanUsual if !phases.is_empty() => format!(
            "{head}: it missed the run's slow phases ({phases}); profile there (the profiler's schedule `wait` / `warmup` set to reach them)."
        ),
        Representative::FasterThanUsual => format!("{head}: faster than the run usually goes; profile a usual stretch."),
        Representative::Yes if !phases.is_empty() => format!(
            "{head}: a usual step; the log also has slow phases the profile does not show ({phases}): profile there for them."
        ),
        Representative::Yes => format!("{head}: a usual step of the run."),
    };
    let note = match overhead {
        Some(o) if o >= 1.1 => format!(
            "{note} Where `ProfilerStep#N` numbers the run's iterations, the profile's steps are {o:.2}× the log's for the same iterations: the profiler's own cost."
        ),
        _ => note,
    };
    Some(ProfileCheck { profiled_p50_ms: p50, percentile, representative, slow_phases, overhead, note })
}

/// "iteration 12 (310 ms)", "iterations 12–40 (310 ms)": a slow phase of the logged run.
pub fn phase_words(first: u64, last: u64, ms: f64) -> String {
    if first == last {
        format!("iteration {first} ({ms:.0} ms)")
    } else {
        format!("iterations {first}–{last} ({ms:.0} ms)")
    }
}
