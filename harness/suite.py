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
``harness run --client-binding``), ``leader_group`` (``harness run --leader-group``), ``min_coverage``
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
``summary.json`` (docs/analysis.md describes the layout as a contract). Exit code: 1 if a run is invalid
that was expected valid, or a known bug was missed; else 2 if a run is unknown or crashed; else 0.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import time
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from checkers.verdict import UNKNOWN, Valid
from harness.analysis.dataset import SUITES_DIR
from harness.analysis.discovery import SUITE_JSON, RunSelection, StoredRun
from harness.analysis.rates import Rate, check_target
from harness.db.plugin import DBPlugin, Option, PluginError, load_plugin
from harness.report.publish import write_suite_page_safely
from harness.store import RESULTS, TIMESTAMP_FORMAT, StoreError, read_json, stamped_directory, write_json

EXPECTATIONS = ("valid", "invalid")
ALL = "all"
SUITE_KEYS = ("name", "description", "store", "seeds", "repetitions", "key_timeout", "target")
RUN_OPTIONS: dict[str, type | tuple[type, ...]] = {
    "db": str,
    "time_limit": (int, float),
    "nodes": int,
    "concurrency": int,
    "rate": (int, float),
    "op_timeout": (int, float),
    "nemesis_interval": (int, float),
    "platform": str,
    "hosts": str,
    "client_binding": str,
    "leader_group": str,
    "min_coverage": (int, float),
    "workload_options": dict,
}
PLATFORM_SIM = "sim"
RUN_CHECK_TIMEOUT = 10.0
"""Seconds each container run's own linearizability check may take inside a suite (Spark judges)."""
MATRIX_KEYS = ("workloads", "nemeses", "seeds", "repetitions", "expect", "name", "target")
DEFAULT_TIME_LIMIT = 60.0
JUNIT = "junit.xml"
SUMMARY = "summary.json"


class SuiteError(ValueError):
    """A suite file that cannot be run: one sentence naming the file, where in it, and what to do."""


@dataclass(frozen=True)
class Case:
    """One run of a suite: what to run, how often it has run before, and what it must show.

    ``db_options`` are the options this run gives its DB (the axes' values and the fixed ones);
    ``label`` is how the adapter names them (``raft bug-vote-twice``: its test-name parts).
    """

    index: int
    db: str
    db_options: Mapping[str, Any]
    label: str
    workload: str
    nemesis: tuple[str, ...]
    seed: int
    repetition: int
    time_limit: float
    options: Mapping[str, Any] = field(default_factory=dict)
    expect: str = "valid"
    group: str = ""
    target: float | None = None
    """The share of the entry's runs that must meet ``expect`` (``harness.analysis.rates``), if set."""

    @property
    def name(self) -> str:
        """The JUnit test case name: unique within the suite."""
        nemesis = ",".join(self.nemesis) or "none"
        where = f" platform={self.options['platform']}" if self.options.get("platform") else ""
        label = f" {self.label}" if self.label else ""
        return f"{self.db}{label} {self.workload} nemesis={nemesis} seed={self.seed} rep={self.repetition}" + where

    @property
    def classname(self) -> str:
        first = self.label.split()[0] if self.label else self.db
        return f"{self.group or 'suite'}.{first}.{self.workload}"


@dataclass(frozen=True)
class Suite:
    """A parsed suite file: its name, its cases in run order, and the analysis budget."""

    name: str
    path: Path
    cases: tuple[Case, ...]
    store: str = "store"
    description: str = ""
    key_timeout: float | None = None


@dataclass
class CaseRun:
    """What running one case left behind: its run directory (if the store made one) and any crash."""

    run_dir: Path | None
    command: str
    error: str | None = None
    seconds: float = 0.0
    interrupted: bool = False  # Ctrl-C, SIGTERM or SIGHUP came during it (if only in its teardown): the suite stops


Verdict = tuple[Valid, dict[str, str], Sequence[str]]
"""What the analysis says of one stored run: its validity, checker -> summary for every checker that is
not valid, and the checkers among those that found an anomaly (the rest could not decide)."""


@dataclass
class CaseOutcome:
    """A case after the analysis: its verdict, whether it met its expectation, and the evidence."""

    case: Case
    run: CaseRun
    valid: Valid
    failed_checkers: dict[str, str] = field(default_factory=dict)
    """Checker (or ``harness``, for a crash) -> summary, for everything that is not valid."""
    invalid_checkers: tuple[str, ...] = ()
    """The checkers among them that found an anomaly; the others could not decide (unknown)."""

    @property
    def status(self) -> str:
        """``passed``, ``failed`` (invalid, or a missed known bug) or ``error`` (unknown, crashed)."""
        if self.case.expect == "invalid":
            return "passed" if self.valid is False else "failed"
        if self.valid is True:
            return "passed"
        return "failed" if self.valid is False else "error"


# --- parsing ---------------------------------------------------------------------------------------


def _where(path: Path, table: str) -> str:
    return f"{path}: {table}"


def _check_keys(path: Path, table: str, data: Mapping[str, Any], allowed: Iterable[str]) -> None:
    allowed = tuple(allowed)
    for key in data:
        if key not in allowed:
            raise SuiteError(f"{_where(path, table)}: unknown key {key!r}; known keys: {', '.join(allowed)}")


