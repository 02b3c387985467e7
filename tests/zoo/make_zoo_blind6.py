#!/usr/bin/env python3
"""Sixth blind check: gloo jobs on CPU written as users write them, four ranks each, every rank
its own process (this script re-run with --worker), six profiled steps
(schedule(wait=1, warmup=1, active=6), record_shapes=True, CPU activity only):

- `tp2dp2_debug_rank3` (seed 9700): hand-written tensor x data parallel. TP groups {0,1},{2,3}
  and DP groups {0,2},{1,3}, all made with dist.new_group. 4 Megatron-style blocks (hidden 1024,
  FFN 2048 split over the 2 TP ranks): LayerNorm, column-parallel Linear(1024, 1024) (this
  rank's half of the 2048 FFN columns), GELU, row-parallel Linear(1024, 1024, bias=False) (this
  rank's half of the FFN rows), the bias added after the reduction, residual. Two autograd
  Functions, as Megatron has them: CopyToTP (identity forward, all_reduce of the input gradient
  in the TP group in backward) before the column-parallel Linear and ReduceFromTP (all_reduce of
  the row-parallel output in the TP group in forward, identity backward) after the row-parallel
  Linear. A replicated head Linear(1024, 10), cross entropy, 128 samples a step; the two ranks
  of a TP group read the same samples (data seed = seed + DP rank), full weights made from
  `seed` and sliced per TP rank. After backward all gradients of the rank are copied into ONE
  flat buffer, all_reduced (SUM) in the DP group, divided by 2 and copied back; AdamW(lr 1e-4).
  Injection: rank 3 alone runs a "debug numerics check" every step inside
  record_function("debug_check") before forward: for every weight matrix p.norm(),
  torch.isfinite of it, and a spectral-norm estimate by power iteration (W @ V, W.T @ ..., V
  of 8 columns, re-normalised with torch.linalg.vector_norm). The number of power-iteration
  rounds is sized on the two unprofiled steps for ~90 ms and then fixed (debug_check_rounds);
  what it really took per step is in measured debug_check_ms. Afterwards every
  event 'ts' of ranks 2 and 3 is shifted by +136 ms and host_name rewritten (ranks 0,1 node-a,
  ranks 2,3 node-b): two hosts whose clocks disagree.
  Expected first: compute_imbalance on rank 3.
- `moe_hot_expert_r1` (seed 9800): expert parallel, one expert per rank (expert e on rank e,
  an MLP 256 -> 2048 -> GELU -> 256), 1024 tokens of width 256 per rank a step. Dense
  Linear(256,256)+GELU before, top-1 gate Linear(256, 4) whose bias is skewed: a bias vector,
  the same on every rank, fitted once at start-up on a probe batch so that expert 1 gets about
  half of all tokens and the other three about 1/6 each; no load-balancing loss. Tokens are
  sorted by expert, the per-expert counts exchanged with dist.all_to_all_single of a 4-element
  int64 tensor, then the tokens dispatched and the results combined with
  dist.all_to_all_single with uneven input/output split sizes (an autograd Function whose
  backward does the reverse all_to_all_single); output scaled by the gate probability,
  residual, dense Linear(256,256)+GELU after, head Linear(256, 10), cross entropy. After
  backward the non-expert gradients (dense layers, gate, head) are all_reduced in one flat
  buffer (DDP-style, mean over 4 ranks); the expert's gradients stay local. AdamW(lr 1e-4).
  gloo on this torch supports all_to_all_single with split sizes on CPU: no isend/irecv
  fallback. Expected first: expert_imbalance on rank 1.
- `fsdp2_healthy_noisy` (seed 9900): FSDP2 on a 1-D mesh of 4, fully_shard on each of 4 blocks
  (LayerNorm, Linear(512, 2048), GELU, Linear(2048, 512), residual) and then on the root (input
  projection 256->512, head 512->10), batch 64 per rank, AdamW(foreach=True); nothing injected
  into the ranks. Meanwhile a separate background process started by this script (not a rank)
  burns CPU in pure Python in bursts of ~150 ms, one every ~700 ms (random gap 450-650 ms
  between bursts, so not synchronised with the steps), for the whole run, and is stopped
  afterwards. Its bursts' wall-clock times (unix seconds) are in scenario.json.
  Expected: no finding above low.
- `gc_pause_rank2` (seed 10000): DDP on a ~15 MB MLP (512->1024, 3 blocks of
  Linear(1024,1024)+LayerNorm+GELU, head 1024->10), batch 128, AdamW. Every rank calls
  gc.collect(); gc.freeze() once after setup (the start-up objects of torch stay out of later
  collections; automatic GC stays on). Rank 2 keeps a growing cache of per-sample Python
  records (dicts linked to each other both ways, so reference cycles): 300k at start-up, +10k
  every step; every other step (the odd steps, i.e. profiled steps 1, 3 and 5 counted from 0)
  it calls gc.collect() right after backward, before the optimizer step, with no
  record_function around it. Pause measured per step (gc_ms).
  Expected first: host_stall on rank 2.
- `padding_bug_r1` (seed 10100): DDP on a small transformer encoder (nn.Embedding(8000, 256),
  2 nn.TransformerEncoderLayer(d_model 256, 4 heads, FFN 1024, batch_first, dropout 0.1),
  masked mean pool, Linear(256, 10)), batches of 8 sequences of 40..200 tokens from a Dataset
  through a DataLoader (num_workers=0, shuffled with a seeded generator), AdamW(fused=True).
  The collate function pads to the batch's longest sequence (~150-200) and passes
  src_key_padding_mask; on rank 1 the collate is built with pad_to=512 (the bug), so every
  batch of rank 1 is padded to 512. Expected first: compute_imbalance on rank 1.
- `hsdp_rank0_logging_barrier` (seed 10200): HSDP on a 2-D DeviceMesh
  init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard")), fully_shard(mesh=mesh)
  on each of 4 blocks (as in fsdp2_healthy_noisy) and on the root, batch 64,
  AdamW(foreach=True). Every step, after the optimizer step, rank 0 builds a large dict of
  stats (loss via .item(), lr, and 32k per-sample records from pure-Python arithmetic) and
  appends it as one JSON line to a file, inside record_function("log_metrics") (~50-80 ms of
  pure Python); then all ranks call dist.barrier() ("rank 0 logs, everyone waits").
  Expected first: host_stall on rank 0.

    python make_zoo_blind6.py --out DIR [--only NAME,...]

Each run gets DIR/NAME/rank{r}.pt.trace.json.gz and scenario.json (what was injected, what is
expected, and per rank per profiled step what the script itself measured). Ranks are started
as subprocesses with OMP_NUM_THREADS=1, THP_MEM_ALLOC_ENABLE=1 (see RANK_ENV),
MASTER_ADDR=127.0.0.1 and a free port; each calls torch.set_num_threads(1). Scenarios run one
after the other; a scenario whose ranks have not finished after 300 s is killed and reported
as failed."""
import argparse, gzip, json, math, os, random, shutil, socket, subprocess, sys, time

