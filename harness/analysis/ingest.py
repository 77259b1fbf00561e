"""Ingestion: one stored run's files into verdicts and dataset files, inside a Spark task.

The files reach the task as Spark's own reader (``binaryFile``) gives them, ``path`` and ``content`` rows:
from that reader for a store elsewhere (HDFS, object storage), read by the task's Python for a local one
(``harness.analysis.pipeline.reading_files``); each run's files whole in one partition;
:func:`ingest_task` is the ``mapInArrow`` function over such a partition (one run, or a pack of small
ones). :func:`read_run_files` is plain Python: it reads
``test.json``, validates ``history.jsonl`` and every ``nodes/<node>/journal.jsonl`` with
:mod:`checkers.history`, runs the run-level checkers (:func:`harness.analysis.checks.run_level_checks`)
and, for runs small enough, linearizability key by key, on what it parsed. Parsing once and checking in
the same task matters: the durability checker reads raw history events, which no table keeps, and a
1,000,000-operation history takes seconds to parse.

A big run (a history of :data:`SPLIT_FROM_BYTES` or more) whose checkers may include linearizability
(:func:`splits`) is read by two tasks that can run on two cores at once: one as above but for
linearizability, which :func:`linearizability_task_of` checks (with the ``operations`` table) from the
history alone. A big run that ``test.json`` says is not checked for linearizability is one task: a second
would parse its history again for nothing but the ``operations`` table. Parsing the history twice costs less than waiting for
one core to do everything: in a run of a million operations, parsing the history is about a quarter of
the work, the journals another quarter, and linearizability with the operations table about as much as
the other checkers with the journal table.

What a task returns is few rows of one narrow schema (:data:`OUTPUT_COLUMNS`), ``kind`` saying what each
is:

* ``run``: the run's row of the ``runs`` table, as JSON (with the checkers left to the other task);
* ``verdict``: one checker's verdict, as JSON;
* ``table``: the run's part of the ``operations`` or ``journal`` table, as one Parquet file (``payload``)
  that the driver writes into the dataset: the rows never cross into the JVM one by one. A task given the
  store's directory (``dataset_store``: a store on this machine's filesystem, or mounted at the same path on
  every worker) writes the file into its partition itself, as Spark's own writers do, and returns no such
  row: the files then cross neither the JVM nor the driver, and are written while the other tasks check;
* ``phases``: the CPU seconds the task spent on the run, by phase (:data:`PHASES`), as JSON: where an
  analysis spends its time, which Spark's own metrics cannot tell (they see the JVM, not Python).

Malformed input never fails the task: a history or journal that does not parse becomes an *input
error* (file relative to the run directory, 1-based line, reason), the run's verdict becomes unknown,
and the batch goes on.
"""

from __future__ import annotations

import json
import math
import re
import time
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from checkers.history import (
    TYPE_OF_CODE,
    History,
    HistoryError,
    JournalEvent,
    Operation,
    OperationTable,
    no_cyclic_gc,
    parse_journal,
    parse_operations,
)
from checkers.leader import STATUS
from checkers.verdict import UNKNOWN, Verdict
from harness.analysis.checks import (
    LINEARIZABLE,
    RunChecks,
    RunParams,
    check_key,
    merge_linearizability,
    run_checkers,
    run_level_checks,
    run_params,
)
from harness.analysis.dataset import (
    JOURNAL,
    OPERATIONS,
    PARTITION_COLUMNS,
    arrow_schema,
    arrow_table,
    parquet_bytes,
    write_partition,
)
from harness.analysis.storage import LocalStorage
from harness.lifecycle import blame_the_stop, final_after_for, stop_of
from harness.opportunities import count_run
from harness.store import HISTORY, NODES, TEST_JSON
from harness.store import JOURNAL as JOURNAL_FILE

