"""The etcd adapter on a real container: install, start, status (leader, current term), pause, kill,
restart with the data kept, a stale pid never signalled, teardown wiping everything."""

from __future__ import annotations

import asyncio

import pytest

from adapters.etcd.db import BINARY, DATA_DIR, PID_FILE, EtcdDB
from adapters.etcd.install import EtcdBinary
from harness.db import Deployment, StatusError
from harness.platforms.docker import DockerPlatform
from workloads.ops import Op

pytestmark = pytest.mark.docker


def _deployment(platform: DockerPlatform) -> Deployment:
    address = platform.address("n1")
    return Deployment(("n1",), {"n1": address}, {"n1": address})


def _invoke(db: EtcdDB, deployment: Deployment, op: Op) -> dict:
    async def go() -> dict:
        client = await db.open_client(deployment, 0, 5.0)
        try:
            return await client.invoke(op)
        finally:
            await client.close()

    return asyncio.run(go())


def _status(db: EtcdDB, deployment: Deployment, timeout: float = 2.0) -> dict:
    async def until_leader() -> dict:
        for _ in range(50):
            try:
                status = await db.status(deployment, "n1", timeout)
            except StatusError:
                status = {}
            if status.get("role") == "leader":
                return status
            await asyncio.sleep(0.2)
        raise AssertionError(f"n1 never led: {status}")

    return asyncio.run(until_leader())


def test_a_member_through_its_whole_lifecycle(one_node: DockerPlatform, etcd_binary: EtcdBinary) -> None:
    remote, deployment = one_node.remote("n1"), _deployment(one_node)
    db = EtcdDB(etcd_binary)
    db.setup(deployment, "n1", remote)
    try:
        assert db.is_running(deployment, "n1", remote)
        db.start(deployment, "n1", remote)  # idempotent: still the one process
        assert remote.run(f"pgrep -fc '^{BINARY} '").stdout.strip() == "1"
        status = _status(db, deployment)
        assert status["leader"] == "n1" and isinstance(status["term"], int) and status["term"] >= 2

        written = _invoke(db, deployment, Op("write", "k1", 1000001))
        assert written["type"] == "ok" and written["lsn"][1] > 1
        cas = _invoke(db, deployment, Op("cas", "k1", [1000001, 1000002]))
        assert cas["type"] == "ok" and cas["lsn"][1] == written["lsn"][1] + 1
        assert _invoke(db, deployment, Op("cas", "k1", [1000001, 1000003]))["error"] == "cas-mismatch"

        db.pause(deployment, "n1", remote)
        with pytest.raises(StatusError) as paused:
            asyncio.run(db.status(deployment, "n1", 0.5))
        assert not paused.value.definite  # a paused member may yet answer
        assert _invoke(db, deployment, Op("read", "k1"))["type"] == "fail"  # it times out: a read fails
        db.resume(deployment, "n1", remote)
        _status(db, deployment)

        db.kill(deployment, "n1", remote)
        db.kill(deployment, "n1", remote)  # a dead member stays dead
        assert not db.is_running(deployment, "n1", remote)
        with pytest.raises(StatusError) as dead:
            asyncio.run(db.status(deployment, "n1", 0.5))
        assert dead.value.definite
        with pytest.raises(RuntimeError, match="not running, so it cannot take SIGSTOP"):
            db.pause(deployment, "n1", remote)
        write_refused = _invoke(db, deployment, Op("write", "k1", 1000004))
        assert write_refused["type"] == "fail" and write_refused["error"].startswith("connection-refused")

        db.start(deployment, "n1", remote)
        after = _status(db, deployment)
        assert after["term"] > status["term"]  # a new election after the restart
        read = _invoke(db, deployment, Op("read", "k1", node="n1", local=True))
        assert (read["type"], read["value"], read["lsn"]) == ("ok", 1000002, cas["lsn"])  # the WAL kept it
    finally:
        db.teardown(deployment, "n1", remote)
    assert remote.run(f"ls {DATA_DIR} {BINARY} 2>&1 || true").stdout.count("No such file") == 2
    assert remote.run(f"pgrep -f '^{BINARY} ' || true").stdout.strip() == ""


def test_a_stale_pid_file_is_never_signalled(one_node: DockerPlatform, etcd_binary: EtcdBinary) -> None:
    remote, deployment = one_node.remote("n1"), _deployment(one_node)
    db = EtcdDB(etcd_binary)
    # A pid file and record naming some other live process (a recycled pid: the record's start time is an
    # earlier process's): the member is not running, and neither kill nor pause may touch that process.
    other = remote.run(f"mkdir -p $(dirname {PID_FILE}); sleep 300 > /dev/null 2>&1 & echo $! | tee {PID_FILE}")
    pid = other.stdout.strip()
    remote.run(f'echo "{pid} 1 $(cat /proc/sys/kernel/random/boot_id) -" > {PID_FILE}.id')
    try:
        assert not db.is_running(deployment, "n1", remote)
        db.kill(deployment, "n1", remote)
        with pytest.raises(RuntimeError, match="not running"):
            db.pause(deployment, "n1", remote)
        assert remote.run(f"ps -o stat= -p {pid}").stdout.strip().startswith("S")  # alive, not stopped
    finally:
        remote.run(f"kill {pid}; rm -f {PID_FILE} {PID_FILE}.id", check=False)
