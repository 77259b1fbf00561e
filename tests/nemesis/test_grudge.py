"""Grudges: the partition shapes keep their promises for every cluster size and every seed."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemesis import grudge as g

FIVE = ["n1", "n2", "n3", "n4", "n5"]


def cluster(min_size: int = 2, max_size: int = 9) -> st.SearchStrategy[list[str]]:
    return st.integers(min_size, max_size).map(lambda n: [f"n{i}" for i in range(1, n + 1)])


seeds = st.integers(0, 2**32)


def test_halves_of_five_splits_two_and_three_in_order() -> None:
    assert g.halves(FIVE) == {
        "n1": frozenset({"n3", "n4", "n5"}),
        "n2": frozenset({"n3", "n4", "n5"}),
        "n3": frozenset({"n1", "n2"}),
        "n4": frozenset({"n1", "n2"}),
        "n5": frozenset({"n1", "n2"}),
    }


@given(cluster(), seeds)
def test_random_halves_are_two_components_of_floor_and_ceil(nodes: list[str], seed: int) -> None:
    grudge = g.halves(nodes, random.Random(seed))
    parts = g.components(grudge, nodes)
    assert sorted(len(p) for p in parts) == [len(nodes) // 2, len(nodes) - len(nodes) // 2]
    assert g.is_symmetric(grudge)


@given(cluster(), seeds)
def test_isolate_cuts_one_node_and_leaves_the_rest_connected(nodes: list[str], seed: int) -> None:
    node = random.Random(seed).choice(nodes)
    grudge = g.isolate(nodes, node)
    rest = [n for n in nodes if n != node]
    assert g.view(grudge, node, nodes) == {node}
    assert all(not g.receives(grudge, other, node) for other in rest)
    assert all(g.connected(grudge, a, b) for a in rest for b in rest)
    assert sorted(g.components(grudge, nodes)) == sorted([[node], rest])


@given(cluster(min_size=4, max_size=15), seeds)
def test_majorities_ring_gives_every_node_its_own_majority(nodes: list[str], seed: int) -> None:
    grudge = g.majorities_ring(nodes, random.Random(seed))
    views = [g.view(grudge, n, nodes) for n in nodes]
    assert all(len(v) >= g.majority(len(nodes)) for v in views)
    assert len(set(views)) == len(nodes), "two nodes see the same majority"
    assert all(len(v) < len(nodes) for v in views), "somebody sees everyone: not a partition"
    assert g.is_symmetric(grudge)
    g.validate(grudge, nodes)


def test_majorities_ring_of_five_is_a_ring_of_neighbours() -> None:
    grudge = g.majorities_ring(FIVE)
    assert g.view(grudge, "n1", FIVE) == {"n5", "n1", "n2"}
    assert g.view(grudge, "n3", FIVE) == {"n2", "n3", "n4"}


@given(cluster(min_size=3), seeds)
def test_bridge_keeps_one_node_seeing_both_sides(nodes: list[str], seed: int) -> None:
    grudge = g.bridge(nodes, random.Random(seed))
    bridges = [n for n in nodes if g.view(grudge, n, nodes) == set(nodes)]
    assert len(bridges) == 1
    middle = bridges[0]
    others = [n for n in nodes if n != middle]
    assert all(g.connected(grudge, middle, n) for n in others)
    sides = g.components(grudge, others)
    assert sorted(map(len, sides)) == sorted([len(nodes) // 2, len(nodes) - len(nodes) // 2 - 1])
    left, right = sides
    assert all(not g.receives(grudge, a, b) and not g.receives(grudge, b, a) for a in left for b in right)


def test_one_way_drops_only_one_direction() -> None:
    grudge = g.one_way("n1", ["n2", "n3"])
    assert grudge == {"n2": frozenset({"n1"}), "n3": frozenset({"n1"})}
    assert not g.receives(grudge, "n2", "n1")
    assert g.receives(grudge, "n1", "n2")
    assert not g.is_symmetric(grudge)
    with pytest.raises(ValueError, match="both a source and a destination"):
        g.one_way("n1", ["n1", "n2"])


def test_ping_pong_cuts_only_the_pair() -> None:
    grudge = g.ping_pong("n1", "n2")
    assert not g.connected(grudge, "n1", "n2")
    assert all(g.connected(grudge, a, "n3") for a in ("n1", "n2"))
    assert g.components(grudge, FIVE) == [FIVE]  # still one component through n3..n5
    with pytest.raises(ValueError, match="two different nodes"):
        g.ping_pong("n1", "n1")


@given(st.lists(st.integers(1, 4), min_size=1, max_size=4))
def test_complete_matches_the_components_it_was_given(sizes: list[int]) -> None:
    names = iter(f"n{i}" for i in range(1, 100))
    groups = [[next(names) for _ in range(size)] for size in sizes]
    nodes = [n for group in groups for n in group]
    grudge = g.complete(groups)
    assert g.components(grudge, nodes) == groups
    assert g.is_symmetric(grudge)


def test_complete_rejects_a_node_in_two_components() -> None:
    with pytest.raises(ValueError, match="duplicate node names: n2"):
        g.complete([["n1", "n2"], ["n2", "n3"]])


def test_heal_drops_nothing() -> None:
    healed = g.heal(FIVE)
    assert healed == dict.fromkeys(FIVE, frozenset())
    assert g.components(healed, FIVE) == [FIVE]


@given(cluster(min_size=4), seeds)
def test_random_shapes_are_deterministic_per_seed(nodes: list[str], seed: int) -> None:
    for build in (g.halves, g.bridge, g.majorities_ring):
        assert build(nodes, random.Random(seed)) == build(nodes, random.Random(seed))


def test_a_set_of_nodes_gives_the_same_result_as_the_sorted_list() -> None:
    assert g.halves(set(FIVE), random.Random(3)) == g.halves(sorted(FIVE), random.Random(3))


def test_too_small_clusters_are_rejected_with_the_size() -> None:
    with pytest.raises(ValueError, match="at least 4 nodes, got 3"):
        g.majorities_ring(FIVE[:3])
    with pytest.raises(ValueError, match="at least 3 nodes, got 2"):
        g.bridge(FIVE[:2])
    with pytest.raises(ValueError, match="cannot isolate 'n9'"):
        g.isolate(FIVE, "n9")


def test_validate_names_what_is_wrong() -> None:
    assert g.validate({"n1": ["n2"]}, FIVE) == {"n1": frozenset({"n2"})}
    with pytest.raises(ValueError, match="unknown node\\(s\\) n7"):
        g.validate({"n7": []}, FIVE)
    with pytest.raises(ValueError, match="drops unknown node\\(s\\) n8"):
        g.validate({"n1": ["n8"]}, FIVE)
    with pytest.raises(ValueError, match="drops its own packets"):
        g.validate({"n1": ["n1"]}, FIVE)
    with pytest.raises(ValueError, match="must be a list of node names"):
        g.validate({"n1": "n2"}, FIVE)


@given(cluster(min_size=4), seeds)
def test_json_round_trip(nodes: list[str], seed: int) -> None:
    grudge = g.majorities_ring(nodes, random.Random(seed))
    assert g.from_json(g.to_json(grudge)) == grudge
    with pytest.raises(ValueError):
        g.from_json({"n1": "n2"})
