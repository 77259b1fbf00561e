"""Per-mode election timings with real node processes (issue 7): time to first leader and failover.

For each election mode (blazingmq, raft, aeron, fluvio, lease) and each cluster size (3 and 5 data
nodes by default), ``--trials`` times (default 10), each trial on a FRESH deployment (new processes,
new data directories, new ports; nothing is restarted between trials):

1. spawn the data node processes (fluvio: plus the controller ``sc``) and measure, from the spawn, the
   time until every process accepts TCP connections ("all listening") and until the first data node
   answers ``status`` as leader ("first leader");
2. write a key through that leader and wait until the write commits ("first write"), then until every
   data node follows that leader in that term and has committed the write (fluvio: and the SC's Live
   Replica Set holds every SPU again), so the kill hits a steady cluster;
3. SIGKILL the leader and measure the time until another data node answers ``status`` as leader of a
   higher term ("failover"; the term is the SC's epoch in fluvio, the lease generation in lease), then
   until a new write commits ("failover to write"), and read the first write back from the new leader
   (a trial whose read-back differs is reported as failed: committed data was lost).

``lease`` needs its external store: a 3-member ``raft`` group ``s1..s3`` (the simulator's names), started
once per cluster size and left running across that size's trials, as a real store (etcd, ZooKeeper)
would be; each trial's data nodes use their own lease key (``lease_key=trial-K``), so no trial inherits
a previous trial's lease. The clock of "first leader" starts when the data nodes are spawned, with the
store already elected.

Every node runs with its mode's default timers (``docs/node-core.md``; heartbeat 0.15 s, 3 missed,
random wait up to 1 s, ``lease_ttl`` 1 s) unless options follow ``--``. It prints one line per trial
and, per size, a table of medians and min-max, with the machine's load average at the start and the
end. Run it from the repository root::

    .venv/bin/python benchmarks/election_bench.py [--modes blazingmq,raft,aeron,fluvio,lease]
        [--sizes 3,5] [--trials 10] [--poll 0.02] [--seed S] [--json FILE] [-- NODE OPTIONS...]

The directories of failed trials (node logs and journals) are kept and their path printed. This is a
script, not a test: it asserts nothing about the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from cluster.client import Client
from cluster.core.election.fluvio import CONTROLLER_ID
from cluster.local import LocalCluster, LocalNode, find_leader, free_ports

MODES = ("blazingmq", "raft", "aeron", "fluvio", "lease")
LEASE_STORE_SIZE = 3
#: seconds any one phase of a trial may take before the trial is recorded as failed
PHASE_TIMEOUT = 30.0


@dataclass
class Trial:
    """One fresh deployment of one mode and size; times in seconds, None where the trial stopped."""

    mode: str
    size: int
    trial: int
    listening_s: float | None = None
    first_leader_s: float | None = None
    first_write_s: float | None = None
    steady_s: float | None = None
    failover_s: float | None = None
    failover_write_s: float | None = None
    leader: str | None = None
    term: int | None = None
    new_leader: str | None = None
    new_term: int | None = None
    error: str | None = None


class TrialFailed(Exception):
    """A phase of a trial did not finish in time or saw wrong data; the message says which."""


def lease_store_group(root: str, size: int = LEASE_STORE_SIZE, host: str = "127.0.0.1") -> LocalCluster:
    """The lease mode's external store: a ``raft`` group whose members' own ids are ``s1..sN`` (as in
    adapters/cluster/sim.py), so that the data nodes follow the store's ``not-leader`` hints directly."""
    group = LocalCluster(root, size=0, host=host)
    ids = [f"s{i}" for i in range(1, size + 1)]
    addresses = dict(zip(ids, ((host, port) for port in free_ports(size, host)), strict=True))
    for node_id in ids:
        peers = ",".join(f"{p}={h}:{port}" for p, (h, port) in addresses.items() if p != node_id)
        data_dir = os.path.join(root, node_id)
        argv = [group.python, "-m", "cluster.node", "--id", node_id, "--listen", f"{host}:{addresses[node_id][1]}",
                "--peers", peers, "--data-dir", data_dir, "--mode", "raft"]
        group.nodes[node_id] = LocalNode(node_id, addresses[node_id], data_dir, argv)
    return group


