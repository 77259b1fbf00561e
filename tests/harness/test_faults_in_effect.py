"""What a nemesis driver remembers as in effect: the final phase's undo list and the live view's lines."""

from __future__ import annotations

from harness.faults_in_effect import FaultsInEffect
from nemesis.faults import ClockReset, Heal, HealLatency, HealLoss, Kill, Pause, Resume, Start


class Record(FaultsInEffect):
    """The smallest driver record: a clock description like the real runs' driver keeps."""

    def __init__(self) -> None:
        self.nodes = ("n1", "n2", "n3")
        self.partitioned = self.loss = self.latency = self.clock = None
        self.killed: set[str] = set()
        self.paused: set[str] = set()

    def clock_shown(self) -> str | None:
        return self.clock


def test_nothing_in_effect_needs_no_recovery() -> None:
    record = Record()
    assert record.recovery_faults() == [] and record.active() == []


def test_recovery_undoes_everything_in_the_final_heal_order_and_nodes_in_their_order() -> None:
    record = Record()
    record.partitioned, record.loss, record.latency, record.clock = "partition", "loss 0.2", "latency", "clock +30"
    record.settle_process_fault(Pause(("n3", "n1")), ["n3", "n1"])
    record.settle_process_fault(Kill(("n2",)), ["n2"])
    assert record.recovery_faults() == [Heal(), HealLoss(), HealLatency(), Resume(("n1", "n3")), Start(("n2",)),
                                        ClockReset("all")]
    assert record.active() == ["partition", "loss 0.2", "latency", "clock +30", "paused n1,n3", "killed n2"]


def test_a_killed_node_is_no_longer_paused_and_a_start_or_resume_settles_it() -> None:
    record = Record()
    record.settle_process_fault(Pause(("n1",)), ["n1"])
    record.settle_process_fault(Kill(("n1", "n2")), ["n1", "n2"])
    assert record.paused == set() and record.killed == {"n1", "n2"}
    record.settle_process_fault(Start(("n1", "n2")), ["n1"])  # n2's start failed: it is still down
    assert record.killed == {"n2"}
    record.settle_process_fault(Pause(("n3",)), iter(["n3"]))
    record.settle_process_fault(Resume(("n3",)), ["n3"])
    assert record.paused == set() and record.active() == ["killed n2"]
