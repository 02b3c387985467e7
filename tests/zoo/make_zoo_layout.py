#!/usr/bin/env python3
"""Hybrid-parallel scenarios of the zoo (issue 33): real multi-process PyTorch (gloo, CPU) jobs
whose ranks belong to several process groups at once (tensor x data, tensor x pipeline x data,
HSDP replicate x shard, expert parallel, context parallel), each with one known injected cause
or none, profiled per rank with the PyTorch profiler (Kineto).

    /work/torchvenv/bin/python tests/zoo/make_zoo_layout.py                 # every scenario, into tests/zoo/layout/
    /work/torchvenv/bin/python tests/zoo/make_zoo_layout.py --only tp2_dp2_stall
    /work/torchvenv/bin/python tests/zoo/make_zoo_layout.py --list

Same conventions as make_zoo.py (subprocess ranks `--worker SPEC --rank R`, MASTER_ADDR
127.0.0.1 and a free port, one thread per rank, gzip with mtime 0, scenario.json with the same
members) plus `layout` (every process group the job created: name torch gave it, role, ranks)
and, in `expected`, `origin_ranks`, `not_blamed` and `chain`. The rank code is
layout_workers.py. CI never runs this: the committed traces are the test input.

Ground truth: every rank logs each collective / point-to-point call it makes (group, the
group's own collective number, kind, shape, time.time_ns() at entry and exit; all ranks share
this host's clock). Put side by side, the logs give for each collective instance the last rank
to arrive and each other member's wait for it (`measured.derived.waits`), independently of the
profiler.
"""

import argparse
import copy
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_zoo import free_port, generate_all, gzip_to, mean  # noqa: E402  (stdlib-only helpers)

DP_FALSE = ["compute_imbalance", "input_bound", "small_collectives", "slow_device"]

MEGATRON = dict(in_dim=256, hidden=512, ffn=2048, classes=16, blocks_per_stage=3, batch=128, lr=1e-3,
                tp=2, dp=2, pp=1, group_order=["tensor", "data"], group_desc=False,
                data_region="tokenize_batch", wait=1, warmup=1, active=4, pin_cores=True)


def cfg_of(base, **kw):
    c = copy.deepcopy(base)
    c.update(kw)
    return c


TP2_DP2_DESC = (
    "Megatron-style tensor parallel 2 x data parallel 2 on gloo/CPU, world 4, rank = dp*2 + tp (tensor fastest). "
    "Groups made with dist.new_group in this order, no group_desc: tensor {0,1}, {2,3}; data {0,2}, {1,3}. "
    "Model: replicated input projection 256->512, 3 blocks x + RowParallelLinear(gelu(ColumnParallelLinear(LayerNorm(x)))) "
    "(hidden 512, ffn 2048 split 1024 per tensor rank) with Megatron's f (_CopyToModelParallelRegion: identity forward, "
    "all_reduce backward) and g (_ReduceFromModelParallelRegion: all_reduce forward, identity backward) as custom "
    "autograd Functions, replicated head 512->16, cross-entropy; batch 128 per data-parallel replica (the same on both "
    "tensor ranks). Per step: record_function('tokenize_batch') (batch generation and normalisation), 'forward', "
    "'backward', 'grad_allreduce' (one flat all_reduce of every local gradient on the data group), 'optimizer' (SGD). "
    "So 3 tensor-group all_reduces of [128, 512] in forward, 3 in backward, 1 data-group all_reduce per step.")

HSDP = dict(in_dim=512, width=512, depth=4, classes=16, batch=32, item_sleep_ms=0.0, mesh=[2, 2],
            wait=1, warmup=1, active=4, pin_cores=True)

HSDP_DESC = (
    "HSDP on gloo/CPU, world 4: FSDP2 fully_shard on a 2-D DeviceMesh init_device_mesh('cpu', (2, 2), "
    "mesh_dim_names=('replicate', 'shard')) (mesh [[0, 1], [2, 3]]: shard groups {0,1} {2,3}, replicate groups "
    "{0,2} {1,3}, made by DeviceMesh with group_desc 'mesh_replicate' / 'mesh_shard'), applied to each of 4 "
    "Linear/LayerNorm/GELU blocks (width 512) and the root (input projection 512->512, head 512->16), AdamW, "
    "cross-entropy. Per unit: all_gather of the parameters over the shard group in forward and again in backward, "
    "reduce_scatter of the gradients over the shard group, all_reduce of the shards over the replicate group. Input "
    "from a real DataLoader (num_workers=0, batch 32, the Dataset makes each item with torch.randn: no artificial cost); annotations "
    "forward/backward/optimizer (plus FSDP's own).")

