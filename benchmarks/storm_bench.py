"""Benchmark: how many elections a nemesis causes (issue 15: election storms).

Elections are counted from the node journals as the report's timeline counts them
(``harness.report.timeline.count_elections``): the terms in which some node became leader during the chaos
phase, per minute of it, and the terms started there that nobody led (split votes, failed ballots).

Two figures:

* ``sim``: simulate bug-free runs of every (nemesis, mode) given, for the given seeds, and print per pair
  the mean, minimum and maximum elections per minute, the mean unwon terms per minute, and how many runs
  were valid (a storm must not buy elections with false alarms). Runs are simulated in scratch
  directories and deleted.
* ``runs``: the same figures for stored runs (container runs, say), one line per run.
* ``detect``: for one known bug (or ``none``, the bug-free control), every mode it applies to (or
  ``--modes``) and every nemesis given, simulate the seeds and count the runs its checker caught
  (``KnownBug.caught_by``), the runs invalid by any checker, and the unknown ones. Invalid runs are kept
  in ``--store`` (with their replay commands), the rest deleted.

    .venv/bin/python benchmarks/storm_bench.py sim --nemesis partition,kill,pause,clock leader-churn \\
        --modes blazingmq,raft --seeds 1..5 [--time-limit 60] [--rate 10] [--jobs 2] [--core scouting=false] \\
        [--storm-pacing clock|system]
    .venv/bin/python benchmarks/storm_bench.py runs store/cluster-raft-register-leader-churn/*
    .venv/bin/python benchmarks/storm_bench.py detect --bug vote-twice --nemesis ring-storm leader-churn \\
        --seeds 1..20 [--modes raft] [--rate 10] [--op-timeout 1] [--core scouting=false] [--store DIR]
    .venv/bin/python benchmarks/storm_bench.py suite suites/bugs-all-modes.toml --seeds 1000..1019 \\
        [--only vote-twice] [--skip no-dedup] [--modes aeron] [--own-checker] [--jobs 2] [--store DIR] \\
        [--storm-pacing clock|system]

* ``opportunities``: a suite file's bug entries on the simulator as ``suite`` runs them, one seed at a time,
  with each run's opportunities (``results.json``'s ``opportunities``, ``harness.opportunities``: how often
  the schedule gave the bug a chance, and how often the journals show the mistake made): one line per run,
  then per entry the counts of the caught runs beside those of the missed ones (issue 32).

    .venv/bin/python benchmarks/storm_bench.py opportunities suites/bugs-all-modes.toml --seeds 1000..1019 \\
        --only 'fluvio bug-promote-outside-lrs' [--modes fluvio] [--time-limit 15]

* ``load``: the same storms on containers on a quiet machine and beside ``--hogs`` CPU-bound processes
  (a loaded one), seed by seed, the order alternating (quiet first, then loaded first): per (storms, mode,
  pacing) the elections per minute and the completed ``ok`` operations of each run, their means, and the
  loaded/quiet ratios, which issue 32 wants within a third (0.67-1.5); each run's line also says how
  long it served and how fast (``serving``). Each run is ``harness run`` on the
  docker platform (5 nodes, 60 s, clients bound to nodes, bug-free, judged in process); the runs are kept
  in ``--store``. The hogs share one session or have one each (``--hog-sessions``, ``_hogs``) and are
  killed however the benchmark ends. ``--beside N`` adds N other runs of the same storms to a loaded run
  (other seeds, started with it, stored in scratch and deleted): the load of a CI runner at ``harness
  suite --jobs N+1``, whose containers compete with the measured run's in Docker's one cgroup.

    .venv/bin/python benchmarks/storm_bench.py load --nemesis leader-churn,timeout-storm --modes fluvio \\
        --seeds 11,12 [--pacing clock system] [--hogs 6] [--hog-sessions one|each] [--beside 2] \\
        [--core scouting=false] [--time-limit 60] [--store store/storm-load]

* ``suite``: a suite file's entries on the simulator, each with exactly its settings (packages, core
  options, client binding, interval, rate, timeouts), for the given seeds instead of the suite's: one line
  per (entry, mode) with the runs its bug's own checker caught, the invalid runs (what the nightly counts
  as caught), the valid ones (what a control must be), and the seeds not as the entry expects. This
  is the nightly's table at simulator cost (``suites/bugs-all-modes.toml``: about 1,000 runs, 10 minutes on
  2 cores).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from checkers.history import load_history  # noqa: E402
from harness.db.plugin import load_plugin  # noqa: E402
from harness.pacing import DEFAULT_STORM_PACING, STORM_PACINGS  # noqa: E402
from harness.report.clocks import align, clock_offsets  # noqa: E402
from harness.report.data import load_run  # noqa: E402
from harness.report.timeline import Elections, count_elections, journal_roles  # noqa: E402
from harness.sim.explore import explore, parse_seeds  # noqa: E402
from harness.sim.run import checker_for_bug, known_bugs, simulate, workload_for_bug  # noqa: E402
from harness.spec import TestSpec  # noqa: E402
from harness.suite import Case, SuiteError, load_suite, test_spec  # noqa: E402

DB = "cluster"
"""The DB whose known bugs and election modes are measured: the bundled one."""


def _modes() -> list[str]:
    """Every election mode the DB's ``mode`` option allows."""
    (mode,) = (option for option in load_plugin(DB).options if option.name == "mode")
    return [str(choice) for choice in mode.choices]


