//! Hybrid-parallel GPU jobs (`SynthConfig::hybrid`; `rankscope synth --layout tp=8,pp=4,dp=2`):
//! tensor × context × expert × data × pipeline parallel training of a GPT-style model on H100
//! hosts of `gpus_per_node` GPUs, written as recent PyTorch / Kineto writes it, with one known
//! cause and its exact truth in the manifest (`Manifest::hybrid`).
//!
//! **Layout** ([`layout`]): Megatron-LM's rank order (tp fastest, then cp, then ep inside dp,
//! then dp, then pp); every process group the framework creates, named by torch's global counter
//! in creation order and described as Megatron (`TENSOR_MODEL_PARALLEL_GROUP`, …) or torchtitan
//! (`mesh_tp`, …) describes it; hosts `node00`, `node01`, … with one clock each.
//!
//! **A step** ([`program`]), per rank, as Megatron-LM's `forward_backward_pipelining_without_
//! interleaving` (1F1B) or an all-forward-then-all-backward schedule (GPipe) runs it:
//! micro-batches received from the previous stage and sent to the next with `isend`/`irecv` on
//! the pipeline group (Megatron's `_p2p_ops` order: even stages send first, odd ones receive
//! first; with two stages one direction uses the default group); per transformer layer two
//! activation-sized all_reduces on the tensor group in forward and two in backward (the latter
//! overlapped with the weight-gradient GEMMs); with cp > 1 the attention runs as a ring of KV
//! sends and receives in the context group; with ep > 1 every layer's MLP is a mixture of experts
//! whose tokens travel by `all_to_all_single` with uneven split sizes on the expert group; then
//! the gradients' reduce-scatter (distributed optimizer) or all_reduce in buckets on the
//! data-parallel group (with cp: data × context), the gradient norm's all_reduce on the model
//! group and its `.item()`, the optimizer, the parameters' all-gather and a closing
//! `torch.cuda.synchronize()`.
//!
//! **Matching** ([`place`]): the CPU side of every rank is simulated up to a synchronization; then
//! the GPU work of all ranks is placed together. Each stream runs its work in order; an NCCL
//! kernel starts when its rank arrives (launched, the compute work issued before it done, the
//! previous kernel on its stream done) and ends on every member at the same true instant, the
//! last arrival plus the transfer, plus 0–3 µs per member: members that arrive early wait inside
//! the kernel. A send and its receive end together likewise.
//!
//! **Truth** ([`truth`]): the layout (every group with its name, role and ranks), each host's
//! clock offset, the cause, its origin ranks, the waits (who waited for whom, through which
//! group), the chain from the origin (the ranks that only inherit a wait) and the finding id a
//! diagnosis should put first.

use serde::{Deserialize, Serialize};

use crate::Schedule;

mod emit;
pub(crate) mod layout;
mod model;
mod place;
mod program;
mod rank;
mod run;
mod truth;

pub use layout::Role;
pub(crate) use rank::StepStats;

