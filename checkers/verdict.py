"""Verdicts: what every checker returns, and how verdicts compose.

A verdict is three-valued, as in Jepsen: ``True`` (no anomaly), ``False`` (an anomaly, with a
counterexample a person can read) or ``"unknown"`` (the checker could not decide: a time budget ran out,
the input was malformed, the checker itself raised). A checker that raises never yields ``True``
(Jepsen's ``check-safe``): :func:`check_safe` turns the exception into ``"unknown"`` with the error.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Valid = bool | Literal["unknown"]

UNKNOWN: Literal["unknown"] = "unknown"


@dataclass(frozen=True)
class Verdict:
    """One checker's judgement, shaped like a checker entry of ``results.json`` (FORMATS.md)."""

    valid: Valid
    summary: str
    counterexample: dict[str, Any] | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.valid not in (True, False, UNKNOWN):
            raise ValueError(f"verdict valid must be true, false or 'unknown', not {self.valid!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "summary": self.summary,
            "counterexample": self.counterexample,
            "stats": self.stats,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            valid=data["valid"],
            summary=data.get("summary", ""),
            counterexample=data.get("counterexample"),
            stats=dict(data.get("stats") or {}),
        )


def worst(valids: Iterable[Valid]) -> Valid:
    """Compose validity: ``False`` beats ``"unknown"`` beats ``True``. An empty input is ``True``."""
    result: Valid = True
    for valid in valids:
        if valid is False:
            return False
        if valid == UNKNOWN:
            result = UNKNOWN
    return result


def combine(verdicts: Mapping[str, Verdict]) -> Valid:
    """The validity of a whole run from its checkers' verdicts."""
    return worst(v.valid for v in verdicts.values())


def exit_code(valid: Valid) -> int:
    """Jepsen's exit-code convention (ARCHITECTURE.md): 0 valid, 1 invalid, 2 unknown."""
    if valid is True:
        return 0
    if valid is False:
        return 1
    return 2


def check_safe(name: str, check: Callable[..., Verdict], *args: Any, **kwargs: Any) -> Verdict:
    """Run ``check`` and return its verdict; if it raises, return ``"unknown"`` with the error.

    The error's type and message become the summary and the traceback goes into the stats, so a crashed
    checker is visible in the report and never mistaken for a pass.
    """
    try:
        verdict = check(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - every failure of a checker must become "unknown"
        return Verdict(
            valid=UNKNOWN,
            summary=f"{name} could not decide: {type(exc).__name__}: {exc}",
            counterexample=None,
            stats={"error": f"{type(exc).__name__}: {exc}", "error_type": type(exc).__name__,
                   "traceback": traceback.format_exc()},
        )
    if not isinstance(verdict, Verdict):
        return Verdict(
            valid=UNKNOWN,
            summary=f"{name} returned {type(verdict).__name__}, not a Verdict",
        )
    return verdict
