"""The BlazingMQ elector's rules (seed 000, seed 004) and the new leader's synchronisation.

Rules are tested on one node fed messages by hand; the synchronisation on a CoreNetwork, including the
cases the issue singles out: a lagging node wins and must not lose a committed write, and entries of an
old term that were never committed end the same way on every node.
"""

from __future__ import annotations

from cluster.core.messages import (
    ElectionProposal,
    ElectionScouting,
    LeaderHeartbeat,
)
from tests.cluster.core_network import CoreNetwork, roles, sent, single_node

FAST = {"heartbeat_interval": 0.1, "missed_heartbeats": 3, "election_random_wait": 0.3,
        "proposal_timeout": 0.3}


def heartbeat(term: int, commit: int = 0, round_: int = 1) -> dict:
    return LeaderHeartbeat(term=term, commit_index=commit, commit_lsn=[0, 0], round=round_).to_wire()


# --- ElectionProposal ----------------------------------------------------------------------------------


def test_proposal_is_supported_iff_its_term_is_higher_and_the_term_is_persisted_first() -> None:
    node, _ = single_node(records=[{"t": "term", "term": 4, "vote": None}])
    same = node.receive("n2", ElectionProposal(term=4).to_wire(), 1.0, 1.0)
    assert sent(same, "ElectionProposalResponse", "n2")[0]["granted"] is False
    assert node.term == 4 and same.persist == []

    higher = node.receive("n2", ElectionProposal(term=5).to_wire(), 1.1, 1.1)
    response = sent(higher, "ElectionProposalResponse", "n2")[0]
    assert response == {"type": "ElectionProposalResponse", "term": 5, "granted": True, "unsolicited": False}
    assert higher.persist == [{"t": "term", "term": 5, "vote": "n2"}]
    # A second candidate of the same term is refused: one yes per term.
    again = node.receive("n3", ElectionProposal(term=5).to_wire(), 1.2, 1.2)
    assert sent(again, "ElectionProposalResponse", "n3")[0]["granted"] is False


def test_a_candidate_proposes_with_incremented_term_and_wins_with_a_majority() -> None:
    node, _ = single_node(scouting=False, **FAST)
    ready = node.tick(5.0, 5.0)
    assert node.role == "candidate" and node.term == 1
    assert sent(ready, "ElectionProposal") == [{"type": "ElectionProposal", "term": 1}] * 2
    assert {"t": "term", "term": 1, "vote": "n1"} in ready.persist
    won = node.receive("n3", {"type": "ElectionProposalResponse", "term": 1, "granted": True}, 5.1, 5.1)
    assert node.role == "leader"
    assert roles(won.journal) == [("leader", 1, "n1")]
    assert sent(won, "LeaderHeartbeat")  # the new leader announces itself at once


def test_a_candidate_without_a_majority_returns_to_follower_after_the_proposal_timeout() -> None:
    node, _ = single_node(scouting=False, **FAST)
    node.tick(5.0, 5.0)
    node.receive("n2", {"type": "ElectionProposalResponse", "term": 1, "granted": False}, 5.1, 5.1)
    assert node.role == "candidate"
    ready = node.tick(5.0 + FAST["proposal_timeout"], 5.3)
    assert node.role == "follower" and node.term == 1
    assert roles(ready.journal) == [("follower", 1, None)]


# --- ElectionScouting ------------------------------------------------------------------------------------


def test_scouting_asks_with_term_plus_one_without_bumping_the_proposers_term() -> None:
    node, _ = single_node(records=[{"t": "term", "term": 7, "vote": None}], **FAST)
    ready = node.tick(5.0, 5.0)
    assert sent(ready, "ElectionScouting") == [{"type": "ElectionScouting", "term": 8}] * 2
    assert node.term == 7 and node.role == "follower" and ready.persist == []
    # One yes makes a majority of three: only now does it propose, with ++selfTerm.
    ready = node.receive("n2", {"type": "ElectionScoutingResponse", "term": 8, "granted": True,
                                "responder_term": 3}, 5.1, 5.1)
    assert node.term == 8 and node.role == "candidate"
    assert sent(ready, "ElectionProposal") == [{"type": "ElectionProposal", "term": 8}] * 2


