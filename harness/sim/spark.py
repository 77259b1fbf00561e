"""Simulation seeds as Spark tasks: ``harness simulate --seeds 1..N --spark-master URL``.

A simulated seed is a pure function of its spec: it needs no node, no container, nothing but this
project's code and a directory to write its run into. So an exploration spreads over Spark as it spreads
over local processes: :class:`SparkSeeds` is a ``harness.sim.explore.SeedExecutor`` that cuts the seeds
into *batches* (:func:`batches`, one Spark task each: a task's fixed cost, starting it and shipping its
spec, is paid once per batch, not once per seed) and submits them in *waves* of a few batches per
worker. Each task runs its seeds one after another with ``harness.sim.explore.run_task``, exactly as a
``--jobs`` worker process does, so a seed's verdict does not depend on where it ran; an invalid run is
moved into the store by the task that simulated it. The outcomes come back to the driver in seed order,
which stops after the wave in which the first failure was found (``--keep-going`` goes on), and shrinks
it there.

Waves overlap: the next wave is submitted before the current one's outcomes are read, so Spark's
scheduler starts its tasks as soon as cores free up. Stopping early cancels the waves still running
(their tasks' scratch directories go with the exploration's scratch directory).

Where things must be (ENVIRONMENT.md, "PySpark"): the workers run ``sys.executable`` for local masters
(``harness.analysis.spark``), so they import this project from the same virtual environment; on a
cluster, every worker needs the project installed and the store on a filesystem all of them and the
driver share (the store path is made absolute before it is shipped). A master that cannot be used is
one line and exit 254 (``SparkUnavailable`` becomes ``ConfigError``).
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
import uuid
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from harness.sim.explore import SeedOutcome, SeedTask, run_task
from harness.spec import ConfigError

if TYPE_CHECKING:
    from pyspark import SparkContext

T = TypeVar("T")

MAX_BATCH = 25
"""Seeds per task at most: a task's outcomes reach the driver only when all its seeds are done."""
BATCHES_PER_WORKER = 4
"""Batches per worker in one exploration (more, smaller tasks balance uneven seeds) and in one wave."""


def batch_size(seeds: int, workers: int, *, per_worker: int = BATCHES_PER_WORKER, cap: int = MAX_BATCH) -> int:
    """Seeds per batch so that ``seeds`` make about ``per_worker`` batches per worker, 1 to ``cap``."""
    if seeds < 1 or workers < 1:
        return 1
    return max(1, min(cap, math.ceil(seeds / (workers * per_worker))))


def batches(items: Sequence[T], size: int) -> list[list[T]]:
    """``items`` cut into consecutive batches of ``size`` (the last may be shorter), order kept."""
    if size < 1:
        raise ValueError(f"a batch holds at least one seed, not {size}")
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def run_batch(tasks: Sequence[SeedTask]) -> list[SeedOutcome]:
    """One Spark task: its seeds, one after another, in this worker (``run_task`` each)."""
    return [run_task(task) for task in tasks]


def shippable(task: SeedTask) -> SeedTask:
    """``task`` with its store and scratch paths absolute: a worker's working directory is its own."""
    spec, scratch, check_determinism, checkers = task
    return (replace(spec, store=str(Path(spec.store).resolve())), str(Path(scratch).resolve()),
            check_determinism, checkers)


