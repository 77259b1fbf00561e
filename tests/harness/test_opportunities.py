"""``harness.opportunities``: a DB plugin's opportunity counter reaches ``results.json``, the report's timeline
caption and a suite's entry table, and a system without one shows nothing (issue 32)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import harness.opportunities as opportunities
from harness.analysis.checks import results_document
from harness.opportunities import count_run, entry_figures, entry_text, run_sentence, run_text
from harness.suite import Case, CaseRun
from harness.suite.outputs import CaseOutcome, SuiteResult, suite_summary

FOUND = {"promote-outside-lrs": {"count": 7, "what": "SC choices while an SPU is outside the LRS", "acted": 3,
                                 "acted_what": "a candidate outside the LRS"}}


def test_count_run_asks_the_plugin_and_shows_nothing_without_a_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    journals = {"n1": ["an event"]}
    monkeypatch.setattr(opportunities, "_counter", lambda db: None)
    assert count_run({"db": "etcd"}, journals) is None
    seen: list[Any] = []

    def counter(spec: Any, given: Any) -> Any:
        seen.append((spec["db"], given))
        return FOUND

    monkeypatch.setattr(opportunities, "_counter", lambda db: counter)
    assert count_run({"db": "demo"}, journals) == FOUND
    assert seen == [("demo", journals)]
    assert count_run({"db": "demo"}, {}) is None  # no journals: nothing to count


def test_a_failing_counter_costs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(spec: Any, journals: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(opportunities, "_counter", lambda db: broken)
    assert count_run({"db": "demo"}, {"n1": ["x"]}) is None


def test_a_plugin_without_the_hook_has_no_counter() -> None:
    opportunities._counter.cache_clear()
    assert opportunities._counter("no-such-db") is None
    assert opportunities._counter("etcd") is None
    assert callable(opportunities._counter("cluster"))


def test_results_json_keeps_the_counts_of_the_run_row() -> None:
    row = {"test": "t", "run": "r", "spec_json": json.dumps({"seed": 1}), "opportunities": FOUND}
    assert results_document(row, {}, [], {})["opportunities"] == FOUND
    assert "opportunities" not in results_document({**row, "opportunities": None}, {}, [], {})


def test_the_caption_says_how_often_the_bug_had_a_chance() -> None:
    text = run_sentence({"valid": True, "opportunities": FOUND})
    assert text.startswith("Opportunities for promote-outside-lrs: 7 (SC choices while an SPU is outside the LRS); "
                           "the journals show the mistake made 3 times (a candidate outside the LRS).")
    assert run_sentence({"valid": True}) == "" and run_sentence(None) == ""
    assert run_text(FOUND) == "promote-outside-lrs 7 (the mistake made 3 times)"


def test_an_entry_sums_its_runs_and_lists_the_missed_ones() -> None:
    def found(n: int, acted: int | None = None) -> dict[str, Any]:
        return {"vote-twice": {"count": n, "what": "w", "acted": acted}}

    figures = entry_figures([(found(5, 2), True), (found(0, 0), False), (None, False), (found(9, 4), True)])
    assert figures == {"vote-twice": {"what": "w", "counts": [5, 0, 9], "missed": [0], "acted": 6, "total": 14,
                                      "min": 0, "max": 9}}
    assert entry_text(figures) == "vote-twice 14 (0-9 a run; missed runs: 0; acted 6)"
    assert entry_figures([(None, True)]) is None and entry_text(None) == ""


def _case(index: int) -> Case:
    return Case(index, "fake", {"mode": "fluvio", "bug": ["promote-outside-lrs"]}, "fluvio bug-promote-outside-lrs",
                "register", ("leader-churn",), seed=index, repetition=1, time_limit=10.0, expect="invalid", group="t")


def test_the_suite_entry_table_and_summary_carry_the_counts(tmp_path: Path) -> None:
    outcomes = []
    for index, (valid, count) in enumerate([(False, 7), (True, 0), (False, 12)]):
        run_dir = tmp_path / "t" / str(index)
        run_dir.mkdir(parents=True)
        found = {"promote-outside-lrs": {**FOUND["promote-outside-lrs"], "count": count}}
        (run_dir / "results.json").write_text(json.dumps({"valid": valid, "opportunities": found}))
        outcomes.append(CaseOutcome(_case(index), CaseRun(run_dir, "harness run", seconds=1.0), valid))
    result = SuiteResult(tmp_path, outcomes)
    (row,) = result.entries()
    assert entry_text(row["opportunities"]) == "promote-outside-lrs 19 (0-12 a run; missed runs: 0; acted 9)"
    summary = suite_summary(SimpleNamespace(name="s"), result, datetime(2026, 11, 28, tzinfo=UTC))  # type: ignore[arg-type]
    assert [r["opportunities"]["promote-outside-lrs"]["count"] for r in summary["runs"]] == [7, 0, 12]

    from io import StringIO

    from rich.console import Console

    from harness.analysis.cli import print_suite

    out = StringIO()
    print_suite(result, Console(file=out, width=400))
    assert "promote-outside-lrs 19 (0-12 a run; missed runs: 0; acted 9)" in out.getvalue()


def test_the_suite_page_shows_the_column_only_where_counted(tmp_path: Path) -> None:
    from harness.report.index import write_suite_page

    directory = tmp_path / "suites" / "s" / "20261128T000000"
    directory.mkdir(parents=True)
    (directory / "suite.json").write_text(json.dumps({"name": "s", "started": "20261128T000000", "runs": []}))
    entry = {"entry": "t", "label": "fluvio bug-promote-outside-lrs", "workload": "register", "nemesis": "x",
             "expect": "invalid", "runs": 2, "met": 1, "invalid": 1, "unknown": 0}
    figures = entry_figures([(FOUND, True), ({"promote-outside-lrs": {"count": 0, "what": "w"}}, False)])
    (directory / "summary.json").write_text(json.dumps({"exit_code": 1, "entries": [{**entry, "opportunities": figures}]}))
    page = write_suite_page(directory).read_text()
    assert "<th>opportunities</th>" in page and "promote-outside-lrs 7 (0-7 a run; missed runs: 0; acted 3)" in page
    (directory / "summary.json").write_text(json.dumps({"exit_code": 0, "entries": [entry]}))
    assert "<th>opportunities</th>" not in write_suite_page(directory).read_text()


def test_junit_says_each_runs_opportunities(tmp_path: Path) -> None:
    from harness.suite.outputs import junit_document

    run_dir = tmp_path / "t" / "0"
    run_dir.mkdir(parents=True)
    (run_dir / "results.json").write_text(json.dumps({"valid": True, "opportunities": FOUND}))
    outcome = CaseOutcome(_case(0), CaseRun(run_dir, "harness run --seed 0", seconds=1.0), True)
    suite = SimpleNamespace(name="s", path=Path("s.toml"))
    root = junit_document(suite, [outcome], datetime(2026, 11, 28, tzinfo=UTC), tmp_path)  # type: ignore[arg-type]
    out = root.find("testsuite/testcase/system-out")
    assert out is not None and "opportunities: promote-outside-lrs 7 (the mistake made 3 times)" in (out.text or "")
