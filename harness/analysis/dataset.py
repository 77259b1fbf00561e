"""The analysis dataset: every analysed run's operations, journal events and verdicts as Parquet tables.

Layout, under the store (beside the run directories of FORMATS.md's "Store layout")::

    store/dataset/runs/test=<test-name>/run=<YYYYMMDDTHHMMSS>/part-*.parquet        one row per run
    store/dataset/operations/test=.../run=.../part-*.parquet                       client + nemesis ops
    store/dataset/journal/test=.../run=.../part-*.parquet                          node journal events
    store/dataset/verdicts/test=.../run=.../part-*.parquet                         one row per checker
    store/summary.json                                                             cross-run view

Every table is partitioned by ``test`` and ``run`` (the two path components of a run directory), so a
query over one night or one test reads only its directories, and re-analysing a run replaces exactly its
partitions (:func:`write_tables`): no duplicates, whatever was there before. Values of the system under
test whose JSON type varies (keys, values, outputs, counterexamples) are stored as JSON text in ``*_json``
columns; a readable ``key`` column sits beside ``key_json``. Times are nanoseconds since the test
started (``*_ns``), as in the history. Three-valued validity is the text ``true``, ``false`` or
``unknown``. Columns may be added; renaming or removing one needs a migration in the readers.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from checkers.verdict import UNKNOWN, Valid
from harness.store import DATASET_DIR, SUITES_DIR  # noqa: F401 - SUITES_DIR: harness.suite imports it from here

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SUMMARY_FILE = "summary.json"
PARTITION_COLUMNS = ("test", "run")

# Column name -> Spark SQL type, in file order; the partition columns come first here and are moved to
# the directory names on write.
RUNS: dict[str, str] = {
    "test": "string",
    "run": "string",
    "path": "string",  # the run directory, absolute
    "suite": "string",  # suite name, when the run belongs to one
    "night": "string",  # YYYY-MM-DD: the suite's start date (UTC) or the run's own
    "started": "string",  # ISO 8601 UTC, from the run directory's name
    "seed": "long",
    "mode": "string",
    "workload": "string",
    "nemesis": "string",
    "bugs": "string",  # "none" or the bug names joined by "+", sorted
    "model": "string",
    "ops": "long",  # client operations (invokes)
    "ok_ops": "long",
    "nemesis_ops": "long",
    "duration_s": "double",  # first to last history event
    "ops_per_s": "double",  # ok client operations per second of duration
    "latency_p50_ms": "double",  # over ok client operations
    "latency_p99_ms": "double",
    "valid": "string",
    "input_errors_json": "string",  # [{"file", "line", "reason"}] for malformed input
    "spec_json": "string",  # test.json as stored
    "analyzed_at": "string",
}
OPERATIONS: dict[str, str] = {
    "test": "string",
    "run": "string",
    "id": "long",  # per run: client ops 0, 1, 2, ... and nemesis ops 0, 1, 2, ... (FORMATS.md pairing)
    "process": "string",  # the client process id, or "nemesis"
    "f": "string",
    "key": "string",
    "key_json": "string",
    "value_json": "string",
    "output_json": "string",
    "type": "string",  # ok, fail, info
    "call_ns": "long",
    "ret_ns": "long",  # null for info: it may take effect at any time after call
    "latency_ns": "long",
    "invoke_index": "long",
    "complete_index": "long",
    "node": "string",
    "lsn_term": "long",
    "lsn_seq": "long",
    "error": "string",
}
JOURNAL: dict[str, str] = {
    "test": "string",
    "run": "string",
    "node": "string",
    "seq": "long",
    "wall": "double",
    "event": "string",
    "role": "string",
    "term": "long",
    "leader": "string",
    "lsn_term": "long",
    "lsn_seq": "long",
    "key": "string",
    "data_json": "string",  # every field of the event beyond node, seq, wall, event
    "line": "long",
}
VERDICTS: dict[str, str] = {
    "test": "string",
    "run": "string",
    "checker": "string",
    "valid": "string",
    "summary": "string",
    "counterexample_json": "string",
    "stats_json": "string",
    "analyzed_at": "string",
}
TABLES: dict[str, dict[str, str]] = {
    "runs": RUNS,
    "operations": OPERATIONS,
    "journal": JOURNAL,
    "verdicts": VERDICTS,
}


def ddl(columns: Mapping[str, str]) -> str:
    """A table's columns as a Spark DDL schema string."""
    return ", ".join(f"`{name}` {kind}" for name, kind in columns.items())


def valid_text(valid: Valid) -> str:
    return "true" if valid is True else "false" if valid is False else UNKNOWN


def valid_value(text: str | None) -> Valid:
    return True if text == "true" else False if text == "false" else UNKNOWN


def dataset_dir(store: Path) -> Path:
    return Path(store) / DATASET_DIR


def table_dir(store: Path, table: str) -> Path:
    return dataset_dir(store) / table


def _partition_value(directory: Path, column: str) -> str | None:
    prefix = f"{column}="
    if not directory.name.startswith(prefix):
        return None
    return unquote(directory.name[len(prefix) :])  # Spark escapes some characters as %XX


def clear_runs(store: Path, table: str, runs: Iterable[tuple[str, str]]) -> int:
    """Delete the partitions of ``runs`` ((test, run) pairs) from ``table``; return how many existed.

    Done before a run's rows are written again, so that re-analysis replaces them even when the new
    analysis yields no rows for that table (a history that became unreadable has no operations).
    """
    wanted = set(runs)
    root = table_dir(store, table)
    if not root.is_dir():
        return 0
    removed = 0
    for test_dir in root.iterdir():
        test = _partition_value(test_dir, "test")
        if test is None or not test_dir.is_dir():
            continue
        for run_dir in test_dir.iterdir():
            run = _partition_value(run_dir, "run")
            if run is not None and (test, run) in wanted:
                shutil.rmtree(run_dir)
                removed += 1
        if not any(test_dir.iterdir()):
            test_dir.rmdir()
    return removed


def write_table(store: Path, table: str, frame: DataFrame, runs: Iterable[tuple[str, str]]) -> None:
    """Replace the partitions of ``runs`` in ``table`` with the rows of ``frame``.

    No shuffle: the pipeline's frames come partitioned by run (one ingestion task per run, or a few runs
    per task), so each task writes one file per run it holds.
    """
    columns = list(TABLES[table])
    clear_runs(store, table, runs)
    frame.select(*columns).write.mode("append").partitionBy(*PARTITION_COLUMNS).parquet(
        str(table_dir(store, table))
    )


def read_table(spark: SparkSession, store: Path, table: str) -> DataFrame | None:
    """The whole table (all runs analysed so far), or ``None`` when nothing was written yet."""
    root = table_dir(store, table)
    if not root.is_dir() or not any(root.glob("test=*/run=*/*.parquet")):
        return None
    return spark.read.schema(ddl(TABLES[table])).option("basePath", str(root)).parquet(str(root))


def rows_frame(spark: SparkSession, table: str, rows: list[Mapping[str, Any]]) -> DataFrame:
    """A small table built on the driver (runs, verdicts) as a DataFrame with the table's schema."""
    columns = list(TABLES[table])
    return spark.createDataFrame(
        [tuple(row.get(c) for c in columns) for row in rows], ddl(TABLES[table])
    ).coalesce(1)
