"""A cluster of real node processes on this machine, for end-to-end tests, the benchmark and people.

``LocalCluster`` starts ``python -m cluster.node`` once per node on free 127.0.0.1 ports, each with its own
data directory under one root, and can kill (SIGKILL), stop (SIGTERM) and restart any of them. It is a
context manager: leaving it kills every process it started, whatever happened.

By hand::

    python3 -m cluster.local --size 3 --root /tmp/c3 [--base-port 7001] [-- NODE OPTIONS...]

runs a 3-node cluster in the foreground, prints each node's address and log, and stops the nodes on
Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cluster.client import Client
from cluster.core.election.fluvio import CONTROLLER_ID

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports that were free a moment ago (the OS picks them)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass
class LocalNode:
    """One node process: its id, address, data directory and the command that starts it."""

    node_id: str
    address: tuple[str, int]
    data_dir: str
    argv: list[str]
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def stderr_path(self) -> str:
        return os.path.join(self.data_dir, "stderr.log")

    @property
    def log_path(self) -> str:
        return os.path.join(self.data_dir, "node.log")

    @property
    def journal_path(self) -> str:
        return os.path.join(self.data_dir, "journal.jsonl")

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        if self.alive:
            raise RuntimeError(f"node {self.node_id} is already running (pid {self.process.pid})")  # type: ignore[union-attr]
        os.makedirs(self.data_dir, exist_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
        with open(self.stderr_path, "ab") as stderr:
            self.process = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                                            env=env, cwd=self.data_dir)
        self.starts += 1

    def wait_listening(self, timeout: float = 10.0) -> None:
        """Block until the node accepts TCP connections; ``TimeoutError`` (or ``RuntimeError`` if the
        process exited) otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive:
                raise RuntimeError(f"node {self.node_id} exited; see {self.stderr_path}")
            try:
                socket.create_connection(self.address, timeout=0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"node {self.node_id} not listening on {self.address} after {timeout} s") from None
                time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL and reap: no goodbye, no flush beyond what the node already handed to the OS."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait()

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, wait up to ``timeout``, then SIGKILL; the exit code of a graceful stop, else None."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                return None
        return self.process.returncode


@dataclass
class LocalCluster:
    """``size`` nodes n1..nN under ``root``; ``node_args`` go to every node, ``per_node_args`` to one."""

    root: str
    size: int = 3
    host: str = "127.0.0.1"
    node_args: Sequence[str] = ()
    per_node_args: Mapping[str, Sequence[str]] = field(default_factory=dict)
    ports: Sequence[int] | None = None
    python: str = sys.executable
    #: also run the fluvio controller, id `sc` with `--controller` (pass `--mode fluvio` in node_args)
    controller: bool = False
    nodes: dict[str, LocalNode] = field(init=False)

    def __post_init__(self) -> None:
        ids = [f"n{i}" for i in range(1, self.size + 1)] + ([CONTROLLER_ID] if self.controller else [])
        ports = list(self.ports) if self.ports is not None else free_ports(len(ids), self.host)
        addresses = {node_id: (self.host, port) for node_id, port in zip(ids, ports, strict=True)}
        self.nodes = {}
        for node_id in ids:
            peers = ",".join(f"{p}={h}:{port}" for p, (h, port) in addresses.items() if p != node_id)
            data_dir = os.path.join(self.root, node_id)
            argv = [self.python, "-m", "cluster.node", "--id", node_id,
                    "--listen", f"{self.host}:{addresses[node_id][1]}", "--peers", peers,
                    "--data-dir", data_dir, *self.node_args, *self.per_node_args.get(node_id, ()),
                    *(["--controller"] if node_id == CONTROLLER_ID else [])]
            self.nodes[node_id] = LocalNode(node_id, addresses[node_id], data_dir, argv)

    @property
    def addresses(self) -> dict[str, tuple[str, int]]:
        return {node_id: node.address for node_id, node in self.nodes.items()}

    def start(self, node_ids: Iterable[str] | None = None) -> None:
        for node_id in node_ids if node_ids is not None else self.nodes:
            self.nodes[node_id].start()

    def wait_listening(self, timeout: float = 10.0) -> None:
        for node in self.nodes.values():
            if node.process is not None:
                node.wait_listening(timeout)

    def kill_all(self) -> None:
        for node in self.nodes.values():
            node.kill()

    def stop_all(self, timeout: float = 5.0) -> dict[str, int | None]:
        return {node_id: node.stop(timeout) for node_id, node in self.nodes.items()}

    def client(self, **options: object) -> Client:
        return Client(self.addresses, **options)  # type: ignore[arg-type]

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill_all()


async def find_leader(client: Client, node_ids: Iterable[str], *, min_term: int = 0,
                      timeout: float = 10.0, poll: float = 0.02) -> tuple[str, int, float]:
    """Poll ``status`` of ``node_ids`` until one reports itself leader of a term >= ``min_term``.

    Returns ``(leader, term, seconds waited)``; ``TimeoutError`` if none did within ``timeout``.
    """
    loop = asyncio.get_running_loop()
    started = loop.time()
    node_ids = list(node_ids)
    while loop.time() - started < timeout:
        statuses = await asyncio.gather(*(client.status(n, timeout=max(poll * 10, 0.2)) for n in node_ids))
        for result in statuses:
            status = result.value if result.ok and isinstance(result.value, dict) else {}
            if status.get("role") == "leader" and status.get("term", -1) >= min_term:
                return result.node or "", int(status["term"]), loop.time() - started
        await asyncio.sleep(poll)
    raise TimeoutError(f"no leader of term >= {min_term} among {', '.join(node_ids)} after {timeout} s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m cluster.local",
                                     description="Run a local cluster of node processes until Ctrl-C.")
    parser.add_argument("--size", type=int, default=3)
    parser.add_argument("--root", required=True, help="one data directory per node is made under it")
    parser.add_argument("--base-port", type=int, default=None, help="nodes listen on base, base+1, ...")
    parser.add_argument("node_args", nargs=argparse.REMAINDER, help="after --: options for every node")
    args = parser.parse_args(argv)
    node_args = args.node_args[1:] if args.node_args[:1] == ["--"] else args.node_args
    ports = None if args.base_port is None else [args.base_port + i for i in range(args.size)]
    with LocalCluster(os.path.abspath(args.root), size=args.size, node_args=node_args, ports=ports) as cluster:
        cluster.start()
        for node in cluster.nodes.values():
            print(f"{node.node_id} {node.address[0]}:{node.address[1]} pid {node.process.pid} "  # type: ignore[union-attr]
                  f"log {node.log_path}")
        try:
            while any(node.alive for node in cluster.nodes.values()):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        codes = cluster.stop_all()
        print("stopped:", ", ".join(f"{n}={c}" for n, c in codes.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
