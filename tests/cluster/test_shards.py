"""Storage shards with primaries (cluster/core/shards.py, docs/shards.md): assignment by the cluster leader,
primary lease ids and their fencing, per-shard LSNs, routing, recovery, and the two known shard bugs.

The driver is tests/cluster/core_network.py's CoreNetwork; its Observer judges one group only, so these
tests check the per-group invariants themselves (`group_violations`)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from cluster.core.config import NodeConfig
from cluster.core.member import Node
from cluster.core.shards import LEASE_STRIDE, SHARD_ASSIGNMENT, ShardedNode, group_name, node_class, shard_of
from cluster.core.storage import recover
from tests.cluster.core_network import FAST, FIRST, CoreNetwork


def sharded(size: int = 5, shards: int = 4, assignment: str = "leader-is-master-all", mode: str = "blazingmq",
            bugs: tuple[str, ...] = (), **extra: Any) -> CoreNetwork:
    net = CoreNetwork(size, mode=mode, per_node=FIRST, bugs=bugs, shards=shards, assignment=assignment,
                      **FAST, **extra).start()
    net.wait_for_leader()
    assert net.run_until(lambda: all_assigned(net), 5.0), net.describe()
    return net


def groups(net: CoreNetwork, node_id: str) -> list[dict]:
    node = net.nodes[node_id]
    assert node is not None
    return node.status()["groups"]


def primaries(net: CoreNetwork) -> dict[str, str]:
    """group -> the up node that leads it with the highest lease id."""
    found: dict[str, tuple[int, str]] = {}
    for node_id, node in net.nodes.items():
        if node is None:
            continue
        for group in node.status()["groups"]:
            if group["role"] == "leader" and group["term"] > found.get(group["group"], (0, ""))[0]:
                found[group["group"]] = (group["term"], node_id)
    return {g: n for g, (_, n) in sorted(found.items())}


def all_assigned(net: CoreNetwork) -> bool:
    """Every shard has a primary that has synchronised and committed its lease's first entry."""
    leader = net.leader()
    if leader is None:
        return False
    count = net.configs[leader].shards
    found = primaries(net)
    if len(found) != count:
        return False
    for group, node_id in found.items():
        replica = net.nodes[node_id].shards.replicas[int(group.split("-")[1])]
        if not (replica.accepting and replica.commit_index >= replica.term_start_index):
            return False
    return True


def group_violations(net: CoreNetwork) -> list[str]:
    """Per group: one leader per term, applied LSNs increasing on each node within each lifetime."""
    found = []
    leaders: dict[tuple[Any, int], str] = {}
    for node_id, journal in net.journals.items():
        last: dict[Any, list[int]] = {}
        for event in journal:
            group = event.get("group")
            if event["event"] == "start":
                last.clear()
            elif event["event"] == "role" and event["role"] == "leader":
                first = leaders.setdefault((group, event["term"]), node_id)
                if first != node_id:
                    found.append(f"{group} term {event['term']}: leaders {first} and {node_id}")
            elif event["event"] == "apply":
                if group in last and event["lsn"] <= last[group]:
                    found.append(f"{node_id} applied {event['lsn']} after {last[group]} in {group}")
                last[group] = event["lsn"]
    return found


def key_of_shard(index: int, shards: int = 4) -> str:
    return next(f"k{i}" for i in range(1000) if shard_of(f"k{i}", shards) == index)


def test_keys_map_to_shards_by_crc32_which_does_not_change() -> None:
    # Fixed values: a change of the hash would move every stored key to another shard.
    assert [shard_of(f"r{i}", 4) for i in range(8)] == [3, 1, 3, 1, 2, 0, 2, 0]
    assert shard_of("q0", 1) == 0
    assert group_name(3) == "shard-3"


def test_without_shards_nothing_names_a_group() -> None:
    net = CoreNetwork(3, per_node=FIRST, **FAST).start()
    leader = net.wait_for_leader()
    reply = net.call(leader, {"op": "write", "key": "x", "value": 1})
    assert reply is not None and reply["ok"] and "group" not in reply
    net.run(0.5)
    assert "groups" not in net.nodes[leader].status()
    assert not any("group" in event for journal in net.journals.values() for event in journal)
    assert not any("group" in record for disk in net.disks.values() for record in disk)
    assert not any(kind.startswith("Shard") for _, _, kind in net.traffic)


def test_leader_is_master_all_makes_the_leader_primary_of_every_shard() -> None:
    net = sharded()
    leader = net.leader()
    term = net.nodes[leader].term
    assert set(primaries(net).values()) == {leader}
    for node_id in net.ids:
        for group in groups(net, node_id):
            assert group["leader"] == leader
            assert term * LEASE_STRIDE < group["term"] < (term + 1) * LEASE_STRIDE
            assert group["role"] == ("leader" if node_id == leader else "follower")
    assert group_violations(net) == []


