//! `rankscope fr DUMP...`: the sequence report of a job's Flight Recorder dumps (one per rank).

use std::path::PathBuf;

use anyhow::Result;
use rankscope_core::inspect::FailedFile;
use rankscope_core::job;

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

pub use rankscope_core::fr::output::render;

/// Files of the given paths that are dumps: a directory contributes every file below it that
/// sniffs as one; a file named explicitly is taken whatever it is.
fn dump_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let inputs = load::expand(paths, &mut notes)?;
    load::print_notes(&notes);
    for input in inputs {
        let p = input.path;
        if !input.walked || load::sniff_file(&p) == rankscope_core::job::InputKind::FlightRecorder {
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

/// Reads the dumps (each read as a dump, whatever its content: it was named or sniffed as
/// one) and prints their report (text or JSON); problems go to stderr.
pub fn report_files(files: &[PathBuf], json: bool) -> Result<u8> {
    let mut texts = Vec::new();
    let mut unreadable = Vec::new();
    for f in files {
        let name = f.display().to_string();
        match std::fs::read(f) {
            Ok(bytes) => texts.push(job::Text { name, kinds: vec![job::InputKind::FlightRecorder], bytes }),
            Err(e) => unreadable.push(FailedFile { file: name.clone(), error: format!("{name}: {e}") }),
        }
    }
    let refs: Vec<job::TextRef<'_>> = texts.iter().map(job::Text::as_ref).collect();
    for f in &unreadable {
        crate::out::say(&f.error);
    }
    let Some(mut fr) = job::flight_recorder(&refs) else {
        anyhow::bail!("no file could be read as a Flight Recorder dump");
    };
    for m in fr.messages() {
        crate::out::say(&m);
    }
    fr.failed.splice(0..0, unreadable);
    if fr.dumps.is_empty() {
        anyhow::bail!("no file could be read as a Flight Recorder dump");
    }
    if json {
        crate::out::emit(&fr.json())?;
    } else {
        crate::out::emit_text(&render(&fr.dumps, &fr.report))?;
    }
    Ok(if fr.failed.is_empty() { 0 } else { 1 })
}
