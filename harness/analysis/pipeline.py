"""The analysis pipeline: stored runs in, ``results.json`` per run and the Parquet dataset out.

:func:`analyze` does, for any number of runs, in one Spark application:

1. **Read, ingest and check.** Each run's ``test.json``, ``history.jsonl`` and journals are read by the
   task itself when the store is on this machine's filesystem (or mounted at the same path on every
   worker), else by Spark's own reader (``binaryFile``: the Hadoop filesystem layer, so HDFS or object
   storage works as well as a local store; :func:`_read`); the files are grouped by run directory and each run is
   handed whole to one task (``applyInArrow``, :mod:`harness.analysis.ingest`), which validates them,
   runs single-leader-per-term, lsn-monotonicity and durability, checks linearizability key by key, and
   encodes the run's rows of the ``operations`` and ``journal`` tables as Parquet files, which it writes
   into the dataset itself when the store is on this machine's filesystem (the runs' old partitions
   removed before the tasks start). A big run's history also goes to a second task, which checks
   linearizability and makes the ``operations`` table while the first does the rest, so that one big run
   keeps two cores busy. What the tasks return is a few rows per run (and, for a store elsewhere, the
   Parquet files, cached so each run is read exactly once).
2. **Verdicts.** Per-key verdicts fold into one per run; the run's validity is the worst of its
   checkers (FORMATS.md), ``unknown`` when an input file could not be read.
3. **results.json** for every run, written by the driver into its run directory (locally, or through the
   Hadoop ``FileSystem`` API for a store named by URL).
4. **The dataset** (:mod:`harness.analysis.dataset`): the runs' partitions of ``runs``, ``operations``,
   ``journal`` and ``verdicts`` replaced, so re-analysing is idempotent. The driver writes the ``runs``
   and ``verdicts`` files it builds, and the files the tasks encoded for a store they could not write to.
5. **Reports** (``report.html`` of each run, the store's ``index.html``) when the store is on this
   machine's filesystem; for a store elsewhere, ``harness report`` where it is mounted makes them.

Why the rows do not travel through Spark one by one: turning Python rows into JVM rows, caching them
and writing them back out as Parquet cost the JVM as much CPU as the checkers cost Python (measured when
this design was chosen); a task encodes its run's Parquet file with pyarrow in a fraction of that,
and hands Spark one binary value. The checkers are called unchanged inside the tasks.
"""

from __future__ import annotations

import functools
import heapq
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from checkers.verdict import UNKNOWN, Valid, Verdict, exit_code, worst
from harness.analysis import dataset
from harness.analysis.checks import LINEARIZABLE, results_document, verdict_row
from harness.analysis.discovery import RunSelection, StoredRun, find_runs, run_files
from harness.analysis.ingest import (
    FILE_COLUMNS,
    OUTPUT_COLUMNS,
    PHASES_ROW,
    RUN,
    SPLIT_FROM_BYTES,
    TABLE,
    VERDICT,
    files_batch,
    ingest_task,
    linearizability_task_of,
    read_spec,
    splits,
)
from harness.analysis.progress import Progress, SilentProgress, watch_spark
from harness.analysis.spark import spark_session
from harness.analysis.storage import Storage, json_document, literal
from harness.report.publish import report_workers, write_index_safely, write_reports_safely
from harness.store import HISTORY, RESULTS, TEST_JSON

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The most ingestion tasks of one analysis; each task reads one or more whole runs.
MAX_INGEST_TASKS = 512
# Per key: the linearizability search is NP-complete; a night must end. ``None`` means no limit.
DEFAULT_KEY_TIMEOUT_S = 120.0
# Threads writing results.json and the dataset's files (they wait for disks and filesystems, not Python).
WRITERS = 8


