"""committed-data durability: what was acknowledged ``ok`` survives, and nothing appears from nowhere.

**Final reads.** Durability is judged on the *final* operations, issued after the faults ended. They are
found by the first rule that applies (:func:`final_phase`):

1. *marked*: client invokes carrying ``"final": true`` (an optional history field) are the final ones;
2. *after a time*: operations invoked strictly after ``final_after`` (ns, the caller's choice);
3. *after the nemesis*: operations invoked after the last nemesis event of the history (the final heal:
   the workloads heal everything, wait for recovery, then read every key on every node);
4. otherwise there are no final reads and durability cannot be judged (``"unknown"``).

**Registers** (``read``, ``write``, ``cas``; values unique per key, as the register workload makes them).
A ``cas [expected, new]`` that completed ``ok`` wrote ``new``; a ``fail`` write or cas wrote nothing; an
``info`` one may have written at any time after its invoke, or never. For each ``ok`` final read ``R``
of key ``k`` on node ``n`` that returned ``v``:

* *real time*: let ``X`` be the non-failed writes of ``v`` to ``k`` invoked before ``R`` completed (for
  ``v == null`` with no write of null: the initial value, which precedes everything). An ``ok`` write
  ``w`` of ``k`` is **lost** on ``n`` if ``w`` completed before ``R`` was invoked and every ``x`` in ``X``
  completed before ``w`` was invoked: then ``x`` precedes ``w`` precedes ``R`` in every linearization,
  and ``R`` cannot return ``v`` unless ``w`` was lost. If some ``x`` may follow ``w`` (it was concurrent
  with ``w`` or ended ``info``), ``w`` may have been overwritten legitimately and is not called lost.
* *LSN* (where both report one): an ``ok`` write ``w`` of ``k`` that completed before ``R`` was invoked
  with ``w.lsn > R.lsn`` is **lost** on ``n``: the final read observed an older entry of ``k`` than one
  that was committed before it began.

A final read that misses a write reports it as lost *on the node that answered*, whether that node lost
the write or served a stale read (the linearizability verdict tells those apart). So the final reads
must come after recovery, as the workloads do; marking them ``"final": true`` says so explicitly.

On every ``ok`` read (final or not), a value that no write or cas of that key put there is
**never-written**: no such write was invoked, it was invoked only after the read completed, or every such
write ``fail``-ed. A final read that returned a never-written value is reported as that, not as losses.

**Queues** (``put``/``enqueue`` with a GUID; ``consume``/``dequeue`` returning the delivered message(s);
``confirm``; ``drain`` returning every remaining message). A GUID is the invoke's ``guid`` field, else
the ``value`` itself or its ``"guid"`` member. The queue is judged **at-least-once** where the history
confirms messages (seed 004's PUSH/CONFIRM: a message whose consumer never confirms it, having died, timed
out, been cut off or lost its confirm, is delivered again) and **exactly-once** where it has no confirm
operation. For each queue:

* **lost**: an ``ok`` put whose GUID no ``ok`` consume or drain delivered by the end of the history,
  provided the final drain observed the queue empty (an ``ok`` drain, or a final consume that returned
  nothing or failed with an ``empty`` error). Without that, undelivered puts make the verdict
  ``"unknown"``. An ``info`` consume does not excuse anything: the message it may have taken was never
  confirmed, so the queue must deliver it again, and a queue that does not (bug ``no-redelivery``) has
  lost it.
* **dropped** (at-least-once): a message that some ``ok`` put or ``ok`` consume shows was in the queue,
  that no confirm removed, and yet the final drain observed the queue empty. A queue that delivers until
  confirmed empties only through confirms, so each message must have a confirm that did not fail (an
  empty answer means nothing is ready *and* nothing awaits a confirm: a queue with messages in flight
  must answer otherwise, as the bundled cluster's ``in-flight`` error does, and the drain waits). The
  history may not say which message an ``info`` confirm was about (a client that confirms "the message
  this process consumed last" records no GUID when it gets no answer), so ``k`` such confirms explain
  up to ``k`` unconfirmed messages; beyond that, (unconfirmed - ``k``) are counted dropped and all are
  listed. This is what shows a queue that forgets a message whose consumer never confirmed it (bug
  ``no-redelivery``) even when every message was delivered once.
* **duplicate**: a GUID delivered again when the semantics forbid it: at-least-once, a delivery invoked
  after an ``ok`` confirm of that GUID completed (a confirmed message is gone; seeing it again means it
  was enqueued twice, e.g. a re-sent put not de-duplicated); exactly-once, any second delivery.
* **redelivered** (not an anomaly): at-least-once, a GUID delivered again before any ``ok`` confirm of it
  completed. Counted in ``stats`` (``redelivered``: messages, ``redeliveries``: extra deliveries) and
  named in the summary.

What the system declares about delivery (``delivery``: ``test.json``'s record of the adapter's
``workloads.queue.Delivery``; the bundled cluster's promises where absent) changes two rules:

* without ``dedup`` (a re-sent put may be enqueued again), what would be a **duplicate** is counted as
  **enqueued twice** (``stats["enqueued_twice"]``, the first few listed in ``stats["enqueued_twice_examples"]``)
  and named in the summary, not an anomaly: the history cannot show whether the client re-sent the put;
* with ``redelivery`` ``"none"`` (a message taken and never confirmed is not delivered again) nothing is
  called **dropped**: a consumer that took a message and died took it with it. **lost** still holds.
* **never-written**: a delivered GUID that no non-failed put invoked before the delivery completed.

``info`` writes and puts may or may not be present; they are never required.

**Journals**, where given, name the nodes lacking an acknowledged write: a node that applied some LSN
``>= w.lsn`` but never applied ``w``'s key at ``w.lsn`` lacks ``w`` (nodes apply in LSN order); that is
**missing-on-node**, an anomaly on its own. A node whose journal ends before ``w.lsn`` is listed as
*behind*, not as lacking. Where the system has a log per group (FORMATS.md: ``apply`` events and
completions carrying ``group``, a storage shard's or a partition's own LSNs), all of this holds within
the write's group: its LSN is looked up, and compared with how far the node got, in that group's log only.
The rules over the history are per key and need no group: a key lives in one group.
"""

