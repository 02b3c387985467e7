//! The training phases a step is split into.

use serde::{Deserialize, Serialize};

/// A training phase: what part of a step a region is (`analyze::regions` decides it from a
/// region's name and class; a finding's location names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    DataLoading,
    Forward,
    Backward,
    Optimizer,
    Other,
}

impl Phase {
    pub const ALL: [Phase; 5] =
        [Phase::DataLoading, Phase::Forward, Phase::Backward, Phase::Optimizer, Phase::Other];

    pub fn name(self) -> &'static str {
        match self {
            Phase::DataLoading => "data_loading",
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::Optimizer => "optimizer",
            Phase::Other => "other",
        }
    }

    /// Words for a sentence ("in the data loading", "in backward").
    pub fn words(self) -> &'static str {
        match self {
            Phase::DataLoading => "data loading",
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::Optimizer => "the optimizer",
            Phase::Other => "outside forward, backward, optimizer and data loading",
        }
    }
}
