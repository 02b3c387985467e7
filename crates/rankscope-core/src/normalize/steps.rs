//! Steps: `ProfilerStep#N` markers split the trace into training iterations.
//!
//! - Step intervals come from the CPU-side markers (category `user_annotation` in current
//!   Kineto, `Operator` in the 2021 format; any category but `gpu_user_annotation`).
//! - A CPU event belongs to the step whose interval holds its start.
//! - A GPU event belongs to the step of the runtime call that launched it (by correlation):
//!   work launched in step N and run after step N's CPU marker ended is still step N's. GPU
//!   events with no launch in the trace fall back to the GPU-side `ProfilerStep#N` marker that
//!   holds them, and otherwise to the CPU interval that holds their start.
//! - A trace without markers whose host runs an inference engine's iterations has those as its
//!   steps, numbered 0, 1, … in time order ([`super::iterations`]); any other trace without
//!   markers is its training iterations when its host runs at least two optimizer steps
//!   (`Optimizer.step#…`, the annotation `torch.optim` writes around every `step()`): each
//!   iteration ends with its optimizer's step and starts where the one before ended (the first
//!   at the trace's start), numbered 0, 1, … ([`optimizer_steps`]); any other trace without
//!   markers is one synthetic whole-trace step numbered 0 (a diagnostic says so). A trace with
//!   markers and an engine's iterations (vLLM steps the profiler once per iteration) keeps its
//!   markers as steps, each with the phase of the iteration that starts in it.

use super::{Links, StepTable};
use crate::model::*;

/// `N` from `ProfilerStep#N`.
pub fn step_number(name: &str) -> Option<u32> {
    name.strip_prefix("ProfilerStep#").and_then(|n| n.trim().parse().ok())
}

/// What is known of the steps before the GPU work is linked to its launches ([`find`]).
#[derive(Debug)]
pub struct Found {
    table: StepTable,
    cpu: Vec<(i64, i64, u32)>,
    gpu: Vec<(i64, i64, u32)>,
    /// Every CPU row's step (GPU rows: none yet); every row's for a synthetic step.
    step: Vec<u32>,
}

/// Finds the step intervals and the step of every CPU row: all that does not need the links,
/// so it runs beside [`super::link`]. `span` is the trace's ([`span_and_outliers`]), the one
/// step of a trace without step markers.
pub fn find(t: &RankTrace, span: (i64, i64)) -> Found {
    let e = &t.events;
    let n = e.len();
    let mut cpu: Vec<(i64, i64, u32)> = Vec::new();
    let mut gpu: Vec<(i64, i64, u32)> = Vec::new();
    let mut memo = FxHashMap::<StrId, Option<u32>>::default();
    let gpu_ann = t.strings.find("gpu_user_annotation");
    for i in 0..n {
        if e.kind[i] != EventKind::Slice {
            continue;
        }
        let Some(num) = *memo.entry(e.name[i]).or_insert_with(|| step_number(t.strings.get(e.name[i])))
        else {
            continue;
        };
        let on_gpu =
            t.lanes.kind.get(e.lane[i].0 as usize) == Some(&LaneKind::Gpu) || Some(e.cat[i]) == gpu_ann;
        let iv = (e.ts_ns[i], e.end_ns(i), num);
        if on_gpu {
            gpu.push(iv);
        } else {
            cpu.push(iv);
        }
    }
    cpu.sort();
    cpu.dedup_by_key(|s| s.2);
    gpu.sort();
    let mut table = StepTable {
        number: cpu.iter().map(|s| s.2).collect(),
        start_ns: cpu.iter().map(|s| s.0).collect(),
        end_ns: cpu.iter().map(|s| s.1).collect(),
        synthetic: false,
        gpu_numbers: {
            let mut g: Vec<u32> = gpu.iter().map(|s| s.2).collect();
            g.sort_unstable();
            g.dedup();
            g
        },
        iterations: None,
        from_optimizer: false,
    };
    // An inference engine's iterations, when the host runs them: the steps of a trace without
    // `ProfilerStep#N`; with them (vLLM steps the profiler once per iteration), each step takes
    // the phase of the iteration that starts in it.
    let (its, which) = super::iterations::find(t);
    if let (Some((engine, marker)), false) = (which, cpu.is_empty()) {
        let phase = cpu
            .iter()
            .map(|&(lo, hi, _)| {
                its.iter()
                    .find(|x| x.0 >= lo && x.0 < hi)
                    .map_or(super::iterations::IterPhase::Unknown, |x| x.2)
            })
            .collect();
        table.iterations = Some(super::iterations::Iterations {
            engine: engine.to_string(),
            marker: marker.to_string(),
            phase,
            profiler_steps: true,
        });
    }
    if cpu.is_empty() {
        if let Some((engine, marker)) = which {
            cpu = its.iter().zip(0u32..).map(|(&(lo, hi, _), k)| (lo, hi, k)).collect();
            table.number = cpu.iter().map(|s| s.2).collect();
            table.start_ns = cpu.iter().map(|s| s.0).collect();
            table.end_ns = cpu.iter().map(|s| s.1).collect();
            table.iterations = Some(super::iterations::Iterations {
                engine: engine.to_string(),
                marker: marker.to_string(),
                phase: its.iter().map(|x| x.2).collect(),
                profiler_steps: false,
            });
        }
    }
    if cpu.is_empty() {
        // A training loop profiled without a schedule: its optimizer's steps end its iterations.
        let ends = optimizer_steps(t);
        if ends.len() >= 2 {
            let mut from = span.0.min(ends[0].0);
            for (k, &(_, end)) in ends.iter().enumerate() {
                cpu.push((from, end, k as u32));
                from = end;
            }
            table.number = cpu.iter().map(|s| s.2).collect();
            table.start_ns = cpu.iter().map(|s| s.0).collect();
            table.end_ns = cpu.iter().map(|s| s.1).collect();
            table.from_optimizer = true;
        }
    }
    if cpu.is_empty() {
        // One whole-trace step.
        let (lo, hi) = span;
        table.number = vec![0];
        table.start_ns = vec![lo];
        table.end_ns = vec![hi];
        table.synthetic = true;
        return Found { table, cpu, gpu, step: vec![0; n] };
    }
    // The rows are in time order, so each lookup starts where the one before ended.
    let mut step = vec![NONE_U32; n];
    let mut on_cpu = Cursor::new(&cpu);
    for (i, st) in step.iter_mut().enumerate() {
        let on_gpu = t.lanes.kind.get(e.lane[i].0 as usize) == Some(&LaneKind::Gpu);
        if !on_gpu {
            *st = on_cpu.find(e.ts_ns[i]);
        }
    }
    Found { table, cpu, gpu, step }
}