def _option(path: Path, table: str, key: str, value: Any) -> Any:
    expected = RUN_OPTIONS[key]
    if isinstance(value, bool) or not isinstance(value, expected):
        kind = "a string" if expected is str else "a whole number" if expected is int else "a number"
        raise SuiteError(f"{_where(path, table)}: {key} must be {kind}, not {value!r}")
    if isinstance(value, int | float) and not value > 0:
        raise SuiteError(f"{_where(path, table)}: {key} must be positive, not {value!r}")
    return float(value) if expected == (int, float) else value


def _names(path: Path, table: str, key: str, value: Any, valid: Sequence[str]) -> list[str]:
    """A list of names (or "all"), each one of ``valid``."""
    if value == ALL:
        return list(valid)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise SuiteError(
            f'{_where(path, table)}: {key} must be a non-empty list of names or "all", not {value!r}'
        )
    for name in value:
        if name not in valid:
            raise SuiteError(
                f"{_where(path, table)}: {key}: unknown name {name!r}; valid: {', '.join(valid)}"
            )
    return value


def _nemeses(path: Path, table: str, value: Any, valid: Sequence[str]) -> list[tuple[str, ...]]:
    """Each entry one run's packages: ``"partition,kill"``, ``["partition", "kill"]`` or ``"none"``."""
    if value == ALL:
        return [(name,) for name in valid]
    entries = [value] if isinstance(value, str) else value
    if not isinstance(entries, list) or not entries:
        raise SuiteError(f'{_where(path, table)}: nemeses must be a non-empty list or "all", not {value!r}')
    found = []
    for entry in entries:
        names = entry.split(",") if isinstance(entry, str) else entry
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise SuiteError(
                f'{_where(path, table)}: nemeses entry {entry!r} must be a string like "partition,kill"'
            )
        names = [n.strip() for n in names if n.strip() and n.strip() != "none"]
        for name in names:
            if name not in valid:
                raise SuiteError(
                    f"{_where(path, table)}: nemeses: unknown nemesis {name!r}; valid: {', '.join(valid)} (or none)"
                )
        found.append(tuple(n for n in valid if n in names))
    return found


def _values(path: Path, table: str, key: str, value: Any, option: Option) -> list[Any]:
    """An axis over ``option``: each entry one run's value. A repeatable option's entry is a value, a
    list of values or ``"none"``; ``"all"`` is every choice the option declares (each alone)."""
    if value == ALL:
        if not option.choices:
            raise SuiteError(f'{_where(path, table)}: {key} = "all" needs an option with declared choices')
        return [[c] for c in option.choices] if option.repeatable else list(option.choices)
    entries = value if isinstance(value, list) else [value]
    if not entries:
        raise SuiteError(f'{_where(path, table)}: {key} must be a non-empty list or "all", not {value!r}')
    found = []
    for entry in entries:
        if option.repeatable:
            names = [entry] if not isinstance(entry, list) else entry
            entry = sorted({n for n in names if n != "none"}, key=str)
        try:
            found.append(option.check(entry))
        except PluginError as exc:
            raise SuiteError(f"{_where(path, table)}: {key}: {exc}") from None
    return found


def _seeds(path: Path, table: str, value: Any, rng: random.Random) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise SuiteError(f"{_where(path, table)}: seeds as a count must be at least 1, not {value}")
        return [rng.randrange(2**31) for _ in range(value)]
    if (
        isinstance(value, list)
        and value
        and all(isinstance(s, int) and not isinstance(s, bool) for s in value)
    ):
        return list(value)
    raise SuiteError(f"{_where(path, table)}: seeds must be a list of integers or a count, not {value!r}")


