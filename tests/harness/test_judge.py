"""Judging a run: what the run itself shows cannot be judged (``harness.judge.observed_not_applicable``)."""

from __future__ import annotations

import json
from typing import Any

from checkers.history import parse_history
from harness.judge import SINGLE_LEADER, observed_not_applicable


def _status_history(*terms: Any) -> list[str]:
    """One ok status observation per term given, as the interpreter's pollers record them."""
    lines = []
    for i, term in enumerate(terms):
        status = {"node": "n1", "role": "leader", "term": term, "leader": "n1", "commit_lsn": None, "last_lsn": None}
        lines.append({"index": 2 * i, "time": 10 * i, "process": 10, "type": "invoke", "f": "status", "key": None,
                      "value": None, "node": "n1"})
        lines.append({"index": 2 * i + 1, "time": 10 * i + 5, "process": 10, "type": "ok", "f": "status",
                      "key": None, "value": status, "node": "n1"})
    return [json.dumps(line) for line in lines]


def test_a_system_whose_every_status_has_no_term_makes_single_leader_per_term_not_applicable() -> None:
    found = observed_not_applicable(parse_history(_status_history(None, None)), None)
    assert SINGLE_LEADER in found


def test_one_status_with_a_term_keeps_single_leader_per_term_applicable() -> None:
    assert observed_not_applicable(parse_history(_status_history(None, 3)), None) == {}


def test_terms_reported_per_group_keep_single_leader_per_term_applicable() -> None:
    lines = [json.loads(line) for line in _status_history(None, None)]
    lines[1]["value"]["groups"] = [{"group": "q1", "role": "leader", "term": 4, "leader": "n1"}]
    assert observed_not_applicable(parse_history([json.dumps(line) for line in lines]), None) == {}
    lines[1]["value"]["groups"] = [{"group": "q1", "role": "leader", "term": None, "leader": "n1"}]
    assert SINGLE_LEADER in observed_not_applicable(parse_history([json.dumps(line) for line in lines]), None)
