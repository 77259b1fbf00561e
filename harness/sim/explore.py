"""Exploration: many seeds of one simulated test, on every core of the machine.

:func:`explore` runs a simulated test (a :class:`~harness.spec.TestSpec` on the sim platform) for each seed of a list, ``jobs`` seeds at a time
in worker processes (``multiprocessing``; each simulation itself is single-threaded and deterministic).
Every seed runs in a scratch directory under ``store/.sim-scratch/``; a seed that is *invalid* (some
checker found an anomaly) is moved into the store as a normal run with its replay command, everything else
is deleted. Results arrive in seed order, so "the first failure" is the lowest failing seed, however the
work was spread; without ``keep_going`` the exploration stops there.

With ``check_determinism`` every seed runs twice and the two histories and journals must hash the same
(:func:`harness.sim.run.trace_digest`); a difference is reported per seed and is a harness defect.

Every exploration ends with its seeds written to the dataset's ``sim_seeds`` table (``harness.sim.dataset``),
whoever called it: ``harness simulate --seeds``, or each exploration of the detection matrix. While it runs,
its partition is written again with the seeds finished so far every :data:`CHECKPOINT_S` seconds, so that
an exploration killed outright (SIGKILL, a machine lost, a CI job's time limit), which cannot write at its
end, leaves what it finished before its last checkpoint.

Where the seeds run is a :class:`SeedExecutor`: :class:`ProcessPool` (``jobs`` worker processes on this
machine, the default) or ``harness.sim.spark.SparkSeeds`` (batches of seeds as Spark tasks). Code that
calls :func:`explore` without naming one (the detection matrix of a DB plugin) gets the executor
installed by :func:`using`, so ``harness simulate --matrix --spark-master URL`` runs the matrix's
explorations on Spark without the plugin knowing.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import multiprocessing
import os
import re
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Protocol

from checkers.verdict import UNKNOWN, Valid
from harness import signals
from harness.compose import Composition
from harness.lifecycle import die_with_parent
from harness.sim import dataset
from harness.sim.run import SimResult, compose_sim, discard, keep, owned_scratch, simulate
from harness.spec import ConfigError, TestSpec
from harness.store import StoreError

log = logging.getLogger(__name__)

MAX_SEEDS = 10_000_000
CHECKPOINT_S = 30.0
"""How often (wall seconds, at most) a running exploration writes its ``sim_seeds`` partition (module
docstring): rewriting a partition of a few thousand rows takes milliseconds."""
_RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$")


def parse_seeds(text: str) -> list[int]:
    """Seeds from ``"1..5000"`` (inclusive), ``"7"``, or comma-separated mixes such as ``"1..10,42"``.

    Raises ``ValueError`` with one line naming the bad part and the accepted forms.
    """
    seeds: list[int] = []
    for part in str(text).split(","):
        if not part.strip():
            continue
        match = _RANGE.match(part)
        if match:
            first, last = int(match.group(1)), int(match.group(2))
            if last < first:
                raise ValueError(f"seed range {part.strip()!r} runs backwards; write FIRST..LAST with FIRST <= LAST")
            if last - first + 1 + len(seeds) > MAX_SEEDS:
                raise ValueError(f"seed range {part.strip()!r} is too long (at most {MAX_SEEDS} seeds)")
            seeds.extend(range(first, last + 1))
            continue
        try:
            seeds.append(int(part))
        except ValueError:
            raise ValueError(f"bad seed {part.strip()!r}: give integers, ranges FIRST..LAST, or a "
                             "comma-separated list of both (e.g. 1..5000 or 1..10,42)") from None
    if not seeds:
        raise ValueError(f"no seeds in {text!r}: give e.g. 1..5000")
    return seeds


@dataclass(frozen=True)
class SeedOutcome:
    """One seed's run, as the exploration reports it."""

    seed: int
    valid: Valid
    failed: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    sim_seconds: float = 0.0
    wall_seconds: float = 0.0
    run_dir: str | None = None
    error: str | None = None
    replay_command: str | None = None
    deterministic: bool | None = None


