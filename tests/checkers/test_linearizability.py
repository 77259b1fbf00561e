"""The linearizability checker and its models: semantics of ok/fail/info, counterexamples, budgets."""

from __future__ import annotations

import itertools
from collections.abc import Hashable

import pytest

from checkers.history import Operation
from checkers.linearizability import check_linearizability
from checkers.models import (
    REJECTED,
    KVModel,
    ModelError,
    QueueModel,
    RegisterModel,
    Transition,
    freeze,
    get_model,
    thaw,
)
from checkers.verdict import UNKNOWN
from tests.checkers.scenario import HistoryBuilder


def ops_of(builder: HistoryBuilder) -> tuple[Operation, ...]:
    return builder.history().ops


def mentioned_ops(counterexample: dict) -> set[int]:
    """Every operation id a violation's counterexample shows."""
    ids = {counterexample["blocked"]["id"]}
    ids.update(entry["id"] for entry in counterexample["window"])
    ids.update(step["op"] for step in counterexample["longest_linearization"])
    return ids


# --- models -------------------------------------------------------------------------------------------


def single(builder: HistoryBuilder) -> Operation:
    (op,) = ops_of(builder)
    return op


def test_register_reads_what_was_written() -> None:
    model = RegisterModel(cas=False)
    b = HistoryBuilder()
    b.op(0, "write", None, 3)
    write = single(b)
    b = HistoryBuilder()
    b.op(0, "read", None, None, output=3)
    read = single(b)
    ok, state = model.step(model.init(), write)
    assert ok and state == 3
    assert model.step(state, read) == (True, 3)
    assert model.step(model.init(), read) == (False, None)


def test_cas_register_compare_and_set() -> None:
    model = RegisterModel(cas=True)
    b = HistoryBuilder()
    b.op(0, "cas", None, [1, 2])
    cas = single(b)
    assert model.step(1, cas) == (True, 2)
    assert model.step(0, cas) == (False, 0)


@pytest.mark.parametrize("error", ["precondition-failed", "cas-mismatch"])
def test_failed_cas_with_an_explicit_mismatch_error_executed_and_returned_false(error: str) -> None:
    model = RegisterModel(cas=True)
    b = HistoryBuilder()
    b.op(0, "cas", None, [1, 2], type="fail", error=error)
    cas = single(b)
    transition = model.prepare(cas)
    assert transition is not None and transition.pure
    assert model.step(0, cas) == (True, 0)  # current != expected: returned false, nothing changed
    assert model.step(1, cas) == (False, 1)  # it held the expected value: a cas would have succeeded


@pytest.mark.parametrize("error", ["not-leader", None])
@pytest.mark.parametrize("f,value", [("cas", [1, 2]), ("write", 5), ("read", None)])
def test_fail_without_a_mismatch_error_did_not_happen(f: str, value: object, error: str | None) -> None:
    b = HistoryBuilder()
    b.op(0, f, None, value, type="fail", error=error)
    assert RegisterModel(cas=True).prepare(single(b)) is None


def test_failed_cas_without_an_error_is_dropped_as_knossos_does() -> None:
    """A correct history Porcupine's reading would reject: the cas failed (timed out in the client, say)
    while the register held the expected value. Read as "did not happen", it raises no false alarm."""
    b = HistoryBuilder()
    b.op(0, "write", None, 1)
    b.op(1, "cas", None, [1, 2], type="fail")
    b.op(2, "read", None, None, output=1)
    assert check_linearizability(ops_of(b), "cas-register").valid is True


def test_info_cas_takes_effect_only_where_it_matches() -> None:
    model = RegisterModel(cas=True)
    b = HistoryBuilder()
    b.op(0, "cas", None, [1, 2], type="info", error="timeout")
    cas = single(b)
    assert model.step(1, cas) == (True, 2)
    assert model.step(0, cas) == (True, 0)


