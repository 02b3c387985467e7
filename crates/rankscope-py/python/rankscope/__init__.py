"""rankscope: diagnose distributed PyTorch training from per-rank Kineto traces, NCCL logs and
Flight Recorder dumps.

    import rankscope
    a = rankscope.analyze("traces/")          # a folder, a file, or a list of them
    a.ranks(); a.steps(); a.findings()        # pandas DataFrames (pyarrow tables, or dicts)
    d = rankscope.diff("last_week/", "today/") # what changed, and why (``rankscope diff``)
    d.verdict; d.figures(); d.fail_on("step_time>+5%")

The work is done in Rust (the same code as the ``rankscope`` CLI and the browser app), on every
core, with the GIL released. ``a.report`` is exactly ``rankscope analyze --json``.

For jobs spread over many machines, each file's part can be computed where the file is
(``rankscope.part(path) -> bytes``) and the parts combined anywhere (``rankscope.combine``);
``rankscope.ray.analyze`` does that on a Ray cluster.
"""

from __future__ import annotations

import os
import warnings
from typing import Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from . import _native
from ._analysis import Analysis
from ._diff import Diff
from ._runs import Runs, runs
from ._errors import PartError, RankscopeError, TraceError
from ._progress import resolve as _resolve_progress

__all__ = [
    "analyze",
    "part",
    "part_info",
    "combine",
    "Parts",
    "Analysis",
    "diff",
    "Diff",
    "runs",
    "Runs",
    "RankscopeError",
    "TraceError",
    "PartError",
    "PART_VERSION",
    "__version__",
]

__version__: str = _native.__version__
#: The format version of the bytes ``part`` writes (``combine`` reads only this one).
PART_VERSION: int = _native.PART_VERSION

PathLike = Union[str, "os.PathLike[str]"]
Paths = Union[PathLike, Iterable[PathLike]]


def _paths(paths_or_dir: Paths) -> List[str]:
    if isinstance(paths_or_dir, (str, bytes, os.PathLike)):
        items = [paths_or_dir]
    else:
        items = list(paths_or_dir)
    out = [os.fsdecode(p) for p in items]
    if not out:
        raise RankscopeError("no paths given")
    return out


def _ranks(ranks: Union[None, Mapping[str, int], Iterable[str]]) -> List[str]:
    """``{"path/to/file.json": 3}`` or ``["file.json=3"]`` → the CLI's ``FILE=N`` strings."""
    if ranks is None:
        return []
    if isinstance(ranks, Mapping):
        return [f"{os.fsdecode(f)}={int(r)}" for f, r in ranks.items()]
    if isinstance(ranks, str):
        raise TypeError("ranks: a mapping {file: rank} or a list of 'FILE=N' strings, not one string")
    return [str(x) for x in ranks]


def _offsets(offsets: Optional[Mapping[int, int]]) -> List[Tuple[int, int]]:
    """``{rank: offset_ns}``: aligned time = rank time − offset (the CLI's ``--offset``)."""
    if offsets is None:
        return []
    out = []
    for r, ns in offsets.items():
        if isinstance(ns, float) and not ns.is_integer():
            raise ValueError(f"offsets: {ns} for rank {r} is not a whole number of ns")
        out.append((int(r), int(ns)))
    return out


def _thresholds(thresholds: Optional[Mapping[str, float]]) -> List[Tuple[str, float]]:
    """``{"exposed_comm_ratio": 0.15}`` (the CLI's ``--threshold``; names in
    docs/analysis-schema.md)."""
    if thresholds is None:
        return []
    return [(str(k), float(v)) for k, v in thresholds.items()]


def _rules_path(rules: Optional[PathLike]) -> Optional[str]:
    return None if rules is None else os.fsdecode(rules)


def _rules_text(rules: Optional[PathLike]) -> Optional[str]:
    if rules is None:
        return None
    with open(rules, encoding="utf-8") as f:
        return f.read()


def _check(out, strict: bool) -> None:
    """Raises for what makes ``rankscope analyze`` fail: nothing readable at all, or (strict)
    any input that is not a trace."""
    failed = out.failed
    if strict and failed:
        file, message = failed[0]
        more = f" (and {len(failed) - 1} more: {', '.join(f for f, _ in failed[1:4])})" if len(failed) > 1 else ""
        raise TraceError(message + more, file=file, offset=_offset_in(message))
    if not out.has_traces and not out.has_dumps:
        if failed:
            file, message = failed[0]
            raise TraceError(message, file=file, offset=_offset_in(message))
        raise RankscopeError("no file could be read as a trace")
    for file, message in failed:
        warnings.warn(f"rankscope: {message}", RuntimeWarning, stacklevel=3)


