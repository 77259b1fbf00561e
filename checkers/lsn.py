"""lsn-monotonicity: Leader Sequence Numbers are applied in order, agree across nodes, and are consistent
with the real-time order of the operations that returned them.

An LSN is ``(term, seq)`` compared lexicographically (seed 000: "(5, 2) is newer than (4, 1000)"). The
rules, each sound for a system with one replicated log per cluster:

From the node journals (``apply`` events):

* **apply-order**: within one lifetime of a node (between two ``start`` events) the applied LSNs strictly
  increase. After a restart a node may re-apply its recovered log from the beginning, so the order
  restarts with each ``start``; what it re-applies must still agree (next rule).
* **log-divergence** (log agreement): no LSN is applied with two different entries, on two nodes or on
  one node across restarts. Two ``apply`` events carry *the same entry* when their ``key`` and ``op``
  fields (and ``value`` and ``guid``, where present) are equal as JSON values. Other fields are
  informational and not compared.

From the history (``ok`` client operations carrying ``lsn``; ``status`` operations are ignored). A
*read* is an operation with ``f`` in :data:`READ_FS`; every other client operation that returned an LSN
(write, cas, put, append, consume, confirm...) is a *write*: it created the log entry at its LSN.

* **duplicate-lsn**: two writes returned the same LSN but are different entries (different ``f``, ``key``
  or ``value``). One entry acknowledged twice (a queue PUT retried with the same GUID and de-duplicated,
  seed 004) is the same entry and allowed.
* **realtime-writes**: a write that completed before another write was invoked has the smaller LSN. By
  default (``scope="log"``) this holds across all keys, since one leader's log orders every write; with
  ``scope="key"`` (systems with a log per key or shard) only writes on the same key are compared.
* **stale-read-lsn**: a read's LSN (the entry it observed) is not smaller than the LSN of any read or
  write on the same key that completed before the read was invoked. Reads are only compared on their own
  key: a read observes the last entry of its key, which may be older than writes to other keys.
* **write-after-read-lsn**: a write invoked after a read of the same key completed has a larger LSN than
  the one the read observed.
* **reply-vs-log**: an LSN returned for a write on key K was applied in a journal with a different key.

A *retry* is a write of the same entry (same ``f``, ``key`` and non-null ``value``: values are unique
per key in our workloads, GUIDs per message) as an earlier-invoked write that did not ``fail``. A retry
may be acknowledged with the LSN of the entry its predecessor created, perhaps long ago (seed 004's PUT
de-duplication), so retries are exempt from the real-time rules; duplicate-lsn still applies to them.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import msgspec

from checkers.history import NEMESIS, History, JournalEvent, Operation
from checkers.verdict import UNKNOWN, Verdict

READ_FS = frozenset({"read", "get"})
_RET, _CALL = operator.attrgetter("ret"), operator.attrgetter("call")
IGNORED_FS = frozenset({"status"})
MAX_REPORTED = 20

KINDS = (
    "log-divergence",
    "apply-order",
    "duplicate-lsn",
    "reply-vs-log",
    "realtime-writes",
    "stale-read-lsn",
    "write-after-read-lsn",
)


def _same_op_entry(a: Operation, b: Operation) -> bool:
    return a.f == b.f and a.key == b.key and a.value == b.value


class _Findings:
    """Violations by kind: all counted, the first :data:`MAX_REPORTED` of each kept."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {kind: 0 for kind in KINDS}
        self.examples: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}

    def add(self, kind: str, example: dict[str, Any]) -> None:
        self.counts[kind] += 1
        if len(self.examples[kind]) < MAX_REPORTED:
            self.examples[kind].append({"kind": kind, **example})

    def first(self) -> dict[str, Any] | None:
        for kind in KINDS:
            if self.examples[kind]:
                return self.examples[kind][0]
        return None


