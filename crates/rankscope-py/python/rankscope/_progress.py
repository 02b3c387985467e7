"""Progress while files are read: a callback ``(done_bytes, total_bytes)``, or a tqdm-style
line on stderr, drawn on a terminal and never in a notebook unless asked for."""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, Optional, Union

Callback = Callable[[int, int], None]
Progress = Union[None, bool, Callback]

# Below this, reading takes well under a second: no line (as the CLI).
_QUIET_BELOW = 64 << 20


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()  # type: ignore[attr-defined]
    except Exception:
        return False
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


class ProgressLine:
    """``reading  42% |████▎     | 120/300 MB  95.1 MB/s`` on a stream, redrawn at most ten
    times a second; ``close()`` clears it."""

    def __init__(self, stream=None, min_total: int = 0):
        self.stream = stream if stream is not None else sys.stderr
        self.min_total = min_total
        self.start = time.monotonic()
        self.last = 0.0
        self.drawn = False
        self.lock = threading.Lock()

    def __call__(self, done: int, total: int) -> None:
        if total < self.min_total:
            return
        now = time.monotonic()
        with self.lock:
            if done < total and now - self.last < 0.1:
                return
            self.last = now
            frac = done / total if total else 1.0
            width = 20
            full = int(frac * width)
            bar = "█" * full + " " * (width - full)
            rate = done / max(now - self.start, 1e-9) / 1e6
            self.stream.write(
                f"\rreading {frac * 100:3.0f}% |{bar}| {done / 1e6:.0f}/{total / 1e6:.0f} MB  {rate:.1f} MB/s"
            )
            self.stream.flush()
            self.drawn = True

    def close(self) -> None:
        with self.lock:
            if self.drawn:
                self.stream.write("\r" + " " * 72 + "\r")
                self.stream.flush()
                self.drawn = False


def resolve(progress: Progress):
    """``(callback or None, line or None)``: a callable is used as is; ``True`` draws the line on
    stderr; ``None`` draws it only when stderr is a terminal (never in a notebook) and the input
    is large; ``False`` is quiet."""
    if callable(progress):
        return progress, None
    if progress is True:
        line = ProgressLine()
        return line, line
    if progress is None:
        stream = sys.stderr
        try:
            tty = stream is not None and stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        if tty and not _in_notebook():
            line = ProgressLine(stream, min_total=_QUIET_BELOW)
            return line, line
        return None, None
    if progress is False:
        return None, None
    raise TypeError(f"progress must be None, a bool or a callable (done_bytes, total_bytes), not {progress!r}")
