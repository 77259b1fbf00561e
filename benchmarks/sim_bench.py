"""Benchmark: the deterministic simulator (issue 6, targets).

Four figures, each selectable (``all``: speed, stability and matrix):

* ``speed``: simulated seconds per wall second (and per CPU second, the steadier figure on a shared
  machine) of one core simulating a 5-node blazingmq cluster with 10 client processes under
  ``--nemesis`` (default ``harness run``'s: partition, kill, pause, clock), for ``--seeds`` seeds of
  ``--time-limit`` simulated seconds, at each of ``--rates`` (operations per second per process; default
  ``harness run``'s 10, then the exploring rate 2). The simulation alone (history and journals written,
  no checker) and with the four checkers. Each row also gives the CPU seconds per seed.
* ``matrix``: the detection matrix, full size by default: every known bug in every mode it applies to,
  ``--rounds`` rounds of at most ``--max-seeds`` seeds, then ``--clean-seeds`` bug-free seeds per mode
  (all checkers), on ``--jobs`` worker processes. Writes ``matrix.json`` into ``--out``.
* ``cores``: the node cores' own share of a seed's CPU (``speed``'s world, all checkers): the CPU seconds
  spent inside the cores' entry points (``start``, ``tick``, ``receive``, ``request``, ``store_reply``
  and their construction; nested calls of a sharded node counted once), and from it the bound on simulated
  seconds per CPU second if everything else a seed does (the world, network, interpreter, client,
  history, journals, judge) cost nothing, and what a target of ``--target`` simulated seconds per CPU
  second would leave for everything else. Timing a call costs about 2 us of CPU (two readings of the
  process's CPU clock, a system call each), taken out of the seed's CPU, and one reading out of the
  time inside.
* ``stability``: ElectionScouting off and on, under a partition isolating one follower and under the
  leader ping-pong partition (seed 000): mean leader changes during and after the partition and mean term
  growth, over ``--stability-seeds`` seeds.

``speed --compare DIR`` measures two trees side by side on a shared machine: this one and ``DIR`` (another
checkout of the project, e.g. ``git archive`` of the commit before a change), each in a worker process of
its own importing only its tree, seed by seed alternately (A then B, then B then A), so both see the same
load. It prints each seed's CPU seconds and hashes in both trees and the ratio of simulated seconds per CPU
second (this tree over ``DIR``), with ``--shards N`` for a cluster with N storage shards.

    .venv/bin/python benchmarks/sim_bench.py speed [--seeds 5] [--time-limit 60]
    .venv/bin/python benchmarks/sim_bench.py speed --rates 10 --seeds 4 --compare /tmp/base [--shards 4]
    .venv/bin/python benchmarks/sim_bench.py cores --rates 10 --seeds 4 [--target 100]
    .venv/bin/python benchmarks/sim_bench.py matrix [--rounds 3] [--max-seeds 1000] [--clean-seeds 2000]
    .venv/bin/python benchmarks/sim_bench.py stability [--stability-seeds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
WORKER = "_speed-worker"
# A comparison's worker imports the tree it measures (``--root``), not the one this file is in.
_TREE = Path(sys.argv[sys.argv.index("--root") + 1]).resolve() if (
    __name__ == "__main__" and WORKER in sys.argv[1:2] and "--root" in sys.argv) else ROOT
sys.path.insert(0, str(_TREE))

from adapters.cluster.matrix import detection_matrix, stability_figure  # noqa: E402
from harness.sim.run import simulate  # noqa: E402
from harness.spec import TestSpec  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Sequence

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


CORE_ENTRY_POINTS = ("__init__", "start", "tick", "receive", "request", "store_reply")
"""What a driver calls on a node core (docs/node-core.md) or on the fluvio controller."""


def _timed(function: Callable[..., Any], spent: list[float], depth: list[int]) -> Callable[..., Any]:
    """``function``, adding the CPU seconds of each outermost call to ``spent[0]`` and counting it in
    ``spent[1]``; a call made while another is running (``depth``) is part of that one."""
    clock = time.process_time

    def call(*args: Any, **kwargs: Any) -> Any:
        if depth[0]:
            return function(*args, **kwargs)
        depth[0] += 1
        started = clock()
        try:
            return function(*args, **kwargs)
        finally:
            spent[0] += clock() - started
            spent[1] += 1
            depth[0] -= 1

    return call


@contextmanager
def timed_cores(spent: list[float]) -> Iterator[None]:
    """While the block runs, the cores' entry points (:data:`CORE_ENTRY_POINTS` of the fluvio controller,
    ``Node`` and its subclasses) are :func:`_timed` into ``spent``; a sharded node's calls of its replicas
    are part of its own."""
    from cluster.core.fluvio_controller import Controller
    from cluster.core.member import Node

    depth = [0]
    classes: list[type] = [Controller, Node]
    for cls in classes:
        classes.extend(sub for sub in cls.__subclasses__() if sub not in classes)
    saved = [(cls, name, cls.__dict__[name])
             for cls in classes for name in CORE_ENTRY_POINTS if name in cls.__dict__]
    try:
        for cls, name, function in saved:
            setattr(cls, name, _timed(function, spent, depth))
        yield
    finally:
        for cls, name, function in saved:
            setattr(cls, name, function)


def _timing_cost(calls: int = 200_000) -> tuple[float, float]:
    """CPU seconds one timed call adds to the seed (the wrapper and two clock readings: a timed call of a
    function that does nothing less the untimed call), and what it adds to the time measured inside (one
    clock reading, the interval's other end)."""
    def nothing() -> None:
        return None

    timed = _timed(nothing, [0.0, 0], [0])
    clock = time.process_time
    added = read = float("inf")
    for _ in range(3):
        started = clock()
        for _ in range(calls):
            timed()
        middle = clock()
        for _ in range(calls):
            nothing()
        untimed = clock() - middle
        for _ in range(calls):
            clock()
        reads = clock() - middle - untimed
        added = min(added, ((middle - started) - untimed) / calls)
        read = min(read, reads / calls)
    return max(added, 0.0), max(read, 0.0)


def cores(seeds: int, time_limit: float, nemesis: tuple[str, ...], rate: float, target: float) -> list[dict]:
    """The ``cores`` figure (module docstring): one row per seed and one for them all."""
    rows = []
    scratch = Path(tempfile.mkdtemp(prefix="sim-bench-"))
    try:
        simulate(sim_spec(0, time_limit=5.0, store=str(scratch)), scratch / "warm-up")
        per_call, per_read = _timing_cost()
        total = {"sim_s": 0.0, "cpu_s": 0.0, "cores_cpu_s": 0.0}
        for seed in [*range(1, seeds + 1), None]:
            if seed is None:
                sim_s, cpu, inside, calls = total["sim_s"], total["cpu_s"], total["cores_cpu_s"], None
            else:
                spent = [0.0, 0]
                spec = sim_spec(seed, time_limit=time_limit, rate=rate, store=str(scratch), nemesis=nemesis)
                with timed_cores(spent):
                    started = time.process_time()
                    result = simulate(spec, scratch / str(seed))
                    cpu = time.process_time() - started - spent[1] * per_call
                sim_s, inside, calls = result.sim_seconds, spent[0] - spent[1] * per_read, spent[1]
                for key, value in (("sim_s", sim_s), ("cpu_s", cpu), ("cores_cpu_s", inside)):
                    total[key] += value
            budget = sim_s / target
            rows.append({"seed": seed if seed is not None else f"1-{seeds}", "rate_per_process": rate,
                         "simulated_s": round(sim_s, 1), "cpu_s": round(cpu, 3),
                         "cores_cpu_s": round(inside, 3),
                         "core_calls": calls, "cores_share": round(inside / cpu, 3),
                         "sim_per_cpu": round(sim_s / cpu, 1), "bound_sim_per_cpu": round(sim_s / inside, 1),
                         f"rest_cpu_s_at_{target:g}": round(budget - inside, 3),
                         "rest_cpu_s_now": round(cpu - inside, 3), "timing_cost_us": round(per_call * 1e6, 3),
                         "clock_read_us": round(per_read * 1e6, 3)})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rows


def _speed_worker(args: argparse.Namespace) -> int:
    """One tree's side of ``speed --compare``: warm up, then simulate each seed read from stdin (one per
    line) and print its measurements as one JSON line."""
    import harness

    scratch = Path(tempfile.mkdtemp(prefix="sim-bench-worker-"))
    nemesis = tuple(n for n in args.nemesis.split(",") if n)
    options: dict[str, Any] = {"shards": args.shards} if args.shards > 1 else {}
    judged = args.checkers == "all"

    def spec(seed: int, time_limit: float) -> TestSpec:
        return sim_spec(seed, time_limit=time_limit, rate=float(args.rates.split(",")[0]), store=str(scratch),
                        nemesis=nemesis, db_options=options)

    try:
        simulate(spec(0, 5.0), scratch / "warm-up")
        print(json.dumps({"tree": str(Path(harness.__file__).resolve().parent.parent)}), flush=True)
        for line in sys.stdin:
            seed = int(line)
            started, started_cpu = time.perf_counter(), time.process_time()
            result = simulate(spec(seed, args.time_limit), scratch / str(seed), checkers=None if judged else ())
            cpu, wall = time.process_time() - started_cpu, time.perf_counter() - started
            shutil.rmtree(scratch / str(seed), ignore_errors=True)
            print(json.dumps({"seed": seed, "sim_s": result.sim_seconds, "cpu_s": cpu, "wall_s": wall,
                              "valid": str(result.valid), **result.digest}), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


def compare(other: Path, seeds: Sequence[int], argv: Sequence[str]) -> dict[str, Any]:
    """``speed --compare``: this tree (A) and ``other`` (B) over the same seeds, alternately (module
    docstring); prints a line per seed and returns the totals with the ratio A / B of sim s per CPU s."""
    def worker(tree: Path) -> subprocess.Popen[str]:
        process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), WORKER, "--root", str(tree),
                                    *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tree)
        assert process.stdout is not None
        hello = json.loads(process.stdout.readline())
        if Path(hello["tree"]) != tree.resolve():
            raise RuntimeError(f"the worker for {tree} imported the harness from {hello['tree']}")
        return process

    trees = {"A": ROOT, "B": other.resolve()}
    workers = {name: worker(tree) for name, tree in trees.items()}
    totals = {name: {"sim_s": 0.0, "cpu_s": 0.0, "wall_s": 0.0} for name in trees}
    same = True
    try:
        for turn, seed in enumerate(seeds):
            rows = {}
            for name in ("A", "B") if turn % 2 == 0 else ("B", "A"):
                process = workers[name]
                assert process.stdin is not None and process.stdout is not None
                process.stdin.write(f"{seed}\n")
                process.stdin.flush()
                rows[name] = json.loads(process.stdout.readline())
                for key in totals[name]:
                    totals[name][key] += rows[name][key]
            identical = all(rows["A"].get(k) == rows["B"].get(k) for k in ("history_sha256", "journals_sha256"))
            same = same and identical
            print(json.dumps({"seed": seed, "cpu_s_A": round(rows["A"]["cpu_s"], 3),
                              "cpu_s_B": round(rows["B"]["cpu_s"], 3), "sim_s": rows["A"]["sim_s"],
                              "hashes_identical": identical, "load": os.getloadavg()}), flush=True)
    finally:
        for process in workers.values():
            if process.stdin is not None:
                process.stdin.close()
            process.wait()
    summary: dict[str, Any] = {"A": str(trees["A"]), "B": str(trees["B"]), "seeds": len(seeds),
                               "hashes_identical": same, "load": os.getloadavg()}
    for name, total in totals.items():
        summary[f"sim_per_cpu_{name}"] = round(total["sim_s"] / total["cpu_s"], 1)
        summary[f"cpu_s_per_seed_{name}"] = round(total["cpu_s"] / len(seeds), 3)
    summary["ratio_A_over_B"] = round(summary["sim_per_cpu_A"] / summary["sim_per_cpu_B"], 2)
    print(json.dumps(summary), flush=True)
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("figure", choices=("speed", "cores", "matrix", "stability", "all", WORKER))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--nemesis", default=",".join(DEFAULT_NEMESIS), help="speed: fault packages")
    parser.add_argument("--rates", default="10,2", help="speed: operations per second per process, comma-separated")
    parser.add_argument("--target", type=float, default=100.0,
                        help="cores: simulated seconds per CPU second to compare with (issue 28, item 3)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-seeds", type=int, default=1000)
    parser.add_argument("--clean-seeds", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--stability-seeds", type=int, default=5)
    parser.add_argument("--out", default="store/sim-bench")
    parser.add_argument("--compare", default=None, metavar="DIR",
                        help="speed: measure this tree against the tree DIR, alternately (module docstring)")
    parser.add_argument("--shards", type=int, default=1, help="speed --compare: storage shards (db option)")
    parser.add_argument("--checkers", choices=("all", "none"), default="all",
                        help="speed --compare: judge each seed (all) or only simulate it (none)")
    parser.add_argument("--root", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.figure == WORKER:
        return _speed_worker(args)
    if args.compare is not None:
        if args.figure != "speed":
            parser.error("--compare measures the speed figure only")
        print(f"load average {os.getloadavg()}, {os.cpu_count()} cores", flush=True)
        argv = ["--time-limit", str(args.time_limit), "--nemesis", args.nemesis, "--rates", args.rates,
                "--shards", str(args.shards), "--checkers", args.checkers]
        summary = compare(Path(args.compare), range(1, args.seeds + 1), argv)
        return 0 if summary["hashes_identical"] else 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores", flush=True)
    if args.figure in ("speed", "all"):
        rows = speed(args.seeds, args.time_limit, tuple(n for n in args.nemesis.split(",") if n),
                     tuple(float(r) for r in args.rates.split(",")))
        (out / "speed.json").write_text(json.dumps(rows, indent=2) + "\n")
    if args.figure == "cores":
        rows = cores(args.seeds, args.time_limit, tuple(n for n in args.nemesis.split(",") if n),
                     float(args.rates.split(",")[0]), args.target)
        (out / "cores.json").write_text(json.dumps(rows, indent=2) + "\n")
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
