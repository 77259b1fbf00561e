"""A deterministic test network for the `lease` mode: data nodes plus the external store group they elect through.

`LeaseNetwork` is a `CoreNetwork` of lease-mode data nodes n1..nN whose `Ready.requests` (client requests
to the store, cluster.core.election.lease) are carried to a second `CoreNetwork`, the store: a `raft`
group whose members the data nodes know as s1..sM (store node `nK` is member `sK`). Replies travel back
through `Node.store_reply`. Both groups share one virtual clock; each keeps its own `Observer`, so the
store's own safety is checked too. Store traffic can be cut per data node (`cut_from_store`) or lost with
a store member that is down; either way the request simply gets no reply, as on a real network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cluster.core.member import Ready
from tests.cluster.core_network import CoreNetwork

STORE_TIMING = {"heartbeat_interval": 0.05, "missed_heartbeats": 3, "election_random_wait": 0.2}


def member_of(store_id: str) -> str:
    return "s" + store_id[1:]


def store_id_of(member: str) -> str:
    return "n" + member[1:]


@dataclass
class StoreCall:
    data_node: str
    member: str
    request: dict


@dataclass
class StoreAnswer:
    member: str
    data_node: str
    reply: dict


class LeaseNetwork(CoreNetwork):
    """Lease-mode data nodes and their store group, in virtual time (see the module docstring)."""

    def __init__(self, size: int = 3, store_size: int = 3, seed: int = 0, store_bugs: tuple[str, ...] = (),
                 **overrides: Any) -> None:
        self.store = CoreNetwork(store_size, mode="raft", seed=seed + 1000, bugs=store_bugs, **STORE_TIMING)
        members = tuple(member_of(i) for i in self.store.ids)
        overrides.setdefault("store", members)
        self.store_calls: list[StoreCall] = []
        self.store_answers: list[StoreAnswer] = []
        self.store_cut: set[str] = set()
        self._seen_replies: dict[str, int] = {}
        self.store_traffic = 0
        super().__init__(size, mode="lease", seed=seed, **overrides)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> LeaseNetwork:
        self.store.start()
        super().start()
        return self

    def start_store_first(self, timeout: float = 5.0) -> LeaseNetwork:
        """Start the store, wait for its leader, then start the data nodes (a fresh deployment)."""
        self.store.start()
        self.store.wait_for_leader(timeout)
        self.now = self.store.now
        super().start()
        return self

    def cut_from_store(self, node_id: str) -> None:
        self.store_cut.add(node_id)

    def heal(self) -> None:
        super().heal()
        self.store_cut.clear()

    # ------------------------------------------------------------------ driving

    def _apply(self, node_id: str, ready: Ready) -> None:
        super()._apply(node_id, ready)
        if self.nodes[node_id] is None:
            return  # crashed mid-Ready: nothing after the early messages left the process
        for member, request in ready.requests:
            assert member in self.configs[node_id].store, f"{node_id} sent a store request to {member}"
            self.store_traffic += 1
            self.store_calls.append(StoreCall(node_id, member, request))

    def _pump(self) -> bool:
        """Move store calls into the store and store replies back; True if anything moved."""
        moved = False
        calls, self.store_calls = self.store_calls, []
        for call in calls:
            moved = True
            target = store_id_of(call.member)
            if call.data_node in self.store_cut or not self.store.up(target):
                continue
            self.store.send_request(target, call.request, client=f"{call.data_node}>{call.member}")
        for client, replies in self.store.replies.items():
            seen = self._seen_replies.get(client, 0)
            if seen < len(replies):
                data_node, member = client.split(">")
                for reply in replies[seen:]:
                    reply = dict(reply)
                    if reply.get("leader") is not None:
                        reply["leader"] = member_of(reply["leader"])
                    self.store_answers.append(StoreAnswer(member, data_node, reply))
                self._seen_replies[client] = len(replies)
        answers, self.store_answers = self.store_answers, []
        for answer in answers:
            moved = True
            node = self.nodes[answer.data_node]
            if node is None or answer.data_node in self.store_cut:
                continue
            self._apply(answer.data_node, node.store_reply(answer.member, answer.reply, self.now,
                                                           self.wall(answer.data_node)))
        return moved

    def deliver_all(self, limit: int = 100_000) -> None:
        for _ in range(limit):
            super().deliver_all(limit)
            self.store.deliver_all(limit)
            if not self._pump() and not self.inflight and not self.store.inflight:
                return
        raise AssertionError(f"store traffic still moving after {limit} rounds")

    def advance(self, dt: float) -> None:
        self.now += dt
        self.store.now = self.now
        self.store.tick_due()
        self.tick_due()

    # ------------------------------------------------------------------ inspection

    def lease_record(self) -> Any:
        """The key's value as the store leader has applied it (None if no store leader or never written)."""
        lead = self.store.leader()
        if lead is None:
            return None
        key = next(iter(self.configs.values())).lease_key
        return self.store.nodes[lead].state_machine.read(key)[0]
