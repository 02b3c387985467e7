#!/usr/bin/env python3
"""`./x bench [--quick] [--wasm]`: generates its inputs, measures, and writes the measured
tables of BENCHMARKS.md (between `<!-- bench:begin -->` and `<!-- bench:end -->`) from one run.

Every figure sits next to its yardstick measured in the same run, because the shared 2-core
machine's absolute speed moves with the other users' load (noted with each table): ratios hold,
absolute times do not. Each timing is repeated and reported as min–max.

Inputs (in target/bench-run/, the largest deleted at the end):
  - single-rank synth traces (`rankscope synth --ranks 1 --target-mb N`): the size series;
  - the 4-rank gloo job of ../shared/traces with and without a user rule that makes every
    `aten::` operator data loading (issue 12's quadratic case).

Requires a release build of `rankscope` and of the `ingest_bench` example (./x bench builds
them). `--wasm` also times the npm package (target/npm, `./x npm`) in Node against the native
analyze on the same files.
"""

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "target/release/rankscope"
INGEST = ROOT / "target/release/examples/ingest_bench"
SHARED = Path(os.environ.get("RANKSCOPE_SHARED", ROOT.parent / "shared"))
OUT = ROOT / "target/bench-run"


def load():
    return os.getloadavg()[0]


def timed(cmd, stdout=subprocess.DEVNULL, env=None):
    """Runs `cmd` under /usr/bin/time: (wall s, user+sys s, peak RSS MB)."""
    tf = OUT / "time.txt"
    subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", str(tf)] + [str(c) for c in cmd],
                   stdout=stdout, stderr=subprocess.DEVNULL, check=True,
                   env=None if env is None else {**os.environ, **env})
    wall, user, sys_, rss = tf.read_text().split()[-4:]
    return float(wall), float(user) + float(sys_), int(rss) / 1024


def repeat(cmd, n, env=None):
    return [timed(cmd, env=env) for _ in range(n)]


def span(xs, fmt="{:.2f}"):
    lo, hi = min(xs), max(xs)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}–{fmt.format(hi)}"


def synth(name, mb, ranks=1):
    d = OUT / name
    if not (d / "manifest.json").exists():
        subprocess.run([BIN, "synth", "--out", d, "--ranks", str(ranks), "--target-mb", str(mb)],
                       stdout=subprocess.DEVNULL, check=True)
    return d


def ingest_bench(path):
    out = subprocess.run([INGEST, path], capture_output=True, text=True, check=True).stdout
    vals = {}
    for line in out.splitlines():
        if line.startswith("bench "):
            for kv in line.split()[1:]:
                k, v = kv.split("=")
                vals[k] = float(v)
    return vals