def _check_journals(
    journals: Mapping[str, list[JournalEvent]], findings: _Findings
) -> dict[tuple[int, int], JournalEvent]:
    """apply-order and log-divergence; returns LSN -> first apply event of it (for reply-vs-log)."""
    first_apply: dict[tuple[int, int], JournalEvent] = {}
    diverged: set[tuple[tuple[int, int], str]] = set()
    for node, events in journals.items():
        last: JournalEvent | None = None
        last_lsn: tuple[int, int] | None = None
        for event in events:
            kind = event.event
            if kind != "apply":
                if kind == "start":
                    last = last_lsn = None
                continue
            data = event.data
            lsn = data["lsn"]
            if last_lsn is not None and lsn <= last_lsn:
                findings.add(
                    "apply-order",
                    {
                        "node": node,
                        "summary": (
                            f"{node} applied LSN {list(lsn)} (journal line {event.line}) after "
                            f"{list(last.data['lsn'])} (line {last.line}) without a restart in between"
                        ),
                        "earlier": last.to_json(),
                        "later": event.to_json(),
                    },
                )
            last, last_lsn = event, lsn
            seen = first_apply.get(lsn)
            if seen is None:
                first_apply[lsn] = event
                continue
            other = seen.data
            if (
                other["key"] == data["key"]
                and other["op"] == data["op"]
                and other.get("value") == data.get("value")
                and other.get("guid") == data.get("guid")
            ):
                continue  # the same entry (see the module docstring)
            if (lsn, event.node) not in diverged:
                diverged.add((lsn, event.node))
                findings.add(
                    "log-divergence",
                    {
                        "lsn": list(lsn),
                        "summary": (
                            f"LSN {list(lsn)} applied as two different entries: {seen.node} journal line "
                            f"{seen.line} (key {seen.data.get('key')!r}) and {event.node} journal line "
                            f"{event.line} (key {event.data.get('key')!r})"
                        ),
                        "first": seen.to_json(),
                        "second": event.to_json(),
                    },
                )
    return first_apply


def _sweep(
    predecessors: list[Operation],
    checked: list[Operation],
    *,
    strict: bool,
    skip: set[int],
) -> Iterable[tuple[Operation, Operation]]:
    """Pairs (a, b) with a in ``predecessors`` completed before b in ``checked`` was invoked, and
    a.lsn > b.lsn (or >= when ``strict``), where a is the predecessor with the largest LSN. O(n log n)."""
    by_ret = sorted(predecessors, key=_RET)
    rets = [op.ret for op in by_ret]
    best: Operation | None = None
    i = 0
    for b in sorted(checked, key=_CALL):
        end = bisect.bisect_left(rets, b.call, lo=i)
        for a in by_ret[i:end]:
            if best is None or a.lsn > best.lsn:
                best = a
        i = end
        if best is None or best is b or b.id in skip:
            continue
        if best.lsn > b.lsn or (strict and best.lsn == b.lsn):
            yield best, b


def _pair(kind_text: str, a: Operation, b: Operation) -> dict[str, Any]:
    node_a = f" on {a.node}" if a.node else ""
    node_b = f" on {b.node}" if b.node else ""
    return {
        "summary": (
            f"{kind_text}: {a.f} of key {a.key!r}{node_a} completed at {a.ret} ns (history line "
            f"{(a.complete_index or 0) + 1}) with LSN {list(a.lsn or ())}, before {b.f} of key {b.key!r}"
            f"{node_b} was invoked at {b.call} ns (line {b.invoke_index + 1}), which returned LSN "
            f"{list(b.lsn or ())}"
        ),
        "earlier": a.evidence(),
        "later": b.evidence(),
    }


def _check_history(
    history: History,
    first_apply: Mapping[tuple[int, int], JournalEvent],
    findings: _Findings,
    scope: Literal["log", "key"],
) -> dict[str, int]:
    """duplicate-lsn, reply-vs-log and the real-time rules over the history's ``ok`` operations."""
    writes: list[Operation] = []
    reads: list[Operation] = []
    for op in history.ops:
        if op.type != "ok" or op.lsn is None or op.f in IGNORED_FS or op.process == NEMESIS:
            continue
        (reads if op.f in READ_FS else writes).append(op)

    reacks = _retries(history)
    first_write: dict[tuple[int, int], Operation] = {}
    for op in writes:  # invoke order
        seen = first_write.setdefault(op.lsn, op)
        if seen is not op and not _same_op_entry(seen, op):
            findings.add(
                "duplicate-lsn",
                {
                    "lsn": list(op.lsn),
                    "summary": (
                        f"LSN {list(op.lsn)} returned for two different writes: {seen.f} {seen.key!r} "
                        f"{seen.value!r} (history line {seen.invoke_index + 1}) and {op.f} {op.key!r} "
                        f"{op.value!r} (line {op.invoke_index + 1})"
                    ),
                    "first": seen.evidence(),
                    "second": op.evidence(),
                },
            )
    for op in writes:
        applied = first_apply.get(op.lsn)
        if applied is not None and applied.data.get("key") != op.key:
            findings.add(
                "reply-vs-log",
                {
                    "lsn": list(op.lsn),
                    "summary": (
                        f"{op.f} of key {op.key!r} (history line {op.invoke_index + 1}) was acknowledged "
                        f"with LSN {list(op.lsn)}, which {applied.node} applied for key "
                        f"{applied.data.get('key')!r} (journal line {applied.line})"
                    ),
                    "operation": op.evidence(),
                    "apply": applied.to_json(),
                },
            )

    # realtime-writes: over the whole log, or per key.
    groups = [writes] if scope == "log" else list(_by_key(writes).values())
    for group in groups:
        for a, b in _sweep(group, group, strict=False, skip=reacks):
            findings.add("realtime-writes", _pair("a later write has a smaller LSN", a, b))

    writes_by_key = _by_key(writes)
    for key, key_reads in _by_key(reads).items():
        key_writes = writes_by_key.get(key, [])
        for a, b in _sweep(key_reads + key_writes, key_reads, strict=False, skip=set()):
            findings.add("stale-read-lsn", _pair("a later read observed a smaller LSN", a, b))
        for a, b in _sweep(key_reads, key_writes, strict=True, skip=reacks):
            findings.add(
                "write-after-read-lsn", _pair("a write after a read got an LSN not above the read's", a, b)
            )
    return {"writes_with_lsn": len(writes), "reads_with_lsn": len(reads), "retries": len(reacks)}


