//! The figures behind a finding, by typed key.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! evidence_keys {
    ($($(#[$m:meta])* $var:ident => $s:literal),+ $(,)?) => {
        /// A figure's name in `findings[].evidence` (ns unless the name says otherwise; per
        /// rank and per step unless it says `_max`, `_min` or names a stage). Keys compare by
        /// their names, so the JSON lists them in the order it always has.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EvidenceKey {
            $($(#[$m])* $var,)+
            /// `bubble_share_stage_{n}`: a pipeline stage's bubble share.
            BubbleShareStage(u32),
            /// `compute_ns_stage_{n}`: a pipeline stage's compute per step.
            ComputeNsStage(u32),
        }

        impl EvidenceKey {
            /// Every key without a stage number, in declaration order.
            pub const NAMED: &'static [EvidenceKey] = &[$(EvidenceKey::$var),+];

            /// The name the JSON uses.
            pub fn name(self) -> Cow<'static, str> {
                match self {
                    $(EvidenceKey::$var => Cow::Borrowed($s),)+
                    EvidenceKey::BubbleShareStage(n) => Cow::Owned(format!("bubble_share_stage_{n}")),
                    EvidenceKey::ComputeNsStage(n) => Cow::Owned(format!("compute_ns_stage_{n}")),
                }
            }

            /// The key a name is.
            pub fn parse(s: &str) -> Option<EvidenceKey> {
                match s {
                    $($s => Some(EvidenceKey::$var),)+
                    _ => {
                        let stage = |p: &str| s.strip_prefix(p).and_then(|n| n.parse::<u32>().ok());
                        stage("bubble_share_stage_")
                            .map(EvidenceKey::BubbleShareStage)
                            .or_else(|| stage("compute_ns_stage_").map(EvidenceKey::ComputeNsStage))
                    }
                }
            }
        }
    };
}

evidence_keys! {
    AchievedBusbwGbps => "achieved_busbw_gbps",
    /// The fixed cost per call of the trace's own latency + size / bandwidth fit.
    AlphaNs => "alpha_ns",
    BlockedNs => "blocked_ns",
    BubbleNs => "bubble_ns",
    BubbleShare => "bubble_share",
    BwAlgGbps => "bw_alg_gbps",
    Bytes => "bytes",
    BytesPerCall => "bytes_per_call",
    CallsPerStep => "calls_per_step",
    CommShareMax => "comm_share_max",
    /// How many of the calls run at once on a rank (their summed time over the time any of
    /// them runs: 2 for gloo's two work threads, about 1 on one NCCL stream).
    ConcurrentCalls => "concurrent_calls",
    ComputeNs => "compute_ns",
    /// The share of the steps with a measurable spread in which the rank was late.
    Consistency => "consistency",
    CostNsPerLateStep => "cost_ns_per_late_step",
    CostNsPerStep => "cost_ns_per_step",
    DataLoadingNs => "data_loading_ns",
    /// The hot expert rank's all_to_all volume per step against the median of its group's
    /// other members.
    ExpertVolumeRatio => "expert_volume_ratio",
    /// The trace's exposed communication per step (the worst rank's median over steps).
    ExposedCommNs => "exposed_comm_ns",
    /// Operator instances per step a late rank runs that most other ranks do not, and their
    /// time per step; of that time, its forward's operators run again in backward.
    ExtraOpInstances => "extra_op_instances",
    ExtraOpNs => "extra_op_ns",
    ExtraOpRerunNs => "extra_op_rerun_ns",
    FabricBusbwGbps => "fabric_busbw_gbps",
    /// Transfer per step of the groups that span hosts, and of the same role's groups within
    /// one host.
    InHostTransferNs => "in_host_transfer_ns",
    FixedCostNsPerStep => "fixed_cost_ns_per_step",
    /// 1 when the fixed cost is a lower bound, not a fit: the calls are about one size, so
    /// each call's time beyond the fastest call's throughput is taken as its fixed cost.
    FixedCostBound => "fixed_cost_bound",
    /// 1 when the trace cannot tell the calls' fixed cost (no saving is claimed).
    FixedCostUnknown => "fixed_cost_unknown",
    Fraction => "fraction",
    HiddenTransferShare => "hidden_transfer_share",
    LateSteps => "late_steps",
    /// The longest single operator-free stretch every rank has in a stall's region per step.
    LongestStallNs => "longest_stall_ns",
    MaxCpuBoundRatio => "max_cpu_bound_ratio",
    MaxExposedTransferRatio => "max_exposed_transfer_ratio",
    MaxHostSyncRatio => "max_host_sync_ratio",
    MaxInputRatio => "max_input_ratio",
    MaxJitter => "max_jitter",
    MedianBytes => "median_bytes",
    /// The memory per rank (bytes) the fix costs, where it trades memory for time (FSDP's
    /// parameters kept gathered from forward to backward).
    MemoryCostBytes => "memory_cost_bytes",
    MicroBatches => "micro_batches",
    /// 1 when the finding reads the hosts' noise (lateness that moves from rank to rank with no
    /// work moving with it): information about the machine, ranked after the job's own causes
    /// and trades of its severity.
    Noise => "noise",
    OperatorNs => "operator_ns",
    OptimizerNs => "optimizer_ns",
    OthersComputeNs => "others_compute_ns",
    OthersDataLoadingNs => "others_data_loading_ns",
    OthersExposedWaitNsMax => "others_exposed_wait_ns_max",
    OthersExposedWaitNsMin => "others_exposed_wait_ns_min",
    OthersOperatorNs => "others_operator_ns",
    OthersOptimizerNs => "others_optimizer_ns",
    OthersStallNs => "others_stall_ns",
    OthersStepWallNs => "others_step_wall_ns",
    PartialCollectives => "partial_collectives",
    ProjectedCallsPerStep => "projected_calls_per_step",
    RecvWaitNs => "recv_wait_ns",
    /// The what-if replay's largest error against the recorded steps.
    ReplayError => "replay_error",
    /// The gain the what-if replay gives (docs/metrics.md, "What-if").
    ReplayedGainNs => "replayed_gain_ns",
    RegionActiveNs => "region_active_ns",
    SlowestExcess => "slowest_excess",
    /// The GPUs' SM activity during the steps, 0 to 1 (cluster metrics, median of the GPUs).
    SmActive => "sm_active",
    /// A step log's median iteration time (ms) over the run it covers.
    LogMedianMs => "log_median_ms",
    /// A step log's slow phase: its median iteration time (ms).
    SlowPhaseMs => "slow_phase_ms",
    /// The profiled steps' median time (ms).
    ProfiledMs => "profiled_ms",
    SpanningTransferNs => "spanning_transfer_ns",
    /// The late rank's operator instances whose input shapes were compared with the other
    /// ranks' (`record_shapes=True`), and those on the others' shapes.
    ShapesCompared => "shapes_compared",
    ShapesSame => "shapes_same",
    SlowestStage => "slowest_stage",
    Stage => "stage",
    Stages => "stages",
    StallNs => "stall_ns",
    StartSkewNs => "start_skew_ns",
    StepWallNs => "step_wall_ns",
    TheoryBubbleShare => "theory_bubble_share",
    TheoryBubbleShare2m => "theory_bubble_share_2m",
    /// The threshold the finding crossed (`--threshold`).
    Threshold => "threshold",
    TimeoutMs => "timeout_ms",
    /// 1 when the fix is a trade the job made by design (memory for time: FSDP's resharding),
    /// not a fault: the finding ranks after the faults of its severity.
    Trade => "trade",
    TransferNs => "transfer_ns",
    TypicalOpRatio => "typical_op_ratio",
    TypicalOptimizerOpRatio => "typical_optimizer_op_ratio",
    WaitedNs => "waited_ns",
}

impl Ord for EvidenceKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name().cmp(&other.name())
    }
}

