//! Small hand-built CPU (gloo) jobs for the attribution tests: each rank's trace made from a
//! list of complete events per step, as the profiler writes them, then ingested.

use rankscope_core::analyze::{Analysis, Options};
use rankscope_core::diagnose::analyze;
use rankscope_core::model::RankTrace;
use rankscope_core::normalize::{assemble, Rules};

/// One complete event (`ph: X`), times in µs from the step's start; `dims` the `Input Dims`
/// of a communication event (`None`: no args).
pub struct Ev {
    pub name: &'static str,
    pub cat: &'static str,
    /// 1 = the main thread, 2 and 3 = gloo's two worker threads.
    pub tid: u32,
    pub ts: f64,
    pub dur: f64,
    pub dims: Option<&'static str>,
}

/// An operator on the main thread.
pub fn op(name: &'static str, ts: f64, dur: f64) -> Ev {
    Ev { name, cat: "cpu_op", tid: 1, ts, dur, dims: None }
}

/// Steps start this far apart (µs), each with its `ProfilerStep#N` around its events.
pub const STEP_US: f64 = 1_000_000.0;

/// A rank's trace: each step's length and events (relative to the step start).
pub fn trace(rank: u32, world: u32, steps: &[(f64, Vec<Ev>)]) -> RankTrace {
    let mut evs = Vec::new();
    for (k, (len, list)) in steps.iter().enumerate() {
        let t0 = 1_000.0 + k as f64 * STEP_US;
        evs.push(format!(
            r#"{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{k}","pid":{pid},"tid":1,"ts":{t0:.3},"dur":{len:.3}}}"#,
            pid = 100 + rank
        ));
        for e in list {
            // The enqueue op's first input is a TensorList (`[[[n]], ...]`), the span's a tensor.
            let args = match e.dims {
                Some(n) if e.name.starts_with("c10d::") => {
                    format!(r#","args":{{"Input Dims":[[[{n}]],[],[]],"Input type":["TensorList","",""]}}"#)
                }
                Some(n) => format!(r#","args":{{"Input Dims":[[{n}]],"Input type":["float"]}}"#),
                None => String::new(),
            };
            evs.push(format!(
                r#"{{"ph":"X","cat":"{}","name":"{}","pid":{},"tid":{},"ts":{:.3},"dur":{:.3}{args}}}"#,
                e.cat,
                e.name,
                100 + rank,
                e.tid,
                t0 + e.ts,
                e.dur
            ));
        }
    }
    let text = format!(
        r#"{{"schemaVersion":1,"distributedInfo":{{"backend":"gloo","rank":{rank},"world_size":{world}}},"baseTimeNanoseconds":1700000000000000000,"traceEvents":[{}]}}"#,
        evs.join(",")
    );
    super::ingest_chunked(&format!("rank{rank}.json"), text.as_bytes(), 1 << 16)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The job's analysis (no job errors).
pub fn run(traces: Vec<RankTrace>) -> Analysis {
    let job = assemble(traces, &[], &Rules::default());
    assert!(job.errors.is_empty(), "{:?}", job.errors);
    analyze(&job, &Options::default())
}

/// The findings' ids and ranks, for messages.
pub fn ids(a: &Analysis) -> Vec<(&str, Vec<u32>)> {
    a.findings.iter().map(|f| (f.id.as_str(), f.ranks.clone())).collect()
}
