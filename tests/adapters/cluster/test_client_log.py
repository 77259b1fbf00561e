"""The executor's log operations: appends, and polls whose offset the client fills in (``prepare``)."""

from __future__ import annotations

import asyncio

from adapters.cluster.client import ClusterWorkloadClient
from cluster.client import Result
from tests.adapters.cluster.test_client import FakeClient, run
from workloads.ops import Op


def test_an_append_completes_with_its_offset() -> None:
    fake = FakeClient(Result("ok", value=[4, 3000001], lsn=(2, 9), node="n1"))
    completion = run(ClusterWorkloadClient(fake), Op("append", "l0", 3000001))
    assert fake.calls == [("append", ("l0", 3000001), {"node": None, "timeout": None})]
    assert completion == {"type": "ok", "value": [4, 3000001], "lsn": [2, 9], "node": "n1", "error": None}


def test_polls_read_forward_from_what_the_process_read_last_per_log() -> None:
    fake = FakeClient(Result("ok", value=[[0, 1], [1, 2]], node="n1"), Result("ok", value=[], node="n1"),
                      Result("info", error="timeout", node="n1"))
    client = ClusterWorkloadClient(fake)
    first = client.prepare(Op("poll", "l0"))
    assert first == Op("poll", "l0", 0) and client.prepare(Op("append", "l0", 5)) == Op("append", "l0", 5)
    assert run(client, first)["value"] == [[0, 1], [1, 2]]
    assert client.prepare(Op("poll", "l0")).value == 2 and client.prepare(Op("poll", "l1")).value == 0
    assert run(client, client.prepare(Op("poll", "l0")))["value"] == []
    assert client.prepare(Op("poll", "l0")).value == 2  # nothing new read: the same offset again
    assert run(client, client.prepare(Op("poll", "l0")))["type"] == "fail"  # a poll changes nothing
    assert [c[1] for c in fake.calls] == [("l0", 0), ("l0", 2), ("l0", 2)]


def test_a_local_final_poll_keeps_its_offset_and_asks_its_node() -> None:
    fake = FakeClient(Result("ok", value=[[7, 1]], node="n3"))
    client = ClusterWorkloadClient(fake)
    op = Op("poll", "l2", 7, node="n3", local=True)
    assert client.prepare(op) is op
    asyncio.run(client.invoke(op))
    assert fake.calls == [("poll", ("l2", 7), {"node": "n3", "timeout": None, "local": True})]
