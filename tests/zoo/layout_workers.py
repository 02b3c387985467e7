"""Per-rank code for the hybrid-parallel scenarios of the zoo (issue 33), spawned by
``make_zoo_layout.py`` (never by CI: CI has no torch).

Every rank runs one of four loops, each with its own process groups:

* ``run_megatron``  Megatron-style tensor parallel (column/row-parallel linear layers with the
                    f/g operators as custom autograd Functions) x data parallel (one flat gradient
                    all_reduce on the data group), optionally x a hand-written GPipe pipeline of
                    two stages (isend/irecv of activations and gradients per micro-batch);
* ``run_hsdp``      FSDP2 ``fully_shard`` on a 2-D DeviceMesh ("replicate", "shard"), fed by a
                    DataLoader;
* ``run_moe``       an expert-parallel MoE layer: one expert per rank, a seeded skewed router,
                    dispatch/combine with ``all_to_all_single`` of uneven splits (split sizes
                    exchanged first), then a gradient all_reduce of the shared weights;
* ``run_ring``      context-parallel ring attention: K/V blocks passed round the ring with
                    ``batch_isend_irecv`` in forward (and the dK/dV accumulators in backward),
                    then a gradient all_reduce on the world.

Ground truth, independent of the profiler: every collective and point-to-point call the rank
issues (its own and FSDP's) goes through ``CommLog`` (the ``torch.distributed`` functions are
wrapped), which writes its group, the group's own call number, kind, shape and the
``time.time_ns()`` at entry and exit (same clock on every rank of this host), plus the
``perf_counter()`` time spent inside per role. ``make_zoo_layout.py`` puts the ranks' logs side
by side to get, for every collective instance, the last rank to arrive and every other member's
wait for it.
"""

import contextlib
import json
import os
import sys
import threading
import time
from collections import Counter

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import record_function

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_workers as zw  # noqa: E402  StepLog, make_profiler, init_dist, ms, worker_main

ms = zw.ms


# --------------------------------------------------------------------------------------
# the communication log: every call with its group, per-group number and timestamps
# --------------------------------------------------------------------------------------

def shape_of(t):
    return list(t.shape) if isinstance(t, torch.Tensor) else None


def group_name(group):
    if group is None:
        group = dist.distributed_c10d._get_default_group()
    return group.group_name


