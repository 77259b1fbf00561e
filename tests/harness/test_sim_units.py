"""Unit tests of the simulator's parts: the virtual-time loop, clocks, disk, network, seeds, delta
debugging, specs and the CLI's refusals. Each is fast and needs no simulation run."""

from __future__ import annotations

import asyncio
import heapq
import random
import signal
import time
from collections.abc import Callable
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from adapters.cluster import plugin as cluster_plugin
from harness.cli import main
from harness.db.plugin import ENTRY_POINT_GROUP
from harness.sim import loop as loop_module
from harness.sim import run as sim_run
from harness.sim.clock import WALL_EPOCH, NodeClock, to_ns
from harness.sim.disk import SimDisk
from harness.sim.explore import parse_seeds
from harness.sim.loop import NS, Stalled, run_simulated
from harness.sim.network import NetworkOptions, SimNetwork
from harness.sim.run import checker_for_bug, compose_sim, simulatable_db, workload_for_bug
from harness.sim.shrink import Candidate, _Judge, ddmin, fault_units, with_time_limit
from harness.spec import ConfigError, TestSpec
from nemesis import grudge as grudges
from nemesis.faults import Heal, Kill, Partition, Start
from nemesis.generator import ScheduledFault
from workloads.generator import scripts_from_jsonl
from workloads.ops import Op


def sim_spec(seed: int, **fields: object) -> TestSpec:
    return TestSpec(seed=seed, db="cluster", platform="sim", **fields)  # type: ignore[arg-type]


class Ticks:
    """A world whose events are calls at given true times (``harness.sim.loop.EventSource``)."""

    def __init__(self) -> None:
        self.now = 0
        self.queue: list[tuple[int, int, object]] = []
        self.seen: list[tuple[str, int]] = []
        self.sequence = 0

    def at(self, ns: int, what: object) -> None:
        self.sequence += 1
        heapq.heappush(self.queue, (ns, self.sequence, what))

    def schedule(self, at_ns: int, function: Callable[[Any], Any], argument: Any = None) -> None:
        self.at(max(at_ns, self.now), lambda: function(argument))

    def next_event_ns(self) -> int | None:
        return self.queue[0][0] if self.queue else None

    def run_next(self) -> None:
        self.now, _, what = heapq.heappop(self.queue)
        if callable(what):
            what()
        else:
            self.seen.append((str(what), self.now))


def test_the_virtual_loop_interleaves_its_timers_and_the_worlds_events_in_time_order() -> None:
    world = Ticks()
    world.at(int(1.5 * NS), "world at 1.5 s")
    world.at(int(10 * NS), "world at 10 s")
    woken: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await asyncio.sleep(seconds)
        woken.append((name, asyncio.get_running_loop().time()))
        world.seen.append((name, world.now))

    async def main() -> float:
        await asyncio.gather(sleeper("a", 1.0), sleeper("b", 3600.0), sleeper("c", 2.0))
        return asyncio.get_running_loop().time()

    started = time.perf_counter()
    end = run_simulated(world, main())
    assert time.perf_counter() - started < 5.0  # an hour of virtual time passes without waiting for it
    assert end == 3600.0
    assert [name for name, _ in world.seen] == ["a", "world at 1.5 s", "c", "world at 10 s", "b"]
    assert woken == [("a", 1.0), ("c", 2.0), ("b", 3600.0)]


def test_the_virtual_loop_says_when_nothing_can_ever_happen() -> None:
    async def forever() -> None:
        await asyncio.get_running_loop().create_future()

    with pytest.raises(Stalled, match="stalled at 0.000 s"):
        run_simulated(Ticks(), forever())


