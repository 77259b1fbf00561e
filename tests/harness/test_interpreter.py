"""The interpreter, in-process: a fake DB, fake clients and a virtual-time event loop (no sleeping).

The loop's clock jumps straight to the next timer whenever nothing is ready, so a 10-second chaos phase
with 1-second status polls and 2-second timeouts runs in milliseconds and its times are exact.
"""

from __future__ import annotations

import asyncio
import itertools
import selectors
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from checkers.history import load_history
from harness.db import StatusError
from harness.history import HistoryWriter
from harness.interpreter import ClusterView, Completion, FaultOutcome, Interpreter, InterpreterConfig
from workloads.ops import FinalOps, Op

NODES = ("n1", "n2", "n3")
TOLERANCE = 1_000  # ns: the virtual clock is a float of seconds
KEYS = ("k0", "k1")
SECOND = 1_000_000_000


@dataclass(frozen=True)
class ScheduledFault:
    at: float
    fault: Any


class _AutojumpSelector(selectors.BaseSelector):
    """A real selector that, instead of blocking for ``timeout``, moves the loop's clock forward."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._real = selectors.DefaultSelector()
        self._loop = loop

    def register(self, fileobj, events, data=None):
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj):
        return self._real.unregister(fileobj)

    def modify(self, fileobj, events, data=None):
        return self._real.modify(fileobj, events, data)

    def get_map(self):
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout=None):
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            return self._real.select(None)
        self._loop.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.now = 1000.0
        super().__init__(_AutojumpSelector(self))

    def time(self) -> float:
        return self.now


class FakeWorkload:
    """Per-process streams of writes (unique values) and reads over two keys; the final phase reads
    every key the run used. ``think`` seconds before every operation."""

    def __init__(self, think: float = 0.0) -> None:
        self.think = think
        self.final_keys: list[list[str]] = []

    def stream(self, process: int):
        for n in itertools.count():
            key = KEYS[n % len(KEYS)]
            if n % 3 == 2:
                yield Op("read", key, think=self.think)
            else:
                yield Op("write", key, process * 1_000_000 + n, think=self.think)

    def final_ops(self, node: str, keys) -> FinalOps:
        self.final_keys.append(list(keys))
        for key in keys:
            completion = yield Op("read", key, node=node)
            assert isinstance(completion, Completion)


class FakeCluster:
    """The system under test: a register map, a leader, nodes that hang while 'paused'."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self.loop = loop
        self.state: dict[str, Any] = {}
        self.leader = "n1"
        self.term = 1
        self.paused: set[str] = set()
        self.hang_values: set[int] = set()  # writes of these values never answer
        self.fail_values: set[int] = set()  # writes of these values fail definitely
        self.closed_clients = 0
        self.opened: list[int] = []
        self.invoked: list[Op] = []

    async def status(self, node: str, timeout: float) -> Mapping[str, Any]:
        if node in self.paused:
            await asyncio.sleep(3600)
        if node == "n3" and self.loop.now - 1000.0 < 0.5:
            raise StatusError("connection refused", definite=True)
        role = "leader" if node == self.leader else "follower"
        return {"node": node, "role": role, "term": self.term, "leader": self.leader,
                "commit_lsn": [self.term, 1], "last_lsn": [self.term, 1], "extra": "dropped"}


class FakeClient:
    def __init__(self, cluster: FakeCluster, process: int) -> None:
        self.cluster = cluster
        self.process = process
        cluster.opened.append(process)

    async def invoke(self, op: Op) -> Mapping[str, Any]:
        self.cluster.invoked.append(op)
        await asyncio.sleep(0.01)
        node = op.node or self.cluster.leader
        if op.f == "write":
            if op.value in self.cluster.hang_values:
                await asyncio.sleep(3600)
            if op.value in self.cluster.fail_values:
                return {"type": "fail", "error": "not-leader", "node": node}
            self.cluster.state[op.key] = op.value
            return {"type": "ok", "node": node, "lsn": [self.cluster.term, 1]}
        return {"type": "ok", "value": self.cluster.state.get(op.key), "node": node}

    async def close(self) -> None:
        self.cluster.closed_clients += 1


