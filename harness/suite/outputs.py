"""What a suite leaves behind: each case's outcome judged against its expectation (:class:`SuiteResult`),
``suite.json`` (the cases, their run directories and outcomes), ``junit.xml`` and ``summary.json``.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from checkers.verdict import UNKNOWN, Valid
from harness.analysis.dataset import SUITES_DIR
from harness.analysis.discovery import StoredRun
from harness.analysis.rates import Rate
from harness.opportunities import RESULTS_FIELD, entry_figures, run_text
from harness.store import RESULTS, TIMESTAMP_FORMAT, StoreError, read_json, replacing, stamped_directory
from harness.suite.file import Case, Suite
from harness.suite.runner import CaseRun

JUNIT = "junit.xml"


SUMMARY = "summary.json"


Verdict = tuple[Valid, dict[str, str], Sequence[str]]
"""What the analysis says of one stored run: its validity, checker -> summary for every checker that is
not valid, and the checkers among those that found an anomaly (the rest could not decide)."""


@dataclass
class CaseOutcome:
    """A case after the analysis: its verdict, whether it met its expectation, and the evidence."""

    case: Case
    run: CaseRun
    valid: Valid
    failed_checkers: dict[str, str] = field(default_factory=dict)
    """Checker (or ``harness``, for a crash) -> summary, for everything that is not valid."""
    invalid_checkers: tuple[str, ...] = ()
    """The checkers among them that found an anomaly; the others could not decide (unknown)."""

    @property
    def status(self) -> str:
        """``passed``, ``failed`` (invalid, or a missed known bug) or ``error`` (unknown, crashed)."""
        if self.case.expect == "invalid":
            return "passed" if self.valid is False else "failed"
        if self.valid is True:
            return "passed"
        return "failed" if self.valid is False else "error"


@dataclass
class SuiteResult:
    """A finished suite: where its record is, each case's outcome and the exit code for CI."""

    directory: Path
    outcomes: list[CaseOutcome]

    @property
    def exit_code(self) -> int:
        statuses = [o.status for o in self.outcomes]
        if "failed" in statuses:
            return 1
        if "error" in statuses:
            return 2
        return 0

    def counts(self) -> dict[str, int]:
        counts = {"runs": len(self.outcomes), "passed": 0, "failed": 0, "error": 0}
        for outcome in self.outcomes:
            counts[outcome.status] += 1
        counts["invalid"] = sum(1 for o in self.outcomes if o.valid is False)
        counts["unknown"] = sum(1 for o in self.outcomes if o.valid == UNKNOWN)
        counts["bugs_caught"] = sum(
            1 for o in self.outcomes if o.case.expect == "invalid" and o.valid is False
        )
        counts["bugs_missed"] = sum(
            1 for o in self.outcomes if o.case.expect == "invalid" and o.valid is not False
        )
        return counts

    def entries(self) -> list[dict[str, Any]]:
        """One row per matrix entry and DB label, in run order: a nightly's (bug, mode) pairs and controls.

        Each row has the entry's ``entry`` name, ``label`` (``raft bug-vote-twice``), ``workload``,
        ``nemesis`` and ``expect``; ``runs``; ``met``, the runs that met the expectation (a known bug
        caught, a control valid); ``valid``, ``invalid``, ``unknown`` (a crashed run is unknown); and
        ``rate``: ``met``/``runs`` with its 95% interval, the entry's ``target`` and whether it is
        ``below_target`` (``harness.analysis.rates.Rate``); and where its runs' ``results.json`` count
        them, ``opportunities``: how often the runs gave their known bug a chance
        (``harness.opportunities.entry_figures``: total, per-run min and max, the missed runs' counts).
        """
        rows: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
        chances: dict[tuple[str, str, str, str, str], list[tuple[Any, bool]]] = {}
        for outcome in self.outcomes:
            case = outcome.case
            nemesis = ",".join(case.nemesis) or "none"
            row = rows.setdefault(
                (case.group, case.label, case.workload, nemesis, case.expect),
                {"entry": case.group, "label": case.label, "workload": case.workload, "nemesis": nemesis,
                 "expect": case.expect, "runs": 0, "met": 0, "valid": 0, "invalid": 0, "unknown": 0,
                 "target": case.target},
            )
            row["runs"] += 1
            row["met"] += outcome.status == "passed"
            row["valid" if outcome.valid is True else "invalid" if outcome.valid is False else "unknown"] += 1
            key = (case.group, case.label, case.workload, nemesis, case.expect)
            chances.setdefault(key, []).append((_opportunities(outcome.run.run_dir), outcome.status == "passed"))
        for key, row in rows.items():
            row["rate"] = Rate(row["met"], row["runs"], row["target"]).to_json()
            figures = entry_figures(chances.get(key, []))
            if figures:
                row["opportunities"] = figures
        return list(rows.values())


