"""The node-level known bugs in the aeron, fluvio and lease modes: the same mistakes as in
test_core_bugs.py, shown in each mode's own code path (issue 7).

Every scenario runs twice, with the bug and without it, in the mode's deterministic test network (aeron:
`CoreNetwork`; fluvio: `FluvioNetwork`, SPUs plus the SC; lease: `LeaseNetwork`, data nodes plus the raft
store group). With the bug the network's Observer invariants (or what a client sees) show the mistake;
without it the same scenario is clean. Which (bug, mode) pairs exist, and why the others do not, is
`cluster.core.bugs`'s docstring.
"""

from __future__ import annotations

from typing import Any

import pytest

from cluster.core.bugs import ALL_MODES, KNOWN_BUGS
from cluster.core.election import ELECTIONS
from tests.cluster.core_network import CoreNetwork
from tests.cluster.fluvio_network import FluvioNetwork
from tests.cluster.lease_network import LeaseNetwork

TIMING: dict[str, dict[str, Any]] = {
    "aeron": {"heartbeat_interval": 0.1, "missed_heartbeats": 3, "election_random_wait": 0.3,
              "proposal_timeout": 0.3},
    "fluvio": {"heartbeat_interval": 0.1, "missed_heartbeats": 3},
    "lease": {"heartbeat_interval": 0.05, "lease_ttl": 0.6, "leader_quorum_timeout": 2.0},
}
NEW_MODES = ("aeron", "fluvio", "lease")


def network(mode: str, bugs: tuple[str, ...], **overrides: Any) -> CoreNetwork:
    """A started 3-node network of `mode` with `bugs` on every data node."""
    settings = {**TIMING[mode], **overrides}
    if mode == "fluvio":
        return FluvioNetwork(3, bugs=bugs, **settings).start()
    if mode == "lease":
        return LeaseNetwork(seed=2, bugs=bugs, **settings).start()
    return CoreNetwork(3, mode=mode, bugs=bugs, **settings).start()


def cut_off(net: CoreNetwork, node: str) -> None:
    """Cut `node` from every peer (and, in lease mode, from the store, so another node can take the key)."""
    net.isolate(node)
    if isinstance(net, LeaseNetwork):
        net.cut_from_store(node)


def test_every_mode_is_listed_and_each_bug_names_known_modes() -> None:
    modes = {*ELECTIONS, "lease"}
    assert set(ALL_MODES) == modes
    assert all(set(bug.modes) <= modes for bug in KNOWN_BUGS.values())
    # no vote, so no vote to give twice; the lease mode's wall-clock lease is `lease-own-clock`
    assert KNOWN_BUGS["vote-twice"].modes == ("blazingmq", "raft", "aeron")
    assert "lease" not in KNOWN_BUGS["lease-read-wallclock"].modes


# --- ack-before-commit -----------------------------------------------------------------------------------


def write_to_cut_off_leader(mode: str, bugs: tuple[str, ...]) -> tuple[CoreNetwork, dict | None, str, str]:
    net = network(mode, bugs)
    old = net.wait_for_leader()
    cut_off(net, old)
    request_id = net.send_request(old, {"op": "write", "key": "x", "value": "acked?"})
    net.crash(old)
    new = net.wait_for_leader(among=[n for n in net.ids if n not in (old, "sc")])
    net.heal()
    net.start_node(old)
    net.run(2.0)
    return net, net.reply_to("c", request_id), old, new


@pytest.mark.parametrize("mode", NEW_MODES)
def test_ack_before_commit_acknowledges_a_write_that_is_then_lost(mode: str) -> None:
    net, reply, _, new = write_to_cut_off_leader(mode, ("ack-before-commit",))
    assert reply is not None and reply["ok"] is True
    assert net.call(new, {"op": "read", "key": "x"})["value"] is None
    assert any("acknowledged a write" in v and "before it was committed" in v for v in net.violations)

    net, reply, _, new = write_to_cut_off_leader(mode, ())
    assert reply is None
    assert net.call(new, {"op": "read", "key": "x"})["value"] is None
    assert not net.violations


# --- stale-read ------------------------------------------------------------------------------------------


def read_on_a_cut_off_follower(mode: str, bugs: tuple[str, ...]) -> tuple[CoreNetwork, dict | None]:
    net = network(mode, bugs)
    leader = net.wait_for_leader()
    assert net.call(leader, {"op": "write", "key": "x", "value": "old"})["ok"]
    net.run(0.5)  # the followers learn the commit
    follower = next(n for n in net.ids if n not in (leader, "sc"))
    cut_off(net, follower)
    assert net.call(leader, {"op": "write", "key": "x", "value": "new"})["ok"]
    return net, net.call(follower, {"op": "read", "key": "x"}, timeout=1.0)


