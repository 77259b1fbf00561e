"""single-leader-per-term: no two distinct nodes claim leadership in the same term.

This is Election Safety (seed 000: a term has at most one leader; seed 003: the generation clock). The
evidence is every *claim* of leadership, from two sources that may be combined:

* node journals (FORMATS.md): a ``role`` event with ``role == "leader"`` in node X's journal is X's
  claim to lead ``term``;
* for systems without journals, ``status`` observations in the history: a client operation with
  ``f == "status"`` that completed ``ok`` with an output like ``{"node", "role", "term", "leader"}``;
  ``role == "leader"`` is the claim of ``output["node"]`` (or of the operation's ``node`` when the output
  omits it) to lead ``output["term"]``.

**Groups** (a storage shard, a partition, a queue: anything with a leader and a term of its own). A
journal ``role`` event may carry ``group``; a status output may carry ``groups``, a list of
``{"group", "role", "term", "leader", ...}`` entries, each the node's claim (or not) for that group,
besides the top-level fields that speak for the system's single, cluster-level group. Claims conflict
only within one group: ``(group, term)`` is what has at most one leader, and a claim to lead term 3 of
``shard-0`` says nothing about term 3 of ``shard-1``. Without any ``group`` the verdict reads exactly as
for a single-group system; otherwise its summary and counterexample name the group.

Only a node's own claim counts. A follower's ``leader`` field (in a journal ``role`` event or a status
output) is hearsay: it may lag behind, and it never makes a node a leader. One node claiming the same
term twice (for example across a restart) is not a conflict.

A status observation that is ``ok`` but cannot be attributed (no dict output, no role, or a leader claim
without an integer term or a node) is counted in the stats as unusable, never silently treated as a claim;
an observation that reports ``groups`` may leave its top-level role out (a system with leaders per queue
only), and a group entry that cannot be attributed is counted as ``unusable_group_entries``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from checkers.history import History, JournalEvent, Operation, seconds
from checkers.verdict import UNKNOWN, Verdict

LEADER = "leader"
STATUS = "status"
# Role events shown on either side of a claim in the counterexample.
CONTEXT_EVENTS = 2
# Conflicting terms listed in full in the counterexample (all are counted in the stats).
MAX_REPORTED_TERMS = 20


@dataclass(frozen=True, slots=True)
class LeadershipClaim:
    """One node's claim to lead one term, and where it was seen."""

    node: str
    term: int
    source: str  # "journal" or "history"
    line: int
    wall: float | None = None  # journal: the node's own clock
    seq: int | None = None  # journal: the event's seq
    time: int | None = None  # history: the status operation's invoke time (ns)
    ret: int | None = None  # history: its completion time (ns)
    role_position: int | None = None  # journal: position among the node's role events of its group
    group: str | None = None  # None: the system's single (cluster-level) group

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.node, "term": self.term, "source": self.source, "line": self.line}
        if self.group is not None:
            out["group"] = self.group
        if self.source == "journal":
            out["file"] = f"nodes/{self.node}/journal.jsonl"
            out["wall"] = self.wall
            out["seq"] = self.seq
        else:
            out["file"] = "history.jsonl"
            out["time"] = self.time
            out["ret"] = self.ret
        return out

    def describe(self) -> str:
        if self.source == "journal":
            return f"{self.node} (journal line {self.line}, wall {self.wall:.3f})"
        return f"{self.node} (status observed at history line {self.line}, {seconds(self.time)})"


def journal_claims(journals: Mapping[str, list[JournalEvent]]) -> tuple[list[LeadershipClaim], dict]:
    """Leadership claims from journal ``role`` events, and each node's role events (for context)."""
    claims: list[LeadershipClaim] = []
    role_events: dict[str, list[JournalEvent]] = {}
    for node, events in journals.items():
        roles = role_events.setdefault(node, [])
        positions: dict[str | None, int] = {}  # group -> role events of that group so far
        for event in events:
            if event.event != "role":
                continue
            roles.append(event)
            group = _group(event.data)
            position = positions.get(group, 0)
            positions[group] = position + 1
            if event.data["role"] == LEADER:
                claims.append(
                    LeadershipClaim(
                        node=event.node,
                        term=event.data["term"],
                        source="journal",
                        line=event.line,
                        wall=event.wall,
                        seq=event.seq,
                        role_position=position,
                        group=group,
                    )
                )
    return claims, role_events


