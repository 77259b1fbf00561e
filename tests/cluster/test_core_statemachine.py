"""The replicated state machines: registers and FIFO queues with GUID de-duplication (seed 004)."""

from __future__ import annotations

from cluster.core.statemachine import StateMachine


def entry(seq: int, f: str, key: str = "q", time: float = 0.0, **fields: object) -> dict:
    return {"lsn": [1, seq], "f": f, "key": key, "time": time, **fields}


def test_registers_write_and_cas_and_remember_the_writer_lsn() -> None:
    sm = StateMachine(300.0, "seconds")
    assert sm.read("x") == (None, None)
    outcome, op = sm.apply(entry(1, "write", "x", value=5))
    assert outcome.ok and outcome.lsn == [1, 1] and op == {"f": "write", "value": 5}
    outcome, op = sm.apply(entry(2, "cas", "x", value=[4, 6]))
    assert not outcome.ok and outcome.error == "cas-mismatch" and op["ok"] is False
    assert sm.read("x") == (5, [1, 1])
    outcome, op = sm.apply(entry(3, "cas", "x", value=[5, 6]))
    assert outcome.ok and sm.read("x") == (6, [1, 3])
    assert sm.apply(entry(4, "cas", "fresh", value=[None, 1]))[0].ok  # absent reads as null


def test_queue_is_fifo_and_consume_moves_a_message_to_pending_until_confirmed() -> None:
    sm = StateMachine(300.0, "seconds")
    for seq, guid in enumerate(["a", "b"], start=1):
        sm.apply(entry(seq, "put", value=guid.upper(), guid=guid))
    first, op = sm.apply(entry(3, "consume"))
    assert first.value == {"guid": "a", "value": "A"} and op == {"f": "consume", "value": first.value}
    assert sm.apply(entry(4, "consume"))[0].value == {"guid": "b", "value": "B"}
    confirmed, op = sm.apply(entry(5, "confirm", guid="a"))
    assert confirmed.ok and op == {"f": "confirm", "guid": "a", "ok": True}
    again, _ = sm.apply(entry(6, "confirm", guid="a"))
    assert not again.ok and again.error == "not-found"
    assert sm.apply(entry(7, "confirm", guid="b"))[0].ok
    empty, op = sm.apply(entry(8, "consume"))
    assert empty.ok and empty.value is None and op == {"f": "consume", "value": None}


def test_an_unconfirmed_message_is_delivered_again_after_the_visibility_timeout() -> None:
    """Redelivery is decided from the entries' leader times: the same on every node and every leader."""
    sm = StateMachine(300.0, "seconds", visibility_timeout=5.0)
    sm.apply(entry(1, "put", time=0.0, value="A", guid="a"))
    sm.apply(entry(2, "put", time=0.0, value="B", guid="b"))
    assert sm.apply(entry(3, "consume", time=1.0))[0].value == {"guid": "a", "value": "A"}  # never confirmed
    assert sm.apply(entry(4, "consume", time=2.0))[0].value == {"guid": "b", "value": "B"}
    waiting, op = sm.apply(entry(5, "consume", time=4.0))  # nothing ready, both pending
    assert not waiting.ok and waiting.error == "in-flight" and waiting.lsn == [1, 5]
    assert waiting.value == {"in_flight": 2, "visible_in": 2.0} and op == {"f": "consume", "value": None,
                                                                            "in_flight": 2}
    again, op = sm.apply(entry(6, "consume", time=6.0))  # a's 5 s have passed, b's not
    assert again.value == {"guid": "a", "value": "A", "redelivered": True} and op["value"] == again.value
    assert sm.apply(entry(7, "consume", time=6.5))[0].value == {"in_flight": 2, "visible_in": 0.5}
    assert sm.apply(entry(8, "confirm", time=6.6, guid="b"))[0].ok  # b's consumer was only slow
    assert sm.apply(entry(9, "confirm", time=6.7, guid="a"))[0].ok
    assert sm.apply(entry(10, "consume", time=20.0))[0].value is None  # nothing left at all


def test_a_message_due_again_goes_ahead_of_messages_never_delivered() -> None:
    sm = StateMachine(300.0, "seconds", visibility_timeout=1.0)
    sm.apply(entry(1, "put", value="A", guid="a"))
    sm.apply(entry(2, "consume", time=0.0))
    sm.apply(entry(3, "put", time=0.5, value="B", guid="b"))
    assert sm.apply(entry(4, "consume", time=0.9))[0].value == {"guid": "b", "value": "B"}
    assert sm.apply(entry(5, "consume", time=1.0))[0].value["guid"] == "a"  # due again: first
    # Each delivery restarts the message's timeout: b (delivered at 0.9) is due before a (at 1.0).
    assert sm.apply(entry(6, "consume", time=1.95))[0].value["guid"] == "b"
    assert sm.apply(entry(7, "consume", time=2.0))[0].value["guid"] == "a"


def test_without_redelivery_a_pending_message_is_never_delivered_again() -> None:
    sm = StateMachine(300.0, "seconds", visibility_timeout=1.0, redelivery=False)
    sm.apply(entry(1, "put", value="A", guid="a"))
    assert sm.apply(entry(2, "consume", time=0.0))[0].value == {"guid": "a", "value": "A"}
    empty, _ = sm.apply(entry(3, "consume", time=100.0))
    assert empty.ok and empty.value is None  # the old behaviour: the message is gone unconfirmed
    assert sm.apply(entry(4, "confirm", guid="a"))[0].ok  # a late confirm still finds it pending


def test_a_put_retried_within_the_time_window_is_acknowledged_with_the_original_lsn() -> None:
    sm = StateMachine(10.0, "seconds")
    sm.apply(entry(1, "put", time=0.0, value="m", guid="g"))
    retry, op = sm.apply(entry(2, "put", time=9.0, value="m", guid="g"))
    assert retry.ok and retry.duplicate and retry.lsn == [1, 1] and op["duplicate"] is True
    assert len(sm.queues["q"].ready) == 1
    late, op = sm.apply(entry(3, "put", time=20.0, value="m", guid="g"))  # the window has passed
    assert not late.duplicate and late.lsn == [1, 3] and len(sm.queues["q"].ready) == 2


def test_the_window_can_count_put_entries_instead_of_seconds() -> None:
    sm = StateMachine(2, "entries")
    for seq, guid in enumerate(["a", "b", "c"], start=1):
        sm.apply(entry(seq, "put", value=guid, guid=guid))
    assert sm.apply(entry(4, "put", value="c", guid="c"))[0].duplicate  # within the last two
    assert not sm.apply(entry(5, "put", value="a", guid="a"))[0].duplicate  # pushed out by b and c


def test_without_dedup_every_put_enqueues() -> None:
    sm = StateMachine(300.0, "seconds", dedup=False)
    for seq in (1, 2):
        assert not sm.apply(entry(seq, "put", value="m", guid="g"))[0].duplicate
    assert len(sm.queues["q"].ready) == 2


def test_the_noop_changes_nothing() -> None:
    sm = StateMachine(300.0, "seconds")
    outcome, op = sm.apply({"lsn": [2, 1], "f": "noop", "key": None, "time": 0.0})
    assert outcome.ok and op == {"f": "noop"} and not sm.registers and not sm.queues
