"""How many operations per second the analysis pipeline judges, on Spark and without it.

Two workloads of synthetic register runs (``tests/harness/synthetic_runs.py``: concurrent clients, a
partition and a heal, final reads, three nodes' journals; every run valid, so every checker runs to the
end): 100 runs of 10,000 operations, and one run of 1,000,000 operations. Each is judged three ways:

* ``pipeline``: the analysis pipeline (:func:`harness.analysis.pipeline.analyze`) on ``local[2]``: reading
  through Spark, the checkers (linearizability per key; a big run read by two tasks), ``results.json``
  and the Parquet dataset; not the HTML reports (``benchmarks/report_bench.py`` measures those). Its CPU
  is the JVM's, its Python workers' and this process's (the driver);
* ``in-process``: the same tasks and steps in this process (:func:`harness.analysis.inprocess.analyze_here`,
  what ``harness run`` does at its end): the pipeline without Spark;
* ``direct``: the checkers called directly through the registry, one run after another (parse with
  :mod:`checkers.history`, check, nothing written): the judge as it was before the pipeline, the issue's
  "direct path".

The Spark session is started before the clock starts (its start time is reported on its own), and one
**warm-up** analysis of a small workload (10 runs of 1,000 operations) goes through every path first: the
first analysis of a session pays the JVM's class loading and compiling and the workers' imports, a cost
per session, not per operation; the warm-up's figures are printed as they are. Then ``--repeat`` rounds,
each path once per workload per round, the order rotating from round to round (pipeline, in-process,
direct; then in-process, direct, pipeline; ...), so that every path meets the machine in every position
and ratios taken within a round hold on a loaded machine. The table gives the medians over rounds and
the median of the rounds' ratios, with their range.

``--checkers run-level`` judges copies of the runs whose ``test.json`` names only the run-level checkers
(single-leader-per-term, lsn-monotonicity, durability: every checker but linearizability), on every path:
the issue's "100,000 operations per second on local[2] for the run-level checkers".

``--journals full`` journals every write as the cluster's nodes do (an append, a commit and an apply on each
of the three nodes: about 4.5 events an operation, the density of a simulated cluster run) where the
default journals its apply only (about 1.5): the journals' share of the work grows with them.

    .venv/bin/python benchmarks/analysis_bench.py [--scale 0.1] [--repeat 3] [--checkers run-level]
                                                  [--journals full] [--store DIR] [--only many-small|one-big]
                                                  [--compare DIR]

``--compare DIR`` measures two trees side by side: this one and ``DIR`` (another checkout of the project,
e.g. ``git archive`` of the commit before a change), ``--repeat`` rounds each of one invocation of this
file per tree, the trees' order alternating (A then B, then B then A). Each invocation imports only its
tree's harness and runs in its directory, so its Spark workers import that tree too (they import the
harness from their working directory first). It prints each round's pipeline figures and then, per
workload, the medians, each tree's pipeline CPU over its own invocation's direct path (the same code in
both trees unless the change is to the checkers, so a yardstick of the machine's speed in those minutes),
and the median ratio A / B of the pipeline's wall time, CPU and the direct path's CPU: on this shared
machine, the direct path's CPU differed by up to a quarter between invocations minutes apart.

``--scale`` multiplies the operation counts (0.1: 100 runs of 1,000 and one of 100,000); the runs are
generated once into ``--store`` (default a directory under /tmp) and reused by later invocations. Prints
the rounds as they end, then the table; never asserts anything (benchmarks are not tests). Below it, for
each workload, the CPU seconds by phase inside the pipeline's tasks and of the direct path, and the rate
of the run-level checkers on their own (operations per CPU second, then with the parsing they need).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# A comparison's invocation imports the tree it measures (``--root``), not the one this file is in.
_TREE = Path(sys.argv[sys.argv.index("--root") + 1]).resolve() if (
    __name__ == "__main__" and "--root" in sys.argv) else ROOT
sys.path.insert(0, str(_TREE))

from checkers.history import load_journals, load_operations, no_cyclic_gc  # noqa: E402
from checkers.registry import CheckInput, applicable, run_checkers  # noqa: E402
from harness.analysis.checks import LINEARIZABLE  # noqa: E402
from harness.analysis.discovery import find_runs  # noqa: E402
from harness.analysis.inprocess import analyze_here  # noqa: E402
from harness.analysis.pipeline import AnalysisOptions, analyze  # noqa: E402
from harness.analysis.spark import start_session  # noqa: E402
from tests.harness.synthetic_runs import JOURNALS, write_run  # noqa: E402

MASTER = "local[2]"


@dataclass(frozen=True)
class Workload:
    name: str
    runs: int
    ops: int
    keys: int


def workloads(scale: float) -> list[Workload]:
    return [
        Workload("many-small", 100, max(10, int(10_000 * scale)), 10),
        Workload("one-big", 1, max(10, int(1_000_000 * scale)), 100),
    ]


def generate(store: Path, workload: Workload, checkers: str = "all", journals: str = "applies") -> Path:
    """The workload's runs under ``store/<name>-<ops>[-run-level][-full]/``, written unless already there;
    the run-level variant's ``test.json`` names every checker of the run but linearizability, the full
    variant's journals hold every write's append, commit and apply (``synthetic_runs.write_run``)."""
    root = store / (f"{workload.name}-{workload.ops}" + ("" if checkers == "all" else f"-{checkers}")
                    + ("" if journals == "applies" else f"-{journals}"))
    marker = root / ".complete"
    if marker.is_file():
        return root
    started = time.perf_counter()
    for number in range(workload.runs):
        run = write_run(
            root,
            workload.name,
            f"20261101T{number // 3600:02d}{number // 60 % 60:02d}{number % 60:02d}",
            ops=workload.ops,
            keys=workload.keys,
            processes=5,
            seed=number + 1,
            journals=journals,
        )
        if checkers == "run-level":
            spec_path = run / "test.json"
            spec = json.loads(spec_path.read_text(encoding="utf-8"))
            spec["checkers"] = [name for name in spec["checkers"] if name != LINEARIZABLE]
            spec_path.write_text(json.dumps(spec, indent=2), encoding="utf-8")
    marker.write_text("", encoding="utf-8")
    print(
        f"generated {workload.runs} x {workload.ops:,} operations in {time.perf_counter() - started:.0f} s",
        file=sys.stderr,
    )
    return root


def _process_tree_times(root_pid: int) -> dict[int, float]:
    """CPU seconds (user + system) each process at or below ``root_pid`` has used itself so far (Linux
    /proc; the times of the children it reaped are left out: :class:`TreeCpu` counts those children
    from their own readings)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = (int(fields[11]) + int(fields[12])) / tick  # utime stime
    found: dict[int, float] = {}
    frontier = [root_pid]
    while frontier:
        pid = frontier.pop()
        if pid in times:
            found[pid] = times[pid]
            frontier.extend(child for child, parent in parents.items() if parent == pid)
    return found


