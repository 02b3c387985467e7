//! Normalization of one rank's raw tables: lane kinds, time order, classes, launch → GPU
//! links and steps. Job-level normalization (ranks, one string table) is in [`job`].

pub mod classify;
pub mod coverage;
pub mod iterations;
pub mod job;
pub mod multirank;
pub mod steps;

pub use classify::{coll_kind_of, mem_kind_of, Rules};
pub use job::{
    assemble, assemble_with, claim_of, decide, Job, JobError, RankClaim, RankDecision, RankSource, RANK_KINDS,
};

use crate::model::*;

/// Categories only GPU-side events have (case-insensitive).
const GPU_CATS: &[&str] = &[
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "memcpy",
    "memset",
    "gpu_user_annotation",
    "cuda_sync",
    "cuda_profiler_range",
    "mtia_ccp_events",
];

/// Categories of host-side runtime/driver calls that launch device work.
pub const RUNTIME_CATS: &[&str] = &["cuda_runtime", "cuda_driver", "runtime", "mtia_runtime"];

/// The CUDA / HIP runtime and driver categories (HIP calls are written as `cuda_runtime` too).
pub const CUDA_RUNTIME_CATS: &[&str] = &["cuda_runtime", "cuda_driver", "runtime"];

fn cat_in(cat: &str, list: &[&str]) -> bool {
    list.iter().any(|c| c.eq_ignore_ascii_case(cat))
}

/// Whether events of category `cat` run on a device (what makes a lane a GPU stream).
pub(crate) fn is_gpu_cat(cat: &str) -> bool {
    cat_in(cat, GPU_CATS)
}

/// Whether events of category `cat` are runtime or driver calls that launch device work.
pub(crate) fn is_runtime_cat(cat: &str) -> bool {
    cat_in(cat, RUNTIME_CATS)
}

/// Launch → GPU links, one row per GPU event whose launching runtime call was found.
#[derive(Debug, Clone, Default)]
pub struct Links {
    /// Sorted by GPU event.
    pub gpu: Vec<EventIdx>,
    pub launch: Vec<EventIdx>,
    /// GPU events with no launch in the trace (launched before the profiler window, or a
    /// trace without correlation ids).
    pub unlinked: u64,
}

impl Links {
    /// The runtime call that launched GPU event `gpu`.
    pub fn launch_of(&self, gpu: EventIdx) -> Option<EventIdx> {
        self.gpu.binary_search(&gpu).ok().and_then(|i| self.launch.get(i).copied())
    }
}

/// Step intervals of one rank.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct StepTable {
    /// Step numbers (`N` of `ProfilerStep#N`), in time order.
    pub number: Vec<u32>,
    pub start_ns: Vec<i64>,
    pub end_ns: Vec<i64>,
    /// True when the trace has no step markers and the one step is the whole trace.
    pub synthetic: bool,
    /// Step numbers seen on the GPU (`gpu_user_annotation` `ProfilerStep#N`).
    pub gpu_numbers: Vec<u32>,
    /// Set when the steps are an inference engine's iterations (no `ProfilerStep#N`:
    /// [`iterations`]).
    pub iterations: Option<iterations::Iterations>,
    /// True when the trace has no step markers and its steps are its training iterations, each
    /// ending with its optimizer's step (`Optimizer.step#…`, [`steps::optimizer_steps`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub from_optimizer: bool,
}

impl StepTable {
    pub fn len(&self) -> usize {
        self.number.len()
    }
    pub fn is_empty(&self) -> bool {
        self.number.is_empty()
    }
}

/// What normalization adds to a rank.
#[derive(Debug, Clone, Default)]
pub struct Normalized {
    pub links: Links,
    pub steps: StepTable,
    /// First start and last end over the slices, outliers left out ([`steps::span_and_outliers`]).
    pub span: (i64, i64),
    /// What the classification understood ([`coverage`]).
    pub coverage: coverage::Coverage,
}

/// Normalizes one rank in place: decides lane kinds, sorts the rows by time (parents before
/// children), classifies every event, links GPU work to its launch and assigns steps.
pub fn normalize_rank(t: &mut RankTrace, rules: &Rules) -> Normalized {
    normalize_rank_with(t, rules, &crate::join::Serial)
}