def test_register_model_refuses_cas_and_names_the_model() -> None:
    b = HistoryBuilder()
    b.op(0, "cas", None, [1, 2])
    with pytest.raises(ModelError, match=r"f 'cas' is not part of the register model \(read, write\)"):
        RegisterModel(cas=False).prepare(single(b))


def test_cas_value_must_be_a_pair() -> None:
    b = HistoryBuilder()
    b.op(0, "cas", None, 7)
    with pytest.raises(ModelError, match=r"cas value must be \[expected, new\], not 7"):
        RegisterModel(cas=True).prepare(single(b))


def test_kv_strings_start_empty_and_append_concatenates() -> None:
    model = KVModel()
    b = HistoryBuilder()
    b.op(0, "append", "k", "ab")
    b.op(0, "append", "k", "cd")
    b.op(0, "get", "k", None, output="abcd")
    b.op(0, "read", "k", None, output=None)
    append_ab, append_cd, get, read_null = ops_of(b)
    state = model.init()
    assert state == ""
    assert model.step(state, read_null) == (True, "")  # a null read is "never written"
    _, state = model.step(state, append_ab)
    _, state = model.step(state, append_cd)
    assert model.step(state, get) == (True, "abcd")
    assert model.step("ab", get)[0] is False


def test_queue_is_fifo_and_reports_empty_as_null() -> None:
    model = QueueModel()
    b = HistoryBuilder()
    b.op(0, "put", "q", {"guid": "g1", "value": 1})
    b.op(0, "put", "q", {"guid": "g2", "value": 2})
    b.op(0, "consume", "q", None, output={"guid": "g1", "value": 1})
    b.op(0, "consume", "q", None, output={"guid": "g2", "value": 2})
    b.op(0, "consume", "q", None, output=None)
    put1, put2, get1, get2, empty = ops_of(b)
    state = model.init()
    for op in (put1, put2):
        _, state = model.step(state, op)
    assert model.step(state, get2)[0] is False  # not the oldest message
    assert model.step(state, empty)[0] is False  # not empty
    assert model.describe_state(state) == '[{"guid": "g1", "value": 1}, {"guid": "g2", "value": 2}]'
    _, state = model.step(state, get1)
    _, state = model.step(state, get2)
    assert model.step(state, empty) == (True, model.init())


def test_queue_put_needs_a_guid() -> None:
    b = HistoryBuilder()
    b.op(0, "put", "q", 5)
    with pytest.raises(ModelError, match=r'put value must be \{"guid": \.\.\., "value": \.\.\.\}, not 5'):
        QueueModel().prepare(single(b))


def test_unknown_model_name_lists_the_models() -> None:
    with pytest.raises(
        ModelError, match="unknown model 'regster'; choose one of register, cas-register, kv, queue"
    ):
        get_model("regster")


def test_freeze_keeps_json_values_apart_and_thaws_back() -> None:
    assert freeze(True) != freeze(1)
    assert freeze([1, 2]) != freeze({"1": 2})
    value = {"a": [1, True, None, {"b": "c"}]}
    assert thaw(freeze(value)) == value
    hash(freeze(value))


def test_describe_operation_says_what_happened() -> None:
    model = RegisterModel(cas=True)
    b = HistoryBuilder()
    b.op(3, "cas", None, [1, 4], type="fail", error="precondition-failed")
    b.op(3, "read", None, None, output=2)
    b.op(3, "write", None, 7, type="fail", error="not-leader")
    cas, read, write = ops_of(b)
    assert model.describe_operation(cas) == "p3 cas 1->4 -> false (fail: precondition did not hold)"
    assert model.describe_operation(read) == "p3 read -> 2"
    assert model.describe_operation(write) == "p3 write 7 (fail: not-leader)"


# --- the search ---------------------------------------------------------------------------------------


