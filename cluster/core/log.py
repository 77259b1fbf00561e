"""The replicated log: entries in position order, each labelled with its Leader Sequence Number.

Positions (`index`, 1-based) drive replication, as Raft's indexes do; the LSN `[term, seq]` is an entry's
identity for clients, journals and checkers (seed 000 "Leader Sequence Numbers": seq restarts in each new
term, so "(5, 2) is newer than (4, 1000)"). Without bugs, LSNs strictly increase along the log and two
logs that hold the same LSN at the same index agree on every entry up to it (log matching). The log does
not *rely* on that: under the `lsn-reuse` bug one LSN labels two entries, and replication still works by
index, which is exactly what lets the LSN checker see the duplicates.

An entry is a JSON-able dict, the same object in memory, on the wire and on disk:

    {"lsn": [term, seq], "f": "write", "key": "x", "value": 3, "time": 12.5}

`f` is the operation (`noop`, `write`, `cas`, `put`, `consume`, `confirm`); `time` is leader time
(`Node.log_time`), which only the queue de-duplication window reads; `put` entries add `guid`.
"""

from __future__ import annotations

from typing import Any

Entry = dict[str, Any]
NO_LSN: list[int] = [0, 0]


class Log:
    """An in-memory list of entries; persistence is the node's job (storage records)."""

    __slots__ = ("entries",)

    def __init__(self, entries: list[Entry] | None = None) -> None:
        self.entries: list[Entry] = list(entries) if entries else []

    @property
    def last_index(self) -> int:
        return len(self.entries)

    @property
    def last_lsn(self) -> list[int]:
        return self.entries[-1]["lsn"] if self.entries else NO_LSN

    @property
    def last_term(self) -> int:
        return self.entries[-1]["lsn"][0] if self.entries else 0

    def entry(self, index: int) -> Entry:
        return self.entries[index - 1]

    def lsn_at(self, index: int) -> list[int]:
        """The LSN at `index`; [0, 0] for index 0 (the empty prefix)."""
        return self.entries[index - 1]["lsn"] if index > 0 else NO_LSN

    def matches(self, index: int, lsn: list[int]) -> bool:
        """Whether this log holds an entry labelled `lsn` at `index` (index 0 always matches)."""
        if index == 0:
            return True
        return index <= len(self.entries) and self.entries[index - 1]["lsn"] == lsn

    def slice(self, first: int, count: int) -> list[Entry]:
        """Up to `count` entries starting at index `first`."""
        return self.entries[first - 1:first - 1 + count]

    def append(self, entry: Entry) -> int:
        self.entries.append(entry)
        return len(self.entries)

    def replace_from(self, index: int, entries: list[Entry]) -> None:
        """Drop everything at `index` and after, then append `entries` (a divergent suffix replaced)."""
        del self.entries[index - 1:]
        self.entries.extend(entries)

    def up_to_date_key(self) -> tuple[int, int]:
        """(last entry's term, last index): the order of 'at least as up to date' (seed 003 isUptoDate)."""
        return (self.last_term, len(self.entries))
