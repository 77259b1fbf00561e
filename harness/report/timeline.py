"""The report's timeline: one time axis with the nemesis faults, every node's role and term, the clients'
operations, latency and throughput, with the faults shaded across all of them.

Large histories stay readable and small (the figure must stay usable at 100,000 operations):

* operation bars are drawn for at most ``max_bars`` operations: all of them when the run is that small,
  otherwise a window of consecutive operations around the first anomaly a checker reported (or the
  first ones, when there is none), drawn in a second figure on that window's own axis; the main figure
  marks the window, and :attr:`Timeline.window_sentence` says in words what is shown;
* latency is one dot per operation up to ``max_dots`` operations, and beyond that the median, 99th
  percentile and maximum of each time bucket;
* throughput is always per bucket (completions per second, stacked ok / fail / info).

Rows of operation bars are *lanes*, not processes: a client that gives up on an operation (``info``)
continues as a new process id (FORMATS.md), so processes are packed greedily into as few lanes as never
overlap in time, each labelled with the processes it holds.

The caption under the figure counts the run's elections (:func:`count_elections`): the terms in which some
node became leader during the chaos phase, per minute of it, and the terms that were started but never
won (split votes, failed ballots). A bug that lives in elections gets one chance per election, so this is
the figure that says how hard a run pressed on them (docs/nemesis.md, "Election storms").

A system with a leader per *group* (a storage shard, a partition, a queue: journal ``role`` events with a
``group``, status observations with ``groups``) gets a lane per group under the node lanes, showing which
node led it when (two leaders of one group at once are drawn one above the other); with more than
:data:`MAX_GROUP_LANES` groups the busiest (most leaderships) are drawn, the caption says how many are
not, and a second figure with every group's lane is folded under the first (:func:`all_group_lanes`). The node lanes keep the cluster-level roles, and the caption counts each group's elections too
(:func:`count_group_elections`).

A run with a known bug switched on adds how often it gave the bug a chance (its *opportunities*, which
the DB plugin counts and ``results.json`` keeps: :mod:`harness.opportunities`), so that a run that missed
its bug says whether the bug was reachable at all.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from harness.opportunities import run_sentence
from harness.report.clocks import Alignment, OffsetChange
from harness.report.data import ClientOp, JournalMark, RunData
from harness.report.faults import FaultView, family_of
from harness.report.svg import NS, Scale, Svg, nice_max, seconds_label, short

WIDTH = 1240
LEFT = 112
RIGHT = 14
LANE_H = 16
NODE_H = 18
BAR_ROW_H = 9
LATENCY_H = 130
THROUGHPUT_H = 80
GAP = 20
MAX_BARS = 1500
MAX_DOTS = 6000
MAX_LANES = 64
BUCKETS = 240
MAX_GROUP_LANES = 8
GROUP_H = 16


@dataclass(frozen=True)
class RoleSpan:
    """A node held ``role`` (``leader``, ``follower``, ``candidate``; ``up``: started, no role yet;
    ``down``: stopped; ``unreachable``: status polls failed) in ``term`` from ``start`` to ``end``."""

    node: str
    start: int
    end: int
    role: str
    term: int | None
    leader: str | None
    source: str
    group: str | None = None  # the shard, partition or queue; None: the cluster-level group


@dataclass
class Window:
    """Which operations get bars: ``ops`` (in invoke order) over ``[start, end]``."""

    ops: list[ClientOp]
    start: int
    end: int
    complete: bool
    sentence: str


@dataclass
class Timeline:
    """The figures and the sentences that explain them."""

    main: Svg
    window: Svg | None
    window_sentence: str
    latency_sentence: str
    roles_sentence: str
    spans: list[RoleSpan] = field(default_factory=list)
    elections: Elections | None = None
    group_elections: dict[str, Elections] = field(default_factory=dict)
    """Each group's elections, where the system has a leader per group."""
    all_groups: Svg | None = None
    """Every group's lane, when the main figure draws only the busiest (the report folds it away)."""
    opportunities_sentence: str = ""
    """How often the run gave its known bug a chance (``results.json``'s ``opportunities``), or ``""``."""


