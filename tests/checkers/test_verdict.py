"""Verdicts: three-valued, composed false > unknown > true, and a crashing checker is never a pass."""

from __future__ import annotations

import pytest

from checkers.verdict import UNKNOWN, Verdict, check_safe, combine, exit_code, worst


@pytest.mark.parametrize(
    ("valids", "expected"),
    [
        ([], True),
        ([True, True], True),
        ([True, UNKNOWN, True], UNKNOWN),
        ([UNKNOWN, False, True], False),
        ([False, UNKNOWN], False),
    ],
)
def test_worst_false_beats_unknown_beats_true(valids: list, expected: object) -> None:
    assert worst(valids) == expected
    verdicts = {str(i): Verdict(v, "s") for i, v in enumerate(valids)}
    assert combine(verdicts) == expected


def test_exit_codes() -> None:
    assert [exit_code(True), exit_code(False), exit_code(UNKNOWN)] == [0, 1, 2]


def test_valid_must_be_three_valued() -> None:
    with pytest.raises(ValueError, match="must be true, false or 'unknown'"):
        Verdict("yes", "s")  # type: ignore[arg-type]


def test_json_round_trip() -> None:
    verdict = Verdict(False, "two leaders", {"term": 3}, {"claims": 2})
    assert Verdict.from_json(verdict.to_json()) == verdict
    assert verdict.to_json() == {
        "valid": False,
        "summary": "two leaders",
        "counterexample": {"term": 3},
        "stats": {"claims": 2},
    }


def test_check_safe_turns_an_exception_into_unknown() -> None:
    def broken(x: int) -> Verdict:
        raise KeyError(x)

    verdict = check_safe("leader", broken, 7)
    assert verdict.valid == UNKNOWN
    assert verdict.summary == "leader could not decide: KeyError: 7"
    assert "KeyError" in verdict.stats["traceback"]


def test_check_safe_rejects_a_non_verdict_and_passes_verdicts_through() -> None:
    assert check_safe("x", lambda: True).valid == UNKNOWN  # type: ignore[arg-type, return-value]
    verdict = Verdict(True, "fine")
    assert check_safe("x", lambda v: v, verdict) is verdict
