"""Clocks: the wall-clock offsets the nemesis applied to each node, and the journals placed on the
history's time axis.

A journal event carries ``wall``, the node's own clock (FORMATS.md): the real time plus whatever offset
the clock nemesis had set on that node (libfaketime moves only the wall clock). The history's ``time`` is
nanoseconds since the test started on the controller's monotonic clock. To draw both on one axis:

1. **Offsets** (:func:`clock_offsets`): each nemesis ``clock`` completion says what was applied per node
   (``nemesis.shell``: a bump's ``{"offsets": {node: s}}``, a strobe's ``{"base", "delta", "period",
   "duration"}``, a reset's ``{"nodes"}`` back to 0). Only what the completion reports counts: a fault
   that could not be applied on a node moved nothing there. The real time of an event is then
   ``wall - offset(node, t)``.
2. **Origin** (:func:`align`): the real wall time of history time 0. ``test.json`` gives it to the second
   (``timings.started`` + ``timings.deployed_s``: the history starts once the nodes are deployed), or
   exactly when the controller records ``timings.history_started_wall``. Status observations refine it:
   a status op that saw node X as (role R, term T) between its invoke and completion overlaps the span
   in which X's journal says X was (R, T), which bounds the origin from both sides. The origin is the
   point inside the most such bounds (a clock fault that was not reported cannot then pull it away), and
   the report says how precise it is.

A strobe flips a node's clock between two offsets faster than any journal event can be attributed to
either; events during one are placed with the strobe's base offset and the strobe is drawn as such.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from harness.report.data import ClientOp, JournalMark, NemesisOp

NS = 1_000_000_000


@dataclass(frozen=True)
class OffsetChange:
    """From history time ``time`` on, ``node``'s wall clock runs ``offset`` seconds ahead of real time.

    A strobe flips it between ``offset`` and ``strobe_to`` until ``until``.
    """

    time: int
    node: str
    offset: float
    kind: str
    line: int
    probe: float | None = None
    strobe_to: float | None = None
    until: int | None = None


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _targets(value: Any, nodes: Sequence[str]) -> list[str]:
    if value == "all":
        return list(nodes)
    if isinstance(value, list | tuple):
        return [n for n in value if isinstance(n, str)]
    return []


def clock_offsets(nemesis: Iterable[NemesisOp], nodes: Sequence[str]) -> list[OffsetChange]:
    """Every offset change the nemesis applied, in history order (see the module docstring)."""
    current: dict[str, float] = {}
    changes: list[OffsetChange] = []
    for op in nemesis:
        if op.f != "clock" or op.type == "pending":
            continue
        asked = op.value if isinstance(op.value, Mapping) else {}
        result = op.result if isinstance(op.result, Mapping) else {}
        kind = str(asked.get("kind") or result.get("kind") or "clock")
        when = op.ret if op.ret is not None else op.call
        probes = result.get("probes") if isinstance(result.get("probes"), Mapping) else {}
        set_to: dict[str, float] = {}
        strobe: dict[str, tuple[float, float, int]] = {}
        if isinstance(result.get("offsets"), Mapping):
            set_to = {n: v for n, o in result["offsets"].items() if (v := _number(o)) is not None}
        elif kind == "strobe" and isinstance(result.get("base"), Mapping):
            delta = _number(result.get("delta")) or 0.0
            duration = _number(result.get("duration")) or 0.0
            for node, base in result["base"].items():
                if (b := _number(base)) is not None:
                    set_to[node] = b
                    strobe[node] = (b + delta, b, when + int(duration * NS))
        elif kind == "reset" and (op.type == "ok" or result):
            reset = result.get("nodes") if isinstance(result.get("nodes"), list) else list(probes)
            if not reset and op.type == "ok" and not op.error:
                reset = _targets(asked.get("targets", "all"), nodes)
            set_to = {n: 0.0 for n in reset if isinstance(n, str)}
        elif kind == "bump" and op.type == "ok" and not op.error and isinstance(asked.get("deltas"), Mapping):
            # A completion that does not say what it set: an ok bump added its deltas everywhere.
            set_to = {
                n: current.get(n, 0.0) + d for n, v in asked["deltas"].items() if (d := _number(v)) is not None
            }
        for node in sorted(set_to):
            current[node] = set_to[node]
            to, _, until = strobe.get(node, (None, None, None))
            changes.append(
                OffsetChange(
                    time=when,
                    node=node,
                    offset=set_to[node],
                    kind=kind,
                    line=op.complete_line or op.invoke_line,
                    probe=_number(probes.get(node)) if isinstance(probes, Mapping) else None,
                    strobe_to=to,
                    until=until,
                )
            )
    return changes


@dataclass
class Alignment:
    """How journal wall times map onto the history's axis: ``origin`` is the real wall time (seconds) of
    history time 0; ``uncertainty`` its half-width in seconds (``None``: not aligned at all)."""

    origin: float | None
    uncertainty: float | None
    method: str
    offsets: Mapping[str, list[OffsetChange]] = field(default_factory=dict)

    def offset_at(self, node: str, time: int) -> float:
        changes = self.offsets.get(node, [])
        index = bisect.bisect_right([c.time for c in changes], time) - 1
        return changes[index].offset if index >= 0 else 0.0

    def to_history(self, node: str, wall: float) -> int | None:
        """The history time (ns) of a journal event that ``node`` stamped ``wall``; ``None`` if unaligned."""
        if self.origin is None:
            return None
        changes = self.offsets.get(node, [])
        starts = [-math.inf] + [c.time for c in changes]
        values = [0.0] + [c.offset for c in changes]
        best: tuple[float, int] | None = None
        for i, (start, offset) in enumerate(zip(starts, values, strict=True)):
            t = (wall - offset - self.origin) * NS
            end = starts[i + 1] if i + 1 < len(starts) else math.inf
            if start <= t < end:
                return int(t)
            distance = start - t if t < start else t - end
            if best is None or distance < best[0]:
                best = (distance, int(t))
        return best[1] if best is not None else None


def anchor(test: Mapping[str, Any]) -> tuple[float, float] | None:
    """(origin, half-width) from ``test.json`` alone, or ``None`` when it records no start time."""
    timings = test.get("timings") if isinstance(test.get("timings"), Mapping) else {}
    exact = _number(timings.get("history_started_wall"))
    if exact is not None:
        return exact, 0.0
    started = timings.get("started")
    if not isinstance(started, str):
        return None
    try:
        start = datetime.fromisoformat(started).timestamp()
    except ValueError:
        return None
    deployed = _number(timings.get("deployed_s")) or 0.0
    # "started" is written to the second, so the real start lies in [start, start + 1).
    return start + deployed + 0.5, 0.5


def _spans(marks: Sequence[JournalMark]) -> dict[tuple[str, int], list[tuple[float, float]]]:
    """(role, term) -> the wall spans of one node's journal in which it held them."""
    spans: dict[tuple[str, int], list[tuple[float, float]]] = {}
    roles = [m for m in marks if m.event in ("role", "start", "stop")]
    for i, mark in enumerate(roles):
        if mark.event != "role" or mark.role is None or mark.term is None:
            continue
        end = roles[i + 1].wall if i + 1 < len(roles) else math.inf
        spans.setdefault((mark.role, mark.term), []).append((mark.wall, end))
    return spans