from __future__ import annotations

import bisect
import itertools
import json
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from checkers.history import History, JournalEvent, Operation, seconds
from checkers.verdict import UNKNOWN, Verdict

REGISTER_MODELS = ("register", "cas-register")
QUEUE_MODELS = ("queue",)
READ_FS = frozenset({"read"})
WRITE_FS = frozenset({"write"})
CAS_FS = frozenset({"cas"})
PUT_FS = frozenset({"put", "enqueue"})
CONSUME_FS = frozenset({"consume", "dequeue"})
DRAIN_FS = frozenset({"drain"})
CONFIRM_FS = frozenset({"confirm"})
# Operation names only queue histories use (``put`` alone is also a kv write).
QUEUE_ONLY_FS = CONSUME_FS | DRAIN_FS | CONFIRM_FS
MAX_REPORTED = 50
LOST_LISTED = 100_000
"""Lost writes named in ``lost_all`` (key, value or GUID, acknowledgement's history line): every one a
run can plausibly lose, where ``lost`` describes the first :data:`MAX_REPORTED` in full."""
_NEG_INF = float("-inf")
_POS_INF = float("inf")
_RET, _CALL, _LSN = operator.attrgetter("ret"), operator.attrgetter("call"), operator.attrgetter("lsn")


@dataclass(frozen=True)
class FinalPhase:
    """Which operations count as final (see the module docstring for the rules)."""

    rule: str
    after_index: int | None = None
    after_time: int | None = None
    marked: frozenset[int] | None = None  # invoke indexes of marked operations

    def includes(self, op: Operation) -> bool:
        if self.marked is not None:
            return op.invoke_index in self.marked
        if self.after_time is not None:
            return op.call > self.after_time
        return self.after_index is not None and op.invoke_index > self.after_index

    def select(self, ops: list[Operation]) -> list[Operation]:
        """The operations of ``ops`` that :meth:`includes`, in order (one comprehension per rule)."""
        if self.marked is not None:
            marked = self.marked
            return [op for op in ops if op.invoke_index in marked]
        if self.after_time is not None:
            after_time = self.after_time
            return [op for op in ops if op.call > after_time]
        if self.after_index is None:
            return []
        after_index = self.after_index
        return [op for op in ops if op.invoke_index > after_index]

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "after_index": self.after_index, "after_time": self.after_time}


def final_phase(history: History, final_after: int | None = None) -> FinalPhase | None:
    """The final phase of ``history``, or ``None`` when there is none (no marks, no time, no nemesis)."""
    marked = frozenset(op.invoke_index for op in history.ops if _marked_final(history, op))
    if marked:
        return FinalPhase(rule="operations marked final", marked=marked)
    if final_after is not None:
        return FinalPhase(rule=f"operations invoked after {seconds(final_after)}", after_time=final_after)
    if history.nemesis:
        last = max(
            op.complete_index if op.complete_index is not None else op.invoke_index for op in history.nemesis
        )
        return FinalPhase(
            rule=f"operations invoked after the last nemesis event (history line {last + 1})",
            after_index=last,
        )
    return None


def _marked_final(history: History, op: Operation) -> bool:
    return op.extra is not None and op.extra.get("final") is True