/// GPU kernels, copies and memsets of rank `r`'s last step.
pub(crate) fn gpu_events(r: &rank::RankRun) -> u32 {
    let n = r.items.iter().filter(|it| !matches!(it.kind, rank::ItemKind::WaitOn(_))).count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Collectives (not sends or receives) of rank `r`'s last step.
pub(crate) fn collectives(r: &rank::RankRun) -> u32 {
    u32::try_from(r.ops.iter().filter(|o| !o.kind.is_p2p()).count()).unwrap_or(u32::MAX)
}
pub(crate) use run::{manifest_parts, write, HPlan};
pub use truth::{
    ManifestChainHop, ManifestHost, ManifestHybrid, ManifestHybridCause, ManifestHybridColl,
    ManifestHybridGroup, ManifestHybridRank, ManifestLayout, ManifestWait,
};

/// A hybrid-parallel job. World size = tp × cp × dp × pp (64 to 1,024 ranks in the presets
/// of the docs; 2 to 4,096 accepted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Hybrid {
    /// Tensor-parallel size (ranks of a tensor group, consecutive ranks).
    pub tp: u32,
    /// Pipeline stages.
    pub pp: u32,
    /// Data-parallel replicas.
    pub dp: u32,
    /// Context-parallel size (a ring of KV exchanges in every attention).
    pub cp: u32,
    /// Expert-parallel size (inside dp × cp; every layer's MLP is a mixture of experts when > 1).
    pub ep: u32,
    /// `1f1b` (Megatron's default) or `gpipe`; interleaved schedules are not generated here.
    pub schedule: Schedule,
    pub micro_batches: u32,
    /// Transformer layers on each pipeline stage.
    pub layers_per_stage: u32,
    /// Model width, sequence length (tokens per micro-batch sample) and micro-batch size.
    pub hidden: u64,
    pub seq_len: u64,
    pub micro_batch_size: u64,
    /// Group descriptions and creation order: Megatron-LM's or torchtitan's DeviceMesh.
    pub naming: GroupNaming,
    /// The data-parallel gradient collective: reduce-scatter (distributed optimizer, then an
    /// all-gather of the parameters after the optimizer) or all_reduce (plain DDP).
    pub dp_collective: DpCollective,
    /// Gradient buckets (one collective each).
    pub grad_buckets: u32,
    /// Issue each bucket's collective as soon as its gradients are ready in the last
    /// micro-batch's backward (Megatron's `--overlap-grad-reduce`), instead of after the
    /// schedule.
    pub overlap_grad_reduce: bool,
    /// Bus bandwidth (GB/s) of collectives inside one host (NVLink) and across hosts (the NIC).
    pub nvlink_busbw_gbps: f64,
    pub net_busbw_gbps: f64,
    /// Bound of each host's random clock offset, ns (offsets are drawn from about 1 µs upward).
    pub host_clock_max_ns: i64,
    /// The one cause of slowness in the job.
    pub cause: HybridCause,
}

impl Default for Hybrid {
    fn default() -> Self {
        Hybrid {
            tp: 2,
            pp: 2,
            dp: 2,
            cp: 1,
            ep: 1,
            schedule: Schedule::OneFOneB,
            micro_batches: 8,
            layers_per_stage: 2,
            hidden: 8192,
            seq_len: 4096,
            micro_batch_size: 1,
            naming: GroupNaming::Megatron,
            dp_collective: DpCollective::ReduceScatter,
            grad_buckets: 2,
            overlap_grad_reduce: true,
            nvlink_busbw_gbps: 360.0,
            net_busbw_gbps: 40.0,
            host_clock_max_ns: 30_000_000,
            cause: HybridCause::None,
        }
    }
}

/// Whose names and descriptions the process groups get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupNaming {
    /// `parallel_state.initialize_model_parallel`: `TENSOR_MODEL_PARALLEL_GROUP`, ….
    Megatron,
    /// torchtitan's `init_device_mesh`: `mesh_tp`, `mesh_pp`, ….
    Torchtitan,
}

/// The data-parallel gradient collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DpCollective {
    ReduceScatter,
    AllReduce,
}

/// The cause injected into a hybrid job (one per job).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum HybridCause {
    /// Healthy: nothing to find.
    None,
    /// `rank` sleeps `ns` on the host at the start of every step, inside a `record_function`
    /// annotation `name` with no op inside, before it issues any GPU work: the delay starts
    /// there and travels to its tensor partners (inside their all_reduces), to the next stage
    /// (through its receives) and to its data-parallel peers (in the gradient collective).
    HostStall {
        rank: u32,
        ns: i64,
        #[serde(default = "default_stall_name")]
        name: String,
    },
    /// Pipeline stage `stage` holds `extra_layers` more transformer layers than the others.
    SlowStage { stage: u32, extra_layers: u32 },
    /// Tensor group `group` (ranks `group·tp ..`) spans two hosts (its second half swapped with
    /// ranks of the neighbouring host): its all_reduces run at the network's bandwidth.
    TpSpansHosts { group: u32 },
    /// In `rank`'s expert group, every member routes `share` of its tokens to `rank` (the rest
    /// evenly to the others): bigger all_to_all splits into it, longer expert compute on it.
    ExpertImbalance { rank: u32, share: f64 },
}

