"""Simulated runs for exploration, replay and shrinking: ``harness run --platform sim`` in scratch space.

A simulated test is a :class:`~harness.spec.TestSpec` whose platform is ``sim``, run by the one lifecycle
(``harness.run.run``): the same composition, interpreter, fault driver, clients and judge as a container
run, on a virtual-time loop over the DB's simulated system (``harness.platforms.sim``). So
``harness simulate --seed 7`` and ``harness run --platform sim --seed 7`` store the same run, and the
seed fixes everything: the network, the clocks and every interleaving.

What this module adds is what exploring many seeds needs: running into a scratch directory that records
its process (:func:`owned_scratch`, :func:`scratch_run`) and keeping or discarding the result
(:func:`keep`, :func:`discard`), the :class:`SimResult` of one seed (verdict, simulated and wall seconds,
the trace digest, what each worker slot invoked), and replaying a stored simulated run, from scripts when
it was shrunk (:func:`replay_stored`). Exact replay: the history and journals of a seed are
byte-identical on every run; ``results.json`` records their hashes (``harness.platforms.sim.trace_digest``).
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from checkers.verdict import UNKNOWN, Valid, exit_code
from harness import store
from harness.compose import Composition, compose
from harness.db import Simulation, has_capability
from harness.db.plugin import DBPlugin, PluginError, installed, load_plugin
from harness.lifecycle import Controller
from harness.platforms.sim import trace_digest
from harness.report.publish import publish
from harness.run import run
from harness.spec import ConfigError, TestSpec
from nemesis.generator import ScheduledFault, schedule_from_jsonl
from workloads.generator import scripts_from_jsonl
from workloads.ops import Op

SCRATCH = ".sim-scratch"
SCRATCH_OWNER = "controller.json"
"""In each scratch directory of a simulation (an exploration, a shrink, a replay that checks determinism,
a shrink's minimal run before it is kept): the process that made it (:func:`owned_scratch`)."""

__all__ = ["SimResult", "compose_sim", "simulate", "trace_digest"]


def simulatable_db() -> str:
    """The one installed DB plugin that can run on the sim platform: the default ``--db`` of
    ``harness simulate``. :class:`ConfigError` when there is none, or more than one to choose from."""
    found = [name for name, entry in installed().items() if _can_simulate(name, entry.value)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise ConfigError("no installed DB plugin can run in the simulator (none has a Simulation capability)")
    raise ConfigError(f"several installed DB plugins can run in the simulator ({', '.join(found)}): name one with --db")


@cache
def _can_simulate(name: str, entry: str) -> bool:
    """Whether plugin ``name`` (its entry point ``entry``: the answer is kept per process for each) composes
    a simulated test with its default options; a plugin that cannot be built for the probe (its options need
    more nodes, say) is not the one ``harness simulate`` means. An adapter without the Simulation capability
    is not composed: ``harness simulate`` asked every installed plugin twice, 0.9 s of its 3.6."""
    try:
        plugin = load_plugin(name)
        db = _default_adapter(plugin, "register")
        workload = (tuple(getattr(db, "workloads", ()) or ()) or ("register",))[0]
        if workload != "register":
            db = _default_adapter(plugin, workload)  # the adapter the probe composes
        if not has_capability(db, Simulation):
            return False
        probe = compose(TestSpec(seed=0, db=name, workload=workload, nemesis=(), platform="sim"))
    except (PluginError, ConfigError, ValueError):
        return False
    return has_capability(probe.db, Simulation)


def _default_adapter(plugin: DBPlugin, workload: str) -> object:
    """The plugin's adapter with its default options, for a simulated test of ``workload`` on the default
    nodes."""
    from harness.db.plugin import DBContext

    nodes = tuple(f"n{i}" for i in range(1, TestSpec(seed=0, db=plugin.name).nodes + 1))
    return plugin.build(plugin.resolve({}), DBContext(seed=0, nodes=nodes, workload=workload, platform="sim"))


def compose_sim(spec: TestSpec) -> Composition:
    """Compose a simulated test (``spec`` on the sim platform); :class:`ConfigError` if it cannot run there."""
    from harness.platforms.sim import SimPlatform

    comp = compose(replace(spec, platform="sim"))
    SimPlatform(comp).preflight()
    return comp


def known_bugs(db: str) -> dict[str, dict[str, Any]]:
    """The known bugs a DB plugin publishes (``extras["known_bugs"]``: modes, checker, workload), if any."""
    try:
        plugin = load_plugin(db)
    except PluginError as exc:
        raise ConfigError(str(exc)) from None
    return dict(plugin.extras.get("known_bugs", {}))


def checker_for_bug(db: str, bug: str) -> str:
    """The checker (``checkers.registry.CHECKERS``) that must catch ``bug`` of ``db``."""
    return known_bugs(db)[bug]["checker"]


def workload_for_bug(db: str, bug: str) -> str:
    """The workload whose operations can show ``bug`` of ``db``."""
    return known_bugs(db)[bug]["workload"]


@dataclass
class SimResult:
    """How one simulated run ended: its verdict, where it is stored, and its measurements."""

    spec: TestSpec
    run_dir: Path
    valid: Valid
    results: dict[str, Any]
    sim_seconds: float
    wall_seconds: float
    digest: dict[str, str]
    scripts: dict[int, list[Op]]
    schedule: tuple[ScheduledFault, ...]
    client_ops: int = 0
    error: str | None = None
    interrupted: bool = False
    """Ctrl-C, SIGTERM or SIGHUP ended the run before its end: stored and judged, but not a verdict on the seed."""
    stop_requested: bool = False
    """One of them came during the run, perhaps only during its teardown (``RunResult.stop_requested``)."""

    @property
    def exit_code(self) -> int:
        return exit_code(self.valid)

    @property
    def failed_checkers(self) -> list[str]:
        return sorted(n for n, v in self.results.get("checkers", {}).items() if v.get("valid") is False)

    @property
    def unknown_checkers(self) -> list[str]:
        return sorted(n for n, v in self.results.get("checkers", {}).items() if v.get("valid") == UNKNOWN)

    @property
    def replay_command(self) -> str | None:
        document = store.read_json(store.RunDir(self.run_dir).test_json)
        return document.get("replay_command") or document.get("command")


SIM_GC_THRESHOLD = 50_000
"""The collector's first threshold while a simulation runs (Python's default: 700 allocations)."""
_frozen = False


@contextlib.contextmanager
def lean_gc() -> Iterator[None]:
    """Less cyclic garbage collection while a simulation runs: what is alive before the first one in this
    process (modules, classes, caches: it lives as long as the process) is left out of every collection
    (``gc.freeze``), and the youngest generation is collected every :data:`SIM_GC_THRESHOLD` allocations
    instead of 700. A seed allocates millions of short-lived objects that reference counting frees, and
    the collections rescanned the long-lived ones: about 8% of a seed's CPU, half of it one full
    collection. Cycles are still collected, and the thresholds are restored after. Collection never
    decides what a simulation does (an exploration's seeds ran with the collector in whatever state the
    seeds before left it, and replay byte for byte)."""
    global _frozen
    if not _frozen:
        gc.freeze()
        _frozen = True
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], SIM_GC_THRESHOLD), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def simulate(
    spec: TestSpec,
    run_dir: str | os.PathLike[str] | None = None,
    *,
    schedule: Sequence[ScheduledFault] | None = None,
    scripts: Mapping[int, Sequence[Op]] | None = None,
    checkers: Iterable[str] | None = None,
    replay_command: str | None = None,
    reproduces: str | None = None,
) -> SimResult:
    """Run ``spec`` on the sim platform into ``run_dir`` (a new or empty directory; ``None``: a new run
    directory of the store) and judge it; ``checkers`` narrows the judging (a shrinker asks one)."""
    spec = replace(spec, platform="sim")
    if checkers is not None:
        spec = replace(spec, checkers=tuple(checkers))
    wall = time.perf_counter()
    with lean_gc():
        result = run(spec, schedule=schedule, scripts=scripts, reproduces=reproduces, run_dir=run_dir,
                     replay_command=replay_command, report=run_dir is None)
    wall = time.perf_counter() - wall
    if result.run_dir is None or result.results is None:
        raise ConfigError(f"the simulation of seed {spec.seed} left no run")
    # A crash is the caller's to see, unless a signal came during the run: then the caller must stop (an
    # exploration ends, ``harness.sim.explore``) whatever the crash was, and the error stays in the result.
    crashed = result.error is not None and not result.interrupted and "stalled" not in result.error
    if crashed and not result.stop_requested:
        raise RuntimeError(f"the simulation of seed {spec.seed} crashed: {result.error}")
    results = result.results
    sim = results.get("sim", {})
    invoked = {int(k): list(v) for k, v in (scripts or result.invoked).items()}
    return SimResult(spec, Path(result.run_dir), result.valid, results, float(sim.get("sim_seconds", 0.0)), wall,
                     {k: sim[k] for k in ("history_sha256", "journals_sha256") if k in sim}, invoked,
                     result.schedule, client_ops=results.get("ops", 0), error=result.error,
                     interrupted=result.interrupted, stop_requested=result.stop_requested)


