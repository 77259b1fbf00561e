"""NATS JetStream under chaos through the ``harness run`` command line, as a user types it (issue 26,
item 4): three servers under partitions, kills and pauses are valid with the log checker valid, and the
deliberately unsafe variant (streams of one replica in memory) is caught as lost appends.

The runs are judged by the checkers directly (``--analysis direct``); the Spark pipeline is tested on its
own (tests/harness/test_analysis_pipeline.py).
"""

from __future__ import annotations

import json

import pytest

from adapters.nats.install import NatsBinary
from tests.adapters.conftest import harness_run

pytestmark = pytest.mark.docker

NODES = ("n1", "n2", "n3")


def test_three_servers_under_partition_kill_and_pause_are_valid(
    docker_engine, nats_binary: NatsBinary, run_ids, tmp_path
) -> None:
    code, run_dir, results = harness_run(
        tmp_path / "store", "--db", "nats", "--nodes", "3", "--workload", "log",
        "--nemesis", "partition,kill,pause", "--time-limit", "30", "--seed", "101",
    )
    summaries = {name: verdict["summary"] for name, verdict in results["checkers"].items()}
    assert code == 0 and results["valid"] is True, summaries
    assert results["checkers"]["log"]["valid"] is True, summaries
    assert results["checkers"]["lsn-monotonicity"]["valid"] is True, summaries
    assert set(results["not_applicable"]) == {"single-leader-per-term"}

    test = json.loads((run_dir / "test.json").read_text())
    assert test["command"].startswith("harness run --db nats --nodes 3 --workload log "
                                      "--nemesis partition,kill,pause --time-limit 30")
    assert test["versions"]["db"]["sha256"] == nats_binary.sha256
    stats = results["stats"]
    assert all(stats["faults_applied"].get(f, 0) >= 1 for f in ("partition", "kill", "start", "heal")), stats
    assert stats["completed"].get("ok", 0) > 20, stats["completed"]
    lines = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    appended = [e for e in lines if e.get("f") == "append" and e["type"] == "ok"]
    assert appended and all(e["group"] == e["key"] and e["value"][0] >= 1 for e in appended)
    final = [e for e in lines if e.get("final") and e["type"] == "invoke"]
    assert {e["node"] for e in final} == set(NODES) and all(e["f"] == "poll" for e in final)
    statuses = [e["value"] for e in lines if e.get("f") == "status" and e["type"] == "ok"]
    assert any(s.get("groups") for s in statuses), "no status reported a stream's group"
    for node in NODES:
        assert "Starting nats-server" in (run_dir / "nodes" / node / "nats.log").read_text()
    assert run_ids and len(run_ids) == 1


def test_streams_of_one_replica_in_memory_lose_acknowledged_appends_under_kills(
    docker_engine, nats_binary: NatsBinary, run_ids, tmp_path
) -> None:
    code, run_dir, results = harness_run(
        tmp_path / "store", "--db", "nats", "--db-opt", "replicas=1", "--db-opt", "storage=memory",
        "--nodes", "3", "--workload", "log", "--nemesis", "kill", "--time-limit", "30", "--seed", "201",
        # A stream of one replica on a killed server has no leader until that server is back; the final phase
        # need not wait 30 s for each such stream to elect one (249 s in CI before, 62 s with this).
        "--recovery-timeout", "5",
    )
    summaries = {name: verdict["summary"] for name, verdict in results["checkers"].items()}
    assert code == 1 and results["valid"] is False, summaries
    assert results["checkers"]["log"]["valid"] is False, summaries
    assert run_dir.parent.name == "nats-1-memory-log-kill"