/// [`normalize_rank`], its sort, reordering and classification split over `j` (a host with a
/// core to spare sorts and classifies the halves of one large trace side by side): the same
/// result.
pub fn normalize_rank_with(t: &mut RankTrace, rules: &Rules, j: &impl crate::join::Join) -> Normalized {
    lane_kinds(t);
    sort_rows(t, j);
    // The span and the classes read different columns: side by side.
    let (((lo, hi), outliers, first), (class, detail, rule)) =
        j.join(|| steps::span_and_outliers(&t.events), || classes(t, rules, j));
    if let Some(i) = first {
        let (ts, name) = (t.events.ts_ns[i], t.strings.get(t.events.name[i]).to_string());
        t.diagnostics.add_n(DiagKind::TimeOutlier, outliers, None, || {
            format!(
                "{outliers} event(s) lie far outside the rest of the trace (the first: `{name}` at {ts} ns, while the others run from {lo} to {hi} ns); kept, but left out of the span"
            )
        });
    }
    t.events.class = class;
    t.events.detail = detail;
    // The links and the CPU rows' steps read different columns: side by side.
    let (links, found) = j.join(|| link(t), || steps::find(t, (lo, hi)));
    let structural = coverage::comm_by_structure(t, &links, &rule, rules);
    let coverage = coverage::coverage(t, &rule, rules, &structural);
    let steps = steps::assign(t, &links, found);
    Normalized { links, steps, span: (lo, hi), coverage }
}

/// A lane is a GPU stream when it holds GPU-only event categories; otherwise it is a CPU
/// thread. GPU lanes get their device (from `args.device`,
/// the label, or the pid) and stream (from `args.stream`, or a `"stream 7"` tid).
fn lane_kinds(t: &mut RankTrace) {
    let n = t.lanes.len();
    let mut gpu = vec![false; n];
    let mut gpu_cat = FxHashMap::<StrId, bool>::default();
    for (i, &c) in t.events.cat.iter().enumerate() {
        let is = *gpu_cat.entry(c).or_insert_with(|| cat_in(t.strings.get(c), GPU_CATS));
        if is {
            if let Some(g) = gpu.get_mut(t.events.lane[i].0 as usize) {
                *g = true;
            }
        }
    }
    for l in 0..n {
        let pid = t.lanes.pid[l];
        let label = t.meta.process_labels.iter().find(|(p, _)| *p == pid).map(|(_, s)| s.as_str());
        // Labels alone do not make a lane a GPU stream: a CPU process with pid 1 and GPU 1 can
        // share a pid (seen in a real ROCm trace), so only the events decide.
        let label_dev = label.and_then(|s| s.strip_prefix("GPU ")).and_then(|d| d.trim().parse::<i64>().ok());
        if gpu[l] {
            t.lanes.kind[l] = LaneKind::Gpu;
            if t.lanes.device[l] < 0 {
                t.lanes.device[l] = label_dev.unwrap_or(match pid {
                    IdKey::Int(p) if (0..1024).contains(&p) => p,
                    _ => -1,
                });
            }
            if t.lanes.stream[l] < 0 {
                t.lanes.stream[l] = match t.lanes.tid[l] {
                    IdKey::Int(s) => s,
                    IdKey::Str(s) => {
                        t.strings.get(s).rsplit(' ').next().and_then(|x| x.parse().ok()).unwrap_or(-1)
                    }
                };
            }
        } else {
            t.lanes.kind[l] = LaneKind::Cpu;
            t.lanes.device[l] = -1;
            t.lanes.stream[l] = -1;
        }
    }
}

/// Sorts rows by start time, longer first on ties (a parent before its children), then lane,
/// then file order, and keeps the argument table pointing at the right rows.
fn sort_rows(t: &mut RankTrace, j: &impl crate::join::Join) {
    let e = &t.events;
    let key = |i: u32| {
        let i = i as usize;
        (e.ts_ns[i], std::cmp::Reverse(e.dur_ns[i]), e.lane[i], i)
    };
    let mut perm: Vec<u32> = (0..e.len() as u32).collect();
    if perm.windows(2).all(|w| key(w[0]) <= key(w[1])) {
        return;
    }
    sort_perm(j, &mut perm, &key, 0);
    let mut inverse = vec![0u32; perm.len()];
    for (new, &old) in perm.iter().enumerate() {
        inverse[old as usize] = new as u32;
    }
    t.events.permute_with(&perm, j);
    if let Some(r) = &mut t.raw_args {
        r.permute(&perm);
    }
    for ev in &mut t.comm.event {
        if let Some(&n) = inverse.get(ev.0 as usize) {
            *ev = EventIdx(n);
        }
    }
}

