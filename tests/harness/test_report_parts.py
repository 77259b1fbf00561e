"""The report's parts on hand-made inputs: clock offsets and the journal alignment, fault spans, lenient
history reading, the SVG builder's escaping."""

from __future__ import annotations

import json

import pytest

from harness.report.clocks import NS, align, clock_offsets
from harness.report.data import (
    JournalMark,
    NemesisOp,
    journal_candidates,
    journal_marks,
    read_history,
    read_journal,
)
from harness.report.faults import fault_view
from harness.report.svg import Scale, Svg
from harness.report.timeline import RoleSpan, count_elections

NODES = ("n1", "n2", "n3")


def nemesis(f: str, value: object, result: object, call: int, kind: str = "ok", error: str | None = None,
            line: int = 1) -> NemesisOp:
    return NemesisOp(f=f, value=value, result=result, type=kind, call=call, ret=call + 10, error=error,
                     invoke_line=line, complete_line=line + 1)


def test_clock_offsets_follow_what_the_completions_report() -> None:
    ops = [
        nemesis("clock", {"kind": "bump", "deltas": {"n2": 30.0, "n3": -5.0}},
                {"offsets": {"n2": 30.0}, "probes": {"n2": 30.01}}, 100, "info", "n3: clock offset not confirmed"),
        nemesis("clock", {"kind": "strobe", "targets": ["n1"], "delta": 2.0, "period": 0.5, "duration": 4.0},
                {"nodes": ["n1"], "base": {"n1": 0.0}, "delta": 2.0, "period": 0.5, "duration": 4.0}, 200),
        nemesis("clock", {"kind": "reset", "targets": "all"}, {"nodes": ["n1", "n2"], "probes": {"n1": 0.0}}, 300),
    ]
    changes = clock_offsets(ops, NODES)
    assert [(c.node, c.offset, c.kind) for c in changes] == [
        ("n2", 30.0, "bump"), ("n1", 0.0, "strobe"), ("n1", 0.0, "reset"), ("n2", 0.0, "reset")]
    assert changes[0].probe == pytest.approx(30.01)
    assert changes[1].strobe_to == 2.0 and changes[1].until == 210 + 4 * NS


def test_an_ok_bump_without_offsets_in_its_completion_adds_its_deltas() -> None:
    ops = [nemesis("clock", {"kind": "bump", "deltas": {"n1": 10}}, None, 1),
           nemesis("clock", {"kind": "bump", "deltas": {"n1": -4}}, None, 2)]
    assert [c.offset for c in clock_offsets(ops, NODES)] == [10.0, 6.0]


def _status(node: str, role: str, term: int, call: int) -> object:
    from harness.report.data import ClientOp

    return ClientOp(id=0, process=100, f="status", key=None, value=None,
                    output={"node": node, "role": role, "term": term}, type="ok", call=call, ret=call + 1_000_000,
                    node=node, lsn=None, error=None, invoke_line=1, complete_line=2)