SCENARIOS = [
    dict(
        name="tp2_dp2_stall", kind="megatron", world_size=4, seed=5100,
        description=TP2_DP2_DESC + " Rank 3 sleeps 150 ms every step inside record_function('tokenize_batch') at the "
                                   "start of the step.",
        cfg=cfg_of(MEGATRON, inject={"ranks": [3], "amount_ms": 150}),
        injected={"cause": "host_stall", "ranks": [3], "where": "tokenize_batch", "amount_ms": 150,
                  "how": "time.sleep(0.15) inside record_function('tokenize_batch') at the start of every step, rank 3 only"},
        expected={"first_finding": "host_stall", "ranks": [3], "cause": "host_stall", "where": "tokenize_batch",
                  "origin_ranks": [3], "not_blamed": [0, 1, 2],
                  "chain": ["3 -(tensor {2,3})-> 2", "2 -(data {0,2})-> 0", "3 -(data {1,3})-> 1"],
                  "chain_text": "3 -(tensor {2,3})-> 2 -(data {0,2})-> 0; 3 -(data {1,3})-> 1",
                  "why": "rank 2 waits for rank 3 in the first tensor all_reduce of forward (g of block 1); ranks 2 and 3 then "
                         "reach the data-group gradient all_reduce late, so rank 0 waits for 2 and rank 1 for 3 there",
                  "must_not": DP_FALSE},
    ),
    dict(
        name="tp2_dp2_healthy", kind="megatron", world_size=4, seed=5200,
        description=TP2_DP2_DESC + " Nothing is injected (the paired healthy run of tp2_dp2_stall).",
        cfg=cfg_of(MEGATRON),
        injected=None,
        expected={"first_finding": None, "ranks": [], "origin_ranks": [], "not_blamed": [0, 1, 2, 3], "chain": [],
                  "must_not": DP_FALSE + ["straggler", "host_stall"]},
        finalize="healthy",
    ),
    dict(
        name="tp2_pp2_dp2_stall", kind="megatron", world_size=8, seed=5300,
        description=(
            "Megatron-style tensor 2 x pipeline 2 x data 2 on gloo/CPU, world 8, rank = pp*4 + dp*2 + tp (tensor fastest, "
            "then data, then pipeline). Groups made with dist.new_group in Megatron's order and with Megatron's "
            "group_desc: data {0,2} {1,3} {4,6} {5,7} (DATA_PARALLEL_GROUP), tensor {0,1} {2,3} {4,5} {6,7} "
            "(TENSOR_MODEL_PARALLEL_GROUP), pipeline {0,4} {1,5} {2,6} {3,7} (PIPELINE_MODEL_PARALLEL_GROUP). Stage 0 "
            "(ranks 0-3): input projection 128->256 + 2 parallel MLP blocks (hidden 256, ffn 1024); stage 1 (ranks 4-7): 2 "
            "blocks + head. A hand-written GPipe schedule with 4 micro-batches of 16 rows: all forwards (stage 0 isends "
            "each activation [16, 256] to its pipeline peer rank+4, stage 1 irecvs it), then all backwards (stage 1 isends "
            "the input gradient back); every p2p on the pipeline group, waited with Work.wait(). Tensor all_reduces "
            "(f/g) inside each stage for every micro-batch; after the flush one flat gradient all_reduce per stage on "
            "the data group ('grad_allreduce'), then SGD. Every rank has record_function('load_shard') at the start of "
            "the step (stage 0 makes the inputs, stage 1 the labels); rank 1 (stage 0, data 0, tensor 1) also sleeps "
            "120 ms in it every step."),
        cfg=cfg_of(MEGATRON, in_dim=128, hidden=256, ffn=1024, blocks_per_stage=2, batch=64, tp=2, dp=2, pp=2,
                   microbatches=4, group_order=["data", "tensor", "pipeline"], group_desc=True, data_region="load_shard",
                   inject={"ranks": [1], "amount_ms": 120}),
        injected={"cause": "host_stall", "ranks": [1], "where": "load_shard", "amount_ms": 120,
                  "how": "time.sleep(0.12) inside record_function('load_shard') at the start of every step, rank 1 only"},
        expected={"first_finding": "host_stall", "ranks": [1], "cause": "host_stall", "where": "load_shard",
                  "origin_ranks": [1], "not_blamed": [0, 2, 3, 4, 5, 6, 7],
                  "chain": ["1 -(tensor {0,1})-> 0", "1 -(pipeline {1,5})-> 5", "0 -(pipeline {0,4})-> 4",
                            "0 -(data {0,2})-> 2", "1 -(data {1,3})-> 3", "4 -(data {4,6})-> 6", "5 -(data {5,7})-> 7"],
                  "chain_text": "1 -(tensor {0,1})-> 0 -(pipeline {0,4})-> 4; 1 -(pipeline {1,5})-> 5; 0 -(data {0,2})-> 2; "
                                "1 -(data {1,3})-> 3; stage 1's data peers 6, 7 wait for 4, 5",
                  "why": "rank 0 waits for rank 1 in the first tensor all_reduce of micro-batch 0; stage 1's first recv is late "
                         "on ranks 4 and 5 by as much; at the end every data-parallel peer of the late replica waits in the "
                         "gradient all_reduce. The stage-1 ranks always wait for the first activation (the pipeline's fill); "
                         "only the extra is rank 1's",
                  "may_report": ["pipeline_bubble after host_stall (GPipe's fill and drain are real: (p-1)/(m+p-1) = 20% in theory)"],
                  "must_not": DP_FALSE},
    ),
    dict(
        name="hsdp_2x2_slow_loader", kind="hsdp", world_size=4, seed=5400,
        description=HSDP_DESC + " Rank 1's Dataset.__getitem__ also sleeps 6 ms per item (32 items per step: ~192 ms).",
        cfg=cfg_of(HSDP, inject={"ranks": [1], "item_sleep_ms": 6.0}),
        injected={"cause": "input_bound", "ranks": [1], "where": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                  "amount_ms": 192, "how": "Dataset.__getitem__ sleeps 6 ms per item on rank 1 (none elsewhere); 32 items per step -> "
                                          "~192 ms per step"},
        expected={"first_finding": "input_bound", "ranks": [1], "cause": "input_bound",
                  "where": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                  "origin_ranks": [1], "not_blamed": [0, 2, 3],
                  "chain": ["1 -(shard {0,1})-> 0", "1 -(replicate {1,3})-> 3", "0 -(replicate {0,2})-> 2"],
                  "chain_text": "1 -(shard {0,1})-> 0 (first all_gather of forward); 1 -(replicate {1,3})-> 3 and "
                                "0 -(replicate {0,2})-> 2 (the first gradient all_reduce in backward)",
                  "why": "rank 1 reaches its first all_gather (shard group) ~190 ms after rank 0, which waits for it there; the shard "
                         "pair {2,3} is on time and waits at its first gradient all_reduce over the replicate groups, 3 for 1 and "
                         "2 for 0 (late because it waited for 1)",
                  "must_not": ["compute_imbalance", "host_stall", "small_collectives", "slow_device"]},
    ),
    dict(
        name="hsdp_2x2_healthy", kind="hsdp", world_size=4, seed=5450,
        description=HSDP_DESC + " Nothing is injected (the paired healthy run).",
        cfg=cfg_of(HSDP),
        injected=None,
        expected={"first_finding": None, "ranks": [], "origin_ranks": [], "not_blamed": [0, 1, 2, 3], "chain": [],
                  "must_not": DP_FALSE + ["straggler", "host_stall"]},
        finalize="healthy",
    ),
    dict(
        name="ep4_moe_skew", kind="moe", world_size=4, seed=5500,
        description=(
            "Expert parallel MoE layer on gloo/CPU, world 4, one expert per rank (Linear 256->2048, GELU, Linear 2048->256). "
            "The expert group is dist.new_group(ranks=[0,1,2,3], group_desc='EXPERT_MODEL_PARALLEL_GROUP') (Megatron's "
            "description), beside the default group of the same ranks. Per step, 256 tokens per rank: replicated input "
            "projection 128->256, a top-1 softmax router (replicated Linear 256->4 plus a fixed per-expert bias, the same "
            "on every rank, fitted at start-up on a calibration batch drawn from the seed so that ~57.5% of the tokens go "
            "to expert 2 and the rest evenly; extra.router_bias), tokens sorted by "
            "expert; 'dispatch': all_to_all_single of the 4 token counts (the split sizes), then all_to_all_single of the "
            "tokens with those uneven input/output splits, as a custom autograd Function _AllToAll (the reverse exchange "
            "in backward); 'expert'; 'combine': the reverse all_to_all_single; gate-weighted residual, head 256->16, "
            "cross-entropy. Backward runs the two reverse exchanges. Then 'grad_allreduce': one flat all_reduce of the "
            "shared (non-expert) gradients on the default group (data parallel over the world), and SGD. Rank 2, the "
            "hot expert, computes ~4x the tokens of the others; they wait for it in the combine exchange (forward) and "
            "in the dispatch's reverse exchange (backward)."),
        cfg=dict(in_dim=128, hidden=256, ffn=2048, classes=16, tokens=256, hot_expert=2, hot_share=0.575, lr=1e-3,
                 group_desc=True, wait=1, warmup=1, active=4, pin_cores=True),
        injected={"cause": "expert_imbalance", "ranks": [2], "where": "router (a fixed bias on the gate logits favouring expert 2)",
                  "amount_ms": None,
                  "how": "a per-expert bias added to the gate logits (fitted for 57.5% of a calibration batch to expert 2, the rest even): "
                         "~57% of all tokens routed to the expert on rank 2"},
        expected={"first_finding": "expert_imbalance", "ranks": [2], "cause": "expert_imbalance", "hot_expert_rank": 2,
                  "token_share": None,  # measured, filled in by finalize_moe
                  "origin_ranks": [2], "not_blamed": [0, 1, 3],
                  "chain": ["2 -(expert {0,1,2,3})-> 0", "2 -(expert {0,1,2,3})-> 1", "2 -(expert {0,1,2,3})-> 3"],
                  "chain_text": "2 -(expert {0,1,2,3})-> 0, 1, 3 (combine all_to_all in forward, the dispatch's reverse in backward)",
                  "why": "the token counts per rank are in the split sizes (Input Dims of the all_to_all spans); rank 2's expert "
                         "computes the most tokens and the others wait for it in the next all_to_all; the fix is router balance "
                         "(aux loss, capacity factor), not the hardware",
                  "may_report": ["compute_imbalance on rank 2 after expert_imbalance (the same cause seen as compute)"],
                  "must_not": ["host_stall", "input_bound", "slow_device"]},
        finalize="moe", checks=["moe"],
    ),
    dict(
        # The pair of ep4_moe_skew: the same job with the router's bias fitted for even routing
        # (25% of the tokens to each expert). The difference of the two runs' steps is what
        # balancing the router gives, against which expert_imbalance's replayed gain is checked
        # (tests/whatif/replay_accuracy.py).
        name="ep4_moe_even", kind="moe", world_size=4, seed=5500,
        description=(
            "ep4_moe_skew's job (the same model, seed, data and layout) with the router's fixed per-expert bias fitted "
            "so that each expert gets ~25% of the tokens (hot_share 0.25): no expert is hot; the pair of ep4_moe_skew."),
        cfg=dict(in_dim=128, hidden=256, ffn=2048, classes=16, tokens=256, hot_expert=2, hot_share=0.25, lr=1e-3,
                 group_desc=True, wait=1, warmup=1, active=4, pin_cores=True),
        injected={"cause": None, "ranks": [], "where": None, "amount_ms": None,
                  "how": "nothing: the router's bias is fitted for even routing"},
        expected={"first_finding": None, "ranks": [], "hot_expert_rank": 2, "token_share": None,
                  "origin_ranks": [], "not_blamed": [0, 1, 2, 3], "chain": [],
                  "must_not": ["expert_imbalance", "host_stall", "input_bound", "slow_device"]},
        finalize="moe",
    ),
    dict(
        name="cp4_ring_stall", kind="ring", world_size=4, seed=5600,
        description=(
            "Context-parallel ring attention on gloo/CPU, world 4: each rank holds 256 consecutive tokens of the sequence "
            "(replicated weights: input projection 128->256, qkv 256->768, 4 heads of 64, output projection, head 256->16). "
            "The context group is dist.new_group(ranks=[0,1,2,3]) without a description, beside the default group of "
            "the same ranks. 'forward': a custom autograd Function _RingAttention passes each rank's K/V block (with its "
            "additive padding-mask column, [4, 256, 129]) round the ring in 3 rounds with dist.batch_isend_irecv (P2POp "
            "isend to (r+1)%4, irecv from (r-1)%4, on the context group), computing the attention of the block it holds "
            "meanwhile (online softmax); its backward recomputes each block and passes the dK/dV accumulators round the "
            "ring in 4 rounds (the last returns each to its owner). Then 'grad_allreduce': one flat all_reduce of all "
            "gradients on the default group, and SGD. Every rank builds its mask in record_function('attention_mask_build') "
            "before the ring; rank 0 also sleeps 100 ms there every step."),
        cfg=dict(in_dim=128, heads=4, head_dim=64, seq_per_rank=256, classes=16, pad_fraction=0.1, lr=1e-3, group_desc=False,
                 inject={"ranks": [0], "amount_ms": 100}, wait=1, warmup=1, active=4, pin_cores=True),
        own_wait_max=0.5,
        injected={"cause": "host_stall", "ranks": [0], "where": "attention_mask_build", "amount_ms": 100,
                  "how": "time.sleep(0.1) inside record_function('attention_mask_build') before the ring, every step, rank 0 only"},
        expected={"first_finding": "host_stall", "ranks": [0], "cause": "host_stall", "where": "attention_mask_build",
                  "origin_ranks": [0], "not_blamed": [1, 2, 3],
                  "chain": ["0 -(context {0,1,2,3})-> 1", "0 -(context {0,1,2,3})-> 3"],
                  "chain_text": "0 -(context {0,1,2,3})-> 1 (its irecv of 0's K/V block) and 0 -(context {0,1,2,3})-> 3 (its isend to 0 "
                                "completes only once 0 has posted the matching irecv); rank 2, two hops away, then waits for 1 "
                                "or 3 (whichever posts last in that round: it varies from step to step)",
                  "why": "on gloo a send completes only when the receiver has posted its recv, so the late rank holds up both "
                         "neighbours: the one receiving from it and the one sending to it. The delay goes on round the ring, so "
                         "rank 0 itself waits a little for its neighbours in the later rounds (up to half its stall is accepted "
                         "when validating the run, own_wait_max 0.5)",
                  "must_not": DP_FALSE},
    ),
    dict(
        name="tp4_healthy_commbound", kind="megatron", world_size=4, seed=5700,
        description=(
            "Pure tensor parallel 4 on gloo/CPU (Megatron-style f/g, as tp2_dp2), world 4, one tensor group "
            "dist.new_group([0,1,2,3]) without a description, no data parallelism (so no gradient all_reduce and no "
            "'grad_allreduce' region: tokenize_batch, forward, backward, optimizer). "
            "Wide and shallow: hidden 2048, ffn 1024 (256 per rank), 3 blocks, batch 128, so each block's compute is small "
            "next to its two all_reduces of [128, 2048] (1 MiB). Nothing is injected: no rank is late; the tensor-parallel "
            "communication is exposed (it cannot overlap: every all_reduce blocks the next layer)."),
        cfg=cfg_of(MEGATRON, in_dim=256, hidden=2048, ffn=1024, blocks_per_stage=3, batch=128, tp=4, dp=1, pp=1,
                   group_order=["tensor"]),
        injected=None,
        expected={"first_finding": "exposed_comm", "ranks": [0, 1, 2, 3], "role": "tensor", "origin_ranks": [], "not_blamed": [0, 1, 2, 3],
                  "chain": [], "why": "decided from the measurement (finalize_commbound)",
                  "must_not": ["straggler", "host_stall", "compute_imbalance", "input_bound", "small_collectives"]},
        finalize="commbound",
    ),
]

