"""committed-data durability: lost acknowledged writes and puts, never-written values, duplicates."""

from __future__ import annotations

from checkers.durability import check_durability, final_phase, has_final_reads
from checkers.verdict import UNKNOWN
from tests.checkers.scenario import HistoryBuilder, JournalBuilder, journals

NODES = ("n1", "n2", "n3")


def _heal(b: HistoryBuilder) -> None:
    b.invoke("nemesis", "partition", None, {"n1": ["n2", "n3"]})
    b.complete("nemesis", "ok", "partition", None, {"n1": ["n2", "n3"]})
    b.invoke("nemesis", "heal")
    b.complete("nemesis", "ok", "heal")


def _final_reads(b: HistoryBuilder, key: str, values: dict[str, object], lsns: dict | None = None) -> None:
    for i, (node, value) in enumerate(values.items()):
        b.op(1000 + i, "read", key, output=value, node=node, lsn=(lsns or {}).get(node))


# -- registers -----------------------------------------------------------------------------------------


def test_last_write_present_everywhere_is_valid() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1, node="n1")
    _heal(b)
    b.op(1, "write", "k", 2, node="n1")
    _final_reads(b, "k", dict.fromkeys(NODES, 2))
    verdict = check_durability(b.history())
    assert verdict.valid is True
    assert verdict.stats["final_reads"] == 3 and verdict.stats["ok_writes"] == 2


def test_overwritten_value_read_back_is_a_lost_write() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1)
    acked = b.op(1, "write", "k", 2, node="n1")
    _heal(b)
    _final_reads(b, "k", {"n1": 2, "n2": 1, "n3": 1})
    verdict = check_durability(b.history())
    assert verdict.valid is False
    cx = verdict.counterexample
    assert cx is not None
    (lost,) = cx["lost"]
    assert (lost["key"], lost["value"], lost["acked_line"]) == ("k", 2, acked)
    assert lost["acked_at"] == b.events[acked - 1]["time"]
    assert lost["missing_on"] == ["n2", "n3"]
    assert "value 2 acked at" in verdict.summary and "missing on n2, n3" in verdict.summary


def test_every_lost_write_is_named_where_only_the_first_are_described() -> None:
    """509 lost: the first MAX_REPORTED are described in full, ``lost_all`` names every one (key, value,
    history line of its acknowledgement), and the summary gives seconds, not nanoseconds."""
    from checkers.durability import MAX_REPORTED

    b = HistoryBuilder()
    b.op(0, "write", "k", 0, node="n1")
    lines = [b.op(1, "write", "k", value, node="n1") for value in range(1, MAX_REPORTED + 21)]
    _heal(b)
    _final_reads(b, "k", dict.fromkeys(NODES, 0))
    verdict = check_durability(b.history())
    cx = verdict.counterexample
    assert verdict.valid is False and cx is not None
    assert len(cx["lost"]) == MAX_REPORTED and verdict.stats["anomalies"]["lost"] == MAX_REPORTED + 20
    assert cx["lost_all"] == [["k", value, line] for value, line in zip(range(1, MAX_REPORTED + 21), lines, strict=True)]
    assert " acked at t=" in verdict.summary and " s (history line" in verdict.summary
    assert " ns " not in verdict.summary


def test_concurrent_writes_may_end_in_either_order() -> None:
    b = HistoryBuilder()
    b.invoke(0, "write", "k", 1)
    b.invoke(1, "write", "k", 2)
    b.complete(1, "ok", "write", "k", 2)
    b.complete(0, "ok", "write", "k", 1)
    _heal(b)
    _final_reads(b, "k", {"n1": 1, "n2": 2})  # each alone is consistent with some order
    assert check_durability(b.history()).valid is True


def test_info_writes_may_or_may_not_be_present() -> None:
    for final in (1, 2):
        b = HistoryBuilder()
        b.op(0, "write", "k", 1)
        b.invoke(1, "write", "k", 2)
        b.complete(1, "info", "write", "k", 2, error="timeout")
        _heal(b)
        _final_reads(b, "k", {"n1": final})
        assert check_durability(b.history()).valid is True, final


def test_info_write_invoked_before_an_ok_write_may_land_after_it() -> None:
    b = HistoryBuilder()
    b.invoke(0, "write", "k", 1)
    b.complete(0, "info", "write", "k", 1)
    b.op(1, "write", "k", 2)
    _heal(b)
    _final_reads(b, "k", {"n1": 1})
    assert check_durability(b.history()).valid is True


