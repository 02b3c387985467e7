//! Every finding id, as one enum.

crate::named_enum! {
    /// A finding's stable id: what the JSON writes in `findings[].id` and `symptoms[]`, what
    /// `--fail-on` and the shells compare, what docs/analysis-schema.md and docs/nccl.md list.
    /// Ids compare with their names (`id == "host_stall"`); findings that tie on their gain are
    /// ordered by the name, never by the declaration order here.
    pub enum FindingId {
        // The trace analysis: causes (docs/metrics.md, "Findings", says how each is reasoned).
        /// A hang or mismatch: the first place where the ranks' collective sequences diverge.
        CollectiveMismatch => "collective_mismatch",
        /// A rank stalls on its host (a sleep, blocking I/O, a hook) and the others wait for it.
        HostStall => "host_stall",
        /// Waiting for input: a late rank's DataLoader, or every rank's.
        InputBound => "input_bound",
        /// A late rank does more work than the others.
        ComputeImbalance => "compute_imbalance",
        /// A late rank does the same work slower.
        SlowDevice => "slow_device",
        /// A rank the others wait for, whose excess is before its step or cannot be located.
        Straggler => "straggler",
        /// The ranks wait for each other, but the last to arrive changes from step to step.
        ArrivalJitter => "arrival_jitter",
        /// Transfer not hidden behind compute.
        ExposedComm => "exposed_comm",
        /// Many small collectives, each paying a fixed cost.
        SmallCollectives => "small_collectives",
        /// Blocking collectives or device synchronizations in the step.
        HostSync => "host_sync",
        /// The device waits for the host to launch work.
        CpuBound => "cpu_bound",
        /// Allocation calls in steps after the first.
        AllocatorChurn => "allocator_churn",
        /// Collectives slower than nccl-tests measured on the same fabric.
        BelowFabric => "below_fabric",
        /// Step times that vary with no rank consistently late.
        StepJitter => "step_jitter",
        /// One step holds a late rank's lateness: a burst of noise, information, not a cause.
        NoiseBurst => "noise_burst",
        /// A pipeline's stages idle beyond what its schedule leaves.
        PipelineBubble => "pipeline_bubble",
        /// An expert-parallel rank gets more tokens than the others, and its expert group waits
        /// for it at the all_to_all.
        ExpertImbalance => "expert_imbalance",
        /// A tensor-parallel group whose members are on more than one host: its activation
        /// all_reduces cross the network.
        TensorGroupSpansHosts => "tensor_group_spans_hosts",
        // Symptoms: never reported alone, listed in a cause's `symptoms` (the rules that would
        // have fired on the symptom alone).
        /// The other ranks' exposed wait at collectives.
        ExposedWait => "exposed_wait",
        /// Little communication hidden under compute.
        LowOverlap => "low_overlap",
        /// Communication a large share of the step.
        CommHeavy => "comm_heavy",
        /// Ranks stuck in a collective.
        Hang => "hang",
        // NCCL_DEBUG logs (docs/nccl.md).
        /// Nodes talk over sockets (`NET/Socket`) though the job spans nodes.
        LogNetSocketMultinode => "log.net-socket-multinode",
        /// Ranks use different networks.
        LogMixedNetworks => "log.mixed-networks",
        /// Peers on one node talk through shared memory or the network.
        LogIntraNodeShmOrNet => "log.intra-node-shm-or-net",
        /// GPUDirect RDMA is off.
        LogGdrDisabled => "log.gdr-disabled",
        /// Ranks run different NCCL versions.
        LogNcclVersionMismatch => "log.nccl-version-mismatch",
        /// Ranks run different CUDA drivers.
        LogCudaDriverMismatch => "log.cuda-driver-mismatch",
        /// Ranks run different NCCL builds.
        LogNcclBuildMismatch => "log.nccl-build-mismatch",
        /// A multi-node job bootstraps over a host-local interface (`lo`, `docker*`, `virbr*`).
        LogBootstrapInterface => "log.bootstrap-interface",
        /// A patched NCCL build.
        LogPatchedNccl => "log.patched-nccl",
        /// Communicators of one rank.
        LogSingleRankCommunicators => "log.single-rank-communicators",
        /// A ring crosses nodes more often than needed.
        LogRingCrossesNodes => "log.ring-crosses-nodes",
        /// A communicator's initialization did not finish.
        LogInitIncomplete => "log.init-incomplete",
        /// NCCL printed warnings.
        LogNcclWarn => "log.nccl-warn",
        /// Warnings written during the job's own teardown (information).
        LogTeardownWarnings => "log.teardown-warnings",
        // nccl-tests output (docs/nccl.md).
        /// No result rows.
        TestsNoResults => "tests.no-results",
        /// Two processes report one rank.
        TestsDuplicateRanks => "tests.duplicate-ranks",
        /// A test of one rank.
        TestsSingleRank => "tests.single-rank",
        /// Results that nccl-tests checked and found wrong.
        TestsWrongResults => "tests.wrong-results",
        /// The test failed.
        TestsFailure => "tests.failure",
        /// Low bus bandwidth across nodes.
        TestsLowMultinodeBusbw => "tests.low-multinode-busbw",
        /// Bus bandwidth below the fabric's peak.
        TestsBelowPeak => "tests.below-peak",
        /// Small messages take longer than the transport should need.
        TestsLatencyFloor => "tests.latency-floor",
        /// Crossing nodes multiplies the small-message time far beyond a network hop.
        TestsInternodeLatency => "tests.internode-latency",
        /// A larger message completes faster than a smaller one.
        TestsNonMonotonic => "tests.non-monotonic",
        /// A jump in time between adjacent sizes.
        TestsCurveStep => "tests.curve-step",
        // The evidence beside the traces, joined with them (docs/analysis-schema.md, "Findings
        // from the evidence beside the traces").
        /// SMs idle while a NIC runs at its line rate, and the trace's communication exposed.
        MetricsCommBound => "metrics.comm-bound",
        /// A GPU whose clock or power is held below its peers', or whose clock is throttled.
        MetricsThrottledGpu => "metrics.throttled-gpu",
        /// A NIC sending or receiving pause frames during the steps.
        MetricsPfcStorm => "metrics.pfc-storm",
        /// A NIC that carried nothing while its host's ranks communicated.
        MetricsIdleNic => "metrics.idle-nic",
        /// A GPU that reported an XID error during the job.
        MetricsXidError => "metrics.xid-error",
        /// A profiled step that is in one of the step log's slow phases.
        SteplogSlowPhaseProfiled => "steplog.slow-phase-profiled",
        /// Slow phases of the step log that the profiled steps do not show.
        SteplogSlowPhaseMissed => "steplog.slow-phase-missed",
        /// An `ncclras` report that names processes dead or silent, or ranks missing.
        RasJobIncomplete => "ras.job-incomplete",
        /// The Inspector's execution times disagree with the traces' kernel times.
        InspectorTimesDisagree => "inspector.times-disagree",

    }
}

