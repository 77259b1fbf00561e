"""The log checker: what a replicated log's clients may rely on, judged from the history alone.

A history of the ``log`` workload (``workloads.log``) holds ``append`` operations (invoke ``value`` = a
value unique to the run; ok completion ``[offset, value]``, the offset the log assigned) and ``poll``
operations (invoke ``value`` = the offset to read from, or null when the client did not say; ok
completion ``[[offset, value], ...]``). Offsets are compared only within one key (log); the checker never
assumes where a log starts nor that its offsets are dense: an offset *exists* when anyone saw it, in an
acknowledgement or a poll. Journals are not needed. The anomalies (Jepsen's Kafka test names most of them):

* **lost**: an acknowledged append whose value a node's complete final read of that log does not hold
  (at any offset; an acknowledgement without an offset counts too), acknowledged before that read began.
  A node's final read of a log is
  *complete* when one of its final polls ended ok and empty past every offset that node returned; a log
  no node read completely cannot show losses, and the verdict is then at best unknown;
* **duplicated**: one value at two offsets of a log (acknowledged at one, read at another, or read at two);
* **inconsistent-offsets**: two different values at one offset of one log, by any readers or
  acknowledgements (divergent logs, an offset reused);
* **reordered**: an append acknowledged at an offset lower than one acknowledged before it was invoked
  (offsets must follow real time, as LSNs do);
* **nonmonotonic-poll**: a poll whose records are not in increasing offset order or start below the offset
  it asked for; with no offset asked, a process's poll of a log that starts at or before where its
  previous poll of that log ended;
* **skip**: a poll that jumps over an existing offset: between the offset it asked for and its first
  record, or between two of its records (with no offset asked, between the end of the process's previous
  poll of that log and the start of this one);
* **unstable**: a record read at offset k that a node's complete final read, begun after that read, shows
  with another value, or without anything, at k: consumers saw a record that then vanished (reads beyond
  the commit point). Records of acknowledged appends are left to *lost*, so one loss is reported once;
* **phantom**: a value read that no append of that log attempted, or only appends that failed.

``fail`` appends did not happen, ``info`` appends may have happened or not: neither is required anywhere,
and an ``info`` append's value read anywhere is fine. Final operations are found as the durability
checker finds them (``checkers.durability.final_phase``: marked ``"final": true``, else after a time or
after the last nemesis event).

The verdict: ``False`` with every anomaly class's first records (operations and history lines), ``True``
when none and the losses could be judged, ``"unknown"`` when none was found but losses could not be judged
(no final phase, or acknowledged appends on a log no node read completely at the end).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from checkers.durability import final_phase
from checkers.history import History, Operation
from checkers.verdict import UNKNOWN, Verdict

APPEND = "append"
POLL = "poll"
LOG_FS = frozenset({APPEND, POLL})
KINDS: tuple[str, ...] = (
    "lost", "duplicated", "inconsistent-offsets", "reordered", "nonmonotonic-poll", "skip", "unstable",
    "phantom",
)
"""The anomaly classes, in the order the summary names them."""
MAX_REPORTED = 20
"""Records of one class kept in the counterexample (the stats count them all)."""
MAX_SIGHTINGS = 3
"""Operations kept per value in a record (the first ones)."""
MAX_TIMELINE_POINTS = 600
"""Points of one log drawn in the report's offsets-over-time panel."""


def applies(history: History) -> bool:
    """Whether the history holds any ``append`` or ``poll`` operation (what this checker judges)."""
    return any(op.f in LOG_FS for op in history.ops)


def _int(value: Any) -> bool:
    return value.__class__ is int


def _record(pair: Any) -> tuple[int, Any] | None:
    """``(offset, value)`` of a ``[offset, value]`` pair, or ``None`` when it is not one."""
    if isinstance(pair, list | tuple) and len(pair) == 2 and _int(pair[0]):
        value = pair[1]
        return pair[0], (value if value.__class__ in (int, str) or value is None else repr(value))
    return None


