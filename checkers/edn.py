"""A fast, streaming reader for the EDN that Jepsen and Knossos write, producing JSON values.

:func:`read_edn` yields the operation-level forms of an EDN history file, one at a time, as the JSON
values :func:`to_json` makes of ``edn_format``'s (keywords become their names, vectors,
lists and sets lists, sets sorted, map keys their names or JSON text). Two layouts are recognised from
the first form: a single vector (or list) of operations (Knossos' ``data/`` files; the operations are
its elements), or one operation per top-level form (Jepsen's ``history.edn``, one map per line).

The input is read a piece at a time (:data:`PIECE` bytes: the whole lines they hold, or a part of a
longer line), cut into tokens by one regular expression, and built with an explicit stack, never by
recursion. What it builds itself is the subset Jepsen writes: maps, vectors, lists, sets, keywords,
strings with the usual escapes, integers, floats, ``nil``, ``true`` and ``false``. A form holding anything else (tagged
literals such as ``#jepsen.history.Op{...}`` or ``#inst``, symbols, characters, ratios, ``M``
decimals, ``#_``, metadata, map keys that are collections, maps or sets whose entries collide) is
handed whole to ``edn_format``, so the result is always the one ``edn_format`` gives
(``tests/checkers/test_edn.py`` checks that property on generated forms).

Budgets (:class:`Limits`): nesting depth, the size of one token and of one operation's text, and the
length of a number are bounded, each failing with a one-line :class:`~checkers.history.HistoryError`;
``deadline`` (on ``clock``) is looked at between pieces and raises
:class:`~checkers.history.LoadTimeout`. Whatever the layout, the text held at once is a piece, one
unfinished token and one unfinished operation, whatever the length of the lines.
"""

from __future__ import annotations

import codecs
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, BinaryIO

import edn_format

from checkers.source import HistoryError, LoadTimeout

PIECE = 1 << 18
"""Bytes read at once: the whole lines they hold are taken together (a longer line in pieces)."""


@dataclass(frozen=True)
class Limits:
    """What one form may hold: nesting ``depth``, characters in one token (a string, say) and in one
    operation's text, and characters in a number."""

    depth: int = 200
    token_chars: int = 16 << 20
    form_chars: int = 64 << 20
    number_chars: int = 100


# One token, after any whitespace, commas and comments: a string, a delimiter, a character literal
# (edn_format's CHAR and named whitespace characters), an atom (keyword, number, symbol, tag, ...), any
# other single character (a quote that opens no complete string: the string goes on in the next piece),
# or nothing at the end of the text. Possessive quantifiers: no backtracking, whatever the input.
_TOKEN = re.compile(
    r'[\s,]*+(?:;[^\n]*+[\s,]*+)*+('
    r'"(?:[^"\\]|\\.)*+"'
    r"|#\{"
    r"|[\[\](){}^]"
    r"|\\(?:u[0-9A-Fa-f]{4}|newline|return|space|tab|[!-~\w])"
    r'|[^\s,\[\](){}"^;\\]++'
    r"|[\s\S]"
    r"|\Z)"
)
_KEYWORD = re.compile(r":[A-Za-z0-9_.*+!?$%&=<>-]+")
_FLOAT = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+)")
_INTEGER = re.compile(r"[+-]?(?:0|[1-9][0-9]*)N?")
_DELIMITER = re.compile(r'[\s,\[\](){}";^\\]')
_NUMBERISH = re.compile(r"[+-]?[0-9]")
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|([\"\\ntrbf]))")
_BAD_ESCAPE = re.compile(r"\\(?![\"\\ntrbf]|u[0-9A-Fa-f]{4})")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}

# Token kinds (structure) and the values of the fixed atoms.
_VECTOR, _LIST, _MAP, _SET = 1, 2, 3, 4
_OPEN = {"[": _VECTOR, "(": _LIST, "{": _MAP, "#{": _SET}
_CLOSE = {"]": (_VECTOR,), ")": (_LIST,), "}": (_MAP, _SET)}
_NAMES = {_VECTOR: "vector", _LIST: "list", _MAP: "map", _SET: "set"}


