"""Per-rank training code for the rankscope scenario zoo.

Imported only by the rank processes that ``make_zoo.py`` spawns (never by CI: CI has no
torch). Every rank runs one of three loops:

* ``run_dp``       data parallel (DDP, or FSDP2 ``fully_shard``) with optional injections,
* ``run_pipeline`` ``torch.distributed.pipelining`` (GPipe / 1F1B), one stage per rank,
* ``run_hang``     a DDP-free loop with explicit ``dist.all_reduce`` calls, one rank
                   breaking the collective sequence (skip / wrong shape / early exit).

Each rank measures itself with ``time.perf_counter()`` (independent of the profiler) and
writes ``measured_rank{R}.json``; the profiler writes ``rank{R}.pt.trace.json`` into the
work directory (the current directory of the process), which ``make_zoo.py`` gzips.
"""

import contextlib
import json
import os
import pickle
import sys
import time
import traceback
from collections import Counter
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule


# --------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------

def ms(t0, t1):
    return round((t1 - t0) * 1e3, 3)


def ann(name):
    """record_function(name) if the scenario uses that annotation, else nothing."""
    return record_function(name) if name else contextlib.nullcontext()


class StepLog:
    """perf_counter() measurements per profiled step: one dict per step."""

    def __init__(self):
        self.steps = []
        self.cur = None

    def begin(self, step):
        self.cur = {"step": step, "start_unix_ns": time.time_ns()}
        self._t0 = time.perf_counter()

    def add(self, key, value_ms):
        self.cur[key] = round(self.cur.get(key, 0.0) + value_ms, 3)

    @contextlib.contextmanager
    def timed(self, key):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(key, (time.perf_counter() - t0) * 1e3)

    def end(self):
        self.cur["step_ms"] = ms(self._t0, time.perf_counter())
        self.cur["end_unix_ns"] = time.time_ns()
        self.steps.append(self.cur)
        self.cur = None


def make_profiler(rank, wait, warmup, active):
    """CPU profiler with a wait/warmup/active schedule; exports a Chrome trace into the
    current directory (a relative name, so the trace's `traceName` has no temp path)."""

    def ready(prof):
        prof.export_chrome_trace(f"rank{rank}.pt.trace.json")

    return profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
        record_shapes=True,
        on_trace_ready=ready,
    )


def init_dist(ctx, timeout_s=120):
    torch.set_num_threads(1)  # 4 ranks share 2 cores: one compute thread each
    torch.set_num_interop_threads(1)
    # Denormal floats (tiny gradients / Adam's squared averages) make CPU arithmetic slow by
    # orders of magnitude and drift over a run: flush them so timing reflects the injection only.
    torch.set_flush_denormal(True)
    dist.init_process_group(
        "gloo", rank=ctx["rank"], world_size=ctx["world"], timeout=timedelta(seconds=timeout_s)
    )


def mlp_block(width):
    return nn.Sequential(nn.Linear(width, width), nn.LayerNorm(width), nn.GELU())


def build_mlp(cfg):
    """in_proj (in_dim -> width), `depth` Linear/LayerNorm/GELU blocks, head -> classes. With
    `widths` (a list), one block per width, a Linear between blocks of different widths."""
    widths = cfg.get("widths") or [cfg["width"]] * cfg["depth"]
    layers = [nn.Linear(cfg["in_dim"], widths[0]), nn.GELU()]
    for i, w in enumerate(widths):
        if i and widths[i - 1] != w:
            layers.append(nn.Linear(widths[i - 1], w))
        layers.append(mlp_block(w))
    layers += [nn.Linear(widths[-1], cfg["classes"])]
    return nn.Sequential(*layers)


