#!/usr/bin/env python3
"""Second blind generalisation check (README.md, "Second blind check"): kinds of runs the first
zoo and the first blind check did not have: small DDP buckets at world sizes 2, 3 and 6 (and
buckets large enough not to matter), host synchronizations of several kinds (one metric, many
metrics with and without an annotation, `.item()` with no collective, a barrier per step),
pipelines (2 stages with many micro-batches, 1F1B with a slow first stage, a host stall on one
stage), hangs of other shapes (rank 0 leaving early, an all_gather of the wrong shape, a
collective on the wrong process group), two injected problems of different size in one run,
DDP with find_unused_parameters / activation checkpointing / an EmbeddingBag at world 5, a
healthy CNN with RMSprop, and every rank input-bound with DataLoader workers.

Same machinery as make_zoo_blind.py (make_zoo's `generate`, rank code in zoo_workers_blind.py,
the pipeline loop in zoo_workers.py). `expected` is decided from the ranks' own measurements
where the answer depends on the machine (FINALIZE below).

    python make_zoo_blind2.py --out /tmp/blind2 [--only sb_w2,...]
"""

import argparse
import copy
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import make_zoo as mz  # noqa: E402
import make_zoo_blind as mzb  # noqa: E402

ANN_PLAIN, ANN_NONE, ANN_HASH = mz.ANN_PLAIN, mz.ANN_NONE, mz.ANN_HASH
DPF = mz.DP_FALSE_POSITIVES
HANG_MUST_NOT = ["straggler", "small_collectives", "compute_imbalance", "input_bound", "host_stall"]


def dp(**kw):
    cfg = copy.deepcopy(mz.DP_DEFAULTS)
    cfg.update(kw)
    return cfg


def pipe(**kw):
    cfg = dict(width=512, in_dim=256, out_dim=64, layers_per_stage=[2, 2, 2, 2], schedule="gpipe",
               microbatches=8, batch=256, optimizer="sgd", wait=1, warmup=1, active=4, annotations={})
    cfg.update(kw)
    return cfg


def hang(**kw):
    cfg = dict(in_dim=256, width=512, depth=3, classes=16, batch=64, optimizer="sgd", steps=6, timeout_s=8)
    cfg.update(kw)
    return cfg


SB_MODEL = dict(width=640, depth=18, batch=32, optimizer="sgd")

