"""Paired real runs for the rule "FSDP on a CPU group" (docs/metrics.md): does FSDP2's prefetch,
or keeping the parameters gathered after forward, shorten the step of an FSDP2 job on gloo?

Each run: FSDP2 (`fully_shard` on 4 blocks LayerNorm, Linear(512, 2048), GELU, Linear(2048, 512),
residual, then on the root: projection 256 -> 512, head 512 -> 10), 4 ranks on one host, gloo,
batch 64, AdamW(foreach=True), seed 9900 (the sixth blind check's `fsdp2_healthy_noisy`, without
its CPU hog), torch.set_num_threads(1). Steps 0-7 run under the profiler (wait 1, warmup 1,
active 6); every step is timed with perf_counter between barriers.

    python make_fsdp_cpu_pairs.py --variant prefetch --reps 3          # medians, no traces
    python make_fsdp_cpu_pairs.py --variant reshard --reps 3 --out /tmp/pairs

`--variant prefetch` alternates runs without and with `set_modules_to_forward_prefetch` /
`set_modules_to_backward_prefetch` (each block prefetching its neighbour); `--variant reshard`
without and with `reshard_after_forward=False` on the blocks. With `--out`, each run's traces go
to <out>/<variant><0|1><rep>/ (0: as FSDP2 defaults, 1: changed). Needs torch; CI does not run it.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time


def worker(a):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.profiler import ProfilerActivity, profile, schedule

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port))
    dist.init_process_group("gloo", rank=a.rank, world_size=a.world)
    torch.set_num_threads(1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.fc1, self.act, self.fc2 = nn.LayerNorm(512), nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512)

        def forward(self, x):
            return x + self.fc2(self.act(self.fc1(self.norm(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj, self.blocks, self.head = nn.Linear(256, 512), nn.ModuleList(Block() for _ in range(4)), nn.Linear(512, 10)

        def forward(self, x):
            x = self.proj(x)
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    torch.manual_seed(9900)
    model = Model()
    mesh = init_device_mesh("cpu", (a.world,))
    changed = a.changed == 1
    for b in model.blocks:
        fully_shard(b, mesh=mesh, reshard_after_forward=not (changed and a.variant == "reshard"))
    fully_shard(model, mesh=mesh)
    if changed and a.variant == "prefetch":
        blocks = list(model.blocks)
        for i in range(len(blocks) - 1):
            blocks[i].set_modules_to_forward_prefetch([blocks[i + 1]])
        for i in range(1, len(blocks)):
            blocks[i].set_modules_to_backward_prefetch([blocks[i - 1]])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    g = torch.Generator().manual_seed(9900 + a.rank)
    data = [(torch.randn(64, 256, generator=g), torch.randint(10, (64,), generator=g)) for _ in range(a.steps)]
    trace = os.path.join(a.dir, f"rank{a.rank}.pt.trace.json") if a.dir else None
    times = []
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=6), record_shapes=True,
                 on_trace_ready=(lambda p: p.export_chrome_trace(trace)) if trace else None) as prof:
        for i in range(a.steps):
            dist.barrier()
            t0 = time.perf_counter()
            x, y = data[i]
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            times.append((time.perf_counter() - t0) * 1e3)
            if i < 8:
                prof.step()
    dist.barrier()
    if a.rank == 0:
        print(json.dumps({"profiled": times[2:8], "unprofiled": times[8:]}), flush=True)
    dist.destroy_process_group()


def run(a, changed, rep):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    d = os.path.join(a.out, f"{a.variant}{changed}{rep}") if a.out else ""
    if d:
        os.makedirs(d, exist_ok=True)
    cmd = [sys.executable, __file__, "--variant", a.variant, "--world", str(a.world), "--steps", str(a.steps),
           "--port", str(port), "--changed", str(changed), "--dir", d]
    procs = [subprocess.Popen(cmd + ["--rank", str(r)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for r in range(a.world)]
    outs = [p.communicate()[0] for p in procs]
    t = json.loads(outs[0].strip().splitlines()[-1])
    return {k: round(statistics.median(v), 1) if v else None for k, v in t.items()}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", choices=["prefetch", "reshard"], required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--out", default="")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--port", type=int)
    ap.add_argument("--changed", type=int, default=0)
    ap.add_argument("--dir", default="")
    a = ap.parse_args()
    if a.rank is not None:
        worker(a)
    else:
        for rep in range(a.reps):
            for changed in (0, 1):
                print(f"{a.variant} changed={changed} rep={rep} median step ms {json.dumps(run(a, changed, rep))}", flush=True)
