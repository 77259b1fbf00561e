"""One-way partitions on real containers: "n2 does not receive from n1" loses what n1 sends n2, and only that.

Each node runs a line server (port 7000, as the node's own) that appends every line it receives to a
file, and a sender that opened a connection to the other node before the partition and sends one more
line once the partition is in place. Messages go on the sender's own connection, as ``cluster`` sends
its peer messages, so the check is the one a node would see. A plain DROP of everything from n1 at n2
fails it: n2 could not open a connection to n1 (n1's SYN-ACK is dropped) and its established connection
would stall unacknowledged.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from harness.platforms.docker import DockerPlatform
from harness.topology import topology
from nemesis import grudge as grudges
from nemesis import shell
from nemesis.remote import Remote
from tests.harness.node_probes import tcp_reachable

StartPlatform = Callable[..., DockerPlatform]
PORT = 7000
RECEIVED = "/tmp/received"
GO = "/tmp/go"

_SERVER = f"""
import socket, threading
def serve(connection):
    with connection, open({RECEIVED!r}, "a") as out:
        for line in connection.makefile():
            out.write(line); out.flush()
listener = socket.create_server(("0.0.0.0", {PORT}))
while True:
    threading.Thread(target=serve, args=(listener.accept()[0],), daemon=True).start()
"""

_SENDER = f"""
import os, socket, sys, time
me, peer = sys.argv[1], sys.argv[2]
connection = socket.create_connection((peer, {PORT}), timeout=5)
connection.sendall(f"{{me}}-early\\n".encode())
while not os.path.exists({GO!r}):
    time.sleep(0.05)
connection.sendall(f"{{me}}-late\\n".encode())
time.sleep(30)
"""

_FRESH = f"""
import socket, sys
with socket.create_connection((sys.argv[2], {PORT}), timeout=2) as connection:
    connection.sendall(f"{{sys.argv[1]}}-fresh\\n".encode())
"""


def _background(remote: Remote, script: str, *args: str) -> None:
    quoted = " ".join(["python3", "-c", _quote(script), *args])
    remote.run(f"nohup {quoted} >/dev/null 2>&1 &", timeout=10)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _received(remote: Remote) -> set[str]:
    result = remote.run(f"cat {RECEIVED} 2>/dev/null || true", timeout=10)
    return set(result.stdout.split())


def _wait_until(condition: Callable[[], bool], within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.mark.docker
def test_a_one_way_partition_loses_only_the_cut_direction(start_platform: StartPlatform) -> None:
    platform = start_platform(topology(2))
    remotes = platform.remotes()
    addresses = {node: platform.address(node) for node in remotes}
    n1, n2 = remotes["n1"], remotes["n2"]
    for remote in remotes.values():
        _background(remote, _SERVER)
    assert _wait_until(lambda: tcp_reachable(n1, addresses["n2"], PORT) and tcp_reachable(n2, addresses["n1"], PORT), 10)
    _background(n1, _SENDER, "n1", addresses["n2"])
    _background(n2, _SENDER, "n2", addresses["n1"])
    assert _wait_until(lambda: "n1-early" in _received(n2) and "n2-early" in _received(n1), 10)

    outcome = shell.partition(remotes, grudges.one_way("n1", ["n2"]), addresses, "one-way")
    assert outcome.applied and outcome.value["grudge"] == {"n1": [], "n2": ["n1"]}
    for remote in remotes.values():
        remote.run(f"touch {GO}", timeout=10)
    fresh_from_n2 = n2.run(["python3", "-c", _FRESH, "n2", addresses["n1"]], timeout=15, check=False)
    fresh_from_n1 = n1.run(["python3", "-c", _FRESH, "n1", addresses["n2"]], timeout=15, check=False)

    # n1 hears n2, on the connection n2 opened before the partition and on a new one.
    assert fresh_from_n2.exit_code == 0, fresh_from_n2.stderr
    assert _wait_until(lambda: {"n2-late", "n2-fresh"} <= _received(n1), 5), _received(n1)
    # n2 hears nothing more from n1: n1 cannot even connect.
    assert fresh_from_n1.exit_code != 0
    time.sleep(1)
    assert _received(n2) == {"n1-early"}

    healed = shell.heal(remotes)
    assert healed.applied
    assert _wait_until(lambda: tcp_reachable(n1, addresses["n2"], PORT), 5)
