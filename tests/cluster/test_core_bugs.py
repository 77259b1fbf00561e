"""Each known bug visibly changes behaviour, and a test observes the mistake (issue 2, item 8).

Every scenario runs twice: with the bug, the mistake is observed (by the network's Observer invariants
and by what clients see); without it, the same scenario is clean. `vote-twice` is also found by the
Hypothesis state machines (test_core_stateful.py).
"""

from __future__ import annotations

import pytest

from cluster.core.bugs import KNOWN_BUGS, validate_bugs
from cluster.core.config import NodeConfig
from tests.cluster.core_network import CoreNetwork

FAST = {"heartbeat_interval": 0.1, "missed_heartbeats": 3, "election_random_wait": 0.3,
        "proposal_timeout": 0.3}
FIRST = {"n1": {"startup_wait": 0.0, "election_random_wait": 0.0}}  # n1 wins the first election


def test_unknown_bug_names_are_refused_with_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown bug 'vote-thrice'; valid bugs: ack-before-commit, "):
        validate_bugs(["vote-thrice"])
    with pytest.raises(ValueError, match="unknown bug"):
        NodeConfig("n1", ("n2",), bugs=frozenset({"nope"}))
    with pytest.raises(ValueError, match="applies only to mode blazingmq"):
        NodeConfig("n1", ("n2",), mode="raft", bugs=frozenset({"skip-leader-sync"}))
    assert len(KNOWN_BUGS) >= 7 and all(bug.description and bug.modes for bug in KNOWN_BUGS.values())


# --- vote-twice ------------------------------------------------------------------------------------------


def concurrent_candidates(mode: str, bugs: tuple[str, ...]) -> CoreNetwork:
    """n1 and n2 become candidates of term 1 at the same moment; n3 hears both proposals."""
    net = CoreNetwork(3, mode=mode, bugs=bugs, scouting=False, **FAST,
                      per_node={"n1": {"startup_wait": 0.0, "election_random_wait": 0.0},
                                "n2": {"startup_wait": 0.0, "election_random_wait": 0.0},
                                "n3": {"startup_wait": 5.0}}).start()
    net.advance(0.001)
    assert [net.nodes[n].role for n in net.ids] == ["candidate", "candidate", "follower"]
    # Deliver the proposals to n3 first, then everything else.
    while any(e.dst == "n3" for e in net.inflight):
        net.deliver(next(i for i, e in enumerate(net.inflight) if e.dst == "n3"))
    net.run(1.0)
    return net


@pytest.mark.parametrize("mode", ["blazingmq", "raft"])
def test_vote_twice_gives_one_term_two_leaders(mode: str) -> None:
    buggy = concurrent_candidates(mode, ("vote-twice",))
    assert any("term 1 has two leaders" in v for v in buggy.violations), buggy.violations
    clean = concurrent_candidates(mode, ())
    assert not clean.violations
    claims = [e for n in clean.ids for e in clean.journals[n] if e["event"] == "role" and e["role"] == "leader"]
    assert len({(e["term"], e["node"]) for e in claims if e["term"] == 1}) <= 1


# --- ack-before-commit -----------------------------------------------------------------------------------


def write_to_isolated_leader(bugs: tuple[str, ...]) -> tuple[CoreNetwork, dict | None, str]:
    net = CoreNetwork(3, bugs=bugs, per_node=FIRST, **FAST).start()
    assert net.wait_for_leader() == "n1"
    net.isolate("n1")
    request_id = net.send_request("n1", {"op": "write", "key": "x", "value": "acked?"})
    net.crash("n1")
    new_leader = net.wait_for_leader(among=("n2", "n3"))
    net.heal()
    net.start_node("n1")
    net.run(2.0)
    return net, net.reply_to("c", request_id), new_leader