/// Rows below which a sort (or the classification) is not split: a thread and the split pass
/// would cost more than they save.
const SORT_SPLIT_ROWS: usize = 1 << 17;

/// Sorts `perm` by `key` (unique per row, so any sort gives the one order): split at a pivot,
/// the median of a sample of keys, into the rows before it and the rest (each in the order it
/// had), the two sorted over `j`, at most three levels deep. No merge after: the first part's
/// rows all come before the second's.
fn sort_perm<K: Ord + Sync>(
    j: &impl crate::join::Join,
    perm: &mut [u32],
    key: &(impl Fn(u32) -> K + Sync),
    depth: u32,
) {
    let n = perm.len();
    if n < SORT_SPLIT_ROWS || depth >= 3 {
        perm.sort_by_key(|&i| key(i));
        return;
    }
    let mut sample: Vec<K> = perm.iter().step_by(n / 255).map(|&i| key(i)).collect();
    sample.sort();
    let Some(pivot) = sample.into_iter().nth(127) else {
        perm.sort_by_key(|&i| key(i));
        return;
    };
    // Each half of the rows split at the pivot side by side (a serial pass over every row was
    // the one part of the sort not shared), then the four runs laid out in order.
    let split = |rows: &[u32]| {
        let mut before = Vec::with_capacity(rows.len() / 2 + 1);
        let mut after = Vec::with_capacity(rows.len() / 2 + 1);
        for &i in rows {
            if key(i) < pivot {
                before.push(i);
            } else {
                after.push(i);
            }
        }
        (before, after)
    };
    let (left, right) = perm.split_at(n / 2);
    let ((b1, a1), (b2, a2)) = j.join(|| split(left), || split(right));
    let m = b1.len() + b2.len();
    let mut at = 0;
    for run in [b1, b2, a1, a2] {
        perm[at..at + run.len()].copy_from_slice(&run);
        at += run.len();
    }
    let (a, b) = perm.split_at_mut(m);
    j.join(|| sort_perm(j, a, key, depth + 1), || sort_perm(j, b, key, depth + 1));
}

/// The class, detail and deciding rule of every row, the halves over `j` when they are many.
fn classes(
    t: &RankTrace,
    rules: &Rules,
    j: &impl crate::join::Join,
) -> (Vec<Class>, Vec<u8>, Vec<classify::RuleIdx>) {
    let n = t.events.len();
    // Rows `lo..hi`, each half with its own cache (a pure function of the row's strings).
    let part = |lo: usize, hi: usize| -> (Vec<Class>, Vec<u8>, Vec<classify::RuleIdx>) {
        let mut cache = classify::ClassCache::default();
        let mut class = Vec::with_capacity(hi - lo);
        let mut detail = Vec::with_capacity(hi - lo);
        let mut rule = Vec::with_capacity(hi - lo);
        for i in lo..hi {
            let lane = t.lanes.kind.get(t.events.lane[i].0 as usize).copied().unwrap_or(LaneKind::Cpu);
            let coll_arg = match t.events.args[i] {
                NONE_U32 => None,
                a => t.comm.collective.get(a as usize).copied().filter(|s| *s != StrId::EMPTY),
            };
            let (c, d, r) = cache.get(rules, &t.strings, t.events.name[i], t.events.cat[i], lane, coll_arg);
            class.push(c);
            detail.push(d);
            rule.push(r);
        }
        (class, detail, rule)
    };
    if n < SORT_SPLIT_ROWS {
        return part(0, n);
    }
    let ((mut class, mut detail, mut rule), (c2, d2, r2)) = j.join(|| part(0, n / 2), || part(n / 2, n));
    class.extend(c2);
    detail.extend(d2);
    rule.extend(r2);
    (class, detail, rule)
}

/// Links each GPU event to the host runtime call with the same `correlation` id. When a
/// correlation id repeats (it should not), the latest launch at or before the GPU event wins.
fn link(t: &RankTrace) -> Links {
    let e = &t.events;
    let mut runtime_cat = FxHashMap::<StrId, bool>::default();
    let mut launches: Vec<(u64, u32)> = Vec::new();
    for i in 0..e.len() {
        if e.correlation[i] == NONE_U64 || t.lanes.kind[e.lane[i].0 as usize] != LaneKind::Cpu {
            continue;
        }
        let is_rt =
            *runtime_cat.entry(e.cat[i]).or_insert_with(|| cat_in(t.strings.get(e.cat[i]), RUNTIME_CATS));
        if is_rt {
            launches.push((e.correlation[i], i as u32));
        }
    }
    let by_corr = CorrMap::new(&launches);
    let mut links = Links::default();
    for i in 0..e.len() {
        if t.lanes.kind[e.lane[i].0 as usize] != LaneKind::Gpu || e.kind[i] != EventKind::Slice {
            continue;
        }
        if !is_gpu_work(e.class[i]) {
            continue;
        }
        match by_corr.get(e.correlation[i]) {
            Some(l) if e.correlation[i] != NONE_U64 => {
                links.gpu.push(EventIdx(i as u32));
                links.launch.push(EventIdx(l));
            }
            _ => links.unlinked += 1,
        }
    }
    links
}

