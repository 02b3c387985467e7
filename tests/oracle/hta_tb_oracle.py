#!/usr/bin/env python3
"""Oracle numbers from the incumbent tools: HTA and the TensorBoard profiler plugin.

Runs Meta's HolisticTraceAnalysis (`hta`) and the PyTorch TensorBoard profiler plugin
(`torch_tb_profiler`) on the real traces in the shared traces folder, with each tool's
defaults, and writes what they report as JSON for the Rust tests to compare against.
Definitions of every number (as each tool implements it): HTA_TB.md next to this file.

Run it with a Python that has the two packages (not the system one), from the repo root:

    python3 -m venv /work/venv-oracle
    /work/venv-oracle/bin/pip install holistictraceanalysis==0.5.0 torch-tb-profiler==0.4.3 \
        pandas==2.3.3
    /work/venv-oracle/bin/python tests/oracle/hta_tb_oracle.py \
        --traces /work/shared/traces --out-dir crates/rankscope-core/tests/data

Nothing is copied into the repository: HTA gets a temporary folder of symlinks per trace set
(it wants one folder per job and finds the rank inside each file).

Units: both tools work in the trace's own unit, microseconds (`ts`/`dur` as written, HTA
after its rounding to whole µs, see HTA_TB.md). Every key carries its unit (`_us`, `_pct`,
`_count`, `_ratio`, `_bytes`). NaN becomes null and is listed in that set's `_notes`.
"""

import argparse
import datetime
import json
import logging
import math
import os
import re
import sys
import tempfile
import traceback

# --------------------------------------------------------------------------------------
# trace sets

HTA_SETS = [
    ("param-dlrm-8rank", ["param-dlrm-8rank"]),
    ("ddp-gloo-cpu-4rank", ["ddp-gloo-cpu-4rank"]),
    ("hta/nccl_parser_config", ["hta/nccl_parser_config/nccl_data.json.gz"]),
    ("hta/df_index_resolver", ["hta/df_index_resolver/df_index_resolver.json.gz"]),
    ("hta/ns_resolution_trace", ["hta/ns_resolution_trace"]),
    ("tracelens/resnet_act_checkpoint", ["tracelens/resnet_act_checkpoint.json.gz"]),
    ("tracelens/b200_eager_trace", ["tracelens/b200_eager_trace.json.gz"]),
    ("kineto-tb-plugin", ["kineto-tb-plugin"]),
]

# The TB plugin: the multi-worker sets get the distributed view; the others only the
# per-worker overview (one worker cannot have a distributed view).
TB_SETS = [
    ("param-dlrm-8rank", ["param-dlrm-8rank"]),
    ("kineto-tb-plugin", ["kineto-tb-plugin"]),
    ("ddp-gloo-cpu-4rank", ["ddp-gloo-cpu-4rank"]),
    ("hta/nccl_parser_config", ["hta/nccl_parser_config/nccl_data.json.gz"]),
    ("hta/ns_resolution_trace", ["hta/ns_resolution_trace"]),
    ("tracelens/resnet_act_checkpoint", ["tracelens/resnet_act_checkpoint.json.gz"]),
    ("tracelens/b200_eager_trace", ["tracelens/b200_eager_trace.json.gz"]),
]


def expand(traces, parts):
    """Trace files (absolute, sorted) for a list of files/folders relative to traces/."""
    out = []
    for p in parts:
        full = os.path.join(traces, p)
        if os.path.isdir(full):
            for fn in sorted(os.listdir(full)):
                if fn.endswith(".json") or fn.endswith(".json.gz"):
                    out.append(os.path.join(full, fn))
        else:
            out.append(full)
    return out


def rel(traces, path):
    return os.path.relpath(path, traces).replace(os.sep, "/")


# --------------------------------------------------------------------------------------
# JSON helpers


class Notes(list):
    def add(self, msg):
        if msg not in self:
            self.append(msg)


def num(x, notes=None, where=""):
    """numpy/pandas scalar -> int/float/None (NaN -> None, noted)."""
    if x is None:
        return None
    try:
        import numpy as np

        if isinstance(x, np.generic):
            x = x.item()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(x, bool):
        return x
    if isinstance(x, int):
        return x
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            if notes is not None:
                notes.add(f"{where}: {x} (reported as null)")
            return None
        if x == int(x) and abs(x) < 2**53:
            return int(x)
        return x
    return x


