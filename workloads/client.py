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
* a ``put`` op's value ``{"guid", "value"}`` is sent as the cluster's ``value`` and ``guid`` fields;
* a ``local`` read is sent with ``local=True``: the op's node answers it itself, never a redirect.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from cluster.client import Client, Result
from workloads.ops import Op

NOTHING_TO_CONFIRM = "nothing-to-confirm"


def completion_of(result: Result, f: str) -> dict[str, Any]:
    """A cluster ``Result`` as the completion fields of the history (``lsn`` as a ``[term, seq]`` list)."""
    kind = result.type
    if f == "read" and kind == "info":
        kind = "fail"
    return {
        "type": kind,
        "value": result.value,
        "lsn": list(result.lsn) if result.lsn is not None else None,
        "node": result.node,
        "error": result.error,
    }


class ClusterWorkloadClient:
    """One logical process's connection to a ``cluster``: executes ops, remembers unconfirmed messages."""

    def __init__(self, client: Client, *, timeout: float | None = None) -> None:
        self.client = client
        self.timeout = timeout
        self._consumed: dict[str, str] = {}  # queue -> GUID of the last message consumed and not confirmed

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
        elif op.f == "put":
            result = await c.put(key, op.value["value"], op.value["guid"], node=node, timeout=timeout)
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

    async def close(self) -> None:
        await self.client.close()


def cluster_clients(
    nodes: Mapping[str, tuple[str, int]], *, timeout: float | None = None
) -> Callable[[int], Awaitable[ClusterWorkloadClient]]:
    """A factory the interpreter calls per process: a new ``cluster`` client (its own connections) each.

    ``timeout`` bounds each operation inside the client (redirects included); keep it below the
    interpreter's own per-operation timeout so the client's more precise verdict arrives first.
    """

    async def open_client(process: int) -> ClusterWorkloadClient:
        options = {} if timeout is None else {"timeout": timeout}
        return ClusterWorkloadClient(Client(nodes, **options), timeout=timeout)

    return open_client