/// Correlation id → the runtime call with it (the last in row order when one repeats): a
/// column indexed from the smallest id when the ids are dense, as the profiler's counter makes
/// them, else a hash map.
enum CorrMap {
    Dense { base: u64, rows: Vec<u32> },
    Sparse(FxHashMap<u64, u32>),
}

impl CorrMap {
    fn new(launches: &[(u64, u32)]) -> CorrMap {
        let lo = launches.iter().map(|l| l.0).min().unwrap_or(0);
        let hi = launches.iter().map(|l| l.0).max().unwrap_or(0);
        // Dense when the column costs at most four slots per launch (or 1,024 in all).
        let span = hi.saturating_sub(lo);
        if span < (launches.len() as u64).saturating_mul(4).max(1024) {
            let mut rows = vec![NONE_U32; span as usize + 1];
            for &(c, i) in launches {
                rows[(c - lo) as usize] = i;
            }
            CorrMap::Dense { base: lo, rows }
        } else {
            CorrMap::Sparse(launches.iter().copied().collect())
        }
    }

    fn get(&self, corr: u64) -> Option<u32> {
        match self {
            CorrMap::Dense { base, rows } => {
                let k = usize::try_from(corr.checked_sub(*base)?).ok()?;
                rows.get(k).copied().filter(|&r| r != NONE_U32)
            }
            CorrMap::Sparse(m) => m.get(&corr).copied(),
        }
    }
}

/// GPU work (as opposed to GPU-side annotations).
pub fn is_gpu_work(c: Class) -> bool {
    matches!(c, Class::Compute | Class::Communication | Class::Memory | Class::Sync)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::join::Backwards;

    /// The dense column and the hash map answer alike: the last launch of a repeated id, none
    /// for an id never launched, below or above the ids seen.
    #[test]
    fn correlation_lookups_dense_or_sparse() {
        let dense = [(100u64, 0u32), (101, 1), (103, 2), (101, 5), (104, 6)];
        let sparse = [(100u64, 0u32), (1 << 40, 1), (101, 2), (1 << 40, 3)];
        for launches in [&dense[..], &sparse[..]] {
            let m = CorrMap::new(launches);
            assert_eq!(matches!(m, CorrMap::Dense { .. }), launches == dense);
            let want: FxHashMap<u64, u32> = launches.iter().copied().collect();
            for c in [0, 99, 100, 101, 102, 103, 104, 105, 1 << 40, u64::MAX] {
                assert_eq!(m.get(c), want.get(&c).copied(), "id {c}");
            }
        }
        assert_eq!(CorrMap::new(&[]).get(0), None);
    }

    /// Split at pivots two levels deep, the rows come out as one sort puts them, with many
    /// equal first keys (ties broken by the rest of the key), for sorted, reversed and shuffled
    /// input.
    #[test]
    fn a_split_sort_is_the_one_sort() {
        let n = SORT_SPLIT_ROWS * 2 + 7;
        let mut x = 12345u64;
        let ts: Vec<i64> = (0..n)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((x >> 33) % 5000) as i64
            })
            .collect();
        let key = |i: u32| (ts[i as usize], std::cmp::Reverse(i % 7), i);
        for start in [
            (0..n as u32).collect::<Vec<u32>>(),
            (0..n as u32).rev().collect(),
            (0..n as u64).map(|i| ((i * 7919) % n as u64) as u32).collect(),
        ] {
            let mut want = start.clone();
            want.sort_by_key(|&i| key(i));
            let mut serial = start.clone();
            sort_perm(&crate::join::Serial, &mut serial, &key, 0);
            let mut backwards = start.clone();
            sort_perm(&Backwards, &mut backwards, &key, 0);
            assert!(serial == want && backwards == want);
        }
    }
}
