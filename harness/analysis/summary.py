"""Cross-run views over the dataset: how each kind of test has been doing, night after night.

One row per workload x nemesis x mode x bugs: how many runs, how many invalid and unknown, the median
throughput of its runs (ok operations per second), the 99th percentile latency over all its ok
operations, and for every checker that is failing now, the first night of its current failing streak
(the nights before it, back to the last night the group ran without that checker failing).

Each row also has its rate night over night (``rates``): per night, how many runs met the group's
expectation — a group with bugs is a known (bug, mode) pair whose runs must be caught (invalid), a group
without is a control whose runs must be valid — with a 95% interval (``harness.analysis.rates``). Where a
suite file set a ``target`` for the group's runs, the row is flagged ``below_target`` when its last night's
rate is under it: the drop a nightly must not hide.

A night is the date (UTC) its suite started, or the run's own date for a run outside a suite.

:func:`summarize` computes it with Spark from ``store/dataset``; :func:`write_summary` writes it as
``store/summary.json`` for the index page; :func:`render_summary` prints it as a rich table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from checkers.history import NEMESIS
from checkers.leader import STATUS
from harness.analysis.dataset import SUMMARY_FILE, read_table
from harness.analysis.rates import Rate
from harness.analysis.storage import LocalStorage, Storage, json_document

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

GROUP = ("workload", "nemesis", "mode", "bugs")


class SummaryError(ValueError):
    """Nothing to summarise: one sentence saying what to run first."""


@dataclass(frozen=True)
class GroupSummary:
    """One workload x nemesis x mode x bugs combination across every analysed run."""

    workload: str | None
    nemesis: str | None
    mode: str | None
    bugs: str | None
    runs: int
    invalid: int
    unknown: int
    median_ops_per_s: float | None
    p99_latency_ms: float | None
    first_night: str | None
    last_night: str | None
    failing_since: dict[str, str] = field(default_factory=dict)
    rates: tuple[dict[str, Any], ...] = ()
    """Per night, oldest first: ``{"night", **Rate.to_json()}`` (runs that met the group's expectation)."""
    target: float | None = None
    below_target: bool = False
    """Whether the last night's rate is under ``target``."""


@dataclass(frozen=True)
class Summary:
    generated_at: str
    store: str
    groups: tuple[GroupSummary, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "generated_at": self.generated_at,
            "store": self.store,
            "groups": [asdict(g) for g in self.groups],
        }


def failing_since(nights: Sequence[str], failed: Mapping[str, set[str]]) -> dict[str, str]:
    """For each checker failing on the last night in ``nights`` (sorted), the first night of its streak.

    ``failed`` maps a checker to the nights on which it failed at least once. A checker that did not
    fail on the last night is not failing now and is left out.
    """
    if not nights:
        return {}
    since: dict[str, str] = {}
    for checker, bad in failed.items():
        if nights[-1] not in bad:
            continue
        first = nights[-1]
        for night in reversed(nights):
            if night not in bad:
                break
            first = night
        since[checker] = first
    return dict(sorted(since.items()))


def expectation(bugs: str | None) -> str:
    """What a group's runs must be: ``"invalid"`` for a known bug (caught), ``"valid"`` for a control."""
    return "valid" if bugs in (None, "", "none") else "invalid"


def night_rates(
    nights: Iterable[tuple[str, int, int]], target: float | None
) -> tuple[tuple[dict[str, Any], ...], bool]:
    """``(night, runs, met)`` per night as :class:`~harness.analysis.rates.Rate` entries, oldest first,
    and whether the last night's rate is under ``target``."""
    rates = [(night, Rate(met, runs, target)) for night, runs, met in sorted(nights)]
    below = bool(rates) and rates[-1][1].below_target
    return tuple({"night": night, **rate.to_json()} for night, rate in rates), below


def _key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row[c] for c in GROUP)


