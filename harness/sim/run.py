"""One simulated test, from its spec to a stored, judged run: :func:`simulate`.

A :class:`SimSpec` says everything that defines a simulated test. Its seed feeds the same generators as
``harness run`` (``harness.run.rng_for``: the nemesis schedule from ``"nemesis"``, the workload from
``"workload"``, run-time target draws from ``"nemesis-runtime"``), so ``harness simulate --seed 7`` and
``harness run --seed 7`` with the same options face the same schedule of operations and faults; on the
sim platform the seed also fixes the network, the clocks and every interleaving.

The output is a normal stored run (FORMATS.md): ``test.json`` (with the replay command), ``schedule.jsonl``
(the faults, and the operations each worker slot was handed), ``history.jsonl`` (through
``harness.history.HistoryWriter``), ``nodes/<node>/journal.jsonl``, ``results.json`` from the same checkers
``harness run`` calls (``checkers.registry``). Reports and the analysis pipeline read it unchanged.

Exact replay: the history and journals of a seed are byte-identical on every run. :func:`trace_digest`
hashes them; ``results.json`` records the hashes; ``--check-determinism`` replays and compares.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.cluster.db import EXTERNAL_STORE, STORE
from checkers.history import HistoryError, load_history, load_journals
from checkers.registry import CHECKERS, CheckInput, run_checker
from checkers.verdict import UNKNOWN, Valid, Verdict, combine, exit_code
from cluster.core import bugs as bugs_module
from cluster.core.bugs import KNOWN_BUGS, KnownBug
from cluster.core.election import ELECTIONS
from harness import store
from harness.sim.clock import NS, WALL_EPOCH
from harness.sim.disk import FSYNC_POLICIES
from harness.sim.platform import PlatformConfig, SimPlatform
from harness.sim.world import World, WorldConfig
from harness.spec import ConfigError, rng_for
from nemesis.generator import (
    NemesisOptions,
    ScheduledFault,
    check_cluster_size,
    generate_schedule,
    parse_nemesis,
    schedule_from_jsonl,
)
from workloads.generator import make_workload, workload_names
from workloads.ops import Op, Workload

SIM_NEMESES: tuple[str, ...] = ("partition", "kill", "pause", "clock", "loss", "latency")
"""The default packages: every single-fault package (latency works here, netem or not). The composed
``leader-clock`` works here too, asked for by name (a default that grew would move every stored seed)."""
DEFAULT_RATE = 2.0
"""Operations per second per client process in the simulator (see docs/simulation.md, "Speed")."""
SCRATCH = ".sim-scratch"

CHECKER_OF_BUG = {"committed-data durability": "durability"}
"""``KnownBug.caught_by`` names the property; this maps it to the checker's name in ``checkers.registry``
where the two differ."""


def sim_modes() -> dict[str, Any]:
    """The election modes the simulator runs: every mode of ``ELECTIONS`` (the simulator deploys the
    fluvio controller and the lease mode's store group itself)."""
    return dict(ELECTIONS)


def sim_bugs() -> dict[str, KnownBug]:
    """Every known bug the simulator can run: ``KNOWN_BUGS`` and those of the external-store modes."""
    return {**KNOWN_BUGS, **getattr(bugs_module, "EXTERNAL_STORE_BUGS", {})}


def checker_for_bug(bug: str) -> str:
    """The name (in ``checkers.registry.CHECKERS``) of the checker that must catch ``bug``."""
    caught_by = sim_bugs()[bug].caught_by
    return CHECKER_OF_BUG.get(caught_by, caught_by)


def workload_for_bug(bug: str) -> str:
    """The workload whose operations can show ``bug``: queue PUTs for ``no-dedup``, registers otherwise."""
    return "queue" if bug == "no-dedup" else "register"


@dataclass(frozen=True)
class SimSpec:
    """Everything that defines a simulated test; stored as ``test.json``'s ``spec``. Times in seconds."""

    seed: int
    mode: str = "blazingmq"
    nodes: int = 5
    workload: str = "register"
    nemesis: tuple[str, ...] = SIM_NEMESES
    time_limit: float = 60.0
    concurrency: int = 10
    bugs: tuple[str, ...] = ()
    rate: float | None = DEFAULT_RATE
    op_timeout: float = 5.0
    nemesis_interval: float = 10.0
    recovery_timeout: float = 30.0
    fsync: str = "always"
    client_start: str = "spread"
    core: Mapping[str, Any] = field(default_factory=dict)
    """``NodeConfig`` overrides for every node, e.g. ``{"scouting": false}``."""
    store: str = "store"
    name: str | None = None
    check_timeout: float = 120.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "nemesis", tuple(self.nemesis))
        object.__setattr__(self, "bugs", tuple(self.bugs))
        object.__setattr__(self, "core", dict(sorted(dict(self.core).items())))

    @property
    def test_name(self) -> str:
        if self.name:
            return self.name
        base = f"sim-{self.mode}-{self.workload}-{'+'.join(self.nemesis) or 'none'}"
        return base + (f"-bug-{'+'.join(self.bugs)}" if self.bugs else "")

    def command(self) -> str:
        """The ``harness simulate`` command line that runs this spec again (the seed fixes everything)."""
        argv = ["harness", "simulate", "--seed", str(self.seed), "--mode", self.mode]
        if self.nodes != 5:
            argv += ["--nodes", str(self.nodes)]
        if self.workload != "register":
            argv += ["--workload", self.workload]
        if self.nemesis != SIM_NEMESES:
            argv += ["--nemesis", ",".join(self.nemesis) or "none"]
        if self.time_limit != 60.0:
            argv += ["--time-limit", f"{self.time_limit:g}"]
        if self.concurrency != 10:
            argv += ["--concurrency", str(self.concurrency)]
        if self.rate != DEFAULT_RATE:
            argv += ["--rate", "0" if self.rate is None else f"{self.rate:g}"]
        for bug in self.bugs:
            argv += ["--bug", bug]
        if self.op_timeout != 5.0:
            argv += ["--op-timeout", f"{self.op_timeout:g}"]
        if self.nemesis_interval != 10.0:
            argv += ["--nemesis-interval", f"{self.nemesis_interval:g}"]
        if self.fsync != "always":
            argv += ["--fsync", self.fsync]
        if self.client_start != "spread":
            argv += ["--client-start", self.client_start]
        for key, value in self.core.items():
            argv += ["--core", f"{key}={json.dumps(value)}"]
        if self.store != "store":
            argv += ["--store", self.store]
        return shlex.join(argv)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["nemesis"], data["bugs"], data["core"] = list(self.nemesis), list(self.bugs), dict(self.core)
        data["platform"] = "sim"
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SimSpec:
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k != "platform"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"sim spec has unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        if "seed" not in data:
            raise ConfigError("sim spec has no seed")
        return cls(**data)


