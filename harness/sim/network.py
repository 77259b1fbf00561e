"""The simulated network between nodes: seeded delays, drops, duplication, reordering and partitions.

Every peer message the cores send goes through :meth:`SimNetwork.send`, which decides, from the
network's own seeded ``random.Random``, when each copy of the message arrives:

* **delay**: uniform in ``delay_ms``, and with ``tail_probability`` a long tail (``tail_ms``) on top:
  the occasional slow packet that makes timeouts race;
* **order**: messages on one link (src -> dst) arrive in the order they were sent, as on the runtime's
  one TCP connection per peer pair, except that with ``reorder_probability`` a message travels on its
  own and may overtake, or be overtaken by, its neighbours;
* **duplication**: with ``duplicate_probability`` a second copy travels with its own delay;
* **loss**: with ``drop_probability`` a message is lost at the sender (baseline loss; the ``loss``
  nemesis adds more at the receiver);
* **latency** (the nemesis' ``Latency``): every message a target sends is delayed by ``delay_ms`` ±
  ``jitter_ms`` more (netem's meaning; here it always works, there is no kernel to lack netem).

Whether a copy is *accepted* is decided when it arrives (:meth:`SimNetwork.admits`), as iptables does on
the receiving node: a partition is a grudge (``nemesis.grudge``: node -> nodes whose packets it drops,
so one-way partitions and bridges are just grudges), and the ``loss`` nemesis drops a fraction of what
each target receives from other nodes. A partition that starts while a message is in flight drops it,
or (``retransmit_probability``) the sender's TCP retransmits it with backoff, and it arrives after the
heal if the heal comes soon enough: delivery seconds late, out of order.

Clients (the controller's processes) reach nodes on their own links: a small delay each way, the
target's latency fault on replies, never partitions or loss (the container platform's iptables rules
match peer addresses only, so the same holds there).

Everything here is a pure function of the seed and the calls made, in order.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from harness.sim.clock import NS, to_ns
from nemesis import grudge as grudges
from nemesis.faults import Outcome


@dataclass(frozen=True)
class NetworkOptions:
    """The network's behaviour when no fault is in effect. Times in milliseconds."""

    delay_ms: tuple[float, float] = (0.2, 2.0)
    tail_probability: float = 0.01
    tail_ms: tuple[float, float] = (5.0, 60.0)
    drop_probability: float = 0.0
    duplicate_probability: float = 0.002
    reorder_probability: float = 0.01
    retransmit_probability: float = 0.1
    """A message a partition drops is, with this probability, retransmitted instead (TCP backing off:
    first after ``retransmit_after_ms``, then doubling, at most ``retransmit_attempts`` times), so it may
    arrive long after it was sent, once the partition heals: the delayed message of the fencing problem."""
    retransmit_after_ms: float = 200.0
    retransmit_attempts: int = 6
    client_delay_ms: tuple[float, float] = (0.1, 0.6)

    def __post_init__(self) -> None:
        for name in ("delay_ms", "tail_ms", "client_delay_ms"):
            low, high = getattr(self, name)
            if not (math.isfinite(low) and math.isfinite(high) and 0 <= low <= high):
                raise ValueError(f"network {name} must be a range 0 <= low <= high, not {(low, high)}")
        if not (self.retransmit_after_ms > 0 and isinstance(self.retransmit_attempts, int)
                and self.retransmit_attempts >= 0):
            raise ValueError("network retransmission needs retransmit_after_ms > 0 and retransmit_attempts >= 0")
        for name in ("tail_probability", "drop_probability", "duplicate_probability", "reorder_probability",
                     "retransmit_probability"):
            p = getattr(self, name)
            if not (isinstance(p, int | float) and 0 <= p <= 1):
                raise ValueError(f"network {name} must be a probability in [0, 1], not {p!r}")


