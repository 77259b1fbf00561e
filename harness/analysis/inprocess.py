"""The analysis pipeline without Spark: the same tasks and the same driver steps, in this process.

A run is judged by one judge whose rules exist once. :func:`analyze_here` hands each run's files to the
very function Spark runs as a ``mapInArrow`` task (:func:`harness.analysis.ingest.ingest_task`; a big run
too is one task here, where Spark gives it a second on another core), as one Arrow batch of ``path`` and
``content`` rows, which is what Spark's ``binaryFile`` reader gives them; what they return goes through
the pipeline's own steps (:func:`harness.analysis.pipeline.conclude`: verdicts, ``results.json``, the
run's partitions of the Parquet dataset written with pyarrow, the tables by the task as on Spark; then
the reports). So ``results.json`` and the dataset rows of a run judged here are those ``harness
analyze`` writes for it, but for the ``analysis`` record saying who judged it and when.

This is how ``harness run`` judges its run (no JVM to start for one run: a 60-second simulated run is
judged in seconds, not in the half minute a Spark session takes to start); Spark is for many runs
(``harness analyze``, ``harness suite``, a store named by URL), and ``harness run --analysis spark``
still judges the run on a cluster for a user who wants that.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePath
from typing import Any

import pyarrow as pa

from harness.analysis.discovery import RunSelection, find_runs, run_files
from harness.analysis.ingest import PHASES_ROW, RUN, TABLE, VERDICT, files_batch, ingest_task
from harness.analysis.pipeline import (
    Analysis,
    AnalysisOptions,
    RunOutcome,
    Stopwatch,
    clear_dataset,
    conclude,
    known_runs,
    publish_pages,
    utc_now,
)
from harness.analysis.progress import Progress, SilentProgress

# Who judged a run, in its results.json's "analysis" record (Spark's master and version say it there).
ENGINE = "in-process (harness.analysis.inprocess)"
SMALL_KINDS = (RUN, VERDICT, PHASES_ROW)
NO_SPLIT = 1 << 62
"""No history is big enough here for a second task (:func:`analyze_here`)."""


def _files_batch(selection: RunSelection, paths: Sequence[PurePath]) -> pa.RecordBatch:
    """The files as Spark's ``binaryFile`` reader hands them to a task: their path and whole content."""
    storage = selection.storage
    return files_batch([str(path) for path in paths], [storage.read_bytes(path) for path in paths])


def _rows(task: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], batch: pa.RecordBatch,
          ) -> Iterator[dict[str, Any]]:
    for out in task(iter([batch])):
        yield from out.to_pylist()


def analyze_here(
    selection: RunSelection, options: AnalysisOptions | None = None, progress: Progress | None = None
) -> Analysis:
    """Analyse every run of ``selection`` in this process, one after another (the module docstring)."""
    options = options or AnalysisOptions()
    progress = progress or SilentProgress()
    clock = Stopwatch()
    result = Analysis(store=selection.store)
    runs = list(selection.runs)
    if not runs:
        return result
    # One task a run, big or not: a big run's second task is for a second core, and here both would run
    # one after the other, the second parsing the history again (about 10 CPU s for 1,000,000 operations).
    task = ingest_task(known_runs(selection.storage, runs), options.key_timeout_s, options.max_states,
                       options.write_dataset, NO_SPLIT, clear_dataset(selection, options))
    small: list[dict[str, Any]] = []
    tables: list[dict[str, Any]] = []
    try:
        progress.step(f"reading and checking {len(runs)} runs", total=len(runs))
        for done, run in enumerate(runs, start=1):
            found = run_files(selection.storage, run)
            rows = list(_rows(task, _files_batch(selection, [path for path, _ in found])))
            small += (row for row in rows if row["kind"] in SMALL_KINDS)
            tables += (row for row in rows if row["kind"] == TABLE)
            progress.update(done, len(runs))
        clock.lap("ingest_s")
        info = {"analyzed_at": utc_now(), "engine": ENGINE, "key_timeout_s": options.key_timeout_s}
        conclude(selection, small, lambda: tables, info, options, progress, result, clock)
        publish_pages(selection, options, progress, result, clock)
    finally:
        progress.close()
    return result


def judge_here(
    run_dir: str | os.PathLike[str], options: AnalysisOptions | None = None, progress: Progress | None = None
) -> RunOutcome:
    """Judge one stored run in this process (what ``harness run`` does at its end) and return its outcome:
    ``results.json``, the run's rows of the store's dataset, its report and the store's index written."""
    analysis = analyze_here(find_runs([run_dir]), options, progress)
    return analysis.outcome(Path(run_dir))


__all__ = ["ENGINE", "analyze_here", "judge_here"]
