"""How often a run of ``cluster`` gave each switched-on known bug a chance to act: its *opportunities*
(issue 32), counted from the node journals.

A known bug that a run missed either never had a chance (the fault schedule did not produce the situation
the mistake needs) or had chances that the checkers could not see the effect of. These counts tell the two
apart: ``opportunities: 0`` on a missed run says the bug was not reachable in it. What each bug needs is
said once, with the bug (``cluster.core.bugs.KnownBug.opportunity``); this module holds the one counter per
bug that finds that situation in the journals (:data:`COUNTERS`, a test keeps it equal to ``KNOWN_BUGS``).
Where the journals also show the mistake itself being made, the counter says how often (``acted``): an SC
choosing a candidate outside the LRS, a voter granting two candidates of one term, a restarted node leading
its old term again while the others still followed it. A mistake made is still not an anomaly observed:
that needs the clients to read or write across it (docs/analysis.md, "Opportunities", has how the counts
of caught and missed simulated runs compare).

The counters read only events the nodes already journal (FORMATS.md, docs/node-core.md): ``start`` (with
the recovered ``term``), ``role`` (term = the fluvio epoch or the lease generation; only the node's own
group, not a storage shard's), ``vote`` (blazingmq ``proposal``, raft and aeron ``vote``, each with
``candidate`` and ``granted``; pre-votes and scouting are not votes), the fluvio SC's ``decision`` and a
leader's shard ``assign``. Events of one node are taken in journal order; across nodes only terms, shard
groups and (for ``assign`` and ``lsn-reuse``'s ``acted``) the journals' wall clocks order them, so every
count is an estimate of what the schedule offered, never a verdict.

The plugin publishes :func:`opportunities` as ``extras["opportunities"]`` (:mod:`adapters.cluster`); the
analysis calls it for every run it judges and stores what it returns in ``results.json``
(``harness.opportunities``), where the report's timeline caption and a suite's entry table read it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from checkers.history import JournalEvent
from cluster.core.bugs import KNOWN_BUGS

Journals = Mapping[str, Sequence[JournalEvent]]
"""Node id -> its journal events in journal order (``checkers.history.parse_journal``)."""

ELECTION_VOTES = ("vote", "proposal")
"""The ``vote`` kinds that are a vote in an election (not a pre-vote or an ElectionScouting answer)."""


@dataclass(frozen=True)
class Count:
    """One bug's chances in one run: ``opportunities``, and ``acted``, how many of them the journals show
    the mistake itself being made in (``None``: the journals cannot show that for this bug)."""

    opportunities: int
    acted: int | None = None


Counter = Callable[[Journals, Sequence[str]], Count]
"""A bug's counter: the run's journals and its data nodes (the SPUs in fluvio; not the SC) -> its count."""


def _own_group(event: JournalEvent) -> bool:
    return event.data.get("group") is None


def _term(event: JournalEvent) -> int | None:
    term = event.data.get("term")
    return term if isinstance(term, int) and not isinstance(term, bool) else None


def leader_changes(journals: Journals, nodes: Sequence[str]) -> int:
    """Terms some data node led, beyond the first one: each is a leader change of the run."""
    terms = {
        _term(event)
        for node in nodes
        for event in journals.get(node, ())
        if event.event == "role" and event.data.get("role") == "leader" and _own_group(event)
    }
    terms.discard(None)
    return max(len(terms) - 1, 0)


def restarts(journals: Journals, nodes: Sequence[str]) -> int:
    """``start`` events of data nodes after their first: restarts (after a kill or a stop)."""
    return sum(max(sum(1 for e in journals.get(node, ()) if e.event == "start") - 1, 0) for node in nodes)


def count_leader_changes(journals: Journals, nodes: Sequence[str]) -> Count:
    return Count(leader_changes(journals, nodes))


def count_leader_changes_and_restarts(journals: Journals, nodes: Sequence[str]) -> Count:
    return Count(leader_changes(journals, nodes) + restarts(journals, nodes))


def count_second_candidates(journals: Journals, nodes: Sequence[str]) -> Count:
    """``vote-twice``: (voter, term) pairs in which a voter that already supported someone in the term
    (a candidate it granted, or itself as a candidate of it) was asked by another candidate; ``acted``: the
    pairs in which it granted that other candidate too."""
    chances = acted = 0
    for node in nodes:
        supports: dict[int, str] = {}
        asked: set[int] = set()
        twice: set[int] = set()
        for event in journals.get(node, ()):
            term = _term(event)
            if term is None:
                continue
            if event.event == "role" and event.data.get("role") == "candidate" and _own_group(event):
                supports.setdefault(term, node)
            elif event.event == "vote" and event.data.get("kind") in ELECTION_VOTES:
                candidate = event.data.get("candidate")
                held = supports.get(term)
                if held is not None and candidate != held:
                    asked.add(term)
                    if event.data.get("granted") is True:
                        twice.add(term)
                if event.data.get("granted") is True and isinstance(candidate, str):
                    supports.setdefault(term, candidate)
        chances += len(asked)
        acted += len(twice)
    return Count(chances, acted)


def count_resumable_restarts(journals: Journals, nodes: Sequence[str]) -> Count:
    """``lsn-reuse``: restarts of a node whose last journalled role was leader of the term it restarts
    in (the precondition of the fast restart); ``acted``: those after which it led that same term again
    while no other data node had yet reached a later term (by the journals' wall clocks, the only order
    across nodes), so that followers could still take its reused LSNs. A node that restarts after the
    others elected a successor leads its old term alone: its duplicate LSNs are never committed."""
    later_terms = {node: [(e.wall, _term(e)) for e in journals.get(node, ())
                          if e.event == "role" and _own_group(e) and _term(e) is not None] for node in nodes}

    def moved_on(node: str, term: int, wall: float) -> bool:
        return any(at < wall and t > term for other in nodes if other != node for at, t in later_terms[other])

    chances = acted = 0
    for node in nodes:
        led: int | None = None  # the term of the node's last role event, if it led it
        started = False
        waiting: int | None = None  # a resumable term, until the node leads it again or moves on
        alone = False  # whether others had moved past that term when the node restarted
        for event in journals.get(node, ()):
            if event.event == "start":
                term = _term(event)
                if started and led is not None and term == led:
                    chances += 1
                    waiting, alone = term, moved_on(node, term, event.wall)
                started = True
                led = None
            elif event.event == "role" and _own_group(event):
                term = _term(event)
                led = term if event.data.get("role") == "leader" else None
                if waiting is not None and term is not None:
                    if event.data.get("role") == "leader" and term == waiting:
                        acted += not alone
                        waiting = None
                    elif term != waiting:
                        waiting = None
    return Count(chances, acted)


def count_outside_lrs_choices(journals: Journals, nodes: Sequence[str]) -> Count:
    """``promote-outside-lrs``: the SC's leader choices (``decision`` events with status CandidateFound)
    made while some SPU was outside the LRS; ``acted``: those whose candidate was outside it."""
    chances = acted = 0
    spus = set(nodes)
    for events in journals.values():
        for event in events:
            if event.event != "decision" or event.data.get("status") != "CandidateFound":
                continue
            lrs = event.data.get("lrs")
            if not isinstance(lrs, list):
                continue
            if spus - set(lrs):
                chances += 1
            if event.data.get("candidate") not in lrs:
                acted += 1
    return Count(chances, acted)


def count_repeat_candidacies(journals: Journals, nodes: Sequence[str]) -> Count:
    """``stale-vote``: aeron candidacies (``role`` candidate of a new term) of a node that some voter
    granted a Vote FOR in an earlier term of the same process (since its last ``start``): votes the bug
    makes it remember and count again."""
    granted: dict[str, set[int]] = {}
    for node in nodes:
        for event in journals.get(node, ()):
            term, candidate = _term(event), event.data.get("candidate")
            if (event.event == "vote" and event.data.get("kind") in ELECTION_VOTES
                    and event.data.get("granted") is True and isinstance(candidate, str) and term is not None):
                granted.setdefault(candidate, set()).add(term)
    chances = 0
    for node in nodes:
        mine = granted.get(node, set())
        since: int | None = None
        seen: set[int] = set()
        for event in journals.get(node, ()):
            term = _term(event)
            if event.event == "start":
                since, seen = term, set()
            elif (event.event == "role" and event.data.get("role") == "candidate" and _own_group(event)
                  and term is not None and term not in seen):
                seen.add(term)
                if any((since is None or t > since) and t < term for t in mine):
                    chances += 1
    return Count(chances)


def count_primary_changes(journals: Journals, nodes: Sequence[str]) -> Count:
    """``stale-primary``, ``primary-lsn-reuse``: shard assignments (``assign``, journalled by the leader
    that made them; ordered by its wall clock) naming a primary other than the shard's previous one."""
    assigns = sorted(
        (event.wall, node, event.seq, event.data.get("group"), event.data.get("primary"))
        for node in nodes
        for event in journals.get(node, ())
        if event.event == "assign"
    )
    last: dict[object, object] = {}
    changes = 0
    for _wall, _node, _seq, group, primary in assigns:
        if group in last and last[group] != primary:
            changes += 1
        last[group] = primary
    return Count(changes)