@dataclass(frozen=True)
class AnalysisOptions:
    """Budgets of the checkers and what to write."""

    key_timeout_s: float | None = DEFAULT_KEY_TIMEOUT_S
    max_states: int | None = None
    write_dataset: bool = True
    write_reports: bool = True
    # Runs whose history has at least this many bytes are read by two tasks (harness.analysis.ingest).
    split_from_bytes: int = SPLIT_FROM_BYTES


@dataclass(frozen=True)
class RunOutcome:
    """One analysed run: its verdict, its ``results.json`` document and where that was written."""

    run: StoredRun
    valid: Valid
    results: dict[str, Any]
    results_path: PurePath

    def failed_checkers(self) -> dict[str, str]:
        """Checker -> summary for every checker that is not valid; first, as ``input``, the run's files
        that could not be read (a corrupt ``test.json`` makes the run unknown while every checker that
        could judge its history is valid: the reason must still be said)."""
        failed = {}
        errors = [e for e in self.results.get("input_errors") or [] if isinstance(e, Mapping)]
        if errors:
            first = errors[0]
            where = f"{first.get('file')}:{first.get('line')}" if first.get("line") else str(first.get("file"))
            more = f" (+{len(errors) - 1} more input errors)" if len(errors) > 1 else ""
            failed["input"] = f"{where}: {first.get('reason')}{more}"
        failed.update({
            name: entry["summary"]
            for name, entry in self.results["checkers"].items()
            if entry["valid"] is not True
        })
        return failed

    def invalid_checkers(self) -> tuple[str, ...]:
        """The checkers that found an anomaly; the others of :meth:`failed_checkers` could not decide."""
        return tuple(name for name, entry in self.results["checkers"].items() if entry["valid"] is False)


@dataclass
class Analysis:
    """The outcome of one analysis over many runs."""

    store: PurePath
    outcomes: list[RunOutcome] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)
    # CPU seconds the tasks spent, summed over runs, by phase (harness.analysis.ingest.PHASES).
    task_cpu_s: dict[str, float] = field(default_factory=dict)
    # Why no reports were written (a store that is not on this machine's filesystem), else None.
    reports_skipped: str | None = None

    @property
    def valid(self) -> Valid:
        return worst(o.valid for o in self.outcomes) if self.outcomes else UNKNOWN

    @property
    def exit_code(self) -> int:
        return exit_code(self.valid)

    @property
    def operations(self) -> int:
        return sum(o.results.get("ops") or 0 for o in self.outcomes)

    def outcome(self, path: str | os.PathLike[str]) -> RunOutcome:
        resolved = Path(path).resolve()
        for outcome in self.outcomes:
            if outcome.run.path == resolved:
                return outcome
        raise KeyError(f"{path} was not analysed")


def pack_runs(sizes: Mapping[tuple[str, str], int], packs: int) -> list[list[tuple[str, str]]]:
    """Runs dealt into at most ``packs`` partitions of similar size: largest first, each into the pack
    with the fewest bytes so far (a big run ends up alone). Each pack is one task's work."""
    loads: list[tuple[int, int]] = [(0, number) for number in range(max(1, min(packs, len(sizes))))]
    dealt: list[list[tuple[str, str]]] = [[] for _ in loads]
    for key in sorted(sizes, key=lambda k: (-sizes[k], k)):
        load, number = heapq.heappop(loads)
        dealt[number].append(key)
        heapq.heappush(loads, (load + sizes[key], number))
    return [sorted(pack) for pack in dealt if pack]


Task = Callable[[Iterator[Any]], Iterator[Any]]
"""A ``mapInArrow`` function: Arrow record batches in, record batches out."""


