"""Detection rates that say how sure they are: a (bug, mode) pair's caught/total, or a control's valid/total,
with a 95% confidence interval and the target it is held to.

Ten runs cannot tell 8/10 from 5/10: the Wilson score interval around 8/10 reaches down to 0.49. So a
rate is never printed alone: :class:`Rate` carries its interval (Wilson 1927, the interval that stays
inside [0, 1] and behaves at 0/n and n/n, where the normal approximation does not), and is *below
target* when its share is under the target the suite file sets for the entry (``target = 0.8``). Used by
the suite's entry table (``harness.suite``) and by ``harness analyze --summary`` night over night
(``harness.analysis.summary``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

Z95 = 1.959964
"""The standard normal quantile of a two-sided 95% interval."""


def wilson(met: int, runs: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``met`` successes in ``runs`` trials; ``(0.0, 1.0)`` for no trial."""
    if runs < 0 or not 0 <= met <= runs:
        raise ValueError(f"a rate needs 0 <= met <= runs, not {met}/{runs}")
    if runs == 0:
        return 0.0, 1.0
    p = met / runs
    z2 = z * z
    centre = (p + z2 / (2 * runs)) / (1 + z2 / runs)
    half = z * math.sqrt(p * (1 - p) / runs + z2 / (4 * runs * runs)) / (1 + z2 / runs)
    return max(0.0, centre - half), min(1.0, centre + half)


def check_target(value: object) -> float:
    """A target share in (0, 1] (ValueError saying what was expected)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ValueError(f"target must be a share of runs in (0, 1], e.g. 0.8, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class Rate:
    """``met`` of ``runs`` runs met their expectation (a known bug caught, a control valid)."""

    met: int
    runs: int
    target: float | None = None

    @property
    def share(self) -> float | None:
        return self.met / self.runs if self.runs else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.met, self.runs)

    @property
    def below_target(self) -> bool:
        """Whether the share is under the target (never without a target or a run)."""
        share = self.share
        return self.target is not None and share is not None and share < self.target

    def describe(self) -> str:
        """``8/10 (49-94%)``, and ``below target 90%`` when it is."""
        low, high = self.interval
        text = f"{self.met}/{self.runs} ({low:.0%}-{high:.0%})".replace("%-", "-")
        if self.below_target:
            text += f", below target {self.target:.0%}"
        return text

    def to_json(self) -> dict[str, Any]:
        low, high = self.interval
        return {"met": self.met, "runs": self.runs, "low": round(low, 4), "high": round(high, 4),
                "target": self.target, "below_target": self.below_target}
