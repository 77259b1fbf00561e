"""The fault vocabulary: every nemesis operation as a frozen dataclass and as plain JSON.

These values are what the seeded generator produces (``schedule.jsonl``), what the interpreter records
in the history's nemesis operations (FORMATS.md: ``process: "nemesis"``, ``f`` from the table below, the
invoke's ``value`` is :func:`fault_to_json`'s ``value``) and what each platform implements: the shell
nemesis over iptables, signals and libfaketime, the simulator over its network and clocks.

| f | fault | heals with |
| --- | --- | --- |
| ``partition`` | :class:`Partition`: a grudge, or a kind resolved at run time ("isolate the leader") | ``heal`` |
| ``kill`` / ``start`` | :class:`Kill` (SIGKILL) / :class:`Start` (start nodes that are down) | ``start`` |
| ``pause`` / ``resume`` | :class:`Pause` (SIGSTOP) / :class:`Resume` (SIGCONT) | ``resume`` |
| ``clock`` | :class:`ClockBump`, :class:`ClockStrobe`, :class:`ClockReset` (``value.kind``) | ``clock`` reset |
| ``loss`` | :class:`Loss`: drop a fraction of the packets between nodes | ``heal-loss`` |
| ``latency`` | :class:`Latency`: netem delay (unavailable where the kernel lacks netem) | ``heal-latency`` |

Targets are either named nodes (a tuple) or one of :data:`TARGET_SPECS`. The generator resolves random
specs to named nodes when it draws the schedule, so the schedule says exactly which nodes a fault hits;
only ``leader`` and ``followers`` (and the partition kinds aimed at the leader) wait for run time, when the
interpreter knows the current leader. :func:`resolve_targets` and :func:`resolve_partition` do that, purely.

Where the system has a leader per *group* (a storage shard, a partition, a queue: docs/db-adapter.md,
"The status contract"), "the leader" is chosen by the run's *leader-group selector*
(:data:`LEADER_GROUP_SELECTORS`, ``--leader-group``): the node that leads the most groups (the default,
and in a single-group system simply its leader), a random group's leader, the cluster-level leader, or a
named group's. :func:`choose_leader` makes that choice, purely, from each group's leader as the status
polls saw it; :func:`aims_at_leader` tells which faults need it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from nemesis import grudge as grudges

TARGET_SPECS: tuple[str, ...] = ("one", "minority", "majority", "leader", "all", "followers")
"""Symbolic targets: a random node, a random minority, a random bare majority, the leader, every node,
every node but the leader. ``leader`` and ``followers`` are resolved at run time, the others when the
schedule is drawn."""

LEADER_GROUP_SELECTORS: tuple[str, ...] = ("most", "random", "cluster")
"""How faults aimed at "the leader" pick it where the system reports several groups: ``most``, the node
that leads the most groups (ties: the cluster-level leader, else the first in node order); ``random``, the
leader of a group drawn from the run's seed at each fault; ``cluster``, the cluster-level leader (the
top-level status fields) whatever the groups. Any other word, or ``group:NAME``, names one group. In a
single-group system every selector but a group's name is that group's leader."""

GROUP_PREFIX = "group:"
"""Names a group whose name is one of the selector words (``group:random``)."""


def parse_leader_group(text: Any) -> str:
    """A leader-group selector as given (:data:`LEADER_GROUP_SELECTORS`, a group name or ``group:NAME``);
    ``ValueError`` in one sentence otherwise."""
    if not isinstance(text, str) or not text.strip() or text.strip() == GROUP_PREFIX:
        raise ValueError(
            f"--leader-group must be {', '.join(LEADER_GROUP_SELECTORS)}, a group's name or group:NAME, "
            f"not {text!r}"
        )
    return text.strip()


def selected_group(selector: str) -> str | None:
    """The group a selector names, or ``None`` for one of :data:`LEADER_GROUP_SELECTORS`."""
    if selector.startswith(GROUP_PREFIX):
        return selector[len(GROUP_PREFIX):]
    return None if selector in LEADER_GROUP_SELECTORS else selector


def choose_leader(
    selector: str,
    leaders: Mapping[str | None, str | None],
    order: Sequence[str],
    rng: random.Random | None = None,
) -> tuple[str | None, str | None, str | None]:
    """The node a leader-aimed fault hits now: ``(node, group, reason)``.

    ``leaders`` maps each known group to the node the caller takes as its leader (``None``: none known);
    the key ``None`` is the cluster-level group, present when the system has one. ``group`` is the group
    aimed at (``None`` for ``most`` and ``cluster``); ``reason`` says why no node could be chosen.
    ``random`` draws from ``rng`` among the known groups, in name order (the cluster-level group first).
    """
    named = selected_group(selector)
    if named is not None:
        if named not in leaders:
            return None, named, f"no status has reported group {named!r}, so it has no leader to target"
        node = leaders[named]
        return node, named, None if node else f"no leader of group {named!r} is known"
    if selector == "cluster":
        node = leaders.get(None)
        return node, None, None if node else "no cluster-level leader is known"
    if selector == "random":
        groups = sorted(leaders, key=lambda g: (g is not None, g or ""))
        if not groups:
            return None, None, "no group is known, so there is no leader to target"
        if rng is None:
            raise ValueError("the random leader-group selector needs the run's rng")
        group = rng.choice(groups)
        node = leaders[group]
        what = "the cluster-level group" if group is None else f"group {group!r}"
        return node, group, None if node else f"no leader of {what} (drawn at random) is known"
    counts: dict[str, int] = {}
    for node in leaders.values():
        if node:
            counts[node] = counts.get(node, 0) + 1
    if not counts:
        return None, None, "no leader is known, so there is no leader to target"
    top = max(counts.values())
    tied = [node for node, n in counts.items() if n == top]
    cluster = leaders.get(None)
    if cluster in tied:
        return cluster, None, None
    rank = {node: i for i, node in enumerate(order)}
    return min(tied, key=lambda node: (rank.get(node, len(rank)), node)), None, None


PARTITION_KINDS: tuple[str, ...] = (
    "halves",
    "isolate",
    "majorities-ring",
    "bridge",
    "one-way",
    "ping-pong",
    "grudge",
)
"""How a partition was shaped. ``grudge`` is a hand-written one; the others name :mod:`nemesis.grudge`'s
builders. Only ``isolate`` and ``ping-pong`` take ``target="leader"``."""

CLOCK_KINDS: tuple[str, ...] = ("bump", "strobe", "reset")

Targets = str | tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    """What applying a fault did: ``value`` is what was actually applied (the history's nemesis completion
    value, FORMATS.md), ``error`` what could not be applied and why (``None``: all of it was)."""

    value: Any = None
    error: str | None = None

    @property
    def applied(self) -> bool:
        return self.error is None

    @property
    def type(self) -> str:
        """The nemesis completion type: ``ok`` when applied, ``info`` when (part of) it was not."""
        return "ok" if self.error is None else "info"


class UnresolvableTarget(ValueError):
    """A target that cannot be turned into nodes now (no leader is known); the fault is not applied."""


def _targets(value: Any, what: str) -> Targets:
    """Normalise a targets value: a symbolic spec, or a non-empty tuple of distinct node names."""
    if isinstance(value, str):
        if value not in TARGET_SPECS:
            raise ValueError(
                f"{what}: unknown target {value!r}; use one of {', '.join(TARGET_SPECS)} or node names"
            )
        return value
    if isinstance(value, Iterable):
        nodes = tuple(value)
        if not nodes or not all(isinstance(n, str) and n for n in nodes) or len(set(nodes)) != len(nodes):
            raise ValueError(f"{what}: targets must be distinct node names, not {value!r}")
        return nodes
    raise ValueError(
        f"{what}: targets must be a spec ({', '.join(TARGET_SPECS)}) or node names, not {value!r}"
    )


def _targets_json(targets: Targets) -> str | list[str]:
    return targets if isinstance(targets, str) else list(targets)


def parse_targets(value: Any, what: str) -> Targets:
    """A fault's targets as given (a spec of :data:`TARGET_SPECS` or distinct node names), normalised;
    ``ValueError`` naming ``what`` otherwise. For fault classes outside this module."""
    return _targets(value, what)


def targets_to_json(targets: Targets) -> str | list[str]:
    """Targets as plain JSON (a spec, or a list of node names)."""
    return _targets_json(targets)


def _seconds(value: Any, what: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number of seconds, not {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{what} must be positive, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class Partition:
    """Drop packets as a grudge says (``grudge``), or as ``kind`` says once the leader is known.

    With ``target="leader"`` the grudge is built at run time: ``isolate`` cuts the leader off,
    ``ping-pong`` cuts the leader and one other node off from each other only (seed 000's Leader
    Ping-Pong); ``order`` is the node order, drawn when the schedule was, that picks that other node.
    """

    f: ClassVar[str] = "partition"
    kind: str
    grudge: Mapping[str, frozenset[str]] | None = None
    target: str | None = None
    order: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in PARTITION_KINDS:
            raise ValueError(f"unknown partition kind {self.kind!r}; use one of {', '.join(PARTITION_KINDS)}")
        if (self.grudge is None) == (self.target is None):
            raise ValueError(f"partition {self.kind}: give either a grudge or a target, not both or neither")
        if self.target is not None:
            if self.target != "leader" or self.kind not in ("isolate", "ping-pong"):
                raise ValueError(
                    f"partition {self.kind}: only isolate and ping-pong take a target, and only 'leader'"
                )
            if self.kind == "ping-pong" and len(self.order) < 2:
                raise ValueError("partition ping-pong at the leader needs the node order to pick its peer")
        if self.grudge is not None:
            object.__setattr__(self, "grudge", {n: frozenset(d) for n, d in self.grudge.items()})
        object.__setattr__(self, "order", tuple(self.order))

    def __hash__(self) -> int:
        grudge = (
            None
            if self.grudge is None
            else tuple(sorted((n, tuple(sorted(d))) for n, d in self.grudge.items()))
        )
        return hash((self.kind, grudge, self.target, self.order))

    def value(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.grudge is not None:
            out["grudge"] = grudges.to_json(self.grudge)
        else:
            out["target"] = self.target
            out["order"] = list(self.order)
        return out


@dataclass(frozen=True)
class Heal:
    """End every partition: each node accepts packets from everyone again."""

    f: ClassVar[str] = "heal"

    def value(self) -> None:
        return None


@dataclass(frozen=True)
class _NodeFault:
    """A fault on node processes, by target."""

    f: ClassVar[str] = ""
    targets: Targets = "all"

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", _targets(self.targets, self.f))

    def value(self) -> dict[str, Any]:
        return {"targets": _targets_json(self.targets)}


@dataclass(frozen=True)
class Kill(_NodeFault):
    """SIGKILL the node process on each target: whatever it had not persisted is lost."""

    f: ClassVar[str] = "kill"


@dataclass(frozen=True)
class Start(_NodeFault):
    """Start the node process on each target that is down; a running node is left alone."""

    f: ClassVar[str] = "start"


@dataclass(frozen=True)
class Pause(_NodeFault):
    """SIGSTOP the node process on each target: it keeps its state and connections, and stops answering."""

    f: ClassVar[str] = "pause"


@dataclass(frozen=True)
class Resume(_NodeFault):
    """SIGCONT the node process on each target; a node that is not paused is left alone."""

    f: ClassVar[str] = "resume"


@dataclass(frozen=True)
class ClockBump:
    """Move each named node's wall clock by ``deltas[node]`` seconds (added to its current offset).

    A ``"leader"`` key stands for the current leader, resolved at run time (:func:`resolve_deltas`); the
    completion then names the node. Only the wall clock moves; the monotonic clock stays real
    (ENVIRONMENT.md, libfaketime recipe).
    """

    f: ClassVar[str] = "clock"
    kind: ClassVar[str] = "bump"
    deltas: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.deltas:
            raise ValueError("clock bump needs at least one node -> seconds")
        deltas = {str(n): _seconds(d, f"clock bump of {n}") for n, d in self.deltas.items()}
        object.__setattr__(self, "deltas", deltas)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.deltas.items())))

    def value(self) -> dict[str, Any]:
        return {"kind": self.kind, "deltas": {n: self.deltas[n] for n in sorted(self.deltas)}}


@dataclass(frozen=True)
class ClockStrobe:
    """Flip each target's wall clock between its offset and offset + ``delta`` every ``period`` seconds,
    for ``duration`` seconds, then leave it at its offset."""

    f: ClassVar[str] = "clock"
    kind: ClassVar[str] = "strobe"
    targets: Targets
    delta: float
    period: float
    duration: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", _targets(self.targets, "clock strobe"))
        object.__setattr__(self, "delta", _seconds(self.delta, "clock strobe delta"))
        object.__setattr__(self, "period", _seconds(self.period, "clock strobe period", positive=True))
        object.__setattr__(self, "duration", _seconds(self.duration, "clock strobe duration", positive=True))

    def value(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "targets": _targets_json(self.targets),
            "delta": self.delta,
            "period": self.period,
            "duration": self.duration,
        }


@dataclass(frozen=True)
class ClockReset:
    """Stop any strobe and put each target's wall clock back to the real time (offset 0)."""

    f: ClassVar[str] = "clock"
    kind: ClassVar[str] = "reset"
    targets: Targets = "all"

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", _targets(self.targets, "clock reset"))

    def value(self) -> dict[str, Any]:
        return {"kind": self.kind, "targets": _targets_json(self.targets)}