def infer_model(history: History) -> str:
    """``"queue"`` if the history has consume, drain or confirm operations, else ``"register"``."""
    return "queue" if any(op.f in QUEUE_ONLY_FS for op in history.ops) else "register"


def has_final_reads(history: History, model: str | None = None, final_after: int | None = None) -> bool:
    """Whether ``history`` has any final read (register) or final consume/drain (queue)."""
    model = model or infer_model(history)
    phase = final_phase(history, final_after)
    if phase is None:
        return False
    fs = READ_FS if model in REGISTER_MODELS else CONSUME_FS | DRAIN_FS if model in QUEUE_MODELS else None
    return fs is not None and any(op.f in fs and phase.includes(op) for op in history.ops)


def _freeze(value: Any) -> Any:
    """A hashable stand-in for a JSON value (values unique per key are compared through it)."""
    if value.__class__ is int or value.__class__ is str or value is None:
        return value
    if isinstance(value, list | dict):
        return ("json", json.dumps(value, sort_keys=True))
    return value


def _key(key: Any) -> Any:
    if key.__class__ is str or key is None:
        return key
    return _freeze(key)


class _Findings:
    def __init__(self) -> None:
        self.lost: dict[int, dict[str, Any]] = {}  # write id -> record (the first MAX_REPORTED)
        self.lost_ids: set[int] = set()
        self.lost_all: list[list[Any]] = []  # [key, value or GUID, acked line] of every lost write
        self.never_written: list[dict[str, Any]] = []
        self.duplicates: list[dict[str, Any]] = []
        self.dropped: list[dict[str, Any]] = []
        self.missing_on_node: dict[int, dict[str, Any]] = {}
        self.counts = {"lost": 0, "dropped": 0, "never-written": 0, "duplicate": 0, "missing-on-node": 0}
        self.undetermined: list[str] = []

    def add_list(self, kind: str, target: list[dict[str, Any]], record: dict[str, Any]) -> None:
        self.counts[kind] += 1
        if len(target) < MAX_REPORTED:
            target.append(record)

    def add_lost(self, write: Operation, describe: dict[str, Any], where: dict[str, Any]) -> None:
        if write.id not in self.lost_ids:
            self.lost_ids.add(write.id)
            self.counts["lost"] += 1
            if len(self.lost_all) < LOST_LISTED:
                self.lost_all.append([describe.get("key"), describe.get("value", describe.get("guid")),
                                      (write.complete_index or 0) + 1])
            if len(self.lost) >= MAX_REPORTED:
                return
        record = self.lost.get(write.id)
        if record is None:
            if len(self.lost) >= MAX_REPORTED:
                return
            record = {
                **describe,
                "acked_at": write.ret,
                "acked_line": (write.complete_index or 0) + 1,
                "node": write.node,
                "lsn": None if write.lsn is None else list(write.lsn),
                "missing_on": [],
                "evidence": [],
                "write": write.evidence(),
            }
            self.lost[write.id] = record
        if where.get("node") not in record["missing_on"]:
            record["missing_on"].append(where.get("node"))
        evidence = record["evidence"]
        if (
            evidence
            and evidence[-1].get("read") is not None
            and evidence[-1].get("read") == where.get("read")
        ):
            evidence[-1]["rules"].append(where["rule"])  # the same final read, by a second rule
        elif len(evidence) < 10:
            rule = where["rule"]
            evidence.append({**{k: v for k, v in where.items() if k != "rule"}, "rules": [rule]})


# -- registers --------------------------------------------------------------------------------------


def _written_value(op: Operation) -> tuple[bool, Any]:
    """(writes something?, the value) for a write or cas."""
    if op.f in WRITE_FS:
        return True, op.value
    value = op.value
    if isinstance(value, list | tuple) and len(value) == 2:
        return True, value[1]
    return False, None