def _best_point(intervals: Sequence[tuple[float, float]], prefer: float | None) -> tuple[float, float, int]:
    """The middle of the region covered by the most intervals (the one nearest ``prefer`` among ties):
    (point, half-width of the region, intervals covering it)."""
    points = sorted([(lo, 0) for lo, _ in intervals] + [(hi, 1) for _, hi in intervals])
    best_count, regions, count = 0, [], 0
    for i, (value, kind) in enumerate(points):
        count += 1 if kind == 0 else -1
        if kind == 0 and i + 1 < len(points):
            if count > best_count:
                best_count, regions = count, [(value, points[i + 1][0])]
            elif count == best_count:
                regions.append((value, points[i + 1][0]))
    if not regions:
        return (prefer or 0.0), math.inf, 0

    def distance(region: tuple[float, float]) -> float:
        if prefer is None:
            return 0.0
        lo, hi = region
        return 0.0 if lo <= prefer <= hi else min(abs(prefer - lo), abs(prefer - hi))

    lo, hi = min(regions, key=distance)
    if math.isfinite(lo) and math.isfinite(hi):
        point = (lo + hi) / 2  # every point of the region is as consistent; its middle errs least
    elif prefer is not None:
        point = min(max(prefer, lo), hi)
    else:
        point = lo if math.isfinite(lo) else hi
    return point, (hi - lo) / 2, best_count


