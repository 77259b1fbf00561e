"""The fluvio mode (seed 002): the SC's replica election, the SPU side, the LRS commit rule, the
`promote-outside-lrs` bug, and why UNCOMMITTED reads are unsafe (the linearizability checker says so).

Unit tests drive the `Controller` and one SPU `Node` by hand; scenarios run 3 SPUs and the SC in the
deterministic `FluvioNetwork` (virtual time, no sleeps).
"""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

import pytest

from checkers.history import parse_history
from checkers.linearizability import check_linearizability
from cluster.core.bugs import KNOWN_BUGS
from cluster.core.election.fluvio import CONTROLLER_ID
from cluster.core.fluvio_controller import (
    CANDIDATE_FOUND,
    ONLINE,
    Controller,
    ControllerConfig,
    ControllerState,
    controller_record,
    recover_controller,
)
from cluster.core.member import Ready
from cluster.core.messages import LeaderCandidate, ReplicaSetUpdate, SpuStatus
from cluster.core.storage import recover
from tests.cluster.core_network import Envelope, _copy, sent, single_node
from tests.cluster.fluvio_network import SC, FluvioNetwork

FAST = {"heartbeat_interval": 0.1, "missed_heartbeats": 3}
SPUS = ("n1", "n2", "n3")


def status(term: int, last_index: int, role: str = "follower", leader: str = "", lrs: tuple = ()) -> dict:
    return SpuStatus(term=term, role=role, leader=leader, last_index=last_index,
                     last_lsn=[term, last_index] if last_index else [0, 0], commit_index=0,
                     lrs=list(lrs)).to_wire()


def controller(bugs: tuple[str, ...] = ()) -> Controller:
    config = ControllerConfig(spus=SPUS, bugs=frozenset(bugs), heartbeat_interval=0.1, wait_for_response=0.5)
    sc = Controller(config, recover_controller([], SPUS), 0.0, 0.0, random.Random(0))
    sc.start(0.0, 0.0)
    return sc


def candidates(ready: Ready) -> list[tuple[str, dict]]:
    return [(peer, m) for peer, m in ready.messages if m["type"] == "LeaderCandidate"]


# --- the controller state machine ------------------------------------------------------------------------


def test_controller_elects_the_lrs_member_with_the_smallest_lag_then_goes_online() -> None:
    sc = controller()
    sc.receive("n1", status(0, 3), 0.1, 0.1)
    sc.receive("n2", status(0, 5), 0.1, 0.1)
    sc.receive("n3", status(0, 4), 0.1, 0.1)
    ready = sc.tick(0.31, 0.31)  # after the startup wait
    assert sc.state.status == CANDIDATE_FOUND and sc.candidate == "n2" and sc.state.epoch == 1
    assert [peer for peer, _ in candidates(ready)] == list(SPUS)  # every SPU is notified
    assert ready.persist == [controller_record(sc.state)]
    ready = sc.receive("n2", {"type": "PromotionSuccessful", "term": 1}, 0.35, 0.35)
    assert sc.state.status == ONLINE and sc.state.leader == "n2" and sc.state.lrs == list(SPUS)
    updates = [m for _, m in ready.messages if m["type"] == "ReplicaSetUpdate"]
    assert len(updates) == 3 and updates[0]["leader"] == "n2" and updates[0]["term"] == 1
    assert [d["status"] for d in ready.journal if d["event"] == "decision"] == [ONLINE]