def _check_registers(history: History, phase: FinalPhase, findings: _Findings, stats: dict[str, Any]) -> list:
    writers: dict[Any, dict[Any, list[Operation]]] = {}  # key -> frozen value -> writes of it
    ok_writes: dict[Any, list[Operation]] = {}
    reads: list[Operation] = []
    unreadable_cas = 0
    # The loops below run once per operation: _key, _freeze and _written_value are spelled out inline
    # for the common cases (a string key, an int or string value).
    for op in history.ops:
        f = op.f
        if f in READ_FS:
            if op.type == "ok":
                reads.append(op)
            continue
        if f in WRITE_FS:
            value = op.value
        elif f in CAS_FS:
            value = op.value
            if not isinstance(value, list | tuple) or len(value) != 2:
                unreadable_cas += 1
                continue
            value = value[1]
        else:
            continue
        key = op.key
        if key.__class__ is not str:
            key = _key(key)
        if value.__class__ is not int and value.__class__ is not str:
            value = _freeze(value)
        by_value = writers.get(key)
        if by_value is None:
            by_value = writers[key] = {}
        same = by_value.get(value)
        if same is None:
            by_value[value] = [op]
        else:
            same.append(op)
        if op.type == "ok":
            mine = ok_writes.get(key)
            if mine is None:
                ok_writes[key] = [op]
            else:
                mine.append(op)

    final_reads = 0
    never_written_reads: set[int] = set()
    no_writers: dict[Any, list[Operation]] = {}
    for read in reads:
        key, value = read.key, read.output
        by_value = writers.get(key if key.__class__ is str else _key(key), no_writers)
        candidates = by_value.get(
            value if value.__class__ is int or value.__class__ is str else _freeze(value)
        )
        if candidates is None:
            if value is None:
                continue  # the initial value
        elif _invoked_before(candidates, read.ret):
            continue  # the common case, decided without building a report
        if _check_read_value(read, by_value, findings):
            never_written_reads.add(read.id)

    # Per key: ok writes by invoke time, and ok writes with an LSN by completion time with a prefix max.
    by_call: dict[Any, tuple[list[int], list[Operation]]] = {}
    by_ret: dict[Any, tuple[list[int], list[Operation], list[tuple[int, int]]]] = {}
    for key, ops in ok_writes.items():
        ordered = sorted(ops, key=_CALL)
        by_call[key] = ([op.call for op in ordered], ordered)
        with_lsn = sorted([op for op in ops if op.lsn is not None], key=_RET)
        prefix = list(itertools.accumulate([op.lsn for op in with_lsn], max))
        by_ret[key] = ([op.ret for op in with_lsn], with_lsn, prefix)

    keys_read: set[Any] = set()
    for read in phase.select(reads):
        final_reads += 1
        key = _key(read.key)
        keys_read.add(key)
        if read.id in never_written_reads:
            continue
        where: dict[str, Any] | None = None  # built for the first loss only
        # Real-time rule: M is the latest completion of a write that could have written the read value.
        candidates = [
            x
            for x in writers.get(key, {}).get(_freeze(read.output), [])
            if x.type != "fail" and x.call < read.ret
        ]
        latest = max((_POS_INF if x.ret is None else x.ret for x in candidates), default=_NEG_INF)
        calls, ordered = by_call.get(key, ([], []))
        # A write completed before the read's invoke was invoked before it too: only those are scanned.
        begin = bisect.bisect_right(calls, latest)
        for write in ordered[begin : bisect.bisect_left(calls, read.call, lo=begin)]:
            if write.ret < read.call:
                where = where or {"node": read.node, "read": read.evidence()}
                findings.add_lost(
                    write,
                    _describe_write(write),
                    {**where, "rule": "real-time: the value read was written before this write began"},
                )
        # LSN rule.
        if read.lsn is not None and key in by_ret:
            rets, with_lsn, prefix = by_ret[key]
            end = bisect.bisect_left(rets, read.call)
            if end and prefix[end - 1] > read.lsn:
                where = where or {"node": read.node, "read": read.evidence()}
                for write in with_lsn[:end]:
                    if write.lsn > read.lsn:
                        findings.add_lost(
                            write,
                            _describe_write(write),
                            {**where, "rule": f"LSN: the final read observed {list(read.lsn)}"},
                        )
    stats["final_reads"] = final_reads
    stats["keys"] = len(writers)
    stats["keys_with_final_read"] = len(keys_read)
    stats["keys_written_without_final_read"] = len(set(ok_writes) - keys_read)
    stats["ok_writes"] = sum(len(v) for v in ok_writes.values())
    if unreadable_cas:
        stats["cas_without_expected_new"] = unreadable_cas
    return [op for ops in ok_writes.values() for op in ops]


def _invoked_before(writes: list[Operation], ret: int) -> bool:
    """Whether some write of ``writes`` that did not fail was invoked before ``ret``."""
    for write in writes:
        if write.call < ret and write.type != "fail":
            return True
    return False


def _describe_write(write: Operation) -> dict[str, Any]:
    _, value = _written_value(write)
    return {"key": write.key, "value": value, "f": write.f}


def _check_read_value(read: Operation, writers: Mapping[Any, list[Operation]], findings: _Findings) -> bool:
    """Report a read of a value nothing wrote; True if reported."""
    value = read.output
    candidates = writers.get(_freeze(value), [])
    if value is None and not candidates:
        return False  # the initial value
    for x in candidates:
        if x.type != "fail" and x.call < read.ret:
            return False
    live = [x for x in candidates if x.type != "fail"]
    if live:
        reason = "its only writes were invoked after the read completed"
    elif candidates:
        reason = "every write of it failed"
    else:
        reason = "no write or cas of this key wrote it"
    findings.add_list(
        "never-written",
        findings.never_written,
        {
            "key": read.key,
            "value": value,
            "node": read.node,
            "reason": reason,
            "read": read.evidence(),
            "writes": [x.evidence() for x in candidates[:5]],
        },
    )
    return True


