"""The log checker against a correct log model: its histories are always valid, and one mutation of a
history (a record dropped, two offsets swapped, a value duplicated, a value rewritten) is always caught."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.log import check_log
from tests.checkers.scenario import HistoryBuilder

NODES = ("n1", "n2", "n3")
BATCH = 3


class Model:
    """A correct replicated log: appends take effect when acknowledged (or, ``info``, maybe never); polls
    read the committed records from the process's position, at most a batch."""

    def __init__(self, rng: random.Random, keys: int, start: int) -> None:
        self.rng = rng
        self.keys = [f"l{i}" for i in range(keys)]
        self.start = start  # the first offset (a real log may start at 1)
        self.logs: dict[str, list[int]] = {k: [] for k in self.keys}
        self.events: list[dict[str, Any]] = []  # invoke / complete events, in order
        self.acked: list[tuple[str, int, int]] = []  # (key, offset, value)

    def run(self, steps: int, processes: int) -> None:
        outstanding: dict[int, dict[str, Any]] = {}
        ids = list(range(processes))
        positions: dict[int, dict[str, int]] = {p: {} for p in ids}
        counters: dict[int, int] = {}
        next_id = processes
        for _ in range(steps):
            slot = self.rng.randrange(processes)
            process = ids[slot]
            pending = outstanding.pop(process, None)
            if pending is None:
                key = self.rng.choice(self.keys)
                if self.rng.random() < 0.5:
                    counters[process] = counters.get(process, 0) + 1
                    value = process * 1_000_000 + counters[process]
                    self.events.append({"process": process, "type": "invoke", "f": "append", "key": key,
                                        "value": value})
                    outstanding[process] = {"f": "append", "key": key, "value": value}
                else:
                    start = positions[process].get(key, self.start)
                    self.events.append({"process": process, "type": "invoke", "f": "poll", "key": key,
                                        "value": start})
                    outstanding[process] = {"f": "poll", "key": key, "value": start}
                continue
            key, log = pending["key"], self.logs[pending["key"]]
            if pending["f"] == "append":
                outcome = self.rng.choices(("ok", "info", "fail"), (8, 1, 1))[0]
                value = pending["value"]
                if outcome == "ok" or (outcome == "info" and self.rng.random() < 0.5):
                    log.append(value)
                    offset = self.start + len(log) - 1
                if outcome == "ok":
                    self.acked.append((key, offset, value))
                    self.events.append({"process": process, "type": "ok", "f": "append", "key": key,
                                        "value": [offset, value]})
                else:
                    self.events.append({"process": process, "type": outcome, "f": "append", "key": key,
                                        "value": value})
                if outcome == "info":
                    ids[slot] = next_id
                    positions[next_id] = {}
                    next_id += 1
                continue
            start = pending["value"]
            records = [[self.start + i, v] for i, v in enumerate(log)][start - self.start:][:BATCH]
            self.events.append({"process": process, "type": "ok", "f": "poll", "key": key, "value": records})
            if records:
                positions[process][key] = records[-1][0] + 1
        for process, pending in outstanding.items():  # what is left ends info, having happened or not
            if pending["f"] == "append" and self.rng.random() < 0.5:
                self.logs[pending["key"]].append(pending["value"])
            self.events.append({"process": process, "type": "info", "f": pending["f"], "key": pending["key"],
                                "value": None})

    def final_reads(self) -> list[dict[str, Any]]:
        """Each node's final polls of every key: batches from the start until an empty one."""
        events = []
        for n, node in enumerate(NODES):
            process = 10_000 + n
            for key in self.keys:
                records = [[self.start + i, v] for i, v in enumerate(self.logs[key])]
                start = 0
                while True:
                    batch = [r for r in records if r[0] >= start][:BATCH]
                    events.append({"process": process, "type": "invoke", "f": "poll", "key": key, "value": start,
                                   "node": node, "final": True})
                    events.append({"process": process, "type": "ok", "f": "poll", "key": key, "value": batch,
                                   "node": node})
                    if not batch:
                        break
                    start = batch[-1][0] + 1
        return events


