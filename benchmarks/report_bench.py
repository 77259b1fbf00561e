"""Benchmark: render time and size of ``report.html`` for a large synthetic run (issue 5, item 3: the report
must stay usable at 100,000 operations).

The run comes from ``tests/harness/report_runs.py`` (a seeded five-node register service under
partition, kill, pause and clock faults, with the term-reuse bug, so every drawing of a counterexample is
exercised): ``--ops`` client operations, status polls once a second per node, node journals with every
apply. It is judged by the real checkers first (single-leader-per-term, lsn-monotonicity, durability;
``--linearizable`` adds the linearizability search, which takes minutes at this size), then the report
is rendered ``--repeat`` times and the best time of each phase is printed: reading the run
(``load_run``: JSON decoding of the history dominates), building the figures (``build_report``),
rendering the template, and the page's size.

    .venv/bin/python benchmarks/report_bench.py [--ops 100000] [--seed 11] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.report.data import load_run  # noqa: E402
from harness.report.render import REPORT, build_report, render_report  # noqa: E402
from tests.harness.report_runs import judge_run, write_run  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--linearizable", action="store_true", help="also run the linearizability checker")
    parser.add_argument("--keep", default=None, help="write the run here and keep it (default: a temp dir)")
    args = parser.parse_args()

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="report-bench-"))
    try:
        started = time.perf_counter()
        # The simulation's operation count is approximate (think times and timeouts vary): ask for a
        # fifth more and report what the history holds.
        run = write_run(root, ops=int(args.ops * 1.2), seed=args.seed, stamp="20250101T000000", judge=False)
        generated = time.perf_counter() - started
        checkers = ("single-leader-per-term", "lsn-monotonicity", "durability")
        started = time.perf_counter()
        judge_run(run, (*checkers, "linearizable") if args.linearizable else checkers)
        judged = time.perf_counter() - started
        history_mb = (run / "history.jsonl").stat().st_size / 1e6
        journal_mb = sum(p.stat().st_size for p in (run / "nodes").glob("*/journal.jsonl")) / 1e6
        print(f"run: history {history_mb:.1f} MB, journals "
              f"{journal_mb:.1f} MB; generated in {generated:.1f} s, judged in {judged:.1f} s")
        best = {"load": float("inf"), "build": float("inf"), "render": float("inf"), "total": float("inf")}
        size = 0
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            data = load_run(run)
            t1 = time.perf_counter()
            report = build_report(data)
            t2 = time.perf_counter()
            text = render_report(report)
            t3 = time.perf_counter()
            (run / REPORT).write_text(text, encoding="utf-8")
            size = len(text.encode("utf-8"))
            for name, value in (("load", t1 - t0), ("build", t2 - t1), ("render", t3 - t2), ("total", t3 - t0)):
                best[name] = min(best[name], value)
        print(f"client operations in the history: {len(data.ops):,}; status polls {len(data.status):,}; "
              f"nemesis operations {len(data.nemesis):,}")
        print(f"report.html: {size / 1e3:.0f} kB; best of {args.repeat}: read the run {best['load']:.2f} s, "
              f"figures {best['build']:.2f} s, template {best['render']:.2f} s, total {best['total']:.2f} s")
        print(f"machine load average (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())} on "
              f"{os.cpu_count()} cores")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
