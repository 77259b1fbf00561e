"""lsn-monotonicity: apply order per node, log agreement, and LSNs consistent with real time."""

from __future__ import annotations

from checkers.lsn import check_lsn_monotonicity
from checkers.verdict import UNKNOWN
from tests.checkers.scenario import HistoryBuilder, JournalBuilder, journals


def _replicated(nodes: tuple[str, ...] = ("n1", "n2", "n3")) -> list[JournalBuilder]:
    builders = [JournalBuilder(n) for n in nodes]
    for b in builders:
        b.start()
        for seq, key in enumerate(["a", "b", "a"], start=1):
            b.apply((1, seq), key, {"f": "write", "value": seq})
        b.apply((2, 1), "b", {"f": "write", "value": 9})
    return builders


def test_agreeing_ordered_journals_are_valid() -> None:
    verdict = check_lsn_monotonicity(journals(*_replicated()), None)
    assert verdict.valid is True
    assert verdict.stats["apply_events"] == 12 and verdict.stats["distinct_applied_lsns"] == 4


def test_apply_order_violation_names_both_events() -> None:
    builders = _replicated()
    n2 = builders[1]
    earlier = len(n2.events)  # the (2, 1) apply
    later = n2.apply((1, 4), "a", {"f": "write", "value": 4})
    verdict = check_lsn_monotonicity(journals(*builders), None)
    assert verdict.valid is False
    assert verdict.counterexample is not None
    first = verdict.counterexample["first"]
    assert first["kind"] == "apply-order" and first["node"] == "n2"
    assert (first["earlier"]["line"], first["later"]["line"]) == (earlier, later)
    assert first["later"]["lsn"] == [1, 4]
    assert "n2 applied LSN [1, 4]" in verdict.summary


def test_reapplying_after_a_restart_is_allowed() -> None:
    builders = _replicated()
    n3 = builders[2]
    n3.start()
    n3.apply((1, 1), "a", {"f": "write", "value": 1})
    n3.apply((1, 2), "b", {"f": "write", "value": 2})
    assert check_lsn_monotonicity(journals(*builders), None).valid is True


def test_log_divergence_across_nodes() -> None:
    n1, n2 = JournalBuilder("n1"), JournalBuilder("n2")
    n1.apply((1, 1), "a", {"f": "write", "value": 1})
    n2.apply((1, 1), "a", {"f": "write", "value": 1})
    n1_line = n1.apply((1, 2), "a", {"f": "write", "value": 2})
    n2_line = n2.apply((1, 2), "a", {"f": "write", "value": 3})
    verdict = check_lsn_monotonicity(journals(n1, n2), None)
    assert verdict.valid is False
    assert verdict.counterexample is not None
    first = verdict.counterexample["first"]
    assert first["kind"] == "log-divergence" and first["lsn"] == [1, 2]
    assert (first["first"]["node"], first["first"]["line"]) == ("n1", n1_line)
    assert (first["second"]["node"], first["second"]["line"]) == ("n2", n2_line)


def test_lsn_reused_on_one_node_across_a_restart_diverges() -> None:
    n1 = JournalBuilder("n1")
    n1.apply((3, 1), "a", {"f": "write", "value": 1})
    n1.start()
    n1.apply((3, 1), "b", {"f": "write", "value": 2})
    verdict = check_lsn_monotonicity(journals(n1), None)
    assert verdict.valid is False
    assert verdict.stats["violations"] == {"log-divergence": 1}


def _write(b: HistoryBuilder, process: int, key: str, value: int, lsn: tuple[int, int], **kw) -> int:
    return b.op(process, "write", key, value, lsn=lsn, **kw)


def test_realtime_order_of_writes_across_keys() -> None:
    b = HistoryBuilder()
    _write(b, 0, "x", 1, (1, 5))
    _write(b, 1, "y", 2, (1, 3))  # invoked after x's write completed: must be above (1, 5)
    verdict = check_lsn_monotonicity(None, b.history())
    assert verdict.valid is False
    assert verdict.counterexample is not None
    first = verdict.counterexample["first"]
    assert first["kind"] == "realtime-writes"
    assert (first["earlier"]["value"], first["later"]["value"]) == (1, 2)
    assert first["later"]["invoke_line"] == 3
    # Per key only, the two writes are unrelated.
    assert check_lsn_monotonicity(None, b.history(), scope="key").valid is True


def test_realtime_order_of_writes_on_one_key_and_concurrency() -> None:
    b = HistoryBuilder()
    b.invoke(0, "write", "x", 1)
    b.invoke(1, "write", "x", 2)
    b.complete(0, "ok", "write", "x", 1, lsn=(1, 2))
    b.complete(1, "ok", "write", "x", 2, lsn=(1, 1))  # concurrent: any order
    assert check_lsn_monotonicity(None, b.history(), scope="key").valid is True
    _write(b, 2, "x", 3, (1, 0))
    verdict = check_lsn_monotonicity(None, b.history(), scope="key")
    assert verdict.valid is False
    assert verdict.stats["violations"] == {"realtime-writes": 1}


