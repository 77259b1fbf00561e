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
(the other checkers judge what they were given, e.g. the journals).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from checkers.history import HistoryError, LoadTimeout, load_history, load_journals
from checkers.registry import CHECKERS, CheckInput, applicable, run_checker
from checkers.verdict import UNKNOWN, Verdict

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
    missing: str = "run",
    clock: Callable[[], float] = time.monotonic,
) -> Judgement:
    """Judge one history (and its nodes' journals) with the named checkers, or every one that applies.

    ``journals``: a directory (a run's, or its ``nodes/``), ``"auto"`` for ``nodes/`` beside the history
    when it holds journals, or ``None``. ``missing`` says what becomes of a named checker that does not
    apply to the input: ``"run"`` runs it anyway (it says itself what it lacks), ``"unknown"`` reports
    "cannot judge this run" without running it. Either way it is never silently dropped, and an unknown
    checker name is reported unknown. Raises :class:`~checkers.history.HistoryError` for malformed input.
    """
    deadline = None if budgets.timeout_s is None else clock() + budgets.timeout_s
    path = Path(history_path)
    names = list(checkers) if checkers is not None else None
    try:
        history = load_history(
            path,
            format=history_format,
            keep_events=False,
            deadline=deadline,
            clock=clock,
            independent=independent,
        )
    except LoadTimeout as exc:
        reason = (
            f"cannot decide: the time budget of {budgets.timeout_s:g} s ran out while reading {exc.source} "
            f"(at line {exc.line:,})"
        )
        return Judgement({name: Verdict(UNKNOWN, f"{name} {reason}") for name in names or [LINEARIZABLE]})
    journal_dir = _journal_dir(path, journals)
    loaded = load_journals(journal_dir, compact=True) if journal_dir is not None else None
    inp = CheckInput(
        history=history,
        model=model,
        journals=loaded,
        timeout_s=None,
        max_states=budgets.max_states,
        final_after=final_after,
        max_memory_bytes=budgets.max_memory_bytes,
        deadline=deadline,
        workers=budgets.workers,
        initial=initial,
    )
    selected = names if names is not None else applicable(inp)
    verdicts: dict[str, Verdict] = {}
    for name in selected:
        checker = CHECKERS.get(name)
        if checker is None:
            verdicts[name] = Verdict(UNKNOWN, f"no checker called {name!r}; known: {', '.join(CHECKERS)}")
        elif name != LINEARIZABLE and missing == "unknown" and not checker.applies(inp):
            verdicts[name] = Verdict(UNKNOWN, f"{name} cannot judge this run (nothing it needs was recorded)")
        elif name != LINEARIZABLE:
            verdicts[name] = run_checker(name, inp)
    if LINEARIZABLE in selected:
        # The journals are not needed any more: let them go before the search's memo grows.
        inp = replace(inp, journals=None)
        del loaded
        verdicts[LINEARIZABLE] = run_checker(LINEARIZABLE, inp)
    ordered = {name: verdicts[name] for name in selected if name in verdicts}
    ops = sum(1 for op in history.ops if op.f != "status")
    return Judgement(ordered, ops=ops, warnings=history.warnings)


def _journal_dir(history_path: Path, journals: str | os.PathLike[str] | None) -> Path | None:
    if journals is None:
        return None
    if journals != "auto":
        return Path(journals)
    beside = history_path.parent / "nodes"
    return beside if any(beside.glob("*/journal.jsonl")) else None


__all__ = ["Budgets", "HistoryError", "Judgement", "default_workers", "judge_files"]
