"""Jepsen's histories, read directly: ``history.edn`` (and Knossos' EDN files), and JSON exports of
Jepsen operations. This module is the one place where Jepsen's fields become FORMATS.md's.

Layouts read: a single EDN vector (or list) of operation maps, as Knossos' ``data/`` files are written;
one operation map per top-level form, as Jepsen's ``history.edn`` is (one per line); for JSON, one
object per line or a single array of objects. EDN is streamed by :mod:`checkers.edn` (the subset Jepsen
writes is built there, anything else by the ``edn_format`` package; Jepsen's ``#jepsen.history.Op{...}``
record literals are read as maps), the operations kept as JSON objects until the file is read: whether
values are independent keys, and the order of ``:index``, are known only then.
In error messages the number after the file name is the operation's position in the file (1-based).

The mapping, Jepsen field -> ours (FORMATS.md):

========== ==========================================================================================
``:index``  orders the operations when every one has it (Jepsen's index is the history order);
            ``index`` is then the 0-based position in that order
``:time``   ``time`` (Jepsen's relative nanoseconds); when absent, the position. Jepsen's times come
            from several threads and may go backwards: the loader then orders by index and warns
            (:mod:`checkers.history`)
``:process`` ``process``; ``:nemesis`` becomes ``"nemesis"``
``:type``   ``type`` (``:invoke``, ``:ok``, ``:fail``, ``:info``)
``:f``      ``f``, the keyword's name (``:cas`` -> ``"cas"``)
``:value``  ``value``. With independent keys (``jepsen.independent``), a ``[k v]`` tuple becomes
            ``key`` k and ``value`` v; ``independent="auto"`` assumes them when every client invoke's
            value is such a pair with a scalar ``k`` (and every cas's ``v`` is ``[old new]``)
``:error``  ``error``: a keyword's name (``:cas-mismatch`` -> ``"cas-mismatch"``), anything else as
            JSON text. Only ``precondition-failed``/``cas-mismatch`` make a failed cas "executed and
            returned false" (:mod:`checkers.models`); any other ``:fail`` did not happen, as in Knossos
``:node``   ``node`` when it is a string
other keys  kept on the invoke (``Operation.extra``), under the keyword's name
========== ==========================================================================================

EDN values become JSON values (:func:`checkers.edn.to_json`, importable from here too): keywords and
symbols their names, vectors and lists lists, sets sorted lists, maps objects (keys as names or text), other
scalars (ratios, UUIDs, instants) their text.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from checkers.edn import read_edn, to_json
from checkers.source import MAX_LINE_BYTES, NEMESIS, HistoryError, LoadTimeout, open_history

INDEPENDENT_CHOICES = ("auto", "yes", "no")
_STANDARD = ("index", "time", "process", "type", "f", "value", "error", "node")


def _short(value: Any) -> str:
    text = json.dumps(to_json(value), sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


_JSON_LINE_CHARS = MAX_LINE_BYTES  # a JSON export's line longer than this is refused
_DEADLINE_EVERY = 1 << 10  # JSON lines between two looks at the clock


def _read_forms(
    path: Path, kind: str, deadline: float | None = None, clock: Callable[[], float] = time.monotonic
) -> Iterator[Any]:
    """The operation-level forms of a Jepsen history file, as JSON values, one at a time."""
    source = str(path)
    with open_history(path) as handle:
        if kind == "edn":
            yield from read_edn(handle, source, deadline=deadline, clock=clock)
            return
        first = handle.peek(1 << 16)[:1 << 16].lstrip()
        if first.startswith(b"["):  # one array: msgspec reads it at once (about 1 s for 100 MB)
            try:
                forms = msgspec.json.decode(handle.read())
            except RecursionError:
                raise HistoryError(source, None, "a value nested too deeply to read (no history needs that depth)") from None
            except msgspec.DecodeError as exc:
                raise HistoryError(source, None, f"bad JSON: {exc}") from None
            if deadline is not None and clock() > deadline:
                raise LoadTimeout(source, 1)
            yield from forms if isinstance(forms, list) else [forms]
            return
        number = 0
        while line := handle.readline(_JSON_LINE_CHARS + 1):
            number += 1
            if len(line) > _JSON_LINE_CHARS:
                raise HistoryError(source, number, f"a line of more than {_JSON_LINE_CHARS:,} bytes")
            if deadline is not None and not number % _DEADLINE_EVERY and clock() > deadline:
                raise LoadTimeout(source, number)
            if not line.strip():
                continue
            try:
                yield msgspec.json.decode(line)
            except RecursionError:
                raise HistoryError(source, number, "a value nested too deeply to read (no history needs that depth)") from None
            except msgspec.DecodeError as exc:
                raise HistoryError(source, number, f"bad JSON: {exc}") from None


def _invoke_pair(op: Mapping[str, Any]) -> bool | None:
    """For :func:`_independent`: None when ``op`` says nothing (nemesis, completions), else whether its
    value is a ``[k v]`` tuple of independent keys. Raises ``KeyError`` without process or type."""
    if op["process"] == NEMESIS or op["type"] != "invoke":
        return None
    value = op.get("value")
    if value.__class__ is not list or len(value) != 2 or value[0].__class__ is list:
        return False
    if op.get("f") == "cas":
        v = value[1]
        return v.__class__ is list and len(v) == 2
    return True


def read_jepsen(
    path: str | os.PathLike[str],
    kind: str = "edn",
    *,
    independent: str = "auto",
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[dict[str, Any]]:
    """The operations of a Jepsen history file as FORMATS.md events, in history order.

    ``kind`` is ``"edn"`` or ``"jepsen-json"``; ``independent`` is ``"auto"``, ``"yes"`` or ``"no"``.
    Raises :class:`~checkers.history.HistoryError` for unreadable input, and
    :class:`~checkers.history.LoadTimeout` once ``deadline`` (on ``clock``) has passed while parsing.
    """
    path = Path(path)
    if independent not in INDEPENDENT_CHOICES:
        raise ValueError(f"independent must be one of {', '.join(INDEPENDENT_CHOICES)}, not {independent!r}")
    try:
        yield from _events(path, kind, independent, deadline, clock)
    except RecursionError:
        raise HistoryError(str(path), None, "a value nested too deeply to read (no history needs that depth)") from None


def _events(
    path: Path, kind: str, independent: str, deadline: float | None, clock: Callable[[], float]
) -> Iterator[dict[str, Any]]:
    source = str(path)
    # The operations are kept (as JSON objects) until the file is read: whether values are independent
    # keys, and the order of :index, are known only then.
    ops: list[dict[str, Any]] = []
    pairs: bool | None = None  # every client invoke so far is a [k v] tuple (None: none seen yet)
    indexed = in_order = True  # every operation has an :index; and they grow
    last = -(1 << 63)
    for position, op in enumerate(_read_forms(path, kind, deadline, clock), start=1):
        if op.__class__ is not dict:
            raise HistoryError(source, position, f"expected an operation map, got {_short(op)}")
        ops.append(op)
        if pairs is not False:
            try:
                pair = _invoke_pair(op)
            except KeyError:
                pair = False
            if pair is not None:
                pairs = pair
        if indexed:
            i = op.get("index")
            if i.__class__ is not int:
                indexed = False
            elif i <= last:
                in_order = False
            else:
                last = i
    if deadline is not None and clock() > deadline:
        raise LoadTimeout(source, len(ops))
    split = independent == "yes" or (independent == "auto" and bool(pairs))
    if ops and indexed and not in_order:
        indexes = [op["index"] for op in ops]
        if len(set(indexes)) != len(indexes):
            raise HistoryError(source, None, "two operations share an :index")
        order: Sequence[int] = sorted(range(len(ops)), key=indexes.__getitem__)
        del indexes
    else:
        order = range(len(ops))
    for position, i in enumerate(order):
        op = ops[i]
        ops[i] = None  # type: ignore[call-overload]  # each is needed once: let it go
        yield _event(op, position, split, source, i + 1)


_MISSING = object()
_KNOWN = frozenset((*_STANDARD, "key"))


def _event(op: dict[str, Any], position: int, split: bool, source: str, number: int) -> dict[str, Any]:
    """One Jepsen operation (a JSON object) as a FORMATS.md event (the mapping of the module docstring)."""
    raw_time = op.get("time", _MISSING)
    event: dict[str, Any] = {"index": position, "time": position if raw_time is _MISSING else raw_time}
    for name in ("process", "type", "f"):
        value = op.get(name, _MISSING)
        if value is _MISSING:
            raise HistoryError(source, number, f"missing field :{name}")
        event[name] = value
    value = op.get("value")
    key = op.get("key")  # some Jepsen tests name the key in a field of its own
    if split and event["process"] != NEMESIS:
        if value.__class__ is not list or len(value) != 2:
            raise HistoryError(source, number, f"expected an independent [key value] tuple, not {_short(value)}")
        key, value = value
    event["key"] = key
    event["value"] = value
    error = op.get("error")
    if error is not None:
        event["error"] = error if error.__class__ is str else json.dumps(error, sort_keys=True)
    node = op.get("node")
    if node.__class__ is str:
        event["node"] = node
    for name, field_value in op.items():
        if name not in _KNOWN:
            event[name] = field_value
    return event
