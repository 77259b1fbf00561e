"""The report's drawing of the log checker's counterexample: the offsets-over-time panel and the table."""

from __future__ import annotations

from checkers.log import check_log
from harness.report.counterexamples import anomaly_time, checker_view
from harness.report.faults import FaultView
from tests.checkers.scenario import HistoryBuilder


def _history(key: str) -> tuple[HistoryBuilder, int, int]:
    b = HistoryBuilder()
    b.invoke(0, "append", key, 1)
    b.complete(0, "ok", "append", key, [0, 1], node="n1")
    b.invoke(1, "append", key, 1_000_001)
    acked = b.complete(1, "ok", "append", key, [1, 1_000_001], node="n1")
    b.invoke(2, "append", key, 2_000_001)
    b.complete(2, "info", "append", key, 2_000_001)
    b.invoke(3, "poll", key, 0)
    read = b.complete(3, "ok", "poll", key, [[0, 1], [1, 1_000_001], [2, 2_000_001]], node="n1")
    for i, node in enumerate(("n1", "n2")):
        b.invoke(100 + i, "poll", key, 0, node=node, final=True)
        b.complete(100 + i, "ok", "poll", key, [[0, 1]], node=node)
        b.invoke(100 + i, "poll", key, 1, node=node, final=True)
        b.complete(100 + i, "ok", "poll", key, [], node=node)
    return b, acked, read


def test_log_anomalies_are_drawn_as_offsets_over_time_with_a_table_of_lines() -> None:
    b, acked, read = _history("l0")
    verdict = check_log(b.history()).to_json()
    assert verdict["valid"] is False
    view = checker_view("log", verdict, None, FaultView(), end=10**9)
    assert view.kind == "log"
    assert view.figure is not None and view.figure.count("<circle") >= 5
    assert "claim-mark" in view.figure  # the anomalies' rings
    (table,) = view.tables
    classes = [row[0].text for row in table.rows]
    assert classes == ["lost", "unstable"]
    lines = {row[0].text: row[5].text for row in table.rows}
    assert lines == {"lost": f"history.jsonl:{acked}", "unstable": f"history.jsonl:{read}"}
    t, label = anomaly_time(verdict["counterexample"], None)
    assert label.startswith("log: ") and t == b.events[acked - 1]["time"]


def test_log_keys_and_values_are_escaped() -> None:
    b, _, _ = _history("<l0&>")
    view = checker_view("log", check_log(b.history()).to_json(), None, FaultView(), end=10**9)
    assert view.figure is not None
    assert "<l0&>" not in view.figure and "&lt;l0&amp;&gt;" in view.figure