@dataclass(frozen=True)
class Loss:
    """Each target drops packets from the other nodes with ``probability`` (iptables statistic match)."""

    f: ClassVar[str] = "loss"
    targets: Targets
    probability: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", _targets(self.targets, "loss"))
        p = self.probability
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p <= 1:
            raise ValueError(f"loss probability must be in (0, 1], not {p!r}")
        object.__setattr__(self, "probability", float(p))

    def value(self) -> dict[str, Any]:
        return {"targets": _targets_json(self.targets), "probability": self.probability}


@dataclass(frozen=True)
class HealLoss:
    """Stop all packet loss."""

    f: ClassVar[str] = "heal-loss"

    def value(self) -> None:
        return None


@dataclass(frozen=True)
class Latency:
    """Delay every packet each target sends by ``delay_ms`` (± ``jitter_ms``) with netem.

    Where the kernel has no netem (these machines: ENVIRONMENT.md) the fault is recorded as unavailable
    on this host; it is never faked.
    """

    f: ClassVar[str] = "latency"
    targets: Targets
    delay_ms: float
    jitter_ms: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", _targets(self.targets, "latency"))
        delay = _seconds(self.delay_ms, "latency delay_ms", positive=True)
        jitter = _seconds(self.jitter_ms, "latency jitter_ms")
        if jitter < 0:
            raise ValueError(f"latency jitter_ms must not be negative, not {jitter}")
        object.__setattr__(self, "delay_ms", delay)
        object.__setattr__(self, "jitter_ms", jitter)

    def value(self) -> dict[str, Any]:
        return {
            "targets": _targets_json(self.targets),
            "delay_ms": self.delay_ms,
            "jitter_ms": self.jitter_ms,
        }


