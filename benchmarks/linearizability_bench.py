"""Benchmark: the linearizability checker over the Porcupine conformance corpus, against Porcupine's times.

Prints, for the etcd (cas-register) and key-value corpora, the total check time and its ratio to
Porcupine (Go) measured on the project's 2-core machine (issue 3), then the slowest files. Each file's
time is the best of ``--repeat`` runs of ``check_linearizability`` on already loaded operations (loading
and validating the JSON is not timed, as in Porcupine's own figures). Wall-clock time is what compares
with Porcupine; the CPU time of this process is printed beside it because other work on a 2-core
machine inflates wall-clock figures. A verdict that differs from the one ``MANIFEST.json`` expects is
printed and makes the exit status 1.

    .venv/bin/python benchmarks/linearizability_bench.py [--repeat 5] [--top 10] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from checkers.history import load_history  # noqa: E402
from checkers.linearizability import check_linearizability  # noqa: E402
from checkers.verdict import Valid  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "corpora" / "porcupine"
# Porcupine (Go) on this machine, from issue 3: seconds for the whole corpus, and its slowest files.
PORCUPINE_TOTAL_S = {"etcd": 0.41, "kv": 0.17}
PORCUPINE_FILE_S = {"etcd_002": 0.154, "etcd_007": 0.103, "kv_c50-ok": 0.143}


@dataclass(frozen=True)
class Row:
    name: str
    corpus: str  # "etcd" or "kv"
    model: str
    ops: int
    states: int
    valid: Valid
    expected: bool | None
    wall_s: float
    cpu_s: float


def measure(corpus_dir: Path, repeat: int) -> list[Row]:
    manifest = json.loads((corpus_dir / "MANIFEST.json").read_text(encoding="utf-8"))
    rows = []
    for entry in manifest["files"]:
        history = load_history(corpus_dir / entry["file"])
        wall = cpu = float("inf")
        for _ in range(max(1, repeat)):
            started, started_cpu = time.perf_counter(), time.process_time()
            verdict = check_linearizability(history.ops, entry["model"])
            wall = min(wall, time.perf_counter() - started)
            cpu = min(cpu, time.process_time() - started_cpu)
        rows.append(
            Row(
                name=entry["name"],
                corpus="kv" if entry["model"] == "kv" else "etcd",
                model=entry["model"],
                ops=len(history.ops),
                states=verdict.stats.get("states", 0),
                valid=verdict.valid,
                expected=entry["expected_linearizable"],
                wall_s=wall,
                cpu_s=cpu,
            )
        )
    return rows


def report(rows: list[Row], top: int) -> None:
    print(
        f"{'corpus':<8}{'files':>6}{'ops':>7}{'states':>9}{'wall (s)':>10}{'cpu (s)':>9}"
        f"{'Porcupine (s)':>15}{'ratio wall':>12}{'ratio cpu':>11}"
    )
    groups = [(corpus, [r for r in rows if r.corpus == corpus]) for corpus in ("etcd", "kv")]
    groups.append(("all", rows))
    for corpus, mine in groups:
        reference = sum(PORCUPINE_TOTAL_S.values()) if corpus == "all" else PORCUPINE_TOTAL_S[corpus]
        wall, cpu = sum(r.wall_s for r in mine), sum(r.cpu_s for r in mine)
        print(
            f"{corpus:<8}{len(mine):>6}{sum(r.ops for r in mine):>7}{sum(r.states for r in mine):>9}"
            f"{wall:>10.3f}{cpu:>9.3f}{reference:>15.3f}{wall / reference:>12.2f}{cpu / reference:>11.2f}"
        )
    print()
    print(f"slowest {top} files:")
    print(
        f"{'file':<14}{'model':<14}{'ops':>6}{'states':>9}{'verdict':>9}{'wall (ms)':>11}{'cpu (ms)':>10}"
        f"{'Porcupine (ms)':>16}"
    )
    for r in sorted(rows, key=lambda r: r.wall_s, reverse=True)[:top]:
        reference = f"{PORCUPINE_FILE_S[r.name] * 1000:.0f}" if r.name in PORCUPINE_FILE_S else ""
        print(
            f"{r.name:<14}{r.model:<14}{r.ops:>6}{r.states:>9}{r.valid!s:>9}{r.wall_s * 1000:>11.1f}"
            f"{r.cpu_s * 1000:>10.1f}{reference:>16}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per file; the best counts (default 5)")
    parser.add_argument("--top", type=int, default=10, help="slowest files to list (default 10)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="directory with MANIFEST.json")
    args = parser.parse_args(argv)
    if not (args.corpus / "MANIFEST.json").is_file():
        print(f"no corpus at {args.corpus}: expected MANIFEST.json there (../shared beside the repository)")
        return 254
    rows = measure(args.corpus, args.repeat)
    report(rows, args.top)
    wrong = [r for r in rows if r.expected is not None and r.valid != r.expected]
    for r in wrong:
        print(f"WRONG VERDICT {r.name}: got {r.valid}, MANIFEST.json expects {r.expected}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
