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


class SmallCNN(nn.Module):
    """A small convolutional net on (batch, 3, size, size) images (second blind check)."""

    def __init__(self, cfg):
        super().__init__()
        c = cfg["channels"]
        self.features = nn.Sequential(
            nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c, 2 * c, 3, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(2 * c, 2 * c, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(2 * c * 16, cfg["width"]), nn.ReLU(),
                                  nn.Linear(cfg["width"], cfg["classes"]))

    def forward(self, x):
        return self.head(self.features(x))


class EmbBagNet(nn.Module):
    """An EmbeddingBag (sum of `bag` ids per row) beside dense features, then an MLP; `aux` is a
    head that forward never uses (what makes DDP need find_unused_parameters=True)."""

    def __init__(self, cfg):
        super().__init__()
        self.emb = nn.EmbeddingBag(cfg["num_embeddings"], cfg["emb_dim"], mode="sum")
        self.inp = nn.Linear(cfg["in_dim"] + cfg["emb_dim"], cfg["width"])
        self.blocks = nn.Sequential(*[zw.mlp_block(cfg["width"]) for _ in range(cfg["depth"])])
        self.head = nn.Linear(cfg["width"], cfg["classes"])
        self.aux = nn.Linear(cfg["width"], cfg["classes"])  # unused in forward

    def forward(self, dense, ids):
        return self.head(self.blocks(self.inp(torch.cat([dense, self.emb(ids)], dim=1))))


class Checkpointed(nn.Module):
    """Activation checkpointing of one block: forward runs it without keeping activations,
    backward runs its forward again (torch.utils.checkpoint, non-reentrant)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint
        return checkpoint(self.inner, x, use_reentrant=False)


def build_model(cfg):
    if cfg.get("model") == "transformer":
        return TinyTransformer(cfg)
    if cfg.get("model") == "cnn":
        return SmallCNN(cfg)
    if cfg.get("model") == "embbag":
        m = EmbBagNet(cfg)
        if cfg.get("checkpoint"):
            m.blocks = nn.Sequential(*[Checkpointed(b) for b in m.blocks])
        return m
    return zw.build_model(cfg)


def build_optimizer(name, params):
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=1e-4)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=1e-3)
    return zw.build_optimizer(name, params)


def injections(cfg, rank):
    return [i for i in cfg.get("inject", []) if rank in i["ranks"]]


def log_metrics(m, out, loss, y, world, log):
    """What a training script does with its metrics after backward, every step (second blind
    check). m["mode"]: "allreduce" = m["n"] scalar metrics, each a blocking dist.all_reduce of
    the 0-dim tensor then .item(); "item" = loss.item() only (no collective); "barrier" =
    dist.barrier(). Inside record_function(m["annotation"]) when given."""
    with ann(m.get("annotation")):
        if m["mode"] == "item":
            t0 = time.perf_counter()
            value = loss.detach().item()  # host read of a CPU tensor, no collective
            log.add("metric_item_ms", ms(t0, time.perf_counter()))
            log.add("metric_allreduce_ms", 0.0)
            log.cur["logged_loss"] = round(value, 6)
        elif m["mode"] == "barrier":
            t0 = time.perf_counter()
            dist.barrier()  # INJECTION: a barrier every step
            log.add("barrier_ms", ms(t0, time.perf_counter()))
        else:
            od = out.detach()
            base = [loss.detach(), (od.argmax(1) == y).float().mean(), od.mean(), od.std()]
            for k in range(m["n"]):
                t0 = time.perf_counter()
                v = (base[k % len(base)] * (1 + k)).clone()
                dist.all_reduce(v)  # INJECTION: one blocking scalar all_reduce per metric
                t1 = time.perf_counter()
                value = v.item() / world
                log.add("metric_allreduce_ms", ms(t0, t1))
                log.add("metric_item_ms", ms(t1, time.perf_counter()))
            log.cur["logged_last"] = round(value, 6)


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

        net = DDP(model, bucket_cap_mb=cfg.get("bucket_cap_mb", 25),
                  find_unused_parameters=cfg.get("find_unused", False))
    opt = build_optimizer(cfg["optimizer"], net.parameters())
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
        elif cfg.get("model") == "cnn":
            shape = (batch, 3, cfg["image"], cfg["image"])
        else:
            shape = (batch, cfg["in_dim"])

        def make_x():
            x = torch.randn(*shape, generator=g)
            if cfg.get("model") == "embbag":
                return (x, torch.randint(cfg["num_embeddings"], (batch, cfg["bag"]), generator=g))
            return x
        data = [(make_x(), torch.randint(cfg["classes"], (batch,), generator=g)) for _ in range(n_batches)]
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
                            out = net(*x) if isinstance(x, tuple) else net(x)
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
                if cfg.get("metrics"):
                    log_metrics(cfg["metrics"], out, loss, y, world, log)
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
    if cfg.get("measure_alpha"):
        # After training, outside the profiler: blocking all_reduces of 1 element and of one
        # bucket's size, 12 each after a barrier (the median): the fixed cost per call and the
        # cost of one bucket on this machine, measured apart from the trace.
        bench = {}
        for label, n in (("one_elem", 1), ("bucket", int(cfg["bucket_cap_mb"] * 2**20 / 4))):
            t = torch.zeros(n)
            times = []
            for _ in range(12):
                dist.barrier()
                t0 = time.perf_counter()
                dist.all_reduce(t)
                times.append(ms(t0, time.perf_counter()))
            bench[label + "_ms"] = sorted(times)[len(times) // 2]
            bench[label + "_bytes"] = n * 4
        extra["allreduce_bench"] = bench
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


def run_hang_ops(ctx):
    """Second blind check: per step the flat gradient all_reduce on the default group, then a
    second collective cfg["stat_op"]: "all_gather" (each rank's [loss, batch] on the default
    group), "broadcast" (rank 0's [4] learning-rate state on the default group) or "metrics_allreduce"
    (the [1] loss on a second "metrics" group). Injections (cfg["inject"], rank(s) and step):
    "shape" (the stat op with one element more: all_gather/broadcast of [3] / [5]),
    "wrong_group" (the metrics all_reduce on the default group instead), "early_exit" (leave the
    loop before `step`, linger without collectives)."""
    from collections import Counter
    from datetime import timedelta

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
    metrics_pg = (dist.new_group(backend="gloo", timeout=timedelta(seconds=cfg["timeout_s"]))
                  if cfg["stat_op"] == "metrics_allreduce" else None)
    log = StepLog()
    colls = []
    seq_per_pg = Counter()
    extra = {"param_count": sum(p.numel() for p in params)}

    def issue(name, op, t, step, group=None, pg="default", **kw):
        seq_per_pg[pg] += 1
        rec = {"seq": len(colls) + 1, "pg": pg, "pg_seq": seq_per_pg[pg], "step": step, "name": name, "op": op,
               "shape": list(t.shape), "start_unix_ns": time.time_ns(), "status": "issued"}
        colls.append(rec)
        t0 = time.perf_counter()
        try:
            if op == "all_reduce":
                dist.all_reduce(t, group=group)
            elif op == "all_gather":
                outs = [torch.empty_like(t) for _ in range(world)]
                dist.all_gather(outs, t, group=group)
            elif op == "broadcast":
                dist.broadcast(t, src=0, group=group)
            rec["status"] = "completed"
        except Exception as e:
            rec["status"] = "error"
            rec["error"] = str(e).splitlines()[0][:300]
            raise
        finally:
            rec["ms"] = ms(t0, time.perf_counter())
            log.add(f"{name}_ms", rec["ms"])

    prof = make_profiler(rank, 0, 0, n_steps)
    prof.start()
    outcome = {"exited_loop_at_step": None, "exception": None}
    try:
        for step in range(n_steps):
            here = bad and step == inj["step"]
            if inj["kind"] == "early_exit" and here:
                # INJECTION: this rank leaves the loop before this step (a rank-local `break`).
                outcome["exited_loop_at_step"] = step
                break
            log.begin(step)
            x, y = data[step]
            with record_function("forward"), log.timed("forward_ms"):
                loss = loss_fn(model(x), y)
            with record_function("backward"), log.timed("backward_ms"):
                loss.backward()
            with record_function("grad_allreduce"):
                flat = torch.cat([p.grad.reshape(-1) for p in params])
                issue("grad_allreduce", "all_reduce", flat, step)
                off = 0
                for p in params:
                    n = p.numel()
                    p.grad.copy_(flat[off:off + n].view_as(p.grad)).div_(world)
                    off += n
            with record_function("optimizer"), log.timed("optimizer_ms"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            with record_function("stats"):
                op = cfg["stat_op"]
                if op == "all_gather":
                    t = torch.tensor([loss.item(), float(cfg["batch"])] + ([0.0] if inj["kind"] == "shape" and here else []))
                    # INJECTION (shape): one element more on this rank in this step.
                    issue("stats_allgather", "all_gather", t, step)
                elif op == "broadcast":
                    t = torch.zeros(5 if inj["kind"] == "shape" and here else 4)
                    # INJECTION (shape): this rank receives into a [5] buffer, rank 0 sends [4].
                    issue("lr_broadcast", "broadcast", t, step)
                else:
                    lv = loss.detach().reshape(1).clone()
                    if inj["kind"] == "wrong_group" and here:
                        # INJECTION: this rank all_reduces its loss on the default group instead
                        # of the metrics group (a helper that forgot `group=`).
                        issue("loss_allreduce", "all_reduce", lv, step)
                    else:
                        issue("loss_allreduce", "all_reduce", lv, step, group=metrics_pg, pg="metrics")
            log.end()
            prof.step()
    except Exception as e:
        outcome["exception"] = {"type": type(e).__name__, "message": str(e).splitlines()[0][:400], "unix_ns": time.time_ns()}
        if log.cur is not None:
            log.cur["failed"] = True
            log.end()
        zw.dump_fr(rank, "on_exception", extra)
    finally:
        prof.stop()
    if not extra.get("fr_dumps"):
        zw.dump_fr(rank, "at_end", extra)
    if outcome["exited_loop_at_step"] is not None and cfg.get("linger_s"):
        time.sleep(cfg["linger_s"])
    extra["outcome"] = outcome
    extra["collectives"] = colls
    return {"steps": log.steps, "unprofiled_steps": [], "extra": extra}


RUNNERS = {"dp": run_dp, "pipeline": zw.run_pipeline, "hang": run_hang, "hang_ops": run_hang_ops}


def worker_main(cfg_path, rank):
    zw.worker_main(cfg_path, rank, RUNNERS)
