"""FSDP2 + tensor parallel on a 2-D DeviceMesh, as PyTorch's 2-D recipe writes it
(`init_device_mesh(..., mesh_dim_names=("dp", "tp"))`, `parallelize_module` with
`ColwiseParallel` / `RowwiseParallel` on the `tp` dimension, `fully_shard` on `dp`): a pair of
real runs on gloo (CPU), world 4, one healthy and one where rank 3 sleeps in an annotated
`log_to_disk` inside forward every step. The pair gives the what-if gain's truth (the
difference of the two runs' steps) and a layout whose data-parallel dimension is named `dp`
but sharded.

    /work/venv-scaling/bin/python tests/zoo/fsdp_tp/make.py --out tests/zoo/fsdp_tp

Writes `healthy/` and `stall_r3/`: `rank{r}.pt.trace.json.gz` and `scenario.json` (what was
injected, what must be found, and each rank's own step times measured with `perf_counter`).
"""

import argparse
import gzip
import json
import os
import shutil
import socket
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

WORLD, DIM, BLOCKS, BATCH, TOKENS = 4, 128, 4, 16, 32
WAIT, WARMUP, ACTIVE = 1, 1, 4
SEED = 3900
STALL_RANK, STALL_MS = 3, 150


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


def rank_main(rank, port, tmp, stall):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(SEED)
    model = nn.Sequential(*[Block(DIM) for _ in range(BLOCKS)])
    for b in model:
        parallelize_module(b, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
        fully_shard(b, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    # The tensor-parallel ranks of one replica read the same batch.
    g = torch.Generator().manual_seed(SEED + mesh["dp"].get_local_rank())
    steps = []

    def ready(p):
        p.export_chrome_trace(os.path.join(tmp, f"rank{rank}.pt.trace.json"))

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE), on_trace_ready=ready) as prof:
        for step in range(WAIT + WARMUP + ACTIVE):
            t0 = time.perf_counter()
            x = torch.randn(BATCH, TOKENS, DIM, generator=g)
            slept = 0.0
            with record_function("forward"):
                loss = model(x).pow(2).mean()
                if stall and rank == STALL_RANK:
                    # INJECTION: a blocking host call on one rank, every step.
                    with record_function("log_to_disk"):
                        s0 = time.perf_counter()
                        time.sleep(STALL_MS / 1e3)
                        slept = (time.perf_counter() - s0) * 1e3
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                opt.step()
                opt.zero_grad()
            steps.append({"step": step, "step_ms": (time.perf_counter() - t0) * 1e3, "slept_ms": slept})
            prof.step()
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(tmp, f"measured_rank{rank}.json"), "w") as f:
        json.dump({"steps": steps[WAIT + WARMUP:]}, f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make(out, name, stall):
    tmp = tempfile.mkdtemp(prefix=f"fsdp_tp_{name}_")
    mp.spawn(rank_main, args=(free_port(), tmp, stall), nprocs=WORLD)
    dest = os.path.join(out, name)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    measured = {}
    for r in range(WORLD):
        with open(os.path.join(tmp, f"rank{r}.pt.trace.json"), "rb") as f, \
                gzip.open(os.path.join(dest, f"rank{r}.pt.trace.json.gz"), "wb", compresslevel=9) as g:
            shutil.copyfileobj(f, g)
        with open(os.path.join(tmp, f"measured_rank{r}.json")) as f:
            measured[str(r)] = json.load(f)
    shutil.rmtree(tmp)
    scenario = {
        "name": name,
        "description": (
            "FSDP2 + tensor parallel on a 2-D DeviceMesh (dp 2 x tp 2, mesh_dim_names ('dp', 'tp')), gloo on CPU, "
            f"world 4; {BLOCKS} blocks (LayerNorm, Linear {DIM}->{4 * DIM} colwise, ReLU, Linear {4 * DIM}->{DIM} rowwise, "
            f"residual), each block fully_shard on 'dp', AdamW; batch [{BATCH}, {TOKENS}, {DIM}] per replica; "
            "forward / backward / optimizer annotated; record_shapes=True."
        ),
        "seed": SEED,
        "world_size": WORLD,
        "torch_version": torch.__version__,
        "layout": {"mesh": ["dp", "tp"], "shape": [2, 2], "dp": "sharded (FSDP2)", "tp": "tensor"},
        "injected": ({"cause": "host_stall", "ranks": [STALL_RANK], "where": "log_to_disk", "amount_ms": STALL_MS,
                      "how": f"time.sleep({STALL_MS / 1e3}) inside record_function('log_to_disk') inside forward, every step, rank {STALL_RANK} only"}
                     if stall else None),
        "expected": ({"first_finding": "host_stall", "ranks": [STALL_RANK], "where": "log_to_disk",
                      "must_not": ["compute_imbalance", "slow_device", "input_bound", "small_collectives"]}
                     if stall else
                     {"first_finding": None, "ranks": [],
                      "must_not": ["straggler", "compute_imbalance", "slow_device", "host_stall", "input_bound"]}),
        "measured": {"per_rank": measured},
    }
    with open(os.path.join(dest, "scenario.json"), "w") as f:
        json.dump(scenario, f, indent=1)
    job = [max(m["steps"][i]["step_ms"] for m in measured.values()) for i in range(ACTIVE)]
    print(f"{name}: job step (slowest rank) per step, ms: {[round(x) for x in job]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--only", choices=["healthy", "stall_r3"])
    a = ap.parse_args()
    for name, stall in (("healthy", False), ("stall_r3", True)):
        if a.only in (None, name):
            make(a.out, name, stall)


if __name__ == "__main__":
    sys.exit(main())
