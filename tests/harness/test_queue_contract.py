"""The queue contract through the controller: what a DB adapter declares about delivery
(``workloads.queue.Delivery``, its class attribute ``delivery``) is kept in test.json, reaches the queue
workload's drain, and both judges (the direct one and the analysis's run-level checks) give it to the
durability checker; a declaration of the wrong type is one line and exit 254."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.cluster.db import ClusterDB
from checkers.history import load_history
from harness.analysis.checks import run_level_checks, run_params
from harness.cli import main
from workloads.queue import DRAIN_QUIET, Delivery

ARGS = ["simulate", "--db", "cluster", "--workload", "queue", "--seed", "3", "--time-limit", "3",
        "--nemesis", "none"]


def _run(store: Path) -> tuple[dict, dict, Path]:
    run = (store / "latest").resolve()
    return (json.loads((run / "test.json").read_text()), json.loads((run / "results.json").read_text()), run)


def test_the_declared_contract_reaches_test_json_the_drain_and_both_judges(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert main([*ARGS, "--store", str(tmp_path / "default")]) == 0
    test, results, _ = _run(tmp_path / "default")
    assert test["delivery"] == Delivery().to_json()
    assert results["checkers"]["durability"]["stats"]["delivery"] == Delivery().to_json()

    declared = Delivery(dedup=False, redelivery="none", in_flight=False)
    monkeypatch.setattr(ClusterDB, "delivery", declared, raising=False)
    assert main([*ARGS, "--store", str(tmp_path / "declared")]) == 0
    test, results, run = _run(tmp_path / "declared")
    assert test["delivery"] == declared.to_json()
    direct = results["checkers"]["durability"]
    assert direct["valid"] is True and direct["stats"]["delivery"] == declared.to_json()
    assert direct["stats"]["enqueued_twice"] == 0
    # The drain asked an empty queue again until it had been quiet for DRAIN_QUIET simulated seconds.
    history = load_history(run / "history.jsonl")
    finals = [op for op in history.ops if op.f == "consume" and op.node is not None and op.ok and op.output is None
              and op.call >= history.ops[-1].call - int((DRAIN_QUIET + 5) * 1e9)]
    assert len(finals) > DRAIN_QUIET
    # The analysis reads the same declaration from test.json.
    params = run_params(test, history)
    assert params.delivery == declared.to_json()
    checks = run_level_checks(history, None, params)
    assert checks.verdicts["durability"].stats["delivery"] == declared.to_json()


def test_a_declaration_of_the_wrong_type_is_one_line_and_254(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(ClusterDB, "delivery", {"dedup": False}, raising=False)
    assert main([*ARGS, "--store", str(tmp_path / "store")]) == 254
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "delivery must be a workloads.queue.Delivery, not dict" in err
