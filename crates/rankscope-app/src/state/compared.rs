//! The job compared with a baseline (issue 36, the Compare view): the baseline as far as it has
//! come ([`Baseline`], read by `baseline.rs`), and the comparison the reducer makes once both the
//! job and a read baseline are there: one call to the core's `compare::compare`, the baseline as
//! the base run and the job on screen as the new one, exactly what `rankscope diff BASE NEW`
//! computes (with its default floor).

use std::rc::Rc;
use std::sync::Arc;

use rankscope_core::analyze::Analysis;
use rankscope_core::compare::{self, Comparison};

use super::State;

/// The baseline the job is compared with.
#[derive(Debug, Clone)]
pub enum Baseline {
    /// Its worker is reading the file.
    Reading {
        name: String,
    },
    /// It is not a baseline (or could not be read): why, naming the file.
    Failed {
        name: String,
        error: String,
    },
    Ready {
        name: String,
        analysis: Arc<Analysis>,
    },
}

impl Baseline {
    pub fn name(&self) -> &str {
        match self {
            Baseline::Reading { name } | Baseline::Failed { name, .. } | Baseline::Ready { name, .. } => name,
        }
    }
}

/// Two baselines are the same when they are the same reading: a read analysis is compared by
/// its allocation, never field by field (1,024 ranks' analysis is tens of MB).
impl PartialEq for Baseline {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Baseline::Reading { name: a }, Baseline::Reading { name: b }) => a == b,
            (Baseline::Failed { name: a, error: e }, Baseline::Failed { name: b, error: f }) => {
                a == b && e == f
            }
            (Baseline::Ready { name: a, analysis: x }, Baseline::Ready { name: b, analysis: y }) => {
                a == b && Arc::ptr_eq(x, y)
            }
            _ => false,
        }
    }
}

/// The job compared with its baseline.
#[derive(Debug, Clone)]
pub struct Compared {
    /// The baseline's file name.
    pub base_name: String,
    /// The two analyses compared (the per-step dots of the step bars are read from them).
    pub base: Arc<Analysis>,
    pub new: Arc<Analysis>,
    pub comparison: Comparison,
}

/// One comparison is another only when it is the same one (see [`Baseline`]'s equality).
impl PartialEq for Compared {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.base, &other.base) && Arc::ptr_eq(&self.new, &other.new)
    }
}

impl State {
    /// With a job and a read baseline, the comparison (once per pair); none without either.
    pub(super) fn compare_when_ready(&mut self) {
        let (Some(job), Some(Baseline::Ready { name, analysis })) = (&self.job, &self.baseline) else {
            self.compared = None;
            return;
        };
        if self
            .compared
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(&c.base, analysis) && Arc::ptr_eq(&c.new, &job.analysis))
        {
            return;
        }
        let comparison = compare::compare(analysis, &job.analysis, &compare::Options::default());
        self.compared = Some(Rc::new(Compared {
            base_name: name.clone(),
            base: analysis.clone(),
            new: job.analysis.clone(),
            comparison,
        }));
    }
}
