"""Opportunities: how often a run gave the known bug switched on in it a chance to act (issue 32).

A suite of known bugs counts a run that no checker found invalid as a *miss*. A miss means one of two
things: the fault schedule never produced the situation the bug needs (an SC decision while a replica
lags, a voter asked by two candidates of one term, a leader restarting into its own term), or it did and
the clients never observed the damage. Only the system knows what its bugs need, so the count comes from
the DB plugin: a plugin that knows its bugs publishes a counter as ``extras["opportunities"]``
(:data:`HOOK`), called with the run's ``test.json`` and its parsed node journals
(``checkers.history.JournalEvent`` lists by node) and returning, for each bug switched on in the run,

    {"<bug>": {"count": 7, "what": "<the situation counted>", "acted": 3 | None, "acted_what": "..." | None}}

(``acted``: how many of the ``count`` the journals show the mistake itself being made in, where they can),
or ``None`` for a run without a known bug. The analysis calls it where it has just parsed the journals
(``harness.analysis.ingest``) and stores the answer in ``results.json`` as ``opportunities``; the report's
timeline caption (:func:`run_sentence`) and a suite's entry table (:func:`entry_figures`,
:func:`entry_text`) read it from there. A system without the hook, or a run without a bug, shows nothing.
A counter that fails is logged and shows nothing: it never changes a verdict.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from harness.db.plugin import PluginError, load_plugin

HOOK = "opportunities"
"""The ``DBPlugin.extras`` key of a plugin's opportunity counter."""

RESULTS_FIELD = "opportunities"
"""Where ``results.json`` keeps the counts."""

log = logging.getLogger(__name__)


@lru_cache(maxsize=32)
def _counter(db: str) -> Callable[..., Any] | None:
    try:
        plugin = load_plugin(db)
    except PluginError:
        return None
    hook = plugin.extras.get(HOOK)
    return hook if callable(hook) else None


def count_run(spec: Mapping[str, Any], journals: Mapping[str, Sequence[Any]] | None) -> dict[str, Any] | None:
    """The run's opportunities by bug, from its DB plugin's counter; ``None`` when there is no counter,
    no journal or no known bug in the run, or the counter failed (logged)."""
    db = spec.get("db")
    if not isinstance(db, str) or not journals:
        return None
    counter = _counter(db)
    if counter is None:
        return None
    try:
        found = counter(spec, journals)
    except Exception:  # noqa: BLE001 - an adapter's counter never costs a run its verdict
        log.warning("the %s plugin's opportunity counter failed", db, exc_info=True)
        return None
    if not isinstance(found, Mapping):
        return None
    return {str(bug): dict(entry) for bug, entry in found.items()
            if isinstance(entry, Mapping) and isinstance(entry.get("count"), int)}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def run_sentence(results: Mapping[str, Any] | None) -> str:
    """The caption's words on a run's opportunities (``""`` when ``results.json`` has none)::

        Opportunities for promote-outside-lrs: 7 (a leader candidate chosen by the fluvio SC while an SPU
        is outside the Live Replica Set); the journals show the mistake made 3 times (the SC chose a
        candidate outside the LRS).
    """
    found = results.get(RESULTS_FIELD) if isinstance(results, Mapping) else None
    if not isinstance(found, Mapping) or not found:
        return ""
    parts = []
    for bug, entry in found.items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("count"), int):
            continue
        text = f"Opportunities for {bug}: {entry['count']}"
        if entry.get("what"):
            text += f" ({entry['what']})"
        acted = entry.get("acted")
        if isinstance(acted, int):
            text += f"; the journals show the mistake made {_plural(acted, 'time')}"
            if entry.get("acted_what"):
                text += f" ({entry['acted_what']})"
        parts.append(text + ".")
    if not parts:
        return ""
    return " ".join(parts) + (" An opportunity is a chance the schedule gave the bug, not an anomaly found; a run "
                              "with none never reached the situation the bug needs.")


def run_text(found: Mapping[str, Any] | None) -> str:
    """One run's counts in a few words: ``promote-outside-lrs 7 (the mistake made 3 times)``."""
    if not isinstance(found, Mapping):
        return ""
    cells = []
    for bug, entry in found.items():
        if isinstance(entry, Mapping) and isinstance(entry.get("count"), int):
            acted = entry.get("acted")
            made = f" (the mistake made {_plural(acted, 'time')})" if isinstance(acted, int) else ""
            cells.append(f"{bug} {entry['count']}{made}")
    return "; ".join(cells)


def entry_figures(runs: Sequence[tuple[Mapping[str, Any] | None, bool]]) -> dict[str, Any] | None:
    """A suite entry's opportunities from its runs' (``results.json``'s ``opportunities``, met the
    expectation) pairs: per bug, ``what``, the ``total`` and the per-run ``min``/``max`` over the runs that
    have a count, ``counts`` in run order, the ``missed`` runs' counts (those that did not meet the
    expectation) and the ``acted`` total where the counter knows it. ``None`` when no run has a count."""
    figures: dict[str, dict[str, Any]] = {}
    for found, met in runs:
        if not isinstance(found, Mapping):
            continue
        for bug, entry in found.items():
            if not isinstance(entry, Mapping) or not isinstance(entry.get("count"), int):
                continue
            row = figures.setdefault(bug, {"what": entry.get("what"), "counts": [], "missed": [], "acted": None})
            row["counts"].append(entry["count"])
            if not met:
                row["missed"].append(entry["count"])
            if isinstance(entry.get("acted"), int):
                row["acted"] = (row["acted"] or 0) + entry["acted"]
    for row in figures.values():
        row.update(total=sum(row["counts"]), min=min(row["counts"]), max=max(row["counts"]))
    return figures or None


def entry_text(figures: Mapping[str, Any] | None) -> str:
    """One cell of the entry table: ``promote-outside-lrs 42 (1-9 a run; missed runs: 0, 2; acted 12)``."""
    if not figures:
        return ""
    cells = []
    for bug, row in figures.items():
        spread = f"{row['min']}" if row["min"] == row["max"] else f"{row['min']}-{row['max']}"
        details = [f"{spread} a run"]
        if row.get("missed"):
            details.append("missed runs: " + ", ".join(str(n) for n in row["missed"]))
        if row.get("acted") is not None:
            details.append(f"acted {row['acted']}")
        cells.append(f"{bug} {row['total']} ({'; '.join(details)})")
    return "; ".join(cells)
