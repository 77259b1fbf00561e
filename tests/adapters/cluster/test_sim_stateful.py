"""A Hypothesis state machine over the simulator (issue 6, item 6): Hypothesis drives the world by hand
and shrinks whatever breaks an invariant.

The world runs with a manual network (``World(manual=True)``): every message waits in ``inflight`` until a
rule delivers or drops it. Rules: deliver (one or a few, in any order, or everything in flight), drop,
partition (a random grudge: one-way and bridges included), heal, crash (losing what was not synced),
restart (recovering from the disk), tick (virtual time passes, timers fire), settle (time passes on a
healthy network), client op (a write, cas or read to a node). Invariants, after every step:

* single leader per term (every journal ``role`` event naming a leader);
* the committed prefix never changes (the entry at a committed index is the same on every node, forever);
* applied LSNs strictly increase on each node, across restarts (journal ``apply`` events).

They hold with every bug off in both modes, and the last test shows they are not vacuous: with
``vote-twice`` Hypothesis finds (and shrinks) a term with two leaders within the example budget.
Derandomized, so the run is the same every time; ``HYPOTHESIS_SCALE=20`` hunts with fresh randomness.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from adapters.cluster.sim import World, WorldConfig

FAST = {"heartbeat_interval": 0.1, "missed_heartbeats": 3, "election_random_wait": 0.3, "proposal_timeout": 0.3}
NODES = ("n1", "n2", "n3", "n4", "n5")


def _budget(examples: int, steps: int) -> settings:
    scale = int(os.environ.get("HYPOTHESIS_SCALE", "1"))
    return settings(max_examples=examples * scale, stateful_step_count=steps, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck), derandomize=scale == 1)


class SimMachine(RuleBasedStateMachine):
    mode = "blazingmq"
    bugs: tuple[str, ...] = ()

    def __init__(self) -> None:
        super().__init__()
        self.world: World | None = None
        self.ids: tuple[str, ...] = ()
        self.violations: list[str] = []
        self.leaders: dict[int, str] = {}
        self.last_applied: dict[str, tuple[int, int]] = {}
        self.committed: dict[int, str] = {}
        self.requests = 0

    @initialize(size=st.integers(3, 5), seed=st.integers(0, 2**16), scouting=st.booleans(),
                settle=st.sampled_from([0.0, 1.0, 3.0]))
    def setup(self, size: int, seed: int, scouting: bool, settle: float) -> None:
        config = WorldConfig(nodes=size, mode=self.mode, bugs=self.bugs, core={**FAST, "scouting": scouting})
        self.world = World(config, seed, manual=True)
        self.ids = self.world.ids
        self.world.observers.append(self._observe)
        for node in self.ids:
            self.world.start(node)
        self._settle(settle)  # most examples start from an elected leader

    def _settle(self, seconds: float) -> None:
        """Let time pass with every message delivered promptly (a healthy network)."""
        end = self.world.now + round(seconds * 1e9)
        while self.world.now < end:
            while self.world.inflight:
                self.world.deliver(0)
            self.world.run_for(0.02)

    def _observe(self, node: str, line: dict) -> None:
        if line["event"] == "role" and line["role"] == "leader":
            first = self.leaders.setdefault(line["term"], node)
            if first != node:
                self.violations.append(f"term {line['term']} has two leaders: {first} and {node}")
        elif line["event"] == "apply":
            lsn = tuple(line["lsn"])
            previous = self.last_applied.get(node)
            if previous is not None and lsn <= previous:
                self.violations.append(f"{node} applied {list(lsn)} after {list(previous)}")
            self.last_applied[node] = lsn

    def _node(self, n: int) -> str:
        return self.ids[n % len(self.ids)]

    # -- rules ---------------------------------------------------------------------------------------------

    @rule(index=st.integers(0, 1000), count=st.integers(1, 8))
    def deliver(self, index: int, count: int) -> None:
        for _ in range(count):
            if not self.world.inflight:
                return
            self.world.deliver(index % len(self.world.inflight))

    @rule(rounds=st.integers(1, 3))
    def deliver_all(self, rounds: int) -> None:
        """Everything in flight, in order, and what that produces, ``rounds`` times over."""
        for _ in range(rounds):
            waiting = len(self.world.inflight)
            for _ in range(waiting):
                self.world.deliver(0)

    @rule(index=st.integers(0, 1000))
    def drop(self, index: int) -> None:
        if self.world.inflight:
            self.world.drop(index % len(self.world.inflight))

    @rule(cuts=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=6))
    def partition(self, cuts: list[tuple[int, int]]) -> None:
        grudge: dict[str, set[str]] = {}
        for dst, src in cuts:
            if self._node(dst) != self._node(src):
                grudge.setdefault(self._node(dst), set()).add(self._node(src))
        self.world.network.set_grudge(grudge)

    @rule()
    def heal(self) -> None:
        self.world.network.set_grudge({})

    @rule(n=st.integers(0, 4))
    def crash(self, n: int) -> None:
        self.world.kill(self._node(n))

    @rule(n=st.integers(0, 4))
    def restart(self, n: int) -> None:
        self.world.start(self._node(n))

    @rule(dt=st.sampled_from([0.01, 0.05, 0.1, 0.3, 0.6]))
    def tick(self, dt: float) -> None:
        self.world.run_for(dt)

    @rule(seconds=st.sampled_from([0.2, 1.0]))
    def settle(self, seconds: float) -> None:
        self._settle(seconds)

    @rule(n=st.integers(-3, 4), f=st.sampled_from(["write", "cas", "read"]), key=st.sampled_from(["x", "y"]))
    def client_op(self, n: int, f: str, key: str) -> None:
        node = self.world.leader() if n < 0 else self._node(n)
        if node is None:
            return
        self.requests += 1
        request = {"id": self.requests, "op": f, "key": key}
        if f == "write":
            request["value"] = self.requests
        elif f == "cas":
            request["value"] = [None, self.requests]
        self.world.client_send(node, ("c", self.requests), request, lambda ref, reply: None)

    # -- invariants ----------------------------------------------------------------------------------------

    @invariant()
    def single_leader_per_term_and_applied_lsns_increase(self) -> None:
        assert not self.violations, self.violations

    @invariant()
    def committed_prefix_never_changes(self) -> None:
        if self.world is None:
            return
        for node in self.ids:
            core = self.world.core(node)
            if core is None:
                continue
            for index in range(1, core.commit_index + 1):
                identity = json.dumps(core.log.entry(index), sort_keys=True)
                first = self.committed.setdefault(index, identity)
                assert first == identity, f"committed entry {index} changed on {node}: {first} -> {identity}"


class RaftMachine(SimMachine):
    mode = "raft"


class VoteTwiceMachine(SimMachine):
    bugs = ("vote-twice",)


@pytest.mark.parametrize("machine", [SimMachine, RaftMachine], ids=["blazingmq", "raft"])
def test_invariants_hold_without_bugs(machine: type[SimMachine]) -> None:
    run_state_machine_as_test(machine, settings=_budget(examples=25, steps=60))


def test_vote_twice_breaks_single_leader_per_term_and_hypothesis_finds_it() -> None:
    with pytest.raises(AssertionError, match="has two leaders"):
        run_state_machine_as_test(VoteTwiceMachine, settings=settings(_budget(examples=150, steps=60),
                                                                      phases=[Phase.generate, Phase.shrink]))
