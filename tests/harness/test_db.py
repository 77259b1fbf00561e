"""DB adapters: capabilities are checked when a test is composed; the cluster adapter's install and argv
(the adapter's own tests are in tests/adapters/cluster/)."""

from __future__ import annotations

import io
import tarfile
from typing import Any

import pytest

from adapters.cluster.db import DATA_DIR, JOURNAL_FILE, PID_FILE, ClusterDB, package_tarball
from harness.db import (
    Deployment,
    MissingCapability,
    StatusError,
    capabilities,
    check_capabilities,
    db_version,
    not_applicable,
)
from nemesis.shell import FakeTime

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
    assert capabilities(ClusterDB()) == ["Clients", "Simulation", "Process", "Pause", "Status", "LogFiles",
                                         "ClockSkew", "AuxiliaryProcesses"]
    check_capabilities(ClusterDB(), ["partition", "kill", "pause", "clock", "loss", "latency"], workload="queue")


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