@dataclass
class Composition:
    """A simulated test composed and validated, before anything runs."""

    spec: SimSpec
    world_config: WorldConfig
    platform_config: PlatformConfig
    packages: tuple[str, ...]
    workload: Workload


def compose(spec: SimSpec) -> Composition:
    """Check every name and number of ``spec``; raises :class:`ConfigError` with one sentence."""
    packages = check_names(spec.mode, tuple(sim_modes()), spec.bugs, spec.workload, spec.nemesis, spec.nodes)
    if spec.fsync not in FSYNC_POLICIES:
        raise ConfigError(f"unknown fsync policy {spec.fsync!r}; valid: {', '.join(FSYNC_POLICIES)}")
    if not 1 <= spec.nodes <= 99:
        raise ConfigError(f"--nodes must be between 1 and 99, not {spec.nodes}")
    try:
        world_config = WorldConfig(nodes=spec.nodes, mode=spec.mode, bugs=spec.bugs, fsync=spec.fsync, core=spec.core)
        world_config.node_config("n1")
        platform_config = PlatformConfig(concurrency=spec.concurrency, time_limit=spec.time_limit,
                                         op_timeout=spec.op_timeout, recovery_timeout=spec.recovery_timeout,
                                         client_start=spec.client_start)
        if not spec.nemesis_interval > 0:
            raise ValueError(f"nemesis-interval must be a positive number of seconds, not {spec.nemesis_interval}")
        workload = make_workload(spec.workload, rng_for(spec.seed, "workload"), rate=spec.rate)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    return Composition(spec, world_config, platform_config, packages, workload)


