"""End to end, lease mode: a 3-node `raft` store group and 3 lease-mode data nodes, all real processes.

The data nodes reach the store through `--store s1=host:port,...` (cluster/store_link.py). Elect, write,
SIGKILL the leader, see the next generation lead with the write intact, and see the key in the store.
"""

import asyncio
import os

import pytest

from cluster.local import LocalCluster, find_leader

pytestmark = pytest.mark.slow

FAST = ["--heartbeat-interval", "0.1", "--core-option", "lease_ttl=1.0"]


async def until_ok(call, timeout: float = 15.0):
    """Retry a client call (which follows redirects) until ok: on a loaded machine a lease may lapse and
    leadership move between the status poll and the call."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = await call()
        if result.ok or loop.time() > deadline:
            return result
        await asyncio.sleep(0.1)


def test_lease_mode_elects_through_the_store_and_fails_over(tmp_path) -> None:
    store = LocalCluster(os.path.join(tmp_path, "store"), size=3,
                         node_args=["--mode", "raft", "--heartbeat-interval", "0.05"])
    members = ",".join(f"s{node_id[1:]}={host}:{port}" for node_id, (host, port) in store.addresses.items())
    data = LocalCluster(os.path.join(tmp_path, "data"), size=3,
                        node_args=[*FAST, "--mode", "lease", "--store", members])

    async def scenario() -> None:
        async with store.client(timeout=2.0) as store_client, data.client(timeout=2.0) as client:
            await find_leader(store_client, store.nodes, timeout=20)
            data.start()
            data.wait_listening()
            leader, term, _ = await find_leader(client, data.nodes, timeout=20)
            assert (await until_ok(lambda: client.write("x", 1))).ok
            status = await client.status(leader)
            record = await store_client.request("read", key="leader")
            assert record.ok and status.ok
            if status.value["role"] == "leader":  # the store names the leader; its generation is the term
                assert (record.value["holder"], record.value["generation"]) == (leader, status.value["term"])
            leader, term, _ = await find_leader(client, data.nodes, timeout=20)
            data.nodes[leader].kill()
            others = [n for n in data.nodes if n != leader]
            await find_leader(client, others, min_term=term + 1, timeout=20)
            read = await until_ok(lambda: client.read("x"))
            assert read.ok and read.value == 1

    with store, data:
        store.start()
        store.wait_listening()
        asyncio.run(scenario())
