//! What a cause declares, as data, and the candidates the causes return.

use super::causes::CauseId;
use super::context::Ctx;
use crate::analyze::whatif::timeline::Counterfactual;
use crate::finding::{Finding, FindingId};

/// Where a cause stands in the order of reasoning (DOMAIN.md, last section): a job that
/// stopped first, then who waits for whom, then the steady state, then the spread of step
/// times. The registry lists the causes in this order and runs them so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// The job stopped (a hang, a mismatch): its first divergence is the cause, reported
    /// first whatever its gain, and the steps it stopped are no steady state for the rest.
    Stopped,
    /// Who waits for whom: a late rank, ranks that take turns being late, a pipeline's stages
    /// waiting for their neighbours.
    Waiting,
    /// What every step pays on what waiting leaves: communication, the host, the allocator.
    SteadyState,
    /// Step times that vary.
    Spread,
}

/// A cause of slow or stopped training: what it finds and how it stands to the others. Its
/// doc comment (the file's `//!`) says what it measures and how; these fields are what the
/// arbitration ([`super::arbitrate`]) reads.
#[derive(Debug)]
pub struct Cause {
    pub id: CauseId,
    /// The finding ids it reports (a late rank is named for why it is late).
    pub finds: &'static [FindingId],
    pub stage: Stage,
    /// Findings it makes redundant when it is found: another cause's candidate with one of
    /// these ids is dropped (a late rank explains the step-time spread its lateness makes).
    pub explains: &'static [FindingId],
    /// The finding whose time its own is part of: when both are found, its gain is taken off
    /// the whole's and it lists the whole among its symptoms (small collectives and blocking
    /// calls are part of the exposed transfer; a host sync's device idle is part of the
    /// CPU-bound idle; a stalled stage's host time is part of the pipeline's bubble).
    pub part_of: Option<FindingId>,
    /// Causes not considered once this one is found: readings of the same figures that cannot
    /// both hold (a late rank and ranks that take turns being late), or that read steps this
    /// one stopped.
    pub excludes: &'static [CauseId],
    /// For a whole: the sentence it adds for one of its parts that is reported.
    pub names_part: Option<fn(&Finding) -> String>,
    /// The candidates it finds, each claiming its gain in `impact_ns`. `found` holds what the
    /// causes before it in the registry found (some word themselves by it: the exposed
    /// transfer's advice names the small-collectives finding when there is one).
    pub find: fn(&Ctx<'_>, &Found) -> Vec<Finding>,
}

/// A finding as a cause returns it, before the arbitration: `finding.impact_ns` is the time
/// per step the cause claims fixing it saves, by its own estimate. The arbitration owns every
/// adjustment of it (parts taken off wholes, the floor, the cap at the step) — where a
/// what-if replay of the job would put its own figure instead.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub cause: CauseId,
    pub finding: Finding,
    /// The change its gain was replayed with, and its words, where the gain is a replay's
    /// ([`crate::analyze::whatif::timeline`]: the lead finding's is shown replayed).
    pub replayed: Option<(Counterfactual, String)>,
}

/// The candidates found so far, in the order of the registry.
#[derive(Debug, Clone, Default)]
pub struct Found {
    pub(super) list: Vec<Candidate>,
}

impl Found {
    /// The candidates of one cause.
    pub fn of(&self, cause: CauseId) -> impl Iterator<Item = &Finding> + '_ {
        self.list.iter().filter(move |c| c.cause == cause).map(|c| &c.finding)
    }

    /// Whether a cause found anything.
    pub fn has(&self, cause: CauseId) -> bool {
        self.list.iter().any(|c| c.cause == cause)
    }
}