def _offset_in(message: str) -> Optional[int]:
    # The core's messages say "(at byte N)" (rankscope_core::parse::IngestError).
    import re

    m = re.search(r"\(at byte (\d+)\)", message)
    return int(m.group(1)) if m else None


def analyze(
    paths_or_dir: Paths,
    *,
    ranks: Union[None, Mapping[str, int], Iterable[str]] = None,
    offsets: Optional[Mapping[int, int]] = None,
    thresholds: Optional[Mapping[str, float]] = None,
    rules: Optional[PathLike] = None,
    progress=None,
    strict: bool = True,
    layout: Optional[str] = None,
    events: bool = False,
) -> Analysis:
    """Analyses one job: trace files (one per rank, ``.json`` / ``.json.gz``), folders of them
    (walked as the CLI walks them), NCCL logs, nccl-tests output and Flight Recorder dumps (each
    recognised by content). The same as ``rankscope analyze PATHS``.

    - ``ranks``: ``{file: rank}`` for files that do not say their rank (``--rank FILE=N``).
    - ``offsets``: ``{rank: ns}`` known clock offsets (``--offset``).
    - ``thresholds``: ``{name: value}`` finding thresholds (``--threshold``).
    - ``rules``: a JSON file of classification rules, tried before the defaults (``--rules``).
    - ``layout``: the parallel layout when the traces do not say it (``--layout``):
      ``"tp=2,pp=4,dp=8"`` in Megatron-LM's rank order, or a DeviceMesh ``"mesh:pp=2,dp=4,tp=2"``.
    - ``progress``: a callable ``(done_bytes, total_bytes)``; ``True`` draws a line on stderr;
      ``None`` (default) draws it only on a terminal for large inputs; ``False`` is quiet.
    - ``strict``: raise :class:`TraceError` when a named file is not a trace (default), else
      warn and analyse the rest (``Analysis.failed`` lists them).
    - ``events``: keep the job's events in memory for the ``events`` and ``collectives``
      columnar tables (``Analysis.arrow``, ``Analysis.export``; docs/columnar.md).
    """
    callback, line = _resolve_progress(progress)
    try:
        out = _native.analyze(
            _paths(paths_or_dir),
            _ranks(ranks),
            _offsets(offsets),
            _thresholds(thresholds),
            _rules_path(rules),
            callback,
            None,
            layout,
            events,
        )
    finally:
        if line is not None:
            line.close()
    _check(out, strict)
    return Analysis(out)


#: ``rankscope diff --floor``'s default: changes below this share of the base's median step are
#: within run-to-run noise.
DEFAULT_FLOOR: float = _native.DEFAULT_FLOOR

Run = Union[Analysis, Paths]


def _saved_analysis(run: Run) -> Optional[str]:
    """The text of a saved ``rankscope analyze --json`` when ``run`` is one file holding one
    (its head names the schema, as ``rankscope diff`` decides)."""
    if not isinstance(run, (str, os.PathLike)) or not os.path.isfile(run):
        return None
    with open(run, "rb") as f:
        head = f.read(256).decode("utf-8", "replace")
    if not head.lstrip().startswith("{") or '"rankscope.analysis"' not in head:
        return None
    with open(run, encoding="utf-8") as f:
        return f.read()


def diff(
    base: Run,
    new: Run,
    *,
    floor: float = DEFAULT_FLOOR,
    layout: Optional[str] = None,
    rules: Optional[PathLike] = None,
    progress=None,
    strict: bool = True,
) -> Diff:
    """Compares two jobs: what changed from ``base`` to ``new``, and why (``rankscope diff BASE
    NEW``; ``Diff.json()`` is its ``--json``, docs/diff-schema.md). Each run is what
    :func:`analyze` takes (a folder of rank traces, files, a job digest, a list of them), a
    saved ``rankscope analyze --json`` file (a baseline kept for CI), or an :class:`Analysis`
    already made (the comparison needs nothing beyond the analysis).

    - ``floor``: the smallest change that counts, as a share of the base's median step
      (``--floor``).
    - ``layout``, ``rules``, ``progress``, ``strict``: as for :func:`analyze`, for each run read
      from paths.

    Raises :class:`RankscopeError` when a run has no trace; a run with fewer than 3 timed
    steps gives the verdict ``cannot compare: …``."""

    def side(run: Run):
        if isinstance(run, Analysis):
            out = run._out
            return getattr(out, "_inner", out)  # combine's notes wrapper
        saved = _saved_analysis(run)
        if saved is not None:
            return saved
        return analyze(run, layout=layout, rules=rules, progress=progress, strict=strict)._out

    b, n = side(base), side(new)
    for which, s in (("base", b), ("new", n)):
        if not isinstance(s, str) and not s.has_traces:
            raise RankscopeError(f"{which}: no trace to compare (Flight Recorder dumps alone)")
    return Diff(_native.diff(b, n, float(floor)))