SCENARIOS = [
    # ------------------------------------------------------------ small buckets
    dict(name="sb_w2", kind="dp", world_size=2, seed=7000,
         description="DDP, MLP of 18 blocks of width 640 (~30 MB), bucket_cap_mb=1 at world 2: ~20 all_reduces of 1-2 MiB per step.",
         cfg=dp(**SB_MODEL, bucket_cap_mb=1, measure_alpha=True),
         injected={"cause": "small_collectives", "ranks": [0, 1], "where": "DDP bucketing", "amount_ms": None,
                   "how": "DistributedDataParallel(model, bucket_cap_mb=1)"},
         expected=None),
    dict(name="sb_w6", kind="dp", world_size=6, seed=7100,
         description="DDP, MLP of 16 blocks of width 384 (~10 MB), bucket_cap_mb=0.5 at world 6: one bucket per layer, ~0.6 MiB each.",
         cfg=dp(width=384, depth=16, in_dim=256, batch=16, optimizer="sgd", bucket_cap_mb=0.5, measure_alpha=True),
         injected={"cause": "small_collectives", "ranks": [0, 1, 2, 3, 4, 5], "where": "DDP bucketing", "amount_ms": None,
                   "how": "DistributedDataParallel(model, bucket_cap_mb=0.5)"},
         expected=None),
    dict(name="buckets_3mb_w3", kind="dp", world_size=3, seed=7200,
         description="DDP, MLP of 16 blocks of width 768 (~40 MB), bucket_cap_mb=3 at world 3: ~13 all_reduces of ~3 MiB. "
                     "Whether that is worth reporting is decided from the measured fixed cost per call.",
         cfg=dp(width=768, depth=16, batch=32, optimizer="sgd", bucket_cap_mb=3, measure_alpha=True),
         injected={"cause": "small_collectives", "ranks": [0, 1, 2], "where": "DDP bucketing", "amount_ms": None,
                   "how": "DistributedDataParallel(model, bucket_cap_mb=3)"},
         expected=None),
    # ------------------------------------------------------------ host syncs
    dict(name="hs_one_metric", kind="dp", world_size=4, seed=7300,
         description="DDP baseline MLP; one metric per step: dist.all_reduce(loss) + .item() in record_function('log_metrics') after backward.",
         cfg=dp(metrics={"mode": "allreduce", "n": 1, "annotation": "log_metrics"}),
         injected={"cause": "host_sync", "ranks": [0, 1, 2, 3], "where": "log_metrics", "amount_ms": None,
                   "how": "one blocking scalar all_reduce + .item() per step"},
         expected=None),
    dict(name="hs_many_annot", kind="dp", world_size=4, seed=7400,
         description="DDP MLP (width 512); 16 metrics per step, each a blocking scalar dist.all_reduce + .item(), in record_function('log_metrics') after backward.",
         cfg=dp(width=512, metrics={"mode": "allreduce", "n": 16, "annotation": "log_metrics"}),
         injected={"cause": "host_sync", "ranks": [0, 1, 2, 3], "where": "log_metrics", "amount_ms": None,
                   "how": "16 blocking scalar all_reduces + .item() per step"},
         expected=None),
    dict(name="hs_many_unann", kind="dp", world_size=3, seed=7500,
         description="DDP MLP (width 512), no annotations at all; 24 metrics per step, each a blocking scalar dist.all_reduce + .item(), after backward.",
         cfg=dp(width=512, annotations=ANN_NONE, metrics={"mode": "allreduce", "n": 24}),
         injected={"cause": "host_sync", "ranks": [0, 1, 2], "where": "after backward (unannotated)", "amount_ms": None,
                   "how": "24 blocking scalar all_reduces + .item() per step, no record_function"},
         expected=None),
    dict(name="item_only", kind="dp", world_size=2, seed=7600,
         description="DDP baseline at world 2; loss.item() every step after backward, no collective: on CPU nothing to drain.",
         cfg=dp(metrics={"mode": "item", "annotation": "log_metrics"}),
         injected=None,
         expected={"first_finding": None, "ranks": [], "must_not": DPF + ["host_sync"],
                   "why": "on a CPU rank .item() reads host memory: no device queue, no collective"}),
    dict(name="barrier_step", kind="dp", world_size=4, seed=7700,
         description="DDP baseline MLP, dist.barrier() every step after backward, unannotated.",
         cfg=dp(metrics={"mode": "barrier"}),
         injected={"cause": "host_sync", "ranks": [0, 1, 2, 3], "where": "dist.barrier() after backward", "amount_ms": None,
                   "how": "dist.barrier() every step"},
         expected=None),
    # ------------------------------------------------------------ pipelines
    dict(name="pp_gpipe2_mb16", kind="pipeline", world_size=2, seed=7800,
         description="GPipe with 2 stages (3 Linear+GELU each, width 512) and 16 micro-batches: the theoretical bubble is 1/17.",
         cfg=pipe(layers_per_stage=[3, 3], microbatches=16, batch=256, annotations={"schedule": "pipeline_step", "optimizer": "optimizer"}),
         injected=None,
         expected=None),
    dict(name="pp_1f1b_slow_first", kind="pipeline", world_size=4, seed=7900,
         description="1F1B, 4 stages, 8 micro-batches; stage 0 has 6 Linear+GELU layers against 2 on the others, no annotations.",
         cfg=pipe(layers_per_stage=[6, 2, 2, 2], schedule="1f1b"),
         injected={"cause": "pipeline_bubble", "ranks": [0], "where": "stage 0 (6 layers vs 2)", "amount_ms": None,
                   "how": "stage 0 holds 6 Linear(512,512)+GELU layers, the others 2"},
         expected={"first_finding": "pipeline_bubble", "ranks": [0], "slowest_stage": 0, "must_not": ["straggler", "small_collectives"]}),
    dict(name="pp_stall_stage", kind="pipeline", world_size=3, seed=8000,
         description="GPipe, 3 stages, 8 micro-batches; stage 1 sleeps 200 ms per step just before its first micro-batch's "
                     "forward (a forward pre-hook, no annotation of its own). Is it a stall or a bubble?",
         cfg=pipe(layers_per_stage=[2, 2, 2], annotations={"schedule": "pipeline_step", "optimizer": "optimizer"},
                  stall={"ranks": [1], "amount_ms": 200}),
         injected={"cause": "host_stall", "ranks": [1], "where": "stage 1, before its first forward (unannotated)", "amount_ms": 200,
                   "how": "time.sleep(0.2) in a forward pre-hook of stage 1's module, once per step"},
         expected={"first_finding": "host_stall", "ranks": [1], "cause": "host_stall",
                   "why": "the other stages idle because stage 1 sleeps: the cause is a host stall on stage 1, not the schedule",
                   "must_not": ["straggler", "small_collectives", "compute_imbalance"]}),
    # ------------------------------------------------------------ hangs
    dict(name="hang_skip_r0", kind="hang", world_size=3, seed=8100, fr=True,
         description="One gradient all_reduce per step on the default group (make_zoo_blind's hang loop) at world 3; rank 0 skips "
                     "it in step 1. Its later all_reduces pair with the others' previous ones (same size, gloo does not notice): "
                     "rank 0 runs a step ahead, and the others' last all_reduce (step 5) has no partner: ranks 1, 2 wait until the "
                     "8 s timeout while rank 0, done, lingers without collectives.",
         cfg=hang(linger_s=12, inject={"kind": "skip", "ranks": [0], "step": 1}),
         injected={"cause": "collective_mismatch", "ranks": [0], "where": "step 1, grad_allreduce", "amount_ms": None,
                   "how": "rank 0 does not call dist.all_reduce(grads) in step 1"},
         expected={"first_finding": "collective_mismatch", "ranks": [0], "kind": "missing collective",
                   "also": "the skip is in step 1 (rank 0 runs a step ahead from its 2nd all_reduce on), not only the last step",
                   "must_not": HANG_MUST_NOT}),
    dict(name="hang_early_exit_r0", kind="hang", runner="hang_ops", world_size=3, seed=8150, fr=True,
         description="Per step a grad all_reduce and a broadcast of rank 0's [4] learning-rate state (default group) at world 3; "
                     "rank 0 leaves the loop before step 1 and lingers 12 s without collectives; ranks 1, 2 block in step 1's "
                     "grad all_reduce until the 8 s timeout.",
         cfg=hang(stat_op="broadcast", linger_s=12, inject={"kind": "early_exit", "ranks": [0], "step": 1}),
         injected={"cause": "collective_mismatch", "ranks": [0], "where": "before step 1", "amount_ms": None,
                   "how": "rank 0 breaks out of the loop before step 1"},
         expected={"first_finding": "collective_mismatch", "ranks": [0], "kind": "rank exited", "must_not": HANG_MUST_NOT}),
    dict(name="hang_allgather_shape", kind="hang", runner="hang_ops", world_size=4, seed=8200, fr=True,
         env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
         description="Per step a grad all_reduce and an all_gather of each rank's [loss, batch]; in step 2 rank 3 all_gathers [3] "
                     "elements instead of [2]. TORCH_DISTRIBUTED_DEBUG=DETAIL: the wrapper raises on every rank.",
         cfg=hang(stat_op="all_gather", inject={"kind": "shape", "ranks": [3], "step": 2}),
         injected={"cause": "collective_mismatch", "ranks": [3], "where": "step 2, stats all_gather", "amount_ms": None,
                   "how": "rank 3 all_gathers a [3] tensor, the others [2]"},
         expected={"first_finding": "collective_mismatch", "ranks": [3], "kind": "shape mismatch", "must_not": HANG_MUST_NOT}),
    dict(name="hang_broadcast_shape", kind="hang", runner="hang_ops", world_size=3, seed=8250, fr=True,
         env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
         description="Per step a grad all_reduce and a broadcast of rank 0's [4] learning-rate state; in step 2 rank 2 receives "
                     "into a [5] buffer. TORCH_DISTRIBUTED_DEBUG=DETAIL: the wrapper raises on every rank.",
         cfg=hang(stat_op="broadcast", inject={"kind": "shape", "ranks": [2], "step": 2}),
         injected={"cause": "collective_mismatch", "ranks": [2], "where": "step 2, lr broadcast", "amount_ms": None,
                   "how": "rank 2 broadcasts into a [5] tensor, the others [4]"},
         expected={"first_finding": "collective_mismatch", "ranks": [2], "kind": "shape mismatch", "must_not": HANG_MUST_NOT}),
    dict(name="hang_wrong_group", kind="hang", runner="hang_ops", world_size=3, seed=8300, fr=True,
         description="Per step a grad all_reduce on the default group and a loss all_reduce on a second 'metrics' group; in step 2 "
                     "rank 2 issues the loss all_reduce on the default group instead. Deadlock: ranks 0, 1 wait in the metrics group, "
                     "rank 2 in the default group; all time out after 8 s.",
         cfg=hang(stat_op="metrics_allreduce", inject={"kind": "wrong_group", "ranks": [2], "step": 2}),
         injected={"cause": "collective_mismatch", "ranks": [2], "where": "step 2, loss_allreduce on the default group", "amount_ms": None,
                   "how": "dist.all_reduce(loss) without group=metrics_pg on rank 2 in step 2"},
         expected={"first_finding": "collective_mismatch", "ranks": [2], "kind": "wrong group", "must_not": HANG_MUST_NOT}),
    # ------------------------------------------------------------ two problems
    dict(name="two_problems", kind="dp", world_size=4, seed=8400,
         description="Small buckets (bucket_cap_mb=1, MLP of 18 blocks of width 640: ~20 all_reduces per step) on every rank, and "
                     "rank 1 sleeps 300 ms per step in record_function('io_wait') inside forward.",
         cfg=dp(**SB_MODEL, bucket_cap_mb=1, measure_alpha=True,
                inject=[{"kind": "sleep_in_forward", "ranks": [1], "amount_ms": 300, "where": "io_wait"}]),
         injected={"cause": "host_stall", "ranks": [1], "where": "forward/io_wait", "amount_ms": 300,
                   "how": "time.sleep(0.3) in record_function('io_wait') inside forward on rank 1; and bucket_cap_mb=1 on all ranks",
                   "second": {"cause": "small_collectives", "ranks": [0, 1, 2, 3]}},
         expected={"first_finding": "host_stall", "ranks": [1], "cause": "host_stall", "where": "io_wait",
                   "may_report": ["small_collectives"], "must_not": ["compute_imbalance", "input_bound"]}),
    # ------------------------------------------------------------ DDP variants at world 5
    dict(name="embbag_ckpt_stall_w5", kind="dp", world_size=5, seed=8500,
         description="DDP(find_unused_parameters=True) on an EmbeddingBag (20000 x 64, bags of 8) + dense MLP (4 blocks of width 512, "
                     "each under activation checkpointing) with an unused head, world 5; rank 3 sleeps 60 ms in a forward hook of the "
                     "second MLP block, which fires in forward and again when backward recomputes the block.",
         cfg=dp(model="embbag", num_embeddings=20000, emb_dim=64, bag=8, in_dim=128, width=512, depth=4, batch=32,
                annotations=ANN_NONE, find_unused=True, checkpoint=True,
                inject=[{"kind": "sleep_mid_forward", "ranks": [3], "amount_ms": 60}]),
         injected={"cause": "host_stall", "ranks": [3], "where": "forward hook of a checkpointed block (forward and recompute in backward)",
                   "amount_ms": 120, "how": "time.sleep(0.06) in a forward hook, twice per step (checkpoint recompute), rank 3 only"},
         expected={"first_finding": "host_stall", "ranks": [3], "cause": "host_stall",
                   "must_not": ["compute_imbalance", "input_bound", "small_collectives"]}),
    dict(name="embbag_healthy_w5", kind="dp", world_size=5, seed=8600,
         description="DDP(find_unused_parameters=True) on the EmbeddingBag model (no checkpointing), world 5, Adagrad, forward/backward/optimizer annotated. Nothing injected.",
         cfg=dp(model="embbag", num_embeddings=20000, emb_dim=64, bag=8, in_dim=128, width=512, depth=4, batch=32,
                optimizer="adagrad", find_unused=True),
         injected=None,
         expected={"first_finding": None, "ranks": [], "must_not": DPF + ["collective_mismatch"],
                   "may_report": ["arrival_jitter (5 ranks on 2 cores)"],
                   "why": "healthy; DDP's all_reduce of its map of used parameters (find_unused_parameters=True) runs beside the "
                          "gradient bucket on the other gloo thread and may start first: not a mismatch"}),
    # ------------------------------------------------------------ healthy / input
    dict(name="healthy_cnn_rmsprop", kind="dp", world_size=4, seed=8700,
         description="A small CNN (3 conv layers of 32/64/64 channels on 32x32 images, BatchNorm, a 256-wide head), RMSprop, batch 32, "
                     "`## forward ##` annotations, world 4. Nothing injected.",
         cfg=dp(model="cnn", channels=32, image=32, width=256, batch=32, optimizer="rmsprop", annotations=ANN_HASH),
         injected=None,
         expected={"first_finding": None, "ranks": [], "must_not": DPF, "why": "nothing of high severity may be reported"}),
    dict(name="input_bound_workers_all", kind="dp", world_size=3, seed=8800,
         description="DDP MLP (width 512) fed by a DataLoader with 2 worker processes on every rank; __getitem__ sleeps 5 ms per item, "
                     "batch 32: each worker needs ~160 ms per batch, two of them ~80 ms, more than the step's compute.",
         cfg=dp(width=512, batch=32, dataloader=True, item_sleep_ms=5.0, num_workers=2, prefetch_factor=2),
         injected={"cause": "input_bound", "ranks": [0, 1, 2], "where": "DataLoader __next__ (2 workers)", "amount_ms": None,
                   "how": "Dataset.__getitem__ sleeps 5 ms per item, 2 workers per rank"},
         expected={"first_finding": "input_bound", "ranks": [0, 1, 2],
                   "must_not": ["straggler", "compute_imbalance", "host_stall", "small_collectives"]}),
]