def seed_schedule(comp: Composition) -> tuple[ScheduledFault, ...]:
    """The nemesis schedule the seed produces: ``harness.run.generate_schedule``'s for the same spec, drawn
    from the same fault targets (``WorldConfig.fault_targets``, ``harness.db.fault_targets``: the data
    nodes, and the fluvio controller in that mode)."""
    if not comp.packages:
        return ()
    spec = comp.spec
    return generate_schedule(comp.packages, comp.world_config.fault_targets, rng_for(spec.seed, "nemesis"),
                             spec.time_limit, NemesisOptions(interval=spec.nemesis_interval))


@dataclass
class SimResult:
    """How one simulated run ended: its verdict, where it is stored, and its measurements."""

    spec: SimSpec
    run_dir: Path
    valid: Valid
    results: dict[str, Any]
    sim_seconds: float
    wall_seconds: float
    digest: dict[str, str]
    scripts: dict[int, list[Op]]
    schedule: tuple[ScheduledFault, ...]
    client_ops: int = 0

    @property
    def exit_code(self) -> int:
        return exit_code(self.valid)

    @property
    def failed_checkers(self) -> list[str]:
        return sorted(n for n, v in self.results.get("checkers", {}).items() if v.get("valid") is False)

    @property
    def unknown_checkers(self) -> list[str]:
        return sorted(n for n, v in self.results.get("checkers", {}).items() if v.get("valid") == UNKNOWN)


def simulate(
    spec: SimSpec,
    run_dir: str | os.PathLike[str],
    *,
    schedule: Sequence[ScheduledFault] | None = None,
    scripts: Mapping[int, Sequence[Op]] | None = None,
    checkers: Iterable[str] | None = None,
    replay_command: str | None = None,
    reproduces: str | None = None,
) -> SimResult:
    """Simulate ``spec`` into the (new or empty) directory ``run_dir`` and judge it. The steps:

    1. Compose (names and numbers checked: :class:`ConfigError`), the schedule from the seed unless one
       is given, the operations from the workload's streams unless ``scripts`` are given.
    2. Write ``test.json`` and ``schedule.jsonl``.
    3. Run the world and the platform to the end of the final phase; the history is written as it goes.
    4. Write each node's journal; hash the history and journals.
    5. Judge with the workload's checkers (or only ``checkers``) and write ``results.json``.
    """
    comp = compose(spec)
    wall_started = time.perf_counter()
    directory = store.RunDir(Path(run_dir))
    directory.path.mkdir(parents=True, exist_ok=True)
    directory.nodes.mkdir(exist_ok=True)
    if schedule is None:
        schedule = seed_schedule(comp)
    schedule = tuple(schedule)
    custom = scripts is not None or replay_command is not None
    command = spec.command()
    replay = replay_command or (command if not custom else None)
    test_doc = _test_document(comp, command, replay, reproduces)
    store.write_json(directory.test_json, test_doc)

    world = World(comp.world_config, spec.seed)
    platform = SimPlatform(world, directory.history, comp.workload, comp.platform_config, schedule=schedule,
                           nemesis_rng=rng_for(spec.seed, "nemesis-runtime"), scripts=scripts)
    error = None
    try:
        platform.run()
    except Exception as exc:  # noqa: BLE001 - a crashed simulation still leaves an analysable run
        error = f"{type(exc).__name__}: {exc}"
        if platform.history is not None:
            platform.history.close()
    invoked = {slot: list(ops) for slot, ops in sorted(platform.invoked.items())}
    store.write_jsonl(directory.schedule, _schedule_lines(schedule, scripts if scripts is not None else invoked))
    for process in world.process_ids:
        # The store's members are another cluster: their journals stay out of nodes/, where the checkers
        # would read their terms and LSNs as the data cluster's.
        kind = world.nodes[process].kind
        path = directory.journal(process) if kind != STORE else _store_journal(directory, process)
        lines = world.journal_lines(process)
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    digest = trace_digest(directory.path)
    sim_seconds = (world.now - platform.start_ns) / NS if platform.started else 0.0
    sim_stats = {
        "sim_seconds": round(sim_seconds, 6),
        "world_seconds": round(world.now / NS, 6),
        "events": world.events,
        "core_calls": world.core_calls,
        "messages": world.network.sent,
        "dropped": world.network.dropped,
        "duplicated": world.network.duplicated,
        "retransmitted": world.network.retransmitted,
        "restarts": sum(max(0, n.starts - 1) for n in world.nodes.values()),
        "records_lost": sum(n.disk.lost for n in world.nodes.values()),
        "stale_ticks": world.stale_ticks,
        "final_ops": platform.final_ops,
        **digest,
    }
    results = judge(directory, comp, sim_stats, platform, error, checkers)
    wall = time.perf_counter() - wall_started
    test_doc["timings"]["wall_s"] = round(wall, 3)
    test_doc["timings"]["history_started_wall"] = WALL_EPOCH + platform.start_ns / NS
    test_doc["stats"] = platform.stats.to_json()
    store.write_json(directory.test_json, test_doc)
    history_ops = results.get("ops", 0)
    return SimResult(spec, directory.path, results["valid"], results, sim_seconds, wall, digest,
                     invoked if scripts is None else {int(k): list(v) for k, v in scripts.items()}, schedule,
                     client_ops=history_ops)