def test_sequential_history_is_linearizable() -> None:
    b = HistoryBuilder()
    b.op(0, "write", None, 1)
    b.op(1, "read", None, None, output=1)
    b.op(0, "cas", None, [1, 2])
    b.op(1, "read", None, None, output=2)
    verdict = check_linearizability(ops_of(b), "cas-register")
    assert verdict.valid is True
    assert verdict.stats["ops"] == 4 and verdict.stats["keys"] == 1
    assert verdict.counterexample is None


def test_stale_read_after_a_completed_write_is_a_violation() -> None:
    b = HistoryBuilder()
    b.op(0, "write", None, 1, node="n1")
    b.op(0, "write", None, 2, node="n1")
    b.op(1, "read", None, None, output=1, node="n2")
    ops = ops_of(b)
    verdict = check_linearizability(ops, "register")
    assert verdict.valid is False
    ce = verdict.counterexample
    assert ce["blocked"]["id"] == 2 and ce["blocked"]["node"] == "n2"
    assert ce["state"] == "2"
    assert [step["op"] for step in ce["longest_linearization"]] == [0, 1]
    assert [step["state"] for step in ce["longest_linearization"]] == ["1", "2"]
    assert [entry["id"] for entry in ce["window"]] == [2]
    assert "p1 read -> 1" in verdict.summary


def test_concurrent_read_may_see_the_old_or_the_new_value() -> None:
    for seen in (None, 1):
        b = HistoryBuilder()
        b.invoke(0, "write", None, 1)
        b.invoke(1, "read", None, None)
        b.complete(1, "ok", "read", None, seen)
        b.complete(0, "ok", "write", None, 1)
        assert check_linearizability(ops_of(b), "register").valid is True


def test_window_holds_the_operations_concurrent_with_the_first_impossible_completion() -> None:
    b = HistoryBuilder()
    b.op(0, "write", None, 1)  # op 0, before everything else
    b.invoke(1, "write", None, 2)  # op 1
    b.invoke(2, "read", None, None)  # op 2
    b.complete(2, "ok", "read", None, 3)  # nobody wrote 3: impossible here
    b.complete(1, "ok", "write", None, 2)
    b.op(3, "read", None, None, output=2)  # op 3, after the window
    verdict = check_linearizability(ops_of(b), "register")
    ce = verdict.counterexample
    assert verdict.valid is False
    assert ce["blocked"]["id"] == 2
    assert sorted(entry["id"] for entry in ce["window"]) == [1, 2]
    window = {entry["id"]: entry for entry in ce["window"]}
    assert window[2]["call"] < window[2]["ret"] and window[2]["process"] == 2
    assert window[2]["linearized_at"] is None


def test_intervals_are_closed_an_invoke_at_the_instant_of_a_return_is_concurrent() -> None:
    b = HistoryBuilder()
    b.invoke(0, "write", None, 1, at=0)
    b.complete(0, "ok", "write", None, 1, at=10)
    b.invoke(1, "read", None, None, at=10)
    b.complete(1, "ok", "read", None, None, at=11)
    assert check_linearizability(ops_of(b), "register").valid is True
    b = HistoryBuilder()
    b.invoke(0, "write", None, 1, at=0)
    b.complete(0, "ok", "write", None, 1, at=10)
    b.invoke(1, "read", None, None, at=11)
    b.complete(1, "ok", "read", None, None, at=12)
    assert check_linearizability(ops_of(b), "register").valid is False


def test_info_write_may_take_effect_long_after_its_info_completion() -> None:
    b = HistoryBuilder()
    b.invoke(0, "write", None, 1)
    b.complete(0, "info", "write", None, 1, error="timeout")
    b.op(1, "read", None, None, output=None)
    b.op(1, "read", None, None, output=1)
    b.op(1, "read", None, None, output=1)
    assert check_linearizability(ops_of(b), "register").valid is True


