"""A run is judged once (``harness.run.check_run``): by the analysis pipeline's own task, in this process
(``harness.analysis.inprocess``), its report written once, and what it writes is what ``harness analyze``
writes for the same run."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import harness.analysis.ingest as ingest
import harness.report.publish as publish
from harness.analysis import dataset
from harness.analysis.discovery import find_runs
from harness.analysis.inprocess import ENGINE, analyze_here
from harness.run import run
from harness.spec import TestSpec


def _sim_run(store: Path, seed: int = 4, **spec: Any) -> Any:
    return run(TestSpec(seed=seed, db="cluster", platform="sim", time_limit=4.0, store=str(store), **spec))


def test_harness_run_judges_once_and_writes_its_report_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()

    def counted(name: str, function: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return function(*args, **kwargs)
        return call

    monkeypatch.setattr(ingest, "read_run_files", counted("judge", ingest.read_run_files))
    monkeypatch.setattr(publish, "write_report", counted("report", publish.write_report))
    result = _sim_run(tmp_path)
    assert result.valid is True
    assert calls == {"judge": 1, "report": 1}
    results = json.loads((result.run_dir / "results.json").read_text())
    assert results["analysis"]["engine"] == ENGINE and "analysed_by" not in results
    assert (result.run_dir / "report.html").is_file() and (tmp_path / "index.html").is_file()
    # The run's rows are in the store's dataset: one row in runs, one per checker in verdicts.
    key = f"test={result.run_dir.parent.name}/run={result.run_dir.name}"
    runs = pq.read_table(tmp_path / "dataset" / "runs" / key).to_pylist()
    assert [row["valid"] for row in runs] == ["true"] and runs[0]["seed"] == 4
    verdicts = pq.read_table(tmp_path / "dataset" / "verdicts" / key).to_pylist()
    assert sorted(row["checker"] for row in verdicts) == sorted(results["checkers"])


def test_what_the_controller_alone_knows_is_kept_by_the_judge(tmp_path: Path) -> None:
    """The simulator's fingerprint, the run's statistics and coverage are the controller's; the judge
    keeps them (tests/harness/test_coverage.py: a coverage below ``--min-coverage`` makes the run unknown)."""
    result = _sim_run(tmp_path, min_coverage=0.5)
    results = result.results
    assert len(results["sim"]["history_sha256"]) == 64 and results["sim"]["events"] > 0
    assert results["stats"]["invoked"] and results["stats"]["completed"]
    assert results["coverage"]["minimum"] == 0.5 and results["coverage"]["below_minimum"] is False


# What differs between two judgements of one run: when, by whom, and how long a search took.
TIMES = ("analyzed_at", "time_s")


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    if isinstance(value, str) and value.startswith("{"):
        return _untimed(json.loads(value))
    return value


def _table(store: Path, table: str) -> list[dict[str, Any]]:
    rows = []
    for part in sorted((store / "dataset" / table).rglob("*.parquet")):
        rows += pq.read_table(part).to_pylist()
    return [_untimed({k: v for k, v in row.items() if k != "path"}) for row in rows]


def _without_analysis(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text())
    document.pop("analysis")
    return _untimed(document)


@pytest.mark.spark
def test_what_harness_run_writes_is_what_harness_analyze_writes(tmp_path: Path) -> None:
    from harness.analysis.pipeline import analyze_paths

    result = _sim_run(tmp_path / "here", seed=6)
    shutil.copytree(tmp_path / "here", tmp_path / "spark")
    relative = result.run_dir.relative_to(tmp_path / "here")
    analysis = analyze_paths([tmp_path / "spark"])
    assert analysis.outcomes[0].valid == result.valid
    here, spark = tmp_path / "here" / relative, tmp_path / "spark" / relative
    assert "spark_master" in json.loads((spark / "results.json").read_text())["analysis"]
    assert _without_analysis(here / "results.json") == _without_analysis(spark / "results.json")
    for table in dataset.TABLES:
        assert _table(tmp_path / "here", table) == _table(tmp_path / "spark", table), table


def test_the_in_process_analysis_of_a_store_judges_each_run_once(tmp_path: Path) -> None:
    """``analyze_here`` over several runs: one verdict each, the same as their runs got."""
    first, second = _sim_run(tmp_path, seed=7), _sim_run(tmp_path, seed=8)
    before = {r.run_dir: _without_analysis(r.run_dir / "results.json") for r in (first, second)}
    analysis = analyze_here(find_runs([tmp_path]))
    assert sorted(o.run.path for o in analysis.outcomes) == sorted(before)
    for outcome in analysis.outcomes:
        assert _without_analysis(outcome.results_path) == before[outcome.run.path]
