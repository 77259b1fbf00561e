"""Synthetic stored runs for the report tests, the report benchmark and the README screenshot.

:func:`write_run` simulates, from a seed, a five-node register service under a nemesis and writes a run
directory in FORMATS.md's layout: ``test.json``, ``history.jsonl`` (clients, status pollers, nemesis),
``nodes/<node>/journal.jsonl`` and a log per node, and (``judge=True``) ``results.json`` made by running
the real checkers (``checkers.registry``) on what it wrote, so the report is tested against the
checkers' own counterexample shapes.

The simulated service is correct: a write takes effect when it is acknowledged, a read returns the value
at its completion, LSNs are ``[term, seq]`` of the leader's log, every node applies every entry (late, if
it was down or paused). The nemesis isolates the leader (a new leader is elected in the next term), kills
the next leader, bumps n2's clock by 30 s, pauses n4, and tries a latency fault that this host cannot
apply (netem unavailable), then heals everything before the final read of every key.

``failing=True`` adds one known bug, term reuse: when the killed leader is replaced, the new leader keeps
the old term. The last write the old leader acknowledged before the kill never replicated, so it is lost
(durability), a later read misses it (linearizability), the new leader re-issues its LSN for another
entry (LSN order), and two nodes lead the same term (single leader per term).
"""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

NODES = ("n1", "n2", "n3", "n4", "n5")
ORIGIN_WALL = 1_763_000_000.25  # real wall time (s) of history time 0
DEPLOYED_S = 3.2
MS = 1_000_000
S = 1_000_000_000
CHECKERS = ("linearizable", "single-leader-per-term", "lsn-monotonicity", "durability")


def _fault_times(duration: int) -> dict[str, int]:
    return {name: int(duration * share) for name, share in {
        "partition": 0.15, "heal": 0.30, "kill": 0.42, "start": 0.55, "clock": 0.58, "pause": 0.63,
        "latency": 0.66, "resume": 0.71, "reset": 0.80,
    }.items()}


