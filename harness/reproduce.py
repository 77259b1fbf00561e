"""``harness reproduce``: run a stored test again with its stored spec and nemesis schedule, and count
how many replays failed the same checker (on real platforms interleavings differ, so reproduction is a
rate; ARCHITECTURE.md, "Determinism and seeds").

``test.json`` is read field by field (``harness.spec.TestSpec.from_json``): a damaged or hand-edited file
is one sentence naming the field, exit 254, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness import store
from harness.interpreter import RunStats
from harness.run import RunResult, run
from harness.spec import ConfigError, TestSpec
from nemesis.generator import ScheduledFault, schedule_from_jsonl


@dataclass
class Reproduction:
    """``harness reproduce``: how many replays of a stored run failed the same checker(s)."""

    original: Path
    failing_checkers: list[str]
    replays: list[RunResult]

    @property
    def reproduced(self) -> int:
        if not self.failing_checkers:
            return sum(1 for r in self.replays if r.valid is False)
        return sum(1 for r in self.replays if set(r.failed_checkers) & set(self.failing_checkers))

    def by_checker(self) -> dict[str, int]:
        """How many replays failed each checker the original failed (in the original's order)."""
        return {name: sum(1 for r in self.replays if name in r.failed_checkers) for name in self.failing_checkers}

    def summary(self) -> str:
        """``2 of 2 replays failed a checker the original failed (durability 1 of 2, linearizable 2 of
        2)``: each checker's own count, so two replays that failed different checkers do not read as both
        having failed both."""
        n = len(self.replays)
        if not self.failing_checkers:
            return f"{self.reproduced} of {n} replays were invalid (the original failed no checker)"
        each = ", ".join(f"{name} {k} of {n}" for name, k in self.by_checker().items())
        return f"{self.reproduced} of {n} replays failed a checker the original failed ({each})"


def load_stored(path: str | Path) -> tuple[store.RunDir, TestSpec, tuple[ScheduledFault, ...], list[str]]:
    """A stored run's directory, spec, nemesis schedule and the checkers it failed."""
    run_dir = store.find_run(path)
    try:
        document = store.read_json(run_dir.test_json)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{run_dir.test_json} cannot be read: {exc}") from None
    if not isinstance(document, dict) or "spec" not in document:
        raise ConfigError(f"{run_dir.test_json} has no 'spec'; it was not written by harness run")
    spec = TestSpec.from_json(document["spec"], where=f"{run_dir.test_json}: spec")
    try:
        schedule = schedule_from_jsonl(store.read_jsonl(run_dir.schedule)) if run_dir.schedule.exists() else ()
    except ValueError as exc:
        raise ConfigError(f"{run_dir.schedule}: {exc}") from None
    failing: list[str] = []
    if run_dir.results.exists():
        results = store.read_json(run_dir.results)
        checks = results.get("checkers", {}) if isinstance(results, dict) else {}
        failing = sorted(n for n, v in checks.items() if isinstance(v, dict) and v.get("valid") is False)
    return run_dir, spec, schedule, failing


def reproduce(
    path: str | Path,
    times: int = 1,
    *,
    store_dir: str | None = None,
    on_replay: Callable[[int, RunResult], None] | None = None,
    stats_factory: Callable[[], RunStats] = RunStats,
    analysis: str = "direct",
) -> Reproduction:
    """Run a stored test ``times`` more with its stored spec and schedule, each judged where ``analysis``
    says (``harness.run.check_run``); stops early on Ctrl-C."""
    if times < 1:
        raise ConfigError(f"--times must be at least 1, not {times}")
    run_dir, spec, schedule, failing = load_stored(path)
    if store_dir is not None:
        spec = TestSpec.from_json({**spec.to_json(), "store": store_dir})
    replays: list[RunResult] = []
    for attempt in range(1, times + 1):
        result = run(spec, schedule=schedule, stats=stats_factory(), reproduces=str(run_dir.path), analysis=analysis)
        replays.append(result)
        if on_replay is not None:
            on_replay(attempt, result)
        if result.stop_requested:  # also a signal during its teardown, which that run finished
            break
    return Reproduction(run_dir.path, failing, replays)