def _repetitions(path: Path, table: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SuiteError(
            f"{_where(path, table)}: repetitions must be a whole number of at least 1, not {value!r}"
        )
    return value


@dataclass(frozen=True)
class Vocabulary:
    """The names a suite may use: workloads and nemesis packages from the harness, and each DB's plugin
    (its options), loaded by name when a suite names it."""

    workloads: tuple[str, ...]
    nemeses: tuple[str, ...]
    plugins: Callable[[str], DBPlugin] = load_plugin


def controller_vocabulary() -> Vocabulary:
    """Workloads and nemesis packages as the controller knows them; DB plugins through their entry point."""
    from nemesis.generator import nemesis_names
    from workloads.generator import workload_names

    return Vocabulary(workloads=tuple(workload_names()), nemeses=tuple(nemesis_names()))


def parse_suite(
    text: str,
    path: Path,
    vocabulary: Vocabulary,
    rng: random.Random | None = None,
) -> Suite:
    """Parse and expand a suite file's text. Raises :class:`SuiteError` (one sentence) on bad input.

    ``rng`` draws the random seeds of ``seeds = N`` (once per suite, so every matrix entry shares them).
    """
    rng = rng or random.Random()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{path}: not valid TOML: {exc}") from None
    _check_keys(path, "top level", data, ("suite", "matrix"))
    head = data.get("suite", {})
    if not isinstance(head, dict):
        raise SuiteError(f"{path}: [suite] must be a table")
    _check_keys(path, "[suite]", head, (*SUITE_KEYS, *RUN_OPTIONS))
    name = head.get("name", path.stem)
    if not isinstance(name, str) or not name.strip() or "/" in name:
        raise SuiteError(f"{path}: [suite]: name must be a non-empty string without '/', not {name!r}")
    store = head.get("store", "store")
    if not isinstance(store, str) or not store:
        raise SuiteError(f"{path}: [suite]: store must be a directory name, not {store!r}")
    description = head.get("description", "")
    if not isinstance(description, str):
        raise SuiteError(f"{path}: [suite]: description must be a string, not {description!r}")
    key_timeout = head.get("key_timeout")
    if key_timeout is not None and (
        isinstance(key_timeout, bool) or not isinstance(key_timeout, int | float) or key_timeout <= 0
    ):
        raise SuiteError(
            f"{path}: [suite]: key_timeout must be a positive number of seconds, not {key_timeout!r}"
        )
    defaults = {key: _option(path, "[suite]", key, head[key]) for key in RUN_OPTIONS if key in head}
    suite_seeds = _seeds(path, "[suite]", head.get("seeds", 1), rng)
    suite_repetitions = _repetitions(path, "[suite]", head.get("repetitions", 1))
    try:
        suite_target = check_target(head["target"]) if "target" in head else None
    except ValueError as exc:
        raise SuiteError(f"{path}: [suite]: {exc}") from None

    matrix = data.get("matrix")
    if not isinstance(matrix, list) or not matrix:
        raise SuiteError(f"{path}: no [[matrix]] table; a suite needs at least one to say what to run")
    cases: list[Case] = []
    for number, entry in enumerate(matrix, start=1):
        table = f"[[matrix]] #{number}"
        if not isinstance(entry, dict):
            raise SuiteError(f"{path}: {table} must be a table")
        options = {
            **defaults,
            **{key: _option(path, table, key, entry[key]) for key in RUN_OPTIONS if key in entry},
        }
        db = options.pop("db", None)
        if db is None:
            raise SuiteError(f"{_where(path, table)}: db is missing: name the DB plugin every run tests "
                             "(in [suite] or here; harness dbs lists them)")
        try:
            plugin = vocabulary.plugins(db)
        except PluginError as exc:
            raise SuiteError(f"{_where(path, table)}: {exc}") from None
        axes, fixed = _db_keys(path, table, entry, plugin)
        if "workloads" not in entry:
            raise SuiteError(f'{_where(path, table)}: workloads is missing (a list of names, or "all")')
        workloads = _names(path, table, "workloads", entry["workloads"], vocabulary.workloads)
        nemeses = _nemeses(path, table, entry.get("nemeses", "none"), vocabulary.nemeses)
        seeds = _seeds(path, table, entry["seeds"], rng) if "seeds" in entry else suite_seeds
        repetitions = _repetitions(path, table, entry.get("repetitions", suite_repetitions))
        expect = entry.get("expect", "valid")
        if expect not in EXPECTATIONS:
            raise SuiteError(
                f"{_where(path, table)}: expect must be one of {', '.join(EXPECTATIONS)}, not {expect!r}"
            )
        try:
            target = check_target(entry["target"]) if "target" in entry else suite_target
        except ValueError as exc:
            raise SuiteError(f"{_where(path, table)}: {exc}") from None
        group = entry.get("name", name)
        if not isinstance(group, str) or not group:
            raise SuiteError(f"{_where(path, table)}: name must be a non-empty string, not {group!r}")
        time_limit = float(options.pop("time_limit", DEFAULT_TIME_LIMIT))
        # An axis of "all" means every combination that exists: one the adapter refuses is skipped.
        lenient = any(entry[key] == ALL for key in axes)
        names = list(axes)
        for values in itertools.product(*(axes[key][1] for key in names)):
            given = {**fixed, **{axes[key][0].name: value for key, value in zip(names, values, strict=True)}}
            try:
                resolved = plugin.resolve(given)
            except PluginError as exc:
                if lenient:
                    continue
                raise SuiteError(f"{_where(path, table)}: {exc}; narrow the axes") from None
            label = " ".join(plugin.test_name_parts(resolved))
            for workload, nemesis in itertools.product(workloads, nemeses):
                for seed, repetition in itertools.product(seeds, range(1, repetitions + 1)):
                    cases.append(
                        Case(
                            index=len(cases),
                            db=db,
                            db_options=dict(given),
                            label=label,
                            workload=workload,
                            nemesis=nemesis,
                            seed=seed,
                            repetition=repetition,
                            time_limit=time_limit,
                            options=dict(options),
                            expect=expect,
                            group=group,
                            target=target,
                        )
                    )
    if not cases:
        raise SuiteError(f"{path}: the matrix expands to no run; check modes and bugs")
    names = [c.name for c in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SuiteError(
            f"{path}: the run {duplicates[0]!r} appears twice; remove the overlap between matrix tables"
        )
    return Suite(
        name=name,
        path=path,
        cases=tuple(cases),
        store=store,
        description=description,
        key_timeout=float(key_timeout) if key_timeout is not None else None,
    )


def _db_keys(
    path: Path, table: str, entry: Mapping[str, Any], plugin: DBPlugin
) -> tuple[dict[str, tuple[Option, list[Any]]], dict[str, Any]]:
    """The matrix keys that speak of the DB's options: axes (an option's name + ``s``: key -> (option,
    values)) and fixed values (an option's name: name -> value). Any other unknown key is an error."""
    axes: dict[str, tuple[Option, list[Any]]] = {}
    fixed: dict[str, Any] = {}
    by_name = {o.name: o for o in plugin.options}
    for key, value in entry.items():
        if key in MATRIX_KEYS or key in RUN_OPTIONS:
            continue
        if key in by_name:
            try:
                fixed[key] = by_name[key].check(value)
            except PluginError as exc:
                raise SuiteError(f"{_where(path, table)}: {exc}") from None
        elif key.endswith("s") and key[:-1] in by_name:
            axes[key] = (by_name[key[:-1]], _values(path, table, key, value, by_name[key[:-1]]))
        else:
            plural = ", ".join(f"{o.name}s" for o in plugin.options)
            raise SuiteError(
                f"{_where(path, table)}: unknown key {key!r}; known keys: {', '.join((*MATRIX_KEYS, *RUN_OPTIONS))}, "
                f"and the {plugin.name} DB's options {', '.join(by_name) or 'none'} (axes: {plural or 'none'})"
            )
    return axes, fixed


def load_suite(
    path: str | os.PathLike[str],
    *,
    vocabulary: Vocabulary | None = None,
    compose: Callable[[Case, str], None] | None = None,
    rng: random.Random | None = None,
) -> Suite:
    """Read, expand and check a suite file: every case is composed (``compose``, by default the
    controller's) before anything runs. Raises :class:`SuiteError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SuiteError(f"{path}: no such suite file; see suites/ for examples") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: cannot read the suite file ({exc})") from None
    suite = parse_suite(text, path, vocabulary or controller_vocabulary(), rng)
    check = compose or compose_case
    for case in suite.cases:
        try:
            check(case, suite.store)
        except ValueError as exc:
            raise SuiteError(f"{path}: run {case.name!r} cannot be composed: {exc}") from None
    return suite


# --- running ---------------------------------------------------------------------------------------


def test_spec(case: Case, store: str) -> Any:
    """The controller's ``TestSpec`` for a case (``platform = "sim"``: the simulator's platform)."""
    from harness.spec import TestSpec

    options = dict(case.options)
    if options.get("platform") == PLATFORM_SIM and options.get("hosts") is not None:
        raise ValueError("the sim platform takes no hosts file")
    # The suite's verdicts come from its one Spark analysis (with the suite's key_timeout); the checks
    # `harness run` makes on its own only give each run a results.json until then, so they get a short
    # budget instead of two minutes of a linearizability search that Spark repeats anyway.
    return TestSpec(seed=case.seed, workload=case.workload, nemesis=case.nemesis, time_limit=case.time_limit,
                    store=store, **options, db=case.db, db_options=case.db_options, check_timeout=RUN_CHECK_TIMEOUT)


def case_command(case: Case, store: str) -> str:
    """The command line that runs the case again."""
    from harness.compose import compose

    return compose(test_spec(case, store)).command()


def compose_case(case: Case, store: str) -> None:
    """Compose a case with the controller (names, options, capabilities, the platform's preflight of a
    simulated case); raises ``ValueError``."""
    spec = test_spec(case, store)
    if spec.platform == PLATFORM_SIM:
        from harness.sim.run import compose_sim

        compose_sim(spec)
        return
    from harness.compose import compose

    compose(spec)


def run_case(case: Case, store: str) -> CaseRun:
    """Run one case through the controller: the only place a suite calls ``harness.run``.

    A crash of the controller, or a test it refuses, is recorded on the case (``error``), never raised:
    the suite goes on with the next case. While the run is under way its live counters are
    :data:`_live_stats` (what the parallel view shows).
    """
    from harness.interpreter import RunStats
    from harness.run import run

    global _live_stats
    started = time.monotonic()
    spec = test_spec(case, store)
    command = case_command(case, store)
    try:
        _live_stats = RunStats()
        result = run(spec, stats=_live_stats)
    except Exception as exc:  # noqa: BLE001 - one broken run must not end the night
        return CaseRun(
            run_dir=None,
            command=command,
            error=f"{type(exc).__name__}: {exc}",
            seconds=time.monotonic() - started,
        )
    finally:
        _live_stats = None
    return CaseRun(
        run_dir=result.run_dir,
        command=command,
        error=result.error or (result.results or {}).get("error"),
        seconds=time.monotonic() - started,
        interrupted=getattr(result, "stop_requested", False),
    )


# The counters of the run under way in this process (None between runs).
_live_stats: Any = None


def live_line(stats: Any, clock: Callable[[], float] = time.monotonic) -> str:
    """One line of a running case's counters (``harness.interpreter.RunStats``) for the parallel view."""
    if stats is None:
        return "starting"
    elapsed = 0.0 if stats.started_at is None else max(clock() - stats.started_at, 0.0)
    done = stats.completed
    leader = f"leader {stats.leader} term {stats.term}" if stats.leader else "no leader known"
    faults = ", ".join(stats.active_faults) or "none"
    return (
        f"{stats.phase} {elapsed:.0f} s: {stats.invoked} ops (ok {done['ok']}, fail {done['fail']}, "
        f"info {done['info']}), {leader}, faults {faults}"
    )


# --- running cases in parallel -------------------------------------------------------------------------
#
# Each case runs in a process of its own (spawned: a fresh interpreter, nothing inherited from the
# suite's threads), so runs share nothing: their own asyncio loop, logging into their own harness.log,
# signal handlers, Docker network (Docker assigns each a free subnet) and containers. A child reports
# "started", its live counters every second, and its CaseRun through a pipe of its own; a child whose
# pipe ends without its CaseRun died: a crashed case with its exit code. One pipe per child, not one
# queue for all: a multiprocessing queue is shared through a lock, and a child that dies while its
# writer thread holds it (killed, os._exit, out of memory) leaves every other child unable to write and,
# at its exit, waiting for ever to flush (measured: the suite hung).

STATUS_INTERVAL_S = 1.0


def _child(run: Callable[[Case, str], CaseRun], case: Case, store: str, pipe: Any) -> None:
    import threading

    lock = threading.Lock()  # the reporter thread and this one write to the one pipe

    def send(kind: str, data: Any) -> None:
        with lock:
            try:
                pipe.send((kind, data))
            except OSError:  # the suite is gone: nobody to tell
                pass

    send("started", None)
    stop = threading.Event()

    def report() -> None:
        while not stop.wait(STATUS_INTERVAL_S):
            send("status", live_line(_live_stats))

    reporter = threading.Thread(target=report, name="suite-status", daemon=True)
    reporter.start()
    try:
        outcome = run(case, store)
    except BaseException as exc:  # noqa: BLE001 - Ctrl-C or a crash of an injected runner: still report
        outcome = CaseRun(None, _command_or_why(case, store), error=f"{type(exc).__name__}: {exc}")
    finally:
        stop.set()
    send("done", outcome)
    pipe.close()


def _command_or_why(case: Case, store: str) -> str:
    """:func:`case_command`, or why there is none (for a case that never ran or whose process died)."""
    try:
        return case_command(case, store)
    except Exception as exc:  # noqa: BLE001
        return f"(no command: {type(exc).__name__}: {exc})"


@dataclass
class _Running:
    """A case under way in its process, and the end of its pipe the suite reads."""

    process: Any
    case: Case
    pipe: Any
    started: float


def run_parallel(
    cases: Sequence[Case],
    store: str,
    jobs: int,
    *,
    run: Callable[[Case, str], CaseRun] = run_case,
    progress: Any,
    on_done: Callable[[Case, CaseRun], None],
) -> bool:
    """Run ``cases`` in up to ``jobs`` processes at once, in case order; ``on_done`` gets each result as
    it comes (the order of completion). True if a signal stopped it.

    Ctrl-C (the whole process group gets it: each running case tears down as ``harness run`` does),
    SIGTERM or SIGHUP (passed on to the running cases) or a case a signal interrupted stops starting new
    cases and waits for the running ones; the cases never started are reported as not run.
    """
    import multiprocessing
    import signal
    import threading
    from multiprocessing.connection import wait

    from harness.signals import FORWARDED

    context = multiprocessing.get_context("spawn")
    waiting = list(cases)
    running: dict[int, _Running] = {}
    stopping = threading.Event()

    def forward(signum: int, frame: Any) -> None:
        """SIGTERM or SIGHUP: stop starting cases, and pass it on to the running ones, whose runs take it
        as Ctrl-C (harness.signals) and tear down."""
        stopping.set()
        for child in running.values():
            if child.process.is_alive() and child.process.pid is not None:
                os.kill(child.process.pid, signum)

    def start_more() -> None:
        while waiting and len(running) < jobs and not stopping.is_set():
            case = waiting.pop(0)
            ours, theirs = context.Pipe(duplex=False)
            process = context.Process(target=_child, args=(run, case, store, theirs), name=f"suite-case-{case.index}")
            process.start()
            theirs.close()  # the child holds the only writing end: its exit ends the pipe
            running[case.index] = _Running(process, case, ours, time.monotonic())
        if stopping.is_set() and waiting:
            for case in waiting:
                on_done(case, CaseRun(None, _command_or_why(case, store), error="not run: the suite was stopped"))
            waiting.clear()

    def finish(index: int, outcome: CaseRun) -> None:
        child = running.pop(index)
        child.pipe.close()
        child.process.join()
        if outcome.interrupted:  # a signal stopped that run: the suite stops too (as one at a time)
            stopping.set()
        on_done(child.case, outcome)
        progress.case_finished(index, _finished_line(child.case, outcome))

    def receive() -> None:
        by_pipe = {child.pipe: index for index, child in running.items()}
        for pipe in wait(list(by_pipe), timeout=0.5):
            index = by_pipe[pipe]
            try:
                kind, data = pipe.recv()
            except (EOFError, OSError):  # the pipe ended before the CaseRun came: the process died
                child = running[index]
                child.process.join()
                died = f"the process running this case died (exit code {child.process.exitcode})"
                finish(index, CaseRun(None, _command_or_why(child.case, store), error=died,
                                      seconds=time.monotonic() - child.started))  # fmt: skip
                continue
            if kind == "started":
                progress.case_started(index, running[index].case.name)
            elif kind == "status":
                progress.case_status(index, data)
            elif kind == "done":
                finish(index, data)

    restore: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        restore = {signum: signal.signal(signum, forward) for signum in FORWARDED}
    try:
        while waiting or running:
            try:
                start_more()
                receive()
            except KeyboardInterrupt:
                # The running cases got the Ctrl-C too (one process group) and tear down on their own.
                stopping.set()
                progress.note("interrupted: no new case starts; waiting for the running ones to tear down")
    finally:
        for signum, previous in restore.items():
            signal.signal(signum, previous)
    return stopping.is_set()


def _finished_line(case: Case, outcome: CaseRun) -> str:
    if outcome.error and outcome.run_dir is None:
        return f"[{case.index + 1}] {case.name}: crashed after {outcome.seconds:.0f} s: {outcome.error}"
    where = f" ({outcome.run_dir})" if outcome.run_dir else ""
    error = f", {outcome.error}" if outcome.error else ""
    return f"[{case.index + 1}] {case.name}: ran in {outcome.seconds:.0f} s{error}{where}"


@dataclass
class SuiteResult:
    """A finished suite: where its record is, each case's outcome and the exit code for CI."""

    directory: Path
    outcomes: list[CaseOutcome]

    @property
    def exit_code(self) -> int:
        statuses = [o.status for o in self.outcomes]
        if "failed" in statuses:
            return 1
        if "error" in statuses:
            return 2
        return 0

    def counts(self) -> dict[str, int]:
        counts = {"runs": len(self.outcomes), "passed": 0, "failed": 0, "error": 0}
        for outcome in self.outcomes:
            counts[outcome.status] += 1
        counts["invalid"] = sum(1 for o in self.outcomes if o.valid is False)
        counts["unknown"] = sum(1 for o in self.outcomes if o.valid == UNKNOWN)
        counts["bugs_caught"] = sum(
            1 for o in self.outcomes if o.case.expect == "invalid" and o.valid is False
        )
        counts["bugs_missed"] = sum(
            1 for o in self.outcomes if o.case.expect == "invalid" and o.valid is not False
        )
        return counts

    def entries(self) -> list[dict[str, Any]]:
        """One row per matrix entry and DB label, in run order: a nightly's (bug, mode) pairs and controls.

        Each row has the entry's ``entry`` name, ``label`` (``raft bug-vote-twice``), ``workload``,
        ``nemesis`` and ``expect``; ``runs``; ``met``, the runs that met the expectation (a known bug
        caught, a control valid); ``valid``, ``invalid``, ``unknown`` (a crashed run is unknown); and
        ``rate``: ``met``/``runs`` with its 95% interval, the entry's ``target`` and whether it is
        ``below_target`` (``harness.analysis.rates.Rate``).
        """
        rows: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
        for outcome in self.outcomes:
            case = outcome.case
            nemesis = ",".join(case.nemesis) or "none"
            row = rows.setdefault(
                (case.group, case.label, case.workload, nemesis, case.expect),
                {"entry": case.group, "label": case.label, "workload": case.workload, "nemesis": nemesis,
                 "expect": case.expect, "runs": 0, "met": 0, "valid": 0, "invalid": 0, "unknown": 0,
                 "target": case.target},
            )
            row["runs"] += 1
            row["met"] += outcome.status == "passed"
            row["valid" if outcome.valid is True else "invalid" if outcome.valid is False else "unknown"] += 1
        for row in rows.values():
            row["rate"] = Rate(row["met"], row["runs"], row["target"]).to_json()
        return list(rows.values())


def suite_directory(store: Path, name: str, started: datetime) -> Path:
    """``store/suites/<name>/<YYYYMMDDTHHMMSS>/``, made anew (``-2``, ``-3``... when that second is taken)."""
    return stamped_directory(Path(store) / SUITES_DIR / name, started)


def _relative(path: Path | None, store: Path) -> str | None:
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(store.resolve()))
    except ValueError:
        return str(path)


