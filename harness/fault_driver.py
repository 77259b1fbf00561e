"""Faults on real platforms: the DB adapter as ``nemesis.driver.Processes``, the driver for a deployment,
and the guaranteed heal of teardown.

The one fault driver (``nemesis.driver.FaultDriver``) dispatches every fault; on Docker and SSH hosts
its network and clocks are the nodes' shells (``nemesis.shell.ShellNet``, ``ShellClocks``: iptables,
libfaketime) and its processes are the system's own, which only the DB adapter knows how to start and
signal (:class:`AdapterProcesses`: its ``Process`` and ``Pause`` capabilities). The simulator builds the
same driver over its simulated network, clocks and processes.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.db import Deployment, Pause, Process, fault_targets, has_capability, reply_ports
from harness.platforms.threads import run_in_threads
from nemesis.driver import Action, FaultDriver, ProcessActions
from nemesis.faults import Outcome
from nemesis.remote import Remote
from nemesis.shell import FakeTime, ShellClocks, ShellNet, teardown

log = logging.getLogger(__name__)


class AdapterProcesses(ProcessActions):
    """``nemesis.driver.Processes`` through the DB adapter, one thread per target. A target where the
    adapter raised is named in the outcome's ``error``; the others are ``nodes``."""

    def __init__(self, db: Any, deployment: Deployment, remotes: Mapping[str, Remote]) -> None:
        self.db = db
        self.deployment = deployment
        self.remotes = dict(remotes)

    def act(self, action: Action, targets: Sequence[str]) -> Outcome:
        """``action.verb`` on each target through the adapter's method of that name (``-`` read as ``_``:
        ``truncate-tail`` is ``truncate_tail``), called with the action's argument as keywords."""
        if action.verb == "resume":
            return self._each(targets, self._resume_if_running)
        method = getattr(self.db, action.verb.replace("-", "_"), None)
        if not callable(method):
            return Outcome(error=f"the DB adapter has no {action.verb.replace('-', '_')}() to {action.verb} with")
        if not action.argument:
            return self._each(targets, method)
        return self._each(targets, lambda deployment, node, remote: method(deployment, node, remote,
                                                                             **action.argument))

    def _resume_if_running(self, deployment: Deployment, node: str, remote: Remote) -> None:
        """SIGCONT a process that runs; one that is down has nothing to resume."""
        if not has_capability(self.db, Process) or self.db.is_running(deployment, node, remote):
            self.db.resume(deployment, node, remote)

    def _each(self, targets: Sequence[str], action: Callable[[Deployment, str, Remote], Any]) -> Outcome:
        targets = tuple(targets)
        futures = run_in_threads({node: functools.partial(action, self.deployment, node, self.remotes[node])
                                  for node in targets}, name="fault")
        done: list[str] = []
        errors: dict[str, str] = {}
        for node, future in futures.items():
            exc = future.exception()
            if exc is None:
                done.append(node)
            else:
                errors[node] = str(exc).removeprefix(f"{node}: ")
        error = "; ".join(f"{node}: {why}" for node, why in errors.items()) or None
        return Outcome(value={"nodes": done}, error=error)


def real_fault_driver(
    db: Any,
    deployment: Deployment,
    remotes: Mapping[str, Remote],
    faketime: FakeTime | None,
    rng: Any,
) -> FaultDriver:
    """The fault driver of a deployment on real hosts (module docstring). Its faults reach the DB's fault
    targets: the data nodes, and what the DB runs "killable and partitionable like a node"."""
    acts = has_capability(db, Process) or has_capability(db, Pause)
    processes = AdapterProcesses(db, deployment, remotes) if acts else None
    return FaultDriver(
        fault_targets(db, deployment.nodes),
        net=ShellNet(remotes, deployment.peer_hosts, reply_ports=reply_ports(db, deployment)),
        clocks=ShellClocks(remotes, faketime) if faketime is not None else None,
        processes=processes,
        rng=rng,
        members=deployment.nodes,
    )


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