@dataclass(frozen=True)
class Elections:
    """The elections of a run's chaos phase (history time 0 to ``seconds``), read from its role spans.

    ``won`` counts the distinct terms in which some node became leader during the phase (the leader
    elected before the test started does not count); ``unwon`` the terms some node entered in that
    phase without anyone leading them (a candidate that lost, a split vote, a ballot that timed out).
    """

    won: int
    unwon: int
    seconds: float
    source: str

    @property
    def per_minute(self) -> float:
        return self.won * 60.0 / self.seconds if self.seconds > 0 else 0.0

    def sentence(self) -> str:
        plural = "s" if self.unwon != 1 else ""
        unwon = f"; {self.unwon} more term{plural} started without a leader" if self.unwon else ""
        return (f"Elections during the {self.seconds:g} s of chaos: {self.won} (terms in which a node became "
                f"leader, from the {self.source}), {self.per_minute:.1f} per minute{unwon}.")


def _ms(ns: float) -> str:
    ms = ns / 1e6
    return f"{ms:.0f} ms" if ms >= 100 else f"{ms:.1f} ms" if ms >= 1 else f"{ms:.3f} ms"


def _decade(ns: float) -> str:
    """A power of ten of nanoseconds as an axis label: ``100 µs``, ``10 ms``, ``1 s``."""
    for unit, size in (("s", NS), ("ms", 1e6), ("µs", 1e3)):
        if ns >= size:
            return f"{ns / size:g} {unit}"
    return f"{ns:g} ns"


def _at(t: int) -> str:
    return f"{t / NS:.3f} s"


def describe_op(op: ClientOp) -> str:
    """``write k1 42``, ``read k1 → 42``, ``cas k1 [1,2]``: what a client asked and (ok) got."""
    parts = [op.f]
    if op.key is not None:
        parts.append(short(op.key, 24))
    if op.value is not None:
        parts.append(short(op.value, 32))
    if op.type == "ok" and op.output is not None and op.output != op.value:
        parts.append("→ " + short(op.output, 32))
    return " ".join(parts)


def _op_title(op: ClientOp) -> str:
    took = f" after {_ms(op.ret - op.call)}" if op.ret is not None else ""
    where = f" on {op.node}" if op.node else ""
    error = f" ({short(op.error, 60)})" if op.error and op.type != "ok" else ""
    return f"p{op.process} {describe_op(op)}: {op.type}{took}{where}{error} · line {op.invoke_line}"


# -- roles -------------------------------------------------------------------------------------------


def journal_roles(
    journals: Mapping[str, Sequence[JournalMark]], alignment: Alignment, end: int
) -> list[RoleSpan]:
    """Role spans from the journals' role/start/stop events, placed on the history axis. A role event of a
    group starts a span of that group, held until the node's next event of the group, start or stop."""
    spans: list[RoleSpan] = []
    for node, marks in journals.items():
        every = [(alignment.to_history(node, m.wall), m) for m in marks]
        every = [(t, m) for t, m in every if t is not None]
        placed = [(t, m) for t, m in every if m.group is None]
        groups = sorted({m.group for _, m in every if m.group is not None})
        for group in groups:
            mine = [(t, m) for t, m in every if m.group == group or m.event in ("start", "stop")]
            for i, (t, mark) in enumerate(mine):
                if mark.group != group:
                    continue
                until = mine[i + 1][0] if i + 1 < len(mine) else max(end, t)
                spans.append(RoleSpan(node, t, max(until, t), mark.role or "?", mark.term, mark.leader,
                                      "journal", group))
        for i, (t, mark) in enumerate(placed):
            until = placed[i + 1][0] if i + 1 < len(placed) else max(end, t)
            if mark.event == "stop":
                role, term, leader = "down", None, None
            elif mark.event == "start":
                role, term, leader = "up", None, None
            else:
                role, term, leader = mark.role or "?", mark.term, mark.leader
            spans.append(RoleSpan(node, t, max(until, t), role, term, leader, "journal"))
    return spans