def suite_directory(store: Path, name: str, started: datetime) -> Path:
    """``store/suites/<name>/<YYYYMMDDTHHMMSS>/``, made anew (``-2``, ``-3``... when that second is taken)."""
    return stamped_directory(Path(store) / SUITES_DIR / name, started)


def _relative(path: Path | None, store: Path) -> str | None:
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(store.resolve()))
    except ValueError:
        return str(path)


def _case_json(case: Case) -> dict[str, Any]:
    return {
        "name": case.name,
        "position": case.position,
        "group": case.group,
        "label": case.label,
        "db": case.db,
        "db_options": dict(case.db_options),
        "workload": case.workload,
        "nemesis": list(case.nemesis),
        "seed": case.seed,
        "repetition": case.repetition,
        "time_limit": case.time_limit,
        "options": dict(case.options),
        "expect": case.expect,
        "target": case.target,
    }


def suite_record(
    suite: Suite,
    started: datetime,
    store: Path,
    runs: Sequence[CaseRun | None],
    outcomes: Sequence[CaseOutcome] = (),
) -> dict[str, Any]:
    """``suite.json``: the suite, each case with its run directory (relative to the store), and outcomes."""
    by_index = {o.case.index: o for o in outcomes}
    entries = []
    for case, run in zip(suite.cases, runs, strict=False):
        entry: dict[str, Any] = {**_case_json(case), "path": _relative(run.run_dir, store) if run else None}
        if run is not None:
            entry.update(command=run.command, error=run.error, seconds=round(run.seconds, 3))
        outcome = by_index.get(case.index)
        if outcome is not None:
            entry.update(valid=outcome.valid, status=outcome.status, failed_checkers=outcome.failed_checkers,
                         invalid_checkers=list(outcome.invalid_checkers))
        entries.append(entry)
    return {
        "name": suite.name,
        "file": str(suite.path),
        "description": suite.description,
        "started": started.astimezone(UTC).strftime(TIMESTAMP_FORMAT),
        "cases": len(suite.cases),
        "shard": f"{suite.shard[0]}/{suite.shard[1]}" if suite.shard else None,
        "seed_base": suite.seed_base,
        "runs": entries,
    }


def judge(
    cases: Sequence[Case], runs: Sequence[CaseRun], verdicts: Mapping[Path, Verdict]
) -> list[CaseOutcome]:
    """Each case's outcome from the analysis verdicts by run directory (a crash is unknown).

    A run that crashed or was interrupted names its cause first, as ``harness``, ahead of what the
    checkers said about the little it recorded (a run that crashed before its first operation has no
    history, and "history.jsonl: no such file" is a consequence, not the cause)."""
    outcomes = []
    for case, run in zip(cases, runs, strict=True):
        found = verdicts.get(Path(run.run_dir).resolve()) if run.run_dir else None
        if found is None:
            reason = run.error or "the run left no stored directory"
            outcomes.append(CaseOutcome(case, run, UNKNOWN, {"harness": reason}))
            continue
        valid, failed, invalid = found
        if run.error:
            failed = {"harness": run.error, **{k: v for k, v in failed.items() if k != "harness"}}
            if valid is True:
                valid = UNKNOWN
        outcomes.append(CaseOutcome(case, run, valid, failed, tuple(invalid)))
    return outcomes


