"""``harness analyze`` and ``harness suite`` against a real Spark standalone cluster.

A master and two workers are started from the installed PySpark (``tests/harness/spark_cluster.py``: the
commands of docs/analysis.md, "Running on your Spark cluster", on 127.0.0.1 with ports the kernel picks)
once for this module, and stopped whatever happens. The commands run as a user runs them, in processes of
their own; the store is named by a ``file://`` URL, so the tasks on the workers read it through Hadoop's
filesystem layer, as they would read HDFS. What must hold: the verdicts, the results and the dataset are
those of a local analysis; the tasks ran in the workers' executors; nothing of Java's (a stack trace, an
exception name) reaches the user on a normal exit.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.spark_cluster import StandaloneCluster, start_standalone
from tests.harness.synthetic_runs import write_run

pytestmark = pytest.mark.spark

COMMAND_TIMEOUT_S = 900
# A Java stack frame, or an exception's name at the start of a line: what a user must never see on a
# normal exit.
JAVA_NOISE = re.compile(r"^\s+at [\w$.]+\(|^(?:Exception in thread|[\w.$]+(?:Exception|Error)\b)", re.MULTILINE)
SUITE = """
[suite]
db = "cluster"
name = "on-a-cluster"
time_limit = 20
nodes = 5
concurrency = 10
key_timeout = 30

[[matrix]]
name = "cluster.no-dedup"
modes = ["raft"]
workloads = ["queue"]
nemeses = ["kill"]
bugs = ["no-dedup"]
seeds = [3]
nemesis_interval = 1.5
platform = "sim"
expect = "invalid"

[[matrix]]
name = "cluster.control"
modes = ["raft"]
workloads = ["queue"]
nemeses = ["kill"]
bugs = "none"
seeds = [3]
nemesis_interval = 1.5
platform = "sim"
expect = "valid"
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    started = start_standalone(tmp_path_factory.mktemp("spark-cluster"), workers=2)
    try:
        yield started
    finally:
        started.stop()
    assert not started.alive(), "the cluster's processes outlived stop()"


def harness(*arguments: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("harness")
    return subprocess.run(
        [str(script), *arguments], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
    )


def no_java_noise(completed: subprocess.CompletedProcess[str]) -> None:
    noise = JAVA_NOISE.findall(completed.stdout + completed.stderr)
    assert not noise, f"Java's output reached the user: {noise[:3]}\n{completed.stderr[-3000:]}"


def test_harness_analyze_runs_on_the_cluster(cluster: StandaloneCluster, tmp_path: Path) -> None:
    store = tmp_path / "store"
    valid = write_run(store, "reg", "20261120T020000", ops=400, keys=4, seed=1)
    invalid = write_run(store, "reg", "20261121T020000", ops=400, keys=4, seed=2, lost_write=True)
    completed = harness("analyze", f"file://{store}", "--spark-master", cluster.master_url, "--quiet")
    assert completed.returncode == 1, f"{completed.stdout}\n{completed.stderr}\n{cluster.log_text()}"
    no_java_noise(completed)
    results = {run: json.loads((run / "results.json").read_text()) for run in (valid, invalid)}
    assert results[valid]["valid"] is True and results[invalid]["valid"] is False
    assert "lost" in results[invalid]["checkers"]["durability"]["summary"]
    assert {r["analysis"]["spark_master"] for r in results.values()} == {cluster.master_url}
    # the tasks ran in executors on the workers, one application directory under each work dir
    for work in cluster.worker_dirs():
        assert [p for p in work.glob("app-*/*/stderr")], f"no executor ran on {work.parent.name}"
    assert (store / "dataset" / "operations").is_dir() and (invalid / "report.html").is_file()


def test_harness_suite_runs_and_analyses_on_the_cluster(cluster: StandaloneCluster, tmp_path: Path) -> None:
    suite = tmp_path / "cluster.toml"
    suite.write_text(SUITE, encoding="utf-8")
    store, junit = tmp_path / "store", tmp_path / "junit.xml"
    completed = harness(
        "suite", str(suite), "--store", str(store), "--junit", str(junit), "--spark-master", cluster.master_url,
        "--quiet",
    )  # fmt: skip
    assert completed.returncode == 0, f"{completed.stdout}\n{completed.stderr}\n{cluster.log_text()}"
    no_java_noise(completed)
    record = json.loads(next((store / "suites" / "on-a-cluster").glob("*/suite.json")).read_text())
    assert [(r["expect"], r["status"]) for r in record["runs"]] == [("invalid", "passed"), ("valid", "passed")]
    for entry in record["runs"]:
        results = json.loads((store / entry["path"] / "results.json").read_text())
        assert results["analysis"]["spark_master"] == cluster.master_url
    assert "<failure" not in junit.read_text() and "<error" not in junit.read_text()
