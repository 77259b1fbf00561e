"""A stored run read for people: ``test.json``, ``results.json``, ``history.jsonl`` and the node journals
turned into the plain data the report draws (:func:`load_run`).

Reading is lenient where the checkers are strict: a report is most needed for a run that went wrong, so
a truncated or malformed history line, a completion without its invoke, or an unreadable journal is
listed in :attr:`RunData.problems` (file, line, reason) and the rest is still shown. The verdict itself
always comes from ``results.json``; nothing here judges a run.

Times are the history's: nanoseconds since the test started on the controller's monotonic clock
(FORMATS.md). Journal events carry the node's own wall clock instead (``wall``, possibly skewed by the
nemesis); :mod:`harness.report.clocks` places them on the history's axis.

Only what the report draws is kept from the journals: ``role``, ``start`` and ``stop`` events. ``apply``
lines (most of a journal) are skipped before JSON decoding, which keeps 100,000-operation runs fast.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.store import HARNESS_LOG, HISTORY, JOURNAL, NODES, RESULTS, SCHEDULE, TEST_JSON

NEMESIS = "nemesis"
STATUS = "status"
JOURNAL_EVENTS = ("role", "start", "stop")
_EVENT_TYPES = frozenset(("invoke", "ok", "fail", "info"))
MAX_PROBLEMS_PER_FILE = 5


@dataclass(slots=True)
class ClientOp:
    """A client operation: its invoke and its completion.

    ``id`` numbers the client operations (status polls included) in invoke order, as
    ``checkers.history`` does, so a counterexample's operation ids find their operations here.
    ``type`` is ``ok``, ``fail``, ``info``, or ``pending`` when the history ended before it completed.
    ``ret`` is the completion's time for ``ok``, ``fail`` and ``info`` alike (for ``info`` it is when the
    client gave up, not when the operation took effect: it may take effect later, or never).
    """

    id: int
    process: int | str
    f: str
    key: Any
    value: Any
    output: Any
    type: str
    call: int
    ret: int | None
    node: str | None
    lsn: Any
    error: str | None
    invoke_line: int
    complete_line: int | None


@dataclass(slots=True)
class NemesisOp:
    """A nemesis operation: the fault asked for (``value``) and what was applied (``result``).

    ``applied`` is False when the completion is ``info``/``fail`` or carries an ``error`` (the fault could
    not be applied, or only partly: ``result`` then says where it was).
    """

    f: str
    value: Any
    result: Any
    type: str
    call: int
    ret: int | None
    error: str | None
    invoke_line: int
    complete_line: int | None

    @property
    def applied(self) -> bool:
        return self.type == "ok" and not self.error


@dataclass(frozen=True, slots=True)
class JournalMark:
    """A ``role``, ``start`` or ``stop`` event of one node's journal, on that node's own clock. ``group``:
    the shard, partition or queue a ``role`` event speaks for (``None``: the cluster-level group)."""

    node: str
    seq: int
    wall: float
    event: str
    role: str | None
    term: int | None
    leader: str | None
    line: int
    group: str | None = None


@dataclass
class RunData:
    """Everything the report shows about one stored run, read from its directory."""

    path: Path
    test: dict[str, Any]
    results: dict[str, Any] | None
    ops: list[ClientOp]
    status: list[ClientOp]
    nemesis: list[NemesisOp]
    journals: dict[str, list[JournalMark]]
    node_files: dict[str, list[str]]
    files: list[str]
    problems: list[str] = field(default_factory=list)
    history_events: int = 0
    end_ns: int = 0

    @property
    def nodes(self) -> list[str]:
        """The run's nodes: from ``test.json``, else from the journals and the history."""
        named = self.test.get("nodes")
        if isinstance(named, list) and named and all(isinstance(n, str) for n in named):
            return list(named)
        found = set(self.journals) | set(self.node_files)
        found.update(op.node for op in self.status if isinstance(op.node, str))
        return sorted(found)

    @property
    def valid(self) -> Any:
        """``True``, ``False``, ``"unknown"``, or ``None`` when the run has not been analysed."""
        if self.results is None:
            return None
        return self.results.get("valid")


