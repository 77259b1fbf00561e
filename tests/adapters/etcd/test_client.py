"""The etcd client: operations as gateway requests, answers and failures as completions (ok/fail/info),
revisions as LSNs; the network replaced by ``httpx.MockTransport``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from adapters.etcd.client import (
    CAS_MISMATCH,
    SERIALIZABLE,
    EtcdWorkloadClient,
    decode_value,
    encode,
    encode_value,
    error_completion,
    request_for,
)
from harness.db.client import home_node
from workloads.ops import Op

URLS = {"n1": "http://10.0.0.1:2379", "n2": "http://10.0.0.2:2379"}
HEADER = {"cluster_id": "1", "member_id": "2", "revision": "41", "raft_term": "7"}


def test_values_travel_as_base64_json_text_and_foreign_text_reads_back_as_text() -> None:
    assert encode("k1") == "azE="
    assert encode_value(3000017) == encode("3000017")
    for value in (3000017, None, [1, 2], "x"):
        assert decode_value(encode_value(value)) == value
    assert decode_value(encode("not json")) == "not json"


def test_reads_are_linearizable_unless_the_broken_variant_asks_for_serializable() -> None:
    assert request_for(Op("read", "k1")) == ("/v3/kv/range", {"key": encode("k1")})
    assert request_for(Op("read", "k1"), SERIALIZABLE) == ("/v3/kv/range", {"key": encode("k1"), "serializable": True})


def test_a_write_is_a_put_and_a_cas_a_txn_comparing_the_value_or_absence() -> None:
    assert request_for(Op("write", "k1", 5)) == ("/v3/kv/put", {"key": encode("k1"), "value": encode("5")})
    path, body = request_for(Op("cas", "k1", [5, 6]))
    assert path == "/v3/kv/txn"
    assert body == {
        "compare": [{"key": encode("k1"), "target": "VALUE", "result": "EQUAL", "value": encode("5")}],
        "success": [{"request_put": {"key": encode("k1"), "value": encode("6")}}],
    }
    _, absent = request_for(Op("cas", "k1", [None, 6]))
    assert absent["compare"] == [{"key": encode("k1"), "target": "VERSION", "result": "EQUAL", "version": "0"}]
    with pytest.raises(ValueError, match="read, write and cas"):
        request_for(Op("put", "q", 1))


def test_every_process_has_a_home_member_and_successors_move_on() -> None:
    nodes = ("n1", "n2", "n3")
    assert [home_node(nodes, p) for p in range(5)] == ["n1", "n2", "n3", "n1", "n2"]


def _client(handler: Callable[[httpx.Request], httpx.Response], home: str = "n1", **options: Any) -> EtcdWorkloadClient:
    return EtcdWorkloadClient(URLS, home, transport=httpx.MockTransport(handler), **options)


def _invoke(client: EtcdWorkloadClient, op: Op) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        try:
            return await client.invoke(op)
        finally:
            await client.close()

    return asyncio.run(go())


def _answer(body: dict[str, Any], status: int = 200) -> Callable[[httpx.Request], httpx.Response]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json=body)

    handler.seen = seen  # type: ignore[attr-defined]
    return handler


def test_a_read_goes_home_and_returns_the_value_with_its_mod_revision_as_lsn() -> None:
    handler = _answer({"header": HEADER, "kvs": [{"key": encode("k1"), "mod_revision": "17",
                                                  "value": encode_value(2000003)}], "count": "1"})
    completion = _invoke(_client(handler, home="n2"), Op("read", "k1"))
    assert completion == {"type": "ok", "value": 2000003, "node": "n2", "lsn": [0, 17]}
    (request,) = handler.seen
    assert str(request.url) == "http://10.0.0.2:2379/v3/kv/range" and request.method == "POST"
    assert json.loads(request.content) == {"key": encode("k1")}


def test_an_absent_key_reads_null_without_an_lsn() -> None:
    completion = _invoke(_client(_answer({"header": HEADER})), Op("read", "k9"))
    assert completion == {"type": "ok", "value": None, "node": "n1", "lsn": None}


def test_an_operation_that_names_a_member_goes_there() -> None:
    handler = _answer({"header": HEADER})
    completion = _invoke(_client(handler, home="n1"), Op("read", "k1", node="n2", local=True))
    assert completion["node"] == "n2" and str(handler.seen[0].url).startswith(URLS["n2"])


def test_a_write_and_a_cas_that_held_are_ok_with_the_new_revision() -> None:
    assert _invoke(_client(_answer({"header": HEADER})), Op("write", "k1", 5))["lsn"] == [0, 41]
    held = {"header": HEADER, "succeeded": True, "responses": [{"response_put": {"header": {"revision": "41"}}}]}
    assert _invoke(_client(_answer(held)), Op("cas", "k1", [4, 5])) == {
        "type": "ok", "value": None, "node": "n1", "lsn": [0, 41]}


def test_a_cas_whose_compare_failed_is_a_definite_mismatch() -> None:
    # proto3 JSON leaves ``succeeded: false`` out.
    completion = _invoke(_client(_answer({"header": HEADER})), Op("cas", "k1", [4, 5]))
    assert completion == {"type": "fail", "value": None, "node": "n1", "error": CAS_MISMATCH}


@pytest.mark.parametrize(
    ("message", "code", "write", "read"),
    [
        ("etcdserver: request timed out", 14, "info", "fail"),
        ("etcdserver: leader changed", 14, "info", "fail"),
        ("etcdserver: something new", 2, "info", "fail"),
        ("etcdserver: too many requests", 8, "fail", "fail"),
        ("raft proposal dropped", 2, "fail", "fail"),
        ("invalid character 'b' looking for beginning of object key string", 3, "fail", "fail"),
    ],
)
def test_etcd_errors_are_definite_only_when_the_request_never_reached_the_log(
    message: str, code: int, write: str, read: str
) -> None:
    body = {"error": message, "message": message, "code": code}
    assert error_completion(Op("write", "k1", 1), "n1", 503, body)["type"] == write
    assert error_completion(Op("cas", "k1", [1, 2]), "n1", 503, body)["type"] == write
    completion = error_completion(Op("read", "k1"), "n1", 503, body)
    assert completion["type"] == read and completion["error"] == message


def test_an_answer_that_is_not_json_is_indefinite_and_says_its_status() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="<html>bad gateway</html>")

    completion = _invoke(_client(handler), Op("write", "k1", 1))
    assert completion == {"type": "info", "value": None, "node": "n1", "error": "HTTP 502"}


def _raising(exc: Exception) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return handler


def test_a_refused_connection_is_a_definite_failure_even_for_a_write() -> None:
    completion = _invoke(_client(_raising(httpx.ConnectError("refused"))), Op("write", "k1", 1))
    assert completion["type"] == "fail" and completion["error"].startswith("connection-refused")


def test_an_operation_refused_at_home_goes_on_to_the_next_member_which_becomes_home() -> None:
    tried: list[str] = []

    def n1_is_down(request: httpx.Request) -> httpx.Response:
        tried.append(request.url.host)
        if request.url.host == "10.0.0.1":
            raise httpx.ConnectError("refused")
        return httpx.Response(200, json={"header": HEADER})

    client = _client(n1_is_down, home="n1")
    assert _invoke(client, Op("write", "k1", 1)) == {"type": "ok", "value": None, "node": "n2", "lsn": [0, 41]}
    assert tried == ["10.0.0.1", "10.0.0.2"] and client.home == "n2"
    # A local read is for its member alone: no other member answers for it.
    tried.clear()
    completion = _invoke(_client(n1_is_down, home="n2"), Op("read", "k1", node="n1", local=True))
    assert completion["type"] == "fail" and completion["node"] == "n1" and tried == ["10.0.0.1"]


@pytest.mark.parametrize("exc", [httpx.ReadTimeout("slow"), httpx.ReadError("reset"),
                                 httpx.RemoteProtocolError("closed")])
def test_a_timeout_or_lost_connection_after_sending_is_info_for_writes_and_fail_for_reads(exc: Exception) -> None:
    assert _invoke(_client(_raising(exc)), Op("write", "k1", 1))["type"] == "info"
    assert _invoke(_client(_raising(exc)), Op("cas", "k1", [1, 2]))["type"] == "info"
    assert _invoke(_client(_raising(exc)), Op("read", "k1"))["type"] == "fail"


def test_an_unknown_member_or_read_mode_is_refused() -> None:
    assert _invoke(_client(_answer({})), Op("read", "k1", node="n7"))["error"] == "no member called 'n7'"
    with pytest.raises(ValueError, match="reads must be one of"):
        EtcdWorkloadClient(URLS, "n1", reads="stale")
    with pytest.raises(ValueError, match="home member"):
        EtcdWorkloadClient(URLS, "n3")
