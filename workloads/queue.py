"""The ``queue`` workload: PUT messages with GUIDs, consume them, CONFIRM them, and drain at the end.

BlazingMQ's message flow (seed 004): a producer PUTs a message carrying a GUID it generated (the broker
de-duplicates re-sent PUTs by GUID); a consumer receives it and CONFIRMs it, after which it is gone.

Each logical process draws, from its own seeded stream, a queue ``q0``.. and either a ``put`` of
``{"guid", "value"}`` (the GUID a UUID drawn from the stream, the value ``process * VALUE_STRIDE + n``,
unique) or a ``consume``, followed with probability ``confirm_probability`` by a ``confirm`` of whatever
that consume returned. The stream cannot know what a consume will return, so a ``confirm`` op carries no
GUID (``value`` null): the client fills in the message its process consumed last from that queue
(``adapters.cluster.client``). Unconfirmed messages are what a broker redelivers: the node delivers a message
again once its visibility timeout has passed without a confirm (``cluster.core.statemachine``).

The final phase drains every queue the run used at each node: ``consume`` until the queue reports
empty (an ``ok`` consume of null), confirming each message. A consume that finds nothing to deliver
while messages are still pending ends ``fail`` with ``in-flight`` and says when the next one becomes
visible again: the drain waits for it (at most ``DRAIN_POLL`` seconds at a time, ``DRAIN_PATIENCE`` in
all per queue), so that every message a consumer of the run took and never confirmed is delivered again
before the drain ends. After any other failure it waits ``FINAL_RETRY_THINK`` seconds and consumes again,
and gives up after ``DRAIN_GIVE_UP`` such failures in a row. Checkers: all four; model ``queue``.

**The queue contract** (:class:`Delivery`). What is said above is the bundled cluster's behaviour; a real
broker promises less, and its adapter declares what it promises as the class attribute ``delivery`` of
its DB (read by the harness when it composes a test, kept in ``test.json`` and given to the durability
checker by both judges):

* ``dedup``: a put re-sent with its GUID is enqueued once (BlazingMQ). Without it (RabbitMQ, AMQP in
  general) a client that re-sends a put whose confirm it never got may enqueue the message twice: a second
  delivery after an ``ok`` confirm is then reported as *enqueued twice* and counted, not called a
  duplicate.
* ``redelivery``: how a message a consumer took and never confirmed comes back: ``timeout`` (a visibility
  timeout, the bundled cluster), ``close`` (when the consumer's channel or connection closes, AMQP),
  ``none`` (it does not: the durability checker then does not call unconfirmed messages dropped).
* ``in_flight``: an empty consume can say that messages are still in flight (the ``in-flight`` error
  above). Without it an empty answer means only "nothing ready now", so the drain does not stop at the first
  one: it consumes on, every ``DRAIN_POLL`` seconds, until the queue has answered empty for
  ``DRAIN_QUIET`` seconds in a row.

A confirm that gets no reply from the broker (AMQP's ``basic.ack``) is recorded by the client as ``info``,
never ``ok``: the checker takes an ``info`` confirm as one that may have removed its message.
"""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
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

DRAIN_GIVE_UP = 5
"""Consecutive ``fail`` completions after which a drain stops (the interpreter handles ``info``)."""
DRAIN_LIMIT = 1_000_000
"""Consumes one drain makes at most; a queue that never empties is itself a finding."""
DRAIN_POLL = 1.0
"""Seconds a drain waits at most before asking again a queue whose messages are in flight."""
DRAIN_MARGIN = 0.05
"""Seconds a drain waits beyond the ``visible_in`` the node gave (leader time is not the client's)."""
DRAIN_PATIENCE = 120.0
"""Seconds a drain waits in all per queue for in-flight messages; then it stops (the verdict: unknown)."""
DRAIN_QUIET = 10.0
"""Seconds a queue must answer empty in a row before a drain that cannot ask "in flight?" stops."""
REDELIVERY = ("timeout", "close", "none")
"""How a message taken and never confirmed comes back (:class:`Delivery`)."""


@dataclass(frozen=True)
class Delivery:
    """What a queue adapter promises about delivery: the queue contract (module docstring). The default is
    the bundled cluster's: de-duplication by GUID, redelivery after a visibility timeout, an empty consume
    that can say messages are in flight."""

    attribute = "delivery"
    """The name of the DB adapter's class attribute that declares it."""

    dedup: bool = True
    redelivery: str = "timeout"
    in_flight: bool = True

    def __post_init__(self) -> None:
        for name in ("dedup", "in_flight"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"Delivery.{name} is true or false, not {getattr(self, name)!r}")
        if self.redelivery not in REDELIVERY:
            raise ValueError(f"Delivery.redelivery is one of {', '.join(REDELIVERY)}, not {self.redelivery!r}")

    def to_json(self) -> dict[str, Any]:
        """``test.json``'s ``delivery``: the three fields."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Delivery:
        """The contract ``test.json`` recorded; the default where it recorded none (runs from before it)."""
        if not isinstance(data, Mapping):
            return cls()
        return cls(**{name: data[name] for name in ("dedup", "redelivery", "in_flight") if name in data})


def draw_guid(rng: random.Random) -> str:
    """A version-4 UUID drawn from ``rng`` (so the same seed gives the same GUIDs)."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


