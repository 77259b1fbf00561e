"""The real runs' nemesis driver: process faults through the DB adapter, the rest through the shell
nemesis, leader targets resolved from status, and the recovery faults that undo what is in effect."""

from __future__ import annotations

import asyncio
from typing import Any

from harness.db import Deployment
from harness.fault_driver import ClusterNemesis
from harness.interpreter import ClusterView
from nemesis.faults import (
    ClockBump,
    ClockReset,
    Heal,
    HealLoss,
    Kill,
    Loss,
    Partition,
    Pause,
    Resume,
    Start,
)
from nemesis.shell import Outcome

NODES = ("n1", "n2", "n3")
DEPLOYMENT = Deployment(NODES, {n: n for n in NODES}, {n: n for n in NODES})


class FakeDB:
    """Processes that run, die and stop; ``pause`` of a dead node raises as the real adapter does."""

    def __init__(self) -> None:
        self.running = set(NODES)
        self.stopped: set[str] = set()
        self.calls: list[tuple[str, str]] = []

    def kill(self, deployment: Deployment, node: str, remote: Any) -> None:
        self.calls.append(("kill", node))
        self.running.discard(node)
        self.stopped.discard(node)

    def start(self, deployment: Deployment, node: str, remote: Any) -> None:
        self.calls.append(("start", node))
        self.running.add(node)

    def pause(self, deployment: Deployment, node: str, remote: Any) -> None:
        if node not in self.running:
            raise RuntimeError(f"{node}: the node process is not running, so it cannot take SIGSTOP")
        self.calls.append(("pause", node))
        self.stopped.add(node)

    def resume(self, deployment: Deployment, node: str, remote: Any) -> None:
        self.calls.append(("resume", node))
        self.stopped.discard(node)

    def is_running(self, deployment: Deployment, node: str, remote: Any) -> bool:
        return node in self.running


class FakeShell:
    def __init__(self) -> None:
        self.applied: list[tuple[Any, str | None]] = []
        self.failing: set[str] = {"loss"}  # the f of faults that fail on n1

    def apply(self, fault: Any, leader: str | None = None) -> Outcome:
        self.applied.append((fault, leader))
        if fault.f in self.failing:
            return Outcome({"nodes": []}, "n1: iptables failed")
        return Outcome({"done": fault.f})


def _driver() -> tuple[ClusterNemesis, FakeDB, FakeShell, ClusterView]:
    db, shell = FakeDB(), FakeShell()
    view = ClusterView(NODES, lambda: 0.0)
    driver = ClusterNemesis(db, DEPLOYMENT, {n: object() for n in NODES}, shell)  # type: ignore[arg-type]
    return driver, db, shell, view


def test_process_faults_go_through_the_db_and_leader_targets_are_resolved_at_run_time() -> None:
    driver, db, shell, view = _driver()
    unresolved = asyncio.run(driver.apply(Kill("leader"), view))
    assert unresolved.error == "no leader is known, so there is no leader to target"
    view.observe("n2", {"role": "leader", "term": 3, "leader": "n2"})
    killed = asyncio.run(driver.apply(Kill("leader"), view))
    assert killed.applied and killed.value == {"nodes": ["n2"]}
    assert db.calls == [("kill", "n2")] and shell.applied == []
    assert driver.describe(Kill("leader")) == ("kill", {"targets": "leader"})


def test_a_fault_applied_on_some_nodes_says_which_and_why_not_the_others() -> None:
    driver, db, _, view = _driver()
    asyncio.run(driver.apply(Kill(("n3",)), view))
    paused = asyncio.run(driver.apply(Pause(("n1", "n3")), view))
    assert paused.value == {"nodes": ["n1"]}
    assert paused.error == "n3: the node process is not running, so it cannot take SIGSTOP"
    assert driver.paused == {"n1"} and driver.killed == {"n3"}
    assert driver.active() == ["paused n1", "killed n3"]


def test_recovery_undoes_exactly_what_is_in_effect_network_first() -> None:
    driver, db, shell, view = _driver()
    assert driver.recovery_faults() == []
    asyncio.run(driver.apply(Partition("isolate", grudge={"n1": {"n2", "n3"}}), view))
    asyncio.run(driver.apply(Pause(("n2",)), view))
    asyncio.run(driver.apply(Kill(("n3",)), view))
    asyncio.run(driver.apply(ClockBump({"n1": 30.0}), view))
    lossy = asyncio.run(driver.apply(Loss(("n1",), 0.2), view))
    assert not lossy.applied  # still counted as in effect: a partial loss must be healed too
    assert driver.recovery_faults() == [Heal(), HealLoss(), Resume(("n2",)), Start(("n3",)), ClockReset("all")]
    shell.failing = {"heal"}
    for fault in driver.recovery_faults():
        asyncio.run(driver.apply(fault, view))
    assert ("resume", "n2") in db.calls and ("start", "n3") in db.calls
    assert driver.recovery_faults() == [Heal()]  # the heal failed: the partition is still in effect
    assert driver.active() == ["partition isolate (2 links cut)"]
    shell.failing = set()
    asyncio.run(driver.apply(Heal(), view))
    assert driver.recovery_faults() == [] and driver.active() == []


def test_resume_leaves_dead_nodes_alone() -> None:
    driver, db, _, view = _driver()
    asyncio.run(driver.apply(Kill(("n1",)), view))
    resumed = asyncio.run(driver.apply(Resume("all"), view))
    assert resumed.applied and resumed.value == {"nodes": ["n1", "n2", "n3"]}
    assert [c for c in db.calls if c[0] == "resume"] == [("resume", "n2"), ("resume", "n3")]
