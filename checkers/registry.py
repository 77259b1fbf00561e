"""The checkers by name: defined once, used by ``python -m checkers`` and by the harness's analysis.

Every checker here takes one :class:`CheckInput` (a run's history, its journals if any, the model, the
budgets) and returns a :class:`~checkers.verdict.Verdict`; :func:`run_checker` calls it through
:func:`~checkers.verdict.check_safe`, so a checker that raises yields ``"unknown"``, never a pass.

Which checkers apply to an input (:func:`applicable`):

* ``linearizable``: whenever its search has a model of the operations (``checkers.models``; not ``log``);
* ``single-leader-per-term``: when there are journals or the history holds ``status`` observations;
* ``lsn-monotonicity``: when there are journals or some history operation carries an ``lsn``;
* ``durability``: for the ``register``, ``cas-register`` and ``queue`` models, when the history has
  final reads (see :func:`checkers.durability.final_phase`);
* ``log``: when the history has ``append`` or ``poll`` operations (the ``log`` workload; ``checkers.log``).

The linearizability checker is imported when it runs, so the others work without it.

Nothing here lists every checker: a checker registers itself where it is declared
(:func:`register_checker`; the five above are declared here), and :func:`discover_checkers`, run when this
module is imported, imports each other module of the package that calls it, so a new checker is one new
module (``checkers/<name>.py``). :data:`CHECKERS` is in registry order (:func:`register_checker`), the order
``results.json`` lists verdicts in.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import checkers
from checkers.durability import QUEUE_MODELS, REGISTER_MODELS, check_durability, has_final_reads
from checkers.history import History, JournalEvent, no_cyclic_gc
from checkers.leader import STATUS, check_single_leader_per_term
from checkers.log import applies as _log_applies
from checkers.log import check_log
from checkers.lsn import check_lsn_monotonicity
from checkers.models import MODELS
from checkers.verdict import Verdict, check_safe

LOG_MODEL = "log"
"""The ``log`` workload's model: judged by the log checker; the linearizability search has no model of it."""
MODEL_NAMES = (*MODELS, LOG_MODEL)


@dataclass(frozen=True)
class CheckInput:
    """What a checker is given: one history, its nodes' journals (or ``None``) and the settings."""

    history: History
    model: str
    journals: Mapping[str, list[JournalEvent]] | None = None
    timeout_s: float | None = None
    max_states: int | None = None
    final_after: int | None = None
    max_memory_bytes: int | None = None
    deadline: float | None = None  # on time.monotonic: the end of the caller's whole budget
    initial: Any = None  # the registers' value before any write (register models)
    semantics: str = "strict"  # how the models read the history (checkers.models.SEMANTICS)
    delivery: Mapping[str, Any] | None = None  # what a queue system declares (workloads.queue.Delivery)


@dataclass(frozen=True)
class Checker:
    """A named checker: how to run it on a :class:`CheckInput` and whether it applies to one."""

    name: str
    description: str
    run: Callable[[CheckInput], Verdict]
    applies: Callable[[CheckInput], bool]


def _linearizable(inp: CheckInput) -> Verdict:
    from checkers.linearizability import check_linearizability
    from checkers.models import get_model

    # Status observations describe the cluster, not the object the model specifies.
    ops = [op for op in inp.history.ops if op.f != STATUS]
    return check_linearizability(
        ops,
        get_model(inp.model, initial=inp.initial, semantics=inp.semantics),
        timeout_s=inp.timeout_s,
        max_states=inp.max_states,
        max_memory_bytes=inp.max_memory_bytes,
        deadline=inp.deadline,
    )


def _single_leader(inp: CheckInput) -> Verdict:
    return check_single_leader_per_term(inp.journals, inp.history)


def _lsn(inp: CheckInput) -> Verdict:
    return check_lsn_monotonicity(inp.journals, inp.history)


def _durability(inp: CheckInput) -> Verdict:
    return check_durability(inp.history, inp.journals, model=inp.model, final_after=inp.final_after,
                            delivery=inp.delivery)


def _log(inp: CheckInput) -> Verdict:
    return check_log(inp.history, final_after=inp.final_after)


def _has_status(inp: CheckInput) -> bool:
    return bool(inp.journals) or any(op.f == STATUS for op in inp.history.ops)


def _has_lsns(inp: CheckInput) -> bool:
    return bool(inp.journals) or any(op.lsn is not None for op in inp.history.ops)


def _durability_applies(inp: CheckInput) -> bool:
    return (inp.model in REGISTER_MODELS or inp.model in QUEUE_MODELS) and has_final_reads(
        inp.history, inp.model, inp.final_after
    )


