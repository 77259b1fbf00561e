"""Peer message types, defined once, named in the seeds' words (STYLE.md 8-9).

Every message is a frozen dataclass whose wire form is a JSON object: its fields plus `"type"` (the class
name) and the sender's `term`. LSNs travel as `[term, seq]`; log entries as the dicts of
`cluster.core.log`. `parse_message` turns a received dict back into a message and rejects anything
malformed with `MessageError`, so a bad peer message can never crash the node.

Which modes use a message is recorded in `mode`; `from_leader` marks messages only a leader sends (a node
that honours their higher term also learns who leads it); `exempt_from_term` marks the ones that do *not*
make the receiver honour a higher term (seed 000: "the rule of honoring a message with higher term still
applies to all other requests/notifications/heartbeats, except for ElectionScouting requests").
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, ClassVar

from cluster.core.statemachine import valid_entry

LSN = list  # [term, seq] on the wire; compared lexicographically
Entries = list  # list of entry dicts (cluster.core.log)
NodeIds = list  # list of node ids (fluvio's Live Replica Set)
Position = typing.NewType("Position", int)  # a log position (index), or -1 where seed 001 uses -1


class MessageError(ValueError):
    """A received peer message is malformed; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class Message:
    """Base of all peer messages: every one carries the sender's term (seed 000 "Introducing Election Term")."""

    term: int

    mode: ClassVar[str] = "shared"
    from_leader: ClassVar[bool] = False
    exempt_from_term: ClassVar[bool] = False
    doc: ClassVar[str] = ""

    def to_wire(self) -> dict[str, Any]:
        wire = {"type": type(self).__name__}
        for name in _FIELD_NAMES[type(self)]:
            wire[name] = getattr(self, name)
        return wire


# --- BlazingMQ elector (seed 000, seed 004) -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ElectionProposal(Message):
    mode: ClassVar[str] = "blazingmq"
    doc: ClassVar[str] = "a candidate proposes itself with proposedTerm == ++selfTerm"


@dataclass(frozen=True, slots=True)
class ElectionProposalResponse(Message):
    granted: bool
    unsolicited: bool = False
    mode: ClassVar[str] = "blazingmq"
    doc: ClassVar[str] = ("yes iff proposedTerm > selfTerm; also sent unsolicited (granted) by a node that "
                          "discovers a leader through its heartbeats")


@dataclass(frozen=True, slots=True)
class ElectionScouting(Message):
    mode: ClassVar[str] = "blazingmq"
    exempt_from_term: ClassVar[bool] = True
    doc: ClassVar[str] = ("PreVote: 'if I proposed term selfTerm + 1, would you support me?'; the sender's "
                          "own term is not bumped and `term` is the proposed one")


@dataclass(frozen=True, slots=True)
class ElectionScoutingResponse(Message):
    granted: bool
    responder_term: int
    mode: ClassVar[str] = "blazingmq"
    exempt_from_term: ClassVar[bool] = True
    doc: ClassVar[str] = ("yes only from a node that perceives no leader and whose own term is lower than "
                          "the proposed one (seed 004); `term` echoes the proposed term")


# --- Raft-style election (seed 003, PreVote from seed 000) ----------------------------------------------


@dataclass(frozen=True, slots=True)
class PreVoteRequest(Message):
    last_index: int
    last_lsn: LSN
    mode: ClassVar[str] = "raft"
    exempt_from_term: ClassVar[bool] = True
    doc: ClassVar[str] = "would you vote for me in term `term` (own term + 1, not bumped) given my log?"


@dataclass(frozen=True, slots=True)
class PreVoteResponse(Message):
    granted: bool
    responder_term: int
    mode: ClassVar[str] = "raft"
    exempt_from_term: ClassVar[bool] = True
    doc: ClassVar[str] = ("yes iff the responder perceives no live leader, its term is lower than the "
                          "proposed one and the candidate's log is at least as up to date")


@dataclass(frozen=True, slots=True)
class VoteRequest(Message):
    last_index: int
    last_lsn: LSN
    mode: ClassVar[str] = "raft"
    doc: ClassVar[str] = "a candidate asks for the one vote of term `term`"


@dataclass(frozen=True, slots=True)
class VoteResponse(Message):
    granted: bool
    mode: ClassVar[str] = "raft"
    doc: ClassVar[str] = ("granted once per term (persisted), only to a candidate whose last entry's term, "
                          "then index, is at least the voter's")


