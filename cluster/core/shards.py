"""Storage shards with primaries (seed 004, "Storage Shards" and "Cluster Coordination"): the shard layer.

With `NodeConfig.shards` = N > 1 a node (`ShardedNode`, which drivers build through `node_class`) keeps N
storage shards (partitions) besides the cluster's own log.
Every node has a copy of every shard; each shard has exactly one *primary*, the only node that writes it
and replicates it to the others. The elected cluster leader (any election mode: this layer sits above the
elector) decides which node is primary of which shard (seed 004's `masterAssignment`):

* `leader-is-master-all` (E_LEADER_IS_MASTER_ALL): the leader makes itself primary of every shard;
* `least-assigned` (E_LEAST_ASSIGNED): each shard goes to the live node that is primary of the fewest.

**Primary lease ids.** Every assignment carries the shard's *primary lease id*, a term-like counter the
leader bumps on every assignment: `max(the shard's last lease id it knows, cluster term * LEASE_STRIDE) + 1`,
so a later leader's lease ids are above every lease id an earlier leader issued without having to learn them
(a leader issues at most LEASE_STRIDE - 1 per shard). A shard's copy on each node is a `ShardReplica`: the
node's own replication core (`cluster.core.member.Node`: LSN-labelled log, commit by majority, leader sync,
read index, registers and queues) whose "term" is the lease id and whose role changes only by assignment
(`PrimaryElection`, no election of its own). So each shard has its own LSN sequence `[lease id, seq]`, its
own replication, and the fencing the term gives: a replica refuses a primary's AppendEntries and heartbeats
of a lease id lower than the one it knows (InvalidHeartbeat, a refusal carrying the newer lease id, which
makes a deposed primary step down), and a new primary first synchronises with a majority of replicas
(`cluster.core.sync`), which then refuse the old lease: what the old primary committed is in that
majority, and it can commit nothing more.

**The leader's loop** (`ShardLayer`, every `heartbeat_interval` while the node leads the cluster):
broadcast the table (`ShardAssignment`: each shard's primary and lease id); every node adopts, per shard,
an assignment whose lease id is higher than the one it knows (a node named primary becomes the shard's
leader and synchronises; the others follow it) and answers with a `ShardReport` (the lease id of each shard
it is primary of). The leader assigns every shard when it starts leading (at once with
`leader-is-master-all`; after `2 * heartbeat_interval` of reports with `least-assigned`, to balance over the
nodes that answered), and reassigns a shard whose primary is lost (no report for two election timeouts)
or does not serve it (its report, or its own replica, does not lead the shard's lease two election timeouts
after the assignment: a primary that restarted never takes up a lease again). A shard's primary never
steps down on its own (`leader_quorum_timeout` 0): it stops when it learns a higher lease id.

**Requests and journals.** Keys (registers and queues) map to shards by `shard_of` (CRC-32 of the key's
UTF-8 bytes, modulo N). A client request for a key is handed to that shard's replica on the receiving
node: the primary serves it; another node answers `not-leader` naming the primary it knows (the client
follows it), or serves a local read by read index from the primary. Each shard is the group
`"shard-<i>"` (CONTRACTS: groups): its replica's peer messages, storage records, journal events (`role`
when the node becomes or ceases to be primary, `append`, `commit`, `apply`) and client replies carry
`"group"`; `status` adds `groups`. The replica's `start` event is not journalled (the node's own
`start` marks the restart for every group).

**Known bugs** (`cluster.core.bugs`): `stale-primary`: replicas do not check the primary lease id: they
take and acknowledge AppendEntries and heartbeats of any lease id, answering in the sender's lease, so a
primary the leader replaced, and that has not heard of it, keeps committing: two primaries of one shard.
`primary-lsn-reuse`: the leader reassigns a shard under the lease id it already has, and a node named
primary of the lease it follows takes it up, its sequence back at 1.
"""

from __future__ import annotations

import dataclasses
import random
import zlib
from collections.abc import Hashable
from typing import Any

