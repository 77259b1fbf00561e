"""The RabbitMQ workload client: the ``queue`` workload's put, consume and confirm over AMQP 0-9-1 (aio-pika).

One :class:`RabbitQueueClient` per logical process (``harness.db.Clients``). It keeps one AMQP connection,
to the process's *home* node (``nodes[process % N]``) or, when that one does not accept a connection, the
next node that does (any node serves any queue: a quorum queue's operations go to its Raft leader through
the node the client is connected to). A final-phase op (``op.node`` set) is served by that node only: the
client connects to it, and if it cannot, the op fails; it never falls back to another node.

Each queue gets a channel of its own on that connection (in confirm mode unless ``confirms=off``), on which
the queue is declared (durable, ``x-queue-type`` :data:`QUEUE_TYPES`; idempotent) before its first use:

* ``put {"guid", "value"}``: ``basic.publish`` of the JSON message to the queue (default exchange,
  ``mandatory``, persistent, ``message_id`` the GUID), then the wait for the publisher confirm. ``ok`` on
  ``basic.ack``. ``basic.return`` (no queue took it) is ``fail``. A ``basic.nack`` is ``info``: RabbitMQ
  nacks when the queue could not take responsibility in time, and for a quorum queue the Raft command may
  still commit afterwards. A timeout or a lost connection or channel after the publish is ``info``. A put
  is never re-sent: RabbitMQ does not de-duplicate by GUID (``Delivery(dedup=False)``). With
  ``confirms=off`` the put is ``ok`` once the frame is written, which is exactly the unsafe behaviour the
  option exists to show.
* ``consume``: ``basic.get`` without auto-ack: ``ok`` with the message ``{"guid", "value"}`` (and
  ``"redelivered": true`` when the broker flags it as delivered before: the queue model then does not take
  it for a dequeue), or ``ok`` null
  on ``get-empty`` (nothing *ready*: AMQP cannot say that messages are in flight,
  ``Delivery(in_flight=False)``). The delivery is remembered as this process's last from that queue. A
  timeout or a lost connection after the ``basic.get`` is ``info`` (a message may have been delivered to
  this channel; it comes back when the channel closes, which the interpreter's close of the retired
  client makes happen). A channel the broker closed with an error is ``fail``: whatever it had delivered
  on that channel is redelivered.
* ``confirm``: ``basic.ack`` of the message this process consumed last from that queue (the GUID the op
  names, in the final phase; in the chaos phase the last one consumed, whose GUID :meth:`prepare` writes
  into the op before its invoke is recorded). ``basic.ack`` has no reply, so a
  sent ack is ``info`` (``unanswered``), never ``ok``. When the channel that delivered the message is gone
  the ack cannot be sent and the broker redelivers the message: ``fail`` (``channel-closed``). With
  nothing to confirm: ``fail`` (``nothing-to-confirm``). The completion's value is the GUID.

Anything that fails before a frame of the operation was sent (no connection, a channel or declare
refused) is ``fail``. Unconfirmed deliveries are held by the channel that received them until it closes;
:meth:`RabbitQueueClient.close` closes the connection, so that the final drain sees every message a
chaos-phase consumer took and never confirmed; a connection whose close did not complete (its broker was
paused) is closed by the broker after two missed heartbeats (:data:`HEARTBEAT`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import aio_pika
import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage, AbstractQueue

from harness.db.client import CONNECTION_LOST, TIMEOUT, NotSent, PinnedClient, fail, info, ok
from workloads.ops import Op

AMQP_PORT = 5672
QUEUE_TYPES = ("quorum", "classic")
NOTHING_TO_CONFIRM = "nothing-to-confirm"
CHANNEL_CLOSED = "channel-closed"
UNANSWERED = "unanswered: basic.ack has no reply"
CONNECT_FAILED = "connect-failed"
NACKED = "nacked"
RETURNED = "returned"
LOGIN = PASSWORD = "guest"
CLOSE_TIMEOUT = 1.0
"""Seconds a close may take (the broker's close-ok); a connection that does not answer is dropped."""
CONNECT_TIMEOUT = 2.0
"""Seconds one node may take to accept a connection before the next one is tried."""
HEARTBEAT = 5
"""AMQP heartbeat, seconds: a connection whose client went silent (a close that timed out against a paused
broker, a client abandoned mid-operation) is closed by the broker after two missed heartbeats, and what it
held unconfirmed is redelivered within the final drain rather than after RabbitMQ's default 60 s."""


def queue_arguments(queue_type: str) -> dict[str, Any]:
    """The declare arguments of a queue of ``queue_type`` (the setup's declaration must match them)."""
    if queue_type not in QUEUE_TYPES:
        raise ValueError(f"queue type must be one of {', '.join(QUEUE_TYPES)}, not {queue_type!r}")
    return {"x-queue-type": queue_type}


def encode_message(message: Mapping[str, Any]) -> bytes:
    """A put's ``{"guid", "value"}`` as the message body."""
    return json.dumps({"guid": message["guid"], "value": message["value"]}, separators=(",", ":")).encode()


def decode_message(body: bytes) -> Any:
    """What :func:`encode_message` made; a body that is not such JSON as its text (the checker flags it)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body.decode("utf-8", "replace")
    if isinstance(data, dict) and "guid" in data:
        return {"guid": data["guid"], "value": data.get("value")}
    return data


def after_sending(f: str, node: str | None, exc: BaseException) -> dict[str, Any]:
    """The completion of a put or consume whose frame was sent when ``exc`` happened (module docstring)."""
    if isinstance(exc, aiormq.exceptions.PublishError):
        return fail(node, f"{RETURNED}: no queue took the message")
    if isinstance(exc, aiormq.exceptions.DeliveryError):
        return info(node, f"{NACKED}: the broker did not take responsibility in time")
    if isinstance(exc, TimeoutError):
        return info(node, TIMEOUT)
    if f == "consume" and isinstance(exc, aiormq.exceptions.ChannelClosed):
        return fail(node, f"{CHANNEL_CLOSED}: {exc}")
    return info(node, f"{CONNECTION_LOST}: {type(exc).__name__}: {exc}")


@dataclass
class Held:
    """A delivery this process has not confirmed: the channel it came on, and the message."""

    channel: AbstractChannel
    message: AbstractIncomingMessage
    guid: Any


class RabbitQueueClient(PinnedClient[None]):
    """One logical process's client: put, consume and confirm over one AMQP connection.

    ``hosts``: node -> where the controller reaches it; ``home`` the node connected to first;
    ``queue_type`` :data:`QUEUE_TYPES`; ``confirms`` whether a put waits for the publisher confirm;
    ``timeout`` the seconds one operation may take.
    """

    def __init__(self, hosts: Mapping[str, str], home: str, *, queue_type: str = "quorum", confirms: bool = True,
                 timeout: float = 5.0) -> None:
        super().__init__(hosts, home, timeout=timeout)
        self.arguments = queue_arguments(queue_type)
        self.confirms = confirms
        self.budget = max(timeout - CLOSE_TIMEOUT - 0.5, timeout * 0.5)
        """Seconds an operation may wait for the broker: what is left of ``timeout`` after closing a
        connection that did not answer, so that the client's own verdict comes before the harness's."""
        self.connection: AbstractConnection | None = None
        self.node: str | None = None
        self._queues: dict[str, tuple[AbstractChannel, AbstractQueue]] = {}
        self._held: dict[str, Held] = {}

    def prepare(self, op: Op) -> Op:
        """A chaos-phase ``confirm`` (no GUID) with the GUID of the message it will acknowledge filled in, so
        that the history says which message an unanswered confirm was about."""
        if op.f == "confirm" and op.value is None and op.key in self._held:
            return replace(op, value=self._held[op.key].guid)
        return op

    async def invoke(self, op: Op) -> dict[str, Any]:
        """Run ``op`` (module docstring) within the client's timeout."""
        if op.key is None:
            raise ValueError(f"the rabbitmq client needs a queue for {op.f!r}")
        if op.f == "confirm":
            return await self._confirm(op)
        if op.f not in ("put", "consume"):
            raise ValueError(f"the rabbitmq client runs put, consume and confirm, not {op.f!r}")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.budget
        try:
            queue = await asyncio.wait_for(self._queue(op.key, op.node), self.budget)
        except NotSent as exc:
            return fail(op.node or self.node, str(exc))
        except TimeoutError:
            await self.close()
            return fail(op.node, f"{CONNECT_FAILED}: no channel within {self.budget:g} s")
        node = self.node
        left = max(deadline - loop.time(), 0.1)
        try:
            if op.f == "put":
                return await asyncio.wait_for(self._put(queue, op), left)
            return await asyncio.wait_for(self._consume(queue, op.key), left)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure after sending is classified
            completion = after_sending(op.f, node, exc)
            if completion["error"].startswith((TIMEOUT, CONNECTION_LOST)):
                await self.close()  # a late reply must never be read as the next op's
            return completion

    async def _put(self, queue: AbstractQueue, op: Op) -> dict[str, Any]:
        channel, _ = self._queues[op.key]
        message = aio_pika.Message(encode_message(op.value), message_id=str(op.value["guid"]),
                                   content_type="application/json",
                                   delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
        await channel.default_exchange.publish(message, routing_key=queue.name, mandatory=True, timeout=None)
        return ok(self.node)

    async def _consume(self, queue: AbstractQueue, key: str) -> dict[str, Any]:
        channel, _ = self._queues[key]
        message = await queue.get(no_ack=False, fail=False, timeout=None)
        if message is None:
            return ok(self.node)
        value = decode_message(message.body)
        if isinstance(value, dict) and message.redelivered:
            value["redelivered"] = True  # delivered before and returned (checkers.models.QueueModel)
        guid = value.get("guid") if isinstance(value, dict) else None
        self._held[key] = Held(channel, message, guid)
        return ok(self.node, value)

    async def _confirm(self, op: Op) -> dict[str, Any]:
        held = self._held.get(op.key)
        guid = op.value if op.value is not None else (held.guid if held else None)
        if held is None or guid is None or held.guid != guid:
            return fail(op.node or self.node, NOTHING_TO_CONFIRM, value=guid)
        del self._held[op.key]
        if held.channel.is_closed or self.connection is None or self.connection.is_closed:
            return fail(op.node or self.node, f"{CHANNEL_CLOSED}: the broker redelivers the message", value=guid)
        try:
            await asyncio.wait_for(held.message.ack(), self.budget)
        except asyncio.CancelledError:
            raise
        except aiormq.exceptions.ChannelInvalidStateError as exc:
            return fail(self.node, f"{CHANNEL_CLOSED}: {exc}", value=guid)
        except Exception as exc:  # noqa: BLE001 - the ack may or may not have left
            return info(self.node, f"{CONNECTION_LOST}: {type(exc).__name__}: {exc}", value=guid)
        return info(self.node, UNANSWERED, value=guid)

    # -- connection and channels ---------------------------------------------------------------------

    async def _queue(self, key: str, node: str | None) -> AbstractQueue:
        """The queue ``key`` declared on its channel, on a connection to ``node`` (any node, home first,
        when None); :class:`NotSent` when there is none."""
        if node is not None and node not in self.addresses:
            raise NotSent(f"no node called {node!r}")
        if node is not None and self.node not in (None, node):
            await self.close()
        if self.connection is None or self.connection.is_closed:
            await self._connect(node)
        known = self._queues.get(key)
        if known is not None and not known[0].is_closed:
            return known[1]
        assert self.connection is not None
        node = self.node
        try:
            channel = await self.connection.channel(publisher_confirms=self.confirms, on_return_raises=self.confirms)
            queue = await channel.declare_queue(key, durable=True, arguments=self.arguments)
        except (aiormq.exceptions.AMQPError, ConnectionError, OSError,
                aiormq.exceptions.ChannelInvalidStateError) as exc:
            if not isinstance(exc, aiormq.exceptions.ChannelClosed):
                await self.close()
            raise NotSent(f"{CONNECT_FAILED}: declaring {key} at {node}: {type(exc).__name__}: {exc}") from None
        self._queues[key] = (channel, queue)
        return queue

    async def _connect(self, node: str | None) -> None:
        """Connect to ``node``, or to the first node that accepts, home first."""
        await self.close()
        candidates = [node] if node is not None else self.rotation()
        errors = []
        for candidate in candidates:
            try:
                self.connection = await aio_pika.connect(
                    host=self.addresses[candidate], port=AMQP_PORT, login=LOGIN, password=PASSWORD,
                    timeout=min(self.budget, CONNECT_TIMEOUT), client_properties={"connection_name": f"chaos-{self.home}"},
                    heartbeat=HEARTBEAT)
            except (aiormq.exceptions.AMQPError, ConnectionError, OSError, TimeoutError) as exc:
                errors.append(f"{candidate}: {type(exc).__name__}: {exc}".rstrip(": "))
                continue
            self.node = candidate
            return
        raise NotSent(f"{CONNECT_FAILED}: {'; '.join(errors)}")

    async def close(self) -> None:
        """Close the connection: the broker redelivers whatever this process held unconfirmed."""
        connection, self.connection = self.connection, None
        self._queues.clear()
        self._held.clear()
        self.node = None
        if connection is not None and not connection.is_closed:
            try:
                await asyncio.wait_for(connection.close(), CLOSE_TIMEOUT)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a dead connection is closed enough
                pass
