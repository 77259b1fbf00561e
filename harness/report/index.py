"""The store's index, ``store/index.html``: every run and every suite, newest first, filterable; and each
suite's own page, ``suite.html`` in its directory.

The index reads only small files: each run's ``test.json`` and ``results.json``, each suite's
``suite.json`` and ``summary.json``, and the analysis's cross-run ``store/summary.json`` when it exists
(:mod:`harness.analysis.summary`). A run that was never analysed is listed as "not analysed"; a file that
cannot be read is listed with the reason, and never stops the index from being written. Links are
relative, so the store can be moved, served (``harness serve``) or opened from disk, and every one built
from a directory name or a recorded path is path-encoded by :mod:`harness.report.links` (a directory
named ``javascript:...`` is a harmless relative link).

Filtering is a few lines of inline JavaScript over the rows already in the page (no network, no data
outside the page): a search box over each row's text, and selects for the verdict and the kind of row.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.report.links import recorded_href
from harness.report.render import REPORT, environment
from harness.store import (
    DATASET_DIR,
    INDEX_PAGE,
    LATEST,
    RESULTS,
    STORE_SUMMARY,
    SUITE_JSON,
    SUITES_DIR,
    TEST_JSON,
    TIMESTAMP_FORMAT,
    write_text,
)

INDEX = INDEX_PAGE
SUITE_PAGE = "suite.html"
SUITE_SUMMARY = "summary.json"
JUNIT = "junit.xml"


@dataclass
class RunRow:
    """One run in the index."""

    href: str | None  # the run directory relative to the store, path-encoded (None: not below the store)
    started: str
    sort_key: str
    test: str
    run: str
    valid: Any
    failed: list[str]
    undecided: list[str]
    mode: str
    workload: str
    nemesis: str
    bugs: str
    seed: str
    ops: str
    duration: str
    has_report: bool
    suite: str | None = None
    problem: str | None = None


@dataclass
class SuiteRow:
    """One suite run in the index."""

    href: str | None  # the suite directory relative to the store, path-encoded (None: not below the store)
    started: str
    sort_key: str
    name: str
    valid: Any
    counts: dict[str, Any]
    exit_code: Any
    has_page: bool
    has_junit: bool
    problem: str | None = None


@dataclass
class Index:
    store: str
    runs: list[RunRow]
    suites: list[SuiteRow]
    groups: list[dict[str, Any]] = field(default_factory=list)
    groups_generated: str | None = None
    generated: str = ""


def _read(path: Path) -> tuple[Any, str | None]:
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"{path.name} cannot be read: {exc}"


def _started(name: str) -> tuple[str, str]:
    """(shown, sortable) start time from a ``YYYYMMDDTHHMMSS[-n]`` directory name."""
    try:
        moment = datetime.strptime(name[:15], TIMESTAMP_FORMAT)
    except ValueError:
        return name, "0" + name
    return moment.strftime("%Y-%m-%d %H:%M:%S"), moment.strftime(TIMESTAMP_FORMAT) + name[15:]


def _link_below(store: Path, directory: Path) -> str | None:
    """The encoded relative link from the store to one of its directories (None if it is not below it)."""
    return recorded_href(os.path.relpath(directory, store).replace(os.sep, "/"))


def _joined(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "+".join(str(v) for v in value) or "none"
    return "—" if value in (None, "") else str(value)


def find_run_dirs(store: Path) -> list[Path]:
    """Every run directory of ``store`` (``<test>/<run>/`` holding ``test.json``), skipping the dataset,
    the suites and ``latest``."""
    found = []
    if not store.is_dir():
        return found
    for test_dir in sorted(store.iterdir()):
        if test_dir.name in (DATASET_DIR, SUITES_DIR, LATEST) or test_dir.is_symlink() or not test_dir.is_dir():
            continue
        for run_dir in sorted(test_dir.iterdir()):
            if run_dir.is_dir() and not run_dir.is_symlink() and (run_dir / TEST_JSON).is_file():
                found.append(run_dir)
    return found


def find_suite_dirs(store: Path) -> list[Path]:
    """Every suite directory of ``store`` (``suites/<name>/<stamp>/`` holding ``suite.json``)."""
    root = store / SUITES_DIR
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob(f"*/*/{SUITE_JSON}") if p.is_file())


def _memberships(store: Path, suites: Iterable[Path]) -> dict[str, str]:
    member: dict[str, str] = {}
    for suite_json in suites:
        data, _ = _read(suite_json)
        if not isinstance(data, Mapping):
            continue
        for entry in data.get("runs") or []:
            path = entry.get("path") if isinstance(entry, Mapping) else entry
            if isinstance(path, str):
                member[path] = str(data.get("name") or suite_json.parent.parent.name)
    return member


def run_row(store: Path, run_dir: Path, suite: str | None = None) -> RunRow:
    """The index row of one run directory."""
    test, problem = _read(run_dir / TEST_JSON)
    results, results_problem = _read(run_dir / RESULTS)
    test = test if isinstance(test, Mapping) else {}
    results = results if isinstance(results, Mapping) else None
    spec = test.get("spec") if isinstance(test.get("spec"), Mapping) else {}
    checkers = (results or {}).get("checkers") or {}
    failed = [n for n, v in checkers.items() if isinstance(v, Mapping) and v.get("valid") is False]
    undecided = [n for n, v in checkers.items() if isinstance(v, Mapping) and v.get("valid") not in (True, False)]
    shown, key = _started(run_dir.name)
    ops = (results or {}).get("ops")
    duration = (results or {}).get("duration_s")
    return RunRow(
        href=_link_below(store, run_dir),
        started=shown,
        sort_key=key,
        test=str(test.get("test") or run_dir.parent.name),
        run=run_dir.name,
        valid=results.get("valid") if results is not None else None,
        failed=failed,
        undecided=undecided,
        mode=_joined(test.get("mode") or spec.get("mode")),
        workload=_joined(test.get("workload") or spec.get("workload")),
        nemesis=_joined(test.get("nemesis", spec.get("nemesis"))),
        bugs=_joined(test.get("bugs", spec.get("bugs"))),
        seed=_joined(test.get("seed")),
        ops=f"{ops:,}" if isinstance(ops, int) else "—",
        duration=f"{duration:.1f} s" if isinstance(duration, int | float) else "—",
        has_report=(run_dir / REPORT).is_file(),
        suite=suite,
        problem=problem or results_problem,
    )


def suite_row(store: Path, suite_json: Path) -> SuiteRow:
    """The index row of one suite directory."""
    directory = suite_json.parent
    data, problem = _read(suite_json)
    summary, summary_problem = _read(directory / SUITE_SUMMARY)
    data = data if isinstance(data, Mapping) else {}
    summary = summary if isinstance(summary, Mapping) else {}
    counts = summary.get("counts") if isinstance(summary.get("counts"), Mapping) else {}
    code = summary.get("exit_code")
    valid: Any = {0: True, 1: False, 2: "unknown"}.get(code) if isinstance(code, int) else None
    shown, key = _started(str(data.get("started") or directory.name))
    return SuiteRow(
        href=_link_below(store, directory),
        started=shown,
        sort_key=key,
        name=str(data.get("name") or directory.parent.name),
        valid=valid,
        counts=dict(counts) or {"runs": len(data.get("runs") or [])},
        exit_code=code,
        has_page=(directory / SUITE_PAGE).is_file(),
        has_junit=(directory / JUNIT).is_file(),
        problem=problem or summary_problem,
    )


def build_index(store: str | os.PathLike[str]) -> Index:
    """The index of every run and suite under ``store``, newest first."""
    store = Path(store)
    suites = find_suite_dirs(store)
    member = _memberships(store, suites)
    runs = []
    for run_dir in find_run_dirs(store):
        relative = os.path.relpath(run_dir, store).replace(os.sep, "/")
        runs.append(run_row(store, run_dir, member.get(relative)))
    runs.sort(key=lambda row: (row.sort_key, row.test), reverse=True)
    suite_rows = sorted((suite_row(store, s) for s in suites), key=lambda row: row.sort_key, reverse=True)
    summary, _ = _read(store / STORE_SUMMARY)
    groups = summary.get("groups") if isinstance(summary, Mapping) and isinstance(summary.get("groups"), list) else []
    return Index(
        store=str(store),
        runs=runs,
        suites=suite_rows,
        groups=[g for g in groups if isinstance(g, Mapping)],
        groups_generated=summary.get("generated_at") if isinstance(summary, Mapping) else None,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    )


def write_index(store: str | os.PathLike[str]) -> Path:
    """(Re)write ``store/index.html`` and return its path."""
    store = Path(store)
    index = build_index(store)
    env = environment()
    return write_text(store / INDEX, env.get_template("index.html.j2").render(i=index))


@dataclass
class SuitePage:
    name: str
    started: str
    description: str
    file: str
    valid: Any
    counts: dict[str, Any]
    exit_code: Any
    runs: list[dict[str, Any]]
    has_junit: bool
    generated: str
    entries: list[Mapping[str, Any]] = field(default_factory=list)


def write_suite_page(suite_dir: str | os.PathLike[str]) -> Path:
    """(Re)write ``suite.html`` in a suite directory from its ``suite.json`` and ``summary.json``."""
    directory = Path(suite_dir)
    data, problem = _read(directory / SUITE_JSON)
    if not isinstance(data, Mapping):
        raise FileNotFoundError(problem or f"{directory} has no {SUITE_JSON}: it is not a suite directory")
    summary, _ = _read(directory / SUITE_SUMMARY)
    summary = summary if isinstance(summary, Mapping) else {}
    store = directory.parent.parent.parent  # suites/<name>/<stamp>/: the store is three levels up
    rows = []
    for entry in data.get("runs") or []:
        if not isinstance(entry, Mapping):
            continue
        path = entry.get("path")
        run_link = recorded_href(path)  # None unless a plain relative path below the store
        href = None
        if run_link is not None:
            page = next((name for name in (REPORT, RESULTS) if (store / path / name).is_file()), None)
            href = f"../../../{run_link}/{page}" if page else None
        rows.append({**entry, "href": href})
    code = summary.get("exit_code")
    page = SuitePage(
        name=str(data.get("name") or directory.parent.name),
        started=_started(str(data.get("started") or directory.name))[0],
        description=str(data.get("description") or ""),
        file=str(data.get("file") or ""),
        valid={0: True, 1: False, 2: "unknown"}.get(code) if isinstance(code, int) else None,
        counts=dict(summary.get("counts") or {}) if isinstance(summary.get("counts"), Mapping) else {},
        exit_code=code,
        runs=rows,
        entries=[e for e in summary.get("entries") or [] if isinstance(e, Mapping)],
        has_junit=(directory / JUNIT).is_file(),
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    )
    env = environment()
    return write_text(directory / SUITE_PAGE, env.get_template("suite.html.j2").render(s=page))