@dataclass(frozen=True)
class HealLatency:
    """Remove the netem delay."""

    f: ClassVar[str] = "heal-latency"

    def value(self) -> None:
        return None


Fault = (
    Partition
    | Heal
    | Kill
    | Start
    | Pause
    | Resume
    | ClockBump
    | ClockStrobe
    | ClockReset
    | Loss
    | HealLoss
    | Latency
    | HealLatency
)

FAULT_FUNCTIONS: tuple[str, ...] = (
    "partition",
    "heal",
    "kill",
    "start",
    "pause",
    "resume",
    "clock",
    "loss",
    "heal-loss",
    "latency",
    "heal-latency",
)
"""Every nemesis ``f`` a history may carry."""

HEALS: tuple[str, ...] = ("heal", "start", "resume", "heal-loss", "heal-latency")
"""The ``f`` of operations that end a fault (plus ``clock`` with ``kind: reset``)."""


FAULT_TYPES: dict[str, type] = {}
"""Fault classes a nemesis package brings beyond this vocabulary, by ``f`` (``nemesis.generator.
register_package`` adds them). Each is a frozen dataclass with ``f: ClassVar[str]``, ``value()`` (plain
JSON), a classmethod ``from_value(value)`` (its inverse, ``ValueError`` naming what is wrong) and
``action()`` (what the driver hands ``Processes.act``: ``nemesis.driver.Action``); it may have ``targets``
(resolved by the driver), ``heals: ClassVar[bool]`` (it ends a fault) and ``describe()`` (one line)."""


