"""The analysis dataset: every analysed run's operations, journal events and verdicts as Parquet tables.

Layout, under the store (beside the run directories of FORMATS.md's "Store layout")::

    store/dataset/runs/test=<test-name>/run=<YYYYMMDDTHHMMSS>/part-*.parquet        one row per run
    store/dataset/operations/test=.../run=.../part-*.parquet                       client + nemesis ops
    store/dataset/journal/test=.../run=.../part-*.parquet                          node journal events
    store/dataset/verdicts/test=.../run=.../part-*.parquet                         one row per checker
    store/summary.json                                                             cross-run view

Every table is partitioned by ``test`` and ``run`` (the two path components of a run directory), so a
query over one night or one test reads only its directories, and re-analysing a run replaces exactly its
partitions (:func:`clear_runs` before the tasks start, then :func:`write_partition`): no duplicates,
whatever was there before. Each partition is one Parquet file, ``part-00000.parquet``, encoded with
pyarrow (:func:`parquet_bytes`: by the ingestion tasks for ``operations`` and ``journal``, which also
write them into a store on their filesystem; by the driver for ``runs`` and ``verdicts``) and written
through the store's :class:`~harness.analysis.storage.Storage`; the directories are named as
Spark names partitions (:func:`escape_partition_value`), so Spark, pandas and DuckDB read them alike,
and so do partitions Spark itself wrote in earlier versions. Values of the system under
test whose JSON type varies (keys, values, outputs, counterexamples) are stored as JSON text in ``*_json``
columns; a readable ``key`` column sits beside ``key_json``. Times are nanoseconds since the test
started (``*_ns``), as in the history. Three-valued validity is the text ``true``, ``false`` or
``unknown``. Columns may be added; renaming or removing one needs a migration in the readers.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from checkers.verdict import UNKNOWN, Valid
from harness.analysis.storage import LocalStorage, Storage, literal
from harness.store import DATASET_DIR, SUITES_DIR  # noqa: F401 - SUITES_DIR: harness.suite imports it from here

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SUMMARY_FILE = "summary.json"
PARTITION_COLUMNS = ("test", "run")
PART_FILE = "part-00000.parquet"

# Column name -> Spark SQL type, in file order; the partition columns come first here and are moved to
# the directory names on write.
RUNS: dict[str, str] = {
    "test": "string",
    "run": "string",
    "path": "string",  # the run directory, absolute
    "suite": "string",  # suite name, when the run belongs to one
    "night": "string",  # YYYY-MM-DD: the suite's start date (UTC) or the run's own
    "target": "double",  # the share of its suite entry's runs that must meet their expectation, if set
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


def dataset_dir(store: PurePath) -> PurePath:
    return store / DATASET_DIR


def table_dir(store: PurePath, table: str) -> PurePath:
    return dataset_dir(store) / table


# Characters Spark escapes as %XX in partition directory names (its ``ExternalCatalogUtils``): the
# dataset's directories are named as Spark would name them, so Spark, pandas and DuckDB read the same
# partition values back.
_ESCAPED = frozenset('"#%\'*/:=?\\\x7f{[]^') | frozenset(chr(c) for c in range(0x01, 0x20))


def escape_partition_value(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def partition_dir(store: PurePath, table: str, test: str, run: str) -> PurePath:
    """``store/dataset/<table>/test=<test>/run=<run>``, escaped as Spark escapes partition values."""
    return table_dir(store, table) / f"test={escape_partition_value(test)}" / f"run={escape_partition_value(run)}"


def arrow_schema(table: str) -> Any:
    """A table's columns in its files (the partition columns are directory names, not columns)."""
    import pyarrow as pa

    kinds = {"string": pa.string(), "long": pa.int64(), "double": pa.float64(), "boolean": pa.bool_()}
    return pa.schema(
        [(name, kinds[kind]) for name, kind in TABLES[table].items() if name not in PARTITION_COLUMNS]
    )


DICTIONARY_COLUMNS: dict[str, list[str]] = {
    "operations": ["process", "f", "key", "type", "node", "error"],
}
"""The columns of a table whose values repeat enough for Parquet's dictionary encoding (a table not named:
every column). For ``operations`` (a run's 10,000): 35% less CPU to write the file than with every column
dictionary-encoded, and a file 22% smaller (ids, times and values are nearly all distinct)."""


def arrow_table(table: str, columns: Mapping[str, Sequence[Any]]) -> Any:
    """The Arrow table of ``table``'s file (:func:`arrow_schema`) from its columns (column -> values; the
    partition columns, if given, are left out, a column not given is all null)."""
    import pyarrow as pa

    schema = arrow_schema(table)
    arrays = [pa.array(columns.get(field.name) or [None] * _rows(columns), field.type) for field in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def parquet_bytes(table: str, data: Mapping[str, Sequence[Any]] | Any) -> bytes:
    """One Parquet file of ``table`` from its columns (as :func:`arrow_table` takes them) or its Arrow
    table, as Spark would write it: snappy-compressed, one row group per 1M rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not isinstance(data, pa.Table):
        data = arrow_table(table, data)
    elif not data.schema.equals(arrow_schema(table)):
        raise ValueError(f"not the schema of the {table} table: {data.schema}")
    buffer = io.BytesIO()
    pq.write_table(data, buffer, compression="snappy", use_dictionary=DICTIONARY_COLUMNS.get(table, True))
    return buffer.getvalue()


def _rows(columns: Mapping[str, list[Any]]) -> int:
    return max((len(values) for values in columns.values()), default=0)


def rows_columns(table: str, rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Rows (dicts) of ``table`` as its columns."""
    names = [name for name in TABLES[table] if name not in PARTITION_COLUMNS]
    columns: dict[str, list[Any]] = {name: [] for name in names}
    for row in rows:
        for name in names:
            columns[name].append(row.get(name))
    return columns


def clear_runs(storage: Storage, store: PurePath, table: str, runs: Iterable[tuple[str, str]]) -> int:
    """Delete the partitions of ``runs`` ((test, run) pairs) from ``table``; return how many existed.

    Done before a run's rows are written again, so that re-analysis replaces them even when the new
    analysis yields no rows for that table (a history that became unreadable has no operations).
    """
    removed = 0
    tests: set[PurePath] = set()
    for test, run in runs:
        directory = partition_dir(store, table, test, run)
        if storage.is_dir(directory):
            storage.remove(directory)
            removed += 1
            tests.add(directory.parent)
    for test_dir in tests:
        if not storage.list_dir(test_dir):
            storage.remove(test_dir)
    return removed


def write_partition(storage: Storage, store: PurePath, table: str, test: str, run: str, data: bytes) -> PurePath:
    """Write one run's Parquet file of ``table`` (``part-00000.parquet`` in its partition directory)."""
    path = partition_dir(store, table, test, run) / PART_FILE
    storage.write_bytes(path, data)
    return path


def read_table(spark: SparkSession, store: PurePath, table: str, storage: Storage | None = None) -> DataFrame | None:
    """The whole table (all runs analysed so far), or ``None`` when nothing was written yet."""
    storage = storage or LocalStorage()
    root = table_dir(store, table)
    if not any(is_dir for _name, is_dir in storage.list_dir(root)):
        return None
    uri = storage.uri(root)
    # The reader takes its path as a glob pattern; the base path is a plain path.
    return spark.read.schema(ddl(TABLES[table])).option("basePath", uri).parquet(literal(uri))
