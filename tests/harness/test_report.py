"""The run report (``harness.report``): structure, order, escaping and the drawings of counterexamples, on
synthetic stored runs judged by the real checkers (``tests/harness/report_runs.py``). No browser here:
``test_report_browser.py`` opens the pages in Chromium."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.report.render import write_report
from tests.harness.report_runs import write_run

EVIL = "<script>alert('owned')</script>"


class _Outline(HTMLParser):
    """Section ids in document order, every tag seen, and the text of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        ident = dict(attrs).get("id")
        if tag == "section" and ident:
            self.sections.append(ident)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def outline(html: str) -> _Outline:
    parser = _Outline()
    parser.feed(html)
    return parser


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict]:
    store = tmp_path_factory.mktemp("store")
    run = write_run(store, ops=300, seed=7, evil_value=EVIL)
    html = write_report(run).read_text(encoding="utf-8")
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    return run, html, results


@pytest.fixture(scope="module")
def passing(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    store = tmp_path_factory.mktemp("store")
    run = write_run(store, ops=300, seed=3, failing=False, test="cluster-raft-register-ok")
    return run, write_report(run).read_text(encoding="utf-8")


def test_the_synthetic_failing_run_fails_every_checker(failing: tuple[Path, str, dict]) -> None:
    _, _, results = failing
    assert results["valid"] is False
    assert {name for name, v in results["checkers"].items() if v["valid"] is False} == {
        "linearizable", "single-leader-per-term", "lsn-monotonicity", "durability"}


def test_sections_come_in_the_promised_order(failing: tuple[Path, str, dict]) -> None:
    _, html, _ = failing
    sections = outline(html).sections
    expected = ["verdict", "reproduce", "checker-linearizable", "checker-single-leader-per-term",
                "checker-lsn-monotonicity", "checker-durability", "timeline-section", "clocks", "unapplied",
                "parameters", "files"]
    assert [s for s in sections if s in expected] == expected


def test_verdict_and_failed_checkers_lead_the_page(failing: tuple[Path, str, dict]) -> None:
    _, html, _ = failing
    banner = html[html.index('id="verdict"'):html.index('id="reproduce"')]
    assert 'data-verdict="invalid"' in banner
    assert "4 of 4 checkers found an anomaly" in banner
    for name in ("linearizable", "single-leader-per-term", "lsn-monotonicity", "durability"):
        assert f'href="#checker-{name}">✗ {name}</a>' in banner


def test_seed_and_reproduce_commands_come_from_test_json(failing: tuple[Path, str, dict]) -> None:
    run, html, _ = failing
    test = json.loads((run / "test.json").read_text(encoding="utf-8"))
    section = html[html.index('id="reproduce"'):html.index('id="checker-')]
    assert f'<div class="seed">{test["seed"]}</div>' in section
    assert test["command"] in section
    assert f"harness reproduce store/{run.parent.name}/{run.name} --times 5" in section


def test_history_values_are_shown_as_text_never_as_markup(failing: tuple[Path, str, dict]) -> None:
    run, html, _ = failing
    assert EVIL in (run / "history.jsonl").read_text(encoding="utf-8")
    assert "<script" not in html.lower()  # the report itself needs no script at all
    assert "&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;" in html
    assert "script" not in outline(html).tags


def test_lost_write_shows_when_it_was_acknowledged_and_which_nodes_lack_it(failing: tuple[Path, str, dict]) -> None:
    _, html, results = failing
    lost = results["checkers"]["durability"]["counterexample"]["lost"][0]
    section = html[html.index('id="checker-durability"'):html.index('id="timeline-section"')]
    assert "Lost writes: acknowledged ok, then missing" in section
    assert f"{lost['acked_at'] / 1e9:.3f} s" in section
    assert f"history.jsonl:{lost['acked_line']}" in section
    missing = sorted({n for n in lost["missing_on"] if n} | set(lost.get("journals", {}).get("lacking", [])))
    assert f'<td class="bad">{", ".join(missing)}</td>' in section
    assert "<svg" in section and "acked " in section and "read on " in section


def test_two_leaders_of_a_term_are_drawn_on_one_timeline(failing: tuple[Path, str, dict]) -> None:
    _, html, results = failing
    ce = results["checkers"]["single-leader-per-term"]["counterexample"]
    section = html[html.index('id="checker-single-leader-per-term"'):html.index('id="checker-lsn-monotonicity"')]
    figure = section[section.index("<svg"):section.index("</svg>")]
    for node in ce["nodes"]:
        assert f"{node} leads term {ce['term']}" in figure
    assert f"both leaders of term {ce['term']}" in figure
    assert 'class="conflict"' in figure


def test_out_of_order_lsns_are_shown_as_a_pair(failing: tuple[Path, str, dict]) -> None:
    _, html, results = failing
    first = results["checkers"]["lsn-monotonicity"]["counterexample"]["first"]
    section = html[html.index('id="checker-lsn-monotonicity"'):html.index('id="checker-durability"')]
    assert f"The out-of-order pair ({first['kind']})" in section
    lsn = first["first"]["lsn"] if "first" in first else first["earlier"]["lsn"]
    assert f"[{lsn[0]}, {lsn[1]}]" in section
    assert "Violations by kind" in section


def test_linearizability_violation_is_drawn_porcupine_style(failing: tuple[Path, str, dict]) -> None:
    _, html, results = failing
    ce = results["checkers"]["linearizable"]["counterexample"]
    section = html[html.index('id="checker-linearizable"'):html.index('id="checker-single-leader-per-term"')]
    figure = section[section.index("<svg"):section.index("</svg>")]
    assert 'class="lin blocked"' in figure and "✗" in figure
    steps = len(ce["longest_linearization"])
    assert f"#{steps} " in figure  # the last step of the longest linearization is labelled
    assert 'class="lin-path"' in figure
    assert f"impossible in state {ce['state']}" in section


def test_timeline_has_faults_roles_bars_latency_and_throughput(failing: tuple[Path, str, dict]) -> None:
    _, html, _ = failing
    timeline = html[html.index('id="timeline"'):]
    timeline = timeline[:timeline.index("</svg>")]
    for family in ("partition", "kill", "pause", "clock", "latency"):
        assert f">{family}</text>" in timeline
    for node in ("n1", "n2", "n3", "n4", "n5"):
        assert f'class="lane-label node">{node}</text>' in timeline
    assert 'class="r-leader"' in timeline and ">T2</text>" in timeline
    assert timeline.count('class="op ok"') > 100
    assert "latency (log scale)" in timeline and "throughput (completions per second)" in timeline
    assert 'class="shade f-partition"' in timeline and 'class="o-down"' in timeline
    assert "Every one of the" in html
    assert re.search(r"Elections during the [0-9.]+ s of chaos: \d+ \(terms in which a node became leader, from "
                     r"the node journals\), [0-9.]+ per minute", html)


def test_clock_offsets_and_unapplied_faults_are_listed(failing: tuple[Path, str, dict]) -> None:
    _, html, _ = failing
    clocks = html[html.index('id="clocks"'):html.index('id="unapplied"')]
    assert '<td class="node">n2</td><td class="mono nowrap">+30.000 s</td>' in clocks
    assert "n1, n2, n3, n4, n5" in clocks and "reset" in clocks
    unapplied = html[html.index('id="unapplied"'):html.index('id="parameters"')]
    assert "latency 100ms on n5" in unapplied
    assert "netem is not available on this kernel" in unapplied


def test_files_are_linked_relatively(failing: tuple[Path, str, dict]) -> None:
    _, html, _ = failing
    files = html[html.index('id="files"'):]
    for href in ("history.jsonl", "test.json", "results.json", "nodes/n1/journal.jsonl", "nodes/n3/node.log"):
        assert f'href="{href}"' in files
    assert "file:" not in html and not re.search("https?:", re.sub(r'xmlns="http://www.w3.org/2000/svg"', "", html))


def test_a_valid_run_says_so_and_draws_no_counterexample(passing: tuple[Path, str]) -> None:
    _, html = passing
    assert 'data-verdict="valid"' in html
    assert "Every checker passed (4)." in html
    assert 'id="checker-' not in html.split('id="other-checkers"')[0]
    assert html.count('class="chip valid"') >= 4


def test_a_large_run_draws_bars_for_a_window_around_the_first_anomaly(tmp_path: Path) -> None:
    run = write_run(tmp_path, ops=3000, seed=5, judge=False)
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    client_ops = sum(1 for e in history if e["type"] == "invoke" and e["process"] != "nemesis" and e["f"] != "status")
    anomaly = history[len(history) // 2]["time"]
    (run / "results.json").write_text(json.dumps({"valid": False, "checkers": {"durability": {
        "valid": False, "summary": "1 lost", "stats": {},
        "counterexample": {"lost": [{"key": "k1", "value": 9, "f": "write", "acked_at": anomaly, "acked_line": 3,
                                     "node": "n1", "lsn": None, "missing_on": ["n2"], "evidence": [],
                                     "write": {"call": anomaly - 1000, "ret": anomaly}}]}}}}))
    html = write_report(run, max_bars=400).read_text(encoding="utf-8")
    sentence = f"Bars are drawn for 400 of the {client_ops:,} client operations"
    assert sentence in html
    assert f"around the first anomaly (lost write acknowledged (durability) at {anomaly / 1e9:.3f} s)" in html
    bar = re.compile(r'class="op (ok|fail|info|pending)"><title>')
    window = html[html.index('id="window"'):]
    assert len(bar.findall(window[:window.index("</svg>")])) == 400
    main = html[html.index('id="timeline"'):]
    assert not bar.findall(main[:main.index("</svg>")])
    assert 'class="window-mark"' in main


def test_latency_is_aggregated_beyond_the_dot_limit(tmp_path: Path) -> None:
    from harness.report import timeline

    run = write_run(tmp_path, ops=2000, seed=2, judge=False, failing=False)
    original = timeline.MAX_DOTS
    timeline.MAX_DOTS = 500
    try:
        html = write_report(run).read_text(encoding="utf-8")
    finally:
        timeline.MAX_DOTS = original
    assert "is aggregated: median, 99th percentile and maximum" in html
    assert 'class="lat-p99"' in html and 'class="dot ' not in html


def test_a_truncated_history_is_reported_and_the_rest_still_drawn(tmp_path: Path) -> None:
    run = write_run(tmp_path, ops=200, seed=4, judge=False)
    text = (run / "history.jsonl").read_text(encoding="utf-8")
    lines = text.splitlines()
    (run / "history.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20], encoding="utf-8")
    html = write_report(run).read_text(encoding="utf-8")
    problems = html[html.index('id="problems"'):html.index('id="reproduce"')]
    assert f"history.jsonl:{len(lines)}: bad JSON" in problems
    assert "not analysed" in html  # judge=False: no results.json
    assert html.count('class="op ok"') > 50


def test_a_run_without_history_or_journals_still_gets_a_page(tmp_path: Path) -> None:
    run = tmp_path / "t" / "20250101T000000"
    run.mkdir(parents=True)
    (run / "test.json").write_text(json.dumps({"test": "t", "seed": 1, "command": "harness run --seed 1"}))
    html = write_report(run).read_text(encoding="utf-8")
    assert "history.jsonl: missing" in html
    assert "The history holds no client operations." in html
    assert "No node journals and no status observations" in html


def test_not_a_run_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="is not a stored run"):
        write_report(tmp_path)


def test_a_message_dropped_unconfirmed_gets_a_table_naming_it() -> None:
    from checkers.durability import check_durability
    from harness.report.counterexamples import checker_view
    from harness.report.faults import FaultView
    from tests.checkers.scenario import HistoryBuilder

    b = HistoryBuilder()
    b.invoke(0, "put", "q", {"guid": "g1", "value": 1})
    put = b.complete(0, "ok", "put", "q", {"guid": "g1", "value": 1})
    delivered = b.op(1, "consume", "q", output={"guid": "g1", "value": 1})  # never confirmed
    b.op(2, "confirm", "q", "g0")
    b.op(3, "consume", "q", output=None, final=True)
    verdict = check_durability(b.history(), model="queue").to_json()
    view = checker_view("durability", verdict, None, FaultView(), end=10**9)
    assert view.kind == "durability"
    (table,) = [t for t in view.tables if t.title.startswith("Messages never confirmed")]
    (row,) = table.rows
    assert [row[0].text, row[1].text, row[2].text, row[3].text, row[4].text] == [
        "q", "g1", f"history.jsonl:{put}", "1", f"history.jsonl:{delivered}"]


def test_many_reports_in_worker_processes_match_those_written_one_by_one(tmp_path: Path) -> None:
    from harness.report.publish import write_reports_safely

    runs = [write_run(tmp_path, ops=150, seed=seed, judge=False, stamp=f"2025010{seed}T000000") for seed in (1, 2)]
    missing = tmp_path / "not-a-run"
    progress: list[tuple[int, int]] = []
    serial = write_reports_safely([*runs, missing], done=lambda n, total: progress.append((n, total)))
    assert serial[:2] == [run / "report.html" for run in runs] and serial[2] is None
    assert progress == [(1, 3), (2, 3), (3, 3)]
    generated = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
    pages = [generated.sub("", path.read_text(encoding="utf-8")) for path in serial[:2]]
    for path in serial[:2]:
        path.unlink()
    parallel = write_reports_safely([*runs, missing], workers=2)
    assert parallel == serial
    assert [generated.sub("", path.read_text(encoding="utf-8")) for path in parallel[:2]] == pages
