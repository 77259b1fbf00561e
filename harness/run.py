"""One chaos test, from its spec to a stored, judged run: :func:`run` owns the whole lifecycle.

:func:`run` is the only place that sequences deployment, the interpreter, teardown and judging; its
docstring lists the steps, and an ``ExitStack`` guarantees the teardown steps on every exit path (an
exception, Ctrl-C, a failed deployment). What defines a test is ``harness.spec.TestSpec``; checking and
building it, ``harness.compose``; judging a stored run, ``harness.analysis``; replaying one,
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
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from checkers.verdict import UNKNOWN, Valid, exit_code
from harness import lifecycle, store
from harness.compose import Composition, compose
from harness.coverage import judge_coverage
from harness.db import DB, db_version
from harness.history import HistoryWriteError, HistoryWriter
from harness.interpreter import Interpreter, InterpreterConfig, RunStats
from harness.pacing import rules_for
from harness.platforms import Launch, Session
from harness.platforms.real import RealPlatform
from harness.platforms.sim import SimPlatform
from harness.signals import Interrupts
from harness.spec import ConfigError, TestSpec, rng_for
from nemesis.generator import ScheduledFault
from workloads.generator import script_lines
from workloads.ops import Op

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
    stop_requested: bool = False
    """Ctrl-C, SIGTERM or SIGHUP came during the run: it ended the run early (``interrupted``), or it came
    while the teardown's shield was up and only waited for the run's record (``harness.signals``). Whoever
    runs more runs after this one (an exploration, a suite, a reproduction) stops either way."""
    teardown_errors: list[str] = field(default_factory=list)
    invoked: dict[int, list[Op]] = field(default_factory=dict)
    """Worker slot -> the operations it invoked in the chaos phase (what a shrinker replays)."""
    schedule: tuple[ScheduledFault, ...] = ()
    judged: bool = True
    """False when a signal stopped the judging: ``results.json`` is the controller's record, unjudged,
    and ``harness analyze`` judges the stored run."""

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
    scripts: Mapping[int, Sequence[Op]] | None = None,
    stats: RunStats | None = None,
    reproduces: str | None = None,
    on_stored: Callable[[Path], None] | None = None,
    run_dir: str | Path | None = None,
    replay_command: str | None = None,
    report: bool = True,
    analysis: str = "direct",
) -> RunResult:
    """Run one test and return its result. The steps, in order:

    1. Compose (``harness.compose``): check every name and number, load the DB plugin and check its
       options (or take ``db``, an adapter the caller built), bind the workload, check that the DB has the
       capabilities the workload and the nemesis need; then the platform's preflight: (docker) an engine
       that answers and the image, (ssh) a sound hosts file and every host answering with its key pinned,
       as root, (sim) a DB that can be simulated. A failure here raises :class:`ConfigError` and leaves
       nothing behind: no run is stored.
    2. Store: create ``store/<test>/<timestamp>/`` (or use ``run_dir``) and write ``test.json`` (spec,
       seed, versions, git commit) and ``schedule.jsonl`` (the given ``schedule``, else what the seed
       generates); log to ``harness.log``. From here on, whatever happens, the run stays analysable.
    3. Bring up the platform (``harness.platforms``): containers on an internal network, the given hosts,
       or the simulated world.
    4. Install and start the DB on every host, in parallel (the simulator starts its processes).
    5. Interpret (``harness.interpreter``, on the platform's clock: real, or the simulator's virtual
       time): wait (bounded) for a first leader, then clients, nemesis and status pollers for
       ``time_limit`` seconds, then the final phase (heal, resume, restart, wait for recovery, final
       reads), every event appended to ``history.jsonl``. ``scripts`` replace the workload's streams.
    6. Teardown, on every exit path (``harness.platforms.real``): heal every network fault, resume every
       paused process, collect each host's journals and logs, stop and wipe the DB, remove the containers
       and the network. SIGTERM and SIGHUP stop a run as Ctrl-C does; once teardown has begun, none of
       the three interrupts it (``harness.signals``). The simulator writes its journals instead, and what
       each worker slot invoked into ``schedule.jsonl``. Then ``test.json`` gets the run's end
       (``harness.lifecycle``): completed, interrupted or crashed; an interrupted run gets a first
       ``results.json`` saying so at once, before the checkers run.
    7. Judge, once (:func:`check_run`): the analysis pipeline's tasks, in this process (``analysis``
       ``"direct"``) or on Spark (``"spark"``), run the checkers that apply (each through ``check_safe``;
       those that cannot apply to this DB are reported as not applicable) and write ``results.json``,
       then (unless ``report`` is false: an exploration's scratch runs) the run's rows of the store's
       dataset, ``report.html`` and the store's index: what ``harness analyze`` writes for the run. A run
       that crashed or was interrupted gets ``valid: "unknown"`` and the error, and keeps everything
       recorded; a run interrupted while it is judged keeps its controller's record, unjudged.

    ``test.json`` names the controller (pid, host, start time) from step 2 on, and the containers and
    network carry it as labels, so that ``harness clean`` can tell a SIGKILLed run's leftovers from a
    live run's.
    """
    # 1. Compose.
    comp = compose(spec, db)
    platform = platform_for(comp)
    platform.preflight()
    stats = stats if stats is not None else RunStats()
    stats.phase = "deploying"
    started = time.monotonic()
    started_wall = datetime.now(UTC)

    # 2. Store.
    if run_dir is None:
        directory = store.create_run(spec.store, comp.test_name, started_wall)
    else:
        directory = store.RunDir(Path(run_dir))
        directory.path.mkdir(parents=True, exist_ok=True)
    if on_stored is not None:
        on_stored(directory.path)
    log_handler = _attach_log(directory)
    timings: dict[str, Any] = {"started": started_wall.isoformat(timespec="seconds")}
    test_doc = test_record(comp, timings, reproduces, replay_command)
    test_doc["controller"] = lifecycle.Controller.current().to_json()
    schedule = _store_plan(directory, comp, test_doc, schedule, scripts)
    log.info("run %s: seed %d, %s", directory.path, spec.seed, comp.command())

    error: str | None = None
    interrupted = False
    disk: str | None = None  # why the history could not be written, if it could not
    teardown_errors: list[str] = []
    session: Session | None = None
    interpreter: Interpreter | None = None
    history: HistoryWriter | None = None
    interrupts = Interrupts().install()
    try:
        with contextlib.ExitStack() as stack:
            # 3, 4. Bring up the platform and deploy; 6. the teardown steps go on the stack, and from
            # the first of them on, the teardown runs to its end whatever signal arrives.
            session = platform.deploy(Launch(stack, directory, teardown_errors, timings, test_doc, started,
                                             shield=interrupts.shield))
            stack.callback(interrupts.shield)
            # 5. Interpret.
            # A simulated run's history waits in memory (virtual time; its seed replays whatever a crash
            # would lose) and is written in large pieces, not with a system call per line.
            history = HistoryWriter(directory.history, clock=session.clock_ns, buffered=spec.platform == "sim")
            stack.callback(history.close)

            def history_started() -> None:
                # Epoch seconds at history time 0: lets the report place journals on the history's axis.
                timings["history_started_wall"] = session.wall_at(history.start_ns)

            interpreter = _interpreter(comp, session, history, schedule, stats, scripts, history_started)
            session.execute(_bounded(interpreter, session.bound))
            timings["interpreted_s"] = round(time.monotonic() - started, 3)
    except KeyboardInterrupt:
        interrupted = True
        error = f"interrupted ({interrupts.cause()})"
        log.warning("run %s; teardown done", error)
    except HistoryWriteError as exc:  # a full disk: the run stops where its history still is whole
        interrupted, disk = True, str(exc)
        error = f"interrupted ({disk})"
        log.warning("run %s; teardown done", error)
    except Exception as exc:  # noqa: BLE001 - a crash still leaves a stored, analysable run
        error = f"{type(exc).__name__}: {exc}"
        log.error("run crashed: %s\n%s", error, traceback.format_exc())
    except BaseException:  # SystemExit and the like: put the handlers back on the way out
        interrupts.restore()
        raise

    # The run's end is recorded while the teardown's shield is still up.
    try:
        if session is not None:
            try:
                session.finish()
            except Exception as exc:  # noqa: BLE001 - what could be kept is kept; say what was not
                teardown_errors.append(f"finish: {type(exc).__name__}: {exc}")
        if spec.platform == "sim" and interpreter is not None and scripts is None:
            store.append_jsonl(directory.schedule, script_lines(interpreter.invoked))
        stats.phase = "checking"
        timings["first_op_s"] = None if stats.first_op_at is None else round(stats.first_op_at - started, 3)
        timings["finished_s"] = round(time.monotonic() - started, 3)
        test_doc["timings"] = {**test_doc["timings"], **timings}
        test_doc["stats"] = stats.to_json()
        how = "completed" if error is None else "interrupted" if interrupted else "crashed"
        cause = (disk or interrupts.cause()) if interrupted else error
        test_doc["end"] = lifecycle.end_record(how, cause=cause, history=directory.history)
        store.write_json(directory.test_json, test_doc)
        stop = lifecycle.stop_of(test_doc, directory.history)
        if interrupted:  # said at once: a CI runner's SIGKILL may follow before the checkers end
            store.write_json(directory.results, controller_results(comp, timings["finished_s"], error, stop=stop))
    finally:
        interrupts.restore()

    # 7. Judge.
    judged = True
    try:
        results = check_run(
            directory,
            comp,
            duration_s=timings["finished_s"],
            error=error,
            teardown_errors=teardown_errors,
            stats=stats,
            extra=session.results(history.start_ns) if session is not None and history is not None else None,
            report=report,
            stop=stop,
            analysis=analysis,
        )
    except KeyboardInterrupt:  # the run is whole and stored, its results.json the controller's record
        interrupted, judged = True, False
        error = error or "interrupted while it was judged"
        log.warning("run %s; harness analyze %s judges it", error, directory.path)
        results = store.read_json(directory.results)
    stats.phase = "done"
    logging.getLogger().removeHandler(log_handler)
    log_handler.close()
    valid = results["valid"]
    code = EXIT_CRASH if (error is not None and not interrupted) else exit_code(valid)
    return RunResult(
        spec=spec,
        run_dir=directory.path,
        valid=valid,
        exit_code=code,
        results=results,
        stats=stats,
        error=error,
        interrupted=interrupted,
        stop_requested=interrupted or bool(interrupts.received),
        teardown_errors=teardown_errors,
        invoked=dict(interpreter.invoked) if interpreter is not None else {},
        schedule=tuple(schedule),
        judged=judged,
    )


def _store_plan(
    directory: store.RunDir,
    comp: Composition,
    test_doc: dict[str, Any],
    schedule: Sequence[ScheduledFault] | None,
    scripts: Mapping[int, Sequence[Op]] | None,
) -> Sequence[ScheduledFault]:
    """Write ``test.json`` and ``schedule.jsonl`` (the given ``schedule``, else what the seed generates,
    and the ``scripts`` that replace the workload's streams): the plan a replay follows. Returns the
    schedule."""
    store.write_json(directory.test_json, test_doc)
    if schedule is None:
        schedule = comp.schedule()
    store.write_jsonl(directory.schedule, (entry.to_json() for entry in schedule))
    if scripts is not None:
        # The run's operations are these, not the workload's streams: a replay must use them too.
        store.append_jsonl(directory.schedule, script_lines(scripts))
        test_doc["scripted"] = True
        store.write_json(directory.test_json, test_doc)
    return schedule


def _interpreter(
    comp: Composition,
    session: Session,
    history: HistoryWriter,
    schedule: Sequence[ScheduledFault],
    stats: RunStats,
    scripts: Mapping[int, Sequence[Op]] | None,
    on_start: Callable[[], None],
) -> Interpreter:
    """The interpreter of ``comp``'s test on the deployed ``session`` (step 5 of :func:`run`)."""
    spec = comp.spec
    return Interpreter(
        history,
        nodes=comp.node_names,
        workload=comp.workload,
        open_client=session.open_client,
        config=InterpreterConfig(
            concurrency=spec.concurrency,
            time_limit=spec.time_limit,
            op_timeout=spec.op_timeout + 1.0,
            recovery_timeout=spec.recovery_timeout,
            leader_timeout=spec.leader_timeout,
            client_binding=spec.client_binding,
            leader_group=spec.leader_group,
            pacing=rules_for(spec.storm_pacing),
        ),
        nemesis=session.nemesis,
        schedule=schedule,
        status=session.status,
        caught_up=session.caught_up,
        stats=stats,
        run_fault=session.run_fault,
        scripts=scripts,
        on_start=on_start,
        rng=rng_for(spec.seed, "leader-group"),
    )


def platform_for(comp: Composition) -> RealPlatform | SimPlatform:
    """The platform that deploys ``comp``'s test (``harness.platforms``)."""
    return SimPlatform(comp) if comp.spec.platform == "sim" else RealPlatform(comp)


async def _bounded(interpreter: Interpreter, bound: float | None) -> None:
    """The interpreter's run, and where the platform gives a bound (the simulator), a stall when it is
    passed: every phase has its own deadline, so a run past them all has a harness defect."""
    if bound is None:
        await interpreter.run()
        return
    try:
        await asyncio.wait_for(interpreter.run(), bound)
    except TimeoutError:
        raise RuntimeError(f"the run stalled after {bound:g} s in phase {interpreter.stats.phase}") from None


def check_run(
    run_dir: store.RunDir,
    comp: Composition,
    *,
    duration_s: float,
    error: str | None = None,
    teardown_errors: Sequence[str] = (),
    stats: RunStats | None = None,
    extra: Mapping[str, Any] | None = None,
    report: bool = True,
    stop: lifecycle.Stop | None = None,
    analysis: str = "direct",
) -> dict[str, Any]:
    """Judge the stored run once and return its ``results.json``.

    First the controller's record (:func:`controller_results`): what only it knows of the run, which no
    file of the run says and the judge keeps. Then the one judge, the analysis pipeline's own tasks and
    steps: in this process (``analysis="direct"``, :mod:`harness.analysis.inprocess`), or on Spark
    (``"spark"``, :func:`harness.analysis.pipeline.analyze_run`; when Spark cannot start, here, and the
    reason is logged). Either writes ``results.json``, the
    run's rows of the store's dataset, its ``report.html`` and the store's index, unless ``report`` is
    false (an exploration's scratch run, not in a store: ``results.json`` only). A run that ``stop`` says
    ended before its final phase is judged on what it observed (``harness.lifecycle.blame_the_stop``)."""
    from harness.analysis.pipeline import AnalysisOptions

    store.write_json(run_dir.results, controller_results(comp, duration_s, error, teardown_errors, stats, extra, stop))
    options = AnalysisOptions(key_timeout_s=comp.spec.check_timeout, write_dataset=report, write_reports=report)
    if analysis == "spark":
        from harness.analysis.pipeline import analyze_run
        from harness.analysis.spark import SparkUnavailable

        try:
            return analyze_run(run_dir.path, options=options).results
        except SparkUnavailable as exc:
            log.warning("Spark is unavailable (%s); the run is judged in this process", exc)
    from harness.analysis.inprocess import judge_here

    return judge_here(run_dir.path, options).results


def controller_results(
    comp: Composition,
    duration_s: float,
    error: str | None = None,
    teardown_errors: Sequence[str] = (),
    stats: RunStats | None = None,
    extra: Mapping[str, Any] | None = None,
    stop: lifecycle.Stop | None = None,
) -> dict[str, Any]:
    """The ``results.json`` a run has before it is judged: unknown, with what the controller alone knows
    (``harness.analysis.checks.CONTROLLER_FIELDS``): the error that cut it short, teardown errors, its
    statistics of operations and faults and their coverage (under ``--min-coverage``), the simulator's
    fingerprint."""
    document: dict[str, Any] = {
        "valid": UNKNOWN,
        "seed": comp.spec.seed,
        "test": comp.test_name,
        "duration_s": round(duration_s, 3),
        "checkers": {},
        "analysed_by": "nobody yet: its checkers run next",
    }
    if error is not None:
        document["error"] = error
    if stop is not None:
        document["interrupted"] = stop.to_json()
    if teardown_errors:
        document["teardown_errors"] = list(teardown_errors)
    if stats is not None:
        document["stats"] = stats.to_json()
    document.update(extra or {})
    judge_coverage(document, comp.spec.min_coverage)
    return document


# -- logging and results of interrupted runs -------------------------------------------------------------------------


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
    comp: Composition, timings: Mapping[str, Any], reproduces: str | None, replay_command: str | None = None
) -> dict[str, Any]:
    """``test.json`` (FORMATS.md) of a run: what was run, with what, and how to run it again
    (``replay_command``: a run that replays given scripts says how to replay it, not the command line)."""
    spec = comp.spec
    return {
        "test": comp.test_name,
        "seed": spec.seed,
        "command": comp.command(),
        "replay_command": replay_command,
        "nodes": list(comp.node_names),
        "db": comp.plugin.name,
        "db_options": dict(comp.options),
        "workload": spec.workload,
        "nemesis": list(comp.packages),
        "model": comp.workload.model,
        "checkers": list(comp.checkers),
        "not_applicable": dict(comp.not_applicable),
        **comp.contract_json(),
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
