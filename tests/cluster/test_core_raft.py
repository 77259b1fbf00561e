"""Raft mode: one persisted vote per term, the up-to-date vote rule (seed 003) and PreVote."""

from __future__ import annotations

from cluster.core.messages import LeaderHeartbeat, PreVoteRequest, VoteRequest
from tests.cluster.core_network import CoreNetwork, sent, single_node

FAST = {"heartbeat_interval": 0.1, "missed_heartbeats": 3, "election_random_wait": 0.3,
        "proposal_timeout": 0.3}
# A log of three entries, the last of term 2.
LOG = [{"t": "term", "term": 2, "vote": None},
       {"t": "entries", "from": 1, "entries": [
           {"lsn": [1, 1], "f": "noop", "key": None, "time": 0.0},
           {"lsn": [1, 2], "f": "write", "key": "x", "value": 1, "time": 0.1},
           {"lsn": [2, 1], "f": "noop", "key": None, "time": 0.2}]}]


def vote(node, candidate: str, term: int, last_index: int, last_lsn: list[int], now: float = 1.0) -> bool:
    ready = node.receive(candidate, VoteRequest(term=term, last_index=last_index, last_lsn=last_lsn).to_wire(),
                         now, now)
    return sent(ready, "VoteResponse", candidate)[0]["granted"]


def test_votes_go_only_to_candidates_at_least_as_up_to_date() -> None:
    node, _ = single_node(mode="raft", records=LOG)
    assert vote(node, "n2", 3, 5, [1, 9]) is False  # longer, but its last term is older
    assert vote(node, "n2", 4, 2, [2, 1]) is False  # same last term, shorter
    assert vote(node, "n2", 5, 3, [2, 1]) is True  # same last term, as long
    node2, _ = single_node(mode="raft", records=LOG)
    assert vote(node2, "n3", 3, 1, [3, 1]) is True  # newer last term wins even when shorter


def test_one_vote_per_term_persisted_before_it_is_sent_and_kept_across_a_restart() -> None:
    node, _ = single_node(mode="raft", records=LOG)
    ready = node.receive("n2", VoteRequest(term=3, last_index=3, last_lsn=[2, 1]).to_wire(), 1.0, 1.0)
    assert ready.persist[-1] == {"t": "term", "term": 3, "vote": "n2"}
    assert sent(ready, "VoteResponse", "n2")[0]["granted"] is True
    assert vote(node, "n3", 3, 3, [2, 1]) is False  # second candidate, same term
    assert vote(node, "n2", 3, 3, [2, 1]) is True  # the same candidate asking again is fine

    restarted, _ = single_node(mode="raft", records=LOG + ready.persist)
    assert restarted.voted_for == "n2"
    assert vote(restarted, "n3", 3, 3, [2, 1]) is False


def test_prevote_is_refused_while_a_live_leader_is_perceived_and_never_moves_terms() -> None:
    node, _ = single_node(mode="raft", records=LOG)

    def prevote(term: int) -> bool:
        ready = node.receive("n2", PreVoteRequest(term=term, last_index=3, last_lsn=[2, 1]).to_wire(), 1.0, 1.0)
        return sent(ready, "PreVoteResponse", "n2")[0]["granted"]

    assert prevote(3) is True
    assert prevote(2) is False  # not higher than our term
    assert node.term == 2
    node.receive("n3", LeaderHeartbeat(term=2, commit_index=0, commit_lsn=[0, 0], round=1).to_wire(), 1.0, 1.0)
    assert prevote(9) is False and node.term == 2


def test_a_prevote_majority_leads_to_a_vote_request_in_term_plus_one() -> None:
    node, _ = single_node(mode="raft", records=LOG, **FAST)
    ready = node.tick(5.0, 5.0)
    assert sent(ready, "PreVoteRequest") == [{"type": "PreVoteRequest", "term": 3, "last_index": 3,
                                              "last_lsn": [2, 1]}] * 2
    assert node.term == 2
    ready = node.receive("n2", {"type": "PreVoteResponse", "term": 3, "granted": True, "responder_term": 2},
                         5.1, 5.1)
    assert node.role == "candidate" and node.term == 3 and node.voted_for == "n1"
    assert sent(ready, "VoteRequest")[0] == {"type": "VoteRequest", "term": 3, "last_index": 3,
                                             "last_lsn": [2, 1]}


def test_only_an_up_to_date_node_can_win_after_the_leader_dies() -> None:
    """n3 misses writes; when the leader dies, n3 cannot collect n2's vote, so n2 wins."""
    net = CoreNetwork(3, mode="raft", seed=4, per_node={"n1": {"startup_wait": 0.0, "election_random_wait": 0.0},
                                                        "n2": {"election_random_wait": 2.0}}, **FAST).start()
    assert net.wait_for_leader() == "n1"
    net.partition(["n1"], ["n3"])
    assert net.call("n1", {"op": "write", "key": "x", "value": 1})["ok"]
    net.crash("n1")
    net.heal()
    assert net.wait_for_leader(among=("n2", "n3")) == "n2"
    assert net.call("n2", {"op": "read", "key": "x"})["value"] == 1
    refusals = [e for e in net.journals["n2"] if e["event"] == "vote" and e["candidate"] == "n3"]
    assert refusals and not any(e["granted"] for e in refusals)
    assert not net.violations
