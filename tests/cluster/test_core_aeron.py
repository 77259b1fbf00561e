"""Aeron mode (seed 001): the Election state machine, its messages, and the seed's two worked examples.

Seed terms 0, 1, 2 are our terms 1, 2, 3 (our first elected term is 1); positions are log indexes
(docs/election-aeron.md). The late member's catch-up is replayed message by message, with every field of
every CanvassPosition, NewLeadershipTerm, ReplayRequest, CatchupPosition, AppendPosition and StopCatchup
asserted in order, and the member's Election states with them.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test

from cluster.core.election.aeron import CLOSED, FLAG_CATCHUP, FLAG_LIVE, NULL_POSITION, STATES, AeronElection
from cluster.core.messages import MessageError, RequestVote, Vote, parse_message
from tests.cluster.core_network import CoreNetwork, sent, single_node
from tests.cluster.test_core_stateful import NODE, ClusterMachine, _budget

FAST = {"heartbeat_interval": 0.1, "missed_heartbeats": 3, "election_random_wait": 0.3,
        "proposal_timeout": 0.3}
DOC = Path(__file__).resolve().parents[2] / "docs" / "election-aeron.md"


def states(net: CoreNetwork, node: str, since: int = 0) -> list[str]:
    return [e["state"] for e in net.journals[node][since:] if e["event"] == "election"]


def take(net: CoreNetwork, src: str, dst: str, kind: str) -> dict:
    """Deliver the first in-flight `kind` from `src` to `dst`; return it without its type."""
    for index, envelope in enumerate(net.inflight):
        if envelope.src == src and envelope.dst == dst and envelope.msg["type"] == kind:
            net.deliver(index)
            return {k: v for k, v in envelope.msg.items() if k != "type"}
    flight = [(e.src, e.dst, e.msg["type"]) for e in net.inflight]
    raise AssertionError(f"no {kind} from {src} to {dst} in flight: {flight}")


def settle_without(net: CoreNetwork, node: str) -> None:
    """Deliver everything not to or from `node` (the rest of the cluster goes on working)."""
    while True:
        index = next((i for i, e in enumerate(net.inflight) if node not in (e.src, e.dst)), None)
        if index is None:
            return
        net.deliver(index)


def in_flight(net: CoreNetwork, src: str, dst: str) -> list[str]:
    return [e.msg["type"] for e in net.inflight if e.src == src and e.dst == dst]


# --- the seed's first example: a simple successful election ---------------------------------------------


def test_a_first_election_walks_the_seeds_happy_path() -> None:
    net = CoreNetwork(3, mode="aeron", per_node={"n1": {"election_random_wait": 0.0}}, **FAST).start()
    assert net.wait_for_leader() == "n1"
    assert states(net, "n1") == ["INIT", "CANVASS", "NOMINATE", "CANDIDATE_BALLOT", "LEADER_LOG_REPLICATION",
                                 "LEADER_REPLAY", "LEADER_INIT", "LEADER_READY", "CLOSED"]
    for follower in ("n2", "n3"):
        assert states(net, follower) == ["INIT", "CANVASS", "NOMINATE", "FOLLOWER_BALLOT", "FOLLOWER_REPLAY",
                                         "FOLLOWER_LOG_INIT", "FOLLOWER_LOG_AWAIT", "FOLLOWER_READY", "CLOSED"]
        votes = [e for e in net.journals[follower] if e["event"] == "vote"]
        assert votes == [dict(votes[0], kind="vote", term=1, candidate="n1", granted=True)]
    # The term's first entry (the NewLeadershipTermEvent) is appended when the election closes, at
    # termBaseLogPosition + 1, and commits once a quorum holds it.
    assert net.nodes["n1"].log.entries[0]["lsn"] == [1, 1] and net.nodes["n1"].commit_index == 1
    kinds = {kind for src, _, kind in net.traffic if src == "n1"}
    assert {"CanvassPosition", "RequestVote", "NewLeadershipTerm", "CommitPosition"} <= kinds
    assert {"Vote", "AppendPosition"} <= {kind for src, _, kind in net.traffic if src == "n2"}
    assert net.call("n1", {"op": "write", "key": "x", "value": 1})["ok"]
    net.run(0.5)
    assert [n.commit_index for n in net.nodes.values()] == [2, 2, 2] and not net.violations


# --- the seed's "Replication and Catchup Details": the late member 0 ----------------------------------


def test_the_late_member_catches_up_exactly_as_the_seed_describes() -> None:
    """Member 0 (n1) has term 0's log up to A and starts after terms 1 and 2 happened; member 1 (n2) leads
    term 2 at D. Our terms are the seed's plus one; positions are log indexes; max_batch_entries = 4 makes
    the catchup take several chunks, as the seed's AppendPosition at 5280 < D suggests."""
    timing = dict(FAST, election_random_wait=1.0, max_batch_entries=4)
    net = CoreNetwork(3, mode="aeron", seed=1, per_node={"n2": {"election_random_wait": 0.0}}, **timing).start()

    def write(leader: str, count: int) -> None:
        for _ in range(count):
            assert net.call(leader, {"op": "write", "key": "x", "value": round(net.now, 3)})["ok"]

    def favour(winner: str, loser: str) -> None:
        """Restart both with new random waits so that `winner` nominates first (n1 is down)."""
        for node, wait in ((winner, 0.0), (loser, 1.0)):
            net.crash(node)
            net.configs[node] = dataclasses.replace(net.configs[node], election_random_wait=wait)
        net.start_node(winner)
        net.start_node(loser)

    # Term 0 (ours 1), leader member 1: member 0 holds it up to A, then stops; the term goes on to B.
    assert net.wait_for_leader() == "n2"
    write("n2", 2)
    net.run(0.5)
    a = net.nodes["n1"].log.last_index
    net.crash("n1")
    write("n2", 2)
    b = net.nodes["n2"].log.last_index
    # Term 1 (ours 2), leader member 2, up to C; term 2 (ours 3), leader member 1 again, now at D.
    favour("n3", "n2")
    assert net.wait_for_leader() == "n3"
    write("n3", 2)
    c = net.nodes["n3"].log.last_index
    favour("n2", "n3")
    assert net.wait_for_leader() == "n2"
    write("n2", 5)
    net.run(0.3)
    d = net.nodes["n2"].log.last_index
    assert (a, b, c, d) == (3, 5, 8, 14) and not net.inflight

    mark = len(net.journals["n1"])  # member 0's journal so far: its term-0 life
    net.start_node("n1")

    def new_states() -> list[str]:
        nonlocal mark
        found = states(net, "n1", mark)
        mark = len(net.journals["n1"])
        return found

    assert new_states() == ["INIT", "CANVASS"]
    # 1st CanvassPosition: "I'm member 0, I'm in Term 0, and my Log Recording ends in Term 0 at position A".
    assert take(net, "n1", "n3", "CanvassPosition") == {"term": 1, "log_leadership_term_id": 1, "log_position": a}
    assert in_flight(net, "n3", "n1") == []  # a follower does not answer a canvass; only the leader does
    assert take(net, "n1", "n2", "CanvassPosition") == {"term": 1, "log_leadership_term_id": 1, "log_position": a}
    # 1st NewLeadershipTerm: "your log is on Term 0, but I'm on Term 2 at position D; your next Term is 1, it
    # starts at position B and is currently at position C".
    first_nlt = {"term": 3, "log_leadership_term_id": 1, "next_leadership_term_id": 2,
                 "next_term_base_log_position": b, "next_log_position": c, "term_base_log_position": c,
                 "log_position": d}
    assert take(net, "n2", "n1", "NewLeadershipTerm") == first_nlt
    assert net.nodes["n1"].role == "follower" and net.nodes["n1"].leader == "n2" and net.nodes["n1"].term == 3
    # Replication of the rest of term 0, A to B, from the leader's archive: "ReplayRequest ... position=A,
    # length=B-A".
    assert new_states() == ["FOLLOWER_LOG_REPLICATION"]
    assert take(net, "n1", "n2", "ReplayRequest") == {"term": 3, "position": a, "length": b - a}
    replay = take(net, "n2", "n1", "ReplayData")
    assert (replay["position"], [e["lsn"] for e in replay["entries"]]) == (a, [[1, 4], [1, 5]])
    assert net.nodes["n1"].log.last_index == b
    assert take(net, "n1", "n2", "AppendPosition") == {"term": 3, "log_position": b, "flags": 0}
    assert new_states() == ["CANVASS"]
    assert in_flight(net, "n2", "n1") == []  # the live Log does not reach a member in an election

    # The leader's log grows a little: D moves on (the seed's 2nd NewLeadershipTerm has logPosition=6592).
    net.send_request("n2", {"op": "write", "key": "y", "value": 1})
    settle_without(net, "n1")
    assert in_flight(net, "n2", "n1") == []
    # 2nd CanvassPosition: "I'm in Term 2 (because I will join the new leader), and my Log Recording ends in
    # Term 0 at position B"; the answer is the same but for the leader's position.
    assert take(net, "n1", "n2", "CanvassPosition") == {"term": 3, "log_leadership_term_id": 1, "log_position": b}
    take(net, "n1", "n3", "CanvassPosition")
    assert take(net, "n2", "n1", "NewLeadershipTerm") == dict(first_nlt, log_position=d + 1)
    # "this time to replicate term 1, from B to C".
    assert new_states() == ["FOLLOWER_LOG_REPLICATION"]
    assert take(net, "n1", "n2", "ReplayRequest") == {"term": 3, "position": b, "length": c - b}
    replay = take(net, "n2", "n1", "ReplayData")
    assert [e["lsn"] for e in replay["entries"]] == [[2, 1], [2, 2], [2, 3]]
    assert take(net, "n1", "n2", "AppendPosition") == {"term": 3, "log_position": c, "flags": 0}
    assert new_states() == ["CANVASS"]
    assert net.nodes["n1"].commit_index < c  # back-filling does not process the log

    # The leader publishes CommitPosition periodically (it reaches member 0 too); its live Log does not.
    net.advance(FAST["heartbeat_interval"])
    assert take(net, "n2", "n1", "CommitPosition") == {"term": 3, "log_position": d + 1}
    take(net, "n2", "n1", "LeaderHeartbeat")
    # Not on the live Log, member 0 does not answer the heartbeat. In flight: its 3rd canvass, sent on
    # returning to CANVASS, and one more from its periodic timer.
    assert in_flight(net, "n1", "n2") == ["CanvassPosition", "CanvassPosition"]
    settle_without(net, "n1")
    net.send_request("n2", {"op": "write", "key": "y", "value": 2})
    settle_without(net, "n1")
    # 3rd CanvassPosition: "my Log Recording ends in Term 1 at position C"; 3rd NewLeadershipTerm: "your next
    # Term is 2, it starts at position C and hasn't ended yet".
    assert take(net, "n1", "n2", "CanvassPosition") == {"term": 3, "log_leadership_term_id": 2, "log_position": c}
    take(net, "n1", "n3", "CanvassPosition")
    assert take(net, "n2", "n1", "NewLeadershipTerm") == {
        "term": 3, "log_leadership_term_id": 2, "next_leadership_term_id": 3, "next_term_base_log_position": c,
        "next_log_position": NULL_POSITION, "term_base_log_position": c, "log_position": d + 2}
    # FOLLOWER_REPLAY processes the log up to C (what the leader committed, over what member 0 verified);
    # behind within the current term, member 0 asks for catchup from C.
    assert new_states() == ["FOLLOWER_REPLAY", "FOLLOWER_CATCHUP_INIT", "FOLLOWER_CATCHUP_AWAIT"]
    assert net.nodes["n1"].commit_index == c
    applied = [e["index"] for e in net.journals["n1"] if e["event"] == "apply"]
    assert applied[-1] == c and applied == sorted(set(applied))
    assert take(net, "n1", "n2", "CatchupPosition") == {"term": 3, "log_position": c}
    # The leader replays its log into member 0's catchup; member 0 answers AppendPosition with the catchup flag.
    catchup = take(net, "n2", "n1", "CatchupData")
    assert (catchup["position"], len(catchup["entries"])) == (c, 4)
    assert new_states() == ["FOLLOWER_CATCHUP"]
    assert take(net, "n1", "n2", "AppendPosition") == {"term": 3, "log_position": c + 4, "flags": FLAG_CATCHUP}
    assert take(net, "n2", "n1", "CatchupData")["position"] == c + 4
    assert take(net, "n1", "n2", "AppendPosition") == {"term": 3, "log_position": d + 2, "flags": FLAG_CATCHUP}
    assert net.nodes["n1"].commit_index == d + 1  # processed up to the CommitPosition heard (the seed's D)
    # "When the leader receives an AppendPosition from member 0 that confirms it has caught up to the end of
    # the leader's Log ... The leader sends a StopCatchup".
    assert take(net, "n2", "n1", "StopCatchup") == {"term": 3}
    assert new_states() == ["FOLLOWER_LOG_INIT", "FOLLOWER_READY", "CLOSED"]
    assert take(net, "n1", "n2", "AppendPosition") == {"term": 3, "log_position": d + 2, "flags": FLAG_LIVE}
    # Member 0 is on the live Log now: the next write reaches it by AppendEntries.
    reply = net.call("n2", {"op": "write", "key": "z", "value": 3})
    assert reply["ok"]
    net.run(0.5)
    logs = {n: [e["lsn"] for e in net.nodes[n].log.entries] for n in net.ids}
    assert logs["n1"] == logs["n2"] == logs["n3"] and len(logs["n1"]) == d + 3
    assert net.nodes["n1"].commit_index == d + 3 and not net.violations
    assert [r for r in net.nodes["n1"].status().values()][:4] == ["n1", "follower", 3, "n2"]


