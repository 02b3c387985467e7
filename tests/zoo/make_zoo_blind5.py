#!/usr/bin/env python3
"""Fifth blind check: gloo jobs on CPU written as users write them (not the zoo's machinery),
four ranks each, six profiled steps (schedule(wait=1, warmup=1, active=6)):

- `zero1_metrics_spin`: DDP + ZeroRedundancyOptimizer(AdamW); rank 1 computes "metrics" in pure
  Python (a spinning loop, no operators, ~120 ms) in `record_function("compute_metrics")` after
  backward and before the optimizer step, every step.
- `act_ckpt_rank2`: DDP on 8 Linear+GELU blocks (width 768, batch 192); rank 2 alone wraps each
  block in `torch.utils.checkpoint.checkpoint(..., use_reentrant=False)` (a per-rank config
  mistake), so it recomputes the forward in backward. Afterwards the traces of ranks 2 and 3 are
  shifted by +97 ms and given another host name (two hosts whose clocks disagree).
- `accum_loader_every3`: DDP with 4 micro-batches a step (`no_sync()` on the first 3), a
  DataLoader (num_workers=0) per rank; rank 3's Dataset sleeps in `__getitem__` for the items
  of the 2nd and 5th profiled steps only (~150 ms a step).
- `pp1f1b_heavy_stage1`: torch.distributed.pipelining, Schedule1F1B, one PipelineStage per rank,
  8 micro-batches; stage 1 has 6 Linear+GELU layers, the others 2 (a config mistake).
- `healthy_zero1_w4`: as `zero1_metrics_spin` with nothing injected.
- `two_causes_spin_loader`: DDP; rank 0's DataLoader items sleep (~200 ms a step more than the
  other ranks) and every rank spins ~60 ms in `record_function("log_to_disk")` after the
  optimizer step.

    python make_zoo_blind5.py --out tests/zoo [--only NAME,...]

Writes per run `rank{r}.pt.trace.json.gz` and `scenario.json` (what was injected, what is
expected, and per rank what the script itself measured, per profiled step)."""
import argparse, contextlib, gzip, json, os, random, shutil, socket, sys, time

ACTIVE = 6          # profiled steps (after wait=1, warmup=1)
SLOW_STEPS = (1, 4)  # accum_loader_every3: 0-based profiled steps in which rank 3 reads slowly
CLOCK_SHIFT_MS = {2: 97, 3: 97}  # act_ckpt_rank2: ranks whose "host clock" runs ahead
HOSTS = {0: "node-a", 1: "node-a", 2: "node-b", 3: "node-b"}

