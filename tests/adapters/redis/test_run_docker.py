"""Redis with Sentinel under partitions through the ``harness run`` command line, as a user types it: three
nodes, one short run judged by the checkers directly. What it must show: the run completes with a verdict,
clients wrote through the master (ok writes and cas), statuses report the master set as one group with a
leader in a config epoch, every node got its final reads, both logs were collected, and teardown left no
container or network behind (the ``docker_engine`` fixture checks that at the end of the session; here the
run's own containers are looked for by its run id).

Whether the run is valid depends on where the partitions fall: the default Sentinel setup loses
acknowledged writes when the master is cut off (docs/systems/redis.md), so the verdict itself is not
asserted; its checkers must each have judged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.redis.install import RedisBundle
from tests.adapters.conftest import harness_run, left_behind

pytestmark = pytest.mark.docker

NODES = ("n1", "n2", "n3")


def test_three_nodes_under_partitions_complete_with_writes_through_the_master(
    docker_engine, redis_bundle: RedisBundle, run_ids, tmp_path: Path
) -> None:
    code, run_dir, results = harness_run(tmp_path / "store", "--db", "redis", "--nodes", "3",
                                         "--nemesis", "partition", "--time-limit", "20", "--seed", "27")
    summaries = {name: verdict["summary"] for name, verdict in results["checkers"].items()}
    assert code in (0, 1) and results["valid"] in (True, False), summaries
    assert results["valid"] is (code == 0)
    assert {"durability", "linearizable", "single-leader-per-term"} <= set(results["checkers"])
    assert all(v["valid"] in (True, False) for v in results["checkers"].values()), summaries
    assert set(results["not_applicable"]) == {"lsn-monotonicity"}

    test = json.loads((run_dir / "test.json").read_text())
    assert test["versions"]["db"]["sha256"] == redis_bundle.sha256
    lines = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    ok = [e for e in lines if e["type"] == "ok" and isinstance(e["process"], int)]
    writes = [e for e in ok if e["f"] == "write"]
    assert len(writes) > 20 and all(e["node"] in NODES for e in writes)
    assert any(e["f"] == "cas" for e in ok) and any(e["f"] == "read" and e["value"] is not None for e in ok)
    statuses = [e["value"] for e in ok if e["f"] == "status"]
    leaders = [(s["node"], g["term"]) for s in statuses for g in s["groups"]
               if g["group"] == "chaos" and g["role"] == "leader"]
    assert ("n1", 0) in leaders, "the initial master n1 never reported leading the group in config epoch 0"
    assert all(s["term"] is None and s["role"] == "follower" for s in statuses)
    final: dict[int, dict] = {}  # process -> its final read's invoke (completions do not repeat "final")
    answered = set()
    for e in lines:
        if e.get("final") and e["type"] == "invoke":
            final[e["process"]] = e
        elif e["process"] in final and e["type"] == "ok":
            answered.add(final.pop(e["process"])["node"])
    assert answered == set(NODES), "some node answered no final read (caught_up never true?)"
    for node in NODES:
        assert "Ready to accept connections" in (run_dir / "nodes" / node / "redis.log").read_text()
        assert "+monitor master chaos" in (run_dir / "nodes" / node / "sentinel.log").read_text()

    harness_log = (run_dir / "harness.log").read_text()
    assert "teardown: stop and wipe the DB: done" in harness_log
    assert run_ids and len(run_ids) == 1
    assert left_behind(docker_engine, run_ids[0]) == []