class SimNetwork:
    """Decides delivery times and acceptance of peer messages; holds the network faults in effect."""

    def __init__(self, nodes: Collection[str], rng: random.Random, options: NetworkOptions | None = None,
                 client_rng: random.Random | None = None) -> None:
        self.nodes = tuple(nodes)
        self.rng = rng
        # Client links draw from their own stream, so removing a client operation (shrinking) does not
        # reshuffle the delays of every peer message after it.
        self.client_rng = client_rng if client_rng is not None else random.Random(rng.getrandbits(64))
        self.options = options or NetworkOptions()
        self.grudge: dict[str, frozenset[str]] = {}
        self.loss: dict[str, float] = {}  # receiver -> probability of dropping a peer's packet
        self.latency: dict[str, tuple[float, float]] = {}  # sender -> (delay ms, jitter ms)
        self._last: dict[tuple[str, str], int] = {}  # link -> latest arrival time of an in-order message
        self.sent = 0
        self.dropped = 0
        self.duplicated = 0
        self.retransmitted = 0

    # -- faults -----------------------------------------------------------------------------------------

    def set_grudge(self, grudge: Mapping[str, Collection[str]]) -> None:
        """Replace the partition in effect (an empty grudge heals it)."""
        self.grudge = {node: frozenset(dropped) for node, dropped in grudge.items() if dropped}

    def set_loss(self, targets: Collection[str], probability: float) -> None:
        """Each target drops peer packets with ``probability`` (replacing earlier loss, as iptables does)."""
        self.loss = {node: probability for node in targets}

    def set_latency(self, targets: Collection[str], delay_ms: float, jitter_ms: float) -> None:
        self.latency = {node: (delay_ms, jitter_ms) for node in targets}

    # -- peer messages ----------------------------------------------------------------------------------

    def send(self, src: str, dst: str, now_ns: int) -> list[int]:
        """The arrival times (ns) of the copies of one message from ``src`` to ``dst`` sent at ``now_ns``:
        none if it is lost at the sender, two if it is duplicated.

        The hot path of a simulation (one call per peer message): :meth:`_arrival` and :meth:`_delay_ns`
        written out, drawing exactly what they draw, in the same order (``random.uniform(a, b)`` is
        ``a + (b - a) * random()``), so a seed's deliveries are the same."""
        options = self.options
        random = self.rng.random
        self.sent += 1
        if options.drop_probability and random() < options.drop_probability:
            self.dropped += 1
            return []
        low, high = options.delay_ms
        delay = low + (high - low) * random()
        tail = options.tail_probability
        if tail and random() < tail:
            tail_low, tail_high = options.tail_ms
            delay += tail_low + (tail_high - tail_low) * random()
        latency = self.latency
        extra = latency.get(src) if latency else None
        if extra is not None:
            delay += max(0.0, extra[0] + self.rng.uniform(-extra[1], extra[1]))
        at = now_ns + int(round(delay / 1000.0 * NS))
        if not (options.reorder_probability and random() < options.reorder_probability):
            link = (src, dst)
            last = self._last.get(link, 0)
            if at < last:
                at = last
            self._last[link] = at
        if options.duplicate_probability and random() < options.duplicate_probability:
            self.duplicated += 1
            return [at, now_ns + self._delay_ns(src)]
        return [at]

    def _arrival(self, src: str, dst: str, now_ns: int) -> int:
        at = now_ns + self._delay_ns(src)
        if self.options.reorder_probability and self.rng.random() < self.options.reorder_probability:
            return at  # travels on its own: may overtake or be overtaken
        link = (src, dst)
        last = self._last.get(link, 0)
        if at < last:
            at = last
        self._last[link] = at
        return at

    def _delay_ns(self, src: str) -> int:
        options, rng = self.options, self.rng
        low, high = options.delay_ms
        delay = rng.uniform(low, high)
        if options.tail_probability and rng.random() < options.tail_probability:
            delay += rng.uniform(*options.tail_ms)
        extra = self.latency.get(src)
        if extra is not None:
            delay += max(0.0, extra[0] + rng.uniform(-extra[1], extra[1]))
        return to_ns(delay / 1000.0)

    def retransmit_ns(self, attempt: int) -> int | None:
        """When a message a partition dropped on its ``attempt``-th try (0 first) is tried again, in ns from
        now; ``None``: it is lost (not retransmitted, or out of attempts)."""
        options = self.options
        if attempt >= options.retransmit_attempts:
            return None
        if attempt == 0 and not (options.retransmit_probability and self.rng.random() < options.retransmit_probability):
            return None
        return to_ns(options.retransmit_after_ms * (2 ** attempt) / 1000.0)

    def cut(self, src: str, dst: str) -> bool:
        """Whether the partition in effect drops packets from ``src`` at ``dst``."""
        dropped = self.grudge.get(dst)
        return dropped is not None and src in dropped

    def admits(self, src: str, dst: str) -> bool:
        """Whether ``dst`` accepts a packet from ``src`` arriving now (partition, then receive loss)."""
        dropped = self.grudge.get(dst)
        if dropped is not None and src in dropped:
            self.dropped += 1
            return False
        p = self.loss.get(dst)
        if p is not None and self.rng.random() < p:
            self.dropped += 1
            return False
        return True

    # -- client links -----------------------------------------------------------------------------------

    def client_delay_ns(self, node: str | None = None, reply: bool = False) -> int:
        """One way between the controller and ``node``; a reply also carries the node's latency fault."""
        low, high = self.options.client_delay_ms
        delay = self.client_rng.uniform(low, high)
        if reply and node is not None:
            extra = self.latency.get(node)
            if extra is not None:
                delay += max(0.0, extra[0] + self.client_rng.uniform(-extra[1], extra[1]))
        return to_ns(delay / 1000.0)


class SimNet:
    """``nemesis.driver.Net`` over a :class:`SimNetwork`, whose hosts are the fault targets' names; values
    shaped like ``nemesis.shell``'s (here latency always works: there is no kernel to lack netem)."""

    def __init__(self, network: SimNetwork, targets: Sequence[str]) -> None:
        self.network = network
        self.targets = tuple(targets)

    def partition(self, grudge: grudges.Grudge, kind: str) -> Outcome:
        self.network.set_grudge(grudge)
        applied = {node: grudge.get(node, frozenset()) for node in self.targets}
        return Outcome({"kind": kind, "grudge": grudges.to_json(applied)})

    def heal(self) -> Outcome:
        self.network.set_grudge({})
        return Outcome({"nodes": list(self.targets)})

    def loss(self, targets: Sequence[str], probability: float) -> Outcome:
        self.network.set_loss(targets, probability)
        return Outcome({"nodes": list(targets), "probability": probability})

    def heal_loss(self) -> Outcome:
        self.network.set_loss((), 0.0)
        return Outcome({"nodes": list(self.targets)})

    def latency(self, targets: Sequence[str], delay_ms: float, jitter_ms: float) -> Outcome:
        self.network.set_latency(targets, delay_ms, jitter_ms)
        return Outcome({"nodes": list(targets), "delay_ms": delay_ms, "jitter_ms": jitter_ms})

    def heal_latency(self) -> Outcome:
        self.network.set_latency((), 0.0, 0.0)
        return Outcome({"nodes": list(self.targets)})
