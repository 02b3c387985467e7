//! The ground truth of a generated job ([`Manifest`], `manifest.json`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::hybrid::{self, HPlan};
use crate::plan::Plan;
use crate::sim::{self, CollKind, JobSim};
use crate::{
    emit, file_name, scenario, Cause, HybridCause, Injected, ManifestHybrid, PipeAnnotations, Scenario,
    Schedule, SynthConfig, MANIFEST_VERSION,
};

/// Ground truth of a generated job: what the analyses should find.
///
/// Times are ns of the shared true clock after `base_time_ns`; rank r's trace shows
/// `true + clock_offset_ns[r]` (as µs). Definitions:
/// - `compute_busy_ns`: time the compute stream (7) runs anything (kernels, memcpy, memset).
/// - `comm_busy_ns`: union of the rank's NCCL kernel intervals.
/// - `exposed_comm_ns`: NCCL kernel time during which the compute stream runs nothing, i.e.
///   `|NCCL busy \ compute busy|` within the step. It includes waiting for a late rank at the end
///   of backward, which a trace cannot tell apart from transfer.
/// - `comm_wait_ns`: Σ over the step's collectives of (latest arrival of any rank − own arrival):
///   time this rank's NCCL kernels spent waiting for others (a rank's collectives are serialized
///   on its NCCL stream, so the sum is also the union). A collective that hung counts whole.
///   In a pipeline job: the union over its sends, recvs and all_reduces of [posted, last partner
///   posted).
///
/// `injected` names the cause (see [`Injected`] and `docs/synth.md`); `pipeline` holds a
/// pipeline job's per stage × step truth; the hang truth is in `ranks[].hung_in`,
/// `ranks[].last_completed` and the collectives marked `hung` (with their `absent` ranks).
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    pub manifest_version: u32,
    pub generator: String,
    /// The effective (sanitized) configuration.
    pub config: SynthConfig,
    /// What sanitizing changed (empty for a valid config).
    pub adjustments: Vec<String>,
    pub base_time_ns: i64,
    pub steps: u32,
    /// `ProfilerStep#N` numbers, in order.
    pub step_numbers: Vec<u32>,
    /// Transformer layers of the model (in a pipeline job: over all its stages).
    pub layers: u32,
    /// Parameters whose gradients DDP buckets (gradient-ready points per backward; in a
    /// pipeline job, every parameter of the model).
    pub grad_tensors: u32,
    /// GPU kernels (compute and NCCL) per step and rank (a pipeline job: rank 0's last step).
    pub kernels_per_step: u32,
    /// Collectives per step and rank (bucket all_reduces, the loss all_reduce, the all_to_all;
    /// a pipeline job: its data-parallel all_reduce, if any; its messages are in `pipeline.p2p`).
    pub collectives_per_step: u32,
    /// Size of each DDP bucket all_reduce, in issue order.
    pub bucket_bytes: Vec<u64>,
    /// Duration of each bucket all_reduce once all ranks have arrived.
    pub bucket_transfer_ns: Vec<i64>,
    /// Buckets ready only at the end of backward (their transfer is exposed by construction).
    pub tail_buckets: u32,
    /// Σ transfer of the tail buckets: exposed communication per step on a rank that does not
    /// wait for anyone; ranks waiting for the straggler see more (see `ranks[].exposed_comm_ns`).
    pub designed_exposed_comm_ns: i64,
    pub straggler_rank: Option<u32>,
    pub straggler_delay_ns: i64,
    /// Nominal GPU compute per step (before speed jitter and the straggler's slowdown).
    pub nominal_compute_ns: i64,
    /// The preset the configuration came from, if any.
    pub scenario: Option<Scenario>,
    /// Per stage × step truth of a pipeline job (`pipeline` set), else absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<ManifestPipeline>,
    /// The layout, clocks, cause, waits and chain of a hybrid job (`hybrid` set), else absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hybrid: Option<ManifestHybrid>,
    /// Set by `rankscope synth --merged`: the job is one file ([`crate::merged`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged: Option<crate::merged::ManifestMerged>,
    /// What was injected and where; the per rank × step numbers are in `ranks`.
    pub injected: Injected,
    pub ranks: Vec<ManifestRank>,
    /// Every collective of every step (empty with `collectives_truncated` when there would be
    /// more than 100,000; a pipeline job lists none here, its messages are in `pipeline.p2p`).
    pub collectives: Vec<ManifestCollective>,
    pub collectives_truncated: bool,
}