def part(path: PathLike, *, rules: Optional[PathLike] = None) -> bytes:
    """One file's part of a job, as bytes to send anywhere and give to :func:`combine`: for a
    trace, its rank claim and the per-rank half of the analysis (kB to a few MB, never the
    events); for an NCCL log, nccl-tests output or a Flight Recorder dump, the text itself. The
    file is read in chunks. Raises :class:`TraceError` (file, byte offset) for a file that is
    none of these, ``OSError`` when it cannot be read."""
    return _native.part(os.fsdecode(path), _rules_text(rules))


def part_info(data: bytes) -> Tuple[str, str]:
    """``(kind, name)`` of an encoded part: kind ``trace``, or the text's kinds (``nccl_log``,
    ``nccl_tests``, ``flight_recorder``, ``metrics``, ``nccl_ras``, ``nccl_inspector``,
    ``step_log``, joined by ``+``); name is the file it came from."""
    return _native.part_info(data)


class Parts(NamedTuple):
    """Parts of one job made elsewhere (:func:`rankscope.ray.parts`), in input order, for
    :func:`combine`: the parts' bytes, the files they came from, notes (a folder's files that
    are not traces, skipped) and ``(file, message)`` of the files that could not be read. A
    tuple: ``blobs, names, notes, failed = p`` works too."""

    parts: List[bytes]
    names: List[str]
    notes: List[str]
    failed: List[Tuple[str, str]]


def combine(
    parts: Union[Parts, Iterable[bytes]],
    *,
    names: Optional[Sequence[str]] = None,
    ranks: Union[None, Mapping[str, int], Iterable[str]] = None,
    offsets: Optional[Mapping[int, int]] = None,
    thresholds: Optional[Mapping[str, float]] = None,
    digest: Union[None, str, "os.PathLike[str]"] = None,
    layout: Optional[str] = None,
) -> Analysis:
    """The job from parts made by :func:`part` (anywhere, in any process): ranks decided across
    every part's claim, in the order given (as the CLI orders files: sorted paths), then the
    same analysis as :func:`analyze`. ``names`` name the parts in errors (default
    ``parts[i]``); ``layout`` as for :func:`analyze`. With ``digest``, the job digest is written to that path too (as
    ``rankscope combine --digest``: :func:`analyze` and the app open it like the traces).

    ``parts`` may be a :class:`Parts` (what :func:`rankscope.ray.parts` returns): its names are
    used, and its notes and failures are the analysis's (``Analysis.notes``, ``.failed``, each
    failure a warning, as :func:`analyze` with ``strict=False``)."""
    notes: List[str] = []
    failed: List[Tuple[str, str]] = []
    if isinstance(parts, Parts):
        if names is not None:
            raise ValueError("combine: a Parts names its parts; names= is for a list of bytes")
        parts, names, notes, failed = parts
        if not parts:
            if failed:
                file, message = failed[0]
                raise TraceError(message, file=file, offset=_offset_in(message))
            raise RankscopeError("no file could be read as a trace")
    blobs = [bytes(p) if not isinstance(p, bytes) else p for p in parts]
    names_l = [str(n) for n in names] if names is not None else [f"parts[{i}]" for i in range(len(blobs))]
    if len(names_l) != len(blobs):
        raise ValueError(f"combine: {len(names_l)} names for {len(blobs)} parts")
    out = _native.combine(
        blobs,
        names_l,
        _ranks(ranks),
        _offsets(offsets),
        _thresholds(thresholds),
        None if digest is None else str(digest),
        layout,
    )
    if notes or failed:
        out = _WithNotes(out, notes, failed)
    _check(out, strict=False)
    return Analysis(out)


class _WithNotes:
    """The combined output with the notes and failures of the parts' makers (which the native
    combine never saw)."""

    def __init__(self, out, notes: List[str], failed: List[Tuple[str, str]]):
        self._inner = out
        self.notes = list(notes) + list(out.notes)
        self.failed = list(failed) + list(out.failed)
        self.clean = bool(out.clean) and not failed

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _expand(paths: List[str]) -> Tuple[List[Tuple[str, bool]], List[str]]:
    """The input files under local paths, as :func:`analyze` finds them: ``[(path, walked)]``
    and notes."""
    return _native.expand(paths)


# Imported last: it uses the functions above.
from . import ray  # noqa: E402,F401  (rankscope.ray; Ray itself is imported only when used)