# -- queues -----------------------------------------------------------------------------------------


def _guid_of(message: Any) -> Any:
    if isinstance(message, dict):
        return _freeze(message.get("guid"))
    return _freeze(message)


def _put_guid(history: History, op: Operation) -> Any:
    if op.extra is not None and "guid" in op.extra:
        return _freeze(op.extra["guid"])
    return _guid_of(op.value)


def _messages(output: Any) -> list[Any]:
    if output is None:
        return []
    if isinstance(output, list):
        return output
    return [output]


def _check_queues(
    history: History, phase: FinalPhase, findings: _Findings, stats: dict[str, Any], promised: Mapping[str, Any]
) -> list:
    dedup = promised.get("dedup", True) is not False
    redelivering = promised.get("redelivery", "timeout") != "none"
    twice: list[dict[str, Any]] = []
    puts: dict[Any, dict[Any, list[Operation]]] = {}
    ok_puts: list[tuple[Any, Any, Operation]] = []
    deliveries: dict[Any, dict[Any, list[Operation]]] = {}
    confirms: dict[Any, dict[Any, list[Operation]]] = {}
    confirming: set[Any] = set()
    confirmed: dict[Any, set[Any]] = {}  # GUIDs some confirm that did not fail was about
    unknown_confirms: dict[Any, int] = {}  # confirms that did not fail, about a GUID the history omits
    info_consumes = 0
    final_ops: dict[Any, list[Operation]] = {}
    delivered_count = 0
    for op in history.ops:
        queue = _key(op.key)
        if op.f in PUT_FS:
            guid = _put_guid(history, op)
            puts.setdefault(queue, {}).setdefault(guid, []).append(op)
            if op.ok:
                ok_puts.append((queue, guid, op))
        elif op.f in CONSUME_FS or op.f in DRAIN_FS:
            if op.ok:
                for message in _messages(op.output):
                    deliveries.setdefault(queue, {}).setdefault(_guid_of(message), []).append(op)
                    delivered_count += 1
            elif op.type == "info" and op.f in CONSUME_FS:
                info_consumes += 1
            if phase.includes(op):
                final_ops.setdefault(queue, []).append(op)
        elif op.f in CONFIRM_FS:
            confirming.add(queue)
            if op.ok:
                confirms.setdefault(queue, {}).setdefault(_put_guid(history, op), []).append(op)
            if op.type != "fail":
                guid = _put_guid(history, op)
                if guid is None:
                    unknown_confirms[queue] = unknown_confirms.get(queue, 0) + 1
                else:
                    confirmed.setdefault(queue, set()).add(guid)

    # never-written, duplicate and redelivered deliveries.
    redelivered = redeliveries = 0
    for queue, by_guid in deliveries.items():
        for guid, ops in by_guid.items():
            candidates = puts.get(queue, {}).get(guid, [])
            live = [p for p in candidates if p.type != "fail"]
            for delivery in ops:
                if any(p.call < delivery.ret for p in live):
                    continue
                if live:
                    reason = "its puts were invoked only after the delivery completed"
                elif candidates:
                    reason = "every put of it failed"
                else:
                    reason = "no put of this GUID to this queue was invoked"
                findings.add_list(
                    "never-written",
                    findings.never_written,
                    {
                        "key": delivery.key,
                        "guid": guid,
                        "node": delivery.node,
                        "reason": reason,
                        "delivery": delivery.evidence(),
                        "puts": [p.evidence() for p in candidates[:5]],
                    },
                )
            if len(ops) > 1:
                again = _check_duplicate(queue, guid, ops, queue in confirming, confirms, findings,
                                         twice=None if dedup else twice)
                redelivered += again > 0
                redeliveries += again

    # lost: per queue, only where the final drain observed it empty.
    drained = {queue: _drained(ops) for queue, ops in final_ops.items()}
    not_drained: dict[Any, int] = {}
    for queue, guid, put in ok_puts:
        if guid in deliveries.get(queue, {}):
            continue
        if not drained.get(queue, False):
            not_drained[queue] = not_drained.get(queue, 0) + 1
            continue
        findings.add_lost(
            put,
            {"key": put.key, "guid": guid, "f": put.f},
            {
                "node": None,
                "rule": "never delivered, and the final drain observed the queue empty",
                "drain": [op.evidence() for op in final_ops[queue][-3:]],
            },
        )
    for queue in sorted(confirming & {q for q, empty in drained.items() if empty} if redelivering else (),
                        key=repr):
        _check_dropped(
            queue,
            puts.get(queue, {}),
            deliveries.get(queue, {}),
            confirmed.get(queue, set()),
            unknown_confirms.get(queue, 0),
            final_ops[queue],
            findings,
        )
    for queue, count in not_drained.items():
        findings.undetermined.append(
            f"queue {queue!r}: {count} acknowledged puts undelivered and the final drain did not observe "
            "the queue empty"
        )
    stats["ok_puts"] = len(ok_puts)
    stats["deliveries"] = delivered_count
    stats["redelivered"] = redelivered
    stats["redeliveries"] = redeliveries
    stats["info_consumes"] = info_consumes
    stats["queues"] = len(set(puts) | set(deliveries))
    stats["queues_at_least_once"] = len(confirming)
    stats["queues_drained"] = sum(1 for v in drained.values() if v)
    stats["final_consumes"] = sum(len(v) for v in final_ops.values())
    if not dedup:
        stats["enqueued_twice"] = len(twice)
        stats["enqueued_twice_examples"] = twice[:5]
    return [put for _, _, put in ok_puts]


