"""The cluster plugin's storage shard options (``--db-opt shards=N``, ``assignment``; docs/shards.md) and the
``group`` a shard's reply gives a completion."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.cluster import create, name_parts, shard_settings, validate
from adapters.cluster.client import completion_of
from adapters.cluster.matrix import MATRIX_SHARDS, spec_for_bug
from cluster.client import Result, _result_of
from harness.db.plugin import DBContext
from harness.spec import TestSpec


def options(**given: Any) -> dict[str, Any]:
    return {"mode": "blazingmq", "bug": [], "core": {}, "shards": 1, "assignment": "leader-is-master-all", **given}


def test_default_shards_add_no_node_setting_and_no_name_part() -> None:
    assert shard_settings(options()) == {}
    assert name_parts(options()) == ["blazingmq"]
    assert name_parts(options(shards=4)) == ["blazingmq", "shards4"]
    assert name_parts(options(shards=4, assignment="least-assigned", bug=["stale-primary"])) == [
        "blazingmq", "shards4", "least-assigned", "bug-stale-primary"]


def test_shard_options_become_node_settings() -> None:
    db = create(options(shards=4, assignment="least-assigned"), DBContext(seed=1, nodes=("n1", "n2", "n3"), workload="register"))
    assert db.core == {"assignment": "least-assigned", "shards": 4}
    assert "--core-option" in db.node_args and "shards=4" in db.node_args
    assert create(options(), DBContext(seed=1, nodes=("n1", "n2", "n3"), workload="register")).core == {}


def test_a_shard_bug_needs_shards_and_a_setting_is_given_once() -> None:
    with pytest.raises(ValueError, match="needs --db-opt shards=N"):
        validate(options(bug=["stale-primary"]))
    validate(options(bug=["stale-primary"], shards=4))
    validate(options(bug=["primary-lsn-reuse"], core={"shards": 2}))
    with pytest.raises(ValueError, match="set shards once"):
        validate(options(shards=4, core={"shards": 2}))


def test_the_matrix_explores_a_shard_bug_with_shards() -> None:
    spec = spec_for_bug(TestSpec(db="cluster", platform="sim", seed=1), "stale-primary", "raft")
    assert spec.db_options["shards"] == MATRIX_SHARDS and spec.db_options["bug"] == ["stale-primary"]
    assert "shards" not in spec_for_bug(TestSpec(db="cluster", platform="sim", seed=1), "lsn-reuse", "raft").db_options


def test_a_completion_carries_the_group_of_a_shard_that_answered_and_no_group_otherwise() -> None:
    sharded = _result_of({"id": 1, "ok": True, "value": None, "lsn": [1001, 2], "group": "shard-3"}, "n1", 0)
    assert sharded.group == "shard-3"
    assert completion_of(sharded, "write") == {"type": "ok", "value": None, "lsn": [1001, 2], "node": "n1",
                                               "error": None, "group": "shard-3"}
    assert "group" not in completion_of(Result("ok", lsn=(3, 1), node="n1"), "write")


@pytest.mark.parametrize("assignment", ["leader-is-master-all", "least-assigned"])
def test_a_simulated_sharded_cluster_assigns_every_shard_and_copies_nothing_it_shares(assignment: str) -> None:
    from adapters.cluster.sim import World, WorldConfig

    journals = []
    for copy in (False, True):
        world = World(WorldConfig(nodes=3, core={"shards": 4, "assignment": assignment}, copy_messages=copy), 7)
        for node in world.process_ids:
            world.start(node)
        world.run_for(3.0)
        journals.append({node: list(world.journal_lines(node)) for node in world.ids})
        leaders = {g["group"]: g["leader"] for g in world.core(world.leader()).status()["groups"]}
        assert sorted(leaders) == [f"shard-{i}" for i in range(4)] and all(leaders.values())
        for node in world.ids:
            assert [g["leader"] for g in world.core(node).status()["groups"]] == list(leaders.values())
    assert journals[0] == journals[1]  # a JSON round trip of every message, record and reply changes nothing