MEASURED_HOW = {
    "step_ms": "perf_counter() from the top of the loop iteration to just before prof.step() (ProfilerStep#N covers the same work)",
    "start_unix_ns": "time.time_ns() at the top of the iteration (the trace's ts*1000 + baseTimeNanoseconds is on the same clock)",
    "end_unix_ns": "time.time_ns() just before prof.step()",
    "injected_sleep_ms": "perf_counter() around the injected time.sleep()",
    "tokenize_batch_ms": "the whole record_function('tokenize_batch') region (batch generation + the injected sleep where injected)",
    "load_shard_ms": "the whole record_function('load_shard') region (batch generation + the injected sleep where injected)",
    "forward_ms": "sum of the 'forward' regions (per micro-batch in pipelines), including the blocking tensor all_reduces inside",
    "backward_ms": "sum of the 'backward' regions, including the blocking tensor all_reduces inside the f operators' backward",
    "grad_allreduce_ms": "the 'grad_allreduce' region: flatten, all_reduce on the data group, unflatten",
    "optimizer_ms": "opt.step() + zero_grad()",
    "{role}_comm_ms": "time inside the torch.distributed calls on the groups of that role (blocking collectives: the whole call; "
                      "async p2p: only the isend/irecv call, the wait is {role}_p2p_wait_ms)",
    "{role}_calls": "number of those calls",
    "{role}_p2p_wait_ms": "time blocked in Work.wait() of the async p2p of that role",
    "{role}_wait_ms": "from the ranks' logs side by side: time this rank spent, inside calls of that role, before the last "
                      "member (collective) / its peer (p2p) had arrived, i.e. waiting for another rank (derived.waits)",
    "{role}_transfer_ms": "from the ranks' logs side by side: time inside the collectives of that role after the last member had "
                          "entered (the transfer itself; collectives only)",
    "total_wait_ms": "sum of {role}_wait_ms over the roles",
    "data_ms": "next(DataLoader iterator): the DataLoader __next__ (num_workers=0, on the main thread)",
    "dataset_sleep_ms": "sum of the sleeps Dataset.__getitem__ really slept during this step's batch",
    "attention_mask_build_ms": "the whole record_function('attention_mask_build') region (mask + the injected sleep where injected)",
    "expert_fwd_ms": "perf_counter() around this rank's expert forward",
    "expert_bwd_ms": "this rank's expert backward: from the end of the combine's reverse all_to_all to the start of the dispatch's",
    "expert_tokens": "tokens this rank's expert computed (sum of the dispatch's output split sizes)",
    "tokens_sent_to_expert": "this rank's tokens per destination expert rank (the dispatch's input split sizes)",
    "tokens_received_from_rank": "tokens received from each rank (the dispatch's output split sizes)",
}


# --------------------------------------------------------------------------------------
# running one scenario
# --------------------------------------------------------------------------------------

def run_ranks(scn, workdir, deadline_s, seed):
    spec = {"kind": scn["kind"], "world_size": scn["world_size"], "cfg": dict(scn["cfg"], seed=seed)}
    with open(os.path.join(workdir, "spec.json"), "w") as f:
        json.dump(spec, f)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONHASHSEED="0", PYTHONUNBUFFERED="1")
    env.update(scn.get("env", {}))
    procs = []
    for r in range(scn["world_size"]):
        log = open(os.path.join(workdir, f"log_rank{r}.txt"), "w")
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", "spec.json", "--rank", str(r)],
                             cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append((p, log))
    t0 = time.time()
    killed = []
    for p, _ in procs:
        try:
            p.wait(timeout=max(deadline_s - (time.time() - t0), 0.1))
        except subprocess.TimeoutExpired:
            pass
    for r, (p, log) in enumerate(procs):
        if p.poll() is None:
            killed.append(r)
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the rank's own process group only
            except ProcessLookupError:
                pass
            p.wait()
        log.close()
    return {"returncodes": [p.returncode for p, _ in procs], "killed_ranks": killed, "wall_s": round(time.time() - t0, 1)}


