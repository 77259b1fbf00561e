"""Which stored runs an analysis covers: run directories, suite directories, or a whole store.

A run directory is one that holds ``test.json`` (the store writes it first, so even a run that crashed
early is one). A suite directory (``store/suites/<suite>/<YYYYMMDDTHHMMSS>/``, written by
``harness suite``) holds ``suite.json``, whose ``runs`` list names its run directories relative to the
store. Anything else is walked for both, skipping the dataset and ``latest``.

Every run knows its store (``<store>/<test-name>/<timestamp>``, so two levels up, unless ``--store``
says otherwise) and, when a suite ran it, the suite's name and night: the nightly trend groups runs by
the night their suite started, even when a suite runs past midnight.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.store import DATASET_DIR, LATEST, SUITE_JSON, SUITES_DIR, TEST_JSON, TIMESTAMP_FORMAT


class DiscoveryError(ValueError):
    """A path that holds no stored run, or runs that cannot be analysed together; one sentence."""


@dataclass(frozen=True)
class StoredRun:
    """One run directory and where it sits: ``store/<test>/<run>``."""

    path: Path
    test: str
    run: str
    suite: str | None = None
    night: str | None = None

    @property
    def store(self) -> Path:
        return self.path.parent.parent

    @property
    def key(self) -> tuple[str, str]:
        return (self.test, self.run)

    def started(self) -> datetime | None:
        """When the run started, from its directory's name (UTC), or ``None`` for a foreign name."""
        try:
            return datetime.strptime(self.run[:15], TIMESTAMP_FORMAT)
        except ValueError:
            return None

    def night_or_date(self) -> str | None:
        if self.night:
            return self.night
        started = self.started()
        return started.strftime("%Y-%m-%d") if started else None


@dataclass(frozen=True)
class RunSelection:
    """The runs to analyse, in (test, run) order, and the store whose dataset receives them."""

    store: Path
    runs: tuple[StoredRun, ...]


def _is_run(directory: Path) -> bool:
    return (directory / TEST_JSON).is_file()


def _is_suite(directory: Path) -> bool:
    return (directory / SUITE_JSON).is_file()


def _run_at(directory: Path) -> StoredRun:
    directory = directory.resolve()
    return StoredRun(path=directory, test=directory.parent.name, run=directory.name)


def read_suite(directory: Path) -> dict[str, Any]:
    """``suite.json`` of a suite directory (raises :class:`DiscoveryError` when it cannot be read)."""
    path = directory / SUITE_JSON
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DiscoveryError(f"{path}: cannot read the suite's record ({exc}); re-run the suite") from None
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise DiscoveryError(
            f"{path}: no 'runs' list; this is not a suite directory written by harness suite"
        )
    return data


def suite_night(suite: Mapping[str, Any], directory: Path) -> str | None:
    started = str(suite.get("started") or directory.name)
    try:
        return datetime.strptime(started[:15], TIMESTAMP_FORMAT).strftime("%Y-%m-%d")
    except ValueError:
        return None


def _suite_runs(directory: Path) -> list[StoredRun]:
    suite = read_suite(directory)
    store = directory.resolve().parent.parent.parent
    name = str(suite.get("name") or directory.parent.name)
    night = suite_night(suite, directory)
    runs = []
    for entry in suite["runs"]:
        relative = entry.get("path") if isinstance(entry, dict) else entry
        if not relative:
            continue  # a run that crashed before the store made its directory
        path = store / relative
        if _is_run(path):
            runs.append(replace(_run_at(path), suite=name, night=night))
    return runs


def _walk(root: Path) -> Iterable[StoredRun]:
    for current, directories, _files in os.walk(root):
        here = Path(current)
        if _is_run(here):
            directories.clear()
            yield _run_at(here)
            continue
        if _is_suite(here):
            directories.clear()
            yield from _suite_runs(here)
            continue
        directories[:] = sorted(
            d for d in directories if d not in (DATASET_DIR, LATEST) and not d.startswith((".", "_"))
        )


def suite_memberships(store: Path) -> dict[Path, tuple[str, str | None]]:
    """Run directory -> (suite name, night), from every ``suite.json`` under ``store/suites``."""
    found: dict[Path, tuple[str, str | None]] = {}
    suites = store / SUITES_DIR
    if not suites.is_dir():
        return found
    for path in sorted(suites.glob(f"*/*/{SUITE_JSON}")):
        try:
            for run in _suite_runs(path.parent):
                found[run.path] = (run.suite or "", run.night)
        except DiscoveryError:
            continue  # one damaged suite record does not hide the others' runs
    return found


def find_runs(
    paths: Iterable[str | os.PathLike[str]], store: str | os.PathLike[str] | None = None
) -> RunSelection:
    """The runs under ``paths`` (run, suite or store directories). Raises :class:`DiscoveryError`."""
    found: dict[Path, StoredRun] = {}
    given = [Path(p) for p in paths]
    if not given:
        raise DiscoveryError("no path given; name run directories, suite directories or a store")
    for path in given:
        if not path.exists():
            raise DiscoveryError(
                f"{path}: no such directory; give a run directory, a suite directory or a store"
            )
        if not path.is_dir():
            raise DiscoveryError(f"{path} is a file; give the run directory that holds it")
        if _is_run(path):
            runs: Iterable[StoredRun] = [_run_at(path)]
        elif _is_suite(path):
            runs = _suite_runs(path)
        else:
            runs = list(_walk(path.resolve()))
            if not runs:
                raise DiscoveryError(
                    f"{path} holds no stored run (no directory with {TEST_JSON} in it); give a run "
                    "directory such as store/latest, a suite directory, or a store with runs"
                )
        for run in runs:
            if run.path not in found or run.suite:
                found[run.path] = run
    if store is not None:
        root = Path(store).resolve()
    else:
        roots = sorted({run.store for run in found.values()})
        if len(roots) > 1:
            listed = ", ".join(str(r) for r in roots[:3])
            raise DiscoveryError(
                f"the runs come from more than one store ({listed}); analyse one store at a time or pass --store"
            )
        root = roots[0]
    memberships = suite_memberships(root)
    runs_out = []
    for run in found.values():
        if run.suite is None and run.path in memberships:
            suite, night = memberships[run.path]
            run = replace(run, suite=suite, night=night)
        runs_out.append(run)
    return RunSelection(store=root, runs=tuple(sorted(runs_out, key=lambda r: (r.test, r.run))))
