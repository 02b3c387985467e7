#!/usr/bin/env python3
"""Memory traces of the zoo (issue 38): a real 2-rank FSDP2 job (gloo, CPU) profiled per rank
with the PyTorch profiler and `profile_memory=True`, so each trace holds the caching
allocator's `[memory]` instants (on CPU: device -1, the host's memory) beside its events.

    /work/venv-scaling/bin/python tests/zoo/make_memory.py            # into tests/zoo/memory/fsdp2_2rank/
    /work/venv-scaling/bin/python tests/zoo/make_memory.py --out DIR

Same conventions as make_zoo.py: one subprocess per rank (`--worker --rank R`), MASTER_ADDR
127.0.0.1 and a free port, one thread per rank, every seed set, the traces gzipped with mtime 0
and no file name in the header, and a scenario.json saying what was run and what the traces
hold. CI never runs PyTorch: the committed traces are the test input.

What the traces must show: per profiled step, the saw-tooth of FSDP2 (each unit's parameters
all-gathered before its forward and backward, freed after; activations kept from forward to
backward; gradients reduce-scattered), so allocated rises through forward, peaks early in
backward and falls back by the step's end. The committed `expected` in scenario.json is counted
from the traces' `[memory]` instants by this script (`peaks`), not by rankscope.
"""

import argparse
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 3801
CFG = dict(width=256, depth=3, classes=16, batch=32, wait=1, warmup=1, active=3, lr=1e-3)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gzip_to(src, dst):
    """gzip with mtime=0 and no file name in the header, so equal input gives equal bytes."""
    with open(src, "rb") as fi, open(dst, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as fo:
            shutil.copyfileobj(fi, fo)


def worker(rank, world, out):
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    torch.manual_seed(SEED + rank)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    c = CFG
    torch.manual_seed(SEED)  # the same initial weights on every rank
    blocks = [torch.nn.Sequential(torch.nn.Linear(c["width"], c["width"]), torch.nn.LayerNorm(c["width"]),
                                  torch.nn.GELU()) for _ in range(c["depth"])]
    model = torch.nn.Sequential(*blocks, torch.nn.Linear(c["width"], c["classes"]))
    for b in blocks:
        fully_shard(b)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=c["lr"])
    gen = torch.Generator().manual_seed(SEED + 100 + rank)
    steps = c["wait"] + c["warmup"] + c["active"]
    sched = schedule(wait=c["wait"], warmup=c["warmup"], active=c["active"], repeat=1)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched, profile_memory=True, record_shapes=True) as prof:
        for _ in range(steps):
            x = torch.randn(c["batch"], c["width"], generator=gen)
            y = torch.randint(0, c["classes"], (c["batch"],), generator=gen)
            with record_function("forward"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            prof.step()
    prof.export_chrome_trace(os.path.join(out, f"rank{rank}.pt.trace.json"))
    dist.barrier()
    dist.destroy_process_group()


def peaks(path):
    """Per ProfilerStep: the most `Total Allocated` of any `[memory]` instant inside it, and its
    count of instants; counted straight from the trace's JSON."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1])) for e in events
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
    mem = [e for e in events if e.get("ph") == "i" and e.get("name") == "[memory]"]
    out = []
    for lo, hi, n in steps:
        inside = [e["args"] for e in mem if lo <= e["ts"] < hi]
        out.append({"step": n, "instants": len(inside),
                    "peak_allocated": max((a["Total Allocated"] for a in inside), default=None),
                    "peak_reserved": max((a["Total Reserved"] for a in inside), default=None)})
    return {"instants": len(mem), "devices": sorted({e["args"].get("Device Id") for e in mem}), "steps": out}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "memory", "fsdp2_2rank"))
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--dir")
    a = ap.parse_args()
    world = 2
    if a.worker:
        worker(a.rank, world, a.dir)
        return
    tmp = tempfile.mkdtemp()
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONHASHSEED="0", PYTHONUNBUFFERED="1")
    t = time.time()
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", "--rank", str(r), "--dir", tmp], env=env)
             for r in range(world)]
    codes = [p.wait(timeout=600) for p in procs]
    if any(codes):
        sys.exit(f"a rank failed: {codes}")
    os.makedirs(a.out, exist_ok=True)
    files, expected = {}, {}
    for r in range(world):
        dst = os.path.join(a.out, f"rank{r}.pt.trace.json.gz")
        gzip_to(os.path.join(tmp, f"rank{r}.pt.trace.json"), dst)
        files[os.path.basename(dst)] = os.path.getsize(dst)
        expected[str(r)] = peaks(dst)
    import torch
    scenario = {
        "name": "fsdp2_2rank",
        "description": "FSDP2 fully_shard per Linear/LayerNorm/GELU block and the root, gloo on CPU, world 2, "
                       "AdamW, cross-entropy; profiled with profile_memory=True and record_shapes=True, annotations "
                       "forward/backward/optimizer.",
        "seed": SEED, "world_size": world, "backend": "gloo", "torch": torch.__version__,
        "steps_profiled": CFG["active"], "config": CFG, "injected": None,
        "expected": expected,
        "notes": "expected: per rank, the [memory] instants (device -1: host memory) and per ProfilerStep the most "
                 "Total Allocated / Total Reserved of the instants inside it, counted from the JSON by peaks().",
        "run": {"return_codes": codes, "seconds": round(time.time() - t, 1)}, "files": files,
    }
    with open(os.path.join(a.out, "scenario.json"), "w") as f:
        json.dump(scenario, f, indent=1)
        f.write("\n")
    shutil.rmtree(tmp)
    print(json.dumps(scenario["files"]), json.dumps(expected)[:600])


if __name__ == "__main__":
    main()
