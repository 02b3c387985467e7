//! Where each step's time goes on each rank.
//!
//! **Which events.** On a rank with GPU work, the figures come from its GPU lanes (kernels and
//! memory operations as the device ran them). On a CPU-only rank (gloo DDP), from its CPU
//! threads: CPU operators are compute, `gloo:*` / `c10d::*` / `record_param_comms` are
//! communication. HTA fails on such traces; rankscope does not.
//!
//! **Step window.** Step N of a rank spans from its CPU `ProfilerStep#N` start to the later of
//! the marker's end and the end of the last GPU event launched in step N (GPU work runs after
//! the CPU has moved on), cut at the start of step N+1 so windows never overlap. A trace
//! without markers is one window over the whole trace.
//!
//! **Formulas** (all on unions of intervals clipped to the window, never sums):
//! - `compute_ns` = |C|, `comm_ns` = |M|, `memory_ns` = |Mem| where C, M, Mem are the unions of
//!   compute, communication and memory events.
//! - `overlap_ns` = |C ∩ M|; `exposed_comm_ns` = |M − C| = `comm_ns − overlap_ns`
//!   (TraceLens's "exposed communication").
//! - `busy_ns` = |C ∪ M ∪ Mem|; `idle_ns` = `wall_ns − busy_ns`, split into `cpu_bound_ns`,
//!   `launch_overhead_ns` and `other_idle_ns` by [`GapClassifier`] (see `gaps.rs`).
//! - `host_sync_ns`: union of host synchronization calls (`cudaStreamSynchronize`, ...) on CPU
//!   threads; `data_loading_ns`: union of DataLoader iterations on CPU threads.
//! - The TensorBoard plugin's four-way split of the step: computation − overlap (`tb_computation_ns`),
//!   overlap, communication − overlap (`tb_communication_ns`), and the rest of the step
//!   (`tb_other_ns` = wall − |C ∪ M|). The plugin builds C and M the same way but recognises only
//!   `nccl:*` ops linked by External id as communication; see docs/metrics.md.
//! - HTA's overlap percentage is |C ∩ M| / |M| over the whole trace (`overlap_pct_hta` in the
//!   rank summary). HTA counts communication hidden under compute as compute in its temporal
//!   breakdown and rounds timestamps to whole µs; rankscope keeps nanoseconds.

use serde::{Deserialize, Serialize};

use super::gaps::{GapClassifier, GapSplit};
use super::intervals::{Iv, Set};
use super::roles::{is_backend_span, Work};
use crate::model::*;
use crate::normalize::job::RankEntry;

/// The unions of one rank's events by role, over the whole trace.
#[derive(Debug, Clone, Default)]
pub struct RankSets {
    /// Which lanes the figures come from.
    pub source: MetricsFrom,
    pub compute: Set,
    pub comm: Set,
    pub memory: Set,
    pub host_sync: Set,
    pub data_loading: Set,
}

