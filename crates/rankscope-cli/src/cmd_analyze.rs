//! `rankscope analyze PATH...`: per rank × step figures, alignment, collectives, stragglers,
//! critical path and findings.

use std::path::PathBuf;

use anyhow::{Context, Result};
use rankscope_core::analyze::{self, Options};
use rankscope_core::diagnose::gates;
use rankscope_core::redact::{self, Redactor};

use crate::load;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trace files (.json, .json.gz, .pt.trace.json) or directories holding them: one per rank.
    /// nccl-tests output files given here too (recognised by content) place the trace's
    /// collectives against what the fabric delivered; PyTorch Flight Recorder dumps (by
    /// content) add their hang / mismatch report (alone when there are only dumps).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub job: JobFlags,
    /// Fail (exit 3) when a job metric crosses a bound, e.g.
    /// `--fail-on 'worst_rank_exposed_transfer_share>0.3'` (also `<`, `>=`, `<=`; repeatable).
    /// Metrics: step_time_ms, slowest_rank_step_p50_ms, slowest_rank_step_max_ms,
    /// worst_rank_step_jitter, worst_rank_exposed_transfer_share, worst_rank_exposed_comm_share,
    /// worst_rank_comm_share, worst_rank_overlap_share, worst_rank_idle_share,
    /// compute_imbalance, findings_high, findings; `rankscope gates` says what each measures.
    /// An input that could not be read exits 1 even when a gate fails (the gate is still said).
    #[arg(long = "fail-on", value_name = "METRIC>VALUE")]
    pub fail_on: Vec<String>,
    /// Also write every rank into one aligned Chrome trace (one process per rank, offsets
    /// applied) that Perfetto and chrome://tracing open.
    #[arg(long, value_name = "FILE")]
    pub merged_trace: Option<PathBuf>,
    /// Also write a Perfetto multi-trace archive (a tar): one Chrome JSON per rank on its own
    /// clock and a `perfetto_manifest.json` giving each rank its own machine and pinning it to
    /// the lowest rank with the estimated offset, so Perfetto shows the job aligned.
    #[arg(long, value_name = "FILE.tar")]
    pub perfetto: Option<PathBuf>,
    /// Write `--merged-trace` and `--perfetto` without the source's own args (every event's
    /// `Input Dims`, kernel `grid` / `block`, collective args, ... are kept by default, verbatim,
    /// beside rankscope's `args.rankscope`): only the ids and rankscope's, as the web app writes
    /// them, reading each file on every core and holding less memory (BENCHMARKS.md).
    #[arg(long)]
    pub no_source_args: bool,
    /// Extra classification rules (JSON), tried before the defaults.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
}

/// The flags `analyze` and `combine` share: what to print, and what the job is told.
#[derive(Debug, clap::Args)]
pub struct JobFlags {
    /// The full analysis as JSON (schema `rankscope.analysis`, see docs/analysis-schema.md).
    #[arg(long, conflicts_with_all = ["csv", "md"])]
    pub json: bool,
    /// The per rank × step table as CSV.
    #[arg(long, conflicts_with = "md")]
    pub csv: bool,
    /// The report as Markdown (the default prints it laid out for a terminal).
    #[arg(long)]
    pub md: bool,
    /// Every row of every table in the terminal report (by default a table shows its first
    /// 24 rows and says how many more there are).
    #[arg(long, conflicts_with_all = ["json", "csv", "md"])]
    pub all: bool,
    /// Give a file its rank explicitly: `--rank path/to/file.json=3` (repeatable).
    #[arg(long = "rank", value_name = "FILE=N")]
    pub rank: Vec<String>,
    /// A known clock offset: `--offset RANK=NS` (aligned time = rank time − NS; repeatable).
    #[arg(long = "offset", value_name = "RANK=NS")]
    pub offset: Vec<String>,
    /// Change a finding threshold: `--threshold exposed_comm_ratio=0.15` (repeatable).
    #[arg(long = "threshold", value_name = "NAME=VALUE")]
    pub threshold: Vec<String>,
    /// The job's parallel layout, when the traces do not say it (or to name the groups' roles):
    /// `tp=2,pp=4,dp=8` in Megatron-LM's rank order (tensor fastest, then cp, ep, dp, pp), or a
    /// DeviceMesh as written, last dimension fastest: `mesh:pp=2,dp_replicate=2,dp_shard=4,tp=2`.
    #[arg(long, value_name = "LAYOUT")]
    pub layout: Option<String>,
    /// Replace the user's names, file paths, hosts and source args by tokens in everything this
    /// run writes (report, --json, --csv, --merged-trace, --perfetto), keeping public names
    /// (aten::, nccl:, CUDA calls, library kernels) and every figure; the report ends with what
    /// was kept, hashed and removed (docs/redaction.md). The key is drawn for this run.
    #[arg(long)]
    pub redact: bool,
    /// `--redact` under a key of yours: outputs redacted separately with one key give one token
    /// per name (two runs, or each rank's part on its own machine).
    #[arg(long, value_name = "KEY")]
    pub redact_key: Option<String>,
}