/// The outermost `Optimizer.step#…` spans on the rank's CPU threads, `(start, end)` in time
/// order: where its training iterations end when the trace has no step markers.
pub fn optimizer_steps(t: &RankTrace) -> Vec<(i64, i64)> {
    let e = &t.events;
    let mut memo = FxHashMap::<StrId, bool>::default();
    let mut spans: Vec<(i64, i64)> = Vec::new();
    for i in 0..e.len() {
        if e.kind[i] != EventKind::Slice || t.lanes.kind.get(e.lane[i].0 as usize) != Some(&LaneKind::Cpu) {
            continue;
        }
        if *memo.entry(e.name[i]).or_insert_with(|| t.strings.get(e.name[i]).starts_with("Optimizer.step#")) {
            spans.push((e.ts_ns[i], e.end_ns(i)));
        }
    }
    spans.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
    let mut out: Vec<(i64, i64)> = Vec::new();
    for s in spans {
        // One inside another (an optimizer wrapping another's step) is the same step.
        if out.last().is_some_and(|l| s.0 < l.1) {
            continue;
        }
        out.push(s);
    }
    out
}

/// Writes `events.step` for every row: the CPU rows' from [`find`], each GPU row's from its
/// launch ([`super::link`]'s `links`), else from the interval holding it.
pub fn assign(t: &mut RankTrace, links: &Links, found: Found) -> StepTable {
    let Found { table, cpu, gpu, mut step } = found;
    if table.from_optimizer {
        t.diagnostics.add(DiagKind::NoSteps, None, || {
            format!(
                "no `ProfilerStep#N` markers: each of the {} steps (numbered from 0) is a training iteration, ending with its optimizer's step (`Optimizer.step#…`)",
                table.len()
            )
        });
    }
    if table.synthetic {
        t.diagnostics.add(DiagKind::NoSteps, None, || {
            "no `ProfilerStep#N` markers: the whole trace is analysed as one step (numbered 0)".to_string()
        });
        t.events.step = step;
        return table;
    }
    let e = &t.events;
    for (k, g) in links.gpu.iter().enumerate() {
        if let Some(l) = links.launch.get(k) {
            let s = step.get(l.0 as usize).copied().unwrap_or(NONE_U32);
            if let Some(slot) = step.get_mut(g.0 as usize) {
                *slot = s;
            }
        }
    }
    // One flag per row (a hash set of millions of ids costs a cache miss per lookup).
    let mut linked = vec![false; step.len()];
    for g in &links.gpu {
        if let Some(f) = linked.get_mut(g.0 as usize) {
            *f = true;
        }
    }
    let (mut on_gpu_ivs, mut on_cpu_too) = (Cursor::new(&gpu), Cursor::new(&cpu));
    for (i, st) in step.iter_mut().enumerate() {
        let on_gpu = t.lanes.kind.get(e.lane[i].0 as usize) == Some(&LaneKind::Gpu);
        if on_gpu && !linked.get(i).copied().unwrap_or(false) {
            let s = on_gpu_ivs.find(e.ts_ns[i]);
            *st = if s != NONE_U32 { s } else { on_cpu_too.find(e.ts_ns[i]) };
        }
    }
    t.events.step = step;
    table
}