# --- the ballot ---------------------------------------------------------------------------------------------


# A log of three entries, the last of term 2, in term 2.
LOG = [{"t": "term", "term": 2, "vote": None},
       {"t": "entries", "from": 1, "entries": [
           {"lsn": [1, 1], "f": "noop", "key": None, "time": 0.0},
           {"lsn": [1, 2], "f": "write", "key": "x", "value": 1, "time": 0.1},
           {"lsn": [2, 1], "f": "noop", "key": None, "time": 0.2}]}]


def vote(node, candidate: str, term: int, log_term: int, position: int, now: float = 1.0) -> dict:
    ready = node.receive(candidate, RequestVote(term=term, log_leadership_term_id=log_term,
                                                log_position=position).to_wire(), now, now)
    return sent(ready, "Vote", candidate)[0]


def test_a_member_votes_for_the_candidate_whose_log_is_at_least_its_own() -> None:
    node, _ = single_node(mode="aeron", records=LOG)
    assert vote(node, "n2", 3, 1, 9)["vote"] is False  # longer, but its last term is older
    assert vote(node, "n2", 4, 2, 2)["vote"] is False  # same last term, shorter
    answer = vote(node, "n2", 5, 2, 3)
    assert answer == {"type": "Vote", "term": 5, "candidate_term_id": 5, "log_leadership_term_id": 2,
                      "log_position": 3, "vote": True}
    assert node.election.state == "FOLLOWER_BALLOT" and node.term == 5
    other, _ = single_node(mode="aeron", records=LOG)
    assert vote(other, "n3", 3, 3, 1)["vote"] is True  # a newer last term wins even when shorter