# The rows a task returns (module docstring): what each is, whose it is, and its content.
OUTPUT_COLUMNS: dict[str, str] = {
    "kind": "string",
    "test": "string",
    "run": "string",
    "name": "string",  # checker (verdict), table (table)
    "text": "string",  # JSON (run, verdict)
    "payload": "binary",  # Parquet (table)
}
RUN, VERDICT, TABLE, PHASES_ROW = "run", "verdict", "table", "phases"
# What a task's CPU time is spent on: reading and validating the files, the run-level checkers,
# linearizability, the run's statistics, and the operations and journal tables (columns and Parquet, and
# writing the files when the task writes them).
PHASES = ("parse_s", "run_level_s", "linearizability_s", "stats_s", "tables_s")
# A history of at least this many bytes (about 40,000 operations) is checked for linearizability, and
# its operations table made, by a task of its own (module docstring).
SPLIT_FROM_BYTES = 8 << 20
# The files of a run the tasks read, relative to the run directory (group 2), and the directory (group 1).
RUN_FILE = re.compile(r"^(.*)/(test\.json|history\.jsonl|nodes/[^/]+/journal\.jsonl)$")


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
    """What one run contributes: its ``runs`` row (``None`` from the linearizability task of a big run),
    its rows of the ``operations`` and ``journal`` tables (Arrow tables of the files' schema, without the
    partition columns; ``None``: none), and its verdicts."""

    run: dict[str, Any] | None
    operations: pa.Table | None
    journal: pa.Table | None
    checks: RunChecks
    input_errors: list[InputError] = field(default_factory=list)
    phases: _Phases = field(default_factory=lambda: _Phases())


class _Phases:
    """CPU seconds of this process by phase (:data:`PHASES`): each :meth:`lap` charges the time since the
    previous one to its phase."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.process_time()

    def lap(self, phase: str) -> None:
        now = time.process_time()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self._last
        self._last = now


# The dataset's JSON text: compact, keys sorted, UTF-8 unescaped, anything JSON cannot hold as its repr.
# msgspec's encoder, one for every value: a tenth of the standard library's time per journal event, which
# made encoding a large part of ingesting a run.
_ENCODE = msgspec.json.Encoder(order="sorted", enc_hook=repr).encode


def _json(value: Any) -> str | None:
    if value is None:
        return None
    if type(value) is int:  # the common case (register values, LSN parts): no encoder needed
        return str(value)
    return _ENCODE(value).decode()


def key_text(key: Any) -> str | None:
    """The readable form of a key: itself if it is a string, else its JSON."""
    if key is None:
        return None
    return key if isinstance(key, str) else _json(key)


class _KeyCache(dict):
    """Key -> (readable text, JSON): a run has few keys and many operations on each."""

    def of(self, key: Any) -> tuple[str | None, str | None]:
        hashable = (
            (type(key), key) if type(key) in (str, int) or key is None else (list, _ENCODE(key))
        )
        found = self.get(hashable)
        if found is None:
            found = self[hashable] = (key_text(key), _json(key))
        return found


def _lines(content: bytes, source: str) -> list[str]:
    """A JSON-lines file's lines (FORMATS.md: UTF-8, one object per line, a final newline optional)."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HistoryError(source, None, f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _input_error(exc: HistoryError) -> InputError:
    return InputError(file=exc.source, line=exc.line, reason=exc.reason)


def splits(spec: Mapping[str, Any]) -> bool:
    """Whether a big run of this ``test.json`` is read by two tasks (module docstring): unless the checkers
    it names (or its workload declares) leave linearizability out, or it declares linearizability not
    applicable. What the history holds cannot be known before it is parsed, so a run that names no
    checkers splits. The first task and whoever schedules the second (``harness.analysis.pipeline``,
    ``harness.analysis.inprocess``) both ask this of the same file."""
    params = run_params(spec, None)
    return LINEARIZABLE in run_checkers(params) and LINEARIZABLE not in params.not_applicable


