"""The one step every path that judges a run ends with: write the run's ``report.html`` and refresh the
index of the store it belongs to.

``harness run`` (direct checks), the analysis pipeline (``harness analyze``, ``harness suite``, the Spark
path of ``harness run``) and the simulator call :func:`publish` after ``results.json`` is written, so a
report never shows a verdict older than its run's results. A report that cannot be rendered is logged
and reported to the caller; it never turns a judged run into a crashed one.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from harness.report.index import write_index, write_suite_page
from harness.report.render import write_report

log = logging.getLogger(__name__)


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
