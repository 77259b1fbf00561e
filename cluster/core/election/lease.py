"""Leader election through an external linearizable store: a lease record taken by compare-and-set (seed 003).

Seed 003 "Leader Election using External [Linearizable] Store" needs three things from the store: a
compareAndSwap on a key, a heartbeat that lets the key expire when the leader stops renewing it, and a
notification when it expires. Our store is our own `cluster` running in `raft` mode as a separate group (so
nothing outside the project is needed); the data nodes are its *clients*, and the store is unchanged:

* **The key** (`config.lease_key`) holds a lease record `{"holder": id, "generation": g, "renewal": n}`.
  Every change of it is a `cas` of the store, so the store's linearizability decides every race.
* **Acquire** (the seed's "whichever server succeeds first is elected"): `cas(observed -> {holder: me,
  generation: max(g, my term) + 1, renewal: 0})`. The generation is the key's version, bumped only by
  an acquisition: the generation clock. It becomes the winner's term, so it is the *fencing token* that
  every AppendEntries and LSN of that leader carries; followers refuse a lower term (`Node._on_append`).
* **Heartbeat** (the seed's "the elected leader repeatedly updates the key"): every `ttl / 4` the leader
  renews with `cas(record -> record with renewal + 1)`.
* **Expiry and watch** (the seed's time to live and notification): the store has no TTL of its own, so
  expiry is judged by the watchers, the way Kubernetes' Lease objects work. Every non-leader reads the key
  every `ttl / 4` (the watch is a poll) and remembers when it first saw the current value. A value seen
  unchanged for `ttl` of the watcher's own monotonic time has expired: the watcher tries to acquire it.
  An empty key is acquired at once. A node never resumes a generation it held: seeing itself as the
  holder while not leading, it acquires the next generation (no LSN is ever issued twice), and only after
  `2 * ttl` unchanged, so that a leader that stepped down (e.g. without a quorum of data nodes) leaves
  the key to the others first.
* **The leader's lease.** A renewal (or acquisition) sent at monotonic time `t` was stored no earlier
  than `t`, so no watcher can see it expire before `t + ttl`. The leader therefore leads until
  `t + ttl * (1 - LEASE_GUARD)` after its last successful renewal (the guard covers clock *rate* drift;
  no absolute clock is compared across hosts) and steps down then if no renewal succeeded. While its
  lease holds it serves reads locally (`lease_read_allowed`): no other leader can exist before it ends.

Store calls are sans-IO like everything else: the mode asks the node to send a client request to one
store member (`host.store_request(member, request)`, collected in `Ready.requests`), and the driver feeds
the reply back with `Node.store_reply(member, reply, now, wall)`. One call is outstanding at a time; a
call without a reply within `ttl / 4` is abandoned (indefinite: it may still take effect, which every
rule above tolerates because the next step re-reads or compares). `not-leader` replies are followed to
the store leader they name.

Since any node may win, a new leader synchronises with a majority before it serves (`leader_sync`).

Known bugs of this mode (`cluster.core.bugs`):

* `lease-own-clock`: the leader times its lease with its own *wall* clock (lease end = wall time of the
  renewal + ttl), so when that clock is moved back it keeps leading and serving lease reads after the
  store handed the key to another node: stale reads, caught by the linearizability checker.
* `lsn-reuse` (the node's "fast restart", `Node.resume_leadership`): a restarted node that finds the key
  still naming it with the generation it led renews that generation instead of acquiring the next one,
  and leads it again with its sequence counter back at 1: the LSNs of that term are issued twice.
* `no-fencing-token` (followers' side, in the node): replicated writes are accepted without checking the
  leader's fencing token, so a deposed leader's delayed AppendEntries overwrite the new leader's
  committed entries: caught by committed-data durability.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from cluster.core.election.base import CANDIDATE, FOLLOWER, KEEP, LEADER, Election, ElectionHost
from cluster.core.messages import Message

#: the leader's lease ends this fraction of the ttl before a watcher could take the key over.
LEASE_GUARD = 0.2
#: renewals, polls and call timeouts happen every ttl / this.
RENEWALS_PER_TTL = 4
#: retry pause when no store member is known to lead, as a fraction of the ttl.
STORE_RETRY = 0.1


def lease_record(holder: str, generation: int, renewal: int = 0) -> dict[str, Any]:
    """The value the key holds: who leads, in which generation (its term), renewed how many times."""
    return {"holder": holder, "generation": generation, "renewal": renewal}


def parse_record(value: Any) -> tuple[str | None, int]:
    """(holder, generation) of a key's value; (None, 0) for an empty or unrecognised value."""
    if (isinstance(value, dict) and isinstance(value.get("holder"), str)
            and isinstance(value.get("generation"), int) and not isinstance(value.get("generation"), bool)
            and isinstance(value.get("renewal"), int)):
        return value["holder"], value["generation"]
    return None, 0


