#!/usr/bin/env python3
"""Fourth blind check: shapes users run that the zoo lacked (README.md, "Fourth blind check"),
each a gloo DDP job on CPU written as a user writes one (not the zoo's machinery):

- `no_step_markers`: the profiler around the loop, no schedule, no `prof.step()` (no
  ProfilerStep markers); rank 2 sleeps 150 ms in `record_function("augment")` every iteration.
- `one_step_loader`: one profiled step (`active=1`); rank 1's DataLoader items take 3 ms each.
- `rank0_validate`: rank 0 runs six extra forward passes under `no_grad` in
  `record_function("validate")` every step (evaluation on one rank).
- `ckpt_rank0_alternate`: rank 0 saves a checkpoint (`torch.save` of the state, then 100 ms of
  blocking I/O as a sleep) in `record_function("save_checkpoint")` after backward, every other
  step: the next step starts late.
- `world3_1mb_buckets`: 3 healthy ranks with `bucket_cap_mb=1` whose tensors are each larger
  than a bucket: few all_reduces a step, nothing to find.

    python make_zoo_blind4.py --out tests/zoo [--only NAME,...]

Writes per run `rank{r}.pt.trace.json.gz` and `scenario.json` (what was injected, what is
expected, and per rank what the script itself measured)."""
import argparse, gzip, json, os, shutil, sys, tempfile, time

SCENARIOS = {
    "no_step_markers": dict(seed=8500, world=4, description="4-rank DDP, profiler without schedule or prof.step() (no ProfilerStep markers), 4 iterations; rank 2 sleeps 150 ms per iteration in record_function('augment')",
                            injected={"cause": "host_stall", "ranks": [2], "where": "augment", "amount_ms": 150},
                            expected={"first_finding": "host_stall", "ranks": [2], "must_not": ["slow_device", "compute_imbalance", "input_bound"]}),
    "one_step_loader": dict(seed=8600, world=4, description="4-rank DDP, one profiled step (schedule(wait=1, warmup=1, active=1)); rank 1's DataLoader (num_workers=0) sleeps 3 ms per item, 64 items a batch",
                            injected={"cause": "input_bound", "ranks": [1], "amount_ms": 192},
                            expected={"first_finding": "input_bound", "ranks": [1], "must_not": ["slow_device", "compute_imbalance", "host_stall"]}),
    "rank0_validate": dict(seed=8700, world=4, description="4-rank DDP; rank 0 runs six extra forward passes of the model under no_grad in record_function('validate') after its forward, every step",
                           injected={"cause": "compute_imbalance", "ranks": [0], "where": "validate"},
                           expected={"first_finding": "compute_imbalance", "ranks": [0], "must_not": ["slow_device", "host_stall", "input_bound"]}),
    "ckpt_rank0_alternate": dict(seed=8800, world=4, description="4-rank DDP; rank 0 saves a checkpoint after backward every other step: torch.save of the state dict, then 100 ms of blocking I/O (a sleep), in record_function('save_checkpoint')",
                                 injected={"cause": "host_stall", "ranks": [0], "where": "save_checkpoint (the step before the late one)", "amount_ms": 100},
                                 expected={"first_finding": "host_stall", "ranks": [0], "must_not": ["slow_device", "compute_imbalance", "input_bound"]}),
    "world3_1mb_buckets": dict(seed=8900, world=3, description="3 healthy DDP ranks, bucket_cap_mb=1 with every weight larger than 1 MB: each its own bucket, 4 all_reduces a step",
                               injected=None,
                               expected={"first_finding": None, "ranks": [], "must_not": ["small_collectives", "straggler", "slow_device", "compute_imbalance", "host_stall", "input_bound", "host_sync"]}),
}