class CommLog:
    """Every collective / p2p call of this rank: `calls` (dicts, in issue order) and, while a
    step is being logged, per role `{role}_comm_ms` / `{role}_calls` in the StepLog."""

    WRAPPED = ("all_reduce", "all_gather_single", "all_gather_into_tensor", "reduce_scatter_single",
               "reduce_scatter_tensor", "all_to_all_single", "broadcast", "barrier", "send", "recv")

    def __init__(self, rank, log):
        self.rank, self.log = rank, log
        self.roles = {}  # pg name -> role
        self.calls = []
        self.seq = Counter()  # per pg name: collective number (1-based; p2p not counted, see pair_seq)
        self.p2p_seq = Counter()  # per (pg name, src, dst)
        self.tls = threading.local()

    def role(self, pg):
        return self.roles.get(pg, "world" if pg == group_name(None) else "?")

    def _account(self, role, dur_ms, key="comm"):
        if self.log.cur is not None:
            self.log.add(f"{role}_{key}_ms", dur_ms)
            k = f"{role}_calls"
            if key == "comm":
                self.log.cur[k] = self.log.cur.get(k, 0) + 1

    def record(self, kind, pg, fn, shape=None, **info):
        """Run `fn()` (a blocking call, or the enqueue of an async one) and log it."""
        if getattr(self.tls, "busy", False):  # a wrapped function calling another: log once
            return fn(), None
        self.tls.busy = True
        try:
            rec = {"step": self.log.cur["step"] if self.log.cur else None, "pg": pg, "role": self.role(pg),
                   "kind": kind, "shape": shape, **info}
            if kind not in ("isend", "irecv", "batch_isend_irecv", "send", "recv"):
                self.seq[pg] += 1  # collectives only: the n-th collective of this group
                rec["seq"] = self.seq[pg]
            t_ns, t0 = time.time_ns(), time.perf_counter()
            out = fn()
            t1 = time.perf_counter()
            rec["enter_ns"], rec["exit_ns"], rec["ms"] = t_ns, t_ns + int((t1 - t0) * 1e9), ms(t0, t1)
            self.calls.append(rec)
            self._account(rec["role"], rec["ms"])
            return out, rec
        finally:
            self.tls.busy = False

    def install(self):
        """Wrap the blocking collectives of torch.distributed (FSDP2 calls them as dist.X)."""
        for name in self.WRAPPED:
            orig = getattr(dist, name)

            def wrapper(*a, _orig=orig, _name=name, **k):
                if getattr(self.tls, "busy", False) or self.log.cur is None:
                    return _orig(*a, **k)
                group = k.get("group")
                if group is None:
                    # positional group: all_reduce(t, op, group), broadcast(t, src, group),
                    # all_gather_single(out, in, group), reduce_scatter_single(out, in, op, group)
                    pos = {"all_reduce": 2, "broadcast": 2, "all_gather_single": 2, "all_gather_into_tensor": 2,
                           "reduce_scatter_single": 3, "reduce_scatter_tensor": 3, "all_to_all_single": 4,
                           "send": 2, "recv": 2, "barrier": 0}[_name]
                    if len(a) > pos:
                        group = a[pos]
                t = k.get("tensor") if "tensor" in k else (k.get("input") if "input" in k else None)
                if t is None and a:
                    t = a[1] if _name in ("all_gather_single", "all_gather_into_tensor", "reduce_scatter_single",
                                          "reduce_scatter_tensor", "all_to_all_single") and len(a) > 1 else a[0]
                info = {"async": bool(k.get("async_op", False))}
                if _name in ("send", "recv"):
                    peer = k.get("dst", k.get("src", a[1] if len(a) > 1 else None))
                    src, dst = (self.rank, peer) if _name == "send" else (peer, self.rank)
                    pgn = group_name(group)
                    self.p2p_seq[(pgn, src, dst)] += 1
                    info.update(src=src, dst=dst, pair_seq=self.p2p_seq[(pgn, src, dst)])
                out, _ = self.record(_name, group_name(group), lambda: _orig(*a, **k), shape_of(t), **info)
                return out

            setattr(dist, name, wrapper)

    # point-to-point (explicit, so that P2POp keeps the library's own isend/irecv)
    def isend(self, t, dst, group):
        pg = group_name(group)
        self.p2p_seq[(pg, self.rank, dst)] += 1
        w, rec = self.record("isend", pg, lambda: dist.isend(t, dst=dst, group=group), shape_of(t), src=self.rank, dst=dst,
                             pair_seq=self.p2p_seq[(pg, self.rank, dst)], **{"async": True})
        return w, rec

    def irecv(self, t, src, group):
        pg = group_name(group)
        self.p2p_seq[(pg, src, self.rank)] += 1
        w, rec = self.record("irecv", pg, lambda: dist.irecv(t, src=src, group=group), shape_of(t), src=src, dst=self.rank,
                             pair_seq=self.p2p_seq[(pg, src, self.rank)], **{"async": True})
        return w, rec

    def batch_isend_irecv(self, ops, group):
        """ops: [("isend"|"irecv", tensor, peer)]; one logged call with one entry per op."""
        pg = group_name(group)
        p2p = []
        entries = []
        for kind, t, peer in ops:
            src, dst = (self.rank, peer) if kind == "isend" else (peer, self.rank)
            self.p2p_seq[(pg, src, dst)] += 1
            entries.append({"op": kind, "src": src, "dst": dst, "shape": shape_of(t), "pair_seq": self.p2p_seq[(pg, src, dst)]})
            p2p.append(dist.P2POp(dist.distributed_c10d.isend if kind == "isend" else dist.distributed_c10d.irecv, t, peer, group))
        works, rec = self.record("batch_isend_irecv", pg, lambda: dist.batch_isend_irecv(p2p), None, ops=entries, **{"async": True})
        return works, rec

    def wait(self, works, recs):
        """Wait for async p2p work; the time waited goes to the calls' records (`wait_ms`,
        `done_ns`) and to `{role}_wait_p2p_ms`."""
        works = works if isinstance(works, (list, tuple)) else [works]
        t0, start_ns = time.perf_counter(), time.time_ns()
        for w in works:
            w.wait()
        t1 = time.perf_counter()
        done = time.time_ns()
        for rec in (recs if isinstance(recs, (list, tuple)) else [recs]):
            rec["wait_ms"] = round(rec.get("wait_ms", 0.0) + ms(t0, t1), 3)
            rec["done_ns"] = done
            rec["wait_start_ns"] = start_ns
        role = (recs[0] if isinstance(recs, (list, tuple)) else recs)["role"]
        self._account(role, ms(t0, t1), key="p2p_wait")


def make_groups(specs, desc_on):
    """specs: [(role, ranks, desc)] in creation order; every rank calls new_group for every
    group (torch requires it). Returns ({role: pg} for the groups this rank is in, layout)."""
    mine, layout = {}, []
    rank = dist.get_rank()
    for role, ranks, desc in specs:
        pg = dist.new_group(ranks=list(ranks), group_desc=desc if desc_on else None)
        entry = {"role": role, "ranks": list(ranks), "desc": desc if desc_on else "undefined"}
        if rank in ranks:
            entry["name"] = pg.group_name
            mine[role] = pg
        layout.append(entry)
    return mine, layout


