"""The one fault driver: every fault of the vocabulary (:mod:`nemesis.faults`), dispatched to three small
protocols that each platform implements, and a record of what is still in effect.

=============  =============================================================  ============================
protocol       methods                                                        implemented by
=============  =============================================================  ============================
:class:`Net`   ``partition``, ``heal``, ``loss``, ``heal_loss``,              iptables/netem over a node's
               ``latency``, ``heal_latency``                                  shell (``nemesis.shell``);
                                                                              the simulated network
:class:`Clocks` ``bump``, ``strobe``, ``reset``                               libfaketime (``nemesis.shell``);
                                                                              the simulated clocks
:class:`Processes` ``kill``, ``start``, ``pause``, ``resume``                 the DB adapter
                                                                              (``harness.fault_driver``); the
                                                                              simulated processes
=============  =============================================================  ============================

This is the shape of Jepsen's ``Net`` protocol behind one partitioner: the driver resolves what the
schedule left symbolic (``leader``, a partition aimed at the leader) against the leader the caller saw,
hands each protocol concrete nodes, and keeps, in one place, the record the final phase undoes
(:meth:`FaultDriver.recovery_faults`) and the live view shows (:meth:`FaultDriver.active`). A new fault
touches the vocabulary (``nemesis.faults``), its generator (``nemesis.generator``) and the protocol
implementations, never this dispatch's callers. A fault a package registers
(``nemesis.faults.FAULT_TYPES``) needs no branch here: its ``action()`` names an :class:`Action`, a verb
with the values the fault carries, which the driver hands ``Processes.act`` with the resolved targets.

Every protocol method returns an :class:`~nemesis.faults.Outcome`: ``value`` is what was actually applied
(the history's nemesis completion value, FORMATS.md), ``error`` what could not be. Process methods return
``{"nodes": [done...]}`` and may add ``"unchanged"``: nodes already as the fault wants them (starting a
running node, resuming one that is not paused).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

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
    Outcome,
    Partition,
    Pause,
    Resume,
    Start,
    UnresolvableTarget,
    describe,
    resolve_deltas,
    resolve_partition,
    resolve_targets,
)


class Net(Protocol):
    """The network between the nodes: grudges, packet loss and latency."""

    def partition(self, grudge: grudges.Grudge, kind: str) -> Outcome: ...

    def heal(self) -> Outcome: ...

    def loss(self, targets: Sequence[str], probability: float) -> Outcome: ...

    def heal_loss(self) -> Outcome: ...

    def latency(self, targets: Sequence[str], delay_ms: float, jitter_ms: float) -> Outcome: ...

    def heal_latency(self) -> Outcome: ...


class Clocks(Protocol):
    """The nodes' wall clocks (never their monotonic clocks: ENVIRONMENT.md)."""

    def bump(self, deltas: Mapping[str, float]) -> Outcome: ...

    def strobe(self, targets: Sequence[str], delta: float, period: float, duration: float) -> Outcome: ...

    def reset(self, targets: Sequence[str]) -> Outcome: ...


class Processes(Protocol):
    """The system's processes: SIGKILL, start, SIGSTOP, SIGCONT."""

    def kill(self, targets: Sequence[str]) -> Outcome: ...

    def start(self, targets: Sequence[str]) -> Outcome: ...

    def pause(self, targets: Sequence[str]) -> Outcome: ...

    def resume(self, targets: Sequence[str]) -> Outcome: ...


@dataclass(frozen=True)
class Action:
    """What a process fault asks of the system's processes: a ``verb`` (``kill``, ``start``, ``pause``,
    ``resume``, or a registered fault's own, such as ``truncate-tail``) and the values the fault carries
    (``{"bytes": 512}``), which travel with it to the implementation; the four shipped verbs carry none."""

    verb: str
    argument: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "argument", dict(self.argument))

    def __hash__(self) -> int:
        return hash((self.verb, tuple(sorted(self.argument.items()))))