def test_wait_for_response_timer_tries_the_next_candidate_then_offline() -> None:
    sc = controller()
    for spu, leo in (("n1", 3), ("n2", 5), ("n3", 4)):
        sc.receive(spu, status(0, leo), 0.25, 0.25)
    sc.tick(0.31, 0.31)
    assert sc.candidate == "n2"
    for spu, leo in (("n1", 3), ("n2", 5), ("n3", 4)):
        sc.receive(spu, status(0, leo), 0.8, 0.8)
    sc.tick(0.82, 0.82)  # n2 did not answer in time: the next smallest lag
    assert sc.candidate == "n3" and sc.state.epoch == 2
    # a late answer from the first candidate is no longer accepted
    sc.receive("n2", {"type": "PromotionSuccessful", "term": 1}, 0.83, 0.83)
    assert sc.state.status == CANDIDATE_FOUND
    for spu, leo in (("n1", 3), ("n2", 5), ("n3", 4)):
        sc.receive(spu, status(0, leo), 1.3, 1.3)
    sc.tick(1.33, 1.33)
    assert sc.candidate == "n1" and sc.state.epoch == 3
    for spu, leo in (("n1", 3), ("n2", 5), ("n3", 4)):
        sc.receive(spu, status(0, leo), 1.8, 1.8)
    ready = sc.tick(1.84, 1.84)
    assert sc.state.status == "Offline" and sc.candidate is None
    assert ready.journal[-1]["reason"].endswith("no eligible leader candidate")


def test_controller_elects_only_live_lrs_members_unless_the_bug_is_on() -> None:
    for bugs, expected in (((), "Offline"), (("promote-outside-lrs",), CANDIDATE_FOUND)):
        sc = controller(bugs)
        sc.state = ControllerState(epoch=4, status=ONLINE, leader="n1", lrs=["n1", "n2"])
        sc.receive("n3", status(4, 7), 0.3, 0.3)  # n3 left the LRS; n1 and n2 are silent
        sc.tick(0.35, 0.35)
        assert sc.state.status == expected, bugs
        assert sc.candidate == (None if not bugs else "n3")


def test_an_offline_set_re_elects_once_a_tried_lrs_member_reports_again() -> None:
    """Seed 002 "SPU comes back Online": every candidate was tried (n2 was paused when named), the set went
    Offline; when n2 reports again the SC runs a new election, still never outside the LRS (n3)."""
    sc = controller()
    sc.state = ControllerState(epoch=4, status=ONLINE, leader="n1", lrs=["n1", "n2"])
    sc.receive("n2", status(4, 7, leader="n1"), 0.3, 0.3)
    sc.receive("n3", status(4, 9, leader="n1"), 0.3, 0.3)  # the longest log, but outside the LRS
    sc.tick(0.35, 0.35)  # n1 was never heard: offline
    assert sc.state.status == CANDIDATE_FOUND and sc.candidate == "n2" and sc.state.epoch == 5
    for at in (0.4, 0.6, 0.8):  # n2's reports still arrive (it pauses right after), n3 keeps reporting
        sc.receive("n3", status(4, 9, leader="n1"), at, at)
    sc.receive("n2", status(4, 7, leader="n1"), 0.4, 0.4)
    ready = sc.tick(0.86, 0.86)  # no PromotionSuccessful in time, and no untried LRS member left
    assert sc.state.status == "Offline" and not candidates(ready)
    ready = sc.receive("n3", status(4, 9, leader="n1"), 1.0, 1.0)
    assert sc.state.status == "Offline" and not candidates(ready)  # n3 is live but outside the LRS
    ready = sc.receive("n2", status(4, 7, leader="n1"), 1.5, 1.5)  # n2 resumed: it is eligible again
    assert sc.state.status == CANDIDATE_FOUND and sc.candidate == "n2" and sc.state.epoch == 6
    assert {m["candidate"] for _, m in candidates(ready)} == {"n2"}
    sc.receive("n2", {"type": "PromotionSuccessful", "term": 6}, 1.55, 1.55)
    assert sc.state.status == ONLINE and sc.state.leader == "n2" and "n3" not in sc.state.lrs


