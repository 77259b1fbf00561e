"""The ``counter`` workload, an example kept in the tests: what a contributor's ``workloads/counter.py``
holds. ``tests/harness/test_adding_a_workload.py`` puts this directory on the ``workloads`` package's path;
the registry discovers the module and the class registers itself. Nothing in the project names it."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from workloads.ops import (
    VALUE_STRIDE,
    FinalOps,
    Op,
    WorkloadOption,
    process_rng,
    register_workload,
    think_time,
)


@register_workload()
class CounterWorkload:
    """Adds of small positive amounts to counters ``c0``, ``c1`` and reads of them; the final phase reads
    every counter at each node."""

    name = "counter"
    operations = ("add", "read")
    client_ops = {"add": "add ``value`` to the counter", "read": "the counter's value (null: never added to)"}
    checkers = ("counter",)
    model = "counter"
    options = (WorkloadOption("keys", int, "counters c0 .. (default 2)"),)

    def __init__(self, rng: random.Random, *, keys: int = 2, rate: float | None = 10.0) -> None:
        if isinstance(keys, bool) or not isinstance(keys, int) or keys < 1:
            raise ValueError(f"keys must be a positive whole number, not {keys!r}")
        self.seed = rng.getrandbits(64)
        self.keys = keys
        self.rate = rate

    def stream(self, process: int) -> Iterator[Op]:
        rng = process_rng(self.seed, process)
        while True:
            key, think = f"c{rng.randrange(self.keys)}", think_time(rng, self.rate)
            if rng.random() < 0.5:
                yield Op("add", key, rng.randrange(1, VALUE_STRIDE), think=think)
            else:
                yield Op("read", key, None, think=think)

    def final_ops(self, node: str, keys: Sequence[str]) -> FinalOps:
        for key in sorted(set(keys)):
            yield Op("read", key, None, node=node, local=True)
