"""The seeded nemesis schedule and the fault vocabulary: determinism, pairing, final heal, JSON."""

from __future__ import annotations

import hashlib
import itertools
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemesis import faults as fx
from nemesis import grudge as g
from nemesis.generator import (
    FINAL_HEAL_ORDER,
    PACKAGES,
    STORMS,
    NemesisOptions,
    Pace,
    ScheduledFault,
    generate_schedule,
    nemesis_names,
    parse_nemesis,
    schedule_from_jsonl,
    schedule_to_jsonl,
)
from tests.hash_seeds import outputs_under_hash_seeds

FIVE = ("n1", "n2", "n3", "n4", "n5")
ALL = ",".join(nemesis_names())


def operations(step: fx.Fault | tuple[fx.Fault, ...]) -> tuple[fx.Fault, ...]:
    return step if isinstance(step, tuple) else (step,)


def schedule(seed: int, packages: str = ALL, time_limit: float = 120.0, **options: object):
    return generate_schedule(packages, FIVE, random.Random(seed), time_limit, NemesisOptions(**options))


SEEDED_ORDER = ("partition", "kill", "pause", "clock", "loss", "latency", "leader-clock", "leader-churn",
                "timeout-storm", "ring-storm", "slow-net")
"""An explicit list because the list is the contract: these are documented ``--nemesis`` names, and each
package's RNG is seeded in this order, so every seed's schedule depends on it. New packages are appended
after them (docs/nemesis.md), never inserted."""


def test_the_packages_keep_their_seeded_order_and_new_ones_come_after() -> None:
    assert nemesis_names()[:len(SEEDED_ORDER)] == SEEDED_ORDER
    # The election storms are the packages with a pace of their own, wherever a new one is appended.
    assert STORMS == tuple(name for name in nemesis_names() if PACKAGES[name].pace is not None)


SEVEN = "partition,kill,pause,clock,loss,latency,leader-clock"
SEVEN_DIGESTS = {
    1: "5c6fbfb69bb8e7e1c9998c7fc4b66a7aebdb006996fbcb87a437d28d6c05312c",
    2: "67708ed601a2d1ab20a3bbca98ffa5d67ecba2e307104ce0e19e7332627343b4",
    3: "022d1244f3bffba616dd7ca791041ea5f34c42f843b5dc2bdeac4ca4e3d16e02",
}
"""SHA-256 of the schedules of the seven packages that existed before the election storms, for seeds 1-3
(120 s, default options), computed with the generator of that time: adding packages moved none of them."""


@pytest.mark.parametrize("seed", sorted(SEVEN_DIGESTS))
def test_adding_packages_kept_every_earlier_schedule(seed: int) -> None:
    text = json.dumps(schedule_to_jsonl(schedule(seed, SEVEN)), sort_keys=True)
    assert hashlib.sha256(text.encode()).hexdigest() == SEVEN_DIGESTS[seed]


def test_unknown_names_list_the_valid_ones() -> None:
    with pytest.raises(ValueError) as raised:
        parse_nemesis("partition,explode")
    message = str(raised.value)
    assert "unknown nemesis explode" in message
    assert all(name in message for name in nemesis_names())


def test_parse_is_order_insensitive_and_drops_none() -> None:
    assert parse_nemesis("kill, partition,kill") == ("partition", "kill")
    assert parse_nemesis("none") == ()
    assert parse_nemesis(["clock"]) == ("clock",)


@given(st.integers(0, 2**32))
@settings(max_examples=30)
def test_same_seed_same_schedule(seed: int) -> None:
    assert schedule(seed) == schedule(seed)


def test_different_seeds_give_different_schedules() -> None:
    drawn = {json.dumps(schedule_to_jsonl(schedule(seed))) for seed in range(20)}
    assert len(drawn) == 20


def test_a_package_draws_the_same_faults_whatever_else_is_composed_with_it() -> None:
    alone = [e for e in schedule(7, "partition") if e.package == "partition"]
    composed = [e for e in schedule(7, "partition,kill,clock") if e.package == "partition"]
    assert alone == composed


