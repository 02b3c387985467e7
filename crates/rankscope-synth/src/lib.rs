//! Deterministic generator of realistic Kineto-like multi-rank training traces
//! (`rankscope synth`).
//!
//! It simulates a data-parallel (DDP) job training a GPT-style decoder on H100s and writes, per
//! rank, the Chrome-trace JSON document the PyTorch profiler (Kineto) would have written:
//! `schemaVersion`, `deviceProperties`, `distributedInfo` (with `pg_config`), `traceEvents`,
//! `traceName`, `displayTimeUnit`, `baseTimeNanoseconds`, in Kineto's own text layout and event
//! order (all CPU ops of the autograd thread, then of the main thread, then CUDA runtime calls and
//! GPU activities, then metadata). Uses: the ingest benchmark, the app's demo, and ground truth
//! for the analyses (clock alignment, stragglers, small buckets, exposed communication).
//!
//! What a step contains, per rank: `ProfilerStep#N`; the DataLoader's `__next__` and a pinned
//! host-to-device copy; `Optimizer.zero_grad`; `## forward ##` > `DistributedDataParallel.forward`
//! with `aten::*` ops launching kernels on stream 7; `## backward ##` while the autograd thread
//! runs `autograd::engine::evaluate_function: XBackward0` ops (linked to their forward ops by
//! `fwdbwd` flows and `Sequence number`) and DDP's gradient hooks, which launch one all_reduce per
//! bucket (`c10d::allreduce_` > `record_param_comms` > `nccl:all_reduce` > `cudaLaunchKernelExC`
//! of `ncclDevKernel_AllReduce_Sum_f32_RING_LL` on NCCL stream 40, with collective args and
//! per-process-group `Seq`); `Optimizer.step#AdamW.step` (fused AdamW kernels, after the compute
//! stream waited for the last bucket); an all_reduce of the loss on a second process group
//! (stream 48); `aten::item` with a device-to-host copy and a `cudaStreamSynchronize`. Every
//! launch has an `ac2g` flow pair (`s` at the runtime call, `f` with `bp: "e"` at the GPU event,
//! `id` = correlation). `gpu_user_annotation` `ProfilerStep#N` marks the step on the GPU.
//!
//! **Collectives rendezvous**: a rank's NCCL kernel starts when the rank arrives and ends when the
//! last rank has arrived plus the transfer time (`α + 2(N−1)/N · S / busbw`), within 2.5 µs on all
//! ranks; so starts spread by arrival while ends agree, as in real multi-rank traces.
//!
//! **Clocks**: all ranks are simulated on one true clock; rank r's file shows true time plus
//! its clock offset (`clock_offset_ns` in the [`Manifest`]). Timestamps are µs with three decimals
//! relative to `baseTimeNanoseconds` (absolute ns = base + ts·1000).
//!
//! **Determinism**: one splitmix64 stream per (rank, purpose), integer arithmetic only, no hash
//! maps: the same [`SynthConfig`] gives the same bytes on every platform, whichever ranks are
//! written and in which order.
//!
//! **Scenarios** ([`Scenario`], `rankscope synth --scenario NAME`; `docs/synth.md` has the full
//! table): presets with one known, injected cause each, for tests of the diagnosis. They start
//! from one healthy 4-rank job and switch on knobs that are all off by default (so the demo
//! above is unchanged, byte for byte):
//! - DDP causes: `host_stall` (a `record_function` annotation with nothing inside, in
//!   `## forward ##`, on one rank), `slow_dataloader` (one rank's DataLoader `__next__` k×
//!   longer), `small_buckets` (18 buckets of 1–4 MiB), `uneven_batch` (one rank's batch k×:
//!   longer kernels *and* larger `Input Dims`), `slow_gpu` (slower kernels, same shapes),
//!   `host_sync` (`.item()` syncs in forward on every rank); and two with nothing to find:
//!   `baseline`, `good_overlap`.
//! - `all_to_all`: an all_to_all whose kernels are `ncclDevKernel_SendRecv` (sim `CollKind`).
//! - Hangs (`hang_skipped_collective`, `early_exit`; [`Hang`]): collectives are matched by
//!   order per process group, as NCCL does; a collective some member never reaches makes the
//!   others' kernels run until the process-group timeout, and each stuck rank's trace ends when
//!   its watchdog fires (events that had not begun are gone, running ones are cut there).
//! - Pipelines (`pipeline_*`; [`Pipeline`], module `sim::pipe`): the schedules, annotation
//!   names and point-to-point traffic of `torch.distributed.pipelining`, with the GPU work of all
//!   ranks placed together so the bubbles fall where the schedule puts them.
//!
//! The [`Manifest`]'s `injected` block ([`Injected`]) names the cause, its ranks, where it is and
//! how big; the per rank × step truth (stall, data loading, syncs, GPU idle, waits, hang, per
//! stage bubbles) is beside it.

