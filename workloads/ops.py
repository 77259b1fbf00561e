"""The operation vocabulary of workloads, and the shape every workload has.

An :class:`Op` is one invocation a logical client process will make: ``f`` on ``key`` with ``value``,
exactly the fields of a history invoke (FORMATS.md), plus ``node`` (send it to that node; ``None`` lets
the client choose), ``think``, the seconds the process waits before invoking it (after its previous
operation completed), and ``local``: a read that ``node`` itself must serve (a linearizable follower
read, not redirected to the leader), which the final phase uses to check every node's own state. Ops are pure data; a workload's streams are pure functions of its seed.

A :class:`Workload` declares its own facts on its class, read by the harness and both judges through
``workloads.generator`` (``workload_checkers``, ``workload_model``): the operations it invokes
(``operations``), what a client must do to run each (``client_ops``), the checkers that judge its histories
(``checkers``: each workload states its own list), the sequential model the linearizability checker uses
(``model``, ``checkers.models``: ``cas-register``, ``queue``) and its final phase (``final_ops``).

A workload module registers its class where it declares it (:func:`register_workload`, into
:data:`WORKLOADS`); ``workloads.generator`` imports every module of this package first, so the registry
lists no workload itself and a new workload is one new module.

Where a client process sends an operation that names no node is the *client binding*
(:data:`CLIENT_BINDINGS`, :func:`bind`), one policy for the container and the simulated clients.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

LOCAL_FS: tuple[str, ...] = ("read", "poll")
"""The operations that may be ``local`` (served by their node): the register's read, the log's poll."""

VALUE_STRIDE = 1_000_000
"""Written values are ``process * VALUE_STRIDE + n`` (n = 1, 2, ... per process and key): unique per key,
and a person reading a lost write sees which process wrote it (``3000017``: process 3's 17th)."""
FINAL_RETRY_THINK = 0.5
"""Seconds a workload's final operation waits after a failure before it is tried again. A failure right
after the heal is usually an election under way: the leader the final phase waited for may step down a
moment later (a leader whose quorum timed out while it was cut off), and the next one leads within a
second or two. Without the wait, retries took a few milliseconds and ended before the election did
(lease mode, queue, seed 261: every node's drain gave up, 135 acknowledged messages left undelivered)."""


@dataclass(frozen=True)
class Op:
    """One operation to invoke: the history invoke's ``f``/``key``/``value``, where, and after what pause."""

    f: str
    key: str | None = None
    value: Any = None
    node: str | None = None
    think: float = 0.0
    local: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.f, str) or not self.f:
            raise ValueError(f"an operation needs a function name f, not {self.f!r}")
        if self.local and self.f not in LOCAL_FS:
            raise ValueError(f"only a read or a poll can be local (served by its node), not {self.f!r}")
        if not (isinstance(self.think, int | float) and math.isfinite(self.think) and self.think >= 0):
            raise ValueError(f"think time must be a non-negative number of seconds, not {self.think!r}")

    def to_json(self) -> dict[str, Any]:
        """A schedule line's fields: ``f``, ``key``, ``value``, ``think``, ``node`` when pinned, ``local``
        when set."""
        out: dict[str, Any] = {"f": self.f, "key": self.key, "value": self.value, "think": self.think}
        if self.node is not None:
            out["node"] = self.node
        if self.local:
            out["local"] = True
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Op:
        if not isinstance(data, Mapping) or "f" not in data:
            raise ValueError(f"an operation is an object with at least 'f', not {data!r}")
        return cls(
            f=data["f"],
            key=data.get("key"),
            value=data.get("value"),
            node=data.get("node"),
            think=data.get("think", 0.0),
            local=data.get("local", False) is True,
        )


CLIENT_BINDINGS: tuple[str, ...] = ("leader", "node")
"""Where a worker's operations go first.

* ``leader`` (the default): wherever its client's leader hint points (the node that last answered ok or
  that a redirect named), so clients follow the leader and leave a node once it stops answering;
* ``node``: Jepsen's binding of processes to nodes: worker slot ``s`` sends every operation to node
  ``s mod n`` first, and so does every process that replaces a retired one in that slot. A redirect
  is still followed within the operation, but the next operation starts at the slot's node again. So
  clients keep reaching a leader that was cut off, paused or restarted, and read there: what the bugs of
  leaders that go on serving after they were deposed (``lease-read-wallclock``, ``lease-own-clock``)
  need a client to see.
"""


def home_node(binding: str, slot: int, nodes: Sequence[str]) -> str | None:
    """The node worker ``slot``'s operations go to first under ``binding`` (:data:`CLIENT_BINDINGS`);
    ``None``: the client chooses (its leader hint)."""
    if binding not in CLIENT_BINDINGS:
        raise ValueError(f"unknown client binding {binding!r}; valid: {', '.join(CLIENT_BINDINGS)}")
    if binding == "leader" or not nodes:
        return None
    return nodes[slot % len(nodes)]


def bind(op: Op, home: str | None) -> Op:
    """``op`` sent to ``home`` first (:func:`home_node`), unless it names its node itself."""
    return op if home is None or op.node is not None else replace(op, node=home)