def _case_json(case: Case) -> dict[str, Any]:
    return {
        "name": case.name,
        "group": case.group,
        "db": case.db,
        "db_options": dict(case.db_options),
        "workload": case.workload,
        "nemesis": list(case.nemesis),
        "seed": case.seed,
        "repetition": case.repetition,
        "time_limit": case.time_limit,
        "options": dict(case.options),
        "expect": case.expect,
        "target": case.target,
    }


def suite_record(
    suite: Suite,
    started: datetime,
    store: Path,
    runs: Sequence[CaseRun | None],
    outcomes: Sequence[CaseOutcome] = (),
) -> dict[str, Any]:
    """``suite.json``: the suite, each case with its run directory (relative to the store), and outcomes."""
    by_index = {o.case.index: o for o in outcomes}
    entries = []
    for case, run in zip(suite.cases, runs, strict=False):
        entry: dict[str, Any] = {**_case_json(case), "path": _relative(run.run_dir, store) if run else None}
        if run is not None:
            entry.update(command=run.command, error=run.error, seconds=round(run.seconds, 3))
        outcome = by_index.get(case.index)
        if outcome is not None:
            entry.update(valid=outcome.valid, status=outcome.status, failed_checkers=outcome.failed_checkers)
        entries.append(entry)
    return {
        "name": suite.name,
        "file": str(suite.path),
        "description": suite.description,
        "started": started.astimezone(UTC).strftime(TIMESTAMP_FORMAT),
        "cases": len(suite.cases),
        "runs": entries,
    }