def test_leader_reported_lrs_changes_are_persisted_and_announced() -> None:
    sc = controller()
    sc.state = ControllerState(epoch=2, status=ONLINE, leader="n1", lrs=list(SPUS))
    ready = sc.receive("n1", status(2, 9, "leader", "n1", lrs=("n1", "n3")), 0.1, 0.1)
    assert sc.state.lrs == ["n1", "n3"] and ready.persist == [controller_record(sc.state)]
    assert all(m["lrs"] == ["n1", "n3"] for _, m in ready.messages if m["type"] == "ReplicaSetUpdate")
    # a follower's claim is not an LRS change
    sc.receive("n2", status(2, 9, "follower", "n1", lrs=("n2",)), 0.2, 0.2)
    assert sc.state.lrs == ["n1", "n3"]



def test_controller_adopts_only_a_report_based_on_its_current_lrs_version() -> None:
    sc = controller()
    sc.state = ControllerState(epoch=2, status=ONLINE, leader="n1", lrs=list(SPUS), lrs_version=5)
    stale = dict(status(2, 9, "leader", "n1", lrs=("n1", "n3")), lrs_version=4)
    ready = sc.receive("n1", stale, 0.1, 0.1)
    assert sc.state.lrs == list(SPUS) and sc.state.lrs_version == 5 and not ready.persist
    ready = sc.receive("n1", dict(stale, lrs_version=5), 0.2, 0.2)
    assert sc.state.lrs == ["n1", "n3"] and sc.state.lrs_version == 6 and ready.persist
    assert {m["lrs_version"] for _, m in ready.messages if m["type"] == "ReplicaSetUpdate"} == {6}
    # an SC that lost its state never reuses a version an SPU reports
    sc.receive("n2", dict(status(2, 9, "follower", "n1"), lrs_version=9), 0.3, 0.3)
    assert sc.state.lrs_version == 10 and sc.state.lrs == ["n1", "n3"]

def test_controller_state_survives_a_restart_and_refuses_bad_input() -> None:
    state = ControllerState(epoch=3, status=ONLINE, leader="n2", lrs=["n2", "n3"], lrs_version=7)
    assert recover_controller([controller_record(state)], SPUS) == state
    older = {k: v for k, v in controller_record(state).items() if k != "lrs_version"}  # before the version
    assert recover_controller([older], SPUS).lrs_version == 0
    assert recover_controller([], SPUS).lrs == list(SPUS)
    with pytest.raises(ValueError, match="not a controller storage record"):
        recover_controller([{"t": "term", "term": 1, "vote": None}], SPUS)
    with pytest.raises(ValueError, match="SPU ids"):
        ControllerConfig(spus=("n1", "n1"))
    with pytest.raises(ValueError, match="applies only to mode blazingmq, not to mode 'fluvio'"):
        ControllerConfig(spus=SPUS, bugs=frozenset({"skip-leader-sync"}))
    sc = controller()
    reply = sc.request("c", {"id": 1, "op": "write", "key": "x", "value": 1}, 0.1, 0.1).replies[0][1]
    assert reply["error"] == "not-leader" and reply["definite"]
    assert sc.request("c", {"id": 2, "op": "status"}, 0.1, 0.1).replies[0][1]["value"]["role"] == "controller"
    sc.receive("n9", status(0, 1), 0.1, 0.1)
    sc.receive("n1", {"type": "SpuStatus", "term": 0}, 0.1, 0.1)
    assert sc.rejected_messages == 2 and "promote-outside-lrs" in KNOWN_BUGS


# --- the SPU side ----------------------------------------------------------------------------------------


