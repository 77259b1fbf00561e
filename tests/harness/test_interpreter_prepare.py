"""A workload client's optional ``prepare(op)``: called before the invoke is recorded, and what it returns
is what the history records and what the client is asked to run (the log workload's poll offsets)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness.interpreter import InterpreterConfig
from tests.harness import test_interpreter as base
from workloads.ops import Op


class PreparingClient(base.FakeClient):
    prepared: list[Op] = []

    def prepare(self, op: Op) -> Op:
        if op.f != "read":
            return op
        ready = replace(op, value=f"asked-by-{self.process}")
        PreparingClient.prepared.append(ready)
        return ready


def test_prepare_fills_in_the_invoke_the_history_records(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "FakeClient", PreparingClient)
    PreparingClient.prepared = []
    history, _, cluster, _ = base._run(tmp_path, config=InterpreterConfig(concurrency=2, time_limit=1.0,
                                                                           op_timeout=2.0))
    reads = [op for op in history.ops if op.f == "read"]
    assert reads and all(op.value == f"asked-by-{op.process}" for op in reads)
    assert [op for op in cluster.invoked if op.f == "read"] == PreparingClient.prepared
    writes = [op for op in history.ops if op.f == "write"]
    assert writes and all(isinstance(op.value, int) for op in writes)  # untouched


class RedirectingClient(base.FakeClient):
    """Answers every operation from the leader, also the final reads that name another node."""

    async def invoke(self, op: Op) -> dict:
        reply = dict(await super().invoke(op))
        reply["node"] = self.cluster.leader
        return reply


def test_a_local_final_read_answered_by_another_node_is_failed_naming_it(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A final local read must be answered by the node it names; an ok answer from elsewhere says nothing
    about that node, so it is recorded fail with who answered, while the leader's own reads stay ok."""
    monkeypatch.setattr(base, "FakeClient", RedirectingClient)
    monkeypatch.setattr(base.FakeWorkload, "final_ops", _local_final_reads)
    history, _, cluster, _ = base._run(tmp_path, config=InterpreterConfig(concurrency=2, time_limit=1.0,
                                                                           op_timeout=2.0))
    finals = [op for op in history.ops if op.extra and op.extra.get("final")]
    asked = {op.node for op in cluster.invoked if op.local}
    assert len(asked) > 1 and cluster.leader in asked
    ok = [op for op in finals if op.type == "ok"]
    failed = [op for op in finals if op.type == "fail"]
    assert ok and all(op.node == cluster.leader for op in ok)
    assert {op.error.split("not ")[1].split(":")[0] for op in failed} == asked - {cluster.leader}
    assert all(op.error.startswith(f"served by {cluster.leader}, not ") for op in failed)


def _local_final_reads(self, node: str, keys):  # noqa: ANN001, ANN202 - FakeWorkload.final_ops, local
    for key in sorted(set(keys)):
        yield Op("read", key, node=node, local=True)