def judge(directory: store.RunDir, comp: Composition, sim_stats: Mapping[str, Any], platform: SimPlatform,
          error: str | None, only: Iterable[str] | None = None) -> dict[str, Any]:
    """Run the workload's checkers (each through ``check_safe``) on the stored run; write ``results.json``."""
    spec = comp.spec
    names = list(comp.workload.checkers) if only is None else [n for n in comp.workload.checkers if n in set(only)]
    verdicts: dict[str, Verdict] = {}
    ops = 0
    try:
        if not names:
            raise HistoryError(str(directory.history), None, "no checker asked for")
        history = load_history(directory.history)
        ops = sum(1 for op in history.ops if op.f != "status")
        journals = load_journals(directory.nodes)
    except HistoryError as exc:
        for name in names:
            verdicts[name] = Verdict(UNKNOWN, f"{name} could not read the run: {exc}")
    else:
        inp = CheckInput(history=history, model=comp.workload.model, journals=journals,
                         timeout_s=spec.check_timeout)
        for name in names:
            checker = CHECKERS.get(name)
            if checker is None:
                verdicts[name] = Verdict(UNKNOWN, f"no checker called {name!r}; known: {', '.join(CHECKERS)}")
            elif not checker.applies(inp):
                verdicts[name] = Verdict(UNKNOWN, f"{name} cannot judge this run (nothing it needs was recorded)")
            else:
                verdicts[name] = run_checker(name, inp)
    valid: Valid = combine(verdicts) if verdicts else UNKNOWN
    if error is not None and valid is True:
        valid = UNKNOWN
    results: dict[str, Any] = {
        "valid": valid,
        "seed": spec.seed,
        "test": spec.test_name,
        "ops": ops,
        "duration_s": sim_stats["sim_seconds"],
        "checkers": {name: verdict.to_json() for name, verdict in verdicts.items()},
        "analysed_by": "harness simulate (checkers called directly)",
        "stats": platform.stats.to_json(),
        "sim": dict(sim_stats),
    }
    if error is not None:
        results["error"] = error
    store.write_json(directory.results, results)
    return results


def _store_journal(directory: store.RunDir, member: str) -> Path:
    folder = directory.path / EXTERNAL_STORE / store.safe_name(member)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / store.JOURNAL


