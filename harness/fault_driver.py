"""The nemesis driver of real runs: applies ``nemesis.faults`` to deployed nodes, for the interpreter.

Process faults (kill, start, pause, resume) go through the DB adapter, which knows how to start its
system and which process is the node (its ``Process`` and ``Pause`` capabilities); their targets are the
DB's fault targets (``harness.db.fault_targets``: the data nodes, and the fluvio controller ``sc``, whose
host has the same name); network and clock
faults (partition, heal, loss, latency, clock) go through ``nemesis.shell.ShellNemesis`` over each node's
Remote. Targets that the schedule left symbolic (``leader``, partitions aimed at the leader) are resolved
when the fault is applied, from the interpreter's latest status observations.

Every fault ends in a :class:`~harness.interpreter.FaultOutcome`: ``value`` is what was actually applied,
``error`` names the nodes where it was not. The driver remembers what is still in effect, so the final
phase can undo exactly that (:meth:`ClusterNemesis.recovery_faults`) and the live view can show it.
Remote calls block, so they run in worker threads; one fault is applied at a time (the nemesis is one
process).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from harness.db import Deployment, fault_targets
from harness.faults_in_effect import FaultsInEffect
from harness.interpreter import ClusterView, FaultOutcome
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
    Resume,
    Start,
    UnresolvableTarget,
    describe,
    resolve_targets,
)
from nemesis.faults import Pause as PauseFault
from nemesis.remote import Remote
from nemesis.shell import FakeTime, ShellNemesis, teardown

log = logging.getLogger(__name__)

PROCESS_FAULTS = (Kill, Start, PauseFault, Resume)


class ClusterNemesis(FaultsInEffect):
    """Implements ``harness.interpreter.NemesisDriver`` with a DB adapter and the shell nemesis."""

    def __init__(
        self,
        db: Any,
        deployment: Deployment,
        remotes: Mapping[str, Remote],
        shell: ShellNemesis,
    ) -> None:
        self.db = db
        self.deployment = deployment
        self.remotes = dict(remotes)
        # The processes faults may hit: the data nodes, and what the DB runs "killable and partitionable
        # like a node" (the fluvio controller). "leader" still resolves among the polled data nodes only.
        self.nodes = fault_targets(db, deployment.nodes)
        self.shell = shell
        self.partitioned: str | None = None
        self.loss: str | None = None
        self.latency: str | None = None
        self.clock: str | None = None
        self.killed: set[str] = set()
        self.paused: set[str] = set()

    def describe(self, fault: Fault) -> tuple[str, Any]:
        return fault.f, fault.value()

    async def apply(self, fault: Fault, view: ClusterView) -> FaultOutcome:
        leader, _term = view.leader()
        if isinstance(fault, PROCESS_FAULTS):
            try:
                targets = resolve_targets(fault.targets, self.nodes, leader)
            except UnresolvableTarget as exc:
                return FaultOutcome(error=str(exc))
            return await self._process_fault(fault, targets)
        outcome = await asyncio.to_thread(self.shell.apply, fault, leader)
        self._track_shell(fault, outcome.applied)
        return FaultOutcome(value=outcome.value, error=outcome.error)

    async def _process_fault(self, fault: Fault, targets: tuple[str, ...]) -> FaultOutcome:
        action: Callable[[Deployment, str, Remote], Any]
        if isinstance(fault, Kill):
            action = self.db.kill
        elif isinstance(fault, Start):
            action = self.db.start
        elif isinstance(fault, PauseFault):
            action = self.db.pause
        else:
            action = self._resume_if_running

        def one(node: str) -> str | None:
            action(self.deployment, node, self.remotes[node])
            return None

        results = await asyncio.gather(
            *(asyncio.to_thread(one, node) for node in targets), return_exceptions=True
        )
        done: list[str] = []
        errors: dict[str, str] = {}
        for node, result in zip(targets, results, strict=True):
            if isinstance(result, BaseException):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                message = str(result)
                errors[node] = message.removeprefix(f"{node}: ")
            else:
                done.append(node)
        self.settle_process_fault(fault, done)  # a node where the fault failed is as it was
        error = "; ".join(f"{node}: {why}" for node, why in errors.items()) or None
        return FaultOutcome(value={"nodes": done}, error=error)

    def _resume_if_running(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """SIGCONT a node that runs; a node that is down has nothing to resume."""
        if self.db.is_running(deployment, node, remote):
            self.db.resume(deployment, node, remote)

    def _track_shell(self, fault: Fault, applied: bool) -> None:
        if isinstance(fault, Partition):
            self.partitioned = describe(fault)  # even a partial partition must be healed
        elif isinstance(fault, Heal) and applied:
            self.partitioned = None
        elif isinstance(fault, Loss):
            self.loss = describe(fault)
        elif isinstance(fault, HealLoss) and applied:
            self.loss = None
        elif isinstance(fault, Latency):
            self.latency = describe(fault) if applied else self.latency
        elif isinstance(fault, HealLatency) and applied:
            self.latency = None
        elif isinstance(fault, ClockBump | ClockStrobe):
            self.clock = describe(fault)
        elif isinstance(fault, ClockReset) and applied and fault.targets == "all":
            self.clock = None

    def clock_shown(self) -> str | None:
        return self.clock


def heal_everything(remotes: Mapping[str, Remote], faketime: FakeTime | None) -> None:
    """Teardown's first step: flush and remove the nemesis' iptables chains, remove netem, stop clock
    strobes and reset clocks, on every node (resuming paused processes is the DB adapter's next step).
    Raises after all nodes were tried if any failed."""
    outcomes = teardown(dict(remotes), pid_file=None, faketime=faketime)
    failures = {node: outcome.error for node, outcome in outcomes.items() if outcome.error}
    for node, outcome in outcomes.items():
        log.info("healed %s: %s", node, outcome.value)
    if failures:
        raise RuntimeError("; ".join(f"{node}: {error}" for node, error in failures.items()))
