"""The seeded nemesis schedule: which faults happen when, drawn from one ``random.Random``.

A *package* is one family of faults with its healing operation (partition/heal, kill/start,
pause/resume, clock/reset, loss/heal-loss, latency/heal-latency), or a composed fault whose steps are
several operations at one instant (leader-clock: isolate the leader and step its clock back / heal and
reset clocks). :func:`generate_schedule` composes the
packages a test asks for into one schedule of pure data, as Jepsen's combined nemesis does:

1. every package runs on its own timeline: every ``interval`` seconds on average (each gap drawn
   uniformly between 0.5 and 1.5 intervals) it performs one operation, alternately a new fault and the
   operation that heals it, until ``time_limit``; so every fault is paired with its heal, and faults of
   different packages overlap. An *election storm* keeps a pace of its own instead (:class:`Pace`: how
   long a fault holds, how long the cluster rests before the next), a few seconds whatever the interval,
   and may heal each fault with the operation that ends that fault only (``Package.heal_of``). The
   schedule gives a storm's steps their offsets; with ``--storm-pacing system`` the interpreter plays them
   no earlier, and also waits for what the system does (a successor elected, operations served again:
   ``harness.pacing``);
2. each package draws from its own generator, seeded from ``rng`` in :data:`PACKAGES` order whether or
   not the package is asked for, so a package's faults do not change when others are added: the
   partitions of ``partition,kill`` are those of ``partition`` alone;
3. at ``time_limit`` the final heal phase heals every package asked for, in :func:`final_heal_order`
   (network first, then processes, then clocks), whether or not its fault is active, so the cluster is
   whole again before the final reads.

The schedule depends on nothing but its arguments: the same seed, nodes and options give the same
schedule on every platform (ARCHITECTURE.md, "Determinism and seeds"). To add a package, see
``docs/nemesis.md``.

The election storms (:data:`STORMS`) exist because a bug that lives in elections gets one chance per
election, and the single-fault packages at their usual pace cause about four a minute (docs/nemesis.md,
"Election storms", has the figures). Each is composed from the same fault vocabulary:

* ``leader-churn``: isolate, pause or kill the current leader, heal after 1 to 2.5 s, again 0.3 to 1 s
  later: a successor is elected nearly every time, and the deposed leader comes back into a newer term;
* ``timeout-storm``: pause every node (two times in three) or every follower for 1.5 to 3.5 s and resume
  them together: their election timers expire at the same instant (the leader's quorum timeout too, when
  it was paused), so several candidates stand at once (split votes, a voter asked twice in one term);
* ``ring-storm``: a majorities ring or a bridge, a new one every 1 to 3 s with a short heal between: every
  node sees a majority but candidates cannot hear each other, while the voters between them hear both;
* ``slow-net``: latency with a jitter as large as the delay (the simulator; recorded as unavailable where
  the kernel lacks netem) together with packet loss (iptables; on containers, TCP retransmits what is
  lost, so messages arrive late), on a majority or every node: heartbeats miss, elections start, and a
  Vote of an earlier ballot arrives during a later one;
* ``lone-leader``: pause every follower for 2 to 4 s, then kill the leader and resume the followers at one
  instant, and restart it 1 to 2 s later: a system that lets its in-sync set shrink to the leader (Kafka's
  ISR, Fluvio's LRS, Redis with asynchronous replicas) has the leader commit alone, and only replicas that
  lack those records are left to elect from: an unclean election loses them, a correct system waits for
  the leader to come back.
"""

from __future__ import annotations

import math
import operator
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nemesis import faults as vocabulary
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
    storm_delays_ms: tuple[float, ...] = (100.0, 200.0, 400.0, 800.0)
    """``slow-net``'s delays, each with a jitter as large: around the election timeout (0.45 s by default)."""
    storm_loss_probabilities: tuple[float, ...] = (0.1, 0.2, 0.3)
    storm_pause_targets: tuple[str, ...] = ("all", "all", "followers")
    """Whom ``timeout-storm`` pauses. Pausing every node for longer than the leader's quorum timeout
    (1.8 s by default) deposes the leader too, so every node starts an election at the same instant; with
    the followers alone the leader keeps leading unless they disrupt it. In the simulator the first gave
    vote-twice in aeron 11 times in 20 seeds, the second 4 times (docs/nemesis.md), hence two to one."""
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
        for name in ("latency_delays_ms", "storm_delays_ms"):
            if not getattr(self, name) or not all(d > 0 for d in getattr(self, name)):
                raise ValueError(f"{name.replace('_', ' ')} must be positive, not {getattr(self, name)}")
        if not self.storm_loss_probabilities or not all(0 < p <= 1 for p in self.storm_loss_probabilities):
            raise ValueError(f"storm loss probabilities must be in (0, 1], not {self.storm_loss_probabilities}")
        if not self.storm_pause_targets or not set(self.storm_pause_targets) <= {"all", "followers"}:
            raise ValueError(f"storm pause targets must be all or followers, not {self.storm_pause_targets}")
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
class Pace:
    """A package's own rhythm, in seconds, instead of the run's ``interval``: each fault holds for a time
    drawn uniformly from ``hold``, then its heal comes, and the next fault ``gap`` later (uniform).

    ``elects``: every fault of the package is there to bring an election, whoever it cuts off (a ring
    whose candidates cannot hear each other), so a storm paced by the system (``harness.pacing``) holds
    it until a leader of a newer term is seen, as it holds a fault that took the leader away."""

    hold: tuple[float, float]
    gap: tuple[float, float]
    elects: bool = False

    def __post_init__(self) -> None:
        for name in ("hold", "gap"):
            low, high = getattr(self, name)
            if not 0 <= low <= high or high <= 0:
                raise ValueError(f"pace {name} must be a range 0 <= low <= high, high > 0, not {(low, high)}")


