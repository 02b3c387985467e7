//! A whole analysis from paths ([`analyze_paths`]): what `rankscope analyze` and
//! `rankscope.analyze()` run.

use std::path::PathBuf;

use anyhow::Result;
use rankscope_core::analyze::RankPart;
use rankscope_core::inspect::FailedFile;
use rankscope_core::job::{self, JobOutput, RankClaim, Text, TextRef};
use rankscope_core::model::RankTrace;
use rankscope_core::normalize::{assemble, Job};

use super::inputs::{head_of, inputs};
use super::load::{load_traces, load_traces_keeping_args, load_traces_then, ProgressFn};
use super::threads::Threads;

/// A whole analysis from paths: what `rankscope analyze` and `rankscope.analyze()` run.
#[derive(Debug, Default)]
pub struct Request {
    /// Files and folders (folders walked as [`expand`](super::expand) says).
    pub paths: Vec<PathBuf>,
    /// `FILE=N` explicit ranks.
    pub ranks: Vec<String>,
    /// Extra classification rules (a JSON file).
    pub rules: Option<PathBuf>,
    pub options: rankscope_core::analyze::Options,
    /// Read size (default 4 MiB).
    pub chunk: Option<usize>,
    /// Keep the normalized job ([`Outcome::job`]) for exports that write every rank's events
    /// (`--merged-trace`, `--perfetto`). Without it each trace is normalized and analysed on the
    /// thread that read it, as soon as it is read, and dropped: the same outputs, sooner (no
    /// stage waits for the slowest file) and in less memory.
    pub keep_job: bool,
    /// With [`Request::keep_job`]: keep every event's source `args` for the exports
    /// (`load_traces_keeping_args`; memory and time measured in BENCHMARKS.md).
    pub keep_args: bool,
}

/// What [`analyze_paths`] gives: the normalized job (for exports, when [`Request::keep_job`]),
/// the outputs, and the notes a shell shows (files skipped, NCCL logs that only the NCCL report
/// reads).
#[derive(Debug)]
pub struct Outcome {
    pub job: Option<Job>,
    pub out: JobOutput,
    pub notes: Vec<String>,
}

/// Reads every input by kind and runs the job: traces in parallel, each analysed into its part
/// where it was read ([`job::part_of_with`], then [`job::combine`]; [`job::analyze_traces`]
/// when the job is kept), NCCL text and Flight Recorder dumps whole (kB to MB). Errors are for usage (no
/// input, a `--rank` naming no file, unreadable rules); a file that cannot be read is in
/// `out.failed`.
pub fn analyze_paths(req: &Request, progress: ProgressFn<'_>) -> Result<Outcome> {
    let mut notes = Vec::new();
    let (files, explicit, rules) = inputs(&req.paths, &req.ranks, req.rules.as_deref(), &mut notes)?;
    let mut traces = Vec::new();
    let mut texts: Vec<Text> = Vec::new();
    let mut failed = Vec::new();
    for f in files {
        let head = head_of(&f.path);
        let kinds = job::text_kinds(&head);
        if kinds.is_empty() {
            traces.push(f);
            continue;
        }
        let name = f.path.display().to_string();
        match std::fs::read(&f.path) {
            Ok(bytes) => {
                if kinds == [job::InputKind::NcclLog] {
                    notes.push(job::nccl_log_note(&name));
                }
                texts.push(Text { name, kinds, bytes })
            }
            Err(e) => {
                failed.push(FailedFile { file: name.clone(), error: format!("{name}: cannot read: {e}") })
            }
        }
    }
    // A job digest is the whole job, its analysis as `combine` stored it.
    let refs: Vec<TextRef<'_>> = texts.iter().map(Text::as_ref).collect();
    if let Some(d) = job::digest_among(&refs, traces.len() + failed.len()) {
        let d = d.map_err(anyhow::Error::msg)?;
        notes.extend(job::digest_note(&req.options, !req.ranks.is_empty()).map(String::from));
        let out = d.into_output();
        let job = req.keep_job.then(|| assemble(Vec::new(), &[], &rules));
        return Ok(Outcome { job, out, notes });
    }
    let chunk = req.chunk.unwrap_or(4 << 20);
    let refs: Vec<TextRef<'_>> = texts.iter().map(Text::as_ref).collect();
    // With one thread (`RANKSCOPE_PARSE_THREADS=1`) `Threads` runs everything in line.
    let (job, mut out) = if req.keep_job {
        let (mut traces, trace_failed, more) = if req.keep_args {
            load_traces_keeping_args(&traces, chunk, progress)
        } else {
            load_traces(&traces, chunk, progress)
        };
        notes.extend(more);
        failed.extend(trace_failed);
        let claims: Vec<RankClaim> = traces.iter().map(job::claim_of).collect();
        let facts: Vec<_> = traces
            .iter()
            .zip(&claims)
            .map(|(t, c)| (c, t.events.len() as u64, t.meta.distributed.as_ref().and_then(|d| d.world_size)))
            .collect();
        for i in job::eventless(&facts).into_iter().rev() {
            notes.push(job::eventless_note(&traces.remove(i).source));
        }
        let (job, out) = job::analyze_traces_with(traces, &explicit, &rules, &refs, &req.options, &Threads);
        (Some(job), out)
    } else {
        // Each file's part on the thread that read it (the app's workers do the same), its
        // rank decided and stamped with every file's claim in hand (`job::combine`). A file
        // that had every core has them for its part too; the others leave the cores to the
        // files still being read.
        let part = |t: RankTrace, alone: bool| {
            if alone {
                job::part_of_with(t, &rules, &req.options, &Threads)
            } else {
                job::part_of_with(t, &rules, &req.options, &rankscope_core::join::Serial)
            }
        };
        let (parts, trace_failed, more) = load_traces_then(&traces, chunk, progress, &part);
        notes.extend(more);
        failed.extend(trace_failed);
        let mut parts: Vec<(RankClaim, RankPart)> = parts.into_iter().flatten().collect();
        drop_eventless(&mut parts, &mut notes);
        (None, job::combine(parts, &explicit, &refs, &req.options))
    };
    out.failed = failed;
    Ok(Outcome { job, out, notes })
}

