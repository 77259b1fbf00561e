"""Shrinking: the smallest run that still fails the same checker, found by delta debugging.

A failing simulated run is a seed, a fault schedule and the operations each worker slot invoked. Because
the simulator replays exactly, any change to that input can be tried and judged: :func:`shrink` keeps a
change when the *same checker* still fails (other checkers may come and go), and stops at a run in which
no single step of the passes below helps, or when its budget of trials is spent. The passes, in order:

1. **shorter chaos**: the earliest time limit (to the second, by bisection) that still fails; faults
   after it are dropped and the final heal moves to it;
2. **fewer faults**: Zeller's *ddmin* over the schedule's faults, each fault paired with the heal that
   ends it;
3. **fewer processes**: *ddmin* over worker slots (a removed slot invokes nothing);
4. **fewer operations**: *ddmin* over the remaining operations of every slot;
5. **fewer slots**: the surviving slots renumbered 0, 1, ... (``concurrency`` shrinks to match);
6. shorter chaos once more.

Trials of one *ddmin* step are independent, so they run ``jobs`` at a time; the step takes the first
failing candidate in a fixed order, so the result does not depend on ``jobs``. The minimal run is stored
like any run, marked ``scripted`` (its operations come from ``schedule.jsonl``), with the replay command
``harness simulate --replay <run dir>``. (Zeller & Hildebrandt, "Simplifying and Isolating Failure-Inducing
Input", 2002.)
"""

from __future__ import annotations

import math
import multiprocessing
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from checkers.registry import CHECKERS
from harness import store
from harness.sim.run import SimResult, checker_for_bug, keep, owned_scratch, scratch_run, simulate
from harness.spec import ConfigError, TestSpec
from nemesis.faults import is_heal
from nemesis.generator import ScheduledFault
from workloads.ops import Op

T = TypeVar("T")
Scripts = dict[int, list[Op]]


@dataclass(frozen=True)
class Candidate:
    """One input of a trial: the spec (its ``time_limit`` and ``concurrency``), faults and scripts."""

    spec: TestSpec
    schedule: tuple[ScheduledFault, ...]
    scripts: Scripts

    @property
    def faults(self) -> int:
        """Faults (not heals) the nemesis applies before the time limit."""
        return sum(1 for entry in self.schedule if entry.at < self.spec.time_limit and not is_heal(entry.fault))

    @property
    def operations(self) -> int:
        """Operations the worker slots are handed (the final phase adds its reads)."""
        return sum(len(ops) for ops in self.scripts.values())


@dataclass
class ShrinkResult:
    """The minimal failing run and how it was found."""

    checker: str
    original: Candidate
    minimal: Candidate
    trials: int
    wall_seconds: float
    result: SimResult | None = None
    steps: list[str] = field(default_factory=list)

    @property
    def client_operations(self) -> int:
        """Client operations in the minimal run's history (chaos and final phase; status polls excluded)."""
        return int(self.result.results.get("ops", 0)) if self.result is not None else 0


def target_checker(result: SimResult) -> str:
    """The checker a shrink must keep failing: the one named for the run's bug if it failed, else the
    first failed checker in registry order."""
    failed = result.failed_checkers
    if not failed:
        raise ConfigError(f"seed {result.spec.seed} did not fail any checker; there is nothing to shrink")
    for bug in result.spec.db_options.get("bug", ()):
        name = checker_for_bug(result.spec.db, bug)
        if name in failed:
            return name
    return next(name for name in CHECKERS if name in failed)


def _trial(task: tuple[Candidate, str, str]) -> bool:
    """Does ``candidate`` still fail ``checker``? (A worker function: simulates in a scratch directory.)"""
    candidate, checker, scratch = task
    work = Path(scratch) / f"trial-{os.getpid()}-{time.monotonic_ns()}"
    try:
        result = simulate(candidate.spec, work, schedule=candidate.schedule, scripts=candidate.scripts,
                          checkers=(checker,))
        return checker in result.failed_checkers
    except Exception:  # noqa: BLE001 - a candidate that crashes the run does not reproduce the failure
        return False
    finally:
        shutil.rmtree(work, ignore_errors=True)


