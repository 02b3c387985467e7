"""Real runs of one model at world sizes 1, 2 and 4 for `rankscope runs` (issue 36 item 2: scaling
efficiency). DDP on gloo (CPU), a small MLP, `record_shapes=True`, one thread per rank, seeded.

    /work/venv-scaling/bin/python tests/zoo/scaling/make.py --out tests/zoo/scaling

Two series of three runs:
- `strong_w{1,2,4}`: the same global batch (128 samples per step) split over the ranks
  (128, 64, 32 per rank): strong scaling.
- `weak_w{1,2,4}`: the same batch per rank (48 samples), so the global batch grows with the ranks
  (48, 96, 192): weak scaling; no weak run has a strong run's global batch, so each is
  told apart by its samples per step.

Each run folder holds one gzipped Kineto trace per rank (`rank{r}.pt.trace.json.gz`) and a
`scenario.json` with the model's layer sizes, the batches and the profiler's schedule: what the
tests need to count the samples and the FLOPs per step independently of rankscope.
"""

import argparse
import gzip
import json
import os
import shutil
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule

SEED = 3600
IN_DIM, WIDTH, DEPTH, CLASSES = 64, 512, 3, 16
GLOBAL_BATCH = 128  # strong scaling
RANK_BATCH = 48  # weak scaling (no global batch equal to a strong run's)
WAIT, WARMUP, ACTIVE = 1, 1, 3


def layers():
    """(in, out) of each Linear, in forward order."""
    dims = [IN_DIM] + [WIDTH] * (DEPTH - 1) + [CLASSES]
    return list(zip(dims[:-1], dims[1:]))


def model():
    mods = []
    for k, (i, o) in enumerate(layers()):
        mods.append(nn.Linear(i, o))
        if k + 1 < len(layers()):
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


def rank_main(rank, world, port, batch, tmp):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(SEED)
    net = DDP(model())
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(SEED + rank)
    steps = WAIT + WARMUP + ACTIVE

    def ready(p):
        p.export_chrome_trace(os.path.join(tmp, f"rank{rank}.pt.trace.json"))

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE),
        record_shapes=True,
        on_trace_ready=ready,
    ) as prof:
        for _ in range(steps):
            x = torch.randn(batch, IN_DIM, generator=g)
            y = torch.randint(0, CLASSES, (batch,), generator=g)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(out, name, world, batch, series, description):
    tmp = tempfile.mkdtemp()
    mp.spawn(rank_main, args=(world, free_port(), batch, tmp), nprocs=world, join=True)
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for r in range(world):
        src = os.path.join(tmp, f"rank{r}.pt.trace.json")
        with open(src, "rb") as f, gzip.GzipFile(os.path.join(d, f"rank{r}.pt.trace.json.gz"), "wb", mtime=0) as z:
            shutil.copyfileobj(f, z)
    shutil.rmtree(tmp)
    scenario = {
        "name": name,
        "description": description,
        "series": series,
        "seed": SEED,
        "world_size": world,
        "backend": "gloo",
        "device": "cpu",
        "threads_per_rank": 1,
        "torch_version": torch.__version__,
        "profiler": {"schedule": {"wait": WAIT, "warmup": WARMUP, "active": ACTIVE},
                     "activities": ["CPU"], "record_shapes": True},
        "model": {"kind": "mlp", "layers": [{"in": i, "out": o} for i, o in layers()],
                  "activation": "relu", "loss": "cross_entropy", "optimizer": "sgd"},
        "batch_per_rank": batch,
        "samples_per_step": batch * world,
    }
    with open(os.path.join(d, "scenario.json"), "w") as f:
        json.dump(scenario, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    for w in (1, 2, 4):
        b = GLOBAL_BATCH // w
        runs = [
            (f"strong_w{w}", w, b, "strong",
             f"Strong scaling: global batch {GLOBAL_BATCH} split over {w} rank(s), {b} samples per rank."),
            (f"weak_w{w}", w, RANK_BATCH, "weak",
             f"Weak scaling: {RANK_BATCH} samples per rank on {w} rank(s), global batch {RANK_BATCH * w}."),
        ]
        for name, world, batch, series, desc in runs:
            if not only or name in only:
                run(a.out, name, world, batch, series, desc)
                print(name, "done")


if __name__ == "__main__":
    main()
