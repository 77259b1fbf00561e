"""One chaos test, from its spec to a stored, judged run: :func:`run` owns the whole lifecycle.

:func:`run` is the only place that sequences deployment, the interpreter, teardown and judging; its
docstring lists the steps, and an ``ExitStack`` guarantees the teardown steps on every exit path (an
exception, Ctrl-C, a failed deployment). What defines a test is ``harness.spec.TestSpec``; checking and
building it, ``harness.compose``; judging a stored run, ``harness.judge``; replaying one,
``harness.reproduce``.

A test script may call it directly, as a Jepsen test's ``-main`` does, with an adapter it built itself::

    from harness.run import run
    from harness.spec import TestSpec

    result = run(TestSpec(seed=1, db="mydb", nemesis=("partition",)), db=MyDB(...))
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from checkers.verdict import UNKNOWN, Valid, exit_code
from harness import lifecycle, store
from harness.compose import Composition, compose
from harness.db import (
    DB,
    Deployment,
    Pause,
    Process,
    Status,
    collected_files,
    db_version,
    hosts_of,
    reply_ports,
)
from harness.fault_driver import ClusterNemesis, heal_everything
from harness.history import HistoryWriter
from harness.interpreter import Interpreter, InterpreterConfig, RunStats
from harness.judge import judge_run
from harness.signals import Interrupts
from harness.spec import ConfigError, TestSpec, rng_for
from nemesis.generator import ScheduledFault
from nemesis.shell import FakeTime, ShellNemesis, install_faketime

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
EXIT_BAD_CONFIG = 254
EXIT_CRASH = 255

__all__ = ["ConfigError", "RunResult", "TestSpec", "run"]


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


# -- the lifecycle ---------------------------------------------------------------------------------------


def run(
    spec: TestSpec,
    *,
    db: DB | None = None,
    schedule: Sequence[ScheduledFault] | None = None,
    stats: RunStats | None = None,
    reproduces: str | None = None,
    on_stored: Callable[[Path], None] | None = None,
) -> RunResult:
    """Run one test and return its result. The steps, in order:

    1. Compose (``harness.compose``): check every name and number, load the DB plugin and check its
       options (or take ``db``, an adapter the caller built), bind the workload, check that the DB has the
       capabilities the workload and the nemesis need, and (docker) that an engine answers and the image exists, or
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
       process (if the DB can pause), collect each host's journals and logs (where the adapter says:
       ``nodes/<node>/`` by default), stop and wipe the DB on every host,
       remove the containers and the network. SIGTERM and SIGHUP stop a run as Ctrl-C does; once
       teardown has begun, none of the three interrupts it (``harness.signals``). Then ``test.json``
       gets the run's end (``harness.lifecycle``): completed, interrupted or crashed; an interrupted
       run gets a first ``results.json`` saying so at once, before the checkers run.
    7. Judge (``harness.judge``): run the checkers that apply (each through ``check_safe``; those that
       cannot apply to this DB are reported as not applicable), and write ``results.json``. A run that crashed or was interrupted gets ``results.json`` with
       ``valid: "unknown"`` and the error, and keeps everything recorded up to the crash.

    ``test.json`` names the controller (pid, host, start time) from step 2 on, and the containers and
    network carry it as labels, so that ``harness clean`` can tell a SIGKILLed run's leftovers from a
    live run's.
    """
    # 1. Compose.
    comp = compose(spec, db)
    engine = _preflight(comp, hosts_of(comp.db, comp.node_names))
    if spec.platform == "docker":
        _warn_about_leftovers(engine)
    stats = stats if stats is not None else RunStats()
    stats.phase = "deploying"
    started = time.monotonic()
    started_wall = datetime.now(UTC)

    # 2. Store.
    run_dir = store.create_run(spec.store, comp.test_name, started_wall)
    if on_stored is not None:
        on_stored(run_dir.path)
    log_handler = _attach_log(run_dir)
    timings: dict[str, Any] = {"started": started_wall.isoformat(timespec="seconds")}
    test_doc = test_record(comp, timings, reproduces)
    test_doc["controller"] = lifecycle.Controller.current().to_json()
    store.write_json(run_dir.test_json, test_doc)
    if schedule is None:
        schedule = comp.schedule()
    store.write_jsonl(run_dir.schedule, (entry.to_json() for entry in schedule))
    log.info("run %s: seed %d, %s", run_dir.path, spec.seed, comp.command())

    error: str | None = None
    interrupted = False
    teardown_errors: list[str] = []
    history: HistoryWriter | None = None
    interrupts = Interrupts().install()
    try:
        with contextlib.ExitStack() as stack:
            stack.callback(_close_engine, engine)
            # 3. Bring up the platform. Its close is the last teardown step.
            platform = _platform(spec, comp, engine, run_dir)
            stack.callback(_teardown_step, teardown_errors, "remove containers and network (ssh: disconnect)",
                           platform.close)
            stack.callback(interrupts.shield)  # from here, teardown runs to its end whatever arrives
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
            if spec.hosts:  # where harness clean finds the machines again, whatever its working directory
                test_doc["platform"]["hosts_file"] = str(Path(spec.hosts).resolve())
            store.write_json(run_dir.test_json, test_doc)
            # Teardown steps run in the reverse order of registration.
            for what, action in reversed(teardown_steps(comp, deployment, remotes, run_dir)):
                stack.callback(_teardown_step, teardown_errors, what, action)
            stack.callback(interrupts.shield)

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
        error = f"interrupted ({interrupts.cause()})"
        log.warning("run %s; teardown done", error)
    except Exception as exc:  # noqa: BLE001 - a crash still leaves a stored, analysable run
        error = f"{type(exc).__name__}: {exc}"
        log.error("run crashed: %s\n%s", error, traceback.format_exc())
    except BaseException:  # SystemExit and the like: put the handlers back on the way out
        interrupts.restore()
        raise

    # 7. Check. The run's end is recorded while the teardown's shield is still up.
    try:
        stats.phase = "checking"
        timings["first_op_s"] = None if stats.first_op_at is None else round(stats.first_op_at - started, 3)
        timings["finished_s"] = round(time.monotonic() - started, 3)
        test_doc["timings"] = {**test_doc["timings"], **timings}
        test_doc["stats"] = stats.to_json()
        how = "completed" if error is None else "interrupted" if interrupted else "crashed"
        test_doc["end"] = lifecycle.end_record(how, cause=interrupts.cause() if interrupted else error,
                                               history=run_dir.history)
        store.write_json(run_dir.test_json, test_doc)
        stop = lifecycle.stop_of(test_doc, run_dir.history)
        if interrupted:  # said at once: a CI runner's SIGKILL may follow before the checkers end
            store.write_json(run_dir.results, _interrupted_results(comp, error, stop, timings["finished_s"]))
    finally:
        interrupts.restore()
    results = check_run(
        run_dir,
        comp,
        duration_s=timings["finished_s"],
        error=error,
        teardown_errors=teardown_errors,
        stats=stats,
        stop=stop,
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
    spec, db = comp.spec, comp.db
    status = None
    if isinstance(db, Status):
        async def status(node: str, timeout: float) -> Mapping[str, Any]:
            return await db.status(deployment, node, timeout)

        await _wait_for_leader(comp, deployment, spec.leader_timeout)
    driver = None
    if comp.packages:
        shell = ShellNemesis(
            remotes,
            deployment.peer_hosts,
            pid_file=None,
            faketime=comp.faketime,
            rng=rng_for(spec.seed, "nemesis-runtime"),
            reply_ports=reply_ports(db, deployment),
        )
        driver = ClusterNemesis(db, deployment, remotes, shell)

    async def open_client(process: int) -> Any:
        # The client's own deadline comes first, so its more precise verdict (a read that timed out is a
        # fail, a write an info) is what the history records; the interpreter's is the backstop.
        return await db.open_client(deployment, process, spec.op_timeout)

    caught_up = None
    if hasattr(db, "caught_up"):
        async def caught_up(node: str, timeout: float) -> bool:
            return await db.caught_up(deployment, node, timeout)

    interpreter = Interpreter(
        history,
        nodes=comp.node_names,
        workload=comp.workload,
        open_client=open_client,
        config=InterpreterConfig(
            concurrency=spec.concurrency,
            time_limit=spec.time_limit,
            op_timeout=spec.op_timeout + 1.0,
            recovery_timeout=spec.recovery_timeout,
        ),
        nemesis=driver,
        schedule=schedule,
        status=status,
        caught_up=caught_up,
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


def check_run(
    run_dir: store.RunDir,
    comp: Composition,
    *,
    duration_s: float,
    error: str | None = None,
    teardown_errors: Sequence[str] = (),
    stats: RunStats | None = None,
    stop: lifecycle.Stop | None = None,
) -> dict[str, Any]:
    """Judge the stored run with the composition's checkers (``harness.judge``) and publish its report.

    A run that ``stop`` says ended before its final phase is judged on what it observed; the checkers
    that need a final phase say that the run stopped (``harness.lifecycle.blame_the_stop``)."""
    from harness.report.publish import publish

    results = judge_run(
        run_dir,
        test=comp.test_name,
        seed=comp.spec.seed,
        model=comp.workload.model,
        checkers=comp.checkers,
        not_applicable=comp.not_applicable,
        timeout_s=comp.spec.check_timeout,
        duration_s=duration_s,
        error=error,
        teardown_errors=teardown_errors,
        stats=None if stats is None else stats.to_json(),
        analysed_by="harness run (checkers called directly)",
        stop=stop,
    )
    publish(run_dir.path)
    return results


# -- steps -----------------------------------------------------------------------------------------------


def _preflight(comp: Composition, nodes: Sequence[str]) -> Any:
    """Docker: an engine that answers and the node image; returns the engine client.

    SSH: the hosts file, and a connection to every node's machine (reachable, host key pinned, root);
    returns the connected `SSHPlatform`, which step 3 uses.
    """
    spec = comp.spec
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
        engine.images.get(comp.image)
    except ImageNotFound:
        engine.close()
        how = getattr(comp.db, "image_hint", None) or "build it with scripts/build-image.sh"
        raise ConfigError(f"the node image {comp.image} does not exist: {how}") from None
    return engine


def _close_engine(engine: Any) -> None:
    if engine is not None:
        engine.close()


def _platform(spec: TestSpec, comp: Composition, engine: Any, run_dir: store.RunDir) -> Any:
    if spec.platform == "docker":
        from harness.platforms.docker import DockerPlatform
        from harness.topology import topology

        extra = hosts_of(comp.db, comp.node_names)[len(comp.node_names):]
        nodes = topology(spec.nodes, image=comp.image, extra_hosts=extra, memory=spec.node_memory,
                         pids=spec.node_pids)
        return DockerPlatform(nodes, client=engine,
                              labels=lifecycle.Controller.current().labels(run_dir.path))
    return engine  # ssh: the platform _preflight connected


_warned_about_leftovers = False


def _warn_about_leftovers(engine: Any) -> None:
    """Once per process: say on stderr when runs whose controller died left containers behind."""
    global _warned_about_leftovers
    if _warned_about_leftovers:
        return
    _warned_about_leftovers = True
    from harness.clean import leftover_warning

    warning = leftover_warning(engine)
    if warning:
        log.warning("%s", warning)
        print(f"warning: {warning}", file=sys.stderr, flush=True)


def _interrupted_results(
    comp: Composition, error: str | None, stop: lifecycle.Stop | None, duration_s: float
) -> dict[str, Any]:
    """The ``results.json`` an interrupted run has before its checkers have run."""
    return {
        "valid": UNKNOWN,
        "seed": comp.spec.seed,
        "test": comp.test_name,
        "duration_s": round(duration_s, 3),
        "checkers": {},
        "error": error,
        "interrupted": None if stop is None else stop.to_json(),
        "analysed_by": "nobody yet: the run was interrupted; its checkers run next",
    }


def teardown_steps(
    comp: Composition, deployment: Deployment, remotes: Mapping[str, Any], run_dir: store.RunDir
) -> list[tuple[str, Callable[[], Any]]]:
    """Step 6 of :func:`run` before the platform closes, in order: heal every fault (network, clocks),
    resume what is paused (if the DB can pause), collect journals and logs, stop and wipe the DB.
    ``harness clean`` runs the same steps for a run whose controller was killed."""
    steps: list[tuple[str, Callable[[], Any]]] = [("heal the network", lambda: _heal_network(comp, deployment, remotes))]
    if isinstance(comp.db, Pause):
        steps.append(("resume paused processes",
                      lambda: _on_nodes(comp.fault_targets(), lambda n: _resume_quietly(comp, deployment, n, remotes[n]))))
    steps += [
        ("collect journals and logs", lambda: _collect(comp, deployment, remotes, run_dir)),
        ("stop and wipe the DB",
         lambda: _on_nodes(deployment.hosts, lambda n: comp.db.teardown(deployment, n, remotes[n]))),
    ]
    return steps


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
    """SIGCONT a paused process: only a live one when the DB can tell (``Process``), else try and let a
    dead one's error be logged."""
    if isinstance(comp.db, Process) and not comp.db.is_running(deployment, node, remote):
        return
    try:
        comp.db.resume(deployment, node, remote)
    except Exception as exc:  # noqa: BLE001 - nothing paused there, most likely
        if isinstance(comp.db, Process):
            raise
        log.info("resume %s: %s", node, exc)


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


def _attach_log(run_dir: store.RunDir) -> logging.Handler:
    handler = logging.FileHandler(run_dir.harness_log, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    return handler


def test_record(comp: Composition, timings: Mapping[str, Any], reproduces: str | None) -> dict[str, Any]:
    """``test.json`` (FORMATS.md) of a run: what was run, with what, and how to run it again."""
    spec = comp.spec
    return {
        "test": comp.test_name,
        "seed": spec.seed,
        "command": comp.command(),
        "nodes": list(comp.node_names),
        "db": comp.plugin.name,
        "db_options": dict(comp.options),
        "workload": spec.workload,
        "nemesis": list(comp.packages),
        "model": comp.workload.model,
        "checkers": list(comp.checkers),
        "not_applicable": dict(comp.not_applicable),
        "image": comp.image if spec.platform == "docker" else None,
        "timings": {
            "time_limit": spec.time_limit,
            "op_timeout": spec.op_timeout,
            "nemesis_interval": spec.nemesis_interval,
            "recovery_timeout": spec.recovery_timeout,
            **timings,
        },
        "versions": {**store.versions(), "db": db_version(comp.db)},
        "git_commit": store.git_commit(ROOT),
        "reproduces": reproduces,
        "spec": spec.to_json(),
    }