class _Mark:
    """A token that is not a value (a delimiter, the end of the text, something to hand on)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


_OPEN_MARK = _Mark("open")
_CLOSE_MARK = _Mark("close")
_END = _Mark("end")
_OTHER = _Mark("other")  # outside the subset: the form goes to edn_format

_FIXED: dict[str, Any] = {"nil": None, "true": True, "false": False, "": _END}
_FIXED.update(dict.fromkeys(_OPEN, _OPEN_MARK))
_FIXED.update(dict.fromkeys(_CLOSE, _CLOSE_MARK))
_CACHE_SIZE = 1 << 14


# Jepsen's record literals (``#jepsen.history.Op{...}``) are read by ``edn_format`` as the maps they hold.
_RECORD_TAGS = ("jepsen.history.Op", "knossos.op.Op", "jepsen.history.Op.Op")


def _record(value: Any) -> Any:
    return value


for _tag in _RECORD_TAGS:
    edn_format.add_tag(_tag, _record)


def to_json(value: Any) -> Any:
    """An EDN (or JSON) value as a JSON value: keywords and symbols their names, vectors and lists lists,
    sets sorted lists, maps objects (keys as names or JSON text), decimals floats, other scalars (ratios,
    UUIDs, instants) their text."""
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


def _map_key(key: Any) -> str:
    converted = to_json(key)
    return converted if isinstance(converted, str) else json.dumps(converted, sort_keys=True)


class _Unsupported(Exception):
    """A form the fast path does not build (module docstring): ``edn_format`` reads it."""


def _string(token: str) -> str:
    body = token[1:-1]
    if "\\" not in body:
        return body
    if _BAD_ESCAPE.search(body):
        raise _Unsupported
    return _ESCAPE.sub(_unescape, body)


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    return chr(int(code, 16)) if code is not None else _ESCAPES[match.group(2)]


def _map(items: list[Any]) -> dict[str, Any]:
    """A map's JSON object from its items. Keys that are not keywords or strings become JSON text; a
    key that is a collection, or two keys that are one in EDN (``1`` and ``1.0``) or in JSON (``:a`` and
    ``"a"``) send the map to edn_format, whose choice then decides."""
    if len(items) & 1:
        raise HistoryError("", None, "a map with an odd number of forms")
    keys = items[::2]
    if set(map(type, keys)) != {str}:
        if any(k.__class__ is list or k.__class__ is dict for k in keys):
            raise _Unsupported
        other = [k for k in keys if k.__class__ is not str]
        if len(set(other)) != len(other):
            raise _Unsupported
        keys = [k if k.__class__ is str else json.dumps(k) for k in keys]
    result = dict(zip(keys, items[1::2], strict=True))
    if len(result) != len(keys):
        raise _Unsupported
    return result


def _set(items: list[Any]) -> list[Any]:
    for item in items:
        if item.__class__ is list or item.__class__ is dict:
            raise _Unsupported
    if len(set(items)) != len(items):
        raise _Unsupported  # equal in EDN (or only once JSON): edn_format's set decides
    return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))


class _Reader:
    """The state of one file's reading: the open containers, the layout, a form being handed on."""

    def __init__(self, source: str, limits: Limits) -> None:
        self.source = source
        self.limits = limits
        self.out: list[Any] = []  # finished operations (the items of the operation level)
        self.frames: list[tuple[int, list[Any]]] = []  # the kind and items of each open container's parent
        self.kind = 0  # the open container's kind (0: none)
        self.items: list[Any] = self.out  # its items
        self.level = 0  # how deep the operations are: 1 inside Knossos' vector, else 0
        self.layout_known = False
        self.line = 1  # for messages
        self.form_tokens: list[str] = []  # the tokens of the open operation form, from earlier pieces
        self.form_chars = 0
        self.raw: list[str] | None = None  # the tokens of a form going to edn_format
        self.raw_depth = 0
        self.raw_prefixes = 0
        self.cache: dict[str, Any] = dict(_FIXED)

    def error(self, reason: str) -> HistoryError:
        return HistoryError(self.source, None, f"unreadable EDN at line {self.line:,}: {reason}")

    def too_deep(self) -> HistoryError:
        return HistoryError(
            self.source,
            None,
            f"a value nested too deeply to read: more than {self.limits.depth} levels (at line {self.line:,}; "
            "no history needs that depth)",
        )

    def atom(self, token: str) -> Any:
        """The value of an atom the cache does not know, or a mark."""
        first = token[0]
        if first == ":":
            if _KEYWORD.fullmatch(token):
                value = token[1:]
                if len(self.cache) < _CACHE_SIZE:
                    self.cache[token] = value
                return value
            return _OTHER
        if first == '"':
            try:
                return _string(token)
            except _Unsupported:
                return _OTHER
        if _NUMBERISH.match(token):
            if len(token) > self.limits.number_chars:
                raise self.error(f"a number of {len(token):,} characters (at most {self.limits.number_chars})")
            if _INTEGER.fullmatch(token):
                return int(token.rstrip("N"))
            if _FLOAT.fullmatch(token):
                return float(token)
        return _OTHER

    def feed(self, tokens: list[str]) -> None:
        """Build the forms of one piece's tokens (ending with ``""``); finished operations go to ``out``."""
        start: int | None = 0
        if self.raw is not None:
            start = self.consume_raw(tokens, 0)
        while start is not None:
            stopped = self.fast(tokens, start)
            if stopped is None:
                return
            start = self.consume_raw(tokens, stopped)

    def fast(self, tokens: list[str], start: int) -> int | None:
        """Build values from ``tokens[start:]``. Returns None at the end of the piece, or the index of
        the token from which the operation form being read goes to edn_format (:meth:`start_raw` has
        been called). The operation-level container's items are ``out``: an operation is appended
        there like any item."""
        cache = self.cache
        frames = self.frames
        kind, items = self.kind, self.items
        level = self.level
        depth = len(frames)
        max_depth = self.limits.depth
        max_number = self.limits.number_chars
        form_start = -1  # where the open operation form began in tokens (-1: in an earlier piece)
        index = start - 1
        for token in tokens[start:] if start else tokens:
            index += 1
            value = cache.get(token, _OTHER)
            if value is _OTHER:
                if token.isdigit() and token.isascii() and len(token) <= max_number and (
                    token[0] != "0" or len(token) == 1
                ):
                    items.append(int(token))
                    continue
                value = self.atom(token)
                if value is _OTHER:
                    self.kind, self.items = kind, items
                    self.start_raw(tokens, form_start, index, depth)
                    return index
            elif value.__class__ is _Mark:
                if value is _OPEN_MARK:
                    if depth >= max_depth:
                        raise self.too_deep()
                    if depth == level:
                        form_start = index
                        if depth == 0 and not self.layout_known:
                            self.layout_known = True
                            if token == "[" or token == "(":  # Knossos' layout
                                level = self.level = 1
                                frames.append((kind, items))
                                kind, depth = _OPEN[token], 1
                                continue
                    frames.append((kind, items))
                    kind, items = _OPEN[token], []
                    depth += 1
                    continue
                if value is _CLOSE_MARK:
                    if kind not in _CLOSE[token]:
                        if not depth:
                            raise self.error(f"an unmatched {token!r}")
                        raise self.error(f"a {_NAMES[kind]} closed by {token!r}")
                    if depth <= level:  # the end of Knossos' vector: what follows is a form of its own
                        kind, items = frames.pop()
                        depth -= 1
                        level = self.level = 0
                        continue
                    try:
                        if kind == _MAP:
                            value = _map(items)
                        elif kind == _SET:
                            value = _set(items)
                        else:
                            value = items
                    except _Unsupported:
                        self.kind, self.items = kind, items
                        self.start_raw(tokens, form_start, index, depth)
                        return index
                    except HistoryError as exc:
                        raise self.error(exc.reason) from None
                    kind, items = frames.pop()
                    depth -= 1
                else:  # the end of the piece
                    break
            items.append(value)
        self.kind, self.items = kind, items
        if depth > level:
            self.keep_form(tokens, form_start)
        elif self.form_tokens:
            self.form_tokens.clear()
            self.form_chars = 0
        return None

    def keep_form(self, tokens: list[str], form_start: int) -> None:
        """The open operation form goes on in the next piece: keep its tokens (for edn_format, should it
        hold something outside the subset)."""
        if form_start >= 0:  # it began in this piece (what is kept is a finished form's)
            self.form_tokens.clear()
            self.form_chars = 0
        kept = tokens[max(form_start, 0) : -1]
        self.form_tokens.extend(kept)
        self.form_chars += sum(map(len, kept)) + len(kept)
        if self.form_chars > self.limits.form_chars:
            raise self.error(f"an operation of more than {self.limits.form_chars:,} characters")

    def start_raw(self, tokens: list[str], form_start: int, stopped: int, depth: int) -> None:
        """From ``tokens[stopped]`` on, the operation form open there (or the one it starts) goes to
        edn_format; ``depth`` containers are open before that token, and the form began at
        ``tokens[form_start]`` (-1: in an earlier piece, whose tokens ``form_tokens`` holds)."""
        level = self.level
        if depth > level:
            earlier = self.form_tokens if form_start < 0 else []
            raw = [*earlier, *tokens[max(form_start, 0) : stopped]]
            self.kind, self.items = self.frames[level]
            del self.frames[level:]
        else:
            raw = []
        self.raw = raw
        self.raw_depth = depth - level
        self.raw_prefixes = 0
        self.form_tokens.clear()
        self.form_chars = sum(map(len, raw)) + len(raw)

    def consume_raw(self, tokens: list[str], start: int) -> int | None:
        """Add ``tokens[start:]`` to the form going to edn_format until it ends; read it then and return
        the index after it (None: it goes on in the next piece)."""
        raw = self.raw
        assert raw is not None
        depth = self.raw_depth
        prefixes = self.raw_prefixes
        for index in range(start, len(tokens)):
            token = tokens[index]
            if token == "":
                self.raw_depth, self.raw_prefixes = depth, prefixes
                if self.form_chars > self.limits.form_chars:
                    raise self.error(f"an operation of more than {self.limits.form_chars:,} characters")
                return None
            raw.append(token)
            self.form_chars += len(token) + 1
            if token in _OPEN:
                depth += 1
                if depth + self.level > self.limits.depth:
                    raise self.too_deep()
                continue
            if token in _CLOSE:
                depth -= 1
                if depth < 0:  # a close that is not the form's (a prefix with nothing after it)
                    raw.pop()
                    self.finish_raw()
                    return index
                if depth:
                    continue
            elif depth:
                continue
            elif token == "^":
                prefixes += 2  # metadata, then the form it is about
                continue
            elif token[0] == "#" and not token.startswith("##"):
                prefixes += 1  # a tag or #_, then the form it applies to
                continue
            # A form ended at the operation level.
            if prefixes:
                prefixes -= 1
                if prefixes:
                    continue
            self.finish_raw()
            return index + 1
        return None

    def finish_raw(self) -> None:
        raw = self.raw
        assert raw is not None
        self.raw = None
        self.raw_depth = self.raw_prefixes = 0
        self.form_chars = 0
        text = " ".join(raw)
        try:
            forms = [to_json(form) for form in edn_format.loads_all(text)]
        except RecursionError:
            raise self.too_deep() from None
        except NotImplementedError as exc:  # an unknown #tag
            raise self.error(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - edn_format raises its own and ply's errors
            raise self.error(f"{type(exc).__name__}: {exc}") from None
        if self.level == 0:
            self.layout_known = True
        self.out.extend(forms)

    def finish(self) -> None:
        """The end of the file: nothing may be left open."""
        if self.raw is not None or self.frames:
            raise self.error("the file ends inside a form")


def read_edn(
    handle: BinaryIO,
    source: str,
    *,
    limits: Limits = Limits(),
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Any]:
    """The operation-level forms of the EDN file open as ``handle`` (bytes), as JSON values, in file
    order (module docstring). Raises :class:`~checkers.history.HistoryError` for unreadable input and
    :class:`~checkers.history.LoadTimeout` once ``deadline`` has passed."""
    reader = _Reader(source, limits)
    decoder = codecs.getincrementaldecoder("utf-8")()
    findall = _TOKEN.findall
    carry = ""  # text read but not yet taken: it goes on in what comes next
    pending = b""  # bytes read after the last whole line
    offset = 0
    while True:
        if deadline is not None and clock() > deadline:
            raise LoadTimeout(source, reader.line)
        chunk = handle.read(PIECE)
        at_end = not chunk
        data = pending + chunk if pending else chunk
        pending = b""
        if not at_end:
            cut = data.rfind(b"\n") + 1
            if cut:  # whole lines now, the rest with the next piece
                data, pending = data[:cut], data[cut:]
        try:
            text = decoder.decode(data, final=at_end)
        except UnicodeDecodeError as exc:
            raise HistoryError(source, None, f"not UTF-8: {exc.reason} at byte {offset + exc.start}") from None
        offset += len(data)
        if carry and not at_end and not _DELIMITER.search(text):  # a long token goes on: no need to cut it again
            carry += text
            if len(carry) > limits.token_chars:
                raise reader.error(f"a token of more than {limits.token_chars:,} characters")
            continue
        if carry:
            text, carry = carry + text, ""
        if not at_end and not text.endswith("\n"):
            # A piece of a long line: its last token (or comment) may go on in the next piece.
            matches = list(_TOKEN.finditer(text))
            if len(matches) > 1 and matches[-2].group(1) == "" and matches[-2].end() == len(text):
                matches.pop()  # after whitespace at the end, the end matches once more
            end = matches[-1].start()  # where the whitespace and comments before the end begin
            if ";" in text[end:]:
                cut, keep = end, len(matches) - 1  # a comment that may go on
            elif end == len(text) and len(matches) > 1:
                # A token that may go on, with the tokens right before it that nothing separates from
                # it (a character literal ``\\n`` may be the start of ``\\newline``).
                keep = len(matches) - 2
                while keep and matches[keep].start() == matches[keep].start(1):
                    keep -= 1
                cut = matches[keep].start(1)
            else:
                cut, keep = len(text), len(matches) - 1
            carry, text = text[cut:], text[:cut]
            matches = matches[:keep]
            tokens = [m.group(1) for m in matches]
            tokens.append("")
            starts = [m.start(1) for m in matches]
        else:
            tokens = findall(text)
            if len(tokens) > 1 and tokens[-2] == "":
                tokens.pop()
            starts = None
        if '"' in tokens:  # a string that goes on past this piece (or never ends)
            lone = tokens.index('"')
            if starts is None:
                starts = [m.start(1) for m in _TOKEN.finditer(text)]
            carry = text[starts[lone] :] + carry
            text = text[: starts[lone]]
            tokens = [*tokens[:lone], ""]
        if len(carry) > limits.token_chars:
            raise reader.error(f"a token of more than {limits.token_chars:,} characters")
        reader.feed(tokens)
        reader.line += text.count("\n")
        if reader.out:
            yield from reader.out
            reader.out.clear()
        if at_end:
            if carry:
                raise reader.error("a string that never ends")
            break
    reader.finish()
