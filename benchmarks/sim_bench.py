"""Benchmark: the deterministic simulator (issue 6, targets).

Three figures, each selectable:

* ``speed``: simulated seconds per wall second (and per CPU second, the steadier figure on a shared
  machine) of one core simulating a 5-node blazingmq cluster with 10 client processes under
  ``--nemesis`` (default ``harness run``'s: partition, kill, pause, clock), for ``--seeds`` seeds of
  ``--time-limit`` simulated seconds, at each of ``--rates`` (operations per second per process; default
  ``harness run``'s 10, then the exploring rate 2). The simulation alone (history and journals written,
  no checker) and with the four checkers. Each row also gives the CPU seconds per seed.
* ``matrix``: the detection matrix, full size by default: every known bug in every mode it applies to,
  ``--rounds`` rounds of at most ``--max-seeds`` seeds, then ``--clean-seeds`` bug-free seeds per mode
  (all checkers), on ``--jobs`` worker processes. Writes ``matrix.json`` into ``--out``.
* ``stability``: ElectionScouting off and on, under a partition isolating one follower and under the
  leader ping-pong partition (seed 000): mean leader changes during and after the partition and mean term
  growth, over ``--stability-seeds`` seeds.

    .venv/bin/python benchmarks/sim_bench.py speed [--seeds 5] [--time-limit 60]
    .venv/bin/python benchmarks/sim_bench.py matrix [--rounds 3] [--max-seeds 1000] [--clean-seeds 2000]
    .venv/bin/python benchmarks/sim_bench.py stability [--stability-seeds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.cluster.matrix import detection_matrix, stability_figure  # noqa: E402
from harness.sim.run import simulate  # noqa: E402
from harness.spec import TestSpec  # noqa: E402

EXPLORING_RATE = 2.0
"""Operations per second per process of the detection matrix's runs (docs/simulation.md, "Speed")."""
SIX = ("partition", "kill", "pause", "clock", "loss", "latency")
DEFAULT_NEMESIS = ("partition", "kill", "pause", "clock")
"""``harness run``'s default fault packages (``harness.arguments.DEFAULT_NEMESIS``)."""


def sim_spec(seed: int, **fields: object) -> TestSpec:
    """A 5-node blazingmq cluster, 10 clients, under every single-fault package, on the sim platform."""
    fields.setdefault("nemesis", SIX)
    return TestSpec(seed=seed, db="cluster", platform="sim", **fields)  # type: ignore[arg-type]


def speed(seeds: int, time_limit: float, nemesis: tuple[str, ...] = DEFAULT_NEMESIS,
          rates: tuple[float, ...] = (10.0, EXPLORING_RATE)) -> list[dict]:
    rows = []
    scratch = Path(tempfile.mkdtemp(prefix="sim-bench-"))
    try:
        simulate(sim_spec(0, time_limit=5.0, store=str(scratch)), scratch / "warm-up")  # imports, caches
        for rate in rates:
            for judged in (False, True):
                sim = wall = cpu = 0.0
                ops = calls = 0
                for seed in range(1, seeds + 1):
                    spec = sim_spec(seed, time_limit=time_limit, rate=rate, store=str(scratch), nemesis=nemesis)
                    started, started_cpu = time.perf_counter(), time.process_time()
                    result = simulate(spec, scratch / f"{rate}-{judged}-{seed}", checkers=None if judged else ())
                    wall += time.perf_counter() - started
                    cpu += time.process_time() - started_cpu
                    sim += result.sim_seconds
                    ops += int(result.results["stats"]["invoked"])
                    calls += int(result.results["sim"]["core_calls"])
                rows.append({"rate_per_process": rate, "nemesis": ",".join(nemesis), "checkers": judged,
                             "seeds": seeds, "cpu_s_per_seed": round(cpu / seeds, 3),
                             "simulated_s": round(sim, 1), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                             "sim_per_wall": round(sim / wall, 1), "sim_per_cpu": round(sim / cpu, 1),
                             "client_ops_per_sim_s": round(ops / sim, 1), "core_calls_per_sim_s": round(calls / sim, 1)})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("figure", choices=("speed", "matrix", "stability", "all"))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--nemesis", default=",".join(DEFAULT_NEMESIS), help="speed: fault packages")
    parser.add_argument("--rates", default="10,2", help="speed: operations per second per process, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-seeds", type=int, default=1000)
    parser.add_argument("--clean-seeds", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--stability-seeds", type=int, default=5)
    parser.add_argument("--out", default="store/sim-bench")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores", flush=True)
    if args.figure in ("speed", "all"):
        rows = speed(args.seeds, args.time_limit, tuple(n for n in args.nemesis.split(",") if n),
                     tuple(float(r) for r in args.rates.split(",")))
        (out / "speed.json").write_text(json.dumps(rows, indent=2) + "\n")
    if args.figure in ("stability", "all"):
        rows = stability_figure(range(1, args.stability_seeds + 1))
        for row in rows:
            print(json.dumps(row), flush=True)
        (out / "stability.json").write_text(json.dumps(rows, indent=2) + "\n")
    if args.figure in ("matrix", "all"):
        started = time.perf_counter()
        base = sim_spec(0, rate=EXPLORING_RATE, store=str(out / "store"))
        matrix = detection_matrix(
            base, rounds=args.rounds, max_seeds=args.max_seeds, clean_seeds=args.clean_seeds, jobs=args.jobs,
            on_detection=lambda d: print(json.dumps(d.__dict__), flush=True),
            on_clean=lambda c: print(json.dumps({"mode": c.mode, "seeds": c.seeds, "invalid": list(c.invalid),
                                                 "unknown": list(c.unknown), "sim_s": round(c.sim_seconds),
                                                 "wall_s": round(c.wall_seconds)}), flush=True))
        document = matrix.to_json()
        document["wall_seconds"] = round(time.perf_counter() - started, 1)
        (out / "matrix.json").write_text(json.dumps(document, indent=2) + "\n")
        for row in matrix.rows():
            print(f"{row['bug']:22} {row['mode']:10} {row['checker']:24} seeds per round {row['seeds_to_failure']} "
                  f"median {row['median_seeds']} max {row['max_seeds']}")
        return 0 if matrix.complete else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
