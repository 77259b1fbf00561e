"""Which checkers run on a stored run, where they run in Spark, and how their verdicts become
``results.json``.

The checkers are the pure functions of ``checkers/``, called through :mod:`checkers.registry` (one
source of truth for what each is given and when it applies, and ``check_safe``: a checker that raises
is ``unknown``, never a pass). Two placements:

* **Run-level** (``single-leader-per-term``, ``lsn-monotonicity``, ``durability``): inside the ingestion
  task of the run (:func:`run_level_checks`), on the history and journals that task just parsed.
* **Linearizability, per run and key** (:func:`check_key`, each key with its own budget): in the
  ingestion task, or for a big run in a second task over the same history, so that one big run keeps
  two cores busy (:mod:`harness.analysis.ingest`). Checking key by key is exact: linearizability is
  P-compositional (each key is an independent object, Horn & Kroening 2015), which the checker itself
  exploits. :func:`merge_linearizability` folds the per-key verdicts back into the run's one verdict.

Which checkers judge a run: those ``test.json`` names, else those its workload declares (``test.json``'s
``workload``, asked through ``workloads.generator.workload_checkers``: the direct judge's list, which the
composition took from the workload too), else every one that applies (a run of no known workload).

A run is judged by these rules only, on Spark or in ``harness run``'s own process
(:mod:`harness.analysis.inprocess`: the same tasks): a checker the adapter declares not applicable
(``not_applicable`` in ``test.json``), or that the run shows cannot apply
(:func:`harness.judge.observed_not_applicable`), is not run, is listed with its reason under
``not_applicable`` in ``results.json`` and does not count towards the verdict; a checker named that
applies but finds nothing to judge is ``unknown``; a run with no verdict at all is ``unknown``.

Malformed input never yields ``true``: a checker whose input could not be read entirely is ``unknown``
naming the file and line, unless what could be read already shows an anomaly (``false`` stands, since
the evidence is real).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from checkers.history import History, JournalEvent, Operation
from checkers.leader import STATUS
from checkers.registry import CHECKERS, MODEL_NAMES, CheckInput, applicable, run_checker
from checkers.verdict import UNKNOWN, Valid, Verdict, worst
from harness.analysis.dataset import valid_text, valid_value
from harness.coverage import below_minimum
from harness.judge import observed_not_applicable
from workloads.generator import workload_checkers, workload_model

LINEARIZABLE = "linearizable"
# Checkers that read the journals when there are any, and so cannot pass on a partial set of them.
READS_JOURNALS = ("single-leader-per-term", "lsn-monotonicity", "durability")
# Checkers that can still judge the journals alone when the history is unreadable.
JOURNAL_ONLY = ("single-leader-per-term", "lsn-monotonicity")
# Models of workload names no workload class answers for (older runs' names); a registered workload's
# model is the one it declares (``workloads.generator.workload_model``).
WORKLOAD_MODELS = {"cas-register": "cas-register", "kv": "kv"}
# What the controller writes into results.json about the run itself (a simulated run: `sim`, its
# fingerprint for replay); re-analysis keeps it.
CONTROLLER_FIELDS = ("error", "teardown_errors", "stats", "sim", "coverage")
# Output columns of the per-key linearizability stage.
LIN_COLUMNS: dict[str, str] = {
    "test": "string",
    "run": "string",
    "key_json": "string",
    "first_id": "long",
    "valid": "string",
    "summary": "string",
    "counterexample_json": "string",
    "stats_json": "string",
}


@dataclass(frozen=True)
class RunParams:
    """The test parameters the analysis groups and checks by, read from ``test.json``."""

    mode: str | None = None
    workload: str | None = None
    nemesis: str | None = None
    bugs: str = "none"
    model: str | None = None
    model_inferred: bool = False
    final_after: int | None = None
    # The checkers test.json asks for, else those its workload declares; ``None``: every checker that applies.
    checkers: tuple[str, ...] | None = None
    command: str | None = None
    # Checker -> why the adapter says it cannot judge this system (test.json's ``not_applicable``).
    not_applicable: Mapping[str, str] = field(default_factory=dict)
    # What a queue system declares about delivery (test.json's ``delivery``; workloads.queue.Delivery).
    delivery: Mapping[str, Any] | None = None


def _name(value: Any) -> str | None:
    """A spec entry's name: the string itself, a dict's ``name``/``type``, or a list's names joined."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        inner = value.get("name") or value.get("type")
        return str(inner) if inner is not None else None
    if isinstance(value, list | tuple):
        names = [n for n in (_name(v) for v in value) if n]
        return "+".join(names) if names else "none"
    return str(value)