@dataclass
class StoreCall:
    """The one outstanding request to the store: what it is for and when it was sent."""

    kind: str  # "read", "acquire", "renew" or (bug lsn-reuse) "resume"
    request_id: int
    sent_at: float
    sent_wall: float
    deadline: float
    expected: Any = None
    new: Any = None


class LeaseElection(Election):
    mode: ClassVar[str] = "lease"
    messages: ClassVar[tuple[type[Message], ...]] = ()
    leader_sync: ClassVar[bool] = True
    resumes_at_start: ClassVar[bool] = False  # bug lsn-reuse: only once the store says the key is still ours

    def __init__(self, host: ElectionHost) -> None:
        super().__init__(host)
        config = host.config
        self.ttl = config.lease_ttl
        self.interval = self.ttl / RENEWALS_PER_TTL
        self.store = config.store
        self.key = config.lease_key
        self.bug_own_clock = config.has_bug("lease-own-clock")
        self.target = 0  # index in `store` of the member we believe leads the store
        self.call: StoreCall | None = None
        self.request_ids = 0
        self.observed: Any = None
        self.observed_at: float | None = None  # when `observed` was first seen; None: nothing read yet
        self.poll_at: float | None = None
        self.renew_at: float | None = None
        self.record: dict[str, Any] | None = None  # the record this node holds while leading
        self.lease_until = float("-inf")  # monotonic
        self.lease_until_wall = float("-inf")  # bug `lease-own-clock` only

    # ------------------------------------------------------------------ Election hooks

    def on_start(self, now: float) -> None:
        self._send("read", now)  # seed 003: "Every server at startup looks for an existing leader"

    def on_leader_contact(self, now: float, discovered: bool) -> None:
        """Leadership is decided by the store alone; the leader's messages only name it."""

    def on_leader_unknown(self, now: float) -> None:
        self._lose_lease()
        self.poll_at = now

    def next_deadline(self) -> float | None:
        waiting = self.renew_at if self.host.role == LEADER else self.poll_at
        found = [t for t in (self.call.deadline if self.call is not None else waiting,
                             self.lease_until if self.host.role == LEADER and not self.bug_own_clock else None)
                 if t is not None]
        return min(found) if found else None

    def on_message(self, sender: str, message: Message, now: float) -> None:
        """The mode has no peer messages of its own."""

    def on_tick(self, now: float) -> None:
        host = self.host
        if self.call is not None and now >= self.call.deadline:
            # No answer: the call may or may not take effect; try another member, re-read before acting.
            self.call = None
            self.target = (self.target + 1) % len(self.store)
            if host.role != LEADER:
                self.poll_at = now
        if host.role == LEADER:
            if self._lease_expired(now):
                self._step_down(now, leader=None)
            elif self.call is None and self.renew_at is not None and now >= self.renew_at:
                self._renew(now)
        elif self.call is None and self.poll_at is not None and now >= self.poll_at:
            self.poll_at = None
            self._send("read", now)

    def lease_read_allowed(self, now: float, wall: float) -> bool:
        """Whether the leader may answer a read locally: its lease still holds (bug: by its wall clock)."""
        if self.host.role != LEADER:
            return False
        if self.bug_own_clock:
            return wall < self.lease_until_wall
        return now < self.lease_until

    def on_store_reply(self, member: str, reply: Any, now: float) -> None:
        """The store answered one of our requests (anything else, e.g. a stale reply, is ignored)."""
        call = self.call
        if call is None or not isinstance(reply, dict) or reply.get("id") != call.request_id:
            return
        self.call = None
        host = self.host
        if not reply.get("ok"):
            error = reply.get("error")
            if error == "cas-mismatch":
                self.poll_at = now  # someone else changed the key (or our own lost call did): re-read
                if host.role == LEADER:
                    self._send("read", now)
                return
            hint = reply.get("leader")
            if error == "not-leader" and hint in self.store and hint != self.store[self.target]:
                self.target = self.store.index(hint)
                self._resend(call, now)
                return
            self.target = (self.target + 1) % len(self.store)
            if reply.get("definite") and error in ("not-leader", "unavailable"):
                retry = now + self.ttl * STORE_RETRY
            else:
                retry = now  # indefinite: it may have taken effect; re-read first
            if host.role == LEADER:
                self.renew_at = retry
            else:
                self.poll_at = retry
            return
        if call.kind == "read":
            self._observe(reply.get("value"), now)
        elif call.kind == "acquire":
            self._acquired(call, now)
        elif call.kind == "renew" and host.role == LEADER:
            self.record = call.new
            self._extend(call)
            self.renew_at = call.sent_at + self.interval
        elif call.kind == "resume":
            self._resumed(call, now)

    # ------------------------------------------------------------------ watching the key

    def _observe(self, value: Any, now: float) -> None:
        host = self.host
        me = host.config.node_id
        holder, generation = parse_record(value)
        if host.role == LEADER:
            # Read after a failed renewal: still ours (a lost renewal of ours committed) or taken over.
            if holder == me and generation == host.term:
                self.record = value
                self.renew_at = now
            else:
                self._step_down(now, leader=holder if generation > host.term else None,
                                term=generation if generation > host.term else None)
            return
        if value != self.observed or self.observed_at is None:
            self.observed, self.observed_at = value, now
        if holder == me and generation == host.term and host.resumable_term == host.term:
            # Bug lsn-reuse: "the key is still ours": renew our generation instead of acquiring the next
            # one, and lead it again with the sequence counter back at 1 (`_resumed`).
            self._send("resume", now, expected=value, new=dict(value, renewal=value["renewal"] + 1))
            return
        if holder is not None and holder != me and generation > host.term:
            # The store names a newer leader: follow it (its heartbeats would tell us the same).
            host.transition(now, FOLLOWER, leader=holder, term=generation, vote=None)
        # Our own record (we stepped down, restarted, or lost the answer to our acquisition) is left to the
        # others for one more ttl: a node that had to step down (no quorum) must not grab it back at once.
        patience = 2 * self.ttl if holder == me else self.ttl
        if holder is None or now - self.observed_at >= patience:
            self._acquire(value, generation, now)
        else:
            self.poll_at = now + self.interval

    def _acquire(self, observed: Any, generation: int, now: float) -> None:
        host = self.host
        new = lease_record(host.config.node_id, max(generation, host.term) + 1)
        self._send("acquire", now, expected=observed, new=new)

    def _resumed(self, call: StoreCall, now: float) -> None:
        """Bug lsn-reuse: the renewal of the generation we held before the restart succeeded."""
        host = self.host
        self._extend(call)
        if self._lease_expired(now) or host.role != FOLLOWER or host.term != call.new["generation"]:
            self._lose_lease()
            self.poll_at = now
            return
        self.record = call.new
        host.resume_leadership(now)
        if host.role != LEADER:
            self._lose_lease()
            self.poll_at = now
            return
        self.renew_at = call.sent_at + self.interval

    def _acquired(self, call: StoreCall, now: float) -> None:
        host = self.host
        self._extend(call)
        if self._lease_expired(now):
            self.poll_at = now  # the answer came too late to lead on; the next read re-acquires
            return
        self.record = call.new
        generation = call.new["generation"]
        # The generation is the new term and fencing token. CANDIDATE is momentary: the key is ours.
        host.transition(now, CANDIDATE, leader=None, term=generation, vote=host.config.node_id)
        host.transition(now, LEADER, leader=host.config.node_id)
        self.renew_at = call.sent_at + self.interval

    # ------------------------------------------------------------------ leading

    def _renew(self, now: float) -> None:
        record = self.record
        new = lease_record(record["holder"], record["generation"], record["renewal"] + 1)
        self._send("renew", now, expected=record, new=new)

    def _extend(self, call: StoreCall) -> None:
        self.lease_until = call.sent_at + self.ttl * (1 - LEASE_GUARD)
        self.lease_until_wall = call.sent_wall + self.ttl

    def _lease_expired(self, now: float) -> bool:
        if self.bug_own_clock:
            return self.host.wall >= self.lease_until_wall
        return now >= self.lease_until

    def _lose_lease(self) -> None:
        self.record = None
        self.renew_at = None
        self.lease_until = self.lease_until_wall = float("-inf")

    def _step_down(self, now: float, leader: str | None, term: int | None = None) -> None:
        self._lose_lease()
        self.host.transition(now, FOLLOWER, leader=leader, term=term, vote=KEEP if term is None else None)
        self.poll_at = now

    # ------------------------------------------------------------------ store calls

    def _send(self, kind: str, now: float, expected: Any = None, new: Any = None) -> None:
        self.request_ids += 1
        self.call = StoreCall(kind, self.request_ids, now, self.host.wall, now + self.interval, expected, new)
        self._issue(self.call)

    def _resend(self, call: StoreCall, now: float) -> None:
        if call.kind == "renew" and self.host.role != LEADER:
            return
        self._send(call.kind, now, expected=call.expected, new=call.new)

    def _issue(self, call: StoreCall) -> None:
        request: dict[str, Any] = {"id": call.request_id, "op": "read" if call.kind == "read" else "cas",
                                   "key": self.key}
        if call.kind != "read":
            request["value"] = [call.expected, call.new]
        self.host.store_request(self.store[self.target], request)
