"""Benchmark: single-leader-per-term, lsn-monotonicity and durability on a generated run of 1 million
operations with 5 node journals (issue 3, item 10).

The run is generated deterministically from ``--seed`` by a correct replicated log: a register workload
over ``--keys`` keys (writes, reads, compare-and-set; unique values per key), ``--clients`` concurrent
processes whose operations overlap in rounds, about 1% ``info`` and 2% ``fail`` completions, status
polls, an election every ``--term-ops`` operations, nemesis partition/heal pairs, and after the final heal
one final read of every key on every node. Every node journals its role changes and applies every
entry. All three checkers must find the run valid (a benchmark of a checker that raised is no figure).

Printed: generation, JSON parsing and validation (``parse_history``, ``parse_journal``), then each
checker's wall and CPU seconds, history operations and journal events per CPU second, and the load
average (on a shared machine the CPU time is the steadier figure). One run each (``--repeat N``: the best
of N). The whole run holds about 6 GB of memory at 1 million operations.

    .venv/bin/python benchmarks/checkers_bench.py [--ops 1000000] [--nodes 5] [--seed 1] [--repeat 1]

``--post-run DIR`` (issue 12) writes such a run to ``DIR`` as the harness stores one (``history.jsonl``,
``nodes/<node>/journal.jsonl``; by default the size of a 300 s rate-0 run: 465,145 operations, about
115 MB of history and, with ``--commit-share 0.35`` commit events, about 170 MB of journals) and runs the
harness's post-run check on it in a child process, printing its wall time, verdicts and peak RSS: the
check as ``harness.run.check_run`` makes it now (``checkers.judge.judge_files``), and with ``--legacy``
as it was made before (every event and journal line kept, ``load_history`` + ``load_journals`` + the
registry). ``--judge DIR [--legacy]`` is that child.

    .venv/bin/python benchmarks/checkers_bench.py --post-run /tmp/post-run [--legacy]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from checkers.durability import check_durability  # noqa: E402
from checkers.history import parse_history, parse_journal  # noqa: E402
from checkers.leader import check_single_leader_per_term  # noqa: E402
from checkers.lsn import check_lsn_monotonicity  # noqa: E402
from checkers.verdict import Verdict  # noqa: E402


class GeneratedRun:
    """History and journal lines of a correct cluster (see the module docstring)."""

    def __init__(
        self, ops: int, nodes: int, keys: int, clients: int, term_ops: int, seed: int, commit_share: float = 0.0
    ) -> None:
        self.rng = random.Random(seed)
        self.commit_share = commit_share
        self.nodes = [f"n{i + 1}" for i in range(nodes)]
        self.keys = [f"k{i}" for i in range(keys)]
        self.clients = clients
        self.term_ops = term_ops
        self.history: list[str] = []
        self.journals: dict[str, list[str]] = {n: [] for n in self.nodes}
        self.time = 0
        self.term = 0
        self.seq = 0
        self.leader = self.nodes[0]
        self.state: dict[str, tuple[int | None, list[int] | None]] = {}
        self.next_value = 1
        self.next_process = clients
        self.processes = list(range(clients))
        self.client_ops = 0
        self.target = ops
        self.generate()

    def event(
        self, process: int | str, type: str, f: str, key: object, value: object, **extra: object
    ) -> None:
        record = {
            "index": len(self.history),
            "time": self.time,
            "process": process,
            "type": type,
            "f": f,
            "key": key,
            "value": value,
        }
        record.update(extra)
        self.history.append(json.dumps(record))
        self.time += self.rng.randint(1_000, 50_000)

    def journal(self, node: str, event: str, **fields: object) -> None:
        lines = self.journals[node]
        record = {"node": node, "seq": len(lines), "wall": self.time / 1e9, "event": event}
        record.update(fields)
        lines.append(json.dumps(record))

    def elect(self) -> None:
        self.term += 1
        self.seq = 0
        self.leader = self.rng.choice(self.nodes)
        for node in self.nodes:
            role = "leader" if node == self.leader else "follower"
            self.journal(node, "role", role=role, term=self.term, leader=self.leader)

    def append(self, key: str, value: int) -> list[int]:
        self.seq += 1
        lsn = [self.term, self.seq]
        self.state[key] = (value, lsn)
        if self.commit_share and self.rng.random() < self.commit_share:
            self.commit(lsn)
        for node in self.nodes:
            self.journal(node, "apply", lsn=lsn, key=key, op={"f": "write", "value": value})
        return lsn

    def nemesis(self) -> None:
        grudge = {self.rng.choice(self.nodes): self.nodes}
        self.event("nemesis", "invoke", "partition", None, grudge)
        self.event("nemesis", "ok", "partition", None, grudge)
        self.event("nemesis", "invoke", "heal", None, None)
        self.event("nemesis", "ok", "heal", None, None)

    def round(self) -> None:
        """Every client invokes, the operations take effect in a random order, then complete."""
        rng = self.rng
        ops = []
        for slot, process in enumerate(self.processes):
            roll = rng.random()
            key = rng.choice(self.keys)
            if roll < 0.02:
                f, value = "status", None
            elif roll < 0.47:
                f, value = "write", self.next_value
                self.next_value += 1
            elif roll < 0.52:
                current = self.state.get(key, (None, None))[0]
                f, value = "cas", [current, self.next_value]
                self.next_value += 1
            else:
                f, value = "read", None
            if f == "status":
                key = None
            ops.append([slot, process, f, key, value, None, None, "ok"])
            self.event(process, "invoke", f, key, value)
        rng.shuffle(ops)
        for op in ops:  # linearization order
            _, _, f, key, value, _, _, _ = op
            outcome = rng.random()
            if outcome < 0.02 and f != "status":
                op[7] = "fail"
                continue
            if outcome < 0.03 and f != "status":
                op[7] = "info"
                if f in ("write", "cas") and rng.random() < 0.5 and (f == "write" or self.holds(key, value[0])):
                    self.append(key, value if f == "write" else value[1])
                continue
            if f == "write":
                op[6] = self.append(key, value)
            elif f == "cas":
                if self.holds(key, value[0]):
                    op[6] = self.append(key, value[1])
                else:  # executed, returned false: the cluster's cas-mismatch
                    op[7] = "mismatch"
            elif f == "read":
                op[5], op[6] = self.state.get(key, (None, None))
            else:
                node = rng.choice(self.nodes)
                op[5] = {
                    "node": node,
                    "role": "leader" if node == self.leader else "follower",
                    "term": self.term,
                    "leader": self.leader,
                }
        rng.shuffle(ops)
        for slot, process, f, key, value, output, lsn, kind in ops:
            extra = {"lsn": lsn} if lsn is not None else {}
            if kind == "ok":
                self.event(process, "ok", f, key, output if f in ("read", "status") else value, **extra)
            elif kind == "mismatch":
                self.event(process, "fail", f, key, value, error="cas-mismatch")
            else:
                self.event(process, kind, f, key, value, error="timeout" if kind == "info" else "not-leader")
                if kind == "info":
                    self.processes[slot] = self.next_process
                    self.next_process += 1
            self.client_ops += 1

    def holds(self, key: str, value: object) -> bool:
        return self.state.get(key, (None, None))[0] == value

    def commit(self, lsn: list[int]) -> None:
        """Nodes journal commits too (people read them; the checkers do not)."""
        for node in self.nodes:
            self.journal(node, "commit", lsn=lsn)

    def generate(self) -> None:
        for node in self.nodes:
            self.journal(node, "start")
        self.elect()
        final_reads = len(self.keys) * len(self.nodes)
        next_election = self.term_ops
        next_nemesis = 50_000
        while self.client_ops + final_reads < self.target:
            self.round()
            if self.client_ops >= next_election:
                self.elect()
                next_election += self.term_ops
            if self.client_ops >= next_nemesis:
                self.nemesis()
                next_nemesis += 50_000
        self.nemesis()
        process = self.next_process
        for key in self.keys:
            value, lsn = self.state.get(key, (None, None))
            for node in self.nodes:
                self.event(process, "invoke", "read", key, None, node=node)
                self.event(process, "ok", "read", key, value, node=node, **({"lsn": lsn} if lsn else {}))
                self.client_ops += 1


class Clock:
    """Wall and CPU seconds of a step: on a shared machine the CPU time of this process is the steadier
    figure (other processes' load stretches the wall time, not the CPU time)."""

    def __enter__(self) -> Clock:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


def _timed(label: str, function: Callable[[], Verdict], repeat: int) -> tuple[Clock, Verdict]:
    best: Clock | None = None
    verdict: Verdict | None = None
    for _ in range(max(1, repeat)):
        gc.collect()
        with Clock() as clock:
            verdict = function()
        if best is None or clock.cpu < best.cpu:
            best = clock
    assert verdict is not None and best is not None
    if verdict.valid is not True:
        raise SystemExit(f"{label} did not accept the generated run: {verdict.summary}")
    return best, verdict


MODEL = "cas-register"
RUN_CHECKERS = ["single-leader-per-term", "lsn-monotonicity", "durability", "linearizable"]


def write_run(run: GeneratedRun, directory: Path) -> tuple[int, int]:
    """Store ``run`` as the harness does; returns the bytes of history and of journals."""
    directory.mkdir(parents=True, exist_ok=True)
    history = directory / "history.jsonl"
    history.write_text("".join(line + "\n" for line in run.history), encoding="utf-8")
    journals = 0
    for node, lines in run.journals.items():
        path = directory / "nodes" / node / "journal.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        journals += path.stat().st_size
    return history.stat().st_size, journals


def judge_run(directory: Path, legacy: bool) -> int:
    """The post-run check of a stored run, as check_run makes it (or made it, ``legacy``)."""
    started = time.perf_counter()
    if legacy:
        from checkers.history import load_history, load_journals
        from checkers.registry import CheckInput, run_checker

        history = load_history(directory / "history.jsonl")
        journals = load_journals(directory / "nodes")
        inp = CheckInput(history=history, model=MODEL, journals=journals, timeout_s=600)
        verdicts = {name: run_checker(name, inp) for name in RUN_CHECKERS}
    else:
        from checkers.judge import Budgets, default_workers, judge_files

        judgement = judge_files(
            directory / "history.jsonl",
            model=MODEL,
            journals=directory / "nodes",
            checkers=RUN_CHECKERS,
            missing="unknown",
            budgets=Budgets(timeout_s=600, workers=default_workers()),
        )
        verdicts = judgement.verdicts
    import resource

    for name, verdict in verdicts.items():
        print(f"  {name}: {verdict.valid}: {verdict.summary[:100]}")
    print(
        f"  wall {time.perf_counter() - started:.1f} s, peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
        f" (largest worker {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MiB)"
    )
    return 0 if all(v.valid is True for v in verdicts.values()) else 1


def post_run(directory: Path, args: argparse.Namespace) -> int:
    if not (directory / "history.jsonl").exists():
        with Clock() as clock:
            run = GeneratedRun(args.ops, args.nodes, args.keys, args.clients, args.term_ops, args.seed, args.commit_share)
            history_bytes, journal_bytes = write_run(run, directory)
            del run
        print(
            f"generated {directory}: {args.ops:,} operations, history {history_bytes / 1e6:.0f} MB, "
            f"journals {journal_bytes / 1e6:.0f} MB in {clock.wall:.0f} s"
        )
    import subprocess

    for legacy in ([True, False] if args.legacy else [False]):
        label = "before (every event kept)" if legacy else "now (checkers.judge)"
        print(f"post-run check, {label}; load average {os.getloadavg()[0]:.1f}:", flush=True)
        command = [sys.executable, __file__, "--judge", str(directory), *(["--legacy"] if legacy else [])]
        code = subprocess.run(command, check=False).returncode
        if code != 0:
            print(f"  the check did not find the generated run valid (exit {code})")
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--post-run", type=Path, metavar="DIR", help="generate a stored run and time its post-run check")
    parser.add_argument("--judge", type=Path, metavar="DIR", help="(child) the post-run check of a stored run")
    parser.add_argument("--legacy", action="store_true", help="also (or, with --judge, only) the old way")
    parser.add_argument("--commit-share", type=float, default=0.35, help="--post-run: entries journalled as commits")
    parser.add_argument("--ops", type=int, default=1_000_000, help="client operations (default 1,000,000)")
    parser.add_argument("--nodes", type=int, default=5, help="nodes, each with a journal (default 5)")
    parser.add_argument("--keys", type=int, default=1000, help="register keys (default 1000)")
    parser.add_argument("--clients", type=int, default=10, help="concurrent client processes (default 10)")
    parser.add_argument("--term-ops", type=int, default=20_000, help="operations per term (default 20,000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1, help="runs per checker; the best counts (default 1)")
    args = parser.parse_args(argv)
    if args.judge is not None:
        return judge_run(args.judge, args.legacy)
    if args.post_run is not None:
        if "--ops" not in (argv if argv is not None else sys.argv):
            args.ops = 465_145
        return post_run(args.post_run, args)

    rows: list[tuple[str, Clock, Verdict | None]] = []
    with Clock() as clock:
        run = GeneratedRun(args.ops, args.nodes, args.keys, args.clients, args.term_ops, args.seed)
    rows.append(("generate (JSON lines)", clock, None))
    with Clock() as clock:
        history = parse_history(run.history, "generated/history.jsonl")
    rows.append(("parse_history (validate, pair)", clock, None))
    with Clock() as clock:
        journals = {
            node: parse_journal(lines, f"generated/nodes/{node}/journal.jsonl")
            for node, lines in run.journals.items()
        }
    rows.append((f"parse_journal x {len(journals)}", clock, None))
    del run
    n_ops = len(history.ops)
    n_journal = sum(len(events) for events in journals.values())

    checks: list[tuple[str, Callable[[], Verdict]]] = [
        ("single-leader-per-term", lambda: check_single_leader_per_term(journals, history)),
        ("lsn-monotonicity", lambda: check_lsn_monotonicity(journals, history)),
        ("durability", lambda: check_durability(history, journals)),
    ]
    for name, function in checks:
        clock, verdict = _timed(name, function, args.repeat)
        rows.append((name, clock, verdict))

    print(
        f"generated run: {n_ops:,} client operations ({len(history.events):,} history lines), "
        f"{len(history.nemesis)} nemesis operations, {n_journal:,} journal events on {len(journals)} nodes, "
        f"seed {args.seed}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(f"{'step':<32} {'wall s':>8} {'cpu s':>8} {'ops/s (cpu)':>12} {'journal ev/s (cpu)':>19}  verdict")
    for name, clock, verdict in rows:
        if verdict is None:
            print(f"{name:<32} {clock.wall:>8.2f} {clock.cpu:>8.2f}")
        else:
            print(
                f"{name:<32} {clock.wall:>8.2f} {clock.cpu:>8.2f} {n_ops / clock.cpu:>12,.0f} "
                f"{n_journal / clock.cpu:>19,.0f}  {verdict.summary[:60]}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
