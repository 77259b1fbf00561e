"""The one step every path that judges a run ends with: write the run's ``report.html`` and refresh the
index of the store it belongs to.

``harness run`` (direct checks), the analysis pipeline (``harness analyze``, ``harness suite``, the Spark
path of ``harness run``) and the simulator call :func:`publish` after ``results.json`` is written, so a
report never shows a verdict older than its run's results. A report that cannot be rendered is logged
and reported to the caller; it never turns a judged run into a crashed one.

:func:`write_reports_safely` writes many runs' reports, in parallel worker processes when asked: a
report is CPU-bound Python (reading the history, drawing the figures), so threads would not help.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from harness.report.index import write_index, write_suite_page
from harness.report.render import write_report

log = logging.getLogger(__name__)

# From this many reports on, they are written by several processes (report_workers).
PARALLEL_FROM = 4


def store_of(run_dir: Path) -> Path:
    """The store a run directory belongs to: ``store/<test>/<timestamp>/`` -> ``store``."""
    return run_dir.resolve().parent.parent


def write_report_safely(run_dir: str | os.PathLike[str]) -> Path | None:
    """Write ``run_dir/report.html``; return its path, or None if it could not be written (logged)."""
    try:
        return write_report(run_dir)
    except Exception as exc:  # noqa: BLE001 - the verdict stands without its page
        log.error("could not write the report of %s: %s: %s", run_dir, type(exc).__name__, exc)
        return None


def write_reports_safely(
    run_dirs: Sequence[str | os.PathLike[str]],
    *,
    workers: int = 1,
    done: Callable[[int, int], None] | None = None,
) -> list[Path | None]:
    """Write each run's ``report.html`` (:func:`write_report_safely`); return their paths in the order of
    ``run_dirs`` (None where one could not be written, logged). ``workers`` > 1 renders them in that many
    worker processes (started fresh, not forked: the caller may hold threads or a JVM gateway), each of
    which compiles the templates once; ``done(finished, total)`` is called as reports are written."""
    total = len(run_dirs)
    if workers <= 1 or total <= 1:
        written: list[Path | None] = []
        for run_dir in run_dirs:
            written.append(write_report_safely(run_dir))
            if done is not None:
                done(len(written), total)
        return written
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=min(workers, total), mp_context=context, initializer=_leave_interrupts)
    results: list[Path | None] = []
    try:
        for path in pool.map(write_report_safely, [os.fspath(d) for d in run_dirs]):
            results.append(path)
            if done is not None:
                done(len(results), total)
    except BaseException:  # Ctrl-C or a signal: no further report starts; those under way end by themselves
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return results


def _leave_interrupts() -> None:
    """A report worker leaves Ctrl-C (which reaches the whole process group) to the process that started it,
    which stops the pool: no worker prints a KeyboardInterrupt of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def report_workers(runs: int) -> int:
    """How many processes should write ``runs`` reports: one per core this process may use, and one alone
    for fewer than :data:`PARALLEL_FROM` reports (a worker's start, its imports, costs about a report)."""
    if runs < PARALLEL_FROM:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, runs))


def write_index_safely(store: str | os.PathLike[str]) -> Path | None:
    """Rewrite ``store/index.html``; return its path, or None if it could not be written (logged)."""
    try:
        return write_index(store)
    except Exception as exc:  # noqa: BLE001 - the index is rebuilt by `harness report`
        log.error("could not refresh the store index %s: %s: %s", store, type(exc).__name__, exc)
        return None


def write_suite_page_safely(suite_dir: str | os.PathLike[str]) -> Path | None:
    """Write a suite directory's summary page; return its path, or None if it could not be (logged)."""
    try:
        return write_suite_page(suite_dir)
    except Exception as exc:  # noqa: BLE001 - the suite's verdict and junit.xml stand without the page
        log.error("could not write the suite page of %s: %s: %s", suite_dir, type(exc).__name__, exc)
        return None


def publish(run_dir: str | os.PathLike[str]) -> Path | None:
    """Write ``run_dir/report.html`` and ``<store>/index.html``; return the report's path, or None if it
    could not be written (the reason is logged)."""
    report = write_report_safely(run_dir)
    if report is not None:
        write_index_safely(store_of(Path(run_dir)))
    return report