/// Builds the unions for one rank, on the side its [`Work`] says.
pub fn rank_sets(r: &RankEntry, strings: &StringTable, work: &Work, blocked: &[(LaneId, Iv)]) -> RankSets {
    let t = &r.trace;
    let e = &t.events;
    let side = work.metrics_side();
    // On CPU-only ranks the backend's own spans (`gloo:all_reduce` on its worker threads) are
    // the communication; the `c10d::*` ops on the main thread only enqueue it and sit inside
    // compute, so counting them would report enqueue cost as overlap. Without backend spans,
    // every communication event counts.
    let backend_spans = side == LaneKind::Cpu
        && (0..e.len()).any(|i| e.class[i] == Class::Communication && is_backend_span(t, strings, i));
    let mut compute = Vec::new();
    let mut comm = Vec::new();
    let mut memory = Vec::new();
    let mut sync = Vec::new();
    let mut data = Vec::new();
    for i in 0..e.len() {
        if e.kind[i] != EventKind::Slice || e.dur_ns[i] <= 0 {
            continue;
        }
        let lane = t.lanes.kind.get(e.lane[i].0 as usize).copied().unwrap_or(LaneKind::Cpu);
        let iv = (e.ts_ns[i], e.end_ns(i));
        if lane == side {
            match e.class[i] {
                // CPU operators: by the innermost rule below.
                Class::Compute if side == LaneKind::Cpu => {}
                Class::Compute => compute.push(iv),
                Class::Communication if !backend_spans || is_backend_span(t, strings, i) => comm.push(iv),
                Class::Memory if side == LaneKind::Gpu => memory.push(iv),
                _ => {}
            }
        }
        if lane == LaneKind::Cpu {
            match e.class[i] {
                Class::Sync => sync.push(iv),
                Class::DataLoading => data.push(iv),
                _ => {}
            }
        }
    }
    if side == LaneKind::Cpu {
        compute = cpu_compute(r, strings, blocked);
    }
    RankSets {
        source: if side == LaneKind::Gpu { MetricsFrom::Gpu } else { MetricsFrom::Cpu },
        compute: Set::from_sorted(compute),
        comm: Set::from_sorted(comm),
        memory: Set::from_sorted(memory),
        host_sync: Set::from_sorted(sync),
        data_loading: Set::from_sorted(data),
    }
}

/// CPU compute: the time a CPU operator runs, where an operator inside which a region opens
/// (an autograd node running an annotated hook: FSDP's `FSDP::pre_backward` > `FSDP::all_gather`
/// inside `autograd::engine::evaluate_function: AddmmBackward0`) counts inside that region only
/// by the operators that run in it. A hook blocked on a collective is then a thread waiting, not
/// computing, as it is at the top of a step; the same rule gives the regions' `ops_ns`
/// ([`super::regions`]). So is the time an operator sits blocked on a collective it issued
/// (`blocked`, [`super::roles::blocked_waits`]: Megatron's f/g operators around a synchronous
/// all_reduce): waiting, not compute. Without either it is the union of the operators.
fn cpu_compute(r: &RankEntry, strings: &StringTable, blocked: &[(LaneId, Iv)]) -> Vec<Iv> {
    let t = &r.trace;
    let e = &t.events;
    let n_lanes = t.lanes.len();
    let mut by_lane: Vec<Vec<usize>> = vec![Vec::new(); n_lanes];
    for i in 0..e.len() {
        let l = e.lane[i].0 as usize;
        if l < n_lanes && t.lanes.kind[l] == LaneKind::Cpu && e.kind[i] == EventKind::Slice && e.dur_ns[i] > 0
        {
            by_lane[l].push(i);
        }
    }
    struct Open {
        end: i64,
        region: bool,
        compute: bool,
        cover: Option<usize>,
    }
    // Operators not inside another operator since the nearest region, with the regions opened
    // inside them.
    let mut covers: Vec<(Iv, Vec<Iv>)> = Vec::new();
    for (lane, rows) in by_lane.iter().enumerate() {
        let first_cover = covers.len();
        let mut stack: Vec<Open> = Vec::new();
        for &i in rows {
            let (ts, end) = (e.ts_ns[i], e.end_ns(i));
            while stack.last().is_some_and(|o| o.end <= ts) {
                stack.pop();
            }
            let end = end.min(stack.last().map_or(i64::MAX, |o| o.end));
            let since_region = || stack.iter().rev().take_while(|o| !o.region);
            if super::regions::is_region(t, strings, i) {
                if let Some(c) = since_region().filter_map(|o| o.cover).last() {
                    if let Some(x) = covers.get_mut(c) {
                        x.1.push((ts, end));
                    }
                }
                stack.push(Open { end, region: true, compute: false, cover: None });
            } else {
                let compute = e.class[i] == Class::Compute;
                let cover = (compute && !since_region().any(|o| o.compute)).then(|| {
                    covers.push(((ts, end), Vec::new()));
                    covers.len() - 1
                });
                stack.push(Open { end, region: false, compute, cover });
            }
        }
        add_blocked(&mut covers[first_cover..], blocked, LaneId(lane as u32));
    }
    let mut out = Vec::with_capacity(covers.len());
    for (iv, holes) in covers {
        if holes.is_empty() {
            out.push(iv);
        } else {
            out.extend_from_slice(
                Set::from_sorted(vec![iv]).subtract(&Set::from_unsorted(holes)).intervals(),
            );
        }
    }
    out.sort_unstable();
    out
}