def _spec(*, seed: int, mode: str, nemesis: str, core: dict[str, Any], bugs: tuple[str, ...] = (),
          **fields: Any) -> TestSpec:
    """A simulated test of the bundled DB in ``mode`` under the comma-separated ``nemesis`` packages."""
    options: dict[str, Any] = {"mode": mode}
    if bugs:
        options["bug"] = list(bugs)
    if core:
        options["core"] = dict(core)
    return TestSpec(seed=seed, db=DB, db_options=options, nemesis=tuple(nemesis.split(",")), platform="sim",
                    **fields)


def elections_of(run_dir: Path) -> tuple[Elections, Any]:
    """A stored run's elections during its chaos phase, and its verdict."""
    run = load_run(run_dir)
    offsets = clock_offsets(run.nemesis, run.nodes)
    alignment = align(run.test, run.journals, run.status, offsets)
    end = max(run.end_ns, 1)
    limit = (run.test.get("timings") or {}).get("time_limit") or end / 1e9
    spans = journal_roles(run.journals, alignment, end)
    return count_elections(spans, min(int(limit * 1e9), end)), run.valid


def _simulate_one(job: tuple[str, str, int, float, float, float, dict[str, Any], str, str]) -> dict[str, Any]:
    nemesis, mode, seed, time_limit, rate, interval, core, scratch, pacing = job
    spec = _spec(seed=seed, mode=mode, nemesis=nemesis, core=core, time_limit=time_limit, rate=rate,
                 nemesis_interval=interval, store=scratch, storm_pacing=pacing)
    directory = Path(tempfile.mkdtemp(prefix=f"{mode}-{seed}-", dir=scratch))
    try:
        result = simulate(spec, directory / "run")
        elections, valid = elections_of(result.run_dir)
        return {"nemesis": nemesis, "mode": mode, "seed": seed, "won": elections.won, "unwon": elections.unwon,
                "per_minute": round(elections.per_minute, 2), "valid": valid}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def sim(args: argparse.Namespace) -> None:
    seeds = parse_seeds(args.seeds)
    scratch = tempfile.mkdtemp(prefix="storm-bench-")
    core = {name: json.loads(value) for name, _, value in (c.partition("=") for c in args.core)}
    jobs = [(nemesis, mode, seed, args.time_limit, args.rate, args.interval, core, scratch, args.storm_pacing)
            for nemesis in args.nemesis for mode in args.modes.split(",") for seed in seeds]
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            for row in pool.map(_simulate_one, jobs):
                rows.setdefault((row["nemesis"], row["mode"]), []).append(row)
                if args.verbose:
                    print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{'nemesis':42} {'mode':10} {'runs':>4} {'elections/min mean':>18} {'min':>5} {'max':>5} "
          f"{'unwon/min':>9} {'valid':>6}")
    for (nemesis, mode), found in rows.items():
        rates = [r["per_minute"] for r in found]
        unwon = statistics.mean(r["unwon"] for r in found) * 60.0 / args.time_limit
        valid = sum(1 for r in found if r["valid"] is True)
        print(f"{nemesis:42} {mode:10} {len(found):>4} {statistics.mean(rates):>18.1f} {min(rates):>5.1f} "
              f"{max(rates):>5.1f} {unwon:>9.1f} {valid:>3}/{len(found):<2}")


