"""Fault coverage: how much of a run's nemesis schedule was applied.

A run can be valid without having been tested: its nodes started slowly and the nemesis found nothing to
hit, or the system refused a fault every time. Counting scheduled against applied faults per kind
(``RunStats``: ``faults_scheduled``, ``faults_applied``) tells such a run apart. Heals
(``nemesis.faults.HEALS``) are not counted: they are scheduled with every fault and apply even when the
fault did not, which would hide half of what was missed. It is *under-exercised*
when less than :data:`MIN_SHARE` of what was scheduled was applied, or when a kind of fault was scheduled
and never applied. That is said wherever the verdict is read: on the console, in ``results.json``
(``coverage``), the report's banner, a suite's ``junit.xml`` and ``summary.json``. ``--min-coverage X``
makes a valid run whose share is below ``X`` unknown (exit 2), for nightly suites that must not pass on
runs that tested nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from checkers.verdict import UNKNOWN
from nemesis.faults import HEALS

MIN_SHARE = 0.5
"""Below this share of scheduled faults applied, a run is under-exercised."""


@dataclass(frozen=True)
class Coverage:
    """Scheduled and applied faults of one run, per kind (``partition``, ``kill``, ``heal``, ...)."""

    scheduled: Mapping[str, int]
    applied: Mapping[str, int]

    @property
    def share(self) -> float:
        """Applied over scheduled, all kinds together (1.0 when nothing was scheduled)."""
        scheduled = sum(self.scheduled.values())
        return 1.0 if scheduled == 0 else min(1.0, sum(self.applied.values()) / scheduled)

    @property
    def never_applied(self) -> list[str]:
        """The kinds scheduled at least once and applied never."""
        return sorted(f for f, n in self.scheduled.items() if n > 0 and self.applied.get(f, 0) == 0)

    def under_exercised(self) -> str | None:
        """One sentence when the run is under-exercised, else ``None``."""
        scheduled, applied = sum(self.scheduled.values()), sum(self.applied.values())
        if scheduled == 0 or (self.share >= MIN_SHARE and not self.never_applied):
            return None
        never = f"; never applied: {', '.join(self.never_applied)}" if self.never_applied else ""
        return (f"under-exercised: {applied} of {scheduled} scheduled faults applied "
                f"({self.share:.0%}){never}")

    def to_json(self) -> dict[str, Any]:
        return {
            "scheduled": sum(self.scheduled.values()),
            "applied": sum(self.applied.values()),
            "share": round(self.share, 3),
            "never_applied": self.never_applied,
            "under_exercised": self.under_exercised(),
        }


def coverage_of(stats: Mapping[str, Any] | None) -> Coverage | None:
    """The coverage a run's ``stats`` (``results.json``, ``test.json``) record, or ``None`` without them."""
    if not isinstance(stats, Mapping):
        return None
    scheduled, applied = stats.get("faults_scheduled"), stats.get("faults_applied")
    if not isinstance(scheduled, Mapping) or not isinstance(applied, Mapping):
        return None
    def faults(counts: Mapping[str, Any]) -> dict[str, int]:
        return {str(f): int(n) for f, n in counts.items() if f not in HEALS}

    return Coverage(faults(scheduled), faults(applied))


def judge_coverage(results: dict[str, Any], minimum: float | None = None) -> None:
    """Record ``coverage`` in a run's ``results`` from its ``stats``; with ``minimum`` (``--min-coverage``),
    a valid run whose share of faults applied is below it becomes unknown, and says why."""
    found = coverage_of(results.get("stats"))
    if found is None:
        return
    document = found.to_json()
    if minimum is not None:
        document["minimum"] = minimum
        document["below_minimum"] = found.share < minimum
    results["coverage"] = document
    below_minimum(results)


def below_minimum(results: dict[str, Any]) -> None:
    """A valid verdict becomes unknown when its recorded coverage is below the run's ``--min-coverage``
    (the direct judge and the Spark analysis both apply it, so a re-analysis keeps it)."""
    coverage = results.get("coverage")
    if isinstance(coverage, Mapping) and coverage.get("below_minimum") and results.get("valid") is True:
        results["valid"] = UNKNOWN