/// Adds to each operator of one lane (`covers`, by start) the intervals in which the lane is
/// blocked on a collective (`blocked`, sorted by lane then start) as holes.
pub(super) fn add_blocked(covers: &mut [(Iv, Vec<Iv>)], blocked: &[(LaneId, Iv)], lane: LaneId) {
    let lo = blocked.partition_point(|b| b.0 < lane);
    let hi = blocked.partition_point(|b| b.0 <= lane);
    let mine = &blocked[lo..hi];
    if mine.is_empty() {
        return;
    }
    for (iv, holes) in covers.iter_mut() {
        // The blocked intervals are disjoint and sorted: those that can meet the operator.
        let from = mine.partition_point(|b| b.1 .1 <= iv.0);
        for b in mine[from..].iter().take_while(|b| b.1 .0 < iv.1) {
            let (a, z) = (b.1 .0.max(iv.0), b.1 .1.min(iv.1));
            if z > a {
                holes.push((a, z));
            }
        }
    }
}

/// One rank's figures for one step. Times in ns on the rank's own clock.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepRank {
    pub rank: u32,
    pub start_ns: i64,
    pub end_ns: i64,
    pub wall_ns: i64,
    pub compute_ns: i64,
    pub comm_ns: i64,
    pub overlap_ns: i64,
    pub exposed_comm_ns: i64,
    pub memory_ns: i64,
    pub busy_ns: i64,
    pub idle_ns: i64,
    /// The idle time split: the host was loading data (input-bound: host work, not idle) ...
    #[serde(default)]
    pub input_ns: i64,
    /// ... the device waited for the host to launch (CPU-bound) ...
    pub cpu_bound_ns: i64,
    /// ... short gaps between queued kernels (launch overhead) ...
    pub launch_overhead_ns: i64,
    /// ... and the rest.
    pub other_idle_ns: i64,
    pub host_sync_ns: i64,
    pub data_loading_ns: i64,
    /// Communication split into moving data and waiting for the other ranks (see
    /// [`super::waits`]); filled at the job level, where collectives are matched.
    #[serde(default)]
    pub comm_transfer_ns: i64,
    #[serde(default)]
    pub comm_wait_ns: i64,
    /// The exposed (not under compute) part of each; they add up to `exposed_comm_ns`.
    #[serde(default)]
    pub exposed_transfer_ns: i64,
    #[serde(default)]
    pub exposed_wait_ns: i64,
    pub tb_computation_ns: i64,
    pub tb_communication_ns: i64,
    pub tb_other_ns: i64,
    pub source: MetricsFrom,
}

crate::named_enum! {
    /// Which lanes a rank's figures come from.
    #[derive(Default)]
    pub enum MetricsFrom {
        /// GPU streams (kernels, memcpy/memset): the device's time.
        #[default]
        Gpu => "gpu",
        /// CPU threads (a CPU-only run, e.g. gloo on CPU): the host's ops.
        Cpu => "cpu",
    }
}

impl MetricsFrom {
    /// The lanes of this side.
    pub fn lane_kind(self) -> LaneKind {
        match self {
            MetricsFrom::Gpu => LaneKind::Gpu,
            MetricsFrom::Cpu => LaneKind::Cpu,
        }
    }
}

