"""Links built from data (``harness.report.links``) and an audit of every generated page of a store whose
names and values are hostile: every link is relative, stays inside the store and leads to a file that
exists; no page holds a script, an event handler or an element that loads something, but the index's own
filter script."""

from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.report.index import write_index, write_suite_page
from harness.report.links import UnsafeLink, file_href, fragment, href, recorded_href
from harness.report.render import write_report
from tests.harness.report_runs import (
    ACTIVE_NODE_FILES,
    HOSTILE_NODE,
    MISSING_RECORDED_FILE,
    write_hostile_store,
)

names = st.text(min_size=1).filter(lambda name: name not in (".", ".."))


def test_a_javascript_name_becomes_a_relative_link() -> None:
    assert href("javascript:alert(document.domain)%2F%2F", "x y") == (
        "javascript%3Aalert%28document.domain%29%252F%252F/x%20y")
    assert urlsplit(href("javascript:alert(1)")).scheme == ""
    assert href("a/b", "?#&\"'<>") == "a%2Fb/%3F%23%26%22%27%3C%3E"


@given(st.lists(names, min_size=1, max_size=4))
def test_an_encoded_link_is_relative_and_decodes_to_its_names(parts: list[str]) -> None:
    link = href(*parts)
    split = urlsplit(link)
    assert split.scheme == "" and split.netloc == "" and not link.startswith("/")
    assert [unquote(segment) for segment in link.split("/")] == parts
    resolved = urljoin("http://127.0.0.1:8000/suites/a/b/suite.html", link)
    assert resolved.startswith("http://127.0.0.1:8000/suites/a/b/")


@pytest.mark.parametrize("name", ["", ".", ".."])
def test_a_name_that_would_move_the_link_is_refused(name: str) -> None:
    with pytest.raises(UnsafeLink):
        href("nodes", name)


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "//evil.example/x", "a//b", "a/./b", "", None, 7])
def test_a_recorded_path_that_leaves_its_directory_gets_no_link(path: object) -> None:
    assert recorded_href(path) is None


def test_recorded_paths_and_files_are_encoded() -> None:
    assert recorded_href("nodes/n 1/journal.jsonl") == "nodes/n%201/journal.jsonl"
    assert recorded_href("javascript:alert(1)") == "javascript%3Aalert%281%29"
    assert file_href("nodes", "n1", "node.log") == "nodes/n1/node.log"
    assert file_href("nodes", "n1", "evil.HTML") is None and file_href("nodes", "n1", "x.svg") is None
    assert fragment('a"b c') == "a%22b%20c"


class _Links(HTMLParser):
    """Every URL-bearing attribute, every event-handler attribute and every tag of a page."""

    URL_ATTRIBUTES = ("href", "src", "action", "formaction", "xlink:href", "data", "poster", "background")

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.handlers: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in self.URL_ATTRIBUTES and value is not None:
                self.urls.append(value)
            if name.startswith("on"):
                self.handlers.append(f"<{tag} {name}={value!r}>")
            if tag == "meta" and name == "http-equiv" and value and value.lower() == "refresh":
                self.handlers.append("<meta http-equiv=refresh>")


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[Path]]:
    store = tmp_path_factory.mktemp("hostile") / "store"
    store.mkdir()
    run = write_hostile_store(store)
    report = write_report(run)
    suite_page = write_suite_page(next((store / "suites").glob("*/*")))
    return store, run, [write_index(store), suite_page, report]


def test_every_link_of_every_page_stays_in_the_store_and_leads_to_a_file(pages: tuple[Path, Path, list[Path]]) -> None:
    store, _, written = pages
    for page in written:
        found = _Links()
        found.feed(page.read_text(encoding="utf-8"))
        assert found.urls, f"{page.name} links nothing: the audit would pass vacuously"
        for url in found.urls:
            if url.startswith("#") or url == "data:,":  # a place in the page; the empty icon
                continue
            split = urlsplit(url)
            assert split.scheme == "" and split.netloc == "" and not url.startswith(("/", "\\")), (page, url)
            target = Path(unquote(urlsplit(urljoin(page.as_uri(), url)).path))
            assert os.path.normpath(target).startswith(f"{store}{os.sep}"), (page, url)
            assert target.exists() or url == href(MISSING_RECORDED_FILE), f"{page.name} links {url}: no file"


def test_no_page_holds_a_script_or_handler_from_data(pages: tuple[Path, Path, list[Path]]) -> None:
    for page in pages[2]:
        found = _Links()
        found.feed(page.read_text(encoding="utf-8"))
        assert found.handlers == [], page.name
        assert found.tags.count("script") == (1 if page.name == "index.html" else 0), page.name
        assert not {"img", "iframe", "object", "embed", "frame", "base", "form"} & set(found.tags), page.name


def test_the_suite_page_links_only_runs_recorded_below_the_store(pages: tuple[Path, Path, list[Path]]) -> None:
    html = pages[2][1].read_text(encoding="utf-8")
    assert html.count('href="../../../') == 2  # the index, and the one run recorded with a plain path
    assert all(f"escape {i}</td>" in html for i in range(5))  # listed, not linked


def test_files_a_browser_would_run_are_listed_but_not_linked(pages: tuple[Path, Path, list[Path]]) -> None:
    html = pages[2][2].read_text(encoding="utf-8")
    for name in ACTIVE_NODE_FILES:
        assert f"n1: {name} <span" in html and f'href="nodes/n1/{name}"' not in html
    assert 'href="nodes/javascript%3Aalert%285%29/x%22%20onmouseover%3D%22alert%286%29.log"' in html
    assert f"{HOSTILE_NODE}: x&#34; onmouseover=&#34;alert(6).log" in html
