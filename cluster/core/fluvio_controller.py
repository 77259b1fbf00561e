"""The Fluvio controller (the SC of seed 002): monitors the SPUs and elects the replica set's leader.

A sans-IO state machine driven like `cluster.core.member.Node` (same `start`/`tick`/`receive`/`request`
calls, same `Ready`), so the asyncio runtime and the test networks run it as one more process of the
cluster (`python3 -m cluster.node --id sc --mode fluvio --controller --peers n1=...,n2=...,n3=...`).
The SPUs are nodes of mode `fluvio` (`cluster.core.election.fluvio`).

Replica set status, seed 002 "Replica Election Algorithm":

* **Election** (an SPU went offline, or an Offline set may now find a leader): choose the leader
  candidate among the live LRS members by smallest lag (highest LEO: last entry's term, then index),
  not yet tried in this election.
* **CandidateFound**: the election epoch is bumped and persisted, LeaderCandidate(epoch, candidate) goes
  to every SPU and the wait-for-response timer (`wait_for_response`) starts. PromotionSuccessful from the
  candidate makes the set **Online**; the timer firing tries the next candidate.
* **Online**: the LRS is the previous one without the SPUs the SC has seen go offline, plus the leader;
  ReplicaSetUpdate(epoch, leader, lrs) goes to every SPU, and again every heartbeat interval so that
  an SPU that missed it (or restarted) catches up. An LRS change the leader reports in its SpuStatus is
  persisted and announced the same way (that announcement is the leader's acknowledgement).
* **LRS version**: every LRS the SC makes (Online) or adopts gets a new `lrs_version`, persisted with
  it and carried by LeaderCandidate and ReplicaSetUpdate; the leader's SpuStatus echoes the version of
  the newest SC LRS it applied, and the SC adopts a reported LRS only when it is based on the SC's current
  version: a report delayed past an LRS change is stale and ignored (docs/election-fluvio.md).
* **Offline**: no eligible candidate; re-examined whenever an SPU reports and on every tick, so that
  "SPU comes back Online" starts a new election: as soon as a live, reporting LRS member exists, whether
  or not it was tried in the election that ended Offline (a paused candidate resumes, a lost
  LeaderCandidate is sent again in the new epoch).

An SPU is live while its SpuStatus reports keep arriving (at most an election timeout apart); the
leader is also counted gone when it reports that it no longer leads the current epoch.

The SC journals its decisions as `decision` events (`status`, `epoch`, `leader`, `candidate`, `lrs`,
`reason`): the leadership records of the mode. It journals no `role` event: the SPUs journal theirs,
with term = the epoch. Its storage records are `controller` records (`controller_record`).

Known bug `promote-outside-lrs`: candidates are taken among every live SPU instead of the LRS members.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cluster.core.bugs import validate_bugs
from cluster.core.election.fluvio import CONTROLLER_ID
from cluster.core.errors import error_reply
from cluster.core.member import Ready
from cluster.core.messages import (
    LeaderCandidate,
    MessageError,
    PromotionSuccessful,
    ReplicaSetUpdate,
    SpuStatus,
    parse_message,
)

ELECTION = "Election"
CANDIDATE_FOUND = "CandidateFound"
ONLINE = "Online"
OFFLINE = "Offline"
#: replica set statuses, seed 002's names
STATUSES = (ELECTION, CANDIDATE_FOUND, ONLINE, OFFLINE)


@dataclass(frozen=True)
class ControllerConfig:
    """The SC's settings; validated once with one-line errors."""

    spus: tuple[str, ...]
    controller_id: str = CONTROLLER_ID
    bugs: frozenset[str] = field(default_factory=frozenset)
    heartbeat_interval: float = 0.15
    missed_heartbeats: int = 3
    wait_for_response: float = 0.5
    startup_wait: float | None = None

    def __post_init__(self) -> None:
        if not self.spus or any(not isinstance(s, str) or not s for s in self.spus):
            raise ValueError(f"the controller needs the SPU ids (--peers), got {self.spus!r}")
        if len(set(self.spus)) != len(self.spus) or self.controller_id in self.spus:
            raise ValueError(f"SPU ids must be distinct and not the controller's id: {', '.join(self.spus)}")
        object.__setattr__(self, "bugs", validate_bugs(sorted(self.bugs), "fluvio"))
        for name in ("heartbeat_interval", "wait_for_response"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if self.missed_heartbeats < 1:
            raise ValueError(f"missed_heartbeats must be >= 1, got {self.missed_heartbeats!r}")

    @property
    def offline_after(self) -> float:
        """An SPU silent this long is offline."""
        return self.missed_heartbeats * self.heartbeat_interval

    @property
    def effective_startup_wait(self) -> float:
        """How long a starting SC collects SpuStatus reports before its first election."""
        return self.offline_after if self.startup_wait is None else self.startup_wait


@dataclass
class ControllerState:
    """What the SC persists: the election epoch, status, leader and Live Replica Set with its version."""

    epoch: int = 0
    status: str = OFFLINE
    leader: str | None = None
    lrs: list[str] = field(default_factory=list)
    #: bumped on every LRS the SC makes or adopts, never reused (not even across epochs)
    lrs_version: int = 0


def controller_record(state: ControllerState) -> dict[str, Any]:
    """{t: controller, epoch, status, leader, lrs, lrs_version}: the SC's state, the newest record wins."""
    return {"t": "controller", "epoch": state.epoch, "status": state.status, "leader": state.leader,
            "lrs": list(state.lrs), "lrs_version": state.lrs_version}


def recover_controller(records: Iterable[dict[str, Any]], spus: Iterable[str]) -> ControllerState:
    """The SC's state from its storage records; a new SC starts Offline with every SPU in the LRS
    (empty logs are all equal). Raises ValueError on a record that is not the controller's."""
    state = ControllerState(lrs=list(spus))
    for record in records:
        if not isinstance(record, dict) or record.get("t") != "controller":
            raise ValueError(f"not a controller storage record: {record!r:.80}; is this an SPU's data dir?")
        state = ControllerState(epoch=int(record["epoch"]), status=str(record["status"]),
                                leader=record.get("leader"), lrs=list(record["lrs"]),
                                lrs_version=int(record.get("lrs_version", 0)))
    return state


class Controller:
    """The SC state machine; see the module docstring. Driven like `Node`."""

    def __init__(self, config: ControllerConfig, state: ControllerState, now: float, wall: float,
                 rng: random.Random) -> None:
        self.config = config
        self.id = config.controller_id
        self.rng = rng  # unused: the SC's decisions are deterministic; kept for the driver's signature
        self.state = state
        self.bug_outside_lrs = "promote-outside-lrs" in config.bugs
        self.reports: dict[str, SpuStatus] = {}
        self.heard: dict[str, float] = {}
        self.candidate: str | None = None
        self.tried: list[str] = []
        self.response_deadline: float | None = None
        self.announce_at = now
        self.started_at = now
        self.rejected_messages = 0
        self._ready = Ready()

    # the Node-like attributes drivers and status readers look at
    @property
    def role(self) -> str:
        return "controller"

    @property
    def term(self) -> int:
        return self.state.epoch

    @property
    def leader(self) -> str | None:
        return self.state.leader if self.state.status == ONLINE else None

    # ------------------------------------------------------------------ driver API

    def start(self, now: float, wall: float) -> Ready:
        self._ready = Ready()
        self.started_at = now
        self._journal({"event": "start", "mode": "fluvio", "role": "controller", "term": self.state.epoch,
                       "status": self.state.status, "leader": self.state.leader, "lrs": self.state.lrs,
                       "bugs": sorted(self.config.bugs)})
        if self.state.status in (ELECTION, CANDIDATE_FOUND):
            self.state.status = OFFLINE  # an election cut short by a restart is re-run from Offline
        return self._finish(now)

    def tick(self, now: float, wall: float) -> Ready:
        self._ready = Ready()
        self._examine(now)
        if now >= self.announce_at:
            self.announce_at = now + self.config.heartbeat_interval
            if self.state.status == ONLINE:
                self._announce()
        return self._finish(now)

    def receive(self, sender: str, message: Any, now: float, wall: float) -> Ready:
        self._ready = Ready()
        if sender not in self.config.spus:
            self.rejected_messages += 1
            return self._finish(now)
        try:
            parsed = parse_message(message)
        except MessageError:
            self.rejected_messages += 1
            return self._finish(now)
        if isinstance(parsed, SpuStatus):
            self._on_status(sender, parsed, now)
        elif isinstance(parsed, PromotionSuccessful):
            self._on_promoted(sender, parsed, now)
        else:
            self.rejected_messages += 1  # SPU-to-SPU replication is none of the SC's business
        return self._finish(now)

    def request(self, client: Hashable, request: Any, now: float, wall: float) -> Ready:
        """Only `status` is answered; anything else is redirected to the leader (`not-leader`)."""
        self._ready = Ready()
        request_id = request.get("id") if isinstance(request, dict) else None
        if isinstance(request, dict) and request.get("op") == "status":
            self._ready.replies.append((client, {"id": request_id, "ok": True, "value": self.status()}))
        else:
            self._ready.replies.append((client, error_reply(
                request_id, "not-leader", "this is the fluvio controller (SC); it serves no data",
                leader=self.leader)))
        return self._finish(now)

    def status(self) -> dict[str, Any]:
        return {"node": self.id, "role": "controller", "term": self.state.epoch, "leader": self.leader,
                "mode": "fluvio", "status": self.state.status, "lrs": list(self.state.lrs),
                "lrs_version": self.state.lrs_version, "candidate": self.candidate,
                "leo": {spu: report.last_index for spu, report in sorted(self.reports.items())}}

    # ------------------------------------------------------------------ the election

    def live(self, spu: str, now: float) -> bool:
        heard = self.heard.get(spu)
        return heard is not None and now - heard < self.config.offline_after

    def _examine(self, now: float) -> None:
        if now < self.started_at + self.config.effective_startup_wait:
            return  # collect reports first
        status = self.state.status
        if status == CANDIDATE_FOUND:
            if self.response_deadline is not None and now >= self.response_deadline:
                self._next_candidate(now, f"no PromotionSuccessful from {self.candidate}")
        elif status == ONLINE:
            leader = self.state.leader
            report = self.reports.get(leader) if leader else None
            if leader is None or not self.live(leader, now):
                self._begin_election(now, f"leader {leader} offline")
            elif report is not None and report.term == self.state.epoch and report.role != "leader":
                self._begin_election(now, f"leader {leader} no longer leads epoch {self.state.epoch}")
        elif status == OFFLINE and self._eligible(now, untried_only=False):
            # seed 002 "SPU comes back Online": an Offline set re-runs the election as soon as an eligible
            # SPU is live; `tried` only orders the candidates of one election, so an SPU that failed to
            # promote in the last one (paused, or its notification lost) is eligible again
            self._begin_election(now, "an eligible SPU is online")

    def _eligible(self, now: float, *, untried_only: bool = True) -> list[str]:
        """The leader candidates: live, reporting LRS members (every SPU under `promote-outside-lrs`),
        without those already tried in this election unless `untried_only` is False."""
        pool = self.config.spus if self.bug_outside_lrs else [s for s in self.config.spus if s in self.state.lrs]
        return [s for s in pool if self.live(s, now) and s in self.reports
                and not (untried_only and s in self.tried)]

    def _begin_election(self, now: float, reason: str) -> None:
        self.state.status = ELECTION
        self.tried = []
        self._decision(now, reason)
        self._next_candidate(now, reason)

    def _next_candidate(self, now: float, reason: str) -> None:
        eligible = self._eligible(now)
        if not eligible:
            self.state.status = OFFLINE
            self.state.leader = None
            self.candidate = None
            self.response_deadline = None
            self._persist()
            self._decision(now, f"{reason}; no eligible leader candidate")
            return
        # smallest lag behind the previous leader: the highest LEO (last entry's term, then index);
        # ties go to the first in the SPU list
        best = max(eligible, key=lambda s: (self.reports[s].last_lsn[0], self.reports[s].last_index,
                                            -self.config.spus.index(s)))
        self.tried.append(best)
        self.state.epoch += 1
        self.state.status = CANDIDATE_FOUND
        self.state.leader = None
        self.candidate = best
        self.response_deadline = now + self.config.wait_for_response
        self._persist()
        self._decision(now, reason)
        wire = LeaderCandidate(term=self.state.epoch, candidate=best, lrs=list(self.state.lrs),
                               lrs_version=self.state.lrs_version).to_wire()
        for spu in self.config.spus:
            self._ready.messages.append((spu, wire))

    def _on_promoted(self, sender: str, message: PromotionSuccessful, now: float) -> None:
        self.heard[sender] = now
        state = self.state
        if state.status != CANDIDATE_FOUND or sender != self.candidate or message.term != state.epoch:
            return
        state.status = ONLINE
        state.leader = sender
        # SPUs seen going offline leave the LRS; one never heard from since the SC started may just be
        # starting: it stays, and the new leader removes it if it stays silent
        state.lrs = [s for s in self.config.spus
                     if s == sender or (s in state.lrs and (self.live(s, now) or s not in self.heard))]
        # the Online LRS is a new version even when unchanged: reports the leader based on the
        # LeaderCandidate are stale, the leader starts over from this announcement (`first_ack`)
        state.lrs_version += 1
        self.candidate = None
        self.response_deadline = None
        self._persist()
        self._decision(now, f"{sender} promoted")
        self._announce()

    def _on_status(self, sender: str, message: SpuStatus, now: float) -> None:
        self.heard[sender] = now
        self.reports[sender] = message
        state = self.state
        if message.term > state.epoch or message.lrs_version > state.lrs_version:
            # only after the SC lost its state (fsync "never"): never reuse an epoch or an LRS version an SPU
            # has seen (a version it has seen is moved past, so that no report matches it)
            state.epoch = max(state.epoch, message.term)
            if message.lrs_version > state.lrs_version:
                state.lrs_version = message.lrs_version + 1
            self._persist()
        # the LRS version rule: a report based on an older LRS than the SC's current one is stale (it was
        # sent before the leader applied the SC's last change, and may undo it): never adopted
        if (state.status == ONLINE and sender == state.leader and message.term == state.epoch
                and message.role == "leader" and message.lrs and sender in message.lrs
                and message.lrs_version == state.lrs_version):
            lrs = [s for s in self.config.spus if s in message.lrs]
            if lrs != state.lrs:
                state.lrs = lrs
                state.lrs_version += 1
                self._persist()
                self._decision(now, f"leader {sender} reported a new LRS")
                self._announce()
        self._examine(now)

    # ------------------------------------------------------------------ plumbing

    def _announce(self) -> None:
        state = self.state
        wire = ReplicaSetUpdate(term=state.epoch, leader=state.leader or "", lrs=list(state.lrs),
                                lrs_version=state.lrs_version).to_wire()
        for spu in self.config.spus:
            self._ready.messages.append((spu, wire))

    def _persist(self) -> None:
        self._ready.persist.append(controller_record(self.state))

    def _decision(self, now: float, reason: str) -> None:
        state = self.state
        self._journal({"event": "decision", "status": state.status, "epoch": state.epoch,
                       "leader": state.leader, "candidate": self.candidate, "lrs": list(state.lrs),
                       "reason": reason})

    def _journal(self, event: dict) -> None:
        self._ready.journal.append(event)

    def _finish(self, now: float) -> Ready:
        deadlines = [self.announce_at, self.started_at + self.config.effective_startup_wait]
        if self.response_deadline is not None:
            deadlines.append(self.response_deadline)
        # liveness is judged on ticks: come back when the leader would count as offline
        if self.state.status == ONLINE and self.state.leader in self.heard:
            deadlines.append(self.heard[self.state.leader] + self.config.offline_after)
        future = [d for d in deadlines if d > now]
        self._ready.next_tick = min(future) if future else now + self.config.heartbeat_interval
        return self._ready