SCENARIOS = {
    "zero1_metrics_spin": dict(seed=9100, world=4, description="4-rank DDP (MLP 512->1024, 3 Linear/LayerNorm/GELU blocks of 1024, head; ~15 MB) with ZeroRedundancyOptimizer(AdamW); rank 1 spins ~120 ms of pure-Python metric computation (no operators) in record_function('compute_metrics') after backward and before the optimizer step, every step",
                               injected={"cause": "host_stall", "ranks": [1], "where": "compute_metrics", "amount_ms": 120, "kind": "pure-Python busy loop (CPU, not sleep)"},
                               expected={"first_finding": "host_stall", "ranks": [1], "must_not": ["slow_device", "compute_imbalance", "input_bound"]}),
    "act_ckpt_rank2": dict(seed=9200, world=4, description="4-rank DDP on 8 blocks of Linear(768,768)+GELU plus a head (~19 MB), batch 192, AdamW; rank 2 alone wraps every block in torch.utils.checkpoint.checkpoint(use_reentrant=False), recomputing the forward during backward. Traces of ranks 2 and 3 shifted by +97 ms afterwards (every event's ts) and host_name set to node-a (ranks 0,1) / node-b (ranks 2,3): two hosts whose clocks disagree",
                           injected={"cause": "compute_imbalance", "ranks": [2], "where": "backward (activation-checkpoint recompute of the 8 blocks)"},
                           expected={"first_finding": "compute_imbalance", "ranks": [2], "must_not": ["slow_device", "host_stall", "input_bound"]},
                           clock_shift_ms={str(r): v for r, v in CLOCK_SHIFT_MS.items()},
                           clock_shift_how="after export: +97000 us added to 'ts' of every event of ranks 2 and 3 (metadata, X, flow and instant events); baseTimeNanoseconds left as it was, so ts*1000 + baseTimeNanoseconds moves by exactly 97 ms as well; host_name rewritten"),
    "accum_loader_every3": dict(seed=9300, world=4, description="4-rank DDP (the ~15 MB MLP), gradient accumulation: 4 micro-batches of 16 a step from a DataLoader (num_workers=0), model.no_sync() on the first 3; rank 3's Dataset.__getitem__ sleeps 37 ms on the first item of each micro-batch of the 2nd and 5th profiled steps only (ProfilerStep#3 and #6), ~150 ms a step; the other steps read at normal speed",
                                injected={"cause": "input_bound", "ranks": [3], "profiled_steps": list(SLOW_STEPS), "amount_ms": 150, "intermittent": True},
                                expected={"first_finding": "input_bound", "ranks": [3], "must_not": ["slow_device", "compute_imbalance"]}),
    "pp1f1b_heavy_stage1": dict(seed=9400, world=4, description="torch.distributed.pipelining, Schedule1F1B, 4 stages (one PipelineStage per rank, built per rank), 8 micro-batches of 32 (batch 256), width 512; Linear+GELU layers per stage [2, 6, 2, 2] (stage 0 also the input projection 256->512, stage 3 the head 512->64), AdamW; no record_function annotations",
                                injected={"cause": "pipeline_bubble", "ranks": [1], "layers_per_stage": [2, 6, 2, 2]},
                                expected={"first_finding": "pipeline_bubble", "ranks": [1], "must_not": ["slow_device", "host_stall", "input_bound"]}),
    "healthy_zero1_w4": dict(seed=9500, world=4, description="As zero1_metrics_spin (4-rank DDP, ~15 MB MLP, ZeroRedundancyOptimizer(AdamW)) with nothing injected",
                             injected=None,
                             # ZeroRedundancyOptimizer broadcasts each parameter tensor: small calls
                             # are a true observation (low), not a false cause.
                             expected={"first_finding": None, "ranks": [], "must_not": ["straggler", "slow_device", "compute_imbalance", "host_stall", "input_bound", "host_sync"],
                                       "may_report": ["small_collectives, low at most (ZeroRedundancyOptimizer broadcasts every parameter tensor on its own: 16 calls a step, 12 of them under 64 KiB; a true observation, in its terms: parameters_as_bucket_view=True)"]}),
    "two_causes_spin_loader": dict(seed=9600, world=4, description="4-rank DDP (the ~15 MB MLP), AdamW, batch 64 from a DataLoader (num_workers=0) per rank; rank 0's Dataset.__getitem__ sleeps ~2.7 ms per item (~200 ms a step more than the other ranks), and every rank spins ~60 ms of pure Python in record_function('log_to_disk') after the optimizer step",
                                   injected={"causes": [{"cause": "input_bound", "ranks": [0], "amount_ms": 200},
                                                        {"cause": "host_stall", "ranks": [0, 1, 2, 3], "where": "log_to_disk", "amount_ms": 60, "kind": "pure-Python busy loop"}]},
                                   expected={"first_finding": "input_bound", "ranks": [0], "must_not": ["slow_device", "compute_imbalance"],
                                             "second": {"finding": "host_stall", "ranks": [0, 1, 2, 3]}}),
}


