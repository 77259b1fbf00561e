"""End to end: three real node processes on 127.0.0.1 (``python -m cluster.node``).

Elect, write through every node, read, SIGKILL the leader, see a new leader, fail a write over from the
dead node, restart the killed node over a torn storage tail, and check that no acknowledged write was lost
(local reads on every node); bad input on a client connection; bad
configuration. Every process is killed in teardown (the ``three_nodes`` fixture).
"""

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from cluster import local as local_module
from cluster.local import LocalCluster, find_leader, free_ports
from cluster.wire import MAX_LINE_BYTES

pytestmark = pytest.mark.slow

# Fast timers so that the whole file runs in seconds: heartbeats every 50 ms, leader declared gone after
# 3 missed ones, then up to 0.3 s of random wait.
FAST = ["--heartbeat-interval", "0.05", "--missed-heartbeats", "3", "--election-random-wait", "0.3",
        "--proposal-timeout", "0.3"]


REPO = os.path.dirname(os.path.dirname(os.path.abspath(local_module.__file__)))


@pytest.fixture(params=["blazingmq"])
def three_nodes(request, tmp_path):
    """Three running nodes in the election mode given by the parameter (blazingmq unless a test says)."""
    with LocalCluster(str(tmp_path), size=3, node_args=[*FAST, "--mode", request.param]) as local:
        local.start()
        local.wait_listening()
        yield local
    # LocalCluster.__exit__ has SIGKILLed every node process, whatever the test did.


