"""The ``register`` workload: reads, writes and compare-and-sets over several keys.

Each logical process draws, from its own seeded stream, a key and one of ``read`` / ``write`` / ``cas``
(weights ``mix``). Every value written (by ``write`` or as the new value of ``cas``) is unique per key,
``process * VALUE_STRIDE + n``, so a lost write is attributable to the operation that wrote it. A
``cas`` expects the last value this process proposed for that key (``null`` before its first), so it
succeeds when no other process wrote in between, and fails with ``cas-mismatch`` otherwise.

Keys rotate (Jepsen's independent keys): a process's ``n``-th operation uses the window of ``keys``
keys numbered from ``(n // rotate_after) * keys``, so no key collects more than about
``rotate_after * processes`` operations and linearizability stays cheap to check per key.

The final phase reads every key the run used at each node with local reads (``Op.local``): each node
answers from its own state (linearizably, by the leader's read index) instead of redirecting to the
leader, so the durability checker judges every node; a final read that fails is tried again a few
times (:meth:`RegisterWorkload.final_ops`). Checkers: all four; model ``cas-register``.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

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

DEFAULT_MIX: Mapping[str, float] = {"read": 2.0, "write": 2.0, "cas": 1.0}
FINAL_RETRIES = 10
"""Failed final reads one node may try again, in all (:meth:`RegisterWorkload.final_ops`)."""


@register_workload(order=1)
class RegisterWorkload:
    """Seeded read/write/cas operations over rotating windows of keys ``k0``, ``k1``, ...

    ``rng`` is the run's generator (one 64-bit draw seeds every process's stream); ``rate`` is operations
    per second per process (think times uniform in [0, 2/rate)), ``None`` for no pause.
    """

    name = "register"
    operations = ("read", "write", "cas")
    client_ops = {
        "read": "read the key's value; a local read (``Op.local``) is served by ``node`` itself",
        "write": "write ``value`` to the key",
        "cas": "set the key to ``value[1]`` if it holds ``value[0]``; ``fail`` with ``cas-mismatch`` if not",
    }
    checkers = ("single-leader-per-term", "lsn-monotonicity", "durability", "linearizable")
    model = "cas-register"
    options = (
        WorkloadOption("keys", int, "keys in use at once, k0 .. (default 5)"),
        WorkloadOption("rotate_after", int, "a process's operations before it moves to the next window of keys "
                       "(default 100)"),
    )

    def __init__(
        self,
        rng: random.Random,
        *,
        keys: int = 5,
        mix: Mapping[str, float] | None = None,
        rate: float | None = 10.0,
        rotate_after: int | None = 100,
    ) -> None:
        if isinstance(keys, bool) or not isinstance(keys, int) or keys < 1:
            raise ValueError(f"register needs at least one key, not {keys!r}")
        weights = dict(DEFAULT_MIX if mix is None else mix)
        unknown = sorted(set(weights) - set(DEFAULT_MIX))
        if unknown:
            raise ValueError(
                f"register mix names unknown operation(s) {', '.join(unknown)}; use read, write, cas"
            )
        if any(not (isinstance(w, int | float) and math.isfinite(w) and w >= 0) for w in weights.values()):
            raise ValueError(f"register mix weights must be non-negative numbers, not {weights}")
        if sum(weights.values()) <= 0:
            raise ValueError("register mix needs a positive weight for at least one operation")
        if rotate_after is not None and (isinstance(rotate_after, bool) or rotate_after < 1):
            raise ValueError(
                f"rotate_after must be a positive number of operations or None, not {rotate_after!r}"
            )
        self.seed: int = rng.getrandbits(64)
        self.keys = keys
        self.functions = tuple(f for f in ("read", "write", "cas") if weights.get(f, 0) > 0)
        self.weights = tuple(weights[f] for f in self.functions)
        self._cumulative = tuple(itertools.accumulate(self.weights))
        self.rate = check_rate(rate)
        self.rotate_after = rotate_after

    def stream(self, process: int) -> Iterator[Op]:
        rng = process_rng(self.seed, process)
        written: Counter[str] = Counter()
        proposed: dict[str, int] = {}
        n = 0
        while True:
            window = n // self.rotate_after if self.rotate_after else 0
            key = f"k{window * self.keys + rng.randrange(self.keys)}"
            f = rng.choices(self.functions, cum_weights=self._cumulative)[0]
            think = think_time(rng, self.rate)
            n += 1
            if f == "read":
                yield Op("read", key, None, think=think)
                continue
            written[key] += 1
            if written[key] >= VALUE_STRIDE:
                raise OverflowError(
                    f"process {process} wrote key {key} {VALUE_STRIDE} times; values would repeat"
                )
            new = process * VALUE_STRIDE + written[key]
            if f == "write":
                yield Op("write", key, new, think=think)
            else:
                yield Op("cas", key, [proposed.get(key), new], think=think)
            proposed[key] = new

    def final_ops(self, node: str, keys: Sequence[str]) -> FinalOps:
        """A local read of every key at ``node``. A read that fails (``not-leader`` when the leader the
        final phase waited for has stepped down since, ``no-read-index`` during an election) is tried
        again after :data:`FINAL_RETRY_THINK` seconds, up to :data:`FINAL_RETRIES` times per node in all,
        so a cluster still settling after the heal is read rather than judged "unknown", and a cluster
        that has no leader does not hold the final phase for long."""
        retries = FINAL_RETRIES
        for key in sorted(set(keys), key=_key_order):
            kind, _ = completion_fields((yield Op("read", key, None, node=node, local=True)))
            while kind == "fail" and retries > 0:
                retries -= 1
                retry = Op("read", key, None, node=node, local=True, think=FINAL_RETRY_THINK)
                kind, _ = completion_fields((yield retry))


def _key_order(key: str) -> tuple[int, str]:
    """k2 before k10."""
    digits = key[1:]
    return (int(digits), key) if digits.isdigit() else (-1, key)