def test_spu_reports_to_the_controller_and_promotes_itself_when_named() -> None:
    node, ready = single_node(mode="fluvio", **FAST)
    assert node.election.external_senders == (CONTROLLER_ID,)
    ready = node.tick(0.0, 0.0)
    assert sent(ready, "SpuStatus", to=SC)[0]["role"] == "follower"
    ready = node.receive(SC, LeaderCandidate(term=3, candidate="n2", lrs=list(SPUS)).to_wire(), 0.1, 0.1)
    assert node.role == "follower" and node.term == 0 and not ready.messages  # not us: ignored
    ready = node.receive(SC, LeaderCandidate(term=3, candidate="n1", lrs=list(SPUS)).to_wire(), 0.2, 0.2)
    assert node.role == "leader" and node.term == 3
    assert sent(ready, "PromotionSuccessful", to=SC) == [{"type": "PromotionSuccessful", "term": 3}]
    assert [(e["role"], e["term"]) for e in ready.journal if e["event"] == "role"] == [
        ("candidate", 3), ("leader", 3)]
    # a stale epoch cannot promote (no notification is sent)
    ready = node.receive(SC, LeaderCandidate(term=2, candidate="n1", lrs=list(SPUS)).to_wire(), 0.3, 0.3)
    assert not sent(ready, "PromotionSuccessful")
    # a peer SPU cannot impersonate the SC; and it never starts an election by itself
    node2, _ = single_node(mode="fluvio", **FAST)
    node2.receive("n2", LeaderCandidate(term=5, candidate="n1", lrs=[]).to_wire(), 0.1, 0.1)
    node2.tick(30.0, 30.0)
    assert node2.role == "follower" and node2.term == 0


def test_spu_follows_the_leader_the_controller_announces() -> None:
    node, _ = single_node(mode="fluvio", **FAST)
    node.receive(SC, ReplicaSetUpdate(term=4, leader="n3", lrs=list(SPUS)).to_wire(), 0.1, 0.1)
    assert (node.role, node.term, node.leader) == ("follower", 4, "n3")
    node.receive(SC, ReplicaSetUpdate(term=3, leader="n2", lrs=list(SPUS)).to_wire(), 0.2, 0.2)
    assert (node.term, node.leader) == (4, "n3")  # stale epoch ignored


def test_uncommitted_read_option_is_validated() -> None:
    node, _ = single_node(mode="fluvio", **FAST)
    reply = node.request("c", {"id": 1, "op": "read", "key": "x", "consistency": "dirty"}, 0.1, 0.1).replies
    assert reply[0][1]["error"] == "bad-request" and "consistency" in reply[0][1]["message"]


# --- scenarios: 3 SPUs and the SC --------------------------------------------------------------------------


def test_election_replication_failover_and_recovery() -> None:
    net = FluvioNetwork(3, **FAST).start()
    first = net.wait_for_leader()
    assert net.controller.state.status == ONLINE and net.controller.state.leader == first
    assert [d["status"] for d in net.decisions()] == ["Election", CANDIDATE_FOUND, ONLINE]
    assert net.call(first, {"op": "write", "key": "x", "value": 1})["ok"]
    net.crash(first)
    second = net.wait_for_leader()
    assert second != first and net.nodes[second].term == net.controller.state.epoch == 2
    assert net.call(second, {"op": "read", "key": "x"})["value"] == 1
    assert first not in net.controller.state.lrs  # offline SPUs leave the LRS at the election
    net.start_node(first)  # it rejoins as a follower, catches up and is re-admitted to the LRS
    net.run(1.5)
    assert net.nodes[first].role == "follower" and net.nodes[first].leader == second
    assert net.controller.state.lrs == list(SPUS)
    assert net.violations == []


def test_a_record_commits_only_when_every_lrs_member_has_it_and_laggards_leave() -> None:
    net = FluvioNetwork(3, **FAST).start()
    leader = net.wait_for_leader()
    lagging = [s for s in SPUS if s != leader][1]
    net.cut(leader, lagging)
    request = net.send_request(leader, {"op": "write", "key": "x", "value": 1})
    net.run(0.15)
    assert net.reply_to("c", request) is None  # a live LRS member lacks it: not committed
    net.run(1.0)  # the leader drops the silent follower, the SC acknowledges, the record commits
    assert lagging not in net.controller.state.lrs and net.reply_to("c", request)["ok"]
    net.heal()
    net.run(1.0)  # caught up: back in the LRS
    assert lagging in net.controller.state.lrs and net.nodes[lagging].commit_index >= 2
    assert net.violations == []


