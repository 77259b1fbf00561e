"""What a stored run itself shows cannot be judged, whoever judges it (``harness.analysis.checks``).

A checker is *not applicable* when the system under test cannot give it anything to judge: the adapter
says so (``harness.db.not_applicable``: no LSNs, no terms), or the run shows it (every status
observation carried ``term: null``: the system has no terms). A not-applicable checker is listed with
its reason under ``not_applicable`` in ``results.json`` and does not count towards the verdict. A checker
that applies but finds nothing to judge in this run (no final reads because the run stopped early) is
``unknown`` with its reason, as before: that is an observation missing, not a property absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from checkers.history import History
from checkers.leader import STATUS

SINGLE_LEADER = "single-leader-per-term"


def observed_not_applicable(history: History, journals: Mapping[str, Any] | None) -> dict[str, str]:
    """What the run itself shows cannot be judged: terms, when every status observation said ``null``
    (top-level and in each of its ``groups``: a system with terms per queue only still has terms)."""
    found: dict[str, str] = {}
    if not journals:
        terms = []
        for op in history.ops:
            if op.f == STATUS and op.type == "ok" and isinstance(op.output, Mapping):
                terms.append(op.output.get("term"))
                groups = op.output.get("groups")
                if isinstance(groups, list):
                    terms += [entry.get("term") for entry in groups if isinstance(entry, Mapping)]
        if terms and all(term is None for term in terms):
            found[SINGLE_LEADER] = "the system reports no election terms (every status had term null)"
    return found
