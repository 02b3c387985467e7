#!/usr/bin/env python3
"""Third blind check: shapes the zoo lacked, run as a new user would (README.md, "Third blind
check"): the same host stall on every rank (annotated, and from a hook with no annotation), the
same stall on two of four ranks, and a core taken by another process from the third of six
profiled steps on (a device that slows mid-run). Same machinery as make_zoo.py (`generate`,
the rank code in zoo_workers.py); `expected` is written here, and the validation of make_zoo
(one late rank) does not apply to stalls every rank has.

    python make_zoo_blind3.py --out tests/zoo [--only stall_all_4rank,...]"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_zoo as mz  # noqa: E402
dp = mz.dp
DPF = mz.DP_FALSE_POSITIVES
SCENARIOS = [
    dict(name="stall_all_4rank", kind="dp", world_size=4, seed=8100,
         description="every rank sleeps 200 ms per step in record_function('save_state') inside forward: the same host stall on all ranks, no straggler",
         cfg=dp(inject={"kind": "sleep_in_forward", "ranks": [0, 1, 2, 3], "amount_ms": 200, "where": "save_state"}),
         injected={"cause": "host_stall", "ranks": [0, 1, 2, 3], "where": "forward/save_state", "amount_ms": 200, "how": "time.sleep(0.2)"},
         expected={"first_finding": "host_stall", "ranks": [0, 1, 2, 3], "must_not": ["straggler", "compute_imbalance", "slow_device", "input_bound", "small_collectives"]}),
    dict(name="stall_all_unann", kind="dp", world_size=3, seed=8200,
         description="every rank sleeps 150 ms per step in a forward hook of the middle block (no annotation)",
         cfg=dp(inject={"kind": "sleep_mid_forward", "ranks": [0, 1, 2], "amount_ms": 150}),
         injected={"cause": "host_stall", "ranks": [0, 1, 2], "where": "forward (hook)", "amount_ms": 150, "how": "time.sleep(0.15) in a forward hook"},
         expected={"first_finding": "host_stall", "ranks": [0, 1, 2], "must_not": ["straggler", "compute_imbalance", "slow_device", "input_bound"]}),
    dict(name="stall_two_ranks", kind="dp", world_size=4, seed=8300,
         description="ranks 1 and 2 both sleep 250 ms per step in record_function('straggler_sleep') inside forward",
         cfg=dp(inject={"kind": "sleep_in_forward", "ranks": [1, 2], "amount_ms": 250, "where": "straggler_sleep"}),
         injected={"cause": "host_stall", "ranks": [1, 2], "where": "forward/straggler_sleep", "amount_ms": 250, "how": "time.sleep(0.25)"},
         expected={"first_finding": "host_stall", "ranks": [1, 2], "must_not": ["compute_imbalance", "slow_device", "input_bound", "small_collectives"]}),
    dict(name="hog_from_step2", kind="dp", world_size=2, seed=8400,
         description="a process starts spinning on rank 1's core at the third of 6 profiled steps and stays (throttling mid-run): 4 of 6 steps slow",
         cfg=dp(dataloader=True, item_sleep_ms=0.0, pin=True, active=6,
                inject={"kind": "cpu_hog_once", "ranks": [1], "step": 4, "amount_ms": 60000}),
         injected={"cause": "slow_device", "ranks": [1], "how": "a process spinning on rank 1's core from profiled step 2 (0-based) to the end"},
         expected={"first_finding": "slow_device", "ranks": [1], "must_not": ["host_stall", "input_bound", "small_collectives", "host_sync"]}),
]

if __name__ == "__main__":
    mz.main_listed(SCENARIOS)
