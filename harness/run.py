"""One chaos test, from its spec to a stored, judged run: :func:`run` owns the whole lifecycle.

A :class:`TestSpec` says everything that defines a test (DB, mode, bugs, node count, workload, nemesis,
time limit, concurrency, seed, timings, platform); ``test.json`` stores it, so :func:`reproduce` can run
it again with the stored schedule. :func:`run` is the only place that sequences deployment, the
interpreter, teardown and checking; its docstring lists the steps, and an ``ExitStack`` guarantees the
teardown steps on every exit path (an exception, Ctrl-C, a failed deployment).

Seeds: each concern draws from its own ``random.Random`` derived from the run's seed and the concern's
name (:func:`rng_for`), so adding a draw to the workload never changes the nemesis schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import shlex
import signal
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from checkers.history import HistoryError, load_history, load_journals
from checkers.registry import CHECKERS, CheckInput, run_checker
from checkers.verdict import UNKNOWN, Valid, Verdict, combine, exit_code
from harness import store
from harness.db import (
    Deployment,
    MissingCapability,
    check_capabilities,
    collected_files,
    fault_targets,
    hosts_of,
    reply_ports,
)
from harness.db.cluster import PID_FILE, ClusterDB
from harness.fault_driver import ClusterNemesis, heal_everything
from harness.history import HistoryWriter
from harness.interpreter import Interpreter, InterpreterConfig, RunStats
from harness.report.publish import publish
from nemesis.generator import (
    CLOCK_PACKAGES,
    NemesisOptions,
    ScheduledFault,
    check_cluster_size,
    parse_nemesis,
    schedule_from_jsonl,
)
from nemesis.generator import generate_schedule as generate_nemesis_schedule
from nemesis.shell import FakeTime, ShellNemesis, install_faketime, vendored_libfaketime
from workloads.client import cluster_clients
from workloads.generator import make_workload, workload_names
from workloads.ops import Workload

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
DBS = ("cluster",)
PLATFORMS = ("docker", "ssh")
DEFAULT_IMAGE = "chaos-node:latest"
EXIT_BAD_CONFIG = 254
EXIT_CRASH = 255


class ConfigError(ValueError):
    """The test cannot be composed (a bad name, a missing capability, a missing engine): one sentence
    that says what is wrong and what to do. The CLI exits 254 with it."""


CORE_OPTION = "--core-option"
"""The node's flag for one ``NodeConfig`` setting (``cluster.node``)."""


def core_node_args(core: Mapping[str, Any]) -> tuple[str, ...]:
    """``--core-option NAME=JSON`` pairs for the node command line, one per setting, in name order."""
    return tuple(arg for name in sorted(core) for arg in (CORE_OPTION, f"{name}={json.dumps(core[name])}"))


def rng_for(seed: int, purpose: str) -> random.Random:
    """The run's random generator for one concern (``"nemesis"``, ``"workload"``), derived from the seed."""
    return random.Random(f"{seed}/{purpose}")