/// What a finding id is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    /// A cause the trace analysis reports.
    Cause,
    /// A symptom a cause explains, never reported alone.
    Symptom,
    /// A finding of the NCCL_DEBUG log report.
    NcclLog,
    /// A finding of the nccl-tests report.
    NcclTests,
    /// A finding of the evidence beside the traces (cluster metrics, NCCL RAS status, NCCL
    /// Inspector logs, step logs), joined with them: in the analysis' findings, with figures.
    Beside,
}

impl FindingId {
    /// What the id is about.
    pub fn kind(self) -> IdKind {
        use FindingId::*;
        match self {
            ExposedWait | LowOverlap | CommHeavy | Hang => IdKind::Symptom,
            _ if self.as_str().starts_with("log.") => IdKind::NcclLog,
            _ if self.as_str().starts_with("tests.") => IdKind::NcclTests,
            MetricsCommBound
            | MetricsThrottledGpu
            | MetricsPfcStorm
            | MetricsIdleNic
            | MetricsXidError
            | SteplogSlowPhaseProfiled
            | SteplogSlowPhaseMissed
            | RasJobIncomplete
            | InspectorTimesDisagree => IdKind::Beside,
            _ => IdKind::Cause,
        }
    }

    /// The causes the trace analysis reports, in declaration order.
    pub fn causes() -> impl Iterator<Item = FindingId> {
        FindingId::ALL.iter().copied().filter(|f| f.kind() == IdKind::Cause)
    }
}