def test_least_assigned_spreads_the_shards_over_the_nodes() -> None:
    net = sharded(assignment="least-assigned")
    owners = list(primaries(net).values())
    assert len(set(owners)) == 4, owners  # five live nodes, four shards: one each
    assert group_violations(net) == []


@pytest.mark.parametrize("assignment", ["leader-is-master-all", "least-assigned"])
def test_a_request_is_served_by_its_shards_primary_and_redirected_elsewhere(assignment: str) -> None:
    net = sharded(assignment=assignment)
    owner = primaries(net)
    for index in range(4):
        key = key_of_shard(index)
        primary = owner[group_name(index)]
        other = next(n for n in net.ids if n != primary)
        refused = net.call(other, {"op": "write", "key": key, "value": index})
        assert refused == {**refused, "ok": False, "error": "not-leader", "leader": primary,
                           "group": group_name(index)}
        done = net.call(primary, {"op": "write", "key": key, "value": index})
        assert done["ok"] and done["group"] == group_name(index)
        lease = net.nodes[primary].shards.replicas[index].term
        assert done["lsn"][0] == lease  # the shard's own sequence, under its lease id
        read = net.call(other, {"op": "read", "key": key, "local": True})
        assert read["ok"] and read["value"] == index and read["lsn"] == done["lsn"]
    net.run(0.5)
    applied = [e for e in net.journals["n5"] if e["event"] == "apply" and e.get("group") is not None]
    assert {e["group"] for e in applied} == {group_name(i) for i in range(4)}
    assert group_violations(net) == []


def test_a_new_leader_reassigns_every_shard_with_higher_lease_ids_and_keeps_the_data() -> None:
    net = sharded()
    old = net.leader()
    keys = [key_of_shard(i) for i in range(4)]
    for value, key in enumerate(keys):
        assert net.call(old, {"op": "write", "key": key, "value": value})["ok"]
    old_leases = [g["term"] for g in groups(net, old)]
    net.crash(old)
    assert net.run_until(lambda: net.leader() not in (None, old) and all_assigned(net), 10.0), net.describe()
    new = net.leader()
    assert set(primaries(net).values()) == {new}
    new_leases = [g["term"] for g in groups(net, new)]
    assert all(n > o for n, o in zip(new_leases, old_leases, strict=True))
    for value, key in enumerate(keys):
        reply = net.call(new, {"op": "read", "key": key})
        assert reply["ok"] and reply["value"] == value
    net.start_node(old)
    net.run(1.0)
    assert all(g["role"] == "follower" and g["leader"] == new for g in groups(net, old))
    assert group_violations(net) == []


def test_a_lost_primary_is_replaced_and_a_restarted_one_does_not_take_its_lease_up_again() -> None:
    net = sharded(assignment="least-assigned")
    leader = net.leader()
    index, lost = next((int(g.split("-")[1]), n) for g, n in primaries(net).items() if n != leader)
    key = key_of_shard(index)
    assert net.call(lost, {"op": "write", "key": key, "value": "before"})["ok"]
    lease = net.nodes[lost].shards.replicas[index].term
    net.crash(lost)
    assert net.run_until(lambda: primaries(net).get(group_name(index)) not in (None, lost), 5.0), net.describe()
    successor = primaries(net)[group_name(index)]
    assert net.nodes[successor].shards.replicas[index].term > lease
    assert net.call(successor, {"op": "read", "key": key})["value"] == "before"
    assert [e for e in net.journals[leader] if e["event"] == "assign" and e["group"] == group_name(index)][-1][
        "primary"] == successor
    net.start_node(lost)
    net.run(1.0)
    replica = net.nodes[lost].shards.replicas[index]
    assert replica.role == "follower" and replica.leader == successor
    assert group_violations(net) == []


def test_a_primary_restarted_before_it_is_replaced_waits_for_a_new_lease() -> None:
    net = sharded(assignment="least-assigned")
    leader = net.leader()
    index, primary = next((int(g.split("-")[1]), n) for g, n in primaries(net).items() if n != leader)
    lease = net.nodes[primary].shards.replicas[index].term
    net.crash(primary)
    net.start_node(primary)  # back before the leader noticed: the table still names it under `lease`
    net.run(0.3)
    replica = net.nodes[primary].shards.replicas[index]
    assert replica.term == lease and replica.role == "follower"
    assert net.run_until(lambda: group_name(index) in primaries(net)
                         and net.nodes[primaries(net)[group_name(index)]].shards.replicas[index].term > lease, 5.0)
    assert group_violations(net) == []


def _replica_node(bugs: tuple[str, ...] = ()) -> Node:
    config = NodeConfig(node_id="n2", peers=("n1", "n3"), shards=2, bugs=frozenset(bugs))
    node = node_class(config)(config, recover([]), 0.0, 0.0, random.Random(1))
    node.start(0.0, 0.0)
    assert isinstance(node, ShardedNode)
    return node


