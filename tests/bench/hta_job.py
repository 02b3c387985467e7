"""HTA's side of `./x bench`: Holistic Trace Analysis on a directory of rank traces, the analyses
`rankscope analyze` also answers, each timed. Run by tests/bench/run.py with the bench venv's
Python (HTA and pandas only; HTA does not need torch):

    python hta_job.py TRACE_DIR

Prints one JSON line: the seconds of each stage and what HTA found (the ranks it loaded, its
straggler candidates), so the bench can check HTA read the whole job. HTA's defaults except
`visualize=False` and `ranks=<all>` for the idle time (its default is rank 0 only), as
tests/oracle/hta_tb_oracle.py calls it. Its trace parse uses a process pool of
min(cores, ranks) (`use_multiprocessing=True`, the default).
"""

import json
import logging
import sys
import time


def main():
    trace_dir = sys.argv[1]
    t = {}
    s = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis  # the import (pandas, plotly) counts apart

    t["import_s"] = time.perf_counter() - s
    logging.getLogger("hta").setLevel(logging.ERROR)
    s = time.perf_counter()
    ta = TraceAnalysis(trace_dir=trace_dir)
    t["load_s"] = time.perf_counter() - s
    ranks = sorted(ta.t.traces.keys())
    s = time.perf_counter()
    ta.get_temporal_breakdown(visualize=False)
    t["temporal_s"] = time.perf_counter() - s
    s = time.perf_counter()
    ta.get_comm_comp_overlap(visualize=False)
    t["overlap_s"] = time.perf_counter() - s
    s = time.perf_counter()
    ta.get_idle_time_breakdown(ranks=ranks, visualize=False)
    t["idle_s"] = time.perf_counter() - s
    # HTA 0.5.0 takes communication kernels to be the ones named `ncclKernel*`
    # (hta/analyzers/straggler.py); NCCL >= 2.19 (and the synth traces) name them
    # `ncclDevKernel_*`, and then it finds no kernel to compare and raises. Timed all the same.
    s = time.perf_counter()
    try:
        stragglers = [int(r) for r in ta.get_potential_stragglers()]
        failed = None
    except Exception as e:  # noqa: BLE001 - reported, not hidden
        stragglers, failed = [], f"{type(e).__name__}: {e}"
    t["straggler_s"] = time.perf_counter() - s
    events = sum(len(df) for df in ta.t.traces.values())
    print(json.dumps({**t, "ranks": ranks, "events_kept": events,
                      "stragglers": stragglers, "straggler_failed": failed}))


if __name__ == "__main__":
    main()
