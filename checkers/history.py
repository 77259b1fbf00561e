"""Loading and validating histories and node journals (FORMATS.md) into typed operations.

A history is a sequence of events; each client operation is an ``invoke`` paired with its completion
(``ok``, ``fail`` or ``info``). Malformed input is rejected with the file, the line number and the
reason; nothing is silently skipped. The rules are Jepsen's:

* a process has at most one operation outstanding, and its completion repeats ``f`` and ``key``;
* after an ``info`` completion a client process never invokes again (the client continues under a new
  process id); the nemesis is exempt, since its ``info`` means "could not be applied", not "unknown";
* an invoke that never completed (the controller stopped first) is indeterminate, exactly like ``info``;
* a nemesis ``info`` event with no nemesis operation outstanding starts one (Jepsen writes a nemesis
  operation as two ``info`` events, or as one lone event); it is paired with the next nemesis event of
  the same ``f``, and stands alone otherwise.

Semantics that the checkers rely on: an ``ok`` operation happened between its invoke and its completion;
a ``fail`` operation did not happen; an ``info`` operation may have happened at any time after its
invoke, or never, so it has no return time (``ret is None``).

**Real-time order is the file order.** ``index`` numbers the lines; ``time`` (ns) normally grows with
it, and then an operation's ``call``/``ret`` are its invoke's and completion's times (equal times are
concurrent). Where ``time`` goes backwards (Jepsen's times come from several threads) the history is
not refused: a warning names the first such line, and every operation's ``call``/``ret`` become the
indexes of its invoke and completion, so every checker orders by the file, as Jepsen does.

Loading streams: one line is decoded at a time (msgspec's JSON decoder, into a typed struct where the
line fits FORMATS.md's fields, else into a plain object), and with ``keep_events=False`` only the paired
operations are kept, which is what the checkers need: column by column (:class:`OperationTable`: times and
indexes in arrays, one string per distinct key and name), from which :class:`Operation` objects are built
(a shard's, or all), or the light :class:`OperationRow` the linearizability search takes. A history with
no client operation has nothing to judge: the checkers answer ``unknown`` for it (``checkers.registry``).
"""

from __future__ import annotations

import gc
import os
import time as _time
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from checkers.source import NEMESIS, HistoryError, LoadTimeout, bounded_lines, open_history

EVENT_TYPES = ("invoke", "ok", "fail", "info")
COMPLETION_TYPES = ("ok", "fail", "info")
# Operations whose completion value is what they observed, never what they asked for.
READ_LIKE = frozenset({"read", "get", "consume", "dequeue", "status", "poll"})
REQUIRED_EVENT_FIELDS = ("index", "time", "process", "type", "f")
# Every field FORMATS.md defines for an event; any other field of an invoke is kept in Operation.extra.
EVENT_FIELDS = frozenset((*REQUIRED_EVENT_FIELDS, "key", "value", "node", "lsn", "error"))
REQUIRED_JOURNAL_FIELDS = ("node", "seq", "wall", "event")
# Fields that particular journal events must carry (FORMATS.md: checkers rely on `role` and `apply`).
JOURNAL_EVENT_FIELDS = {"role": ("role", "term", "leader"), "apply": ("lsn", "key", "op")}
# History formats :func:`load_history` reads; "auto" picks by extension (``.edn``: edn, else jsonl).
FORMATS = ("auto", "jsonl", "edn", "jepsen-json")
_DEADLINE_EVERY = 1 << 12  # lines between two looks at the clock while loading
_TYPES = {kind: kind for kind in EVENT_TYPES}


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