def test_never_written_key_after_an_acked_write() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1)
    _heal(b)
    _final_reads(b, "k", {"n2": None})
    verdict = check_durability(b.history())
    assert verdict.valid is False
    assert verdict.counterexample is not None
    assert verdict.counterexample["lost"][0]["missing_on"] == ["n2"]


def test_read_of_a_value_nothing_wrote() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1)
    line = b.op(1, "read", "k", output=99, node="n3")
    verdict = check_durability(b.history(), final_after=10_000)
    assert verdict.valid is False
    assert verdict.counterexample is not None
    (phantom,) = verdict.counterexample["never_written"]
    assert (phantom["value"], phantom["node"], phantom["read"]["complete_line"]) == (99, "n3", line)
    assert phantom["reason"] == "no write or cas of this key wrote it"


def test_read_of_a_failed_write_and_of_a_future_write() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1, type="fail", error="not-leader")
    b.op(1, "read", "k", output=1)
    b.op(2, "read", "k", output=3)
    b.op(3, "write", "k", 3)
    verdict = check_durability(b.history(), final_after=10_000)
    assert verdict.counterexample is not None
    reasons = [p["reason"] for p in verdict.counterexample["never_written"]]
    assert reasons == ["every write of it failed", "its only writes were invoked after the read completed"]


def test_lsn_rule_finds_a_loss_real_time_cannot() -> None:
    b = HistoryBuilder()
    b.invoke(0, "write", "k", 1)
    b.invoke(1, "write", "k", 2)
    b.complete(0, "ok", "write", "k", 1, lsn=(1, 1))
    acked = b.complete(1, "ok", "write", "k", 2, lsn=(1, 2))
    _heal(b)
    _final_reads(b, "k", {"n1": 1}, lsns={"n1": (1, 1)})
    verdict = check_durability(b.history())
    assert verdict.valid is False
    assert verdict.counterexample is not None
    (lost,) = verdict.counterexample["lost"]
    assert (lost["value"], lost["lsn"], lost["acked_line"]) == (2, [1, 2], acked)
    assert [r[:4] for r in lost["evidence"][0]["rules"]] == ["LSN:"]


def test_cas_writes_its_new_value() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1)
    b.op(1, "cas", "k", [1, 5])
    b.op(2, "cas", "k", [1, 6], type="fail", error="precondition-failed")
    _heal(b)
    _final_reads(b, "k", {"n1": 5})
    assert check_durability(b.history(), model="cas-register").valid is True
    _final_reads(b, "k", {"n2": 1})
    verdict = check_durability(b.history(), model="cas-register")
    assert verdict.valid is False
    assert verdict.counterexample is not None
    assert verdict.counterexample["lost"][0]["f"] == "cas"


def test_writes_concurrent_with_the_final_read_are_not_required() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1)
    _heal(b)
    b.invoke(1, "write", "k", 2)
    b.op(1000, "read", "k", output=1, node="n1")
    b.complete(1, "ok", "write", "k", 2)
    assert check_durability(b.history()).valid is True


def test_final_phase_rules() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1)
    b.op(1, "read", "k", output=1)
    history = b.history()
    assert final_phase(history) is None and not has_final_reads(history)
    assert check_durability(history).valid == UNKNOWN
    assert check_durability(history, final_after=0).valid is True  # the read was invoked at 2
    assert check_durability(history, final_after=2).valid == UNKNOWN  # not strictly after: no final read
    marked = HistoryBuilder()
    marked.op(0, "write", "k", 1)
    marked.op(1, "write", "k", 2)
    marked.op(2, "read", "k", output=1)  # not final: a stale read is a linearizability matter
    marked.op(3, "read", "k", output=2, final=True)
    phase = final_phase(marked.history())
    assert phase is not None and phase.rule == "operations marked final"
    assert check_durability(marked.history()).valid is True


def test_keys_without_final_read_are_counted() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "a", 1)
    b.op(1, "write", "b", 1)
    _heal(b)
    _final_reads(b, "a", {"n1": 1})
    verdict = check_durability(b.history())
    assert verdict.valid is True
    assert verdict.stats["keys_written_without_final_read"] == 1


