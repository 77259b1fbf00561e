"""Storage records: what a node persists (via `Ready.persist`) and how it recovers from them.

The driver appends records durably in order (framing, CRC and torn-tail truncation are the runtime's job,
`cluster/disk.py`) and after a restart hands all valid records back to `recover`. Records are small JSON
objects with a `"t"` type field, defined once in `RECORDS`:

* `term`: the node's term and its vote in that term (raft: the one vote per term; blazingmq: the candidate
  it answered yes). Persisted before any message that depends on it is sent (the driver persists first).
* `entries`: the log from index `from` on is replaced by `entries` (an append when `from` is one past the
  end; a divergent suffix dropped and replaced otherwise; `entries` may be empty).
* `applied`: everything up to `index` has been applied and journalled; on recovery those entries are
  applied again silently, so a node's journal shows each LSN applied once and in increasing order.
* `leader`: this node became leader of `term`. Recovery reports it; only the `lsn-reuse` bug acts on it.

With storage shards (`cluster.core.shards`), each shard's replica persists the same records with a
`"group"` field naming its shard (`"shard-0"`, ...); `recover` sets them aside, without the field, in
`Recovered.groups`, and the shard layer recovers each shard from its own records. A node without shards
writes no such record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cluster.core.log import Entry

RECORDS: dict[str, str] = {
    "term": "{t, term, vote}: current term and the vote given in it (null for none)",
    "entries": "{t, from, entries}: the log from index `from` on is replaced by `entries`",
    "applied": "{t, index}: entries up to `index` are applied and journalled",
    "leader": "{t, term}: this node became leader of `term`",
}


class StorageError(ValueError):
    """A stored record is not one this version wrote; the message names the record and the problem."""


def term_record(term: int, vote: str | None) -> dict[str, Any]:
    return {"t": "term", "term": term, "vote": vote}


def entries_record(first: int, entries: list[Entry]) -> dict[str, Any]:
    return {"t": "entries", "from": first, "entries": entries}


def applied_record(index: int) -> dict[str, Any]:
    return {"t": "applied", "index": index}


def leader_record(term: int) -> dict[str, Any]:
    return {"t": "leader", "term": term}


@dataclass
class Recovered:
    """A node's durable state, rebuilt from its records (an empty node when there were none)."""

    term: int = 0
    vote: str | None = None
    entries: list[Entry] = field(default_factory=list)
    applied_index: int = 0
    leader_term: int | None = None
    records: int = 0
    #: storage shards' records (`"group"` field), by group, in order and without that field
    groups: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def recover(records: Iterable[dict[str, Any]]) -> Recovered:
    """Replay records in order; raise StorageError on one that is malformed."""
    state = Recovered()
    entries = state.entries
    for number, record in enumerate(records):
        kind = record.get("t") if isinstance(record, dict) else None
        try:
            if kind is not None and "group" in record:
                group = record["group"]
                if not isinstance(group, str) or kind not in RECORDS:
                    raise TypeError(f"a group record needs a string group and a known type, got {group!r}, {kind!r}")
                state.groups.setdefault(group, []).append({k: v for k, v in record.items() if k != "group"})
            elif kind == "term":
                term, vote = record["term"], record["vote"]
                if type(term) is not int or not (vote is None or isinstance(vote, str)):
                    raise TypeError("term must be an int and vote a string or null")
                state.term, state.vote = term, vote
            elif kind == "entries":
                first, new = record["from"], record["entries"]
                if type(first) is not int or not 1 <= first <= len(entries) + 1 or type(new) is not list:
                    raise TypeError(f"from={first!r} does not continue a log of {len(entries)} entries")
                del entries[first - 1:]
                entries.extend(new)
            elif kind == "applied":
                if type(record["index"]) is not int:
                    raise TypeError("index must be an int")
                state.applied_index = record["index"]
            elif kind == "leader":
                if type(record["term"]) is not int:
                    raise TypeError("term must be an int")
                state.leader_term = record["term"]
            else:
                raise TypeError(f"unknown record type {kind!r}; known: {', '.join(RECORDS)}")
        except (KeyError, TypeError) as exc:
            raise StorageError(f"storage record {number} is malformed: {exc}") from None
        state.records = number + 1
    # A truncation may have cut below what was applied (only under bugs): never apply past the log.
    state.applied_index = min(state.applied_index, len(entries))
    return state