def test_one_vote_per_term_persisted_before_it_is_sent_and_kept_across_a_restart() -> None:
    node, _ = single_node(mode="aeron", records=LOG)
    ready = node.receive("n2", RequestVote(term=3, log_leadership_term_id=2, log_position=3).to_wire(), 1.0, 1.0)
    assert ready.persist[-1] == {"t": "term", "term": 3, "vote": "n2"}
    assert sent(ready, "Vote", "n2")[0]["vote"] is True
    assert vote(node, "n3", 3, 2, 3)["vote"] is False  # a second candidate of the same term
    assert vote(node, "n2", 3, 2, 3)["vote"] is True  # the same candidate asking again
    restarted, _ = single_node(mode="aeron", records=LOG + ready.persist)
    assert restarted.voted_for == "n2" and vote(restarted, "n3", 3, 2, 3)["vote"] is False
    stale = vote(restarted, "n3", 2, 2, 3)
    assert stale["vote"] is False and (stale["term"], stale["candidate_term_id"]) == (3, 2)


def test_canvass_nominates_only_the_member_with_the_best_log_and_waits_for_a_quorum() -> None:
    behind = LOG[:1] + [{"t": "entries", "from": 1, "entries": LOG[1]["entries"][:2]}]
    net = CoreNetwork(3, mode="aeron", **FAST)
    net.disks["n1"] = list(LOG)
    net.disks["n2"] = list(behind)
    net.start_node("n2")
    net.start_node("n1")  # n3 stays down: a quorum canvass, not a unanimous one
    net.deliver_all()
    assert net.nodes["n1"].election.state == net.nodes["n2"].election.state == "CANVASS"
    net.run(FAST["missed_heartbeats"] * FAST["heartbeat_interval"] - 0.05)
    assert net.nodes["n1"].election.state == "CANVASS"  # the canvass timeout has not passed
    assert net.wait_for_leader(timeout=3.0) == "n1"
    assert "NOMINATE" not in states(net, "n2")  # the member behind never nominates
    net.run(0.5)
    assert [e["lsn"] for e in net.nodes["n2"].log.entries] == [[1, 1], [1, 2], [2, 1], [3, 1]]


