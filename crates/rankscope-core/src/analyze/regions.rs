//! Where a rank's host time goes, by user annotation and by training phase.
//!
//! **Regions** are the annotations that bracket work on a CPU thread: `record_function` ranges
//! (`user_annotation`: `forward`, `## backward ##`, `straggler_sleep`, the profiler's own
//! `DistributedDataParallel.forward` and `Optimizer.step#AdamW.step`), DataLoader iterations
//! (`enumerate(DataLoader)#…__next__`) and the step marker itself (`ProfilerStep#N`, named
//! `ProfilerStep`). Python-function events (`python_function`, thousands per step when stacks
//! are recorded) are not regions. Each occurrence of a region on a thread, in a step, gives:
//! - `inclusive_ns`: its duration (clipped to its parent region);
//! - `ops_ns`: the time an operator (any slice that is not a region and not a host
//!   synchronization) runs inside it on the same thread;
//! - `sync_ns`: the time the thread is blocked in a host synchronization inside it
//!   (`cudaStreamSynchronize`, …) and no operator runs;
//! - `free_ns` = inclusive − ops − sync: **no operator running** (Python between ops, a
//!   `time.sleep`, blocking I/O, a lock, the host waiting on a collective's future);
//! - `device_ns`: GPU compute time of the kernels launched from inside it (inclusive of
//!   nested regions; launches from a thread without regions count for the main thread's
//!   region open at the launch).
//!
//! **Phases** partition the main thread's step window (the thread holding `ProfilerStep#N`):
//! every instant belongs to the innermost region that names a phase — `data_loading`
//! (DataLoader), `optimizer` (`Optimizer.*`, `optimizer`, `zero_grad`), `backward` (a name with
//! "backward"), `forward` (a name with "forward") — or to `other`.
//!
//! **Waiting is not work.** At the job level ([`super::attribution`]) the rank's exposed
//! collective wait is subtracted where the main thread was idle or blocked (its long
//! operator-free gaps and its synchronizations, shipped here as `free_gaps` and `sync_spans`), so a rank
//! that waits 400 ms at the end of `backward` for a late peer does not look like a rank whose
//! `backward` is slow.

mod walk;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::intervals::{Iv, Set};
use crate::model::*;
use crate::normalize::job::RankEntry;
use walk::{Runs, Walk};

/// Operator-free gaps at least this long are shipped as intervals (so collective waits can be
/// subtracted at the job level); shorter ones (Python between ops) only count in `free_ns`.
pub const MIN_BLOCKED_GAP_NS: i64 = 200_000;

/// At most this many region occurrences are kept per rank (the rest is counted).
pub const MAX_OCCURRENCES: usize = 50_000;
/// Regions nested deeper than this in counted regions are not kept either (counted in
/// [`RankRegions::dropped`]): each occurrence's figures are folded into every ancestor's, so
/// the fold's work is the occurrences times their depth (regions and operators alternating
/// 16,000 deep took 17 s). Real annotations nest a few levels.
pub const MAX_REGION_DEPTH: u32 = 64;

/// A training phase (defined with the model: findings name it too).
pub use crate::model::Phase;

/// The phase a region's own name (and class) names, if any.
pub fn phase_of(name: &str, class: Class) -> Option<Phase> {
    let n = name.to_ascii_lowercase();
    if class == Class::DataLoading || n.contains("dataloader") {
        return Some(Phase::DataLoading);
    }
    if class == Class::Optimizer || n.starts_with("optimizer") || n.contains("zero_grad") || n == "optim" {
        return Some(Phase::Optimizer);
    }
    if n.contains("backward") {
        return Some(Phase::Backward);
    }
    if n.contains("forward") {
        return Some(Phase::Forward);
    }
    None
}

/// The name a region is compared under: `ProfilerStep#12` is `ProfilerStep`.
pub fn region_name(name: &str) -> &str {
    if name.starts_with("ProfilerStep#") {
        "ProfilerStep"
    } else {
        name
    }
}

/// One occurrence of a region.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Occurrence {
    /// Index into [`RankRegions::names`].
    pub name: u32,
    /// Index of the enclosing occurrence in [`RankRegions::occurrences`].
    pub parent: Option<u32>,
    /// Own phase or the nearest ancestor's.
    pub phase: Phase,
    pub step: u32,
    /// Whether it is on the main thread (the one holding the step markers).
    pub main: bool,
    pub start_ns: i64,
    pub end_ns: i64,
    pub ops_ns: i64,
    pub sync_ns: i64,
    pub free_ns: i64,
    pub device_ns: i64,
}