/// The step interval holding a time, for times asked in order: the last interval starting at or
/// before the time, found by walking on from the last answer (a binary search when a time goes
/// back), if it still holds the time.
struct Cursor<'a> {
    ivs: &'a [(i64, i64, u32)],
    /// Intervals starting at or before `last`.
    k: usize,
    last: i64,
}

impl<'a> Cursor<'a> {
    fn new(ivs: &'a [(i64, i64, u32)]) -> Self {
        Cursor { ivs, k: 0, last: i64::MIN }
    }

    fn find(&mut self, ts: i64) -> u32 {
        if ts < self.last {
            self.k = self.ivs.partition_point(|s| s.0 <= ts);
        } else {
            while self.ivs.get(self.k).is_some_and(|s| s.0 <= ts) {
                self.k += 1;
            }
        }
        self.last = ts;
        let Some(&(lo, hi, n)) = self.k.checked_sub(1).and_then(|k| self.ivs.get(k)) else {
            return NONE_U32;
        };
        if ts < hi || (lo == hi && ts == lo) {
            n
        } else {
            NONE_U32
        }
    }
}

/// How far (in multiples of the bulk's own width, at least one second) a slice must lie from
/// the bulk of its trace to be an outlier.
const OUTLIER_SLACK: i64 = 10;

/// The span over all slices but the outliers, the number of outliers and the first outlier row.
///
/// An outlier is a slice that starts more than `OUTLIER_SLACK` × W before the bulk or ends
/// that far after it, where the bulk runs from the (k+1)-th earliest start to the (k+1)-th
/// latest end with k = max(1, n/1000) (so one stray event, or 0.1% of them, never defines it)
/// and W is its length, at least one second. One event at ts 0 in a trace on the epoch clock
/// would otherwise stretch the span to 56 years. With fewer than 10 slices nothing is an
/// outlier. The outliers stay in the tables; only the span leaves them out.
pub fn span_and_outliers(e: &EventTable) -> ((i64, i64), u64, Option<usize>) {
    let is_slice = |i: &usize| e.kind[*i] == EventKind::Slice;
    let n = (0..e.len()).filter(is_slice).count();
    let (lo_b, hi_b) = if n < 10 {
        (i64::MIN, i64::MAX)
    } else {
        let k = (n / 1000).max(1);
        // One scratch column, used for the starts and then for the ends.
        let mut v: Vec<i64> = (0..e.len()).filter(is_slice).map(|i| e.ts_ns[i]).collect();
        let lo = *v.select_nth_unstable(k).1;
        v.clear();
        v.extend((0..e.len()).filter(is_slice).map(|i| e.end_ns(i)));
        let hi = *v.select_nth_unstable(n - 1 - k).1;
        let w = hi.saturating_sub(lo).max(1_000_000_000);
        let slack = w.saturating_mul(OUTLIER_SLACK);
        (lo.saturating_sub(slack), hi.saturating_add(slack))
    };
    let mut lo = i64::MAX;
    let mut hi = i64::MIN;
    let mut outliers = 0u64;
    let mut first = None;
    for i in (0..e.len()).filter(is_slice) {
        let (s, t) = (e.ts_ns[i], e.end_ns(i));
        if s < lo_b || t > hi_b {
            outliers += 1;
            first = first.or(Some(i));
            continue;
        }
        lo = lo.min(s);
        hi = hi.max(t);
    }
    if lo > hi {
        ((0, 0), outliers, first)
    } else {
        ((lo, hi), outliers, first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cursor answers as a binary search from scratch would, for times in order, times
    /// going back, equal times and empty (zero-length) steps.
    #[test]
    fn the_cursor_answers_as_a_search() {
        let ivs = [(0, 10, 1), (10, 20, 2), (25, 25, 3), (30, 40, 4), (30, 35, 5)];
        let search = |ts: i64| -> u32 {
            let k = ivs.partition_point(|s| s.0 <= ts);
            match k.checked_sub(1).map(|k| ivs[k]) {
                Some((lo, hi, n)) if ts < hi || (lo == hi && ts == lo) => n,
                _ => NONE_U32,
            }
        };
        let times = [-5, 0, 3, 10, 10, 22, 25, 26, 30, 34, 39, 40, 12, 0, 50, 29, 30];
        let mut c = Cursor::new(&ivs);
        for ts in times {
            assert_eq!(c.find(ts), search(ts), "at {ts}");
        }
        assert_eq!(Cursor::new(&[]).find(3), NONE_U32);
    }

    #[test]
    fn step_numbers() {
        assert_eq!(step_number("ProfilerStep#12"), Some(12));
        assert_eq!(step_number("ProfilerStep#x"), None);
        assert_eq!(step_number("ProfilerStep"), None);
    }
}
