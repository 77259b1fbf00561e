"""History and journal loading: every malformed case names the file, the line and the reason; pairing
semantics of invokes and completions (FORMATS.md)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from checkers.history import (
    HistoryError,
    load_history,
    load_journal,
    load_journals,
    parse_history,
    parse_journal,
)
from tests.checkers.scenario import HistoryBuilder, JournalBuilder


def _event(index: int, process: int | str, type: str, f: str = "write", **extra) -> str:
    event = {
        "index": index,
        "time": index * 10,
        "process": process,
        "type": type,
        "f": f,
        "key": "k",
        "value": 1,
    }
    event.update(extra)
    return json.dumps(event)


def _error(lines: list[str], source: str = "h.jsonl") -> HistoryError:
    with pytest.raises(HistoryError) as info:
        parse_history(lines, source)
    return info.value


def test_bad_json_names_file_line_and_reason() -> None:
    err = _error([_event(0, 0, "invoke"), '{"index": 1, "time": '])
    assert (err.source, err.line) == ("h.jsonl", 2)
    assert err.reason.startswith("bad JSON")
    assert str(err).startswith("h.jsonl:2: bad JSON")


def test_line_that_is_not_an_object() -> None:
    err = _error(["[1, 2]"])
    assert (err.line, err.reason) == (1, "expected a JSON object, got list")


def test_empty_line_is_rejected_not_skipped() -> None:
    err = _error([_event(0, 0, "invoke"), "   "])
    assert err.line == 2 and "empty line" in err.reason


@pytest.mark.parametrize("missing", ["index", "time", "process", "type", "f"])
def test_missing_field(missing: str) -> None:
    event = json.loads(_event(0, 0, "invoke"))
    del event[missing]
    err = _error([json.dumps(event)])
    assert (err.line, err.reason) == (1, f"missing field {missing!r}")


def test_completion_without_invoke() -> None:
    err = _error([_event(0, 0, "invoke"), _event(1, 0, "ok"), _event(2, 3, "ok")])
    assert err.line == 3
    assert err.reason == "ok completion for process 3 without an invoke"


def test_process_invoking_twice() -> None:
    err = _error([_event(0, 5, "invoke"), _event(1, 5, "invoke")])
    assert err.line == 2
    assert "process 5 invokes again" in err.reason and "line 1" in err.reason


def test_process_reused_after_info() -> None:
    lines = [_event(0, 2, "invoke"), _event(1, 2, "info"), _event(2, 2, "invoke")]
    err = _error(lines)
    assert err.line == 3
    assert "process 2 invokes after its info completion on line 2" in err.reason


def test_index_out_of_order() -> None:
    err = _error([_event(0, 0, "invoke"), _event(2, 0, "ok")])
    assert (err.line, err.reason) == (2, "index is 2, expected 1 (file order)")


def test_time_backwards_warns_and_orders_by_index() -> None:
    second = json.loads(_event(1, 0, "ok"))
    second["time"] = 5
    history = parse_history([_event(0, 0, "invoke", time=7), json.dumps(second), _event(2, 1, "invoke")], "h.jsonl")
    assert history.warnings == (
        "h.jsonl:2: time goes backwards (5 after 7); real-time order is taken from the file order (index) instead",
    )
    first, open_op = history.ops
    assert (first.call, first.ret) == (0, 1)  # the indexes, not the times
    assert (open_op.call, open_op.ret) == (2, None)


def test_span_is_the_times_of_the_first_and_last_lines_with_or_without_events() -> None:
    second = json.loads(_event(1, 0, "ok"))
    second["time"] = 5
    lines = [_event(0, 0, "invoke", time=7), json.dumps(second), _event(2, 1, "invoke", time=6)]
    for keep_events in (True, False):
        assert parse_history(lines, "h.jsonl", keep_events=keep_events).span == (7, 6)  # lines, not min/max
    assert parse_history([], "h.jsonl").span is None


def test_time_forwards_keeps_the_times_and_no_warning() -> None:
    history = parse_history([_event(0, 0, "invoke", time=7), _event(1, 0, "ok", time=9)])
    assert history.warnings == ()
    assert (history.ops[0].call, history.ops[0].ret) == (7, 9)


def test_lone_nemesis_info_events_are_accepted() -> None:
    b = HistoryBuilder()
    b.event("nemesis", "info", "start", None, None)
    b.event("nemesis", "info", "start", None, "partitioned n1")
    b.event("nemesis", "info", "kill", None, None)
    b.op(0, "write", "k", 1)
    history = b.history()
    assert [(op.f, op.output, op.complete_index) for op in history.nemesis] == [
        ("start", None, 1),
        ("kill", None, None),
    ]
    assert len(history.ops) == 1


def test_invoke_extra_fields_are_kept_and_events_can_be_dropped() -> None:
    b = HistoryBuilder()
    b.op(0, "read", "k", final=True)
    b.op(1, "write", "k", 2)
    kept = b.history()
    lean = parse_history(b.lines(), keep_events=False)
    assert lean.events == () and len(kept.events) == 4
    assert [op.extra for op in lean.ops] == [{"final": True}, None]
    assert lean.ops == kept.ops


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("f", "read", "completion f 'read' does not match its invoke's 'write' (line 1)"),
        ("key", "other", "completion key 'other' does not match its invoke's 'k' (line 1)"),
    ],
)
def test_completion_must_repeat_f_and_key(field: str, value: str, reason: str) -> None:
    err = _error([_event(0, 0, "invoke"), _event(1, 0, "ok", **{field: value})])
    assert (err.line, err.reason) == (2, reason)


@pytest.mark.parametrize("lsn", [[1], [1, "2"], "1,2", [1, 2, 3], [True, 2]])
def test_bad_lsn(lsn: object) -> None:
    err = _error([_event(0, 0, "invoke"), _event(1, 0, "ok", lsn=lsn)])
    assert err.line == 2 and err.reason.startswith("lsn must be [term, seq] of two integers")


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("type", "done", "type must be one of invoke, ok, fail, info, not 'done'"),
        ("process", "p1", "process must be an integer or 'nemesis', not 'p1'"),
        ("time", -1, "time must be a non-negative integer (ns), not -1"),
        ("f", "", "f must be a non-empty string, not ''"),
        ("node", 3, "node must be a string, not 3"),
    ],
)
def test_bad_field_types(field: str, value: object, reason: str) -> None:
    event = json.loads(_event(0, 0, "invoke"))
    event[field] = value
    err = _error([json.dumps(event)])
    assert (err.line, err.reason) == (1, reason)


def test_load_history_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text(_event(0, 0, "invoke") + "\n" + _event(1, 1, "ok") + "\n", encoding="utf-8")
    with pytest.raises(HistoryError) as info:
        load_history(path)
    assert str(info.value) == f"{path}:2: ok completion for process 1 without an invoke"


def test_missing_file_and_non_utf8(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="no such file"):
        load_history(tmp_path / "absent.jsonl")
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"f": "\xe9"}\n')
    with pytest.raises(HistoryError, match="not UTF-8"):
        load_history(path)


# -- pairing semantics ---------------------------------------------------------------------------------


def test_open_invoke_becomes_info_without_return() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1)
    b.invoke(1, "write", "k", 2)
    history = b.history()
    last = history.ops[-1]
    assert (last.type, last.ret, last.complete_index) == ("info", None, None)
    assert "outstanding" in (last.error or "")
    first = history.ops[0]
    assert (first.type, first.call, first.ret, first.value) == ("ok", 0, 1, 1)


def test_info_completion_has_no_return_time() -> None:
    b = HistoryBuilder()
    b.invoke(0, "write", "k", 1)
    b.complete(0, "info", "write", "k", 1, error="timeout")
    (op,) = b.history().ops
    assert (op.type, op.ret, op.complete_index, op.error) == ("info", None, 1, "timeout")


def test_nemesis_info_does_not_retire_the_nemesis() -> None:
    b = HistoryBuilder()
    b.invoke("nemesis", "partition", None, {"n1": ["n2"]})
    b.complete("nemesis", "info", "partition", None, None, error="iptables failed")
    b.invoke("nemesis", "heal")
    b.complete("nemesis", "ok", "heal")
    history = b.history()
    assert [op.f for op in history.nemesis] == ["partition", "heal"]
    assert history.ops == ()


def test_read_output_and_write_value_on_completion_only() -> None:
    b = HistoryBuilder()
    b.invoke(0, "write", "k", None)
    b.complete(0, "ok", "write", "k", 7, lsn=(1, 3), node="n2")
    b.invoke(1, "read", "k", None)
    b.complete(1, "ok", "read", "k", 7, lsn=(1, 3))
    write, read = b.history().ops
    assert (write.value, write.lsn, write.node) == (7, (1, 3), "n2")
    assert (read.value, read.output) == (None, 7)
    assert [op.id for op in b.history().ops] == [0, 1]


def test_fail_has_no_output() -> None:
    b = HistoryBuilder()
    b.invoke(0, "read", "k")
    b.complete(0, "fail", "read", "k", 3, error="not-leader")
    (op,) = b.history().ops
    assert (op.type, op.output, op.error, op.ret) == ("fail", None, "not-leader", 1)


def test_evidence_gives_lines() -> None:
    b = HistoryBuilder()
    b.invoke(0, "write", "k", 1)
    b.invoke(1, "write", "k", 2)
    b.complete(1, "ok", "write", "k", 2)
    first, second = b.history().ops
    assert (second.evidence()["invoke_line"], second.evidence()["complete_line"]) == (2, 3)
    assert first.evidence()["complete_line"] is None


# -- journals ------------------------------------------------------------------------------------------


def _journal_error(lines: list[str]) -> HistoryError:
    with pytest.raises(HistoryError) as info:
        parse_journal(lines, "nodes/n1/journal.jsonl")
    return info.value


def _jline(seq: int, event: str, node: str = "n1", **fields) -> str:
    return json.dumps({"node": node, "seq": seq, "wall": 1.5, "event": event, **fields})


def test_journal_bad_seq() -> None:
    err = _journal_error([_jline(0, "start"), _jline(2, "start")])
    assert (err.source, err.line, err.reason) == ("nodes/n1/journal.jsonl", 2, "seq is 2, expected 1")


def test_journal_must_start_at_seq_zero() -> None:
    err = _journal_error([_jline(1, "start")])
    assert (err.line, err.reason) == (1, "seq is 1, expected 0")


def test_journal_mixed_nodes() -> None:
    err = _journal_error([_jline(0, "start"), _jline(1, "start", node="n2")])
    assert (err.line, err.reason) == (2, "node 'n2' in the journal of node 'n1'")


@pytest.mark.parametrize(
    ("event", "fields", "missing"),
    [
        ("role", {"role": "leader", "term": 1}, "'leader'"),
        ("role", {"leader": None}, "'role', 'term'"),
        ("apply", {"lsn": [1, 1], "key": "k"}, "'op'"),
        ("apply", {"op": "write"}, "'lsn', 'key'"),
    ],
)
def test_journal_role_and_apply_missing_fields(event: str, fields: dict, missing: str) -> None:
    err = _journal_error([_jline(0, "start"), _jline(1, event, **fields)])
    assert (err.line, err.reason) == (2, f"{event} event missing field {missing}")


@pytest.mark.parametrize(
    ("event", "fields", "reason"),
    [
        ("apply", {"lsn": None, "key": "k", "op": {}}, "apply event lsn must be [term, seq], not null"),
        ("apply", {"lsn": [1], "key": "k", "op": {}}, "lsn must be [term, seq] of two integers, not [1]"),
        (
            "role",
            {"role": "leader", "term": "3", "leader": "n1"},
            "role event term must be an integer, not '3'",
        ),
        ("role", {"role": None, "term": 3, "leader": None}, "role event role must be a string, not None"),
    ],
)
def test_journal_bad_role_and_apply_values(event: str, fields: dict, reason: str) -> None:
    err = _journal_error([_jline(0, event, **fields)])
    assert (err.line, err.reason) == (1, reason)


def test_journal_missing_common_field_and_bad_json() -> None:
    err = _journal_error(['{"node": "n1", "seq": 0, "event": "start"}'])
    assert err.reason == "missing field 'wall'"
    err = _journal_error([_jline(0, "start"), "{oops"])
    assert err.line == 2 and err.reason.startswith("bad JSON")


def test_load_journals_by_node_and_conflicts(tmp_path: Path) -> None:
    n1 = JournalBuilder("n1")
    n1.start()
    n1.role("leader", 1, "n1")
    n1.write(tmp_path / "nodes")
    n2 = JournalBuilder("n2")
    n2.start()
    n2.write(tmp_path / "nodes")
    loaded = load_journals(tmp_path)  # a run directory: its nodes/ is used
    assert list(loaded) == ["n1", "n2"]
    assert loaded["n1"][1].data == {"role": "leader", "term": 1, "leader": "n1"}
    assert load_journal(tmp_path / "nodes" / "n2" / "journal.jsonl")[0].event == "start"
    # A second directory whose journal claims to be n1.
    copy = tmp_path / "nodes" / "zz" / "journal.jsonl"
    copy.parent.mkdir()
    copy.write_text((tmp_path / "nodes" / "n1" / "journal.jsonl").read_text(), encoding="utf-8")
    with pytest.raises(HistoryError, match="a second journal for node 'n1'"):
        load_journals(tmp_path / "nodes")


def test_load_journals_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="no such directory of node journals"):
        load_journals(tmp_path / "absent")


@given(
    st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), max_size=12),
    st.booleans(), st.integers(1, 9), st.integers(1, 20),
)
def test_bounded_lines_gives_the_lines_or_refuses_the_first_too_long(
        lines: list[bytes], final_newline: bool, piece: int, limit: int) -> None:
    """Whatever the piece size: the same lines as splitting the whole file, or a HistoryError naming the
    first line longer than the limit."""
    import checkers.source as source

    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    expected = data.split(b"\n")
    if expected and expected[-1] == b"":
        expected.pop()
    too_long = next((n for n, line in enumerate(expected, start=1) if len(line) > limit), None)
    original = source.LINE_PIECE
    source.LINE_PIECE = piece
    try:
        if too_long is None:
            assert list(source.bounded_lines(io.BytesIO(data), "h", limit)) == expected
        else:
            with pytest.raises(HistoryError, match=rf"^h:{too_long}: a line of more than {limit:,} bytes"):
                list(source.bounded_lines(io.BytesIO(data), "h", limit))
    finally:
        source.LINE_PIECE = original


# -- the fast path and the columns (issue 29) -----------------------------------------------------------

_FIELD_VALUES = st.sampled_from([None, 0, 1, 2**70, -1, 1.5, True, "", "n1", "nemesis", [1, 2], [None, 3], {"x": 1}])


@st.composite
def _lines(draw: st.DrawFn) -> list[str]:
    """Short histories, mostly well formed, with FORMATS.md's optional fields (present, null or absent),
    fields of other names, and now and then a field of the wrong type or a missing one."""
    lines = []
    outstanding: dict[int | str, tuple[str, object]] = {}
    for index in range(draw(st.integers(1, 8))):
        process = draw(st.sampled_from([0, 1, "nemesis"]))
        if process in outstanding and draw(st.booleans()):
            f, key = outstanding.pop(process)
            kind = draw(st.sampled_from(["ok", "fail", "info"]))
        else:
            f, key = draw(st.sampled_from(["read", "write", "cas", "status", "kill"])), draw(st.sampled_from(["k", None, [1]]))
            kind = "invoke"
            outstanding[process] = (f, key)
        # Mostly in time order; now and then a time that goes backwards, or one past an int64's range.
        time = draw(st.sampled_from([index * 3] * 6 + [max(0, index * 3 - 4), 2**63 + index]))
        event: dict[str, object] = {"index": index, "time": time, "process": process, "type": kind, "f": f}
        for name in ("key", "value"):
            if draw(st.integers(0, 9)):
                event[name] = key if name == "key" else draw(_FIELD_VALUES)
        if not draw(st.integers(0, 2)):  # a node and an LSN, as an adapter writes them, mostly well formed
            event["node"] = draw(st.sampled_from(["n1", "n1", "n1", 3, None]))
            event["lsn"] = draw(st.sampled_from([[1, 2], [1, 2], [0, 7], [1, True], [1.0, 2], [2**70, 1], [1], "1", None]))
            if draw(st.booleans()):  # and the group (shard) that gave it, as a sharded system's adapter does
                event["group"] = draw(st.sampled_from(["shard-0", "shard-0", "shard-1", 3, None]))
        for name in ("node", "lsn", "error", "group", "final", "guid"):
            if not draw(st.integers(0, 4)):
                event[name] = draw(_FIELD_VALUES)
        if not draw(st.integers(0, 19)):
            event[draw(st.sampled_from(["index", "time", "process", "type", "f"]))] = draw(_FIELD_VALUES)
        lines.append(json.dumps(event))
    return lines


def _outcome(lines: list[str], keep_events: bool) -> object:
    try:
        history = parse_history(lines, "h.jsonl", keep_events=keep_events)
    except HistoryError as exc:
        return str(exc)
    return (
        [(op.to_json(), op.extra) for op in history.ops],
        [(op.to_json(), op.extra) for op in history.nemesis],
        history.warnings, history.seen, history.file_ops, history.span,
    )


def _sharded(invoke: dict, complete: dict) -> list[str]:
    """A read, then a write whose invoke and ok carry these fields beyond the required ones."""
    read = {"index": 0, "time": 0, "process": 1, "type": "invoke", "f": "read", "key": "k", "value": None}
    write = {"time": 2, "process": 0, "f": "write"}
    return [json.dumps(read), json.dumps({**write, "index": 1, "type": "invoke", **invoke}),
            json.dumps({**write, "index": 2, "type": "ok", **complete})]  # fmt: skip


_SHARD_LSN = {"node": "n1", "lsn": [1, 2], "group": "shard-0"}


@settings(max_examples=300)
@given(_lines())
@example(_sharded({"key": "k", "value": 1, **_SHARD_LSN}, {"key": "k", "value": 1, **_SHARD_LSN}))
@example(_sharded({"key": "k", "value": 1}, {"key": "k", "value": 1, **_SHARD_LSN, "group": 3}))
@example(_sharded({"key": "k", "group": "shard-0"}, {"key": "k", "group": "shard-0"}))
@example(_sharded({"key": "k", "value": 1, "group": "shard-0"}, {"key": "k", "value": 1, "group": None}))
@example(_sharded({"key": "k", "value": 1, "node": "n1", "group": "shard-0"}, {"key": "k", "value": 1, "error": "x"}))
def test_the_fast_path_reads_every_line_as_a_plain_object_does(lines: list[str]) -> None:
    # keep_events=True decodes every line as a plain object; False takes the typed fast path (and falls
    # back to the plain object for a line it does not fit): the same operations, or the same error.
    assert _outcome(lines, keep_events=False) == _outcome(lines, keep_events=True)


def test_an_operation_is_equal_and_hashed_by_what_happened_its_extra_fields_aside() -> None:
    from checkers.history import Operation

    values = (7, 3, "cas", "k", (1, 2), None, "fail", 10, 20, 4, 9, "n1", (1, 5), "cas-mismatch", {"final": True}, "g")
    made, built = Operation(*values), Operation(*values)
    assert made is not built and made == built and hash(made) == hash(built)
    assert [getattr(made, name) for name in Operation.__struct_fields__] == list(values)
    other_extra = Operation(*values[:14], None, "g")
    assert made == other_extra and hash(made) == hash(other_extra) and len({made, other_extra}) == 1
    for field_index in range(len(values)):
        if field_index == 14:
            continue
        changed = list(values)
        changed[field_index] = "other"
        assert Operation(*changed) != made, Operation.__struct_fields__[field_index]
    assert made != values and made.__eq__(values) is NotImplemented


_ANY = st.sampled_from([None, 0, 3, "k1", "", [1, 2], {"f": "write", "value": 1}])
_LSN = st.sampled_from([[1, 2], [0, 7], [3, 2**70]])
_JOURNAL_FIELDS = {  # every event's fields as the cluster's nodes write them, with well-formed values
    "apply": {"lsn": _LSN, "index": _ANY, "key": _ANY, "op": _ANY, "group": _ANY},
    "append": {"index": _ANY, "count": _ANY, "first_lsn": _ANY, "last_lsn": _ANY, "group": _ANY},
    "commit": {"index": _ANY, "lsn": _LSN, "group": _ANY},
    "role": {"role": st.sampled_from(["leader", "follower"]), "term": st.integers(0, 3), "leader": _ANY,
             "group": _ANY},
    "start": {"mode": _ANY, "term": _ANY},
    "vote": {"term": _ANY, "candidate": _ANY},
}  # fmt: skip
_WRONG = st.sampled_from([None, True, 1.5, 2**70, -1, "", "n1", [1], [1, True], [1.0, 2], [1, 2, 3], {"x": 1}])


@st.composite
def _journal_lines(draw: st.DrawFn) -> list[str]:
    """Short journals of the nodes' events, their optional fields now and then absent, in the nodes' order
    or another; about one line in eight spoiled: a field of a wrong type, missing or unknown, a seq or node
    out of place, a line that is not an object (a journal's first spoiled line is its error)."""
    lines = []
    for seq in range(draw(st.integers(1, 10))):
        event = draw(st.sampled_from(sorted(_JOURNAL_FIELDS)))
        line: dict[str, object] = {"node": "n1", "seq": seq, "wall": draw(st.sampled_from([1.5, 1700000000.123456, 2])),
                                   "event": event}  # fmt: skip
        for name, values in _JOURNAL_FIELDS[event].items():
            if name not in ("group", "index") or draw(st.booleans()):
                line[name] = draw(values)
        if not draw(st.integers(0, 7)):
            spoil = draw(st.sampled_from(["wrong", "missing", "unknown", "seq", "node", "not an object"]))
            name = draw(st.sampled_from(sorted(line)))
            if spoil in ("seq", "node"):
                line[spoil] = seq + 1 if spoil == "seq" else "n2"
            elif spoil == "wrong":
                line[name] = draw(_WRONG)
            elif spoil == "missing":
                del line[name]
            elif spoil == "unknown":
                line["granted"] = draw(_ANY)
            else:
                lines.append("[1]")
                continue
        names = list(line)
        if not draw(st.integers(0, 4)):
            names = draw(st.permutations(names))
        lines.append(json.dumps({name: line[name] for name in names}))
    return lines


def _journal_outcome(lines: list[str], typed: bool, compact: bool) -> object:
    from checkers.history import _parse_journal

    try:
        events = _parse_journal(lines, "nodes/n1/journal.jsonl", compact, {} if compact else None, typed)
    except HistoryError as exc:
        return str(exc)
    return [(e.node, e.seq, e.wall, type(e.wall), e.event, e.data, e.line) for e in events]


@settings(max_examples=400)
@given(_journal_lines(), st.booleans())
def test_the_typed_journal_path_reads_every_line_as_a_plain_object_does(lines: list[str], compact: bool) -> None:
    # typed=False decodes every line as a plain object; True decodes the four common events into their
    # structs (and falls back to the plain object for a line they do not fit): the same events, or the
    # same error.
    assert _journal_outcome(lines, True, compact) == _journal_outcome(lines, False, compact)


def test_a_journal_event_is_made_in_c_and_holds_its_fields() -> None:
    import msgspec

    from checkers.history import JournalEvent

    values = ("n2", 41, 1700000000.25, "apply", {"lsn": (3, 9), "key": "k1", "op": {"f": "write"}}, 42)
    event = JournalEvent(*values)
    assert isinstance(event, msgspec.Struct) and event == JournalEvent(*values)
    assert [getattr(event, name) for name in JournalEvent.__struct_fields__] == list(values)
    with pytest.raises(AttributeError):
        event.seq = 1  # type: ignore[misc]


def test_operation_rows_read_as_the_operations(tmp_path: Path) -> None:

    from checkers.history import Operation, load_operations

    builder = HistoryBuilder()
    builder.op(0, "write", "a", 1, node="n1", lsn=(1, 1))
    builder.op(1, "read", "b", output=None)
    builder.op(2, "cas", "a", [1, 2], type="info", error="timeout")
    builder.invoke(3, "write", "b", 5)  # never completed
    table = load_operations(builder.write(tmp_path / "history.jsonl"))
    for shard in (None, (0, 2), (1, 2)):
        ops, rows = table.operations(shard), table.operations(shard, rows=True)
        assert [op.id for op in ops] == [row.id for row in rows]
        for op, row in zip(ops, rows, strict=True):
            assert [getattr(row, name) for name in Operation.__struct_fields__] == [
                getattr(op, name) for name in Operation.__struct_fields__]
            assert row.to_json() == op.to_json()