# ---------------------------------------------------------------- expectations from measurement

def _step_ms(measured):
    return statistics.fmean(s["step_ms"] for m in measured.values() for s in m["steps"])


def finalize_buckets(scn, measured, notes):
    """The fixed cost the calls beyond ceil(gradient bytes / 25 MiB) pay, per step, from the
    measured 1-element all_reduce (after training, idle machine: a lower bound of what it costs
    mid-step): small_collectives is expected when that is above 1% of the step."""
    ex = measured["0"]["extra"]
    sizes = [int(x) for x in str(ex["ddp_logging"].get("rebuilt_bucket_sizes", "")).split(",") if x.strip()]
    n = len(sizes)
    fewer = max(1, math.ceil(sum(sizes) / (25 * 2**20)))
    alpha = statistics.median(m["extra"]["allreduce_bench"]["one_elem_ms"] for m in measured.values())
    bucket = statistics.median(m["extra"]["allreduce_bench"]["bucket_ms"] for m in measured.values())
    st = _step_ms(measured)
    fixed = (n - fewer) * alpha
    notes.append(f"{n} DDP buckets per step (bytes {min(sizes)}-{max(sizes)}), {fewer} at 25 MiB; a 1-element all_reduce takes "
                 f"{alpha:.2f} ms (median, idle machine), one {scn['cfg']['bucket_cap_mb']} MiB all_reduce {bucket:.2f} ms; the "
                 f"{n - fewer} extra calls pay {fixed:.1f} ms of fixed cost per step, {fixed / st:.2%} of the {st:.0f} ms step")
    if scn["name"] == "two_problems":
        return
    if fixed / st > 0.01 and n >= 8:
        scn["expected"] = {"first_finding": "small_collectives", "ranks": scn["injected"]["ranks"],
                           "why": f"{n - fewer} calls beyond {fewer} at 25 MiB, {alpha:.2f} ms fixed cost each: {fixed / st:.1%} of the step",
                           "must_not": ["straggler", "compute_imbalance", "input_bound", "host_stall"]}
    else:
        scn["expected"] = {"first_finding": None, "ranks": [],
                           "why": f"the extra calls' fixed cost is {fixed / st:.2%} of the step (< 1%): not worth acting on",
                           "must_not": DPF}