def judge(
    cases: Sequence[Case], runs: Sequence[CaseRun], verdicts: Mapping[Path, Verdict]
) -> list[CaseOutcome]:
    """Each case's outcome from the analysis verdicts by run directory (a crash is unknown).

    A run that crashed or was interrupted names its cause first, as ``harness``, ahead of what the
    checkers said about the little it recorded (a run that crashed before its first operation has no
    history, and "history.jsonl: no such file" is a consequence, not the cause)."""
    outcomes = []
    for case, run in zip(cases, runs, strict=True):
        found = verdicts.get(Path(run.run_dir).resolve()) if run.run_dir else None
        if found is None:
            reason = run.error or "the run left no stored directory"
            outcomes.append(CaseOutcome(case, run, UNKNOWN, {"harness": reason}))
            continue
        valid, failed, invalid = found
        if run.error:
            failed = {"harness": run.error, **{k: v for k, v in failed.items() if k != "harness"}}
            if valid is True:
                valid = UNKNOWN
        outcomes.append(CaseOutcome(case, run, valid, failed, tuple(invalid)))
    return outcomes


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


def stored_verdicts(stored: Sequence[StoredRun]) -> dict[Path, Verdict]:
    """Each run's :data:`Verdict` as its own ``results.json`` states it (the direct judge at the run's end,
    or the record of its interruption); a run without a readable one is left out (unknown)."""
    verdicts: dict[Path, Verdict] = {}
    for run in stored:
        try:
            results = read_json(run.path / RESULTS)
        except StoreError:
            continue
        checkers = results.get("checkers") if isinstance(results, dict) else None
        if not isinstance(checkers, dict):
            continue
        entries = {name: entry for name, entry in checkers.items() if isinstance(entry, dict)}
        failed = {name: str(entry.get("summary", "")) for name, entry in entries.items() if entry.get("valid") is not True}
        invalid = tuple(name for name, entry in entries.items() if entry.get("valid") is False)
        verdicts[run.path] = (results.get("valid", UNKNOWN), failed, invalid)
    return verdicts