class SparkSeeds:
    """An exploration's seeds as Spark tasks (module docstring); use as a context manager, which holds
    one Spark session for every exploration inside it (the detection matrix runs many)."""

    def __init__(self, master: str | None = None, *, batch: int | None = None) -> None:
        from harness.analysis.spark import resolve_master

        self.master = resolve_master(master)
        if batch is not None and batch < 1:
            raise ConfigError(f"--spark-batch must be at least 1, not {batch}")
        self.batch = batch
        self._stack: contextlib.ExitStack | None = None
        self._context: SparkContext | None = None

    def __enter__(self) -> SparkSeeds:
        from harness.analysis.spark import SparkUnavailable, spark_session

        stack = contextlib.ExitStack()
        try:
            session = stack.enter_context(spark_session(self.master))
        except SparkUnavailable as exc:
            stack.close()
            raise ConfigError(str(exc)) from None
        self._stack, self._context = stack, session.sparkContext
        return self

    def __exit__(self, *exc_info: object) -> None:
        stack, self._stack, self._context = self._stack, None, None
        if stack is not None:
            stack.close()

    @property
    def context(self) -> SparkContext:
        if self._context is None:
            raise RuntimeError("SparkSeeds is used outside its with block")
        return self._context

    @property
    def workers(self) -> int:
        """Tasks Spark runs at once: the local master's cores, else the cluster's default parallelism."""
        from harness.analysis.spark import is_local, local_cores

        if is_local(self.master) and not self.master.startswith("local-cluster"):
            return local_cores(self.master)
        return max(1, self.context.defaultParallelism)

    def outcomes(self, tasks: Sequence[SeedTask]) -> Iterator[SeedOutcome]:
        """Yield the outcomes of ``tasks`` in order, wave after wave, the next wave already submitted."""
        if not tasks:
            return
        workers = self.workers
        size = self.batch or batch_size(len(tasks), workers)
        groups = batches([shippable(task) for task in tasks], size)
        per_wave = max(1, workers * BATCHES_PER_WORKER)
        waves = [groups[i:i + per_wave] for i in range(0, len(groups), per_wave)]
        context = self.context
        run_id = uuid.uuid4().hex[:12]
        cancelled = threading.Event()

        def submit(number: int, wave: list[list[SeedTask]]) -> list[list[SeedOutcome]]:
            group = f"chaos-harness-sim-{run_id}-{number}"
            context.setJobGroup(group, f"harness simulate: wave {number + 1} of {len(waves)}",
                                interruptOnCancel=True)
            if cancelled.is_set():
                return []
            return context.parallelize(wave, len(wave)).map(run_batch).collect()

        pending: deque[tuple[int, Future[list[list[SeedOutcome]]]]] = deque()
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="sim-spark-wave") as pool:
            try:
                for number, wave in enumerate(waves):
                    pending.append((number, pool.submit(submit, number, wave)))
                    if len(pending) < 2 and number + 1 < len(waves):
                        continue
                    _, done = pending.popleft()
                    for batch in _result(done):
                        yield from batch
                while pending:
                    _, done = pending.popleft()
                    for batch in _result(done):
                        yield from batch
            finally:
                if pending:
                    cancelled.set()
                    for number, _ in pending:
                        context.cancelJobGroup(f"chaos-harness-sim-{run_id}-{number}")
                    for _, future in pending:
                        with contextlib.suppress(Exception):
                            future.result()



_PYTHON_ERROR = re.compile(r"^\s*(\w+(?:\.\w+)*(?:Error|Exception)): (.*)$")


def _result(wave: Future[list[list[SeedOutcome]]]) -> list[list[SeedOutcome]]:
    """A wave's outcomes; a Spark job that failed (a task that could not even start a seed: a worker
    without the project, a store it cannot write) is one line, :class:`ConfigError`. A seed that crashes
    is not a failed task: ``run_seed`` reports it as that seed's error."""
    try:
        return wave.result()
    except Exception as exc:  # noqa: BLE001 - py4j and PySpark raise many types; all mean "the job failed"
        raise ConfigError(f"a Spark task of the exploration failed ({task_error(exc)}): its workers must run "
                          "this project's Python (PYSPARK_PYTHON) and write to --store") from None


def task_error(exc: BaseException) -> str:
    """The Python error a failed Spark job reports, in one line (its last ``...Error: message`` line)."""
    lines = str(exc).splitlines()
    for line in reversed(lines):
        match = _PYTHON_ERROR.match(line)
        if match:
            return f"{match.group(1)}: {match.group(2).strip()}"[:300]
    first = next((line.strip() for line in lines if line.strip()), type(exc).__name__)
    return first[:300]