def infer_model(history: History | None) -> str | None:
    """The model the operations speak: queue, kv, cas-register or register (``None``: no operations)."""
    if history is None:
        return None
    fs = {op.f for op in history.ops if op.f != STATUS}
    if not fs:
        return None
    if fs & {"consume", "dequeue", "drain", "confirm"}:
        return "queue"
    if fs & {"append", "get"}:
        return "kv"
    if "cas" in fs:
        return "cas-register"
    return "register"


def run_params(spec: Mapping[str, Any], history: History | None) -> RunParams:
    """Test parameters from ``test.json``; the model is inferred from the operations if it names none."""
    db = spec.get("db") if isinstance(spec.get("db"), Mapping) else {}
    workload = spec.get("workload")
    bugs = spec.get("bugs", db.get("bugs"))
    bug_names = sorted(b for b in (bugs if isinstance(bugs, list | tuple) else [bugs]) if b) if bugs else []
    model = spec.get("model")
    if model is None and isinstance(workload, Mapping):
        model = workload.get("model")
    if model is None:
        model = workload_model(_name(workload)) or WORKLOAD_MODELS.get(_name(workload) or "")
    inferred = False
    if model not in MODEL_NAMES:
        model, inferred = infer_model(history), True
    final_after = spec.get("final_after_ns")
    checkers = spec.get("checkers")
    command = spec.get("command")
    declared = spec.get("not_applicable")
    delivery = spec.get("delivery")
    return RunParams(
        mode=_name(spec.get("mode", db.get("mode"))),
        workload=_name(workload),
        nemesis=_name(spec.get("nemesis")) or "none",
        bugs="+".join(str(b) for b in bug_names) or "none",
        model=model,
        model_inferred=inferred,
        final_after=final_after
        if isinstance(final_after, int) and not isinstance(final_after, bool)
        else None,
        checkers=tuple(str(c) for c in checkers) if isinstance(checkers, list | tuple)
        else workload_checkers(_name(workload)),
        command=command if isinstance(command, str) else None,
        not_applicable={str(k): str(v) for k, v in declared.items()} if isinstance(declared, Mapping) else {},
        delivery=dict(delivery) if isinstance(delivery, Mapping) else None,
    )


def run_checkers(params: RunParams) -> tuple[str, ...]:
    """The checkers that judge a run whatever it recorded: those ``test.json`` names or its workload
    declares (:func:`run_params`), else every registered checker (a run of no known workload)."""
    return params.checkers if params.checkers is not None else tuple(CHECKERS)


@dataclass
class RunChecks:
    """A run's verdicts so far, the checkers left for later stages (linearizability), and those not run
    because they cannot judge this system (checker -> why)."""

    verdicts: dict[str, Verdict] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    not_applicable: dict[str, str] = field(default_factory=dict)

    def rows(self, test: str, run: str) -> list[tuple[str, dict[str, Any]]]:
        return [(name, verdict_row(test, run, name, verdict)) for name, verdict in self.verdicts.items()]


def verdict_row(test: str, run: str, checker: str, verdict: Verdict) -> dict[str, Any]:
    return {
        "test": test,
        "run": run,
        "checker": checker,
        "valid": valid_text(verdict.valid),
        "summary": verdict.summary,
        "counterexample_json": _json(verdict.counterexample),
        "stats_json": _json(verdict.stats),
    }


def verdict_from_row(row: Mapping[str, Any]) -> Verdict:
    return Verdict(
        valid=valid_value(row["valid"]),
        summary=row["summary"] or "",
        counterexample=json.loads(row["counterexample_json"]) if row.get("counterexample_json") else None,
        stats=json.loads(row["stats_json"]) if row.get("stats_json") else {},
    )


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)


