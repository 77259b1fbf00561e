"""Shards of one suite merged into one record of the night.

``harness suite FILE --shard K/N`` on N machines leaves N suite directories, one in each machine's store;
:func:`merge_shards` writes one ``suite.json``, ``junit.xml``, ``summary.json`` and ``suite.html`` from
them into the store that gathers the night, as one machine running the whole file would have written
them (``harness analyze --summary SHARD-STORE...`` calls it, beside the dataset's cross-run summary).

A shard's record says which shard it is (``"shard": "K/N"``), what its seeds were drawn from
(``seed_base``) and each case's place in the whole file (``position``), so the merged record lists the
cases in file order again. Records are grouped by suite name, N and seed base (without a seed base, by
night); a group that lacks some of its N shards is still merged, the missing shards are named in its
``suite.json`` and ``summary.json``, and the night is then at best unknown (exit 2): a shard whose job
died is not a pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.analysis.discovery import SUITE_JSON, suite_night
from harness.report.publish import write_index_safely, write_suite_page_safely
from harness.store import TIMESTAMP_FORMAT, StoreError, read_json, write_json
from harness.suite.file import Case, Suite, SuiteError, parse_shard
from harness.suite.outputs import (
    JUNIT,
    SUMMARY,
    SuiteResult,
    Verdict,
    judge,
    suite_directory,
    suite_record,
    suite_summary,
    write_junit,
)
from harness.suite.runner import CaseRun

SUITES = "suites"


@dataclass(frozen=True)
class MergedSuite:
    """One night's suite put together from its shards: where its record is, and what it says."""

    directory: Path
    name: str
    shards: tuple[int, ...]
    """The K of every shard found, in order."""
    of: int
    """N: how many shards the suite was cut into."""
    result: SuiteResult

    @property
    def missing(self) -> tuple[int, ...]:
        return tuple(k for k in range(1, self.of + 1) if k not in self.shards)

    @property
    def exit_code(self) -> int:
        """The suite's exit code (``harness suite``'s), at least 2 when a shard is missing."""
        code = self.result.exit_code
        return 2 if code == 0 and self.missing else code

    def describe(self) -> str:
        """One line for the console: what was merged, the counts, and where the record is."""
        counts = self.result.counts()
        missing = (f"; MISSING shard{'s' if len(self.missing) > 1 else ''} "
                   f"{', '.join(f'{k}/{self.of}' for k in self.missing)}") if self.missing else ""
        return (f"suite {self.name}: {len(self.shards)} of {self.of} shards merged{missing}; "
                f"{counts['passed']} passed, {counts['failed']} failed, {counts['error']} unknown or crashed; "
                f"known bugs caught {counts['bugs_caught']}, missed {counts['bugs_missed']}; record in "
                f"{self.directory}, JUnit in {self.directory / JUNIT}")


def find_shard_records(paths: Iterable[str | Path], store: str | Path | None = None) -> list[Path]:
    """The suite directories among ``paths`` that ``harness suite --shard`` wrote, except those of
    ``store`` itself (what the shards are gathered into: a shard's own store analysed on its machine is not
    a night to merge). Each path is a suite directory, a store (its ``suites/<name>/<stamp>/``) or a
    directory of stores (one level down: the shards' stores downloaded side by side)."""
    into = Path(store).resolve() if store is not None else None
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if (path / SUITE_JSON).is_file():
            candidates = [path]
        else:
            stores = [path] if (path / SUITES).is_dir() else (
                sorted(p for p in path.iterdir() if (p / SUITES).is_dir()) if path.is_dir() else [])
            candidates = [r.parent for store in stores for r in sorted((store / SUITES).glob(f"*/*/{SUITE_JSON}"))]
        for directory in candidates:
            try:
                data = read_json(directory / SUITE_JSON)
            except StoreError:
                continue  # a damaged record is not a shard of anything
            if directory.resolve().parent.parent.parent == into:
                continue
            if isinstance(data, dict) and data.get("shard") and directory.resolve() not in found:
                found.append(directory.resolve())
    return found


def _case(entry: Mapping[str, Any]) -> Case:
    """A case as its shard's ``suite.json`` recorded it (``harness.suite.outputs.suite_record``)."""
    return Case(
        index=0,
        db=entry["db"],
        db_options=dict(entry.get("db_options") or {}),
        label=entry.get("label") or "",
        workload=entry["workload"],
        nemesis=tuple(entry.get("nemesis") or ()),
        seed=entry["seed"],
        repetition=entry["repetition"],
        time_limit=float(entry["time_limit"]),
        options=dict(entry.get("options") or {}),
        expect=entry.get("expect", "valid"),
        group=entry.get("group") or "",
        target=entry.get("target"),
        position=entry.get("position"),
    )


