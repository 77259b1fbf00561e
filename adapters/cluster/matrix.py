"""The cluster's detection matrix and the ElectionScouting stability figure, in the simulator.

``harness simulate --matrix`` runs :func:`detection_matrix` (the plugin publishes it in
``extras["detection_matrix"]``); ``python -m adapters.cluster.matrix suite-sized`` measures suite-sized
runs.

**Detection matrix.** For every known bug of ``cluster`` (``cluster.core.bugs.KNOWN_BUGS``; the bugs of the
external-store modes when asked for by name) and each mode
it applies to, explore seeds in order until the checker named for the bug (``KnownBug.caught_by``) fails,
and count the seeds (and simulated seconds) that took; repeat over several *rounds* of disjoint seeds
(round ``r`` starts at seed ``r * ROUND_STRIDE + 1``). Each bug runs the workload that can show it
(``KnownBug.workload``: the queue for ``no-dedup`` and ``no-redelivery``, the log for ``read-beyond-hw``,
registers otherwise) under all of
the simulator's nemeses, except where :data:`BUG_SETUPS` says otherwise. The bug-free build of each mode
is explored too and must fail no checker at all.

**Stability figure.** The BlazingMQ article (seed 000) predicts what ElectionScouting buys: without it, a
follower cut off from the leader keeps proposing itself with ever higher terms, and in the "leader
ping-pong" partition (two nodes that cannot see each other, both seeing the rest) leadership bounces
between the two. :func:`election_stability` measures leader changes and term growth with scouting off and
on, in a quiet cluster (no clients, no other faults) under either partition, then after it heals.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from adapters.cluster.known_bugs import KNOWN_BUGS_INFO
from adapters.cluster.sim import World, WorldConfig
from cluster.core.bugs import KNOWN_BUGS
from cluster.core.election import ELECTIONS
from harness.sim.explore import Exploration, SeedOutcome, explore
from harness.spec import TestSpec
from nemesis import grudge as grudges

DB = "cluster"


def checker_for_bug(bug: str) -> str:
    return KNOWN_BUGS_INFO[bug]["checker"]


def workload_for_bug(bug: str) -> str:
    return KNOWN_BUGS_INFO[bug]["workload"]


ROUND_STRIDE = 1_000_000
"""Round ``r`` of the matrix explores seeds ``r * ROUND_STRIDE + 1, + 2, ...``: rounds never share seeds."""

BUG_SETUPS: dict[str, dict[str, Any]] = {
    "lease-read-wallclock": {"nemesis": ("partition", "clock"), "client_binding": "node",
                             "core": {"leader_quorum_timeout": 0}},
    "lease-own-clock": {"nemesis": ("partition", "clock"), "nemesis_interval": 3.0, "op_timeout": 1.0,
                        "client_binding": "node", "core": {"leader_quorum_timeout": 0}},
    "read-beyond-hw": {"nemesis": ("partition", "kill", "pause"), "nemesis_interval": 3.0, "rate": 10.0},
}
"""How a bug that needs particular conditions is explored; every other bug runs the simulator's defaults
(all nemeses, default node configuration). ``lease-read-wallclock`` needs a wall clock that steps back on
a leader that is cut off, and a leader that keeps leading while cut off: with the default
``leader_quorum_timeout`` (4 election timeouts) the deposed leader steps down about 0.4 s after its
successor can first commit, while every client still pointed at it waits on a write, so no read can see
the stale lease (the bug's own unit test disables the step-down the same way). Its clients are bound to
nodes (``client_binding="node"``, Jepsen's binding): since the simulator shares the real client's policy,
leader-following clients leave a cut-off leader, and with them the bug was found in none of 3 x 150 seeds
in blazingmq and raft (2026-11-25); bound, in 57/32/10 and 57/17/10.

``lease-own-clock`` (the lease mode's version of the same mistake) needs that too, and more: the wall clock
must step back *within one ttl of the leader's last successful renewal* (a step before the cut is absorbed
by the next renewals, which re-anchor the lease on the moved clock; after the lease's end the leader has
already stepped down), and the cut and the stepped-back clock must then both last until a successor leads
and a client reads at the old leader. Clients are the other obstacle: every client follows the leader, so
when it is cut off all of them hang on writes to it; only when those time out (``op_timeout``) are their
processes replaced, spread over the nodes, so that some write through the successor and others read at the
old leader. With the default 5 s op timeout that takes longer than the partition or the clock fault lasts;
with 1 s, and both packages every 3 s on average (a clock fault often lands within the one-second lease
after a cut), the stale read is seen in tens of seeds (docs/simulation.md). Since the shared client policy
its clients are bound to nodes as well: leader-following, it was found in none of 3 x 150 seeds
(2026-11-25); bound, in 30/24/51.

``read-beyond-hw`` needs a node holding appends it cannot commit (a leader cut off, paused or killed
with them) while consumers poll it, and then a new leader that gives their offsets to other records:
partitions, kills and pauses every 3 s, and the log workload's usual pace (10 operations per second per
process, where the matrix's default of 2 leaves few appends in flight when a fault lands)."""


MODE_SETUPS: dict[tuple[str, str], dict[str, Any]] = {
    ("vote-twice", "aeron"): {"nemesis": ("partition", "kill"), "nemesis_interval": 3.0},
    ("no-fencing-token", "lease"): {"nemesis": ("partition", "pause", "latency"), "nemesis_interval": 3.0},
}
"""Setups of one bug in one mode, replacing :data:`BUG_SETUPS`' (same keys). Aeron elects the best-placed
member after a random nomination deadline, so two candidates of one term (what ``vote-twice`` needs) are
rare; partitions and kills every 3 s on average make elections, and so such ballots, frequent. A deposed
lease leader's writes arrive late (``no-fencing-token``) when they were sent into a partition or a pause,
or through latency: those three, often."""


def setup_for(bug: str, mode: str) -> dict[str, Any]:
    """How ``bug`` is explored in ``mode``: :data:`MODE_SETUPS`, else :data:`BUG_SETUPS`, else nothing."""
    return MODE_SETUPS.get((bug, mode), BUG_SETUPS.get(bug, {}))


MATRIX_SHARDS = 4
"""A storage shards' bug (``KnownBug.shards``) is explored with this many shards (``--db-opt shards=4``)."""


def spec_for_bug(base: TestSpec, bug: str, mode: str) -> TestSpec:
    """``base`` with ``bug`` switched on in ``mode``, the workload that can show it and the bug's setup (any
    other key of the setup, e.g. ``nemesis_interval``, replaces that ``TestSpec`` field); a storage shards'
    bug runs with :data:`MATRIX_SHARDS` shards."""
    setup = setup_for(bug, mode)
    fields = {k: v for k, v in setup.items() if k not in ("nemesis", "core")}
    options = dict(base.db_options)
    core = {**options.get("core", {}), **setup.get("core", {})}
    if KNOWN_BUGS[bug].shards and options.get("shards", 1) == 1:
        options["shards"] = MATRIX_SHARDS
    options.update(mode=mode, bug=[bug], **({"core": core} if core else {}))
    return replace(base, db=DB, platform="sim", db_options=options, workload=workload_for_bug(bug),
                   nemesis=tuple(setup.get("nemesis", base.nemesis)), **fields)


@dataclass(frozen=True)
class Detection:
    """One round for one bug and mode: seeds explored until the expected checker failed (or the cap)."""

    bug: str
    mode: str
    checker: str
    round: int
    seeds: int
    found: bool
    seed: int | None
    sim_seconds: float
    wall_seconds: float


@dataclass(frozen=True)
class CleanRun:
    """The bug-free build of one mode over many seeds: every seed must be valid."""

    mode: str
    seeds: int
    invalid: tuple[int, ...]
    unknown: tuple[int, ...]
    failures_by_checker: dict[str, list[int]]
    sim_seconds: float
    wall_seconds: float


@dataclass
class Matrix:
    """The detection matrix and the bug-free runs."""

    detections: list[Detection] = field(default_factory=list)
    clean: list[CleanRun] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        """Per bug and mode: seeds to the first failure in each round, and summary figures."""
        grouped: dict[tuple[str, str], list[Detection]] = {}
        for detection in self.detections:
            grouped.setdefault((detection.bug, detection.mode), []).append(detection)
        rows = []
        for (bug, mode), found in grouped.items():
            counts = [d.seeds for d in found if d.found]
            rows.append({
                "bug": bug, "mode": mode, "checker": found[0].checker,
                "rounds": len(found), "found": sum(1 for d in found if d.found),
                "seeds_to_failure": [d.seeds if d.found else None for d in found],
                "median_seeds": statistics.median(counts) if counts else None,
                "max_seeds": max(counts) if counts else None,
                "sim_seconds_to_failure": [round(d.sim_seconds, 1) for d in found],
                "first_seeds": [d.seed for d in found],
            })
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "bugs": self.rows(),
            "clean": [
                {"mode": c.mode, "seeds": c.seeds, "invalid": list(c.invalid), "unknown": list(c.unknown),
                 "failures_by_checker": c.failures_by_checker, "sim_seconds": round(c.sim_seconds, 1),
                 "wall_seconds": round(c.wall_seconds, 1)}
                for c in self.clean
            ],
        }

    @property
    def complete(self) -> bool:
        """Every bug found in every round, and every bug-free seed valid."""
        return all(d.found for d in self.detections) and all(not c.invalid for c in self.clean)


def detect(base: TestSpec, bug: str, mode: str, round_: int, max_seeds: int, *, jobs: int | None = None) -> Detection:
    """Explore seeds of round ``round_`` until ``bug``'s checker fails (at most ``max_seeds``)."""
    checker = checker_for_bug(bug)
    spec = spec_for_bug(base, bug, mode)
    first = round_ * ROUND_STRIDE + 1
    exploration = explore(spec, range(first, first + max_seeds), jobs=jobs, checkers=(checker,),
                          stop_on=lambda outcome: checker in outcome.failed)
    hit = next((i for i, o in enumerate(exploration.outcomes) if checker in o.failed), None)
    explored = exploration.outcomes if hit is None else exploration.outcomes[: hit + 1]
    return Detection(bug, mode, checker, round_, len(explored), hit is not None,
                     None if hit is None else explored[-1].seed, sum(o.sim_seconds for o in explored),
                     exploration.wall_seconds)


def clean_run(base: TestSpec, mode: str, seeds: int, *, jobs: int | None = None,
              on_outcome: Callable[[SeedOutcome], Any] | None = None) -> CleanRun:
    """The bug-free build of ``mode`` over seeds 1..``seeds``, every checker, keep going."""
    spec = replace(base, db=DB, platform="sim", db_options={**base.db_options, "mode": mode, "bug": []})
    exploration: Exploration = explore(spec, range(1, seeds + 1), jobs=jobs, keep_going=True, on_outcome=on_outcome)
    return CleanRun(mode, len(exploration.outcomes), tuple(o.seed for o in exploration.invalid),
                    tuple(o.seed for o in exploration.unknown), exploration.failures_by_checker(),
                    exploration.sim_seconds, exploration.wall_seconds)


def detection_matrix(
    base: TestSpec,
    *,
    rounds: int = 3,
    max_seeds: int = 1000,
    clean_seeds: int = 2000,
    bugs: Iterable[str] | None = None,
    modes: Iterable[str] | None = None,
    jobs: int | None = None,
    on_detection: Callable[[Detection], Any] | None = None,
    on_clean: Callable[[CleanRun], Any] | None = None,
) -> Matrix:
    """The whole matrix: every (bug, mode) for ``rounds`` rounds, then ``clean_seeds`` bug-free seeds per
    mode (0 skips them). ``base`` carries the shared options (time limit, rate, store...)."""
    matrix = Matrix()
    wanted_modes = tuple(modes) if modes is not None else tuple(ELECTIONS)
    known = KNOWN_BUGS
    for bug in (tuple(bugs) if bugs is not None else tuple(KNOWN_BUGS)):
        for mode in known[bug].modes:
            if mode not in wanted_modes:
                continue
            for round_ in range(rounds):
                detection = detect(base, bug, mode, round_, max_seeds, jobs=jobs)
                matrix.detections.append(detection)
                if on_detection is not None:
                    on_detection(detection)
    if clean_seeds:
        for mode in wanted_modes:
            run = clean_run(base, mode, clean_seeds, jobs=jobs)
            matrix.clean.append(run)
            if on_clean is not None:
                on_clean(run)
    return matrix


# -- suite-sized runs: which nemesis exposes a bug fastest ---------------------------------------------------

SUITE_SIZED = {"time_limit": 20.0, "rate": 10.0, "nemesis_interval": 3.0}
"""A CI suite's run (``suites/bugs.toml``): 20 s of chaos, 5 nodes, 10 clients at 10 operations per second,
a fault every 3 s on average."""

SUITE_NEMESES: dict[str, tuple[str, ...]] = {
    "vote-twice": ("partition", "kill"), "ack-before-commit": ("partition", "kill", "pause"),
    "skip-leader-sync": ("partition", "kill"), "lsn-reuse": ("kill",), "stale-read": ("partition", "pause"),
    "lease-read-wallclock": ("partition+clock",), "promote-outside-lrs": ("partition", "kill"),
    "stale-vote": ("partition", "kill"), "no-dedup": ("partition", "kill", "pause"),
    "no-redelivery": ("partition", "kill", "pause"),
    "lease-own-clock": ("partition+clock",), "no-fencing-token": ("partition", "pause", "partition+pause+latency"),
}
"""The nemeses (``+`` joins packages run together) tried per bug in suite-sized runs: those that can expose it."""


def suite_sized_detection(base: TestSpec, bug: str, mode: str, nemesis: str, rounds: int, max_seeds: int, *,
                          jobs: int | None = None) -> list[int | None]:
    """Seeds until ``bug``'s checker fails in suite-sized runs (:data:`SUITE_SIZED`) under ``nemesis`` alone
    (the bug's setup otherwise), per round; None where ``max_seeds`` were not enough."""
    checker = checker_for_bug(bug)
    spec = replace(spec_for_bug(replace(base, **SUITE_SIZED), bug, mode), nemesis=tuple(nemesis.split("+")),
                   **SUITE_SIZED)
    counts: list[int | None] = []
    for round_ in range(rounds):
        first = round_ * ROUND_STRIDE + 1
        exploration = explore(spec, range(first, first + max_seeds), jobs=jobs, checkers=(checker,),
                              stop_on=lambda outcome: checker in outcome.failed)
        hit = next((i for i, o in enumerate(exploration.outcomes) if checker in o.failed), None)
        counts.append(None if hit is None else hit + 1)
    return counts


# -- the ElectionScouting stability figure ------------------------------------------------------------------


@dataclass(frozen=True)
class Stability:
    """Leader changes and term growth in one quiet run under one partition."""

    partition: str
    scouting: bool
    mode: str
    seed: int
    leader_changes_during: int
    leader_changes_after: int
    term_growth: int
    max_term: int


def election_stability(partition: str, scouting: bool, *, seed: int = 1, mode: str = "blazingmq",
                       nodes: int = 5, settle: float = 5.0, duration: float = 60.0,
                       after: float = 20.0) -> Stability:
    """One quiet cluster: elect a leader, apply ``partition`` ("isolate-follower" or "ping-pong") for
    ``duration`` seconds, heal, watch ``after`` seconds more. Counts ``role`` events that make a node
    leader during and after the partition, and how far the highest term grew from its start."""
    if partition not in ("isolate-follower", "ping-pong"):
        raise ValueError(f"unknown partition {partition!r}; use isolate-follower or ping-pong")
    world = World(WorldConfig(nodes=nodes, mode=mode, core={"scouting": scouting}), seed)
    claims: list[tuple[int, str, int]] = []
    world.observers.append(lambda node, line: claims.append((world.now, node, line["term"]))
                           if line["event"] == "role" and line["role"] == "leader" else None)
    for node in world.ids:
        world.start(node)
    world.run_for(settle)
    leader = world.leader()
    if leader is None:
        raise RuntimeError(f"no leader after {settle:g} s of a quiet cluster (seed {seed})")
    start_term = max(world.nodes[n].core.term for n in world.ids)
    others = [n for n in world.ids if n != leader]
    if partition == "isolate-follower":
        grudge = grudges.isolate(world.ids, others[seed % len(others)])
    else:
        grudge = grudges.ping_pong(leader, others[seed % len(others)])
    cut = world.now
    world.network.set_grudge(grudge)
    world.run_for(duration)
    healed = world.now
    world.network.set_grudge({})
    world.run_for(after)
    during = sum(1 for at, _, _ in claims if cut <= at < healed)
    later = sum(1 for at, _, _ in claims if at >= healed)
    terms = [world.nodes[n].core.term for n in world.ids if world.nodes[n].up]
    return Stability(partition, scouting, mode, seed, during, later, max(terms) - start_term, max(terms))


def stability_figure(seeds: Sequence[int], *, mode: str = "blazingmq", duration: float = 60.0) -> list[dict[str, Any]]:
    """Means over ``seeds`` of :func:`election_stability` for both partitions, scouting off and on."""
    rows = []
    for partition in ("isolate-follower", "ping-pong"):
        for scouting in (False, True):
            runs = [election_stability(partition, scouting, seed=s, mode=mode, duration=duration) for s in seeds]
            rows.append({
                "partition": partition, "scouting": scouting, "mode": mode, "seeds": len(runs),
                "duration_s": duration,
                "leader_changes_during": statistics.mean(r.leader_changes_during for r in runs),
                "leader_changes_after_heal": statistics.mean(r.leader_changes_after for r in runs),
                "term_growth": statistics.mean(r.term_growth for r in runs),
                "max_term_growth": max(r.term_growth for r in runs),
            })
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m adapters.cluster.matrix suite-sized [--rounds R] [--max-seeds N] [--jobs J] [--bug B ...]``:
    one JSON line per bug, mode and nemesis with the seeds to the first failure of suite-sized runs."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m adapters.cluster.matrix", description=main.__doc__)
    parser.add_argument("figure", choices=("suite-sized",))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--max-seeds", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--bug", action="append", choices=sorted(SUITE_NEMESES))
    parser.add_argument("--store", default="store")
    args = parser.parse_args(argv)
    base = TestSpec(seed=0, db=DB, platform="sim", store=args.store)
    for bug in args.bug or list(SUITE_NEMESES):
        for mode in KNOWN_BUGS[bug].modes:
            for nemesis in SUITE_NEMESES[bug]:
                seeds = suite_sized_detection(base, bug, mode, nemesis, args.rounds, args.max_seeds, jobs=args.jobs)
                print(json.dumps({"bug": bug, "mode": mode, "nemesis": nemesis, "seeds": seeds}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
