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


# -- groups: a leader per shard, partition or queue (CONTRACTS: a claim conflicts only within its group) ----


def _group_role(b: JournalBuilder, group: str, role: str, term: int, leader: str | None) -> int:
    return b.add("role", role=role, term=term, leader=leader, group=group)


def test_two_groups_one_with_two_leaders_in_a_term_is_invalid_and_named() -> None:
    n1, n2, n3 = _three_nodes()
    _group_role(n1, "shard-0", "leader", 3, "n1")
    _group_role(n2, "shard-0", "follower", 3, "n1")
    _group_role(n2, "shard-1", "leader", 3, "n2")  # the same term in another group: no conflict
    _group_role(n3, "shard-1", "follower", 3, "n2")
    _group_role(n3, "shard-1", "candidate", 4, None)
    line = _group_role(n3, "shard-1", "leader", 4, "n3")
    _group_role(n2, "shard-1", "leader", 4, "n2")  # a second leader of shard-1 in term 4
    verdict = check_single_leader_per_term(journals(n1, n2, n3), None)
    assert verdict.valid is False
    cx = verdict.counterexample
    assert cx is not None
    assert (cx["group"], cx["term"], cx["nodes"]) == ("shard-1", 4, ["n2", "n3"])
    assert {c["group"] for c in cx["claims"]} == {"shard-1"}
    assert next(c for c in cx["claims"] if c["node"] == "n3")["line"] == line
    # The context is n3's role events of shard-1 only, not its cluster-level ones.
    assert {e.get("group") for e in cx["role_events"]["n3"]} == {"shard-1"}
    assert verdict.summary.startswith("group shard-1: term 4 has 2 leaders")
    assert verdict.stats["conflicting_groups"] == ["shard-1"]
    assert verdict.stats["groups"] == 3  # the cluster-level group, shard-0, shard-1


def test_claims_of_one_term_in_two_groups_by_different_nodes_do_not_conflict() -> None:
    n1, n2 = JournalBuilder("n1"), JournalBuilder("n2")
    _group_role(n1, "a", "leader", 7, "n1")
    _group_role(n2, "b", "leader", 7, "n2")
    b = HistoryBuilder()
    b.op(100, "status", output={"node": "n1", "role": "follower", "term": None, "leader": None,
                                "groups": [{"group": "a", "role": "leader", "term": 7, "leader": "n1"},
                                           {"group": "b", "role": "follower", "term": 7, "leader": "n2"}]})
    b.op(101, "status", output={"node": "n2", "role": "follower", "term": None, "leader": None,
                                "groups": [{"group": "b", "role": "leader", "term": 7, "leader": "n2"}]})
    verdict = check_single_leader_per_term(journals(n1, n2), b.history())
    assert verdict.valid is True, verdict.summary
    assert verdict.stats["terms_with_leader"] == 2 and verdict.stats["claims"] == 4
    assert "in each group: 2 groups" in verdict.summary


def test_status_groups_are_each_a_claim_for_their_group() -> None:
    b = HistoryBuilder()
    # A RabbitMQ-like status: no cluster-level leader, a leader per queue.
    b.op(100, "status", output={"node": "n1", "role": None, "term": None, "leader": None,
                                "groups": [{"group": "q1", "role": "leader", "term": 2, "leader": "n1"},
                                           {"group": "q2", "role": "follower", "term": 5, "leader": "n2"}]})
    b.op(101, "status", output={"node": "n2", "role": "follower", "term": None, "leader": None,
                                "groups": [{"group": "q2", "role": "leader", "term": 5, "leader": "n2"},
                                           {"group": "q1", "role": "follower", "term": 2, "leader": "n1"}]})
    verdict = check_single_leader_per_term(None, b.history())
    assert verdict.valid is True, verdict.summary
    assert verdict.stats["unusable_status_observations"] == 0
    assert verdict.stats["group_entries"] == 4
    line = b.op(102, "status", output={"node": "n3", "role": "follower", "term": None, "leader": None,
                                       "groups": [{"group": "q1", "role": "leader", "term": 2, "leader": "n3"},
                                                  {"group": "q2", "role": "follower", "term": 5, "leader": "n2"}]})
    verdict = check_single_leader_per_term(None, b.history())
    assert verdict.valid is False
    cx = verdict.counterexample
    assert cx is not None and cx["group"] == "q1" and cx["term"] == 2 and cx["nodes"] == ["n1", "n3"]
    assert next(c for c in cx["claims"] if c["node"] == "n3")["line"] == line - 1  # the invoke's line
    assert "group q1: term 2 has 2 leaders" in verdict.summary


def test_a_conflict_in_the_cluster_level_group_of_a_grouped_system_says_so() -> None:
    b = HistoryBuilder()
    b.op(100, "status", output={"node": "n1", "role": "leader", "term": 1, "leader": "n1",
                                "groups": [{"group": "shard-0", "role": "leader", "term": 1, "leader": "n1"}]})
    b.op(101, "status", output={"node": "n2", "role": "leader", "term": 1, "leader": "n2",
                                "groups": [{"group": "shard-0", "role": "follower", "term": 1, "leader": "n1"}]})
    verdict = check_single_leader_per_term(None, b.history())
    assert verdict.valid is False
    assert verdict.summary.startswith("the cluster-level group: term 1 has 2 leaders")
    assert verdict.counterexample is not None and "group" not in verdict.counterexample


def test_unusable_group_entries_are_counted_not_claimed() -> None:
    b = HistoryBuilder()
    b.op(100, "status", output={"node": "n1", "role": "follower", "term": 3, "leader": "n2",
                                "groups": ["shard-0", {"role": "leader", "term": 1},
                                           {"group": "shard-1", "role": "leader", "term": "x"},
                                           {"group": "shard-2", "role": "leader", "term": 1}]})
    verdict = check_single_leader_per_term(None, b.history())
    assert verdict.valid is True
    assert verdict.stats["unusable_group_entries"] == 3
    assert verdict.stats["claims"] == 1 and verdict.stats["unusable_status_observations"] == 0
