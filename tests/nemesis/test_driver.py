"""The one fault driver: dispatch to Net, Clocks and Processes, leader targets resolved from the caller's
view, and the record of what is in effect that the final phase undoes and the live view shows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from nemesis.driver import NO_CLOCKS, FaultDriver
from nemesis.faults import (
    ClockBump,
    ClockReset,
    ClockStrobe,
    Heal,
    HealLatency,
    HealLoss,
    Kill,
    Latency,
    Loss,
    Outcome,
    Partition,
    Pause,
    Resume,
    Start,
)

NODES = ("n1", "n2", "n3")


class Calls:
    """A Net, Clocks and Processes at once, recording each call; ``failing`` names methods that fail."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.failing: set[str] = set()
        self.down: set[str] = set()

    def _done(self, method: str, value: Any) -> Outcome:
        self.calls.append((method, value))
        return Outcome(value, f"{method} failed" if method in self.failing else None)

    def partition(self, grudge: Mapping[str, frozenset[str]], kind: str) -> Outcome:
        return self._done("partition", (kind, {k: sorted(v) for k, v in grudge.items()}))

    def heal(self) -> Outcome:
        return self._done("heal", None)

    def loss(self, targets: Sequence[str], probability: float) -> Outcome:
        return self._done("loss", (tuple(targets), probability))

    def heal_loss(self) -> Outcome:
        return self._done("heal_loss", None)

    def latency(self, targets: Sequence[str], delay_ms: float, jitter_ms: float) -> Outcome:
        return self._done("latency", (tuple(targets), delay_ms))

    def heal_latency(self) -> Outcome:
        return self._done("heal_latency", None)

    def bump(self, deltas: Mapping[str, float]) -> Outcome:
        return self._done("bump", dict(deltas))

    def strobe(self, targets: Sequence[str], delta: float, period: float, duration: float) -> Outcome:
        return self._done("strobe", tuple(targets))

    def reset(self, targets: Sequence[str]) -> Outcome:
        return self._done("reset", tuple(targets))

    def kill(self, targets: Sequence[str]) -> Outcome:
        self.down.update(targets)
        return self._done("kill", {"nodes": list(targets)})

    def start(self, targets: Sequence[str]) -> Outcome:
        up = [n for n in targets if n in self.down]
        self.down.difference_update(targets)
        value = {"nodes": up} | ({"unchanged": [n for n in targets if n not in up]} if len(up) < len(targets) else {})
        return self._done("start", value)

    def pause(self, targets: Sequence[str]) -> Outcome:
        paused = [n for n in targets if n not in self.down]
        error = "; ".join(f"{n}: not running" for n in targets if n in self.down) or None
        self.calls.append(("pause", tuple(targets)))
        return Outcome({"nodes": paused}, error)

    def resume(self, targets: Sequence[str]) -> Outcome:
        return self._done("resume", {"nodes": list(targets)})


def driver(*, clocks: bool = True) -> tuple[FaultDriver, Calls]:
    calls = Calls()
    return FaultDriver(NODES, net=calls, clocks=calls if clocks else None, processes=calls), calls


def test_each_fault_goes_to_its_protocol_with_concrete_targets() -> None:
    d, calls = driver()
    d.apply(Partition("isolate", grudge={"n1": {"n2", "n3"}}), None)
    d.apply(Loss(("n2",), 0.2), None)
    d.apply(Latency(("n3",), 100.0), None)
    d.apply(ClockBump({"n1": -5.0}), None)
    d.apply(ClockStrobe(("n2",), 1.0, 0.2, 4.0), None)
    d.apply(Kill(("n3",)), None)
    assert [c[0] for c in calls.calls] == ["partition", "loss", "latency", "bump", "strobe", "kill"]
    assert calls.calls[0] == ("partition", ("isolate", {"n1": ["n2", "n3"], "n2": [], "n3": []})) or \
        calls.calls[0][1][1]["n1"] == ["n2", "n3"]
    assert d.describe(Kill(("n3",))) == ("kill", {"targets": ["n3"]})


