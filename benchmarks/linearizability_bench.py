"""Benchmark: the linearizability checker over the Porcupine conformance corpus, and over big and hard
histories generated from a seed, against a bare JSON load of the same lines.

Corpus mode (the default) prints, for the etcd (cas-register) and key-value corpora, the total check time
and the slowest files. Each file's time is the best of ``--repeat`` runs of ``check_linearizability``
on already loaded operations (as in Porcupine's own figures), and of loading and checking it. A verdict
that differs from ``MANIFEST.json`` is printed and makes the exit status 1.

Ratios are only ever to something measured in the same run: with ``--porcupine CMD`` (below) each file
is also checked by Porcupine, best of ``--repeat`` too, and the ratio printed is ours (loading and
checking, in this process) to Porcupine's command (its CPU seconds, start-up, reading and checking);
without it, the ratio is ours to a bare ``json.loads`` of the file's lines.

``--porcupine CMD``: a command that checks one history file and prints ok/illegal (any other output is
"unknown"), for example a small Go program around Porcupine (``porcupine.CheckOperations`` with its kv
model partitioned by key) built outside this repository: nothing of Porcupine is part of the project.
``{file}`` and ``{model}`` in ``CMD`` are replaced by the file and the model (``cas-register`` or
``kv``); without ``{file}`` the file is appended. Its verdicts are compared with ``MANIFEST.json`` too.

Case mode (``--case NAME``, repeatable; ``--case all``) generates each history into ``--dir`` (kept, so
a second run reuses it) and, in this one process, times a bare ``json.loads`` of every line, then
``python -m checkers check`` on the file (loading, validating, pairing and checking, ``--workers``
processes), and prints wall and CPU seconds, their ratio, the verdict, and the peak memory: this
process's and its forked workers' peak RSS, and the peak of their summed PSS (shared pages counted
once), sampled every 0.1 s. With ``--porcupine CMD`` instead, each case is run side by side:
``python -m checkers check`` and ``CMD`` as child processes, alternately, ``--repeat`` rounds (at most
5), each measured by ``wait4`` (CPU seconds of the process and every process it waited for, peak RSS
of the largest) and by sampling its process tree every 0.1 s (peak summed RSS, peak summed PSS); the
load average is printed with every run, and the medians and ours/Porcupine at the end. The cases
(issue 13):

* ``1m``: 1,000,000 operations, 1,000 keys, 20 processes (reads, writes, compare-and-set);
* ``200mb``: a 200 MB history shaped like the harness's (``node``, ``lsn``, cas mismatches), 10,000 keys;
* ``p20``: 2,000 operations on one register, 20 processes, linearizable;
* ``p20-hard``: the same with 5% ``info`` and one stale read (not linearizable): decided within 10 s?
* ``timeout5``: the ``1m`` history with ``--timeout 5``: how long until it answers.

EDN mode (``--edn``, issue 29) generates a 100,000-operation history (``--edn-ops``; 100 keys, 20
processes, 1% ``info``), writes it also as Jepsen EDN in both layouts (``history.edn``: one map per
line, ``[k v]`` independent-key values; ``knossos.edn``: one vector), and runs ``python -m checkers
check`` on the three, alternately, ``--repeat`` rounds (``--workers 1``: the reading is what differs).
Printed: each run's wall and CPU seconds (this process's children, from ``wait4``) and peak RSS, then
the medians and the EDN/JSONL ratios, with the load average before and after.

Every generated history of the valid cases is linearizable by construction (each operation takes
effect at its completion, on a reference register), so any other verdict is a bug and exit status 1.

    .venv/bin/python benchmarks/linearizability_bench.py [--repeat 5] [--top 10] [--corpus DIR]
    .venv/bin/python benchmarks/linearizability_bench.py --case all [--dir /tmp/lin-bench] [--seed 1]
    .venv/bin/python benchmarks/linearizability_bench.py --case 1m --repeat 3 --porcupine 'porcupine-check -model {model} {file}'
    .venv/bin/python benchmarks/linearizability_bench.py --edn [--edn-ops 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shlex
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from checkers.cli import main as checkers_main  # noqa: E402
from checkers.history import load_history  # noqa: E402
from checkers.linearizability import check_linearizability  # noqa: E402
from checkers.verdict import UNKNOWN, Valid  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "corpora" / "porcupine"


# -- the Porcupine corpus --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    name: str
    corpus: str  # "etcd" or "kv"
    model: str
    ops: int
    states: int
    valid: Valid
    expected: Valid | None
    wall_s: float  # the check of loaded operations
    cpu_s: float
    load_cpu_s: float  # loading the file and checking it
    reference_s: float  # Porcupine's command (CPU seconds), or a bare json.loads of the lines
    reference_valid: Valid | None = None  # Porcupine's verdict


def _corpus_model(model: str) -> str:
    return "kv" if model == "kv" else "cas-register"


def measure(corpus_dir: Path, repeat: int, porcupine: str | None = None) -> list[Row]:
    manifest = json.loads((corpus_dir / "MANIFEST.json").read_text(encoding="utf-8"))
    rows = []
    for entry in manifest["files"]:
        path = corpus_dir / entry["file"]
        history = load_history(path)
        wall = cpu = load_cpu = reference = float("inf")
        reference_valid: Valid | None = None
        for _ in range(max(1, repeat)):
            started, started_cpu = time.perf_counter(), time.process_time()
            verdict = check_linearizability(history.ops, entry["model"])
            wall = min(wall, time.perf_counter() - started)
            cpu = min(cpu, time.process_time() - started_cpu)
            started_cpu = time.process_time()
            check_linearizability(load_history(path, keep_events=False).ops, entry["model"])
            load_cpu = min(load_cpu, time.process_time() - started_cpu)
            if porcupine is None:
                started_cpu = time.process_time()
                _bare_json_load(path)
                reference = min(reference, time.process_time() - started_cpu)
            else:
                run = run_child(porcupine_argv(porcupine, path, _corpus_model(entry["model"])), sample=False)
                reference = min(reference, run.cpu_s)
                reference_valid = porcupine_verdict(run.output)
        rows.append(
            Row(
                name=entry["name"],
                corpus="kv" if entry["model"] == "kv" else "etcd",
                model=entry["model"],
                ops=len(history.ops),
                states=verdict.stats.get("states", 0),
                valid=verdict.valid,
                # no expectation for the empty etcd_095: it has nothing to judge (unknown)
                expected=entry["expected_linearizable"] if entry["op_count"] else "unknown",
                wall_s=wall,
                cpu_s=cpu,
                load_cpu_s=load_cpu,
                reference_s=reference,
                reference_valid=reference_valid,
            )
        )
    return rows


def report(rows: list[Row], top: int, reference: str) -> None:
    """``reference``: what ``Row.reference_s`` measured (Porcupine's command, or json.loads)."""
    print(f"ours: check of loaded operations (wall, cpu) and load + check (cpu), in this process; "
          f"reference: {reference}; best of the runs of each file")
    print(
        f"{'corpus':<8}{'files':>6}{'ops':>7}{'states':>9}{'wall (s)':>10}{'cpu (s)':>9}{'load+check':>12}"
        f"{'reference':>11}{'ours/ref':>10}"
    )
    groups = [(corpus, [r for r in rows if r.corpus == corpus]) for corpus in ("etcd", "kv")]
    groups.append(("all", rows))
    for corpus, mine in groups:
        wall, cpu = sum(r.wall_s for r in mine), sum(r.cpu_s for r in mine)
        load_cpu, ref = sum(r.load_cpu_s for r in mine), sum(r.reference_s for r in mine)
        print(
            f"{corpus:<8}{len(mine):>6}{sum(r.ops for r in mine):>7}{sum(r.states for r in mine):>9}"
            f"{wall:>10.3f}{cpu:>9.3f}{load_cpu:>12.3f}{ref:>11.3f}{load_cpu / ref:>10.2f}"
        )
    print()
    print(f"slowest {top} files:")
    print(
        f"{'file':<14}{'model':<14}{'ops':>6}{'states':>9}{'verdict':>9}{'wall (ms)':>11}{'cpu (ms)':>10}"
        f"{'load+check':>12}{'reference':>11}"
    )
    for r in sorted(rows, key=lambda r: r.wall_s, reverse=True)[:top]:
        print(
            f"{r.name:<14}{r.model:<14}{r.ops:>6}{r.states:>9}{r.valid!s:>9}{r.wall_s * 1000:>11.1f}"
            f"{r.cpu_s * 1000:>10.1f}{r.load_cpu_s * 1000:>12.1f}{r.reference_s * 1000:>11.1f}"
        )


# -- another checker's command, measured side by side -------------------------------------------------

PORCUPINE_WORDS: dict[str, Valid] = {"ok": True, "illegal": False}


def porcupine_verdict(output: str) -> Valid:
    """What ``--porcupine``'s command printed, as a verdict (its last word: ok, illegal, else unknown)."""
    words = output.split()
    return PORCUPINE_WORDS.get(words[-1] if words else "", UNKNOWN)


def porcupine_argv(command: str, path: Path, model: str) -> list[str]:
    """``--porcupine``'s command for one file (module docstring: ``{file}``, ``{model}``)."""
    argv = [part.replace("{model}", model).replace("{file}", str(path)) for part in shlex.split(command)]
    return argv if "{file}" in command else [*argv, str(path)]


@dataclass(frozen=True)
class ChildRun:
    """One child process, measured: ``wait4``'s CPU seconds (it and every process it waited for) and
    peak RSS (the largest one), and sampled over its process tree: the peaks of the summed RSS and PSS."""

    wall_s: float
    cpu_s: float
    max_rss_mib: float
    tree_rss_mib: float
    tree_pss_mib: float
    output: str
    load: str


def run_child(argv: list[str], *, cwd: Path | None = None, sample: bool = True) -> ChildRun:
    """Run ``argv`` and measure it (:class:`ChildRun`); ``sample``: sample its tree's memory."""
    import subprocess

    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    started = time.perf_counter()
    child = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    sampler = TreeSampler(child.pid) if sample else None
    if sampler is not None:
        sampler.start()
    assert child.stdout is not None
    output = child.stdout.read()
    _, _, usage = os.wait4(child.pid, 0)
    child.returncode = 0
    wall = time.perf_counter() - started
    if sampler is not None:
        sampler.stop()
    return ChildRun(
        wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
        sampler.peak_rss / 2**20 if sampler else 0.0, sampler.peak_pss / 2**20 if sampler else 0.0, output, load,
    )


class TreeSampler:
    """Peak summed RSS and PSS of a process and its descendants, sampled every ``interval`` seconds."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        import psutil

        self.root = psutil.Process(pid)
        self.interval = interval
        self.peak_rss = self.peak_pss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                pids = [self.root.pid, *(p.pid for p in self.root.children(recursive=True))]
            except psutil.Error:
                pids = [self.root.pid]
            rss = pss = 0
            for pid in pids:
                pss += MemorySampler._pss(pid)
                try:
                    with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
                        rss += int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
                except (OSError, ValueError, IndexError):
                    pass
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            self._stop.wait(self.interval)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


# -- generated histories -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """What to generate: ``ops`` client operations (or until ``target_bytes``) on ``keys`` registers by
    ``processes`` clients; ``info``: the share of operations that end ``info`` (each of those took effect
    or not, at random); ``stale``: ops after which one read returns an overwritten value; ``harness``:
    lines carry ``node`` and ``lsn`` as the harness's do."""

    ops: int
    keys: int
    processes: int
    info: float = 0.0
    stale: int | None = None
    harness: bool = False
    target_bytes: int | None = None


def generate(path: Path, shape: Shape, seed: int) -> dict[str, Any]:
    """Write a register history of ``shape`` to ``path`` (module docstring); return what was written."""
    rng = random.Random(seed)
    state: dict[str, Any] = {}
    written: dict[str, list[tuple[Any, int, int]]] = {}  # key -> (value, invoke, completion) of ok writes
    slots = list(range(shape.processes))
    busy: dict[int, tuple[str, str, Any, int]] = {}  # process -> f, key, value, invoke index
    next_process = shape.processes
    value = index = done = issued = size = lsn = 0
    clock = 0
    stale_done = False
    with path.open("w", encoding="utf-8") as out:

        def emit(record: dict[str, Any]) -> None:
            nonlocal index, size
            text = json.dumps(record, separators=(",", ":")) + "\n"
            out.write(text)
            size += len(text)
            index += 1

        def full() -> bool:
            return done >= shape.ops if shape.target_bytes is None else size >= shape.target_bytes

        while not (full() and not busy):
            slot = rng.randrange(shape.processes)
            process = slots[slot]
            clock += rng.randint(1_000, 60_000)
            if process not in busy:
                if full() or issued >= shape.ops:
                    continue
                key = f"k{rng.randrange(shape.keys)}"
                roll = rng.random()
                value += 1
                f, v = ("read", None) if roll < 0.4 else ("write", value) if roll < 0.8 else ("cas", [state.get(key), value])
                busy[process] = (f, key, v, index)
                issued += 1
                emit({"index": index, "time": clock, "process": process, "type": "invoke", "f": f, "key": key, "value": v})
                continue
            f, key, v, invoked = busy.pop(process)
            done += 1
            record: dict[str, Any] = {"index": index, "time": clock, "process": process, "type": "ok", "f": f, "key": key, "value": v}
            if shape.info and rng.random() < shape.info:
                record.update(type="info", error="timeout")
                if f != "read" and rng.random() < 0.5 and (f == "write" or state.get(key) == v[0]):
                    state[key] = v if f == "write" else v[1]
                slots[slot] = next_process
                next_process += 1
            elif f == "read":
                record["value"] = state.get(key)
                history = written.get(key, [])
                if shape.stale is not None and not stale_done and done >= shape.stale and len(history) >= 2:
                    # The last write began after the one before it ended, and ended before this read began:
                    # the value before it is surely overwritten.
                    if history[-2][2] < history[-1][1] and history[-1][2] < invoked:
                        record["value"] = history[-2][0]
                        stale_done = True
            elif f == "write" or state.get(key) == v[0]:
                state[key] = v if f == "write" else v[1]
                written.setdefault(key, []).append((state[key], invoked, index))
                lsn += 1
                if shape.harness:
                    record["lsn"] = [1, lsn]
            else:
                record.update(type="fail", error="cas-mismatch")
            if shape.harness:
                record["node"] = f"n{process % 5 + 1}"
            emit(record)
    return {"ops": done, "lines": index, "bytes": size, "stale": stale_done}


CASES: dict[str, tuple[Shape, str | None]] = {
    # name: (shape, extra argument for the check)
    "1m": (Shape(ops=1_000_000, keys=1000, processes=20), None),
    "200mb": (Shape(ops=10**9, keys=10_000, processes=20, harness=True, target_bytes=200 * 10**6), None),
    "p20": (Shape(ops=2000, keys=1, processes=20), None),
    "p20-hard": (Shape(ops=2000, keys=1, processes=20, info=0.05, stale=1000), None),
    "timeout5": (Shape(ops=1_000_000, keys=1000, processes=20), "--timeout=5"),
}
EXPECTED = {"1m": True, "200mb": True, "p20": True, "p20-hard": False}


class MemorySampler:
    """Peak summed PSS (``/proc/PID/smaps_rollup``: shared pages counted once) of this process and its
    children, sampled every ``interval`` seconds by a thread."""

    def __init__(self, interval: float = 0.25) -> None:
        import psutil

        self.process = psutil.Process()
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _pss(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
                for line in rollup:
                    if line.startswith("Pss:"):
                        return int(line.split()[1]) * 1024
        except OSError:  # a worker that just ended
            pass
        return 0

    def _run(self) -> None:
        while not self._stop.is_set():
            pids = [self.process.pid, *(child.pid for child in self.process.children(recursive=True))]
            self.peak = max(self.peak, sum(self._pss(pid) for pid in pids))
            self._stop.wait(self.interval)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _timed(function: Callable[[], Any]) -> tuple[float, float, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = function()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def _bare_json_load(path: Path) -> None:
    with path.open("rb") as handle:
        for line in handle:
            json.loads(line)


def run_case(
    name: str, directory: Path, seed: int, workers: int | None, porcupine: str | None = None, rounds: int = 3
) -> bool:
    shape, extra = CASES[name]
    base = "1m" if name == "timeout5" else name
    path = directory / f"{base}-seed{seed}.jsonl"
    if not path.exists():
        wall, _, info = _timed(lambda: generate(path, shape, seed))
        print(f"[{name}] generated {path}: {info['ops']:,} operations, {info['lines']:,} lines, "
              f"{info['bytes'] / 1e6:.0f} MB in {wall:.1f} s")
    if porcupine is not None:
        return side_by_side(name, path, extra, workers, porcupine, rounds)
    json_wall, json_cpu, _ = _timed(lambda: _bare_json_load(path))
    argv = ["check", str(path), "--model", "cas-register", "--json"]
    if workers is not None:
        argv.append(f"--workers={workers}")
    if extra:
        argv.append(extra)
    out = io.StringIO()
    with MemorySampler() as sampler:
        wall, cpu, code = _timed(lambda: checkers_main(argv, out=out, err=sys.stderr))
    import resource

    verdicts = [json.loads(line) for line in out.getvalue().splitlines()]
    lin = next((v for v in verdicts if v["checker"] == "linearizable"), None)
    valid = lin["valid"] if lin else None
    self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"[{name}] {path.stat().st_size / 1e6:.0f} MB: bare json.loads {json_wall:.2f} s wall ({json_cpu:.2f} s cpu); "
        f"check {wall:.2f} s wall ({cpu:.2f} s cpu in this process) = {wall / json_wall:.2f}x the load; "
        f"verdict {valid} (exit {code}); peak PSS {sampler.peak / 2**20:.0f} MiB (this process + workers), "
        f"peak RSS {self_rss:.0f} MiB here, {child_rss:.0f} MiB the largest worker; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    if lin is not None:
        print(f"[{name}]   {lin['summary'][:200]}")
    expected = EXPECTED.get(name)
    return expected is None or valid == expected


def side_by_side(
    name: str, path: Path, extra: str | None, workers: int | None, porcupine: str, rounds: int
) -> bool:
    """Case mode with ``--porcupine`` (module docstring): ours and Porcupine's command alternately."""
    ours = [sys.executable, "-m", "checkers", "check", str(path), "--model", "cas-register"]
    if workers is not None:
        ours.append(f"--workers={workers}")
    if extra:
        ours.append(extra)
    theirs = porcupine_argv(porcupine, path, "cas-register")
    print(f"[{name}] ours: {shlex.join(ours)}")
    print(f"[{name}] Porcupine: {shlex.join(theirs)}")
    runs: dict[str, list[ChildRun]] = {"ours": [], "Porcupine": []}
    verdicts: dict[str, list[Valid]] = {"ours": [], "Porcupine": []}
    for round_ in range(rounds):
        for who, argv in (("ours", ours), ("Porcupine", theirs)):
            run = run_child(argv, cwd=ROOT)
            runs[who].append(run)
            verdict = porcupine_verdict(run.output) if who == "Porcupine" else _our_verdict(run.output)
            verdicts[who].append(verdict)
            print(
                f"[{name}] round {round_ + 1} {who:9}: {run.cpu_s:6.2f} s cpu {run.wall_s:6.2f} s wall; peak RSS "
                f"{run.max_rss_mib:5.0f} MiB largest process, {run.tree_rss_mib:5.0f} MiB summed, PSS "
                f"{run.tree_pss_mib:5.0f} MiB; verdict {verdict}; load average before {run.load}"
            )
    print(f"[{name}] load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")

    def median(who: str, field: str) -> float:
        values = sorted(getattr(run, field) for run in runs[who])
        return values[len(values) // 2]

    for who in runs:
        print(f"[{name}] median {who:9}: {median(who, 'cpu_s'):6.2f} s cpu {median(who, 'wall_s'):6.2f} s wall, "
              f"peak summed RSS {median(who, 'tree_rss_mib'):5.0f} MiB, PSS {median(who, 'tree_pss_mib'):5.0f} MiB")
    ratios = sorted(a.cpu_s / b.cpu_s for a, b in zip(runs["ours"], runs["Porcupine"], strict=True))
    print(f"[{name}] ours/Porcupine CPU: median {median('ours', 'cpu_s') / median('Porcupine', 'cpu_s'):.2f}x, "
          f"per round {', '.join(f'{r:.2f}' for r in ratios)}")
    expected = EXPECTED.get(name)
    return expected is None or all(v == expected for v in verdicts["ours"])


def _our_verdict(output: str) -> Valid:
    """The linearizability verdict in ``python -m checkers check``'s output."""
    for line in output.splitlines():
        if ": linearizable: " in line:
            word = line.split(": linearizable: ", 1)[1].split(":", 1)[0]
            return {"valid": True, "invalid": False}.get(word, UNKNOWN)
    return UNKNOWN


def _edn_value(value: Any) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + " ".join(_edn_value(v) for v in value) + "]"
    return json.dumps(value)


def write_edn(source: Path, by_line: Path, vector: Path) -> None:
    """``source`` (our JSONL) as Jepsen EDN: one map per line, and Knossos' single vector."""
    with source.open(encoding="utf-8") as lines, by_line.open("w", encoding="utf-8") as out:
        for line in lines:
            r = json.loads(line)
            fields = [
                f":index {r['index']}", f":time {r['time']}", f":type :{r['type']}", f":process {r['process']}",
                f":f :{r['f']}", f":value [{_edn_value(r['key'])} {_edn_value(r['value'])}]",
            ]
            if "error" in r:
                fields.append(f":error :{r['error']}")
            out.write("{" + ", ".join(fields) + "}\n")
    with by_line.open(encoding="utf-8") as lines, vector.open("w", encoding="utf-8") as out:
        out.write("[")
        for number, line in enumerate(lines):
            out.write(("\n " if number else "") + line.rstrip("\n"))
        out.write("]\n")


def _measured_command(argv: list[str]) -> tuple[float, float, float, str]:
    """Wall and CPU seconds and peak RSS (MiB) of ``python -m checkers`` with ``argv``, and its output."""
    import subprocess

    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "checkers", *argv], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    output = child.stdout.read()
    _, _, usage = os.wait4(child.pid, 0)
    child.returncode = 0
    wall = time.perf_counter() - started
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, output


def edn_comparison(directory: Path, ops: int, seed: int, rounds: int) -> bool:
    """EDN mode (module docstring): the same history as JSONL and as EDN in both layouts."""
    jsonl = directory / f"edn-{ops}-seed{seed}.jsonl"
    by_line = directory / f"edn-{ops}-seed{seed}" / "history.edn"
    vector = directory / f"edn-{ops}-seed{seed}-knossos.edn"
    if not (jsonl.exists() and by_line.exists() and vector.exists()):
        by_line.parent.mkdir(parents=True, exist_ok=True)
        info = generate(jsonl, Shape(ops=ops, keys=100, processes=20, info=0.01), seed)
        write_edn(jsonl, by_line, vector)
        print(f"generated {info['ops']:,} operations: {jsonl} and its EDN layouts {by_line}, {vector}")
    files = {"jsonl": jsonl, "edn-line": by_line, "edn-vector": vector}
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in files}
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    ok = True
    for round_ in range(rounds):
        for name, path in files.items():
            wall, cpu, rss, output = _measured_command(
                ["check", str(path), "--model", "cas-register", "--workers", "1"]
            )
            ok = ok and ": linearizable: valid:" in output
            runs[name].append((wall, cpu, rss))
            print(f"round {round_ + 1} {name:10} {path.stat().st_size / 1e6:5.1f} MB: {wall:6.2f} s wall "
                  f"{cpu:6.2f} s cpu {rss:6.0f} MiB peak RSS  ({output.strip()[:60]}...)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    def median(name: str, field: int) -> float:
        values = sorted(run[field] for run in runs[name])
        return values[len(values) // 2]

    base = {field: median("jsonl", field) for field in range(3)}
    for name in files:
        wall, cpu, rss = (median(name, field) for field in range(3))
        print(f"median {name:10}: {wall:6.2f} s wall {cpu:6.2f} s cpu {rss:6.0f} MiB = "
              f"{wall / base[0]:.2f}x wall {cpu / base[1]:.2f}x cpu {rss / base[2]:.2f}x memory of the JSONL")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per file; the best counts (default 5)")
    parser.add_argument("--top", type=int, default=10, help="slowest files to list (default 10)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="directory with MANIFEST.json")
    parser.add_argument("--case", action="append", choices=[*CASES, "all"], help="generated case(s) to run")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/linearizability-bench"), help="generated histories")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, help="processes for the search (default: the cores)")
    parser.add_argument("--edn", action="store_true", help="EDN (both layouts) against JSONL, side by side")
    parser.add_argument("--edn-ops", type=int, default=100_000, help="operations of the EDN mode's history")
    parser.add_argument(
        "--porcupine", metavar="CMD",
        help="a command that checks one history file and prints ok/illegal ({file}, {model}: module docstring); "
             "measured side by side in this run",
    )
    args = parser.parse_args(argv)
    if args.edn:
        args.dir.mkdir(parents=True, exist_ok=True)
        return 0 if edn_comparison(args.dir, args.edn_ops, args.seed, min(args.repeat, 5)) else 1
    if args.case:
        args.dir.mkdir(parents=True, exist_ok=True)
        names = list(CASES) if "all" in args.case else args.case
        ok = [
            run_case(name, args.dir, args.seed, args.workers, args.porcupine, min(max(1, args.repeat), 5))
            for name in names
        ]
        return 0 if all(ok) else 1
    if not (args.corpus / "MANIFEST.json").is_file():
        print(f"no corpus at {args.corpus}: expected MANIFEST.json there (../shared beside the repository)")
        return 254
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    rows = measure(args.corpus, args.repeat, args.porcupine)
    reference = "bare json.loads of the lines (cpu)" if args.porcupine is None else f"Porcupine: {args.porcupine} (cpu)"
    report(rows, args.top, reference)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    wrong = [r for r in rows if r.expected is not None and r.valid != r.expected]
    for r in wrong:
        print(f"WRONG VERDICT {r.name}: got {r.valid}, MANIFEST.json expects {r.expected}")
    if args.porcupine is not None:
        differs = [r for r in rows if r.reference_valid != r.expected]
        for r in differs:
            print(f"Porcupine's command: {r.name}: {r.reference_valid}, MANIFEST.json expects {r.expected}")
        print(f"Porcupine's command agrees with MANIFEST.json on {len(rows) - len(differs)} of {len(rows)} files")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