def test_scouting_is_answered_yes_only_without_a_leader_and_with_a_lower_own_term() -> None:
    node, _ = single_node(records=[{"t": "term", "term": 3, "vote": None}])

    def answer(term: int, sender: str = "n2") -> bool:
        ready = node.receive(sender, ElectionScouting(term=term).to_wire(), 1.0, 1.0)
        return sent(ready, "ElectionScoutingResponse", sender)[0]["granted"]

    assert answer(4) is True
    assert answer(3) is False  # own term not lower
    assert node.term == 3  # scouting never moves the receiver's term
    node.receive("n3", heartbeat(3), 1.0, 1.0)  # now it perceives n3 as leader
    assert node.leader == "n3"
    assert answer(9) is False  # a leader is perceived: no, whatever the term
    assert node.term == 3 and node.leader == "n3"  # and no higher-term honour for scouting


def test_scouting_without_a_majority_waits_and_tries_again_without_a_term_bump() -> None:
    node, _ = single_node(**FAST)
    node.tick(5.0, 5.0)
    for sender in ("n2", "n3"):
        node.receive(sender, {"type": "ElectionScoutingResponse", "term": 1, "granted": False,
                              "responder_term": 0}, 5.1, 5.1)
    retry = node.tick(5.0 + FAST["proposal_timeout"] + FAST["election_random_wait"] + 0.01, 6.0)
    later = retry if sent(retry, "ElectionScouting") else node.tick(7.0, 7.0)
    assert sent(later, "ElectionScouting") and node.term == 0


# --- heartbeats and the higher-term rule -----------------------------------------------------------------


def test_discovering_a_leader_sends_it_unsolicited_support() -> None:
    node, _ = single_node()
    ready = node.receive("n2", heartbeat(2), 1.0, 1.0)
    assert node.term == 2 and node.leader == "n2" and node.role == "follower"
    assert sent(ready, "ElectionProposalResponse", "n2") == [
        {"type": "ElectionProposalResponse", "term": 2, "granted": True, "unsolicited": True}]
    assert sent(ready, "LeaderHeartbeatResponse", "n2")
    # Only on discovery: the next heartbeat of the same leader is just acknowledged.
    assert not sent(node.receive("n2", heartbeat(2, round_=2), 1.1, 1.1), "ElectionProposalResponse")


def test_a_heartbeat_of_a_stale_term_gets_invalid_heartbeat_and_the_stale_leader_steps_down() -> None:
    follower, _ = single_node(records=[{"t": "term", "term": 11, "vote": None}])
    ready = follower.receive("n2", heartbeat(10), 1.0, 1.0)
    assert sent(ready, "InvalidHeartbeat", "n2") == [{"type": "InvalidHeartbeat", "term": 11}]

    leader, _ = single_node(scouting=False, **FAST)
    leader.tick(5.0, 5.0)
    leader.receive("n2", {"type": "ElectionProposalResponse", "term": 1, "granted": True}, 5.0, 5.0)
    assert leader.role == "leader"
    ready = leader.receive("n3", {"type": "InvalidHeartbeat", "term": 11}, 5.1, 5.1)
    assert leader.role == "follower" and leader.term == 11 and leader.leader is None
    assert roles(ready.journal) == [("follower", 11, None)]


def test_three_missed_heartbeats_then_a_random_wait_before_scouting() -> None:
    node, _ = single_node(**dict(FAST, election_random_wait=0.5), seed=3)
    node.receive("n2", heartbeat(1), 1.0, 1.0)
    quiet = node.tick(1.0 + 2 * FAST["heartbeat_interval"], 1.2)
    assert node.leader == "n2" and not quiet.journal
    lost_at = 1.0 + 3 * FAST["heartbeat_interval"]
    assert quiet.next_tick == lost_at
    lost = node.tick(lost_at, lost_at)
    assert roles(lost.journal) == [("follower", 1, None)]
    assert not sent(lost, "ElectionScouting")  # the random wait comes first
    assert lost_at < lost.next_tick <= lost_at + 0.5
    scouting = node.tick(lost.next_tick, lost.next_tick)
    assert sent(scouting, "ElectionScouting") == [{"type": "ElectionScouting", "term": 2}] * 2


def test_a_cluster_elects_one_leader_within_the_default_timing() -> None:
    net = CoreNetwork(3, seed=5).start()
    leader = net.wait_for_leader(timeout=3.0)
    assert net.now <= 3.0
    assert net.leaders() == [leader] and not net.violations
    assert all(net.nodes[n].leader == leader for n in net.ids)