@dataclass(frozen=True)
class Family:
    """How the report draws the faults a package brings: one lane called ``name``, its bands in ``colour``.

    ``faults`` are the ``f`` of the operations that begin a fault of the family, ``heals`` those that end
    one. ``per_node``: each node's fault is its own span, ended by a heal that names the node (kill/start,
    pause/resume). ``lasting`` False: a fault is over when its operation completes (a cut of a file's tail
    leaves nothing to heal), so its band runs from invoke to completion instead of to the next heal.
    """

    name: str
    colour: str
    faults: tuple[str, ...]
    heals: tuple[str, ...] = ()
    per_node: bool = False
    lasting: bool = True

    def __post_init__(self) -> None:
        if not re.fullmatch(r"#[0-9a-fA-F]{6}", self.colour):
            raise ValueError(f"fault family {self.name}: colour must be #rrggbb, not {self.colour!r}")
        if not re.fullmatch(r"[a-z][a-z0-9-]*", self.name):
            raise ValueError(f"fault family name must be lower-case words joined by '-', not {self.name!r}")


@dataclass(frozen=True)
class Package:
    """One family of faults and everything the harness knows about it, declared in one place.

    ``fault`` draws a step; ``heal`` heals anything the package may have done (the final heal phase uses
    it); ``heal_of``, when given, is the heal of one drawn step (a leader kill is healed by a start, not
    also by a heal and a resume). ``pace``, when given, replaces the run's interval for this package
    (:class:`Pace`). ``needs`` names the DB capabilities the package's faults need (``harness.db``'s
    registry: composition refuses a DB without them); ``family`` is the report's lane for the faults the
    package brings (``None`` for a package composed of other packages' faults, drawn in their lanes);
    ``final_heal`` places its heal in the final heal phase, lowest first (network 10s, processes 40s to
    60s, clocks 70s: :func:`final_heal_order`); ``faults`` are fault classes of its own beyond the
    vocabulary of :mod:`nemesis.faults` (:func:`register_package` registers them).
    """

    name: str
    summary: str
    fault: Callable[[random.Random, tuple[str, ...], NemesisOptions], Step]
    heal: Callable[[], Step]
    min_nodes: int = 1
    pace: Pace | None = None
    heal_of: Callable[[Step], Step] | None = None
    needs: tuple[str, ...] = ()
    family: Family | None = None
    final_heal: int = 90
    faults: tuple[type, ...] = ()


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


def _leader_churn(rng: random.Random, nodes: tuple[str, ...], options: NemesisOptions) -> Fault:
    """Isolate, pause or kill the current leader (resolved when applied)."""
    return rng.choice((Partition("isolate", target="leader"), Pause("leader"), Kill("leader")))


def _churn_heal(step: Step) -> Step:
    """The heal of one churn fault: reconnect, resume or restart."""
    return Heal() if isinstance(step, Partition) else Resume("all") if isinstance(step, Pause) else Start("all")


def _timeout_storm(rng: random.Random, nodes: tuple[str, ...], options: NemesisOptions) -> Fault:
    """Pause every node, or every node but the leader, so their timers run out together on the resume."""
    return Pause(rng.choice(options.storm_pause_targets))


def _lone_leader(rng: random.Random, nodes: tuple[str, ...], options: NemesisOptions) -> Step:
    """Start whatever the last cycle killed, then pause every follower: the leader goes on alone, and a
    system whose in-sync set may shrink to the leader commits alone."""
    return (Start("all"), Pause("followers"))


