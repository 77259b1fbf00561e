"""The RabbitMQ client's classification: what a put, consume or confirm records when the broker answers,
refuses, times out or goes away; the message encoding; a confirm's GUID filled in before its invoke."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import aiormq.exceptions
import pytest

from adapters.rabbitmq import client as rabbit_client
from adapters.rabbitmq.client import (
    CHANNEL_CLOSED,
    NOTHING_TO_CONFIRM,
    UNANSWERED,
    Held,
    RabbitQueueClient,
    after_sending,
    decode_message,
    encode_message,
    queue_arguments,
)
from workloads.ops import Op

HOSTS = {"n1": "127.0.0.1", "n2": "127.0.0.1", "n3": "127.0.0.1"}


@pytest.mark.parametrize(
    ("f", "exc", "kind", "error"),
    [
        ("put", aiormq.exceptions.PublishError.__new__(aiormq.exceptions.PublishError), "fail", "returned"),
        ("put", aiormq.exceptions.DeliveryError.__new__(aiormq.exceptions.DeliveryError), "info", "nacked"),
        ("put", TimeoutError(), "info", "timeout"),
        ("put", aiormq.exceptions.ChannelClosed(406, "x"), "info", "connection-lost"),
        ("put", ConnectionResetError(), "info", "connection-lost"),
        ("consume", TimeoutError(), "info", "timeout"),
        ("consume", aiormq.exceptions.ChannelClosed(404, "NOT_FOUND"), "fail", "channel-closed"),
        ("consume", aiormq.exceptions.ConnectionClosed(320, "shutdown"), "info", "connection-lost"),
    ],
)
def test_what_happens_after_the_frame_was_sent(f: str, exc: BaseException, kind: str, error: str) -> None:
    completion = after_sending(f, "n1", exc)
    assert completion["type"] == kind and completion["error"].startswith(error) and completion["node"] == "n1"


def test_messages_round_trip_and_foreign_bodies_stay_visible() -> None:
    body = encode_message({"guid": "g1", "value": 7})
    assert decode_message(body) == {"guid": "g1", "value": 7}
    assert decode_message(b"\xffnot json") == "\ufffdnot json"
    assert queue_arguments("quorum") == {"x-queue-type": "quorum"}
    with pytest.raises(ValueError):
        queue_arguments("stream")


class FakeChannel:
    def __init__(self, closed: bool = False) -> None:
        self.is_closed = closed


class FakeMessage:
    def __init__(self, fails: BaseException | None = None) -> None:
        self.acked = False
        self.fails = fails

    async def ack(self) -> None:
        if self.fails is not None:
            raise self.fails
        self.acked = True


class FakeConnection:
    is_closed = False

    async def close(self) -> None:
        self.is_closed = True


def _holding(message: Any, channel_closed: bool = False) -> RabbitQueueClient:
    client = RabbitQueueClient(HOSTS, "n1")
    client.connection, client.node = FakeConnection(), "n1"
    client._held["q0"] = Held(FakeChannel(channel_closed), message, "g1")
    return client


def test_a_chaos_phase_confirm_names_the_message_it_acknowledges() -> None:
    client = _holding(FakeMessage())
    op = client.prepare(Op("confirm", "q0", None))
    assert op.value == "g1"
    assert client.prepare(Op("confirm", "q1", None)).value is None


def test_a_sent_ack_has_no_reply_so_it_is_info_never_ok() -> None:
    message = FakeMessage()
    completion = asyncio.run(_holding(message).invoke(Op("confirm", "q0", "g1")))
    assert message.acked and completion["type"] == "info" and completion["error"] == UNANSWERED
    assert completion["value"] == "g1"


def test_a_confirm_whose_channel_is_gone_fails_the_broker_redelivers() -> None:
    message = FakeMessage()
    completion = asyncio.run(_holding(message, channel_closed=True).invoke(Op("confirm", "q0", "g1")))
    assert not message.acked and completion["type"] == "fail" and completion["error"].startswith(CHANNEL_CLOSED)


def test_a_confirm_of_another_message_or_of_nothing_fails() -> None:
    for client, op in ((_holding(FakeMessage()), Op("confirm", "q0", "g2")),
                       (RabbitQueueClient(HOSTS, "n1"), Op("confirm", "q0", None))):
        completion = asyncio.run(client.invoke(op))
        assert completion["type"] == "fail" and completion["error"] == NOTHING_TO_CONFIRM


def test_an_ack_that_breaks_on_a_closing_channel_fails_and_on_a_lost_connection_is_info() -> None:
    closing = asyncio.run(_holding(FakeMessage(aiormq.exceptions.ChannelInvalidStateError("closed")))
                          .invoke(Op("confirm", "q0", "g1")))
    lost = asyncio.run(_holding(FakeMessage(ConnectionResetError())).invoke(Op("confirm", "q0", "g1")))
    assert closing["type"] == "fail" and lost["type"] == "info"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("f", ["put", "consume"])
def test_nothing_sent_when_no_node_accepts_a_connection_is_fail(monkeypatch: pytest.MonkeyPatch, f: str) -> None:
    monkeypatch.setattr(rabbit_client, "AMQP_PORT", _closed_port())
    value = {"guid": "g1", "value": 1} if f == "put" else None
    completion = asyncio.run(RabbitQueueClient(HOSTS, "n2", timeout=2.0).invoke(Op(f, "q0", value)))
    assert completion["type"] == "fail" and completion["error"].startswith("connect-failed")
    assert completion["error"].count("n") >= 3  # every node was tried, home first


def test_a_final_phase_op_is_served_by_its_node_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rabbit_client, "AMQP_PORT", _closed_port())
    completion = asyncio.run(RabbitQueueClient(HOSTS, "n1", timeout=2.0).invoke(Op("consume", "q0", None, node="n3")))
    assert completion["type"] == "fail" and completion["node"] == "n3"
    assert "n1:" not in completion["error"] and "n3:" in completion["error"]


class FakeAmqpConnection:
    """Opens channels as aio-pika does, refusing what aio-pika refuses; records each channel's options."""

    is_closed = False

    def __init__(self) -> None:
        self.opened: list[dict[str, Any]] = []

    async def channel(self, publisher_confirms: bool = True, on_return_raises: bool = False) -> Any:
        if on_return_raises and not publisher_confirms:
            raise RuntimeError('"on_return_raises" not applicable without "publisher_confirms"')
        self.opened.append({"publisher_confirms": publisher_confirms, "on_return_raises": on_return_raises})
        connection = self

        class Channel:
            is_closed = False

            async def declare_queue(self, name: str, durable: bool, arguments: dict[str, Any]) -> Any:
                connection.opened[-1].update(name=name, durable=durable, arguments=arguments)
                return type("Queue", (), {"name": name})()

        return Channel()

    async def close(self) -> None:
        self.is_closed = True


@pytest.mark.parametrize("confirms", [True, False])
def test_each_queue_gets_a_channel_in_confirm_mode_unless_confirms_are_off(confirms: bool) -> None:
    client = RabbitQueueClient(HOSTS, "n1", queue_type="classic", confirms=confirms)
    connection = FakeAmqpConnection()
    client.connection, client.node = connection, "n1"
    queue = asyncio.run(client._queue("q0", None))
    assert queue.name == "q0"
    assert connection.opened == [{"publisher_confirms": confirms, "on_return_raises": confirms, "name": "q0",
                                  "durable": True, "arguments": {"x-queue-type": "classic"}}]
