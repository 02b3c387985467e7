"""Many runs, one line each (``rankscope runs``): the ``rankscope.runs/1`` document as a dict,
its text, Markdown and CSV, the record table and the scaling table.

Tables follow :class:`rankscope.Analysis` (pandas, else pyarrow, else lists of dicts; ``form=``).
The record table's columns are the JSON's keys of a run (docs/diff-schema.md, "Many runs"); the
nested objects are flattened with their key as prefix: ``lead`` → ``lead_id``, ``lead_ranks``,
``lead_message``; ``samples_per_step`` → ``samples_per_step`` (its value), ``samples_per_step_from``,
``samples_per_step_why_not`` (and so ``tokens_per_step``); ``peak`` → ``peak_tflops``,
``peak_from``, ``peak_device``.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

from ._analysis import _columns_of, _frame

__all__ = ["Runs", "RUNS_COLUMNS", "SCALING_COLUMNS", "flat_run"]

# In the JSON's order (tests/py checks them against the document).
RUNS_COLUMNS: List[str] = [
    "run", "date", "ranks", "world_size", "backend", "devices", "hosts", "layout", "steps",
    "step_p50_ns", "step_p95_ns", "spread_ns", "comm_share", "exposed_comm_share", "lead_id",
    "lead_ranks", "lead_message", "errors", "samples_per_step", "samples_per_step_from",
    "samples_per_step_why_not", "tokens_per_step", "tokens_per_step_from", "tokens_per_step_why_not",
    "samples_per_s", "tokens_per_s", "flops_per_step", "flops_ops", "flops_share", "flops_why_not",
    "achieved_tflops", "peak_tflops", "peak_from", "peak_device", "mfu", "mfu_why_not", "model",
]

# One row per run of a scaling group: the group's model and parameters, then the point's keys.
SCALING_COLUMNS: List[str] = [
    "model", "params", "run", "ranks", "base", "mode", "step_p50_ns", "ideal_ns", "efficiency",
    "loss_ns", "compute_ns", "exposed_transfer_ns", "exposed_wait_ns", "other_ns",
]

# A count per step: {value, from, why_not} → key, key_from, key_why_not.
_PER_STEP = ("samples_per_step", "tokens_per_step")


def flat_run(r: Dict[str, Any]) -> Dict[str, Any]:
    """One run of the document as a flat row (the module's naming)."""
    row: Dict[str, Any] = {}
    for k, v in r.items():
        if k == "lead":
            v = v or {}
            row.update(lead_id=v.get("id"), lead_ranks=v.get("ranks"), lead_message=v.get("message"))
        elif k in _PER_STEP:
            v = v or {}
            row[k] = v.get("value")
            row[f"{k}_from"] = v.get("from")
            row[f"{k}_why_not"] = v.get("why_not")
        elif k == "peak":
            v = v or {}
            row.update(peak_tflops=v.get("tflops"), peak_from=v.get("from"), peak_device=v.get("device"))
        else:
            row[k] = v
    for k in ("flops_why_not", "mfu_why_not"):
        row.setdefault(k, None)
    return row


class Runs:
    """The record table of several runs. ``report`` is the dict of ``rankscope runs --json``;
    ``json()``, ``markdown()``, ``text()`` and ``csv()`` are the CLI's outputs."""

    def __init__(self, native, failed: Optional[List[tuple]] = None):
        self._native = native
        self._json: Optional[str] = None
        self._report: Optional[Dict[str, Any]] = None
        #: ``(run, message)`` of the runs left out (no trace could be read), as the CLI's stderr.
        self.failed: List[tuple] = list(failed or [])

    def json(self) -> str:
        """``rankscope runs --json`` (schema ``rankscope.runs/1``, docs/diff-schema.md)."""
        if self._json is None:
            self._json = self._native.json()
        return self._json

    @property
    def report(self) -> Dict[str, Any]:
        """The ``rankscope.runs/1`` document as a dict."""
        if self._report is None:
            self._report = json.loads(self.json())
        return self._report

    def to_dict(self) -> Dict[str, Any]:
        """The document as a dict (a copy: change it freely)."""
        return json.loads(self.json())

    def markdown(self) -> str:
        """``rankscope runs --md``."""
        return self._native.markdown()

    def text(self) -> str:
        """``rankscope runs`` (the terminal's text)."""
        return self._native.text()

    def csv(self) -> str:
        """``rankscope runs --csv``."""
        return self._native.csv()

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        return f"<rankscope.Runs: {len(self.report['runs'])} runs, {len(self.report.get('scaling', []))} scaling groups>"

    def table(self, form: str = "auto"):
        """One row per run, in the order given (columns: :data:`RUNS_COLUMNS`)."""
        rows = [flat_run(r) for r in self.report["runs"]]
        return _frame(rows, _columns_of(rows, RUNS_COLUMNS), form)

    def scaling(self, form: str = "auto"):
        """One row per run of each model run at several world sizes: its base, the mode
        (``strong`` or ``weak``), the ideal step, the efficiency and where the loss comes from
        (``compute_ns`` + ``exposed_transfer_ns`` + ``exposed_wait_ns`` + ``other_ns`` =
        ``loss_ns``). Empty when no model was run at two world sizes."""
        rows = []
        for g in self.report.get("scaling", []):
            for p in g["points"]:
                rows.append({"model": g["model"], "params": g["params"], **p})
        return _frame(rows, _columns_of(rows, SCALING_COLUMNS), form)


def expand_runs(path: str, is_candidate, depth: int = 0) -> List[str]:
    """The runs a path stands for, as ``rankscope runs`` takes its arguments: a folder with no
    input file of its own stands for the runs in its subfolders (sorted), four levels deep."""
    if not os.path.isdir(path) or depth > 4:
        return [path]
    names = sorted(os.listdir(path))
    own = any(
        os.path.isfile(os.path.join(path, n)) and is_candidate(n) and n != "scenario.json" for n in names
    )
    if own:
        return [path]
    out: List[str] = []
    for n in names:
        sub = os.path.join(path, n)
        if os.path.isdir(sub):
            out.extend(expand_runs(sub, is_candidate, depth + 1))
    return out


def runs(
    items,
    *,
    samples_per_step: Optional[int] = None,
    tokens_per_step: Optional[int] = None,
    peak_tflops: Optional[float] = None,
    layout: Optional[str] = None,
    rules=None,
    progress=False,
) -> Runs:
    """Many runs, one line each (``rankscope runs RUN...``; ``Runs.json()`` is its ``--json``).
    ``items`` is a list of runs: paths (a folder of rank traces, a job digest, a saved
    ``rankscope analyze --json``; a folder with no input of its own stands for its subfolders'
    runs, as in the CLI), :class:`Analysis` objects, or ``(name, run)`` pairs naming them. One
    path alone may be given for the list. A run whose name is not given is called by its path
    (``run[i]`` for an analysis).

    - ``samples_per_step``, ``tokens_per_step``: the job's global batch for every run, when the
      traces cannot say (``--samples-per-step``, ``--tokens-per-step``; they win).
    - ``peak_tflops``: one device's peak dense TFLOP/s for MFU (``--peak-tflops``).
    - ``layout``, ``rules``, ``progress``: as for :func:`rankscope.analyze`, for runs read from paths.

    A run that cannot be read is left out with a ``RuntimeWarning`` (``Runs.failed``), as the CLI
    leaves it out and says so on stderr."""
    import warnings

    from . import _native, analyze, _saved_analysis  # the package's, defined before this runs
    from ._analysis import Analysis
    from ._errors import RankscopeError

    if isinstance(items, (str, bytes, os.PathLike)):
        items = [items]
    named: List[tuple] = []
    for i, it in enumerate(items):
        if isinstance(it, tuple) and len(it) == 2:
            named.append((str(it[0]), it[1]))
        elif isinstance(it, Analysis):
            named.append((f"run[{i}]", it))
        else:
            for p in expand_runs(os.fsdecode(it), _native.is_folder_candidate):
                named.append((p, p))
    sides: List[tuple] = []
    failed: List[tuple] = []
    for name, run in named:
        if isinstance(run, Analysis):
            out = getattr(run._out, "_inner", run._out)
            sides.append((name, out))
            continue
        saved = _saved_analysis(run)
        if saved is not None:
            sides.append((name, saved))
            continue
        try:
            a = analyze(run, layout=layout, rules=rules, progress=progress, strict=False)
        except RankscopeError as e:
            failed.append((name, str(e)))
            warnings.warn(f"rankscope: {name}: {e}", RuntimeWarning, stacklevel=2)
            continue
        if not a._out.has_traces:
            failed.append((name, "no file could be read as a trace"))
            warnings.warn(f"rankscope: {name}: no file could be read as a trace", RuntimeWarning, stacklevel=2)
            continue
        sides.append((name, a._out))
    native = _native.runs(sides, samples_per_step, tokens_per_step, peak_tflops)
    return Runs(native, failed)