class TreeCpu:
    """CPU seconds a process tree (the Spark JVM and its Python workers) uses between :meth:`start` and
    :meth:`stop`, read every :attr:`PERIOD_S` by a thread of this process.

    Two readings of the tree's totals cannot give it: PySpark's worker daemon ignores ``SIGCHLD``, so the
    kernel reaps the workers it kills (an idle worker, after a minute unused) without adding their times
    to the daemon's, and such a worker's seconds vanished from the second reading (a measured pipeline came
    out at 25.5 CPU s where its tasks alone had used 36.7). Here each process counts with the last
    reading of its own times, so one that ends loses at most its last :attr:`PERIOD_S`. The thread's own
    CPU is given by :attr:`sampler_s`, for the caller to take out of this process's.
    """

    PERIOD_S = 0.1

    def __init__(self, root_pid: int) -> None:
        self.root_pid = root_pid
        self.sampler_s = 0.0
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="tree-cpu", daemon=True)

    def start(self) -> None:
        self._first = _process_tree_times(self.root_pid)
        self._last = dict(self._first)
        self._thread.start()

    def _sample(self) -> None:
        began = time.thread_time()
        while not self._done.wait(self.PERIOD_S):
            self._last.update(_process_tree_times(self.root_pid))
        self._last.update(_process_tree_times(self.root_pid))
        self.sampler_s = time.thread_time() - began

    def stop(self) -> float:
        """The tree's CPU seconds since :meth:`start`."""
        self._done.set()
        self._thread.join()
        return sum(seconds - self._first.get(pid, 0.0) for pid, seconds in self._last.items())


