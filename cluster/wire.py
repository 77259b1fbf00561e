"""Newline-delimited JSON framing for the node's client and peer connections.

One JSON object per line, UTF-8, at most ``MAX_LINE_BYTES`` (1 MiB) before the newline on a client
connection (the node lets peer connections, whose log batches may be larger, use a higher limit). Both
kinds of connection arrive on the node's one listen port; the first line decides which kind it is:

* ``{"hello": "peer", "from": "<node id>"}`` opens a *peer* connection. Every later line is an envelope
  ``{"from": "<node id>", "msg": {...}}`` carrying one core message (``cluster.core.messages``). Each node
  dials every peer and sends only on its own outbound connection, so a pair of nodes shares two
  one-way connections.
* Any other first line opens a *client* connection, and is itself the first request (so ``nc`` works).
  Requests and replies are described in ``docs/node-core.md``.

Bad input never raises out of the decoder: a malformed or oversized line becomes a ``WireError`` item in
the decoded stream, in its place, and the stream goes on with the next line. The node answers such an
item with an error reply and keeps the connection (see ``error_reply``).

Everything here is sans-IO: the asyncio loops that read sockets live in the node and the client and
feed bytes to ``LineDecoder``.
"""

from __future__ import annotations

import json
from typing import Any

from cluster.core import errors

MAX_LINE_BYTES = 1 << 20
"""The largest line (without its newline) a client may send or receive."""

PEER_HELLO = "peer"

_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


class WireError(ValueError):
    """A line that cannot be a message. ``code`` (from ``cluster.core.errors``) is the error code of the
    reply the node sends back."""

    code = "bad-request"


class MalformedMessage(WireError):
    """Not UTF-8, not JSON, not a JSON object, or nested too deeply to parse."""

    code = "bad-request"


class MessageTooLarge(WireError):
    """A line longer than the limit; its bytes are discarded up to the next newline."""

    code = "too-large"


def encode(message: dict[str, Any], limit: int = MAX_LINE_BYTES) -> bytes:
    """One message as one line, newline included. Raises ``MessageTooLarge`` past ``limit`` bytes and
    ``TypeError``/``ValueError`` for what JSON cannot hold (a programming error, not bad input)."""
    body = _encoder.encode(message).encode("utf-8")
    if len(body) > limit:
        raise MessageTooLarge(f"message of {len(body)} bytes exceeds the {limit}-byte line limit")
    return body + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """One line (without its newline) to a message, or ``MalformedMessage`` saying what is wrong."""
    try:
        message = json.loads(line)
    except RecursionError:
        raise MalformedMessage("JSON nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, int digit limit
        raise MalformedMessage(f"not a JSON line: {exc}") from None
    if not isinstance(message, dict):
        raise MalformedMessage(f"expected a JSON object, got {type(message).__name__}")
    return message


class LineDecoder:
    """Turns a byte stream into messages and ``WireError`` items, in stream order.

    Memory stays bounded by ``limit`` plus one fed chunk: once a partial line outgrows the limit it is
    reported at once and the rest of it is skipped until its newline. Blank lines are ignored.
    """

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self._pending: list[bytes] = []
        self._pending_len = 0
        self._discarding = False

    def feed(self, data: bytes) -> list[dict[str, Any] | WireError]:
        out: list[dict[str, Any] | WireError] = []
        start = 0
        find = data.find
        while True:
            nl = find(b"\n", start)
            if nl < 0:
                break
            if self._discarding:
                self._discarding = False
                start = nl + 1
                continue
            if self._pending:
                self._pending.append(data[start:nl])
                line = b"".join(self._pending)
                self._pending.clear()
                self._pending_len = 0
            else:
                line = data[start:nl]
            start = nl + 1
            self._emit(line, out)
        if start < len(data) and not self._discarding:
            self._pending.append(data[start:])
            self._pending_len += len(data) - start
            if self._pending_len > self.limit:
                out.append(self._too_large(self._pending_len, more=True))
                self._pending.clear()
                self._pending_len = 0
                self._discarding = True
        return out

    def close(self) -> list[WireError]:
        """End of stream: a last line without its newline was cut off, and is reported as malformed."""
        pending, self._pending, self._pending_len = self._pending, [], 0
        self._discarding = False
        if pending and b"".join(pending).strip():
            return [MalformedMessage("connection closed in the middle of a line")]
        return []

    def _emit(self, line: bytes, out: list[dict[str, Any] | WireError]) -> None:
        if len(line) > self.limit:
            out.append(self._too_large(len(line)))
        elif line.strip():
            try:
                out.append(decode(line))
            except MalformedMessage as exc:
                out.append(exc)

    def _too_large(self, size: int, more: bool = False) -> MessageTooLarge:
        at_least = "at least " if more else ""
        return MessageTooLarge(
            f"line of {at_least}{size} bytes exceeds the {self.limit}-byte limit; split the value or send less"
        )


def error_reply(error: WireError, request_id: Any = None) -> dict[str, Any]:
    """The reply to a line that could not be read as a request (definite: the node did nothing with it)."""
    return errors.error_reply(request_id, error.code, str(error))


def peer_hello(node_id: str) -> dict[str, Any]:
    """The first line a node sends on its outbound connection to a peer."""
    return {"hello": PEER_HELLO, "from": node_id}


def hello_peer_id(first: dict[str, Any]) -> str | None:
    """The dialling node's id if ``first`` opens a peer connection, else None (a client connection)."""
    if first.get("hello") == PEER_HELLO:
        sender = first.get("from")
        if isinstance(sender, str) and sender:
            return sender
        raise MalformedMessage('peer hello needs "from": "<node id>"')
    return None


def peer_envelope(sender: str, message: dict[str, Any]) -> dict[str, Any]:
    """How one core message travels on a peer connection."""
    return {"from": sender, "msg": message}


def open_envelope(line: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(sender, message)`` from an envelope, or ``MalformedMessage``."""
    sender, message = line.get("from"), line.get("msg")
    if not isinstance(sender, str) or not isinstance(message, dict):
        raise MalformedMessage('peer line must be {"from": "<node id>", "msg": {...}}')
    return sender, message


def parse_address(text: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) to ``(host, port)``; ``ValueError`` naming what is wrong."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not host:
        raise ValueError(f"address {text!r} must be host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"address {text!r} has a port that is not a number") from None
    if not 0 < port < 65536:
        raise ValueError(f"address {text!r} has a port outside 1-65535")
    return host, port


def parse_node_addresses(text: str) -> dict[str, tuple[str, int]]:
    """``n2=host:port,n3=host:port`` to ``{"n2": (host, port), ...}``; empty text is no nodes.

    ``ValueError`` names the first bad item: a missing ``=``, an empty or repeated id, a bad address.
    """
    nodes: dict[str, tuple[str, int]] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        node_id, sep, address = item.partition("=")
        node_id = node_id.strip()
        if not sep or not node_id:
            raise ValueError(f"node list item {item!r} must be id=host:port")
        if node_id in nodes:
            raise ValueError(f"node id {node_id!r} appears twice in the node list")
        nodes[node_id] = parse_address(address)
    return nodes