ACTIVE = 6                      # profiled steps (after wait=1, warmup=1)
STEPS = 2 + ACTIVE
DEADLINE_S = 300
CLOCK_SHIFT_MS = {2: 136, 3: 136}   # tp2dp2_debug_rank3: ranks whose "host clock" runs ahead
HOSTS = {0: "node-a", 1: "node-a", 2: "node-b", 3: "node-b"}
# THP_MEM_ALLOC_ENABLE=1: c10's CPU allocator puts allocations of 2 MB and more on transparent huge
# pages. Without it, on this VM and torch version, the profiler with record_shapes=True made every
# rank's heap grow by ~140 MB a step (36k first-touch page faults a step, none without the profiler)
# and the FSDP2 runs slowed down step after step (0.6 s -> 2.4 s, memory copies 5x slower) on all
# ranks alike, an artefact of the sandbox rather than of the jobs.
RANK_ENV = {"OMP_NUM_THREADS": "1", "THP_MEM_ALLOC_ENABLE": "1"}
MUST_NOT_HEALTHY = ["slow_device", "compute_imbalance", "straggler", "host_stall", "host_sync"]

SCENARIOS = {
    "tp2dp2_debug_rank3": dict(
        seed=9700, world=4,
        description="4 ranks, hand-written tensor x data parallel: TP groups {0,1},{2,3} and DP groups {0,2},{1,3} made with dist.new_group. 4 Megatron-style blocks (hidden 1024, FFN 2048 split over 2 TP ranks: LayerNorm, column-parallel Linear(1024,1024), GELU, row-parallel Linear(1024,1024,bias=False), bias after the reduction, residual); autograd Functions CopyToTP (identity fwd / all_reduce of the input grad in the TP group in bwd) and ReduceFromTP (all_reduce of the row-parallel output in the TP group in fwd / identity bwd). Replicated head Linear(1024,10), 128 samples a step, the 2 ranks of a TP group read the same samples (data seed = seed + DP rank). After backward all of a rank's gradients go into one flat buffer, all_reduced (SUM, then /2) in the DP group, copied back; AdamW(lr 1e-4). Rank 3 alone runs a 'debug numerics check' every step in record_function('debug_check') before forward: norms, isfinite of them, and power-iteration spectral-norm estimates (matmuls with an 8-column block) over its weight matrices, power-iteration rounds (at least 1) sized on the unprofiled steps for ~90 ms (measured: debug_check_ms). Traces of ranks 2 and 3 shifted by +136 ms afterwards and host_name rewritten (ranks 0,1 node-a, ranks 2,3 node-b)",
        injected={"cause": "compute_imbalance", "ranks": [3], "where": "debug_check (before forward)", "amount_ms": 90, "kind": "real tensor operators (matmul, norm, isfinite) over the rank's weights"},
        expected={"first_finding": "compute_imbalance", "ranks": [3], "must_not": ["slow_device", "host_stall", "input_bound"]},
        clock_shift_ms={str(r): v for r, v in CLOCK_SHIFT_MS.items()},
        clock_shift_how="after export: +136000 us added to 'ts' of every event that has one (metadata, X, flow and instant events) of ranks 2 and 3; baseTimeNanoseconds left as it was, so ts*1000 + baseTimeNanoseconds moves by exactly 136 ms as well; host_name rewritten: ranks 0,1 node-a, ranks 2,3 node-b"),
    "moe_hot_expert_r1": dict(
        seed=9800, world=4,
        description="4-rank expert parallel, one expert per rank (expert e on rank e: MLP 256->2048->GELU->256), 1024 tokens of width 256 per rank a step; dense Linear(256,256)+GELU before, top-1 gate Linear(256,4) with a skewed bias vector (same on every rank, fitted once on a probe batch) so that expert 1 receives about half of all tokens and the others ~1/6 each, no load-balancing loss; counts exchanged with all_to_all_single (4 int64), tokens dispatched and combined with all_to_all_single with uneven split sizes (autograd Function, reverse exchange in backward); gate-probability scaling, residual, dense Linear(256,256)+GELU after, head Linear(256,10), cross entropy; non-expert gradients all_reduced in one flat buffer (mean), expert gradients local; AdamW(lr 1e-4). gloo all_to_all_single with split sizes works on CPU in this torch version",
        injected={"cause": "expert_imbalance", "ranks": [1], "where": "expert 1's MLP (forward and backward) gets ~50% of all tokens; the other experts ~1/6 each", "kind": "skewed router bias, no load-balancing loss"},
        expected={"first_finding": "expert_imbalance", "ranks": [1], "must_not": ["slow_device", "host_stall"]}),
    "fsdp2_healthy_noisy": dict(
        seed=9900, world=4,
        description="4-rank FSDP2: fully_shard on each of 4 blocks (LayerNorm, Linear(512,2048), GELU, Linear(2048,512), residual) then on the root (input projection 256->512, head 512->10), batch 64, AdamW(foreach=True); nothing injected into the ranks. A separate background process started by the script (not a rank) burns CPU in pure Python in bursts of ~150 ms, one every ~700 ms (random 450-650 ms gap, not synchronised with the steps), during the whole run; the bursts' unix wall-clock times are in measured.background_bursts",
        injected=None,
        expected={"first_finding": None, "ranks": [], "must_not": MUST_NOT_HEALTHY,
                  "may_report": ["noise_burst or step_jitter, low at most (a real CPU hog outside the job, ~150 ms every ~700 ms, hitting whichever ranks share the core at that moment)"]}),
    "gc_pause_rank2": dict(
        seed=10000, world=4,
        description="4-rank DDP on a ~15 MB MLP (512->1024, 3 blocks of Linear(1024,1024)+LayerNorm+GELU, head 1024->10), batch 128, AdamW; every rank calls gc.collect(); gc.freeze() once after setup (automatic GC left on); rank 2 keeps a growing cache of per-sample Python records (dicts linked both ways: reference cycles; 360k at start-up, +10k a step) and calls gc.collect() right after backward (before the optimizer step) every other step (profiled steps 1, 3, 5 counted from 0), with no record_function",
        injected={"cause": "host_stall", "ranks": [2], "where": "gc.collect() after backward, unannotated", "profiled_steps": [1, 3, 5], "amount_ms": "see measured gc_ms (target 80-150)", "intermittent": True},
        expected={"first_finding": "host_stall", "ranks": [2], "must_not": ["slow_device", "compute_imbalance", "input_bound"]}),
    "padding_bug_r1": dict(
        seed=10100, world=4,
        description="4-rank DDP on a small transformer encoder (Embedding(8000,256), 2 TransformerEncoderLayer(d_model 256, 4 heads, FFN 1024, batch_first), masked mean pool, Linear(256,10)), AdamW(fused=True), batches of 8 variable-length sequences (40..200 tokens) from a DataLoader (num_workers=0); the collate pads to the batch's longest sequence and passes src_key_padding_mask, except that rank 1's collate is built with pad_to=512, so each of its batches is padded to 512 tokens",
        injected={"cause": "compute_imbalance", "ranks": [1], "where": "forward and backward of the encoder on 512-token batches (others ~170-200)", "kind": "per-rank collate config bug (pad to fixed max length)"},
        expected={"first_finding": "compute_imbalance", "ranks": [1], "must_not": ["slow_device", "host_stall", "input_bound"]}),
    "hsdp_rank0_logging_barrier": dict(
        seed=10200, world=4,
        description="4-rank HSDP: init_device_mesh('cpu', (2,2), mesh_dim_names=('replicate','shard')), fully_shard(mesh=mesh) on each of 4 blocks (LayerNorm, Linear(512,2048), GELU, Linear(2048,512), residual) and on the root (input projection 256->512, head 512->10), batch 64, AdamW(foreach=True); every step after the optimizer step rank 0 builds a large stats dict (loss.item(), lr, 32k per-sample records from pure-Python arithmetic) and writes it as one JSON line to a file in record_function('log_metrics') (~50-80 ms pure Python), then every rank calls dist.barrier()",
        injected={"cause": "host_stall", "ranks": [0], "where": "log_metrics (after optimizer step, before dist.barrier)", "amount_ms": 65, "kind": "pure-Python dict building + json.dumps + file write"},
        expected={"first_finding": "host_stall", "ranks": [0], "must_not": ["slow_device", "compute_imbalance", "host_sync"]}),
}