@dataclass
class Exploration:
    """Everything an exploration saw, in seed order."""

    spec: TestSpec
    seeds: list[int]
    outcomes: list[SeedOutcome] = field(default_factory=list)
    wall_seconds: float = 0.0
    jobs: int = 1
    stopped_early: bool = False
    executor: str = ""
    """Where the seeds ran: ``processes N`` or ``spark MASTER``."""
    recorded: Path | None = None
    """The exploration's partition of the ``sim_seeds`` table (``harness.sim.dataset``)."""
    interrupted: bool = False
    """Ctrl-C, SIGTERM or SIGHUP stopped it: ``outcomes`` are the seeds finished before."""

    @property
    def invalid(self) -> list[SeedOutcome]:
        return [o for o in self.outcomes if o.valid is False]

    @property
    def unknown(self) -> list[SeedOutcome]:
        return [o for o in self.outcomes if o.valid == UNKNOWN]

    @property
    def nondeterministic(self) -> list[SeedOutcome]:
        return [o for o in self.outcomes if o.deterministic is False]

    @property
    def sim_seconds(self) -> float:
        return sum(o.sim_seconds for o in self.outcomes)

    def failures_by_checker(self) -> dict[str, list[int]]:
        """Checker -> the seeds it failed, in seed order (checkers in the order they first failed)."""
        found: dict[str, list[int]] = {}
        for outcome in self.outcomes:
            for name in outcome.failed:
                found.setdefault(name, []).append(outcome.seed)
        return found

    def unknown_by_checker(self) -> Counter[str]:
        return Counter(name for o in self.outcomes for name in o.unknown)

    @property
    def exit_code(self) -> int:
        """0 every seed valid, 1 any invalid, 2 any unknown and none invalid (``harness run``'s codes)."""
        if self.invalid:
            return 1
        if self.unknown or not self.outcomes:
            return 2
        return 0


def run_seed(spec: TestSpec, scratch: str, check_determinism: bool = False,
             checkers: Sequence[str] | None = None) -> SeedOutcome:
    """Simulate one seed in a scratch directory; keep it in the store if invalid, else delete it."""
    started = time.perf_counter()
    work = Path(scratch) / f"seed-{spec.seed}"
    shutil.rmtree(work, ignore_errors=True)
    signals_before = signals.handled()
    try:
        result = simulate(spec, work, checkers=checkers)
    except Exception as exc:  # noqa: BLE001 - one seed's crash is reported, the exploration goes on
        shutil.rmtree(work, ignore_errors=True)
        if signals.handled() > signals_before:  # a signal came: whatever it broke, the exploration stops
            log.warning("seed %d ended in an error as the exploration was stopped: %s: %s", spec.seed,
                        type(exc).__name__, exc)
            raise KeyboardInterrupt from exc
        return SeedOutcome(spec.seed, UNKNOWN, error=f"{type(exc).__name__}: {exc}",
                           wall_seconds=time.perf_counter() - started)
    _stop_if_interrupted(result)
    deterministic = None
    if check_determinism:
        again_dir = Path(scratch) / f"seed-{spec.seed}-again"
        shutil.rmtree(again_dir, ignore_errors=True)
        again = simulate(spec, again_dir, checkers=())
        _stop_if_interrupted(again, result)
        deterministic = again.digest == result.digest
        shutil.rmtree(again_dir, ignore_errors=True)
    run_dir = None
    error = result.results.get("error")
    replay_command = result.replay_command
    if result.valid is False:
        try:
            run_dir = str(keep(result).run_dir)
        except (OSError, StoreError) as exc:  # a full disk, say: the verdict stands; the seed replays the run
            error = f"its run could not be kept in the store: {exc}"
            discard(result)
    else:
        discard(result)
    return SeedOutcome(
        seed=spec.seed,
        valid=result.valid,
        failed=tuple(result.failed_checkers),
        unknown=tuple(result.unknown_checkers),
        sim_seconds=result.sim_seconds,
        wall_seconds=time.perf_counter() - started,
        run_dir=run_dir,
        error=error,
        replay_command=replay_command,
        deterministic=deterministic,
    )


SeedTask = tuple[TestSpec, str, bool, "Sequence[str] | None"]
"""What one seed's run needs: its spec (the seed set), the scratch directory, whether to check
determinism, and the checkers to judge with (:func:`run_seed`'s arguments)."""