def summarize(spark: SparkSession, store: PurePath, storage: Storage | None = None) -> Summary:
    """The cross-run view of every run analysed into ``store``'s dataset. Raises :class:`SummaryError`."""
    from pyspark.sql import functions as F

    storage = storage or LocalStorage()
    runs = read_table(spark, store, "runs", storage)
    if runs is None:
        shown = storage.display(store)
        raise SummaryError(
            f"{shown} has no analysed runs (no {shown}/dataset/runs); run harness analyze on the store first"
        )
    runs = runs.fillna({"night": "unknown"})
    counts = (
        runs.groupBy(*GROUP)
        .agg(
            F.count("*").alias("runs"),
            F.sum(F.when(F.col("valid") == "false", 1).otherwise(0)).alias("invalid"),
            F.sum(F.when(F.col("valid") == "unknown", 1).otherwise(0)).alias("unknown"),
            F.median("ops_per_s").alias("median_ops_per_s"),
            F.min("night").alias("first_night"),
            F.max("night").alias("last_night"),
        )
        .collect()
    )
    latency: dict[tuple[Any, ...], float | None] = {}
    operations = read_table(spark, store, "operations", storage)
    if operations is not None:
        ok = operations.where(
            (F.col("type") == "ok")
            & (F.col("process") != NEMESIS)
            & (F.col("f") != STATUS)
            & F.col("latency_ns").isNotNull()
        ).select("test", "run", "latency_ns")
        for row in (
            ok.join(runs.select("test", "run", *GROUP), ["test", "run"])
            .groupBy(*GROUP)
            .agg(F.percentile_approx("latency_ns", 0.99, 10_000).alias("p99"))
            .collect()
        ):
            latency[_key(row)] = None if row["p99"] is None else row["p99"] / 1e6
    nights: dict[tuple[Any, ...], set[str]] = {}
    for row in runs.select(*GROUP, "night").distinct().collect():
        nights.setdefault(_key(row), set()).add(row["night"])
    failed: dict[tuple[Any, ...], dict[str, set[str]]] = {}
    verdicts = read_table(spark, store, "verdicts", storage)
    if verdicts is not None:
        for row in (
            verdicts.where(F.col("valid") == "false")
            .join(runs.select("test", "run", "night", *GROUP), ["test", "run"])
            .select(*GROUP, "checker", "night")
            .distinct()
            .collect()
        ):
            failed.setdefault(_key(row), {}).setdefault(row["checker"], set()).add(row["night"])
    per_night: dict[tuple[Any, ...], list[tuple[str, int, int]]] = {}
    for row in (
        runs.groupBy(*GROUP, "night")
        .agg(
            F.count("*").alias("runs"),
            F.sum(F.when(F.col("valid") == "true", 1).otherwise(0)).alias("valid"),
            F.sum(F.when(F.col("valid") == "false", 1).otherwise(0)).alias("invalid"),
        )
        .collect()
    ):
        met = row["valid"] if expectation(row["bugs"]) == "valid" else row["invalid"]
        per_night.setdefault(_key(row), []).append((row["night"], row["runs"], met))
    targets = {
        _key(row): row["target"]
        for row in runs.where(F.col("target").isNotNull()).groupBy(*GROUP).agg(F.max("target").alias("target"))
        .collect()
    }
    groups = []
    for row in sorted(counts, key=lambda r: tuple(str(v) for v in _key(r))):
        key = _key(row)
        median = row["median_ops_per_s"]
        groups.append(
            GroupSummary(
                workload=row["workload"],
                nemesis=row["nemesis"],
                mode=row["mode"],
                bugs=row["bugs"],
                runs=row["runs"],
                invalid=row["invalid"],
                unknown=row["unknown"],
                median_ops_per_s=None if median is None else round(float(median), 3),
                p99_latency_ms=None if latency.get(key) is None else round(latency[key], 3),
                first_night=row["first_night"],
                last_night=row["last_night"],
                failing_since=failing_since(sorted(nights.get(key, ())), failed.get(key, {})),
                rates=(rates := night_rates(per_night.get(key, ()), targets.get(key)))[0],
                target=targets.get(key),
                below_target=rates[1],
            )
        )
    generated = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Summary(generated_at=generated, store=storage.display(store), groups=tuple(groups))


def write_summary(store: PurePath, summary: Summary, storage: Storage | None = None) -> PurePath:
    """``store/summary.json``, read by the index page."""
    storage = storage or LocalStorage()
    path = store / SUMMARY_FILE
    storage.write_bytes(path, json_document(summary.to_json()))
    return path


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def render_summary(summary: Summary | Iterable[GroupSummary], console: Console) -> None:
    """Print the view as a table: bold red where the last night's rate is below its target, red where runs
    were invalid, yellow where only unknown."""
    groups = summary.groups if isinstance(summary, Summary) else tuple(summary)
    table = Table(title="runs by workload x nemesis x mode x bugs", show_lines=False)
    for column, justify in (
        ("workload", "left"),
        ("nemesis", "left"),
        ("mode", "left"),
        ("bugs", "left"),
        ("runs", "right"),
        ("invalid", "right"),
        ("unknown", "right"),
        ("median ops/s", "right"),
        ("p99 latency ms", "right"),
        ("nights", "left"),
        ("met by night (95% interval)", "left"),
        ("failing since", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for group in groups:
        style = "bold red" if group.below_target else "red" if group.invalid else "yellow" if group.unknown else None
        failing = ", ".join(f"{checker} {night}" for checker, night in group.failing_since.items()) or "-"
        nights = (
            group.first_night
            if group.first_night == group.last_night
            else f"{group.first_night}..{group.last_night}"
        )
        table.add_row(
            str(group.workload),
            str(group.nemesis),
            str(group.mode),
            str(group.bugs),
            str(group.runs),
            str(group.invalid),
            str(group.unknown),
            _number(group.median_ops_per_s),
            _number(group.p99_latency_ms, 2),
            str(nights),
            _rates_cell(group),
            failing,
            style=style,
        )
    console.print(table)


RATES_SHOWN = 3
"""Nights a summary table row shows the rate of (the latest); summary.json keeps every night."""


def _rates_cell(group: GroupSummary) -> str:
    """``11-26 8/10 (49-94%); 11-27 5/10 (24-76%), below target 80%``: the latest nights."""
    parts = []
    for entry in group.rates[-RATES_SHOWN:]:
        rate = Rate(entry["met"], entry["runs"], entry["target"])
        night = str(entry["night"])
        parts.append(f"{night[5:] if len(night) == 10 else night} {rate.describe()}")
    return "; ".join(parts) or "-"
