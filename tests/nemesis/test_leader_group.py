"""The leader-group selector: which node a fault aimed at "the leader" hits where the system has a leader
per group (``nemesis.faults.choose_leader``), and which faults need one (``aims_at_leader``)."""

from __future__ import annotations

import random

import pytest

from nemesis.faults import (
    LEADER_GROUP_SELECTORS,
    ClockBump,
    ClockReset,
    Heal,
    Kill,
    Loss,
    Partition,
    Pause,
    choose_leader,
    parse_leader_group,
    selected_group,
)
from nemesis.generator import PACKAGES, NemesisOptions

NODES = ("n1", "n2", "n3", "n4", "n5")
# The cluster-level leader n1 is primary of no shard; n3 is primary of three, n4 of one.
LEADERS = {None: "n1", "shard-0": "n3", "shard-1": "n4", "shard-2": "n3", "shard-3": "n3"}


def test_most_is_the_node_leading_the_most_groups() -> None:
    assert choose_leader("most", LEADERS, NODES) == ("n3", None, None)


def test_most_breaks_ties_for_the_cluster_level_leader_then_by_node_order() -> None:
    assert choose_leader("most", {None: "n2", "a": "n4", "b": "n2", "c": "n4"}, NODES)[0] == "n2"
    assert choose_leader("most", {"a": "n4", "b": "n2"}, NODES)[0] == "n2"  # no cluster-level group
    assert choose_leader("most", {None: "n5"}, NODES)[0] == "n5"  # a single group: its leader


def test_a_named_group_and_the_cluster_level_group() -> None:
    assert choose_leader("shard-1", LEADERS, NODES) == ("n4", "shard-1", None)
    assert choose_leader("group:shard-1", LEADERS, NODES) == ("n4", "shard-1", None)
    assert choose_leader("cluster", LEADERS, NODES) == ("n1", None, None)
    node, group, reason = choose_leader("shard-9", LEADERS, NODES)
    assert (node, group) == (None, "shard-9") and reason is not None and "'shard-9'" in reason
    node, group, reason = choose_leader("shard-0", {"shard-0": None}, NODES)
    assert node is None and reason == "no leader of group 'shard-0' is known"


def test_random_draws_a_known_group_from_the_rng_alone() -> None:
    drawn = [choose_leader("random", LEADERS, NODES, random.Random(seed))[1:] for seed in range(40)]
    assert {group for group, _ in drawn} == set(LEADERS)  # every group, the cluster-level one included
    again = [choose_leader("random", LEADERS, NODES, random.Random(seed))[1:] for seed in range(40)]
    assert drawn == again
    for seed in range(10):  # the node is the drawn group's leader
        node, group, _ = choose_leader("random", LEADERS, NODES, random.Random(seed))
        assert node == LEADERS[group]
    with pytest.raises(ValueError, match="rng"):
        choose_leader("random", LEADERS, NODES)


def test_nothing_known_gives_a_reason_never_a_node() -> None:
    for selector in (*LEADER_GROUP_SELECTORS, "shard-0"):
        node, _, reason = choose_leader(selector, {}, NODES, random.Random(1))
        assert node is None and reason


def test_selectors_are_parsed_in_one_sentence() -> None:
    assert parse_leader_group(" most ") == "most"
    assert [selected_group(s) for s in ("most", "random", "cluster", "q1", "group:random")] == [
        None, None, None, "q1", "random"]
    for bad in ("", "  ", "group:", None, 3):
        with pytest.raises(ValueError, match="--leader-group must be most, random, cluster"):
            parse_leader_group(bad)


def test_aims_at_leader_names_exactly_the_faults_resolved_at_run_time() -> None:
    from nemesis.faults import aims_at_leader

    assert aims_at_leader(Partition("isolate", target="leader"))
    assert aims_at_leader(Kill("leader")) and aims_at_leader(Pause("followers"))
    assert aims_at_leader(ClockBump(deltas={"leader": -3.0}))
    assert not aims_at_leader(Kill(("n1",))) and not aims_at_leader(Heal()) and not aims_at_leader(ClockReset("all"))
    assert not aims_at_leader(Loss(("n1", "n2"), 0.1))
    assert not aims_at_leader(ClockBump(deltas={"n2": 1.0}))
    # Every package that draws "leader" faults draws faults aims_at_leader recognises.
    options = NemesisOptions()
    rng = random.Random(7)
    for name in ("leader-clock", "leader-churn"):
        for _ in range(20):
            step = PACKAGES[name].fault(rng, NODES, options)
            steps = step if isinstance(step, tuple) else (step,)
            assert all(aims_at_leader(fault) for fault in steps), (name, steps)
