#!/usr/bin/env python3
"""The what-if replay's accuracy on every real run the project keeps (BENCHMARKS.md, "What-if").

    cargo build -p rankscope-cli && python3 tests/whatif/replay_accuracy.py > /tmp/table.md

For each folder of rank traces (the zoo's scenarios, its layout runs and pairs, and the shared
gloo and DLRM runs), `rankscope analyze --json` and its `whatif`: per step the recorded step
time against the replay of the job with its recorded durations; the mean and the largest
relative error; whether the replay is within the bounds (mean <= 5%, every step <= 15%) and
whether the judging layer takes gains from it (within the bounds; a rank with no peers doing the
same work, a pipeline stage without replicas, gets none: docs/metrics.md, "What-if").

Then the paired runs (the same job with and without one cause on one rank): the difference of
their own step times (each run's `measured` in its scenario.json: per step the slowest rank's
`step_ms`, the median over steps) against the replay's gain for that rank in the run with the
cause (`whatif.ranks[].gain_ns`, the late rank brought to its peers).
"""
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("RANKSCOPE_CLI") or os.path.join(ROOT, "target", "debug", "rankscope")


def runs():
    zoo = os.path.join(ROOT, "tests", "zoo")
    for d in sorted(glob.glob(os.path.join(zoo, "*")) + glob.glob(os.path.join(zoo, "*", "*"))):
        if glob.glob(os.path.join(d, "rank*.pt.trace.json.gz")):
            yield os.path.relpath(d, ROOT), d
    shared = os.path.join(ROOT, "..", "shared", "traces")
    for d in sorted(glob.glob(os.path.join(shared, "*"))):
        if os.path.isdir(d):
            yield "../shared/traces/" + os.path.basename(d), d


def main():
    print("| run | steps | recorded mean (ms) | replayed mean (ms) | mean error | max error | gains used |")
    print("|---|---|---|---|---|---|---|")
    used = []
    for name, d in runs():
        p = subprocess.run([CLI, "analyze", "--json", d], capture_output=True, text=True)
        try:
            a = json.loads(p.stdout)
        except json.JSONDecodeError:
            continue
        w = a.get("whatif")
        if not w or not w["steps"]:
            print(f"| `{name}` | – | – | – | – | – | no collectives to replay |")
            continue
        rec = sum(s["recorded_ns"] for s in w["steps"]) / len(w["steps"]) / 1e6
        rep = sum(s["replayed_ns"] for s in w["steps"]) / len(w["steps"]) / 1e6
        ok = w["mean_error"] <= 0.05 and w["max_error"] <= 0.15
        alone = w.get("alone") or []
        why = "no (too far)" if not ok else (f"yes (no peers for rank(s) {', '.join(map(str, alone))})" if alone else "yes")
        used.append(ok)
        print(f"| `{name}` | {len(w['steps'])} | {rec:.1f} | {rep:.1f} | {100 * w['mean_error']:.1f}% | {100 * w['max_error']:.1f}% | {why} |")
    print(f"\n{sum(used)} of {len(used)} replayed runs within the bounds.", file=sys.stderr)
    print()
    pairs()


# (run without the cause, run with it, the rank that carries it); the same job otherwise.
PAIRS = [
    ("pairs/pair_neither", "pairs/pair_loader", 3),
    ("pairs/pair_buckets", "pairs/pair_both", 3),
    ("pairs/base", "pairs/slow_loader_r3", 3),
    ("pairs/base", "pairs/uneven_r0", 0),
    ("repeat/baseline_b", "repeat/host_stall_b", 2),
    ("layout/tp2_dp2_healthy", "layout/tp2_dp2_stall", 3),
    ("layout/hsdp_2x2_healthy", "layout/hsdp_2x2_slow_loader", 1),
    ("fsdp_tp/healthy", "fsdp_tp/stall_r3", 3),
]


def job_steps_ms(d):
    """Per profiled step the slowest rank's `step_ms` (the job's step ends when its last rank's does)."""
    with open(os.path.join(d, "scenario.json")) as f:
        per_rank = json.load(f)["measured"]["per_rank"]
    n = min(len(r["steps"]) for r in per_rank.values())
    return [max(r["steps"][i]["step_ms"] for r in per_rank.values()) for i in range(n)]


def measured_step_ms(d):
    job = sorted(job_steps_ms(d))
    return job[(len(job) - 1) // 2]


def noise_ms(a, b):
    """Twice the standard error of the difference of the two runs' mean steps (as
    crates/rankscope-core/tests/whatif_pairs.rs allows)."""
    def se2(d):
        v = job_steps_ms(d)
        m = sum(v) / len(v)
        return sum((x - m) ** 2 for x in v) / (len(v) - 1) / len(v)
    return 2 * (se2(a) + se2(b)) ** 0.5


def injected_ms(d):
    with open(os.path.join(d, "scenario.json")) as f:
        inj = json.load(f).get("injected") or {}
    return inj.get("amount_ms")


def pairs():
    print("| pair (base → with the cause) | rank | injected (ms) | measured difference (ms) | runs' noise (± ms) | replayed gain (ms) | off by | within 25% or the noise |")
    print("|---|---|---|---|---|---|---|---|")
    zoo = os.path.join(ROOT, "tests", "zoo")
    for base, cause, rank in PAIRS:
        b, c = os.path.join(zoo, base), os.path.join(zoo, cause)
        want = measured_step_ms(c) - measured_step_ms(b)
        noise = noise_ms(b, c)
        inj = injected_ms(c)
        inj = f"{inj:.0f}" if inj is not None else "–"
        p = subprocess.run([CLI, "analyze", "--json", c], capture_output=True, text=True)
        w = (json.loads(p.stdout) if p.stdout else {}).get("whatif") or {}
        got = next((g["gain_ns"] / 1e6 for g in w.get("ranks", []) if g["rank"] == rank), None)
        if got is None:
            print(f"| `{base}` → `{cause}` | {rank} | {inj} | {want:.0f} | {noise:.0f} | – | – | – |")
            continue
        holds = "yes" if abs(got - want) <= max(0.25 * want, noise) else "no"
        print(f"| `{base}` → `{cause}` | {rank} | {inj} | {want:.0f} | {noise:.0f} | {got:.0f} | {100 * (got - want) / want:+.0f}% | {holds} |")


if __name__ == "__main__":
    main()