def _read(spark: SparkSession, storage: Storage, packs: Sequence[Sequence[PurePath]], task: Task,
          schema: str) -> Any:
    """``task`` over the files of each pack, each pack one partition (its runs' files whole in one task, with
    no shuffle: a file travels to its task once), the task's output of ``schema``.

    Files on this machine's filesystem (a local store, or one mounted at the same path on every worker,
    as ``file:`` URIs already require) are read by the task's own Python (:func:`reading_files`): Spark's
    ``binaryFile`` reader took 11-12 CPU s of the JVM and the workers to hand 422 MB of run files to the
    tasks, against 0.7 for reading them in the tasks (one warm session, 100 runs of 10,000 operations, 2
    cores). Any other store (HDFS, object storage) goes through ``binaryFile``."""
    local = [[storage.local(path) for path in pack] for pack in packs]
    if all(path is not None for pack in local for path in pack):
        files = [[(storage.uri(path), str(here)) for path, here in zip(pack, mine, strict=True)]
                 for pack, mine in zip(packs, local, strict=True)]
        return spark.range(0, len(packs), 1, len(packs)).mapInArrow(reading_files(files, task), schema)
    reader = spark.read.format("binaryFile")
    frames = [reader.load([literal(storage.uri(path)) for path in pack]).select(*FILE_COLUMNS).coalesce(1)
              for pack in packs]
    return functools.reduce(lambda left, right: left.union(right), frames).mapInArrow(task, schema)


def reading_files(packs: Sequence[Sequence[tuple[str, str]]], task: Task) -> Task:
    """``task`` over batches of pack numbers (an ``id`` column) instead of files: each pack's files
    ((uri, local path) pairs), read here, are handed to ``task`` one file a batch, as Spark's
    ``binaryFile`` rows would be (``path`` the uri). A file gone since it was listed is left out, and the
    task says what its run lacks, as for any run missing a file."""

    def read(batches: Iterator[Any]) -> Iterator[Any]:
        def files() -> Iterator[Any]:
            for batch in batches:
                for number in batch.column("id").to_pylist():
                    for uri, here in packs[number]:
                        try:
                            content = Path(here).read_bytes()
                        except OSError:
                            continue
                        yield files_batch([uri], [content])

        return task(files())

    return read


TABLE_CHUNK_BYTES = 256 << 20
"""Run files (bytes) whose encoded tables come back to the driver at once (:func:`table_chunks`)."""


def table_chunks(sizes: Mapping[tuple[str, str], int], budget: int = TABLE_CHUNK_BYTES) -> list[list[tuple[str, str]]]:
    """The runs in order, in consecutive chunks of at most ``budget`` bytes of run files (a bigger run is a
    chunk of its own): the tasks' Parquet files of a chunk come back to the driver in one Arrow
    collection, so the driver holds about one chunk's tables at a time. Arrow, not ``toLocalIterator``:
    PySpark's row iterator pickles every binary value in the JVM (byte by byte) and, measured with
    PySpark 4.3, left about 1.5 times the bytes it served on the JVM's heap after every call, until a
    session analysing a 1,000,000-operation run for the third time ran out of heap."""
    chunks: list[list[tuple[str, str]]] = []
    filled = 0
    for key in sorted(sizes):
        if not chunks or filled + sizes[key] > budget:
            chunks.append([])
            filled = 0
        chunks[-1].append(key)
        filled += sizes[key]
    return chunks


