"""The analysis pipeline: stored runs in, ``results.json`` per run and the Parquet dataset out.

:func:`analyze` does, for any number of runs, in one Spark application:

1. **Ingest and run-level checks.** Each task reads whole runs (``mapInArrow``, :mod:`harness.analysis.ingest`)
   reads and validates the history and journals, runs single-leader-per-term, lsn-monotonicity and
   durability on them, and emits the run's rows for every table. The output is cached, so each run is
   parsed exactly once.
2. **Linearizability per run and key.** The cached operations are grouped by (test, run, key) and each
   group is checked in its own task (``applyInArrow``, :func:`harness.analysis.checks.check_key`).
3. **Verdicts.** Per-key verdicts fold into one per run; the run's validity is the worst of its
   checkers (FORMATS.md), ``unknown`` when an input file could not be read.
4. **results.json** for every run, written atomically into its run directory.
5. **The dataset** (:mod:`harness.analysis.dataset`): the runs' partitions of ``runs``, ``operations``,
   ``journal`` and ``verdicts`` replaced, so re-analysing is idempotent.

Why Arrow (``mapInArrow``/``applyInArrow``) rather than pandas or RDDs: the rows carry JSON values of
varying types (keys, values, outputs), which pandas would coerce, and the record schema is wide but
mostly null, which Arrow builds for free (``pa.nulls``) where pandas would allocate object columns; RDDs
would pickle every row. The checkers are called unchanged inside the tasks.

Reports (``report.html``, the index) are made from what this writes: ``results.json`` and the dataset.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers.history import NEMESIS
from checkers.leader import STATUS
from checkers.verdict import UNKNOWN, Valid, Verdict, exit_code, worst
from harness.analysis import dataset
from harness.analysis.checks import (
    LIN_COLUMNS,
    LINEARIZABLE,
    linearizability_task,
    merge_linearizability,
    results_document,
    verdict_from_row,
    verdict_row,
)
from harness.analysis.discovery import RunSelection, StoredRun, find_runs
from harness.analysis.ingest import PENDING, RECORD_COLUMNS, RUN_INPUT, ingest_task
from harness.analysis.progress import Progress, SilentProgress, watch_spark
from harness.analysis.spark import spark_session
from harness.report.publish import write_index_safely, write_report_safely
from harness.store import HISTORY, RESULTS, write_json

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The most ingestion tasks of one analysis; each task reads one or more whole runs.
MAX_INGEST_TASKS = 512
# Per key: the linearizability search is NP-complete; a night must end. ``None`` means no limit.
DEFAULT_KEY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class AnalysisOptions:
    """Budgets of the checkers and what to write."""

    key_timeout_s: float | None = DEFAULT_KEY_TIMEOUT_S
    max_states: int | None = None
    write_dataset: bool = True
    write_reports: bool = True


@dataclass(frozen=True)
class RunOutcome:
    """One analysed run: its verdict, its ``results.json`` document and where that was written."""

    run: StoredRun
    valid: Valid
    results: dict[str, Any]
    results_path: Path

    def failed_checkers(self) -> dict[str, str]:
        """Checker -> summary for every checker that is not valid."""
        return {
            name: entry["summary"]
            for name, entry in self.results["checkers"].items()
            if entry["valid"] is not True
        }


@dataclass
class Analysis:
    """The outcome of one analysis over many runs."""

    store: Path
    outcomes: list[RunOutcome] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)

    @property
    def valid(self) -> Valid:
        return worst(o.valid for o in self.outcomes) if self.outcomes else UNKNOWN

    @property
    def exit_code(self) -> int:
        return exit_code(self.valid)

    @property
    def operations(self) -> int:
        return sum(o.results.get("ops") or 0 for o in self.outcomes)

    def outcome(self, path: Path) -> RunOutcome:
        resolved = Path(path).resolve()
        for outcome in self.outcomes:
            if outcome.run.path == resolved:
                return outcome
        raise KeyError(f"{path} was not analysed")


def _run_inputs(runs: Sequence[StoredRun], slices: int) -> list[tuple[Any, ...]]:
    """Ingestion inputs in the order ``parallelize`` cuts into ``slices`` tasks of similar work: the
    runs by history size, largest first, dealt round-robin, so each task gets a mix."""

    def size(run: StoredRun) -> int:
        try:
            return os.path.getsize(run.path / HISTORY)
        except OSError:
            return 0

    ordered = sorted(runs, key=size, reverse=True)
    dealt = [ordered[i::slices] for i in range(slices)]
    return [(str(r.path), r.test, r.run, r.suite, r.night_or_date()) for bucket in dealt for r in bucket]


def ingest_slices(runs: int, parallelism: int) -> int:
    """How many ingestion tasks: a few per core (so a slow run does not hold the rest back), never more
    than the runs, and at most :data:`MAX_INGEST_TASKS` (each task costs a scheduling round trip)."""
    return max(1, min(runs, MAX_INGEST_TASKS, max(4 * parallelism, runs // 8)))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def analyze(
    spark: SparkSession,
    selection: RunSelection,
    options: AnalysisOptions | None = None,
    progress: Progress | None = None,
) -> Analysis:
    """Analyse every run of ``selection`` (see the module docstring) and return their verdicts."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    options = options or AnalysisOptions()
    progress = progress or SilentProgress()
    clock = _Stopwatch()
    analyzed_at = _now()
    runs = list(selection.runs)
    by_key = {run.key: run for run in runs}
    result = Analysis(store=selection.store)
    if not runs:
        return result

    slices = ingest_slices(len(runs), spark.sparkContext.defaultParallelism)
    inputs = _run_inputs(runs, slices)
    run_frame = spark.createDataFrame(spark.sparkContext.parallelize(inputs, slices), dataset.ddl(RUN_INPUT))
    records = run_frame.mapInArrow(
        ingest_task(options.key_timeout_s, options.max_states), dataset.ddl(RECORD_COLUMNS)
    ).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        # 1. ingest, validate and run the run-level checkers (one task per run)
        with watch_spark(spark, progress, f"reading and checking {len(runs)} runs"):
            small = records.where(F.col("table").isin("runs", "verdicts")).collect()
        clock.lap("ingest_s")
        run_rows = {(r["test"], r["run"]): r.asDict() for r in small if r["table"] == "runs"}
        verdicts: dict[tuple[str, str], dict[str, Verdict]] = {key: {} for key in run_rows}
        for row in small:
            if row["table"] == "verdicts":
                verdicts[(row["test"], row["run"])][row["checker"]] = verdict_from_row(row.asDict())

        # 2. linearizability per run and key
        pending = {
            key: row["model"]
            for key, row in run_rows.items()
            if LINEARIZABLE in (row[PENDING] or "").split(",")
        }
        operations = records.where(F.col("table") == "operations").select(*dataset.OPERATIONS)
        if pending:
            pending_frame = spark.createDataFrame(list(pending), "test string, run string")
            grouped = (
                operations.where((F.col("process") != NEMESIS) & (F.col("f") != STATUS))
                .join(F.broadcast(pending_frame), ["test", "run"], "left_semi")
                .groupBy("test", "run", "key_json")
            )
            task = linearizability_task(pending, options.key_timeout_s, options.max_states)
            with watch_spark(spark, progress, f"linearizability of {len(pending)} runs, per key"):
                key_rows = [
                    r.asDict() for r in grouped.applyInArrow(task, dataset.ddl(LIN_COLUMNS)).collect()
                ]
            per_run: dict[tuple[str, str], list[dict[str, Any]]] = {key: [] for key in pending}
            for row in key_rows:
                per_run[(row["test"], row["run"])].append(row)
            for key, model in pending.items():
                verdicts[key][LINEARIZABLE] = merge_linearizability(model, per_run[key])
        clock.lap("linearizability_s")

        # 3-4. verdicts and results.json
        progress.step("writing results.json", total=len(run_rows))
        analysis_info = {
            "analyzed_at": analyzed_at,
            "spark_master": spark.sparkContext.master,
            "spark_version": spark.version,
            "key_timeout_s": options.key_timeout_s,
        }
        verdict_rows: list[dict[str, Any]] = []
        for done, (key, row) in enumerate(sorted(run_rows.items()), start=1):
            errors = json.loads(row["input_errors_json"]) if row["input_errors_json"] else []
            run = by_key[key]
            path = run.path / RESULTS
            document = results_document(row, verdicts[key], errors, analysis_info, _previous(path))
            row["valid"] = dataset.valid_text(document["valid"])
            row["analyzed_at"] = analyzed_at
            write_json(path, document)
            result.outcomes.append(
                RunOutcome(run=run, valid=document["valid"], results=document, results_path=path)
            )
            for name, verdict in verdicts[key].items():
                verdict_rows.append(
                    {**verdict_row(key[0], key[1], name, verdict), "analyzed_at": analyzed_at}
                )
            progress.update(done, len(run_rows))
        clock.lap("results_s")

        # 5. the dataset
        if options.write_dataset:
            keys = list(run_rows)
            with watch_spark(spark, progress, "writing the dataset"):
                dataset.write_table(
                    selection.store, "runs", dataset.rows_frame(spark, "runs", list(run_rows.values())), keys
                )
                dataset.write_table(
                    selection.store, "verdicts", dataset.rows_frame(spark, "verdicts", verdict_rows), keys
                )
                dataset.write_table(selection.store, "operations", operations, keys)
                journal = records.where(F.col("table") == "journal").select(*dataset.JOURNAL)
                dataset.write_table(selection.store, "journal", journal, keys)
            clock.lap("dataset_s")
        # 6. the pages people read: each run's report.html, then the store's index once
        if options.write_reports:
            progress.step("writing reports", total=len(result.outcomes))
            for done, outcome in enumerate(result.outcomes, start=1):
                write_report_safely(outcome.run.path)
                progress.update(done, len(result.outcomes))
            write_index_safely(selection.store)
            clock.lap("reports_s")
    finally:
        records.unpersist()
        progress.close()
    result.timings_s = clock.laps
    return result


