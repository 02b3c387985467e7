//! Attribution: from the per rank × step figures to causes, as an expert reads a slow step
//! (shared/DOMAIN.md, last section).
//!
//! 1. **Who waits for whom.** Every rank's communication is split into transfer and wait
//!    ([`super::waits`]). Per step, the ranks with the least wait are the step's **late group**
//!    (within a quarter of the spread from the least); the others waited for them. The time the
//!    late group costs the step is what the *least-waiting* of the other ranks waited beyond the
//!    late group, in exposed (not under compute) wait: that much would come off the step if the
//!    late ranks arrived with the others. It is a per-rank figure, bounded by the step.
//! 2. **A consistent straggler** is a rank in the late group of at least
//!    [`crate::finding::Thresholds::straggler_consistency`] of the steps that had a measurable
//!    spread. A late group that changes from step to step is arrival jitter, not a straggler.
//! 3. **Where the straggler's time went**: the same step on the straggler and on the others
//!    (the median over them), compared region by region ([`super::regions`]): annotations by
//!    name and parent, phases, device compute. Time the main thread spent idle or blocked while
//!    the rank's collective waited is taken out first (`active_ns`), so the waiting ranks' long
//!    `backward` does not hide the straggler's stall. The cause is the comparison that explains
//!    most of the excess: data loading (`input_bound`), more device or operator time
//!    (`compute_imbalance`), or time inside an annotation with no operator running
//!    (`host_stall`), found by descending from the step into the child region that explains at
//!    least half of its parent's excess.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::intervals::{Iv, Set};
use super::regions::Phase;
use super::stats::median;
use super::waits::RankWait;
use super::RankPart;

/// One region of one rank in one step (occurrences with the same name and parent summed).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RegionRow {
    pub rank: u32,
    pub step: u32,
    pub name: String,
    /// The enclosing region's name, or empty at the top.
    pub parent: String,
    pub phase: Phase,
    pub count: u32,
    pub inclusive_ns: i64,
    /// Inclusive time minus the exposed collective wait spent idle or blocked inside it.
    pub active_ns: i64,
    /// Operators running inside it.
    pub ops_ns: i64,
    /// No operator running (and not waiting on a collective).
    pub free_ns: i64,
    /// Blocked in a host synchronization (and not waiting on a collective).
    pub sync_ns: i64,
    /// Waiting for the other ranks while inside it.
    pub wait_ns: i64,
    /// Of `wait_ns`, the part the host spent blocked in a synchronization (a sync on a stream
    /// whose collective waits for a late peer).
    #[serde(default)]
    pub sync_wait_ns: i64,
    /// GPU compute launched from inside it.
    pub device_ns: i64,
}

/// One phase of one rank in one step (the main thread's partition of the step).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PhaseRow {
    pub rank: u32,
    pub step: u32,
    pub phase: Phase,
    pub inclusive_ns: i64,
    pub active_ns: i64,
}

/// Who waited for whom in one step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepWaits {
    pub step: u32,
    /// Per rank: total wait and exposed wait in the step.
    pub ranks: Vec<u32>,
    pub wait_ns: Vec<i64>,
    pub exposed_wait_ns: Vec<i64>,
    /// The ranks the others waited for (empty when the spread is below the noise).
    pub late: Vec<u32>,
    /// What the late group cost the step (see the module doc).
    pub cost_ns: i64,
}