def check_fault_type(cls: type) -> None:
    """``ValueError`` unless ``cls`` can join the vocabulary (:data:`FAULT_TYPES`): an ``f`` of its own, and
    ``value``, ``from_value`` and ``action``."""
    f = getattr(cls, "f", None)
    if not isinstance(f, str) or not f:
        raise ValueError(f"fault class {cls.__name__} needs a class attribute f naming its operation")
    if f in FAULT_FUNCTIONS or FAULT_TYPES.get(f, cls) is not cls:
        raise ValueError(f"fault class {cls.__name__}: the operation {f!r} exists already")
    missing = [m for m in ("value", "from_value", "action") if not callable(getattr(cls, m, None))]
    if missing:
        raise ValueError(f"fault class {cls.__name__} needs {', '.join(m + '()' for m in missing)}")


def fault_functions() -> tuple[str, ...]:
    """Every nemesis ``f`` a history may carry: :data:`FAULT_FUNCTIONS` and the registered ones."""
    return FAULT_FUNCTIONS + tuple(FAULT_TYPES)


def is_heal(fault: Fault) -> bool:
    """Whether the operation ends a fault rather than starting one."""
    return fault.f in HEALS or isinstance(fault, ClockReset) or bool(getattr(fault, "heals", False))


def fault_to_json(fault: Fault) -> dict[str, Any]:
    """``{"f": ..., "value": ...}``: the nemesis invoke's fields in the history and a schedule line's."""
    return {"f": fault.f, "value": fault.value()}


