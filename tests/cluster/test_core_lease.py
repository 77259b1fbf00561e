"""The `lease` election mode (seed 003, election through an external linearizable store) and its known bugs.

Unit tests drive one node by hand, playing the store's replies; scenario tests run three lease-mode data
nodes against a three-node `raft` store group in `LeaseNetwork` (virtual time, invariants checked on
both groups after every step).
"""

from __future__ import annotations

import pytest

from cluster.core.config import NodeConfig
from cluster.core.election.lease import LEASE_GUARD, lease_record, parse_record
from cluster.core.member import Ready
from tests.cluster.core_network import roles, single_node
from tests.cluster.lease_network import LeaseNetwork

TTL = 0.6
STORE = ("s1", "s2", "s3")
FAST = {"heartbeat_interval": 0.05, "lease_ttl": TTL, "leader_quorum_timeout": 2.0}


def lease_node(now: float = 0.0, **overrides):
    settings = {"store": STORE, "lease_ttl": TTL, **overrides}
    return single_node(mode="lease", now=now, **settings)


def only_request(ready: Ready) -> tuple[str, dict]:
    assert len(ready.requests) == 1, ready.requests
    return ready.requests[0]


def answer(request: dict, **fields) -> dict:
    return {"id": request["id"], **fields}


# ---------------------------------------------------------------------- configuration and records


def test_lease_mode_needs_a_store() -> None:
    with pytest.raises(ValueError, match="mode 'lease' needs the external store's members"):
        NodeConfig(node_id="n1", peers=("n2",), mode="lease")
    with pytest.raises(ValueError, match="store members must not be cluster members"):
        NodeConfig(node_id="n1", peers=("n2",), mode="lease", store=("n2",))


def test_lease_bugs_belong_to_the_lease_mode() -> None:
    with pytest.raises(ValueError, match="applies only to mode lease"):
        NodeConfig(node_id="n1", peers=("n2",), mode="raft", bugs={"no-fencing-token"})


def test_parse_record_accepts_only_lease_records() -> None:
    assert parse_record(lease_record("n2", 7, 3)) == ("n2", 7)
    assert parse_record(None) == (None, 0)
    assert parse_record({"holder": "n2", "generation": True, "renewal": 0}) == (None, 0)
    assert parse_record("n2") == (None, 0)


# ---------------------------------------------------------------------- one node, the store played by hand


def test_an_empty_key_is_acquired_and_its_generation_becomes_the_term() -> None:
    node, ready = lease_node()
    member, read = only_request(ready)
    assert (member, read["op"], read["key"]) == ("s1", "read", "leader")
    ready = node.store_reply("s1", answer(read, ok=True, value=None, lsn=None), 0.01, 0.01)
    member, cas = only_request(ready)
    assert cas["op"] == "cas" and cas["value"] == [None, lease_record("n1", 1)]
    ready = node.store_reply("s1", answer(cas, ok=True, value=None, lsn=[1, 2]), 0.02, 0.02)
    assert roles(ready.journal) == [("candidate", 1, None), ("leader", 1, "n1")]
    assert node.term == 1 and node.status()["mode"] == "lease"
    # Any node may win, so the new leader synchronises with a majority before serving.
    assert {m["type"] for _, m in ready.messages} >= {"FollowerLSNRequest"}


def test_a_record_held_by_another_node_is_followed_and_taken_only_after_the_ttl() -> None:
    node, ready = lease_node()
    _, read = only_request(ready)
    held = lease_record("n2", 4, 0)
    ready = node.store_reply("s1", answer(read, ok=True, value=held, lsn=[1, 5]), 0.0, 0.0)
    assert roles(ready.journal) == [("follower", 4, "n2")]
    assert ready.requests == []
    now = 0.0
    while True:  # poll: the same value keeps coming back, unrenewed
        now = node.election.poll_at
        _, request = only_request(node.tick(now, now))
        ready = node.store_reply("s1", answer(request, ok=True, value=held, lsn=[1, 5]), now, now)
        if ready.requests:
            break
    _, cas = only_request(ready)
    assert now >= TTL, "a watcher must see the value unchanged for a whole ttl before taking it"
    assert cas["value"] == [held, lease_record("n1", 5)]


def test_a_renewed_record_is_never_taken() -> None:
    node, ready = lease_node()
    _, request = only_request(ready)
    renewal = 0
    now = 0.0
    for _ in range(20):
        ready = node.store_reply("s1", answer(request, ok=True, value=lease_record("n2", 1, renewal)), now, now)
        assert all(r["op"] == "read" for _, r in ready.requests)
        renewal += 1
        now = node.election.poll_at
        _, request = only_request(node.tick(now, now))
    assert now > 2 * TTL and node.role == "follower"


