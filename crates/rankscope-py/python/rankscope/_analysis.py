"""The result of an analysis: the report (``rankscope analyze --json`` as a dict), its Markdown
and CSV, and its tables.

Tables are pandas DataFrames when pandas is installed, else pyarrow Tables when pyarrow is, else
lists of dicts (``form=`` chooses). Columns are the JSON's fields, times in integer ns
(``*_ns``), ratios as fractions; docs/analysis-schema.md defines every one, docs/python.md maps
HTA's functions onto them.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

__all__ = ["Analysis", "COLUMNS"]

# The columns of each named table, in the JSON's order (tests/py checks them against the
# report, so a field added to the schema fails a test until it is listed here). An empty table
# still has them.
COLUMNS: Dict[str, List[str]] = {
    "steps": [
        "step", "rank", "start_ns", "end_ns", "wall_ns", "compute_ns", "comm_ns", "overlap_ns",
        "exposed_comm_ns", "memory_ns", "busy_ns", "idle_ns", "cpu_bound_ns", "launch_overhead_ns",
        "other_idle_ns", "input_ns", "host_sync_ns", "data_loading_ns", "comm_transfer_ns",
        "comm_wait_ns", "exposed_transfer_ns", "exposed_wait_ns", "tb_computation_ns",
        "tb_communication_ns", "tb_other_ns", "source",
    ],
    "collectives": [
        "kind", "pg", "count", "instances", "group_size", "bytes_total", "bytes_p50", "dur_mean_ns",
        "dur_p50_ns", "dur_p95_ns", "dur_p99_ns", "dur_max_ns", "transfer_mean_ns",
        "sync_wait_mean_ns", "skew_p50_ns", "skew_max_ns", "algbw_gbps", "busbw_gbps", "bw_basis",
    ],
    "stragglers": [
        "step", "rank", "lateness_ns", "others_wait_ns", "collectives", "runner_up_rank",
        "runner_up_lateness_ns",
    ],
    "findings": [
        "id", "severity", "message", "fix", "ranks", "steps", "evidence", "symptoms", "location",
        "impact_ns",
    ],
    "alignment": [
        "rank", "method", "offset_ns", "estimate_ns", "residual_ns", "max_residual_ns", "anchors",
        "clock_group", "rank_estimate_ns", "note",
    ],
    "gpu_idle": [
        "rank", "device", "stream", "kernels", "busy_ns", "idle_ns", "host_wait_ns", "kernel_wait_ns",
        "other_ns", "density",
    ],
    "launches": [
        "rank", "launches", "runtime_p50_ns", "runtime_p99_ns", "delay_p50_ns", "delay_p99_ns",
        "delay_max_ns", "runtime_outliers",
    ],
    "diagnostics": ["file", "rank", "kind", "severity", "count", "first_offset", "message"],
}

# ranks(): who each rank is (report["ranks"]) beside its whole-trace figures
# (report["rank_totals"], step_time flattened to step_time_*).
RANK_INFO = [
    "rank", "source", "rank_source", "world_size", "backend", "events", "metrics_from", "devices", "host",
    "capture_gaps",
]
STEP_TIME = ["mean_ns", "p50_ns", "p99_ns", "max_ns", "min_ns", "jitter"]
RANK_TOTALS = [
    "steps", "wall_ns", "compute_ns", "comm_ns", "overlap_ns", "exposed_comm_ns", "memory_ns",
    "idle_ns", "cpu_bound_ns", "launch_overhead_ns", "host_sync_ns", "data_loading_ns",
]
# The totals' remaining fields (after RANK_TOTALS, in the JSON's order) are appended as found.

# names="hta": HTA 0.5's column names, for the figures that are HTA's own (equal on the shared
# traces: tests/py/test_hta_names.py against tests/oracle). Only those columns: HTA's other
# columns (kernel_time, idle_time, non_compute_time of get_temporal_breakdown) measure another
# thing than any figure here (docs/python.md, "From HTA").
HTA_COLUMNS: Dict[str, List[str]] = {
    # get_temporal_breakdown() and get_comm_comp_overlap(), one row per rank.
    "ranks": ["rank", "compute_time(us)", "comp_comm_overlap_pctg"],
    # get_idle_time_breakdown(), long: one row per rank, stream and category.
    "gpu_idle": ["rank", "stream", "idle_category", "idle_time", "idle_time_ratio"],
}
IDLE_CATEGORIES = [("host_wait", "host_wait_ns"), ("kernel_wait", "kernel_wait_ns"), ("other", "other_ns")]


def _names(names: str, table: str) -> bool:
    """True for HTA's names; raises for a name set that is not one or a table HTA has none for."""
    if names not in ("ours", "hta"):
        raise ValueError(f"names must be 'ours' or 'hta', not {names!r}")
    if names == "hta" and table not in HTA_COLUMNS:
        raise ValueError(f"{table}() has no HTA counterpart with the same figures; names='hta' is for {sorted(HTA_COLUMNS)}")
    return names == "hta"