# ----------------------------------------------------------------------------------------------
# worker side: the training code, one process per rank
# ----------------------------------------------------------------------------------------------

class Recorder:
    """What the script measures itself, per profiled step."""
    def __init__(self):
        self.data, self.on = {}, False

    def add(self, key, value):
        if self.on:
            self.data.setdefault(key, []).append(round(value, 3))


def profiled_loop(out, rank, rec, step_fn):
    """The usual profiler loop: wait=1, warmup=1, active=6, one trace per rank."""
    import torch
    from torch.profiler import profile, ProfilerActivity, schedule
    trace = os.path.join(out, f"rank{rank}.pt.trace.json")
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=ACTIVE),
                 record_shapes=True, on_trace_ready=lambda p: p.export_chrome_trace(trace)) as prof:
        for i in range(STEPS):
            rec.on = i >= 2
            t0 = time.perf_counter()
            step_fn(i)
            rec.add("step_ms", (time.perf_counter() - t0) * 1e3)
            prof.step()


def init_dist(rank, world, port):
    import torch, torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)


def tp_dp_worker(rank, world, out, seed, rec):
    import torch, torch.nn as nn, torch.nn.functional as F, torch.distributed as dist
    from torch.profiler import record_function

    tp_size = 2
    tp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    dp_groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    tp_group, dp_group = tp_groups[rank // tp_size], dp_groups[rank % tp_size]
    tp_rank, dp_rank = rank % tp_size, rank // tp_size

    class CopyToTP(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            grad = grad.contiguous()
            dist.all_reduce(grad, group=tp_group)
            return grad

    class ReduceFromTP(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x = x.contiguous()
            dist.all_reduce(x, group=tp_group)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad

    class ParallelMLP(nn.Module):
        def __init__(self, hidden, ffn, gen):
            super().__init__()
            part = ffn // tp_size
            w1 = torch.randn(ffn, hidden, generator=gen) / math.sqrt(hidden)
            w2 = torch.randn(hidden, ffn, generator=gen) / math.sqrt(ffn)
            self.norm = nn.LayerNorm(hidden)
            self.fc1 = nn.Linear(hidden, part)                 # column parallel
            self.fc2 = nn.Linear(part, hidden, bias=False)     # row parallel
            self.fc2_bias = nn.Parameter(torch.zeros(hidden))
            with torch.no_grad():
                self.fc1.weight.copy_(w1[tp_rank * part:(tp_rank + 1) * part])
                self.fc1.bias.zero_()
                self.fc2.weight.copy_(w2[:, tp_rank * part:(tp_rank + 1) * part])

        def forward(self, x):
            h = CopyToTP.apply(self.norm(x))
            h = F.gelu(self.fc1(h))
            h = ReduceFromTP.apply(self.fc2(h))
            return x + h + self.fc2_bias

    hidden, ffn, batch = 1024, 2048, 128
    gen = torch.Generator().manual_seed(seed)
    blocks = nn.Sequential(*[ParallelMLP(hidden, ffn, gen) for _ in range(4)])
    head = nn.Linear(hidden, 10)
    with torch.no_grad():
        head.weight.copy_(torch.randn(10, hidden, generator=gen) / math.sqrt(hidden))
        head.bias.zero_()
    model = nn.Sequential(blocks, head)
    params = [p for p in model.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4)

    g = torch.Generator().manual_seed(seed + dp_rank)   # both TP ranks of a DP replica see the same batch
    data = [(torch.randn(batch, hidden, generator=g), torch.randint(10, (batch,), generator=g)) for _ in range(STEPS)]

    probe = torch.randn(hidden, 8, generator=torch.Generator().manual_seed(seed + 17))
    rounds = [8]

    def debug_numerics_check(n_rounds):
        report = {}
        for name, p in model.named_parameters():
            if p.dim() != 2:
                continue
            w = p.detach()
            norm = w.norm()
            report[name] = (norm, torch.isfinite(norm))
            v = probe
            for _ in range(n_rounds):          # spectral norm estimate, power iteration
                u = w @ v
                v = w.t() @ u
                v = v / torch.linalg.vector_norm(v, dim=0, keepdim=True)
            report[name + ".sigma"] = torch.linalg.vector_norm(w @ v, dim=0).max()
        return report

    def step(i):
        x, y = data[i]
        if rank == 3:
            t0 = time.perf_counter()
            with record_function("debug_check"):
                debug_numerics_check(rounds[0])
            ms = (time.perf_counter() - t0) * 1e3
            rec.add("debug_check_ms", ms)
            if i < 2:   # size the check on the unprofiled steps: ~90 ms
                rounds[0] = max(1, round(rounds[0] * 90.0 / ms))
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x), y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        grads = [p.grad for p in params]
        flat = torch.cat([gr.reshape(-1) for gr in grads])
        dist.all_reduce(flat, group=dp_group)
        flat.div_(2)
        off = 0
        for gr in grads:
            n = gr.numel()
            gr.copy_(flat[off:off + n].view_as(gr))
            off += n
        t3 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        rec.add("forward_ms", (t1 - t0) * 1e3)
        rec.add("backward_ms", (t2 - t1) * 1e3)
        rec.add("dp_allreduce_ms", (t3 - t2) * 1e3)
        rec.add("optimizer_ms", (time.perf_counter() - t3) * 1e3)

    profiled_loop(out, rank, rec, step)
    if rank == 3:
        rec.data["debug_check_rounds"] = [rounds[0]]


def moe_worker(rank, world, out, seed, rec):
    import torch, torch.nn as nn, torch.nn.functional as F, torch.distributed as dist

    d, ffn, tokens, n_exp = 256, 2048, 1024, world

    class AllToAll(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, out_splits, in_splits):
            ctx.splits = (out_splits, in_splits)
            y = x.new_empty(sum(out_splits), x.shape[1])
            dist.all_to_all_single(y, x.contiguous(), out_splits, in_splits)
            return y

        @staticmethod
        def backward(ctx, grad):
            out_splits, in_splits = ctx.splits
            g = grad.new_empty(sum(in_splits), grad.shape[1])
            dist.all_to_all_single(g, grad.contiguous(), in_splits, out_splits)
            return g, None, None

    class MoELayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(d, n_exp)
            self.expert = nn.Sequential(nn.Linear(d, ffn), nn.GELU(), nn.Linear(ffn, d))  # this rank's expert

        def forward(self, x):
            probs = F.softmax(self.gate(x), dim=-1)
            p, idx = probs.max(dim=-1)
            order = torch.argsort(idx)
            counts = torch.bincount(idx, minlength=n_exp)
            recv_counts = torch.empty_like(counts)
            dist.all_to_all_single(recv_counts, counts)
            send, recv = counts.tolist(), recv_counts.tolist()
            routed = AllToAll.apply(x[order], recv, send)
            y = self.expert(routed)
            back = AllToAll.apply(y, send, recv)
            out = torch.empty_like(back).index_copy(0, order, back)
            return out * p.unsqueeze(-1), recv

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense_in = nn.Sequential(nn.Linear(d, d), nn.GELU())
            self.moe = MoELayer()
            self.dense_out = nn.Sequential(nn.Linear(d, d), nn.GELU())
            self.head = nn.Linear(d, 10)

        def forward(self, x):
            h = self.dense_in(x)
            m, recv = self.moe(h)
            return self.head(self.dense_out(h + m)), recv

    torch.manual_seed(seed)          # same dense/gate weights everywhere ...
    net = Net()
    torch.manual_seed(seed + 100 + rank)  # ... each rank its own expert
    net.moe.expert = nn.Sequential(nn.Linear(d, ffn), nn.GELU(), nn.Linear(ffn, d))

    g = torch.Generator().manual_seed(seed + rank)
    data = [(torch.randn(tokens, d, generator=g), torch.randint(10, (tokens,), generator=g)) for _ in range(STEPS)]

    # the skewed router bias: expert 1 takes about half of the tokens, the others ~1/6 each
    # (fitted once on a probe batch, same value on every rank)
    with torch.no_grad():
        probe = net.dense_in(torch.randn(8192, d, generator=torch.Generator().manual_seed(seed)))
        logits = net.moe.gate(probe)
        target = torch.tensor([1 / 6, 1 / 2, 1 / 6, 1 / 6])
        bias = torch.zeros(n_exp)
        for _ in range(300):
            frac = torch.bincount((logits + bias).argmax(-1), minlength=n_exp).float() / len(probe)
            bias += 0.2 * (target - frac)
        net.moe.gate.bias += bias
    rec.data["gate_bias_added"] = [round(v, 4) for v in bias.tolist()]
    rec.data["probe_routing_fraction"] = [round(v, 4) for v in frac.tolist()]

    expert_params = set(net.moe.expert.parameters())
    shared = [p for p in net.parameters() if p not in expert_params]
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)

    # time this rank's expert (forward hooks; backward measured via tensor hooks would add ops, so forward only)
    t_exp = {}
    net.moe.expert.register_forward_pre_hook(lambda m, a: t_exp.__setitem__("t", time.perf_counter()))
    net.moe.expert.register_forward_hook(lambda m, a, o: t_exp.__setitem__("fwd", (time.perf_counter() - t_exp["t"]) * 1e3))

    def step(i):
        x, y = data[i]
        t0 = time.perf_counter()
        logits, recv = net(x)
        loss = F.cross_entropy(logits, y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        grads = [p.grad for p in shared]
        flat = torch.cat([gr.reshape(-1) for gr in grads])
        dist.all_reduce(flat)
        flat.div_(world)
        off = 0
        for gr in grads:
            gr.copy_(flat[off:off + gr.numel()].view_as(gr))
            off += gr.numel()
        t3 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        rec.add("tokens_to_my_expert", float(sum(recv)))
        rec.add("expert_forward_ms", t_exp["fwd"])
        rec.add("forward_ms", (t1 - t0) * 1e3)
        rec.add("backward_ms", (t2 - t1) * 1e3)
        rec.add("allreduce_ms", (t3 - t2) * 1e3)
        rec.add("optimizer_ms", (time.perf_counter() - t3) * 1e3)

    profiled_loop(out, rank, rec, step)


class _Block:
    """nn.Module factory for the FSDP scenarios (needs torch, so built lazily)."""
    @staticmethod
    def make(d=512, ffn=2048):
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(d)
                self.fc1 = nn.Linear(d, ffn)
                self.act = nn.GELU()
                self.fc2 = nn.Linear(ffn, d)

            def forward(self, x):
                return x + self.fc2(self.act(self.fc1(self.norm(x))))
        return Block()


def fsdp_worker(rank, world, out, seed, rec, name):
    import torch, torch.nn as nn, torch.nn.functional as F, torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.device_mesh import init_device_mesh
    from torch.profiler import record_function

    hsdp = name == "hsdp_rank0_logging_barrier"
    n_blocks = 4

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(256, 512)
            self.blocks = nn.ModuleList(_Block.make() for _ in range(n_blocks))
            self.head = nn.Linear(512, 10)

        def forward(self, x):
            x = self.proj(x)
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    torch.manual_seed(seed)
    model = Model()
    if hsdp:
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))
    else:
        mesh = init_device_mesh("cpu", (world,))
    for b in model.blocks:
        fully_shard(b, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)

    g = torch.Generator().manual_seed(seed + rank)
    data = [(torch.randn(64, 256, generator=g), torch.randint(10, (64,), generator=g)) for _ in range(STEPS)]
    log_path = os.path.join(out, "rank0_metrics.jsonl")
    rnd = random.Random(seed)

    def log_metrics(i, loss):
        scores = [rnd.random() for _ in range(32000)]
        mean = sum(scores) / len(scores)
        stats = {"step": i, "loss": loss.item(), "lr": opt.param_groups[0]["lr"], "time": time.time(),
                 "mean_score": mean,
                 "per_sample": [{"id": k, "score": s, "dev": s - mean, "hard": s > 0.9, "tag": f"s{i}-{k}"}
                                for k, s in enumerate(scores)]}
        with open(log_path, "a") as f:
            f.write(json.dumps(stats) + "\n")

    def step(i):
        x, y = data[i]
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x), y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        rec.add("forward_ms", (t1 - t0) * 1e3)
        rec.add("backward_ms", (t2 - t1) * 1e3)
        rec.add("optimizer_ms", (t3 - t2) * 1e3)
        if hsdp:
            if rank == 0:
                with record_function("log_metrics"):
                    log_metrics(i, loss)
                rec.add("log_metrics_ms", (time.perf_counter() - t3) * 1e3)
            t4 = time.perf_counter()
            dist.barrier()
            rec.add("barrier_ms", (time.perf_counter() - t4) * 1e3)

    profiled_loop(out, rank, rec, step)
    if os.path.exists(log_path):
        os.remove(log_path)


