"""Benchmark of ``cluster`` on this machine: local node processes, no faults.

For each cluster size (3 and 5 by default) it measures:

* time from spawning the node processes to all of them answering ``status`` (process start), and to
  the first node reporting itself leader;
* committed writes per second, and p50/p99 latency of those writes, with ``--clients`` concurrent
  clients (each one write outstanding at a time, through ``cluster.client``, to the leader);
* time from SIGKILL of the leader to a surviving node reporting itself leader of a higher term
  (``--failovers`` times; the killed node is restarted between trials).

and prints one table. Run it from the repository root::

    python3 benchmarks/cluster_bench.py [--sizes 3,5] [--clients 10] [--duration 10] [--failovers 3]
                                        [--profile DIR] [-- NODE OPTIONS...]

``--profile DIR`` runs every node under cProfile and leaves one ``.prof`` file per node run in DIR.
Targets on the 2-core development machine (issue 2): >= 1,000 committed writes/s, first leader within
3 s, failover within 5 s. This is a script, not a test: nothing asserts the targets.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cluster.client import Client  # noqa: E402
from cluster.local import LocalCluster, find_leader  # noqa: E402


@dataclass
class SizeResult:
    size: int
    first_leader_s: float = float("nan")
    listening_s: float = float("nan")
    writes: int = 0
    not_ok: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    failovers_s: list[float] = field(default_factory=list)
    node_stats: dict[str, str] = field(default_factory=dict)
    nodes_cpu_s: float = 0.0
    client_cpu_s: float = 0.0

    @property
    def writes_per_s(self) -> float:
        return self.writes / self.duration_s if self.duration_s else 0.0

    def percentile(self, p: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def _all_answer(client: Client, node_ids: list[str], deadline_s: float = 30.0) -> None:
    """Until every node answers `status`: the processes are up and listening."""
    end = time.monotonic() + deadline_s
    waiting = set(node_ids)
    while waiting and time.monotonic() < end:
        results = await asyncio.gather(*(client.status(n, timeout=1.0) for n in sorted(waiting)))
        waiting -= {r.node for r in results if r.ok}
        if waiting:
            await asyncio.sleep(0.01)


async def wait_writable(client: Client, deadline_s: float = 20.0) -> None:
    """Until a write commits: a new leader may still be synchronising."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if (await client.write("warmup", 0, timeout=2.0)).ok:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("the cluster accepted no write within 20 s")


async def measure_writes(client: Client, clients: int, duration: float, result: SizeResult) -> None:
    stop = time.monotonic() + duration
    values = itertools.count()

    async def one_client(number: int) -> None:
        while time.monotonic() < stop:
            started = time.perf_counter()
            reply = await client.write(f"key-{number}", next(values), timeout=5.0)
            if reply.ok:
                result.writes += 1
                result.latencies_ms.append((time.perf_counter() - started) * 1000)
            else:
                result.not_ok[reply.error or "?"] = result.not_ok.get(reply.error or "?", 0) + 1

    began = time.monotonic()
    await asyncio.gather(*(one_client(n) for n in range(clients)))
    result.duration_s = time.monotonic() - began


