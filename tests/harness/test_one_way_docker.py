"""One-way partitions by conntrack direction on real containers, with traffic flowing as the rule goes in.

Each of n1 and n2 runs a line server (on a port inside the kernel's ephemeral range, so nothing depends
on port numbers) and a streamer that opened a connection to the other before the partition and keeps
sending a numbered line every 20 ms on it, as ``cluster``'s peer links send each message on the
sender's own connection. With "n2 does not receive from n1" in place, n1 must keep hearing n2 (on the
established connection and on a new one) and n2 must hear nothing more from n1. The old rule, a DROP of
everything from n1 at n2, fails it: n2's stream to n1 stalls because n1's acknowledgements are dropped.
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
PORT = 40123
RECEIVED = "/tmp/one-way-received"

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

_STREAMER = f"""
import socket, sys, time
me, peer = sys.argv[1], sys.argv[2]
connection = socket.create_connection((peer, {PORT}), timeout=5)
connection.settimeout(None)
for i in range(100000):
    connection.sendall(f"{{me}}-{{i}}\\n".encode())
    time.sleep(0.02)
"""

_FRESH = f"""
import socket, sys
with socket.create_connection((sys.argv[2], {PORT}), timeout=2) as connection:
    connection.sendall(f"{{sys.argv[1]}}-fresh\\n".encode())
"""


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _background(remote: Remote, script: str, *args: str) -> None:
    remote.run(f"nohup python3 -c {_quote(script)} {' '.join(args)} >/dev/null 2>&1 &", timeout=10)


def _lines_from(remote: Remote, sender: str) -> set[str]:
    result = remote.run(f"cat {RECEIVED} 2>/dev/null || true", timeout=10)
    return {line for line in result.stdout.split() if line.startswith(f"{sender}-")}


def _wait_until(condition: Callable[[], bool], within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.mark.docker
def test_n2_not_receiving_from_n1_still_lets_n2_reach_n1(start_platform: StartPlatform) -> None:
    platform = start_platform(topology(2))
    remotes = platform.remotes()
    addresses = {node: platform.address(node) for node in remotes}
    n1, n2 = remotes["n1"], remotes["n2"]
    for remote in remotes.values():
        _background(remote, _SERVER)
    assert _wait_until(
        lambda: tcp_reachable(n1, addresses["n2"], PORT) and tcp_reachable(n2, addresses["n1"], PORT), 10
    )
    _background(n1, _STREAMER, "n1", addresses["n2"])
    _background(n2, _STREAMER, "n2", addresses["n1"])
    assert _wait_until(lambda: len(_lines_from(n2, "n1")) > 10 and len(_lines_from(n1, "n2")) > 10, 10)

    outcome = shell.partition(remotes, grudges.one_way("n1", ["n2"]), addresses, "one-way")
    assert outcome.applied, outcome.error
    time.sleep(0.5)  # lines n2 had already taken in when the rule went in reach its file
    n1_heard_at_cut, n2_heard_at_cut = _lines_from(n1, "n2"), _lines_from(n2, "n1")
    fresh_from_n2 = n2.run(["python3", "-c", _FRESH, "n2", addresses["n1"]], timeout=15, check=False)
    fresh_from_n1 = n1.run(["python3", "-c", _FRESH, "n1", addresses["n2"]], timeout=15, check=False)
    time.sleep(1.5)

    # n2 -> n1 still arrives, on the connection n2 opened before the cut (about 50 lines a second)
    # and on a new one.
    assert fresh_from_n2.exit_code == 0, fresh_from_n2.stderr
    heard = _lines_from(n1, "n2")
    assert len(heard - n1_heard_at_cut) >= 30 and "n2-fresh" in heard, sorted(heard - n1_heard_at_cut)
    # n1 -> n2 does not: nothing more on n1's established connection, and no new connection.
    assert fresh_from_n1.exit_code != 0
    assert _lines_from(n2, "n1") == n2_heard_at_cut

    assert shell.heal(remotes).applied
    assert _wait_until(lambda: len(_lines_from(n2, "n1") - n2_heard_at_cut) > 0, 10)