def mlp():
    import torch.nn as nn
    return nn.Sequential(nn.Linear(512, 1024), nn.GELU(),
                         *[m for _ in range(3) for m in (nn.Linear(1024, 1024), nn.LayerNorm(1024), nn.GELU())],
                         nn.Linear(1024, 10))


def gc_worker(rank, world, out, seed, rec):
    import gc
    import torch, torch.nn as nn, torch.nn.functional as F, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(seed)
    net = DDP(mlp())
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(seed + rank)
    data = [(torch.randn(128, 512, generator=g), torch.randint(10, (128,), generator=g)) for _ in range(STEPS)]

    cache = []   # rank 2: per-sample records for later analysis, linked both ways

    def remember(n, step):
        prev = cache[-1] if cache else None
        for k in range(n):
            rec_ = {"step": step, "sample": k, "loss": 0.01 * (k % 97), "prev": prev, "next": None}
            if prev is not None:
                prev["next"] = rec_
            cache.append(rec_)
            prev = rec_

    gc.collect()
    rec.data["gc_objects_frozen_at_start"] = [float(len(gc.get_objects()))]
    gc.freeze()   # keep the start-up objects (torch, model, data) out of every later collection
    if rank == 2:
        remember(360_000, -1)

    def step(i):
        x, y = data[i]
        t0 = time.perf_counter()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        t1 = time.perf_counter()
        gc_ms = 0.0
        if rank == 2:
            remember(10_000, i)
            t_gc = time.perf_counter()
            if i % 2 == 1:
                gc.collect()
                gc_ms = (time.perf_counter() - t_gc) * 1e3
            rec.add("cache_records", float(len(cache)))
            rec.add("cache_append_ms", (t_gc - t1) * 1e3)
        rec.add("gc_ms", gc_ms)
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        rec.add("forward_backward_ms", (t1 - t0) * 1e3)
        rec.add("optimizer_ms", (time.perf_counter() - t2) * 1e3)

    profiled_loop(out, rank, rec, step)
    gc.unfreeze()