class FakeNemesis:
    """Faults are dicts ``{"f": ..., "target": ...}``; "leader" resolves through the view."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.applied: list[tuple[str, Any]] = []
        self.partitioned = False

    def describe(self, fault: Any) -> tuple[str, Any]:
        return fault["f"], {"target": fault.get("target")}

    def apply(self, fault: Any, leader: str | None) -> FaultOutcome:
        f = fault["f"]
        target = fault.get("target")
        if target == "leader":
            target = leader
            if target is None:
                return FaultOutcome(error="no leader known")
        if f == "boom":
            raise RuntimeError("iptables: command not found")
        if f == "pause":
            self.cluster.paused.add(target)
        elif f == "resume":
            self.cluster.paused.discard(target)
        elif f == "partition":
            self.partitioned = True
        elif f == "heal":
            self.partitioned = False
        self.applied.append((f, target))
        return FaultOutcome(value={"node": target} if target else {"healed": True})

    def recovery_faults(self) -> list[Any]:
        faults = [{"f": "resume", "target": n} for n in sorted(self.cluster.paused)]
        if self.partitioned:
            faults.insert(0, {"f": "heal"})
        return faults

    def active(self) -> list[str]:
        return [f"paused {n}" for n in sorted(self.cluster.paused)] + (["partition"] if self.partitioned else [])


def _run(tmp_path, *, config: InterpreterConfig, schedule=(), prepare=None, with_nemesis=True, workload=None):
    loop = VirtualTimeLoop()
    try:
        cluster = FakeCluster(loop)
        if prepare:
            prepare(cluster)
        nemesis = FakeNemesis(cluster) if with_nemesis else None
        path = tmp_path / "history.jsonl"

        async def open_client(process: int) -> FakeClient:
            return FakeClient(cluster, process)

        async def slowly(apply):  # faults take time on real hosts: 0.1 s, and 3.1 s for one that fails
            await asyncio.sleep(0.1)
            try:
                return apply()
            except RuntimeError:
                await asyncio.sleep(3.0)
                raise

        async def main():
            with HistoryWriter(path, lambda: int(loop.time() * SECOND)) as history:
                interpreter = Interpreter(
                    history, nodes=NODES, workload=workload or FakeWorkload(), open_client=open_client,
                    config=config,
                    nemesis=nemesis, schedule=schedule, status=cluster.status, run_fault=slowly,
                )
                return await interpreter.run()

        stats = loop.run_until_complete(main())
    finally:
        loop.close()
    return load_history(path), stats, cluster, nemesis


def test_history_is_well_formed_and_clients_stop_at_the_time_limit(tmp_path) -> None:
    config = InterpreterConfig(concurrency=4, time_limit=5.0, op_timeout=2.0)
    history, stats, cluster, _ = _run(tmp_path, config=config)
    client_ops = [op for op in history.ops if op.f != "status"]
    chaos = [op for op in client_ops if op.call < 5 * SECOND]
    # 4 workers, 10 ms per operation, for 5 s.
    assert 1900 <= len(chaos) <= 2004
    assert all(op.type == "ok" for op in client_ops)
    assert {op.process for op in chaos} == {0, 1, 2, 3}
    assert stats.completed["ok"] == len(client_ops)
    assert stats.first_op_at == stats.started_at
    # No operation of the chaos phase is invoked after the time limit; only the final reads are.
    late = [op for op in client_ops if op.call >= 5 * SECOND]
    assert {(op.node, op.key) for op in late} == {(n, k) for n in NODES for k in KEYS}


def test_a_hung_call_ends_info_at_the_timeout_and_the_process_is_replaced(tmp_path) -> None:
    config = InterpreterConfig(concurrency=2, time_limit=3.0, op_timeout=2.0)

    def prepare(cluster: FakeCluster) -> None:
        cluster.hang_values = {4}  # process 0's fifth operation
        cluster.fail_values = {1_000_003}  # process 1's fourth

    history, stats, cluster, _ = _run(tmp_path, config=config, prepare=prepare)
    hung = [op for op in history.ops if op.f == "write" and op.value == 4]
    assert len(hung) == 1
    (op,) = hung
    assert op.type == "info" and op.error == "timeout after 2 s" and op.ret is None
    completion = history.events[op.complete_index]
    assert abs(completion.time - op.call - 2 * SECOND) < TOLERANCE
    # The retired process never invokes again; its worker continues under a fresh id, with a new client.
    assert not [o for o in history.ops if o.process == op.process and o.call > op.call]
    fresh = config.concurrency + len(NODES)
    assert fresh in cluster.opened
    assert any(o.process == fresh and o.f != "status" for o in history.ops)
    failed = [o for o in history.ops if o.value == 1_000_003]
    assert [o.type for o in failed] == ["fail"]
    assert history.events[failed[0].complete_index].raw["error"] == "not-leader"
    assert stats.completed["info"] == 1 and stats.completed["fail"] == 1


def test_status_is_polled_about_once_a_second_per_node(tmp_path) -> None:
    config = InterpreterConfig(concurrency=1, time_limit=4.0)
    history, stats, _, _ = _run(tmp_path, config=config, with_nemesis=False)
    status = [op for op in history.ops if op.f == "status"]
    by_node = {node: [op for op in status if op.node == node] for node in NODES}
    for node, ops in by_node.items():
        assert 4 <= len(ops) <= 6, (node, len(ops))
        calls = [op.call for op in ops]
        assert all(abs(b - a - SECOND) < TOLERANCE for a, b in itertools.pairwise(calls))
    assert {op.process for op in status}.isdisjoint(range(config.concurrency))
    first_n3 = by_node["n3"][0]
    assert first_n3.type == "fail" and first_n3.error == "connection refused"
    ok = by_node["n2"][0]
    assert ok.type == "ok"
    assert ok.output == {"node": "n2", "role": "follower", "term": 1, "leader": "n1",
                         "commit_lsn": [1, 1], "last_lsn": [1, 1]}
    assert stats.leader == "n1" and stats.term == 1 and stats.recovered is True


def test_the_nemesis_resolves_the_leader_records_faults_and_heals_at_the_end(tmp_path) -> None:
    config = InterpreterConfig(concurrency=2, time_limit=6.0, op_timeout=1.0, status_timeout=0.5)
    schedule = [
        ScheduledFault(0.2, {"f": "partition"}),  # before any status: nothing needs the leader
        ScheduledFault(2.0, {"f": "pause", "target": "leader"}),
        ScheduledFault(3.0, {"f": "boom"}),
        ScheduledFault(5.99, {"f": "kill", "target": "n2"}),  # the nemesis is still busy: never applied
        ScheduledFault(6.0, {"f": "heal"}),  # the final heal phase; the driver adds the resume
    ]
    history, stats, cluster, nemesis = _run(tmp_path, config=config, schedule=schedule)
    faults = [(op.f, op.type, op.output, op.error) for op in history.nemesis]
    assert faults == [
        ("partition", "ok", {"healed": True}, None),
        ("pause", "ok", {"node": "n1"}, None),
        ("boom", "info", None, "RuntimeError: iptables: command not found"),
        ("heal", "ok", {"healed": True}, None),
        ("resume", "ok", {"node": "n1"}, None),
    ]
    assert nemesis.applied[-2:] == [("heal", None), ("resume", "n1")]
    assert all(op.process == "nemesis" for op in history.nemesis)
    assert stats.faults_scheduled == {"partition": 1, "pause": 1, "boom": 1, "kill": 1, "heal": 1}
    assert stats.faults_applied == {"partition": 1, "pause": 1, "heal": 1, "resume": 1}
    assert stats.active_faults == []
    # While n1 was paused its status polls timed out (info), each followed by a fresh process id.
    n1_status = [op for op in history.ops if op.f == "status" and op.node == "n1"]
    infos = [op for op in n1_status if op.type == "info"]
    assert infos and all(op.error == "no status within 0.5 s" for op in infos)
    for before, after in itertools.pairwise(n1_status):
        assert (before.process != after.process) == (before.type == "info")
    # The final reads come after the recovery faults.
    resume = history.nemesis[-1]
    final = [op for op in history.ops if op.f == "read" and op.call >= resume.ret]
    assert {(op.node, op.key) for op in final} == {(n, k) for n in NODES for k in KEYS}
    assert all(history.events[op.invoke_index].raw.get("final") is True for op in final)
    chaos = [op for op in history.ops if op.call < 6 * SECOND]
    assert not any("final" in history.events[op.invoke_index].raw for op in chaos)


def test_recovery_wait_is_bounded_when_no_leader_appears(tmp_path) -> None:
    config = InterpreterConfig(concurrency=1, time_limit=2.0, recovery_timeout=5.0, status_timeout=0.5)

    def prepare(cluster: FakeCluster) -> None:
        cluster.paused = {"n1", "n2", "n3"}  # and nothing resumes them: no status ever answers

    history, stats, _, _ = _run(tmp_path, config=config, prepare=prepare, with_nemesis=False)
    assert stats.recovered is False
    final = [op for op in history.ops if op.f == "read" and op.node is not None and op.call >= 2 * SECOND]
    assert final and min(op.call for op in final) >= 7 * SECOND


def test_think_time_paces_each_process_and_final_reads_cover_every_key_used(tmp_path) -> None:
    config = InterpreterConfig(concurrency=2, time_limit=3.0)
    workload = FakeWorkload(think=0.5)
    history, _, _, _ = _run(tmp_path, config=config, with_nemesis=False, workload=workload)
    chaos = [op for op in history.ops if op.f != "status" and op.call < 3 * SECOND]
    for process in (0, 1):
        calls = [op.call for op in chaos if op.process == process]
        # 0.5 s think + 10 ms per operation: 5 operations in 3 s, the sixth cut off by the time limit.
        assert len(calls) == 5
        assert all(abs(b - a - 510_000_000) < TOLERANCE for a, b in itertools.pairwise(calls))
    assert workload.final_keys == [sorted(KEYS)] * len(NODES)


class LocalReadWorkload(FakeWorkload):
    """Final reads that leave the node to the interpreter and ask that node to serve them itself."""

    def final_ops(self, node: str, keys) -> FinalOps:
        for key in keys:
            yield Op("read", key, local=True)


def test_final_ops_get_their_node_and_keep_being_local_reads(tmp_path) -> None:
    config = InterpreterConfig(concurrency=1, time_limit=1.0)
    history, _, cluster, _ = _run(tmp_path, config=config, with_nemesis=False, workload=LocalReadWorkload())
    final = [op for op in cluster.invoked if op.local]
    assert [(op.node, op.key) for op in final] == [(n, k) for n in NODES for k in sorted(KEYS)]
    assert all(op.f == "read" for op in final)


def test_config_rejects_impossible_values() -> None:
    with pytest.raises(ValueError, match="concurrency"):
        InterpreterConfig(concurrency=0, time_limit=1)
    with pytest.raises(ValueError, match="time limit"):
        InterpreterConfig(concurrency=1, time_limit=0)


def test_cluster_view_leader_and_recovery() -> None:
    now = [0.0]
    view = ClusterView(NODES, lambda: now[0], stale_after=3.0)
    assert view.leader() == (None, None) and not view.recovered()
    view.observe("n1", {"role": "leader", "term": 2, "leader": "n1"})
    view.observe("n2", {"role": "leader", "term": 1, "leader": "n2"})  # a deposed leader, lower term
    assert view.leader() == ("n1", 2)
    assert not view.recovered()  # only n1 itself acknowledges n1 in term 2
    view.observe("n3", {"role": "follower", "term": 2, "leader": "n1"})
    assert view.recovered()
    now[0] = 10.0
    assert view.leader() == (None, None)
    view.observe("n2", {"role": "follower", "term": 3, "leader": "n3"})
    assert view.leader() == ("n3", 3)


def test_node_binding_keeps_each_worker_at_its_node_across_retired_processes(tmp_path) -> None:
    config = InterpreterConfig(concurrency=4, time_limit=3.0, op_timeout=2.0, client_binding="node")

    def prepare(cluster: FakeCluster) -> None:
        cluster.hang_values = {4}  # process 0's fifth operation: the worker of slot 0 goes on as a new process

    history, _, cluster, _ = _run(tmp_path, config=config, prepare=prepare)
    chaos = [op for op in history.ops if op.f != "status" and op.call < 3 * SECOND]
    # Slot s sends every operation to node s mod 3 first, and the invoke records it.
    assert all(op.node == NODES[op.process % 4 % 3] for op in chaos if op.process < 4)
    replacement = [op for op in chaos if op.process == config.concurrency + len(NODES)]
    assert replacement and {op.node for op in replacement} == {"n1"}
    assert all(op.node is not None for op in cluster.invoked)


def test_leader_binding_leaves_the_node_to_the_client_and_a_bad_binding_is_named(tmp_path) -> None:
    history, _, cluster, _ = _run(tmp_path, config=InterpreterConfig(concurrency=2, time_limit=1.0))
    chaos = [op for op in history.ops if op.f != "status" and op.call < SECOND]
    # Only the final phase's operations name a node; the chaos phase's leave it to the client.
    assert chaos and [op.node for op in cluster.invoked[:len(chaos)]] == [None] * len(chaos)
    assert {op.node for op in cluster.invoked[len(chaos):]} == set(NODES)
    with pytest.raises(ValueError, match="unknown client binding 'sticky'; valid: leader, node"):
        InterpreterConfig(concurrency=1, time_limit=1.0, client_binding="sticky")
