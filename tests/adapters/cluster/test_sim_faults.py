"""The simulator's faults reach the processes the container runs' faults reach (issue 7), through the one
fault driver (``nemesis.driver.FaultDriver``) over the simulated cluster's network, clocks and processes.

* the seed's schedule is ``harness run``'s for the same options, drawn from the same fault targets
  (``harness.db.fault_targets``): in ``fluvio`` mode the controller ``sc`` is one of them;
* the fluvio controller is killed and restarted (also by the recovery faults), paused, clock-skewed and
  partitioned like a node, and each of these acts on it in the world;
* lease store members are never targets, but a partition of their host cuts them too;
* a fluvio run whose faults hit the controller replays byte for byte.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from adapters.cluster.db import ClusterDB
from adapters.cluster.sim import SimulatedCluster, World, WorldConfig
from harness.compose import compose
from harness.sim.run import simulate
from harness.spec import TestSpec
from nemesis import grudge as grudges
from nemesis.driver import FaultDriver
from nemesis.faults import ClockBump, ClockReset, Heal, Kill, Partition, Pause, Resume, Start

SIX = ("partition", "kill", "pause", "clock", "loss", "latency")


class Nemesis:
    """The one fault driver over a simulated cluster, applying faults with no leader known."""

    def __init__(self, driver: FaultDriver) -> None:
        self.driver = driver

    def __getattr__(self, name: str) -> object:
        return getattr(self.driver, name)

    def apply(self, fault: object) -> object:
        return self.driver.apply(fault, None)


def _world(mode: str, nodes: int = 3, seed: int = 5) -> tuple[World, Nemesis]:
    """A started world with a leader, and the fault driver over it."""
    system = SimulatedCluster(WorldConfig(nodes=nodes, mode=mode), seed)
    system.start()
    world = system.world
    world.run_for(5.0)
    assert world.leader() is not None
    driver = FaultDriver(system.fault_targets, net=system.net, clocks=system.clocks, processes=system.processes,
                         rng=random.Random(seed))
    return world, Nemesis(driver)


def _leaders(world: World, seconds: float) -> list[str | None]:
    """The leader every 0.5 s for ``seconds``."""
    seen = []
    for _ in range(int(seconds / 0.5)):
        world.run_for(0.5)
        seen.append(world.leader())
    return seen


def _strings(value: object) -> set[str]:
    """Every string in a JSON value (keys too): the process names a schedule line mentions among them."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return {s for key, item in value.items() for s in _strings(key) | _strings(item)}
    if isinstance(value, list):
        return {s for item in value for s in _strings(item)}
    return set()


@pytest.mark.parametrize("mode", ["blazingmq", "fluvio", "lease"])
def test_the_seed_schedule_is_the_container_runs_schedule(mode: str) -> None:
    for seed in (1, 7, 12):
        container = compose(TestSpec(seed=seed, db="cluster", db_options={"mode": mode}, nodes=3, nemesis=SIX))
        sim = compose(TestSpec(seed=seed, db="cluster", db_options={"mode": mode}, nodes=3, nemesis=SIX,
                               platform="sim"))
        system = sim.db.simulate(sim.node_names, seed)
        assert system.fault_targets == ClusterDB(mode).fault_targets(("n1", "n2", "n3")) == sim.fault_targets()
        assert sim.schedule() == container.schedule(), (mode, seed)
    named = {name for entry in sim.schedule() for name in _strings(entry.to_json())}
    assert ("sc" in named) == (mode == "fluvio")
    assert not {"s1", "s2", "s3"} & named


def test_the_fluvio_controller_is_killed_and_restarted_like_a_node() -> None:
    world, nemesis = _world("fluvio")
    assert nemesis.nodes == ("n1", "n2", "n3", "sc")
    epoch = world.nodes["sc"].core.state.epoch
    assert nemesis.apply(Kill(("sc",))).value == {"nodes": ["sc"]}
    assert not world.nodes["sc"].up and nemesis.killed == {"sc"}
    # Without the SC's ReplicaSetUpdates the leader steps down (docs/election-fluvio.md).
    assert _leaders(world, 4.0)[-1] is None
    assert nemesis.recovery_faults() == [Start(("sc",))]
    assert nemesis.apply(Start(("sc",))).value == {"nodes": ["sc"]}
    assert world.nodes["sc"].up and world.nodes["sc"].incarnation == 2 and not nemesis.killed
    assert _leaders(world, 3.0)[-1] is not None
    assert world.nodes["sc"].core.state.epoch > epoch  # the restarted SC recovered its epoch and went on