/// Step windows of one rank: `(step, start, end)`, non-overlapping, in time order; `gpu_work`
/// is the rank's GPU work ([`Work::gpu`]).
pub fn step_windows(r: &RankEntry, gpu_work: &[usize]) -> Vec<(u32, i64, i64)> {
    let s = &r.norm.steps;
    let e = &r.trace.events;
    let n = s.len();
    // Last end of GPU work per step (GPU events carry the step of their launch).
    let mut gpu_end: FxHashMap<u32, i64> = FxHashMap::default();
    for &i in gpu_work {
        if e.step[i] != NONE_U32 {
            let v = gpu_end.entry(e.step[i]).or_insert(i64::MIN);
            *v = (*v).max(e.end_ns(i));
        }
    }
    (0..n)
        .map(|k| {
            let start = s.start_ns[k];
            let mut end = s.end_ns[k].max(gpu_end.get(&s.number[k]).copied().unwrap_or(i64::MIN));
            if let Some(&next) = s.start_ns.get(k + 1) {
                if next > start {
                    end = end.min(next);
                }
            }
            (s.number[k], start, end.max(start))
        })
        .collect()
}

/// The figures of one window; the idle split needs the rank's [`GapClassifier`].
pub fn window(rank: u32, sets: &RankSets, gaps: Option<&GapClassifier>, start: i64, end: i64) -> StepRank {
    let c = sets.compute.clip(start, end);
    let m = sets.comm.clip(start, end);
    let mem = sets.memory.clip(start, end);
    let wall = end - start;
    let compute = c.len_ns();
    let comm = m.len_ns();
    let overlap = c.intersect(&m).len_ns();
    let cm = c.union(&m);
    let busy_set = cm.union(&mem);
    let busy = busy_set.len_ns();
    let split = gaps.map(|g| g.split(&busy_set, &sets.data_loading, start, end)).unwrap_or(GapSplit {
        input_ns: 0,
        cpu_bound_ns: 0,
        launch_overhead_ns: 0,
        other_idle_ns: wall - busy,
    });
    StepRank {
        rank,
        start_ns: start,
        end_ns: end,
        wall_ns: wall,
        compute_ns: compute,
        comm_ns: comm,
        overlap_ns: overlap,
        exposed_comm_ns: comm - overlap,
        memory_ns: mem.len_ns(),
        busy_ns: busy,
        idle_ns: wall - busy,
        input_ns: split.input_ns,
        cpu_bound_ns: split.cpu_bound_ns,
        launch_overhead_ns: split.launch_overhead_ns,
        other_idle_ns: split.other_idle_ns,
        host_sync_ns: sets.host_sync.len_within(start, end),
        data_loading_ns: sets.data_loading.len_within(start, end),
        comm_transfer_ns: 0,
        comm_wait_ns: 0,
        exposed_transfer_ns: 0,
        exposed_wait_ns: 0,
        tb_computation_ns: compute - overlap,
        tb_communication_ns: comm - overlap,
        tb_other_ns: wall - cm.len_ns(),
        source: sets.source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_formulas_on_a_known_case() {
        // compute [0,10) ∪ [20,30); comm [5,25); memory [40,45); window [0,50).
        let sets = RankSets {
            source: MetricsFrom::Gpu,
            compute: Set::from_unsorted(vec![(0, 10), (20, 30), (2, 8)]),
            comm: Set::from_unsorted(vec![(5, 25)]),
            memory: Set::from_unsorted(vec![(40, 45)]),
            host_sync: Set::from_unsorted(vec![(1, 3)]),
            data_loading: Set::new(),
        };
        let w = window(0, &sets, None, 0, 50);
        assert_eq!(w.compute_ns, 20);
        assert_eq!(w.comm_ns, 20);
        assert_eq!(w.overlap_ns, 10); // [5,10) and [20,25)
        assert_eq!(w.exposed_comm_ns, 10); // [10,20)
        assert_eq!(w.busy_ns, 35); // [0,30) ∪ [40,45)
        assert_eq!(w.idle_ns, 15);
        assert_eq!(w.tb_computation_ns + w.overlap_ns + w.tb_communication_ns + w.tb_other_ns, w.wall_ns);
        assert_eq!(w.host_sync_ns, 2);
        // Clipping: window [8, 22).
        let w = window(0, &sets, None, 8, 22);
        assert_eq!((w.compute_ns, w.comm_ns, w.overlap_ns), (4, 14, 4));
    }
}
