"""``harness simulate``: one seed, many seeds, a replay, a shrink, or the detection matrix, in virtual time.

The simulator is the sim platform of ``harness run`` (``--platform sim``): a test here is the same
``TestSpec`` from the same flags (``harness.arguments``), and ``harness simulate --seed 7`` stores the run
``harness run --platform sim --seed 7`` stores. ``--db`` defaults to the one installed DB plugin that can
be simulated (the bundled ``cluster``).

Forms (one of ``--seed``, ``--seeds``, ``--replay``, ``--matrix``):

* ``harness simulate --seed 7``: one run, stored with its replay command; ``--check-determinism`` runs it
  again and compares the history and journal hashes; ``--shrink`` minimises it if it failed.
* ``harness simulate --seeds 1..5000 [--bug NAME] [--keep-going]``: exploration on every core
  (``--jobs``), failing runs stored, a table of seeds, failures by checker and simulated seconds per wall
  second; ``--shrink`` minimises the first failure.
* ``harness simulate --replay STORE_DIR``: run a stored simulated run again (its spec, schedule and, for a
  shrunk run, its operations) and check that the history and journals are byte-identical.
* ``harness simulate --matrix [--rounds 3] [--seeds 1..1000] [--clean-seeds 2000]``: the detection matrix.

Exit codes (``harness run``'s): 0 every seed valid, 1 any invalid, 2 any unknown and none invalid, 254 bad
arguments, 255 the harness failed (a replay that is not byte-identical is such a failure).
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from checkers.verdict import UNKNOWN
from harness import store
from harness.arguments import add_test_arguments, spec_from_args
from harness.db.plugin import DBPlugin, load_plugin
from harness.sim.explore import (
    Exploration,
    ExplorationInterrupted,
    ProcessPool,
    SeedExecutor,
    SeedOutcome,
    default_jobs,
    executor_name,
    explore,
    parse_seeds,
    using,
)
from harness.sim.run import (
    SimResult,
    compose_sim,
    known_bugs,
    replay_stored,
    scratch_run,
    simulate,
)
from harness.spec import ConfigError, TestSpec
from harness.subcommand import (
    EXIT_CRASH,
    EXIT_INTERRUPTED,
    count_or_zero,
    print_checker_verdicts,
    verdict_line,
)

PROGRESS_LINE_S = 60.0
"""An exploration whose output is not a terminal (a file, a CI log) prints a line of its progress this
often (wall seconds); a terminal has the progress bar."""


def add_simulate_parser(subparsers: Any, plugin: DBPlugin | None = None) -> argparse.ArgumentParser:
    """Register ``harness simulate`` on ``subparsers`` (from ``ArgumentParser.add_subparsers``)."""
    parser = subparsers.add_parser(
        "simulate",
        help="run the system in virtual time: exact replay from a seed, exploration, shrinking",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Simulate the system deterministically (harness run --platform sim): --seed N for one run "
        "(replayed byte for byte by the same command), --seeds 1..5000 to explore on every core, --replay DIR "
        "to replay a stored run, --matrix for the detection matrix of the DB's known bugs. Exit 0 valid, 1 "
        "invalid, 2 unknown, 254 bad arguments, 255 harness failure.",
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--seed", type=int, help="simulate one seed")
    what.add_argument("--seeds", help="explore seeds: FIRST..LAST, or a comma-separated list (e.g. 1..5000); "
                      "with --matrix, how many seeds a round explores at most (default 1..1000)")
    what.add_argument("--replay", metavar="STORE_DIR", help="replay a stored simulated run and compare hashes")
    parser.add_argument("--matrix", action="store_true", help="the detection matrix of the DB's known bugs")
    add_test_arguments(parser, plugin, db_required=False)
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: every core)")
    parser.add_argument("--spark-master", nargs="?", const="", default=None, metavar="URL",
                        help="run the seeds as Spark tasks (batches of seeds per task) on this master; without "
                             "URL $SPARK_MASTER, else local[*]; failing runs still land in --store, which the "
                             "workers must reach")
    parser.add_argument("--spark-batch", type=int, default=None, metavar="N",
                        help="with --spark-master: seeds per Spark task (default: about four tasks per core, "
                             "at most 25 seeds each)")
    parser.add_argument("--keep-going", action="store_true", help="explore every seed instead of stopping at a failure")
    parser.add_argument("--check-determinism", action="store_true",
                        help="run each seed twice and require byte-identical histories and journals")
    parser.add_argument("--shrink", action="store_true", help="minimise the (first) failing run and store it")
    parser.add_argument("--shrink-trials", type=count_or_zero, default=400, help="budget of simulations for --shrink")
    parser.add_argument("--rounds", type=count_or_zero, default=3, help="--matrix: exploration rounds per bug (default 3)")
    parser.add_argument("--clean-seeds", type=count_or_zero, default=2000,
                        help="--matrix: bug-free seeds per mode (default 2000; 0 skips them)")
    parser.set_defaults(handler=cmd_simulate)
    return parser


def sim_spec_from_args(args: argparse.Namespace, seed: int = 0) -> TestSpec:
    """The simulated test the arguments describe; without ``--workload`` and with one known bug, the
    workload that can show that bug."""
    if args.db is None:
        from harness.sim.run import simulatable_db

        args.db = simulatable_db()
    if args.plugin is None:
        args.plugin = load_plugin(args.db)
    spec = spec_from_args(args, seed=seed, platform="sim")
    bugs = list(spec.db_options.get("bug") or [])
    if args.workload is None and len(bugs) == 1:
        found = known_bugs(spec.db).get(bugs[0])
        if found is not None:
            spec = replace(spec, workload=found["workload"])
    return spec


def cmd_simulate(args: argparse.Namespace, console: Console, err: Console) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise ConfigError(f"--jobs must be at least 1, not {args.jobs}")
    if args.spark_master is not None and args.jobs is not None:
        raise ConfigError("--jobs and --spark-master both say where seeds run: give one of them")
    if args.spark_batch is not None and args.spark_master is None:
        raise ConfigError("--spark-batch sizes Spark tasks: give it with --spark-master")
    if args.spark_master is not None and (args.seeds is None and not args.matrix):
        raise ConfigError("--spark-master runs many seeds: give --seeds FIRST..LAST or --matrix")
    if args.matrix and (args.seed is not None or args.replay is not None):
        raise ConfigError("--matrix explores seeds itself: give it --seeds (per round), not --seed or --replay")
    if not args.matrix and args.seed is None and args.seeds is None and args.replay is None:
        raise ConfigError("say what to simulate: --seed N, --seeds FIRST..LAST, --replay STORE_DIR or --matrix")
    if args.replay is not None:
        return _replay(args, console, err)
    if args.matrix:
        return _matrix(args, console)
    if args.seed is not None:
        return _one(args, console, err)
    return _explore(args, console, err)


# -- one seed -----------------------------------------------------------------------------------------------


def _one(args: argparse.Namespace, console: Console, err: Console) -> int:
    spec = sim_spec_from_args(args, args.seed)
    comp = compose_sim(spec)
    console.print(Text.assemble("harness simulate: seed ", (str(spec.seed), "bold"), f" ({comp.command()})"))
    result = simulate(spec)
    _print_result(console, result)
    code = result.exit_code
    if args.check_determinism:
        with scratch_run(spec.store, "replay") as work:
            again = simulate(spec, work, checkers=())
        same = again.digest == result.digest
        _print_determinism(console, result, same)
        if not same:
            err.print("the replay of this seed differs from the first run: the simulator is not deterministic "
                      "(a harness defect; please report it with this seed)", markup=False)
            return EXIT_CRASH
    if args.shrink and result.valid is False:
        _shrink(args, console, result)
    return code


def _print_result(console: Console, result: SimResult) -> None:
    print_checker_verdicts(console, result.results)
    if result.results.get("error"):
        console.print(Text(f"the simulation crashed: {result.results['error']}", style="bold yellow"))
    speed = result.sim_seconds / result.wall_seconds if result.wall_seconds > 0 else 0.0
    console.print(verdict_line(result.valid, f"   {result.results.get('ops', 0)} operations, "
                                             f"{result.sim_seconds:.1f} simulated s in {result.wall_seconds:.2f} wall s "
                                             f"({speed:.0f}x), seed {result.spec.seed}"))
    console.print(f"run stored in {result.run_dir}")
    replay = result.replay_command
    if replay:
        console.print(Text.assemble("replay: ", (str(replay), "bold")))


def _print_determinism(console: Console, result: SimResult, same: bool) -> None:
    if same:
        console.print(Text.assemble(("deterministic", "green"),
                                    ": the replay's history and journals are byte-identical "
                                    f"(history sha256 {result.digest['history_sha256'][:16]}...)"))
    else:
        console.print(Text.assemble(("NOT deterministic", "bold red"), ": the replay's history or journals differ"))


def _shrink(args: argparse.Namespace, console: Console, result: SimResult) -> None:
    from harness.sim.shrink import shrink

    console.print(f"shrinking seed {result.spec.seed} (at most {args.shrink_trials} simulations)")
    outcome = shrink(result, jobs=args.jobs or default_jobs(), max_trials=args.shrink_trials,
                     on_step=lambda text: console.print(f"  {text}"))
    minimal = outcome.result
    assert minimal is not None
    console.print(Text.assemble(("shrunk ", "bold"), f"{outcome.checker} still fails with {outcome.minimal.faults} "
                                f"fault(s), {outcome.client_operations} client operation(s) in the history "
                                f"({outcome.minimal.operations} invoked by {len(outcome.minimal.scripts)} "
                                f"worker slot(s)), time limit {outcome.minimal.spec.time_limit:g} s; "
                                f"{outcome.trials} simulations in {outcome.wall_seconds:.1f} s"))
    console.print(f"minimal run stored in {minimal.run_dir}")
    console.print(Text.assemble("replay: ", (f"harness simulate --replay {minimal.run_dir}", "bold")))


# -- replay -------------------------------------------------------------------------------------------------


def _replay(args: argparse.Namespace, console: Console, err: Console) -> int:
    result, original = replay_stored(args.replay)
    console.print(f"replayed {args.replay} (seed {result.spec.seed})")
    _print_result(console, result)
    stored = original.get("sim", {}) if isinstance(original, dict) else {}
    if not stored.get("history_sha256"):
        console.print(Text("the stored run records no hashes to compare with", style="yellow"))
        return result.exit_code
    same = all(stored.get(k) == v for k, v in result.digest.items())
    _print_determinism(console, result, same)
    if not same:
        err.print("the replay differs from the stored run (was it made by another version of the harness or "
                  "the core?)", markup=False)
        return EXIT_CRASH
    return result.exit_code


# -- exploration ----------------------------------------------------------------------------------------------


def _explore(args: argparse.Namespace, console: Console, err: Console) -> int:
    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    spec = sim_spec_from_args(args, seeds[0])
    comp = compose_sim(spec)
    interrupted = None
    with _executor(args) as executor:
        console.print(f"harness simulate: {len(seeds)} seeds of {comp.test_name} on {executor_name(executor)}"
                      f"{'' if args.keep_going else ', stopping at the first failure'}")
        try:
            exploration = _run_exploration(args, console, spec, seeds, executor)
        except ExplorationInterrupted as stopped:
            exploration = interrupted = stopped.exploration
    if exploration.recorded is not None:
        console.print(f"seeds recorded in {exploration.recorded.parent} (the dataset's sim_seeds table)")
    print_exploration(console, exploration)
    if interrupted is not None:
        err.print(f"interrupted after {len(exploration.outcomes)} of {len(seeds)} seeds; the table above is "
                  "theirs", markup=False)
        return EXIT_INTERRUPTED
    if exploration.nondeterministic:
        err.print(f"{len(exploration.nondeterministic)} seed(s) did not replay byte for byte: the simulator is "
                  "not deterministic (a harness defect)", markup=False)
        return EXIT_CRASH
    if args.shrink and exploration.invalid:
        first = exploration.invalid[0]
        console.print(f"shrinking the first failure, seed {first.seed}, here (the driver)")
        result = simulate(replace(spec, seed=first.seed))
        _shrink(args, console, result)
    return exploration.exit_code


@contextlib.contextmanager
def _executor(args: argparse.Namespace) -> Iterator[SeedExecutor]:
    """Where the seeds run: Spark with ``--spark-master`` (one session for the whole command), else
    ``--jobs`` processes of this machine."""
    if args.spark_master is None:
        yield ProcessPool(args.jobs)
        return
    from harness.sim.spark import SparkSeeds

    with SparkSeeds(args.spark_master or None, batch=args.spark_batch) as executor:
        yield executor


def _run_exploration(args: argparse.Namespace, console: Console, spec: TestSpec, seeds: list[int],
                     executor: SeedExecutor) -> Exploration:
    with Progress(TextColumn("[bold]seeds"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                  TimeElapsedColumn(), console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("seeds", total=len(seeds), status="")
        tally = {"invalid": 0, "unknown": 0, "done": 0}
        started = time.monotonic()
        line_at = [started]  # when the last progress line was printed

        def seen(outcome: SeedOutcome) -> None:
            if outcome.valid is False:
                tally["invalid"] += 1
                progress.console.print(Text.assemble(f"seed {outcome.seed}: ", ("INVALID", "bold red"),
                                                     f" ({', '.join(outcome.failed)}) -> {outcome.run_dir}"))
            elif outcome.valid == UNKNOWN:
                tally["unknown"] += 1
            if outcome.deterministic is False:
                progress.console.print(Text.assemble(f"seed {outcome.seed}: ", ("NOT deterministic", "bold red")))
            progress.update(task, advance=1, status=f"invalid {tally['invalid']}  unknown {tally['unknown']}")
            tally["done"] += 1
            now = time.monotonic()
            if not console.is_terminal and now - line_at[0] >= PROGRESS_LINE_S:
                # No bar where the output is a file or a CI log: a line now and then says how far it got.
                line_at[0] = now
                console.print(f"seeds: {tally['done']} of {len(seeds)} done (up to seed {outcome.seed}), invalid "
                              f"{tally['invalid']}, unknown {tally['unknown']}, {now - started:.0f} s", markup=False)

        return explore(spec, seeds, keep_going=args.keep_going, check_determinism=args.check_determinism,
                       on_outcome=seen, executor=executor)


def print_exploration(console: Console, exploration: Exploration) -> None:
    """The summary table: seeds run, verdicts, failures by checker, simulated seconds per wall second."""
    outcomes = exploration.outcomes
    wall = exploration.wall_seconds
    sim = exploration.sim_seconds
    summary = Table(title=f"harness simulate: {compose_sim(exploration.spec).test_name}", show_edge=False)
    for column in ("seeds", "valid", "invalid", "unknown", "sim s", "wall s", "sim/wall", "per worker"):
        summary.add_column(column, justify="right")
    valid = sum(1 for o in outcomes if o.valid is True)
    speed = sim / wall if wall > 0 else 0.0
    summary.add_row(f"{len(outcomes)} of {len(exploration.seeds)}", str(valid), str(len(exploration.invalid)),
                    str(len(exploration.unknown)), f"{sim:.0f}", f"{wall:.1f}", f"{speed:.0f}",
                    f"{speed / max(1, min(exploration.jobs, len(outcomes) or 1)):.0f}")
    console.print(summary)
    failures = exploration.failures_by_checker()
    unknowns = exploration.unknown_by_checker()
    if failures or unknowns:
        by_checker = Table(title="failures by checker", show_edge=False)
        for column in ("checker", "invalid seeds", "first invalid seed", "unknown seeds"):
            by_checker.add_column(column, justify="left" if column == "checker" else "right")
        for name in sorted(set(failures) | set(unknowns)):
            seeds = failures.get(name, [])
            by_checker.add_row(name, str(len(seeds)), str(seeds[0]) if seeds else "-", str(unknowns.get(name, 0)))
        console.print(by_checker)
    for outcome in exploration.invalid[:10]:
        console.print(f"seed {outcome.seed} failed {', '.join(outcome.failed)}: stored in {outcome.run_dir}; "
                      f"replay: {outcome.replay_command}")
    errors = [o for o in outcomes if o.error]
    for outcome in errors[:5]:
        console.print(Text(f"seed {outcome.seed} crashed the simulation: {outcome.error}", style="yellow"))
    if exploration.stopped_early:
        console.print("stopped at the first failure (--keep-going explores every seed)")


# -- the detection matrix --------------------------------------------------------------------------------------


def _matrix(args: argparse.Namespace, console: Console) -> int:
    try:
        max_seeds = len(parse_seeds(args.seeds)) if args.seeds else 1000
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    # --mode all (every mode: the default here) is the matrix's own; any other value is the DB's option.
    mode_flags = getattr(args, "db_flag_mode", None) or []
    modes = None if mode_flags in ([], ["all"]) else list(mode_flags)
    bug_flags = list(getattr(args, "db_flag_bug", None) or [])
    args.db_flag_mode, args.db_flag_bug = [], []
    base = sim_spec_from_args(args, 0)
    plugin = args.plugin
    matrix_of = plugin.extras.get("detection_matrix") if plugin is not None else None
    if matrix_of is None:
        raise ConfigError(f"the {base.db} DB publishes no known bugs to build a detection matrix from")
    if modes is not None:
        for mode in modes:
            plugin.option("mode").check(mode)
    bugs = bug_flags or None
    console.print(f"detection matrix: {args.rounds} round(s) of at most {max_seeds} seeds per bug and mode, "
                  f"{args.clean_seeds} bug-free seeds per mode")

    def on_detection(d: Any) -> None:
        found = Text(f"seed {d.seed} after {d.seeds} seeds ({d.sim_seconds:.0f} simulated s)") if d.found else \
            Text.assemble(("not found", "bold red"), f" in {d.seeds} seeds")
        console.print(Text.assemble(f"  {d.bug} / {d.mode} round {d.round}: {d.checker} ", found))

    def on_clean(c: Any) -> None:
        console.print(f"  bug-free {c.mode}: {c.seeds} seeds, {len(c.invalid)} invalid, {len(c.unknown)} unknown")

    with _executor(args) as executor, using(executor):
        # The plugin's matrix calls explore() without an executor: it gets this one (Spark or processes).
        matrix = matrix_of(base, rounds=args.rounds, max_seeds=max_seeds, clean_seeds=args.clean_seeds,
                           bugs=bugs, modes=modes, on_detection=on_detection, on_clean=on_clean)
    table = Table(title="detection matrix: seeds until the first failure of the bug's checker", show_edge=False)
    for column in ("bug", "mode", "checker", "seeds per round", "median", "max", "simulated s per round"):
        table.add_column(column)
    for row in matrix.rows():
        table.add_row(row["bug"], row["mode"], row["checker"],
                      ", ".join("-" if s is None else str(s) for s in row["seeds_to_failure"]),
                      str(row["median_seeds"]), str(row["max_seeds"]),
                      ", ".join(f"{s:.0f}" for s in row["sim_seconds_to_failure"]))
    console.print(table)
    out = Path(args.store) / "sim-matrix" / datetime.now(UTC).strftime(store.TIMESTAMP_FORMAT)
    out.mkdir(parents=True, exist_ok=True)
    store.write_json(out / "matrix.json", matrix.to_json())
    console.print(f"matrix written to {out / 'matrix.json'}")
    if any(c.invalid for c in matrix.clean):
        return 1
    return 0 if matrix.complete else 2