def status_roles(status: Sequence[ClientOp], end: int) -> list[RoleSpan]:
    """Role spans from the status pollers' observations (each held until the next one of its node)."""
    by_node: dict[str, list[ClientOp]] = {}
    for op in status:
        output = op.output if isinstance(op.output, Mapping) else {}
        node = output.get("node") or op.node
        if isinstance(node, str):
            by_node.setdefault(node, []).append(op)
    spans: list[RoleSpan] = []
    for node, ops in by_node.items():
        ops.sort(key=lambda op: op.ret if op.ret is not None else op.call)
        for i, op in enumerate(ops):
            t = op.ret if op.ret is not None else op.call
            nxt = ops[i + 1] if i + 1 < len(ops) else None
            until = (nxt.ret if nxt.ret is not None else nxt.call) if nxt else end
            output = op.output if isinstance(op.output, Mapping) else {}
            if op.type == "ok" and isinstance(output.get("role"), str):
                term = output.get("term") if isinstance(output.get("term"), int) else None
                leader = output.get("leader") if isinstance(output.get("leader"), str) else None
                spans.append(RoleSpan(node, t, until, output["role"], term, leader, "status"))
            else:
                spans.append(RoleSpan(node, t, until, "unreachable", None, None, "status"))
            groups = output.get("groups") if op.type == "ok" else None
            for entry in groups if isinstance(groups, list) else ():
                if not isinstance(entry, Mapping) or not isinstance(entry.get("group"), str):
                    continue
                term = entry.get("term") if isinstance(entry.get("term"), int) else None
                leader = entry.get("leader") if isinstance(entry.get("leader"), str) else None
                role = entry.get("role") if isinstance(entry.get("role"), str) else "?"
                spans.append(RoleSpan(node, t, until, role, term, leader, "status", entry["group"]))
    return spans


def count_elections(spans: Sequence[RoleSpan], chaos_end: int) -> Elections:
    """Elections in ``[0, chaos_end]`` (ns, history axis): terms some node started to lead in that time,
    and terms entered there that nobody led at any time (:class:`Elections`). The cluster-level group's
    (spans of a group are counted by :func:`count_group_elections`)."""
    led: set[int] = set()
    won: set[int] = set()
    entered: set[int] = set()
    for span in spans:
        if span.term is None or span.group is not None:
            continue
        if span.role == "leader":
            led.add(span.term)
        if 0 <= span.start <= chaos_end:
            entered.add(span.term)
            if span.role == "leader":
                won.add(span.term)
    sources = {span.source for span in spans}
    source = "node journals" if sources == {"journal"} else "status observations" if sources else "nothing"
    return Elections(len(won), len(entered - led), chaos_end / NS, source)


def count_group_elections(spans: Sequence[RoleSpan], chaos_end: int) -> dict[str, Elections]:
    """:func:`count_elections` for each group's spans, groups in name order (empty: no groups)."""
    by_group: dict[str, list[RoleSpan]] = {}
    for span in spans:
        if span.group is not None:
            by_group.setdefault(span.group, []).append(span)
    return {group: count_elections([replace(s, group=None) for s in by_group[group]], chaos_end)
            for group in sorted(by_group)}


def groups_sentence(elections: Mapping[str, Elections], drawn: Sequence[str]) -> str:
    """The caption's words on the groups: each group's elections (the busiest first, at most
    :data:`MAX_GROUP_LANES` named) and which groups have lanes."""
    if not elections:
        return ""
    busiest = sorted(elections, key=lambda g: (-elections[g].won, group_order(g)))
    seconds = next(iter(elections.values())).seconds
    total = sum(e.won for e in elections.values())
    rate = total * 60.0 / seconds if seconds > 0 else 0.0
    named = ", ".join(f"{g} {elections[g].won}" for g in busiest[:MAX_GROUP_LANES])
    more = len(busiest) - MAX_GROUP_LANES
    rest = f" and {more} more" if more > 0 else ""
    lanes = (f"; the {len(drawn)} with the most leaderships have lanes" if len(drawn) < len(elections)
             else "; each has a lane")
    return (f"Elections per group ({len(elections)} groups, {total} in all, {rate:.1f} per minute): "
            f"{named}{rest}{lanes}.")


def busiest_groups(spans: Sequence[RoleSpan], limit: int = MAX_GROUP_LANES) -> list[str]:
    """The groups to draw lanes for: at most ``limit``, those with the most leader spans (changes of
    leadership), in name order."""
    counts: dict[str, int] = {}
    for span in spans:
        if span.group is not None:
            counts[span.group] = counts.get(span.group, 0) + (span.role == "leader")
    chosen = sorted(counts, key=lambda g: (-counts[g], group_order(g)))[:limit]
    return sorted(chosen, key=group_order)


