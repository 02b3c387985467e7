//! The per-step figures of two runs side by side: the job's step time, each rank's breakdown
//! (`Analysis::steps`) and phases (`Analysis::phases`), and each rank's regions
//! (`Analysis::regions`), every one a sample per step and its shift with its interval
//! ([`super::shift`]).
//!
//! **The job's step time** of one step is the longest wall time of any rank in it (every rank
//! leaves the step at its last collective; the same convention as `analyze::noise`). A job
//! row of any other figure is, per step, the mean over the ranks.
//!
//! **A rank's own time** (`active`) is its wall time minus its exposed wait for the other
//! ranks: what it spent on its own work. The rank whose own time grew is the one the others
//! wait for; their exposed wait grows with it.
//!
//! **Regions** are matched by name and enclosing region's name (`forward` > `straggler_sleep`),
//! across runs and on the same rank number. A region's sample is its active time (inclusive,
//! collective wait taken out) per step, 0 in a step where the rank did not enter it; `count` is
//! its occurrences per step. A region only one run has is `new` or `vanished`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::shift::{shift, Shift};
use crate::analyze::breakdown::StepRank;
use crate::analyze::Analysis;
use crate::model::Phase;

crate::named_enum! {
    /// A per-step figure of a rank (or of the job: the mean over its ranks).
    pub enum Figure {
        /// The step's wall time (for the job: the longest over the ranks, the step time).
        Wall => "wall",
        /// Wall time minus the exposed wait for other ranks: the rank's own time.
        Active => "active",
        /// Compute (union of compute events).
        Compute => "compute",
        /// Communication (union), hidden or not.
        Comm => "comm",
        /// Communication moving data while nothing else ran.
        ExposedTransfer => "exposed_transfer",
        /// Communication waiting for other ranks while nothing else ran.
        ExposedWait => "exposed_wait",
        /// Idle while the host was loading data.
        Input => "input",
        /// Idle for any other reason (a host stall, launch gaps, Python).
        Idle => "idle",
        /// Blocked in host synchronizations.
        HostSync => "host_sync",
        /// The main thread's time in each training phase (regions taken by their phase).
        PhaseDataLoading => "phase_data_loading",
        PhaseForward => "phase_forward",
        PhaseBackward => "phase_backward",
        PhaseOptimizer => "phase_optimizer",
        PhaseOther => "phase_other",
    }
}

impl Figure {
    /// The figure in a sentence ("rank 3's input +280 ms").
    pub fn words(self) -> &'static str {
        match self {
            Figure::Wall => "step",
            Figure::Active => "own time",
            Figure::Compute => "compute",
            Figure::Comm => "communication",
            Figure::ExposedTransfer => "exposed communication transfer",
            Figure::ExposedWait => "wait for other ranks",
            Figure::Input => "input (data loading)",
            Figure::Idle => "idle time",
            Figure::HostSync => "host synchronization",
            Figure::PhaseDataLoading => "data loading phase",
            Figure::PhaseForward => "forward phase",
            Figure::PhaseBackward => "backward phase",
            Figure::PhaseOptimizer => "optimizer phase",
            Figure::PhaseOther => "time outside the annotated phases",
        }
    }

    /// A figure that is the rank's own work, which can cause a change (not the wait it
    /// inherits, nor a sum of the others).
    pub fn is_cause(self) -> bool {
        matches!(
            self,
            Figure::Compute | Figure::ExposedTransfer | Figure::Input | Figure::Idle | Figure::HostSync
        )
    }

    fn of(self, r: &StepRank) -> i64 {
        match self {
            Figure::Wall => r.wall_ns,
            Figure::Active => r.wall_ns - r.exposed_wait_ns,
            Figure::Compute => r.compute_ns,
            Figure::Comm => r.comm_ns,
            Figure::ExposedTransfer => r.exposed_transfer_ns,
            Figure::ExposedWait => r.exposed_wait_ns,
            Figure::Input => r.input_ns,
            Figure::Idle => r.idle_ns - r.input_ns,
            Figure::HostSync => r.host_sync_ns,
            _ => 0,
        }
    }

    fn phase(self) -> Option<Phase> {
        Some(match self {
            Figure::PhaseDataLoading => Phase::DataLoading,
            Figure::PhaseForward => Phase::Forward,
            Figure::PhaseBackward => Phase::Backward,
            Figure::PhaseOptimizer => Phase::Optimizer,
            Figure::PhaseOther => Phase::Other,
            _ => return None,
        })
    }
}

