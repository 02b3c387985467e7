//! `rankscope synth`: write a deterministic synthetic multi-rank Kineto trace set and its
//! ground-truth manifest.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use flate2::write::GzEncoder;
use flate2::Compression;
use rankscope_core::synth::{self, SynthConfig};

/// Options; anything not given keeps the demo configuration's value (`SynthConfig::default()`),
/// or the value from `--config`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory for `rank{r}.pt.trace.json[.gz]` and `manifest.json` (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Start from this JSON `SynthConfig` instead of the demo defaults; flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Ranks (one file each).
    #[arg(long)]
    pub ranks: Option<u32>,
    /// Profiled steps per rank.
    #[arg(long)]
    pub steps: Option<u32>,
    /// Random seed; the same options and seed give byte-identical files.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Add steps until each rank's (uncompressed) file is about this many MB (10^6 bytes).
    #[arg(long)]
    pub target_mb: Option<f64>,
    /// Write `.json.gz` instead of `.json`.
    #[arg(long)]
    pub gzip: bool,
    /// The slow rank (default: 5, or the last rank in smaller jobs).
    #[arg(long, conflicts_with = "no_straggler")]
    pub straggler: Option<u32>,
    /// No straggler.
    #[arg(long)]
    pub no_straggler: bool,
    /// Extra GPU compute per step on the straggler, in ms.
    #[arg(long)]
    pub straggler_delay_ms: Option<f64>,
    /// 1 MiB DDP buckets (same total bytes): many small, latency-bound all_reduces.
    #[arg(long)]
    pub small_buckets: bool,
    /// DDP gradient buckets per step.
    #[arg(long)]
    pub buckets: Option<u32>,
    /// Size of each bucket in MiB.
    #[arg(long)]
    pub bucket_mb: Option<f64>,
    /// Fraction (0–1) of buckets ready only when backward ends (exposed communication).
    #[arg(long)]
    pub exposed_fraction: Option<f64>,
    /// All_reduce bus bandwidth in GB/s.
    #[arg(long)]
    pub busbw_gbps: Option<f64>,
    /// Approximate GPU kernels per step (model depth; scales the events per step).
    #[arg(long)]
    pub kernels_per_step: Option<u32>,
    /// Per-step GPU speed variation of each rank (0.015 = ±1.5 %).
    #[arg(long)]
    pub jitter: Option<f64>,
    /// Bound of the random per-rank host clock offsets, in µs (0: all clocks agree).
    #[arg(long)]
    pub clock_offset_max_us: Option<i64>,
    /// Add mid-step cudaFree/cudaMalloc bursts (allocator fragmentation).
    #[arg(long)]
    pub malloc_churn: bool,
    /// Leave out the loss all_reduce on the second process group.
    #[arg(long)]
    pub no_loss_allreduce: bool,
}

fn config_from(a: &Args) -> anyhow::Result<SynthConfig> {
    let mut c = match &a.config {
        Some(p) => {
            let text = fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("parsing {} as a synth config", p.display()))?
        }
        None => SynthConfig::default(),
    };
    if let Some(v) = a.ranks {
        c.ranks = v;
        // The demo's straggler and explicit offsets are for 8 ranks; follow the new size.
        if a.straggler.is_none() && c.straggler_rank.is_some_and(|s| s >= v) {
            c.straggler_rank = v.checked_sub(1).filter(|&s| s > 0);
        }
        if !c.clock_offsets_ns.is_empty() && c.clock_offsets_ns.len() != v as usize {
            anyhow::bail!("the config lists {} clock offsets but --ranks is {v}", c.clock_offsets_ns.len());
        }
    }
    if let Some(v) = a.steps {
        c.steps = v;
    }
    if let Some(v) = a.seed {
        c.seed = v;
    }
    if let Some(mb) = a.target_mb {
        anyhow::ensure!(mb.is_finite() && mb > 0.0, "--target-mb must be positive");
        c.target_bytes = Some((mb * 1e6).round() as u64);
    }
    if let Some(v) = a.straggler {
        c.straggler_rank = Some(v);
    }
    if a.no_straggler {
        c.straggler_rank = None;
    }
    if let Some(ms) = a.straggler_delay_ms {
        anyhow::ensure!(ms.is_finite() && ms >= 0.0, "--straggler-delay-ms must be ≥ 0");
        c.straggler_delay_ns = (ms * 1e6).round() as i64;
    }
    if let Some(v) = a.buckets {
        c.bucket_count = v;
    }
    if let Some(mb) = a.bucket_mb {
        anyhow::ensure!(mb.is_finite() && mb > 0.0, "--bucket-mb must be positive");
        c.bucket_bytes = (mb * f64::from(1u32 << 20)).round() as u64;
    }
    if a.small_buckets {
        c = c.with_small_buckets();
    }
    if let Some(v) = a.exposed_fraction {
        c.exposed_comm_fraction = v;
    }
    if let Some(v) = a.busbw_gbps {
        c.busbw_gbps = v;
    }
    if let Some(v) = a.kernels_per_step {
        c.kernels_per_step = v;
    }
    if let Some(v) = a.jitter {
        c.compute_jitter = v;
    }
    if let Some(us) = a.clock_offset_max_us {
        c.clock_offset_max_ns = us.saturating_mul(1000);
    }
    if a.malloc_churn {
        c.malloc_churn = true;
    }
    if a.no_loss_allreduce {
        c.loss_allreduce = false;
    }
    c.validate()?;
    Ok(c)
}

