"""The ``cluster`` plugin's opportunity counters (``adapters.cluster.opportunities``), on hand-made journals:
one counter per known bug, each finding the situation its bug needs (issue 32)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.cluster import plugin
from adapters.cluster.opportunities import ACTED, COUNTERS, count, data_nodes, leader_changes, opportunities
from checkers.history import JournalEvent, parse_journal
from cluster.core.bugs import KNOWN_BUGS

NODES = ("n1", "n2", "n3")


def journal(node: str, *events: dict[str, Any]) -> list[JournalEvent]:
    """A node's journal from its events as they would be written (node, seq and wall filled in)."""
    lines = [json.dumps({"node": node, "seq": seq, "wall": 100.0 + seq, **event}) for seq, event in enumerate(events)]
    return parse_journal(lines, f"{node}/journal.jsonl")


def role(role: str, term: int, leader: str | None = None, **more: Any) -> dict[str, Any]:
    return {"event": "role", "role": role, "term": term, "leader": leader, **more}


def start(term: int) -> dict[str, Any]:
    return {"event": "start", "mode": "raft", "term": term, "last_lsn": [term, 0], "commit_lsn": [0, 0], "bugs": []}


def vote(term: int, candidate: str, granted: bool, kind: str = "vote") -> dict[str, Any]:
    return {"event": "vote", "kind": kind, "term": term, "candidate": candidate, "granted": granted}


def decision(status: str, epoch: int, candidate: str | None, lrs: list[str]) -> dict[str, Any]:
    return {"event": "decision", "status": status, "epoch": epoch, "leader": None, "candidate": candidate,
            "lrs": lrs, "reason": "test"}


def test_every_known_bug_declares_its_opportunity_and_has_one_counter() -> None:
    assert set(COUNTERS) == set(KNOWN_BUGS)
    assert all(bug.opportunity.strip() for bug in KNOWN_BUGS.values())
    assert set(ACTED) <= set(KNOWN_BUGS)
    assert plugin.extras["opportunities"] is opportunities


@pytest.mark.parametrize("bug", sorted(KNOWN_BUGS))
def test_every_counter_counts_nothing_in_a_quiet_run(bug: str) -> None:
    quiet = {"n1": journal("n1", start(0), role("follower", 0), role("candidate", 1), role("leader", 1, "n1")),
             "n2": journal("n2", start(0), role("follower", 0), vote(1, "n1", True), role("follower", 1, "n1"))}
    assert count(bug, quiet, ["n1", "n2"]).opportunities == 0


def test_promote_outside_lrs_counts_sc_choices_while_an_spu_is_outside_the_lrs() -> None:
    sc = journal(
        "sc",
        {"event": "start", "mode": "fluvio", "role": "controller", "term": 0, "status": "Offline", "leader": None,
         "lrs": list(NODES), "bugs": ["promote-outside-lrs"]},
        decision("Election", 0, None, list(NODES)),
        decision("CandidateFound", 1, "n1", list(NODES)),  # every SPU in the LRS: no chance
        decision("Online", 1, None, ["n1", "n2"]),
        decision("CandidateFound", 2, "n2", ["n1", "n2"]),  # n3 outside, chosen inside: a chance
        decision("CandidateFound", 3, "n3", ["n1", "n2"]),  # chosen outside: the mistake made
        decision("Offline", 3, None, ["n1", "n2"]),
    )
    counted = count("promote-outside-lrs", {"sc": sc}, NODES)
    assert (counted.opportunities, counted.acted) == (2, 1)


def test_vote_twice_counts_voters_asked_by_a_second_candidate_of_a_term() -> None:
    n3 = journal(
        "n3",
        start(0),
        vote(1, "n1", True),
        vote(1, "n1", True),  # the same candidate again: no chance
        vote(1, "n2", False),  # a second candidate of term 1, refused: a chance
        vote(2, "n2", True, kind="prevote"),  # pre-votes are no votes
        role("candidate", 3),
        vote(3, "n1", True),  # asked while a candidate itself, and granted: the mistake made
        vote(4, "n2", True),  # a new term's first vote: no chance
    )
    counted = count("vote-twice", {"n3": n3}, NODES)
    assert (counted.opportunities, counted.acted) == (2, 1)