/// One figure of the job or of one rank in both runs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FigureDiff {
    /// The rank, or absent for the job (per step, the mean over ranks; the step time for
    /// `wall`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    pub figure: Figure,
    #[serde(flatten)]
    pub shift: Shift,
    /// The interval excludes no change and the change is at least the floor.
    pub beyond_noise: bool,
}

crate::named_enum! {
    /// Whether a region is in both runs.
    pub enum Presence {
        Both => "both",
        /// Only in the new run.
        New => "new",
        /// Only in the base run.
        Vanished => "vanished",
    }
}

/// One region in both runs, on one rank or (absent `rank`) per rank on average.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RegionDiff {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// The enclosing region's name (`ProfilerStep` at the top of a step), or empty.
    pub parent: String,
    pub name: String,
    pub phase: Phase,
    pub presence: Presence,
    /// The base run's name when the region was renamed (the one top-level region of a phase
    /// that vanished, and the one of that phase that is new: `forward` → `## forward ##`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renamed_from: Option<String>,
    /// On one rank: the breakdown figure its change is made of (its operators: `compute`; no
    /// operator running: `idle`, or `input` in a data-loading region; synchronization:
    /// `host_sync`; device work launched from it: `compute`). Absent for the mean over ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_of: Option<Figure>,
    /// Occurrences per step (median over the steps).
    pub count_base: f64,
    pub count_new: f64,
    /// Active time per step.
    #[serde(flatten)]
    pub shift: Shift,
    pub beyond_noise: bool,
}

/// Per step, the job's step time: the longest wall of any rank.
pub fn step_times(a: &Analysis) -> Vec<i64> {
    a.steps.iter().filter_map(|s| s.per_rank.iter().map(|r| r.wall_ns).max()).collect()
}

/// Whether a shift is beyond the noise: its interval excludes no change, it is at least
/// `floor_ns`, and the interval holds at least [`super::MIN_CONFIDENCE`].
pub fn beyond(s: &Shift, floor_ns: i64) -> bool {
    s.excludes_zero() && s.delta_ns.abs() >= floor_ns && s.confidence + 1e-9 >= super::MIN_CONFIDENCE
}

/// Per rank, per step (in step order), the figure.
fn rank_samples(a: &Analysis, f: Figure) -> BTreeMap<u32, Vec<i64>> {
    let mut out: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
    if let Some(p) = f.phase() {
        let mut by: BTreeMap<(u32, u32), i64> = BTreeMap::new();
        for s in &a.steps {
            for r in &s.per_rank {
                by.insert((r.rank, s.step), 0);
            }
        }
        for row in a.phases.iter().filter(|x| x.phase == p) {
            if let Some(v) = by.get_mut(&(row.rank, row.step)) {
                *v += row.active_ns;
            }
        }
        for ((rank, _), v) in by {
            out.entry(rank).or_default().push(v);
        }
        return out;
    }
    for s in &a.steps {
        for r in &s.per_rank {
            out.entry(r.rank).or_default().push(f.of(r));
        }
    }
    out
}

/// Per step, the mean over ranks (the step time for `wall`).
fn job_samples(a: &Analysis, f: Figure) -> Vec<i64> {
    if f == Figure::Wall {
        return step_times(a);
    }
    let per_rank = rank_samples(a, f);
    let steps = per_rank.values().map(Vec::len).max().unwrap_or(0);
    (0..steps)
        .filter_map(|k| {
            let v: Vec<i64> = per_rank.values().filter_map(|x| x.get(k).copied()).collect();
            (!v.is_empty()).then(|| v.iter().sum::<i64>() / v.len() as i64)
        })
        .collect()
}