# --- reporting -------------------------------------------------------------------------------------


def _xml_text(text: str) -> str:
    """Text safe for XML 1.0: characters it forbids (controls, lone surrogates) as \\xNN / \\uNNNN."""
    out = []
    for char in text:
        code = ord(char)
        if code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or code >= 0x10000:
            out.append(char)
        else:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return "".join(out)


def _failure_text(outcome: CaseOutcome, store: Path) -> str:
    lines = []
    if outcome.case.expect == "invalid" and outcome.valid is not False:
        what = outcome.case.label or "the expected anomaly"
        lines.append(f"missed a known bug: {what} was switched on, but no checker found an anomaly")
    for checker, summary in outcome.failed_checkers.items():
        lines.append(f"{checker}: {summary}")
    lines.append(f"reproduce: {outcome.run.command}")
    if outcome.run.run_dir is not None:
        lines.append(f"run: {_relative(outcome.run.run_dir, store)}")
    return "\n".join(lines)


def junit_document(
    suite: Suite, outcomes: Sequence[CaseOutcome], started: datetime, store: Path
) -> ElementTree.Element:
    """JUnit XML as Jenkins, GitLab and GitHub reporters read it: ``testsuites`` > ``testsuite`` >
    one ``testcase`` per run; ``failure`` for an anomaly or a missed bug, ``error`` for unknown or a
    crash, each carrying the checker summaries and the reproduce command."""
    failures = sum(1 for o in outcomes if o.status == "failed")
    errors = sum(1 for o in outcomes if o.status == "error")
    total_time = sum(o.run.seconds for o in outcomes)
    counts = {"tests": str(len(outcomes)), "failures": str(failures), "errors": str(errors)}
    root = ElementTree.Element("testsuites", {"name": suite.name, **counts, "time": f"{total_time:.3f}"})
    testsuite = ElementTree.SubElement(
        root,
        "testsuite",
        {
            "name": suite.name,
            **counts,
            "skipped": "0",
            "time": f"{total_time:.3f}",
            "timestamp": started.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
            "hostname": socket.gethostname() or "localhost",
        },
    )
    properties = ElementTree.SubElement(testsuite, "properties")
    ElementTree.SubElement(properties, "property", {"name": "suite_file", "value": str(suite.path)})
    for outcome in outcomes:
        case = outcome.case
        testcase = ElementTree.SubElement(
            testsuite,
            "testcase",
            {"classname": case.classname, "name": case.name, "time": f"{outcome.run.seconds:.3f}"},
        )
        status = outcome.status
        valid_word = {True: "valid", False: "invalid"}.get(outcome.valid, UNKNOWN)  # type: ignore[arg-type]
        if status == "failed":
            if case.expect == "invalid":
                message = f"missed known bug ({case.label or 'none named'}): the run was {valid_word}"
                kind = "missed-bug"
            else:
                message = f"invalid: {', '.join(outcome.invalid_checkers) or 'a checker'} found an anomaly"
                kind = "invalid"
            element = ElementTree.SubElement(
                testcase, "failure", {"message": _xml_text(message), "type": kind}
            )
            element.text = _xml_text(_failure_text(outcome, store))
        elif status == "error":
            kind = "crashed" if outcome.run.error else UNKNOWN
            reasons = "; ".join(f"{k}: {v}" for k, v in outcome.failed_checkers.items()) or "could not decide"
            element = ElementTree.SubElement(
                testcase, "error", {"message": _xml_text(f"{kind}: {reasons}"[:500]), "type": kind}
            )
            element.text = _xml_text(_failure_text(outcome, store))
        out = [f"verdict: {valid_word} (expected {case.expect})", f"reproduce: {outcome.run.command}"]
        if outcome.run.run_dir is not None:
            run_dir = _relative(outcome.run.run_dir, store)
            out += [f"run: {run_dir}", f"results: {run_dir}/results.json", f"report: {run_dir}/report.html"]
        if case.expect == "invalid" and outcome.valid is False:
            out.append(f"known bug caught by: {', '.join(outcome.invalid_checkers) or 'a checker'}")
        under = _under_exercised(outcome.run.run_dir)
        if under:
            out.append(f"{under}: valid, but under-exercised" if outcome.valid is True else under)
            ElementTree.SubElement(properties, "property", {"name": f"under-exercised {case.name}",
                                                            "value": _xml_text(under)})
        ElementTree.SubElement(testcase, "system-out").text = _xml_text("\n".join(out))
    return root