impl Occurrence {
    pub fn inclusive_ns(&self) -> i64 {
        self.end_ns - self.start_ns
    }
}

/// The main thread's phase partition of one step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepPhases {
    pub step: u32,
    /// Per phase (every phase present, `other` included), its intervals on the main thread.
    pub spans: Vec<(Phase, Vec<Iv>)>,
}

/// At most this many operator instances are kept per rank in [`RankRegions::op_typical`] (the
/// longest: a duration-weighted comparison is decided by them).
pub const MAX_OP_TYPICAL: usize = 2048;

/// One operator instance of the main thread, told apart by its phase, its name and its ordinal
/// among the operators of that name and phase in the step (the 3rd `aten::addmm` of forward is
/// the same layer on every rank and in every step of the same program), with its **median
/// duration over the steps**: what the operator typically takes, whatever preemption added to
/// it in some steps. Operators covering a region's time only (see [`rank_regions`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpTypical {
    pub phase: Phase,
    /// Index into [`RankRegions::op_names`].
    pub name: u32,
    pub ordinal: u32,
    pub median_ns: i64,
    /// Median over the steps of its own time: inside it with no slice nested in it running
    /// (for an operator that runs others, the time outside them: a hook's Python, a sleep).
    #[serde(default)]
    pub own_median_ns: i64,
    /// Whether it runs other operators (in any step): a frame around them, not a leaf.
    #[serde(default)]
    pub nests: bool,
    /// Steps it ran in.
    pub steps: u32,
    /// Its input shapes over the steps, hashed (the `Input Dims` of each step in order, where
    /// the trace records them: `record_shapes=True`, for the operators of
    /// [`crate::model::ShapedOp`]); none where some step has none. The same instance on two
    /// ranks ran on the same inputs when equal ([`crate::analyze::attribution::op_speed`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shapes: Option<u64>,
    /// Median over the steps of the slices nested in it at any depth: how many operators it
    /// runs (an autograd node that recomputes its forward runs more).
    #[serde(default)]
    pub nested: u32,
}

/// What one rank ships about its regions.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RankRegions {
    pub names: Vec<String>,
    pub occurrences: Vec<Occurrence>,
    pub phases: Vec<StepPhases>,
    /// The main thread's operator-free gaps of at least [`MIN_BLOCKED_GAP_NS`] inside steps,
    /// and its host synchronizations: where a collective wait can hide.
    pub free_gaps: Vec<Iv>,
    pub sync_spans: Vec<Iv>,
    /// Occurrences beyond [`MAX_OCCURRENCES`] or [`MAX_REGION_DEPTH`], not kept.
    pub dropped: usize,
    /// The main thread's operators, each instance's typical duration (the longest
    /// [`MAX_OP_TYPICAL`]), and the names they index.
    #[serde(default)]
    pub op_typical: Vec<OpTypical>,
    #[serde(default)]
    pub op_names: Vec<String>,
    /// Per step, how many operators of the step's work the main thread ran ([`StepOps`]).
    #[serde(default)]
    pub step_ops: Vec<StepOps>,
}

/// How many operators the main thread ran in one step's work (forward, backward and the rest of
/// the step; not the optimizer's or the data loader's): a rank that runs more of them in one
/// step than in its others has more work in that step, whatever its host's speed.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct StepOps {
    pub step: u32,
    /// Operators run in the step: every covering operator of the main thread (each instance of
    /// [`OpTypical`], not only the kept longest) and every slice nested in it.
    pub ops: u32,
}

impl RankRegions {
    /// The innermost main-thread occurrence open at `ts` (rank clock). `main` lists the main
    /// thread's occurrences in start order (see [`RankRegions::main_occurrences`]).
    pub fn region_at(&self, main: &[usize], ts: i64) -> Option<usize> {
        let j = main.partition_point(|&k| self.occurrences.get(k).is_some_and(|o| o.start_ns <= ts));
        let mut cur = j.checked_sub(1).and_then(|j| main.get(j).copied());
        while let Some(c) = cur {
            let o = self.occurrences.get(c)?;
            if ts < o.end_ns {
                return Some(c);
            }
            cur = o.parent.map(|q| q as usize);
        }
        None
    }

    /// Indices of the main thread's occurrences, in start order.
    pub fn main_occurrences(&self) -> Vec<usize> {
        (0..self.occurrences.len()).filter(|&k| self.occurrences[k].main).collect()
    }

