"""DB adapters: capabilities are checked when a test is composed; the cluster adapter's install and argv
(the adapter's own tests are in tests/adapters/cluster/)."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest

from adapters.cluster.db import DATA_DIR, JOURNAL_FILE, PID_FILE, ClusterDB, package_tarball
from harness.db import (
    CAPABILITY_METHODS,
    Deployment,
    MissingCapability,
    Process,
    StatusError,
    capabilities,
    check_capabilities,
    db_version,
    declared_capabilities,
    has_capability,
    inferred_capabilities,
    not_applicable,
)
from harness.db import plugin as plugin_module
from harness.db.plugin import ENTRY_POINT_GROUP, DBContext, installed, load_plugin
from nemesis.shell import FakeTime
from tests.harness import capability_extension

NODES = ("n1", "n2", "n3")
DEPLOYMENT = Deployment(
    nodes=NODES,
    peer_hosts={"n1": "10.0.0.11", "n2": "10.0.0.12", "n3": "10.0.0.13"},
    client_hosts={"n1": "172.20.0.2", "n2": "172.20.0.3", "n3": "172.20.0.4"},
)


class MinimalDB:
    """A system that can only be installed and removed."""

    name = "minimal"

    def setup(self, deployment: Deployment, node: str, remote: Any) -> None: ...

    def teardown(self, deployment: Deployment, node: str, remote: Any) -> None: ...


class ClientDB(MinimalDB):
    """A system with a register client and no LSNs."""

    name = "client"
    workloads = ("register",)
    not_applicable = {"lsn-monotonicity": "it has no LSNs"}

    async def open_client(self, deployment: Deployment, process: int, timeout: float) -> Any: ...


class KillableDB(MinimalDB):
    name = "killable"

    def start(self, deployment: Deployment, node: str, remote: Any) -> None: ...

    def kill(self, deployment: Deployment, node: str, remote: Any) -> None: ...

    def is_running(self, deployment: Deployment, node: str, remote: Any) -> bool:
        return True

    async def status(self, deployment: Deployment, node: str, timeout: float) -> dict[str, Any]:
        return {}


def test_a_fault_the_db_cannot_take_fails_before_the_run_naming_the_capability() -> None:
    with pytest.raises(MissingCapability) as caught:
        check_capabilities(KillableDB(), ["partition", "kill", "pause"])
    message = str(caught.value)
    assert "'pause' nemesis needs the DB capability Pause (pause(), resume())" in message
    assert "which the 'killable' DB adapter does not have; drop 'pause' from --nemesis" in message
    with pytest.raises(MissingCapability, match=r"the 'kill' nemesis needs the DB capability Process"):
        check_capabilities(MinimalDB(), ["kill"])
    # partitions may be aimed at the leader: that needs Status
    with pytest.raises(MissingCapability, match="the 'partition' nemesis needs the DB capability Status"):
        check_capabilities(MinimalDB(), ["partition"])
    with pytest.raises(MissingCapability, match="not a DB adapter"):
        check_capabilities(object(), [])


def test_a_workload_needs_a_client_that_runs_it() -> None:
    with pytest.raises(MissingCapability, match="the 'register' workload needs the DB capability Clients"):
        check_capabilities(MinimalDB(), [], workload="register")
    with pytest.raises(MissingCapability, match="client runs the workloads register, not 'queue'"):
        check_capabilities(ClientDB(), [], workload="queue")
    check_capabilities(ClientDB(), [], workload="register")


def test_what_the_db_can_take_passes() -> None:
    check_capabilities(KillableDB(), ["partition", "kill", "loss"])
    check_capabilities(MinimalDB(), ["loss", "latency"])
    assert capabilities(KillableDB()) == ["Process", "Status"]
    assert capabilities(ClusterDB()) == list(ClusterDB.capabilities)
    check_capabilities(ClusterDB(), ["partition", "kill", "pause", "clock", "loss", "latency"], workload="queue")


@pytest.mark.parametrize("name", sorted(installed()))
def test_every_installed_adapter_declares_what_it_implements_and_composes(name: str) -> None:
    plugin = load_plugin(name)
    db = plugin.build(plugin.resolve({}), DBContext(seed=1, nodes=NODES, workload="register"))
    check_capabilities(db, [])  # every declared capability's methods are there, with their arguments
    declared = declared_capabilities(db)
    assert declared is None or set(declared) == set(inferred_capabilities(db)), "a stale declaration"


class PauseOnlyDB(KillableDB):
    """Declares Process and Status, has Pause's methods too: the declaration is what counts."""

    name = "declared"
    capabilities = ("Process", "Status")

    def pause(self, deployment: Deployment, node: str, remote: Any) -> None: ...

    def resume(self, deployment: Deployment, node: str, remote: Any) -> None: ...