# --------------------------------------------------------------------------------------
# the layout, and the ranks' call logs side by side
# --------------------------------------------------------------------------------------

def build_layout(scn, measured):
    """Every group of the job: the union of the ranks' pg_configs (a rank knows only the groups
    it is in), with the role the scenario gave it."""
    groups = {}
    for r, m in sorted(measured.items(), key=lambda kv: int(kv[0])):
        roles = m["extra"].get("group_roles", {})
        for c in m["extra"]["pg_config"]:
            g = groups.setdefault(c["pg_name"], {"name": c["pg_name"], "desc": c["pg_desc"], "ranks": sorted(c["ranks"]),
                                                 "role": None})
            assert g["ranks"] == sorted(c["ranks"]), (c, g)
            role = "world" if c["pg_desc"] == "default_pg" else roles.get(c["pg_name"])
            if role:
                assert g["role"] in (None, role), (g, role)
                g["role"] = role
    order = sorted(groups.values(), key=lambda g: int(g["name"]) if g["name"].isdigit() else 10 ** 9)
    return [{"name": g["name"], "role": g["role"], "ranks": g["ranks"], "desc": g["desc"]} for g in order]


def instances(measured, layout):
    """Collective instances {(pg, seq): {rank: rec}} and p2p transfers
    {(pg, src, dst, pair_seq): {"send": side, "recv": side}}, a side being (rank, post_ns,
    wait_start_ns, done_ns, step, call id); the ops of one batch_isend_irecv share a call id."""
    coll, p2p = defaultdict(dict), defaultdict(dict)
    for r, m in measured.items():
        r = int(r)
        for i, c in enumerate(m["extra"]["calls"]):
            side = lambda: (r, c["enter_ns"], c.get("wait_start_ns", c["enter_ns"]), c.get("done_ns", c["exit_ns"]), c["step"], (r, i))  # noqa: E731
            if c["kind"] in ("isend", "irecv", "send", "recv"):
                p2p[(c["pg"], c["src"], c["dst"], c["pair_seq"])]["send" if c["kind"] in ("isend", "send") else "recv"] = side()
            elif c["kind"] == "batch_isend_irecv":
                for op in c["ops"]:
                    p2p[(c["pg"], op["src"], op["dst"], op["pair_seq"])]["send" if op["op"] == "isend" else "recv"] = side()
            else:
                coll[(c["pg"], c["seq"])][r] = c
    return coll, p2p


def derive_waits(scn, measured, layout):
    """Per step: every rank's wait per role, and the edges 'origin -(group)-> waiter' with the
    time waited (collective: the last member to enter is the origin of the others' wait, each
    waits min(exit, last entry) - its entry; p2p: the peer posting later is the origin, the other
    side waits for the part of its Work.wait() before that)."""
    ranks_of = {g["name"]: g["ranks"] for g in layout}
    role_of = {g["name"]: g["role"] for g in layout}
    coll, p2p = instances(measured, layout)
    steps = sorted({s["step"] for m in measured.values() for s in m["steps"]})
    W = len(measured)
    per_step = {s: {"wait_ms": defaultdict(lambda: defaultdict(float)), "edges": defaultdict(float),
                    "transfer_ms": defaultdict(lambda: defaultdict(float))} for s in steps}
    incomplete = []
    for (pg, seq), recs in coll.items():
        members = ranks_of[pg]
        if sorted(recs) != sorted(members):
            incomplete.append({"pg": pg, "seq": seq, "have": sorted(recs)})
            continue
        step = recs[members[0]]["step"]
        if step not in per_step:
            continue
        last = max(recs, key=lambda r: recs[r]["enter_ns"])
        t_last = recs[last]["enter_ns"]
        ps = per_step[step]
        for r, c in recs.items():
            w = max(0, min(c["exit_ns"], t_last) - c["enter_ns"]) / 1e6
            ps["wait_ms"][r][role_of[pg]] += w
            ps["transfer_ms"][r][role_of[pg]] += max(0, c["exit_ns"] - max(c["enter_ns"], t_last)) / 1e6
            if r != last and w > 0:
                ps["edges"][(last, r, pg)] += w
    # p2p: each side of a transfer is blocked, inside its Work.wait(), until the peer has posted
    # too; the ops of one batch_isend_irecv share one wait, so the call's wait is the longest of
    # its ops' and comes from the peer that posted last (as a collective's last arriver).
    per_call = defaultdict(list)  # call id -> [(peer, wait_ms, pg, step)]
    for (pg, src, dst, n), sides in p2p.items():
        if set(sides) != {"send", "recv"}:
            incomplete.append({"pg": pg, "src": src, "dst": dst, "pair_seq": n, "have": sorted(sides)})
            continue
        s, rv = sides["send"], sides["recv"]
        for me, other in ((s, rv), (rv, s)):
            r, post, wstart, done, step, call = me
            w = max(0, min(done, other[1]) - max(wstart, post)) / 1e6  # blocked before the peer had posted
            per_call[call].append((other[0], w, pg, step))
    for (r, _), ops in per_call.items():
        peer, w, pg, step = max(ops, key=lambda o: o[1])
        if step not in per_step:
            continue
        ps = per_step[step]
        ps["wait_ms"][r][role_of[pg]] += w
        if w > 0:
            ps["edges"][(peer, r, pg)] += w
    out_steps = []
    for s in steps:
        ps = per_step[s]
        out_steps.append({
            "step": s,
            "wait_ms": {str(r): {role: round(v, 3) for role, v in sorted(ps["wait_ms"][r].items())} for r in range(W)},
            "total_wait_ms": {str(r): round(sum(ps["wait_ms"][r].values()), 3) for r in range(W)},
            "caused_ms": {str(r): round(sum(v for (o, _, _), v in ps["edges"].items() if o == r), 3) for r in range(W)},
            "edges": [{"from": o, "to": t, "group": pg, "role": role_of[pg], "group_ranks": ranks_of[pg], "wait_ms": round(v, 3)}
                      for (o, t, pg), v in sorted(ps["edges"].items(), key=lambda kv: -kv[1]) if v >= 1.0],
            "transfer_ms": {str(r): {role: round(v, 3) for role, v in sorted(ps["transfer_ms"][r].items())} for r in range(W)},
        })
    # edges over the steps: mean wait, in how many steps
    agg = defaultdict(list)
    for st in out_steps:
        for e in st["edges"]:
            agg[(e["from"], e["to"], e["group"])].append(e["wait_ms"])
    step_ms = statistics.fmean(x["step_ms"] for m in measured.values() for x in m["steps"])
    edges = []
    for (o, t, pg), ws in sorted(agg.items(), key=lambda kv: -sum(kv[1])):
        m = sum(ws) / len(steps)
        if m >= max(5.0, 0.02 * step_ms):
            edges.append({"from": o, "to": t, "group": pg, "role": role_of[pg], "group_ranks": ranks_of[pg],
                          "mean_wait_ms": round(m, 1), "steps": len(ws),
                          "text": f"{o} -({role_of[pg]} {{{','.join(map(str, ranks_of[pg]))}}})-> {t}"})
    mean_wait = {str(r): round(statistics.fmean(st["total_wait_ms"][str(r)] for st in out_steps), 1) for r in range(W)}
    mean_caused = {str(r): round(statistics.fmean(st["caused_ms"][str(r)] for st in out_steps), 1) for r in range(W)}
    mean_role_wait = {str(r): {role: round(statistics.fmean(st["wait_ms"][str(r)].get(role, 0.0) for st in out_steps), 1)
                               for role in sorted({k for st in out_steps for k in st["wait_ms"][str(r)]})} for r in range(W)}
    return {
        "how": "from the ranks' own call logs (time.time_ns() at entry/exit, one host clock): for each collective instance "
               "(group, n-th collective of that group) the member entering last is where the others' wait comes from; "
               "each member waited min(exit, last entry) - own entry, and spent exit - max(own entry, last entry) in the "
               "collective once all had arrived (transfer_ms; collectives only)."
               " For each p2p transfer (group, src, dst, n-th "
               "between them) the side that posted later made the other wait for the part of its Work.wait() before the "
               "later post; the ops of one batch_isend_irecv share one Work.wait(), so that call waited as long as its "
               "longest op's wait, charged to the peer that posted last. 'edges' lists origin -> waiter per group "
               "(>= 1 ms per step); 'chain' the edges of at least max(5 ms, 2% of the step) on average over the "
               "profiled steps.",
        "mean_step_ms": round(step_ms, 1),
        "mean_total_wait_ms": mean_wait,
        "mean_wait_ms_per_role": mean_role_wait,
        "mean_caused_ms": mean_caused,
        "chain": edges,
        "steps": out_steps,
        "unmatched": incomplete[:20],
    }