class Tower(nn.Module):
    """good_overlap's model: a compute-heavy, parameter-light token-wise part near the input
    (Linear layers applied to every one of `tokens` positions) and a parameter-heavy,
    compute-light MLP after mean-pooling. In backward the big layers' gradients are ready
    early, so their 25 MB bucket is all_reduced while the token-wise layers still compute;
    the last bucket (token-wise parameters) is small."""

    def __init__(self, cfg):
        super().__init__()
        t = cfg["token_width"]
        self.tok_in = nn.Linear(cfg["in_dim"], t)
        self.tok = nn.Sequential(*[mlp_block(t) for _ in range(cfg["token_depth"])])
        self.up = nn.Linear(t, cfg["width"])
        self.mlp = nn.Sequential(*[mlp_block(cfg["width"]) for _ in range(cfg["depth"])])
        self.head = nn.Linear(cfg["width"], cfg["classes"])

    def forward(self, x):  # x: (batch, tokens, in_dim)
        h = self.tok(torch.nn.functional.gelu(self.tok_in(x))).mean(dim=1)
        return self.head(self.mlp(self.up(h)))


def build_model(cfg):
    return Tower(cfg) if cfg.get("model") == "tower" else build_mlp(cfg)


def build_optimizer(name, params):
    if name == "adamw":  # CPU default: per-parameter for-loop implementation
        return torch.optim.AdamW(params, lr=1e-4)
    if name == "adam_foreach":
        return torch.optim.Adam(params, lr=1e-4, foreach=True)
    if name == "sgd_foreach":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=True)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    raise ValueError(name)


def n_params_bytes(model):
    return sum(p.numel() * p.element_size() for p in model.parameters())


class ItemDataset(torch.utils.data.Dataset):
    """Synthetic classification data; __getitem__ sleeps `sleep_s` per item (the injected
    slow input pipeline) and records how long it really slept."""

    def __init__(self, n, dim, classes, sleep_s, seed):
        self.n, self.dim, self.classes, self.sleep_s, self.seed = n, dim, classes, sleep_s, seed
        self.slept_ms = 0.0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep_s > 0:
            t0 = time.perf_counter()
            time.sleep(self.sleep_s)  # the per-item cost of the input pipeline
            self.slept_ms += (time.perf_counter() - t0) * 1e3
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
        return torch.randn(self.dim, generator=g), torch.randint(self.classes, (), generator=g)


# --------------------------------------------------------------------------------------
# data parallel: DDP or FSDP2
# --------------------------------------------------------------------------------------

def _spin(cpus, seconds):
    os.sched_setaffinity(0, cpus)
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1


def cpu_hog(cpus, seconds):
    """A process that spins on `cpus` for `seconds` (started, not waited for: it ends itself)."""
    import multiprocessing as mp

    p = mp.get_context("fork").Process(target=_spin, args=(set(cpus), seconds), daemon=True)
    p.start()
    return p