/// Ground truth of one rank (see [`Manifest`] for the definitions).
#[derive(Debug, Clone, Serialize)]
pub struct ManifestRank {
    pub rank: u32,
    pub file: String,
    pub device: u32,
    pub pid: u64,
    pub main_tid: u64,
    pub autograd_tid: u64,
    pub clock_offset_ns: i64,
    pub is_straggler: bool,
    /// Per step: start of the CPU `ProfilerStep#N` (true time) and its duration.
    pub step_start_ns: Vec<i64>,
    pub step_dur_ns: Vec<i64>,
    pub compute_busy_ns: Vec<i64>,
    pub comm_busy_ns: Vec<i64>,
    pub exposed_comm_ns: Vec<i64>,
    pub comm_wait_ns: Vec<i64>,
    /// `cudaFree` + `cudaMalloc` bursts per step.
    pub malloc_bursts: Vec<u32>,
    /// Sequences in this rank's batch (8; more on the `uneven_batch` rank).
    pub batch: u64,
    /// Per step: duration of the DataLoader's `__next__` annotation.
    pub data_loading_ns: Vec<i64>,
    /// Per step: duration of the injected host-stall annotation (0 on other ranks).
    pub host_stall_ns: Vec<i64>,
    /// Per step: CPU time blocked in the injected mid-forward `cudaStreamSynchronize` calls
    /// (the step's closing `.item()` sync is not counted).
    pub host_sync_ns: Vec<i64>,
    /// Per step: compute-stream idle caused by the injected stall or syncs (from when the GPU
    /// ran out of queued work, or the injection began if later, to the next GPU work).
    pub injected_idle_ns: Vec<i64>,
    /// Steps this rank completed (fewer than `steps` when it exited or hung; a hung step is
    /// in the per-step vectors, cut at the end of the trace).
    pub completed_steps: u32,
    /// True time of the trace's last moment (the profiler's `Record Window End`).
    pub trace_end_ns: i64,
    /// The collective this rank's NCCL kernel was stuck in when its trace ended (`hang`).
    pub hung_in: Option<ManifestCollRef>,
    /// Per process group, the last collective this rank completed.
    pub last_completed: BTreeMap<String, ManifestCollRef>,
}

/// One collective across ranks.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestCollective {
    /// `ProfilerStep#N` number.
    pub step: u32,
    /// Position among the step's collectives.
    pub index: u32,
    pub process_group: String,
    pub seq: u64,
    pub collective: String,
    pub bytes: u64,
    pub transfer_ns: i64,
    /// Per rank, the NCCL kernel's start (the rank's arrival) and end, true time (0 for the
    /// ranks in `absent`).
    pub arrival_ns: Vec<i64>,
    pub end_ns: Vec<i64>,
    /// The rank that arrived last (the lowest such rank on ties), among those that arrived.
    pub last_rank: u32,
    /// It never completed: the ranks that arrived waited until the timeout (`hang`). Written
    /// only when true.
    #[serde(skip_serializing_if = "is_false")]
    pub hung: bool,
    /// Ranks that never reached it (skipped it, exited, or were stuck before it). Written only
    /// when not empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<u32>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Ground truth of a pipeline job. Times are ns of the true clock.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestPipeline {
    pub schedule: Schedule,
    pub stages: u32,
    pub micro_batches: u32,
    pub virtual_stages: u32,
    pub dp: u32,
    pub slow_stage: Option<u32>,
    pub slow_factor: f64,
    pub annotations: PipeAnnotations,
    /// The schedule's bubble fraction: (p−1)/(m+p−1), interleaved (p−1)/(m·v+p−1).
    pub formula_bubble_fraction: f64,
    pub activation_bytes: u64,
    /// Duration of one activation or gradient message once both ends are posted.
    pub p2p_transfer_ns: i64,
    /// The GPU placement could not honour a dependency (never expected; tests assert false).
    pub deadlocked: bool,
    /// Per global rank.
    pub ranks: Vec<ManifestStage>,
    /// Every message between stages (send/recv pair), by step, then by when its first end was
    /// posted.
    pub p2p: Vec<ManifestP2p>,
}

