"""What a DB adapter hands the sim platform: its system, simulated (``harness.db.Simulation``).

The sim platform of ``harness run`` (``--platform sim``) drives a :class:`SimulatedSystem` with the same
interpreter, fault driver and checkers as a container run: the interpreter runs on a virtual-time event
loop over the system's ``world`` (``harness.sim.loop``), faults go through ``nemesis.driver.FaultDriver``
over the system's ``net``, ``clocks`` and ``processes``, and clients and status polls go through the
system's own client code over simulated connections. The toolkit for building one is here too: a seeded
network (``harness.sim.network``), per-node clocks (``harness.sim.clock``) and disks
(``harness.sim.disk``). ``adapters.cluster.sim`` is the worked example.
"""

from __future__ import annotations

from typing import Any, Protocol

from harness.sim.loop import EventSource
from nemesis.driver import Clocks, Net, Processes


class SimulatedSystem(Protocol):
    """One deployment of a system in virtual time: a seed fixes everything it does."""

    world: EventSource
    """Its events and its true time (integer nanoseconds)."""
    nodes: tuple[str, ...]
    """The data nodes, ``n1..nN``: what clients address and status polls ask."""
    fault_targets: tuple[str, ...]
    """The processes the nemesis picks from (the data nodes first)."""
    net: Net
    clocks: Clocks
    processes: Processes
    wall_epoch: float
    """Epoch seconds of the nodes' wall clocks at true time 0 (places journals on the history's axis)."""

    def start(self) -> None:
        """Start every process at true time 0."""
        ...

    async def open_client(self, process: int, timeout: float) -> Any:
        """A workload client for one logical process (``harness.db.Clients``)."""
        ...

    async def status(self, node: str, timeout: float) -> dict[str, Any]:
        """A node's status (``harness.db.Status``), or ``StatusError``."""
        ...

    def files(self) -> dict[str, str]:
        """What the run keeps: path relative to the run directory -> text (the journals)."""
        ...

    def describe(self) -> dict[str, Any]:
        """The simulated world's settings, for ``test.json``."""
        ...

    def stats(self) -> dict[str, Any]:
        """What the world did, for ``results.json``."""
        ...