def run_dp(ctx):
    cfg, rank, world = ctx["cfg"], ctx["rank"], ctx["world"]
    seed = cfg["seed"]
    init_dist(ctx)
    names = cfg["annotations"]  # {"forward": str|None, "backward": ..., "optimizer": ...}
    inj = cfg.get("inject") or {}
    inj_here = rank in inj.get("ranks", [])
    if cfg.get("pin"):
        # One core per rank, so that a process competing for a rank's core slows that rank alone.
        os.sched_setaffinity(0, {rank % os.cpu_count()})

    torch.manual_seed(seed)  # same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = build_model(cfg)
    extra = {"param_bytes": n_params_bytes(model), "param_count": sum(p.numel() for p in model.parameters())}
    torch.manual_seed(seed + rank)  # per-rank data / dropout stream

    if cfg.get("fsdp"):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (world,))
        for blk in model.children():
            if isinstance(blk, nn.Sequential):
                fully_shard(blk, mesh=mesh)
        fully_shard(model, mesh=mesh)
        net = model
    else:
        from torch.nn.parallel import DistributedDataParallel as DDP

        net = DDP(model, bucket_cap_mb=cfg.get("bucket_cap_mb", 25))
    opt = build_optimizer(cfg["optimizer"], net.parameters())
    loss_fn = nn.CrossEntropyLoss()

    # Batch size: uneven_batch gives the injected rank a multiple of the others' batch.
    batch = cfg["batch"]
    if inj.get("kind") == "batch_multiplier" and inj_here:
        batch = int(batch * inj["factor"])
    extra["batch"] = batch

    wait, warmup, active = cfg["wait"], cfg["warmup"], cfg["active"]
    n_steps = wait + warmup + active

    # Input: a real DataLoader (num_workers=0, so its __next__ runs on the main thread)
    # or tensors made up front (then "data" is only indexing a list).
    dataset = None
    if cfg.get("dataloader"):
        per_item = cfg["item_sleep_ms"] / 1e3
        if inj.get("kind") == "slow_getitem" and inj_here:
            per_item *= inj["factor"]  # INJECTION (slow_dataloader): rank's __getitem__ is slower
        extra["item_sleep_ms"] = per_item * 1e3
        dataset = ItemDataset(batch * n_steps, cfg["in_dim"], cfg["classes"], per_item, seed + rank)
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch, num_workers=0, shuffle=False, drop_last=True)
        it = iter(loader)
        next_batch = lambda step: next(it)  # noqa: E731
    else:
        g = torch.Generator().manual_seed(seed + rank)
        shape = (batch, cfg["tokens"], cfg["in_dim"]) if cfg.get("model") == "tower" else (batch, cfg["in_dim"])
        data = [
            (torch.randn(*shape, generator=g), torch.randint(cfg["classes"], (batch,), generator=g))
            for _ in range(n_steps)
        ]
        next_batch = lambda step: data[step]  # noqa: E731

    # Time the last gradient became ready on this rank (DDP: after it, backward() only waits
    # for the bucket all_reduces to finish and copies them back = the collective wait).
    grad_ready = {"t": None}
    if not cfg.get("fsdp"):
        def _hook(_p):
            grad_ready["t"] = time.perf_counter()
        for p in net.parameters():
            p.register_post_accumulate_grad_hook(_hook)

    # INJECTION (host_stall_unannotated): a sleep in the middle of the model's forward, from
    # a forward hook on the middle block, with no record_function of its own.
    log = StepLog()
    if inj.get("kind") == "sleep_mid_forward" and inj_here:
        blocks = [m for m in model.children() if isinstance(m, nn.Sequential)]
        mid = blocks[len(blocks) // 2]

        def _sleep_hook(_m, _inp, _out):
            t0 = time.perf_counter()
            time.sleep(inj["amount_ms"] / 1e3)
            if log.cur is not None:
                log.add("injected_sleep_ms", ms(t0, time.perf_counter()))
        mid.register_forward_hook(_sleep_hook)


    # An extra matmul in forward (make_opchange.py): `extra_mm` = [rows, k], A [rows, k] @ B [k, k],
    # inputs made once so the step does only the product. Its size is the pair's one change.
    extra_mm = None
    if cfg.get("extra_mm"):
        rows_mm, k_mm = cfg["extra_mm"]
        g_mm = torch.Generator().manual_seed(seed)
        extra_mm = (torch.randn(rows_mm, k_mm, generator=g_mm), torch.randn(k_mm, k_mm, generator=g_mm))

    # INJECTION (slow_device_hog): another process spins on this rank's core for the whole run:
    # every operator of the rank runs slower, in every step (a slow device, as a throttled or
    # shared GPU is). Nothing in this process changes.
    hog_all = None
    if inj.get("kind") == "cpu_hog_all" and inj_here:
        hog_all = cpu_hog(os.sched_getaffinity(0), 3600.0)
        extra["hog"] = "every step"

    prof = make_profiler(rank, wait, warmup, active)
    with prof:
        for step in range(n_steps):
            log.begin(step)
            if inj.get("kind") == "cpu_hog_once" and inj_here and step == inj["step"]:
                # INJECTION (noise_burst): host noise for one step. Another process spins on this
                # rank's core for `amount_ms`: the rank's operators run as usual, only slower while
                # they share the core. Nothing in this process changes.
                hog = cpu_hog(os.sched_getaffinity(0), inj["amount_ms"] / 1e3)
                log.cur["hog_ms"] = inj["amount_ms"]
            slept0 = dataset.slept_ms if dataset else 0.0
            with log.timed("data_ms"):
                x, y = next_batch(step)
            if dataset:
                log.add("dataset_sleep_ms", dataset.slept_ms - slept0)

            with ann(names["forward"]), log.timed("forward_ms"):
                out = net(x)
                if extra_mm is not None:
                    t0 = time.perf_counter()
                    torch.mm(*extra_mm)
                    log.add("extra_mm_ms", ms(t0, time.perf_counter()))
                if inj.get("kind") == "sleep_in_forward" and inj_here:
                    # INJECTION (host_stall): an annotated host stall inside `forward`.
                    with record_function(inj["where"]):
                        t0 = time.perf_counter()
                        time.sleep(inj["amount_ms"] / 1e3)
                        log.add("injected_sleep_ms", ms(t0, time.perf_counter()))
                loss = loss_fn(out, y)

            if cfg.get("log_metrics") is True:
                # INJECTION (host_sync): log global metrics every step the way people do:
                # for each scalar, a blocking all_reduce of the detached value, then .item()
                # on the host (4 metrics: loss, accuracy, logit mean, logit std).
                with record_function("log_metrics"):
                    od = out.detach()
                    metrics = {"loss": loss.detach(), "accuracy": (od.argmax(1) == y).float().mean(),
                               "logit_mean": od.mean(), "logit_std": od.std()}
                    for k, v in metrics.items():
                        t0 = time.perf_counter()
                        v = v.clone()
                        dist.all_reduce(v)
                        t1 = time.perf_counter()
                        value = v.item() / world
                        t2 = time.perf_counter()
                        log.add("metric_allreduce_ms", ms(t0, t1))
                        log.add("metric_item_ms", ms(t1, t2))
                        log.cur["logged_" + k] = round(value, 6)

            grad_ready["t"] = None
            with ann(names["backward"]):
                t0 = time.perf_counter()
                loss.backward()
                t1 = time.perf_counter()
            log.add("backward_ms", ms(t0, t1))
            if grad_ready["t"] is not None:
                log.add("bwd_tail_ms", ms(grad_ready["t"], t1))
                log.cur["last_grad_ready_unix_ns"] = log.cur["start_unix_ns"] + int((grad_ready["t"] - log._t0) * 1e9)

            if cfg.get("log_metrics") == "grad_norms":
                # INJECTION (host_sync): log the global norm of every parameter's gradient each
                # step, as training scripts do to watch for exploding gradients: per parameter a
                # blocking all_reduce of a 0-dim tensor, then .item() on the host.
                with record_function("log_metrics"):
                    for pname, p in net.named_parameters():
                        if p.grad is None:
                            continue
                        t0 = time.perf_counter()
                        v = p.grad.detach().norm().pow(2)
                        dist.all_reduce(v)
                        t1 = time.perf_counter()
                        value = v.item() ** 0.5
                        t2 = time.perf_counter()
                        log.add("metric_allreduce_ms", ms(t0, t1))
                        log.add("metric_item_ms", ms(t1, t2))
                    log.cur["logged_grad_norm_last"] = round(value, 6)

            with ann(names["optimizer"]), log.timed("optimizer_ms"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            log.end()
            prof.step()

    if hog_all is not None:
        hog_all.terminate()
    if not cfg.get("fsdp"):
        # DDP's own bookkeeping (bucket sizes after the rebuild at step 1), not the profiler's.
        extra["ddp_logging"] = {k: v for k, v in net._get_ddp_logging_data().items() if "bucket" in k}
    dist.barrier()
    dist.destroy_process_group()
    return {"steps": log.steps[wait + warmup:], "unprofiled_steps": log.steps[: wait + warmup], "extra": extra}


# --------------------------------------------------------------------------------------
# pipeline parallel: torch.distributed.pipelining, one stage per rank
# --------------------------------------------------------------------------------------

def run_pipeline(ctx):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    cfg, rank, world = ctx["cfg"], ctx["rank"], ctx["world"]
    seed = cfg["seed"]
    init_dist(ctx)
    names = cfg["annotations"]
    w = cfg["width"]
    torch.manual_seed(seed + rank)
    # One stage = `layers[rank]` Linear+GELU pairs (stage 0 also holds the input projection,
    # the last stage the head). INJECTION (pipeline_slow_stage): more layers on one stage.
    n_layers = cfg["layers_per_stage"][rank]
    mods = []
    if rank == 0:
        mods += [nn.Linear(cfg["in_dim"], w), nn.GELU()]
    for _ in range(n_layers):
        mods += [nn.Linear(w, w), nn.GELU()]
    if rank == world - 1:
        mods += [nn.Linear(w, cfg["out_dim"])]
    stage_mod = nn.Sequential(*mods)
    stage = PipelineStage(stage_mod, rank, world, torch.device("cpu"))

    log = StepLog()

    stall = cfg.get("stall")
    pending = {"on": False}
    if stall and rank in stall["ranks"]:
        # INJECTION (second blind check): a host stall on this stage once per step, just before
        # its first micro-batch's forward (a forward pre-hook, no annotation of its own unless
        # stall["where"] names one).
        def _stall(_m, _inp):
            if pending["on"]:
                pending["on"] = False
                with ann(stall.get("where")):
                    t0 = time.perf_counter()
                    time.sleep(stall["amount_ms"] / 1e3)
                    log.add("injected_sleep_ms", ms(t0, time.perf_counter()))
        stage_mod.register_forward_pre_hook(_stall)

    # Independent compute measurement: wrap the stage's per-micro-batch forward and backward
    # (pure compute: the schedule posts and waits for the send/recv outside these calls) and
    # the loss function (last stage) with perf_counter().
    def timed_method(fn, key):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                if log.cur is not None:
                    log.add(key, (time.perf_counter() - t0) * 1e3)
                    log.cur[key.replace("_ms", "_calls")] = log.cur.get(key.replace("_ms", "_calls"), 0) + 1
        return wrapper

    stage.forward_one_chunk = timed_method(stage.forward_one_chunk, "fwd_compute_ms")
    stage.backward_one_chunk = timed_method(stage.backward_one_chunk, "bwd_compute_ms")
    mse = nn.MSELoss()
    loss_fn = timed_method(lambda o, t: mse(o, t), "loss_compute_ms")

    sched_cls = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[cfg["schedule"]]
    sched = sched_cls(stage, n_microbatches=cfg["microbatches"], loss_fn=loss_fn)
    opt = build_optimizer(cfg["optimizer"], stage_mod.parameters())

    wait, warmup, active = cfg["wait"], cfg["warmup"], cfg["active"]
    n_steps = wait + warmup + active
    g = torch.Generator().manual_seed(seed)  # same batch stream on every rank (first/last use it)
    data = [(torch.randn(cfg["batch"], cfg["in_dim"], generator=g), torch.randn(cfg["batch"], cfg["out_dim"], generator=g))
            for _ in range(n_steps)]

    prof = make_profiler(rank, wait, warmup, active)
    with prof:
        for step in range(n_steps):
            log.begin(step)
            pending["on"] = True
            x, y = data[step]
            with ann(names.get("schedule")), log.timed("schedule_ms"):
                if rank == 0:
                    sched.step(x)
                elif rank == world - 1:
                    sched.step(target=y)
                else:
                    sched.step()
            with ann(names.get("optimizer")), log.timed("optimizer_ms"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            c = log.cur
            c["compute_ms"] = round(c.get("fwd_compute_ms", 0) + c.get("bwd_compute_ms", 0) + c.get("loss_compute_ms", 0), 3)
            c["idle_in_schedule_ms"] = round(c["schedule_ms"] - c["compute_ms"], 3)
            c["bubble_share"] = round(c["idle_in_schedule_ms"] / c["schedule_ms"], 4)
            log.end()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()
    extra = {"stage": rank, "layers": n_layers, "param_bytes": n_params_bytes(stage_mod)}
    return {"steps": log.steps[wait + warmup:], "unprofiled_steps": log.steps[: wait + warmup], "extra": extra}


# --------------------------------------------------------------------------------------
# hangs: explicit all_reduce loop where one rank breaks the collective sequence
# --------------------------------------------------------------------------------------

def dump_fr(rank, tag, extra):
    """Flight Recorder: gloo does not dump by itself, so ask for the dump explicitly and
    write the bytes as they come (a pickle, as PyTorch writes it)."""
    import torch._C._distributed_c10d as c10d

    out = {}
    try:
        b = c10d._dump_fr_trace(includeCollectives=True, includeStackTraces=True, onlyActive=False)
        with open(f"fr_rank{rank}.pkl", "wb") as f:
            f.write(b)
        out["pickle_bytes"] = len(b)
    except Exception as e:  # noqa: BLE001
        out["pickle_error"] = repr(e)
    try:
        j = c10d._dump_fr_trace_json(includeCollectives=True, onlyActive=False)
        with open(f"fr_rank{rank}.json", "wb") as f:
            f.write(j if isinstance(j, bytes) else j.encode())
        out["json_bytes"] = len(j)
    except Exception as e:  # noqa: BLE001
        out["json_error"] = repr(e)
    out["when"] = tag
    extra.setdefault("fr_dumps", []).append(out)


def run_hang(ctx):
    cfg, rank, world = ctx["cfg"], ctx["rank"], ctx["world"]
    seed = cfg["seed"]
    init_dist(ctx, timeout_s=cfg["timeout_s"])
    inj = cfg["inject"]
    bad = rank in inj["ranks"]
    torch.manual_seed(seed)
    model = build_mlp(cfg)
    opt = build_optimizer(cfg["optimizer"], model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    params = list(model.parameters())
    n_steps = cfg["steps"]
    g = torch.Generator().manual_seed(seed + rank)
    data = [(torch.randn(cfg["batch"], cfg["in_dim"], generator=g), torch.randint(cfg["classes"], (cfg["batch"],), generator=g))
            for _ in range(n_steps)]

    log = StepLog()
    colls = []  # every collective this rank issued, in order
    extra = {"param_count": sum(p.numel() for p in params)}

    # The loss all_reduce goes to its own process group where the scenario says so (a
    # "metrics" group, as some trainers use): then a rank that skips it deadlocks the others
    # instead of handing gloo a mismatched message (which makes gloo abort the process).
    metrics_pg = dist.new_group(backend="gloo", timeout=timedelta(seconds=cfg["timeout_s"])) if cfg.get("metrics_pg") else None
    seq_per_pg = Counter()

    def all_reduce(name, t, step, group=None):
        pg = "metrics" if group is not None else "default"
        seq_per_pg[pg] += 1
        rec = {"seq": len(colls) + 1, "pg": pg, "pg_seq": seq_per_pg[pg], "step": step, "name": name,
               "shape": list(t.shape), "start_unix_ns": time.time_ns(), "status": "issued"}
        colls.append(rec)
        t0 = time.perf_counter()
        try:
            dist.all_reduce(t, group=group)
            rec["status"] = "completed"
        except Exception as e:
            rec["status"] = "error"
            rec["error"] = str(e).splitlines()[0][:300]
            raise
        finally:
            rec["ms"] = ms(t0, time.perf_counter())
            log.add(f"{name}_ms", rec["ms"])

    # Profile every step (no wait/warmup) so the trace ends at the failure.
    prof = make_profiler(rank, 0, 0, n_steps)
    prof.start()
    outcome = {"exited_loop_at_step": None, "exception": None}
    try:
        for step in range(n_steps):
            if inj["kind"] == "early_exit" and bad and step == inj["step"]:
                # INJECTION (early_exit): this rank leaves the loop before step `step`
                # (a `break` on a rank-local condition), exports its trace and exits.
                outcome["exited_loop_at_step"] = step
                break  # (after the trace is exported below, it lingers without collectives)
            log.begin(step)
            x, y = data[step]
            with record_function("forward"), log.timed("forward_ms"):
                loss = loss_fn(model(x), y)
            with record_function("backward"), log.timed("backward_ms"):
                loss.backward()
            with record_function("grad_allreduce"):
                flat = torch.cat([p.grad.reshape(-1) for p in params])
                if inj["kind"] == "shape" and bad and step == inj["step"]:
                    # INJECTION (mismatch_shapes): this rank all_reduces a tensor with one
                    # element fewer (e.g. a parameter was left out of the flat buffer).
                    flat = flat[:-inj["drop_elems"]].clone()
                all_reduce("grad_allreduce", flat, step)
                if flat.numel() == extra["param_count"]:
                    off = 0
                    for p in params:
                        n = p.numel()
                        p.grad.copy_(flat[off:off + n].view_as(p.grad)).div_(world)
                        off += n
            with record_function("optimizer"), log.timed("optimizer_ms"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            with record_function("loss_allreduce"):
                lv = loss.detach().reshape(1).clone()
                if inj["kind"] == "skip" and bad and step == inj["step"]:
                    # INJECTION (hang_skipped_allreduce): this rank skips the scalar
                    # all_reduce in this step (e.g. `if not is_nan: all_reduce(loss)`).
                    log.cur["skipped_loss_allreduce"] = True
                else:
                    all_reduce("loss_allreduce", lv, step, group=metrics_pg)
            log.end()
            prof.step()
    except Exception as e:  # the waiters' timeout (or gloo's own error) lands here
        outcome["exception"] = {"type": type(e).__name__, "message": str(e).splitlines()[0][:400],
                                "unix_ns": time.time_ns()}
        if log.cur is not None:
            log.cur["failed"] = True
            log.end()
        dump_fr(rank, "on_exception", extra)
    finally:
        t0 = time.perf_counter()
        prof.stop()  # exports the trace through on_trace_ready, ending at the failure
        extra["trace_export_ms"] = ms(t0, time.perf_counter())
    if not extra.get("fr_dumps"):
        dump_fr(rank, "at_end", extra)
    if outcome["exited_loop_at_step"] is not None and cfg.get("linger_s"):
        # early_exit: the rank is done with training and does something without collectives
        # (evaluation, checkpointing) for longer than the timeout, then exits; the others block
        # in their next all_reduce until the process group timeout.
        time.sleep(cfg["linger_s"])
    extra["outcome"] = outcome
    extra["collectives"] = colls
    extra["fr_temp_files"] = sorted(f for f in os.listdir(".") if f.startswith("fr_rank") and not f.endswith((".pkl", ".json")))
    # No destroy_process_group: after a timeout gloo's PG is unusable; the process just exits.
    return {"steps": log.steps, "unprofiled_steps": [], "extra": extra}


# --------------------------------------------------------------------------------------

RUNNERS = {"dp": run_dp, "pipeline": run_pipeline, "hang": run_hang}


def worker_main(cfg_path, rank, runners=None):
    """Runs one rank of the scenario in `cfg_path` with `runners` (default: this file's)."""
    with open(cfg_path) as f:
        spec = json.load(f)
    ctx = {"cfg": spec["cfg"], "rank": rank, "world": spec["world_size"]}
    result = {"rank": rank, "ok": False}
    try:
        result.update((runners or RUNNERS)[spec["kind"]](ctx))
        result["ok"] = True
    except Exception:  # noqa: BLE001
        result["error"] = traceback.format_exc()
        print(result["error"], file=sys.stderr)
    with open(f"measured_rank{rank}.json", "w") as f:
        json.dump(result, f)
    sys.stdout.flush()
    sys.stderr.flush()
    # Hang scenarios leave gloo threads blocked: leave without running their destructors.
    os._exit(0 if result["ok"] else 1)
