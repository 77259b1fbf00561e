"""The Python client of a ``cluster`` (what the workloads use): asyncio, pipelined, redirect-following.

Every call ends in a ``Result`` whose ``type`` is the history's completion type (FORMATS.md):

* ``ok``: the operation happened; ``value`` is what a read saw, ``lsn`` the Leader Sequence Number of
  the entry that carried it.
* ``fail``: it certainly did not happen (a definite error from the node, or the request never left
  this process: connection refused, too large).
* ``info``: unknown. It may have happened, or may still happen later: a timeout, a connection lost after
  sending, or an error the node marks indefinite. As Maelstrom says, when in doubt, indefinite is safe.

One TCP connection per node carries any number of outstanding requests, told apart by ``id`` (a
per-connection counter the client assigns). Within the one deadline of an operation (``timeout``):

* a ``not-leader`` reply that names a leader is followed to that node, at most ``max_redirects`` times;
* **failover**: a definite failure that says nothing about the leader (``connection-refused``: the node
  is down or unreachable, so the request never left; or ``not-leader`` without a usable leader) moves
  the operation to the next node it has not tried yet, in ``nodes`` order, so each node is tried at
  most once by failover. Connecting to one node waits at most ``connect_timeout``, so a node that drops
  packets does not use up the whole deadline. A node that refused is forgotten as the leader hint.
* an indefinite failure (timeout, connection lost after sending, an error the node marks indefinite)
  ends the operation ``info`` at once: a write that may have been applied is never sent again.

``Result.node`` is the node that gave the final answer and ``Result.redirects`` how many times the
operation moved to another node (redirects and failovers). A node that answers ``ok`` becomes the node
the next operation goes to first; one that refused or lost the connection stops being it. Reads with
``local=True`` are served by the node they are sent to (a linearizable follower read) and are never
redirected nor failed over. The protocol itself is in ``docs/node-core.md``.

``SyncClient`` wraps the same API for scripts and tests that do not run an event loop.

**Transports.** The policy above is :meth:`Client.request`; how one request reaches one node and its reply
comes back is a *connection* (:class:`NodeConnection`: TCP, pipelined). ``Client(connect=...)`` takes
another connection factory: the deterministic simulator passes connections over its simulated network,
so the simulated client is this client, rule for rule. A connection's ``call`` returns the reply, or
raises :class:`NeverSent` (definite: the request did not leave), :class:`Lost` (the connection dropped
with it outstanding) or ``TimeoutError``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from cluster.core.errors import ERRORS
from cluster.wire import LineDecoder, MessageTooLarge, encode

ResultType = Literal["ok", "fail", "info"]

DEFAULT_TIMEOUT = 5.0
DEFAULT_MAX_REDIRECTS = 3
DEFAULT_CONNECT_TIMEOUT = 1.0

# The codes this module produces itself; each is in cluster.core.errors.ERRORS with the same certainty.
TIMEOUT = "timeout"  # indefinite: no reply within the deadline
CONNECTION_LOST = "connection-lost"  # indefinite: the connection dropped after the request was written
CONNECTION_REFUSED = "connection-refused"  # definite: no connection, so the request was never sent
REQUEST_TOO_LARGE = "too-large"  # definite: over the 1 MiB line limit, never sent
CLIENT_ERRORS: dict[str, bool] = {TIMEOUT: False, CONNECTION_LOST: False, CONNECTION_REFUSED: True,
                                  REQUEST_TOO_LARGE: True}


@dataclass(frozen=True)
class Result:
    """How one operation ended. ``type`` is ``ok``, ``fail`` (definite) or ``info`` (indefinite)."""

    type: ResultType
    value: Any = None
    lsn: tuple[int, int] | None = None
    error: str | None = None
    message: str | None = None
    node: str | None = None
    leader: str | None = None
    redirects: int = 0
    #: the group (storage shard) whose leader answered and whose LSN ``lsn`` is; None: the single group
    group: str | None = None

    @property
    def ok(self) -> bool:
        return self.type == "ok"

    @property
    def definite(self) -> bool:
        """True when the outcome is known: ``ok`` or ``fail``."""
        return self.type != "info"


class NeverSent(Exception):
    """The request did not leave this process; the operation certainly did not happen."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Lost(Exception):
    """The connection closed while a request was outstanding."""


class Connection(Protocol):
    """One node's transport (module docstring, "Transports")."""

    async def call(self, request: dict[str, Any], timeout: float,
                   connect_timeout: float | None = None) -> dict[str, Any]: ...

    async def close(self) -> None: ...