def test_not_leader_replies_are_followed_to_the_store_leader() -> None:
    node, ready = lease_node()
    _, read = only_request(ready)
    ready = node.store_reply("s1", answer(read, ok=False, error="not-leader", definite=True, leader="s3"),
                             0.0, 0.0)
    member, again = only_request(ready)
    assert member == "s3" and again["op"] == "read" and again["id"] != read["id"]
    stale = node.store_reply("s1", answer(read, ok=True, value=None), 0.0, 0.0)
    assert stale.requests == [] and stale.journal == [], "a reply to an abandoned call is ignored"


def won(now: float = 0.0):
    node, ready = lease_node(now=now)
    _, read = only_request(ready)
    ready = node.store_reply("s1", answer(read, ok=True, value=None), now, now)
    _, cas = only_request(ready)
    node.store_reply("s1", answer(cas, ok=True, value=None), now, now)
    assert node.role == "leader"
    return node


def test_a_leader_renews_and_steps_down_when_no_renewal_succeeds_within_its_lease() -> None:
    node = won()
    renew_at = node.election.renew_at
    _, renew = only_request(node.tick(renew_at, renew_at))
    assert renew["value"] == [lease_record("n1", 1, 0), lease_record("n1", 1, 1)]
    node.store_reply("s1", answer(renew, ok=True, value=None), renew_at + 0.01, renew_at + 0.01)
    lease_end = renew_at + TTL * (1 - LEASE_GUARD)
    assert node.election.lease_until == pytest.approx(lease_end)
    now, stepped_down = renew_at, None
    while stepped_down is None:  # the store stops answering
        ready = node.tick(now, now)
        if roles(ready.journal):
            stepped_down = now
            assert roles(ready.journal) == [("follower", 1, None)]
        now = ready.next_tick
        assert now is not None
    assert stepped_down == pytest.approx(lease_end)


def test_cas_mismatch_on_renewal_makes_the_leader_read_and_step_down_for_the_new_holder() -> None:
    node = won()
    now = node.election.renew_at
    _, renew = only_request(node.tick(now, now))
    ready = node.store_reply("s1", answer(renew, ok=False, error="cas-mismatch", definite=True), now, now)
    _, read = only_request(ready)
    assert read["op"] == "read" and node.role == "leader"
    ready = node.store_reply("s1", answer(read, ok=True, value=lease_record("n3", 2)), now, now)
    assert roles(ready.journal) == [("follower", 2, "n3")]


def test_lease_reads_are_local_only_while_the_lease_holds() -> None:
    node = won()
    election = node.election
    assert election.lease_read_allowed(0.1, 0.1)
    assert not election.lease_read_allowed(TTL * (1 - LEASE_GUARD), 0.0)


def test_lease_own_clock_trusts_the_wall_clock() -> None:
    node, ready = lease_node(bugs={"lease-own-clock"})
    _, read = only_request(ready)
    ready = node.store_reply("s1", answer(read, ok=True, value=None), 0.0, 0.0)
    _, cas = only_request(ready)
    node.store_reply("s1", answer(cas, ok=True, value=None), 0.0, 0.0)
    # Monotonic time is far past the ttl, but the wall clock was moved back: the lease still "holds".
    late = TTL  # past the lease (it ends at TTL * (1 - LEASE_GUARD)), before the quorum timeout
    node.tick(late, -5.0)
    assert node.role == "leader" and node.election.lease_read_allowed(late, -5.0)
    correct = won()
    correct.tick(late, -5.0)
    assert correct.role == "follower"


# ---------------------------------------------------------------------- data nodes + store group


def test_elect_replicate_fail_over_and_recover() -> None:
    net = LeaseNetwork(seed=3, **FAST).start()
    first = net.wait_for_leader(5)
    assert net.lease_record()["holder"] == first
    assert net.nodes[first].term == net.lease_record()["generation"]
    for value in range(5):
        assert net.call(first, {"op": "write", "key": "x", "value": value})["ok"]
    first_term = net.nodes[first].term
    killed_at = net.now
    net.crash(first)
    second = net.wait_for_leader(5, among=[n for n in net.ids if n != first])
    failover = net.now - killed_at
    assert TTL <= failover < 2 * TTL, failover  # the key must expire first; then one poll and a CAS
    assert net.nodes[second].term == net.lease_record()["generation"] == first_term + 1
    read = net.call(second, {"op": "read", "key": "x"})
    assert read["ok"] and read["value"] == 4
    assert net.call(second, {"op": "write", "key": "x", "value": 5})["ok"]
    net.start_node(first)
    net.run(2 * TTL)
    assert net.nodes[first].role == "follower" and net.nodes[first].leader == second
    assert net.nodes[first].commit_index == net.nodes[second].commit_index
    assert net.violations == [] and net.store.violations == []


def test_a_store_leader_crash_does_not_depose_the_data_leader() -> None:
    net = LeaseNetwork(seed=5, **FAST).start()
    lead = net.wait_for_leader(5)
    term = net.nodes[lead].term
    net.store.crash(net.store.leader())
    net.run(3 * TTL)
    assert net.leader() == lead and net.nodes[lead].term == term, net.describe()
    assert net.lease_record()["renewal"] > 0
    assert net.violations == [] and net.store.violations == []


