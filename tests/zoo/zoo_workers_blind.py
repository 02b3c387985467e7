"""Rank code for make_zoo_blind.py (variants of the zoo's problems, from the blind check).

Reuses zoo_workers.py's helpers (profiler, StepLog, models, dataset, pipeline loop, FR dump)
and adds: several injections per run, injections outside any annotation or inside the
optimizer, DataLoader workers, gradient accumulation (DDP no_sync), a transformer model, FSDP
with a straggler, and a hang where one rank skips a collective of the default group.
"""

import contextlib
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.profiler import record_function

import zoo_workers as zw
from zoo_workers import StepLog, ann, init_dist, make_profiler, ms


class TinyTransformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.inp = nn.Linear(cfg["in_dim"], d)
        layer = nn.TransformerEncoderLayer(d, cfg["heads"], cfg["ff"], dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, cfg["layers"], enable_nested_tensor=False)
        self.head = nn.Linear(d, cfg["classes"])

    def forward(self, x):  # (batch, tokens, in_dim)
        return self.head(self.enc(self.inp(x)).mean(dim=1))


def build_model(cfg):
    if cfg.get("model") == "transformer":
        return TinyTransformer(cfg)
    return zw.build_model(cfg)


def injections(cfg, rank):
    return [i for i in cfg.get("inject", []) if rank in i["ranks"]]