Connect = Callable[[str, str, int], Connection]
"""``connect(node, host, port)``: a connection to one node (not opened until its first call)."""


class NodeConnection:
    """One pipelined connection to one node, opened on first use and again after it drops."""

    def __init__(self, node: str, host: str, port: int) -> None:
        self.node = node
        self.host = host
        self.port = port
        self._ids = itertools.count(1)
        # request id -> (its future, the writer it went out on)
        self._pending: dict[int, tuple[asyncio.Future[dict[str, Any]], asyncio.StreamWriter]] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._connecting: asyncio.Lock | None = None
        self._outbox: list[bytes] = []
        self._outbox_writer: asyncio.StreamWriter | None = None

    async def call(self, request: dict[str, Any], timeout: float,
                   connect_timeout: float | None = None) -> dict[str, Any]:
        """Send ``request`` (its ``id`` is assigned here) and await its reply; connecting (when there is
        no open connection) takes at most ``connect_timeout`` of the ``timeout``.

        Raises ``NeverSent``, ``Lost`` or ``TimeoutError``.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        request_id = next(self._ids)
        try:
            data = encode({**request, "id": request_id})
        except MessageTooLarge as exc:
            raise NeverSent(REQUEST_TOO_LARGE, str(exc)) from None
        connect_by = deadline if connect_timeout is None else min(deadline, loop.time() + connect_timeout)
        writer = await self._connected(connect_by)
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._pending[request_id] = (future, writer)
        timer = loop.call_at(deadline, _expire, future)
        try:
            self._queue_write(writer, data)
            return await future
        finally:
            timer.cancel()
            self._pending.pop(request_id, None)

    def _queue_write(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        """Requests made in one event-loop iteration leave in one system call (pipelining)."""
        if self._outbox and self._outbox_writer is not writer:
            self._flush()
        self._outbox.append(data)
        self._outbox_writer = writer
        if len(self._outbox) == 1:
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        outbox, self._outbox = self._outbox, []
        writer = self._outbox_writer
        if outbox and writer is not None and not writer.is_closing():
            writer.write(b"".join(outbox))

    async def _connected(self, deadline: float) -> asyncio.StreamWriter:
        if self._writer is not None and not self._writer.is_closing():
            return self._writer
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise NeverSent(CONNECTION_REFUSED, f"no time left to connect to {self.node}")
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port), remaining)
            except TimeoutError:
                raise NeverSent(CONNECTION_REFUSED,
                                 f"could not connect to {self.node} at {self.host}:{self.port} in time") from None
            except OSError as exc:
                raise NeverSent(CONNECTION_REFUSED,
                                 f"could not connect to {self.node} at {self.host}:{self.port}: {exc}") from None
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read_replies(reader, writer))
            return writer

    async def _read_replies(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = LineDecoder()
        try:
            while True:
                data = await reader.read(1 << 16)
                if not data:
                    break
                for reply in decoder.feed(data):
                    request_id = reply.get("id") if isinstance(reply, dict) else None
                    pending = self._pending.get(request_id) if isinstance(request_id, int) else None
                    if pending is not None and pending[1] is writer and not pending[0].done():
                        pending[0].set_result(reply)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            if self._writer is writer:
                self._writer = None
            writer.close()
            for future, sent_on in list(self._pending.values()):
                if sent_on is writer and not future.done():
                    future.set_exception(Lost(f"connection to {self.node} closed"))

    async def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
            try:
                await self._reader_task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():  # the closer's own cancellation: pass it on
                    raise
            except Exception:  # noqa: BLE001, S110 - the reader's end, whatever it was, is the closing
                pass
            self._reader_task = None


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())


class Client:
    """A client of a whole cluster: ``nodes`` maps node id to ``(host, port)``.

    Each operation goes to ``node=`` if given, else to the node that last answered ``ok`` or that a
    redirect named, else to the first node of ``nodes``; from there it follows redirects and fails over
    (module docstring). ``timeout`` (seconds) bounds the whole operation, redirects and failovers included;
    ``connect_timeout`` bounds each connection attempt within it. ``connect`` makes the connection to a
    node (default: :class:`NodeConnection`, TCP).
    """

    def __init__(self, nodes: Mapping[str, tuple[str, int]], *, timeout: float = DEFAULT_TIMEOUT,
                 max_redirects: int = DEFAULT_MAX_REDIRECTS,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, connect: Connect | None = None) -> None:
        if not nodes:
            raise ValueError("a client needs at least one node address")
        if not connect_timeout > 0:
            raise ValueError(f"connect_timeout must be a positive number of seconds, not {connect_timeout!r}")
        self.nodes = dict(nodes)
        self.timeout = timeout
        self.max_redirects = max_redirects
        self.connect_timeout = connect_timeout
        self.leader_hint: str | None = None
        self._connect: Connect = connect or NodeConnection
        self._connections: dict[str, Connection] = {}

    async def read(self, key: str, *, node: str | None = None, timeout: float | None = None,
                   local: bool = False) -> Result:
        """A linearizable read. ``local=True``: served by ``node`` itself, a follower too (it asks the
        leader for a read index and answers from its own state), never redirected; a node that cannot
        confirm a read index answers the definite ``no-read-index``."""
        if local:
            return await self.request("read", node=node, timeout=timeout, follow_redirects=False,
                                      key=key, local=True)
        return await self.request("read", node=node, timeout=timeout, key=key)

    async def write(self, key: str, value: Any, *, node: str | None = None,
                    timeout: float | None = None) -> Result:
        return await self.request("write", node=node, timeout=timeout, key=key, value=value)

    async def cas(self, key: str, expected: Any, new: Any, *, node: str | None = None,
                  timeout: float | None = None) -> Result:
        return await self.request("cas", node=node, timeout=timeout, key=key, value=[expected, new])

    async def put(self, queue: str, value: Any, guid: str, *, node: str | None = None,
                  timeout: float | None = None) -> Result:
        return await self.request("put", node=node, timeout=timeout, key=queue, value=value, guid=guid)

    async def consume(self, queue: str, *, node: str | None = None, timeout: float | None = None) -> Result:
        return await self.request("consume", node=node, timeout=timeout, key=queue)

    async def confirm(self, queue: str, guid: str, *, node: str | None = None,
                      timeout: float | None = None) -> Result:
        return await self.request("confirm", node=node, timeout=timeout, key=queue, guid=guid)

    async def append(self, log: str, value: Any, *, node: str | None = None,
                     timeout: float | None = None) -> Result:
        """Append ``value`` to ``log``; ok ``value``: ``[offset, value]``, the offset the log assigned."""
        return await self.request("append", node=node, timeout=timeout, key=log, value=value)

    async def poll(self, log: str, start: int, *, node: str | None = None, timeout: float | None = None,
                   local: bool = False, limit: int | None = None) -> Result:
        """The committed records of ``log`` from offset ``start`` (ok ``value``: ``[[offset, value], ...]``,
        at most a batch); ``local=True`` as for :meth:`read`."""
        fields: dict[str, Any] = {"key": log, "from": start}
        if limit is not None:
            fields["limit"] = limit
        if local:
            return await self.request("poll", node=node, timeout=timeout, follow_redirects=False, local=True,
                                      **fields)
        return await self.request("poll", node=node, timeout=timeout, **fields)

    async def status(self, node: str, *, timeout: float | None = None) -> Result:
        """The node's own view (``value``: node, role, term, leader, commit LSN, last LSN); never redirected."""
        return await self.request("status", node=node, timeout=timeout, follow_redirects=False)

    async def request(self, op: str, *, node: str | None = None, timeout: float | None = None,
                      follow_redirects: bool = True, **fields: Any) -> Result:
        """Send ``{"op": op, **fields}``, following ``not-leader`` redirects and failing over to untried
        nodes after definite failures (module docstring) unless ``follow_redirects`` is false; the generic
        form of the above."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.timeout if timeout is None else timeout)
        target = node or self.leader_hint or next(iter(self.nodes))
        request = {"op": op, **fields}
        redirects = hops = 0
        tried: set[str] = set()
        refused: set[str] = set()
        while True:
            if target not in self.nodes:
                raise ValueError(f"node {target!r} is not one of this client's nodes: {', '.join(self.nodes)}")
            tried.add(target)
            try:
                reply = await self._connection(target).call(request, deadline - loop.time(), self.connect_timeout)
            except NeverSent as exc:
                if exc.code != CONNECTION_REFUSED:
                    return Result("fail", error=exc.code, message=str(exc), node=target, redirects=hops)
                refused.add(target)
                if self.leader_hint == target:
                    self.leader_hint = None
                # Refused: no leader named, so the operation fails over to the next untried node, if any
                # and if time is left (the path below; its Result is made only when it is the answer).
                untried = _next_untried(self.nodes, target, tried) if follow_redirects else None
                if untried is None or deadline <= loop.time():
                    return Result("fail", error=exc.code, message=str(exc), node=target, redirects=hops)
                target = untried
                hops += 1
                continue
            except Lost as exc:
                if self.leader_hint == target:
                    self.leader_hint = None  # it may have died: the next operation starts elsewhere
                return Result("info", error=CONNECTION_LOST, message=str(exc), node=target, redirects=hops)
            except TimeoutError:
                return Result("info", error=TIMEOUT, node=target, redirects=hops,
                              message=f"no reply from {target} in time")
            else:
                result = _result_of(reply, target, hops)
                if result.leader in self.nodes and result.leader not in refused:
                    self.leader_hint = result.leader
                elif result.ok and follow_redirects:
                    self.leader_hint = target
                elif result.error == "not-leader" and self.leader_hint == target:
                    self.leader_hint = None
                if result.error != "not-leader":
                    return result
            # A definite failure: nothing was done, so the operation may go on elsewhere.
            if not follow_redirects or deadline <= loop.time():
                return result
            hint = result.leader
            if (hint in self.nodes and hint != target and hint not in refused
                    and redirects < self.max_redirects):
                target = hint
                redirects += 1
            else:
                untried = _next_untried(self.nodes, target, tried)
                if untried is None:
                    return result
                target = untried
            hops += 1

    def _connection(self, node: str) -> Connection:
        connection = self._connections.get(node)
        if connection is None:
            host, port = self.nodes[node]
            connection = self._connections[node] = self._connect(node, host, port)
        return connection

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def _next_untried(nodes: Mapping[str, Any], after: str, tried: set[str]) -> str | None:
    """The first node after ``after`` in ``nodes`` order (wrapping around) not in ``tried``."""
    order = list(nodes)
    start = order.index(after) + 1 if after in nodes else 0
    for node in order[start:] + order[:start]:
        if node not in tried:
            return node
    return None


def _result_of(reply: dict[str, Any], node: str, redirects: int) -> Result:
    lsn = reply.get("lsn")
    lsn_pair = (lsn[0], lsn[1]) if isinstance(lsn, list | tuple) and len(lsn) == 2 else None
    leader = reply.get("leader")
    leader = leader if isinstance(leader, str) else None
    group = reply.get("group")
    group = group if isinstance(group, str) else None
    if reply.get("ok") is True:
        return Result("ok", value=reply.get("value"), lsn=lsn_pair, node=node, leader=leader, redirects=redirects,
                      group=group)
    error = str(reply.get("error"))
    definite = reply.get("definite")
    if not isinstance(definite, bool):
        # A reply that does not say: the error table decides, and an unknown code is indefinite (safe).
        definite = error in ERRORS and ERRORS[error].definite
    kind: ResultType = "fail" if definite else "info"
    return Result(kind, value=reply.get("value"), lsn=lsn_pair, error=error,
                  message=reply.get("message"), node=node, leader=leader, redirects=redirects, group=group)


class SyncClient:
    """``Client`` for code without an event loop: the same methods, blocking. Not thread-safe."""

    def __init__(self, nodes: Mapping[str, tuple[str, int]], **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._client = Client(nodes, **options)

    def read(self, key: str, **options: Any) -> Result:
        return self._loop.run_until_complete(self._client.read(key, **options))

    def write(self, key: str, value: Any, **options: Any) -> Result:
        return self._loop.run_until_complete(self._client.write(key, value, **options))

    def cas(self, key: str, expected: Any, new: Any, **options: Any) -> Result:
        return self._loop.run_until_complete(self._client.cas(key, expected, new, **options))

    def put(self, queue: str, value: Any, guid: str, **options: Any) -> Result:
        return self._loop.run_until_complete(self._client.put(queue, value, guid, **options))

    def consume(self, queue: str, **options: Any) -> Result:
        return self._loop.run_until_complete(self._client.consume(queue, **options))

    def confirm(self, queue: str, guid: str, **options: Any) -> Result:
        return self._loop.run_until_complete(self._client.confirm(queue, guid, **options))

    def append(self, log: str, value: Any, **options: Any) -> Result:
        return self._loop.run_until_complete(self._client.append(log, value, **options))

    def poll(self, log: str, start: int, **options: Any) -> Result:
        return self._loop.run_until_complete(self._client.poll(log, start, **options))

    def status(self, node: str, **options: Any) -> Result:
        return self._loop.run_until_complete(self._client.status(node, **options))

    def request(self, op: str, **options: Any) -> Result:
        return self._loop.run_until_complete(self._client.request(op, **options))

    def close(self) -> None:
        self._loop.run_until_complete(self._client.close())
        self._loop.close()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