def finalize_sync(scn, measured, notes):
    """As make_zoo.finalize_host_sync: what even the last arriver spends in the blocking calls
    (the metric all_reduces + .item(), or the barrier) is what removing them saves."""
    ranks = sorted(measured)
    n = len(measured[ranks[0]]["steps"])
    key = ("barrier_ms",) if scn["cfg"]["metrics"]["mode"] == "barrier" else ("metric_allreduce_ms", "metric_item_ms")
    cost, save = [], []
    for i in range(n):
        per = [sum(measured[r]["steps"][i].get(k, 0.0) for k in key) for r in ranks]
        cost.append(statistics.fmean(per))
        save.append(min(per))
    c, s, st = statistics.fmean(cost), statistics.fmean(save), _step_ms(measured)
    notes.append(f"the blocking calls take {c:.1f} ms per step on average ({c / st:.1%}); the last arriver spends {s:.1f} ms "
                 f"({s / st:.1%}) in them: what removing them saves")
    if s / st > 0.01:
        scn["expected"] = {"first_finding": "host_sync", "ranks": [int(r) for r in ranks], "where": scn["injected"]["where"],
                           "why": f"the savable part is {s / st:.1%} of the step; CPU wording",
                           "may_report": ["small_collectives"],
                           "must_not": ["straggler", "compute_imbalance", "input_bound", "host_stall"]}
    else:
        scn["expected"] = {"first_finding": None, "ranks": [],
                           "why": f"the savable part is {s / st:.2%} of the step (< 1%)", "must_not": DPF + ["host_sync"]}


