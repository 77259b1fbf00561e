"""The seeded nemesis schedule: which faults happen when, drawn from one ``random.Random``.

A *package* is one family of faults with its healing operation (partition/heal, kill/start,
pause/resume, clock/reset, loss/heal-loss, latency/heal-latency), or a composed fault whose steps are
several operations at one instant (leader-clock: isolate the leader and step its clock back / heal and
reset clocks). :func:`generate_schedule` composes the
packages a test asks for into one schedule of pure data, as Jepsen's combined nemesis does:

1. every package runs on its own timeline: every ``interval`` seconds on average (each gap drawn
   uniformly between 0.5 and 1.5 intervals) it performs one operation, alternately a new fault and the
   operation that heals it, until ``time_limit``; so every fault is paired with its heal, and faults of
   different packages overlap;
2. each package draws from its own generator, seeded from ``rng`` in :data:`PACKAGES` order whether or
   not the package is asked for, so a package's faults do not change when others are added: the
   partitions of ``partition,kill`` are those of ``partition`` alone;
3. at ``time_limit`` the final heal phase heals every package asked for, in :data:`FINAL_HEAL_ORDER`
   (network first, then processes, then clocks), whether or not its fault is active, so the cluster is
   whole again before the final reads.

The schedule depends on nothing but its arguments: the same seed, nodes and options give the same
schedule on every platform (ARCHITECTURE.md, "Determinism and seeds"). To add a package, see
``docs/nemesis.md``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nemesis import grudge as grudges
from nemesis.faults import (
    ClockBump,
    ClockReset,
    ClockStrobe,
    Fault,
    Heal,
    HealLatency,
    HealLoss,
    Kill,
    Latency,
    Loss,
    Partition,
    Pause,
    Resume,
    Start,
    draw_targets,
    fault_from_json,
    fault_to_json,
)

DEFAULT_INTERVAL = 10.0


@dataclass(frozen=True)
class NemesisOptions:
    """Knobs of the fault packages. The defaults are what ``harness run`` uses."""

    interval: float = DEFAULT_INTERVAL
    clock_max_offset: float = 180.0
    """Largest clock bump or strobe, in seconds ("offset bumps of up to minutes")."""
    clock_min_offset: float = 0.1
    """Smallest clock bump; sizes are drawn log-uniformly between the two, so small and large both occur."""
    strobe_period: tuple[float, float] = (0.1, 1.0)
    """Range of the strobe's flip period in seconds."""
    loss_probabilities: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.5)
    latency_delays_ms: tuple[float, ...] = (10.0, 50.0, 100.0, 250.0, 500.0, 1000.0)
    kill_targets: tuple[str, ...] = ("leader", "leader", "one", "minority", "majority", "all")
    """Drawn uniformly, so a repeated spec weighs more: a third of kills hit the leader, whose
    acknowledged-but-uncommitted writes are what ``ack-before-commit`` loses."""
    pause_targets: tuple[str, ...] = ("one", "minority", "majority", "leader", "all")
    network_targets: tuple[str, ...] = ("one", "minority", "majority", "all")
    """Who suffers packet loss or latency."""

    def __post_init__(self) -> None:
        if not (
            isinstance(self.interval, int | float) and math.isfinite(self.interval) and self.interval > 0
        ):
            raise ValueError(f"nemesis interval must be a positive number of seconds, not {self.interval!r}")
        if not 0 < self.clock_min_offset <= self.clock_max_offset:
            raise ValueError(
                f"clock offsets must satisfy 0 < min ({self.clock_min_offset}) <= max ({self.clock_max_offset})"
            )
        low, high = self.strobe_period
        if not 0 < low <= high:
            raise ValueError(f"strobe period range must satisfy 0 < low <= high, not {self.strobe_period}")
        if not self.loss_probabilities or not all(0 < p <= 1 for p in self.loss_probabilities):
            raise ValueError(f"loss probabilities must be in (0, 1], not {self.loss_probabilities}")
        if not self.latency_delays_ms or not all(d > 0 for d in self.latency_delays_ms):
            raise ValueError(f"latency delays must be positive, not {self.latency_delays_ms}")
        for name in ("kill_targets", "pause_targets", "network_targets"):
            specs = getattr(self, name)
            allowed = ("one", "minority", "majority", "all") + (
                ("leader",) if name != "network_targets" else ()
            )
            if not specs or not set(specs) <= set(allowed):
                raise ValueError(f"{name} must be drawn from {', '.join(allowed)}, not {specs}")