def _read_json_object(path: Path, problems: list[str]) -> dict[str, Any] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path.name}: cannot be read: {exc}")
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(f"{path.name}:{exc.lineno}: bad JSON: {exc.msg}")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path.name}: expected a JSON object, found {type(data).__name__}")
        return None
    return data


class _Problems:
    """Problems of one file: the first few in full, then a count."""

    def __init__(self, name: str, problems: list[str]) -> None:
        self.name = name
        self.problems = problems
        self.count = 0

    def add(self, line: int | None, reason: str) -> None:
        self.count += 1
        if self.count <= MAX_PROBLEMS_PER_FILE:
            where = f"{self.name}:{line}" if line is not None else self.name
            self.problems.append(f"{where}: {reason}")

    def close(self) -> None:
        if self.count > MAX_PROBLEMS_PER_FILE:
            self.problems.append(f"{self.name}: {self.count - MAX_PROBLEMS_PER_FILE} more problems like these")


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def read_history(
    lines: Iterable[str], problems: list[str], name: str = HISTORY
) -> tuple[list[ClientOp], list[ClientOp], list[NemesisOp], int, int]:
    """Pair a history's invokes and completions leniently: (client ops, status ops, nemesis ops, events,
    last time). Lines that cannot be used are reported in ``problems`` and skipped."""
    report = _Problems(name, problems)
    # Each invoke becomes [invoke event, its line, completion event or None, the completion's line].
    outstanding: dict[Any, list[Any]] = {}
    order: list[list[Any]] = []
    events = 0
    end = 0
    loads = json.loads
    for number, text in enumerate(lines, start=1):
        try:
            event = loads(text)
        except json.JSONDecodeError as exc:
            if text.strip():
                report.add(number, f"bad JSON ({exc.msg}); the line is not shown")
            continue
        if event.__class__ is not dict:
            report.add(number, "not a JSON object; the line is not shown")
            continue
        kind, process, when = event.get("type"), event.get("process"), event.get("time")
        if when.__class__ is not int or kind not in _EVENT_TYPES:
            report.add(number, "no integer time or no type invoke/ok/fail/info; the line is not shown")
            continue
        if process.__class__ is not int and process.__class__ is not str:
            report.add(number, f"process must be an integer or 'nemesis', not {process!r}")
            continue
        events += 1
        if when > end:
            end = when
        if kind == "invoke":
            if process in outstanding:
                report.add(number, f"process {process!r} invokes while an operation is outstanding")
            entry = [event, number, None, None]
            outstanding[process] = entry
            order.append(entry)
        else:
            entry = outstanding.pop(process, None)
            if entry is None:
                report.add(number, f"{kind} completion of process {process!r} without an invoke")
                continue
            entry[2], entry[3] = event, number
    report.close()

    client: list[ClientOp] = []
    status: list[ClientOp] = []
    nemesis: list[NemesisOp] = []
    ids = 0
    for invoke, line, completion, complete_line in order:
        kind = completion["type"] if completion is not None else "pending"
        ret = completion["time"] if completion is not None else None
        error = _text(completion.get("error")) if completion is not None else None
        if invoke["process"] == NEMESIS:
            nemesis.append(
                NemesisOp(
                    f=str(invoke.get("f")),
                    value=invoke.get("value"),
                    result=completion.get("value") if completion is not None else None,
                    type=kind,
                    call=invoke["time"],
                    ret=ret,
                    error=error if completion is not None else "no completion: the history ended first",
                    invoke_line=line,
                    complete_line=complete_line,
                )
            )
            continue
        value = invoke.get("value")
        output = None
        if completion is not None:
            if kind == "ok":
                output = completion.get("value")
            if value is None and invoke.get("f") != "read" and kind == "ok":
                value = completion.get("value")
        node = (completion or {}).get("node") or invoke.get("node")
        op = ClientOp(
            id=ids,
            process=invoke["process"],
            f=str(invoke.get("f")),
            key=invoke.get("key"),
            value=value,
            output=output,
            type=kind,
            call=invoke["time"],
            ret=ret,
            node=node if isinstance(node, str) else None,
            lsn=(completion or {}).get("lsn"),
            error=error,
            invoke_line=line,
            complete_line=complete_line,
        )
        ids += 1
        (status if op.f == STATUS else client).append(op)
    return client, status, nemesis, events, end