def ingest_slices(runs: int, parallelism: int) -> int:
    """How many ingestion tasks: a few per core (so a slow run does not hold the rest back), never more
    than the runs, and at most :data:`MAX_INGEST_TASKS` (each task costs a scheduling round trip)."""
    return max(1, min(runs, MAX_INGEST_TASKS, max(4 * parallelism, runs // 8)))


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# SQL settings the analysis plans its jobs with, restored afterwards (the session may be the caller's):
# * a union of one-partition inputs concatenates them: Spark 4.1+ otherwise zips inputs that share one
#   partitioning into as many partitions as each has, and every pack is one partition (``coalesce(1)``),
#   so the whole analysis ran as a single task on one core;
# * the run files are listed by the driver: a listing job per pack of more than 32 files cost more than
#   the listing (about half a second a pack here).
ANALYSIS_SQL_CONF = {
    "spark.sql.unionOutputPartitioning": "false",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
}


@contextmanager
def _sql_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """``settings`` on the session while the block runs, the earlier values (or none) after."""
    earlier = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in earlier.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def analyze(
    spark: SparkSession,
    selection: RunSelection,
    options: AnalysisOptions | None = None,
    progress: Progress | None = None,
) -> Analysis:
    """Analyse every run of ``selection`` (see the module docstring) and return their verdicts."""
    options = options or AnalysisOptions()
    progress = progress or SilentProgress()
    try:
        with _sql_conf(spark, ANALYSIS_SQL_CONF):
            return _analyze(spark, selection, options, progress)
    finally:
        progress.close()


def _analyze(spark: SparkSession, selection: RunSelection, options: AnalysisOptions, progress: Progress) -> Analysis:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    storage = selection.storage
    clock = Stopwatch()
    analyzed_at = utc_now()
    runs = list(selection.runs)
    result = Analysis(store=selection.store)
    if not runs:
        return result

    files = {run.key: run_files(storage, run) for run in runs}
    known = known_runs(storage, runs)
    slices = ingest_slices(len(runs), spark.sparkContext.defaultParallelism)
    packs = pack_runs({key: sum(size for _path, size in found) for key, found in files.items()}, slices)
    dataset_store = clear_dataset(selection, options)
    task = ingest_task(
        known, options.key_timeout_s, options.max_states, options.write_dataset, options.split_from_bytes,
        dataset_store,
    )
    records = _read(spark, storage, [[path for key in pack for path, _ in files[key]] for pack in packs], task,
                    dataset.ddl(OUTPUT_COLUMNS))
    # A big run's test.json and history once more, for its second task.
    big = [paths for found in files.values() if (paths := big_files(storage, found, options.split_from_bytes))]
    if big:
        halves = _read(spark, storage, big, linearizability_task_of(
            options.key_timeout_s, options.max_states, options.write_dataset, dataset_store,
        ), dataset.ddl(OUTPUT_COLUMNS))
        records = records.unionByName(halves)
    if dataset_store is None:  # the tables are read in a second job: the tasks' output is kept for it
        records = records.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        # 1. read, ingest, validate and check (one task per run, two for a big run)
        with watch_spark(spark, progress, f"reading and checking {len(runs)} runs"):
            small = (
                records.where(F.col("kind").isin(RUN, VERDICT, PHASES_ROW))
                .select("kind", "test", "run", "name", "text")
                .collect()
            )
        clock.lap("ingest_s")

        def tables() -> Iterator[Mapping[str, Any]]:
            if dataset_store is not None:  # the tasks wrote them
                return
            # The cache is complete: reading it a chunk of runs at a time costs no recomputation.
            encoded = records.where(F.col("kind") == TABLE).select("test", "run", "name", "payload")
            for chunk in table_chunks({key: sum(size for _path, size in found) for key, found in files.items()}):
                wanted = F.concat_ws("/", F.col("test"), F.col("run")).isin([f"{test}/{run}" for test, run in chunk])
                for batch in encoded.where(wanted).toArrow().to_batches():
                    yield from batch.to_pylist()

        info = {"analyzed_at": analyzed_at, "spark_master": spark.sparkContext.master,
                "spark_version": spark.version, "key_timeout_s": options.key_timeout_s}
        conclude(selection, small, tables, info, options, progress, result, clock,
                 watch=lambda what: watch_spark(spark, progress, what))
    finally:
        records.unpersist()
    publish_pages(selection, options, progress, result, clock)
    return result


def known_runs(storage: Storage, runs: Sequence[StoredRun]) -> dict[tuple[str, str], dict[str, Any]]:
    """What a task is told of each run besides its files: the path as the user named it, its suite, night
    and target."""
    return {
        run.key: {"path": storage.display(run.path), "suite": run.suite, "night": run.night_or_date(),
                  "target": run.target}
        for run in runs
    }


def big_files(storage: Storage, found: Sequence[tuple[PurePath, int]], split_from_bytes: int) -> list[PurePath]:
    """A run's ``test.json`` and history, what the second task of a big run reads; nothing unless the
    history is ``split_from_bytes`` or more and the run :func:`~harness.analysis.ingest.splits` (its
    ``test.json`` read here; the task asks again of what it reads)."""
    if not any(path.name == HISTORY and size >= split_from_bytes for path, size in found):
        return []
    spec = next((path for path, _ in found if path.name == TEST_JSON), None)
    try:
        content = storage.read_bytes(spec) if spec is not None else None
    except OSError:
        content = None  # the task says why, as for any run
    if not splits(read_spec(content)[0]):
        return []
    return [path for path, _ in found if path.name in (TEST_JSON, HISTORY)]


def conclude(
    selection: RunSelection,
    small: Iterable[Mapping[str, Any]],
    tables: Callable[[], Iterable[Mapping[str, Any]]],
    info: Mapping[str, Any],
    options: AnalysisOptions,
    progress: Progress,
    result: Analysis,
    clock: Stopwatch,
    watch: Callable[[str], AbstractContextManager[Any]] | None = None,
) -> None:
    """Steps 2-4 of the module docstring, whoever ran the tasks (Spark, or :mod:`harness.analysis.here`):
    the tasks' ``run``, ``verdict`` and ``phases`` rows (``small``) become each run's verdicts and
    ``results.json``, and with ``tables`` (the tasks' ``table`` rows, read when the dataset is written)
    the run's partitions of the dataset."""
    storage = selection.storage
    by_key = {run.key: run for run in selection.runs}
    analyzed_at = info["analyzed_at"]
    small = list(small)
    run_rows: dict[tuple[str, str], dict[str, Any]] = {}
    verdicts: dict[tuple[str, str], dict[str, Verdict]] = {}
    for row in small:
        if row["kind"] == RUN:
            run_rows[(row["test"], row["run"])] = json.loads(row["text"])
    for row in small:
        if row["kind"] == VERDICT:
            verdicts.setdefault((row["test"], row["run"]), {})[row["name"]] = _verdict(row["text"])
        elif row["kind"] == PHASES_ROW:
            for phase, seconds in json.loads(row["text"]).items():
                result.task_cpu_s[phase] = round(result.task_cpu_s.get(phase, 0.0) + seconds, 6)
    for key, row in run_rows.items():
        if LINEARIZABLE in row["pending"] and LINEARIZABLE not in verdicts.get(key, {}):
            verdicts.setdefault(key, {})[LINEARIZABLE] = Verdict(
                UNKNOWN, "linearizable was not checked: the task that checks a big run's history returned nothing"
            )

    # 2-3. verdicts and results.json
    progress.step("writing results.json", total=len(run_rows))
    verdict_rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    # Each results.json is synced before it is renamed into place: a few threads write them.
    with ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="results") as writers:
        written = []
        for key, row in sorted(run_rows.items()):
            errors = json.loads(row["input_errors_json"]) if row["input_errors_json"] else []
            run = by_key[key]
            path = run.path / RESULTS
            run_verdicts = verdicts.get(key, {})
            document = results_document(row, run_verdicts, errors, info, _previous(storage, path))
            row["valid"] = dataset.valid_text(document["valid"])
            row["analyzed_at"] = analyzed_at
            written.append(writers.submit(storage.write_bytes, path, json_document(document)))
            result.outcomes.append(RunOutcome(run=run, valid=document["valid"], results=document, results_path=path))
            verdict_rows[key] = [
                {**verdict_row(key[0], key[1], name, verdict), "analyzed_at": analyzed_at}
                for name, verdict in run_verdicts.items()
            ]
        for done, future in enumerate(written, start=1):
            future.result()
            progress.update(done, len(run_rows))
    clock.lap("results_s")

    # 4. the dataset
    if options.write_dataset:
        with (watch or (lambda _what: nullcontext()))("writing the dataset"):
            _write_dataset(storage, selection.store, tables(), run_rows, verdict_rows)
        clock.lap("dataset_s")


def publish_pages(
    selection: RunSelection, options: AnalysisOptions, progress: Progress, result: Analysis, clock: Stopwatch
) -> None:
    """Step 5: the pages people read, each run's ``report.html`` then the store's index once, when the
    store is on this machine's filesystem."""
    if options.write_reports:
        storage = selection.storage
        local_store = storage.local(selection.store)
        if local_store is None:
            result.reports_skipped = (
                f"no report.html or index.html written: {storage.display(selection.store)} is not on this "
                "machine's filesystem (run harness report where the store is mounted)"
            )
        else:
            progress.step("writing reports", total=len(result.outcomes))
            paths = [storage.local(outcome.run.path) or outcome.run.path for outcome in result.outcomes]
            write_reports_safely(paths, workers=report_workers(len(paths)), done=progress.update)
            write_index_safely(local_store)
            clock.lap("reports_s")
    result.timings_s = clock.laps


def _verdict(text: str) -> Verdict:
    data = json.loads(text)
    return Verdict(
        valid=data["valid"],
        summary=data.get("summary") or "",
        counterexample=data.get("counterexample"),
        stats=data.get("stats") or {},
    )


def clear_dataset(selection: RunSelection, options: AnalysisOptions) -> str | None:
    """Before the tasks start: remove the selected runs' partitions from every table of the dataset (when
    the analysis writes it), so that what the analysis writes replaces them, rows of a table it makes
    none of included. Returns the store's directory when the tasks write their own table files there
    (a store on this machine's filesystem, :mod:`harness.analysis.ingest`), else ``None``.

    An analysis that fails after this leaves its runs out of the dataset until they are analysed again;
    their ``results.json`` and files are untouched."""
    if not options.write_dataset:
        return None
    storage, store, keys = selection.storage, selection.store, [run.key for run in selection.runs]
    with ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="dataset") as writers:
        for future in [writers.submit(dataset.clear_runs, storage, store, table, keys) for table in dataset.TABLES]:
            future.result()
    local = storage.local(store)
    return None if local is None else str(local)


def _write_dataset(
    storage: Storage,
    store: PurePath,
    tables: Iterable[Mapping[str, Any]],
    run_rows: Mapping[tuple[str, str], dict[str, Any]],
    verdict_rows: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]],
) -> None:
    """Write the runs' partitions (:func:`clear_dataset` removed the old ones): the tasks' Parquet files
    that they returned (``tables``, their rows of kind ``table``), then ``runs`` and ``verdicts`` built
    here. The files are written by a few threads: each write waits for its disk (a local file is synced
    before it is renamed into place) or its filesystem's round trip, not for Python, and one after another
    they were a fifth of a batch's analysis."""
    with ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="dataset") as writers:
        written = []

        def write(table: str, key: tuple[str, str], data: bytes) -> None:
            written.append(writers.submit(dataset.write_partition, storage, store, table, *key, data))

        for row in tables:
            write(row["name"], (row["test"], row["run"]), bytes(row["payload"]))
        for key, row in run_rows.items():
            write("runs", key, dataset.parquet_bytes("runs", dataset.rows_columns("runs", [row])))
            rows = verdict_rows.get(key, [])
            if rows:
                write("verdicts", key, dataset.parquet_bytes("verdicts", dataset.rows_columns("verdicts", rows)))
        for future in written:
            future.result()  # the first failed write raises here, as it would have in the loop


def _previous(storage: Storage, path: PurePath) -> dict[str, Any] | None:
    """The run's earlier ``results.json``, if it can be read (what the controller recorded there)."""
    try:
        data = json.loads(storage.read_bytes(path).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class Stopwatch:
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
