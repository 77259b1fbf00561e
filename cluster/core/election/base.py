"""The election interface: what every election mode provides, and what it may ask of the node.

One core, several election algorithms (ARCHITECTURE.md "Election modes"). A mode owns *who leads*:
timers, its own messages, and the rules for granting support. The node owns *what is replicated*: the log,
LSNs, commit, storage, reads and writes, and the generic "honour a higher term" rule for the shared
replication messages. The two meet through the small `ElectionHost` protocol below, the only way a mode
changes the node's role, term and vote, so that every transition is journalled and persisted in one place.

Roles and their allowed transitions are defined here once (`ROLE_TRANSITIONS`); the node refuses others.
A mode also declares:

* `messages`: the peer message types it handles (the node routes them to `on_message`);
* `leader_sync`: whether any node may win, so a new leader must first synchronise its log with a majority
  before serving (blazingmq, seed 000 "Differences from Raft"), or the vote rule already guarantees the
  winner holds every committed entry (raft, seed 003 isUptoDate);
* `commit_point`: how many replicas commit an entry (a majority unless the mode says otherwise).

Later modes implement the same class, their extra states internal to the mode: aeron (seed 001) as its
own Election state machine (CANVASS, NOMINATE, the ballots, the leader's and the follower's log
replication and catchup) that gates the shared replication until its election closes
(`defers_leadership`, `admits_leader`, `streams_to`); fluvio (seed 002) as a mode that follows a
controller's decisions (its messages), overriding `commit_point` with the Live Replica Set; lease (seed
003) as a mode whose leader is whoever holds the key of an external store.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from cluster.core.config import NodeConfig
    from cluster.core.log import Log
    from cluster.core.messages import Message

FOLLOWER = "follower"
CANDIDATE = "candidate"
LEADER = "leader"
ROLES = (FOLLOWER, CANDIDATE, LEADER)

#: the role changes a node may make. Keeping a role while the term, leader or vote changes is always allowed.
ROLE_TRANSITIONS: frozenset[tuple[str, str]] = frozenset({
    (FOLLOWER, CANDIDATE),
    (CANDIDATE, FOLLOWER),
    (CANDIDATE, LEADER),
    (LEADER, FOLLOWER),
})


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


#: passed to `ElectionHost.transition` for a field that must not change.
KEEP = _Keep()


class ElectionHost(Protocol):
    """What an election mode may read and do on its node."""

    config: NodeConfig
    rng: random.Random
    log: Log
    term: int
    voted_for: str | None
    role: str
    leader: str | None

    def transition(self, now: float, role: str, leader: str | None | _Keep = KEEP, term: int | None = None,
                   vote: str | None | _Keep = KEEP) -> None:
        """Change role (and leader, term, vote): persists term/vote, journals `role`, sets up or tears
        down leadership. Raises ValueError for a transition not in ROLE_TRANSITIONS."""

    def send(self, peer: str, message: Message) -> None: ...

    def broadcast(self, message: Message) -> None: ...

    def journal(self, event: dict) -> None: ...

    def note_supporter(self, peer: str, now: float) -> None:
        """A follower announced (unsolicited) that it follows this leader."""

    @property
    def wall(self) -> float:
        """The node's wall clock at the current input (only the lease mode's `lease-own-clock` bug reads it)."""

    def store_request(self, member: str, request: dict) -> None:
        """Send a client request to a member of the external store (lease mode; `Ready.requests`)."""

    # Used by a mode that moves log entries itself before its election closes (aeron).
    commit_index: int
    term_start_index: int  # the index of the leader's first entry of its term

    def complete_leadership(self, now: float) -> None:
        """Append the leader's first entry of its term (the no-op) and start serving (`defers_leadership`)."""

    def adopt_entries(self, first: int, entries: list[dict], replace: bool) -> None:
        """Put `entries` into the log at index `first`, replacing everything from there if `replace`."""

    def advance_commit(self, index: int) -> None:
        """Commit (and apply) up to `index`, which the mode knows the leader committed and this log holds."""

    def set_follower_position(self, peer: str, position: int, now: float) -> None:
        """On the leader: `peer`'s copy of this leader's log ends at `position`; replicate to it from there."""

    # Bug `lsn-reuse` only: the leadership of the current term this node persisted before its restart
    # (None without the bug, or once taken up or given up), and the "fast restart" that takes it up.
    resumable_term: int | None

    def resume_leadership(self, now: float) -> None:
        """Bug `lsn-reuse`: lead `resumable_term` again at once, the sequence counter back at 1."""


