#!/usr/bin/env python3
"""Independent oracle for rankscope's Kineto trace parser.

Walks every .json / .json.gz under a traces folder (default /work/shared/traces),
computes simple, precisely defined facts per file with nothing but the Python
standard library, and writes them as JSON for the Rust tests to compare against.
It shares no code or logic with the Rust parser on purpose. Definitions: README.md
next to this file.

    python3 tests/oracle/trace_expectations.py \
        --traces /work/shared/traces \
        --out crates/rankscope-core/tests/data/trace_expectations.json
"""

import argparse
import datetime
import decimal
import gzip
import json
import os
import re

D = decimal.Decimal
THOUSAND = D(1000)
STEP_RE = re.compile(r"ProfilerStep#([0-9]+)")
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "runtime"}
BY_CAT_PHS = {"X", "B", "E", "i", "I"}
FLOW_PHS = {"s", "t", "f"}

# Wide enough for any epoch-ns value times 1000 with decimals; the default 28 digits
# would also do, but exactness must not hinge on that.
CTX = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_UP)


class Num(D):
    """A Decimal that remembers the JSON text it was parsed from."""

    __slots__ = ("text",)

    def __new__(cls, text):
        self = D.__new__(cls, text)
        self.text = text
        return self


def decimals_in(v):
    """Digits after the decimal point in the JSON text of a number (0 for ints)."""
    if isinstance(v, Num):
        mant = re.split(r"[eE]", v.text)[0]
        return len(mant.split(".", 1)[1]) if "." in mant else 0
    return 0


def is_num(v):
    return isinstance(v, (int, D)) and not isinstance(v, bool)


def us_to_ns(v):
    """Microseconds (int or Decimal) -> integer ns, rounded half away from zero."""
    return int(CTX.multiply(D(v), THOUSAND).quantize(D(1), rounding=decimal.ROUND_HALF_UP, context=CTX))


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    return json.loads(raw, parse_float=Num, parse_int=int)


