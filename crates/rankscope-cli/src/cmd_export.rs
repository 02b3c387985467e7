//! `rankscope export INPUT... --format parquet|arrow --out DIR`: every table rankscope makes,
//! and the events, as Parquet or Arrow IPC files (`DIR/steps.parquet`, …) for DuckDB, pandas,
//! polars and pyarrow (docs/columnar.md).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rankscope_core::export::columnar::{self, tables, Format, TableName, Writer};
use rankscope_core::redact::{self, Redactor};

use crate::load;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    Parquet,
    Arrow,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trace files or directories (as `analyze` reads them), or one job digest (its tables
    /// but `collectives` and `events`, which need the traces).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Parquet (`.parquet`) or the Arrow IPC file format (`.arrow`, Feather v2).
    #[arg(long, value_enum)]
    pub format: FormatArg,
    /// The folder the files go to (made when missing): one file per table.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Which tables, comma-separated (default: every one the input gives): steps, collectives,
    /// collective_stats, groups, findings, operators, events.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub tables: Vec<String>,
    /// Give a file its rank explicitly: `--rank path/to/file.json=3` (repeatable).
    #[arg(long = "rank", value_name = "FILE=N")]
    pub rank: Vec<String>,
    /// A known clock offset: `--offset RANK=NS` (aligned time = rank time − NS; repeatable).
    #[arg(long = "offset", value_name = "RANK=NS")]
    pub offset: Vec<String>,
    /// Extra classification rules (JSON), tried before the defaults.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Replace the user's names, paths, hosts and groups by tokens in every table, as
    /// `analyze --redact` does for its outputs (one token per string across ranks and tables);
    /// every number stays. What was kept, hashed and removed goes to `DIR/redaction.json` and
    /// standard error (docs/redaction.md). The key is drawn for this run.
    #[arg(long)]
    pub redact: bool,
    /// `--redact` under a key of yours: tokens equal those of `analyze --redact-key` with the
    /// same key (a report and its tables can be read together).
    #[arg(long, value_name = "KEY")]
    pub redact_key: Option<String>,
}

fn table_name(s: &str) -> Result<TableName> {
    let s = s.trim();
    TableName::ALL.iter().copied().find(|t| t.as_str() == s).with_context(|| {
        let names: Vec<&str> = TableName::ALL.iter().map(|t| t.as_str()).collect();
        format!("--tables: no table `{s}` (the tables: {})", names.join(", "))
    })
}

