#!/usr/bin/env python3
"""Generate rankscope's scenario zoo: real multi-process PyTorch (gloo, CPU) runs, each with
one known injected problem, profiled per rank with the PyTorch profiler (Kineto).

    python make_zoo.py --out tests/zoo                  # every scenario
    python make_zoo.py --out tests/zoo --only host_stall,baseline
    python make_zoo.py --list

Needs torch (>= 2.15 was used; CPU is enough). CI never runs this: the committed traces are
the test input. Each scenario spawns its ranks as subprocesses of this script
(`--worker SPEC --rank R`, MASTER_ADDR=127.0.0.1 and a free port), waits for them with a
deadline and kills whatever is left (by process group of each rank it started).

Output per scenario: `<out>/<name>/rank{R}.pt.trace.json.gz` (gzip, mtime=0),
`scenario.json` (spec + the ranks' own perf_counter() measurements + a summary of what the
traces contain), and for the hang scenarios `fr_rank{R}.pkl` Flight Recorder dumps.
The rank code lives in zoo_workers.py next to this file.
"""

import argparse
import copy
import gzip
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))

# Finding ids the tool uses (see README.md). `collective_mismatch` and `pipeline_bubble` are
# the ids for issue 9 (hangs and pipelines).
DP_FALSE_POSITIVES = ["straggler", "compute_imbalance", "input_bound", "host_stall", "small_collectives"]

ANN_PLAIN = {"forward": "forward", "backward": "backward", "optimizer": "optimizer"}
ANN_HASH = {"forward": "## forward ##", "backward": "## backward ##", "optimizer": "## optimizer ##"}
ANN_NONE = {"forward": None, "backward": None, "optimizer": None}
ANN_SHORT = {"forward": "fwd", "backward": "bwd", "optimizer": "opt_step"}

DP_DEFAULTS = dict(
    in_dim=512, width=1024, depth=4, classes=16, batch=64, optimizer="adamw",
    annotations=ANN_PLAIN, wait=1, warmup=1, active=4, dataloader=False,
)


def dp(**kw):
    cfg = copy.deepcopy(DP_DEFAULTS)
    cfg.update(kw)
    return cfg


# --------------------------------------------------------------------------------------
# The scenarios. `inject` is what the rank code does; `injected` / `expected` go to
# scenario.json as they are. Numbers in `notes` are not written here: they are measured.
# --------------------------------------------------------------------------------------

