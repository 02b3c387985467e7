#!/usr/bin/env python3
"""A zoo scenario outside the three generators: `rotating_batch_no_shapes`.

4-rank DDP (gloo, CPU, one compute thread per rank), an MLP of ~19 MB in two DDP buckets,
AdamW; each step one rank, drawn with a seeded generator (never the same rank two steps
running), gets 3x the batch (192 samples against 64), as batches of variable-length samples
do. Profiled **without** `record_shapes` (the profiler's default), so the collectives carry no
size. What an expert says: the last rank changes every step and is each time the one with the
larger batch; no single straggler; balance the work per step. What rankscope said before:
`host_sync` first ("2 blocking all_reduce calls per step in `backward`, of 0 B each"), DDP's
own bucket all_reduces, issued from `AccumulateGrad`'s hook, taken for a training loop's
synchronization because their size was unknown.

    python make_zoo_rotating.py --out tests/zoo   # needs torch; writes rotating_batch_no_shapes/

Each rank measures its own steps (batch, forward and backward wall time) into `measured`.
"""

import argparse
import gzip
import json
import os
import random
import shutil
import sys
import tempfile
import time

NAME = "rotating_batch_no_shapes"
SEED = 4242
WORLD = 4
STEPS = 6  # wait 1, warmup 1, active 4
BATCH = 64
FACTOR = 3


def heavy_ranks():
    rng = random.Random(SEED)
    heavy = [rng.randrange(WORLD) for _ in range(STEPS)]
    for i in range(1, STEPS):
        while heavy[i] == heavy[i - 1]:
            heavy[i] = rng.randrange(WORLD)
    return heavy


def worker(rank, tmp, port):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(SEED)
    layers = [nn.Linear(512, 1024)]
    for _ in range(4):
        layers += [nn.Linear(1024, 1024), nn.GELU()]
    layers.append(nn.Linear(1024, 16))
    net = DDP(nn.Sequential(*layers))
    opt = torch.optim.AdamW(net.parameters())
    heavy = heavy_ranks()
    g = torch.Generator().manual_seed(SEED + rank)
    steps = []

    def ready(p):
        p.export_chrome_trace(os.path.join(tmp, f"rank{rank}.pt.trace.json"))

    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=4),
                 on_trace_ready=ready) as prof:  # record_shapes left at its default (False)
        for step in range(STEPS):
            b = BATCH * (FACTOR if heavy[step] == rank else 1)  # INJECTION: this step's heavy rank
            x = torch.randn(b, 512, generator=g)
            y = torch.randint(16, (b,), generator=g)
            t0 = time.perf_counter()
            with record_function("forward"):
                loss = nn.functional.cross_entropy(net(x), y)
            t1 = time.perf_counter()
            with record_function("backward"):
                loss.backward()
            t2 = time.perf_counter()
            with record_function("optimizer"):
                opt.step()
                opt.zero_grad()
            steps.append({"step": step, "batch": b, "forward_ms": round((t1 - t0) * 1e3, 3),
                          "backward_ms": round((t2 - t1) * 1e3, 3)})
            prof.step()
    with open(os.path.join(tmp, f"measured{rank}.json"), "w") as fh:
        json.dump(steps, fh)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--port", type=int, default=29631)
    a = ap.parse_args()
    import torch
    import torch.multiprocessing as mp

    tmp = tempfile.mkdtemp()
    ps = [mp.Process(target=worker, args=(r, tmp, a.port)) for r in range(WORLD)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    codes = [p.exitcode for p in ps]
    if any(codes):
        sys.exit(f"ranks exited with {codes}")
    d = os.path.join(a.out, NAME)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    files = {}
    for r in range(WORLD):
        src = os.path.join(tmp, f"rank{r}.pt.trace.json")
        dst = os.path.join(d, f"rank{r}.pt.trace.json.gz")
        with open(src, "rb") as fi, open(dst, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as fo:
                fo.write(fi.read())
        files[os.path.basename(dst)] = os.path.getsize(dst)
    heavy = heavy_ranks()
    per_rank = {r: json.load(open(os.path.join(tmp, f"measured{r}.json"))) for r in range(WORLD)}
    scenario = {
        "name": NAME,
        "description": (
            "4-rank DDP (gloo, CPU) MLP of ~19 MB, AdamW; each step one rank, a different one each step "
            f"(seeded), has {FACTOR}x the batch ({BATCH * FACTOR} samples against {BATCH}). Profiled without "
            "record_shapes: the collectives carry no size."
        ),
        "seed": SEED,
        "world_size": WORLD,
        "backend": "gloo",
        "device": "cpu",
        "torch_version": torch.__version__,
        "steps_profiled": [2, 3, 4, 5],
        "profiler": {"schedule": {"wait": 1, "warmup": 1, "active": 4}, "activities": ["CPU"], "record_shapes": False},
        "config": {"batch": BATCH, "factor": FACTOR, "heavy_rank_by_step": heavy},
        "injected": {
            "cause": "compute_imbalance_per_step",
            "ranks": sorted(set(heavy[2:])),
            "where": "fwd + bwd (3x batch on one rank per step)",
            "amount_ms": None,
            "how": f"step s: rank heavy_rank_by_step[s] uses batch {BATCH * FACTOR}, the others {BATCH}",
        },
        "expected": {
            "first_finding": "arrival_jitter",
            "ranks": list(range(WORLD)),
            "why": "the last rank changes every step and is the one with the larger batch: no single straggler",
            "must_not": ["host_sync", "straggler", "compute_imbalance", "input_bound", "host_stall"],
        },
        "measured": {"per_rank_steps": per_rank},
        "notes": "Generated by make_zoo_rotating.py.",
        "files": files,
    }
    with open(os.path.join(d, "scenario.json"), "w") as fh:
        json.dump(scenario, fh, indent=1)
    shutil.rmtree(tmp, ignore_errors=True)
    print(d, files)


if __name__ == "__main__":
    main()
