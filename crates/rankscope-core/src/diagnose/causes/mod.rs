//! The registry: every cause, one file each, in the order of reasoning (a job that stopped,
//! who waits for whom, the steady state, the spread of step times). Adding a cause is adding
//! its file and its line here.

/// What a cause file needs.
mod prelude {
    pub(super) use std::collections::{BTreeMap, BTreeSet};

    pub(super) use super::super::cause::{Cause, Found, Stage};
    pub(super) use super::super::context::{severity_for, Ctx};
    pub(super) use super::CauseId;
    pub(super) use crate::analyze::stats::median_f;
    pub(super) use crate::finding::{
        Evidence, EvidenceKey as K, Finding, FindingId, Location, Phase, Severity,
    };
    pub(super) use crate::model::CollKind;
    pub(super) use crate::words::{dur, dur_range, pct, rank_list, ranks_word};
}

/// A replayed gain in the order of fixing: `gain(late)` is the step gained with the `late` ranks
/// brought to their peers in both replays. Returns the gain to claim (once the late ranks are
/// fixed, when some are found: they are fixed first) and the words: `lead`, the gain now and
/// its `unit` ("54 ms per step"), and with late ranks " now, 58 ms once rank 3 is fixed".
fn in_order_of_fixing(
    late: &std::collections::BTreeSet<u32>,
    gain: impl Fn(&std::collections::BTreeSet<u32>) -> f64,
    lead: &str,
    unit: &str,
) -> (f64, String) {
    use crate::words::{dur, ranks_word};
    let now = gain(&std::collections::BTreeSet::new());
    let mut words = format!("{lead}{}{unit}", dur(now));
    if late.is_empty() {
        words.push('.');
        return (now, words);
    }
    let later = gain(late);
    words.push_str(&format!(
        " now, {} once {} {} fixed.",
        dur(later),
        ranks_word(&late.iter().copied().collect::<Vec<_>>()).to_lowercase(),
        if late.len() == 1 { "is" } else { "are" }
    ));
    (later, words)
}

macro_rules! registry {
    ($($(#[$m:meta])* $id:ident => $module:ident),+ $(,)?) => {
        $(mod $module;)+

        /// A cause of the registry, as the declarations of the others name it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum CauseId {
            $($(#[$m])* $id),+
        }

        /// Every cause, in the order of reasoning: the order they run in.
        pub static CAUSES: &[&super::Cause] = &[$(&$module::CAUSE),+];
    };
}

registry! {
    /// A hang or mismatch of the collective sequences.
    CollectiveMismatch => collective_mismatch,
    /// A pipeline stage stalling on its host.
    PipelineStall => pipeline_stall,
    /// A pipeline's bubble beyond its schedule's.
    PipelineBubble => pipeline_bubble,
    /// The ranks the others wait for, named for why they are late.
    LateRank => late_rank,
    /// An expert-parallel rank that gets more tokens than its group's others.
    ExpertImbalance => expert_imbalance,
    /// Tensor-parallel groups that span hosts.
    TensorGroupSpansHosts => tensor_group_spans_hosts,
    /// Ranks that take turns being late.
    ArrivalJitter => arrival_jitter,
    /// A rank whose program has more in it than its peers', not the one they wait for.
    UnevenProgram => uneven_program,
    /// Blocking collectives the host waits in mid-step.
    BlockingCollectives => blocking_collectives,
    /// Many small collectives against the trace's own cost model.
    SmallCollectives => small_collectives,
    /// Transfer not hidden behind compute.
    ExposedComm => exposed_comm,
    /// Every rank waiting for its input.
    InputBound => input_bound,
    /// Every rank stalling on its host in the same place.
    SharedStall => shared_stall,
    /// Device synchronizations that leave the device idle.
    HostSync => host_sync,
    /// The device waiting for the host to launch.
    CpuBound => cpu_bound,
    /// Allocation calls after warm-up.
    AllocatorChurn => allocator_churn,
    /// Collectives below what nccl-tests measured on the fabric.
    BelowFabric => below_fabric,
    /// Step times that vary.
    StepJitter => step_jitter,
}

#[cfg(test)]
mod tests {
    use super::super::Stage;
    use super::*;

    #[test]
    fn the_registry_lists_each_cause_once_in_the_order_of_reasoning() {
        for (k, c) in CAUSES.iter().enumerate() {
            assert_eq!(c.id as usize, k, "{:?} is not at its own place in the registry", c.id);
            assert!(!c.finds.is_empty(), "{:?} finds nothing", c.id);
        }
        let stages: Vec<Stage> = CAUSES.iter().map(|c| c.stage).collect();
        let mut sorted = stages.clone();
        sorted.sort();
        assert_eq!(stages, sorted, "the registry must list the causes stage by stage");
    }

    #[test]
    fn declarations_name_what_exists() {
        use crate::finding::{FindingId, IdKind};
        for c in CAUSES {
            for id in c.finds.iter().chain(c.explains).chain(c.part_of.iter()) {
                assert_eq!(id.kind(), IdKind::Cause, "{:?} names {id}, which is no cause", c.id);
            }
            if let Some(w) = c.part_of {
                assert!(
                    CAUSES.iter().any(|x| x.finds.contains(&w)),
                    "{:?} is part of {w}, which no cause finds",
                    c.id
                );
            }
            for e in c.excludes {
                // Excluded causes are not run: the one that excludes them runs first.
                assert!(*e as usize > c.id as usize, "{:?} excludes {e:?}, which runs before it", c.id);
            }
        }
        // Every cause id of the vocabulary is found by some cause.
        for id in FindingId::causes() {
            assert!(CAUSES.iter().any(|c| c.finds.contains(&id)), "no cause finds {id}");
        }
    }
}
