"""The replicated state machines every node applies committed entries to, in log order.

Two kinds of object live under string keys:

* **registers** (read, write, compare-and-set): a read returns the value and the LSN of the entry that
  wrote it (null for a key never written);
* **FIFO queues** (seed 004 "Message Flow"): `put` carries a client-generated GUID and is de-duplicated
  within a window (seed 004 "Message Deduplication": a PUT whose GUID is already in the history is
  acknowledged with the original's LSN and not enqueued again); `consume` hands out the oldest message not
  yet delivered and moves it to the pending-confirm set; `confirm` removes a pending message.

De-duplication is decided when the entry is *applied*, from the entry alone (its GUID and its leader
`time`), so every node reaches the same decision. The window counts seconds of leader time or PUT entries
per queue (`NodeConfig.dedup_window_unit`).

`apply` returns the client outcome and the operation as the journal's `apply` event records it.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from cluster.core.log import Entry

#: operations that go through the log (client writes).
WRITE_OPS = ("write", "cas", "put", "consume", "confirm")


def valid_entry(entry: Entry) -> bool:
    """Whether a log entry received from a peer has the shape `apply` relies on."""
    f = entry.get("f")
    if f == "noop":
        return True
    if f not in WRITE_OPS or type(entry.get("key")) is not str:
        return False
    if f == "cas":
        value = entry.get("value")
        return type(value) is list and len(value) == 2
    if f in ("put", "confirm"):
        return type(entry.get("guid")) is str and (f == "confirm" or "value" in entry)
    return f == "consume" or "value" in entry


@dataclass
class Queue:
    """One FIFO queue: messages not yet delivered, delivered ones awaiting confirm, recent GUIDs."""

    ready: deque = field(default_factory=deque)  # (guid, value)
    pending: dict = field(default_factory=dict)  # guid -> value, in delivery order
    seen: OrderedDict = field(default_factory=OrderedDict)  # guid -> (time, lsn), in log order


@dataclass(frozen=True)
class Outcome:
    """What applying one entry means to the client that asked for it: ok with a value, or an error code."""

    ok: bool
    value: Any = None
    lsn: list[int] | None = None
    error: str | None = None
    duplicate: bool = False


class StateMachine:
    """Registers and queues; deterministic given the entries applied."""

    def __init__(self, dedup_window: float, dedup_unit: str, dedup: bool = True) -> None:
        self.registers: dict[str, tuple[Any, list[int]]] = {}
        self.queues: dict[str, Queue] = {}
        self.dedup_window = dedup_window
        self.dedup_by_entries = dedup_unit == "entries"
        self.dedup = dedup

    def read(self, key: str) -> tuple[Any, list[int] | None]:
        """The register's value and the LSN of the write that produced it."""
        found = self.registers.get(key)
        return (None, None) if found is None else found

    def apply(self, entry: Entry) -> tuple[Outcome, dict[str, Any]]:
        f = entry["f"]
        lsn = entry["lsn"]
        key = entry.get("key")
        if f == "write":
            self.registers[key] = (entry["value"], lsn)
            return Outcome(True, None, lsn), {"f": "write", "value": entry["value"]}
        if f == "cas":
            expected, new = entry["value"]
            current = self.registers.get(key)
            matched = (current[0] if current is not None else None) == expected
            if matched:
                self.registers[key] = (new, lsn)
                return Outcome(True, None, lsn), {"f": "cas", "value": [expected, new], "ok": True}
            return (Outcome(False, None, lsn, error="cas-mismatch"),
                    {"f": "cas", "value": [expected, new], "ok": False})
        if f == "put":
            return self._put(self._queue(key), entry)
        if f == "consume":
            queue = self._queue(key)
            if not queue.ready:
                return Outcome(True, None, lsn), {"f": "consume", "value": None}
            guid, value = queue.ready.popleft()
            queue.pending[guid] = value
            message = {"guid": guid, "value": value}
            return Outcome(True, message, lsn), {"f": "consume", "value": message}
        if f == "confirm":
            queue = self._queue(key)
            guid = entry["guid"]
            if guid in queue.pending:
                del queue.pending[guid]
                return Outcome(True, None, lsn), {"f": "confirm", "guid": guid, "ok": True}
            return Outcome(False, None, lsn, error="not-found"), {"f": "confirm", "guid": guid, "ok": False}
        # noop: the first entry of every leadership term; it changes nothing.
        return Outcome(True, None, lsn), {"f": f}

    def _queue(self, key: str) -> Queue:
        queue = self.queues.get(key)
        if queue is None:
            queue = self.queues[key] = Queue()
        return queue

    def _put(self, queue: Queue, entry: Entry) -> tuple[Outcome, dict[str, Any]]:
        guid, value, lsn = entry["guid"], entry["value"], entry["lsn"]
        if self.dedup:
            seen = queue.seen
            if not self.dedup_by_entries:
                horizon = entry.get("time", 0.0) - self.dedup_window
                while seen:
                    first = next(iter(seen.values()))
                    if first[0] >= horizon:
                        break
                    seen.popitem(last=False)
            original = seen.get(guid)
            if original is not None:
                return (Outcome(True, None, original[1], duplicate=True),
                        {"f": "put", "value": value, "guid": guid, "duplicate": True})
            seen[guid] = (entry.get("time", 0.0), lsn)
            if self.dedup_by_entries:
                while len(seen) > self.dedup_window:
                    seen.popitem(last=False)
        queue.ready.append((guid, value))
        return Outcome(True, None, lsn), {"f": "put", "value": value, "guid": guid, "duplicate": False}
