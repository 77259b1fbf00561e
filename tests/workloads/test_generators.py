"""Workload generators: determinism per seed, unique values per key, unique GUIDs, final phases."""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter, defaultdict
from itertools import islice

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.models import MODELS
from checkers.registry import CHECKERS as REGISTERED_CHECKERS
from tests.hash_seeds import outputs_under_hash_seeds
from workloads.generator import (
    declared_contract,
    make_workload,
    plan,
    workload_checkers,
    workload_contract,
    workload_model,
    workload_names,
)
from workloads.ops import FINAL_RETRY_THINK, VALUE_STRIDE, Op
from workloads.queue import (
    DRAIN_GIVE_UP,
    DRAIN_MARGIN,
    DRAIN_PATIENCE,
    DRAIN_POLL,
    DRAIN_QUIET,
    Delivery,
    QueueWorkload,
    in_flight_wait,
)
from workloads.register import FINAL_RETRIES, RegisterWorkload

seeds = st.integers(0, 2**64 - 1)


def planned_json(workload, processes=range(10), time_limit=10.0) -> str:
    return json.dumps(
        {p: [op.to_json() for op in ops] for p, ops in plan(workload, processes, time_limit).items()}
    )


def test_names_and_unknown_names() -> None:
    assert workload_names() == ("register", "queue", "log")
    with pytest.raises(ValueError) as raised:
        make_workload("bank", random.Random(1))
    assert str(raised.value) == "unknown workload 'bank'; valid: register, queue, log"
    with pytest.raises(ValueError, match="workload register: .*unexpected keyword argument 'colour'"):
        make_workload("register", random.Random(1), colour="red")


@pytest.mark.parametrize("name", workload_names())
def test_workloads_declare_their_checkers_and_a_known_model(name: str) -> None:
    workload = make_workload(name, random.Random(0))
    assert workload.name == name
    assert set(workload.checkers) <= set(REGISTERED_CHECKERS)
    # A workload asks for linearizability exactly when the checker knows its model.
    assert ("linearizable" in workload.checkers) == (workload.model in MODELS)
    # What the judges ask by name is what the class declares.
    assert workload_checkers(name) == tuple(workload.checkers) and workload_model(name) == workload.model


@pytest.mark.parametrize("name", workload_names())
def test_workloads_declare_the_operations_they_invoke_and_what_their_client_runs(name: str) -> None:
    workload = make_workload(name, random.Random(0))
    invoked = {op.f for ops in plan(workload, range(10), 10.0).values() for op in ops}
    final = workload.final_ops("n1", sorted({op.key for ops in plan(workload, range(3), 2.0).values() for op in ops}))
    completion = None
    while True:
        try:
            op = final.send(completion)
        except StopIteration:
            break
        invoked.add(op.f)
        completion = {"type": "ok", "value": None}
    assert invoked == set(workload.operations)
    assert tuple(workload.client_ops) == tuple(workload.operations)
    assert all(isinstance(text, str) and text for text in workload.client_ops.values())


@pytest.mark.parametrize("name", workload_names())
@given(seed=seeds)
@settings(max_examples=10, deadline=None)
def test_same_seed_same_operations(name: str, seed: int) -> None:
    first = planned_json(make_workload(name, random.Random(seed)))
    assert first == planned_json(make_workload(name, random.Random(seed)))


@pytest.mark.parametrize("name", workload_names())
def test_different_seeds_give_different_operations(name: str) -> None:
    drawn = {planned_json(make_workload(name, random.Random(seed)), time_limit=5.0) for seed in range(10)}
    assert len(drawn) == 10


def test_a_process_stream_does_not_depend_on_the_order_processes_are_asked() -> None:
    workload = RegisterWorkload(random.Random(5))
    forward = {p: list(islice(workload.stream(p), 50)) for p in range(4)}
    backward = {p: list(islice(workload.stream(p), 50)) for p in reversed(range(4))}
    assert forward == backward
    assert forward[0] != forward[1]


