"""Suites: a matrix of chaos tests run one after another, analysed together, reported to CI.

A suite file is TOML::

    [suite]
    name = "nightly"            # the suite's directory under store/suites/
    db = "cluster"              # the DB plugin every run tests (harness dbs lists them)
    time_limit = 60             # seconds of chaos per run (any run option below may be set here)
    seeds = [1, 2]              # or a count: that many random seeds, drawn once and recorded
    repetitions = 1             # runs per (case, seed): same schedule, other interleavings

    [[matrix]]                  # every combination of the lists below is one run per seed x repetition
    workloads = ["register"]           # or "all"
    nemeses = ["partition", "kill,pause", "none"]   # each entry one run's packages; "all": each alone
    modes = ["blazingmq", "raft"]      # an axis over the DB's option `mode` (the option's name + "s")
    bugs = ["none"]                    # an axis over a repeatable option (`bug`): each entry a value, a
                                       # list of values, or "none"; "all": each of its choices alone
    core = {scouting = false}          # any option of the DB by its name: the same value in every run
    expect = "valid"                   # or "invalid": a known bug the checkers must catch
    target = 0.8                       # the share of its runs that must meet the expectation (optional;
                                       # also in [suite]): the entry table flags an entry below it

Axes and option values come from the DB plugin's declared options (``harness.db.plugin``): a matrix key
that is an option's name sets it; the option's name with an ``s`` is an axis of values to cross; an axis
``"all"`` takes every choice the option declares, and then a combination the adapter refuses (a bug that
does not exist in that mode) is skipped rather than an error.

Run options, in ``[suite]`` or per ``[[matrix]]``: ``db``, ``time_limit``, ``nodes``, ``concurrency``,
``rate``, ``op_timeout``, ``nemesis_interval``, ``platform`` (``docker``, ``ssh``, or ``sim``: the
deterministic simulator, ``harness simulate``), ``hosts``, ``client_binding`` (``leader`` or ``node``:
``harness run --client-binding``), ``leader_group`` (``harness run --leader-group``), ``storm_pacing``
(``harness run --storm-pacing``), ``min_coverage``
(``harness run --min-coverage``: a valid run that applied less of its faults is unknown),
``workload_options`` (a table, ``harness run --workload-opt``: ``{queues = 3}``). An unknown key or
a bad value is one sentence
naming the file, the table and the key (exit 254), before any run starts: every expanded run is composed
by the controller (or the simulator) first, so a bug that does not apply to a mode fails here, not at 3
a.m.

:func:`run_suite` runs the cases one after another through :func:`run_case` (the one place that calls
the controller, or the simulator for ``platform = "sim"``), continues after failures, analyses every
stored run in one Spark job, and writes into ``store/suites/<name>/<YYYYMMDDTHHMMSS>/``: ``suite.json``
(the cases and their outcomes, updated after each run), ``junit.xml`` (one test case per run) and
``summary.json`` (docs/analysis.md describes the layout as a contract). ``--shard K/N`` keeps one of N
balanced slices (:func:`shard_cases`), for a night spread over N machines; :func:`merge_shards` puts the
shards' records back together into one (``harness analyze --summary`` over their stores). Exit code: 1 if a run is invalid
that was expected valid, or a known bug was missed; else 2 if a run is unknown or crashed; else 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.analysis.discovery import SUITE_JSON, RunSelection, StoredRun
from harness.report.publish import write_suite_page_safely
from harness.store import write_json
from harness.suite.file import (  # re-exported: harness.suite is the package's one name
    ALL,
    CASE_OVERHEAD_SECONDS,
    DEFAULT_TIME_LIMIT,
    EXPECTATIONS,
    MATRIX_KEYS,
    PLATFORM_SIM,
    RUN_CHECK_TIMEOUT,
    RUN_OPTIONS,
    SIM_CASE_SECONDS,
    SUITE_KEYS,
    Case,
    Suite,
    SuiteError,
    Vocabulary,
    case_command,
    case_cost,
    compose_case,
    controller_vocabulary,
    dumps_case_list,
    load_suite,
    parse_shard,
    parse_suite,
    select_cases,
    shard_cases,
    test_spec,
    with_store,
)
from harness.suite.merge import (  # re-exported: harness.suite is the package's one name
    MergedSuite,
    find_shard_records,
    merge_shards,
)
from harness.suite.outputs import (  # re-exported: harness.suite is the package's one name
    JUNIT,
    SUMMARY,
    CaseOutcome,
    SuiteResult,
    Verdict,
    judge,
    junit_document,
    stored_verdicts,
    suite_directory,
    suite_record,
    suite_summary,
    write_junit,
)
from harness.suite.runner import (  # re-exported: harness.suite is the package's one name
    STATUS_INTERVAL_S,
    CaseRun,
    live_line,
    run_case,
    run_parallel,
)


def run_suite(
    suite: Suite,
    *,
    analyse: Callable[[RunSelection], Mapping[Path, Verdict]],
    run: Callable[[Case, str], CaseRun] = run_case,
    progress: Any = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    jobs: int = 1,
) -> SuiteResult:
    """Run every case, analyse them all with ``analyse`` (one Spark job), write suite.json, junit.xml
    and summary.json, and return the outcomes.

    ``analyse`` gets the stored runs and returns, per run directory, a :data:`Verdict`; the CLI passes
    the Spark pipeline. ``jobs``: how many cases run at once; above 1 each case
    runs in a process of its own (:func:`run_parallel`), and ``run`` must be a module-level function.
    """
    from harness.analysis.progress import SilentProgress

    progress = progress or SilentProgress()
    store = Path(suite.store).resolve()
    started = clock()
    directory = suite_directory(store, suite.name, started)
    runs: list[CaseRun | None] = [None] * len(suite.cases)
    write_json(directory / SUITE_JSON, suite_record(suite, started, store, runs))
    total = len(suite.cases)
    at_once = f", {jobs} at a time" if jobs > 1 else ""
    progress.step(f"suite {suite.name}: {total} runs{at_once}", total=total)
    if jobs > 1:

        def done(case: Case, outcome: CaseRun) -> None:
            runs[case.index] = outcome
            write_json(directory / SUITE_JSON, suite_record(suite, started, store, runs))
            progress.update(sum(1 for r in runs if r is not None), total)

        stopped = run_parallel(suite.cases, str(store), jobs, run=run, progress=progress, on_done=done)
    else:
        stopped = False
        for number, case in enumerate(suite.cases):
            progress.note(f"[{number + 1}/{total}] {case.name}")
            runs[number] = run(case, str(store))
            write_json(directory / SUITE_JSON, suite_record(suite, started, store, runs))
            if runs[number].interrupted:  # a CI timeout's SIGTERM ends the night, not one case of it
                break
            progress.update(number + 1, total)
    # A signal stopped a run (and so the suite, once the running cases ended): what finished is still
    # judged and published, from each run's own results.json rather than a Spark job nobody wants to wait
    # for, and then the suite says it was interrupted (exit 2).
    interrupted = stopped or any(r is not None and r.interrupted for r in runs)
    finished = [(case, r) for case, r in zip(suite.cases, runs, strict=True) if r is not None]
    done_runs = [r for _, r in finished]
    stored = [
        StoredRun(
            path=Path(r.run_dir).resolve(),
            test=Path(r.run_dir).parent.name,
            run=Path(r.run_dir).name,
            suite=suite.name,
            night=started.astimezone(UTC).strftime("%Y-%m-%d"),
        )
        for r in done_runs
        if r.run_dir is not None and (Path(r.run_dir) / "test.json").is_file()
    ]
    verdicts: Mapping[Path, Verdict] = {}
    if stored and not interrupted:
        try:
            verdicts = analyse(RunSelection(store=store, runs=tuple(stored)))
        except KeyboardInterrupt:
            interrupted = True
    if stored and interrupted:
        verdicts = stored_verdicts(stored)
    outcomes = judge([case for case, _ in finished], done_runs, verdicts)
    result = SuiteResult(directory=directory, outcomes=outcomes)
    write_json(directory / SUITE_JSON, suite_record(suite, started, store, runs, outcomes))
    write_junit(directory / JUNIT, suite, outcomes, started, store)
    write_json(directory / SUMMARY, suite_summary(suite, result, started))
    write_suite_page_safely(directory)
    if interrupted:
        progress.note(f"interrupted after {len(finished)} of {total} runs; those are judged from their own "
                      f"results.json, in {directory}")
        raise KeyboardInterrupt
    return result


__all__ = [
    "ALL",
    "CASE_OVERHEAD_SECONDS",
    "Case",
    "CaseOutcome",
    "CaseRun",
    "DEFAULT_TIME_LIMIT",
    "EXPECTATIONS",
    "JUNIT",
    "MATRIX_KEYS",
    "MergedSuite",
    "PLATFORM_SIM",
    "RUN_CHECK_TIMEOUT",
    "RUN_OPTIONS",
    "SIM_CASE_SECONDS",
    "STATUS_INTERVAL_S",
    "SUITE_KEYS",
    "SUMMARY",
    "Suite",
    "SuiteError",
    "SuiteResult",
    "Verdict",
    "Vocabulary",
    "case_command",
    "case_cost",
    "compose_case",
    "controller_vocabulary",
    "dumps_case_list",
    "find_shard_records",
    "judge",
    "junit_document",
    "live_line",
    "load_suite",
    "merge_shards",
    "parse_shard",
    "parse_suite",
    "run_case",
    "run_parallel",
    "run_suite",
    "select_cases",
    "shard_cases",
    "stored_verdicts",
    "suite_directory",
    "suite_record",
    "suite_summary",
    "test_spec",
    "with_store",
    "write_junit",
]