def worker(rank, world, name, out, port, seed):
    import torch, torch.nn as nn, torch.distributed as dist
    from torch.profiler import profile, ProfilerActivity, schedule, record_function
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Items(torch.utils.data.Dataset):
        def __init__(self, n, sleep_s, seed):
            g = torch.Generator().manual_seed(seed)
            self.x = torch.randn(n, 512, generator=g)
            self.y = torch.randint(10, (n,), generator=g)
            self.s = sleep_s

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            if self.s:
                time.sleep(self.s)
            return self.x[i], self.y[i]

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    m = nn.Sequential(nn.Linear(512, 1024), nn.GELU(),
                      *[x for _ in range(3) for x in (nn.Linear(1024, 1024), nn.LayerNorm(1024), nn.GELU())],
                      nn.Linear(1024, 10))
    net = DDP(m, bucket_cap_mb=1 if name == "world3_1mb_buckets" else 25)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(seed + 1 + rank)
    n = 8
    data = [(torch.randn(64, 512, generator=g), torch.randint(10, (64,), generator=g)) for _ in range(n)]
    loader = None
    if name == "one_step_loader":
        loader = iter(torch.utils.data.DataLoader(Items(64 * n, 0.003 if rank == 1 else 0.0, seed + rank), batch_size=64, num_workers=0))
    measured = {}

    def add(key, t0):
        measured.setdefault(key, []).append((time.perf_counter() - t0) * 1e3)

    def one(i):
        if loader is not None:
            t0 = time.perf_counter()
            x, y = next(loader)
            add("data_ms", t0)
        else:
            x, y = data[i]
        out = net(x)
        loss = nn.functional.cross_entropy(out, y)
        if name == "rank0_validate" and rank == 0:
            with record_function("validate"), torch.no_grad():
                t0 = time.perf_counter()
                for _ in range(6):
                    m(torch.randn(64, 512, generator=g))
                add("validate_ms", t0)
        loss.backward()
        if name == "ckpt_rank0_alternate" and rank == 0 and i % 2 == 1:
            with record_function("save_checkpoint"):
                t0 = time.perf_counter()
                torch.save({k: v.clone() for k, v in m.state_dict().items()}, os.path.join(tempfile.gettempdir(), f"rankscope-ckpt{rank}.pt"))
                t1 = time.perf_counter()
                time.sleep(0.1)
                add("save_ms", t0)
                measured.setdefault("save_io_sleep_ms", []).append((time.perf_counter() - t1) * 1e3)
        opt.step()
        opt.zero_grad(set_to_none=True)

    trace = os.path.join(out, f"rank{rank}.pt.trace.json")
    if name == "no_step_markers":
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for i in range(4):
                if rank == 2:
                    with record_function("augment"):
                        t0 = time.perf_counter()
                        time.sleep(0.15)
                        add("injected_sleep_ms", t0)
                one(i)
        prof.export_chrome_trace(trace)
    else:
        active = 1 if name == "one_step_loader" else 5
        with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=active),
                     on_trace_ready=lambda p: p.export_chrome_trace(trace)) as prof:
            for i in range(2 + active):
                if i == 2:
                    measured = {}  # what the profiled steps did
                one(i)
                prof.step()
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(out, f"measured{rank}.json"), "w") as f:
        json.dump(measured, f)


def generate(name, out_root):
    import torch.multiprocessing as mp
    s = SCENARIOS[name]
    d = os.path.join(out_root, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    mp.spawn(worker, args=(s["world"], name, d, 29500 + list(SCENARIOS).index(name), s["seed"]), nprocs=s["world"])
    per_rank, per_step = {}, {}
    for r in range(s["world"]):
        p = os.path.join(d, f"measured{r}.json")
        m = json.load(open(p))
        os.remove(p)
        per_rank[str(r)] = {k: round(sum(v) / len(v), 3) for k, v in m.items() if v}
        per_step[str(r)] = {k: [round(x, 3) for x in v] for k, v in m.items()}
        t = os.path.join(d, f"rank{r}.pt.trace.json")
        with open(t, "rb") as f, gzip.open(t + ".gz", "wb", compresslevel=9) as z:
            shutil.copyfileobj(f, z)
        os.remove(t)
    import torch
    spec = dict(name=name, seed=s["seed"], world_size=s["world"], description=s["description"],
                injected=s["injected"], expected=s["expected"], torch=torch.__version__,
                made_by="tests/zoo/make_zoo_blind4.py",
                measured={"per_rank_mean": per_rank, "per_rank_each": per_step})
    with open(os.path.join(d, "scenario.json"), "w") as f:
        json.dump(spec, f, indent=1)
        f.write("\n")
    print(name, json.dumps(per_rank))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only")
    a = ap.parse_args()
    for name in SCENARIOS:
        if not a.only or name in a.only.split(","):
            generate(name, os.path.abspath(a.out))
            sys.stdout.flush()
