"""Raft-style election: the Leader and Followers pattern's vote rule (seed 003), with PreVote.

* One vote per term, persisted before it is sent (the node persists before it sends), granted only to a
  candidate whose log is at least as up to date: its last entry's term is higher, or equal with an index at
  least as high (seed 003 `isUptoDate`). So the winner already holds every committed entry and needs no
  synchronisation (`leader_sync` is False): it appends its term's first entry and brings followers up to
  date.
* PreVote (`config.scouting`): a candidate first asks with its term + 1 without bumping it; a peer says
  yes only if it perceives no live leader, its term is lower and the candidate's log is up to date.
* Every message with a higher term is honoured, except PreVote and its response.

Bug `vote-twice`: the votedFor check is skipped, so a node grants its vote to every up-to-date candidate
of the term (a candidate included).
"""

from __future__ import annotations

from typing import ClassVar

from cluster.core.election.base import LEADER, TimedElection
from cluster.core.messages import Message, PreVoteRequest, PreVoteResponse, VoteRequest, VoteResponse


class RaftElection(TimedElection):
    mode: ClassVar[str] = "raft"
    messages: ClassVar[tuple[type[Message], ...]] = (PreVoteRequest, PreVoteResponse, VoteRequest, VoteResponse)
    leader_sync: ClassVar[bool] = False

    def scouting_message(self, term: int) -> Message:
        log = self.host.log
        return PreVoteRequest(term=term, last_index=log.last_index, last_lsn=log.last_lsn)

    def proposal_message(self) -> Message:
        log = self.host.log
        return VoteRequest(term=self.host.term, last_index=log.last_index, last_lsn=log.last_lsn)

    def _up_to_date(self, last_index: int, last_lsn: list[int]) -> bool:
        return (last_lsn[0], last_index) >= self.host.log.up_to_date_key()

    def on_message(self, sender: str, message: Message, now: float) -> None:
        host = self.host
        if isinstance(message, VoteRequest):
            self.honour_higher_term(message.term, now)
            free = host.voted_for is None or host.voted_for == sender or host.config.has_bug("vote-twice")
            granted = (message.term == host.term and host.role != LEADER and free
                       and self._up_to_date(message.last_index, message.last_lsn))
            if granted:
                host.transition(now, host.role, vote=sender)
                if host.voted_for != host.config.node_id:
                    self.after_support_given(now)
            host.journal({"event": "vote", "kind": "vote", "term": message.term, "candidate": sender,
                          "granted": granted})
            host.send(sender, VoteResponse(term=host.term, granted=granted))
        elif isinstance(message, VoteResponse):
            if not self.honour_higher_term(message.term, now):
                self.count_vote(sender, message.term, message.granted, now)
        elif isinstance(message, PreVoteRequest):
            granted = (host.leader is None and host.role != LEADER and message.term > host.term
                       and self._up_to_date(message.last_index, message.last_lsn))
            host.journal({"event": "vote", "kind": "prevote", "term": message.term, "candidate": sender,
                          "granted": granted})
            host.send(sender, PreVoteResponse(term=message.term, granted=granted, responder_term=host.term))
        elif isinstance(message, PreVoteResponse):
            self.count_scouting_support(sender, message.term, message.granted, now)