/// The per-rank × step host breakdown, with collective waits taken out.
pub fn host_rows(parts: &[RankPart], waits: &[RankWait]) -> (Vec<RegionRow>, Vec<PhaseRow>) {
    let mut regions = Vec::new();
    let mut phases = Vec::new();
    for (p, w) in parts.iter().zip(waits) {
        let rr = &p.regions;
        let free_wait = Set::from_sorted(rr.free_gaps.iter().copied()).intersect(&w.exposed_wait);
        let sync_wait = Set::from_sorted(rr.sync_spans.iter().copied()).intersect(&w.exposed_wait);
        let mut agg: BTreeMap<(u32, String, String), RegionRow> = BTreeMap::new();
        for o in &rr.occurrences {
            let name = rr.names.get(o.name as usize).cloned().unwrap_or_default();
            let parent = o
                .parent
                .and_then(|k| rr.occurrences.get(k as usize))
                .and_then(|q| rr.names.get(q.name as usize))
                .cloned()
                .unwrap_or_default();
            let (wf, ws) = if o.main {
                (free_wait.len_within(o.start_ns, o.end_ns), sync_wait.len_within(o.start_ns, o.end_ns))
            } else {
                (0, 0)
            };
            let row = agg.entry((o.step, name.clone(), parent.clone())).or_insert_with(|| RegionRow {
                rank: p.info.rank,
                step: o.step,
                name,
                parent,
                phase: o.phase,
                count: 0,
                inclusive_ns: 0,
                active_ns: 0,
                ops_ns: 0,
                free_ns: 0,
                sync_ns: 0,
                wait_ns: 0,
                sync_wait_ns: 0,
                device_ns: 0,
            });
            let wf = wf.min(o.free_ns);
            let ws = ws.min(o.sync_ns);
            row.count += 1;
            row.inclusive_ns += o.inclusive_ns();
            row.active_ns += o.inclusive_ns() - wf - ws;
            row.ops_ns += o.ops_ns;
            row.free_ns += o.free_ns - wf;
            row.sync_ns += o.sync_ns - ws;
            row.wait_ns += wf + ws;
            row.sync_wait_ns += ws;
            row.device_ns += o.device_ns;
        }
        regions.extend(agg.into_values());
        let blocked = free_wait.union(&sync_wait);
        for sp in &rr.phases {
            for (ph, ivs) in &sp.spans {
                let set = Set::from_sorted(ivs.iter().copied());
                let inclusive = set.len_ns();
                let waited = set.intersect(&blocked).len_ns();
                phases.push(PhaseRow {
                    rank: p.info.rank,
                    step: sp.step,
                    phase: *ph,
                    inclusive_ns: inclusive,
                    active_ns: inclusive - waited,
                });
            }
        }
    }
    (regions, phases)
}

/// Who waited for whom, step by step. `rows` are the ranks' step rows with the wait split
/// filled in; `noise_ns` is the smallest spread of waits taken as a real difference.
pub fn step_waits(
    per_step: &BTreeMap<u32, Vec<super::breakdown::StepRank>>,
    noise_ns: i64,
) -> Vec<StepWaits> {
    let mut out = Vec::new();
    for (&step, rows) in per_step {
        if rows.len() < 2 {
            continue;
        }
        let ranks: Vec<u32> = rows.iter().map(|r| r.rank).collect();
        let wait: Vec<i64> = rows.iter().map(|r| r.comm_wait_ns).collect();
        let exposed: Vec<i64> = rows.iter().map(|r| r.exposed_wait_ns).collect();
        let lo = wait.iter().copied().min().unwrap_or(0);
        let hi = wait.iter().copied().max().unwrap_or(0);
        let mut late = Vec::new();
        let mut cost = 0;
        if hi - lo > noise_ns {
            let cut = lo + (hi - lo) / 4;
            late = ranks.iter().zip(&wait).filter(|(_, &w)| w <= cut).map(|(&r, _)| r).collect();
            cost = late_cost(&ranks, &exposed, &late);
        }
        out.push(StepWaits { step, ranks, wait_ns: wait, exposed_wait_ns: exposed, late, cost_ns: cost });
    }
    out
}

/// The step time `late` cost in a step: the least exposed wait among the other ranks beyond the
/// most among the late ones (0 when every rank is late).
pub fn late_cost(ranks: &[u32], exposed: &[i64], late: &[u32]) -> i64 {
    // A set: the late group can be most of the job, and a scan of it per rank is quadratic.
    let late: BTreeSet<u32> = late.iter().copied().collect();
    let others = ranks.iter().zip(exposed).filter(|(r, _)| !late.contains(r)).map(|(_, &w)| w).min();
    let mine = ranks.iter().zip(exposed).filter(|(r, _)| late.contains(r)).map(|(_, &w)| w).max();
    match (others, mine) {
        (Some(o), Some(m)) => (o - m).max(0),
        _ => 0,
    }
}

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
    pub fn step_figure<R: std::borrow::Borrow<super::breakdown::StepRank>>(
        &self,
        per_step: &BTreeMap<u32, Vec<R>>,
        f: fn(&super::breakdown::StepRank) -> i64,
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

/// Where a rank's collectives come from: the region of the main thread open when the host
/// issued them, per step and kind.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OriginRow {
    pub rank: u32,
    pub step: u32,
    /// The innermost region open on the main thread at the issue, or empty.
    pub region: String,
    /// From the step down to `region`, joined with ` > `.
    pub path: String,
    pub phase: Phase,
    pub kind: crate::model::CollKind,
    pub count: u32,
    pub bytes_total: i64,
    pub bytes_max: i64,
    /// Union of the collectives' intervals.
    pub dur_ns: i64,
    /// From the first one's start to the last one's end: where no region tells (calls of a
    /// few bytes outside any annotation), the extent the host spends on them.
    #[serde(default)]
    pub span_ns: i64,
    /// Of that, while the main thread ran no operator (or was in a host synchronization): the
    /// host is blocked on these collectives. For calls of a few bytes outside any annotation,
    /// only the part no larger collective of the rank runs under (the host would be blocked on
    /// that one anyway).
    pub blocked_ns: i64,
    pub exposed_transfer_ns: i64,
    pub exposed_wait_ns: i64,
    /// Issued from inside autograd's backward functions (a gradient hook: DDP's buckets,
    /// FSDP's reduce-scatters): gradient communication, sized or not. Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_autograd: bool,
}

