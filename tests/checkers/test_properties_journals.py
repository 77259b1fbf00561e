"""Property tests: histories and journals generated from a small *correct* replicated log are accepted by
single-leader-per-term, lsn-monotonicity and durability; one injected anomaly (a second leader in a
term, a swapped LSN, a dropped acknowledged write, a duplicated GUID) is reported with a counterexample
that names the injected event.

The model: one leader per term (a new term on each election), the leader appends each write at LSN
(term, seq) at its linearization point (between invoke and completion), every node applies the log in
order (nodes lag, restart and re-apply from the start), reads observe the key's latest entry. Clients
complete ``ok`` (took effect), ``fail`` (did not and never will) or ``info`` (may take effect later or
never). After a heal, every node catches up and answers a final read of every key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from checkers.durability import check_durability
from checkers.leader import check_single_leader_per_term
from checkers.lsn import check_lsn_monotonicity
from tests.checkers.scenario import HistoryBuilder, JournalBuilder, journals

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEYS = ("a", "b", "c")

Choose = Callable[[int], int]


@dataclass
class Pending:
    process: int
    f: str
    key: str
    value: Any = None
    done: bool = False  # took effect
    output: Any = None
    lsn: tuple[int, int] | None = None


@dataclass
class ReplicatedLog:
    """A correct cluster, driven by ``choose`` (Hypothesis draws), recording a history and journals."""

    choose: Choose
    node_names: tuple[str, ...]
    history: HistoryBuilder = field(default_factory=HistoryBuilder)
    term: int = 0
    seq: int = 0
    leader: str | None = None
    log: list[tuple[tuple[int, int], str, Any]] = field(default_factory=list)
    state: dict[str, tuple[Any, tuple[int, int] | None]] = field(default_factory=dict)
    key_history: dict[str, list[tuple[Any, tuple[int, int] | None, int | None]]] = field(default_factory=dict)
    pending: dict[int, Pending] = field(default_factory=dict)
    indeterminate: list[Pending] = field(default_factory=list)
    leaders: dict[int, str] = field(default_factory=dict)
    next_process: int = 0
    next_value: int = 1

    def __post_init__(self) -> None:
        self.nodes = {name: JournalBuilder(name) for name in self.node_names}
        self.applied = dict.fromkeys(self.node_names, 0)
        for journal in self.nodes.values():
            journal.start()
            journal.role("follower", 0, None)

    # -- the cluster --------------------------------------------------------------------------------

    def elect(self) -> None:
        node = self.node_names[self.choose(len(self.node_names))]
        self.term += 1
        self.seq = 0
        self.leader = node
        self.leaders[self.term] = node
        self.nodes[node].role("candidate", self.term, None)
        self.nodes[node].role("leader", self.term, node)
        for other in self.node_names:
            if other != node and self.choose(2):
                self.nodes[other].role("follower", self.term, node)

    def append(self, key: str, value: Any, op_id: int | None) -> tuple[int, int]:
        self.seq += 1
        lsn = (self.term, self.seq)
        self.log.append((lsn, key, value))
        self.state[key] = (value, lsn)
        self.key_history.setdefault(key, []).append((value, lsn, op_id))
        return lsn

    def apply_next(self, node: str) -> None:
        index = self.applied[node]
        if index < len(self.log):
            lsn, key, value = self.log[index]
            self.nodes[node].apply(lsn, key, {"f": "write", "value": value})
            self.applied[node] = index + 1

    def restart(self, node: str) -> None:
        self.nodes[node].start()
        self.applied[node] = 0  # recovers its log and re-applies it

    # -- clients ------------------------------------------------------------------------------------

    def invoke(self) -> None:
        process = self.next_process
        self.next_process += 1
        key = KEYS[self.choose(len(KEYS))]
        if self.choose(2):
            op = Pending(process, "write", key, self.next_value)
            self.next_value += 1
        else:
            op = Pending(process, "read", key)
        self.pending[process] = op
        self.history.invoke(process, op.f, key, op.value)

    def take_effect(self, op: Pending) -> None:
        if op.f == "write":
            op.lsn = self.append(op.key, op.value, op.process)
        else:
            op.output, op.lsn = self.state.get(op.key, (None, None))
        op.done = True

    def complete(self, op: Pending) -> None:
        del self.pending[op.process]
        if op.done and (op.f == "read" or self.choose(4)):
            self.history.complete(
                op.process, "ok", op.f, op.key, op.output if op.f == "read" else op.value, lsn=op.lsn
            )
        elif not op.done and self.choose(2):
            self.history.complete(op.process, "fail", op.f, op.key, op.value, error="not-leader")
        else:
            self.history.complete(op.process, "info", op.f, op.key, op.value, error="timeout")
            if not op.done and op.f == "write":
                self.indeterminate.append(op)

    def status(self) -> None:
        node = self.node_names[self.choose(len(self.node_names))]
        role = "leader" if node == self.leader else "follower"
        process = self.next_process
        self.next_process += 1
        self.history.op(process, "status", output={"node": node, "role": role, "term": self.term})

    # -- a run --------------------------------------------------------------------------------------

    def step(self) -> None:
        action = self.choose(12)
        if action == 0 or self.leader is None:
            self.elect()
        elif action in (1, 2, 3) and len(self.pending) < 4:
            self.invoke()
        elif action in (4, 5, 6, 7) and self.pending:
            ops = list(self.pending.values())
            op = ops[self.choose(len(ops))]
            if op.done or action == 7:
                self.complete(op)
            else:
                self.take_effect(op)
        elif action in (8, 9):
            self.apply_next(self.node_names[self.choose(len(self.node_names))])
        elif action == 10 and self.indeterminate:
            op = self.indeterminate.pop(self.choose(len(self.indeterminate)))
            if self.choose(2):
                op.lsn = self.append(op.key, op.value, None)  # an info write landing late
        elif action == 11:
            if self.choose(3) == 0:
                self.restart(self.node_names[self.choose(len(self.node_names))])
            else:
                self.status()

    def finish(self) -> None:
        for op in list(self.pending.values()):
            if not op.done and self.choose(2):
                self.take_effect(op)
            self.complete(op)
        self.history.invoke("nemesis", "heal")
        self.history.complete("nemesis", "ok", "heal")
        for node in self.node_names:
            while self.applied[node] < len(self.log):
                self.apply_next(node)

    def final_reads(self) -> None:
        for key in KEYS:
            value, lsn = self.state.get(key, (None, None))
            for node in self.node_names:
                process = self.next_process
                self.next_process += 1
                self.history.op(process, "read", key, output=value, node=node, lsn=lsn)


@st.composite
def runs(draw: st.DrawFn, finish: bool = True) -> ReplicatedLog:
    nodes = ("n1", "n2", "n3", "n4", "n5")[: draw(st.integers(3, 5))]
    run = ReplicatedLog(lambda n: draw(st.integers(0, n - 1)), nodes)
    for _ in range(draw(st.integers(5, 120))):
        run.step()
    if finish:
        run.finish()
        run.final_reads()
    return run


def _strip_lsns(builder: HistoryBuilder) -> HistoryBuilder:
    stripped = HistoryBuilder()
    stripped.events = [{k: v for k, v in e.items() if k != "lsn"} for e in builder.events]
    return stripped


# -- valid runs are accepted ------------------------------------------------------------------------


@SETTINGS
@given(runs())
def test_correct_replicated_log_is_accepted(run: ReplicatedLog) -> None:
    history = run.history.history()
    js = journals(*run.nodes.values())
    event(f"log entries: {'0' if not run.log else '1-9' if len(run.log) < 10 else '10+'}")
    event(f"terms: {'1' if run.term == 1 else '2-4' if run.term < 5 else '5+'}")
    event(f"info ops: {'yes' if any(op.type == 'info' for op in history.ops) else 'no'}")
    leader = check_single_leader_per_term(js, history)
    assert leader.valid is True, leader.summary
    lsn = check_lsn_monotonicity(js, history)
    assert lsn.valid == (True if run.log else "unknown"), lsn.summary  # unknown: nothing was written
    durability = check_durability(history, js)
    assert durability.valid is True, durability.summary
    # Without LSNs in the history the real-time rules alone raise no false alarm either.
    bare = _strip_lsns(run.history).history()
    assert check_durability(bare).valid is True
    assert check_single_leader_per_term(None, history).valid in (True, "unknown")


# -- one injected anomaly is reported, naming the injected event ------------------------------------


@SETTINGS
@given(runs(), st.data())
def test_second_leader_in_a_term_is_reported(run: ReplicatedLog, data: st.DataObject) -> None:
    term = data.draw(st.sampled_from(sorted(run.leaders)))
    usurper = data.draw(st.sampled_from([n for n in run.node_names if n != run.leaders[term]]))
    line = run.nodes[usurper].role("leader", term, usurper)
    verdict = check_single_leader_per_term(journals(*run.nodes.values()), run.history.history())
    assert verdict.valid is False
    assert verdict.counterexample is not None
    conflict = next(c for c in verdict.counterexample["conflicts"] if c["term"] == term)
    assert conflict["nodes"] == sorted([run.leaders[term], usurper])
    claim = next(c for c in conflict["claims"] if c["node"] == usurper)
    assert claim["line"] == line  # the model never lets it claim that term itself


@SETTINGS
@given(runs(), st.data())
def test_swapped_lsn_in_a_journal_is_reported(run: ReplicatedLog, data: st.DataObject) -> None:
    # Two consecutive apply events of one lifetime on one node.
    candidates = []
    for node, journal in run.nodes.items():
        events = journal.events
        for i in range(len(events) - 1):
            if events[i]["event"] == "apply" and events[i + 1]["event"] == "apply":
                candidates.append((node, i))
    assume(candidates)
    node, i = data.draw(st.sampled_from(candidates))
    events = run.nodes[node].events
    events[i]["lsn"], events[i + 1]["lsn"] = events[i + 1]["lsn"], events[i]["lsn"]
    verdict = check_lsn_monotonicity(journals(*run.nodes.values()), run.history.history())
    assert verdict.valid is False
    assert verdict.counterexample is not None
    (order,) = [v for v in verdict.counterexample["violations"]["apply-order"] if v["node"] == node]
    assert (order["earlier"]["line"], order["later"]["line"]) == (i + 1, i + 2)


@SETTINGS
@given(runs(), st.data())
def test_swapped_lsn_in_replies_is_reported(run: ReplicatedLog, data: st.DataObject) -> None:
    history = run.history.history()
    writes = [op for op in history.ops if op.f == "write" and op.ok]
    pairs = []
    for w1 in writes:
        after = [w for w in writes if w.call > w1.ret]
        if after:
            w2 = min(after, key=lambda w: w.call)  # the first write invoked after w1 completed
            if w1.lsn < w2.lsn:
                pairs.append((w1, w2))
    assume(pairs)
    w1, w2 = data.draw(st.sampled_from(pairs))
    events = run.history.events
    events[w1.complete_index]["lsn"], events[w2.complete_index]["lsn"] = list(w2.lsn), list(w1.lsn)
    verdict = check_lsn_monotonicity(None, run.history.history())
    assert verdict.valid is False
    assert verdict.counterexample is not None
    first = verdict.counterexample["violations"]["realtime-writes"][0]
    assert first["later"]["invoke_line"] == w2.invoke_index + 1


@SETTINGS
@given(runs(finish=False), st.data())
def test_dropped_acknowledged_write_is_reported(run: ReplicatedLog, data: st.DataObject) -> None:
    run.finish()
    history = run.history.history()
    ok_writes = {op.process: op for op in history.ops if op.f == "write" and op.ok}
    # Keys whose current value came from an acknowledged write: drop that write from the final state.
    droppable = [k for k, h in run.key_history.items() if h[-1][2] in ok_writes]
    assume(droppable)
    key = data.draw(st.sampled_from(sorted(droppable)))
    _, _, process = run.key_history[key][-1]
    previous = run.key_history[key][-2] if len(run.key_history[key]) > 1 else (None, None, None)
    run.state[key] = (previous[0], previous[1])
    run.final_reads()
    dropped = ok_writes[process]
    verdict = check_durability(run.history.history(), journals(*run.nodes.values()))
    assert verdict.valid is False
    assert verdict.counterexample is not None
    lost = {(r["key"], r["value"]): r for r in verdict.counterexample["lost"]}
    record = lost[(key, dropped.value)]
    assert record["acked_line"] == dropped.complete_index + 1
    assert sorted(record["missing_on"]) == sorted(run.node_names)


# -- queues -----------------------------------------------------------------------------------------


@st.composite
def queue_runs(draw: st.DrawFn) -> tuple[HistoryBuilder, list[str]]:
    """A correct FIFO queue: puts (ok/info/fail), destructive consumes, then a heal and a full drain."""
    b = HistoryBuilder()
    queue: list[str] = []
    delivered: list[str] = []
    process = 0
    for guid_number in range(draw(st.integers(1, 30))):
        guid = f"g{guid_number}"
        outcome = draw(st.sampled_from(["ok", "ok", "info", "fail"]))
        message = {"guid": guid, "value": guid_number}
        b.invoke(process, "put", "q", message)
        if outcome == "ok" or (outcome == "info" and draw(st.booleans())):
            queue.append(guid)
        b.complete(process, outcome, "put", "q", message)
        process += 1
        if queue and draw(st.booleans()):
            got = queue.pop(0)
            delivered.append(got)
            b.op(process, "consume", "q", output={"guid": got, "value": int(got[1:])})
            process += 1
    b.invoke("nemesis", "heal")
    b.complete("nemesis", "ok", "heal")
    while queue:
        got = queue.pop(0)
        delivered.append(got)
        b.op(process, "consume", "q", output={"guid": got, "value": int(got[1:])})
    b.op(process, "consume", "q", output=None)
    return b, delivered


@SETTINGS
@given(queue_runs())
def test_correct_queue_is_accepted(run: tuple[HistoryBuilder, list[str]]) -> None:
    builder, _ = run
    verdict = check_durability(builder.history(), model="queue")
    assert verdict.valid is True, verdict.summary


@SETTINGS
@given(queue_runs(), st.data())
def test_duplicated_guid_is_reported(run: tuple[HistoryBuilder, list[str]], data: st.DataObject) -> None:
    builder, delivered = run
    assume(delivered)
    guid = data.draw(st.sampled_from(delivered))
    empty = builder.events.pop()  # the final empty consume: re-added after the duplicate
    builder.events.pop()
    builder.time = empty["time"] - 1
    line = builder.op(999, "consume", "q", output={"guid": guid, "value": int(guid[1:])})
    builder.op(999, "consume", "q", output=None)
    verdict = check_durability(builder.history(), model="queue")
    assert verdict.valid is False
    assert verdict.counterexample is not None
    (dup,) = verdict.counterexample["duplicates"]
    assert (dup["guid"], dup["second"]["complete_line"]) == (guid, line)
