"""The RabbitMQ adapter on its own: configuration and environment per node, status from the management API
(through ``httpx.MockTransport``), and setup and teardown through a recording Remote. What every shipped
adapter does on a node (teardown when the kill fails, status errors, clients' homes) is tested in
tests/adapters/test_shipped.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.rabbitmq.db import (
    BUNDLE_FILE,
    CONFIG_FILE,
    COOKIE_FILE,
    PLUGINS_FILE,
    STATUS_PATH,
    RabbitDB,
    rabbitmq_config,
    server_environment,
    status_of,
)
from adapters.rabbitmq.install import RabbitBundle
from harness.db import Deployment, Status, StatusError, capabilities
from tests.adapters.conftest import RecordingRemote
from workloads.queue import Delivery

DEPLOYMENT = Deployment(nodes=("n1", "n2", "n3"), peer_hosts={"n1": "n1", "n2": "n2", "n3": "n3"},
                        client_hosts={"n1": "10.1.0.1", "n2": "10.1.0.2", "n3": "10.1.0.3"})
BUNDLE = RabbitBundle(Path("/cache/rabbitmq.tar.gz"), "rabbitmq-server 3.10.8-1.1+deb12u1", "ab" * 32, kind="bundle")


def test_the_first_node_starts_alone_and_the_others_join_it() -> None:
    first, other = rabbitmq_config(DEPLOYMENT, "n1"), rabbitmq_config(DEPLOYMENT, "n3")
    assert "peer_discovery" not in first
    assert "cluster_formation.classic_config.nodes.1 = rabbit@n1" in other
    for config in (first, other):
        assert "cluster_partition_handling = pause_minority" in config
        assert "loopback_users.guest = false" in config


def test_the_broker_runs_with_every_path_in_its_environment() -> None:
    env = server_environment("n2")
    assert env["RABBITMQ_NODENAME"] == "rabbit@n2"
    assert env["PATH"].startswith("/opt/chaos-rabbitmq/erlang/bin:")
    assert env["HOME"] == "/var/lib/chaos-rabbitmq"  # where the shared cookie is
    assert env["RUNNING_UNDER_SYSTEMD"] == "true"  # the start script execs the VM: the pid is the broker's
    assert "net_ticktime" in env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"]


def test_each_queue_is_a_group_led_by_the_node_its_metadata_names() -> None:
    status = status_of("n2", [{"name": "q1", "type": "quorum", "leader": "rabbit@n3"},
                              {"name": "q0", "type": "quorum", "leader": "rabbit@n2"},
                              {"name": "c", "type": "classic", "node": "rabbit@n1"}, "junk"])
    assert (status["role"], status["term"], status["leader"]) == ("follower", None, None)
    assert [(g["group"], g["role"], g["leader"], g["term"]) for g in status["groups"]] == [
        ("c", "follower", "n1", None), ("q0", "leader", "n2", None), ("q1", "follower", "n3", None)]


def _db(handler: Any) -> RabbitDB:
    return RabbitDB(BUNDLE, transport=httpx.MockTransport(handler))


def test_status_asks_the_nodes_management_api() -> None:
    asked = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(200, json=[{"name": "q0", "type": "quorum", "leader": "rabbit@n1"}])

    status = asyncio.run(_db(handler).status(DEPLOYMENT, "n1", 1.0))
    assert asked == [f"http://10.1.0.1:15672{STATUS_PATH}".replace("%2F", "%2F")]
    assert status["groups"][0]["role"] == "leader"


def test_an_answer_that_is_not_a_queue_list_may_pass() -> None:
    with pytest.raises(StatusError, match="HTTP 503") as caught:
        asyncio.run(_db(lambda request: httpx.Response(503, text="paused")).status(DEPLOYMENT, "n1", 1.0))
    assert caught.value.definite is False


def test_capabilities_contract_and_what_cannot_be_judged() -> None:
    db = RabbitDB(BUNDLE)
    assert capabilities(db) == ["Clients", "Process", "Pause", "Status", "LogFiles"]
    assert isinstance(db, Status) and db.workloads == ("queue",)
    assert db.delivery == Delivery(dedup=False, redelivery="close", in_flight=False)
    assert set(db.not_applicable) == {"single-leader-per-term", "lsn-monotonicity"}
    with pytest.raises(ValueError, match="queue_type"):
        RabbitDB(BUNDLE, queue_type="stream")


def test_setup_of_a_joining_node_waits_for_the_first_then_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    remote = RecordingRemote()
    RabbitDB(BUNDLE).setup(DEPLOYMENT, "n2", remote)
    assert remote.uploads == [(str(BUNDLE.path), BUNDLE_FILE)]
    assert b"classic_config.nodes.1 = rabbit@n1" in remote.files[CONFIG_FILE]
    assert remote.files[PLUGINS_FILE] == b"[rabbitmq_management].\n" and remote.files[COOKIE_FILE]
    waited = next(i for i, c in enumerate(remote.commands) if c.startswith("python3 -c"))
    started = next(i for i, c in enumerate(remote.commands) if "setsid" in c)
    assert "n1" in remote.commands[waited] and "5672" in remote.commands[waited] and waited < started
    assert "RABBITMQ_NODENAME=rabbit@n2" in remote.commands[started]


def test_the_last_nodes_setup_waits_for_the_cluster_and_declares_q0(monkeypatch: pytest.MonkeyPatch) -> None:
    db, remote = RabbitDB(BUNDLE), RecordingRemote()
    done = []
    monkeypatch.setattr(db, "_await_cluster", lambda deployment, node: done.append(("cluster", node)))
    monkeypatch.setattr(db, "_predeclare", lambda deployment, node: done.append(("declare", node)))
    db.setup(DEPLOYMENT, "n3", remote)
    assert done == [("cluster", "n3"), ("declare", "n3")]


def test_teardown_kills_the_broker_and_epmd_and_removes_everything() -> None:
    remote = RecordingRemote()
    RabbitDB(BUNDLE).teardown(DEPLOYMENT, "n1", remote)
    assert remote.commands[-1] == ("rm -rf /var/lib/chaos-rabbitmq /var/log/chaos-rabbitmq /var/run/chaos-rabbitmq "
                                   "/opt/chaos-rabbitmq")
    assert any("/opt/chaos-rabbitmq/erlang/erts-*/bin/epmd" in c for c in remote.commands)


def test_version_records_the_bundle_and_the_settings() -> None:
    version = RabbitDB(BUNDLE, queue_type="classic", confirms=False).version()
    assert version["sha256"] == BUNDLE.sha256
    assert (version["queue_type"], version["confirms"], version["partition_handling"]) == ("classic", False,
                                                                                          "pause_minority")
    json.dumps(version)
