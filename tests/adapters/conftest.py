"""What the tests of the shipped adapters share: which adapters ship (read from the entry points, never
listed), their downloads (faked in a cache of the test's own, or the real ones the ``docker`` tests
upload), a node that records what an adapter does on it, and ``harness run`` as a user types it: refused
before anything is deployed, or run and judged.

The container fixtures are the whole suite's (``tests/conftest.py``); each adapter's own ``conftest.py``
holds what only its tests need.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from docker.client import DockerClient

import adapters
from harness.cli import main
from harness.db import Deployment
from harness.db.daemon import SENT, STARTED
from harness.db.debian import CACHE_ENV, CachedBinary, DebianBinary, DebianBundle
from harness.db.plugin import installed
from harness.platforms.docker import LABEL_RUN
from nemesis.remote import CommandResult


def shipped() -> dict[str, str]:
    """Name -> package of every DB adapter the project ships: the plugins registered under the entry-point
    group whose module is in the ``adapters`` package (a user's own installed adapters are left out)."""
    return {name: ep.module for name, ep in installed().items()
            if ep.module.split(".")[0] == adapters.__name__}


def from_debian() -> dict[str, str]:
    """The shipped adapters of systems the controller fetches from Debian's packages and uploads to the
    nodes: those whose package has an ``install`` module."""
    return {name: package for name, package in shipped().items()
            if importlib.util.find_spec(f"{package}.install") is not None}


def installer(name: str) -> DebianBinary | DebianBundle:
    """What fetches the download of the shipped adapter ``name`` (``harness.db.debian``): the one
    :class:`DebianBinary` or :class:`DebianBundle` its ``install`` module holds."""
    module = importlib.import_module(f"{from_debian()[name]}.install")
    found = {id(v): v for v in vars(module).values() if isinstance(v, DebianBinary | DebianBundle)}
    assert len(found) == 1, f"{module.__name__} holds {len(found)} installers, not one"
    return next(iter(found.values()))


def fetched(name: str) -> CachedBinary:
    """The real download of the shipped adapter ``name``, which its ``docker`` tests upload: the cached one,
    fetched through the machine's apt if missing (scripts/setup.sh fetches them all); a test fails, never
    skips, without it."""
    fetcher = installer(name)
    try:
        return fetcher.find()
    except fetcher.error:
        pass
    try:
        return fetcher.fetch()
    except fetcher.error as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A controller that has fetched nothing."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "empty-cache"))
    return tmp_path / "empty-cache"


@pytest.fixture
def downloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, CachedBinary]:
    """A controller whose cache holds a stand-in for every download, where each adapter looks for it (a
    binary under its own name, a bundle as its tarball): adapter name -> what the adapter finds there."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    found = {}
    for name in from_debian():
        fetcher = installer(name)
        cache = fetcher.cache_dir()
        cache.mkdir(parents=True, exist_ok=True)
        path = cache / (fetcher.name if isinstance(fetcher, DebianBinary) else fetcher.tarball)
        path.write_bytes(f"not really {name}\n".encode())
        path.chmod(0o755)
        found[name] = fetcher.find()
    return found


def succeeded(cmd: str) -> CommandResult:
    """What a node answers when every script succeeds: a daemon's start script ``started``, anything
    else (a signal) ``sent`` (``harness.db.daemon``)."""
    return CommandResult(0, (STARTED if f"echo {STARTED}" in cmd else SENT) + "\n", "")


class RecordingRemote:
    """A node (``nemesis.remote.Remote``) that records every command, upload and written file, and answers
    each command from ``answer`` (which may raise, as a node that cannot be reached does)."""

    def __init__(self, answer: Callable[[str], CommandResult] = succeeded, name: str = "n1") -> None:
        self.name = name
        self.answer = answer
        self.commands: list[str] = []
        self.uploads: list[tuple[str, str]] = []
        self.files: dict[str, bytes] = {}

    def run(self, cmd: str, *, timeout: float | None = None, check: bool = True,
            user: str | None = None) -> CommandResult:
        self.commands.append(cmd)
        return self.answer(cmd)

    def upload(self, local_path: Any, remote_path: str) -> None:
        self.uploads.append((str(local_path), remote_path))

    def write_file(self, remote_path: str, data: bytes, mode: int = 0o644) -> None:
        self.files[remote_path] = data


def opened_clients(db: Any, deployment: Deployment, processes: Iterable[int]) -> list[Any]:
    """The workload clients ``db`` opens for ``processes`` (``harness.db.Clients``), closed again: what
    each was given, without talking to any node."""

    async def opened() -> list[Any]:
        clients = [await db.open_client(deployment, process, 2.0) for process in processes]
        for client in clients:
            await client.close()
        return clients

    return asyncio.run(opened())


@pytest.fixture
def refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Callable[..., str]:
    """``harness run ARGV...`` that must be refused before anything is deployed: exit 254, one line, no
    store made. Returns that line."""

    def run(*argv: str) -> str:
        store = tmp_path / "store"
        code = main(["run", *argv, "--store", str(store), "--seed", "1"])
        captured = capsys.readouterr()
        output = captured.out + captured.err
        lines = [line for line in output.splitlines() if line.strip()]
        assert code == 254 and len(lines) == 1, output
        assert not store.exists()
        return lines[0]

    return run


def harness_run(store: Path, *argv: str) -> tuple[int, Path, dict[str, Any]]:
    """``harness run ARGV...`` judged by the checkers directly (``--analysis direct``; the Spark pipeline is
    tested on its own, tests/harness/test_analysis_pipeline.py): its exit code, the run's directory and its
    ``results.json``."""
    code = main(["run", *argv, "--store", str(store), "--analysis", "direct", "--no-live"])
    run_dir = (store / "latest").resolve()
    return code, run_dir, json.loads((run_dir / "results.json").read_text())


def left_behind(docker_engine: DockerClient, run_id: str) -> list[str]:
    """The containers and networks of the run ``run_id`` still there (none once it has torn down)."""
    mine = {"label": f"{LABEL_RUN}={run_id}"}
    left = docker_engine.containers.list(all=True, filters=mine) + docker_engine.networks.list(filters=mine)
    return [item.name for item in left]
