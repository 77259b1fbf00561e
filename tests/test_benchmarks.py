"""The benchmarks' own measuring: what they count must be what ran."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from analysis_bench import TreeCpu  # noqa: E402

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