def spin_python(ms, seed):
    """Pure-Python busy work (no torch operators) until `ms` have passed: running metrics
    over a list of floats, the way a hand-written metrics or logging helper burns CPU."""
    rnd = random.Random(seed)
    scores = [rnd.random() for _ in range(2000)]
    t0, lines = time.perf_counter(), []
    while time.perf_counter() - t0 < ms / 1e3:
        mean = sum(scores) / len(scores)
        var = sum((s - mean) ** 2 for s in scores) / len(scores)
        hits = sum(1 for s in scores if s > mean)
        lines.append(f"mean={mean:.6f} var={var:.6f} hits={hits}")
    return (time.perf_counter() - t0) * 1e3


def mlp():
    import torch.nn as nn
    return nn.Sequential(nn.Linear(512, 1024), nn.GELU(),
                         *[m for _ in range(3) for m in (nn.Linear(1024, 1024), nn.LayerNorm(1024), nn.GELU())],
                         nn.Linear(1024, 10))


def ddp_worker(rank, world, name, out, port, seed):
    import torch, torch.nn as nn, torch.distributed as dist
    from torch.profiler import profile, ProfilerActivity, schedule, record_function
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.utils.checkpoint import checkpoint

    class Shard(torch.utils.data.Dataset):
        """In-memory samples; items in `slow` take `sleep_s` to read (a cold cache / remote fetch)."""
        def __init__(self, n, dim, seed, sleep_s=0.0, slow=None):
            g = torch.Generator().manual_seed(seed)
            self.x, self.y = torch.randn(n, dim, generator=g), torch.randint(10, (n,), generator=g)
            self.sleep_s, self.slow, self.slept_ms = sleep_s, slow, 0.0

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            if self.sleep_s and (self.slow is None or i in self.slow):
                t0 = time.perf_counter()
                time.sleep(self.sleep_s)
                self.slept_ms += (time.perf_counter() - t0) * 1e3
            return self.x[i], self.y[i]

    class DeepMLP(nn.Module):
        def __init__(self, depth, width, ckpt):
            super().__init__()
            self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(depth))
            self.head = nn.Linear(width, 10)
            self.ckpt = ckpt

        def forward(self, x):
            for b in self.blocks:
                x = checkpoint(b, x, use_reentrant=False) if self.ckpt else b(x)
            return self.head(x)

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    steps = 2 + ACTIVE
    measured = {}

    def add(key, value):
        measured.setdefault(key, []).append(round(value, 3))

    # ---- model, optimizer, data as each scenario's user wrote them ----
    micro, batch, dim = 1, 64, 512
    if name == "act_ckpt_rank2":
        dim, batch = 768, 192
        model = DeepMLP(8, 768, ckpt=(rank == 2))  # the config mistake: only rank 2 checkpoints
    else:
        model = mlp()
    net = DDP(model)
    if name in ("zero1_metrics_spin", "healthy_zero1_w4"):
        opt = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-3)
        shard = [p for grp in opt.optim.param_groups for p in grp["params"]]  # this rank's ZeRO shard
        measured["zero_shard_tensors"] = [len(shard)]
        measured["zero_shard_mb"] = [round(sum(p.numel() * p.element_size() for p in shard) / 2**20, 3)]
    else:
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    dataset = None
    if name == "accum_loader_every3":
        micro, batch = 4, 16
        per_step = micro * batch
        # rank 3: the first item of each micro-batch of the slow steps is a 37 ms cold read
        slow = {(2 + s) * per_step + k * batch for s in SLOW_STEPS for k in range(micro)} if rank == 3 else None
        dataset = Shard(steps * per_step, dim, seed + rank, 0.037 if rank == 3 else 0.0, slow)
    elif name == "two_causes_spin_loader":
        dataset = Shard(steps * batch, dim, seed + rank, 0.0027 if rank == 0 else 0.0)
    if dataset is not None:
        loader = iter(torch.utils.data.DataLoader(dataset, batch_size=batch, num_workers=0))
    else:
        g = torch.Generator().manual_seed(seed + 1 + rank)
        premade = [(torch.randn(batch, dim, generator=g), torch.randint(10, (batch,), generator=g)) for _ in range(steps)]

    # act_ckpt_rank2: time forward calls of the blocks made during backward (the recompute)
    in_backward, t_block = [False], [0.0]
    if name == "act_ckpt_rank2":
        def pre(_m, _a):
            t_block[0] = time.perf_counter()

        def post(_m, _a, _o):
            if in_backward[0]:
                measured["_recompute"] = measured.get("_recompute", 0.0) + (time.perf_counter() - t_block[0]) * 1e3
        for b in model.blocks:
            b.register_forward_pre_hook(pre)
            b.register_forward_hook(post, always_call=True)  # recompute stops early

    trace = os.path.join(out, f"rank{rank}.pt.trace.json")
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=ACTIVE),
                 record_shapes=True, on_trace_ready=lambda p: p.export_chrome_trace(trace)) as prof:
        for i in range(steps):
            if i == 2:  # keep what the profiled steps did
                measured = {k: v for k, v in measured.items() if k.startswith("zero_shard")}
            t_step = time.perf_counter()
            data_ms = fwd_ms = bwd_ms = 0.0
            if dataset is not None:
                dataset.slept_ms = 0.0
            for k in range(micro):
                t0 = time.perf_counter()
                x, y = next(loader) if dataset is not None else premade[i]
                t1 = time.perf_counter()
                with net.no_sync() if k < micro - 1 else contextlib.nullcontext():
                    loss = nn.functional.cross_entropy(net(x), y) / micro
                    t2 = time.perf_counter()
                    in_backward[0] = True
                    loss.backward()
                    in_backward[0] = False
                t3 = time.perf_counter()
                data_ms, fwd_ms, bwd_ms = data_ms + t1 - t0, fwd_ms + t2 - t1, bwd_ms + t3 - t2
            if name == "zero1_metrics_spin" and rank == 1:
                with record_function("compute_metrics"):
                    add("injected_spin_ms", spin_python(120, seed + i))
            t0 = time.perf_counter()
            opt.step()
            opt.zero_grad(set_to_none=True)
            add("optimizer_ms", (time.perf_counter() - t0) * 1e3)
            if name == "two_causes_spin_loader":
                with record_function("log_to_disk"):
                    add("injected_spin_ms", spin_python(60, seed + i))
            add("data_ms", data_ms * 1e3)
            if dataset is not None:
                add("dataset_sleep_ms", dataset.slept_ms)
            add("forward_ms", fwd_ms * 1e3)
            add("backward_ms", bwd_ms * 1e3)
            if name == "act_ckpt_rank2":
                add("recompute_in_backward_ms", measured.pop("_recompute", 0.0))
            add("step_ms", (time.perf_counter() - t_step) * 1e3)
            prof.step()
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(out, f"measured{rank}.json"), "w") as f:
        json.dump(measured, f)


