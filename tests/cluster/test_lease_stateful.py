"""The Hypothesis state machine of test_core_stateful.py, run against the lease mode: 3-5 data nodes that
elect through a 3-node `raft` store group (tests/cluster/lease_network.py).

Besides the data network's faults, the store is faulted too: a data node cut from the store, store nodes
crashed (keeping a store majority) and restarted, and a data node's wall clock moved (which a correct lease
ignores), and messages held back for long (`hold` / `release`). The invariants of both groups must hold
with every bug off. (Within this budget the machine does not find `no-fencing-token`; the targeted scenario
in test_core_lease.py shows that bug.)
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule, run_state_machine_as_test

from tests.cluster.lease_network import LeaseNetwork
from tests.cluster.test_core_stateful import ClusterMachine, _budget

FAST = {"heartbeat_interval": 0.1, "missed_heartbeats": 3, "lease_ttl": 0.8}


class LeaseMachine(ClusterMachine):
    mode = "lease"

    @initialize(size=st.integers(3, 5), seed=st.integers(0, 2**16), settle=st.sampled_from([0.0, 1.0, 3.0]))
    def setup(self, size: int, seed: int, settle: float) -> None:  # type: ignore[override]
        self.net = LeaseNetwork(size, seed=seed, bugs=self.bugs, **FAST)
        self.held: list = []
        self.net.start()
        self.net.run(settle, step=0.05)

    @rule(i=st.integers(0, 1000))
    def hold(self, i: int) -> None:
        """Delay a message for long: it stays out of the network until `release`."""
        if self.net.inflight:
            self.held.append(self.net.inflight.pop(i % len(self.net.inflight)))

    @rule()
    def release(self) -> None:
        self.net.inflight[:0] = self.held
        self.held = []

    @rule()
    def pump_store(self) -> None:
        """Carry pending store requests and replies once (the data network's own rules do not)."""
        self.net._pump()

    @rule(n=st.integers(0, 4))
    def cut_from_store(self, n: int) -> None:
        self.net.cut_from_store(self._node(n))

    @rule(n=st.integers(0, 2))
    def crash_store(self, n: int) -> None:
        store = self.net.store
        target = store.ids[n % len(store.ids)]
        if store.up(target) and all(store.up(i) for i in store.ids):
            store.crash(target)

    @rule(n=st.integers(0, 2))
    def restart_store(self, n: int) -> None:
        store = self.net.store
        target = store.ids[n % len(store.ids)]
        if not store.up(target):
            store.start_node(target)

    @rule(n=st.integers(0, 4), offset=st.sampled_from([-5.0, -1.0, 0.0, 2.0]))
    def skew_clock(self, n: int, offset: float) -> None:
        self.net.wall_offset[self._node(n)] = offset

    @invariant()
    def store_safe(self) -> None:
        if self.net is not None:
            assert not self.net.store.violations, "store: " + "; ".join(self.net.store.violations)


def test_lease_invariants_hold_without_bugs() -> None:
    run_state_machine_as_test(LeaseMachine, settings=_budget(examples=40, steps=80))