SCENARIOS = [
    dict(
        name="baseline", kind="dp", world_size=4, seed=1000,
        description=(
            "Healthy 4-rank DDP run (gloo, CPU): an MLP (in_proj 512->1024, 4 Linear/LayerNorm/GELU "
            "blocks of width 1024, head) of ~18 MB fp32, default 25 MB buckets, AdamW, batch 64 per rank "
            "from a real DataLoader (num_workers=0, no artificial per-item cost), forward/backward/optimizer annotated. "
            "All ranks do identical work; nothing is injected."
        ),
        cfg=dp(dataloader=True, item_sleep_ms=0.0),
        injected=None,
        expected={"first_finding": None, "ranks": [], "must_not": DP_FALSE_POSITIVES},
    ),
    dict(
        name="host_stall", kind="dp", world_size=4, seed=1100,
        description=(
            "Baseline model and loop (tensor inputs, no DataLoader) where rank 2 sleeps 400 ms every step "
            "inside record_function('straggler_sleep'), itself inside the record_function('forward') "
            "region (after the DDP forward, before the loss). The other ranks reach the gradient "
            "all_reduce ~400 ms earlier and wait for rank 2 at the end of backward."
        ),
        cfg=dp(inject={"kind": "sleep_in_forward", "ranks": [2], "amount_ms": 400, "where": "straggler_sleep"}),
        injected={"cause": "host_stall", "ranks": [2], "where": "forward/straggler_sleep", "amount_ms": 400,
                  "how": "time.sleep(0.4) inside record_function('straggler_sleep') inside record_function('forward'), every step, rank 2 only"},
        expected={"first_finding": "host_stall", "ranks": [2], "cause": "host_stall", "where": "straggler_sleep",
                  "must_not": ["compute_imbalance", "input_bound", "small_collectives"]},
    ),
    dict(
        name="host_stall_unannotated", kind="dp", world_size=4, seed=1200,
        description=(
            "Baseline model; rank 1 calls time.sleep(0.3) in the middle of its forward pass, from a "
            "forward hook on the middle block (inside DistributedDataParallel.forward), with no "
            "record_function of its own. The forward/backward/optimizer annotations stay, so the stall "
            "shows only as a gap with no operator running inside rank 1's `forward`."
        ),
        cfg=dp(inject={"kind": "sleep_mid_forward", "ranks": [1], "amount_ms": 300}),
        injected={"cause": "host_stall", "ranks": [1], "where": "forward (unannotated gap inside DistributedDataParallel.forward)",
                  "amount_ms": 300, "how": "time.sleep(0.3) in a forward hook of the middle MLP block, every step, rank 1 only"},
        expected={"first_finding": "host_stall", "ranks": [1], "cause": "host_stall", "where": "forward",
                  "must_not": ["compute_imbalance", "input_bound", "small_collectives"]},
    ),
    dict(
        name="slow_dataloader", kind="dp", world_size=4, seed=1300,
        description=(
            "Baseline model fed by a real torch.utils.data.DataLoader (num_workers=0, batch 48), whose "
            "Dataset.__getitem__ sleeps 3 ms per item on ranks 0-2 and 9 ms (3x) on rank 3, so rank 3 "
            "spends ~3x as long in `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__` and is "
            "late for every gradient all_reduce. Annotations use the '## forward ##' convention."
        ),
        cfg=dp(dataloader=True, batch=48, item_sleep_ms=3.0, annotations=ANN_HASH,
               inject={"kind": "slow_getitem", "ranks": [3], "factor": 3.0}),
        injected={"cause": "input_bound", "ranks": [3], "where": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                  "amount_ms": 288, "how": "Dataset.__getitem__ sleeps 9 ms per item on rank 3 vs 3 ms elsewhere; 48 items per step -> ~432 ms vs ~144 ms per step"},
        expected={"first_finding": "input_bound", "ranks": [3], "also": "straggler rank 3",
                  "must_not": ["compute_imbalance", "host_stall", "small_collectives"]},
    ),
    dict(
        name="small_buckets", kind="dp", world_size=4, seed=1400,
        description=(
            "DDP with bucket_cap_mb=1 on an MLP of 18 blocks of width 640 (~30 MB fp32), SGD with momentum, "
            "tensor inputs. Each 640x640 weight (1.6 MB) exceeds the cap, so DDP makes about one bucket per "
            "layer: ~20 all_reduces of 1-2 MiB per step instead of 2 with the default 25 MB."
        ),
        cfg=dp(width=640, depth=18, batch=32, optimizer="sgd", bucket_cap_mb=1),
        injected={"cause": "small_collectives", "ranks": [0, 1, 2, 3], "where": "DDP bucketing",
                  "amount_ms": None, "how": "DistributedDataParallel(model, bucket_cap_mb=1)"},
        expected={"first_finding": "small_collectives", "ranks": [0, 1, 2, 3],
                  "must_not": ["straggler", "compute_imbalance", "input_bound", "host_stall"]},
    ),
    dict(
        name="pair_mixed_buckets", kind="dp", world_size=4, seed=1450,
        description=(
            "DDP with bucket_cap_mb=1 on an MLP whose blocks cycle through widths 512, 724 and 1024 "
            "(weights of 1, 2 and 4 MiB, a Linear between blocks of different widths; 12 blocks), SGD "
            "with momentum, tensor inputs. Every weight exceeds the cap, so DDP makes about one bucket "
            "per layer: ~24 all_reduces of 1-4 MiB per step instead of 2 with the default 25 MB."
        ),
        cfg=dp(widths=[512, 724, 1024] * 4, batch=32, optimizer="sgd", bucket_cap_mb=1),
        injected={"cause": "small_collectives", "ranks": [0, 1, 2, 3], "where": "DDP bucketing",
                  "amount_ms": None, "how": "DistributedDataParallel(model, bucket_cap_mb=1)"},
        expected={"first_finding": "small_collectives", "ranks": [0, 1, 2, 3],
                  "must_not": ["straggler", "compute_imbalance", "input_bound", "host_stall", "slow_device"]},
    ),
    dict(
        name="pair_mixed_default", kind="dp", world_size=4, seed=1451,
        description=(
            "pair_mixed_buckets' job with DDP's default 25 MB buckets: the other half of its pair "
            "(what fixing the buckets gives)."
        ),
        cfg=dp(widths=[512, 724, 1024] * 4, batch=32, optimizer="sgd"),
        injected=None,
        expected={"first_finding": None, "ranks": [], "must_not": ["straggler", "compute_imbalance", "host_stall", "slow_device", "small_collectives"]},
    ),
    dict(
        name="good_overlap", kind="dp", world_size=4, seed=1500,
        description=(
            "A DDP model built for overlap, default 25 MB buckets: a compute-heavy, parameter-light token-wise "
            "part (Linear 64->256 and 6 Linear/LayerNorm/GELU blocks of width 256 applied to each of 48 tokens) "
            "then mean-pooling and a parameter-heavy MLP (256->1024, 6 blocks of width 1024, ~27 MB). In backward "
            "the big layers' gradients are ready first, so their bucket is all_reduced while backward still "
            "computes the token-wise layers; the last bucket is small. Batch 16, SGD with momentum (foreach), no "
            "annotations at all (only the profiler's DistributedDataParallel.forward and Optimizer.step#SGD.step "
            "labels). Nothing is injected."
        ),
        cfg=dp(model="tower", in_dim=64, tokens=48, token_width=256, token_depth=6, width=1024, depth=6, batch=16,
               optimizer="sgd_foreach", annotations=ANN_NONE),
        injected=None,
        expected={"first_finding": None, "ranks": [], "must_not": DP_FALSE_POSITIVES},
    ),
    dict(
        name="uneven_batch", kind="dp", world_size=4, seed=1600,
        description=(
            "Baseline model, tensor inputs; rank 0 gets batch 192, the others 96 (a real compute "
            "imbalance: rank 0's forward and backward take ~2x as long). Annotations use short names "
            "fwd / bwd / opt_step."
        ),
        cfg=dp(batch=96, annotations=ANN_SHORT, inject={"kind": "batch_multiplier", "ranks": [0], "factor": 2}),
        injected={"cause": "compute_imbalance", "ranks": [0], "where": "fwd + bwd (2x batch)", "amount_ms": None,
                  "how": "rank 0 batch 192, ranks 1-3 batch 96"},
        expected={"first_finding": "compute_imbalance", "ranks": [0], "also": "straggler rank 0 caused by more compute",
                  "must_not": ["input_bound", "host_stall", "small_collectives"]},
    ),
    dict(
        name="host_sync", kind="dp", world_size=4, seed=1700,
        description=(
            "The good_overlap model and setup (gradient communication hidden under backward); after backward, "
            "every step, each rank logs the global norm of every parameter's gradient inside "
            "record_function('log_metrics'), the way training scripts watch for exploding gradients: per "
            "parameter a blocking dist.all_reduce of the 0-dim squared norm (c10d::allreduce_ + gloo:all_reduce "
            "with Input Dims [[]]) followed by .item(). On CPU ranks .item() has no device queue to drain; the "
            "cost is one latency-bound collective per parameter per step, each a host synchronization point."
        ),
        cfg=dp(model="tower", in_dim=64, tokens=48, token_width=256, token_depth=6, width=1024, depth=6, batch=16,
               optimizer="sgd_foreach", annotations=ANN_NONE, log_metrics="grad_norms"),
        injected={"cause": "host_sync", "ranks": [0, 1, 2, 3], "where": "log_metrics", "amount_ms": None,
                  "how": "per parameter: dist.all_reduce(p.grad.norm()**2); .item(), every step after backward"},
        expected=None,  # decided from the measurement in finalize_host_sync()
    ),
    dict(
        name="identical_2rank", kind="dp", world_size=2, seed=1800,
        description="Baseline at world size 2: same model, DataLoader and annotations, identical work, nothing injected.",
        cfg=dp(dataloader=True, item_sleep_ms=0.0),
        injected=None,
        expected={"first_finding": None, "ranks": [], "must_not": DP_FALSE_POSITIVES},
    ),
    dict(
        name="noise_burst_2rank", kind="dp", world_size=2, seed=1850,
        description=(
            "Healthy 2-rank run (identical_2rank's model, DataLoader and annotations; each rank pinned to "
            "its own core) with one burst of host noise: at the top of the second profiled step another "
            "process spins for 150 ms on rank 1's core. Rank 1's operators are the same and run at their "
            "usual speed outside that step; in it they share the core and rank 1 arrives late once."
        ),
        cfg=dp(dataloader=True, item_sleep_ms=0.0, pin=True, active=3,
               inject={"kind": "cpu_hog_once", "ranks": [1], "step": 3, "amount_ms": 150}),
        injected={"cause": None, "noise": "burst", "ranks": [1], "profiled_step_index": 1, "amount_ms": 150,
                  "how": "a process spinning 150 ms on rank 1's core (both pinned), started at the top of step 3 (the second of the 3 profiled steps), once"},
        expected={"first_finding": None, "ranks": [],
                  "must_not": DP_FALSE_POSITIVES + ["slow_device", "straggler"],
                  "burst": {"rank": 1, "profiled_step_index": 1}},
    ),
    dict(
        name="slow_device_hog_2rank", kind="dp", world_size=2, seed=1870,
        description=(
            "noise_burst_2rank's job (identical_2rank's model, DataLoader and annotations; each rank "
            "pinned to its own core) where another process spins on rank 1's core for the whole run: "
            "every operator of rank 1 runs slower in every step (a slow device: a throttled or shared "
            "GPU on a GPU job). Rank 0 waits for rank 1 at the gradient all_reduce each step."
        ),
        cfg=dp(dataloader=True, item_sleep_ms=0.0, pin=True, active=4,
               inject={"kind": "cpu_hog_all", "ranks": [1]}),
        injected={"cause": "slow_device", "ranks": [1],
                  "how": "a process spinning on rank 1's core (both ranks pinned, one core each) from before the first step to the end of the run"},
        expected={"first_finding": "slow_device", "ranks": [1],
                  "must_not": ["host_stall", "input_bound", "small_collectives", "host_sync"]},
    ),
    dict(
        name="host_stall_8rank", kind="dp", world_size=8, seed=1900,
        description=(
            "host_stall at world size 8 on 2 cores, with a tiny model (in_proj 256->256, 3 blocks of width "
            "256, batch 32): rank 5 sleeps 400 ms per step inside record_function('straggler_sleep') inside "
            "record_function('forward')."
        ),
        cfg=dp(in_dim=256, width=256, depth=3, batch=32, inject={"kind": "sleep_in_forward", "ranks": [5], "amount_ms": 400, "where": "straggler_sleep"}),
        injected={"cause": "host_stall", "ranks": [5], "where": "forward/straggler_sleep", "amount_ms": 400,
                  "how": "time.sleep(0.4) inside record_function('straggler_sleep') inside record_function('forward'), every step, rank 5 only"},
        expected={"first_finding": "host_stall", "ranks": [5], "cause": "host_stall", "where": "straggler_sleep",
                  "must_not": ["compute_imbalance", "input_bound", "small_collectives"]},
    ),
    dict(
        name="fsdp_baseline", kind="dp", world_size=4, seed=2000,
        description=(
            "Healthy FSDP2 run: torch.distributed.fsdp.fully_shard on each of 4 MLP blocks (width 512) and "
            "the root, gloo on CPU, AdamW, batch 64, no annotations of our own (FSDP's own FSDP::* labels "
            "appear). Per block: all_gather of the parameters in forward and again in backward, "
            "reduce_scatter of the gradients. Nothing is injected."
        ),
        cfg=dp(width=512, fsdp=True, annotations=ANN_NONE),
        injected=None,
        expected={"first_finding": None, "ranks": [], "must_not": DP_FALSE_POSITIVES},
    ),
    dict(
        name="fsdp_exposed_gathers", kind="dp", world_size=4, seed=2050,
        description=(
            "FSDP2 (fully_shard per block + root) on 8 MLP blocks of width 1024 (~34 MB fp32), gloo on CPU, "
            "AdamW, batch 16, forward/backward/optimizer annotated: with little compute per block, the "
            "parameter all-gathers (forward and backward) and the gradient reductions are mostly exposed. "
            "Nothing is injected: the finding is the exposed sharded traffic, in FSDP's terms."
        ),
        cfg=dp(width=1024, depth=8, batch=16, fsdp=True),
        injected=None,
        expected={"first_finding": "exposed_comm", "ranks": [0, 1, 2, 3],
                  "must_not": ["host_sync", "straggler", "compute_imbalance", "slow_device", "input_bound"],
                  "why": "FSDP's all-gathers and reductions are its design: advice in FSDP's terms (prefetch, reshard_after_forward, unit size), never DDP buckets, never host_sync"},
    ),
    # ---------------------------------------------------------------- pairs (what-if)
    # One job (small_buckets' model fed by a DataLoader) with none, either or both of two causes:
    # rank 3's slow DataLoader and bucket_cap_mb=1 on every rank. The differences between the
    # four runs' step times are the measured gains of each fix, alone and after the other
    # (tests/zoo/pairs/, `--out tests/zoo/pairs --only pair_neither,pair_loader,pair_buckets,pair_both`).
] + [
    dict(
        name=f"pair_{tag}", kind="dp", world_size=4, seed=5000 + i,
        description=(
            "What-if pair member: DDP MLP of 18 blocks of width 640 (~30 MB fp32), SGD with momentum, batch 32 "
            "from a real DataLoader whose __getitem__ sleeps 3 ms per item; "
            + ("rank 3's sleeps 12 ms per item (4x); " if loader else "every rank alike; ")
            + ("bucket_cap_mb=1 on every rank (about one bucket per layer)." if buckets else "default 25 MB buckets.")
        ),
        cfg=dp(width=640, depth=18, batch=32, optimizer="sgd", dataloader=True, item_sleep_ms=3.0, active=5,
               **({"bucket_cap_mb": 1} if buckets else {}),
               **({"inject": {"kind": "slow_getitem", "ranks": [3], "factor": 4.0}} if loader else {})),
        injected=(None if not (loader or buckets) else {
            "cause": "+".join(c for c, on in (("input_bound", loader), ("small_collectives", buckets)) if on),
            "ranks": [3] if loader else [0, 1, 2, 3],
            "where": "; ".join(w for w, on in (("rank 3's DataLoader", loader), ("DDP bucketing", buckets)) if on),
            "amount_ms": None,
            "how": "; ".join(h for h, on in (("Dataset.__getitem__ sleeps 12 ms per item on rank 3 vs 3 ms elsewhere", loader),
                                            ("DistributedDataParallel(model, bucket_cap_mb=1)", buckets)) if on)}),
        expected={"first_finding": ("input_bound" if loader else "small_collectives" if buckets else None),
                  "ranks": ([3] if loader else [0, 1, 2, 3] if buckets else []),
                  "also": ("small_collectives, with its cost once the loader is fixed" if loader and buckets else None),
                  "must_not": ["compute_imbalance", "host_stall"]},
    )
    for i, (tag, loader, buckets) in enumerate((("neither", False, False), ("loader", True, False),
                                                ("buckets", False, True), ("both", True, True)))
] + [
    # ---------------------------------------------------------------- pipelines
    dict(
        name="pipeline_gpipe", kind="pipeline", world_size=4, seed=3000,
        description=(
            "torch.distributed.pipelining on gloo/CPU: a 4-stage MLP (width 512, 2 Linear+GELU per stage; "
            "stage 0 also the input projection, stage 3 the head), one PipelineStage per rank, ScheduleGPipe "
            "with 8 micro-batches of 32 rows, MSE loss, SGD. The library annotates 'Forward i' / 'Backward i' "
            "per micro-batch; each step is also inside record_function('pipeline_step') and "
            "record_function('optimizer'). Nothing is injected: the idle time is the schedule's bubble."
        ),
        cfg=dict(width=512, in_dim=256, out_dim=64, layers_per_stage=[2, 2, 2, 2], schedule="gpipe",
                 microbatches=8, batch=256, optimizer="sgd", wait=1, warmup=1, active=4,
                 annotations={"schedule": "pipeline_step", "optimizer": "optimizer"}),
        injected=None,
        expected={"first_finding": "pipeline_bubble", "ranks": [0, 1, 2, 3], "must_not": ["straggler", "small_collectives"]},
    ),
    dict(
        name="pipeline_1f1b", kind="pipeline", world_size=4, seed=3100,
        description=(
            "Same pipeline as pipeline_gpipe with Schedule1F1B (8 micro-batches). Schedule1F1B adds no "
            "record_function of its own and this scenario adds none either: only the profiler's ops and the "
            "c10d::send / c10d::recv_ / gloo:send / gloo:recv spans."
        ),
        cfg=dict(width=512, in_dim=256, out_dim=64, layers_per_stage=[2, 2, 2, 2], schedule="1f1b",
                 microbatches=8, batch=256, optimizer="sgd", wait=1, warmup=1, active=4, annotations={}),
        injected=None,
        expected={"first_finding": "pipeline_bubble", "ranks": [0, 1, 2, 3], "must_not": ["straggler", "small_collectives"]},
    ),
    dict(
        name="pipeline_slow_stage", kind="pipeline", world_size=4, seed=3200,
        description=(
            "GPipe pipeline as pipeline_gpipe, but stage 2 has 5 Linear+GELU layers instead of 2 (~2.5x the "
            "compute of stages 1 and 3); the other stages wait for it, so their idle share grows."
        ),
        cfg=dict(width=512, in_dim=256, out_dim=64, layers_per_stage=[2, 2, 5, 2], schedule="gpipe",
                 microbatches=8, batch=256, optimizer="sgd", wait=1, warmup=1, active=4,
                 annotations={"schedule": "pipeline_step", "optimizer": "optimizer"}),
        injected={"cause": "pipeline_bubble", "ranks": [2], "where": "stage 2 (5 layers vs 2)", "amount_ms": None,
                  "how": "stage 2 holds 5 Linear(512,512)+GELU layers, the others 2"},
        expected={"first_finding": "pipeline_bubble", "ranks": [2], "slowest_stage": 2, "must_not": ["straggler", "small_collectives"]},
    ),
    # ---------------------------------------------------------------- hangs (issue 9)
    dict(
        name="hang_skipped_allreduce", kind="hang", world_size=4, seed=4000, fr=True, fr_json=True,
        description=(
            "DDP-free loop with two explicit all_reduces per step: the flattened gradients inside "
            "record_function('grad_allreduce') on the default process group, and the 1-element loss inside "
            "record_function('loss_allreduce') on a second gloo group for metrics (dist.new_group). In step 3 "
            "(the 4th step) rank 1 skips the loss all_reduce and goes on to step 4's gradient all_reduce: ranks "
            "0, 2, 3 wait in the metrics group for rank 1, rank 1 waits in the default group for them. Process "
            "group timeout 8 s; every rank catches the timeout, dumps its Flight Recorder and exports its trace "
            "(profiled from step 0, no wait/warmup, so the trace ends at the failure)."
        ),
        cfg=dict(in_dim=256, width=512, depth=3, classes=16, batch=64, optimizer="sgd", steps=6, timeout_s=8,
                 metrics_pg=True, inject={"kind": "skip", "ranks": [1], "step": 3}),
        injected={"cause": "collective_mismatch", "ranks": [1], "where": "step 3, loss_allreduce (metrics group)", "amount_ms": None,
                  "how": "rank 1 does not call dist.all_reduce(loss, group=metrics_pg) in step 3"},
        expected={"first_finding": "collective_mismatch", "ranks": [1], "kind": "missing collective",
                  "must_not": ["straggler", "small_collectives", "compute_imbalance", "input_bound"]},
        notes=["With a single process group the same skip does not hang: rank 1's next all_reduce (the gradients, "
               "465416 bytes per ring chunk) meets the others' 4-byte loss all_reduce and gloo aborts the receiving "
               "process (SIGABRT, 'op.preamble.length <= op.nbytes. 465416 vs 4. Received data size doesn't match "
               "expected size'), leaving no trace from it. Hence the loss all_reduce runs on its own group here."],
    ),
    dict(
        name="mismatch_shapes", kind="hang", world_size=4, seed=4100, fr=True,
        env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
        description=(
            "Same loop on one process group; in step 3 rank 2 all_reduces a gradient buffer one element shorter "
            "than the others' (as if one parameter had been left out). Run with TORCH_DISTRIBUTED_DEBUG=DETAIL, "
            "which wraps the process group so that every collective is first checked across ranks (op, shapes, "
            "dtypes): the mismatch raises a RuntimeError on the ranks instead of corrupting the ring. Timeout 8 s, "
            "FR dumps and traces as in hang_skipped_allreduce."
        ),
        cfg=dict(in_dim=256, width=512, depth=3, classes=16, batch=64, optimizer="sgd", steps=6, timeout_s=8,
                 inject={"kind": "shape", "ranks": [2], "step": 3, "drop_elems": 1}),
        injected={"cause": "collective_mismatch", "ranks": [2], "where": "step 3, grad_allreduce", "amount_ms": None,
                  "how": "rank 2 all_reduces flat_grads[:-1] (one element fewer) in step 3"},
        expected={"first_finding": "collective_mismatch", "ranks": [2], "kind": "shape mismatch",
                  "must_not": ["straggler", "small_collectives", "compute_imbalance", "input_bound"]},
        notes=["Without TORCH_DISTRIBUTED_DEBUG=DETAIL gloo notices the size difference only inside the ring and "
               "aborts a process (SIGABRT, 'op.preamble.length <= op.nbytes. 465416 vs 465412'), so that rank leaves "
               "no trace. DETAIL adds the wrapper's own fingerprint collectives to every rank's trace."],
    ),
    dict(
        name="early_exit", kind="hang", world_size=4, seed=4200, fr=True,
        description=(
            "Same loop (one process group); rank 3 leaves the training loop after step 2 (three steps done: 0, 1, "
            "2), exports its trace and FR dump, then runs 12 s of non-collective work (as an evaluation or "
            "checkpoint would) and exits cleanly, while ranks 0-2 go on into step 3 and block in its gradient "
            "all_reduce until the 8 s process group timeout."
        ),
        cfg=dict(in_dim=256, width=512, depth=3, classes=16, batch=64, optimizer="sgd", steps=6, timeout_s=8,
                 linger_s=12, inject={"kind": "early_exit", "ranks": [3], "step": 3}),
        injected={"cause": "collective_mismatch", "ranks": [3], "where": "after step 2 (rank 3 never issues step 3's grad_allreduce)",
                  "amount_ms": None, "how": "rank 3 breaks out of the loop before step 3"},
        expected={"first_finding": "collective_mismatch", "ranks": [3], "kind": "rank exited",
                  "must_not": ["straggler", "small_collectives", "compute_imbalance", "input_bound"]},
        notes=["If rank 3's process exits right away instead, the others do not wait for the timeout: gloo reports "
               "'Connection closed by peer' / 'Connection reset by peer' within ~0.2-0.5 s. The ProfilerStep#3 that "
               "rank 3's last prof.step() opened is closed by prof.stop() almost at once (duration ~0)."],
    ),
]

