//! Inference engine iterations: the steps of a trace without `ProfilerStep#N`.
//!
//! A serving engine is profiled with `torch.profiler` started and stopped around some requests
//! (vLLM's `VLLM_TORCH_PROFILER_DIR`, SGLang's `/start_profile`), not stepped: its traces have
//! no `ProfilerStep#N`. Each scheduler iteration (one forward over the running batch: a prefill,
//! a decode, or both with chunked prefill) is still a span on the host, named by the engine.
//! When a trace has no step markers, the outermost such spans on CPU threads are its steps,
//! numbered in time order from 0, and each says, where its name allows, what it ran.
//!
//! The names, as the engines write them (docs/metrics.md "Inference traces"):
//! - vLLM (V1 worker, `vllm/v1/worker/gpu_worker.py`, `annotate_profile()`, with the profiler
//!   on): the profiler stepped once per iteration and an annotation named
//!   `execute_context_{C}({ctx tokens})_generation_{G}({gen tokens})` around each
//!   `execute_model` (C = `num_ctx_requests`, G = `num_generation_requests`): C requests in prefill (context) and G in decode
//!   (generation). C > 0, G = 0: prefill; C = 0, G > 0: decode; both: mixed (chunked prefill).
//!   A real B200 trace of TraceLens' (`execute_context_1(888_788544)_generation_0(0)`) writes
//!   the token counts of the context requests joined by `_`. Inside it,
//!   `gpu_model_runner: preprocess` / `forward` / `postprocess` / `sample` mark the parts.
//! - vLLM traced with stacks (`with_stack`): the Python frame `…gpu_model_runner.py(N):
//!   execute_model` (or `…worker.py(N): execute_model`), whose kind the name does not tell.
//! - SGLang (with stacks): the model runner's frames `…model_runner.py(N): forward_extend`
//!   (prefill) and `…: forward_decode` (decode), inside the scheduler's `run_batch`.
//!
//! The rule is structural once a name says "iteration": only spans on CPU threads, only the
//! outermost of them (an `execute_model` frame inside an `execute_context_…` span is the same
//! iteration); they are the steps only when no `ProfilerStep#N` exists, and otherwise give
//! each step its phase ([`super::steps`]).

use serde::{Deserialize, Serialize};

use crate::model::*;

crate::named_enum! {
    /// What an iteration ran.
    pub enum IterPhase {
        /// New requests' prompts (vLLM's context, SGLang's extend).
        Prefill => "prefill",
        /// One token for each running request.
        Decode => "decode",
        /// Both in one batch (chunked prefill).
        Mixed => "mixed",
        /// The name does not say.
        Unknown => "unknown",
    }
}

/// How a trace's steps were found when it has no `ProfilerStep#N`: an engine's iterations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Iterations {
    /// `vllm` or `sglang`.
    pub engine: String,
    /// The span's name family (`execute_context_…_generation_…`, `execute_model`,
    /// `forward_decode / forward_extend`).
    pub marker: String,
    /// Per step (in step order): what it ran.
    pub phase: Vec<IterPhase>,
    /// Whether the steps are the trace's `ProfilerStep#N` (an engine that steps the profiler
    /// once per iteration) rather than the iteration spans themselves.
    #[serde(default)]
    pub profiler_steps: bool,
}

/// What a span's name says: the engine, the name family, the phase.
pub fn iteration_of(name: &str) -> Option<(&'static str, &'static str, IterPhase)> {
    if let Some(rest) = name.strip_prefix("execute_context_") {
        let (ctx, gen) = rest.split_once("_generation_")?;
        let count = |s: &str| s.split('(').next().and_then(|n| n.trim().parse::<u64>().ok());
        let phase = match (count(ctx), count(gen)) {
            (Some(c), Some(0)) if c > 0 => IterPhase::Prefill,
            (Some(0), Some(g)) if g > 0 => IterPhase::Decode,
            (Some(c), Some(g)) if c > 0 && g > 0 => IterPhase::Mixed,
            _ => IterPhase::Unknown,
        };
        return Some(("vllm", "execute_context_…_generation_…", phase));
    }
    // Python frames: `path/file.py(123): function`.
    let (path, func) = name.rsplit_once("): ")?;
    let func = func.trim();
    if path.contains("sglang") {
        return match func {
            "forward_extend" => Some(("sglang", "forward_extend / forward_decode", IterPhase::Prefill)),
            "forward_decode" => Some(("sglang", "forward_extend / forward_decode", IterPhase::Decode)),
            _ => None,
        };
    }
    if path.contains("vllm") && func == "execute_model" {
        return Some(("vllm", "execute_model", IterPhase::Unknown));
    }
    None
}

/// An iteration's host span and what it ran: `(start, end, phase)`.
pub type Span = (i64, i64, IterPhase);

/// The outermost iteration spans on CPU threads, in time order, and the engine and name family
/// of the first. Empty when the trace has none.
pub fn find(t: &RankTrace) -> (Vec<Span>, Option<(&'static str, &'static str)>) {
    let e = &t.events;
    let mut memo = FxHashMap::<StrId, Option<(&'static str, &'static str, IterPhase)>>::default();
    let mut spans: Vec<(i64, i64, LaneId, IterPhase, &'static str, &'static str)> = Vec::new();
    for i in 0..e.len() {
        if e.kind[i] != EventKind::Slice || t.lanes.kind.get(e.lane[i].0 as usize) != Some(&LaneKind::Cpu) {
            continue;
        }
        let Some((engine, marker, phase)) =
            *memo.entry(e.name[i]).or_insert_with(|| iteration_of(t.strings.get(e.name[i])))
        else {
            continue;
        };
        spans.push((e.ts_ns[i], e.end_ns(i), e.lane[i], phase, engine, marker));
    }
    // Parents before children (longer first at one start), then keep those no kept span holds.
    spans.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1), s.2));
    let mut out: Vec<Span> = Vec::new();
    let mut which = None;
    let mut held_until = i64::MIN;
    for (lo, hi, _, phase, engine, marker) in spans {
        if lo < held_until {
            // Inside the last kept iteration: the same iteration, perhaps better named.
            if let Some(last) = out.last_mut().filter(|l| l.2 == IterPhase::Unknown) {
                last.2 = phase;
            }
            continue;
        }
        which.get_or_insert((engine, marker));
        out.push((lo, hi, phase));
        held_until = hi;
    }
    (out, which)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_the_engine_and_the_phase() {
        let p = |n: &str| iteration_of(n).map(|x| (x.0, x.2));
        assert_eq!(p("execute_context_1(888_788544)_generation_0(0)"), Some(("vllm", IterPhase::Prefill)));
        assert_eq!(p("execute_context_0(0)_generation_12(12)"), Some(("vllm", IterPhase::Decode)));
        assert_eq!(p("execute_context_2(512)_generation_30(30)"), Some(("vllm", IterPhase::Mixed)));
        assert_eq!(
            p("vllm/v1/worker/gpu_model_runner.py(1630): execute_model"),
            Some(("vllm", IterPhase::Unknown))
        );
        assert_eq!(
            p("sglang/srt/model_executor/model_runner.py(1712): forward_decode"),
            Some(("sglang", IterPhase::Decode))
        );
        assert_eq!(
            p("python/sglang/srt/model_executor/model_runner.py(1688): forward_extend"),
            Some(("sglang", IterPhase::Prefill))
        );
        assert_eq!(p("torch/nn/modules/module.py(1779): _call_impl"), None);
        assert_eq!(p("ProfilerStep#3"), None);
        assert_eq!(p("my_model.py(10): execute_model"), None);
    }
}