@register_workload(order=2)
class QueueWorkload:
    """Seeded put/consume/confirm operations over queues ``q0``.. ``q<queues-1>``."""

    name = "queue"
    operations = ("put", "consume", "confirm")
    client_ops = {
        "put": "enqueue ``value`` (``{guid, value}``), re-sending it with its GUID while an attempt may have "
               "taken effect",
        "consume": "take one message, ``ok`` null when the queue is empty; remember it to confirm",
        "confirm": "confirm the message with GUID ``value``, or (``value`` null) the one this process "
                   "consumed last from the queue and has not confirmed",
    }
    checkers = ("single-leader-per-term", "lsn-monotonicity", "durability", "linearizable")
    model = "queue"
    contract = Delivery
    options = (
        WorkloadOption("queues", int, "queues q0 .. (default 1)"),
        WorkloadOption("put_fraction", float, "the share of puts among the operations, 0-1 (default 0.5)"),
        WorkloadOption("confirm_probability", float, "how often a consumer confirms what it received, 0-1 "
                       "(default 0.9)"),
    )

    def __init__(
        self,
        rng: random.Random,
        *,
        queues: int = 1,
        put_fraction: float = 0.5,
        confirm_probability: float = 0.9,
        rate: float | None = 10.0,
        contract: Delivery | None = None,
    ) -> None:
        if isinstance(queues, bool) or not isinstance(queues, int) or queues < 1:
            raise ValueError(f"queue needs at least one queue, not {queues!r}")
        for name, p in (("put_fraction", put_fraction), ("confirm_probability", confirm_probability)):
            if not (isinstance(p, int | float) and math.isfinite(p) and 0 <= p <= 1):
                raise ValueError(f"{name} must be a probability in [0, 1], not {p!r}")
        self.seed: int = rng.getrandbits(64)
        self.queues = queues
        self.put_fraction = float(put_fraction)
        self.confirm_probability = float(confirm_probability)
        self.rate = check_rate(rate)
        self.delivery = contract if contract is not None else Delivery()

    def stream(self, process: int) -> Iterator[Op]:
        rng = process_rng(self.seed, process)
        n = 0
        while True:
            key = f"q{rng.randrange(self.queues)}"
            think = think_time(rng, self.rate)
            if rng.random() < self.put_fraction:
                n += 1
                if n >= VALUE_STRIDE:
                    raise OverflowError(f"process {process} put {VALUE_STRIDE} messages; values would repeat")
                message = {"guid": draw_guid(rng), "value": process * VALUE_STRIDE + n}
                yield Op("put", key, message, think=think)
                continue
            yield Op("consume", key, None, think=think)
            if rng.random() < self.confirm_probability:
                yield Op("confirm", key, None)

    def final_ops(self, node: str, keys: Sequence[str]) -> FinalOps:
        for key in sorted(set(keys)):
            failures = 0
            waited = 0.0
            wait = 0.0
            quiet = 0.0  # seconds the queue has answered empty in a row (a drain that cannot ask in-flight)
            for _ in range(DRAIN_LIMIT):
                kind, message = completion_fields((yield Op("consume", key, None, node=node, think=wait)))
                wait = 0.0
                if kind == "ok" and message is None:
                    if self.delivery.in_flight or quiet >= DRAIN_QUIET:
                        break  # the queue is empty
                    wait = min(DRAIN_POLL, DRAIN_QUIET - quiet)
                    quiet += wait
                    continue
                quiet = 0.0
                if kind == "ok":
                    failures = 0
                    guid = message.get("guid") if isinstance(message, dict) else None
                    if guid is not None:
                        yield Op("confirm", key, guid, node=node)
                    continue
                in_flight = in_flight_wait(kind, message)
                if in_flight is not None:
                    if waited >= DRAIN_PATIENCE:
                        break
                    wait = min(in_flight, DRAIN_PATIENCE - waited)
                    waited += wait
                    continue
                failures += 1
                if failures >= DRAIN_GIVE_UP:
                    break
                wait = FINAL_RETRY_THINK


def in_flight_wait(kind: str | None, value: Any) -> float | None:
    """Seconds to wait before consuming again, if a consume's completion says that nothing could be
    delivered because messages are in flight (error ``in-flight``, value ``{"in_flight", "visible_in"}``);
    ``None`` for any other completion."""
    if kind != "fail" or not isinstance(value, dict) or "in_flight" not in value:
        return None
    visible_in = value.get("visible_in")
    if not isinstance(visible_in, int | float) or not math.isfinite(visible_in):
        return DRAIN_POLL
    return round(min(max(visible_in, 0.0) + DRAIN_MARGIN, DRAIN_POLL), 6)