async def run_size(size: int, args: argparse.Namespace, root: str) -> SizeResult:
    result = SizeResult(size)
    node_args = list(args.node_args)
    runs = itertools.count()
    with LocalCluster(os.path.join(root, f"size{size}"), size=size, node_args=node_args) as cluster:
        if args.profile:
            os.makedirs(args.profile, exist_ok=True)
            for node in cluster.nodes.values():
                script = node.argv.index("-m")
                node.argv[script:script + 2] = ["-m", "cProfile", "-o",
                                                os.path.join(args.profile, f"size{size}-{node.node_id}-%d.prof"),
                                                "-m", "cluster.node"]
        spawn = time.monotonic()
        for node in cluster.nodes.values():
            _number_profile(node, runs)
        cluster.start()
        async with cluster.client(timeout=5.0) as client:
            await _all_answer(client, list(cluster.nodes))
            result.listening_s = time.monotonic() - spawn
            leader, term, _ = await find_leader(client, cluster.nodes, timeout=30, poll=0.01)
            result.first_leader_s = time.monotonic() - spawn
            client.leader_hint = leader
            await wait_writable(client)
            pids = [node.process.pid for node in cluster.nodes.values() if node.process is not None]
            nodes_cpu, own_cpu = _cpu_seconds(pids), _own_cpu_seconds()
            await measure_writes(client, args.clients, args.duration, result)
            result.nodes_cpu_s = _cpu_seconds(pids) - nodes_cpu
            result.client_cpu_s = _own_cpu_seconds() - own_cpu
            for _ in range(args.failovers):
                killed_at = time.monotonic()
                cluster.nodes[leader].kill()
                survivors = [n for n in cluster.nodes if n != leader]
                new_leader, term, _ = await find_leader(client, survivors, min_term=term + 1, timeout=30, poll=0.01)
                result.failovers_s.append(time.monotonic() - killed_at)
                _number_profile(cluster.nodes[leader], runs)
                cluster.nodes[leader].start()
                leader = new_leader
                client.leader_hint = leader
                await wait_writable(client)
                await asyncio.sleep(1.0)  # let the restarted node catch up before the next kill
        cluster.stop_all()  # SIGTERM: each node logs its driver statistics (and cProfile writes its file)
        for node_id, node in cluster.nodes.items():
            result.node_stats[node_id] = _last_stats_line(node.log_path)
    return result


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of these processes so far, from /proc (Linux)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def _own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def _last_stats_line(log_path: str) -> str:
    try:
        with open(log_path) as log:
            lines = [line for line in log if "driver turns" in line]
    except OSError:
        return "?"
    return lines[-1].split(" INFO ", 1)[-1].strip() if lines else "?"


def _number_profile(node, runs: itertools.count) -> None:  # type: ignore[no-untyped-def]
    """Give each (re)start of a profiled node its own output file."""
    for i, arg in enumerate(node.argv):
        if arg.endswith(".prof"):
            node.argv[i] = arg.rsplit("-", 1)[0] + f"-{next(runs)}.prof"


def print_table(results: list[SizeResult], args: argparse.Namespace) -> None:
    print()
    print(f"cluster benchmark: {args.clients} concurrent clients, {args.duration:g} s of writes per size, "
          f"node options: {' '.join(args.node_args) or '(defaults)'}")
    header = ["nodes", "all listening s", "first leader s", "committed writes/s", "p50 ms", "p99 ms", "failover s (each)",
              "node CPU ms/write", "not ok"]
    rows = []
    for r in results:
        failovers = ", ".join(f"{f:.2f}" for f in r.failovers_s) or "-"
        not_ok = ", ".join(f"{k}={v}" for k, v in sorted(r.not_ok.items())) or "0"
        cpu = f"{r.nodes_cpu_s * 1000 / r.writes:.2f}" if r.writes else "-"
        rows.append([str(r.size), f"{r.listening_s:.2f}", f"{r.first_leader_s:.2f}", f"{r.writes_per_s:,.0f}", f"{r.percentile(50):.1f}",
                     f"{r.percentile(99):.1f}", failovers, cpu, not_ok])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    for r in results:
        if r.failovers_s:
            print(f"{r.size} nodes: failover mean {statistics.mean(r.failovers_s):.2f} s, "
                  f"max {max(r.failovers_s):.2f} s")
        print(f"{r.size} nodes: {r.writes} writes committed in {r.duration_s:.1f} s; CPU in the write phase: "
              f"nodes {r.nodes_cpu_s:.1f} s, benchmark client {r.client_cpu_s:.1f} s")
        for node_id, stats in r.node_stats.items():
            print(f"  {node_id} (last run): {stats}")
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="3,5", help="cluster sizes, comma-separated (default 3,5)")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of writes per size")
    parser.add_argument("--failovers", type=int, default=3, help="leader kills per size")
    parser.add_argument("--root", default=None, help="data directories (default: a temporary directory)")
    parser.add_argument("--profile", default=None, metavar="DIR", help="cProfile every node into DIR")
    parser.add_argument("node_args", nargs=argparse.REMAINDER, help="after --: options for every node")
    args = parser.parse_args(argv)
    args.node_args = args.node_args[1:] if args.node_args[:1] == ["--"] else args.node_args
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    results = []
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as scratch:
        root = args.root or scratch
        for size in sizes:
            print(f"running {size} nodes ...", flush=True)
            results.append(asyncio.run(run_size(size, args, root)))
    print_table(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