COUNTERS: dict[str, Counter] = {
    "vote-twice": count_second_candidates,
    "ack-before-commit": count_leader_changes,
    "skip-leader-sync": count_leader_changes,
    "lsn-reuse": count_resumable_restarts,
    "stale-read": count_leader_changes,
    "lease-read-wallclock": count_leader_changes,
    "promote-outside-lrs": count_outside_lrs_choices,
    "stale-vote": count_repeat_candidacies,
    "no-dedup": count_leader_changes,
    "no-redelivery": count_leader_changes_and_restarts,
    "lease-own-clock": count_leader_changes,
    "no-fencing-token": count_leader_changes,
    "read-beyond-hw": count_leader_changes,
    "stale-primary": count_primary_changes,
    "primary-lsn-reuse": count_primary_changes,
}
"""One counter per known bug (``cluster.core.bugs.KNOWN_BUGS``), finding its ``opportunity`` in journals."""

ACTED = {
    "vote-twice": "a voter granted a second candidate of the term",
    "lsn-reuse": "the restarted node led its old term again before any other node had moved past it",
    "promote-outside-lrs": "the SC chose a candidate outside the LRS",
}
"""What ``acted`` counts, for the bugs whose counter can see the mistake itself."""


def _bugs_of(spec: Mapping[str, object]) -> list[str]:
    options = spec.get("db_options")
    bugs = options.get("bug") if isinstance(options, Mapping) else None
    if isinstance(bugs, str):
        bugs = [bugs]
    return [b for b in bugs or () if isinstance(b, str) and b in KNOWN_BUGS]


