"""A real run with gradient accumulation for `rankscope runs` (issue 36: samples per step =
micro-batch × forward passes in the step). The scaling runs' MLP (tests/zoo/scaling/make.py),
DDP on gloo over 2 ranks (CPU, one thread per rank), 4 micro-batches of 32 samples per optimizer
step (`no_sync` on the first 3, so one gradient all-reduce per step), `record_shapes=True`.

    /work/venv-scaling/bin/python tests/zoo/accum/make.py --out tests/zoo/accum

Writes `accum_w2/rank{r}.pt.trace.json.gz` and `accum_w2/scenario.json` (the micro-batch, the
passes and the samples per step: what the tests count from).
"""

import argparse
import contextlib
import gzip
import json
import os
import shutil
import socket
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scaling"))
from make import CLASSES, IN_DIM, SEED, layers, model  # noqa: E402  (the scaling runs' MLP)

WORLD, MICRO, PASSES = 2, 32, 4
WAIT, WARMUP, ACTIVE = 1, 1, 3


def rank_main(rank, port, tmp):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(SEED)
    net = DDP(model())
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(SEED + rank)

    def ready(p):
        p.export_chrome_trace(os.path.join(tmp, f"rank{rank}.pt.trace.json"))

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE),
        record_shapes=True,
        on_trace_ready=ready,
    ) as prof:
        for _ in range(WAIT + WARMUP + ACTIVE):
            opt.zero_grad(set_to_none=True)
            for k in range(PASSES):
                x = torch.randn(MICRO, IN_DIM, generator=g)
                y = torch.randint(0, CLASSES, (MICRO,), generator=g)
                sync = contextlib.nullcontext() if k == PASSES - 1 else net.no_sync()
                with sync:
                    (loss_fn(net(x), y) / PASSES).backward()
            opt.step()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(rank_main, args=(port, tmp), nprocs=WORLD, join=True)
    d = os.path.join(a.out, "accum_w2")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for r in range(WORLD):
        src = os.path.join(tmp, f"rank{r}.pt.trace.json")
        with open(src, "rb") as f, gzip.GzipFile(os.path.join(d, f"rank{r}.pt.trace.json.gz"), "wb", mtime=0) as z:
            shutil.copyfileobj(f, z)
    shutil.rmtree(tmp)
    scenario = {
        "name": "accum_w2",
        "description": f"Gradient accumulation: {PASSES} micro-batches of {MICRO} per step on {WORLD} ranks.",
        "seed": SEED,
        "world_size": WORLD,
        "backend": "gloo",
        "device": "cpu",
        "threads_per_rank": 1,
        "torch_version": torch.__version__,
        "profiler": {"schedule": {"wait": WAIT, "warmup": WARMUP, "active": ACTIVE},
                     "activities": ["CPU"], "record_shapes": True},
        "model": {"kind": "mlp", "layers": [{"in": i, "out": o} for i, o in layers()],
                  "activation": "relu", "loss": "cross_entropy", "optimizer": "sgd"},
        "micro_batch": MICRO,
        "forward_passes": PASSES,
        "batch_per_rank": MICRO * PASSES,
        "samples_per_step": MICRO * PASSES * WORLD,
    }
    with open(os.path.join(d, "scenario.json"), "w") as f:
        json.dump(scenario, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
