"""single-leader-per-term over journal role events and history status observations."""

from __future__ import annotations

from checkers.leader import check_single_leader_per_term
from checkers.verdict import UNKNOWN
from tests.checkers.scenario import HistoryBuilder, JournalBuilder, journals


def _three_nodes() -> tuple[JournalBuilder, JournalBuilder, JournalBuilder]:
    n1, n2, n3 = JournalBuilder("n1"), JournalBuilder("n2"), JournalBuilder("n3")
    for b in (n1, n2, n3):
        b.start()
        b.role("follower", 0, None)
    n1.role("candidate", 1, None)
    n1.role("leader", 1, "n1")
    n2.role("follower", 1, "n1")
    n3.role("follower", 1, "n1")
    n2.role("candidate", 2, None)
    n2.role("leader", 2, "n2")
    n1.role("follower", 2, "n2")
    return n1, n2, n3


def test_one_leader_per_term_is_valid() -> None:
    verdict = check_single_leader_per_term(journals(*_three_nodes()), None)
    assert verdict.valid is True
    assert verdict.stats["terms_with_leader"] == 2
    assert verdict.stats["claims"] == 2


def test_same_node_claiming_a_term_twice_is_not_a_conflict() -> None:
    n1, n2, n3 = _three_nodes()
    n1.start()
    n1.role("leader", 1, "n1")  # e.g. journalled again after a restart
    assert check_single_leader_per_term(journals(n1, n2, n3), None).valid is True


def test_two_leaders_in_a_term_from_journals() -> None:
    n1, n2, n3 = _three_nodes()
    n3.role("candidate", 2, None)
    line = n3.role("leader", 2, "n3")
    verdict = check_single_leader_per_term(journals(n1, n2, n3), None)
    assert verdict.valid is False
    cx = verdict.counterexample
    assert cx is not None
    assert cx["term"] == 2 and cx["nodes"] == ["n2", "n3"]
    claim_n3 = next(c for c in cx["claims"] if c["node"] == "n3")
    assert claim_n3["line"] == line and claim_n3["file"] == "nodes/n3/journal.jsonl"
    assert claim_n3["wall"] is not None
    # The role events around n3's claim: its candidacy before it.
    context = cx["role_events"]["n3"]
    assert [e["role"] for e in context][-2:] == ["candidate", "leader"]
    assert "term 2 has 2 leaders" in verdict.summary and "n3 (journal line" in verdict.summary


def test_a_follower_naming_another_leader_is_not_a_claim() -> None:
    n1, n2, n3 = _three_nodes()
    n3.role("follower", 2, "n3")  # hearsay about itself as leader, but role is follower
    n1.role("follower", 1, "n3")  # stale belief
    assert check_single_leader_per_term(journals(n1, n2, n3), None).valid is True


def test_status_observations_in_the_history() -> None:
    b = HistoryBuilder()
    b.op(100, "status", output={"node": "n1", "role": "leader", "term": 4, "leader": "n1"})
    b.op(101, "status", output={"node": "n2", "role": "follower", "term": 4, "leader": "n1"})
    assert check_single_leader_per_term(None, b.history()).valid is True
    line = b.invoke(102, "status", node="n3")
    b.complete(102, "ok", "status", None, {"role": "leader", "term": 4, "leader": "n3"}, node="n3")
    verdict = check_single_leader_per_term(None, b.history())
    assert verdict.valid is False
    assert verdict.counterexample is not None
    claims = {c["node"]: c for c in verdict.counterexample["claims"]}
    assert set(claims) == {"n1", "n3"}  # n3 named by the operation's node field
    assert claims["n3"]["line"] == line and claims["n3"]["source"] == "history"
    assert claims["n3"]["time"] == b.events[line - 1]["time"]


def test_journal_and_status_claims_combine() -> None:
    n1, n2, n3 = _three_nodes()
    b = HistoryBuilder()
    b.op(100, "status", output={"node": "n3", "role": "leader", "term": 1, "leader": "n3"})
    verdict = check_single_leader_per_term(journals(n1, n2, n3), b.history())
    assert verdict.valid is False
    assert verdict.counterexample is not None
    assert verdict.counterexample["term"] == 1
    assert {c["source"] for c in verdict.counterexample["claims"]} == {"journal", "history"}


def test_unusable_status_observations_are_counted() -> None:
    b = HistoryBuilder()
    b.op(100, "status", output="leader")
    b.op(101, "status", output={"role": "leader", "term": "x", "node": "n1"})
    b.op(102, "status", output={"node": "n2", "role": "follower", "term": 1, "leader": None})
    verdict = check_single_leader_per_term(None, b.history())
    assert verdict.valid is True
    assert verdict.stats["unusable_status_observations"] == 2


def test_nothing_to_judge_is_unknown() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1)
    assert check_single_leader_per_term(None, b.history()).valid == UNKNOWN
    assert check_single_leader_per_term({}, None).valid == UNKNOWN


def test_many_conflicting_terms_are_all_counted() -> None:
    n1, n2 = JournalBuilder("n1"), JournalBuilder("n2")
    for term in range(1, 31):
        n1.role("leader", term, "n1")
        n2.role("leader", term, "n2")
    verdict = check_single_leader_per_term(journals(n1, n2), None)
    assert verdict.valid is False
    assert verdict.stats["conflicting_terms"] == 30
    assert verdict.counterexample is not None
    assert len(verdict.counterexample["conflicts"]) == 20
    assert "29 more terms" in verdict.summary