@dataclass(frozen=True)
class TestSpec:
    """Everything that defines a test; stored as ``test.json``'s ``spec``. Times are in seconds."""

    __test__ = False  # not a pytest test class, whatever its name says

    seed: int
    db: str = "cluster"
    mode: str = "blazingmq"
    nodes: int = 5
    workload: str = "register"
    nemesis: tuple[str, ...] = ()
    time_limit: float = 60.0
    concurrency: int = 10
    bugs: tuple[str, ...] = ()
    platform: str = "docker"
    hosts: str | None = None
    store: str = "store"
    name: str | None = None
    op_timeout: float = 5.0
    nemesis_interval: float = 10.0
    recovery_timeout: float = 30.0
    leader_timeout: float = 30.0
    check_timeout: float = 120.0
    rate: float | None = 10.0
    image: str = DEFAULT_IMAGE
    node_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("nemesis", "bugs", "node_args"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def test_name(self) -> str:
        """``cluster-blazingmq-register-partition+kill`` (and ``-bug-<names>``), unless ``name`` is given."""
        if self.name:
            return self.name
        base = f"{self.db}-{self.mode}-{self.workload}-{'+'.join(self.nemesis) or 'none'}"
        return base + (f"-bug-{'+'.join(self.bugs)}" if self.bugs else "")

    def command(self) -> str:
        """The ``harness run`` command line that runs this spec again."""
        argv = [
            "harness", "run", "--db", self.db, "--mode", self.mode, "--nodes", str(self.nodes),
            "--workload", self.workload, "--nemesis", ",".join(self.nemesis) or "none",
            "--time-limit", f"{self.time_limit:g}", "--concurrency", str(self.concurrency),
            "--seed", str(self.seed),
        ]
        if self.rate != 10.0:
            argv += ["--rate", "0" if self.rate is None else f"{self.rate:g}"]
        for bug in self.bugs:
            argv += ["--bug", bug]
        if self.platform != "docker":
            argv += ["--platform", self.platform]
        if self.hosts:
            argv += ["--hosts", self.hosts]
        if self.store != "store":
            argv += ["--store", self.store]
        if self.nemesis_interval != 10.0:
            argv += ["--nemesis-interval", f"{self.nemesis_interval:g}"]
        if self.op_timeout != 5.0:
            argv += ["--op-timeout", f"{self.op_timeout:g}"]
        for flag, setting in zip(self.node_args[::2], self.node_args[1::2], strict=False):
            if flag == CORE_OPTION:
                argv += ["--core", setting]
        return shlex.join(argv)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("nemesis", "bugs", "node_args"):
            data[name] = list(data[name])
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TestSpec:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"test spec has unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        if "seed" not in data:
            raise ConfigError("test spec has no seed")
        return cls(**dict(data))


@dataclass
class RunResult:
    """How a run ended: where it is stored, its verdict and the CLI's exit code."""

    spec: TestSpec
    run_dir: Path | None
    valid: Valid
    exit_code: int
    results: dict[str, Any] | None = None
    stats: RunStats | None = None
    error: str | None = None
    interrupted: bool = False
    teardown_errors: list[str] = field(default_factory=list)

    @property
    def failed_checkers(self) -> list[str]:
        checks = (self.results or {}).get("checkers", {})
        return sorted(name for name, verdict in checks.items() if verdict.get("valid") is False)


# -- composition ----------------------------------------------------------------------------------------


@dataclass
class Composition:
    """A test composed and validated, before anything is deployed."""

    spec: TestSpec
    db: ClusterDB
    packages: tuple[str, ...]
    node_names: tuple[str, ...]
    workload: Workload
    faketime: FakeTime | None


def valid_modes() -> tuple[str, ...]:
    try:
        from cluster.core.election import ELECTIONS
    except ImportError:  # TODO: cluster/core/election is being written; until then the seeds' two modes
        return ("blazingmq", "raft")
    return tuple(ELECTIONS)


def valid_bugs() -> tuple[str, ...]:
    from cluster.core.bugs import KNOWN_BUGS

    return tuple(sorted(KNOWN_BUGS))


def check_names(
    mode: str, modes: Sequence[str], bugs: Sequence[str], workload: str, nemesis: str, nodes: int
) -> tuple[str, ...]:
    """Check a test's mode (among ``modes``), bugs (for that mode), workload and nemesis packages (for a
    cluster of ``nodes``), for container and simulated runs alike; return the packages.
    :class:`ConfigError` with one sentence."""
    if mode not in modes:
        raise ConfigError(f"unknown mode {mode!r}; valid: {', '.join(modes)}")
    from cluster.core.bugs import validate_bugs

    try:
        validate_bugs(bugs, mode)
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


def compose(spec: TestSpec) -> Composition:
    """Check every name and number of ``spec`` and build the DB adapter; deploys nothing.

    Raises :class:`ConfigError` with one sentence naming what is wrong and the valid choices.
    """
    if spec.db not in DBS:
        raise ConfigError(f"unknown db {spec.db!r}; valid: {', '.join(DBS)}")
    packages = check_names(spec.mode, valid_modes(), spec.bugs, spec.workload, spec.nemesis, spec.nodes)
    if spec.platform not in PLATFORMS:
        raise ConfigError(f"unknown platform {spec.platform!r}; valid: {', '.join(PLATFORMS)}")
    if spec.platform == "ssh" and not spec.hosts:
        raise ConfigError("the ssh platform needs --hosts FILE, a TOML file naming each node's machine (docs/ssh.md)")
    if not 1 <= spec.nodes <= 99:
        raise ConfigError(f"--nodes must be between 1 and 99, not {spec.nodes}")
    if spec.concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, not {spec.concurrency}")
    for name in ("time_limit", "op_timeout", "nemesis_interval", "recovery_timeout", "leader_timeout"):
        if not getattr(spec, name) > 0:
            raise ConfigError(f"{name.replace('_', '-')} must be a positive number of seconds, not {getattr(spec, name)}")
    faketime = None
    clocks = [name for name in packages if name in CLOCK_PACKAGES]
    if clocks:
        try:
            vendored_libfaketime()
        except FileNotFoundError as exc:
            raise ConfigError(f"the {clocks[0]} nemesis needs libfaketime: {exc}") from None
        faketime = FakeTime()
    _check_core_settings(spec.node_args)
    db = ClusterDB(spec.mode, spec.bugs, node_args=spec.node_args, faketime=faketime, seed=spec.seed)
    try:
        check_capabilities(db, packages, leader_targets=True)
    except MissingCapability as exc:
        raise ConfigError(str(exc)) from None
    node_names = tuple(f"n{i}" for i in range(1, spec.nodes + 1))
    try:
        workload = make_workload(spec.workload, rng_for(spec.seed, "workload"), rate=spec.rate)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return Composition(spec, db, packages, node_names, workload, faketime)


def _check_core_settings(node_args: Sequence[str]) -> None:
    """Refuse, before anything is deployed, a ``--core`` setting the node would refuse at start."""
    from cluster.core.config import NodeConfig

    known = {f.name for f in fields(NodeConfig)}
    for flag, setting in zip(node_args[::2], node_args[1::2], strict=False):
        name = setting.partition("=")[0]
        if flag == CORE_OPTION and name not in known:
            raise ConfigError(f"unknown node setting {name!r} (--core); valid: {', '.join(sorted(known))}")


def generate_schedule(comp: Composition) -> tuple[ScheduledFault, ...]:
    """The nemesis schedule the seed produces for this test."""
    if not comp.packages:
        return ()
    options = NemesisOptions(interval=comp.spec.nemesis_interval)
    # The nemesis picks from the DB's fault targets: the data nodes, and the fluvio controller in that mode.
    targets = fault_targets(comp.db, comp.node_names)
    return generate_nemesis_schedule(comp.packages, targets, rng_for(comp.spec.seed, "nemesis"), comp.spec.time_limit, options)


# -- the lifecycle ---------------------------------------------------------------------------------------


def run(
    spec: TestSpec,
    *,
    schedule: Sequence[ScheduledFault] | None = None,
    stats: RunStats | None = None,
    reproduces: str | None = None,
    on_stored: Callable[[Path], None] | None = None,
) -> RunResult:
    """Run one test and return its result. The steps, in order:

    1. Compose: check every name, build the DB adapter, bind the workload, check that the DB has the
       capabilities the nemesis needs, and (docker) that an engine answers and the image exists, or
       (ssh) that the hosts file is sound and every host answers, with its key pinned, as root. A
       failure here raises :class:`ConfigError` and leaves nothing behind: no run is stored.
    2. Store: create ``store/<test>/<timestamp>/`` and write ``test.json`` (spec, seed, versions, git
       commit) and ``schedule.jsonl`` (the stored ``schedule`` when reproducing, else what the seed
       generates); log to ``harness.log``. From here on, whatever happens, the run stays analysable.
    3. Bring up the platform: containers on an internal network (docker) or the given hosts (ssh).
    4. Install and start the DB on every node, in parallel; wait (bounded) for a first leader.
    5. Interpret: clients, nemesis and status pollers for ``time_limit`` seconds, then the final phase
       (heal, resume, restart, wait for recovery, final reads), every event appended to ``history.jsonl``.
    6. Teardown, on every exit path, in this order: heal every network fault, resume every paused
       process, collect each host's journals and logs (``nodes/<node>/``; a lease store's under
       ``external-store/``), stop and wipe the DB on every host,
       remove the containers and the network. Ctrl-C during teardown is ignored (it would leave
       containers behind).
    7. Check: load the history and journals, run the workload's checkers (each through ``check_safe``),
       and write ``results.json``. A run that crashed or was interrupted gets ``results.json`` with
       ``valid: "unknown"`` and the error, and keeps everything recorded up to the crash.
    """
    # 1. Compose.
    comp = compose(spec)
    engine = _preflight(spec, hosts_of(comp.db, comp.node_names))
    stats = stats if stats is not None else RunStats()
    stats.phase = "deploying"
    started = time.monotonic()
    started_wall = datetime.now(UTC)

    # 2. Store.
    run_dir = store.create_run(spec.store, spec.test_name, started_wall)
    if on_stored is not None:
        on_stored(run_dir.path)
    log_handler = _attach_log(run_dir)
    timings: dict[str, Any] = {"started": started_wall.isoformat(timespec="seconds")}
    test_doc = _test_document(comp, timings, reproduces)
    store.write_json(run_dir.test_json, test_doc)
    if schedule is None:
        schedule = generate_schedule(comp)
    store.write_jsonl(run_dir.schedule, (entry.to_json() for entry in schedule))
    log.info("run %s: seed %d, %s", run_dir.path, spec.seed, spec.command())

    error: str | None = None
    interrupted = False
    teardown_errors: list[str] = []
    history: HistoryWriter | None = None
    try:
        with contextlib.ExitStack() as stack:
            stack.callback(_close_engine, engine)
            # 3. Bring up the platform. Its close is the last teardown step.
            platform = _platform(spec, comp, engine)
            stack.callback(_teardown_step, teardown_errors, "remove containers and network (ssh: disconnect)",
                           platform.close)
            remotes = platform.start()
            timings["platform_s"] = round(time.monotonic() - started, 3)
            log.info("platform %s up with %d nodes in %.1f s", spec.platform, len(remotes), timings["platform_s"])
            # Where nodes reach each other may differ from where the controller reaches them (ssh).
            peer_host = getattr(platform, "peer_host", platform.address)
            # Hosts: one per data node, plus the DB's extra hosts (the fluvio controller's sc).
            hosts = hosts_of(comp.db, comp.node_names)
            deployment = Deployment(
                nodes=comp.node_names,
                peer_hosts={n: peer_host(n) for n in hosts},
                client_hosts={n: platform.address(n) for n in hosts},
                extra_hosts=hosts[len(comp.node_names):],
            )
            test_doc["platform"] = {"kind": spec.platform, "run_id": getattr(platform, "run_id", None),
                                    "addresses": dict(deployment.client_hosts)}
            store.write_json(run_dir.test_json, test_doc)
            # Teardown steps run in the reverse order of registration.
            stack.callback(_teardown_step, teardown_errors, "stop and wipe the DB",
                           lambda: _on_nodes(deployment.hosts, lambda n: comp.db.teardown(deployment, n, remotes[n])))
            stack.callback(_teardown_step, teardown_errors, "collect journals and logs",
                           lambda: _collect(comp, deployment, remotes, run_dir))
            stack.callback(_teardown_step, teardown_errors, "resume paused processes",
                           lambda: _on_nodes(fault_targets(comp.db, comp.node_names),
                                             lambda n: _resume_quietly(comp, deployment, n, remotes[n])))
            stack.callback(_teardown_step, teardown_errors, "heal the network",
                           lambda: _heal_network(comp, deployment, remotes))
            stack.callback(_ignore_interrupts_during_teardown)

            # 4. Install and start the DB.
            def deploy(node: str) -> None:
                if comp.faketime is not None:
                    _install_faketime(remotes[node], comp.faketime)
                comp.db.setup(deployment, node, remotes[node])

            _on_nodes(deployment.hosts, deploy)
            timings["deployed_s"] = round(time.monotonic() - started, 3)
            log.info("deployed %d nodes on %d hosts in %.1f s", len(comp.node_names), len(deployment.hosts),
                     timings["deployed_s"])

            # 5. Interpret.
            history = HistoryWriter(run_dir.history)
            # Epoch seconds at history time 0: lets the report place node journals on the history's axis.
            timings["history_started_wall"] = time.time()
            stack.callback(history.close)
            asyncio.run(_interpret(comp, deployment, remotes, history, schedule, stats))
            timings["interpreted_s"] = round(time.monotonic() - started, 3)
    except KeyboardInterrupt:
        interrupted = True
        error = "interrupted (Ctrl-C)"
        log.warning("run interrupted; teardown done")
    except Exception as exc:  # noqa: BLE001 - a crash still leaves a stored, analysable run
        error = f"{type(exc).__name__}: {exc}"
        log.error("run crashed: %s\n%s", error, traceback.format_exc())
    finally:
        _restore_interrupts()

    # 7. Check.
    stats.phase = "checking"
    timings["first_op_s"] = None if stats.first_op_at is None else round(stats.first_op_at - started, 3)
    timings["finished_s"] = round(time.monotonic() - started, 3)
    test_doc["timings"] = {**test_doc["timings"], **timings}
    test_doc["stats"] = stats.to_json()
    store.write_json(run_dir.test_json, test_doc)
    results = check_run(
        run_dir,
        comp,
        duration_s=timings["finished_s"],
        error=error,
        teardown_errors=teardown_errors,
        stats=stats,
    )
    stats.phase = "done"
    logging.getLogger().removeHandler(log_handler)
    log_handler.close()
    valid = results["valid"]
    code = EXIT_CRASH if (error is not None and not interrupted) else exit_code(valid)
    return RunResult(
        spec=spec,
        run_dir=run_dir.path,
        valid=valid,
        exit_code=code,
        results=results,
        stats=stats,
        error=error,
        interrupted=interrupted,
        teardown_errors=teardown_errors,
    )


async def _interpret(
    comp: Composition,
    deployment: Deployment,
    remotes: Mapping[str, Any],
    history: HistoryWriter,
    schedule: Sequence[ScheduledFault],
    stats: RunStats,
) -> None:
    spec = comp.spec

    async def status(node: str, timeout: float) -> Mapping[str, Any]:
        return await comp.db.status(deployment, node, timeout)

    await _wait_for_leader(comp, deployment, spec.leader_timeout)
    driver = None
    if comp.packages:
        shell = ShellNemesis(
            remotes,
            deployment.peer_hosts,
            pid_file=PID_FILE,
            faketime=comp.faketime,
            rng=rng_for(spec.seed, "nemesis-runtime"),
            reply_ports=reply_ports(comp.db, deployment),
        )
        driver = ClusterNemesis(comp.db, deployment, remotes, shell)
    interpreter = Interpreter(
        history,
        nodes=comp.node_names,
        workload=comp.workload,
        # The client's own deadline comes first, so its more precise verdict (a read that timed out is a
        # fail, a write an info) is what the history records; the interpreter's is the backstop.
        open_client=cluster_clients(comp.db.client_nodes(deployment), timeout=spec.op_timeout),
        config=InterpreterConfig(
            concurrency=spec.concurrency,
            time_limit=spec.time_limit,
            op_timeout=spec.op_timeout + 1.0,
            recovery_timeout=spec.recovery_timeout,
        ),
        nemesis=driver,
        schedule=schedule,
        status=status,
        stats=stats,
    )
    await interpreter.run()


async def _wait_for_leader(comp: Composition, deployment: Deployment, timeout: float) -> None:
    """Before the first operation, wait (bounded) until some node says it leads. Not recorded."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        for node in comp.node_names:
            try:
                status = await comp.db.status(deployment, node, 1.0)
            except Exception:  # noqa: BLE001 - not up yet
                continue
            if status.get("role") == "leader":
                log.info("first leader %s in term %s", node, status.get("term"))
                return
        await asyncio.sleep(0.2)
    log.warning("no leader within %.0f s of starting the nodes; starting the workload anyway", timeout)


# -- checking --------------------------------------------------------------------------------------------


def check_run(
    run_dir: store.RunDir,
    comp: Composition,
    *,
    duration_s: float,
    error: str | None = None,
    teardown_errors: Sequence[str] = (),
    stats: RunStats | None = None,
) -> dict[str, Any]:
    """Judge a stored run with the workload's checkers and write its ``results.json`` (FORMATS.md).

    Until the analysis pipeline exists this calls the checkers directly, each through ``check_safe``.
    A checker that does not apply to the run is ``unknown`` with the reason, never dropped.
    """
    spec = comp.spec
    verdicts: dict[str, Verdict] = {}
    ops = 0
    try:
        history = load_history(run_dir.history)
        ops = sum(1 for op in history.ops if op.f != "status")
        journals = load_journals(run_dir.nodes) if any(run_dir.nodes.glob("*/journal.jsonl")) else None
    except HistoryError as exc:
        for name in comp.workload.checkers:
            verdicts[name] = Verdict(UNKNOWN, f"{name} could not read the run: {exc}")
    else:
        inp = CheckInput(history=history, model=comp.workload.model, journals=journals,
                         timeout_s=spec.check_timeout)
        for name in comp.workload.checkers:
            checker = CHECKERS.get(name)
            if checker is None:
                verdicts[name] = Verdict(UNKNOWN, f"no checker called {name!r}; known: {', '.join(CHECKERS)}")
            elif not checker.applies(inp):
                verdicts[name] = Verdict(UNKNOWN, f"{name} cannot judge this run (nothing it needs was recorded)")
            else:
                verdicts[name] = run_checker(name, inp)
    valid: Valid = combine(verdicts) if verdicts else UNKNOWN
    if error is not None and valid is True:
        valid = UNKNOWN  # a run cut short cannot be called valid
    results: dict[str, Any] = {
        "valid": valid,
        "seed": spec.seed,
        "test": spec.test_name,
        "ops": ops,
        "duration_s": round(duration_s, 3),
        "checkers": {name: verdict.to_json() for name, verdict in verdicts.items()},
        "analysed_by": "harness run (checkers called directly)",
    }
    if error is not None:
        results["error"] = error
    if teardown_errors:
        results["teardown_errors"] = list(teardown_errors)
    if stats is not None:
        results["stats"] = stats.to_json()
    store.write_json(run_dir.results, results)
    publish(run_dir.path)
    return results


# -- steps -----------------------------------------------------------------------------------------------


def _preflight(spec: TestSpec, nodes: Sequence[str]) -> Any:
    """Docker: an engine that answers and the node image; returns the engine client.

    SSH: the hosts file, and a connection to every node's machine (reachable, host key pinned, root);
    returns the connected `SSHPlatform`, which step 3 uses.
    """
    if spec.platform == "ssh":
        from harness.platforms.ssh import SSHPlatform, SSHPlatformError

        try:
            platform = SSHPlatform.from_hosts_file(spec.hosts or "", nodes)
            platform.start()
        except SSHPlatformError as exc:
            raise ConfigError(str(exc)) from None
        return platform
    from docker.errors import ImageNotFound

    from harness.platforms.docker import PlatformError, connect_engine

    try:
        engine = connect_engine()
    except PlatformError as exc:
        raise ConfigError(str(exc)) from None
    try:
        engine.images.get(spec.image)
    except ImageNotFound:
        engine.close()
        raise ConfigError(f"the node image {spec.image} does not exist: build it with scripts/build-image.sh") from None
    return engine


def _close_engine(engine: Any) -> None:
    if engine is not None:
        engine.close()


def _platform(spec: TestSpec, comp: Composition, engine: Any) -> Any:
    if spec.platform == "docker":
        from harness.platforms.docker import DockerPlatform
        from harness.topology import topology

        extra = hosts_of(comp.db, comp.node_names)[len(comp.node_names):]
        return DockerPlatform(topology(spec.nodes, image=spec.image, extra_hosts=extra), client=engine)
    return engine  # ssh: the platform _preflight connected


def _on_nodes(nodes: Sequence[str], action: Callable[[str], Any]) -> dict[str, Any]:
    """Run ``action`` on every node in parallel; raise the first failure (naming the node) after all ran."""
    with ThreadPoolExecutor(max_workers=max(1, len(nodes)), thread_name_prefix="node") as pool:
        futures = {node: pool.submit(action, node) for node in nodes}
    results: dict[str, Any] = {}
    errors: list[str] = []
    for node, future in futures.items():
        exc = future.exception()
        if exc is not None:
            message = str(exc)
            errors.append(message if message.startswith(f"{node}:") else f"{node}: {message}")
        else:
            results[node] = future.result()
    if errors:
        raise RuntimeError("; ".join(errors))
    return results


def _teardown_step(errors: list[str], what: str, action: Callable[[], Any]) -> None:
    """One teardown step: never raises (the next steps must run), logs and records its failure."""
    try:
        action()
        log.info("teardown: %s: done", what)
    except BaseException as exc:  # noqa: BLE001 - even Ctrl-C must not skip the remaining steps
        log.error("teardown: %s failed: %s", what, exc)
        errors.append(f"{what}: {exc}")


def _heal_network(comp: Composition, deployment: Deployment, remotes: Mapping[str, Any]) -> None:
    heal_everything(remotes, comp.faketime)


def _resume_quietly(comp: Composition, deployment: Deployment, node: str, remote: Any) -> None:
    if comp.db.is_running(deployment, node, remote):
        comp.db.resume(deployment, node, remote)


def _install_faketime(remote: Any, faketime: FakeTime) -> None:
    outcome = install_faketime(remote, faketime)
    if outcome.error:
        raise RuntimeError(f"{remote.name}: libfaketime does not work there: {outcome.error}")


def _collect(comp: Composition, deployment: Deployment, remotes: Mapping[str, Any], run_dir: store.RunDir) -> None:
    """Copy every host's journals and logs where the DB says (``nodes/<node>/``; a lease store's under
    ``external-store/<member>/``); a missing file is logged, not fatal."""

    def collect(host: str) -> None:
        for remote_path, relative in collected_files(comp.db, deployment, host).items():
            target = run_dir.path / relative
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                remotes[host].download(remote_path, target)
            except Exception as exc:  # noqa: BLE001 - collect what exists
                log.warning("could not collect %s from %s: %s", remote_path, host, exc)

    _on_nodes(deployment.hosts, collect)


_previous_sigint: Any = None


def _ignore_interrupts_during_teardown() -> None:
    """From here to the end of teardown a Ctrl-C only prints that teardown is under way."""
    global _previous_sigint
    if threading.current_thread() is not threading.main_thread():
        return

    def announce(signum: int, frame: Any) -> None:
        print("\nteardown in progress (healing, collecting logs, removing containers); please wait", flush=True)

    _previous_sigint = signal.signal(signal.SIGINT, announce)


def _restore_interrupts() -> None:
    global _previous_sigint
    if _previous_sigint is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _previous_sigint)
        _previous_sigint = None


def _attach_log(run_dir: store.RunDir) -> logging.Handler:
    handler = logging.FileHandler(run_dir.harness_log, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    return handler


def test_record(
    spec: Any,
    workload: Any,
    *,
    nodes: Sequence[str],
    db: str,
    packages: Sequence[str],
    command: str,
    timings: Mapping[str, Any],
    versions: Mapping[str, Any],
    reproduces: str | None,
    **platform_fields: Any,
) -> dict[str, Any]:
    """``test.json`` (FORMATS.md) of a container or simulated run: the fields both share, then
    ``platform_fields`` (the simulator's ``replay_command``, ``platform`` and ``sim``).

    ``spec`` is a :class:`TestSpec` or a ``SimSpec`` (both have the test's name, seed, mode, bugs,
    workload, timings and ``to_json``); ``workload`` is the composed workload (its model and checkers).
    """
    return {
        "test": spec.test_name,
        "seed": spec.seed,
        "command": command,
        **platform_fields,
        "nodes": list(nodes),
        "db": db,
        "mode": spec.mode,
        "bugs": list(spec.bugs),
        "workload": spec.workload,
        "nemesis": list(packages),
        "model": workload.model,
        "checkers": list(workload.checkers),
        "timings": {
            "time_limit": spec.time_limit,
            "op_timeout": spec.op_timeout,
            "nemesis_interval": spec.nemesis_interval,
            "recovery_timeout": spec.recovery_timeout,
            **timings,
        },
        "versions": dict(versions),
        "git_commit": store.git_commit(ROOT),
        "reproduces": reproduces,
        "spec": spec.to_json(),
    }


def _test_document(comp: Composition, timings: dict[str, Any], reproduces: str | None) -> dict[str, Any]:
    return test_record(
        comp.spec,
        comp.workload,
        nodes=comp.node_names,
        db=comp.spec.db,
        packages=comp.packages,
        command=comp.spec.command(),
        timings=timings,
        versions={**store.versions(), "db": comp.db.version()},
        reproduces=reproduces,
    )


# -- reproduce -------------------------------------------------------------------------------------------


@dataclass
class Reproduction:
    """``harness reproduce``: how many replays of a stored run failed the same checker(s)."""

    original: Path
    failing_checkers: list[str]
    replays: list[RunResult]

    @property
    def reproduced(self) -> int:
        if not self.failing_checkers:
            return sum(1 for r in self.replays if r.valid is False)
        return sum(1 for r in self.replays if set(r.failed_checkers) & set(self.failing_checkers))


def load_stored(path: str | Path) -> tuple[store.RunDir, TestSpec, tuple[ScheduledFault, ...], list[str]]:
    """A stored run's directory, spec, nemesis schedule and the checkers it failed."""
    run_dir = store.find_run(path)
    document = store.read_json(run_dir.test_json)
    if not isinstance(document, dict) or "spec" not in document:
        raise ConfigError(f"{run_dir.test_json} has no 'spec'; it was not written by harness run")
    spec = TestSpec.from_json(document["spec"])
    try:
        schedule = schedule_from_jsonl(store.read_jsonl(run_dir.schedule)) if run_dir.schedule.exists() else ()
    except ValueError as exc:
        raise ConfigError(f"{run_dir.schedule}: {exc}") from None
    failing: list[str] = []
    if run_dir.results.exists():
        results = store.read_json(run_dir.results)
        failing = sorted(n for n, v in results.get("checkers", {}).items() if v.get("valid") is False)
    return run_dir, spec, schedule, failing


def reproduce(
    path: str | Path,
    times: int = 1,
    *,
    store_dir: str | None = None,
    on_replay: Callable[[int, RunResult], None] | None = None,
    stats_factory: Callable[[], RunStats] = RunStats,
) -> Reproduction:
    """Run a stored test ``times`` more with its stored spec and schedule; stops early on Ctrl-C."""
    if times < 1:
        raise ConfigError(f"--times must be at least 1, not {times}")
    run_dir, spec, schedule, failing = load_stored(path)
    if store_dir is not None:
        spec = TestSpec.from_json({**spec.to_json(), "store": store_dir})
    replays: list[RunResult] = []
    for attempt in range(1, times + 1):
        result = run(spec, schedule=schedule, stats=stats_factory(), reproduces=str(run_dir.path))
        replays.append(result)
        if on_replay is not None:
            on_replay(attempt, result)
        if result.interrupted:
            break
    return Reproduction(run_dir.path, failing, replays)
