"""The NATS adapter without containers: each server's configuration, the shell commands it sends, status
from ``/jsz`` (the meta group at the top, a group per stream), and what it can and cannot take. What every
shipped adapter does on a node (teardown, status errors, clients' homes) is tested in
tests/adapters/test_shipped.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.nats.db import (
    BINARY,
    CONFIG_FILE,
    DATA_DIR,
    LOG_FILE,
    PID_FILE,
    NatsDB,
    server_config,
    status_of,
)
from adapters.nats.install import NatsBinary
from harness.db import Deployment, StatusError, capabilities, not_applicable
from tests.adapters.conftest import RecordingRemote, opened_clients

NODES = ("n1", "n2", "n3")
DEPLOYMENT = Deployment(NODES, {n: f"peer-{n}" for n in NODES}, {n: f"10.9.0.{i}" for i, n in enumerate(NODES, 1)})
BINARY_ON_CONTROLLER = NatsBinary(Path("/cache/nats-server"), "nats-server 2.9.10-1+b3", "ab" * 32)


def _db(handler: Callable[[httpx.Request], httpx.Response] | None = None, **options: Any) -> NatsDB:
    transport = httpx.MockTransport(handler) if handler is not None else None
    return NatsDB(BINARY_ON_CONTROLLER, transport=transport, **options)


def test_each_server_is_named_after_its_node_and_routes_to_every_other_one() -> None:
    config = server_config(DEPLOYMENT, "n2")
    assert 'server_name: "n2"\n' in config
    assert 'listen: "0.0.0.0:4222"' in config and 'http: "0.0.0.0:8222"' in config
    assert f'store_dir: "{DATA_DIR}"' in config
    assert 'name: "chaos"' in config and 'listen: "0.0.0.0:6222"' in config
    assert '"nats-route://peer-n1:6222"' in config and '"nats-route://peer-n3:6222"' in config
    assert "peer-n2" not in config
    assert config.count("{") == config.count("}") == 2


def test_setup_uploads_the_binary_and_config_then_starts_the_server_and_waits_for_its_client_port() -> None:
    remote = RecordingRemote()
    _db().setup(DEPLOYMENT, "n3", remote)  # type: ignore[arg-type]
    assert remote.uploads == [("/cache/nats-server", BINARY)]
    assert remote.files[CONFIG_FILE].decode() == server_config(DEPLOYMENT, "n3")
    start = remote.commands[-1]
    assert f"{BINARY} -c {CONFIG_FILE}" in start and LOG_FILE in start and "4222" in start


def test_the_server_is_a_daemon_with_its_pid_file_and_log() -> None:
    daemon = _db().daemon(DEPLOYMENT, "n2")
    assert list(daemon.argv) == [BINARY, "-c", CONFIG_FILE]
    assert (daemon.pid_file, daemon.output_file) == (PID_FILE, LOG_FILE) and DATA_DIR in daemon.directories


def _stream(name: str, leader: str, last_seq: int) -> dict[str, Any]:
    return {"name": name, "cluster": {"name": "chaos", "leader": leader, "replicas": []},
            "state": {"messages": last_seq, "first_seq": 1, "last_seq": last_seq}}


JSZ = {
    "server_id": "NABC",
    "meta_cluster": {"name": "chaos", "leader": "n2", "peer": "x", "replicas": []},
    "account_details": [{"name": "$G", "id": "$G", "stream_detail": [_stream("l1", "n3", 4), _stream("l0", "n1", 9)]}],
}


def test_status_is_the_meta_group_at_the_top_and_a_group_per_stream_with_no_terms() -> None:
    status = status_of("n1", JSZ)
    assert {k: status[k] for k in ("node", "role", "term", "leader")} == {
        "node": "n1", "role": "follower", "term": None, "leader": "n2"}
    assert status["groups"] == [
        {"group": "l0", "role": "leader", "term": None, "leader": "n1", "commit_lsn": None, "last_lsn": [0, 9]},
        {"group": "l1", "role": "follower", "term": None, "leader": "n3", "commit_lsn": None, "last_lsn": [0, 4]},
    ]
    assert status_of("n2", JSZ)["role"] == "leader"


def test_a_server_that_knows_no_leader_and_holds_no_stream() -> None:
    lonely = {"meta_cluster": {"name": "chaos", "leader": ""},
              "account_details": [{"stream_detail": [{"name": "l0", "cluster": {"leader": ""}}]}]}
    status = status_of("n3", lonely)
    assert status["role"] == "follower" and status["leader"] is None
    assert status["groups"] == [{"group": "l0", "role": "follower", "term": None, "leader": None,
                                 "commit_lsn": None, "last_lsn": None}]
    assert status_of("n3", {})["groups"] == [] and status_of("n3", {})["leader"] is None


def test_status_asks_the_servers_own_monitoring_endpoint() -> None:
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(200, json=JSZ)

    status = asyncio.run(_db(handler).status(DEPLOYMENT, "n3", 1.0))
    assert asked == ["http://10.9.0.3:8222/jsz?accounts=true&streams=true"]
    assert status["node"] == "n3" and status["leader"] == "n2"


def test_an_answer_without_jetstream_state_is_a_status_error() -> None:
    with pytest.raises(StatusError, match="no JetStream state"):
        asyncio.run(_db(lambda r: httpx.Response(503, text="no")).status(DEPLOYMENT, "n1", 1.0))


def test_capabilities_everything_but_clock_skew_and_catch_up_and_no_terms_to_judge() -> None:
    db = _db()
    assert capabilities(db) == ["Clients", "Process", "Pause", "Status", "LogFiles"]
    assert db.workloads == ("log",) and "ClockSkew" in db.impossible
    assert set(not_applicable(db)) == {"single-leader-per-term"}
    assert db.log_files(DEPLOYMENT, "n1") == {LOG_FILE: "nats.log"}


def test_clients_share_what_streams_exist_and_the_streams_settings() -> None:
    db = _db(replicas=1, storage="memory")
    opened = opened_clients(db, DEPLOYMENT, range(len(NODES)))
    assert all(c.known_streams is db.known_streams and (c.replicas, c.storage) == (1, "memory") for c in opened)
    assert opened[0].addresses["n2"] == "nats://10.9.0.2:4222"
    assert db.version() == {"binary": "/cache/nats-server", "version": "nats-server 2.9.10-1+b3",
                            "sha256": "ab" * 32, "replicas": 1, "storage": "memory"}
