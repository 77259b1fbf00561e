"""Time to first leader and failover after a leader kill in `lease` mode, with real processes.

Three `raft` store nodes and three `lease` data nodes on 127.0.0.1 (cluster.local): start the store and
wait for its leader, start the data nodes and wait for a data leader (time to first leader), write, SIGKILL
the leader, wait for a leader of the next generation (failover), read the write back. Prints each run and
the medians (docs/election-lease.md "Figures"):

    .venv/bin/python benchmarks/lease_election.py --runs 10 --root /tmp/lease-bench
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import time

from cluster.local import LocalCluster, find_leader


async def one_run(root: str) -> tuple[float, float]:
    """(time to first leader, failover time) of one fresh deployment under `root`."""
    store = LocalCluster(os.path.join(root, "store"), size=3, node_args=["--mode", "raft"])
    members = ",".join(f"s{node_id[1:]}={host}:{port}" for node_id, (host, port) in store.addresses.items())
    data = LocalCluster(os.path.join(root, "data"), size=3, node_args=["--mode", "lease", "--store", members])
    with store, data:
        store.start()
        store.wait_listening()
        async with store.client() as store_client:
            await find_leader(store_client, store.nodes, timeout=20)
        started = time.monotonic()
        data.start()
        async with data.client(timeout=2.0) as client:
            leader, term, _ = await find_leader(client, data.nodes, timeout=20)
            first = time.monotonic() - started
            if not (await client.write("x", 1, node=leader)).ok:
                raise RuntimeError("the first leader did not take a write")
            data.nodes[leader].kill()
            killed = time.monotonic()
            others = [n for n in data.nodes if n != leader]
            new, _, _ = await find_leader(client, others, min_term=term + 1, timeout=20)
            failover = time.monotonic() - killed
            read = await client.read("x", node=new)
            if not (read.ok and read.value == 1):
                raise RuntimeError(f"the write was not read back after failover: {read}")
    return first, failover


async def main(runs: int, root: str) -> None:
    shutil.rmtree(root, ignore_errors=True)
    firsts, failovers = [], []
    for run in range(runs):
        first, failover = await one_run(os.path.join(root, f"run{run}"))
        firsts.append(first)
        failovers.append(failover)
        print(f"run {run}: first leader {first:.3f} s, failover {failover:.3f} s", flush=True)
    print(f"median first leader {statistics.median(firsts):.3f} s, "
          f"median failover {statistics.median(failovers):.3f} s (n={runs})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--root", default="/tmp/lease-bench")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.root))