def read_spec(content: bytes | None) -> tuple[dict[str, Any], InputError | None]:
    if content is None:
        return {}, InputError(TEST_JSON, None, "no such file")
    try:
        spec = json.loads(content.decode("utf-8"))
    except json.JSONDecodeError as exc:
        return {}, InputError(TEST_JSON, exc.lineno, f"bad JSON: {exc.msg}")
    except UnicodeDecodeError as exc:
        return {}, InputError(TEST_JSON, None, f"not UTF-8: {exc.reason} at byte {exc.start}")
    if not isinstance(spec, dict):
        return {}, InputError(TEST_JSON, 1, f"expected a JSON object, got {type(spec).__name__}")
    if not isinstance(spec.get("spec", {}), dict):
        return {}, InputError(TEST_JSON, None, f"its spec is not a JSON object but {type(spec['spec']).__name__}")
    return spec, None


def read_journals(files: Mapping[str, bytes]) -> tuple[dict[str, list[JournalEvent]], list[InputError]]:
    """Every readable ``nodes/<node>/journal.jsonl`` of ``files``, and an input error for each that is not."""
    journals: dict[str, list[JournalEvent]] = {}
    errors: list[InputError] = []
    for name in sorted(files):
        parts = name.split("/")
        if len(parts) != 3 or parts[0] != NODES or parts[2] != JOURNAL_FILE:
            continue
        try:
            events = parse_journal(_lines(files[name], name), name)
        except HistoryError as exc:
            errors.append(_input_error(exc))
            continue
        node = events[0].node if events else parts[1]
        if node in journals:
            errors.append(InputError(name, None, f"a second journal for node {node!r}"))
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
    latencies = sorted(op.ret - op.call for op in workload if op.type == "ok" and op.ret is not None)
    duration_ns = history.span[1] - history.span[0] if history.span is not None else 0
    duration_s = duration_ns / 1e9
    p50, p99 = _percentile(latencies, 0.50), _percentile(latencies, 0.99)
    return {
        "ops": len(workload),
        "ok_ops": len(latencies),
        "nemesis_ops": len(history.nemesis),
        "duration_s": round(duration_s, 6),
        "ops_per_s": round(len(latencies) / duration_s, 3) if duration_s > 0 else None,
        "latency_p50_ms": None if p50 is None else p50 / 1e6,
        "latency_p99_ms": None if p99 is None else p99 / 1e6,
    }


def _operation_columns(ops: Iterable[Operation], out: dict[str, list[Any]]) -> None:
    """Append ``ops`` to the ``operations`` columns of ``out`` (the partition columns are not stored in
    the files: they are the directory names)."""
    keys = _KeyCache()
    columns = (
        out["id"], out["process"], out["f"], out["key"], out["key_json"], out["value_json"],
        out["output_json"], out["type"], out["call_ns"], out["ret_ns"], out["latency_ns"],
        out["invoke_index"], out["complete_index"], out["node"], out["lsn_term"], out["lsn_seq"], out["error"],
    )  # fmt: skip
    appends = tuple(column.append for column in columns)
    (id_, process, f, key, key_json, value, output, kind, call, ret, latency, invoke, complete, node,
     lsn_term, lsn_seq, error) = appends  # fmt: skip
    for op in ops:
        text, encoded = keys.of(op.key)
        id_(op.id)
        process(str(op.process))
        f(op.f)
        key(text)
        key_json(encoded)
        value(_json(op.value))
        output(_json(op.output))
        kind(op.type)
        call(op.call)
        ret(op.ret)
        latency(None if op.ret is None else op.ret - op.call)
        invoke(op.invoke_index)
        complete(op.complete_index)
        node(op.node)
        lsn = op.lsn
        lsn_term(lsn[0] if lsn else None)
        lsn_seq(lsn[1] if lsn else None)
        error(op.error)


def _json_column(values: list[Any], mask: Any = None) -> pa.Array:
    """``_json`` of each value (``None`` where ``mask`` is true) as a string array: for a column of
    integers (a register's values) Arrow writes the decimal text itself, which is that JSON."""
    try:
        numbers = pa.array(values, mask=mask)
    except (pa.ArrowException, OverflowError, TypeError):
        numbers = None
    if numbers is not None and numbers.type in (pa.int64(), pa.null()):
        return numbers.cast(pa.string())
    if mask is None:
        return pa.array([_json(value) for value in values], pa.string())
    return pa.array([None if hidden else _json(value) for value, hidden in zip(values, mask, strict=True)],
                    pa.string())  # fmt: skip