def _run(entry: Mapping[str, Any], store: Path) -> CaseRun | None:
    """What running the case left, or ``None`` for a case its shard never ran (interrupted first)."""
    if "command" not in entry:
        return None
    path = entry.get("path")
    return CaseRun(
        run_dir=(store / path).resolve() if path else None,
        command=entry["command"],
        error=entry.get("error"),
        seconds=float(entry.get("seconds") or 0.0),
    )


def _started(data: Mapping[str, Any]) -> datetime:
    return datetime.strptime(str(data["started"])[:15], TIMESTAMP_FORMAT).replace(tzinfo=UTC)


def _read_shard(directory: Path) -> tuple[dict[str, Any], int, int]:
    try:
        data = read_json(directory / SUITE_JSON)
        k, n = parse_shard(str(data["shard"]))
        _started(data)
    except (StoreError, KeyError, TypeError, ValueError) as exc:
        raise SuiteError(f"{directory / SUITE_JSON}: not a shard's suite record ({exc})") from None
    return data, k, n


def merge_shards(
    records: Sequence[Path], store: str | Path, verdicts: Mapping[Path, Verdict] | None = None
) -> list[MergedSuite]:
    """Merge the shards' suite directories ``records`` (:func:`find_shard_records`) into one suite
    directory per night in ``store``, and return them.

    Each run is judged against its case's expectation from ``verdicts`` (run directory -> verdict, from
    an analysis of the shards' runs that just ran), else from what its shard recorded. A shard recorded
    twice (a job run again) counts once: its later start. Raises :class:`SuiteError` for a record that
    is not a shard's.
    """
    store = Path(store).resolve()
    groups: dict[tuple[str, int, str], dict[int, tuple[Path, dict[str, Any]]]] = {}
    for directory in records:
        data, k, n = _read_shard(directory)
        base = data.get("seed_base")
        night = f"seed base {base}" if base is not None else f"night {suite_night(data, directory)}"
        shards = groups.setdefault((str(data.get("name") or directory.parent.name), n, night), {})
        if k not in shards or _started(shards[k][1]) < _started(data):
            shards[k] = (directory, data)
    merged = []
    for (name, n, _), shards in sorted(groups.items()):
        merged.append(_merge_one(name, n, shards, store, verdicts or {}))
    if merged:
        write_index_safely(store)
    return merged


def _merge_one(
    name: str, n: int, shards: Mapping[int, tuple[Path, dict[str, Any]]], store: Path,
    verdicts: Mapping[Path, Verdict],
) -> MergedSuite:
    rows: list[tuple[tuple[Any, ...], Case, CaseRun | None, dict[str, Any]]] = []
    for k, (directory, data) in sorted(shards.items()):
        shard_store = directory.parent.parent.parent  # suites/<name>/<stamp>/: the store is three levels up
        for number, entry in enumerate(data.get("runs") or []):
            case = _case(entry)
            order = (case.position is None, case.position or 0, k, number)
            rows.append((order, case, _run(entry, shard_store), entry))
    rows.sort(key=lambda row: row[0])
    cases = [replace(case, index=i) for i, (_, case, _, _) in enumerate(rows)]
    runs = [run for _, _, run, _ in rows]
    recorded: dict[Path, Verdict] = {}
    for (_, _, run, entry) in rows:
        if run is not None and run.run_dir is not None and "valid" in entry:
            recorded[run.run_dir] = (entry["valid"], dict(entry.get("failed_checkers") or {}),
                                     tuple(entry.get("invalid_checkers") or ()))
    finished = [(case, run) for case, run in zip(cases, runs, strict=True) if run is not None]
    outcomes = judge([c for c, _ in finished], [r for _, r in finished], {**recorded, **verdicts})
    first = min(_started(data) for _, data in shards.values())
    some = next(iter(shards.values()))[1]
    seed_base = some.get("seed_base")
    suite = Suite(name=name, path=Path(str(some.get("file") or "")), cases=tuple(cases), store=str(store),
                  description=str(some.get("description") or ""),
                  seed_base=seed_base if isinstance(seed_base, int) else None)
    directory = suite_directory(store, name, first)
    result = SuiteResult(directory=directory, outcomes=outcomes)
    found = MergedSuite(directory=directory, name=name, shards=tuple(sorted(shards)), of=n, result=result)
    sources = {"shards": [f"{k}/{n}" for k in found.shards], "missing_shards": list(found.missing),
               "merged_from": [str(shards[k][0]) for k in found.shards]}
    write_json(directory / SUITE_JSON, {**suite_record(suite, first, store, runs, outcomes), **sources})
    write_junit(directory / JUNIT, suite, outcomes, first, store)
    summary = suite_summary(suite, result, first)
    write_json(directory / SUMMARY, {**summary, "exit_code": found.exit_code, **sources})
    write_suite_page_safely(directory)
    return found
