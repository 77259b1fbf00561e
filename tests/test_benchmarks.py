"""The benchmarks' own measuring: what they count must be what ran."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from analysis_bench import TreeCpu  # noqa: E402
from sim_bench import CORE_ENTRY_POINTS, timed_cores  # noqa: E402

from cluster.core.config import NodeConfig  # noqa: E402
from cluster.core.member import Node  # noqa: E402
from cluster.core.shards import ShardedNode, ShardReplica, node_class  # noqa: E402
from cluster.core.storage import recover  # noqa: E402

# A parent that, as PySpark's worker daemon does, ignores SIGCHLD (the kernel then reaps its children
# without adding their times to its own), forks a child that burns CPU and ends, then waits to be told to go.
_PARENT = """
import os, signal, sys, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline()
if os.fork() == 0:
    end = time.process_time() + 0.6
    while time.process_time() < end:
        pass
    os._exit(0)
sys.stdin.readline()
"""


def test_a_child_reaped_without_a_wait_still_counts() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdin is not None
        assert parent.stdout.readline() == "ready\n"
        tree = TreeCpu(parent.pid)
        tree.start()
        parent.stdin.write("fork\n")
        parent.stdin.flush()
        time.sleep(1.5)  # the child burns 0.6 CPU s and is gone
        counted = tree.stop()
        parent.stdin.write("go\n")
        parent.stdin.flush()
        parent.wait(timeout=10)
    finally:
        parent.kill()
    # at most one reading period of the child's last CPU is lost
    assert counted >= 0.6 - 2 * TreeCpu.PERIOD_S
    assert tree.sampler_s >= 0.0


def test_the_cores_time_counts_a_sharded_nodes_calls_once_and_the_cores_are_put_back() -> None:
    classes = (Node, ShardedNode, ShardReplica)
    before = {(cls, name): cls.__dict__[name]
              for cls in classes for name in CORE_ENTRY_POINTS if name in cls.__dict__}
    spent = [0.0, 0]
    config = NodeConfig(node_id="n2", peers=("n1", "n3"), shards=2)
    with timed_cores(spent):
        assert all(cls.__dict__[name] is not function for (cls, name), function in before.items())
        with pytest.raises(ValueError, match="ShardedNode"):
            Node(config, recover([]), 0.0, 0.0, random.Random(1))  # a call that raises still counts
        node = node_class(config)(config, recover([]), 0.0, 0.0, random.Random(1))
        node.start(0.0, 0.0)
        node.tick(0.5, 0.5)
    # the failed construction, then the sharded node's construction, start and tick: its replicas' own
    # constructions, starts and ticks happened inside those and are part of them
    assert spent[1] == 4
    assert spent[0] > 0
    node.tick(1.0, 1.0)
    assert spent[1] == 4
    assert all(cls.__dict__[name] is function for (cls, name), function in before.items())
