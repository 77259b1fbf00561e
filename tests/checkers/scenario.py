"""Building histories and node journals for checker tests, line by line, in FORMATS.md's format.

A :class:`HistoryBuilder` hands out ``index`` and ``time`` (a fake clock: +1 ns per event unless told)
and returns parsed :class:`~checkers.history.History` objects through the real loader, so every test
history is also a valid one. :class:`JournalBuilder` does the same for one node's ``journal.jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from checkers.history import History, JournalEvent, parse_history, parse_journal


class HistoryBuilder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.time = 0

    def event(
        self,
        process: int | str,
        type: str,
        f: str,
        key: Any = None,
        value: Any = None,
        *,
        at: int | None = None,
        **extra: Any,
    ) -> int:
        """Append one event; returns its 1-based line."""
        if at is not None:
            self.time = at
        event = {
            "index": len(self.events),
            "time": self.time,
            "process": process,
            "type": type,
            "f": f,
            "key": key,
            "value": value,
        }
        event.update({k: (list(v) if isinstance(v, tuple) else v) for k, v in extra.items() if v is not None})
        self.events.append(event)
        self.time += 1
        return len(self.events)

    def invoke(self, process: int | str, f: str, key: Any = None, value: Any = None, **extra: Any) -> int:
        return self.event(process, "invoke", f, key, value, **extra)

    def complete(
        self, process: int | str, type: str, f: str, key: Any = None, value: Any = None, **extra: Any
    ) -> int:
        return self.event(process, type, f, key, value, **extra)

    def op(
        self,
        process: int | str,
        f: str,
        key: Any = None,
        value: Any = None,
        *,
        type: str = "ok",
        output: Any = None,
        node: str | None = None,
        lsn: tuple[int, int] | None = None,
        error: str | None = None,
        final: bool | None = None,
    ) -> int:
        """An operation invoked and completed at once; returns the completion's line."""
        self.invoke(process, f, key, value, node=node, final=final)
        result = output if f in ("read", "get", "consume", "status", "drain") else value
        return self.complete(process, type, f, key, result, node=node, lsn=lsn, error=error)

    def lines(self) -> list[str]:
        return [json.dumps(event) for event in self.events]

    def history(self, source: str = "history.jsonl") -> History:
        return parse_history(self.lines(), source)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in self.lines()), encoding="utf-8")
        return path


class JournalBuilder:
    def __init__(self, node: str, wall: float = 1000.0) -> None:
        self.node = node
        self.events: list[dict[str, Any]] = []
        self.wall = wall

    def add(self, event: str, **fields: Any) -> int:
        """Append one journal event; returns its 1-based line."""
        record = {"node": self.node, "seq": len(self.events), "wall": self.wall, "event": event}
        record.update({k: (list(v) if isinstance(v, tuple) else v) for k, v in fields.items()})
        self.events.append(record)
        self.wall += 0.001
        return len(self.events)

    def start(self) -> int:
        return self.add("start")

    def role(self, role: str, term: int, leader: str | None = None) -> int:
        return self.add("role", role=role, term=term, leader=leader)

    def apply(self, lsn: tuple[int, int], key: Any, op: Any) -> int:
        return self.add("apply", lsn=lsn, key=key, op=op)

    def lines(self) -> list[str]:
        return [json.dumps(event) for event in self.events]

    def journal(self) -> list[JournalEvent]:
        return parse_journal(self.lines(), f"nodes/{self.node}/journal.jsonl")

    def write(self, directory: Path) -> Path:
        path = directory / self.node / "journal.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in self.lines()), encoding="utf-8")
        return path


def journals(*builders: JournalBuilder) -> dict[str, list[JournalEvent]]:
    return {b.node: b.journal() for b in builders}