@given(seed=seeds, keys=st.integers(1, 4), rotate=st.one_of(st.none(), st.integers(1, 30)))
@settings(max_examples=40, deadline=None)
def test_register_values_are_unique_per_key(seed: int, keys: int, rotate: int | None) -> None:
    workload = RegisterWorkload(random.Random(seed), keys=keys, rotate_after=rotate, rate=None)
    written: dict[str, list[int]] = defaultdict(list)
    for process in range(8):
        for op in islice(workload.stream(process), 300):
            if op.f == "write":
                written[op.key].append(op.value)
            elif op.f == "cas":
                written[op.key].append(op.value[1])
    for key, values in written.items():
        assert len(values) == len(set(values)), f"{key} has a repeated value"


def test_register_values_name_their_process_and_cas_expects_its_last_proposal() -> None:
    workload = RegisterWorkload(random.Random(9), keys=1, rotate_after=None, rate=None)
    proposed = None
    count = 0
    for op in islice(workload.stream(3), 200):
        assert op.key == "k0"
        if op.f == "read":
            assert op.value is None
            continue
        count += 1
        new = op.value if op.f == "write" else op.value[1]
        assert new == 3 * VALUE_STRIDE + count
        if op.f == "cas":
            assert op.value[0] == proposed
        proposed = new
    assert count > 50


def test_register_keys_rotate_in_windows() -> None:
    workload = RegisterWorkload(random.Random(2), keys=2, rotate_after=10, rate=None)
    ops = list(islice(workload.stream(0), 30))
    assert {op.key for op in ops[:10]} <= {"k0", "k1"}
    assert {op.key for op in ops[10:20]} <= {"k2", "k3"}
    assert {op.key for op in ops[20:]} <= {"k4", "k5"}


def test_register_mix_is_respected_and_validated() -> None:
    reads = RegisterWorkload(random.Random(1), mix={"read": 1.0}, rate=None)
    assert {op.f for op in islice(reads.stream(0), 100)} == {"read"}
    mixed = Counter(op.f for op in islice(RegisterWorkload(random.Random(1), rate=None).stream(0), 5000))
    assert 0.35 < mixed["read"] / 5000 < 0.45 and 0.15 < mixed["cas"] / 5000 < 0.25
    with pytest.raises(ValueError, match="unknown operation\\(s\\) append"):
        RegisterWorkload(random.Random(1), mix={"append": 1.0})
    with pytest.raises(ValueError, match="at least one key"):
        RegisterWorkload(random.Random(1), keys=0)


def test_think_times_follow_the_rate_and_plan_stops_at_the_time_limit() -> None:
    workload = RegisterWorkload(random.Random(4), rate=20.0)
    thinks = [op.think for op in islice(workload.stream(0), 4000)]
    assert all(0 <= t <= 0.1 for t in thinks)
    assert abs(sum(thinks) / len(thinks) - 0.05) < 0.005
    planned = plan(workload, [0, 1], time_limit=10.0)
    for ops in planned.values():
        assert sum(op.think for op in ops) < 10.0
        assert 150 < len(ops) < 250
    assert all(op.think == 0.0 for op in islice(RegisterWorkload(random.Random(4), rate=None).stream(0), 10))
    with pytest.raises(ValueError, match="rate must be a positive number"):
        RegisterWorkload(random.Random(4), rate=0)


@given(seed=seeds)
@settings(max_examples=20, deadline=None)
def test_queue_guids_and_values_are_unique(seed: int) -> None:
    workload = QueueWorkload(random.Random(seed), queues=2, rate=None)
    puts = [op for p in range(10) for op in islice(workload.stream(p), 200) if op.f == "put"]
    guids = [op.value["guid"] for op in puts]
    assert len(guids) == len(set(guids))
    assert all(uuid.UUID(guid).version == 4 for guid in guids)
    values = [op.value["value"] for op in puts]
    assert len(values) == len(set(values))


def test_queue_confirms_only_follow_consumes() -> None:
    workload = QueueWorkload(random.Random(8), confirm_probability=1.0, rate=None)
    ops = list(islice(workload.stream(0), 500))
    for before, op in zip(ops, ops[1:], strict=False):
        if op.f == "confirm":
            assert before.f == "consume" and before.key == op.key and op.value is None
    fs = Counter(op.f for op in ops)
    assert fs["confirm"] == fs["consume"] or fs["confirm"] == fs["consume"] - 1
    never = QueueWorkload(random.Random(8), confirm_probability=0.0, rate=None)
    assert "confirm" not in {op.f for op in islice(never.stream(0), 500)}