def stored_verdicts(stored: Sequence[StoredRun]) -> dict[Path, Verdict]:
    """Each run's :data:`Verdict` as its own ``results.json`` states it (the direct judge at the run's end,
    or the record of its interruption); a run without a readable one is left out (unknown)."""
    verdicts: dict[Path, Verdict] = {}
    for run in stored:
        try:
            results = read_json(run.path / RESULTS)
        except StoreError:
            continue
        checkers = results.get("checkers") if isinstance(results, dict) else None
        if not isinstance(checkers, dict):
            continue
        entries = {name: entry for name, entry in checkers.items() if isinstance(entry, dict)}
        failed = {name: str(entry.get("summary", "")) for name, entry in entries.items() if entry.get("valid") is not True}
        invalid = tuple(name for name, entry in entries.items() if entry.get("valid") is False)
        verdicts[run.path] = (results.get("valid", UNKNOWN), failed, invalid)
    return verdicts


def _xml_text(text: str) -> str:
    """Text safe for XML 1.0: characters it forbids (controls, lone surrogates) as \\xNN / \\uNNNN."""
    out = []
    for char in text:
        code = ord(char)
        if code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or code >= 0x10000:
            out.append(char)
        else:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return "".join(out)


def _failure_text(outcome: CaseOutcome, store: Path) -> str:
    lines = []
    if outcome.case.expect == "invalid" and outcome.valid is not False:
        what = outcome.case.label or "the expected anomaly"
        lines.append(f"missed a known bug: {what} was switched on, but no checker found an anomaly")
    for checker, summary in outcome.failed_checkers.items():
        lines.append(f"{checker}: {summary}")
    lines.append(f"reproduce: {outcome.run.command}")
    if outcome.run.run_dir is not None:
        lines.append(f"run: {_relative(outcome.run.run_dir, store)}")
    return "\n".join(lines)


def junit_document(
    suite: Suite, outcomes: Sequence[CaseOutcome], started: datetime, store: Path
) -> ElementTree.Element:
    """JUnit XML as Jenkins, GitLab and GitHub reporters read it: ``testsuites`` > ``testsuite`` >
    one ``testcase`` per run; ``failure`` for an anomaly or a missed bug, ``error`` for unknown or a
    crash, each carrying the checker summaries and the reproduce command."""
    failures = sum(1 for o in outcomes if o.status == "failed")
    errors = sum(1 for o in outcomes if o.status == "error")
    total_time = sum(o.run.seconds for o in outcomes)
    counts = {"tests": str(len(outcomes)), "failures": str(failures), "errors": str(errors)}
    root = ElementTree.Element("testsuites", {"name": suite.name, **counts, "time": f"{total_time:.3f}"})
    testsuite = ElementTree.SubElement(
        root,
        "testsuite",
        {
            "name": suite.name,
            **counts,
            "skipped": "0",
            "time": f"{total_time:.3f}",
            "timestamp": started.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
            "hostname": socket.gethostname() or "localhost",
        },
    )
    properties = ElementTree.SubElement(testsuite, "properties")
    ElementTree.SubElement(properties, "property", {"name": "suite_file", "value": str(suite.path)})
    for outcome in outcomes:
        case = outcome.case
        testcase = ElementTree.SubElement(
            testsuite,
            "testcase",
            {"classname": case.classname, "name": case.name, "time": f"{outcome.run.seconds:.3f}"},
        )
        status = outcome.status
        valid_word = {True: "valid", False: "invalid"}.get(outcome.valid, UNKNOWN)  # type: ignore[arg-type]
        if status == "failed":
            if case.expect == "invalid":
                message = f"missed known bug ({case.label or 'none named'}): the run was {valid_word}"
                kind = "missed-bug"
            else:
                message = f"invalid: {', '.join(outcome.invalid_checkers) or 'a checker'} found an anomaly"
                kind = "invalid"
            element = ElementTree.SubElement(
                testcase, "failure", {"message": _xml_text(message), "type": kind}
            )
            element.text = _xml_text(_failure_text(outcome, store))
        elif status == "error":
            kind = "crashed" if outcome.run.error else UNKNOWN
            reasons = "; ".join(f"{k}: {v}" for k, v in outcome.failed_checkers.items()) or "could not decide"
            element = ElementTree.SubElement(
                testcase, "error", {"message": _xml_text(f"{kind}: {reasons}"[:500]), "type": kind}
            )
            element.text = _xml_text(_failure_text(outcome, store))
        out = [f"verdict: {valid_word} (expected {case.expect})", f"reproduce: {outcome.run.command}"]
        if outcome.run.run_dir is not None:
            run_dir = _relative(outcome.run.run_dir, store)
            out += [f"run: {run_dir}", f"results: {run_dir}/results.json", f"report: {run_dir}/report.html"]
        if case.expect == "invalid" and outcome.valid is False:
            out.append(f"known bug caught by: {', '.join(outcome.invalid_checkers) or 'a checker'}")
        chances = run_text(_opportunities(outcome.run.run_dir))
        if chances:
            out.append(f"opportunities: {chances}")
        under = _under_exercised(outcome.run.run_dir)
        if under:
            out.append(f"{under}: valid, but under-exercised" if outcome.valid is True else under)
            ElementTree.SubElement(properties, "property", {"name": f"under-exercised {case.name}",
                                                            "value": _xml_text(under)})
        ElementTree.SubElement(testcase, "system-out").text = _xml_text("\n".join(out))
    return root