/// One pipeline rank's truth per step.
///
/// - `window_start_ns`, `window_ns`: its pipeline replica's window: the first forward kernel
///   start of any of its stages to the last backward kernel end (the same for every stage of
///   the replica).
/// - `compute_ns`: the rank's compute-stream busy time (union of the step's kernels and copies)
///   inside the window. (An early-finishing last stage may also run its `.item()` copy and the
///   next step's input copy inside the window: a few µs not counted here.)
/// - `bubble_ns` = `window_ns` − `compute_ns`: the time the stage idles inside the window
///   (waiting for a neighbour, and the schedule's fill and drain); `bubble_fraction` =
///   `bubble_ns / window_ns`, to compare with `formula_bubble_fraction`.
/// - `recv_wait_ns`: Σ over its recvs of how long each was posted before the matching send
///   (the blocking wait inside the recv kernels); `send_wait_ns` likewise for its sends.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestStage {
    pub rank: u32,
    /// Its rank in the pipeline (the stage for v = 1) and its data-parallel replica.
    pub pipeline_rank: u32,
    pub replica: u32,
    /// The (virtual) stages it holds: c·p + pipeline_rank.
    pub stages: Vec<u32>,
    pub window_start_ns: Vec<i64>,
    pub window_ns: Vec<i64>,
    pub compute_ns: Vec<i64>,
    pub bubble_ns: Vec<i64>,
    pub bubble_fraction: Vec<f64>,
    pub recv_wait_ns: Vec<i64>,
    pub send_wait_ns: Vec<i64>,
}

/// One message between neighbouring stages.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestP2p {
    /// `ProfilerStep#N` number.
    pub step: u32,
    pub src: u32,
    pub dst: u32,
    pub stage_from: u32,
    pub stage_to: u32,
    pub micro_batch: u32,
    /// `activation` (forward) or `gradient` (backward).
    pub kind: String,
    pub bytes: u64,
    /// The per-edge process group it went over, and each end's `Seq` in it.
    pub process_group: String,
    pub send_seq: u64,
    pub recv_seq: u64,
    /// Each end's NCCL kernel start (posting) and end.
    pub send_start_ns: i64,
    pub recv_start_ns: i64,
    pub send_end_ns: i64,
    pub recv_end_ns: i64,
    pub transfer_ns: i64,
}

/// A collective of one rank, as the hang truth names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ManifestCollRef {
    /// `ProfilerStep#N` number.
    pub step: u32,
    pub process_group: String,
    pub seq: u64,
    pub collective: String,
    pub bytes: u64,
    /// The rank's NCCL kernel start and end (true time).
    pub start_ns: i64,
    pub end_ns: i64,
}