def _check_dropped(
    queue: Any,
    puts: Mapping[Any, list[Operation]],
    deliveries: Mapping[Any, list[Operation]],
    confirmed: set[Any],
    unknown_confirms: int,
    final_ops: list[Operation],
    findings: _Findings,
) -> None:
    """At-least-once, drained queue: messages known to have been in it and never confirmed (module
    docstring), beyond what the confirms of unknown GUID may explain."""
    unconfirmed: list[tuple[Any, Operation, list[Operation]]] = []
    for guid, ops in puts.items():
        if guid in confirmed:
            continue
        acked = [p for p in ops if p.ok]
        delivered = deliveries.get(guid, [])
        if not delivered and (not acked or acked[0].id in findings.lost_ids):
            continue  # never shown to be in the queue, or already reported lost
        if delivered and not any(p.type != "fail" for p in ops):
            continue  # never-written, reported as that
        unconfirmed.append((guid, acked[0] if acked else ops[0], delivered))
    excess = len(unconfirmed) - unknown_confirms
    if excess <= 0:
        return
    rule = "never confirmed, and the final drain observed the queue empty"
    if unknown_confirms:
        rule += f"; {unknown_confirms} confirms of unknown GUID explain at most {unknown_confirms} of these"
    for guid, put, delivered in sorted(unconfirmed, key=lambda u: u[1].call):
        if len(findings.dropped) >= MAX_REPORTED:
            break
        findings.dropped.append(
            {
                "key": put.key,
                "guid": guid,
                "rule": rule,
                "put": put.evidence(),
                "delivered": len(delivered),
                "deliveries": [op.evidence() for op in delivered[:5]],
                "drain": [op.evidence() for op in final_ops[-3:]],
            }
        )
    findings.counts["dropped"] += excess


def _drained(final_ops: list[Operation]) -> bool:
    """Whether the last conclusive final consume/drain of a queue observed it empty."""
    for op in reversed(final_ops):
        if op.ok:
            return op.f in DRAIN_FS or not _messages(op.output)
        if op.type == "fail" and "empty" in (op.error or ""):
            return True
    return False


def _check_duplicate(
    queue: Any,
    guid: Any,
    ops: list[Operation],
    confirming: bool,
    confirms: Mapping[Any, Mapping[Any, list[Operation]]],
    findings: _Findings,
    *,
    twice: list[dict[str, Any]] | None = None,
) -> int:
    """Report the first forbidden repeat delivery of ``guid`` (module docstring); return how many repeat
    deliveries at-least-once allows. Given ``twice`` (a system without de-duplication), the repeat is
    recorded there as enqueued twice instead of reported."""
    ordered = sorted(ops, key=lambda op: op.call)
    guid_confirms = sorted(confirms.get(queue, {}).get(guid, []), key=lambda op: op.ret)
    allowed = 0
    for earlier, later in zip(ordered, ordered[1:], strict=False):
        confirm = None
        if confirming:
            confirm = next((c for c in guid_confirms if c.ret < later.call), None)
            if confirm is None:
                allowed += 1  # redelivery of an unconfirmed message: at-least-once
                continue
        record = {
            "key": later.key,
            "guid": guid,
            "reason": "delivered again after an ok confirm" if confirm else "delivered twice",
            "first": earlier.evidence(),
            "second": later.evidence(),
            "confirm": confirm.evidence() if confirm else None,
        }
        if twice is not None:
            twice.append(record)
        else:
            findings.add_list("duplicate", findings.duplicates, record)
        break
    return allowed