/// A collective of at most this many bytes is a scalar's or a handful of values' (a metric, a
/// flag, a barrier), never a gradient bucket.
pub const TINY_COLLECTIVE_BYTES: i64 = 64 * 1024;

/// The origin of every rank's collectives (`insts[k]` belongs to `parts[k]`), and the region
/// each instance came from by `(rank, event)`.
pub fn comm_origins(
    parts: &[RankPart],
    insts: &[Vec<super::instances::Instance>],
    waits: &[RankWait],
) -> (Vec<OriginRow>, BTreeMap<(u32, u32), String>) {
    let mut out = Vec::new();
    let mut of_event = BTreeMap::new();
    for ((p, v), w) in parts.iter().zip(insts).zip(waits) {
        let rr = &p.regions;
        let main = rr.main_occurrences();
        let blocked_host = Set::from_sorted(rr.free_gaps.iter().copied())
            .union(&Set::from_sorted(rr.sync_spans.iter().copied()));
        let name_of = |k: usize| rr.name_of(k).to_string();
        let deepest = |ts: i64| rr.region_at(&main, ts);
        // The rank's larger collectives: a call of a few bytes that runs under one of them (DDP's
        // map of used parameters beside its gradient bucket) blocks the host no longer than the
        // larger call does; only its time outside them is its own.
        let larger = Set::from_unsorted(
            v.iter()
                .filter(|x| {
                    x.kind != crate::model::CollKind::Barrier
                        && x.bytes.is_none_or(|b| b > TINY_COLLECTIVE_BYTES)
                })
                .map(|x| (x.start_ns, x.end_ns))
                .collect(),
        );
        #[derive(Default)]
        struct Acc {
            path: String,
            phase: Option<Phase>,
            ivs: Vec<Iv>,
            bytes_total: i64,
            bytes_max: i64,
            count: u32,
        }
        let mut groups: BTreeMap<(u32, String, crate::model::CollKind, bool, bool), Acc> = BTreeMap::new();
        for x in v {
            let at = deepest(x.issued_ns);
            let region = at.map_or_else(String::new, name_of);
            of_event.insert((p.info.rank, x.event.0), region.clone());
            // Outside any annotation the region cannot tell a training loop's scalar
            // all_reduces (a metric, a barrier) from the gradient buckets issued in backward:
            // there, calls of a few bytes make a row of their own.
            let unannotated = region.is_empty() || region == "ProfilerStep";
            // Of known size (a call whose size the trace does not say may be anything), or a
            // barrier, which moves no data.
            let tiny = unannotated
                && (x.kind == crate::model::CollKind::Barrier
                    || x.bytes.is_some_and(|b| b <= TINY_COLLECTIVE_BYTES));
            let g = groups.entry((x.step, region, x.kind, tiny, x.from_autograd)).or_default();
            // The group's path and phase are its first instance's: the chain is walked once.
            if g.phase.is_none() {
                let (path, phase) = match at {
                    Some(k) => {
                        let mut chain = vec![name_of(k)];
                        let mut cur = rr.occurrences[k].parent;
                        while let Some(q) = cur {
                            chain.push(name_of(q as usize));
                            cur = rr.occurrences.get(q as usize).and_then(|o| o.parent);
                        }
                        chain.reverse();
                        (chain.join(" > "), rr.occurrences[k].phase)
                    }
                    None => (String::new(), Phase::Other),
                };
                g.path = path;
                g.phase = Some(phase);
            }
            g.ivs.push((x.start_ns, x.end_ns));
            let b = x.bytes.unwrap_or(0).max(0);
            g.bytes_total += b;
            g.bytes_max = g.bytes_max.max(b);
            g.count += 1;
        }
        for ((step, region, kind, tiny, from_autograd), g) in groups {
            let Acc { path, phase, ivs, bytes_total, bytes_max, count } = g;
            let phase = phase.unwrap_or(Phase::Other);
            let span_ns =
                ivs.iter().map(|x| x.1).max().unwrap_or(0) - ivs.iter().map(|x| x.0).min().unwrap_or(0);
            let set = Set::from_unsorted(ivs);
            out.push(OriginRow {
                span_ns,
                rank: p.info.rank,
                step,
                region,
                path,
                phase,
                kind,
                count,
                bytes_total,
                bytes_max,
                dur_ns: set.len_ns(),
                blocked_ns: if tiny {
                    set.intersect(&blocked_host).subtract(&larger).len_ns()
                } else {
                    set.intersect(&blocked_host).len_ns()
                },
                exposed_transfer_ns: set.intersect(&w.exposed_transfer).len_ns(),
                exposed_wait_ns: set.intersect(&w.exposed_wait).len_ns(),
                from_autograd,
            });
        }
    }
    (out, of_event)
}