@given(st.integers(0, 2**32), st.sampled_from(nemesis_names()))
@settings(max_examples=60)
def test_every_fault_is_followed_by_its_heal_and_the_run_ends_healed(seed: int, name: str) -> None:
    entries = schedule(seed, name, time_limit=90.0)
    package = PACKAGES[name]
    heal_ops = operations(package.heal())
    chaos = [e for e in entries if e.at < 90.0]
    # Within a package, steps (the operations at one instant) alternate a fault and its heal. A heal step
    # is all heals, but for a fault that the next step and the final heal undo (lone-leader kills the
    # leader it left alone as it resumes the followers; the next cycle starts it again), and a fault step
    # is all faults, but for the heals of what heal steps leave behind.
    steps = [tuple(e.fault for e in group) for _, group in itertools.groupby(chaos, key=lambda e: e.at)]
    final_kinds = {type(op) for op in heal_ops}
    left_behind = {type(op) for step in steps[1::2] for op in step if not fx.is_heal(op)}
    for i, step in enumerate(steps):
        if i % 2 == 0:
            assert any(not fx.is_heal(op) for op in step), step
            assert {type(op) for op in step if fx.is_heal(op)} <= {UNDONE_BY[k] for k in left_behind}, step
            continue
        fault = steps[i - 1] if len(steps[i - 1]) > 1 else steps[i - 1][0]
        assert step == (operations(package.heal_of(fault)) if package.heal_of else heal_ops)
        # What a step's own heal undoes, the package's final heal undoes too.
        assert {type(op) for op in step if fx.is_heal(op)} <= final_kinds
        for op in step:
            if not fx.is_heal(op):
                assert UNDONE_BY[type(op)] in final_kinds, step
                assert i + 1 == len(steps) or UNDONE_BY[type(op)] in {type(o) for o in steps[i + 1]}, steps
    # The final heal phase sits at the time limit and heals the package.
    assert [e for e in entries if e.at == 90.0] == [ScheduledFault(90.0, name, fault) for fault in heal_ops]
    assert [e.at for e in entries] == sorted(e.at for e in entries)


UNDONE_BY = {fx.Kill: fx.Start, fx.Pause: fx.Resume}
NETWORK_HEALS = (fx.Heal, fx.HealLoss, fx.HealLatency)
PROCESS_HEALS = (fx.Resume, fx.Start)


@pytest.mark.parametrize("packages", [ALL, SEVEN])
def test_final_heal_phase_heals_every_package_in_order(packages: str) -> None:
    assert sorted(FINAL_HEAL_ORDER) == sorted(nemesis_names())
    asked = parse_nemesis(packages)
    final = [e for e in schedule(3, packages) if e.at == 120.0]
    # Each package asked for, in FINAL_HEAL_ORDER, with its own heal, and nothing else.
    assert [(e.package, e.fault) for e in final] == [
        (name, fault) for name in FINAL_HEAL_ORDER if name in asked for fault in operations(PACKAGES[name].heal())
    ]
    assert all(fx.is_heal(e.fault) for e in final)
    # Network first, so that restarted and resumed nodes find their peers.
    kinds = [e.fault for e in final]
    network = [i for i, fault in enumerate(kinds) if isinstance(fault, NETWORK_HEALS)]
    processes = [i for i, fault in enumerate(kinds) if isinstance(fault, PROCESS_HEALS)]
    assert network and processes and max(network) < min(processes)


def test_interval_sets_the_pace() -> None:
    for interval in (2.0, 10.0):
        chaos = [e for e in schedule(11, "partition", time_limit=600.0, interval=interval) if e.at < 600.0]
        gaps = [b.at - a.at for a, b in zip(chaos, chaos[1:], strict=False)]
        assert all(0.5 * interval - 1e-3 <= gap <= 1.5 * interval + 1e-3 for gap in gaps)
        assert abs(sum(gaps) / len(gaps) - interval) < 0.15 * interval


@pytest.mark.parametrize("name", STORMS)
def test_a_storm_keeps_its_own_pace_whatever_the_interval(name: str) -> None:
    pace = PACKAGES[name].pace
    assert pace is not None
    for interval in (2.0, 10.0):
        chaos = [e for e in schedule(11, name, time_limit=600.0, interval=interval) if e.at < 600.0]
        instants = sorted({e.at for e in chaos})
        # Steps alternate fault, heal: a fault holds for pace.hold, the cluster rests for pace.gap.
        for i, (a, b) in enumerate(zip(instants, instants[1:], strict=False)):
            low, high = pace.hold if i % 2 == 0 else pace.gap
            assert low - 1e-3 <= b - a <= high + 1e-3
        assert instants[0] <= pace.gap[1] + 1e-3
        # A few seconds per cycle: over a hundred faults in ten minutes, whatever the interval.
        assert len(instants) // 2 >= 600.0 / (pace.hold[1] + pace.gap[1])


