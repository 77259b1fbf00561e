"""Ingestion: one stored run's files into rows of the dataset's tables, inside a Spark task.

:func:`read_run` is plain Python: it reads ``test.json``, validates ``history.jsonl`` and every
``nodes/<node>/journal.jsonl`` with :mod:`checkers.history`, runs the run-level checkers
(:func:`harness.analysis.checks.run_level_checks`) on what it parsed, and returns the rows. Parsing once
and checking in the same task matters: the durability checker reads raw history events, which no table
keeps, and a 1,000,000-operation history takes seconds to parse.

:func:`ingest_task` is the ``mapInArrow`` function around it: one input row per run, output rows of one
*record* schema that carries every table's columns plus ``table`` saying which table a row belongs to
(the other tables' columns are null, which Arrow stores for free). The pipeline caches that output once
and selects each table from it, so no run is parsed twice.

Malformed input never fails the task: a history or journal that does not parse becomes an *input
error* (file relative to the run directory, 1-based line, reason), the run's verdict becomes unknown,
and the batch goes on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from checkers.history import (
    History,
    HistoryError,
    JournalEvent,
    Operation,
    load_history,
    load_journal,
)
from checkers.leader import STATUS
from checkers.registry import CHECKERS
from checkers.verdict import UNKNOWN, Verdict
from harness.analysis.checks import RunChecks, RunParams, run_level_checks, run_params
from harness.analysis.dataset import JOURNAL, OPERATIONS, RUNS, VERDICTS
from harness.lifecycle import blame_the_stop, final_after_for, stop_of
from harness.store import HISTORY, NODES, TEST_JSON
from harness.store import JOURNAL as JOURNAL_FILE

# Columns only the record schema has: checkers still to run in later Spark stages (comma-separated).
PENDING = "pending"
RECORD_COLUMNS: dict[str, str] = {"table": "string", PENDING: "string"}
for _table in (RUNS, OPERATIONS, JOURNAL, VERDICTS):
    for _name, _kind in _table.items():
        if RECORD_COLUMNS.setdefault(_name, _kind) != _kind:
            raise TypeError(f"column {_name} has two types in the dataset's tables")
RUN_INPUT: dict[str, str] = {
    "path": "string",
    "test": "string",
    "run": "string",
    "suite": "string",
    "night": "string",
}
# Rows per Arrow batch handed back to Spark: bounds a task's memory on million-operation histories.
BATCH_ROWS = 65_536


@dataclass(frozen=True)
class InputError:
    """A file of a run that could not be read: where, and why."""

    file: str  # relative to the run directory
    line: int | None
    reason: str

    def describe(self) -> str:
        return (
            f"{self.file}:{self.line}: {self.reason}"
            if self.line is not None
            else f"{self.file}: {self.reason}"
        )

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "reason": self.reason}


@dataclass
class RunRecords:
    """What one run contributes to each table (column -> values), and its run-level verdicts."""

    run: dict[str, Any]
    operations: dict[str, list[Any]]
    journal: dict[str, list[Any]]
    checks: RunChecks
    input_errors: list[InputError] = field(default_factory=list)


# One encoder for every value: json.dumps with options builds a new encoder per call, which made encoding
# the dominant cost of ingesting a run.
_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=repr)


def _json(value: Any) -> str | None:
    if value is None:
        return None
    if type(value) is int:  # the common case (register values, LSN parts): no encoder needed
        return str(value)
    return _ENCODER.encode(value)


def key_text(key: Any) -> str | None:
    """The readable form of a key: itself if it is a string, else its JSON."""
    if key is None:
        return None
    return key if isinstance(key, str) else _json(key)


class _KeyCache(dict):
    """Key -> (readable text, JSON): a run has few keys and many operations on each."""

    def of(self, key: Any) -> tuple[str | None, str | None]:
        hashable = (
            (type(key), key) if type(key) in (str, int) or key is None else (list, _ENCODER.encode(key))
        )
        found = self.get(hashable)
        if found is None:
            found = self[hashable] = (key_text(key), _json(key))
        return found


def _relative(path_text: str, run_dir: Path) -> str:
    try:
        return str(Path(path_text).resolve().relative_to(run_dir))
    except ValueError:
        return path_text


def _input_error(exc: HistoryError, run_dir: Path) -> InputError:
    return InputError(file=_relative(exc.source, run_dir), line=exc.line, reason=exc.reason)


def read_spec(run_dir: Path) -> tuple[dict[str, Any], InputError | None]:
    path = run_dir / TEST_JSON
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, InputError(TEST_JSON, None, "no such file")
    except json.JSONDecodeError as exc:
        return {}, InputError(TEST_JSON, exc.lineno, f"bad JSON: {exc.msg}")
    except (OSError, UnicodeDecodeError) as exc:
        return {}, InputError(TEST_JSON, None, str(exc))
    if not isinstance(spec, dict):
        return {}, InputError(TEST_JSON, 1, f"expected a JSON object, got {type(spec).__name__}")
    return spec, None


def read_journals(run_dir: Path) -> tuple[dict[str, list[JournalEvent]], list[InputError]]:
    """Every readable journal under ``nodes/``, and an input error for each one that is not."""
    journals: dict[str, list[JournalEvent]] = {}
    errors: list[InputError] = []
    for path in sorted((run_dir / NODES).glob(f"*/{JOURNAL_FILE}")):
        try:
            events = load_journal(path)
        except HistoryError as exc:
            errors.append(_input_error(exc, run_dir))
            continue
        node = events[0].node if events else path.parent.name
        if node in journals:
            errors.append(
                InputError(_relative(str(path), run_dir), None, f"a second journal for node {node!r}")
            )
            continue
        journals[node] = events
    return dict(sorted(journals.items())), errors


def _percentile(sorted_values: Sequence[int], fraction: float) -> float | None:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return float(sorted_values[rank - 1])


def run_stats(history: History | None) -> dict[str, Any]:
    """Throughput and latency of the workload's operations (status polls and the nemesis excluded)."""
    if history is None:
        return {
            "ops": None,
            "ok_ops": None,
            "nemesis_ops": None,
            "duration_s": None,
            "ops_per_s": None,
            "latency_p50_ms": None,
            "latency_p99_ms": None,
        }
    workload = [op for op in history.ops if op.f != STATUS]
    ok = [op for op in workload if op.ok and op.ret is not None]
    latencies = sorted(op.ret - op.call for op in ok)
    duration_ns = history.events[-1].time - history.events[0].time if history.events else 0
    duration_s = duration_ns / 1e9
    p50, p99 = _percentile(latencies, 0.50), _percentile(latencies, 0.99)
    return {
        "ops": len(workload),
        "ok_ops": len(ok),
        "nemesis_ops": len(history.nemesis),
        "duration_s": round(duration_s, 6),
        "ops_per_s": round(len(ok) / duration_s, 3) if duration_s > 0 else None,
        "latency_p50_ms": None if p50 is None else p50 / 1e6,
        "latency_p99_ms": None if p99 is None else p99 / 1e6,
    }


