"""The detection matrix (issue 6, item 5) and the ElectionScouting stability figure.

**Detection matrix.** For every known bug of ``cluster`` (``cluster.core.bugs.KNOWN_BUGS``; the bugs of the
external-store modes when asked for by name) and each mode
it applies to, explore seeds in order until the checker named for the bug (``KnownBug.caught_by``) fails,
and count the seeds (and simulated seconds) that took; repeat over several *rounds* of disjoint seeds
(round ``r`` starts at seed ``r * ROUND_STRIDE + 1``). Each bug runs the workload that can show it
(queue PUTs for ``no-dedup``, registers otherwise) under all of the simulator's nemeses, except where
:data:`BUG_SETUPS` says otherwise. The bug-free build of each mode is explored too and must fail no
checker at all.

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

from cluster.core.bugs import KNOWN_BUGS
from harness.sim.explore import Exploration, SeedOutcome, explore
from harness.sim.run import SimSpec, checker_for_bug, sim_bugs, sim_modes, workload_for_bug
from harness.sim.world import World, WorldConfig
from nemesis import grudge as grudges

ROUND_STRIDE = 1_000_000
"""Round ``r`` of the matrix explores seeds ``r * ROUND_STRIDE + 1, + 2, ...``: rounds never share seeds."""

BUG_SETUPS: dict[str, dict[str, Any]] = {
    "lease-read-wallclock": {"nemesis": ("partition", "clock"), "core": {"leader_quorum_timeout": 0}},
    "lease-own-clock": {"nemesis": ("partition", "clock"), "core": {"leader_quorum_timeout": 0}},
}
"""How a bug that needs particular conditions is explored; every other bug runs the simulator's defaults
(all nemeses, default node configuration). ``lease-read-wallclock`` needs a wall clock that steps back on
a leader that is cut off, and a leader that keeps leading while cut off: with the default
``leader_quorum_timeout`` (4 election timeouts) the deposed leader steps down about 0.4 s after its
successor can first commit, while every client still pointed at it waits on a write, so no read can see
the stale lease (the bug's own unit test disables the step-down the same way). ``lease-own-clock`` (the
lease mode's version of the same mistake) needs the same."""


def spec_for_bug(base: SimSpec, bug: str, mode: str) -> SimSpec:
    """``base`` with ``bug`` switched on, the workload that can show it and the bug's setup."""
    setup = BUG_SETUPS.get(bug, {})
    return replace(base, mode=mode, bugs=(bug,), workload=workload_for_bug(bug),
                   nemesis=tuple(setup.get("nemesis", base.nemesis)), core={**base.core, **setup.get("core", {})})


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


def detect(base: SimSpec, bug: str, mode: str, round_: int, max_seeds: int, *, jobs: int | None = None) -> Detection:
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


def clean_run(base: SimSpec, mode: str, seeds: int, *, jobs: int | None = None,
              on_outcome: Callable[[SeedOutcome], Any] | None = None) -> CleanRun:
    """The bug-free build of ``mode`` over seeds 1..``seeds``, every checker, keep going."""
    spec = replace(base, mode=mode, bugs=())
    exploration: Exploration = explore(spec, range(1, seeds + 1), jobs=jobs, keep_going=True, on_outcome=on_outcome)
    return CleanRun(mode, len(exploration.outcomes), tuple(o.seed for o in exploration.invalid),
                    tuple(o.seed for o in exploration.unknown), exploration.failures_by_checker(),
                    exploration.sim_seconds, exploration.wall_seconds)


def detection_matrix(
    base: SimSpec,
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
    wanted_modes = tuple(modes) if modes is not None else tuple(sim_modes())
    known = sim_bugs()
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
