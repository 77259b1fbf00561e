"""The contract every DB adapter the project ships keeps, written once and checked for each of them.

Which adapters ship is read from the code, never listed here (``tests.adapters.conftest.shipped``): the
plugins registered under the entry-point group whose module is in the ``adapters`` package; some tests
concern only the systems fetched from Debian's packages and uploaded to the nodes (those with an
``install`` module), or only those whose status is asked over HTTP. What each adapter declares (its
options, capabilities, workloads, the checkers that cannot judge it, its command lines and status
parsing) is asserted in its own tests (``tests/adapters/<name>/``); here, that what it declares holds:

* the harness finds it by name and lists every option it declares;
* a test asks only for what it declares: another workload, or a nemesis that needs a capability it lacks,
  is refused before anything is deployed with a sentence naming what is missing (and why, where the
  adapter says it cannot have it), and a run without ``--nemesis`` gets a default it can take;
* without its download a run is one line saying how to fetch it, and ``--db-opt binary=`` (where
  declared) replaces the download;
* setup uploads the download and its processes write where the logs are collected from; teardown
  removes everything setup made even when the kill fails; a status that cannot be had says whether the
  node certainly did not answer; each workload client is at home on the node its process number picks.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import inspect
import pkgutil
import re
import shlex
import typing
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import httpx
import pytest

import adapters
from harness.arguments import default_nemesis_of
from harness.cli import main
from harness.compose import compose
from harness.db import (
    DB,
    Deployment,
    StatusError,
    capabilities,
    capability_named,
    declared_capabilities,
    has_capability,
    nemesis_needs,
)
from harness.db.client import PinnedClient
from harness.db.debian import CachedBinary
from harness.db.plugin import DBContext, DBPlugin, PluginError, installed, load_plugin
from harness.spec import ConfigError, TestSpec
from harness.subcommand import fault_packages
from nemesis.generator import PACKAGES
from nemesis.remote import CommandResult
from tests.adapters.conftest import (
    RecordingRemote,
    from_debian,
    installer,
    opened_clients,
    shipped,
    succeeded,
)
from workloads.generator import workload_names

REPOSITORY = Path(__file__).resolve().parents[2]
NODES = ("n1", "n2", "n3")
DEPLOYMENT = Deployment(NODES, {n: f"peer-{n}" for n in NODES},
                        {n: f"10.9.0.{i}" for i, n in enumerate(NODES, 1)})
"""Three nodes as an adapter sees them: the peers reach each other by name, the controller by address."""
FIRST = NODES[0]


def _adapter_class(name: str) -> type:
    """The DB adapter class the plugin ``name`` builds: what its ``create`` returns."""
    return typing.get_type_hints(load_plugin(name).create)["return"]


SHIPPED = tuple(shipped())
FROM_DEBIAN = tuple(from_debian())
WITH_BINARY = tuple(n for n in FROM_DEBIAN if any(o.name == "binary" for o in load_plugin(n).options))
"""Those that take a binary of the user's own (``--db-opt binary=PATH``) instead of the download."""
OVER_HTTP = tuple(n for n in FROM_DEBIAN if "transport" in inspect.signature(_adapter_class(n)).parameters)
"""Those whose status requests go through an ``httpx`` transport the adapter takes."""

CONTEXT = DBContext(seed=1, nodes=NODES, workload=workload_names()[0])
"""The test every adapter here is built for."""


def _built(name: str) -> DB:
    """The adapter as its plugin builds it with every option at its default."""
    plugin = load_plugin(name)
    return plugin.build(plugin.resolve({}), CONTEXT)