def _key_columns(keys: list[Any]) -> tuple[pa.Array, pa.Array]:
    """The ``key`` and ``key_json`` columns: each distinct key's texts made once."""
    try:
        encoded = pa.array(keys, pa.string()).dictionary_encode()
    except (pa.ArrowException, TypeError):  # keys that are not all strings
        cache = _KeyCache()
        pairs = [cache.of(key) for key in keys]
        return pa.array([text for text, _ in pairs], pa.string()), pa.array([j for _, j in pairs], pa.string())
    indices, distinct = encoded.indices, encoded.dictionary
    return (distinct.take(indices),
            pa.array([_json(key) for key in distinct.to_pylist()], pa.string()).take(indices))  # fmt: skip


def operations_table(table: OperationTable | None, history: History | None) -> pa.Table:
    """The run's ``operations`` rows: its client operations, then its nemesis operations, each as its
    :class:`Operation` says (:func:`_operation_columns`). The client operations' columns come from the
    table's own columns (arrays of times and indexes, no object per operation), in less than half the CPU
    (a test holds the two equal)."""
    schema = arrow_schema("operations")
    if history is None:
        return schema.empty_table()
    nemesis = _empty(OPERATIONS)
    _operation_columns(history.nemesis, nemesis)
    if table is None or not isinstance(table.call, array) or not isinstance(table.ret, array):
        # (a time past 2^63 ns made the time columns lists: the objects say what there is to say)
        columns = _empty(OPERATIONS)
        _operation_columns(history.ops, columns)
        for name, values in nemesis.items():
            columns[name].extend(values)
        return arrow_table("operations", columns)
    count = len(table)
    codes = np.frombuffer(table.type, dtype=np.uint8)
    invoke = np.frombuffer(table.invoke_index, dtype=np.int64)
    complete = np.frombuffer(table.complete_index, dtype=np.int64)
    if table.ordered:
        call, ret = np.frombuffer(table.call, dtype=np.int64), np.frombuffer(table.ret, dtype=np.int64)
    else:  # times went backwards: an operation's times are its lines' indexes (checkers.history)
        call, ret = invoke, complete
    no_ret = (codes != 1) & (codes != 2)  # only ok and fail have a return (TYPE_OF_CODE)
    node: list[Any] = [None] * count
    lsn_term: list[Any] = [None] * count
    lsn_seq: list[Any] = [None] * count
    error: list[Any] = [None] * count
    for i, op_node, lsn, op_error in table.sparse_fields():
        node[i], error[i] = op_node, op_error
        if lsn:
            lsn_term[i], lsn_seq[i] = lsn
    key, key_json = _key_columns(table.key)
    try:
        process = pa.array(table.process, pa.int64()).cast(pa.string())
    except (pa.ArrowException, OverflowError, TypeError):
        process = pa.array([str(p) for p in table.process], pa.string())
    client = {
        "id": pa.array(np.arange(count, dtype=np.int64)),
        "process": process,
        "f": pa.array(table.f, pa.string()),
        "key": key,
        "key_json": key_json,
        "value_json": _json_column(table.value),
        "output_json": _json_column(table.output, codes != 1),
        "type": pa.array(TYPE_OF_CODE, pa.string()).take(pa.array(codes)),
        "call_ns": pa.array(call),
        "ret_ns": pa.array(ret, mask=no_ret),
        "latency_ns": pa.array(ret - call, mask=no_ret),
        "invoke_index": pa.array(invoke),
        "complete_index": pa.array(complete, mask=codes == 0),
        "node": pa.array(node, pa.string()),
        "lsn_term": pa.array(lsn_term, pa.int64()),
        "lsn_seq": pa.array(lsn_seq, pa.int64()),
        "error": pa.array(error, pa.string()),
    }
    return pa.Table.from_arrays(
        [pa.concat_arrays([client[f.name], pa.array(nemesis[f.name], f.type)]) for f in schema], schema=schema
    )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _long(value: Any) -> int | None:
    """An integer that fits a Parquet long, else ``None`` (the seed stays in ``spec_json`` regardless)."""
    number = _int_or_none(value)
    return number if number is not None and -(2**63) <= number < 2**63 else None


