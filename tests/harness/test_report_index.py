"""The store's index, suite pages, ``harness report`` and ``harness serve`` (on 127.0.0.1, an ephemeral
port, stopped by the test)."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path

import pytest

from harness.report.cli import main
from harness.report.index import build_index, write_index, write_suite_page
from harness.report.render import write_report
from harness.report.serve import make_server
from tests.harness.report_runs import write_run


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with a failing run in a suite, a valid run, an unanalysed run and a suite record."""
    root = tmp_path_factory.mktemp("store")
    bad = write_run(root, ops=200, seed=7, stamp="20251113T021304", test="cluster-raft-bug<b>")
    write_run(root, ops=200, seed=3, failing=False, stamp="20251114T021304", test="cluster-raft-ok")
    write_run(root, ops=100, seed=4, failing=False, stamp="20251112T021304", test="cluster-raft-raw", judge=False)
    suite = root / "suites" / "nightly" / "20251113T020000"
    suite.mkdir(parents=True)
    relative = f"{bad.parent.name}/{bad.name}"
    (suite / "suite.json").write_text(json.dumps({
        "name": "nightly", "started": "20251113T020000", "file": "suites/nightly.toml", "description": "every nemesis",
        "runs": [{"name": "raft-bug", "path": relative, "expect": "valid", "valid": False, "status": "failed",
                  "failed_checkers": {"durability": "1 lost <i>"}, "command": "harness run --seed 7"}]}))
    (suite / "summary.json").write_text(json.dumps({
        "name": "nightly", "exit_code": 1,
        "counts": {"runs": 1, "passed": 0, "failed": 1, "error": 0, "invalid": 1, "unknown": 0,
                   "bugs_caught": 0, "bugs_missed": 0},
        "entries": [{"entry": "nightly.<raft>", "label": "raft", "workload": "register", "nemesis": "partition",
                     "expect": "valid", "runs": 1, "met": 0, "valid": 0, "invalid": 1, "unknown": 0}]}))
    (suite / "junit.xml").write_text("<testsuites/>")
    (root / "summary.json").write_text(json.dumps({"generated_at": "2025-11-14", "groups": [
        {"workload": "register", "nemesis": "partition", "mode": "raft", "bugs": "none", "runs": 2, "invalid": 1,
         "unknown": 0, "median_ops_per_s": 120.5, "p99_latency_ms": 12.25, "failing_since": {"durability": "2025-11-13"}}]}))
    (root / "latest").symlink_to(f"{bad.parent.name}/{bad.name}")
    return root


def test_index_lists_every_run_newest_first_with_verdicts(store: Path) -> None:
    index = build_index(store)
    assert [(r.test, r.valid) for r in index.runs] == [
        ("cluster-raft-ok", True), ("cluster-raft-bug<b>", False), ("cluster-raft-raw", None)]
    bad = index.runs[1]
    assert bad.suite == "nightly"
    assert set(bad.failed) == {"linearizable", "single-leader-per-term", "lsn-monotonicity", "durability"}
    assert [s.name for s in index.suites] == ["nightly"] and index.suites[0].valid is False


def test_index_page_links_reports_escapes_names_and_filters_inline(store: Path) -> None:
    for run in ("cluster-raft-ok/20251114T021304", "cluster-raft-bug<b>/20251113T021304"):
        write_report(store / run)
    write_suite_page(store / "suites" / "nightly" / "20251113T020000")
    html = write_index(store).read_text(encoding="utf-8")
    assert html.index("cluster-raft-ok") < html.index("cluster-raft-bug&lt;b&gt;") < html.index("cluster-raft-raw")
    assert "cluster-raft-bug<b>" not in html
    assert 'href="cluster-raft-ok/20251114T021304/report.html"' in html
    assert 'href="cluster-raft-raw/20251112T021304/results.json"' in html  # never analysed: no report yet
    assert 'data-verdict="invalid"' in html and 'data-verdict="none"' in html
    assert 'href="suites/nightly/20251113T020000/suite.html"' in html
    assert 'href="suites/nightly/20251113T020000/junit.xml"' in html
    assert "durability since 2025-11-13" in html and "12.2 ms" in html
    assert html.count("<script>") == 1 and "http" not in html.split("<script>")[1]


def test_suite_page_links_each_run_report(store: Path) -> None:
    # Written here, not left to the test above: under pytest-xdist the two may run in different workers.
    write_report(store / "cluster-raft-bug<b>" / "20251113T021304")
    html = write_suite_page(store / "suites" / "nightly" / "20251113T020000").read_text(encoding="utf-8")
    assert 'href="../../../cluster-raft-bug%3Cb%3E/20251113T021304/report.html"' in html
    assert "1 lost &lt;i&gt;" in html and ">failed</div>" in html
    entries = html[html.index('id="entries"'):html.index("<h2>Runs</h2>")]
    assert "<td>nightly.&lt;raft&gt;</td>" in entries and '<td class="bad">0/1</td>' in entries


def test_report_command_rebuilds_pages_and_index(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = store / "cluster-raft-raw" / "20251112T021304" / "report.html"
    target.unlink(missing_ok=True)
    assert main(["report", str(store / "cluster-raft-raw" / "20251112T021304")]) == 0
    assert target.is_file()
    out = capsys.readouterr().out
    assert "report  " in out and f"index   {store}/index.html" in out
    assert main(["report", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert out.count("report  ") == 3 and out.count("suite   ") == 1
    assert main(["report", str(store / "latest")]) == 0


def test_report_command_says_what_is_wrong_and_exits_254(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "missing")]) == 254
    assert "no such directory" in capsys.readouterr().err
    assert main(["report", "--store", str(tmp_path)]) == 254
    assert "holds no runs and no suites" in capsys.readouterr().err
    assert main(["report", "--max-bars", "0"]) == 254
    assert main(["serve", "--store", str(tmp_path / "missing")]) == 254


def test_serve_serves_the_store_on_localhost_only(store: Path) -> None:
    write_index(store)
    server = make_server(store, port=0)
    host, port = server.server_address[:2]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert host == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=10) as response:
            assert response.status == 200
            assert "Chaos test runs" in response.read().decode("utf-8")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/latest/history.jsonl", timeout=10) as response:
            assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
            assert json.loads(response.readline())["index"] == 0
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
