"""Judging a run from its files, in little memory: the one entry point ``python -m checkers check`` and
the harness's post-run check (``harness.run.check_run``) share.

    judge_files(history_path, model="cas-register", journals="auto", checkers=None,
                budgets=Budgets(timeout_s=60)) -> Judgement

What keeps memory small (a 465,000-operation run with 173 MB of journals once took 4 GB here):

* the history is streamed line by line and only its paired operations are kept (no events, no decoded
  lines; ``checkers.history``);
* the journals keep only the events the checkers read, and the nodes' identical ``apply`` entries share
  one record (``load_journals(compact=True)``), so five nodes cost about one;
* the journal checkers run first, then the journals are dropped before the linearizability search,
  which works key by key (P-compositionality) and may fork workers that share the operations.

Budgets (:class:`Budgets`): ``timeout_s`` covers reading and checking: reading stops at the deadline,
and the linearizability search is given what is left. ``max_states`` and ``max_memory_bytes`` bound the
search's memo. A key out of budget is ``unknown`` with its name and the budget; the others are decided.

A history with no client operation has nothing to judge: linearizability is ``unknown`` and says so
(``valid`` under Knossos' semantics, as Knossos and Porcupine judge it; the other checkers judge what they were given, e.g. the journals).
"""

from __future__ import annotations

import json
import os
import pickle
import select
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from checkers.durability import QUEUE_MODELS, REGISTER_MODELS
from checkers.history import (
    History,
    HistoryError,
    LoadTimeout,
    Operation,
    OperationTable,
    key_shard,
    load_journals,
    load_operations,
    no_cyclic_gc,
)
from checkers.leader import STATUS
from checkers.linearizability import ShardResult, check_shard, make_budget, merge
from checkers.models import MODELS, Model, get_model
from checkers.registry import CHECKERS, CheckInput, applicable, run_checker
from checkers.verdict import UNKNOWN, Verdict, check_safe

LINEARIZABLE = "linearizable"


@dataclass(frozen=True)
class Budgets:
    """What a check may spend: wall time for reading and checking, and the linearizability memo (states,
    estimated bytes; ``None``: the checker's defaults), and how many processes the search may use."""

    timeout_s: float | None = None
    max_states: int | None = None
    max_memory_bytes: int | None = None
    workers: int = 1


def default_workers() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class Judgement:
    """The verdicts by checker name, the number of client operations (status polls aside) and what the
    loader warned about."""

    verdicts: dict[str, Verdict]
    ops: int = 0
    warnings: tuple[str, ...] = field(default_factory=tuple)
    skipped: dict[str, str] = field(default_factory=dict)  # checkers ``skip`` said not to run, with why