def _journal_columns(journals: Mapping[str, list[JournalEvent]], out: dict[str, list[Any]]) -> None:
    """Append every journal event to the ``journal`` columns of ``out`` (partition columns aside)."""
    appends = tuple(
        out[name].append
        for name in ("node", "seq", "wall", "event", "role", "term", "leader", "lsn_term", "lsn_seq", "key",
                     "data_json", "line")
    )  # fmt: skip
    node_, seq, wall, event_, role_, term_, leader_, lsn_term, lsn_seq, key_, data_json, line = appends
    encode = _ENCODE
    for node, events in journals.items():
        for event in events:
            data = event.data
            node_(node)
            seq(event.seq)
            wall(event.wall)
            event_(event.event)
            if data:
                role = data.get("role")
                term = data.get("term")
                leader = data.get("leader")
                lsn = data.get("lsn")
                key = data.get("key")
                role_(role if isinstance(role, str) else None)
                term_(term if type(term) is int else None)
                leader_(leader if isinstance(leader, str) else None)
                lsn_term(lsn[0] if lsn else None)
                lsn_seq(lsn[1] if lsn else None)
                key_(key if key is None or isinstance(key, str) else _json(key))
                data_json(encode(data).decode())
            else:
                for append in (role_, term_, leader_, lsn_term, lsn_seq, key_):
                    append(None)
                data_json("{}")
            line(event.line)


def journal_table(journals: Mapping[str, list[JournalEvent]]) -> pa.Table:
    """The run's ``journal`` rows: every event of every node's journal."""
    columns = _empty(JOURNAL)
    _journal_columns(journals, columns)
    return arrow_table("journal", columns)


def _empty(columns: Mapping[str, str]) -> dict[str, list[Any]]:
    return {name: [] for name in columns if name not in PARTITION_COLUMNS}


def read_run_files(
    files: Mapping[str, bytes],
    test: str,
    run: str,
    *,
    path: str,
    suite: str | None = None,
    night: str | None = None,
    target: float | None = None,
    timeout_s: float | None = None,
    max_states: int | None = None,
    tables: bool = True,
    split_from_bytes: int = SPLIT_FROM_BYTES,
) -> RunRecords:
    """Read, validate and check one run from its files (name relative to the run directory -> bytes).

    ``tables``: also build the run's ``journal`` columns, and its ``operations`` columns unless the
    history is big (``split_from_bytes``) and the run :func:`splits`: then linearizability stays pending
    for :func:`read_run_linearizability`, which makes the operations too. Never raises for bad input.
    """
    phases = _Phases()
    errors: list[InputError] = []
    spec, spec_error = read_spec(files.get(TEST_JSON))
    if spec_error is not None:
        errors.append(spec_error)
    table, history, history_error = _read_history(files)
    if history_error is not None:
        errors.append(history_error)
    journals, journal_errors = read_journals(files)
    errors.extend(journal_errors)

    params: RunParams = run_params(spec, history)
    # A run that stopped before its final phase has no final reads (harness.lifecycle).
    stop = stop_of(spec, files.get(HISTORY, b""))
    if stop is not None and params.final_after is None:
        params = replace(params, final_after=final_after_for(stop))
    phases.lap("parse_s")
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
    phases.lap("run_level_s")
    big = len(files.get(HISTORY, b"")) >= split_from_bytes and splits(spec)
    operations = None
    if history is not None and LINEARIZABLE in checks.pending and not big:
        checks.pending.remove(LINEARIZABLE)
        checks.verdicts[LINEARIZABLE] = check_keys(
            test, run, history, params.model or "register", timeout_s=timeout_s, max_states=max_states
        )
    phases.lap("linearizability_s")
    journal = None
    if tables:
        if history is not None and not big:
            operations = operations_table(table, history)
        journal = journal_table(journals)
    phases.lap("tables_s")
    seed = spec.get("seed")
    row: dict[str, Any] = {
        "test": test,
        "run": run,
        "path": path,
        "suite": suite,
        "night": night,
        "target": target,
        "seed": _long(seed),
        "mode": params.mode,
        "workload": params.workload,
        "nemesis": params.nemesis,
        "bugs": params.bugs,
        "model": params.model,
        "input_errors_json": _json([e.to_json() for e in errors]) if errors else None,
        "spec_json": _json(spec) if spec else None,
        # not columns of the dataset: what results.json says about a run that stopped short, and about
        # the checkers that cannot judge this system
        "interrupted": None if stop is None else stop.to_json(),
        "not_applicable": checks.not_applicable,
        # and how often the run gave its known bug a chance, from the DB plugin's counter (harness.opportunities)
        "opportunities": count_run(spec, journals),
        **run_stats(history),
    }
    phases.lap("stats_s")
    return RunRecords(
        run=row, operations=operations, journal=journal, checks=checks, input_errors=errors, phases=phases
    )


