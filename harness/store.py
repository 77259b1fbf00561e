"""The store: where runs live on disk, in the layout of FORMATS.md ("Store layout").

```
store/<test-name>/<YYYYMMDDTHHMMSS>/   one run
  test.json  schedule.jsonl  history.jsonl  nodes/<node>/journal.jsonl, nodes/<node>/*.log
  harness.log  results.json
store/latest -> the most recent run
```

A run directory is created before anything is deployed, and ``test.json`` is written first, so that a
run that crashes at any later point is still a stored run whose spec says how to reproduce it.
Documents and pages are replaced atomically (a temporary file of the writing process, then rename), so
several processes may refresh one file at once; ``latest`` is swapped atomically.
Run directories are named by the UTC second the run started; a second run in the same second of the same
test gets a ``-2``, ``-3``, ... suffix rather than overwriting the first.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

TIMESTAMP_FORMAT = "%Y%m%dT%H%M%S"
LATEST = "latest"
TEST_JSON = "test.json"
SCHEDULE = "schedule.jsonl"
HISTORY = "history.jsonl"
RESULTS = "results.json"
HARNESS_LOG = "harness.log"
NODES = "nodes"
JOURNAL = "journal.jsonl"
# Beside the tests' directories (docs/analysis.md): the analysis's dataset, and the suites' runs, each
# ``suites/<name>/<YYYYMMDDTHHMMSS>/`` holding its ``suite.json``.
DATASET_DIR = "dataset"
SUITES_DIR = "suites"
INDEX_PAGE = "index.html"
STORE_SUMMARY = "summary.json"
STORE_ENTRIES = frozenset({LATEST, DATASET_DIR, SUITES_DIR, INDEX_PAGE, STORE_SUMMARY})
"""The store's own entries beside the test directories: no test may be named like one of them."""
NAME_MAX = 255
"""The longest directory name the filesystems a store lives on accept (bytes)."""
SUITE_JSON = "suite.json"

_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]+")


class StoreError(ValueError):
    """A path that is not a stored run, or a stored run that cannot be read; says which and why."""


def safe_name(name: str) -> str:
    """A test name usable as one directory name: runs of other characters become ``-``."""
    cleaned = _UNSAFE.sub("-", name).strip("-.")
    if not cleaned:
        raise StoreError(f"test name {name!r} has no usable characters (letters, digits, . _ + = -)")
    return cleaned


@dataclass(frozen=True)
class RunDir:
    """One stored run and the paths of its files."""

    path: Path

    @property
    def test_json(self) -> Path:
        return self.path / TEST_JSON

    @property
    def schedule(self) -> Path:
        return self.path / SCHEDULE

    @property
    def history(self) -> Path:
        return self.path / HISTORY

    @property
    def results(self) -> Path:
        return self.path / RESULTS

    @property
    def harness_log(self) -> Path:
        return self.path / HARNESS_LOG

    @property
    def nodes(self) -> Path:
        return self.path / NODES

    def node_dir(self, node: str) -> Path:
        """``nodes/<node>/``, created on first use."""
        directory = self.nodes / safe_name(node)
        directory.mkdir(parents=True, exist_ok=True)
        return directory

    def journal(self, node: str) -> Path:
        return self.node_dir(node) / JOURNAL

    @property
    def test_name(self) -> str:
        return self.path.parent.name