# What each measured key means (copied into scenario.json).
MEASURED_HOW = {
    "extra_mm_ms": "perf_counter() around the extra torch.mm in forward (make_opchange.py's one matmul)",
    "step_ms": "perf_counter() from the top of the loop iteration to just before prof.step() (the ProfilerStep#N span covers the same work)",
    "start_unix_ns": "time.time_ns() at the top of the iteration (the trace's ts*1000 + baseTimeNanoseconds is on the same clock)",
    "end_unix_ns": "time.time_ns() just before prof.step()",
    "data_ms": "time to get the batch (DataLoader __next__, or indexing a list of pre-made tensors)",
    "dataset_sleep_ms": "sum of the sleeps Dataset.__getitem__ really slept during this step's batch",
    "forward_ms": "model forward + loss (+ the injected sleep where it is inside forward)",
    "injected_sleep_ms": "perf_counter() around the injected time.sleep()",
    "backward_ms": "loss.backward(); for DDP this includes waiting for the gradient all_reduces",
    "bwd_tail_ms": "from the last parameter's post-accumulate-grad hook to the return of loss.backward(): time blocked waiting for DDP's bucket all_reduces (transfer + wait for late ranks) and copying them back",
    "last_grad_ready_unix_ns": "when this rank's last gradient was ready (it could join the last bucket's all_reduce)",
    "optimizer_ms": "opt.step() + opt.zero_grad()",
    "metric_allreduce_ms": "host_sync: sum over the 4 metrics of the blocking dist.all_reduce of the 0-dim tensor",
    "metric_item_ms": "host_sync: sum over the 4 metrics of .item() after it",
    "loss_allreduce_ms": "hang scenarios: blocking dist.all_reduce of the 1-element loss",
    "grad_allreduce_ms": "blocking dist.all_reduce of the flat gradient buffer",
    "schedule_ms": "schedule.step() wall time (the pipeline part of the step)",
    "fwd_compute_ms": "sum over micro-batches of PipelineStage.forward_one_chunk() (compute only: the schedule waits for recv / posts sends outside it)",
    "bwd_compute_ms": "sum over micro-batches of PipelineStage.backward_one_chunk()",
    "loss_compute_ms": "sum over micro-batches of the loss function (last stage only)",
    "compute_ms": "fwd_compute_ms + bwd_compute_ms + loss_compute_ms",
    "idle_in_schedule_ms": "schedule_ms - compute_ms: waiting for neighbours (bubble) plus p2p bookkeeping",
    "bubble_share": "idle_in_schedule_ms / schedule_ms",
}