class Election(ABC):
    """Base of election modes. The node calls these hooks; the mode calls back through `host`."""

    mode: ClassVar[str]
    messages: ClassVar[tuple[type[Message], ...]]
    leader_sync: ClassVar[bool]
    #: ids that are not peers but may send this mode's messages (fluvio: the controller)
    external_senders: ClassVar[tuple[str, ...]] = ()
    #: the mode calls `host.complete_leadership` itself once its leader states are done (aeron: CLOSED),
    #: instead of the node doing it on winning (or after leader sync)
    defers_leadership: ClassVar[bool] = False
    #: bug `lsn-reuse`: the node resumes a persisted leadership as it starts; False for a mode that first
    #: asks who leads (lease: the store) and calls `host.resume_leadership` itself
    resumes_at_start: ClassVar[bool] = True

    def __init__(self, host: ElectionHost) -> None:
        self.host = host

    @abstractmethod
    def on_start(self, now: float) -> None:
        """The node starts as a follower knowing no leader (seed 000 "Node Startup Scenario")."""

    @abstractmethod
    def on_tick(self, now: float) -> None:
        """Fire whatever timers are due."""

    @abstractmethod
    def on_message(self, sender: str, message: Message, now: float) -> None:
        """One of `messages` arrived."""

    @abstractmethod
    def on_leader_contact(self, now: float, discovered: bool) -> None:
        """A heartbeat or replication message arrived from the leader of the node's current term;
        `discovered` when the node did not know that leader before."""

    @abstractmethod
    def on_leader_unknown(self, now: float) -> None:
        """The node became a follower without a known leader for a reason outside the mode (it honoured a
        higher term from a response, or stepped down as leader)."""

    @abstractmethod
    def next_deadline(self) -> float | None:
        """The earliest time `on_tick` has something to do."""

    def commit_point(self, stored: list[int]) -> int:
        """The highest index enough replicas store to commit it, given each member's last stored index
        (the leader's included), sorted from highest to lowest. Default: a majority (seed 000 "N/2 + 1").
        A mode with another rule overrides it (fluvio, seed 002: every member of the Live Replica Set)."""
        return stored[self.host.config.majority - 1]

    def confirmed_round(self, rounds: list[int]) -> int:
        """The newest heartbeat round enough replicas acknowledged to confirm leadership for reads, given
        each member's newest acknowledged round (the leader's own round first), sorted from highest to
        lowest. Default: a majority; fluvio: every member of the Live Replica Set."""
        return rounds[self.host.config.majority - 1]

    def leader_quorum(self) -> int:
        """How many members (the leader included) a leader must have heard from within
        `leader_quorum_timeout` to keep leading. Default: a majority; fluvio: 1, its SC decides."""
        return self.host.config.majority

    def on_store_reply(self, member: str, reply: dict, now: float) -> None:
        """The external store answered a `store_request` (lease mode); other modes make none."""
        return None

    def lease_read_allowed(self, now: float, wall: float) -> bool:
        """Whether the leader may answer a read locally under a lease (lease mode); default never."""
        return False

    def admits_leader(self, sender: str, term: int, now: float) -> bool:
        """Whether a follower takes a leader message (heartbeat, AppendEntries, sync) of `term` >= its own
        from `sender` now. Default always; aeron: only once its election has joined that leader's live Log."""
        return True

    def streams_to(self, peer: str) -> bool:
        """Whether the leader sends AppendEntries to `peer`. Default always; aeron: only to followers that
        joined the live Log (the others are back-filled by the election)."""
        return True

    def on_leadership_resumed(self, now: float) -> None:
        """Bug `lsn-reuse`: the node took its persisted leadership back after a restart, without an
        election; a mode with leader state of its own (aeron, fluvio) takes that leadership up too."""
        return None