/// The operators a phase group holds: the work that grows with the batch (forward, backward,
/// the rest of the step) and the optimizer's, whose work depends on the parameters only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpGroup {
    Work,
    Optimizer,
}

impl OpGroup {
    fn of(ph: Phase) -> Option<OpGroup> {
        match ph {
            Phase::Optimizer => Some(OpGroup::Optimizer),
            Phase::DataLoading => None,
            _ => Some(OpGroup::Work),
        }
    }
}

/// How long a rank's operators typically take against the same operators on the other ranks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpSpeed {
    pub rank: u32,
    pub group: OpGroup,
    /// The duration-weighted median, over the operator instances this rank shares with the
    /// others, of (its typical duration / the other ranks' median of theirs); weights are the
    /// others' durations. 1 = the same operators run as long as elsewhere.
    pub ratio: f64,
    /// Instances compared.
    pub instances: u32,
    /// Sums of the compared instances' typical durations: this rank's, the others' medians'.
    pub rank_ns: i64,
    pub others_ns: i64,
    /// The instance of the group whose typical duration exceeds the others' the most.
    #[serde(default)]
    pub top: Option<OpExcess>,
}

/// One operator instance of a rank against the same instance on the other ranks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpExcess {
    pub phase: Phase,
    pub name: String,
    pub ordinal: u32,
    /// Typical duration here, and the other ranks' median of theirs.
    pub rank_ns: i64,
    pub others_ns: i64,
    /// The same for its own time (no operator nested in it running).
    pub own_rank_ns: i64,
    pub own_others_ns: i64,
    /// It runs other operators (a frame, as an autograd node around its hooks), not a leaf.
    pub nests: bool,
}

/// At least this many shared operator instances make a ratio.
pub const MIN_OP_INSTANCES: usize = 8;

