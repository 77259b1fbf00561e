"""The node's logs (the ``log`` workload): appends get per-key offsets at apply time, polls are reads served
up to the commit point, and the known bug ``read-beyond-hw`` serves records past it."""

from __future__ import annotations

import pytest

from cluster.core.statemachine import POLL_LIMIT, LogQuery, StateMachine, read_query
from tests.cluster.core_network import n1_leading

MODES = ["blazingmq", "raft", "aeron"]


def entry(seq: int, key: str, value: object) -> dict:
    return {"lsn": [1, seq], "f": "append", "key": key, "value": value, "time": 0.0}


def test_offsets_count_each_key_s_committed_appends_in_log_order() -> None:
    sm = StateMachine(300.0, "seconds")
    acks = [sm.apply(entry(seq, key, value)) for seq, (key, value) in
            enumerate([("a", 10), ("b", 20), ("a", 11), ("a", 12)], start=1)]
    assert [outcome.value for outcome, _ in acks] == [[0, 10], [0, 20], [1, 11], [2, 12]]
    assert [outcome.lsn for outcome, _ in acks] == [[1, 1], [1, 2], [1, 3], [1, 4]]
    assert acks[2][1] == {"f": "append", "value": 11, "offset": 1}
    assert sm.read(LogQuery("a", 1)) == ([[1, 11], [2, 12]], None)  # polls carry no LSN
    assert sm.read(LogQuery("a", 0, limit=1)) == ([[0, 10]], None)
    assert sm.read(LogQuery("a", 3)) == ([], None) and sm.read(LogQuery("nothing", 0)) == ([], None)


def test_a_poll_request_becomes_a_log_query_with_a_bounded_batch() -> None:
    assert read_query({"op": "read", "key": "x"}) == "x"
    assert read_query({"op": "poll", "key": "l0", "from": 4}) == LogQuery("l0", 4, POLL_LIMIT)
    assert read_query({"op": "poll", "key": "l0", "from": 4, "limit": 2}) == LogQuery("l0", 4, 2)
    assert read_query({"op": "poll", "key": "l0", "from": 4, "limit": 10**6}).limit == POLL_LIMIT


@pytest.mark.parametrize("mode", MODES)
def test_appends_and_polls_at_the_leader_and_local_polls_at_a_follower(mode: str) -> None:
    net = n1_leading(mode)
    acks = [net.call("n1", {"op": "append", "key": "l0", "value": v}) for v in (7, 8, 9)]
    assert [a["value"] for a in acks] == [[0, 7], [1, 8], [2, 9]] and all(a["ok"] for a in acks)
    assert net.call("n1", {"op": "append", "key": "l1", "value": 1})["value"] == [0, 1]
    poll = net.call("n1", {"op": "poll", "key": "l0", "from": 1})
    assert poll["ok"] and poll["value"] == [[1, 8], [2, 9]] and poll["lsn"] is None
    assert net.call("n1", {"op": "poll", "key": "l0", "from": 3})["value"] == []
    local = net.call("n3", {"op": "poll", "key": "l0", "from": 0, "local": True})
    assert local["ok"] and local["value"] == [[0, 7], [1, 8], [2, 9]]
    redirected = net.call("n2", {"op": "poll", "key": "l0", "from": 0})
    assert redirected["error"] == "not-leader" and redirected["leader"] == "n1"
    assert not net.violations


def test_a_poll_without_a_valid_offset_is_a_bad_request() -> None:
    net = n1_leading("raft")
    for bad in ({"op": "poll", "key": "l0"}, {"op": "poll", "key": "l0", "from": -1},
                {"op": "poll", "key": "l0", "from": "0"}):
        reply = net.call("n1", bad)
        assert reply["error"] == "bad-request" and "poll needs 'from'" in reply["message"]


def leader_cut_off_with_an_uncommitted_append(bugs: tuple[str, ...]) -> tuple[dict, dict]:
    """l0 = [1] commits; n1 is cut off and appends 2, which cannot commit; a consumer polls n1."""
    net = n1_leading("raft", bugs=bugs)
    assert net.call("n1", {"op": "append", "key": "l0", "value": 1})["value"] == [0, 1]
    net.isolate("n1")
    net.send_request("n1", {"op": "append", "key": "l0", "value": 2}, client="w")
    net.run(0.05)
    poll = net.send_request("n1", {"op": "poll", "key": "l0", "from": 0}, client="r")
    net.run(0.05)
    early = net.reply_to("r", poll)
    net.heal()
    net.crash("n1")
    new = net.wait_for_leader(among=("n2", "n3"))
    assert net.call(new, {"op": "append", "key": "l0", "value": 3})["value"] == [1, 3]
    return early or {}, net.call(new, {"op": "poll", "key": "l0", "from": 0})


def test_read_beyond_hw_serves_a_record_that_a_leader_change_then_replaces() -> None:
    early, final = leader_cut_off_with_an_uncommitted_append(("read-beyond-hw",))
    assert early["value"] == [[0, 1], [1, 2]]  # offset 1 read before it was committed
    assert final["value"] == [[0, 1], [1, 3]]  # and the new leader's offset 1 is another record


def test_without_the_bug_a_poll_waits_for_the_commit_point() -> None:
    early, final = leader_cut_off_with_an_uncommitted_append(())
    assert early == {} or early["value"] == [[0, 1]]  # no answer in time, or the committed record only
    assert final["value"] == [[0, 1], [1, 3]]
