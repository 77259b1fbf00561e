"""`NodeConfig`: everything that tunes one node's core, validated once with one-line errors.

Timing defaults elect a leader within about 1-3 s on real processes (issue 2, item 6): a leader heartbeat
every 0.15 s, a leader declared gone after 3 missed heartbeats (seed 000 "If three consecutive heartbeats
are missed"), then a random wait of up to 1 s before proposing (seed 000 uses 0-3 s; we shorten it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from cluster.core.bugs import ALL_MODES, validate_bugs

FSYNC_POLICIES = ("always", "never")
DEDUP_WINDOW_UNITS = ("seconds", "entries")
#: seed 004's masterAssignment (E_LEADER_IS_MASTER_ALL, E_LEAST_ASSIGNED): who the leader makes primary of
#: each storage shard (cluster.core.shards)
ASSIGNMENTS = ("leader-is-master-all", "least-assigned")
MAX_SHARDS = 256


@dataclass(frozen=True)
class NodeConfig:
    """One node's configuration. `peers` are the *other* members, in a fixed order (determinism)."""

    node_id: str = field(metadata={"doc": "this node's id"})
    peers: tuple[str, ...] = field(metadata={"doc": "the other members' ids, in a fixed order"})
    mode: str = field(default="blazingmq", metadata={"doc": "election mode (`ELECTIONS`)"})
    bugs: frozenset[str] = field(default_factory=frozenset, metadata={"doc": "known bugs switched on"})
    fsync: str = field(default="always", metadata={
        "doc": "`always`: the driver fsyncs each Ready's records; `never`: as BlazingMQ does (seed 000)"})
    heartbeat_interval: float = field(default=0.15, metadata={"doc": "seconds between leader heartbeats"})
    missed_heartbeats: int = field(default=3, metadata={
        "doc": "heartbeats missed before a follower counts its leader gone (seed 000: three)"})
    election_random_wait: float = field(default=1.0, metadata={
        "doc": "the random wait before proposing is uniform in [0, this] (seed 000: 0-3 s)"})
    startup_wait: float | None = field(default=None, metadata={
        "doc": "a starting node's wait to discover a leader; None: missed_heartbeats * heartbeat_interval"})
    proposal_timeout: float = field(default=0.5, metadata={
        "doc": "how long a candidate, or a scouting round, waits for a majority"})
    scouting: bool = field(default=True, metadata={
        "doc": "ElectionScouting (blazingmq) / PreVote (raft) before proposing"})
    leader_quorum_timeout: float | None = field(default=None, metadata={
        "doc": "a leader not hearing from a majority this long steps down; None: 4 election timeouts; 0: never"})
    lease_duration: float | None = field(default=None, metadata={
        "doc": "lease of the `lease-read-wallclock` bug; None: missed_heartbeats * heartbeat_interval"})
    max_batch_entries: int = field(default=256, metadata={"doc": "entries per AppendEntries or sync chunk"})
    max_inflight_appends: int = field(default=4, metadata={
        "doc": "unanswered AppendEntries per follower before the leader waits (then batches)"})
    retry_interval: float | None = field(default=None, metadata={
        "doc": "resend an unanswered AppendEntries or sync query after this; None: 2 heartbeat intervals"})
    read_index_timeout: float | None = field(default=None, metadata={
        "doc": "a local (follower) read not served within this answers `no-read-index`; None: 4 election "
               "timeouts"})
    max_held_requests: int = field(default=10_000, metadata={
        "doc": "writes a synchronising leader holds before answering `unavailable`"})
    dedup_window: float = field(default=300.0, metadata={
        "doc": "queue PUT GUID de-duplication window (seed 004: 5 minutes)"})
    dedup_window_unit: str = field(default="seconds", metadata={
        "doc": "`seconds` of leader time carried in the entries, or `entries` (PUTs per queue)"})
    visibility_timeout: float = field(default=5.0, metadata={
        "doc": "seconds of leader time a consumed message stays pending before a consume delivers it again "
               "unless confirmed (at-least-once; docs/workloads.md)"})
    store: tuple[str, ...] = field(default=(), metadata={
        "doc": "lease mode: the external store's members (a `raft` cluster), in a fixed order"})
    lease_key: str = field(default="leader", metadata={"doc": "lease mode: the store key holding the lease"})
    lease_ttl: float = field(default=1.0, metadata={
        "doc": "lease mode: a lease not renewed for this long expires (seed 003's time to live)"})
    shards: int = field(default=1, metadata={
        "doc": "storage shards, each with a primary the leader assigns (seed 004; docs/shards.md); 1: none, "
               "the node's one log"})
    assignment: str = field(default="leader-is-master-all", metadata={
        "doc": "with shards > 1, seed 004's masterAssignment: `leader-is-master-all` or `least-assigned`"})

    def __post_init__(self) -> None:
        if not isinstance(self.node_id, str) or not self.node_id:
            raise ValueError(f"node_id must be a non-empty string, got {self.node_id!r}")
        object.__setattr__(self, "peers", tuple(self.peers))
        for peer in self.peers:
            if not isinstance(peer, str) or not peer:
                raise ValueError(f"peer ids must be non-empty strings, got {peer!r}")
        if self.node_id in self.peers:
            raise ValueError(f"node {self.node_id!r} must not list itself among its peers")
        if len(set(self.peers)) != len(self.peers):
            raise ValueError(f"peer list has duplicates: {', '.join(self.peers)}")
        if self.mode not in ALL_MODES:
            raise ValueError(f"unknown mode {self.mode!r}; valid modes: {', '.join(ALL_MODES)}")
        object.__setattr__(self, "bugs", validate_bugs(_names(self.bugs), self.mode))
        if self.fsync not in FSYNC_POLICIES:
            raise ValueError(f"unknown fsync policy {self.fsync!r}; valid: {', '.join(FSYNC_POLICIES)}")
        if self.dedup_window_unit not in DEDUP_WINDOW_UNITS:
            raise ValueError(f"unknown dedup_window_unit {self.dedup_window_unit!r}; "
                             f"valid: {', '.join(DEDUP_WINDOW_UNITS)}")
        if not isinstance(self.shards, int) or isinstance(self.shards, bool) or not 1 <= self.shards <= MAX_SHARDS:
            raise ValueError(f"shards must be an integer from 1 to {MAX_SHARDS}, got {self.shards!r}")
        if self.assignment not in ASSIGNMENTS:
            raise ValueError(f"unknown assignment {self.assignment!r}; valid: {', '.join(ASSIGNMENTS)}")
        object.__setattr__(self, "store", tuple(self.store))
        if self.mode == "lease" and not self.store:
            raise ValueError("mode 'lease' needs the external store's members (store=..., --store)")
        if set(self.store) & {self.node_id, *self.peers}:
            raise ValueError(f"store members must not be cluster members: {', '.join(self.store)}")
        if not isinstance(self.lease_key, str) or not self.lease_key:
            raise ValueError(f"lease_key must be a non-empty string, got {self.lease_key!r}")
        for name in ("heartbeat_interval", "proposal_timeout", "lease_ttl", "visibility_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("election_random_wait", "dedup_window"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        for name in ("startup_wait", "leader_quorum_timeout", "lease_duration", "retry_interval"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ValueError(f"{name} must be >= 0 or None, got {value!r}")
        if self.read_index_timeout is not None and not self.read_index_timeout > 0:
            raise ValueError(f"read_index_timeout must be > 0 or None, got {self.read_index_timeout!r}")
        for name in ("missed_heartbeats", "max_batch_entries", "max_inflight_appends", "max_held_requests"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")

    # Derived values, so that drivers and the core agree on one formula each.

    @property
    def members(self) -> tuple[str, ...]:
        """Every member of the cluster, this node first, then the peers in their configured order."""
        return (self.node_id, *self.peers)

    @property
    def majority(self) -> int:
        """N/2 + 1 of the whole cluster (seed 000)."""
        return (len(self.peers) + 1) // 2 + 1

    @property
    def election_timeout(self) -> float:
        """How long without a leader heartbeat before a follower declares the leader gone."""
        return self.missed_heartbeats * self.heartbeat_interval

    @property
    def effective_startup_wait(self) -> float:
        return self.election_timeout if self.startup_wait is None else self.startup_wait

    @property
    def effective_quorum_timeout(self) -> float:
        return 4 * self.election_timeout if self.leader_quorum_timeout is None else self.leader_quorum_timeout

    @property
    def effective_lease(self) -> float:
        return self.election_timeout if self.lease_duration is None else self.lease_duration

    @property
    def effective_read_index_timeout(self) -> float:
        return 4 * self.election_timeout if self.read_index_timeout is None else self.read_index_timeout

    @property
    def effective_retry(self) -> float:
        return 2 * self.heartbeat_interval if self.retry_interval is None else self.retry_interval

    def has_bug(self, name: str) -> bool:
        return name in self.bugs


def _names(bugs: Iterable[str] | str) -> list[str]:
    if isinstance(bugs, str):
        return [bugs]
    return list(bugs)


SET_BY_THE_RUNTIME: dict[str, str] = {
    "node_id": "--id",
    "peers": "--peers",
    "mode": "--mode",
    "bugs": "--bug",
    "store": "--store",
}
"""Fields a runtime fills in from its own arguments: a setting override (``--core-option``) may not."""

_SETTING_TYPES: dict[str, tuple[type, ...]] = {
    "float": (int, float), "float | None": (int, float, type(None)), "int": (int,), "bool": (bool,),
    "str": (str,),
}


def check_settings(settings: Mapping[str, Any], mode: str = "blazingmq") -> dict[str, Any]:
    """Check ``NodeConfig`` overrides (name -> value, as ``--core-option NAME=VALUE`` gives them) before
    any node starts: a known name, not one the runtime sets itself, a value of the field's type and in
    its range (``NodeConfig``'s own checks, on a throwaway config of ``mode``). Returns them; raises
    ``ValueError`` with one sentence naming the setting otherwise."""
    known = {f.name: f for f in fields(NodeConfig)}
    for name, value in settings.items():
        if name in SET_BY_THE_RUNTIME:
            raise ValueError(f"node setting {name!r} is set from {SET_BY_THE_RUNTIME[name]}, not as a setting")
        if name not in known:
            valid = sorted(n for n in known if n not in SET_BY_THE_RUNTIME)
            raise ValueError(f"unknown node setting {name!r}; valid: {', '.join(valid)}")
        kinds = _SETTING_TYPES.get(str(known[name].type))
        if kinds is not None and (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)):
            raise ValueError(f"node setting {name!r} must be of type {known[name].type}, not {value!r}")
    store = ("s1", "s2", "s3") if mode == "lease" else ()
    NodeConfig(node_id="n1", peers=("n2", "n3"), mode=mode, store=store, **dict(settings))
    return dict(settings)