impl JobFlags {
    /// The analysis options these flags give.
    pub fn options(&self) -> Result<Options> {
        let mut opts = options(&self.offset, &self.threshold)?;
        if let Some(l) = &self.layout {
            opts.layout = Some(
                rankscope_core::analyze::layout::UserLayout::parse(l)
                    .map_err(|e| anyhow::anyhow!("--layout {l}: {e}"))?,
            );
        }
        Ok(opts)
    }

    /// The redaction these flags ask for (`--redact`, `--redact-key`), if any.
    pub fn redactor(&self) -> Option<Redactor> {
        match (&self.redact_key, self.redact) {
            (Some(k), _) => Some(Redactor::new(redact::Key::from_phrase(k))),
            (None, true) => Some(Redactor::new(redact::Key::per_run())),
            (None, false) => None,
        }
    }

    /// Prints the job's output in the form asked for: JSON, CSV, Markdown, or (by default) the
    /// report laid out for a terminal ([`rankscope_core::terminal`]); redacted when `red` is given: the output (made from the redacted job
    /// output, [`redact::job::redact_output`]) passes the text redaction once more, and says
    /// what was kept, hashed and removed (a `redaction` member in JSON, the report's last
    /// section, a line on standard error beside CSV).
    pub fn emit_with(&self, out: &rankscope_core::job::JobOutput, red: Option<&mut Redactor>) -> Result<()> {
        let mut red = red;
        let mut pass = |s: String| match red.as_deref_mut() {
            Some(r) => r.text(&s),
            None => s,
        };
        if self.json {
            let mut text = pass(out.json());
            if let Some(r) = red.as_deref() {
                text = with_redaction_member(&text, &r.statement());
            }
            crate::out::emit(&text)?;
        } else if self.csv && out.has_traces() {
            crate::out::emit_text(&pass(out.csv()))?;
            if out.flight_recorder.is_some() {
                eprintln!("rankscope: the Flight Recorder dumps are not part of the CSV: see --md or --json");
            }
        } else {
            let mut md = pass(out.markdown());
            if let Some(r) = red.as_deref() {
                md.push_str(&r.statement().markdown());
            }
            if self.md {
                crate::out::emit_text(&md)?;
            } else {
                crate::out::emit_report(&md, self.all)?;
            }
        }
        if let Some(r) = red.as_deref() {
            crate::out::say(&r.statement().line());
        }
        Ok(())
    }
}

