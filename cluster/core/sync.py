"""Leader synchronisation for modes where any node may win the election (blazingmq).

Seed 000 ("Differences from Raft"): "Any node in the cluster can become a leader, irrespective of its
position in the log. This adds additional complexity in that a new leader needs to synchronize its state
with the followers and that a follower node may need to send messages to the new leader if the latter is
not up to date." Before it serves, a new leader of term T therefore:

1. **learns its followers' last LSNs** (FollowerLSNRequest) until it holds reports from a majority,
   itself included;
2. **adopts the most up-to-date log among them**, ordered by (last entry's term, last index) as seed 003's
   isUptoDate orders logs: if that log is another node's, it fetches it with LeaderSyncDataQuery from its
   own commit index + 1 (everything up to its commit index is committed and so identical everywhere),
   replacing its own uncommitted suffix;
3. appends its term's first entry (a no-op at LSN (T, 1)) and only then accepts writes; replication then
   **brings followers up to date**, truncating their divergent uncommitted suffixes.

Why no committed entry is lost (Raft's leader-completeness argument, with the vote restriction moved
after the election): an entry committed in term U < T was stored by a majority; the majority that
reports to T shares a node with it, and that node stored the entry before it reported (once it has
term T it refuses term U's appends). Let Z be the last term of the most up-to-date reported log. If Z
equals that node's last term, both logs are prefixes of term Z's leader's log and the adopted one is
the longer; if Z is higher, the adopted log ends with an entry of term Z, so it holds term Z's leader's
log up to there, which (by induction over terms) held every entry committed before Z. Either way the
adopted log holds the committed entry. Entries of older terms that were never committed end the same
way on every node: either they are in the adopted log, and the no-op of term T commits them, or they are
not, and followers truncate them when the leader's entries conflict. A leader only counts replicas for
entries of its own term (Raft's commit rule), so old entries commit only through the no-op.

A peer that stops answering does not stall the sync: queries are retried every `retry_interval`, and
after three unanswered tries the sync starts over, with whichever majority answers next.

Bug `skip-leader-sync`: the new leader skips steps 1 and 2.
"""

from __future__ import annotations

from typing import Protocol

from cluster.core.config import NodeConfig
from cluster.core.log import Entry, Log
from cluster.core.messages import (
    FollowerLSNRequest,
    FollowerLSNResponse,
    LeaderSyncDataQuery,
    LeaderSyncDataResponse,
    Message,
)


class SyncingNode(Protocol):
    """What a leader sync reads and calls on its node (`cluster.core.member.Node` is one): the sync sits below
    the node in the core's layering, so it names only this much of it."""

    config: NodeConfig
    log: Log
    term: int
    commit_index: int

    def send(self, peer: str, message: Message) -> None: ...

    def adopt_entries(self, first: int, entries: list[Entry], replace: bool) -> None: ...

    def complete_leadership(self, now: float) -> None: ...

    def restart_sync(self, now: float) -> None: ...

MAX_TRIES = 3


class LeaderSync:
    """One synchronisation attempt of a new leader (a fresh `sync_id` for each attempt)."""

    def __init__(self, node: SyncingNode, sync_id: int, now: float) -> None:
        self.node = node
        self.sync_id = sync_id
        self.phase = "lsn"
        log = node.log
        self.reports: dict[str, tuple[int, list[int]]] = {node.config.node_id: (log.last_index, log.last_lsn)}
        self.source: str | None = None
        self.source_last = 0
        self.next_from = 0
        self.first_chunk = True
        self.tries = 0
        self.deadline = now

    def begin(self, now: float) -> None:
        if len(self.reports) >= self.node.config.majority:
            self._choose(now)
        else:
            self._ask_lsns(now)

    def _ask_lsns(self, now: float) -> None:
        node = self.node
        request = FollowerLSNRequest(term=node.term, sync_id=self.sync_id)
        for peer in node.config.peers:
            if peer not in self.reports:
                node.send(peer, request)
        self.deadline = now + node.config.effective_retry

    def on_lsn_response(self, sender: str, message: FollowerLSNResponse, now: float) -> None:
        if self.phase != "lsn" or message.sync_id != self.sync_id:
            return
        self.reports[sender] = (message.last_index, message.last_lsn)
        if len(self.reports) >= self.node.config.majority:
            self._choose(now)

    def _choose(self, now: float) -> None:
        node = self.node
        best = node.config.node_id
        best_index, best_lsn = self.reports[best]
        best_key = (best_lsn[0], best_index)
        for peer in node.config.peers:  # config order: deterministic; ties keep the leader's own log
            if peer in self.reports:
                index, lsn = self.reports[peer]
                if (lsn[0], index) > best_key:
                    best, best_key, best_index = peer, (lsn[0], index), index
        if best == node.config.node_id:
            node.complete_leadership(now)
            return
        self.phase = "data"
        self.source = best
        self.source_last = best_index
        self.next_from = node.commit_index + 1
        self.first_chunk = True
        self.tries = 0
        self._query(now)

    def _query(self, now: float) -> None:
        node = self.node
        node.send(self.source, LeaderSyncDataQuery(term=node.term, sync_id=self.sync_id,
                                                   from_index=self.next_from,
                                                   max_entries=node.config.max_batch_entries))
        self.deadline = now + node.config.effective_retry

    def on_data_response(self, sender: str, message: LeaderSyncDataResponse, now: float) -> None:
        node = self.node
        if (self.phase != "data" or sender != self.source or message.sync_id != self.sync_id
                or message.from_index != self.next_from):
            return
        self.tries = 0
        if not node.log.matches(self.next_from - 1, message.prev_lsn):
            # Our committed prefix differs from the source's: impossible without bugs. Copy it all.
            self.next_from = 1
            self.first_chunk = True
            self._query(now)
            return
        entries = message.entries
        if self.first_chunk:
            node.adopt_entries(self.next_from, entries, replace=True)
            self.first_chunk = False
        elif entries:
            node.adopt_entries(self.next_from, entries, replace=False)
        self.next_from += len(entries)
        if not entries or self.next_from > message.last_index:
            node.complete_leadership(now)
        else:
            self._query(now)

    def on_tick(self, now: float) -> None:
        if now < self.deadline:
            return
        self.tries += 1
        if self.tries >= MAX_TRIES:
            self.node.restart_sync(now)
        elif self.phase == "lsn":
            self._ask_lsns(now)
        else:
            self._query(now)