# --- Fluvio replica election (seed 002): between the controller (SC) and the SPUs --------------------


@dataclass(frozen=True, slots=True)
class SpuStatus(Message):
    role: str
    leader: str
    last_index: int
    last_lsn: LSN
    commit_index: int
    lrs: NodeIds
    lrs_version: int = 0
    mode: ClassVar[str] = "fluvio"
    exempt_from_term: ClassVar[bool] = True
    doc: ClassVar[str] = ("an SPU's periodic report to the SC: role, term, leader ('' for none), LEO (last index "
                          "and LSN), HW (commit index) and, from a leader, the Live Replica Set it proposes and "
                          "the version of the newest SC LRS it applied (the SC adopts it only on that version)")


@dataclass(frozen=True, slots=True)
class LeaderCandidate(Message):
    candidate: str
    lrs: NodeIds
    lrs_version: int = 0
    mode: ClassVar[str] = "fluvio"
    exempt_from_term: ClassVar[bool] = True
    doc: ClassVar[str] = ("SC to every SPU: `candidate` should promote itself to leader of election epoch "
                          "`term` (status CandidateFound) with the SC's LRS of version `lrs_version`; the others "
                          "ignore it")


@dataclass(frozen=True, slots=True)
class PromotionSuccessful(Message):
    mode: ClassVar[str] = "fluvio"
    exempt_from_term: ClassVar[bool] = True
    doc: ClassVar[str] = "the candidate SPU to the SC: follower to leader promotion in epoch `term` succeeded"


@dataclass(frozen=True, slots=True)
class ReplicaSetUpdate(Message):
    leader: str
    lrs: NodeIds
    lrs_version: int = 0
    mode: ClassVar[str] = "fluvio"
    exempt_from_term: ClassVar[bool] = True
    doc: ClassVar[str] = ("SC to every SPU: the leader of epoch `term` and the LRS of version `lrs_version` "
                          "(status Online, or an LRS change the leader reported); followers follow that leader; "
                          "an update older than one applied in the epoch is ignored")


# --- Aeron Cluster election (seed 001) -----------------------------------------------------------------
# A position is a log index (position p: the log holds entries 1..p); `term` is the leadership term
# (leadershipTermId; candidateTermId in RequestVote); the member ids of the seed's messages are the sender.
# The mode decides which of them make a receiver take a higher term (cluster.core.election.aeron).


@dataclass(frozen=True, slots=True)
class CanvassPosition(Message):
    log_leadership_term_id: int
    log_position: int
    mode: ClassVar[str] = "aeron"
    exempt_from_term: ClassVar[bool] = True
    doc: ClassVar[str] = ("a member in an election publishes its term and its log's last term and position; "
                          "only a leader answers (NewLeadershipTerm), stepping down if `term` is newer")


@dataclass(frozen=True, slots=True)
class RequestVote(Message):
    log_leadership_term_id: int
    log_position: int
    mode: ClassVar[str] = "aeron"
    doc: ClassVar[str] = "a candidate asks for votes in candidateTermId `term`, giving its log's last term and position"


@dataclass(frozen=True, slots=True)
class Vote(Message):
    candidate_term_id: int
    log_leadership_term_id: int
    log_position: int
    vote: bool
    mode: ClassVar[str] = "aeron"
    doc: ClassVar[str] = ("FOR or AGAINST the ballot of candidate_term_id: FOR once per term (persisted), only if "
                          "the candidate's log (last term, position) is at least the voter's, whose log it carries")


@dataclass(frozen=True, slots=True)
class NewLeadershipTerm(Message):
    log_leadership_term_id: int
    next_leadership_term_id: int
    next_term_base_log_position: int
    next_log_position: Position
    term_base_log_position: int
    log_position: int
    mode: ClassVar[str] = "aeron"
    from_leader: ClassVar[bool] = True
    doc: ClassVar[str] = ("the leader of `term` to a member whose log ends in log_leadership_term_id: the next term "
                          "in the leader's log after it, where that starts and ends (-1: it is the current term), "
                          "the current term's base position and the leader's log position")


@dataclass(frozen=True, slots=True)
class AppendPosition(Message):
    log_position: int
    flags: int
    mode: ClassVar[str] = "aeron"
    doc: ClassVar[str] = ("a follower's log position in `term`; flags 1: in catchup (seed), 2: joined the live "
                          "Log, stream AppendEntries to it from there")