def write_run(
    store: Path,
    *,
    test: str = "cluster-raft-register-partition+kill+pause+clock",
    stamp: str = "20251113T021304",
    ops: int = 600,
    seed: int = 7,
    failing: bool = True,
    concurrency: int = 6,
    keys: int = 3,
    judge: bool = True,
    checkers: tuple[str, ...] = CHECKERS,
    evil_value: str | None = None,
    rate_per_process: float = 25.0,
) -> Path:
    """Write one simulated run to ``store/<test>/<stamp>/`` and return its directory (module docstring).

    ``evil_value`` is written by one extra write (and read back), to test that the report escapes it.
    """
    rng = random.Random(seed)
    run = store / test / stamp
    (run / "nodes").mkdir(parents=True, exist_ok=True)
    duration = max(int(ops / (concurrency * rate_per_process) * S), 4 * S)
    at = _fault_times(duration)
    key_names = [f"k{i}" for i in range(keys)]

    # Leadership: (from time, leader, term); the isolated old leader keeps believing until the heal.
    election = 600 * MS
    first, second, third = "n1", "n3", "n5"
    kill_term = 2 if failing else 3
    leaders = [(0, first, 1), (at["partition"] + election, second, 2), (at["kill"] + election, third, kill_term)]

    def leader_at(t: int) -> tuple[str | None, int]:
        current: tuple[str | None, int] = (None, 1)
        for start, node, term in leaders:
            if t >= start:
                current = (node, term)
        if at["partition"] <= t < leaders[1][0] or at["kill"] <= t < leaders[2][0]:
            return None, current[1]
        return current

    # 1. Client operation intervals (values are decided at completion, in time order).
    planned: list[dict[str, Any]] = []
    counter = 0
    next_process = concurrency
    for slot in range(concurrency):
        process = slot
        t = rng.randint(0, 20 * MS)
        while t < duration:
            key = rng.choice(key_names)
            roll = rng.random()
            f = "read" if roll < 0.45 else "write" if roll < 0.85 else "cas"
            if failing and key == key_names[0] and t >= at["kill"] - 100 * MS:
                f = "read"  # the lost write's key is only read after it, so the loss is visible
            leader, _ = leader_at(t)
            latency = int(math.exp(rng.gauss(math.log(4 * MS), 0.6)))
            kind = "ok"
            error = None
            if leader is None:
                if f == "read" or rng.random() < 0.5:
                    kind, error, latency = "fail", "not-leader", int(latency / 3)
                else:
                    kind, error, latency = "info", "timeout after 0.5 s", 500 * MS
            elif rng.random() < 0.01:
                kind, error, latency = "info", "connection lost", rng.randint(50, 500) * MS
            counter += 1
            value: Any = counter if f == "write" else [counter - rng.randint(1, 5), counter] if f == "cas" else None
            planned.append({"process": process, "f": f, "key": key, "value": value, "call": t, "ret": t + latency,
                            "type": kind, "error": error, "node": leader or rng.choice(NODES)})
            t += latency + int(rng.expovariate(rate_per_process) * S)
            if kind == "info":
                process = next_process
                next_process += 1

    # 2. Semantics in completion order.
    state: dict[str, Any] = {}
    state_lsn: dict[str, list[int]] = {}
    seq_by_term: dict[int, int] = {}
    applied: list[dict[str, Any]] = []  # {"t", "lsn", "key", "value", "only": the one node that has it}
    kill_leader = leaders[1][1]
    last_before_kill: dict[str, Any] | None = None
    lost_decided = False
    for op in sorted(planned, key=lambda o: o["ret"]):
        if failing and not lost_decided and op["ret"] >= at["kill"]:
            lost_decided = True
            lost = last_before_kill
            if lost is not None:
                # The old leader acknowledged the tail of its log from the last write of k0 on without
                # replicating it; the new leader (same term: the bug) does not have it, so those keys
                # revert and their LSNs are issued again.
                tail = [entry for entry in applied if entry["lsn"] >= lost["lsn"]]
                for entry in reversed(tail):
                    entry["only"] = kill_leader
                    state[entry["key"]], state_lsn[entry["key"]] = entry["previous"], entry["previous_lsn"]
                seq_by_term[lost["lsn"][0]] = lost["lsn"][1] - 1
        if op["type"] != "ok":
            continue
        _, term = leader_at(op["call"])
        key = op["key"]
        if op["f"] == "cas":
            if rng.random() < 0.7:
                op["value"] = [state.get(key), op["value"][1]]
            if op["value"][0] != state.get(key):
                op["type"], op["error"] = "fail", "cas-mismatch"
                continue
        if op["f"] in ("write", "cas"):
            new = op["value"] if op["f"] == "write" else op["value"][1]
            seq_by_term[term] = seq_by_term.get(term, 0) + 1
            lsn = [term, seq_by_term[term]]
            entry = {"t": op["ret"], "lsn": lsn, "key": key, "value": new, "only": None, "previous": state.get(key),
                     "previous_lsn": state_lsn.get(key)}
            if op["f"] == "write" and key == key_names[0] and op["ret"] < at["kill"]:
                last_before_kill = entry
            applied.append(entry)
            state[key], state_lsn[key] = new, lsn
            op["lsn"] = lsn
        else:
            op["output"] = state.get(key)
            if key in state_lsn:
                op["lsn"] = state_lsn[key]

    # 3. Events: clients, status pollers, nemesis, final reads.
    events: list[tuple[int, int, dict[str, Any]]] = []
    order = 0

    def emit(t: int, event: dict[str, Any]) -> None:
        nonlocal order
        order += 1
        events.append((t, order, event))

    for op in planned:
        emit(op["call"], {"process": op["process"], "type": "invoke", "f": op["f"], "key": op["key"],
                          "value": op["value"]})
        done: dict[str, Any] = {"process": op["process"], "type": op["type"], "f": op["f"], "key": op["key"],
                                "value": op.get("output") if op["f"] == "read" else op["value"], "node": op["node"]}
        if op.get("lsn") and op["type"] == "ok":
            done["lsn"] = op["lsn"]
        if op["error"]:
            done["error"] = op["error"]
        emit(op["ret"], done)

    down = {kill_leader: (at["kill"], at["start"])}
    paused = {"n4": (at["pause"], at["resume"])}
    offsets = {"n2": (at["clock"], at["reset"], 30.0)}

    def role_entries(node: str) -> list[tuple[int, dict[str, Any]]]:
        """The node's journalled role, start and stop events (history time, event)."""
        entries: list[tuple[int, dict[str, Any]]] = [(-2 * S, {"event": "start"})]
        entries.append((-1 * S, {"event": "role", "role": "leader" if node == first else "follower", "term": 1,
                                 "leader": first}))
        for number, (start, leader, term) in enumerate(leaders[1:], start=1):
            if node == first and number == 1:
                # isolated by the partition: it learns of the new term only at the heal
                entries.append((at["heal"] + 40 * MS, {"event": "role", "role": "follower", "term": term, "leader": leader}))
            elif node == kill_leader and number == 2:
                continue  # it is down; it learns on restart
            elif node == leader:
                entries.append((start - 5 * MS, {"event": "role", "role": "candidate", "term": term, "leader": None}))
                entries.append((start, {"event": "role", "role": "leader", "term": term, "leader": leader}))
            else:
                entries.append((start, {"event": "role", "role": "follower", "term": term, "leader": leader}))
        if node == kill_leader:
            entries.append((at["kill"], {"event": "stop", "reason": "killed"}))
            entries.append((at["start"] + 200 * MS, {"event": "start"}))
            entries.append((at["start"] + 400 * MS, {"event": "role", "role": "follower", "term": kill_term,
                                                     "leader": third}))
        return sorted(entries, key=lambda item: item[0])

    roles = {node: [(t, e) for t, e in role_entries(node) if e["event"] == "role"] for node in NODES}

    def believed(node: str, t: int) -> tuple[str, int, str | None]:
        """What a status poll of ``node`` answers at ``t``: its latest journalled role."""
        held = [e for when, e in roles[node] if when <= t]
        latest = held[-1]
        return latest["role"], latest["term"], latest["leader"]

    for i, node in enumerate(NODES):
        process = 1000 + i
        t = 200 * MS + i * 37 * MS
        while t < duration:
            emit(t, {"process": process, "type": "invoke", "f": "status", "key": None, "value": None, "node": node})
            ret = t + 2 * MS
            out = down.get(node, (0, 0))
            stop = paused.get(node, (0, 0))
            if out[0] <= t < out[1]:
                emit(ret, {"process": process, "type": "fail", "f": "status", "key": None, "value": None, "node": node,
                           "error": "connection refused"})
            elif stop[0] <= t < stop[1]:
                emit(t + 1 * S // 2, {"process": process, "type": "fail", "f": "status", "key": None, "value": None,
                                      "node": node, "error": "timeout"})
            else:
                role, term, leader = believed(node, t)
                emit(ret, {"process": process, "type": "ok", "f": "status", "key": None, "node": node,
                           "value": {"node": node, "role": role, "term": term, "leader": leader}})
            t += S

    def nemesis(t: int, f: str, value: Any, result: Any, kind: str = "ok", error: str | None = None) -> None:
        emit(t, {"process": "nemesis", "type": "invoke", "f": f, "key": None, "value": value})
        done = {"process": "nemesis", "type": kind, "f": f, "key": None, "value": result}
        if error:
            done["error"] = error
        emit(t + 30 * MS, done)

    grudge = {n: [first] for n in NODES if n != first}
    grudge[first] = [n for n in NODES if n != first]
    nemesis(at["partition"], "partition", {"kind": "isolate", "target": "leader", "order": list(NODES)},
            {"kind": "isolate", "grudge": grudge})
    nemesis(at["heal"], "heal", None, {"nodes": list(NODES)})
    nemesis(at["kill"], "kill", {"targets": "leader"}, {"nodes": [kill_leader]})
    nemesis(at["start"], "start", {"targets": [kill_leader]}, {"nodes": [kill_leader]})
    nemesis(at["clock"], "clock", {"kind": "bump", "deltas": {"n2": 30.0}}, {"offsets": {"n2": 30.0}, "probes": {"n2": 30.002}})
    nemesis(at["pause"], "pause", {"targets": ["n4"]}, {"nodes": ["n4"]})
    nemesis(at["latency"], "latency", {"targets": ["n5"], "delay_ms": 100.0, "jitter_ms": 0.0},
            {"nodes": [], "delay_ms": 100.0, "jitter_ms": 0.0, "unavailable": True}, kind="info",
            error="n5: netem is not available on this kernel (Specified qdisc kind is unknown)")
    nemesis(at["resume"], "resume", {"targets": ["n4"]}, {"nodes": ["n4"]})
    nemesis(at["reset"], "clock", {"kind": "reset", "targets": "all"}, {"nodes": list(NODES), "probes": {n: 0.0 for n in NODES}})
    nemesis(duration, "heal-latency", None, {"nodes": list(NODES)})

    t = duration + 500 * MS
    final_process = next_process + 10
    reads = list(key_names)
    if evil_value is not None:
        counter += 1
        seq_by_term[kill_term] = seq_by_term.get(kill_term, 0) + 1
        evil_lsn = [kill_term, seq_by_term[kill_term]]
        emit(t, {"process": final_process, "type": "invoke", "f": "write", "key": "evil", "value": evil_value})
        emit(t + 3 * MS, {"process": final_process, "type": "ok", "f": "write", "key": "evil", "value": evil_value,
                          "node": third, "lsn": evil_lsn})
        applied.append({"t": t + 3 * MS, "lsn": evil_lsn, "key": "evil", "value": evil_value, "only": None})
        state["evil"], state_lsn["evil"] = evil_value, evil_lsn
        reads.append("evil")
        t += 10 * MS
    for key in reads:
        emit(t, {"process": final_process, "type": "invoke", "f": "read", "key": key, "value": None, "final": True})
        done = {"process": final_process, "type": "ok", "f": "read", "key": key, "value": state.get(key), "node": third}
        if key in state_lsn and state_lsn[key]:
            done["lsn"] = state_lsn[key]
        emit(t + 3 * MS, done)
        t += 10 * MS

    events.sort(key=lambda item: (item[0], item[1]))
    with (run / "history.jsonl").open("w", encoding="utf-8") as handle:
        for index, (when, _, event) in enumerate(events):
            handle.write(json.dumps({"index": index, "time": when, **event}, separators=(",", ":")) + "\n")

    # 4. Journals: roles and applies, stamped with each node's (possibly skewed) wall clock.
    for node in NODES:
        entries = role_entries(node)
        last_apply = -S
        for entry in applied:
            if entry["only"] is not None and node != entry["only"]:
                continue
            when = entry["t"] + 1 * MS
            if node in down and down[node][0] <= when < down[node][1]:
                when = down[node][1] + 300 * MS
            if node in paused and paused[node][0] <= when < paused[node][1]:
                when = paused[node][1] + 5 * MS
            if node == first and at["partition"] <= when < at["heal"]:
                when = at["heal"] + 50 * MS
            when = last_apply = max(when, last_apply + 1_000)
            entries.append((when, {"event": "apply", "lsn": entry["lsn"], "key": entry["key"],
                                   "op": {"f": "write", "value": entry["value"]}}))
        entries.sort(key=lambda item: item[0])
        (run / "nodes" / node).mkdir(exist_ok=True)
        with (run / "nodes" / node / "journal.jsonl").open("w", encoding="utf-8") as handle:
            for seq, (when, entry) in enumerate(entries):
                skew = offsets[node][2] if node in offsets and offsets[node][0] <= when < offsets[node][1] else 0.0
                wall = round(ORIGIN_WALL + when / S + skew, 6)
                handle.write(json.dumps({"node": node, "seq": seq, "wall": wall, **entry}) + "\n")
        (run / "nodes" / node / "node.log").write_text(f"{node}: started\n", encoding="utf-8")

    started = datetime.fromtimestamp(math.floor(ORIGIN_WALL - DEPLOYED_S), UTC)
    spec = {"seed": seed, "db": "cluster", "mode": "raft", "nodes": len(NODES), "workload": "register",
            "nemesis": ["partition", "kill", "pause", "clock", "latency"], "time_limit": round(duration / S, 3),
            "concurrency": concurrency, "bugs": ["term-reuse"] if failing else [], "platform": "docker",
            "store": "store"}
    document = {
        "test": test,
        "seed": seed,
        "command": (f"harness run --db cluster --mode raft --nodes 5 --workload register --nemesis "
                    f"partition,kill,pause,clock,latency --time-limit {duration / S:g} --concurrency {concurrency} "
                    f"--seed {seed}" + (" --bug term-reuse" if failing else "")),
        "nodes": list(NODES), "db": "cluster", "mode": "raft", "bugs": spec["bugs"], "workload": "register",
        "nemesis": spec["nemesis"], "model": "cas-register", "checkers": list(checkers),
        "timings": {"time_limit": spec["time_limit"], "started": started.isoformat(timespec="seconds"),
                    "deployed_s": DEPLOYED_S},
        "versions": {"python": "3.11.2", "chaos-harness": "0.1.0"},
        "git_commit": "0123456789abcdef",
        "platform": {"kind": "docker"},
        "spec": spec,
    }
    (run / "test.json").write_text(json.dumps(document, indent=2), encoding="utf-8")
    (run / "schedule.jsonl").write_text("", encoding="utf-8")
    if judge:
        judge_run(run, checkers)
    return run