def test_a_leader_waits_in_leader_log_replication_until_a_quorum_holds_its_log() -> None:
    behind = LOG[:1] + [{"t": "entries", "from": 1, "entries": LOG[1]["entries"][:1]}]
    net = CoreNetwork(3, mode="aeron", per_node={"n1": {"election_random_wait": 0.0}}, **FAST)
    net.disks["n1"] = list(LOG)
    net.disks["n2"] = list(behind)
    net.disks["n3"] = list(behind)
    net.start()
    while net.nodes["n1"].role != "leader":  # hold the archive replication back until n1 has won
        for index in [i for i, e in enumerate(net.inflight) if e.msg["type"] != "ReplayRequest"][::-1]:
            net.deliver(index)
        net.advance(0.01)
    # The voters are at position 1 < 3. With n3 cut off, the leader waits until n2 (its quorum) replicated
    # term 1's rest and then term 2, one term at a time.
    net.isolate("n3")
    assert net.nodes["n1"].election.state == "LEADER_LOG_REPLICATION"
    while net.nodes["n1"].election.state == "LEADER_LOG_REPLICATION":
        assert net.inflight, net.describe()
        net.deliver(0)
    assert net.nodes["n2"].log.last_index == 3
    appends = [(e["index"], e["first_lsn"], e["last_lsn"]) for e in net.journals["n2"] if e["event"] == "append"]
    assert appends == [(2, [1, 2], [1, 2]), (3, [2, 1], [2, 1])]
    assert states(net, "n2")[-4:] == ["FOLLOWER_LOG_REPLICATION", "CANVASS", "FOLLOWER_LOG_REPLICATION", "CANVASS"]
    net.heal()
    assert net.wait_for_leader() == "n1"
    net.run(0.5)
    assert all(n.log.last_lsn == [3, 1] and n.commit_index == 4 for n in net.nodes.values())
    assert not net.violations