def _group(data: Mapping[str, Any]) -> str | None:
    group = data.get("group")
    return group if isinstance(group, str) else None


def status_claims(history: History) -> tuple[list[LeadershipClaim], int, int]:
    """Leadership claims from ``ok`` status observations: (claims, observations, unusable observations).
    A status with ``groups`` adds one claim per group entry that claims leadership (module docstring);
    :func:`status_group_claims` also counts the group entries that cannot be attributed."""
    claims, observations, unusable, _ = status_group_claims(history)
    return claims, observations, unusable


def status_group_claims(history: History) -> tuple[list[LeadershipClaim], int, int, dict[str, int]]:
    """:func:`status_claims`, and counts of the group entries seen: ``{"entries", "unusable"}``."""
    claims: list[LeadershipClaim] = []
    observations = 0
    unusable = 0
    entries = {"entries": 0, "unusable": 0}
    for op in history.ops:
        if op.f != STATUS or not op.ok:
            continue
        observations += 1
        output = op.output
        groups = output.get("groups") if isinstance(output, dict) else None
        claim = _status_claim(op, lenient=isinstance(groups, list))
        if claim is False:
            unusable += 1
        elif claim is not None:
            claims.append(claim)
        if isinstance(groups, list):
            for entry in groups:
                entries["entries"] += 1
                found = _group_claim(op, entry)
                if found is False:
                    entries["unusable"] += 1
                elif found is not None:
                    claims.append(found)
    return claims, observations, unusable, entries


def _status_claim(op: Operation, lenient: bool = False) -> LeadershipClaim | None | bool:
    """The claim in one status output; ``None`` if it claims nothing, ``False`` if it is unusable.
    ``lenient``: the output reports ``groups``, so a missing top-level role claims nothing."""
    output = op.output
    if not isinstance(output, dict):
        return False
    if not isinstance(output.get("role"), str):
        return None if lenient and output.get("role") is None else False
    if output["role"] != LEADER:
        return None
    node = output.get("node") or op.node
    term = output.get("term")
    if not isinstance(node, str) or not isinstance(term, int) or isinstance(term, bool):
        return False
    return LeadershipClaim(
        node=node, term=term, source="history", line=op.invoke_index + 1, time=op.call, ret=op.ret
    )