    /// The name of occurrence `k`.
    pub fn name_of(&self, k: usize) -> &str {
        self.occurrences.get(k).and_then(|o| self.names.get(o.name as usize)).map_or("", String::as_str)
    }
}

pub(crate) fn is_region(t: &RankTrace, strings: &StringTable, i: usize) -> bool {
    let e = &t.events;
    // The class first: it rules out most rows without a look at their category's text.
    if e.kind[i] != EventKind::Slice
        || !matches!(e.class[i], Class::DataLoading | Class::Optimizer | Class::Annotation)
    {
        return false;
    }
    let cat = strings.get(e.cat[i]);
    if cat.eq_ignore_ascii_case("python_function") {
        return false;
    }
    e.class[i] != Class::Annotation || !cat.eq_ignore_ascii_case("gpu_user_annotation")
}

/// The regions of one rank, per step window.
pub fn rank_regions(
    r: &RankEntry,
    strings: &StringTable,
    windows: &[(u32, i64, i64)],
    blocked: &[(LaneId, Iv)],
) -> RankRegions {
    let t = &r.trace;
    let main = main_lane(t, strings);
    let mut walk = Walk::new(t, strings, blocked, main);
    for (l, rows) in cpu_slices_by_lane(t).iter().enumerate() {
        walk.lane(l, rows);
    }
    let Walk { mut out, occ_ops, occ_sync, durations, own_phase, main_ops, main_sync, lane_occ, .. } = walk;
    keep_op_typical(&mut out, durations, strings);
    fold_occurrences(&mut out.occurrences, occ_ops, occ_sync);
    add_device_time(&mut out.occurrences, r, &lane_occ, main);
    // The main thread: phases per step window, and where a wait can hide.
    if let Some(m) = main {
        main_thread_spans(&mut out, windows, main_sync, main_ops);
        main_thread_phases(&mut out, windows, &lane_occ[m], &own_phase);
    }
    out
}

/// The main thread: the CPU lane holding the step markers, else the one with most regions (the
/// lowest such lane on a tie); `None` when no CPU lane has either.
fn main_lane(t: &RankTrace, strings: &StringTable) -> Option<usize> {
    let e = &t.events;
    let n_lanes = t.lanes.len();
    let cpu_lane = |l: usize| t.lanes.kind.get(l) == Some(&LaneKind::Cpu);
    let mut marker_count = vec![0usize; n_lanes];
    let mut region_count = vec![0usize; n_lanes];
    // Each distinct name of the rank looked at once, not each row's.
    let mut marker: FxHashMap<StrId, bool> = FxHashMap::default();
    for i in 0..e.len() {
        let l = e.lane[i].0 as usize;
        if l >= n_lanes || !cpu_lane(l) || e.kind[i] != EventKind::Slice {
            continue;
        }
        if *marker.entry(e.name[i]).or_insert_with(|| strings.get(e.name[i]).starts_with("ProfilerStep#")) {
            marker_count[l] += 1;
        }
        if is_region(t, strings, i) {
            region_count[l] += 1;
        }
    }
    (0..n_lanes)
        .filter(|&l| cpu_lane(l))
        .max_by_key(|&l| (marker_count[l], region_count[l], std::cmp::Reverse(l)))
        .filter(|&l| marker_count[l] + region_count[l] > 0)
}

/// Per lane, the rows of its CPU slices with a non-negative duration, in row order (empty for a
/// lane that is not a CPU thread).
fn cpu_slices_by_lane(t: &RankTrace) -> Vec<Vec<usize>> {
    let e = &t.events;
    let n_lanes = t.lanes.len();
    let mut by_lane: Vec<Vec<usize>> = vec![Vec::new(); n_lanes];
    for i in 0..e.len() {
        let l = e.lane[i].0 as usize;
        if l < n_lanes
            && t.lanes.kind.get(l) == Some(&LaneKind::Cpu)
            && e.kind[i] == EventKind::Slice
            && e.dur_ns[i] >= 0
        {
            by_lane[l].push(i);
        }
    }
    by_lane
}

