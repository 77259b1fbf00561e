"""Benchmark: one entry of a suite file on containers, N fresh runs, as the nightly would run them.

The nightly (``suites/bugs-all-modes.toml``) takes about 13 hours one run at a time (4 h 40 min at
``--jobs 3``); this runs the cases of one (entry, mode) only, each with the entry's exact settings and a
fresh random seed (drawn when the suite file is read, as ``harness suite`` draws them), through
``harness run`` (its own teardown), at most ``--jobs`` at once, and prints one line per run (verdict,
seed, run directory) and a summary: how many runs were invalid (a bug entry's catches), valid (a
control's) or unknown.

    .venv/bin/python benchmarks/suite_containers.py suites/bugs-all-modes.toml --entry vote-twice \\
        --mode aeron --runs 10 [--jobs 2] [--store store/nightly-sample]
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.suite import Case, SuiteError, case_command, load_suite  # noqa: E402

VERDICTS = {0: "valid", 1: "invalid", 2: "unknown"}
"""``harness run``'s exit codes; anything else is a harness failure."""


def _run(case: Case, store: str, log_dir: Path) -> tuple[Case, str, float, str]:
    """Run one case with ``harness run`` (the worktree's), its output in a log file; its verdict."""
    words = shlex.split(case_command(case, store))
    words[0] = str(ROOT / ".venv" / "bin" / "harness")
    log = log_dir / f"{case.group}-{case.db_options.get('mode')}-{case.seed}.log"
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        code = subprocess.run(words, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, check=False).returncode
    return case, VERDICTS.get(code, f"failed ({code})"), time.monotonic() - started, str(log)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite_file")
    parser.add_argument("--entry", required=True, help="the entry's name without 'bugs-all.' (e.g. vote-twice, control)")
    parser.add_argument("--mode", required=True, help="the election mode")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2, help="container runs at once (default 2)")
    parser.add_argument("--store", default="store/nightly-sample")
    args = parser.parse_args()
    try:
        suite = load_suite(args.suite_file)
    except SuiteError as exc:
        print(f"suite_containers: {exc}", file=sys.stderr)
        return 254
    cases = [c for c in suite.cases if c.group.split(".", 1)[-1] == args.entry and c.db_options.get("mode") == args.mode]
    if not cases or args.runs < 1:
        print(f"suite_containers: no cases of entry {args.entry!r} in mode {args.mode!r} in {args.suite_file} "
              "(or --runs below 1); see the file's [[matrix]] names", file=sys.stderr)
        return 254
    # More runs than the entry has: the same settings again, with the next fresh seeds of other repetitions.
    chosen = (cases * (args.runs // len(cases) + 1))[: args.runs]
    log_dir = Path(args.store) / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    print(f"{args.entry} {args.mode}: {len(chosen)} runs, {args.jobs} at once; e.g. {case_command(chosen[0], args.store)}",
          flush=True)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for case, verdict, seconds, log in pool.map(lambda c: _run(c, args.store, log_dir), chosen):
            counts[verdict] = counts.get(verdict, 0) + 1
            print(f"  seed {case.seed:>10}  {verdict:8} {seconds:6.0f} s  {log}", flush=True)
    summary = ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items()))
    print(f"{args.entry} {args.mode}: {summary} of {len(chosen)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