# -- journals ---------------------------------------------------------------------------------------


def _check_journals(
    journals: Mapping[str, list[JournalEvent]], acked: list[Operation], findings: _Findings
) -> dict[str, Any]:
    applied: dict[str, dict[Any, Any]] = {}
    last: dict[str, dict[Any, tuple[int, int]]] = {}
    for node, events in journals.items():
        # Entry (its LSN, or (group, LSN) in a named group: _entry) -> the key its last apply names.
        table = {
            _entry(event.data.get("group"), event.data["lsn"]):
                key if (key := event.data["key"]).__class__ is str else _key(key)
            for event in events
            if event.event == "apply"
        }
        applied[node] = table
        # group -> the largest LSN the node applied in it
        tops: dict[Any, tuple[int, int]] = {}
        for entry in table:
            group, lsn = (None, entry) if entry[0].__class__ is int else entry
            if group not in tops or lsn > tops[group]:
                tops[group] = lsn
        last[node] = tops
    with_lsn = [write for write in acked if write.lsn is not None]
    keys = [key if (key := write.key).__class__ is str else _key(key) for write in with_lsn]
    # (entry, key) -> the nodes lacking it: each node's set difference, kept where it applied a later LSN
    # of the write's group.
    wanted = {(_entry(write.group, write.lsn), key) for write, key in zip(with_lsn, keys, strict=True)}
    lacking: dict[tuple[Any, Any], list[str]] = {}
    for node, table in applied.items():
        tops = last[node]
        if not tops:
            continue  # applied nothing: cannot lack a write
        for entry in wanted.difference(table.items()):
            group, lsn = (None, entry[0]) if entry[0][0].__class__ is int else entry[0]
            top = tops.get(group)
            if top is not None and lsn <= top:
                lacking.setdefault(entry, []).append(node)
    if lacking or findings.lost:
        nodes_of = list(applied)
        for write, key in zip(with_lsn, keys, strict=True):
            record = findings.lost.get(write.id)
            if record is not None:
                record["journals"] = _journal_view(write, key, applied, last)
            missing = lacking.get((_entry(write.group, write.lsn), key))
            if missing:
                findings.counts["missing-on-node"] += 1
                if len(findings.missing_on_node) < MAX_REPORTED:
                    findings.missing_on_node[write.id] = {
                        "key": write.key,
                        "lsn": list(write.lsn),
                        "acked_at": write.ret,
                        "acked_line": (write.complete_index or 0) + 1,
                        "lacking": sorted(missing, key=nodes_of.index),
                        "journals": _journal_view(write, key, applied, last),
                        "write": write.evidence(),
                    }
    # Lost writes without an LSN still get each node's view where the journals tell something.
    return {"acked_with_lsn": len(with_lsn), "journal_nodes": len(journals)}


_ABSENT = object()


def _entry(group: Any, lsn: tuple[int, int]) -> Any:
    """An entry's identity in the journals: its LSN in the single group, ``(group, LSN)`` in a named one
    (an LSN starts with an int, a group's name is a str: the two never collide)."""
    return lsn if group is None else (group, lsn)


def _journal_view(
    write: Operation,
    key: Any,
    applied: Mapping[str, Mapping[Any, Any]],
    last: Mapping[str, Mapping[Any, tuple[int, int]]],
) -> dict[str, list[str]]:
    view: dict[str, list[str]] = {"applied": [], "lacking": [], "behind": []}
    if write.lsn is None:
        return view
    entry = _entry(write.group, write.lsn)
    for node, table in applied.items():
        top = last[node].get(write.group)
        if table.get(entry, _ABSENT) == key:
            view["applied"].append(node)
        elif top is not None and write.lsn <= top:
            view["lacking"].append(node)
        else:
            view["behind"].append(node)
    return view


# -- the checker ------------------------------------------------------------------------------------


