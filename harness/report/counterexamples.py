"""Each checker's verdict drawn for people: a figure and tables made from its ``counterexample``.

The shapes are the checkers' (``checkers/``), recognised by their fields rather than by the checker's
name, so a renamed checker keeps its drawing and an unknown shape still shows, as JSON:

* durability (``lost``, ``missing_on_node``, ``never_written``, ``duplicates``, ``dropped``): each lost write as a bar
  from its invoke to its acknowledgement, with the final reads that missed it, on the run's axis; a
  table of when each was acknowledged and which nodes lack it;
* single leader per term (``term``, ``claims``, ``role_events``): the claimants' roles around their
  claims on one timeline, the two claims marked, the time both believed they led shaded;
* LSN order (``first``, ``violations``): the out-of-order pair, as two operations on a time axis with
  their LSNs, or as the two journal entries; every violation kind with its count;
* log (``log_anomalies``, ``timeline``): each flagged log's offsets against time (acknowledgements,
  polls' records, final polls' records, the anomalies marked), faults shaded; a table of the anomalies
  with their history lines;
* linearizability (``blocked``, ``window``, ``longest_linearization``): Porcupine's view: the
  concurrent operations around the violation as bars per process, the longest linearization found
  threaded through them in order with the state after each step, and the operation it could not take.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from harness.report.clocks import Alignment
from harness.report.data import ClientOp
from harness.report.faults import FaultView
from harness.report.links import recorded_href
from harness.report.svg import NS, Scale, Svg, short

WIDTH = 1240
LEFT = 150
RIGHT = 16
MAX_ROWS = 14
MAX_WINDOW_ROWS = 24
RAW_LIMIT = 20_000


@dataclass(frozen=True)
class Cell:
    """One table cell: text, optionally a link (relative to the run directory), a class, a tooltip."""

    text: str
    href: str | None = None
    cls: str | None = None
    title: str | None = None


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[Cell]]
    note: str | None = None


@dataclass
class CheckerView:
    """One checker's section of the report."""

    name: str
    valid: Any
    summary: str
    kind: str
    figure: Markup | None = None
    caption: str | None = None
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    raw: str | None = None


def _t(ns: Any) -> str:
    return f"{ns / NS:.3f} s" if isinstance(ns, int | float) and not isinstance(ns, bool) else "—"


def _line(file: str, line: Any) -> Cell:
    if not isinstance(line, int):
        return Cell("—")
    return Cell(f"{file}:{line}", href=recorded_href(file), cls="mono", title=f"line {line} of {file}")


def _lsn(value: Any) -> str:
    return f"[{value[0]}, {value[1]}]" if isinstance(value, list | tuple) and len(value) == 2 else "—"


def _nodes(value: Any) -> str:
    if isinstance(value, list | tuple):
        shown = [str(n) for n in value if n is not None]
        return ", ".join(shown) if shown else "—"
    return "—" if value is None else str(value)


def _raw(counterexample: Any) -> str | None:
    if counterexample is None:
        return None
    text = json.dumps(counterexample, indent=2, ensure_ascii=False, default=repr)
    if len(text) > RAW_LIMIT:
        text = text[:RAW_LIMIT] + f"\n… ({len(text) - RAW_LIMIT:,} more characters in results.json)"
    return text


def _shade(svg: Svg, scale: Scale, faults: FaultView, top: float, bottom: float) -> None:
    for span in faults.spans:
        if span.end < scale.t0 or span.start > scale.t1:
            continue
        x0, x1 = scale.clamp(span.start), scale.clamp(span.end)
        svg.rect(x0, top, max(x1 - x0, 1.5), bottom - top, f"shade f-{span.family}", span.label)


def _op_text(op: Mapping[str, Any]) -> str:
    if isinstance(op.get("operation"), str):
        return op["operation"]
    parts = [str(op.get("f", "?"))]
    if op.get("key") is not None:
        parts.append(short(op["key"], 20))
    if op.get("value") is not None:
        parts.append(short(op["value"], 24))
    if op.get("type") == "ok" and op.get("output") is not None and op.get("output") != op.get("value"):
        parts.append("→ " + short(op["output"], 24))
    return " ".join(parts)


# -- first anomaly -----------------------------------------------------------------------------------


def _evidence_time(op: Any, prefer: str = "call") -> int | None:
    if not isinstance(op, Mapping):
        return None
    value = op.get(prefer)
    if not isinstance(value, int):
        value = op.get("call")
    return value if isinstance(value, int) else None


def anomaly_time(counterexample: Any, alignment: Alignment | None) -> tuple[int, str] | None:
    """When the anomaly of one counterexample shows itself on the history's axis, and what it is."""
    if not isinstance(counterexample, Mapping):
        return None
    ce = counterexample
    if isinstance(ce.get("blocked"), Mapping):
        t = _evidence_time(ce["blocked"], "ret")
        return (t, "not linearizable") if t is not None else None
    if isinstance(ce.get("log_anomalies"), Mapping):
        found = [(t, f"log: {kind}") for kind, records in ce["log_anomalies"].items()
                 for record in (records if isinstance(records, list) else []) if isinstance(record, Mapping)
                 for t in (record.get("acked_at"), record.get("read_at"),
                           _evidence_time(record.get("append"), "ret"), _evidence_time(record.get("poll"), "ret"))
                 if isinstance(t, int)]
        return min(found) if found else None
    for kind, label in (("lost", "lost write acknowledged"), ("missing_on_node", "write missing on a node")):
        records = ce.get(kind)
        if isinstance(records, list) and records and isinstance(records[0], Mapping):
            times = [r.get("acked_at") for r in records if isinstance(r.get("acked_at"), int)]
            if times:
                return min(times), label
    for kind, key in (("never_written", "read"), ("never_written", "delivery"), ("duplicates", "second"),
                      ("dropped", "put")):
        records = ce.get(kind)
        if isinstance(records, list) and records and isinstance(records[0], Mapping):
            t = _evidence_time(records[0].get(key), "ret")
            if t is not None:
                return t, kind.replace("_", "-").rstrip("s")
    if isinstance(ce.get("claims"), list):
        times = [t for claim in ce["claims"] if (t := _claim_time(claim, alignment)) is not None]
        if len(times) >= 2:
            group = f" of group {ce['group']}" if isinstance(ce.get("group"), str) else ""
            return sorted(times)[1], f"two leaders of term {ce.get('term')}{group}"
    first = ce.get("first")
    if isinstance(first, Mapping):
        t = _evidence_time(first.get("later"), "call")
        if t is not None:
            return t, f"LSN {first.get('kind', 'violation')}"
        for name in ("later", "second", "apply"):
            event = first.get(name)
            if isinstance(event, Mapping) and alignment is not None and isinstance(event.get("wall"), int | float):
                t = alignment.to_history(str(event.get("node")), float(event["wall"]))
                if t is not None:
                    return t, f"LSN {first.get('kind', 'violation')}"
    return None