def _under_exercised(run_dir: Path | None) -> str | None:
    """``harness.coverage``'s sentence for a stored run that applied little of its fault schedule."""
    if run_dir is None:
        return None
    try:
        coverage = read_json(Path(run_dir) / RESULTS).get("coverage") or {}
    except (StoreError, AttributeError):
        return None
    text = coverage.get("under_exercised") if isinstance(coverage, dict) else None
    return text if isinstance(text, str) else None


def write_junit(
    path: Path, suite: Suite, outcomes: Sequence[CaseOutcome], started: datetime, store: Path
) -> None:
    root = junit_document(suite, outcomes, started, store)
    ElementTree.indent(root)
    temporary = path.with_name(f".{path.name}.tmp")
    ElementTree.ElementTree(root).write(temporary, encoding="utf-8", xml_declaration=True)
    os.replace(temporary, path)


def suite_summary(suite: Suite, result: SuiteResult, started: datetime) -> dict[str, Any]:
    """``summary.json``: the counts, one line per entry and label, and one line per run, for the suite's
    summary page and the index."""
    return {
        "name": suite.name,
        "started": started.astimezone(UTC).strftime(TIMESTAMP_FORMAT),
        "exit_code": result.exit_code,
        "counts": result.counts(),
        "entries": result.entries(),
        "runs": [
            {
                "name": o.case.name,
                "status": o.status,
                "valid": o.valid,
                "expect": o.case.expect,
                "path": o.run.run_dir and str(o.run.run_dir),
                "failed_checkers": o.failed_checkers,
                "invalid_checkers": list(o.invalid_checkers),
                "under_exercised": _under_exercised(o.run.run_dir),
                "command": o.run.command,
            }
            for o in result.outcomes
        ],
    }


