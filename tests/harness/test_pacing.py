"""Election storms paced by the system (harness.pacing): a storm's heal waits for the successor of the
leader its fault took away, its next fault for the cluster to serve again, each wait bounded; the
single-fault packages keep their offsets. In-process, on a virtual-time loop, with a fake cluster whose
elections take as long as a test says."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from checkers.history import load_history
from harness.history import HistoryWriter
from harness.interpreter import FaultOutcome, Interpreter, InterpreterConfig
from harness.pacing import (
    DEFAULT_STORM_PACING,
    STORM_PACINGS,
    PacingRules,
    Step,
    paced_packages,
    rules_for,
    split_schedule,
)
from harness.spec import ConfigError, TestSpec
from nemesis.faults import Heal, Kill, Partition, Pause, Resume, Start
from nemesis.generator import PACKAGES, NemesisOptions, generate_schedule
from tests.harness.test_interpreter import SECOND, FakeWorkload, VirtualTimeLoop
from workloads.ops import Op

NODES = ("n1", "n2", "n3")
STORM = "leader-churn"
FIXED = "partition"


@dataclass(frozen=True)
class Entry:
    at: float
    package: str
    fault: Any


class ElectingCluster:
    """A leader, a term, paused nodes: pausing the leader elects the lowest running node ``election``
    seconds later (with ``None``, the cluster has no leader from then on); clients are answered ``ok``
    only by a running leader."""

    def __init__(self, loop: VirtualTimeLoop, election: float | None) -> None:
        self.loop = loop
        self.election = election
        self.leader: str | None = "n1"
        self.term = 1
        self.paused: set[str] = set()
        self.applied: list[tuple[float, str]] = []

    def _elect(self) -> None:
        running = [n for n in NODES if n not in self.paused]
        if running and (self.leader is None or self.leader in self.paused):
            self.leader, self.term = running[0], self.term + 1

    async def status(self, node: str, timeout: float) -> Mapping[str, Any]:
        if node in self.paused:
            await asyncio.sleep(3600)
        role = "leader" if node == self.leader else "follower"
        return {"node": node, "role": role, "term": self.term, "leader": self.leader}


class Client:
    def __init__(self, cluster: ElectingCluster) -> None:
        self.cluster = cluster

    async def invoke(self, op: Op) -> Mapping[str, Any]:
        await asyncio.sleep(0.01)
        leader = self.cluster.leader
        if leader is None or leader in self.cluster.paused:
            return {"type": "fail", "error": "not-leader"}
        return {"type": "ok", "node": leader, "value": None if op.f == "read" else None}

    async def close(self) -> None:
        pass


class Driver:
    def __init__(self, cluster: ElectingCluster) -> None:
        self.cluster = cluster

    def describe(self, fault: Any) -> tuple[str, Any]:
        self.current = fault  # described just before it is applied
        return fault.f, fault.value()

    def apply(self, fault: Any, leader: str | None) -> FaultOutcome:
        cluster = self.cluster
        cluster.applied.append((round(cluster.loop.time() - 1000.0, 3), fault.f))
        if isinstance(fault, Pause):
            target = leader if fault.targets == "leader" else fault.targets
            if target is None:
                return FaultOutcome(error="no leader is known")
            cluster.paused.add(target)
            if target == cluster.leader and cluster.election is None:
                cluster.leader = None  # lost, and nobody is ever elected again
            elif target == cluster.leader:
                cluster.loop.call_later(cluster.election, cluster._elect)
        elif isinstance(fault, Resume):
            cluster.paused.clear()
        return FaultOutcome(value={"ok": True})

    def recovery_faults(self) -> list[Any]:
        return [Resume("all")] if self.cluster.paused else []

    def active(self) -> list[str]:
        return sorted(self.cluster.paused)


def _run(tmp_path, schedule, *, election: float | None, time_limit: float = 20.0,
         rules: PacingRules | None = None, apply_seconds: Mapping[str, float] | None = None):
    """``apply_seconds``: how long applying a fault takes, by ``f`` (instant by default)."""
    loop = VirtualTimeLoop()
    try:
        cluster = ElectingCluster(loop, election)
        config = InterpreterConfig(concurrency=2, time_limit=time_limit, op_timeout=1.0, status_timeout=0.5,
                                   recovery_timeout=30.0, pacing=rules or PacingRules())
        path = tmp_path / "history.jsonl"

        async def open_client(process: int) -> Client:
            return Client(cluster)

        driver = Driver(cluster)

        async def at_once(apply):
            await asyncio.sleep((apply_seconds or {}).get(driver.current.f, 0.0))
            return apply()

        async def main():
            with HistoryWriter(path, lambda: int(loop.time() * SECOND)) as history:
                interpreter = Interpreter(
                    history, nodes=NODES, workload=FakeWorkload(think=0.05), open_client=open_client,
                    config=config, nemesis=driver, schedule=schedule, status=cluster.status,
                    run_fault=at_once,
                )
                return await interpreter.run()

        stats = loop.run_until_complete(main())
    finally:
        loop.close()
    return load_history(path), stats, cluster


def _churn(*steps: tuple[float, Any]) -> list[Entry]:
    return [Entry(at, STORM, fault) for at, fault in steps]


def test_the_paced_packages_are_the_ones_with_a_pace_and_steps_group_one_instant() -> None:
    assert paced_packages() == {name for name, package in PACKAGES.items() if package.pace is not None}
    assert STORM in paced_packages() and FIXED not in paced_packages()
    schedule = generate_schedule(f"{FIXED},slow-net", ["n1", "n2", "n3"], __import__("random").Random(3), 30.0,
                                 NemesisOptions())
    fixed, paced = split_schedule(schedule, 30.0)
    assert fixed == [e for e in schedule if e.package == FIXED and e.at < 30.0]
    steps = paced["slow-net"]
    assert [s.at for s in steps] == sorted({e.at for e in schedule if e.package == "slow-net" and e.at < 30.0})
    # slow-net's fault is latency and loss at one instant; its heal, both heals.
    assert all(len(s.faults) == 2 for s in steps)
    assert [s.heal for s in steps] == [i % 2 == 1 for i in range(len(steps))]


def test_a_step_knows_whether_it_deposes_the_leader() -> None:
    assert Step(1.0, (Pause("leader"),)).deposes_leader
    assert Step(1.0, (Kill("leader"),)).deposes_leader
    assert Step(1.0, (Partition(kind="isolate", target="leader"),)).deposes_leader
    assert not Step(1.0, (Pause("followers"),)).deposes_leader
    assert not Step(1.0, (Pause("all"), Kill("minority"))).deposes_leader
    assert Step(1.0, (Heal(), Resume("all"), Start("all"))).heal


def test_a_ring_wants_a_successor_whoever_it_cuts_off() -> None:
    # ring-storm's pace says its faults are there to bring elections: a ring's heal waits for a newer
    # leader as a churn's does; no other storm's fault that spares the leader does.
    ring = Partition(kind="majorities-ring", grudge={"n1": ["n3"]})
    assert Step(1.0, (ring,), elects=True).wants_successor
    assert not Step(1.0, (ring,)).wants_successor
    assert not Step(1.0, (Heal(),), elects=True).wants_successor
    assert Step(1.0, (Pause("leader"),)).wants_successor
    assert not Step(1.0, (Pause("followers"),)).wants_successor
    electing = {name for name, package in PACKAGES.items() if package.pace is not None and package.pace.elects}
    assert electing == {"ring-storm"}
    schedule = generate_schedule("ring-storm,leader-churn", ["n1", "n2", "n3", "n4", "n5"],
                                 __import__("random").Random(4), 30.0, NemesisOptions())
    _, paced = split_schedule(schedule, 30.0)
    assert paced["ring-storm"] and all(step.elects for step in paced["ring-storm"])
    assert all(step.wants_successor != step.heal for step in paced["ring-storm"])
    assert not any(step.elects for step in paced["leader-churn"])


def test_a_ring_through_the_leader_has_no_successor_to_wait_for(tmp_path) -> None:
    # n1 leads throughout. The first ring is a bridge through n1 (n2 and n3 cannot hear each other, both
    # hear n1): nobody loses the leader, so its heal comes at its drawn hold. The second cuts n1 off from
    # n3: its heal waits for a successor, none comes, and it waits the whole successor_wait.
    through_leader = Partition(kind="bridge", grudge={"n2": ["n3"], "n3": ["n2"]})
    cutting_leader = Partition(kind="bridge", grudge={"n1": ["n3"], "n3": ["n1"]})
    assert Step(1.0, (through_leader,), elects=True).spares("n1")
    assert not Step(1.0, (through_leader,), elects=True).spares("n2")
    assert not Step(1.0, (through_leader,), elects=True).spares(None)
    assert not Step(1.0, (cutting_leader,), elects=True).spares("n1")
    assert not Step(1.0, (Pause("leader"),)).spares("n1")
    schedule = [Entry(at, "ring-storm", fault) for at, fault in
                ((1.0, through_leader), (2.0, Heal()), (2.5, cutting_leader), (3.5, Heal()))]
    _, stats, cluster = _run(tmp_path, schedule, election=None, rules=PacingRules(successor_wait=2.0))
    chaos = [at for at, _ in cluster.applied if at < 20.0]
    assert chaos == pytest.approx([1.0, 2.0, 2.5, 5.5], abs=0.15)
    pacing = stats.pacing.packages["ring-storm"]
    assert (pacing.leader_spared, pacing.no_successor, pacing.successors) == (1, 1, 0)
    assert stats.to_json()["pacing"]["ring-storm"]["leader_spared"] == 1


def test_a_heal_waits_for_the_successor_and_later_steps_move_with_it(tmp_path) -> None:
    # Hold 1 s, but the election takes 3 s: the heal waits until the pollers see n2 lead term 2.
    schedule = _churn((2.0, Pause("leader")), (3.0, Resume("all")), (3.5, Pause("leader")), (4.5, Resume("all")))
    history, stats, cluster = _run(tmp_path, schedule, election=3.0)
    chaos = [(at, f) for at, f in cluster.applied if at < 20.0]
    assert [f for _, f in chaos] == ["pause", "resume", "pause", "resume"]
    (pause1, _), (resume1, _), (pause2, _), (resume2, _) = chaos
    assert pause1 == pytest.approx(2.0, abs=0.01)
    # n2 leads from 5.0 s; the pollers (every second) see it by 6.0 s.
    assert 5.0 <= resume1 <= 6.2
    # The gap (0.5 s) counts from the first operation served after the heal: right after it here.
    assert resume1 + 0.5 <= pause2 <= resume1 + 0.7
    # The second pause took n2 away; n3 leads 3 s later.
    assert pause2 + 3.0 <= resume2 <= pause2 + 4.2
    assert stats.pacing.packages[STORM].successors == 2
    assert stats.pacing.packages[STORM].no_successor == 0
    assert stats.pacing.packages[STORM].served == 1
    assert stats.pacing.packages[STORM].delayed_s > 3.0
    assert stats.to_json()["pacing"][STORM]["steps"] == 4
    assert [op.f for op in history.nemesis][:4] == ["pause", "resume", "pause", "resume"]


def test_a_quick_election_keeps_the_schedule(tmp_path) -> None:
    schedule = _churn((2.0, Pause("leader")), (4.0, Resume("all")), (4.5, Pause("leader")), (6.5, Resume("all")))
    _, stats, cluster = _run(tmp_path, schedule, election=0.2)
    chaos = [at for at, _ in cluster.applied if at < 20.0]
    assert chaos == pytest.approx([2.0, 4.0, 4.5, 6.5], abs=0.15)
    assert stats.pacing.packages[STORM].successors == 2


def test_holds_and_gaps_count_from_when_a_step_took_effect(tmp_path) -> None:
    # A pause takes 1.5 s to apply (docker exec on a loaded machine): its 1 s hold starts when it is done.
    schedule = _churn((1.0, Pause("all")), (2.0, Resume("all")), (2.5, Pause("all")), (3.5, Resume("all")))
    _, stats, cluster = _run(tmp_path, schedule, election=0.2, apply_seconds={"pause": 1.5})
    (pause1, _), (resume1, _), (pause2, _), (resume2, _) = [(at, f) for at, f in cluster.applied if at < 20.0]
    assert pause1 == pytest.approx(2.5, abs=0.01)  # invoked at 1.0, in effect at 2.5
    assert resume1 == pytest.approx(pause1 + 1.0, abs=0.15)
    assert pause2 == pytest.approx(resume1 + 0.5 + 1.5, abs=0.2)  # the gap, then 1.5 s to apply
    assert resume2 == pytest.approx(pause2 + 1.0, abs=0.15)
    assert stats.pacing.packages[STORM].delayed_s == pytest.approx(3.0, abs=0.3)


def test_every_wait_is_bounded(tmp_path) -> None:
    # Nobody is ever elected: each heal waits successor_wait beyond its hold, and the next fault waits
    # serve_wait beyond its offset for an operation that is never served.
    schedule = _churn((1.0, Pause("leader")), (2.0, Resume("all")), (2.5, Pause("leader")), (3.0, Resume("all")))
    rules = PacingRules(successor_wait=2.0, serve_wait=3.0)
    _, stats, cluster = _run(tmp_path, schedule, election=None, rules=rules, time_limit=30.0)
    chaos = [at for at, _ in cluster.applied if at < 30.0]
    assert chaos[:2] == pytest.approx([1.0, 4.0], abs=0.15)
    # The resume brought no leader back: nothing is served, so 3 s are waited beyond 4.5.
    assert chaos[2] == pytest.approx(7.5, abs=0.15)
    # That pause found no leader to pause (skipped): its heal does not wait for a successor.
    assert chaos[3] == pytest.approx(8.0, abs=0.15)
    pacing = stats.pacing.packages[STORM]
    assert (pacing.no_successor, pacing.successors, pacing.unserved, pacing.served) == (1, 0, 1, 0)


def test_steps_moved_past_the_time_limit_are_left_to_the_final_heal(tmp_path) -> None:
    schedule = _churn((1.0, Pause("leader")), (2.0, Resume("all")), (2.5, Pause("leader")), (3.5, Resume("all")))
    schedule.append(Entry(5.0, STORM, Resume("all")))  # the final heal phase
    _, stats, cluster = _run(tmp_path, schedule, election=None, time_limit=5.0,
                             rules=PacingRules(successor_wait=10.0, serve_wait=10.0))
    assert [f for at, f in cluster.applied if at < 5.0] == ["pause"]
    assert [f for at, f in cluster.applied if at >= 5.0][:1] == ["resume"]
    assert not cluster.paused
    # The three operations never due are not counted as scheduled: coverage is of what came due.
    assert stats.pacing.packages[STORM].past_limit == 3
    assert stats.faults_scheduled == {"pause": 1, "resume": 1}
    assert stats.faults_applied["pause"] == 1


def test_fixed_packages_keep_their_offsets_beside_a_storm(tmp_path) -> None:
    schedule = [*_churn((1.0, Pause("leader")), (2.0, Resume("all"))),
                Entry(1.5, FIXED, Partition(kind="halves", grudge={"n1": frozenset({"n2", "n3"})})), Entry(3.0, FIXED, Heal())]
    _, _, cluster = _run(tmp_path, schedule, election=4.0)
    chaos = [(at, f) for at, f in cluster.applied if at < 20.0]
    assert (1.5, "partition") in [(pytest.approx(at, abs=0.01), f) for at, f in chaos]
    assert [f for _, f in chaos] == ["pause", "partition", "heal", "resume"]


def test_a_run_without_a_storm_records_no_pacing(tmp_path) -> None:
    schedule = [Entry(1.0, FIXED, Partition(kind="halves", grudge={"n1": frozenset({"n2", "n3"})})), Entry(2.0, FIXED, Heal())]
    _, stats, cluster = _run(tmp_path, schedule, election=1.0)
    assert [at for at, _ in cluster.applied][:2] == pytest.approx([1.0, 2.0])
    assert "pacing" not in stats.to_json()


def test_bad_bounds_are_named() -> None:
    with pytest.raises(ValueError, match="successor_wait"):
        PacingRules(successor_wait=-1)
    with pytest.raises(ValueError, match="poll"):
        PacingRules(poll=0)


def test_storm_pacing_is_chosen_per_run_and_a_bad_choice_is_named() -> None:
    assert rules_for("clock") is None and rules_for("system") == PacingRules()
    assert TestSpec(seed=1, db="cluster").storm_pacing == DEFAULT_STORM_PACING == "system"
    assert set(STORM_PACINGS) == {"clock", "system"}
    # a spec stored before storms were paced by the system by default was paced by the clock: it reads so
    assert TestSpec.from_json({"seed": 1, "db": "cluster"}).storm_pacing == "clock"
    assert TestSpec.from_json(TestSpec(seed=1, db="cluster").to_json()).storm_pacing == "system"
    with pytest.raises(ConfigError, match="--storm-pacing must be one of clock, system, not 'fast'"):
        TestSpec(seed=1, db="cluster", storm_pacing="fast").check()


@pytest.mark.timeout(120)
def test_a_paced_wait_whose_rest_is_a_rounding_error_ends_in_the_simulator(tmp_path) -> None:
    # Fluvio, seed 12, both storms paced: at 16 simulated seconds a successor wait was left with a rest
    # a rounding error above zero, which waits no virtual time; the wait asked the clock again and again
    # and the simulation never ended (wall time without end). Its last wait is now the rest, and final.
    from harness.sim.run import simulate

    spec = TestSpec(seed=12, db="cluster", db_options={"mode": "fluvio"}, platform="sim",
                    nemesis=("leader-churn", "timeout-storm"), time_limit=17.0, client_binding="node",
                    storm_pacing="system", store=str(tmp_path))
    result = simulate(spec, tmp_path / "run", checkers=())
    assert result.sim_seconds >= 17.0
    assert result.results["stats"]["pacing"]["leader-churn"]["steps"] >= 5