/// Every figure of the job and of every rank both runs have.
pub fn figures(base: &Analysis, new: &Analysis, floor_ns: i64) -> Vec<FigureDiff> {
    let mut out = Vec::new();
    for &f in Figure::ALL {
        if let Some(s) = shift(&job_samples(base, f), &job_samples(new, f)) {
            out.push(FigureDiff { rank: None, figure: f, beyond_noise: beyond(&s, floor_ns), shift: s });
        }
        if f.phase().is_some() && base.phases.is_empty() && new.phases.is_empty() {
            continue;
        }
        let (b, n) = (rank_samples(base, f), rank_samples(new, f));
        for (rank, bs) in &b {
            if let Some(s) = n.get(rank).and_then(|ns| shift(bs, ns)) {
                out.push(FigureDiff {
                    rank: Some(*rank),
                    figure: f,
                    beyond_noise: beyond(&s, floor_ns),
                    shift: s,
                });
            }
        }
    }
    // Phases no rank spends time in, in either run, say nothing.
    out.retain(|d| d.figure.phase().is_none() || d.shift.base_ns != 0 || d.shift.new_ns != 0);
    out
}

/// One region of one rank in one run: per step (the rank's step order, 0 where absent) its
/// active time, count, and the parts of its time: operators, no operator running, host
/// synchronization, device compute launched from it.
#[derive(Debug, Clone)]
struct Samples {
    phase: Phase,
    active: Vec<i64>,
    count: Vec<i64>,
    parts: [Vec<i64>; 4],
}

impl Samples {
    fn zeros(phase: Phase, n: usize) -> Samples {
        Samples { phase, active: vec![0; n], count: vec![0; n], parts: std::array::from_fn(|_| vec![0; n]) }
    }
}

type RegionSamples = BTreeMap<(u32, String, String), Samples>;

/// What a region's change is made of, as the breakdown figure that holds that time: the part
/// (operators, no operator running, synchronization, device) whose median moved most the
/// change's way. No operator running inside a data-loading region is input.
fn made_of(b: &Samples, n: &Samples, delta: i64) -> Option<Figure> {
    let moved: Vec<i64> =
        (0..4).map(|k| median_f(&n.parts[k]) as i64 - median_f(&b.parts[k]) as i64).collect();
    let (k, d) = moved.iter().enumerate().max_by_key(|(_, d)| **d * delta.signum())?;
    if *d * delta.signum() <= 0 {
        return None;
    }
    Some(match k {
        0 | 3 => Figure::Compute,
        1 if n.phase == Phase::DataLoading => Figure::Input,
        1 => Figure::Idle,
        _ => Figure::HostSync,
    })
}

fn region_samples(a: &Analysis) -> RegionSamples {
    let mut steps_of: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for s in &a.steps {
        for r in &s.per_rank {
            steps_of.entry(r.rank).or_default().push(s.step);
        }
    }
    let mut out: RegionSamples = BTreeMap::new();
    for row in &a.regions {
        let Some(steps) = steps_of.get(&row.rank) else { continue };
        let Some(k) = steps.iter().position(|&s| s == row.step) else { continue };
        let e = out
            .entry((row.rank, row.parent.clone(), row.name.clone()))
            .or_insert_with(|| Samples::zeros(row.phase, steps.len()));
        e.active[k] += row.active_ns;
        e.count[k] += i64::from(row.count);
        for (part, v) in e.parts.iter_mut().zip([row.ops_ns, row.free_ns, row.sync_ns, row.device_ns]) {
            part[k] += v;
        }
    }
    out
}