Step = Fault | tuple[Fault, ...]
"""What a package does at one point of its timeline: one operation, or several applied in order at the
same instant (a composed fault such as ``leader-clock``'s "cut the leader off, then step its clock back")."""


@dataclass(frozen=True)
class Package:
    """One family of faults: how to draw a fault, and the operation(s) that heal it."""

    name: str
    summary: str
    fault: Callable[[random.Random, tuple[str, ...], NemesisOptions], Step]
    heal: Callable[[], Step]
    min_nodes: int = 1


def _operations(step: Step) -> tuple[Fault, ...]:
    return step if isinstance(step, tuple) else (step,)


@dataclass(frozen=True)
class ScheduledFault:
    """One nemesis operation of the schedule: perform ``fault`` at ``at`` seconds after the test start."""

    at: float
    package: str
    fault: Fault

    def to_json(self) -> dict[str, Any]:
        """A ``schedule.jsonl`` line: ``{"at", "process": "nemesis", "package", "f", "value"}``."""
        return {"at": self.at, "process": "nemesis", "package": self.package, **fault_to_json(self.fault)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScheduledFault:
        if not isinstance(data, Mapping) or data.get("process") != "nemesis":
            raise ValueError(f"not a nemesis schedule line: {data!r}")
        at = data.get("at")
        if isinstance(at, bool) or not isinstance(at, int | float) or at < 0:
            raise ValueError(f"nemesis schedule line needs 'at' >= 0 seconds, not {at!r}")
        package = data.get("package")
        if package not in PACKAGES:
            raise ValueError(f"unknown nemesis package {package!r}; valid: {', '.join(nemesis_names())}")
        return cls(at=float(at), package=package, fault=fault_from_json(data))


def _log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def _offset(rng: random.Random, options: NemesisOptions) -> float:
    size = _log_uniform(rng, options.clock_min_offset, options.clock_max_offset)
    return round(size if rng.random() < 0.5 else -size, 3)


def _partition_kinds(n: int) -> list[str]:
    kinds = ["halves", "isolate", "isolate-leader", "one-way"]
    if n >= 3:
        kinds += ["bridge", "ping-pong"]
    if n >= 4:
        kinds.append("majorities-ring")
    return kinds


def _partition(rng: random.Random, nodes: tuple[str, ...], options: NemesisOptions) -> Fault:
    kind = rng.choice(_partition_kinds(len(nodes)))
    if kind == "halves":
        return Partition("halves", grudge=grudges.halves(nodes, rng))
    if kind == "isolate":
        return Partition("isolate", grudge=grudges.isolate(nodes, rng.choice(nodes)))
    if kind == "isolate-leader":
        return Partition("isolate", target="leader")
    if kind == "one-way":
        node = rng.choice(nodes)
        rest = [n for n in nodes if n != node]
        # Either the node hears nobody (it still talks), or nobody hears it (it still listens).
        grudge = grudges.one_way(rest, node) if rng.random() < 0.5 else grudges.one_way(node, rest)
        return Partition("one-way", grudge=grudge)
    if kind == "bridge":
        return Partition("bridge", grudge=grudges.bridge(nodes, rng))
    if kind == "ping-pong":
        return Partition("ping-pong", target="leader", order=tuple(grudges.shuffled(nodes, rng)))
    return Partition("majorities-ring", grudge=grudges.majorities_ring(nodes, rng))


def _node_fault(
    cls: type[Kill] | type[Pause], specs_of: Callable[[NemesisOptions], tuple[str, ...]]
) -> Callable[[random.Random, tuple[str, ...], NemesisOptions], Fault]:
    def draw(rng: random.Random, nodes: tuple[str, ...], options: NemesisOptions) -> Fault:
        spec = rng.choice(specs_of(options))
        return cls(targets="leader" if spec == "leader" else draw_targets(spec, nodes, rng))

    return draw


def _clock(rng: random.Random, nodes: tuple[str, ...], options: NemesisOptions) -> Fault:
    if rng.random() < 2 / 3:
        chosen = draw_targets(rng.choice(("one", "minority", "majority", "all")), nodes, rng)
        return ClockBump(deltas={node: _offset(rng, options) for node in chosen})
    chosen = draw_targets(rng.choice(("one", "minority")), nodes, rng)
    low, high = options.strobe_period
    return ClockStrobe(
        targets=chosen,
        delta=_offset(rng, options),
        period=round(rng.uniform(low, high), 3),
        duration=float(options.interval),
    )


def _leader_clock(rng: random.Random, nodes: tuple[str, ...], options: NemesisOptions) -> Step:
    """Cut the current leader off from everyone, then step that same node's wall clock back by 1 s to
    ``clock_max_offset`` (log-uniform). Both resolve ``leader`` at the same instant, so they hit one node.
    A leader that measures a lease on its wall clock keeps believing in it while a majority elects a
    successor: what ``lease-read-wallclock`` and ``lease-own-clock`` need, and random clock targets
    rarely give."""
    back = round(_log_uniform(rng, min(1.0, options.clock_max_offset), options.clock_max_offset), 3)
    return (Partition("isolate", target="leader"), ClockBump(deltas={"leader": -back}))


def _loss(rng: random.Random, nodes: tuple[str, ...], options: NemesisOptions) -> Fault:
    targets = draw_targets(rng.choice(options.network_targets), nodes, rng)
    return Loss(targets=targets, probability=rng.choice(options.loss_probabilities))


def _latency(rng: random.Random, nodes: tuple[str, ...], options: NemesisOptions) -> Fault:
    targets = draw_targets(rng.choice(options.network_targets), nodes, rng)
    delay = rng.choice(options.latency_delays_ms)
    return Latency(targets=targets, delay_ms=delay, jitter_ms=delay / 5)


PACKAGES: dict[str, Package] = {
    p.name: p
    for p in (
        Package(
            "partition",
            "network partitions as grudges: random halves, isolate a node or the leader, one-way, bridge, "
            "the leader ping-pong, majorities ring",
            _partition,
            Heal,
            min_nodes=2,
        ),
        Package(
            "kill",
            "SIGKILL node processes (one, minority, majority, leader, all); heal starts every node that is down",
            _node_fault(Kill, lambda o: o.kill_targets),
            lambda: Start("all"),
        ),
        Package(
            "pause",
            "SIGSTOP node processes (one, minority, majority, leader, all); heal sends SIGCONT to all",
            _node_fault(Pause, lambda o: o.pause_targets),
            lambda: Resume("all"),
        ),
        Package(
            "clock",
            "wall-clock bumps of up to minutes and strobes through libfaketime; heal resets every clock",
            _clock,
            lambda: ClockReset("all"),
        ),
        Package("loss", "random packet loss between nodes (iptables statistic match)", _loss, HealLoss),
        Package(
            "latency",
            "netem delay on node interfaces (recorded as unavailable where the kernel lacks netem)",
            _latency,
            HealLatency,
        ),
        Package(
            "leader-clock",
            "cut the leader off and step its wall clock back (composed: isolate the leader, then bump that "
            "node's clock); heal reconnects it and resets every clock",
            _leader_clock,
            lambda: (Heal(), ClockReset("all")),
            min_nodes=3,
        ),
    )
}

CLOCK_PACKAGES: tuple[str, ...] = ("clock", "leader-clock")
"""The packages that move wall clocks: on real nodes they need libfaketime (``nemesis.shell.FakeTime``)."""

FINAL_HEAL_ORDER: tuple[str, ...] = ("partition", "leader-clock", "loss", "latency", "pause", "kill", "clock")
"""Network first (so restarted nodes find their peers), then processes, then clocks."""


def nemesis_names() -> tuple[str, ...]:
    """The valid package names, in a stable order."""
    return tuple(PACKAGES)


def parse_nemesis(spec: str | Iterable[str]) -> tuple[str, ...]:
    """Package names from ``"partition,kill"`` or a list; ``""``/``"none"`` is no nemesis.

    Raises ``ValueError`` listing the valid names when one is unknown. Duplicates are dropped; the
    result is in :func:`nemesis_names` order, so the same set of packages always draws the same schedule.
    """
    names = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else [str(s).strip() for s in spec]
    names = [n for n in names if n and n != "none"]
    unknown = [n for n in names if n not in PACKAGES]
    if unknown:
        raise ValueError(
            f"unknown nemesis {', '.join(unknown)}; valid: {', '.join(nemesis_names())} (or none)"
        )
    wanted = set(names)
    return tuple(n for n in PACKAGES if n in wanted)


def check_cluster_size(packages: Iterable[str], nodes: int) -> None:
    """Raise ``ValueError`` (one sentence) if a package needs more nodes than the cluster has."""
    for name in packages:
        if nodes < PACKAGES[name].min_nodes:
            raise ValueError(
                f"nemesis {name} needs at least {PACKAGES[name].min_nodes} nodes, got {nodes}: "
                f"use --nodes {PACKAGES[name].min_nodes} or more, or drop {name} from --nemesis"
            )


def generate_schedule(
    packages: str | Iterable[str],
    nodes: Sequence[str],
    rng: random.Random,
    time_limit: float,
    options: NemesisOptions | None = None,
) -> tuple[ScheduledFault, ...]:
    """The nemesis schedule for a run: faults and heals with their offsets in seconds (module docstring).

    ``nodes`` is the cluster in its canonical order (n1..n5); ``rng`` is the run's seeded generator (or one
    derived from it), the only source of randomness. Times are rounded to milliseconds.
    """
    options = options or NemesisOptions()
    names = parse_nemesis(packages)
    cluster = tuple(grudges.ordered(nodes))
    if not cluster:
        raise ValueError("the nemesis needs at least one node")
    if isinstance(time_limit, bool) or not isinstance(time_limit, int | float) or time_limit < 0:
        raise ValueError(f"time limit must be a non-negative number of seconds, not {time_limit!r}")
    check_cluster_size(names, len(cluster))
    streams = {name: random.Random(rng.getrandbits(64)) for name in PACKAGES}
    schedule: list[ScheduledFault] = []
    for name in names:
        package, stream = PACKAGES[name], streams[name]
        active = False
        at = 0.0
        while True:
            at += stream.uniform(0.5, 1.5) * options.interval
            if at >= time_limit:
                break
            step = package.heal() if active else package.fault(stream, cluster, options)
            active = not active
            schedule.extend(ScheduledFault(round(at, 3), name, fault) for fault in _operations(step))
    order = {name: i for i, name in enumerate(PACKAGES)}
    schedule.sort(key=lambda entry: (entry.at, order[entry.package]))
    end = round(float(time_limit), 3)
    for name in FINAL_HEAL_ORDER:
        if name in names:
            schedule.extend(ScheduledFault(end, name, fault) for fault in _operations(PACKAGES[name].heal()))
    return tuple(schedule)


def schedule_to_jsonl(schedule: Iterable[ScheduledFault]) -> list[dict[str, Any]]:
    """The schedule as ``schedule.jsonl`` objects, in time order."""
    return [entry.to_json() for entry in schedule]


def schedule_from_jsonl(lines: Iterable[Mapping[str, Any]]) -> tuple[ScheduledFault, ...]:
    """The nemesis lines of a stored ``schedule.jsonl`` (client lines are skipped)."""
    return tuple(ScheduledFault.from_json(line) for line in lines if line.get("process") == "nemesis")
