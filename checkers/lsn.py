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

**Groups.** A system with a log per shard, partition or queue numbers each group's entries on its own
(FORMATS.md: ``apply`` events and client completions may carry ``group``; absent, the system's single
group). Every rule above holds within one group and LSNs are compared only within one group: an LSN is
really ``(group, term, seq)``, so the same ``[term, seq]`` in two groups is two entries, apply-order is
kept per node and group, and realtime-writes (``scope="log"``) orders each group's writes on their own.
Findings in a group name it.

A *retry* is a write of the same entry (same ``f``, ``key`` and non-null ``value``: values are unique
per key in our workloads, GUIDs per message) as an earlier-invoked write that did not ``fail``. A retry
may be acknowledged with the LSN of the entry its predecessor created, perhaps long ago (seed 004's PUT
de-duplication), so retries are exempt from the real-time rules; duplicate-lsn still applies to them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

import msgspec

if TYPE_CHECKING:  # numpy is imported where it is used: a third of the checkers' start-up otherwise
    import numpy as np

from checkers.history import NEMESIS, History, JournalEvent, Operation, seconds
from checkers.verdict import UNKNOWN, Verdict

READ_FS = frozenset({"read", "get"})
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


def _entry_key(group: Any, lsn: tuple[int, int]) -> Any:
    """What identifies a log entry: its LSN in the single group, ``(group, LSN)`` in a named one (an LSN's
    first element is an int, a group's name a str, so the two never collide)."""
    return lsn if group is None else (group, lsn)


def _in(group: Any) -> str:
    """`` in group G`` for a finding in a named group, nothing for the single group."""
    return "" if group is None else f" in group {group}"


def _check_journals(
    journals: Mapping[str, list[JournalEvent]], findings: _Findings
) -> dict[Any, JournalEvent]:
    """apply-order and log-divergence; returns entry key (:func:`_entry_key`) -> first apply event of it
    (for reply-vs-log)."""
    first_apply: dict[Any, JournalEvent] = {}
    diverged: set[tuple[Any, str]] = set()
    for node, events in journals.items():
        # group -> (last apply event, its LSN) in this lifetime of the node
        lasts: dict[Any, tuple[JournalEvent, tuple[int, int]]] = {}
        for event in events:
            kind = event.event
            if kind != "apply":
                if kind == "start":
                    lasts.clear()
                continue
            data = event.data
            lsn = data["lsn"]
            group = data.get("group")
            previous = lasts.get(group)
            if previous is not None and lsn <= previous[1]:
                last = previous[0]
                example = {
                    "node": node,
                    "summary": (
                        f"{node} applied LSN {list(lsn)}{_in(group)} (journal line {event.line}) after "
                        f"{list(last.data['lsn'])} (line {last.line}) without a restart in between"
                    ),
                    "earlier": last.to_json(),
                    "later": event.to_json(),
                }
                if group is not None:
                    example["group"] = group
                findings.add("apply-order", example)
            lasts[group] = (event, lsn)
            entry = _entry_key(group, lsn)
            seen = first_apply.get(entry)
            if seen is None:
                first_apply[entry] = event
                continue
            other = seen.data
            if (
                other["key"] == data["key"]
                and other["op"] == data["op"]
                and other.get("value") == data.get("value")
                and other.get("guid") == data.get("guid")
            ):
                continue  # the same entry (see the module docstring)
            if (entry, event.node) not in diverged:
                diverged.add((entry, event.node))
                example = {
                    "lsn": list(lsn),
                    "summary": (
                        f"LSN {list(lsn)}{_in(group)} applied as two different entries: {seen.node} journal "
                        f"line {seen.line} (key {seen.data.get('key')!r}) and {event.node} journal line "
                        f"{event.line} (key {event.data.get('key')!r})"
                    ),
                    "first": seen.to_json(),
                    "second": event.to_json(),
                }
                if group is not None:
                    example["group"] = group
                findings.add("log-divergence", example)
    return first_apply