def test_controller_kill_and_partition_do_not_stop_a_working_leader() -> None:
    net = FluvioNetwork(3, **FAST).start()
    leader = net.wait_for_leader()
    net.crash(SC)
    assert net.call(leader, {"op": "write", "key": "x", "value": 1})["ok"]
    net.start_node(SC)
    net.isolate(SC)
    net.run(1.0)
    net.heal()
    net.run(1.0)
    assert net.leader() is not None and net.controller.state.status == ONLINE
    assert net.call(net.leader(), {"op": "read", "key": "x"})["value"] == 1
    assert net.violations == []


def replica_left_the_lrs_then_lrs_dies(bugs: tuple[str, ...]) -> FluvioNetwork:
    """n3 is cut off from leader n1 and leaves the LRS; n1 and n2 commit x=1, then both die."""
    net = FluvioNetwork(3, sc_bugs=bugs, **FAST).start()
    assert net.wait_for_leader() == "n1"
    net.cut("n1", "n3")
    net.run(1.0)
    assert net.controller.state.lrs == ["n1", "n2"]
    assert net.call("n1", {"op": "write", "key": "x", "value": 1})["ok"]
    net.crash("n1")
    net.crash("n2")
    net.run(1.0)
    return net


def test_promote_outside_lrs_loses_committed_records() -> None:
    net = replica_left_the_lrs_then_lrs_dies(("promote-outside-lrs",))
    assert net.decisions()[-1]["leader"] == "n3"  # promoted although it left the LRS
    assert any("committed entry 2 changed" in v for v in net.violations)
    assert net.call("n3", {"op": "read", "key": "x"}, timeout=0.5)["value"] is None  # x=1 is gone
    assert any("served a stale read of 'x'" in v for v in net.violations)


def test_without_the_bug_the_set_goes_offline_until_an_lrs_member_returns() -> None:
    net = replica_left_the_lrs_then_lrs_dies(())
    assert net.controller.state.status == "Offline" and net.leader() is None
    net.start_node("n2")  # "SPU comes back Online"
    leader = net.wait_for_leader()
    assert leader == "n2" and net.call(leader, {"op": "read", "key": "x"})["value"] == 1
    assert net.violations == []


# --- why UNCOMMITTED reads are unsafe ----------------------------------------------------------------------


class HistoryRecorder:
    """Client operations in FORMATS.md history lines, on the network's virtual clock."""

    def __init__(self, net: FluvioNetwork) -> None:
        self.net = net
        self.lines: list[str] = []

    def event(self, process: int, kind: str, f: str, value: object, node: str) -> None:
        self.lines.append(json.dumps({"index": len(self.lines), "time": round(self.net.now * 1e9) + len(self.lines),
                                      "process": process, "type": kind, "f": f, "key": "x", "value": value,
                                      "node": node}))


def leader_dies_with_an_uncommitted_write(consistency: str) -> tuple[list[str], FluvioNetwork]:
    """x=1 commits; the leader appends x=2 but cannot replicate it; a consumer reads x with
    `consistency`; the leader dies; the new leader is read."""
    net = FluvioNetwork(3, **FAST).start()
    history = HistoryRecorder(net)
    leader = net.wait_for_leader()
    history.event(0, "invoke", "write", 1, leader)
    assert net.call(leader, {"op": "write", "key": "x", "value": 1})["ok"]
    history.event(0, "ok", "write", 1, leader)
    net.cut(leader, "n2")
    net.cut(leader, "n3")
    history.event(1, "invoke", "write", 2, leader)
    net.send_request(leader, {"op": "write", "key": "x", "value": 2}, client="w")
    net.run(0.05)
    history.event(2, "invoke", "read", None, leader)
    read = net.send_request(leader, {"op": "read", "key": "x", "consistency": consistency}, client="r")
    net.run(0.05)
    reply = net.reply_to("r", read)
    if reply is not None:
        history.event(2, "ok", "read", reply["value"], leader)
    net.crash(leader)
    history.event(1, "info", "write", 2, leader)  # no answer: indefinite
    if reply is None:
        history.event(2, "info", "read", None, leader)
    net.heal()
    new = net.wait_for_leader()
    history.event(3, "invoke", "read", None, new)
    history.event(3, "ok", "read", net.call(new, {"op": "read", "key": "x"})["value"], new)
    return history.lines, net