from cluster.core.config import NodeConfig
from cluster.core.election.base import CANDIDATE, FOLLOWER, LEADER, Election
from cluster.core.member import Node, Ready, RequestError, _validate_request
from cluster.core.messages import AppendEntries, LeaderHeartbeat, Message
from cluster.core.storage import Recovered, recover

LEASE_STRIDE = 1000
"""Lease ids a leader of cluster term T issues start above T * LEASE_STRIDE (module docstring)."""

SHARD_ASSIGNMENT = "ShardAssignment"
SHARD_REPORT = "ShardReport"
SHARD_MESSAGES: dict[str, str] = {
    SHARD_ASSIGNMENT: "leader to every node, every heartbeat interval: `term` (cluster term), `primaries` and "
                      "`leases`, one per shard ('' and 0: not assigned yet)",
    SHARD_REPORT: "a node's answer to the table: `term` (cluster term) and `leading`, per shard the lease id it "
                  "is primary of (0: none)",
}
"""The shard layer's own peer messages (a replica's messages are the node's, with `"group"`)."""


def group_name(index: int) -> str:
    """The group id of shard `index` (CONTRACTS: `"shard-<i>"`)."""
    return f"shard-{index}"


def shard_of(key: str, shards: int) -> int:
    """The shard of a register or queue key: CRC-32 of its UTF-8 bytes modulo `shards` (stable across
    processes and versions, unlike Python's `hash`)."""
    return zlib.crc32(key.encode("utf-8")) % shards


def _shard_index(group: Any, shards: int) -> int | None:
    if type(group) is not str or not group.startswith("shard-"):
        return None
    digits = group[6:]
    if not digits.isdigit() or (len(digits) > 1 and digits[0] == "0"):
        return None
    index = int(digits)
    return index if index < shards else None


def node_class(config: NodeConfig) -> type[Node]:
    """The core a driver builds for `config`: `ShardedNode` with storage shards, else `Node` (drivers call
    `node_class(config)(config, recovered, now, wall, rng)`)."""
    return ShardedNode if config.shards > 1 else Node


class PrimaryElection(Election):
    """A shard replica's "election": none. Its role and term (the primary lease id) change only by the
    leader's assignments (`ShardReplica.assign`) and by the higher-term rule of the shared messages."""

    mode = "shard-primary"
    messages: tuple[type[Message], ...] = ()
    leader_sync = True  # any node may be made primary: it synchronises with a majority first
    resumes_at_start = False

    def on_start(self, now: float) -> None:
        return None

    def on_tick(self, now: float) -> None:
        return None

    def on_message(self, sender: str, message: Message, now: float) -> None:
        return None

    def on_leader_contact(self, now: float, discovered: bool) -> None:
        return None

    def on_leader_unknown(self, now: float) -> None:
        return None

    def next_deadline(self) -> float | None:
        return None


class ShardReplica(Node):
    """This node's copy of one storage shard: the node's replication core with `PrimaryElection`."""

    def __init__(self, config: NodeConfig, recovered: Recovered, now: float, wall: float, rng: random.Random,
                 index: int) -> None:
        super().__init__(config, recovered, now, wall, rng)
        self.index = index
        self.group = group_name(index)
        self.election = PrimaryElection(self)
        self._peer_set = frozenset(config.peers)
        self.resumable_term = None
        self.bug_stale_primary = config.has_bug("stale-primary")

    def assign(self, primary: str, lease: int, now: float, wall: float) -> Ready:
        """Adopt the leader's assignment: lead the shard under `lease`, or follow `primary` in it."""
        self._begin(now, wall)
        if primary == self.id:
            if self.role == LEADER:
                self.transition(now, FOLLOWER, leader=None)
            self.transition(now, CANDIDATE, leader=None, term=lease, vote=self.id)
            self.transition(now, LEADER, leader=self.id)
        else:
            self.transition(now, FOLLOWER, leader=primary, term=lease, vote=None)
        return self._finish()

    # Bug `stale-primary`: a replica takes a primary's writes and heartbeats without comparing its lease id
    # with the one it knows, and answers in the sender's lease, so that primary counts the answer.

    def _on_append(self, sender: str, message: AppendEntries, now: float) -> None:
        if self.bug_stale_primary and message.term < self.term and self.role != LEADER:
            self._unfenced(Node._on_append, sender, message, now)
        else:
            super()._on_append(sender, message, now)

    def _on_heartbeat(self, sender: str, message: LeaderHeartbeat, now: float) -> None:
        if self.bug_stale_primary and message.term < self.term and self.role != LEADER:
            self._unfenced(Node._on_heartbeat, sender, message, now)
        else:
            super()._on_heartbeat(sender, message, now)

    def _unfenced(self, handler: Any, sender: str, message: Any, now: float) -> None:
        term, leader = self.term, self.leader
        self.term, self.leader = message.term, sender
        try:
            handler(self, sender, message, now)
        finally:
            self.term, self.leader = term, leader