/// The main thread's operator instances' typical durations ([`OpTypical`]): the longest
/// [`MAX_OP_TYPICAL`] by median, kept in instance order, with the names they index.
fn keep_op_typical(
    out: &mut RankRegions,
    durations: BTreeMap<(Phase, StrId, u32), Runs>,
    strings: &StringTable,
) {
    // Per step, how many operators of the step's work ran (all but the optimizer's and the
    // data loader's), nested ones included.
    let mut per_step: BTreeMap<u32, u32> = BTreeMap::new();
    let mut typical: Vec<((Phase, StrId, u32), OpTypical)> = durations
        .into_iter()
        .map(|((phase, name, ordinal), v)| {
            let median_ns = super::stats::median(v.iter().map(|x| x.dur_ns).collect());
            if !matches!(phase, Phase::Optimizer | Phase::DataLoading) {
                for x in &v {
                    *per_step.entry(x.step).or_default() += 1 + x.nested;
                }
            }
            let t = OpTypical {
                phase,
                name: 0,
                ordinal,
                median_ns,
                own_median_ns: super::stats::median(v.iter().map(|x| x.own_ns).collect()),
                nests: v.iter().any(|x| x.kids > 0),
                steps: v.len() as u32,
                shapes: v.iter().all(|x| x.dims != 0).then(|| {
                    v.iter()
                        .fold(0xcbf2_9ce4_8422_2325_u64, |h, x| (h ^ x.dims).wrapping_mul(0x0100_0000_01b3))
                }),
                nested: super::stats::median(v.iter().map(|x| i64::from(x.nested)).collect()).max(0) as u32,
            };
            ((phase, name, ordinal), t)
        })
        .collect();
    out.step_ops = per_step.into_iter().map(|(step, ops)| StepOps { step, ops }).collect();
    typical.sort_by(|a, b| b.1.median_ns.cmp(&a.1.median_ns).then(a.0.cmp(&b.0)));
    typical.truncate(MAX_OP_TYPICAL);
    typical.sort_by_key(|a| a.0);
    let mut op_ids: FxHashMap<StrId, u32> = FxHashMap::default();
    for ((_, name, _), mut t) in typical {
        let next = op_ids.len() as u32;
        t.name = *op_ids.entry(name).or_insert_with(|| {
            out.op_names.push(strings.get(name).to_string());
            next
        });
        out.op_typical.push(t);
    }
}

/// Each occurrence's `ops_ns`, `sync_ns` and `free_ns` from its own intervals (`occ_ops`,
/// `occ_sync`) and its child regions' results.
fn fold_occurrences(occurrences: &mut [Occurrence], occ_ops: Vec<Vec<Iv>>, occ_sync: Vec<Vec<Iv>>) {
    // Children regions cover their parent like operators do, by their own ops and syncs: fold
    // each occurrence's figures up into its ancestors after computing its own.
    let n = occurrences.len();
    // Each occurrence's raw intervals are its own plus its children's results, appended by each
    // child and made a set once when the occurrence's turn comes: one union per occurrence, not
    // one per child (a region with thousands of child regions re-merged its growing set for
    // each of them, quadratic in the children).
    let mut sub_ops: Vec<Vec<Iv>> = occ_ops;
    let mut sub_sync: Vec<Vec<Iv>> = occ_sync;
    // Occurrences are pushed in start order, parents before children: fold from the end.
    for k in (0..n).rev() {
        let o = &occurrences[k];
        let (lo, hi) = (o.start_ns, o.end_ns);
        let sync = Set::from_unsorted(std::mem::take(&mut sub_sync[k])).clip(lo, hi);
        let ops = Set::from_unsorted(std::mem::take(&mut sub_ops[k])).clip(lo, hi).subtract(&sync);
        let ops_ns = ops.len_ns();
        let sync_ns = sync.len_ns();
        let parent = o.parent;
        let o = &mut occurrences[k];
        o.ops_ns = ops_ns;
        o.sync_ns = sync_ns;
        o.free_ns = (hi - lo - ops_ns - sync_ns).max(0);
        if let Some(p) = parent.map(|p| p as usize).filter(|&p| p < k) {
            sub_ops[p].extend_from_slice(ops.intervals());
            sub_sync[p].extend_from_slice(sync.intervals());
        }
    }
}