def _claim_time(claim: Any, alignment: Alignment | None) -> int | None:
    if not isinstance(claim, Mapping):
        return None
    if isinstance(claim.get("time"), int):
        return claim["time"]
    if alignment is not None and isinstance(claim.get("wall"), int | float):
        return alignment.to_history(str(claim.get("node")), float(claim["wall"]))
    return None


# -- durability ---------------------------------------------------------------------------------------


def _durability(view: CheckerView, ce: Mapping[str, Any], faults: FaultView, end: int) -> None:
    lost = [r for r in ce.get("lost") or [] if isinstance(r, Mapping)]
    if lost:
        view.figure, view.caption = _lost_figure(lost, faults, end)
        rows = []
        for record in lost:
            journals = record.get("journals") if isinstance(record.get("journals"), Mapping) else {}
            missing = sorted({str(n) for n in record.get("missing_on") or [] if n is not None}
                             | {str(n) for n in journals.get("lacking") or []})
            what = f"value {short(record.get('value'), 30)}" if "value" in record else f"GUID {short(record.get('guid'), 30)}"
            rules = sorted({rule for e in record.get("evidence") or [] if isinstance(e, Mapping)
                            for rule in e.get("rules") or []})
            rows.append([
                Cell(f"{record.get('f', 'write')} {short(record.get('key'), 20)}", cls="mono"),
                Cell(what, cls="mono"),
                Cell(_t(record.get("acked_at"))),
                _line("history.jsonl", record.get("acked_line")),
                Cell(str(record.get("node") or "—")),
                Cell(_lsn(record.get("lsn")), cls="mono"),
                Cell(", ".join(missing) or "—", cls="bad" if missing else None),
                Cell(_nodes(journals.get("applied"))),
                Cell(_nodes(journals.get("behind"))),
                Cell("; ".join(rules) or "—", cls="small"),
            ])
        view.tables.append(Table(
            "Lost writes: acknowledged ok, then missing",
            ["write", "what", "acknowledged at", "ack in history", "acked by", "LSN", "missing on",
             "applied on (journals)", "journal ends before it", "how we know"],
            rows,
            note=_more(view.stats, "lost", len(lost), every="lost_all" in ce),
        ))
    missing_on = [r for r in ce.get("missing_on_node") or [] if isinstance(r, Mapping)]
    if missing_on:
        view.tables.append(Table(
            "Acknowledged writes some node's journal never applied",
            ["key", "LSN", "acknowledged at", "ack in history", "lacking", "applied on", "behind"],
            [[Cell(short(r.get("key"), 24), cls="mono"), Cell(_lsn(r.get("lsn")), cls="mono"), Cell(_t(r.get("acked_at"))),
              _line("history.jsonl", r.get("acked_line")), Cell(_nodes(r.get("lacking")), cls="bad"),
              Cell(_nodes((r.get("journals") or {}).get("applied"))), Cell(_nodes((r.get("journals") or {}).get("behind")))]
             for r in missing_on],
            note=_more(view.stats, "missing-on-node", len(missing_on)),
        ))
    never = [r for r in ce.get("never_written") or [] if isinstance(r, Mapping)]
    if never:
        rows = []
        for r in never:
            seen = r.get("read") if isinstance(r.get("read"), Mapping) else r.get("delivery") or {}
            what = f"value {short(r.get('value'), 30)}" if "value" in r else f"GUID {short(r.get('guid'), 30)}"
            rows.append([Cell(short(r.get("key"), 24), cls="mono"), Cell(what, cls="mono"), Cell(str(r.get("node") or "—")),
                         Cell(_t(seen.get("ret") if isinstance(seen, Mapping) else None)),
                         _line("history.jsonl", seen.get("invoke_line") if isinstance(seen, Mapping) else None),
                         Cell(str(r.get("reason", "")))])
        view.tables.append(Table("Values read that nobody wrote", ["key", "what", "node", "read at", "in history", "why"],
                                 rows, note=_more(view.stats, "never-written", len(never))))
    duplicates = [r for r in ce.get("duplicates") or [] if isinstance(r, Mapping)]
    if duplicates:
        view.tables.append(Table(
            "Messages delivered twice",
            ["queue", "GUID", "why", "first delivery", "second delivery"],
            [[Cell(short(r.get("key"), 24), cls="mono"), Cell(short(r.get("guid"), 30), cls="mono"), Cell(str(r.get("reason", ""))),
              _line("history.jsonl", (r.get("first") or {}).get("complete_line")),
              _line("history.jsonl", (r.get("second") or {}).get("complete_line"))] for r in duplicates],
            note=_more(view.stats, "duplicate", len(duplicates)),
        ))
    dropped = [r for r in ce.get("dropped") or [] if isinstance(r, Mapping)]
    if dropped:
        view.tables.append(Table(
            "Messages never confirmed, gone when the final drain found the queue empty",
            ["queue", "GUID", "put in history", "deliveries", "last delivery", "why"],
            [[Cell(short(r.get("key"), 24), cls="mono"), Cell(short(r.get("guid"), 30), cls="mono"),
              _line("history.jsonl", (r.get("put") or {}).get("complete_line")), Cell(str(r.get("delivered", "—"))),
              _line("history.jsonl", ((r.get("deliveries") or [{}])[-1] or {}).get("complete_line")),
              Cell(str(r.get("rule", "")), cls="small")] for r in dropped],
            note=_more(view.stats, "dropped", len(dropped)),
        ))


