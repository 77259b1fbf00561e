"""Leader-targeted faults and recovery in a system with a leader per group (a storage shard, a queue), in
the interpreter with the real fault driver, a fake multi-group system and a virtual-time loop.

The fake reports what CONTRACTS/docs/db-adapter.md ask of a sharded system: the top-level fields for the
cluster-level leader and one ``groups`` entry per shard. The node that leads the most shards is not the
cluster-level leader, so the default selector's choice is visible.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from typing import Any

from checkers.history import load_history
from harness.history import HistoryWriter
from harness.interpreter import Interpreter, InterpreterConfig
from nemesis.driver import FaultDriver
from nemesis.faults import Kill, Outcome, Partition, Pause, Resume, Start
from nemesis.generator import ScheduledFault
from tests.harness.test_interpreter import SECOND, FakeWorkload, VirtualTimeLoop

NODES = ("n1", "n2", "n3", "n4")
SHARDS = ("shard-0", "shard-1", "shard-2", "shard-3")


class ShardedSystem:
    """n1 leads the cluster; n2 is primary of shards 0-2, n3 of shard 3. A paused or killed node does not
    answer; nobody else takes its shards over (so its groups have no fresh leader)."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self.loop = loop
        self.primary = {"shard-0": "n2", "shard-1": "n2", "shard-2": "n2", "shard-3": "n3"}
        self.down: set[str] = set()
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.state: dict[str, Any] = {}

    async def status(self, node: str, timeout: float) -> Mapping[str, Any]:
        if node in self.down:
            await asyncio.sleep(3600)
        groups = [
            {"group": shard, "role": "leader" if self.primary[shard] == node else "follower", "term": 1,
             "leader": self.primary[shard] if self.primary[shard] not in self.down else None,
             "commit_lsn": [1, 0], "last_lsn": [1, 0], "extra": "dropped"}
            for shard in SHARDS
        ]
        return {"node": node, "role": "leader" if node == "n1" else "follower", "term": 1, "leader": "n1",
                "commit_lsn": None, "last_lsn": None, "groups": groups}

    # nemesis.driver.Processes
    def _act(self, action: str, targets: Sequence[str]) -> Outcome:
        self.calls.append((action, tuple(targets)))
        if action in ("kill", "pause"):
            self.down.update(targets)
        else:
            self.down.difference_update(targets)
        return Outcome(value={"nodes": list(targets)})

    def kill(self, targets: Sequence[str]) -> Outcome:
        return self._act("kill", targets)

    def start(self, targets: Sequence[str]) -> Outcome:
        return self._act("start", targets)

    def pause(self, targets: Sequence[str]) -> Outcome:
        return self._act("pause", targets)

    def resume(self, targets: Sequence[str]) -> Outcome:
        return self._act("resume", targets)


class RecordingNet:
    def __init__(self) -> None:
        self.grudges: list[dict] = []

    def partition(self, grudge: Mapping[str, frozenset[str]], kind: str) -> Outcome:
        self.grudges.append(dict(grudge))
        return Outcome(value={"kind": kind})

    def heal(self) -> Outcome:
        return Outcome(value=None)


class Client:
    def __init__(self, system: ShardedSystem) -> None:
        self.system = system

    async def invoke(self, op: Any) -> Mapping[str, Any]:
        await asyncio.sleep(0.05)
        if op.f == "write":
            self.system.state[op.key] = op.value
            return {"type": "ok", "node": "n2", "lsn": [1, 1], "group": "shard-1"}
        return {"type": "ok", "value": self.system.state.get(op.key), "node": op.node or "n2"}

    async def close(self) -> None:
        pass


def _run(tmp_path, schedule, *, leader_group: str = "most", time_limit: float = 6.0, prepare=None,
         recovery_timeout: float = 10.0):
    loop = VirtualTimeLoop()
    try:
        system = ShardedSystem(loop)
        if prepare:
            prepare(system)
        net = RecordingNet()
        driver = FaultDriver(NODES, net=net, clocks=None, processes=system)  # type: ignore[arg-type]
        path = tmp_path / "history.jsonl"

        async def open_client(process: int) -> Client:
            return Client(system)

        async def directly(apply):
            return apply()

        async def main():
            with HistoryWriter(path, lambda: int(loop.time() * SECOND)) as history:
                interpreter = Interpreter(
                    history, nodes=NODES, workload=FakeWorkload(think=0.2), open_client=open_client,
                    config=InterpreterConfig(concurrency=2, time_limit=time_limit, status_timeout=0.5,
                                             recovery_timeout=recovery_timeout, leader_group=leader_group),
                    nemesis=driver, schedule=schedule, status=system.status, run_fault=directly,
                    rng=random.Random(5),
                )
                return await interpreter.run(), interpreter

        stats, interpreter = loop.run_until_complete(main())
    finally:
        loop.close()
    return load_history(path), stats, system, net, interpreter


