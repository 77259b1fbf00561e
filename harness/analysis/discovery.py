"""Which stored runs an analysis covers: run directories, suite directories, or a whole store.

A run directory is one that holds ``test.json`` (the store writes it first, so even a run that crashed
early is one). A suite directory (``store/suites/<suite>/<YYYYMMDDTHHMMSS>/``, written by
``harness suite``) holds ``suite.json``, whose ``runs`` list names its run directories relative to the
store. Anything else is walked for both, skipping the dataset and ``latest``.

Every run knows its store (``<store>/<test-name>/<timestamp>``, so two levels up, unless ``--store``
says otherwise) and, when a suite ran it, the suite's name and night: the nightly trend groups runs by
the night their suite started, even when a suite runs past midnight.

The store is a local directory or any filesystem Spark reaches (:mod:`harness.analysis.storage`); every
look at it goes through the selection's :class:`~harness.analysis.storage.Storage`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

from harness.analysis.storage import LocalStorage, Storage, StorageError, is_url, split_url
from harness.store import (
    DATASET_DIR,
    HISTORY,
    JOURNAL,
    LATEST,
    NODES,
    SUITE_JSON,
    SUITES_DIR,
    TEST_JSON,
    TIMESTAMP_FORMAT,
)


class DiscoveryError(ValueError):
    """A path that holds no stored run, or runs that cannot be analysed together; one sentence."""


@dataclass(frozen=True)
class StoredRun:
    """One run directory and where it sits: ``store/<test>/<run>`` (a ``Path`` for a local store, the
    URL's path for one reached through Hadoop)."""

    path: PurePath
    test: str
    run: str
    suite: str | None = None
    night: str | None = None
    target: float | None = None
    """The share of its suite entry's runs that must meet their expectation (the suite file's ``target``)."""

    @property
    def store(self) -> PurePath:
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
    """The runs to analyse, in (test, run) order, the store whose dataset receives them, and the storage
    both are on."""

    store: PurePath
    runs: tuple[StoredRun, ...]
    storage: Storage = field(default_factory=LocalStorage)


def _is_run(storage: Storage, directory: PurePath) -> bool:
    return storage.is_file(directory / TEST_JSON)


def _is_suite(storage: Storage, directory: PurePath) -> bool:
    return storage.is_file(directory / SUITE_JSON)


def _run_at(directory: PurePath) -> StoredRun:
    return StoredRun(path=directory, test=directory.parent.name, run=directory.name)


def run_files(storage: Storage, run: StoredRun) -> list[tuple[PurePath, int]]:
    """The files of a run the analysis reads, with their sizes: ``test.json``, ``history.jsonl`` if there
    is one, and every ``nodes/<node>/journal.jsonl``."""
    candidates = [run.path / TEST_JSON, run.path / HISTORY]
    candidates += [
        run.path / NODES / node / JOURNAL for node, is_dir in storage.list_dir(run.path / NODES) if is_dir
    ]
    sized = ((path, storage.size(path)) for path in candidates)
    return [(path, size) for path, size in sized if size is not None]


def read_suite(directory: PurePath, storage: Storage | None = None) -> dict[str, Any]:
    """``suite.json`` of a suite directory (raises :class:`DiscoveryError` when it cannot be read)."""
    storage = storage or LocalStorage()
    path = directory / SUITE_JSON
    try:
        data = json.loads(storage.read_bytes(path).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, StorageError) as exc:
        raise DiscoveryError(
            f"{storage.display(path)}: cannot read the suite's record ({exc}); re-run the suite"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise DiscoveryError(
            f"{path}: no 'runs' list; this is not a suite directory written by harness suite"
        )
    return data


def suite_night(suite: Mapping[str, Any], directory: PurePath) -> str | None:
    started = str(suite.get("started") or directory.name)
    try:
        return datetime.strptime(started[:15], TIMESTAMP_FORMAT).strftime("%Y-%m-%d")
    except ValueError:
        return None


def _suite_runs(storage: Storage, directory: PurePath) -> list[StoredRun]:
    suite = read_suite(directory, storage)
    store = directory.parent.parent.parent
    name = str(suite.get("name") or directory.parent.name)
    night = suite_night(suite, directory)
    runs = []
    for entry in suite["runs"]:
        relative = entry.get("path") if isinstance(entry, dict) else entry
        if not relative:
            continue  # a run that crashed before the store made its directory
        path = _normal(storage, store / relative)
        target = entry.get("target") if isinstance(entry, dict) else None
        if isinstance(target, bool) or not isinstance(target, int | float):
            target = None
        if _is_run(storage, path):
            runs.append(replace(_run_at(path), suite=name, night=night,
                                target=None if target is None else float(target)))
    return runs


def _walk(storage: Storage, root: PurePath) -> Iterable[StoredRun]:
    if _is_run(storage, root):
        yield _run_at(root)
        return
    if _is_suite(storage, root):
        yield from _suite_runs(storage, root)
        return
    for name, is_dir in storage.list_dir(root):
        if is_dir and name not in (DATASET_DIR, LATEST) and not name.startswith((".", "_")):
            yield from _walk(storage, root / name)


def _suite_directories(store: PurePath, storage: Storage) -> Iterable[PurePath]:
    """Every suite directory under ``store/suites`` (``<suite>/<YYYYMMDDTHHMMSS>/`` holding ``suite.json``)."""
    suites = store / SUITES_DIR
    for name, is_dir in storage.list_dir(suites):
        if not is_dir:
            continue
        for started, is_suite_dir in storage.list_dir(suites / name):
            directory = suites / name / started
            if is_suite_dir and _is_suite(storage, directory):
                yield directory


def suite_memberships(store: PurePath, storage: Storage | None = None) -> dict[PurePath, StoredRun]:
    """Run directory -> the run as its suite names it (suite name, night, target), from every
    ``suite.json`` under ``store/suites``."""
    storage = storage or LocalStorage()
    found: dict[PurePath, StoredRun] = {}
    for directory in _suite_directories(store, storage):
        try:
            for run in _suite_runs(storage, directory):
                found[run.path] = run
        except DiscoveryError:
            continue  # one damaged suite record does not hide the others' runs
    return found


def _normal(storage: Storage, path: PurePath) -> PurePath:
    """A path on this machine resolved (symlinks such as ``store/latest`` followed, ``file://`` URLs
    too); any other normalised."""
    local = storage.local(path)
    if local is not None:
        resolved = local.resolve()
        return resolved if isinstance(storage, LocalStorage) else PurePosixPath(resolved)
    return PurePosixPath(os.path.normpath(str(path)))


def _location(storage: Storage, given: str | os.PathLike[str] | PurePath) -> PurePath:
    """A path or URL the user gave, as a path of ``storage``. Raises :class:`DiscoveryError`."""
    if isinstance(storage, LocalStorage):
        if isinstance(given, str) and is_url(given):
            raise DiscoveryError(f"{given} is a URL: analyse URLs and plain paths separately")
        return Path(given).resolve()
    if isinstance(given, str) and is_url(given):
        try:
            root, path = split_url(given)
        except StorageError as exc:
            raise DiscoveryError(str(exc)) from None
        if root != getattr(storage, "root", root):
            raise DiscoveryError(
                f"{given} is on another filesystem than {storage.display(PurePosixPath('/'))}; analyse one "
                "store at a time"
            )
        return path
    if isinstance(given, PurePosixPath):
        return given
    raise DiscoveryError(f"{given} is a plain path: analyse URLs and plain paths separately")


def find_runs(
    paths: Iterable[str | os.PathLike[str] | PurePath],
    store: str | os.PathLike[str] | PurePath | None = None,
    storage: Storage | None = None,
) -> RunSelection:
    """The runs under ``paths`` (run, suite or store directories: plain paths with the default local
    storage, URLs with a :class:`~harness.analysis.storage.HadoopStorage`). Raises
    :class:`DiscoveryError`."""
    storage = storage or LocalStorage()
    found: dict[PurePath, StoredRun] = {}
    given = list(paths)
    if not given:
        raise DiscoveryError("no path given; name run directories, suite directories or a store")
    for text in given:
        path = _location(storage, text)
        shown = storage.display(path)
        try:
            is_dir = storage.is_dir(path)
            if not is_dir and storage.is_file(path):
                raise DiscoveryError(f"{shown} is a file; give the run directory that holds it")
            if not is_dir:
                raise DiscoveryError(
                    f"{shown}: no such directory; give a run directory, a suite directory or a store"
                )
            runs = list(_walk(storage, _normal(storage, path)))
        except StorageError as exc:
            raise DiscoveryError(str(exc)) from None
        if not runs:
            raise DiscoveryError(
                f"{shown} holds no stored run (no directory with {TEST_JSON} in it); give a run "
                "directory such as store/latest, a suite directory, or a store with runs"
            )
        for run in runs:
            if run.path not in found or run.suite:
                found[run.path] = run
    if store is not None:
        root = _location(storage, store)
    else:
        roots = sorted({run.store for run in found.values()}, key=str)
        if len(roots) > 1:
            listed = ", ".join(storage.display(r) for r in roots[:3])
            raise DiscoveryError(
                f"the runs come from more than one store ({listed}); analyse one store at a time or pass --store"
            )
        root = roots[0]
    memberships = suite_memberships(root, storage)
    runs_out = []
    for run in found.values():
        if run.suite is None and run.path in memberships:
            member = memberships[run.path]
            run = replace(run, suite=member.suite or "", night=member.night, target=member.target)
        runs_out.append(run)
    return RunSelection(
        store=root, runs=tuple(sorted(runs_out, key=lambda r: (r.test, r.run))), storage=storage
    )
