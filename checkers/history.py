"""Loading and validating histories and node journals (FORMATS.md) into typed operations.

A history is a sequence of events; each client operation is an ``invoke`` paired with its completion
(``ok``, ``fail`` or ``info``). Malformed input is rejected with the file, the line number and the
reason; nothing is silently skipped. The rules are Jepsen's:

* a process has at most one operation outstanding, and its completion repeats ``f`` and ``key``;
* after an ``info`` completion a client process never invokes again (the client continues under a new
  process id); the nemesis is exempt, since its ``info`` means "could not be applied", not "unknown";
* an invoke that never completed (the controller stopped first) is indeterminate, exactly like ``info``.

Semantics that the checkers rely on: an ``ok`` operation happened between its invoke and its completion;
a ``fail`` operation did not happen; an ``info`` operation may have happened at any time after its
invoke, or never, so it has no return time (``ret is None``).
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EVENT_TYPES = ("invoke", "ok", "fail", "info")
COMPLETION_TYPES = ("ok", "fail", "info")
NEMESIS = "nemesis"
# Operations whose completion value is what they observed, never what they asked for.
READ_LIKE = frozenset({"read", "get", "consume", "status"})
REQUIRED_EVENT_FIELDS = ("index", "time", "process", "type", "f")
REQUIRED_JOURNAL_FIELDS = ("node", "seq", "wall", "event")
# Fields that particular journal events must carry (FORMATS.md: checkers rely on `role` and `apply`).
JOURNAL_EVENT_FIELDS = {"role": ("role", "term", "leader"), "apply": ("lsn", "key", "op")}


class HistoryError(ValueError):
    """Malformed history or journal input: names the file, the line (1-based) and the reason."""

    def __init__(self, source: str, line: int | None, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True, slots=True)
class Event:
    """One line of ``history.jsonl``."""

    index: int
    time: int
    process: int | str
    type: str
    f: str
    key: Any
    value: Any
    node: str | None = None
    lsn: tuple[int, int] | None = None
    error: str | None = None
    line: int = 0
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Operation:
    """An invoke paired with its completion.

    ``value`` is what was asked (the write's value, ``[expected, new]`` for a cas, ``None`` for a read);
    ``output`` is what the completion reported (what a read returned), ``None`` unless ``ok``.
    ``ret`` is ``None`` for ``info`` operations: they may take effect at any time after ``call``.
    """

    id: int
    process: int | str
    f: str
    key: Any
    value: Any
    output: Any
    type: str
    call: int
    ret: int | None
    invoke_index: int
    complete_index: int | None
    node: str | None = None
    lsn: tuple[int, int] | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.type == "ok"

    def evidence(self) -> dict[str, Any]:
        """:meth:`to_json` plus the 1-based lines of the invoke and the completion in ``history.jsonl``
        (``index`` is the 0-based line number, a rule :func:`parse_events` enforces)."""
        out = self.to_json()
        out["invoke_line"] = self.invoke_index + 1
        out["complete_line"] = None if self.complete_index is None else self.complete_index + 1
        return out

    def to_json(self) -> dict[str, Any]:
        """A compact description for counterexamples."""
        out: dict[str, Any] = {
            "id": self.id,
            "process": self.process,
            "type": self.type,
            "f": self.f,
            "key": self.key,
            "value": self.value,
            "output": self.output,
            "call": self.call,
            "ret": self.ret,
            "invoke_index": self.invoke_index,
            "complete_index": self.complete_index,
        }
        if self.node is not None:
            out["node"] = self.node
        if self.lsn is not None:
            out["lsn"] = list(self.lsn)
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class History:
    """A validated history: its events, its client operations and its nemesis operations."""

    source: str
    events: tuple[Event, ...]
    ops: tuple[Operation, ...]
    nemesis: tuple[Operation, ...]

    def by_key(self) -> dict[Any, list[Operation]]:
        """Client operations grouped by key, each group in invoke order (P-compositionality)."""
        groups: dict[Any, list[Operation]] = {}
        for op in self.ops:
            groups.setdefault(_hashable(op.key), []).append(op)
        return groups


@dataclass(frozen=True, slots=True)
class JournalEvent:
    """One line of a node's ``journal.jsonl``. ``data`` holds the event's own fields."""

    node: str
    seq: int
    wall: float
    event: str
    data: dict[str, Any]
    line: int

    def to_json(self) -> dict[str, Any]:
        """The event as journalled, plus its 1-based line, for counterexamples."""
        out: dict[str, Any] = {"node": self.node, "seq": self.seq, "wall": self.wall, "event": self.event}
        out.update(self.data)
        if isinstance(out.get("lsn"), tuple):
            out["lsn"] = list(out["lsn"])
        out["line"] = self.line
        return out


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def _lsn(value: Any, source: str, line: int) -> tuple[int, int] | None:
    if value is None:
        return None
    if (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in value)
    ):
        return (value[0], value[1])
    raise HistoryError(source, line, f"lsn must be [term, seq] of two integers, not {value!r}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json_object(text: str, required: Sequence[str], source: str, number: int) -> dict[str, Any]:
    """Line ``number`` of ``source`` as a JSON object holding the ``required`` fields (FORMATS.md: one
    object per line, history and journal alike); else a ``HistoryError`` naming what is wrong."""
    if not text.strip():
        raise HistoryError(source, number, "empty line (every line must be one JSON object)")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HistoryError(source, number, f"bad JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(raw, dict):
        raise HistoryError(source, number, f"expected a JSON object, got {type(raw).__name__}")
    missing = [name for name in required if name not in raw]
    if missing:
        raise HistoryError(source, number, f"missing field {', '.join(repr(m) for m in missing)}")
    return raw


def parse_events(lines: Iterable[str], source: str = "history.jsonl") -> Iterator[Event]:
    """Parse history lines into events, checking each line on its own (JSON, fields, types, order)."""
    last_time = None
    for number, text in enumerate(lines, start=1):
        expected_index = number - 1
        raw = _json_object(text, REQUIRED_EVENT_FIELDS, source, number)
        index, time, process, kind, f = (raw[name] for name in REQUIRED_EVENT_FIELDS)
        if not _is_int(index) or index != expected_index:
            raise HistoryError(source, number, f"index is {index!r}, expected {expected_index} (file order)")
        if not _is_int(time) or time < 0:
            raise HistoryError(source, number, f"time must be a non-negative integer (ns), not {time!r}")
        if last_time is not None and time < last_time:
            raise HistoryError(source, number, f"time goes backwards ({time} after {last_time})")
        last_time = time
        if not (_is_int(process) or process == NEMESIS):
            raise HistoryError(source, number, f"process must be an integer or 'nemesis', not {process!r}")
        if kind not in EVENT_TYPES:
            raise HistoryError(source, number, f"type must be one of {', '.join(EVENT_TYPES)}, not {kind!r}")
        if not isinstance(f, str) or not f:
            raise HistoryError(source, number, f"f must be a non-empty string, not {f!r}")
        node = raw.get("node")
        if node is not None and not isinstance(node, str):
            raise HistoryError(source, number, f"node must be a string, not {node!r}")
        error = raw.get("error")
        if error is not None and not isinstance(error, str):
            error = json.dumps(error)
        yield Event(
            index=index,
            time=time,
            process=process,
            type=kind,
            f=f,
            key=raw.get("key"),
            value=raw.get("value"),
            node=node,
            lsn=_lsn(raw.get("lsn"), source, number),
            error=error,
            line=number,
            raw=raw,
        )


def pair_operations(
    events: Iterable[Event], source: str = "history.jsonl"
) -> tuple[list[Operation], list[Operation]]:
    """Pair invokes with completions; return (client operations, nemesis operations) in invoke order."""
    outstanding: dict[int | str, Event] = {}
    crashed: dict[int | str, int] = {}  # process -> line of its info completion
    done: dict[int, Operation] = {}  # invoke index -> operation
    invokes: list[Event] = []
    for event in events:
        process = event.process
        if event.type == "invoke":
            if process in outstanding:
                first = outstanding[process]
                raise HistoryError(
                    source,
                    event.line,
                    f"process {process!r} invokes again while its {first.f} from line {first.line} "
                    "is still outstanding",
                )
            if process in crashed:
                raise HistoryError(
                    source,
                    event.line,
                    f"process {process!r} invokes after its info completion on line {crashed[process]}; "
                    "after info a client must continue under a new process id",
                )
            outstanding[process] = event
            invokes.append(event)
            continue
        invoke = outstanding.pop(process, None)
        if invoke is None:
            raise HistoryError(
                source, event.line, f"{event.type} completion for process {process!r} without an invoke"
            )
        if event.f != invoke.f:
            raise HistoryError(
                source,
                event.line,
                f"completion f {event.f!r} does not match its invoke's {invoke.f!r} (line {invoke.line})",
            )
        if _hashable(event.key) != _hashable(invoke.key):
            raise HistoryError(
                source,
                event.line,
                f"completion key {event.key!r} does not match its invoke's {invoke.key!r} (line {invoke.line})",
            )
        if event.type == "info" and process != NEMESIS:
            crashed[process] = event.line
        done[invoke.index] = _operation(invoke, event)
    client: list[Operation] = []
    nemesis: list[Operation] = []
    for invoke in invokes:
        op = done.get(invoke.index) or _operation(invoke, None)
        target = nemesis if invoke.process == NEMESIS else client
        target.append(_renumber(op, len(target)))
    return client, nemesis


def _operation(invoke: Event, completion: Event | None) -> Operation:
    kind = completion.type if completion is not None else "info"
    value = invoke.value
    if value is None and completion is not None and kind == "ok" and invoke.f not in READ_LIKE:
        # Some recorders put a write's value only on its completion.
        value = completion.value
    output = completion.value if completion is not None and kind == "ok" else None
    return Operation(
        id=0,
        process=invoke.process,
        f=invoke.f,
        key=invoke.key,
        value=value,
        output=output,
        type=kind,
        call=invoke.time,
        ret=completion.time if completion is not None and kind != "info" else None,
        invoke_index=invoke.index,
        complete_index=completion.index if completion is not None else None,
        node=(completion.node if completion is not None and completion.node else invoke.node),
        lsn=completion.lsn if completion is not None else None,
        error=(
            completion.error
            if completion is not None
            else "no completion: the history ended with this operation outstanding"
        ),
    )


def _renumber(op: Operation, new_id: int) -> Operation:
    return Operation(
        id=new_id,
        process=op.process,
        f=op.f,
        key=op.key,
        value=op.value,
        output=op.output,
        type=op.type,
        call=op.call,
        ret=op.ret,
        invoke_index=op.invoke_index,
        complete_index=op.complete_index,
        node=op.node,
        lsn=op.lsn,
        error=op.error,
    )


def parse_history(lines: Iterable[str], source: str = "history.jsonl") -> History:
    """Validate history lines and pair them into operations."""
    # Parsing allocates millions of small objects that live as long as the history; the cyclic garbage
    # collector would rescan them over and over (about 3x the parse time at 1M operations) for nothing.
    collecting = gc.isenabled()
    gc.disable()
    try:
        events = tuple(parse_events(lines, source))
        client, nemesis = pair_operations(events, source)
    finally:
        if collecting:
            gc.enable()
    return History(source=source, events=events, ops=tuple(client), nemesis=tuple(nemesis))


def _lines(path: Path) -> list[str]:
    try:
        with path.open("r", encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise HistoryError(str(path), None, "no such file") from None
    except UnicodeDecodeError as exc:
        raise HistoryError(str(path), None, f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def load_history(path: str | os.PathLike[str]) -> History:
    """Read and validate a ``history.jsonl`` file."""
    path = Path(path)
    return parse_history(_lines(path), str(path))


def parse_journal(lines: Iterable[str], source: str = "journal.jsonl") -> list[JournalEvent]:
    """Validate one node's journal lines: JSON objects, required fields, one node, ``seq`` 0, 1, 2, ..."""
    events: list[JournalEvent] = []
    node: str | None = None
    for number, text in enumerate(lines, start=1):
        raw = _json_object(text, REQUIRED_JOURNAL_FIELDS, source, number)
        if not isinstance(raw["node"], str):
            raise HistoryError(source, number, f"node must be a string, not {raw['node']!r}")
        if node is None:
            node = raw["node"]
        elif raw["node"] != node:
            raise HistoryError(source, number, f"node {raw['node']!r} in the journal of node {node!r}")
        seq = raw["seq"]
        expected = events[-1].seq + 1 if events else 0
        if not _is_int(seq) or seq != expected:
            raise HistoryError(source, number, f"seq is {seq!r}, expected {expected}")
        wall = raw["wall"]
        if not isinstance(wall, int | float) or isinstance(wall, bool):
            raise HistoryError(source, number, f"wall must be a number, not {wall!r}")
        event = raw["event"]
        if not isinstance(event, str) or not event:
            raise HistoryError(source, number, f"event must be a non-empty string, not {event!r}")
        needed = [name for name in JOURNAL_EVENT_FIELDS.get(event, ()) if name not in raw]
        if needed:
            raise HistoryError(
                source, number, f"{event} event missing field {', '.join(repr(n) for n in needed)}"
            )
        data = {k: v for k, v in raw.items() if k not in REQUIRED_JOURNAL_FIELDS}
        if "lsn" in data:
            data["lsn"] = _lsn(data["lsn"], source, number)
        if event == "apply" and data["lsn"] is None:
            raise HistoryError(source, number, "apply event lsn must be [term, seq], not null")
        if event == "role":
            if not _is_int(data["term"]):
                raise HistoryError(source, number, f"role event term must be an integer, not {data['term']!r}")
            if not isinstance(data["role"], str):
                raise HistoryError(source, number, f"role event role must be a string, not {data['role']!r}")
        events.append(JournalEvent(node=node, seq=seq, wall=float(wall), event=event, data=data, line=number))
    return events


def load_journal(path: str | os.PathLike[str]) -> list[JournalEvent]:
    """Read and validate one node's ``journal.jsonl``."""
    path = Path(path)
    return parse_journal(_lines(path), str(path))


def load_journals(directory: str | os.PathLike[str]) -> dict[str, list[JournalEvent]]:
    """Read every ``<node>/journal.jsonl`` under ``directory`` (a run's ``nodes/`` or the run itself).

    Returns a mapping from the node id written in each journal to its events, ordered by node id. A
    journal's ``node`` field wins over its directory name; two directories claiming one node is an error.
    """
    directory = Path(directory)
    if (directory / "nodes").is_dir():
        directory = directory / "nodes"
    if not directory.is_dir():
        raise HistoryError(str(directory), None, "no such directory of node journals")
    journals: dict[str, list[JournalEvent]] = {}
    for path in sorted(directory.glob("*/journal.jsonl")):
        events = load_journal(path)
        node = events[0].node if events else path.parent.name
        if node in journals:
            raise HistoryError(str(path), None, f"a second journal for node {node!r}")
        journals[node] = events
    return dict(sorted(journals.items()))
