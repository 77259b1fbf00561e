"""The report and the index in a real browser: headless Chromium (Debian's ``chromium``, installed by
``scripts/install-chromium.sh``) loads each page from disk, takes a screenshot, and the test asserts that
the page logged no console error, fetched nothing from a network, and shows the verdict and the timeline.
A missing Chromium fails these tests with what to run; they are not skipped."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from harness.report.browser import BrowserError, PageVisit, find_chromium, open_page
from harness.report.index import write_index
from harness.report.render import write_report
from tests.harness.report_runs import write_run

pytestmark = pytest.mark.browser

SHOWN = {
    "verdict": "document.querySelector('#verdict .verdict').innerText.trim().toLowerCase()",
    "verdict_visible": "(() => { const r = document.querySelector('#verdict').getBoundingClientRect();"
                       " return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 40; })()",
    "timeline_width": "document.getElementById('timeline').getBoundingClientRect().width",
    "timeline_height": "document.getElementById('timeline').getBoundingClientRect().height",
    "bars": "document.querySelectorAll('#timeline rect.op, #window rect.op').length",
    "node_lanes": "document.querySelectorAll('#timeline text.lane-label.node').length",
    "figures": "document.querySelectorAll('section.checker svg.figure').length",
    "injected": "document.querySelectorAll('script').length",
}


@pytest.fixture(scope="module")
def chromium() -> str:
    try:
        return find_chromium()
    except BrowserError as exc:
        pytest.fail(f"{exc} (scripts/setup.sh runs it)", pytrace=False)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    write_run(root, ops=400, seed=7, evil_value="<script>console.error('escaped?')</script>")
    write_run(root, ops=400, seed=3, failing=False, stamp="20251114T021304", test="cluster-raft-ok")
    return root


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", header[16:24])


def _clean(visit: PageVisit) -> None:
    assert visit.console_errors == [], f"console errors: {visit.console_errors}"
    assert visit.external_requests == [], f"the page fetched from a network: {visit.external_requests}"


def test_failing_report_shows_verdict_and_timeline_without_errors(chromium: str, store: Path, tmp_path: Path) -> None:
    run = next(store.glob("cluster-raft-register-*/*"))
    page = write_report(run)
    visit = open_page(page, screenshot=tmp_path / "failing.png", evaluate=SHOWN)
    _clean(visit)
    values = visit.values
    assert values["verdict"] == "invalid" and values["verdict_visible"] is True
    assert values["timeline_width"] > 1000 and values["timeline_height"] > 300
    assert values["bars"] > 200 and values["node_lanes"] == 5
    assert values["figures"] == 4  # one drawing per failed checker
    assert values["injected"] == 0  # the <script> in the history stayed text
    assert _png_size(tmp_path / "failing.png") == (1400, 2000)


def test_valid_report_renders_without_errors(chromium: str, store: Path, tmp_path: Path) -> None:
    page = write_report(store / "cluster-raft-ok" / "20251114T021304")
    visit = open_page(page, screenshot=tmp_path / "valid.png", evaluate=SHOWN, full_page=True)
    _clean(visit)
    assert visit.values["verdict"] == "valid" and visit.values["figures"] == 0
    width, height = _png_size(tmp_path / "valid.png")
    assert width == 1400 and height > 1000


def test_index_filters_runs_in_the_browser(chromium: str, store: Path, tmp_path: Path) -> None:
    for run in store.glob("*/*/test.json"):
        write_report(run.parent)
    index = write_index(store)
    filter_invalid = (
        "(() => { const s = document.getElementById('filter-verdict'); s.value = 'invalid';"
        " s.dispatchEvent(new Event('input'));"
        " return [document.querySelectorAll('#run-table tbody tr:not(.hidden)').length,"
        " document.getElementById('filter-count').innerText]; })()"
    )
    visit = open_page(index, screenshot=tmp_path / "index.png",
                      evaluate={"rows": "document.querySelectorAll('#run-table tbody tr').length",
                                "filtered": filter_invalid})
    _clean(visit)
    assert visit.values["rows"] == 2
    assert visit.values["filtered"] == [1, "1 of 2 shown"]
    _png_size(tmp_path / "index.png")