def detect(args: argparse.Namespace) -> None:
    seeds = parse_seeds(args.seeds)
    bugs = () if args.bug == "none" else (args.bug,)
    modes = args.modes.split(",") if args.modes else list(known_bugs(DB)[args.bug]["modes"] if bugs else _modes())
    checker = checker_for_bug(DB, args.bug) if bugs else None
    core = {name: json.loads(value) for name, _, value in (c.partition("=") for c in args.core)}
    print(f"{'bug':22} {'mode':10} {'nemesis':40} {'caught':>7} {'invalid':>7} {'unknown':>7}  first invalid seeds")
    for nemesis in args.nemesis:
        for mode in modes:
            spec = _spec(seed=seeds[0], mode=mode, nemesis=nemesis, core=core, bugs=bugs,
                         workload=args.workload or (workload_for_bug(DB, args.bug) if bugs else "register"),
                         time_limit=args.time_limit, rate=args.rate, op_timeout=args.op_timeout,
                         nemesis_interval=args.interval, store=args.store, client_binding=args.client_binding)
            found = explore(spec, seeds, jobs=args.jobs, keep_going=True)
            caught = [o.seed for o in found.outcomes if checker in o.failed] if checker else []
            invalid = [o.seed for o in found.outcomes if o.valid is False]
            unknown = [o.seed for o in found.outcomes if o.valid not in (True, False)]
            shown = f"{len(caught) if checker else '-'}/{len(found.outcomes)}"
            unknown_seeds = f"  unknown: {','.join(map(str, unknown[:8]))}" if unknown else ""
            print(f"{args.bug:22} {mode:10} {nemesis:40} {shown:>7} {len(invalid):>7} {len(unknown):>7}  "
                  f"{','.join(map(str, invalid[:8]))}{unknown_seeds}", flush=True)


def _entries(cases: tuple[Case, ...]) -> dict[tuple[Any, ...], Case]:
    """One case per distinct (entry, mode, settings) of a suite: the suite's repetitions differ only in seed."""
    found: dict[tuple[Any, ...], Case] = {}
    for case in cases:
        key = (case.group, case.label, case.workload, case.nemesis, case.time_limit, case.expect,
               json.dumps(dict(case.db_options), sort_keys=True), json.dumps(dict(case.options), sort_keys=True))
        found.setdefault(key, case)
    return found


def _suite_setup(args: argparse.Namespace, figure: str) -> tuple[Any, list[int], set[str] | None, float] | None:
    """The suite file, seeds, modes and per-run time budget a suite figure runs with (``None``: bad input,
    said on stderr)."""
    try:
        loaded = load_suite(args.suite_file)
        seeds = parse_seeds(args.seeds)
    except (SuiteError, ValueError) as exc:
        print(f"storm_bench {figure}: {exc}", file=sys.stderr)
        return None
    modes = set(args.modes.split(",")) if args.modes else None
    return loaded, seeds, modes, loaded.key_timeout or 120.0


def suite(args: argparse.Namespace) -> int:
    setup = _suite_setup(args, "suite")
    if setup is None:
        return 254
    loaded, seeds, modes, budget = setup
    print(f"{'entry':30} {'mode':10} {'nemesis':42} {'own checker':>11} {'invalid':>7} {'valid':>5} "
          f"{'unknown':>7}  seeds not as expected")
    for case in _entries(loaded.cases).values():
        mode = str(case.db_options.get("mode", ""))
        bugs = [str(b) for b in case.db_options.get("bug", ()) or ()]
        if modes is not None and mode not in modes:
            continue
        if args.only and not any(word in case.group or word in bugs for word in args.only):
            continue
        if any(word in case.group or word in bugs for word in args.skip):
            continue
        spec = replace(test_spec(case, args.store), platform="sim", check_timeout=budget)
        if args.storm_pacing is not None:
            spec = replace(spec, storm_pacing=args.storm_pacing)
        # --own-checker: a bug run judged by its bug's checker alone (a queue run's linearizability search
        # at 100 operations a second can take minutes); a control is always judged by every checker.
        judges = sorted({checker_for_bug(DB, bug) for bug in bugs}) if bugs and args.own_checker else None
        found = explore(spec, seeds, jobs=args.jobs, keep_going=True, checkers=judges)
        invalid = [o.seed for o in found.outcomes if o.valid is False]
        unknown = [o.seed for o in found.outcomes if o.valid not in (True, False)]
        valid = [o.seed for o in found.outcomes if o.valid is True]
        runs = len(found.outcomes)
        if bugs:
            # The nightly counts a bug run caught when it is invalid (any checker); the bug's own checker
            # (KnownBug.caught_by) is shown beside it.
            checkers = {checker_for_bug(DB, bug) for bug in bugs}
            own = f"{sum(1 for o in found.outcomes if checkers & set(o.failed))}/{runs}"
            listed = valid + unknown
        else:
            own, listed = "-", invalid + unknown
        print(f"{case.group.removeprefix('bugs-all.'):30} {mode:10} {','.join(case.nemesis):42} {own:>11} "
              f"{len(invalid):>4}/{runs:<2} {len(valid):>2}/{runs:<2} {len(unknown):>7}  "
              f"{','.join(map(str, listed))}", flush=True)
    return 0