def test_duplicate_lsn_for_different_writes() -> None:
    b = HistoryBuilder()
    b.invoke(0, "write", "x", 1)
    b.invoke(1, "write", "y", 2)
    b.complete(0, "ok", "write", "x", 1, lsn=(2, 7))
    b.complete(1, "ok", "write", "y", 2, lsn=(2, 7))
    verdict = check_lsn_monotonicity(None, b.history())
    assert verdict.valid is False
    assert verdict.counterexample is not None
    assert verdict.counterexample["first"]["kind"] == "duplicate-lsn"
    assert verdict.counterexample["first"]["lsn"] == [2, 7]


def test_deduplicated_put_retry_reacknowledges_the_old_lsn() -> None:
    b = HistoryBuilder()
    message = {"guid": "g1", "value": "m"}
    b.invoke(0, "put", "q", message)
    b.complete(0, "info", "put", "q", message, error="timeout")
    b.op(1, "put", "q", {"guid": "g2", "value": "m2"}, lsn=(1, 2))
    b.op(2, "put", "q", message, lsn=(1, 1))  # the retry of g1: its entry was (1, 1)
    b.op(3, "put", "q", message, lsn=(1, 1))
    assert check_lsn_monotonicity(None, b.history()).valid is True


def test_stale_read_lsn() -> None:
    b = HistoryBuilder()
    _write(b, 0, "x", 1, (1, 3))
    _write(b, 1, "x", 2, (1, 5))
    b.op(2, "read", "x", output=1, lsn=(1, 3), node="n4")
    b.op(3, "read", "y", output=None, lsn=(1, 1))  # another key: older LSNs are fine
    verdict = check_lsn_monotonicity(None, b.history())
    assert verdict.valid is False
    assert verdict.stats["violations"] == {"stale-read-lsn": 1}
    assert verdict.counterexample is not None
    first = verdict.counterexample["first"]
    assert first["later"]["node"] == "n4" and first["earlier"]["lsn"] == [1, 5]


def test_read_lsns_do_not_go_backwards_on_a_key() -> None:
    b = HistoryBuilder()
    b.op(0, "read", "x", output=2, lsn=(1, 5))
    b.op(1, "read", "x", output=1, lsn=(1, 4))
    assert check_lsn_monotonicity(None, b.history()).stats["violations"] == {"stale-read-lsn": 1}


def test_write_after_read_must_get_a_larger_lsn() -> None:
    b = HistoryBuilder()
    b.op(0, "read", "x", output=1, lsn=(1, 5))
    _write(b, 1, "x", 2, (1, 5))
    verdict = check_lsn_monotonicity(None, b.history())
    assert verdict.stats["violations"] == {"write-after-read-lsn": 1}
    b2 = HistoryBuilder()
    b2.op(0, "read", "x", output=1, lsn=(1, 5))
    _write(b2, 1, "x", 2, (1, 6))
    assert check_lsn_monotonicity(None, b2.history()).valid is True


def test_reply_lsn_applied_with_another_key() -> None:
    b = HistoryBuilder()
    _write(b, 0, "x", 1, (1, 1))
    n1 = JournalBuilder("n1")
    n1.apply((1, 1), "y", {"f": "write", "value": 1})
    verdict = check_lsn_monotonicity(journals(n1), b.history())
    assert verdict.stats["violations"] == {"reply-vs-log": 1}


def test_status_and_failed_operations_are_ignored() -> None:
    b = HistoryBuilder()
    _write(b, 0, "x", 1, (1, 5))
    b.op(1, "status", output={"node": "n1", "role": "leader", "term": 1}, lsn=(0, 1))
    b.op(2, "write", "x", 2, type="fail", lsn=(0, 2), error="not-leader")
    assert check_lsn_monotonicity(None, b.history()).valid is True


def test_no_lsns_is_unknown() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "x", 1)
    assert check_lsn_monotonicity(None, b.history()).valid == UNKNOWN
    assert check_lsn_monotonicity({}, None).valid == UNKNOWN


# -- groups: each shard, partition or queue numbers its own entries (CONTRACTS: LSNs compared per group) ----


def _group_apply(b: JournalBuilder, group: str, lsn: tuple[int, int], key: str, value: int) -> int:
    return b.add("apply", lsn=lsn, key=key, op={"f": "write", "value": value}, group=group)


def _group_write(b: HistoryBuilder, process: int, key: str, value: int, lsn: tuple[int, int], group: str) -> int:
    b.invoke(process, "write", key, value)
    return b.complete(process, "ok", "write", key, value, lsn=lsn, group=group)


