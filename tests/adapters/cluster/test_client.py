"""The executor: generated ops through a (fake) cluster client, completions in the history's shape."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from adapters.cluster.client import NOTHING_TO_CONFIRM, ClusterWorkloadClient
from adapters.cluster.db import ClusterDB
from cluster.client import Result
from harness.db import Deployment
from workloads.ops import Op


class FakeClient:
    """Records each call as (method, args, options) and answers from a queue of Results."""

    def __init__(self, *answers: Result) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.answers = list(answers)
        self.closed = False

    def __getattr__(self, method: str):
        async def call(*args: Any, **options: Any) -> Result:
            self.calls.append((method, args, options))
            return self.answers.pop(0)

        return call

    async def close(self) -> None:
        self.closed = True


def run(client: ClusterWorkloadClient, op: Op) -> dict[str, Any]:
    return asyncio.run(client.invoke(op))


def test_a_write_becomes_an_ok_completion_with_its_lsn() -> None:
    fake = FakeClient(Result("ok", lsn=(3, 17), node="n2"))
    completion = run(ClusterWorkloadClient(fake, timeout=4.0), Op("write", "k1", 2000005))
    assert fake.calls == [("write", ("k1", 2000005), {"node": None, "timeout": 4.0})]
    assert completion == {"type": "ok", "value": None, "lsn": [3, 17], "node": "n2", "error": None}


def test_cas_sends_expected_and_new_and_keeps_a_mismatch_definite() -> None:
    fake = FakeClient(Result("fail", error="cas-mismatch", lsn=(3, 18), node="n2"))
    completion = run(ClusterWorkloadClient(fake), Op("cas", "k1", [None, 7], node="n5"))
    assert fake.calls == [("cas", ("k1", None, 7), {"node": "n5", "timeout": None})]
    assert completion["type"] == "fail" and completion["error"] == "cas-mismatch"


def test_an_indeterminate_read_is_recorded_as_failed_but_a_consume_is_not() -> None:
    fake = FakeClient(Result("info", error="timeout", node="n1"), Result("info", error="timeout", node="n1"))
    client = ClusterWorkloadClient(fake)
    assert run(client, Op("read", "k0"))["type"] == "fail"
    assert run(client, Op("consume", "q0"))["type"] == "info"


def test_a_read_returns_what_it_saw() -> None:
    fake = FakeClient(Result("ok", value=1000003, lsn=(2, 9), node="n3"))
    completion = run(ClusterWorkloadClient(fake), Op("read", "k0"))
    assert completion["value"] == 1000003 and completion["lsn"] == [2, 9]


def test_a_local_read_asks_its_node_to_serve_it_and_a_plain_read_does_not() -> None:
    fake = FakeClient(Result("ok", value=4, lsn=(2, 9), node="n3"), Result("ok", value=4, lsn=(2, 9), node="n1"))
    client = ClusterWorkloadClient(fake, timeout=3.0)
    completion = run(client, Op("read", "k0", node="n3", local=True))
    run(client, Op("read", "k0"))
    assert fake.calls == [("read", ("k0",), {"node": "n3", "timeout": 3.0, "local": True}),
                          ("read", ("k0",), {"node": None, "timeout": 3.0})]
    assert (completion["type"], completion["node"]) == ("ok", "n3")


def test_put_sends_value_and_guid_as_the_cluster_expects() -> None:
    fake = FakeClient(Result("ok", lsn=(1, 4), node="n1"))
    run(ClusterWorkloadClient(fake), Op("put", "q0", {"guid": "g-9", "value": 11}))
    assert fake.calls == [("put", ("q0", 11, "g-9"), {"node": None, "timeout": 1.0})]  # one attempt's time


def test_an_indefinite_put_is_resent_with_the_same_guid_until_acknowledged() -> None:
    fake = FakeClient(
        Result("info", error="leadership-lost", node="n1"),
        Result("info", error="connection-lost", node="n2"),
        Result("ok", lsn=(2, 3), node="n3", value=None),
    )
    client = ClusterWorkloadClient(fake, timeout=4.0, put_retry_backoff=0.0)
    completion = run(client, Op("put", "q0", {"guid": "g-9", "value": 11}))
    assert completion["type"] == "ok" and completion["lsn"] == [2, 3]
    assert [call[1] for call in fake.calls] == [("q0", 11, "g-9")] * 3


def test_a_definite_failure_after_an_indefinite_put_attempt_is_resent_and_stays_indefinite() -> None:
    fake = FakeClient(
        Result("info", error="timeout", node="n1"),
        Result("fail", error="not-leader", node="n2"),
        *[Result("fail", error="connection-refused", node="n3")] * 50,
    )
    client = ClusterWorkloadClient(fake, timeout=0.1, put_retry_backoff=0.025)
    completion = run(client, Op("put", "q0", {"guid": "g-9", "value": 11}))
    assert completion["type"] == "info" and completion["error"] == "timeout"
    assert len(fake.calls) >= 3  # the definite failure of a re-send did not end the op


def test_an_ack_after_a_definite_failure_of_a_resend_is_ok() -> None:
    fake = FakeClient(
        Result("info", error="connection-lost", node="n1"),
        Result("fail", error="not-leader", node="n2"),
        Result("ok", lsn=(4, 2), node="n3"),
    )
    client = ClusterWorkloadClient(fake, timeout=4.0, put_retry_backoff=0.0)
    assert run(client, Op("put", "q0", {"guid": "g-9", "value": 11}))["type"] == "ok"


def test_a_definite_put_failure_is_not_resent() -> None:
    fake = FakeClient(Result("fail", error="connection-refused", node="n1"))
    completion = run(ClusterWorkloadClient(fake, timeout=4.0), Op("put", "q0", {"guid": "g-9", "value": 11}))
    assert completion["type"] == "fail" and len(fake.calls) == 1


def test_put_re_sends_stop_at_the_operation_deadline() -> None:
    fake = FakeClient(*[Result("info", error="leadership-lost")] * 50)
    # Each attempt answers at once; the backoff (25 ms) paces the re-sends within the 0.1 s deadline.
    client = ClusterWorkloadClient(fake, timeout=0.1, put_retry_backoff=0.025)
    completion = run(client, Op("put", "q0", {"guid": "g-9", "value": 11}))
    assert completion["type"] == "info"
    assert 2 <= len(fake.calls) <= 4


def test_confirm_without_a_guid_confirms_the_last_consumed_message() -> None:
    message = {"guid": "g-1", "value": 5}
    fake = FakeClient(Result("ok", value=message, lsn=(1, 5), node="n1"), Result("ok", lsn=(1, 6), node="n1"))
    client = ClusterWorkloadClient(fake)
    assert run(client, Op("consume", "q0"))["value"] == message
    confirmed = run(client, Op("confirm", "q0"))
    assert fake.calls[-1] == ("confirm", ("q0", "g-1"), {"node": None, "timeout": None})
    assert confirmed == {"type": "ok", "value": "g-1", "lsn": [1, 6], "node": "n1", "error": None}
    # Nothing is left to confirm: the op did not happen.
    again = run(client, Op("confirm", "q0"))
    assert again == {"type": "fail", "value": None, "lsn": None, "node": None, "error": NOTHING_TO_CONFIRM}
    assert len(fake.calls) == 2


def test_an_empty_consume_leaves_nothing_to_confirm() -> None:
    fake = FakeClient(Result("ok", value=None, lsn=(1, 5), node="n1"))
    client = ClusterWorkloadClient(fake)
    run(client, Op("consume", "q0"))
    assert run(client, Op("confirm", "q0"))["error"] == NOTHING_TO_CONFIRM


def test_an_unknown_operation_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="cannot run operation 'increment'"):
        run(ClusterWorkloadClient(FakeClient()), Op("increment", "k0", "x"))


def test_the_adapter_opens_a_client_per_process_and_close_closes_it() -> None:
    deployment = Deployment(nodes=("n1",), peer_hosts={"n1": "n1"}, client_hosts={"n1": "127.0.0.1"})

    async def scenario() -> None:
        db = ClusterDB()
        first, second = await db.open_client(deployment, 0, 2.0), await db.open_client(deployment, 1, 2.0)
        assert first.client is not second.client
        assert first.client.timeout == 2.0 and first.timeout == 2.0
        await first.close()

    asyncio.run(scenario())
