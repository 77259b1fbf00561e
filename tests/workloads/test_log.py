"""The log workload: seeded appends and polls, unique values, and a final phase that reads every log."""

from __future__ import annotations

import random
from itertools import islice

import pytest

from workloads.log import FINAL_RETRIES, LogWorkload, next_offset
from workloads.ops import FINAL_RETRY_THINK, VALUE_STRIDE, Op


def test_streams_mix_appends_of_unique_values_and_polls_the_client_fills_in() -> None:
    workload = LogWorkload(random.Random(3), keys=2, rate=None)
    ops = [op for p in range(4) for op in islice(workload.stream(p), 200)]
    appends = [op for op in ops if op.f == "append"]
    polls = [op for op in ops if op.f == "poll"]
    assert appends and polls and len(appends) + len(polls) == len(ops)
    assert len({op.value for op in appends}) == len(appends)
    assert all(op.value // VALUE_STRIDE in range(4) for op in appends)
    assert {op.key for op in ops} == {"l0", "l1"}
    assert all(op.value is None and not op.local for op in polls)
    assert workload.checkers == ("single-leader-per-term", "lsn-monotonicity", "log") and workload.model == "log"


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="at least one log"):
        LogWorkload(random.Random(1), keys=0)
    with pytest.raises(ValueError, match="append_fraction"):
        LogWorkload(random.Random(1), append_fraction=1.5)
    only_appends = LogWorkload(random.Random(1), append_fraction=1.0)
    assert {op.f for op in islice(only_appends.stream(0), 50)} == {"append"}


def test_the_final_phase_polls_each_log_from_zero_at_the_node_until_an_empty_poll() -> None:
    polls = LogWorkload(random.Random(1)).final_ops("n2", ["l10", "l2", "l2"])
    assert next(polls) == Op("poll", "l2", 0, node="n2", local=True)
    assert polls.send({"type": "ok", "value": [[0, 5], [1, 6]]}) == Op("poll", "l2", 2, node="n2", local=True)
    assert polls.send({"type": "ok", "value": []}) == Op("poll", "l10", 0, node="n2", local=True)
    with pytest.raises(StopIteration):
        polls.send({"type": "ok", "value": []})


def test_a_failed_final_poll_is_tried_again_within_a_budget_and_info_gives_up_on_the_log() -> None:
    polls = LogWorkload(random.Random(1)).final_ops("n1", ["l0", "l1"])
    op = next(polls)
    retry = Op("poll", "l0", 0, node="n1", local=True, think=FINAL_RETRY_THINK)
    for _ in range(FINAL_RETRIES):
        op = polls.send({"type": "fail", "value": None})
        assert op == retry
    assert polls.send({"type": "fail", "value": None}) == Op("poll", "l1", 0, node="n1", local=True)
    assert next(LogWorkload(random.Random(1)).final_ops("n1", ["l0"])).local is True
    info = LogWorkload(random.Random(1)).final_ops("n1", ["l0", "l1"])
    next(info)
    assert info.send({"type": "info", "value": None}).key == "l1"


def test_next_offset_goes_past_the_highest_record_returned() -> None:
    assert next_offset([[3, 1], [5, 2]], 3) == 6
    assert next_offset([], 3) is None and next_offset(None, 0) is None and next_offset([[1, 1]], 4) is None
