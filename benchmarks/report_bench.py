"""Benchmark: what ``report.html`` of a large synthetic run costs, against a bare parse of its history
(issue 5, item 3: the report must stay usable at 100,000 operations; issue 28, item 2: the report of a
100k-op run costs at most 1.5x a bare parse).

The run comes from ``tests/harness/report_runs.py`` (a seeded five-node register service under
partition, kill, pause and clock faults, with the term-reuse bug, so every drawing of a counterexample is
exercised): ``--ops`` client operations, status polls once a second per node, node journals with every
apply. It is judged by the real checkers first (single-leader-per-term, lsn-monotonicity, durability;
``--linearizable`` adds the linearizability search, which takes minutes at this size).

Then, ``--repeat`` times, three things are measured side by side in this one process, their order
rotating from one repetition to the next (so a burst of load from elsewhere falls on all alike):

* **bare parse**: ``json.loads`` of every line of ``history.jsonl`` (read as bytes), keeping nothing; the
  floor any reader of the history pays (``benchmarks/linearizability_bench.py`` uses the same);
* **msgspec parse**: the same with msgspec's JSON decoder (to dicts), the fastest generic parse this
  environment has (the report reads with msgspec too, typed: a stricter yardstick, printed beside);
* **report**: :func:`harness.report.render.write_report`, as ``harness run``, ``harness analyze`` and
  ``harness report`` call it: read the run (``load_run``), build the figures (``build_report``),
  render the template, write ``report.html``.

Each repetition gives a ratio report / bare parse, in wall time and in CPU time; the median ratio is
the figure (issue 28's target: at most 1.5x) (the ratio of the best times is printed too). One more pass times each phase of the report
(as ``write_report`` runs them); the page's size and the load average follow, since the machine may be
shared. The first report of the process is not counted (it compiles the templates, once per process).

    .venv/bin/python benchmarks/report_bench.py [--ops 100000] [--seed 11] [--repeat 6] [--keep DIR]

With ``--keep DIR`` the run is written there and kept; a second invocation with the same ``--keep``,
``--ops`` and ``--seed`` reuses it instead of simulating and judging it again.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.report.data import load_run  # noqa: E402
from harness.report.render import build_report, render_report, write_report  # noqa: E402

try:
    from harness.report.data import no_cyclic_gc
except ImportError:  # the tree before issue 28 (to measure it with this same script)
    from contextlib import nullcontext as no_cyclic_gc
from tests.harness.report_runs import judge_run, write_run  # noqa: E402

STAMP = "20250101T000000"


def bare_parse(history: Path) -> None:
    """``json.loads`` of every line of a history, keeping nothing."""
    loads = json.loads
    with history.open("rb") as handle:
        for line in handle:
            loads(line)


def msgspec_parse(history: Path) -> None:
    """msgspec's JSON decoding (to dicts) of every line of a history, keeping nothing."""
    decode = msgspec.json.Decoder().decode
    with history.open("rb") as handle:
        for line in handle:
            decode(line)


def phases(run: Path) -> tuple[dict[str, float], str]:
    """Each phase of ``write_report`` timed once (without the write): (seconds by phase, the page)."""
    with no_cyclic_gc():  # as write_report runs them
        t0 = time.perf_counter()
        data = load_run(run)
        t1 = time.perf_counter()
        view = build_report(data)
        t2 = time.perf_counter()
        text = render_report(view)
        t3 = time.perf_counter()
    print(f"client operations in the history: {len(data.ops):,}; status polls {len(data.status):,}; "
          f"nemesis operations {len(data.nemesis):,}")
    return {"read the run": t1 - t0, "figures": t2 - t1, "template": t3 - t2}, text