def finalize_gpipe2(scn, measured, notes):
    """Measured bubble share per stage; the bubble is the finding if it is more than a few % of the step."""
    ranks = sorted(measured)
    bub = {r: statistics.fmean(s["bubble_share"] for s in measured[r]["steps"]) for r in ranks}
    p, m = scn["world_size"], scn["cfg"]["microbatches"]
    notes.append(f"measured bubble share per stage {', '.join(f'{b:.2f}' for b in bub.values())}; theory (p-1)/(m+p-1) = {(p - 1) / (m + p - 1):.3f}")
    scn["expected"] = {"first_finding": "pipeline_bubble", "ranks": [int(r) for r in ranks],
                       "why": "the only idle is the schedule's (measured bubble above); with 16 micro-batches for 2 stages the theory is small, "
                              "the severity must follow the measured share",
                       "must_not": ["straggler", "small_collectives", "host_stall", "compute_imbalance"]}


def finalize_hang(scn, measured, notes):
    mz.finalize_hang(scn, measured, notes)


FINALIZE = {"sb_w2": finalize_buckets, "sb_w6": finalize_buckets, "buckets_3mb_w3": finalize_buckets,
            "two_problems": finalize_buckets,
            "hs_one_metric": finalize_sync, "hs_many_annot": finalize_sync, "hs_many_unann": finalize_sync,
            "barrier_step": finalize_sync, "pp_gpipe2_mb16": finalize_gpipe2,
            "hang_skip_r0": finalize_hang, "hang_early_exit_r0": finalize_hang, "hang_allgather_shape": finalize_hang, "hang_broadcast_shape": finalize_hang, "hang_wrong_group": finalize_hang}


