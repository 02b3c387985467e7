"""The scale figures of BENCHMARKS.md ("Python and Ray"): one process against Ray with 1 and 2
local workers on a 64-rank synthetic job, and the part size per rank. Not a test (timings):
run it with the wheel and Ray installed,

    RANKSCOPE_BIN=target/release/rankscope python tests/py/bench_ray.py [--ranks 64] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(f):
    t = time.perf_counter()
    v = f()
    return v, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    bin_ = os.environ.get("RANKSCOPE_BIN", "target/release/rankscope")
    d = args.dir or Path(tempfile.mkdtemp(prefix="rankscope-bench-"))
    if not (d / "manifest.json").exists():
        subprocess.run([bin_, "synth", "--ranks", str(args.ranks), "--out", str(d)], check=True, capture_output=True)
    files = sorted(d.glob("rank*.json"))
    size = sum(f.stat().st_size for f in files)
    print(f"job: {len(files)} ranks, {size / 1e6:.1f} MB in {d}")

    import ray
    import rankscope
    import rankscope.ray

    best = lambda f: min(timed(f)[1] for _ in range(args.repeat))  # noqa: E731
    _, t_cli = timed(lambda: subprocess.run([bin_, "analyze", "--json", str(d)], check=True, capture_output=True))
    print(f"CLI rankscope analyze --json: {t_cli:.2f} s")
    local = rankscope.analyze(d, progress=False)
    print(f"rankscope.analyze (one process, {os.cpu_count()} cores): {best(lambda: rankscope.analyze(d, progress=False)):.2f} s")
    parts = [rankscope.part(f) for f in files]
    print(
        f"part per rank: mean {sum(map(len, parts)) / len(parts) / 1e3:.1f} kB, max {max(map(len, parts)) / 1e3:.1f} kB"
        f" (trace mean {size / len(files) / 1e6:.2f} MB)"
    )
    print(f"part() one by one, one thread: {best(lambda: [rankscope.part(f) for f in files]):.2f} s")
    names = [str(f) for f in files]
    print(f"combine of {len(parts)} parts: {best(lambda: rankscope.combine(parts, names=names)):.3f} s")
    for cpus in (1, 2):
        _, t_init = timed(lambda: ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False))
        first = timed(lambda: rankscope.ray.analyze(d))
        assert first[0].json() == local.json(), "Ray's answer differs from the local one"
        t = best(lambda: rankscope.ray.analyze(d))
        print(f"Ray, {cpus} local worker(s): {t:.2f} s (first call {first[1]:.2f} s; ray.init {t_init:.1f} s)")
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