def fill_steps(measured, waits):
    """Copy the derived waits into each rank's step records as {role}_wait_ms."""
    for st in waits["steps"]:
        for r, m in measured.items():
            for s in m["steps"]:
                if s["step"] == st["step"]:
                    for role, v in st["wait_ms"][r].items():
                        s[f"{role}_wait_ms"] = v
                    for role, v in st["transfer_ms"][r].items():
                        s[f"{role}_transfer_ms"] = v
                    s["total_wait_ms"] = st["total_wait_ms"][r]


# --------------------------------------------------------------------------------------
# checking a run, and what the traces contain
# --------------------------------------------------------------------------------------

EDGE_RE = re.compile(r"^(\d+) -\((\w+) \{([\d,]+)\}\)-> (\d+)$")


def validate(scn, measured, waits):
    """Is the run a clear example? Injected: every edge of expected.chain is measured in every
    profiled step with a wait of at least 40% of the injected amount, and the injected rank
    itself waits less than 30% of it outside the pipeline's own exchanges (a pipeline stage
    always waits for its neighbour's micro-batches). Healthy: no rank makes the others wait
    persistently (the main cause, by more than 10% of the step, in more than half of the
    steps), and no rank waits for one other rank more than 20% of the step in any step.
    Returns a list of problems."""
    problems = []
    exp = scn["expected"]
    inj = scn.get("injected")
    step_ms = waits["mean_step_ms"]
    ranks_of = {}
    for g in build_layout(scn, measured):
        ranks_of[(g["role"], tuple(g["ranks"]))] = g["name"]
    if inj and inj.get("amount_ms"):
        amt = inj["amount_ms"]
        for edge in exp.get("chain", []):
            a, role, rs, b = EDGE_RE.match(edge).groups()
            pg = ranks_of[(role, tuple(int(x) for x in rs.split(",")))]
            for st in waits["steps"]:
                w = sum(e["wait_ms"] for e in st["edges"] if e["from"] == int(a) and e["to"] == int(b) and e["group"] == pg)
                if w < 0.4 * amt:
                    problems.append(f"step {st['step']}: edge {edge} only {w:.0f} ms")
        for st in waits["steps"]:
            for r in inj["ranks"]:
                own = sum(v for role, v in st["wait_ms"][str(r)].items() if role != "pipeline")
                if own > scn.get("own_wait_max", 0.3) * amt:
                    problems.append(f"step {st['step']}: injected rank {r} itself waited {own:.0f} ms")
    if inj is None:
        # healthy: no rank is the main cause of the others' waits, by more than 10% of the step,
        # in more than half of the steps (4 ranks on 2 shared cores always jitter a little)
        for r in waits["mean_caused_ms"]:
            n = sum(1 for st in waits["steps"]
                    if st["caused_ms"][r] == max(st["caused_ms"].values()) and st["caused_ms"][r] > 0.10 * step_ms)
            if n > len(waits["steps"]) / 2:
                problems.append(f"healthy run: rank {r} is the main cause of waits (> 10% of the step) in {n} of "
                                f"{len(waits['steps'])} steps ({waits['mean_caused_ms'][r]:.0f} ms per step on average)")
        for st in waits["steps"]:
            for e in st["edges"]:
                if e["wait_ms"] > 0.20 * step_ms:
                    problems.append(f"healthy run: step {st['step']}: rank {e['to']} waited {e['wait_ms']:.0f} ms for rank {e['from']} "
                                    f"({e['role']}; > 20% of the step)")
    for chk in scn.get("checks", []):
        problems += CHECKS[chk](scn, measured, waits)
    return problems


def check_moe(scn, measured, waits):
    """The hot expert's rank makes the others wait, in every step, 3x more than any other rank."""
    hot = str(scn["expected"]["hot_expert_rank"])
    out = []
    for st in waits["steps"]:
        c = st["caused_ms"]
        if c[hot] < 3 * max(v for r, v in c.items() if r != hot) or c[hot] < 0.2 * waits["mean_step_ms"]:
            out.append(f"step {st['step']}: rank {hot} caused {c[hot]:.0f} ms, the others {c}")
    return out


CHECKS = {"moe": check_moe}


COLL_OPS = ("c10d::",)