def history(events: list[dict[str, Any]]):
    b = HistoryBuilder()
    for event in events:
        extra = {k: v for k, v in event.items() if k not in ("process", "type", "f", "key", "value")}
        b.event(event["process"], event["type"], event["f"], event["key"], event["value"], **extra)
    return b.history()


def generated(seed: int) -> tuple[Model, list[dict[str, Any]]]:
    rng = random.Random(seed)
    model = Model(rng, keys=rng.randint(1, 3), start=rng.choice((0, 1)))
    model.run(steps=rng.randint(10, 120), processes=rng.randint(1, 5))
    return model, model.events + model.final_reads()


@given(seed=st.integers(0, 2**32))
@settings(max_examples=300, deadline=None)
def test_histories_of_a_correct_log_are_valid(seed: int) -> None:
    _, events = generated(seed)
    verdict = check_log(history(events))
    assert verdict.valid is True, verdict.summary


def _final_polls(events: list[dict[str, Any]]) -> list[int]:
    """Indexes of the ok completions of final polls that returned records."""
    return [i for i, e in enumerate(events) if e["f"] == "poll" and e["type"] == "ok" and e.get("node")
            and e["value"]]


@given(seed=st.integers(0, 2**32), pick=st.integers(0, 2**16))
@settings(max_examples=200, deadline=None)
def test_dropping_an_acknowledged_record_from_a_final_read_is_lost(seed: int, pick: int) -> None:
    model, events = generated(seed)
    if not model.acked:
        return
    key, offset, value = model.acked[pick % len(model.acked)]
    node = NODES[pick % len(NODES)]
    for event in events:
        if event.get("node") == node and event["type"] == "ok" and event["key"] == key:
            event["value"] = [r for r in event["value"] if r[0] != offset]
    verdict = check_log(history(events))
    assert verdict.valid is False and "lost" in verdict.counterexample["counts"], verdict.summary
    assert any(r["value"] == value and node in r["missing_on"]
               for r in verdict.counterexample["log_anomalies"]["lost"])


@given(seed=st.integers(0, 2**32), pick=st.integers(0, 2**16))
@settings(max_examples=200, deadline=None)
def test_swapping_two_offsets_in_one_node_s_final_read_is_inconsistent(seed: int, pick: int) -> None:
    _, events = generated(seed)
    polls = [i for i in _final_polls(events) if len(events[i]["value"]) >= 2]
    if not polls:
        return
    batch = events[polls[pick % len(polls)]]["value"]
    batch[0][1], batch[1][1] = batch[1][1], batch[0][1]
    verdict = check_log(history(events))
    assert verdict.valid is False and "inconsistent-offsets" in verdict.counterexample["counts"], verdict.summary


@given(seed=st.integers(0, 2**32), pick=st.integers(0, 2**16))
@settings(max_examples=200, deadline=None)
def test_a_value_at_a_second_offset_is_duplicated(seed: int, pick: int) -> None:
    model, events = generated(seed)
    polls = _final_polls(events)
    if not polls:
        return
    index = polls[pick % len(polls)]
    batch = events[index]["value"]
    # the batch's last record again, one offset later: the next poll of this node starts after it
    batch.append([batch[-1][0] + 1, batch[-1][1]])
    verdict = check_log(history(events))
    assert verdict.valid is False and "duplicated" in verdict.counterexample["counts"], verdict.summary


@given(seed=st.integers(0, 2**32), pick=st.integers(0, 2**16))
@settings(max_examples=200, deadline=None)
def test_rewriting_the_value_at_an_offset_is_caught(seed: int, pick: int) -> None:
    _, events = generated(seed)
    polls = [i for i, e in enumerate(events) if e["f"] == "poll" and e["type"] == "ok" and e["value"]]
    if not polls:
        return
    batch = events[polls[pick % len(polls)]]["value"]
    batch[pick % len(batch)][1] = 999_999_999  # nobody appended it
    verdict = check_log(history(events))
    assert verdict.valid is False and "phantom" in verdict.counterexample["counts"], verdict.summary
    assert "inconsistent-offsets" in verdict.counterexample["counts"]  # every record is read by 3 nodes
