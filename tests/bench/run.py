#!/usr/bin/env python3
"""`./x bench [--quick] [--skip PARTS]`: generates its inputs, measures, and writes the measured
tables of BENCHMARKS.md (between `<!-- bench:begin -->` and `<!-- bench:end -->`) from one run.

Every figure sits next to its yardstick measured in the same run, because the shared 2-core
machine's absolute speed moves with the other users' load (noted with each table): ratios hold,
absolute times do not. Each timing is repeated and reported as min–max.

Inputs (in target/bench-run/, the largest deleted at the end):
  - single-rank synth traces (`rankscope synth --ranks 1 --target-mb N`): the size series;
  - the 4-rank gloo job of ../shared/traces with and without a user rule that makes every
    `aten::` operator data loading (issue 12's quadratic case);
  - for the browser: one ~1 M-event file (270 MB), about the same bytes as 8 ranks, and an
    8-rank job of ~7 M events (1.9 GB); for HTA an 8-rank job.

Parts (each can be left out with `--skip`, and the block then says so):
  - `wasm`: the npm package's `analyze()` in Node (tests/bench/node_analyze.mjs, one thread:
    what one app worker runs) against the native analyze and the bare parse on the same file;
  - `app`: the built app (dist/) in headless Chromium (tests/bench/app_bench.mjs): file selection
    to analysis ready, per worker against the Node wasm figure; the renderer's memory; the
    Timeline's frame intervals while zooming and panning at ~1 M and ~7 M events;
  - `hta`: Holistic Trace Analysis (PyPI, pinned, in a venv outside the repository that this
    script creates when missing: $RANKSCOPE_BENCH_VENV, default ~/.cache/rankscope/bench-venv)
    against `rankscope analyze --json` on the same 8-rank directory (tests/bench/hta_job.py);
  - `digest`: a 1,024-rank × 100-step job (10 steps with --quick) as parts and a job digest
    (made once, kept in target/bench-run/): `combine` of the parts, `analyze` of the digest, and
    the app opening the digest, with the Ranks × steps heatmap's frame intervals.

Requires a release build of `rankscope` and of the `ingest_bench` example, the npm package
(target/npm) and the app (dist/): `./x bench` builds them.
"""

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "target/release/rankscope"
INGEST = ROOT / "target/release/examples/ingest_bench"
SHARED = Path(os.environ.get("RANKSCOPE_SHARED", ROOT.parent / "shared"))
OUT = ROOT / "target/bench-run"
NPM = ROOT / "target/npm"
DIST = ROOT / "dist"
VENV = Path(os.environ.get("RANKSCOPE_BENCH_VENV", Path.home() / ".cache/rankscope/bench-venv"))
# HTA's newest release on PyPI (0.6.x is not published there); pandas < 3 as
# tests/oracle/HTA_TB.md explains (HTA 0.5.0 breaks on pandas 3). No torch: HTA does not need it.
HTA_PINS = ["holistictraceanalysis==0.5.0", "pandas==2.3.3"]


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


def tree_pss_kb(root):
    """The proportional set size (kB) of `root` and its descendants: shared pages (a forked
    worker's copy-on-write heap, libraries) counted once across the tree, unlike summed RSS."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                st = Path(f"/proc/{d}/stat").read_text()
                kids.setdefault(int(st[st.rindex(")") + 2:].split()[1]), []).append(int(d))
            except OSError:
                pass
    todo, total = [root], 0
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
        except OSError:
            pass
    return total


def sampled(cmd, stdout=subprocess.DEVNULL, env=None, sample=True):
    """Runs `cmd`, its process tree's memory sampled every 50 ms: (wall s, CPU s of it and every
    child it waited for, peak tree PSS MB, peak RSS MB of the largest single process). The
    sampling runs on a thread while this one blocks in `wait4`, so the wall time ends when the
    process does (a poll between samples would round a 0.25 s run up by as much as 50 ms).
    Reading a process's `smaps_rollup` walks its page tables under its memory map's lock, which
    slows a process that is mapping memory (0.23-0.25 s runs took 0.25-0.27 s): `sample=False`
    for the runs that are timed (peak PSS then 0)."""
    import threading

    peak = [0]
    done = threading.Event()
    t0 = time.perf_counter()
    p = subprocess.Popen([str(c) for c in cmd], stdout=stdout, stderr=subprocess.DEVNULL,
                         env=None if env is None else {**os.environ, **env})

    def sample_tree():
        while not done.is_set():
            peak[0] = max(peak[0], tree_pss_kb(p.pid))
            done.wait(0.05)

    th = threading.Thread(target=sample_tree, daemon=True)
    if sample:
        th.start()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    if sample:
        th.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise subprocess.CalledProcessError(p.returncode, cmd)
    return wall, ru.ru_utime + ru.ru_stime, peak[0] / 1024, ru.ru_maxrss / 1024


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


def mb_of(paths):
    return sum(Path(p).stat().st_size for p in paths) / 1e6


def ranks_of(job):
    return sorted(job.glob("rank*.pt.trace.json*"))


def node_analyze(inputs):
    """The npm package's analyze() in Node: (its JSON line, (wall, CPU, peak RSS) of the process)."""
    out = OUT / "node.json"
    with out.open("w") as fh:
        t = timed(["node", ROOT / "tests/bench/node_analyze.mjs", NPM] + list(inputs), stdout=fh)
    return json.loads(out.read_text()), t


