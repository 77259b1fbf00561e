"""Replication, LSNs, commit, apply, reads, writes and restarts, in both election modes.

Everything here must hold whichever mode elects the leader; the modes' own rules are in
test_core_blazingmq.py and test_core_raft.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.core.messages import MESSAGE_TYPES, AppendEntries
from tests.cluster.core_network import FAST, CoreNetwork, single_node
from tests.cluster.core_network import n1_leading as cluster

MODES = ["blazingmq", "raft"]


@pytest.mark.parametrize("mode", MODES)
def test_writes_commit_and_apply_in_lsn_order_on_every_node(mode: str) -> None:
    net = cluster(mode)
    replies = [net.call("n1", {"op": "write", "key": f"k{v % 2}", "value": v}) for v in range(6)]
    assert all(r["ok"] for r in replies)
    assert [r["lsn"] for r in replies] == [[1, s] for s in range(2, 8)]  # (1, 1) is the term's no-op
    net.run(0.5)
    applied = {n: [(e["lsn"], e["key"], e["op"]) for e in net.applied(n)] for n in net.ids}
    assert applied["n1"] == applied["n2"] == applied["n3"]
    assert [lsn for lsn, _, _ in applied["n1"]] == [[1, s] for s in range(1, 8)]
    assert applied["n1"][0] == ([1, 1], None, {"f": "noop"})
    assert applied["n1"][1] == ([1, 2], "k0", {"f": "write", "value": 0})
    assert not net.violations


@pytest.mark.parametrize("mode", MODES)
def test_seq_restarts_at_one_in_each_new_term(mode: str) -> None:
    net = cluster(mode)
    assert net.call("n1", {"op": "write", "key": "x", "value": 1})["lsn"] == [1, 2]
    net.crash("n1")
    leader = net.wait_for_leader(among=("n2", "n3"))
    term = net.nodes[leader].term
    assert term > 1
    assert net.call(leader, {"op": "write", "key": "x", "value": 2})["lsn"] == [term, 2]
    assert net.nodes[leader].log.entry(3)["lsn"] == [term, 1]


@pytest.mark.parametrize("mode", MODES)
def test_a_majority_commits_and_a_minority_does_not(mode: str) -> None:
    net = cluster(mode)
    net.crash("n3")
    assert net.call("n1", {"op": "write", "key": "x", "value": 1})["ok"]
    net.crash("n2")
    request_id = net.send_request("n1", {"op": "write", "key": "x", "value": 2})
    net.run(0.5)
    assert net.reply_to("c", request_id) is None
    assert net.nodes["n1"].commit_index < net.nodes["n1"].log.last_index
    net.start_node("n2")
    assert net.run_until(lambda: net.reply_to("c", request_id) is not None, 5.0)
    assert net.reply_to("c", request_id)["ok"] is True


@pytest.mark.parametrize("mode", MODES)
def test_every_reply_carries_its_lsn_and_reads_carry_the_writer_lsn(mode: str) -> None:
    net = cluster(mode)
    assert net.call("n1", {"op": "read", "key": "never"}) == {"id": 1, "ok": True, "value": None, "lsn": None}
    write = net.call("n1", {"op": "write", "key": "x", "value": "a"})
    net.call("n1", {"op": "write", "key": "y", "value": "b"})
    read = net.call("n1", {"op": "read", "key": "x"})
    assert read["value"] == "a" and read["lsn"] == write["lsn"]
    cas = net.call("n1", {"op": "cas", "key": "x", "value": ["a", "c"]})
    assert cas["ok"] is True and cas["lsn"][1] == write["lsn"][1] + 2
    miss = net.call("n1", {"op": "cas", "key": "x", "value": ["a", "d"]})
    assert miss["ok"] is False and miss["error"] == "cas-mismatch" and miss["definite"] is True
    assert miss["lsn"] == [1, cas["lsn"][1] + 1]
    assert net.call("n1", {"op": "read", "key": "x"})["value"] == "c"


@pytest.mark.parametrize("mode", MODES)
def test_non_leaders_redirect_with_a_definite_error_naming_the_leader(mode: str) -> None:
    net = cluster(mode)
    for op in ({"op": "write", "key": "x", "value": 1}, {"op": "read", "key": "x"}):
        reply = net.call("n2", op)
        assert reply["ok"] is False and reply["error"] == "not-leader"
        assert reply["definite"] is True and reply["leader"] == "n1"
    status = net.call("n2", {"op": "status"})
    assert status["value"]["role"] == "follower" and status["value"]["leader"] == "n1"


@pytest.mark.parametrize("mode", MODES)
def test_a_cut_off_leader_never_serves_a_read(mode: str) -> None:
    """Read index: a leader answers a read only after a majority confirms a round sent after it arrived."""
    net = cluster(mode)
    assert net.call("n1", {"op": "write", "key": "x", "value": "old"})["ok"]
    net.isolate("n1")
    request_id = net.send_request("n1", {"op": "read", "key": "x"})
    new_leader = net.wait_for_leader(among=("n2", "n3"))
    assert net.call(new_leader, {"op": "write", "key": "x", "value": "new"})["ok"]
    net.run(0.5)
    assert net.reply_to("c", request_id) is None
    net.heal()
    assert net.run_until(lambda: net.reply_to("c", request_id) is not None, 5.0)
    reply = net.reply_to("c", request_id)
    assert reply["error"] == "not-leader" and reply["definite"] is True and reply["leader"] == new_leader
    assert not net.violations


@pytest.mark.parametrize("mode", MODES)
def test_a_leader_that_cannot_reach_a_majority_steps_down(mode: str) -> None:
    net = cluster(mode, leader_quorum_timeout=1.0)
    net.isolate("n1")
    request_id = net.send_request("n1", {"op": "write", "key": "x", "value": 1})
    net.run(1.5)
    assert net.nodes["n1"].role == "follower"
    reply = net.reply_to("c", request_id)
    assert reply["error"] == "leadership-lost" and reply["definite"] is False


@pytest.mark.parametrize("mode", MODES)
def test_a_restarted_node_recovers_its_log_and_does_not_journal_an_lsn_twice(mode: str) -> None:
    net = cluster(mode)
    for v in range(3):
        assert net.call("n1", {"op": "write", "key": "x", "value": v})["ok"]
    net.run(0.5)
    before = [e["lsn"] for e in net.applied("n2")]
    net.crash("n2")
    assert net.call("n1", {"op": "write", "key": "x", "value": 9})["ok"]
    net.start_node("n2")
    assert net.nodes["n2"].state_machine.read("x")[0] == 2  # rebuilt from its own disk
    net.run(1.0)
    after = [e["lsn"] for e in net.applied("n2")]
    assert after[:len(before)] == before and len(after) == len(set(map(tuple, after)))
    assert net.nodes["n2"].state_machine.read("x")[0] == 9
    starts = [e for e in net.journals["n2"] if e["event"] == "start"]
    assert len(starts) == 2 and starts[1]["term"] == net.nodes["n1"].term
    assert not net.violations


@pytest.mark.parametrize("mode", MODES)
def test_a_whole_cluster_restart_loses_no_committed_write(mode: str) -> None:
    net = cluster(mode)
    acked = [net.call("n1", {"op": "write", "key": "x", "value": v})["lsn"] for v in range(3)]
    for node_id in net.ids:
        net.crash(node_id)
    for node_id in net.ids:
        net.start_node(node_id)
    leader = net.wait_for_leader()
    assert net.call(leader, {"op": "read", "key": "x"})["lsn"] == acked[-1]
    assert not net.violations


def test_followers_get_batches_and_at_most_the_configured_number_in_flight() -> None:
    net = cluster("blazingmq", max_inflight_appends=2, max_batch_entries=3)
    for v in range(10):
        net.send_request("n1", {"op": "write", "key": "x", "value": v})
    to_n2 = [e.msg for e in net.inflight if e.dst == "n2" and e.msg["type"] == "AppendEntries"]
    assert [len(m["entries"]) for m in to_n2] == [1, 1]  # the window is full after two
    sizes = []
    while net.inflight:
        envelope = net.inflight[0]
        if envelope.dst == "n2" and envelope.msg["type"] == "AppendEntries":
            sizes.append(len(envelope.msg["entries"]))
        net.deliver(0)
    assert sum(sizes) == 10 and max(sizes) == 3 and len(sizes) < 10  # later entries went in batches
    assert all(net.reply_to("c", i)["ok"] for i in range(1, 11))


def test_a_follower_truncates_a_divergent_suffix_and_tells_the_leader_where_to_resume() -> None:
    records = [{"t": "term", "term": 2, "vote": None},
               {"t": "entries", "from": 1, "entries": [
                   {"lsn": [1, 1], "f": "noop", "key": None, "time": 0.0},
                   {"lsn": [1, 2], "f": "write", "key": "x", "value": "stale", "time": 0.1}]}]
    node, _ = single_node("n2", ("n1", "n3"), records=records)
    conflict = AppendEntries(term=3, prev_index=2, prev_lsn=[2, 5], entries=[], commit_index=0).to_wire()
    ready = node.receive("n1", conflict, 1.0, 1.0)
    response = [m for _, m in ready.messages if m["type"] == "AppendEntriesResponse"][0]
    assert response["success"] is False and response["hint_index"] == 1
    new = {"lsn": [2, 1], "f": "noop", "key": None, "time": 0.2}
    ready = node.receive("n1", AppendEntries(term=3, prev_index=1, prev_lsn=[1, 1], entries=[new],
                                             commit_index=2).to_wire(), 1.1, 1.1)
    assert ready.persist[-2:] == [{"t": "entries", "from": 2, "entries": [new]}, {"t": "applied", "index": 2}]
    assert [e["lsn"] for e in node.log.entries] == [[1, 1], [2, 1]]
    assert {"event": "append", "index": 2, "count": 1, "first_lsn": [2, 1], "last_lsn": [2, 1],
            "truncated": 1} in ready.journal


def test_malformed_requests_and_peer_messages_never_crash_the_node() -> None:
    node, _ = single_node()
    for request, fragment in [("hello", "JSON object"), ({"op": "drop"}, "unknown op"),
                              ({"op": "read"}, "string 'key'"), ({"op": "cas", "key": "x", "value": 1}, "cas"),
                              ({"op": "put", "key": "q", "value": 1}, "guid"), ({"op": "confirm", "key": "q"}, "guid")]:
        reply = node.request("c", request, 1.0, 1.0).replies[0][1]
        assert reply["error"] == "bad-request" and reply["definite"] is True and fragment in reply["message"]
    for message in ["x", {}, {"type": "Nope", "term": 1}, {"type": "LeaderHeartbeat", "term": -1},
                    {"type": "AppendEntries", "term": 1, "prev_index": 0, "prev_lsn": [0, 0],
                     "entries": [{"lsn": "bad"}], "commit_index": 0},
                    {"type": "VoteRequest", "term": 1, "last_index": 0, "last_lsn": [0, 0]}]:
        assert node.receive("n2", message, 1.0, 1.0).messages == []
    assert node.receive("stranger", {"type": "ElectionProposal", "term": 5}, 1.0, 1.0).messages == []
    assert node.rejected_messages == 7 and node.term == 0


def test_status_reports_the_contract_fields() -> None:
    net = cluster("raft")
    net.call("n1", {"op": "write", "key": "x", "value": 1})
    status = net.call("n1", {"op": "status"})["value"]
    assert {k: status[k] for k in ("node", "role", "term", "leader", "commit_lsn", "last_lsn", "mode")} == {
        "node": "n1", "role": "leader", "term": 1, "leader": "n1", "commit_lsn": [1, 2], "last_lsn": [1, 2],
        "mode": "raft"}


def test_the_same_inputs_give_the_same_outputs() -> None:
    def run() -> list:
        net = CoreNetwork(5, seed=11, **FAST).start()
        leader = net.wait_for_leader()
        for v in range(5):
            net.send_request(leader, {"op": "write", "key": "x", "value": v})
        net.isolate(leader)
        net.run(3.0)
        return [net.journals[n] for n in net.ids] + [net.disks[n] for n in net.ids]

    assert run() == run()


def test_a_leaders_new_entries_may_leave_before_its_own_fsync() -> None:
    net = cluster("blazingmq")
    node = net.nodes["n1"]
    ready = node.request("c", {"id": 1, "op": "write", "key": "x", "value": 1}, net.now, net.now)
    assert ready.early == len(ready.messages) == 2
    assert all(m["type"] == "AppendEntries" for _, m in ready.messages) and ready.persist
    assert node.request("c", {"id": 2, "op": "read", "key": "x"}, net.now, net.now).early == 0
    follower = net.nodes["n2"].receive("n1", ready.messages[0][1], net.now, net.now)
    assert follower.early == 0 and follower.persist  # a follower acknowledges only what it persisted


def test_role_changes_outside_the_table_are_refused() -> None:
    node, _ = single_node()
    with pytest.raises(ValueError, match="role change follower -> leader is not allowed"):
        node.transition(1.0, "leader", leader="n1")
    assert node.role == "follower"


def _fuzz_value() -> st.SearchStrategy:
    lsn = st.lists(st.integers(0, 3), min_size=2, max_size=2)
    entry = st.fixed_dictionaries({"lsn": lsn, "f": st.sampled_from(["noop", "write", "cas", "put", "x"]),
                                   "key": st.sampled_from(["x", None, 1]),
                                   "value": st.one_of(st.integers(), st.lists(st.integers(), max_size=3)),
                                   "guid": st.sampled_from(["g", None])})
    return st.one_of(st.integers(-1, 6), st.booleans(), st.none(), st.text(max_size=3), lsn,
                     st.lists(entry, max_size=3))


@given(kind=st.sampled_from(sorted(MESSAGE_TYPES)), sender=st.sampled_from(["n2", "n3"]),
       fields=st.dictionaries(st.sampled_from(sorted({f for cls in MESSAGE_TYPES.values()
                                                      for f in cls.__dataclass_fields__})), _fuzz_value()),
       leader=st.booleans(), mode=st.sampled_from(["blazingmq", "raft"]))
@settings(max_examples=150, deadline=None, database=None, derandomize=True)
def test_no_peer_message_can_crash_a_node(kind: str, sender: str, fields: dict, leader: bool, mode: str) -> None:
    node, _ = single_node(mode=mode, scouting=False, **FAST)
    if leader:
        node.tick(5.0, 5.0)
        node.receive("n2", {"type": "ElectionProposalResponse" if mode == "blazingmq" else "VoteResponse",
                            "term": 1, "granted": True}, 5.0, 5.0)
    node.receive(sender, dict(fields, type=kind), 5.1, 5.1)
    node.tick(9.0, 9.0)