fn pipeline_truth(plan: &Plan, pp: &sim::pipe::PipePlan, t: sim::pipe::PipeTruth) -> ManifestPipeline {
    let c = &pp.cfg;
    let ranks = t
        .ranks
        .iter()
        .enumerate()
        .map(|(g, st)| {
            let g = u32::try_from(g).unwrap_or(0);
            let (pr, d) = pp.coords(g);
            ManifestStage {
                rank: g,
                pipeline_rank: pr,
                replica: d,
                stages: (0..c.virtual_stages).map(|v| v * c.stages + pr).collect(),
                window_start_ns: st.iter().map(|x| x.window_start).collect(),
                window_ns: st.iter().map(|x| x.window).collect(),
                compute_ns: st.iter().map(|x| x.compute).collect(),
                bubble_ns: st.iter().map(|x| x.bubble).collect(),
                bubble_fraction: st.iter().map(|x| x.bubble as f64 / x.window.max(1) as f64).collect(),
                recv_wait_ns: st.iter().map(|x| x.recv_wait).collect(),
                send_wait_ns: st.iter().map(|x| x.send_wait).collect(),
            }
        })
        .collect();
    let p2p = t
        .p2p
        .iter()
        .map(|m| ManifestP2p {
            step: plan.cfg.first_step.saturating_add(m.step),
            src: m.src,
            dst: m.dst,
            stage_from: m.stage_from,
            stage_to: m.stage_to,
            micro_batch: m.mb,
            kind: if m.fwd { "activation" } else { "gradient" }.to_string(),
            bytes: m.bytes,
            process_group: pp.groups.get(m.group).map_or_else(String::new, |g| g.name.clone()),
            send_seq: m.send_seq,
            recv_seq: m.recv_seq,
            send_start_ns: m.send_start,
            recv_start_ns: m.recv_start,
            send_end_ns: m.send_end,
            recv_end_ns: m.recv_end,
            transfer_ns: m.transfer,
        })
        .collect();
    ManifestPipeline {
        schedule: c.schedule,
        stages: c.stages,
        micro_batches: c.micro_batches,
        virtual_stages: c.virtual_stages,
        dp: c.dp,
        slow_stage: c.slow_stage,
        slow_factor: c.slow_factor,
        annotations: c.annotations,
        formula_bubble_fraction: sim::pipe::formula(c),
        activation_bytes: c.activation_bytes,
        p2p_transfer_ns: plan.cfg.collective_latency_ns
            + (c.activation_bytes as f64 / c.p2p_gbps).round() as i64,
        deadlocked: t.deadlocked,
        ranks,
        p2p,
    }
}