def padding_worker(rank, world, out, seed, rec):
    import torch, torch.nn as nn, torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    vocab, d_model, batch = 8000, 256, 8

    class Sequences(torch.utils.data.Dataset):
        def __init__(self, n, seed):
            g = torch.Generator().manual_seed(seed)
            lengths = torch.randint(40, 201, (n,), generator=g)
            self.items = [(torch.randint(1, vocab, (int(L),), generator=g), int(torch.randint(10, (1,), generator=g)))
                          for L in lengths]

        def __len__(self):
            return len(self.items)

        def __getitem__(self, i):
            return self.items[i]

    class PadCollate:
        def __init__(self, pad_to=None):
            self.pad_to = pad_to

        def __call__(self, batch):
            seqs, labels = zip(*batch)
            self.longest = max(len(s) for s in seqs)
            L = self.pad_to or self.longest
            tokens = torch.zeros(len(seqs), L, dtype=torch.long)
            mask = torch.ones(len(seqs), L, dtype=torch.bool)   # True = padding
            for j, s in enumerate(seqs):
                tokens[j, :len(s)] = s
                mask[j, :len(s)] = False
            return tokens, mask, torch.tensor(labels)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d_model, padding_idx=0)
            self.layers = nn.ModuleList(nn.TransformerEncoderLayer(d_model, 4, 1024, batch_first=True) for _ in range(2))
            self.cls = nn.Linear(d_model, 10)

        def forward(self, tokens, pad_mask):
            h = self.embed(tokens)
            for layer in self.layers:
                h = layer(h, src_key_padding_mask=pad_mask)
            keep = (~pad_mask).unsqueeze(-1).float()
            return self.cls((h * keep).sum(1) / keep.sum(1))

    torch.manual_seed(seed)
    net = DDP(Encoder())
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)
    ds = Sequences(STEPS * batch, seed + rank)
    collate = PadCollate(pad_to=512 if rank == 1 else None)   # rank 1 got max_len=512 from its config
    loader = iter(torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=0,
                                              collate_fn=collate, generator=torch.Generator().manual_seed(seed + rank)))

    def step(i):
        t0 = time.perf_counter()
        tokens, mask, labels = next(loader)
        t1 = time.perf_counter()
        loss = F.cross_entropy(net(tokens, mask), labels)
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        rec.add("padded_len", float(tokens.shape[1]))
        rec.add("longest_seq", float(collate.longest))
        rec.add("data_ms", (t1 - t0) * 1e3)
        rec.add("forward_ms", (t2 - t1) * 1e3)
        rec.add("backward_ms", (t3 - t2) * 1e3)
        rec.add("optimizer_ms", (time.perf_counter() - t3) * 1e3)

    profiled_loop(out, rank, rec, step)