def test_a_declared_list_is_authoritative() -> None:
    assert "Pause" in inferred_capabilities(PauseOnlyDB())
    assert capabilities(PauseOnlyDB()) == ["Process", "Status"]
    check_capabilities(PauseOnlyDB(), ["kill", "partition"])
    with pytest.raises(MissingCapability, match=r"does not have \(it has the methods but does not declare it in its "
                                                r"capabilities\); drop 'pause' from --nemesis or add Pause to the "
                                                r"adapter's capabilities"):
        check_capabilities(PauseOnlyDB(), ["pause"])


class SyncStatusDB(KillableDB):
    name = "sync-status"
    capabilities = ("Process", "Status")

    def status(self, deployment: Deployment, node: str, timeout: float) -> dict[str, Any]:  # type: ignore[override]
        return {}


class AsyncKillDB(KillableDB):
    name = "async-kill"
    capabilities = ("Process", "Status")

    async def kill(self, deployment: Deployment, node: str, remote: Any) -> None:  # type: ignore[override]
        ...


@pytest.mark.parametrize(("db", "message"), [
    (SyncStatusDB(), "the 'sync-status' DB adapter declares the capability Status (status()), but its status() is "
                     "not a coroutine function"),
    (AsyncKillDB(), "the 'async-kill' DB adapter declares the capability Process (start(), kill(), is_running()), "
                    "but its kill() is a coroutine function"),
    (type("Unknown", (KillableDB,), {"name": "unknown", "capabilities": ("Process", "Teleport")})(),
     "the 'unknown' DB adapter declares the capability 'Teleport', which the harness does not know"),
    (type("Bare", (KillableDB,), {"name": "bare", "capabilities": "Process"})(),
     "the 'bare' DB adapter's capabilities must be a tuple of capability names"),
    (type("Missing", (MinimalDB,), {"name": "missing", "capabilities": ("Pause",)})(),
     "the 'missing' DB adapter declares the capability Pause (pause(), resume()), but it has no method pause()"),
])
def test_a_declared_capability_is_checked_against_its_protocol_when_composing(db: object, message: str) -> None:
    with pytest.raises(MissingCapability) as caught:
        check_capabilities(db, [])
    assert str(caught.value).startswith(message), str(caught.value)
    assert str(caught.value).count(". ") == 0  # one sentence


class ShadowingDB(KillableDB):
    """Declares nothing; its ``data_file`` is a path, not the method ``DataFile`` asks for."""

    name = "shadowing"

    def __init__(self) -> None:
        self.data_file = "/var/lib/shadowing/data"


class DataFileDB(KillableDB):
    name = "data-file"

    def data_file(self, deployment: Deployment, node: str) -> str:
        return f"/var/lib/{node}/data"


class WrongArityDB(KillableDB):
    name = "wrong-arity"
    capabilities = ("Process", "Status", "DataFile")

    def data_file(self, node: str) -> str:
        return f"/var/lib/{node}/data"