class _Sighting:
    """One place a record was seen: an acknowledgement or a poll (``final``: a final-phase poll)."""

    __slots__ = ("op", "how")

    def __init__(self, op: Operation, how: str) -> None:
        self.op = op
        self.how = how

    def to_json(self, offset: int | None = None) -> dict[str, Any]:
        op = self.op
        out: dict[str, Any] = {"how": self.how, "process": op.process, "node": op.node,
                               "line": (op.complete_index if op.complete_index is not None else op.invoke_index) + 1,
                               "call": op.call, "ret": op.ret}
        if offset is not None:
            out["offset"] = offset
        return out


class _Log:
    """What the history says about one key."""

    def __init__(self) -> None:
        self.attempts: dict[Any, list[Operation]] = {}  # value -> appends of it
        self.acks: list[tuple[int | None, Any, Operation]] = []  # (offset or None, value, ok append)
        self.at: dict[int, dict[Any, list[_Sighting]]] = {}  # offset -> value -> sightings
        self.polls: list[Operation] = []  # ok polls, in invoke order
        self.final: dict[str, list[Operation]] = {}  # node -> its final polls (any type)

    def see(self, offset: int, value: Any, sighting: _Sighting) -> None:
        values = self.at.get(offset)
        if values is None:
            values = self.at[offset] = {}
        seen = values.get(value)
        if seen is None:
            values[value] = [sighting]
        else:
            seen.append(sighting)


class _Findings:
    def __init__(self) -> None:
        self.records: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
        self.counts: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.ops: dict[str, set[int]] = {kind: set() for kind in KINDS}

    def add(self, kind: str, record: dict[str, Any], ops: Iterable[Operation] = ()) -> None:
        self.counts[kind] += 1
        for op in ops:
            self.ops[kind].add(op.id)
        if len(self.records[kind]) < MAX_REPORTED:
            self.records[kind].append(record)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def check_log(history: History, final_after: int | None = None) -> Verdict:
    """Judge the ``append``/``poll`` operations of ``history`` (module docstring); ``final_after`` (ns)
    is the durability checker's rule for finding the final phase when no invoke is marked final."""
    ops = [op for op in history.ops if op.f in LOG_FS]
    if not ops:
        return Verdict(UNKNOWN, "nothing to judge: the history has no append or poll operation")
    phase = final_phase(history, final_after)
    logs: dict[Any, _Log] = {}
    malformed: list[dict[str, Any]] = []
    stats: dict[str, Any] = {"appends": 0, "acknowledged": 0, "acks_without_offset": 0, "polls": 0,
                             "ok_polls": 0, "records_read": 0, "final_polls": 0}
    findings = _Findings()
    for op in ops:
        key = op.key if op.key.__class__ is str else repr(op.key)
        log = logs.get(key)
        if log is None:
            log = logs[key] = _Log()
        final = phase is not None and phase.includes(op)
        if op.f == APPEND:
            stats["appends"] += 1
            value = op.value if op.value.__class__ in (int, str) or op.value is None else repr(op.value)
            log.attempts.setdefault(value, []).append(op)
            if op.type != "ok":
                continue
            stats["acknowledged"] += 1
            pair = _record(op.output)
            if pair is None:
                stats["acks_without_offset"] += 1
                log.acks.append((None, value, op))
                continue
            if pair[1] != value:
                malformed.append({"why": f"append of {value!r} acknowledged with {op.output!r}", "op": op.evidence()})
            log.acks.append((pair[0], value, op))
            log.see(pair[0], value, _Sighting(op, "append acknowledged"))
            continue
        stats["polls"] += 1
        if final:
            stats["final_polls"] += 1
            if op.node is not None:
                log.final.setdefault(op.node, []).append(op)
        if op.type != "ok":
            continue
        stats["ok_polls"] += 1
        output = op.output
        if not isinstance(output, list):
            malformed.append({"why": f"a poll returned {output!r}, not a list of [offset, value]", "op": op.evidence()})
            continue
        how = "final poll" if final else "poll"
        for pair in output:
            record = _record(pair)
            if record is None:
                malformed.append({"why": f"a poll returned {pair!r} among its records", "op": op.evidence()})
                continue
            stats["records_read"] += 1
            log.see(record[0], record[1], _Sighting(op, how))
        log.polls.append(op)

    undetermined: list[str] = []
    complete_reads = 0
    for key in sorted(logs, key=str):
        log = logs[key]
        existing = sorted(log.at)
        _inconsistent(key, log, findings)
        _duplicated(key, log, findings)
        _phantoms(key, log, findings)
        _reordered(key, log, findings)
        _polls(key, log, existing, findings)
        finals = {node: view for node, polls in sorted(log.final.items())
                  if (view := _complete_final_read(polls)) is not None}
        complete_reads += len(finals)
        if not finals:
            if log.acks:
                undetermined.append(str(key))
            continue
        _lost(key, log, finals, findings)
        _unstable(key, log, finals, findings)

    stats["logs"] = len(logs)
    stats["complete_final_reads"] = complete_reads
    stats["anomalies"] = {kind: n for kind, n in findings.counts.items() if n}
    involved = set().union(*findings.ops.values())
    if involved:
        stats["operations_involved"] = len(involved)  # distinct operations the anomalies name
    if malformed:
        stats["malformed"] = len(malformed)
    what = (f"{stats['appends']:,} appends ({stats['acknowledged']:,} acknowledged) and {stats['polls']:,} polls "
            f"over {len(logs)} log{'s' if len(logs) != 1 else ''}")
    if findings.total:
        counterexample = {
            "log_anomalies": {kind: records for kind, records in findings.records.items() if records},
            "counts": {kind: n for kind, n in findings.counts.items() if n},
            "timeline": _timeline(logs, findings),
        }
        if malformed:
            counterexample["malformed"] = malformed[:MAX_REPORTED]
        listed = ", ".join(f"{n:,} {kind}" for kind, n in findings.counts.items() if n)
        first_kind = next(kind for kind in KINDS if findings.records[kind])
        first = findings.records[first_kind][0]
        return Verdict(False, f"{listed} in {what}; first {first_kind}: {first['explanation']}",
                       counterexample, stats)
    if malformed:
        return Verdict(UNKNOWN, f"no anomaly found, but {len(malformed):,} completions could not be read "
                       f"(first: {malformed[0]['why']})", {"malformed": malformed[:MAX_REPORTED]}, stats)
    if phase is None and any(log.acks for log in logs.values()):
        return Verdict(UNKNOWN, f"no anomaly in {what}, but without a final phase lost appends cannot be "
                       "judged", None, stats)
    if undetermined:
        return Verdict(UNKNOWN, f"no anomaly in {what}, but no node's final polls read "
                       f"{_names(undetermined)} to the end, so lost appends there cannot be judged", None, stats)
    return Verdict(True, f"no anomaly in {what}: every acknowledged append is in every complete final read "
                   f"({complete_reads:,}), at one offset; no offset holds two values; polls go forward without "
                   "skipping; nothing read vanished", None, stats)


