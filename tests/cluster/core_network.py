"""A small deterministic network of node cores for tests (not the simulator: no workload, no history).

`CoreNetwork` drives several `cluster.core.member.Node`s the way a runtime would, in virtual time: it
persists each Ready's records on a per-node "disk" before queueing its messages, keeps in-flight messages
in a list the test delivers, drops or reorders, applies partitions as grudges (receiver -> senders it
drops), crashes a node by throwing away everything but its disk, and restarts it from `recover(disk)`.
Every message and record goes through a JSON round trip, as on a real wire and disk.

`Observer` checks the safety invariants after every step and collects violations instead of raising, so
a test can assert that a bug-free cluster has none and that a buggy one has the expected one:

Drivers may send a Ready's `early` messages before persisting it; `send_request(..., crash=True)` kills
the node in exactly that window.

* at most one leader per term (from the journals' `role` events);
* committed entries never change (the entry at a committed index is the same on every node, forever);
* applied LSNs strictly increase on each node, across restarts (from the journals' `apply` events);
* a write is acknowledged only once it is committed;
* a read never returns a register older than a write acknowledged before the read was sent (LSNs order
  the writes of a key, so this is the real-time part of linearizability for reads).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cluster.core.config import NodeConfig
from cluster.core.member import Node, Ready
from cluster.core.shards import node_class
from cluster.core.storage import recover

# Timers short enough for an election to settle in about a second of virtual time.
FAST = {"heartbeat_interval": 0.1, "missed_heartbeats": 3, "election_random_wait": 0.3,
        "proposal_timeout": 0.3}
# n1 stands for election at once, so it wins the first one.
FIRST = {"n1": {"startup_wait": 0.0, "election_random_wait": 0.0}}


def _copy(value: Any) -> Any:
    return json.loads(json.dumps(value))


def entry_identity(entry: dict) -> str:
    return json.dumps(entry, sort_keys=True)


@dataclass
class Envelope:
    src: str
    dst: str
    msg: dict


@dataclass
class Observer:
    """Safety invariants over everything the nodes journal and commit."""

    violations: list[str] = field(default_factory=list)
    leaders: dict[int, str] = field(default_factory=dict)
    committed: dict[int, str] = field(default_factory=dict)
    committed_lsns: set[tuple[int, int]] = field(default_factory=set)
    last_applied: dict[str, tuple[int, int]] = field(default_factory=dict)
    commit_seen: dict[str, int] = field(default_factory=dict)
    write_keys: dict[tuple[str, Any], str] = field(default_factory=dict)  # writes awaiting a reply
    acked_writes: dict[str, tuple[int, int]] = field(default_factory=dict)  # key -> newest acked LSN
    read_floor: dict[tuple[str, Any], tuple[str, tuple[int, int] | None]] = field(default_factory=dict)

    def on_journal(self, node_id: str, event: dict) -> None:
        if event["event"] == "role" and event["role"] == "leader":
            first = self.leaders.setdefault(event["term"], node_id)
            if first != node_id:
                self.violations.append(f"term {event['term']} has two leaders: {first} and {node_id}")
        elif event["event"] == "apply":
            lsn = tuple(event["lsn"])
            previous = self.last_applied.get(node_id)
            if previous is not None and lsn <= previous:
                self.violations.append(f"{node_id} applied {list(lsn)} after {list(previous)}")
            self.last_applied[node_id] = lsn

    def on_restart(self, node_id: str, node: Node) -> None:
        self.commit_seen[node_id] = node.commit_index

    def on_state(self, node_id: str, node: Node) -> None:
        seen = min(self.commit_seen.get(node_id, 0), node.commit_index)
        for index in range(seen + 1, node.commit_index + 1):
            entry = node.log.entry(index)
            identity = entry_identity(entry)
            first = self.committed.setdefault(index, identity)
            if first != identity:
                self.violations.append(f"committed entry {index} changed on {node_id}: {first} -> {identity}")
            self.committed_lsns.add(tuple(entry["lsn"]))
        self.commit_seen[node_id] = node.commit_index

    def on_read_sent(self, request_key: tuple[str, Any], key: str) -> None:
        self.read_floor[request_key] = (key, self.acked_writes.get(key))

    def on_reply(self, node_id: str, request_key: tuple[str, Any], reply: dict) -> None:
        lsn = reply.get("lsn")
        if request_key in self.write_keys:
            key = self.write_keys.pop(request_key)
            if reply.get("ok") or reply.get("error") == "cas-mismatch":
                if tuple(lsn) not in self.committed_lsns:
                    self.violations.append(f"{node_id} acknowledged a write at {lsn} before it was committed")
                if reply.get("ok") and tuple(lsn) > self.acked_writes.get(key, (0, 0)):
                    self.acked_writes[key] = tuple(lsn)
        elif request_key in self.read_floor:
            key, floor = self.read_floor.pop(request_key)
            if reply.get("ok") and floor is not None and (lsn is None or tuple(lsn) < floor):
                self.violations.append(f"{node_id} served a stale read of {key!r}: saw {lsn}, but the write "
                                       f"at {list(floor)} was acknowledged before the read was sent")


class CoreNetwork:
    """Nodes n1..nN of one mode, in virtual time; see the module docstring."""

    def __init__(self, size: int = 3, mode: str = "blazingmq", seed: int = 0,
                 bugs: Iterable[str] | dict[str, Iterable[str]] = (),
                 per_node: dict[str, dict[str, Any]] | None = None, **overrides: Any) -> None:
        self.ids = [f"n{i}" for i in range(1, size + 1)]
        self.seed = seed
        self.configs: dict[str, NodeConfig] = {}
        for node_id in self.ids:
            node_bugs = bugs.get(node_id, ()) if isinstance(bugs, dict) else bugs
            settings = dict(overrides)
            settings.update((per_node or {}).get(node_id, {}))
            self.configs[node_id] = NodeConfig(
                node_id=node_id, peers=tuple(p for p in self.ids if p != node_id), mode=mode,
                bugs=frozenset(node_bugs), **settings)
        self.now = 0.0
        self.wall_offset = {node_id: 0.0 for node_id in self.ids}
        self.disks: dict[str, list[dict]] = {node_id: [] for node_id in self.ids}
        self.nodes: dict[str, Node | None] = {node_id: None for node_id in self.ids}
        self.next_tick: dict[str, float | None] = {node_id: None for node_id in self.ids}
        self.incarnation = {node_id: 0 for node_id in self.ids}
        self.journals: dict[str, list[dict]] = {node_id: [] for node_id in self.ids}
        self.inflight: list[Envelope] = []
        self.traffic: list[tuple[str, str, str]] = []  # (src, dst, type) of every message sent
        self.crash_after_early: set[str] = set()  # nodes to kill mid-Ready, after sending `early` messages
        self.grudge: dict[str, set[str]] = {node_id: set() for node_id in self.ids}
        self.replies: dict[str, list[dict]] = {}
        self.observer = Observer()
        self._request_ids = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> CoreNetwork:
        for node_id in self.ids:
            self.start_node(node_id)
        return self

    def start_node(self, node_id: str) -> None:
        assert self.nodes[node_id] is None, f"{node_id} is already running"
        self.incarnation[node_id] += 1
        rng = random.Random(f"{self.seed}/{node_id}/{self.incarnation[node_id]}")
        config = self.configs[node_id]
        node = node_class(config)(config, recover(_copy(self.disks[node_id])), self.now, self.wall(node_id), rng)
        self.nodes[node_id] = node
        self.observer.on_restart(node_id, node)
        self._apply(node_id, node.start(self.now, self.wall(node_id)))

    def crash(self, node_id: str) -> None:
        """Lose everything but the disk (the driver persisted each Ready before sending: fsync always)."""
        self.nodes[node_id] = None
        self.next_tick[node_id] = None

    def up(self, node_id: str) -> bool:
        return self.nodes[node_id] is not None

    def wall(self, node_id: str) -> float:
        return self.now + self.wall_offset[node_id]

    # ------------------------------------------------------------------ partitions

    def isolate(self, node_id: str) -> None:
        others = [n for n in self.ids if n != node_id]
        self.partition([node_id], others)

    def partition(self, *groups: Iterable[str]) -> None:
        """Nodes in different groups drop each other's messages; nodes in no group see everyone."""
        groups = [list(g) for g in groups]
        for group in groups:
            for dst in group:
                for other in groups:
                    if other is not group:
                        self.grudge[dst].update(other)

    def cut(self, a: str, b: str) -> None:
        """a and b drop each other's messages; both still talk to everyone else."""
        self.grudge[a].add(b)
        self.grudge[b].add(a)

    def heal(self) -> None:
        for dst in self.ids:
            self.grudge[dst].clear()

    # ------------------------------------------------------------------ driving

    def _apply(self, node_id: str, ready: Ready) -> None:
        node = self.nodes[node_id]
        if node_id in self.crash_after_early:
            # The driver sent the Ready's early messages, then died before its records were durable.
            self.crash_after_early.discard(node_id)
            for dst, msg in ready.messages[:ready.early]:
                self.traffic.append((node_id, dst, msg["type"]))
                self.inflight.append(Envelope(node_id, dst, _copy(msg)))
            self.crash(node_id)
            return
        self.disks[node_id].extend(_copy(ready.persist))
        for event in ready.journal:
            event = dict(event, node=node_id, seq=len(self.journals[node_id]), wall=self.wall(node_id))
            self.journals[node_id].append(event)
            self.observer.on_journal(node_id, event)
        self.observer.on_state(node_id, node)
        for dst, msg in ready.messages:
            assert dst in self.ids and dst != node_id, f"{node_id} sent to {dst}"
            self.traffic.append((node_id, dst, msg["type"]))
            self.inflight.append(Envelope(node_id, dst, _copy(msg)))
        for client, reply in ready.replies:
            reply = _copy(reply)
            self.observer.on_reply(node_id, (client, reply.get("id")), reply)
            self.replies.setdefault(client, []).append(reply)
        self.next_tick[node_id] = ready.next_tick

    def deliver(self, index: int = 0) -> bool:
        """Deliver the in-flight message at `index`; False if it was dropped (grudge or receiver down)."""
        envelope = self.inflight.pop(index)
        node = self.nodes[envelope.dst]
        if node is None or envelope.src in self.grudge[envelope.dst]:
            return False
        self._apply(envelope.dst, node.receive(envelope.src, envelope.msg, self.now, self.wall(envelope.dst)))
        return True

    def drop(self, index: int = 0) -> None:
        self.inflight.pop(index)

    def drop_where(self, predicate: Any) -> int:
        """Drop every in-flight envelope the predicate accepts; returns how many."""
        kept = [e for e in self.inflight if not predicate(e)]
        dropped = len(self.inflight) - len(kept)
        self.inflight = kept
        return dropped

    def deliver_all(self, limit: int = 100_000) -> None:
        """Deliver in FIFO order, including what the deliveries produce, until nothing is in flight."""
        for _ in range(limit):
            if not self.inflight:
                return
            self.deliver(0)
        raise AssertionError(f"messages still in flight after {limit} deliveries (a message storm?)")

    def tick_due(self) -> None:
        for node_id in self.ids:
            node = self.nodes[node_id]
            due = self.next_tick[node_id]
            if node is not None and due is not None and due <= self.now:
                self._apply(node_id, node.tick(self.now, self.wall(node_id)))

    def advance(self, dt: float) -> None:
        self.now += dt
        self.tick_due()

    def run(self, duration: float, step: float = 0.01) -> None:
        """Deliver everything, move time on by `step`, tick what is due; until `duration` has passed."""
        end = self.now + duration
        while self.now < end - 1e-12:
            self.deliver_all()
            self.advance(min(step, end - self.now))
        self.deliver_all()

    def run_until(self, predicate: Any, timeout: float = 10.0, step: float = 0.01) -> bool:
        end = self.now + timeout
        while True:
            self.deliver_all()
            if predicate():
                return True
            if self.now >= end:
                return False
            self.advance(step)

    # ------------------------------------------------------------------ clients

    def send_request(self, node_id: str, request: dict, client: str = "c", crash: bool = False) -> Any:
        """Hand a request to a node (the reply may come later); returns the request id. With `crash`, the
        node dies while handling it: after sending the Ready's early messages, before persisting."""
        if crash:
            self.crash_after_early.add(node_id)
        self._request_ids += 1
        request = dict(request, id=request.get("id", self._request_ids))
        if request["op"] in ("write", "cas"):
            self.observer.write_keys[(client, request["id"])] = request["key"]
        elif request["op"] in ("put", "consume", "confirm"):
            self.observer.write_keys[(client, request["id"])] = ""
        elif request["op"] == "read":
            self.observer.on_read_sent((client, request["id"]), request["key"])
        node = self.nodes[node_id]
        assert node is not None, f"{node_id} is down"
        self._apply(node_id, node.request(client, _copy(request), self.now, self.wall(node_id)))
        return request["id"]

    def reply_to(self, client: str, request_id: Any) -> dict | None:
        for reply in self.replies.get(client, []):
            if reply.get("id") == request_id:
                return reply
        return None

    def call(self, node_id: str, request: dict, client: str = "c", timeout: float = 5.0) -> dict | None:
        """Send a request and run the network until its reply arrives (None on timeout)."""
        request_id = self.send_request(node_id, request, client)
        self.run_until(lambda: self.reply_to(client, request_id) is not None, timeout)
        return self.reply_to(client, request_id)

    # ------------------------------------------------------------------ inspection

    def leaders(self) -> list[str]:
        """Nodes that currently believe they lead (up nodes only), highest term first."""
        found = [(n.term, i) for i, n in self.nodes.items() if n is not None and n.role == "leader"]
        return [i for _, i in sorted(found, reverse=True)]

    def leader(self) -> str | None:
        """The node that leads the highest term among up nodes, if any."""
        found = self.leaders()
        return found[0] if found else None

    def wait_for_leader(self, timeout: float = 10.0, among: Iterable[str] | None = None) -> str:
        """Run until a leader (one of `among`, if given) accepts writes: synchronised and its term's first
        entry committed."""
        candidates = set(self.ids if among is None else among)

        def ready() -> bool:
            lead = self.leader()
            node = self.nodes[lead] if lead in candidates else None
            return node is not None and node.accepting and node.commit_index >= node.term_start_index
        assert self.run_until(ready, timeout), f"no leader within {timeout} s: {self.describe()}"
        return self.leader()

    def applied(self, node_id: str) -> list[dict]:
        return [e for e in self.journals[node_id] if e["event"] == "apply"]

    def describe(self) -> str:
        parts = []
        for node_id, node in self.nodes.items():
            if node is None:
                parts.append(f"{node_id}: down")
            else:
                parts.append(f"{node_id}: {node.role} term {node.term} leader {node.leader} "
                             f"last {node.log.last_lsn} commit {node.commit_index}")
        return "; ".join(parts)

    @property
    def violations(self) -> list[str]:
        return self.observer.violations


def n1_leading(mode: str, size: int = 3, **extra: object) -> CoreNetwork:
    """A started `size`-node network with FAST timers whose first leader is n1."""
    net = CoreNetwork(size, mode=mode, per_node=FIRST, **FAST, **extra).start()
    assert net.wait_for_leader() == "n1"
    return net


def single_node(node_id: str = "n1", peers: tuple[str, ...] = ("n2", "n3"), mode: str = "blazingmq",
                records: list[dict] | None = None, seed: int = 0, now: float = 0.0,
                **overrides: Any) -> tuple[Node, Ready]:
    """One started node whose peers are only names: the test plays them by hand with `receive`."""
    config = NodeConfig(node_id=node_id, peers=peers, mode=mode, **overrides)
    node = Node(config, recover(records or []), now, now, random.Random(seed))
    return node, node.start(now, now)


def sent(ready: Ready, kind: str, to: str | None = None) -> list[dict]:
    """The messages of one type (optionally to one peer) in a Ready."""
    return [m for peer, m in ready.messages if m["type"] == kind and (to is None or peer == to)]


def roles(journal: list[dict]) -> list[tuple[str, int, str | None]]:
    return [(e["role"], e["term"], e["leader"]) for e in journal if e["event"] == "role"]
