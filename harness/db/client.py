"""What a workload client shares with every other: a home node, failing over, kept connections, the outcome words.

A client of a real system repeats the same skeleton around its system's requests; :class:`PinnedClient`
holds it, and the adapter's client keeps only what is its system's (the requests, the answers, which
errors mean what)::

    class MyClient(PinnedClient[MyConnection]):
        async def invoke(self, op: Op) -> dict[str, Any]:
            return await self.failover(op, self._at)

        async def _at(self, op: Op, node: str, deadline: float) -> dict[str, Any]:
            try:
                connection = await self.connection(node, lambda: my_connect(self.addresses[node]))
            except OSError as exc:
                raise NotSent(f"{CONNECTION_REFUSED}: {exc}") from None  # the next node gets it
            try:
                answer = await connection.request(...)
            except TimeoutError:
                await self.drop(node)  # a late reply must never be read as the next operation's
                return indefinite(op, node, TIMEOUT)
            return ok(node, answer.value)

* **Home** (:func:`home_node`): a logical process talks to ``nodes[process % N]`` unless an operation
  names a node; a process retired after an ``info`` hands the next one the next node.
* **Failing over** (:meth:`PinnedClient.failover`): an operation with ``op.node`` goes to that node only
  (the final phase's local reads: never redirected; a node not in the test is ``fail``). Any other starts
  at the home; when the attempt raises :class:`NotSent` (nothing of the operation left the controller: the
  connection was refused or never made) it goes on to the next node, each tried once while the client's
  ``timeout`` lasts, and the home moves with it. Raise :class:`NotSent` only when nothing was sent.
* **Connections** (:meth:`PinnedClient.connection`, :meth:`~PinnedClient.drop`,
  :meth:`~PinnedClient.close`): one kept connection per key (a node, or ``(node, port)``), opened on first
  use and again once it reports ``is_closed``; a connection that failed is dropped, and closing one that
  is broken never raises. :meth:`PinnedClient.bounded` runs a whole operation within ``timeout`` and
  closes every connection when it did not finish.
* **Outcomes** (:func:`ok`, :func:`fail`, :func:`info`, :func:`indefinite`): ``fail`` only when the
  operation certainly did not happen; :func:`indefinite` when it may have: ``info``, or ``fail`` for a read
  (it has no effect). The words :data:`CONNECTION_REFUSED`, :data:`TIMEOUT`, :data:`CONNECTION_LOST`
  start the ``error`` of the common cases.

What an answer or an exception *means* stays in the adapter: this module decides no outcome on its own
except "not sent" (``fail``) and "a node not in the test" (``fail``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Hashable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from workloads.ops import Op

CONNECTION_REFUSED = "connection-refused"
TIMEOUT = "timeout"
CONNECTION_LOST = "connection-lost"
READS = frozenset({"read"})
"""Operations without an effect: what :func:`indefinite` records ``fail`` rather than ``info``."""

C = TypeVar("C")
Attempt = Callable[[Op, str, float], Awaitable[dict[str, Any]]]
"""``await attempt(op, node, deadline)``: ``op``'s completion at ``node`` (``deadline`` in the running loop's
clock), or it raises :class:`NotSent`."""


def home_node(nodes: Sequence[str], process: int) -> str:
    """The node a process talks to unless an operation names one: its id modulo the node count."""
    return nodes[process % len(nodes)]


def completion(kind: str, node: str | None, value: Any = None, **fields: Any) -> dict[str, Any]:
    """A completion ``{type, value, node, **fields}`` (``fields``: ``error``, ``lsn``, ``group``)."""
    return {"type": kind, "value": value, "node": node, **fields}


def ok(node: str | None, value: Any = None, **fields: Any) -> dict[str, Any]:
    return completion("ok", node, value, **fields)


def fail(node: str | None, error: str, **fields: Any) -> dict[str, Any]:
    """The operation certainly did not happen."""
    return completion("fail", node, error=error, **fields)


def info(node: str | None, error: str, **fields: Any) -> dict[str, Any]:
    """Nobody knows whether the operation happened."""
    return completion("info", node, error=error, **fields)


def indefinite(op: Op, node: str | None, error: str, *, reads: Collection[str] = READS,
               **fields: Any) -> dict[str, Any]:
    """An outcome that may or may not have taken effect: ``info``, or ``fail`` for a read (no effect)."""
    return (fail if op.f in reads else info)(node, error, **fields)


class NotSent(Exception):
    """Nothing of the operation was sent (no connection, a channel or session refused): it certainly did not
    happen, and in :meth:`PinnedClient.failover` the next node gets it. The message is the ``fail``'s error."""


class PinnedClient(Generic[C]):
    """One logical process's client, pinned to its ``home`` node of ``addresses`` (node -> where the
    controller reaches it), failing over within ``timeout`` seconds (module docstring).

    ``member`` is the word the errors use for a node (``"no node called 'n7'"``).
    """

    member = "node"

    def __init__(self, addresses: Mapping[str, Any], home: str, *, timeout: float) -> None:
        if home not in addresses:
            raise ValueError(f"home {self.member} {home!r} is not one of {', '.join(addresses)}")
        self.addresses = dict(addresses)
        self.home = home
        self.timeout = timeout
        self._connections: dict[Hashable, C] = {}

    def rotation(self) -> list[str]:
        """Every node, the home first, then the ones after it in the test's order."""
        nodes = list(self.addresses)
        first = nodes.index(self.home)
        return nodes[first:] + nodes[:first]

    async def failover(self, op: Op, attempt: Attempt) -> dict[str, Any]:
        """``op`` at ``op.node``, or at the home, passing on to the next node while ``attempt`` raises
        :class:`NotSent` and the client's timeout lasts (each node once; the home moves with it)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        if op.node is not None:
            if op.node not in self.addresses:
                return fail(op.node, f"no {self.member} called {op.node!r}")
            try:
                return await attempt(op, op.node, deadline)
            except NotSent as exc:
                return fail(op.node, str(exc))
        for node in self.rotation():
            self.home = node
            try:
                return await attempt(op, node, deadline)
            except NotSent as exc:
                outcome = fail(node, str(exc))
            if loop.time() >= deadline:
                break
        return outcome

    async def bounded(self, invocation: Awaitable[dict[str, Any]],
                      on_timeout: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``invocation``'s completion, or ``on_timeout()`` once the client's timeout has passed, every
        connection closed first (a reply may still come: it must never be read as the next command's)."""
        try:
            return await asyncio.wait_for(invocation, self.timeout)
        except TimeoutError:
            await self.close()
            return on_timeout()

    async def connection(self, key: Hashable, connect: Callable[[], Awaitable[C]]) -> C:
        """The kept connection of ``key``, made by ``connect()`` when there is none or it is closed."""
        kept = self._connections.get(key)
        if kept is not None and not getattr(kept, "is_closed", False):
            return kept
        self._connections.pop(key, None)
        made = self._connections[key] = await connect()
        return made

    async def close_connection(self, connection: C) -> None:
        """Close one connection (override for a connection without an ``async close()``)."""
        await connection.close()  # type: ignore[attr-defined]

    async def drop(self, key: Hashable) -> None:
        """Forget ``key``'s connection (it may be broken); the next use opens a new one."""
        connection = self._connections.pop(key, None)
        if connection is not None:
            try:
                await self.close_connection(connection)
            except Exception:  # noqa: BLE001, S110 - a broken connection may fail to close; it is gone anyway
                pass

    async def close(self) -> None:
        """Close every kept connection (the harness calls it when the process retires)."""
        for key in list(self._connections):
            await self.drop(key)
