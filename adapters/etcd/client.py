"""The etcd workload client: the ``register`` workload's operations over etcd's v3 HTTP/JSON gateway.

One :class:`EtcdWorkloadClient` per logical process (``harness.db.Clients``). Its requests, each a POST of
JSON to a member's client port (keys and values base64, as the gateway wants them):

* ``read k``: ``/v3/kv/range {"key": k}``. etcd's default is a *linearizable* read: the member asks the
  leader for its commit index (raft's ReadIndex), waits until it has applied that far, and answers from
  its own store. With ``reads="serializable"`` (the deliberately broken variant) the request carries
  ``"serializable": true`` and the member answers from whatever it has applied, leader or not: a member
  cut off from the majority serves stale values, which the checkers must catch.
* ``write k v``: ``/v3/kv/put {"key": k, "value": v}``.
* ``cas k [old, new]``: ``/v3/kv/txn`` comparing the key's value with ``old`` (its version with 0 when
  ``old`` is null: the key does not exist) and putting ``new`` if it holds. A compare that fails is
  ``fail`` with error ``cas-mismatch``: the transaction executed and changed nothing.

Values are the workload's JSON values, stored as their JSON text; a read decodes it again.

**Which member.** An operation with a ``node`` goes there (the final phase's local reads: the member
answers itself, since the gateway serves requests from its own member; a linearizable read there is the
member's own state after catching up to the leader's commit index, which is what the client contract
asks of a local read). Any other operation goes to the process's *home* member, ``nodes[process % N]``:
etcd forwards proposals to the leader itself, so there is nothing to redirect. When the home refuses the
connection (a killed member), nothing was sent, so the operation goes on to the next member and the home
moves there. A process whose operation ends ``info`` is retired by the harness, and its successor's home
is the next member.

**Outcomes.** ``ok`` is a 200 answer. Definite failures are ``fail``: the connection was refused or never
made (the request was not sent), the gateway rejected the request (``code`` 3, invalid argument), etcd
refused it before proposing (``too many requests``), raft dropped the proposal (no leader to take it), a
cas's compare did not hold. Anything else (a timeout on either side, a lost connection, ``request timed
out``, ``leader changed``, an error this client does not know) may have taken effect: ``info`` for
writes and cas, ``fail`` for reads, which have no effect.

**LSNs.** etcd numbers every change of the key space with one cluster-wide *revision*: a put or a txn
that writes creates the next one, in log order, and a read returns each key's ``mod_revision``, the
revision of the write it observed. A completion's ``lsn`` is ``[0, revision]``: the write's
``header.revision``, a read's ``mod_revision`` (none for an absent key). The term part is 0 because etcd
does not say which raft term carried an entry (``header.raft_term`` is the answering member's term of its
last *applied* entry, which may be later); comparing by revision alone is exact, since revisions totally
order the writes of the whole cluster, so ``lsn-monotonicity`` applies unchanged.
"""

from __future__ import annotations

import base64
import functools
import json
import ssl
from collections.abc import Mapping
from typing import Any

import httpx

from harness.db.client import (
    CONNECTION_LOST,
    CONNECTION_REFUSED,
    TIMEOUT,
    NotSent,
    PinnedClient,
    fail,
    indefinite,
)
from workloads.ops import Op

LINEARIZABLE, SERIALIZABLE = "linearizable", "serializable"
READ_MODES = (LINEARIZABLE, SERIALIZABLE)
CLIENT_PORT = 2379
LSN_TERM = 0
"""The term part of every LSN this client reports (module docstring, "LSNs")."""

CAS_MISMATCH = "cas-mismatch"
GRPC_INVALID_ARGUMENT = 3
DEFINITE_MESSAGES = ("etcdserver: too many requests", "raft proposal dropped")
"""etcd errors that say the request was refused before it reached the log."""


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One TLS context for every HTTP client of the process. httpx builds a new one (loading the CA
    bundle) for each client it is not given one: about 200 ms on a loaded 2-core machine, during which
    the event loop stands still; clients and status polls are opened all the time."""
    return ssl.create_default_context()


def http_client(timeout: float, transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    """An HTTP client for the gateway (``transport``: tests replace the network)."""
    return httpx.AsyncClient(timeout=timeout, transport=transport, verify=tls_context())


def encode(data: str) -> str:
    """Text as the gateway's base64 bytes."""
    return base64.b64encode(data.encode()).decode()


def decode(data: str) -> str:
    return base64.b64decode(data).decode()


def encode_value(value: Any) -> str:
    """A workload value as the base64 of its JSON text (the bytes a cas compares)."""
    return encode(json.dumps(value, separators=(",", ":")))