def test_a_diverged_follower_drops_what_the_leader_does_not_hold() -> None:
    """n3 holds an uncommitted entry of term 2 at index 3 that the leader of term 3 never had."""
    committed = [{"lsn": [1, 1], "f": "noop", "key": None, "time": 0.0},
                 {"lsn": [1, 2], "f": "write", "key": "x", "value": 1, "time": 0.1}]
    leader_log = [{"t": "term", "term": 2, "vote": None}, {"t": "applied", "index": 0},
                  {"t": "entries", "from": 1, "entries": committed}]
    diverged = [{"t": "term", "term": 2, "vote": None},
                {"t": "entries", "from": 1, "entries": [*committed,
                                                        {"lsn": [2, 1], "f": "noop", "key": None, "time": 0.2},
                                                        {"lsn": [2, 2], "f": "write", "key": "x", "value": 9,
                                                         "time": 0.3}]}]
    net = CoreNetwork(3, mode="aeron", per_node={"n1": {"election_random_wait": 0.0}}, **FAST)
    net.disks["n1"] = list(leader_log)
    net.disks["n2"] = list(leader_log)
    net.disks["n3"] = list(diverged)
    net.start_node("n1")
    net.start_node("n2")
    assert net.wait_for_leader() == "n1"  # n3 is still down: n1 and n2 elect term 3
    net.start_node("n3")
    net.run(1.0)
    assert [e["lsn"] for e in net.nodes["n3"].log.entries] == [[1, 1], [1, 2], [3, 1]]
    truncations = [e for e in net.journals["n3"] if e["event"] == "append" and e.get("truncated")]
    assert truncations == [dict(truncations[0], index=3, count=0, truncated=2)]
    assert states(net, "n3")[-1] == CLOSED and not net.violations


def test_a_single_member_leads_at_once() -> None:
    node, ready = single_node(node_id="n1", peers=(), mode="aeron")
    assert node.role == "leader" and node.term == 1 and node.accepting
    assert [e["state"] for e in ready.journal if e["event"] == "election"] == [
        "INIT", "CANDIDATE_BALLOT", "LEADER_LOG_REPLICATION", "LEADER_REPLAY", "LEADER_INIT", "LEADER_READY",
        "CLOSED"]


