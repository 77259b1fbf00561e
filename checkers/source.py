"""What every reader of a history shares, below the formats: opening a history file, the errors that name
the file (and line) being read, and the nemesis's process name.

:mod:`checkers.history` (our JSONL, and the dispatch by format) and :mod:`checkers.jepsen` /
:mod:`checkers.edn` (Jepsen's EDN and JSON) all raise these, so they live under both; ``checkers.history``
re-exports them, where callers import them from.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

NEMESIS = "nemesis"
"""The ``process`` of the nemesis's events (FORMATS.md)."""
MAX_LINE_BYTES = 64 << 20
"""The longest line a JSON history or journal may have (its newline aside). No operation needs more (a
whole drain of a queue is a few megabytes); a longer line is refused before it is read whole, so a
file with one endless line costs this much memory, not the file's size."""


class HistoryError(ValueError):
    """Malformed history or journal input: names the file, the line (1-based) and the reason."""

    def __init__(self, source: str, line: int | None, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {reason}")


class LoadTimeout(Exception):
    """The time budget ran out while reading input: names the file and how far it got."""

    def __init__(self, source: str, line: int, budget_s: float | None = None) -> None:
        self.source = source
        self.line = line
        self.budget_s = budget_s
        budget = f" of {budget_s:g} s" if budget_s is not None else ""
        super().__init__(f"the time budget{budget} ran out while reading {source} (at line {line:,})")


def open_history(path: Path) -> Any:
    """``path`` opened for reading bytes (its lines end in ``\n``, which the JSON decoder skips). A device
    (``/dev/zero``: one endless line that no deadline could interrupt) is refused; a pipe is read."""
    try:
        handle = path.open("rb", buffering=1 << 20)
    except FileNotFoundError:
        raise HistoryError(str(path), None, "no such file") from None
    except IsADirectoryError:
        raise HistoryError(str(path), None, "is a directory, not a history file") from None
    mode = os.fstat(handle.fileno()).st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        handle.close()
        raise HistoryError(str(path), None, "is a device, not a history file")
    return handle


LINE_PIECE = 1 << 20
"""Bytes :func:`bounded_lines` reads at a time."""


def bounded_lines(handle: BinaryIO, source: str, limit: int | None = None) -> Iterator[bytes]:
    """The lines of ``handle`` (without their newlines), read a piece at a time: a line longer than
    ``limit`` bytes (default :data:`MAX_LINE_BYTES`) is a :class:`HistoryError` naming its number, raised
    once that much of it was read, so no more than about ``limit`` bytes of one line are ever held."""
    limit = MAX_LINE_BYTES if limit is None else limit
    number = 0
    parts: list[bytes] = []  # the pieces of a line that goes on past the pieces read so far
    held = 0
    size = min(LINE_PIECE, limit + 1)  # a line whole within one piece is then never too long
    while piece := handle.read(size):
        lines = piece.split(b"\n")
        last = lines.pop()
        if len(lines):
            if parts:
                parts.append(lines[0])
                lines[0] = b"".join(parts)
                parts, held = [], 0
                if len(lines[0]) > limit:
                    raise _too_long(source, number + 1, limit)
            number += len(lines)
            yield from lines
        if last:
            parts.append(last)
            held += len(last)
            if held > limit:
                raise _too_long(source, number + 1, limit)
    if parts:
        yield b"".join(parts)


def _too_long(source: str, number: int, limit: int) -> HistoryError:
    return HistoryError(source, number, f"a line of more than {limit:,} bytes (no history needs one; is this a "
                        "history file?)")