fn default_stall_name() -> String {
    "straggler_sleep".to_string()
}

impl HybridCause {
    /// The id `--cause` and the manifest use.
    pub fn name(&self) -> &'static str {
        match self {
            HybridCause::None => "none",
            HybridCause::HostStall { .. } => "host_stall",
            HybridCause::SlowStage { .. } => "slow_stage",
            HybridCause::TpSpansHosts { .. } => "tp_spans_hosts",
            HybridCause::ExpertImbalance { .. } => "expert_imbalance",
        }
    }

    /// Parses `--cause`: `none`, `host_stall:rank=5,ms=120[,name=X]`,
    /// `slow_stage:stage=2,extra_layers=1`, `tp_spans_hosts:group=3`,
    /// `expert_imbalance:rank=5,share=0.6`.
    pub fn parse(text: &str) -> Result<HybridCause, String> {
        let (kind, rest) = text.split_once(':').unwrap_or((text, ""));
        let mut kv = Vec::new();
        for part in rest.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| format!("{part:?} is not key=value"))?;
            kv.push((k.trim(), v.trim()));
        }
        let get = |k: &str| kv.iter().find(|x| x.0 == k).map(|x| x.1);
        let num = |k: &str| -> Result<f64, String> {
            let v = get(k).ok_or_else(|| format!("{kind} needs {k}="))?;
            v.parse::<f64>().ok().filter(|x| x.is_finite()).ok_or_else(|| format!("{k}={v} is not a number"))
        };
        let int = |k: &str| -> Result<u32, String> {
            let v = get(k).ok_or_else(|| format!("{kind} needs {k}="))?;
            v.parse::<u32>().map_err(|_| format!("{k}={v} is not a whole number"))
        };
        let known: &[&str] = match kind {
            "none" => &[],
            "host_stall" => &["rank", "ms", "name"],
            "slow_stage" => &["stage", "extra_layers"],
            "tp_spans_hosts" => &["group"],
            "expert_imbalance" => &["rank", "share"],
            _ => {
                return Err(format!(
                    "unknown cause {kind:?}; one of: none, host_stall, slow_stage, tp_spans_hosts, expert_imbalance"
                ))
            }
        };
        if let Some((k, _)) = kv.iter().find(|(k, _)| !known.contains(k)) {
            let takes = if known.is_empty() { "nothing".to_string() } else { known.join(", ") };
            return Err(format!("{kind} takes {takes}; not {k}"));
        }
        Ok(match kind {
            "host_stall" => HybridCause::HostStall {
                rank: int("rank")?,
                ns: (num("ms")? * 1e6).round() as i64,
                name: get("name").map_or_else(default_stall_name, str::to_string),
            },
            "slow_stage" => HybridCause::SlowStage {
                stage: int("stage")?,
                extra_layers: if get("extra_layers").is_some() { int("extra_layers")? } else { 1 },
            },
            "tp_spans_hosts" => {
                HybridCause::TpSpansHosts { group: if get("group").is_some() { int("group")? } else { 0 } }
            }
            "expert_imbalance" => HybridCause::ExpertImbalance {
                rank: int("rank")?,
                share: if get("share").is_some() { num("share")? } else { 0.6 },
            },
            _ => HybridCause::None,
        })
    }
}

/// Parses `--layout`: `tp=8,pp=4,dp=2[,cp=2][,ep=4]` into `h` (the other fields kept).
pub fn parse_layout(text: &str, h: &mut Hybrid) -> Result<(), String> {
    let mut seen = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) =
            part.split_once('=').ok_or_else(|| format!("{part:?} is not dim=size (tp=8,pp=4,dp=2)"))?;
        let n: u32 = v.trim().parse().map_err(|_| format!("{part:?}: {v:?} is not a whole number"))?;
        let slot = match k.trim() {
            "tp" => &mut h.tp,
            "pp" => &mut h.pp,
            "dp" => &mut h.dp,
            "cp" => &mut h.cp,
            "ep" => &mut h.ep,
            other => return Err(format!("unknown dimension {other:?}; tp, pp, dp, cp or ep")),
        };
        *slot = n;
        seen.push(k.trim().to_string());
    }
    for d in ["tp", "pp", "dp"] {
        if !seen.iter().any(|s| s == d) {
            return Err(format!("--layout needs {d}= (e.g. tp=8,pp=4,dp=2)"));
        }
    }
    Ok(())
}