def test_register_final_phase_reads_every_key_at_the_node_itself() -> None:
    workload = RegisterWorkload(random.Random(1))
    ops = list(workload.final_ops("n2", ["k10", "k2", "k0", "k2"]))
    assert ops == [Op("read", k, None, node="n2", local=True) for k in ("k0", "k2", "k10")]
    assert Op.from_json(ops[0].to_json()) == ops[0] and ops[0].to_json()["local"] is True
    assert "local" not in Op("read", "k0").to_json()
    with pytest.raises(ValueError, match="only a read or a poll can be local"):
        Op("write", "k0", 1, local=True)


def test_register_final_reads_that_fail_are_tried_again_within_a_budget_per_node() -> None:
    reads = RegisterWorkload(random.Random(1)).final_ops("n1", ["k0", "k1", "k2"])
    first = next(reads)
    retry = Op("read", "k0", None, node="n1", local=True, think=FINAL_RETRY_THINK)
    assert first.think == 0 and reads.send({"type": "fail", "value": None}) == retry  # not-leader: again
    assert reads.send({"type": "ok", "value": 5}).key == "k1"  # answered: the next key, at once
    asked = [reads.send({"type": "fail", "value": None}) for _ in range(FINAL_RETRIES - 1)]
    assert all(op.key == "k1" and op.think == FINAL_RETRY_THINK for op in asked)
    # The budget is spent: a failure now moves on, and an info (indefinite) never retries.
    assert reads.send({"type": "fail", "value": None}) == Op("read", "k2", None, node="n1", local=True)
    with pytest.raises(StopIteration):
        reads.send({"type": "fail", "value": None})
    once = RegisterWorkload(random.Random(1)).final_ops("n1", ["k0", "k1"])
    next(once)
    assert once.send({"type": "info", "value": None}).key == "k1"


def test_queue_final_phase_drains_until_empty_and_confirms_each_message() -> None:
    drain = QueueWorkload(random.Random(1)).final_ops("n1", ["q1", "q0"])
    asked = [next(drain)]
    asked.append(drain.send({"type": "ok", "value": {"guid": "g-1", "value": 7}}))
    asked.append(drain.send({"type": "ok", "value": None}))  # confirm completed
    asked.append(drain.send({"type": "ok", "value": None}))  # q0 is empty: on to q1
    for _ in range(DRAIN_GIVE_UP - 1):
        asked.append(drain.send({"type": "fail", "value": None}))
    with pytest.raises(StopIteration):
        drain.send({"type": "fail", "value": None})
    assert asked[:4] == [
        Op("consume", "q0", None, node="n1"),
        Op("confirm", "q0", "g-1", node="n1"),
        Op("consume", "q0", None, node="n1"),
        Op("consume", "q1", None, node="n1"),
    ]
    assert len(asked) == 4 + DRAIN_GIVE_UP - 1
    # a failure (not-leader while an election settles) is retried after a pause, not at once
    assert asked[4:] == [Op("consume", "q1", None, node="n1", think=FINAL_RETRY_THINK)] * (DRAIN_GIVE_UP - 1)


def test_queue_drain_waits_for_in_flight_messages_to_come_back() -> None:
    """Nothing to deliver while messages are pending: wait until the next is visible again, then go on;
    an in-flight answer is not a failure, but the waiting is bounded."""
    drain = QueueWorkload(random.Random(1)).final_ops("n1", ["q0"])
    assert next(drain) == Op("consume", "q0", None, node="n1")
    in_flight = {"type": "fail", "value": {"in_flight": 2, "visible_in": 0.25}, "error": "in-flight"}
    assert drain.send(in_flight) == Op("consume", "q0", None, node="n1", think=0.25 + DRAIN_MARGIN)
    far = {"type": "fail", "value": {"in_flight": 1, "visible_in": 30.0}}
    assert drain.send(far) == Op("consume", "q0", None, node="n1", think=DRAIN_POLL)  # asks again meanwhile
    redelivered = {"guid": "g-1", "value": 7, "redelivered": True}
    assert drain.send({"type": "ok", "value": redelivered}) == Op("confirm", "q0", "g-1", node="n1")
    assert drain.send({"type": "ok", "value": None}) == Op("consume", "q0", None, node="n1")
    with pytest.raises(StopIteration):
        drain.send({"type": "ok", "value": None})  # empty: nothing ready, nothing pending

    patient = QueueWorkload(random.Random(1)).final_ops("n1", ["q0"])
    waits = [next(patient).think]
    with pytest.raises(StopIteration):
        for _ in range(10 * int(DRAIN_PATIENCE / DRAIN_POLL)):
            waits.append(patient.send(far).think)
    assert sum(waits) == pytest.approx(DRAIN_PATIENCE) and len(waits) > DRAIN_GIVE_UP
    assert in_flight_wait("fail", {"in_flight": 1}) == DRAIN_POLL  # no visible_in: poll
    assert in_flight_wait("fail", None) is None and in_flight_wait("ok", far["value"]) is None