def data_cluster(mode: str, size: int, root: str, trial: int, node_args: Sequence[str],
                 store: LocalCluster | None, seed: int | None) -> LocalCluster:
    """The deployment of one trial: ``size`` data nodes of ``mode`` (+ the SC in fluvio)."""
    args = ["--mode", mode, *node_args]
    if mode == "lease":
        if store is None:
            raise ValueError("mode lease needs its store group")
        members = ",".join(f"{node_id}={host}:{port}" for node_id, (host, port) in store.addresses.items())
        args += ["--store", members, "--core-option", f"lease_key=trial-{trial}"]
    per_node: dict[str, list[str]] = {}
    if seed is not None:  # every node its own seed, fixed by (seed, size, trial, node)
        ids = [f"n{i}" for i in range(1, size + 1)] + ([CONTROLLER_ID] if mode == "fluvio" else [])
        per_node = {node_id: ["--seed", str(((seed * 100 + size) * 1000 + trial) * 10 + i)]
                    for i, node_id in enumerate(ids)}
    return LocalCluster(root, size=size, node_args=args, per_node_args=per_node, controller=mode == "fluvio")


async def until_listening(cluster: LocalCluster, poll: float) -> None:
    """Until every process of ``cluster`` accepts a TCP connection."""

    async def one(node: LocalNode) -> None:
        while True:
            if not node.alive:
                raise TrialFailed(f"node {node.node_id} exited; see {node.stderr_path}")
            try:
                _, writer = await asyncio.open_connection(*node.address)
            except OSError:
                await asyncio.sleep(poll)
                continue
            writer.close()
            return

    await asyncio.wait_for(asyncio.gather(*(one(node) for node in cluster.nodes.values())), PHASE_TIMEOUT)


async def until_written(client: Client, key: str, value: int, leader: str) -> None:
    """Until a write of ``value`` commits (a new leader may hold writes while it synchronises)."""
    deadline = time.monotonic() + PHASE_TIMEOUT
    while time.monotonic() < deadline:
        if (await client.write(key, value, node=leader, timeout=5.0)).ok:
            return
        await asyncio.sleep(0.02)
    raise TrialFailed(f"no write of {key} committed within {PHASE_TIMEOUT:g} s")


async def until_steady(client: Client, data_ids: list[str], leader: str, term: int, controller: bool,
                       poll: float) -> tuple[str, int]:
    """Until every data node follows ``leader`` in ``term`` and committed as far as the leader had when
    asked (fluvio: and the SC's LRS holds every SPU). Returns the leader and term, which change if
    another election happened meanwhile."""
    deadline = time.monotonic() + PHASE_TIMEOUT
    target: int | None = None
    while time.monotonic() < deadline:
        results = await asyncio.gather(*(client.status(n, timeout=1.0) for n in data_ids))
        statuses = {r.node: r.value for r in results if r.ok and isinstance(r.value, dict)}
        newer = [s for s in statuses.values() if s.get("role") == "leader" and s["term"] > term]
        if newer:
            leader, term, target = newer[0]["node"], newer[0]["term"], None
            continue
        if target is None and leader in statuses:
            target = statuses[leader]["commit_index"]
        settled = target is not None and len(statuses) == len(data_ids) and all(
            s["term"] == term and (s["node"] == leader or s.get("leader") == leader)
            and s["commit_index"] >= target for s in statuses.values())
        if settled and controller:
            sc = await client.status(CONTROLLER_ID, timeout=1.0)
            settled = sc.ok and sorted(sc.value.get("lrs", [])) == sorted(data_ids)
        if settled:
            return leader, term
        await asyncio.sleep(poll)
    raise TrialFailed(f"the cluster did not settle under {leader} (term {term}) within {PHASE_TIMEOUT:g} s")


