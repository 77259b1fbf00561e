"""Judging a stored run: the checkers that apply, the ones that cannot, and ``results.json``.

A checker is *not applicable* when the system under test cannot give it anything to judge: the adapter
says so (``harness.db.not_applicable``: no LSNs, no terms), or the run shows it (every status
observation carried ``term: null``: the system has no terms). A not-applicable checker is listed with
its reason under ``not_applicable`` in ``results.json`` and does not count towards the verdict. A checker
that applies but finds nothing to judge in this run (no final reads because the run stopped early) is
``unknown`` with its reason, as before: that is an observation missing, not a property absent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from checkers.history import History, HistoryError
from checkers.judge import Budgets, default_workers, judge_files
from checkers.leader import STATUS
from checkers.verdict import UNKNOWN, Valid, Verdict, combine
from harness import store
from harness.coverage import judge_coverage
from harness.lifecycle import Stop, blame_the_stop, final_after_for

SINGLE_LEADER = "single-leader-per-term"


def observed_not_applicable(history: History, journals: Mapping[str, Any] | None) -> dict[str, str]:
    """What the run itself shows cannot be judged: terms, when every status observation said ``null``
    (top-level and in each of its ``groups``: a system with terms per queue only still has terms)."""
    found: dict[str, str] = {}
    if not journals:
        terms = []
        for op in history.ops:
            if op.f == STATUS and op.type == "ok" and isinstance(op.output, Mapping):
                terms.append(op.output.get("term"))
                groups = op.output.get("groups")
                if isinstance(groups, list):
                    terms += [entry.get("term") for entry in groups if isinstance(entry, Mapping)]
        if terms and all(term is None for term in terms):
            found[SINGLE_LEADER] = "the system reports no election terms (every status had term null)"
    return found


def judge_run(
    run_dir: store.RunDir,
    *,
    test: str,
    seed: int,
    model: str,
    checkers: Sequence[str],
    not_applicable: Mapping[str, str] = {},  # noqa: B006 - read only
    delivery: Mapping[str, Any] | None = None,
    timeout_s: float | None = None,
    duration_s: float = 0.0,
    error: str | None = None,
    teardown_errors: Sequence[str] = (),
    stats: Mapping[str, Any] | None = None,
    analysed_by: str = "harness (checkers called directly)",
    extra: Mapping[str, Any] | None = None,
    stop: Stop | None = None,
    min_coverage: float | None = None,
) -> dict[str, Any]:
    """Judge the stored run in ``run_dir`` and write its ``results.json`` (FORMATS.md); return it.

    A run cut short (``error``) is never valid: at best unknown. A run with no checker that applies is
    unknown: nothing was judged. A run that ``stop`` says ended before its final phase takes no read for
    a final one, and the checkers that need a final phase say that it stopped (``harness.lifecycle``).
    """
    verdicts: dict[str, Verdict] = {}
    skipped: dict[str, str] = {}
    ops = 0
    try:  # streamed, per key, journals compacted: checkers.judge keeps a long run's check within ~1 GB
        judgement = judge_files(
            run_dir.history, model=model, checkers=list(checkers), missing="unknown",
            final_after=final_after_for(stop), delivery=delivery,
            journals=run_dir.nodes if any(run_dir.nodes.glob("*/journal.jsonl")) else None,
            skip=lambda history, journals: {**observed_not_applicable(history, journals), **not_applicable},
            budgets=Budgets(timeout_s=timeout_s, workers=default_workers()))
        verdicts, skipped, ops = dict(judgement.verdicts), dict(judgement.skipped), judgement.ops
    except HistoryError as exc:
        for name in checkers:
            if name in not_applicable:
                skipped[name] = not_applicable[name]
            else:
                verdicts[name] = Verdict(UNKNOWN, f"{name} could not read the run: {exc}")
    verdicts = blame_the_stop(verdicts, stop)
    valid: Valid = combine(verdicts) if verdicts else UNKNOWN
    if error is not None and valid is True:
        valid = UNKNOWN  # a run cut short cannot be called valid
    results: dict[str, Any] = {
        "valid": valid,
        "seed": seed,
        "test": test,
        "ops": ops,
        "duration_s": round(duration_s, 3),
        "checkers": {name: verdict.to_json() for name, verdict in verdicts.items()},
        "analysed_by": analysed_by,
    }
    if skipped:
        results["not_applicable"] = dict(skipped)
    if error is not None:
        results["error"] = error
    if stop is not None:
        results["interrupted"] = stop.to_json()
    if teardown_errors:
        results["teardown_errors"] = list(teardown_errors)
    if stats is not None:
        results["stats"] = dict(stats)
    if extra:
        results.update(extra)  # a simulated run's duration is in simulated seconds
    judge_coverage(results, min_coverage)
    store.write_json(run_dir.results, results)
    return results