# --------------------------------------------------------------------------------------
# running one scenario
# --------------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(scn, workdir, deadline_s):
    spec = {"kind": scn["kind"], "world_size": scn["world_size"], "cfg": dict(scn["cfg"], seed=scn["seed"])}
    with open(os.path.join(workdir, "spec.json"), "w") as f:
        json.dump(spec, f)
    port = free_port()
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONHASHSEED="0", PYTHONUNBUFFERED="1")
    env.update(scn.get("env", {}))
    if scn.get("fr"):
        # Flight Recorder: keep 2000 entries; where a backend dumps by itself, it writes here.
        env.update(TORCH_FR_BUFFER_SIZE="2000", TORCH_FR_DUMP_TEMP_FILE=os.path.join(workdir, "fr_rank"),
                   TORCH_NCCL_DEBUG_INFO_TEMP_FILE=os.path.join(workdir, "fr_rank"))
    procs = []
    for r in range(scn["world_size"]):
        log = open(os.path.join(workdir, f"log_rank{r}.txt"), "w")
        p = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", "spec.json", "--rank", str(r)],
            cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        procs.append((p, log))
    t0 = time.time()
    killed = []
    for r, (p, log) in enumerate(procs):
        left = deadline_s - (time.time() - t0)
        try:
            p.wait(timeout=max(left, 0.1))
        except subprocess.TimeoutExpired:
            pass
    for r, (p, log) in enumerate(procs):
        if p.poll() is None:  # a stuck rank must not block the script
            killed.append(r)
            try:
                os.killpg(p.pid, signal.SIGKILL)  # its own process group only
            except ProcessLookupError:
                pass
            p.wait()
        log.close()
    return {"returncodes": [p.returncode for p, _ in procs], "killed_ranks": killed,
            "wall_s": round(time.time() - t0, 1)}


