#!/usr/bin/env python3
"""More zoo scenarios, from a blind generalisation check of the diagnosis (README.md, "Blind
runs"): problems the first zoo did not have in these shapes (an FSDP straggler, an uneven batch
without annotations, a stall inside an autograd node, a stall every other step), generated with
make_zoo.py's machinery (its `generate`, validation adapted) and the rank code in
zoo_workers_blind.py.

    python make_zoo_blind.py --out tests/zoo [--only fsdp_straggler,...]
"""

import argparse
import copy
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import make_zoo as mz  # noqa: E402

ANN_PLAIN, ANN_HASH, ANN_NONE, ANN_SHORT = mz.ANN_PLAIN, mz.ANN_HASH, mz.ANN_NONE, mz.ANN_SHORT
DPF = mz.DP_FALSE_POSITIVES
TINY = dict(in_dim=256, width=256, depth=3, batch=32)


def dp(**kw):
    cfg = copy.deepcopy(mz.DP_DEFAULTS)
    cfg.update(kw)
    return cfg


def stall_expected(ranks, where):
    return {"first_finding": "host_stall", "ranks": ranks, "cause": "host_stall", "where": where,
            "must_not": ["compute_imbalance", "input_bound", "small_collectives"]}


SCENARIOS = [
    dict(name="fsdp_straggler", kind="dp", world_size=3, seed=5800,
         description="FSDP2 (fully_shard per block + root, width 512, 3 blocks) at world 3; rank 0 sleeps 300 ms per step in "
                     "record_function('straggler_sleep') after the forward (inside 'forward'). The other ranks wait in "
                     "backward's first all_gather, inside an autograd node (autograd::engine::evaluate_function: ...) whose "
                     "FSDP hook is annotated (FSDP::pre_backward > FSDP::all_gather).",
         cfg=dp(width=512, depth=3, fsdp=True, annotations={"forward": "forward", "backward": None, "optimizer": None},
                inject=[{"kind": "sleep_in_forward", "ranks": [0], "amount_ms": 300, "where": "straggler_sleep"}]),
         injected={"cause": "host_stall", "ranks": [0], "where": "forward/straggler_sleep", "amount_ms": 300,
                   "how": "time.sleep(0.3) inside record_function('straggler_sleep') inside record_function('forward'), every step, rank 0 only"},
         expected=stall_expected([0], "straggler_sleep")),
    dict(name="uneven_batch_unannotated", kind="dp", world_size=4, seed=5600,
         description="DDP baseline MLP at world 4, no annotations at all; rank 3 (the last) gets batch 160 against 64. On 2 "
                     "shared cores the host's scheduler also lets rank 3 wait in its optimizer (its phase total is ~2x the "
                     "others'), though its optimizer's work is the same.",
         cfg=dp(annotations=ANN_NONE, inject=[{"kind": "batch_multiplier", "ranks": [3], "factor": 2.5}]),
         injected={"cause": "compute_imbalance", "ranks": [3], "where": "forward + backward (2.5x batch)", "amount_ms": None,
                   "how": "rank 3 batch 160, ranks 0-2 batch 64"},
         expected={"first_finding": "compute_imbalance", "ranks": [3], "also": "not slow_device: same optimizer work",
                   "must_not": ["slow_device", "input_bound", "host_stall", "small_collectives"]}),
    dict(name="host_stall_backward_hook", kind="dp", world_size=4, seed=6700,
         description="DDP baseline at world 4; rank 1 sleeps 200 ms per step in a full backward hook of the middle block: it runs "
                     "inside the autograd node the hook adds (autograd::engine::evaluate_function: BackwardHookFunctionBackward), "
                     "an operator, with no annotation of its own.",
         cfg=dp(inject=[{"kind": "sleep_in_backward_hook", "ranks": [1], "amount_ms": 200}]),
         injected={"cause": "host_stall", "ranks": [1], "where": "backward (hook inside an autograd node)", "amount_ms": 200,
                   "how": "module.register_full_backward_hook(lambda *a: time.sleep(0.2)) on the middle block, rank 1 only"},
         expected={"first_finding": "host_stall", "ranks": [1], "cause": "host_stall",
                   "where": "autograd::engine::evaluate_function: BackwardHookFunctionBackward",
                   "must_not": ["compute_imbalance", "slow_device", "input_bound", "small_collectives"]}),
    dict(name="intermittent_stall", kind="dp", world_size=4, seed=6800,
         description="DDP baseline at world 4; rank 2 sleeps 400 ms in record_function('checkpoint') inside forward every "
                     "other step (profiled steps 2 and 4 of 2-5), like a periodic checkpoint: late in half the steps only.",
         cfg=dp(inject=[{"kind": "sleep_in_forward", "ranks": [2], "amount_ms": 400, "where": "checkpoint", "every": 2}]),
         injected={"cause": "host_stall", "ranks": [2], "where": "forward/checkpoint, every other step", "amount_ms": 400,
                   "how": "time.sleep(0.4) in record_function('checkpoint') inside forward when step % 2 == 0, rank 2 only"},
         expected=dict(stall_expected([2], "checkpoint"), steps=[2, 4])),
]


