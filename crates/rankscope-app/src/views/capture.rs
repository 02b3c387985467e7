//! How to capture traces rankscope reads best (the landing page's "How to capture"), and what
//! the loaded traces lack, each with the setting that fixes it (the Summary's "What the traces
//! lack", from the core's [`rankscope_core::analyze::capture`]). README "How to capture" says
//! the same.

use std::rc::Rc;

use yew::prelude::*;

use crate::format;
use crate::state::JobView;

/// One part of the guide: a title, why, and a snippet to copy.
struct Part {
    title: &'static str,
    why: &'static str,
    snippet: &'static str,
}

const GUIDE: &[Part] = &[
    Part {
        title: "PyTorch profiler: a few steps, one file per rank",
        why: "A schedule records a few whole steps after a warm-up (ProfilerStep#N marks each one: steps are what every figure is per); \
              record_shapes gives message sizes, FLOPs and shape mismatches; profile_memory gives memory per step; \
              the rank in the file name (or a trace written after init_process_group, whose distributedInfo holds the rank) files each trace under its rank. \
              with_stack costs time and size: turn it on only to find who calls a slow operator.",
        snippet: r#"import torch, torch.distributed as dist
from torch.profiler import profile, schedule, ProfilerActivity, record_function

rank = dist.get_rank()
def save(prof):
    prof.export_chrome_trace(f"traces/rank{rank}.pt.trace.json.gz")

with profile(
    activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
    schedule=schedule(wait=5, warmup=2, active=3, repeat=1),
    on_trace_ready=save,
    record_shapes=True,
    profile_memory=True,
    with_stack=False,
) as prof:
    for batch in loader:
        with record_function("forward"):
            loss = model(batch)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step(); opt.zero_grad()
        prof.step()"#,
    },
    Part {
        title: "Phases: record_function",
        why: "Regions named forward, backward, optimizer (and data loading) let the report say in which phase a rank is late and which region issued each collective.",
        snippet: r#"with record_function("data_loading"):
    batch = next(it)"#,
    },
    Part {
        title: "NCCL logs and nccl-tests beside the traces",
        why: "The transports, the network and the topology NCCL chose, and what the fabric gives in a benchmark: drop the log and the nccl-tests output with the traces.",
        snippet: r#"export NCCL_DEBUG=INFO
export NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,TUNING
export NCCL_DEBUG_FILE=logs/nccl.%h.%p.log   # one file per host and process
./build/all_reduce_perf -b 8 -e 4G -f 2 -g 1 > logs/all_reduce_perf.txt"#,
    },
    Part {
        title: "Flight Recorder (hangs and mismatches)",
        why: "A ring buffer of each rank's last collectives, dumped when the watchdog times out: which rank never joined which collective. Newer PyTorch also reads TORCH_FR_BUFFER_SIZE and TORCH_FR_DUMP_TEMP_FILE.",
        snippet: r#"export TORCH_NCCL_TRACE_BUFFER_SIZE=2000
export TORCH_NCCL_DUMP_ON_TIMEOUT=1
export TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/shared/fr/rank_"#,
    },
    Part {
        title: "torchtitan",
        why: "The [profiling] section writes one trace per rank (rank in the name) every profile_freq steps; [comm] trace_buf_size turns on the Flight Recorder.",
        snippet: r#"[profiling]
enable_profiling = true
save_traces_folder = "profile_trace"
profile_freq = 100

[comm]
trace_buf_size = 20000"#,
    },
    Part {
        title: "Megatron-LM",
        why: "The PyTorch profiler path records a step range on the ranks named; give the ranks you want to compare (all of one pipeline stage or data-parallel group at least).",
        snippet: r#"--profile --use-pytorch-profiler \
--profile-step-start 10 --profile-step-end 12 \
--profile-ranks 0 1 2 3 4 5 6 7"#,
    },
    Part {
        title: "DeepSpeed, FSDP2 and plain DDP",
        why: "Wrap the training loop in the profiler above; call prof.step() once per optimizer step (after engine.step() with DeepSpeed). FSDP2's all-gathers and reduce-scatters appear as NCCL kernels and c10d ops: record_shapes sizes them.",
        snippet: r#"for batch in loader:
    loss = engine(batch)
    engine.backward(loss)
    engine.step()
    prof.step()"#,
    },
    Part {
        title: "vLLM",
        why: "Its workers write torch profiler traces between start and stop; recent versions take --profiler-config (record shapes and memory there), older ones VLLM_TORCH_PROFILER_DIR. Send a few requests only: traces grow fast.",
        snippet: r#"vllm serve MODEL --profiler-config '{"profiler": "torch", "torch_profiler_dir": "/traces", "torch_profiler_record_shapes": true}'
# older: VLLM_TORCH_PROFILER_DIR=/traces vllm serve MODEL
curl -X POST localhost:8000/start_profile; ...; curl -X POST localhost:8000/stop_profile"#,
    },
];

/// The guide: every part with its snippet.
#[function_component(CaptureGuide)]
pub fn capture_guide() -> Html {
    html! {
        <div class="capture-guide" data-testid="capture-guide-body">
            <p class="hint">{"What rankscope reads best, framework by framework. Everything it needs is in the profiler's own files: nothing extra is installed in the job."}</p>
            { for GUIDE.iter().map(|p| html! {
                <section class="capture-part">
                    <h3>{p.title}</h3>
                    <p>{p.why}</p>
                    <pre><code>{p.snippet}</code></pre>
                </section>
            }) }
        </div>
    }
}

#[derive(Properties, PartialEq, Debug)]
pub struct GapsProps {
    pub job: Rc<JobView>,
}

/// What the loaded traces lack: each gap once with its ranks and the setting that fixes it.
#[function_component(CaptureGaps)]
pub fn capture_gaps(p: &GapsProps) -> Html {
    let ranks = &p.job.analysis.ranks;
    let gaps = rankscope_core::analyze::capture::job_gaps(ranks);
    if gaps.is_empty() {
        return html! {};
    }
    html! {
        <section class="capture-gaps" data-testid="capture-gaps">
            <h3>{"What the traces lack"}</h3>
            <ul>
            { for gaps.iter().map(|(g, rs)| {
                let who = if rs.len() == ranks.len() { "every rank".to_string() } else { format!("rank {}", format::ranges(rs)) };
                html! {
                    <li data-testid="capture-gap" data-gap={g.as_str()}>
                        <strong>{g.missing()}</strong>{format!(" ({who}): {}", g.fix())}
                    </li>
                }
            }) }
            </ul>
        </section>
    }
}
