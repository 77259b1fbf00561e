"""Probes run on a node through its Remote, for the container tests: TCP reachability and sshd readiness.

Waiting happens on the node (a bounded shell loop), not in the test process. TCP, not ICMP: ping does
not answer on Docker's internal networks.
"""

from __future__ import annotations

from nemesis.remote import Remote

_CONNECT = (
    "import socket, sys\n"
    "s = socket.socket()\n"
    "s.settimeout(float(sys.argv[3]))\n"
    "sys.exit(0 if s.connect_ex((sys.argv[1], int(sys.argv[2]))) == 0 else 1)\n"
)


def tcp_reachable(remote: Remote, host: str, port: int = 22, timeout_s: float = 1.0) -> bool:
    """Whether ``remote``'s node can open a TCP connection to ``host:port`` within ``timeout_s``."""
    result = remote.run(
        ["python3", "-c", _CONNECT, host, str(port), str(timeout_s)], timeout=timeout_s + 10, check=False
    )
    return result.exit_code == 0


def wait_for_sshd(remote: Remote, within_s: int = 20) -> None:
    """Returns once the node's sshd listens on port 22 and its ed25519 host key exists."""
    remote.run(
        f"for i in $(seq {within_s * 10}); do"
        " [ -s /etc/ssh/ssh_host_ed25519_key.pub ] && ss -Hltn 'sport = :22' | grep -q . && exit 0;"
        " sleep 0.1; done; echo 'sshd is not listening on port 22' >&2; exit 1",
        timeout=within_s + 5,
    )
