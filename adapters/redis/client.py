"""The Redis workload client: the ``register`` workload's read, write and cas at the master Sentinel names.

One :class:`RedisRegisterClient` per logical process (``harness.db.Clients``). Before every operation it
asks a Sentinel where the master of the master set :data:`MASTER_NAME` is (``SENTINEL
GET-MASTER-ADDR-BY-NAME``), as a Sentinel-aware client does: the process's *home* Sentinel first (the one
on ``nodes[process % N]``), the next node's when that one cannot be reached. It then sends the operation
to that master, as Redis commands pipelined on one connection (redis-py's asyncio ``Connection``, with
its own retries off: a retried write could take effect twice):

* ``read k``: ``MULTI``, ``ROLE``, ``GET k``, ``EXEC``: the node's role and the value, atomically. A node
  that is no longer a master (Sentinel's answer was stale) answers ``fail`` (``not-master``), so a read is
  never served by a replica; a master cut off from the others still answers, with what it has.
* ``write k v``: ``SET k v``;
* ``cas k [old, new]``: one Lua script (:data:`CAS_SCRIPT`, ``EVAL``) that sets ``new`` if the key holds
  ``old`` (or is absent, for ``old`` null) and returns 1, else 0: ``fail`` with ``cas-mismatch``.
* with ``wait=N`` a write and a cas are followed, on the same connection, by ``WAIT N t``: the number of
  replicas that acknowledged the write within ``t`` milliseconds (half the client's timeout). Fewer than
  ``N``: the write happened on the master but may not survive a failover: ``info`` (``wait``).

Values are the workload's JSON values, stored as their JSON text; a read decodes it again.

**Final reads** (``op.local``, ``op.node`` set) are a ``GET`` at that node itself, master or replica: the
final phase asks :meth:`adapters.redis.db.RedisDB.caught_up` first, so a replica answers only once it has
everything its master had.

**Outcomes.** ``ok`` is an answer. Definite failures are ``fail``: no Sentinel could say where the master
is, no connection could be made (nothing was sent), the master refused the command before executing it
(an error reply whose code is one of :data:`REFUSED`: ``READONLY`` from a replica, ``NOREPLICAS`` under
``min-replicas``, ``LOADING``, ``MASTERDOWN``, ...), a cas whose compare failed. Anything else (a timeout,
a connection lost after sending, an error this client does not know, a short ``WAIT``) may have taken
effect: ``info`` for writes and cas, ``fail`` for reads, which have no effect.

No ``lsn``: Redis gives a client no sequence number of the write it made or of the value it read (the
replication offset counts bytes of the stream, and a read cannot tell which write it saw).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from harness.db.client import (
    CONNECTION_LOST,
    CONNECTION_REFUSED,
    TIMEOUT,
    PinnedClient,
    fail,
    indefinite,
    ok,
)
from workloads.ops import Op

REDIS_PORT = 6379
SENTINEL_PORT = 26379
MASTER_NAME = "chaos"
"""The Sentinels' name of the master set, and the status's name of its group."""

CAS_MISMATCH = "cas-mismatch"
NOT_MASTER = "not-master"
NO_MASTER = "no-master"
WAIT_SHORT = "wait"
REFUSED = frozenset({"READONLY", "NOREPLICAS", "MASTERDOWN", "LOADING", "BUSY", "MISCONF", "OOM", "EXECABORT",
                     "NOPERM", "WRONGTYPE", "NOSCRIPT"})
"""Error codes with which Redis refuses a command before it changes anything (a script's error carries the
code of the command that failed inside it: a refused ``SET`` in the cas script changed nothing, and the
script's ``GET`` before it has no effect)."""

CAS_SCRIPT = (
    "local v = redis.call('GET', KEYS[1])\n"
    "if (ARGV[1] == 'absent' and not v) or (ARGV[1] == 'value' and v == ARGV[2]) then\n"
    "  redis.call('SET', KEYS[1], ARGV[3])\n"
    "  return 1\n"
    "end\n"
    "return 0\n"
)
"""``KEYS[1]`` the key; ``ARGV`` ``absent`` or ``value``, the expected JSON text, the new one."""


class Unreachable(Exception):
    """No connection could be made: nothing was sent. ``definite``: the process certainly is not there
    (refused), rather than slow to accept."""

    def __init__(self, message: str, *, definite: bool = True) -> None:
        super().__init__(message)
        self.definite = definite


class ReplyError(Exception):
    """An error reply from Redis; ``code`` is its first word (``READONLY``, ``NOREPLICAS``, ``ERR``)."""

    @property
    def code(self) -> str:
        words = str(self).split()
        return words[0] if words else ""


class Link(Protocol):
    """One connection to one Redis or Sentinel process."""

    async def call(self, *commands: Sequence[Any]) -> list[Any]:
        """Send ``commands`` pipelined and return their replies in order, an error reply as a
        :class:`ReplyError` (also inside a transaction's ``EXEC`` reply)."""
        ...

    async def close(self) -> None: ...


Connector = Callable[[str, int, float], Awaitable[Link]]
"""``await connect(host, port, timeout)``: a :class:`Link`, or raises :class:`Unreachable`."""


def _reply(value: Any) -> Any:
    if isinstance(value, ResponseError):
        return ReplyError(str(value))
    if isinstance(value, list):
        return [_reply(v) for v in value]
    return value


class RedisLink:
    """A :class:`Link` over redis-py's asyncio ``Connection`` (RESP2, text replies, no retries)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    @classmethod
    async def open(cls, host: str, port: int, timeout: float) -> RedisLink:
        connection = Connection(host=host, port=port, socket_timeout=timeout, socket_connect_timeout=timeout,
                                decode_responses=True, retry=Retry(NoBackoff(), 0))
        try:
            await connection.connect()
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            await connection.disconnect()
            raise Unreachable(f"{host}:{port}: {exc}",
                              definite=not isinstance(exc, RedisTimeoutError | TimeoutError)) from None
        return cls(connection)

    async def call(self, *commands: Sequence[Any]) -> list[Any]:
        await self.connection.send_packed_command(self.connection.pack_commands(commands))
        replies = []
        for _ in commands:
            try:
                replies.append(_reply(await self.connection.read_response()))
            except ResponseError as exc:
                replies.append(ReplyError(str(exc)))
        return replies

    async def close(self) -> None:
        await self.connection.disconnect()


def encode_value(value: Any) -> str:
    """A workload value as its JSON text (what a cas compares)."""
    return json.dumps(value, separators=(",", ":"))


def decode_value(text: str | None) -> Any:
    """What :func:`encode_value` made (``None``: the key is absent); text that is not JSON as it is."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def commands_for(op: Op, wait: int = 0, wait_ms: int = 1000) -> list[tuple[Any, ...]]:
    """The pipelined commands that perform ``op`` at the master (module docstring)."""
    if op.key is None:
        raise ValueError(f"the redis client needs a key for {op.f!r}")
    if op.f == "read":
        return [("MULTI",), ("ROLE",), ("GET", op.key), ("EXEC",)]
    if op.f == "write":
        commands: list[tuple[Any, ...]] = [("SET", op.key, encode_value(op.value))]
    elif op.f == "cas":
        expected, new = op.value
        how = ("absent", "") if expected is None else ("value", encode_value(expected))
        commands = [("EVAL", CAS_SCRIPT, 1, op.key, *how, encode_value(new))]
    else:
        raise ValueError(f"the redis client runs read, write and cas, not {op.f!r}")
    if wait:
        commands.append(("WAIT", wait, wait_ms))
    return commands


def _error(op: Op, node: str, reply: ReplyError) -> dict[str, Any]:
    """An error reply: ``fail`` when its code says Redis refused the command, else :func:`indefinite`."""
    if reply.code in REFUSED:
        return fail(node, str(reply))
    return indefinite(op, node, str(reply))


def completion_of(op: Op, node: str, replies: Sequence[Any], wait: int = 0) -> dict[str, Any]:
    """The completion of ``op`` from the master's replies to :func:`commands_for` (module docstring)."""
    if op.f == "read":
        errors = [r for r in replies if isinstance(r, ReplyError)]
        if errors:
            return fail(node, str(errors[0]))
        executed = replies[-1]
        if not isinstance(executed, list) or len(executed) != 2:
            return fail(node, f"unexpected EXEC reply {executed!r}")
        role, value = executed
        if isinstance(value, ReplyError):
            return fail(node, str(value))
        if not isinstance(role, list) or not role or role[0] != "master":
            return fail(node, f"{NOT_MASTER}: {node} is a {role[0] if isinstance(role, list) and role else role}")
        return ok(node, decode_value(value))
    first = replies[0]
    if isinstance(first, ReplyError):
        return _error(op, node, first)
    if op.f == "cas" and first != 1:
        return fail(node, CAS_MISMATCH)
    if wait:
        acknowledged = replies[1] if len(replies) > 1 else None
        if isinstance(acknowledged, ReplyError) or not isinstance(acknowledged, int):
            return indefinite(op, node, f"{WAIT_SHORT}: {acknowledged}")
        if acknowledged < wait:
            return indefinite(op, node, f"{WAIT_SHORT}: {acknowledged} of {wait} replicas acknowledged")
    return ok(node)


class RedisRegisterClient(PinnedClient[Link]):
    """One logical process's client: read, write and cas at the master the Sentinels name.

    ``hosts``: node -> where the controller reaches it; ``announced``: an address a Sentinel or a replica
    names a node by (its peer address) -> node; ``home`` the node whose Sentinel is asked first. ``wait``:
    replicas a write waits for (0: no ``WAIT``). ``connect`` replaces the network (tests pass fakes).
    """

    def __init__(
        self,
        hosts: Mapping[str, str],
        announced: Mapping[str, str],
        home: str,
        *,
        wait: int = 0,
        timeout: float = 5.0,
        connect: Connector = RedisLink.open,
    ) -> None:
        super().__init__(hosts, home, timeout=timeout)
        self.announced = dict(announced)
        self.wait = wait
        self.connect = connect

    async def invoke(self, op: Op) -> dict[str, Any]:
        """Run ``op`` (module docstring) within the client's timeout."""
        target: list[str | None] = [op.node]

        def timed_out() -> dict[str, Any]:
            if target[0] is None:
                return fail(None, f"{NO_MASTER}: no Sentinel answered within {self.timeout:g} s")
            return indefinite(op, target[0], f"{TIMEOUT} after {self.timeout:g} s")

        return await self.bounded(self._invoke(op, target), timed_out)

    async def _invoke(self, op: Op, target: list[str | None]) -> dict[str, Any]:
        if op.node is not None:
            if op.node not in self.addresses:
                return fail(op.node, f"no node called {op.node!r}")
            if op.f != "read":
                raise ValueError(f"only reads go to a named node, not {op.f!r}")
            try:
                [value] = await self._call(op.node, REDIS_PORT, ("GET", op.key))
            except Unreachable as exc:
                return fail(op.node, f"{CONNECTION_REFUSED}: {exc}")
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                return fail(op.node, f"{CONNECTION_LOST}: {exc}")
            if isinstance(value, ReplyError):
                return fail(op.node, str(value))
            return {"type": "ok", "value": decode_value(value), "node": op.node}
        master = await self.master()
        if master is None:
            return fail(None, f"{NO_MASTER}: no Sentinel named a known master")
        target[0] = master
        commands = commands_for(op, self.wait, max(1, int(self.timeout * 500)))
        try:
            replies = await self._call(master, REDIS_PORT, *commands)
        except Unreachable as exc:
            return fail(master, f"{CONNECTION_REFUSED}: {exc}")
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            return indefinite(op, master, f"{CONNECTION_LOST}: {type(exc).__name__}: {exc}")
        return completion_of(op, master, replies, self.wait)

    async def master(self) -> str | None:
        """The node the first Sentinel that answers names as master (home first, then the next nodes), or
        ``None`` when none answers with a node of this test."""
        for node in self.rotation():
            try:
                [answer] = await self._call(node, SENTINEL_PORT,
                                            ("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME))
            except (Unreachable, RedisConnectionError, RedisTimeoutError, OSError):
                continue
            if isinstance(answer, list) and answer and answer[0] in self.announced:
                return self.announced[answer[0]]
        return None

    async def _call(self, node: str, port: int, *commands: Sequence[Any]) -> list[Any]:
        """Replies of ``commands`` at ``node``'s process on ``port``, on a kept connection; a connection
        that failed is dropped."""
        key = (node, port)
        link = await self.connection(key, lambda: self.connect(self.addresses[node], port, self.timeout))
        try:
            return await link.call(*commands)
        except BaseException:
            await self.drop(key)
            raise
