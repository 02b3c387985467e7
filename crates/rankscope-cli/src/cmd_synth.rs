//! `rankscope synth`: write a deterministic synthetic multi-rank Kineto trace set and its
//! ground-truth manifest.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use flate2::write::GzEncoder;
use flate2::Compression;
use rankscope_synth::{
    self as synth, DpCollective, GroupNaming, Hybrid, HybridCause, Scenario, Schedule, SynthConfig,
};

/// The scenario list of `rankscope synth --help`.
pub const SCENARIOS_HELP: &str = "\
Scenarios (--scenario NAME; the manifest's `injected` block says what was injected):
  baseline                 4 identical ranks, hidden communication: nothing to find
  host_stall               rank 2 sleeps 20 ms/step in `straggler_sleep` inside `## forward ##`
  slow_dataloader          rank 1's DataLoader __next__ takes 5x as long (3 -> 15 ms)
  small_buckets            18 DDP buckets of 1-4 MiB (~40 MB of gradients)
  good_overlap             a 13-layer model, 12 buckets, all hidden behind backward
  uneven_batch             rank 3 has a 1.25x batch (longer kernels, larger Input Dims)
  slow_gpu                 rank 1's kernels are slower with the same shapes (+8 ms/step)
  host_sync                4 .item() syncs in forward on every rank, 1.5 ms of host work each
  all_to_all               a 16 MiB all_to_all per step whose kernels are ncclDevKernel_SendRecv
  pipeline_gpipe           4 stages x 8 micro-batches, GPipe, NCCL send/recv between stages
  pipeline_1f1b            the same with 1F1B
  pipeline_interleaved     interleaved 1F1B, 2 virtual stages per rank
  pipeline_slow_stage      1F1B with stage 2's kernels 1.5x slower
  hang_skipped_collective  rank 1 skips one all_reduce of step 2; all hang until the 8 s timeout
  early_exit               rank 3 exits after step 2; the others hang in their next all_reduce
Flags given with --scenario override the preset; --config FILE sets any knob (JSON SynthConfig).

Hybrid-parallel GPU jobs (--layout; docs/synth.md, \"Hybrid-parallel jobs\"):
  --layout tp=8,pp=4,dp=2[,cp=2][,ep=2]   Megatron rank order (tp fastest, then cp, ep inside dp,
                                          dp, pp), 8 GPUs per host, one clock per host
  --cause none                            healthy (the default)
  --cause host_stall:rank=5,ms=120[,name=X]   rank 5 sleeps at the start of every step
  --cause slow_stage:stage=2[,extra_layers=1] stage 2 holds more layers
  --cause tp_spans_hosts:group=3          tensor group 3 spans two hosts (network bandwidth)
  --cause expert_imbalance:rank=5[,share=0.6] rank 5 receives most of its expert group's tokens
  e.g. rankscope synth --layout tp=4,pp=4,dp=4 --cause host_stall:rank=5,ms=120 --out DIR
With --layout: --schedule 1f1b|gpipe, --micro-batches, --naming, --dp-collective, --steps (3),
--seed, --gzip; the manifest's `hybrid` block holds the truth.";

fn parse_scenario(s: &str) -> Result<Scenario, String> {
    Scenario::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
        format!("unknown scenario {s:?}; one of: {}", names.join(", "))
    })
}

/// `--cause` is checked when parsed and read into the config later (a `HybridCause` would make
/// every subcommand's arguments as large as this one's).
fn check_cause(s: &str) -> Result<String, String> {
    HybridCause::parse(s).map(|_| s.to_string())
}

fn parse_naming(s: &str) -> Result<GroupNaming, String> {
    match s {
        "megatron" => Ok(GroupNaming::Megatron),
        "torchtitan" => Ok(GroupNaming::Torchtitan),
        _ => Err(format!("unknown naming {s:?}; megatron or torchtitan")),
    }
}

fn parse_dp_collective(s: &str) -> Result<DpCollective, String> {
    match s {
        "reduce_scatter" => Ok(DpCollective::ReduceScatter),
        "all_reduce" => Ok(DpCollective::AllReduce),
        _ => Err(format!("unknown data-parallel collective {s:?}; reduce_scatter or all_reduce")),
    }
}

fn parse_schedule(s: &str) -> Result<Schedule, String> {
    match s {
        "gpipe" => Ok(Schedule::GPipe),
        "1f1b" => Ok(Schedule::OneFOneB),
        "interleaved" | "interleaved_1f1b" => Ok(Schedule::Interleaved1F1B),
        _ => Err(format!("unknown schedule {s:?}; one of: gpipe, 1f1b, interleaved")),
    }
}