def _wanted(line: str) -> bool:
    """Whether a journal line may be a role, start or stop event (cheap: no JSON decoding)."""
    return '"role"' in line or '"start"' in line or '"stop"' in line


def read_journal(lines: Iterable[str], node_dir: str, problems: list[str]) -> list[JournalMark]:
    """The role, start and stop events of one node's journal; bad lines are reported and skipped."""
    name = f"{NODES}/{node_dir}/{JOURNAL}"
    report = _Problems(name, problems)
    marks: list[JournalMark] = []
    for number, text in enumerate(lines, start=1):
        if not _wanted(text):
            continue
        try:
            event = json.loads(text)
        except json.JSONDecodeError as exc:
            report.add(number, f"bad JSON ({exc.msg})")
            continue
        if not isinstance(event, dict) or event.get("event") not in JOURNAL_EVENTS:
            continue
        wall, seq = event.get("wall"), event.get("seq")
        if not isinstance(wall, int | float) or isinstance(wall, bool):
            report.add(number, f"wall must be a number, not {wall!r}")
            continue
        term = event.get("term")
        marks.append(
            JournalMark(
                node=str(event.get("node") or node_dir),
                seq=seq if isinstance(seq, int) else -1,
                wall=float(wall),
                event=event["event"],
                role=event.get("role") if isinstance(event.get("role"), str) else None,
                term=term if isinstance(term, int) and not isinstance(term, bool) else None,
                leader=event.get("leader") if isinstance(event.get("leader"), str) else None,
                line=number,
                group=event.get("group") if isinstance(event.get("group"), str) else None,
            )
        )
    report.close()
    return marks


def _lines(path: Path, problems: list[str], name: str) -> list[str] | None:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            return handle.read().splitlines()
    except FileNotFoundError:
        return None
    except OSError as exc:
        problems.append(f"{name}: cannot be read: {exc}")
        return None


def load_run(path: str | os.PathLike[str]) -> RunData:
    """Read the stored run at ``path`` (a run directory) for the report. Raises ``FileNotFoundError``
    when ``path`` holds no ``test.json``: it is then not a stored run."""
    run = Path(path)
    if not (run / TEST_JSON).is_file():
        raise FileNotFoundError(
            f"{run} is not a stored run (no {TEST_JSON}); give a run directory such as store/latest"
        )
    problems: list[str] = []
    test = _read_json_object(run / TEST_JSON, problems) or {}
    results = _read_json_object(run / RESULTS, problems)
    for error in (results or {}).get("input_errors") or []:
        if isinstance(error, Mapping):
            where = error.get("file", "?") + (f":{error['line']}" if error.get("line") is not None else "")
            problems.append(f"{where}: {error.get('reason', 'could not be read')} (found by the analysis)")

    lines = _lines(run / HISTORY, problems, HISTORY)
    if lines is None:
        problems.append(f"{HISTORY}: missing; the run stopped before its first operation")
        client, status, nemesis, events, end = [], [], [], 0, 0
    else:
        client, status, nemesis, events, end = read_history(lines, problems)

    journals: dict[str, list[JournalMark]] = {}
    node_files: dict[str, list[str]] = {}
    nodes_dir = run / NODES
    if nodes_dir.is_dir():
        for directory in sorted(p for p in nodes_dir.iterdir() if p.is_dir()):
            files = sorted(p.name for p in directory.iterdir() if p.is_file())
            node_files[directory.name] = files
            if JOURNAL in files:
                journal_lines = _lines(directory / JOURNAL, problems, f"{NODES}/{directory.name}/{JOURNAL}")
                marks = read_journal(journal_lines or [], directory.name, problems)
                journals[marks[0].node if marks else directory.name] = marks

    files = [
        name for name in (TEST_JSON, SCHEDULE, HISTORY, RESULTS, HARNESS_LOG) if (run / name).is_file()
    ]
    return RunData(
        path=run,
        test=test,
        results=results,
        ops=client,
        status=status,
        nemesis=nemesis,
        journals=journals,
        node_files=node_files,
        files=files,
        problems=problems,
        history_events=events,
        end_ns=end,
    )