/// Exit codes as `analyze`'s: 0 fine; 1 a file is not a trace or two files claim one rank (the
/// tables are still written); 2 usage or I/O error, or no trace at all.
pub fn run(a: Args) -> Result<u8> {
    let format = match a.format {
        FormatArg::Parquet => Format::Parquet,
        FormatArg::Arrow => Format::Arrow,
    };
    let asked: Vec<TableName> = a.tables.iter().map(|s| table_name(s)).collect::<Result<_>>()?;
    let wanted: Vec<TableName> = if asked.is_empty() { TableName::ALL.to_vec() } else { asked.clone() };
    let needs_job = wanted.iter().any(|t| matches!(t, TableName::Collectives | TableName::Events));
    let opts = crate::cmd_analyze::options(&a.offset, &[])?;
    let mut red = match (&a.redact_key, a.redact) {
        (Some(k), _) => Some(Redactor::new(redact::Key::from_phrase(k))),
        (None, true) => Some(Redactor::new(redact::Key::per_run())),
        (None, false) => None,
    };
    let req = load::Request {
        paths: a.paths.clone(),
        ranks: a.rank.clone(),
        rules: a.rules.clone(),
        options: opts.clone(),
        chunk: None,
        // A redaction gathers the names from the job's string table: the job is held whole.
        keep_job: needs_job || red.is_some(),
        keep_args: false,
    };
    let line = load::ProgressLine::new();
    let load::Outcome { job, mut out, mut notes } = load::analyze_paths(&req, &|d, t| line.update(d, t))?;
    line.end();
    // A job digest is read without its events: the job the host hands back has no rank.
    let mut job = job.filter(|j| !j.ranks.is_empty());
    // The matched collectives live in the measuring layer only while the job is judged:
    // measured again here (docs/columnar.md says the cost), before any redaction renames
    // the job's strings (the figures are the plain job's).
    let ops = match &job {
        Some(j) if wanted.contains(&TableName::Collectives) => {
            Some(rankscope_core::analyze::measure(j, &opts).ops)
        }
        _ => None,
    };
    if let Some(r) = &mut red {
        if let Some(j) = &job {
            redact::job::gather_job(r, j);
        }
        redact::job::redact_output(r, &mut out).context("--redact")?;
        if let Some(j) = &mut job {
            redact::job::redact_job(r, j);
        }
        notes = notes.iter().map(|n| r.text(n)).collect();
    }
    load::print_notes(&notes);
    crate::cmd_analyze::offset_notes(&req.options, &out);
    for f in &out.failed {
        crate::out::say(&f.error);
    }
    anyhow::ensure!(out.has_traces(), "no file could be read as a trace");
    std::fs::create_dir_all(&a.out).with_context(|| format!("cannot make {}", a.out.display()))?;
    let analysis = &out.analysis;
    let mut report = String::new();
    for &name in &wanted {
        let path = a.out.join(format!("{}.{}", name.as_str(), format.extension()));
        let rows = match (name, &job) {
            (TableName::Collectives, Some(_)) => {
                let mut t = tables::collectives(ops.as_deref().unwrap_or_default());
                if let Some(r) = &mut red {
                    redact::table::redact_table(r, &mut t);
                }
                write_table(&path, format, &t)?
            }
            (TableName::Events, Some(job)) => write_events(&path, format, job, &out, red.as_mut())?,
            (TableName::Collectives | TableName::Events, None) => {
                anyhow::ensure!(
                    asked.is_empty(),
                    "--tables {name}: a job digest holds no events nor matched collectives: export it from the traces"
                );
                crate::out::say(&format!(
                    "note: no {name} table: a job digest holds no events nor matched collectives"
                ));
                continue;
            }
            (n, _) => match tables::from_analysis(analysis, n) {
                Some(mut t) => {
                    if let Some(r) = &mut red {
                        redact::table::redact_table(r, &mut t);
                    }
                    write_table(&path, format, &t)?
                }
                None => continue,
            },
        };
        report.push_str(&format!("{}\t{rows} rows\n", path.display()));
    }
    crate::out::emit_text(&report)?;
    if let Some(r) = &red {
        let path = a.out.join("redaction.json");
        let st = r.statement();
        std::fs::write(&path, st.json()).with_context(|| format!("cannot write {}", path.display()))?;
        crate::out::say(&format!("{} (the statement: {})", st.line(), path.display()));
    }
    Ok(if out.clean() { 0 } else { 1 })
}

fn create(path: &Path) -> Result<std::io::BufWriter<std::fs::File>> {
    Ok(std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?,
    ))
}

fn write_table(path: &Path, format: Format, t: &columnar::Table) -> Result<usize> {
    let mut w = Writer::new(format, create(path)?, t.schema())?;
    w.write(&t.columns).with_context(|| format!("cannot write {}", path.display()))?;
    w.finish().with_context(|| format!("cannot write {}", path.display()))?;
    Ok(t.rows())
}

/// The events, a row group / record batch per rank (`tables::write_events`); with a
/// redaction, each rank's piece redacted as it is written.
fn write_events(
    path: &Path,
    format: Format,
    job: &rankscope_core::normalize::Job,
    out: &rankscope_core::job::JobOutput,
    red: Option<&mut Redactor>,
) -> Result<usize> {
    let cannot = || format!("cannot write {}", path.display());
    let Some(r) = red else {
        let written =
            tables::write_events(format, create(path)?, job, &out.analysis.alignment).with_context(cannot)?;
        return Ok(written.map_or(0, |(_, rows)| rows));
    };
    let mut w: Option<Writer<_>> = None;
    let mut rows = 0;
    for e in &job.ranks {
        let mut t = tables::events(e, &job.strings, e.rank, out.offset_of(e.rank));
        redact::table::redact_table(r, &mut t);
        rows += t.rows();
        if w.is_none() {
            w = Some(Writer::new(format, create(path)?, t.schema()).with_context(cannot)?);
        }
        if let Some(w) = &mut w {
            w.write(&t.columns).with_context(cannot)?;
        }
    }
    if let Some(w) = w {
        w.finish().with_context(cannot)?;
    }
    Ok(rows)
}
