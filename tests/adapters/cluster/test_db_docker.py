"""The `cluster` DB adapter on a real container: install, start, status, pause, kill, restart, teardown,
and a node that cannot start shows the last lines of its output."""

from __future__ import annotations

import asyncio

import pytest

from adapters.cluster.db import CONSOLE_FILE, INSTALL_DIR, ClusterDB
from harness.db import Deployment, NodeStartError, StatusError
from harness.platforms.docker import DockerPlatform

pytestmark = pytest.mark.docker


def _deployment(platform: DockerPlatform) -> Deployment:
    address = platform.address("n1")
    return Deployment(("n1",), {"n1": address}, {"n1": address})


def test_the_node_process_lifecycle_through_the_adapter(one_node: DockerPlatform) -> None:
    remote, deployment = one_node.remote("n1"), _deployment(one_node)
    db = ClusterDB("blazingmq", seed=3)
    db.setup(deployment, "n1", remote)
    try:
        assert db.is_running(deployment, "n1", remote)
        db.start(deployment, "n1", remote)  # idempotent: still the one process
        assert remote.run("pgrep -fc '[c]luster[.]node'").stdout.strip() == "1"
        status = asyncio.run(db.status(deployment, "n1", 2.0))
        assert status["node"] == "n1" and status["role"] in ("follower", "candidate", "leader")

        db.pause(deployment, "n1", remote)
        with pytest.raises((StatusError, TimeoutError)) as paused:
            asyncio.run(db.status(deployment, "n1", 0.5))
        assert not getattr(paused.value, "definite", False)  # a paused node may yet answer
        db.resume(deployment, "n1", remote)
        assert asyncio.run(db.status(deployment, "n1", 2.0))["node"] == "n1"

        db.kill(deployment, "n1", remote)
        db.kill(deployment, "n1", remote)  # a dead node stays dead
        assert not db.is_running(deployment, "n1", remote)
        with pytest.raises(StatusError) as dead:
            asyncio.run(db.status(deployment, "n1", 0.5))
        assert dead.value.definite and str(dead.value) == "connection refused"
        with pytest.raises(RuntimeError, match="not running, so it cannot take SIGSTOP"):
            db.pause(deployment, "n1", remote)

        db.start(deployment, "n1", remote)
        assert db.is_running(deployment, "n1", remote)
        journal = remote.read_file("/var/lib/chaos/data/journal.jsonl").decode()
        assert journal.count('"event":"start"') == 2  # the restart continued the same journal
    finally:
        db.teardown(deployment, "n1", remote)
    assert remote.run(f"ls {INSTALL_DIR} /var/lib/chaos/data 2>&1 || true").stdout.count("No such file") == 2
    assert remote.run("pgrep -f '[c]luster[.]node' || true").stdout.strip() == ""


def test_a_node_that_cannot_start_shows_the_last_lines_of_its_output(one_node: DockerPlatform) -> None:
    remote, deployment = one_node.remote("n1"), _deployment(one_node)
    db = ClusterDB("blazingmq", node_args=["--fsync", "sometimes"])
    try:
        with pytest.raises(NodeStartError) as failed:
            db.setup(deployment, "n1", remote)
        message = str(failed.value)
        assert message.startswith("n1: the node did not start (the process exited)")
        assert f"last lines of {CONSOLE_FILE}:" in message
        assert "sometimes" in message  # the node's own complaint about --fsync
    finally:
        db.teardown(deployment, "n1", remote)
