"""A pair of real runs whose one change is an operator's work (issue 36: the diff verdict names
the operator): a small 2-rank DDP job (gloo on CPU) whose forward also multiplies A [rows, 1024]
by B [1024, 1024] with `torch.mm`; `mm_doubled` doubles A's rows on every rank (the product's
work doubles, every other operator is the same). `base` and `base_again` are the same
configuration run twice (the noise between runs). Every run uses the same seed.

    python make_opchange.py --out tests/zoo/opchange          # every run (about a minute)
    python make_opchange.py --out /tmp/o --only base,mm_doubled

The runs go through make_zoo.py's machinery (its rank code, checks, measurements and
scenario.json), so each folder reads like a zoo scenario.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_zoo as z  # noqa: E402

SEED = 7100
K = 1024
ROWS = 1024


def cfg(rows):
    # A small model and a foreach optimizer keep the traces small (few operators per step);
    # 5 profiled steps per run.
    return z.dp(in_dim=256, width=512, depth=1, batch=32, optimizer="sgd_foreach",
                active=5, extra_mm=[rows, K])


def healthy(name, description):
    return dict(
        name=name, kind="dp", world_size=2, seed=SEED, description=description, cfg=cfg(ROWS),
        injected=None, expected={"first_finding": None, "ranks": [], "must_not": z.DP_FALSE_POSITIVES},
    )


RUNS = [
    healthy("base", f"A 2-rank DDP MLP (width 512, 1 block, batch 32, SGD foreach) whose forward also "
                    f"runs torch.mm of [{ROWS}, {K}] x [{K}, {K}]: the base of the pair."),
    healthy("base_again", "`base` run again, unchanged (same configuration and seed): two runs of one "
                          "configuration, whose diff must say no change beyond noise."),
    dict(
        name="mm_doubled", kind="dp", world_size=2, seed=SEED,
        description=f"`base` with the extra matmul's rows doubled on every rank: torch.mm of "
                    f"[{2 * ROWS}, {K}] x [{K}, {K}] instead of [{ROWS}, {K}] x [{K}, {K}].",
        cfg=cfg(2 * ROWS),
        injected={"cause": "operator_work", "ranks": [0, 1], "where": "aten::mm in forward",
                  "amount_ms": None,
                  "how": f"A [{2 * ROWS}, {K}] instead of [{ROWS}, {K}] in forward's torch.mm (measured: extra_mm_ms)"},
        expected={"first_finding": None, "ranks": [0, 1], "must_not": ["straggler", "host_stall", "input_bound"],
                  "verdict_names": "aten::mm"},
    ),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "opchange"))
    ap.add_argument("--only", help="comma-separated run names")
    a = ap.parse_args()
    todo = RUNS if not a.only else [p for p in RUNS if p["name"] in a.only.split(",")]
    z.generate_all(todo, lambda scn: z.print_doc(z.generate(scn, os.path.abspath(a.out))))


if __name__ == "__main__":
    main()