class ShardLayer:
    """The shards of one node: their replicas, and the assignment loop while the node leads the cluster."""

    def __init__(self, node: Node, recovered: Recovered, now: float, wall: float) -> None:
        config = node.config
        self.node = node
        self.count = config.shards
        replica_config = dataclasses.replace(config, shards=1, leader_quorum_timeout=0)
        self.replicas: list[ShardReplica] = []
        for index in range(self.count):
            records = recovered.groups.get(group_name(index), ())
            self.replicas.append(ShardReplica(replica_config, recover(records), now, wall,
                                              random.Random(node.rng.getrandbits(64)), index))
        self.due: list[float | None] = [None] * self.count
        # The groups `_shard_index` accepts, with their index: exactly "shard-<i>" for i < count.
        self.indices: dict[str, int] = {group_name(index): index for index in range(self.count)}
        self.master_all = config.assignment == "leader-is-master-all"
        self.bug_lease_reuse = config.has_bug("primary-lsn-reuse")
        # The leader's state, for the cluster term it leads (`led_term`).
        self.led_term: int | None = None
        self.led_since = 0.0
        self.table: list[tuple[str, int, float]] = [("", 0, 0.0)] * self.count  # primary, lease, when
        self.reports: dict[str, tuple[float, list[int]]] = {}
        self.table_at = 0.0

    # -- what the node calls ----------------------------------------------------------------------------

    @staticmethod
    def owns(message: dict) -> bool:
        """Whether a peer message is the shard layer's: a replica's (`group`) or a table or report."""
        return "group" in message or message.get("type") in SHARD_MESSAGES

    def start(self, now: float, wall: float) -> None:
        for replica in self.replicas:
            self._merge(replica, replica.start(now, wall))

    def tick(self, now: float, wall: float) -> None:
        for replica in self.replicas:
            due = self.due[replica.index]
            if due is not None and now >= due:
                self._merge(replica, replica.tick(now, wall))
        node = self.node
        if node.role != LEADER:
            self.led_term = None
            return
        if self.led_term != node.term:
            self.led_term = node.term
            self.led_since = node.leader_since
            self.table = [("", 0, 0.0)] * self.count
            self.reports = {}
            self.table_at = now
        if now >= self.table_at:
            self._decide(now, wall)
            self.table_at = now + node.config.heartbeat_interval
            wire = {"type": SHARD_ASSIGNMENT, "term": node.term, "primaries": [p for p, _, _ in self.table],
                    "leases": [lease for _, lease, _ in self.table]}
            messages = node._ready.messages
            for peer in node.config.peers:
                messages.append((peer, wire))

    def next_deadline(self) -> float | None:
        found = None
        for due in self.due:
            if due is not None and (found is None or due < found):
                found = due
        node = self.node
        if node.role == LEADER:
            due = (self.table_at if self.led_term == node.term
                   else node.leader_since + node.config.heartbeat_interval)
            if found is None or due < found:
                found = due
        return found

    def receive(self, sender: str, message: dict, now: float, wall: float) -> None:
        kind = message.get("type")
        if kind == SHARD_ASSIGNMENT:
            self._on_assignment(sender, message, now, wall)
        elif kind == SHARD_REPORT:
            self._on_report(sender, message, now)
        else:
            group = message.get("group")
            index = self.indices.get(group) if type(group) is str else None  # _shard_index, precomputed
            if index is None:
                self.node.rejected_messages += 1
                return
            replica = self.replicas[index]
            self._merge(replica, replica.receive(sender, message, now, wall))

    def request(self, client: Hashable, request: dict, now: float, wall: float) -> None:
        """A client request for a key: its shard's replica on this node answers (module docstring)."""
        replica = self.replicas[shard_of(request["key"], self.count)]
        self._merge(replica, replica.request(client, request, now, wall))

    def groups(self) -> list[dict[str, Any]]:
        """`status`'s `groups` (CONTRACTS): this node's view of each shard."""
        return [{"group": r.group, "role": r.role, "term": r.term, "leader": r.leader,
                 "commit_lsn": r.log.lsn_at(r.commit_index), "last_lsn": r.log.last_lsn} for r in self.replicas]

    # -- plumbing ---------------------------------------------------------------------------------------

    def _merge(self, replica: ShardReplica, ready: Ready) -> None:
        """A replica's Ready into the node's: records, journal events, messages and replies tagged with the
        shard's group (the replica's `start` event left out); its next tick remembered."""
        out = self.node._ready
        group = replica.group
        if ready.persist:
            out.persist.extend({**record, "group": group} for record in ready.persist)
        for event in ready.journal:
            if event.get("event") != "start":
                out.journal.append({**event, "group": group})
        last: tuple[dict, dict] | None = None
        for peer, wire in ready.messages:
            # A message broadcast to every peer is one dict: so is its tagged copy (the core never changes a
            # message it sent or received, and an unsharded node's broadcast is one dict too).
            if last is None or last[0] is not wire:
                last = (wire, {**wire, "group": group})
            out.messages.append((peer, last[1]))
        for ref, reply in ready.replies:
            out.replies.append((ref, {**reply, "group": group}))
        self.due[replica.index] = ready.next_tick

    # -- every node: the leader's table -------------------------------------------------------------------

    def _on_assignment(self, sender: str, message: dict, now: float, wall: float) -> None:
        node = self.node
        term, primaries, leases = message.get("term"), message.get("primaries"), message.get("leases")
        if (type(term) is not int or type(primaries) is not list or type(leases) is not list
                or len(primaries) != self.count or len(leases) != self.count
                or not all(type(p) is str for p in primaries) or not all(type(x) is int for x in leases)):
            node.rejected_messages += 1
            return
        if term < node.term:
            return  # a deposed leader's table
        for index in range(self.count):
            self._adopt(index, primaries[index], leases[index], now, wall)
        node._ready.messages.append((sender, {"type": SHARD_REPORT, "term": node.term, "leading": self._leading()}))

    def _leading(self) -> list[int]:
        return [r.term if r.role == LEADER else 0 for r in self.replicas]

    def _adopt(self, index: int, primary: str, lease: int, now: float, wall: float) -> None:
        replica = self.replicas[index]
        if not primary or lease <= 0 or lease < replica.term:
            return
        if lease == replica.term:
            if primary == replica.leader and (primary != replica.id or replica.role == LEADER):
                return  # already so
            if primary == replica.id and (replica.role == LEADER or not self.bug_lease_reuse):
                return  # a lease is led once: after a restart this node waits to be given a new one
        if primary not in replica.config.members:
            return
        self._merge(replica, replica.assign(primary, lease, now, wall))

    # -- the leader: assigning primaries -------------------------------------------------------------------

    def _on_report(self, sender: str, message: dict, now: float) -> None:
        leading = message.get("leading")
        if type(leading) is not list or len(leading) != self.count or not all(type(x) is int for x in leading):
            self.node.rejected_messages += 1
            return
        if self.node.role == LEADER:
            self.reports[sender] = (now, leading)

    def _alive(self, member: str, now: float) -> bool:
        if member == self.node.id:
            return True
        report = self.reports.get(member)
        return report is not None and now - report[0] <= 2 * self.node.config.election_timeout

    def _serving(self, index: int, primary: str, lease: int, since: float) -> bool:
        """Whether `primary` leads shard `index` under `lease`, as far as the leader knows: its own replica,
        or the primary's reports; a report from before half the grace period says nothing yet."""
        if primary == self.node.id:
            replica = self.replicas[index]
            return replica.role == LEADER and replica.term == lease
        report = self.reports.get(primary)
        if report is None or report[0] < since + self.node.config.election_timeout:
            return True
        return report[1][index] == lease

    def _decide(self, now: float, wall: float) -> None:
        config = self.node.config
        grace = 2 * config.election_timeout
        for index in range(self.count):
            primary, lease, since = self.table[index]
            if not primary:
                if self.master_all or now - self.led_since >= 2 * config.heartbeat_interval:
                    self._assign(index, "", now, wall)
            elif now - since >= grace and (not self._alive(primary, now)
                                           or not self._serving(index, primary, lease, since)):
                self._assign(index, primary, now, wall)

    def _choose(self, index: int, avoid: str, now: float) -> str:
        node = self.node
        if self.master_all:
            return node.id
        members = node.config.members
        candidates = [m for m in members if m != avoid and self._alive(m, now)] or [node.id]
        load = {m: 0 for m in members}
        for other, (primary, _, _) in enumerate(self.table):
            if other != index and primary:
                load[primary] += 1
        return min(candidates, key=lambda m: (load[m], members.index(m)))

    def _assign(self, index: int, previous: str, now: float, wall: float) -> None:
        node = self.node
        known = max(self.table[index][1], self.replicas[index].term)
        if self.bug_lease_reuse and known > 0:
            lease = known  # the bug: the new primary gets its predecessor's lease id
        else:
            base = node.term * LEASE_STRIDE
            lease = max(known, base) + 1
            if lease >= base + LEASE_STRIDE:
                return  # this leader's lease ids for the shard are used up: a later leader's go on
        primary = self._choose(index, previous, now)
        self.table[index] = (primary, lease, now)
        node.journal({"event": "assign", "group": group_name(index), "primary": primary, "lease": lease})
        self._adopt(index, primary, lease, now, wall)


