"""Two jobs compared (``rankscope diff``): the ``rankscope.diff/1`` document as a dict, its text,
Markdown and CSV, the ``--fail-on`` gates, and its tables.

Tables follow :class:`rankscope.Analysis`: pandas DataFrames when pandas is installed, else
pyarrow Tables, else lists of dicts (``form=``). Columns are the JSON's fields
(docs/diff-schema.md); a change's shift is flattened as in the JSON (``n_base``, ``n_new``,
``base_ns``, ``new_ns``, ``delta_ns``, ``lo_ns``, ``hi_ns``, ``confidence``).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

from ._analysis import _columns_of, _frame

__all__ = ["Diff", "DIFF_COLUMNS"]

SHIFT = ["n_base", "n_new", "base_ns", "new_ns", "delta_ns", "lo_ns", "hi_ns", "confidence"]
# One side of a collectives row, flattened to base_* / new_*.
COLL_SIDE = ["calls_per_step", "bytes_p50", "dur_p50_ns", "transfer_mean_ns", "wait_mean_ns", "busbw_gbps"]

# The columns of each table, in the JSON's order (tests/py checks them against the document).
DIFF_COLUMNS: Dict[str, List[str]] = {
    "figures": ["rank", "figure", *SHIFT, "beyond_noise"],
    "regions": [
        "rank", "parent", "name", "phase", "presence", "renamed_from", "made_of", "count_base",
        "count_new", *SHIFT, "beyond_noise",
    ],
    "collectives": ["kind", "group", "size", *[f"base_{k}" for k in COLL_SIDE], *[f"new_{k}" for k in COLL_SIDE]],
    "findings": [
        "id", "ranks", "location", "change", "severity_base", "severity_new", "impact_base_ns",
        "impact_new_ns", "message",
    ],
    "config": ["key", "base", "new"],
    # ``top_base`` / ``top_new`` ({rank, self_ns}) flattened to ``top_*_rank``, ``top_*_self_ns``.
    "operators": [
        "kind", "name", "shapes_base", "shapes_new", "other", "presence", "ranks_base", "ranks_new",
        "count_base", "count_new", "count_beyond_noise", "dur_base_ns", "dur_new_ns", *SHIFT,
        "share_base", "share_new", "call_p50_base_ns", "call_p50_new_ns", "top_base_rank",
        "top_base_self_ns", "top_new_rank", "top_new_self_ns", "beyond_noise",
    ],
}


class Diff:
    """Two jobs compared. ``report`` is the dict of ``rankscope diff --json``; ``json()``,
    ``markdown()``, ``text()`` and ``csv()`` are the CLI's outputs; ``verdict`` is the first
    line of every one of them."""

    def __init__(self, native):
        self._native = native
        self._json: Optional[str] = None
        self._report: Optional[Dict[str, Any]] = None

    # -- the CLI's outputs -------------------------------------------------------------------
    def json(self) -> str:
        """``rankscope diff --json`` (schema ``rankscope.diff/1``, docs/diff-schema.md)."""
        if self._json is None:
            self._json = self._native.json()
        return self._json

    @property
    def report(self) -> Dict[str, Any]:
        """The ``rankscope.diff/1`` document as a dict."""
        if self._report is None:
            self._report = json.loads(self.json())
        return self._report

    def to_dict(self) -> Dict[str, Any]:
        """The ``rankscope.diff/1`` document as a dict (a copy: change it freely)."""
        return json.loads(self.json())

    def markdown(self) -> str:
        """``rankscope diff --md``."""
        return self._native.markdown()

    def text(self) -> str:
        """``rankscope diff`` (the terminal's text)."""
        return self._native.text()

    def csv(self) -> str:
        """``rankscope diff --csv``: the step time, every figure and region."""
        return self._native.csv()

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        return f"<rankscope.Diff: {self.verdict}>"

    # -- the judgement -----------------------------------------------------------------------
    @property
    def verdict(self) -> str:
        """What changed and why, in one line: ``step time +34% (…): rank 2's forward > …``, or
        ``no change beyond noise: …``, or ``cannot compare: …``."""
        return self.report["verdict"]["line"]

    @property
    def change(self) -> str:
        """``slower``, ``faster``, ``no_change`` or ``cannot_tell``."""
        return self.report["verdict"]["change"]

    @property
    def beyond_noise(self) -> bool:
        """Whether the step time changed beyond the runs' noise (and the floor)."""
        return bool(self.report["step_time"]["beyond_noise"])

    def fail_on(self, *gates: str) -> List[Tuple[str, float]]:
        """The ``--fail-on`` gates that fail (``"step_time>+5%"``, ``"new_findings>0"``, …;
        docs/diff-schema.md): ``(gate, measured)`` for each, measured as a share of the base's
        median step, in ns, or a count. A gate fails only on a change beyond noise. Empty when
        every gate holds. Raises ``ValueError`` for a gate that does not parse."""
        return [(g, v) for g, v in self._native.failed(list(gates))]

    # -- tables ------------------------------------------------------------------------------
    def _list(self, key: str) -> List[Dict[str, Any]]:
        v = self.report.get(key)
        return v if isinstance(v, list) else []

    def _table(self, key: str, rows: List[Dict[str, Any]], form: str):
        return _frame(rows, _columns_of(rows, DIFF_COLUMNS[key]), form)

    def figures(self, form: str = "auto"):
        """One row per per-step figure (``wall``, ``active``, ``compute``, ``exposed_wait``,
        ``input``, phases, …) of the job (``rank`` None: per step the mean over ranks; for
        ``wall`` the step time), then of each rank: both runs' medians, the shift with its
        interval, and whether it is beyond noise."""
        return self._table("figures", self._list("figures"), form)

    def regions(self, form: str = "auto"):
        """One row per rank × region, then per region on average over ranks (``rank`` None):
        presence (``both``, ``new``, ``vanished``), occurrences per step and the shift of its
        active time per step."""
        return self._table("regions", self._list("regions"), form)

    def collectives(self, form: str = "auto"):
        """One row per collective kind × group × size, each run's figures side by side
        (``base_*``, ``new_*``; None when that run has none of the class)."""
        rows = []
        for c in self._list("collectives"):
            row = {k: c.get(k) for k in ("kind", "group", "size")}
            for side in ("base", "new"):
                s = c.get(side) or {}
                for k in COLL_SIDE:
                    row[f"{side}_{k}"] = s.get(k)
            rows.append(row)
        return self._table("collectives", rows, form)

    def operators(self, form: str = "auto"):
        """One row per operator or kernel key of either run (kind, name, input shapes), matched:
        presence (``both``, ``new``, ``vanished``, ``shapes_changed``), calls per step per rank
        and whether the count changed beyond noise, the shift of its self time per step per
        rank, its share of the step, and the rank where it takes the most (``top_*``); the
        largest change first."""
        rows = []
        for o in self._list("operators"):
            row = {k: v for k, v in o.items() if k not in ("top_base", "top_new")}
            row.setdefault("other", False)
            for side in ("base", "new"):
                t = o.get(f"top_{side}") or {}
                row[f"top_{side}_rank"] = t.get("rank")
                row[f"top_{side}_self_ns"] = t.get("self_ns")
            rows.append(row)
        return self._table("operators", rows, form)

    def findings(self, form: str = "auto"):
        """One row per finding that appeared, disappeared or is in both (``change``), with its
        severity and cost per step in each run."""
        return self._table("findings", self._list("findings"), form)

    def config(self, form: str = "auto"):
        """The configuration facts that differ (world size, backend, devices, mesh, …)."""
        return self._table("config", self._list("config"), form)