def validate(scn, measured):
    """make_zoo_blind's checks (an injected late rank must be the last in most steps; a healthy
    run must not have a persistent late rank), plus: the pipeline stall's stage slept."""
    problems = mzb.validate_variant(scn, measured)
    if scn["name"] == "pp_stall_stage":
        for s in measured["1"]["steps"]:
            if s.get("injected_sleep_ms", 0) < 150:
                problems.append(f"stage 1 slept only {s.get('injected_sleep_ms')} ms in step {s['step']}")
    return problems


def run_ranks(scn, workdir, deadline_s):
    """make_zoo_blind's launcher; `runner` (when given) picks the rank code of a kind."""
    return mzb.run_variant_ranks(dict(scn, kind=scn.get("runner", scn["kind"])), workdir, deadline_s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only")
    a = ap.parse_args()
    mz.run_ranks = run_ranks
    mz.validate = validate
    mz.FINALIZE = FINALIZE
    todo = SCENARIOS
    if a.only:
        want = a.only.split(",")
        todo = [s for s in SCENARIOS if s["name"] in want]
    for scn in todo:
        try:
            mz.print_doc(mz.generate(scn, os.path.abspath(a.out)))
        except Exception as e:  # noqa: BLE001
            print(f"!! {scn['name']} failed: {e}", file=sys.stderr)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