def _journal(node: str, applied: list[tuple[tuple[int, int], str]]) -> JournalBuilder:
    j = JournalBuilder(node)
    j.start()
    for lsn, key in applied:
        j.apply(lsn, key, {"f": "write"})
    return j


def test_journals_name_the_nodes_lacking_a_lost_write() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1, lsn=(1, 1))
    b.op(1, "write", "k", 2, lsn=(1, 2))
    b.op(2, "write", "j", 7, lsn=(1, 3))
    _heal(b)
    _final_reads(b, "k", {"n2": 1}, lsns={"n2": (1, 1)})
    js = journals(
        _journal("n1", [((1, 1), "k"), ((1, 2), "k"), ((1, 3), "j")]),
        _journal("n2", [((1, 1), "k"), ((1, 3), "j")]),
        _journal("n3", [((1, 1), "k")]),
    )
    verdict = check_durability(b.history(), js)
    assert verdict.valid is False
    assert verdict.counterexample is not None
    (lost,) = verdict.counterexample["lost"]
    assert lost["journals"] == {"applied": ["n1"], "lacking": ["n2"], "behind": ["n3"]}
    (evidence,) = lost["evidence"]  # one final read, found by both rules
    assert evidence["node"] == "n2" and len(evidence["rules"]) == 2
    assert verdict.stats["anomalies"] == {"lost": 1, "missing-on-node": 1}
    assert "missing on n2" in verdict.summary


def test_acked_write_missing_from_a_journal_alone_is_an_anomaly() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "k", 1, lsn=(1, 1))
    b.op(1, "write", "k", 2, lsn=(2, 1))
    _heal(b)
    _final_reads(b, "k", {"n1": 2}, lsns={"n1": (2, 1)})
    good = _journal("n1", [((1, 1), "k"), ((2, 1), "k")])
    assert check_durability(b.history(), journals(good)).valid is True
    skipped = _journal("n2", [((2, 1), "k")])  # applied past (1, 1) without it
    verdict = check_durability(b.history(), journals(good, skipped))
    assert verdict.valid is False
    assert verdict.counterexample is not None
    (missing,) = verdict.counterexample["missing_on_node"]
    assert (missing["lsn"], missing["lacking"]) == ([1, 1], ["n2"])


def test_journals_compare_lsns_within_the_writes_group() -> None:
    b = HistoryBuilder()
    b.invoke(0, "write", "k", 1)
    b.complete(0, "ok", "write", "k", 1, lsn=(1, 4), group="shard-1")
    _heal(b)
    _final_reads(b, "k", {"n1": 1})
    n1, n2, n3 = JournalBuilder("n1"), JournalBuilder("n2"), JournalBuilder("n3")
    for j in (n1, n2, n3):
        j.start()
    n1.add("apply", lsn=(1, 4), key="k", op={"f": "write"}, group="shard-1")
    n2.add("apply", lsn=(1, 4), key="j", op={"f": "write"}, group="shard-0")  # another group's (1, 4)
    n2.add("apply", lsn=(9, 9), key="j", op={"f": "write"}, group="shard-0")  # far ahead in shard-0 only
    n2.add("apply", lsn=(1, 2), key="k", op={"f": "write"}, group="shard-1")  # behind in shard-1
    n3.add("apply", lsn=(1, 5), key="k", op={"f": "write"}, group="shard-1")  # past (1, 4) without it
    verdict = check_durability(b.history(), journals(n1, n2, n3))
    assert verdict.valid is False
    assert verdict.counterexample is not None
    (missing,) = verdict.counterexample["missing_on_node"]
    assert (missing["lsn"], missing["lacking"]) == ([1, 4], ["n3"])
    assert missing["journals"] == {"applied": ["n1"], "lacking": ["n3"], "behind": ["n2"]}


def test_kv_model_is_not_judged() -> None:
    b = HistoryBuilder()
    b.op(0, "put", "k", "x")
    assert check_durability(b.history(), model="kv").valid == UNKNOWN


# -- queues --------------------------------------------------------------------------------------------


def _put(b: HistoryBuilder, process: int, guid: str, type: str = "ok") -> int:
    message = {"guid": guid, "value": f"m-{guid}"}
    b.invoke(process, "put", "q", message)
    return b.complete(process, type, "put", "q", message)