impl Hybrid {
    pub fn world(&self) -> u64 {
        u64::from(self.tp) * u64::from(self.cp) * u64::from(self.dp) * u64::from(self.pp)
    }

    /// Brings every value into range, with a note per change (`SynthConfig::sanitized`).
    pub(crate) fn sanitize(&mut self, gpus_per_node: u32, fix: &mut impl FnMut(bool, String)) {
        for (name, v) in [
            ("tp", &mut self.tp),
            ("pp", &mut self.pp),
            ("dp", &mut self.dp),
            ("cp", &mut self.cp),
            ("ep", &mut self.ep),
        ] {
            fix((1..=1024).contains(v), format!("hybrid.{name} {v} not in 1..=1024"));
            *v = (*v).clamp(1, 1024);
        }
        let world = self.world();
        fix((2..=4096).contains(&world), format!("hybrid world size tp·cp·dp·pp = {world} not in 2..=4096"));
        if world > 4096 {
            self.dp = 1;
            self.cp = 1;
            self.pp = self.pp.min(64);
            self.tp = self.tp.min(64);
        }
        if self.world() < 2 {
            self.dp = 2;
        }
        let cpdp = self.cp * self.dp;
        fix(cpdp % self.ep == 0, format!("hybrid.ep {} must divide cp·dp = {cpdp}", self.ep));
        if cpdp % self.ep != 0 {
            self.ep = 1;
        }
        fix(
            self.schedule != Schedule::Interleaved1F1B,
            "hybrid.schedule: 1f1b or gpipe (interleaved is not generated)".into(),
        );
        if self.schedule == Schedule::Interleaved1F1B {
            self.schedule = Schedule::OneFOneB;
        }
        let m = self.micro_batches;
        fix((1..=256).contains(&m), format!("hybrid.micro_batches {m} not in 1..=256"));
        self.micro_batches = m.clamp(1, 256);
        let l = self.layers_per_stage;
        fix((1..=32).contains(&l), format!("hybrid.layers_per_stage {l} not in 1..=32"));
        self.layers_per_stage = l.clamp(1, 32);
        let h = self.hidden;
        let ok = (256..=65_536).contains(&h) && h % u64::from(self.tp) == 0;
        fix(ok, format!("hybrid.hidden {h} must be in 256..=65536 and a multiple of tp"));
        if !ok {
            self.hidden = 8192 / u64::from(self.tp).max(1) * u64::from(self.tp);
        }
        let s = self.seq_len;
        let ok = (128..=1 << 20).contains(&s) && s % (2 * u64::from(self.cp)) == 0;
        fix(ok, format!("hybrid.seq_len {s} must be in 128..=2^20 and a multiple of 2·cp"));
        if !ok {
            self.seq_len = 4096 * u64::from(self.cp);
        }
        fix(
            (1..=64).contains(&self.micro_batch_size),
            format!("hybrid.micro_batch_size {} not in 1..=64", self.micro_batch_size),
        );
        self.micro_batch_size = self.micro_batch_size.clamp(1, 64);
        fix(
            (1..=64).contains(&self.grad_buckets),
            format!("hybrid.grad_buckets {} not in 1..=64", self.grad_buckets),
        );
        self.grad_buckets = self.grad_buckets.clamp(1, 64);
        for (name, bw) in
            [("nvlink_busbw_gbps", &mut self.nvlink_busbw_gbps), ("net_busbw_gbps", &mut self.net_busbw_gbps)]
        {
            let ok = bw.is_finite() && *bw >= 0.001;
            fix(ok, format!("hybrid.{name} {bw} must be a positive number"));
            if !ok {
                *bw = 40.0;
            }
        }
        let c = self.host_clock_max_ns;
        fix((0..=1_000_000_000_000).contains(&c), format!("hybrid.host_clock_max_ns {c} not in 0..=1e12"));
        self.host_clock_max_ns = c.clamp(0, 1_000_000_000_000);
        self.sanitize_cause(gpus_per_node, fix);
    }

