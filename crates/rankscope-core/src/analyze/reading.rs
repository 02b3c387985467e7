//! How a rank was read, beside its figures: what the classification understood of it
//! ([`crate::normalize::coverage`]), the facts that tell which job it belongs to, its CUDA / HIP
//! graphs and its engine iterations. Computed per rank in [`super::rank_part`], carried in the
//! part, gathered into the analysis by [`super::combine`].

use serde::{Deserialize, Serialize};

use crate::model::StringTable;
use crate::normalize::coverage::Coverage;
use crate::normalize::job::RankEntry;

/// How one rank was read (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub coverage: Coverage,
}

/// The reading of one normalized rank.
pub fn rank_reading(r: &RankEntry, _strings: &StringTable) -> Reading {
    Reading { coverage: r.norm.coverage.clone() }
}
