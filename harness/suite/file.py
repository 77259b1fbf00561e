"""A suite file: TOML parsed and validated into cases (:class:`Case`, :class:`Suite`), before any run starts;
choosing a slice of them (``--only``, ``--shard K/N``) and listing them (``--list``).

The file's format is the package's docstring (``harness.suite``). An unknown key or a bad value is one
:class:`SuiteError` naming the file, the table and the key.
"""

from __future__ import annotations

import itertools
import os
import random
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.analysis.rates import check_target
from harness.db.plugin import DBPlugin, Option, PluginError, load_plugin

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
    "storm_pacing": str,
    "min_coverage": (int, float),
    "workload_options": dict,
}


PLATFORM_SIM = "sim"
RUN_CHECK_TIMEOUT = 10.0
"""Seconds each container run's own linearizability check may take inside a suite (Spark judges)."""


MATRIX_KEYS = ("workloads", "nemeses", "seeds", "repetitions", "expect", "name", "target")


DEFAULT_TIME_LIMIT = 60.0


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
    position: int | None = None
    """The case's place in the whole expanded file, kept when ``--only`` or ``--shard`` number the cases
    again: merged shards (``harness.suite.merge``) put their cases back in file order by it."""

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
    shard: tuple[int, int] | None = None
    """``(K, N)`` when only the K-th of N slices of the file is kept (``--shard``)."""
    seed_base: int | None = None
    """What the file's random seeds (``seeds = N``) were drawn from, when given (``--seed-base``): shards
    run on several machines draw the same seeds only so."""


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
                            position=len(cases),
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
    seed_base: int | None = None,
) -> Suite:
    """Read, expand and check a suite file: every case is composed (``compose``, by default the
    controller's) before anything runs. Raises :class:`SuiteError`.

    ``rng`` draws the seeds of ``seeds = N``; without it they come from ``seed_base`` when given (the same
    seeds on every machine: ``harness suite --seed-base``, what shards of one night share), else fresh."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SuiteError(f"{path}: no such suite file; see suites/ for examples") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: cannot read the suite file ({exc})") from None
    rng = rng or random.Random(seed_base)
    suite = replace(parse_suite(text, path, vocabulary or controller_vocabulary(), rng), seed_base=seed_base)
    check = compose or compose_case
    for case in suite.cases:
        try:
            check(case, suite.store)
        except ValueError as exc:
            raise SuiteError(f"{path}: run {case.name!r} cannot be composed: {exc}") from None
    return suite


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
    """``K/N`` (``harness suite --shard``): the K-th of N slices, 1 <= K <= N. Raises ValueError with one
    sentence naming what is wrong and what to give instead."""
    parts = text.split("/")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"--shard {text!r} is not K/N: give the K-th of N slices as two whole numbers, "
                         "e.g. --shard 2/4")
    k, n = int(parts[0]), int(parts[1])
    if n < 1:
        raise ValueError(f"--shard {text!r}: N, the number of slices, must be at least 1, e.g. --shard 1/1")
    if not 1 <= k <= n:
        raise ValueError(f"--shard {text!r}: K must be between 1 and {n}: the slices are --shard 1/{n} to "
                         f"--shard {n}/{n}")
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
    return replace(suite, cases=tuple(replace(c, index=i) for i, c in enumerate(kept)), shard=(k, n))


def with_store(suite: Suite, store: str | None) -> Suite:
    """The suite with its store replaced (the CLI's ``--store``)."""
    return suite if store is None else replace(suite, store=store)


def dumps_case_list(suite: Suite) -> str:
    """The expanded matrix, one run per line (``harness suite --list``)."""
    return "\n".join(
        f"{c.index + 1:4d}  {c.name}  (expect {c.expect}, {c.time_limit:g} s)" for c in suite.cases
    )


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
