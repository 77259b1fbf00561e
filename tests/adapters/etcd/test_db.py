"""The etcd adapter without containers: the member's argv, the shell commands it sends, status from
``raft.status`` (the current term, roles, leader names), and what it can and cannot take. What every
shipped adapter does on a node (teardown, status errors, clients' homes) is tested in
tests/adapters/test_shipped.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.etcd.db import BINARY, DATA_DIR, LOG_FILE, PID_FILE, EtcdDB, member_names, status_of
from adapters.etcd.install import EtcdBinary
from harness.db import Deployment, NodeStartError, StatusError, capabilities, not_applicable
from nemesis.remote import CommandResult
from tests.adapters.conftest import RecordingRemote, opened_clients

NODES = ("n1", "n2", "n3")
DEPLOYMENT = Deployment(NODES, {n: f"peer-{n}" for n in NODES}, {n: f"10.9.0.{i}" for i, n in enumerate(NODES, 1)})
BINARY_ON_CONTROLLER = EtcdBinary(Path("/cache/etcd"), "etcd-server 3.4.23", "ab" * 32)


def _db(handler: Callable[[httpx.Request], httpx.Response] | None = None, **options: Any) -> EtcdDB:
    transport = httpx.MockTransport(handler) if handler is not None else None
    return EtcdDB(BINARY_ON_CONTROLLER, transport=transport, **options)


def _flags(argv: list[str]) -> dict[str, str]:
    return dict(zip(argv[1::2], argv[2::2], strict=True))


def test_each_member_starts_with_the_whole_static_cluster_and_its_own_urls() -> None:
    argv = _db(heartbeat_ms=50, election_timeout_ms=500).command(DEPLOYMENT, "n2")
    assert argv[0] == BINARY
    flags = _flags(argv)
    assert flags["--name"] == "n2" and flags["--data-dir"] == DATA_DIR
    assert flags["--initial-cluster"] == (
        "n1=http://peer-n1:2380,n2=http://peer-n2:2380,n3=http://peer-n3:2380")
    assert flags["--initial-advertise-peer-urls"] == "http://peer-n2:2380"
    assert flags["--advertise-client-urls"] == "http://peer-n2:2379"
    assert flags["--listen-client-urls"] == "http://0.0.0.0:2379"
    assert flags["--initial-cluster-state"] == "new"
    assert (flags["--heartbeat-interval"], flags["--election-timeout"]) == ("50", "500")


def test_setup_uploads_the_binary_then_starts_the_member_in_the_background_and_waits_for_its_port() -> None:
    remote = RecordingRemote()
    _db().setup(DEPLOYMENT, "n1", remote)  # type: ignore[arg-type]
    assert remote.uploads == [("/cache/etcd", BINARY)]
    start = remote.commands[-1]
    assert f"nohup {BINARY} --name n1 " in start and f">> {LOG_FILE} 2>&1 < /dev/null &" in start
    assert f"echo $launched > {PID_FILE}" in start and "sport = :2379" in start


def test_the_member_is_a_daemon_of_its_binary_and_name() -> None:
    daemon = _db().daemon(DEPLOYMENT, "n3")
    assert " ".join(daemon.argv).startswith(f"{BINARY} --name n3 ")
    assert (daemon.pid_file, daemon.output_file) == (PID_FILE, LOG_FILE) and DATA_DIR in daemon.directories


def test_a_member_that_does_not_start_raises_with_the_tail_of_its_log() -> None:
    def answer(cmd: str) -> CommandResult:
        if cmd.startswith("tail"):
            return CommandResult(0, "member n1 has already been bootstrapped\n", "")
        return CommandResult(3, "the process exited\n", "")

    with pytest.raises(NodeStartError, match="(?s)etcd did not start \\(the process exited\\).*already been bootstrapped"):
        _db().start(DEPLOYMENT, "n1", RecordingRemote(answer))  # type: ignore[arg-type]


def test_pause_goes_only_to_this_members_etcd_and_waits_until_it_is_stopped() -> None:
    remote = RecordingRemote()
    _db().pause(DEPLOYMENT, "n3", remote)  # type: ignore[arg-type]
    (script,) = remote.commands
    assert f"< {PID_FILE}.id" in script  # the process started there, by its record
    assert script.index('kill -STOP "$pid"') < script.index('= T ]')


def test_pausing_a_member_that_is_not_running_is_an_error_but_killing_it_is_not() -> None:
    remote = RecordingRemote(lambda cmd: CommandResult(0, "not running\n", ""))
    db = _db()
    db.kill(DEPLOYMENT, "n1", remote)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="n1: etcd is not running, so it cannot take SIGSTOP"):
        db.pause(DEPLOYMENT, "n1", remote)  # type: ignore[arg-type]


RAFT_LEADER = {"id": "a1", "term": 7, "vote": "a1", "commit": 40, "lead": "a1", "raftState": "StateLeader",
               "applied": 40, "progress": {}, "leadtransferee": "0"}


def test_status_is_the_raft_nodes_current_term_role_and_leader_by_name() -> None:
    names = {"a1": "n1", "b2": "n2"}
    assert status_of("n1", RAFT_LEADER, names) == {
        "node": "n1", "role": "leader", "term": 7, "leader": "n1", "commit_lsn": None, "last_lsn": None}
    follower = {**RAFT_LEADER, "id": "b2", "raftState": "StateFollower", "term": 8, "lead": "0"}
    assert status_of("n2", follower, names)["role"] == "follower"
    assert status_of("n2", follower, names)["leader"] is None
    assert status_of("n2", {**follower, "raftState": "StatePreCandidate"}, names)["role"] == "pre-candidate"
    assert status_of("n2", {**follower, "lead": "ff"}, names)["leader"] is None  # an id nobody named


def test_member_ids_are_decimal_in_the_member_list_and_hex_in_raft() -> None:
    listing = {"members": [{"ID": "15101859335780327642", "name": "n1"}, {"ID": "17", "name": ""}]}
    assert member_names(listing) == {"d194950d851a60da": "n1"}


def _vars_and_members(raft: dict[str, Any], members: list[dict[str, str]]) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/debug/vars":
            return httpx.Response(200, json={"cmdline": ["etcd"], "raft.status": raft})
        if request.url.path == "/v3/cluster/member/list":
            return httpx.Response(200, json={"header": {}, "members": members})
        return httpx.Response(404)

    return handler


def test_status_asks_debug_vars_and_learns_the_leaders_name_from_the_member_list() -> None:
    raft = {**RAFT_LEADER, "id": "b", "raftState": "StateFollower", "lead": "c"}
    db = _db(_vars_and_members(raft, [{"ID": "11", "name": "n2"}, {"ID": "12", "name": "n3"}]))
    status = asyncio.run(db.status(DEPLOYMENT, "n2", 1.0))
    assert status["role"] == "follower" and status["term"] == 7 and status["leader"] == "n3"


def test_debug_vars_without_raft_status_is_a_status_error() -> None:
    with pytest.raises(StatusError, match="no raft.status"):
        asyncio.run(_db(lambda r: httpx.Response(200, json={"cmdline": []})).status(DEPLOYMENT, "n1", 1.0))


def test_capabilities_everything_but_clock_skew_and_catch_up_and_every_checker_applies() -> None:
    db = _db()
    assert capabilities(db) == ["Clients", "Process", "Pause", "Status", "LogFiles"]
    assert db.workloads == ("register",) and "ClockSkew" in db.impossible
    assert not_applicable(db) == {}
    assert db.log_files(DEPLOYMENT, "n1") == {LOG_FILE: "etcd.log"}


def test_every_client_reads_as_the_adapter_was_told() -> None:
    clients = opened_clients(_db(reads="serializable"), DEPLOYMENT, range(len(NODES)))
    assert [client.reads for client in clients] == ["serializable"] * len(NODES)