def _consume(b: HistoryBuilder, process: int, guid: str | None, **kw) -> int:
    return b.op(
        process, "consume", "q", output=None if guid is None else {"guid": guid, "value": f"m-{guid}"}, **kw
    )


def test_queue_every_put_delivered_once_is_valid() -> None:
    b = HistoryBuilder()
    for i, guid in enumerate(["g1", "g2", "g3"]):
        _put(b, i, guid)
    _consume(b, 10, "g1")
    _heal(b)
    _consume(b, 11, "g2")
    _consume(b, 11, "g3")
    _consume(b, 11, None)
    verdict = check_durability(b.history())
    assert verdict.valid is True
    assert verdict.stats["model"] == "queue" and verdict.stats["queues_drained"] == 1


def test_queue_lost_put() -> None:
    b = HistoryBuilder()
    _put(b, 0, "g1")
    acked = _put(b, 1, "g2")
    _heal(b)
    _consume(b, 11, "g1")
    _consume(b, 11, None)
    verdict = check_durability(b.history(), model="queue")
    assert verdict.valid is False
    assert verdict.counterexample is not None
    (lost,) = verdict.counterexample["lost"]
    assert (lost["guid"], lost["acked_line"]) == ("g2", acked)
    assert "GUID 'g2'" in verdict.summary


def test_queue_not_drained_is_unknown() -> None:
    b = HistoryBuilder()
    _put(b, 0, "g1")
    _put(b, 1, "g2")
    _heal(b)
    _consume(b, 11, "g1")
    verdict = check_durability(b.history(), model="queue")
    assert verdict.valid == UNKNOWN
    assert "did not observe the queue empty" in verdict.summary


def test_queue_drain_operation_and_empty_error() -> None:
    b = HistoryBuilder()
    _put(b, 0, "g1")
    _put(b, 1, "g2")
    _heal(b)
    b.op(11, "drain", "q", output=[{"guid": "g1"}, {"guid": "g2"}])
    assert check_durability(b.history(), model="queue").valid is True
    c = HistoryBuilder()
    _put(c, 0, "g1")
    _heal(c)
    _consume(c, 11, "g1")
    c.op(11, "consume", "q", type="fail", error="empty")
    assert check_durability(c.history(), model="queue").valid is True


def test_queue_duplicate_delivery_without_confirms() -> None:
    b = HistoryBuilder()
    _put(b, 0, "g1")
    first = _consume(b, 10, "g1")
    _heal(b)
    second = _consume(b, 11, "g1")
    _consume(b, 11, None)
    verdict = check_durability(b.history(), model="queue")
    assert verdict.valid is False
    assert verdict.counterexample is not None
    (dup,) = verdict.counterexample["duplicates"]
    assert (dup["guid"], dup["first"]["complete_line"], dup["second"]["complete_line"]) == (
        "g1",
        first,
        second,
    )


def test_queue_redelivery_before_confirm_is_allowed_after_confirm_is_not() -> None:
    b = HistoryBuilder()
    _put(b, 0, "g1")
    _consume(b, 10, "g1")
    b.invoke(12, "confirm", "q", "g1")
    b.complete(12, "info", "confirm", "q", "g1")  # the consumer went away: redelivery is expected
    _consume(b, 11, "g1")
    b.op(11, "confirm", "q", "g1")
    _heal(b)
    _consume(b, 13, None)
    assert check_durability(b.history(), model="queue").valid is True
    again = _consume(b, 13, "g1")
    verdict = check_durability(b.history(), model="queue")
    assert verdict.valid is False
    assert verdict.counterexample is not None
    (dup,) = verdict.counterexample["duplicates"]
    assert dup["reason"] == "delivered again after an ok confirm" and dup["second"]["complete_line"] == again


def test_queue_delivery_of_a_message_never_put() -> None:
    b = HistoryBuilder()
    _put(b, 0, "g1", type="fail")
    _heal(b)
    _consume(b, 11, "g1")
    _consume(b, 11, "g9")
    _consume(b, 11, None)
    verdict = check_durability(b.history(), model="queue")
    assert verdict.counterexample is not None
    reasons = {p["guid"]: p["reason"] for p in verdict.counterexample["never_written"]}
    assert reasons == {"g1": "every put of it failed", "g9": "no put of this GUID to this queue was invoked"}