def test_uncommitted_read_sees_a_value_that_is_then_lost_and_the_checker_fails() -> None:
    lines, net = leader_dies_with_an_uncommitted_write("uncommitted")
    assert [json.loads(line)["value"] for line in lines if '"read"' in line and '"ok"' in line] == [2, 1]
    verdict = check_linearizability(parse_history(lines).ops, "register")
    assert verdict.valid is False, verdict.summary
    assert net.violations == []  # the cluster itself did nothing wrong: the read option did


def test_committed_read_in_the_same_scenario_is_linearizable() -> None:
    lines, _ = leader_dies_with_an_uncommitted_write("committed")
    verdict = check_linearizability(parse_history(lines).ops, "register")
    assert verdict.valid is True, verdict.summary


# --- the LRS version: delayed LRS messages are stale (seeds 55, 47, 401 of `harness simulate --mode fluvio
# --nodes 3 --nemesis-interval 3` lost committed writes without it) -----------------------------------------


def run_holding(net: FluvioNetwork, hold: Any, until: Any, timeout: float = 5.0) -> list[Envelope]:
    """`net.run_until(until)`, except that the in-flight messages `hold` accepts are set aside, in order:
    the returned envelopes are delivered (`release`) when the test says so, i.e. late."""
    held: list[Envelope] = []
    end = net.now + timeout
    while True:
        while net.inflight:
            if hold(net.inflight[0]):
                held.append(net.inflight.pop(0))
            else:
                net.deliver(0)
        if until(held):
            return held
        assert net.now < end, f"not reached in {timeout} s: {net.describe()}"
        net.advance(0.01)


def release(net: FluvioNetwork, envelope: Envelope) -> None:
    net.inflight.insert(0, envelope)
    assert net.deliver(0), f"{envelope} was dropped"


def lrs_members_lacking_commits(net: FluvioNetwork, leader: str) -> list[str]:
    """The SC's LRS members that do not store every record `leader` has committed: the SC may elect any
    LRS member, so this must stay empty (the invariant the LRS commit rule exists for)."""
    committed = [entry["lsn"] for entry in recover(_copy(net.disks[leader])).entries[:net.nodes[leader].commit_index]]
    lacking = []
    for member in net.controller.state.lrs:
        stored = [entry["lsn"] for entry in recover(_copy(net.disks[member])).entries]
        if stored[:len(committed)] != committed:
            lacking.append(member)
    return lacking


def is_type(envelope: Envelope, src: str, dst: str, kind: str) -> bool:
    return (envelope.src, envelope.dst, envelope.msg["type"]) == (src, dst, kind)


