//! `rankscope part FILE -o FILE.part` and `rankscope combine PARTS...`: one job split across
//! processes or machines (a Slurm array task or a Kubernetes indexed-job pod per file, then one
//! combine), with the bytes of `rankscope_core::job::digest::part`. `combine` of every file's part, given
//! in the order `analyze` reads the files (sorted paths), prints what `analyze` prints.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, Result};
use rankscope_core::analyze::{Options, RankPart};
use rankscope_core::inspect::FailedFile;
use rankscope_core::job::digest::part::{self as digest, Piece};
use rankscope_core::job::{self, Loaded, Reader, Text, TextRef};
use rankscope_core::view::RankClaim;

use crate::load;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// One file's part of a job, for `rankscope combine`: a trace's rank claim and per-rank
    /// analysis (kB, never the events), or an NCCL log / nccl-tests output / Flight Recorder
    /// dump whole.
    Part(PartArgs),
    /// The job from the parts `rankscope part` wrote, given in file order: what `rankscope
    /// analyze` prints for the same files.
    Combine(CombineArgs),
}

#[derive(Debug, clap::Args)]
pub struct PartArgs {
    /// The input file (its kind is decided by content). Name it as `analyze` would (the path
    /// under the job's folder): the name is the file's in the report.
    pub file: PathBuf,
    /// Where to write the part.
    #[arg(short, long, value_name = "FILE.part")]
    pub out: PathBuf,
    /// Extra classification rules (JSON), tried before the defaults.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct CombineArgs {
    /// Part files, in the order `analyze` would read their inputs (it decides load-order ranks).
    #[arg(required = true)]
    pub parts: Vec<PathBuf>,
    #[command(flatten)]
    pub job: crate::cmd_analyze::JobFlags,
    /// Also write the job digest (every rank's part, the texts and the analysis, docs/digest.md):
    /// `rankscope analyze` and the app open it like the traces.
    /// (Not with `--redact`: a digest holds every rank's part, names included.)
    #[arg(long, value_name = "FILE.rsdigest", conflicts_with_all = ["redact", "redact_key"])]
    pub digest: Option<PathBuf>,
}

pub fn run(c: Command) -> Result<u8> {
    match c {
        Command::Part(a) => part(a),
        Command::Combine(a) => combine(a),
    }
}

/// Exit codes: 0 written; 1 the file is not a trace nor a text rankscope reads; 2 usage or I/O.
fn part(a: PartArgs) -> Result<u8> {
    let rules = load::load_rules(a.rules.as_deref())?;
    let name = a.file.display().to_string();
    let mut f = std::fs::File::open(&a.file).with_context(|| format!("cannot open {name}"))?;
    let mut reader = Reader::new(&name);
    let mut buf = vec![0u8; 4 << 20];
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read {name}")),
        };
        reader.feed(buf.get(..n).unwrap_or_default());
        if reader.failed() {
            break;
        }
    }
    let piece = match reader.finish() {
        Ok(Loaded::Trace(t)) => {
            let mut parts = job::part_of(*t, &rules, &Options::default());
            match (parts.pop(), parts.len()) {
                (Some((claim, part)), 0) => Piece::Trace { claim, part: Box::new(part) },
                (None, _) => anyhow::bail!("{name}: no rank"),
                // A part is one rank's: a file of several ranks is a job of its own.
                (Some(_), n) => anyhow::bail!(
                    "{name} holds {} ranks: a part is one rank's; analyse the file with `rankscope analyze`",
                    n + 1
                ),
            }
        }
        Ok(Loaded::Text(t)) => Piece::Text(t),
        Err(e) => {
            crate::out::say(&e.to_string());
            return Ok(1);
        }
    };
    std::fs::write(&a.out, digest::encode(&piece))
        .with_context(|| format!("cannot write {}", a.out.display()))?;
    Ok(0)
}

/// Exit codes as `analyze`'s: 0 fine; 1 two files claim one rank, or a part that cannot be read
/// (left out: the others are combined); 2 usage, or no part holds a trace or a dump.
fn combine(a: CombineArgs) -> Result<u8> {
    let opts = a.job.options()?;
    let explicit = load::parse_rank_map(&a.job.rank)?;
    let mut files: Vec<(RankClaim, RankPart)> = Vec::new();
    let mut texts: Vec<Text> = Vec::new();
    // Each part read and decoded on the host's threads (inflate and JSON: half of a 1,024-rank
    // combine), in order. A part that cannot be read is said and left out, as `analyze` leaves
    // out a file it cannot read: the other parts are the job (exit 1).
    let decoded = rankscope_core::join::map(&load::Threads, a.parts.iter().collect(), &|p: &PathBuf| {
        let name = p.display().to_string();
        let bytes = std::fs::read(p).with_context(|| format!("cannot read {name}"))?;
        Ok::<_, anyhow::Error>(digest::decode(&name, &bytes)?)
    });
    let mut failed: Vec<FailedFile> = Vec::new();
    for (piece, path) in decoded.into_iter().zip(&a.parts) {
        match piece {
            Ok(Piece::Trace { claim, part }) => files.push((claim, *part)),
            Ok(Piece::Text(t)) => texts.push(t),
            Err(e) => {
                let error = format!("{e:#}");
                crate::out::say(&error);
                failed.push(FailedFile { file: path.display().to_string(), error });
            }
        }
    }
    for (f, r) in &explicit {
        let hit = files.iter().any(|(c, _)| c.file == *f || c.file.ends_with(&format!("/{f}")));
        anyhow::ensure!(hit, "--rank {f}={r}: no part is of a file called `{f}`");
    }
    let mut notes = Vec::new();
    rankscope_host::drop_eventless(&mut files, &mut notes);
    load::print_notes(&notes);
    let refs: Vec<TextRef<'_>> = texts.iter().map(Text::as_ref).collect();
    let (mut files, errors) = job::decided(files, &explicit);
    // The digest is written from the parts after the analysis: only then are they copied.
    let parts: Vec<RankPart> = if a.digest.is_some() {
        files.iter().map(|(_, p)| p.clone()).collect()
    } else {
        std::mem::take(&mut files).into_iter().map(|(_, p)| p).collect()
    };
    let mut out = job::combine_decided(parts, errors, &refs, &opts);
    out.failed = failed;
    crate::cmd_analyze::offset_notes(&opts, &out);
    if let Some(path) = &a.digest {
        std::fs::write(path, job::digest::encode(&files, &refs, &out.analysis))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(f) = &out.flight_recorder {
        for m in f.messages() {
            crate::out::say(&m);
        }
    }
    if !out.has_traces() && out.flight_recorder.as_ref().is_none_or(|f| f.dumps.is_empty()) {
        anyhow::bail!("no part holds a trace or a Flight Recorder dump");
    }
    let mut red = a.job.redactor();
    if let Some(r) = &mut red {
        rankscope_core::redact::job::redact_output(r, &mut out).context("--redact")?;
    }
    a.job.emit_with(&out, red.as_mut())?;
    Ok(if out.clean() { 0 } else { 1 })
}