def test_queue_info_puts_may_or_may_not_appear() -> None:
    b = HistoryBuilder()
    _put(b, 0, "g1", type="info")
    _put(b, 1, "g2", type="info")
    _put(b, 2, "g3")
    _consume(b, 10, "g1")
    _heal(b)
    _consume(b, 11, "g3")
    _consume(b, 11, None)
    assert check_durability(b.history(), model="queue").valid is True


def test_queue_an_info_consume_excuses_no_loss() -> None:
    """The message an info consume took was never confirmed: the queue must deliver it again."""
    b = HistoryBuilder()
    _put(b, 0, "g1")
    b.invoke(10, "consume", "q")
    b.complete(10, "info", "consume", "q")
    _heal(b)
    _consume(b, 11, None)
    verdict = check_durability(b.history(), model="queue")
    assert verdict.valid is False
    assert verdict.stats["anomalies"] == {"lost": 1} and verdict.stats["info_consumes"] == 1
    # ... and where it was delivered again, nothing is lost.
    c = HistoryBuilder()
    _put(c, 0, "g1")
    c.invoke(10, "consume", "q")
    c.complete(10, "info", "consume", "q")
    _heal(c)
    c.op(11, "consume", "q", output={"guid": "g1", "value": "m-g1", "redelivered": True})
    c.op(11, "confirm", "q", "g1")
    _consume(c, 11, None)
    assert check_durability(c.history(), model="queue").valid is True


def test_queue_guid_field_on_the_invoke() -> None:
    b = HistoryBuilder()
    b.invoke(0, "put", "q", "payload", guid="g1")
    b.complete(0, "ok", "put", "q", "payload")
    _heal(b)
    b.op(11, "consume", "q", output={"guid": "g1", "value": "payload"})
    _consume(b, 11, None)
    assert check_durability(b.history(), model="queue").valid is True


def test_queue_info_consumes_excuse_no_loss_whatever_their_number() -> None:
    b = HistoryBuilder()
    for i, guid in enumerate(["g1", "g2", "g3"]):
        _put(b, i, guid)
    for process in (10, 11):
        b.invoke(process, "consume", "q")
        b.complete(process, "info", "consume", "q")
    _heal(b)
    _consume(b, 13, "g1")
    b.op(13, "confirm", "q", "g1")  # confirms on the queue: at-least-once
    _consume(b, 13, None)
    verdict = check_durability(b.history(), model="queue")
    assert verdict.valid is False
    assert verdict.stats["anomalies"] == {"lost": 2}
    assert verdict.counterexample is not None
    assert sorted(r["guid"] for r in verdict.counterexample["lost"]) == ["g2", "g3"]
    rules = verdict.counterexample["lost"][0]["evidence"][0]["rules"]
    assert rules == ["never delivered, and the final drain observed the queue empty"]


def test_queue_redeliveries_are_counted_and_summarised_not_anomalies() -> None:
    b = HistoryBuilder()
    _put(b, 0, "g1")
    _put(b, 1, "g2")
    _consume(b, 10, "g1")  # never confirmed: delivered again, twice
    b.op(11, "consume", "q", output={"guid": "g1", "value": "m-g1", "redelivered": True})
    _consume(b, 12, "g2")
    b.op(12, "confirm", "q", "g2")
    _heal(b)
    b.op(13, "consume", "q", output={"guid": "g1", "value": "m-g1", "redelivered": True})
    b.op(13, "confirm", "q", "g1")
    _consume(b, 13, None)
    verdict = check_durability(b.history(), model="queue")
    assert verdict.valid is True
    assert (verdict.stats["redelivered"], verdict.stats["redeliveries"]) == (1, 2)
    assert "1 message delivered again before a confirm (at-least-once: allowed)" in verdict.summary
    # A forbidden duplicate beside them: the summary still names the allowed ones.
    again = _consume(b, 14, "g2")
    verdict = check_durability(b.history(), model="queue")
    assert verdict.valid is False and verdict.stats["anomalies"] == {"duplicate": 1}
    assert verdict.counterexample is not None
    (dup,) = verdict.counterexample["duplicates"]
    assert dup["guid"] == "g2" and dup["second"]["complete_line"] == again
    assert "(1 message also delivered again before a confirm: allowed)" in verdict.summary


