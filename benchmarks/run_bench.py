"""Benchmark: what ``harness run`` costs after its test is over (issue 28, item 1: judged once).

The *tail* of a run is the time from the end of its test (the interpreter's final phase done: phase
``done``) to the exit of the ``harness run`` process: teardown (faults healed, journals collected,
containers removed), judging, ``results.json``, the dataset, the report. Target: at most 10% of the
run's time limit for a 60 s run on a quiet machine.

Each run is ``harness run`` (the CLI's own ``main``, default arguments but those given) in a worker
process that imports only the tree it measures; the worker records when its run's phase became ``done``
(CLOCK_MONOTONIC is one clock for every process of the machine) and this process when the worker exited.
With ``--compare DIR`` (another checkout, e.g. ``git archive`` of the commit before a change) the two
trees run alternately (A then B, then B then A), so both see the same load; the ratio printed is this
tree's tail over ``DIR``'s.

    .venv/bin/python benchmarks/run_bench.py [--platform docker|sim] [--time-limit 60] [--pairs 2]
        [--compare /tmp/base] [-- extra harness run arguments]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The worker: the CLI's main with harness.cli.run wrapped to watch the run's phase.
WORKER = r"""
import json, sys, threading, time
sys.path.insert(0, sys.argv[1])
import harness.cli as cli
seen = {}
original = cli.run

def watched(spec, **kwargs):
    stats = kwargs["stats"]
    def watch():
        while "done" not in seen:
            if stats.phase in ("done", "checking"):
                seen["done"] = time.monotonic()
            time.sleep(0.005)
    threading.Thread(target=watch, daemon=True).start()
    return original(spec, **kwargs)

cli.run = watched
code = cli.main(sys.argv[2:])
print("BENCH " + json.dumps({"code": code, "test_over": seen.get("done")}), flush=True)
sys.exit(code)
"""


def one(tree: Path, arguments: list[str], store: Path) -> dict[str, float]:
    """One ``harness run`` of ``tree``: its tail (seconds) and its whole wall time."""
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", WORKER, str(tree), "run", *arguments, "--no-live", "--store", str(store)],
                         cwd=tree, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree)})
    ended = time.monotonic()
    lines = [line for line in out.stdout.splitlines() if line.startswith("BENCH ")]
    if not lines:
        raise SystemExit(f"{tree}: no result (exit {out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    found = json.loads(lines[-1][len("BENCH "):])
    if found["test_over"] is None:
        raise SystemExit(f"{tree}: the run never reached its end:\n{out.stdout[-2000:]}")
    return {"tail_s": ended - found["test_over"], "wall_s": ended - started, "code": found["code"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platform", default="docker", choices=("docker", "sim"))
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--pairs", type=int, default=2, help="runs per tree (default 2)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compare", type=Path, default=None, help="another tree, measured alternately")
    parser.add_argument("extra", nargs="*", help="more harness run arguments (after --)")
    args = parser.parse_args(argv)
    arguments = ["--db", "cluster", "--platform", args.platform, "--time-limit", f"{args.time_limit:g}", *args.extra]
    trees = [("this tree", ROOT)] + ([("compare", args.compare.resolve())] if args.compare else [])
    tails: dict[str, list[float]] = {name: [] for name, _ in trees}
    with tempfile.TemporaryDirectory(prefix="run-bench-") as scratch:
        for pair in range(args.pairs):
            order = trees if pair % 2 == 0 else list(reversed(trees))
            for name, tree in order:
                seed = args.seed + pair
                result = one(tree, [*arguments, "--seed", str(seed)], Path(scratch) / f"{name}-{pair}".replace(" ", "-"))
                tails[name].append(result["tail_s"])
                print(f"{name:9} seed {seed}: exit {result['code']}, wall {result['wall_s']:.1f} s, "
                      f"tail {result['tail_s']:.1f} s ({100 * result['tail_s'] / args.time_limit:.0f}% of the "
                      f"time limit); load {os.getloadavg()[0]:.2f}", flush=True)
    for name, values in tails.items():
        print(f"{name}: median tail {statistics.median(values):.1f} s "
              f"({100 * statistics.median(values) / args.time_limit:.0f}% of {args.time_limit:g} s)")
    if args.compare:
        ratio = statistics.median(tails["this tree"]) / statistics.median(tails["compare"])
        print(f"tail, this tree over {args.compare}: {ratio:.2f}x")
    print("load average: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
