"""The Hypothesis state machine of test_core_stateful.py, run against fluvio: 3-4 SPUs and the SC.

The SC is one more member of the network: the random crashes, restarts, isolations and splits hit it
too, and `cut` cuts a single link (the fault that makes a follower leave the LRS while the SC still sees
it), and `lose_the_lrs` plays the scenario in which only a replica outside the LRS is left. The
Observer's invariants must hold with every bug off, and must trip with `promote-outside-lrs`.
"""

from __future__ import annotations

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule, run_state_machine_as_test

from tests.cluster.fluvio_network import SC, FluvioNetwork
from tests.cluster.test_core_stateful import ClusterMachine, _budget

FAST = {"heartbeat_interval": 0.1, "missed_heartbeats": 3}


class FluvioMachine(ClusterMachine):
    mode = "fluvio"
    sc_bugs: tuple[str, ...] = ()

    @initialize(size=st.integers(3, 4), seed=st.integers(0, 2**16), settle=st.sampled_from([0.0, 1.0]))
    def setup(self, size: int, seed: int, settle: float) -> None:  # type: ignore[override]
        self.net = FluvioNetwork(size, seed=seed, sc_bugs=self.sc_bugs, **FAST)
        self.net.start()
        self.net.run(settle, step=0.05)

    @rule(a=st.integers(0, 4), b=st.integers(0, 4))
    def cut(self, a: int, b: int) -> None:
        if self._node(a) != self._node(b):
            self.net.cut(self._node(a), self._node(b))

    @rule(n=st.integers(0, 4))
    def cut_from_leader(self, n: int) -> None:
        """The leader loses one follower while both still reach the SC: the follower leaves the LRS."""
        leader, follower = self.net.leader(), self._node(n)
        if leader is not None and follower not in (leader, SC):
            self.net.cut(leader, follower)
            self.net.run(1.0, step=0.05)

    @rule(n=st.integers(0, 4))
    def lose_the_lrs(self, n: int) -> None:
        """A follower leaves the LRS (cut from the leader), a write commits without it, then every
        other SPU dies: only a replica outside the LRS is left for the SC."""
        net, leader, outsider = self.net, self.net.leader(), self._node(n)
        if leader is None or outsider in (leader, SC) or not net.up(outsider):
            return
        net.cut(leader, outsider)
        net.run(1.0, step=0.05)
        self.value += 1
        net.send_request(leader, {"op": "write", "key": "x", "value": self.value})
        net.run(0.3, step=0.05)
        for spu in net.spus:
            if spu != outsider and net.up(spu):
                net.crash(spu)
        net.run(1.5, step=0.05)

    @rule(n=st.integers(0, 4))
    def crash_any(self, n: int) -> None:
        """Unlike the majority modes, fluvio is asked to survive losing all but one LRS member."""
        if self.net.up(self._node(n)):
            self.net.crash(self._node(n))


class FluvioPromoteOutsideLrsMachine(FluvioMachine):
    sc_bugs = ("promote-outside-lrs",)


def test_fluvio_invariants_hold_without_bugs() -> None:
    run_state_machine_as_test(FluvioMachine, settings=_budget(examples=60, steps=100))


def test_promote_outside_lrs_is_found() -> None:
    found = settings(_budget(examples=100, steps=60), phases=[Phase.generate])
    with pytest.raises(AssertionError, match="committed entry .* changed|stale read"):
        run_state_machine_as_test(FluvioPromoteOutsideLrsMachine, settings=found)