    fn sanitize_cause(&mut self, gpus_per_node: u32, fix: &mut impl FnMut(bool, String)) {
        let world = self.tp * self.cp * self.dp * self.pp;
        let ok = match &mut self.cause {
            HybridCause::None => true,
            HybridCause::HostStall { rank, ns, name } => {
                let name_ok =
                    !name.is_empty() && name.chars().all(|ch| !ch.is_control() && ch != '"' && ch != '\\');
                fix(name_ok, format!("hybrid.cause.name {name:?} must be non-empty, without quotes, backslashes or control characters"));
                if !name_ok {
                    *name = default_stall_name();
                }
                fix((0..=100_000_000_000).contains(ns), format!("hybrid.cause.ns {ns} not in 0..=1e11"));
                *ns = (*ns).clamp(0, 100_000_000_000);
                let ok = *rank < world;
                fix(ok, format!("hybrid.cause.rank {rank} is not a rank (world = {world})"));
                ok
            }
            HybridCause::SlowStage { stage, extra_layers } => {
                fix(
                    (1..=32).contains(extra_layers),
                    format!("hybrid.cause.extra_layers {extra_layers} not in 1..=32"),
                );
                *extra_layers = (*extra_layers).clamp(1, 32);
                let ok = self.pp >= 2 && *stage < self.pp;
                fix(
                    ok,
                    format!("hybrid.cause.stage {stage} is not a stage of pp = {} (needs pp ≥ 2)", self.pp),
                );
                ok
            }
            HybridCause::TpSpansHosts { group } => {
                let groups = world / self.tp.max(1);
                let ok = self.tp >= 2 && *group < groups && world > gpus_per_node && self.tp <= gpus_per_node;
                fix(
                    ok,
                    format!(
                        "hybrid.cause.group {group}: needs tp ≥ 2, tp ≤ gpus_per_node ({gpus_per_node}), more than one host and a group below {groups}"
                    ),
                );
                ok
            }
            HybridCause::ExpertImbalance { rank, share } => {
                let s_ok = share.is_finite() && (0.0..=1.0).contains(share);
                fix(s_ok, format!("hybrid.cause.share {share} not in 0..=1"));
                *share = if share.is_finite() { share.clamp(0.0, 1.0) } else { 0.6 };
                let ok = self.ep >= 2 && *rank < world;
                fix(ok, format!("hybrid.cause expert_imbalance needs ep ≥ 2 and a rank below {world}"));
                ok
            }
        };
        if !ok {
            self.cause = HybridCause::None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cause_and_layout_flags_parse() {
        assert_eq!(
            HybridCause::parse("host_stall:rank=5,ms=120"),
            Ok(HybridCause::HostStall { rank: 5, ns: 120_000_000, name: "straggler_sleep".into() })
        );
        assert_eq!(HybridCause::parse("none"), Ok(HybridCause::None));
        assert_eq!(
            HybridCause::parse("slow_stage:stage=2"),
            Ok(HybridCause::SlowStage { stage: 2, extra_layers: 1 })
        );
        assert!(HybridCause::parse("host_stall:rank=5").is_err());
        assert!(HybridCause::parse("host_stall:rank=5,ms=1,x=2").is_err());
        assert!(HybridCause::parse("melted").is_err());
        let mut h = Hybrid::default();
        assert_eq!(parse_layout("tp=8,pp=4,dp=2,ep=2", &mut h), Ok(()));
        assert_eq!((h.tp, h.pp, h.dp, h.cp, h.ep), (8, 4, 2, 1, 2));
        assert!(parse_layout("tp=8,pp=4", &mut h).is_err());
        assert!(parse_layout("tp=8,pp=4,dp=x", &mut h).is_err());
    }
}
