"""The Redis client's contract with fakes: which commands each operation sends, where (the master a
Sentinel names, the named node for final reads), and how every answer is classified: ok, fail (certainly
did not happen) or info (may have happened; a write whose outcome is unknown is never fail)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from adapters.redis.client import (
    CAS_MISMATCH,
    MASTER_NAME,
    NO_MASTER,
    NOT_MASTER,
    REDIS_PORT,
    SENTINEL_PORT,
    RedisRegisterClient,
    commands_for,
    completion_of,
    decode_value,
    encode_value,
)
from tests.adapters.redis.conftest import HANG, FakeNetwork, error
from workloads.ops import Op

HOSTS = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"}
ANNOUNCED = {"10.0.0.1": "n1", "10.0.0.2": "n2", "10.0.0.3": "n3"}
MASTER_ROLE = ["master", 120, [["10.0.0.2", "6379", "120"]]]
REPLICA_ROLE = ["slave", "10.0.0.1", 6379, "connected", 120]


def _read_replies(role: list, value: Any) -> list:
    return ["OK", "QUEUED", "QUEUED", [role, value]]


# -- commands and classification --------------------------------------------------------------------


def test_each_operation_is_its_commands_and_wait_follows_writes_only() -> None:
    assert commands_for(Op("read", "k1")) == [("MULTI",), ("ROLE",), ("GET", "k1"), ("EXEC",)]
    assert commands_for(Op("write", "k1", 3000017)) == [("SET", "k1", "3000017")]
    [(eval_, _script, keys, key, how, expected, new)] = commands_for(Op("cas", "k1", [None, 5]))
    assert (eval_, keys, key, how, expected, new) == ("EVAL", 1, "k1", "absent", "", "5")
    assert commands_for(Op("cas", "k1", [4, 5]))[0][4:] == ("value", "4", "5")
    assert commands_for(Op("write", "k1", 7), wait=2, wait_ms=900)[1] == ("WAIT", 2, 900)
    assert commands_for(Op("read", "k1"), wait=2)[-1] == ("EXEC",)
    assert decode_value(encode_value([1, "a"])) == [1, "a"] and decode_value(None) is None
    assert decode_value("not json") == "not json"


@pytest.mark.parametrize(
    ("op", "replies", "wait", "expected"),
    [
        (Op("read", "k"), _read_replies(MASTER_ROLE, "42"), 0, ("ok", None)),
        (Op("read", "k"), _read_replies(MASTER_ROLE, None), 0, ("ok", None)),
        (Op("read", "k"), _read_replies(REPLICA_ROLE, "42"), 0, ("fail", NOT_MASTER)),
        (Op("read", "k"), ["OK", "QUEUED", error("LOADING Redis is loading"), None], 0, ("fail", "LOADING")),
        (Op("write", "k", 1), ["OK"], 0, ("ok", None)),
        (Op("write", "k", 1), [error("READONLY You can't write against a read only replica.")], 0,
         ("fail", "READONLY")),
        (Op("write", "k", 1), [error("NOREPLICAS Not enough good replicas to write.")], 0, ("fail", "NOREPLICAS")),
        (Op("write", "k", 1), [error("something unexpected")], 0, ("info", "something unexpected")),
        (Op("write", "k", 1), ["OK", 2], 2, ("ok", None)),
        (Op("write", "k", 1), ["OK", 1], 2, ("info", "wait: 1 of 2 replicas acknowledged")),
        (Op("write", "k", 1), ["OK", error("WAIT cannot be used with replica instances")], 2, ("info", "wait")),
        (Op("write", "k", 1), [error("READONLY You can't write"), error("WAIT cannot be used")], 2,
         ("fail", "READONLY")),
        (Op("cas", "k", [1, 2]), [1], 0, ("ok", None)),
        (Op("cas", "k", [1, 2]), [0], 0, ("fail", CAS_MISMATCH)),
        (Op("cas", "k", [1, 2]), [0, 0], 2, ("fail", CAS_MISMATCH)),
        (Op("cas", "k", [1, 2]), [1, 0], 2, ("info", "wait: 0 of 2")),
        (Op("cas", "k", [1, 2]), [error("NOREPLICAS Not enough good replicas to write. script: 1f, on "
                                        "@user_script:3.")], 0, ("fail", "NOREPLICAS")),
        (Op("cas", "k", [1, 2]), [error("Error running script, unknown")], 0, ("info", "Error running script")),
    ],
)
def test_replies_are_classified(op: Op, replies: list, wait: int, expected: tuple[str, str | None]) -> None:
    completion = completion_of(op, "n1", replies, wait)
    kind, error_start = expected
    assert completion["type"] == kind and completion["node"] == "n1"
    if error_start is None:
        assert "error" not in completion
    else:
        assert completion["error"].startswith(error_start), completion


def test_a_read_completion_carries_the_decoded_value() -> None:
    assert completion_of(Op("read", "k"), "n1", _read_replies(MASTER_ROLE, "3000017"))["value"] == 3000017


# -- the client over a fake network -------------------------------------------------------------------


def _sentinel(master_host: str | None):
    def answer(command: tuple) -> Any:
        assert command == ("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)
        return [master_host, "6379"] if master_host else None
    return answer


def _master(store: dict[str, str], role: list = MASTER_ROLE):
    def answer(command: tuple) -> Any:
        if command[0] in ("MULTI", "EXEC"):
            return "OK" if command[0] == "MULTI" else [role, store.get("k")]
        if command[0] == "SET":
            store[command[1]] = command[2]
            return "OK"
        return "QUEUED" if command[0] in ("ROLE", "GET") else None
    return answer


def _client(network: FakeNetwork, *, home: str = "n2", wait: int = 0, timeout: float = 1.0) -> RedisRegisterClient:
    return RedisRegisterClient(HOSTS, ANNOUNCED, home, wait=wait, timeout=timeout, connect=network.connect)


def _invoke(client: RedisRegisterClient, op: Op) -> dict:
    async def go() -> dict:
        try:
            return await client.invoke(op)
        finally:
            await client.close()
    return asyncio.run(go())


def test_operations_go_to_the_master_the_home_sentinel_names(network: FakeNetwork) -> None:
    store: dict[str, str] = {}
    network.handlers[("10.0.0.2", SENTINEL_PORT)] = _sentinel("10.0.0.3")
    network.handlers[("10.0.0.1", SENTINEL_PORT)] = _sentinel("10.0.0.1")
    network.handlers[("10.0.0.3", REDIS_PORT)] = _master(store)
    completion = _invoke(_client(network), Op("write", "k", 9))
    assert completion == {"type": "ok", "value": None, "node": "n3"}
    assert store == {"k": "9"}
    assert [address for address, _ in network.sent] == [("10.0.0.2", SENTINEL_PORT), ("10.0.0.3", REDIS_PORT)]


def test_an_unreachable_home_sentinel_passes_the_question_to_the_next_node(network: FakeNetwork) -> None:
    network.handlers[("10.0.0.3", SENTINEL_PORT)] = _sentinel("10.0.0.1")
    network.handlers[("10.0.0.1", REDIS_PORT)] = _master({"k": "5"})
    completion = _invoke(_client(network), Op("read", "k"))
    assert completion == {"type": "ok", "value": 5, "node": "n1"}


def test_without_a_master_nothing_is_sent_and_the_write_fails(network: FakeNetwork) -> None:
    network.handlers[("10.0.0.2", SENTINEL_PORT)] = _sentinel("192.0.2.99")  # not a node of this test
    completion = _invoke(_client(network), Op("write", "k", 1))
    assert completion["type"] == "fail" and completion["error"].startswith(NO_MASTER)
    assert all(port == SENTINEL_PORT for (_, port), _ in network.sent)


def test_a_refused_master_connection_is_a_failure(network: FakeNetwork) -> None:
    network.handlers[("10.0.0.2", SENTINEL_PORT)] = _sentinel("10.0.0.1")
    completion = _invoke(_client(network), Op("write", "k", 1))
    assert completion["type"] == "fail" and completion["error"].startswith("connection-refused")


def test_a_connection_lost_after_sending_is_info_for_a_write_and_fail_for_a_read(network: FakeNetwork) -> None:
    def broken(command: tuple) -> Any:
        raise RedisConnectionError("Connection closed by server.")

    network.handlers[("10.0.0.2", SENTINEL_PORT)] = _sentinel("10.0.0.1")
    network.handlers[("10.0.0.1", REDIS_PORT)] = broken
    write = _invoke(_client(network), Op("write", "k", 1))
    assert write["type"] == "info" and write["node"] == "n1" and write["error"].startswith("connection-lost")
    read = _invoke(_client(network), Op("read", "k"))
    assert read["type"] == "fail" and read["error"].startswith("connection-lost")


def test_a_master_that_never_answers_makes_a_cas_info_after_the_timeout(network: FakeNetwork) -> None:
    network.handlers[("10.0.0.2", SENTINEL_PORT)] = _sentinel("10.0.0.1")
    network.handlers[("10.0.0.1", REDIS_PORT)] = lambda command: HANG
    completion = _invoke(_client(network, timeout=0.2), Op("cas", "k", [1, 2]))
    assert completion["type"] == "info" and completion["node"] == "n1"
    assert completion["error"] == "timeout after 0.2 s"


def test_a_stale_sentinel_answer_sends_a_read_to_a_replica_which_fails(network: FakeNetwork) -> None:
    network.handlers[("10.0.0.2", SENTINEL_PORT)] = _sentinel("10.0.0.1")
    network.handlers[("10.0.0.1", REDIS_PORT)] = _master({"k": "5"}, role=REPLICA_ROLE)
    completion = _invoke(_client(network), Op("read", "k"))
    assert completion["type"] == "fail" and completion["error"].startswith(NOT_MASTER)


def test_a_final_read_is_a_get_at_the_named_node_whatever_its_role(network: FakeNetwork) -> None:
    network.handlers[("10.0.0.3", REDIS_PORT)] = lambda command: "7" if command == ("GET", "k") else None
    completion = _invoke(_client(network), Op("read", "k", node="n3", local=True))
    assert completion == {"type": "ok", "value": 7, "node": "n3"}
    assert network.sent == [(("10.0.0.3", REDIS_PORT), [("GET", "k")])]
    refused = _invoke(_client(network), Op("read", "k", node="n1", local=True))
    assert refused["type"] == "fail" and refused["node"] == "n1"


def test_wait_is_sent_after_the_write_with_half_the_timeout(network: FakeNetwork) -> None:
    network.handlers[("10.0.0.2", SENTINEL_PORT)] = _sentinel("10.0.0.1")
    network.handlers[("10.0.0.1", REDIS_PORT)] = lambda command: "OK" if command[0] == "SET" else 1
    completion = _invoke(_client(network, wait=2, timeout=2.0), Op("write", "k", 1))
    assert completion["type"] == "info" and completion["error"] == "wait: 1 of 2 replicas acknowledged"
    assert network.sent[-1] == (("10.0.0.1", REDIS_PORT), [("SET", "k", "1"), ("WAIT", 2, 1000)])