def test_a_promoted_leader_report_that_arrives_after_the_online_announcement_is_not_adopted() -> None:
    """Seed 55: the new leader reports the LeaderCandidate's LRS (with n1, which the SC saw go offline)
    before it gets the Online announcement [n2]; it commits alone; the report arrives late. The SC must not
    adopt it: it would then elect n1, which lacks the committed write."""
    net = FluvioNetwork(2, **FAST).start()
    assert net.wait_for_leader() == "n1"
    assert net.call("n1", {"op": "write", "key": "x", "value": 0})["ok"]
    net.crash("n1")
    held = run_holding(
        net, lambda e: (is_type(e, SC, "n2", "ReplicaSetUpdate") and e.msg["leader"] == "n2") or (
            is_type(e, "n2", SC, "SpuStatus") and e.msg["role"] == "leader"),
        until=lambda held: any(e.msg["type"] == "SpuStatus" and "n1" in e.msg["lrs"] for e in held))
    online = next(e for e in held if e.msg["type"] == "ReplicaSetUpdate")
    stale = next(e for e in held if e.msg["type"] == "SpuStatus")
    assert online.msg["lrs"] == ["n2"] and stale.msg["lrs"] == ["n2", "n1"]
    release(net, online)
    assert net.call("n2", {"op": "write", "key": "x", "value": 1})["ok"]  # committed on n2 alone
    release(net, stale)
    assert net.controller.state.lrs == ["n2"] and lrs_members_lacking_commits(net, "n2") == []
    net.crash("n2")
    net.start_node("n1")
    net.run(1.0)
    assert net.controller.state.status == "Offline" and net.leader() is None  # n1 is not electable
    net.start_node("n2")
    assert net.wait_for_leader() == "n2" and net.call("n2", {"op": "read", "key": "x"})["value"] == 1
    assert net.violations == []


def test_a_readmission_report_that_crosses_the_online_announcement_is_not_adopted() -> None:
    """Seed 401: the new leader n2 re-admits n3 and reports it; the SC's Online announcement [n2], sent
    before that report arrived, resets n2's proposed LRS (`first_ack`); n2 commits alone. The late report
    must not be adopted: the SC would then elect n3, which lacks the committed write."""
    net = FluvioNetwork(3, **FAST).start()
    assert net.wait_for_leader() == "n1"
    net.cut("n1", "n3")
    net.run(1.0)
    assert net.controller.state.lrs == ["n1", "n2"]
    assert net.call("n1", {"op": "write", "key": "x", "value": 0})["ok"]
    net.crash("n1")
    net.heal()
    held = run_holding(
        net, lambda e: (is_type(e, SC, "n2", "ReplicaSetUpdate") and e.msg["leader"] == "n2") or (
            is_type(e, "n2", SC, "SpuStatus") and e.msg["role"] == "leader"),
        until=lambda held: any(e.msg["type"] == "SpuStatus" and "n3" in e.msg["lrs"] for e in held))
    online = next(e for e in held if e.msg["type"] == "ReplicaSetUpdate")
    readmission = next(e for e in held if e.msg["type"] == "SpuStatus" and "n3" in e.msg["lrs"])
    assert online.msg["lrs"] == ["n2"]
    net.cut("n2", "n3")
    release(net, online)
    assert net.call("n2", {"op": "write", "key": "x", "value": 1})["ok"]  # committed on n2 alone
    release(net, readmission)
    assert net.controller.state.lrs == ["n2"] and lrs_members_lacking_commits(net, "n2") == []
    net.crash("n2")
    net.heal()
    net.run(1.0)
    assert net.controller.state.status == "Offline" and net.leader() is None  # n3 is not electable
    net.start_node("n2")
    assert net.wait_for_leader() == "n2" and net.call("n2", {"op": "read", "key": "x"})["value"] == 1
    assert net.violations == []