def _frame(rows: List[Dict[str, Any]], columns: List[str], form: str):
    if form not in ("auto", "pandas", "arrow", "records"):
        raise ValueError(f"form must be 'auto', 'pandas', 'arrow' or 'records', not {form!r}")
    if form in ("auto", "pandas"):
        try:
            import pandas as pd
        except ImportError:
            if form == "pandas":
                raise
        else:
            return pd.DataFrame.from_records(rows, columns=columns)
    if form in ("auto", "arrow"):
        try:
            import pyarrow as pa
        except ImportError:
            if form == "arrow":
                raise
        else:
            if not rows:
                return pa.table({c: pa.array([], type=pa.null()) for c in columns})
            return pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows])
    return [{c: r.get(c) for c in columns} for r in rows]


def _columns_of(rows: List[Dict[str, Any]], known: List[str]) -> List[str]:
    """The known columns, then any the report has beyond them (a newer core)."""
    extra: List[str] = []
    for r in rows:
        for k in r:
            if k not in known and k not in extra:
                extra.append(k)
    return known + extra


#: The tables of ``rankscope export`` (docs/columnar.md).
COLUMNAR_TABLES = ["steps", "collectives", "collective_stats", "groups", "findings", "operators", "events"]


class Analysis:
    """One job's analysis. ``report`` is the dict of ``rankscope analyze --json``; ``json()``,
    ``markdown()`` and ``csv()`` are the CLI's ``--json``, ``--md`` and ``--csv`` outputs, byte
    for byte; the table methods take ``form='auto'|'pandas'|'arrow'|'records'``."""

    def __init__(self, out):
        self._out = out
        self._json: Optional[str] = None
        self._report: Optional[Dict[str, Any]] = None

    # -- the CLI's outputs -------------------------------------------------------------------
    def json(self) -> str:
        """``rankscope analyze --json`` (schema ``rankscope.analysis``; ``rankscope.fr`` for
        Flight Recorder dumps alone)."""
        if self._json is None:
            self._json = self._out.json()
        return self._json

    @property
    def report(self) -> Dict[str, Any]:
        """The JSON report as a dict (docs/analysis-schema.md)."""
        if self._report is None:
            self._report = json.loads(self.json())
        return self._report

    def markdown(self) -> str:
        """``rankscope analyze --md``: findings, where the time goes, who waits for whom."""
        return self._out.markdown()

    def csv(self) -> str:
        """``rankscope analyze --csv``: the rank × step table."""
        return self._out.csv()

    def _repr_markdown_(self) -> str:  # Jupyter shows the report a person reads
        return self.markdown()

    def __repr__(self) -> str:
        r = self.report
        if r.get("schema") != "rankscope.analysis":
            return f"<rankscope.Analysis {r.get('schema')}>"
        return (
            f"<rankscope.Analysis: {len(r.get('ranks', []))} ranks, {len(r.get('steps', []))} steps, "
            f"{len(r.get('findings', []))} findings>"
        )

    # -- what the reading said ---------------------------------------------------------------
    @property
    def notes(self) -> List[str]:
        """Files skipped while walking folders, NCCL logs only ``rankscope nccl`` reads."""
        return list(self._out.notes)

    @property
    def failed(self) -> List[Dict[str, str]]:
        """Inputs that could not be read: ``{file, error}`` (the error names the byte offset)."""
        return [{"file": f, "error": e} for f, e in self._out.failed]

    @property
    def clean(self) -> bool:
        """What ``rankscope analyze``'s exit status 0 means: every input read, no job error."""
        return bool(self._out.clean)

    # -- columnar tables (``rankscope export``, docs/columnar.md) ----------------------------
    def columnar(self, table: str, format: str = "arrow") -> bytes:
        """One table of ``rankscope export`` as a file's bytes: ``format`` ``"arrow"`` (the
        Arrow IPC file format) or ``"parquet"``. Tables: :data:`COLUMNAR_TABLES`;
        ``collectives`` and ``events`` need ``rankscope.analyze(..., events=True)``."""
        return bytes(self._out.columnar(table, format))

    def arrow(self, table: str):
        """One table of ``rankscope export`` as a ``pyarrow.Table`` (read from its Arrow IPC
        bytes), with the columns and types docs/columnar.md lists."""
        import pyarrow as pa
        import pyarrow.ipc

        return pyarrow.ipc.open_file(pa.py_buffer(self.columnar(table, "arrow"))).read_all()

    def export(self, out_dir, format: str = "parquet", tables: Optional[List[str]] = None) -> List[str]:
        """Writes ``rankscope export``'s files into ``out_dir`` (made when missing): one per
        table (every one this analysis gives when ``tables`` is ``None``: ``collectives`` and
        ``events`` only with ``events=True``). Returns the paths written."""
        import os

        os.makedirs(out_dir, exist_ok=True)
        if tables is None:
            kept = self._out.has_events
            tables = [t for t in COLUMNAR_TABLES if kept or t not in ("collectives", "events")]
        paths = []
        for t in tables:
            path = os.path.join(os.fspath(out_dir), f"{t}.{format}")
            data = self.columnar(t, format)
            with open(path, "wb") as f:
                f.write(data)
            paths.append(path)
        return paths

    # -- tables ------------------------------------------------------------------------------
    def _list(self, key: str) -> List[Dict[str, Any]]:
        v = self.report.get(key)
        return v if isinstance(v, list) else []

    def table(self, key: str, form: str = "auto"):
        """Any list of the report as a table: ``imbalance``, ``waits``, ``regions``,
        ``phases``, ``comm_origins``, ``critical_path``, ``allocations``, ``fabric``, … (or a
        named table's key)."""
        rows = self._list(key)
        return _frame(rows, _columns_of(rows, COLUMNS.get(key, [])), form)

    def steps(self, form: str = "auto"):
        """One row per rank × step (HTA's per-step view; the CSV's rows): wall, compute,
        communication, overlap, exposed communication split into transfer and wait, idle by
        cause, and the TensorBoard plugin's four bars (``tb_*``). Start/end on the rank's own
        clock (``alignment()`` gives the offsets)."""
        rows = [dict(step=s.get("step"), **r) for s in self._list("steps") for r in s.get("per_rank", [])]
        return _frame(rows, _columns_of(rows, COLUMNS["steps"]), form)

    def ranks(self, form: str = "auto", names: str = "ours"):
        """One row per rank (HTA's ``get_temporal_breakdown`` and ``get_comm_comp_overlap``):
        the file, backend and devices, what the trace lacks (``capture_gaps``), then sums over
        the rank's steps and ratios: ``compute_ns`` (HTA's compute_time), ``overlap_pct_hta``
        (HTA's comp_comm_overlap_pctg), ``exposed_comm_ratio``, ``step_time_*``.

        ``names='hta'``: HTA's frame, ``rank``, ``compute_time(us)``, ``comp_comm_overlap_pctg``
        (the figures HTA computes the same way; its other columns measure something else)."""
        if _names(names, "ranks"):
            rows = [
                {
                    "rank": t.get("rank"),
                    "compute_time(us)": t["compute_ns"] / 1e3 if t.get("compute_ns") is not None else None,
                    "comp_comm_overlap_pctg": t.get("overlap_pct_hta"),
                }
                for t in self._list("rank_totals")
            ]
            return _frame(rows, HTA_COLUMNS["ranks"], form)
        info = {r.get("rank"): r for r in self._list("ranks")}
        rows = []
        for t in self._list("rank_totals"):
            row = {k: info.get(t.get("rank"), {}).get(k) for k in RANK_INFO}
            for k, v in t.items():
                if k == "step_time" and isinstance(v, dict):
                    for sk in STEP_TIME:
                        row[f"step_time_{sk}"] = v.get(sk)
                elif k != "rank":
                    row[k] = v
            rows.append(row)
        return _frame(rows, _columns_of(rows, RANK_INFO + RANK_TOTALS), form)

    def collectives(self, form: str = "auto"):
        """One row per collective kind and process group: count, bytes, duration percentiles,
        transfer against synchronisation wait, arrival skew, algbw / busbw (TB plugin's
        comm-ops table, with the wait split HTA does not make)."""
        return self.table("collectives", form)

    def stragglers(self, form: str = "auto"):
        """One row per step: the rank the others waited for, how late, what it cost them
        (HTA's ``get_potential_stragglers``, per step and with its cost; ``report['straggler']``
        is the job's verdict)."""
        return self.table("stragglers", form)

    def findings(self, form: str = "auto"):
        """The findings, causes first then by time saved per step (``impact_ns``), low ones after."""
        return self.table("findings", form)

    def alignment(self, form: str = "auto"):
        """One row per rank: the clock offset (aligned = rank time − offset_ns), how it was
        found, and its residual."""
        return self.table("alignment", form)

    def gpu_idle(self, form: str = "auto", names: str = "ours"):
        """One row per rank and GPU stream (HTA's ``get_idle_time_breakdown``, wide):
        idle split into ``host_wait_ns``, ``kernel_wait_ns`` (gaps under 30 µs) and
        ``other_ns``, as HTA defines them.

        ``names='hta'``: HTA's long frame, one row per rank, stream and ``idle_category``
        (``host_wait``, ``kernel_wait``, ``other``) with ``idle_time`` in µs (the traces' unit,
        as HTA gives it) and ``idle_time_ratio``, the category's share of the stream's idle time."""
        if _names(names, "gpu_idle"):
            rows = []
            for r in self._list("gpu_idle"):
                total = sum(r.get(k) or 0 for _, k in IDLE_CATEGORIES)
                for cat, k in IDLE_CATEGORIES:
                    v = r.get(k) or 0
                    rows.append(
                        {
                            "rank": r.get("rank"),
                            "stream": r.get("stream"),
                            "idle_category": cat,
                            "idle_time": v / 1e3,
                            "idle_time_ratio": v / total if total else 0.0,
                        }
                    )
            return _frame(rows, HTA_COLUMNS["gpu_idle"], form)
        return self.table("gpu_idle", form)

    def launches(self, form: str = "auto"):
        """One row per rank (HTA's ``get_cuda_kernel_launch_stats``, summarised): launch
        count, runtime-call and launch-delay percentiles, outliers."""
        return self.table("launches", form)

    def whatif(self, form: str = "auto"):
        """One row per step of the what-if replay (docs/metrics.md, "What-if"): the recorded
        step time against the job replayed from its traces (``error`` relative). The rest —
        ``mean_error``, ``max_error``, ``ideal_ns`` (every rank at its peers' typical speed),
        the late ranks' ``ranks[].gain_ns`` — is ``report['whatif']``; empty without
        collectives to replay."""
        w = self.report.get("whatif") or {}
        rows = [
            dict(s, error=((s["replayed_ns"] - s["recorded_ns"]) / s["recorded_ns"]) if s.get("recorded_ns") else None)
            for s in w.get("steps", [])
        ]
        return _frame(rows, ["step", "recorded_ns", "replayed_ns", "error"], form)

    def whatif_timeline(self, form: str = "auto"):
        """One row per span of the replayed timeline (docs/metrics.md, "What-if"): the typical
        step, per rank, ``recorded``, ``replayed`` and ``fixed`` (with the lead finding's cause
        taken away, ``report['whatif']['timeline']['fixed_by']``; none: the ideal step), each
        span ``own`` or ``wait`` in ns from the step's start. Empty without a timeline (no
        collectives to replay, a job that stopped)."""
        t = (self.report.get("whatif") or {}).get("timeline") or {}
        rows = [
            {"step": t["step"], "rank": r["rank"], "version": v, "kind": s["kind"], "start_ns": s["start_ns"], "end_ns": s["end_ns"]}
            for r in t.get("rows", [])
            for v in ("recorded", "replayed", "fixed")
            for s in r[v]
        ]
        return _frame(rows, ["step", "rank", "version", "kind", "start_ns", "end_ns"], form)

    def diagnostics(self, form: str = "auto"):
        """What the reading found wrong in each file, counted (never an exception)."""
        return self.table("diagnostics", form)
