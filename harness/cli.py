"""The ``harness`` command: ``harness run`` (one chaos test, live view, verdict), ``harness reproduce``,
and the analysis pipeline's ``harness analyze`` and ``harness suite`` (registered from
``harness.analysis.cli``).

``harness run`` judges its run through the analysis pipeline (Spark, ``harness.analysis``), which
rewrites ``results.json``; ``--analysis direct`` keeps the verdict of the checkers ``harness.run`` calls
directly (no Spark), which is also what stands when Spark cannot start.

Exit codes (ARCHITECTURE.md, Jepsen's convention): 0 valid, 1 invalid (an anomaly was found), 2 unknown
(could not decide, or interrupted), 254 bad arguments or configuration (including a missing Docker
engine or node image), 255 the harness itself crashed. A bad name is answered with the valid ones.
"""

from __future__ import annotations

import argparse
import errno
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from harness.analysis.cli import add_analyze_parser, add_suite_parser
from harness.arguments import add_test_arguments, db_argument, spec_from_args
from harness.clean import add_clean_parser
from harness.compose import compose
from harness.db.plugin import DBPlugin, PluginError, installed, load_plugin
from harness.interpreter import RunStats
from harness.report.cli import add_report_parser, add_serve_parser
from harness.reproduce import reproduce
from harness.run import RunResult, run
from harness.scaffold import add_new_db_parser
from harness.sim.cli import add_simulate_parser
from harness.sim.run import simulatable_db
from harness.spec import PLATFORMS, ConfigError, TestSpec
from harness.store import StoreError
from harness.subcommand import (
    EXIT_CRASH,
    VERDICT_WORDS,
    CommandParser,
    UsageError,
    count,
    memory_size,
    plain_console,
    print_checker_verdicts,
    run_command,
    verdict_line,
)
from harness.topology import NODE_MEMORY, NODE_PIDS

ANALYSES = ("direct", "spark")
EXIT_BAD_CONFIG = 254
EXIT_UNKNOWN = 2
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
"""What a write to a full disk (or a full quota) fails with."""


