"""A job analysed on a Ray cluster: one task per input file computes its part where the file can
be read and returns the part's bytes (kB to a few MB, never the events); the driver combines
them. ``pip install rankscope[ray]``.

    import ray, rankscope.ray
    ray.init()                                   # or ray.init(address="auto") on a cluster
    a = rankscope.ray.analyze("/shared/job/traces")   # or "s3://bucket/job/" with fsspec

Paths are local paths (a shared file system the workers see) or fsspec URLs (``s3://``,
``gs://``, ``file://``…; fsspec and its protocol's package on every worker). A folder is walked
as :func:`rankscope.analyze` walks it (a URL folder: every file fsspec finds below it with a
name the CLI reads). The answer equals :func:`rankscope.analyze` on the same files.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

if TYPE_CHECKING:
    from . import Parts

__all__ = ["analyze", "parts", "inputs"]

_CHUNK = 4 << 20


def _is_url(p: str) -> bool:
    return "://" in p


def _require_ray():
    try:
        import ray
    except ImportError as e:  # pragma: no cover - the message is the point
        raise ImportError("rankscope.ray needs Ray: pip install 'rankscope[ray]'") from e
    return ray


def _require_fsspec():
    try:
        import fsspec
    except ImportError as e:
        raise ImportError("fsspec URLs need fsspec (and its protocol's package): pip install fsspec") from e
    return fsspec


def _expand_url(url: str) -> List[Tuple[str, bool]]:
    from . import _native

    fsspec = _require_fsspec()
    fs, path = fsspec.core.url_to_fs(url)
    if not fs.isdir(path):
        return [(url, False)]
    protocol = url.split("://", 1)[0]
    found = sorted(p for p in fs.find(path) if _native.is_folder_candidate(p.rsplit("/", 1)[-1]))
    return [(f"{protocol}://{p.lstrip('/')}" if protocol != "file" else f"file://{p}", True) for p in found]


def inputs(paths: Union[str, "os.PathLike[str]", Iterable[Any]]) -> Tuple[List[Tuple[str, bool]], List[str]]:
    """The input files ``analyze`` sends to tasks: ``([(path or URL, walked)], notes)``, local
    paths expanded exactly as :func:`rankscope.analyze` expands them."""
    from . import _native, _paths

    out: List[Tuple[str, bool]] = []
    notes: List[str] = []
    local: List[str] = []

    def flush():
        if local:
            found, n = _native.expand(list(local))
            out.extend(found)
            notes.extend(n)
            local.clear()

    for p in _paths(paths):
        if _is_url(p):
            flush()
            out.extend(_expand_url(p))
        else:
            local.append(p)
    flush()
    return out, notes


def _part_of(path: str, walked: bool, rules: Optional[str]) -> Tuple[str, Any]:
    """The task body: ``("part", bytes)``, ``("skipped", note)`` for a folder's file that is not
    a trace, or ``("failed", message)``."""
    from . import _native
    from ._errors import TraceError

    try:
        if _is_url(path):
            fsspec = _require_fsspec()
            reader = _native.PartReader(path, rules)
            with fsspec.open(path, "rb") as f:
                while True:
                    chunk = f.read(_CHUNK)
                    if not chunk or not reader.feed(chunk):
                        break
            return "part", reader.finish()
        return "part", _native.part(path, rules)
    except TraceError as e:
        return ("skipped", f"skipped {e}") if walked else ("failed", str(e))
    except OSError as e:
        return "failed", f"{path}: {e}"


def _size_of(path: str) -> int:
    try:
        if _is_url(path):
            fs, p = _require_fsspec().core.url_to_fs(path)
            return int(fs.size(p) or 0)
        return os.path.getsize(path)
    except Exception:
        return 0


def parts(
    paths,
    *,
    rules=None,
    progress: Optional[Callable[[int, int], None]] = None,
    num_cpus: float = 1,
    max_in_flight: Optional[int] = None,
) -> "Parts":
    """Computes every input's part on the cluster: a :class:`rankscope.Parts` ``(parts, names,
    notes, failed)`` in input order, which :func:`rankscope.combine` takes as it is
    (``rankscope.combine(rankscope.ray.parts(paths))``). ``num_cpus`` per task (each task reads
    one file on one core); ``max_in_flight`` bounds the tasks submitted at once (default:
    all)."""
    ray = _require_ray()
    from . import Parts, _rules_text

    files, notes = inputs(paths)
    if not files:
        from ._errors import RankscopeError

        raise RankscopeError("no input files (.json, .json.gz, .log, .txt, .out or Flight Recorder dumps) under the given paths")
    rules_text = _rules_text(rules)
    task = ray.remote(num_cpus=num_cpus)(_part_of)
    sizes = [_size_of(p) for p, _ in files] if progress else [0] * len(files)
    total = sum(sizes)
    done_bytes = 0
    results: Dict[int, Tuple[str, Any]] = {}
    pending: Dict[Any, int] = {}
    limit = max_in_flight or len(files)
    nxt = 0
    while nxt < len(files) or pending:
        while nxt < len(files) and len(pending) < limit:
            path, walked = files[nxt]
            pending[task.remote(path, walked, rules_text)] = nxt
            nxt += 1
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            i = pending.pop(ref)
            results[i] = ray.get(ref)
            done_bytes += sizes[i]
            if progress:
                progress(done_bytes, total)
    out_parts: List[bytes] = []
    names: List[str] = []
    failed: List[Tuple[str, str]] = []
    for i, (path, _) in enumerate(files):
        kind, value = results[i]
        if kind == "part":
            out_parts.append(value)
            names.append(path)
        elif kind == "skipped":
            notes.append(value)
        else:
            failed.append((path, value))
    return Parts(out_parts, names, notes, failed)


def analyze(
    paths,
    *,
    ranks: Union[None, Mapping[str, int], Iterable[str]] = None,
    offsets: Optional[Mapping[int, int]] = None,
    thresholds: Optional[Mapping[str, float]] = None,
    rules=None,
    progress=None,
    strict: bool = True,
    num_cpus: float = 1,
    max_in_flight: Optional[int] = None,
):
    """:func:`rankscope.analyze` with one Ray task per file (Ray must be initialised, or it
    starts a local cluster as ``ray.get`` does). Progress counts the bytes of finished files."""
    from . import combine
    from ._errors import TraceError
    from ._progress import resolve

    callback, line = resolve(progress)
    try:
        made = parts(paths, rules=rules, progress=callback, num_cpus=num_cpus, max_in_flight=max_in_flight)
    finally:
        if line is not None:
            line.close()
    if made.failed and strict:
        from . import _offset_in

        file, message = made.failed[0]
        raise TraceError(message, file=file, offset=_offset_in(message))
    return combine(made, ranks=ranks, offsets=offsets, thresholds=thresholds)
