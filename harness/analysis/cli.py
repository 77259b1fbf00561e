"""``harness analyze`` and ``harness suite``: the command-line faces of the pipeline and of suites.

    harness analyze PATH... [--spark-master URL] [--spark-conf KEY=VALUE]... [--store DIR] [--summary]
                            [--key-timeout S] [--quiet]
    harness analyze --summary [--store DIR]
    harness analyze SHARD-STORE... --store DIR --summary      # a night's shards: one summary, junit.xml, page
    harness suite SUITE.toml [--store DIR] [--junit PATH] [--list] [--only TEXT]... [--shard K/N]
                             [--seed-base N] [--jobs N] [--spark-master URL] [--quiet]

``PATH`` is a run directory (``store/latest``), a suite directory or a whole store: a plain path, or a
URL of any filesystem Spark reads (``file:///shared/store``, ``hdfs://namenode:8020/store``; see
:mod:`harness.analysis.storage`), as is ``--store`` of ``analyze``. The master comes from
``--spark-master``, else ``$SPARK_MASTER``, else ``local[*]``.

Exit codes (ARCHITECTURE.md): analyze: 0 every run valid, 1 any invalid, 2 any unknown and none
invalid (with ``--summary`` over shards of a suite, their runs count as the merged suite says, below);
suite: 1 an unexpected anomaly or a missed known bug, else 2 an unknown or crashed run, else 0;
both: 254 bad arguments, a bad suite file, no runs where runs were named, an unreachable Spark master.

``harness analyze --summary`` over the stores of a suite's shards (``harness suite --shard K/N`` on N
machines) also merges the shards' suite records into one suite directory of ``--store``
(:func:`harness.suite.merge_shards`): one ``suite.json``, ``junit.xml``, ``summary.json`` and
``suite.html`` for the night; the exit code is then the merged suite's (a known bug caught is a pass).

``harness/cli.py`` registers these with :func:`add_analyze_parser` and :func:`add_suite_parser`; each
parser's ``handler`` default is the function that runs it (``handler(args, console, err) -> int``).
``python -m harness.analysis`` offers the same two commands on their own.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from checkers.verdict import UNKNOWN, Valid
from harness.analysis.discovery import DiscoveryError, find_runs
from harness.analysis.pipeline import DEFAULT_KEY_TIMEOUT_S, Analysis, AnalysisOptions, analyze
from harness.analysis.progress import ConsoleProgress, Progress, SilentProgress
from harness.analysis.rates import Rate
from harness.analysis.spark import SparkUnavailable, preflight, resolve_master, spark_session
from harness.analysis.storage import (
    HadoopStorage,
    LocalStorage,
    Storage,
    StorageError,
    is_url,
    split_url,
)
from harness.analysis.summary import SummaryError, render_summary, summarize, write_summary
from harness.opportunities import entry_text
from harness.subcommand import (
    EXIT_BAD_CONFIG,
    VERDICT_WORDS,
    CommandParser,
    UsageError,
    count,
    run_command,
    seconds_or_no_limit,
)

if TYPE_CHECKING:
    from harness.suite import MergedSuite

# Lighter than the run commands' VERDICT_STYLES: these words fill a column of a table.
STYLES = {True: "green", False: "bold red", UNKNOWN: "yellow"}
# Above this many runs, only the runs that are not valid get a line of their own.
LIST_ALL_UP_TO = 40
# The most cases `harness suite --jobs` runs at once: each is a whole cluster of containers.
MAX_JOBS = 16


def key_timeout(option: float | None, default: float | None = DEFAULT_KEY_TIMEOUT_S) -> float | None:
    """``--key-timeout``: absent -> ``default``, 0 -> no limit (``None``), else the seconds."""
    if option is None:
        return default
    return None if option == 0 else option


def _spark_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spark-master",
        default=None,
        metavar="URL",
        help="Spark master (default: $SPARK_MASTER, else local[*]): local[N], spark://HOST:PORT, k8s://..., yarn",
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark configuration, e.g. spark.driver.memory=8g (repeatable)",
    )
    parser.add_argument(
        "--key-timeout",
        type=seconds_or_no_limit,
        default=None,
        metavar="S",
        help=f"seconds the linearizability search may spend per key before it says unknown "
        f"(default {DEFAULT_KEY_TIMEOUT_S:g}; 0: no limit)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars or step lines")


def add_analyze_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``harness analyze`` on ``subparsers`` (from ``ArgumentParser.add_subparsers``)."""
    parser = subparsers.add_parser(
        "analyze",
        help="analyse stored runs on Spark: results.json per run and the Parquet dataset",
        description="Analyse stored runs (run directories, suite directories or a whole store) on Spark: "
        "run every checker, write each run's results.json and the store's dataset. Exit 0 valid, "
        "1 invalid, 2 unknown, 254 bad input.",
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="run directories, suite directories or stores: paths, or URLs of any filesystem Spark reads "
        "(file:///shared/store, hdfs://namenode:8020/store)",
    )
    parser.add_argument(
        "--store",
        default=None,
        metavar="DIR|URL",
        help="the store whose dataset receives the runs (default: the runs' own store; ./store for --summary)",
    )
    parser.add_argument(
        "--summary",
        action="store_true",
        help="print the cross-run view (workload x nemesis x mode x bugs) and write store/summary.json; "
        "with the stores of a suite's shards as PATHs, also merge their suite records into one suite directory "
        "of --store (suite.json, junit.xml, summary.json, suite.html)",
    )
    _spark_options(parser)
    parser.set_defaults(handler=cmd_analyze)
    return parser