class _Judge:
    """Runs trials (in parallel when ``jobs`` > 1) and counts them against the budget."""

    def __init__(self, checker: str, scratch: Path, jobs: int, budget: int) -> None:
        self.checker = checker
        self.scratch = scratch
        self.jobs = jobs
        self.budget = budget
        self.trials = 0
        self._pool: Any = None

    def __enter__(self) -> _Judge:
        if self.jobs > 1:
            self._pool = multiprocessing.get_context("fork").Pool(self.jobs)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool = None

    @property
    def exhausted(self) -> bool:
        return self.trials >= self.budget

    def first_failing(self, candidates: Sequence[Candidate]) -> int | None:
        """The index of the first candidate (in order) that still fails, or None. Runs at most what the
        budget allows; in parallel, batches of ``jobs``."""
        index = 0
        while index < len(candidates) and not self.exhausted:
            batch = candidates[index:index + max(1, min(self.jobs, self.budget - self.trials))]
            tasks = [(c, self.checker, str(self.scratch)) for c in batch]
            outcomes = self._pool.map(_trial, tasks, chunksize=1) if self._pool is not None and len(batch) > 1 \
                else [_trial(task) for task in tasks]
            self.trials += len(batch)
            for offset, failed in enumerate(outcomes):
                if failed:
                    return index + offset
            index += len(batch)
        return None

    def fails(self, candidate: Candidate) -> bool:
        return self.first_failing([candidate]) == 0


def ddmin(items: Sequence[T], build: Callable[[list[T]], Candidate], judge: _Judge) -> list[T]:
    """Zeller's ddmin: a 1-minimal sub-list of ``items`` whose candidate still fails (``items`` itself is
    known to fail). Tries subsets, then complements, at doubling granularity."""
    current = list(items)
    n = 2
    while len(current) >= 2 and not judge.exhausted:
        size = math.ceil(len(current) / n)
        chunks = [current[i:i + size] for i in range(0, len(current), size)]
        subsets = chunks if len(chunks) > 2 else []
        complements = [[x for j, chunk in enumerate(chunks) if j != i for x in chunk] for i in range(len(chunks))]
        options = subsets + complements
        found = judge.first_failing([build(option) for option in options])
        if found is not None:
            current = options[found]
            n = 2 if found < len(subsets) else max(n - 1, 2)
            continue
        if n >= len(current):
            break
        n = min(len(current), 2 * n)
    if len(current) == 1 and not judge.exhausted and judge.fails(build([])):
        return []
    return current


# -- candidates --------------------------------------------------------------------------------------------


def _final_heals(candidate: Candidate) -> list[ScheduledFault]:
    return [entry for entry in candidate.schedule if entry.at >= candidate.spec.time_limit]


def with_time_limit(candidate: Candidate, time_limit: float) -> Candidate:
    """The same run cut at ``time_limit``: faults after it dropped, the final heal phase moved to it."""
    limit = round(time_limit, 3)
    chaos = [entry for entry in candidate.schedule if entry.at < min(limit, candidate.spec.time_limit)]
    heals = [ScheduledFault(limit, entry.package, entry.fault) for entry in _final_heals(candidate)]
    return Candidate(replace(candidate.spec, time_limit=limit), tuple(chaos + heals), candidate.scripts)


def fault_units(candidate: Candidate) -> list[tuple[int, ...]]:
    """Indexes of the chaos-phase schedule grouped as (fault, the heal of its package that follows it)."""
    chaos = [i for i, entry in enumerate(candidate.schedule) if entry.at < candidate.spec.time_limit]
    units: list[tuple[int, ...]] = []
    open_fault: dict[str, int] = {}
    for i in chaos:
        entry = candidate.schedule[i]
        if is_heal(entry.fault):
            if entry.package in open_fault:
                units.append((open_fault.pop(entry.package), i))
            else:
                units.append((i,))
        else:
            if entry.package in open_fault:
                units.append((open_fault.pop(entry.package),))
            open_fault[entry.package] = i
    units.extend((i,) for i in open_fault.values())
    return sorted(units)


def with_faults(candidate: Candidate, units: Sequence[tuple[int, ...]]) -> Candidate:
    kept = {i for unit in units for i in unit}
    schedule = tuple(entry for i, entry in enumerate(candidate.schedule)
                     if i in kept or entry.at >= candidate.spec.time_limit)
    return Candidate(candidate.spec, schedule, candidate.scripts)


def with_slots(candidate: Candidate, slots: Sequence[int]) -> Candidate:
    return Candidate(candidate.spec, candidate.schedule, {s: candidate.scripts[s] for s in sorted(slots)})


def with_ops(candidate: Candidate, ops: Sequence[tuple[int, int]]) -> Candidate:
    kept: dict[int, list[Op]] = {}
    for slot, index in ops:
        kept.setdefault(slot, []).append(candidate.scripts[slot][index])
    return Candidate(candidate.spec, candidate.schedule, kept)


