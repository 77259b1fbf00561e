"""Faults on real platforms: process faults through the DB adapter (one thread per target), each target's
failure named, and a process that is down left alone by resume."""

from __future__ import annotations

from typing import Any

from harness.db import Deployment
from harness.fault_driver import AdapterProcesses, real_fault_driver
from nemesis.faults import Kill, Pause, Resume
from nemesis.shell import ShellClocks, ShellNet

NODES = ("n1", "n2", "n3")
DEPLOYMENT = Deployment(NODES, {n: n for n in NODES}, {n: n for n in NODES})


class FakeDB:
    """Processes that run, die and stop; ``pause`` of a dead node raises as the real adapter does."""

    name = "fake"

    def __init__(self) -> None:
        self.running = set(NODES)
        self.calls: list[tuple[str, str]] = []

    def setup(self, deployment: Deployment, node: str, remote: Any) -> None: ...

    def teardown(self, deployment: Deployment, node: str, remote: Any) -> None: ...

    def kill(self, deployment: Deployment, node: str, remote: Any) -> None:
        self.calls.append(("kill", node))
        self.running.discard(node)

    def start(self, deployment: Deployment, node: str, remote: Any) -> None:
        self.calls.append(("start", node))
        self.running.add(node)

    def pause(self, deployment: Deployment, node: str, remote: Any) -> None:
        if node not in self.running:
            raise RuntimeError(f"{node}: the node process is not running, so it cannot take SIGSTOP")
        self.calls.append(("pause", node))

    def resume(self, deployment: Deployment, node: str, remote: Any) -> None:
        self.calls.append(("resume", node))

    def is_running(self, deployment: Deployment, node: str, remote: Any) -> bool:
        return node in self.running


def test_process_faults_go_through_the_adapter_and_name_each_failure() -> None:
    db = FakeDB()
    processes = AdapterProcesses(db, DEPLOYMENT, {n: object() for n in NODES})
    assert processes.kill(("n3",)).value == {"nodes": ["n3"]}
    paused = processes.pause(("n1", "n3"))
    assert paused.value == {"nodes": ["n1"]}
    assert paused.error == "n3: the node process is not running, so it cannot take SIGSTOP"
    resumed = processes.resume(("n1", "n2", "n3"))
    assert resumed.applied and resumed.value == {"nodes": ["n1", "n2", "n3"]}
    assert sorted(c for c in db.calls if c[0] == "resume") == [("resume", "n1"), ("resume", "n2")]


def test_the_real_driver_uses_the_shell_for_network_and_clocks_and_the_adapter_for_processes() -> None:
    from nemesis.shell import FakeTime

    db = FakeDB()
    remotes = {n: object() for n in NODES}
    driver = real_fault_driver(db, DEPLOYMENT, remotes, FakeTime(), None)  # type: ignore[arg-type]
    assert isinstance(driver.net, ShellNet) and isinstance(driver.clocks, ShellClocks)
    assert isinstance(driver.processes, AdapterProcesses) and driver.nodes == NODES
    assert real_fault_driver(db, DEPLOYMENT, remotes, None, None).clocks is None  # type: ignore[arg-type]
    driver.apply(Kill("leader"), "n2")
    driver.apply(Pause(("n1",)), None)
    driver.apply(Resume(("n1",)), None)
    assert db.calls == [("kill", "n2"), ("pause", "n1"), ("resume", "n1")]
    assert driver.killed == {"n2"} and driver.paused == set()


def test_followers_are_every_target_but_the_leader_known_when_applied() -> None:
    db = FakeDB()
    driver = real_fault_driver(db, DEPLOYMENT, {n: object() for n in NODES}, None, None)  # type: ignore[arg-type]
    unresolved = driver.apply(Pause("followers"), None)
    assert unresolved.error == "no leader is known, so there is no leader to target"
    paused = driver.apply(Pause("followers"), "n2")
    assert paused.applied and paused.value == {"nodes": ["n1", "n3"]}
    assert db.calls == [("pause", "n1"), ("pause", "n3")] and driver.paused == {"n1", "n3"}
