"""Pairs of real runs for `rankscope diff` (issue 36): one DDP job (the zoo's baseline model,
4 ranks, gloo on CPU, a real DataLoader with 1 ms per item) run as it is, run again, and run with
one change each. Every run uses the same seed, so the runs differ by the change and by the
machine's noise only.

    python make_pairs.py --out tests/zoo/pairs            # every run (about 3 minutes)
    python make_pairs.py --out /tmp/p --only base,base_again

The runs go through make_zoo.py's machinery (its rank code, checks, measurements and
scenario.json), so each folder reads like a zoo scenario.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_zoo as z  # noqa: E402

SEED = 7000
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def base_cfg(**kw):
    return z.dp(dataloader=True, item_sleep_ms=1.0, **kw)


def healthy(name, description):
    return dict(
        name=name, kind="dp", world_size=4, seed=SEED, description=description, cfg=base_cfg(),
        injected=None, expected={"first_finding": None, "ranks": [], "must_not": z.DP_FALSE_POSITIVES},
    )


PAIRS = [
    healthy("base", "The zoo's baseline model and loop with a real DataLoader whose Dataset sleeps 1 ms per "
                    "item (64 items per step) on every rank: the base of every pair."),
    healthy("base_again", "`base` run again, unchanged (same configuration and seed): two runs of one "
                          "configuration, whose diff must say no change beyond noise."),
    dict(
        name="slow_loader_r3", kind="dp", world_size=4, seed=SEED,
        description="`base` with rank 3's Dataset 6x slower (6 ms per item vs 1 ms): rank 3 spends ~320 ms "
                    "more per step in the DataLoader and the others wait for it.",
        cfg=base_cfg(inject={"kind": "slow_getitem", "ranks": [3], "factor": 6.0}),
        injected={"cause": "input_bound", "ranks": [3], "where": LOADER, "amount_ms": 320,
                  "how": "Dataset.__getitem__ sleeps 6 ms per item on rank 3 vs 1 ms elsewhere; 64 items per step"},
        expected={"first_finding": "input_bound", "ranks": [3],
                  "must_not": ["compute_imbalance", "host_stall", "small_collectives"]},
    ),
    dict(
        name="uneven_r0", kind="dp", world_size=4, seed=SEED,
        description="`base` with rank 0's batch doubled (128 vs 64): more compute on rank 0 only.",
        cfg=base_cfg(inject={"kind": "batch_multiplier", "ranks": [0], "factor": 2}),
        injected={"cause": "compute_imbalance", "ranks": [0], "where": "forward + backward (2x batch)",
                  "amount_ms": None, "how": "rank 0 batch 128, ranks 1-3 batch 64"},
        expected={"first_finding": "compute_imbalance", "ranks": [0],
                  "must_not": ["input_bound", "host_stall", "small_collectives"]},
    ),
    dict(
        name="buckets_1mb", kind="dp", world_size=4, seed=SEED,
        description="`base` with DDP's bucket_cap_mb=1 instead of 25: each 1024x1024 weight (4 MiB) is a "
                    "bucket of its own, many all_reduces per step instead of one.",
        cfg=base_cfg(bucket_cap_mb=1),
        injected={"cause": "small_collectives", "ranks": [0, 1, 2, 3], "where": "DDP bucketing",
                  "amount_ms": None, "how": "DistributedDataParallel(model, bucket_cap_mb=1)"},
        expected={"first_finding": None, "ranks": [0, 1, 2, 3], "must_not": ["straggler", "host_stall"]},
    ),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "pairs"))
    ap.add_argument("--only", help="comma-separated run names")
    a = ap.parse_args()
    todo = PAIRS if not a.only else [p for p in PAIRS if p["name"] in a.only.split(",")]
    z.generate_all(todo, lambda scn: z.print_doc(z.generate(scn, os.path.abspath(a.out))))


if __name__ == "__main__":
    main()