def worker_main(a):
    import torch.distributed as dist
    rank, world, seed = a.rank, a.world, SCENARIOS[a.worker]["seed"]
    init_dist(rank, world, a.port)
    rec = Recorder()
    if a.worker == "tp2dp2_debug_rank3":
        tp_dp_worker(rank, world, a.dir, seed, rec)
    elif a.worker == "moe_hot_expert_r1":
        moe_worker(rank, world, a.dir, seed, rec)
    elif a.worker in ("fsdp2_healthy_noisy", "hsdp_rank0_logging_barrier"):
        fsdp_worker(rank, world, a.dir, seed, rec, a.worker)
    elif a.worker == "gc_pause_rank2":
        gc_worker(rank, world, a.dir, seed, rec)
    elif a.worker == "padding_bug_r1":
        padding_worker(rank, world, a.dir, seed, rec)
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(a.dir, f"measured{rank}.json"), "w") as f:
        json.dump(rec.data, f)


def burner_main(path, seed):
    """Background CPU hog: ~150 ms of pure Python every ~700 ms, until killed."""
    rnd = random.Random(seed)
    while True:
        time.sleep(rnd.uniform(0.45, 0.65))
        t0, w0 = time.perf_counter(), time.time()
        x = 0
        while time.perf_counter() - t0 < 0.150:
            for k in range(2000):
                x = (x * 31 + k) % 1000003
        with open(path, "a") as f:
            f.write(json.dumps({"start_unix": round(w0, 6), "end_unix": round(time.time(), 6)}) + "\n")