/// Leaves out the parts [`job::eventless`] names, each with its note.
pub fn drop_eventless(parts: &mut Vec<(RankClaim, RankPart)>, notes: &mut Vec<String>) {
    let facts: Vec<_> = parts.iter().map(|(c, p)| (c, p.info.events, p.world_size)).collect();
    for i in job::eventless(&facts).into_iter().rev() {
        notes.push(job::eventless_note(&parts.remove(i).0.file));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Each file's part computed on the thread that read it, ranks decided after (`keep_job:
    /// false`), is the job normalized whole (`keep_job: true`, what the exports need): the same
    /// analysis, report, failed files and notes, with a file claiming a taken rank, a file named
    /// by `--rank`, a damaged file and a folder's non-trace JSON among the inputs.
    #[test]
    fn parts_read_where_they_are_read_are_the_whole_jobs_analysis() {
        let cfg = rankscope_synth::SynthConfig {
            ranks: 4,
            steps: 4,
            straggler_rank: Some(2),
            ..Default::default()
        };
        let dir = std::env::temp_dir().join(format!("rankscope-host-parts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for rank in 0..4 {
            let mut text = Vec::new();
            rankscope_synth::write_rank(&cfg, rank, &mut text).unwrap();
            std::fs::write(dir.join(format!("rank{rank}.json")), &text).unwrap();
            if rank == 1 {
                // Rank 1 again under another name, and cut short in a third file.
                std::fs::write(dir.join("again.json"), &text).unwrap();
                std::fs::write(dir.join("cut.json"), &text[..text.len() * 2 / 3]).unwrap();
            }
        }
        std::fs::write(dir.join("config.json"), br#"{"lr": 0.1}"#).unwrap();
        for ranks in [vec![], vec!["again.json=7".to_string()]] {
            let run = |keep_job: bool| {
                let req = Request {
                    paths: vec![dir.clone()],
                    ranks: ranks.clone(),
                    keep_job,
                    ..Default::default()
                };
                analyze_paths(&req, &|_, _| {}).unwrap()
            };
            let (whole, parts) = (run(true), run(false));
            assert!(whole.job.is_some() && parts.job.is_none());
            assert_eq!(whole.out.analysis.ranks.len(), 6, "{ranks:?}");
            assert_eq!(parts.out.json(), whole.out.json(), "{ranks:?}");
            assert_eq!(parts.out.markdown(), whole.out.markdown(), "{ranks:?}");
            assert_eq!(format!("{:?}", parts.out.failed), format!("{:?}", whole.out.failed));
            assert_eq!(parts.notes, whole.notes);
            assert!(parts.notes.iter().any(|n| n.contains("config.json")), "{:?}", parts.notes);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