class Operation(msgspec.Struct, frozen=True, gc=False, eq=False):
    """An invoke paired with its completion.

    ``value`` is what was asked (the write's value, ``[expected, new]`` for a cas, ``None`` for a read);
    ``output`` is what the completion reported (what a read returned), ``None`` unless ``ok``.
    ``ret`` is ``None`` for ``info`` operations: they may take effect at any time after ``call``.
    ``extra`` holds the invoke's fields beyond FORMATS.md's (``final``, a queue put's ``guid``, ...), or
    ``None`` when it has none. ``group`` is the completion's ``group`` (FORMATS.md: the shard, partition
    or queue whose leader served it and whose ``lsn`` that is), ``None`` for the system's single group.

    Immutable, and made in C (a msgspec struct outside the cyclic collector): a big history holds millions,
    and the frozen dataclass it was cost eight to twelve times as much to make. Two operations are equal, and hash
    alike, when every field but ``extra`` is (``extra`` is not part of what happened).
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
    extra: dict[str, Any] | None = None  # not part of what happened: not compared
    group: str | None = None

    def _happened(self) -> tuple[Any, ...]:
        return (self.id, self.process, self.f, self.key, self.value, self.output, self.type, self.call, self.ret,
                self.invoke_index, self.complete_index, self.node, self.lsn, self.error, self.group)  # fmt: skip

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._happened() == other._happened()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._happened())

    @property
    def ok(self) -> bool:
        return self.type == "ok"

    def evidence(self) -> dict[str, Any]:
        """:meth:`to_json` plus the 1-based lines of the invoke and the completion in ``history.jsonl``
        (``index`` is the 0-based line number, a rule the loader enforces)."""
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
        if self.group is not None:
            out["group"] = self.group
        return out


@dataclass(frozen=True)
class History:
    """A validated history: its client operations and nemesis operations, in invoke order, and its
    events (empty when loaded with ``keep_events=False``). ``warnings`` are things a person should know
    that did not stop the load (time going backwards)."""

    source: str
    events: tuple[Event, ...]
    ops: tuple[Operation, ...]
    nemesis: tuple[Operation, ...]
    warnings: tuple[str, ...] = ()
    # Loaded as one shard (``build_history(shard=...)``): ``ops`` holds that shard's operations and every
    # status poll; ``seen`` tells what the whole file holds ("lsn", "final": some operation has one).
    shard: tuple[int, int] | None = None
    seen: frozenset[str] = frozenset()
    file_ops: int = 0  # client operations in the whole file, status polls aside (all shards)
    span: tuple[int, int] | None = None  # the times of the file's first and last lines (None: no lines)

    def by_key(self) -> dict[Any, list[Operation]]:
        """Client operations grouped by key, each group in invoke order (P-compositionality)."""
        groups: dict[Any, list[Operation]] = {}
        for op in self.ops:
            groups.setdefault(_hashable(op.key), []).append(op)
        return groups


class JournalEvent(msgspec.Struct, frozen=True, gc=False):
    """One line of a node's ``journal.jsonl``. ``data`` holds the event's own fields.

    A frozen struct (made in C: a run's journals hold several events per operation, and a frozen
    dataclass cost eight times as much to make), outside the cyclic collector: an event refers to its
    fields, which never refer back to it."""

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


_DECODER = msgspec.json.Decoder()


def seconds(ns: int | None) -> str:
    """A history time (nanoseconds since the test started) as a person reads it: ``t=14.327 s``."""
    return "t=?" if ns is None else f"t={ns / 1e9:.3f} s"


def _decode(text: str | bytes, source: str, number: int) -> dict[str, Any]:
    """Line ``number`` of ``source`` as a JSON object (FORMATS.md: one object per line)."""
    try:
        raw = _DECODER.decode(text)
    except RecursionError:
        raise HistoryError(source, number, "a value nested too deeply to decode (no history needs that depth)") from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        if not text.strip():
            raise HistoryError(source, number, "empty line (every line must be one JSON object)") from None
        if isinstance(text, bytes):
            try:
                text.decode("utf-8")
            except UnicodeDecodeError as bad:
                raise HistoryError(source, number, f"not UTF-8: {bad.reason} at byte {bad.start}") from None
        raise HistoryError(source, number, f"bad JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise HistoryError(source, number, f"expected a JSON object, got {_json_type(raw)}")
    return raw


def _json_type(value: Any) -> str:
    return {list: "list", str: "str", int: "int", float: "float", bool: "bool"}.get(
        type(value), type(value).__name__
    )


def _json_object(text: str | bytes, required: Sequence[str], source: str, number: int) -> dict[str, Any]:
    """Line ``number`` as a JSON object holding the ``required`` fields, else a ``HistoryError``."""
    raw = _decode(text, source, number)
    missing = [name for name in required if name not in raw]
    if missing:
        raise HistoryError(source, number, f"missing field {', '.join(repr(m) for m in missing)}")
    return raw


def build_history(
    raws: Iterable[dict[str, Any]] | Iterable[str | bytes],
    source: str = "history.jsonl",
    *,
    keep_events: bool = True,
    deadline: float | None = None,
    clock: Callable[[], float] = _time.monotonic,
    decoded: bool = True,
    shard: tuple[int, int] | None = None,
) -> History:
    """Validate events (one JSON object per line, in file order) and pair them into operations.

    ``shard=(i, n)`` keeps only the client operations whose key is in shard ``i`` of ``n``
    (:func:`key_shard`; every line is still validated and the operations keep their ids): how the
    linearizability workers each read their share of a file.

    ``raws`` are decoded objects, or with ``decoded=False`` the JSON lines themselves (decoded here,
    one at a time). ``keep_events=False`` keeps only the operations (the low-memory form every checker
    can use). ``deadline`` (on ``clock``) raises :class:`LoadTimeout` when passed while reading.
    """
    with no_cyclic_gc():
        return _build(raws, source, keep_events, deadline, clock, decoded).history(shard)


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """No cyclic garbage collection while the block runs. Reading and checking a run makes millions of
    long-lived small objects and no cycles worth collecting: the collector would rescan them again and
    again for nothing (measured: a quarter of ingesting a 10,000-operation run, and almost half of the
    run-level checkers on a 200,000-operation one). Reference counting still frees everything; the
    collector runs again after the block, as it did before it."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


_Invoke = tuple  # a nemesis invoke: (index, time, f, key, value, node, extra, line, id, process)


_ABSENT: Any = msgspec.UNSET  # a field the line does not have


