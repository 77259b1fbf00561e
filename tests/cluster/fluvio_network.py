"""`CoreNetwork` with a Fluvio controller: SPUs n1..nN of mode `fluvio` plus the SC, id `sc`.

The SC is one more member of the network: partitions, crashes and restarts apply to it as to any node
(its disk keeps its `controller` records). The Observer's invariants apply to the SPUs; the SC's
`decision` events are kept in `journals["sc"]`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from cluster.core.election.fluvio import CONTROLLER_ID
from cluster.core.fluvio_controller import Controller, ControllerConfig, recover_controller
from cluster.core.member import Ready
from tests.cluster.core_network import CoreNetwork, Envelope, _copy

SC = CONTROLLER_ID


class FluvioNetwork(CoreNetwork):
    """SPUs n1..nN and the controller `sc`, in virtual time."""

    def __init__(self, size: int = 3, seed: int = 0, bugs: Iterable[str] = (), sc_bugs: Iterable[str] = (),
                 wait_for_response: float = 0.5, **overrides: Any) -> None:
        super().__init__(size, mode="fluvio", seed=seed, bugs=bugs, **overrides)
        self.spus = list(self.ids)
        spu = self.configs[self.spus[0]]
        self.sc_config = ControllerConfig(spus=tuple(self.spus), bugs=frozenset(sc_bugs),
                                          heartbeat_interval=spu.heartbeat_interval,
                                          missed_heartbeats=spu.missed_heartbeats,
                                          wait_for_response=wait_for_response)
        self.ids.append(SC)
        for table, value in ((self.wall_offset, 0.0), (self.disks, []), (self.nodes, None),
                             (self.next_tick, None), (self.incarnation, 0), (self.journals, []),
                             (self.grudge, set())):
            table[SC] = value

    def start_node(self, node_id: str) -> None:
        if node_id != SC:
            super().start_node(node_id)
            return
        assert self.nodes[SC] is None, "sc is already running"
        self.incarnation[SC] += 1
        state = recover_controller(_copy(self.disks[SC]), self.spus)
        controller = Controller(self.sc_config, state, self.now, self.wall(SC),
                                random.Random(f"{self.seed}/sc/{self.incarnation[SC]}"))
        self.nodes[SC] = controller  # type: ignore[assignment]
        self._apply(SC, controller.start(self.now, self.wall(SC)))

    def _apply(self, node_id: str, ready: Ready) -> None:
        if node_id != SC:
            super()._apply(node_id, ready)
            return
        if SC in self.crash_after_early:
            self.crash_after_early.discard(SC)
            self.crash(SC)
            return
        self.disks[SC].extend(_copy(ready.persist))
        for event in ready.journal:
            self.journals[SC].append(dict(event, node=SC, seq=len(self.journals[SC]), wall=self.wall(SC)))
        for dst, msg in ready.messages:
            assert dst in self.ids and dst != SC, f"sc sent to {dst}"
            self.traffic.append((SC, dst, msg["type"]))
            self.inflight.append(Envelope(SC, dst, _copy(msg)))
        for client, reply in ready.replies:
            reply = _copy(reply)
            self.observer.on_reply(SC, (client, reply.get("id")), reply)
            self.replies.setdefault(client, []).append(reply)
        self.next_tick[SC] = ready.next_tick

    @property
    def controller(self) -> Controller:
        controller = self.nodes[SC]
        assert controller is not None, "sc is down"
        return controller  # type: ignore[return-value]

    def decisions(self) -> list[dict]:
        return [e for e in self.journals[SC] if e["event"] == "decision"]

    def describe(self) -> str:
        spus = "; ".join(
            f"{i}: down" if self.nodes[i] is None else
            f"{i}: {self.nodes[i].role} term {self.nodes[i].term} leader {self.nodes[i].leader} "
            f"last {self.nodes[i].log.last_lsn} commit {self.nodes[i].commit_index}" for i in self.spus)
        sc = self.nodes[SC]
        return f"{spus}; sc: " + ("down" if sc is None else f"{sc.status()}")