def err_text(e):
    s = f"{type(e).__name__}: {e}"
    return s if len(s) < 600 else s[:600] + "..."


def last_frame(e):
    """file:line:function of the innermost frame inside the tool, for the notes."""
    tb = traceback.extract_tb(e.__traceback__)
    for fr in reversed(tb):
        if "site-packages" in fr.filename:
            short = fr.filename.split("site-packages" + os.sep)[-1]
            return f"{short}:{fr.lineno} in {fr.name}"
    fr = tb[-1]
    return f"{os.path.basename(fr.filename)}:{fr.lineno} in {fr.name}"


class Capture(logging.Handler):
    """Collects a tool's log records (WARNING and up) instead of printing them."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.records = []

    def emit(self, record):
        msg = record.getMessage()
        # drop timing chatter and absolute paths (they change between machines)
        if re.search(r"(seconds|time = |duration=|Parsed |MB, current)", msg):
            return
        msg = re.sub(r"/\S*?/traces/", "<traces>/", msg)
        msg = re.sub(r"/tmp/\S+?/", "<tmp>/", msg)
        self.records.append(f"{record.levelname}: {msg}")

    def take(self):
        out, self.records = self.records, []
        # keep order, drop duplicates
        seen, uniq = set(), []
        for r in out:
            if r not in seen:
                seen.add(r)
                uniq.append(r)
        return uniq


# --------------------------------------------------------------------------------------
# HTA


def describe(series, notes, where):
    """count/mean/std/min/p25/p50/p75/p95/p99/max of a pandas Series (linear interpolation,
    pandas' default; std with ddof=1). Computed by the oracle from HTA's per-event frame."""
    s = series.dropna()
    if len(s) == 0:
        return {"count": 0}
    q = s.quantile([0.25, 0.5, 0.75, 0.95, 0.99])
    return {
        "count": int(len(s)),
        "mean": num(float(s.mean()), notes, where),
        "std": num(float(s.std()), notes, where) if len(s) > 1 else None,
        "min": num(s.min(), notes, where),
        "p25": num(float(q[0.25]), notes, where),
        "p50": num(float(q[0.5]), notes, where),
        "p75": num(float(q[0.75]), notes, where),
        "p95": num(float(q[0.95]), notes, where),
        "p99": num(float(q[0.99]), notes, where),
        "max": num(s.max(), notes, where),
        "sum": num(s.sum(), notes, where),
    }


def with_unit(d, unit):
    """Suffix every statistic except count with the unit."""
    return {(k if k == "count" else f"{k}_{unit}"): v for k, v in d.items()}


def hta_gpu_event_counts(t):
    """Per rank: rows HTA's GPUKernelFilter selects (stream >= 0 and correlation >= 0,
    or named 'Event Sync'/'Context Sync')."""
    from hta.common.trace_filter import GPUKernelFilter

    return {
        str(r): int(len(GPUKernelFilter()(df, t.symbol_table))) for r, df in t.traces.items()
    }


def run_hta_set(name, files, traces, cap):
    import pandas as pd
    from hta.analyzers.breakdown_analysis import BreakdownAnalysis
    from hta.common.trace import Trace
    from hta.trace_analysis import TraceAnalysis
    from hta.utils.utils import get_kernel_type

    notes = Notes()
    out = {"files": [rel(traces, f) for f in files], "_notes": notes}
    tmp = tempfile.mkdtemp(prefix="hta_oracle_")
    for f in files:
        os.symlink(f, os.path.join(tmp, os.path.basename(f)))

    # 1. The numbers before HTA's step filter (a second, plain parse of the same folder).
    try:
        t0 = Trace(trace_dir=tmp)
        t0.parse_traces(use_multiprocessing=False)
        out["load"] = {
            "gpu_events_before_filter_count": hta_gpu_event_counts(t0),
            "ts_column_was_float_so_rounded": None,  # filled from the log below
        }
        del t0
    except Exception as e:  # noqa: BLE001
        notes.add(f"plain parse failed: {err_text(e)} at {last_frame(e)}")
        out["load"] = {}
    cap.take()

    # 2. The real thing: TraceAnalysis with defaults.
    try:
        ta = TraceAnalysis(trace_dir=tmp)
    except Exception as e:  # noqa: BLE001
        notes.add(f"TraceAnalysis(trace_dir) failed: {err_text(e)} at {last_frame(e)}")
        out["load"]["log"] = cap.take()
        return out
    t = ta.t
    load_log = cap.take()
    ranks = sorted(t.traces.keys())
    sym = t.symbol_table.get_sym_id_map()
    step_syms = sorted(k for k in sym if "ProfilerStep" in k)
    load = out["load"]
    load.update(
        {
            "ranks": ranks,
            "rank_files": {
                str(r): rel(traces, os.path.realpath(t.trace_files[r])) for r in ranks
            },
            "profiler_step_symbols": step_syms,
            "last_step_filter_applied": len(step_syms) >= 2,
            "iterations_kept": {str(r): [int(i) for i in t.get_iterations(r)] for r in ranks},
            "gpu_events_after_filter_count": hta_gpu_event_counts(t),
            "ts_column_was_float_so_rounded": any("Rounding down ns" in m for m in load_log),
            "log": load_log,
        }
    )
    try:
        load["profiler_steps"] = [int(s) for s in ta.get_profiler_steps()]
    except Exception as e:  # noqa: BLE001
        load["profiler_steps"] = None
        notes.add(f"get_profiler_steps failed: {err_text(e)} at {last_frame(e)}")
    for r in ranks:
        df = t.traces[r]
        g = df[df["stream"].ne(-1)]
        load.setdefault("events_kept_count", {})[str(r)] = int(len(df))
        load.setdefault("stream_ne_minus1_count", {})[str(r)] = int(len(g))
        # after HTA's ceil(ts)/floor(ts+dur) rounding a sub-µs event can end before it starts
        load.setdefault("stream_ne_minus1_negative_dur_count", {})[str(r)] = int((g["dur"] < 0).sum())
        load.setdefault("stream_ne_minus1_zero_dur_count", {})[str(r)] = int((g["dur"] == 0).sum())

    sym_table = t.symbol_table.get_sym_table()

    # 3. Temporal breakdown
    try:
        tb = ta.get_temporal_breakdown(visualize=False)
        res = {}
        for _, row in tb.iterrows():
            w = f"temporal_breakdown rank {int(row['rank'])}"
            res[str(int(row["rank"]))] = {
                "idle_time_us": num(row["idle_time(us)"], notes, w),
                "compute_time_us": num(row["compute_time(us)"], notes, w),
                "non_compute_time_us": num(row["non_compute_time(us)"], notes, w),
                "kernel_time_us": num(row["kernel_time(us)"], notes, w),
                "idle_time_pct": num(row["idle_time_pctg"], notes, w),
                "compute_time_pct": num(row["compute_time_pctg"], notes, w),
                "non_compute_time_pct": num(row["non_compute_time_pctg"], notes, w),
            }
        out["temporal_breakdown"] = res
    except Exception as e:  # noqa: BLE001
        out["temporal_breakdown"] = None
        notes.add(f"get_temporal_breakdown failed: {err_text(e)} at {last_frame(e)}")
    log = cap.take()
    if log:
        out["temporal_breakdown_log"] = log

    # 4. Communication / computation overlap
    try:
        ov = ta.get_comm_comp_overlap(visualize=False)
        out["comm_comp_overlap"] = {
            str(int(row["rank"])): {
                "comp_comm_overlap_pct": num(
                    row["comp_comm_overlap_pctg"], notes, f"comm_comp_overlap rank {int(row['rank'])}"
                )
            }
            for _, row in ov.iterrows()
        }
    except Exception as e:  # noqa: BLE001
        out["comm_comp_overlap"] = None
        notes.add(f"get_comm_comp_overlap failed: {err_text(e)} at {last_frame(e)}")
    log = cap.take()
    if log:
        out["comm_comp_overlap_log"] = log

    # 5. Idle time breakdown, every rank, every stream, default threshold (30, trace units = µs)
    try:
        idle, stats = ta.get_idle_time_breakdown(
            ranks=ranks, visualize=False, show_idle_interval_stats=True
        )
        res = {}
        for _, row in idle.iterrows():
            r, s, cat = str(int(row["rank"])), str(int(row["stream"])), row["idle_category"]
            w = f"idle rank {r} stream {s} {cat}"
            res.setdefault(r, {}).setdefault(s, {})[cat] = {
                "idle_time_us": num(row["idle_time"], notes, w),
                "idle_time_ratio": num(row["idle_time_ratio"], notes, w),
            }
        if stats is not None:
            for cat, row in stats.iterrows():
                r, s = str(int(row["rank"])), str(int(row["stream"]))
                d = res.setdefault(r, {}).setdefault(s, {}).setdefault(cat, {})
                d["interval_count"] = num(row["count"])
                for k_in, k_out in [
                    ("mean", "interval_mean_us"),
                    ("min", "interval_min_us"),
                    ("50%", "interval_p50_us"),
                    ("max", "interval_max_us"),
                ]:
                    v = row[k_in]
                    # NaN here only means "no interval in this category": not a failure
                    d[k_out] = None if (isinstance(v, float) and math.isnan(v)) else num(v)
        for r, streams in res.items():
            for s, cats in streams.items():
                tot = sum((c.get("idle_time_us") or 0) for c in cats.values())
                cats["_total_idle_time_us"] = num(float(tot))
        out["idle_time_breakdown"] = {"consecutive_kernel_delay_trace_units": 30, "ranks": res}
    except Exception as e:  # noqa: BLE001
        out["idle_time_breakdown"] = None
        notes.add(f"get_idle_time_breakdown failed: {err_text(e)} at {last_frame(e)}")
    log = cap.take()
    if log:
        out["idle_time_breakdown_log"] = log

    # 6. Kernel launch statistics (HTA returns one row per correlation id; summary is ours)
    try:
        ls = ta.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
        res = {}
        for r, df in ls.items():
            w = f"launch stats rank {r}"
            res[str(r)] = {
                "events_count": int(len(df)),
                "cpu_duration": with_unit(describe(df["cpu_duration"], notes, w), "us"),
                "gpu_duration": with_unit(describe(df["gpu_duration"], notes, w), "us"),
                "launch_delay": with_unit(describe(df["launch_delay"], notes, w), "us"),
                # the three sets HTA's plots show (cuda_kernel_analysis.visualize_cuda_launch_kernel_info)
                "short_gpu_kernels_count": int(
                    ((df["cpu_duration"] <= 50) & (df["gpu_duration"] < df["cpu_duration"])).sum()
                ),
                "runtime_outliers_gt_50us_count": int((df["cpu_duration"] > 50).sum()),
                "launch_delay_outliers_gt_100us_count": int((df["launch_delay"] > 100).sum()),
            }
        out["cuda_kernel_launch_stats"] = res
    except Exception as e:  # noqa: BLE001
        out["cuda_kernel_launch_stats"] = None
        notes.add(f"get_cuda_kernel_launch_stats failed: {err_text(e)} at {last_frame(e)}")
    log = cap.take()
    if log:
        out["cuda_kernel_launch_stats_log"] = log

    # 7. GPU kernel breakdown
    try:
        kt, allk = ta.get_gpu_kernel_breakdown(visualize=False)
        res = {
            "all_ranks_by_type": {
                row["kernel_type"]: {
                    "sum_us": num(row["sum"], notes, "kernel breakdown"),
                    "pct": num(row["percentage"], notes, "kernel breakdown"),
                }
                for _, row in kt.iterrows()
            }
        }
        per_rank = {}
        for (r, ktype), g in allk.groupby(["rank", "kernel_type"]):
            per_rank.setdefault(str(int(r)), {})[ktype] = {
                "sum_of_durations_us": num(g["sum (us)"].sum(), notes, "kernel breakdown"),
            }
        # per rank, the same union-based split HTA computes for all ranks together
        for r in ranks:
            df = t.traces[r]
            g = df[df["stream"].ne(-1)].copy()
            g["kernel_type"] = g["name"].apply(lambda x: get_kernel_type(sym_table[x]))
            typed = BreakdownAnalysis._get_gpu_kernel_type_time(
                g, ["COMPUTATION", "COMMUNICATION", "MEMORY"]
            )
            per_rank.setdefault(str(r), {})["_union_by_type"] = {
                row["kernel_type"]: {"sum_us": num(row["sum"])} for _, row in typed.iterrows()
            }
            per_rank[str(r)]["_event_count_by_type"] = {
                k: int(v) for k, v in g["kernel_type"].value_counts().sort_index().items()
            }
        res["per_rank"] = per_rank
        out["gpu_kernel_breakdown"] = res
    except Exception as e:  # noqa: BLE001
        out["gpu_kernel_breakdown"] = None
        notes.add(f"get_gpu_kernel_breakdown failed: {err_text(e)} at {last_frame(e)}")
    log = cap.take()
    if log:
        out["gpu_kernel_breakdown_log"] = log

    # 8. Stragglers (default: 2 candidates, late start of the last long ncclKernel*)
    try:
        st = ta.get_potential_stragglers()
        out["potential_stragglers"] = [int(x) for x in st]
    except Exception as e:  # noqa: BLE001
        out["potential_stragglers"] = None
        notes.add(f"get_potential_stragglers failed: {err_text(e)} at {last_frame(e)}")
    log = cap.take()
    if log:
        out["potential_stragglers_log"] = log

    # 9. Critical path on the first rank, first ProfilerStep (only whether it works)
    if name in ("param-dlrm-8rank", "ddp-gloo-cpu-4rank"):
        try:
            cp, ok = ta.critical_path_analysis(rank=ranks[0], annotation="ProfilerStep", instance_id=0)
            out["critical_path_rank0_step0"] = {"success": bool(ok)}
            try:
                # what CPGraph.summary() prints, without the print: duration on the path by bound_by
                edf = cp.get_critical_path_breakdown()
                by = edf.groupby("bound_by").duration.sum()
                out["critical_path_rank0_step0"]["path_length_us"] = num(edf.duration.sum())
                out["critical_path_rank0_step0"]["by_bound_us"] = {
                    str(k): num(v) for k, v in by.items()
                }
            except Exception as e:  # noqa: BLE001
                out["critical_path_rank0_step0"]["breakdown_error"] = err_text(e)
        except Exception as e:  # noqa: BLE001
            out["critical_path_rank0_step0"] = {"success": False, "error": err_text(e)}
            notes.add(f"critical_path_analysis failed: {err_text(e)} at {last_frame(e)}")
        log = cap.take()
        if log:
            out["critical_path_log"] = log[:20]

    # 10. Frequent CUDA kernel sequences (cheap only on the DLRM set)
    if name == "param-dlrm-8rank":
        try:
            fdir = tempfile.mkdtemp(prefix="hta_freq_")
            fk = ta.get_frequent_cuda_kernel_sequences(
                operator_name="aten::linear", output_dir=fdir, rank=ranks[0], visualize=False
            )
            out["frequent_cuda_kernel_sequences_rank0_aten_linear"] = [
                {str(k): num(v) if not isinstance(v, str) else v for k, v in row.items()}
                for _, row in fk.head(5).iterrows()
            ]
        except Exception as e:  # noqa: BLE001
            out["frequent_cuda_kernel_sequences_rank0_aten_linear"] = None
            notes.add(f"get_frequent_cuda_kernel_sequences failed: {err_text(e)} at {last_frame(e)}")
        cap.take()

    return out


# --------------------------------------------------------------------------------------
# TensorBoard plugin

ROLE_KEYS = [
    "kernel_us",
    "memcpy_us",
    "memset_us",
    "communication_us",
    "runtime_us",
    "dataloader_us",
    "cpu_exec_us",
    "other_us",
    "total_us",
]


def tb_worker_span(path):
    from torch_tb_profiler import consts

    base = os.path.basename(path)
    m = consts.WORKER_PATTERN.match(base)
    if m:
        return m.group(1), (m.group(2)[1:] if m.group(2) else None)
    return re.sub(r"\.json(\.gz)?$", "", base), None


def run_tb_set(name, files, traces, cap):
    from torch_tb_profiler.profiler.data import DistributedRunProfileData, RunProfileData
    from torch_tb_profiler.profiler.event_parser import ProfileRole
    from torch_tb_profiler.profiler.loader import RunLoader
    from torch_tb_profiler.profiler.run_generator import RunGenerator
    from torch_tb_profiler.run import Run

    notes = Notes()
    out = {"files": [rel(traces, f) for f in files], "_notes": notes, "workers": {}}
    cache_dir = tempfile.mkdtemp(prefix="tb_oracle_")

    # the same worker/span naming RunLoader.load does (span timestamp -> 1-based index)
    ws = [(f,) + tb_worker_span(f) for f in files]
    spans_by_worker = {}
    for _, w, s in ws:
        if s is not None:
            spans_by_worker.setdefault(w, []).append(s)
    dist_run = Run(name, os.path.dirname(files[0]))
    n_dist = 0
    for f, worker, span in ws:
        span_idx = None if span is None else sorted(spans_by_worker[worker]).index(span) + 1
        wout = {"file": rel(traces, f), "span_index": span_idx}
        out["workers"][worker] = wout
        try:
            data = RunProfileData.parse(worker, span_idx, f, cache_dir)
            profile = RunGenerator(worker, span_idx, data).generate_run_profile()
        except Exception as e:  # noqa: BLE001
            notes.add(f"worker {worker}: parse failed: {err_text(e)} at {last_frame(e)}")
            wout["log"] = cap.take()
            continue
        steps = []
        for i, costs in enumerate(data.steps_costs):
            row = {"step": data.steps_names[i]}
            for k, v in zip(ROLE_KEYS, costs.costs):
                row[k] = num(v, notes, f"{worker} step {data.steps_names[i]}")
            steps.append(row)
        wout["overview_steps"] = steps
        wout["overview_average"] = {
            k: num(v, notes, f"{worker} avg") for k, v in zip(ROLE_KEYS, data.avg_costs.costs)
        }
        wout["overview_shown_columns"] = [
            c["name"] for c in profile.overview["steps"]["columns"] if "name" in c
        ]
        wout["comm_overlap_steps"] = [
            {
                "step": data.steps_names[i],
                "computation_us": num(c.computation),
                "communication_us": num(c.communication),
                "overlap_us": num(c.overlap),
                "other_us": num(c.other),
            }
            for i, c in enumerate(data.comm_overlap_costs)
        ]
        wout["has_kernel"] = bool(data.has_kernel)
        wout["has_runtime"] = bool(data.has_runtime)
        wout["has_communication"] = bool(data.has_communication)
        wout["comm_lib"] = sorted(str(x.name) for x in data.comm_lib)
        wout["use_ddp"] = bool(data.use_ddp)
        cn = data.comm_node_list or []
        wout["comm_nodes_count"] = len(cn)
        wout["comm_nodes_by_name_count"] = {}
        for n in cn:
            wout["comm_nodes_by_name_count"][n.name] = wout["comm_nodes_by_name_count"].get(n.name, 0) + 1
        # kernel_ranges[0] is the CPU op itself; more entries = linked GPU kernels
        wout["comm_nodes_with_linked_kernels_count"] = sum(1 for n in cn if len(n.kernel_ranges) > 1)
        gm = data.gpu_metrics_parser
        wout["gpu_utilization_ratio"] = {str(g): num(gm.gpu_utilization[g]) for g in gm.gpu_ids}
        wout["recommendations"] = [re.sub(r"<[^>]+>", "", r) for r in data.recommendations]
        dist_run.add_profile(DistributedRunProfileData(data))
        n_dist += 1
        wout["log"] = cap.take()

    if len(files) > 1:
        dist = {"enabled": False}
        try:
            loader = RunLoader(name, os.path.dirname(files[0]), None)
            profiles = [p for p in loader._process_spans(dist_run) if p is not None]
            dist["log"] = cap.take()
            if profiles:
                p = profiles[0]
                dist["enabled"] = True
                ov = {}
                for step, per_w in p.steps_to_overlap["data"].items():
                    ov[step] = {
                        w: {
                            "computation_minus_overlap_us": num(v[0]),
                            "overlap_us": num(v[1]),
                            "communication_minus_overlap_us": num(v[2]),
                            "other_us": num(v[3]),
                        }
                        for w, v in per_w.items()
                    }
                dist["overlap_by_step"] = ov
                wt = {}
                for step, per_w in p.steps_to_wait["data"].items():
                    wt[step] = {
                        w: {"data_transfer_us": num(v[0]), "synchronizing_us": num(v[1])}
                        for w, v in per_w.items()
                    }
                dist["wait_by_step"] = wt
                ops = {}
                for w, table in p.comm_ops["data"].items():
                    ops[w] = {
                        row[0]: {
                            "calls_count": num(row[1]),
                            "total_size_bytes": num(row[2]),
                            "avg_size_bytes": num(row[3]),
                            "total_latency_us": num(row[4]),
                            "avg_latency_us": num(row[5]),
                            "data_transfer_us": num(row[6]),
                            "avg_data_transfer_us": num(row[7]),
                        }
                        for row in table["rows"]
                    }
                dist["comm_ops"] = ops
            else:
                notes.add("distributed view: none produced (see distributed.log)")
        except Exception as e:  # noqa: BLE001
            dist["error"] = err_text(e)
            notes.add(f"distributed view failed: {err_text(e)} at {last_frame(e)}")
            dist["log"] = cap.take()
        out["distributed"] = dist
    return out


# --------------------------------------------------------------------------------------


def versions():
    from importlib.metadata import version

    v = {"python": sys.version.split()[0]}
    for pkg in ["holistictraceanalysis", "torch-tb-profiler", "pandas", "numpy", "tensorboard"]:
        try:
            v[pkg] = version(pkg)
        except Exception:  # noqa: BLE001
            v[pkg] = None
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", default="/work/shared/traces")
    ap.add_argument("--out-dir", default="crates/rankscope-core/tests/data")
    ap.add_argument("--only", choices=["hta", "tb"], default=None)
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    args = ap.parse_args()
    traces = os.path.abspath(args.traces)

    # Tool logs: captured into the JSON, not printed.
    cap = Capture()
    import hta.configs.config  # noqa: F401  (creates the hta logger first)

    for lname in ["hta", "pytorch_profiler"]:
        lg = logging.getLogger(lname)
        for h in list(lg.handlers):
            lg.removeHandler(h)
        lg.addHandler(cap)
        lg.propagate = False
    logging.getLogger().handlers = [cap]
    import warnings

    warnings.simplefilter("ignore")

    import pandas

    if int(pandas.__version__.split(".")[0]) >= 3:
        sys.exit(
            f"pandas {pandas.__version__}: HTA 0.5.0 breaks under pandas 3 (the MI300 trace fails to "
            "load, critical path fails). Install pandas==2.3.3 in the venv (see HTA_TB.md)."
        )

    how = (
        f"Made on {args.date} by `python tests/oracle/hta_tb_oracle.py --traces {args.traces} "
        f"--out-dir {args.out_dir}` with the versions in _versions (see tests/oracle/HTA_TB.md)."
    )
    ver = versions()

    if args.only in (None, "hta"):
        res = {}
        for name, parts in HTA_SETS:
            print(f"[hta] {name}", flush=True)
            res[name] = run_hta_set(name, expand(traces, parts), traces, cap)
        doc = {"_how": how, "_versions": ver, "sets": res}
        path = os.path.join(args.out_dir, "hta_expectations.json")
        with open(path, "w") as fh:
            json.dump(doc, fh, indent=1, sort_keys=True)
            fh.write("\n")
        print(f"wrote {path}")
        print_hta_summary(res)

    if args.only in (None, "tb"):
        res = {}
        for name, parts in TB_SETS:
            print(f"[tb] {name}", flush=True)
            res[name] = run_tb_set(name, expand(traces, parts), traces, cap)
        doc = {"_how": how, "_versions": ver, "sets": res}
        path = os.path.join(args.out_dir, "tb_expectations.json")
        with open(path, "w") as fh:
            json.dump(doc, fh, indent=1, sort_keys=True)
            fh.write("\n")
        print(f"wrote {path}")
        print_tb_summary(res)


def print_hta_summary(res):
    for name, s in res.items():
        print(f"== HTA {name}")
        for n in s["_notes"]:
            print(f"   note: {n}")
        tb = s.get("temporal_breakdown") or {}
        ov = s.get("comm_comp_overlap") or {}
        for r in sorted(tb, key=int):
            x = tb[r]
            o = (ov.get(r) or {}).get("comp_comm_overlap_pct")
            print(
                f"   rank {r}: compute {x['compute_time_pct']}% non-compute {x['non_compute_time_pct']}% "
                f"idle {x['idle_time_pct']}% of kernel_time {x['kernel_time_us']} us; overlap {o}%"
            )


def print_tb_summary(res):
    for name, s in res.items():
        print(f"== TB {name}")
        for n in s["_notes"]:
            print(f"   note: {n}")
        for w, x in s["workers"].items():
            for c in x.get("comm_overlap_steps", []):
                print(
                    f"   {w} step {c['step']}: computation {c['computation_us']} overlap {c['overlap_us']} "
                    f"communication {c['communication_us']} other {c['other_us']}"
                )
        d = s.get("distributed")
        if d is not None:
            print(f"   distributed view enabled: {d['enabled']}")


if __name__ == "__main__":
    main()