def test_an_attribute_named_like_a_method_claims_no_capability(monkeypatch: pytest.MonkeyPatch) -> None:
    capability_extension.add(monkeypatch.setitem)
    assert "DataFile" not in capabilities(ShadowingDB())
    with pytest.raises(MissingCapability) as caught:
        check_capabilities(ShadowingDB(), [capability_extension.NEMESIS])
    assert str(caught.value).startswith(
        "the 'truncate-tail' nemesis needs the DB capability DataFile (data_file()), which the 'shadowing' DB "
        "adapter does not have (its data_file is a str, not a method)")
    # The same capability, implemented: inferred, and the nemesis composes.
    assert capabilities(DataFileDB()) == ["Process", "Status", "DataFile"]
    check_capabilities(DataFileDB(), [capability_extension.NEMESIS])


def test_a_declared_capability_whose_method_takes_other_arguments_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    capability_extension.add(monkeypatch.setitem)
    with pytest.raises(MissingCapability, match=r"^the 'wrong-arity' DB adapter declares the capability DataFile "
                                                r"\(data_file\(\)\), but its data_file\(\) does not take the "
                                                r"arguments \(deployment, node\)$"):
        check_capabilities(WrongArityDB(), [])
    assert "DataFile" not in inferred_capabilities(WrongArityDB())
    monkeypatch.delitem(CAPABILITY_METHODS, capability_extension.DataFile)
    with pytest.raises(MissingCapability, match="declares the capability 'DataFile', which the harness does not know"):
        check_capabilities(WrongArityDB(), [])


def test_what_cannot_be_judged_is_what_the_adapter_declares_and_terms_without_status_or_journals() -> None:
    assert not_applicable(ClusterDB()) == {}
    assert not_applicable(MinimalDB()) == {
        "single-leader-per-term": "the DB adapter reports no leaders or terms (no Status capability, no journals)"}
    assert not_applicable(ClientDB()) == {"lsn-monotonicity": "it has no LSNs",
                                          "single-leader-per-term": not_applicable(MinimalDB())["single-leader-per-term"]}
    assert db_version(MinimalDB()) is None and db_version(ClusterDB())["mode"] == "blazingmq"


def test_a_deployment_needs_every_address() -> None:
    with pytest.raises(ValueError, match="no address for node"):
        Deployment(nodes=("n1", "n2"), peer_hosts={"n1": "a"}, client_hosts={"n1": "a", "n2": "b"})


def test_the_node_command_passes_mode_bugs_and_peers_through() -> None:
    db = ClusterDB("raft", ["vote-twice", "stale-read"], node_args=["--fsync", "never"], seed=7)
    argv = db.command(DEPLOYMENT, "n2")
    assert argv[:3] == ["python3", "-m", "cluster.node"]
    options = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert options["--id"] == "n2"
    assert options["--listen"] == "0.0.0.0:7000"
    assert options["--peers"] == "n1=10.0.0.11:7000,n3=10.0.0.13:7000"
    assert options["--data-dir"] == DATA_DIR
    assert options["--mode"] == "raft"
    assert options["--pid-file"] == PID_FILE
    assert options["--seed"] == "7001"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--bug"] == ["vote-twice", "stale-read"]
    assert argv[-2:] == ["--fsync", "never"]
    assert db.client_nodes(DEPLOYMENT)["n3"] == ("172.20.0.4", 7000)
    assert db.log_files(DEPLOYMENT, "n1")[JOURNAL_FILE] == "journal.jsonl"


def test_faketime_environment_follows_the_recipe_only_when_asked() -> None:
    assert "LD_PRELOAD" not in ClusterDB().environment()
    faketime = FakeTime()
    env = ClusterDB(faketime=faketime).environment()
    assert env["LD_PRELOAD"] == faketime.library
    assert env["FAKETIME_TIMESTAMP_FILE"] == faketime.control_file
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1" and env["FAKETIME_NO_CACHE"] == "1"
    assert "FAKETIME" not in env
    assert ClusterDB(faketime=faketime).faketime_control_file(DEPLOYMENT, "n1") == faketime.control_file
    with pytest.raises(RuntimeError, match="without libfaketime"):
        ClusterDB().faketime_control_file(DEPLOYMENT, "n1")