@dataclass(frozen=True, slots=True)
class CommitPosition(Message):
    log_position: int
    mode: ClassVar[str] = "aeron"
    from_leader: ClassVar[bool] = True
    doc: ClassVar[str] = "the leader's commit position, published periodically for its whole term"


@dataclass(frozen=True, slots=True)
class CatchupPosition(Message):
    log_position: int
    mode: ClassVar[str] = "aeron"
    doc: ClassVar[str] = ("a follower behind in the current term asks the leader to replay its log after "
                          "log_position into its catchup")


@dataclass(frozen=True, slots=True)
class StopCatchup(Message):
    mode: ClassVar[str] = "aeron"
    from_leader: ClassVar[bool] = True
    doc: ClassVar[str] = "the follower's AppendPosition reached the leader's log end: leave catchup, join the live Log"


@dataclass(frozen=True, slots=True)
class ReplayRequest(Message):
    position: int
    length: int
    mode: ClassVar[str] = "aeron"
    doc: ClassVar[str] = ("archive replication of an old term: a follower asks the leader's archive for `length` "
                          "entries after `position`")


@dataclass(frozen=True, slots=True)
class ReplayData(Message):
    position: int
    prev_lsn: LSN
    entries: Entries
    mode: ClassVar[str] = "aeron"
    from_leader: ClassVar[bool] = True
    doc: ClassVar[str] = ("the leader's archive replays entries after `position`; the follower appends them only if "
                          "it holds prev_lsn at `position`")


@dataclass(frozen=True, slots=True)
class CatchupData(Message):
    position: int
    prev_lsn: LSN
    entries: Entries
    mode: ClassVar[str] = "aeron"
    from_leader: ClassVar[bool] = True
    doc: ClassVar[str] = "the leader's catchup replay of its log after `position` (checked against prev_lsn likewise)"


# --- Leadership and replication, shared by every mode ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaderHeartbeat(Message):
    commit_index: int
    commit_lsn: LSN
    round: int
    from_leader: ClassVar[bool] = True
    doc: ClassVar[str] = ("periodic proof of leadership carrying the leader's term and commit point; "
                          "`round` numbers heartbeat rounds for read-index confirmation")


@dataclass(frozen=True, slots=True)
class LeaderHeartbeatResponse(Message):
    round: int
    last_index: int
    last_lsn: LSN
    doc: ClassVar[str] = "a follower of the same term acknowledges a heartbeat round and reports its log end"


@dataclass(frozen=True, slots=True)
class InvalidHeartbeat(Message):
    doc: ClassVar[str] = "answer to a heartbeat from a stale term; carries the responder's newer term (seed 000)"


@dataclass(frozen=True, slots=True)
class AppendEntries(Message):
    prev_index: int
    prev_lsn: LSN
    entries: Entries
    commit_index: int
    from_leader: ClassVar[bool] = True
    doc: ClassVar[str] = ("entries following (prev_index, prev_lsn) in the leader's log, batched; the "
                          "follower truncates a divergent suffix")


@dataclass(frozen=True, slots=True)
class AppendEntriesResponse(Message):
    success: bool
    match_index: int
    hint_index: int
    doc: ClassVar[str] = ("success: the follower's log matches the leader's up to match_index; failure: "
                          "retry from hint_index")


@dataclass(frozen=True, slots=True)
class FollowerLSNRequest(Message):
    sync_id: int
    from_leader: ClassVar[bool] = True
    doc: ClassVar[str] = "a new leader asks for each follower's last LSN before serving (leader sync, step 1)"


@dataclass(frozen=True, slots=True)
class FollowerLSNResponse(Message):
    sync_id: int
    last_index: int
    last_lsn: LSN
    commit_index: int
    doc: ClassVar[str] = "a follower's log end (index and LSN) and commit point"


@dataclass(frozen=True, slots=True)
class LeaderSyncDataQuery(Message):
    sync_id: int
    from_index: int
    max_entries: int
    from_leader: ClassVar[bool] = True
    doc: ClassVar[str] = ("the new leader fetches entries from the most up-to-date follower of a majority "
                          "(leader sync, step 2)")


@dataclass(frozen=True, slots=True)
class LeaderSyncDataResponse(Message):
    sync_id: int
    from_index: int
    prev_lsn: LSN
    entries: Entries
    last_index: int
    doc: ClassVar[str] = "a chunk of the follower's log from from_index; last_index is its log end"