class ProcessActions:
    """A :class:`Processes` whose faults are one method: ``act(action, targets)``, ``action`` being an
    :class:`Action` (``Action("kill")``, ..., or a registered fault's verb with its argument)."""

    def act(self, action: Action, targets: Sequence[str]) -> Outcome:
        raise NotImplementedError

    def kill(self, targets: Sequence[str]) -> Outcome:
        return self.act(Action("kill"), targets)

    def start(self, targets: Sequence[str]) -> Outcome:
        return self.act(Action("start"), targets)

    def pause(self, targets: Sequence[str]) -> Outcome:
        return self.act(Action("pause"), targets)

    def resume(self, targets: Sequence[str]) -> Outcome:
        return self.act(Action("resume"), targets)


NO_CLOCKS = "clock faults need libfaketime on the nodes (no clock control configured)"
NO_PROCESSES = "process faults need the DB's Process and Pause capabilities"


class FaultDriver:
    """Applies faults through a :class:`Net`, :class:`Clocks` and :class:`Processes` (module docstring).

    ``nodes`` are the fault targets in their order (the data nodes, then what the DB runs "killable and
    partitionable like a node"); ``members`` the nodes that lead or follow (default ``nodes``: a fluvio
    controller is a fault target but nobody's follower, so ``followers`` spares it); ``rng`` resolves
    random symbolic targets written by hand (the generator resolves its own). A protocol may be ``None`` when the platform cannot do it: its faults are then
    recorded as not applied, with the reason.
    """

    def __init__(
        self,
        nodes: Sequence[str],
        *,
        net: Net | None,
        clocks: Clocks | None,
        processes: Processes | None,
        rng: random.Random | None = None,
        members: Sequence[str] | None = None,
    ) -> None:
        self.nodes = tuple(nodes)
        self.members = tuple(members) if members is not None else self.nodes
        self.net = net
        self.clocks = clocks
        self.processes = processes
        self.rng = rng
        self.partitioned: str | None = None
        self.loss: str | None = None
        self.latency: str | None = None
        self.clock: str | None = None
        self.killed: set[str] = set()
        self.paused: set[str] = set()

    def describe(self, fault: Fault) -> tuple[str, Any]:
        """The ``f`` and ``value`` recorded on the fault's invoke."""
        return fault.f, fault.value()

    def apply(self, fault: Fault, leader: str | None) -> Outcome:
        """Apply ``fault`` now, ``leader`` being the node the caller last saw leading. Never raises because
        a fault could not be applied (a platform may raise when a node cannot be reached at all)."""
        try:
            outcome = self._dispatch(fault, leader)
        except UnresolvableTarget as exc:
            return Outcome(error=str(exc))
        self._track(fault, outcome)
        return outcome

    def _targets(self, fault: Any, leader: str | None) -> tuple[str, ...]:
        return resolve_targets(fault.targets, self.nodes, leader, self.rng, members=self.members)

    def _dispatch(self, fault: Fault, leader: str | None) -> Outcome:
        if isinstance(fault, Partition | Heal | Loss | HealLoss | Latency | HealLatency):
            if self.net is None:
                return Outcome(error="this platform cannot fault the network")
            net = self.net
            if isinstance(fault, Partition):
                return net.partition(grudges.validate(resolve_partition(fault, self.nodes, leader), self.nodes),
                                     fault.kind)
            if isinstance(fault, Heal):
                return net.heal()
            if isinstance(fault, Loss):
                return net.loss(self._targets(fault, leader), fault.probability)
            if isinstance(fault, HealLoss):
                return net.heal_loss()
            if isinstance(fault, Latency):
                return net.latency(self._targets(fault, leader), fault.delay_ms, fault.jitter_ms)
            return net.heal_latency()
        if isinstance(fault, ClockBump | ClockStrobe | ClockReset):
            if self.clocks is None:
                return Outcome(error=NO_CLOCKS)
            if isinstance(fault, ClockBump):
                return self.clocks.bump(resolve_deltas(fault.deltas, self.nodes, leader))
            if isinstance(fault, ClockStrobe):
                return self.clocks.strobe(self._targets(fault, leader), fault.delta, fault.period, fault.duration)
            return self.clocks.reset(self._targets(fault, leader))
        if isinstance(fault, Kill | Start | Pause | Resume):
            if self.processes is None:
                return Outcome(error=NO_PROCESSES)
            action = {Kill: self.processes.kill, Start: self.processes.start, Pause: self.processes.pause,
                      Resume: self.processes.resume}[type(fault)]
            return action(self._targets(fault, leader))
        action = getattr(fault, "action", None)
        if callable(action):  # a registered fault (nemesis.faults.FAULT_TYPES): its verb and its values
            if self.processes is None:
                return Outcome(error=NO_PROCESSES)
            act = getattr(self.processes, "act", None)
            todo: Action = action()
            if not callable(act):
                return Outcome(error=f"this platform's processes cannot {todo.verb} (no act())")
            targets = self._targets(fault, leader) if hasattr(fault, "targets") else self.nodes
            return act(todo, targets)
        raise ValueError(f"no platform applies {fault!r}")

    # -- what is in effect ----------------------------------------------------------------------------

    def _track(self, fault: Fault, outcome: Outcome) -> None:
        applied = outcome.applied
        touched = outcome.value is not None  # some of it may be in effect: even a partial fault is undone
        if isinstance(fault, Partition) and touched:
            self.partitioned = describe(fault)
        elif isinstance(fault, Heal) and applied:
            self.partitioned = None
        elif isinstance(fault, Loss) and touched:
            self.loss = describe(fault)
        elif isinstance(fault, HealLoss) and applied:
            self.loss = None
        elif isinstance(fault, Latency):
            self.latency = describe(fault) if applied else self.latency
        elif isinstance(fault, HealLatency) and applied:
            self.latency = None
        elif isinstance(fault, ClockBump | ClockStrobe) and touched:
            self.clock = describe(fault)
        elif isinstance(fault, ClockReset) and applied and fault.targets == "all":
            self.clock = None
        elif isinstance(fault, Kill | Start | Pause | Resume):
            value = outcome.value if isinstance(outcome.value, Mapping) else {}
            done = list(value.get("nodes") or ())
            if isinstance(fault, Start | Resume):
                done += list(value.get("unchanged") or ())  # already running, or not paused
            self.settle(fault, done)

    def settle(self, fault: Kill | Start | Pause | Resume, nodes: Iterable[str]) -> None:
        """Record that ``nodes`` are now as ``fault`` wants them. A killed node is no longer paused (a
        restart starts it unpaused)."""
        nodes = tuple(nodes)
        if isinstance(fault, Kill):
            self.killed.update(nodes)
            self.paused.difference_update(nodes)
        elif isinstance(fault, Start):
            self.killed.difference_update(nodes)
        elif isinstance(fault, Pause):
            self.paused.update(nodes)
        else:
            self.paused.difference_update(nodes)

    def recovery_faults(self) -> list[Fault]:
        """What is still in effect, undone in the order of ``nemesis.generator.FINAL_HEAL_ORDER``: the
        network first, then processes, then clocks."""
        faults: list[Fault] = []
        if self.partitioned:
            faults.append(Heal())
        if self.loss:
            faults.append(HealLoss())
        if self.latency:
            faults.append(HealLatency())
        if self.paused:
            faults.append(Resume(self._in_order(self.paused)))
        if self.killed:
            faults.append(Start(self._in_order(self.killed)))
        if self.clock:
            faults.append(ClockReset("all"))
        return faults

    def active(self) -> list[str]:
        """Short descriptions of the faults in effect, for the live view."""
        shown = [d for d in (self.partitioned, self.loss, self.latency, self.clock) if d]
        if self.paused:
            shown.append("paused " + ",".join(self._in_order(self.paused)))
        if self.killed:
            shown.append("killed " + ",".join(self._in_order(self.killed)))
        return shown

    def _in_order(self, nodes: set[str]) -> tuple[str, ...]:
        return tuple(n for n in self.nodes if n in nodes)
