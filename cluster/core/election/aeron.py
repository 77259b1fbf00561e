"""Aeron Cluster's election (seed 001): the Election state machine, with its states and messages.

An election runs whenever a member starts, loses its leader, or meets a newer term, and ends in CLOSED,
after which the shared replication of the node core (AppendEntries, LeaderHeartbeat) is Aeron's *live
Log*. Everything before CLOSED is this module: canvass, nomination, ballot, and the follower's
back-filling of its log, one old leadership term at a time (archive replication) and then within the
current term (catchup), exactly as seed 001 "Replication and Catchup Details" walks through it.

**Mapping onto our log** (docs/election-aeron.md has the full table):

* a *leadership term* is our `term`; our first elected term is 1 (term 0 is "no leader yet, empty log"),
  so the seed's terms 0, 1, 2 are our terms 1, 2, 3;
* a *log position* is a log index: position p means the log holds entries 1..p. A term's *base position*
  (termBaseLogPosition) is the position before its first entry;
* `logLeadershipTermId` is the term of the log's last entry (the term of its last LSN);
* the leader's *NewLeadershipTermEvent*, appended to the Log when its election closes, is the term's
  no-op entry (LSN (term, 1)) at termBaseLogPosition + 1;
* the *Archive* is the node's own log: ReplayRequest/ReplayData are the seed's ReplicateRequest2 and
  ReplayRequest to the leader's Archive; CatchupPosition/CatchupData the replay into the catchup
  endpoint. Each chunk carries the LSN at its start position, and a follower appends it only if it holds
  that LSN there (log matching), so a diverged follower never splices the leader's entries onto a
  different prefix.

**Safety** rests on the same three rules as the raft mode: one vote per term, persisted before it is sent
(`ElectionHost.transition`); a vote only FOR a candidate whose log (last term, position) is at least the
voter's (seed 001 CANDIDATE_BALLOT: "a member votes for the candidate with the highest log position"),
so the winner holds every committed entry; and entries commit only through an entry of the leader's own
term, the no-op (Raft's rule, which also keeps an old term's entries that reached a quorum in
LEADER_LOG_REPLICATION from being overwritten later). A follower commits from CommitPosition only over
the prefix it verified against this leader's log.

**Timers** come from `NodeConfig`: CanvassPosition, CommitPosition, the leader's repeated
NewLeadershipTerm and a joined follower's AppendPosition every `heartbeat_interval`; a quorum (not
unanimous) canvass nominates after `election_timeout`; the nomination deadline is uniform in
[0, `election_random_wait`] from the node's rng; a ballot lasts `proposal_timeout`; a follower waiting
on its leader resends every `effective_retry` and restarts the election after `election_timeout`
without progress or, once CLOSED, without leader contact.

Known bug `stale-vote` (`cluster.core.bugs`): the candidate keeps the vote records of its earlier
ballots (the seed's NOMINATE "clears any old voting records") and counts Votes without checking their
candidateTermId, so a Vote FOR from an earlier ballot, remembered or delayed in the network, counts in
the current one. A former leader that runs again wins at once on the records of the ballot it won; if a
rival wins the same term with real votes, the term has two leaders (single-leader-per-term).

Known bug `vote-twice`: a follower grants a RequestVote of its current term although it already voted FOR
another candidate in that term (the votedFor check is skipped, as in raft mode), so two concurrent
candidates of one term can both win a majority.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import ClassVar

from cluster.core.election.base import CANDIDATE, FOLLOWER, KEEP, LEADER, Election, ElectionHost
from cluster.core.messages import (
    AppendPosition,
    CanvassPosition,
    CatchupData,
    CatchupPosition,
    CommitPosition,
    Message,
    NewLeadershipTerm,
    ReplayData,
    ReplayRequest,
    RequestVote,
    StopCatchup,
    Vote,
)

INIT = "INIT"
CANVASS = "CANVASS"
NOMINATE = "NOMINATE"
CANDIDATE_BALLOT = "CANDIDATE_BALLOT"
FOLLOWER_BALLOT = "FOLLOWER_BALLOT"
LEADER_LOG_REPLICATION = "LEADER_LOG_REPLICATION"
LEADER_REPLAY = "LEADER_REPLAY"
LEADER_INIT = "LEADER_INIT"
LEADER_READY = "LEADER_READY"
FOLLOWER_LOG_REPLICATION = "FOLLOWER_LOG_REPLICATION"
FOLLOWER_REPLAY = "FOLLOWER_REPLAY"
FOLLOWER_CATCHUP_INIT = "FOLLOWER_CATCHUP_INIT"
FOLLOWER_CATCHUP_AWAIT = "FOLLOWER_CATCHUP_AWAIT"
FOLLOWER_CATCHUP = "FOLLOWER_CATCHUP"
FOLLOWER_LOG_INIT = "FOLLOWER_LOG_INIT"
FOLLOWER_LOG_AWAIT = "FOLLOWER_LOG_AWAIT"
FOLLOWER_READY = "FOLLOWER_READY"
CLOSED = "CLOSED"

#: every state of the Election, in the seed's diagram order, with what a member does there (ours).
STATES: dict[str, str] = {
    INIT: "clear the decks: forget the last election's canvass, ballot, replication and catchup; leave any role",
    CANVASS: "publish CanvassPosition periodically; become a candidate if no canvassed log is better and "
             "every member (or, after `election_timeout`, a quorum) has canvassed",
    NOMINATE: "still canvassing, wait for the random nomination deadline (or a NewLeadershipTerm)",
    CANDIDATE_BALLOT: "vote for itself in a new term, send RequestVote, count the Votes of this ballot; "
                      "a majority wins, a lost or timed-out ballot goes back to CANVASS",
    FOLLOWER_BALLOT: "voted FOR a candidate; await the winner's NewLeadershipTerm",
    LEADER_LOG_REPLICATION: "send NewLeadershipTerm; await a quorum at the leader's log position (Vote or "
                            "AppendPosition); publish CommitPosition for the whole term",
    LEADER_REPLAY: "process the log to its end (the node applies committed entries as it learns of them); "
                   "reset the followers' positions",
    LEADER_INIT: "the term's Log publication exists: its heartbeats are the live Log",
    LEADER_READY: "await AppendPosition from the followers that joined the live Log (all, or a quorum "
                  "after `effective_retry`)",
    FOLLOWER_LOG_REPLICATION: "back-fill one old leadership term from the leader's archive (ReplayRequest, "
                              "ReplayData), then send AppendPosition and canvass again",
    FOLLOWER_REPLAY: "process the log up to what the leader's CommitPosition allows over the verified prefix",
    FOLLOWER_CATCHUP_INIT: "behind in the current term: send CatchupPosition",
    FOLLOWER_CATCHUP_AWAIT: "await the leader's catchup replay (its first CatchupData)",
    FOLLOWER_CATCHUP: "append CatchupData, answer AppendPosition (catchup flag), until StopCatchup",
    FOLLOWER_LOG_INIT: "join the live Log: straight to FOLLOWER_READY after catchup, else FOLLOWER_LOG_AWAIT",
    FOLLOWER_LOG_AWAIT: "await the leader's live Log (its first LeaderHeartbeat of the term)",
    FOLLOWER_READY: "send AppendPosition (live flag): the leader streams the live Log from there",
    CLOSED: "the election is done; the shared replication runs until the next election",
}

#: AppendPosition flags: CATCHUP is the seed's ("flag to say it's in 'catchup mode'"); LIVE is ours: the
#: follower has joined the live Log, so the leader may stream AppendEntries to it from that position.
FLAG_CATCHUP = 1
FLAG_LIVE = 2
#: NewLeadershipTerm.next_log_position when the next term is the current one (seed: "-1 ... hasn't ended").
NULL_POSITION = -1

_BALLOTS = (CANVASS, NOMINATE, CANDIDATE_BALLOT, FOLLOWER_BALLOT)
_FOLLOWER_WAITS = (FOLLOWER_LOG_REPLICATION, FOLLOWER_CATCHUP_AWAIT, FOLLOWER_CATCHUP, FOLLOWER_LOG_AWAIT)
#: the follower states that process (commit and apply) the log; back-filling old terms does not
_PROCESSING = (FOLLOWER_CATCHUP_AWAIT, FOLLOWER_CATCHUP, FOLLOWER_LOG_AWAIT)


def _term_of(entry: dict) -> int:
    return entry["lsn"][0]


class AeronElection(Election):
    mode: ClassVar[str] = "aeron"
    messages: ClassVar[tuple[type[Message], ...]] = (
        CanvassPosition, RequestVote, Vote, NewLeadershipTerm, AppendPosition, CommitPosition,
        CatchupPosition, StopCatchup, ReplayRequest, ReplayData, CatchupData)
    leader_sync: ClassVar[bool] = False
    defers_leadership: ClassVar[bool] = True

    def __init__(self, host: ElectionHost) -> None:
        super().__init__(host)
        self.state = INIT
        self.bug_stale_vote = host.config.has_bug("stale-vote")
        self.bug_vote_twice = host.config.has_bug("vote-twice")
        # CANVASS / NOMINATE: peer -> (log term, log position, its term, when heard).
        self.canvass: dict[str, tuple[int, int, int, float]] = {}
        self.canvass_at: float | None = None
        self.quorum_at: float | None = None  # when a quorum (not unanimous) canvass may nominate
        self.nomination_deadline: float | None = None
        # CANDIDATE_BALLOT / FOLLOWER_BALLOT.
        self.ballot_deadline: float | None = None
        # The vote records: member -> (candidateTermId, FOR?) of its latest Vote, as Aeron keeps them in its
        # member objects across ballots; a nomination clears them (seed NOMINATE).
        self.votes: dict[str, tuple[int, bool]] = {}
        # Leader: its term's base position, what it knows of each follower's log, who joined the live Log.
        self.term_base = 0
        self.positions: dict[str, int] = {}
        self.log_terms: dict[str, int] = {}
        self.live: set[str] = set()
        self.publish_at: float | None = None
        self.ready_at: float | None = None  # LEADER_READY: when a quorum of joined followers is enough
        # Follower of a leader: the prefix verified against its log, its commit and log positions.
        self.verified = 0
        self.commit_position = 0
        self.leader_log_position = 0
        self.stop_position = 0
        self.caught_up = False
        self.retry_at: float | None = None
        self.progress_deadline: float | None = None
        self.contact_deadline: float | None = None
        self.append_at: float | None = None
        self.joined: tuple[int, str] | None = None  # (term, leader) whose live Log this election joined

    # -- Election hooks ---------------------------------------------------------------------------------

    def on_start(self, now: float) -> None:
        self._start_election(now)

    def on_leader_contact(self, now: float, discovered: bool) -> None:
        host = self.host
        if discovered and self.joined != (host.term, host.leader):
            # The node took a leader from outside the election (a newer term in some response): join it
            # through an election, so that our log is checked against it first.
            self._start_election(now)
            return
        self.contact_deadline = now + host.config.election_timeout

    def on_leader_unknown(self, now: float) -> None:
        self._start_election(now)

    def admits_leader(self, sender: str, term: int, now: float) -> bool:
        """The live Log (LeaderHeartbeat, AppendEntries) reaches only a follower that joined it: CLOSED, or
        FOLLOWER_LOG_AWAIT, for which the leader's first live message is the awaited connection."""
        host = self.host
        if term > host.term:
            self._newer_term(term, now)
            return False
        if term < host.term or sender != host.leader or host.role != FOLLOWER:
            return False
        if self.state == FOLLOWER_LOG_AWAIT:
            self._follower_ready(now)
            return True
        return self.state == CLOSED and self.joined == (term, sender)

    def streams_to(self, peer: str) -> bool:
        return peer in self.live

    def on_leadership_resumed(self, now: float) -> None:
        """Bug `lsn-reuse`: the restarted leader skips the election and takes its term back as CLOSED; its
        followers, still CLOSED on (term, leader), rejoin its live Log with their next AppendPosition."""
        host = self.host
        self._init(now)
        self.term_base = host.term_start_index - 1
        self._enter(CLOSED, now)
        self.publish_at = now

    def next_deadline(self) -> float | None:
        found = [t for t in self._deadlines() if t is not None]
        return min(found) if found else None

    def _deadlines(self) -> tuple[float | None, ...]:
        state = self.state
        if state in (CANVASS, NOMINATE):
            return (self.canvass_at, self.quorum_at, self.nomination_deadline)
        if state in (CANDIDATE_BALLOT, FOLLOWER_BALLOT):
            return (self.ballot_deadline,)
        if self.host.role == LEADER:
            return (self.publish_at, self.ready_at)
        if state in _FOLLOWER_WAITS:
            return (self.retry_at, self.progress_deadline)
        if state == CLOSED:
            return (self.append_at, self.contact_deadline)
        return ()

    def on_tick(self, now: float) -> None:
        host = self.host
        config = host.config
        state = self.state
        if state in (CANVASS, NOMINATE):
            if self.canvass_at is not None and now >= self.canvass_at:
                self._send_canvass(now)
            if self.quorum_at is not None and now >= self.quorum_at:
                self.quorum_at = None
            if state == NOMINATE and self.nomination_deadline is not None and now >= self.nomination_deadline:
                self._nominate(now)
            elif state == CANVASS:
                self._evaluate_canvass(now)
        elif state in (CANDIDATE_BALLOT, FOLLOWER_BALLOT):
            if self.ballot_deadline is not None and now >= self.ballot_deadline:
                # Seed: "If the election had timed out, it would have moved back to CANVASS".
                if host.role == CANDIDATE:
                    host.transition(now, FOLLOWER, leader=None)
                self._canvass(now)
        elif host.role == LEADER:
            if self.publish_at is not None and now >= self.publish_at:
                self._publish(now)
            if state == LEADER_READY and self.ready_at is not None and now >= self.ready_at:
                self.ready_at = None
                self._evaluate_ready(now)
        elif state in _FOLLOWER_WAITS:
            if self.progress_deadline is not None and now >= self.progress_deadline:
                self._start_election(now)  # the leader stopped answering: start over
            elif self.retry_at is not None and now >= self.retry_at:
                self._resend(now)
        elif state == CLOSED and host.role == FOLLOWER:
            if host.leader is None or (self.contact_deadline is not None and now >= self.contact_deadline):
                self._start_election(now)
            elif self.append_at is not None and now >= self.append_at:
                self.append_at = now + config.heartbeat_interval
                host.send(host.leader, AppendPosition(term=host.term, log_position=host.log.last_index,
                                                      flags=FLAG_LIVE))

    def on_message(self, sender: str, message: Message, now: float) -> None:
        host = self.host
        if host.role == LEADER and message.term == host.term and sender not in self.live:
            host.note_supporter(sender, now)  # alive, though not on the live Log: no quorum timeout
        if isinstance(message, CanvassPosition):
            self._on_canvass(sender, message, now)
        elif isinstance(message, RequestVote):
            self._on_request_vote(sender, message, now)
        elif isinstance(message, NewLeadershipTerm):
            self._on_new_leadership_term(sender, message, now)
        elif message.term > host.term:
            # Any other message of a newer term: a newer leader or ballot exists. Take its term and start an
            # election, whose canvass the leader will answer.
            self._newer_term(message.term, now)
        elif isinstance(message, Vote):
            self._on_vote(sender, message, now)  # a late Vote of an earlier ballot is the ballot's to judge
        elif message.term < host.term:
            return
        elif isinstance(message, AppendPosition):
            self._on_append_position(sender, message, now)
        elif isinstance(message, CommitPosition):
            self._on_commit_position(sender, message, now)
        elif isinstance(message, CatchupPosition):
            if host.role == LEADER:
                self.live.discard(sender)
                self._serve_catchup(sender, message.log_position)
        elif isinstance(message, ReplayRequest):
            self._on_replay_request(sender, message)
        elif isinstance(message, ReplayData):
            self._on_replay_data(sender, message, now)
        elif isinstance(message, CatchupData):
            self._on_catchup_data(sender, message, now)
        elif isinstance(message, StopCatchup):
            if self.state in (FOLLOWER_CATCHUP_AWAIT, FOLLOWER_CATCHUP) and sender == host.leader:
                self.caught_up = True
                self._follower_log_init(now)

    # -- state changes ----------------------------------------------------------------------------------

    def _enter(self, state: str, now: float) -> None:
        self.state = state
        self.host.journal({"event": "election", "state": state, "term": self.host.term})

    def _start_election(self, now: float, canvass_now: bool = True) -> None:
        """A new election: INIT, then CANVASS, or straight to leadership in a single-node cluster."""
        host = self.host
        if host.role != FOLLOWER or host.leader is not None:
            host.transition(now, FOLLOWER, leader=None)
        self._init(now)
        if not host.config.peers:
            host.transition(now, CANDIDATE, leader=None, term=host.term + 1, vote=host.config.node_id)
            self._enter(CANDIDATE_BALLOT, now)
            self._win(now)
            return
        self._canvass(now, canvass_now)

    def _init(self, now: float) -> None:
        """INIT: clear the decks (seed: "It closes the Ingress ... stops any Catchup or Replication")."""
        self._enter(INIT, now)
        self.canvass = {}
        self.canvass_at = self.quorum_at = self.nomination_deadline = self.ballot_deadline = None
        self.positions, self.log_terms, self.live = {}, {}, set()
        self.publish_at = self.ready_at = None
        self.retry_at = self.progress_deadline = None
        self.contact_deadline = self.append_at = None
        self.caught_up = False
        self.joined = None

    def _newer_term(self, term: int, now: float) -> None:
        """A message of a newer term: take it (no vote yet). A member already canvassing goes on; a ballot
        of ours is over; anyone else (leader, follower, CLOSED) starts an election."""
        self.host.transition(now, FOLLOWER, leader=None, term=term, vote=None)
        if self.state in (CANVASS, NOMINATE):
            return
        if self.state in (CANDIDATE_BALLOT, FOLLOWER_BALLOT):
            self._canvass(now)
        else:
            self._start_election(now)

    # -- CANVASS and NOMINATE ---------------------------------------------------------------------------

    def _canvass(self, now: float, canvass_now: bool = True) -> None:
        self._enter(CANVASS, now)
        self.quorum_at = now + self.host.config.election_timeout
        self.nomination_deadline = None
        self.ballot_deadline = None
        if canvass_now:
            self._send_canvass(now)
        else:
            self.canvass_at = now + self.host.config.heartbeat_interval

    def _send_canvass(self, now: float) -> None:
        host = self.host
        log = host.log
        self.canvass_at = now + host.config.heartbeat_interval
        host.broadcast(CanvassPosition(term=host.term, log_leadership_term_id=log.last_term,
                                       log_position=log.last_index))

    def _on_canvass(self, sender: str, message: CanvassPosition, now: float) -> None:
        host = self.host
        if host.role == LEADER:
            if message.term > host.term:
                self._newer_term(message.term, now)  # a newer ballot happened without us: step down
                return
            # The member is in an election (it restarted, or lost us): it leaves the live Log until it
            # joins again, and commits no longer count what it held.
            if sender in self.live:
                self.live.discard(sender)
                host.set_follower_position(sender, 0, now)
            self.log_terms[sender] = message.log_leadership_term_id
            host.send(sender, self._new_leadership_term(message.log_leadership_term_id))
            return
        if self.state in (CANVASS, NOMINATE):
            self.canvass[sender] = (message.log_leadership_term_id, message.log_position, message.term, now)
            if self.state == CANVASS:
                self._evaluate_canvass(now)

    def _evaluate_canvass(self, now: float) -> None:
        """Seed CANVASS: a candidate when its log is in the highest term with the highest position among
        the members heard, and either all of them were heard or, after the timeout, a quorum."""
        host = self.host
        config = host.config
        horizon = now - config.election_timeout
        fresh = [(lt, lp) for lt, lp, _, at in self.canvass.values() if at >= horizon]
        own = (host.log.last_term, host.log.last_index)
        if any(other > own for other in fresh):
            return
        unanimous = len(fresh) == len(config.peers)
        quorum = len(fresh) + 1 >= config.majority and self.quorum_at is None
        if unanimous or quorum:
            self._enter(NOMINATE, now)
            self.quorum_at = None
            self.nomination_deadline = now + host.rng.uniform(0.0, config.election_random_wait)

    def _nominate(self, now: float) -> None:
        """The nomination deadline expired: vote for ourselves in a new term, ask for the others' votes."""
        host = self.host
        seen = max((term for _, _, term, _ in self.canvass.values()), default=0)
        candidate_term = max(host.term, seen) + 1
        host.transition(now, CANDIDATE, leader=None, term=candidate_term, vote=host.config.node_id)
        self._enter(CANDIDATE_BALLOT, now)
        self.nomination_deadline = self.canvass_at = self.quorum_at = None
        # Seed NOMINATE: "It clears any old voting records it holds about votes from other members, then
        # marks a vote for itself". Bug stale-vote: the records of earlier ballots are kept.
        if not self.bug_stale_vote:
            self.votes = {}
        self.votes[host.config.node_id] = (candidate_term, True)
        self.positions = {}
        self.ballot_deadline = now + host.config.proposal_timeout
        log = host.log
        host.broadcast(RequestVote(term=candidate_term, log_leadership_term_id=log.last_term,
                                   log_position=log.last_index))
        self._evaluate_ballot(now)

    # -- CANDIDATE_BALLOT and FOLLOWER_BALLOT -----------------------------------------------------------

    def _on_request_vote(self, sender: str, message: RequestVote, now: float) -> None:
        host = self.host
        log = host.log
        if message.term > host.term:
            self._newer_term(message.term, now)
        candidate_log = (message.log_leadership_term_id, message.log_position)
        # One Vote FOR per term, persisted (seed 001 FOLLOWER_BALLOT); bug vote-twice skips that check.
        granted = (message.term == host.term and host.role == FOLLOWER and host.leader is None
                   and (host.voted_for in (None, sender) or self.bug_vote_twice)
                   and candidate_log >= (log.last_term, log.last_index))
        if granted and self.state != FOLLOWER_BALLOT:
            host.transition(now, FOLLOWER, vote=sender)
            self._enter(FOLLOWER_BALLOT, now)
            self.nomination_deadline = self.canvass_at = self.quorum_at = None
            self.ballot_deadline = now + host.config.election_timeout
        host.journal({"event": "vote", "kind": "vote", "term": message.term, "candidate": sender,
                      "granted": granted})
        host.send(sender, Vote(term=host.term, candidate_term_id=message.term,
                               log_leadership_term_id=log.last_term, log_position=log.last_index, vote=granted))

    def _on_vote(self, sender: str, message: Vote, now: float) -> None:
        if self.state != CANDIDATE_BALLOT:
            return
        if message.candidate_term_id < self.votes.get(sender, (0, False))[0]:
            return  # older than the Vote we hold from that member
        self.votes[sender] = (message.candidate_term_id, message.vote)
        if message.candidate_term_id == self.host.term:
            self.log_terms[sender] = message.log_leadership_term_id
            self.positions[sender] = message.log_position
        self._evaluate_ballot(now)

    def _evaluate_ballot(self, now: float) -> None:
        """Won once a majority voted FOR this ballot, i.e. for our current candidateTermId. Bug stale-vote:
        a FOR record of any earlier ballot counts too. A ballot is otherwise lost only by its timeout."""
        host = self.host
        ballot = host.term
        votes = sum(1 for term, vote in self.votes.values() if vote and (term == ballot or self.bug_stale_vote))
        if votes >= host.config.majority:
            self._win(now)

    # -- the leader's states ----------------------------------------------------------------------------

    def _win(self, now: float) -> None:
        """LEADER_LOG_REPLICATION: proclaim the win and wait until a quorum holds the leader's log."""
        host = self.host
        host.transition(now, LEADER, leader=host.config.node_id)
        self._enter(LEADER_LOG_REPLICATION, now)
        self.ballot_deadline = None
        self.term_base = host.log.last_index
        self.live = set()
        self._publish(now)
        self._evaluate_log_replication(now)

    def _publish(self, now: float) -> None:
        """Seed: CommitPosition to every follower for the whole term; NewLeadershipTerm, while the election
        lasts, to the followers not yet on the live Log ("in case they are slow to start")."""
        host = self.host
        self.publish_at = now + host.config.heartbeat_interval
        host.broadcast(CommitPosition(term=host.term, log_position=host.commit_index))
        if self.state != CLOSED:
            own = host.log.lsn_at(self.term_base)[0]
            for peer in host.config.peers:
                if peer not in self.live:
                    host.send(peer, self._new_leadership_term(self.log_terms.get(peer, own)))

    def _new_leadership_term(self, log_term: int) -> NewLeadershipTerm:
        """The leader's answer to a member whose log ends in `log_term`: the next term after it in the
        leader's log, where that starts and ends (NULL_POSITION: it is the current term), and the current
        term's base and the leader's log position (seed "1st NewLeadershipTerm")."""
        host = self.host
        entries = host.log.entries
        term = host.term
        # Terms never decrease along a log, so a binary search finds where `log_term` ends.
        base = bisect_right(entries, log_term, key=_term_of)
        next_term = _term_of(entries[base]) if base < len(entries) else term
        if log_term >= term or next_term >= term:
            next_term, base, next_end = term, self.term_base, NULL_POSITION
        else:
            next_end = bisect_right(entries, next_term, key=_term_of)
        return NewLeadershipTerm(term=term, log_leadership_term_id=log_term, next_leadership_term_id=next_term,
                                 next_term_base_log_position=base, next_log_position=next_end,
                                 term_base_log_position=self.term_base, log_position=host.log.last_index)

    def _on_append_position(self, sender: str, message: AppendPosition, now: float) -> None:
        host = self.host
        if host.role != LEADER:
            return
        self.positions[sender] = message.log_position
        if message.flags & FLAG_CATCHUP:
            self._serve_catchup(sender, message.log_position)
        if message.flags & FLAG_LIVE and sender not in self.live:
            self.live.add(sender)
            host.set_follower_position(sender, message.log_position, now)
        if self.state == LEADER_LOG_REPLICATION:
            self._evaluate_log_replication(now)
        elif self.state == LEADER_READY:
            self._evaluate_ready(now)

    def _evaluate_log_replication(self, now: float) -> None:
        host = self.host
        at_position = 1 + sum(1 for p in self.positions.values() if p >= self.term_base)
        if at_position < host.config.majority:
            return
        # LEADER_REPLAY: our node has applied everything it knows committed; the old terms' entries up to
        # term_base commit with this term's first entry. The positions are reset (seed LEADER_READY).
        self._enter(LEADER_REPLAY, now)
        self.positions = {}
        # LEADER_INIT: the Log publication (heartbeats) exists since the win.
        self._enter(LEADER_INIT, now)
        self._enter(LEADER_READY, now)
        self.ready_at = now + host.config.effective_retry
        self._evaluate_ready(now)

    def _evaluate_ready(self, now: float) -> None:
        host = self.host
        joined = len(self.live)
        if joined == len(host.config.peers) or (joined + 1 >= host.config.majority and self.ready_at is None):
            self.ready_at = None
            self._enter(CLOSED, now)
            host.complete_leadership(now)  # the NewLeadershipTermEvent: the term's no-op; writes accepted

    def _serve_catchup(self, peer: str, position: int) -> None:
        """Replay the leader's log after `position` into the follower's catchup, one chunk per request;
        once the follower reached the log's end, StopCatchup (seed FOLLOWER_CATCHUP)."""
        host = self.host
        if self.state != CLOSED:
            return  # the current term's Log starts when the election closes
        log = host.log
        if position >= log.last_index:
            host.send(peer, StopCatchup(term=host.term))
            return
        host.send(peer, CatchupData(term=host.term, position=position, prev_lsn=log.lsn_at(position),
                                    entries=log.slice(position + 1, host.config.max_batch_entries)))

    def _on_replay_request(self, sender: str, message: ReplayRequest) -> None:
        host = self.host
        if host.role != LEADER:
            return
        log = host.log
        position = message.position
        if position > log.last_index:
            host.send(sender, ReplayData(term=host.term, position=position, prev_lsn=[0, 0], entries=[]))
            return
        count = min(message.length, host.config.max_batch_entries)
        host.send(sender, ReplayData(term=host.term, position=position, prev_lsn=log.lsn_at(position),
                                     entries=log.slice(position + 1, count)))

    # -- the follower's states --------------------------------------------------------------------------

    def _on_new_leadership_term(self, sender: str, message: NewLeadershipTerm, now: float) -> None:
        host = self.host
        if message.term < host.term:
            return
        if message.term == host.term:
            if host.role == LEADER or self.state not in _BALLOTS or host.leader not in (None, sender):
                return
            if host.leader is None:
                self._follow(sender, host.term, now)
        else:
            if self.state not in _BALLOTS:
                self._init(now)  # we led, followed or were joining an older term: a new election
            self._follow(sender, message.term, now)
        self.leader_log_position = message.log_position
        log = host.log
        if message.log_leadership_term_id != log.last_term:
            self._canvass(now)  # an answer for another log than ours: canvass again
            return
        if log.last_term >= message.term:
            # Our log already reaches into the current term, which only this leader writes.
            self.verified = max(self.verified, log.last_index)
            self._follower_replay(now)
            return
        base = message.next_term_base_log_position
        if log.last_index > base:
            # Our log's last term ends at `base` in the leader's log (or is not in it at all): what we hold
            # beyond is uncommitted and not the leader's. Never cut below what we committed.
            if base < host.commit_index:
                self._diverged(now)
                return
            host.adopt_entries(base + 1, [], replace=True)
        if log.last_index < base:
            self._replicate(base, now)  # seed: "back-fill from A to B ... the rest of Term 0"
        elif message.next_log_position == NULL_POSITION:
            self._follower_replay(now)  # seed: "[on NewLeadershipTerm, no Log to replicate]"
        else:
            self._replicate(message.next_log_position, now)  # seed: "this time to replicate term 1, from B to C"

    def _follow(self, leader: str, term: int, now: float) -> None:
        host = self.host
        host.transition(now, FOLLOWER, leader=leader, term=term, vote=None if term > host.term else KEEP)
        self.verified = host.commit_index  # committed entries are in every later leader's log
        self.commit_position = 0
        self.canvass_at = self.quorum_at = self.nomination_deadline = self.ballot_deadline = None

    def _replicate(self, stop: int, now: float) -> None:
        """FOLLOWER_LOG_REPLICATION of one leadership term, up to `stop`, from the leader's archive."""
        self._enter(FOLLOWER_LOG_REPLICATION, now)
        self.stop_position = stop
        self.progress_deadline = now + self.host.config.election_timeout
        self._resend(now)

    def _resend(self, now: float) -> None:
        """Ask the leader again for what this state waits on (a lost message must not stall it)."""
        host = self.host
        self.retry_at = now + host.config.effective_retry
        position = host.log.last_index
        if self.state == FOLLOWER_LOG_REPLICATION:
            host.send(host.leader, ReplayRequest(term=host.term, position=position,
                                                 length=self.stop_position - position))
        elif self.state == FOLLOWER_CATCHUP_AWAIT:
            host.send(host.leader, CatchupPosition(term=host.term, log_position=position))
        elif self.state == FOLLOWER_CATCHUP:
            host.send(host.leader, AppendPosition(term=host.term, log_position=position, flags=FLAG_CATCHUP))

    def _append_replayed(self, sender: str, position: int, prev_lsn: list[int], entries: list[dict],
                         now: float) -> bool:
        """Append a chunk of the leader's log that follows our log's end; False if it does not (a duplicate,
        or our prefix is not the leader's: then the election starts over from our committed prefix)."""
        host = self.host
        log = host.log
        if sender != host.leader or position != log.last_index:
            return False
        if not log.matches(position, prev_lsn):
            self._diverged(now)
            return False
        if entries:
            host.adopt_entries(position + 1, entries, replace=False)
        self.verified = log.last_index
        self.progress_deadline = now + host.config.election_timeout
        if self.state in _PROCESSING:
            self._commit(now)
        return True

    def _on_replay_data(self, sender: str, message: ReplayData, now: float) -> None:
        if self.state != FOLLOWER_LOG_REPLICATION:
            return
        host = self.host
        stop = self.stop_position
        entries = message.entries[:max(0, stop - message.position)]
        if not self._append_replayed(sender, message.position, message.prev_lsn, entries, now):
            return
        position = host.log.last_index
        if position >= stop or not entries:
            # Seed: "When the Archive Replication is complete, member 0 returns to the CANVASS state".
            self.retry_at = self.progress_deadline = None
            host.send(host.leader, AppendPosition(term=host.term, log_position=position, flags=0))
            self._canvass(now)
        else:
            self._resend(now)

    def _follower_replay(self, now: float) -> None:
        self._enter(FOLLOWER_REPLAY, now)
        self._commit(now)
        if self.host.log.last_index < self.leader_log_position:
            # Behind within the current term: catchup (seed FOLLOWER_CATCHUP_INIT).
            self._enter(FOLLOWER_CATCHUP_INIT, now)
            self._enter(FOLLOWER_CATCHUP_AWAIT, now)
            self.progress_deadline = now + self.host.config.election_timeout
            self._resend(now)
        else:
            self._follower_log_init(now)

    def _on_catchup_data(self, sender: str, message: CatchupData, now: float) -> None:
        if self.state not in (FOLLOWER_CATCHUP_AWAIT, FOLLOWER_CATCHUP) or sender != self.host.leader:
            return
        if self.state == FOLLOWER_CATCHUP_AWAIT:
            if message.position != self.host.log.last_index:
                return
            self._enter(FOLLOWER_CATCHUP, now)
        if self._append_replayed(sender, message.position, message.prev_lsn, message.entries, now):
            self._resend(now)  # AppendPosition with the catchup flag

    def _follower_log_init(self, now: float) -> None:
        self.retry_at = None
        self._enter(FOLLOWER_LOG_INIT, now)
        if self.caught_up:
            self._follower_ready(now)  # seed: "it would already have a Log Subscription"
        else:
            self._enter(FOLLOWER_LOG_AWAIT, now)
            self.progress_deadline = now + self.host.config.election_timeout

    def _follower_ready(self, now: float) -> None:
        host = self.host
        self._enter(FOLLOWER_READY, now)
        host.send(host.leader, AppendPosition(term=host.term, log_position=host.log.last_index, flags=FLAG_LIVE))
        self._enter(CLOSED, now)
        self.joined = (host.term, host.leader)
        self.retry_at = self.progress_deadline = None
        self.append_at = now + host.config.heartbeat_interval
        self.contact_deadline = now + host.config.election_timeout

    def _on_commit_position(self, sender: str, message: CommitPosition, now: float) -> None:
        host = self.host
        if host.role != FOLLOWER or sender != host.leader:
            return
        self.contact_deadline = now + host.config.election_timeout
        self.commit_position = max(self.commit_position, message.log_position)
        if self.state in _PROCESSING:
            self._commit(now)  # once CLOSED the live Log carries the commit point

    def _commit(self, now: float) -> None:
        """Commit what the leader committed, over the prefix we verified holds the leader's entries."""
        index = min(self.commit_position, self.verified)
        if index > self.host.commit_index:
            self.host.advance_commit(index)

    def _diverged(self, now: float) -> None:
        """Our log is not a prefix of the leader's beyond what we committed: drop the uncommitted rest and
        start over (the next canvass reports the committed prefix, which every later leader holds)."""
        host = self.host
        if host.log.last_index > host.commit_index:
            host.adopt_entries(host.commit_index + 1, [], replace=True)
        # Canvass on the timer, not at once: a leader that lacks our committed entries (only possible
        # under a bug) would otherwise answer with the same NewLeadershipTerm in a loop without time passing.
        self._start_election(now, canvass_now=False)