class _Gathered:
    """Operations gathered in one pass for the real-time rules, with the fields those read."""

    __slots__ = ("ops", "calls", "rets", "lsns", "keys", "grouped")

    def __init__(self) -> None:
        self.ops: list[Operation] = []
        self.calls: list[int] = []
        self.rets: list[int] = []
        self.lsns: list[tuple[int, int]] = []
        self.keys: list[Any] = []
        self.grouped = False  # some operation names a group

    def add(self, op: Operation, lsn: tuple[int, int]) -> None:
        self.ops.append(op)
        self.calls.append(op.call)
        self.rets.append(op.ret)  # type: ignore[arg-type]  # ok operations have completed
        self.lsns.append(lsn)
        self.keys.append(op.key)
        if op.group is not None:
            self.grouped = True

    def group_keys(self, grouped: bool) -> list[Any]:
        """The operations' keys, as ``(group, key)`` when some operation of the history names a group
        (keys are compared within one group only)."""
        if not grouped:
            return self.keys
        return [(op.group, _hashable_key(key)) for op, key in zip(self.ops, self.keys, strict=True)]

    def groups(self) -> list[Any]:
        return [op.group for op in self.ops]

    def __len__(self) -> int:
        return len(self.ops)


class _Columns:
    """Operations as numpy columns: LSNs and times replaced by dense ranks (order and equality are all the
    real-time rules need, and ranks are small enough to combine with a group number in one int64)."""

    def __init__(self, ops: list[Operation], lsn: np.ndarray, call: np.ndarray, ret: np.ndarray) -> None:
        self.ops = ops
        self.lsn, self.call, self.ret = lsn, call, ret

    def __add__(self, other: _Columns) -> _Columns:
        import numpy as np
        return _Columns(
            self.ops + other.ops,
            np.concatenate([self.lsn, other.lsn]),
            np.concatenate([self.call, other.call]),
            np.concatenate([self.ret, other.ret]),
        )


def _columns(writes: _Gathered, reads: _Gathered) -> tuple[_Columns, _Columns]:
    """Columns of the writes and of the reads, ranked together."""
    import numpy as np
    nw, n = len(writes), len(writes) + len(reads)
    times = np.array(writes.calls + reads.calls + writes.rets + reads.rets, dtype=np.int64)
    _, times = np.unique(times, return_inverse=True)
    lsns = _lsn_ranks(writes.lsns + reads.lsns)
    return (
        _Columns(writes.ops, lsns[:nw], times[:nw], times[n : n + nw]),
        _Columns(reads.ops, lsns[nw:], times[nw:n], times[n + nw :]),
    )


def _lsn_ranks(lsns: list[tuple[int, int]]) -> np.ndarray:
    """Dense ranks of LSNs in (term, seq) order."""
    import numpy as np
    n = len(lsns)
    try:
        pairs = np.fromiter(itertools.chain.from_iterable(lsns), dtype=np.int64, count=2 * n)
    except OverflowError:  # beyond int64: rank in Python
        rank = {lsn: i for i, lsn in enumerate(sorted(set(lsns)))}
        return np.array([rank[lsn] for lsn in lsns], dtype=np.int64)
    terms, seqs = pairs[0::2], pairs[1::2]
    order = np.lexsort((seqs, terms))
    terms, seqs = terms[order], seqs[order]
    new = np.ones(n, dtype=np.int64)
    new[1:] = (terms[1:] != terms[:-1]) | (seqs[1:] != seqs[:-1])
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = np.cumsum(new) - 1
    return ranks