def trace_digest(run_dir: str | os.PathLike[str]) -> dict[str, str]:
    """SHA-256 of ``history.jsonl`` and of every journal (nodes, then a lease cluster's store members, in
    name order): what exact replay promises."""
    path = Path(run_dir)
    history = hashlib.sha256((path / store.HISTORY).read_bytes() if (path / store.HISTORY).exists() else b"")
    journals = hashlib.sha256()
    found = sorted((path / store.NODES).glob(f"*/{store.JOURNAL}"))
    found += sorted((path / EXTERNAL_STORE).glob(f"*/{store.JOURNAL}"))
    for journal in found:
        journals.update(journal.parent.name.encode() + b"\n")
        journals.update(journal.read_bytes())
    return {"history_sha256": history.hexdigest(), "journals_sha256": journals.hexdigest()}


def _schedule_lines(schedule: Sequence[ScheduledFault], scripts: Mapping[int, Sequence[Op]]) -> list[dict[str, Any]]:
    """``schedule.jsonl``: the nemesis lines (``nemesis.generator``'s format), then each worker slot's
    operations in order (``{"process": "client", "slot", "index", ...Op.to_json()}``)."""
    lines = [entry.to_json() for entry in schedule]
    for slot in sorted(scripts):
        for index, op in enumerate(scripts[slot]):
            lines.append({"process": "client", "slot": slot, "index": index, **op.to_json()})
    return lines


def scripts_from_jsonl(lines: Iterable[Mapping[str, Any]]) -> dict[int, list[Op]]:
    """The client lines of a stored ``schedule.jsonl``, per worker slot, in order."""
    scripts: dict[int, list[tuple[int, Op]]] = {}
    for line in lines:
        if line.get("process") != "client":
            continue
        slot, index = line.get("slot"), line.get("index")
        if not isinstance(slot, int) or not isinstance(index, int):
            raise ValueError(f"a client schedule line needs integer 'slot' and 'index': {dict(line)!r}")
        scripts.setdefault(slot, []).append((index, Op.from_json(line)))
    return {slot: [op for _, op in sorted(ops, key=lambda pair: pair[0])] for slot, ops in sorted(scripts.items())}


def _test_document(comp: Composition, command: str, replay: str | None, reproduces: str | None) -> dict[str, Any]:
    """``test.json`` of a simulated run (FORMATS.md), with the simulated world's settings."""
    spec = comp.spec
    return {
        "test": spec.test_name,
        "seed": spec.seed,
        "command": command,
        "replay_command": replay,
        "platform": {"kind": "sim"},
        "sim": {
            "network": asdict(comp.world_config.network),
            "max_drift": comp.world_config.max_drift,
            "max_initial_offset": comp.world_config.max_initial_offset,
            "fsync": spec.fsync,
            "wall_epoch": WALL_EPOCH,
        },
        "nodes": list(comp.world_config.node_ids),
        "db": "cluster",
        "db_options": {"mode": spec.mode, "bug": list(spec.bugs), "core": dict(spec.core)},
        "mode": spec.mode,
        "bugs": list(spec.bugs),
        "workload": spec.workload,
        "nemesis": list(comp.packages),
        "model": comp.workload.model,
        "checkers": list(comp.workload.checkers),
        "timings": {
            "time_limit": spec.time_limit,
            "op_timeout": spec.op_timeout,
            "nemesis_interval": spec.nemesis_interval,
            "recovery_timeout": spec.recovery_timeout,
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
        },
        "versions": store.versions(),
        "git_commit": store.git_commit(Path(__file__).resolve().parents[2]),
        "reproduces": reproduces,
        "spec": spec.to_json(),
    }