def _matches(case: Case, words: list[str]) -> bool:
    """A word matches an entry's name, one of its bugs, or (``'fluvio bug-promote-outside-lrs'``) its label."""
    bugs = [str(b) for b in case.db_options.get("bug", ()) or ()]
    return any(word in case.group or word in bugs or word == case.label for word in words)


def opportunities(args: argparse.Namespace) -> int:
    setup = _suite_setup(args, "opportunities")
    if setup is None:
        return 254
    loaded, seeds, modes, budget = setup
    scratch = Path(tempfile.mkdtemp(prefix="storm-bench-opportunities-"))
    summary = []
    try:
        for case in _entries(loaded.cases).values():
            mode = str(case.db_options.get("mode", ""))
            if not case.db_options.get("bug") or (modes is not None and mode not in modes):
                continue
            if args.only and not _matches(case, args.only):
                continue
            spec = replace(test_spec(case, str(scratch)), platform="sim", check_timeout=budget)
            if args.time_limit is not None:
                spec = replace(spec, time_limit=args.time_limit)
            rows = []
            for seed in seeds:
                directory = Path(tempfile.mkdtemp(prefix=f"{mode}-{seed}-", dir=scratch))
                try:
                    result = simulate(replace(spec, seed=seed), directory / "run")
                    found = result.results.get("opportunities") or {}
                finally:
                    shutil.rmtree(directory, ignore_errors=True)
                invalid = sorted(n for n, c in result.results.get("checkers", {}).items() if c.get("valid") is False)
                for bug, entry in found.items():
                    row = {"entry": case.label, "seed": seed, "caught": result.valid is False, "bug": bug,
                           "opportunities": entry.get("count"), "acted": entry.get("acted"),
                           "ops": result.client_ops, "invalid": invalid}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            summary.append((case.label, rows))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def spread(values: list[Any]) -> str:
        values = [v for v in values if v is not None]
        if not values:
            return "-"
        return f"{statistics.median(values):g} ({min(values)}-{max(values)})"

    print(f"{'entry':40} {'caught':>7} {'opportunities caught':>22} {'missed':>22} {'acted caught':>14} "
          f"{'missed':>14} {'ops caught':>18} {'missed':>18}")
    for label, rows in summary:
        caught = [r for r in rows if r["caught"]]
        missed = [r for r in rows if not r["caught"]]

        def column(which: list[dict[str, Any]], name: str) -> str:
            return spread([r[name] for r in which])

        print(f"{label:40} {len(caught):>3}/{len(rows):<3} {column(caught, 'opportunities'):>22} "
              f"{column(missed, 'opportunities'):>22} {column(caught, 'acted'):>14} {column(missed, 'acted'):>14} "
              f"{column(caught, 'ops'):>18} {column(missed, 'ops'):>18}")
    return 0


def runs(args: argparse.Namespace) -> None:
    for path in args.run_dirs:
        if not (Path(path) / "test.json").is_file():
            print(f"{path}: not a stored run (no test.json), skipped")
            continue
        elections, valid = elections_of(Path(path))
        print(f"{path}: {elections.won} elections in {elections.seconds:g} s ({elections.per_minute:.1f} per minute), "
              f"{elections.unwon} terms without a leader, valid {valid}")