def _sweep(
    pred: _Columns,
    pred_group: np.ndarray,
    checked: _Columns,
    checked_group: np.ndarray,
    *,
    strict: bool,
    skip: set[int],
) -> Iterator[tuple[Operation, Operation]]:
    """Pairs (a, b), a a predecessor and b a checked operation of the same group, where a completed
    before b was invoked and a.lsn > b.lsn (or >= when ``strict``), a being the predecessor with the
    largest LSN (the first to complete, among equals); in group order, then b's invoke order. O(n log n).

    Predecessors sorted by (group, completion) get a running maximum of ``group * span + LSN rank``, which
    restarts with each group because every group's values exceed the last group's; each checked
    operation's prefix (its group's predecessors completed before its invoke) is a binary search, and
    the comparison with its own LSN is one vector operation. Python code runs only for violations.
    """
    import numpy as np
    if not len(pred.ops) or not len(checked.ops):
        return
    times = int(max(pred.ret.max(), checked.call.max())) + 2
    span = int(max(pred.lsn.max(), checked.lsn.max())) + 1
    key = pred_group * times + pred.ret
    order = np.argsort(key, kind="stable")
    key = key[order]
    running = np.maximum.accumulate(pred_group[order] * span + pred.lsn[order])
    end = np.searchsorted(key, checked_group * times + checked.call, side="left")
    start = np.searchsorted(key, checked_group * times, side="left")
    top = running[np.maximum(end - 1, 0)] - checked_group * span
    bad = (end > start) & (top >= checked.lsn if strict else top > checked.lsn)
    rows = np.flatnonzero(bad)
    rows = rows[np.lexsort((rows, checked.call[rows], checked_group[rows]))]
    firsts = order[np.searchsorted(running, running[end[rows] - 1], side="left")]
    for row, first in zip(rows.tolist(), firsts.tolist(), strict=True):
        a, b = pred.ops[first], checked.ops[row]
        if b.id not in skip and a is not b:
            yield a, b


def _groups(keys: list[Any], numbers: dict[Any, int]) -> np.ndarray:
    """Each key as a group number, new keys numbered in order of appearance (a list or object key by its
    ``repr``)."""
    import numpy as np
    try:
        new = dict.fromkeys(keys)
    except TypeError:  # an unhashable key
        keys = [_hashable_key(key) for key in keys]
        new = dict.fromkeys(keys)
    for key in new:
        numbers.setdefault(key, len(numbers))
    return np.fromiter(map(numbers.__getitem__, keys), dtype=np.int64, count=len(keys))


def _hashable_key(key: Any) -> Any:
    return repr(key) if key.__class__ is list or key.__class__ is dict else key


def _pair(kind_text: str, a: Operation, b: Operation) -> dict[str, Any]:
    node_a = f" on {a.node}" if a.node else ""
    node_b = f" on {b.node}" if b.node else ""
    pair = {
        "summary": (
            f"{kind_text}{_in(b.group)}: {a.f} of key {a.key!r}{node_a} completed at {seconds(a.ret)} (history line "
            f"{(a.complete_index or 0) + 1}) with LSN {list(a.lsn or ())}, before {b.f} of key {b.key!r}"
            f"{node_b} was invoked at {seconds(b.call)} (line {b.invoke_index + 1}), which returned LSN "
            f"{list(b.lsn or ())}"
        ),
        "earlier": a.evidence(),
        "later": b.evidence(),
    }
    if b.group is not None:
        pair["group"] = b.group
    return pair