def _previous(path: Path) -> dict[str, Any] | None:
    """The run's earlier ``results.json``, if it can be read (what the controller recorded there)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class _Stopwatch:
    def __init__(self) -> None:
        import time

        self._clock = time.perf_counter
        self._last = self._clock()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = self._clock()
        self.laps[name] = round(now - self._last, 3)
        self._last = now


def analyze_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    master: str | None = None,
    store: str | os.PathLike[str] | None = None,
    spark_conf: Mapping[str, str] | None = None,
    options: AnalysisOptions | None = None,
    progress: Progress | None = None,
) -> Analysis:
    """Find the runs under ``paths`` and analyse them in a Spark session of their own.

    Raises :class:`~harness.analysis.discovery.DiscoveryError` (no runs) and
    :class:`~harness.analysis.spark.SparkUnavailable` (no Spark): both one sentence, exit 254.
    """
    selection = find_runs(paths, store)
    with spark_session(master, spark_conf) as spark:
        return analyze(spark, selection, options, progress)


def analyze_run(
    run_dir: str | os.PathLike[str],
    *,
    master: str | None = None,
    spark: SparkSession | None = None,
    options: AnalysisOptions | None = None,
    progress: Progress | None = None,
) -> RunOutcome:
    """Analyse one stored run (what ``harness run`` calls at its end) and return its outcome.

    Uses ``spark`` when given, else starts a session for the call. ``results.json`` is in the run
    directory afterwards, and the run's rows are in the store's dataset.
    """
    selection = find_runs([run_dir])
    if spark is not None:
        analysis = analyze(spark, selection, options, progress)
    else:
        with spark_session(master) as session:
            analysis = analyze(session, selection, options, progress)
    return analysis.outcome(Path(run_dir))
