"""The NATS JetStream workload client: the ``log`` workload's appends and polls over JetStream's API.

One :class:`NatsLogClient` per logical process (``harness.db.Clients``), holding one NATS connection per
server it talks to. Each log ``k`` of the workload (``l0``, ``l1``, ...) is a JetStream *stream* of its own
named ``k``, bound to the one subject ``chaos.k``: a stream numbers its messages 1, 2, 3, ... (its
*sequence*), and that sequence is the record's offset. The client creates a stream the first time it needs
it (``$JS.API.STREAM.CREATE.k``, replicated ``replicas`` times, file or memory storage: creating a stream
that exists with the same configuration is a no-op in JetStream).

* ``append k v``: a request on ``chaos.k`` with the header ``Nats-Expected-Stream: k`` and the payload
  ``v`` (JSON): JetStream's *publish with ack*. The stream's leader proposes the message to the stream's
  Raft group and answers once the group has committed and it has stored it: ``{"stream": "k", "seq": s}``.
  ok completion ``[s, v]``.
* ``poll k from``: up to :data:`BATCH` requests ``$JS.API.STREAM.MSG.GET.k {"seq": s, "next_by_subj":
  "chaos.k"}`` (the first message at sequence ``s`` or after), each from one past the last record read,
  until JetStream answers ``no message found``. Those requests are answered by the stream's leader from
  its own store. ok completion: the records read, ``[[seq, v], ...]`` (possibly none). JetStream's
  sequences start at 1, so a poll from 0 (the final phase's "from the start") reads from 1.
* the offset a poll reads from is chosen by :meth:`NatsLogClient.prepare` (the workload's rule,
  ``workloads.log``): one past the highest offset this process has read from that log, or 1.

**Which server.** A process talks to its *home* server, ``nodes[process % N]``; that server routes a
request to the stream's leader wherever it runs (every server of the cluster knows where each stream's
leader is). When the home cannot be reached (a killed server: the connection is refused), nothing was
sent and the operation goes on to the next server, which becomes the home. A process whose operation ends
``info`` is retired by the harness and its successor starts at the next server.

**Final polls** (``op.local``, ``op.node`` set) must be served by that node. Only a stream's leader serves
``MSG.GET``, so the client connects to ``op.node`` and asks the stream's info (``$JS.API.STREAM.INFO.k``,
answered by the leader, which names itself in ``cluster.leader``) before and after its gets: the poll is
ok only if ``op.node`` led the stream both times, else ``fail`` (``not-stream-leader``). The final phase's
polls of a log are therefore served by that log's leader after the heal, and by no other node. A stream
that no server leads leaves ``STREAM.INFO`` unanswered; the client waits :data:`LEADER_QUESTION_TIMEOUT`
for the answer, not the operation's whole timeout (the final phase tries such a poll again, up to ten
times at each node).

**Outcomes.** An append is ``ok`` with a publish ack; ``fail`` when nothing was sent (no connection could
be made, the stream could not be created) or when no server had interest in the subject (NATS's ``no
responders``: no stream leader subscribed, so no one received the message); ``info`` otherwise: a timeout
(the stream had no quorum), a connection lost after sending, and also an ack that carries a JetStream
error, since a deposed leader that still listens may reject a message its successor stores. A poll that
read some records before an error is ``ok`` with those; one that read none is ``fail`` (a read has no
effect).

**LSNs and groups.** Each stream is a Raft group of its own, named like its log: completions carry
``"group": k``, and an acknowledged append ``lsn [0, seq]``. The term part is 0: JetStream does not say
which Raft term carried a message. Sequences order one stream's messages totally, so lsn-monotonicity
compares them within the stream (its group).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from harness.db.client import (
    CONNECTION_LOST,
    CONNECTION_REFUSED,
    TIMEOUT,
    NotSent,
    PinnedClient,
    fail,
    info,
    ok,
)
from workloads.ops import Op

CLIENT_PORT = 4222
FIRST_OFFSET = 1
"""JetStream's first sequence: where a process's first poll of a log reads from."""
BATCH = 10
"""Records a poll returns at most (one ``MSG.GET`` request each)."""
SUBJECT_PREFIX = "chaos."
STORAGES = ("file", "memory")
LSN_TERM = 0

NO_MESSAGE = 10037
"""JetStream's ``no message found``: the poll has read to the end of the stream."""
STREAM_NOT_FOUND = 10059
NO_RESPONDERS = "no-responders"
NOT_LEADER = "not-stream-leader"
_KEY = re.compile(r"[A-Za-z0-9_-]+")
LEADER_QUESTION_TIMEOUT = 1.0
"""Seconds a final poll waits for ``STREAM.INFO``'s answer. Only the stream's leader answers it, so no answer
means no server leads the stream: waiting the client's whole timeout (5 s) for each of the final phase's
tries made a run whose one-replica stream sat on a killed server spend three minutes in final polls
(``tests/adapters/nats/test_run_docker.py``, 224 s where the same test takes about 50 s)."""