def read_run_linearizability(
    files: Mapping[str, bytes],
    test: str,
    run: str,
    *,
    timeout_s: float | None = None,
    max_states: int | None = None,
    tables: bool = True,
) -> RunRecords:
    """The other half of a big run: linearizability (when the run's checkers include it) and the
    ``operations`` columns, from ``test.json`` and the history alone; nothing for a run that does not
    :func:`splits` (the first task made its operations). An unreadable history yields nothing here:
    :func:`read_run_files` reports it."""
    phases = _Phases()
    spec, _ = read_spec(files.get(TEST_JSON))
    checks = RunChecks()
    operations = None
    if not splits(spec):  # the first task checks it and makes its operations (module docstring)
        return RunRecords(run=None, operations=None, journal=None, checks=checks)
    table, history, _ = _read_history(files)
    phases.lap("parse_s")
    if history is not None:
        params = run_params(spec, history)
        wanted = params.checkers is None or LINEARIZABLE in params.checkers
        wanted = wanted and LINEARIZABLE not in params.not_applicable
        if wanted and params.model is not None:
            checks.verdicts[LINEARIZABLE] = check_keys(
                test, run, history, params.model, timeout_s=timeout_s, max_states=max_states
            )
        phases.lap("linearizability_s")
        if tables:
            operations = operations_table(table, history)
        phases.lap("tables_s")
    return RunRecords(run=None, operations=operations, journal=None, checks=checks, phases=phases)


def _read_history(
    files: Mapping[str, bytes],
) -> tuple[OperationTable | None, History | None, InputError | None]:
    """The history's operations, as the columns of a table and as objects (what the checkers take)."""
    try:
        if HISTORY not in files:
            raise HistoryError(HISTORY, None, "no such file")
        # Operations only: no event objects (what kept each line's decoded object alive, the most memory
        # a big run's task held); the statistics take the history's time span instead.
        table = parse_operations(_lines(files[HISTORY], HISTORY), HISTORY)
        with no_cyclic_gc():
            return table, table.history(), None
    except HistoryError as exc:
        return None, None, _input_error(exc)


def _client_ops_by_key(history: History) -> list[list[Operation]]:
    """The workload's operations grouped by key, in invoke order (status polls describe the cluster, not
    the object the model specifies)."""
    return [ops for ops in (
        [op for op in group if op.f != STATUS] for group in history.by_key().values()
    ) if ops]  # fmt: skip


def check_keys(
    test: str,
    run: str,
    history: History,
    model: str,
    *,
    timeout_s: float | None = None,
    max_states: int | None = None,
) -> Verdict:
    """Linearizability of a run one key at a time, each with its own budget (P-compositionality), folded
    into one verdict by :func:`~harness.analysis.checks.merge_linearizability`."""
    rows = [
        check_key(test, run, _json(ops[0].key), ops, model, timeout_s=timeout_s, max_states=max_states)
        for ops in _client_ops_by_key(history)
    ]
    return merge_linearizability(model, rows)