def _harness(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _left_after(removed: list[str], paths: list[str]) -> list[str]:
    """Those of ``paths`` that ``rm -rf`` of ``removed`` leaves: neither removed nor inside a removed
    directory."""
    gone = [PurePosixPath(r) for r in removed]
    return [p for p in paths if not any(r == PurePosixPath(p) or r in PurePosixPath(p).parents for r in gone)]


def _made_directories(commands: list[str]) -> list[str]:
    """The directories ``mkdir -p`` lines of ``commands`` create (a setup's own, and each daemon's)."""
    return [path for command in commands for line in command.splitlines() if line.startswith("mkdir -p ")
            for path in shlex.split(line)[2:]]


# -- registration and options -------------------------------------------------------------------------------


def test_every_adapter_package_is_a_plugin_registered_under_its_own_name() -> None:
    packages = [m.name for m in pkgutil.iter_modules(adapters.__path__) if m.ispkg]
    assert packages and {name: installed()[name].value for name in SHIPPED} == {
        package: f"{adapters.__name__}.{package}:plugin" for package in packages}


@pytest.mark.parametrize("name", SHIPPED)
def test_the_harness_finds_it_by_name_and_lists_every_option(name: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    plugin = load_plugin(name)
    assert isinstance(plugin, DBPlugin) and plugin.name == name
    code, output = _harness(capsys, "dbs", name)
    assert code == 0 and f"{name}  {plugin.summary}" in output
    for option in plugin.options:
        assert f"--db-opt {option.describe()}" in output
        assert option.flag is None or f"(flag {option.flag})" in output


@pytest.mark.parametrize("name", FROM_DEBIAN)
@pytest.mark.usefixtures("empty_cache")
def test_without_its_download_a_run_is_one_line_saying_how_to_fetch_it(name: str,
                                                                        refused: Callable[..., str]) -> None:
    line = refused("--db", name)
    assert "is not on the controller" in line and installer(name).hint in line
    package = from_debian()[name]
    assert f"python -m {package}" in line and importlib.util.find_spec(f"{package}.__main__") is not None
    for script in re.findall(r"scripts/[\w.-]+\.sh", line):
        assert (REPOSITORY / script).is_file(), script


@pytest.mark.parametrize("name", WITH_BINARY)
@pytest.mark.usefixtures("empty_cache")
def test_a_binary_of_ones_own_is_uploaded_instead_of_the_download(name: str, tmp_path: Path) -> None:
    mine = tmp_path / f"my-{name}"
    mine.write_bytes(b"#!/bin/sh\n")
    mine.chmod(0o755)
    plugin = load_plugin(name)
    db: Any = plugin.build(plugin.resolve({"binary": str(mine)}), CONTEXT)
    assert {key: db.version()[key] for key in ("binary", "version", "sha256")} == {
        "binary": str(mine.resolve()), "version": "given by --db-opt binary",
        "sha256": hashlib.sha256(mine.read_bytes()).hexdigest()}
    remote = RecordingRemote()
    db.setup(DEPLOYMENT, FIRST, remote)
    assert [source for source, _ in remote.uploads] == [str(mine.resolve())]
    with pytest.raises(PluginError, match="--db-opt binary=/nonexistent/x: no executable file there"):
        plugin.resolve({"binary": "/nonexistent/x"})


# -- what a test may ask for --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.usefixtures("downloads")
def test_a_test_may_ask_for_what_the_adapter_declares_and_nothing_else(name: str) -> None:
    db: Any = _built(name)
    assert capabilities(db) == list(declared_capabilities(db) or ())  # every declared one is known
    workloads = tuple(db.workloads)
    assert workloads and set(workloads) <= set(workload_names())
    for workload in workload_names():
        spec = TestSpec(seed=1, db=name, workload=workload, nemesis=("partition",))
        if workload in workloads:
            assert compose(spec).spec.workload == workload
            continue
        refusal = f"runs the workloads {', '.join(workloads)}, not {workload!r}"
        with pytest.raises(ConfigError, match=re.escape(refusal)):
            compose(spec)
    impossible = getattr(db, "impossible", None) or {}
    for nemesis in PACKAGES:
        spec = TestSpec(seed=1, db=name, workload=workloads[0], nemesis=(nemesis,))
        needs = nemesis_needs().get(nemesis, ())
        lacking = [need for need in needs if not has_capability(db, capability_named(need))]
        if not lacking:
            assert compose(spec).packages == (nemesis,)
            continue
        with pytest.raises(ConfigError) as refused:
            compose(spec)
        assert f"the {nemesis!r} nemesis needs the DB capability {lacking[0]}" in str(refused.value)
        assert impossible.get(lacking[0], "") in str(refused.value)


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.usefixtures("downloads")
def test_a_run_without_nemesis_gets_a_default_the_adapter_can_take(
    name: str, capsys: pytest.CaptureFixture[str],
) -> None:
    plugin = load_plugin(name)
    default = default_nemesis_of(plugin)
    code, output = _harness(capsys, "run", "--db", name, "--help")
    text = " ".join(output.split())
    assert code == 0 and f"default {default}" in text
    assert plugin.default_nemesis is None or f"default {default}, the {name} DB's" in text
    for workload in _built(name).workloads:  # type: ignore[attr-defined]
        spec = TestSpec(seed=1, db=name, workload=workload, nemesis=fault_packages(default))
        assert compose(spec).packages == fault_packages(default)


# -- on a node ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FROM_DEBIAN)
def test_setup_uploads_the_download_and_its_processes_write_where_logs_are_collected(
    name: str, downloads: dict[str, CachedBinary],
) -> None:
    db: Any = _built(name)
    remote = RecordingRemote()
    db.setup(DEPLOYMENT, FIRST, remote)
    assert [source for source, _ in remote.uploads] == [str(downloads[name].path)]
    logs = db.log_files(DEPLOYMENT, FIRST)
    assert logs and len(set(logs.values())) == len(logs)
    for log in logs:
        assert any(f">> {shlex.quote(log)} 2>&1" in command for command in remote.commands), log


@pytest.mark.parametrize("name", FROM_DEBIAN)
@pytest.mark.usefixtures("downloads")
def test_teardown_removes_all_that_setup_made_even_when_the_kill_fails(name: str) -> None:
    def kill_fails(cmd: str) -> CommandResult:
        if "kill -KILL" in cmd:
            raise RuntimeError(f"{FIRST}: exec failed")
        return succeeded(cmd)

    db: Any = _built(name)
    remote = RecordingRemote()
    db.setup(DEPLOYMENT, FIRST, remote)
    made = [*(target for _, target in remote.uploads), *remote.files, *db.log_files(DEPLOYMENT, FIRST),
            *_made_directories(remote.commands)]
    remote.commands.clear()
    remote.answer = kill_fails
    with pytest.raises(RuntimeError, match="exec failed"):
        db.teardown(DEPLOYMENT, FIRST, remote)
    assert any("kill -KILL" in command for command in remote.commands)
    removal = shlex.split(remote.commands[-1])
    assert removal[:2] == ["rm", "-rf"] and made
    assert _left_after(removal[2:], made) == []


@pytest.mark.parametrize("name", OVER_HTTP)
def test_a_status_that_cannot_be_had_says_whether_the_node_certainly_did_not_answer(
    name: str, downloads: dict[str, CachedBinary],
) -> None:
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out")

    for handler, definite in ((refused, True), (slow, False)):
        db = _adapter_class(name)(downloads[name], transport=httpx.MockTransport(handler))
        with pytest.raises(StatusError) as failed:
            asyncio.run(db.status(DEPLOYMENT, FIRST, 1.0))
        assert failed.value.definite is definite, handler.__name__


@pytest.mark.parametrize("name", FROM_DEBIAN)
@pytest.mark.usefixtures("downloads")
def test_each_client_is_at_home_on_the_node_its_process_number_picks(name: str) -> None:
    processes = range(2 * len(NODES) + 1)
    clients = opened_clients(_built(name), DEPLOYMENT, processes)
    assert all(isinstance(client, PinnedClient) for client in clients)
    assert [client.home for client in clients] == [NODES[p % len(NODES)] for p in processes]