def _heartbeats_for_an_hour(world: Ticks) -> None:
    """Nodes that go on for an hour of virtual time (for ever, as far as a run's close is concerned)."""

    def heartbeat() -> None:
        if world.now < 3600 * NS:
            world.at(world.now + NS // 10, heartbeat)

    world.at(0, heartbeat)


async def _deaf_to_cancellation() -> None:
    """A task that catches its cancellation and waits again (a harness defect the close must survive)."""
    while True:
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            continue


@pytest.mark.parametrize("main_ends", ["returning", "interrupted"])
def test_a_task_that_outlives_its_cancellation_does_not_keep_the_run_going(main_ends, caplog) -> None:
    # Once, a simulated run stopped by SIGTERM spun for ever closing its loop: a task it cancelled never
    # ended while the world's nodes went on. The close now gives the tasks CLOSE_S of virtual time.
    world = Ticks()
    _heartbeats_for_an_hour(world)

    async def main() -> None:
        asyncio.get_running_loop().create_task(_deaf_to_cancellation(), name="deaf")
        await asyncio.sleep(10.0)
        if main_ends == "interrupted":
            raise KeyboardInterrupt

    if main_ends == "returning":  # nothing else went wrong: the defect is the run's error, naming the task
        with pytest.raises(Stalled, match=r"stalled at 70\.\d+ s: tasks cancelled when the run ended still "
                                          r"waited 60 s later \(deaf waiting in _deaf_to_cancellation"):
            run_simulated(world, main())
    else:  # the run's own end goes on; the stall is said in the log
        with pytest.raises(KeyboardInterrupt):
            run_simulated(world, main())
        assert "tasks cancelled when the run ended still waited 60 s later (deaf waiting in" in caplog.text
    assert world.now < 71 * NS


def test_ctrl_c_cancels_the_simulated_run_as_asyncio_run_does_then_raises_keyboard_interrupt() -> None:
    # A KeyboardInterrupt raised wherever SIGINT lands once fell between a future's completion and its
    # waiter's wakeup: that task waited for ever while the world's nodes went on (a hung exploration).
    # Like asyncio.run, the loop must turn SIGINT into a cancellation of the run's main task.
    world = Ticks()

    def heartbeat() -> None:  # the nodes go on for ever, as a simulated cluster does
        world.at(world.now + NS // 100, heartbeat)

    world.at(0, heartbeat)
    seen: list[str] = []

    async def main() -> None:
        signal.raise_signal(signal.SIGINT)
        try:
            await asyncio.sleep(3600.0)
        except asyncio.CancelledError:
            seen.append(f"cancelled at {asyncio.get_running_loop().time():g} s")
            raise

    # Python's own SIGINT handler, as `harness simulate` has it (another one, such as a SparkContext's, is
    # set aside while the loop runs: tests/harness/test_signals.py).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_simulated(world, main())
        assert seen == ["cancelled at 0 s"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_drifting_clock_fires_timers_no_earlier_than_asked() -> None:
    clock = NodeClock(drift=0.001, offset=-2.5)
    for due in (0.15, 0.45, 12.345678, 1000.0):
        at = clock.true_ns(due)
        assert clock.mono(at) >= due and clock.mono(at - 2) < due
    assert clock.wall(to_ns(10.0)) == pytest.approx(WALL_EPOCH + 10.0 * 1.001 - 2.5)
    clock.strobe_delta, clock.strobe_on = -30.0, True
    assert clock.current_offset == -32.5
    with pytest.raises(ValueError, match="drift"):
        NodeClock(drift=0.9)


def test_fsync_never_loses_what_was_not_written_back() -> None:
    always, never = SimDisk("always"), SimDisk("never")
    for disk in (always, never):
        disk.append([{"t": "term", "term": 1, "vote": None}])
    never.write_back()
    for disk in (always, never):
        disk.append([{"t": "term", "term": 2, "vote": "n2"}])
        disk.crash()
    assert [r["term"] for r in always.durable_records()] == [1, 2]
    assert [r["term"] for r in never.durable_records()] == [1] and never.lost == 1
    with pytest.raises(ValueError, match="unknown fsync policy 'sometimes'"):
        SimDisk("sometimes")


def test_a_link_is_fifo_unless_a_message_is_reordered() -> None:
    network = SimNetwork(("n1", "n2"), random.Random(3), NetworkOptions(reorder_probability=0.0,
                                                                          duplicate_probability=0.0))
    arrivals = [network.send("n1", "n2", now)[0] for now in range(0, 10_000_000, 10_000)]
    assert arrivals == sorted(arrivals)
    chaotic = SimNetwork(("n1", "n2"), random.Random(3), NetworkOptions(reorder_probability=1.0,
                                                                          duplicate_probability=1.0))
    copies = [chaotic.send("n1", "n2", now) for now in range(0, 10_000_000, 10_000)]
    assert all(len(c) == 2 for c in copies)
    firsts = [c[0] for c in copies]
    assert firsts != sorted(firsts)


def test_partitions_are_grudges_checked_at_the_receiver() -> None:
    network = SimNetwork(("n1", "n2", "n3"), random.Random(1))
    network.set_grudge(grudges.one_way("n1", "n2"))  # n2 drops what n1 sends; n1 still hears n2
    assert not network.admits("n1", "n2") and network.admits("n2", "n1") and network.admits("n1", "n3")
    network.set_grudge(grudges.bridge(["n1", "n2", "n3"]))  # n2 is the bridge
    assert network.admits("n1", "n2") and network.admits("n3", "n2") and not network.admits("n1", "n3")
    network.set_grudge({})
    network.set_loss(["n3"], 1.0)
    assert not network.admits("n1", "n3") and network.admits("n3", "n1")


def test_seed_lists() -> None:
    assert parse_seeds("1..5") == [1, 2, 3, 4, 5]
    assert parse_seeds("7") == [7]
    assert parse_seeds("1..3, 10,12..13") == [1, 2, 3, 10, 12, 13]
    for bad, message in (("5..1", "runs backwards"), ("x", "bad seed 'x'"), ("", "no seeds")):
        with pytest.raises(ValueError, match=message):
            parse_seeds(bad)


def test_ddmin_finds_a_one_minimal_failing_subset(tmp_path) -> None:
    spec = sim_spec(1)

    class Judge(_Judge):
        def first_failing(self, candidates):
            for index, candidate in enumerate(candidates):
                self.trials += 1
                ops = {op.value for slot in candidate.scripts.values() for op in slot}
                if {3, 7} <= ops:
                    return index
            return None

    judge = Judge("durability", tmp_path, 1, 1000)
    items = list(range(20))
    kept = ddmin(items, lambda sub: Candidate(spec, (), {0: [Op("write", "k", v) for v in sub]}), judge)
    assert kept == [3, 7]


def test_faults_shrink_in_pairs_with_their_heals() -> None:
    schedule = (ScheduledFault(5.0, "partition", Partition("isolate", target="leader")),
                ScheduledFault(6.0, "kill", Kill(("n2",))),
                ScheduledFault(14.0, "partition", Heal()),
                ScheduledFault(15.0, "kill", Start("all")),
                ScheduledFault(21.0, "kill", Kill(("n3",))),
                ScheduledFault(30.0, "partition", Heal()), ScheduledFault(30.0, "kill", Start("all")))
    candidate = Candidate(sim_spec(1, time_limit=30.0), schedule, {})
    assert fault_units(candidate) == [(0, 2), (1, 3), (4,)]
    assert candidate.faults == 3
    cut = with_time_limit(candidate, 10.0)
    assert [(e.at, e.fault.f) for e in cut.schedule] == [(5.0, "partition"), (6.0, "kill"), (10.0, "heal"),
                                                          (10.0, "start")]


def test_simulated_specs_are_harness_run_specs_and_refuse_bad_names() -> None:
    spec = sim_spec(7, db_options={"mode": "raft", "bug": ["lsn-reuse"], "core": {"scouting": False}},
                    time_limit=30)
    assert compose_sim(spec).command() == (
        "harness run --db cluster --mode raft --bug lsn-reuse --core scouting=false --nodes 5 --workload register "
        "--nemesis none --time-limit 30 --concurrency 10 --seed 7 --platform sim")
    assert TestSpec.from_json(spec.to_json()) == spec
    for bad, message in ((sim_spec(1, db_options={"mode": "paxos"}), "unknown value 'paxos'"),
                         (sim_spec(1, nemesis=("meteor",)), "unknown nemesis meteor"),
                         (sim_spec(1, db_options={"mode": "raft", "bug": ["skip-leader-sync"]}), "applies only to mode"),
                         (sim_spec(1, db_options={"core": {"heartbeat_interval": -1}}), "heartbeat_interval must be > 0"),
                         (sim_spec(1, workload="bank"), "unknown workload 'bank'")):
        with pytest.raises(ConfigError, match=message):
            compose_sim(bad)
    assert checker_for_bug("cluster", "ack-before-commit") == "durability"
    assert checker_for_bug("cluster", "vote-twice") == "single-leader-per-term"
    assert workload_for_bug("cluster", "no-dedup") == "queue" and workload_for_bug("cluster", "stale-read") == "register"


def test_scripts_round_trip_through_schedule_lines() -> None:
    lines = [{"at": 1.0, "process": "nemesis", "package": "kill", "f": "kill", "value": {"targets": ["n1"]}},
             {"process": "client", "slot": 2, "index": 1, "f": "read", "key": "k1", "value": None, "think": 0.5},
             {"process": "client", "slot": 2, "index": 0, "f": "write", "key": "k1", "value": 3, "think": 0.0}]
    assert scripts_from_jsonl(lines) == {2: [Op("write", "k1", 3), Op("read", "k1", think=0.5)]}
    with pytest.raises(ValueError, match="slot"):
        scripts_from_jsonl([{"process": "client", "f": "read"}])


@pytest.mark.parametrize("argv, message", [
    (["simulate"], "say what to simulate"),
    (["simulate", "--seed", "1", "--mode", "paxos"], "option mode: unknown value 'paxos'"),
    (["simulate", "--seeds", "9..1"], "runs backwards"),
    (["simulate", "--seed", "1", "--seeds", "1..2"], "not allowed with"),
    (["simulate", "--matrix", "--seed", "3"], "--matrix explores seeds itself"),
    (["simulate", "--seed", "1", "--bug", "nope"], "option bug: unknown value 'nope'"),
    (["simulate", "--seed", "1", "--db", "nosuchdb"], "unknown db 'nosuchdb'"),
])
def test_bad_arguments_exit_254_with_one_line(argv, message, tmp_path, capsys) -> None:
    assert main([*argv, "--store", str(tmp_path)]) == 254
    assert message in capsys.readouterr().err


def test_the_virtual_loop_says_when_a_task_waits_for_no_time_in_a_loop(monkeypatch) -> None:
    monkeypatch.setattr(loop_module, "SPIN_TURNS", 1000)
    world = Ticks()
    world.at(int(5 * NS), "never reached")

    async def spin() -> None:
        while True:
            await asyncio.sleep(0)

    with pytest.raises(Stalled, match="stalled at 0.000 s: 1,000 turns of the loop without the virtual clock moving"):
        run_simulated(world, spin())
    assert world.seen == []


def _entry(value: str) -> EntryPoint:
    """An installed DB plugin's entry point, registered under its own reference."""
    return EntryPoint(name=value, value=value, group=ENTRY_POINT_GROUP)


CLUSTER_AGAIN = cluster_plugin
"""The cluster's plugin under another reference: a second plugin that can run in the simulator."""


def test_the_default_db_of_simulate_is_the_one_installed_plugin_that_can_run_there(monkeypatch) -> None:
    # Named by reference, as load_plugin takes them: the cluster and a system that cannot be simulated.
    cluster, minimal = "adapters.cluster:plugin", "tests.harness.test_db:MinimalDB"
    monkeypatch.setattr(sim_run, "installed", lambda: {cluster: _entry(cluster), minimal: _entry(minimal)})
    assert simulatable_db() == cluster
    with monkeypatch.context() as patch:  # asked again: the kept answers, no plugin loaded
        patch.setattr(sim_run, "load_plugin", lambda name: pytest.fail(f"{name} was loaded again"))
        assert simulatable_db() == cluster
    monkeypatch.setattr(sim_run, "installed", lambda: {minimal: _entry(minimal)})
    with pytest.raises(ConfigError, match="none has a Simulation capability"):
        simulatable_db()
    again = f"{__name__}:CLUSTER_AGAIN"
    monkeypatch.setattr(sim_run, "installed", lambda: {cluster: _entry(cluster), again: _entry(again)})
    with pytest.raises(ConfigError, match=rf"several installed DB plugins .* \({cluster}, {again}\)"):
        simulatable_db()