def test_a_replica_set_update_older_than_one_applied_is_ignored_by_the_leader() -> None:
    """Seed 47: leader n1 applies the SC's adoption of [n1, n2, n3], then gets a ReplicaSetUpdate [n1, n2]
    sent before it. Applying it would let n1 drop n3 and commit with n2 only while the SC still holds n3
    in the LRS; ignored, the commit waits for the SC to acknowledge the shrink."""
    net = FluvioNetwork(3, **FAST)
    net.sc_config = dataclasses.replace(net.sc_config, missed_heartbeats=10)  # the SC keeps n1 online
    net.start()
    assert net.wait_for_leader() == "n1"
    net.cut("n1", "n3")
    net.run(1.0)
    assert net.controller.state.lrs == ["n1", "n2"]
    net.heal()
    held = run_holding(net, lambda e: is_type(e, SC, "n1", "ReplicaSetUpdate") and e.msg["lrs"] == ["n1", "n2"],
                       until=lambda held: held and net.controller.state.lrs == list(SPUS))
    assert net.nodes["n1"].election.commit_set() == ["n2", "n3"]
    stale = held[0]
    net.cut("n1", "n3")
    request = net.send_request("n1", {"op": "write", "key": "x", "value": 1})
    # n1 drops the silent n3 after an election timeout; the SC's announcements and n1's shrink report wait
    window = run_holding(net, lambda e: is_type(e, SC, "n1", "ReplicaSetUpdate") or (
        is_type(e, "n1", SC, "SpuStatus") and "n3" not in e.msg["lrs"]),
        until=lambda held: "n3" not in net.nodes["n1"].election.proposed_lrs)
    release(net, stale)  # [n1, n2], sent before the SC adopted [n1, n2, n3]
    window += run_holding(net, lambda e: is_type(e, SC, "n1", "ReplicaSetUpdate") or (
        is_type(e, "n1", SC, "SpuStatus") and "n3" not in e.msg["lrs"]), until=lambda held: True)
    assert net.controller.state.lrs == list(SPUS) and lrs_members_lacking_commits(net, "n1") == []
    assert net.reply_to("c", request) is None  # the shrink is not acknowledged yet
    release(net, next(e for e in window if e.msg["type"] == "SpuStatus"))
    net.run(0.2)
    assert net.controller.state.lrs == ["n1", "n2"] and net.reply_to("c", request)["ok"]
    assert lrs_members_lacking_commits(net, "n1") == [] and net.violations == []


def test_a_member_the_leader_reported_counts_in_commits_until_the_sc_answers() -> None:
    """The leader re-admits n3 and reports it; before the SC answers, n3 falls silent and the leader drops
    it again. The SC may still adopt that report (it is based on the SC's current LRS version), so a write
    must not commit without n3 until a newer LRS version is applied."""
    net = FluvioNetwork(3, **FAST)
    net.sc_config = dataclasses.replace(net.sc_config, missed_heartbeats=10)  # the SC keeps n1 online
    net.start()
    assert net.wait_for_leader() == "n1"
    net.cut("n1", "n3")
    net.run(1.0)
    assert net.controller.state.lrs == ["n1", "n2"]
    net.heal()
    reports = run_holding(net, lambda e: is_type(e, "n1", SC, "SpuStatus"),
                          until=lambda held: any("n3" in e.msg["lrs"] for e in held))
    net.cut("n1", "n3")
    request = net.send_request("n1", {"op": "write", "key": "x", "value": 1})
    reports += run_holding(net, lambda e: is_type(e, "n1", SC, "SpuStatus"),
                           until=lambda held: "n3" not in net.nodes["n1"].election.proposed_lrs)
    deadline = net.now + 0.3  # n2 stores the write and keeps answering heartbeats
    reports += run_holding(net, lambda e: is_type(e, "n1", SC, "SpuStatus"), until=lambda held: net.now >= deadline)
    assert net.nodes["n2"].log.last_index == net.nodes["n1"].log.last_index
    assert net.reply_to("c", request) is None  # n3 was reported: it still counts
    release(net, next(e for e in reports if "n3" in e.msg["lrs"]))  # the SC adopts the growth
    assert net.controller.state.lrs == list(SPUS) and lrs_members_lacking_commits(net, "n1") == []
    net.run(0.5)  # n1 applies [n1, n2, n3], then reports the shrink on that version: adopted, acknowledged
    assert net.controller.state.lrs == ["n1", "n2"] and net.reply_to("c", request)["ok"]
    assert lrs_members_lacking_commits(net, "n1") == [] and net.violations == []
