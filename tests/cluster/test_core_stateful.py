"""Hypothesis state-machine tests: 3-5 node cores under random delivery, drops, duplicates, reordering,
partitions, crashes (losing everything not persisted, also between a leader's early AppendEntries and
its own persist; at most a minority down at once, while partitions can cut off any majority) and
restarts, with client writes, compare-and-sets, reads (at the leader, and local reads at any node) and
queue operations.

Invariants (checked after every step by `core_network.Observer`): at most one leader per term; committed
entries never change; applied LSNs strictly increase on every node; writes are acknowledged only once
committed; no read, local follower reads included, returns a value older than a write acknowledged before
it was sent. They must hold in both modes with every bug off, and must trip with `vote-twice` on, which the last tests assert (the
failure is found within the example budget, not just possible), as must the read invariant when a follower
answers local reads without a read index.

Budgets are deliberate: a few seconds per test in the default run, derandomized so the run is the same
every time. `HYPOTHESIS_SCALE=20` multiplies the examples (with fresh randomness) when hunting.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from cluster.core.member import Node
from tests.cluster.core_network import CoreNetwork

FAST = {"heartbeat_interval": 0.1, "missed_heartbeats": 3, "election_random_wait": 0.3,
        "proposal_timeout": 0.3}
NODE = st.integers(0, 4)
TARGET = st.integers(-2, 4)  # a client's node: negative means whoever leads the highest term now
INDEX = st.integers(0, 1000)


def _budget(examples: int, steps: int) -> settings:
    scale = int(os.environ.get("HYPOTHESIS_SCALE", "1"))
    return settings(max_examples=examples * scale, stateful_step_count=steps, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck), derandomize=scale == 1)


class ClusterMachine(RuleBasedStateMachine):
    """Random faults and client operations against a CoreNetwork; subclasses pick mode and bugs."""

    mode = "blazingmq"
    bugs: tuple[str, ...] = ()

    def __init__(self) -> None:
        super().__init__()
        self.net: CoreNetwork | None = None
        self.value = 0

    @initialize(size=st.integers(3, 5), seed=st.integers(0, 2**16), scouting=st.booleans(),
                settle=st.sampled_from([0.0, 1.0, 3.0]))
    def setup(self, size: int, seed: int, scouting: bool, settle: float) -> None:
        self.net = CoreNetwork(size, mode=self.mode, seed=seed, bugs=self.bugs, scouting=scouting, **FAST)
        self.net.start()
        self.net.run(settle, step=0.05)  # most examples start from an elected leader

    def _node(self, n: int) -> str:
        if n < 0:
            leader = self.net.leader()
            if leader is not None:
                return leader
        return self.net.ids[n % len(self.net.ids)]

    # -- the network ------------------------------------------------------------------------------------

    @rule(i=INDEX)
    def deliver(self, i: int) -> None:
        if self.net.inflight:
            self.net.deliver(i % len(self.net.inflight))

    @rule(n=st.integers(1, 30))
    def deliver_in_order(self, n: int) -> None:
        for _ in range(n):
            if not self.net.inflight:
                break
            self.net.deliver(0)

    @rule(i=INDEX)
    def drop(self, i: int) -> None:
        if self.net.inflight:
            self.net.drop(i % len(self.net.inflight))

    @rule(i=INDEX)
    def duplicate(self, i: int) -> None:
        if self.net.inflight:
            envelope = self.net.inflight[i % len(self.net.inflight)]
            self.net.inflight.append(type(envelope)(envelope.src, envelope.dst, envelope.msg))

    @rule(dt=st.sampled_from([0.01, 0.05, 0.1, 0.3, 1.0]))
    def advance(self, dt: float) -> None:
        self.net.advance(dt)

    @rule(duration=st.sampled_from([0.1, 0.5, 1.5]))
    def run(self, duration: float) -> None:
        """Let the network work normally for a while (FIFO delivery, timers), under current partitions."""
        self.net.run(duration, step=0.05)

    @rule(n=NODE)
    def isolate(self, n: int) -> None:
        self.net.isolate(self._node(n))

    @rule(k=st.integers(1, 4))
    def split(self, k: int) -> None:
        ids = self.net.ids
        k = k % len(ids) or 1
        self.net.partition(ids[:k], ids[k:])

    @rule()
    def heal(self) -> None:
        self.net.heal()

    @rule(n=NODE)
    def crash(self, n: int) -> None:
        """Crash a node, keeping a majority up (restarts bring nodes back; partitions do the rest)."""
        net = self.net
        down = sum(1 for node_id in net.ids if not net.up(node_id))
        if net.up(self._node(n)) and down < len(net.ids) - net.configs[net.ids[0]].majority:
            net.crash(self._node(n))

    @rule(n=NODE)
    def restart(self, n: int) -> None:
        if not self.net.up(self._node(n)):
            self.net.start_node(self._node(n))

    # -- clients ----------------------------------------------------------------------------------------

    @rule(n=TARGET, key=st.sampled_from(["x", "y"]))
    def write(self, n: int, key: str) -> None:
        if self.net.up(self._node(n)):
            self.value += 1
            self.net.send_request(self._node(n), {"op": "write", "key": key, "value": self.value})

    @rule(n=TARGET, key=st.sampled_from(["x", "y"]))
    def write_and_crash(self, n: int, key: str) -> None:
        """The node dies after sending its early AppendEntries and before persisting the entry."""
        if self.net.up(self._node(n)):
            self.value += 1
            self.net.send_request(self._node(n), {"op": "write", "key": key, "value": self.value}, crash=True)

    @rule(n=TARGET, expected=st.integers(0, 5), key=st.sampled_from(["x", "y"]))
    def cas(self, n: int, expected: int, key: str) -> None:
        if self.net.up(self._node(n)):
            self.value += 1
            self.net.send_request(self._node(n), {"op": "cas", "key": key, "value": [expected, self.value]})

    @rule(n=TARGET, key=st.sampled_from(["x", "y"]))
    def read(self, n: int, key: str) -> None:
        if self.net.up(self._node(n)):
            self.net.send_request(self._node(n), {"op": "read", "key": key})

    @rule(key=st.sampled_from(["x", "y"]))
    def local_reads(self, key: str) -> None:
        """A local read at every node that is up, each served by that node (followers: by read index)."""
        for node_id in self.net.ids:
            if self.net.up(node_id):
                self.net.send_request(node_id, {"op": "read", "key": key, "local": True})

    @rule(n=TARGET, guid=st.sampled_from(["g1", "g2", "g3"]))
    def put(self, n: int, guid: str) -> None:
        if self.net.up(self._node(n)):
            self.net.send_request(self._node(n), {"op": "put", "key": "q", "value": guid, "guid": guid})

    @rule(n=TARGET)
    def consume(self, n: int) -> None:
        if self.net.up(self._node(n)):
            self.net.send_request(self._node(n), {"op": "consume", "key": "q"})

    # -- invariants -------------------------------------------------------------------------------------

    @invariant()
    def safe(self) -> None:
        if self.net is not None:
            assert not self.net.violations, "; ".join(self.net.violations)


class BlazingMQMachine(ClusterMachine):
    mode = "blazingmq"


class RaftMachine(ClusterMachine):
    mode = "raft"


class BlazingMQVoteTwiceMachine(ClusterMachine):
    mode = "blazingmq"
    bugs = ("vote-twice",)


class RaftVoteTwiceMachine(ClusterMachine):
    mode = "raft"
    bugs = ("vote-twice",)


@pytest.mark.parametrize("machine", [BlazingMQMachine, RaftMachine], ids=["blazingmq", "raft"])
def test_invariants_hold_without_bugs(machine: type[ClusterMachine]) -> None:
    run_state_machine_as_test(machine, settings=_budget(examples=80, steps=100))


@pytest.mark.parametrize("machine", [BlazingMQVoteTwiceMachine, RaftVoteTwiceMachine],
                         ids=["blazingmq", "raft"])
def test_vote_twice_is_found(machine: type[ClusterMachine]) -> None:
    found = settings(_budget(examples=200, steps=80), phases=[Phase.generate])
    with pytest.raises(AssertionError, match="has two leaders"):
        run_state_machine_as_test(machine, settings=found)


def test_a_local_read_served_without_a_read_index_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """The read invariant covers local reads: a follower that answers one from its own state at once,
    without the leader's read index, is caught serving a stale value."""

    def answer_at_once(node: Node, client: object, request: dict, now: float) -> None:
        node._reply(client, node._read_reply(request.get("id"), request["key"]))

    monkeypatch.setattr(Node, "_begin_follower_read", answer_at_once)
    found = settings(_budget(examples=100, steps=80), phases=[Phase.generate])
    with pytest.raises(AssertionError, match="served a stale read"):
        run_state_machine_as_test(BlazingMQMachine, settings=found)