/// Each occurrence's `device_ns`: the GPU compute launched from inside it (inclusive: added to
/// every ancestor), a launch from a thread without regions counting for the main thread's
/// region open at the launch.
fn add_device_time(
    occurrences: &mut [Occurrence],
    r: &RankEntry,
    lane_occ: &[Vec<usize>],
    main: Option<usize>,
) {
    let e = &r.trace.events;
    let n = occurrences.len();
    let main_occ: &[usize] = main.map_or(&[], |m| lane_occ[m].as_slice());
    let deepest = |list: &[usize], ts: i64| -> Option<usize> {
        let k = list.partition_point(|&o| occurrences[o].start_ns <= ts);
        let mut cur = k.checked_sub(1).map(|k| list[k]);
        while let Some(c) = cur {
            let o = &occurrences[c];
            if ts < o.end_ns {
                return Some(c);
            }
            cur = o.parent.map(|p| p as usize);
        }
        None
    };
    let mut device = vec![0i64; n];
    for (g, l) in r.norm.links.gpu.iter().zip(&r.norm.links.launch) {
        let (g, l) = (g.0 as usize, l.0 as usize);
        if e.class.get(g) != Some(&Class::Compute) {
            continue;
        }
        let lane = e.lane[l].0 as usize;
        let ts = e.ts_ns[l];
        let own = lane_occ.get(lane).and_then(|list| deepest(list, ts));
        let Some(mut cur) = own.or_else(|| deepest(main_occ, ts)) else { continue };
        loop {
            device[cur] += e.dur_ns[g].max(0);
            match occurrences[cur].parent {
                Some(p) if (p as usize) < cur => cur = p as usize,
                _ => break,
            }
        }
    }
    for (o, d) in occurrences.iter_mut().zip(device) {
        o.device_ns = d;
    }
}

/// The main thread's [`RankRegions::free_gaps`] (operator-free gaps of at least
/// [`MIN_BLOCKED_GAP_NS`] in the step windows, outside synchronizations) and
/// [`RankRegions::sync_spans`]: where a wait can hide.
fn main_thread_spans(
    out: &mut RankRegions,
    windows: &[(u32, i64, i64)],
    main_sync: Vec<Iv>,
    main_ops: Vec<Iv>,
) {
    let sync = Set::from_unsorted(main_sync);
    let ops = Set::from_unsorted(main_ops).subtract(&sync);
    let mut cands: Vec<Iv> = Vec::new();
    for &(_, lo, hi) in windows {
        for &(a, b) in ops.gaps(lo, hi).intervals() {
            if b - a >= MIN_BLOCKED_GAP_NS {
                cands.push((a, b));
            }
        }
    }
    out.free_gaps = Set::from_unsorted(cands).subtract(&sync).intervals().to_vec();
    out.sync_spans = sync.intervals().to_vec();
}

/// The main thread's phase partition of each step window ([`RankRegions::phases`]): each
/// instant goes to the innermost of its occurrences (`main_occ`, in start order) whose own name
/// names a phase, else to `other`.
fn main_thread_phases(
    out: &mut RankRegions,
    windows: &[(u32, i64, i64)],
    main_occ: &[usize],
    own_phase: &[Option<Phase>],
) {
    // The main thread's occurrences of each step, in start order.
    let mut by_step: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for &k in main_occ {
        if let Some(o) = out.occurrences.get(k) {
            by_step.entry(o.step).or_default().push(k);
        }
    }
    for &(step, lo, hi) in windows {
        // Innermost phase-bearing occurrence wins: paint occurrences in start order
        // (parents before children), each overwriting what it covers.
        let mut painted: Vec<(Iv, Phase)> = vec![((lo, hi), Phase::Other)];
        for &k in by_step.get(&step).map_or(&[][..], Vec::as_slice) {
            let o = &out.occurrences[k];
            if o.end_ns <= lo || o.start_ns >= hi {
                continue;
            }
            let Some(ph) = own_phase[k] else { continue };
            paint(&mut painted, o.start_ns.max(lo), o.end_ns.min(hi), ph);
        }
        let mut spans: Vec<(Phase, Vec<Iv>)> = Vec::new();
        for ph in Phase::ALL {
            let ivs: Vec<Iv> = painted.iter().filter(|x| x.1 == ph).map(|x| x.0).collect();
            let set = Set::from_unsorted(ivs);
            if !set.is_empty() {
                spans.push((ph, set.intervals().to_vec()));
            }
        }
        out.phases.push(StepPhases { step, spans });
    }
}

