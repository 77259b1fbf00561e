"""Keeping simulated runs in the store from several processes at once (``harness.sim.run.keep``): an
exploration's workers keep their invalid seeds' runs in whatever second they end, so two often keep in the
same second, and each run must land in a directory of its own, whole.
"""

from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.sim import run as sim_run
from harness.spec import TestSpec
from tests.harness.at_once import run_at_once

WORKERS = 6
KEEPS = 8


class _OneSecond(datetime):
    """Every run kept in the same second: the case where two keeps want one directory."""

    @classmethod
    def now(cls, tz=None):  # noqa: ANN001, ANN206 - datetime's own signature
        return datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def _keep_runs(store: Path, worker: int, start: multiprocessing.synchronize.Barrier) -> None:
    spec = TestSpec(db="cluster", seed=1, platform="sim", store=str(store))
    results = []
    for keep in range(KEEPS):
        scratch = store / ".sim-scratch" / f"w{worker}" / f"seed-{keep}"
        (scratch / "nodes" / "n1").mkdir(parents=True)
        (scratch / "marker").write_text(f"{worker}-{keep}")
        (scratch / "nodes" / "n1" / "journal.jsonl").write_text(f"{worker}-{keep}\n")
        results.append(sim_run.SimResult(spec, scratch, False, {"test": "t"}, 1.0, 1.0, {}, {}, ()))
    start.wait()
    for result in results:
        sim_run.keep(result)


def test_runs_kept_in_the_same_second_by_several_processes_each_get_a_directory_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sim_run, "datetime", _OneSecond)
    monkeypatch.setattr(sim_run, "publish", lambda run_dir: None)  # the report and index are not the point
    codes = run_at_once(_keep_runs, [(tmp_path, worker) for worker in range(WORKERS)], timeout=60)
    assert codes == [0] * WORKERS  # no keep raised
    kept = sorted(p for p in (tmp_path / "t").iterdir() if p.is_dir())
    markers = sorted((run / "marker").read_text() for run in kept if (run / "marker").is_file())
    expected = sorted(f"{worker}-{keep}" for worker in range(WORKERS) for keep in range(KEEPS))
    assert markers == expected and len(kept) == len(expected)  # every run kept, one a directory
    for run in kept:
        assert (run / "nodes" / "n1" / "journal.jsonl").read_text() == (run / "marker").read_text() + "\n"


def test_a_seed_whose_run_cannot_be_kept_keeps_its_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.sim import explore

    spec = TestSpec(db="cluster", seed=9, platform="sim", store=str(tmp_path))

    def simulated(spec: TestSpec, work: Path, checkers: object = None) -> sim_run.SimResult:
        work.mkdir(parents=True)
        (work / "test.json").write_text("{}")
        return sim_run.SimResult(spec, work, False, {"checkers": {"linearizable": {"valid": False}}}, 10.0, 1.0,
                                 {}, {}, ())

    def full_disk(result: sim_run.SimResult) -> sim_run.SimResult:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(explore, "simulate", simulated)
    monkeypatch.setattr(explore, "keep", full_disk)
    outcome = explore.run_seed(spec, str(tmp_path / "scratch"))
    assert (outcome.seed, outcome.valid, outcome.failed, outcome.run_dir) == (9, False, ("linearizable",), None)
    assert outcome.error is not None and "could not be kept" in outcome.error and "No space" in outcome.error
    assert not (tmp_path / "scratch" / "seed-9").exists()


def test_latest_points_at_a_kept_run_only_once_it_is_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``latest`` is for readers (``harness report latest``): pointing it at the reserved directory before
    the run was moved in showed them an empty run."""
    from harness import store

    monkeypatch.setattr(sim_run, "publish", lambda run_dir: None)
    pointed: list[bool] = []
    update_latest = store.update_latest

    def watched(where: str, run: store.RunDir) -> None:
        pointed.append((run.path / "marker").is_file())
        update_latest(where, run)

    monkeypatch.setattr(store, "update_latest", watched)
    scratch = tmp_path / ".sim-scratch" / "seed-1"
    (scratch / "nodes").mkdir(parents=True)
    (scratch / "marker").write_text("whole")
    spec = TestSpec(db="cluster", seed=1, platform="sim", store=str(tmp_path))
    kept = sim_run.keep(sim_run.SimResult(spec, scratch, False, {"test": "t"}, 1.0, 1.0, {}, {}, ()))
    assert pointed == [True]
    assert (tmp_path / "latest" / "marker").read_text() == "whole" and (kept.run_dir / "marker").is_file()
