"""``harness.analysis.rates``: the Wilson interval against its textbook values and its edges, and a rate
under its target flagged; ``night_rates``: a group's nights oldest first, the flag on the last one only."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.analysis.rates import Rate, check_target, wilson
from harness.analysis.summary import expectation, night_rates


def test_wilson_matches_the_closed_form_at_known_points() -> None:
    # 8/10 and 5/10: the interval the "cannot tell 8/10 from 5/10" is about; they overlap.
    assert wilson(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(8, 10)[0] < wilson(5, 10)[1]
    # 16/20, the bar: narrower, still reaching below 0.6.
    assert wilson(16, 20) == pytest.approx((0.5840, 0.9193), abs=1e-4)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == pytest.approx(1.0)
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="0 <= met <= runs"):
        wilson(3, 2)


@given(st.integers(0, 400).flatmap(lambda runs: st.tuples(st.integers(0, runs), st.just(runs))))
def test_the_interval_holds_the_share_and_narrows_with_more_runs(pair: tuple[int, int]) -> None:
    met, runs = pair
    low, high = wilson(met, runs)
    assert 0.0 <= low <= high <= 1.0
    if runs:
        assert low - 1e-12 <= met / runs <= high + 1e-12
        more_low, more_high = wilson(met * 4, runs * 4)  # the same share, four times the runs
        assert more_high - more_low <= (high - low) + 1e-12


def test_a_rate_says_its_interval_and_whether_it_is_below_target() -> None:
    assert Rate(8, 10, 0.8).describe() == "8/10 (49-94%)" and not Rate(8, 10, 0.8).below_target
    assert Rate(5, 10, 0.8).describe() == "5/10 (24-76%), below target 80%"
    assert not Rate(0, 0, 0.8).below_target and not Rate(1, 10).below_target
    assert Rate(3, 4, 0.8).to_json() == {"met": 3, "runs": 4, "low": 0.3006, "high": 0.9544, "target": 0.8,
                                         "below_target": True}
    assert check_target(1) == 1.0
    for bad in (0, 1.01, True, "0.8", math.nan):
        with pytest.raises(ValueError, match="target must be a share of runs"):
            check_target(bad)


def test_night_rates_flag_the_last_night_only() -> None:
    rates, below = night_rates([("2026-11-27", 10, 5), ("2026-11-26", 10, 9)], 0.8)
    assert [(r["night"], r["met"], r["runs"], r["below_target"]) for r in rates] == [
        ("2026-11-26", 9, 10, False), ("2026-11-27", 5, 10, True)]
    assert below
    recovered, below = night_rates([("2026-11-26", 10, 5), ("2026-11-27", 10, 9)], 0.8)
    assert recovered[0]["below_target"] and not below
    assert night_rates([("2026-11-26", 10, 5)], None)[1] is False
    assert night_rates([], 0.8) == ((), False)
    assert expectation("none") == "valid" and expectation("vote-twice") == "invalid" and expectation(None) == "valid"