def group_order(group: str) -> tuple[tuple[int, int | str], ...]:
    """Groups in natural order: shard-2 before shard-10."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", group) if part)


# -- window ------------------------------------------------------------------------------------------


def choose_window(ops: Sequence[ClientOp], focus: tuple[int, str] | None, max_bars: int) -> Window:
    """All operations, or ``max_bars`` consecutive ones (by invoke) around ``focus`` or at the start."""
    if not ops:
        return Window([], 0, 0, True, "The history holds no client operations.")
    total = len(ops)
    if total <= max_bars:
        end = max(op.ret if op.ret is not None else op.call for op in ops)
        return Window(list(ops), 0, end, True, f"Every one of the {total:,} client operations is drawn as a bar.")
    ordered = sorted(ops, key=lambda op: op.call)
    if focus is not None:
        t, what = focus
        index = next((i for i, op in enumerate(ordered) if op.call >= t), total - 1)
        first = min(max(index - max_bars // 2, 0), total - max_bars)
    else:
        first = 0
    chosen = ordered[first : first + max_bars]
    start = chosen[0].call
    stop = max(max(op.ret if op.ret is not None else op.call for op in chosen), chosen[-1].call)
    around = (
        f"around the first anomaly ({focus[1]} at {_at(focus[0])})" if focus is not None else "from the start of the run"
    )
    sentence = (
        f"Bars are drawn for {len(chosen):,} of the {total:,} client operations: those invoked from "
        f"{_at(start)} to {_at(chosen[-1].call)}, {around}. The window is marked on the timeline above; "
        f"latency and throughput there cover the whole run."
    )
    return Window(chosen, start, stop, False, sentence)


def _lanes(ops: Sequence[ClientOp], end: int) -> tuple[dict[object, int], list[list[object]]]:
    """Pack processes into lanes that never overlap in time: (process -> lane, lane -> processes)."""
    extent: dict[object, list[int]] = {}
    for op in ops:
        last = op.ret if op.ret is not None else end
        span = extent.setdefault(op.process, [op.call, last])
        span[0] = min(span[0], op.call)
        span[1] = max(span[1], last)
    lane_end: list[int] = []
    lane_of: dict[object, int] = {}
    members: list[list[object]] = []
    for process, (first, last) in sorted(extent.items(), key=lambda item: (item[1][0], str(item[0]))):
        for lane, busy_until in enumerate(lane_end):
            if busy_until < first:
                lane_end[lane] = last
                lane_of[process] = lane
                members[lane].append(process)
                break
        else:
            lane_of[process] = len(lane_end)
            lane_end.append(last)
            members.append([process])
    return lane_of, members


# -- drawing -----------------------------------------------------------------------------------------


ROLE_CLASS = {"leader": "r-leader", "candidate": "r-candidate", "follower": "r-follower", "up": "r-up",
              "down": "r-down", "unreachable": "r-unreachable"}


def _draw_fault_lanes(svg: Svg, scale: Scale, faults: FaultView, y: float) -> float:
    for family in faults.families:
        svg.text(LEFT - 8, y + LANE_H - 4, family, "lane-label", anchor="end")
        svg.rect(scale.x0, y + 1, scale.x1 - scale.x0, LANE_H - 2, "lane-bg")
        for span in faults.spans:
            if span.family != family or span.end < scale.t0 or span.start > scale.t1:
                continue
            x0, x1 = scale.clamp(span.start), scale.clamp(span.end)
            healed = "" if span.healed else "; never healed"
            partial = f"; {span.partial}" if span.partial else ""
            title = f"{span.label}: {_at(span.start)} to {_at(span.end)}{healed}{partial} · line {span.line}"
            svg.rect(x0, y + 2, max(x1 - x0, 2), LANE_H - 4, f"f-{family} band", title, rx=2)
            if x1 - x0 > 40:
                svg.text(x0 + 3, y + LANE_H - 5, span.label, "band-label", max_chars=int((x1 - x0 - 6) / 5.6))
        y += LANE_H
    families = faults.families
    for item in faults.unapplied:
        family = family_of(item.f)
        if scale.t0 <= item.time <= scale.t1 and family in families:
            row_top = y - (len(families) - families.index(family)) * LANE_H
            svg.text(scale.x(item.time), row_top + LANE_H - 3, "✕", "unapplied", anchor="middle",
                     title=f"not applied: {item.description}: {item.error}")
    return y


def _draw_node_lanes(svg: Svg, scale: Scale, nodes: Sequence[str], spans: Sequence[RoleSpan],
                     faults: FaultView, offsets: Sequence[OffsetChange], y: float) -> float:
    by_node: dict[str, list[RoleSpan]] = {}
    for span in spans:
        by_node.setdefault(span.node, []).append(span)
    for node in nodes:
        svg.text(LEFT - 8, y + NODE_H - 5, node, "lane-label node", anchor="end")
        svg.rect(scale.x0, y + 1, scale.x1 - scale.x0, NODE_H - 2, "lane-bg")
        for span in by_node.get(node, []):
            if span.end < scale.t0 or span.start > scale.t1:
                continue
            x0, x1 = scale.clamp(span.start), scale.clamp(span.end)
            term = f" term {span.term}" if span.term is not None else ""
            leader = f", leader {span.leader}" if span.leader and span.role != "leader" else ""
            title = f"{node} {span.role}{term}{leader}: {_at(span.start)} to {_at(span.end)} ({span.source})"
            svg.rect(x0, y + 3, max(x1 - x0, 1), NODE_H - 6, ROLE_CLASS.get(span.role, "r-other"), title)
            if span.role == "leader" and x1 - x0 > 26:
                svg.text((x0 + x1) / 2, y + NODE_H - 6, f"T{span.term}" if span.term is not None else "L",
                         "role-label", anchor="middle")
        for kind, table in (("down", faults.down), ("paused", faults.paused)):
            for start, end in table.get(node, []):
                if end < scale.t0 or start > scale.t1:
                    continue
                x0, x1 = scale.clamp(start), scale.clamp(end)
                what = "killed" if kind == "down" else "paused"
                svg.rect(x0, y + 1, max(x1 - x0, 1), NODE_H - 2, f"o-{kind}",
                         f"{node} {what} by the nemesis: {_at(start)} to {_at(end)}")
        for change in offsets:
            if change.node == node and scale.t0 <= change.time <= scale.t1:
                x = scale.x(change.time)
                strobe = f", strobing to {change.strobe_to:+.3f} s" if change.strobe_to is not None else ""
                svg.path(f"M{x:.1f},{y + 1:.1f}l4,0l-4,6z", "clock-mark",
                         f"{node} clock {change.offset:+.3f} s from {_at(change.time)} ({change.kind}{strobe})")
        y += NODE_H
    return y


def _draw_group_lanes(svg: Svg, scale: Scale, spans: Sequence[RoleSpan], groups: Sequence[str],
                      y: float) -> float:
    """One lane per group in ``groups``: who led it when (a leader's spans, labelled with the node and the
    term); a leadership that overlaps another node's of the same group is drawn in the lane's lower half."""
    for group in groups:
        svg.text(LEFT - 8, y + GROUP_H - 4, short(group, 14), "lane-label", anchor="end")
        svg.rect(scale.x0, y + 1, scale.x1 - scale.x0, GROUP_H - 2, "lane-bg")
        leads = sorted((s for s in spans if s.group == group and s.role == "leader"), key=lambda s: s.start)
        held: list[RoleSpan] = []  # the spans drawn in the upper half, to find overlaps
        for span in leads:
            if span.end < scale.t0 or span.start > scale.t1:
                continue
            x0, x1 = scale.clamp(span.start), scale.clamp(span.end)
            overlap = any(o.node != span.node and o.start < span.end and span.start < o.end for o in held)
            top, height = (y + GROUP_H / 2, GROUP_H / 2 - 1) if overlap else (y + 2, GROUP_H - 4)
            term = f" term {span.term}" if span.term is not None else ""
            title = (f"{group}: {span.node} leader{term}, {_at(span.start)} to {_at(span.end)} ({span.source})"
                     + (": at the same time as another leader of the group" if overlap else ""))
            svg.rect(x0, top, max(x1 - x0, 1), height, "r-leader", title)
            if not overlap:
                held.append(span)
            label = f"{span.node} T{span.term}" if span.term is not None else span.node
            if not overlap and x1 - x0 > 7 * len(label):
                svg.text((x0 + x1) / 2, y + GROUP_H - 5, label, "role-label", anchor="middle")
        y += GROUP_H
    return y


def all_group_lanes(spans: Sequence[RoleSpan], faults: FaultView, scale: Scale) -> Svg | None:
    """Every group's lane on the run's time axis, faults shaded, when there are more groups than the main
    figure draws (:data:`MAX_GROUP_LANES`); None otherwise."""
    groups = sorted({s.group for s in spans if s.group is not None}, key=group_order)
    if len(groups) <= MAX_GROUP_LANES:
        return None
    svg = Svg(WIDTH, css_id="group-lanes", label=f"leader lanes of all {len(groups)} groups")
    shading_at = svg.mark()
    top = 30.0
    bottom = _draw_group_lanes(svg, scale, spans, groups, top)
    svg.axis(scale, top - 6, bottom)
    shaded = Svg(WIDTH)
    _shade(shaded, scale, faults, top, bottom)
    svg.insert(shading_at, shaded)
    svg.height = bottom + 10
    return svg


def _draw_bars(svg: Svg, scale: Scale, ops: Sequence[ClientOp], y: float, end: int) -> float:
    lane_of, members = _lanes(ops, end)
    lanes = min(len(members), MAX_LANES)
    for lane in range(lanes):
        processes = members[lane]
        label = "p" + ",".join(str(p) for p in processes[:3]) + ("…" if len(processes) > 3 else "")
        svg.text(LEFT - 8, y + lane * BAR_ROW_H + BAR_ROW_H - 1, label, "lane-label small", anchor="end",
                 title="processes " + ", ".join(str(p) for p in processes))
    for op in ops:
        lane = lane_of[op.process]
        if lane >= MAX_LANES:
            continue
        last = op.ret if op.ret is not None else scale.t1
        x0, x1 = scale.clamp(op.call), scale.clamp(last)
        svg.rect(x0, y + lane * BAR_ROW_H + 1, max(x1 - x0, 1.2), BAR_ROW_H - 2, f"op {op.type}", _op_title(op))
    if len(members) > MAX_LANES:
        svg.text(scale.x0, y + lanes * BAR_ROW_H + 10, f"{len(members) - MAX_LANES} more lanes not drawn", "note")
        lanes += 1
    return y + lanes * BAR_ROW_H + 4


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    index = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[index]


def _bucket_width(scale: Scale) -> int:
    span = max(scale.t1 - scale.t0, 1)
    raw = span / BUCKETS
    steps = [1, 2, 5]
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for factor in (*steps, 10):
        if factor * power >= raw:
            return int(factor * power)
    return int(10 * power)


def _draw_latency(svg: Svg, scale: Scale, ops: Sequence[ClientOp], y: float) -> tuple[float, str]:
    done = [op for op in ops if op.ret is not None]
    if not done:
        svg.text(scale.x0 + 4, y + 20, "no completed operations", "note")
        return y + 40, "No operation completed, so there is no latency to draw."
    latencies = [max(op.ret - op.call, 1) for op in done]
    low = 10 ** math.floor(math.log10(max(min(latencies), 1_000)))  # at least 1 µs
    high = 10 ** math.ceil(math.log10(max(latencies)))
    if high <= low:
        high = low * 10
    top, bottom = y + 4, y + LATENCY_H - 4

    def ly(ns: float) -> float:
        return bottom - (math.log10(max(ns, low)) - math.log10(low)) / (math.log10(high) - math.log10(low)) * (bottom - top)

    svg.rect(scale.x0, top, scale.x1 - scale.x0, bottom - top, "panel-bg")
    svg.text(scale.x0 + 6, top + 13, "latency (log scale)", "panel-title")
    decade = low
    while decade <= high:
        svg.line(scale.x0, ly(decade), scale.x1, ly(decade), "grid")
        svg.text(scale.x0 - 3, ly(decade) + 3, _decade(decade), "tick-y", anchor="end")
        decade *= 10
    if len(done) <= MAX_DOTS:
        for op, latency in zip(done, latencies, strict=True):
            svg.circle(scale.x(op.call), ly(latency), 1.7, f"dot {op.type}",
                       None if len(done) > 1500 else _op_title(op))
        sentence = f"Latency: one dot per completed operation ({len(done):,}), at its invoke time."
    else:
        width = _bucket_width(scale)
        buckets: dict[int, list[float]] = {}
        for op, latency in zip(done, latencies, strict=True):
            if op.type == "ok":
                buckets.setdefault(int((op.call - scale.t0) // width), []).append(latency)
        lines: dict[str, list[tuple[float, float]]] = {"p50": [], "p99": [], "max": []}
        for index in sorted(buckets):
            values = sorted(buckets[index])
            x = scale.x(scale.t0 + (index + 0.5) * width)
            lines["p50"].append((x, ly(_quantile(values, 0.5))))
            lines["p99"].append((x, ly(_quantile(values, 0.99))))
            lines["max"].append((x, ly(values[-1])))
        for name in ("max", "p99", "p50"):
            svg.polyline(lines[name], f"lat-{name}", f"{name} latency of ok operations per {seconds_label(width / NS)}")
        legend_x = scale.x1 - 190
        for i, name in enumerate(("p50", "p99", "max")):
            svg.line(legend_x + i * 64, top + 10, legend_x + i * 64 + 16, top + 10, f"lat-{name}")
            svg.text(legend_x + i * 64 + 20, top + 13, name, "legend")
        sentence = (
            f"Latency of the {len(done):,} completed operations is aggregated: median, 99th percentile and "
            f"maximum of the ok operations invoked in each {seconds_label(width / NS)} bucket."
        )
    return y + LATENCY_H, sentence


def _draw_throughput(svg: Svg, scale: Scale, ops: Sequence[ClientOp], y: float) -> float:
    width = _bucket_width(scale)
    counts: dict[int, dict[str, int]] = {}
    for op in ops:
        if op.ret is None:
            continue
        bucket = counts.setdefault(int((op.ret - scale.t0) // width), {"ok": 0, "fail": 0, "info": 0})
        if op.type in bucket:
            bucket[op.type] += 1
    seconds = width / NS
    top, bottom = y + 4, y + THROUGHPUT_H - 4
    svg.rect(scale.x0, top, scale.x1 - scale.x0, bottom - top, "panel-bg")
    svg.text(scale.x0 + 6, top + 13, "throughput (completions per second)", "panel-title")
    peak = nice_max(sum(c.values()) / seconds for c in counts.values()) if counts else 1.0
    svg.line(scale.x0, top, scale.x1, top, "grid")
    svg.text(scale.x0 - 3, top + 8, f"{peak:g}/s", "tick-y", anchor="end")
    svg.text(scale.x0 - 3, bottom, "0", "tick-y", anchor="end")
    bar_w = max(scale.x(scale.t0 + width) - scale.x0 - 0.4, 0.6)
    for index, bucket in sorted(counts.items()):
        x = scale.x(scale.t0 + index * width)
        base = bottom
        title = (f"{seconds_label(index * seconds)}–{seconds_label((index + 1) * seconds)}: ok {bucket['ok']}, "
                 f"fail {bucket['fail']}, info {bucket['info']} ({sum(bucket.values()) / seconds:.0f}/s)")
        for kind in ("ok", "fail", "info"):
            if bucket[kind]:
                h = bucket[kind] / seconds / peak * (bottom - top)
                svg.rect(x, base - h, bar_w, h, f"tp {kind}", title)
                base -= h
    return y + THROUGHPUT_H


def _shade(svg: Svg, scale: Scale, faults: FaultView, top: float, bottom: float) -> None:
    for span in faults.spans:
        if span.end < scale.t0 or span.start > scale.t1:
            continue
        x0, x1 = scale.clamp(span.start), scale.clamp(span.end)
        svg.rect(x0, top, max(x1 - x0, 1.5), bottom - top, f"shade f-{span.family}")


def _legend(svg: Svg, y: float, faults: FaultView, roles: bool) -> float:
    x = LEFT
    items: list[tuple[str, str]] = [("op ok", "ok"), ("op fail", "fail"), ("op info", "info (unknown)")]
    if roles:
        items += [("r-leader", "leader"), ("r-follower", "follower"), ("r-candidate", "candidate"),
                  ("o-down", "killed / down"), ("o-paused", "paused")]
    items += [(f"shade f-{family} legend-swatch", family) for family in faults.families]
    for cls, label in items:
        svg.rect(x, y - 9, 14, 10, cls)
        svg.text(x + 18, y, label, "legend")
        x += 26 + 6.2 * len(label)
    return y + 8


def _figure(
    run: RunData,
    scale: Scale,
    faults: FaultView,
    spans: Sequence[RoleSpan],
    offsets: Sequence[OffsetChange],
    bars: Sequence[ClientOp] | None,
    metrics: bool,
    marks: Sequence[tuple[int, str]],
    window: Window | None,
    css_id: str,
    label: str,
) -> tuple[Svg, str]:
    svg = Svg(WIDTH, css_id=css_id, label=label)
    shading_at = svg.mark()
    y = 30.0
    top = y
    y = _draw_fault_lanes(svg, scale, faults, y)
    y = _draw_node_lanes(svg, scale, run.nodes, [s for s in spans if s.group is None], faults, offsets,
                         y + (4 if faults.families else 0))
    groups = busiest_groups(spans)
    if groups:
        y = _draw_group_lanes(svg, scale, spans, groups, y + 4)
    if bars is not None:
        svg.text(LEFT - 8, y + 14, "operations", "lane-label", anchor="end")
        y = _draw_bars(svg, scale, bars, y + 18, scale.t1)
    sentence = ""
    if metrics:
        y, sentence = _draw_latency(svg, scale, run.ops, y + 8)
        y = _draw_throughput(svg, scale, run.ops, y + 6)
    bottom = y
    svg.axis(scale, top - 6, bottom)
    shaded = Svg(WIDTH)
    _shade(shaded, scale, faults, top, bottom)
    svg.insert(shading_at, shaded)
    if window is not None and not window.complete:
        x0, x1 = scale.clamp(window.start), scale.clamp(window.end)
        svg.rect(x0, top - 14, max(x1 - x0, 2), bottom - top + 14, "window-mark",
                 "the window of operations drawn as bars below")
        svg.text(x0, top - 16, "bars below", "window-label")
    legend_at = bottom + 20
    for t, what in marks:
        if scale.t0 <= t <= scale.t1:
            x = scale.x(t)
            svg.line(x, top - 6, x, bottom + 6, "anomaly-mark", f"{what} at {_at(t)}")
            label = f"{what} at {_at(t)}"
            right = x + 6.2 * len(label) < scale.x1
            svg.text(x + 4 if right else x - 4, bottom + 16, label, "anomaly-label", anchor="start" if right else "end")
            legend_at = bottom + 38
    y = _legend(svg, legend_at, faults, roles=bool(spans) or bool(faults.down))
    svg.height = y + 6
    return svg, sentence


def build_timeline(
    run: RunData,
    faults: FaultView,
    alignment: Alignment,
    offsets: Sequence[OffsetChange],
    focus: tuple[int, str] | None,
    *,
    max_bars: int = MAX_BARS,
) -> Timeline:
    """The main timeline (whole run) and, when the run has more than ``max_bars`` operations, the
    window of operation bars around ``focus`` (the first anomaly's time and what it is)."""
    end = max(run.end_ns, 1)
    if run.journals:
        spans = journal_roles(run.journals, alignment, end)
        roles_sentence = f"Roles and terms come from the node journals; {alignment.method}."
    elif run.status:
        spans = status_roles(run.status, end)
        roles_sentence = (
            "Roles and terms come from the status observations in the history (no node journals were "
            "collected); each is shown until the node's next observation, and grey where polls failed."
        )
    else:
        spans = []
        roles_sentence = "No node journals and no status observations: node roles are not known."
    elections = None
    group_elections: dict[str, Elections] = {}
    if spans:
        elections = count_elections(spans, min(_chaos_end(run), end))
        roles_sentence += " " + elections.sentence()
        group_elections = count_group_elections(spans, min(_chaos_end(run), end))
        if group_elections:
            roles_sentence += " " + groups_sentence(group_elections, busiest_groups(spans))
    window = choose_window(run.ops, focus, max_bars)
    scale = Scale(0, end, LEFT, WIDTH - RIGHT)
    marks = [focus] if focus is not None else []
    main, latency_sentence = _figure(
        run, scale, faults, spans, offsets, window.ops if window.complete else None, True, marks,
        window, "timeline", "timeline of the whole run",
    )
    zoom = None
    if not window.complete:
        pad = max((window.end - window.start) // 50, 1)
        wscale = Scale(max(window.start - pad, 0), window.end + pad, LEFT, WIDTH - RIGHT)
        zoom, _ = _figure(run, wscale, faults, spans, offsets, window.ops, False, marks, None, "window",
                          "operations in the window")
    return Timeline(main, zoom, window.sentence, latency_sentence, roles_sentence, spans, elections,
                    group_elections, all_group_lanes(spans, faults, scale), run_sentence(run.results))


def _chaos_end(run: RunData) -> int:
    """The end of the chaos phase on the history axis: ``test.json``'s time limit, else the history's end."""
    timings = run.test.get("timings") if isinstance(run.test.get("timings"), Mapping) else {}
    limit = timings.get("time_limit")
    if isinstance(limit, int | float) and not isinstance(limit, bool) and limit > 0:
        return int(limit * NS)
    return max(run.end_ns, 1)