def machine():
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = next((l.split()[1] for l in Path("/proc/meminfo").read_text().splitlines()
                if l.startswith("MemTotal")), "0")
    return f"{os.cpu_count()} cores ({cpu}), {int(mem) / 2**20:.0f} GiB, {platform.machine()}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller inputs, 2 repeats (a few minutes)")
    ap.add_argument("--wasm", action="store_true", help="also time the npm package in Node")
    ap.add_argument("--write", default=str(ROOT / "BENCHMARKS.md"), help="file whose bench block is replaced")
    ap.add_argument("--keep", action="store_true", help="keep the generated inputs")
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    sizes = [100, 200, 400] if a.quick else [250, 500, 1000, 2000]
    reps = 2 if a.quick else 3
    mid = sizes[1]
    loads = [load()]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    md = []
    say = lambda s: print(f"==> {s}", file=sys.stderr, flush=True)

    # 1. Parse stages and the yardsticks, on the middle size.
    f = synth(f"m{mid}", mid) / "rank0.pt.trace.json"
    size_mb = f.stat().st_size / 1e6
    say(f"stages and yardsticks on {size_mb:.0f} MB")
    stages = [ingest_bench(f) for _ in range(reps)]
    inspect_runs = repeat([BIN, "inspect", "--json", f], reps)
    analyze_runs = repeat([BIN, "analyze", "--json", f], reps)
    # One file on one core vs every core (rankscope-host read_trace_split), interleaved.
    one, every = [], []
    for _ in range(reps):
        one += repeat([BIN, "inspect", "--json", f], 1, env={"RANKSCOPE_PARSE_THREADS": "1"})
        every += repeat([BIN, "inspect", "--json", f], 1)
    loads.append(load())
    rate = lambda s: size_mb / s
    parse = [s["parse_s"] for s in stages]
    serde = [s["serde_skip_s"] for s in stages]
    an_wall = [r[0] for r in analyze_runs]
    an_cpu = [r[1] for r in analyze_runs]
    md += [
        f"### Ingest and analysis, one {size_mb:.1f} MB single-rank synth trace "
        f"(`rankscope synth --ranks 1 --target-mb {mid}`, {int(stages[0]['events']):,} events)",
        "",
        "| what | time | rate | ratio to the parse into columns |",
        "|---|---|---|---|",
        f"| parse: 4 MiB reads → columns (`ingest_bench`, the yardstick) | {span(parse)} s | "
        f"{span([rate(x) for x in parse], '{:.0f}')} MB/s | 1 |",
        f"| + normalize | {span([s['normalize_s'] for s in stages], '{:.3f}')} s | | |",
        f"| + inspect report | {span([s['report_s'] for s in stages], '{:.3f}')} s | | |",
        f"| bare `serde_json` skip (`IgnoredAny`) | {span(serde)} s | "
        f"{span([rate(x) for x in serde], '{:.0f}')} MB/s | {min(parse) / max(serde):.2f}–{max(parse) / min(serde):.2f} (speed) |",
        f"| `rankscope inspect --json` | {span([r[0] for r in inspect_runs])} s wall | "
        f"{span([rate(r[0]) for r in inspect_runs], '{:.0f}')} MB/s | "
        f"{min(parse) / max(r[0] for r in inspect_runs):.2f}–{max(parse) / min(r[0] for r in inspect_runs):.2f} |",
        f"| `rankscope analyze --json` | {span(an_wall)} s wall, {span(an_cpu)} s CPU | "
        f"{span([rate(x) for x in an_wall], '{:.0f}')} MB/s | "
        f"{min(parse) / max(an_wall):.2f}–{max(parse) / min(an_wall):.2f} (target ≥ 0.8) |",
        f"| `inspect --json`, the file on 1 core (`RANKSCOPE_PARSE_THREADS=1`) | {span([r[0] for r in one])} s wall, "
        f"{span([r[1] for r in one])} s CPU | {span([rate(r[0]) for r in one], '{:.0f}')} MB/s | "
        f"peak RSS {min(r[2] for r in one):.0f} MB |",
        f"| `inspect --json`, the file on every core (split at seams) | {span([r[0] for r in every])} s wall, "
        f"{span([r[1] for r in every])} s CPU | {span([rate(r[0]) for r in every], '{:.0f}')} MB/s | "
        f"{min(r[0] for r in one) / max(r[0] for r in every):.2f}–{max(r[0] for r in one) / min(r[0] for r in every):.2f}× "
        f"the 1-core wall (target ≥ 1.7 on 2 cores); peak RSS {min(r[2] for r in every):.0f} MB |",
        f"| peak RSS, `analyze` | {span([r[2] for r in analyze_runs], '{:.0f}')} MB | | "
        f"{min(r[2] for r in analyze_runs) / size_mb:.2f}× input (target ≤ 0.3) |",
        "",
    ]

    # 2. Linear in size: inspect on each size, one after another in the same run.
    say("size series")
    rows = []
    for mb in sizes:
        p = synth(f"m{mb}", mb) / "rank0.pt.trace.json"
        runs = repeat([BIN, "inspect", "--json", p], reps)
        rows.append((p.stat().st_size / 1e6, runs))
    loads.append(load())
    md += [
        "### Linear in size: `rankscope inspect --json` on single-rank synth traces",
        "",
        "| input | wall | CPU (user + sys) | CPU per MB, relative to the smallest | peak RSS |",
        "|---|---|---|---|---|",
    ]
    base = min(r[1] for r in rows[0][1]) / rows[0][0]
    for mb, runs in rows:
        cpu = min(r[1] for r in runs)
        md.append(f"| {mb:.0f} MB | {span([r[0] for r in runs])} s | {span([r[1] for r in runs])} s | "
                  f"{cpu / mb / base:.2f} | {min(r[2] for r in runs):.0f} MB = {min(r[2] for r in runs) / mb:.2f}× |")
    md.append("")

    # 3. The data-loading rule of issue 12 on the gloo job.
    gloo = SHARED / "traces/ddp-gloo-cpu-4rank"
    if gloo.is_dir():
        say("gloo job with and without the aten:: data-loading rule")
        rules = OUT / "aten_data_loading.json"
        rules.write_text(json.dumps({"version": 1, "rules": [
            {"name_prefix": ["aten::"], "lane": "cpu", "class": "data_loading"}]}))
        plain = repeat([BIN, "analyze", "--json", gloo], reps + 2)
        ruled = repeat([BIN, "analyze", "--rules", rules, "--json", gloo], reps + 2)
        md += [
            "### A user rule making every `aten::` operator data loading (4-rank gloo job, 1.1 MB gzip)",
            "",
            "| what | wall | CPU |",
            "|---|---|---|",
            f"| `rankscope analyze --json ddp-gloo-cpu-4rank` (the yardstick) | {span([r[0] for r in plain])} s | {span([r[1] for r in plain])} s |",
            f"| the same with `--rules aten_data_loading.json` | {span([r[0] for r in ruled])} s | {span([r[1] for r in ruled])} s |",
            "",
        ]

    # 4. wasm in Node against native, on the same files.
    npm = ROOT / "target/npm/node.js"
    if a.wasm and npm.exists():
        say("wasm (npm package) in Node vs native")
        job = synth("job8", 8 if a.quick else 32, ranks=8)
        script = OUT / "node_analyze.mjs"
        script.write_text(
            f"import {{ analyze }} from {json.dumps(str(npm))};\n"
            f"const r = await analyze([{json.dumps(str(job))}]);\n"
            "if (!r.schema) process.exit(1);\n")
        nat = repeat([BIN, "analyze", "--json", job], reps)
        node = repeat(["node", script], reps)
        mb = sum(p.stat().st_size for p in job.glob("rank*.json*")) / 1e6
        md += [
            f"### wasm in Node 20 (the npm package, 1 thread) vs native (2 threads): 8 ranks, {mb:.0f} MB",
            "",
            "| what | wall | CPU | peak RSS |",
            "|---|---|---|---|",
            f"| `rankscope analyze --json` (native) | {span([r[0] for r in nat])} s | {span([r[1] for r in nat])} s | {min(r[2] for r in nat):.0f} MB |",
            f"| `analyze()` in Node (wasm, incl. instantiation) | {span([r[0] for r in node])} s | {span([r[1] for r in node])} s | {min(r[2] for r in node):.0f} MB |",
            f"| ratio (native CPU / wasm CPU) | {min(r[1] for r in nat) / min(r[1] for r in node):.2f} | | |",
            "",
        ]
    loads.append(load())

    head = [
        f"Measured by `./x bench{' --quick' if a.quick else ''}{' --wasm' if a.wasm else ''}` "
        f"on {started}: {machine()}; load average (1 min) during the run "
        f"{min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores (the machine is shared: "
        f"compare ratios within a table, not absolute times across runs). Times are min–max of "
        f"{reps} runs.",
        "",
    ]
    block = "\n".join(head + md).rstrip() + "\n"
    print(block)
    target = Path(a.write)
    if target.exists():
        text = target.read_text()
        pat = re.compile(r"(<!-- bench:begin -->\n).*?(<!-- bench:end -->)", re.S)
        if pat.search(text):
            target.write_text(pat.sub(lambda m: m.group(1) + block + m.group(2), text))
            say(f"wrote the bench block of {target}")
    if not a.keep:
        big = OUT / f"m{sizes[-1]}"
        shutil.rmtree(big, ignore_errors=True)


if __name__ == "__main__":
    main()