def judge_files(
    history_path: str | os.PathLike[str],
    *,
    model: str,
    journals: str | os.PathLike[str] | None = "auto",
    checkers: Sequence[str] | None = None,
    budgets: Budgets = Budgets(),
    final_after: int | None = None,
    history_format: str = "auto",
    independent: str = "auto",
    initial: Any = None,
    semantics: str = "strict",
    delivery: Mapping[str, Any] | None = None,
    missing: str = "run",
    skip: Callable[[History, Mapping[str, Any] | None], Mapping[str, str]] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Judgement:
    """Judge one history (and its nodes' journals) with the named checkers, or every one that applies.

    ``journals``: a directory (a run's, or its ``nodes/``), ``"auto"`` for ``nodes/`` beside the history
    when it holds journals, or ``None``. ``missing`` says what becomes of a named checker that does not
    apply to the input: ``"run"`` runs it anyway (it says itself what it lacks), ``"unknown"`` reports
    "cannot judge this run" without running it. Either way it is never silently dropped, and an unknown
    checker name is reported unknown. ``skip``, given the loaded history and journals, names checkers not
    to run at all, with why (a caller's "not applicable to this system": ``Judgement.skipped``). Raises
    :class:`~checkers.history.HistoryError` for malformed input.

    With ``budgets.workers > 1`` and a history of at least :data:`PARALLEL_MIN_BYTES`, the
    linearizability search is shared by that many processes: this process reads, validates and pairs the
    file once, into columns (``checkers.history.OperationTable``: no object per operation), then forks
    the workers, which share those pages; each builds the operations of its own keys (``key_shard``) and
    searches them, while this process builds its share (or the whole history, for the other checkers)
    and searches it. Nothing is copied between processes but the results.
    """
    deadline = None if budgets.timeout_s is None else clock() + budgets.timeout_s
    path = Path(history_path)
    names = list(checkers) if checkers is not None else None
    wanted = LINEARIZABLE in names if names is not None else model in MODELS  # (registry: ``applies``)
    lin_model = get_model(model, initial=initial, semantics=semantics) if wanted else None
    journal_dir = _journal_dir(path, journals)
    # With workers, this process keeps only its own shard, unless another checker will need everything.
    others = journal_dir is not None or (names is not None and any(n != LINEARIZABLE for n in names))
    workers: _Workers | None = None
    try:
        try:
            table = load_operations(
                path, format=history_format, deadline=deadline, clock=clock, independent=independent
            )
        except LoadTimeout as exc:
            reason = (
                f"cannot decide: the time budget of {budgets.timeout_s:g} s ran out while reading {exc.source} "
                f"(at line {exc.line:,})"
            )
            return Judgement({name: Verdict(UNKNOWN, f"{name} {reason}") for name in names or [LINEARIZABLE]})
        if _parallel(path, lin_model, budgets):
            assert lin_model is not None
            workers = _Workers.start(table, lin_model, budgets, deadline, clock)
        shard = (0, workers.parts) if workers is not None and not others else None
        with no_cyclic_gc():
            # One shard, for the search (and to see whether another checker applies): light rows will do.
            history = table.history(shard, rows=shard is not None)
            if shard is not None and names is None and _others_may_apply(history, model, final_after):
                history = table.history(None)
        del table  # the workers have their own (forked) view of it
        loaded = load_journals(journal_dir, compact=True) if journal_dir is not None else None
        inp = CheckInput(
            history=history,
            model=model,
            journals=loaded,
            max_states=budgets.max_states,
            final_after=final_after,
            max_memory_bytes=budgets.max_memory_bytes,
            deadline=deadline,
            initial=initial,
            semantics=semantics,
            delivery=delivery,
        )
        selected = names if names is not None else applicable(inp)
        skipped = dict(skip(history, loaded)) if skip is not None else {}
        selected = [name for name in selected if name not in skipped]
        verdicts: dict[str, Verdict] = {}
        for name in selected:
            checker = CHECKERS.get(name)
            if checker is None:
                verdicts[name] = Verdict(UNKNOWN, f"no checker called {name!r}; known: {', '.join(CHECKERS)}")
            elif name != LINEARIZABLE and missing == "unknown" and not checker.applies(inp):
                verdicts[name] = Verdict(UNKNOWN, f"{name} cannot judge this run (nothing it needs was recorded)")
            elif name != LINEARIZABLE:
                verdicts[name] = run_checker(name, inp)
        ops = history.file_ops
        warnings = history.warnings
        if LINEARIZABLE in selected:
            # The journals are not needed any more: let them go before the search's memo grows.
            del loaded
            inp = replace(inp, journals=None)
            if workers is None:
                verdicts[LINEARIZABLE] = run_checker(LINEARIZABLE, inp)
            else:
                assert lin_model is not None
                # (the collector off: its first pass after the reading above would rescan every row)
                with no_cyclic_gc():
                    own = workers.own(history.ops, history.shard == (0, workers.parts))
                    del history, inp
                    verdicts[LINEARIZABLE] = check_safe(LINEARIZABLE, workers.finish, own)
                    del own
        return Judgement({name: verdicts[name] for name in selected if name in verdicts}, ops, warnings, skipped)
    finally:
        if workers is not None:
            workers.close()


PARALLEL_MIN_BYTES = 20 * 2**20  # below this, starting workers costs more than it saves


def _parallel(path: Path, model: Model | None, budgets: Budgets) -> bool:
    """Whether the linearizability search is shared by worker processes (:func:`judge_files`)."""
    if model is None or budgets.workers <= 1:
        return False
    try:
        return path.stat().st_size >= PARALLEL_MIN_BYTES
    except OSError:
        return False


def _others_may_apply(history: History, model: str, final_after: int | None) -> bool:
    """Whether a checker besides linearizability may apply to the history one shard of which is
    ``history`` (which holds every status poll and nemesis operation, and says what the file holds)."""
    if "lsn" in history.seen or any(op.f == STATUS for op in history.ops):
        return True
    if model in REGISTER_MODELS or model in QUEUE_MODELS:
        return "final" in history.seen or final_after is not None or bool(history.nemesis)
    return False


@dataclass
class _Child:
    pid: int
    fd: int
    result: ShardResult | None = None


class _Workers:
    """The forked processes that search shards 1..n-1 of a history's keys (:func:`judge_files`)."""

    def __init__(self, model: Model, budgets: Budgets, deadline: float | None, clock: Callable[[], float]) -> None:
        self.model = model
        self.parts = budgets.workers
        self.budget = make_budget(budgets.max_states, budgets.max_memory_bytes, budgets.timeout_s).share(self.parts)
        self.deadline = deadline
        self.clock = clock
        self.started = clock()
        self.children: list[_Child] = []

    @classmethod
    def start(
        cls, table: OperationTable, model: Model, budgets: Budgets, deadline: float | None, clock: Callable[[], float]
    ) -> _Workers:
        """Fork ``budgets.workers - 1`` processes, each searching one shard of ``table``'s keys."""
        workers = cls(model, budgets, deadline, clock)
        for part in range(1, workers.parts):
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: never returns into the caller's code
                status = 0
                try:
                    os.close(read_fd)
                    result = workers._search_shard(table, part)
                    with os.fdopen(write_fd, "wb") as out:
                        out.write(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
                except BaseException:  # noqa: BLE001 - a child must leave through os._exit
                    status = 1
                finally:
                    os._exit(status)
            os.close(write_fd)
            workers.children.append(_Child(pid, read_fd))
        return workers

    def own(self, ops: Sequence[Operation], sharded: bool = False) -> list[Operation]:
        """The operations of this process's shard (shard 0), status polls aside; ``sharded``: ``ops`` are
        that shard's already (and every status poll)."""
        if sharded:
            return [op for op in ops if op.f != STATUS]
        shards: dict[Any, bool] = {}
        mine = []
        for op in ops:
            if op.f == STATUS:
                continue
            key = op.key if op.key.__class__ is str else json.dumps(op.key, sort_keys=True)
            keep = shards.get(key)
            if keep is None:
                keep = shards[key] = key_shard(op.key, self.parts) == 0
            if keep:
                mine.append(op)
        return mine

    def _search_shard(self, table: OperationTable, part: int) -> ShardResult:
        try:
            with no_cyclic_gc():
                ops = table.operations((part, self.parts), statuses=False, rows=True)
            return check_shard(ops, self.model, self.budget, deadline=self.deadline, clock=self.clock)
        except Exception as exc:  # noqa: BLE001 - sent to the parent, which reports it
            return ShardResult(error=f"{type(exc).__name__}: {exc}")

    def finish(self, own: list[Operation]) -> Verdict:
        """Search this process's shard (``own``), collect the children's, and merge: a violation found in
        any shard ends the others."""

        def stop() -> str | None:
            waiting = [c.fd for c in self.children if c.result is None]
            ready = select.select(waiting, [], [], 0)[0] if waiting else []
            for child in self.children:
                if child.fd in ready:
                    self._collect(child)
                    if child.result is not None and child.result.violation is not None:
                        return "stopped: a violation was found on another key"
            return None

        mine = check_shard(own, self.model, self.budget, deadline=self.deadline, clock=self.clock, stop=stop)
        results = [mine]
        if mine.violation is None:
            for child in self.children:
                if child.result is None:
                    self._collect(child)
                assert child.result is not None
                results.append(child.result)
        return merge(results, self.model, time_s=self.clock() - self.started, workers=self.parts)

    @staticmethod
    def _collect(child: _Child) -> None:
        chunks = []
        while chunk := os.read(child.fd, 1 << 20):
            chunks.append(chunk)
        try:
            child.result = pickle.loads(b"".join(chunks))
        except Exception:  # noqa: BLE001 - a worker that died sends nothing readable
            child.result = ShardResult(error="a linearizability worker process ended without its results")

    def close(self) -> None:
        """End every child still running (a violation decided, or the caller failed), and reap them."""
        for child in self.children:
            if child.result is None:
                try:
                    os.kill(child.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            os.close(child.fd)
            os.waitpid(child.pid, 0)
        self.children = []


def _journal_dir(history_path: Path, journals: str | os.PathLike[str] | None) -> Path | None:
    if journals is None:
        return None
    if journals != "auto":
        return Path(journals)
    beside = history_path.parent / "nodes"
    return beside if any(beside.glob("*/journal.jsonl")) else None


__all__ = ["Budgets", "HistoryError", "Judgement", "default_workers", "judge_files"]
