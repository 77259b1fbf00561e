"""Cross-run views from the dataset, and ``harness analyze`` end to end, on Spark.

Four nights of synthetic runs in two groups: raft/partition, valid on the first night and losing writes
from the second night on; blazingmq/kill, always valid. The summary must count them, take the median of
their throughputs and the p99 of their latencies, and say durability has been failing since night two.
Each night's runs belong to a suite whose file set a target of 1.0 for both (controls must be valid):
raft/partition's rate night over night drops below it after the first night, and is flagged.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from checkers.history import load_history
from harness.analysis.cli import main as analysis_main
from harness.analysis.discovery import find_runs
from harness.analysis.pipeline import analyze
from harness.analysis.summary import summarize, write_summary
from tests.harness.synthetic_runs import write_run

pytest_plugins = ("tests.harness.spark_fixtures",)
pytestmark = pytest.mark.spark

NIGHTS = ["20261118", "20261119", "20261120", "20261121"]


def _suite_record(store: Path, night: str, runs: list[str]) -> None:
    """The ``suite.json`` a nightly suite started that night would leave, its entries' target 1.0."""
    suite = store / "suites" / "nightly" / f"{night}T010000"
    suite.mkdir(parents=True)
    (suite / "suite.json").write_text(json.dumps({
        "name": "nightly", "started": f"{night}T010000",
        "runs": [{"path": path, "expect": "valid", "target": 1.0} for path in runs],
    }), encoding="utf-8")


