"""Client error codes, each marked definite or indefinite, defined once (docs/node-core.md).

A *definite* error means the operation certainly did not take effect and never will (the history records
`fail`). An *indefinite* error means it may have taken effect, or may still take effect later (the history
records `info`); as Maelstrom puts it, "when in doubt, indefinite is always safe" (STYLE.md 5). The node
core, the runtime and the client library all build error replies through `error_reply`, so a code can
never be sent with the wrong certainty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ErrorCode:
    """A client-visible error: its wire code, whether it is definite, and what it means."""

    code: str
    definite: bool
    meaning: str


ERRORS: dict[str, ErrorCode] = {
    e.code: e
    for e in (
        ErrorCode("not-leader", True,
                  "this node is not the leader (the reply's `leader` names the leader it knows, or null); "
                  "nothing was done: retry there"),
        ErrorCode("unavailable", True,
                  "the leader cannot take the request now (too many requests held while it synchronises); "
                  "nothing was done: retry later"),
        ErrorCode("bad-request", True, "the request is malformed; the message says what is wrong"),
        ErrorCode("too-large", True, "the request line exceeds the size limit (1 MiB)"),
        ErrorCode("no-read-index", True,
                  "a node asked for a local read could not get a read index from the leader (no leader known, "
                  "or no answer in time); nothing was done: retry, or read at the leader"),
        ErrorCode("cas-mismatch", True,
                  "the compare-and-set was committed but the register did not hold the expected value, so it "
                  "had no effect (the reply carries the LSN of the entry)"),
        ErrorCode("not-found", True,
                  "confirm of a message GUID that is not pending confirmation in that queue (committed, "
                  "no effect)"),
        ErrorCode("in-flight", True,
                  "consume of a queue with no message to deliver now while delivered ones await their confirm "
                  "or visibility timeout (committed, no effect); `value` is `{\"in_flight\": n, "
                  "\"visible_in\": seconds}` until the next one is delivered again"),
        ErrorCode("leadership-lost", False,
                  "the leader lost its leadership after appending the write and before it committed; a later "
                  "leader may still commit it"),
        ErrorCode("internal-error", False,
                  "the node hit a bug handling the request (the runtime logs it); it may or may not have "
                  "taken effect"),
        ErrorCode("timeout", False, "no reply in time; the operation may have taken effect"),
        ErrorCode("connection-lost", False, "the connection closed before the reply; it may have taken effect"),
        ErrorCode("connection-refused", True,
                  "the client could not connect, so the request was never sent"),
    )
}


def error_reply(request_id: Any, code: str, message: str, leader: str | None = None, **extra: Any) -> dict:
    """Build the reply for a failed request; `code` must be one of ERRORS."""
    spec = ERRORS[code]
    reply = {"id": request_id, "ok": False, "error": code, "definite": spec.definite, "leader": leader,
             "message": message}
    reply.update(extra)
    return reply
