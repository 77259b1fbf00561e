"""Election storms paced by the system under test, not by the wall clock (issue 32).

A storm (a nemesis package with a :class:`nemesis.generator.Pace`: ``leader-churn``, ``timeout-storm``,
``ring-storm``, ``slow-net``, ``lone-leader``) exists to give a bug that lives in elections many chances
per run. Each chance needs an election to finish and the cluster to serve for a while before the next
fault comes. With its steps at fixed offsets, a storm tuned on a quiet machine becomes an outage on a
loaded one, where elections, restarts and fsyncs take longer: the next fault arrives before the last
election has ended, and the run completes few operations. So the interpreter plays a paced package's
steps in order, each no earlier than its scheduled offset, with two waits of its own, each bounded in
seconds of the run's clock:

* **successor**: the heal of a fault that took the leader away (isolate, pause or kill ``leader``), or of
  any fault of a package that is there to bring elections (``ring-storm``'s rings: :attr:`Pace.elects`
  in :mod:`nemesis.generator`), waits, beyond its drawn hold, until the status pollers see a leader in a
  newer term than the one the fault met (the successor the fault is for), at most
  :attr:`PacingRules.successor_wait` seconds; a ring that leaves the leader the pollers know heard by
  every node (a bridge through it) brings no election, and its heal comes at its drawn hold;
* **serving**: a fault after a heal comes its drawn gap after the cluster serves again, that is after the
  first client operation of the chaos phase that completes ``ok`` after the heal, waiting for one at most
  :attr:`PacingRules.serve_wait` seconds beyond the fault's scheduled offset (then it comes anyway). An
  ``ok`` is the system's own word that it serves; the status pollers see a recovered leader only at their
  next round, a second later.

Every later step of the package moves by as much as the step was delayed, or took to apply (a pause of
four nodes through ``docker exec`` took 1.6 s at load 20), so holds and gaps keep their drawn lengths from
the moment a step took effect; steps that then fall after the time limit are left to the final heal
phase, and are not counted as scheduled by fault coverage (they never came due: ``harness.coverage``
compares the faults applied with those that did). The single-fault packages keep their fixed offsets (a
run without a storm plays exactly as before). What was waited is counted per package in the run's stats
(``results.json`` ``stats.pacing``).

Pacing is chosen per run: ``harness run --storm-pacing clock|system`` (``TestSpec.storm_pacing``, a suite
entry's ``storm_pacing``). The default is ``system``: beside two other runs (a CI runner at ``--jobs 3``)
every storm kept its elections per minute and its ``ok`` operations within a third of a quiet machine's,
where by the clock neither did (docs/nemesis.md, "Beside other runs"). ``clock`` plays every step at its
drawn offset, as every run stored before pacing existed did (``harness.spec`` reads those as ``clock``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nemesis.faults import Partition, is_heal
from nemesis.generator import PACKAGES

STORM_PACINGS: tuple[str, ...] = ("clock", "system")
"""``--storm-pacing``: ``clock``, each storm step at its scheduled offset; ``system``, paced by the system
under test (this module)."""
DEFAULT_STORM_PACING = "system"
"""A run's pacing when nothing says otherwise (``TestSpec.storm_pacing``, ``harness run``)."""


def check_storm_pacing(value: object) -> str:
    """A valid ``--storm-pacing`` (ValueError naming the valid ones)."""
    if value not in STORM_PACINGS:
        raise ValueError(f"--storm-pacing must be one of {', '.join(STORM_PACINGS)}, not {value!r}")
    return str(value)


def rules_for(storm_pacing: str) -> PacingRules | None:
    """The interpreter's pacing rules for a run's ``storm_pacing`` (``None``: by the clock)."""
    return PacingRules() if check_storm_pacing(storm_pacing) == "system" else None


@dataclass(frozen=True)
class PacingRules:
    """The bounds of a paced storm's waits, in seconds of the run's clock."""

    successor_wait: float = 5.0
    """How long a heal may wait beyond its hold for the successor of a leader it took away."""
    serve_wait: float = 10.0
    """How long a fault may wait beyond its scheduled offset for the cluster to serve again."""
    poll: float = 0.1
    """How often a wait looks at what the status pollers and clients have seen."""

    def __post_init__(self) -> None:
        for name in ("successor_wait", "serve_wait", "poll"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"pacing {name} must be a non-negative number of seconds, not {value!r}")
        if self.poll <= 0:
            raise ValueError(f"pacing poll must be positive, not {self.poll!r}")