def decode_value(data: str) -> Any:
    """What :func:`encode_value` made; text that is not JSON (not written by this client) as it is."""
    text = decode(data)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


# -- requests ---------------------------------------------------------------------------------------------


def request_for(op: Op, reads: str = LINEARIZABLE) -> tuple[str, dict[str, Any]]:
    """The gateway path and JSON body that perform ``op``."""
    if op.key is None:
        raise ValueError(f"the etcd client needs a key for {op.f!r}")
    key = encode(op.key)
    if op.f == "read":
        body: dict[str, Any] = {"key": key}
        if reads == SERIALIZABLE:
            body["serializable"] = True
        return "/v3/kv/range", body
    if op.f == "write":
        return "/v3/kv/put", {"key": key, "value": encode_value(op.value)}
    if op.f == "cas":
        expected, new = op.value
        if expected is None:
            compare = {"key": key, "target": "VERSION", "result": "EQUAL", "version": "0"}
        else:
            compare = {"key": key, "target": "VALUE", "result": "EQUAL", "value": encode_value(expected)}
        put = {"request_put": {"key": key, "value": encode_value(new)}}
        return "/v3/kv/txn", {"compare": [compare], "success": [put]}
    raise ValueError(f"the etcd client runs read, write and cas, not {op.f!r}")


# -- completions ------------------------------------------------------------------------------------------


def _lsn(revision: Any) -> list[int] | None:
    return None if revision is None else [LSN_TERM, int(revision)]


def completion_of(op: Op, node: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """The completion of ``op`` from a 200 answer's JSON ``body`` (proto3 JSON leaves out false and 0)."""
    header = body.get("header") or {}
    if op.f == "read":
        kvs = body.get("kvs") or []
        if not kvs:
            return {"type": "ok", "value": None, "node": node, "lsn": None}
        kv = kvs[0]
        return {"type": "ok", "value": decode_value(kv.get("value", "")), "node": node,
                "lsn": _lsn(kv.get("mod_revision"))}
    if op.f == "cas" and not body.get("succeeded", False):
        return {"type": "fail", "value": None, "node": node, "error": CAS_MISMATCH}
    return {"type": "ok", "value": None, "node": node, "lsn": _lsn(header.get("revision"))}


def error_completion(op: Op, node: str, status: int, body: Any) -> dict[str, Any]:
    """The completion of an answer that is not a 200: definite where etcd says the request never reached
    the log (module docstring, "Outcomes"), else :func:`indefinite`."""
    fields = body if isinstance(body, Mapping) else {}
    error = str(fields.get("message") or fields.get("error") or f"HTTP {status}")
    if fields.get("code") == GRPC_INVALID_ARGUMENT or any(m in error for m in DEFINITE_MESSAGES):
        return fail(node, error)
    return indefinite(op, node, error)


class EtcdWorkloadClient(PinnedClient[None]):
    """One logical process's client: read, write and cas over the gateway of the members in ``urls``.

    ``urls``: member name -> base URL (``http://10.55.0.11:2379``); ``home`` the member it talks to unless
    an operation names one. ``transport`` replaces the network (tests pass ``httpx.MockTransport``).
    """

    member = "member"

    def __init__(
        self,
        urls: Mapping[str, str],
        home: str,
        *,
        reads: str = LINEARIZABLE,
        timeout: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if reads not in READ_MODES:
            raise ValueError(f"reads must be one of {', '.join(READ_MODES)}, not {reads!r}")
        super().__init__(urls, home, timeout=timeout)
        self.reads = reads
        self.http = http_client(timeout, transport)

    async def invoke(self, op: Op) -> dict[str, Any]:
        """Run ``op`` at its member: ``op.node``, or the home member, failing over while a member cannot be
        reached (``harness.db.client.PinnedClient.failover``)."""
        return await self.failover(op, self._send)

    async def _send(self, op: Op, node: str, deadline: float) -> dict[str, Any]:
        """``op``'s completion at ``node``; :class:`NotSent` when the request cannot have reached it."""
        path, body = request_for(op, self.reads)
        try:
            response = await self.http.post(self.addresses[node] + path, json=body)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            # Never sent: no connection was made (refused, unreachable, or none free in time).
            raise NotSent(f"{CONNECTION_REFUSED}: {exc}") from None
        except httpx.TimeoutException:
            return indefinite(op, node, f"{TIMEOUT} after {self.timeout:g} s")
        except httpx.TransportError as exc:
            return indefinite(op, node, f"{CONNECTION_LOST}: {type(exc).__name__}: {exc}")
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if response.status_code == 200 and isinstance(answer, Mapping):
            return completion_of(op, node, answer)
        return error_completion(op, node, response.status_code, answer)

    async def close(self) -> None:
        await self.http.aclose()
