#!/usr/bin/env python3
"""The what-if replay's accuracy on every real run the project keeps (BENCHMARKS.md, "What-if").

    cargo build -p rankscope-cli && python3 tests/whatif/replay_accuracy.py > /tmp/table.md

For each folder of rank traces (the zoo's scenarios, its layout runs and pairs, and the shared
gloo and DLRM runs), `rankscope analyze --json` and its `whatif`: per step the recorded step
time against the replay of the job with its recorded durations; the mean and the largest
relative error; whether the replay is within the bounds (mean <= 5%, every step <= 15%) and
whether the judging layer takes gains from it (within the bounds, and no point-to-point exchange:
docs/metrics.md, "What-if").
"""
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.path.join(ROOT, "target", "debug", "rankscope")


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
        why = "no (too far)" if not ok else ("no (point-to-point)" if w["p2p"] else "yes")
        used.append(ok)
        print(f"| `{name}` | {len(w['steps'])} | {rec:.1f} | {rep:.1f} | {100 * w['mean_error']:.1f}% | {100 * w['max_error']:.1f}% | {why} |")
    print(f"\n{sum(used)} of {len(used)} replayed runs within the bounds.", file=sys.stderr)


if __name__ == "__main__":
    main()