@pytest.mark.parametrize("mode", NEW_MODES)
def test_stale_read_lets_a_cut_off_follower_serve_an_old_value(mode: str) -> None:
    net, reply = read_on_a_cut_off_follower(mode, ("stale-read",))
    assert reply["ok"] is True and reply["value"] == "old"
    assert any("stale read" in v for v in net.violations)

    net, reply = read_on_a_cut_off_follower(mode, ())
    assert reply["ok"] is False and reply["error"] == "not-leader"
    assert not net.violations


# --- no-dedup --------------------------------------------------------------------------------------------


def put_twice(mode: str, bugs: tuple[str, ...]) -> tuple[list[dict], list[dict]]:
    net = network(mode, bugs)
    leader = net.wait_for_leader()
    put = {"op": "put", "key": "q", "value": "m", "guid": "g-1"}
    puts = [net.call(leader, put), net.call(leader, put)]  # a retry after a lost ACK
    consumed = [net.call(leader, {"op": "consume", "key": "q"}) for _ in range(2)]
    assert not net.violations
    return puts, consumed


@pytest.mark.parametrize("mode", NEW_MODES)
def test_no_dedup_enqueues_a_retried_put_twice(mode: str) -> None:
    puts, consumed = put_twice(mode, ("no-dedup",))
    assert [c["value"] for c in consumed] == [{"guid": "g-1", "value": "m"}] * 2

    puts, consumed = put_twice(mode, ())
    assert puts[1]["ok"] and puts[1]["duplicate"] is True and puts[1]["lsn"] == puts[0]["lsn"]
    assert consumed[0]["value"] == {"guid": "g-1", "value": "m"}
    assert consumed[1]["error"] == "in-flight" and consumed[1]["value"]["in_flight"] == 1


# --- lsn-reuse -------------------------------------------------------------------------------------------


def leader_restarts_quickly(mode: str, bugs: tuple[str, ...]) -> tuple[CoreNetwork, str]:
    net = network(mode, bugs)
    leader = net.wait_for_leader()
    for v in (1, 2):
        assert net.call(leader, {"op": "write", "key": "x", "value": v})["ok"]
    net.crash(leader)
    net.start_node(leader)  # back before anyone counts it gone (lease: its key is still its own)
    net.call(net.wait_for_leader(), {"op": "write", "key": "x", "value": 3}, timeout=3.0)
    net.run(2.0)
    return net, leader


@pytest.mark.parametrize("mode", NEW_MODES)
def test_lsn_reuse_issues_the_same_lsn_for_two_different_entries(mode: str) -> None:
    net, leader = leader_restarts_quickly(mode, ("lsn-reuse",))
    assert any("applied" in v and "after" in v for v in net.violations), net.violations
    follower = next(n for n in net.ids if n not in (leader, "sc"))
    labels = [tuple(e["lsn"]) for e in net.nodes[follower].log.entries]
    assert len(labels) != len(set(labels))  # duplicate LSNs, different entries

    net, leader = leader_restarts_quickly(mode, ())
    assert not net.violations
    for node in (n for n in net.ids if n != "sc"):
        labels = [tuple(e["lsn"]) for e in net.nodes[node].log.entries]
        assert len(labels) == len(set(labels)) and labels == sorted(labels)


# --- lease-read-wallclock --------------------------------------------------------------------------------


def read_on_a_deposed_leader(mode: str, bugs: tuple[str, ...], skew: float) -> tuple[CoreNetwork, dict | None]:
    net = network(mode, bugs, leader_quorum_timeout=0)
    old = net.wait_for_leader()
    assert net.call(old, {"op": "write", "key": "x", "value": "old"})["ok"]
    cut_off(net, old)
    net.wall_offset[old] = skew  # the nemesis moves the leader's wall clock back
    new = net.wait_for_leader(among=[n for n in net.ids if n not in (old, "sc")])
    assert net.call(new, {"op": "write", "key": "x", "value": "new"})["ok"]
    return net, net.call(old, {"op": "read", "key": "x"}, timeout=1.0)


@pytest.mark.parametrize("mode", ["aeron"])
def test_lease_reads_timed_by_the_wall_clock_go_stale_under_clock_skew(mode: str) -> None:
    net, reply = read_on_a_deposed_leader(mode, ("lease-read-wallclock",), skew=-30.0)
    assert reply is not None and reply["ok"] is True and reply["value"] == "old"
    assert any("stale read" in v for v in net.violations)

    net, reply = read_on_a_deposed_leader(mode, (), skew=-30.0)
    assert reply is None and not net.violations  # read index: the cut-off leader cannot confirm