@contextlib.contextmanager
def owned_scratch(store_dir: str | os.PathLike[str], kind: str) -> Iterator[Path]:
    """A new directory under ``store/.sim-scratch/`` for the runs of one exploration, shrink or single
    scratch run (``kind``), with the process that made it recorded in it (:data:`SCRATCH_OWNER`: pid, host,
    start time), removed with whatever is still in it when the block ends (and ``.sim-scratch`` with it
    when nothing else uses that), also at a signal; a SIGKILL leaves it, and ``harness clean`` removes it
    once that process is dead. The runs go in directories inside it, never in it: a run directory must
    start empty, and one kept (:func:`keep`) leaves without the record."""
    directory = Path(store_dir) / SCRATCH / f"{kind}-{os.getpid()}-{time.monotonic_ns()}"
    directory.mkdir(parents=True, exist_ok=True)
    try:
        store.write_json(directory / SCRATCH_OWNER, Controller.current().to_json())
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        with contextlib.suppress(OSError):
            directory.parent.rmdir()  # .sim-scratch, when nothing else uses it


@contextlib.contextmanager
def scratch_run(store_dir: str | os.PathLike[str], kind: str) -> Iterator[Path]:
    """The run directory (not made yet) of one run that may not be kept, inside an :func:`owned_scratch`
    directory of its own (``kind``: ``replay`` for ``--check-determinism``'s second run, ``minimal`` for a
    shrink's result until :func:`keep` moves it into the store)."""
    with owned_scratch(store_dir, kind) as directory:
        yield directory / "run"