def read_run(
    path: Path,
    test: str,
    run: str,
    *,
    suite: str | None = None,
    night: str | None = None,
    target: float | None = None,
    timeout_s: float | None = None,
    max_states: int | None = None,
) -> RunRecords:
    """:func:`read_run_files` on a local run directory (what a task receives, read from disk)."""
    run_dir = Path(path)
    files: dict[str, bytes] = {}
    for relative in (TEST_JSON, HISTORY, *(f"{NODES}/{p.parent.name}/{JOURNAL_FILE}" for p in
                                           sorted((run_dir / NODES).glob(f"*/{JOURNAL_FILE}")))):
        try:
            files[relative] = (run_dir / relative).read_bytes()
        except FileNotFoundError:
            continue
    return read_run_files(
        files, test, run, path=str(run_dir), suite=suite, night=night, target=target, timeout_s=timeout_s,
        max_states=max_states,
    )  # fmt: skip


def crashed_run(
    path: str, test: str, run: str, exc: Exception, *, suite: str | None = None, night: str | None = None,
    target: float | None = None, spec: bytes | None = None,
) -> RunRecords:
    """The rows of a run whose analysis raised: unknown, with the error, and nothing else. Unknown are the
    checkers that judge the run (``spec``, its ``test.json``: those it names, else its workload's;
    ``harness.analysis.checks.run_checkers``), every registered one when it says neither."""
    reason = f"the analysis crashed on this run: {type(exc).__name__}: {exc}"
    try:
        names = run_checkers(run_params(read_spec(spec)[0], None))
    except Exception:  # noqa: BLE001 - the crash may have been in reading test.json: every checker then
        names = run_checkers(RunParams())
    checks = RunChecks(verdicts={name: Verdict(UNKNOWN, reason) for name in names})
    error = InputError(file=".", line=None, reason=reason)
    row: dict[str, Any] = {
        "test": test,
        "run": run,
        "path": path,
        "suite": suite,
        "night": night,
        "target": target,
        "input_errors_json": _json([error.to_json()]),
        **run_stats(None),
    }
    return RunRecords(run=row, operations=None, journal=None, checks=checks, input_errors=[error])


# --- the Spark task -------------------------------------------------------------------------------


def output_schema() -> pa.Schema:
    kinds = {"string": pa.string(), "binary": pa.binary()}
    return pa.schema([(name, kinds[kind]) for name, kind in OUTPUT_COLUMNS.items()])


def output_rows(
    records: RunRecords, test: str, run: str, dataset_store: str | None = None
) -> Iterator[dict[str, Any]]:
    """One run's output rows (module docstring): its run row, verdicts and table files; with
    ``dataset_store``, the table files written into that store's dataset instead of returned."""
    if records.run is not None:
        run_row = {**records.run, "pending": list(records.checks.pending)}
        yield {"kind": RUN, "test": test, "run": run, "name": None, "text": json.dumps(run_row), "payload": None}
    for name, verdict in records.checks.verdicts.items():
        text = json.dumps(verdict.to_json(), ensure_ascii=False, default=repr)
        yield {"kind": VERDICT, "test": test, "run": run, "name": name, "text": text, "payload": None}
    for table, rows in (("operations", records.operations), ("journal", records.journal)):
        if rows is not None and rows.num_rows:
            records.phases.lap("stats_s")  # what came before, e.g. encoding the verdicts
            payload = parquet_bytes(table, rows)
            if dataset_store is not None:
                write_partition(LocalStorage(), Path(dataset_store), table, test, run, payload)
            records.phases.lap("tables_s")
            if dataset_store is None:
                yield {"kind": TABLE, "test": test, "run": run, "name": table, "text": None, "payload": payload}
    seconds = json.dumps({phase: round(value, 6) for phase, value in records.phases.seconds.items()})
    yield {"kind": PHASES_ROW, "test": test, "run": run, "name": None, "text": seconds, "payload": None}


FILE_COLUMNS = ("path", "content")
"""The columns of the batches a task reads its runs' files from: what Spark's ``binaryFile`` reader gives."""