def test_a_leader_cut_from_the_store_steps_down_before_another_can_lead() -> None:
    net = LeaseNetwork(seed=7, **FAST).start()
    lead = net.wait_for_leader(5)
    net.cut_from_store(lead)
    leaders_at = []
    for _ in range(300):
        net.run(0.01)
        leaders_at.append(sorted(net.leaders()))
        assert len(net.leaders()) <= 1, f"two leaders at once: {net.describe()}"
    assert net.leader() not in (None, lead)
    assert net.violations == [] and net.store.violations == []


def test_same_seed_same_journals() -> None:
    def run() -> dict:
        net = LeaseNetwork(seed=11, **FAST).start()
        lead = net.wait_for_leader(5)
        net.call(lead, {"op": "write", "key": "k", "value": 1})
        net.crash(lead)
        net.run(2 * TTL)
        return net.journals
    assert run() == run()


# ---------------------------------------------------------------------- known bugs


def stale_read_under_clock_skew(bugs: set[str]) -> tuple[LeaseNetwork, dict]:
    """A leader whose wall clock is moved back 5 s is cut from everyone; another leader takes the key and
    acknowledges a write; a client still reaching the old leader reads."""
    net = LeaseNetwork(seed=2, bugs=bugs, **FAST).start()
    old = net.wait_for_leader(5)
    assert net.call(old, {"op": "write", "key": "x", "value": 1})["ok"]
    net.wall_offset[old] = -5.0
    net.isolate(old)
    net.cut_from_store(old)
    new = net.wait_for_leader(5, among=[n for n in net.ids if n != old])
    assert net.call(new, {"op": "write", "key": "x", "value": 2})["ok"]
    return net, net.call(old, {"op": "read", "key": "x"}, timeout=0.1)


def test_lease_own_clock_serves_a_stale_read_under_clock_skew() -> None:
    net, read = stale_read_under_clock_skew({"lease-own-clock"})
    assert read is not None and read["ok"] and read["value"] == 1
    assert any("stale read" in v for v in net.violations), net.violations


def test_without_the_bug_the_skewed_leader_has_stepped_down() -> None:
    net, read = stale_read_under_clock_skew(set())
    assert read is not None and not read["ok"] and read["error"] == "not-leader"
    assert net.violations == []


def deposed_leader_delayed_write(bugs: set[str]) -> LeaseNetwork:
    """The leader's AppendEntries of a write are delayed in the network while it is cut off and loses its
    lease; another leader commits writes; then the delayed messages arrive (the fencing-token scenario)."""
    net = LeaseNetwork(seed=4, bugs=bugs, **FAST).start()
    old = net.wait_for_leader(5)
    assert net.call(old, {"op": "write", "key": "x", "value": 1})["ok"]
    net.send_request(old, {"op": "write", "key": "x", "value": 99})
    delayed = [e for e in net.inflight if e.src == old and e.msg["type"] == "AppendEntries"]
    assert delayed
    net.drop_where(lambda e: e.src == old)
    net.isolate(old)
    net.cut_from_store(old)
    new = net.wait_for_leader(5, among=[n for n in net.ids if n != old])
    assert net.call(new, {"op": "write", "key": "x", "value": 2})["ok"]
    net.heal()
    net.inflight[:0] = delayed
    net.run(0.5)
    return net


def test_no_fencing_token_lets_a_deposed_leader_overwrite_committed_entries() -> None:
    net = deposed_leader_delayed_write({"no-fencing-token"})
    # A follower replaced committed entries of term 2 by the deposed leader's term-1 write ...
    overwritten = [e for journal in net.journals.values() for e in journal
                   if e["event"] == "append" and e.get("truncated") and e["first_lsn"][0] == 1]
    assert overwritten, net.describe()
    # ... and the invariants see committed data change under it (it re-applies what it had applied).
    assert net.violations, "the overwrite of committed entries went unnoticed"


def test_with_the_fencing_token_the_delayed_writes_are_refused() -> None:
    net = deposed_leader_delayed_write(set())
    assert net.violations == [] and net.store.violations == []


def test_a_leader_without_a_data_quorum_leaves_the_key_to_the_others() -> None:
    """Cut from both data followers but not from the store, the leader steps down (no quorum) and must
    not grab its own record back at once: a follower takes the next generation and the cluster serves."""
    net = LeaseNetwork(seed=9, **{**FAST, "leader_quorum_timeout": 0.5}).start()
    old = net.wait_for_leader(5)
    net.isolate(old)
    new = net.wait_for_leader(5, among=[n for n in net.ids if n != old])
    assert net.call(new, {"op": "write", "key": "x", "value": 1})["ok"]
    assert net.lease_record()["holder"] == new
    assert net.violations == [] and net.store.violations == []
