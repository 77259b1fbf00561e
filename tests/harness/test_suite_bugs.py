"""The known-bugs suite as CI runs it: every known bug caught, every bug-free run valid.

``suites/bugs.toml`` is the harness's proof that it is not blind: each bug of
``cluster.core.bugs.KNOWN_BUGS`` once, in the election mode where it is most at home, under the faults
that expose it, plus one bug-free control per mode under the same faults. The fast tests here keep the
file honest as the cluster grows (a new bug or mode without an entry fails CI) and show that the checks
the container test makes can fail; the ``docker`` + ``spark`` test runs ``harness suite
suites/bugs.toml --jobs 2`` as a user would and reads what it wrote. Two cases at a time: a container
run's timing changes with company, and one CI run at ``--jobs 3`` missed ``vote-twice`` when it ran under
``partition`` (10 terms, no split vote). It runs under ``ring-storm`` now, for 30 s since a CI run of
2026-12-01 missed it once more in 20 s (docs/analysis.md); two at a time took 192-203 s where one at a
time took 291 s (2026-11-28, the same machine, one after the other).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from cluster.core.bugs import KNOWN_BUGS
from cluster.core.election import ELECTIONS
from harness.suite import Case, CaseRun, Suite, load_suite, run_suite


def mode(c: Case) -> str:
    return c.db_options.get("mode", "blazingmq")


def bugs(c: Case) -> tuple[str, ...]:
    return tuple(c.db_options.get("bug", ()))

ROOT = Path(__file__).resolve().parents[2]
BUGS_SUITE = ROOT / "suites" / "bugs.toml"
ALL_MODES_SUITE = ROOT / "suites" / "bugs-all-modes.toml"
SUITE_BUDGET_S = 8 * 60
"""What CI can spend on the bugs suite (the whole CI must stay under 20 minutes on a fresh 2-core machine)."""

# --- what the suite file must contain -------------------------------------------------------------------


def test_every_checker_a_known_bug_names_exists() -> None:
    from checkers.registry import CHECKERS
    from harness.sim.run import checker_for_bug

    assert {checker_for_bug("cluster", bug) for bug in KNOWN_BUGS} <= set(CHECKERS)


def test_the_bugs_suite_runs_every_known_bug_once_and_every_mode() -> None:
    suite = load_suite(BUGS_SUITE)  # every case composed by the controller, as `harness suite` does
    bug_runs = [c for c in suite.cases if c.expect == "invalid"]
    caught = sorted(bug for c in bug_runs for bug in bugs(c))
    assert all(len(bugs(c)) == 1 for c in bug_runs), "one bug per run, so a catch names its bug"
    missing = sorted(set(KNOWN_BUGS) - set(caught))
    assert not missing, f"suites/bugs.toml has no run for known bug(s) {missing}: add a [[matrix]] entry"
    assert caught == sorted(KNOWN_BUGS), "each known bug runs exactly once in suites/bugs.toml"
    controls = [c for c in suite.cases if c.expect == "valid"]
    assert all(not bugs(c) for c in controls)
    for each in ELECTIONS:
        assert any(mode(c) == each for c in bug_runs), f"no known bug runs in mode {each!r}: spread the bugs"
        mode_controls = [c for c in controls if mode(c) == each]
        assert len(mode_controls) == 1, f"mode {each!r} needs exactly one bug-free control in suites/bugs.toml"
        # The control runs under the faults of that mode's bug runs on its platform, so "valid" means the
        # faults alone do not make the checkers cry wolf.
        control = mode_controls[0]
        where = control.options.get("platform")
        faults = {n for c in bug_runs if mode(c) == each and c.options.get("platform") == where for n in c.nemesis}
        assert faults <= set(control.nemesis), (each, faults, control.nemesis)
    assert {mode(c) for c in suite.cases} <= set(ELECTIONS)


def test_the_bugs_suite_fits_its_ci_budget() -> None:
    """A container run costs its chaos time plus a measured overhead (containers, deploy, first leader,
    recovery and final reads, teardown, direct checks: about 12 s on a loaded 2-core machine); a simulated
    one a few seconds; the one Spark analysis at the end about a minute."""
    suite = load_suite(BUGS_SUITE)
    estimate = sum(
        5.0 if c.options.get("platform") == "sim" else c.time_limit + 12.0 for c in suite.cases
    ) + 60.0
    assert estimate <= SUITE_BUDGET_S, f"suites/bugs.toml needs about {estimate:.0f} s; CI gives it {SUITE_BUDGET_S}"


def test_the_nightly_bugs_suite_runs_every_bug_in_every_mode_it_applies_to() -> None:
    suite = load_suite(ALL_MODES_SUITE)
    bug_runs = Counter((mode(c), bugs(c)[0]) for c in suite.cases if c.expect == "invalid" and len(bugs(c)) == 1)
    wanted = {(each, bug) for bug, known in KNOWN_BUGS.items() for each in known.modes if each in ELECTIONS}
    assert not wanted - set(bug_runs), f"suites/bugs-all-modes.toml misses {sorted(wanted - set(bug_runs))}"
    # The detection target is measured: 8 of 10 fresh runs per pair, every control of a mode valid in 20.
    assert {pair: n for pair, n in bug_runs.items() if n < 10} == {}
    controls = Counter(mode(c) for c in suite.cases if c.expect == "valid" and not bugs(c))
    assert set(controls) == set(ELECTIONS) and min(controls.values()) >= 20
    # A mode's controls run under every fault package its bug runs use: a catch is never the faults alone.
    uncovered = {
        each: {n for c in suite.cases if c.expect == "invalid" and mode(c) == each for n in c.nemesis}
        - {n for c in suite.cases if c.expect == "valid" and mode(c) == each for n in c.nemesis}
        for each in ELECTIONS
    }
    assert {each: packages for each, packages in uncovered.items() if packages} == {}


# --- reading what a suite left behind --------------------------------------------------------------------


def suite_problems(directory: Path, suite: Suite, store: Path) -> list[str]:
    """Everything wrong with a finished bugs suite's record, one sentence each (empty: all as expected).

    Every case of the file ran and left a run directory; each known bug's run is invalid (some checker
    found an anomaly: the bug's own, ``KnownBug.caught_by``, or another that the same anomaly trips, e.g.
    linearizability for a message enqueued twice); each control is valid; no run crashed or failed its
    teardown; junit.xml has one passing test case per run.
    """
    problems: list[str] = []
    record = json.loads((directory / "suite.json").read_text(encoding="utf-8"))
    runs = record["runs"]
    if [r["name"] for r in runs] != [c.name for c in suite.cases]:
        problems.append(f"suite.json lists {len(runs)} runs, the file {len(suite.cases)}, or in another order")
    for entry in runs:
        name = entry["name"]
        if entry.get("status") != "passed":
            problems.append(f"{name}: status {entry.get('status')!r}, verdict {entry.get('valid')!r}")
        if entry.get("error"):
            problems.append(f"{name}: the run crashed: {entry['error']}")
        if entry.get("path") is None:
            problems.append(f"{name}: no run directory")
            continue
        results = json.loads((store / entry["path"] / "results.json").read_text(encoding="utf-8"))
        failed = sorted(n for n, v in results["checkers"].items() if v["valid"] is False)
        if entry["expect"] == "invalid":
            bug = entry["db_options"]["bug"][0]
            if results["valid"] is not False or not failed:
                problems.append(f"{name}: {bug} not caught: the run is {results['valid']} (failed: {failed})")
        elif results["valid"] is not True:
            problems.append(f"{name}: a bug-free control is {results['valid']} (failed: {failed})")
        if results.get("teardown_errors"):
            problems.append(f"{name}: teardown failed: {results['teardown_errors']}")
    root = ElementTree.parse(directory / "junit.xml").getroot()
    cases = root.findall("./testsuite/testcase")
    if len(cases) != len(suite.cases):
        problems.append(f"junit.xml has {len(cases)} test cases for {len(suite.cases)} runs")
    for case in cases:
        for bad in ("failure", "error", "skipped"):
            if case.find(bad) is not None:
                problems.append(f"junit.xml: {case.get('name')}: {bad}")
    return problems


def _fake_suite(tmp_path: Path, verdicts: Mapping[int, tuple[Any, dict[str, str]]]) -> tuple[Suite, Any]:
    """A two-case bugs suite (stale-read expected invalid, a control expected valid) run with fake runs
    whose stored results carry ``verdicts``."""
    cases = (
        Case(0, "cluster", {"mode": "raft", "bug": ["stale-read"]}, "raft bug-stale-read", "register",
             ("partition",), 1, 1, 10.0, expect="invalid", group="bugs"),
        Case(1, "cluster", {"mode": "raft"}, "raft", "register", ("partition",), 1, 1, 10.0, expect="valid",
             group="bugs"),
    )
    suite = Suite(name="bugs", path=BUGS_SUITE, cases=cases, store=str(tmp_path / "store"))

    def fake_run(case: Case, store: str) -> CaseRun:
        run_dir = Path(store) / f"t{case.index}" / "20261122T020000"
        run_dir.mkdir(parents=True)
        (run_dir / "test.json").write_text("{}", encoding="utf-8")
        valid, failed = verdicts[case.index]
        checkers = {name: {"valid": name not in failed, "summary": s} for name, s in failed.items()}
        checkers.setdefault("linearizable", {"valid": True, "summary": "linearizable"})
        (run_dir / "results.json").write_text(json.dumps({"valid": valid, "checkers": checkers}), encoding="utf-8")
        return CaseRun(run_dir, f"harness run --seed {case.seed}", seconds=1.0)

    def fake_analyse(selection):  # noqa: ANN001, ANN202
        return {r.path: (*verdicts[int(r.test[1:])], tuple(verdicts[int(r.test[1:])][1])) for r in selection.runs}

    started = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)
    return suite, run_suite(suite, analyse=fake_analyse, run=fake_run, clock=lambda: started)


def test_a_bugs_suite_whose_bug_goes_unnoticed_exits_1_and_is_reported(tmp_path: Path) -> None:
    suite, result = _fake_suite(tmp_path, {0: (True, {}), 1: (True, {})})
    assert result.exit_code == 1
    problems = suite_problems(result.directory, suite, tmp_path / "store")
    assert any("stale-read not caught: the run is True" in p for p in problems), problems
    assert any("junit.xml" in p and "failure" in p for p in problems), problems


def test_a_bug_run_that_is_unknown_is_not_a_catch(tmp_path: Path) -> None:
    suite, result = _fake_suite(tmp_path, {0: ("unknown", {}), 1: (True, {})})
    assert result.exit_code == 1  # unknown is not caught
    problems = suite_problems(result.directory, suite, tmp_path / "store")
    assert any("stale-read not caught: the run is unknown" in p for p in problems), problems


def test_a_control_with_an_anomaly_exits_1_and_is_reported(tmp_path: Path) -> None:
    suite, result = _fake_suite(
        tmp_path, {0: (False, {"linearizable": "stale"}), 1: (False, {"durability": "1 lost"})}
    )
    assert result.exit_code == 1
    problems = suite_problems(result.directory, suite, tmp_path / "store")
    assert any("bug-free control is False" in p for p in problems), problems


def test_a_bugs_suite_as_expected_has_no_problems(tmp_path: Path) -> None:
    suite, result = _fake_suite(tmp_path, {0: (False, {"linearizable": "stale read"}), 1: (True, {})})
    assert result.exit_code == 0
    assert suite_problems(result.directory, suite, tmp_path / "store") == []


# --- the real thing -----------------------------------------------------------------------------------------


def _harness_command() -> list[str]:
    """The ``harness`` console script of this interpreter's environment, as a user runs it."""
    script = Path(sys.executable).with_name("harness")
    if script.is_file():
        return [str(script)]
    found = shutil.which("harness")
    assert found, "no `harness` command: install the project (scripts/setup.sh) before running this test"
    return [found]


@pytest.mark.docker
@pytest.mark.spark
def test_harness_suite_bugs_catches_every_known_bug_on_containers(tmp_path: Path) -> None:
    store = tmp_path / "store"
    junit = tmp_path / "junit.xml"
    started = time.monotonic()
    completed = subprocess.run(
        [*_harness_command(), "suite", str(BUGS_SUITE), "--store", str(store), "--junit", str(junit), "--quiet",
         "--jobs", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=2 * SUITE_BUDGET_S,
        check=False,
    )
    seconds = time.monotonic() - started
    output = (completed.stdout + completed.stderr)[-6000:]
    directories = sorted((store / "suites" / "bugs").glob("*"))
    assert directories, f"harness suite left no suite directory (exit {completed.returncode}):\n{output}"
    suite = load_suite(BUGS_SUITE)
    problems = suite_problems(directories[-1], suite, store)
    assert completed.returncode == 0 and not problems, (
        f"exit {completed.returncode} after {seconds:.0f} s; " + "; ".join(problems) + f"\n{output}"
    )
    assert junit.read_bytes() == (directories[-1] / "junit.xml").read_bytes()
