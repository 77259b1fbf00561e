"""Adding a workload, done from this test alone: a ``counter`` workload (``add`` / ``read``) with its own
checker, registered here (monkeypatched) and run in the simulator against the bundled cluster adapter.

It keeps docs/workloads.md ("Adding a workload") true by doing what it lists: every place this test
touches is one the list names, and the list names nothing this test did not need. Neither the other
workloads (``workloads/register.py``, ``queue.py``, ``log.py``) nor the judges are touched: the workload
declares its operations, its client's operations, its checkers, its model and its final phase itself, and
both judges (the direct one and the analysis's run-level checks) ask it which checkers judge its runs.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from adapters.cluster.client import ClusterWorkloadClient, completion_of
from checkers import registry
from checkers.history import load_history
from checkers.registry import Checker, CheckInput
from checkers.verdict import UNKNOWN, Verdict
from harness.analysis.checks import run_level_checks, run_params
from harness.cli import main
from workloads import generator
from workloads.ops import VALUE_STRIDE, FinalOps, Op, WorkloadOption, process_rng, think_time

DOCS = Path(__file__).resolve().parents[2] / "docs" / "workloads.md"
NAME = "counter"


# --- workloads/counter.py: the workload and its facts --------------------------------------------------


class CounterWorkload:
    """Adds of small positive amounts to counters ``c0``, ``c1`` and reads of them; the final phase reads
    every counter at each node."""

    name = NAME
    operations = ("add", "read")
    client_ops = {"add": "add ``value`` to the counter", "read": "the counter's value (null: never added to)"}
    checkers = ("counter",)
    model = "counter"
    options = (WorkloadOption("keys", int, "counters c0 .. (default 2)"),)

    def __init__(self, rng: random.Random, *, keys: int = 2, rate: float | None = 10.0) -> None:
        self.seed = rng.getrandbits(64)
        self.keys = keys
        self.rate = rate

    def stream(self, process: int) -> Iterator[Op]:
        rng = process_rng(self.seed, process)
        while True:
            key, think = f"c{rng.randrange(self.keys)}", think_time(rng, self.rate)
            if rng.random() < 0.5:
                yield Op("add", key, rng.randrange(1, VALUE_STRIDE), think=think)
            else:
                yield Op("read", key, None, think=think)

    def final_ops(self, node: str, keys: Sequence[str]) -> FinalOps:
        for key in sorted(set(keys)):
            yield Op("read", key, None, node=node, local=True)


# --- checkers/counter.py: its checker -----------------------------------------------------------------


def check_counter(inp: CheckInput) -> Verdict:
    """Every read is at most what was added (acknowledged or maybe); every final read is at least what was
    acknowledged."""
    adds = [op for op in inp.history.ops if op.f == "add"]
    reads = [op for op in inp.history.ops if op.f == "read" and op.ok]
    finals = [op for op in reads if (op.extra or {}).get("final")]
    for key in sorted({op.key for op in adds + reads}):
        acked = sum(op.value for op in adds if op.key == key and op.ok)
        maybe = acked + sum(op.value for op in adds if op.key == key and op.type == "info")
        for op in reads:
            seen = op.output or 0
            if op.key == key and (seen > maybe or (op in finals and seen < acked)):
                return Verdict(False, f"{key}: read {seen}, but {acked}..{maybe} was added", counterexample=op.id)
    if not finals:
        return Verdict(UNKNOWN, "no final reads")
    return Verdict(True, f"{len(adds)} adds, {len(reads)} reads, {len(finals)} final reads agree")


# --- adapters/cluster/client.py: the client side (add as read + compare-and-set) ------------------------

CAS_ATTEMPTS = 20
_invoke = ClusterWorkloadClient.invoke


async def invoke(self: ClusterWorkloadClient, op: Op) -> dict[str, Any]:
    if op.f != "add":
        return await _invoke(self, op)
    for _ in range(CAS_ATTEMPTS):
        read = await self.client.read(op.key, node=op.node, timeout=self.timeout)
        if read.type != "ok":
            return {**completion_of(read, "add"), "type": "fail"}  # nothing was written
        current = read.value or 0
        result = await self.client.cas(op.key, read.value, current + op.value, node=op.node, timeout=self.timeout)
        if result.type != "fail" or result.error != "cas-mismatch":
            return {**completion_of(result, "add"), "value": op.value}
    return {**completion_of(result, "add"), "value": op.value}


# --- the test ------------------------------------------------------------------------------------------


def add_counter(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Register the counter workload, its checker and its client side; return each file a contributor
    would touch for it (docs/workloads.md's placeholders filled in) -> what was done there."""
    touched: dict[str, str] = {}

    def touch(module: Any, what: str) -> None:
        path = Path(module.__file__).resolve().relative_to(DOCS.parents[1]).as_posix()
        touched[path.replace(f"/{NAME}.py", "/<name>.py")] = what

    touched["workloads/<name>.py"] = "the workload class: " + CounterWorkload.__name__
    monkeypatch.setitem(generator.WORKLOADS, NAME, CounterWorkload)
    touch(generator, "its WORKLOADS entry")
    touched["checkers/<name>.py"] = "its checker: " + check_counter.__name__
    monkeypatch.setitem(registry.CHECKERS, "counter", Checker(
        "counter", "reads see what was added", check_counter, lambda inp: any(op.f == "add" for op in inp.history.ops)))
    touch(registry, "its CHECKERS entry")
    monkeypatch.setattr(ClusterWorkloadClient, "invoke", invoke)
    monkeypatch.setattr(ClusterWorkloadClient, "operations", (*ClusterWorkloadClient.operations, "add"))
    touch(__import__(ClusterWorkloadClient.__module__, fromlist=["_"]), "the client runs add")
    touched["tests/"] = "this test"
    return touched