def is_store(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a store: a directory holding a run (``<test>/<timestamp>/test.json``), a suite,
    the dataset or ``latest``. ``harness serve`` and ``harness report`` write an index only into a store
    (``harness serve --store /`` wrote ``/index.html``)."""
    path = Path(path)
    if not path.is_dir():
        return False
    if (path / LATEST).is_symlink() or (path / SUITES_DIR).is_dir() or (path / DATASET_DIR).is_dir():
        return True
    return next(path.glob(f"*/*/{TEST_JSON}"), None) is not None


def stamped_directory(parent: Path, started: datetime) -> Path:
    """Make ``parent/<YYYYMMDDTHHMMSS>/`` for something started at ``started`` (UTC), or ``...-2``, ``-3``, ...
    when that second is taken: two runs (or suites) never share a directory."""
    parent.mkdir(parents=True, exist_ok=True)
    stamp = started.astimezone(UTC).strftime(TIMESTAMP_FORMAT)
    candidate, suffix = parent / stamp, 1
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            suffix += 1
            candidate = parent / f"{stamp}-{suffix}"


def test_directory(test_name: str) -> str:
    """The directory name of test ``test_name`` in a store (:func:`safe_name`); a :class:`StoreError` if it
    would be one of the store's own entries (``latest``, ``dataset``, ``index.html``...) or too long."""
    name = safe_name(test_name)
    if name.lower() in STORE_ENTRIES:
        raise StoreError(f"test name {test_name!r} is taken by the store itself ({', '.join(sorted(STORE_ENTRIES))}): "
                         "choose another --name")
    if len(name.encode()) > NAME_MAX:
        raise StoreError(f"test name of {len(name)} characters is longer than a directory name may be "
                         f"({NAME_MAX}): choose a shorter --name")
    return name


def create_run(store: str | os.PathLike[str], test_name: str, started: datetime, *, latest: bool = True) -> RunDir:
    """Make ``store/<test-name>/<timestamp>/`` for a run started at ``started`` and point ``latest`` at it
    (unless ``latest`` is false: a run moved in later is pointed at once it is whole). A
    :class:`StoreError` names the reason the store cannot hold it (a file is there; a place that cannot
    hold directories, ``/proc`` or ``/sys``; no permission)."""
    store = Path(store)
    try:
        if store.exists() and not store.is_dir():
            raise StoreError(f"--store {store}: a file is there, not a directory: name a directory")
        candidate = stamped_directory(store / test_directory(test_name), started)
    except OSError as exc:
        raise StoreError(f"--store {store}: cannot hold runs ({exc.strerror or exc}): name a directory "
                         "you can write in") from None
    (candidate / NODES).mkdir()
    run = RunDir(candidate)
    if latest:
        update_latest(store, run)
    return run


def update_latest(store: str | os.PathLike[str], run: RunDir) -> None:
    """Atomically point ``store/latest`` at ``run`` (a relative link, so the store can be moved)."""
    store = Path(store)
    link = store / LATEST
    target = os.path.relpath(run.path, store)
    with replacing(link) as temporary:
        temporary.unlink(missing_ok=True)  # a link this process and thread left, if it was killed making it
        temporary.symlink_to(target)


def temporary_name(path: Path) -> Path:
    """The hidden file beside ``path`` that this process and thread write before replacing ``path``.

    One name per writer: two processes refreshing the same file (workers rewriting the store's
    ``index.html``, say) must not write into, or rename away, each other's half-written temporary."""
    return path.with_name(f".{path.name}.{os.getpid()}-{threading.get_native_id()}.tmp")


_TEMPORARY = re.compile(r"\..+\.(?P<pid>[0-9]+)-[0-9]+\.tmp")


def writer_of(name: str) -> int | None:
    """The pid of the process that writes the temporary file called ``name`` (:func:`temporary_name`), or
    ``None`` if ``name`` is not such a temporary."""
    match = _TEMPORARY.fullmatch(name)
    return int(match["pid"]) if match else None


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """Yield a temporary path to write; when the block ends normally it replaces ``path`` atomically, and
    whatever way it ends no temporary is left behind (a full disk, say, leaves the old file whole)."""
    temporary = temporary_name(path)
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> Path:
    """Replace ``path`` with ``text`` (UTF-8), atomically; return ``path``."""
    with replacing(path) as temporary:
        temporary.write_text(text, encoding="utf-8")
    return path


def write_json(path: Path, data: Any) -> None:
    """Replace ``path`` with ``data`` as indented JSON, atomically."""
    with replacing(path) as temporary, temporary.open("w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=False, ensure_ascii=False, default=repr)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write ``rows`` as JSON lines (replacing ``path``); return how many."""
    count = 0
    with replacing(path) as temporary, temporary.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, separators=(",", ":"), default=repr) + "\n")
            count += 1
        handle.flush()
        os.fsync(handle.fileno())
    return count


def append_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Append ``rows`` as JSON lines to ``path``; return how many."""
    count = 0
    with path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, separators=(",", ":"), default=repr) + "\n")
            count += 1
    return count


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise StoreError(f"{path}: bad JSON at line {exc.lineno}: {exc.msg}") from None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StoreError(f"{path}: no such file") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise StoreError(f"{path}:{number}: bad JSON: {exc.msg}") from None
        if not isinstance(row, dict):
            raise StoreError(f"{path}:{number}: expected a JSON object")
        rows.append(row)
    return rows


def find_run(path: str | os.PathLike[str]) -> RunDir:
    """The stored run at ``path``: a run directory, ``store/latest``, or a store (its latest run)."""
    candidate = Path(path)
    if not candidate.exists():
        raise StoreError(f"{candidate}: no such directory; give a run directory such as store/latest")
    if (candidate / TEST_JSON).is_file():
        return RunDir(candidate.resolve())
    if (candidate / LATEST).exists():
        return find_run(candidate / LATEST)
    raise StoreError(
        f"{candidate} is not a stored run (no {TEST_JSON}); give a run directory such as store/latest "
        "or store/<test-name>/<timestamp>"
    )


def git_commit(root: str | os.PathLike[str]) -> str | None:
    """The commit checked out at ``root`` (with ``+dirty`` if the work tree differs), or ``None``."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = head.stdout.strip()
    return f"{commit}+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else commit


def versions() -> dict[str, str]:
    """Versions that a reproduction may depend on: Python, the harness and its main libraries."""
    found = {"python": platform.python_version(), "platform": platform.platform()}
    for package in ("chaos-harness", "docker", "paramiko", "rich"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    found["executable"] = sys.executable
    return found