def _append(term: int, group: str = "shard-0") -> dict:
    return {"type": "AppendEntries", "term": term, "prev_index": 0, "prev_lsn": [0, 0], "commit_index": 0,
            "entries": [{"lsn": [term, 1], "f": "noop", "key": None, "time": 0.0}], "group": group}


def _table(primary: str, lease: int) -> dict:
    return {"type": SHARD_ASSIGNMENT, "term": 1, "primaries": [primary, primary], "leases": [lease, lease]}


def test_replicas_refuse_a_primary_whose_lease_was_replaced() -> None:
    node = _replica_node()
    ready = node.receive("n1", _table("n3", 1002), 0.1, 0.1)
    assert [m for _, m in ready.messages if m["type"] == "ShardReport"][0]["leading"] == [0, 0]
    ready = node.receive("n1", _append(1001), 0.2, 0.2)  # the replaced primary n1, lease 1001
    [(peer, response)] = ready.messages
    assert peer == "n1" and response["group"] == "shard-0"
    assert response["success"] is False and response["term"] == 1002  # n1 learns it was replaced
    assert node.shards.replicas[0].log.last_index == 0
    ready = node.receive("n1", {"type": "LeaderHeartbeat", "term": 1001, "commit_index": 0,
                                "commit_lsn": [0, 0], "round": 1, "group": "shard-0"}, 0.3, 0.3)
    assert [m["type"] for _, m in ready.messages] == ["InvalidHeartbeat"]


def test_stale_primary_bug_replicas_accept_and_acknowledge_a_replaced_primary() -> None:
    node = _replica_node(bugs=("stale-primary",))
    node.receive("n1", _table("n3", 1002), 0.1, 0.1)
    ready = node.receive("n1", _append(1001), 0.2, 0.2)
    [(_, response)] = ready.messages
    assert response["success"] is True and response["term"] == 1001  # counted by the stale primary
    replica = node.shards.replicas[0]
    assert replica.log.last_lsn == [1001, 1] and replica.term == 1002 and replica.leader == "n3"


def test_a_stale_table_is_ignored_and_a_lower_lease_never_adopted() -> None:
    node = _replica_node()
    node.receive("n1", _table("n3", 2001), 0.1, 0.1)
    node.receive("n1", _table("n1", 1005), 0.2, 0.2)
    assert [(r.term, r.leader) for r in node.shards.replicas] == [(2001, "n3"), (2001, "n3")]


def test_shard_records_survive_a_restart() -> None:
    net = sharded(size=3)
    leader = net.leader()
    key = key_of_shard(2)
    assert net.call(leader, {"op": "write", "key": key, "value": 7})["ok"]
    net.run(0.3)
    follower = next(n for n in net.ids if n != leader)
    assert any(r.get("group") == "shard-2" for r in net.disks[follower])
    recovered = recover([dict(r) for r in net.disks[follower]])
    assert sorted(recovered.groups) == [group_name(i) for i in range(4)]
    assert all("group" not in r for records in recovered.groups.values() for r in records)
    net.crash(follower)
    net.start_node(follower)
    replica = net.nodes[follower].shards.replicas[2]
    assert replica.state_machine.read(key)[0] == 7


def test_primary_lsn_reuse_bug_numbers_a_shard_again_under_the_same_lease() -> None:
    net = sharded(bugs=("primary-lsn-reuse",))
    old = net.leader()
    key = key_of_shard(0)
    for value in range(3):
        assert net.call(old, {"op": "write", "key": key, "value": value})["ok"]
    lease = groups(net, old)[0]["term"]
    net.run(0.3)
    net.crash(old)
    assert net.run_until(lambda: net.leader() not in (None, old) and group_name(0) in primaries(net)
                         and primaries(net)[group_name(0)] != old, 10.0), net.describe()
    net.run(1.0)
    new = net.leader()
    assert groups(net, new)[0]["term"] == lease  # not bumped
    found = group_violations(net)
    assert any(f"in {group_name(0)}" in v and "applied" in v for v in found), found


def test_a_plain_node_refuses_shards_and_a_driver_builds_the_sharded_one() -> None:
    config = NodeConfig(node_id="n1", peers=("n2",), shards=2)
    with pytest.raises(ValueError, match="ShardedNode"):
        Node(config, recover([]), 0.0, 0.0, random.Random(1))
    assert node_class(config) is ShardedNode
    assert node_class(NodeConfig(node_id="n1", peers=("n2",))) is Node


def test_shard_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="shards must be"):
        NodeConfig(node_id="n1", peers=("n2",), shards=0)
    with pytest.raises(ValueError, match="unknown assignment"):
        NodeConfig(node_id="n1", peers=("n2",), shards=2, assignment="round-robin")