def documented_files() -> set[str]:
    """The files docs/workloads.md says a new workload touches: the paths in its "Adding a workload" list."""
    section = DOCS.read_text().split("## Adding a workload", 1)[1].split("\n## ", 1)[0]
    files = section.split("A new workload touches", 1)[1].split("\n\n", 2)[1]
    return set(re.findall(r"`((?:workloads|checkers|adapters|tests)/[^`]*)`", files))


def test_a_counter_workload_added_from_a_test_runs_in_the_simulator_and_both_judges_ask_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    touched = add_counter(monkeypatch)
    assert set(touched) == documented_files()
    assert len({path for path in touched if not path.endswith(("generator.py", "registry.py"))}) <= 4

    store = tmp_path / "store"
    argv = ["simulate", "--db", "cluster", "--workload", NAME, "--workload-opt", "keys=3", "--seed", "7",
            "--time-limit", "4", "--nemesis", "none", "--store", str(store)]
    assert main(argv) == 0
    run = (store / "latest").resolve()
    test = json.loads((run / "test.json").read_text())
    results = json.loads((run / "results.json").read_text())
    assert test["workload"] == NAME and test["checkers"] == ["counter"] and test["model"] == "counter"
    history = load_history(run / "history.jsonl")
    assert {op.f for op in history.ops if op.f != "status"} == {"add", "read"}
    assert any(op.f == "add" and op.ok for op in history.ops)
    # The direct judge ran the workload's checker, and only it.
    assert list(results["checkers"]) == ["counter"] and results["checkers"]["counter"]["valid"] is True
    assert results["valid"] is True
    # The analysis asks the workload too, from test.json's workload name when it lists no checkers.
    del test["checkers"]
    params = run_params(test, history)
    assert params.checkers == ("counter",)
    checks = run_level_checks(history, None, params)
    assert list(checks.verdicts) == ["counter"] and checks.verdicts["counter"].valid is True
    # The same seed gives the same history.
    first = results["sim"]["history_sha256"]
    assert main(argv) == 0
    assert json.loads(((store / "latest").resolve() / "results.json").read_text())["sim"]["history_sha256"] == first