class Message(Protocol):
    data: bytes


class Connection(Protocol):
    """What the client needs of a NATS connection (nats-py's ``Client``; tests give a fake)."""

    async def request(self, subject: str, payload: bytes = b"", timeout: float = 1.0,
                      headers: dict[str, str] | None = None) -> Message: ...

    async def close(self) -> None: ...


Connector = Callable[[str, float], Awaitable[Connection]]
"""``await connect(url, timeout)``: a connection to one server, or raises (nothing was sent)."""


class NoResponders(Exception):
    """No server had interest in the subject: the request reached no one (nats-py's NoRespondersError)."""


async def nats_connect(url: str, timeout: float) -> Connection:
    """A nats-py connection to exactly one server, which never reconnects (a lost connection is an
    outcome the client must see) and keeps quiet about errors (the client reports them)."""
    import nats  # imported here: the unit tests and the plugin's option checks need no NATS client

    async def quiet(*_: Any) -> None:
        return None

    # nats-py retries a refused initial connection until max_reconnect_attempts is exceeded (0: forever);
    # one attempt is wanted, and the deadline bounds it whatever nats-py does.
    async with asyncio.timeout(max(timeout, 0.1)):
        return await nats.connect(servers=[url], connect_timeout=max(timeout, 0.1), allow_reconnect=False,
                                  max_reconnect_attempts=1, reconnect_time_wait=0.1, dont_randomize=True,
                                  error_cb=quiet, disconnected_cb=quiet, closed_cb=quiet, name="chaos-harness")


def _nats_errors() -> tuple[type[BaseException], type[BaseException]]:
    """nats-py's (NoRespondersError, ConnectionClosedError), or stand-ins when it is not installed."""
    try:
        from nats.errors import ConnectionClosedError, NoRespondersError
    except ImportError:  # pragma: no cover - nats-py is a dependency of the project
        return NoResponders, ConnectionError
    return NoRespondersError, ConnectionClosedError


def subject_of(key: str) -> str:
    return SUBJECT_PREFIX + key


def stream_config(key: str, *, replicas: int, storage: str) -> dict[str, Any]:
    """The stream that holds log ``key``: its one subject, kept forever, ``replicas`` copies."""
    return {"name": key, "subjects": [subject_of(key)], "retention": "limits", "discard": "old",
            "max_msgs": -1, "max_bytes": -1, "max_age": 0, "storage": storage, "num_replicas": replicas}