def summarize(rel, doc):
    if isinstance(doc, list):
        form, top, events = "array", {}, doc
    else:
        form, top = "object", doc
        events = doc.get("traceEvents") or []

    dist = top.get("distributedInfo")
    dist = dist if isinstance(dist, dict) else {}
    base = top.get("baseTimeNanoseconds")
    base = int(base) if is_num(base) else None

    by_ph, by_cat, flows = {}, {}, {}
    lanes = set()
    steps, gpu_steps = set(), set()
    optimizer_spans = []  # (start, end) of CPU `Optimizer.step#…` slices
    ts_min = end_max = None
    max_dec = 0
    gpu_events = comm_kernels = runtime_events = 0
    rpc = 0
    coll_names = set()
    neg_dur = missing_dur = 0
    gpu_corrs = []  # correlation of every GPU event (None when absent)
    runtime_corrs = set()

    for e in events:
        if not isinstance(e, dict):
            by_ph[""] = by_ph.get("", 0) + 1
            continue
        ph = e.get("ph", "")
        ph = ph if isinstance(ph, str) else str(ph)
        by_ph[ph] = by_ph.get(ph, 0) + 1
        cat = e.get("cat", "")
        cat = cat if isinstance(cat, str) else str(cat)
        if ph in BY_CAT_PHS:
            by_cat[cat] = by_cat.get(cat, 0) + 1
        if ph in FLOW_PHS:
            f = flows.setdefault(cat, {})
            f[ph] = f.get(ph, 0) + 1
        if ph != "X":
            continue

        name = e.get("name", "")
        name = name if isinstance(name, str) else str(name)
        args = e.get("args")
        args = args if isinstance(args, dict) else {}
        lcat = cat.lower()

        lanes.add((str(e.get("pid")), str(e.get("tid"))))

        m = STEP_RE.fullmatch(name)
        if m:
            (gpu_steps if cat == "gpu_user_annotation" else steps).add(int(m.group(1)))

        ts = e.get("ts")
        dur = e.get("dur")
        if "dur" not in e:
            missing_dur += 1
        if is_num(ts):
            max_dec = max(max_dec, decimals_in(ts))
            t = us_to_ns(ts)
            ts_min = t if ts_min is None else min(ts_min, t)
        if is_num(dur):
            max_dec = max(max_dec, decimals_in(dur))
            if dur < 0:
                neg_dur += 1
            if is_num(ts):
                end = us_to_ns(CTX.add(D(ts), D(dur)))
                end_max = end if end_max is None else max(end_max, end)

        if name.startswith("Optimizer.step#") and cat != "gpu_user_annotation" and lcat not in GPU_CATS \
                and is_num(ts) and is_num(dur):
            optimizer_spans.append((us_to_ns(ts), us_to_ns(CTX.add(D(ts), D(dur)))))

        if lcat in GPU_CATS:
            gpu_events += 1
            gpu_corrs.append(args.get("correlation"))
        if lcat in RUNTIME_CATS:
            runtime_events += 1
            c = args.get("correlation")
            if c is not None:
                runtime_corrs.add(c)
        if name.startswith("ncclKernel") or name.startswith("ncclDevKernel"):
            comm_kernels += 1
        if name == "record_param_comms":
            rpc += 1
            cn = args.get("Collective name")
            if cn is not None:
                coll_names.add(cn if isinstance(cn, str) else str(cn))

    linked = sum(1 for c in gpu_corrs if c is not None and c in runtime_corrs)
    # The outermost optimizer steps: one inside another is the same step.
    optimizer_steps, held = 0, None
    for lo, hi in sorted(optimizer_spans, key=lambda s: (s[0], -s[1])):
        if held is not None and lo < held:
            continue
        optimizer_steps += 1
        held = hi
    add_base = (lambda v: v if v is None else v + base) if base is not None else (lambda v: v)
    dtu = top.get("displayTimeUnit")

    return {
        "file": rel,
        "form": form,
        "rank": dist.get("rank"),
        "world_size": dist.get("world_size"),
        "backend": dist.get("backend"),
        "base_time_ns": base,
        "display_time_unit": dtu if isinstance(dtu, str) else None,
        "events_total": len(events),
        "by_ph": by_ph,
        "by_cat": by_cat,
        "x_lanes": len(lanes),
        "steps": sorted(steps),
        "gpu_steps": sorted(gpu_steps),
        "optimizer_steps": optimizer_steps,
        "ts_min_ns": add_base(ts_min),
        "end_max_ns": add_base(end_max),
        "max_ts_decimals": max_dec,
        "gpu_events": gpu_events,
        "comm_kernels": comm_kernels,
        "runtime_events": runtime_events,
        "linked_gpu_events": linked,
        "flows": flows,
        "record_param_comms": rpc,
        "collective_names": sorted(coll_names),
        "negative_durations": neg_dur,
        "x_missing_dur": missing_dur,
    }


def find_traces(root):
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if f.endswith(".json") or f.endswith(".json.gz"):
                full = os.path.join(dirpath, f)
                out.append(os.path.relpath(full, root).replace(os.sep, "/"))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default="/work/shared/traces")
    ap.add_argument("--out", default="crates/rankscope-core/tests/data/trace_expectations.json")
    ap.add_argument("--date", default=datetime.date.today().isoformat(),
                    help="date written into _how (default: today)")
    a = ap.parse_args()

    traces = []
    for rel in find_traces(a.traces):
        traces.append(summarize(rel, load(os.path.join(a.traces, rel))))

    doc = {
        "_how": (
            "Made on %s by `python3 tests/oracle/trace_expectations.py --traces %s --out %s` "
            "from the repository root (Python 3.11 standard library only, no code shared with the "
            "Rust parser; definitions in tests/oracle/README.md). `file` paths are relative to "
            "the traces folder (shared/traces)."
            % (a.date, a.traces, a.out)
        ),
        "traces": traces,
    }
    with open(a.out, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, sort_keys=True, indent=1, ensure_ascii=False)
        fh.write("\n")
    print("wrote %d traces to %s" % (len(traces), a.out))


if __name__ == "__main__":
    main()
