"""A dead node fails over identically on real processes and in the simulator.

The client policy (``cluster.client.Client.request``: a refused connection means the request never
left, so the operation moves to the next node it has not tried, and a ``not-leader`` reply is followed
to the leader it names) is one piece of code: containers and real processes drive it over TCP
(``NodeConnection``), the simulator over its simulated connections (``adapters.cluster.sim.SimConnection``).
The same scenario on both, a follower killed and placed first in the client's node order, must end the
same way: refused by the dead node, answered ``ok`` by the leader after exactly one move, and the leader
hint left on the leader.
"""

from __future__ import annotations

import asyncio

import pytest

from adapters.cluster.client import ClusterWorkloadClient
from adapters.cluster.sim import SimulatedCluster, WorldConfig
from cluster.client import Client, Result
from cluster.local import LocalCluster, find_leader
from harness.sim.loop import run_simulated

FAST = ["--heartbeat-interval", "0.05", "--missed-heartbeats", "3", "--election-random-wait", "0.3",
        "--proposal-timeout", "0.3", "--mode", "raft"]


def _order(leader: str, dead: str, nodes: list[str]) -> list[str]:
    """The dead follower first, then the leader, then the rest: one failover reaches the leader."""
    return [dead, leader, *(n for n in nodes if n not in (dead, leader))]


def _outcome(result: Result, client: Client, leader: str, dead: str) -> tuple[str, str, int, str | None]:
    return (result.type, "leader" if result.node == leader else str(result.node), result.redirects,
            "leader" if client.leader_hint == leader else client.leader_hint)


Outcome = tuple[str, str, int, str | None]


def simulated_failover() -> tuple[Outcome, Outcome]:
    system = SimulatedCluster(WorldConfig(nodes=3, mode="raft"), seed=3)
    system.start()
    world = system.world
    world.run_for(5.0)
    leader = world.leader()
    assert leader is not None
    dead = next(n for n in system.nodes if n != leader)
    world.kill(dead)

    async def scenario() -> tuple[Outcome, Outcome]:
        workload = await system.open_client(0, 5.0)  # the workload client of a container run, simulated
        assert isinstance(workload, ClusterWorkloadClient)
        client = workload.client
        client.nodes = {n: client.nodes[n] for n in _order(leader, dead, list(client.nodes))}
        first = await client.write("k1", 7)
        second = await client.write("k1", 8)
        return _outcome(first, client, leader, dead), _outcome(second, client, leader, dead)

    return run_simulated(world, scenario())


@pytest.mark.slow
def test_a_dead_node_fails_over_identically_on_real_processes_and_in_the_simulator(tmp_path) -> None:
    with LocalCluster(str(tmp_path), size=3, node_args=FAST) as local:
        local.start()
        local.wait_listening()

        async def scenario() -> tuple[Outcome, Outcome]:
            async with local.client(timeout=3.0) as probe:
                leader, _, _ = await find_leader(probe, local.nodes, timeout=10)
            dead = next(n for n in local.nodes if n != leader)
            local.nodes[dead].kill()
            addresses = local.addresses
            async with Client({n: addresses[n] for n in _order(leader, dead, list(addresses))}, timeout=5.0) as client:
                first = await client.write("k1", 7)
                second = await client.write("k1", 8)
                return _outcome(first, client, leader, dead), _outcome(second, client, leader, dead)

        real = asyncio.run(scenario())
    assert real == simulated_failover() == EXPECTED


EXPECTED = (("ok", "leader", 1, "leader"), ("ok", "leader", 0, "leader"))
"""Refused by the dead follower, answered by the leader after one move; then straight to the leader."""


def test_in_the_simulator_a_dead_node_is_refused_and_the_client_moves_on() -> None:
    assert simulated_failover() == EXPECTED