def _faults(history) -> list[tuple[str, str, Any, str | None, str | None]]:
    return [(op.f, op.type, op.output, op.error, history.events[op.complete_index].raw.get("group"))
            for op in history.nemesis]


def test_by_default_leader_faults_hit_the_node_leading_the_most_groups(tmp_path) -> None:
    schedule = [ScheduledFault(2.0, "kill", Kill("leader")), ScheduledFault(6.0, "kill", Start("all"))]
    history, stats, system, _, _ = _run(tmp_path, schedule)
    assert system.calls[0] == ("kill", ("n2",))  # primary of three shards, not the cluster leader n1
    assert _faults(history)[0] == ("kill", "ok", {"nodes": ["n2"]}, None, None)
    # The status observations keep their groups (the contract's fields only), for the checkers.
    status = next(op for op in history.ops if op.f == "status" and op.type == "ok")
    assert [entry["group"] for entry in status.output["groups"]] == list(SHARDS)
    assert set(status.output["groups"][0]) == {"group", "role", "term", "leader", "commit_lsn", "last_lsn"}
    # Client completions keep the group that served them.
    write = next(op for op in history.ops if op.f == "write" and op.type == "ok")
    assert write.group == "shard-1"


def test_a_named_group_and_a_leader_that_went_quiet(tmp_path) -> None:
    schedule = [
        ScheduledFault(1.5, "pause", Pause("leader")),  # shard-3's primary n3: its status stops
        ScheduledFault(5.0, "partition", Partition("isolate", target="leader")),  # n3 stale by now: via n3
        ScheduledFault(6.0, "pause", Resume("all")),
    ]
    history, stats, system, net, _ = _run(tmp_path, schedule, leader_group="shard-3")
    assert system.calls[0] == ("pause", ("n3",))
    assert net.grudges and all("n3" in dropped for node, dropped in net.grudges[0].items() if node != "n3")
    faults = _faults(history)
    assert faults[0][4] == "shard-3" and faults[1][:2] == ("partition", "ok") and faults[1][4] == "shard-3"
    assert stats.recovered is True


def test_a_group_no_status_reported_is_skipped_and_says_why(tmp_path) -> None:
    schedule = [ScheduledFault(2.0, "kill", Kill("leader")), ScheduledFault(6.0, "kill", Start("all"))]
    history, stats, system, _, _ = _run(tmp_path, schedule, leader_group="shard-9")
    assert ("kill", ("n2",)) not in system.calls and not any(c[0] == "kill" for c in system.calls)
    (f, kind, value, error, group) = _faults(history)[0]
    assert (f, kind, group) == ("kill", "info", "shard-9")
    assert error == "no status has reported group 'shard-9', so it has no leader to target"
    assert stats.fault_errors == [f"kill: {error}"]


def test_random_draws_the_group_from_the_run_rng(tmp_path) -> None:
    schedule = [ScheduledFault(1.0 + i, "pause", Pause("leader")) for i in range(4)]
    schedule.append(ScheduledFault(6.0, "pause", Resume("all")))
    history, _, system, _, _ = _run(tmp_path, schedule, leader_group="random")
    groups = [fault[4] for fault in _faults(history)[:4]]
    expected = random.Random(5)
    known = [None, *SHARDS]
    assert groups == [expected.choice(known) for _ in range(4)]
    leaders = {None: "n1", "shard-0": "n2", "shard-1": "n2", "shard-2": "n2", "shard-3": "n3"}
    assert [c for c in system.calls if c[0] == "pause"] == [("pause", (leaders[g],)) for g in groups]


def test_recovery_waits_until_every_group_has_a_leader(tmp_path) -> None:
    """After the final heal shard-3 has no primary for 4 s more: the final reads wait for it."""
    back = {}

    def prepare(system: ShardedSystem) -> None:
        original = system.status

        async def status(node: str, timeout: float) -> Mapping[str, Any]:
            out = dict(await original(node, timeout))
            if system.loop.now < back.setdefault("at", system.loop.now + 10.0):
                out["groups"] = [dict(e, role="follower", leader=None) if e["group"] == "shard-3" else e
                                 for e in out["groups"]]
            return out

        system.status = status  # type: ignore[method-assign]

    history, stats, _, _, interpreter = _run(tmp_path, [], time_limit=3.0, prepare=prepare)
    assert stats.recovered is True
    start = back["at"] - 10.0
    final = [op for op in history.ops if op.f == "read" and op.node is not None and op.call >= 3 * SECOND]
    assert final and min(op.call for op in final) >= (back["at"] - start) * SECOND
    # Without shard-3 ever recovering, the wait ends at the recovery timeout, not recovered.
    back["at"] = float("inf")
    (tmp_path / "again").mkdir()
    _, stats, _, _, _ = _run(tmp_path / "again", [], time_limit=3.0, prepare=prepare, recovery_timeout=4.0)
    assert stats.recovered is False