def node_pair(halves):
    """Two of the npm package's analyze() in Node side by side (one process per half of the
    inputs, both started at once): the MB/s of each, each on the cores it shares with the other."""
    procs = []
    for i, h in enumerate(halves):
        fh = (OUT / f"node-pair{i}.json").open("w")
        procs.append((subprocess.Popen(["node", ROOT / "tests/bench/node_analyze.mjs", NPM] + [str(p) for p in h],
                                       stdout=fh), fh, h))
    rates = []
    for p, fh, h in procs:
        p.wait()
        fh.close()
        r = json.loads(Path(fh.name).read_text())
        rates.append(mb_of(h) / r["analyze_s"])
    return rates


def wasm_part(md, one, eight, reps, measured, say):
    """Item 1: wasm analyze in Node against the native analyze and the bare parse, same inputs.
    Returns the Node MB/s of each input (the app's yardstick)."""
    say(f"wasm (npm package) in Node vs native on {one.name} and the 8-rank job")
    mb1, mb8 = mb_of([one]), mb_of(ranks_of(eight))
    got = measured.get(one)
    parse = got["parse"] if got else [ingest_bench(one)["parse_s"] for _ in range(reps)]
    nat_every = got["analyze"] if got else repeat([BIN, "analyze", "--json", one], reps)
    nat_one, node_one, nat8, node8, pair = [], [], [], [], []
    ranks8 = ranks_of(eight)
    for _ in range(reps):  # interleaved: each pair sees the same minute's load
        nat_one += repeat([BIN, "analyze", "--json", one], 1, env={"RANKSCOPE_PARSE_THREADS": "1"})
        node_one.append(node_analyze([one]))
        nat8 += repeat([BIN, "analyze", "--json", eight], 1)
        node8.append(node_analyze([eight]))
        pair += node_pair([ranks8[: len(ranks8) // 2], ranks8[len(ranks8) // 2:]])
    ev1, ev8 = node_one[0][0]["events"], node8[0][0]["events"]
    w1 = [r[0]["analyze_s"] for r in node_one]
    w8 = [r[0]["analyze_s"] for r in node8]
    rate1 = lambda x: mb1 / x
    rate8 = lambda x: mb8 / x
    n1 = [r[0] for r in nat_one]
    md += [
        f"### wasm in Node 20 (the npm package's `analyze()`, one thread: what one app worker runs) "
        f"vs native, the same inputs",
        "",
        f"One file: `rankscope synth --ranks 1 --target-mb 270`, {mb1:.1f} MB, {ev1:,} events; 8 ranks: "
        f"`--ranks 8 --target-mb 34`, {mb8:.1f} MB, {ev8:,} events. Node's times are inside the process "
        f"(after instantiating the wasm, {span([r[0]['ready_s'] for r in node_one], '{:.2f}')} s); CPU and "
        f"peak RSS are the whole process's (`/usr/bin/time`). Native and Node runs interleaved.",
        "",
        "| what | input | wall | rate | CPU | peak RSS | wasm speed relative to it |",
        "|---|---|---|---|---|---|---|",
        f"| bare parse into columns, native, 1 core (`ingest_bench`) | 1 file | {span(parse)} s | "
        f"{span([rate1(x) for x in parse], '{:.0f}')} MB/s | | | {min(parse) / max(w1):.2f}–{max(parse) / min(w1):.2f} |",
        f"| `rankscope analyze --json`, 1 core (`RANKSCOPE_PARSE_THREADS=1`) | 1 file | {span(n1)} s | "
        f"{span([rate1(x) for x in n1], '{:.0f}')} MB/s | {span([r[1] for r in nat_one])} s | "
        f"{min(r[2] for r in nat_one):.0f} MB | {min(n1) / max(w1):.2f}–{max(n1) / min(w1):.2f} |",
        f"| `rankscope analyze --json`, every core | 1 file | {span([r[0] for r in nat_every])} s | "
        f"{span([rate1(r[0]) for r in nat_every], '{:.0f}')} MB/s | {span([r[1] for r in nat_every])} s | "
        f"{min(r[2] for r in nat_every):.0f} MB | "
        f"{min(r[0] for r in nat_every) / max(w1):.2f}–{max(r[0] for r in nat_every) / min(w1):.2f} |",
        f"| **`analyze()` in Node (wasm)** | 1 file | {span(w1)} s | **{span([rate1(x) for x in w1], '{:.0f}')} MB/s** | "
        f"{span([r[1][1] for r in node_one])} s | {min(r[1][2] for r in node_one):.0f} MB | 1 |",
        f"| `rankscope analyze --json`, every core | 8 ranks | {span([r[0] for r in nat8])} s | "
        f"{span([rate8(r[0]) for r in nat8], '{:.0f}')} MB/s | {span([r[1] for r in nat8])} s | "
        f"{min(r[2] for r in nat8):.0f} MB | {min(r[0] for r in nat8) / max(w8):.2f}–{max(r[0] for r in nat8) / min(w8):.2f} |",
        f"| **`analyze()` in Node (wasm)** | 8 ranks | {span(w8)} s | **{span([rate8(x) for x in w8], '{:.0f}')} MB/s** | "
        f"{span([r[1][1] for r in node8])} s | {min(r[1][2] for r in node8):.0f} MB | 1 |",
        f"| `analyze()` in Node, two processes side by side (4 ranks each, as the app's two workers share the "
        f"cores) | 8 ranks | | {span(pair, '{:.0f}')} MB/s each | | | {(mb8 / max(w8)) / max(pair):.2f}–"
        f"{(mb8 / min(w8)) / min(pair):.2f} |",
        "",
    ]
    return {"one": [rate1(x) for x in w1], "eight": [rate8(x) for x in w8], "pair": pair, "events_one": ev1, "events_eight": ev8,
            "one_cpu": [mb1 / r[1][1] for r in node_one], "eight_cpu": [mb8 / r[1][1] for r in node8]}


def rng(lo, hi, fmt="{:.2f}"):
    """lo–hi, or one figure when they print the same."""
    a, b = fmt.format(lo), fmt.format(hi)
    return a if a == b else f"{a}–{b}"


def quantile(xs, q):
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def app_part(md, notes, one, eight, big, big1, node, quick, say, loads):
    """Items 2 and 3: the app in headless Chromium, and its Timeline's frame times."""
    if not (DIST / "index.html").exists() or not Path(os.environ.get("CHROMIUM", "/usr/bin/chromium")).exists():
        notes.append("**The app part did not run**: dist/ (`./x single`) or /usr/bin/chromium is missing.")
        return
    runs = 1 if quick else 2
    secs = 5 if quick else 10
    cases = []
    for r in range(runs):
        cases += [
            {"label": "one", "files": [str(one)], "timeline_s": secs if r == 0 else 0, "shot": "bench-one" if r == 0 else None},
            {"label": "eight", "files": [str(p) for p in ranks_of(eight)], "timeline_s": secs if r == 0 else 0,
             "shot": "bench-eight" if r == 0 else None},
        ]
    cases.append({"label": "big", "files": [str(p) for p in ranks_of(big)], "timeline_s": secs, "shot": "bench-big",
                  "timeout_ms": 300_000})
    if big1:
        # Alternated with a second load of the 8 files (no Timeline), so both see the same minutes.
        cases += [
            {"label": "big1", "files": [str(big1)], "timeline_s": 0, "shot": None, "timeout_ms": 300_000},
            {"label": "big", "files": [str(p) for p in ranks_of(big)], "timeline_s": 0, "shot": None, "timeout_ms": 300_000},
            {"label": "big1", "files": [str(big1)], "timeline_s": 0, "shot": None, "timeout_ms": 300_000},
        ]
    # The page with one worker (`?workers=1`): one engine in the page against one Node, each with the
    # machine's other core for V8's compiling and collecting, as Node's yardstick has it.
    for r in range(runs):
        cases += [
            {"label": "one-w1", "files": [str(one)], "timeline_s": 0, "shot": None, "workers": 1},
            {"label": "eight-w1", "files": [str(p) for p in ranks_of(eight)], "timeline_s": 0, "shot": None, "workers": 1},
        ]
    if not quick:
        cases.append({"label": "big-w1", "files": [str(p) for p in ranks_of(big)], "timeline_s": 0, "shot": None,
                      "workers": 1, "timeout_ms": 300_000})
    spec = OUT / "app_spec.json"
    spec.write_text(json.dumps({"cases": cases}))
    say(f"the app in headless Chromium: {len(cases)} loads (the last of {mb_of(ranks_of(big)):.0f} MB)")
    out = subprocess.run(["node", ROOT / "tests/bench/app_bench.mjs", spec], capture_output=True, text=True,
                         env={**os.environ, "RANKSCOPE_SHARED": str(SHARED)})
    res = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    loads.append(load())
    if out.returncode != 0 or len(res) != len(cases):
        notes.append(f"**The app part failed** after {len(res)} of {len(cases)} loads: "
                     f"`{(out.stderr.strip().splitlines() or ['?'])[-1][:300]}`")
    if not res:
        return
    by = {}
    for r in res:
        by.setdefault(r["label"], []).append(r)
    desc = {"one": "1 file (the wasm table's)", "eight": "8 files (the wasm table's 8 ranks)", "big": "8 files, ~7 M events",
            "one-w1": "1 file, one worker (`?workers=1`)", "eight-w1": "8 files, one worker (`?workers=1`)",
            "big-w1": "8 files, ~7 M events, one worker (`?workers=1`)",
            "big1": "1 file, ~7 M events (the 8 files' bytes in one)"}
    cores = res[0]["cores"]
    md += [
        "### The app in headless Chromium: file selection to analysis ready",
        "",
        f"`dist/` served on 127.0.0.1, Debian's Chromium 1280×800 driven by playwright-core "
        f"(`tests/bench/app_bench.mjs`), a fresh browser per load; from `setInputFiles` on the file input "
        f"to `[data-testid=analysis-ready]`, timed in the page (the input's `change` event to the mutation that "
        f"added the marker: Playwright's `waitForSelector` polls up to every 500 ms, a lag it would add to the "
        f"figure), the files chosen a second after the page's engine warm-up ended (`warm.rs`: a person takes "
        f"longer to choose them). `navigator.hardwareConcurrency` = {cores}: the pool starts up "
        f"to {cores} workers, one per file in flight. *Busy workers*: the renderer's worker threads "
        f"(`DedicatedWorker`) that used CPU during the load, with their CPU seconds (`/proc`); per worker = "
        f"overall ÷ busy workers; per worker CPU-second = MB ÷ the workers' CPU seconds, against Node's MB per "
        f"CPU-second of its whole process (the figure the other users' load moves least). Yardstick: `analyze()` "
        f"in Node on the same input, above (the ~7 M-event job against the 8 ranks' figure); beside it, the rate "
        f"each of two Node processes reaches when both run at once on the 8 ranks' halves (the wasm table's last "
        f"row), the yardstick of two engines sharing {cores} cores as the app's workers do. The rows marked "
        f"*one worker* open the page as `?workers=1` (at most one worker reads files): one engine in the page "
        f"against one Node, each with the machine's other core for V8's own threads, which is what *per worker* "
        f"measures on a machine with fewer cores than the pool has workers plus V8's threads. Memory: resident "
        f"size of the renderer processes (the page and its workers), before the files, the peak sampled every "
        f"100 ms, and once ready."
        + " Rows with two loads give per-load figures separated by ` / `.",
        "",
        "| input | MB | events | ready in | MB/s overall | busy workers (CPU s each) | MB/s per worker | "
        "Node wasm MB/s | per worker ÷ Node (target ≥ 0.8) | per worker ÷ each of two Nodes side by side | "
        "MB per worker CPU-s ÷ Node's | CPU s during the load: "
        "page's main thread; browser process; all Chromium | renderer RSS before → peak → ready |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label in ["one", "eight", "big", "big1", "one-w1", "eight-w1", "big-w1"]:
        rs = by.get(label)
        if not rs:
            continue
        late = [r for r in rs if "not_ready_after_ms" in r]
        if late:
            r = late[0]
            md.append(f"| {desc[label]} | {r['bytes'] / 1e6:.0f} | | **not ready after {r['not_ready_after_ms'] / 1000:.0f} s** "
                      f"(status: {r['status']!r}; `target/e2e-screenshots/bench-{label}-not-ready.png`) | | | | | | | | | "
                      f"{r['rss_before_kb'] / 1024:.0f} → {r['rss_peak_kb'] / 1024:.0f} MB |")
            rs = [r for r in rs if "not_ready_after_ms" not in r]
            if not rs:
                continue
        mb = rs[0]["bytes"] / 1e6
        overall = [mb / (r["ms"] / 1000) for r in rs]
        busy = [max(1, len(r["worker_cpu_s"])) for r in rs]
        per = [o / b for o, b in zip(overall, busy)]
        base = {"big1": "big"}.get(label, label.removesuffix("-w1"))
        yard = node.get("one" if base == "one" else "eight")
        events = f"{rs[0]['events']:,}" if rs[0].get("events") else "?"
        if yard:
            lo, hi = min(per) / max(yard), max(per) / min(yard)
            ratio = f"{lo:.2f}–{hi:.2f}" if f"{lo:.2f}" != f"{hi:.2f}" else f"{lo:.2f}"
            ratio += " (met)" if lo >= 0.8 else (" (**not met**)" if hi < 0.8 else " (met in some runs)")
            yard_s = span(yard, "{:.0f}")
        else:
            ratio, yard_s = "(no wasm part)", ""
        # One entry per load, " / " between loads.
        workers = " / ".join(f"{b} ({', '.join(f'{x:.1f}' for x in r['worker_cpu_s']) or 'none'})"
                             for b, r in zip(busy, rs))
        # Two Node processes side by side on the 8 ranks' halves: what one engine does while another
        # shares the cores, as the app's two workers do (no such split of one file).
        pair = node.get("pair") if label in ("eight", "big") else None
        pair_s = rng(min(per) / max(pair), max(per) / min(pair)) if pair else ""
        ycpu = node.get("one_cpu" if base == "one" else "eight_cpu")
        pcpu = [mb / max(1e-9, sum(r["worker_cpu_s"])) for r in rs]
        cpu_ratio = rng(min(pcpu) / max(ycpu), max(pcpu) / min(ycpu)) if ycpu else ""
        where = " / ".join(f"{r['main_cpu_s']:.1f}; {r['cpu_by_process'].get('browser', 0):.1f}; "
                           f"{sum(r['cpu_by_process'].values()):.1f}" for r in rs)
        md.append(
            f"| {desc[label]} | {mb:.0f} | {events} | {span([r['ms'] / 1000 for r in rs], '{:.1f}')} s | "
            f"{span(overall, '{:.1f}')} | {workers} | {span(per, '{:.1f}')} | "
            f"{yard_s} | {ratio} | {pair_s} | {cpu_ratio} | {where} | {rs[0]['rss_before_kb'] / 1024:.0f} → "
            f"{span([r['rss_peak_kb'] / 1024 for r in rs], '{:.0f}')} → {span([r['rss_ready_kb'] / 1024 for r in rs], '{:.0f}')} MB |")
    md.append("")
    md.append("Where the renderer's CPU went during each first load (CPU s by thread name, `/proc/PID/task`; "
              "`main` is the page's thread, `DedicatedWorker` the workers, `ThreadPoolForeg` includes V8's "
              "compilation of the wasm): " + "; ".join(
                  f"{desc[label].split(' (')[0]}: " + ", ".join(f"{n} {v:.1f}" for n, v in by[label][0].get("renderer_threads", {}).items())
                  for label in ["one", "eight", "big", "big1"] if by.get(label) and "renderer_threads" in by[label][0]) + ".")
    md.append("")
    # One large file against the same bytes in 8 files (issue 12: "at about the speed of 8 files").
    b8 = [r for r in by.get("big", []) if "ms" in r]
    b1 = [r for r in by.get("big1", []) if "ms" in r]
    if b8 and b1:
        r8 = [r["bytes"] / 1e6 / (r["ms"] / 1000) for r in b8]
        r1 = [r["bytes"] / 1e6 / (r["ms"] / 1000) for r in b1]
        md += [f"One file of {b1[0]['bytes'] / 1e6:.0f} MB ({b1[0].get('events') or 0:,} events) is ready in "
               f"{span([r['ms'] / 1000 for r in b1], '{:.1f}')} s ({span(r1, '{:.0f}')} MB/s), the same job as 8 files "
               f"({b8[0]['bytes'] / 1e6:.0f} MB) in {span([r['ms'] / 1000 for r in b8], '{:.1f}')} s "
               f"({span(r8, '{:.0f}')} MB/s), loads alternated: the one file at **{min(r1) / max(r8):.2f}–"
               f"{max(r1) / min(r8):.2f}×** the 8 files' speed. Its busier worker (the reader) used "
               f"{span([max(r['worker_cpu_s'] or [0]) for r in b1], '{:.1f}')} CPU-s and the helper "
               f"{span([min(r['worker_cpu_s'] or [0]) for r in b1], '{:.1f}')}: after the pieces are merged, the "
               f"reader normalizes, indexes and analyses the rank alone (a worker shares no memory with another).", ""]
    errs = sorted({e for r in res for e in r.get("errors", [])})
    if errs:
        notes.append("The app reported errors: " + "; ".join(f"`{e[:200]}`" for e in errs[:5]))
    tl = [r for r in res if r.get("frames")]
    for r in res:
        if "not_ready_after_ms" in r:
            notes.append(f"The app did not finish loading {desc[r['label']]} ({r['bytes'] / 1e6:.0f} MB) in "
                         f"{r['not_ready_after_ms'] / 1000:.0f} s: no Timeline frames for it.")
    if tl:
        md += [
            "### Timeline frame intervals while zooming and panning",
            "",
            f"After the load above, the Timeline view opened and explored for {secs} s like a person "
            f"(W/S zoom, A/D held pans, Ctrl+wheel zooms, plain wheel, drags left and right, `0` for the "
            f"whole job; `tests/bench/app_bench.mjs`) while the page records every `requestAnimationFrame` "
            f"interval. Headless Chromium paces frames at 60 Hz (16.7 ms), so p95 = 16.7 ms means no dropped "
            f"frame in 95% of them; an interval up to 17.0 ms counts as one frame (the pacing jitters "
            f"by a few tenths).",
            "",
            "| job | events | frames | p50 | p95 (target ≤ 16.7 ms) | max (target ≤ 50 ms) | renderer RSS after |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in tl:
            f = r["frames"][1:]  # the first interval spans the recorder's start
            p50, p95, mx = quantile(f, 0.5), quantile(f, 0.95), max(f)
            events = f"{r['events']:,}" if r.get("events") else "?"
            # 16.7 ms is one frame; intervals of a paced 60 Hz loop scatter ±0.3 ms around it.
            ok95 = "met" if p95 <= 17.0 else "**not met**"
            okmx = "met" if mx <= 50 else "**not met**"
            md.append(f"| {desc[r['label']]} | {events} | {len(f)} | {p50:.1f} ms | {p95:.1f} ms ({ok95}) | "
                      f"{mx:.1f} ms ({okmx}) | {r['rss_timeline_kb'] / 1024:.0f} MB |")
        md += ["", "Screenshots of each load's Summary and Timeline: `target/e2e-screenshots/bench-*.png`.", ""]


def hta_python(notes, say):
    """The bench venv's Python with HTA (created, or completed, when missing); None if it fails."""
    py = VENV / "bin/python"
    stamp = VENV / ".rankscope-bench"
    want = " ".join(HTA_PINS)
    if py.exists() and stamp.exists() and stamp.read_text() == want:
        return py
    say(f"installing {want} from PyPI into {VENV} (once)")
    try:
        if not py.exists():
            subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check"] + HTA_PINS, check=True)
        stamp.write_text(want)
        return py
    except (subprocess.CalledProcessError, OSError) as e:
        notes.append(f"**HTA did not run**: installing {want} into {VENV} failed ({e}).")
        return None


def hta_part(md, notes, mb, reps, say):
    """Item 4: HTA's load + temporal breakdown + overlap + idle time + stragglers vs rankscope."""
    py = hta_python(notes, say)
    if py is None:
        return
    job = synth(f"r8x{mb}", mb, ranks=8)
    # HTA reads every *.json / *.gz of the folder and takes the first `"rank": N` line of each as
    # its rank (hta/common/trace_file.py), so synth's manifest.json would pass for a rank: a
    # folder of links to the rank files only, given to both tools.
    d = OUT / f"r8x{mb}-traces"
    d.mkdir(exist_ok=True)
    for p in ranks_of(job):
        if not (d / p.name).exists():
            (d / p.name).symlink_to(p)
    size = mb_of(ranks_of(job))
    say(f"HTA vs rankscope on 8 ranks, {size:.0f} MB")
    ours, theirs, stages = [], [], []
    hta_reps = max(1, reps - 1)
    # Timed runs are not sampled (see `sampled`); each tool's memory comes from runs of its own
    # after them, sampled, interleaved the same way.
    o = OUT / "hta.json"
    for i in range(max(reps, hta_reps)):  # interleaved
        ours.append(sampled([BIN, "analyze", "--json", d], sample=False))
        if i < hta_reps:
            with o.open("w") as fh:
                theirs.append(sampled([py, ROOT / "tests/bench/hta_job.py", d], stdout=fh, sample=False))
            stages.append(json.loads(o.read_text().strip().splitlines()[-1]))
    mem_reps = max(1, hta_reps - 1)
    ours_mem, theirs_mem = [], []
    for _ in range(mem_reps):
        ours_mem.append(sampled([BIN, "analyze", "--json", d]))
        with o.open("w") as fh:
            theirs_mem.append(sampled([py, ROOT / "tests/bench/hta_job.py", d], stdout=fh))
    st = stages[0]
    if st["ranks"] != list(range(8)):
        notes.append(f"HTA loaded ranks {st['ranks']}, not 0–7.")
    names = [("import_s", "import (pandas, plotly)"), ("load_s", "load: parse 8 traces (process pool), align, filter steps"),
             ("temporal_s", "temporal breakdown"), ("overlap_s", "comm/comp overlap"),
             ("idle_s", "idle time breakdown (all ranks)"), ("straggler_s", "potential stragglers")]
    ow, tw = [r[0] for r in ours], [r[0] for r in theirs]
    om, tm = [r[2] for r in ours_mem], [r[2] for r in theirs_mem]
    slower = (min(tw) / max(ow), max(tw) / min(ow))
    mem = (min(om) / max(tm), max(om) / min(tm))
    failed = st.get("straggler_failed")
    md += [
        f"### HTA side by side: 8 ranks, {size:.0f} MB (`rankscope synth --ranks 8 --target-mb {mb}`)",
        "",
        f"Holistic Trace Analysis {HTA_PINS[0].split('==')[1]} (PyPI's newest; pandas {HTA_PINS[1].split('==')[1]}, "
        f"no torch) in `{VENV}`, `tests/bench/hta_job.py`: `TraceAnalysis(trace_dir)`, then "
        f"`get_temporal_breakdown`, `get_comm_comp_overlap`, `get_idle_time_breakdown(ranks=all)`, "
        f"`get_potential_stragglers` (defaults, `visualize=False`), against `rankscope analyze --json` on the same "
        f"folder (which computes all of that and more). Wall and CPU: rankscope {len(ours)} runs, HTA "
        f"{len(theirs)}, interleaved, unobserved; memory: {mem_reps} more run(s) of each, the peak, sampled every "
        f"50 ms, of the proportional set size summed over the process tree (HTA parses in a forked pool), and the "
        f"largest single process's peak RSS. HTA kept {st['events_kept']:,} events.",
        "",
        "| what | wall | CPU (incl. children) | peak memory (tree PSS) | largest process's peak RSS |",
        "|---|---|---|---|---|",
        f"| `rankscope analyze --json` (the yardstick) | {span(ow)} s | {span([r[1] for r in ours])} s | "
        f"{span(om, '{:.0f}')} MB | {span([r[3] for r in ours_mem], '{:.0f}')} MB |",
        f"| HTA, the whole script | {span(tw)} s | {span([r[1] for r in theirs])} s | {span(tm, '{:.0f}')} MB | "
        f"{span([r[3] for r in theirs_mem], '{:.0f}')} MB |",
    ]
    for k, label in names:
        extra = ""
        if k == "straggler_s" and failed:
            extra = (f" — **raised** `{failed}`: HTA 0.5.0 counts only kernels named `ncclKernel*` as "
                     f"communication (`hta/analyzers/straggler.py`); these traces, like NCCL ≥ 2.19's, name "
                     f"them `ncclDevKernel_*`")
        md.append(f"| &nbsp;&nbsp;HTA: {label}{extra} | {span([s[k] for s in stages])} s | | | |")
    oc, tc = [r[1] for r in ours], [r[1] for r in theirs]
    cpu = (min(tc) / max(oc), max(tc) / min(oc))
    ok_t = "met" if slower[0] >= 50 else ("**not met**" if slower[1] < 50 else "met in some runs")
    ok_c = "met" if cpu[0] >= 50 else ("**not met**" if cpu[1] < 50 else "met in some runs")
    ok_m = "met" if mem[1] <= 0.2 else ("**not met**" if mem[0] > 0.2 else "met in some runs")
    md += [
        f"| **HTA ÷ rankscope** (target ≥ 50× slower) | **{rng(*slower, '{:.0f}')}×** ({ok_t}) | "
        f"{rng(*cpu, '{:.0f}')}× ({ok_c}) | | |",
        f"| **rankscope ÷ HTA, memory** (target ≤ 1/5) | | | **{rng(*mem)}** ({ok_m}) | |",
        "",
    ]


def digest_job(steps, say):
    """A job of 1,024 ranks × `steps` steps as parts and a digest, in target/bench-run/d1024xN/:
    synth (gzip) → `rankscope part` per trace, every core → `combine --digest`; the traces are
    deleted once parted (1.8 GB at 100 steps). Kept between runs (made again when the config, the
    binary's version or the part format changes: a combine that fails). Returns (dir, how long
    each stage took when made now, else None)."""
    d = OUT / f"d1024x{steps}"
    cfg = {"ranks": 1024, "steps": steps, "kernels_per_step": 1, "bucket_count": 1, "straggler_rank": 700,
           "malloc_churn": False, "loss_allreduce": False, "record_shapes": False}
    version = subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout.strip()
    stamp = json.dumps({"version": version, "cfg": cfg})
    parts, dig = d / "parts", d / "job.rsdigest"
    if (d / "stamp").exists() and (d / "stamp").read_text() == stamp and dig.exists():
        ok = subprocess.run([BIN, "combine", "--json", *sorted(parts.glob("*.part"))], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode in (0, 1)
        if ok:
            return d, None
    say(f"making the 1,024-rank × {steps}-step job: synth, 1,024 parts, the digest (minutes, once)")
    shutil.rmtree(d, ignore_errors=True)
    parts.mkdir(parents=True)
    (d / "cfg.json").write_text(json.dumps(cfg))
    t0 = time.time()
    subprocess.run([BIN, "synth", "--config", d / "cfg.json", "--gzip", "--out", d / "job"],
                   stdout=subprocess.DEVNULL, check=True)
    t1 = time.time()
    traces = sorted((d / "job").glob("*.pt.trace.json.gz"))
    gz_mb = mb_of(traces)
    from concurrent.futures import ThreadPoolExecutor
    part = lambda t: subprocess.run([BIN, "part", "-o", parts / (t.name.split(".")[0] + ".part"), t],
                                    stdout=subprocess.DEVNULL, check=True)
    with ThreadPoolExecutor(os.cpu_count() or 2) as ex:
        list(ex.map(part, traces))
    t2 = time.time()
    subprocess.run([BIN, "combine", "--json", "--digest", dig, *sorted(parts.glob("*.part"))],
                   stdout=subprocess.DEVNULL, check=True)
    t3 = time.time()
    shutil.rmtree(d / "job")
    (d / "stamp").write_text(stamp)
    return d, {"synth_s": t1 - t0, "parts_s": t2 - t1, "combine_s": t3 - t2, "gz_mb": gz_mb}


def digest_part(md, notes, quick, reps, say, loads):
    """Item 5's heatmap: 1,024 ranks × 100 steps. `combine` of the 1,024 parts (with and without
    writing the digest), `analyze` of the digest, and the app opening the digest: time to ready,
    the Ranks × steps view and its heatmap's frame intervals while scrolled and hovered."""
    steps = 10 if quick else 100
    d, made = digest_job(steps, say)
    parts = sorted((d / "parts").glob("*.part"))
    dig = d / "job.rsdigest"
    say(f"combine of {len(parts)} parts, analyze of the digest ({dig.stat().st_size / 1e6:.0f} MB)")
    comb = repeat([BIN, "combine", "--json", *parts], reps)
    with tempfile.TemporaryDirectory() as tmp:
        comb_dig = repeat([BIN, "combine", "--json", "--digest", Path(tmp) / "d.rsdigest", *parts], 2 if quick else reps - 1)
    an = repeat([BIN, "analyze", "--json", dig], reps)
    loads.append(load())
    app = []
    if (DIST / "index.html").exists() and Path(os.environ.get("CHROMIUM", "/usr/bin/chromium")).exists():
        cases = [{"label": "digest", "files": [str(dig)], "timeline_s": 0, "heatmap": True,
                  "shot": "bench-digest" if r == 0 else None, "timeout_ms": 600_000} for r in range(1 if quick else 2)]
        spec = OUT / "digest_spec.json"
        spec.write_text(json.dumps({"cases": cases}))
        say(f"the app opening the digest: {len(cases)} loads")
        out = subprocess.run(["node", ROOT / "tests/bench/app_bench.mjs", spec], capture_output=True, text=True)
        app = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
        if out.returncode != 0 or len(app) != len(cases):
            notes.append(f"**The digest's app loads failed** after {len(app)} of {len(cases)}: "
                         f"`{(out.stderr.strip().splitlines() or ['?'])[-1][:300]}`")
        loads.append(load())
    else:
        notes.append("**The digest's app loads did not run**: dist/ or /usr/bin/chromium is missing.")
    part_kb = sum(p.stat().st_size for p in parts) / len(parts) / 1e3
    md += [
        f"### 1,024 ranks × {steps} steps: `combine`, the job digest, and the app's Ranks × steps",
        "",
        f"`rankscope synth --config` of 1,024 ranks × {steps} steps (`{(d / 'cfg.json').read_text()}`), "
        f"one part per trace (`rankscope part`, {part_kb:.0f} kB each), the digest of all of them "
        f"(`combine --digest`, {dig.stat().st_size / 1e6:.0f} MB). "
        + (f"Made in this run: synth {made['synth_s']:.0f} s ({made['gz_mb']:.0f} MB of gzip traces), "
           f"1,024 parts {made['parts_s']:.0f} s on {os.cpu_count()} cores, combine with the digest {made['combine_s']:.1f} s."
           if made else "Made by an earlier run (`target/bench-run/`, same config and binary version)."),
        "",
        "| what | wall | CPU | peak RSS |",
        "|---|---|---|---|",
        f"| `rankscope combine --json` of the 1,024 parts | {span([r[0] for r in comb])} s | {span([r[1] for r in comb])} s | "
        f"{span([r[2] for r in comb], '{:.0f}')} MB |",
        f"| the same writing the digest (`--digest`) | {span([r[0] for r in comb_dig])} s | {span([r[1] for r in comb_dig])} s | "
        f"{span([r[2] for r in comb_dig], '{:.0f}')} MB |",
        f"| `rankscope analyze --json` of the digest | {span([r[0] for r in an])} s | {span([r[1] for r in an])} s | "
        f"{span([r[2] for r in an], '{:.0f}')} MB |",
        "",
    ]
    ok = [r for r in app if "heat_frames" in r]
    if ok:
        md += [
            "The app (`tests/bench/app_bench.mjs`, a fresh browser per load): the digest chosen on the file "
            "input, timed in the page to `analysis-ready`; then the Ranks × steps view opened and its "
            "heatmap scrolled down and back up with the wheel while the pointer crosses its cells (120 "
            "moves), every `requestAnimationFrame` interval recorded.",
            "",
            "| load | ready in | renderer RSS before → ready | Ranks × steps opened in | heatmap | frames | p50 | "
            "p95 (target ≤ 16.7 ms) | max (target ≤ 50 ms) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for i, r in enumerate(ok):
            f = r["heat_frames"]
            p50, p95, mx = quantile(f, 0.5), quantile(f, 0.95), max(f)
            md.append(f"| {i + 1} | {r['ms'] / 1000:.1f} s | {r['rss_before_kb'] / 1024:.0f} → {r['rss_ready_kb'] / 1024:.0f} MB | "
                      f"{r['heat_open_ms'] / 1000:.2f} s | {r['heat_ranks']:,} ranks × {r['heat_steps']} steps | {len(f)} | "
                      f"{p50:.1f} ms | {p95:.1f} ms ({'met' if p95 <= 17.0 else '**not met**'}) | "
                      f"{mx:.1f} ms ({'met' if mx <= 50 else '**not met**'}) |")
        md += ["", "Screenshots: `target/e2e-screenshots/bench-digest-summary.png`, `bench-digest-steps.png`.", ""]


PARTS = ["native", "size", "rules", "wasm", "app", "hta", "digest"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller inputs, fewer repeats (a few minutes)")
    ap.add_argument("--skip", default="", help=f"comma-separated parts to leave out: {', '.join(PARTS)}")
    ap.add_argument("--write", default=str(ROOT / "BENCHMARKS.md"), help="file whose bench block is replaced")
    ap.add_argument("--keep", action="store_true", help="keep the generated inputs")
    a = ap.parse_args()
    skip = {x for x in a.skip.split(",") if x}
    if skip - set(PARTS):
        ap.error(f"unknown parts {sorted(skip - set(PARTS))}; the parts are {', '.join(PARTS)}")
    run = lambda part: part not in skip
    OUT.mkdir(parents=True, exist_ok=True)
    sizes = [135, 270, 540] if a.quick else [250, 500, 1000, 2000]
    reps = 2 if a.quick else 3
    mid = sizes[1]
    loads = [load()]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    md = []
    notes = []
    say = lambda s: print(f"==> {s}", file=sys.stderr, flush=True)
    measured = {}

    if run("native"):
        # 1. Parse stages and the yardsticks, on the middle size.
        f = synth(f"m{mid}", mid) / "rank0.pt.trace.json"
        size_mb = f.stat().st_size / 1e6
        say(f"stages and yardsticks on {size_mb:.0f} MB")
        stages = [ingest_bench(f) for _ in range(reps)]
        # One file on one core vs every core (rankscope-host read_trace_split), interleaved.
        # The same for the whole analysis (the target's figure): parse, normalize, the rank's part,
        # combine and the JSON. The every-core runs are also the rows of `inspect` and `analyze`.
        one, every, aone, aevery = [], [], [], []
        for _ in range(reps):
            one += repeat([BIN, "inspect", "--json", f], 1, env={"RANKSCOPE_PARSE_THREADS": "1"})
            every += repeat([BIN, "inspect", "--json", f], 1)
            aone += repeat([BIN, "analyze", "--json", f], 1, env={"RANKSCOPE_PARSE_THREADS": "1"})
            aevery += repeat([BIN, "analyze", "--json", f], 1)
        inspect_runs, analyze_runs = every, aevery
        loads.append(load())
        measured[f] = {"parse": [s["parse_s"] for s in stages], "analyze": analyze_runs, "analyze1": None}
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
            f"{rng(min(r[0] for r in one) / max(r[0] for r in every), max(r[0] for r in one) / min(r[0] for r in every))}× "
            f"the 1-core wall; peak RSS {min(r[2] for r in every):.0f} MB |",
            f"| `analyze --json`, the file on 1 core | {span([r[0] for r in aone])} s wall, "
            f"{span([r[1] for r in aone])} s CPU | {span([rate(r[0]) for r in aone], '{:.0f}')} MB/s | "
            f"peak RSS {min(r[2] for r in aone):.0f} MB |",
            f"| **`analyze --json`, the file on every core** | {span([r[0] for r in aevery])} s wall, "
            f"{span([r[1] for r in aevery])} s CPU | {span([rate(r[0]) for r in aevery], '{:.0f}')} MB/s | "
            f"**{rng(min(r[0] for r in aone) / max(r[0] for r in aevery), max(r[0] for r in aone) / min(r[0] for r in aevery))}×** "
            f"the 1-core wall (target ≥ 1.7 on 2 cores); peak RSS {min(r[2] for r in aevery):.0f} MB |",
            f"| peak RSS, `analyze` | {span([r[2] for r in analyze_runs], '{:.0f}')} MB | | "
            f"{min(r[2] for r in analyze_runs) / size_mb:.2f}× input (target ≤ 0.3) |",
            "",
        ]

    if run("size"):
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
    if run("rules") and gloo.is_dir():
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

    # 4. The browser's engine and the browser, on the same inputs: one ~1 M-event file, about the
    # same bytes as 8 ranks, and an 8-rank job of ~7 M events (timeline only).
    one = synth("m270", 270) / "rank0.pt.trace.json" if run("wasm") or run("app") else None
    eight = synth("r8x34", 34, ranks=8) if run("wasm") or run("app") else None
    node = {}
    if run("wasm"):
        node = wasm_part(md, one, eight, reps, measured, say)
        loads.append(load())
    if run("app"):
        big = synth("r8x240", 240, ranks=8)
        # The 8 ranks' bytes as one file: one large file against the same bytes in many.
        big1 = None if a.quick else synth("m1920", 240 * 8) / "rank0.pt.trace.json"
        app_part(md, notes, one, eight, big, big1, node, a.quick, say, loads)
        loads.append(load())

    # 5. HTA against rankscope on the same 8-rank directory.
    if run("hta"):
        hta_part(md, notes, 8 if a.quick else 34, reps, say)
        loads.append(load())

    # 6. 1,024 ranks × 100 steps: combine, the digest, and the app's heatmap.
    if run("digest"):
        digest_part(md, notes, a.quick, reps, say, loads)
        loads.append(load())

    head = [
        f"Measured by `./x bench{' --quick' if a.quick else ''}{' --skip ' + a.skip if skip else ''}` "
        f"on {started} (to {time.strftime('%H:%M UTC', time.gmtime())}): {machine()}; load average "
        f"(1 min, sampled between the parts) {min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores "
        f"(the machine is shared: compare ratios within a table, not absolute times across runs). "
        f"Times are min–max of {reps} runs unless a table says otherwise.",
        "",
    ] + [f"- {n}" for n in notes] + ([""] if notes else [])
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
        for d in [f"m{sizes[-1]}", "r8x240", "m1920"]:
            shutil.rmtree(OUT / d, ignore_errors=True)


if __name__ == "__main__":
    main()