def _lone_leader_loss(step: Step) -> Step:
    """Kill the lone leader, then resume its followers: only replicas that lack what it committed alone
    are left, and electing one of them (an unclean election) loses it; the next cycle restarts the leader."""
    return (Kill("leader"), Resume("all"))


def _ring_storm(rng: random.Random, nodes: tuple[str, ...], options: NemesisOptions) -> Fault:
    """A fresh majorities ring (>= 4 nodes) or bridge: candidates that cannot hear each other, voters
    that hear both."""
    if len(nodes) >= 4 and rng.random() < 0.5:
        return Partition("majorities-ring", grudge=grudges.majorities_ring(nodes, rng))
    return Partition("bridge", grudge=grudges.bridge(nodes, rng))


def _slow_net(rng: random.Random, nodes: tuple[str, ...], options: NemesisOptions) -> Step:
    """Delay with a jitter as large as itself, and loss, on the same nodes (latency where netem exists,
    loss everywhere; on TCP a lost message arrives late, retransmitted)."""
    targets = draw_targets(rng.choice(("majority", "all")), nodes, rng)
    delay = rng.choice(options.storm_delays_ms)
    return (Latency(targets=targets, delay_ms=delay, jitter_ms=delay),
            Loss(targets=targets, probability=rng.choice(options.storm_loss_probabilities)))


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
            needs=("Status",),
            family=Family("partition", "#4c7dd9", faults=("partition",), heals=("heal",)),
            final_heal=10,
        ),
        Package(
            "kill",
            "SIGKILL node processes (one, minority, majority, leader, all); heal starts every node that is down",
            _node_fault(Kill, lambda o: o.kill_targets),
            lambda: Start("all"),
            needs=("Process", "Status"),
            family=Family("kill", "#d64545", faults=("kill",), heals=("start",), per_node=True),
            final_heal=60,
        ),
        Package(
            "pause",
            "SIGSTOP node processes (one, minority, majority, leader, all); heal sends SIGCONT to all",
            _node_fault(Pause, lambda o: o.pause_targets),
            lambda: Resume("all"),
            needs=("Pause", "Status"),
            family=Family("pause", "#8e6bd8", faults=("pause",), heals=("resume",), per_node=True),
            final_heal=50,
        ),
        Package(
            "clock",
            "wall-clock bumps of up to minutes and strobes through libfaketime; heal resets every clock",
            _clock,
            lambda: ClockReset("all"),
            needs=("ClockSkew",),
            # A reset is a ``clock`` operation too (``value.kind``): nemesis.faults.is_heal tells it apart.
            family=Family("clock", "#e0a000", faults=("clock",)),
            final_heal=70,
        ),
        Package(
            "loss",
            "random packet loss between nodes (iptables statistic match)",
            _loss,
            HealLoss,
            family=Family("loss", "#1aa39a", faults=("loss",), heals=("heal-loss",)),
            final_heal=20,
        ),
        Package(
            "latency",
            "netem delay on node interfaces (recorded as unavailable where the kernel lacks netem)",
            _latency,
            HealLatency,
            family=Family("latency", "#7cb342", faults=("latency",), heals=("heal-latency",)),
            final_heal=30,
        ),
        Package(
            "leader-clock",
            "cut the leader off and step its wall clock back (composed: isolate the leader, then bump that "
            "node's clock); heal reconnects it and resets every clock",
            _leader_clock,
            lambda: (Heal(), ClockReset("all")),
            min_nodes=3,
            needs=("ClockSkew", "Status"),
            final_heal=11,
        ),
        # The election storms (module docstring). Appended after the others: every package's stream is
        # seeded in this order, so the earlier packages' schedules did not move when these were added.
        Package(
            "leader-churn",
            "election storm: isolate, pause or kill the current leader for 1-2.5 s, every 1.3-3.5 s; "
            "heal reconnects, resumes or restarts it",
            _leader_churn,
            lambda: (Heal(), Resume("all"), Start("all")),
            min_nodes=3,
            pace=Pace(hold=(1.0, 2.5), gap=(0.3, 1.0)),
            heal_of=_churn_heal,
            needs=("Process", "Pause", "Status"),
            final_heal=40,  # heals all three of its kinds, network first
        ),
        Package(
            "timeout-storm",
            "election storm: pause every node (or every follower) for 1.5-3.5 s and resume them together, "
            "so their election timers run out at once",
            _timeout_storm,
            lambda: Resume("all"),
            min_nodes=3,
            pace=Pace(hold=(1.5, 3.5), gap=(0.5, 1.5)),
            needs=("Pause", "Status"),
            final_heal=41,
        ),
        Package(
            "ring-storm",
            "election storm: a new majorities ring or bridge partition every 1-3 s, briefly healed between",
            _ring_storm,
            Heal,
            min_nodes=3,
            pace=Pace(hold=(1.0, 3.0), gap=(0.1, 0.5), elects=True),
            final_heal=12,
        ),
        Package(
            "slow-net",
            "election storm: delay with as much jitter (where netem exists) and packet loss on a majority "
            "or every node, 2-5 s at a time, so heartbeats miss and old votes arrive late",
            _slow_net,
            lambda: (HealLatency(), HealLoss()),
            pace=Pace(hold=(2.0, 5.0), gap=(0.5, 2.0)),
            final_heal=31,
        ),
        # After the storms, so that no earlier package's stream moved when it was added.
        Package(
            "lone-leader",
            "unclean-election storm: pause every follower for 2-4 s so the leader goes on alone, then kill "
            "it and resume them together; 1-2 s later restart it (and pause the followers again)",
            _lone_leader,
            lambda: (Resume("all"), Start("all")),
            min_nodes=3,
            pace=Pace(hold=(2.0, 4.0), gap=(1.0, 2.0)),
            heal_of=_lone_leader_loss,
            needs=("Process", "Pause", "Status"),
            final_heal=42,
        ),
    )
}

