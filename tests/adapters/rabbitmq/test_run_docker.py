"""RabbitMQ quorum queues under partitions through the ``harness run`` command line, as a user types it: three
nodes, one short run judged by the checkers directly. What it must show: the cluster forms and the run
completes with a verdict from the durability and linearizability checkers, clients put and consumed through
the brokers (ok puts, ok consumes of messages, confirms recorded ``info``), statuses report the queue ``q0``
as a group with a leader, every node served its own final drain, the broker logs were collected, and
teardown left no container or network behind (the ``docker_engine`` fixture checks that at the end of the
session; here the run's own containers are looked for by its run id).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.rabbitmq.install import RabbitBundle
from tests.adapters.conftest import harness_run, left_behind

pytestmark = pytest.mark.docker

NODES = ("n1", "n2", "n3")


def test_three_brokers_under_partitions_complete_with_a_verdict(
    docker_engine, rabbitmq_bundle: RabbitBundle, run_ids, tmp_path: Path
) -> None:
    code, run_dir, results = harness_run(tmp_path / "store", "--db", "rabbitmq", "--workload", "queue",
                                         "--nodes", "3", "--nemesis", "partition", "--time-limit", "15",
                                         "--seed", "31")
    summaries = {name: verdict["summary"] for name, verdict in results["checkers"].items()}
    assert code in (0, 1) and results["valid"] in (True, False), summaries
    assert results["valid"] is (code == 0)
    assert {"durability", "linearizable"} <= set(results["checkers"])
    assert all(results["checkers"][name]["valid"] in (True, False) for name in ("durability", "linearizable")), summaries
    assert set(results["not_applicable"]) == {"lsn-monotonicity", "single-leader-per-term"}

    test = json.loads((run_dir / "test.json").read_text())
    assert test["versions"]["db"]["sha256"] == rabbitmq_bundle.sha256
    lines = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    ok = [e for e in lines if e["type"] == "ok" and isinstance(e["process"], int)]
    assert len([e for e in ok if e["f"] == "put"]) > 20
    assert any(e["f"] == "consume" and e["value"] is not None for e in ok)
    confirms = [e for e in lines if e["f"] == "confirm" and e["type"] != "invoke"]
    assert confirms and all(e["type"] != "ok" for e in confirms)
    statuses = [e["value"] for e in ok if e["f"] == "status"]
    assert any(g["group"] == "q0" and g["role"] == "leader" for s in statuses for g in s["groups"])
    drained = {e["node"] for e in lines if e.get("final") and e["f"] == "consume"}
    assert drained == set(NODES)
    for node in NODES:
        assert "Server startup complete" in (run_dir / "nodes" / node / "rabbitmq.log").read_text()

    harness_log = (run_dir / "harness.log").read_text()
    assert "teardown: stop and wipe the DB: done" in harness_log
    assert run_ids and len(run_ids) == 1
    assert left_behind(docker_engine, run_ids[0]) == []
