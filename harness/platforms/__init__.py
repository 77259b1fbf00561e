"""Platforms: where a run's nodes live, and what the one interpreter drives there.

Three platforms run the same test (``harness.spec.TestSpec.platform``):

* ``docker`` (:mod:`harness.platforms.docker`, deployed by :mod:`harness.platforms.real`): local
  containers on an internal network, reached through ``nemesis.remote.Remote``;
* ``ssh`` (:mod:`harness.platforms.ssh`, deployed by :mod:`harness.platforms.real`): real machines;
* ``sim`` (:mod:`harness.platforms.sim`): the DB's system in the deterministic simulator
  (``harness.db.Simulation``), in virtual time.

Each deploys the DB and hands ``harness.run.run`` a :class:`Session`: how to open a client, poll a node's
status, apply faults (one ``nemesis.driver.FaultDriver`` over the platform's network, clocks and
processes) and in which sense of time to run the interpreter. The interpreter's rules, the fault
dispatch, the clients' rules and the judge are the same on all three.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from harness import store
from harness.interpreter import CatchUpProbe, ClientFactory, FaultRunner, StatusProbe
from nemesis.driver import FaultDriver
from nemesis.faults import Outcome


async def apply_directly(apply: Callable[[], Outcome]) -> Outcome:
    """A ``FaultRunner`` for platforms whose faults do not block (the simulator)."""
    return apply()


@dataclass
class Session:
    """A deployed system, as the interpreter drives it.

    ``execute`` runs the interpreter's coroutine to its end in the platform's time (``asyncio.run``, or
    the simulator's virtual-time loop); ``clock_ns`` is that time for the history; ``wall_at(ns)`` the
    epoch seconds at a value of it (for the report's journal axis). ``finish`` runs once the interpreter
    is done (the simulator writes its journals there); ``results(history_start_ns)`` adds to
    ``results.json`` (a ``duration_s`` there replaces the wall-clock one).
    """

    open_client: ClientFactory
    status: StatusProbe | None
    caught_up: CatchUpProbe | None
    nemesis: FaultDriver | None
    run_fault: FaultRunner
    execute: Callable[[Coroutine[Any, Any, Any]], Any]
    clock_ns: Callable[[], int]
    wall_at: Callable[[int], float]
    record: dict[str, Any] = field(default_factory=dict)
    """Fields for ``test.json`` (``platform``, and the simulator's ``sim``)."""
    finish: Callable[[], None] = lambda: None
    results: Callable[[int], dict[str, Any]] = lambda start_ns: {}
    bound: float | None = None
    """Seconds (in the platform's time) after which a run that has not ended is stalled."""


@dataclass
class Launch:
    """What a platform's ``deploy`` works with: the run's ``ExitStack`` (teardown steps go on it, in
    reverse order of execution), its directory, the list teardown failures are recorded in, the timings
    and the ``test.json`` document it may add to, and when the run started (monotonic seconds)."""

    stack: contextlib.ExitStack
    run_dir: store.RunDir
    teardown_errors: list[str]
    timings: dict[str, Any]
    test_doc: dict[str, Any]
    started: float
    shield: Callable[[], None] = lambda: None
    """Called as teardown begins: from then on no signal interrupts it (``harness.signals``)."""