def distrust(verdict: Verdict, problems: Sequence[str]) -> Verdict:
    """A verdict reached on partial input: ``false`` stands, anything else becomes ``unknown``."""
    if verdict.valid is False or not problems:
        return verdict
    more = f" (and {len(problems) - 1} more unreadable files)" if len(problems) > 1 else ""
    return Verdict(
        UNKNOWN,
        f"cannot decide: {problems[0]}{more}; on the readable input: {verdict.summary}",
        counterexample=verdict.counterexample,
        stats={**verdict.stats, "input_errors": list(problems)},
    )


def run_level_checks(
    history: History | None,
    journals: Mapping[str, list[JournalEvent]] | None,
    params: RunParams,
    *,
    history_error: str | None = None,
    journal_errors: Sequence[str] = (),
    timeout_s: float | None = None,
    max_states: int | None = None,
) -> RunChecks:
    """Run the run's checkers but linearizability, which is left pending for the per-key stage.

    The checkers are those ``test.json`` names, else its workload's, else every one that applies, less
    those not applicable to the system (module docstring). A named checker that does not apply to this run, or
    does not exist, is ``unknown`` with the reason: never dropped.
    """
    checks = RunChecks()
    if history is None:
        reason = history_error or "history.jsonl could not be read"
        empty = History(source="history.jsonl", events=(), ops=(), nemesis=())
        for name in run_checkers(params):
            if name in params.not_applicable:
                checks.not_applicable[name] = params.not_applicable[name]
            elif name in JOURNAL_ONLY and journals:
                inp = CheckInput(history=empty, model=params.model or "register", journals=journals)
                checks.verdicts[name] = distrust(run_checker(name, inp), [reason, *journal_errors])
            else:
                checks.verdicts[name] = Verdict(UNKNOWN, f"{name} cannot check this run: {reason}")
        return checks
    inp = CheckInput(
        history=history,
        model=params.model or "register",
        journals=journals,
        timeout_s=timeout_s,
        max_states=max_states,
        final_after=params.final_after,
        delivery=params.delivery,
    )
    checks.not_applicable = {**observed_not_applicable(history, journals), **params.not_applicable}
    for name in params.checkers if params.checkers is not None else applicable(inp):
        if name in checks.not_applicable:
            continue
        checker = CHECKERS.get(name)
        if checker is None:
            checks.verdicts[name] = Verdict(
                UNKNOWN, f"no checker called {name!r}; known: {', '.join(CHECKERS)}"
            )
        elif name == LINEARIZABLE and params.model is None:
            checks.verdicts[name] = Verdict(
                UNKNOWN,
                "no model: test.json names none and the history has no client operations to infer one from",
            )
        elif not checker.applies(inp):
            checks.verdicts[name] = Verdict(
                UNKNOWN, f"{name} cannot judge this run (nothing it needs was recorded)"
            )
        elif name == LINEARIZABLE:
            checks.pending.append(name)
        else:
            verdict = run_checker(name, inp)
            if name in READS_JOURNALS and journal_errors:
                verdict = distrust(verdict, journal_errors)
            checks.verdicts[name] = verdict
    return checks


# --- linearizability per key, in Spark tasks --------------------------------------------------------


def check_key(
    test: str,
    run: str,
    key_json: str | None,
    ops: Iterable[Operation],
    model: str,
    *,
    timeout_s: float | None = None,
    max_states: int | None = None,
) -> dict[str, Any]:
    """Linearizability of one key of one run, through the registry, as a :data:`LIN_COLUMNS` row."""
    ordered = tuple(sorted(ops, key=lambda op: op.id))
    history = History(source=f"{test}/{run}/history.jsonl", events=(), ops=ordered, nemesis=())
    inp = CheckInput(history=history, model=model, timeout_s=timeout_s, max_states=max_states)
    verdict = run_checker(LINEARIZABLE, inp)
    return {
        "test": test,
        "run": run,
        "key_json": key_json,
        "first_id": ordered[0].id if ordered else -1,
        "valid": valid_text(verdict.valid),
        "summary": verdict.summary,
        "counterexample_json": _json(verdict.counterexample),
        "stats_json": _json(verdict.stats),
    }