@dataclass(frozen=True, slots=True)
class ReadIndexRequest(Message):
    read_id: int
    doc: ClassVar[str] = ("a node serving a local (follower) read asks the leader it knows for a read index "
                          "(Raft thesis 6.4); `read_id` is the asker's, echoed back")


@dataclass(frozen=True, slots=True)
class ReadIndexResponse(Message):
    read_id: int
    granted: bool
    read_index: int
    read_lsn: LSN
    doc: ClassVar[str] = ("granted: the sender led term `term` and confirmed it with a heartbeat round sent after "
                          "the request arrived; its commit index was then `read_index` (LSN `read_lsn`). "
                          "Refused: the sender does not lead")


MESSAGE_TYPES: dict[str, type[Message]] = {
    cls.__name__: cls
    for cls in (
        ElectionProposal, ElectionProposalResponse, ElectionScouting, ElectionScoutingResponse,
        PreVoteRequest, PreVoteResponse, VoteRequest, VoteResponse,
        LeaderHeartbeat, LeaderHeartbeatResponse, InvalidHeartbeat, AppendEntries, AppendEntriesResponse,
        FollowerLSNRequest, FollowerLSNResponse, LeaderSyncDataQuery, LeaderSyncDataResponse,
        ReadIndexRequest, ReadIndexResponse,
        SpuStatus, LeaderCandidate, PromotionSuccessful, ReplicaSetUpdate,
        CanvassPosition, RequestVote, Vote, NewLeadershipTerm, AppendPosition, CommitPosition, CatchupPosition,
        StopCatchup, ReplayRequest, ReplayData, CatchupData,
    )
}


# --- Parsing --------------------------------------------------------------------------------------------


def _check_int(value: Any) -> bool:
    return type(value) is int and value >= 0


def _check_bool(value: Any) -> bool:
    return type(value) is bool


def _check_lsn(value: Any) -> bool:
    return type(value) is list and len(value) == 2 and _check_int(value[0]) and _check_int(value[1])


def _check_entries(value: Any) -> bool:
    if type(value) is not list:
        return False
    for entry in value:
        if type(entry) is not dict or not _check_lsn(entry.get("lsn")) or not valid_entry(entry):
            return False
    return True


def _check_str(value: Any) -> bool:
    return type(value) is str and len(value) <= 256


def _check_node_ids(value: Any) -> bool:
    return type(value) is list and len(value) <= 1024 and all(_check_str(v) and v for v in value)


def _check_position(value: Any) -> bool:
    return type(value) is int and value >= -1


_CHECKS = {int: _check_int, bool: _check_bool, LSN: _check_lsn, str: _check_str, Position: _check_position}
_FIELD_NAMES: dict[type[Message], tuple[str, ...]] = {}
_FIELD_CHECKS: dict[type[Message], tuple[tuple[str, Any, bool], ...]] = {}

for _cls in MESSAGE_TYPES.values():
    _hints = typing.get_type_hints(_cls)
    _names = tuple(f.name for f in dataclasses.fields(_cls))
    _FIELD_NAMES[_cls] = _names
    _checks = []
    for _f in dataclasses.fields(_cls):
        # Entries and LSN are both `list`; the field name says which one is meant.
        _check = (_check_entries if _f.name == "entries" else _check_node_ids if _f.name == "lrs"
                  else _CHECKS[_hints[_f.name]])
        _required = _f.default is dataclasses.MISSING
        _checks.append((_f.name, _check, _required))
    _FIELD_CHECKS[_cls] = tuple(_checks)


def parse_message(wire: Any) -> Message:
    """Validate a received dict and build its message; raise MessageError saying what is wrong."""
    if type(wire) is not dict:
        raise MessageError(f"a peer message must be a JSON object, got {type(wire).__name__}")
    cls = MESSAGE_TYPES.get(wire.get("type"))  # type: ignore[arg-type]
    if cls is None:
        raise MessageError(f"unknown message type {wire.get('type')!r}")
    kwargs = {}
    for name, check, required in _FIELD_CHECKS[cls]:
        if name not in wire:
            if required:
                raise MessageError(f"{cls.__name__} lacks field {name!r}")
            continue
        value = wire[name]
        if not check(value):
            raise MessageError(f"{cls.__name__}.{name} has a bad value {value!r:.80}")
        kwargs[name] = value
    return cls(**kwargs)
