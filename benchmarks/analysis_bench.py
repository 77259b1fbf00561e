"""How many operations per second the analysis pipeline judges, on Spark and without it.

Two workloads of synthetic register runs (``tests/harness/synthetic_runs.py``: concurrent clients, a
partition and a heal, final reads, three nodes' journals; every run valid, so every checker runs to the
end): 100 runs of 10,000 operations, and one run of 1,000,000 operations. Each is analysed

* by the pipeline (:func:`harness.analysis.pipeline.analyze`) on ``local[2]``: reading through Spark,
  all four checkers (linearizability per key; a big run read by two tasks), ``results.json`` and the
  Parquet dataset; not the HTML reports, which the direct path does not make either
  (``benchmarks/report_bench.py`` measures those); the session is started once, before the clock
  starts, and its start time is reported on its own;
* by the same checkers called directly, one run after another in this process, through the registry
  (what ``harness run --analysis direct`` does): parse, check, nothing written.

    .venv/bin/python benchmarks/analysis_bench.py [--scale 0.1] [--store DIR] [--skip-direct]

``--scale`` multiplies the operation counts (0.1: 100 runs of 1,000 and one of 100,000); the runs are
generated once into ``--store`` (default a directory under /tmp) and reused by later invocations.
Prints a table; never asserts anything (benchmarks are not tests). Below it, for each workload, the rate
of the run-level checkers (single-leader-per-term, lsn-monotonicity, durability: everything but
linearizability) on their own, in operations per CPU second: inside the pipeline's tasks (the tasks
report their CPU seconds by phase: parsing, run-level checks, linearizability, statistics, tables) and
called directly; then the same with the parsing of the history and journals they need.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from checkers.history import load_history, load_journals  # noqa: E402
from checkers.registry import CheckInput, applicable, run_checkers  # noqa: E402
from harness.analysis.checks import LINEARIZABLE  # noqa: E402
from harness.analysis.discovery import find_runs  # noqa: E402
from harness.analysis.pipeline import AnalysisOptions, analyze  # noqa: E402
from harness.analysis.spark import start_session  # noqa: E402
from tests.harness.synthetic_runs import write_run  # noqa: E402

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


def generate(store: Path, workload: Workload) -> Path:
    """The workload's runs under ``store/<name>-<ops>/``, written unless already there."""
    root = store / f"{workload.name}-{workload.ops}"
    marker = root / ".complete"
    if marker.is_file():
        return root
    started = time.perf_counter()
    for number in range(workload.runs):
        write_run(
            root,
            workload.name,
            f"20261101T{number // 3600:02d}{number // 60 % 60:02d}{number % 60:02d}",
            ops=workload.ops,
            keys=workload.keys,
            processes=5,
            seed=number + 1,
        )
    marker.write_text("", encoding="utf-8")
    print(
        f"generated {workload.runs} x {workload.ops:,} operations in {time.perf_counter() - started:.0f} s",
        file=sys.stderr,
    )
    return root