FinalOps = Generator[Op, Any, None]
"""The final phase at one node: yields operations and is sent each one's completion (an object with
``type`` and ``value``, or a mapping with those keys), so it can react, e.g. drain a queue until empty."""


@dataclass(frozen=True)
class WorkloadOption:
    """An option a workload's constructor takes that a user may set (``harness run --workload-opt
    NAME=VALUE``, a suite's ``workload_options``): its name, ``int`` or ``float``, and what it means. The
    constructor's default is the default and the constructor judges the range."""

    name: str
    kind: type
    help: str

    def parse(self, text: str) -> int | float:
        """The value of ``text`` (ValueError saying what was expected)."""
        try:
            value = self.kind(text.strip())
        except ValueError:
            what = "a whole number" if self.kind is int else "a number"
            raise ValueError(f"{self.name} must be {what}, not {text!r}") from None
        self.check(value)
        return value

    def check(self, value: object) -> None:
        """ValueError unless ``value`` has this option's type (a float option takes whole numbers too)."""
        kinds: tuple[type, ...] = (int,) if self.kind is int else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds) or (
                isinstance(value, float) and not math.isfinite(value)):
            what = "a whole number" if self.kind is int else "a finite number"
            raise ValueError(f"{self.name} must be {what}, not {value!r}")


class Workload(Protocol):
    """A seeded workload. Implementations: ``workloads.register``, ``workloads.queue``, ``workloads.log``;
    each declares, as class attributes, its facts (module docstring) and the options a user may set as
    ``options`` (:class:`WorkloadOption`)."""

    name: str
    operations: tuple[str, ...]
    """The ``f`` of every operation its streams and its final phase invoke."""
    client_ops: Mapping[str, str]
    """What a workload client must implement: each of :attr:`operations`, with what the client does to run
    it (``harness.db.Clients``; the bundled cluster's is ``adapters.cluster.client``)."""
    checkers: tuple[str, ...]
    """The checkers (``checkers.registry``) that judge its histories, in the order it states them."""
    model: str

    def stream(self, process: int) -> Iterator[Op]:
        """The endless operations of logical process ``process``; the same for the same seed and process,
        whatever other processes do or in which order they are asked."""
        ...

    def final_ops(self, node: str, keys: Sequence[str]) -> FinalOps:
        """The operations of the final phase at ``node`` over the ``keys`` the run used."""
        ...


WORKLOADS: dict[str, Callable[..., Workload]] = {}
"""Every registered workload class by name, in registry order (:func:`register_workload`). Read it through
``workloads.generator``, which imports this package's modules first so that each has registered itself."""
_ORDER: dict[str, int | None] = {}

_W = TypeVar("_W", bound=Callable[..., Any])


def register_workload(*, order: int | None = None) -> Callable[[_W], _W]:
    """A class decorator that registers a workload class in :data:`WORKLOADS` under its ``name``.

    The registry's order is the order of ``--workload``'s choices and of ``harness dbs``: ascending
    ``order``, ties and then the workloads without one (after every numbered one) by name, so it does not
    depend on which module was imported first. The bundled workloads are 1 (``register``), 2 (``queue``) and
    3 (``log``); a new one leaves ``order`` out. Registering the same class again (a module imported anew)
    replaces it; another class under a registered name is a ValueError."""

    def register(cls: _W) -> _W:
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise ValueError(f"a workload class declares its name (a class attribute), {cls!r} does not")
        known = WORKLOADS.get(name)
        if known is not None and _origin(known) != _origin(cls):
            raise ValueError(f"workload {name!r} is registered already, by {'.'.join(_origin(known))}")
        WORKLOADS[name] = cls
        _ORDER[name] = order
        for key in sorted(WORKLOADS, key=lambda key: (_ORDER.get(key) is None, _ORDER.get(key) or 0, key)):
            WORKLOADS[key] = WORKLOADS.pop(key)
        return cls

    return register


def _origin(factory: Callable[..., Any]) -> tuple[str, str]:
    return getattr(factory, "__module__", "?"), getattr(factory, "__qualname__", repr(factory))


def process_rng(seed: int, process: int) -> random.Random:
    """The generator of one process's stream, derived from the workload's seed and the process id only,
    so streams do not depend on how the interpreter interleaves processes."""
    if process < 0:
        raise ValueError(f"process ids are non-negative, not {process}")
    return random.Random(seed * 1_000_003 + process)


def think_time(rng: random.Random, rate: float | None) -> float:
    """A pause drawn uniformly from [0, 2/rate) seconds (mean 1/rate: Jepsen's stagger), 0 without a rate."""
    if rate is None:
        return 0.0
    return round(rng.uniform(0.0, 2.0 / rate), 4)


def check_rate(rate: float | None) -> float | None:
    if rate is None:
        return None
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate) or rate <= 0:
        raise ValueError(f"rate must be a positive number of operations per second per process, not {rate!r}")
    return float(rate)


def completion_fields(completion: Any) -> tuple[str | None, Any]:
    """``(type, value)`` of a completion given as an object with attributes or as a mapping."""
    if isinstance(completion, Mapping):
        return completion.get("type"), completion.get("value")
    return getattr(completion, "type", None), getattr(completion, "value", None)