def test_fails_over_and_the_old_leader_rejoins_through_catchup() -> None:
    net = CoreNetwork(5, mode="aeron", seed=3, **FAST).start()
    first = net.wait_for_leader()
    for value in range(3):
        assert net.call(first, {"op": "write", "key": "x", "value": value})["ok"]
    net.crash(first)
    second = net.wait_for_leader(among=[n for n in net.ids if n != first])
    for value in range(3, 6):
        assert net.call(second, {"op": "write", "key": "x", "value": value})["ok"]
    net.start_node(first)
    net.run(2.0)
    assert states(net, first)[-6:] == ["FOLLOWER_CATCHUP_INIT", "FOLLOWER_CATCHUP_AWAIT", "FOLLOWER_CATCHUP",
                                       "FOLLOWER_LOG_INIT", "FOLLOWER_READY", "CLOSED"]
    assert net.call(first, {"op": "read", "key": "x"})["error"] == "not-leader"
    assert net.call(second, {"op": "read", "key": "x"})["value"] == 5
    assert len({tuple(map(tuple, (e["lsn"] for e in n.log.entries))) for n in net.nodes.values()}) == 1
    assert not net.violations


def test_a_leader_that_sees_a_newer_term_in_a_canvass_steps_down() -> None:
    net = CoreNetwork(3, mode="aeron", per_node={"n1": {"election_random_wait": 0.0}}, **FAST).start()
    assert net.wait_for_leader() == "n1"
    ready = net.nodes["n1"].receive("n3", {"type": "CanvassPosition", "term": 7, "log_leadership_term_id": 1,
                                           "log_position": 1}, net.now, net.now)
    assert net.nodes["n1"].role == "follower" and net.nodes["n1"].term == 7
    assert sent(ready, "CanvassPosition")  # it is in an election now


def test_only_next_log_position_may_be_null() -> None:
    wire = {"type": "NewLeadershipTerm", "term": 3, "log_leadership_term_id": 1, "next_leadership_term_id": 2,
            "next_term_base_log_position": 5, "next_log_position": -1, "term_base_log_position": 8,
            "log_position": 14}
    assert parse_message(wire).next_log_position == NULL_POSITION
    with pytest.raises(MessageError, match="log_position"):
        parse_message(dict(wire, log_position=-1))
    with pytest.raises(MessageError, match="next_log_position"):
        parse_message(dict(wire, next_log_position=-2))


def test_the_doc_describes_every_state() -> None:
    text = DOC.read_text(encoding="utf-8")
    for state, meaning in STATES.items():
        assert f"| `{state}` | {meaning} |" in text, f"docs/election-aeron.md lacks the row of {state}"


def test_the_same_inputs_give_the_same_outputs() -> None:
    def run() -> list:
        net = CoreNetwork(5, mode="aeron", seed=11, **FAST).start()
        leader = net.wait_for_leader()
        for value in range(5):
            net.send_request(leader, {"op": "write", "key": "x", "value": value})
        net.isolate(leader)
        net.run(3.0)
        net.heal()
        net.run(2.0)
        return [net.journals[n] for n in net.ids] + [net.disks[n] for n in net.ids]

    assert run() == run()


def _fields(cls: type) -> st.SearchStrategy:
    """Well-typed values for every field of an aeron message (so that they reach the Election), sometimes
    out of the ranges a correct peer sends."""
    lsn = st.lists(st.integers(0, 4), min_size=2, max_size=2)
    entry = st.builds(lambda term, seq: {"lsn": [term, seq], "f": "noop", "key": None, "time": 0.0},
                      st.integers(0, 4), st.integers(1, 4))
    strategies = {}
    for field in dataclasses.fields(cls):
        name = field.name
        if name == "entries":
            strategies[name] = st.lists(entry, max_size=4)
        elif name == "prev_lsn":
            strategies[name] = lsn
        elif field.type == "bool":
            strategies[name] = st.booleans()
        elif name == "next_log_position":
            strategies[name] = st.integers(-1, 12)
        else:
            strategies[name] = st.integers(0, 12)
    return st.fixed_dictionaries(strategies).map(lambda wire, kind=cls.__name__: dict(wire, type=kind))


AERON_MESSAGES = st.one_of([_fields(cls) for cls in AeronElection.messages])


@given(setup=st.sampled_from(["canvass", "leader", "follower"]),
       inputs=st.lists(st.tuples(st.sampled_from(["n2", "n3"]), AERON_MESSAGES), min_size=1, max_size=6))