@dataclass(frozen=True)
class Step:
    """One step of a paced package: its operations at one scheduled offset."""

    at: float
    faults: tuple[Any, ...]
    elects: bool = False
    """Whether its package's every fault is there to bring an election (:attr:`nemesis.generator.Pace.elects`)."""

    @property
    def heal(self) -> bool:
        """Whether the step ends a fault (every operation of it is a heal)."""
        return all(is_heal(fault) for fault in self.faults)

    @property
    def deposes_leader(self) -> bool:
        """Whether the step takes the current leader away: its successor is the effect it wants."""
        return any(deposes_leader(fault) for fault in self.faults)

    @property
    def wants_successor(self) -> bool:
        """Whether the step is a fault whose heal waits for a leader in a newer term: one that takes the
        current leader away, or any fault of a package that is there to bring elections."""
        return not self.heal and (self.elects or self.deposes_leader)

    def spares(self, leader: str | None) -> bool:
        """Whether the step leaves ``leader`` heard by every node: partitions whose grudges cut nobody off
        from it (a bridge through the leader). Such a ring brings no election, so its heal has no successor
        to wait for. ``False`` when no leader is known."""
        return leader is not None and all(
            isinstance(fault, Partition) and fault.grudge is not None and not _cut_off(fault.grudge, leader)
            for fault in self.faults
        )


def _cut_off(grudge: Mapping[str, frozenset[str]], node: str) -> bool:
    """Whether ``grudge`` drops any traffic to or from ``node``."""
    return bool(grudge.get(node)) or any(node in dropped for dropped in grudge.values())


def deposes_leader(fault: Any) -> bool:
    """Whether ``fault`` isolates, pauses or kills the current leader."""
    if isinstance(fault, Partition):
        return fault.target == "leader"
    return getattr(fault, "targets", None) == "leader" and not is_heal(fault)


def paced_packages() -> frozenset[str]:
    """The packages whose steps the system paces: those with a pace of their own."""
    return frozenset(name for name, package in PACKAGES.items() if package.pace is not None)


def split_schedule(schedule: Sequence[Any], time_limit: float) -> tuple[list[Any], dict[str, list[Step]]]:
    """The chaos phase's entries (``at`` before ``time_limit``) of a time-ordered schedule, as the fixed
    entries (played at their offsets, as they come) and each paced package's steps, in order."""
    paced = paced_packages()
    fixed: list[Any] = []
    steps: dict[str, list[Step]] = {}
    for entry in schedule:
        if entry.at >= time_limit:
            continue
        package = getattr(entry, "package", None)
        if package not in paced:
            fixed.append(entry)
            continue
        own = steps.setdefault(package, [])
        if own and own[-1].at == entry.at:
            own[-1] = Step(entry.at, (*own[-1].faults, entry.fault), own[-1].elects)
        else:
            pace = PACKAGES[package].pace
            own.append(Step(entry.at, (entry.fault,), pace is not None and pace.elects))
    return fixed, steps


@dataclass
class PackagePacing:
    """What one paced package waited for in a run."""

    steps: int = 0
    """Steps played (each fault and each heal)."""
    delayed_s: float = 0.0
    """Seconds the package's steps were moved later in all, beyond the schedule."""
    successors: int = 0
    """Heals that saw the successor of the leader their fault took away."""
    no_successor: int = 0
    """Heals that came without one, after :attr:`PacingRules.successor_wait`."""
    leader_spared: int = 0
    """Rings that left the leader heard by every node (:meth:`Step.spares`): their heals came at their drawn
    holds, with no successor to wait for."""
    served: int = 0
    """Faults that came after the cluster served again."""
    unserved: int = 0
    """Faults that came without it, after :attr:`PacingRules.serve_wait`."""
    past_limit: int = 0
    """Operations the waits moved past the end of the chaos phase: never due, so not counted as scheduled
    by fault coverage (``harness.coverage``)."""

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "delayed_s": round(self.delayed_s, 3), "successors": self.successors,
                "no_successor": self.no_successor, "leader_spared": self.leader_spared, "served": self.served,
                "unserved": self.unserved, "past_limit": self.past_limit}


@dataclass
class Pacing:
    """Every paced package's :class:`PackagePacing` in a run."""

    packages: dict[str, PackagePacing] = field(default_factory=dict)

    def of(self, package: str) -> PackagePacing:
        return self.packages.setdefault(package, PackagePacing())

    def to_json(self) -> dict[str, Any]:
        return {name: self.packages[name].to_json() for name in sorted(self.packages)}