HASH_SEED_SCRIPT = """
import json, random
from workloads.generator import declared_contract, make_workload, plan, workload_contract, workload_names
for name in workload_names():
    planned = plan(make_workload(name, random.Random(11)), range(5), 10.0)
    print(json.dumps({p: [op.to_json() for op in ops] for p, ops in planned.items()}))
"""


@pytest.mark.slow
def test_operations_do_not_depend_on_the_hash_seed() -> None:
    outputs = outputs_under_hash_seeds(HASH_SEED_SCRIPT)
    assert len(outputs) == 1 and outputs.pop().count("\n") == len(workload_names())


def test_queue_drain_without_in_flight_answers_consumes_until_the_queue_stays_empty() -> None:
    """A broker whose empty answer means only "nothing ready now" (declared ``in_flight`` false): the drain
    does not stop at the first empty answer but asks again every DRAIN_POLL seconds until DRAIN_QUIET
    seconds of empty answers in a row; a message in between starts the quiet period again."""
    delivery = Delivery(dedup=False, redelivery="close", in_flight=False)
    drain = QueueWorkload(random.Random(1), contract=delivery).final_ops("n1", ["q0"])
    assert next(drain) == Op("consume", "q0", None, node="n1")
    asked = [drain.send({"type": "ok", "value": None})]
    waited = asked[0].think
    while waited < DRAIN_QUIET / 2:
        asked.append(drain.send({"type": "ok", "value": None}))
        waited += asked[-1].think
    assert all(op == Op("consume", "q0", None, node="n1", think=DRAIN_POLL) for op in asked)
    # A redelivered message (its consumer's channel closed) is confirmed, and the quiet period restarts.
    assert drain.send({"type": "ok", "value": {"guid": "g-1", "value": 7}}) == Op("confirm", "q0", "g-1", node="n1")
    assert drain.send({"type": "info", "value": None}) == Op("consume", "q0", None, node="n1")
    quiet = 0.0
    with pytest.raises(StopIteration):
        while True:
            quiet += drain.send({"type": "ok", "value": None}).think
    assert quiet == pytest.approx(DRAIN_QUIET)
    # The bundled cluster's contract (the default) stops at the first empty answer.
    default = QueueWorkload(random.Random(1)).final_ops("n1", ["q0"])
    next(default)
    with pytest.raises(StopIteration):
        default.send({"type": "ok", "value": None})


def test_delivery_contract_is_checked_and_round_trips() -> None:
    delivery = Delivery(dedup=False, redelivery="none", in_flight=False)
    assert Delivery.from_json(delivery.to_json()) == delivery
    assert Delivery.from_json(None) == Delivery() == Delivery.from_json({})
    for bad in ({"dedup": "no"}, {"redelivery": "sometimes"}, {"in_flight": 1}):
        with pytest.raises(ValueError, match="Delivery"):
            Delivery(**bad)


def test_a_db_declares_its_queue_contract_and_the_workload_gets_it() -> None:
    class Broker:
        delivery = Delivery(dedup=False, redelivery="close", in_flight=False)

    class Wrong:
        delivery = {"dedup": False}

    assert workload_contract("queue") is Delivery
    assert all(workload_contract(name) is None for name in workload_names() if name != "queue")
    assert declared_contract("queue", object()) == Delivery()
    assert declared_contract("register", Broker()) is None
    declared = declared_contract("queue", Broker())
    assert make_workload("queue", random.Random(1), contract=declared).delivery is Broker.delivery
    with pytest.raises(ValueError, match="delivery must be a workloads.queue.Delivery, not dict"):
        declared_contract("queue", Wrong())