def test_leader_churn_aims_at_the_leader_and_heals_only_what_it_did() -> None:
    drawn = [e.fault for seed in range(10) for e in schedule(seed, "leader-churn", time_limit=60.0) if e.at < 60.0]
    faults = [f for f in drawn if not fx.is_heal(f)]
    assert set(faults) == {fx.Partition("isolate", target="leader"), fx.Pause("leader"), fx.Kill("leader")}
    heal_of = PACKAGES["leader-churn"].heal_of
    assert heal_of is not None
    assert heal_of(fx.Partition("isolate", target="leader")) == fx.Heal()
    assert heal_of(fx.Pause("leader")) == fx.Resume("all")
    assert heal_of(fx.Kill("leader")) == fx.Start("all")


def test_timeout_storm_pauses_everyone_or_every_follower_and_resumes_all() -> None:
    drawn = {e.fault for seed in range(10) for e in schedule(seed, "timeout-storm", time_limit=60.0)}
    assert drawn == {fx.Pause("all"), fx.Pause("followers"), fx.Resume("all")}
    assert fx.resolve_targets("followers", FIVE, "n2") == ("n1", "n3", "n4", "n5")
    # A fluvio controller is a fault target but no follower: the members that lead or follow say who is.
    with_sc = (*FIVE, "sc")
    assert fx.resolve_targets("followers", with_sc, "n2", members=FIVE) == ("n1", "n3", "n4", "n5")
    assert fx.resolve_targets("followers", with_sc, "n2") == ("n1", "n3", "n4", "n5", "sc")
    with pytest.raises(fx.UnresolvableTarget):
        fx.resolve_targets("followers", FIVE, None)
    with pytest.raises(ValueError, match="known only at run time"):
        fx.draw_targets("followers", FIVE, random.Random(1))


def test_ring_storm_rotates_rings_and_bridges_where_each_node_sees_a_majority_or_a_bridge() -> None:
    kinds = set()
    for seed in range(10):
        for entry in schedule(seed, "ring-storm", time_limit=60.0):
            fault = entry.fault
            if isinstance(fault, fx.Partition):
                kinds.add(fault.kind)
                assert fault.grudge is not None
                fx.check_nodes(fault, FIVE)
                if fault.kind == "majorities-ring":
                    assert all(len(FIVE) - len(fault.grudge.get(n, ())) >= 3 for n in FIVE)
    assert kinds == {"majorities-ring", "bridge"}
    three = generate_schedule("ring-storm", ("a", "b", "c"), random.Random(1), 60.0)
    assert {e.fault.kind for e in three if isinstance(e.fault, fx.Partition)} == {"bridge"}


def test_slow_net_delays_and_loses_on_the_same_nodes() -> None:
    options = NemesisOptions()
    entries = [e for e in schedule(4, "slow-net", time_limit=60.0) if e.at < 60.0]
    pairs = [(a.fault, b.fault) for a, b in zip(entries, entries[1:], strict=False)
             if a.at == b.at and isinstance(a.fault, fx.Latency)]
    assert pairs
    for latency, loss in pairs:
        assert isinstance(loss, fx.Loss) and loss.targets == latency.targets and len(latency.targets) >= 3
        assert latency.delay_ms in options.storm_delays_ms and latency.jitter_ms == latency.delay_ms
        assert loss.probability in options.storm_loss_probabilities


def test_no_packages_no_schedule_and_short_runs_only_heal() -> None:
    assert generate_schedule("", FIVE, random.Random(1), 60.0) == ()
    only_final = generate_schedule("kill", FIVE, random.Random(1), 1.0)
    assert [e.fault for e in only_final] == [fx.Start("all")]


def test_every_partition_kind_appears_and_each_is_valid() -> None:
    kinds = set()
    for seed in range(40):
        for entry in schedule(seed, "partition", time_limit=300.0):
            fault = entry.fault
            if isinstance(fault, fx.Partition):
                kinds.add((fault.kind, fault.target))
                fx.check_nodes(fault, FIVE)
    assert kinds == {
        ("halves", None),
        ("isolate", None),
        ("isolate", "leader"),
        ("one-way", None),
        ("bridge", None),
        ("ping-pong", "leader"),
        ("majorities-ring", None),
    }


def test_small_clusters_only_get_kinds_they_can_hold() -> None:
    for seed in range(20):
        for entry in generate_schedule("partition", ("a", "b"), random.Random(seed), 200.0):
            if isinstance(entry.fault, fx.Partition):
                assert entry.fault.kind in ("halves", "isolate", "one-way")
    with pytest.raises(ValueError, match="needs at least 2 nodes"):
        generate_schedule("partition", ("a",), random.Random(0), 60.0)