/// Per rank and [`OpGroup`]: its operators' typical durations against the same operator
/// instances on the other ranks ([`super::regions::OpTypical`]: median over the steps of each
/// instance).
///
/// **Why.** A rank late because it has more work (a larger batch, longer sequences) runs the
/// same operators on larger inputs: each of its forward and backward operators takes longer
/// every step, while its optimizer's, whose work depends on the parameters only, take as long as
/// elsewhere. A slower device slows every operator alike, the optimizer's too. Preemption on an
/// oversubscribed host lengthens *some* instances in *some* steps, which the median over steps
/// and the weighted median over instances both leave out: a rank whose operators typically run
/// as fast as elsewhere but whose phases took longer lost that time in bursts, not in larger
/// work. Phase totals cannot tell these apart: the rank that computed longest is also the one the
/// host's scheduler lets wait in its next phase.
pub fn op_speed(parts: &[RankPart]) -> Vec<OpSpeed> {
    // Instance (group, phase, name, ordinal) → (rank, its typical figures).
    type Instance<'a> = (OpGroup, Phase, &'a str, u32);
    let mut by_key: BTreeMap<Instance<'_>, Vec<(u32, &super::regions::OpTypical)>> = BTreeMap::new();
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    for p in parts {
        if !seen.insert(p.info.rank) {
            continue;
        }
        let rr = &p.regions;
        for o in &rr.op_typical {
            let (Some(g), Some(name)) = (OpGroup::of(o.phase), rr.op_names.get(o.name as usize)) else {
                continue;
            };
            by_key.entry((g, o.phase, name.as_str(), o.ordinal)).or_default().push((p.info.rank, o));
        }
    }
    // The median of the others' values: `sorted` less one occurrence of `mine`.
    fn others_median(sorted: &[i64], mine: i64) -> i64 {
        let p = sorted.partition_point(|&x| x < mine);
        let at = |i: usize| sorted.get(if i < p { i } else { i + 1 }).copied().unwrap_or(0);
        let m = sorted.len().saturating_sub(1);
        match m {
            0 => 0,
            m if m % 2 == 1 => at(m / 2),
            m => (at(m / 2 - 1) + at(m / 2)) / 2,
        }
    }
    // Per (rank, group): (ratio, weight) per shared instance, the sums, the largest excess.
    #[derive(Default)]
    struct Acc {
        ratios: Vec<(f64, f64)>,
        rank_ns: i64,
        others_ns: i64,
        top: Option<OpExcess>,
    }
    let mut acc: BTreeMap<(u32, OpGroup), Acc> = BTreeMap::new();
    // An instance only one rank runs (a hook registered on that rank only) took 0 on the
    // others: it has an excess but no ratio.
    for ((g, phase, name, ordinal), v) in &by_key {
        let mut sorted: Vec<i64> = v.iter().map(|x| x.1.median_ns).collect();
        sorted.sort_unstable();
        let mut own_sorted: Vec<i64> = v.iter().map(|x| x.1.own_median_ns).collect();
        own_sorted.sort_unstable();
        let nests = v.iter().any(|x| x.1.nests);
        for &(rank, o) in v {
            let mine = o.median_ns;
            let others = others_median(&sorted, mine);
            let e = acc.entry((rank, *g)).or_default();
            if e.top.as_ref().is_none_or(|t| mine - others > t.rank_ns - t.others_ns) {
                e.top = Some(OpExcess {
                    phase: *phase,
                    name: name.to_string(),
                    ordinal: *ordinal,
                    rank_ns: mine,
                    others_ns: others,
                    own_rank_ns: o.own_median_ns,
                    own_others_ns: others_median(&own_sorted, o.own_median_ns),
                    nests,
                });
            }
            if others <= 0 {
                continue;
            }
            e.ratios.push((mine as f64 / others as f64, others as f64));
            e.rank_ns += mine;
            e.others_ns += others;
        }
    }
    acc.into_iter()
        .filter(|(_, a)| a.ratios.len() >= MIN_OP_INSTANCES)
        .map(|((rank, group), a)| {
            let Acc { ratios: mut r, rank_ns, others_ns, top } = a;
            r.sort_by(|a, b| a.0.total_cmp(&b.0));
            let half = r.iter().map(|x| x.1).sum::<f64>() / 2.0;
            let mut run = 0.0;
            let ratio = r
                .iter()
                .find(|x| {
                    run += x.1;
                    run >= half
                })
                .map_or(1.0, |x| x.0);
            OpSpeed { rank, group, ratio, instances: r.len() as u32, rank_ns, others_ns, top }
        })
        .collect()
}

/// Intervals helper for tests and callers: total length of `ivs` inside `[lo, hi)`.
pub fn len_within(ivs: &[Iv], lo: i64, hi: i64) -> i64 {
    Set::from_sorted(ivs.iter().copied()).len_within(lo, hi)
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

    #[test]
    fn late_cost_is_the_least_other_wait_beyond_the_late() {
        // Rank 2 waits 0; the others 400, 410, 395: rank 2 costs 395.
        assert_eq!(late_cost(&[0, 1, 2, 3], &[400, 410, 0, 395], &[2]), 395);
        // Everyone late: nothing to gain from one of them.
        assert_eq!(late_cost(&[0, 1], &[5, 5], &[0, 1]), 0);
    }
}
