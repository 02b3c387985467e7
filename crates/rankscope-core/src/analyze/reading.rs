//! How a rank was read, beside its figures: what the classification understood of it
//! ([`crate::normalize::coverage`]) and its CUDA / HIP graphs ([`Graphs`]). Computed per rank in
//! [`super::rank_part`], carried in the part, gathered into the analysis by [`super::combine`].
//!
//! **Graphs.** A graph is recorded once and replayed many times, and the two read nothing alike:
//! - **capture**: `*StreamBeginCapture` … `*StreamEndCapture` on a host thread (CUDA, HIP, the
//!   driver API), then `*GraphInstantiate*`. Launches the host makes inside a capture are
//!   recorded into the graph, not run: the device idles while the host works, which is set-up,
//!   not a step that waits for its host. A step in which a rank captures or instantiates a
//!   graph is a **capture step**: reported as capture, never judged ([`crate::diagnose`]).
//!   `*StreamGetCaptureInfo` and `*StreamIsCapturing` alone are no evidence: NCCL and PyTorch's
//!   allocator ask them in every eager step;
//! - **replay**: `cudaGraphLaunch` / `hipGraphLaunch` / `cuGraphLaunch`, whose kernels carry the
//!   launch's correlation id and are linked to it as to any launch: their time is the graph's.
//!   A rank that replays graphs is not told to use them.

use serde::{Deserialize, Serialize};

use crate::model::*;
use crate::normalize::coverage::Coverage;
use crate::normalize::job::RankEntry;

/// How one rank was read (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub coverage: Coverage,
    pub graphs: Graphs,
    /// Set when the rank's steps are an inference engine's iterations
    /// ([`crate::normalize::iterations`]): what each ran and its host span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<IterationSpans>,
}

/// An inference rank's iterations (its steps, in step order): the engine, what each ran and
/// where each lay on the host (the span the engine named).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IterationSpans {
    #[serde(flatten)]
    pub iterations: crate::normalize::iterations::Iterations,
    pub start_ns: Vec<i64>,
    pub end_ns: Vec<i64>,
    /// Per gap between consecutive iterations (host span end to the next start): the time in it
    /// the device ran nothing (the whole gap on a rank without device work).
    #[serde(default)]
    pub gap_idle_ns: Vec<i64>,
}

/// Per gap between consecutive iterations (`ends[k]` to `starts[k + 1]`): the time in it no
/// device work runs (the union of the GPU lanes' slices taken off the gap).
fn gap_idle(t: &RankTrace, starts: &[i64], ends: &[i64]) -> Vec<i64> {
    let e = &t.events;
    let mut busy: Vec<(i64, i64)> = (0..e.len())
        .filter(|&i| {
            e.kind[i] == EventKind::Slice && t.lanes.kind.get(e.lane[i].0 as usize) == Some(&LaneKind::Gpu)
        })
        .map(|i| (e.ts_ns[i], e.end_ns(i)))
        .collect();
    busy.sort_unstable();
    let mut union: Vec<(i64, i64)> = Vec::new();
    for (lo, hi) in busy {
        match union.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => union.push((lo, hi)),
        }
    }
    starts
        .iter()
        .skip(1)
        .zip(ends)
        .map(|(&next, &end)| {
            let (lo, hi) = (end, next.max(end));
            // The first busy interval that may reach into the gap.
            let from = union.partition_point(|b| b.1 <= lo);
            let covered: i64 = union[from..]
                .iter()
                .take_while(|b| b.0 < hi)
                .map(|b| b.1.min(hi) - b.0.max(lo))
                .filter(|&d| d > 0)
                .sum();
            hi - lo - covered
        })
        .collect()
}

/// One rank's CUDA / HIP graphs (module doc).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Graphs {
    /// Stream captures begun (`*StreamBeginCapture`).
    pub captures: u32,
    /// Host time from each capture's begin to its end (`*StreamEndCapture`), summed.
    pub capture_ns: i64,
    /// Kernel launches and asynchronous copies the host made inside a capture: recorded into
    /// the graph, not run.
    pub captured_launches: u32,
    /// `*GraphInstantiate*` calls and their host time.
    pub instantiations: u32,
    pub instantiate_ns: i64,
    /// Graph replays (`*GraphLaunch`).
    pub replays: u32,
    /// GPU work linked to the replays, and its device time.
    pub replay_kernels: u32,
    pub replay_device_ns: i64,
    /// Steps in which the rank captured or instantiated a graph (set-up, not judged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capture_steps: Vec<u32>,
    /// Steps in which the rank replayed a graph.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replay_steps: Vec<u32>,
}