def judge_run(run: Path, checkers: tuple[str, ...] = CHECKERS) -> dict[str, Any]:
    """Run the real checkers on a stored run and write its ``results.json`` (FORMATS.md's shape)."""
    from checkers.history import load_history, load_journals
    from checkers.registry import CheckInput, run_checker
    from checkers.verdict import worst

    history = load_history(run / "history.jsonl")
    journals = load_journals(run / "nodes")
    inp = CheckInput(history=history, model="cas-register", journals=journals, timeout_s=60)
    verdicts = {name: run_checker(name, inp) for name in checkers}
    test = json.loads((run / "test.json").read_text(encoding="utf-8"))
    results = {
        "valid": worst(v.valid for v in verdicts.values()),
        "seed": test["seed"],
        "test": test["test"],
        "ops": sum(1 for op in history.ops if op.f != "status"),
        "duration_s": round(history.events[-1].time / S, 3) if history.events else 0,
        "checkers": {name: v.to_json() for name, v in verdicts.items()},
    }
    (run / "results.json").write_text(json.dumps(results, indent=2, default=repr), encoding="utf-8")
    return results


# Names and values that try to run a script in a page. Each carries its own number, so a dialog a test
# catches names the hole it came through.
HOSTILE_TEST = "javascript:alert(document.domain)%2F%2F"
HOSTILE_RUN = 'javascript:alert(2)%2F%2F"><img src=x onerror=alert(3)>'
HOSTILE_NODE = "javascript:alert(5)"
HOSTILE_CHECKER = 'javascript:alert(14)"><script>alert(15)</script>'
MISSING_RECORDED_FILE = "javascript:alert(16)"  # a file results.json names that does not exist: a dead link
ACTIVE_NODE_FILES = {"evil.html": "<script>alert(7)</script>", "evil.svg":
                     '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(19)"/>'}