@pytest.fixture(scope="module")
def store(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: ANN001
    root = tmp_path_factory.mktemp("nights")
    for number, night in enumerate(NIGHTS):
        write_run(root, "raft-partition", f"{night}T020000", seed=10 + number, ops=150, lost_write=number > 0)
        write_run(root, "bmq-kill", f"{night}T030000", seed=20 + number, ops=150, mode="blazingmq", nemesis="kill")
        _suite_record(root, night, [f"raft-partition/{night}T020000", f"bmq-kill/{night}T030000"])
    analyze(spark, find_runs([root]))
    return root


def test_summary_counts_each_group_and_says_since_when_a_checker_fails(spark, store: Path) -> None:  # noqa: ANN001
    summary = summarize(spark, store)
    groups = {(g.mode, g.nemesis): g for g in summary.groups}
    assert set(groups) == {("raft", "partition"), ("blazingmq", "kill")}
    broken, fine = groups[("raft", "partition")], groups[("blazingmq", "kill")]
    assert (broken.runs, broken.invalid, broken.unknown) == (4, 3, 0)
    assert (fine.runs, fine.invalid, fine.unknown) == (4, 0, 0)
    assert broken.workload == "register" and broken.bugs == "none"
    assert broken.failing_since["durability"] == "2026-11-19"
    assert fine.failing_since == {}
    assert (broken.first_night, broken.last_night) == ("2026-11-18", "2026-11-21")


def test_summary_rates_night_over_night_flag_the_group_below_its_target(spark, store: Path) -> None:  # noqa: ANN001
    summary = summarize(spark, store)
    groups = {(g.mode, g.nemesis): g for g in summary.groups}
    broken, fine = groups[("raft", "partition")], groups[("blazingmq", "kill")]
    assert [(r["night"], r["met"], r["runs"]) for r in broken.rates] == [
        ("2026-11-18", 1, 1), ("2026-11-19", 0, 1), ("2026-11-20", 0, 1), ("2026-11-21", 0, 1)]
    assert broken.target == 1.0 and broken.below_target
    assert fine.target == 1.0 and not fine.below_target and all(r["met"] == 1 for r in fine.rates)
    from io import StringIO

    from rich.console import Console

    from harness.analysis.summary import render_summary

    out = StringIO()
    render_summary(summary, Console(file=out, width=400))
    assert "11-21 0/1 (0-79%), below target 100%" in out.getvalue()


def test_summary_throughput_and_latency_match_the_histories(spark, store: Path) -> None:  # noqa: ANN001
    summary = summarize(spark, store)
    fine = next(g for g in summary.groups if g.mode == "blazingmq")
    rates, latencies = [], []
    for night in NIGHTS:
        history = load_history(store / "bmq-kill" / f"{night}T030000" / "history.jsonl")
        ok = [op for op in history.ops if op.ok]
        rates.append(len(ok) / ((history.events[-1].time - history.events[0].time) / 1e9))
        latencies.extend(op.ret - op.call for op in ok)
    assert fine.median_ops_per_s == pytest.approx(statistics.median(rates), rel=1e-3)
    exact_p99 = sorted(latencies)[int(0.99 * len(latencies))] / 1e6
    assert fine.p99_latency_ms == pytest.approx(exact_p99, rel=0.05)


def test_summary_json_for_the_index_page(spark, store: Path) -> None:  # noqa: ANN001
    path = write_summary(store, summarize(spark, store))
    assert path == store / "summary.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert {g["mode"] for g in data["groups"]} == {"raft", "blazingmq"}
    assert set(data["groups"][0]) >= {"workload", "nemesis", "mode", "bugs", "runs", "invalid", "unknown",
                                      "median_ops_per_s", "p99_latency_ms", "failing_since"}


def test_harness_analyze_end_to_end(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = analysis_main(["analyze", str(store / "raft-partition"), "--summary", "--quiet", "--store", str(store)])
    out = capsys.readouterr().out
    assert code == 1  # three invalid runs
    assert "INVALID" in out and "linearizable" in out and "3 invalid" in out
    assert "runs by workload x nemesis x mode x bugs" in out
    results = json.loads((store / "raft-partition" / f"{NIGHTS[0]}T020000" / "results.json").read_text(encoding="utf-8"))
    assert results["valid"] is True


def test_harness_analyze_of_a_valid_run_exits_0(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert analysis_main(["analyze", str(store / "bmq-kill" / f"{NIGHTS[0]}T030000"), "--quiet"]) == 0
    assert "1 valid, 0 invalid, 0 unknown" in capsys.readouterr().out


def test_summary_of_a_store_never_analysed_is_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert analysis_main(["analyze", "--summary", "--store", str(tmp_path / "empty"), "--quiet"]) == 254
    assert "has no analysed runs" in capsys.readouterr().err


def test_the_summary_of_shards_merged_equals_the_summary_of_one_store(spark, store: Path, tmp_path: Path) -> None:  # noqa: ANN001
    """A nightly spread over machines (harness suite --shard K/N): each shard's store holds some of the
    runs; ``harness analyze SHARD1 SHARD2 --store MERGED --summary`` must say what one store would."""
    shards = [tmp_path / "shard1", tmp_path / "shard2"]
    for number, night in enumerate(NIGHTS):  # the same runs as the module's store, split by group
        write_run(shards[0], "raft-partition", f"{night}T020000", seed=10 + number, ops=150, lost_write=number > 0)
        write_run(shards[1], "bmq-kill", f"{night}T030000", seed=20 + number, ops=150, mode="blazingmq",
                  nemesis="kill")
        _suite_record(shards[0], night, [f"raft-partition/{night}T020000"])  # each shard's suite --shard K/N
        _suite_record(shards[1], night, [f"bmq-kill/{night}T030000"])
    merged = tmp_path / "merged"
    merged.mkdir()
    code = analysis_main(["analyze", *map(str, shards), "--store", str(merged), "--summary", "--quiet"])
    assert code == 1  # the raft runs that lost writes
    one = json.loads(write_summary(store, summarize(spark, store)).read_text(encoding="utf-8"))
    two = json.loads((merged / "summary.json").read_text(encoding="utf-8"))
    assert two["groups"] == one["groups"] and len(two["groups"]) == 2  # counts, rates, failing-since