def add_suite_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``harness suite`` on ``subparsers``."""
    parser = subparsers.add_parser(
        "suite",
        help="run a matrix of tests from a TOML file, analyse them together, write junit.xml",
        description="Run every test of a suite file (one after another, or --jobs N at once), analyse them "
        "in one Spark job, and write suite.json, summary.json and junit.xml under "
        "store/suites/<name>/<time>/. Exit 0 all as expected, 1 an anomaly or a missed known bug, "
        "2 unknown, 254 a bad suite file.",
    )
    parser.add_argument("suite_file", metavar="SUITE.toml", help="the suite file (see suites/)")
    parser.add_argument(
        "--store", default=None, metavar="DIR", help="store directory (default: the suite's, ./store)"
    )
    parser.add_argument("--junit", default=None, metavar="PATH", help="also copy junit.xml here (for CI)")
    parser.add_argument("--list", action="store_true", help="print the expanded runs and exit")
    parser.add_argument(
        "--shard",
        default=None,
        metavar="K/N",
        help="run only the K-th of N disjoint slices of the suite, balanced by expected run time (after "
        "--only): a nightly spread over N CI machines, merged with harness analyze SHARD-STORE... --summary",
    )
    parser.add_argument(
        "--seed-base",
        type=int,
        default=None,
        metavar="N",
        help="draw the suite file's random seeds (seeds = COUNT) from N, so that every shard of one night "
        "draws the same ones (CI: the pipeline's id); default: fresh seeds",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="TEXT",
        help="run only the runs whose name (as --list prints it) or matrix entry name contains TEXT "
        "(repeatable: any of them), e.g. --only 'aeron bug-vote-twice' or --only bugs-all.control",
    )
    parser.add_argument(
        "--jobs",
        type=count,
        default=1,
        metavar="N",
        help=f"run up to N cases at once, each in a process of its own with its own network (default 1; "
        f"at most {MAX_JOBS})",
    )
    _spark_options(parser)
    parser.set_defaults(handler=cmd_suite)
    return parser


def parse_spark_conf(items: Sequence[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--spark-conf {item!r} is not KEY=VALUE (e.g. spark.driver.memory=8g)")
        conf[key.strip()] = value
    return conf


def _progress(args: argparse.Namespace, console: Console) -> Progress:
    return SilentProgress() if args.quiet else ConsoleProgress(console)


def _verdict(valid: Valid) -> Text:
    return Text(VERDICT_WORDS.get(valid, str(valid)), style=STYLES.get(valid, ""))


def print_analysis(analysis: Analysis, console: Console, store: str | None = None) -> None:
    """One line per run (or per run that is not valid, for big batches) and the totals; ``store`` is
    the store as the user named it (a URL for one reached through Hadoop)."""
    outcomes = sorted(analysis.outcomes, key=lambda o: (o.run.test, o.run.run))
    shown = outcomes if len(outcomes) <= LIST_ALL_UP_TO else [o for o in outcomes if o.valid is not True]
    if shown:
        table = Table(show_edge=False, show_header=True, pad_edge=False)
        table.add_column("run")
        table.add_column("verdict")
        table.add_column("ops", justify="right")
        table.add_column("what failed")
        for outcome in shown:
            failed = outcome.failed_checkers()
            first = next(iter(failed.items()), None)
            what = "" if first is None else f"{first[0]}: {first[1]}"
            if len(failed) > 1:
                what += f" (+{len(failed) - 1} more)"
            stop = (outcome.results.get("interrupted") or {}).get("summary")
            if stop:  # how the run ended comes first; the checkers' own findings after it
                invalid = next((f"; {n}: {s}" for n, s in failed.items()
                                if outcome.results["checkers"][n]["valid"] is False), "")
                what = f"{stop}{invalid}"
            table.add_row(
                f"{outcome.run.test}/{outcome.run.run}",
                _verdict(outcome.valid),
                str(outcome.results.get("ops") or 0),
                Text(what),
            )
        console.print(table)
    counts = {True: 0, False: 0, UNKNOWN: 0}
    for outcome in outcomes:
        counts[outcome.valid] += 1
    console.print(
        Text.assemble(
            ("verdict ", "bold"),
            _verdict(analysis.valid),
            f"   {len(outcomes)} runs: {counts[True]} valid, {counts[False]} invalid, {counts[UNKNOWN]} unknown; "
            f"{analysis.operations} operations; results.json in each run, dataset in "
            f"{store or analysis.store}/dataset",
        ),
        highlight=False,
    )


def _remote_root(paths: Sequence[str], store: str | None) -> str | None:
    """The filesystem of the URLs among ``paths`` and ``store`` (``hdfs://nn:8020``, ``file://``), or
    ``None`` when all are plain paths. Raises :class:`UsageError` for a mix, or URLs of two filesystems."""
    given = [*paths, *([store] if store else [])]
    urls = [text for text in given if is_url(text)]
    if not urls:
        return None
    if len(urls) != len(given):
        raise UsageError(
            "give either plain paths or URLs (file:///..., hdfs://...), not both; a store named by URL "
            "needs its runs named by URL too"
        )
    roots = {split_url(url)[0] for url in urls}
    if len(roots) > 1:
        raise UsageError(f"the URLs name {len(roots)} filesystems ({', '.join(sorted(roots))}); analyse one store at a time")
    return roots.pop()


def cmd_analyze(args: argparse.Namespace, console: Console, err: Console) -> int:
    """``harness analyze``: returns the exit code; bad input is one sentence on ``err`` and 254.

    Plain paths are found before Spark starts (a wrong path costs no JVM); URLs are found through the
    Hadoop filesystem layer of the session, so Spark starts first.
    """
    try:
        if not args.paths and not args.summary:
            raise UsageError(
                "name what to analyse: run directories (store/latest), suite directories or a store; "
                "or --summary for the cross-run view"
            )
        conf = parse_spark_conf(args.spark_conf)
        master = resolve_master(args.spark_master)
        remote = _remote_root(args.paths, args.store)
        selection = None
        if remote is None:
            selection = find_runs(args.paths, args.store) if args.paths else None
            store: PurePath = selection.store if selection else Path(args.store or "store")
            if selection is None and not Path(store).is_dir():
                raise UsageError(f"{store}: no such store; pass --store DIR")
        progress = _progress(args, err)
        analysis = None
        with spark_session(master, conf) as spark:
            storage: Storage = LocalStorage() if remote is None else HadoopStorage(spark, remote)
            if remote is not None:
                selection = find_runs(args.paths, args.store, storage) if args.paths else None
                store = selection.store if selection else split_url(args.store)[1]
            if selection is not None:
                analysis = analyze(
                    spark, selection, AnalysisOptions(key_timeout_s=key_timeout(args.key_timeout)), progress
                )
            if args.summary:
                summary = summarize(spark, store, storage)
                path = write_summary(store, summary, storage)
        merged = _merge_shards(args, store, analysis) if args.summary and remote is None else []
        if analysis is not None:
            print_analysis(analysis, console, storage.display(analysis.store))
            if analysis.reports_skipped:
                console.print(analysis.reports_skipped, highlight=False)
        if args.summary:
            render_summary(summary, console)
            console.print(f"summary written to {storage.display(path)}", highlight=False)
        for suite in merged:
            console.print(suite.describe(), highlight=False)
        return _exit_code(analysis, merged)
    except (UsageError, DiscoveryError, SparkUnavailable, SummaryError, StorageError) as exc:
        err.print(f"harness analyze: {exc}", markup=False, highlight=False)
        return EXIT_BAD_CONFIG


def _merge_shards(args: argparse.Namespace, store: PurePath, analysis: Analysis | None) -> list[MergedSuite]:
    """The suite records of shards among ``args.paths`` merged into ``store`` (``harness.suite.merge``),
    their runs judged by ``analysis`` when there was one."""
    from harness.suite import SuiteError, find_shard_records, merge_shards

    records = find_shard_records(args.paths, Path(store))
    if not records:
        return []
    verdicts = {} if analysis is None else {
        Path(o.run.path).resolve(): (o.valid, o.failed_checkers(), o.invalid_checkers()) for o in analysis.outcomes
    }
    try:
        return merge_shards(records, Path(store), verdicts)
    except SuiteError as exc:
        raise UsageError(str(exc)) from None


def _exit_code(analysis: Analysis | None, merged: Sequence[MergedSuite]) -> int:
    """The verdicts' exit code, except that runs of a merged suite count as that suite says (a known bug
    caught is a pass there): 1 if either says 1, else 2 if either says 2, else 0."""
    if not merged:
        return analysis.exit_code if analysis is not None else 0
    in_suites = {o.run.run_dir for suite in merged for o in suite.result.outcomes if o.run.run_dir is not None}
    outside = [] if analysis is None else [o for o in analysis.outcomes if Path(o.run.path).resolve() not in in_suites]
    codes = {suite.exit_code for suite in merged}
    codes |= {1 if o.valid is False else 2 for o in outside if o.valid is not True}
    return 1 if 1 in codes else 2 if 2 in codes else 0


def print_suite(result: Any, console: Console) -> None:
    """One line per case of a finished suite (a :class:`harness.suite.SuiteResult`): its expectation,
    verdict, status and the first thing that went wrong (a crashed run's cause comes first); then one
    line per entry and label: how many of its runs met the expectation."""
    table = Table(show_edge=False, pad_edge=False)
    for column in ("run", "expect", "verdict", "status", "what failed"):
        table.add_column(column)
    for outcome in result.outcomes:
        status_style = {"passed": "green", "failed": "bold red", "error": "yellow"}[outcome.status]
        first = next(iter(outcome.failed_checkers.items()), None)
        table.add_row(
            outcome.case.name,
            outcome.case.expect,
            _verdict(outcome.valid),
            Text(outcome.status, style=status_style),
            Text("" if first is None else f"{first[0]}: {first[1]}"),
        )
    console.print(table)
    entries = Table(title="by entry: known bugs caught, controls valid", show_edge=False, pad_edge=False)
    rows = result.entries()
    # how often the runs gave their known bug a chance, where the DB counts it (harness.opportunities)
    chances = any(row.get("opportunities") for row in rows)
    for column in ("entry", "runs of", "workload", "nemesis", "expect", "as expected (95% interval)", "invalid",
                   "unknown", *(["opportunities"] if chances else [])):
        entries.add_column(column, justify="left" if column in ("entry", "runs of", "workload", "nemesis", "expect",
                                                                "opportunities") else "right")
    for row in rows:
        rate = Rate(row["met"], row["runs"], row["target"])
        style = "bold red" if rate.below_target else "green" if row["met"] == row["runs"] else "yellow"
        entries.add_row(row["entry"] or "-", row["label"], row["workload"], row["nemesis"], row["expect"],
                        Text(rate.describe(), style=style), str(row["invalid"]), str(row["unknown"]),
                        *([entry_text(row.get("opportunities"))] if chances else []))
    console.print(entries)


def cmd_suite(args: argparse.Namespace, console: Console, err: Console) -> int:
    """``harness suite``: returns the exit code; a bad suite file is one sentence on ``err`` and 254."""
    from harness.suite import (
        SuiteError,
        dumps_case_list,
        load_suite,
        parse_shard,
        run_suite,
        select_cases,
        shard_cases,
        with_store,
    )

    try:
        if args.store and is_url(args.store):
            raise UsageError(
                f"--store {args.store}: a suite's runs are written by the controller on this machine, so its "
                "store is a directory here (a shared filesystem mounted here works); analyse a store "
                "elsewhere with harness analyze URL"
            )
        if args.jobs > MAX_JOBS:
            raise UsageError(
                f"--jobs {args.jobs}: at most {MAX_JOBS} cases at once (each is a cluster of containers)"
            )
        try:  # a bad --shard is told before the file is loaded
            shard = parse_shard(args.shard) if args.shard is not None else None
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        suite = select_cases(with_store(load_suite(args.suite_file, seed_base=args.seed_base), args.store),
                             args.only)
        if shard is not None:
            suite = shard_cases(suite, *shard)
        if args.list:
            console.print(dumps_case_list(suite), markup=False, highlight=False)
            return 0
        conf = parse_spark_conf(args.spark_conf)
        master = resolve_master(args.spark_master)
        preflight(master)  # before hours of runs, not after
    except (UsageError, SuiteError, SparkUnavailable) as exc:
        err.print(f"harness suite: {exc}", markup=False, highlight=False)
        return EXIT_BAD_CONFIG
    progress = _progress(args, err)
    default = suite.key_timeout if suite.key_timeout is not None else DEFAULT_KEY_TIMEOUT_S
    options = AnalysisOptions(key_timeout_s=key_timeout(args.key_timeout, default))

    def analyse(selection: Any) -> dict[Path, tuple[Valid, dict[str, str], tuple[str, ...]]]:
        with spark_session(master, conf) as spark:
            analysis = analyze(spark, selection, options, progress)
        return {o.run.path: (o.valid, o.failed_checkers(), o.invalid_checkers()) for o in analysis.outcomes}

    result = run_suite(suite, analyse=analyse, progress=progress, jobs=args.jobs)
    progress.close()
    print_suite(result, console)
    counts = result.counts()
    junit = result.directory / "junit.xml"
    if args.junit:
        shutil.copyfile(junit, args.junit)
    console.print(
        f"suite {suite.name}: {counts['passed']} passed, {counts['failed']} failed, {counts['error']} unknown or "
        f"crashed; known bugs caught {counts['bugs_caught']}, missed {counts['bugs_missed']}; "
        f"record in {result.directory}, JUnit in {args.junit or junit}",
        highlight=False,
    )
    return result.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.analysis analyze|suite ...`` (the same commands as ``harness``)."""
    parser = CommandParser(prog="python -m harness.analysis", description="Analysis and suites of the chaos harness.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser, metavar="COMMAND")
    add_analyze_parser(commands)
    add_suite_parser(commands)
    return run_command(parser, argv)