def _under_exercised(run_dir: Path | None) -> str | None:
    """``harness.coverage``'s sentence for a stored run that applied little of its fault schedule."""
    if run_dir is None:
        return None
    try:
        coverage = read_json(Path(run_dir) / RESULTS).get("coverage") or {}
    except (StoreError, AttributeError):
        return None
    text = coverage.get("under_exercised") if isinstance(coverage, dict) else None
    return text if isinstance(text, str) else None


def _opportunities(run_dir: Path | None) -> dict[str, Any] | None:
    """A stored run's ``opportunities`` (``harness.opportunities``), if its ``results.json`` has them."""
    if run_dir is None:
        return None
    try:
        found = read_json(Path(run_dir) / RESULTS).get(RESULTS_FIELD)
    except (StoreError, AttributeError):
        return None
    return found if isinstance(found, dict) else None


def write_junit(
    path: Path, suite: Suite, outcomes: Sequence[CaseOutcome], started: datetime, store: Path
) -> None:
    root = junit_document(suite, outcomes, started, store)
    ElementTree.indent(root)
    with replacing(path) as temporary:
        ElementTree.ElementTree(root).write(temporary, encoding="utf-8", xml_declaration=True)


def suite_summary(suite: Suite, result: SuiteResult, started: datetime) -> dict[str, Any]:
    """``summary.json``: the counts, one line per entry and label, and one line per run, for the suite's
    summary page and the index."""
    return {
        "name": suite.name,
        "started": started.astimezone(UTC).strftime(TIMESTAMP_FORMAT),
        "exit_code": result.exit_code,
        "counts": result.counts(),
        "entries": result.entries(),
        "runs": [
            {
                "name": o.case.name,
                "status": o.status,
                "valid": o.valid,
                "expect": o.case.expect,
                "path": o.run.run_dir and str(o.run.run_dir),
                "failed_checkers": o.failed_checkers,
                "invalid_checkers": list(o.invalid_checkers),
                "under_exercised": _under_exercised(o.run.run_dir),
                "opportunities": _opportunities(o.run.run_dir),
                "command": o.run.command,
            }
            for o in result.outcomes
        ],
    }
