"""The NATS adapter on three real containers: install, a JetStream cluster forming, appends acknowledged
with the stream's sequence, polls by sequence, status per stream (groups), final polls served only by the
stream's leader, pause, kill and restart with the store kept, teardown wiping everything."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from adapters.nats.db import BINARY, DATA_DIR, NatsDB
from adapters.nats.install import NatsBinary
from harness.db import Deployment, StatusError
from harness.platforms.docker import DockerPlatform
from harness.topology import topology
from workloads.ops import Op

pytestmark = pytest.mark.docker

NODES = ("n1", "n2", "n3")


@pytest.fixture
def cluster(start_platform: Callable[..., DockerPlatform], nats_binary: NatsBinary) -> Iterator[tuple]:
    """Three nodes with a nats-server each, torn down after the test."""
    platform = start_platform(topology(3))
    addresses = {n: platform.address(n) for n in NODES}
    deployment = Deployment(NODES, addresses, addresses)
    db = NatsDB(nats_binary)
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda n: db.setup(deployment, n, platform.remote(n)), NODES))
    try:
        yield platform, deployment, db
    finally:
        for node in NODES:
            db.teardown(deployment, node, platform.remote(node))
        for node in NODES:
            remote = platform.remote(node)
            assert remote.run(f"ls {DATA_DIR} {BINARY} 2>&1 || true").stdout.count("No such file") == 2


def _invoke(db: NatsDB, deployment: Deployment, op: Op, process: int = 0) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        client = await db.open_client(deployment, process, 10.0)
        try:
            return await client.invoke(client.prepare(op))
        finally:
            await client.close()

    return asyncio.run(go())


def _statuses(db: NatsDB, deployment: Deployment, until: Callable[[dict[str, dict]], bool]) -> dict[str, dict]:
    async def poll() -> dict[str, dict]:
        seen: dict[str, dict] = {}
        for _ in range(150):
            for node in deployment.nodes:
                try:
                    seen[node] = await db.status(deployment, node, 2.0)
                except StatusError:
                    seen.pop(node, None)
            if until(seen):
                return seen
            await asyncio.sleep(0.2)
        raise AssertionError(f"status never settled: {seen}")

    return asyncio.run(poll())


def _stream_leader(seen: dict[str, dict], stream: str) -> str | None:
    leaders = {g["leader"] for s in seen.values() for g in s["groups"] if g["group"] == stream}
    return leaders.pop() if len(leaders) == 1 else None


def test_a_cluster_appends_polls_reports_groups_and_survives_a_kill(cluster) -> None:
    platform, deployment, db = cluster
    # Every server names the same meta leader (one that has just been elected may not be known to all yet).
    meta = _statuses(db, deployment, lambda s: len(s) == 3 and len(leaders := {x["leader"] for x in s.values()}) == 1
                     and None not in leaders)
    leader = meta["n1"]["leader"]
    assert leader in NODES and meta[leader]["role"] == "leader" and meta[leader]["term"] is None

    appended = [_invoke(db, deployment, Op("append", "l0", 1000001 + i), process=i) for i in range(5)]
    assert [a["type"] for a in appended] == ["ok"] * 5, appended
    assert [a["value"] for a in appended] == [[i + 1, 1000001 + i] for i in range(5)]
    assert all(a["group"] == "l0" and a["lsn"] == [0, a["value"][0]] for a in appended)
    polled = _invoke(db, deployment, Op("poll", "l0", 2))
    assert polled["type"] == "ok" and polled["value"] == [[i + 1, 1000001 + i] for i in range(1, 5)]
    assert _invoke(db, deployment, Op("poll", "l0", 6))["value"] == []

    seen = _statuses(db, deployment, lambda s: len(s) == 3 and _stream_leader(s, "l0") is not None
                     and all(g["last_lsn"] == [0, 5] for x in s.values() for g in x["groups"]))
    stream_leader = _stream_leader(seen, "l0")
    assert {g["role"] for x in seen.values() for g in x["groups"]} == {"leader", "follower"}
    assert [g["role"] for g in seen[stream_leader]["groups"]] == ["leader"]

    # Final polls: served by the stream's leader only; a follower fails them.
    local = _invoke(db, deployment, Op("poll", "l0", 0, node=stream_leader, local=True))
    assert local["type"] == "ok" and [r[0] for r in local["value"]] == [1, 2, 3, 4, 5]
    follower = next(n for n in NODES if n != stream_leader)
    refused = _invoke(db, deployment, Op("poll", "l0", 0, node=follower, local=True))
    assert refused["type"] == "fail" and refused["error"].startswith("not-stream-leader")

    # Pause, then kill the stream's leader: another takes over, nothing acknowledged is lost.
    remote = platform.remote(stream_leader)
    db.pause(deployment, stream_leader, remote)
    with pytest.raises(StatusError) as paused:
        asyncio.run(db.status(deployment, stream_leader, 0.5))
    assert not paused.value.definite
    db.resume(deployment, stream_leader, remote)
    db.kill(deployment, stream_leader, remote)
    db.kill(deployment, stream_leader, remote)  # a dead server stays dead
    assert not db.is_running(deployment, stream_leader, remote)
    with pytest.raises(StatusError) as dead:
        asyncio.run(db.status(deployment, stream_leader, 0.5))
    assert dead.value.definite
    survivors = [n for n in NODES if n != stream_leader]
    refused_home = _invoke(db, deployment, Op("poll", "l0", 1, node=stream_leader))
    assert refused_home["type"] == "fail" and refused_home["error"].startswith("connection-refused")
    errors = []
    for attempt in range(60):  # no leader for the stream until the survivors' election (seconds)
        later = _invoke(db, deployment, Op("append", "l0", 2000001 + attempt), process=NODES.index(survivors[0]))
        if later["type"] == "ok":
            break
        errors.append(later["error"])
        time.sleep(0.5)
    assert later["type"] == "ok" and later["value"][0] >= 6, errors
    # While it had no leader, the stream's subject had no listener: appends failed, certainly not stored.
    assert all(e.startswith("no-responders") for e in errors), errors

    db.start(deployment, stream_leader, remote)
    settled = _statuses(db, deployment, lambda s: len(s) == 3 and _stream_leader(s, "l0") is not None and all(
        g["last_lsn"] == [0, later["value"][0]] for x in s.values() for g in x["groups"]))
    new_leader = _stream_leader(settled, "l0")
    final = _invoke(db, deployment, Op("poll", "l0", 0, node=new_leader, local=True))
    assert final["type"] == "ok" and [r[1] for r in final["value"]][:5] == [1000001 + i for i in range(5)]
    assert final["value"][-1] == later["value"]