def pp_worker(rank, world, name, out, port, seed):
    import torch, torch.nn as nn, torch.distributed as dist
    from torch.profiler import profile, ProfilerActivity, schedule
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    torch.manual_seed(seed + rank)
    layers = SCENARIOS[name]["injected"]["layers_per_stage"][rank]  # stage 1: 6 instead of 2
    mods = [nn.Linear(256, 512), nn.GELU()] if rank == 0 else []
    for _ in range(layers):
        mods += [nn.Linear(512, 512), nn.GELU()]
    if rank == world - 1:
        mods.append(nn.Linear(512, 64))
    stage_mod = nn.Sequential(*mods)
    stage = PipelineStage(stage_mod, rank, world, torch.device("cpu"))
    sched = Schedule1F1B(stage, n_microbatches=8, loss_fn=nn.MSELoss())
    opt = torch.optim.AdamW(stage_mod.parameters(), lr=1e-3)

    measured, cur = {}, {}

    def timed(fn, key):  # measurement only: the stage's compute per micro-batch
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                cur[key] = cur.get(key, 0.0) + (time.perf_counter() - t0) * 1e3
        return wrapper
    stage.forward_one_chunk = timed(stage.forward_one_chunk, "fwd_compute_ms")
    stage.backward_one_chunk = timed(stage.backward_one_chunk, "bwd_compute_ms")

    steps = 2 + ACTIVE
    g = torch.Generator().manual_seed(seed)
    data = [(torch.randn(256, 256, generator=g), torch.randn(256, 64, generator=g)) for _ in range(steps)]
    trace = os.path.join(out, f"rank{rank}.pt.trace.json")
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=ACTIVE),
                 record_shapes=True, on_trace_ready=lambda p: p.export_chrome_trace(trace)) as prof:
        for i in range(steps):
            cur.clear()
            t0 = time.perf_counter()
            x, y = data[i]
            if rank == 0:
                sched.step(x)
            elif rank == world - 1:
                sched.step(target=y)
            else:
                sched.step()
            t1 = time.perf_counter()
            opt.step()
            opt.zero_grad(set_to_none=True)
            t2 = time.perf_counter()
            if i >= 2:
                compute = cur.get("fwd_compute_ms", 0.0) + cur.get("bwd_compute_ms", 0.0)
                for k, v in dict(cur, compute_ms=compute, schedule_ms=(t1 - t0) * 1e3,
                                 idle_in_schedule_ms=(t1 - t0) * 1e3 - compute,
                                 optimizer_ms=(t2 - t1) * 1e3, step_ms=(t2 - t0) * 1e3).items():
                    measured.setdefault(k, []).append(round(v, 3))
            prof.step()
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(out, f"measured{rank}.json"), "w") as f:
        json.dump(measured, f)


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