/// Ground truth for `cfg` (sanitized first; see [`Manifest::adjustments`]). Simulates the whole
/// job once without writing any trace.
pub fn manifest(cfg: &SynthConfig) -> Manifest {
    let (cfg, adjustments) = cfg.sanitized();
    if cfg.hybrid.is_some() {
        return hybrid_manifest(cfg, adjustments);
    }
    let plan = Plan::resolve(&cfg);
    let mut job = JobSim::new(&plan, true);
    for s in 0..plan.steps {
        job.step(s);
    }
    let steps = job.steps.take().unwrap_or_default();
    let colls = job.colls.take().unwrap_or_default();
    let pipeline = job.pipe.take().zip(plan.pipe.as_ref()).map(|(t, pp)| pipeline_truth(&plan, pp, t));
    let coll_ref = |c: &sim::CollTruth, r: usize| -> Option<ManifestCollRef> {
        Some(ManifestCollRef {
            step: plan.cfg.first_step.saturating_add(c.step),
            process_group: emit::PG_NAMES.get(c.pg).map_or("0", |p| p.0).to_string(),
            seq: c.seq,
            collective: c.kind.collective_name().to_string(),
            bytes: c.bytes,
            start_ns: (*c.arrivals.get(r)?)?,
            end_ns: (*c.ends.get(r)?)?,
        })
    };
    let ranks: Vec<ManifestRank> = job
        .ranks
        .iter()
        .zip(steps)
        .map(|(rs, st)| {
            let ids = plan.rank_ids(rs.rank);
            let r = rs.rank as usize;
            let hung_in = colls.iter().filter(|c| c.hung).find_map(|c| coll_ref(c, r));
            let mut last_completed = BTreeMap::new();
            for c in colls.iter().filter(|c| !c.hung) {
                if let Some(x) = coll_ref(c, r) {
                    last_completed.insert(x.process_group.clone(), x);
                }
            }
            let completed_steps = u32::try_from(st.len()).unwrap_or(0) - u32::from(rs.abort.is_some());
            ManifestRank {
                completed_steps,
                trace_end_ns: rs.trace_end(),
                hung_in,
                last_completed,
                rank: rs.rank,
                file: file_name(rs.rank, false),
                device: ids.device,
                pid: ids.pid,
                main_tid: ids.main_tid,
                autograd_tid: ids.autograd_tid,
                clock_offset_ns: plan.offsets.get(rs.rank as usize).copied().unwrap_or(0),
                is_straggler: plan.straggler == Some(rs.rank),
                step_start_ns: st.iter().map(|s| s.start).collect(),
                step_dur_ns: st.iter().map(|s| s.dur).collect(),
                compute_busy_ns: st.iter().map(|s| s.compute_busy).collect(),
                comm_busy_ns: st.iter().map(|s| s.comm_busy).collect(),
                exposed_comm_ns: st.iter().map(|s| s.exposed_comm).collect(),
                comm_wait_ns: st.iter().map(|s| s.comm_wait).collect(),
                malloc_bursts: st.iter().map(|s| s.malloc_bursts).collect(),
                batch: plan.batch_of(rs.rank),
                data_loading_ns: st.iter().map(|s| s.data_loading).collect(),
                host_stall_ns: st.iter().map(|s| s.host_stall).collect(),
                host_sync_ns: st.iter().map(|s| s.host_sync).collect(),
                injected_idle_ns: st.iter().map(|s| s.injected_idle).collect(),
            }
        })
        .collect();
    let truncated = colls.len() > 100_000;
    let collectives = if truncated {
        Vec::new()
    } else {
        colls
            .into_iter()
            .map(|c| ManifestCollective {
                step: plan.cfg.first_step.saturating_add(c.step),
                index: c.index,
                process_group: emit::PG_NAMES.get(c.pg).map_or("0", |p| p.0).to_string(),
                seq: c.seq,
                collective: c.kind.collective_name().to_string(),
                bytes: c.bytes,
                transfer_ns: c.transfer_ns,
                absent: (0u32..).zip(&c.arrivals).filter(|(_, a)| a.is_none()).map(|(r, _)| r).collect(),
                arrival_ns: c.arrivals.iter().map(|a| a.unwrap_or(0)).collect(),
                end_ns: c.ends.iter().map(|a| a.unwrap_or(0)).collect(),
                last_rank: c.last_rank,
                hung: c.hung,
            })
            .collect()
    };
    let bucket_transfer: Vec<i64> =
        plan.bucket_sizes.iter().map(|&b| plan.transfer_ns(CollKind::AllReduce, b)).collect();
    let tail = plan.tail_buckets as usize;
    let designed = bucket_transfer.iter().rev().take(tail).sum();
    let injected = match &pipeline {
        Some(p) => scenario::pipeline_injected(p),
        None => scenario::injected(&plan, &ranks),
    };
    let is_pipe = pipeline.is_some();
    let kernels_per_step =
        if is_pipe { job.ranks.first().map_or(0, |r| r.kernels) } else { plan.kernels_per_step };
    Manifest {
        manifest_version: MANIFEST_VERSION,
        generator: format!("rankscope synth {}", env!("CARGO_PKG_VERSION")),
        adjustments,
        base_time_ns: plan.base_time_ns,
        steps: plan.steps,
        step_numbers: (0..plan.steps).map(|s| plan.cfg.first_step.saturating_add(s)).collect(),
        layers: plan.pipe.as_ref().map_or(plan.layers, |pp| pp.cfg.stages * pp.cfg.layers_per_stage),
        grad_tensors: plan
            .pipe
            .as_ref()
            .map_or(plan.points, |pp| pp.cfg.stages * pp.cfg.layers_per_stage * 12 + 1),
        kernels_per_step,
        collectives_per_step: if is_pipe {
            plan.pipe.as_ref().map_or(0, |pp| u32::from(pp.cfg.dp > 1))
        } else {
            plan.cfg.bucket_count
                + u32::from(plan.cfg.loss_allreduce)
                + u32::from(plan.cfg.all_to_all.is_some())
        },
        bucket_bytes: if is_pipe { Vec::new() } else { plan.bucket_sizes.clone() },
        bucket_transfer_ns: if is_pipe { Vec::new() } else { bucket_transfer },
        tail_buckets: plan.tail_buckets,
        designed_exposed_comm_ns: designed,
        straggler_rank: plan.straggler,
        straggler_delay_ns: plan.cfg.straggler_delay_ns,
        nominal_compute_ns: plan.nominal_compute_ns,
        scenario: plan.cfg.scenario,
        pipeline,
        hybrid: None,
        merged: None,
        injected,
        ranks,
        collectives,
        collectives_truncated: truncated,
        config: plan.cfg,
    }
}