class _Line(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One history line as the fast path decodes it: only FORMATS.md's fields, the required ones with
    their types checked by the decoder. A line this does not fit (another field, a wrong type, bad JSON)
    is decoded again as a plain object, and the checks below give the reason or keep the extra fields."""

    index: int
    time: int
    process: int | str
    type: str
    f: str
    key: Any = _ABSENT
    value: Any = _ABSENT
    node: Any = _ABSENT
    lsn: Any = _ABSENT
    error: Any = _ABSENT
    group: Any = _ABSENT  # a completion's group; on an invoke an extra field, kept in Operation.extra


_LINE_DECODER = msgspec.json.Decoder(_Line)
_UNSET = -1  # a missing return time or completion index in an OperationTable column
# Event types in OperationTable.type: 0 while the invoke is outstanding (no completion: an info op).
_OUTSTANDING, _OK, _FAIL, _INFO = 0, 1, 2, 3
_KIND_CODE = {"ok": _OK, "fail": _FAIL, "info": _INFO}
_CODE_KIND = ("info", "ok", "fail", "info")
TYPE_OF_CODE = _CODE_KIND
"""An :class:`OperationTable` ``type`` code -> its operation's ``type``: 0 (outstanding: no completion)
and 3 are ``info``, 1 ``ok``, 2 ``fail``; an operation has a ``ret`` (and, ``ok``, an ``output``) only
with 1 or 2."""


class OperationTable:
    """A whole history file validated and paired, its client operations kept column by column (times
    and indexes in ``array``s, no object per operation): what :func:`load_operations` returns, and what
    the linearizability workers share after a fork (``checkers.judge``) without copying, each building
    :class:`Operation` objects only for its own keys (:meth:`operations`, :meth:`history`)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.process: list[int] = []
        self.f: list[str] = []
        self.key: list[Any] = []
        self.value: list[Any] = []  # the invoke's
        self.output: list[Any] = []  # an ok completion's value
        self.type = bytearray()  # _OUTSTANDING, _OK, _FAIL, _INFO
        self.call = array("q")
        self.ret = array("q")  # the completion's time (_UNSET: none yet)
        self.invoke_index = array("q")
        self.complete_index = array("q")  # _UNSET: none
        # By op id, only where one is set: (invoke's node, extra, completion's node, lsn, error, group).
        self.rare: dict[int, list[Any]] = {}
        self.events: list[Event] = []
        self.nemesis: list[Operation] = []
        self.warnings: list[str] = []
        self.ordered = True
        self.seen: set[str] = set()
        self.statuses = 0  # status polls among the client operations
        self.span: tuple[int, int] | None = None

    def __len__(self) -> int:
        return len(self.f)

    def operations(
        self, shard: tuple[int, int] | None = None, *, statuses: bool = True, rows: bool = False
    ) -> list[Operation]:
        """The client operations in invoke order (ids kept); with ``shard=(i, n)`` only those whose key
        is in shard ``i`` of ``n`` (:func:`key_shard`), and every status poll unless ``statuses`` is
        false. ``rows``: as :class:`OperationRow` objects (the search's own)."""
        mine, parts = shard if shard is not None else (0, 1)
        if parts == 1 and statuses:
            return self._materialize(range(len(self)), rows)
        shards: dict[Any, bool] = {}
        chosen = []
        keep_op = chosen.append
        for i, (name, k) in enumerate(zip(self.f, self.key, strict=True)):
            if name == STATUS_F:
                if statuses:
                    keep_op(i)
                continue
            if parts > 1:
                hashable = k if k.__class__ is str else _hashable_key(k)
                keep = shards.get(hashable)
                if keep is None:
                    keep = shards[hashable] = key_shard(k, parts) == mine
                if not keep:
                    continue
            keep_op(i)
        return self._materialize(chosen, rows)

    def sparse_fields(self) -> Iterator[tuple[int, str | None, tuple[int, int] | None, str | None]]:
        """``(id, node, lsn, error)`` of every client operation whose :class:`Operation` has one of these
        set, as :meth:`operations` makes it (an outstanding operation's error says it had no completion),
        in no particular order; every other operation has none of the three. For a reader of the table's
        columns that wants these fields without an object per operation."""
        types, rare = self.type, self.rare
        for i, (i_node, _, node, lsn, error, _) in rare.items():
            if types[i] == _OUTSTANDING:
                yield i, i_node, lsn, _NO_COMPLETION
            else:
                yield i, node or i_node, lsn, error
        if _OUTSTANDING in types:  # (a scan in C)
            for i in (i for i, code in enumerate(types) if code == _OUTSTANDING and i not in rare):
                yield i, None, None, _NO_COMPLETION

    def operation(self, i: int) -> Operation:
        """Client operation ``i`` (its id)."""
        return self._materialize((i,), False)[0]

    def _materialize(self, chosen: Iterable[int], rows: bool) -> list[Operation]:
        out: list[Any] = []
        append = out.append
        process, f, key, value, output, types = self.process, self.f, self.key, self.value, self.output, self.type
        call, ret, invoke_index, complete_index, rare = (
            self.call, self.ret, self.invoke_index, self.complete_index, self.rare,
        )
        ordered = self.ordered
        kinds = _CODE_KIND
        new = Operation
        row = OperationRow
        for i in chosen:
            code = types[i]
            r = ret[i] if code == _OK or code == _FAIL else None
            o = output[i] if code == _OK else None
            extra = rare.get(i)
            if extra is None:
                i_node = node = lsn = error = op_extra = group = None
            else:
                i_node, op_extra, node, lsn, error, group = extra
            done = complete_index[i]
            if code == _OUTSTANDING:
                done = None
                node, error = i_node, _NO_COMPLETION
            else:
                node = node or i_node
            c = call[i]
            if not ordered:
                c = invoke_index[i]
                if r is not None:
                    r = done
            if rows:
                append(row(i, key[i], f[i], kinds[code], value[i], o, c, r, error, lsn, op_extra, self))
            else:
                append(new(i, process[i], f[i], key[i], value[i], o, kinds[code], c, r, invoke_index[i], done, node,
                           lsn, error, op_extra, group))
        return out

    def history(self, shard: tuple[int, int] | None = None, *, rows: bool = False) -> History:
        """The :class:`History` of the whole file, or with ``shard`` of one shard's client operations
        (and every status poll); ``rows``: its operations as :class:`OperationRow` objects."""
        parts = shard[1] if shard is not None else 1
        return History(
            source=self.source,
            events=tuple(self.events),
            ops=tuple(self.operations(shard if parts > 1 else None, rows=rows)),
            nemesis=tuple(self.nemesis if self.ordered else (_by_index(op) for op in self.nemesis)),
            warnings=tuple(self.warnings),
            shard=shard if parts > 1 else None,
            seen=frozenset(self.seen),
            file_ops=len(self) - self.statuses,
            span=self.span,
        )


class OperationRow(msgspec.Struct, eq=False, gc=False):
    """A client operation of an :class:`OperationTable` as the linearizability search reads it: the
    fields it reads (and the registry's choice of checkers: ``lsn``, ``extra``) set at once, in C (a
    struct outside the cyclic collector), about four fifths of an :class:`Operation`'s cost (0.6-0.7 us
    against 0.8, 2026-12-01; a sixth while an ``Operation`` was a dataclass); any other attribute
    (its ``process``, ``to_json()``, ...) that of the :class:`Operation` the table makes for it when
    asked. Compared and hashed by identity, not by value as an ``Operation`` is: for the search's share of a
    history only (``checkers.judge``)."""

    id: int
    key: Any
    f: str
    type: str
    value: Any
    output: Any
    call: int
    ret: int | None
    error: str | None
    lsn: tuple[int, int] | None  # (these two: what the registry asks of every operation to choose the checkers)
    extra: dict[str, Any] | None
    table: OperationTable


def _from_operation(name: str) -> property:
    return property(lambda row: getattr(row.table.operation(row.id), name), doc=f"The operation's ``{name}``.")


# Every other attribute of an Operation (its fields, ``ok``, ``to_json``, ...) is the operation's, made when
# asked. A property each, not a ``__getattr__``: with that, every attribute read of a row, its own slots
# included, went through the slower lookup (three times the cost of a slot read).
for _name in dir(Operation):
    if not _name.startswith("_") and _name not in OperationRow.__struct_fields__:
        setattr(OperationRow, _name, _from_operation(_name))
del _name


STATUS_F = "status"
"""``f`` of the status polls the leader checker reads (``checkers.leader.STATUS``): every shard keeps them."""


def _build(
    raws: Iterable[Any],
    source: str,
    keep_events: bool,
    deadline: float | None,
    clock: Callable[[], float],
    decoded: bool,
) -> OperationTable:
    table = OperationTable(source)
    outstanding: dict[int | str, Any] = {}  # process -> its outstanding op id (a client) or _Invoke (nemesis)
    crashed: dict[int | str, int] = {}  # process -> line of its info completion
    nemesis: list[Operation | _Invoke] = []
    events = table.events
    warnings = table.warnings
    seen = table.seen
    ordered = True
    last_time = first_time = -1
    number = 0
    names: dict[str, str] = {}
    statuses = 0
    decode = _DECODER.decode
    decode_line = _LINE_DECODER.decode
    fast = not decoded and not keep_events
    processes, fs, keys, values, outputs, types = (
        table.process, table.f, table.key, table.value, table.output, table.type,
    )
    calls, rets, invoke_indexes, complete_indexes, rare = (
        table.call, table.ret, table.invoke_index, table.complete_index, table.rare,
    )
    kind_code = _KIND_CODE
    for number, raw in enumerate(raws, start=1):
        if deadline is not None and not number % _DEADLINE_EVERY and clock() > deadline:
            raise LoadTimeout(source, number)
        line = None
        checked = False
        if fast:
            try:
                line = decode_line(raw)
            except Exception:  # noqa: BLE001 - decoded again below, as a plain object, to say why or keep its other fields
                pass
            # The lines of nearly every big history, in file order and time order: a client's with only
            # the required fields, key and value, and a client's that also names the node that answered
            # and the LSN it gave (what a replicated system's adapter writes for nearly every ok). Every
            # check of the general path below holds for them (the decoder typed index, time and f), so
            # they go straight to the pairing of client operations after these few comparisons, keeping
            # what the general path keeps (the LSN as a tuple). Any other line takes the general path.
            if (
                line is not None
                and (process := line.process).__class__ is int
                and line.index == number - 1
                and 0 <= last_time <= (time := line.time)
                and line.error is _ABSENT
                and ((kind := line.type) == "invoke" or kind in kind_code)
                and (f := line.f)
            ):
                node = line.node
                lsn = line.lsn
                key = line.key
                value = line.value
                group = line.group
                if node is _ABSENT and lsn is _ABSENT and group is _ABSENT:
                    checked = True
                    node = lsn = group = None
                    rest = False
                elif (
                    node.__class__ is str
                    and lsn.__class__ is list
                    and len(lsn) == 2
                    and (term := lsn[0]).__class__ is int
                    and (seq := lsn[1]).__class__ is int
                    and key is not _ABSENT
                    and value is not _ABSENT
                    and (group is _ABSENT or (group.__class__ is str and kind != "invoke"))
                ):
                    # (with a group: a sharded system's completion, the shard that gave the LSN)
                    checked = True
                    lsn = (term, seq)
                    seen.add("lsn")
                    rest = True
                    if group is _ABSENT:
                        group = None
                if checked:
                    index = number - 1
                    last_time = time
                    if key is _ABSENT:
                        key = None
                    if value is _ABSENT:
                        value = None
                    if kind == "invoke":
                        f = names.setdefault(f, f)
                        if key.__class__ is str:
                            key = names.setdefault(key, key)
                    error = extra = None
        if not checked:
            if line is not None:
                index = line.index
                time = line.time
                process = line.process
                kind = line.type
                f = line.f
                key = line.key
                value = line.value
                node = line.node
                lsn = line.lsn
                error = line.error
                group = line.group
                extra = None
                absent = _ABSENT
                rest = False
                if node is absent and lsn is absent and error is absent and group is absent:
                    node = lsn = error = group = None
                else:
                    # As a plain object says (below): more than the five required fields, key and value.
                    rest = (key is not absent) + (value is not absent) + (node is not absent) + (lsn is not absent) + (
                        error is not absent
                    ) + (group is not absent) > 2
                    if rest:
                        node = None if node is absent else node
                        lsn = None if lsn is absent else lsn
                        error = None if error is absent else error
                        if group is absent:
                            group = None
                        else:
                            extra = {"group": group}
                    else:
                        node = lsn = error = group = None
                key = None if key is absent else key
                value = None if value is absent else value
            else:
                if not decoded:
                    try:
                        raw = decode(raw)
                    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                        raw = _decode(raw, source, number)  # raises, with the reason
                    if raw.__class__ is not dict:
                        raise HistoryError(source, number, f"expected a JSON object, got {_json_type(raw)}")
                try:
                    index = raw["index"]
                    time = raw["time"]
                    process = raw["process"]
                    kind = raw["type"]
                    f = raw["f"]
                except KeyError:
                    missing = [name for name in REQUIRED_EVENT_FIELDS if name not in raw]
                    raise HistoryError(source, number, f"missing field {', '.join(repr(m) for m in missing)}") from None
                key = raw.get("key")
                value = raw.get("value")
                rest = len(raw) > 7  # more than the five required fields, key and value
                node = lsn = error = group = extra = None
                if rest:
                    node = raw.get("node")
                    lsn = raw.get("lsn")
                    error = raw.get("error")
                    group = raw.get("group")
                    extra = {k: v for k, v in raw.items() if k not in EVENT_FIELDS} or None
            if index != number - 1 or index.__class__ is not int:
                raise HistoryError(source, number, f"index is {index!r}, expected {number - 1} (file order)")
            if time.__class__ is not int or time < 0:
                raise HistoryError(source, number, f"time must be a non-negative integer (ns), not {time!r}")
            if time < last_time and ordered:
                ordered = False
                warnings.append(
                    f"{source}:{number}: time goes backwards ({time} after {last_time}); real-time order is "
                    "taken from the file order (index) instead"
                )
            if number == 1:
                first_time = time
            last_time = time
            if process.__class__ is not int and process != NEMESIS:
                raise HistoryError(source, number, f"process must be an integer or 'nemesis', not {process!r}")
            kind_name = _TYPES.get(kind) if kind.__class__ is str else None
            if kind_name is None:
                raise HistoryError(source, number, f"type must be one of {', '.join(EVENT_TYPES)}, not {kind!r}")
            kind = kind_name
            if f.__class__ is not str or not f:
                raise HistoryError(source, number, f"f must be a non-empty string, not {f!r}")
            if kind == "invoke":
                # One object per distinct name and key: a million operations share a few strings.
                f = names.setdefault(f, f)
                if key.__class__ is str:
                    key = names.setdefault(key, key)
            if rest:
                if node is not None and node.__class__ is not str:
                    raise HistoryError(source, number, f"node must be a string, not {node!r}")
                if lsn is not None:
                    lsn = _lsn(lsn, source, number)
                    seen.add("lsn")
                if error is not None and error.__class__ is not str:
                    error = msgspec.json.encode(error).decode()
                if group is not None and group.__class__ is not str:
                    raise HistoryError(source, number, f"group must be a string, not {group!r}")
            if keep_events:
                events.append(Event(index, time, process, kind, f, key, value, node, lsn, error, number, raw))
            if process == NEMESIS:
                if kind == "info":
                    # Jepsen's nemesis: an info event starts an operation unless it completes the outstanding one.
                    pending = outstanding.get(process)
                    if pending is None or pending[2] != f:
                        if pending is not None:
                            _complete(nemesis, outstanding.pop(process), None, None, None, None, None)
                        kind = "invoke"
                if kind == "invoke":
                    if process in outstanding:
                        _invokes_again(source, number, process, outstanding[process][2], outstanding[process][7])
                    if extra is not None and extra.get("final") is True:
                        seen.add("final")
                    if f == STATUS_F:
                        statuses += 1
                    outstanding[process] = (index, time, f, key, value, node, extra, number, len(nemesis), process)
                    nemesis.append(outstanding[process])
                    continue
                invoke = outstanding.pop(process, None)
                if invoke is None:
                    raise HistoryError(source, number, f"{kind} completion for process {process!r} without an invoke")
                _same_operation(source, number, f, key, invoke[2], invoke[3], invoke[7])
                _complete(nemesis, invoke, kind, index, time, value, (node, lsn, error))
                continue
        if kind == "invoke":
            if process in outstanding:
                first = outstanding[process]
                _invokes_again(source, number, process, fs[first], invoke_indexes[first] + 1)
            if process in crashed:
                raise HistoryError(
                    source,
                    number,
                    f"process {process!r} invokes after its info completion on line {crashed[process]}; "
                    "after info a client must continue under a new process id",
                )
            if extra is not None and extra.get("final") is True:
                seen.add("final")
            if f == STATUS_F:
                statuses += 1
            op_id = len(fs)
            try:
                calls.append(time)
            except OverflowError:  # a time past 2^63 ns: the time columns become lists
                calls = table.call = list(calls)  # type: ignore[assignment]
                rets = table.ret = list(rets)  # type: ignore[assignment]
                calls.append(time)
            outstanding[process] = op_id
            processes.append(process)
            fs.append(f)
            keys.append(key)
            values.append(value)
            outputs.append(None)
            types.append(_OUTSTANDING)
            rets.append(_UNSET)
            invoke_indexes.append(index)
            complete_indexes.append(_UNSET)
            if node is not None or extra is not None:
                rare[op_id] = [node, extra, None, None, None, None]
            continue
        op_id = outstanding.pop(process, None)
        if op_id is None:
            raise HistoryError(source, number, f"{kind} completion for process {process!r} without an invoke")
        if f != fs[op_id] or key != keys[op_id]:
            _same_operation(source, number, f, key, fs[op_id], keys[op_id], invoke_indexes[op_id] + 1)
        code = kind_code[kind]
        types[op_id] = code
        complete_indexes[op_id] = index
        try:
            rets[op_id] = time
        except OverflowError:
            calls = table.call = list(calls)  # type: ignore[assignment]
            rets = table.ret = list(rets)  # type: ignore[assignment]
            rets[op_id] = time
        if code == _OK:
            outputs[op_id] = value
            if values[op_id] is None and f not in READ_LIKE:
                values[op_id] = value  # some recorders put a write's value only on its completion
        elif code == _INFO:
            crashed[process] = number
        if rest:
            more = rare.get(op_id)
            if more is None:
                more = rare[op_id] = [None, None, None, None, None, None]
            more[2:] = (node, lsn, error, group)
    for invoke in outstanding.values():
        if invoke.__class__ is tuple:
            _complete(nemesis, invoke, None, None, None, None, None)
    table.nemesis = nemesis  # type: ignore[assignment]  # every invoke replaced by its operation now
    table.ordered = ordered
    table.statuses = statuses
    table.span = (first_time, last_time) if number else None
    return table


def _invokes_again(source: str, number: int, process: int | str, f: str, line: int) -> None:
    raise HistoryError(
        source, number, f"process {process!r} invokes again while its {f} from line {line} is still outstanding"
    )


def _same_operation(source: str, number: int, f: str, key: Any, invoke_f: str, invoke_key: Any, line: int) -> None:
    """A completion repeats its invoke's ``f`` and ``key`` (FORMATS.md), else a ``HistoryError``."""
    if f != invoke_f:
        raise HistoryError(source, number, f"completion f {f!r} does not match its invoke's {invoke_f!r} (line {line})")
    if key != invoke_key:
        raise HistoryError(
            source, number, f"completion key {key!r} does not match its invoke's {invoke_key!r} (line {line})"
        )


_NO_COMPLETION = "no completion: the history ended with this operation outstanding"


def _complete(
    target: list[Any],
    invoke: _Invoke,
    kind: str | None,
    index: int | None,
    time: int | None,
    value: Any,
    rest: tuple[str | None, tuple[int, int] | None, str | None] | None,
) -> None:
    """Replace ``invoke``'s slot in ``target`` by its operation (``kind`` None: it never completed)."""
    i_index, i_time, f, key, i_value, i_node, extra, _, op_id, process = invoke
    if kind is None or rest is None:
        target[op_id] = Operation(
            op_id, process, f, key, i_value, None, "info", i_time, None, i_index, index, i_node, None,
            _NO_COMPLETION if index is None else None, extra,
        )
        return
    node, lsn, error = rest
    if i_value is None and kind == "ok" and f not in READ_LIKE:
        i_value = value  # some recorders put a write's value only on its completion
    target[op_id] = Operation(
        op_id,
        process,
        f,
        key,
        i_value,
        value if kind == "ok" else None,
        kind,
        i_time,
        time if kind != "info" else None,
        i_index,
        index,
        node or i_node,
        lsn,
        error,
        extra,
    )


def _hashable_key(key: Any) -> Any:
    return msgspec.json.encode(key) if key.__class__ in (list, dict) else key


def key_shard(key: Any, parts: int) -> int:
    """Which of ``parts`` shards the operations on ``key`` belong to: the same in every process and run
    (a CRC of the key's JSON text, not Python's salted ``hash``)."""
    return zlib.crc32(msgspec.json.encode(key)) % parts


def _by_index(op: Operation) -> Operation:
    """``op`` with its invoke's and completion's indexes as its call and return times."""
    return Operation(
        op.id, op.process, op.f, op.key, op.value, op.output, op.type, op.invoke_index,
        None if op.ret is None else op.complete_index, op.invoke_index, op.complete_index, op.node,
        op.lsn, op.error, op.extra, op.group,
    )


def parse_history(
    lines: Iterable[str | bytes], source: str = "history.jsonl", *, keep_events: bool = True
) -> History:
    """Validate history lines (our JSONL) and pair them into operations."""
    return build_history(lines, source, keep_events=keep_events, decoded=False)


def parse_operations(lines: Iterable[str | bytes], source: str = "history.jsonl") -> OperationTable:
    """:func:`parse_history` without the events, its operations kept as the columns of an
    :class:`OperationTable` (:meth:`OperationTable.history` makes the objects)."""
    with no_cyclic_gc():
        return _build(lines, source, False, None, _time.monotonic, False)


def format_of(path: str | os.PathLike[str], format: str = "auto") -> str:
    """The history format of ``path``: ``format`` unless ``"auto"``, else by extension (``.edn``)."""
    if format not in FORMATS:
        raise ValueError(f"unknown history format {format!r}; choose from {', '.join(FORMATS)}")
    if format != "auto":
        return format
    return "edn" if str(path).lower().endswith(".edn") else "jsonl"


def load_history(
    path: str | os.PathLike[str],
    *,
    format: str = "auto",
    keep_events: bool = True,
    deadline: float | None = None,
    clock: Callable[[], float] = _time.monotonic,
    independent: str = "auto",
    shard: tuple[int, int] | None = None,
) -> History:
    """Read and validate a history file: ours (``history.jsonl``), or Jepsen's (``checkers.jepsen``,
    where ``independent`` says whether values are ``[key value]`` tuples: ``auto``, ``yes``, ``no``).
    ``shard``: keep only one shard's client operations (:func:`build_history`).

    ``keep_events=False`` is the low-memory form (operations only). ``deadline`` (on ``clock``) raises
    :class:`LoadTimeout` once passed.
    """
    table = load_operations(
        path, format=format, keep_events=keep_events, deadline=deadline, clock=clock, independent=independent
    )
    with no_cyclic_gc():
        return table.history(shard)


def load_operations(
    path: str | os.PathLike[str],
    *,
    format: str = "auto",
    keep_events: bool = False,
    deadline: float | None = None,
    clock: Callable[[], float] = _time.monotonic,
    independent: str = "auto",
) -> OperationTable:
    """:func:`load_history`'s reading, validating and pairing, without building the operations: the
    :class:`OperationTable` of the file, from which each process of a parallel check builds its share
    (``table.history(shard)``)."""
    path = Path(path)
    kind = format_of(path, format)
    with no_cyclic_gc():
        if kind != "jsonl":
            from checkers.jepsen import read_jepsen

            raws = read_jepsen(path, kind, independent=independent, deadline=deadline, clock=clock)
            return _build(raws, str(path), keep_events, deadline, clock, True)
        with open_history(path) as handle:
            return _build(bounded_lines(handle, str(path)), str(path), keep_events, deadline, clock, False)


# The journal events the checkers read (FORMATS.md: `role` and `apply`; `start` resets a node's apply
# order); ``compact`` loading keeps only these.
CHECKED_JOURNAL_EVENTS = frozenset({"start", "role", "apply"})


def parse_journal(
    lines: Iterable[str | bytes],
    source: str = "journal.jsonl",
    *,
    compact: bool = False,
    shared: dict[Any, dict[str, Any]] | None = None,
) -> list[JournalEvent]:
    """Validate one node's journal lines: JSON objects, required fields, one node, ``seq`` 0, 1, 2, ...

    ``compact`` keeps only :data:`CHECKED_JOURNAL_EVENTS` (every line is still validated), and an
    ``apply`` whose fields equal those of an ``apply`` of the same LSN already in ``shared`` (another
    node's) shares that one's ``data``: the nodes of a correct cluster apply the same entries, so their
    journals then cost about one node's worth of memory.
    """
    with no_cyclic_gc():
        return _parse_journal(lines, source, compact, shared)


class _Applied(msgspec.Struct, tag_field="event", tag="apply", forbid_unknown_fields=True, gc=False):
    """An ``apply`` journal line as the typed path decodes it (nearly every line of a node's journal is one
    of these four, with exactly these fields): the decoder checks what the plain-object path below checks
    (``node`` a string, ``seq`` an integer, ``wall`` a number, ``lsn`` two integers, ...). A line that does
    not fit (another event or field, a wrong type) takes the plain-object path, which keeps its other fields
    or says what is wrong."""

    node: str
    seq: int
    wall: float
    lsn: tuple[int, int]
    key: Any
    op: Any
    index: Any = _ABSENT
    group: Any = _ABSENT


class _Appended(msgspec.Struct, tag_field="event", tag="append", forbid_unknown_fields=True, gc=False):
    node: str
    seq: int
    wall: float
    index: Any
    count: Any
    first_lsn: Any
    last_lsn: Any
    group: Any = _ABSENT


class _Committed(msgspec.Struct, tag_field="event", tag="commit", forbid_unknown_fields=True, gc=False):
    node: str
    seq: int
    wall: float
    lsn: tuple[int, int]
    index: Any = _ABSENT
    group: Any = _ABSENT


class _RoleChanged(msgspec.Struct, tag_field="event", tag="role", forbid_unknown_fields=True, gc=False):
    node: str
    seq: int
    wall: float
    role: str
    term: int
    leader: Any
    group: Any = _ABSENT


_JOURNAL_LINE_DECODER = msgspec.json.Decoder(_Applied | _Appended | _Committed | _RoleChanged)


def _parse_journal(
    lines: Iterable[str | bytes],
    source: str,
    compact: bool,
    shared: dict[Any, dict[str, Any]] | None,
    typed: bool = True,
) -> list[JournalEvent]:
    # One pass, one decode and no copy per line: a run's journals hold several events per operation (five
    # nodes journal every entry they append, commit and apply), and this loop was a third of ingesting a
    # run. A line of the four common events is decoded into its struct, its types checked by the decoder,
    # and its ``data`` built from the struct's fields, in the order the cluster's nodes write them (any
    # other line: from the plain object, in the line's order). Class checks stand for isinstance (decoded
    # JSON has no subclasses; ``bool`` is not ``int`` here, as the format wants). ``typed=False``: every
    # line takes the plain-object path (the tests compare the two).
    events: list[JournalEvent] = []
    append = events.append
    node: str | None = None
    expected = 0
    decode = _DECODER.decode
    decode_line = _JOURNAL_LINE_DECODER.decode
    needs = JOURNAL_EVENT_FIELDS
    checked = CHECKED_JOURNAL_EVENTS
    missing = _MISSING
    absent = _ABSENT
    new_event = JournalEvent
    for number, text in enumerate(lines, start=1):
        line = None
        if typed:
            try:
                line = decode_line(text)
            except Exception:  # noqa: BLE001 - decoded again below, as a plain object, to say why or keep its other fields
                pass
        if line is not None and line.seq == expected and (line.node == node or node is None):
            node = line.node
            expected += 1
            kind = line.__class__
            if kind is _Applied:
                index = line.index
                if index is absent:
                    data = {"lsn": line.lsn, "key": line.key, "op": line.op}
                else:
                    data = {"lsn": line.lsn, "index": index, "key": line.key, "op": line.op}
                event = "apply"
            elif kind is _RoleChanged:
                data = {"role": line.role, "term": line.term, "leader": line.leader}
                event = "role"
            elif compact:
                continue  # append and commit: validated, not kept
            elif kind is _Appended:
                data = {"index": line.index, "count": line.count, "first_lsn": line.first_lsn,
                        "last_lsn": line.last_lsn}  # fmt: skip
                event = "append"
            else:
                index = line.index
                data = {"lsn": line.lsn} if index is absent else {"index": index, "lsn": line.lsn}
                event = "commit"
            if line.group is not absent:
                data["group"] = line.group
            if kind is _Applied and compact and shared is not None:
                first = shared.setdefault(data["lsn"], data)
                if first == data:
                    data = first
            append(new_event(node, line.seq, line.wall, event, data, number))
            continue
        try:
            raw = decode(text)
        except (msgspec.DecodeError, UnicodeDecodeError):
            raw = None
        if raw.__class__ is not dict:
            raw = _json_object(text, REQUIRED_JOURNAL_FIELDS, source, number)  # raises, with the reason
        this = raw.pop("node", missing)
        seq = raw.pop("seq", missing)
        wall = raw.pop("wall", missing)
        event = raw.pop("event", missing)
        if this is missing or seq is missing or wall is missing or event is missing:
            absent_fields = [name for name, v in zip(REQUIRED_JOURNAL_FIELDS, (this, seq, wall, event), strict=True)
                             if v is missing]  # fmt: skip
            raise HistoryError(source, number, f"missing field {', '.join(repr(m) for m in absent_fields)}")
        if this.__class__ is not str:
            raise HistoryError(source, number, f"node must be a string, not {this!r}")
        if node is None:
            node = this
        elif this != node:
            raise HistoryError(source, number, f"node {this!r} in the journal of node {node!r}")
        if seq.__class__ is not int or seq != expected:
            raise HistoryError(source, number, f"seq is {seq!r}, expected {expected}")
        expected += 1
        if wall.__class__ is not float:
            if wall.__class__ is not int:
                raise HistoryError(source, number, f"wall must be a number, not {wall!r}")
            wall = float(wall)
        if event.__class__ is not str or not event:
            raise HistoryError(source, number, f"event must be a non-empty string, not {event!r}")
        data = raw  # the event's own fields: every field beyond the four above
        fields = needs.get(event)
        if fields is not None:
            absent_fields = [name for name in fields if name not in data]
            if absent_fields:
                raise HistoryError(
                    source, number, f"{event} event missing field {', '.join(repr(n) for n in absent_fields)}"
                )
        lsn = data.get("lsn", missing)
        if lsn is not missing:
            if lsn.__class__ is list and len(lsn) == 2 and lsn[0].__class__ is int and lsn[1].__class__ is int:
                data["lsn"] = (lsn[0], lsn[1])
            else:
                data["lsn"] = _lsn(lsn, source, number)
        if event == "apply":
            if data["lsn"] is None:
                raise HistoryError(source, number, "apply event lsn must be [term, seq], not null")
            if compact and shared is not None:
                first = shared.setdefault(data["lsn"], data)
                if first == data:
                    data = first
        elif event == "role":
            if data["term"].__class__ is not int:
                raise HistoryError(source, number, f"role event term must be an integer, not {data['term']!r}")
            if data["role"].__class__ is not str:
                raise HistoryError(source, number, f"role event role must be a string, not {data['role']!r}")
        elif compact and event not in checked:
            continue
        append(new_event(node, seq, wall, event, data, number))
    return events


_MISSING = object()


def load_journal(
    path: str | os.PathLike[str], *, compact: bool = False, shared: dict[Any, dict[str, Any]] | None = None
) -> list[JournalEvent]:
    """Read and validate one node's ``journal.jsonl`` (``compact``: see :func:`parse_journal`)."""
    path = Path(path)
    with open_history(path) as handle:
        return parse_journal(bounded_lines(handle, str(path)), str(path), compact=compact, shared=shared)


def load_journals(directory: str | os.PathLike[str], *, compact: bool = False) -> dict[str, list[JournalEvent]]:
    """Read every ``<node>/journal.jsonl`` under ``directory`` (a run's ``nodes/`` or the run itself).

    Returns a mapping from the node id written in each journal to its events, ordered by node id. A
    journal's ``node`` field wins over its directory name; two directories claiming one node is an error.
    ``compact`` keeps what the checkers read, sharing equal entries across nodes (:func:`parse_journal`).
    """
    shared: dict[Any, dict[str, Any]] | None = {} if compact else None
    directory = Path(directory)
    if (directory / "nodes").is_dir():
        directory = directory / "nodes"
    if not directory.is_dir():
        raise HistoryError(str(directory), None, "no such directory of node journals")
    journals: dict[str, list[JournalEvent]] = {}
    for path in sorted(directory.glob("*/journal.jsonl")):
        events = load_journal(path, compact=compact, shared=shared)
        node = events[0].node if events else path.parent.name
        if node in journals:
            raise HistoryError(str(path), None, f"a second journal for node {node!r}")
        journals[node] = events
    return dict(sorted(journals.items()))
