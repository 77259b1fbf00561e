"""The ``sim`` platform: the DB's system in the deterministic simulator, driven like any other platform.

The DB adapter's ``Simulation`` capability gives a ``harness.sim.system.SimulatedSystem``; this module
starts it and hands ``harness.run.run`` a session whose interpreter runs on the virtual-time loop
(``harness.sim.loop``), whose faults go through the one fault driver over the simulated network, clocks
and processes, and whose clients and status polls are the system's own client code over simulated
connections. There is nothing to tear down: the world lives in this process. After the run the system's
journals are written where a container run collects them, and the history and journals are hashed
(:func:`trace_digest`): on this platform a seed fixes everything, so the same seed gives the same bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from harness import store
from harness.compose import Composition
from harness.db import Simulation, has_capability
from harness.platforms import Launch, Session, apply_directly
from harness.sim.loop import NS, run_simulated
from harness.spec import ConfigError, rng_for
from nemesis.driver import FaultDriver

STALL_MARGIN = 3600.0
"""Simulated seconds beyond every phase's own bound after which a run that has not ended is stalled."""


class SimPlatform:
    """The ``sim`` platform of one composed test."""

    def __init__(self, comp: Composition) -> None:
        self.comp = comp
        self.system: Any = None

    def preflight(self) -> None:
        if not has_capability(self.comp.db, Simulation):
            raise ConfigError(
                f"the {self.comp.plugin.name!r} DB adapter cannot run on the sim platform: it has no Simulation "
                "capability (simulate()); use --platform docker or ssh"
            )

    def deploy(self, launch: Launch) -> Session:
        comp, run_dir, test_doc = self.comp, launch.run_dir, launch.test_doc
        system = self.system = comp.db.simulate(comp.node_names, comp.spec.seed)
        system.start()
        test_doc["platform"] = {"kind": "sim"}
        test_doc["sim"] = system.describe()
        store.write_json(run_dir.test_json, test_doc)
        nemesis = None
        if comp.packages:
            nemesis = FaultDriver(system.fault_targets, net=system.net, clocks=system.clocks,
                                  processes=system.processes, rng=rng_for(comp.spec.seed, "nemesis-runtime"),
                                  members=system.nodes)
        spec = comp.spec
        world = system.world

        def finish() -> None:
            for relative, text in system.files().items():
                path = run_dir.path / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")

        return Session(
            open_client=lambda process: system.open_client(process, spec.op_timeout),
            status=system.status,
            caught_up=None,
            nemesis=nemesis,
            run_fault=apply_directly,
            execute=lambda main: run_simulated(world, main),
            clock_ns=lambda: world.now,
            wall_at=lambda ns: system.wall_epoch + ns / NS,
            finish=finish,
            results=lambda start_ns: _results(system, run_dir, start_ns),
            bound=(spec.leader_timeout + spec.time_limit + spec.op_timeout + spec.recovery_timeout
                   + STALL_MARGIN),
        )


def _results(system: Any, run_dir: store.RunDir, start_ns: int) -> dict[str, Any]:
    """What ``results.json`` adds for a simulated run: its length in simulated seconds (its duration),
    what the world did, and the fingerprint of its history and journals."""
    sim_seconds = round((system.world.now - start_ns) / NS, 6)
    return {"duration_s": sim_seconds,
            "sim": {"sim_seconds": sim_seconds, **system.stats(), **trace_digest(run_dir.path)}}


def trace_digest(run_dir: str | Path) -> dict[str, str]:
    """SHA-256 of ``history.jsonl`` and of every journal (nodes, then a lease cluster's store members, in
    name order): what exact replay promises."""
    path = Path(run_dir)
    history = hashlib.sha256((path / store.HISTORY).read_bytes() if (path / store.HISTORY).exists() else b"")
    journals = hashlib.sha256()
    found = sorted((path / store.NODES).glob(f"*/{store.JOURNAL}"))
    found += sorted((path / "external-store").glob(f"*/{store.JOURNAL}"))
    for journal in found:
        journals.update(journal.parent.name.encode() + b"\n")
        journals.update(journal.read_bytes())
    return {"history_sha256": history.hexdigest(), "journals_sha256": journals.hexdigest()}