async def write_until_definite(client, key, value, node, deadline=10.0):
    """Retry a write while the answer is a definite failure (no leader yet, leader synchronising).
    Returns the last result: ok, or info (the write may have happened)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    while True:
        result = await client.write(key, value, node=node, timeout=2.0)
        if result.type != "fail" or loop.time() > end:
            return result
        await asyncio.sleep(0.05)


def journal_lines(node):
    with open(node.journal_path) as handle:
        return [json.loads(line) for line in handle]


@pytest.mark.parametrize("three_nodes", ["blazingmq", "raft"], indirect=True)
def test_elect_write_kill_leader_restart_and_lose_nothing(three_nodes):
    cluster = three_nodes

    async def scenario():
        async with cluster.client(timeout=3.0) as client:
            leader, term, _ = await find_leader(client, cluster.nodes, timeout=10)
            acked: dict[str, tuple[int, list[int]]] = {}
            for round_ in range(2):
                for node_id in cluster.nodes:  # through followers too: redirected or forwarded
                    key = f"k-{node_id}-{round_}"
                    result = await write_until_definite(client, key, round_ * 10 + int(node_id[1:]), node_id)
                    assert result.ok, result
                    acked[key] = (round_ * 10 + int(node_id[1:]), list(result.lsn))
            follower = next(n for n in cluster.nodes if n != leader)
            for key, (value, _) in acked.items():
                read = await client.read(key, node=follower)
                assert read.ok and read.value == value, (key, read)

            cluster.nodes[leader].kill()
            survivors = [n for n in cluster.nodes if n != leader]
            new_leader, new_term, _ = await find_leader(client, survivors, min_term=term + 1, timeout=10)
            assert new_leader != leader and new_term > term
            # Sent to the dead node first: refused, so the client fails over instead of failing.
            client.leader_hint = None
            result = await write_until_definite(client, "after-kill", "x", leader)
            assert result.ok and result.node != leader and result.redirects >= 1, result
            acked["after-kill"] = ("x", list(result.lsn))
            for node_id in survivors:
                key = f"after-{node_id}"
                result = await write_until_definite(client, key, node_id, node_id)
                assert result.ok, result
                acked[key] = (node_id, list(result.lsn))

            killed = cluster.nodes[leader]
            with open(os.path.join(killed.data_dir, "storage.dat"), "ab") as storage:
                storage.write(b"0000002a 1234abcd {\"t\": \"entries\", \"fr")  # a torn write
            killed.start()
            # The restarted node catches up: every acknowledged write is applied in its journal.
            wanted = {tuple(lsn) for _, lsn in acked.values()}
            for _ in range(200):
                applied = {tuple(line["lsn"]) for line in journal_lines(killed) if line["event"] == "apply"}
                if wanted <= applied:
                    break
                await asyncio.sleep(0.05)
            assert wanted <= applied, sorted(wanted - applied)
            for key, (value, _) in acked.items():
                read = await client.read(key)
                assert read.ok and read.value == value, (key, read)
            # Local reads: every node, the restarted follower included, answers from its own state.
            for node_id in cluster.nodes:
                for key, (value, lsn) in acked.items():
                    read = await client.read(key, node=node_id, local=True)
                    assert (read.ok, read.node, read.value, list(read.lsn)) == (True, node_id, value, lsn), read
            status = await client.status(leader)
            assert status.ok and status.value["role"] in ("follower", "leader") and status.value["term"] >= new_term
        return killed

    killed = asyncio.run(scenario())
    lines = journal_lines(killed)
    assert [line["seq"] for line in lines] == list(range(len(lines)))  # seq continues across the restart
    assert [line["event"] for line in lines].count("start") == 2
    with open(killed.log_path) as log:
        assert "truncated a corrupt tail" in log.read()

    code = killed.stop()
    assert code == 0
    assert journal_lines(killed)[-1]["event"] == "stop"
    for node in cluster.nodes.values():
        with open(node.stderr_path) as stderr:
            assert "Traceback" not in stderr.read(), node.node_id


def test_malformed_and_oversized_client_lines_get_errors_and_the_node_survives(three_nodes):
    cluster = three_nodes
    node = cluster.nodes["n1"]
    with socket.create_connection(node.address, timeout=5) as sock:
        reader = sock.makefile("rb")
        sock.sendall(b"this is not json\n")
        bad = json.loads(reader.readline())
        assert (bad["ok"], bad["error"], bad["definite"]) == (False, "bad-request", True)
        sock.sendall(b'{"id": 1, "op": "write", "key": "k", "value": "' + b"x" * (2 * MAX_LINE_BYTES) + b'"}\n')
        big = json.loads(reader.readline())
        assert (big["ok"], big["error"]) == (False, "too-large")
        sock.sendall(b'[1, 2, 3]\n{"id": 2, "op": "status"}\n')
        assert json.loads(reader.readline())["error"] == "bad-request"
        status = json.loads(reader.readline())
        assert status["id"] == 2 and status["ok"] and status["value"]["node"] == "n1"
    # A client that half-closes after its request (as `nc -q1` does) still gets the reply.
    with socket.create_connection(node.address, timeout=5) as sock:
        sock.sendall(b'{"id": "half", "op": "status"}\n')
        sock.shutdown(socket.SHUT_WR)
        reply = json.loads(sock.makefile("rb").readline())
        assert reply["id"] == "half" and reply["ok"]
    # A connection cut in the middle of a line, and a peer hello with a made-up id.
    with socket.create_connection(node.address, timeout=5) as sock:
        sock.sendall(b'{"id": 3, "op": "wri')
    with socket.create_connection(node.address, timeout=5) as sock:
        sock.sendall(b'{"hello": "peer", "from": "n9"}\n{"from": "n9", "msg": {"type": "LeaderHeartbeat"}}\n')
        assert sock.recv(100) == b""  # refused: closed
    assert node.alive

    async def still_serving():
        async with cluster.client(timeout=3.0) as client:
            return await client.status("n1")

    assert asyncio.run(still_serving()).ok


@pytest.mark.parametrize(
    "args, complaint",
    [
        (["--bug", "no-such-bug"], "unknown bug 'no-such-bug'"),
        (["--peers", "n2=localhost"], "--peers"),
        (["--data-dir", "/dev/null/sub"], "not writable"),
    ],
)
def test_bad_configuration_is_one_line_and_exit_code_2(tmp_path, args, complaint):
    argv = [sys.executable, "-m", "cluster.node", "--id", "n1", "--listen", f"127.0.0.1:{free_ports(1)[0]}",
            "--peers", "n2=127.0.0.1:1", "--data-dir", str(tmp_path / "d"), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHONPATH": REPO})
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and complaint in done.stderr, done.stderr
    assert not (tmp_path / "d" / "journal.jsonl").exists()


def test_sigterm_is_a_graceful_stop(tmp_path):
    with LocalCluster(str(tmp_path), size=1, node_args=[*FAST, "--pid-file", str(tmp_path / "n1.pid")]) as local:
        local.start()
        node = local.nodes["n1"]

        async def leader():
            async with local.client() as client:
                return await find_leader(client, ["n1"], timeout=10)

        asyncio.run(leader())
        assert int((tmp_path / "n1.pid").read_text()) == node.process.pid
        node.process.send_signal(signal.SIGTERM)
        assert node.process.wait(10) == 0
        assert journal_lines(node)[-1]["event"] == "stop"
        assert not (tmp_path / "n1.pid").exists()