/// The manifest of a hybrid job: the per rank × step figures in `ranks`, the rest in `hybrid`.
fn hybrid_manifest(cfg: SynthConfig, mut adjustments: Vec<String>) -> Manifest {
    let hp = HPlan::new(&cfg);
    let (hy, stats, runs) = match hybrid::manifest_parts(&hp) {
        Ok(x) => (Some(x.0), x.1, x.2),
        Err(e) => {
            adjustments.push(format!("generation failed: {e}"));
            (None, Vec::new(), Vec::new())
        }
    };
    let first = cfg.first_step;
    let steps = hp.steps;
    let ranks: Vec<ManifestRank> = runs
        .iter()
        .map(|r| {
            let st: &[hybrid::StepStats] = stats.get(r.rank as usize).map_or(&[], Vec::as_slice);
            let host = hp.lay.places.get(r.rank as usize).map_or(0, |x| x.host);
            let zeros = vec![0; st.len()];
            ManifestRank {
                rank: r.rank,
                file: file_name(r.rank, false),
                device: r.device,
                pid: r.pid,
                main_tid: r.tids[0],
                autograd_tid: r.tids[1],
                clock_offset_ns: hp.lay.host_offsets.get(host as usize).copied().unwrap_or(0),
                is_straggler: false,
                step_start_ns: st.iter().map(|s| s.start).collect(),
                step_dur_ns: st.iter().map(|s| s.dur).collect(),
                compute_busy_ns: st.iter().map(|s| s.compute_busy).collect(),
                comm_busy_ns: st.iter().map(|s| s.comm_busy).collect(),
                exposed_comm_ns: st.iter().map(|s| s.exposed_comm).collect(),
                comm_wait_ns: st.iter().map(|s| s.comm_wait).collect(),
                malloc_bursts: vec![0; st.len()],
                batch: hp.h.micro_batch_size * u64::from(hp.h.micro_batches),
                data_loading_ns: zeros.clone(),
                host_stall_ns: st.iter().map(|s| s.host_stall).collect(),
                host_sync_ns: zeros.clone(),
                injected_idle_ns: zeros,
                completed_steps: u32::try_from(st.len()).unwrap_or(0),
                trace_end_ns: r.last_step_end + 2_314_000,
                hung_in: None,
                last_completed: BTreeMap::new(),
            }
        })
        .collect();
    let injected = match &hy {
        Some(h) => Injected {
            cause: match hp.h.cause {
                HybridCause::None => None,
                HybridCause::HostStall { .. } => Some(Cause::HostStall),
                HybridCause::SlowStage { .. } => Some(Cause::PipelineStageImbalance),
                HybridCause::TpSpansHosts { .. } => Some(Cause::TensorGroupSpansHosts),
                HybridCause::ExpertImbalance { .. } => Some(Cause::ExpertImbalance),
            },
            ranks: h.cause.origin_ranks.clone(),
            location: h.cause.location.clone(),
            amount_ns: h.cause.amount_ns,
            notes: vec![format!(
                "hybrid job: expected first finding {}; the layout, clocks, waits and chain are in `hybrid`",
                h.cause.expected_first_finding.unwrap_or("none")
            )],
        },
        None => Injected {
            cause: None,
            ranks: Vec::new(),
            location: String::new(),
            amount_ns: 0,
            notes: Vec::new(),
        },
    };
    let rank0 = runs.first();
    Manifest {
        manifest_version: MANIFEST_VERSION,
        generator: format!("rankscope synth {}", env!("CARGO_PKG_VERSION")),
        adjustments,
        base_time_ns: hp.base_time_ns,
        steps,
        step_numbers: (0..steps).map(|s| first.saturating_add(s)).collect(),
        layers: (0..hp.h.pp).map(|s| hp.layers_of(s)).sum(),
        grad_tensors: 0,
        kernels_per_step: rank0.map_or(0, hybrid::gpu_events),
        collectives_per_step: rank0.map_or(0, hybrid::collectives),
        bucket_bytes: Vec::new(),
        bucket_transfer_ns: Vec::new(),
        tail_buckets: 0,
        designed_exposed_comm_ns: 0,
        straggler_rank: None,
        straggler_delay_ns: 0,
        nominal_compute_ns: 0,
        scenario: cfg.scenario,
        pipeline: None,
        hybrid: hy,
        merged: None,
        injected,
        ranks,
        collectives: Vec::new(),
        collectives_truncated: false,
        config: cfg,
    }
}
