"""harness.coverage: a run that applied little of its fault schedule is flagged under-exercised on the
console, in results.json, the report's banner, junit.xml and summary.json; --min-coverage makes it unknown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import cli
from harness.analysis.checks import results_document
from harness.coverage import Coverage, coverage_of
from nemesis.driver import FaultDriver
from nemesis.faults import HEALS, Outcome


def test_the_share_and_the_kinds_never_applied() -> None:
    assert Coverage({"kill": 4, "heal": 1}, {"kill": 4, "heal": 1}).under_exercised() is None
    assert Coverage({}, {}).under_exercised() is None
    once = Coverage({"kill": 4, "partition": 2}, {"kill": 4})
    assert once.share == pytest.approx(4 / 6)
    assert once.under_exercised() == "under-exercised: 4 of 6 scheduled faults applied (67%); never applied: partition"
    assert Coverage({"kill": 10}, {"kill": 4}).under_exercised() == "under-exercised: 4 of 10 scheduled faults applied (40%)"
    assert coverage_of({"faults_scheduled": {"kill": 2}, "faults_applied": {}}).never_applied == ["kill"]
    healed = coverage_of({"faults_scheduled": {"kill": 2, "start": 2}, "faults_applied": {"start": 2}})
    assert healed.share == 0 and healed.never_applied == ["kill"]  # heals are not faults: not counted
    assert coverage_of(None) is None and coverage_of({"faults_scheduled": 3}) is None


@pytest.fixture
def faults_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fault but the heals fails to apply, as when the nodes started too slowly to be hit."""
    real = FaultDriver.apply

    def apply(self: FaultDriver, fault, leader):  # noqa: ANN001, ANN202
        f, _ = self.describe(fault)
        if f in HEALS:
            return real(self, fault, leader)
        return Outcome(error="no node is up yet to take it")

    monkeypatch.setattr(FaultDriver, "apply", apply)


def _run(tmp_path: Path, *extra: str) -> tuple[int, str, Path]:
    store = tmp_path / "store"
    code = cli.main(["run", "--db", "cluster", "--platform", "sim", "--time-limit", "20", "--seed", "3",
                     "--nemesis", "kill,partition", "--nemesis-interval", "2", "--no-live", "--analysis", "direct",
                     "--store", str(store), *extra])
    return code, "", next(store.glob("*/2*"))


def test_a_run_whose_faults_were_mostly_not_applied_is_flagged_everywhere(
    tmp_path: Path, faults_refused: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, run_dir = _run(tmp_path)
    out = capsys.readouterr().out
    results = json.loads((run_dir / "results.json").read_text())
    coverage = results["coverage"]
    assert coverage["never_applied"] == ["kill", "partition"] and coverage["share"] < 0.5
    assert code == 0 and results["valid"] is True  # flagged, not judged otherwise without --min-coverage
    assert "under-exercised: " in out and "never applied: kill, partition" in out
    report = (run_dir / "report.html").read_text()
    assert 'id="coverage"' in report and "never applied: kill, partition" in report

    from harness.suite import Case, CaseOutcome, CaseRun, Suite, junit_document

    case = Case(0, "cluster", {}, "blazingmq", "register", ("kill", "partition"), seed=3, repetition=1,
                time_limit=20.0)
    outcome = CaseOutcome(case, CaseRun(run_dir, "harness run"), True)
    suite = Suite(name="s", path=tmp_path / "s.toml", cases=(case,), store=str(tmp_path / "store"))
    from datetime import UTC, datetime
    from xml.etree import ElementTree

    xml = ElementTree.tostring(junit_document(suite, [outcome], datetime.now(UTC), tmp_path), encoding="unicode")
    assert "valid, but under-exercised" in xml


def test_min_coverage_makes_such_a_run_unknown_and_a_reanalysis_keeps_it(
    tmp_path: Path, faults_refused: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, run_dir = _run(tmp_path, "--min-coverage", "0.9")
    results = json.loads((run_dir / "results.json").read_text())
    assert code == 2 and results["valid"] == "unknown" and results["coverage"]["below_minimum"] is True
    assert "--min-coverage 0.9" in json.loads((run_dir / "test.json").read_text())["command"]
    again = results_document({"run": run_dir.name, "test": "t"}, {}, [], {}, previous=results)
    assert again["valid"] == "unknown" and again["coverage"]["below_minimum"] is True


def test_min_coverage_is_a_suite_key(tmp_path: Path) -> None:
    from harness.suite import load_suite, test_spec

    suite_file = tmp_path / "night.toml"
    suite_file.write_text('[suite]\ndb = "cluster"\nname = "night"\nmin_coverage = 0.5\nplatform = "sim"\n'
                          '[[matrix]]\nmodes = ["raft"]\nworkloads = ["register"]\nnemeses = ["kill"]\nseeds = [1]\n')
    suite = load_suite(suite_file)
    assert test_spec(suite.cases[0], str(tmp_path)).min_coverage == 0.5
