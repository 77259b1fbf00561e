"""BlazingMQ's elector (seed 000, with seed 004's reading of the ElectionScouting rule).

* A node starts as FOLLOWER with its persisted selfTerm, waits to discover a leader, then waits a random
  time before proposing.
* ElectionScouting (PreVote) asks with selfTerm + 1 without bumping selfTerm; a peer answers yes only if
  it perceives no leader and its own term is lower than the proposed one.
* ElectionProposal carries ++selfTerm; a peer answers yes iff the proposed term is greater than its own
  (and adopts it), no otherwise. A majority of yes (N/2 + 1, the candidate included) makes a LEADER.
* A node that discovers a leader through its heartbeats sends it an unsolicited ElectionProposalResponse.
* Every message with a higher term is honoured, except ElectionScouting and its response.
* There is no log restriction on who may win, so a new leader synchronises first (`leader_sync`, the
  node's `cluster.core.sync`).

Bug `vote-twice`: a follower answers yes when the proposed term is >= its own, the classic off-by-one,
so it supports every candidate of the term it already voted in.
"""

from __future__ import annotations

from typing import ClassVar

from cluster.core.election.base import FOLLOWER, LEADER, TimedElection
from cluster.core.messages import (
    ElectionProposal,
    ElectionProposalResponse,
    ElectionScouting,
    ElectionScoutingResponse,
    Message,
)


class BlazingMQElection(TimedElection):
    mode: ClassVar[str] = "blazingmq"
    messages: ClassVar[tuple[type[Message], ...]] = (
        ElectionProposal, ElectionProposalResponse, ElectionScouting, ElectionScoutingResponse)
    leader_sync: ClassVar[bool] = True

    def scouting_message(self, term: int) -> Message:
        return ElectionScouting(term=term)

    def proposal_message(self) -> Message:
        return ElectionProposal(term=self.host.term)

    def on_leader_contact(self, now: float, discovered: bool) -> None:
        super().on_leader_contact(now, discovered)
        if discovered:
            # seed 000 "Node Startup Scenario" step 2: let the leader know we support it.
            host = self.host
            host.send(host.leader, ElectionProposalResponse(term=host.term, granted=True, unsolicited=True))

    def on_message(self, sender: str, message: Message, now: float) -> None:
        host = self.host
        if isinstance(message, ElectionProposal):
            proposed = message.term
            # Bug vote-twice: a follower also supports a second candidate of the term it already voted in.
            granted = proposed > host.term or (
                host.config.has_bug("vote-twice") and proposed == host.term and host.role == FOLLOWER
                and host.voted_for != sender)
            if granted:
                host.transition(now, FOLLOWER, leader=None, term=proposed, vote=sender)
                self.after_support_given(now)
            host.journal({"event": "vote", "kind": "proposal", "term": proposed, "candidate": sender,
                          "granted": granted})
            host.send(sender, ElectionProposalResponse(term=host.term, granted=granted))
        elif isinstance(message, ElectionProposalResponse):
            if self.honour_higher_term(message.term, now):
                return
            if message.unsolicited:
                if host.role == LEADER and message.term == host.term:
                    host.note_supporter(sender, now)
                return
            self.count_vote(sender, message.term, message.granted, now)
        elif isinstance(message, ElectionScouting):
            # seed 004: yes only if no leader is perceived and the proposed term beats our own.
            granted = host.leader is None and host.role != LEADER and message.term > host.term
            host.journal({"event": "vote", "kind": "scouting", "term": message.term, "candidate": sender,
                          "granted": granted})
            host.send(sender, ElectionScoutingResponse(term=message.term, granted=granted,
                                                       responder_term=host.term))
        elif isinstance(message, ElectionScoutingResponse):
            self.count_scouting_support(sender, message.term, message.granted, now)
