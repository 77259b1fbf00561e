"""``harness.db.client``: the home node, failing over only when nothing was sent, kept connections, outcomes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from harness.db.client import NotSent, PinnedClient, fail, home_node, indefinite, info, ok
from workloads.ops import Op

NODES = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"}


class FakeConnection:
    def __init__(self, name: str, *, broken: bool = False) -> None:
        self.name, self.broken, self.is_closed = name, broken, False

    async def close(self) -> None:
        self.is_closed = True
        if self.broken:
            raise OSError("already gone")


def _run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_a_process_is_pinned_to_its_id_modulo_the_node_count_and_the_rotation_starts_there() -> None:
    assert [home_node(("n1", "n2", "n3"), p) for p in range(5)] == ["n1", "n2", "n3", "n1", "n2"]
    assert PinnedClient(NODES, "n2", timeout=1.0).rotation() == ["n2", "n3", "n1"]
    with pytest.raises(ValueError, match="home node 'n9'"):
        PinnedClient(NODES, "n9", timeout=1.0)


def test_outcomes_say_fail_only_when_certain_and_a_read_that_may_have_happened_is_fail() -> None:
    assert ok("n1", 3, lsn=[0, 7]) == {"type": "ok", "value": 3, "node": "n1", "lsn": [0, 7]}
    assert fail("n1", "cas-mismatch") == {"type": "fail", "value": None, "node": "n1", "error": "cas-mismatch"}
    assert info("n1", "timeout", value="g1")["value"] == "g1"
    assert indefinite(Op("read", "k"), "n1", "timeout")["type"] == "fail"
    assert indefinite(Op("write", "k", 1), "n1", "timeout")["type"] == "info"
    assert indefinite(Op("poll", "k", 0), "n1", "timeout", reads={"poll"}, group="k")["group"] == "k"


def test_an_operation_not_sent_goes_on_to_the_next_node_and_the_home_moves_with_it() -> None:
    client = PinnedClient(NODES, "n2", timeout=5.0)
    tried: list[str] = []

    async def attempt(op: Op, node: str, deadline: float) -> dict[str, Any]:
        tried.append(node)
        if node != "n1":
            raise NotSent(f"connection-refused: {node}")
        return ok(node)

    assert _run(client.failover(Op("write", "k", 1), attempt)) == ok("n1")
    assert tried == ["n2", "n3", "n1"] and client.home == "n1"


def test_an_operation_that_may_have_been_sent_is_never_tried_elsewhere() -> None:
    client = PinnedClient(NODES, "n1", timeout=5.0)
    tried: list[str] = []

    async def attempt(op: Op, node: str, deadline: float) -> dict[str, Any]:
        tried.append(node)
        return indefinite(op, node, "timeout")

    assert _run(client.failover(Op("write", "k", 1), attempt))["type"] == "info"
    assert tried == ["n1"]


def test_when_no_node_takes_it_the_last_refusal_is_the_outcome_and_the_timeout_ends_the_round() -> None:
    async def refused(op: Op, node: str, deadline: float) -> dict[str, Any]:
        raise NotSent(f"connection-refused: {node}")

    client = PinnedClient(NODES, "n1", timeout=5.0)
    assert _run(client.failover(Op("write", "k", 1), refused)) == fail("n3", "connection-refused: n3")
    tried: list[str] = []

    async def slow(op: Op, node: str, deadline: float) -> dict[str, Any]:
        tried.append(node)
        await asyncio.sleep(0.05)
        raise NotSent("connect-timeout")

    _run(PinnedClient(NODES, "n1", timeout=0.01).failover(Op("write", "k", 1), slow))
    assert tried == ["n1"]


def test_a_named_node_alone_serves_the_operation() -> None:
    client = PinnedClient(NODES, "n1", timeout=5.0)

    async def refused(op: Op, node: str, deadline: float) -> dict[str, Any]:
        raise NotSent(f"connection-refused: {node}")

    assert _run(client.failover(Op("read", "k", node="n2", local=True), refused)) == fail("n2", "connection-refused: n2")
    assert client.home == "n1"
    unknown = _run(client.failover(Op("read", "k", node="n7", local=True), refused))
    assert unknown == fail("n7", "no node called 'n7'")


def test_connections_are_kept_reopened_once_closed_and_dropped_quietly() -> None:
    client: PinnedClient[FakeConnection] = PinnedClient(NODES, "n1", timeout=5.0)
    made: list[FakeConnection] = []

    async def connect(name: str, broken: bool = False) -> FakeConnection:
        made.append(FakeConnection(name, broken=broken))
        return made[-1]

    async def scenario() -> None:
        first = await client.connection("n1", lambda: connect("n1"))
        assert await client.connection("n1", lambda: connect("n1")) is first
        first.is_closed = True
        assert await client.connection("n1", lambda: connect("n1")) is not first
        await client.connection(("n2", 26379), lambda: connect("n2", broken=True))
        await client.drop(("n2", 26379))  # its close raises: dropped all the same
        await client.close()

    _run(scenario())
    assert len(made) == 3 and all(c.is_closed for c in made) and not client._connections


def test_an_operation_past_the_timeout_closes_every_connection() -> None:
    client: PinnedClient[FakeConnection] = PinnedClient(NODES, "n1", timeout=0.05)

    async def scenario() -> tuple[dict[str, Any], FakeConnection]:
        connection = await client.connection("n1", lambda: asyncio.sleep(0, FakeConnection("n1")))
        return await client.bounded(asyncio.sleep(1), lambda: info("n1", "timeout")), connection

    outcome, connection = _run(scenario())
    assert outcome == info("n1", "timeout") and connection.is_closed and not client._connections