def test_a_rejoining_node_does_not_disrupt_a_stable_leader_with_scouting() -> None:
    """Seed 000 "Non-sticky Leader": an isolated node's scouting never bumps its term."""
    net = CoreNetwork(4, seed=2, **FAST).start()
    leader = net.wait_for_leader()
    other = next(n for n in net.ids if n != leader)
    term = net.nodes[leader].term
    net.isolate(other)
    net.run(5.0)
    assert net.nodes[other].term == term  # it scouted, never proposed
    net.heal()
    net.run(2.0)
    assert net.leader() == leader and net.nodes[leader].term == term
    assert net.nodes[other].leader == leader


def leader_changes_when_two_nodes_cannot_see_each_other(scouting: bool) -> set[tuple[int, str]]:
    """Seed 000 "Leader Ping-Pong": the leader and one follower lose each other; both see the rest."""
    net = CoreNetwork(4, seed=3, scouting=scouting, per_node={"n1": {"startup_wait": 0.0,
                                                                    "election_random_wait": 0.0}},
                      **FAST).start()
    assert net.wait_for_leader() == "n1"
    net.cut("n1", "n2")
    net.run(10.0)
    assert not net.violations
    return {(e["term"], e["node"]) for n in net.ids for e in net.journals[n]
            if e["event"] == "role" and e["role"] == "leader"}


def test_scouting_prevents_leader_ping_pong() -> None:
    assert leader_changes_when_two_nodes_cannot_see_each_other(scouting=True) == {(1, "n1")}
    without = leader_changes_when_two_nodes_cannot_see_each_other(scouting=False)
    assert len(without) >= 4 and {node for _, node in without} == {"n1", "n2"}


# --- leader synchronisation ------------------------------------------------------------------------------


def lagging_winner_network(**extra: object) -> tuple[CoreNetwork, list[dict]]:
    """n1 leads and commits three writes with n2 while n3 hears nothing; n1 then crashes and n3 wins
    (n2 is configured to wait long before proposing, so that n3 proposes first)."""
    net = CoreNetwork(3, seed=1, per_node={"n1": {"startup_wait": 0.0, "election_random_wait": 0.0},
                                           "n2": {"election_random_wait": 5.0}}, **FAST, **extra).start()
    assert net.wait_for_leader() == "n1"
    net.partition(["n1"], ["n3"])
    replies = [net.call("n1", {"op": "write", "key": "x", "value": v}) for v in (1, 2, 3)]
    assert all(r["ok"] for r in replies)
    assert net.nodes["n3"].log.last_index < net.nodes["n1"].log.last_index
    net.crash("n1")
    net.heal()
    net.run_until(lambda: net.leader() in ("n2", "n3") and net.nodes[net.leader()].accepting, 10.0)
    return net, replies


def test_a_lagging_winner_fetches_the_committed_entries_it_lacks_before_serving() -> None:
    net, replies = lagging_winner_network()
    assert net.leader() == "n3"
    lsns = [r["lsn"] for r in replies]
    read = net.call("n3", {"op": "read", "key": "x"})
    assert read == {"id": read["id"], "ok": True, "value": 3, "lsn": lsns[-1]}
    n3_lsns = [e["lsn"] for e in net.nodes["n3"].log.entries]
    assert all(lsn in n3_lsns for lsn in lsns)
    # Its own term starts after the fetched entries, at seq 1.
    assert net.nodes["n3"].log.entry(len(n3_lsns))["lsn"] == [net.nodes["n3"].term, 1]
    net.start_node("n1")
    net.run(2.0)
    logs = {n: net.nodes[n].log.entries for n in net.ids}
    assert logs["n1"] == logs["n2"] == logs["n3"]
    assert not net.violations