def files_batch(paths: Sequence[str], contents: Sequence[bytes]) -> pa.RecordBatch:
    """Files (their path or URI, their whole content) as a task reads them: :data:`FILE_COLUMNS`."""
    path, content = FILE_COLUMNS
    return pa.RecordBatch.from_arrays([pa.array(paths, pa.string()), pa.array(contents, pa.binary())],
                                      names=[path, content])  # fmt: skip


def _runs_in(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[str, dict[str, bytes]]]:
    """The runs of a partition of file batches (:data:`FILE_COLUMNS`): each run directory with its files
    (name relative to the run -> content), one run at a time."""
    by_dir: dict[str, dict[str, bytes]] = {}
    path_column, content_column = FILE_COLUMNS
    for batch in batches:
        paths, contents = batch.column(path_column).to_pylist(), batch.column(content_column)
        for index, path in enumerate(paths):
            match = RUN_FILE.match(path)
            if match:
                by_dir.setdefault(match.group(1), {})[match.group(2)] = contents[index].as_py()
    for directory in sorted(by_dir):
        yield directory, by_dir.pop(directory)


def _run_of(directory: str) -> tuple[str, str]:
    """(test, run): the last two components of a run directory."""
    test, run = directory.rstrip("/").split("/")[-2:]
    return test, run


def ingest_task(
    runs: Mapping[tuple[str, str], Mapping[str, Any]],
    timeout_s: float | None = None,
    max_states: int | None = None,
    tables: bool = True,
    split_from_bytes: int = SPLIT_FROM_BYTES,
    dataset_store: str | None = None,
):  # noqa: ANN201 - a Spark UDF
    """The ``mapInArrow`` function over a partition of whole runs' files (``binaryFile`` rows).

    ``runs`` maps (test, run) to the run's ``path`` as the user named it, ``suite`` and ``night``; the
    task knows its run by the last two components of the directory. ``dataset_store``: write the runs'
    table files there (module docstring), whose old partitions the caller has removed.
    """

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        schema = output_schema()
        for directory, files in _runs_in(batches):
            test, run = _run_of(directory)
            known = runs.get((test, run), {})
            path, suite, night = known.get("path", directory), known.get("suite"), known.get("night")
            target = known.get("target")
            with no_cyclic_gc():
                try:
                    records = read_run_files(
                        files, test, run, path=path, suite=suite, night=night, target=target, timeout_s=timeout_s,
                        max_states=max_states, tables=tables, split_from_bytes=split_from_bytes,
                    )  # fmt: skip
                except Exception as exc:  # noqa: BLE001 - one run the analysis cannot handle stays one run
                    records = crashed_run(path, test, run, exc, suite=suite, night=night, target=target,
                                          spec=files.get(TEST_JSON))
                del files
                # One row per batch: several big payloads in one batch could outgrow Arrow's 2 GiB a column.
                out = [pa.RecordBatch.from_pylist([row], schema=schema)
                       for row in output_rows(records, test, run, dataset_store)]
                del records
            yield from out

    return task


def linearizability_task_of(
    timeout_s: float | None = None, max_states: int | None = None, tables: bool = True,
    dataset_store: str | None = None,
):  # noqa: ANN201 - a Spark UDF
    """The ``mapInArrow`` function over big runs' ``test.json`` and history (the second task of a big run,
    module docstring); ``dataset_store`` as for :func:`ingest_task`."""

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        schema = output_schema()
        for directory, files in _runs_in(batches):
            if HISTORY not in files:
                continue
            test, run = _run_of(directory)
            with no_cyclic_gc():
                try:
                    records = read_run_linearizability(
                        files, test, run, timeout_s=timeout_s, max_states=max_states, tables=tables
                    )
                except Exception as exc:  # noqa: BLE001 - the other task reports the run; this says why lin is unknown
                    reason = f"linearizable could not check this run: {type(exc).__name__}: {exc}"
                    records = RunRecords(None, None, None, RunChecks(verdicts={LINEARIZABLE: Verdict(UNKNOWN, reason)}))
                del files
                out = [pa.RecordBatch.from_pylist([row], schema=schema)
                       for row in output_rows(records, test, run, dataset_store)]
                del records
            yield from out

    return task
