"""`Node`, the sans-IO state machine of one cluster member, and `Ready`, what its driver must do next.

A driver (the asyncio runtime, the simulator, a test network) feeds the node ticks, peer messages and
client requests with the current time, and carries out each returned `Ready` in order: persist, journal,
send, reply (docs/node-core.md). The node never reads a clock, draws randomness except from the `rng` it
was given, touches a socket or a file, or iterates over an unordered collection in a way that changes its
output: the same inputs give the same outputs, byte for byte.

What the node does for every election mode:

* **Terms** (seed 000 "Introducing Election Term"): a message with a higher term is honoured, the node
  becoming a follower of that term (the leader's messages also name the leader); a stale leader learns
  the newer term from InvalidHeartbeat or from the response to its AppendEntries.
* **Replication with LSNs** (seed 000 "Leader Sequence Numbers"): the leader labels each entry
  (term, seq), seq restarting at 1 in each term, its first entry of a term being a no-op. It replicates
  batches by index with a consistency check (prev_index, prev_lsn), keeps up to `max_inflight_appends`
  batches in flight per follower, and commits an entry of its own term once a majority (itself
  included) stores it, which commits everything before it. Every node applies committed entries in log
  order and journals each `apply`.
* **Leader sync**, where the mode says any node may win (`cluster.core.sync`).
* **Reads** are linearizable by read index: a read waits until the leader has committed an entry of its
  term, records the commit index, and is answered once a majority has acknowledged a heartbeat round sent
  after the read arrived and the state machine has applied up to that index. A read's `lsn` is the LSN of
  the entry that wrote the value it returns (null when the key was never written). A *local* read
  (`"local": true`) at a non-leader gets its read index from the leader (ReadIndexRequest) and is answered
  from this node's own state once applied up to it, or with the definite `no-read-index`.
* **Writes** are answered when their entry is applied on the leader, with its LSN. A write the leader
  appended but loses before commit gets `leadership-lost` (indefinite); a request a non-leader refuses
  gets `not-leader` with the leader it knows (definite).
* **Liveness of a leader**: heartbeats every `heartbeat_interval`; a leader that has not heard from a
  majority for `leader_quorum_timeout` steps down, so clients stop waiting on a leader that cannot commit.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from cluster.core.config import NodeConfig
from cluster.core.election import election_class
from cluster.core.election.base import (
    FOLLOWER,
    KEEP,
    LEADER,
    ROLE_TRANSITIONS,
    _Keep,
)
from cluster.core.errors import error_reply
from cluster.core.log import Entry, Log
from cluster.core.messages import (
    AppendEntries,
    AppendEntriesResponse,
    FollowerLSNRequest,
    FollowerLSNResponse,
    InvalidHeartbeat,
    LeaderHeartbeat,
    LeaderHeartbeatResponse,
    LeaderSyncDataQuery,
    LeaderSyncDataResponse,
    Message,
    MessageError,
    ReadIndexRequest,
    ReadIndexResponse,
    parse_message,
)
from cluster.core.statemachine import READ_OPS, WRITE_OPS, LogQuery, Outcome, StateMachine, read_query
from cluster.core.storage import Recovered, applied_record, entries_record, leader_record, term_record
from cluster.core.sync import LeaderSync
from cluster.core.uncommitted import COMMITTED, READ_CONSISTENCY, UNCOMMITTED, uncommitted_read

CLIENT_OPS = (*READ_OPS, "status", *WRITE_OPS)


@dataclass
class Ready:
    """What the driver must do after one call, in this order: persist, journal, send, reply."""

    persist: list[dict] = field(default_factory=list)
    journal: list[dict] = field(default_factory=list)
    messages: list[tuple[str, dict]] = field(default_factory=list)
    replies: list[tuple[Hashable, dict]] = field(default_factory=list)
    next_tick: float | None = None
    #: the first `early` messages do not depend on this Ready's records being durable: a driver may send
    #: them before it persists (the leader's AppendEntries of new entries, Raft thesis 10.2.1), provided
    #: the records are durable before it feeds the core any input that arrived after sending them. A
    #: driver that ignores this field is still correct.
    early: int = 0
    #: lease mode: client requests to members of the external store, `(member, request)`; the driver sends
    #: them (after persisting) and feeds each reply back through `Node.store_reply`.
    requests: list[tuple[str, dict]] = field(default_factory=list)


class PeerProgress:
    """The leader's view of one follower's log (Raft's nextIndex/matchIndex) and of its liveness."""

    __slots__ = ("next_index", "match_index", "inflight", "sent_at", "acked_round", "heard_at", "resumed_at")

    def __init__(self, next_index: int, now: float) -> None:
        self.next_index = next_index
        self.match_index = 0
        self.inflight = 0
        self.resumed_at = 0  # the index the last refusal made us resend from
        self.sent_at = now
        self.acked_round = 0
        self.heard_at = now


class PendingRead:
    """A read the leader answers once its heartbeat round `round` is confirmed: a client's (answered from
    the leader's state) or, with `peer` set, a follower's ReadIndexRequest (`request_id` is its read_id)."""

    __slots__ = ("client", "request_id", "key", "round", "read_index", "peer")

    def __init__(self, client: Hashable, request_id: Any, key: str | None, round_: int, read_index: int | None,
                 peer: str | None = None) -> None:
        self.client = client
        self.request_id = request_id
        self.key = key
        self.round = round_
        self.read_index = read_index
        self.peer = peer


class FollowerRead:
    """A local read at a non-leader, waiting for the leader's read index (`read_index` None), then for this
    node to apply up to it; answered `no-read-index` at `deadline`."""

    __slots__ = ("client", "request_id", "key", "deadline", "asked", "asked_at", "read_index")

    def __init__(self, client: Hashable, request_id: Any, key: str, deadline: float) -> None:
        self.client = client
        self.request_id = request_id
        self.key = key
        self.deadline = deadline
        self.asked: str | None = None
        self.asked_at = 0.0
        self.read_index: int | None = None


class RequestError(ValueError):
    """A client request is malformed; the message says what is wrong."""


class Node:
    """One cluster member's protocol state. See the module docstring and docs/node-core.md."""

    def __init__(self, config: NodeConfig, recovered: Recovered, now: float, wall: float,
                 rng: random.Random) -> None:
        self.config = config
        self.id = config.node_id
        self.rng = rng
        self.bug_ack_before_commit = config.has_bug("ack-before-commit")
        self.bug_skip_leader_sync = config.has_bug("skip-leader-sync")
        self.bug_stale_read = config.has_bug("stale-read")
        self.bug_lease_read = config.has_bug("lease-read-wallclock")
        self.bug_no_fencing = config.has_bug("no-fencing-token")
        self.bug_read_beyond_hw = config.has_bug("read-beyond-hw")
        self._handlers = {
            LeaderHeartbeat: self._on_heartbeat,
            LeaderHeartbeatResponse: self._on_heartbeat_response,
            InvalidHeartbeat: self._on_invalid_heartbeat,
            AppendEntries: self._on_append,
            AppendEntriesResponse: self._on_append_response,
            FollowerLSNRequest: self._on_lsn_request,
            FollowerLSNResponse: self._on_lsn_response,
            LeaderSyncDataQuery: self._on_sync_query,
            LeaderSyncDataResponse: self._on_sync_response,
            ReadIndexRequest: self._on_read_index_request,
            ReadIndexResponse: self._on_read_index_response,
        }
        self._peer_set = frozenset(config.peers)

        # Durable state (storage records).
        self.term = recovered.term
        self.voted_for = recovered.vote
        self.log = Log(recovered.entries)
        # Volatile state. Entries up to the persisted `applied` mark were applied and journalled before
        # the restart: apply them again silently, so each LSN appears once in this node's journal.
        self.state_machine = StateMachine(config.dedup_window, config.dedup_window_unit,
                                          dedup=not config.has_bug("no-dedup"),
                                          visibility_timeout=config.visibility_timeout,
                                          redelivery=not config.has_bug("no-redelivery"))
        for index in range(1, recovered.applied_index + 1):
            self.state_machine.apply(self.log.entry(index))
        self.applied_index = recovered.applied_index
        self.commit_index = recovered.applied_index
        self.role = FOLLOWER
        self.leader: str | None = None
        self.election = election_class(config.mode)(self)
        self._peer_set = self._peer_set | frozenset(self.election.external_senders)

        # Leader state.
        self.progress: dict[str, PeerProgress] = {}
        self.accepting = False
        self.term_start_index = 0
        self.next_seq = 1
        self.sync: LeaderSync | None = None
        self._sync_ids = 0
        self.held: list[tuple[Hashable, dict]] = []
        self.pending_writes: dict[int, tuple[Hashable, Any, list[int]]] = {}
        self.pending_reads: deque[PendingRead] = deque()
        # Local reads at a non-leader, by read id. Ids continue from a random base drawn at the first one,
        # so a late ReadIndexResponse meant for a previous incarnation cannot match a new read.
        self.follower_reads: dict[int, FollowerRead] = {}
        self._next_read_id: int | None = None
        self.round = 0
        self.confirmed_round = 0
        self.read_round_wanted = False
        self.round_wall: dict[int, float] = {}
        self.lease_until = float("-inf")
        self.heartbeat_at = now
        self.leader_since = now
        self._time_base = 0.0
        self._time_anchor = now

        self.rejected_messages = 0
        self._wall = wall
        self._ready = Ready()
        self._journaled: tuple[str, int, str | None] | None = None
        # `lsn-reuse`: the "fast restart" path that resumes a persisted leadership of the current term.
        self.resumable_term = (recovered.leader_term if config.has_bug("lsn-reuse")
                               and recovered.leader_term == recovered.term and recovered.term > 0 else None)
        if config.shards > 1 and type(self) is Node:
            raise ValueError("a node with storage shards is a cluster.core.shards.ShardedNode (node_class)")

    # ------------------------------------------------------------------ driver API

    def start(self, now: float, wall: float) -> Ready:
        """First call after construction: journals `start` and the initial role, arms the first timers."""
        self._begin(now, wall)
        self.journal({"event": "start", "mode": self.config.mode, "term": self.term,
                      "last_lsn": self.log.last_lsn, "commit_lsn": self.log.lsn_at(self.commit_index),
                      "bugs": sorted(self.config.bugs)})
        self._journal_role()
        self.election.on_start(now)
        if self.resumable_term is not None and self.election.resumes_at_start:
            self.resume_leadership(now)
        return self._finish()

    def tick(self, now: float, wall: float) -> Ready:
        """Fire due timers: heartbeats, retransmissions, election timeouts."""
        self._begin(now, wall)
        self.election.on_tick(now)
        if self.role == LEADER:
            self._leader_tick(now)
        if self.follower_reads:
            self._follower_reads_tick(now)
        return self._finish()

    def receive(self, sender: str, message: Any, now: float, wall: float) -> Ready:
        """A peer message (its JSON object) from `sender`. Malformed ones are counted and dropped."""
        self._begin(now, wall)
        if sender in self._peer_set:
            try:
                parsed = parse_message(message)
            except MessageError:
                self.rejected_messages += 1
            else:
                handler = self._handlers.get(type(parsed))
                if handler is not None:
                    handler(sender, parsed, now)
                elif type(parsed) in self.election.messages:
                    self.election.on_message(sender, parsed, now)
                else:
                    self.rejected_messages += 1  # another mode's message: a misconfigured peer
        else:
            self.rejected_messages += 1
        return self._finish()

    def request(self, client: Hashable, request: Any, now: float, wall: float) -> Ready:
        """A client request; its reply (now or in a later Ready) is addressed to `client`."""
        self._begin(now, wall)
        request_id = request.get("id") if isinstance(request, dict) else None
        try:
            op = _validate_request(request)
        except RequestError as exc:
            self._reply(client, error_reply(request_id, "bad-request", str(exc)))
            return self._finish()
        if op == "status":
            self._reply(client, {"id": request_id, "ok": True, "value": self.status()})
        elif op in READ_OPS:  # a poll carries a LogQuery where a read carries its key
            self._handle_read(client, {**request, "key": read_query(request)}, now, wall)
        else:
            self._handle_write(client, request, now)
            if self.role == LEADER and self.accepting:
                # Only AppendEntries so far: the leader counts its own copy of the new entry toward a
                # majority only when a follower's answer arrives, by which time it is durable.
                self._ready.early = len(self._ready.messages)
        return self._finish()

    def store_reply(self, member: str, reply: Any, now: float, wall: float) -> Ready:
        """Lease mode: the external store member `member` answered a request of `Ready.requests`."""
        self._begin(now, wall)
        self.election.on_store_reply(member, reply, now)
        return self._finish()

    def status(self) -> dict[str, Any]:
        return {"node": self.id, "role": self.role, "term": self.term, "leader": self.leader,
                "commit_lsn": self.log.lsn_at(self.commit_index), "last_lsn": self.log.last_lsn,
                "mode": self.config.mode, "commit_index": self.commit_index,
                "last_index": self.log.last_index, "applied_index": self.applied_index}

    # ------------------------------------------------------------------ ElectionHost

    def transition(self, now: float, role: str, leader: str | None | _Keep = KEEP, term: int | None = None,
                   vote: str | None | _Keep = KEEP) -> None:
        if role != self.role and (self.role, role) not in ROLE_TRANSITIONS:
            raise ValueError(f"role change {self.role} -> {role} is not allowed")
        new_term = self.term if term is None else term
        new_vote = self.voted_for if vote is KEEP else vote
        if new_term != self.term or new_vote != self.voted_for:
            self.term, self.voted_for = new_term, new_vote
            self._ready.persist.append(term_record(new_term, new_vote))
        was_leader = self.role == LEADER
        new_leader = self.leader if leader is KEEP else leader
        if was_leader and role != LEADER:
            self._end_leadership(new_leader)
        self.role = role
        self.leader = new_leader
        self._journal_role()
        if role == LEADER and not was_leader:
            self._begin_leadership(now)

    def send(self, peer: str, message: Message) -> None:
        self._ready.messages.append((peer, message.to_wire()))

    def broadcast(self, message: Message) -> None:
        wire = message.to_wire()
        messages = self._ready.messages
        for peer in self.config.peers:
            messages.append((peer, wire))

    def journal(self, event: dict) -> None:
        self._ready.journal.append(event)

    @property
    def wall(self) -> float:
        return self._wall

    def store_request(self, member: str, request: dict) -> None:
        self._ready.requests.append((member, request))

    def note_supporter(self, peer: str, now: float) -> None:
        progress = self.progress.get(peer)
        if progress is None:
            return
        # It (re)discovered us, perhaps after a restart: what we had in flight to it is likely lost.
        progress.heard_at = now
        progress.inflight = 0
        if progress.next_index > progress.match_index + 1:
            progress.next_index = progress.match_index + 1
        self._send_appends(peer, progress, now)

    def set_follower_position(self, peer: str, position: int, now: float) -> None:
        """The mode tells the leader where `peer`'s copy of this leader's log ends (aeron: the AppendPosition
        of a member joining the live Log; 0 for one gone back into an election): replication to it restarts
        from there, and commits count it up to there only."""
        progress = self.progress.get(peer)
        if progress is None:
            return
        progress.heard_at = now
        progress.match_index = min(position, self.log.last_index)
        progress.next_index = progress.match_index + 1
        progress.inflight = 0
        self._send_appends(peer, progress, now)
        self._advance_commit()

    def advance_commit(self, index: int) -> None:
        """The mode learnt that the leader committed up to `index` and this log holds the leader's entries up
        to there (aeron: CommitPosition over the prefix it verified): commit and apply, never backwards."""
        index = min(index, self.log.last_index)
        if index > self.commit_index:
            self._commit_to(index)

    # ------------------------------------------------------------------ plumbing

    def _begin(self, now: float, wall: float) -> None:
        self._wall = wall
        self._ready = Ready()

    def _finish(self) -> Ready:
        ready = self._ready
        election, leader = self.election.next_deadline(), self._leader_deadline()
        ready.next_tick = election if leader is None else leader if election is None else min(election, leader)
        if self.follower_reads:
            due = self._follower_reads_deadline()
            ready.next_tick = due if ready.next_tick is None else min(ready.next_tick, due)
        return ready

    def _journal_role(self) -> None:
        state = (self.role, self.term, self.leader)
        if state != self._journaled:
            self._journaled = state
            self._ready.journal.append({"event": "role", "role": self.role, "term": self.term,
                                        "leader": self.leader})

    def _reply(self, client: Hashable, reply: dict) -> None:
        self._ready.replies.append((client, reply))

    def log_time(self, now: float) -> float:
        """Leader time for new entries: the previous leader's last entry time plus the time this leader
        has led. Monotonic along the log whatever the hosts' clocks; gaps without a leader are not counted,
        which only lengthens the de-duplication window."""
        return round(self._time_base + (now - self._time_anchor), 6)

    # ------------------------------------------------------------------ terms and leaders

    def _honour_term(self, term: int, leader: str | None, now: float) -> None:
        """A shared message carried a higher term: follow it (seed 000 "always honor ... higher term")."""
        self.transition(now, FOLLOWER, leader=leader, term=term, vote=None)
        if leader is None:
            self.election.on_leader_unknown(now)
        else:
            self.election.on_leader_contact(now, discovered=True)

    def _from_leader(self, sender: str, term: int, now: float) -> bool:
        """Admit a leader-only message of term >= ours; False when it must be ignored."""
        if not self.election.admits_leader(sender, term, now):
            return False
        if term > self.term:
            self._honour_term(term, sender, now)
            return True
        if self.role == LEADER:
            return False  # another leader in our own term: impossible without bugs; ignore it
        discovered = self.leader != sender
        if discovered or self.role != FOLLOWER:
            self.transition(now, FOLLOWER, leader=sender)
        self.election.on_leader_contact(now, discovered)
        return True

    def _from_follower(self, term: int, now: float) -> bool:
        """Admit a response to the leader; False when it is stale or we no longer lead."""
        if term > self.term:
            self._honour_term(term, None, now)
            return False
        return self.role == LEADER and term == self.term

    # ------------------------------------------------------------------ leadership

    def _begin_leadership(self, now: float) -> None:
        self._ready.persist.append(leader_record(self.term))
        last = self.log.last_index
        self.progress = {peer: PeerProgress(last + 1, now) for peer in self.config.peers}
        self.accepting = False
        self.leader_since = now
        self.confirmed_round = self.round
        self.read_round_wanted = False
        self.lease_until = float("-inf")
        self.round_wall = {}
        self._broadcast_heartbeat(now)
        if self.election.leader_sync and not self.bug_skip_leader_sync:
            self._sync_ids += 1
            self.sync = LeaderSync(self, self._sync_ids, now)
            self.sync.begin(now)
        elif not self.election.defers_leadership:
            self.complete_leadership(now)

    def restart_sync(self, now: float) -> None:
        self._sync_ids += 1
        self.sync = LeaderSync(self, self._sync_ids, now)
        self.sync.begin(now)

    def adopt_entries(self, first: int, entries: list[Entry], replace: bool) -> None:
        """Take entries fetched from another member: leader sync (from the most up-to-date follower) and
        aeron's archive replication and catchup (from the leader)."""
        if replace:
            truncated = max(0, self.log.last_index - first + 1)
            self._truncating(first)
            self.log.replace_from(first, entries)
        else:
            truncated = 0
            self.log.entries.extend(entries)
        self._ready.persist.append(entries_record(first, entries))
        self._journal_append(first, entries, truncated)

    def complete_leadership(self, now: float) -> None:
        """Sync done (or not needed): append the term's no-op, then serve (seed 000 LSN (term, 1))."""
        self.sync = None
        last = self.log.last_index
        self._time_base = self.log.entry(last).get("time", 0.0) if last else 0.0
        self._time_anchor = now
        self.next_seq = 1
        for progress in self.progress.values():
            progress.next_index = last + 1
            progress.inflight = 0
        self.term_start_index = self._append_entry({"f": "noop", "key": None}, now)
        self.accepting = True
        held, self.held = self.held, []
        for client, request in held:
            self._handle_write(client, request, now)
        if not held:
            self._replicate(now)

    def resume_leadership(self, now: float) -> None:
        """Bug `lsn-reuse`: after a restart, take up the persisted leadership of the current term at
        once, with the sequence counter reset to 1 instead of continuing after the term's last entry.
        Only while the node is still a follower of that term (the election mode may call it later)."""
        if self.resumable_term != self.term or self.role != FOLLOWER:
            self.resumable_term = None
            return
        self.resumable_term = None
        self.role = LEADER
        self.leader = self.id
        self._journal_role()
        last = self.log.last_index
        self.progress = {peer: PeerProgress(last + 1, now) for peer in self.config.peers}
        self.leader_since = now
        self.confirmed_round = self.round
        start = last + 1
        while start > 1 and self.log.lsn_at(start - 1)[0] == self.term:
            start -= 1
        self.term_start_index = start
        self._time_base = self.log.entry(last).get("time", 0.0) if last else 0.0
        self._time_anchor = now
        self.next_seq = 1
        self.accepting = True
        self.election.on_leadership_resumed(now)
        self._broadcast_heartbeat(now)

    def _end_leadership(self, new_leader: str | None) -> None:
        for index in sorted(self.pending_writes):
            client, request_id, _ = self.pending_writes[index]
            self._reply(client, error_reply(request_id, "leadership-lost",
                                            "leadership was lost before the write committed; it may "
                                            "still commit", leader=new_leader))
        self.pending_writes = {}
        for read in self.pending_reads:
            if read.peer is not None:
                self._refuse_read_index(read.peer, read.request_id)
                continue
            self._reply(read.client, error_reply(read.request_id, "not-leader",
                                                 "leadership was lost before the read was confirmed",
                                                 leader=new_leader))
        self.pending_reads = deque()
        for client, request in self.held:
            self._reply(client, error_reply(request.get("id"), "not-leader",
                                            "leadership was lost while synchronising", leader=new_leader))
        self.held = []
        self.progress = {}
        self.sync = None
        self.accepting = False

    def _leader_deadline(self) -> float | None:
        if self.role != LEADER:
            return None
        deadline = self.heartbeat_at
        retry = self.config.effective_retry
        for progress in self.progress.values():
            if progress.inflight and progress.sent_at + retry < deadline:
                deadline = progress.sent_at + retry
        if self.sync is not None and self.sync.deadline < deadline:
            deadline = self.sync.deadline
        return deadline

    def _leader_tick(self, now: float) -> None:
        config = self.config
        if now >= self.heartbeat_at:
            self._broadcast_heartbeat(now)
        retry = config.effective_retry
        for peer, progress in self.progress.items():
            if progress.inflight and now >= progress.sent_at + retry:
                progress.inflight = 0
                progress.next_index = progress.match_index + 1
                self._send_appends(peer, progress, now)
        if self.sync is not None:
            self.sync.on_tick(now)
        quorum_timeout = config.effective_quorum_timeout
        if quorum_timeout > 0 and now - self.leader_since >= quorum_timeout:
            horizon = now - quorum_timeout
            heard = 1 + sum(1 for p in self.progress.values() if p.heard_at >= horizon)
            if heard < self.election.leader_quorum():
                self.transition(now, FOLLOWER, leader=None)
                self.election.on_leader_unknown(now)

    def _broadcast_heartbeat(self, now: float) -> None:
        self.round += 1
        if self.bug_lease_read:
            self.round_wall[self.round] = self._wall
        self.heartbeat_at = now + self.config.heartbeat_interval
        self.read_round_wanted = False
        if self.config.peers:
            self.broadcast(LeaderHeartbeat(term=self.term, commit_index=self.commit_index,
                                           commit_lsn=self.log.lsn_at(self.commit_index), round=self.round))
        else:
            self._round_confirmed(self.round, now)

    def _round_confirmed(self, acked: int, now: float) -> None:
        if acked <= self.confirmed_round:
            return
        self.confirmed_round = acked
        if self.bug_lease_read:
            sent = self.round_wall.pop(acked, None)
            for old in [r for r in self.round_wall if r < acked]:
                del self.round_wall[old]
            if sent is not None:
                self.lease_until = max(self.lease_until, sent + self.config.effective_lease)
        self._serve_reads()
        if self.read_round_wanted and self.confirmed_round >= self.round:
            self._broadcast_heartbeat(now)

    # ------------------------------------------------------------------ replication (leader side)

    def _append_entry(self, fields: Entry, now: float) -> int:
        entry = {"lsn": [self.term, self.next_seq], **fields, "time": self.log_time(now)}
        self.next_seq += 1
        index = self.log.append(entry)
        self._ready.persist.append(entries_record(index, [entry]))
        self._journal_append(index, [entry], 0)
        return index

    def _replicate(self, now: float) -> None:
        for peer, progress in self.progress.items():
            self._send_appends(peer, progress, now)
        if not self.config.peers:
            self._advance_commit()

    def _send_appends(self, peer: str, progress: PeerProgress, now: float) -> None:
        if not self.accepting or not self.election.streams_to(peer):
            return
        log = self.log
        last = log.last_index
        batch = self.config.max_batch_entries
        window = self.config.max_inflight_appends
        while progress.inflight < window and progress.next_index <= last:
            first = progress.next_index
            entries = log.slice(first, batch)
            self._ready.messages.append((peer, AppendEntries(
                term=self.term, prev_index=first - 1, prev_lsn=log.lsn_at(first - 1), entries=entries,
                commit_index=self.commit_index).to_wire()))
            progress.next_index = first + len(entries)
            progress.inflight += 1
            progress.sent_at = now

    def _advance_commit(self) -> None:
        stored = [self.log.last_index]
        stored.extend(p.match_index for p in self.progress.values())
        stored.sort(reverse=True)
        candidate = self.election.commit_point(stored)
        # Raft's rule: count replicas only for an entry of the leader's own term.
        if candidate > self.commit_index and self.log.lsn_at(candidate)[0] == self.term:
            self._commit_to(candidate)

    def _on_append_response(self, sender: str, message: AppendEntriesResponse, now: float) -> None:
        if not self._from_follower(message.term, now):
            return
        progress = self.progress[sender]
        progress.heard_at = now
        if message.success:
            if message.match_index > progress.match_index:
                progress.match_index = message.match_index
            if progress.next_index <= progress.match_index:
                progress.next_index = progress.match_index + 1
            if progress.inflight:
                progress.inflight -= 1
            self._advance_commit()
        else:
            hint = max(1, min(message.hint_index, self.log.last_index + 1))
            if progress.inflight and hint == progress.resumed_at:
                return  # another refusal of a batch sent before we resent from there: already handled
            progress.resumed_at = hint
            progress.inflight = 0
            progress.next_index = hint
            if progress.match_index >= hint:
                progress.match_index = hint - 1
        self._send_appends(sender, progress, now)

    def _on_heartbeat_response(self, sender: str, message: LeaderHeartbeatResponse, now: float) -> None:
        if not self._from_follower(message.term, now):
            return
        progress = self.progress[sender]
        progress.heard_at = now
        if message.last_index < progress.match_index:
            progress.match_index = message.last_index  # it lost entries (fsync "never"): resend them
        if progress.inflight == 0 and progress.next_index > message.last_index + 1:
            progress.next_index = message.last_index + 1
        if message.round > progress.acked_round:
            progress.acked_round = message.round
            rounds = [self.round]
            rounds.extend(p.acked_round for p in self.progress.values())
            rounds.sort(reverse=True)
            self._round_confirmed(self.election.confirmed_round(rounds), now)
        if progress.inflight == 0:
            self._send_appends(sender, progress, now)

    def _on_invalid_heartbeat(self, sender: str, message: InvalidHeartbeat, now: float) -> None:
        if message.term > self.term:
            self._honour_term(message.term, None, now)

    def _on_lsn_response(self, sender: str, message: FollowerLSNResponse, now: float) -> None:
        if self._from_follower(message.term, now):
            self.progress[sender].heard_at = now
            if self.sync is not None:
                self.sync.on_lsn_response(sender, message, now)

    def _on_sync_response(self, sender: str, message: LeaderSyncDataResponse, now: float) -> None:
        if self._from_follower(message.term, now):
            self.progress[sender].heard_at = now
            if self.sync is not None:
                self.sync.on_data_response(sender, message, now)

    # ------------------------------------------------------------------ replication (follower side)

    def _on_heartbeat(self, sender: str, message: LeaderHeartbeat, now: float) -> None:
        if message.term < self.term:
            self.send(sender, InvalidHeartbeat(term=self.term))
            return
        if not self._from_leader(sender, message.term, now):
            return
        # Same index and LSN means the same prefix (log matching), so the commit point is ours too.
        if message.commit_index > self.commit_index and self.log.matches(message.commit_index,
                                                                          message.commit_lsn):
            self._commit_to(message.commit_index)
        self.send(sender, LeaderHeartbeatResponse(term=self.term, round=message.round,
                                                  last_index=self.log.last_index, last_lsn=self.log.last_lsn))

    def _on_append(self, sender: str, message: AppendEntries, now: float) -> None:
        # The term is the leader's fencing token (lease mode: the store's generation): refuse a lower one.
        if message.term < self.term and not self.bug_no_fencing:
            self.send(sender, AppendEntriesResponse(term=self.term, success=False, match_index=0, hint_index=0))
            return
        if not self._from_leader(sender, message.term, now):
            return
        log = self.log
        prev = message.prev_index
        if prev > log.last_index:
            self._append_failed(sender, log.last_index + 1)
            return
        if not log.matches(prev, message.prev_lsn):
            # Everything we committed is in the leader's log; without bugs the divergence is above it.
            self._append_failed(sender, self.commit_index + 1 if prev > self.commit_index else prev)
            return
        entries = message.entries
        count = len(entries)
        last = log.last_index
        skip = 0
        while skip < count and prev + 1 + skip <= last and log.lsn_at(prev + 1 + skip) == entries[skip]["lsn"]:
            skip += 1
        if skip < count:
            first = prev + 1 + skip
            new = entries[skip:]
            truncated = last - first + 1 if first <= last else 0
            if first <= last:
                self._truncating(first)
                log.replace_from(first, new)
            else:
                log.entries.extend(new)
            self._ready.persist.append(entries_record(first, new))
            self._journal_append(first, new, truncated)
        match = prev + count
        commit = min(message.commit_index, match)
        if commit > self.commit_index:
            self._commit_to(commit)
        self.send(sender, AppendEntriesResponse(term=self.term, success=True, match_index=match,
                                                hint_index=match + 1))

    def _append_failed(self, sender: str, hint: int) -> None:
        self.send(sender, AppendEntriesResponse(term=self.term, success=False, match_index=0,
                                                hint_index=max(1, hint)))

    def _truncating(self, first: int) -> None:
        """A suffix from `first` is about to be replaced. Without bugs it is never committed; a leader
        that skipped its sync can force it, and then the follower drops committed (even applied)
        entries, which is what the checkers must see."""
        if first <= self.commit_index:
            self.commit_index = first - 1
        if first <= self.applied_index:
            self.applied_index = first - 1
            self._ready.persist.append(applied_record(self.applied_index))

    def _on_lsn_request(self, sender: str, message: FollowerLSNRequest, now: float) -> None:
        if message.term >= self.term and self._from_leader(sender, message.term, now):
            self.send(sender, FollowerLSNResponse(term=self.term, sync_id=message.sync_id,
                                                  last_index=self.log.last_index, last_lsn=self.log.last_lsn,
                                                  commit_index=self.commit_index))

    def _on_sync_query(self, sender: str, message: LeaderSyncDataQuery, now: float) -> None:
        if message.term < self.term or not self._from_leader(sender, message.term, now):
            return
        log = self.log
        first = message.from_index
        count = min(message.max_entries, self.config.max_batch_entries)
        entries = log.slice(first, count) if first >= 1 else []
        prev_lsn = log.lsn_at(first - 1) if 1 <= first <= log.last_index + 1 else [0, 0]
        self.send(sender, LeaderSyncDataResponse(term=self.term, sync_id=message.sync_id, from_index=first,
                                                 prev_lsn=prev_lsn, entries=entries,
                                                 last_index=log.last_index))

    # ------------------------------------------------------------------ commit and apply

    def _commit_to(self, index: int) -> None:
        self.commit_index = index
        self.journal({"event": "commit", "index": index, "lsn": self.log.lsn_at(index)})
        self._apply_committed()

    def _apply_committed(self) -> None:
        if self.applied_index >= self.commit_index:
            return
        log = self.log
        journal = self._ready.journal
        pending = self.pending_writes
        while self.applied_index < self.commit_index:
            index = self.applied_index + 1
            entry = log.entry(index)
            outcome, op = self.state_machine.apply(entry)
            journal.append({"event": "apply", "lsn": entry["lsn"], "index": index, "key": entry.get("key"),
                            "op": op})
            self.applied_index = index
            waiting = pending.pop(index, None) if pending else None
            if waiting is not None and waiting[2] == entry["lsn"]:
                self._reply(waiting[0], _outcome_reply(waiting[1], outcome, self.id))
        self._ready.persist.append(applied_record(self.applied_index))
        if self.pending_reads:
            self._serve_reads()
        if self.follower_reads:
            self._serve_follower_reads()

    # ------------------------------------------------------------------ client requests

    def _handle_write(self, client: Hashable, request: dict, now: float) -> None:
        if self.role != LEADER:
            self._reply(client, error_reply(request.get("id"), "not-leader", "this node is not the leader",
                                            leader=self.leader))
            return
        if not self.accepting:
            if len(self.held) >= self.config.max_held_requests:
                self._reply(client, error_reply(request.get("id"), "unavailable",
                                                "the leader is synchronising and holds too many requests",
                                                leader=self.id))
            else:
                self.held.append((client, request))
            return
        op = request["op"]
        entry: Entry = {"f": op, "key": request["key"]}
        if op in ("write", "cas", "put", "append"):
            entry["value"] = request.get("value")
        if op in ("put", "confirm"):
            entry["guid"] = request["guid"]
        index = self._append_entry(entry, now)
        lsn = self.log.lsn_at(index)
        if self.bug_ack_before_commit:
            self._reply(client, {"id": request.get("id"), "ok": True, "value": None, "lsn": lsn})
        else:
            self.pending_writes[index] = (client, request.get("id"), lsn)
        self._replicate(now)

    def _handle_read(self, client: Hashable, request: dict, now: float, wall: float) -> None:
        key = request["key"]
        if self.bug_stale_read:
            self._reply(client, self._read_reply(request.get("id"), key))
            return
        if self.bug_read_beyond_hw and type(key) is LogQuery:  # any node, at once, up to its last entry
            value, lsn = uncommitted_read(self.log, self.applied_index, self.state_machine, key)
            self._reply(client, {"id": request.get("id"), "ok": True, "value": value, "lsn": lsn})
            return
        if self.role != LEADER:
            if request.get("local") is True and request.get("consistency", COMMITTED) == COMMITTED:
                self._begin_follower_read(client, request, now)
                return
            self._reply(client, error_reply(request.get("id"), "not-leader", "this node is not the leader",
                                            leader=self.leader))
            return
        if request.get("consistency") == UNCOMMITTED:
            value, lsn = uncommitted_read(self.log, self.applied_index, self.state_machine, key)
            self._reply(client, {"id": request.get("id"), "ok": True, "value": value, "lsn": lsn})
            return
        own_term_committed = self.accepting and self.commit_index >= self.term_start_index
        if own_term_committed and ((self.bug_lease_read and wall < self.lease_until)
                                   or self.election.lease_read_allowed(now, wall)):
            self._reply(client, self._read_reply(request.get("id"), key))
            return
        self._await_read_round(PendingRead(client, request.get("id"), key, self.round + 1,
                                           self.commit_index if own_term_committed else None), now)

    def _await_read_round(self, read: PendingRead, now: float) -> None:
        """Queue a read behind the next heartbeat round; concurrent reads share rounds."""
        self.pending_reads.append(read)
        if self.confirmed_round >= self.round:
            self._broadcast_heartbeat(now)
        else:
            self.read_round_wanted = True

    def _serve_reads(self) -> None:
        reads = self.pending_reads
        own_term_committed = self.accepting and self.commit_index >= self.term_start_index
        while reads:
            read = reads[0]
            if read.read_index is None:
                if not own_term_committed:
                    return
                read.read_index = self.commit_index
            if read.round > self.confirmed_round or self.applied_index < read.read_index:
                return
            reads.popleft()
            if read.peer is None:
                self._reply(read.client, self._read_reply(read.request_id, read.key))
            else:
                self._grant_read_index(read.peer, read.request_id, read.read_index)

    # ------------------------------------------------------------------ local (follower) reads

    # A local read at a non-leader is linearizable by read index served on a follower (Raft thesis 6.4):
    # the node asks the leader for a read index; the leader records its commit index once its term's first
    # entry is committed and grants it once a majority has acknowledged a heartbeat round sent after the
    # request arrived (so it still led when the read was already in progress); the node answers once it has
    # applied up to that index. Every write acknowledged before the read arrived is committed at or below
    # that index, and committed entries are the same on every node, so the answer is at least as new.

    def _begin_follower_read(self, client: Hashable, request: dict, now: float) -> None:
        if self.leader is None:
            self._reply(client, error_reply(request.get("id"), "no-read-index",
                                            "no leader known to ask for a read index"))
            return
        if self._next_read_id is None:
            self._next_read_id = self.rng.getrandbits(48)
        read_id = self._next_read_id
        self._next_read_id += 1
        read = FollowerRead(client, request.get("id"), request["key"],
                            now + self.config.effective_read_index_timeout)
        self.follower_reads[read_id] = read
        self._ask_read_index(read_id, read, now)

    def _ask_read_index(self, read_id: int, read: FollowerRead, now: float) -> None:
        assert self.leader is not None
        read.asked = self.leader
        read.asked_at = now
        self.send(self.leader, ReadIndexRequest(term=self.term, read_id=read_id))

    def _follower_reads_tick(self, now: float) -> None:
        """Answer what is past its deadline; ask again (a new leader, or a lost message) what has no index."""
        retry = self.config.effective_retry
        for read_id, read in list(self.follower_reads.items()):
            if now >= read.deadline:
                del self.follower_reads[read_id]
                why = ("no read index from the leader in time" if read.read_index is None
                       else f"not applied up to read index {read.read_index} in time")
                self._reply(read.client, error_reply(read.request_id, "no-read-index", why, leader=self.leader))
            elif read.read_index is not None:
                continue
            elif self.role == LEADER:
                del self.follower_reads[read_id]  # this node leads now: its own read index serves it
                self._handle_read(read.client, {"id": read.request_id, "key": read.key}, now, self._wall)
            elif self.leader is not None and (self.leader != read.asked or now >= read.asked_at + retry):
                self._ask_read_index(read_id, read, now)

    def _follower_reads_deadline(self) -> float:
        retry = self.config.effective_retry
        return min(read.deadline if read.read_index is not None else min(read.deadline, read.asked_at + retry)
                   for read in self.follower_reads.values())

    def _serve_follower_reads(self) -> None:
        applied = self.applied_index
        for read_id, read in list(self.follower_reads.items()):
            if read.read_index is not None and applied >= read.read_index:
                del self.follower_reads[read_id]
                self._reply(read.client, self._read_reply(read.request_id, read.key))

    def _on_read_index_request(self, sender: str, message: ReadIndexRequest, now: float) -> None:
        if message.term > self.term:
            self._honour_term(message.term, None, now)
        if self.role != LEADER:
            self._refuse_read_index(sender, message.read_id)
            return
        own_term_committed = self.accepting and self.commit_index >= self.term_start_index
        if own_term_committed and self.election.lease_read_allowed(now, self._wall):
            self._grant_read_index(sender, message.read_id, self.commit_index)
            return
        self._await_read_round(PendingRead(None, message.read_id, None, self.round + 1,
                                           self.commit_index if own_term_committed else None, peer=sender), now)

    def _grant_read_index(self, peer: str, read_id: int, read_index: int) -> None:
        self.send(peer, ReadIndexResponse(term=self.term, read_id=read_id, granted=True, read_index=read_index,
                                          read_lsn=self.log.lsn_at(read_index)))

    def _refuse_read_index(self, peer: str, read_id: int) -> None:
        self.send(peer, ReadIndexResponse(term=self.term, read_id=read_id, granted=False, read_index=0,
                                          read_lsn=[0, 0]))

    def _on_read_index_response(self, sender: str, message: ReadIndexResponse, now: float) -> None:
        if message.term > self.term:
            self._honour_term(message.term, sender if message.granted else None, now)
        read = self.follower_reads.get(message.read_id)
        if read is None or read.read_index is not None:
            return  # answered, timed out, or a duplicate
        if not message.granted:
            if self.leader is not None and self.leader != sender and self.role != LEADER:
                self._ask_read_index(message.read_id, read, now)
            elif self.role != LEADER:
                del self.follower_reads[message.read_id]
                self._reply(read.client, error_reply(read.request_id, "no-read-index",
                                                     f"{sender} does not lead and no other leader is known"))
            return
        read.read_index = message.read_index
        # Same index and LSN means the same prefix (log matching), so the commit point is ours too.
        if message.read_index > self.commit_index and self.log.matches(message.read_index, message.read_lsn):
            self._commit_to(message.read_index)  # applies, and serves the reads waiting for it
        else:
            self._serve_follower_reads()

    def _read_reply(self, request_id: Any, key: str) -> dict:
        value, lsn = self.state_machine.read(key)
        return {"id": request_id, "ok": True, "value": value, "lsn": lsn}

    def _journal_append(self, first: int, entries: list[Entry], truncated: int) -> None:
        event = {"event": "append", "index": first, "count": len(entries)}
        if entries:
            event["first_lsn"] = entries[0]["lsn"]
            event["last_lsn"] = entries[-1]["lsn"]
        if truncated:
            event["truncated"] = truncated
        self._ready.journal.append(event)


def _outcome_reply(request_id: Any, outcome: Outcome, node_id: str) -> dict:
    if outcome.ok:
        reply = {"id": request_id, "ok": True, "value": outcome.value, "lsn": outcome.lsn}
        if outcome.duplicate:
            reply["duplicate"] = True
        return reply
    extra = {} if outcome.value is None else {"value": outcome.value}  # in-flight: what is pending
    return error_reply(request_id, outcome.error, f"committed at {outcome.lsn} without effect",
                       leader=node_id, lsn=outcome.lsn, **extra)


def _validate_request(request: Any) -> str:
    """Check a client request's shape; return its op or raise RequestError with a one-line reason."""
    if not isinstance(request, dict):
        raise RequestError(f"a request must be a JSON object, got {type(request).__name__}")
    op = request.get("op")
    if op not in CLIENT_OPS:
        raise RequestError(f"unknown op {op!r}; valid ops: {', '.join(CLIENT_OPS)}")
    if op == "status":
        return op
    if not isinstance(request.get("key"), str):
        raise RequestError(f"{op} needs a string 'key'")
    if op in READ_OPS and request.get("consistency", COMMITTED) not in READ_CONSISTENCY:
        raise RequestError(f"{op} 'consistency' must be one of {', '.join(READ_CONSISTENCY)}")
    if op in READ_OPS and not isinstance(request.get("local", False), bool):
        raise RequestError(f"{op} 'local' must be true (served by this node) or false")
    if op == "poll" and (type(request.get("from")) is not int or request["from"] < 0):
        raise RequestError("poll needs 'from': the first offset wanted, a non-negative integer")
    if op == "cas":
        value = request.get("value")
        if not isinstance(value, list) or len(value) != 2:
            raise RequestError("cas needs 'value': [expected, new]")
    elif op == "put":
        if not isinstance(request.get("guid"), str) or not request["guid"]:
            raise RequestError("put needs a non-empty string 'guid' (client-generated)")
    elif op == "confirm":
        if not isinstance(request.get("guid"), str):
            raise RequestError("confirm needs 'guid': the GUID of the consumed message")
    return op