impl Graphs {
    /// Whether the rank shows any graph at all.
    pub fn any(&self) -> bool {
        self.captures + self.instantiations + self.replays > 0
    }
}

/// What a host call is, for graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GraphCall {
    BeginCapture,
    EndCapture,
    Instantiate,
    Replay,
    /// A kernel launch or an asynchronous copy / set (recorded when inside a capture).
    Launch,
}

fn graph_call(name: &str) -> Option<GraphCall> {
    if name.contains("StreamBeginCapture") {
        Some(GraphCall::BeginCapture)
    } else if name.contains("StreamEndCapture") {
        Some(GraphCall::EndCapture)
    } else if name.contains("GraphInstantiate") {
        Some(GraphCall::Instantiate)
    } else if name.contains("GraphLaunch") {
        Some(GraphCall::Replay)
    } else if name.contains("LaunchKernel")
        || name.contains("LaunchCooperativeKernel")
        || name.contains("MemcpyAsync")
        || name.contains("MemsetAsync")
    {
        Some(GraphCall::Launch)
    } else {
        None
    }
}

/// The graphs of one normalized rank (module doc).
pub fn graphs(r: &RankEntry, strings: &StringTable) -> Graphs {
    let t = &r.trace;
    let e = &t.events;
    let mut g = Graphs::default();
    let cpu = |i: usize| t.lanes.kind.get(e.lane[i].0 as usize) == Some(&LaneKind::Cpu);
    // Per host thread: the start of the capture open on it.
    let mut open: FxHashMap<LaneId, i64> = Default::default();
    let mut replays: Vec<u32> = Vec::new();
    let (mut capture_steps, mut replay_steps) = (Vec::new(), Vec::new());
    for i in 0..e.len() {
        if e.kind[i] != EventKind::Slice || !cpu(i) {
            continue;
        }
        let Some(call) = graph_call(strings.get(e.name[i])) else { continue };
        let step = e.step[i];
        match call {
            GraphCall::BeginCapture => {
                g.captures += 1;
                open.insert(e.lane[i], e.ts_ns[i]);
                capture_steps.push(step);
            }
            GraphCall::EndCapture => {
                if let Some(begin) = open.remove(&e.lane[i]) {
                    g.capture_ns += e.end_ns(i) - begin;
                }
                capture_steps.push(step);
            }
            GraphCall::Instantiate => {
                g.instantiations += 1;
                g.instantiate_ns += e.dur_ns[i].max(0);
                capture_steps.push(step);
            }
            GraphCall::Replay => {
                g.replays += 1;
                replays.push(i as u32);
                replay_steps.push(step);
            }
            GraphCall::Launch => {
                if open.contains_key(&e.lane[i]) {
                    g.captured_launches += 1;
                }
            }
        }
    }
    replays.sort_unstable();
    let links = &r.norm.links;
    for (gpu, launch) in links.gpu.iter().zip(&links.launch) {
        if replays.binary_search(&launch.0).is_ok() {
            g.replay_kernels += 1;
            g.replay_device_ns += e.dur_ns.get(gpu.0 as usize).copied().unwrap_or(0).max(0);
        }
    }
    let steps = |mut v: Vec<u32>| {
        v.retain(|&s| s != NONE_U32);
        v.sort_unstable();
        v.dedup();
        v
    };
    g.capture_steps = steps(capture_steps);
    g.replay_steps = steps(replay_steps);
    g
}

/// The reading of one normalized rank.
pub fn rank_reading(r: &RankEntry, strings: &StringTable) -> Reading {
    let st = &r.norm.steps;
    let iterations = st.iterations.clone().map(|iterations| IterationSpans {
        iterations,
        start_ns: st.start_ns.clone(),
        end_ns: st.end_ns.clone(),
        gap_idle_ns: gap_idle(&r.trace, &st.start_ns, &st.end_ns),
    });
    Reading { coverage: r.norm.coverage.clone(), graphs: graphs(r, strings), iterations }
}
