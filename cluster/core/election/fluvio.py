"""Fluvio-style replica election (seed 002): the SPUs do not elect; a controller (the SC) does.

This is the SPU side: a node of mode `fluvio` is one replica of the replica set (an SPU). The controller
is `cluster.core.fluvio_controller` (one more process of the cluster, id `CONTROLLER_ID`); the SPUs' node ids
are their peers as usual, the controller is not a peer (it counts in no quorum) but may message them.

* Every `heartbeat_interval` an SPU sends the SC its SpuStatus: role, term, leader, LEO (last index and
  LSN), HW (commit index) and, on the leader, the Live Replica Set it proposes.
* LeaderCandidate(epoch, candidate) (seed 002 "Follower SPUs receive Leader Candidate Notification"):
  the SPU named candidate promotes itself, follower to leader in term = the SC's election epoch, and
  answers PromotionSuccessful; promotion fails (no answer) when its own term is not lower than the epoch.
  Other SPUs ignore the message.
* ReplicaSetUpdate(epoch, leader, lrs) ("SPUs receive new LRS"): followers adopt the epoch and the leader
  (the leader's AppendEntries of a higher term would also make them follow it); the leader takes the LRS
  as acknowledged by the SC.
* Commit ("Synchronization Algorithm"): a record is committed when every LRS member stores it, HW =
  min LEO over the LRS (`commit_point`), instead of a majority. The leader removes a follower that
  lags by more than `MAX_LAG_RECORDS` or has not answered for an election timeout ("Lagging Follower"),
  and re-admits it once it holds everything up to the HW. A shrink takes effect only once the SC has
  acknowledged it (the SC elects only among LRS members, so it must never know a larger LRS than the one
  commits used), a growth at once: commits use the union of the acknowledged and the proposed LRS.
* LRS version: LeaderCandidate and ReplicaSetUpdate carry the version of the SC's LRS; an SPU applies
  none older than the newest it applied in the epoch (a delayed update must not undo a newer one), and
  the leader's SpuStatus echoes that version (the SC adopts only a report based on its current LRS).
  Every LRS the leader reported on the current version counts in commits until a newer version is
  applied: the SC may still adopt any of them.
* Linearizable reads are confirmed by every LRS member (`confirmed_round`), not a majority: the SC
  promotes without a vote, so a majority of SPUs that have not yet heard of a new epoch could otherwise
  confirm a deposed leader.

The winner is the LRS member with the smallest lag, which holds every committed record because every
commit needed it: no leader synchronisation (`leader_sync` False). The known bug `promote-outside-lrs`
is the controller's (`cluster.core.fluvio_controller`).
"""

from __future__ import annotations

from typing import ClassVar

from cluster.core.election.base import CANDIDATE, FOLLOWER, LEADER, Election, ElectionHost
from cluster.core.messages import (
    LeaderCandidate,
    Message,
    PromotionSuccessful,
    ReplicaSetUpdate,
    SpuStatus,
)

#: the node id of the controller (SC) of a fluvio cluster.
CONTROLLER_ID = "sc"

#: a follower further behind the leader's LEO than this many records leaves the LRS (seed 002 "Lagging
#: Follower": "less than the LRS HW by a maximum number of records").
MAX_LAG_RECORDS = 1000