def _stop_if_interrupted(*results: SimResult) -> None:
    """A seed's run turns Ctrl-C, SIGTERM or SIGHUP into an interrupted run (``harness.signals``), judged
    and stored like any other; in an exploration it must end the exploration instead, or every signal
    would cost one seed and the next seed would start. A signal that came only during a seed's teardown
    (which it does not interrupt) ends the exploration too, and so does one whose run ended in another
    error while the signal came (said in the log: the run is discarded with the seed's others)."""
    if any(r.stop_requested for r in results):
        for r in results:
            if r.error is not None and not r.interrupted:
                log.warning("seed %d ended in an error as the exploration was stopped: %s",
                            r.spec.seed, r.error)
            discard(r)
        raise KeyboardInterrupt


def run_task(task: SeedTask) -> SeedOutcome:
    """Run one :data:`SeedTask` (in whatever process or Spark task the executor chose)."""
    return run_seed(*task)


def default_jobs() -> int:
    return max(1, os.cpu_count() or 1)


class SeedExecutor(Protocol):
    """Where an exploration's seeds run."""

    @property
    def workers(self) -> int:
        """How many seeds run at once (for the summary's speed per worker)."""
        ...

    def outcomes(self, tasks: Sequence[SeedTask]) -> Iterator[SeedOutcome]:
        """Run ``tasks``; yield their outcomes in task order. The caller may stop early by closing the
        iterator (it stops at a failure): work not yet begun is then abandoned."""
        ...


class ProcessPool:
    """Seeds in ``jobs`` worker processes of this machine (``fork``), one seed at a time each; one job runs
    in this process.

    Each worker has a pipe of its own (no lock shared between workers), so stopping early can kill the
    workers outright: a seed's run turns SIGTERM into an interrupt and finishes its teardown
    (``harness.signals``), so a pool that stops its workers with SIGTERM (``multiprocessing.Pool``) can
    wait for ever on a worker that outlived it.
    """

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = default_jobs() if jobs is None else jobs
        if self.jobs < 1:
            raise ConfigError(f"--jobs must be at least 1, not {self.jobs}")

    @property
    def workers(self) -> int:
        return self.jobs

    def outcomes(self, tasks: Sequence[SeedTask]) -> Iterator[SeedOutcome]:
        if self.jobs == 1 or len(tasks) <= 1:
            for task in tasks:
                yield run_task(task)
            return
        context = multiprocessing.get_context("fork")
        workers: list[tuple[multiprocessing.process.BaseProcess, Connection]] = []
        finished = False
        try:
            for _ in range(min(self.jobs, len(tasks))):
                ours, theirs = context.Pipe()
                # The worker is handed the pool's ends of every pipe so far, its own too, to close: a forked
                # worker holding one would never see its pipe close when the pool's process dies.
                pool_ends = [ours, *(connection for _, connection in workers)]
                process = context.Process(target=_serve, args=(theirs, pool_ends, os.getpid()), daemon=True)
                process.start()
                theirs.close()
                workers.append((process, ours))
            busy: dict[Connection, int] = {}
            done: dict[int, SeedOutcome] = {}
            handed = reported = 0
            for _, connection in workers:
                connection.send(tasks[handed])
                busy[connection] = handed
                handed += 1
            while reported < len(tasks):
                while reported in done:
                    yield done.pop(reported)
                    reported += 1
                if reported == len(tasks):
                    break
                for connection in wait(list(busy)):
                    index = busy.pop(connection)
                    try:
                        done[index] = connection.recv()
                    except EOFError:  # the worker died (killed from outside): the seed is unknown
                        done[index] = SeedOutcome(tasks[index][0].seed, UNKNOWN, error="its worker process died")
                        continue
                    if handed < len(tasks):
                        connection.send(tasks[handed])
                        busy[connection] = handed
                        handed += 1
            finished = True
        finally:
            for process, connection in workers:
                if finished and process.is_alive():
                    with contextlib.suppress(OSError):
                        connection.send(None)  # done: leave
                elif process.is_alive():
                    process.kill()  # stopped early: the seeds still running are abandoned
                process.join()
                connection.close()


def _serve(connection: Connection, pool_ends: Sequence[Connection] = (), pool: int | None = None) -> None:
    """A :class:`ProcessPool` worker: run the tasks it is sent until it is sent ``None``, or its pipe closes.

    It closes the pool's ends of the pipes (``pool_ends``, inherited by the fork) and asks to die with the
    pool's process (``pool``, its pid): a pool killed outright (SIGKILL) leaves no worker running a seed
    nobody will read, or waiting for ever on a pipe it holds open itself."""
    for end in pool_ends:
        end.close()
    if pool is not None:
        die_with_parent(pool)
    while True:
        try:
            task = connection.recv()
        except EOFError:
            return
        if task is None:
            return
        try:
            outcome = run_task(task)
        except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the parent stops the pool
            return
        connection.send(outcome)