def generate(name, out_root):
    import torch, torch.multiprocessing as mp
    s = SCENARIOS[name]
    d = os.path.join(out_root, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    t0 = time.perf_counter()
    fn = pp_worker if name.startswith("pp") else ddp_worker
    mp.spawn(fn, args=(s["world"], name, d, free_port(), s["seed"]), nprocs=s["world"])
    per_rank, per_step = {}, {}
    for r in range(s["world"]):
        p = os.path.join(d, f"measured{r}.json")
        m = json.load(open(p))
        os.remove(p)
        per_rank[str(r)] = {k: round(sum(v) / len(v), 3) for k, v in sorted(m.items()) if v}
        per_step[str(r)] = {k: v for k, v in sorted(m.items())}
        t = os.path.join(d, f"rank{r}.pt.trace.json")
        if "clock_shift_ms" in s:
            shift_clock(t, r)
        with open(t, "rb") as f, gzip.open(t + ".gz", "wb", compresslevel=9) as z:
            shutil.copyfileobj(f, z)
        os.remove(t)
    spec = dict(name=name, seed=s["seed"], world_size=s["world"], description=s["description"],
                injected=s["injected"], expected=s["expected"])
    for k in ("clock_shift_ms", "clock_shift_how"):
        if k in s:
            spec[k] = s[k]
    spec.update(torch=torch.__version__, made_by="tests/zoo/make_zoo_blind5.py",
                profiler={"schedule": {"wait": 1, "warmup": 1, "active": ACTIVE}, "activities": ["CPU"], "record_shapes": True},
                measured={"per_rank_mean": per_rank, "per_rank_each": per_step})
    with open(os.path.join(d, "scenario.json"), "w") as f:
        json.dump(spec, f, indent=1)
        f.write("\n")
    print(f"{name} ({time.perf_counter() - t0:.0f} s)", json.dumps(per_rank))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only")
    a = ap.parse_args()
    for name in SCENARIOS:
        if not a.only or name in a.only.split(","):
            generate(name, os.path.abspath(a.out))
            sys.stdout.flush()
