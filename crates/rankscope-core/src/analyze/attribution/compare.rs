//! The comparison of one rank's step with the same step on the other ranks (their median),
//! region by region, phase by phase, and the descent to the region that explains the excess
//! ([`locate`]; see the parent module's doc, point 3).

use std::collections::{BTreeMap, BTreeSet};

use super::{PhaseRow, RegionRow};
use crate::analyze::regions::Phase;
use crate::analyze::stats::median;

/// A figure of a region row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    Active,
    Free,
    Ops,
    Sync,
    Device,
}

fn figure(r: &RegionRow, f: Figure) -> i64 {
    match f {
        Figure::Active => r.active_ns,
        Figure::Free => r.free_ns,
        Figure::Ops => r.ops_ns,
        Figure::Sync => r.sync_ns,
        Figure::Device => r.device_ns,
    }
}

/// The late rank's figures against the others', per step, for one comparison.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diff {
    /// Mean over the compared steps of the late rank's value.
    pub mine_ns: f64,
    /// Mean over the compared steps of the others' median.
    pub others_ns: f64,
}

impl Diff {
    pub fn excess(&self) -> f64 {
        self.mine_ns - self.others_ns
    }
}

/// Compares `rank` with the other ranks over `steps`, for rows selected by `key`.
///
/// Every comparison first gathers its figure per (rank, step) in one pass over the rows, then
/// reads one value per rank and step: O(rows + ranks × steps), never a scan of the rows per
/// rank and step (that made the job's findings quadratic in the ranks).
#[derive(Debug)]
pub struct Compare<'a> {
    pub rank: u32,
    pub steps: &'a [u32],
    pub ranks: &'a [u32],
}

/// A figure per (rank, step); a pair without one counts 0.
pub type ByRankStep = BTreeMap<(u32, u32), i64>;

/// The sum of `f` over the rows, per (rank, step).
fn summed<'r>(rows: impl IntoIterator<Item = &'r RegionRow>, f: Figure) -> ByRankStep {
    let mut v = ByRankStep::new();
    for x in rows {
        *v.entry((x.rank, x.step)).or_insert(0) += figure(x, f);
    }
    v
}

impl Compare<'_> {
    /// Per step, the late rank's value and the median of the others' (0 where a rank has
    /// none), each averaged over the steps.
    pub fn diff_of(&self, values: &ByRankStep) -> Diff {
        let value = |r: u32, s: u32| values.get(&(r, s)).copied().unwrap_or(0);
        let mut d = Diff::default();
        if self.steps.is_empty() {
            return d;
        }
        for &s in self.steps {
            d.mine_ns += value(self.rank, s) as f64;
            d.others_ns +=
                median(self.ranks.iter().filter(|&&r| r != self.rank).map(|&r| value(r, s)).collect()) as f64;
        }
        let n = self.steps.len() as f64;
        d.mine_ns /= n;
        d.others_ns /= n;
        d
    }

    /// A region (by name and parent) and one of its figures.
    pub fn region(&self, rows: &[RegionRow], name: &str, parent: &str, f: Figure) -> Diff {
        self.diff_of(&summed(rows.iter().filter(|x| x.name == name && x.parent == parent), f))
    }

    /// The largest device time of a region of phase `ph` (the outermost one: device time is
    /// inclusive), per rank and step.
    pub fn phase_device(&self, rows: &[RegionRow], ph: Phase) -> Diff {
        let mut v = ByRankStep::new();
        for x in rows.iter().filter(|x| x.phase == ph) {
            let e = v.entry((x.rank, x.step)).or_insert(x.device_ns);
            *e = (*e).max(x.device_ns);
        }
        self.diff_of(&v)
    }

    /// A phase's active time.
    pub fn phase(&self, rows: &[PhaseRow], ph: Phase) -> Diff {
        let mut v = ByRankStep::new();
        for x in rows.iter().filter(|x| x.phase == ph) {
            *v.entry((x.rank, x.step)).or_insert(0) += x.active_ns;
        }
        self.diff_of(&v)
    }

    /// A per-step figure of the breakdown (a rank's first row of the step).
    pub fn step_figure<R: std::borrow::Borrow<crate::analyze::breakdown::StepRank>>(
        &self,
        per_step: &BTreeMap<u32, Vec<R>>,
        f: fn(&crate::analyze::breakdown::StepRank) -> i64,
    ) -> Diff {
        let mut v = ByRankStep::new();
        for (&s, rows) in per_step {
            for x in rows {
                let x = x.borrow();
                v.entry((x.rank, s)).or_insert_with(|| f(x));
            }
        }
        self.diff_of(&v)
    }
}