use std::io::{self, Write};

mod config;
mod emit;
mod hybrid;
mod manifest;
pub mod merged;
mod model;
mod plan;
mod rng;
mod sanitize;
mod scenario;
mod shapes;
mod sim;

pub use config::{
    AllToAll, Burst, Hang, HangKind, HostStall, HostSync, PipeAnnotations, Pipeline, RankFactor, Schedule,
    SynthConfig, SynthError,
};
pub use hybrid::{
    parse_layout, DpCollective, GroupNaming, Hybrid, HybridCause, ManifestChainHop, ManifestHost,
    ManifestHybrid, ManifestHybridCause, ManifestHybridColl, ManifestHybridGroup, ManifestHybridRank,
    ManifestLayout, ManifestWait, Role,
};
pub use manifest::{
    manifest, Manifest, ManifestCollRef, ManifestCollective, ManifestP2p, ManifestPipeline, ManifestRank,
    ManifestStage,
};
use plan::Plan;
pub use rng::Rng;
pub use scenario::{Cause, Injected, Scenario};
use sim::{Class, JobSim};

/// Version of the [`Manifest`] format (bump on any incompatible change).
pub const MANIFEST_VERSION: u32 = 1;

/// `baseTimeNanoseconds` of every generated file (whole seconds, as Kineto writes it).
pub const BASE_TIME_NS: i64 = 1_716_400_000_000_000_000;

/// True time (ns after [`BASE_TIME_NS`]) at which the profiler starts recording.
pub(crate) const TRACE_START_NS: i64 = 4_512_093_771_204_113;

/// Simulates the job three times (one pass per event class, to reproduce Kineto's event order)
/// and writes the listed ranks' documents. Returns each writer with the bytes written to it.
fn generate<W: Write>(plan: &Plan, outs: Vec<(u32, W)>) -> io::Result<Vec<(W, u64)>> {
    let fmts: Vec<emit::RankFmt> = outs.iter().map(|(r, _)| emit::RankFmt::new(plan, *r)).collect();
    let mut outs: Vec<(u32, emit::Out<W>)> = outs.into_iter().map(|(r, w)| (r, emit::Out::new(w))).collect();
    for ((_, o), f) in outs.iter_mut().zip(&fmts) {
        emit::header(o, plan, f);
    }
    for class in [Class::Autograd, Class::Main, Class::Activity] {
        let mut job = JobSim::new(plan, false);
        for s in 0..plan.steps {
            job.step(s);
            let step_no = plan.cfg.first_step.saturating_add(s);
            for ((r, o), f) in outs.iter_mut().zip(&fmts) {
                // A rank that exited or hung in an earlier step writes no more steps.
                if let Some(rs) = job.ranks.get(*r as usize).filter(|rs| rs.active) {
                    emit::step(o, plan, f, rs, class, step_no);
                }
                o.flush_if_big()?;
            }
        }
        if class == Class::Activity {
            for ((r, o), f) in outs.iter_mut().zip(&fmts) {
                if let Some(rs) = job.ranks.get(*r as usize) {
                    emit::trailer(o, plan, f, rs);
                }
            }
        }
    }
    outs.into_iter().map(|(_, o)| o.finish()).collect()
}

/// A sanitized configuration made ready to simulate: a DDP or pipeline job, or a hybrid one.
enum Prepared {
    Ddp(Box<Plan>),
    Hybrid(Box<hybrid::HPlan>),
}

