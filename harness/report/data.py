"""A stored run read for people: ``test.json``, ``results.json``, ``history.jsonl`` and the node journals
turned into the plain data the report draws (:func:`load_run`).

Reading is lenient where the checkers are strict: a report is most needed for a run that went wrong, so
a truncated or malformed history line, a completion without its invoke, or an unreadable journal is
listed in :attr:`RunData.problems` (file, line, reason) and the rest is still shown. The verdict itself
always comes from ``results.json``; nothing here judges a run.

Times are the history's: nanoseconds since the test started on the controller's monotonic clock
(FORMATS.md). Journal events carry the node's own wall clock instead (``wall``, possibly skewed by the
nemesis); :mod:`harness.report.clocks` places them on the history's axis.

Each file is read once, as bytes, and only into what the report draws. A history line is decoded by
msgspec straight into the fields the report uses (:class:`_Event`), and its operation is made at its
invoke and completed in place (:func:`read_history`); from the journals only ``role``, ``start`` and
``stop`` events are kept, and the lines that may be one are found by searching the bytes, so ``apply``
lines (most of a journal) are never split out or decoded (:func:`journal_candidates`). With the cyclic
garbage collector off meanwhile (``checkers.history.no_cyclic_gc``), the report of a 100,000-operation run costs about
what a bare ``json.loads`` of its history does (``benchmarks/report_bench.py``, docs/reports.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from checkers.history import no_cyclic_gc
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


class _Event(msgspec.Struct, gc=False):
    """One history line as the report reads it: the fields it uses, nothing else (``index`` and any
    other field are skipped by the decoder, never turned into Python objects). Absent and ``null`` are
    the same here, as they were to the report before (it read ``event.get(...)``)."""

    type: Literal["invoke", "ok", "fail", "info"]
    process: int | str
    time: int
    f: Any = None
    key: Any = None
    value: Any = None
    node: Any = None
    lsn: Any = None
    error: Any = None


_EVENT = msgspec.json.Decoder(_Event)


def _lenient(text: str | bytes, number: int, report: _Problems) -> _Event | None:
    """A line the typed decoder refused, read again the lenient way: the event, or None when the line
    cannot be used (the reason is reported, as it always was)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    try:
        event = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        if text.strip():
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            report.add(number, f"bad JSON ({reason}); the line is not shown")
        return None
    if event.__class__ is not dict:
        report.add(number, "not a JSON object; the line is not shown")
        return None
    kind, process, when = event.get("type"), event.get("process"), event.get("time")
    if when.__class__ is not int or kind not in _EVENT_TYPES:
        report.add(number, "no integer time or no type invoke/ok/fail/info; the line is not shown")
        return None
    if process.__class__ is not int and process.__class__ is not str:
        report.add(number, f"process must be an integer or 'nemesis', not {process!r}")
        return None
    get = event.get
    return _Event(kind, process, when, get("f"), get("key"), get("value"), get("node"), get("lsn"), get("error"))


def read_history(
    lines: Iterable[str | bytes], problems: list[str], name: str = HISTORY
) -> tuple[list[ClientOp], list[ClientOp], list[NemesisOp], int, int]:
    """Pair a history's invokes and completions leniently: (client ops, status ops, nemesis ops, events,
    last time). Lines that cannot be used are reported in ``problems`` and skipped.

    Each line is decoded once, by msgspec straight into the few fields the report uses (:class:`_Event`);
    a line it refuses (bad JSON, not an object, a field of the wrong type, invalid UTF-8) is read again
    by ``json.loads`` to say why, or to keep it when only the strict decoder minded (``NaN``, say)."""
    report = _Problems(name, problems)
    # One pass: each invoke becomes its operation at once (ids in invoke order, as checkers.history
    # numbers them), which its completion then fills in.
    outstanding: dict[Any, ClientOp | NemesisOp] = {}
    client: list[ClientOp] = []
    status: list[ClientOp] = []
    nemesis: list[NemesisOp] = []
    events = 0
    end = 0
    ids = 0
    decode = _EVENT.decode
    for number, text in enumerate(lines, start=1):
        try:
            event = decode(text)
        except (msgspec.MsgspecError, UnicodeDecodeError):
            event = _lenient(text, number, report)
            if event is None:
                continue
        process, when, kind = event.process, event.time, event.type
        events += 1
        if when > end:
            end = when
        if kind == "invoke":
            if process in outstanding:
                report.add(number, f"process {process!r} invokes while an operation is outstanding")
            f = event.f
            if process == NEMESIS:
                outstanding[process] = entry = NemesisOp(
                    str(f), event.value, None, "pending", when, None,
                    "no completion: the history ended first", number, None,
                )
                nemesis.append(entry)
                continue
            node = event.node
            op = ClientOp(
                ids, process, f if f.__class__ is str else str(f), event.key, event.value, None, "pending",
                when, None, node if node.__class__ is str else None, None, None, number, None,
            )
            ids += 1
            outstanding[process] = op
            (status if op.f == STATUS else client).append(op)
            continue
        done = outstanding.pop(process, None)
        if done is None:
            report.add(number, f"{kind} completion of process {process!r} without an invoke")
            continue
        error = event.error
        if error is not None and error.__class__ is not str:
            error = _text(error)
        done.type, done.ret, done.error, done.complete_line = kind, when, error, number
        if done.__class__ is NemesisOp:
            done.result = event.value
            continue
        if kind == "ok":
            done.output = event.value
            if done.value is None and done.f != "read":
                done.value = event.value
        if event.node:
            done.node = event.node if event.node.__class__ is str else None
        done.lsn = event.lsn
    report.close()
    return client, status, nemesis, events, end