def gzip_to(src, dst):
    """gzip with mtime=0 and no file name in the header, so equal input gives equal bytes."""
    with open(src, "rb") as fi, open(dst, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as fo:
            shutil.copyfileobj(fi, fo)


# --------------------------------------------------------------------------------------
# checking what the traces contain (a summary written next to the measurements)
# --------------------------------------------------------------------------------------

COLL_PREFIXES = ("gloo:", "c10d::", "nccl:", "record_param_comms")
INTERESTING = ("forward", "backward", "optimizer", "## forward ##", "## backward ##", "## optimizer ##", "fwd", "bwd",
               "opt_step", "straggler_sleep", "log_metrics", "grad_allreduce", "loss_allreduce", "pipeline_step",
               "DistributedDataParallel.forward", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")


def summarize_trace(path):
    with open(path) as f:
        d = json.load(f)
    evs = [e for e in d["traceEvents"] if e.get("ph") == "X"]
    main_tid = Counter(e["tid"] for e in evs if e.get("cat") == "cpu_op").most_common(1)[0][0]
    steps = sorted([e for e in evs if e["name"].startswith("ProfilerStep#")], key=lambda e: e["ts"])
    thread_names = {e["tid"]: e["args"]["name"] for e in d["traceEvents"] if e.get("ph") == "M" and e.get("name") == "thread_name"}
    threads = defaultdict(lambda: {"events": 0, "collectives": Counter()})
    for e in evs:
        t = threads[e["tid"]]
        t["events"] += 1
        if e["name"].startswith(COLL_PREFIXES):
            t["collectives"][e["name"]] += 1
    per_step = []
    for s in steps:
        lo, hi = s["ts"], s["ts"] + s["dur"]
        inside = [e for e in evs if e["tid"] == main_tid and lo <= e["ts"] < hi]
        ann = defaultdict(float)
        for e in inside:
            if e["name"] in INTERESTING or e["name"].startswith(("Optimizer.step#", "Forward ", "Backward ")):
                key = e["name"] if not e["name"].startswith(("Forward ", "Backward ")) else e["name"].split()[0] + " i"
                ann[key] += e["dur"] / 1e3
        colls = [e for e in evs if e["name"].startswith("gloo:") and lo <= e["ts"] < hi]
        per_step.append({
            "name": s["name"], "dur_ms": round(s["dur"] / 1e3, 3),
            "annotations_ms": {k: round(v, 3) for k, v in sorted(ann.items())},
            "gloo_spans": dict(Counter(e["name"] for e in colls)),
            "gloo_span_ms": round(sum(e["dur"] for e in colls) / 1e3, 3),
            "gloo_span_dims": sorted({str(e["args"].get("Input Dims")) for e in colls})[:6],
        })
    return {
        "events": len(d["traceEvents"]),
        "main_tid_events": threads[main_tid]["events"],
        "threads": [
            {"role": "main" if tid == main_tid else "other", "name": thread_names.get(tid, "?"), "events": t["events"],
             "collective_spans": dict(t["collectives"])}
            for tid, t in sorted(threads.items(), key=lambda kv: -kv[1]["events"])
        ],
        "profiler_steps": per_step,
        "distributedInfo": {k: d.get("distributedInfo", {}).get(k) for k in ("backend", "rank", "world_size")},
    }


def mean(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.fmean(xs), 3) if xs else None


def per_rank_means(measured, keys):
    out = {}
    for r, m in measured.items():
        out[r] = {k: mean([s.get(k) for s in m["steps"]]) for k in keys if any(k in s for s in m["steps"])}
    return out


# Scenario-specific conclusions drawn from the measurements ---------------------------

def finalize_host_sync(scn, measured, notes):
    """What removing the logging could save per step is what the last arriver spends in it (the
    transfer + .item()); the others' extra time there is waiting that would move to the gradient
    all_reduce. Call it the first finding if that saving is above ~1% of the step."""
    ranks = sorted(measured)
    n = len(measured[ranks[0]]["steps"])
    cost, save, step = [], [], []
    for i in range(n):
        per = [measured[r]["steps"][i]["metric_allreduce_ms"] + measured[r]["steps"][i]["metric_item_ms"] for r in ranks]
        cost.append(statistics.fmean(per))
        save.append(min(per))
        step.append(statistics.fmean(measured[r]["steps"][i]["step_ms"] for r in ranks))
    c, s, st = statistics.fmean(cost), statistics.fmean(save), statistics.fmean(step)
    notes.append(f"log_metrics (blocking scalar all_reduces + .item()) takes {c:.1f} ms per step on average "
                 f"({c / st:.1%} of the step); the rank that arrives last still spends {s:.1f} ms ({s / st:.1%}) in it, "
                 "which is what removing it would save.")
    if s / st > 0.01:
        scn["expected"] = {
            "first_finding": "host_sync", "ranks": [0, 1, 2, 3], "where": "log_metrics",
            "why": (f"the only difference from good_overlap: blocking scalar all_reduce + .item() per parameter per step cost every rank "
                    f"at least {s / st:.1%} of the step (what even the last arriver spends there: the savable part); the rest of "
                    "the time in them is waiting for the slowest forward, not a consistent straggler. On CPU ranks the advice "
                    "must be CPU advice (batch the metrics into one tensor / log every N steps), not torch.cuda.synchronize."),
            "may_report": ["small_collectives (latency-bound scalar all_reduces per step; batching them is the same fix)"],
            "must_not": ["straggler", "compute_imbalance", "input_bound", "host_stall"],
        }
    else:
        scn["expected"] = {
            "first_finding": None, "ranks": [],
            "why": f"the savable part of the logging is only {s / st:.1%} of the step: not worth acting on first",
            "must_not": DP_FALSE_POSITIVES,
        }


def finalize_good_overlap(scn, measured, notes):
    """Exposed transfer per step = the shortest bwd_tail over the ranks (the last arriver does not
    wait for anybody: what is left after its last gradient is the all_reduce not hidden)."""
    ranks = sorted(measured)
    n = len(measured[ranks[0]]["steps"])
    exposed = [min(measured[r]["steps"][i]["bwd_tail_ms"] for r in ranks) for i in range(n)]
    step = [statistics.fmean(measured[r]["steps"][i]["step_ms"] for r in ranks) for i in range(n)]
    share = statistics.fmean(exposed) / statistics.fmean(step)
    notes.append(f"exposed all_reduce after the last gradient (min over ranks of bwd_tail_ms) is {statistics.fmean(exposed):.1f} ms "
                 f"per step, {share:.1%} of the step; the rest of the others' bwd_tail is waiting for the last arriver.")
    if share < 0.10:
        scn["expected"]["must_not"] = DP_FALSE_POSITIVES + ["exposed_comm"]
        scn["expected"]["why"] = (f"measured exposed all_reduce {share:.1%} of the step (< 10%: DOMAIN's 'DP communication share < 10% "
                                  "= hidden'); the 25 MB bucket runs while backward computes the token-wise layers")
    else:
        scn["expected"]["why"] = ("the all_reduce does run during backward, but on 2 shared cores the tail after the last "
                                  f"gradient is {share:.1%} of the step, so exposed_comm advice is not a false positive here")


def finalize_hang(scn, measured, notes):
    """What each rank's last collective was, and the first place where the sequences differ."""
    seqs = {r: m["extra"].get("collectives", []) for r, m in measured.items()}
    last = {}
    for r, cs in seqs.items():
        c = cs[-1] if cs else None
        last[r] = c and {k: c[k] for k in ("seq", "pg", "pg_seq", "step", "name", "shape", "status", "ms") if k in c} | (
            {"error": c["error"]} if "error" in c else {})
    n = max(len(cs) for cs in seqs.values())
    first_diff = None
    for i in range(n):
        sig = {r: (cs[i]["step"], cs[i]["name"], tuple(cs[i]["shape"])) if i < len(cs) else None for r, cs in seqs.items()}
        if len(set(sig.values())) > 1:
            groups = defaultdict(list)
            for r, sgn in sig.items():
                groups[str(sgn)].append(int(r))
            first_diff = {"seq": i + 1, "issued": {
                k if k != "None" else "nothing (missing)": v for k, v in groups.items()}}
            break
    outcome = {r: m["extra"].get("outcome") for r, m in measured.items()}
    scn["hang_analysis"] = {
        "last_collective_per_rank": last,
        "first_divergence": first_diff,
        "outcome_per_rank": outcome,
        "how": "from each rank's own log of the dist.all_reduce calls it issued (seq counts from 1 per process group, like the FR collective_seq_id)",
    }


def derived(scn, measured):
    """Figures computed from the ranks' own measurements (not from the traces), in the form the
    tool reports them: per step, per rank."""
    ranks = sorted(measured)
    n = len(measured[ranks[0]]["steps"])
    out = {}
    if scn["kind"] == "dp" and all("bwd_tail_ms" in s for m in measured.values() for s in m["steps"]):
        # DDP: the last arriver's bwd_tail is the exposed transfer; every other rank's bwd_tail
        # beyond that is time it waited for the last arriver (DOMAIN: charge the wait to the late rank).
        per_step = []
        for i in range(n):
            tails = {r: measured[r]["steps"][i]["bwd_tail_ms"] for r in ranks}
            t = {r: measured[r]["steps"][i]["last_grad_ready_unix_ns"] for r in ranks}
            last = max(t, key=t.get)
            per_step.append({"step": measured[ranks[0]]["steps"][i]["step"], "last_ready_rank": int(last),
                             "transfer_ms": tails[last],
                             "wait_ms": {r: round(max(0.0, tails[r] - tails[last]), 3) for r in ranks}})
        out["collective_wait"] = {
            "how": "per step: the rank whose last gradient was ready last (last_grad_ready_unix_ns) is the last arriver; "
                   "its bwd_tail_ms is the exposed transfer, every other rank's bwd_tail_ms minus that is its wait for the last arriver",
            "steps": per_step,
        }
        inj = [str(r) for r in (scn["injected"] or {}).get("ranks", [])]
        if len(inj) == 1 and len(ranks) > 1:
            others = [r for r in ranks if r != inj[0]]
            w = statistics.fmean(s["wait_ms"][r] for s in per_step for r in others)
            out["collective_wait"]["mean_wait_of_other_ranks_ms"] = round(w, 3)
            out["collective_wait"]["injected_rank_last_in_steps"] = sum(1 for s in per_step if str(s["last_ready_rank"]) == inj[0])
    if scn["kind"] == "pipeline":
        p, mb = scn["world_size"], scn["cfg"]["microbatches"]
        out["pipeline"] = {
            "how": "bubble_share = (schedule_ms - compute_ms) / schedule_ms per stage per step, from perf_counter() around "
                   "PipelineStage.forward_one_chunk / backward_one_chunk / the loss; theory = (p-1)/(m+p-1)",
            "theory_bubble_share": round((p - 1) / (mb + p - 1), 4),
            "mean_bubble_share_per_stage": {r: mean([s["bubble_share"] for s in measured[r]["steps"]]) for r in ranks},
            "mean_compute_ms_per_stage": {r: mean([s["compute_ms"] for s in measured[r]["steps"]]) for r in ranks},
            "slowest_stage": int(max(ranks, key=lambda r: statistics.fmean(s["compute_ms"] for s in measured[r]["steps"]))),
        }
    return out


FINALIZE = {"host_sync": finalize_host_sync, "good_overlap": finalize_good_overlap,
            "hang_skipped_allreduce": finalize_hang, "mismatch_shapes": finalize_hang, "early_exit": finalize_hang}


def arrival_lateness(measured):
    """Per step: each rank's last-gradient-ready time minus the median over ranks (ms)."""
    ranks = sorted(measured)
    n = len(measured[ranks[0]]["steps"])
    out = []
    for i in range(n):
        t = {r: measured[r]["steps"][i].get("last_grad_ready_unix_ns") for r in ranks}
        if None in t.values():
            return None
        med = statistics.median(t.values())
        out.append({r: (v - med) / 1e6 for r, v in t.items()})
    return out


def validate(scn, measured):
    """Is this run a valid example of the scenario? Healthy runs must not have a persistent
    late rank (4 ranks on 2 cores: the OS scheduler sometimes starves one rank for a whole run);
    injected runs must show the injection. A run that fails is generated again (max 3 tries)."""
    problems = []
    ranks = sorted(measured)
    step_ms = statistics.fmean(s["step_ms"] for m in measured.values() for s in m["steps"])
    late = arrival_lateness(measured) if scn["kind"] == "dp" else None
    inj_ranks = [str(r) for r in (scn["injected"] or {}).get("ranks", [])]
    if late and (scn["injected"] is None or scn["name"] == "host_sync"):
        for r in ranks:
            lastc = sum(1 for st in late if max(st, key=st.get) == r)
            ml = statistics.fmean(st[r] for st in late)
            if ml > 0.05 * step_ms and lastc > len(late) / 2:
                problems.append(f"healthy run has a persistent late rank {r}: {ml:.0f} ms after the median, last in {lastc}/{len(late)} steps")
    if late and scn["expected"] and scn["expected"].get("first_finding") in ("straggler", "input_bound", "compute_imbalance"):
        (r,) = inj_ranks
        for i, st in enumerate(late):
            others = sorted(v for k, v in st.items() if k != r)
            if max(st, key=st.get) != r or st[r] - others[-1] < 0.10 * step_ms:
                problems.append(f"step {i}: injected rank {r} is not clearly the last to be ready ({ {k: round(v) for k, v in st.items()} })")
    if scn["name"] == "noise_burst_2rank" and late:
        b = scn["expected"]["burst"]
        r, i = str(b["rank"]), b["profiled_step_index"]
        for k, st in enumerate(late):
            other = max(v for q, v in st.items() if q != r)
            if k == i and st[r] - other < 0.10 * step_ms:
                problems.append(f"burst step {k}: rank {r} is not clearly late ({ {q: round(v) for q, v in st.items()} })")
            if k != i and st[r] - other > 0.05 * step_ms:
                problems.append(f"step {k}: rank {r} late outside the burst ({ {q: round(v) for q, v in st.items()} })")
    if scn["name"] in ("small_buckets", "pair_mixed_buckets"):
        nb = measured[ranks[0]]["extra"]["ddp_logging"].get("rebuilt_bucket_sizes", "").count(",") + 1
        if nb < 15:
            problems.append(f"only {nb} DDP buckets")
    if scn["name"] == "pipeline_slow_stage":
        c = {r: statistics.fmean(s["compute_ms"] for s in m["steps"]) for r, m in measured.items()}
        if c["2"] < 2.0 * statistics.fmean(c[r] for r in ("1", "3")):
            problems.append(f"stage 2 compute {c['2']:.0f} ms is not >= 2x stages 1/3")
    return problems


def auto_notes(summaries):
    """Facts about the traces worth knowing when parsing them (computed, so they stay true)."""
    s = summaries["0"]
    out = []
    for t in s["threads"]:
        if t["collective_spans"]:
            out.append(f"rank 0 {t['role']} thread '{t['name']}': " + ", ".join(f"{k} x{v}" for k, v in sorted(t["collective_spans"].items())))
    n_rpc = sum(t["collective_spans"].get("record_param_comms", 0) for t in s["threads"])
    if n_rpc == 0:
        out.append("no record_param_comms events in these gloo CPU traces: collectives are c10d::* ops on the main "
                   "thread (the enqueue) and gloo:* user_annotation spans (the transfer, on gloo worker threads for "
                   "async work) whose args carry 'Input Dims' and 'Input type'")
    return out


def checks(scn, measured, summaries):
    """Sanity checks a person would do on the traces; failures become warnings."""
    warn = []
    for r, s in summaries.items():
        m = measured[r]
        n_prof = len(s["profiler_steps"])
        if n_prof == 0:
            warn.append(f"rank {r}: no ProfilerStep markers")
        if scn["kind"] != "hang":
            if n_prof != scn["cfg"]["active"]:
                warn.append(f"rank {r}: {n_prof} ProfilerSteps, expected {scn['cfg']['active']}")
            for ps, ms_ in zip(s["profiler_steps"], m["steps"]):
                if abs(ps["dur_ms"] - ms_["step_ms"]) > 0.15 * ms_["step_ms"]:
                    warn.append(f"rank {r} {ps['name']}: trace {ps['dur_ms']} ms vs measured {ms_['step_ms']} ms")
    return warn


def generate(scn, out_root, keep_work=False):
    name = scn["name"]
    scn = copy.deepcopy(scn)
    t0 = time.time()
    attempts = []
    for attempt in range(3):
        workdir = tempfile.mkdtemp(prefix=f"zoo_{name}_")
        deadline = 120 if scn["kind"] == "hang" else 300
        run = run_ranks(scn, workdir, deadline)
        W = scn["world_size"]
        measured, failed = {}, []
        for r in range(W):
            p = os.path.join(workdir, f"measured_rank{r}.json")
            if not os.path.exists(p) or not os.path.exists(os.path.join(workdir, f"rank{r}.pt.trace.json")):
                failed.append(r)
                continue
            with open(p) as f:
                measured[str(r)] = json.load(f)
            if not measured[str(r)]["ok"]:
                failed.append(r)
        if failed:
            logs = {r: open(os.path.join(workdir, f"log_rank{r}.txt")).read()[-3000:] for r in failed}
            raise RuntimeError(f"{name}: ranks {failed} failed ({run}); work dir {workdir}\n" + "\n".join(f"--- rank {r}\n{t}" for r, t in logs.items()))
        problems = validate(scn, measured)
        attempts.append({"attempt": attempt + 1, "wall_s": run["wall_s"], "problems": problems})
        if not problems:
            break
        print(f"   {name}: attempt {attempt + 1} not a valid example: {problems}", flush=True)
        if attempt < 2:
            shutil.rmtree(workdir, ignore_errors=True)
    run["attempts"] = attempts

    dest = os.path.join(out_root, name)
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    summaries, sizes = {}, {}
    for r in range(W):
        raw = os.path.join(workdir, f"rank{r}.pt.trace.json")
        summaries[str(r)] = summarize_trace(raw)
        gz = os.path.join(dest, f"rank{r}.pt.trace.json.gz")
        gzip_to(raw, gz)
        sizes[f"rank{r}.pt.trace.json.gz"] = os.path.getsize(gz)
        if scn.get("fr"):
            shutil.copy(os.path.join(workdir, f"fr_rank{r}.pkl"), os.path.join(dest, f"fr_rank{r}.pkl"))
            sizes[f"fr_rank{r}.pkl"] = os.path.getsize(os.path.join(dest, f"fr_rank{r}.pkl"))
            if scn.get("fr_json") and os.path.exists(os.path.join(workdir, f"fr_rank{r}.json")):
                shutil.copy(os.path.join(workdir, f"fr_rank{r}.json"), os.path.join(dest, f"fr_rank{r}.json"))
                sizes[f"fr_rank{r}.json"] = os.path.getsize(os.path.join(dest, f"fr_rank{r}.json"))

    notes = list(scn.get("notes", [])) + auto_notes(summaries)
    if name in FINALIZE:
        FINALIZE[name](scn, measured, notes)
    warnings = checks(scn, measured, summaries) + [f"not a clean example: {p}" for p in run["attempts"][-1]["problems"]]
    keys = sorted({k for m in measured.values() for s in m["steps"] for k, v in s.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and not k.endswith(("unix_ns", "_calls")) and k != "step"})
    steps_profiled = sorted({int(ps["name"].split("#")[1]) for s in summaries.values() for ps in s["profiler_steps"]})
    import torch  # only for the version string
    doc = {
        "name": name,
        "description": scn["description"],
        "seed": scn["seed"],
        "world_size": W,
        "backend": "gloo",
        "device": "cpu",
        "torch_version": torch.__version__,
        "steps_profiled": steps_profiled,
        "profiler": ({"schedule": {"wait": 0, "warmup": 0, "active": scn["cfg"]["steps"]}, "note": "profiled from step 0; the trace ends where the rank failed or left"}
                     if scn["kind"] == "hang" else
                     {"schedule": {k: scn["cfg"][k] for k in ("wait", "warmup", "active")}, "activities": ["CPU"], "record_shapes": True}),
        "config": scn["cfg"],
        "injected": scn["injected"],
        "expected": scn["expected"],
        "measured": {
            "how": {k: v for k, v in MEASURED_HOW.items() if k in keys or k in ("step_ms", "start_unix_ns")},
            "per_rank_mean": per_rank_means(measured, keys),
            "derived": derived(scn, measured),
            "per_rank": {r: {"steps": m["steps"], "extra": m.get("extra", {})} for r, m in measured.items()},
        },
        "trace_summary": summaries,
        "notes": notes,
        "check_warnings": warnings,
        "run": dict(run, generation_s=round(time.time() - t0, 1)),
        "files": sizes,
    }
    if "hang_analysis" in scn:
        doc["hang_analysis"] = scn["hang_analysis"]
    with open(os.path.join(dest, "scenario.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    if not keep_work:
        shutil.rmtree(workdir, ignore_errors=True)
    return doc


def print_doc(doc):
    pm = doc["measured"]["per_rank_mean"]
    print(f"== {doc['name']}  ({doc['run']['generation_s']} s, {sum(doc['files'].values()) / 1024:.0f} KiB)")
    for r, v in pm.items():
        print(f"   rank {r}: " + ", ".join(f"{k}={x}" for k, x in v.items()))
    for r, s in doc["trace_summary"].items():
        ps = s["profiler_steps"]
        print(f"   trace {r}: {s['events']} events, steps {[p['name'] + ':' + str(round(p['dur_ms'])) for p in ps]}, "
              f"gloo/step {[p['gloo_spans'] for p in ps][:1]}")
    for n in doc["notes"]:
        print("   note:", n)
    for w in doc["check_warnings"]:
        print("   WARNING:", w)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--only", help="comma-separated scenario names")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep-work", action="store_true", help="keep the temporary work directories")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        sys.path.insert(0, HERE)
        import zoo_workers
        zoo_workers.worker_main(a.worker, a.rank)
        return
    if a.list:
        for s in SCENARIOS:
            print(f"{s['name']:24s} {s['kind']:9s} world {s['world_size']}")
        return
    todo = SCENARIOS
    if a.only:
        wanted = a.only.split(",")
        unknown = set(wanted) - {s["name"] for s in SCENARIOS}
        if unknown:
            sys.exit(f"unknown scenarios: {sorted(unknown)}")
        todo = [s for s in SCENARIOS if s["name"] in wanted]
    generate_all(todo, lambda scn: print_doc(generate(scn, os.path.abspath(a.out), a.keep_work)))


def main_listed(scenarios):
    """The main of a script that adds scenarios of its own (`--out DIR [--only a,b]`): each
    with its own `expected`, without make_zoo's validation (one late rank), which does not
    apply to causes every rank has."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", help="comma-separated scenario names")
    a = ap.parse_args()
    global validate
    validate = lambda scn, measured: []  # noqa: E731
    todo = [s for s in scenarios if not a.only or s["name"] in a.only.split(",")]
    generate_all(todo, lambda scn: print_doc(generate(scn, os.path.abspath(a.out))))


def generate_all(todo, make):
    """Makes each scenario of `todo` (`make(scn)`: its traces and its doc), going on past a
    failure (said with its traceback); exits 1 when some failed. Every maker's main ends here."""
    import traceback
    t0 = time.time()
    failures = []
    for scn in todo:
        try:
            make(scn)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            failures.append(scn["name"])
            print(f"!! {scn['name']} failed: {e}", file=sys.stderr)
        sys.stdout.flush()
    print(f"done in {time.time() - t0:.0f} s; failed: {failures or 'none'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