/// Exit codes: 0 fine; 1 a file is not a trace or two files claim one rank (before a failed
/// gate: a gate on a job missing some of its inputs is no verdict); 2 usage or I/O error; 3 a
/// `--fail-on` gate failed.
pub fn run(a: Args) -> Result<u8> {
    let opts = a.job.options()?;
    let mut red = a.job.redactor();
    let gates: Vec<gates::Gate> = a
        .fail_on
        .iter()
        .map(|g| {
            let gate = g.parse::<gates::Gate>().map_err(|e| anyhow::anyhow!("--fail-on {e}"))?;
            // `x>NaN` would parse and never fail: a gate that cannot fire is a mistake.
            anyhow::ensure!(gate.value.is_finite(), "--fail-on `{g}`: the bound must be a finite number");
            if let Some(old) = gate.renamed_from {
                crate::out::say(&format!(
                    "note: --fail-on `{old}` is now `{}` ({}); the old name still works",
                    gate.metric,
                    gate.metric.describe()
                ));
            }
            Ok(gate)
        })
        .collect::<Result<_>>()?;
    let req = load::Request {
        paths: a.paths.clone(),
        ranks: a.job.rank.clone(),
        rules: a.rules.clone(),
        options: opts,
        chunk: None,
        // A redaction gathers the names from the job's string table: the job is held whole.
        keep_job: a.merged_trace.is_some() || a.perfetto.is_some() || red.is_some(),
        keep_args: (a.merged_trace.is_some() || a.perfetto.is_some()) && !a.no_source_args,
    };
    let line = load::ProgressLine::new();
    let load::Outcome { mut job, mut out, mut notes } = load::analyze_paths(&req, &|d, t| line.update(d, t))?;
    line.end();
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
    offset_notes(&req.options, &out);
    for f in &out.failed {
        crate::out::say(&f.error);
    }
    if let Some(f) = &out.flight_recorder {
        for m in f.messages() {
            crate::out::say(&m);
        }
    }
    if !out.has_traces() {
        match &out.flight_recorder {
            // Flight Recorder dumps only: the hang report alone.
            Some(f) if !f.dumps.is_empty() => {}
            _ => anyhow::bail!("no file could be read as a trace"),
        }
    }
    let analysis = &out.analysis;
    if let (true, Some(job)) = (out.has_traces(), &job) {
        if let Some(path) = &a.merged_trace {
            write_merged(path, job, analysis).with_context(|| format!("cannot write {}", path.display()))?;
            if let Some(r) = &red {
                append_redaction(path, &r.statement())
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
        }
        if let Some(path) = &a.perfetto {
            write_perfetto(path, job, analysis)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    a.job.emit_with(&out, red.as_mut())?;
    let bad = if out.has_traces() { gates::failed_gates(analysis, &gates) } else { Vec::new() };
    for (g, v) in &bad {
        eprintln!("rankscope: gate failed: {} {} {} (measured {v:.4})", g.metric, g.op, g.value);
    }
    Ok(if !out.clean() {
        1
    } else if !bad.is_empty() {
        3
    } else {
        0
    })
}

/// Says every `--offset` whose rank is not in the job (it would be ignored in silence).
pub fn offset_notes(opts: &Options, out: &rankscope_core::job::JobOutput) {
    if !out.has_traces() {
        return;
    }
    for (r, ns) in &opts.offsets {
        if !out.analysis.ranks.iter().any(|x| x.rank == *r) {
            crate::out::say(&format!("note: --offset {r}={ns}: the job has no rank {r}; ignored"));
        }
    }
}

/// The analysis options from `--offset RANK=NS` and `--threshold NAME=VALUE` (shared by
/// `analyze` and `combine`).
pub(crate) fn options(offset: &[String], threshold: &[String]) -> Result<Options> {
    let mut opts = Options::default();
    for o in offset {
        let (r, ns) = o.split_once('=').with_context(|| format!("--offset expects RANK=NS, got `{o}`"))?;
        let r = r
            .trim()
            .parse()
            .map_err(|e| anyhow::anyhow!("--offset {o}: `{}` is not a rank ({e})", r.trim()))?;
        let ns: i64 = ns.trim().parse().map_err(|e| {
            anyhow::anyhow!("--offset {o}: `{}` is not a whole number of ns ({e})", ns.trim())
        })?;
        // The bound every time in a trace has: beyond it, aligned times overflow.
        let max = rankscope_core::parse::kineto::MAX_TIME_NS;
        anyhow::ensure!(ns.abs() <= max, "--offset {o}: {ns} ns is beyond ±{max} ns (about 126 years)");
        opts.offsets.push((r, ns));
    }
    for t in threshold {
        let (n, v) =
            t.split_once('=').with_context(|| format!("--threshold expects NAME=VALUE, got `{t}`"))?;
        let v: f64 = v
            .trim()
            .parse()
            .map_err(|e| anyhow::anyhow!("--threshold {t}: `{}` is not a number ({e})", v.trim()))?;
        anyhow::ensure!(v.is_finite(), "--threshold {t}: the value must be a finite number");
        opts.thresholds.set(n.trim(), v).map_err(|e| anyhow::anyhow!("--threshold {t}: {e}"))?;
    }
    Ok(opts)
}

/// The export plan of a job held whole: every rank, by rank, under its decided number.
fn plan_of(
    job: &rankscope_core::normalize::Job,
    a: &analyze::Analysis,
) -> rankscope_core::export::ExportPlan {
    rankscope_core::export::ExportPlan::of(
        a,
        job.ranks.iter().map(|r| (r.rank, r.trace.events.ts_ns.iter().min().copied())),
    )
}

/// Writes the Perfetto archive of every rank (`export::perfetto`, as the plan says).
fn write_perfetto(
    path: &std::path::Path,
    job: &rankscope_core::normalize::Job,
    a: &analyze::Analysis,
) -> Result<()> {
    use rankscope_core::export;
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    plan_of(job, a).write_perfetto(&mut out, |k, mut w, at| match job.ranks.get(k) {
        Some(r) => {
            export::write_rank(&mut w, r, &job.strings, at, true)?;
            export::write_step_track(w, r, at)
        }
        None => Ok(()),
    })?;
    out.flush()?;
    Ok(())
}

/// Writes the merged, aligned trace of every rank (as the plan says).
fn write_merged(
    path: &std::path::Path,
    job: &rankscope_core::normalize::Job,
    a: &analyze::Analysis,
) -> Result<()> {
    use rankscope_core::export;
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    plan_of(job, a).write_merged(&mut out, |k, out, at, first| match job.ranks.get(k) {
        Some(r) => export::write_rank(out, r, &job.strings, at, first).map(drop),
        None => Ok(()),
    })?;
    out.flush()?;
    Ok(())
}

/// A JSON object's text with a `redaction` member (the statement) added last.
pub fn with_redaction_member(json: &str, st: &redact::Statement) -> String {
    let body = json.trim_end();
    match (body.strip_suffix('}'), serde_json::to_string_pretty(st)) {
        (Some(head), Ok(member)) => {
            let head = head.trim_end();
            let sep = if head.ends_with('{') { "" } else { "," };
            format!("{head}{sep}\n  \"redaction\": {}\n}}\n", member.replace('\n', "\n  "))
        }
        _ => json.to_string(),
    }
}

/// The merged trace's last bytes (`]}` and a newline, [`rankscope_core::export::write_footer`])
/// rewritten with a top-level `rankscope_redaction` member after the events.
fn append_redaction(path: &std::path::Path, st: &redact::Statement) -> Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
    let len = f.seek(SeekFrom::End(0))?;
    anyhow::ensure!(len >= 3, "the merged trace is shorter than its footer");
    f.seek(SeekFrom::Start(len - 3))?;
    let mut tail = [0u8; 3];
    std::io::Read::read_exact(&mut f, &mut tail)?;
    anyhow::ensure!(&tail == b"]}\n", "the merged trace does not end with its footer");
    f.seek(SeekFrom::Start(len - 3))?;
    write!(f, "],\n\"rankscope_redaction\": {}}}\n", serde_json::to_string(st)?)?;
    Ok(())
}

/// `rankscope gates`: the metrics `analyze --fail-on` and `diff --fail-on` test, what each
/// measures, and the first release's names.
#[derive(Debug, clap::Args)]
pub struct GatesArgs {}

pub fn run_gates(_: GatesArgs) -> Result<u8> {
    let mut s = String::from("rankscope analyze --fail-on 'METRIC>VALUE' (also <, >=, <=):\n");
    for m in gates::GateMetric::ALL {
        s.push_str(&format!("  {:<36} {}\n", m.as_str(), m.describe()));
    }
    s.push_str("\nFirst-release names, still read as:\n");
    for (old, m) in gates::renamed() {
        s.push_str(&format!("  {old:<36} {m}\n"));
    }
    s.push_str("\nrankscope diff --fail-on 'METRIC>VALUE' (a change between two runs, counted only beyond their noise):\n");
    for (m, what) in rankscope_core::compare::gates::DESCRIBED {
        s.push_str(&format!("  {m:<36} {what}\n"));
    }
    crate::out::emit_text(&s)?;
    Ok(0)
}