def numel(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def span_numels(args):
    """Element counts of a gloo span's Input Dims (one entry per input tensor)."""
    dims = args.get("Input Dims") or []
    return [numel(d) for d in dims if isinstance(d, list) and all(isinstance(x, int) for x in d)]


def summarize_trace(path, rank, calls, layout):
    """What the trace holds, exactly (the Rust side is tested against this)."""
    with open(path) as f:
        d = json.load(f)
    base = d["baseTimeNanoseconds"]
    di = d.get("distributedInfo", {})
    evs = [e for e in d["traceEvents"] if e.get("ph") == "X"]
    names = {e["tid"]: e["args"]["name"] for e in d["traceEvents"] if e.get("ph") == "M" and e.get("name") == "thread_name"}
    main_tid = Counter(e["tid"] for e in evs if e.get("cat") == "cpu_op").most_common(1)[0][0]
    role_of = {g["name"]: g["role"] for g in layout}
    steps = sorted([e for e in evs if e["name"].startswith("ProfilerStep#")], key=lambda e: e["ts"])

    # gloo spans -> the call of this rank's own log they ran for. Collectives: every call here
    # blocks until done, so the k-th gloo collective span (by start) is the k-th collective call
    # (element counts checked). Point-to-point (gloo:send / gloo:recv, on the main thread): the
    # call whose [post, Work.wait() returned] window holds the span's start, with its count.
    def ns(e):
        t0 = int(round(e["ts"] * 1000)) + base
        return t0, t0 + int(round(e["dur"] * 1000))
    gloo = sorted([e for e in evs if e["name"].startswith("gloo:")], key=lambda e: e["ts"])
    g_coll = [e for e in gloo if e["name"] not in ("gloo:send", "gloo:recv")]
    g_p2p = [e for e in gloo if e["name"] in ("gloo:send", "gloo:recv")]
    c_coll = [c for c in calls if c["kind"] not in ("isend", "irecv", "batch_isend_irecv", "send", "recv")]
    c_p2p = [c for c in calls if c["kind"] in ("isend", "irecv", "batch_isend_irecv", "send", "recv")]
    span_call = []
    unmatched = 0
    offsets = []
    by_order = len(g_coll) == len(c_coll) and all(
        not span_numels(e.get("args", {})) or numel(c["shape"]) in span_numels(e.get("args", {})) for e, c in zip(g_coll, c_coll))
    if by_order:
        for e, c in zip(g_coll, c_coll):
            t0, t1 = ns(e)
            offsets.append(((t0 - c["enter_ns"]) / 1e6, (t1 - c["exit_ns"]) / 1e6))
            span_call.append((e, c))
    else:
        unmatched += len(g_coll)
        span_call += [(e, None) for e in g_coll]
    used = Counter()
    for e in g_p2p:
        t0, t1 = ns(e)
        n = span_numels(e.get("args", {}))
        best = None
        for c in c_p2p:
            lo, hi = c["enter_ns"], max(c["exit_ns"], c.get("done_ns", c["exit_ns"]))
            sizes = {numel(op["shape"]) for op in c["ops"]} if c["kind"] == "batch_isend_irecv" else {numel(c["shape"])}
            cap = len(c["ops"]) if c["kind"] == "batch_isend_irecv" else 1
            if lo - 200_000 <= t0 <= hi and t1 <= hi + 20_000_000 and (not n or set(n) & sizes) and used[id(c)] < cap:
                best = c
                used[id(c)] += 1
                break
        if best is None:
            unmatched += 1
        span_call.append((e, best))
    span_call.sort(key=lambda ec: ec[0]["ts"])

    threads = defaultdict(lambda: {"events": 0, "gloo_spans": Counter(), "groups": Counter()})
    for e in evs:
        threads[e["tid"]]["events"] += 1
    for e, c in span_call:
        t = threads[e["tid"]]
        t["gloo_spans"][e["name"]] += 1
        if c is not None:
            t["groups"][c["pg"]] += 1
    thread_list = []
    for tid, t in sorted(threads.items(), key=lambda kv: -kv[1]["events"]):
        thread_list.append({
            "tid": tid, "name": names.get(tid, "?"), "main": tid == main_tid, "events": t["events"],
            "gloo_spans": dict(sorted(t["gloo_spans"].items())),
            "groups": {pg: {"role": role_of.get(pg), "spans": n} for pg, n in sorted(t["groups"].items())},
        })
    workers = defaultdict(list)  # pg -> tids of the gloo threads that ran its collectives
    for t in thread_list:
        if not t["main"]:
            for pg in t["groups"]:
                workers[pg].append(t["tid"])

    # main-thread c10d ops and what encloses them (where the blocking wait shows)
    main = sorted([e for e in evs if e["tid"] == main_tid], key=lambda e: (e["ts"], -e["dur"]))
    # (gloo:send / gloo:recv spans also sit on the main thread but last until the async p2p
    # completes, overlapping what follows: they enclose nothing)
    stack, parent_of = [], {}
    for e in main:
        if e["name"].startswith("gloo:"):
            continue
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
            stack.pop()
        if e["name"].startswith(COLL_OPS):
            par = [s for s in stack if not s["name"].startswith("ProfilerStep#")]
            parent_of[id(e)] = par[-1]["name"] if par else "(no region: directly in the ProfilerStep)"
        stack.append(e)

    # main-thread p2p ops in issue order, paired with this rank's own log of its p2p ops (same
    # order; dims checked): the op's Concrete Inputs give the peer as a rank *of the group*
    # (and the tag), the log gives the group and the global peer.
    p2p_ops = [e for e in main if e["name"] in ("c10d::send", "c10d::recv_")]
    logged = []
    for c in calls:
        if c["kind"] in ("isend", "irecv", "send", "recv"):
            logged.append((c["kind"], c["pg"], c["src"] if c["kind"] in ("irecv", "recv") else c["dst"], c["shape"]))
        elif c["kind"] == "batch_isend_irecv":
            for op in c["ops"]:
                logged.append((op["op"], c["pg"], op["src"] if op["op"] == "irecv" else op["dst"], op["shape"]))
    p2p_pairing_ok = len(p2p_ops) == len(logged) and all(
        json.dumps(e["args"]["Input Dims"][0][0]) == json.dumps(l[3]) and (e["name"] == "c10d::send") == (l[0] in ("isend", "send"))
        for e, l in zip(p2p_ops, logged))
    p2p_log_of = {id(e): l for e, l in zip(p2p_ops, logged)} if p2p_pairing_ok else {}
    enclosing = defaultdict(lambda: {"count": 0, "parent_ms": 0.0, "op_ms": 0.0})
    for e in main:
        if id(e) in parent_of:
            k = f"{e['name']} in {parent_of[id(e)]}"
            enclosing[k]["count"] += 1
            enclosing[k]["op_ms"] += e["dur"] / 1e3
    # durations of the enclosing ops / regions themselves
    par_durs = defaultdict(list)
    for e in main:
        par_durs[e["name"]].append(e["dur"] / 1e3)

    per_step = []
    for s in steps:
        lo, hi = s["ts"], s["ts"] + s["dur"]
        inside = lambda e: lo <= e["ts"] < hi  # noqa: E731
        c10d = Counter((e["name"], json.dumps(e.get("args", {}).get("Input Dims"))) for e in main
                       if e["name"].startswith(COLL_OPS) and inside(e))
        by_group = Counter()
        for e, c in span_call:
            if inside(e):
                key = (c["pg"] if c else "?", role_of.get(c["pg"]) if c else None, e["name"],
                       json.dumps(e.get("args", {}).get("Input Dims")), e["tid"])
                by_group[key] += 1
        p2p = Counter(e["name"] for e in evs if inside(e) and e["name"] in ("c10d::send", "c10d::recv_", "gloo:send", "gloo:recv",
                                                                               "c10d::batch_isend_irecv"))
        regions = defaultdict(float)
        for e in main:
            if inside(e) and e.get("cat") == "user_annotation" and not e["name"].startswith(("ProfilerStep#", "gloo:")):
                regions[e["name"]] += e["dur"] / 1e3
        p2p_detail = Counter()
        for e in main:
            if inside(e) and e["name"] in ("c10d::send", "c10d::recv_"):
                ci = e["args"].get("Concrete Inputs", [])
                lg = p2p_log_of.get(id(e))
                p2p_detail[(e["name"], ci[2] if len(ci) > 2 else None, ci[3] if len(ci) > 3 else None,
                            json.dumps(e["args"]["Input Dims"][0][0]), lg[1] if lg else None, lg[2] if lg else None)] += 1
        a2a = [{"output_split_sizes": json.loads(e["args"]["Concrete Inputs"][3] or "[]"),
                "input_split_sizes": json.loads(e["args"]["Concrete Inputs"][4] or "[]"),
                "input_dims": e["args"]["Input Dims"][:2]}
               for e in main if inside(e) and e["name"] == "c10d::alltoall_base_"]
        fn_ops = Counter(e["name"] for e in main if inside(e) and ("ParallelRegion" in e["name"] or "AllToAll" in e["name"]
                                                                   or "RingAttention" in e["name"]))
        per_step.append({
            "name": s["name"], "dur_ms": round(s["dur"] / 1e3, 3),
            "regions_ms": {k: round(v, 3) for k, v in sorted(regions.items())},
            "c10d_ops": [{"op": k[0], "input_dims": json.loads(k[1]), "count": n} for k, n in sorted(c10d.items())],
            "gloo_spans_by_group": [{"pg": k[0], "role": k[1], "span": k[2], "input_dims": json.loads(k[3]), "tid": k[4], "count": n}
                                    for k, n in sorted(by_group.items(), key=lambda kv: (str(kv[0][0]), kv[0][2], kv[0][3], kv[0][4]))],
            "p2p_counts": dict(sorted(p2p.items())),
            "p2p_ops": [{"op": k[0], "peer_rank_in_group": k[1], "tag": k[2], "dims": json.loads(k[3]), "pg": k[4],
                         "role": role_of.get(k[4]), "peer_global": k[5], "count": n}
                        for k, n in sorted(p2p_detail.items(), key=lambda kv: [str(x) for x in kv[0]])],
            "all_to_all_splits": a2a,
            "autograd_function_ops": dict(sorted(fn_ops.items())),
        })
    pg_keys = sorted({k for e in evs for k in e.get("args", {}) if any(w in k.lower() for w in ("process group", "group size", "pg ", "seq"))}
                     - {"Sequence number"})
    return {
        "how": "computed from this trace; each gloo:* span is attributed to a call of this rank's own log (its group, role, "
               "kind, shape): the collectives all block, so the k-th gloo collective span by start time is the k-th "
               "collective call (element counts checked; gloo_span_vs_call_ms: where the spans sit in the calls' "
               "[entry, exit] on the shared clock, ts * 1000 + baseTimeNanoseconds ~ time.time_ns()); a gloo:send / "
               "gloo:recv span goes to the p2p call whose [post, Work.wait() returned] window holds its start and whose "
               "element count it carries. That is how thread ids are tied to groups (threads[].groups, "
               "gloo_worker_tids_per_group), not from the trace alone, which names no group on any event",
        "host_name": d.get("host_name"),
        "distributedInfo": di,
        "events": len(d["traceEvents"]),
        "main_tid": main_tid,
        "threads": thread_list,
        "gloo_worker_tids_per_group": {pg: {"role": role_of.get(pg), "tids": sorted(t)} for pg, t in sorted(workers.items())},
        "gloo_spans": len(gloo),
        "gloo_spans_unmatched": unmatched,
        "gloo_collective_spans_paired_by_order": by_order,
        "gloo_span_vs_call_ms": ({"start_after_entry_min": round(min(o[0] for o in offsets), 3),
                                  "start_after_entry_max": round(max(o[0] for o in offsets), 3),
                                  "end_after_exit_max": round(max(o[1] for o in offsets), 3)} if offsets else None),
        "collective_ops_enclosed_by": {k: {"count": v["count"], "op_ms": round(v["op_ms"], 3)} for k, v in sorted(enclosing.items())},
        "enclosing_op_mean_ms": {k: round(statistics.fmean(par_durs[k]), 3) for k in sorted({k.split(" in ", 1)[1] for k in enclosing})
                                 if k in par_durs},
        "process_group_args_on_events": pg_keys,
        "p2p_ops_paired_with_own_log": p2p_pairing_ok if p2p_ops else None,
        "profiler_steps": per_step,
    }


def auto_notes(summaries, layout):
    s = summaries["0"]
    out = []
    for pg, w in s["gloo_worker_tids_per_group"].items():
        out.append(f"rank 0: group {pg} ({w['role']}) ran its gloo spans on tids {w['tids']}")
    if not s["process_group_args_on_events"]:
        out.append("no event carries a process-group argument (no 'Process Group Name' / 'Group size' / 'Seq'): on gloo/CPU the "
                   "group is known only from distributedInfo.pg_config, the gloo worker thread and the tensor shapes")
    return out


def generate(scn, out_root, keep_work=False):
    name = scn["name"]
    scn = copy.deepcopy(scn)
    t0 = time.time()
    attempts = []
    seed = scn["seed"]
    tries = scn.get("attempts", 5 if scn["injected"] is None else 3)  # healthy runs are the most at the mercy of the host
    for attempt in range(tries):
        workdir = tempfile.mkdtemp(prefix=f"zoo_{name}_")
        run = run_ranks(scn, workdir, scn.get("deadline_s", 300), seed)
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
            raise RuntimeError(f"{name}: ranks {failed} failed ({run}); work dir {workdir}\n" +
                               "\n".join(f"--- rank {r}\n{t}" for r, t in logs.items()))
        layout = build_layout(scn, measured)
        waits = derive_waits(scn, measured, layout)
        problems = validate(scn, measured, waits)
        attempts.append({"attempt": attempt + 1, "seed": seed, "wall_s": run["wall_s"], "problems": problems})
        if not problems:
            break
        print(f"   {name}: attempt {attempt + 1} (seed {seed}) not a clear example: {problems[:6]}", flush=True)
        if attempt < tries - 1:
            shutil.rmtree(workdir, ignore_errors=True)
            seed += 1
    run["attempts"] = attempts
    fill_steps(measured, waits)

    dest = os.path.join(out_root, name)
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    summaries, sizes = {}, {}
    for r in range(W):
        raw = os.path.join(workdir, f"rank{r}.pt.trace.json")
        summaries[str(r)] = summarize_trace(raw, r, measured[str(r)]["extra"]["calls"], layout)
        gz = os.path.join(dest, f"rank{r}.pt.trace.json.gz")
        gzip_to(raw, gz)
        sizes[f"rank{r}.pt.trace.json.gz"] = os.path.getsize(gz)
    notes = list(scn.get("notes", []))
    if scn["cfg"].get("pin_cores"):
        notes.append("every rank pinned to one core, core (rank mod 2) of this 2-core host (os.sched_setaffinity before "
                     "init_process_group, so its gloo threads too): consecutive ranks (the tensor / shard partners) run side "
                     "by side; unpinned, the OS tended to run one group after the other, and a healthy tp2_dp2 run looked "
                     "as if ranks 2 and 3 lagged in every step")
    if len(attempts) > 1:
        notes.append(f"generated in {len(attempts)} attempts: " + "; ".join(
            f"seed {a['seed']}: {'ok' if not a['problems'] else a['problems'][:3]}" for a in attempts))
    notes += auto_notes(summaries, layout)
    scn.setdefault("derived", {})["transfer_share"] = transfer_share(measured)
    if scn.get("finalize"):
        FINALIZE[scn["finalize"]](scn, measured, waits, notes)
    warnings = [f"not a clear example: {p}" for p in attempts[-1]["problems"]]
    for r, s in summaries.items():
        if s["gloo_spans_unmatched"]:
            warnings.append(f"rank {r}: {s['gloo_spans_unmatched']} gloo spans not matched to a logged call")
        for t in s["threads"]:
            if not t["main"] and len(t["groups"]) > 1:
                warnings.append(f"rank {r}: gloo thread {t['tid']} ran collectives of groups {sorted(t['groups'])}")
        for pg, w in s["gloo_worker_tids_per_group"].items():
            if len(w["tids"]) > 2:
                warnings.append(f"rank {r}: group {pg}'s collectives ran on {len(w['tids'])} threads {w['tids']}")
        if len(s["profiler_steps"]) != scn["cfg"]["active"]:
            warnings.append(f"rank {r}: {len(s['profiler_steps'])} ProfilerSteps")
        for ps, ms_ in zip(s["profiler_steps"], measured[r]["steps"]):
            if abs(ps["dur_ms"] - ms_["step_ms"]) > 0.15 * ms_["step_ms"]:
                warnings.append(f"rank {r} {ps['name']}: trace {ps['dur_ms']} ms vs measured {ms_['step_ms']} ms")
    keys = sorted({k for m in measured.values() for s in m["steps"] for k, v in s.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and not k.endswith(("unix_ns", "_calls")) and k not in ("step", "loss")})
    how = {}
    for k in keys + ["step_ms", "start_unix_ns", "end_unix_ns"]:
        if k in MEASURED_HOW:
            how[k] = MEASURED_HOW[k]
    how.update({k: v for k, v in MEASURED_HOW.items() if k.startswith("{")})
    how.update(scn.get("measured_how", {}))
    steps_profiled = sorted({int(ps["name"].split("#")[1]) for s in summaries.values() for ps in s["profiler_steps"]})
    import torch  # the version string only
    doc = {
        "name": name,
        "description": scn["description"],
        "seed": seed,
        "world_size": W,
        "backend": "gloo",
        "device": "cpu",
        "torch_version": torch.__version__,
        "steps_profiled": steps_profiled,
        "profiler": {"schedule": {k: scn["cfg"][k] for k in ("wait", "warmup", "active")}, "activities": ["CPU"], "record_shapes": True},
        "layout": [{k: g[k] for k in ("name", "role", "ranks", "desc")} for g in layout],
        "config": dict(scn["cfg"], seed=seed),
        "injected": scn["injected"],
        "expected": scn["expected"],
        "measured": {
            "how": how,
            "per_rank_mean": {r: {k: mean([s.get(k) for s in m["steps"]]) for k in keys if any(k in s for s in m["steps"])}
                              for r, m in measured.items()},
            "derived": dict({"waits": waits}, **scn.get("derived", {})),
            "per_rank": {r: {"steps": m["steps"], "extra": m.get("extra", {})} for r, m in measured.items()},
        },
        "trace_summary": summaries,
        "notes": notes,
        "check_warnings": warnings,
        "run": dict(run, generation_s=round(time.time() - t0, 1)),
        "files": sizes,
    }
    with open(os.path.join(dest, "scenario.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    if not keep_work:
        shutil.rmtree(workdir, ignore_errors=True)
    return doc


def finalize_moe(scn, measured, waits, notes):
    """Token counts per expert rank per step from the ranks' own split sizes."""
    ranks = sorted(measured, key=int)
    per_step = []
    for i, s0 in enumerate(measured[ranks[0]]["steps"]):
        got = {r: measured[r]["steps"][i]["expert_tokens"] for r in ranks}
        tot = sum(got.values())
        per_step.append({"step": s0["step"], "tokens_per_expert_rank": got, "total": tot,
                         "share": {r: round(v / tot, 4) for r, v in got.items()}})
    hot = str(scn["expected"]["hot_expert_rank"])
    share = statistics.fmean(p["share"][hot] for p in per_step)
    efwd = {r: mean([s["expert_fwd_ms"] for s in measured[r]["steps"]]) for r in ranks}
    ebwd = {r: mean([s["expert_bwd_ms"] for s in measured[r]["steps"]]) for r in ranks}
    scn["derived"]["moe"] = ({
        "how": "expert_tokens = sum of the output split sizes of the dispatch all_to_all (tokens this rank's expert computed); "
               "expert_fwd_ms = perf_counter() around the expert's forward; expert_bwd_ms = from the end of the combine's reverse "
               "exchange to the start of the dispatch's reverse exchange in backward (the expert's backward)",
        "steps": per_step, "mean_token_share": {r: round(statistics.fmean(p["share"][r] for p in per_step), 4) for r in ranks},
        "mean_expert_fwd_ms": efwd, "mean_expert_bwd_ms": ebwd})
    scn["expected"]["token_share"] = round(share, 4)
    others = [r for r in ranks if r != hot]
    other_shares = ", ".join(f"{statistics.fmean(p['share'][r] for p in per_step):.1%}" for r in others)
    notes.append(f"rank {hot}'s expert got {share:.1%} of all tokens (the others {other_shares}); "
                 f"expert forward+backward {efwd[hot] + ebwd[hot]:.0f} ms on rank {hot} vs "
                 f"{statistics.fmean(efwd[r] + ebwd[r] for r in others):.0f} ms on the others; the others wait "
                 f"{statistics.fmean(waits['mean_total_wait_ms'][r] for r in others):.0f} ms per step, rank {hot} "
                 f"{waits['mean_total_wait_ms'][hot]:.0f} ms")


def finalize_commbound(scn, measured, waits, notes):
    """Exposed tensor-parallel communication: the time in the tensor all_reduces that is not
    waiting for a late rank (the transfer itself), as a share of the step."""
    ranks = sorted(measured, key=int)
    tr = {r: statistics.fmean(s["tensor_transfer_ms"] for s in measured[r]["steps"]) for r in ranks}
    st = statistics.fmean(s["step_ms"] for r in ranks for s in measured[r]["steps"])
    share = statistics.fmean(tr.values()) / st
    scn["derived"]["tensor_comm"] = ({
        "how": "per rank: tensor_transfer_ms (time in the blocking tensor all_reduces once every member had arrived: the "
               "transfer), mean over the profiled steps; share = that / step_ms",
        "transfer_ms_per_rank": {r: round(v, 1) for r, v in tr.items()}, "share_of_step": round(share, 4),
        "wait_ms_per_rank": waits["mean_total_wait_ms"]})
    notes.append(f"tensor all_reduce transfer (not waiting) {statistics.fmean(tr.values()):.0f} ms per step = {share:.0%} of the "
                 f"{st:.0f} ms step; waits for late ranks {statistics.fmean(waits['mean_total_wait_ms'].values()):.0f} ms per rank")
    if share >= 0.10:
        scn["expected"]["why"] = (f"measured: the tensor all_reduces' transfer is {share:.0%} of the step on every rank (>= 10%), "
                                  "and no rank is late beyond the noise; the advice is in tensor-parallel terms (keep the "
                                  "tensor group inside one fast domain, sequence parallelism / overlap options), not DDP buckets")
    else:
        scn["expected"].update(first_finding=None, ranks=[],
                               why=f"measured tensor transfer only {share:.0%} of the step: not worth a finding")


def transfer_share(measured):
    """Per role: mean over ranks and steps of {role}_transfer_ms, and as a share of the step."""
    roles = sorted({k[:-len("_transfer_ms")] for m in measured.values() for s in m["steps"] for k in s if k.endswith("_transfer_ms")})
    step = statistics.fmean(s["step_ms"] for m in measured.values() for s in m["steps"])
    out = {}
    for role in roles:
        v = statistics.fmean(s.get(f"{role}_transfer_ms", 0.0) for m in measured.values() for s in m["steps"])
        out[role] = {"transfer_ms": round(v, 1), "share_of_step": round(v / step, 4)}
    return out


def finalize_healthy(scn, measured, waits, notes):
    """Nothing injected, nobody to blame; but on gloo/CPU the blocking collectives' transfer can
    be a large part of the step: say which exposed_comm finding would be true, not a false one."""
    ts = scn["derived"]["transfer_share"]
    big = {r: v for r, v in ts.items() if v["share_of_step"] >= 0.10}
    notes.append("transfer (time in the collectives after every member arrived) per step: " +
                 ", ".join(f"{r} {v['transfer_ms']:.0f} ms = {v['share_of_step']:.0%}" for r, v in ts.items()))
    may = ["arrival_jitter (ranks share 2 cores with each other and with other work on the host)"]
    if big:
        may.insert(0, "exposed_comm for the " + " and ".join(big) + " group(s): measured transfer " +
                   ", ".join(f"{v['share_of_step']:.0%}" for v in big.values()) + " of the step, blocking collectives "
                   "with nothing to overlap them on gloo/CPU (true, not a false positive)")
    scn["expected"]["may_report"] = may
    scn["expected"]["why"] = ("nothing injected: no rank is the origin of the others' waits (validated per step); "
                              "findings that blame a rank are false positives, efficiency findings about the collectives "
                              "may be true (may_report)")


FINALIZE = {"moe": finalize_moe, "commbound": finalize_commbound, "healthy": finalize_healthy}


def print_doc(doc):
    w = doc["measured"]["derived"]["waits"]
    print(f"== {doc['name']}  ({doc['run']['generation_s']} s, {sum(doc['files'].values()) / 1024:.0f} KiB, "
          f"largest {max(doc['files'].values()) / 1024:.0f} KiB, seed {doc['seed']})")
    for r, v in doc["measured"]["per_rank_mean"].items():
        print(f"   rank {r}: " + ", ".join(f"{k}={x}" for k, x in v.items()))
    print(f"   wait per rank {w['mean_total_wait_ms']}; caused {w['mean_caused_ms']}")
    for e in w["chain"]:
        print(f"   chain: {e['text']}: {e['mean_wait_ms']} ms ({e['steps']} steps)")
    for n in doc["notes"]:
        print("   note:", n)
    for x in doc["check_warnings"]:
        print("   WARNING:", x)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # The runs go to tests/zoo/layout/<name>/, one level below the other scenarios: the zoo-wide
    # Rust tests (tests/zoo.rs: one_host_runs_share_one_clock, without_shapes_the_first_finding_holds)
    # take every tests/zoo/<name>/scenario.json, and these multi-group runs are what issue 33
    # teaches the engine to read; they join the top level when it does.
    ap.add_argument("--out", default=os.path.join(HERE, "layout"))
    ap.add_argument("--only", help="comma-separated scenario names")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep-work", action="store_true")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        import layout_workers
        layout_workers.worker_main(a.worker, a.rank)
        return
    if a.list:
        for s in SCENARIOS:
            print(f"{s['name']:26s} {s['kind']:9s} world {s['world_size']}")
        return
    todo = SCENARIOS
    if a.only:
        wanted = a.only.split(",")
        unknown = set(wanted) - {s["name"] for s in SCENARIOS}
        if unknown:
            sys.exit(f"unknown scenarios: {sorted(unknown)}")
        todo = [s for s in SCENARIOS if s["name"] in wanted]
    generate_all(todo, lambda scn: print_doc(generate(scn, os.path.abspath(a.out), a.keep_work)))


if __name__ == "__main__":
    main()