/// Options; anything not given keeps the demo configuration's value (`SynthConfig::default()`),
/// the scenario preset's, or the value from `--config`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory for `rank{r}.pt.trace.json[.gz]` and `manifest.json` (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Start from this JSON `SynthConfig` instead of the demo defaults; flags override it.
    #[arg(long, conflicts_with = "scenario")]
    pub config: Option<PathBuf>,
    /// Start from a scenario preset (listed below) instead of the demo.
    #[arg(long, value_parser = parse_scenario)]
    pub scenario: Option<Scenario>,
    /// The rank the scenario's cause is on (host_stall, slow_dataloader, uneven_batch, slow_gpu,
    /// hang_skipped_collective, early_exit), or the slow stage of pipeline_slow_stage.
    #[arg(long)]
    pub inject_rank: Option<u32>,
    /// The scenario's factor: DataLoader slowdown, batch multiplier, or slow stage factor.
    #[arg(long)]
    pub factor: Option<f64>,
    /// Host stall per step in ms (host_stall).
    #[arg(long)]
    pub stall_ms: Option<f64>,
    /// Name of the host stall's annotation (host_stall; default straggler_sleep).
    #[arg(long)]
    pub stall_name: Option<String>,
    /// Process-group timeout in seconds (hang_skipped_collective, early_exit; default 8).
    #[arg(long)]
    pub timeout_s: Option<f64>,
    /// The 0-based profiled step in which the hang starts (hang scenarios).
    #[arg(long)]
    pub hang_step: Option<u32>,
    /// Pipeline stages p (pipeline scenarios).
    #[arg(long)]
    pub stages: Option<u32>,
    /// Micro-batches m per step (pipeline scenarios).
    #[arg(long)]
    pub micro_batches: Option<u32>,
    /// Virtual stages v per rank (interleaved schedule).
    #[arg(long)]
    pub virtual_stages: Option<u32>,
    /// Pipeline schedule: gpipe, 1f1b or interleaved.
    #[arg(long, value_parser = parse_schedule)]
    pub schedule: Option<Schedule>,
    /// Data-parallel replicas of the pipeline (> 1 adds a gradient all_reduce per stage).
    #[arg(long)]
    pub dp: Option<u32>,
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
    /// Write the whole job as one file (`job.pt.trace.json`), as a Perfetto / Chrome merge tool
    /// does: pid = rank, each process named `rank N` (`--merged bare`: the processes keep the
    /// names the ranks gave them). The manifest's `merged` says so. Holds every rank in memory.
    #[arg(long, num_args = 0..=1, default_missing_value = "named", value_parser = ["named", "bare"])]
    pub merged: Option<String>,
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
    /// A hybrid-parallel GPU job with this layout: tp=8,pp=4,dp=2[,cp=N][,ep=N] (world =
    /// tp·cp·dp·pp ranks, Megatron's rank order, 8 GPUs per host).
    #[arg(long, conflicts_with = "scenario")]
    pub layout: Option<String>,
    /// The hybrid job's one cause: none, host_stall:rank=R,ms=X[,name=N],
    /// slow_stage:stage=S[,extra_layers=L], tp_spans_hosts:group=G, expert_imbalance:rank=R[,share=F].
    #[arg(long, value_parser = check_cause)]
    pub cause: Option<String>,
    /// Process-group names and descriptions of a hybrid job: megatron (default) or torchtitan.
    #[arg(long, value_parser = parse_naming)]
    pub naming: Option<GroupNaming>,
    /// A hybrid job's data-parallel gradient collective: reduce_scatter (default, with the
    /// distributed optimizer's parameter all-gather) or all_reduce.
    #[arg(long, value_parser = parse_dp_collective)]
    pub dp_collective: Option<DpCollective>,
}