def timed(function: Callable[[], Any]) -> tuple[float, float]:
    """(wall, cpu) seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    function()
    return time.perf_counter() - wall, time.process_time() - cpu


def load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def prepare(root: Path, ops: int, seed: int, linearizable: bool) -> Path:
    """The run to report on: reused from ``root`` when it is there (``--keep``), else simulated and judged."""
    marker = root / f"bench-{ops}-{seed}{'-lin' if linearizable else ''}.txt"
    if marker.is_file():
        run = Path(marker.read_text(encoding="utf-8").strip())
        if (run / "results.json").is_file():
            print(f"run: reusing {run}")
            return run
    started = time.perf_counter()
    # The simulation's operation count is approximate (think times and timeouts vary): ask for a fifth
    # more and report what the history holds.
    run = write_run(root, ops=int(ops * 1.2), seed=seed, stamp=STAMP, judge=False)
    generated = time.perf_counter() - started
    checkers = ("single-leader-per-term", "lsn-monotonicity", "durability")
    started = time.perf_counter()
    judge_run(run, (*checkers, "linearizable") if linearizable else checkers)
    judged = time.perf_counter() - started
    marker.write_text(str(run), encoding="utf-8")
    print(f"run: generated in {generated:.1f} s, judged in {judged:.1f} s")
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--repeat", type=int, default=6, help="repetitions (bare parse, msgspec parse, report), order rotating")
    parser.add_argument("--linearizable", action="store_true", help="also run the linearizability checker")
    parser.add_argument("--keep", default=None, help="write the run here and keep it; reused when already there")
    args = parser.parse_args()

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="report-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        run = prepare(root, args.ops, args.seed, args.linearizable)
        history = run / "history.jsonl"
        history_mb = history.stat().st_size / 1e6
        journal_mb = sum(p.stat().st_size for p in (run / "nodes").glob("*/journal.jsonl")) / 1e6
        print(f"run: history {history_mb:.1f} MB, journals {journal_mb:.1f} MB")
        print(f"load average (1, 5, 15 min) at start: {load()} on {os.cpu_count()} cores")

        write_report(run)  # compiles the templates (once per process), warms the file cache
        subjects: dict[str, Callable[[], Any]] = {
            "bare": lambda: bare_parse(history),
            "msgspec": lambda: msgspec_parse(history),
            "report": lambda: write_report(run),
        }
        names = list(subjects)
        walls: list[dict[str, float]] = []
        cpus: list[dict[str, float]] = []
        for repetition in range(args.repeat):
            order = names[repetition % 3 :] + names[: repetition % 3]
            wall, cpu = {}, {}
            for which in order:
                wall[which], cpu[which] = timed(subjects[which])
            walls.append(wall)
            cpus.append(cpu)
            print(f"  #{repetition + 1} ({', '.join(order)}): bare parse {wall['bare']:.2f} s wall "
                  f"{cpu['bare']:.2f} s cpu; msgspec {wall['msgspec']:.2f} s wall {cpu['msgspec']:.2f} s cpu; "
                  f"report {wall['report']:.2f} s wall {cpu['report']:.2f} s cpu; ratio "
                  f"{wall['report'] / wall['bare']:.2f}x wall {cpu['report'] / cpu['bare']:.2f}x cpu; load {load()}")

        def median(what: list[dict[str, float]], over: str) -> float:
            return statistics.median(m["report"] / m[over] for m in what)

        best_bare, best_report = min(m["bare"] for m in walls), min(m["report"] for m in walls)
        timings, text = phases(run)
        print(f"report.html: {len(text.encode('utf-8')) / 1e3:.0f} kB; one more pass: "
              + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in timings.items()))
        print(f"bare parse (json.loads per line): best {best_bare:.2f} s; report: best {best_report:.2f} s")
        print(f"RATIO report / bare parse, median of {args.repeat} rotating repetitions: "
              f"{median(walls, 'bare'):.2f}x wall, {median(cpus, 'bare'):.2f}x cpu (best / best "
              f"{best_report / best_bare:.2f}x); report / msgspec parse {median(walls, 'msgspec'):.2f}x wall, "
              f"{median(cpus, 'msgspec'):.2f}x cpu")
        print(f"load average (1, 5, 15 min) at end: {load()} on {os.cpu_count()} cores")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
