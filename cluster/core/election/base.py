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

Later modes implement the same class, their extra states internal to the mode: aeron (seed 001) as a
`TimedElection`-like state machine over CANVASS/NOMINATE/BALLOT whose ballot rule prefers the highest log
position, with `leader_sync` for its LEADER_LOG_REPLICATION; fluvio (seed 002) as a mode that follows a
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


class Election(ABC):
    """Base of election modes. The node calls these hooks; the mode calls back through `host`."""

    mode: ClassVar[str]
    messages: ClassVar[tuple[type[Message], ...]]
    leader_sync: ClassVar[bool]

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