def _more(stats: Mapping[str, Any], kind: str, shown: int, *, every: bool = False) -> str | None:
    anomalies = stats.get("anomalies") if isinstance(stats.get("anomalies"), Mapping) else {}
    total = anomalies.get(kind)
    if isinstance(total, int) and total > shown:
        if every:
            return (f"{shown} of {total:,} shown; results.json's checkers.durability.counterexample.lost_all "
                    "names every one (key, value, history line of its acknowledgement).")
        return f"{shown} of {total:,} shown; results.json lists the first ones, the stats count them all."
    return None


def _lost_figure(lost: Sequence[Mapping[str, Any]], faults: FaultView, end: int) -> tuple[Markup, str]:
    rows = lost[:MAX_ROWS]
    moments: list[int] = []
    for record in rows:
        write = record.get("write") if isinstance(record.get("write"), Mapping) else {}
        moments += [t for t in (write.get("call"), record.get("acked_at")) if isinstance(t, int)]
        for evidence in record.get("evidence") or []:
            read = evidence.get("read") if isinstance(evidence, Mapping) else None
            if isinstance(read, Mapping):
                moments += [t for t in (read.get("call"), read.get("ret")) if isinstance(t, int)]
    lo, hi = (min(moments), max(moments)) if moments else (0, max(end, 1))
    pad = max((hi - lo) // 5, 100_000_000)
    scale = Scale(max(lo - pad, 0), min(hi + pad, max(end, hi + 1)), LEFT, WIDTH - RIGHT)
    row_h = 44
    svg = Svg(WIDTH, label="lost writes: when they were acknowledged and the reads that missed them")
    top, bottom = 26.0, 26.0 + row_h * len(rows)
    _shade(svg, scale, faults, top, bottom)
    svg.axis(scale, top - 4, bottom, target=10)
    for i, record in enumerate(rows):
        y = top + i * row_h
        write = record.get("write") if isinstance(record.get("write"), Mapping) else {}
        what = record.get("value") if "value" in record else record.get("guid")
        svg.text(LEFT - 8, y + 23, f"{short(record.get('key'), 12)} = {short(what, 14)}", "lane-label mono", anchor="end")
        call, acked = write.get("call"), record.get("acked_at")
        if isinstance(call, int) and isinstance(acked, int):
            x0, x1 = scale.clamp(call), scale.clamp(acked)
            svg.rect(x0, y + 14, max(x1 - x0, 2), 12, "op ok",
                     f"{record.get('f', 'write')} invoked at {_t(call)}, acknowledged ok at {_t(acked)}")
            svg.path(f"M{x1:.1f},{y + 13:.1f}l-4,-5l8,0z", "ack-mark", f"acknowledged at {_t(acked)}")
            right = x1 + 150 < scale.x1
            svg.text(x1 + 6 if right else x1 - 6, y + 10, f"acknowledged {_t(acked)} by {record.get('node') or '?'}",
                     "fig-label", anchor="start" if right else "end")
        seen: dict[str, list[str]] = {}
        first_x: float | None = None
        last_x: float | None = None
        for evidence in record.get("evidence") or []:
            read = evidence.get("read") if isinstance(evidence, Mapping) else None
            if not isinstance(read, Mapping) or not isinstance(read.get("call"), int):
                continue
            r0 = scale.clamp(read["call"])
            r1 = scale.clamp(read["ret"]) if isinstance(read.get("ret"), int) else r0 + 2
            got = short(read.get("output"), 16)
            svg.rect(r0, y + 14, max(r1 - r0, 3), 12, "op missed",
                     f"final read on {evidence.get('node')} at {_t(read['call'])} returned {got}")
            seen.setdefault(got, []).append(str(evidence.get("node") or "?"))
            first_x = r0 if first_x is None else min(first_x, r0)
            last_x = r1 if last_x is None else max(last_x, r1)
        if seen and first_x is not None and last_x is not None:
            label = "final reads: " + "; ".join(f"{', '.join(dict.fromkeys(nodes))} → {got}" for got, nodes in seen.items())
            right = last_x + 6.2 * len(label) < scale.x1
            svg.text(last_x + 6 if right else first_x - 6, y + 35, label, "fig-label bad",
                     anchor="start" if right else "end", max_chars=90)
    svg.height = bottom + 8
    caption = (
        "Each row is one lost write: the green bar runs from its invoke to its ok acknowledgement (▼), the red "
        "bar is the final read that did not see it, with the node that answered and what it returned. "
        f"The axis shows {_t(scale.t0)} to {_t(scale.t1)} of the run; faults are shaded as on the timeline."
    )
    if len(lost) > MAX_ROWS:
        caption += f" The first {MAX_ROWS} of {len(lost)} listed are drawn."
    return svg.markup(), caption


# -- log ----------------------------------------------------------------------------------------------

LOG_POINT_KINDS = {"ack": ("op ok", "append acknowledged", "green"),
                   "poll": ("op pending", "record read by a poll", "grey"),
                   "final": ("op info", "record read by a final poll", "orange")}
"""How the offsets-over-time panel draws each kind of point (checkers.log ``timeline``): CSS class, what it
is, its colour for the caption."""


def _log_view(view: CheckerView, ce: Mapping[str, Any], faults: FaultView, end: int) -> None:
    panels = [p for p in ce.get("timeline") or [] if isinstance(p, Mapping)]
    if panels:
        view.figure, view.caption = _log_figure(panels, faults, end)
    anomalies = ce.get("log_anomalies") if isinstance(ce.get("log_anomalies"), Mapping) else {}
    counts = ce.get("counts") if isinstance(ce.get("counts"), Mapping) else {}
    rows = []
    for kind, records in anomalies.items():
        records = [r for r in records if isinstance(r, Mapping)] if isinstance(records, list) else []
        for k, record in enumerate(records[:5]):
            lines = sorted({line for line in _log_lines(record) if isinstance(line, int)})
            rows.append([
                Cell(str(kind) if k == 0 else "", cls="bad" if k == 0 else None),
                Cell(f"{counts.get(kind, len(records)):,}" if k == 0 and isinstance(counts.get(kind, 0), int) else ""),
                Cell(short(record.get("key"), 16), cls="mono"),
                Cell(str(record.get("offset")) if record.get("offset") is not None else "—", cls="mono"),
                Cell(str(record.get("explanation", "")), cls="small"),
                *([_line("history.jsonl", lines[0])] if lines else [Cell("—")]),
            ])
    if rows:
        view.tables.append(Table(
            "Log anomalies (the first five of each class)",
            ["class", "count", "log", "offset", "what happened", "first history line"],
            rows,
        ))


def _log_lines(record: Mapping[str, Any]) -> list[Any]:
    """The history lines one anomaly record names (its operations' and sightings')."""
    lines: list[Any] = []
    for name in ("append", "poll", "earlier", "previous"):
        op = record.get(name)
        if isinstance(op, Mapping):
            lines.append(op.get("complete_line") or op.get("invoke_line"))
    for name in ("acked_line", "read_line"):
        lines.append(record.get(name))
    for seen in record.get("seen") or []:
        if isinstance(seen, Mapping):
            lines.append(seen.get("line"))
    for value in record.get("values") or []:
        for seen in (value.get("seen") or []) if isinstance(value, Mapping) else []:
            if isinstance(seen, Mapping):
                lines.append(seen.get("line"))
    return lines


def _log_figure(panels: Sequence[Mapping[str, Any]], faults: FaultView, end: int) -> tuple[Markup, str]:
    """One panel per flagged log: time across, offset up; a dot per record seen, a ring per anomaly."""
    moments = [p[0] for panel in panels for p in list(panel.get("points") or []) + list(panel.get("anomalies") or [])
               if isinstance(p, list | tuple) and p and isinstance(p[0], int)]
    lo, hi = (min(moments), max(moments)) if moments else (0, max(end, 1))
    scale = Scale(lo, max(hi, lo + 1), LEFT, WIDTH - RIGHT)
    panel_h, gap = 160.0, 34.0
    svg = Svg(WIDTH, label="log anomalies: offsets read and acknowledged over time")
    top = 26.0
    for panel in panels:
        points = [p for p in panel.get("points") or [] if isinstance(p, list | tuple) and len(p) == 3
                  and isinstance(p[0], int) and isinstance(p[1], int)]
        marks = [p for p in panel.get("anomalies") or [] if isinstance(p, list | tuple) and len(p) == 3
                 and isinstance(p[0], int) and isinstance(p[1], int)]
        offsets = [p[1] for p in points + marks] or [0]
        low, high = min(offsets), max(max(offsets), min(offsets) + 1)
        bottom = top + panel_h

        def y(offset: int, low: int = low, high: int = high, bottom: float = bottom) -> float:
            return bottom - 6 - (offset - low) * (panel_h - 12) / (high - low)

        _shade(svg, scale, faults, top, bottom)
        svg.axis(scale, top - 4, bottom, target=10)
        svg.text(LEFT - 8, top + 12, f"log {short(panel.get('key'), 12)}", "lane-label mono", anchor="end")
        svg.text(LEFT - 8, top + 28, f"offset {high}", "fig-label", anchor="end")
        svg.text(LEFT - 8, bottom - 2, f"offset {low}", "fig-label", anchor="end")
        for t, offset, kind in points:
            cls, what, _ = LOG_POINT_KINDS.get(str(kind), ("op pending", str(kind), "grey"))
            svg.circle(scale.clamp(t), y(offset), 2.2, cls, f"{what}: offset {offset} at {_t(t)}")
        for t, offset, kind in marks:
            svg.circle(scale.clamp(t), y(offset), 5.0, "claim-mark", f"{kind} at offset {offset}, {_t(t)}")
        top = bottom + gap
    svg.height = top - gap + 8
    legend = "; ".join(f"{colour}: {what}" for _, what, colour in LOG_POINT_KINDS.values())
    caption = (
        "Each panel is one log with an anomaly: time runs across the run's axis, offsets go up. Dots are the "
        f"records seen ({legend}); red rings mark where an anomaly shows (hover for its class). Faults are "
        "shaded as on the timeline; the table below names every anomaly's history lines."
    )
    return svg.markup(), caption


# -- single leader per term ---------------------------------------------------------------------------


def _leader(view: CheckerView, ce: Mapping[str, Any], alignment: Alignment | None, faults: FaultView) -> None:
    claims = [c for c in ce.get("claims") or [] if isinstance(c, Mapping)]
    context = ce.get("role_events") if isinstance(ce.get("role_events"), Mapping) else {}
    term = ce.get("term")
    # A system with a leader per group: the conflict is in one group's term (checkers.leader).
    what = f"term {term} of group {ce['group']}" if isinstance(ce.get("group"), str) else f"term {term}"
    aligned = alignment is not None and alignment.origin is not None

    def when(node: str, event: Mapping[str, Any]) -> float | None:
        if isinstance(event.get("time"), int):
            return float(event["time"])
        if isinstance(event.get("wall"), int | float):
            if aligned:
                t = alignment.to_history(node, float(event["wall"]))
                return None if t is None else float(t)
            return float(event["wall"]) * NS
        return None

    points: dict[str, list[tuple[float, Mapping[str, Any]]]] = {}
    for node, events in context.items():
        for event in events if isinstance(events, list) else []:
            t = when(str(node), event)
            if t is not None:
                points.setdefault(str(node), []).append((t, event))
    claim_at = [(str(c.get("node")), when(str(c.get("node")), c), c) for c in claims]
    times = [t for pts in points.values() for t, _ in pts] + [t for _, t, _ in claim_at if t is not None]
    if times:
        lo, hi = min(times), max(times)
        pad = max((hi - lo) * 0.15, 0.05 * NS)
        scale = Scale(int(lo - pad), int(hi + pad), LEFT, WIDTH - RIGHT)
        nodes = sorted({*points, *(n for n, _, _ in claim_at)})
        row_h = 30
        svg = Svg(WIDTH, label=f"the leaders of {what} on one timeline")
        top = 26.0
        bottom = top + row_h * len(nodes)
        if aligned:
            _shade(svg, scale, faults, top, bottom)
        svg.axis(scale, top - 4, bottom, target=8)
        leader_spans: dict[str, tuple[float, float]] = {}
        for i, node in enumerate(nodes):
            y = top + i * row_h
            svg.text(LEFT - 8, y + 19, node, "lane-label node", anchor="end")
            pts = sorted(points.get(node, []), key=lambda p: p[0])
            for j, (t, event) in enumerate(pts):
                t_end = pts[j + 1][0] if j + 1 < len(pts) else scale.t1
                role = str(event.get("role") or event.get("event") or "?")
                cls = {"leader": "r-leader", "candidate": "r-candidate", "follower": "r-follower"}.get(role, "r-up")
                x0, x1 = scale.clamp(t), scale.clamp(t_end)
                label = f"{role} term {event.get('term')}" if event.get("term") is not None else role
                svg.rect(x0, y + 7, max(x1 - x0, 1), 16, cls,
                         f"{node} {label} (journal line {event.get('line')}, wall {event.get('wall')})")
                if x1 - x0 > 70:
                    svg.text(x0 + 4, y + 19, label, "role-label" if role == "leader" else "fig-label")
                if role == "leader" and event.get("term") == term:
                    leader_spans[node] = (t, t_end)
        for node, t, claim in claim_at:
            if t is None:
                continue
            y = top + nodes.index(node) * row_h
            x = scale.x(t)
            where = f"{claim.get('file', 'history.jsonl')}:{claim.get('line')}"
            svg.path(f"M{x:.1f},{y + 2:.1f}l5,5l-5,5l-5,-5z", "claim-mark",
                     f"{node} claims to lead term {claim.get('term')} ({where})")
            svg.text(x + 7, y + 6, f"{node} leads term {claim.get('term')}", "fig-label bad")
            leader_spans.setdefault(node, (t, t + 1))
        if len(leader_spans) >= 2:
            both_from = max(s for s, _ in leader_spans.values())
            both_to = min(e for _, e in leader_spans.values())
            if both_to > both_from:
                x0, x1 = scale.clamp(both_from), scale.clamp(both_to)
                svg.rect(x0, top, max(x1 - x0, 2), bottom - top, "conflict",
                         f"{', '.join(sorted(leader_spans))} both led {what}")
                svg.text(x0 + 3, bottom + 14, f"both leaders of {what}", "fig-label bad")
        svg.height = bottom + 22
        view.figure = svg.markup()
        clock = (f"on the run's clock ({alignment.method})" if aligned
                 else "on the nodes' own wall clocks (no alignment with the history was possible)")
        view.caption = (
            f"The claimants' role events around their claims to lead {what}, {clock}. Diamonds mark the "
            "claims; the red band is the time in which both believed they led the same term."
        )
    view.tables.append(Table(
        f"Claims to lead {what}",
        ["node", "source", "where", "node's wall clock", "on the run's clock"],
        [[Cell(str(c.get("node")), cls="node"), Cell(str(c.get("source", "?"))),
          _line(str(c.get("file") or "history.jsonl"), c.get("line")),
          Cell(f"{c['wall']:.3f}" if isinstance(c.get("wall"), int | float) else "—", cls="mono"),
          Cell(_t(_claim_time(c, alignment if aligned else None)))] for c in claims],
    ))
    conflicts = [c for c in ce.get("conflicts") or [] if isinstance(c, Mapping)]
    if len(conflicts) > 1 and any(isinstance(c.get("group"), str) for c in conflicts):
        view.tables.append(Table(
            "Every (group, term) with more than one leader",
            ["group", "term", "leaders"],
            [[Cell(str(c.get("group") or "(cluster)"), cls="mono"), Cell(str(c.get("term"))),
              Cell(_nodes(c.get("nodes")), cls="bad")] for c in conflicts],
            note=_count_note(view.stats, "conflicting_terms", len(conflicts)),
        ))
    elif len(conflicts) > 1:
        view.tables.append(Table(
            "Every term with more than one leader",
            ["term", "leaders"],
            [[Cell(str(c.get("term"))), Cell(_nodes(c.get("nodes")), cls="bad")] for c in conflicts],
            note=_count_note(view.stats, "conflicting_terms", len(conflicts)),
        ))


def _count_note(stats: Mapping[str, Any], name: str, shown: int) -> str | None:
    total = stats.get(name)
    return f"{shown} of {total:,} shown." if isinstance(total, int) and total > shown else None


# -- LSN ----------------------------------------------------------------------------------------------


def _lsn_view(view: CheckerView, ce: Mapping[str, Any], alignment: Alignment | None, faults: FaultView) -> None:
    first = ce.get("first") if isinstance(ce.get("first"), Mapping) else {}
    earlier, later = first.get("earlier"), first.get("later")
    if isinstance(earlier, Mapping) and isinstance(later, Mapping) and isinstance(earlier.get("call"), int):
        view.figure, view.caption = _lsn_pair_figure(first, earlier, later, faults)
    else:
        pair = [(name, first.get(name)) for name in ("earlier", "later", "first", "second", "operation", "apply")
                if isinstance(first.get(name), Mapping)]
        drawn = _lsn_entries_figure(first, pair, alignment, faults) if pair else None
        if drawn is not None:
            view.figure, view.caption = drawn
        if pair:
            view.tables.append(Table(
                f"The out-of-order pair ({first.get('kind', 'violation')})",
                ["", "node", "LSN", "key", "entry", "where"],
                [[Cell(name), Cell(str(e.get("node") or "—"), cls="node"), Cell(_lsn(e.get("lsn")), cls="mono bad"),
                  Cell(short(e.get("key"), 24), cls="mono"),
                  Cell(short(e.get("op") if "op" in e else _op_text(e), 60), cls="mono"),
                  _line(f"nodes/{e.get('node')}/journal.jsonl" if "wall" in e else "history.jsonl",
                        e.get("line") if "wall" in e else e.get("invoke_line"))]
                 for name, e in pair],
            ))
    violations = ce.get("violations") if isinstance(ce.get("violations"), Mapping) else {}
    counts = view.stats.get("violations") if isinstance(view.stats.get("violations"), Mapping) else {}
    rows = []
    for kind, examples in violations.items():
        examples = [e for e in examples if isinstance(e, Mapping)] if isinstance(examples, list) else []
        for k, example in enumerate(examples[:3]):
            rows.append([Cell(kind if k == 0 else ""), Cell(f"{counts.get(kind, len(examples)):,}" if k == 0 else ""),
                         Cell(str(example.get("summary", "")), cls="small")])
    if rows:
        view.tables.append(Table("Violations by kind (the first three of each)", ["kind", "count", "example"], rows))


def _entry_text(entry: Mapping[str, Any]) -> str:
    op = entry.get("op")
    what = _op_text(entry) if op is None else (
        f"{op.get('f', '?')} {short(op.get('value'), 16)}" if isinstance(op, Mapping) else short(op, 24))
    return f"LSN {_lsn(entry.get('lsn'))} · {short(entry.get('key'), 12)} · {what}"


def _lsn_entries_figure(first: Mapping[str, Any], pair: Sequence[tuple[str, Mapping[str, Any]]],
                        alignment: Alignment | None, faults: FaultView) -> tuple[Markup, str] | None:
    """Two journal entries (or an acknowledgement and an apply) that disagree about an LSN, each on its
    node's lane at the time it happened."""
    placed: list[tuple[str, str, int, Mapping[str, Any]]] = []  # (lane, name, time, entry)
    for name, entry in pair:
        if "wall" in entry:
            if alignment is None or alignment.origin is None:
                return None
            t = alignment.to_history(str(entry.get("node")), float(entry["wall"]))
            lane = f"{entry.get('node')} journal"
        else:
            t = entry.get("ret") if isinstance(entry.get("ret"), int) else entry.get("call")
            lane = f"client p{entry.get('process')}"
        if not isinstance(t, int):
            return None
        placed.append((lane, name, t, entry))
    lanes = list(dict.fromkeys(lane for lane, _, _, _ in placed))
    times = [t for _, _, t, _ in placed]
    pad = max((max(times) - min(times)) * 0.6, 50 * 1_000_000)
    scale = Scale(int(min(times) - pad), int(max(times) + pad), LEFT, WIDTH - RIGHT)
    row_h = 34
    top = 26.0
    bottom = top + row_h * len(lanes)
    svg = Svg(WIDTH, label="the two entries that disagree about an LSN")
    _shade(svg, scale, faults, top, bottom)
    svg.axis(scale, top - 4, bottom, target=8)
    box_w = 300
    for i, lane in enumerate(lanes):
        svg.text(LEFT - 8, top + i * row_h + 21, lane, "lane-label node", anchor="end")
    for lane, name, t, entry in placed:
        y = top + lanes.index(lane) * row_h
        x = scale.x(t)
        left = min(max(x - box_w / 2, scale.x0), scale.x1 - box_w)
        svg.line(x, y + 4, x, y + row_h - 4, "anomaly-mark")
        svg.rect(left, y + 8, box_w, 18, "lin blocked" if name in ("later", "second", "apply") else "lin linearized",
                 f"{name}: {_entry_text(entry)} at {_t(t)}", rx=3)
        svg.text(left + 5, y + 21, f"{name}: {_entry_text(entry)}", "bar-label", max_chars=int((box_w - 10) / 6.3))
    svg.height = bottom + 8
    caption = (f"{first.get('kind', 'violation')}: {first.get('summary', '')}. Journal entries are placed on the "
               f"run's clock ({alignment.method if alignment else 'not aligned'}).")
    return svg.markup(), caption


def _lsn_pair_figure(first: Mapping[str, Any], a: Mapping[str, Any], b: Mapping[str, Any],
                     faults: FaultView) -> tuple[Markup, str]:
    ends = [t for t in (a.get("call"), a.get("ret"), b.get("call"), b.get("ret")) if isinstance(t, int)]
    lo, hi = min(ends), max(ends)
    pad = max((hi - lo) // 6, 1_000_000)
    scale = Scale(lo - pad, hi + pad, LEFT, WIDTH - RIGHT)
    svg = Svg(WIDTH, label="the out-of-order pair of LSNs")
    top, row_h = 26.0, 34
    bottom = top + 2 * row_h
    _shade(svg, scale, faults, top, bottom)
    svg.axis(scale, top - 4, bottom, target=8)
    for i, (name, op) in enumerate((("earlier", a), ("later", b))):
        y = top + i * row_h
        svg.text(LEFT - 8, y + 21, f"{name}: p{op.get('process')}", "lane-label", anchor="end")
        x0 = scale.x(op["call"])
        x1 = scale.x(op["ret"]) if isinstance(op.get("ret"), int) else scale.x1
        svg.rect(x0, y + 8, max(x1 - x0, 2), 18, "op ok",
                 f"{_op_text(op)} on {op.get('node') or '?'}: {_t(op['call'])} to {_t(op.get('ret'))}")
        label = f"{_op_text(op)} on {op.get('node') or '?'} · LSN {_lsn(op.get('lsn'))}"
        width = 6.4 * len(label)
        if x1 - x0 > width + 8:
            svg.text(x0 + 4, y + 21, label, "bar-label")
        elif x1 + 6 + width < scale.x1:
            svg.text(x1 + 6, y + 21, label, "bar-label")
        else:
            svg.text(x0 - 6, y + 21, label, "bar-label", anchor="end")
    if isinstance(a.get("ret"), int):
        x = scale.x(a["ret"])
        svg.line(x, top, x, bottom, "anomaly-mark")
        svg.text(x + 3, bottom + 14, f"earlier completed {_t(a['ret'])}", "fig-label")
    x = scale.x(b["call"])
    svg.line(x, top, x, bottom, "anomaly-mark")
    svg.text(x - 3, top - 14 + 0, f"later invoked {_t(b['call'])}", "fig-label", anchor="end")
    svg.height = bottom + 22
    caption = (
        f"{first.get('kind', 'violation')}: the earlier operation completed before the later one was invoked, "
        f"yet its LSN {_lsn(a.get('lsn'))} is not below the later one's {_lsn(b.get('lsn'))}."
    )
    return svg.markup(), caption


# -- linearizability ----------------------------------------------------------------------------------


CONTEXT_STEPS = 8


def _context(ce: Mapping[str, Any], steps: Sequence[Mapping[str, Any]],
             ops_by_id: Mapping[int, ClientOp]) -> list[dict[str, Any]]:
    """The operations of the last :data:`CONTEXT_STEPS` linearization steps, with their times from the
    history (the counterexample names them by id only), shaped like the counterexample's window."""
    out = []
    first = max(len(steps) - CONTEXT_STEPS, 0)
    for position in range(first, len(steps)):
        op = ops_by_id.get(steps[position].get("op"))  # type: ignore[arg-type]
        if op is None or short(op.key, 60) != short(ce.get("key"), 60):
            continue  # not this key's operation: the history and results.json disagree; skip it
        out.append({
            "id": op.id, "process": op.process, "type": op.type, "call": op.call,
            "ret": op.ret if op.type in ("ok", "fail") else None,
            "operation": steps[position].get("operation"), "linearized_at": position,
        })
    return out


def _linearizability(view: CheckerView, ce: Mapping[str, Any], ops_by_id: Mapping[int, ClientOp]) -> None:
    blocked = ce.get("blocked") if isinstance(ce.get("blocked"), Mapping) else {}
    window = [w for w in ce.get("window") or [] if isinstance(w, Mapping) and isinstance(w.get("call"), int)]
    steps = [s for s in ce.get("longest_linearization") or [] if isinstance(s, Mapping)]
    shown = {w.get("id"): dict(w) for w in window}
    for op in _context(ce, steps, ops_by_id):
        shown.setdefault(op["id"], op)
    if shown and isinstance(blocked.get("call"), int):
        view.figure, view.caption = _porcupine(ce, blocked, list(shown.values()), steps)
    last = steps[-15:]
    rows = []
    if len(steps) > len(last):
        rows.append([Cell("…"), Cell(f"{len(steps) - len(last)} earlier steps"), Cell("")])
    for k, step in enumerate(last, start=len(steps) - len(last) + 1):
        rows.append([Cell(f"#{k}"), Cell(str(step.get("operation", "")), cls="mono"),
                     Cell(str(step.get("state", "")), cls="mono")])
    rows.append([Cell("✗", cls="bad"), Cell(str(blocked.get("operation") or _op_text(blocked)), cls="mono bad"),
                 Cell(f"impossible in state {ce.get('state')}", cls="bad")])
    view.tables.append(Table(
        f"The longest linearization of key {short(ce.get('key'), 30)} ({ce.get('model', 'model')})",
        ["step", "operation", "state after"], rows,
    ))


def _strip_process(text: str, process: Any) -> str:
    prefix = f"p{process} "
    return text[len(prefix):] if text.startswith(prefix) else text


def _porcupine(ce: Mapping[str, Any], blocked: Mapping[str, Any], ops: list[Mapping[str, Any]],
               steps: Sequence[Mapping[str, Any]]) -> tuple[Markup, str]:
    """Porcupine's diagram: one row per process, one column per invoke or completion in time order (so
    real-time order, which is all linearizability depends on, is exact and short operations readable)."""
    blocked_id = blocked.get("id")
    ops = sorted(ops, key=lambda o: o["call"])
    processes: list[Any] = []
    for op in ops:
        if op.get("process") not in processes:
            processes.append(op.get("process"))
    dropped = max(len(processes) - MAX_WINDOW_ROWS, 0)
    if dropped:
        keep = [blocked.get("process")] + [p for p in processes if p != blocked.get("process")]
        processes = [p for p in processes if p in keep[:MAX_WINDOW_ROWS]]
    ops = [op for op in ops if op.get("process") in processes]
    moments = sorted({op["call"] for op in ops} | {op["ret"] for op in ops if isinstance(op.get("ret"), int)})
    column = {t: i for i, t in enumerate(moments)}
    open_right = 30.0
    step = (WIDTH - RIGHT - LEFT - open_right) / max(len(moments), 1)

    def x(t: int) -> float:
        return LEFT + (column[t] + 0.5) * step

    row_h = 36
    top = 30.0
    bottom = top + row_h * len(processes)
    svg = Svg(WIDTH, label="the operations around the linearizability violation")
    for i, t in enumerate(moments):
        svg.line(x(t), top - 4, x(t), bottom, "grid", f"{_t(t)}")
        if i in (0, len(moments) - 1) or (len(moments) > 8 and i % max(len(moments) // 6, 1) == 0):
            svg.text(x(t), top - 8, _t(t), "tick", anchor="middle")
    by_row: dict[Any, list[Mapping[str, Any]]] = {}
    for op in ops:
        by_row.setdefault(op.get("process"), []).append(op)
    for row, process in enumerate(processes):
        y = top + row * row_h
        svg.rect(LEFT, y + 3, WIDTH - RIGHT - LEFT, row_h - 6, "lane-bg")
        svg.text(LEFT - 8, y + row_h - 11, f"process {process}", "lane-label", anchor="end")
    points: list[tuple[int, Mapping[str, Any]]] = []
    for op in ops:
        row = processes.index(op.get("process"))
        y = top + row * row_h
        is_info = not isinstance(op.get("ret"), int)
        x0 = x(op["call"]) - step * 0.4
        x1 = WIDTH - RIGHT if is_info else x(op["ret"]) + step * 0.4
        is_blocked = op.get("id") == blocked_id
        position = op.get("linearized_at")
        cls = ("lin blocked" if is_blocked else "lin info" if is_info
               else "lin linearized" if position is not None else "lin pending")
        title = f"p{op.get('process')} {_op_text(op)}: {op.get('type')}, {_t(op['call'])} to {_t(op.get('ret'))}"
        if position is not None:
            title += f"; step #{position + 1} of the longest linearization"
        if is_blocked:
            title += "; no linearization can take it"
        svg.rect(x0, y + 17, max(x1 - x0, 4), 13, cls, title, rx=3)
        later = [o["call"] for o in by_row[op.get("process")] if o["call"] > op["call"]]
        room = (x(min(later)) - step * 0.4 if later else WIDTH - RIGHT) - x0
        prefix = f"#{position + 1} " if position is not None else ("✗ " if is_blocked else "")
        label = prefix + _strip_process(_op_text(op), op.get("process"))
        svg.text(x0 + 1, y + 13, label, "bar-label" + (" bad" if is_blocked else ""),
                 max_chars=max(int(room / 6.4), 4), title=title)
        if position is not None:
            points.append((position, op))
    # The linearization threaded through the operations in order, each step drawn at the first column
    # within its interval not before the previous step (Porcupine's linearization points).
    points.sort(key=lambda item: item[0])
    path: list[tuple[float, float]] = []
    at = 0
    for _, op in points:
        first = column[op["call"]]
        last = column[op["ret"]] if isinstance(op.get("ret"), int) else len(moments) - 1
        at = min(max(at, first), last)
        path.append((LEFT + (at + 0.5) * step, top + processes.index(op.get("process")) * row_h + 23.5))
    svg.polyline(path, "lin-path", "the longest linearization, in order")
    for px, py in path:
        svg.circle(px, py, 3, "lin-point")
    svg.height = bottom + 8
    info = any(not isinstance(o.get("ret"), int) for o in ops)
    caption = (
        f"Porcupine's view of key {short(ce.get('key'), 30)}: the last steps of the longest linearization found "
        f"({len(steps)} steps in all) and every operation concurrent with the one it could not take (red, ✗). "
        "Columns are the invokes and completions in time order (not to scale: only their order matters); bars "
        "run from invoke to completion; #n is an operation's step in that linearization, and the dark line threads "
        f"the steps in order. After the last step the state is {ce.get('state')}, in which the red operation is "
        "impossible, and no other order of the operations completed by then does better."
    )
    if info:
        caption += " Dashed bars are info operations: they may take effect at any time after their invoke, or never."
    if dropped:
        caption += f" {dropped} more concurrent processes are not drawn."
    return svg.markup(), caption


def _unknown_keys(view: CheckerView, ce: Mapping[str, Any]) -> None:
    keys = [k for k in ce.get("unknown_keys") or [] if isinstance(k, Mapping)]
    view.tables.append(Table(
        "Keys the search could not decide",
        ["key", "why", "operations", "states explored", "longest linearization"],
        [[Cell(short(k.get("key"), 30), cls="mono"), Cell(str(k.get("reason", ""))), Cell(str(k.get("ops", "—"))),
          Cell(f"{k['states']:,}" if isinstance(k.get("states"), int) else "—"),
          Cell(f"{len(k.get('longest_linearization') or [])} steps")] for k in keys],
    ))


# -- entry point --------------------------------------------------------------------------------------


def checker_view(
    name: str,
    verdict: Mapping[str, Any],
    alignment: Alignment | None,
    faults: FaultView,
    end: int,
    ops_by_id: Mapping[int, ClientOp] | None = None,
) -> CheckerView:
    """The report section of one checker's verdict (see the module docstring)."""
    ce = verdict.get("counterexample")
    stats = verdict.get("stats") if isinstance(verdict.get("stats"), Mapping) else {}
    view = CheckerView(name=name, valid=verdict.get("valid"), summary=str(verdict.get("summary", "")),
                       kind="none", stats=dict(stats), raw=_raw(ce))
    if not isinstance(ce, Mapping) or not ce:
        return view
    try:
        if isinstance(ce.get("blocked"), Mapping):
            view.kind = "linearizability"
            _linearizability(view, ce, ops_by_id or {})
        elif "unknown_keys" in ce:
            view.kind = "linearizability-unknown"
            _unknown_keys(view, ce)
        elif "log_anomalies" in ce:
            view.kind = "log"
            _log_view(view, ce, faults, end)
        elif any(k in ce for k in ("lost", "missing_on_node", "never_written", "duplicates", "dropped")):
            view.kind = "durability"
            _durability(view, ce, faults, end)
        elif "claims" in ce:
            view.kind = "leader"
            _leader(view, ce, alignment, faults)
        elif "violations" in ce or "first" in ce:
            view.kind = "lsn"
            _lsn_view(view, ce, alignment, faults)
        else:
            view.kind = "generic"
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, StopIteration) as exc:
        # A counterexample of an unexpected shape is still shown, as JSON, with why it was not drawn.
        view.kind = "generic"
        view.figure, view.caption, view.tables = None, None, []
        view.notes.append(f"This counterexample could not be drawn ({type(exc).__name__}: {exc}); it is shown as JSON.")
    return view