def test_queue_a_message_never_confirmed_cannot_leave_an_at_least_once_queue() -> None:
    """Delivered once, never confirmed, and the drain finds the queue empty: the queue dropped it instead
    of delivering it again (what the no-redelivery bug does to a consumer that went away)."""
    b = HistoryBuilder()
    _put(b, 0, "g1")
    _put(b, 1, "g2")
    first = _consume(b, 10, "g1")  # its consumer never confirms
    _consume(b, 11, "g2")
    b.op(11, "confirm", "q", "g2")
    _heal(b)
    _consume(b, 12, None)
    verdict = check_durability(b.history(), model="queue")
    assert verdict.valid is False and verdict.stats["anomalies"] == {"dropped": 1}
    assert verdict.counterexample is not None
    (dropped,) = verdict.counterexample["dropped"]
    assert dropped["guid"] == "g1" and dropped["deliveries"][0]["complete_line"] == first
    assert "GUID 'g1' on queue 'q' delivered 1 time, never confirmed" in verdict.summary
    # A confirm whose answer was lost and whose GUID the history omits may have been g1's.
    b.invoke(10, "confirm", "q", None)
    b.complete(10, "info", "confirm", "q", None, error="timeout")
    assert check_durability(b.history(), model="queue").valid is True
    # Delivered again and confirmed: nothing dropped.
    c = HistoryBuilder()
    _put(c, 0, "g1")
    _consume(c, 10, "g1")
    _heal(c)
    c.op(12, "consume", "q", output={"guid": "g1", "value": "m-g1", "redelivered": True})
    c.op(12, "confirm", "q", "g1")
    _consume(c, 12, None)
    assert check_durability(c.history(), model="queue").valid is True


# -- what a queue system declares (workloads.queue.Delivery) ---------------------------------------------


def test_queue_without_dedup_counts_a_message_enqueued_twice_instead_of_a_duplicate() -> None:
    """A broker that does not de-duplicate re-sent puts (declared ``dedup`` false) may deliver a message
    again after its confirm: counted and named, not an anomaly; the same history is invalid where the
    system promised de-duplication."""
    b = HistoryBuilder()
    _put(b, 0, "g1")
    _consume(b, 10, "g1")
    b.op(10, "confirm", "q", "g1")
    _heal(b)
    again = _consume(b, 11, "g1")
    b.op(11, "confirm", "q", "g1")
    _consume(b, 11, None)
    assert check_durability(b.history(), model="queue").valid is False
    promised = check_durability(b.history(), model="queue", delivery={"dedup": True, "redelivery": "timeout"})
    assert promised.valid is False and promised.stats["anomalies"] == {"duplicate": 1}
    verdict = check_durability(b.history(), model="queue", delivery={"dedup": False, "redelivery": "close"})
    assert verdict.valid is True
    assert verdict.stats["enqueued_twice"] == 1
    assert verdict.stats["enqueued_twice_examples"][0]["second"]["complete_line"] == again
    assert "1 message enqueued twice" in verdict.summary
    assert verdict.stats["delivery"] == {"dedup": False, "redelivery": "close"}
    # Without de-duplication a loss is still a loss.
    _put(b, 1, "g2")
    lost = check_durability(b.history(), model="queue", delivery={"dedup": False})
    assert lost.valid is False and lost.stats["anomalies"] == {"lost": 1}
    assert "enqueued twice" in lost.summary


def test_queue_without_redelivery_nothing_unconfirmed_is_called_dropped() -> None:
    """A system that declares no redelivery (a message taken and never confirmed is gone with its
    consumer) is not judged on unconfirmed messages; where it declares redelivery, it is."""
    b = HistoryBuilder()
    _put(b, 0, "g1")
    _put(b, 1, "g2")
    _consume(b, 10, "g1")  # never confirmed
    _consume(b, 11, "g2")
    b.op(11, "confirm", "q", "g2")
    _heal(b)
    _consume(b, 12, None)
    for redelivery in ("timeout", "close"):
        verdict = check_durability(b.history(), model="queue", delivery={"redelivery": redelivery})
        assert verdict.valid is False and verdict.stats["anomalies"] == {"dropped": 1}
    assert check_durability(b.history(), model="queue", delivery={"redelivery": "none"}).valid is True
    # Never delivered at all is lost whatever the system declares about redelivery.
    _put(b, 2, "g3")
    verdict = check_durability(b.history(), model="queue", delivery={"redelivery": "none"})
    assert verdict.valid is False and verdict.stats["anomalies"] == {"lost": 1}