def _group_claim(op: Operation, entry: Any) -> LeadershipClaim | None | bool:
    """The claim in one entry of a status output's ``groups``: ``None`` if it claims nothing, ``False`` if
    it cannot be attributed (not an object, no group name or role, a leader claim without a term)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("group"), str) or not isinstance(
        entry.get("role"), str
    ):
        return False
    if entry["role"] != LEADER:
        return None
    node = op.output.get("node") or op.node
    term = entry.get("term")
    if not isinstance(node, str) or not isinstance(term, int) or isinstance(term, bool):
        return False
    return LeadershipClaim(
        node=node,
        term=term,
        source="history",
        line=op.invoke_index + 1,
        time=op.call,
        ret=op.ret,
        group=entry["group"],
    )


def check_single_leader_per_term(
    journals: Mapping[str, list[JournalEvent]] | None, history: History | None
) -> Verdict:
    """No two distinct nodes claim leadership of one group in the same term (journal ``role`` events and
    history ``status`` observations together). ``"unknown"`` when neither source was given."""
    claims: list[LeadershipClaim] = []
    role_events: dict[str, list[JournalEvent]] = {}
    observations = unusable = 0
    entries = {"entries": 0, "unusable": 0}
    if journals:
        found, role_events = journal_claims(journals)
        claims.extend(found)
    if history is not None:
        found, observations, unusable, entries = status_group_claims(history)
        claims.extend(found)
    stats: dict[str, Any] = {
        "journals": len(journals or {}),
        "role_events": sum(len(v) for v in role_events.values()),
        "status_observations": observations,
        "unusable_status_observations": unusable,
        "claims": len(claims),
    }
    grouped = entries["entries"] > 0 or any(
        _group(e.data) is not None for events in role_events.values() for e in events
    )
    if entries["entries"]:
        stats["group_entries"] = entries["entries"]
        stats["unusable_group_entries"] = entries["unusable"]
    if not role_events and observations == 0:
        return Verdict(
            UNKNOWN,
            "single-leader-per-term cannot decide: no journal role events and no status observations",
            stats=stats,
        )

    # (group, term) -> node -> that node's first claim of it, in input order (journals, then history).
    first: dict[tuple[str | None, int], dict[str, LeadershipClaim]] = {}
    for claim in claims:
        first.setdefault((claim.group, claim.term), {}).setdefault(claim.node, claim)
    conflicts = sorted((key for key, nodes in first.items() if len(nodes) > 1), key=_order)
    stats["terms_with_leader"] = len(first)
    stats["conflicting_terms"] = len(conflicts)
    if grouped:
        stats["groups"] = len({group for group, _ in first})
        stats["conflicting_groups"] = sorted({_name(group) for group, _ in conflicts})
    if not conflicts:
        if grouped:
            return Verdict(
                True,
                f"one leader per term in each group: {stats['groups']} groups, {len(first)} (group, term) "
                f"pairs with a leader, {len(claims)} claims, no conflict",
                stats=stats,
            )
        return Verdict(
            True,
            f"one leader per term: {len(first)} terms with a leader, {len(claims)} claims, no conflict",
            stats=stats,
        )

    reported = [_conflict(key, first[key], role_events) for key in conflicts[:MAX_REPORTED_TERMS]]
    group, term = conflicts[0]
    nodes = first[(group, term)]
    claimants = " and ".join(claim.describe() for claim in nodes.values())
    what = "terms" if group is None and not grouped else "(group, term) pairs"
    more = f"; {len(conflicts) - 1} more {what} with two leaders" if len(conflicts) > 1 else ""
    where = f"group {group}: " if group is not None else ("the cluster-level group: " if grouped else "")
    counterexample: dict[str, Any] = {
        "term": term,
        "nodes": sorted(nodes),
        "claims": reported[0]["claims"],
        "role_events": reported[0]["role_events"],
        "conflicts": reported,
    }
    if group is not None:
        counterexample = {"group": group, **counterexample}
    return Verdict(
        False,
        f"{where}term {term} has {len(nodes)} leaders: {claimants}{more}",
        counterexample=counterexample,
        stats=stats,
    )


def _order(key: tuple[str | None, int]) -> tuple[bool, str, int]:
    """Conflicts in order: the cluster-level group's first, then by group name, then by term."""
    group, term = key
    return (group is not None, group or "", term)


def _name(group: str | None) -> str:
    return group if group is not None else "(cluster)"


def _conflict(
    key: tuple[str | None, int],
    claims: Mapping[str, LeadershipClaim],
    role_events: Mapping[str, list[JournalEvent]],
) -> dict[str, Any]:
    """One conflicting (group, term): every claim, and the role events (of that group) around each
    journal claim."""
    group, term = key
    context: dict[str, list[dict[str, Any]]] = {}
    for claim in claims.values():
        if claim.role_position is None:
            continue
        roles = [e for e in role_events[claim.node] if _group(e.data) == group]
        low = max(0, claim.role_position - CONTEXT_EVENTS)
        context[claim.node] = [e.to_json() for e in roles[low : claim.role_position + CONTEXT_EVENTS + 1]]
    out: dict[str, Any] = {"group": group} if group is not None else {}
    out.update(
        {
            "term": term,
            "nodes": sorted(claims),
            "claims": [claims[node].to_json() for node in sorted(claims)],
            "role_events": context,
        }
    )
    return out
