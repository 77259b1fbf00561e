"""The registry of known bugs the node can be built with, so that the harness can prove it finds them.

Each bug is off by default and switched on per node (`NodeConfig.bugs`, `--bug NAME` on the command line).
Every name is defined here once, with the one-line description the docs and `--help` show, the election
modes it applies to, and the checker that is expected to catch it (issue 2, item 8).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownBug:
    """One switchable mistake: what it does and which checker must notice it."""

    name: str
    description: str
    caught_by: str
    modes: tuple[str, ...] = ("blazingmq", "raft")


KNOWN_BUGS: dict[str, KnownBug] = {
    bug.name: bug
    for bug in (
        KnownBug(
            "vote-twice",
            "a node may support two candidates in one term (blazingmq: yes when the proposed term is >= its "
            "own instead of >; raft: the votedFor check is skipped), so a term can get two leaders",
            "single-leader-per-term",
        ),
        KnownBug(
            "ack-before-commit",
            "the leader acknowledges a write after its local append, before a majority has it, so acked "
            "writes are lost on failover",
            "committed-data durability",
        ),
        KnownBug(
            "skip-leader-sync",
            "a new blazingmq leader appends without fetching the committed entries it lacks and forces its "
            "log on the followers (committed data lost, LSN divergence)",
            "committed-data durability",
            modes=("blazingmq",),
        ),
        KnownBug(
            "lsn-reuse",
            "a leader that restarts within its persisted term resumes leadership with its sequence counter "
            "back at 1, issuing duplicate LSNs for different entries",
            "lsn-monotonicity",
        ),
        KnownBug(
            "stale-read",
            "any node (followers too) serves reads from its local state without confirming leadership",
            "linearizable",
        ),
        KnownBug(
            "lease-read-wallclock",
            "the leader serves reads locally under a leadership lease timed with the wall clock, so reads "
            "go stale when that clock is skewed",
            "linearizable",
        ),
        KnownBug(
            "promote-outside-lrs",
            "the fluvio controller (SC) chooses the leader candidate among every live SPU by smallest lag "
            "instead of among the Live Replica Set, so a replica that left the LRS, lacking committed "
            "records, can be promoted",
            "committed-data durability",
            modes=("fluvio",),
        ),
        KnownBug(
            "stale-vote",
            "an aeron candidate keeps the vote records of its earlier ballots (seed 001 NOMINATE clears them) "
            "and counts Votes without checking their candidateTermId, so a Vote FOR from an earlier ballot, "
            "remembered or delayed in the network, counts in the current one and a term can get two leaders",
            "single-leader-per-term",
            modes=("aeron",),
        ),
        KnownBug(
            "no-dedup",
            "queue PUTs are not de-duplicated by GUID, so a retried PUT enqueues the message twice",
            "committed-data durability",
        ),
    )
}

#: Bugs of the `lease` mode, whose election needs an external store group (docs/election-lease.md). The
#: simulator and the container adapter do not deploy that group yet, so these stay out of KNOWN_BUGS (which
#: the detection matrix walks) until they do; nodes and the test networks accept them all the same.
EXTERNAL_STORE_BUGS: dict[str, KnownBug] = {
    bug.name: bug
    for bug in (
        KnownBug(
            "lease-own-clock",
            "a lease-mode leader times its lease with its own wall clock, so when that clock is moved back "
            "it keeps leading and serving lease reads after the store gave the key to another node",
            "linearizable",
            modes=("lease",),
        ),
        KnownBug(
            "no-fencing-token",
            "followers accept replicated writes without checking the leader's fencing token (its term, in "
            "lease mode the store's generation), so a deposed leader's delayed writes overwrite committed "
            "entries",
            "committed-data durability",
            modes=("lease",),
        ),
    )
}


def validate_bugs(names: Iterable[str], mode: str | None = None) -> frozenset[str]:
    """Return the bug names as a frozenset; raise ValueError naming the bad one and the valid ones."""
    found = []
    for name in names:
        bug = KNOWN_BUGS.get(name) or EXTERNAL_STORE_BUGS.get(name)
        if bug is None:
            valid = sorted([*KNOWN_BUGS, *EXTERNAL_STORE_BUGS])
            raise ValueError(f"unknown bug {name!r}; valid bugs: {', '.join(valid)}")
        if mode is not None and mode not in bug.modes:
            raise ValueError(f"bug {name!r} applies only to mode {', '.join(bug.modes)}, not to mode {mode!r}")
        found.append(name)
    return frozenset(found)