def _names(keys: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def _line(op: Operation) -> int:
    return (op.complete_index if op.complete_index is not None else op.invoke_index) + 1


def _sightings(seen: Sequence[_Sighting], offset: int | None = None) -> list[dict[str, Any]]:
    return [s.to_json(offset) for s in seen[:MAX_SIGHTINGS]]


def _where(seen: Sequence[_Sighting]) -> str:
    first = seen[0]
    extra = f" and {len(seen) - 1} more" if len(seen) > 1 else ""
    return f"{first.how} (process {first.op.process}, line {_line(first.op)}){extra}"


# -- offsets and values ---------------------------------------------------------------------------------


def _inconsistent(key: Any, log: _Log, findings: _Findings) -> None:
    for offset in sorted(log.at):
        values = log.at[offset]
        if len(values) < 2:
            continue
        shown = list(values.items())
        explanation = f"{key} offset {offset} holds " + " and ".join(
            f"{v!r} ({_where(seen)})" for v, seen in shown[:3])
        findings.add("inconsistent-offsets", {
            "key": key, "offset": offset, "explanation": explanation,
            "values": [{"value": v, "seen": _sightings(seen)} for v, seen in shown],
        }, (s.op for seen in values.values() for s in seen[:MAX_SIGHTINGS]))


def _duplicated(key: Any, log: _Log, findings: _Findings) -> None:
    offsets: dict[Any, list[int]] = {}
    for offset in sorted(log.at):
        for value in log.at[offset]:
            offsets.setdefault(value, []).append(offset)
    for value, where in offsets.items():
        if len(where) < 2:
            continue
        explanation = f"{key} value {value!r} at offsets " + ", ".join(
            f"{o} ({_where(log.at[o][value])})" for o in where[:3])
        findings.add("duplicated", {
            "key": key, "value": value, "offsets": where, "explanation": explanation,
            "seen": [s for o in where for s in _sightings(log.at[o][value], o)],
        }, (s.op for o in where for s in log.at[o][value][:MAX_SIGHTINGS]))


def _phantoms(key: Any, log: _Log, findings: _Findings) -> None:
    for offset in sorted(log.at):
        for value, seen in log.at[offset].items():
            attempts = log.attempts.get(value)
            if attempts and any(op.type != "fail" for op in attempts):
                continue
            why = ("every append of it failed (definitely not appended)" if attempts
                   else "no append of this log attempted it")
            findings.add("phantom", {
                "key": key, "offset": offset, "value": value, "why": why,
                "explanation": f"{key} offset {offset} read {value!r}, but {why}: {_where(seen)}",
                "seen": _sightings(seen, offset),
                "appends": [op.evidence() for op in (attempts or [])[:MAX_SIGHTINGS]],
            }, [s.op for s in seen[:MAX_SIGHTINGS]])


def _reordered(key: Any, log: _Log, findings: _Findings) -> None:
    """Acks in invoke order against the highest offset acknowledged before each was invoked."""
    acks = sorted(((o, v, op) for o, v, op in log.acks if o is not None), key=lambda a: a[2].call)
    by_ret = sorted(acks, key=lambda a: a[2].ret if a[2].ret is not None else a[2].call)
    done = 0
    best: tuple[int, Any, Operation] | None = None
    for offset, value, op in acks:
        while done < len(by_ret) and (by_ret[done][2].ret or 0) < op.call:
            if best is None or by_ret[done][0] > best[0]:
                best = by_ret[done]
            done += 1
        if best is not None and offset < best[0]:
            earlier = best[2]
            findings.add("reordered", {
                "key": key, "offset": offset, "value": value, "earlier_offset": best[0], "earlier_value": best[1],
                "explanation": (f"{key}: append of {value!r} (line {_line(op)}) was acknowledged at offset {offset}, "
                                f"below offset {best[0]} acknowledged (line {_line(earlier)}) before it was invoked"),
                "append": op.evidence(), "earlier": earlier.evidence(),
            }, [op, earlier])


# -- polls ----------------------------------------------------------------------------------------------


def _between(existing: Sequence[int], low: int, high: int) -> list[int]:
    """The existing offsets ``o`` with ``low < o < high`` (``existing`` sorted)."""
    return list(existing[bisect.bisect_right(existing, low):bisect.bisect_left(existing, high)])


def _polls(key: Any, log: _Log, existing: Sequence[int], findings: _Findings) -> None:
    last: dict[Any, tuple[int, Operation]] = {}  # process -> (last offset read, the poll)
    for op in log.polls:
        offsets = [r[0] for pair in op.output if (r := _record(pair)) is not None]
        start = op.value if _int(op.value) else None
        if not offsets:
            continue
        backwards = [(a, b) for a, b in zip(offsets, offsets[1:], strict=False) if b <= a]
        if backwards:
            a, b = backwards[0]
            findings.add("nonmonotonic-poll", {
                "key": key, "poll": op.evidence(), "offsets": [a, b],
                "explanation": f"{key}: a poll (line {_line(op)}) returned offset {b} after offset {a}",
            }, [op])
        elif start is not None and offsets[0] < start:
            findings.add("nonmonotonic-poll", {
                "key": key, "poll": op.evidence(), "offsets": [start, offsets[0]],
                "explanation": f"{key}: a poll from offset {start} (line {_line(op)}) returned offset {offsets[0]}",
            }, [op])
        previous = last.get(op.process)
        if start is None and previous is not None and offsets[0] <= previous[0]:
            findings.add("nonmonotonic-poll", {
                "key": key, "poll": op.evidence(), "previous": previous[1].evidence(),
                "offsets": [previous[0], offsets[0]],
                "explanation": (f"{key}: process {op.process} polled offset {offsets[0]} (line {_line(op)}) after "
                                f"reading up to offset {previous[0]} (line {_line(previous[1])})"),
            }, [op, previous[1]])
        # skips: before the first record, and between records (in offset order, whatever the poll's)
        offsets = sorted(set(offsets))
        if start is not None:
            skipped = _between(existing, start - 1, offsets[0])
            before = f"from offset {start}"
        elif previous is not None:
            skipped = _between(existing, previous[0], offsets[0])
            before = f"after process {op.process}'s previous poll ended at offset {previous[0]} (line {_line(previous[1])})"
        else:
            skipped, before = [], ""
        if skipped:
            findings.add("skip", {
                "key": key, "poll": op.evidence(), "skipped": skipped[:MAX_REPORTED], "first_returned": offsets[0],
                "explanation": (f"{key}: a poll {before} (line {_line(op)}) began at offset {offsets[0]}, skipping "
                                f"existing offset{'s' if len(skipped) > 1 else ''} {_offsets(skipped)}"),
            }, [op])
        inner = [(a, b, gap) for a, b in zip(offsets, offsets[1:], strict=False) if a < b
                 and (gap := _between(existing, a, b))]
        if inner:
            a, b, gap = inner[0]
            findings.add("skip", {
                "key": key, "poll": op.evidence(), "skipped": gap[:MAX_REPORTED], "first_returned": b,
                "explanation": (f"{key}: a poll (line {_line(op)}) returned offset {b} right after {a}, skipping "
                                f"existing offset{'s' if len(gap) > 1 else ''} {_offsets(gap)}"),
            }, [op])
        if previous is None or max(offsets) > previous[0]:
            last[op.process] = (max(offsets), op)


def _offsets(offsets: Sequence[int], limit: int = 5) -> str:
    shown = ", ".join(str(o) for o in offsets[:limit])
    return shown + (f" and {len(offsets) - limit} more" if len(offsets) > limit else "")


# -- the final reads ------------------------------------------------------------------------------------


class _FinalRead:
    """One node's complete final read of one log: offset -> value, and when its first poll was invoked."""

    __slots__ = ("view", "started", "values")

    def __init__(self, view: dict[int, Any], started: int) -> None:
        self.view = view
        self.started = started
        self.values = set(view.values())


def _complete_final_read(polls: Sequence[Operation]) -> _FinalRead | None:
    """What one node's final polls of one log returned, if they read it to the end (an ok empty poll from
    past every offset they returned); ``None`` if they did not."""
    view: dict[int, Any] = {}
    ends: list[Any] = []
    for op in polls:
        if op.type != "ok" or not isinstance(op.output, list):
            continue
        if not op.output:
            ends.append(op.value)
        for pair in op.output:
            record = _record(pair)
            if record is not None:
                view.setdefault(record[0], record[1])
    if not ends:
        return None
    highest = max(view, default=None)
    if any(not _int(start) or highest is None or start > highest for start in ends):
        return _FinalRead(view, min(op.call for op in polls))
    return None


def _lost(key: Any, log: _Log, finals: Mapping[str, _FinalRead], findings: _Findings) -> None:
    """Acknowledged appends a node's complete final read lacks, if acknowledged before that read began
    (an acknowledgement that arrived later may be of a record committed after it)."""
    for offset, value, op in log.acks:
        acked = op.ret if op.ret is not None else op.call
        missing = [node for node, final in finals.items() if value not in final.values and acked < final.started]
        if not missing:
            continue
        where = "without an offset" if offset is None else f"at offset {offset}"
        shown = {node: finals[node].view.get(offset) for node in missing} if offset is not None else {}
        findings.add("lost", {
            "key": key, "value": value, "offset": offset, "missing_on": missing,
            "acked_at": op.ret, "acked_line": _line(op), "node": op.node,
            "final_at_offset": shown,
            "explanation": (f"{key} append of {value!r} acknowledged {where} (line {_line(op)}, by "
                            f"{op.node or '?'}) is missing from the final polls of {', '.join(missing)}"),
            "append": op.evidence(),
        }, [op])


def _unstable(key: Any, log: _Log, finals: Mapping[str, _FinalRead], findings: _Findings) -> None:
    """Records polled that a node's complete final read, begun after the poll completed, shows with
    another value or without anything at their offset. An acknowledged append's record that vanished is
    reported once, as lost."""
    acked = {value for _, value, _ in log.acks}
    for offset in sorted(log.at):
        for value, seen in log.at[offset].items():
            if value in acked:
                continue
            polled = [s for s in seen if s.how != "append acknowledged"]
            if not polled:
                continue
            first_seen = min(s.op.ret if s.op.ret is not None else s.op.call for s in polled)
            gone = {node: final.view.get(offset) for node, final in finals.items()
                    if final.view.get(offset) != value and first_seen < final.started}
            if not gone:
                continue
            first = min(polled, key=lambda s: s.op.ret if s.op.ret is not None else s.op.call)
            after = "; ".join(f"{node}: {'nothing' if now is None else repr(now)}" for node, now in gone.items())
            findings.add("unstable", {
                "key": key, "offset": offset, "value": value, "final_at_offset": gone,
                "read_at": first.op.ret, "read_line": _line(first.op),
                "explanation": (f"{key} offset {offset} was read as {value!r} ({_where(polled)}), but the final "
                                f"polls show at offset {offset} {after}"),
                "seen": _sightings(polled, offset),
            }, [s.op for s in polled[:MAX_SIGHTINGS]])


# -- the report's panel ---------------------------------------------------------------------------------


def _timeline(logs: Mapping[Any, _Log], findings: _Findings) -> list[dict[str, Any]]:
    """For each log with an anomaly (at most three): its acknowledgements and poll records as
    ``[time ns, offset, kind]`` points (kind ``ack``, ``poll``, ``final``), and the anomalies' points
    (``[time, offset, anomaly class]``), for the report's offsets-over-time panel."""
    flagged: dict[Any, list[list[Any]]] = {}
    for kind, records in findings.records.items():
        for record in records:
            key = record.get("key")
            marks = flagged.setdefault(key, [])
            for t, offset in _record_points(record):
                marks.append([t, offset, kind])
    out = []
    for key in list(flagged)[:3]:
        log = logs.get(key)
        if log is None:
            continue
        points: list[list[Any]] = []
        for offset, values in log.at.items():
            for seen in values.values():
                for s in seen:
                    t = s.op.ret if s.op.ret is not None else s.op.call
                    kind = "ack" if s.how == "append acknowledged" else "final" if s.how == "final poll" else "poll"
                    points.append([t, offset, kind])
        points.sort()
        if len(points) > MAX_TIMELINE_POINTS:
            step = len(points) / MAX_TIMELINE_POINTS
            points = [points[int(i * step)] for i in range(MAX_TIMELINE_POINTS)]
        out.append({"key": key, "points": points, "anomalies": flagged[key][:MAX_REPORTED * 2]})
    return out


def _record_points(record: Mapping[str, Any]) -> list[tuple[int, int]]:
    """Where one anomaly record shows on the offsets-over-time panel."""
    points = []
    offset = record.get("offset")
    for name in ("append", "poll", "earlier", "previous"):
        op = record.get(name)
        if isinstance(op, Mapping):
            t = op.get("ret") if op.get("ret") is not None else op.get("call")
            at = offset if _int(offset) else record.get("first_returned")
            if _int(t) and _int(at):
                points.append((t, at))
    for name in ("seen",):
        for s in record.get(name) or []:
            t = s.get("ret") if s.get("ret") is not None else s.get("call")
            at = s.get("offset", offset)
            if _int(t) and _int(at):
                points.append((t, at))
    for value in record.get("values") or []:
        for s in value.get("seen") or []:
            t = s.get("ret") if s.get("ret") is not None else s.get("call")
            if _int(t) and _int(offset):
                points.append((t, offset))
    return points[:MAX_SIGHTINGS * 2]