def _field(value: Any, name: str, f: str) -> Any:
    if not isinstance(value, Mapping) or name not in value:
        raise ValueError(f"nemesis {f}: value must be an object with {name!r}, not {value!r}")
    return value[name]


def fault_from_json(data: Mapping[str, Any]) -> Fault:
    """The inverse of :func:`fault_to_json`. Raises ``ValueError`` naming what is wrong."""
    if not isinstance(data, Mapping) or "f" not in data:
        raise ValueError(f"a nemesis operation is an object with 'f' and 'value', not {data!r}")
    f, value = data["f"], data.get("value")
    if f == "partition":
        kind = _field(value, "kind", f)
        if "grudge" in value:
            return Partition(kind=kind, grudge=grudges.from_json(value["grudge"]))
        return Partition(kind=kind, target=_field(value, "target", f), order=tuple(value.get("order", ())))
    if f == "heal":
        return Heal()
    if f == "heal-loss":
        return HealLoss()
    if f == "heal-latency":
        return HealLatency()
    if f in ("kill", "start", "pause", "resume"):
        cls = {"kill": Kill, "start": Start, "pause": Pause, "resume": Resume}[f]
        return cls(targets=_targets(_field(value, "targets", f), f))
    if f == "clock":
        kind = _field(value, "kind", f)
        if kind == "bump":
            return ClockBump(deltas=dict(_field(value, "deltas", f)))
        if kind == "strobe":
            return ClockStrobe(
                targets=_field(value, "targets", f),
                delta=_field(value, "delta", f),
                period=_field(value, "period", f),
                duration=_field(value, "duration", f),
            )
        if kind == "reset":
            return ClockReset(targets=_field(value, "targets", f))
        raise ValueError(f"unknown clock kind {kind!r}; use one of {', '.join(CLOCK_KINDS)}")
    if f == "loss":
        return Loss(targets=_field(value, "targets", f), probability=_field(value, "probability", f))
    if f == "latency":
        return Latency(
            targets=_field(value, "targets", f),
            delay_ms=_field(value, "delay_ms", f),
            jitter_ms=value.get("jitter_ms", 0.0),
        )
    if f in FAULT_TYPES:
        return FAULT_TYPES[f].from_value(value)
    raise ValueError(f"unknown nemesis operation {f!r}; use one of {', '.join(fault_functions())}")