def spark_pid() -> int | None:
    """The pid of this process's Spark JVM."""
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    return proc.pid if proc is not None else None


def _wanted(run: Path) -> set[str] | None:
    """The checkers a run's ``test.json`` names (``None``: it names none)."""
    names = json.loads((run / "test.json").read_text(encoding="utf-8")).get("checkers")
    return set(names) if isinstance(names, list) else None


@dataclass
class Measure:
    """One path's judging of one workload: wall and CPU seconds, operations, runs not valid, CPU by phase."""

    seconds: float
    cpu: float
    ops: int
    invalid: int
    phases: dict[str, float] = field(default_factory=dict)


def direct(root: Path) -> Measure:
    """The checkers called directly on every run, one after another: parse, the run-level checkers,
    linearizability (those of the run's ``test.json``). The run is read as the direct judge reads it
    (``checkers.judge``: the operation table, then the operations; the journals compact), so the pipeline is
    compared with what a user of ``python -m checkers`` gets."""
    runs = find_runs([root]).runs
    started = time.perf_counter()
    cpu_started = time.process_time()
    ops = invalid = 0
    phases = {"parse_s": 0.0, "run_level_s": 0.0, "linearizability_s": 0.0}
    for run in runs:
        lap = time.process_time()
        with no_cyclic_gc():
            history = load_operations(run.path / "history.jsonl").history()
        journals = load_journals(run.path, compact=True)
        inp = CheckInput(history=history, model="cas-register", journals=journals)
        phases["parse_s"] += time.process_time() - lap
        lap = time.process_time()
        wanted = _wanted(run.path)
        names = [name for name in applicable(inp) if wanted is None or name in wanted]
        verdicts = run_checkers(inp, [name for name in names if name != LINEARIZABLE])
        phases["run_level_s"] += time.process_time() - lap
        lap = time.process_time()
        verdicts.update(run_checkers(inp, [name for name in names if name == LINEARIZABLE]))
        phases["linearizability_s"] += time.process_time() - lap
        ops += sum(1 for op in history.ops if op.f != "status")
        invalid += any(v.valid is not True for v in verdicts.values())
        del history, journals, verdicts, inp
        gc.collect()
    return Measure(time.perf_counter() - started, time.process_time() - cpu_started, ops, invalid, phases)


def _options() -> AnalysisOptions:
    return AnalysisOptions(key_timeout_s=None, write_reports=False)


def pipeline(spark, root: Path) -> Measure:  # noqa: ANN001
    selection = find_runs([root])
    pid = spark_pid()
    tree = TreeCpu(pid) if pid is not None else None
    if tree is not None:
        tree.start()
    started, cpu_started = time.perf_counter(), time.process_time()
    analysis = analyze(spark, selection, _options())
    seconds, driver = time.perf_counter() - started, time.process_time() - cpu_started
    cpu = tree.stop() + driver - tree.sampler_s if tree is not None else float("nan")
    invalid = sum(1 for o in analysis.outcomes if o.valid is not True)
    return Measure(seconds, cpu, analysis.operations, invalid, dict(analysis.task_cpu_s))


def in_process(root: Path) -> Measure:
    selection = find_runs([root])
    started, cpu_started = time.perf_counter(), time.process_time()
    analysis = analyze_here(selection, _options())
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    invalid = sum(1 for o in analysis.outcomes if o.valid is not True)
    return Measure(seconds, cpu, analysis.operations, invalid, dict(analysis.task_cpu_s))


PATHS = ("pipeline", "in-process", "direct")


def rounds_order(number: int) -> tuple[str, ...]:
    """The paths in round ``number``'s order: rotated by one from round to round (module docstring)."""
    shift = number % len(PATHS)
    return PATHS[shift:] + PATHS[:shift]