async def run_trial(trial: Trial, cluster: LocalCluster, poll: float) -> None:
    """Steps 1 to 3 of the module docstring on a cluster not yet started; fills ``trial``."""
    data_ids = [n for n in cluster.nodes if n != CONTROLLER_ID]
    async with cluster.client(timeout=5.0) as client:
        spawned = time.monotonic()
        cluster.start()

        async def listening() -> None:
            await until_listening(cluster, poll)
            trial.listening_s = time.monotonic() - spawned

        async def first_leader() -> tuple[str, int]:
            leader, term, _ = await find_leader(client, data_ids, timeout=PHASE_TIMEOUT, poll=poll)
            trial.first_leader_s = time.monotonic() - spawned
            return leader, term

        _, (leader, term) = await asyncio.gather(listening(), first_leader())
        trial.leader, trial.term = leader, term
        await until_written(client, "before", trial.trial, leader)
        trial.first_write_s = time.monotonic() - spawned
        settling = time.monotonic()
        leader, term = await until_steady(client, data_ids, leader, term, CONTROLLER_ID in cluster.nodes, poll)
        trial.steady_s = time.monotonic() - settling
        trial.leader, trial.term = leader, term

        killed = time.monotonic()
        cluster.nodes[leader].kill()
        survivors = [n for n in data_ids if n != leader]
        try:
            new_leader, new_term, _ = await find_leader(client, survivors, min_term=term + 1,
                                                        timeout=PHASE_TIMEOUT, poll=poll)
        except TimeoutError as exc:
            raise TrialFailed(str(exc)) from None
        trial.failover_s = time.monotonic() - killed
        trial.new_leader, trial.new_term = new_leader, new_term
        await until_written(client, "after", trial.trial, new_leader)
        trial.failover_write_s = time.monotonic() - killed
        read = await client.read("before", node=new_leader, timeout=5.0)
        if not (read.ok and read.value == trial.trial):
            raise TrialFailed(f"after failover the committed write before={trial.trial} read back as {read}")


def run_mode_size(mode: str, size: int, args: argparse.Namespace, root: str) -> list[Trial]:
    """Every trial of one mode and size (with the lease store group around them in lease mode)."""
    trials: list[Trial] = []
    store = lease_store_group(os.path.join(root, f"{mode}-{size}-store")) if mode == "lease" else None
    try:
        if store is not None:
            started = time.monotonic()
            store.start()
            asyncio.run(_store_leader(store))
            print(f"  {mode} {size}: store group s1..s{LEASE_STORE_SIZE} has a leader "
                  f"{time.monotonic() - started:.2f} s after spawn", flush=True)
        for number in range(args.trials):
            trial = Trial(mode, size, number)
            trial_root = os.path.join(root, f"{mode}-{size}-trial{number}")
            with data_cluster(mode, size, trial_root, number, args.node_args, store, args.seed) as cluster:
                try:
                    asyncio.run(run_trial(trial, cluster, args.poll))
                except (TrialFailed, TimeoutError) as exc:
                    trial.error = str(exc) or type(exc).__name__
            print("  " + describe(trial), flush=True)
            if trial.error is None:
                shutil.rmtree(trial_root, ignore_errors=True)
            trials.append(trial)
    finally:
        if store is not None:
            store.kill_all()
    return trials


async def _store_leader(store: LocalCluster) -> None:
    async with store.client(timeout=2.0) as client:
        await find_leader(client, store.nodes, timeout=PHASE_TIMEOUT)