def run_variant_ranks(scn, workdir, deadline_s):
    """make_zoo.run_ranks, but the ranks run this script's worker code."""
    import json, signal, subprocess, time  # noqa: E401
    spec = {"kind": scn["kind"], "world_size": scn["world_size"], "cfg": dict(scn["cfg"], seed=scn["seed"])}
    with open(os.path.join(workdir, "spec.json"), "w") as f:
        json.dump(spec, f)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(mz.free_port()), OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONHASHSEED="0", PYTHONUNBUFFERED="1")
    env.update(scn.get("env", {}))
    procs = []
    for r in range(scn["world_size"]):
        log = open(os.path.join(workdir, f"log_rank{r}.txt"), "w")
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", "spec.json", "--rank", str(r)],
                             cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append((p, log))
    t0 = time.time()
    killed = []
    for p, _ in procs:
        try:
            p.wait(timeout=max(deadline_s - (time.time() - t0), 0.1))
        except subprocess.TimeoutExpired:
            pass
    for r, (p, log) in enumerate(procs):
        if p.poll() is None:
            killed.append(r)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        log.close()
    return {"returncodes": [p.returncode for p, _ in procs], "killed_ranks": killed, "wall_s": round(time.time() - t0, 1)}


def validate_variant(scn, measured):
    """Only what makes a run unusable: an injected single/multi-rank stall whose ranks are not
    the last to reach backward in most steps, a healthy run with a persistent late rank."""
    problems = []
    if scn["kind"] != "dp":
        return problems
    ranks = sorted(measured)
    n = len(measured[ranks[0]]["steps"])
    inj = [str(r) for r in (scn["injected"] or {}).get("ranks", [])]
    step_ms = statistics.fmean(s["step_ms"] for m in measured.values() for s in m["steps"])
    key = "last_grad_ready_unix_ns" if all("last_grad_ready_unix_ns" in s for m in measured.values() for s in m["steps"]) else "backward_start_unix_ns"
    late_counts = {r: 0 for r in ranks}
    for i in range(n):
        t = {r: measured[r]["steps"][i][key] for r in ranks}
        order = sorted(ranks, key=lambda r: -t[r])
        for r in order[:max(1, len(inj))]:
            late_counts[r] += 1
    every = max((i.get("every", 1) for i in scn["cfg"].get("inject", [])), default=1)
    if scn["injected"] and len(inj) < len(ranks) and scn["expected"]["first_finding"] in ("host_stall", "input_bound", "compute_imbalance"):
        for r in inj:
            if every > 1:
                # A stall every `every` steps: the rank is the last in exactly those steps.
                for i in range(n):
                    st = measured[r]["steps"][i]["step"]
                    t = {q: measured[q]["steps"][i][key] for q in ranks}
                    if (st % every == 0) != (max(t, key=t.get) == r):
                        problems.append(f"step {st}: rank {r} last={max(t, key=t.get) == r}, stalled={st % every == 0}")
            elif late_counts[r] < (n + 1) // 2 + 1:
                problems.append(f"injected rank {r} last in only {late_counts[r]}/{n} steps ({key})")
    if not scn["injected"]:
        for r in ranks:
            if late_counts[r] == n and n > 1:
                problems.append(f"healthy run: rank {r} last in every step")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--only")
    ap.add_argument("--worker")
    ap.add_argument("--rank", type=int)
    a = ap.parse_args()
    if a.worker:
        import zoo_workers_blind
        zoo_workers_blind.worker_main(a.worker, a.rank)
        return
    mz.run_ranks = run_variant_ranks
    mz.validate = validate_variant
    mz.FINALIZE = {}
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