def _parser(plugin: DBPlugin | None = None) -> argparse.ArgumentParser:
    """The command line; ``plugin`` (the ``--db`` of ``harness run`` or ``simulate``, loaded first) adds its
    options' flags (``harness.arguments``)."""
    parser = CommandParser(prog="harness", description="Jepsen-style chaos tests of leader-based replicated systems.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser, metavar="COMMAND")

    run_cmd = commands.add_parser("run", help="deploy a system, run a seeded workload under faults, judge it",
                                  formatter_class=argparse.RawDescriptionHelpFormatter,
                                  description="Run one chaos test and store it (history, journals, verdict).")
    add_test_arguments(run_cmd, plugin, db_required=True)
    run_cmd.add_argument("--seed", type=int, default=None, help="the run's seed (default: random, printed)")
    run_cmd.add_argument("--platform", default="docker",
                         help=f"where the nodes run: {', '.join(PLATFORMS)} (sim: the deterministic simulator)")
    run_cmd.add_argument("--hosts", default=None, help="ssh platform: file of nodes and hosts")
    run_cmd.add_argument("--image", default=None,
                         help="docker platform: the node image (default: the adapter's own, else chaos-node:latest)")
    run_cmd.add_argument("--node-memory", type=memory_size, default=NODE_MEMORY, metavar="SIZE",
                         help=f"docker: memory limit per node container, e.g. 512m, 2g (default {NODE_MEMORY})")
    run_cmd.add_argument("--node-pids", type=count, default=NODE_PIDS, metavar="N",
                         help=f"docker: process and thread limit per node container (default {NODE_PIDS})")
    run_cmd.add_argument("--no-live", action="store_true", help="print progress lines instead of a live view")

    repro = commands.add_parser("reproduce", help="re-run a stored run's spec and schedule",
                                description="Re-run a stored test with its spec and nemesis schedule and "
                                            "report how many replays failed the same checker.")
    repro.add_argument("run_dir", metavar="STORE_DIR", help="a stored run (e.g. store/latest)")
    repro.add_argument("--times", type=count, default=1, help="how many replays (default 1)")
    repro.add_argument("--store", default=None, help="store the replays here (default: the original's store)")
    repro.add_argument("--no-live", action="store_true", help="print progress lines instead of a live view")
    run_cmd.set_defaults(handler=_cmd_run)
    repro.set_defaults(handler=_cmd_reproduce)
    for command in (run_cmd, repro):
        command.add_argument("--analysis", choices=ANALYSES, default="direct",
                             help="where the run is judged, once, by the analysis pipeline's tasks: in this "
                                  "process (direct, the default) or on Spark (local, or SPARK_MASTER's)")

    dbs_cmd = commands.add_parser("dbs", help="list the installed DB adapters and their options",
                                  description="List the DB plugins harness run --db can load, with their options.")
    dbs_cmd.add_argument("names", nargs="*", metavar="NAME", help="only these (names or package.module:factory)")
    dbs_cmd.set_defaults(handler=_cmd_dbs)

    add_analyze_parser(commands)
    add_suite_parser(commands)
    add_report_parser(commands)
    add_serve_parser(commands)
    add_simulate_parser(commands, plugin)
    add_new_db_parser(commands)
    add_clean_parser(commands)
    return parser


# -- the live view ---------------------------------------------------------------------------------------


class LiveView:
    """What a person watches during a run: elapsed, ops/s, ok/fail/info, active faults, leader and term."""

    def __init__(
        self, spec: TestSpec, stats: RunStats, console: Console, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.spec = spec
        self.stats = stats
        self.console = console
        self.clock = clock

    def render(self) -> Group:
        stats, spec = self.stats, self.spec
        elapsed = 0.0 if stats.started_at is None else max(self.clock() - stats.started_at, 0.0)
        done = sum(stats.completed.values())
        rate = done / elapsed if elapsed > 0 else 0.0
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        grid.add_row("phase", f"{stats.phase}   elapsed {elapsed:5.1f} s of {spec.time_limit:g} s")
        grid.add_row("ops", Text.assemble(f"{done} completed, {rate:.1f}/s   ",
                                          (f"ok {stats.completed['ok']}", "green"), "  ",
                                          (f"fail {stats.completed['fail']}", "red"), "  ",
                                          (f"info {stats.completed['info']}", "yellow")))
        leader = f"{stats.leader} (term {stats.term})" if stats.leader else "none known"
        grid.add_row("leader", leader)
        grid.add_row("faults", ", ".join(stats.active_faults) or "none")
        applied = sum(stats.faults_applied.values())
        grid.add_row("nemesis", f"{sum(stats.faults_invoked.values())} invoked, {applied} applied, "
                                f"{len(stats.fault_errors)} not applied "
                                f"(of {sum(stats.faults_scheduled.values())} scheduled)")
        return Group(grid)

    def line(self) -> str:
        stats = self.stats
        elapsed = 0.0 if stats.started_at is None else self.clock() - stats.started_at
        return (f"[{stats.phase} {elapsed:5.1f}s] ok {stats.completed['ok']} fail {stats.completed['fail']} "
                f"info {stats.completed['info']} leader {stats.leader} term {stats.term} "
                f"faults {', '.join(stats.active_faults) or 'none'}")


def _run_with_view(
    console: Console, spec: TestSpec, live: bool, action: Callable[[RunStats], RunResult]
) -> RunResult:
    """Call ``action(stats)`` (which runs a test) while showing ``stats`` live."""
    stats = RunStats()
    view = LiveView(spec, stats, console)
    if live and console.is_terminal:
        with Live(get_renderable=view.render, console=console, refresh_per_second=4, transient=False):
            return action(stats)
    return action(stats)


def _print_result(console: Console, result: RunResult) -> None:
    results = result.results or {}
    stats = result.stats
    if stats is not None and stats.faults_scheduled:
        table = Table(title="nemesis: scheduled vs applied", show_edge=False)
        for column in ("f", "scheduled", "invoked", "applied", "not applied"):
            table.add_column(column, justify="right" if column != "f" else "left")
        for f in sorted(set(stats.faults_scheduled) | set(stats.faults_invoked)):
            invoked, applied = stats.faults_invoked.get(f, 0), stats.faults_applied.get(f, 0)
            table.add_row(f, str(stats.faults_scheduled.get(f, 0)), str(invoked), str(applied), str(invoked - applied))
        console.print(table)
    under = (results.get("coverage") or {}).get("under_exercised")
    if under:
        console.print(Text(f"{under}: the verdict says little about the system (harness.coverage)", style="yellow"))
    print_checker_verdicts(console, results)
    if not result.judged:
        console.print(Text(f"run interrupted while it was judged; it is stored whole: harness analyze {result.run_dir} "
                           "judges it", style="bold yellow"))
    elif result.error:
        what = "interrupted" if result.interrupted else f"the harness crashed: {result.error}"
        console.print(Text(f"run {what}; the partial run is stored and analysable", style="bold yellow"))
    for problem in result.teardown_errors:
        shown = problem if len(problem) <= 300 else problem[:300] + " ... (in full in harness.log)"
        console.print(Text(f"teardown: {shown}", style="bold red"))
    # A run that crashed before its workload ran has neither (null in results.json).
    console.print(verdict_line(result.valid, f"   {results.get('ops') or 0} operations, "
                                             f"{results.get('duration_s') or 0:g} s, seed {result.spec.seed}"))
    console.print(f"run stored in {result.run_dir}")
    report = Path(result.run_dir) / "report.html" if result.run_dir is not None else None
    if report is not None and report.is_file():
        console.print(f"report: {report}")


def _cmd_run(args: argparse.Namespace, console: Console, err: Console) -> int:
    spec = spec_from_args(args)
    comp = compose(spec)  # bad names and missing capabilities are reported before anything is printed or stored
    console.print(Text.assemble("harness run: seed ", (str(spec.seed), "bold"), f" ({comp.command()})"))

    def action(stats: RunStats) -> RunResult:
        return run(spec, stats=stats, on_stored=lambda path: console.print(f"storing the run in {path}"),
                   analysis=args.analysis)

    try:
        result = _run_with_view(console, spec, not args.no_live, action)
    except OSError as exc:
        if exc.errno not in DISK_FULL:
            raise
        # The store filled up after the run's history was written whole (the history writer stops the run
        # itself when it cannot write): what was written is kept, no temporary file is left.
        err.print(f"harness run: the store's disk is full ({exc.strerror}): the run is kept as far as it was "
                  f"written; free space, then judge what was kept with harness analyze {spec.store}", markup=False)
        return EXIT_UNKNOWN
    _print_result(console, result)
    return result.exit_code


def _cmd_dbs(args: argparse.Namespace, console: Console, err: Console) -> int:
    """``harness dbs``: each installed plugin (or each named one), its summary and its options."""
    names = list(args.names) or list(installed())
    if not names:
        console.print("no DB plugin is installed (docs/db-adapter.md: harness new-db NAME starts one)")
        return 0
    failed = False
    for name in names:
        try:
            plugin = load_plugin(name)
        except PluginError as exc:
            err.print(f"{name}: {exc}", markup=False, highlight=False)
            failed = True
            continue
        console.print(Text.assemble((plugin.name, "bold"), f"  {plugin.summary}"))
        for option in plugin.options:
            flag = f"  (flag {option.flag})" if option.flag else ""
            console.print(Text(f"    --db-opt {option.describe()}{flag}"))
    return EXIT_BAD_CONFIG if failed else 0


def _cmd_reproduce(args: argparse.Namespace, console: Console, err: Console) -> int:
    from harness.reproduce import load_stored

    run_dir, spec, schedule, failing = load_stored(args.run_dir)
    console.print(f"reproducing {run_dir.path} (seed {spec.seed}, {len(schedule)} scheduled faults) "
                  f"{args.times} time(s); it failed: {', '.join(failing) or 'no checker'}")
    codes: list[int] = []

    def on_replay(attempt: int, result: RunResult) -> None:
        codes.append(result.exit_code)
        console.print(f"replay {attempt}: {VERDICT_WORDS.get(result.valid, result.valid)}"
                      f" (failed: {', '.join(result.failed_checkers) or 'none'}) -> {result.run_dir}")

    stats_holder: list[RunStats] = []

    def stats_factory() -> RunStats:
        stats_holder.append(RunStats())
        return stats_holder[-1]

    if not args.no_live and console.is_terminal:
        with Live(get_renderable=lambda: LiveView(spec, stats_holder[-1] if stats_holder else RunStats(),
                                                   console).render(),
                  console=console, refresh_per_second=4):
            outcome = reproduce(run_dir.path, args.times, store_dir=args.store, on_replay=on_replay,
                                stats_factory=stats_factory, analysis=args.analysis)
    else:
        outcome = reproduce(run_dir.path, args.times, store_dir=args.store, on_replay=on_replay,
                            stats_factory=stats_factory, analysis=args.analysis)
    console.print(f"{outcome.summary()}; original: {outcome.original}")
    for code in (EXIT_CRASH, 1, 2):
        if code in codes:
            return code
    return 0 if codes else 2


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    err = plain_console(stderr=True)
    name, chosen = db_argument(argv, ("run", "simulate"))
    plugin = None
    try:
        if chosen and name is None and argv[0] == "simulate" and not any(a in ("-h", "--help") for a in argv):
            name = simulatable_db()
        if name is not None:
            plugin = load_plugin(name)
    except (PluginError, ConfigError) as exc:
        err.print(f"harness {argv[0]}: {exc}", markup=False, highlight=False)
        return EXIT_BAD_CONFIG
    return run_command(_parser(plugin), argv, bad_input=(ConfigError, StoreError, PluginError, UsageError))