def my_pg_config():
    """What this rank's distributed_c10d knows of its groups (the source of Kineto's pg_config)."""
    return [{k: c[k] for k in ("pg_name", "pg_desc", "ranks")} for c in dist.distributed_c10d._get_all_pg_configs()]


def finish(ctx, log, comm, extra, wait, warmup):
    extra["pg_config"] = my_pg_config()
    extra["calls"] = [c for c in comm.calls if c["step"] is not None and c["step"] >= wait + warmup]
    extra["group_roles"] = comm.roles
    dist.barrier()
    dist.destroy_process_group()
    return {"steps": log.steps[wait + warmup:], "unprofiled_steps": log.steps[: wait + warmup], "extra": extra}


@contextlib.contextmanager
def stall_region(log, name, amount_ms):
    """record_function(name) around the rank's real per-step preparation (the body) and, where
    injected, a time.sleep of `amount_ms` after it (the host stall), timed with perf_counter."""
    with record_function(name):
        t0 = time.perf_counter()
        yield
        if amount_ms:
            s0 = time.perf_counter()
            time.sleep(amount_ms / 1e3)  # INJECTION: the host stall
            log.add("injected_sleep_ms", ms(s0, time.perf_counter()))
        log.add(f"{name}_ms", ms(t0, time.perf_counter()))


# --------------------------------------------------------------------------------------
# Megatron-style tensor parallel (x pipeline) x data parallel
# --------------------------------------------------------------------------------------

_TP = {"group": None}  # like Megatron's get_tensor_model_parallel_group()