def measure(spark, path: str, root: Path) -> Measure:  # noqa: ANN001
    if path == "pipeline":
        return pipeline(spark, root)
    if path == "in-process":
        return in_process(root)
    return direct(root)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _load() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def _summary(chosen: list[Workload], measured: dict[str, dict[str, list[Measure]]]) -> dict[str, Any]:
    """The tree this invocation imported, and each workload's and path's medians: one JSON object, what a
    comparison's invocation prints last."""
    import harness

    return {
        "tree": str(Path(harness.__file__).resolve().parent.parent),
        "workloads": {
            workload.name: {
                path: {"seconds": _median([m.seconds for m in ms]), "cpu": _median([m.cpu for m in ms]),
                       "ops": ms[0].ops}
                for path, ms in measured[workload.name].items()
            }
            for workload in chosen
        },
    }


def _compared(rounds: list[dict[str, Any]], workload: str) -> None:
    """Print one workload's medians per tree and the median ratio A / B with its range."""
    def median(name: str, path: str, field: str) -> float:
        return _median([r[name][workload][path][field] for r in rounds])

    def ratio(path: str, field: str) -> str:
        values = [r["A"][workload][path][field] / r["B"][workload][path][field] for r in rounds]
        return f"{_median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"

    def against_direct(name: str) -> str:  # the direct path's code is the same in both trees: a yardstick
        values = [r[name][workload]["pipeline"]["cpu"] / r[name][workload]["direct"]["cpu"] for r in rounds]
        return f"{_median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"

    ops = rounds[0]["A"][workload]["pipeline"]["ops"]
    for name in ("A", "B"):
        seconds = median(name, "pipeline", "seconds")
        print(f"{workload:<10} {name}: pipeline {seconds:.1f} s, {median(name, 'pipeline', 'cpu'):.1f} CPU s, "
              f"{ops / seconds:,.0f} ops/s; direct {median(name, 'direct', 'cpu'):.1f} CPU s; "
              f"pipeline / direct CPU {against_direct(name)}")
    print(f"{workload:<10} A / B: pipeline wall {ratio('pipeline', 'seconds')}, pipeline CPU "
          f"{ratio('pipeline', 'cpu')}, direct CPU {ratio('direct', 'cpu')}")


