"""The Redis adapter without a node: its configuration files, status parsing (the master set as one group,
the Sentinel's config epoch as its term only where the Sentinel backs the master), what it can take,
catch-up, and the commands it runs on a node (recorded by a Remote). What every shipped adapter does on a
node (teardown when the kill fails, clients' homes) is tested in tests/adapters/test_shipped.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from adapters.redis.client import REDIS_PORT, SENTINEL_PORT, ReplyError
from adapters.redis.db import (
    BUNDLE_FILE,
    GROUP,
    REDIS_CONFIG,
    REDIS_LOG,
    SENTINEL_CONFIG,
    SENTINEL_LOG,
    RedisDB,
    pairs,
    parse_info,
    quorum,
    redis_config,
    sentinel_config,
    status_of,
)
from adapters.redis.install import RedisBundle
from harness.db import Deployment, StatusError, capabilities, not_applicable
from tests.adapters.conftest import RecordingRemote
from tests.adapters.redis.conftest import FakeNetwork

NODES = ("n1", "n2", "n3", "n4", "n5")
DEPLOYMENT = Deployment(NODES, {n: f"10.1.0.{i}" for i, n in enumerate(NODES, 1)},
                        {n: f"172.17.0.{i}" for i, n in enumerate(NODES, 1)})
ANNOUNCED = RedisDB.announced(DEPLOYMENT)
BUNDLE = RedisBundle(Path("/cache/redis/redis.tar.gz"), "redis-server 5:7.0.15-1~deb12u10", "ab" * 32, kind="bundle")

MASTER_INFO = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nmaster_repl_offset:1200\r\n"
REPLICA_INFO = ("# Replication\r\nrole:slave\r\nmaster_host:10.1.0.1\r\nmaster_port:6379\r\n"
                "master_link_status:up\r\nslave_repl_offset:{offset}\r\n")


def _sentinel_master(ip: str, epoch: int) -> dict[str, str]:
    return {"name": "chaos", "ip": ip, "port": "6379", "flags": "master", "config-epoch": str(epoch)}


# -- configuration ---------------------------------------------------------------------------------------


def test_the_first_node_is_the_master_and_the_others_replicate_it() -> None:
    master = redis_config(DEPLOYMENT, "n1")
    replica = redis_config(DEPLOYMENT, "n3")
    assert "replicaof" not in master and "replica-announce-ip 10.1.0.1\n" in master
    assert "replicaof 10.1.0.1 6379\n" in replica and "replica-announce-ip 10.1.0.3\n" in replica
    for config in (master, replica):
        assert "appendonly yes\n" in config and "min-replicas" not in config
    safe = redis_config(DEPLOYMENT, "n2", min_replicas=2, max_lag=3)
    assert "min-replicas-to-write 2\n" in safe and "min-replicas-max-lag 3\n" in safe


def test_every_sentinel_monitors_the_first_node_with_a_majority_quorum() -> None:
    config = sentinel_config(DEPLOYMENT, "n4")
    assert "sentinel monitor chaos 10.1.0.1 6379 3\n" in config
    assert "sentinel announce-ip 10.1.0.4\n" in config and f"port {SENTINEL_PORT}\n" in config
    assert [quorum(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]


def test_a_peer_address_that_is_not_one_word_is_refused() -> None:
    bad = Deployment(("n1",), {"n1": "10.0.0.1\nsentinel monitor x"}, {"n1": "10.0.0.1"})
    with pytest.raises(ValueError, match="not a host name or an IP address"):
        sentinel_config(bad, "n1")


# -- status ----------------------------------------------------------------------------------------------


def test_info_and_sentinel_replies_are_parsed() -> None:
    assert parse_info(MASTER_INFO) == {"role": "master", "connected_slaves": "2", "master_repl_offset": "1200"}
    assert pairs(["ip", "10.1.0.1", "config-epoch", "3"]) == {"ip": "10.1.0.1", "config-epoch": "3"}
    assert pairs({"ip": "10.1.0.1"}) == {"ip": "10.1.0.1"} and pairs("junk") is None


def test_a_master_its_sentinel_backs_leads_the_group_in_the_config_epoch() -> None:
    status = status_of("n1", parse_info(MASTER_INFO), _sentinel_master("10.1.0.1", 4), ANNOUNCED)
    assert (status["role"], status["term"], status["leader"]) == ("follower", None, None)
    assert status["groups"] == [{"group": GROUP, "role": "leader", "leader": "n1", "term": 4,
                                 "commit_lsn": None, "last_lsn": None}]


def test_a_master_its_sentinel_does_not_back_claims_no_term() -> None:
    deposed = status_of("n1", parse_info(MASTER_INFO), _sentinel_master("10.1.0.3", 5), ANNOUNCED)
    assert deposed["groups"][0]["role"] == "leader" and deposed["groups"][0]["term"] is None
    silent = status_of("n1", parse_info(MASTER_INFO), None, ANNOUNCED)
    assert silent["groups"][0]["term"] is None


def test_a_replica_follows_its_master_host_in_its_sentinels_epoch() -> None:
    info = parse_info(REPLICA_INFO.format(offset=10))
    [entry] = status_of("n2", info, _sentinel_master("10.1.0.1", 2), ANNOUNCED)["groups"]
    assert (entry["role"], entry["leader"], entry["term"]) == ("follower", "n1", 2)


def test_capabilities_catch_up_but_no_clock_skew_and_no_lsn_to_judge() -> None:
    db = RedisDB(BUNDLE)
    assert capabilities(db) == ["Clients", "CatchUp", "Process", "Pause", "Status", "LogFiles"]
    assert db.workloads == ("register",) and set(not_applicable(db)) == {"lsn-monotonicity"}
    assert db.log_files(DEPLOYMENT, "n1") == {REDIS_LOG: "redis.log", SENTINEL_LOG: "sentinel.log"}


# -- over a fake network ---------------------------------------------------------------------------------


def _db(network: FakeNetwork) -> RedisDB:
    return RedisDB(BUNDLE, connect=network.connect)


def _serve(network: FakeNetwork, node: str, info: str | None, sentinel: dict | None) -> None:
    host = DEPLOYMENT.client_hosts[node]
    if info is not None:
        network.handlers[(host, REDIS_PORT)] = lambda command: info
    if sentinel is not None:
        network.handlers[(host, SENTINEL_PORT)] = lambda command: sentinel


def test_status_asks_the_server_and_its_own_sentinel(network: FakeNetwork) -> None:
    _serve(network, "n1", MASTER_INFO, _sentinel_master("10.1.0.1", 0))
    status = asyncio.run(_db(network).status(DEPLOYMENT, "n1", 1.0))
    assert status["groups"][0]["role"] == "leader" and status["groups"][0]["term"] == 0
    assert {command[0] for _, commands in network.sent for command in commands} == {"INFO", "SENTINEL"}


def test_a_server_that_refuses_connections_is_definitely_down(network: FakeNetwork) -> None:
    with pytest.raises(StatusError) as down:
        asyncio.run(_db(network).status(DEPLOYMENT, "n2", 1.0))
    assert down.value.definite


def test_an_error_reply_to_info_is_a_status_error_that_may_pass(network: FakeNetwork) -> None:
    network.handlers[(DEPLOYMENT.client_hosts["n2"], REDIS_PORT)] = lambda c: ReplyError("LOADING Redis is loading")
    with pytest.raises(StatusError) as loading:
        asyncio.run(_db(network).status(DEPLOYMENT, "n2", 1.0))
    assert not loading.value.definite and "LOADING" in str(loading.value)


@pytest.mark.parametrize(("offset", "expected"), [(1200, True), (1300, True), (1199, False)])
def test_a_replica_has_caught_up_once_its_offset_reaches_its_masters(network: FakeNetwork, offset: int,
                                                                      expected: bool) -> None:
    _serve(network, "n1", MASTER_INFO, None)
    _serve(network, "n2", REPLICA_INFO.format(offset=offset), None)
    assert asyncio.run(_db(network).caught_up(DEPLOYMENT, "n2", 1.0)) is expected


def test_a_master_has_caught_up_only_while_its_sentinel_backs_it(network: FakeNetwork) -> None:
    _serve(network, "n1", MASTER_INFO, _sentinel_master("10.1.0.1", 1))
    _serve(network, "n3", MASTER_INFO, _sentinel_master("10.1.0.1", 1))
    db = _db(network)
    assert asyncio.run(db.caught_up(DEPLOYMENT, "n1", 1.0)) is True
    assert asyncio.run(db.caught_up(DEPLOYMENT, "n3", 1.0)) is False
    assert asyncio.run(db.caught_up(DEPLOYMENT, "n4", 1.0)) is False  # not answering


# -- on a node, through a fake Remote ---------------------------------------------------------------------


def test_setup_uploads_unpacks_configures_and_starts_both_processes() -> None:
    remote = RecordingRemote()
    RedisDB(BUNDLE, min_replicas=1).setup(DEPLOYMENT, "n2", remote)
    assert remote.uploads == [(str(BUNDLE.path), BUNDLE_FILE)]
    assert any(c.startswith(f"tar -xzf {BUNDLE_FILE} -C /opt/chaos-redis") for c in remote.commands)
    assert b"replicaof 10.1.0.1 6379" in remote.files[REDIS_CONFIG]
    assert b"min-replicas-to-write 1" in remote.files[REDIS_CONFIG]
    assert b"sentinel monitor chaos" in remote.files[SENTINEL_CONFIG]
    started = [c for c in remote.commands if "setsid" in c]
    assert len(started) == 2 and "--sentinel" in started[1] and "LD_LIBRARY_PATH" in started[0]


def test_teardown_kills_both_and_removes_every_directory() -> None:
    remote = RecordingRemote()
    RedisDB(BUNDLE).teardown(DEPLOYMENT, "n1", remote)
    assert remote.commands[-1] == "rm -rf /var/lib/chaos-redis /var/log/chaos-redis /var/run/chaos-redis /opt/chaos-redis"
    assert sum("sentinel.pid" in c for c in remote.commands[:-1]) >= 1
    assert sum("redis.pid" in c for c in remote.commands[:-1]) >= 1


def test_version_records_the_bundle_and_the_safety_settings() -> None:
    version = RedisDB(BUNDLE, min_replicas=2, max_lag=3, wait=1).version()
    assert version["sha256"] == BUNDLE.sha256 and version["version"].startswith("redis-server 5:7.0.15")
    assert (version["min_replicas"], version["max_lag"], version["wait"]) == (2, 3, 1)