def test_the_same_lsn_in_two_groups_is_two_entries() -> None:
    n1, n2 = JournalBuilder("n1"), JournalBuilder("n2")
    for b in (n1, n2):
        b.start()
        _group_apply(b, "shard-0", (1, 1), "a", 1)
        _group_apply(b, "shard-1", (1, 1), "b", 2)  # the same LSN, another group's log: fine
        _group_apply(b, "shard-0", (1, 2), "a", 3)
        _group_apply(b, "shard-1", (1, 2), "b", 4)  # each group's order increases on its own
    h = HistoryBuilder()
    _group_write(h, 0, "a", 1, (1, 1), "shard-0")
    _group_write(h, 1, "b", 2, (1, 1), "shard-1")
    _group_write(h, 2, "a", 3, (1, 2), "shard-0")
    _group_write(h, 3, "b", 4, (1, 2), "shard-1")
    verdict = check_lsn_monotonicity(journals(n1, n2), h.history())
    assert verdict.valid is True, verdict.summary
    assert verdict.stats["distinct_applied_lsns"] == 4 and verdict.stats["writes_with_lsn"] == 4
    # Without groups the same journals and history are one log that reuses LSNs: the groups matter.
    plain = HistoryBuilder()
    _write(plain, 0, "a", 1, (1, 1))
    _write(plain, 1, "b", 2, (1, 1))
    assert check_lsn_monotonicity(None, plain.history()).stats["violations"] == {"duplicate-lsn": 1}


def test_realtime_order_is_per_group_log() -> None:
    h = HistoryBuilder()
    _group_write(h, 0, "a", 1, (3, 9), "shard-0")
    _group_write(h, 1, "b", 2, (1, 1), "shard-1")  # later, smaller LSN, but another group's log
    assert check_lsn_monotonicity(None, h.history()).valid is True
    line = _group_write(h, 2, "c", 3, (3, 4), "shard-0")  # later and smaller in shard-0's own log
    verdict = check_lsn_monotonicity(None, h.history())
    assert verdict.valid is False
    first = verdict.counterexample["first"]  # type: ignore[index]
    assert first["kind"] == "realtime-writes" and first["group"] == "shard-0"
    assert first["later"]["complete_line"] == line and first["later"]["group"] == "shard-0"
    assert "a later write has a smaller LSN in group shard-0" in verdict.summary


def test_an_lsn_reused_within_one_group_is_caught_and_named() -> None:
    n1, n2 = JournalBuilder("n1"), JournalBuilder("n2")
    _group_apply(n1, "shard-1", (2, 1), "a", 1)
    _group_apply(n2, "shard-0", (2, 1), "b", 9)  # other group: fine
    line = _group_apply(n2, "shard-1", (2, 1), "c", 5)  # a new primary reusing (2, 1) in shard-1
    verdict = check_lsn_monotonicity(journals(n1, n2), None)
    assert verdict.valid is False
    assert verdict.stats["violations"] == {"log-divergence": 1}
    first = verdict.counterexample["first"]  # type: ignore[index]
    assert first["group"] == "shard-1" and first["lsn"] == [2, 1]
    assert (first["second"]["node"], first["second"]["line"]) == ("n2", line)
    assert "LSN [2, 1] in group shard-1 applied as two different entries" in verdict.summary
    # From the client's side: two writes acknowledged with one LSN of one group.
    h = HistoryBuilder()
    _group_write(h, 0, "a", 1, (2, 1), "shard-1")
    _group_write(h, 1, "b", 9, (2, 1), "shard-0")
    _group_write(h, 2, "c", 5, (2, 1), "shard-1")
    verdict = check_lsn_monotonicity(None, h.history())
    assert verdict.stats["violations"] == {"duplicate-lsn": 1}
    assert verdict.counterexample["first"]["group"] == "shard-1"  # type: ignore[index]
    assert "LSN [2, 1] in group shard-1 returned for two different writes" in verdict.summary


def test_apply_order_is_kept_per_group() -> None:
    n1 = JournalBuilder("n1")
    n1.start()
    _group_apply(n1, "shard-0", (1, 5), "a", 1)
    _group_apply(n1, "shard-1", (1, 2), "b", 2)  # interleaved groups: each increases on its own
    _group_apply(n1, "shard-0", (1, 6), "a", 3)
    assert check_lsn_monotonicity(journals(n1), None).valid is True
    line = _group_apply(n1, "shard-1", (1, 1), "b", 4)
    verdict = check_lsn_monotonicity(journals(n1), None)
    assert verdict.stats["violations"] == {"apply-order": 1}
    first = verdict.counterexample["first"]  # type: ignore[index]
    assert first["group"] == "shard-1" and first["later"]["line"] == line
    assert "n1 applied LSN [1, 1] in group shard-1" in verdict.summary


def test_reply_vs_log_looks_in_the_operations_group() -> None:
    n1 = JournalBuilder("n1")
    _group_apply(n1, "shard-0", (1, 1), "y", 1)
    _group_apply(n1, "shard-1", (1, 1), "x", 1)
    h = HistoryBuilder()
    _group_write(h, 0, "x", 1, (1, 1), "shard-1")
    assert check_lsn_monotonicity(journals(n1), h.history()).valid is True
    h2 = HistoryBuilder()
    _group_write(h2, 0, "x", 1, (1, 1), "shard-0")
    verdict = check_lsn_monotonicity(journals(n1), h2.history())
    assert verdict.stats["violations"] == {"reply-vs-log": 1}
    assert verdict.counterexample["first"]["group"] == "shard-0"  # type: ignore[index]