fn prepare(cfg: &SynthConfig) -> Result<Prepared, SynthError> {
    let (cfg, problems) = cfg.sanitized();
    if !problems.is_empty() {
        return Err(SynthError::InvalidConfig(problems.join("; ")));
    }
    // Sanitizing a valid config changes only what it derives (`bucket_count` from
    // `bucket_sizes`, `ranks` from a layout).
    Ok(match cfg.hybrid {
        Some(_) => Prepared::Hybrid(Box::new(hybrid::HPlan::new(&cfg))),
        None => Prepared::Ddp(Box::new(Plan::resolve(&cfg))),
    })
}

/// Writes rank `rank`'s trace document to `out`, streaming (memory stays bounded by one step of
/// every rank). Returns the bytes written. Simulates every rank (collectives need them all); to
/// write many ranks use [`write_ranks`], which simulates once for all.
pub fn write_rank<W: Write>(cfg: &SynthConfig, rank: u32, out: W) -> io::Result<u64> {
    let prepared = prepare(cfg)?;
    let ranks = match &prepared {
        Prepared::Ddp(plan) => plan.cfg.ranks,
        Prepared::Hybrid(hp) => hp.cfg.ranks,
    };
    if rank >= ranks {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("rank {rank} is not in the job (ranks = {ranks})"),
        ));
    }
    let mut done = match prepared {
        Prepared::Ddp(plan) => generate(&plan, vec![(rank, out)])?,
        Prepared::Hybrid(hp) => hybrid::write(&hp, vec![(rank, out)])?,
    };
    Ok(done.pop().map_or(0, |(_, n)| n))
}

/// Writes every rank's document in one pass: `outs[r]` receives rank r (`outs.len()` must equal
/// `cfg.ranks`, the layout's world size for a hybrid job). Returns each writer (so it can be
/// finished, e.g. a gzip encoder) with its byte count.
pub fn write_ranks<W: Write>(cfg: &SynthConfig, outs: Vec<W>) -> io::Result<Vec<(W, u64)>> {
    let prepared = prepare(cfg)?;
    let ranks = match &prepared {
        Prepared::Ddp(plan) => plan.cfg.ranks,
        Prepared::Hybrid(hp) => hp.cfg.ranks,
    };
    if outs.len() != ranks as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} writers for {ranks} ranks", outs.len()),
        ));
    }
    let outs = (0..ranks).zip(outs).collect();
    match prepared {
        Prepared::Ddp(plan) => generate(&plan, outs),
        Prepared::Hybrid(hp) => hybrid::write(&hp, outs),
    }
}

/// Writes the listed ranks' documents (`(rank, writer)`, any subset in any order): the same
/// bytes as [`write_ranks`] gives them, so a caller can write a large job in batches of files
/// (every rank is simulated for each call). Returns each writer with its byte count.
pub fn write_some<W: Write>(cfg: &SynthConfig, outs: Vec<(u32, W)>) -> io::Result<Vec<(W, u64)>> {
    let prepared = prepare(cfg)?;
    let ranks = match &prepared {
        Prepared::Ddp(plan) => plan.cfg.ranks,
        Prepared::Hybrid(hp) => hp.cfg.ranks,
    };
    if let Some((r, _)) = outs.iter().find(|(r, _)| *r >= ranks) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("rank {r} is not in the job (ranks = {ranks})"),
        ));
    }
    match prepared {
        Prepared::Ddp(plan) => generate(&plan, outs),
        Prepared::Hybrid(hp) => hybrid::write(&hp, outs),
    }
}

/// The number of steps each rank's file holds (resolves `target_bytes`).
pub fn resolved_steps(cfg: &SynthConfig) -> u32 {
    let cfg = cfg.sanitized().0;
    if cfg.hybrid.is_some() {
        return cfg.steps;
    }
    Plan::resolve(&cfg).steps
}

/// The world size `cfg` describes (the layout's for a hybrid job), once sanitized.
pub fn world_size(cfg: &SynthConfig) -> u32 {
    cfg.sanitized().0.ranks
}

/// The conventional file name of rank `rank`'s trace.
pub fn file_name(rank: u32, gzip: bool) -> String {
    if gzip {
        format!("rank{rank}.pt.trace.json.gz")
    } else {
        format!("rank{rank}.pt.trace.json")
    }
}