def fault_nodes(fault: Fault) -> frozenset[str]:
    """Every node the fault names explicitly (not symbolic targets), for checking against a cluster."""
    if isinstance(fault, Partition):
        named = frozenset(fault.order)
        if fault.grudge is not None:
            named |= grudges.nodes_of(fault.grudge)
        return named
    if isinstance(fault, ClockBump):
        return frozenset(fault.deltas) - {"leader"}
    targets = getattr(fault, "targets", "all")
    return frozenset() if isinstance(targets, str) else frozenset(targets)


def check_nodes(fault: Fault, nodes: Iterable[str]) -> None:
    """Raise ``ValueError`` if the fault names a node the cluster does not have."""
    known = set(nodes)
    unknown = sorted(fault_nodes(fault) - known)
    if unknown:
        raise ValueError(
            f"nemesis {fault.f} names unknown node(s) {', '.join(unknown)}; the nodes are {', '.join(sorted(known))}"
        )
    if isinstance(fault, Partition) and fault.grudge is not None:
        grudges.validate(fault.grudge, sorted(known))


def _sample(nodes: Sequence[str], k: int, rng: random.Random) -> tuple[str, ...]:
    """``k`` distinct nodes drawn by ``rng``, listed in the cluster's node order."""
    chosen = set(rng.sample(list(nodes), k))
    return tuple(n for n in nodes if n in chosen)


