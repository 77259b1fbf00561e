"""The report and the index in a real browser: headless Chromium (Debian's ``chromium``, installed by
``scripts/install-chromium.sh``) loads each page from disk, takes a screenshot, and the test asserts that
the page logged no console error, fetched nothing from a network, opened no dialog, and shows the verdict
and the timeline. A store whose names and values are hostile is served by ``harness serve`` and every
link of its pages is clicked, with ``alert``, ``confirm``, ``prompt`` and ``print`` hooked: no script
runs and no link leaves the store. A missing Chromium fails these tests with what to run; they are not
skipped."""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.report.browser import (
    BrowserError,
    Followed,
    PageVisit,
    Tab,
    browser_tab,
    find_chromium,
    open_page,
)
from harness.report.index import write_index, write_suite_page
from harness.report.links import href
from harness.report.render import write_report
from harness.report.serve import make_server
from tests.harness.report_runs import MISSING_RECORDED_FILE, write_hostile_store, write_run

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
    assert visit.dialogs == [], f"a script ran: {visit.dialogs}"


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


def test_a_browser_leaves_nothing_in_the_temporary_directory(chromium: str, store: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    import tempfile

    # A short one, as /tmp is: Chromium's singleton socket path must fit a Unix socket address (108 bytes).
    temporary = Path(tempfile.mkdtemp(prefix="t", dir="/tmp"))
    try:
        monkeypatch.setenv("TMPDIR", str(temporary))
        monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
        _clean(open_page(write_report(store / "cluster-raft-ok" / "20251114T021304")))
        # Chromium's own singleton directory (org.chromium.Chromium.*) and the profile: gone with the browser
        assert list(temporary.iterdir()) == []
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


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


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A hostile store (``write_hostile_store``) with every page written, served on 127.0.0.1: (store, URL)."""
    store = tmp_path_factory.mktemp("hostile") / "store"
    store.mkdir()
    write_report(write_hostile_store(store))
    write_suite_page(next((store / "suites").glob("*/*")))
    write_index(store)
    server = make_server(store, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield store, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _click_every_link(tab: Tab, start: str, base: str) -> list[tuple[str, Followed]]:
    """From ``start``, click every distinct link of every page of the harness reached (the index, suite
    pages, reports), each from a fresh load of its page; return (page, what the click did)."""
    followed: list[tuple[str, Followed]] = []
    pages, seen = [start], {start}
    while pages:
        page = pages.pop(0)
        tab.goto(page)
        links = tab.evaluate("Array.from(document.querySelectorAll('a[href]'), a => a.href)")
        clicked: set[str] = set()
        for index, resolved in enumerate(links):
            if resolved in clicked:
                continue
            clicked.add(resolved)
            tab.goto(page)
            outcome = tab.follow(index)
            followed.append((page, outcome))
            landed = (outcome.landed or "").split("#")[0]
            if outcome.status == 200 and landed.startswith(base) and landed.endswith(".html") and landed not in seen:
                seen.add(landed)
                pages.append(landed)
    return followed


def test_hostile_names_run_no_script_and_every_link_stays_in_the_store(
    chromium: str, hostile: tuple[Path, str], tmp_path: Path
) -> None:
    store, base = hostile
    with browser_tab() as tab:
        followed = _click_every_link(tab, base + "index.html", base)
        reached = {outcome.landed.split("#")[0] for _, outcome in followed if outcome.landed}
        dialogs, errors = tab.dialogs, tab.console_errors
    assert dialogs == [], f"a script ran: {dialogs}"
    dead = href(MISSING_RECORDED_FILE)  # results.json names a file that does not exist: 404, nothing else
    assert [e for e in errors if not e.endswith(f"/{dead}")] == [], f"console errors: {errors}"
    assert len(followed) > 20 and any(o.href.startswith("javascript%3A") for _, o in followed)
    for page, outcome in followed:
        assert outcome.resolved.startswith(base), f"{page}: {outcome.href!r} leads out of the store"
        assert outcome.landed is not None and outcome.landed.startswith(base), f"{page}: {outcome} loaded nothing"
        if outcome.href == dead:
            assert outcome.status == 404
        else:  # a document of the store, or (no status) a move within the page
            assert outcome.status == 200 or (outcome.status is None and "#" in outcome.landed), f"{page}: {outcome}"
    assert {url.rsplit("/", 1)[-1] for url in reached} >= {"index.html", "suite.html", "report.html", "history.jsonl"}

    # Opened from disk, the same pages run nothing either, and show the hostile values as text.
    report = next(store.glob("*/*/report.html"))
    visit = open_page(report, evaluate={"title": "document.querySelector('h1').innerText",
                                        "where": "document.querySelector('.topnav').innerText"})
    _clean(visit)
    assert visit.values["title"] == "<script>alert(17)</script>"
    assert 'javascript:alert(2)%2F%2F"><img src=x onerror=alert(3)>' in visit.values["where"]
    _clean(open_page(store / "index.html"))