def check_durability(
    history: History,
    journals: Mapping[str, list[JournalEvent]] | None = None,
    *,
    model: str | None = None,
    final_after: int | None = None,
    delivery: Mapping[str, Any] | None = None,
) -> Verdict:
    """Committed-data durability for a register or queue history (see the module docstring).

    ``model`` is ``"register"``, ``"cas-register"`` or ``"queue"`` (inferred from the operations when
    ``None``); ``final_after`` (ns) marks the start of the final reads when the history does not;
    ``delivery`` is what a queue system declares (``dedup``, ``redelivery``; module docstring).
    """
    model = model or infer_model(history)
    if model not in REGISTER_MODELS and model not in QUEUE_MODELS:
        return Verdict(
            UNKNOWN, f"durability checks register, cas-register and queue histories, not {model!r}"
        )
    phase = final_phase(history, final_after)
    stats: dict[str, Any] = {"model": model, "final_phase": phase.to_json() if phase else None}
    findings = _Findings()
    never_final = FinalPhase(rule="none", marked=frozenset())
    if model in QUEUE_MODELS:
        acked = _check_queues(history, phase or never_final, findings, stats, delivery or {})
        if delivery:
            stats["delivery"] = dict(delivery)
    else:
        acked = _check_registers(history, phase or never_final, findings, stats)
    if journals:
        stats.update(_check_journals(journals, acked, findings))
    stats["anomalies"] = {kind: n for kind, n in findings.counts.items() if n}

    if any(findings.counts.values()):
        summary = _summary(findings)
        if stats.get("redelivered"):
            summary += (
                f" ({_count(stats['redelivered'], 'message')} also delivered again before a confirm: allowed)"
            )
        summary += _twice(stats)
        return Verdict(False, summary, counterexample=_counterexample(findings), stats=stats)
    if phase is None:
        return Verdict(
            UNKNOWN,
            "durability cannot decide: no final reads (no operation marked final, no final_after time, "
            "no nemesis operation to follow)",
            stats=stats,
        )
    finals = stats.get("final_reads", stats.get("final_consumes", 0))
    if not finals:
        return Verdict(
            UNKNOWN, f"durability cannot decide: no final reads among the {phase.rule}", stats=stats
        )
    if findings.undetermined:
        return Verdict(UNKNOWN, "durability cannot decide: " + "; ".join(findings.undetermined), stats=stats)
    acked_n = len(acked)
    if model in QUEUE_MODELS:
        return Verdict(
            True,
            f"every acknowledged put delivered: {acked_n} acked, {finals} final consumes, "
            f"{_count(stats['redelivered'], 'message')} delivered again before a confirm "
            f"(at-least-once: allowed), nothing never-written{_twice(stats)}",
            stats=stats,
        )
    return Verdict(
        True,
        f"every acknowledged write present: {acked_n} acked, {finals} final reads, nothing never-written",
        stats=stats,
    )


def _twice(stats: Mapping[str, Any]) -> str:
    """The summary's words on messages enqueued twice by a system without de-duplication, if any."""
    n = stats.get("enqueued_twice")
    if not n:
        return ""
    return (f"; {_count(n, 'message')} enqueued twice (delivered again after a confirm: allowed, the system "
            "declares no de-duplication of re-sent puts)")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _summary(findings: _Findings) -> str:
    parts = [f"{n} {kind}" for kind, n in findings.counts.items() if n]
    head = ", ".join(parts)
    if findings.lost:
        record = next(iter(findings.lost.values()))
        what = f"value {record['value']!r}" if "value" in record else f"GUID {record['guid']!r}"
        nodes = [n for n in record["missing_on"] if n is not None]
        journals = record.get("journals", {}).get("lacking", [])
        lacking = sorted(set(nodes) | set(journals))
        on = f", missing on {', '.join(lacking)}" if lacking else ""
        return (
            f"{head}; first lost: {record['f']} of key {record['key']!r} {what} acked at "
            f"{seconds(record['acked_at'])} (history line {record['acked_line']}){on}"
        )
    if findings.missing_on_node:
        record = next(iter(findings.missing_on_node.values()))
        return (
            f"{head}; first: write of key {record['key']!r} at LSN {record['lsn']} acked at "
            f"{seconds(record['acked_at'])} (history line {record['acked_line']}) never applied on "
            f"{', '.join(record['lacking'])}"
        )
    if findings.dropped:
        record = findings.dropped[0]
        return (
            f"{head}; first: GUID {record['guid']!r} on queue {record['key']!r} delivered "
            f"{_count(record['delivered'], 'time')}, never confirmed, and not delivered again: the final drain "
            "found the queue empty"
        )
    if findings.never_written:
        record = findings.never_written[0]
        what = f"value {record['value']!r}" if "value" in record else f"GUID {record['guid']!r}"
        return f"{head}; first: key {record['key']!r} {what}: {record['reason']}"
    record = findings.duplicates[0]
    return f"{head}; first: GUID {record['guid']!r} on queue {record['key']!r} {record['reason']}"


def _counterexample(findings: _Findings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if findings.lost:
        out["lost"] = list(findings.lost.values())[:MAX_REPORTED]
        if len(findings.lost_all) > len(out["lost"]):
            out["lost_all"] = findings.lost_all
    if findings.missing_on_node:
        out["missing_on_node"] = list(findings.missing_on_node.values())
    if findings.never_written:
        out["never_written"] = findings.never_written
    if findings.duplicates:
        out["duplicates"] = findings.duplicates
    if findings.dropped:
        out["dropped"] = findings.dropped
    return out