def test_leader_targets_are_resolved_to_the_leader_the_caller_saw() -> None:
    d, calls = driver()
    unresolved = d.apply(Kill("leader"), None)
    assert unresolved.error == "no leader is known, so there is no leader to target" and calls.calls == []
    killed = d.apply(Kill("leader"), "n2")
    assert killed.applied and calls.calls == [("kill", {"nodes": ["n2"]})]
    d.apply(Partition("isolate", target="leader"), "n3")
    kind, grudge = calls.calls[-1][1]
    assert kind == "isolate" and grudge["n3"] == ["n1", "n2"]
    d.apply(ClockBump({"leader": -30.0}), "n1")
    assert calls.calls[-1] == ("bump", {"n1": -30.0})


def test_followers_are_the_members_but_the_leader_and_never_a_target_that_is_no_member() -> None:
    calls = Calls()
    d = FaultDriver((*NODES, "sc"), net=calls, clocks=calls, processes=calls, members=NODES)
    assert d.apply(Pause("followers"), None).error == "no leader is known, so there is no leader to target"
    d.apply(Pause("followers"), "n2")
    d.apply(Pause("all"), "n2")
    assert calls.calls == [("pause", ("n1", "n3")), ("pause", ("n1", "n2", "n3", "sc"))]
    plain, plain_calls = driver()
    plain.apply(Pause("followers"), "n3")
    assert plain_calls.calls == [("pause", ("n1", "n2"))]  # without members: every target but the leader


def test_a_platform_without_clocks_records_clock_faults_as_not_applied() -> None:
    d, _ = driver(clocks=False)
    outcome = d.apply(ClockBump({"n1": 1.0}), None)
    assert outcome.error == NO_CLOCKS and d.clock is None


def test_recovery_undoes_exactly_what_is_in_effect_network_first() -> None:
    d, calls = driver()
    assert d.recovery_faults() == [] and d.active() == []
    d.apply(Partition("isolate", grudge={"n1": {"n2", "n3"}}), None)
    d.apply(Pause(("n2",)), None)
    d.apply(Kill(("n3",)), None)
    d.apply(ClockBump({"n1": 30.0}), None)
    calls.failing = {"loss"}
    lossy = d.apply(Loss(("n1",), 0.2), None)
    assert not lossy.applied  # still counted as in effect: a partial loss must be healed too
    d.apply(Latency(("n1",), 50.0), None)
    assert d.recovery_faults() == [Heal(), HealLoss(), HealLatency(), Resume(("n2",)), Start(("n3",)),
                                   ClockReset("all")]
    assert d.active()[-2:] == ["paused n2", "killed n3"]
    calls.failing = {"heal"}
    for fault in d.recovery_faults():
        d.apply(fault, None)
    assert d.recovery_faults() == [Heal()]  # the heal failed: the partition is still in effect
    calls.failing = set()
    d.apply(Heal(), None)
    assert d.recovery_faults() == [] and d.active() == []


def test_a_killed_node_is_no_longer_paused_and_start_counts_nodes_already_up() -> None:
    d, calls = driver()
    d.apply(Pause(("n1",)), None)
    d.apply(Kill(("n1", "n2")), None)
    assert d.paused == set() and d.killed == {"n1", "n2"}
    paused = d.apply(Pause(("n1", "n3")), None)
    assert paused.error == "n1: not running" and d.paused == {"n3"}
    calls.down.discard("n2")  # n2 came back by itself: its start finds it running
    d.apply(Start(("n1", "n2")), None)
    assert d.killed == set()
    d.apply(Resume(("n3",)), None)
    assert d.paused == set() and d.active() == []


@pytest.mark.parametrize("fault", [ClockReset(("n1",)), ClockReset("all")])
def test_only_a_reset_of_every_clock_clears_the_clock_record(fault: ClockReset) -> None:
    d, _ = driver()
    d.apply(ClockBump({"n1": 3.0}), None)
    d.apply(fault, None)
    assert (d.clock is None) == (fault.targets == "all")