def test_info_write_may_never_take_effect() -> None:
    b = HistoryBuilder()
    b.invoke(0, "write", None, 1)
    b.complete(0, "info", "write", None, 1, error="timeout")
    b.op(1, "read", None, None, output=None)
    assert check_linearizability(ops_of(b), "register").valid is True


def test_info_write_cannot_take_effect_before_its_invoke() -> None:
    b = HistoryBuilder()
    b.op(1, "read", None, None, output=1)
    b.invoke(0, "write", None, 1)
    b.complete(0, "info", "write", None, 1, error="timeout")
    assert check_linearizability(ops_of(b), "register").valid is False


def test_info_write_takes_effect_at_most_once() -> None:
    b = HistoryBuilder()
    b.invoke(0, "write", None, 1)
    b.complete(0, "info", "write", None, 1, error="timeout")
    b.op(1, "read", None, None, output=1)
    b.op(2, "write", None, 2)
    b.op(1, "read", None, None, output=1)
    assert check_linearizability(ops_of(b), "register").valid is False


def test_operation_never_completed_is_indeterminate() -> None:
    b = HistoryBuilder()
    b.invoke(0, "write", None, 1)
    b.op(1, "read", None, None, output=1)
    assert ops_of(b)[0].type == "info"
    assert check_linearizability(ops_of(b), "register").valid is True


def test_failed_write_did_not_happen() -> None:
    b = HistoryBuilder()
    b.op(0, "write", None, 1, type="fail", error="not-leader")
    b.op(1, "read", None, None, output=1)
    assert check_linearizability(ops_of(b), "register").valid is False


def test_failed_cas_is_a_violation_when_the_register_surely_held_the_expected_value() -> None:
    def history(error: str) -> tuple[Operation, ...]:
        b = HistoryBuilder()
        b.op(0, "write", None, 1)
        b.op(1, "cas", None, [1, 2], type="fail", error=error)
        return ops_of(b)

    assert check_linearizability(history("precondition-failed"), "cas-register").valid is False
    assert check_linearizability(history("not-leader"), "cas-register").valid is True


def test_keys_are_checked_independently_and_the_violation_names_its_key() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "a", 1)
    b.op(0, "write", "b", 2)
    b.op(1, "read", "a", None, output=1)
    b.op(1, "read", "b", None, output=1)
    verdict = check_linearizability(ops_of(b), "register")
    assert verdict.valid is False
    assert verdict.counterexample["key"] == "b"
    assert verdict.stats["keys"] == 2


def test_kv_history_in_the_corpus_style() -> None:
    b = HistoryBuilder()
    b.invoke(0, "append", "1", "x 0 0 y")
    b.invoke(1, "append", "1", "x 1 0 y")
    b.complete(0, "ok", "append", "1", "x 0 0 y")
    b.complete(1, "ok", "append", "1", "x 1 0 y")
    b.op(2, "get", "1", None, output="x 1 0 yx 0 0 y")
    assert check_linearizability(ops_of(b), "kv").valid is True
    b.op(2, "get", "1", None, output="x 0 0 y")
    assert check_linearizability(ops_of(b), "kv").valid is False


def test_queue_delivers_in_order_and_each_message_once() -> None:
    b = HistoryBuilder()
    b.op(0, "put", "q", {"guid": "a", "value": 1})
    b.op(0, "put", "q", {"guid": "b", "value": 2})
    b.op(1, "consume", "q", None, output={"guid": "b", "value": 2})
    verdict = check_linearizability(ops_of(b), "queue")
    assert verdict.valid is False
    assert "p1 consume" in verdict.summary
    b = HistoryBuilder()
    b.op(0, "put", "q", {"guid": "a", "value": 1})
    b.op(1, "consume", "q", None, output={"guid": "a", "value": 1})
    again = b.op(1, "consume", "q", None, output={"guid": "a", "value": 1})
    assert check_linearizability(ops_of(b), "queue").valid is False
    # Flagged as a redelivery (an at-least-once queue, nobody confirmed it): nothing left the queue.
    b.events[again - 1]["value"] = {"guid": "a", "value": 1, "redelivered": True}
    b.op(1, "consume", "q", None, output=None)
    assert check_linearizability(ops_of(b), "queue").valid is True