def describe(trial: Trial) -> str:
    def s(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    line = (f"{trial.mode} {trial.size} #{trial.trial}: listening {s(trial.listening_s)}, first leader "
            f"{s(trial.first_leader_s)} ({trial.leader} term {trial.term}), first write {s(trial.first_write_s)}, "
            f"settled in {s(trial.steady_s)}, failover {s(trial.failover_s)} ({trial.new_leader} term "
            f"{trial.new_term}), failover to write {s(trial.failover_write_s)}")
    return line + (f"  FAILED: {trial.error}" if trial.error else "")


def spread(values: list[float]) -> str:
    """``median (min-max)`` of a non-empty list, else ``-``."""
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def print_table(size: int, trials: list[Trial], loads: tuple[tuple[float, ...], tuple[float, ...]],
                mode_loads: dict[str, float]) -> None:
    start, end = loads
    print()
    print(f"{size} data nodes: median (min-max) in seconds over the trials that got that far; "
          f"load average at start {start[0]:.2f} {start[1]:.2f} {start[2]:.2f}, "
          f"at end {end[0]:.2f} {end[1]:.2f} {end[2]:.2f} ({os.cpu_count()} CPUs)")
    header = ["mode", "ok", "all listening", "first leader", "first write", "failover", "failover to write",
              "load at mode start"]
    rows = []
    for mode in dict.fromkeys(t.mode for t in trials):
        of_mode = [t for t in trials if t.mode == mode]

        def values(name: str, of_mode: list[Trial] = of_mode) -> list[float]:
            return [getattr(t, name) for t in of_mode if getattr(t, name) is not None]

        rows.append([mode, f"{sum(t.error is None for t in of_mode)}/{len(of_mode)}", spread(values("listening_s")),
                     spread(values("first_leader_s")), spread(values("first_write_s")),
                     spread(values("failover_s")), spread(values("failover_write_s")),
                     f"{mode_loads[mode]:.2f}"])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def parse_list(parser: argparse.ArgumentParser, text: str, what: str,
               allowed: Sequence[str] | None = None) -> list[str]:
    """The items of a comma-separated option; a usage error naming the bad value otherwise."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    unknown = [item for item in items if allowed is not None and item not in allowed]
    if not items or unknown:
        parser.error(f"bad {what} {text!r}: give a comma-separated list"
                     + (f" of {', '.join(allowed)}" if allowed else ""))
    return items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated (default {','.join(MODES)})")
    parser.add_argument("--sizes", default="3,5", help="data nodes per cluster, comma-separated (default 3,5)")
    parser.add_argument("--trials", type=int, default=10, help="fresh deployments per mode and size (default 10)")
    parser.add_argument("--poll", type=float, default=0.02, help="seconds between status polls (default 0.02)")
    parser.add_argument("--seed", type=int, default=None, help="seed the nodes' RNGs (default: os.urandom)")
    parser.add_argument("--root", default=None, help="data directories (default: a new temporary directory)")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write every trial to FILE")
    parser.add_argument("node_args", nargs=argparse.REMAINDER, help="after --: options for every data node")
    args = parser.parse_args(argv)
    args.node_args = args.node_args[1:] if args.node_args[:1] == ["--"] else args.node_args
    modes = parse_list(parser, args.modes, "--modes", MODES)
    sizes_text = parse_list(parser, args.sizes, "--sizes")
    if not all(s.isdigit() and int(s) >= 2 for s in sizes_text):
        parser.error(f"bad --sizes {args.sizes!r}: give data node counts of 2 or more, e.g. 3,5")
    if args.trials < 1 or not args.poll > 0:
        parser.error("--trials must be at least 1 and --poll a positive number of seconds")
    root = args.root or tempfile.mkdtemp(prefix="election-bench-")
    os.makedirs(root, exist_ok=True)
    print(f"election benchmark: modes {', '.join(modes)}; sizes {', '.join(sizes_text)}; {args.trials} fresh "
          f"deployments each; node options: {' '.join(args.node_args) or '(defaults)'}; poll {args.poll:g} s",
          flush=True)
    every: list[Trial] = []
    tables = []
    for size in map(int, sizes_text):
        trials: list[Trial] = []
        mode_loads = {}
        start = os.getloadavg()
        for mode in modes:
            mode_loads[mode] = os.getloadavg()[0]
            print(f"{mode}, {size} data nodes ...", flush=True)
            trials += run_mode_size(mode, size, args, root)
        tables.append((size, trials, (start, os.getloadavg()), mode_loads))
        every += trials
    for table in tables:
        print_table(*table)
    if args.json:
        with open(args.json, "w") as out:
            json.dump([asdict(t) for t in every], out, indent=1)
    failed = [t for t in every if t.error]
    if failed:
        print(f"\n{len(failed)} trial(s) failed; their node logs and journals are under {root}")
    elif args.root is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