def encode_value(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def decode_value(data: bytes | str) -> Any:
    """A payload as the workload's value; text that is not JSON (not written by this client) as it is."""
    text = data.decode() if isinstance(data, bytes) else data
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def api_error(answer: Mapping[str, Any]) -> tuple[int | None, str] | None:
    """A JetStream API answer's error as (err_code, description), or None when it has none."""
    error = answer.get("error")
    if not isinstance(error, Mapping):
        return None
    code = error.get("err_code")
    return (code if isinstance(code, int) else None,
            str(error.get("description") or f"JetStream error {error.get('code')}"))


def parse_json(data: bytes) -> dict[str, Any]:
    """A JetStream API answer; anything that is not a JSON object as an error answer."""
    try:
        answer = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        answer = None
    if not isinstance(answer, dict):
        return {"error": {"description": f"not a JetStream answer: {data[:80]!r}"}}
    return answer


def record_of(answer: Mapping[str, Any]) -> list[Any]:
    """A ``MSG.GET`` answer's message as ``[seq, value]`` (the payload is base64 in the answer)."""
    message = answer["message"]
    return [int(message["seq"]), decode_value(base64.b64decode(message.get("data") or ""))]


def ack_completion(op: Op, node: str, answer: Mapping[str, Any]) -> dict[str, Any]:
    """An append's completion from its publish ack (module docstring, "Outcomes")."""
    error = api_error(answer)
    seq = answer.get("seq")
    if error is not None or not isinstance(seq, int) or isinstance(seq, bool) or seq < FIRST_OFFSET:
        why = error[1] if error is not None else f"an ack without a sequence: {dict(answer)}"
        return info(node, why, group=op.key)
    return ok(node, [seq, op.value], group=op.key, lsn=[LSN_TERM, seq])


class NatsLogClient(PinnedClient[Connection]):
    """One logical process's client: append and poll on the streams of the servers in ``urls``.

    ``urls``: server name -> ``nats://10.55.0.11:4222``; ``home`` the server it talks to unless an
    operation names one. ``replicas`` and ``storage`` configure the streams it creates; ``known_streams``
    is shared by the clients of one run (streams known to exist need no second create). ``connect``
    replaces the network (tests).
    """

    member = "server"

    def __init__(
        self,
        urls: Mapping[str, str],
        home: str,
        *,
        replicas: int = 3,
        storage: str = "file",
        timeout: float = 5.0,
        known_streams: set[str] | None = None,
        connect: Connector = nats_connect,
    ) -> None:
        super().__init__(urls, home, timeout=timeout)
        if storage not in STORAGES:
            raise ValueError(f"storage must be one of {', '.join(STORAGES)}, not {storage!r}")
        self.replicas = replicas
        self.storage = storage
        self.known_streams = known_streams if known_streams is not None else set()
        self.connect = connect
        self.next_offsets: dict[str, int] = {}
        self._no_responders, self._closed = _nats_errors()

    def prepare(self, op: Op) -> Op:
        """A poll without an offset reads from one past the highest offset this process has read from that
        log, or from :data:`FIRST_OFFSET` (``workloads.log``); every other operation is left as it is."""
        if op.f == "poll" and op.value is None and op.key is not None:
            return Op(op.f, op.key, self.next_offsets.get(op.key, FIRST_OFFSET), node=op.node,
                      think=op.think, local=op.local)
        return op

    async def invoke(self, op: Op) -> dict[str, Any]:
        """Run ``op`` at ``op.node``, or at the home server, failing over while a server cannot be reached
        (``harness.db.client.PinnedClient.failover``)."""
        if op.f not in ("append", "poll"):
            return fail(op.node, f"the NATS client runs append and poll, not {op.f!r}")
        if op.key is None or not _KEY.fullmatch(op.key):
            return fail(op.node, f"not a stream name: {op.key!r}")
        return await self.failover(op, self._at)

    async def _at(self, op: Op, node: str, deadline: float) -> dict[str, Any]:
        """``op``'s completion at server ``node``; :class:`NotSent` when no connection could be made."""
        remaining = max(deadline - asyncio.get_running_loop().time(), 0.1)
        try:
            connection = await self.connection(node, lambda: self.connect(self.addresses[node], remaining))
        except Exception as exc:  # noqa: BLE001 - any failure to connect means nothing was sent
            raise NotSent(f"{CONNECTION_REFUSED}: {type(exc).__name__}: {exc}") from None
        try:
            failure = await self._ensure_stream(connection, op.key, deadline)
        except Exception as exc:  # noqa: BLE001 - the operation itself was not sent
            await self.drop(node)
            failure = f"stream {op.key} could not be created: {_describe(exc, self._no_responders)}"
        if failure is not None:
            return fail(node, failure)
        if op.f == "append":
            return await self._append(connection, op, node, deadline)
        if op.local:
            return await self._local_poll(connection, op, node, deadline)
        return await self._poll(connection, op, node, deadline)

    async def _request(self, connection: Connection, subject: str, payload: bytes, deadline: float,
                       headers: dict[str, str] | None = None) -> dict[str, Any]:
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            raise TimeoutError("the client's timeout has passed")
        try:
            message = await connection.request(subject, payload, timeout=remaining, headers=headers)
        except self._no_responders as exc:
            raise NoResponders(str(exc)) from None
        return parse_json(message.data)

    async def _ensure_stream(self, connection: Connection, key: str, deadline: float) -> str | None:
        """Create the stream of log ``key`` unless it is known to exist; an error text if it could not be."""
        if key in self.known_streams:
            return None
        config = stream_config(key, replicas=self.replicas, storage=self.storage)
        answer = await self._request(connection, f"$JS.API.STREAM.CREATE.{key}", encode_value(config), deadline)
        error = api_error(answer)
        if error is not None:
            return f"stream {key} could not be created: {error[1]}"
        self.known_streams.add(key)
        return None

    async def _append(self, connection: Connection, op: Op, node: str, deadline: float) -> dict[str, Any]:
        try:
            answer = await self._request(connection, subject_of(op.key), encode_value(op.value), deadline,
                                         headers={"Nats-Expected-Stream": op.key})
        except NoResponders as exc:
            return fail(node, f"{NO_RESPONDERS}: {exc}", group=op.key)
        except Exception as exc:  # noqa: BLE001 - sent: it may have been stored
            await self.drop(node)
            return info(node, _describe(exc, self._no_responders), group=op.key)
        return ack_completion(op, node, answer)

    async def _gets(self, connection: Connection, op: Op, deadline: float) -> tuple[list[list[Any]], str | None]:
        """The records from ``op.value`` on (at most :data:`BATCH`), and the error that ended the reading
        early (None when it read a batch or reached the end of the stream)."""
        start = max(int(op.value), FIRST_OFFSET)
        records: list[list[Any]] = []
        while len(records) < BATCH:
            try:
                answer = await self._request(connection, f"$JS.API.STREAM.MSG.GET.{op.key}",
                                             encode_value({"seq": start, "next_by_subj": subject_of(op.key)}),
                                             deadline)
            except Exception as exc:  # noqa: BLE001 - a read has no effect; what was read stands
                return records, _describe(exc, self._no_responders)
            error = api_error(answer)
            if error is not None:
                return records, None if error[0] == NO_MESSAGE else error[1]
            try:
                record = record_of(answer)
            except (KeyError, TypeError, ValueError) as exc:
                return records, f"a message JetStream answered could not be read: {exc}"
            records.append(record)
            start = record[0] + 1
        return records, None

    def _read(self, op: Op, node: str, records: list[list[Any]], error: str | None) -> dict[str, Any]:
        if error is not None and not records:
            return fail(node, error, group=op.key)
        if records:
            self.next_offsets[op.key] = max(self.next_offsets.get(op.key, FIRST_OFFSET), records[-1][0] + 1)
        return ok(node, records, group=op.key)

    async def _poll(self, connection: Connection, op: Op, node: str, deadline: float) -> dict[str, Any]:
        if not isinstance(op.value, int) or isinstance(op.value, bool):
            return fail(node, f"a poll reads from an offset, not {op.value!r}")
        records, error = await self._gets(connection, op, deadline)
        if error is not None and not records:
            await self._drop_if_broken(node, error)
        return self._read(op, node, records, error)

    async def _local_poll(self, connection: Connection, op: Op, node: str, deadline: float) -> dict[str, Any]:
        """A final poll, served by ``node`` only if it leads the stream before and after the gets."""
        if not isinstance(op.value, int) or isinstance(op.value, bool):
            return fail(node, f"a poll reads from an offset, not {op.value!r}")
        before = await self._leader(connection, op.key, deadline)
        if before != node:
            return fail(node, f"{NOT_LEADER}: stream {op.key} is led by {before or 'no server'}", group=op.key)
        records, error = await self._gets(connection, op, deadline)
        after = await self._leader(connection, op.key, deadline)
        if after != node:
            return fail(node, f"{NOT_LEADER}: stream {op.key} was led by {after or 'no server'} after the reads",
                        group=op.key)
        return self._read(op, node, records, error)

    async def _leader(self, connection: Connection, key: str, deadline: float) -> str | None:
        """The stream's leader as the server answering ``STREAM.INFO`` names it (None if none answers within
        :data:`LEADER_QUESTION_TIMEOUT`)."""
        deadline = min(deadline, asyncio.get_running_loop().time() + LEADER_QUESTION_TIMEOUT)
        try:
            answer = await self._request(connection, f"$JS.API.STREAM.INFO.{key}", b"", deadline)
        except Exception:  # noqa: BLE001 - no answer: no leader known
            return None
        cluster = answer.get("cluster")
        leader = cluster.get("leader") if isinstance(cluster, Mapping) else None
        return leader if isinstance(leader, str) and leader else None

    async def _drop_if_broken(self, node: str, error: str) -> None:
        if error.startswith(CONNECTION_LOST):
            await self.drop(node)


def _describe(exc: BaseException, no_responders: type[BaseException] = NoResponders) -> str:
    """An exception as a completion's error word and message."""
    if isinstance(exc, NoResponders | no_responders):
        return f"{NO_RESPONDERS}: {exc}"
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return f"{TIMEOUT}: {exc or 'no answer in time'}"
    return f"{CONNECTION_LOST}: {type(exc).__name__}: {exc}"