class _CopyToModelParallelRegion(torch.autograd.Function):
    """Megatron's f: identity in forward, all_reduce of the gradient over the tensor group in
    backward."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous()
        dist.all_reduce(g, group=_TP["group"])
        return g


class _ReduceFromModelParallelRegion(torch.autograd.Function):
    """Megatron's g: all_reduce of the partial outputs over the tensor group in forward,
    identity in backward."""

    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        dist.all_reduce(x, group=_TP["group"])
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class ColumnParallelLinear(nn.Module):
    """Y_i = f(X) A_i: the weight's output dimension split over the tensor group."""

    def __init__(self, full_w, full_b, tp, tp_rank):
        super().__init__()
        n = full_w.shape[0] // tp
        self.weight = nn.Parameter(full_w[tp_rank * n:(tp_rank + 1) * n].clone())
        self.bias = nn.Parameter(full_b[tp_rank * n:(tp_rank + 1) * n].clone())

    def forward(self, x):
        return F.linear(_CopyToModelParallelRegion.apply(x), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """Z = g(sum_i Y_i B_i) + b: the weight's input dimension split over the tensor group."""

    def __init__(self, full_w, full_b, tp, tp_rank):
        super().__init__()
        n = full_w.shape[1] // tp
        self.weight = nn.Parameter(full_w[:, tp_rank * n:(tp_rank + 1) * n].clone())
        self.bias = nn.Parameter(full_b.clone())

    def forward(self, y):
        return _ReduceFromModelParallelRegion.apply(F.linear(y, self.weight)) + self.bias


class ParallelMLPBlock(nn.Module):
    """x + RowParallel(gelu(ColumnParallel(LayerNorm(x)))): one f and one g per block, so one
    tensor-group all_reduce in forward (g) and one in backward (f)."""

    def __init__(self, hidden, ffn, tp, tp_rank, gen):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        w1 = torch.randn(ffn, hidden, generator=gen) * hidden ** -0.5  # the full (master) weights,
        w2 = torch.randn(hidden, ffn, generator=gen) * ffn ** -0.5     # identical on every rank
        self.fc1 = ColumnParallelLinear(w1, torch.zeros(ffn), tp, tp_rank)
        self.fc2 = RowParallelLinear(w2, torch.zeros(hidden), tp, tp_rank)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


def build_stage(cfg, tp, tp_rank, stage, n_stages):
    """Replicated input projection on the first stage, `blocks_per_stage` parallel MLP blocks,
    replicated head on the last stage. Weights from cfg['seed'] (same master weights everywhere)."""
    gen = torch.Generator().manual_seed(cfg["seed"])
    h = cfg["hidden"]
    mods = []
    for s in range(n_stages):  # draw every stage's weights in order so each stage is the same on all ranks
        part = []
        if s == 0:
            lin = nn.Linear(cfg["in_dim"], h)
            with torch.no_grad():
                lin.weight.copy_(torch.randn(h, cfg["in_dim"], generator=gen) * cfg["in_dim"] ** -0.5)
                lin.bias.zero_()
            part.append(lin)
        part += [ParallelMLPBlock(h, cfg["ffn"], tp, tp_rank, gen) for _ in range(cfg["blocks_per_stage"])]
        if s == n_stages - 1:
            head = nn.Linear(h, cfg["classes"])
            with torch.no_grad():
                head.weight.copy_(torch.randn(cfg["classes"], h, generator=gen) * h ** -0.5)
                head.bias.zero_()
            part.append(head)
        if s == stage:
            mods = part
    return nn.Sequential(*mods)


def megatron_groups(cfg, world):
    """Megatron rank order: tensor fastest, then data, then pipeline (rank = pp*tp*dp + dp*tp + tp)."""
    tp, dp, pp = cfg["tp"], cfg["dp"], cfg.get("pp", 1)
    R = lambda p, d, t: p * tp * dp + d * tp + t  # noqa: E731
    by_role = {
        "tensor": [[R(p, d, t) for t in range(tp)] for p in range(pp) for d in range(dp)],
        "data": [[R(p, d, t) for d in range(dp)] for p in range(pp) for t in range(tp)],
        "pipeline": [[R(p, d, t) for p in range(pp)] for d in range(dp) for t in range(tp)],
    }
    desc = {"tensor": "TENSOR_MODEL_PARALLEL_GROUP", "data": "DATA_PARALLEL_GROUP", "pipeline": "PIPELINE_MODEL_PARALLEL_GROUP"}
    return [(role, ranks, desc[role]) for role in cfg["group_order"] for ranks in by_role[role]]


def run_megatron(ctx):
    cfg, rank, world = ctx["cfg"], ctx["rank"], ctx["world"]
    tp, dp, pp = cfg["tp"], cfg["dp"], cfg.get("pp", 1)
    assert tp * dp * pp == world
    zw.init_dist(ctx)
    tp_rank, dp_rank, stage = rank % tp, (rank // tp) % dp, rank // (tp * dp)
    log = zw.StepLog()
    comm = CommLog(rank, log)
    comm.install()
    pgs, layout = make_groups(megatron_groups(cfg, world), cfg.get("group_desc", False))
    for role, pg in pgs.items():
        comm.roles[pg.group_name] = role
    _TP["group"] = pgs["tensor"]
    model = build_stage(cfg, tp, tp_rank, stage, pp)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=cfg["lr"])
    loss_fn = nn.CrossEntropyLoss()
    extra = {"tp_rank": tp_rank, "dp_rank": dp_rank, "stage": stage, "layout_seen": layout,
             "param_count": sum(p.numel() for p in params)}

    inj = cfg.get("inject") or {}
    stall_ms = inj["amount_ms"] if rank in inj.get("ranks", []) else 0
    region = cfg["data_region"]
    wait, warmup, active = cfg["wait"], cfg["warmup"], cfg["active"]
    n_steps = wait + warmup + active
    B, M = cfg["batch"], cfg.get("microbatches", 1)
    pp_pg = pgs.get("pipeline")
    peer_next = rank + tp * dp if stage < pp - 1 else None
    peer_prev = rank - tp * dp if stage > 0 else None

    def make_batch(step):
        # Same batch on the ranks of one tensor group (and both stages of one pipeline):
        # seeded by the data-parallel rank and the step.
        g = torch.Generator().manual_seed(cfg["seed"] * 7919 + dp_rank * 1009 + step)
        x = torch.randn(B, cfg["in_dim"], generator=g)
        y = torch.randint(cfg["classes"], (B,), generator=g)
        return x, y

    prof = zw.make_profiler(rank, wait, warmup, active)
    with prof:
        for step in range(n_steps):
            log.begin(step)
            # The step's own input preparation, on every rank, inside `region`; the injected
            # rank also sleeps in it (INJECTION: host stall at the start of the step).
            with stall_region(log, region, stall_ms):
                x, y = make_batch(step)
                x = (x - x.mean(0)) / (x.std(0) + 1e-5)

            if pp == 1:
                with record_function("forward"), log.timed("forward_ms"):
                    loss = loss_fn(model(x), y)
                with record_function("backward"), log.timed("backward_ms"):
                    loss.backward()
            else:
                loss = gpipe_step(cfg, log, comm, model, loss_fn, x, y, M, stage, pp, pp_pg, peer_prev, peer_next)

            if dp > 1:
                with record_function("grad_allreduce"), log.timed("grad_allreduce_ms"):
                    flat = torch.cat([p.grad.reshape(-1) for p in params])
                    dist.all_reduce(flat, group=pgs["data"])
                    flat /= dp
                    off = 0
                    for p in params:
                        n = p.numel()
                        p.grad.copy_(flat[off:off + n].view_as(p.grad))
                        off += n
            with record_function("optimizer"), log.timed("optimizer_ms"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            log.cur["loss"] = round(float(loss.detach()), 6) if loss is not None else None
            log.end()
            prof.step()
    return finish(ctx, log, comm, extra, wait, warmup)


def gpipe_step(cfg, log, comm, model, loss_fn, x, y, M, stage, pp, pp_pg, peer_prev, peer_next):
    """All forwards, then all backwards (GPipe), M micro-batches, activations and gradients
    sent with isend/irecv on the pipeline group (global ranks as peers)."""
    xs, ys = x.chunk(M), y.chunk(M)
    first, last = stage == 0, stage == pp - 1
    h = cfg["hidden"]
    outs, ins, losses, sends = [], [], [], []
    for i in range(M):
        if first:
            inp = xs[i]
        else:
            buf = torch.empty(xs[i].shape[0], h)
            w, rec = comm.irecv(buf, peer_prev, pp_pg)
            comm.wait(w, rec)  # recv_forward
            inp = buf.requires_grad_()
        with record_function("forward"), log.timed("forward_ms"):
            out = model(inp)
            if last:
                out = loss_fn(out, ys[i]) / M
        ins.append(inp)
        if last:
            losses.append(out)
        else:
            outs.append(out)
            sends.append(comm.isend(out.detach().contiguous(), peer_next, pp_pg))  # send_forward
    for w, rec in sends:
        comm.wait(w, rec)
    sends = []
    for i in range(M):
        if last:
            with record_function("backward"), log.timed("backward_ms"):
                losses[i].backward()
        else:
            g = torch.empty_like(outs[i])
            w, rec = comm.irecv(g, peer_next, pp_pg)
            comm.wait(w, rec)  # recv_backward
            with record_function("backward"), log.timed("backward_ms"):
                outs[i].backward(g)
        if not first:
            sends.append(comm.isend(ins[i].grad.contiguous(), peer_prev, pp_pg))  # send_backward
    for w, rec in sends:
        comm.wait(w, rec)
    loss = sum(l.detach() for l in losses) if last else None
    log.cur["loss"] = round(float(loss), 6) if loss is not None else None
    return loss


# --------------------------------------------------------------------------------------
# HSDP: FSDP2 fully_shard on a 2-D DeviceMesh (replicate x shard)
# --------------------------------------------------------------------------------------

def run_hsdp(ctx):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    cfg, rank, world = ctx["cfg"], ctx["rank"], ctx["world"]
    zw.init_dist(ctx)
    log = zw.StepLog()
    comm = CommLog(rank, log)
    comm.install()
    R, S = cfg["mesh"]
    mesh = init_device_mesh("cpu", (R, S), mesh_dim_names=("replicate", "shard"))
    for dim in ("replicate", "shard"):
        comm.roles[mesh.get_group(dim).group_name] = dim
    torch.manual_seed(cfg["seed"])
    model = zw.build_mlp(cfg)
    for blk in model.children():
        if isinstance(blk, nn.Sequential):
            fully_shard(blk, mesh=mesh)  # 2-D mesh: HSDP (shard over "shard", replicate over "replicate")
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    extra = {"mesh": mesh.mesh.tolist(), "param_count": sum(p.numel() for p in model.parameters())}

    wait, warmup, active = cfg["wait"], cfg["warmup"], cfg["active"]
    n_steps = wait + warmup + active
    inj = cfg.get("inject") or {}
    per_item = cfg["item_sleep_ms"] / 1e3
    if rank in inj.get("ranks", []):
        per_item = inj["item_sleep_ms"] / 1e3  # INJECTION (hsdp_2x2_slow_loader): this rank's __getitem__ is slow
    extra["item_sleep_ms"] = per_item * 1e3
    batch = cfg["batch"]
    dataset = zw.ItemDataset(batch * n_steps, cfg["in_dim"], cfg["classes"], per_item, cfg["seed"] + rank)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, num_workers=0, shuffle=False, drop_last=True)
    it = iter(loader)

    prof = zw.make_profiler(rank, wait, warmup, active)
    with prof:
        for step in range(n_steps):
            log.begin(step)
            slept0 = dataset.slept_ms
            with log.timed("data_ms"):
                x, y = next(it)
            log.add("dataset_sleep_ms", dataset.slept_ms - slept0)
            with record_function("forward"), log.timed("forward_ms"):
                loss = loss_fn(model(x), y)
            with record_function("backward"), log.timed("backward_ms"):
                loss.backward()
            with record_function("optimizer"), log.timed("optimizer_ms"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            log.cur["loss"] = round(float(loss.detach()), 6)
            log.end()
            prof.step()
    return finish(ctx, log, comm, extra, wait, warmup)


# --------------------------------------------------------------------------------------
# expert parallel: one expert per rank, skewed router, all_to_all with uneven splits
# --------------------------------------------------------------------------------------

class _AllToAll(torch.autograd.Function):
    """Token exchange (Megatron's name): all_to_all_single with uneven splits in forward, the
    reverse exchange of the gradients in backward."""

    @staticmethod
    def forward(ctx, x, output_splits, input_splits, group, marks, tag):
        ctx.splits, ctx.group, ctx.marks, ctx.tag = (output_splits, input_splits), group, marks, tag
        out = x.new_empty((sum(output_splits), x.shape[1]))
        dist.all_to_all_single(out, x.contiguous(), output_splits, input_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, g):
        output_splits, input_splits = ctx.splits
        ctx.marks[f"{ctx.tag}_bwd_enter"] = time.perf_counter()
        out = g.new_empty((sum(input_splits), g.shape[1]))
        dist.all_to_all_single(out, g.contiguous(), input_splits, output_splits, group=ctx.group)
        ctx.marks[f"{ctx.tag}_bwd_exit"] = time.perf_counter()
        return out, None, None, None, None, None


def calibrate_router(cfg, in_proj, gate, E):
    """The injected skew, deterministic and the same on every rank: a fixed per-expert bias on
    the gate logits, fitted on a calibration batch drawn from the seed (not from any rank's data)
    so that top-1 routing sends `hot_share` of the tokens to expert `hot_expert` and the rest
    evenly to the others."""
    g = torch.Generator().manual_seed(cfg["seed"] * 31 + 7)
    x = torch.randn(E * cfg["tokens"], cfg["in_dim"], generator=g)
    target = torch.full((E,), (1 - cfg["hot_share"]) / (E - 1))
    target[cfg["hot_expert"]] = cfg["hot_share"]
    bias = torch.zeros(E)
    with torch.no_grad():
        logits = gate(in_proj(x))
        for _ in range(300):
            frac = torch.bincount((logits + bias).argmax(-1), minlength=E).float() / len(x)
            bias += 0.2 * (target - frac)
    return bias


def run_moe(ctx):
    cfg, rank, world = ctx["cfg"], ctx["rank"], ctx["world"]
    zw.init_dist(ctx)
    log = zw.StepLog()
    comm = CommLog(rank, log)
    comm.install()
    E = world  # one expert per rank
    pgs, layout = make_groups([("expert", list(range(world)), "EXPERT_MODEL_PARALLEL_GROUP")], cfg.get("group_desc", True))
    ep = pgs["expert"]
    comm.roles[ep.group_name] = "expert"
    h, ffn = cfg["hidden"], cfg["ffn"]
    torch.manual_seed(cfg["seed"])  # shared (replicated) weights: the same everywhere
    in_proj, gate, head = nn.Linear(cfg["in_dim"], h), nn.Linear(h, E, bias=False), nn.Linear(h, cfg["classes"])
    router_bias = calibrate_router(cfg, in_proj, gate, E)  # the skew: a fixed bias per expert
    torch.manual_seed(cfg["seed"] + 100 + rank)  # this rank's expert
    expert = nn.Sequential(nn.Linear(h, ffn), nn.GELU(), nn.Linear(ffn, h))
    shared = list(in_proj.parameters()) + list(gate.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(shared + list(expert.parameters()), lr=cfg["lr"])
    loss_fn = nn.CrossEntropyLoss()
    extra = {"layout_seen": layout, "router_bias": [round(float(b), 5) for b in router_bias], "shared_params": sum(p.numel() for p in shared),
             "expert_params": sum(p.numel() for p in expert.parameters())}

    wait, warmup, active = cfg["wait"], cfg["warmup"], cfg["active"]
    n_steps = wait + warmup + active
    T = cfg["tokens"]
    g = torch.Generator().manual_seed(cfg["seed"] * 7919 + rank)
    data = [(torch.randn(T, cfg["in_dim"], generator=g), torch.randint(cfg["classes"], (T,), generator=g)) for _ in range(n_steps)]

    prof = zw.make_profiler(rank, wait, warmup, active)
    with prof:
        for step in range(n_steps):
            log.begin(step)
            marks = {}
            x, y = data[step]
            with record_function("forward"), log.timed("forward_ms"):
                hid = in_proj(x)
                with record_function("router"):
                    probs = torch.softmax(gate(hid) + router_bias, dim=-1)
                    idx = probs.argmax(dim=-1)  # top-1
                    p = probs.gather(1, idx[:, None])
                    order = torch.argsort(idx, stable=True)
                    counts = torch.bincount(idx, minlength=E)
                with record_function("dispatch"):
                    recv_counts = torch.empty_like(counts)
                    dist.all_to_all_single(recv_counts, counts, group=ep)  # the split sizes first
                    in_splits, out_splits = counts.tolist(), recv_counts.tolist()
                    xin = _AllToAll.apply(hid[order], out_splits, in_splits, ep, marks, "dispatch")
                with record_function("expert"):
                    t0 = time.perf_counter()
                    yout = expert(xin)
                    log.add("expert_fwd_ms", ms(t0, time.perf_counter()))
                with record_function("combine"):
                    yback = _AllToAll.apply(yout, in_splits, out_splits, ep, marks, "combine")
                inv = torch.argsort(order)
                out = hid + p * yback[inv]
                loss = loss_fn(head(out), y)
            with record_function("backward"), log.timed("backward_ms"):
                loss.backward()
            # the expert's backward runs between the combine's backward exchange and the dispatch's
            log.add("expert_bwd_ms", ms(marks["combine_bwd_exit"], marks["dispatch_bwd_enter"]))
            with record_function("grad_allreduce"), log.timed("grad_allreduce_ms"):
                flat = torch.cat([q.grad.reshape(-1) for q in shared])
                dist.all_reduce(flat)  # shared weights: data-parallel over the world
                flat /= world
                off = 0
                for q in shared:
                    n = q.numel()
                    q.grad.copy_(flat[off:off + n].view_as(q.grad))
                    off += n
            with record_function("optimizer"), log.timed("optimizer_ms"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            c = log.cur
            c["tokens_sent_to_expert"] = in_splits
            c["tokens_received_from_rank"] = out_splits
            c["expert_tokens"] = sum(out_splits)
            c["loss"] = round(float(loss.detach()), 6)
            log.end()
            prof.step()
    return finish(ctx, log, comm, extra, wait, warmup)


# --------------------------------------------------------------------------------------
# context parallel: ring attention, K/V blocks passed round the ring with batch_isend_irecv
# --------------------------------------------------------------------------------------

class _RingAttention(torch.autograd.Function):
    """Attention of the local queries over the keys/values of every rank of the context group:
    forward passes the K/V blocks (with their additive mask column) round the ring (P-1 rounds,
    isend to r+1, irecv from r-1, overlapped with the block's attention); backward recomputes
    each block's attention and passes the dK/dV accumulators round the ring (P rounds: the last
    one returns each accumulator to the block's owner)."""

    @staticmethod
    def forward(ctx, q, kv, group, comm, scale):
        P, r = dist.get_world_size(group), dist.get_rank(group)
        nxt, prv = dist.get_global_rank(group, (r + 1) % P), dist.get_global_rank(group, (r - 1) % P)
        d = q.shape[-1]
        blocks, cur = [kv], kv
        m = l = o = None
        for i in range(P):
            if i < P - 1:
                buf = torch.empty_like(cur)
                w, rec = comm.batch_isend_irecv([("isend", cur, nxt), ("irecv", buf, prv)], group)
            k, v, bias = cur[..., :d], cur[..., d:2 * d], cur[..., 2 * d]
            s = torch.matmul(q, k.transpose(-1, -2)) * scale + bias[:, None, :]
            mb = s.amax(-1, keepdim=True)
            pb = torch.exp(s - mb)
            lb, ob = pb.sum(-1, keepdim=True), torch.matmul(pb, v)
            if m is None:
                m, l, o = mb, lb, ob
            else:
                mn = torch.maximum(m, mb)
                a, b = torch.exp(m - mn), torch.exp(mb - mn)
                m, l, o = mn, l * a + lb * b, o * a + ob * b
            if i < P - 1:
                comm.wait(w, rec)
                cur = buf
                blocks.append(cur)
        out = o / l
        lse = m + torch.log(l)
        ctx.save_for_backward(q, out, lse, *blocks)
        ctx.group, ctx.comm, ctx.scale, ctx.peers = group, comm, scale, (nxt, prv)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, out, lse, *blocks = ctx.saved_tensors
        group, comm, scale = ctx.group, ctx.comm, ctx.scale
        nxt, prv = ctx.peers
        P, d = len(blocks), q.shape[-1]
        D = (dout * out).sum(-1, keepdim=True)
        dq = torch.zeros_like(q)
        acc = None
        for i in range(P):  # block i came from rank r - i
            kv = blocks[i]
            k, v, bias = kv[..., :d], kv[..., d:2 * d], kv[..., 2 * d]
            pm = torch.exp(torch.matmul(q, k.transpose(-1, -2)) * scale + bias[:, None, :] - lse)
            dv = torch.matmul(pm.transpose(-1, -2), dout)
            ds = pm * (torch.matmul(dout, v.transpose(-1, -2)) - D)
            dq += torch.matmul(ds, k) * scale
            dk = torch.matmul(ds.transpose(-1, -2), q) * scale
            contrib = torch.cat([dk, dv, torch.zeros_like(kv[..., 2 * d:])], dim=-1)
            acc = contrib if acc is None else acc + contrib
            # pass the accumulator on: it belongs to block r - i, and rank r + 1 holds block r - i
            # as its block i + 1; after the last block it goes home to its owner (r + 1).
            inbuf = torch.empty_like(acc)
            w, rec = comm.batch_isend_irecv([("isend", acc.contiguous(), nxt), ("irecv", inbuf, prv)], group)
            comm.wait(w, rec)
            acc = inbuf
        return dq, acc, None, None, None


def run_ring(ctx):
    cfg, rank, world = ctx["cfg"], ctx["rank"], ctx["world"]
    zw.init_dist(ctx)
    log = zw.StepLog()
    comm = CommLog(rank, log)
    comm.install()
    pgs, layout = make_groups([("context", list(range(world)), "CONTEXT_PARALLEL_GROUP")], cfg.get("group_desc", False))
    cp = pgs["context"]
    comm.roles[cp.group_name] = "context"
    H, dh, dm, S = cfg["heads"], cfg["head_dim"], cfg["heads"] * cfg["head_dim"], cfg["seq_per_rank"]
    torch.manual_seed(cfg["seed"])  # replicated weights
    in_proj, qkv, o_proj = nn.Linear(cfg["in_dim"], dm), nn.Linear(dm, 3 * dm), nn.Linear(dm, dm)
    head = nn.Linear(dm, cfg["classes"])
    params = [p for m in (in_proj, qkv, o_proj, head) for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=cfg["lr"])
    loss_fn = nn.CrossEntropyLoss()
    extra = {"layout_seen": layout, "param_count": sum(p.numel() for p in params)}
    wait, warmup, active = cfg["wait"], cfg["warmup"], cfg["active"]
    n_steps = wait + warmup + active
    g = torch.Generator().manual_seed(cfg["seed"] * 7919 + rank)  # this rank's chunk of the sequence
    data = [(torch.randn(S, cfg["in_dim"], generator=g), torch.randint(cfg["classes"], (S,), generator=g),
             torch.rand(S, generator=g)) for _ in range(n_steps)]
    inj = cfg.get("inject") or {}
    stall_ms = inj["amount_ms"] if rank in inj.get("ranks", []) else 0

    prof = zw.make_profiler(rank, wait, warmup, active)
    with prof:
        for step in range(n_steps):
            log.begin(step)
            x, y, u = data[step]
            # Every rank builds the additive key mask of its own chunk (padding positions get
            # -1e4); INJECTION: rank 0 also sleeps in it, before the ring.
            with stall_region(log, "attention_mask_build", stall_ms):
                bias = torch.where(u < cfg["pad_fraction"], torch.tensor(-1e4), torch.tensor(0.0))
                bias = bias.expand(H, S).contiguous()
            with record_function("forward"), log.timed("forward_ms"):
                hid = in_proj(x)
                qh, kh, vh = (t.view(S, H, dh).transpose(0, 1) for t in qkv(hid).chunk(3, dim=-1))
                kv = torch.cat([kh, vh, bias[..., None]], dim=-1)
                att = _RingAttention.apply(qh.contiguous(), kv.contiguous(), cp, comm, dh ** -0.5)
                out = o_proj(att.transpose(0, 1).reshape(S, dm)) + hid
                loss = loss_fn(head(out), y)
            with record_function("backward"), log.timed("backward_ms"):
                loss.backward()
            with record_function("grad_allreduce"), log.timed("grad_allreduce_ms"):
                flat = torch.cat([q.grad.reshape(-1) for q in params])
                dist.all_reduce(flat)  # replicated weights: all_reduce over the world (CP x DP)
                flat /= world
                off = 0
                for q in params:
                    n = q.numel()
                    q.grad.copy_(flat[off:off + n].view_as(q.grad))
                    off += n
            with record_function("optimizer"), log.timed("optimizer_ms"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            log.cur["loss"] = round(float(loss.detach()), 6)
            log.end()
            prof.step()
    return finish(ctx, log, comm, extra, wait, warmup)


# --------------------------------------------------------------------------------------

RUNNERS = {"megatron": run_megatron, "hsdp": run_hsdp, "moe": run_moe, "ring": run_ring}


def worker_main(cfg_path, rank):
    with open(cfg_path) as f:
        cfg = json.load(f)["cfg"]
    if cfg.get("pin_cores"):
        # One core per rank, round robin (rank r on core r mod n): tensor partners (consecutive
        # ranks) on different cores, so a tensor group runs in parallel and shares each core
        # fairly with the other groups instead of the OS running one group after another.
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[rank % len(cores)]})
    zw.worker_main(cfg_path, rank, runners=RUNNERS)