def _retries(history: History) -> set[int]:
    """Ids of the writes that retry an earlier-invoked, non-failed write of the same entry."""
    seen: set[Any] = set()
    retries: set[int] = set()
    for op in history.ops:
        if op.value is None or op.type == "fail" or op.f in READ_FS or op.f in IGNORED_FS:
            continue
        entry = (op.f, _frozen(op.key), _frozen(op.value))
        if entry in seen:
            retries.add(op.id)
        else:
            seen.add(entry)
    return retries


_CANONICAL = msgspec.json.Encoder(order="sorted").encode  # one JSON text per value: hashable, comparable


def _frozen(value: Any) -> Any:
    return _CANONICAL(value) if value.__class__ is list or value.__class__ is dict else value


def _by_key(ops: list[Operation]) -> dict[Any, list[Operation]]:
    groups: dict[Any, list[Operation]] = {}
    for op in ops:
        key = op.key
        if key.__class__ is list or key.__class__ is dict:
            key = repr(key)
        groups.setdefault(key, []).append(op)
    return groups


def check_lsn_monotonicity(
    journals: Mapping[str, list[JournalEvent]] | None,
    history: History | None,
    *,
    scope: Literal["log", "key"] = "log",
) -> Verdict:
    """Check the LSN rules of this module's docstring on the journals and/or the history.

    ``"unknown"`` when there is nothing to check (no journal ``apply`` events and no LSN in the history).
    """
    if scope not in ("log", "key"):
        raise ValueError(f"scope must be 'log' or 'key', not {scope!r}")
    findings = _Findings()
    stats: dict[str, Any] = {"scope": scope}
    first_apply: dict = {}
    if journals:
        first_apply = _check_journals(journals, findings)
        stats["apply_events"] = sum(1 for events in journals.values() for e in events if e.event == "apply")
        stats["distinct_applied_lsns"] = len(first_apply)
    if history is not None:
        stats.update(_check_history(history, first_apply, findings, scope))
    if not stats.get("apply_events") and not stats.get("writes_with_lsn") and not stats.get("reads_with_lsn"):
        return Verdict(
            UNKNOWN,
            "lsn-monotonicity cannot decide: no journal apply events and no LSNs in the history",
            stats=stats,
        )
    stats["violations"] = {kind: n for kind, n in findings.counts.items() if n}
    first = findings.first()
    if first is None:
        checked = []
        if stats.get("apply_events"):
            checked.append(f"{stats['apply_events']} applies on {len(journals or {})} nodes")
        if history is not None and (stats.get("writes_with_lsn") or stats.get("reads_with_lsn")):
            checked.append(f"{stats['writes_with_lsn']} writes and {stats['reads_with_lsn']} reads with LSNs")
        return Verdict(True, f"LSNs monotonic and agreeing: {', '.join(checked)}", stats=stats)
    total = sum(findings.counts.values())
    counts = ", ".join(f"{n} {kind}" for kind, n in findings.counts.items() if n)
    return Verdict(
        False,
        f"{total} LSN violations ({counts}); first: {first['summary']}",
        counterexample={
            "first": first,
            "violations": {kind: examples for kind, examples in findings.examples.items() if examples},
        },
        stats=stats,
    )