def test_kills_and_pauses_name_nodes_except_the_leader() -> None:
    seen = set()
    for seed in range(30):
        for entry in schedule(seed, "kill,pause", time_limit=200.0):
            if isinstance(entry.fault, fx.Kill | fx.Pause):
                targets = entry.fault.targets
                assert targets == "leader" or (isinstance(targets, tuple) and set(targets) <= set(FIVE))
                seen.add("leader" if targets == "leader" else len(targets))
    assert seen == {"leader", 1, 2, 3, 5}


def test_clock_offsets_span_small_to_minutes_and_stay_bounded() -> None:
    offsets = []
    for seed in range(30):
        for entry in schedule(seed, "clock", time_limit=300.0):
            if isinstance(entry.fault, fx.ClockBump):
                offsets.extend(entry.fault.deltas.values())
            elif isinstance(entry.fault, fx.ClockStrobe):
                offsets.append(entry.fault.delta)
    sizes = [abs(o) for o in offsets]
    assert max(sizes) <= 180.0 and min(sizes) >= 0.1
    assert min(sizes) < 1.0 and max(sizes) > 60.0
    assert any(o < 0 for o in offsets) and any(o > 0 for o in offsets)


@given(st.integers(0, 2**32))
@settings(max_examples=30)
def test_schedule_json_round_trip(seed: int) -> None:
    entries = schedule(seed)
    lines = [json.loads(json.dumps(line)) for line in schedule_to_jsonl(entries)]
    assert schedule_from_jsonl(lines) == entries
    assert all(line["process"] == "nemesis" for line in lines)


def test_schedule_from_jsonl_skips_client_lines_and_rejects_bad_ones() -> None:
    line = ScheduledFault(1.0, "kill", fx.Kill(("n1",))).to_json()
    assert schedule_from_jsonl([{"process": 0, "f": "read"}, line]) == (
        ScheduledFault(1.0, "kill", fx.Kill(("n1",))),
    )
    with pytest.raises(ValueError, match="unknown nemesis package 'boom'"):
        schedule_from_jsonl([{**line, "package": "boom"}])
    with pytest.raises(ValueError, match="'at' >= 0"):
        schedule_from_jsonl([{**line, "at": -1}])


