"""Local (follower) reads by read index, in both election modes: a read with ``"local": true`` is answered
by the node that receives it, linearizably, or with the definite ``no-read-index``; never stale.

The Hypothesis state machines of test_core_stateful.py send local reads too, under faults.
"""

from __future__ import annotations

import pytest

from cluster.core.messages import LeaderHeartbeat, ReadIndexResponse
from tests.cluster.core_network import FAST, FIRST, CoreNetwork, sent, single_node
from tests.cluster.core_network import n1_leading as cluster

MODES = ["blazingmq", "raft"]


def local_read(key: str = "x", **extra: object) -> dict:
    return {"op": "read", "key": key, "local": True, **extra}


def read_index_traffic(net: CoreNetwork) -> list[tuple[str, str, str]]:
    return [t for t in net.traffic if t[2] in ("ReadIndexRequest", "ReadIndexResponse")]


@pytest.mark.parametrize("mode", MODES)
def test_a_follower_answers_a_local_read_from_its_own_state_after_asking_the_leader(mode: str) -> None:
    net = cluster(mode)
    write = net.call("n1", {"op": "write", "key": "x", "value": "a"})
    net.traffic.clear()
    reply = net.call("n2", local_read())
    assert reply == {"id": reply["id"], "ok": True, "value": "a", "lsn": write["lsn"]}
    assert read_index_traffic(net) == [("n2", "n1", "ReadIndexRequest"), ("n1", "n2", "ReadIndexResponse")]
    assert net.replies.keys() == {"c"} and not net.violations


@pytest.mark.parametrize("mode", MODES)
def test_the_leader_confirms_its_leadership_with_a_heartbeat_round_before_granting(mode: str) -> None:
    net = cluster(mode)
    request_id = net.send_request("n3", local_read())
    net.deliver(0)  # the ReadIndexRequest reaches n1, which starts a heartbeat round instead of answering
    assert [e.msg["type"] for e in net.inflight] == ["LeaderHeartbeat", "LeaderHeartbeat"]
    net.deliver_all()
    assert net.reply_to("c", request_id)["ok"] is True


@pytest.mark.parametrize("mode", MODES)
def test_a_follower_that_lacks_the_read_index_waits_until_it_has_applied_it(mode: str) -> None:
    net = cluster(mode)
    net.cut("n1", "n3")
    assert net.call("n1", {"op": "write", "key": "x", "value": "new"})["ok"]  # n1 and n2 commit it
    net.heal()
    net.drop_where(lambda e: e.dst == "n3")
    request_id = net.send_request("n3", local_read())
    # Deliver only the read-index exchange: n3 learns index 2 but has not got that entry yet.
    while not any(e.msg["type"] == "ReadIndexResponse" for e in net.inflight):
        net.deliver(next(i for i, e in enumerate(net.inflight) if e.dst != "n3" or e.src != "n1"))
    net.deliver(next(i for i, e in enumerate(net.inflight) if e.msg["type"] == "ReadIndexResponse"))
    assert net.reply_to("c", request_id) is None and net.nodes["n3"].applied_index < 2
    net.run_until(lambda: net.reply_to("c", request_id) is not None, 2.0)
    assert net.reply_to("c", request_id)["value"] == "new" and not net.violations


def test_the_granted_read_index_commits_an_entry_the_follower_holds_without_waiting_for_a_heartbeat() -> None:
    node, _ = single_node("n2", ("n1", "n3"), **FAST)
    entry = {"lsn": [1, 1], "f": "write", "key": "x", "value": 5, "time": 0.0}
    node.receive("n1", {"type": "AppendEntries", "term": 1, "prev_index": 0, "prev_lsn": [0, 0],
                        "entries": [entry], "commit_index": 0}, 0.1, 0.1)
    ready = node.request("c", {"id": 7, **local_read()}, 0.2, 0.2)
    [ask] = sent(ready, "ReadIndexRequest", to="n1")
    ready = node.receive("n1", ReadIndexResponse(term=1, read_id=ask["read_id"], granted=True, read_index=1,
                                                 read_lsn=[1, 1]).to_wire(), 0.3, 0.3)
    assert ready.replies == [("c", {"id": 7, "ok": True, "value": 5, "lsn": [1, 1]})]
    assert node.commit_index == 1


def test_a_node_without_a_known_leader_answers_no_read_index_at_once() -> None:
    node, _ = single_node("n2", ("n1", "n3"), **FAST)
    ready = node.request("c", {"id": 1, **local_read()}, 0.1, 0.1)
    [(client, reply)] = ready.replies
    assert (reply["error"], reply["definite"]) == ("no-read-index", True) and not ready.messages


