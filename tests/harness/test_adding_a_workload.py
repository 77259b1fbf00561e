"""Adding a workload, done from this test alone: a ``counter`` workload (``add`` / ``read``) with its own
checker, run in the simulator against the bundled cluster adapter.

The workload and its checker are two modules kept as a contributor would write them,
``example_workload/workloads/counter.py`` and ``example_workload/checkers/counter.py``: the test puts those
directories on the ``workloads`` and ``checkers`` packages' paths and asks the registries to discover them,
so each registers itself where it is declared and no table of the project is edited. The client side (the
bundled adapter's ``adapters/cluster/client.py``) is patched here.

It keeps docs/workloads.md ("Adding a workload") true by doing what it lists: the files it names are derived
from where the registered workload, checker and client are defined, and must be exactly the documented ones.
Neither the other workloads nor the judges are touched: the workload declares its operations, its client's
operations, its checkers, its model and its final phase itself, and both judges (the direct one and the
analysis's run-level checks) ask it which checkers judge its runs.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import checkers
import workloads
from adapters.cluster.client import ClusterWorkloadClient, completion_of
from checkers.history import load_history
from checkers.registry import CHECKERS, discover_checkers
from harness.analysis.checks import run_level_checks, run_params
from harness.cli import main
from workloads.generator import WORKLOADS, discover_workloads
from workloads.ops import Op

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "workloads.md"
EXAMPLE = Path(__file__).resolve().parent / "example_workload"
"""Laid out like the project: ``EXAMPLE / "workloads" / "counter.py"`` is the contributor's
``workloads/counter.py``."""
NAME = "counter"


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


# --- the test ---------------------------------------------------------------------------------------


def defined_in(obj: Any, package: Any) -> str:
    """The project path of the module of ``package`` that defines ``obj``, with its name as docs/workloads.md
    writes it (``workloads/<name>.py``)."""
    module = sys.modules[obj.__module__]
    assert module.__name__.rpartition(".")[0] == package.__name__, f"{obj!r} is not declared in {package}"
    return f"{package.__name__}/{Path(module.__file__ or '').name}".replace(f"/{NAME}.py", "/<name>.py")


@pytest.fixture
def counter_added(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Add the counter workload, its checker and its client side; yield each file a contributor would touch
    for it (docs/workloads.md's placeholders filled in) -> what is there. Undone afterwards."""
    saved = dict(WORKLOADS), dict(CHECKERS)
    assert NAME not in WORKLOADS and NAME not in CHECKERS
    # A contributor's two new modules: the packages gain them, the registries find them.
    monkeypatch.setattr(workloads, "__path__", [*workloads.__path__, str(EXAMPLE / "workloads")])
    monkeypatch.setattr(checkers, "__path__", [*checkers.__path__, str(EXAMPLE / "checkers")])
    try:
        assert NAME in discover_workloads() and NAME in discover_checkers()
        touched = {
            defined_in(WORKLOADS[NAME], workloads): "the workload class: " + WORKLOADS[NAME].__name__,
            defined_in(CHECKERS[NAME].run, checkers): "its checker: " + CHECKERS[NAME].run.__name__,
        }
        # The client side: an edit of the bundled adapter's client.
        monkeypatch.setattr(ClusterWorkloadClient, "invoke", invoke)
        monkeypatch.setattr(ClusterWorkloadClient, "operations", (*ClusterWorkloadClient.operations, "add"))
        client = Path(sys.modules[ClusterWorkloadClient.__module__].__file__ or "")
        touched[client.relative_to(ROOT).as_posix()] = "the client runs add"
        touched["tests/"] = "this test"
        yield touched
    finally:
        for module in (f"workloads.{NAME}", f"checkers.{NAME}"):
            sys.modules.pop(module, None)
        for registry, before in zip((WORKLOADS, CHECKERS), saved, strict=True):
            registry.clear()
            registry.update(before)


def documented_files() -> set[str]:
    """The files docs/workloads.md says a new workload touches: the paths in its "Adding a workload" list."""
    section = DOCS.read_text().split("## Adding a workload", 1)[1].split("\n## ", 1)[0]
    files = section.split("A new workload touches", 1)[1].split("\n\n", 2)[1]
    return set(re.findall(r"`((?:workloads|checkers|adapters|tests)/[^`]*)`", files))


def test_a_counter_workload_added_from_a_test_runs_in_the_simulator_and_both_judges_ask_it(
        tmp_path: Path, counter_added: dict[str, str]) -> None:
    assert set(counter_added) == documented_files()
    assert len(counter_added) <= 4
    # The registries put what was added after what is bundled, in a stable order.
    assert list(WORKLOADS)[-1] == NAME and list(CHECKERS)[-1] == NAME

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
