//! A region's operator-free time taken out of the replay: a host stall every rank has
//! (`diagnose/causes/shared_stall.rs`) replayed away ([`super::Scenario::without_region`]).
//!
//! While the model is built, each rank's main-thread region occurrences whose operator-free
//! time is at least [`MIN_FREE_SHARE`] of their step (the only ones a stall finding can name)
//! are laid over the step's program: the part of each that falls in the rank's own time, in
//! each slot, scaled by the occurrence's free share of its span (a region with operators in it
//! is not all stall), is recorded per region ([`RegionFree`]). Waits are not own time, so a
//! region's wait for a collective is never taken out.

use std::collections::BTreeMap;

use super::program::{Item, StepProgram};
use super::replay::Slot;
use crate::analyze::regions::RankRegions;
use crate::model::FxHashMap;

/// Occurrences with less operator-free time than this share of their step are not kept: below
/// both floors of a stall every rank has (`Thresholds::shared_stall_ratio` and
/// `Thresholds::shared_stall_block_ratio`).
pub const MIN_FREE_SHARE: f64 = 0.05;

/// Per (rank, step, slot): a region's operator-free time in the rank's own time there.
pub type FreeAt = FxHashMap<(u32, u32, Slot), i64>;

/// Per region (its name and its parent's): where its operator-free time falls ([`FreeAt`]).
#[derive(Debug, Clone, Default)]
pub struct RegionFree {
    pub by_region: BTreeMap<(String, String), FreeAt>,
}

impl RegionFree {
    /// Lays `rank`'s kept occurrences over its step programs (each with its items' slots).
    pub(super) fn add(&mut self, rank: u32, regions: &RankRegions, progs: &[(&StepProgram, Vec<Slot>)]) {
        let by_step: FxHashMap<u32, usize> =
            progs.iter().enumerate().map(|(k, (sp, _))| (sp.step, k)).collect();
        let name = |k: u32| regions.names.get(k as usize).map_or("", String::as_str);
        for o in regions.occurrences.iter().filter(|o| o.main && o.free_ns > 0) {
            let Some((sp, slots)) = by_step.get(&o.step).and_then(|&k| progs.get(k)) else { continue };
            let len = (sp.end_ns - sp.start_ns).max(1);
            if (o.free_ns as f64) < MIN_FREE_SHARE * len as f64 {
                continue;
            }
            let parent =
                o.parent.and_then(|p| regions.occurrences.get(p as usize)).map_or("", |p| name(p.name));
            let share = (o.free_ns as f64 / o.inclusive_ns().max(1) as f64).min(1.0);
            let key = (name(o.name).to_string(), parent.to_string());
            let at = self.by_region.entry(key).or_default();
            // The program's items tile the step: own time, then each wait from where it began.
            let mut t = sp.start_ns;
            for (item, slot) in sp.items.iter().zip(slots) {
                match *item {
                    Item::Own(d) => {
                        let overlap = (t + d).min(o.end_ns) - t.max(o.start_ns);
                        if overlap > 0 {
                            *at.entry((rank, sp.step, *slot)).or_default() += (overlap as f64 * share) as i64;
                        }
                        t += d;
                    }
                    Item::Wait { recorded_ns, .. } => t += recorded_ns,
                    Item::Issue(_) => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::regions::{Occurrence, Phase};

    fn occurrence(name: u32, parent: Option<u32>, start_ns: i64, end_ns: i64, free_ns: i64) -> Occurrence {
        Occurrence {
            name,
            parent,
            phase: Phase::Forward,
            step: 1,
            main: true,
            start_ns,
            end_ns,
            ops_ns: end_ns - start_ns - free_ns,
            sync_ns: 0,
            free_ns,
            device_ns: 0,
        }
    }

    /// A step of 100: own 0–40, a wait 40–60, own 60–100. A stall 30–70 (all free) puts 10 in
    /// the first own time and 10 in the second, never the wait; a region whose free time is
    /// under a tenth of the step is not kept.
    #[test]
    fn a_region_lays_its_free_time_over_the_own_time_it_covers() {
        let regions = RankRegions {
            names: vec!["ProfilerStep".into(), "save_state".into(), "tiny".into()],
            occurrences: vec![
                occurrence(0, None, 0, 100, 25),
                occurrence(1, Some(0), 30, 70, 40),
                occurrence(2, Some(0), 80, 85, 4),
            ],
            ..Default::default()
        };
        let sp = StepProgram {
            step: 1,
            start_ns: 0,
            end_ns: 100,
            items: vec![
                Item::Own(40),
                Item::Issue(0),
                Item::Wait { inst: 0, recorded_ns: 20, wake_ns: 0 },
                Item::Own(40),
            ],
        };
        let slots = vec![Slot::BeforeIssue(0), Slot::BeforeIssue(0), Slot::BeforeWait(0), Slot::Tail];
        let mut rf = RegionFree::default();
        rf.add(3, &regions, &[(&sp, slots)]);
        let stall = &rf.by_region[&("save_state".to_string(), "ProfilerStep".to_string())];
        assert_eq!(stall.get(&(3, 1, Slot::BeforeIssue(0))), Some(&10));
        assert_eq!(stall.get(&(3, 1, Slot::Tail)), Some(&10));
        assert_eq!(stall.len(), 2);
        assert!(!rf.by_region.contains_key(&("tiny".to_string(), "ProfilerStep".to_string())));
        // The step marker (25 free over 100): a quarter of each own time it covers.
        let step = &rf.by_region[&("ProfilerStep".to_string(), String::new())];
        assert_eq!(step.get(&(3, 1, Slot::BeforeIssue(0))), Some(&10));
        assert_eq!(step.get(&(3, 1, Slot::Tail)), Some(&10));
    }
}