def merge_linearizability(model: str, keys: Sequence[Mapping[str, Any]]) -> Verdict:
    """The run's linearizability verdict from its per-key rows (``false`` beats ``unknown`` beats
    ``true``); the reported key is the first in invoke order, as the checker itself would report it."""
    if not keys:
        empty = History(source="history.jsonl", events=(), ops=(), nemesis=())
        return run_checker(LINEARIZABLE, CheckInput(history=empty, model=model))
    ordered = sorted(keys, key=lambda row: row["first_id"])
    verdicts = [verdict_from_row(row) for row in ordered]
    stats: dict[str, Any] = {"ops": 0, "keys": len(ordered), "info_ops": 0, "states": 0, "time_s": 0.0}
    for verdict in verdicts:
        for name in ("ops", "info_ops", "states", "time_s"):
            value = verdict.stats.get(name)
            if isinstance(value, int | float):
                stats[name] += value
    stats["time_s"] = round(stats["time_s"], 6)
    stats["keys_invalid"] = sum(1 for v in verdicts if v.valid is False)
    stats["keys_unknown"] = sum(1 for v in verdicts if v.valid == UNKNOWN)
    stats["checked_as"] = "one Spark task per key (P-compositionality)"
    valid: Valid = worst(v.valid for v in verdicts)
    if valid is True:
        return Verdict(
            True,
            f"linearizable: {stats['ops']} operations on {len(ordered)} keys ({model} model)",
            stats=stats,
        )
    first = next(v for v in verdicts if v.valid == valid)
    count = stats["keys_invalid"] if valid is False else stats["keys_unknown"]
    more = (
        f" ({count} of {len(ordered)} keys {'not linearizable' if valid is False else 'undecided'})"
        if count > 1
        else ""
    )
    return Verdict(valid, first.summary + more, counterexample=first.counterexample, stats=stats)


def results_document(
    run_row: Mapping[str, Any],
    verdicts: Mapping[str, Verdict],
    input_errors: Sequence[Mapping[str, Any]],
    analysis: Mapping[str, Any],
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``results.json`` (FORMATS.md), checkers in registry order, plus the run's identity and figures.

    ``previous`` is the run's earlier ``results.json``: what the controller recorded there about the run
    itself (``error`` of a crashed or interrupted run, ``teardown_errors``, its ``stats`` of operations
    and faults) is kept, and a run cut short by an error is never ``true``.
    """
    ordered = {name: verdicts[name] for name in CHECKERS if name in verdicts}
    ordered.update({name: v for name, v in verdicts.items() if name not in ordered})
    valid = worst(v.valid for v in ordered.values()) if ordered else UNKNOWN
    carried = {name: previous[name] for name in CONTROLLER_FIELDS if previous and name in previous}
    if (input_errors or carried.get("error")) and valid is True:
        valid = UNKNOWN
    spec = json.loads(run_row["spec_json"]) if run_row.get("spec_json") else {}
    # How the run stopped short, as the ingestion task read it from test.json and the history (it has the
    # history's bytes, wherever the store is: harness.lifecycle.stop_of).
    stop = run_row.get("interrupted")
    if stop is not None and valid is True:
        valid = UNKNOWN  # a run cut short is never valid (harness.lifecycle)
    document: dict[str, Any] = {
        "valid": valid,
        "seed": spec.get("seed"),
        "test": spec.get("test") or run_row["test"],
        "run": run_row["run"],
        "ops": run_row.get("ops") or 0,
        "duration_s": run_row.get("duration_s"),
        "checkers": {name: verdict.to_json() for name, verdict in ordered.items()},
        "model": run_row.get("model"),
        "command": spec.get("command"),
        "performance": {
            name: run_row.get(name)
            for name in ("ok_ops", "nemesis_ops", "ops_per_s", "latency_p50_ms", "latency_p99_ms")
        },
        "analysis": dict(analysis),
    }
    if input_errors:
        document["input_errors"] = [dict(e) for e in input_errors]
    document.update(carried)
    below_minimum(document)  # a run judged under --min-coverage stays unknown on re-analysis
    if stop is not None:
        document["interrupted"] = dict(stop)
    if run_row.get("not_applicable"):
        document["not_applicable"] = dict(run_row["not_applicable"])
    if run_row.get("opportunities"):
        document["opportunities"] = dict(run_row["opportunities"])  # harness.opportunities
    return document