@pytest.mark.parametrize(
    "fault",
    [
        fx.Partition("halves", grudge=g.halves(FIVE)),
        fx.Partition("isolate", target="leader"),
        fx.Partition("ping-pong", target="leader", order=FIVE),
        fx.Heal(),
        fx.Kill(("n1", "n3")),
        fx.Kill("leader"),
        fx.Start("all"),
        fx.Pause(("n2",)),
        fx.Pause("followers"),
        fx.Resume("all"),
        fx.ClockBump({"n1": -30.5, "n4": 120.0}),
        fx.ClockStrobe(("n2",), delta=2.5, period=0.2, duration=10.0),
        fx.ClockReset("all"),
        fx.Loss(("n1", "n2"), 0.2),
        fx.HealLoss(),
        fx.Latency(("n5",), 100.0, 20.0),
        fx.HealLatency(),
    ],
)
def test_every_fault_round_trips_through_json(fault: fx.Fault) -> None:
    data = json.loads(json.dumps(fx.fault_to_json(fault)))
    assert data["f"] in fx.FAULT_FUNCTIONS
    assert fx.fault_from_json(data) == fault
    assert hash(fx.fault_from_json(data)) == hash(fault), "faults are values: usable in sets and as keys"
    assert fx.describe(fault)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"f": "explode"}, "unknown nemesis operation 'explode'"),
        ({"f": "kill", "value": {"targets": "everyone"}}, "unknown target 'everyone'"),
        ({"f": "kill", "value": {}}, "value must be an object with 'targets'"),
        ({"f": "loss", "value": {"targets": ["n1"], "probability": 1.5}}, "in \\(0, 1\\]"),
        ({"f": "clock", "value": {"kind": "warp"}}, "unknown clock kind 'warp'"),
        ({"f": "partition", "value": {"kind": "halves", "target": "n1"}}, "only 'leader'"),
        ({"f": "partition", "value": {"kind": "spiral", "grudge": {}}}, "unknown partition kind 'spiral'"),
    ],
)
def test_bad_fault_json_is_named(data: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fx.fault_from_json(data)


def test_resolve_targets() -> None:
    assert fx.resolve_targets(("n2",), FIVE, None) == ("n2",)
    assert fx.resolve_targets("leader", FIVE, "n4") == ("n4",)
    assert fx.resolve_targets("all", FIVE, None) == FIVE
    assert len(fx.resolve_targets("majority", FIVE, None, random.Random(1))) == 3
    with pytest.raises(fx.UnresolvableTarget, match="no leader is known"):
        fx.resolve_targets("leader", FIVE, None)
    with pytest.raises(ValueError, match="pass the run's rng"):
        fx.resolve_targets("one", FIVE, None)


def test_resolve_partition_aims_at_the_leader() -> None:
    isolate = fx.Partition("isolate", target="leader")
    assert fx.resolve_partition(isolate, FIVE, "n3") == g.isolate(FIVE, "n3")
    ping = fx.Partition("ping-pong", target="leader", order=("n3", "n1", "n2", "n4", "n5"))
    assert fx.resolve_partition(ping, FIVE, "n3") == g.ping_pong("n3", "n1")
    assert fx.resolve_partition(ping, FIVE, "n2") == g.ping_pong("n2", "n3")
    with pytest.raises(fx.UnresolvableTarget):
        fx.resolve_partition(isolate, FIVE, None)


def test_check_nodes_rejects_strangers() -> None:
    with pytest.raises(ValueError, match="unknown node\\(s\\) n9"):
        fx.check_nodes(fx.Kill(("n9",)), FIVE)
    fx.check_nodes(fx.Kill("leader"), FIVE)


def test_options_are_validated() -> None:
    with pytest.raises(ValueError, match="interval must be a positive"):
        NemesisOptions(interval=0)
    with pytest.raises(ValueError, match="network_targets must be drawn from"):
        NemesisOptions(network_targets=("leader",))
    with pytest.raises(ValueError, match="storm delays ms must be positive"):
        NemesisOptions(storm_delays_ms=())
    with pytest.raises(ValueError, match="storm loss probabilities"):
        NemesisOptions(storm_loss_probabilities=(2.0,))
    with pytest.raises(ValueError, match="storm pause targets must be all or followers"):
        NemesisOptions(storm_pause_targets=("one",))
    with pytest.raises(ValueError, match="pace hold"):
        Pace(hold=(2.0, 1.0), gap=(0.1, 0.2))


HASH_SEED_SCRIPT = """
import json, random
from nemesis.generator import generate_schedule, nemesis_names, schedule_to_jsonl
nodes = {"n1", "n2", "n3", "n4", "n5"}  # a set on purpose: its iteration order follows the hash seed
for seed in range(5):
    print(json.dumps(schedule_to_jsonl(generate_schedule(",".join(nemesis_names()), nodes, random.Random(seed), 200))))
"""


@pytest.mark.slow
def test_schedules_do_not_depend_on_the_hash_seed() -> None:
    outputs = outputs_under_hash_seeds(HASH_SEED_SCRIPT)
    assert len(outputs) == 1 and outputs.pop().count("\n") == 5


def test_leader_clock_isolates_the_leader_then_steps_that_node_clock_back() -> None:
    entries = schedule(5, "leader-clock", time_limit=60.0)
    first, second = entries[0], entries[1]
    assert first.at == second.at and first.package == second.package == "leader-clock"
    assert first.fault == fx.Partition("isolate", target="leader")
    assert isinstance(second.fault, fx.ClockBump) and list(second.fault.deltas) == ["leader"]
    assert -180.0 <= second.fault.deltas["leader"] <= -1.0
    backs = {e.fault.deltas["leader"] for seed in range(30) for e in schedule(seed, "leader-clock", time_limit=60.0)
             if isinstance(e.fault, fx.ClockBump)}
    assert min(backs) < -30.0 and max(backs) > -10.0  # log-uniform: small and large steps both occur
    # The symbolic key names no node, so the schedule checks against any cluster.
    fx.check_nodes(second.fault, FIVE)
    # At run time both operations resolve "leader" to the same node.
    assert fx.resolve_partition(first.fault, FIVE, "n3") == g.isolate(FIVE, "n3")
    assert fx.resolve_deltas(second.fault.deltas, FIVE, "n3") == {"n3": second.fault.deltas["leader"]}
    assert fx.resolve_deltas({"n1": 2.0, "leader": -5.0}, FIVE, "n1") == {"n1": -3.0}
    with pytest.raises(fx.UnresolvableTarget):
        fx.resolve_deltas(second.fault.deltas, FIVE, None)
    # A stored schedule line reads back as the same composed step.
    assert schedule_from_jsonl(schedule_to_jsonl(entries)) == entries
