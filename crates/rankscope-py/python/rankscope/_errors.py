"""The exceptions rankscope raises. The native module raises these same classes."""

from __future__ import annotations

from typing import Optional

__all__ = ["RankscopeError", "TraceError", "PartError"]


class RankscopeError(Exception):
    """Something rankscope could not do: no input under the paths, a rank mapping naming no
    file, unreadable rules. ``file`` and ``offset`` say where, when a file is to blame."""

    def __init__(self, message: str, file: Optional[str] = None, offset: Optional[int] = None):
        super().__init__(message)
        self.file = file
        self.offset = offset


class TraceError(RankscopeError):
    """A file is not a trace: the message names the file and the byte offset where it stopped
    being one (``file``, ``offset``)."""


class PartError(RankscopeError):
    """Bytes are not a rankscope part this version reads (wrong header, another format
    version, damaged): ``offset`` is where the damage was found."""