def test_ack_before_commit_acknowledges_a_write_that_is_then_lost() -> None:
    net, reply, new_leader = write_to_isolated_leader(("ack-before-commit",))
    assert reply is not None and reply["ok"] is True  # the client was told it happened...
    assert net.call(new_leader, {"op": "read", "key": "x"})["value"] is None  # ...and it did not
    assert any("acknowledged a write" in v and "before it was committed" in v for v in net.violations)

    net, reply, new_leader = write_to_isolated_leader(())
    assert reply is None  # no acknowledgement for a write that never committed (the client times out)
    assert net.call(new_leader, {"op": "read", "key": "x"})["value"] is None
    assert not net.violations


# --- skip-leader-sync ------------------------------------------------------------------------------------


def lagging_node_wins(bugs: dict[str, tuple[str, ...]]) -> tuple[CoreNetwork, list[dict]]:
    net = CoreNetwork(3, seed=1, bugs=bugs, per_node={"n1": {"startup_wait": 0.0, "election_random_wait": 0.0},
                                                       "n2": {"election_random_wait": 5.0}}, **FAST).start()
    assert net.wait_for_leader() == "n1"
    net.partition(["n1"], ["n3"])
    acked = [net.call("n1", {"op": "write", "key": "x", "value": v}) for v in (1, 2, 3)]
    assert all(r["ok"] for r in acked)
    net.crash("n1")
    net.heal()
    assert net.run_until(lambda: net.leader() == "n3" and net.nodes["n3"].accepting, 10.0)
    net.run(1.0)
    return net, acked


def test_skip_leader_sync_loses_committed_writes_and_diverges_lsns() -> None:
    net, acked = lagging_node_wins({"n3": ("skip-leader-sync",)})
    assert net.call("n3", {"op": "read", "key": "x"})["value"] is None  # three acked writes gone
    assert any(v.startswith("committed entry") and "changed" in v for v in net.violations), net.violations
    # n2 applied (1, k) entries that the new leader's log replaced: the same index, two different entries.
    n2_applied = {e["index"]: e["lsn"] for e in net.applied("n2")}
    n3_log = {i + 1: e["lsn"] for i, e in enumerate(net.nodes["n3"].log.entries)}
    assert any(n2_applied[i] != n3_log.get(i) for i in n2_applied)

    net, acked = lagging_node_wins({})
    assert net.call("n3", {"op": "read", "key": "x"})["value"] == 3
    assert not net.violations


# --- lsn-reuse -------------------------------------------------------------------------------------------


def leader_restarts_quickly(bugs: tuple[str, ...]) -> CoreNetwork:
    net = CoreNetwork(3, bugs=bugs, per_node=FIRST, **FAST).start()
    assert net.wait_for_leader() == "n1"
    for v in (1, 2):
        assert net.call("n1", {"op": "write", "key": "x", "value": v})["ok"]
    net.crash("n1")
    net.start_node("n1")  # back before the followers miss three heartbeats
    net.call("n1", {"op": "write", "key": "x", "value": 3}, timeout=3.0)
    net.run(2.0)
    return net


def test_lsn_reuse_issues_the_same_lsn_for_two_different_entries() -> None:
    net = leader_restarts_quickly(("lsn-reuse",))
    assert any("applied" in v and "after" in v for v in net.violations), net.violations
    labels = [tuple(e["lsn"]) for e in net.nodes["n2"].log.entries]
    assert len(labels) != len(set(labels))  # duplicate LSNs, different entries

    net = leader_restarts_quickly(())
    assert not net.violations
    labels = [tuple(e["lsn"]) for e in net.nodes["n2"].log.entries]
    assert len(labels) == len(set(labels)) and labels == sorted(labels)


# --- stale-read ------------------------------------------------------------------------------------------


def read_on_a_cut_off_node(bugs: tuple[str, ...]) -> tuple[CoreNetwork, dict | None]:
    net = CoreNetwork(3, bugs=bugs, per_node=FIRST, **FAST).start()
    assert net.wait_for_leader() == "n1"
    assert net.call("n1", {"op": "write", "key": "x", "value": "old"})["ok"]
    net.run(0.5)  # n3 learns the commit
    net.isolate("n3")
    assert net.call("n1", {"op": "write", "key": "x", "value": "new"})["ok"]
    return net, net.call("n3", {"op": "read", "key": "x"}, timeout=1.0)