def test_queue_info_consume_may_have_taken_the_head() -> None:
    b = HistoryBuilder()
    b.op(0, "put", "q", {"guid": "a", "value": 1})
    b.op(0, "put", "q", {"guid": "b", "value": 2})
    b.invoke(1, "consume", "q", None)
    b.complete(1, "info", "consume", "q", None, error="timeout")
    b.op(2, "consume", "q", None, output={"guid": "b", "value": 2})
    assert check_linearizability(ops_of(b), "queue").valid is True
    # An at-least-once queue delivers the message the lost consume took again, flagged: that took
    # nothing from the queue (the first delivery did)...
    b.op(2, "consume", "q", None, output={"guid": "a", "value": 1, "redelivered": True})
    assert check_linearizability(ops_of(b), "queue").valid is True
    # ...while without the flag a second delivery is a second dequeue of a message put once.
    b.op(3, "consume", "q", None, output={"guid": "b", "value": 2})
    assert check_linearizability(ops_of(b), "queue").valid is False


def test_queue_prepare_group_anonymises_unconsumed_messages() -> None:
    b = HistoryBuilder()
    b.op(0, "put", "q", {"guid": "kept", "value": 1})
    b.op(0, "put", "q", {"guid": "lost", "value": 2})
    b.invoke(1, "put", "q", {"guid": "maybe", "value": 3})
    b.complete(1, "info", "put", "q", {"guid": "maybe", "value": 3}, error="timeout")
    b.invoke(2, "consume", "q", None)
    b.complete(2, "info", "consume", "q", None, error="timeout")
    b.op(3, "consume", "q", None, output={"guid": "kept", "value": 1})
    model = QueueModel()
    kept, lost, maybe, info_consume, consume = model.prepare_group(ops_of(b))
    assert maybe is None  # an info put nobody consumed: "never" is as good as any point
    state = model.init()
    state = lost.apply(state, lost.arg)
    assert model.describe_state(state) == '["a message no consume returned"]'
    assert info_consume.apply(state, None) == model.init()  # it may take the anonymous message...
    state = kept.apply(model.init(), kept.arg)
    assert info_consume.apply(state, None) is REJECTED  # ...never one an ok consume returned
    assert consume.apply(state, consume.arg) == ((), 1, frozenset())


def test_queue_with_many_waiting_messages_is_checked_without_trying_every_order() -> None:
    messages = 12
    b = HistoryBuilder()
    for p in range(messages):
        b.invoke(p, "put", "q", {"guid": f"m{p}", "value": p})
    for p in range(messages):
        b.complete(p, "ok", "put", "q", {"guid": f"m{p}", "value": p})
    for p in (5, 3, 11, 0, 1, 2, 4, 6, 7, 8, 9, 10):
        b.op(100, "consume", "q", None, output={"guid": f"m{p}", "value": p})
    verdict = check_linearizability(ops_of(b), "queue")
    assert verdict.valid is True
    assert verdict.stats["states"] < 1000  # 12! orders of the puts without the FIFO-against-real-time rule
    b.op(100, "consume", "q", None, output={"guid": "m3", "value": 3})
    verdict = check_linearizability(ops_of(b), "queue")
    assert verdict.valid is False
    assert verdict.counterexample["blocked"]["id"] == 2 * messages


def test_empty_history_is_unknown_nothing_to_judge() -> None:
    verdict = check_linearizability([], "cas-register")
    assert verdict.valid == "unknown" and verdict.stats["ops"] == 0
    assert "nothing to judge" in verdict.summary


def test_unreadable_operation_raises_model_error() -> None:
    b = HistoryBuilder()
    b.op(0, "increment", None, 1)
    with pytest.raises(ModelError, match="f 'increment' is not part of the cas-register model"):
        check_linearizability(ops_of(b), "cas-register")