def _check_history(
    history: History,
    first_apply: Mapping[Any, JournalEvent],
    findings: _Findings,
    scope: Literal["log", "key"],
) -> dict[str, int]:
    """duplicate-lsn, reply-vs-log and the real-time rules over the history's ``ok`` operations.

    One pass over the history does every per-operation step (a big history's operations are spread over
    memory, so each pass costs about as much as its work): it finds the retries, checks duplicate-lsn
    and reply-vs-log, and gathers the reads' and writes' columns for the real-time rules."""
    import numpy as np
    writes, reads = _Gathered(), _Gathered()
    reacks: set[int] = set()
    entries: set[Any] = set()  # (f, key, value) of every non-failed write so far: what a retry repeats
    first_write: dict[Any, Operation] = {}  # entry key (_entry_key) -> the first write acknowledged with it
    claim, applied_at = first_write.setdefault, first_apply.get
    for op in history.ops:
        f, kind, lsn = op.f, op.type, op.lsn
        if f in READ_FS:
            if kind == "ok" and lsn is not None and op.process != NEMESIS:
                reads.add(op, lsn)
            continue
        if f in IGNORED_FS:
            continue
        value = op.value
        if value is not None and kind != "fail":
            key = op.key
            if key.__class__ is list or key.__class__ is dict:
                key = _CANONICAL(key)
            if value.__class__ is list or value.__class__ is dict:
                value = _CANONICAL(value)
            before = len(entries)
            entries.add((f, key, value))
            if len(entries) == before:
                reacks.add(op.id)
        if kind != "ok" or lsn is None or op.process == NEMESIS:
            continue
        writes.add(op, lsn)
        group = op.group
        entry = lsn if group is None else (group, lsn)  # _entry_key, inlined: once per write
        seen = claim(entry, op)
        if seen is not op and not _same_op_entry(seen, op):
            example = {
                "lsn": list(lsn),
                "summary": (
                    f"LSN {list(lsn)}{_in(group)} returned for two different writes: {seen.f} {seen.key!r} "
                    f"{seen.value!r} (history line {seen.invoke_index + 1}) and {op.f} {op.key!r} "
                    f"{op.value!r} (line {op.invoke_index + 1})"
                ),
                "first": seen.evidence(),
                "second": op.evidence(),
            }
            if group is not None:
                example["group"] = group
            findings.add("duplicate-lsn", example)
        applied = applied_at(entry)
        if applied is not None and applied.data.get("key") != op.key:
            example = {
                "lsn": list(lsn),
                "summary": (
                    f"{op.f} of key {op.key!r} (history line {op.invoke_index + 1}) was acknowledged "
                    f"with LSN {list(lsn)}{_in(group)}, which {applied.node} applied for key "
                    f"{applied.data.get('key')!r} (journal line {applied.line})"
                ),
                "operation": op.evidence(),
                "apply": applied.to_json(),
            }
            if group is not None:
                example["group"] = group
            findings.add("reply-vs-log", example)

    # The real-time rules, on ranks of LSNs and times shared by writes and reads.
    w, r = _columns(writes, reads)
    nw = len(w.ops)
    # realtime-writes: over the whole log (each group's log, where there are groups), or per key.
    grouped = writes.grouped or reads.grouped
    if scope == "log":
        groups = _groups(writes.groups(), {}) if grouped else np.zeros(nw, dtype=np.int64)
    else:
        groups = _groups(writes.group_keys(grouped), {})
    for a, b in _sweep(w, groups, w, groups, strict=False, skip=reacks):
        findings.add("realtime-writes", _pair("a later write has a smaller LSN", a, b))
    # Reads on their own key (and group), keys in the order reads first name them.
    numbers: dict[Any, int] = {}
    read_groups = _groups(reads.group_keys(grouped), numbers)
    write_groups = _groups(writes.group_keys(grouped), numbers)
    for a, b in _sweep(
        r + w,
        np.concatenate([read_groups, write_groups]),
        r,
        read_groups,
        strict=False,
        skip=set(),
    ):
        findings.add("stale-read-lsn", _pair("a later read observed a smaller LSN", a, b))
    for a, b in _sweep(r, read_groups, w, write_groups, strict=True, skip=reacks):
        findings.add(
            "write-after-read-lsn", _pair("a write after a read got an LSN not above the read's", a, b)
        )
    return {"writes_with_lsn": len(writes), "reads_with_lsn": len(reads), "retries": len(reacks)}


_CANONICAL = msgspec.json.Encoder(order="sorted").encode  # one JSON text per value: hashable, comparable


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
