"""A fault package and a capability the harness does not ship, for the tests that prove a new fault fits in
the files docs/nemesis.md lists and that an adapter survives the harness growing a capability.

``truncate-tail``, in the spirit of Jepsen's file faults: kill a minority, cut the last bytes of their
data file, restart them. Everything it is lives here, one part per role of docs/nemesis.md's list:

* ``package``: the capability it needs (:class:`DataFile`: ``data_file(deployment, node)``, the path of
  a node's data file), the fault that carries a value (:class:`TruncateTail`: targets and bytes to cut)
  and the :data:`PACKAGE` that draws it, names its needs, its report family and colour, and its heal;
* ``action``: :meth:`TruncateTail.action`, the verb and the bytes the driver hands ``Processes.act``;
* ``protocol``: the throwaway adapter :class:`TruncatingClusterDB` (the bundled ``cluster`` plus
  ``DataFile`` and ``truncate_tail`` on hosts) and its simulated processes (:class:`TruncatingSimProcesses`);
* ``test``: ``tests/nemesis/test_docs.py``, which composes it and runs it in the simulator.

A test adds the capability and the package to the registries with :func:`add` and
``monkeypatch.setitem`` (undone after the test). Loaded as a pytest plugin (``-p capability_extension``
with this directory on ``PYTHONPATH``) the module adds them for the whole session before any test module
is imported: how a scaffolded package's own tests run against a harness with one capability more.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import harness.db as harness_db
from nemesis.driver import Action
from nemesis.faults import Kill, Outcome, Start, Targets, draw_targets, parse_targets, targets_to_json
from nemesis.generator import Family, NemesisOptions, Package, Step, register_package

NEMESIS = "truncate-tail"
"""The nemesis that needs :class:`DataFile`."""

CUTS = (64, 512, 4096)
"""Bytes cut from a data file's tail, drawn uniformly."""


# -- package: its capability, its fault, its schedule, its needs, family and heal -------------------------


@runtime_checkable
class DataFile(Protocol):
    """Where a node keeps its data: the file ``truncate-tail`` cuts."""

    def data_file(self, deployment: harness_db.Deployment, node: str) -> str: ...


@dataclass(frozen=True)
class TruncateTail:
    """Cut the last ``bytes`` bytes of each target's data file (its process is down: the step kills it
    first and starts it after)."""

    f: ClassVar[str] = NEMESIS
    targets: Targets
    bytes: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", parse_targets(self.targets, NEMESIS))
        if isinstance(self.bytes, bool) or not isinstance(self.bytes, int) or self.bytes <= 0:
            raise ValueError(f"{NEMESIS} bytes must be a positive integer, not {self.bytes!r}")

    def value(self) -> dict[str, Any]:
        return {"targets": targets_to_json(self.targets), "bytes": self.bytes}

    @classmethod
    def from_value(cls, value: Any) -> TruncateTail:
        if not isinstance(value, Mapping) or "targets" not in value or "bytes" not in value:
            raise ValueError(f"nemesis {NEMESIS}: value must be an object with 'targets' and 'bytes', not {value!r}")
        return cls(targets=value["targets"], bytes=value["bytes"])

    def describe(self) -> str:
        who = self.targets if isinstance(self.targets, str) else ",".join(self.targets)
        return f"{NEMESIS} {self.bytes} B on {who}"

    # -- action: what the driver hands the platform's processes ------------------------------------------

    def action(self) -> Action:
        return Action(NEMESIS, {"bytes": self.bytes})


def _truncate_tail(rng: random.Random, nodes: tuple[str, ...], options: NemesisOptions) -> Step:
    targets = draw_targets("minority", nodes, rng)
    return (Kill(targets), TruncateTail(targets, rng.choice(CUTS)), Start(targets))


PACKAGE = Package(
    NEMESIS,
    "kill a minority, cut the last bytes of its data file, restart it",
    _truncate_tail,
    lambda: Start("all"),
    min_nodes=3,
    needs=("DataFile", "Process"),
    family=Family(NEMESIS, "#8d6e63", faults=(NEMESIS,), lasting=False),
    final_heal=60,
    faults=(TruncateTail,),
)


def add(setitem: Callable[[Any, Any, Any], None] = operator.setitem) -> None:
    """Register :class:`DataFile` in ``harness.db``'s capabilities and :data:`PACKAGE` with the nemesis
    packages through ``setitem`` (``monkeypatch.setitem`` in a test)."""
    setitem(harness_db.CAPABILITY_METHODS, DataFile, harness_db.describe_capability(DataFile))
    register_package(PACKAGE, setitem)


# -- protocol: the throwaway adapter, on hosts and in the simulator -------------------------------------


def _cut(records: list[dict[str, Any]], size: int) -> int:
    """Drop whole records from the end of a simulated disk until ``size`` bytes of their JSON are gone (a
    record cut in the middle is a torn record, which recovery drops too); how many were dropped."""
    dropped = 0
    while records and size > 0:
        size -= len(repr(records.pop()).encode())
        dropped += 1
    return dropped


def truncating_db(**options: Any) -> Any:
    """The bundled ``cluster`` adapter with ``DataFile`` and the ``truncate-tail`` verb, on hosts and in the
    simulator (imported here so that the plugin above loads without the bundled adapters)."""
    from adapters.cluster.db import ClusterDB
    from adapters.cluster.sim import SimProcesses

    class TruncatingSimProcesses(SimProcesses):
        """The simulated processes, plus ``truncate-tail``: cut each target's simulated disk."""

        def act(self, action: Action, targets: Sequence[str]) -> Outcome:
            if action.verb != NEMESIS:
                return super().act(action, targets)
            cut = {}
            for node in targets:
                disk = self.world.nodes[node].disk
                cut[node] = _cut(disk.records, int(action.argument["bytes"]))
                disk.synced = min(disk.synced, len(disk.records))
            return Outcome({"nodes": list(targets), "records_cut": cut})

    class TruncatingClusterDB(ClusterDB):
        """``cluster`` with a data file the nemesis may cut."""

        capabilities = (*ClusterDB.capabilities, "DataFile")

        def data_file(self, deployment: harness_db.Deployment, node: str) -> str:
            return f"{self.process(deployment, node).data_dir}/storage.dat"

        def truncate_tail(self, deployment: harness_db.Deployment, node: str, remote: Any, bytes: int) -> None:
            path = self.data_file(deployment, node)
            remote.run(f"truncate -s -{int(bytes)} {path} 2>/dev/null || true")

        def simulate(self, nodes: Sequence[str], seed: int) -> Any:
            system = super().simulate(nodes, seed)
            system.processes = TruncatingSimProcesses(system.world)
            return system

    return TruncatingClusterDB(**options)


# -- as a pytest plugin ------------------------------------------------------------------------------------


def pytest_configure(config: Any) -> None:
    """As a plugin: extend the harness for the session."""
    add()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """As a plugin: say in the output (``-q`` too) that the harness was extended, and still is."""
    if harness_db.nemesis_needs().get(NEMESIS) == ("DataFile", "Process"):
        terminalreporter.write_line(f"harness extended: capability DataFile, nemesis {NEMESIS}")