# ----------------------------------------------------------------------------------------------
# driver side
# ----------------------------------------------------------------------------------------------

def shift_clock(path, rank):
    """Pretend rank `rank` ran on another host whose clock is CLOCK_SHIFT_MS ahead."""
    with open(path) as f:
        t = json.load(f)
    if rank in CLOCK_SHIFT_MS:
        us = CLOCK_SHIFT_MS[rank] * 1000
        for e in t["traceEvents"]:
            if "ts" in e:
                e["ts"] = round(e["ts"] + us, 3)
    if "host_name" in t:
        t["host_name"] = HOSTS[rank]
    with open(path, "w") as f:
        json.dump(t, f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def generate(name, out_root):
    s = SCENARIOS[name]
    d = os.path.join(out_root, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    t0 = time.perf_counter()
    port = free_port()
    env = dict(os.environ, **RANK_ENV, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    burner, burst_file = None, os.path.join(d, "bursts.jsonl")
    wall0 = time.time()
    if name == "fsdp2_healthy_noisy":
        burner = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--burner", burst_file,
                                   "--seed", str(s["seed"])], env=env)
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", name, "--rank", str(r),
                               "--world", str(s["world"]), "--port", str(port), "--dir", d], env=env)
             for r in range(s["world"])]
    failed = None
    while any(p.poll() is None for p in procs):
        if time.perf_counter() - t0 > DEADLINE_S:
            failed = f"deadline of {DEADLINE_S} s passed"
            for p in procs:
                if p.poll() is None:
                    p.kill()
            break
        time.sleep(0.5)
    for p in procs:
        p.wait()
    wall1 = time.time()
    bursts = []
    if burner is not None:
        burner.terminate()
        burner.wait()
        if os.path.exists(burst_file):
            bursts = [json.loads(line) for line in open(burst_file)]
            os.remove(burst_file)
    if failed is None and any(p.returncode for p in procs):
        failed = "rank exit codes " + str([p.returncode for p in procs])
    if failed:
        print(f"{name}: FAILED ({failed})")
        return False

    per_rank, per_step, medians = {}, {}, {}
    for r in range(s["world"]):
        p = os.path.join(d, f"measured{r}.json")
        m = json.load(open(p))
        os.remove(p)
        per_rank[str(r)] = {k: round(sum(v) / len(v), 3) for k, v in sorted(m.items()) if v}
        per_step[str(r)] = {k: v for k, v in sorted(m.items())}
        medians[str(r)] = round(median(m["step_ms"]), 1)
        t = os.path.join(d, f"rank{r}.pt.trace.json")
        if "clock_shift_ms" in s:
            shift_clock(t, r)
        with open(t, "rb") as f, gzip.open(t + ".gz", "wb", compresslevel=9) as z:
            shutil.copyfileobj(f, z)
        os.remove(t)
    import torch
    spec = dict(name=name, seed=s["seed"], world_size=s["world"], description=s["description"],
                injected=s["injected"], expected=s["expected"])
    for k in ("clock_shift_ms", "clock_shift_how"):
        if k in s:
            spec[k] = s[k]
    measured = {"step_ms_median": medians, "per_rank_mean": per_rank, "per_rank_each": per_step}
    if burner is not None:
        measured["background_bursts"] = {"process": "separate Python process (not a rank), pure-Python busy loop",
                                         "run_wall_unix": [round(wall0, 3), round(wall1, 3)],
                                         "bursts": bursts,
                                         "burst_ms_mean": round(sum(b["end_unix"] - b["start_unix"] for b in bursts) / max(1, len(bursts)) * 1e3, 1)}
    spec.update(torch=torch.__version__, made_by="tests/zoo/make_zoo_blind6.py", rank_env=RANK_ENV,
                profiler={"schedule": {"wait": 1, "warmup": 1, "active": ACTIVE}, "activities": ["CPU"], "record_shapes": True},
                run_seconds=round(time.perf_counter() - t0, 1), measured=measured)
    with open(os.path.join(d, "scenario.json"), "w") as f:
        json.dump(spec, f, indent=1)
        f.write("\n")
    print(f"{name} ({time.perf_counter() - t0:.0f} s) step_ms median per rank {json.dumps(medians)}")
    return True


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--only")
    ap.add_argument("--worker")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--world", type=int)
    ap.add_argument("--port", type=int)
    ap.add_argument("--dir")
    ap.add_argument("--burner")
    ap.add_argument("--seed", type=int)
    a = ap.parse_args()
    if a.worker:
        worker_main(a)
    elif a.burner:
        burner_main(a.burner, a.seed)
    else:
        if not a.out:
            ap.error("--out is required")
        ok = True
        t_all = time.perf_counter()
        for name in SCENARIOS:
            if not a.only or name in a.only.split(","):
                ok &= generate(name, os.path.abspath(a.out))
                sys.stdout.flush()
        print(f"total {time.perf_counter() - t_all:.0f} s")
        sys.exit(0 if ok else 1)