/// A trace file being written, plain or gzip-compressed.
enum Sink {
    Plain(BufWriter<File>),
    Gzip(GzEncoder<BufWriter<File>>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Plain(w) => w.write(buf),
            Sink::Gzip(w) => w.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Sink::Plain(w) => w.write_all(buf),
            Sink::Gzip(w) => w.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Gzip(w) => w.flush(),
        }
    }
}

impl Sink {
    fn finish(self) -> io::Result<()> {
        match self {
            Sink::Plain(mut w) => w.flush(),
            Sink::Gzip(w) => w.finish()?.flush(),
        }
    }
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

pub fn run(a: Args) -> anyhow::Result<u8> {
    let cfg = config_from(&a)?;
    fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let t0 = Instant::now();

    let paths: Vec<PathBuf> = (0..cfg.ranks).map(|r| a.out.join(synth::file_name(r, a.gzip))).collect();
    let mut sinks = Vec::with_capacity(paths.len());
    for p in &paths {
        let f = File::create(p).with_context(|| format!("creating {}", p.display()))?;
        let w = BufWriter::with_capacity(1 << 20, f);
        sinks.push(if a.gzip {
            Sink::Gzip(GzEncoder::new(w, Compression::default()))
        } else {
            Sink::Plain(w)
        });
    }
    let written = synth::write_ranks(&cfg, sinks).context("generating traces")?;
    let mut total = 0u64;
    let mut sizes = Vec::with_capacity(written.len());
    for ((sink, n), p) in written.into_iter().zip(&paths) {
        sink.finish().with_context(|| format!("finishing {}", p.display()))?;
        let on_disk = fs::metadata(p).map(|m| m.len()).unwrap_or(n);
        total += n;
        sizes.push((p, n, on_disk));
    }
    let gen_secs = t0.elapsed().as_secs_f64();

    let man = synth::manifest(&cfg);
    let man_path = a.out.join("manifest.json");
    write_manifest(&man_path, &man)?;

    let mut out = String::new();
    macro_rules! outln {
        ($o:expr, $($t:tt)*) => {{
            use std::fmt::Write as _;
            let _ = writeln!($o, $($t)*);
        }};
    }
    for (p, n, on_disk) in &sizes {
        if a.gzip {
            outln!(out, "{}  {:.1} MB ({:.1} MB uncompressed)", p.display(), mb(*on_disk), mb(*n));
        } else {
            outln!(out, "{}  {:.1} MB", p.display(), mb(*n));
        }
    }
    outln!(out, "{}  ground truth", man_path.display());
    outln!(
        out,
        "{} ranks × {} steps (ProfilerStep#{}..#{}), {} kernels and {} collectives per step per rank",
        cfg.ranks,
        man.steps,
        man.step_numbers.first().copied().unwrap_or(0),
        man.step_numbers.last().copied().unwrap_or(0),
        man.kernels_per_step,
        man.collectives_per_step
    );
    match man.straggler_rank {
        Some(s) => {
            outln!(
                out,
                "straggler: rank {s} (+{:.1} ms compute per step)",
                man.straggler_delay_ns as f64 / 1e6
            )
        }
        None => outln!(out, "straggler: none"),
    }
    let offsets: Vec<String> =
        man.ranks.iter().map(|r| format!("{:+.1}", r.clock_offset_ns as f64 / 1e3)).collect();
    outln!(out, "clock offsets (µs, by rank): {}", offsets.join(" "));
    outln!(
        out,
        "{:.1} MB uncompressed in {:.2} s ({:.0} MB/s)",
        mb(total),
        gen_secs,
        mb(total) / gen_secs.max(1e-9)
    );
    crate::out::emit(&out)?;
    Ok(0)
}

fn write_manifest(path: &Path, man: &synth::Manifest) -> anyhow::Result<()> {
    let f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = BufWriter::new(f);
    serde_json::to_writer_pretty(&mut w, man).with_context(|| format!("writing {}", path.display()))?;
    w.write_all(b"\n")?;
    w.flush()?;
    Ok(())
}