STORMS: tuple[str, ...] = ("leader-churn", "timeout-storm", "ring-storm", "slow-net", "lone-leader")
"""The election-storm packages (module docstring)."""

def final_heal_order() -> tuple[str, ...]:
    """Every package in the order the final heal phase heals them: by ``Package.final_heal`` (network
    first, so restarted nodes find their peers, then processes, then clocks), ties in :data:`PACKAGES`
    order."""
    return tuple(sorted(PACKAGES, key=lambda name: PACKAGES[name].final_heal))


def clock_packages() -> tuple[str, ...]:
    """The packages that move wall clocks (they need ``ClockSkew``): on real nodes they need libfaketime
    (``nemesis.shell.FakeTime``)."""
    return tuple(name for name, package in PACKAGES.items() if "ClockSkew" in package.needs)


def fault_families() -> tuple[Family, ...]:
    """The report's fault families, in package order: one per package that brings faults of its own."""
    return tuple(package.family for package in PACKAGES.values() if package.family is not None)


def register_package(package: Package, setitem: Callable[[Any, Any, Any], None] = operator.setitem) -> None:
    """Add ``package`` at the end of :data:`PACKAGES` (so no existing seed's schedule moves), and its own
    fault classes to the vocabulary (``nemesis.faults.FAULT_TYPES``), through ``setitem``
    (``monkeypatch.setitem`` in a test, to undo it afterwards). ``ValueError`` if the name or an ``f`` is
    taken."""
    if package.name in PACKAGES:
        raise ValueError(f"nemesis package {package.name!r} exists already")
    for cls in package.faults:
        vocabulary.check_fault_type(cls)
    for cls in package.faults:
        setitem(vocabulary.FAULT_TYPES, cls.f, cls)
    setitem(PACKAGES, package.name, package)


CLOCK_PACKAGES: tuple[str, ...] = clock_packages()
"""The shipped packages that move wall clocks (:func:`clock_packages` includes registered ones)."""

FINAL_HEAL_ORDER: tuple[str, ...] = final_heal_order()
"""The shipped packages in final-heal order (:func:`final_heal_order` includes registered ones).
``leader-churn`` heals all three of its kinds, network first."""


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
        step: Step = ()
        while True:
            if package.pace is None:
                at += stream.uniform(0.5, 1.5) * options.interval
            else:
                at += stream.uniform(*(package.pace.hold if active else package.pace.gap))
            if at >= time_limit:
                break
            if not active:
                step = package.fault(stream, cluster, options)
            elif package.heal_of is not None:
                step = package.heal_of(step)
            else:
                step = package.heal()
            active = not active
            schedule.extend(ScheduledFault(round(at, 3), name, fault) for fault in _operations(step))
    order = {name: i for i, name in enumerate(PACKAGES)}
    schedule.sort(key=lambda entry: (entry.at, order[entry.package]))
    end = round(float(time_limit), 3)
    for name in final_heal_order():
        if name in names:
            schedule.extend(ScheduledFault(end, name, fault) for fault in _operations(PACKAGES[name].heal()))
    return tuple(schedule)


def schedule_to_jsonl(schedule: Iterable[ScheduledFault]) -> list[dict[str, Any]]:
    """The schedule as ``schedule.jsonl`` objects, in time order."""
    return [entry.to_json() for entry in schedule]


def schedule_from_jsonl(lines: Iterable[Mapping[str, Any]]) -> tuple[ScheduledFault, ...]:
    """The nemesis lines of a stored ``schedule.jsonl`` (client lines are skipped)."""
    return tuple(ScheduledFault.from_json(line) for line in lines if line.get("process") == "nemesis")
