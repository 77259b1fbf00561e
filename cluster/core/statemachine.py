"""The replicated state machines every node applies committed entries to, in log order.

Two kinds of object live under string keys:

* **registers** (read, write, compare-and-set): a read returns the value and the LSN of the entry that
  wrote it (null for a key never written);
* **FIFO queues** with at-least-once delivery (seed 004 "Message Flow"): `put` carries a client-generated
  GUID and is de-duplicated within a window (seed 004 "Message Deduplication": a PUT whose GUID is
  already in the history is acknowledged with the original's LSN and not enqueued again); `consume`
  delivers a message and keeps it *pending* until a `confirm` of its GUID removes it; a pending message
  not confirmed within `visibility_timeout` is delivered again (seed 004: "the PUSH will be retried to
  another consumer").

Every decision is taken when an entry is *applied*, from the entries alone, so every node, and every
later leader, reaches the same one. Each entry carries its leader's `time` (`Node.log_time`: elapsed
leader time, continued from the previous entry by each new leader, so it never decreases along the log):

* de-duplication compares a PUT's time with the times of the recent PUTs (or counts PUT entries,
  `NodeConfig.dedup_window_unit`);
* redelivery compares a consume's time with the time each pending message was last delivered. A pending
  message is delivered again by the first consume applied at least `visibility_timeout` after its last
  delivery, ahead of messages never delivered (oldest first), with `"redelivered": true` in the message.
  Nothing else triggers it: no timer, no message; a consumer that died, timed out, was cut off or whose
  confirm was lost all look the same, and a consume committed by another leader counts alike. Time
  without a leader is not counted, which only lengthens the wait.
* a consume that finds no message to deliver while some are pending (not yet visible again) has no
  effect and answers the definite error `in-flight` with `{"in_flight": n, "visible_in": seconds}`, so
  that a consumer draining the queue knows to wait; `null` means the queue holds nothing at all.

The known bug `no-redelivery` restores the old behaviour: a pending message is never delivered again and
`null` is answered as soon as nothing is ready.

* **logs** (issue 26, the `log` workload): `append` adds its value to the key's log at the next
  *offset*, which is the number of appends to that key committed before it, in log (LSN) order: 0, 1, 2,
  ... per key, decided at apply time, so every node assigns the same offsets; the ack carries
  `[offset, value]`. `poll` is a read (`READ_OPS`): `{"op": "poll", "key", "from", "limit"}` answers
  `[[offset, value], ...]`, the committed records from offset `from`, at most `limit`
  (`POLL_LIMIT` by default), without an LSN. A poll goes through the read path of every
  other read (the leader's read index; `local` at a follower), so it is served up to the commit point, which
  in fluvio mode is the high watermark: a consumer never sees a record that a leader change can take back.
  The known bug `read-beyond-hw` has every node answer polls at once from its whole log instead
  (`cluster.core.uncommitted.uncommitted_read`).

`apply` returns the client outcome and the operation as the journal's `apply` event records it.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from cluster.core.log import Entry

#: operations that go through the log (client writes).
WRITE_OPS = ("write", "cas", "put", "consume", "confirm", "append")
#: operations served from the state machine by the read path (a register's read, a log's poll).
READ_OPS = ("read", "poll")
POLL_LIMIT = 16
"""Records one poll returns at most, unless it asks for fewer (`limit`)."""


@dataclass(frozen=True)
class LogQuery:
    """A poll as the read path carries it in place of a register's key: the log, the first offset wanted
    and how many records at most."""

    key: str
    start: int
    limit: int = POLL_LIMIT


def read_query(request: dict[str, Any]) -> str | LogQuery:
    """What a validated read request asks for: a register's key, or a :class:`LogQuery` for a poll."""
    if request.get("op") == "poll":
        limit = request.get("limit")
        return LogQuery(request["key"], request["from"],
                        min(limit, POLL_LIMIT) if type(limit) is int and limit > 0 else POLL_LIMIT)
    return request["key"]


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
    # guid -> (value, time of its last delivery), in the order of those deliveries (oldest first)
    pending: dict = field(default_factory=dict)
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

    def __init__(self, dedup_window: float, dedup_unit: str, dedup: bool = True,
                 visibility_timeout: float = 5.0, redelivery: bool = True) -> None:
        self.registers: dict[str, tuple[Any, list[int]]] = {}
        self.queues: dict[str, Queue] = {}
        self.logs: dict[str, list[tuple[Any, list[int]]]] = {}  # key -> (value, lsn) by offset
        self.dedup_window = dedup_window
        self.dedup_by_entries = dedup_unit == "entries"
        self.dedup = dedup
        self.visibility_timeout = visibility_timeout
        self.redelivery = redelivery

    def read(self, key: str | LogQuery) -> tuple[Any, list[int] | None]:
        """The register's value and the LSN of the write that produced it; for a :class:`LogQuery`, the
        records ``[[offset, value], ...]`` it asks for and no LSN (a batch is no one entry: the LSN checker
        would take a poll's LSN for a write's or for the key's latest entry)."""
        if type(key) is LogQuery:
            records = self.logs.get(key.key, [])[key.start:key.start + key.limit] if key.start >= 0 else []
            return [[key.start + i, value] for i, (value, _) in enumerate(records)], None
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
        if f == "append":
            log = self.logs.get(key)
            if log is None:
                log = self.logs[key] = []
            offset = len(log)
            log.append((entry["value"], lsn))
            return (Outcome(True, [offset, entry["value"]], lsn),
                    {"f": "append", "value": entry["value"], "offset": offset})
        if f == "put":
            return self._put(self._queue(key), entry)
        if f == "consume":
            return self._consume(self._queue(key), entry)
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

    def _consume(self, queue: Queue, entry: Entry) -> tuple[Outcome, dict[str, Any]]:
        lsn, now = entry["lsn"], entry.get("time", 0.0)
        pending = queue.pending
        # Pending messages are in the order of their last delivery, and entry times never decrease
        # along the log: the first one is the next to become visible again.
        oldest = next(iter(pending), None) if self.redelivery else None
        if oldest is not None and pending[oldest][1] + self.visibility_timeout <= now:
            value = pending.pop(oldest)[0]
            pending[oldest] = (value, now)
            message = {"guid": oldest, "value": value, "redelivered": True}
            return Outcome(True, message, lsn), {"f": "consume", "value": message}
        if queue.ready:
            guid, value = queue.ready.popleft()
            pending.pop(guid, None)  # (a second copy, only without de-duplication) keep the order
            pending[guid] = (value, now)
            message = {"guid": guid, "value": value}
            return Outcome(True, message, lsn), {"f": "consume", "value": message}
        if oldest is not None:
            waiting = {"in_flight": len(pending),
                       "visible_in": round(pending[oldest][1] + self.visibility_timeout - now, 6)}
            return (Outcome(False, waiting, lsn, error="in-flight"),
                    {"f": "consume", "value": None, "in_flight": len(pending)})
        return Outcome(True, None, lsn), {"f": "consume", "value": None}

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