CHECKERS: dict[str, Checker] = {}
"""Every registered checker by name, in registry order (:func:`register_checker`)."""
_ORDER: dict[str, int | None] = {}


def register_checker(checker: Checker, *, order: int | None = None) -> Checker:
    """Register ``checker`` in :data:`CHECKERS` under its name; call it at module level where the checker is
    declared (``register_checker(Checker("counter", "...", check_counter, applies))``).

    The registry's order is the order judges run checkers in and ``results.json`` lists them: ascending
    ``order``, ties and then the checkers without one (after every numbered one) by name, so it does not
    depend on which module was imported first. The bundled checkers are 1 to 5 (declared below); a new one
    leaves ``order`` out. The same checker registered again (its module imported anew) replaces itself;
    another checker under a registered name is a ValueError."""
    known = CHECKERS.get(checker.name)
    if known is not None and _origin(known) != _origin(checker):
        raise ValueError(f"checker {checker.name!r} is registered already, by {'.'.join(_origin(known))}")
    CHECKERS[checker.name] = checker
    _ORDER[checker.name] = order
    for name in sorted(CHECKERS, key=lambda name: (_ORDER.get(name) is None, _ORDER.get(name) or 0, name)):
        CHECKERS[name] = CHECKERS.pop(name)
    return checker


def _origin(checker: Checker) -> tuple[str, str]:
    return getattr(checker.run, "__module__", "?"), getattr(checker.run, "__qualname__", repr(checker.run))


REGISTERS = f"{register_checker.__name__}("
"""What a module of the package that declares a checker calls: :func:`discover_checkers` imports the
modules whose source contains it, and no other, so listing the checkers does not load the package's
machinery (``checkers.cli``, ``checkers.judge``, the EDN reader: about 0.1 s for every harness command)."""


def discover_checkers() -> tuple[str, ...]:
    """Import each module of the ``checkers`` package (pkgutil, in name order) not imported yet whose source
    calls :func:`register_checker`, so that it has registered its checkers; the checker names, in registry
    order. Run when this module is imported; call it again after a directory joins the package's
    ``__path__`` (what tests/harness/test_adding_a_workload.py does)."""
    for module in pkgutil.iter_modules(checkers.__path__, f"{checkers.__name__}."):
        if module.name in sys.modules:
            continue
        spec = importlib.util.find_spec(module.name)
        origin = spec.origin if spec is not None else None
        if origin and origin.endswith(".py"):
            with open(origin, encoding="utf-8") as source:
                if REGISTERS not in source.read():
                    continue
        importlib.import_module(module.name)
    return tuple(CHECKERS)


register_checker(Checker(
    "linearizable",
    "the history is linearizable with respect to the model (Wing & Gong / Lowe search)",
    _linearizable,
    lambda inp: inp.model in MODELS,
), order=1)
register_checker(Checker(
    "single-leader-per-term",
    "no two nodes claim leadership in the same term (journal role events, status observations)",
    _single_leader,
    _has_status,
), order=2)
register_checker(Checker(
    "lsn-monotonicity",
    "applied LSNs increase per node, agree across nodes and follow real-time order",
    _lsn,
    _has_lsns,
), order=3)
register_checker(Checker(
    "durability",
    "acknowledged writes and puts survive into the final reads; nothing appears from nowhere",
    _durability,
    _durability_applies,
), order=4)
register_checker(Checker(
    "log",
    "acknowledged appends survive at one offset; no offset holds two records; polls go forward "
    "without skipping; nothing read vanishes",
    _log,
    lambda inp: _log_applies(inp.history),
), order=5)


def applicable(inp: CheckInput) -> list[str]:
    """The names of the checkers that apply to ``inp``, in :data:`CHECKERS` order."""
    return [name for name, checker in CHECKERS.items() if checker.applies(inp)]


def run_checker(name: str, inp: CheckInput) -> Verdict:
    """Run the checker called ``name`` on ``inp`` through ``check_safe`` (raises ``KeyError`` for an
    unknown name)."""
    checker = CHECKERS[name]
    with no_cyclic_gc():  # a checker's many small objects hold no cycles (checkers.history)
        return check_safe(name, checker.run, inp)


def run_checkers(inp: CheckInput, names: list[str] | None = None) -> dict[str, Verdict]:
    """Run ``names`` (default: the applicable checkers) and return their verdicts by name."""
    return {name: run_checker(name, inp) for name in (applicable(inp) if names is None else names)}


def describe() -> Mapping[str, Any]:
    """Name -> one-line description, for help texts."""
    return {name: checker.description for name, checker in CHECKERS.items()}


discover_checkers()
