"""Progress for suites and long analyses: rich bars on a terminal, one line per step elsewhere (CI logs).

A :class:`Progress` is a list of steps, each with an optional total (runs of a suite, tasks of a Spark
stage). :func:`watch_spark` follows the Spark jobs started inside a ``with`` block, through the status
tracker, and moves the current step's bar as tasks finish, so a ten-minute analysis shows that it lives.
A suite running cases in parallel adds one line per running case (``case_started``, ``case_status``,
``case_finished``): a spinner with the case's live counters on a terminal, a line when each starts and
ends elsewhere.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.progress import Progress as RichBars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

POLL_S = 0.5


class Progress(Protocol):
    """Where the pipeline and the suite runner say how far they are."""

    def step(self, description: str, total: int | None = None) -> None:
        """Start a new step (ending the previous one)."""

    def update(self, completed: int, total: int | None = None) -> None:
        """Set how much of the current step is done."""

    def note(self, message: str) -> None:
        """A line for the reader, printed above any bar."""

    def case_started(self, key: int, name: str) -> None:
        """A case of a suite began; it has a line of its own until :meth:`case_finished`."""

    def case_status(self, key: int, status: str) -> None:
        """The running case's counters changed."""

    def case_finished(self, key: int, message: str) -> None:
        """The case ended: its line goes, ``message`` is printed."""

    def close(self) -> None:
        """End the last step."""


class SilentProgress:
    """Progress that shows nothing (library use, tests)."""

    def step(self, description: str, total: int | None = None) -> None:
        pass

    def update(self, completed: int, total: int | None = None) -> None:
        pass

    def note(self, message: str) -> None:
        pass

    def case_started(self, key: int, name: str) -> None:
        pass

    def case_status(self, key: int, status: str) -> None:
        pass

    def case_finished(self, key: int, message: str) -> None:
        pass

    def close(self) -> None:
        pass


class ConsoleProgress:
    """Rich bars when ``console`` is a terminal; otherwise one line when each step starts and ends."""

    def __init__(self, console: Console | None = None, clock: Any = time.monotonic) -> None:
        self.console = console or Console(stderr=True, markup=False, emoji=False)
        self.clock = clock
        self.live = self.console.is_terminal
        self._bars: RichBars | None = None
        self._task: TaskID | None = None
        self._description = ""
        self._started = 0.0
        self._lock = threading.Lock()
        self._cases: dict[int, tuple[TaskID | None, str]] = {}
        if self.live:
            self._bars = RichBars(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.console,
                transient=False,
            )
            self._bars.start()

    def _finish(self) -> None:
        if not self._description:
            return
        if self._bars is not None and self._task is not None:
            task = next(t for t in self._bars.tasks if t.id == self._task)
            if task.total is not None:
                self._bars.update(self._task, completed=task.total)
            self._bars.stop_task(self._task)
        else:
            self.console.print(
                f"  {self._description}: done in {self.clock() - self._started:.1f} s", highlight=False
            )
        self._description = ""

    def step(self, description: str, total: int | None = None) -> None:
        with self._lock:
            self._finish()
            self._description, self._started = description, self.clock()
            if self._bars is not None:
                self._task = self._bars.add_task(description, total=total)
            else:
                suffix = f" ({total})" if total is not None else ""
                self.console.print(f"{description}{suffix} ...", highlight=False)

    def update(self, completed: int, total: int | None = None) -> None:
        with self._lock:
            if self._bars is not None and self._task is not None:
                self._bars.update(self._task, completed=completed, total=total)

    def note(self, message: str) -> None:
        self.console.print(message, highlight=False)

    def case_started(self, key: int, name: str) -> None:
        with self._lock:
            task = None
            if self._bars is not None:
                task = self._bars.add_task(escape(f"  {name}"), total=None)
            else:
                self.console.print(f"[{key + 1}] {name}: started", highlight=False, markup=False)
            self._cases[key] = (task, name)

    def case_status(self, key: int, status: str) -> None:
        with self._lock:
            task, name = self._cases.get(key, (None, ""))
            if self._bars is not None and task is not None:
                self._bars.update(task, description=escape(f"  {name}: {status}"))

    def case_finished(self, key: int, message: str) -> None:
        with self._lock:
            task, _name = self._cases.pop(key, (None, ""))
            if self._bars is not None and task is not None:
                self._bars.remove_task(task)
            self.console.print(message, highlight=False, markup=False)

    def close(self) -> None:
        with self._lock:
            self._finish()
            if self._bars is not None:
                self._bars.stop()
                self._bars = None


def spark_tasks(spark: SparkSession, group: str) -> tuple[int, int]:
    """(completed, total) tasks of the stages of the jobs in ``group`` seen so far."""
    tracker = spark.sparkContext.statusTracker()
    completed = total = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        for stage_id in job.stageIds:
            stage = tracker.getStageInfo(stage_id)
            if stage is None:
                continue
            total += stage.numTasks
            completed += stage.numCompletedTasks
    return completed, total


@contextmanager
def watch_spark(spark: SparkSession, progress: Progress, description: str) -> Iterator[None]:
    """A step whose bar follows the Spark tasks of the jobs run in the block."""
    group = f"harness-{uuid.uuid4().hex[:12]}"
    context = spark.sparkContext
    context.setJobGroup(group, description)
    progress.step(description)
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(POLL_S):
            try:
                completed, total = spark_tasks(spark, group)
            except Exception:  # noqa: BLE001 - the tracker may vanish while the session stops
                return
            if total:
                progress.update(completed, total)

    watcher = threading.Thread(target=poll, name="spark-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)