def keep(result: SimResult) -> SimResult:
    """Move a run simulated in a scratch directory into the store proper, then point ``latest`` at it (never
    at the directory while the run is being moved in)."""
    spec = result.spec
    target = store.create_run(spec.store, result.results.get("test") or "sim", datetime.now(UTC), latest=False)
    # Moved in entry by entry: the directory create_run made stays this run's all along. Freeing its name to
    # rename the run over it let another process (an exploration's other worker, keeping a run in the same
    # second) take the name in between, and one of the two runs was lost.
    shutil.rmtree(target.path / store.NODES)
    source = Path(result.run_dir)
    for entry in source.iterdir():
        os.replace(entry, target.path / entry.name)
    source.rmdir()
    result.run_dir = target.path
    store.update_latest(spec.store, target)
    publish(target.path)
    return result


def discard(result: SimResult) -> None:
    shutil.rmtree(result.run_dir, ignore_errors=True)


def load_stored(path: str | os.PathLike[str]) -> tuple[store.RunDir, TestSpec, tuple[ScheduledFault, ...],
                                                       dict[int, list[Op]] | None, dict[str, Any]]:
    """A stored sim run's directory, spec, schedule, its scripts (when it ran from scripts) and test.json."""
    run_dir = store.find_run(path)
    document = store.read_json(run_dir.test_json)
    spec_data = document.get("spec") if isinstance(document, dict) else None
    if not isinstance(spec_data, dict) or spec_data.get("platform") != "sim":
        raise ConfigError(f"{run_dir.path} is not a simulated run (its spec's platform is not sim); "
                          "replay container runs with harness reproduce")
    spec = TestSpec.from_json(_first_format(spec_data), where=f"{run_dir.test_json}: spec")
    lines = store.read_jsonl(run_dir.schedule) if run_dir.schedule.exists() else []
    try:
        schedule = schedule_from_jsonl(lines)
        scripts = scripts_from_jsonl(lines) if document.get("scripted") else None
    except ValueError as exc:
        raise ConfigError(f"{run_dir.schedule}: {exc}") from None
    return run_dir, spec, schedule, scripts, document


def _first_format(data: Mapping[str, Any]) -> dict[str, Any]:
    """A simulated spec written before the simulator was a platform (``fsync``, ``core``,
    ``client_start`` at the top) in today's form: the first two are the cluster's node settings."""
    data = dict(data)
    core = dict(data.pop("core", None) or {})
    fsync = data.pop("fsync", None)
    if fsync not in (None, "always"):
        core["fsync"] = fsync
    data.pop("client_start", None)
    if core:
        data["db_options"] = {**dict(data.get("db_options") or {}), "core": core}
    return data


def replay_stored(path: str | os.PathLike[str], *, store_dir: str | None = None) -> tuple[SimResult, dict[str, Any]]:
    """Run a stored sim run again from its stored spec, schedule and scripts; returns the new result and
    the stored ``results.json`` (whose hashes the new run must match)."""
    run_dir, spec, schedule, scripts, document = load_stored(path)
    if store_dir is not None:
        spec = replace(spec, store=store_dir)
    original = store.read_json(run_dir.results) if run_dir.results.exists() else {}
    result = simulate(spec, schedule=schedule, scripts=scripts, replay_command=document.get("replay_command"),
                      reproduces=str(run_dir.path))
    return result, original
