"""single-leader-per-term: no two distinct nodes claim leadership in the same term.

This is Election Safety (seed 000: a term has at most one leader; seed 003: the generation clock). The
evidence is every *claim* of leadership, from two sources that may be combined:

* node journals (FORMATS.md): a ``role`` event with ``role == "leader"`` in node X's journal is X's
  claim to lead ``term``;
* for systems without journals, ``status`` observations in the history: a client operation with
  ``f == "status"`` that completed ``ok`` with an output like ``{"node", "role", "term", "leader"}``;
  ``role == "leader"`` is the claim of ``output["node"]`` (or of the operation's ``node`` when the output
  omits it) to lead ``output["term"]``.

Only a node's own claim counts. A follower's ``leader`` field (in a journal ``role`` event or a status
output) is hearsay: it may lag behind, and it never makes a node a leader. One node claiming the same
term twice (for example across a restart) is not a conflict.

A status observation that is ``ok`` but cannot be attributed (no dict output, no role, or a leader claim
without an integer term or a node) is counted in the stats as unusable, never silently treated as a claim.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from checkers.history import History, JournalEvent, Operation
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
    role_position: int | None = None  # journal: position among the node's role events

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.node, "term": self.term, "source": self.source, "line": self.line}
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
        return f"{self.node} (status observed at history line {self.line}, time {self.time} ns)"


def journal_claims(journals: Mapping[str, list[JournalEvent]]) -> tuple[list[LeadershipClaim], dict]:
    """Leadership claims from journal ``role`` events, and each node's role events (for context)."""
    claims: list[LeadershipClaim] = []
    role_events: dict[str, list[JournalEvent]] = {}
    for node, events in journals.items():
        roles = role_events.setdefault(node, [])
        for event in events:
            if event.event != "role":
                continue
            roles.append(event)
            if event.data["role"] == LEADER:
                claims.append(
                    LeadershipClaim(
                        node=event.node,
                        term=event.data["term"],
                        source="journal",
                        line=event.line,
                        wall=event.wall,
                        seq=event.seq,
                        role_position=len(roles) - 1,
                    )
                )
    return claims, role_events


def status_claims(history: History) -> tuple[list[LeadershipClaim], int, int]:
    """Leadership claims from ``ok`` status observations: (claims, observations, unusable observations)."""
    claims: list[LeadershipClaim] = []
    observations = 0
    unusable = 0
    for op in history.ops:
        if op.f != STATUS or not op.ok:
            continue
        observations += 1
        claim = _status_claim(op)
        if claim is False:
            unusable += 1
        elif claim is not None:
            claims.append(claim)
    return claims, observations, unusable


def _status_claim(op: Operation) -> LeadershipClaim | None | bool:
    """The claim in one status output; ``None`` if it claims nothing, ``False`` if it is unusable."""
    output = op.output
    if not isinstance(output, dict) or not isinstance(output.get("role"), str):
        return False
    if output["role"] != LEADER:
        return None
    node = output.get("node") or op.node
    term = output.get("term")
    if not isinstance(node, str) or not isinstance(term, int) or isinstance(term, bool):
        return False
    return LeadershipClaim(
        node=node, term=term, source="history", line=op.invoke_index + 1, time=op.call, ret=op.ret
    )


def check_single_leader_per_term(
    journals: Mapping[str, list[JournalEvent]] | None, history: History | None
) -> Verdict:
    """No two distinct nodes claim leadership in the same term (journal ``role`` events and history
    ``status`` observations together). ``"unknown"`` when neither source was given."""
    claims: list[LeadershipClaim] = []
    role_events: dict[str, list[JournalEvent]] = {}
    observations = unusable = 0
    if journals:
        found, role_events = journal_claims(journals)
        claims.extend(found)
    if history is not None:
        found, observations, unusable = status_claims(history)
        claims.extend(found)
    stats: dict[str, Any] = {
        "journals": len(journals or {}),
        "role_events": sum(len(v) for v in role_events.values()),
        "status_observations": observations,
        "unusable_status_observations": unusable,
        "claims": len(claims),
    }
    if not role_events and observations == 0:
        return Verdict(
            UNKNOWN,
            "single-leader-per-term cannot decide: no journal role events and no status observations",
            stats=stats,
        )

    # term -> node -> that node's first claim of the term, in input order (journals, then history).
    first: dict[int, dict[str, LeadershipClaim]] = {}
    for claim in claims:
        first.setdefault(claim.term, {}).setdefault(claim.node, claim)
    conflicts = sorted(term for term, nodes in first.items() if len(nodes) > 1)
    stats["terms_with_leader"] = len(first)
    stats["conflicting_terms"] = len(conflicts)
    if not conflicts:
        return Verdict(
            True,
            f"one leader per term: {len(first)} terms with a leader, {len(claims)} claims, no conflict",
            stats=stats,
        )

    reported = [_conflict(term, first[term], role_events) for term in conflicts[:MAX_REPORTED_TERMS]]
    term = conflicts[0]
    nodes = first[term]
    claimants = " and ".join(claim.describe() for claim in nodes.values())
    more = f"; {len(conflicts) - 1} more terms with two leaders" if len(conflicts) > 1 else ""
    return Verdict(
        False,
        f"term {term} has {len(nodes)} leaders: {claimants}{more}",
        counterexample={
            "term": term,
            "nodes": sorted(nodes),
            "claims": reported[0]["claims"],
            "role_events": reported[0]["role_events"],
            "conflicts": reported,
        },
        stats=stats,
    )


def _conflict(
    term: int, claims: Mapping[str, LeadershipClaim], role_events: Mapping[str, list[JournalEvent]]
) -> dict[str, Any]:
    """One conflicting term: every claim, and the role events around each journal claim."""
    context: dict[str, list[dict[str, Any]]] = {}
    for claim in claims.values():
        if claim.role_position is None:
            continue
        roles = role_events[claim.node]
        low = max(0, claim.role_position - CONTEXT_EVENTS)
        context[claim.node] = [e.to_json() for e in roles[low : claim.role_position + CONTEXT_EVENTS + 1]]
    return {
        "term": term,
        "nodes": sorted(claims),
        "claims": [claims[node].to_json() for node in sorted(claims)],
        "role_events": context,
    }