def draw_targets(spec: str, nodes: Sequence[str], rng: random.Random) -> tuple[str, ...]:
    """Named nodes for a random spec: ``one``, ``minority`` (1 to (n-1)//2 nodes, at least 1),
    ``majority`` (a bare majority) or ``all``. ``leader`` cannot be drawn: it is known only at run time."""
    listed = list(nodes)
    n = len(listed)
    if n == 0:
        raise ValueError("cannot choose targets from an empty cluster")
    if spec == "one":
        return (rng.choice(listed),)
    if spec == "minority":
        return _sample(listed, rng.randint(1, max(1, (n - 1) // 2)), rng)
    if spec == "majority":
        return _sample(listed, grudges.majority(n), rng)
    if spec == "all":
        return tuple(listed)
    if spec in ("leader", "followers"):
        raise ValueError(f"the leader is known only at run time; resolve {spec!r} with resolve_targets")
    raise ValueError(f"unknown target {spec!r}; use one of {', '.join(TARGET_SPECS)}")


def resolve_targets(
    targets: Targets,
    nodes: Sequence[str],
    leader: str | None,
    rng: random.Random | None = None,
    *,
    members: Sequence[str] | None = None,
) -> tuple[str, ...]:
    """The nodes a fault hits now. Named nodes stay as they are; ``leader`` becomes the current leader and
    ``followers`` every other member (``members``: the nodes that lead or follow, by default ``nodes``;
    a fluvio controller is a fault target but nobody's follower); both raise :class:`UnresolvableTarget`
    when no leader is known. ``all`` is every node; the random specs are drawn from ``rng`` (required
    for them)."""
    if not isinstance(targets, str):
        return tuple(targets)
    if targets == "followers":
        (current,) = resolve_targets("leader", nodes, leader)
        followers = members if members is not None else nodes
        return tuple(n for n in followers if n != current and n in nodes)
    if targets == "leader":
        if leader is None:
            raise UnresolvableTarget("no leader is known, so there is no leader to target")
        if leader not in nodes:
            raise UnresolvableTarget(f"the reported leader {leader!r} is not one of the nodes")
        return (leader,)
    if targets == "all":
        return tuple(nodes)
    if rng is None:
        raise ValueError(f"target {targets!r} is random: pass the run's rng to resolve it")
    return draw_targets(targets, nodes, rng)


def resolve_deltas(deltas: Mapping[str, float], nodes: Sequence[str], leader: str | None) -> dict[str, float]:
    """A clock bump's node -> seconds now: a ``"leader"`` key becomes the current leader (raises
    :class:`UnresolvableTarget` when none is known), added to that node's own delta if it has one."""
    if "leader" not in deltas:
        return dict(deltas)
    (node,) = resolve_targets("leader", nodes, leader)
    resolved = {n: d for n, d in deltas.items() if n != "leader"}
    resolved[node] = resolved.get(node, 0.0) + deltas["leader"]
    return resolved


def resolve_partition(partition: Partition, nodes: Sequence[str], leader: str | None) -> grudges.Grudge:
    """The grudge a partition applies now: its own, or the one its kind builds around the leader."""
    if partition.grudge is not None:
        return dict(partition.grudge)
    if leader is None:
        raise UnresolvableTarget(f"partition {partition.kind} targets the leader, and no leader is known")
    if leader not in nodes:
        raise UnresolvableTarget(f"the reported leader {leader!r} is not one of the nodes")
    if partition.kind == "isolate":
        return grudges.isolate(nodes, leader)
    peer = next((n for n in partition.order if n != leader and n in nodes), None)
    if peer is None:
        raise UnresolvableTarget("ping-pong needs a node other than the leader, and the order names none")
    return grudges.ping_pong(leader, peer)


def aims_at_leader(fault: Fault) -> bool:
    """Whether applying ``fault`` needs the current leader: a partition built around it, a ``leader`` or
    ``followers`` target, a clock bump of ``"leader"``."""
    if isinstance(fault, Partition):
        return fault.target == "leader"
    if isinstance(fault, ClockBump):
        return "leader" in fault.deltas
    return getattr(fault, "targets", None) in ("leader", "followers")


def describe(fault: Fault) -> str:
    """One short line for a person (the live view's active faults, the report's timeline)."""
    if isinstance(fault, Partition):
        if fault.grudge is None:
            return f"partition {fault.kind} {fault.target}"
        cut = sum(len(d) for d in fault.grudge.values())
        return f"partition {fault.kind} ({cut} links cut)"
    if isinstance(fault, ClockBump):
        return "clock bump " + ", ".join(f"{n} {d:+.3f}s" for n, d in sorted(fault.deltas.items()))
    if isinstance(fault, ClockStrobe):
        return f"clock strobe {_who(fault.targets)} ±{abs(fault.delta):.3f}s every {fault.period:.2f}s"
    if isinstance(fault, ClockReset):
        return f"clock reset {_who(fault.targets)}"
    if isinstance(fault, Loss):
        return f"loss {fault.probability:g} on {_who(fault.targets)}"
    if isinstance(fault, Latency):
        return f"latency {fault.delay_ms:g}ms on {_who(fault.targets)}"
    if isinstance(fault, Kill | Start | Pause | Resume):
        return f"{fault.f} {_who(fault.targets)}"
    own = getattr(fault, "describe", None)
    if callable(own):
        return str(own())
    if isinstance(getattr(fault, "targets", None), str | tuple):
        return f"{fault.f} {_who(fault.targets)}"
    return fault.f


def _who(targets: Targets) -> str:
    return targets if isinstance(targets, str) else ",".join(targets)
