"""The nemesis operations of a history as a person reads them: faults as spans of time, node outages,
and the faults that could not be applied on this host.

Each fault family has the operation that ends it (``nemesis.faults``: partition/heal, kill/start,
pause/resume, clock bump or strobe/reset, loss/heal-loss, latency/heal-latency). The families, their
colours and operations are what the nemesis packages declare (``nemesis.generator.Package.family``); a
family that is not ``lasting`` (a one-shot fault) is drawn from invoke to completion. A fault is drawn from
its invoke to the completion of the operation that healed it, or to the end of the history when nothing
did. What counts is what the completion says was applied: a kill whose completion names ``{"nodes":
["n2"]}`` took n2 down, whatever its invoke targeted; a fault whose completion is ``info`` or carries an
``error`` is listed as not applied (or applied only in part, with the nodes where it was).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.report.data import NemesisOp
from harness.report.svg import short
from nemesis.faults import HEALS, describe, fault_from_json, is_heal
from nemesis.generator import Family, fault_families


def families() -> tuple[Family, ...]:
    """The fault families as the nemesis packages declare them (``nemesis.generator.Package.family``), in
    package order: lane names, colours, and which operations begin and end a fault of each."""
    return fault_families()


def family_of(f: str) -> str:
    """The family whose lane an operation ``f`` is drawn in (an ``f`` no package declares: its own)."""
    for family in families():
        if f in family.faults or f in family.heals:
            return family.name
    return f


def fault_colours() -> list[tuple[str, str]]:
    """(family, colour) of every family, for the report's style sheet (``svg .f-<family>``)."""
    return [(family.name, family.colour) for family in families()]


@dataclass
class FaultSpan:
    """One fault in effect from ``start`` to ``end`` (ns); ``healed`` False if nothing ended it."""

    family: str
    label: str
    start: int
    end: int
    healed: bool
    nodes: tuple[str, ...]
    line: int
    partial: str | None = None


@dataclass(frozen=True)
class Unapplied:
    """A scheduled fault the nemesis could not apply here (or only in part)."""

    time: int
    f: str
    description: str
    error: str
    applied: str | None
    line: int


@dataclass
class FaultView:
    """Fault spans by family, per-node outages and pauses, and what could not be applied."""

    spans: list[FaultSpan] = field(default_factory=list)
    down: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    paused: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    unapplied: list[Unapplied] = field(default_factory=list)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def families(self) -> list[str]:
        """The fault families of the run: those with spans, and those with faults that were not applied."""
        present = {span.family for span in self.spans} | {family_of(u.f) for u in self.unapplied}
        known = [family.name for family in families()]
        return [f for f in known if f in present] + sorted(present - set(known))


def describe_op(op: NemesisOp) -> str:
    """The fault asked for, in ``nemesis.faults.describe``'s words (the raw f and value if unknown)."""
    try:
        return describe(fault_from_json({"f": op.f, "value": op.value}))
    except (ValueError, TypeError, KeyError, AttributeError):
        return op.f if op.value is None else f"{op.f} {short(op.value, 60)}"


def _nodes(result: Any) -> tuple[str, ...] | None:
    if isinstance(result, Mapping) and isinstance(result.get("nodes"), list):
        return tuple(n for n in result["nodes"] if isinstance(n, str))
    return None


def _applied_part(op: NemesisOp) -> str | None:
    """Where a fault that reported an error was applied anyway, if its completion says."""
    nodes = _nodes(op.result)
    if nodes:
        return "applied on " + ", ".join(nodes)
    if isinstance(op.result, Mapping):
        offsets = op.result.get("offsets")
        if isinstance(offsets, Mapping) and offsets:
            return "applied on " + ", ".join(sorted(offsets))
        if op.result.get("grudge"):
            return "partition applied"
    return None


def _is_heal(op: NemesisOp) -> bool:
    """Whether the operation ends a fault: as ``nemesis.faults.is_heal`` says, or by its ``f`` alone when
    it cannot be read back."""
    try:
        return is_heal(fault_from_json({"f": op.f, "value": op.value}))
    except (ValueError, TypeError, KeyError, AttributeError):
        reset = op.f == "clock" and isinstance(op.value, Mapping) and op.value.get("kind") == "reset"
        return reset or op.f in HEALS or any(op.f in family.heals for family in families())


def _outages(view: FaultView, family: str) -> dict[str, list[tuple[int, int]]] | None:
    """Where a per-node family's node intervals go: the node lanes show kills as down, pauses as paused."""
    return {"kill": view.down, "pause": view.paused}.get(family)


def fault_view(nemesis: Sequence[NemesisOp], nodes: Sequence[str], end: int) -> FaultView:
    """Spans, outages and unapplied faults of a history's nemesis operations (module docstring)."""
    view = FaultView()
    declared = {family.name: family for family in families()}
    per_node = [name for name, family in declared.items() if family.per_node]
    open_span: dict[str, FaultSpan] = {}
    open_node: dict[str, dict[str, FaultSpan]] = {name: {} for name in per_node}
    since: dict[str, dict[str, int]] = {name: {} for name in per_node}
    for op in nemesis:
        family = family_of(op.f)
        counts = view.counts.setdefault(op.f, {"invoked": 0, "applied": 0})
        counts["invoked"] += 1
        if op.applied:
            counts["applied"] += 1
        label = describe_op(op)
        heal = _is_heal(op)
        if not op.applied:
            view.unapplied.append(
                Unapplied(
                    time=op.call,
                    f=op.f,
                    description=label,
                    error=op.error or f"completion was {op.type}",
                    applied=_applied_part(op),
                    line=op.complete_line or op.invoke_line,
                )
            )
        finished = op.ret if op.ret is not None else op.call
        if family in per_node:
            affected = _nodes(op.result)
            if affected is None:
                targets = op.value.get("targets") if isinstance(op.value, Mapping) else None
                affected = tuple(targets) if op.applied and isinstance(targets, list) else ()
            if heal:
                for node in affected:
                    span = open_node[family].pop(node, None)
                    if span is not None:
                        span.end = max(span.end, finished)
                        span.healed = not any(s is span for s in open_node[family].values())
                    began = since[family].pop(node, None)
                    target = _outages(view, family)
                    if began is not None and target is not None:
                        target.setdefault(node, []).append((began, finished))
                continue
            if not affected:
                continue
            span = FaultSpan(family, label, op.call, finished, False, affected, op.invoke_line,
                             None if op.applied else _applied_part(op))
            view.spans.append(span)
            for node in affected:
                open_node[family][node] = span
                since[family].setdefault(node, op.call)
            continue
        if heal:
            span = open_span.pop(family, None)
            if span is not None:
                span.end, span.healed = finished, True
            continue
        if not op.applied and _applied_part(op) is None:
            continue
        if family in declared and not declared[family].lasting:  # over once done: nothing heals it
            view.spans.append(FaultSpan(family, label, op.call, finished, True, tuple(nodes), op.invoke_line,
                                        None if op.applied else _applied_part(op)))
            continue
        previous = open_span.pop(family, None)
        if previous is not None:
            previous.end, previous.healed = op.call, True
        span = FaultSpan(family, label, op.call, end, False, tuple(nodes), op.invoke_line,
                         None if op.applied else _applied_part(op))
        view.spans.append(span)
        open_span[family] = span
    # Spans still open run to the end of the history; their per-node outages too.
    for family in per_node:
        target = _outages(view, family)
        for node, began in since[family].items():
            if target is not None:
                target.setdefault(node, []).append((began, end))
    for span in view.spans:
        if not span.healed:
            span.end = max(span.end, end)
    return view
