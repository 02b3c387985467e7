//! `rankscope fr DUMP...`: the sequence report of a job's Flight Recorder dumps (one per rank).

use std::path::PathBuf;

use anyhow::Result;
use rankscope_core::fr::{self, RankedDump};
use rankscope_core::sequence::SequenceReport;
use serde::Serialize;

use crate::load;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Flight Recorder dumps (pickle or JSON, gzipped or not; any file name) or directories
    /// holding them: one per rank. The rank is the dump's `rank`, else the number in the file
    /// name (`nccl_trace_rank_3`), else the order given.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// The dumps and the sequence report as JSON (schema `rankscope.fr`, see
    /// docs/flight-recorder.md).
    #[arg(long)]
    pub json: bool,
}

pub use rankscope_core::fr::output::{dump_infos, render};

#[derive(Debug, Serialize)]
struct Output<'a> {
    schema: &'static str,
    version: u32,
    dumps: Vec<rankscope_core::fr::output::DumpInfo<'a>>,
    failed: Vec<rankscope_core::inspect::FailedFile>,
    skipped: Vec<fr::SkippedDump>,
    report: &'a SequenceReport,
}

/// The dumps read, the files that could not be, and the dumps left out (a second dump of a
/// rank).
#[derive(Debug)]
pub struct Loaded {
    pub dumps: Vec<RankedDump>,
    pub failed: Vec<rankscope_core::inspect::FailedFile>,
    pub skipped: Vec<fr::SkippedDump>,
}

/// Reads every dump and decides the ranks; problems are printed on stderr.
pub fn read_dumps(files: &[PathBuf]) -> Loaded {
    let mut dumps = Vec::new();
    let mut failed = Vec::new();
    for f in files {
        let name = f.display().to_string();
        match std::fs::read(f) {
            Ok(bytes) => match fr::read(&name, &bytes) {
                Ok(d) => dumps.push(d),
                Err(e) => {
                    failed.push(rankscope_core::inspect::FailedFile { file: name, error: e.to_string() })
                }
            },
            Err(e) => failed.push(rankscope_core::inspect::FailedFile {
                file: name.clone(),
                error: format!("{name}: {e}"),
            }),
        }
    }
    let (dumps, skipped) = fr::decide_ranks(dumps);
    for f in &failed {
        eprintln!("rankscope: {}", f.error);
    }
    for s in &skipped {
        eprintln!("rankscope: {}: skipped: {}", s.file, s.reason);
    }
    Loaded { dumps, failed, skipped }
}

/// Files of the given paths that are dumps: a directory contributes every file below it that
/// sniffs as one; a file named explicitly is taken whatever it is.
fn dump_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for input in load::expand(paths)? {
        let p = input.path;
        if !input.walked || load::sniff_file(&p) == load::InputKind::FlightRecorder {
            out.push(p);
        }
    }
    Ok(out)
}

/// Exit codes: 0 read and reported; 1 a file is not a dump; 2 usage or I/O error.
pub fn run(a: Args) -> Result<u8> {
    let files = dump_files(&a.paths)?;
    if files.is_empty() {
        anyhow::bail!("no Flight Recorder dumps under the given paths");
    }
    report_files(&files, a.json)
}

/// Reads the dumps and prints their report (text or JSON).
pub fn report_files(files: &[PathBuf], json: bool) -> Result<u8> {
    let Loaded { dumps, failed, skipped } = read_dumps(files);
    if dumps.is_empty() {
        anyhow::bail!("no file could be read as a Flight Recorder dump");
    }
    let report = fr::job_report(&dumps);
    if json {
        let out = Output {
            schema: "rankscope.fr",
            version: 1,
            dumps: dump_infos(&dumps),
            failed,
            skipped,
            report: &report,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(if out.failed.is_empty() { 0 } else { 1 });
    }
    print!("{}", render(&dumps, &report));
    Ok(if failed.is_empty() { 0 } else { 1 })
}
