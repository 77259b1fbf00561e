"""Synthetic stored runs for the analysis tests and the analysis benchmark.

:func:`write_run` writes a run directory in FORMATS.md's layout (``test.json``, ``history.jsonl``,
``nodes/<node>/journal.jsonl``) from a seeded simulation of a correct register service: several client
processes with overlapping operations on a few keys, each write taking effect (and getting the next LSN
of term 1 from leader n1) at the instant it completes, reads returning the value at that instant; a
partition and a heal from the nemesis; then a final read of every key. Every node's journal applies every
write in LSN order. Such a history is linearizable, LSN-monotonic, durable and has one leader per term.

Variants make it wrong in one known way:

* ``lost_write=True``: the last acknowledged write of key ``k0`` is missing from the final read (which
  returns the value before it) and from the journal of node n3: durability fails with a lost write;
* ``truncate=True``: the history's last line is cut in half, as if the controller died mid-write.

``journals="full"`` journals what the bundled cluster's nodes journal for each write, in their shape: an
``append`` (index, count, first and last LSN), a ``commit`` and an ``apply`` (with its log index), three
events a write on each node (about 4.5 an operation, where a simulated cluster run has 4-5); the default,
``"applies"``, only the ``apply`` (about 1.5 an operation).

``standin=True`` writes the run of a system like ``harness new-db``'s stand-in instead: no journals, no
LSNs, status polls that report ``term: null``, and ``lsn-monotonicity`` declared not applicable in
``test.json`` (as the adapter's ``not_applicable`` puts it there): two checkers the run cannot judge
(``harness.judge``), the other two still judge it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

NODES = ("n1", "n2", "n3")
STATUS_POLLER = 100  # the process of the status polls of a stand-in run
STANDIN_NO_LSN = "the stand-in assigns no sequence numbers"
JOURNALS = ("applies", "full")
"""What :func:`write_run` journals for each write (module docstring)."""


def write_run(
    store: Path,
    test: str,
    stamp: str,
    *,
    ops: int = 200,
    keys: int = 3,
    processes: int = 4,
    seed: int = 1,
    lost_write: bool = False,
    truncate: bool = False,
    mode: str = "raft",
    nemesis: str = "partition",
    bugs: tuple[str, ...] = (),
    history_values: dict[str, Any] | None = None,
    standin: bool = False,
    journals: str = "applies",
) -> Path:
    """Write one run to ``store/<test>/<stamp>/`` and return its directory."""
    if journals not in JOURNALS:
        raise ValueError(f"journals must be one of {', '.join(JOURNALS)}, not {journals!r}")
    rng = random.Random(seed)
    run = store / test / stamp
    (run / "nodes").mkdir(parents=True, exist_ok=True)
    # The shape of the controller's test.json (harness/run.py), with the fields the analysis reads.
    spec = {
        "test": test,
        "seed": seed,
        "command": f"harness run --mode {mode} --workload register --nemesis {nemesis} --seed {seed}",
        "nodes": list(NODES),
        "db": "cluster",
        "mode": mode,
        "bugs": list(bugs),
        "workload": "register",
        "nemesis": [n for n in nemesis.split(",") if n and n != "none"],
        "model": "cas-register",
        "checkers": ["linearizable", "single-leader-per-term", "lsn-monotonicity", "durability"],
    }
    if standin:
        spec.update(db="standin", mode=None, not_applicable={"lsn-monotonicity": STANDIN_NO_LSN})
    (run / "test.json").write_text(json.dumps(spec), encoding="utf-8")

    events: list[dict[str, Any]] = []
    now = 0
    state: dict[str, Any] = {}
    state_lsn: dict[str, list[int]] = {}
    applied: list[dict[str, Any]] = []  # writes in LSN order: {"lsn", "key", "value"}
    seq = 0
    counter = 0
    outstanding: dict[int, dict[str, Any]] = {}
    key_names = [f"k{i}" for i in range(keys)]

    def emit(process: Any, kind: str, f: str, key: Any, value: Any, **extra: Any) -> None:
        nonlocal now
        now += rng.randint(1_000, 200_000)
        event = {"index": len(events), "time": now, "process": process, "type": kind, "f": f, "key": key, "value": value}
        event.update(extra)
        if standin:
            event.pop("lsn", None)
        events.append(event)

    def poll_status() -> None:
        status = {"node": "n1", "role": "leader", "term": None, "leader": "n1"}
        emit(STATUS_POLLER, "invoke", "status", None, None)
        emit(STATUS_POLLER, "ok", "status", None, status, node="n1")

    def complete(process: int) -> None:
        nonlocal seq
        op = outstanding.pop(process)
        key = op["key"]
        if op["f"] == "write":
            seq += 1
            lsn = [1, seq]
            state[key], state_lsn[key] = op["value"], lsn
            applied.append({"lsn": lsn, "key": key, "value": op["value"]})
            emit(process, "ok", "write", key, op["value"], node="n1", lsn=lsn)
        else:
            extra = {"lsn": state_lsn[key]} if key in state_lsn else {}
            emit(process, "ok", "read", key, state.get(key), node="n1", **extra)

    started = 0
    half = ops // 2
    while started < ops or outstanding:
        if standin and started % 50 == 0 and not outstanding:
            poll_status()
        if started == half and not outstanding:
            emit("nemesis", "invoke", "partition", None, "majorities-ring")
            emit("nemesis", "ok", "partition", None, {"n1": ["n3"], "n3": ["n1"]})
            emit("nemesis", "invoke", "heal", None, None)
            emit("nemesis", "ok", "heal", None, None)
            half = -1
        idle = [p for p in range(processes) if p not in outstanding]
        can_start = started < ops and idle and started != half
        if can_start and (not outstanding or rng.random() < 0.5):
            process = rng.choice(idle)
            key = rng.choice(key_names)
            if rng.random() < 0.5:
                counter += 1
                op = {"f": "write", "key": key, "value": counter}
            else:
                op = {"f": "read", "key": key, "value": None}
            outstanding[process] = op
            emit(process, "invoke", op["f"], key, op["value"])
            started += 1
        else:
            complete(rng.choice(sorted(outstanding)))

    # the final read of every key, after the nemesis
    lost_key = key_names[0]
    lost_lsn = None
    for key in key_names:
        value, lsn = state.get(key), state_lsn.get(key)
        if lost_write and key == lost_key:
            writes = [a for a in applied if a["key"] == key]
            if len(writes) >= 2:
                value, lsn, lost_lsn = writes[-2]["value"], writes[-2]["lsn"], writes[-1]["lsn"]
        emit(0, "invoke", "read", key, None, final=True)
        emit(0, "ok", "read", key, value, node="n1", **({"lsn": lsn} if lsn else {}))
    if history_values:
        for key, value in history_values.items():
            emit(0, "invoke", "write", key, value)
            emit(0, "fail", "write", key, value, error="not-leader")

    lines = [json.dumps(e, separators=(",", ":")) for e in events]
    text = "\n".join(lines) + "\n"
    if truncate:
        text = "\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2]
    (run / "history.jsonl").write_text(text, encoding="utf-8")
    if standin:
        (run / "nodes").rmdir()
        return run

    for number, node in enumerate(NODES):
        journal = run / "nodes" / node
        journal.mkdir(parents=True, exist_ok=True)
        wall = 1_700_000_000.0 + number
        entries = [
            {"event": "start"},
            {"event": "role", "role": "leader" if node == "n1" else "follower", "term": 1, "leader": "n1"},
        ]
        for index, write in enumerate(applied, start=1):
            if node == "n3" and write["lsn"] == lost_lsn:
                continue
            op = {"f": "write", "value": write["value"]}
            if journals == "full":
                lsn = write["lsn"]
                entries.append({"event": "append", "index": index, "count": 1, "first_lsn": lsn, "last_lsn": lsn})
                entries.append({"event": "commit", "index": index, "lsn": lsn})
                entries.append({"event": "apply", "lsn": lsn, "index": index, "key": write["key"], "op": op})
            else:
                entries.append({"event": "apply", "lsn": write["lsn"], "key": write["key"], "op": op})
        with (journal / "journal.jsonl").open("w", encoding="utf-8") as handle:
            for s, entry in enumerate(entries):
                handle.write(json.dumps({"node": node, "seq": s, "wall": wall + s * 0.001, **entry}) + "\n")
    return run