impl PartialOrd for EvidenceKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for EvidenceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl Serialize for EvidenceKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for EvidenceKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <Cow<'de, str>>::deserialize(d)?;
        EvidenceKey::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("unknown evidence key `{s}`")))
    }
}

/// The figures behind a finding's message, by key (`{"stall_ns": 4.02e8, …}` in the JSON).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Evidence(BTreeMap<EvidenceKey, f64>);

impl Evidence {
    /// The figure under `k`.
    pub fn get(&self, k: EvidenceKey) -> Option<f64> {
        self.0.get(&k).copied()
    }

    /// The figure under `k`, 0 without one.
    pub fn or_zero(&self, k: EvidenceKey) -> f64 {
        self.get(k).unwrap_or(0.0)
    }

    pub fn contains(&self, k: EvidenceKey) -> bool {
        self.0.contains_key(&k)
    }

    pub fn insert(&mut self, k: EvidenceKey, v: f64) {
        self.0.insert(k, v);
    }

    /// The figures in the JSON's order (by name).
    pub fn iter(&self) -> impl Iterator<Item = (EvidenceKey, f64)> + '_ {
        self.0.iter().map(|(&k, &v)| (k, v))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<const N: usize> From<[(EvidenceKey, f64); N]> for Evidence {
    fn from(v: [(EvidenceKey, f64); N]) -> Evidence {
        Evidence(v.into_iter().collect())
    }
}

impl std::ops::Index<EvidenceKey> for Evidence {
    type Output = f64;

    /// The figure under `k` (panics without one, as a map's index does: for tests).
    fn index(&self, k: EvidenceKey) -> &f64 {
        &self.0[&k]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_back_and_sort_by_name() {
        let mut names: Vec<String> = EvidenceKey::NAMED.iter().map(|k| k.name().into_owned()).collect();
        for k in EvidenceKey::NAMED
            .iter()
            .copied()
            .chain([EvidenceKey::BubbleShareStage(10), EvidenceKey::ComputeNsStage(2)])
        {
            assert_eq!(EvidenceKey::parse(&k.name()), Some(k), "{k}");
        }
        assert_eq!(EvidenceKey::parse("bubble_share_stage_x"), None);
        let sorted = {
            let mut v = names.clone();
            v.sort();
            v
        };
        names.sort_by(|a, b| {
            EvidenceKey::parse(a)
                .unwrap_or(EvidenceKey::Bytes)
                .cmp(&EvidenceKey::parse(b).unwrap_or(EvidenceKey::Bytes))
        });
        assert_eq!(names, sorted);
        // Stage 10 sorts before stage 2, as the names do.
        assert!(EvidenceKey::BubbleShareStage(10) < EvidenceKey::BubbleShareStage(2));
        let e = Evidence::from([(EvidenceKey::StallNs, 1.0), (EvidenceKey::Bytes, 2.0)]);
        let json = serde_json::to_string(&e).unwrap_or_default();
        assert_eq!(json, r#"{"bytes":2.0,"stall_ns":1.0}"#);
        assert_eq!(serde_json::from_str::<Evidence>(&json).ok(), Some(e));
    }
}