_JOURNAL_NEEDLES = (b'"role"', b'"start"', b'"stop"')


def _wanted(line: str) -> bool:
    """Whether a journal line may be a role, start or stop event (cheap: no JSON decoding)."""
    return '"role"' in line or '"start"' in line or '"stop"' in line


def journal_candidates(data: bytes) -> list[tuple[int, str]]:
    """(line number, text) of each line of a journal that may be a role, start or stop event, found
    without splitting the journal into lines: its ``apply`` lines (most of it) are never looked at
    one by one. A journal with ``\r`` line ends is split the ordinary way, so lines count as before."""
    if b"\r" in data:
        return [
            (number, line.decode("utf-8", errors="replace"))
            for number, line in enumerate(data.splitlines(), start=1)
            if any(needle in line for needle in _JOURNAL_NEEDLES)
        ]
    starts: set[int] = set()
    size = len(data)
    for needle in _JOURNAL_NEEDLES:
        at = data.find(needle)
        while at >= 0:
            starts.add(data.rfind(b"\n", 0, at) + 1)
            stop = data.find(b"\n", at)
            if stop < 0:
                break
            at = data.find(needle, stop)
    found: list[tuple[int, str]] = []
    number, counted = 1, 0
    for start in sorted(starts):
        number += data.count(b"\n", counted, start)
        counted = start
        stop = data.find(b"\n", start)
        found.append((number, data[start : stop if stop >= 0 else size].decode("utf-8", errors="replace")))
    return found


def read_journal(lines: Iterable[str], node_dir: str, problems: list[str]) -> list[JournalMark]:
    """The role, start and stop events of one node's journal; bad lines are reported and skipped."""
    return journal_marks(
        ((number, text) for number, text in enumerate(lines, start=1) if _wanted(text)), node_dir, problems
    )


def journal_marks(candidates: Iterable[tuple[int, str]], node_dir: str, problems: list[str]) -> list[JournalMark]:
    """The role, start and stop events among a journal's ``candidates`` ((line number, text), from
    :func:`journal_candidates`); bad lines are reported and skipped."""
    name = f"{NODES}/{node_dir}/{JOURNAL}"
    report = _Problems(name, problems)
    marks: list[JournalMark] = []
    for number, text in candidates:
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


def _bytes(path: Path, problems: list[str], name: str) -> bytes | None:
    try:
        return path.read_bytes()
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

    history = _bytes(run / HISTORY, problems, HISTORY)
    if history is None:
        problems.append(f"{HISTORY}: missing; the run stopped before its first operation")
        client, status, nemesis, events, end = [], [], [], 0, 0
    else:
        with no_cyclic_gc():
            client, status, nemesis, events, end = read_history(history.splitlines(), problems)
        del history

    journals: dict[str, list[JournalMark]] = {}
    node_files: dict[str, list[str]] = {}
    nodes_dir = run / NODES
    if nodes_dir.is_dir():
        for directory in sorted(p for p in nodes_dir.iterdir() if p.is_dir()):
            files = sorted(p.name for p in directory.iterdir() if p.is_file())
            node_files[directory.name] = files
            if JOURNAL in files:
                journal = _bytes(directory / JOURNAL, problems, f"{NODES}/{directory.name}/{JOURNAL}")
                marks = journal_marks(journal_candidates(journal or b""), directory.name, problems)
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
