"""The fast EDN reader (``checkers.edn``): the same JSON values as ``edn_format`` (through
``checkers.jepsen.to_json``) on generated forms, or both refuse; both layouts, forms and strings cut
across pieces, and the hand-over to ``edn_format`` for what lies outside the subset it builds."""

from __future__ import annotations

import io
import json
from typing import Any

import edn_format
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import checkers.edn as edn
from checkers.edn import Limits, read_edn
from checkers.history import HistoryError
from checkers.jepsen import to_json

# -- generated EDN text ----------------------------------------------------------------------------------

_NAME = st.from_regex(r"[a-z][a-z0-9_.?!*+<>=-]{0,8}", fullmatch=True)
_KEYWORD = _NAME.map(lambda name: ":" + name)
_INTEGER = st.integers(min_value=-(2**70), max_value=2**70).map(str)
_FLOAT = st.floats(allow_nan=False, allow_infinity=False).map(repr).filter(lambda t: "e" not in t or "." in t)
_ESCAPES = st.sampled_from(['\\"', "\\\\", "\\n", "\\t", "\\r", "\\b", "\\f", "\\u00e9", "\\u2603", "\\ud83d"])
_PLAIN = st.text(st.characters(blacklist_characters='"\\', blacklist_categories=("Cs",)), max_size=8)
_STRING = st.lists(st.one_of(_PLAIN, _ESCAPES), max_size=4).map(lambda parts: '"' + "".join(parts) + '"')
# Outside the subset the fast path builds: edn_format reads these.
_OTHER = st.sampled_from(
    ["foo", "a/b", "\\c", "\\newline", "1/2", "1.5M", "7N", "#inst \"2020-01-02T03:04:05Z\"", "##Inf",
     '"odd \\q escape"', "#uuid \"c3f7a0e4-0c1a-4a8e-9f4e-2b2e1c9d0a11\"", ":ns/kw", "0x1F"]
)
_SCALAR = st.one_of(_KEYWORD, _INTEGER, _FLOAT, _STRING, st.sampled_from(["nil", "true", "false"]))
_SEP = st.sampled_from([" ", ", ", "\n", " ,\n ", "  ", " ; a comment\n"])


def _join(draw: Any, parts: list[str]) -> str:
    return "".join(part + draw(_SEP) for part in parts)


@st.composite
def _form(draw: Any, depth: int = 0, other: bool = False) -> str:
    atoms = st.one_of(_SCALAR, _OTHER) if other else _SCALAR
    if depth >= 3 or draw(st.integers(0, 2)) == 0:
        return draw(atoms)
    kind = draw(st.sampled_from(["vector", "list", "map", "set"]))
    items = draw(st.lists(_form(depth + 1, other), max_size=4))
    if kind == "vector":
        return "[" + _join(draw, items) + "]"
    if kind == "list":
        return "(" + _join(draw, items) + ")"
    if kind == "set":
        return "#{" + _join(draw, [i for i in items if not i.startswith(("{", "[", "(", "#{"))]) + "}"
    keys = draw(st.lists(st.one_of(_KEYWORD, _KEYWORD, _SCALAR, atoms), min_size=len(items), max_size=len(items)))
    return "{" + _join(draw, [f"{k} {v}" for k, v in zip(keys, items, strict=True)]) + "}"


def _reference(text: str) -> list[Any] | None:
    """``edn_format``'s forms as JSON values, or None when it refuses the text."""
    try:
        return [to_json(form) for form in edn_format.loads_all(text)]
    except Exception:  # noqa: BLE001 - edn_format raises its own and ply's errors
        return None


def _fast(text: str) -> list[Any] | None:
    """Our reader's forms, or None when it refuses the text."""
    try:
        return list(read_edn(io.BytesIO(text.encode("utf-8", "surrogatepass")), "t.edn"))
    except HistoryError:
        return None


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON text: ``1``, ``1.0`` and ``true`` differ."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.lists(_form(other=False), min_size=1, max_size=5), _SEP)
def test_the_subset_reads_as_edn_format_reads_it(forms: list[str], sep: str) -> None:
    # One operation per line: each form is the value of an operation map (a bare vector first would be
    # Knossos' layout, read differently on purpose).
    text = "".join("{:v " + form + "}" + sep + "\n" for form in forms)
    expected = _reference(text)
    got = _fast(text)
    assert (got is None) == (expected is None) or (got is None and expected is not None and _deep(text))
    if got is not None and expected is not None:
        assert _same(got, expected), text


def _deep(text: str) -> bool:
    return text.count("[") + text.count("{") + text.count("(") > Limits().depth