def run_dp(ctx):
    cfg, rank, world = ctx["cfg"], ctx["rank"], ctx["world"]
    seed = cfg["seed"]
    init_dist(ctx)
    names = cfg["annotations"]
    mine = injections(cfg, rank)
    kinds = {i["kind"]: i for i in mine}

    torch.manual_seed(seed)
    model = build_model(cfg)
    extra = {"param_bytes": zw.n_params_bytes(model)}
    torch.manual_seed(seed + rank)
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
    opt = zw.build_optimizer(cfg["optimizer"], net.parameters())
    loss_fn = nn.CrossEntropyLoss()

    batch = cfg["batch"]
    if "batch_multiplier" in kinds:
        batch = int(batch * kinds["batch_multiplier"]["factor"])  # INJECTION: more work
    extra["batch"] = batch
    accum = cfg.get("accum", 1)
    wait, warmup, active = cfg["wait"], cfg["warmup"], cfg["active"]
    n_steps = wait + warmup + active
    n_batches = n_steps * accum

    dataset = None
    if cfg.get("dataloader"):
        per_item = cfg["item_sleep_ms"] / 1e3
        if "slow_getitem" in kinds:
            per_item *= kinds["slow_getitem"]["factor"]  # INJECTION: slower input on this rank
        extra["item_sleep_ms"] = per_item * 1e3
        dataset = zw.ItemDataset(batch * n_batches, cfg["in_dim"], cfg["classes"], per_item, seed + rank)
        nw = cfg.get("num_workers", 0)
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch, num_workers=nw, shuffle=False,
                                             drop_last=True, persistent_workers=nw > 0,
                                             prefetch_factor=(cfg.get("prefetch_factor", 2) if nw > 0 else None))
        it = iter(loader)
        next_batch = lambda i: next(it)  # noqa: E731
    else:
        g = torch.Generator().manual_seed(seed + rank)
        if cfg.get("model") == "tower" or cfg.get("model") == "transformer":
            shape = (batch, cfg["tokens"], cfg["in_dim"])
        else:
            shape = (batch, cfg["in_dim"])
        data = [(torch.randn(*shape, generator=g), torch.randint(cfg["classes"], (batch,), generator=g))
                for _ in range(n_batches)]
        next_batch = lambda i: data[i]  # noqa: E731

    grad_ready = {"t": None}
    if not cfg.get("fsdp"):
        def _hook(_p):
            grad_ready["t"] = time.perf_counter()
        for p in net.parameters():
            p.register_post_accumulate_grad_hook(_hook)

    log = StepLog()

    def sleep_ms(amount, key="injected_sleep_ms"):
        t0 = time.perf_counter()
        time.sleep(amount / 1e3)
        if log.cur is not None:
            log.add(key, ms(t0, time.perf_counter()))

    if "sleep_mid_forward" in kinds:
        # INJECTION: a sleep from a forward hook on the middle block, no annotation of its own.
        blocks = [m for m in model.modules() if isinstance(m, (nn.Sequential, nn.TransformerEncoderLayer))]
        blocks = [b for b in blocks if b is not model]
        mid = blocks[len(blocks) // 2]
        amt = kinds["sleep_mid_forward"]["amount_ms"]
        mid.register_forward_hook(lambda _m, _i, _o: sleep_ms(amt))

    if "sleep_in_backward_hook" in kinds:
        # INJECTION: a sleep from a full backward hook on the middle block (runs inside the
        # autograd engine's node for it), no annotation of its own.
        blocks = [m for m in model.modules() if isinstance(m, nn.Sequential) and m is not model]
        mid = blocks[len(blocks) // 2]
        amt_b = kinds["sleep_in_backward_hook"]["amount_ms"]
        mid.register_full_backward_hook(lambda _m, _gi, _go: sleep_ms(amt_b))

    prof = make_profiler(rank, wait, warmup, active)
    bi = 0
    with prof:
        for step in range(n_steps):
            log.begin(step)
            with ann(names.get("step")):
                for micro in range(accum):
                    last_micro = micro == accum - 1
                    slept0 = dataset.slept_ms if dataset else 0.0
                    with log.timed("data_ms"):
                        x, y = next_batch(bi)
                    bi += 1
                    if dataset:
                        log.add("dataset_sleep_ms", dataset.slept_ms - slept0)
                    sync_ctx = contextlib.nullcontext() if (last_micro or cfg.get("fsdp")) else net.no_sync()
                    with sync_ctx, ann(names.get("micro")):
                        with ann(names.get("forward")), log.timed("forward_ms"):
                            out = net(x)
                            if "sleep_in_forward" in kinds and (step % kinds["sleep_in_forward"].get("every", 1) == 0):
                                i = kinds["sleep_in_forward"]
                                # INJECTION: an annotated host stall inside forward.
                                with record_function(i["where"]):
                                    sleep_ms(i["amount_ms"] / accum)
                            loss = loss_fn(out, y) / accum
                        if last_micro:
                            log.cur["backward_start_unix_ns"] = time.time_ns()
                        grad_ready["t"] = None
                        with ann(names.get("backward")):
                            t0 = time.perf_counter()
                            loss.backward()
                            t1 = time.perf_counter()
                        log.add("backward_ms", ms(t0, t1))
                    if last_micro and grad_ready["t"] is not None:
                        log.add("bwd_tail_ms", ms(grad_ready["t"], t1))
                        log.cur["last_grad_ready_unix_ns"] = log.cur["start_unix_ns"] + int((grad_ready["t"] - log._t0) * 1e9)
                with ann(names.get("optimizer")), log.timed("optimizer_ms"):
                    opt.step()
                    if "sleep_in_optimizer" in kinds:
                        # INJECTION: a host stall inside the optimizer annotation (e.g. a blocking
                        # metrics write), no record_function of its own.
                        sleep_ms(kinds["sleep_in_optimizer"]["amount_ms"])
                    opt.zero_grad(set_to_none=True)
            if "sleep_outside" in kinds:
                # INJECTION: a host stall outside any annotation, at the end of the step
                # (e.g. a synchronous checkpoint write on one rank).
                sleep_ms(kinds["sleep_outside"]["amount_ms"])
            log.end()
            prof.step()
    if not cfg.get("fsdp"):
        extra["ddp_logging"] = {k: v for k, v in net._get_ddp_logging_data().items() if "bucket" in k}
    dist.barrier()
    dist.destroy_process_group()
    return {"steps": log.steps[wait + warmup:], "unprofiled_steps": log.steps[: wait + warmup], "extra": extra}


def run_hang(ctx):
    """One gradient all_reduce per step on the default group; the injected rank skips it in
    step `step`. Its later all_reduces pair with the others' previous ones (same size, so gloo
    does not notice), and the others' last all_reduce has no partner: they block until the
    timeout while the skipping rank, done with its loop, lingers without collectives."""
    cfg, rank, world = ctx["cfg"], ctx["rank"], ctx["world"]
    seed = cfg["seed"]
    init_dist(ctx, timeout_s=cfg["timeout_s"])
    inj = cfg["inject"]
    bad = rank in inj["ranks"]
    torch.manual_seed(seed)
    model = zw.build_mlp(cfg)
    opt = zw.build_optimizer(cfg["optimizer"], model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    params = list(model.parameters())
    n_steps = cfg["steps"]
    g = torch.Generator().manual_seed(seed + rank)
    data = [(torch.randn(cfg["batch"], cfg["in_dim"], generator=g), torch.randint(cfg["classes"], (cfg["batch"],), generator=g))
            for _ in range(n_steps)]
    log = StepLog()
    colls = []
    extra = {"param_count": sum(p.numel() for p in params)}
    prof = make_profiler(rank, 0, 0, n_steps)
    prof.start()
    outcome = {"exception": None}
    try:
        for step in range(n_steps):
            log.begin(step)
            x, y = data[step]
            with record_function("forward"), log.timed("forward_ms"):
                loss = loss_fn(model(x), y)
            with record_function("backward"), log.timed("backward_ms"):
                loss.backward()
            with record_function("grad_allreduce"):
                flat = torch.cat([p.grad.reshape(-1) for p in params])
                if bad and step == inj["step"]:
                    # INJECTION: this rank skips the gradient all_reduce in this step
                    # (e.g. `if not found_inf: all_reduce(grads)` on a rank-local flag).
                    log.cur["skipped_grad_allreduce"] = True
                else:
                    rec = {"seq": len(colls) + 1, "pg": "default", "pg_seq": len(colls) + 1, "step": step,
                           "name": "grad_allreduce", "shape": list(flat.shape), "status": "issued"}
                    colls.append(rec)
                    t0 = time.perf_counter()
                    try:
                        dist.all_reduce(flat)
                        rec["status"] = "completed"
                    except Exception as e:
                        rec["status"] = "error"
                        rec["error"] = str(e).splitlines()[0][:300]
                        raise
                    finally:
                        rec["ms"] = ms(t0, time.perf_counter())
                        log.add("grad_allreduce_ms", rec["ms"])
            with record_function("optimizer"), log.timed("optimizer_ms"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            log.end()
            prof.step()
    except Exception as e:
        outcome["exception"] = {"type": type(e).__name__, "message": str(e).splitlines()[0][:400]}
        if log.cur is not None:
            log.cur["failed"] = True
            log.end()
        zw.dump_fr(rank, "on_exception", extra)
    finally:
        prof.stop()
    if not extra.get("fr_dumps"):
        zw.dump_fr(rank, "at_end", extra)
    if bad and cfg.get("linger_s"):
        time.sleep(cfg["linger_s"])
    extra["outcome"] = outcome
    extra["collectives"] = colls
    return {"steps": log.steps, "unprofiled_steps": [], "extra": extra}


RUNNERS = {"dp": run_dp, "pipeline": zw.run_pipeline, "hang": run_hang}


def worker_main(cfg_path, rank):
    zw.worker_main(cfg_path, rank, RUNNERS)
