"""Per-node simulated storage that honours the node's fsync policy.

The core hands its driver storage records to append durably (``Ready.persist``, docs/node-core.md). The
simulated disk keeps them in order and tracks how much of that order is *synced*:

* ``fsync == "always"``: every append is synced before the Ready's messages leave (the driver persists
  before it sends), so a crash never loses a record the core asked to persist;
* ``fsync == "never"`` (seed 000: BlazingMQ "avoid flushing (fsync) every message"): appends sit in the
  simulated page cache until the periodic write-back (:meth:`SimDisk.write_back`, scheduled by the world
  every ``writeback_interval`` seconds) makes them durable.

A crash in the simulator is a machine crash: everything not yet synced is lost (:meth:`crash`), and the
restarted node recovers from the synced prefix through ``cluster.core.storage.recover``. Records are
whole (the runtime's CRC framing and torn-tail truncation have no counterpart here: an append is atomic).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

_encode = msgspec.json.encode
_decode = msgspec.json.decode

FSYNC_POLICIES = ("always", "never")


class SimDisk:
    """One node's storage file: records in append order, of which the first ``synced`` are durable."""

    __slots__ = ("policy", "records", "synced", "lost")

    def __init__(self, policy: str = "always") -> None:
        if policy not in FSYNC_POLICIES:
            raise ValueError(f"unknown fsync policy {policy!r}; valid: {', '.join(FSYNC_POLICIES)}")
        self.policy = policy
        self.records: list[dict[str, Any]] = []
        self.synced = 0
        self.lost = 0
        """Records thrown away by crashes so far (for the run's stats)."""

    def append(self, records: list[dict[str, Any]]) -> None:
        """Append one Ready's records; with ``fsync == "always"`` they are durable on return."""
        self.records.extend(records)
        if self.policy == "always":
            self.synced = len(self.records)

    def write_back(self) -> None:
        """The OS flushes the page cache: everything appended so far becomes durable."""
        self.synced = len(self.records)

    def crash(self) -> int:
        """Lose every record that was not synced; returns how many were lost."""
        dropped = len(self.records) - self.synced
        if dropped:
            del self.records[self.synced:]
            self.lost += dropped
        return dropped

    def durable_records(self, copy: bool = True) -> list[dict[str, Any]]:
        """The records a restarted node recovers from. ``copy`` gives it fresh objects, as reading a file
        would, so nothing the previous incarnation still holds is shared with the next one."""
        durable = self.records[: self.synced]
        if not copy:
            return list(durable)
        # What a JSON round trip gives, made by msgspec (several times faster on a long log). The two agree
        # on JSON's own values; where they may not (a non-string key, a tuple, NaN or an infinity, an int
        # beyond 64 bits, a type msgspec encodes its own way), the copy is not equal to the records and
        # ``json`` makes it, as it always did.
        try:
            copied = _decode(_encode(durable))
        except (TypeError, ValueError, OverflowError, msgspec.MsgspecError):
            copied = None
        if copied != durable:
            copied = json.loads(json.dumps(durable))
        return copied