def select_cases(suite: Suite, patterns: Sequence[str]) -> Suite:
    """The suite with only the cases whose name (``harness suite --list``) or matrix entry name contains
    one of ``patterns`` (``harness suite --only``), numbered again from 1 in file order. No patterns: the
    whole suite. Raises :class:`SuiteError` when no case matches."""
    if not patterns:
        return suite
    kept = [c for c in suite.cases if any(p in c.name or p in c.group for p in patterns)]
    if not kept:
        wanted = ", ".join(repr(p) for p in patterns)
        raise SuiteError(f"{suite.path}: no run matches --only {wanted}; harness suite {suite.path} --list "
                         "shows the runs' names")
    return replace(suite, cases=tuple(replace(c, index=i) for i, c in enumerate(kept)))


SIM_CASE_SECONDS = 10.0
"""What a simulated case costs about, whatever its time limit (virtual time runs faster than real)."""
CASE_OVERHEAD_SECONDS = 30.0
"""What a container case costs beyond its time limit: deployment, recovery, final phase, teardown, check."""


def case_cost(case: Case) -> float:
    """The seconds a case takes about, to balance shards (:func:`shard_cases`)."""
    if case.options.get("platform") == PLATFORM_SIM:
        return SIM_CASE_SECONDS
    return case.time_limit + CASE_OVERHEAD_SECONDS


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` (``harness suite --shard``): the K-th of N slices, 1 <= K <= N. Raises ValueError."""
    parts = text.split("/")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"--shard {text!r} is not K/N (the K-th of N slices, e.g. 2/4)")
    k, n = int(parts[0]), int(parts[1])
    if not 1 <= k <= n:
        raise ValueError(f"--shard {text!r}: K must be between 1 and N")
    return k, n


def shard_cases(suite: Suite, k: int, n: int) -> Suite:
    """The K-th of N disjoint slices of the suite's cases, balanced by :func:`case_cost`: every case goes,
    costliest first (file order among equals), to the slice with the least cost so far (the lowest-numbered
    among equals). The slices' union is the whole suite, and the same file always gives the same slices;
    each keeps its cases in file order, numbered again from 1. A nightly spread over N CI machines runs
    ``--shard 1/N`` .. ``--shard N/N`` and merges their stores with ``harness analyze --summary``."""
    loads = [0.0] * n
    slice_of: dict[int, int] = {}
    for case in sorted(suite.cases, key=lambda c: (-case_cost(c), c.index)):
        target = min(range(n), key=lambda i: (loads[i], i))
        slice_of[case.index] = target
        loads[target] += case_cost(case)
    kept = [c for c in suite.cases if slice_of[c.index] == k - 1]
    if not kept:
        raise SuiteError(f"{suite.path}: --shard {k}/{n} is empty: the suite has {len(suite.cases)} runs; use at "
                         "most that many shards")
    return replace(suite, cases=tuple(replace(c, index=i) for i, c in enumerate(kept)))


def with_store(suite: Suite, store: str | None) -> Suite:
    """The suite with its store replaced (the CLI's ``--store``)."""
    return suite if store is None else replace(suite, store=store)


def dumps_case_list(suite: Suite) -> str:
    """The expanded matrix, one run per line (``harness suite --list``)."""
    return "\n".join(
        f"{c.index + 1:4d}  {c.name}  (expect {c.expect}, {c.time_limit:g} s)" for c in suite.cases
    )