@settings(max_examples=200, deadline=None, database=None, derandomize=True)
def test_no_aeron_message_can_crash_a_node(setup: str, inputs: list) -> None:
    node, _ = single_node(mode="aeron", records=LOG, **dict(FAST, election_random_wait=0.0))
    if setup in ("leader", "follower"):
        for peer in ("n2", "n3"):
            node.receive(peer, {"type": "CanvassPosition", "term": 2, "log_leadership_term_id": 1,
                                "log_position": 2}, 0.0, 0.0)
        node.tick(0.0, 0.0)
        node.receive("n2", Vote(term=3, candidate_term_id=3, log_leadership_term_id=1, log_position=2,
                                vote=True).to_wire(), 0.0, 0.0)
        assert node.role == "leader"
    if setup == "follower":
        node.receive("n3", {"type": "NewLeadershipTerm", "term": 4, "log_leadership_term_id": 2,
                            "next_leadership_term_id": 4, "next_term_base_log_position": 3,
                            "next_log_position": 5, "term_base_log_position": 5, "log_position": 9}, 0.1, 0.1)
        assert node.role == "follower" and node.election.state == "FOLLOWER_LOG_REPLICATION"
    now, committed = 0.2, []
    for sender, wire in inputs:
        node.receive(sender, wire, now, now)
        node.tick(now + 0.5, now + 0.5)
        now += 1.0
        assert node.election.state in STATES and node.commit_index <= node.log.last_index
        assert node.log.entries[:len(committed)] == committed  # what it committed is never cut
        committed = node.log.entries[:node.commit_index]
    assert node.rejected_messages == 0


# --- the known bug stale-vote --------------------------------------------------------------------------------


def test_stale_vote_counts_a_vote_of_an_earlier_ballot() -> None:
    """n1's ballot of term 3 receives n2's Vote FOR of ballot 2, delayed in the network."""
    for bug, leads in ((("stale-vote",), True), ((), False)):
        node, _ = single_node(mode="aeron", records=LOG, bugs=frozenset(bug), election_random_wait=0.0)
        for peer in ("n2", "n3"):
            node.receive(peer, {"type": "CanvassPosition", "term": 2, "log_leadership_term_id": 1,
                                "log_position": 2}, 0.0, 0.0)
        node.tick(0.0, 0.0)  # the nomination deadline
        assert node.role == "candidate" and node.term == 3
        node.receive("n2", Vote(term=2, candidate_term_id=2, log_leadership_term_id=1, log_position=2,
                                vote=True).to_wire(), 0.1, 0.1)
        assert (node.role == "leader") is leads


def former_leader_and_rival_in_one_ballot(bugs: tuple[str, ...], finish: bool = True) -> CoreNetwork:
    """n1 wins term 1 with n2's vote; a total partition sends everyone back to CANVASS; after the heal n1
    and n3 nominate for term 2 at once, and n2 gets n3's RequestVote first."""
    net = CoreNetwork(3, mode="aeron", bugs=bugs, **FAST,
                      per_node={"n1": {"election_random_wait": 0.0}, "n2": {"election_random_wait": 5.0}})
    net.start()
    assert net.wait_for_leader() == "n1"
    net.crash("n3")
    net.configs["n3"] = dataclasses.replace(net.configs["n3"], election_random_wait=0.0)
    net.start_node("n3")
    net.run(0.5)
    net.partition(["n1"], ["n2"], ["n3"])
    net.run(2.0)  # n1 loses its quorum and steps down, keeping its vote records in memory
    assert [net.nodes[n].election.state for n in net.ids] == ["CANVASS"] * 3
    net.heal()
    # Only canvasses get through until both nominated (they would otherwise vote for, or follow, each other).
    while net.nodes["n1"].role == "follower" or net.nodes["n3"].role == "follower":
        for index in [i for i, e in enumerate(net.inflight) if e.msg["type"] == "CanvassPosition"][::-1]:
            net.deliver(index)
        net.advance(0.01)
    assert net.nodes["n1"].term == net.nodes["n3"].term == 2
    take(net, "n3", "n2", "RequestVote")
    assert take(net, "n2", "n3", "Vote")["vote"] is True
    assert net.nodes["n3"].role == "leader"
    if finish:
        net.run(1.0)
    return net


def test_stale_vote_gives_one_term_two_leaders() -> None:
    buggy = former_leader_and_rival_in_one_ballot(("stale-vote",))
    assert "term 2 has two leaders: n1 and n3" in buggy.violations
    clean = former_leader_and_rival_in_one_ballot(())
    assert not clean.violations
    leaders = {(e["term"], e["node"]) for n in clean.ids for e in clean.journals[n]
               if e["event"] == "role" and e["role"] == "leader"}
    assert leaders == {(1, "n1"), (2, "n3")}