def write_hostile_store(store: Path) -> Path:
    """A store whose directory names, node names, file names, checker names and recorded values try to
    run a script in the index, the suite page or the report; return the hostile run's directory.

    The run is a failing :func:`write_run` (every checker has a counterexample to draw) under a test
    directory named ``javascript:alert(document.domain)%2F%2F``; a node directory, a node's log names, a
    checker, paths recorded in ``results.json`` and ``suite.json`` (``..``, absolute, ``//host``,
    ``javascript:``), the test's spec and a suite's name and counts are hostile too, a node wrote an
    ``.html`` and an ``.svg`` file, and ``latest`` links to the run.
    """
    run = write_run(store, ops=150, seed=11, test=HOSTILE_TEST, stamp=HOSTILE_RUN,
                    evil_value="<script>alert(4)</script>")
    nodes = run / "nodes"
    (nodes / HOSTILE_NODE).mkdir()
    (nodes / HOSTILE_NODE / 'x" onmouseover="alert(6).log').write_text("a log\n", encoding="utf-8")
    for name, text in ACTIVE_NODE_FILES.items():
        (nodes / "n1" / name).write_text(text, encoding="utf-8")

    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    checkers = results["checkers"]
    checkers[HOSTILE_CHECKER] = checkers.pop("durability")
    claims = checkers["single-leader-per-term"]["counterexample"]["claims"]
    claims[0]["file"], claims[1]["file"] = MISSING_RECORDED_FILE, "../../../../etc/passwd"
    (run / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    test = json.loads((run / "test.json").read_text(encoding="utf-8"))
    test.update(test="<script>alert(17)</script>", mode="javascript:alert(18)",
                command="harness run '\"><script>alert(20)</script>'")
    (run / "test.json").write_text(json.dumps(test, indent=2), encoding="utf-8")

    suite = store / "suites" / "javascript:alert(8)" / "javascript:alert(9)"
    suite.mkdir(parents=True)
    recorded = f"{HOSTILE_TEST}/{HOSTILE_RUN}"
    (suite / "suite.json").write_text(json.dumps({
        "name": "<script>alert(10)</script>", "description": "<img src=x onerror=alert(11)>",
        "started": "javascript:alert(21)",
        "runs": [{"name": "<b>hostile</b>", "path": recorded, "valid": False, "status": "failed",
                  "failed_checkers": {HOSTILE_CHECKER: "<script>alert(22)</script>"}}]
        + [{"name": f"escape {i}", "path": path} for i, path in enumerate(
            ("../../../../etc/passwd", "/etc/passwd", "javascript:alert(12)", "//evil.example/x", ""))]}),
        encoding="utf-8")
    (suite / "summary.json").write_text(json.dumps({
        "exit_code": 1, "counts": {"runs": 6, "<script>alert(13)</script>": 1}}), encoding="utf-8")
    (suite / "junit.xml").write_text("<testsuites/>", encoding="utf-8")
    (store / "latest").symlink_to(recorded)
    return run
