"""What a nemesis driver has applied and not yet undone, shared by the real runs' driver
(``harness.fault_driver.ClusterNemesis``) and the simulator's (``harness.sim.platform.SimNemesis``).

Both remember the faults in effect so that the final phase undoes exactly those
(``NemesisDriver.recovery_faults``, in ``nemesis.generator.FINAL_HEAL_ORDER``: heal partitions, loss and
latency, resume, restart, reset clocks) and the live view shows them (``NemesisDriver.active``). How a
fault is applied, and so when a network or clock fault counts as in effect, stays each driver's own.
"""

from __future__ import annotations

from collections.abc import Iterable

from nemesis.faults import ClockReset, Fault, Heal, HealLatency, HealLoss, Kill, Pause, Resume, Start


class FaultsInEffect:
    """A mixin over the driver's record: ``nodes`` (in their order), the descriptions of the partition,
    loss and latency in effect (``None``: none), the ``killed`` and ``paused`` nodes, and its own clock
    record, which :meth:`clock_shown` describes."""

    nodes: tuple[str, ...]
    partitioned: str | None
    loss: str | None
    latency: str | None
    killed: set[str]
    paused: set[str]

    def clock_shown(self) -> str | None:
        """The clock faults in effect, as the live view shows them; ``None`` when clocks are untouched."""
        raise NotImplementedError

    def settle_process_fault(self, fault: Kill | Start | Pause | Resume, nodes: Iterable[str]) -> None:
        """Record that ``nodes`` are now as ``fault`` wants them (killed, running, paused, resumed).

        A killed node is no longer paused (a restart starts it unpaused).
        """
        nodes = tuple(nodes)
        if isinstance(fault, Kill):
            self.killed.update(nodes)
            self.paused.difference_update(nodes)
        elif isinstance(fault, Start):
            self.killed.difference_update(nodes)
        elif isinstance(fault, Pause):
            self.paused.update(nodes)
        else:
            self.paused.difference_update(nodes)

    def recovery_faults(self) -> list[Fault]:
        """What is still in effect, undone in the order of ``nemesis.generator.FINAL_HEAL_ORDER``."""
        faults: list[Fault] = []
        if self.partitioned:
            faults.append(Heal())
        if self.loss:
            faults.append(HealLoss())
        if self.latency:
            faults.append(HealLatency())
        if self.paused:
            faults.append(Resume(self._in_order(self.paused)))
        if self.killed:
            faults.append(Start(self._in_order(self.killed)))
        if self.clock_shown():
            faults.append(ClockReset("all"))
        return faults

    def active(self) -> list[str]:
        """Short descriptions of the faults in effect, for the live view."""
        shown = [d for d in (self.partitioned, self.loss, self.latency, self.clock_shown()) if d]
        if self.paused:
            shown.append("paused " + ",".join(self._in_order(self.paused)))
        if self.killed:
            shown.append("killed " + ",".join(self._in_order(self.killed)))
        return shown

    def _in_order(self, nodes: set[str]) -> tuple[str, ...]:
        return tuple(n for n in self.nodes if n in nodes)