def _hogs(count: int, sessions: str) -> list[subprocess.Popen[bytes]]:
    """``count`` CPU-bound processes. Where the kernel shares the CPU between sessions first (autogroup)
    and between Docker's containers and everything else (its cgroup), how they are grouped decides how
    much they take from the run: ``one`` session for all (a CI job's other work started from one shell:
    the containers keep about half the machine) or ``each`` its own (``count`` groups against the
    containers' one: the harshest)."""
    hog = f"{shlex.quote(sys.executable)} -c 'while True: pass'"
    if count <= 0:
        return []
    if sessions == "one":
        return [subprocess.Popen(["sh", "-c", f"for i in $(seq {count}); do {hog} & done; wait"],
                                 start_new_session=True)]
    return [subprocess.Popen(["sh", "-c", f"exec {hog}"], start_new_session=True) for _ in range(count)]


def _stop(hogs: list[subprocess.Popen[bytes]]) -> None:
    for hog in hogs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(hog.pid, signal.SIGKILL)
    for hog in hogs:
        hog.wait()


def _run_command(args: argparse.Namespace, *, nemesis: str, mode: str, pacing: str, seed: int,
                 store: Path) -> list[str]:
    """``harness run`` of one storm on containers (5 nodes, clients bound to nodes, judged in process)."""
    return [sys.executable, "-m", "harness", "run", "--db", DB, "--db-opt", f"mode={mode}",
            "--nemesis", nemesis, "--seed", str(seed), "--time-limit", str(args.time_limit),
            "--client-binding", "node", "--storm-pacing", pacing, "--analysis", "direct", "--store", str(store),
            *(flag for setting in args.core for flag in ("--core", setting))]


def _beside(args: argparse.Namespace, *, nemesis: str, mode: str, pacing: str, seed: int,
            scratch: Path) -> list[subprocess.Popen[bytes]]:
    """``args.beside`` other runs of the same storms started with the measured one, as a CI runner's
    ``harness suite --jobs N`` runs N at once: their containers share Docker's cgroup with the measured
    run's, which hogs outside it cannot do (seeds offset by 1000 each, stores in ``scratch``)."""
    return [subprocess.Popen(_run_command(args, nemesis=nemesis, mode=mode, pacing=pacing, seed=seed + 1000 * k,
                                          store=scratch / f"beside-{k}"),
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            for k in range(1, args.beside + 1)]


def _finish(runs: list[subprocess.Popen[bytes]]) -> None:
    """Wait for the runs beside; on an interruption, stop them as a user would (SIGTERM: their teardown
    removes their containers), then wait."""
    try:
        for run in runs:
            run.wait()
    finally:
        for run in runs:
            if run.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.pid, signal.SIGTERM)
        for run in runs:
            run.wait()


def _container_run(args: argparse.Namespace, *, nemesis: str, mode: str, pacing: str, seed: int,
                   load: str) -> dict[str, Any]:
    """One ``harness run`` on containers; its elections per minute, ``ok`` operations and verdict."""
    store = Path(args.store) / f"{mode}-{nemesis.replace(',', '+')}-{pacing}-{seed}-{load}"
    command = _run_command(args, nemesis=nemesis, mode=mode, pacing=pacing, seed=seed, store=store)
    hogs = _hogs(args.hogs, args.hog_sessions) if load == "loaded" else []
    before = os.getloadavg()
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="storm-beside-", dir=args.store) as scratch:
            beside = _beside(args, nemesis=nemesis, mode=mode, pacing=pacing, seed=seed, scratch=Path(scratch)) \
                if load == "loaded" else []
            try:
                done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
            finally:
                _finish(beside)
    finally:
        _stop(hogs)
    row: dict[str, Any] = {"nemesis": nemesis, "mode": mode, "pacing": pacing, "seed": seed, "load": load,
                           "exit": done.returncode, "wall_s": round(time.monotonic() - started, 1),
                           "loadavg": [round(x, 1) for x in (*before[:1], *os.getloadavg())]}
    run_dir = store / "latest"
    results_path = run_dir / "results.json"
    if not results_path.is_file():
        row["error"] = (done.stderr.strip().splitlines() or ["no run stored"])[-1]
        return row
    results = json.loads(results_path.read_text())
    elections, valid = elections_of(run_dir.resolve())
    row.update(per_minute=round(elections.per_minute, 2), valid=valid,
               ok=((results.get("stats") or {}).get("completed") or {}).get("ok", 0),
               **serving(run_dir.resolve(), args.time_limit),
               pacing_stats=(results.get("stats") or {}).get("pacing"))
    return row