def compare(other: Path, repeat: int, argv: list[str]) -> None:
    """``--compare``: this tree (A) and ``other`` (B), alternately (module docstring)."""
    trees = {"A": ROOT, "B": other.resolve()}
    rounds: list[dict[str, Any]] = []
    for number in range(repeat):
        results: dict[str, Any] = {}
        for name in ("A", "B") if number % 2 == 0 else ("B", "A"):
            tree = trees[name]
            done = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--root", str(tree), "--repeat", "1", "--json", *argv],
                cwd=tree, stdout=subprocess.PIPE, text=True, check=True,
            )
            summary = json.loads(done.stdout.strip().splitlines()[-1])
            if Path(summary["tree"]) != tree:
                raise SystemExit(f"the invocation for {tree} imported the harness from {summary['tree']}")
            results[name] = summary["workloads"]
            for workload, paths in results[name].items():
                pipe = paths["pipeline"]
                print(f"round {number + 1} {name} {workload:<10} pipeline {pipe['seconds']:>7.1f} s "
                      f"{pipe['cpu']:>7.1f} CPU s {pipe['ops'] / pipe['seconds']:>8,.0f} ops/s  load {_load()}",
                      flush=True)
        rounds.append(results)
    print(f"\nA = {trees['A']}, B = {trees['B']}; {repeat} rounds; load average at the end {_load()}\n")
    for workload in rounds[0]["A"]:
        _compared(rounds, workload)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the operation counts (default 1)")
    parser.add_argument(
        "--store", type=Path, default=Path("/tmp/chaos-analysis-bench"), help="where runs are generated"
    )
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every path (default 3)")
    parser.add_argument("--checkers", choices=("all", "run-level"), default="all",
                        help="judge with every checker, or with the run-level ones only")
    parser.add_argument("--only", choices=("many-small", "one-big"), help="one workload only")
    parser.add_argument("--journals", choices=JOURNALS, default="applies",
                        help="journal each write's apply only (the default), or its append, commit and apply "
                             "as the cluster's nodes do (about 4.5 events an operation, as in a simulated run)")
    parser.add_argument("--compare", type=Path, metavar="DIR", help="this tree against DIR's, alternately")
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)  # the tree this invocation imports
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # medians as JSON, last line
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.compare is not None:
        if not (args.compare / "harness").is_dir():
            parser.error(f"--compare {args.compare}: not a tree of this project (no harness/ in it)")
        passed = ["--scale", str(args.scale), "--store", str(args.store.resolve()), "--checkers", args.checkers,
                  "--journals", args.journals, *(["--only", args.only] if args.only else [])]
        compare(args.compare, args.repeat, passed)
        return

    chosen = [w for w in workloads(args.scale) if args.only in (None, w.name)]
    roots = {w.name: generate(args.store, w, args.checkers, args.journals) for w in chosen}
    warm_up = generate(args.store, Workload("warm-up", 10, 1_000, 10), args.checkers, args.journals)
    print(f"load average at the start {_load()} on {os.cpu_count()} cores", flush=True)

    started = time.perf_counter()
    spark = start_session(MASTER)
    session_s = time.perf_counter() - started
    print(f"Spark session start ({MASTER}): {session_s:.1f} s (not included below)", flush=True)
    measured: dict[str, dict[str, list[Measure]]] = {w.name: {p: [] for p in PATHS} for w in chosen}
    try:
        for path in PATHS:
            m = measure(spark, path, warm_up)
            print(f"warm-up ({path}, the first analysis of the session on it): {m.seconds:.1f} s, "
                  f"{m.cpu:.1f} CPU s for {m.ops:,} operations", flush=True)
        for number in range(args.repeat):
            for workload in chosen:
                for path in rounds_order(number):
                    m = measure(spark, path, roots[workload.name])
                    measured[workload.name][path].append(m)
                    print(f"round {number + 1} {workload.name:<10} {path:<10} {m.seconds:>7.1f} s "
                          f"{m.cpu:>7.1f} CPU s {m.ops:>10,} ops  not valid {m.invalid}  load {_load()}",
                          flush=True)
    finally:
        spark.stop()

    if args.json:
        print(json.dumps(_summary(chosen, measured)), flush=True)
        return
    print(f"\nmedians over {args.repeat} rounds, checkers: {args.checkers}, journals: {args.journals}; load average at the end "
          f"{_load()} on {os.cpu_count()} cores\n")
    header = (
        f"{'workload':<22} {'path':<10} {'ops':>10} | {'wall s':>7} {'CPU s':>7} {'ops/s':>8} {'ops/CPU-s':>9} | "
        f"{'pipeline / this, wall':>21} {'CPU':>17}"
    )
    print(header)
    print("-" * len(header))
    for workload in chosen:
        runs = measured[workload.name]
        label = f"{workload.runs} x {workload.ops:,} ops"
        for path in PATHS:
            ms = runs[path]
            wall, cpu = _median([m.seconds for m in ms]), _median([m.cpu for m in ms])
            ops = ms[0].ops
            ratios = ""
            if path != "pipeline":
                walls = [p.seconds / m.seconds for p, m in zip(runs["pipeline"], ms, strict=True)]
                cpus = [p.cpu / m.cpu for p, m in zip(runs["pipeline"], ms, strict=True)]
                ratios = (f"{_median(walls):>6.2f}x ({min(walls):.2f}-{max(walls):.2f}) "
                          f"{_median(cpus):>6.2f}x ({min(cpus):.2f}-{max(cpus):.2f})")
            print(f"{label:<22} {path:<10} {ops:>10,} | {wall:>7.1f} {cpu:>7.1f} {ops / wall:>8,.0f} "
                  f"{ops / cpu:>9,.0f} | {ratios}")
    print()
    for workload in chosen:
        runs = measured[workload.name]
        for path in PATHS:
            phases: dict[str, float] = {}
            for m in runs[path]:
                for key, value in m.phases.items():
                    phases[key] = phases.get(key, 0.0) + value / len(runs[path])
            where = "inside the tasks" if path != "direct" else "direct"
            print(f"{workload.name} {path}: {where}, CPU s (mean): " + ", ".join(f"{k} {v:.1f}" for k, v in phases.items()))
            ops = runs[path][0].ops
            if phases.get("run_level_s"):
                checks, parse = phases["run_level_s"], phases.get("parse_s", 0.0)
                print(f"  run-level checkers {ops / checks:>9,.0f} ops/CPU-s ({ops / (checks + parse):,.0f} with parsing)")


if __name__ == "__main__":
    main()