def test_kill_all_reaches_the_controller_and_the_final_start_brings_it_back() -> None:
    world, nemesis = _world("fluvio")
    assert nemesis.apply(Kill("all")).value == {"nodes": ["n1", "n2", "n3", "sc"]}
    assert [fault.targets for fault in nemesis.recovery_faults()] == [("n1", "n2", "n3", "sc")]
    nemesis.apply(nemesis.recovery_faults()[0])
    assert all(world.nodes[p].up for p in world.process_ids)
    assert _leaders(world, 5.0)[-1] is not None


def test_a_paused_controller_buffers_its_reports_and_the_leader_steps_down() -> None:
    world, nemesis = _world("fluvio")
    nemesis.apply(Pause(("sc",)))
    assert world.nodes["sc"].paused and nemesis.paused == {"sc"}
    assert _leaders(world, 4.0)[-1] is None
    assert world.nodes["sc"].inbox, "SpuStatus reports wait in the paused SC's socket buffers"
    nemesis.apply(Resume(("sc",)))
    assert not world.nodes["sc"].inbox and not nemesis.paused
    assert _leaders(world, 3.0)[-1] is not None


def test_a_partition_isolating_the_controller_cuts_its_host() -> None:
    world, nemesis = _world("fluvio")
    outcome = nemesis.apply(Partition("isolate", grudge=grudges.isolate(nemesis.nodes, "sc")))
    assert outcome.value["grudge"]["sc"] == ["n1", "n2", "n3"]
    assert world.network.cut("n1", world.nodes["sc"].host) and world.network.cut("sc", "n2")
    assert _leaders(world, 4.0)[-1] is None
    nemesis.apply(Heal())
    assert _leaders(world, 3.0)[-1] is not None


def test_the_controller_clock_is_skewed_and_reset() -> None:
    world, nemesis = _world("fluvio")
    before = world.nodes["sc"].clock.offset
    outcome = nemesis.apply(ClockBump({"sc": -30.0}))
    assert outcome.value["offsets"] == {"sc": round(before - 30.0, 6)}
    assert nemesis.recovery_faults() == [ClockReset("all")]
    nemesis.apply(ClockReset("all"))
    assert world.nodes["sc"].clock.offset == 0.0 and nemesis.clock is None


def test_lease_store_members_are_no_targets_but_move_with_their_host() -> None:
    world, nemesis = _world("lease")
    assert nemesis.nodes == ("n1", "n2", "n3")
    assert nemesis.apply(Kill("all")).value == {"nodes": ["n1", "n2", "n3"]}
    assert all(world.nodes[member].up for member in ("s1", "s2", "s3"))
    nemesis.apply(Start("all"))
    nemesis.apply(Partition("isolate", grudge=grudges.isolate(nemesis.nodes, "n1")))
    s1, s2 = world.nodes["s1"].host, world.nodes["s2"].host
    assert s1 == "n1" and world.network.cut(s2, s1) and world.network.cut(s1, s2)
    # With fewer data nodes than store members, a member shares a host as the containers place it.
    assert [WorldConfig(nodes=2, mode="lease").host_of(m) for m in ("s1", "s2", "s3")] == ["n1", "n2", "n1"]


def test_a_fluvio_run_whose_faults_hit_the_controller_replays_byte_for_byte(tmp_path: Path) -> None:
    spec = TestSpec(seed=12, db="cluster", db_options={"mode": "fluvio"}, nodes=3, time_limit=20.0,
                    nemesis_interval=4.0, nemesis=SIX, platform="sim")
    first = simulate(spec, tmp_path / "a", checkers=())
    second = simulate(spec, tmp_path / "b", checkers=())
    assert first.digest == second.digest
    history = [json.loads(line) for line in (tmp_path / "a/history.jsonl").read_text().splitlines()]
    hit = [e for e in history if e["process"] == "nemesis" and e["type"] == "ok" and "sc" in json.dumps(e["value"])]
    assert hit, "no applied fault named the controller"
    assert (tmp_path / "a/nodes/sc/journal.jsonl").read_bytes() == (tmp_path / "b/nodes/sc/journal.jsonl").read_bytes()
