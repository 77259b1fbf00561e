"""The registry of known bugs the node can be built with, so that the harness can prove it finds them.

Each bug is off by default and switched on per node (`NodeConfig.bugs`, `--bug NAME` on the command line).
Every name is defined here once, with the one-line description the docs and `--help` show, the election
modes it applies to, and the checker that is expected to catch it (issue 2, item 8).

A bug applies to a mode when the mistake means something there and is made in that mode's own code path
(issue 7). The node-level bugs live in the shared write, read, replication and state machine code, so
`ack-before-commit`, `stale-read`, `no-dedup`, `no-redelivery` and `read-beyond-hw` (the log's) apply to
every mode. The others:

* `vote-twice`: blazingmq, raft and aeron, whose members vote (aeron: a follower's Vote FOR once per
  term). Fluvio SPUs are appointed by the controller and lease nodes by the store's compare-and-set:
  nobody votes, so there is no vote to give twice.
* `lsn-reuse`: the "fast restart" back into a persisted leadership (`Node.resume_leadership`) in every
  mode, each taking it up its own way: aeron skips its election (CLOSED at once), a fluvio SPU leads its
  epoch until the SC says otherwise, and a lease node resumes only when the store still names it holder of
  the generation it led (renewing it instead of acquiring the next one).
* `lease-read-wallclock`: blazingmq, raft and aeron, whose leaders confirm reads with heartbeat rounds
  and may time a lease from them. In lease mode the leader's read lease is the store's lease, and timing
  that with the wall clock is `lease-own-clock`. Fluvio's shared path works too (a unit test shows it),
  but the simulator did not catch it in 3 x 150 seeds, so it is not enabled there.
* `skip-leader-sync` (blazingmq), `promote-outside-lrs` (fluvio, the SC), `stale-vote` (aeron),
  `lease-own-clock` and `no-fencing-token` (lease) are mistakes in one mode's own mechanism.
* `stale-primary` and `primary-lsn-reuse` are mistakes of the storage shards (`cluster.core.shards`,
  docs/shards.md), which sit above the election: they apply to every mode, and only with `shards` > 1
  (`KnownBug.shards`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: every election mode of the node (`cluster.core.election`); a test keeps the two lists equal.
ALL_MODES: tuple[str, ...] = ("blazingmq", "raft", "aeron", "fluvio", "lease")


@dataclass(frozen=True)
class KnownBug:
    """One switchable mistake: what it does and which checker must notice it."""

    name: str
    description: str
    caught_by: str
    modes: tuple[str, ...] = ("blazingmq", "raft")
    #: the workload whose operations can show it: the queue's bugs need the queue
    workload: str = "register"
    #: a mistake of the storage shards: it needs a node with `shards` > 1 (the matrix and suites use 4)
    shards: bool = False
    #: what a run must offer the bug before it can act: the journalled situation that gives it a chance
    #: (issue 32). A run's report and a suite's entry table count these (`adapters.cluster.opportunities`),
    #: so that a run that missed the bug says whether the bug was even reachable in it.
    opportunity: str = ""


KNOWN_BUGS: dict[str, KnownBug] = {
    bug.name: bug
    for bug in (
        KnownBug(
            "vote-twice",
            "a node may support two candidates in one term (blazingmq: yes when the proposed term is >= its "
            "own instead of >; raft and aeron: the votedFor check is skipped), so a term can get two leaders",
            "single-leader-per-term",
            modes=("blazingmq", "raft", "aeron"),
            opportunity=("a voter asked for its vote by a second candidate of a term it already supports "
                         "(a candidate it voted for, or itself as a candidate of that term)"),
        ),
        KnownBug(
            "ack-before-commit",
            "the leader acknowledges a write after its local append, before a majority (fluvio: the LRS) has "
            "it, so acked writes are lost on failover",
            "committed-data durability",
            modes=ALL_MODES,
            opportunity=("a leader change: a new leader elected after an earlier one, which may have "
                         "acknowledged writes no majority stored"),
        ),
        KnownBug(
            "skip-leader-sync",
            "a new blazingmq leader appends without fetching the committed entries it lacks and forces its "
            "log on the followers (committed data lost, LSN divergence)",
            "committed-data durability",
            modes=("blazingmq",),
            opportunity=("a leader change: a new leader elected after an earlier one, which may lack "
                         "entries its predecessor committed"),
        ),
        KnownBug(
            "lsn-reuse",
            "a leader that restarts within its persisted term resumes leadership with its sequence counter "
            "back at 1, issuing duplicate LSNs for different entries",
            "lsn-monotonicity",
            modes=ALL_MODES,
            opportunity=("a restart of a node that was leading the term it restarts in (the fast restart "
                         "back into a persisted leadership)"),
        ),
        KnownBug(
            "stale-read",
            "any node (followers too) serves reads from its local state without confirming leadership",
            "linearizable",
            modes=ALL_MODES,
            opportunity=("a leader change: after it, the deposed leader and lagging followers hold state "
                         "older than the new leader's"),
        ),
        KnownBug(
            "lease-read-wallclock",
            "the leader serves reads locally under a leadership lease timed with the wall clock, so reads "
            "go stale when that clock is skewed",
            "linearizable",
            modes=("blazingmq", "raft", "aeron"),
            opportunity=("a leader change: a lease timed with a skewed wall clock outlives the leadership "
                         "only across one"),
        ),
        KnownBug(
            "promote-outside-lrs",
            "the fluvio controller (SC) chooses the leader candidate among every live SPU by smallest lag "
            "instead of among the Live Replica Set, so a replica that left the LRS, lacking committed "
            "records, can be promoted",
            "committed-data durability",
            modes=("fluvio",),
            opportunity=("a leader candidate chosen by the fluvio SC while an SPU is outside the Live "
                         "Replica Set"),
        ),
        KnownBug(
            "stale-vote",
            "an aeron candidate keeps the vote records of its earlier ballots (seed 001 NOMINATE clears them) "
            "and counts Votes without checking their candidateTermId, so a Vote FOR from an earlier ballot, "
            "remembered or delayed in the network, counts in the current one and a term can get two leaders",
            "single-leader-per-term",
            modes=("aeron",),
            opportunity=("an aeron candidacy of a node that got a Vote FOR in an earlier ballot since it "
                         "started (a vote the bug lets it count again)"),
        ),
        KnownBug(
            "no-dedup",
            "queue PUTs are not de-duplicated by GUID, so a retried PUT enqueues the message twice",
            "committed-data durability",
            modes=ALL_MODES,
            workload="queue",
            opportunity="a leader change: a PUT in flight across it is retried by its client",
        ),
        KnownBug(
            "no-redelivery",
            "a consumed message that is never confirmed (its consumer died, timed out or was cut off) stays "
            "pending forever instead of being delivered again after the visibility timeout, so it is lost",
            "committed-data durability",
            modes=ALL_MODES,
            workload="queue",
            opportunity=("a leader change or a restart: consumers lose their connection, leaving messages "
                         "unconfirmed"),
        ),
        KnownBug(
            "lease-own-clock",
            "a lease-mode leader times its lease with its own wall clock, so when that clock is moved back "
            "it keeps leading and serving lease reads after the store gave the key to another node",
            "linearizable",
            modes=("lease",),
            opportunity=("a leader change: the store gives the key to another node while the old holder's "
                         "clock may be moved"),
        ),
        KnownBug(
            "no-fencing-token",
            "followers accept replicated writes without checking the leader's fencing token (its term, in "
            "lease mode the store's generation), so a deposed leader's delayed writes overwrite committed "
            "entries: the follower drops entries it applied and applies the older term's after them",
            "lsn-monotonicity",
            modes=("lease",),
            opportunity="a leader change: the deposed leader may still send writes after its successor wrote",
        ),
        KnownBug(
            "read-beyond-hw",
            "any node, leader or follower, answers polls of a log at once from its whole log, past the commit "
            "point (fluvio: the high watermark) up to its last entry, so consumers read records that a leader "
            "change then truncates",
            "log",
            modes=ALL_MODES,
            workload="log",
            opportunity="a leader change: a new leader truncates what followers held beyond the commit point",
        ),
        KnownBug(
            "stale-primary",
            "replicas of a storage shard accept and acknowledge its primary's writes without checking the "
            "primary lease id, so a node the leader replaced as primary, and that has not heard of it, "
            "keeps committing writes: two primaries of one shard, acknowledged writes lost",
            "committed-data durability",
            modes=ALL_MODES,
            shards=True,
            opportunity=("a storage shard handed to a new primary (an `assign` naming a primary other than "
                         "the shard's last)"),
        ),
        KnownBug(
            "primary-lsn-reuse",
            "the leader reassigns a storage shard without bumping its primary lease id, so the new primary "
            "numbers its entries (lease, 1), (lease, 2), ... again after its predecessor's: one LSN for two "
            "entries, and LSNs that go back within the shard",
            "lsn-monotonicity",
            modes=ALL_MODES,
            shards=True,
            opportunity=("a storage shard handed to a new primary (an `assign` naming a primary other than "
                         "the shard's last)"),
        ),
    )
}


def validate_bugs(names: Iterable[str], mode: str | None = None) -> frozenset[str]:
    """Return the bug names as a frozenset; raise ValueError naming the bad one and the valid ones."""
    found = []
    for name in names:
        bug = KNOWN_BUGS.get(name)
        if bug is None:
            valid = sorted(KNOWN_BUGS)
            raise ValueError(f"unknown bug {name!r}; valid bugs: {', '.join(valid)}")
        if mode is not None and mode not in bug.modes:
            raise ValueError(f"bug {name!r} applies only to mode {', '.join(bug.modes)}, not to mode {mode!r}")
        found.append(name)
    return frozenset(found)