def test_a_refusal_answers_no_read_index_unless_another_leader_is_known() -> None:
    node, _ = single_node("n2", ("n1", "n3"), **FAST)
    node.receive("n1", LeaderHeartbeat(term=1, commit_index=0, commit_lsn=[0, 0], round=1).to_wire(), 0.1, 0.1)
    ask = sent(node.request("c", {"id": 1, **local_read()}, 0.2, 0.2), "ReadIndexRequest", to="n1")[0]
    refusal = ReadIndexResponse(term=1, read_id=ask["read_id"], granted=False, read_index=0, read_lsn=[0, 0])
    ready = node.receive("n1", refusal.to_wire(), 0.3, 0.3)
    assert [r["error"] for _, r in ready.replies] == ["no-read-index"]
    # A refusal carrying a newer term from another node: n2 follows n3 (it heard from it) and asks it.
    ask = sent(node.request("c", {"id": 2, **local_read()}, 0.4, 0.4), "ReadIndexRequest", to="n1")[0]
    node.receive("n3", LeaderHeartbeat(term=2, commit_index=0, commit_lsn=[0, 0], round=1).to_wire(), 0.5, 0.5)
    refusal = ReadIndexResponse(term=1, read_id=ask["read_id"], granted=False, read_index=0, read_lsn=[0, 0])
    ready = node.receive("n1", refusal.to_wire(), 0.6, 0.6)
    assert not ready.replies and sent(ready, "ReadIndexRequest", to="n3")[0]["read_id"] == ask["read_id"]


def test_a_lost_request_is_asked_again_and_an_unanswered_read_times_out_definitely() -> None:
    net = cluster("raft", read_index_timeout=1.0)
    request_id = net.send_request("n2", local_read())
    net.isolate("n2")  # requests and answers are lost; n2 keeps believing in n1 for a while
    net.run(0.9)
    assert net.reply_to("c", request_id) is None
    assert sum(1 for t in net.traffic if t == ("n2", "n1", "ReadIndexRequest")) >= 2  # asked again
    net.run(0.2)
    reply = net.reply_to("c", request_id)
    assert (reply["error"], reply["definite"]) == ("no-read-index", True)


@pytest.mark.parametrize("mode", MODES)
def test_a_follower_of_a_deposed_leader_never_serves_a_stale_local_read(mode: str) -> None:
    """n1 and n2 are cut off from the majority, which elects a new leader and acknowledges a new write.
    n2 still believes in n1, but n1 cannot confirm a heartbeat round with a majority: no grant."""
    net = cluster(mode, size=5)
    assert net.call("n1", {"op": "write", "key": "x", "value": "old"})["ok"]
    net.run(0.3)
    net.partition(["n1", "n2"], ["n3", "n4", "n5"])
    new_leader = net.wait_for_leader(among=("n3", "n4", "n5"))
    assert net.call(new_leader, {"op": "write", "key": "x", "value": "new"})["ok"]
    assert net.nodes["n2"].leader == "n1"
    request_id = net.send_request("n2", local_read())
    net.run_until(lambda: net.reply_to("c", request_id) is not None, 5.0)
    reply = net.reply_to("c", request_id)
    assert (reply["ok"], reply["error"], reply["definite"]) == (False, "no-read-index", True)
    assert not net.violations
    net.heal()
    assert net.run_until(lambda: net.nodes["n2"].leader == new_leader, 5.0)
    assert net.call("n2", local_read())["value"] == "new"


@pytest.mark.parametrize("mode", MODES)
def test_a_read_follows_a_new_leader_when_the_one_it_asked_dies(mode: str) -> None:
    net = CoreNetwork(3, mode=mode, per_node={**FIRST, "n2": {"election_random_wait": 0.0},
                                              "n3": {"election_random_wait": 3.0}}, **FAST).start()
    assert net.wait_for_leader() == "n1"
    assert net.call("n1", {"op": "write", "key": "x", "value": 1})["ok"]
    request_id = net.send_request("n3", local_read())
    net.crash("n1")  # the ReadIndexRequest in flight is lost with it
    net.run_until(lambda: net.reply_to("c", request_id) is not None, 5.0)
    reply = net.reply_to("c", request_id)
    assert reply["ok"] is True and reply["value"] == 1
    assert net.leader() == "n2" and ("n3", "n2", "ReadIndexRequest") in net.traffic and not net.violations


@pytest.mark.parametrize("mode", MODES)
def test_a_local_read_at_the_leader_is_an_ordinary_read(mode: str) -> None:
    net = cluster(mode)
    assert net.call("n1", {"op": "write", "key": "x", "value": 3})["ok"]
    net.traffic.clear()
    assert net.call("n1", local_read())["value"] == 3
    assert read_index_traffic(net) == []


def test_local_must_be_a_boolean_and_uncommitted_reads_stay_at_the_leader() -> None:
    net = cluster("blazingmq")
    reply = net.call("n2", local_read(local="yes"))
    assert (reply["error"], reply["message"]) == ("bad-request", "read 'local' must be true (served by this "
                                                                 "node) or false")
    assert net.call("n2", local_read(consistency="uncommitted"))["error"] == "not-leader"


def test_a_stale_answer_meant_for_another_read_is_ignored() -> None:
    node, _ = single_node("n2", ("n1", "n3"), **FAST)
    node.receive("n1", LeaderHeartbeat(term=1, commit_index=0, commit_lsn=[0, 0], round=1).to_wire(), 0.1, 0.1)
    ask = sent(node.request("c", {"id": 1, **local_read()}, 0.2, 0.2), "ReadIndexRequest", to="n1")[0]
    late = ReadIndexResponse(term=1, read_id=ask["read_id"] + 1, granted=True, read_index=0, read_lsn=[0, 0])
    assert not node.receive("n1", late.to_wire(), 0.3, 0.3).replies