def serving(run_dir: Path, time_limit: float) -> dict[str, float]:
    """How long a run served and how fast: the seconds of its chaos phase in whose half seconds some client
    operation completed ``ok`` (``serving_s``), the ``ok`` completions per such second, and their median
    latency in milliseconds. A storm that kept its shape under load but served each second slower shows
    here, where the ``ok`` total cannot tell the two apart."""
    ops = load_history(run_dir / "history.jsonl").ops
    start = min((op.call for op in ops), default=0)
    served = [op for op in ops if op.ok and op.ret is not None and (op.ret - start) / 1e9 < time_limit]
    buckets = {int((op.ret - start) / 5e8) for op in served}
    latencies = [(op.ret - op.call) / 1e6 for op in served]
    seconds = len(buckets) / 2
    return {"serving_s": seconds, "ok_per_serving_s": round(len(latencies) / seconds, 1) if seconds else 0.0,
            "latency_p50_ms": round(statistics.median(latencies), 1) if latencies else 0.0}


def load(args: argparse.Namespace) -> int:
    """Quiet and loaded container runs of each storm, side by side (the module docstring)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # through the finally that stops the hogs
    Path(args.store).mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for nemesis in args.nemesis:
        for mode in args.modes.split(","):
            for pacing in args.pacing:
                for number, seed in enumerate(parse_seeds(args.seeds)):
                    order = ("quiet", "loaded") if number % 2 == 0 else ("loaded", "quiet")
                    for which in order:
                        row = _container_run(args, nemesis=nemesis, mode=mode, pacing=pacing, seed=seed, load=which)
                        rows.append(row)
                        print(json.dumps(row), flush=True)
    print()
    print("| storms, mode | pacing | elections/min quiet | loaded | ratio | ok operations quiet | loaded | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    within = True
    for nemesis in args.nemesis:
        for mode in args.modes.split(","):
            for pacing in args.pacing:
                mine = [r for r in rows if (r["nemesis"], r["mode"], r["pacing"]) == (nemesis, mode, pacing)
                        and "per_minute" in r]
                cells = []
                for figure in ("per_minute", "ok"):
                    quiet = [float(r[figure]) for r in mine if r["load"] == "quiet"]
                    loaded = [float(r[figure]) for r in mine if r["load"] == "loaded"]
                    if not quiet or not loaded:
                        cells.append("- | - | -")
                        within = False
                        continue
                    q, lo = statistics.mean(quiet), statistics.mean(loaded)
                    ratio = lo / q if q else float("inf")
                    within &= 2 / 3 <= ratio <= 1.5
                    cells.append(f"{q:.1f} ({', '.join(f'{x:g}' for x in quiet)}) | "
                                 f"{lo:.1f} ({', '.join(f'{x:g}' for x in loaded)}) | {ratio:.2f}")
                print(f"| `{nemesis}`, {mode} | {pacing} | {cells[0]} | {cells[1]} |")
    print(f"\nevery ratio within a third (0.67-1.5): {within}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    figures = parser.add_subparsers(dest="figure", required=True)
    simulated = figures.add_parser("sim", help="elections per minute of simulated bug-free runs")
    simulated.add_argument("--nemesis", nargs="+", required=True, help="one package set per argument")
    simulated.add_argument("--modes", default="blazingmq")
    simulated.add_argument("--seeds", default="1..5")
    simulated.add_argument("--time-limit", type=float, default=60.0)
    simulated.add_argument("--rate", type=float, default=2.0)
    simulated.add_argument("--interval", type=float, default=10.0, help="--nemesis-interval (default 10)")
    simulated.add_argument("--jobs", type=int, default=2)
    simulated.add_argument("--core", action="append", default=[], metavar="NAME=JSON",
                           help="a node setting for every node, e.g. scouting=false (repeatable)")
    simulated.add_argument("--storm-pacing", choices=STORM_PACINGS, default=DEFAULT_STORM_PACING,
                           help=f"how the storms are paced (default {DEFAULT_STORM_PACING}, harness run's)")
    simulated.add_argument("--verbose", action="store_true", help="print every run")
    stored = figures.add_parser("runs", help="elections per minute of stored runs")
    stored.add_argument("run_dirs", nargs="+")
    detection = figures.add_parser("detect", help="how many simulated seeds catch a known bug")
    detection.add_argument("--bug", required=True, help="a known bug, or none for the bug-free control")
    detection.add_argument("--nemesis", nargs="+", required=True, help="one package set per argument")
    detection.add_argument("--modes", default=None, help="default: every mode the bug applies to")
    detection.add_argument("--workload", default=None, help="default: the bug's (queue for no-dedup)")
    detection.add_argument("--seeds", default="1..20")
    detection.add_argument("--time-limit", type=float, default=60.0)
    detection.add_argument("--rate", type=float, default=10.0, help="ops/s per process (default 10, harness run's)")
    detection.add_argument("--op-timeout", type=float, default=5.0)
    detection.add_argument("--interval", type=float, default=10.0, help="--nemesis-interval (default 10)")
    detection.add_argument("--client-binding", choices=("leader", "node"), default="leader")
    detection.add_argument("--jobs", type=int, default=2)
    detection.add_argument("--store", default="store/storm-bench")
    detection.add_argument("--core", action="append", default=[], metavar="NAME=JSON")
    whole = figures.add_parser("suite", help="a suite file's entries on the simulator, with other seeds")
    whole.add_argument("suite_file", help="e.g. suites/bugs-all-modes.toml")
    whole.add_argument("--seeds", default="1000..1019")
    whole.add_argument("--only", nargs="+", default=[], metavar="WORD",
                       help="only entries whose name or bug contains one of these (e.g. vote-twice control)")
    whole.add_argument("--modes", default=None, help="only these modes (comma-separated)")
    whole.add_argument("--jobs", type=int, default=2)
    whole.add_argument("--store", default="store/storm-bench", help="where invalid runs are kept")
    whole.add_argument("--own-checker", action="store_true",
                       help="judge a bug run by its bug's own checker only (cheaper; the invalid column then "
                            "counts only that checker)")
    whole.add_argument("--skip", nargs="+", default=[], metavar="WORD",
                       help="leave out entries whose name or bug contains one of these")
    whole.add_argument("--storm-pacing", choices=STORM_PACINGS, default=None,
                       help="every entry's storms paced so (default: as the entry says)")
    chances = figures.add_parser("opportunities", help="a suite's bug entries: opportunities of caught and missed runs")
    chances.add_argument("suite_file", help="e.g. suites/bugs-all-modes.toml")
    chances.add_argument("--seeds", default="1000..1019")
    chances.add_argument("--only", nargs="+", default=[], metavar="WORD",
                         help="only entries whose name, bug or label ('fluvio bug-promote-outside-lrs') matches")
    chances.add_argument("--modes", default=None, help="only these modes (comma-separated)")
    chances.add_argument("--time-limit", type=float, default=None,
                         help="seconds of chaos instead of the suite's (shorter runs: fewer chances)")
    loaded = figures.add_parser("load", help="storms on containers, quiet and beside CPU hogs, side by side")
    loaded.add_argument("--nemesis", nargs="+", required=True, help="one package set per argument")
    loaded.add_argument("--modes", default="fluvio")
    loaded.add_argument("--seeds", default="11,12")
    loaded.add_argument("--pacing", nargs="+", default=["clock", "system"], choices=("clock", "system"))
    loaded.add_argument("--hogs", type=int, default=6, help="CPU-bound processes beside a loaded run (default 6)")
    loaded.add_argument("--hog-sessions", choices=("one", "each"), default="one",
                        help="the hogs in one session (default) or each in its own (_hogs)")
    loaded.add_argument("--beside", type=int, default=0,
                        help="other runs of the same storms beside a loaded run, as `harness suite --jobs N+1` "
                             "runs them (default 0; _beside)")
    loaded.add_argument("--core", action="append", default=[], metavar="NAME=JSON",
                        help="a node setting for every node, e.g. scouting=false (repeatable)")
    loaded.add_argument("--time-limit", type=float, default=60.0)
    loaded.add_argument("--store", default="store/storm-load")
    args = parser.parse_args()
    if args.figure == "suite":
        return suite(args)
    if args.figure == "opportunities":
        return opportunities(args)
    if args.figure == "load":
        return load(args)
    {"sim": sim, "runs": runs, "detect": detect}[args.figure](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