/// Where the late rank's excess is, found by descending the region tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    /// From the step down: `(name, excess of active time)`.
    pub path: Vec<(String, Diff)>,
    /// The deepest region's excess split: no operator running, operators, synchronization,
    /// device compute.
    pub free: Diff,
    pub ops: Diff,
    pub sync: Diff,
    pub device: Diff,
    pub phase: Phase,
}

/// Descends from the step region into the child that explains at least half of its parent's
/// excess active time, as long as there is one.
///
/// The rows are grouped by (name, parent) once, and each parent's children (on the compared
/// ranks) listed once: each region compared costs its own rows, whatever the number of ranks
/// or sibling regions.
pub fn locate(cmp: &Compare<'_>, rows: &[RegionRow]) -> Option<Located> {
    let compared: BTreeSet<u32> = cmp.ranks.iter().copied().chain([cmp.rank]).collect();
    let mut by_region: BTreeMap<(&str, &str), Vec<&RegionRow>> = BTreeMap::new();
    let mut children_of: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for r in rows {
        by_region.entry((r.name.as_str(), r.parent.as_str())).or_default().push(r);
        if compared.contains(&r.rank) {
            children_of.entry(r.parent.as_str()).or_default().insert(r.name.as_str());
        }
    }
    let region = |name: &str, parent: &str, f: Figure| {
        cmp.diff_of(&summed(by_region.get(&(name, parent)).into_iter().flatten().copied(), f))
    };
    // The step region: `ProfilerStep` at the top of the main thread.
    let root = "ProfilerStep";
    let has_root = rows.iter().any(|r| r.rank == cmp.rank && r.name == root && r.parent.is_empty());
    let (mut name, mut parent) = if has_root {
        (root.to_string(), String::new())
    } else {
        // No step markers: the top-level region with the largest excess.
        let tops: BTreeSet<&str> = rows
            .iter()
            .filter(|r| r.rank == cmp.rank && r.parent.is_empty())
            .map(|r| r.name.as_str())
            .collect();
        let best = tops
            .into_iter()
            .map(|n| (n, region(n, "", Figure::Active)))
            .max_by(|a, b| a.1.excess().total_cmp(&b.1.excess()))?;
        (best.0.to_string(), String::new())
    };
    let mut path = vec![(name.clone(), region(&name, &parent, Figure::Active))];
    // A region is its (name, parent name): `forward` inside `forward` is one region whose child
    // is itself, so the descent stops where it would come back to a region it passed.
    let mut passed: BTreeSet<(String, String)> = BTreeSet::new();
    passed.insert((name.clone(), parent.clone()));
    loop {
        let here = path.last().map(|x| x.1.excess()).unwrap_or(0.0);
        let best = children_of
            .get(name.as_str())
            .into_iter()
            .flatten()
            .map(|&c| (c, region(c, &name, Figure::Active)))
            .max_by(|a, b| a.1.excess().total_cmp(&b.1.excess()));
        match best {
            Some((c, d))
                if here > 0.0 && d.excess() >= 0.5 * here && passed.insert((c.to_string(), name.clone())) =>
            {
                parent = std::mem::replace(&mut name, c.to_string());
                path.push((c.to_string(), d));
            }
            _ => break,
        }
    }
    let phase = rows
        .iter()
        .find(|r| r.rank == cmp.rank && r.name == name && r.parent == parent)
        .map_or(Phase::Other, |r| r.phase);
    Some(Located {
        free: region(&name, &parent, Figure::Free),
        ops: region(&name, &parent, Figure::Ops),
        sync: region(&name, &parent, Figure::Sync),
        device: region(&name, &parent, Figure::Device),
        path,
        phase,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The comparisons as first written (issue 13's oracle): every value a scan of all the rows,
    /// quadratic in the ranks. The indexed ones must give the same figures, bit for bit.
    mod naive {
        use super::super::*;

        pub fn diff_by(cmp: &Compare<'_>, value: impl Fn(u32, u32) -> i64) -> Diff {
            let mut d = Diff::default();
            if cmp.steps.is_empty() {
                return d;
            }
            for &s in cmp.steps {
                d.mine_ns += value(cmp.rank, s) as f64;
                d.others_ns +=
                    median(cmp.ranks.iter().filter(|&&r| r != cmp.rank).map(|&r| value(r, s)).collect())
                        as f64;
            }
            let n = cmp.steps.len() as f64;
            d.mine_ns /= n;
            d.others_ns /= n;
            d
        }

        pub fn region(cmp: &Compare<'_>, rows: &[RegionRow], name: &str, parent: &str, f: Figure) -> Diff {
            diff_by(cmp, |r, s| {
                rows.iter()
                    .filter(|x| x.rank == r && x.step == s && x.name == name && x.parent == parent)
                    .map(|x| figure(x, f))
                    .sum()
            })
        }

        pub fn phase_device(cmp: &Compare<'_>, rows: &[RegionRow], ph: Phase) -> Diff {
            diff_by(cmp, |r, s| {
                rows.iter()
                    .filter(|x| x.rank == r && x.step == s && x.phase == ph)
                    .map(|x| x.device_ns)
                    .max()
                    .unwrap_or(0)
            })
        }

        pub fn phase(cmp: &Compare<'_>, rows: &[PhaseRow], ph: Phase) -> Diff {
            diff_by(cmp, |r, s| {
                rows.iter().filter(|x| x.rank == r && x.step == s && x.phase == ph).map(|x| x.active_ns).sum()
            })
        }

        pub fn locate(cmp: &Compare<'_>, rows: &[RegionRow]) -> Option<Located> {
            let root = "ProfilerStep";
            let has_root = rows.iter().any(|r| r.rank == cmp.rank && r.name == root && r.parent.is_empty());
            let (mut name, mut parent) = if has_root {
                (root.to_string(), String::new())
            } else {
                let mut tops: Vec<String> = rows
                    .iter()
                    .filter(|r| r.rank == cmp.rank && r.parent.is_empty())
                    .map(|r| r.name.clone())
                    .collect();
                tops.sort();
                tops.dedup();
                let best = tops
                    .into_iter()
                    .map(|n| {
                        let d = region(cmp, rows, &n, "", Figure::Active);
                        (n, d)
                    })
                    .max_by(|a, b| a.1.excess().total_cmp(&b.1.excess()))?;
                (best.0, String::new())
            };
            let mut path = vec![(name.clone(), region(cmp, rows, &name, &parent, Figure::Active))];
            let mut passed = vec![(name.clone(), parent.clone())];
            loop {
                let here = path.last().map(|x| x.1.excess()).unwrap_or(0.0);
                let mut children: Vec<String> = rows
                    .iter()
                    .filter(|r| r.parent == name && (r.rank == cmp.rank || cmp.ranks.contains(&r.rank)))
                    .map(|r| r.name.clone())
                    .collect();
                children.sort();
                children.dedup();
                let best = children
                    .into_iter()
                    .map(|c| {
                        let d = region(cmp, rows, &c, &name, Figure::Active);
                        (c, d)
                    })
                    .max_by(|a, b| a.1.excess().total_cmp(&b.1.excess()));
                match best {
                    Some((c, d))
                        if here > 0.0
                            && d.excess() >= 0.5 * here
                            && !passed.contains(&(c.clone(), name.clone())) =>
                    {
                        passed.push((c.clone(), name.clone()));
                        parent = std::mem::replace(&mut name, c.clone());
                        path.push((c, d));
                    }
                    _ => break,
                }
            }
            let phase = rows
                .iter()
                .find(|r| r.rank == cmp.rank && r.name == name && r.parent == parent)
                .map_or(Phase::Other, |r| r.phase);
            Some(Located {
                free: region(cmp, rows, &name, &parent, Figure::Free),
                ops: region(cmp, rows, &name, &parent, Figure::Ops),
                sync: region(cmp, rows, &name, &parent, Figure::Sync),
                device: region(cmp, rows, &name, &parent, Figure::Device),
                path,
                phase,
            })
        }
    }

    use rankscope_synth::Rng;

    fn below(r: &mut Rng, n: u64) -> u64 {
        r.below(n as usize) as u64
    }

    /// Random region trees: names reused under several parents, repeated (rank, step, name,
    /// parent) rows, ranks without rows and rows of ranks not compared, ties in the excess.
    fn random_rows(r: &mut Rng, ranks: u32, steps: u32) -> Vec<RegionRow> {
        const NAMES: [&str; 6] = ["ProfilerStep", "forward", "backward", "data", "optimizer.step", "x"];
        let n = below(r, 12 * u64::from(ranks) * u64::from(steps));
        (0..n)
            .map(|_| {
                // Any name under any parent, itself included (`forward` inside `forward`), and
                // cycles through several names: the descent must stop at a region it passed.
                let name = NAMES[below(r, NAMES.len() as u64) as usize].to_string();
                let parent = match below(r, 3) {
                    0 => String::new(),
                    _ => NAMES[below(r, NAMES.len() as u64) as usize].to_string(),
                };
                let rank = below(r, u64::from(ranks) + 1) as u32;
                let step = below(r, u64::from(steps)) as u32;
                let phase = Phase::ALL[below(r, 5) as usize];
                // Coarse figures so that medians and excesses often tie.
                let f: Vec<i64> = (0..7).map(|_| (below(r, 5) * 100) as i64).collect();
                RegionRow {
                    rank,
                    step,
                    name,
                    parent,
                    phase,
                    count: 1,
                    inclusive_ns: f[0],
                    active_ns: f[1],
                    ops_ns: f[2],
                    free_ns: f[3],
                    longest_free_ns: 0,
                    sync_ns: f[4],
                    wait_ns: f[5],
                    sync_wait_ns: 0,
                    device_ns: f[6],
                }
            })
            .collect()
    }

    #[test]
    fn indexed_comparisons_equal_the_scanning_ones() {
        let mut r = Rng::from_state(13);
        let r = &mut r;
        for _ in 0..400 {
            let (n_ranks, n_steps) = (2 + below(r, 7) as u32, 1 + below(r, 4) as u32);
            let rows = random_rows(r, n_ranks, n_steps);
            let ranks: Vec<u32> = (0..n_ranks).filter(|_| below(r, 5) > 0).collect();
            let steps: Vec<u32> = (0..n_steps + 1).filter(|_| below(r, 4) > 0).collect();
            let phases: Vec<PhaseRow> = rows
                .iter()
                .map(|x| PhaseRow {
                    rank: x.rank,
                    step: x.step,
                    phase: x.phase,
                    inclusive_ns: x.inclusive_ns,
                    active_ns: x.active_ns,
                })
                .collect();
            let cmp = Compare { rank: below(r, u64::from(n_ranks)) as u32, steps: &steps, ranks: &ranks };
            assert_eq!(locate(&cmp, &rows), naive::locate(&cmp, &rows), "{cmp:?}");
            for ph in Phase::ALL {
                assert_eq!(cmp.phase_device(&rows, ph), naive::phase_device(&cmp, &rows, ph));
                assert_eq!(cmp.phase(&phases, ph), naive::phase(&cmp, &phases, ph));
            }
            let x = &rows[..rows.len().min(1)];
            if let Some(x) = x.first() {
                for f in [Figure::Active, Figure::Free, Figure::Ops, Figure::Sync, Figure::Device] {
                    assert_eq!(
                        cmp.region(&rows, &x.name, &x.parent, f),
                        naive::region(&cmp, &rows, &x.name, &x.parent, f)
                    );
                }
            }
        }
    }

    #[test]
    #[allow(clippy::expect_used)]
    fn a_region_nested_in_its_own_name_ends_the_descent() {
        // `forward` inside `forward` (a module calling a submodule's `forward` under the same
        // label): the child (forward, forward) explains all of its parent's excess, and its own
        // child is itself. The descent stops there instead of going round for ever.
        let row = |rank: u32, name: &str, parent: &str, active_ns: i64| RegionRow {
            rank,
            step: 0,
            name: name.to_string(),
            parent: parent.to_string(),
            phase: Phase::Forward,
            count: 1,
            inclusive_ns: active_ns,
            active_ns,
            ops_ns: active_ns,
            free_ns: 0,
            longest_free_ns: 0,
            sync_ns: 0,
            wait_ns: 0,
            sync_wait_ns: 0,
            device_ns: 0,
        };
        let mut rows = Vec::new();
        for (rank, slow) in [(0u32, 0i64), (1, 0), (2, 5_000_000)] {
            rows.push(row(rank, "ProfilerStep", "", 10_000_000 + slow));
            rows.push(row(rank, "forward", "ProfilerStep", 8_000_000 + slow));
            rows.push(row(rank, "forward", "forward", 6_000_000 + slow));
        }
        let cmp = Compare { rank: 2, steps: &[0], ranks: &[0, 1] };
        let got = locate(&cmp, &rows).expect("located");
        let path: Vec<&str> = got.path.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(path, ["ProfilerStep", "forward", "forward"]);
        assert_eq!(naive::locate(&cmp, &rows), Some(got));
    }
}