def hard_invalid_history(writers: int) -> tuple[Operation, ...]:
    """Concurrent writes of distinct values, then a read of a value nobody wrote: the search must
    try every order of the writes (2^writers x writers states) before it can say no."""
    b = HistoryBuilder()
    for p in range(writers):
        b.invoke(p, "write", None, p)
    for p in range(writers):
        b.complete(p, "ok", "write", None, p)
    b.op(writers, "read", None, None, output=-1)
    return ops_of(b)


def test_time_budget_ends_in_unknown_with_a_partial_linearization() -> None:
    ticks = itertools.count()
    verdict = check_linearizability(
        hard_invalid_history(12), "register", timeout_s=0.5, clock=lambda: next(ticks) / 10
    )
    assert verdict.valid == UNKNOWN
    assert "time budget of 0.5 s ran out" in verdict.summary
    (entry,) = verdict.counterexample["unknown_keys"]
    assert entry["reason"] == "time budget of 0.5 s ran out"
    assert len(entry["longest_linearization"]) >= 1
    assert entry["states"] >= 1


def test_memory_budget_ends_in_unknown_not_a_crash() -> None:
    verdict = check_linearizability(hard_invalid_history(12), "register", max_states=100)
    assert verdict.valid == UNKNOWN
    assert "memory budget of 100 states reached" in verdict.summary


def test_memory_budget_in_bytes_counts_the_states_too() -> None:
    verdict = check_linearizability(hard_invalid_history(12), "register", max_memory_bytes=100_000)
    assert verdict.valid == UNKNOWN
    assert "memory budget of 100,000 bytes reached" in verdict.summary


def test_without_budgets_the_hard_history_is_decided() -> None:
    verdict = check_linearizability(hard_invalid_history(8), "register")
    assert verdict.valid is False
    assert verdict.counterexample["blocked"]["id"] == 8


def test_a_violation_on_one_key_is_found_while_another_key_would_take_long() -> None:
    b = HistoryBuilder()
    b.op(0, "write", "fast", 1)
    b.op(0, "read", "fast", None, output=2)
    slow = hard_invalid_history(14)
    ops = [op for op in b.history().ops]
    verdict = check_linearizability(ops + [_rekey(op, "slow", len(ops) + op.id) for op in slow], "register")
    assert verdict.valid is False
    assert verdict.counterexample["key"] == "fast"
    assert verdict.stats["states"] < 2**14


def _rekey(op: Operation, key: str, new_id: int) -> Operation:
    from msgspec.structs import replace

    return replace(op, key=key, id=new_id, process=f"{op.process}")


class CoinModel(RegisterModel):
    """A nondeterministic register: a ``flip`` sets it to 0 or 1, the outcome unknown to the client."""

    nondeterministic = True

    def __init__(self) -> None:
        super().__init__(cas=False)
        self.functions = ("read", "flip")

    def prepare(self, op: Operation) -> Transition | None:
        if op.f == "flip":
            return Transition(lambda state, _: frozenset({0, 1}), None)
        transition = super().prepare(op)
        if transition is None:
            return None
        apply, arg = transition.apply, transition.arg

        def deterministic(state: Hashable, _: object) -> frozenset:
            new = apply(state, arg)
            return frozenset() if new is REJECTED else frozenset({new})

        return Transition(deterministic, None)


def test_nondeterministic_model_is_searched_over_sets_of_states() -> None:
    b = HistoryBuilder()
    b.op(0, "flip", None, None)
    b.op(1, "read", None, None, output=1)
    b.op(1, "read", None, None, output=1)
    assert check_linearizability(ops_of(b), CoinModel()).valid is True
    b.op(1, "read", None, None, output=0)
    assert check_linearizability(ops_of(b), CoinModel()).valid is False