def _operation_columns(test: str, run: str, ops: Iterable[Operation], out: dict[str, list[Any]]) -> None:
    keys = _KeyCache()
    for op in ops:
        text, encoded = keys.of(op.key)
        out["test"].append(test)
        out["run"].append(run)
        out["id"].append(op.id)
        out["process"].append(str(op.process))
        out["f"].append(op.f)
        out["key"].append(text)
        out["key_json"].append(encoded)
        out["value_json"].append(_json(op.value))
        out["output_json"].append(_json(op.output))
        out["type"].append(op.type)
        out["call_ns"].append(op.call)
        out["ret_ns"].append(op.ret)
        out["latency_ns"].append(None if op.ret is None else op.ret - op.call)
        out["invoke_index"].append(op.invoke_index)
        out["complete_index"].append(op.complete_index)
        out["node"].append(op.node)
        out["lsn_term"].append(op.lsn[0] if op.lsn else None)
        out["lsn_seq"].append(op.lsn[1] if op.lsn else None)
        out["error"].append(op.error)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _long(value: Any) -> int | None:
    """An integer that fits a Parquet long, else ``None`` (the seed stays in ``spec_json`` regardless)."""
    number = _int_or_none(value)
    return number if number is not None and -(2**63) <= number < 2**63 else None


def _journal_columns(
    test: str, run: str, journals: Mapping[str, list[JournalEvent]], out: dict[str, list[Any]]
) -> None:
    for node, events in journals.items():
        for event in events:
            data = event.data
            lsn = data.get("lsn")
            leader = data.get("leader")
            out["test"].append(test)
            out["run"].append(run)
            out["node"].append(node)
            out["seq"].append(event.seq)
            out["wall"].append(event.wall)
            out["event"].append(event.event)
            out["role"].append(data.get("role") if isinstance(data.get("role"), str) else None)
            out["term"].append(_int_or_none(data.get("term")))
            out["leader"].append(leader if isinstance(leader, str) else None)
            out["lsn_term"].append(lsn[0] if lsn else None)
            out["lsn_seq"].append(lsn[1] if lsn else None)
            out["key"].append(key_text(data.get("key")))
            out["data_json"].append(_json(data))
            out["line"].append(event.line)


def _empty(columns: Mapping[str, str]) -> dict[str, list[Any]]:
    return {name: [] for name in columns}