class FluvioElection(Election):
    mode: ClassVar[str] = "fluvio"
    messages: ClassVar[tuple[type[Message], ...]] = (LeaderCandidate, ReplicaSetUpdate)
    leader_sync: ClassVar[bool] = False
    external_senders: ClassVar[tuple[str, ...]] = (CONTROLLER_ID,)

    def __init__(self, host: ElectionHost) -> None:
        super().__init__(host)
        self.status_at: float | None = None
        self.lrs: list[str] = []             # the LRS as the SC last announced it
        self.acked_lrs: list[str] | None = None  # on the leader: the LRS the SC acknowledged, None: unknown
        self.proposed_lrs: list[str] = []    # on the leader: the LRS it maintains and reports
        self.first_ack = False               # on a new leader: the SC's Online announcement is awaited
        self.sc_heard_at: float | None = None  # the last ReplicaSetUpdate of our epoch naming us leader
        self.lrs_epoch = 0                   # the epoch of `lrs_version`
        self.lrs_version = 0                 # the version of the newest SC LRS applied in `lrs_epoch`
        self.reported_lrs: list[str] = []    # on the leader: members of every LRS reported on `lrs_version`

    # -- Election hooks ---------------------------------------------------------------------------------

    def on_start(self, now: float) -> None:
        self.status_at = now

    def on_leader_contact(self, now: float, discovered: bool) -> None:
        pass  # followers never elect: losing the leader is the SC's business

    def on_leader_unknown(self, now: float) -> None:
        pass

    def next_deadline(self) -> float | None:
        return self.status_at

    def on_leadership_resumed(self, now: float) -> None:
        """Bug `lsn-reuse`: the restarted leader takes its epoch back without the SC: it commits on every
        follower until the SC's next announcement names it leader (`first_ack`), and steps down if none
        comes within the quorum timeout (`sc_heard_at`)."""
        self.acked_lrs = None
        self.proposed_lrs = [self.host.config.node_id, *self.host.config.peers]
        self.first_ack = True
        self.sc_heard_at = now
        self.lrs_epoch, self.lrs_version, self.reported_lrs = self.host.term, 0, []

    def on_tick(self, now: float) -> None:
        host = self.host
        if self.status_at is None or now < self.status_at:
            return
        self.status_at = now + host.config.heartbeat_interval
        if host.role == LEADER:
            timeout = host.config.effective_quorum_timeout
            if timeout > 0 and self.sc_heard_at is not None and now - self.sc_heard_at >= timeout:
                # the SC has not confirmed us for this long: it has probably elected another leader
                # (whose commits need no word from us), so stop taking writes nobody can commit
                host.transition(now, FOLLOWER, leader=None)
            else:
                self._maintain_lrs(now)
                if not self.commit_set():
                    # the LRS is the leader alone: no follower answers heartbeats, yet only the SC could
                    # make another leader, and it elects among LRS members: confirm pending reads
                    confirm = getattr(host, "_round_confirmed", None)
                    if confirm is not None:
                        confirm(host.round, now)
        if host.role == LEADER:
            # the SC may adopt this report as long as its LRS is still `lrs_version`: count it in commits
            self.reported_lrs = [*self.reported_lrs, *[p for p in self.proposed_lrs if p not in self.reported_lrs]]
        host.send(CONTROLLER_ID, SpuStatus(
            term=host.term, role=host.role, leader=host.leader or "", last_index=host.log.last_index,
            last_lsn=host.log.last_lsn, commit_index=getattr(host, "commit_index", 0),
            lrs=list(self.proposed_lrs) if host.role == LEADER else [],
            lrs_version=self.lrs_version if self.lrs_epoch == host.term else 0))

    def on_message(self, sender: str, message: Message, now: float) -> None:
        if sender != CONTROLLER_ID:
            return  # only the SC elects
        if isinstance(message, LeaderCandidate):
            self._on_candidate(message, now)
        elif isinstance(message, ReplicaSetUpdate):
            self._on_replica_set(message, now)

    def leader_quorum(self) -> int:
        """A leader keeps leading while the SC says so (see `on_tick`): the LRS rule lets it commit with
        fewer than a majority, so a majority's silence is no reason to step down."""
        return 1

    def commit_point(self, stored: list[int]) -> int:
        """HW = min LEO over the LRS (seed 002), the leader's own LEO included."""
        host = self.host
        progress = getattr(host, "progress", {})
        values = [host.log.last_index]
        values.extend(progress[p].match_index for p in self.commit_set() if p in progress)
        return min(values)

    def confirmed_round(self, rounds: list[int]) -> int:
        """The newest heartbeat round every LRS member acknowledged (see the module docstring)."""
        host = self.host
        progress = getattr(host, "progress", {})
        acked = [rounds[0]]
        acked.extend(progress[p].acked_round for p in self.commit_set() if p in progress)
        return min(acked)

    # -- the LRS ----------------------------------------------------------------------------------------

    def commit_set(self) -> list[str]:
        """The followers a record must reach to commit: the acknowledged LRS, the proposed one and those
        reported on the acknowledged version (each is an LRS the SC may hold; see the module docstring)."""
        host = self.host
        if self.acked_lrs is None:
            return list(host.config.peers)
        members = set(self.acked_lrs) | set(self.proposed_lrs) | set(self.reported_lrs)
        return [p for p in host.config.peers if p in members]

    def _maintain_lrs(self, now: float) -> None:
        """Seed 002 "Lagging Follower": drop laggards and silent followers, re-admit the caught up."""
        host = self.host
        progress = getattr(host, "progress", {})
        horizon = now - host.config.election_timeout
        proposed = [host.config.node_id]
        for peer in host.config.peers:
            state = progress.get(peer)
            if state is None:
                continue
            live = state.heard_at >= horizon
            if peer in self.proposed_lrs:
                keep = live and host.log.last_index - state.match_index <= MAX_LAG_RECORDS
            else:
                keep = live and state.match_index >= getattr(host, "commit_index", 0)
            if keep:
                proposed.append(peer)
        self.proposed_lrs = proposed

    # -- SC notifications -------------------------------------------------------------------------------

    def _on_candidate(self, message: LeaderCandidate, now: float) -> None:
        host = self.host
        me = host.config.node_id
        if message.candidate != me or message.term <= host.term:
            return  # not us, or a stale epoch: promotion fails silently (seed 002)
        if host.role == LEADER:
            host.transition(now, FOLLOWER, leader=None)
        host.transition(now, CANDIDATE, leader=None, term=message.term, vote=me)
        members = [p for p in host.config.peers if p in message.lrs]
        self.acked_lrs = [me, *members]
        self.proposed_lrs = [me, *members]
        self.lrs_epoch, self.lrs_version, self.reported_lrs = message.term, message.lrs_version, []
        self.first_ack = True
        self.sc_heard_at = now
        host.transition(now, LEADER, leader=me)
        host.send(CONTROLLER_ID, PromotionSuccessful(term=message.term))

    def _on_replica_set(self, message: ReplicaSetUpdate, now: float) -> None:
        host = self.host
        me = host.config.node_id
        if message.term < host.term:
            return
        if message.term == self.lrs_epoch and message.lrs_version < self.lrs_version:
            return  # the LRS version rule: sent before an LRS of this epoch we already applied
        newer = message.term != self.lrs_epoch or message.lrs_version > self.lrs_version
        self.lrs_epoch, self.lrs_version = message.term, message.lrs_version
        self.lrs = list(message.lrs)
        if message.term > host.term:
            leader = message.leader if message.leader and message.leader != me else None
            host.transition(now, FOLLOWER, leader=leader, term=message.term, vote=None)
            return
        if message.leader == me:
            if host.role == LEADER:
                self.acked_lrs = [me, *[p for p in host.config.peers if p in message.lrs]]
                self.sc_heard_at = now
                if newer:
                    self.reported_lrs = []  # reports on older versions can no longer be adopted
                if self.first_ack:
                    # Online: the SC dropped the SPUs it counts offline; start from its LRS
                    self.first_ack = False
                    self.proposed_lrs = list(self.acked_lrs)
                advance = getattr(host, "_advance_commit", None)
                if advance is not None:
                    advance()  # a shrink the SC acknowledged may commit records at once
        elif message.leader and host.role == FOLLOWER and host.leader is None:
            host.transition(now, FOLLOWER, leader=message.leader)