def check_names(
    mode: str, modes: Sequence[str], bugs: Sequence[str], workload: str, nemesis: Sequence[str], nodes: int
) -> tuple[str, ...]:
    """Check a simulated test's mode, bugs (for that mode), workload and nemesis packages (for a cluster of
    ``nodes``); return the packages. :class:`ConfigError` with one sentence."""
    if mode not in modes:
        raise ConfigError(f"unknown mode {mode!r}; valid: {', '.join(modes)}")
    try:
        bugs_module.validate_bugs(bugs, mode)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if workload not in workload_names():
        raise ConfigError(f"unknown workload {workload!r}; valid: {', '.join(workload_names())}")
    try:
        packages = parse_nemesis(nemesis)
        check_cluster_size(packages, nodes)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return packages


# -- storing --------------------------------------------------------------------------------------------


def simulate_stored(spec: SimSpec, **options: Any) -> SimResult:
    """:func:`simulate` into a new run directory of the store (``store/<test>/<time>/``, ``latest``)."""
    compose(spec)
    run_dir = store.create_run(spec.store, spec.test_name, datetime.now(UTC))
    return simulate(spec, run_dir.path, **options)


def scratch_dir(store_dir: str | os.PathLike[str]) -> Path:
    """A new private directory under ``store/.sim-scratch/`` for a run that may not be kept."""
    base = Path(store_dir) / SCRATCH
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=base))


def keep(result: SimResult) -> SimResult:
    """Move a run simulated in a scratch directory into the store proper (and point ``latest`` at it)."""
    spec = result.spec
    target = store.create_run(spec.store, spec.test_name, datetime.now(UTC))
    shutil.rmtree(target.path)
    os.replace(result.run_dir, target.path)
    result.run_dir = target.path
    store.update_latest(spec.store, target)
    return result


def discard(result: SimResult) -> None:
    shutil.rmtree(result.run_dir, ignore_errors=True)


def load_stored(path: str | os.PathLike[str]) -> tuple[store.RunDir, SimSpec, tuple[ScheduledFault, ...],
                                                       dict[int, list[Op]] | None, dict[str, Any]]:
    """A stored sim run's directory, spec, schedule, its scripts (when it ran from scripts) and test.json."""
    run_dir = store.find_run(path)
    document = store.read_json(run_dir.test_json)
    spec_data = document.get("spec") if isinstance(document, dict) else None
    if not isinstance(spec_data, dict) or spec_data.get("platform") != "sim":
        raise ConfigError(f"{run_dir.path} is not a simulated run (its test.json has no sim spec); "
                          "replay container runs with harness reproduce")
    spec = SimSpec.from_json(spec_data)
    lines = store.read_jsonl(run_dir.schedule) if run_dir.schedule.exists() else []
    try:
        schedule = schedule_from_jsonl(lines)
        scripts = scripts_from_jsonl(lines) if document.get("scripted") else None
    except ValueError as exc:
        raise ConfigError(f"{run_dir.schedule}: {exc}") from None
    return run_dir, spec, schedule, scripts, document


def replay_stored(path: str | os.PathLike[str], *, store_dir: str | None = None) -> tuple[SimResult, dict[str, Any]]:
    """Run a stored sim run again from its stored spec, schedule and scripts; returns the new result and
    the stored ``results.json`` (whose hashes the new run must match)."""
    run_dir, spec, schedule, scripts, document = load_stored(path)
    if store_dir is not None:
        spec = replace(spec, store=store_dir)
    original = store.read_json(run_dir.results) if run_dir.results.exists() else {}
    replay = document.get("replay_command")
    result = simulate_stored(spec, schedule=schedule, scripts=scripts, replay_command=replay,
                             reproduces=str(run_dir.path))
    if scripts is not None:
        mark_scripted(result.run_dir)
    return result, original


def mark_scripted(run_dir: str | os.PathLike[str], extra: Mapping[str, Any] | None = None) -> None:
    """Record in ``test.json`` that the run's operations come from ``schedule.jsonl``'s client lines (a
    shrunk run), so a replay uses them instead of the workload's streams."""
    path = store.RunDir(Path(run_dir)).test_json
    document = store.read_json(path)
    document["scripted"] = True
    if extra:
        document.update(extra)
    store.write_json(path, document)