fn median_f(v: &[i64]) -> f64 {
    let mut s: Vec<f64> = v.iter().map(|&x| x as f64).collect();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// A region at the top of the step (its parent is the step marker, or none).
pub fn is_top(parent: &str) -> bool {
    parent.is_empty() || parent == "ProfilerStep"
}

/// Base names to new names of top-level regions one run has and the other lacks (a renamed
/// annotation: `forward` → `## forward ##` → `fwd`), matched in three passes: the one of a
/// phase (not `other`) with the one of that phase; then one whose child regions share a name
/// with the other's (`DistributedDataParallel.forward` under both); then, when one of each is
/// left that is not data loading, those two.
fn renames(b: &RegionSamples, n: &RegionSamples) -> BTreeMap<String, String> {
    type Facts = (Phase, BTreeSet<String>);
    type Top = BTreeMap<String, Facts>;
    let top = |s: &RegionSamples| -> Top {
        let mut t: Top = BTreeMap::new();
        for ((_, p, name), v) in s.keys().zip(s.values()) {
            if is_top(p) && name != "ProfilerStep" {
                t.entry(name.clone()).or_insert_with(|| (v.phase, BTreeSet::new()));
            }
        }
        for (_, p, name) in s.keys() {
            if let Some(e) = t.get_mut(p) {
                e.1.insert(name.clone());
            }
        }
        t
    };
    let (tb, tn) = (top(b), top(n));
    let mut gone: Top =
        tb.iter().filter(|(k, _)| !tn.contains_key(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut came: Top =
        tn.iter().filter(|(k, _)| !tb.contains_key(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut out = BTreeMap::new();
    let mut pair = |gone: &mut Top, came: &mut Top, f: &dyn Fn(&Facts, &Facts) -> bool| {
        let pairs: Vec<(String, String)> = gone
            .iter()
            .filter_map(|(g, gv)| {
                let m: Vec<&String> = came.iter().filter(|(_, cv)| f(gv, cv)).map(|(c, _)| c).collect();
                let back = m
                    .first()
                    .map_or(0, |c| gone.values().filter(|x| came.get(*c).is_some_and(|cv| f(x, cv))).count());
                (m.len() == 1 && back == 1).then(|| (g.clone(), m[0].clone()))
            })
            .collect();
        for (g, c) in pairs {
            gone.remove(&g);
            came.remove(&c);
            out.insert(g, c);
        }
    };
    pair(&mut gone, &mut came, &|x, y| x.0 == y.0 && x.0 != Phase::Other);
    pair(&mut gone, &mut came, &|x, y| !x.1.is_disjoint(&y.1));
    let rest = |t: &Top| t.iter().filter(|(_, v)| v.0 != Phase::DataLoading).count();
    if rest(&gone) == 1 && rest(&came) == 1 {
        pair(&mut gone, &mut came, &|x, y| x.0 != Phase::DataLoading && y.0 != Phase::DataLoading);
    }
    out
}

/// Every region of either run, per rank (rank numbers both runs have) and per rank on average.
pub fn regions(base: &Analysis, new: &Analysis, floor_ns: i64) -> Vec<RegionDiff> {
    let (b, n) = (region_samples(base), region_samples(new));
    let ren = renames(&b, &n);
    let to_new = |s: &String| ren.get(s).cloned().unwrap_or_else(|| s.clone());
    let from: BTreeMap<String, String> = ren.iter().map(|(k, v)| (v.clone(), k.clone())).collect();
    let b: RegionSamples =
        b.into_iter().map(|((r, p, name), v)| ((r, to_new(&p), to_new(&name)), v)).collect();
    let ranks_b: BTreeSet<u32> = base.steps.iter().flat_map(|s| s.per_rank.iter().map(|r| r.rank)).collect();
    let ranks_n: BTreeSet<u32> = new.steps.iter().flat_map(|s| s.per_rank.iter().map(|r| r.rank)).collect();
    // Steps per rank, looked up by key (a scan per region would be quadratic in the ranks).
    let count = |a: &Analysis| {
        let mut m: BTreeMap<u32, usize> = BTreeMap::new();
        for s in &a.steps {
            for r in &s.per_rank {
                *m.entry(r.rank).or_default() += 1;
            }
        }
        m
    };
    let (steps_b, steps_n) = (count(base), count(new));
    let keys: BTreeSet<&(u32, String, String)> = b.keys().chain(n.keys()).collect();
    let mut out = Vec::new();
    // Per region (parent, name): per step, the sums over ranks (divided by the ranks after).
    type Job = BTreeMap<(String, String), (Phase, Vec<i64>, Vec<i64>, Vec<i64>, Vec<i64>)>;
    let mut job: Job = BTreeMap::new();
    let add = |acc: &mut Vec<i64>, v: &[i64]| {
        if acc.len() < v.len() {
            acc.resize(v.len(), 0);
        }
        for (a, x) in acc.iter_mut().zip(v) {
            *a += x;
        }
    };
    for key in keys {
        let (rank, parent, name) = key;
        if !(ranks_b.contains(rank) && ranks_n.contains(rank)) {
            continue;
        }
        let (pb, pn) = (b.get(key).map(|x| x.phase), n.get(key).map(|x| x.phase));
        let phase = pn.or(pb).unwrap_or(Phase::Other);
        let zeros = |m: &BTreeMap<u32, usize>| Samples::zeros(phase, m.get(rank).copied().unwrap_or(0));
        let sb = b.get(key).cloned().unwrap_or_else(|| zeros(&steps_b));
        let sn = n.get(key).cloned().unwrap_or_else(|| zeros(&steps_n));
        let (ab, cb, an, cn) = (&sb.active, &sb.count, &sn.active, &sn.count);
        let presence = match (pb.is_some(), pn.is_some()) {
            (true, true) => Presence::Both,
            (false, _) => Presence::New,
            (true, false) => Presence::Vanished,
        };
        let j = job
            .entry((parent.clone(), name.clone()))
            .or_insert_with(|| (phase, vec![], vec![], vec![], vec![]));
        add(&mut j.1, ab);
        add(&mut j.2, an);
        add(&mut j.3, cb);
        add(&mut j.4, cn);
        if let Some(s) = shift(ab, an) {
            out.push(RegionDiff {
                made_of: made_of(&sb, &sn, s.delta_ns),
                rank: Some(*rank),
                parent: parent.clone(),
                name: name.clone(),
                phase,
                presence,
                renamed_from: from.get(name).cloned(),
                count_base: median_f(cb),
                count_new: median_f(cn),
                beyond_noise: beyond(&s, floor_ns),
                shift: s,
            });
        }
    }
    let ranks = ranks_b.intersection(&ranks_n).count().max(1) as i64;
    for ((parent, name), (phase, ab, an, cb, cn)) in job {
        let per = |v: &[i64]| v.iter().map(|x| x / ranks).collect::<Vec<_>>();
        let presence = match (cb.iter().any(|&c| c > 0), cn.iter().any(|&c| c > 0)) {
            (true, true) | (false, false) => Presence::Both,
            (false, true) => Presence::New,
            (true, false) => Presence::Vanished,
        };
        if let Some(s) = shift(&per(&ab), &per(&an)) {
            let renamed_from = from.get(&name).cloned();
            out.push(RegionDiff {
                made_of: None,
                rank: None,
                parent,
                name,
                phase,
                presence,
                renamed_from,
                count_base: median_f(&cb) / ranks as f64,
                count_new: median_f(&cn) / ranks as f64,
                beyond_noise: beyond(&s, floor_ns),
                shift: s,
            });
        }
    }
    out
}

/// The region path from the top of the step (the step marker left out), following each
/// region's enclosing region in `rows` (the first row with that name).
pub fn path(rows: &[RegionDiff], parent: &str, name: &str) -> Vec<String> {
    let mut p = vec![name.to_string()];
    let mut up = parent.to_string();
    while !up.is_empty() && up != "ProfilerStep" && p.len() < 16 && !p.contains(&up) {
        p.push(up.clone());
        up = rows.iter().find(|r| r.name == up).map(|r| r.parent.clone()).unwrap_or_default();
    }
    p.reverse();
    p
}