def data_nodes(spec: Mapping[str, object], journals: Journals) -> list[str]:
    """The data nodes of a run: ``test.json``'s ``nodes``, else every journal but the fluvio SC's."""
    named = spec.get("nodes")
    if isinstance(named, list) and named and all(isinstance(n, str) for n in named):
        return list(named)
    return sorted(node for node, events in journals.items()
                  if not any(e.event == "start" and e.data.get("role") == "controller" for e in events[:1]))


def count(bug: str, journals: Journals, nodes: Iterable[str]) -> Count:
    """``bug``'s count in these journals (``KeyError`` for a bug without a counter)."""
    return COUNTERS[bug](journals, list(nodes))


def opportunities(spec: Mapping[str, object], journals: Journals) -> dict[str, dict[str, object]] | None:
    """The ``extras["opportunities"]`` hook: for each known bug switched on in the run (``test.json``'s
    ``db_options.bug``), ``{"count", "what", "acted", "acted_what"}``; ``None`` for a run without one."""
    bugs = _bugs_of(spec)
    if not bugs:
        return None
    nodes = data_nodes(spec, journals)
    found: dict[str, dict[str, object]] = {}
    for bug in bugs:
        counted = count(bug, journals, nodes)
        found[bug] = {"count": counted.opportunities, "what": KNOWN_BUGS[bug].opportunity,
                      "acted": counted.acted, "acted_what": ACTED.get(bug)}
    return found
