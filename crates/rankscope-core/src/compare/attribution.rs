//! What explains the change, by the what-if answers of both runs (docs/diff-schema.md,
//! `attribution`).
//!
//! Each run's findings say what fixing a cause gives back per step (`impact_ns`: the what-if
//! replay's answer where it holds, `evidence.replayed_gain_ns`, else the cause's own estimate).
//! A cause explains the part of the step's change by which its saving moved between the runs:
//! a host stall that appeared with 357 ms of saving explains 357 ms of a +329 ms change; one
//! whose saving shrank by 100 ms explains 100 ms of a speed-up. Beside them, the job's slowdown
//! against its ideal (the what-if replay with every rank at its peers' typical speed) in each
//! run: the part of the change that is ranks slower than their peers, whatever their cause.
//!
//! Causes whose saving moved less than the comparison's floor are left out (within noise);
//! the savings of two causes may overlap (a straggler and the host stall that made it), so the
//! shares are each cause's alone and need not add up to the whole.

use serde::{Deserialize, Serialize};

use super::tables::FindingDiff;
use crate::analyze::Analysis;
use crate::finding::{EvidenceKey, FindingId};

/// One cause and the part of the change its saving's move explains.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Explained {
    pub id: FindingId,
    pub ranks: Vec<u32>,
    /// The location's region path, when it has one.
    pub location: Vec<String>,
    /// What fixing it gives back per step in each run (absent where the run has no such
    /// finding: nothing to give back).
    pub gain_base_ns: Option<i64>,
    pub gain_new_ns: Option<i64>,
    /// `gain_new_ns − gain_base_ns`: the step time this cause added (negative: took away).
    pub explained_ns: i64,
    /// `explained_ns` over the step's change, when the step changed.
    pub share: Option<f64>,
    /// Both gains are the what-if replay's (else at least one is the cause's own estimate).
    pub replayed: bool,
}

/// The job's slowdown against its ideal step in each run (the what-if replay's `replayed_ns −
/// ideal_ns`), when both runs were replayed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BehindIdeal {
    pub base_ns: i64,
    pub new_ns: i64,
    pub delta_ns: i64,
    /// `delta_ns` over the step's change, when the step changed.
    pub share: Option<f64>,
}

/// What explains the change.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Attribution {
    /// Causes whose saving moved beyond the floor, the largest move the step's way first.
    pub causes: Vec<Explained>,
    pub behind_ideal: Option<BehindIdeal>,
}

/// The attribution of `delta_ns` (the step's change; 0 when it did not change beyond noise).
pub fn attribute(
    rows: &[FindingDiff],
    base: &Analysis,
    new: &Analysis,
    delta_ns: i64,
    floor_ns: i64,
) -> Attribution {
    let share = |x: i64| (delta_ns != 0).then(|| x as f64 / delta_ns as f64);
    // A finding of a run by its row's key, to read whether its saving is the replay's.
    let replayed = |a: &Analysis, f: &FindingDiff| {
        a.findings.iter().any(|g| {
            g.id == f.id
                && g.ranks == f.ranks
                && g.location.as_ref().map(|l| l.regions.as_slice()).unwrap_or_default()
                    == f.location.as_slice()
                && g.evidence.contains(EvidenceKey::ReplayedGainNs)
        })
    };
    let mut causes: Vec<Explained> = rows
        .iter()
        .filter_map(|f| {
            let (b, n) = (f.impact_base_ns.unwrap_or(0), f.impact_new_ns.unwrap_or(0));
            let explained_ns = n - b;
            (explained_ns.abs() > floor_ns.max(0)).then(|| Explained {
                id: f.id,
                ranks: f.ranks.clone(),
                location: f.location.clone(),
                gain_base_ns: f.impact_base_ns,
                gain_new_ns: f.impact_new_ns,
                explained_ns,
                share: share(explained_ns),
                replayed: (f.impact_base_ns.is_none() || replayed(base, f))
                    && (f.impact_new_ns.is_none() || replayed(new, f)),
            })
        })
        .collect();
    let dir = delta_ns.signum();
    causes.sort_by_key(|c| (std::cmp::Reverse(c.explained_ns * if dir == 0 { 1 } else { dir }), c.id));
    let behind = |a: &Analysis| a.whatif.as_ref().map(|w| (w.replayed_ns - w.ideal_ns).max(0));
    let behind_ideal = behind(base).zip(behind(new)).map(|(base_ns, new_ns)| BehindIdeal {
        base_ns,
        new_ns,
        delta_ns: new_ns - base_ns,
        share: share(new_ns - base_ns),
    });
    Attribution { causes, behind_ideal }
}