class TimedElection(Election):
    """The timer skeleton the seeds' in-cluster elections share.

    A follower that knows a leader counts it gone after `missed_heartbeats` heartbeat intervals without
    contact; a follower without a leader waits a random time, then asks a majority whether it would be
    supported (ElectionScouting / PreVote, unless `config.scouting` is off), then proposes itself as a
    candidate; a candidate that gets no majority within `proposal_timeout` returns to follower and waits
    again (seed 000 "Leader Crash Scenario"). Subclasses supply the messages and the granting rules.
    """

    def __init__(self, host: ElectionHost) -> None:
        super().__init__(host)
        self.leader_deadline: float | None = None
        self.election_at: float | None = None
        self.scouting_term: int | None = None
        self.scouting_support: list[str] = []
        self.scouting_deadline: float | None = None
        self.votes: list[str] = []
        self.proposal_deadline: float | None = None

    # -- what subclasses provide ------------------------------------------------------------------------

    @abstractmethod
    def scouting_message(self, term: int) -> Message:
        """The 'would you support me in `term`?' request."""

    @abstractmethod
    def proposal_message(self) -> Message:
        """The request for support in the host's (just incremented) term."""

    # -- shared behaviour -------------------------------------------------------------------------------

    def random_wait(self) -> float:
        return self.host.rng.uniform(0.0, self.host.config.election_random_wait)

    def on_start(self, now: float) -> None:
        self.election_at = now + self.host.config.effective_startup_wait + self.random_wait()

    def on_leader_contact(self, now: float, discovered: bool) -> None:
        self.leader_deadline = now + self.host.config.election_timeout
        self.election_at = None
        self._end_scouting()

    def on_leader_unknown(self, now: float) -> None:
        self.leader_deadline = None
        self._end_scouting()
        self.election_at = now + self.host.config.election_timeout + self.random_wait()

    def after_support_given(self, now: float) -> None:
        """Having supported a candidate, give it time to win before trying ourselves."""
        self.on_leader_unknown(now)

    def on_tick(self, now: float) -> None:
        host = self.host
        if host.role == FOLLOWER:
            if host.leader is not None:
                if self.leader_deadline is not None and now >= self.leader_deadline:
                    # seed 000: consecutive heartbeats missed: the leader is gone; wait a random time.
                    self.leader_deadline = None
                    host.transition(now, FOLLOWER, leader=None)
                    self.election_at = now + self.random_wait()
                return
            if self.scouting_deadline is not None and now >= self.scouting_deadline:
                self._end_scouting()
                self.election_at = now + self.random_wait()
            if self.election_at is not None and now >= self.election_at:
                self.election_at = None
                if host.config.scouting:
                    self._start_scouting(now)
                else:
                    self.propose(now)
        elif host.role == CANDIDATE:
            if self.proposal_deadline is not None and now >= self.proposal_deadline:
                self.proposal_deadline = None
                host.transition(now, FOLLOWER, leader=None)
                self.election_at = now + self.random_wait()

    def next_deadline(self) -> float | None:
        role = self.host.role
        if role == FOLLOWER:
            found = [t for t in (self.leader_deadline if self.host.leader is not None else None,
                                 self.election_at, self.scouting_deadline) if t is not None]
            return min(found) if found else None
        if role == CANDIDATE:
            return self.proposal_deadline
        return None

    def _start_scouting(self, now: float) -> None:
        host = self.host
        self.scouting_term = host.term + 1
        self.scouting_support = [host.config.node_id]
        self.scouting_deadline = now + host.config.proposal_timeout
        host.broadcast(self.scouting_message(self.scouting_term))
        self._scouting_decided(now)

    def count_scouting_support(self, sender: str, term: int, granted: bool, now: float) -> None:
        host = self.host
        if (not granted or term != self.scouting_term or host.role != FOLLOWER or host.leader is not None
                or sender in self.scouting_support):
            return
        self.scouting_support.append(sender)
        self._scouting_decided(now)

    def _scouting_decided(self, now: float) -> None:
        if len(self.scouting_support) >= self.host.config.majority:
            self._end_scouting()
            self.propose(now)

    def _end_scouting(self) -> None:
        self.scouting_term = None
        self.scouting_support = []
        self.scouting_deadline = None

    def propose(self, now: float) -> None:
        """Become a candidate in term selfTerm + 1, voting for ourselves (seed 000 "++selfTerm")."""
        host = self.host
        self._end_scouting()
        self.election_at = None
        host.transition(now, CANDIDATE, leader=None, term=host.term + 1, vote=host.config.node_id)
        self.votes = [host.config.node_id]
        self.proposal_deadline = now + host.config.proposal_timeout
        host.broadcast(self.proposal_message())
        self._votes_decided(now)

    def count_vote(self, sender: str, term: int, granted: bool, now: float) -> None:
        host = self.host
        if not granted or host.role != CANDIDATE or term != host.term or sender in self.votes:
            return
        self.votes.append(sender)
        self._votes_decided(now)

    def _votes_decided(self, now: float) -> None:
        if len(self.votes) >= self.host.config.majority:
            self.proposal_deadline = None
            self.host.transition(now, LEADER, leader=self.host.config.node_id)

    def honour_higher_term(self, term: int, now: float) -> bool:
        """Adopt a higher term carried by one of this mode's messages; True if it did."""
        host = self.host
        if term <= host.term:
            return False
        host.transition(now, FOLLOWER, leader=None, term=term, vote=None)
        self.on_leader_unknown(now)
        return True
