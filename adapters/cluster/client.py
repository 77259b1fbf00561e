"""The executor: runs one generated operation through the ``cluster`` client and returns its completion.

:class:`ClusterWorkloadClient` is one logical process's client (``harness.interpreter.WorkloadClient``):
``await invoke(op)`` returns the completion's fields in the history's shape (FORMATS.md): ``type``
(``ok``/``fail``/``info``), ``value``, ``lsn``, ``node``, ``error``. The cluster client already sorts
outcomes into ok / fail (definite) / info (indefinite) and follows redirects; this adds three rules:

* a ``read`` that ended ``info`` (a timeout, a lost connection) is recorded ``fail``: a read has no
  effect, so whether it "happened" changes nothing, and the process need not be retired (Jepsen's
  convention). A ``consume`` is not a read: it dequeues, so its ``info`` stays ``info``;
* a ``confirm`` op without a GUID confirms the message this process consumed last from that queue (the
  generator cannot know it, ``workloads.queue``); with nothing to confirm it ends ``fail`` with error
  ``nothing-to-confirm``, and its completion's value is the GUID it confirmed;
* a ``put`` op's value ``{"guid", "value"}`` is sent as the cluster's ``value`` and ``guid`` fields, and
  an attempt that ends indefinite (no answer within ``put_attempt_timeout``, a lost connection,
  ``leadership-lost``) is re-sent with the same GUID while the operation's deadline allows, as a
  BlazingMQ producer does (seed 004: the broker de-duplicates re-sent PUTs by GUID), also after a re-send
  failed definitely. One op, one completion: ``ok`` if an attempt was acknowledged; once an attempt was
  indefinite, a definite failure of a re-send cannot say that the earlier one did not happen, so without
  an acknowledgement the completion stays ``info`` (the first indefinite outcome). This is what
  makes the ``no-dedup`` bug visible (the simulator's producers do the same, docs/simulation.md);
* a ``local`` read or poll is sent with ``local=True``: the op's node answers it itself, never a redirect;
* a ``poll`` whose value is null (the log workload's chaos-phase polls, ``workloads.log``) reads from one
  past the highest offset this process has read from that log, or from 0: :meth:`ClusterWorkloadClient.prepare`
  fills the offset in before the interpreter records the invoke. Like a read, a poll that ended ``info``
  is recorded ``fail`` (it changes nothing). An ``append`` completes ok with ``[offset, value]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from cluster.client import CONNECTION_REFUSED, DEFAULT_TIMEOUT, Client, Result
from harness.db import StatusError
from workloads.ops import Op

NOTHING_TO_CONFIRM = "nothing-to-confirm"
PUT_ATTEMPT_TIMEOUT = 1.0
"""Seconds one ``put`` attempt may go unanswered before it is re-sent with the same GUID."""
PUT_RETRY_BACKOFF = 0.05
"""Seconds between an indefinite ``put`` attempt and its re-send."""


def completion_of(result: Result, f: str) -> dict[str, Any]:
    """A cluster ``Result`` as the completion fields of the history (``lsn`` as a ``[term, seq]`` list, and
    ``group`` when a storage shard answered)."""
    kind = result.type
    if f in ("read", "poll") and kind == "info":
        kind = "fail"
    completion = {
        "type": kind,
        "value": result.value,
        "lsn": list(result.lsn) if result.lsn is not None else None,
        "node": result.node,
        "error": result.error,
    }
    if result.group is not None:
        completion["group"] = result.group  # a storage shard's (docs/shards.md); absent: the single group
    return completion


def status_of(result: Result) -> dict[str, Any]:
    """A ``status`` request's result as ``harness.db.Status`` answers: the node's view, or
    ``StatusError`` (definite when the request certainly got no answer: connection refused)."""
    if result.type == "ok" and isinstance(result.value, Mapping):
        return dict(result.value)
    if result.type == "ok":
        raise StatusError(f"status reply is not an object: {result.value!r}", definite=True)
    reason = result.error if not result.message else f"{result.error}: {result.message}"
    if result.error == CONNECTION_REFUSED:
        reason = "connection refused"
    raise StatusError(reason or "no status", definite=result.type == "fail")


class ClusterWorkloadClient:
    """One logical process's connection to a ``cluster``: executes ops, remembers unconfirmed messages."""

    operations: tuple[str, ...] = ("read", "write", "cas", "append", "poll", "put", "consume", "confirm")
    """The operations :meth:`invoke` runs: it serves every workload that invokes only these
    (``workloads.generator.workloads_for``)."""

    def __init__(
        self,
        client: Client,
        *,
        timeout: float | None = None,
        put_attempt_timeout: float = PUT_ATTEMPT_TIMEOUT,
        put_retry_backoff: float = PUT_RETRY_BACKOFF,
    ) -> None:
        self.client = client
        self.timeout = timeout
        self.put_attempt_timeout = put_attempt_timeout
        self.put_retry_backoff = put_retry_backoff
        self._consumed: dict[str, str] = {}  # queue -> GUID of the last message consumed and not confirmed
        self._next_offset: dict[str, int] = {}  # log -> where this process's next poll reads from

    def prepare(self, op: Op) -> Op:
        """``op`` with what only this process knows filled in: a poll's offset (module docstring)."""
        if op.f == "poll" and op.value is None:
            return replace(op, value=self._next_offset.get(op.key, 0))
        return op

    async def invoke(self, op: Op) -> dict[str, Any]:
        c, key, node, timeout = self.client, op.key, op.node, self.timeout
        if op.f == "read":
            if op.local:
                result = await c.read(key, node=node, timeout=timeout, local=True)
            else:
                result = await c.read(key, node=node, timeout=timeout)
        elif op.f == "write":
            result = await c.write(key, op.value, node=node, timeout=timeout)
        elif op.f == "cas":
            expected, new = op.value
            result = await c.cas(key, expected, new, node=node, timeout=timeout)
        elif op.f == "append":
            result = await c.append(key, op.value, node=node, timeout=timeout)
        elif op.f == "poll":
            start = op.value if op.value is not None else self._next_offset.get(key, 0)
            result = await c.poll(key, start, node=node, timeout=timeout, local=op.local)
            if result.type == "ok" and isinstance(result.value, list):
                offsets = [r[0] for r in result.value if isinstance(r, list) and r and isinstance(r[0], int)]
                if offsets:
                    self._next_offset[key] = max(self._next_offset.get(key, 0), max(offsets) + 1)
        elif op.f == "put":
            result = await self._put(key, op.value["value"], op.value["guid"], node)
        elif op.f == "consume":
            result = await c.consume(key, node=node, timeout=timeout)
            message = result.value
            if result.type == "ok" and isinstance(message, dict) and "guid" in message:
                self._consumed[key] = message["guid"]
        elif op.f == "confirm":
            guid = op.value if op.value is not None else self._consumed.get(key)
            if guid is None:
                return {"type": "fail", "value": None, "lsn": None, "node": node, "error": NOTHING_TO_CONFIRM}
            result = await c.confirm(key, guid, node=node, timeout=timeout)
            if result.type != "info" and self._consumed.get(key) == guid:
                del self._consumed[key]
            completion = completion_of(result, op.f)
            completion["value"] = guid
            return completion
        else:
            raise ValueError(f"the cluster client cannot run operation {op.f!r}")
        return completion_of(result, op.f)

    async def _put(self, key: str | None, value: Any, guid: str, node: str | None) -> Result:
        """PUT with re-sends of the same GUID after indefinite attempts, within the op's deadline."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.timeout if self.timeout is not None else DEFAULT_TIMEOUT)
        indefinite: Result | None = None
        while True:
            attempt = min(self.put_attempt_timeout, max(deadline - loop.time(), 0.0))
            result = await self.client.put(key, value, guid, node=node, timeout=attempt)
            if result.type == "ok":
                return result
            if result.type == "fail" and indefinite is None:
                return result  # definitely not enqueued: nothing to re-send
            # Re-send while an earlier attempt may have taken effect; a definite failure of a re-send
            # says nothing about that attempt, so the op stays indefinite unless a re-send is acked.
            indefinite = indefinite or result
            if deadline - loop.time() <= self.put_retry_backoff + 0.01:
                return indefinite
            await asyncio.sleep(self.put_retry_backoff)

    async def close(self) -> None:
        await self.client.close()