def align(
    test: Mapping[str, Any],
    journals: Mapping[str, Sequence[JournalMark]],
    status: Sequence[ClientOp],
    offsets: Sequence[OffsetChange],
) -> Alignment:
    """Estimate where history time 0 falls on the real wall clock (module docstring, step 2)."""
    by_node: dict[str, list[OffsetChange]] = {}
    for change in offsets:
        by_node.setdefault(change.node, []).append(change)
    fixed = anchor(test)
    if not journals:
        return Alignment(None, None, "no node journals", by_node)
    observations = [
        op
        for op in status
        if op.type == "ok" and op.ret is not None and isinstance(op.output, Mapping)
        and isinstance(op.output.get("role"), str) and isinstance(op.output.get("term"), int)
    ]
    spans = {node: _spans(marks) for node, marks in journals.items()}
    first_wall = min((m.wall for marks in journals.values() for m in marks), default=None)
    guess = fixed[0] if fixed else first_wall
    alignment = Alignment(guess, None, "", by_node)
    bounds: list[tuple[float, float]] = []
    for _ in range(2):  # offsets are chosen with the current origin, so refine once more
        bounds = []
        for op in observations:
            node = op.output.get("node") or op.node
            held = spans.get(node, {}).get((op.output["role"], op.output["term"]))
            if not held or len(held) != 1:
                continue  # not journalled, or held twice (a restart): ambiguous
            start, end = held[0]
            offset = alignment.offset_at(node, op.call)
            # start - offset - origin <= ret  and  end - offset - origin >= call
            bounds.append((start - offset - op.ret / NS, end - offset - op.call / NS))
        if not bounds:
            break
        point, width, _ = _best_point(bounds, guess)
        alignment.origin = point
    if bounds:
        point, width, used = _best_point(bounds + ([(fixed[0] - fixed[1], fixed[0] + fixed[1])] if fixed else []),
                                          alignment.origin)
        alignment.origin = point
        alignment.uncertainty = width if math.isfinite(width) else (fixed[1] if fixed else None)
        shown = _precision(alignment.uncertainty)
        alignment.method = (
            f"journal times are node wall clocks less the clock offsets the nemesis applied, aligned with "
            f"the history by {used - (1 if fixed else 0)} of {len(bounds)} status observations{shown}"
        )
        return alignment
    if fixed is not None:
        alignment.origin, alignment.uncertainty = fixed
        alignment.method = (
            "journal times are node wall clocks less the clock offsets the nemesis applied, aligned with the "
            f"history by the run's start time in test.json{_precision(fixed[1])}"
        )
        return alignment
    alignment.origin = first_wall
    alignment.method = (
        "journal times are node wall clocks; test.json records no start time and there are no status "
        "observations, so the first journal event is drawn at time 0"
    )
    return alignment


def _precision(width: float | None) -> str:
    if width is None or not math.isfinite(width):
        return ""
    if width < 0.001:
        return ", to within 1 ms"
    if width < 1:
        return f", to within ±{width * 1000:.0f} ms"
    return f", to within ±{width:.1f} s"