def test_the_winner_learns_lsns_then_fetches_from_the_most_up_to_date_follower() -> None:
    net, _ = lagging_winner_network()
    after_win = net.traffic[max(i for i, t in enumerate(net.traffic) if t[2] == "ElectionProposal"):]
    sync = [(src, dst, kind) for src, dst, kind in after_win if kind.startswith(("Follower", "LeaderSync"))]
    assert ("n3", "n2", "FollowerLSNRequest") in sync
    assert ("n3", "n2", "LeaderSyncDataQuery") in sync
    assert sync.index(("n3", "n2", "FollowerLSNRequest")) < sync.index(("n3", "n2", "LeaderSyncDataQuery"))
    # The journal of n3 shows it appended the fetched entries before its own term's first entry.
    appends = [e for e in net.journals["n3"] if e["event"] == "append"]
    term = net.nodes["n3"].term
    fetched, own = appends[-2], appends[-1]
    assert fetched["last_lsn"][0] < term and own["first_lsn"] == [term, 1]


def test_an_uncommitted_entry_of_an_old_term_held_by_the_majority_survives_and_commits() -> None:
    """n1 appends w, only n2 stores it, nobody learns it committed; n1 crashes; n3 wins and must adopt
    w from n2 (the most up-to-date log of its majority), so w commits under the new term."""
    net = CoreNetwork(3, seed=1, per_node={"n1": {"startup_wait": 0.0, "election_random_wait": 0.0},
                                           "n2": {"election_random_wait": 5.0}}, **FAST).start()
    assert net.wait_for_leader() == "n1"
    request_id = net.send_request("n1", {"op": "write", "key": "x", "value": "w"})
    # n1 -> n3 never arrives; n1 -> n2 arrives but n2's acknowledgement is lost.
    net.drop_where(lambda e: e.dst == "n3")
    while net.inflight:
        envelope = net.inflight[0]
        if envelope.src == "n1" and envelope.msg["type"] == "AppendEntries":
            net.deliver(0)
        else:
            net.drop(0)
    net.drop_where(lambda e: e.src == "n2")
    w_lsn = net.nodes["n1"].log.last_lsn
    assert net.nodes["n2"].log.last_lsn == w_lsn and net.nodes["n1"].commit_index < net.nodes["n1"].log.last_index
    net.crash("n1")
    assert net.reply_to("c", request_id) is None  # the client never heard: indefinite
    assert net.run_until(lambda: net.leader() == "n3" and net.nodes["n3"].accepting, 10.0)
    net.run(1.0)
    for node_id in ("n2", "n3"):
        applied = [e["lsn"] for e in net.applied(node_id)]
        assert w_lsn in applied, node_id
    assert net.call("n3", {"op": "read", "key": "x"})["value"] == "w"
    assert not net.violations


def test_an_uncommitted_entry_only_the_old_leader_holds_is_truncated_everywhere() -> None:
    net = CoreNetwork(3, seed=1, per_node={"n1": {"startup_wait": 0.0, "election_random_wait": 0.0}},
                      **FAST).start()
    assert net.wait_for_leader() == "n1"
    net.isolate("n1")
    request_id = net.send_request("n1", {"op": "write", "key": "x", "value": "lost"})
    lost_lsn = net.nodes["n1"].log.last_lsn
    net.crash("n1")
    new_leader = net.wait_for_leader(among=("n2", "n3"))
    assert net.call(new_leader, {"op": "write", "key": "x", "value": "kept"})["ok"]
    net.heal()
    net.start_node("n1")
    net.run(2.0)
    logs = [net.nodes[n].log.entries for n in net.ids]
    assert logs[0] == logs[1] == logs[2]
    assert all(e["lsn"] != lost_lsn or e["value"] != "lost" for e in logs[0])
    assert all(e["op"].get("value") != "lost" for n in net.ids for e in net.applied(n))
    assert net.reply_to("c", request_id) is None
    assert not net.violations


def test_a_deposed_leader_answers_its_uncommitted_writes_with_an_indefinite_error() -> None:
    net = CoreNetwork(3, seed=1, per_node={"n1": {"startup_wait": 0.0, "election_random_wait": 0.0}},
                      **FAST).start()
    assert net.wait_for_leader() == "n1"
    net.isolate("n1")
    request_id = net.send_request("n1", {"op": "write", "key": "x", "value": 1})
    net.run_until(lambda: net.leader() in ("n2", "n3"), 5.0)
    net.heal()
    net.run_until(lambda: net.reply_to("c", request_id) is not None, 5.0)
    reply = net.reply_to("c", request_id)
    assert reply["ok"] is False and reply["error"] == "leadership-lost" and reply["definite"] is False
    assert not net.violations
