"""The ``log`` workload: appends to replicated logs and polls that read them back by offset.

A *log* (a topic, stream or partition) is named ``l0``, ``l1``, ... Each logical process draws, from its
own seeded stream, a log and either an ``append`` of a value unique to the run (``process * VALUE_STRIDE
+ n``, so a lost record names the process that appended it) or a ``poll``. An acknowledged append
completes with ``[offset, value]``, the offset the log assigned; an ok poll completes with the records
the server returned, ``[[offset, value], ...]`` in increasing offset order (at most a batch, possibly
none).

**Where a poll reads from.** A stream is a pure function of the seed and cannot see what its polls
returned, so it yields polls with ``value`` null, and the workload client fills in the offset before the
invoke is recorded (``prepare(op)``, called by the interpreter): one more than the highest offset this
process has read from that log, or the log's first offset before its first read. So every process is a
consumer that reads each log forward, as a Kafka consumer does, and the history's invoke says which
offset it asked for (``adapters.cluster.client``; the rule is fixed in the helpers' contract and in
docs/workloads.md). A process that ends ``info`` is replaced by a new one, which starts again from the
first offset.

**The final phase** polls, at each node and served by that node (``Op.local``), every log the run used
from offset 0 ("from the start": a system whose offsets start at 1 serves 0 from its first record) until
an ok poll returns nothing more; each next poll reads from one past the highest offset returned. A poll
that fails is tried again after :data:`~workloads.ops.FINAL_RETRY_THINK` seconds, at most
:data:`FINAL_RETRIES` times per node in all.

Checkers: ``single-leader-per-term``, ``lsn-monotonicity`` and ``log`` (``checkers.log``: lost,
duplicated and rewritten records, polls that go backwards or skip, records that vanished). There is no
linearizability model (``model`` is ``"log"``, which the linearizability checker does not know, and which
the workload does not ask for).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from typing import Any

from workloads.ops import (
    FINAL_RETRY_THINK,
    VALUE_STRIDE,
    FinalOps,
    Op,
    WorkloadOption,
    check_rate,
    completion_fields,
    process_rng,
    register_workload,
    think_time,
)

APPEND = "append"
POLL = "poll"
LOG_CHECKERS: tuple[str, ...] = ("single-leader-per-term", "lsn-monotonicity", "log")
"""What judges a log history: the log checker for the records, the journals' checkers for the cluster
(:attr:`LogWorkload.checkers`)."""
FINAL_RETRIES = 10
"""Failed final polls one node may try again, in all (:meth:`LogWorkload.final_ops`)."""
FINAL_POLL_LIMIT = 100_000
"""Polls of one log the final phase makes at most at one node: a log that never ends is itself a finding."""


@register_workload(order=3)
class LogWorkload:
    """Seeded append/poll operations over logs ``l0`` .. ``l<keys-1>``.

    ``rng`` is the run's generator (one 64-bit draw seeds every process's stream); ``append_fraction`` is
    the share of appends among the operations; ``rate`` is operations per second per process (think
    times uniform in [0, 2/rate)), ``None`` for no pause.
    """

    name = "log"
    operations = (APPEND, POLL)
    client_ops = {
        APPEND: "append ``value`` to the log; ``ok`` with ``[offset, value]``",
        POLL: "read records from offset ``value`` (``ok`` with ``[[offset, value], ...]``); ``prepare(op)`` "
              "fills in a null offset: one past the highest this process has read from the log",
    }
    checkers = LOG_CHECKERS
    model = "log"
    options = (
        WorkloadOption("keys", int, "logs l0 .. (default 3)"),
        WorkloadOption("append_fraction", float, "the share of appends among the operations, 0-1 (default 0.5)"),
    )

    def __init__(
        self,
        rng: random.Random,
        *,
        keys: int = 3,
        append_fraction: float = 0.5,
        rate: float | None = 10.0,
    ) -> None:
        if isinstance(keys, bool) or not isinstance(keys, int) or keys < 1:
            raise ValueError(f"log needs at least one log (keys), not {keys!r}")
        if not (isinstance(append_fraction, int | float) and math.isfinite(append_fraction)
                and 0 <= append_fraction <= 1):
            raise ValueError(f"append_fraction must be a probability in [0, 1], not {append_fraction!r}")
        self.seed: int = rng.getrandbits(64)
        self.keys = keys
        self.append_fraction = float(append_fraction)
        self.rate = check_rate(rate)

    def stream(self, process: int) -> Iterator[Op]:
        rng = process_rng(self.seed, process)
        n = 0
        while True:
            key = f"l{rng.randrange(self.keys)}"
            think = think_time(rng, self.rate)
            if rng.random() < self.append_fraction:
                n += 1
                if n >= VALUE_STRIDE:
                    raise OverflowError(f"process {process} appended {VALUE_STRIDE} records; values would repeat")
                yield Op(APPEND, key, process * VALUE_STRIDE + n, think=think)
            else:
                yield Op(POLL, key, None, think=think)  # the client fills in the offset (module docstring)

    def final_ops(self, node: str, keys: Sequence[str]) -> FinalOps:
        """Poll every log at ``node`` (served there) from offset 0 until an ok poll returns nothing more."""
        retries = FINAL_RETRIES
        for key in sorted(set(keys), key=_key_order):
            start = 0
            for _ in range(FINAL_POLL_LIMIT):
                think = 0.0
                while True:
                    kind, records = completion_fields(
                        (yield Op(POLL, key, start, node=node, local=True, think=think)))
                    if kind != "fail" or retries <= 0:
                        break
                    retries -= 1
                    think = FINAL_RETRY_THINK
                if kind != "ok":
                    break  # given up on this log here (info: the interpreter retires the process)
                following = next_offset(records, start)
                if following is None:
                    break  # nothing more: this node's log ends here
                start = following


def next_offset(records: Any, start: int) -> int | None:
    """One past the highest offset in a poll's ``records`` (``[[offset, value], ...]``) if that is past
    ``start``; ``None`` when the poll returned nothing usable to go on from (empty, malformed, or only
    offsets below ``start``)."""
    if not isinstance(records, list):
        return None
    offsets = [r[0] for r in records
               if isinstance(r, list | tuple) and len(r) == 2 and isinstance(r[0], int) and not isinstance(r[0], bool)]
    if not offsets or max(offsets) < start:
        return None
    return max(offsets) + 1


def _key_order(key: str) -> tuple[int, str]:
    """l2 before l10."""
    digits = key[1:]
    return (int(digits), key) if digits.isdigit() else (-1, key)
