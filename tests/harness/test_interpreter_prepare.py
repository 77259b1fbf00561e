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