class ShardedNode(Node):
    """A node with storage shards: the node (its election, its own log of leader no-ops, status) and the
    `ShardLayer` beside it, whose replicas' output joins the node's Ready (module docstring)."""

    def __init__(self, config: NodeConfig, recovered: Recovered, now: float, wall: float,
                 rng: random.Random) -> None:
        super().__init__(config, recovered, now, wall, rng)
        self.shards = ShardLayer(self, recovered, now, wall)

    def start(self, now: float, wall: float) -> Ready:
        self._ready = super().start(now, wall)  # the node's own start, then the replicas' in the same Ready
        self.shards.start(now, wall)
        return self._finish()

    def tick(self, now: float, wall: float) -> Ready:
        self._ready = super().tick(now, wall)
        self.shards.tick(now, wall)
        return self._finish()

    def receive(self, sender: str, message: Any, now: float, wall: float) -> Ready:
        if type(message) is not dict or not self.shards.owns(message):
            return super().receive(sender, message, now, wall)
        self._begin(now, wall)
        if sender in self._peer_set:
            self.shards.receive(sender, message, now, wall)
        else:
            self.rejected_messages += 1
        return self._finish()

    def request(self, client: Hashable, request: Any, now: float, wall: float) -> Ready:
        try:
            op = _validate_request(request)
        except RequestError:
            op = None
        if op is None or op == "status":
            return super().request(client, request, now, wall)  # a bad request's reply; the node's status
        self._begin(now, wall)
        self.shards.request(client, request, now, wall)  # the key's shard answers
        return self._finish()

    def status(self) -> dict[str, Any]:
        status = super().status()
        status["groups"] = self.shards.groups()
        return status

    def _finish(self) -> Ready:
        ready = super()._finish()
        due = self.shards.next_deadline()
        if due is not None:
            ready.next_tick = due if ready.next_tick is None else min(ready.next_tick, due)
        return ready