def compacted(candidate: Candidate) -> Candidate:
    """Slots renumbered 0, 1, ... and ``concurrency`` cut to their number (at least 1)."""
    slots = [s for s in sorted(candidate.scripts) if candidate.scripts[s]]
    scripts = {new: candidate.scripts[old] for new, old in enumerate(slots)}
    return Candidate(replace(candidate.spec, concurrency=max(1, len(slots))), candidate.schedule, scripts)


def _shorten(candidate: Candidate, judge: _Judge) -> Candidate:
    """Bisect the time limit (to 1 s) down to the earliest at which the run still fails."""
    low, high = 0.0, candidate.spec.time_limit
    best = candidate
    while high - low > 1.0 and not judge.exhausted:
        middle = round((low + high) / 2, 3)
        trial = with_time_limit(best, middle)
        if judge.fails(trial):
            best, high = trial, middle
        else:
            low = middle
    return best


# -- the whole shrink ----------------------------------------------------------------------------------------


def shrink(
    result: SimResult,
    *,
    checker: str | None = None,
    jobs: int = 1,
    max_trials: int = 400,
    on_step: Callable[[str], Any] | None = None,
    store_result: bool = True,
) -> ShrinkResult:
    """Shrink the failing run ``result`` (see the module docstring); store the minimal run unless told not.

    ``checker`` defaults to :func:`target_checker`. Raises :class:`ConfigError` if the run's own scripted
    replay does not fail that checker (nothing to shrink, or the run was not deterministic).
    """
    checker = checker or target_checker(result)
    started = time.perf_counter()
    original = Candidate(result.spec, tuple(result.schedule), {s: list(ops) for s, ops in result.scripts.items()})
    steps: list[str] = []

    def note(text: str) -> None:
        steps.append(text)
        if on_step is not None:
            on_step(text)

    with (
        owned_scratch(result.spec.store, "shrink") as scratch,
        _Judge(checker, scratch, max(1, jobs), max_trials) as judge,
    ):
        if not judge.fails(original):
            raise ConfigError(f"seed {result.spec.seed} replayed from its scripts does not fail {checker}; "
                              "nothing to shrink")
        current = _shorten(original, judge)
        note(f"time limit {original.spec.time_limit:g} s -> {current.spec.time_limit:g} s")
        units = ddmin(fault_units(current), lambda kept: with_faults(current, kept), judge)
        current = with_faults(current, units)
        note(f"faults {original.faults} -> {current.faults}")
        slots = ddmin(sorted(s for s in current.scripts if current.scripts[s]),
                      lambda kept: with_slots(current, kept), judge)
        current = with_slots(current, slots)
        note(f"worker slots with operations -> {len(slots)}")
        ops = [(s, i) for s in sorted(current.scripts) for i in range(len(current.scripts[s]))]
        kept_ops = ddmin(ops, lambda kept: with_ops(current, kept), judge)
        current = with_ops(current, kept_ops)
        note(f"operations {original.operations} -> {current.operations}")
        smaller = compacted(current)
        if smaller.spec.concurrency < current.spec.concurrency and judge.fails(smaller):
            current = smaller
            note(f"concurrency -> {current.spec.concurrency}")
        current = _shorten(current, judge)
        note(f"time limit -> {current.spec.time_limit:g} s ({judge.trials} trials)")
        trials = judge.trials
    outcome = ShrinkResult(checker, original, current, trials, time.perf_counter() - started, steps=steps)
    if store_result:
        outcome.result = store_minimal(current, original_dir=result.run_dir, checker=checker)
    return outcome


def store_minimal(candidate: Candidate, *, original_dir: str | os.PathLike[str] | None, checker: str) -> SimResult:
    """Run the minimal candidate once more, into the store, marked scripted, with its replay command."""
    spec = replace(candidate.spec, name=None)
    test = store.read_json(store.RunDir(Path(original_dir)).test_json).get("test") if original_dir else None
    spec = replace(spec, name=f"{test or 'sim'}-shrunk")
    with scratch_run(spec.store, "minimal") as work:
        result = simulate(
            spec,
            work,
            schedule=candidate.schedule,
            scripts=candidate.scripts,
            replay_command="harness simulate --replay <this run>",
            reproduces=None if original_dir is None else str(original_dir),
        )
        result = keep(result)
    path = store.RunDir(result.run_dir).test_json
    document = store.read_json(path)
    document.update(replay_command=f"harness simulate --replay {result.run_dir}", shrunk_from=str(original_dir),
                    shrunk_for=checker)
    store.write_json(path, document)
    return result