_executor: contextvars.ContextVar[SeedExecutor | None] = contextvars.ContextVar("seed_executor", default=None)


@contextlib.contextmanager
def using(executor: SeedExecutor) -> Iterator[SeedExecutor]:
    """Within the block, :func:`explore` calls that name neither ``executor`` nor ``jobs`` use ``executor``."""
    token = _executor.set(executor)
    try:
        yield executor
    finally:
        _executor.reset(token)


def explore(
    spec: TestSpec,
    seeds: Iterable[int],
    *,
    jobs: int | None = None,
    keep_going: bool = False,
    check_determinism: bool = False,
    checkers: Sequence[str] | None = None,
    stop_on: Callable[[SeedOutcome], bool] | None = None,
    on_outcome: Callable[[SeedOutcome], Any] | None = None,
    executor: SeedExecutor | None = None,
) -> Exploration:
    """Run ``spec`` for every seed (its own ``seed`` is ignored) on ``executor``: by default the one
    :func:`using` installed, else a :class:`ProcessPool` of ``jobs`` processes (``jobs`` given: always that).

    Stops after the first seed for which ``stop_on`` is true (default: an invalid seed) unless
    ``keep_going``. ``checkers`` restricts judging to those checkers (the detection matrix asks only the one
    that must catch its bug). ``on_outcome`` sees each outcome in seed order as it is known.
    """
    comp = compose_sim(spec)  # bad names fail here, once, not in every worker
    seed_list = list(seeds)
    if executor is None:
        installed = _executor.get()
        executor = installed if installed is not None and jobs is None else ProcessPool(jobs)
    stop_on = stop_on or (lambda outcome: outcome.valid is False)
    exploration = Exploration(spec, seed_list, jobs=executor.workers, executor=executor_name(executor))
    started_at = datetime.now(UTC)
    partition = dataset.exploration_id(started_at)
    with owned_scratch(spec.store, "explore") as scratch:  # removed after the workers are closed
        started = time.perf_counter()
        tasks = [(replace(spec, seed=seed), str(scratch), check_determinism, checkers) for seed in seed_list]
        results = executor.outcomes(tasks)
        checkpoint = time.monotonic()
        try:
            for outcome in results:
                exploration.outcomes.append(outcome)
                if time.monotonic() - checkpoint >= CHECKPOINT_S:
                    try:
                        _record(exploration, comp, partition)
                    except OSError as exc:  # a full disk, say: the seeds go on, and the end writes them again
                        log.warning("could not write the seeds finished so far to the sim_seeds table: %s", exc)
                    checkpoint = time.monotonic()
                if on_outcome is not None:
                    on_outcome(outcome)
                if not keep_going and stop_on(outcome):
                    exploration.stopped_early = outcome.seed != seed_list[-1]
                    break
        except KeyboardInterrupt:
            exploration.interrupted = True
        finally:
            close = getattr(results, "close", None)
            if close is not None:
                close()
            exploration.wall_seconds = time.perf_counter() - started
    if exploration.outcomes:
        _record(exploration, comp, partition)
    if exploration.interrupted:
        raise ExplorationInterrupted(exploration)
    return exploration


def _record(exploration: Exploration, comp: Composition, partition: str) -> None:
    """Write the exploration's ``sim_seeds`` partition with the seeds finished so far."""
    rows = dataset.rows(exploration, test=comp.test_name, options=comp.options, executor=exploration.executor)
    exploration.recorded = dataset.write(exploration.spec.store, partition, rows)


class ExplorationInterrupted(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP stopped an exploration; ``exploration`` holds the seeds finished before
    (already written to the ``sim_seeds`` table). A ``KeyboardInterrupt``, so that callers that run several
    explorations (the detection matrix) stop too."""

    def __init__(self, exploration: Exploration) -> None:
        super().__init__(f"interrupted after {len(exploration.outcomes)} of {len(exploration.seeds)} seeds")
        self.exploration = exploration


def executor_name(executor: SeedExecutor) -> str:
    """How the ``sim_seeds`` table and the summary name where seeds ran."""
    master = getattr(executor, "master", None)
    return f"spark {master}" if master is not None else f"processes {executor.workers}"
