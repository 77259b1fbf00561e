"""What every reader of a history shares, below the formats: opening a history file, the errors that name
the file (and line) being read, and the nemesis's process name.

:mod:`checkers.history` (our JSONL, and the dispatch by format) and :mod:`checkers.jepsen` /
:mod:`checkers.edn` (Jepsen's EDN and JSON) all raise these, so they live under both; ``checkers.history``
re-exports them, where callers import them from.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

NEMESIS = "nemesis"
"""The ``process`` of the nemesis's events (FORMATS.md)."""
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

