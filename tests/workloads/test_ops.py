"""The client binding: where a worker's operations go first (``workloads.ops.home_node``, ``bind``)."""

from __future__ import annotations

import pytest

from workloads.ops import CLIENT_BINDINGS, Op, bind, home_node

NODES = ("n1", "n2", "n3", "n4", "n5")


def test_node_binding_puts_slot_s_at_node_s_mod_n() -> None:
    assert [home_node("node", slot, NODES) for slot in range(12)] == [*NODES, *NODES, "n1", "n2"]


def test_leader_binding_leaves_the_choice_to_the_client() -> None:
    assert {home_node("leader", slot, NODES) for slot in range(10)} == {None}
    assert CLIENT_BINDINGS == ("leader", "node")


def test_bind_sends_an_op_to_its_home_unless_it_names_its_node() -> None:
    op = Op("read", "k1", think=0.2)
    assert bind(op, "n3") == Op("read", "k1", node="n3", think=0.2)
    assert bind(op, None) is op
    pinned = Op("read", "k1", node="n5", local=True)
    assert bind(pinned, "n3") is pinned


def test_an_unknown_binding_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown client binding 'random'; valid: leader, node"):
        home_node("random", 0, NODES)