def test_journals_are_aligned_by_status_observations_and_clock_offsets() -> None:
    origin = 1_700_000_000.0
    skew = 30.0  # n2's clock runs 30 s ahead from t = 5 s on

    def mark(node: str, t: float, role: str, term: int, seq: int) -> JournalMark:
        wall = origin + t + (skew if node == "n2" and t >= 5 else 0.0)
        return JournalMark(node, seq, wall, "role", role, term, None, seq + 1)

    journals = {
        "n1": [mark("n1", -1.0, "leader", 1, 0), mark("n1", 8.0, "follower", 2, 1)],
        "n2": [mark("n2", -1.0, "follower", 1, 0), mark("n2", 7.5, "candidate", 2, 1), mark("n2", 8.0, "leader", 2, 2)],
    }
    status = []
    for second in range(12):
        t = second * NS
        status.append(_status("n1", "leader" if second < 8 else "follower", 1 if second < 8 else 2, t))
        role, term = ("follower", 1) if second < 8 else ("leader", 2)
        status.append(_status("n2", role, term, t + NS // 2))
    offsets = clock_offsets([nemesis("clock", {"kind": "bump", "deltas": {"n2": skew}}, {"offsets": {"n2": skew}},
                                     5 * NS - 10)], NODES)
    test = {"timings": {"started": "2023-11-14T22:13:17+00:00", "deployed_s": 2.0}}  # anchor ±0.5 s, wrong by ~1 s
    alignment = align(test, journals, status, offsets)
    assert alignment.uncertainty is not None and alignment.uncertainty <= 0.5
    assert abs(alignment.origin - origin) <= alignment.uncertainty + 1e-6
    placed = alignment.to_history("n2", origin + 8.0 + skew) / NS
    assert placed == pytest.approx(8.0, abs=alignment.uncertainty + 1e-6)
    assert "status observations" in alignment.method


def test_without_status_observations_the_start_time_anchors_the_journals() -> None:
    journals = {"n1": [JournalMark("n1", 0, 1_700_000_010.0, "role", "leader", 1, "n1", 1)]}
    test = {"timings": {"started": "2023-11-14T22:13:20+00:00", "deployed_s": 1.5}}  # 1_700_000_000 + ...
    alignment = align(test, journals, [], [])
    assert alignment.uncertainty == 0.5
    assert alignment.origin == pytest.approx(1_700_000_000 + 1.5 + 0.5)
    exact = align({"timings": {"history_started_wall": 1_700_000_002.0}}, journals, [], [])
    assert exact.to_history("n1", 1_700_000_010.0) == 8 * NS


def test_fault_spans_pair_faults_with_their_heals_per_node() -> None:
    ops = [
        nemesis("kill", {"targets": ["n1", "n2"]}, {"nodes": ["n1", "n2"]}, 10),
        nemesis("start", {"targets": ["n1"]}, {"nodes": ["n1"]}, 20),
        nemesis("partition", {"kind": "grudge", "grudge": {"n1": ["n2"]}}, {"kind": "grudge"}, 30),
        nemesis("heal", None, {"nodes": ["n1", "n2", "n3"]}, 40),
        nemesis("start", {"targets": ["n2"]}, {"nodes": ["n2"]}, 50),
        nemesis("pause", {"targets": ["n3"]}, {"nodes": ["n3"]}, 60),
    ]
    view = fault_view(ops, NODES, end=100)
    kill, partition, pause = view.spans
    assert (kill.family, kill.start, kill.end, kill.healed) == ("kill", 10, 60, True)
    assert (partition.start, partition.end, partition.healed) == (30, 50, True)
    assert (pause.end, pause.healed) == (100, False)  # never resumed: runs to the end of the history
    assert view.down == {"n1": [(10, 30)], "n2": [(10, 60)]}
    assert view.paused == {"n3": [(60, 100)]}
    assert view.families == ["partition", "kill", "pause"]


def test_faults_that_could_not_be_applied_are_listed_with_why() -> None:
    ops = [
        nemesis("latency", {"targets": ["n1"], "delay_ms": 50.0}, {"nodes": [], "unavailable": True}, 5, "info",
                "n1: netem is not available"),
        nemesis("kill", {"targets": "leader"}, None, 9, "info", "no leader is known"),
        nemesis("pause", {"targets": ["n1", "n2"]}, {"nodes": ["n1"]}, 12, "ok", "n2: no such process"),
    ]
    view = fault_view(ops, NODES, end=50)
    assert [(u.f, u.error, u.applied) for u in view.unapplied] == [
        ("latency", "n1: netem is not available", None),
        ("kill", "no leader is known", None),
        ("pause", "n2: no such process", "applied on n1"),
    ]
    assert [s.family for s in view.spans] == ["pause"]  # applied in part: n1 was paused
    assert view.paused == {"n1": [(12, 50)]}
    assert "latency" in view.families and "kill" in view.families


def test_history_reading_is_lenient_and_says_what_it_skipped() -> None:
    lines = [
        json.dumps({"index": 0, "time": 10, "process": 0, "type": "invoke", "f": "write", "key": "a", "value": 1}),
        "{not json",
        json.dumps({"index": 2, "time": 20, "process": 1, "type": "ok", "f": "read", "key": "a", "value": 1}),
        json.dumps({"index": 3, "time": 30, "process": 0, "type": "ok", "f": "write", "key": "a", "value": 1}),
        json.dumps({"index": 4, "time": 40, "process": 2, "type": "invoke", "f": "read", "key": "a", "value": None}),
    ]
    problems: list[str] = []
    client, status, nemesis_ops, events, end = read_history(lines, problems)
    assert problems == ["history.jsonl:2: bad JSON (Expecting property name enclosed in double quotes); the line is not shown",
                        "history.jsonl:3: ok completion of process 1 without an invoke"]
    assert [(op.f, op.type, op.call, op.ret) for op in client] == [("write", "ok", 10, 30), ("read", "pending", 40, None)]
    assert (status, nemesis_ops, events, end) == ([], [], 4, 40)


def test_history_read_as_bytes_falls_back_line_by_line_and_keeps_what_json_keeps() -> None:
    """The typed decoder reads good lines; each line it refuses is read again by json.loads, which keeps
    what only the strict decoder minded (NaN, invalid UTF-8 replaced) and names what it cannot use."""
    lines = [
        b'{"index":0,"time":10,"process":0,"type":"invoke","f":"write","key":"a","value":NaN}',
        b'{"index":1,"time":true,"process":1,"type":"invoke","f":"read"}',
        b'{"index":2,"time":12,"process":true,"type":"invoke","f":"read"}',
        b"",
        b'{"index":3,"time":20,"process":0,"type":"ok","f":"write","key":"a","value":"\xff","error":{"x":1}}',
        b'{"index":4,"time":30,"process":3,"type":"invoke","f":"read","key":"a","value":null}',
        '{"index":5,"time":40,"process":3,"type":"ok","f":"read","key":"a","value":"x\u2028y","node":"n1"}'.encode(),
        b'{"index":6,"time":50,"process":"nemesis","type":"invoke","f":"kill","value":["n1"]}',
    ]
    problems: list[str] = []
    client, status, nemesis_ops, events, end = read_history(lines, problems)
    assert problems == ["history.jsonl:2: no integer time or no type invoke/ok/fail/info; the line is not shown",
                        "history.jsonl:3: process must be an integer or 'nemesis', not True"]
    write, read = client
    assert (write.type, write.value != write.value, write.output, write.error) == ("ok", True, "\ufffd", '{"x": 1}')
    assert (write.invoke_line, write.complete_line) == (1, 5)
    assert (read.output, read.node, read.invoke_line, read.complete_line) == ("x\u2028y", "n1", 6, 7)
    assert [(n.f, n.type, n.error) for n in nemesis_ops] == [("kill", "pending", "no completion: the history ended first")]
    assert (status, events, end) == ([], 5, 50)


def test_journal_candidates_are_found_without_splitting_and_numbered_as_lines() -> None:
    lines = [
        {"node": "n1", "seq": 0, "wall": 1.0, "event": "start"},
        {"node": "n1", "seq": 1, "wall": 2.0, "event": "apply", "lsn": [1, 1], "key": "k", "op": "write"},
        {"node": "n1", "seq": 2, "wall": 3.0, "event": "role", "role": "leader", "term": 1, "leader": "n1"},
        {"node": "n1", "seq": 3, "wall": 4.0, "event": "apply", "lsn": [1, 2], "key": "stop", "op": "write"},
        {"node": "n1", "seq": 4, "wall": 5.0, "event": "stop"},
    ]
    text = "\n".join(json.dumps(line) for line in lines)
    for data in (text.encode(), (text + "\n").encode(), text.replace("\n", "\r\n").encode()):
        found = journal_candidates(data)
        assert [number for number, _ in found] == [1, 3, 4, 5]  # line 4 only mentions "stop": decoded, dropped
        marks = journal_marks(found, "n1", [])
        assert [(m.event, m.line) for m in marks] == [("start", 1), ("role", 3), ("stop", 5)]
        assert marks == read_journal(data.decode().splitlines(), "n1", [])
    assert journal_candidates(b"") == []


def test_svg_text_and_tooltips_are_escaped() -> None:
    svg = Svg(100, 20)
    svg.rect(0, 0, 10, 10, "op ok", title='<b onmouseover="x">&')
    svg.text(1, 2, "<script>x</script>", max_chars=8)
    markup = str(svg.markup())
    assert "<b " not in markup and "<script>" not in markup
    assert "&lt;b onmouseover=&#34;x&#34;&gt;&amp;" in markup
    assert "&lt;script…</text>" in markup


def test_scale_ticks_are_round_seconds() -> None:
    scale = Scale(0, 60 * NS, 0.0, 600.0)
    ticks = scale.ticks(8)
    assert [label for _, label in ticks] == ["0 s", "10 s", "20 s", "30 s", "40 s", "50 s", "60 s"]
    assert ticks[1][0] == pytest.approx(100.0)


def test_elections_are_the_terms_won_during_the_chaos_phase() -> None:
    def span(node: str, start: float, role: str, term: int | None) -> RoleSpan:
        return RoleSpan(node, int(start * NS), int(start * NS) + NS, role, term, None, "journal")

    spans = [
        span("n1", -2.0, "leader", 1),  # elected before the test started: not counted
        span("n2", 0.0, "follower", 1),
        span("n2", 5.0, "candidate", 2),  # a term nobody won
        span("n3", 6.0, "candidate", 3),
        span("n3", 6.5, "leader", 3),
        span("n4", 7.0, "follower", 3),
        span("n1", 20.0, "leader", 4),
        span("n1", 20.5, "leader", 4),  # the same term journalled again (a restart) is one election
        span("n5", 70.0, "leader", 5),  # after the chaos phase: not counted
    ]
    elections = count_elections(spans, 30 * NS)
    assert (elections.won, elections.unwon, elections.seconds) == (2, 1, 30.0)
    assert elections.per_minute == 4.0
    assert elections.sentence() == ("Elections during the 30 s of chaos: 2 (terms in which a node became leader, "
                                    "from the node journals), 4.0 per minute; 1 more term started without a leader.")
    assert count_elections([], 30 * NS).sentence().startswith("Elections during the 30 s of chaos: 0 ")