def test_lsn_reuse_counts_restarts_into_a_term_the_node_led() -> None:
    n1 = journal(
        "n1",
        start(0), role("candidate", 1), role("leader", 1, "n1"),
        start(1), role("follower", 1), role("leader", 1, "n1"),  # fast restart, resumed: made
        start(1), role("follower", 1), role("follower", 2, "n2"),  # a chance, not taken (a new term first)
        start(2), role("follower", 2, "n2"),  # it followed: no chance
    )
    counted = count("lsn-reuse", {"n1": n1}, NODES)
    assert (counted.opportunities, counted.acted) == (2, 1)
    # a successor elected before the restart (an earlier wall clock): the old term is led alone, not counted
    ahead = journal("n2", *[{"event": "stop"}] * 3, role("leader", 2, "n2"))  # walls 100-103
    counted = count("lsn-reuse", {"n1": n1, "n2": ahead}, NODES)  # n1's second start is at wall 103
    assert (counted.opportunities, counted.acted) == (2, 1)
    earlier = journal("n2", role("leader", 2, "n2"))  # at wall 100, before both restarts
    counted = count("lsn-reuse", {"n1": n1, "n2": earlier}, NODES)
    assert (counted.opportunities, counted.acted) == (2, 0)


def test_leader_changes_count_terms_led_after_the_first_and_ignore_shard_groups() -> None:
    journals = {
        "n1": journal("n1", role("leader", 1, "n1"), role("leader", 9, "n1", group="s0"), role("follower", 2, "n2")),
        "n2": journal("n2", role("leader", 2, "n2"), role("leader", 2, "n2")),
        "n3": journal("n3", role("candidate", 3), role("leader", 4, "n3")),
    }
    assert leader_changes(journals, NODES) == 2
    assert count("ack-before-commit", journals, NODES).opportunities == 2
    assert count("ack-before-commit", journals, NODES).acted is None
    restarted = {**journals, "n2": journal("n2", start(0), role("leader", 2, "n2"), start(2))}
    assert count("no-redelivery", restarted, NODES).opportunities == 3


def test_stale_vote_counts_a_candidacy_after_an_earlier_ballot_that_won_votes() -> None:
    journals = {
        "n1": journal("n1", start(0), role("candidate", 1), role("candidate", 2), role("candidate", 2),
                      start(2), role("candidate", 3)),
        "n2": journal("n2", start(0), vote(1, "n1", True), vote(3, "n1", True)),
    }
    # term 2's ballot follows term 1's, which n2 voted for; after the restart the memory is gone
    assert count("stale-vote", journals, NODES).opportunities == 1


def test_shard_bugs_count_hand_overs_to_a_new_primary() -> None:
    def assign(group: str, primary: str, lease: int) -> dict[str, Any]:
        return {"event": "assign", "group": group, "primary": primary, "lease": lease}

    journals = {
        "n1": journal("n1", assign("s0", "n1", 1), assign("s1", "n2", 1), assign("s0", "n1", 2)),
        "n2": journal("n2", role("follower", 1), role("follower", 1), role("follower", 1), assign("s0", "n3", 3),
                      assign("s1", "n3", 2)),
    }
    assert count("stale-primary", journals, NODES).opportunities == 2
    assert count("primary-lsn-reuse", journals, NODES).opportunities == 2


def test_the_hook_answers_only_for_runs_with_a_known_bug() -> None:
    sc = journal("sc", decision("CandidateFound", 1, "n3", ["n1", "n2"]))
    spec: dict[str, Any] = {"db": "cluster", "nodes": list(NODES), "db_options": {"mode": "fluvio", "bug": []}}
    assert opportunities(spec, {"sc": sc}) is None
    spec["db_options"]["bug"] = ["promote-outside-lrs"]
    found = opportunities(spec, {"sc": sc})
    assert found == {"promote-outside-lrs": {"count": 1, "what": KNOWN_BUGS["promote-outside-lrs"].opportunity,
                                             "acted": 1, "acted_what": ACTED["promote-outside-lrs"]}}


def test_data_nodes_come_from_test_json_else_every_journal_but_the_controllers() -> None:
    sc = journal("sc", {"event": "start", "mode": "fluvio", "role": "controller", "term": 0})
    n1 = journal("n1", start(0))
    assert data_nodes({"nodes": ["n1", "n2"]}, {"sc": sc, "n1": n1}) == ["n1", "n2"]
    assert data_nodes({}, {"sc": sc, "n1": n1}) == ["n1"]