/// Paints `[a, b)` with `ph` over `painted`, a partition of the step window into non-empty
/// pieces sorted by start: the pieces it overlaps (a contiguous run, found by binary search)
/// give way to it, keeping their parts outside it. Occurrences come in start order, so the run
/// and the pieces after it are few (the enclosing occurrences' tails): O(log P + depth) per
/// occurrence. An empty `[a, b)` changes no phase's union, so it is not painted. Returns the
/// pieces it replaced or moved (the work, which a test bounds).
fn paint(painted: &mut Vec<(Iv, Phase)>, a: i64, b: i64, ph: Phase) -> usize {
    if b <= a {
        return 0;
    }
    let i0 = painted.partition_point(|&((_, y), _)| y <= a);
    let i1 = painted.partition_point(|&((x, _), _)| x < b).max(i0);
    let mut with: Vec<(Iv, Phase)> = Vec::with_capacity(3);
    if let Some(&((x, _), p)) = painted.get(i0).filter(|_| i0 < i1) {
        if x < a {
            with.push(((x, a), p));
        }
    }
    with.push(((a, b), ph));
    if let Some(&((_, y), p)) = i1.checked_sub(1).filter(|&j| j >= i0 && i0 < i1).and_then(|j| painted.get(j))
    {
        if y > b {
            with.push(((b, y), p));
        }
    }
    let work = painted.len() - i0;
    painted.splice(i0..i1, with);
    work
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_from_names() {
        assert_eq!(phase_of("## forward ##", Class::Annotation), Some(Phase::Forward));
        assert_eq!(phase_of("DistributedDataParallel.forward", Class::Annotation), Some(Phase::Forward));
        assert_eq!(phase_of("backward", Class::Annotation), Some(Phase::Backward));
        assert_eq!(phase_of("Optimizer.step#AdamW.step", Class::Optimizer), Some(Phase::Optimizer));
        assert_eq!(
            phase_of("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", Class::DataLoading),
            Some(Phase::DataLoading)
        );
        assert_eq!(phase_of("straggler_sleep", Class::Annotation), None);
        assert_eq!(region_name("ProfilerStep#7"), "ProfilerStep");
    }

    /// What `paint` replaced: rebuild every piece, then sort (quadratic over a step's regions).
    fn paint_naive(painted: &[(Iv, Phase)], a: i64, b: i64, ph: Phase) -> Vec<(Iv, Phase)> {
        let mut next = Vec::new();
        for &((x, y), p) in painted {
            if y <= a || x >= b {
                next.push(((x, y), p));
                continue;
            }
            if x < a {
                next.push(((x, a), p));
            }
            if y > b {
                next.push(((b, y), p));
            }
        }
        next.push(((a, b), ph));
        next.sort_unstable_by_key(|x| x.0);
        next
    }

    fn unions(painted: &[(Iv, Phase)]) -> Vec<(Phase, Vec<Iv>)> {
        Phase::ALL
            .iter()
            .map(|&ph| {
                let ivs = painted.iter().filter(|x| x.1 == ph).map(|x| x.0).collect();
                (ph, Set::from_unsorted(ivs).intervals().to_vec())
            })
            .collect()
    }

    #[test]
    fn paint_equals_the_rebuild_on_random_occurrences() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n) as i64
        };
        for _ in 0..500 {
            let (lo, hi) = (0, 1000);
            let (mut fast, mut slow) = (vec![((lo, hi), Phase::Other)], vec![((lo, hi), Phase::Other)]);
            // Starts in order (as occurrences come), ends anywhere: nested, disjoint, overlapping
            // and empty intervals alike.
            let mut start = 0;
            for _ in 0..rnd(40) {
                start += rnd(60);
                let (a, b) = (start.min(hi), (start + rnd(400) - 20).clamp(lo, hi));
                let ph = Phase::ALL[rnd(5) as usize];
                paint(&mut fast, a, b, ph);
                slow = paint_naive(&slow, a, b, ph);
                assert_eq!(unions(&fast), unions(&slow), "after [{a}, {b})");
            }
        }
    }

    /// The shape of the data-loading slowdown (issue 12): with every `aten::` operator a
    /// data-loading region, a step holds thousands of sibling regions. Painting them must cost
    /// a constant per region, not the step's whole painting.
    #[test]
    fn painting_many_siblings_is_linear() {
        let n = 10_000;
        let mut painted = vec![((0, 10 * n + 10), Phase::Other)];
        let mut work = paint(&mut painted, 0, 10 * n + 5, Phase::Forward);
        for i in 0..n {
            work += paint(&mut painted, 10 * i + 1, 10 * i + 6, Phase::DataLoading);
            work += paint(&mut painted, 10 * i + 2, 10 * i + 3, Phase::Backward);
        }
        assert_eq!(painted.len() as i64, 4 * n + 2);
        assert!(work <= 8 * n as usize, "{work} pieces moved for {n} siblings");
    }
}
