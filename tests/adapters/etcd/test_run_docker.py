"""etcd under chaos through the ``harness run`` command line, as a user types it (issue 11's "Done when"):
five members under partitions, kills and pauses for 30 s (a fault every 4 s) are valid with every checker valid, and the
deliberately broken variant (serializable reads) is caught as invalid.

The runs are judged by the checkers directly (``--analysis direct``); the Spark pipeline that ``harness
run`` uses by default is tested on its own (tests/harness/test_analysis_pipeline.py).
"""

from __future__ import annotations

import json

import pytest

from adapters.etcd.install import EtcdBinary
from tests.adapters.conftest import harness_run

pytestmark = pytest.mark.docker

NODES = ("n1", "n2", "n3", "n4", "n5")
CHECKERS = ("linearizable", "durability", "single-leader-per-term", "lsn-monotonicity")


def test_five_members_under_partition_kill_and_pause_for_30_s_are_valid(
    docker_engine, etcd_binary: EtcdBinary, run_ids, tmp_path
) -> None:
    code, run_dir, results = harness_run(
        tmp_path / "store", "--db", "etcd", "--nodes", "5", "--workload", "register",
        "--nemesis", "partition,kill,pause", "--time-limit", "30", "--nemesis-interval", "4", "--seed", "1",
    )
    verdicts = {name: results["checkers"][name]["valid"] for name in CHECKERS}
    summaries = {name: results["checkers"][name]["summary"] for name in CHECKERS}
    assert code == 0 and results["valid"] is True, summaries
    assert verdicts == dict.fromkeys(CHECKERS, True), summaries
    assert "not_applicable" not in results

    test = json.loads((run_dir / "test.json").read_text())
    assert test["command"].startswith("harness run --db etcd --nodes 5 --workload register "
                                      "--nemesis partition,kill,pause --time-limit 30")
    assert test["versions"]["db"]["sha256"] == etcd_binary.sha256
    # The faults were real: kills, partitions and their heals were applied, and kills left members down
    # (operations failed or went unanswered). A fault aimed at "the leader" finds none when every member
    # was just killed, or finds the one last seen leading already dead: it is recorded as not applied, and
    # those are the only reasons a fault may miss.
    stats = results["stats"]
    applied, invoked = stats["faults_applied"], stats["faults_invoked"]
    assert all(applied.get(f, 0) >= 1 for f in ("partition", "kill", "start", "heal")), applied
    assert invoked.get("pause", 0) >= 1 and invoked.get("resume", 0) >= 1, invoked
    assert all("no leader is known" in error or "etcd is not running, so it cannot take SIG" in error
               for error in stats["fault_errors"]), stats["fault_errors"]
    completed = stats["completed"]
    assert completed.get("ok", 0) > 100 and completed.get("info", 0) + completed.get("fail", 0) > 0, completed
    lines = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    final_nodes = {e["node"] for e in lines if e.get("final") and e["type"] == "invoke"}
    assert final_nodes == set(NODES)
    for node in NODES:
        assert "starting an etcd server" in (run_dir / "nodes" / node / "etcd.log").read_text()
    assert run_ids and len(run_ids) == 1


def test_serializable_reads_are_caught_as_invalid(docker_engine, etcd_binary: EtcdBinary, run_ids, tmp_path) -> None:
    code, run_dir, results = harness_run(
        tmp_path / "store", "--db", "etcd", "--db-opt", "reads=serializable", "--nodes", "5",
        "--workload", "register", "--nemesis", "partition", "--time-limit", "30", "--seed", "1",
    )
    summaries = {name: verdict["summary"] for name, verdict in results["checkers"].items()}
    assert code == 1 and results["valid"] is False, summaries
    assert results["checkers"]["linearizable"]["valid"] is False, summaries
    assert run_dir.parent.name == "etcd-serializable-register-partition"