# --- the known bug vote-twice -------------------------------------------------------------------------------


def test_vote_twice_grants_a_second_candidate_of_the_same_term() -> None:
    """A follower that voted FOR n2 in term 3 gets n3's RequestVote of term 3: AGAINST, unless vote-twice."""
    for bug, second in ((("vote-twice",), True), ((), False)):
        node, _ = single_node(mode="aeron", records=LOG, bugs=frozenset(bug), election_random_wait=5.0)
        votes = []
        for candidate in ("n2", "n3"):
            ready = node.receive(candidate, RequestVote(term=3, log_leadership_term_id=2, log_position=9).to_wire(),
                                 0.1, 0.1)
            votes.append(next(m["vote"] for peer, m in ready.messages if m["type"] == "Vote" and peer == candidate))
        assert votes == [True, second] and node.voted_for == "n2", bug


def rivals_in_one_ballot(bugs: tuple[str, ...]) -> CoreNetwork:
    """After a total partition heals, n1 and n3 nominate for term 2 at once; n2 gets n3's RequestVote,
    then n1's, and n1 gets n2's answer before n3's NewLeadershipTerm."""
    net = former_leader_and_rival_in_one_ballot(bugs, finish=False)
    take(net, "n1", "n2", "RequestVote")
    take(net, "n2", "n1", "Vote")
    net.run(1.0)
    return net


def test_vote_twice_gives_one_term_two_leaders() -> None:
    buggy = rivals_in_one_ballot(("vote-twice",))
    assert "term 2 has two leaders: n3 and n1" in buggy.violations, buggy.violations
    clean = rivals_in_one_ballot(())
    assert not clean.violations
    assert {(e["term"], e["node"]) for n in clean.ids for e in clean.journals[n]
            if e["event"] == "role" and e["role"] == "leader"} == {(1, "n1"), (2, "n3")}


class AeronVoteTwiceMachine(ClusterMachine):
    mode = "aeron"
    bugs = ("vote-twice",)


# --- the Hypothesis state machine in aeron mode ------------------------------------------------------------


class AeronMachine(ClusterMachine):
    """The shared machine (random delivery, drops, duplicates, partitions, crashes, clients) plus the faults
    that drive Aeron's elections hardest: a single cut link, a node isolated and healed, a total partition
    healed at once (every member canvasses again, a former leader among them), and bursts of deliveries in
    random order with time passing in between."""

    mode = "aeron"

    @rule(a=NODE, b=NODE)
    def cut(self, a: int, b: int) -> None:
        if self._node(a) != self._node(b):
            self.net.cut(self._node(a), self._node(b))

    @rule(n=st.integers(-1, 4), duration=st.sampled_from([0.5, 1.0, 2.0]))
    def flap(self, n: int, duration: float) -> None:
        self.net.isolate(self._node(n))
        self.net.run(duration, step=0.05)
        self.net.heal()

    @rule(duration=st.sampled_from([0.5, 1.0, 2.0]))
    def split_brain(self, duration: float) -> None:
        self.net.partition(*[[node] for node in self.net.ids])
        self.net.run(duration, step=0.05)
        self.net.heal()

    @rule(n=st.integers(1, 60), order=st.randoms(use_true_random=False))
    def jitter(self, n: int, order: random.Random) -> None:
        for _ in range(n):
            if self.net.inflight and order.random() < 0.9:
                self.net.deliver(order.randrange(len(self.net.inflight)))
            else:
                self.net.advance(order.choice([0.01, 0.05, 0.1]))


class AeronStaleVoteMachine(AeronMachine):
    bugs = ("stale-vote",)


def test_invariants_hold_in_aeron_mode_without_bugs() -> None:
    run_state_machine_as_test(AeronMachine, settings=_budget(examples=60, steps=100))


def test_vote_twice_is_found_by_the_state_machine() -> None:
    found = settings(_budget(examples=200, steps=80), phases=[Phase.generate])
    with pytest.raises(AssertionError, match="has two leaders"):
        run_state_machine_as_test(AeronVoteTwiceMachine, settings=found)


def test_stale_vote_is_found_by_the_state_machine() -> None:
    found = settings(_budget(examples=200, steps=80), phases=[Phase.generate])
    with pytest.raises(AssertionError, match="has two leaders"):
        run_state_machine_as_test(AeronStaleVoteMachine, settings=found)
