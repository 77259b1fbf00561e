"""Jepsen's histories, read directly: ``history.edn`` (and Knossos' EDN files), and JSON exports of
Jepsen operations. This module is the one place where Jepsen's fields become FORMATS.md's.

Layouts read: a single EDN vector (or list) of operation maps, as Knossos' ``data/`` files are written;
one operation map per top-level form, as Jepsen's ``history.edn`` is (one per line); for JSON, one
object per line or a single array of objects. EDN is parsed by the ``edn_format`` package (about 7,000
operations per second here; Jepsen's ``#jepsen.history.Op{...}`` record literals are read as maps).
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

EDN values become JSON values: keywords and symbols their names, vectors and lists lists, sets sorted
lists, maps objects (keys as names or text), other scalars (ratios, UUIDs, instants) their text.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import edn_format
import msgspec

from checkers.history import NEMESIS, HistoryError, LoadTimeout, open_history

INDEPENDENT_CHOICES = ("auto", "yes", "no")
_STANDARD = ("index", "time", "process", "type", "f", "value", "error", "node")
_RECORD_TAGS = ("jepsen.history.Op", "knossos.op.Op", "jepsen.history.Op.Op")


def _record(value: Any) -> Any:
    return value


for _tag in _RECORD_TAGS:
    edn_format.add_tag(_tag, _record)


def to_json(value: Any) -> Any:
    """An EDN (or JSON) value as a JSON value (module docstring)."""
    if value is None or value.__class__ in (int, str, float, bool):
        return value
    if isinstance(value, edn_format.Keyword | edn_format.Symbol):
        return value.name
    if isinstance(value, Mapping):
        return {_map_key(k): to_json(v) for k, v in value.items()}
    if isinstance(value, frozenset | set):
        items = [to_json(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    if _is_vector(value):
        return [to_json(v) for v in value]
    if isinstance(value, Decimal):
        return float(value)
    return str(value)


def _is_vector(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _short(value: Any) -> str:
    text = json.dumps(to_json(value), sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def _map_key(key: Any) -> str:
    converted = to_json(key)
    return converted if isinstance(converted, str) else json.dumps(converted, sort_keys=True)


def _field(op: Mapping[Any, Any], name: str) -> Any:
    """``op[:name]`` for an EDN map, ``op["name"]`` for a JSON object; ``KeyError`` when absent."""
    for candidate in (edn_format.Keyword(name), name):
        if candidate in op:
            return op[candidate]
    raise KeyError(name)


_EDN_CHUNK = 2048  # lines parsed at once: edn_format's parser costs much to start, little per form


def _parse_edn(text: str, source: str) -> list[Any]:
    try:
        return list(edn_format.loads_all(text))
    except NotImplementedError as exc:  # an unknown #tag
        raise HistoryError(source, None, f"unreadable EDN: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - edn_format raises its own and ply's errors
        raise HistoryError(source, None, f"unreadable EDN: {type(exc).__name__}: {exc}") from None


def _edn_forms(
    text: str, source: str, deadline: float | None, clock: Callable[[], float]
) -> list[Any]:
    """The top-level forms of an EDN text. One vector (Knossos' layout) is parsed whole; forms one per
    line (Jepsen's ``history.edn``) are parsed :data:`_EDN_CHUNK` lines at a time, looking at the
    clock between chunks (a chunk that ends inside a form grows until the form is complete)."""
    if text.lstrip().startswith(("[", "(")) or deadline is None:
        return _parse_edn(text, source)
    lines = text.splitlines()
    forms: list[Any] = []
    start = 0
    while start < len(lines):
        if clock() > deadline:
            raise LoadTimeout(source, start + 1)
        end = min(start + _EDN_CHUNK, len(lines))
        while True:
            try:
                forms.extend(_parse_edn("\n".join(lines[start:end]), source))
                break
            except HistoryError:
                if end >= len(lines):
                    raise
                end = min(end + 64, len(lines))  # a form that spans the chunk's end
        start = end
    return forms


def _read_forms(
    path: Path, kind: str, deadline: float | None = None, clock: Callable[[], float] = time.monotonic
) -> list[Any]:
    try:
        with open_history(path) as handle:
            text = handle.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HistoryError(str(path), None, f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    if kind == "edn":
        forms = _edn_forms(text, str(path), deadline, clock)
    else:
        stripped = text.lstrip()
        try:
            if stripped.startswith("["):
                forms = [msgspec.json.decode(text)]
            else:
                forms = [msgspec.json.decode(line) for line in text.splitlines() if line.strip()]
        except msgspec.DecodeError as exc:
            raise HistoryError(str(path), None, f"bad JSON: {exc}") from None
    if deadline is not None and clock() > deadline:
        raise LoadTimeout(str(path), len(forms))
    if len(forms) == 1 and _is_vector(forms[0]):
        return list(forms[0])
    return forms


def _independent(ops: list[Mapping[Any, Any]]) -> bool:
    """Whether every client invoke's value is a ``[k v]`` tuple of independent keys (module docstring)."""
    seen = False
    for op in ops:
        try:
            process = to_json(_field(op, "process"))
            kind = to_json(_field(op, "type"))
        except KeyError:
            return False
        if process == NEMESIS or kind != "invoke":
            continue
        value = op.get(edn_format.Keyword("value"), op.get("value"))
        if not _is_vector(value) or len(value) != 2 or _is_vector(value[0]):
            return False
        f = to_json(op.get(edn_format.Keyword("f"), op.get("f")))
        if f == "cas" and not (_is_vector(value[1]) and len(value[1]) == 2):
            return False
        seen = True
    return seen


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
    forms = _read_forms(path, kind, deadline, clock)
    for position, op in enumerate(forms, start=1):
        if not isinstance(op, Mapping):
            raise HistoryError(source, position, f"expected an operation map, got {_short(op)}")
    split = independent == "yes" or (independent == "auto" and _independent(forms))
    indexes = [op.get(edn_format.Keyword("index"), op.get("index")) for op in forms]
    if forms and all(isinstance(i, int) and not isinstance(i, bool) for i in indexes):
        if len(set(indexes)) != len(indexes):
            raise HistoryError(source, None, "two operations share an :index")
        order = sorted(range(len(forms)), key=lambda i: indexes[i])
    else:
        order = list(range(len(forms)))
    for position, i in enumerate(order):
        yield _event(forms[i], position, split, source, i + 1)


def _event(op: Mapping[Any, Any], position: int, split: bool, source: str, number: int) -> dict[str, Any]:
    """One Jepsen operation as a FORMATS.md event (the mapping of the module docstring)."""
    event: dict[str, Any] = {"index": position}
    try:
        raw_time = _field(op, "time")
    except KeyError:
        raw_time = position
    event["time"] = raw_time if isinstance(raw_time, int) and not isinstance(raw_time, bool) else raw_time
    for name in ("process", "type", "f"):
        try:
            event[name] = to_json(_field(op, name))
        except KeyError:
            raise HistoryError(source, number, f"missing field :{name}") from None
    try:
        value = to_json(_field(op, "value"))
    except KeyError:
        value = None
    try:
        key = to_json(_field(op, "key"))  # some Jepsen tests name the key in a field of its own
    except KeyError:
        key = None
    if split and event["process"] != NEMESIS:
        if not isinstance(value, list) or len(value) != 2:
            raise HistoryError(source, number, f"expected an independent [key value] tuple, not {_short(value)}")
        key, value = value
    event["key"] = key
    event["value"] = value
    try:
        error = to_json(_field(op, "error"))
    except KeyError:
        error = None
    if error is not None:
        event["error"] = error if isinstance(error, str) else json.dumps(error, sort_keys=True)
    try:
        node = to_json(_field(op, "node"))
    except KeyError:
        node = None
    if isinstance(node, str):
        event["node"] = node
    for name, field_value in op.items():
        text = _map_key(name)
        if text not in _STANDARD and text not in event:
            event[text] = to_json(field_value)
    return event