@SETTINGS
@given(st.lists(_form(other=True), min_size=1, max_size=5))
def test_forms_outside_the_subset_read_as_edn_format_reads_them(forms: list[str]) -> None:
    text = "[" + "\n ".join("{:v " + form + "}" for form in forms) + "]\n"  # Knossos' layout
    expected = _reference(text)
    got = _fast(text)
    if expected is None:
        assert got is None, text
    else:
        assert got is not None, text
        assert _same(got, expected[0]), text


@SETTINGS
@given(st.lists(_form(other=True), min_size=1, max_size=4), st.integers(0, 200))
def test_truncated_or_spliced_text_is_refused_by_both_or_read_alike(forms: list[str], cut: int) -> None:
    text = "\n".join("{:v " + form + "}" for form in forms)
    text = text[: len(text) - cut % max(len(text), 1)]
    expected = _reference(text)
    got = _fast(text)
    if got is not None and expected is not None:
        assert _same(got, expected), text
    elif expected is None:
        assert got is None, text
    else:  # we refuse what edn_format reads: only a form that was cut mid-way may make the difference
        pytest.fail(f"refused what edn_format reads: {text!r}")


@settings(max_examples=50, deadline=None)
@given(st.lists(_form(other=True), min_size=1, max_size=6), st.integers(3, 40))
def test_pieces_that_cut_forms_tokens_and_strings_change_nothing(
    forms: list[str], piece: int
) -> None:
    text = "\n".join("{:v " + form + "}" for form in forms) + "\n"
    whole = _fast(text)
    old = edn.PIECE
    edn.PIECE = piece
    try:
        cut = _fast(text)
    finally:
        edn.PIECE = old
    assert (whole is None) == (cut is None) and (whole is None or _same(whole, cut)), text


def test_a_jepsen_line_never_goes_to_edn_format(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str) -> None:
        raise AssertionError(f"edn_format asked to read {text!r}")

    monkeypatch.setattr(edn_format, "loads_all", refuse)
    text = (
        '{:index 0, :time 12, :type :invoke, :process 3, :f :cas, :value [7 [1 2]]}\n'
        '{:index 1, :time 15, :type :fail, :process 3, :f :cas, :value [7 [1 2]], :error :cas-mismatch}\n'
        '{:index 2, :time 16, :type :info, :process :nemesis, :f :start, :value "partition \\"a\\" b\\n"}\n'
        '{:index 3, :time 17.5, :type :ok, :process 4, :f :read, :value [7 #{1 2}], :node "n1", :x nil}\n'
    )
    ops = _fast(text)
    assert ops is not None and [op["index"] for op in ops] == [0, 1, 2, 3]
    assert ops[1]["error"] == "cas-mismatch" and ops[2]["value"] == 'partition "a" b\n'
    assert ops[3] == {"index": 3, "time": 17.5, "type": "ok", "process": 4, "f": "read", "value": [7, [1, 2]],
                      "node": "n1", "x": None}


def test_record_literals_and_discards_are_handed_to_edn_format() -> None:
    text = "#jepsen.history.Op{:index 0 :f :read}\n#_ {:ignored 1} {:index 1 :f :write}\n"
    assert _fast(text) == [{"index": 0, "f": "read"}, {"index": 1, "f": "write"}]
    text = "[#jepsen.history.Op{:index 0 :f :read} {:index 1 :f :write :time #inst \"2020-01-01T00:00:00Z\"}]"
    got = _fast(text)
    assert got is not None and got[0] == {"index": 0, "f": "read"} and got[1]["index"] == 1


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{:a " + "[" * 300 + "]" * 300 + "}", "nested too deeply"),
        ("{:a " + "9" * 200 + "}", "a number of 200 characters"),
        ("{:a [1 2}", "closed by"),
        ("{:a 1} ]", "unmatched"),
        ('{:a "never ends}\n', "never ends"),
        ("{:a 1", "ends inside a form"),
        ("{:a 1 :b}", "odd number"),
    ],
)
def test_what_the_reader_refuses_is_one_line(text: str, reason: str) -> None:
    with pytest.raises(HistoryError, match=reason) as caught:
        list(read_edn(io.BytesIO(text.encode()), "t.edn"))
    assert "\n" not in str(caught.value)


def test_a_long_token_is_refused_in_bounded_memory() -> None:
    limits = Limits(token_chars=1 << 20)
    data = io.BytesIO(b"x" * (8 << 20))  # no newline, no delimiter
    with pytest.raises(HistoryError, match="a token of more than 1,048,576 characters"):
        list(read_edn(data, "t.edn", limits=limits))
    assert data.tell() <= (3 << 20)  # it stopped reading soon after the limit