def test_the_package_tarball_is_reproducible_and_holds_only_sources(tmp_path) -> None:
    package = tmp_path / "cluster"
    (package / "core" / "__pycache__").mkdir(parents=True)
    (package / "__init__.py").write_text('"""x"""\n')
    (package / "core" / "node.py").write_text("X = 1\n")
    (package / "core" / "__pycache__" / "node.cpython-311.pyc").write_bytes(b"\0")
    first = package_tarball(package)
    (package / "core" / "node.py").touch()
    assert package_tarball(package) == first
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        assert tar.getnames() == ["cluster/__init__.py", "cluster/core/node.py"]
        assert {m.uid for m in tar.getmembers()} == {0}
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="not a Python package"):
        package_tarball(tmp_path / "empty")
    assert ClusterDB(package_dir=package).version()["sha256"] == ClusterDB(package_dir=package).version()["sha256"]


def test_status_errors_say_whether_the_node_certainly_did_not_answer() -> None:
    assert StatusError("connection refused", definite=True).definite
    assert not StatusError("timeout", definite=False).definite


def test_the_package_tarball_is_made_again_only_when_a_source_changes(tmp_path) -> None:
    from adapters.cluster.db import _cached_tarball

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("A = 1\n")
    first = _cached_tarball(package)
    assert _cached_tarball(package) is first and first == package_tarball(package)
    (package / "more.py").write_text("B = 2\n")
    second = _cached_tarball(package)
    assert second != first and second == package_tarball(package)
    (package / "more.py").write_text("B = 23\n")
    assert _cached_tarball(package) == package_tarball(package) != second


def _distribution(site: Path, name: str, plugin: str) -> None:
    """A distribution installed in ``site`` that registers the DB plugin ``plugin``."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{plugin} = {name}:plugin\n")


def _touched(directory: Path, second: int) -> None:
    """``directory`` modified at ``second`` (a file's time moves in steps of a clock tick: two changes made
    within one tick can leave the same time, so the test sets it)."""
    os.utime(directory, ns=(second * 10**9, second * 10**9))


def test_the_plugins_are_found_again_when_a_distribution_comes_or_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    before = installed()
    monkeypatch.syspath_prepend(str(site))
    assert installed() == before
    _distribution(site, "first_chaos", "first")
    _touched(site, 1)
    assert set(installed()) == {*before, "first"}
    _distribution(site, "second_chaos", "second")
    _touched(site, 2)
    assert set(installed()) == {*before, "first", "second"}
    shutil.rmtree(site / "first_chaos-0.1.dist-info")
    _touched(site, 3)
    found = installed()
    assert set(found) == {*before, "second"}
    assert found["second"].value == "second_chaos:plugin"
    # Nothing changed: the scan is not made again.
    with monkeypatch.context() as patch:
        patch.setattr(plugin_module, "entry_points", lambda **_: pytest.fail("the entry points were read"))
        assert installed() == found
        installed()["other"] = None  # a caller's copy: the kept scan is untouched
        assert installed() == found


def test_a_method_replaced_on_its_class_is_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    assert has_capability(KillableDB(), Process)
    assert has_capability(KillableDB(), Process)  # the same class's functions: the kept answers
    monkeypatch.setattr(KillableDB, "kill", lambda self, deployment: None)
    assert not has_capability(KillableDB(), Process)
    monkeypatch.setattr(KillableDB, "kill", lambda self, deployment, node, remote: None)
    assert has_capability(KillableDB(), Process)
    db = KillableDB()
    db.start = lambda deployment: None  # an instance's own function, checked as it is
    assert not has_capability(db, Process)