def _process_tree_cpu(root_pid: int) -> float:
    """CPU seconds (user + system) used so far by ``root_pid`` and every process below it (Linux /proc).

    The machine is shared, so wall time depends on who else runs; CPU time of the JVM and its Python
    workers is what the pipeline itself costs.
    """
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
        times[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total, frontier = 0.0, [root_pid]
    while frontier:
        pid = frontier.pop()
        total += times.get(pid, 0.0)
        frontier.extend(child for child, parent in parents.items() if parent == pid)
    return total


def spark_cpu() -> float:
    """CPU seconds of this process's Spark JVM and its Python workers."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    return _process_tree_cpu(proc.pid) if proc is not None else float("nan")


def direct(root: Path) -> tuple[float, float, int, int, dict[str, float]]:
    """(seconds, cpu seconds, operations, invalid runs, cpu seconds by phase) for the checkers called
    directly on every run: parse, the run-level checkers, linearizability."""
    runs = find_runs([root]).runs
    started = time.perf_counter()
    cpu_started = time.process_time()
    ops = invalid = 0
    phases = {"parse_s": 0.0, "run_level_s": 0.0, "linearizability_s": 0.0}
    for run in runs:
        lap = time.process_time()
        history = load_history(run.path / "history.jsonl")
        journals = load_journals(run.path)
        inp = CheckInput(history=history, model="cas-register", journals=journals)
        phases["parse_s"] += time.process_time() - lap
        lap = time.process_time()
        names = applicable(inp)
        verdicts = run_checkers(inp, [name for name in names if name != LINEARIZABLE])
        phases["run_level_s"] += time.process_time() - lap
        lap = time.process_time()
        verdicts.update(run_checkers(inp, [name for name in names if name == LINEARIZABLE]))
        phases["linearizability_s"] += time.process_time() - lap
        ops += sum(1 for op in history.ops if op.f != "status")
        invalid += any(v.valid is not True for v in verdicts.values())
        del history, journals, verdicts, inp
        gc.collect()
    return time.perf_counter() - started, time.process_time() - cpu_started, ops, invalid, phases


def pipeline(spark, root: Path) -> tuple[float, float, int, int, dict[str, float], dict[str, float]]:  # noqa: ANN001
    selection = find_runs([root])
    started, cpu_started = time.perf_counter(), spark_cpu() + time.process_time()
    analysis = analyze(spark, selection, AnalysisOptions(key_timeout_s=None, write_reports=False))
    seconds = time.perf_counter() - started
    cpu = spark_cpu() + time.process_time() - cpu_started
    invalid = sum(1 for o in analysis.outcomes if o.valid is not True)
    return seconds, cpu, analysis.operations, invalid, analysis.timings_s, analysis.task_cpu_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the operation counts (default 1)")
    parser.add_argument(
        "--store", type=Path, default=Path("/tmp/chaos-analysis-bench"), help="where runs are generated"
    )
    parser.add_argument("--skip-direct", action="store_true", help="only the pipeline")
    parser.add_argument("--only", choices=("many-small", "one-big"), help="one workload only")
    args = parser.parse_args()

    chosen = [w for w in workloads(args.scale) if args.only in (None, w.name)]
    roots = {w.name: generate(args.store, w) for w in chosen}

    started = time.perf_counter()
    spark = start_session(MASTER)
    session_s = time.perf_counter() - started
    rows = []
    try:
        for workload in chosen:
            seconds, cpu, ops, invalid, laps, task_cpu = pipeline(spark, roots[workload.name])
            row = {
                "workload": workload,
                "pipeline_s": seconds,
                "pipeline_cpu": cpu,
                "ops": ops,
                "pipeline_invalid": invalid,
                "laps": laps,
                "task_cpu": task_cpu,
            }
            if not args.skip_direct:
                d_seconds, d_cpu, d_ops, d_invalid, d_phases = direct(roots[workload.name])
                row.update(
                    direct_s=d_seconds, direct_cpu=d_cpu, direct_ops=d_ops, direct_invalid=d_invalid, direct_phases=d_phases
                )
            rows.append(row)
            print(f"done: {workload.name}", file=sys.stderr)
    finally:
        spark.stop()

    load = os.getloadavg()
    print(
        f"\nSpark session start ({MASTER}): {session_s:.1f} s (not included below); "
        f"load average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} cores\n"
    )
    header = (
        f"{'workload':<22} {'ops':>10} | {'pipeline s':>10} {'cpu s':>7} {'ops/s':>7} {'ops/cpu-s':>9} | "
        f"{'direct s':>8} {'cpu s':>7} {'ops/s':>7} | {'wall ratio':>10} {'cpu ratio':>9}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        w = row["workload"]
        label = f"{w.runs} x {w.ops:,} ops"
        pipeline_cols = (
            f"{row['pipeline_s']:>10.1f} {row['pipeline_cpu']:>7.1f} {row['ops'] / row['pipeline_s']:>7,.0f} "
            f"{row['ops'] / row['pipeline_cpu']:>9,.0f}"
        )
        if "direct_s" in row:
            direct_cols = (
                f"{row['direct_s']:>8.1f} {row['direct_cpu']:>7.1f} {row['direct_ops'] / row['direct_s']:>7,.0f} | "
                f"{row['pipeline_s'] / row['direct_s']:>9.2f}x {row['pipeline_cpu'] / row['direct_cpu']:>8.2f}x"
            )
        else:
            direct_cols = f"{'-':>8} {'-':>7} {'-':>7} | {'-':>10} {'-':>9}"
        print(f"{label:<22} {row['ops']:>10,} | {pipeline_cols} | {direct_cols}")
    print()
    for row in rows:
        laps = ", ".join(f"{k} {v:.1f}" for k, v in row["laps"].items())
        bad = f"; runs not valid: pipeline {row['pipeline_invalid']}, direct {row.get('direct_invalid', '-')}"
        print(f"{row['workload'].name}: pipeline steps (s): {laps}{bad}")
        print(f"  {'inside the tasks (CPU s)':<28} " + ", ".join(f"{k} {v:.1f}" for k, v in row["task_cpu"].items()))
        if "direct_phases" in row:
            print(f"  {'direct (CPU s)':<28} " + ", ".join(f"{k} {v:.1f}" for k, v in row["direct_phases"].items()))
        for label, phases, ops in (
            ("pipeline tasks", row["task_cpu"], row["ops"]),
            ("direct", row.get("direct_phases"), row.get("direct_ops")),
        ):
            if phases and phases.get("run_level_s"):
                checks, parse = phases["run_level_s"], phases.get("parse_s", 0.0)
                print(
                    f"  run-level checkers, {label + ':':<16} {ops / checks:>9,.0f} ops/cpu-s "
                    f"({ops / (checks + parse):,.0f} with parsing)"
                )


if __name__ == "__main__":
    main()