fn config_from(a: &Args) -> anyhow::Result<SynthConfig> {
    let mut c = match (&a.config, a.scenario) {
        (Some(p), _) => {
            let text = fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("parsing {} as a synth config", p.display()))?
        }
        (None, Some(s)) => s.config(),
        (None, None) if a.layout.is_some() => {
            SynthConfig { steps: 3, straggler_rank: None, loss_allreduce: false, ..SynthConfig::default() }
        }
        (None, None) => SynthConfig::default(),
    };
    hybrid_flags(a, &mut c)?;
    scenario_flags(a, &mut c)?;
    if let (Some(v), Some(h)) = (a.ranks, &c.hybrid) {
        anyhow::ensure!(
            u64::from(v) == h.world(),
            "--ranks {v} is not the layout's world size {}",
            h.world()
        );
    } else if let Some(v) = a.ranks {
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

/// `--layout` and the flags of a hybrid job.
fn hybrid_flags(a: &Args, c: &mut SynthConfig) -> anyhow::Result<()> {
    if let Some(l) = &a.layout {
        let h = c.hybrid.get_or_insert_with(Hybrid::default);
        synth::parse_layout(l, h).map_err(|e| anyhow::anyhow!("--layout: {e}"))?;
    }
    let Some(h) = c.hybrid.as_mut() else {
        anyhow::ensure!(
            a.cause.is_none() && a.naming.is_none() && a.dp_collective.is_none(),
            "--cause, --naming and --dp-collective need --layout (or a config with `hybrid`)"
        );
        return Ok(());
    };
    if let Some(x) = &a.cause {
        h.cause = HybridCause::parse(x).map_err(|e| anyhow::anyhow!("--cause: {e}"))?;
    }
    if let Some(x) = a.naming {
        h.naming = x;
    }
    if let Some(x) = a.dp_collective {
        h.dp_collective = x;
    }
    if let Some(x) = a.schedule {
        h.schedule = x;
    }
    if let Some(x) = a.micro_batches {
        h.micro_batches = x;
    }
    anyhow::ensure!(
        a.stages.is_none() && a.dp.is_none() && a.virtual_stages.is_none(),
        "--stages, --dp and --virtual-stages are for pipeline scenarios; a hybrid job takes them from --layout"
    );
    Ok(())
}

/// The scenario knobs' flags.
fn scenario_flags(a: &Args, c: &mut SynthConfig) -> anyhow::Result<()> {
    if let Some(r) = a.inject_rank {
        let mut used = false;
        if let Some(h) = &mut c.host_stall {
            h.rank = r;
            used = true;
        }
        for k in [&mut c.slow_dataloader, &mut c.uneven_batch].into_iter().flatten() {
            k.rank = r;
            used = true;
        }
        if let Some(h) = &mut c.hang {
            h.rank = r;
            used = true;
        }
        if let Some(p) = &mut c.pipeline {
            p.slow_stage = Some(r);
            used = true;
        }
        if !used && c.straggler_rank.is_some() {
            c.straggler_rank = Some(r);
            used = true;
        }
        anyhow::ensure!(used, "--inject-rank: this configuration injects nothing on a rank");
    }
    if let Some(f) = a.factor {
        anyhow::ensure!(f.is_finite() && f > 0.0, "--factor must be positive");
        let mut used = false;
        for k in [&mut c.slow_dataloader, &mut c.uneven_batch].into_iter().flatten() {
            k.factor = f;
            used = true;
        }
        if let Some(p) = &mut c.pipeline {
            p.slow_factor = f;
            used = true;
        }
        anyhow::ensure!(used, "--factor: this configuration has no factor to set");
    }
    if let Some(ms) = a.stall_ms {
        anyhow::ensure!(ms.is_finite() && ms >= 0.0, "--stall-ms must be ≥ 0");
        let h = c.host_stall.get_or_insert_with(Default::default);
        h.ns = (ms * 1e6).round() as i64;
    }
    if let Some(n) = &a.stall_name {
        c.host_stall.get_or_insert_with(Default::default).name = n.clone();
    }
    if let Some(s) = a.timeout_s {
        anyhow::ensure!(s.is_finite() && s > 0.0, "--timeout-s must be positive");
        let h = c.hang.as_mut().ok_or_else(|| anyhow::anyhow!("--timeout-s needs a hang scenario"))?;
        h.timeout_ns = (s * 1e9).round() as i64;
    }
    if let Some(k) = a.hang_step {
        c.hang.as_mut().ok_or_else(|| anyhow::anyhow!("--hang-step needs a hang scenario"))?.step = k;
    }
    let pipe_flag = c.hybrid.is_none()
        && (a.stages.is_some()
            || a.micro_batches.is_some()
            || a.virtual_stages.is_some()
            || a.schedule.is_some()
            || a.dp.is_some());
    if pipe_flag {
        let p =
            c.pipeline.as_mut().ok_or_else(|| anyhow::anyhow!("pipeline flags need a pipeline scenario"))?;
        if let Some(v) = a.stages {
            p.stages = v;
        }
        if let Some(v) = a.micro_batches {
            p.micro_batches = v;
        }
        if let Some(v) = a.schedule {
            p.schedule = v;
            if v != Schedule::Interleaved1F1B {
                p.virtual_stages = 1;
            } else if p.virtual_stages == 1 {
                p.virtual_stages = 2;
            }
        }
        if let Some(v) = a.virtual_stages {
            p.virtual_stages = v;
        }
        // Each rank's layers are split evenly over its model chunks.
        let v = p.virtual_stages.max(1);
        if p.layers_per_stage % v != 0 {
            p.layers_per_stage = v * (p.layers_per_stage / v).max(1);
        }
        if let Some(v) = a.dp {
            p.dp = v;
        }
        // The world follows the pipeline's shape.
        c.ranks = p.stages.saturating_mul(p.dp);
    }
    Ok(())
}

/// Trace files written at once (see `run`).
const FILES_AT_ONCE: usize = 512;

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

pub fn run(a: Args) -> anyhow::Result<u8> {
    let cfg = config_from(&a)?;
    fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let t0 = Instant::now();

    let ranks = synth::world_size(&cfg);
    if let Some(how) = &a.merged {
        return run_merged(&a, &cfg, ranks, how == "named", t0);
    }
    let paths: Vec<PathBuf> = (0..ranks).map(|r| a.out.join(synth::file_name(r, a.gzip))).collect();
    // The ranks are simulated together and their files written at once; beyond FILES_AT_ONCE
    // files, in batches (each simulates the job again, the bytes are the same), so that a
    // 1,024-rank job stays under the usual limit of 1,024 open files.
    let buffer = if ranks > 64 { 128 << 10 } else { 1 << 20 };
    let mut total = 0u64;
    let mut sizes = Vec::with_capacity(paths.len());
    for (b, batch) in paths.chunks(FILES_AT_ONCE).enumerate() {
        let first = u32::try_from(b * FILES_AT_ONCE).unwrap_or(u32::MAX);
        let mut sinks = Vec::with_capacity(batch.len());
        for (r, p) in (first..).zip(batch) {
            let f = File::create(p).with_context(|| format!("creating {}", p.display()))?;
            let w = BufWriter::with_capacity(buffer, f);
            sinks.push((
                r,
                if a.gzip { Sink::Gzip(GzEncoder::new(w, Compression::default())) } else { Sink::Plain(w) },
            ));
        }
        let written = synth::write_some(&cfg, sinks).context("generating traces")?;
        for ((sink, n), p) in written.into_iter().zip(batch) {
            sink.finish().with_context(|| format!("finishing {}", p.display()))?;
            let on_disk = fs::metadata(p).map(|m| m.len()).unwrap_or(n);
            total += n;
            sizes.push((p, n, on_disk));
        }
    }
    let gen_secs = t0.elapsed().as_secs_f64();

    let man = synth::manifest(&cfg);
    let man_path = a.out.join("manifest.json");
    write_manifest(&man_path, &man)?;

    if let Some(h) = &man.hybrid {
        let out = hybrid_summary(&man, h, &sizes, a.gzip, &man_path, gen_secs, total);
        crate::out::emit(&out)?;
        return Ok(0);
    }
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
    if let Some(s) = man.scenario {
        outln!(out, "scenario: {}", s.name());
    }
    let inj = &man.injected;
    match inj.cause {
        Some(cause) => outln!(
            out,
            "injected: {} on ranks {:?}, {:.1} ms: {}",
            cause.id(),
            inj.ranks,
            inj.amount_ns as f64 / 1e6,
            inj.location
        ),
        None => outln!(out, "injected: nothing"),
    }
    if man.scenario.is_none() {
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

/// What `rankscope synth --layout` prints: the files in one line, the layout, the cause and
/// where its chain of waits reaches, the hosts' clocks.
fn hybrid_summary(
    man: &synth::Manifest,
    h: &synth::ManifestHybrid,
    sizes: &[(&PathBuf, u64, u64)],
    gzip: bool,
    man_path: &Path,
    gen_secs: f64,
    total: u64,
) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let on_disk: u64 = sizes.iter().map(|x| x.2).sum();
    let (lo, hi) = sizes.iter().fold((u64::MAX, 0), |(lo, hi), x| (lo.min(x.2), hi.max(x.2)));
    let dir = sizes.first().and_then(|x| x.0.parent()).map_or_else(String::new, |d| d.display().to_string());
    let _ = writeln!(
        out,
        "{dir}: {} trace files rank0..rank{}.pt.trace.json{}, {:.1} MB ({:.1}–{:.1} MB each)",
        sizes.len(),
        sizes.len().saturating_sub(1),
        if gzip { ".gz" } else { "" },
        mb(on_disk),
        mb(lo.min(hi)),
        mb(hi)
    );
    let _ = writeln!(out, "{}  ground truth", man_path.display());
    let l = &h.layout;
    let _ = writeln!(
        out,
        "{} ranks × {} steps (ProfilerStep#{}..#{}): tp={} pp={} dp={} cp={} ep={} on {} hosts, {} with {} micro-batches, {} layers per stage",
        l.world,
        man.steps,
        man.step_numbers.first().copied().unwrap_or(0),
        man.step_numbers.last().copied().unwrap_or(0),
        l.tp,
        l.pp,
        l.dp,
        l.cp,
        l.ep,
        h.hosts.len(),
        match l.schedule {
            Schedule::GPipe => "GPipe",
            _ => "1F1B",
        },
        l.micro_batches,
        l.layers_per_stage.iter().map(u32::to_string).collect::<Vec<_>>().join("/")
    );
    let c = &h.cause;
    if c.kind == "none" {
        let _ = writeln!(out, "injected: nothing (healthy); expected first finding: none");
    } else {
        let _ = writeln!(
            out,
            "injected: {} on ranks {:?}, {:.1} ms per step: {}; expected first finding: {}",
            c.kind,
            c.origin_ranks,
            c.amount_ns as f64 / 1e6,
            c.location,
            c.expected_first_finding.unwrap_or("none")
        );
        let mut hops: Vec<(u32, usize)> = Vec::new();
        for x in h.chain.iter().filter(|x| x.hop > 0) {
            match hops.iter_mut().find(|y| y.0 == x.hop) {
                Some(y) => y.1 += 1,
                None => hops.push((x.hop, 1)),
            }
        }
        let hops: Vec<String> = hops.iter().map(|(hop, n)| format!("hop {hop}: {n}")).collect();
        let _ = writeln!(
            out,
            "chain of waits: {} ranks only inherit a wait ({})",
            h.inherited_ranks.len(),
            hops.join(", ")
        );
    }
    let clocks: Vec<String> = h
        .hosts
        .iter()
        .take(8)
        .map(|x| format!("{} {:+.1}", x.name, x.clock_offset_ns as f64 / 1e3))
        .collect();
    let more = if h.hosts.len() > 8 { format!(" … ({} hosts)", h.hosts.len()) } else { String::new() };
    let _ = writeln!(out, "host clock offsets (µs): {}{more}", clocks.join(", "));
    let _ = writeln!(
        out,
        "{:.1} MB uncompressed in {:.2} s ({:.0} MB/s)",
        mb(total),
        gen_secs,
        mb(total) / gen_secs.max(1e-9)
    );
    out
}

/// `--merged`: every rank's document made in memory, merged into one file
/// ([`synth::merged::merge`]), and the manifest with its `merged` truth.
fn run_merged(a: &Args, cfg: &SynthConfig, ranks: u32, named: bool, t0: Instant) -> anyhow::Result<u8> {
    let docs =
        synth::write_ranks(cfg, (0..ranks).map(|_| Vec::new()).collect()).context("generating traces")?;
    let docs: Vec<Vec<u8>> = docs.into_iter().map(|(d, _)| d).collect();
    let mut man = synth::manifest(cfg);
    let offsets: Vec<i64> = man.ranks.iter().map(|r| r.clock_offset_ns).collect();
    let merged = synth::merged::merge(&docs, &offsets, named).context("merging the ranks")?;
    let name = if a.gzip { "job.pt.trace.json.gz" } else { "job.pt.trace.json" };
    let path = a.out.join(name);
    let f = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    let mut sink = if a.gzip {
        Sink::Gzip(GzEncoder::new(BufWriter::new(f), Compression::default()))
    } else {
        Sink::Plain(BufWriter::new(f))
    };
    sink.write_all(&merged).with_context(|| format!("writing {}", path.display()))?;
    sink.finish().with_context(|| format!("finishing {}", path.display()))?;
    man.merged =
        Some(synth::merged::ManifestMerged { file: name.to_string(), ranks, pid_is_rank: true, named });
    let man_path = a.out.join("manifest.json");
    write_manifest(&man_path, &man)?;
    crate::out::emit(&format!(
        "{}  {:.1} MB: {ranks} ranks in one file (pid = rank{}) in {:.2} s\n{}  ground truth\n",
        path.display(),
        mb(merged.len() as u64),
        if named { ", processes named `rank N`" } else { "" },
        t0.elapsed().as_secs_f64(),
        man_path.display()
    ))?;
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