def test_stale_read_lets_a_cut_off_follower_serve_an_old_value() -> None:
    net, reply = read_on_a_cut_off_node(("stale-read",))
    assert reply["ok"] is True and reply["value"] == "old"
    assert any("stale read" in v for v in net.violations)

    net, reply = read_on_a_cut_off_node(())
    assert reply["ok"] is False and reply["error"] == "not-leader" and reply["definite"] is True
    assert not net.violations


# --- lease-read-wallclock --------------------------------------------------------------------------------


def read_on_a_deposed_leader(bugs: tuple[str, ...], skew: float) -> tuple[CoreNetwork, dict | None]:
    net = CoreNetwork(3, bugs=bugs, per_node=FIRST, leader_quorum_timeout=0, **FAST).start()
    assert net.wait_for_leader() == "n1"
    assert net.call("n1", {"op": "write", "key": "x", "value": "old"})["ok"]
    net.isolate("n1")
    net.wall_offset["n1"] = skew  # the nemesis moves n1's wall clock back
    new_leader = net.wait_for_leader(among=("n2", "n3"))
    assert net.call(new_leader, {"op": "write", "key": "x", "value": "new"})["ok"]
    return net, net.call("n1", {"op": "read", "key": "x"}, timeout=1.0)


def test_lease_reads_timed_by_the_wall_clock_go_stale_only_under_clock_skew() -> None:
    net, reply = read_on_a_deposed_leader(("lease-read-wallclock",), skew=-30.0)
    assert reply is not None and reply["ok"] is True and reply["value"] == "old"
    assert any("stale read" in v for v in net.violations)

    net, reply = read_on_a_deposed_leader(("lease-read-wallclock",), skew=0.0)
    assert reply is None and not net.violations  # the lease ran out before anyone else could lead

    net, reply = read_on_a_deposed_leader((), skew=-30.0)
    assert reply is None and not net.violations  # read index: the cut-off leader cannot confirm


def test_lease_reads_are_served_without_a_heartbeat_round() -> None:
    net = CoreNetwork(3, bugs=("lease-read-wallclock",), per_node=FIRST, **FAST).start()
    assert net.wait_for_leader() == "n1"
    net.run(0.3)
    before = len(net.traffic)
    request_id = net.send_request("n1", {"op": "read", "key": "x"})
    assert net.reply_to("c", request_id)["ok"] is True and len(net.traffic) == before


# --- no-dedup --------------------------------------------------------------------------------------------


def put_twice(bugs: tuple[str, ...]) -> tuple[list[dict], list[dict]]:
    net = CoreNetwork(3, bugs=bugs, per_node=FIRST, **FAST).start()
    assert net.wait_for_leader() == "n1"
    put = {"op": "put", "key": "q", "value": "m", "guid": "g-1"}
    puts = [net.call("n1", put), net.call("n1", put)]  # a retry after a lost ACK
    consumed = [net.call("n1", {"op": "consume", "key": "q"}) for _ in range(2)]
    assert not net.violations
    return puts, consumed


def test_no_dedup_enqueues_a_retried_put_twice() -> None:
    puts, consumed = put_twice(("no-dedup",))
    assert [c["value"] for c in consumed] == [{"guid": "g-1", "value": "m"}] * 2  # delivered twice

    puts, consumed = put_twice(())
    assert puts[1]["ok"] and puts[1]["duplicate"] is True and puts[1]["lsn"] == puts[0]["lsn"]
    assert consumed[0]["value"] == {"guid": "g-1", "value": "m"}
    assert consumed[1]["error"] == "in-flight" and consumed[1]["value"]["in_flight"] == 1  # one copy, pending