def read_run(
    path: Path,
    test: str,
    run: str,
    *,
    suite: str | None = None,
    night: str | None = None,
    timeout_s: float | None = None,
    max_states: int | None = None,
) -> RunRecords:
    """Read, validate and check one run directory (see the module docstring). Never raises for bad input."""
    run_dir = Path(path)
    errors: list[InputError] = []
    spec, spec_error = read_spec(run_dir)
    if spec_error is not None:
        errors.append(spec_error)
    history: History | None = None
    history_error: InputError | None = None
    try:
        history = load_history(run_dir / HISTORY)
    except HistoryError as exc:
        history_error = _input_error(exc, run_dir)
        errors.append(history_error)
    journals, journal_errors = read_journals(run_dir)
    errors.extend(journal_errors)

    params: RunParams = run_params(spec, history)
    # A run that stopped before its final phase has no final reads (harness.lifecycle).
    stop = stop_of(spec, run_dir / HISTORY)
    if stop is not None and params.final_after is None:
        params = replace(params, final_after=final_after_for(stop))
    checks = run_level_checks(
        history,
        journals or None,
        params,
        history_error=history_error.describe() if history_error else None,
        journal_errors=[e.describe() for e in journal_errors],
        timeout_s=timeout_s,
        max_states=max_states,
    )
    checks.verdicts = blame_the_stop(checks.verdicts, stop)
    operations = _empty(OPERATIONS)
    if history is not None:
        _operation_columns(test, run, history.ops, operations)
        _operation_columns(test, run, history.nemesis, operations)
    journal = _empty(JOURNAL)
    _journal_columns(test, run, journals, journal)
    seed = spec.get("seed")
    row: dict[str, Any] = {
        "test": test,
        "run": run,
        "path": str(run_dir),
        "suite": suite,
        "night": night,
        "seed": _long(seed),
        "mode": params.mode,
        "workload": params.workload,
        "nemesis": params.nemesis,
        "bugs": params.bugs,
        "model": params.model,
        "input_errors_json": _json([e.to_json() for e in errors]) if errors else None,
        "spec_json": _json(spec) if spec else None,
        **run_stats(history),
    }
    return RunRecords(run=row, operations=operations, journal=journal, checks=checks, input_errors=errors)


def crashed_run(
    path: Path, test: str, run: str, exc: Exception, *, suite: str | None = None, night: str | None = None
) -> RunRecords:
    """The rows of a run whose analysis raised: unknown, with the error, and nothing else."""
    reason = f"the analysis crashed on this run: {type(exc).__name__}: {exc}"
    checks = RunChecks(verdicts={name: Verdict(UNKNOWN, reason) for name in CHECKERS})
    error = InputError(file=".", line=None, reason=reason)
    row: dict[str, Any] = {
        "test": test,
        "run": run,
        "path": str(path),
        "suite": suite,
        "night": night,
        "input_errors_json": _json([error.to_json()]),
        **run_stats(None),
    }
    return RunRecords(
        run=row, operations=_empty(OPERATIONS), journal=_empty(JOURNAL), checks=checks, input_errors=[error]
    )


# --- the Spark task -------------------------------------------------------------------------------


def _arrow_type(kind: str) -> Any:
    import pyarrow as pa

    return {"string": pa.string(), "long": pa.int64(), "double": pa.float64(), "boolean": pa.bool_()}[kind]


def record_schema() -> Any:
    import pyarrow as pa

    return pa.schema([(name, _arrow_type(kind)) for name, kind in RECORD_COLUMNS.items()])


def _batches(table: str, columns: Mapping[str, list[Any]], schema: Any) -> Iterator[Any]:
    """Record batches of at most :data:`BATCH_ROWS` rows: ``columns`` filled in, the rest null."""
    import pyarrow as pa

    rows = len(next(iter(columns.values()))) if columns else 0
    for start in range(0, rows, BATCH_ROWS):
        stop = min(rows, start + BATCH_ROWS)
        n = stop - start
        arrays = []
        for field_ in schema:
            if field_.name == "table":
                arrays.append(pa.array([table] * n, pa.string()))
            elif field_.name in columns:
                arrays.append(pa.array(columns[field_.name][start:stop], field_.type))
            else:
                arrays.append(pa.nulls(n, field_.type))
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def records_of(records: RunRecords, schema: Any) -> Iterator[Any]:
    """One run's rows as record batches: its run row, operations, journal events, run-level verdicts."""
    run_row = dict(records.run)
    run_row[PENDING] = ",".join(records.checks.pending)
    yield from _batches("runs", {k: [v] for k, v in run_row.items()}, schema)
    yield from _batches("operations", records.operations, schema)
    yield from _batches("journal", records.journal, schema)
    verdicts: dict[str, list[Any]] = {column: [] for column in VERDICTS if column != "analyzed_at"}
    for _name, row in records.checks.rows(records.run["test"], records.run["run"]):
        for column, values in verdicts.items():
            values.append(row[column])
    yield from _batches("verdicts", verdicts, schema)


def ingest_task(timeout_s: float | None = None, max_states: int | None = None):  # noqa: ANN201 - a Spark UDF
    """The ``mapInArrow`` function: run-description batches (:data:`RUN_INPUT`) -> record batches."""

    def task(batches: Iterator[Any]) -> Iterator[Any]:
        schema = record_schema()
        for batch in batches:
            for item in batch.to_pylist():
                path, test, run = Path(item["path"]), item["test"], item["run"]
                try:
                    records = read_run(
                        path,
                        test,
                        run,
                        suite=item.get("suite"),
                        night=item.get("night"),
                        timeout_s=timeout_s,
                        max_states=max_states,
                    )
                except Exception as exc:  # noqa: BLE001 - one run the analysis cannot handle stays one run
                    records = crashed_run(
                        path, test, run, exc, suite=item.get("suite"), night=item.get("night")
                    )
                yield from records_of(records, schema)

    return task
