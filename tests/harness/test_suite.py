"""Suites: parsing and expanding suite files, judging runs against expectations, JUnit XML that CI reads.

The fast tests use a fixed vocabulary and fake runs (no containers, no Spark). The JUnit output is
checked three ways: against an XML schema of what Jenkins and GitLab accept (``junit_ci.xsd``), by
``junitparser`` (the parser many CI tools and reporters use) and by walking it as GitLab does (status
from the failure/error child). One ``spark`` test runs a whole suite over synthetic stored runs through
the real analysis pipeline.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from xml.etree import ElementTree

import pytest
import xmlschema
from junitparser import Error, Failure, JUnitXml

from checkers.verdict import UNKNOWN
from harness.analysis.cli import main as analysis_main
from harness.analysis.progress import SilentProgress
from harness.db.plugin import DBPlugin, Option, load_plugin
from harness.suite import (
    Case,
    CaseOutcome,
    CaseRun,
    Suite,
    SuiteError,
    SuiteResult,
    Vocabulary,
    controller_vocabulary,
    judge,
    junit_document,
    load_suite,
    parse_suite,
    run_suite,
    select_cases,
    suite_record,
)

pytest_plugins = ("tests.harness.spark_fixtures",)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = xmlschema.XMLSchema(str(Path(__file__).with_name("junit_ci.xsd")))
def _only_in_blazingmq(options: dict) -> None:
    if "skip-leader-sync" in options["bug"] and options["mode"] != "blazingmq":
        raise ValueError(f"bug 'skip-leader-sync' applies only to mode blazingmq, not to mode {options['mode']!r}")


FAKE = DBPlugin(
    name="fake",
    summary="a DB with cluster-like options, for suite parsing",
    create=lambda options, context: None,  # type: ignore[arg-type,return-value]
    options=(
        Option("mode", "election mode", default="blazingmq", choices=("blazingmq", "raft"), flag="--mode"),
        Option("bug", "known bug", repeatable=True, choices=("stale-read", "skip-leader-sync"), flag="--bug"),
        Option("core", "node settings", type="settings", flag="--core"),
    ),
    validate=_only_in_blazingmq,
    name_parts=lambda o: [o["mode"], *([f"bug-{'+'.join(o['bug'])}"] if o["bug"] else [])],
)
VOCABULARY = Vocabulary(
    workloads=("register", "queue"),
    nemeses=("partition", "kill", "clock"),
    plugins=lambda name: FAKE if name == "fake" else load_plugin(name),
)
STARTED = datetime(2026, 11, 22, 2, 0, 0, tzinfo=UTC)


def parse(text: str, seed: int = 0, db: str = "fake") -> Suite:
    """Parse a suite file's text whose runs test ``db`` (the fake plugin unless a test says otherwise)."""
    text = text.replace("[suite]", f"[suite]\ndb = {db!r}", 1) if "[suite]\n" in text else f"[suite]\ndb = {db!r}\n{text}"
    return parse_suite(text, Path("s.toml"), VOCABULARY, random.Random(seed))


def mode(c: Case) -> str:
    return c.db_options.get("mode", "blazingmq")


def bugs(c: Case) -> tuple[str, ...]:
    return tuple(c.db_options.get("bug", ()))


# --- parsing and expansion -------------------------------------------------------------------------


def test_matrix_expands_to_every_combination_in_order() -> None:
    suite = parse(
        """
        [suite]
        name = "n"
        time_limit = 15
        seeds = [1, 2]
        repetitions = 2
        concurrency = 3

        [[matrix]]
        modes = ["blazingmq", "raft"]
        workloads = ["register"]
        nemeses = ["partition", "kill,partition", "none"]
        """
    )
    assert len(suite.cases) == 2 * 1 * 3 * 2 * 2
    first = suite.cases[0]
    assert (mode(first), first.workload, first.nemesis, bugs(first), first.seed, first.repetition) == (
        "blazingmq", "register", ("partition",), (), 1, 1,
    )
    assert suite.cases[1].repetition == 2 and suite.cases[2].seed == 2
    # packages are put in the vocabulary's order, so "kill,partition" is the same run as "partition,kill"
    assert suite.cases[4].nemesis == ("partition", "kill")
    assert suite.cases[8].nemesis == ()
    assert {c.time_limit for c in suite.cases} == {15.0}
    assert all(c.options == {"concurrency": 3} for c in suite.cases)
    assert len({c.name for c in suite.cases}) == len(suite.cases)


def test_all_modes_with_a_bug_means_the_modes_it_applies_to() -> None:
    suite = parse(
        """
        [[matrix]]
        modes = "all"
        workloads = ["register"]
        bugs = ["skip-leader-sync"]
        """
    )
    assert [mode(c) for c in suite.cases] == ["blazingmq"]


def test_all_expands_to_the_vocabulary_and_skips_bugs_outside_their_modes() -> None:
    suite = parse(
        """
        [[matrix]]
        modes = "all"
        workloads = ["register"]
        nemeses = "all"
        bugs = "all"
        seeds = [5]
        expect = "invalid"
        """
    )
    combos = {(mode(c), c.nemesis, bugs(c)) for c in suite.cases}
    assert ("raft", ("kill",), ("skip-leader-sync",)) not in combos  # blazingmq-only bug
    assert ("blazingmq", ("kill",), ("skip-leader-sync",)) in combos
    assert len(suite.cases) == 3 * (2 + 1)  # 3 nemeses x (stale-read in 2 modes + skip-leader-sync in 1)
    assert {c.expect for c in suite.cases} == {"invalid"}


def test_seed_count_draws_that_many_seeds_once_for_the_whole_suite() -> None:
    text = """
        [suite]
        seeds = 3
        [[matrix]]
        modes = ["raft"]
        workloads = ["register"]
        [[matrix]]
        modes = ["raft"]
        workloads = ["queue"]
        """
    suite = parse(text, seed=11)
    seeds = [c.seed for c in suite.cases]
    assert seeds[:3] == seeds[3:] and len(set(seeds[:3])) == 3
    assert [c.seed for c in parse(text, seed=11).cases] == seeds  # drawn from the RNG passed in


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[suite]\nnmae = 'x'\n[[matrix]]\nmodes=['raft']\nworkloads=['register']", "unknown key 'nmae'"),
        ("[[matrix]]\nmodes=['raft']\nworkloads=['register']\nnemesis=['kill']", "unknown key 'nemesis'"),
        ("[[matrix]]\nmodes=['rafty']\nworkloads=['register']", "modes: option mode: unknown value 'rafty'"),
        ("[[matrix]]\ncolours=['red']\nworkloads=['register']", "unknown key 'colours'"),
        ("[[matrix]]\nmodes=['raft']\nworkloads=['register']\nnemeses=['kill,flood']", "unknown nemesis 'flood'"),
        ("[[matrix]]\nmodes=['raft']\nworkloads=['register']\nbugs=['skip-leader-sync']", "applies only to mode"),
        ("[[matrix]]\nmodes=['raft']\nworkloads=['register']\nexpect='broken'", "expect must be one of"),
        ("[suite]\ntime_limit = -3\n[[matrix]]\nmodes=['raft']\nworkloads=['register']", "must be positive"),
        ("[suite]\nnodes = 'five'\n[[matrix]]\nmodes=['raft']\nworkloads=['register']", "must be a whole number"),
        ("[suite]\nseeds = [1, 'x']\n[[matrix]]\nmodes=['raft']\nworkloads=['register']", "seeds must be"),
        ("[[matrix]]\nmodes=['raft']", "workloads is missing"),
        ("[suite]\nname='x'", "no [[matrix]] table"),
        ("[suite\nname='x'", "not valid TOML"),
        ("[[matrix]]\nmodes=['raft']\nworkloads=['register']\ncore=['scouting']", "option core: must be a table"),
        (
            "[[matrix]]\nmodes=['raft']\nworkloads=['register']\n[[matrix]]\nmodes=['raft']\nworkloads=['register']",
            "appears twice",
        ),
    ],
)
def test_a_bad_suite_file_is_one_sentence_naming_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(SuiteError) as caught:
        parse(text)
    text_of_error = str(caught.value)
    assert message in text_of_error
    assert text_of_error.startswith("s.toml") and "\n" not in text_of_error


def test_shipped_suites_parse_and_compose_with_the_controller() -> None:
    vocabulary = controller_vocabulary()
    cluster = load_plugin("cluster")
    nightly = load_suite(ROOT / "suites" / "nightly.toml", rng=random.Random(1))
    suite = load_suite(ROOT / "suites" / "bugs.toml")
    # nightly: every nemesis package against every mode and workload, no bugs, all expected valid
    for each in cluster.option("mode").choices:
        for nemesis in vocabulary.nemeses:
            if nemesis in ("leader-clock",):
                continue
            assert any(mode(c) == each and c.nemesis == (nemesis,) for c in nightly.cases), (each, nemesis)
    assert all(bugs(c) == () and c.expect == "valid" for c in nightly.cases)
    # bugs: each known bug at least once, expected invalid; bug-free controls expected valid
    caught = {b for c in suite.cases if c.expect == "invalid" for b in bugs(c)}
    assert caught == set(cluster.option("bug").choices)
    assert all(c.expect == "invalid" for c in suite.cases if bugs(c))
    assert any(c.expect == "valid" and not bugs(c) for c in suite.cases)


def test_a_case_the_controller_refuses_fails_the_whole_file_before_any_run(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text("[suite]\ndb = 'fake'\n[[matrix]]\nmodes=['raft']\nworkloads=['register']\n", encoding="utf-8")

    def refuse(case: Case, store: str) -> None:
        raise ValueError("the clock nemesis needs libfaketime")

    with pytest.raises(SuiteError, match="cannot be composed: the clock nemesis needs libfaketime"):
        load_suite(path, vocabulary=VOCABULARY, compose=refuse)


def test_the_cli_answers_a_bad_suite_file_with_one_line_and_254(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[suite]\ncolour = 'red'\n", encoding="utf-8")
    assert analysis_main(["suite", str(path)]) == 254
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown key 'colour'" in err


def test_the_cli_refuses_a_missing_suite_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert analysis_main(["suite", str(tmp_path / "none.toml")]) == 254
    assert "no such suite file" in capsys.readouterr().err


@pytest.mark.parametrize(("jobs", "message"), [("0", "must be at least 1"), ("17", "at most 16"), ("x", "not a whole number")])
def test_the_cli_refuses_jobs_it_cannot_run(jobs: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert analysis_main(["suite", str(ROOT / "suites" / "bugs.toml"), "--jobs", jobs]) == 254
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_only_keeps_the_runs_whose_name_or_entry_matches_and_numbers_them_again() -> None:
    suite = load_suite(ROOT / "suites" / "bugs-all-modes.toml", rng=random.Random(1))
    aeron = select_cases(suite, ["aeron bug-vote-twice"])
    assert aeron.cases and all(mode(c) == "aeron" and bugs(c) == ("vote-twice",) for c in aeron.cases)
    assert [c.index for c in aeron.cases] == list(range(len(aeron.cases)))
    expected = [c for c in suite.cases if mode(c) == "aeron" and bugs(c) == ("vote-twice",)]
    assert [c.name for c in aeron.cases] == [c.name for c in expected]
    either = select_cases(suite, ["bugs-all.control-queue", "bugs-all.no-dedup"])
    assert {c.group for c in either.cases} == {"bugs-all.control-queue", "bugs-all.no-dedup"}
    assert select_cases(suite, []) is suite
    with pytest.raises(SuiteError, match="no run matches --only 'zebra'"):
        select_cases(suite, ["zebra"])


def test_the_cli_lists_only_the_selected_runs_and_refuses_a_selection_of_none(capsys: pytest.CaptureFixture[str]) -> None:
    bugs_file = str(ROOT / "suites" / "bugs.toml")
    assert analysis_main(["suite", bugs_file, "--list", "--only", "bug-vote-twice", "--only", "bugs.control"]) == 0
    listed = capsys.readouterr().out.rstrip().splitlines()
    whole = load_suite(bugs_file)
    chosen = [c for c in whole.cases if bugs(c) == ("vote-twice",) or c.group == "bugs.control"]
    assert len(chosen) >= 2 and [line.split("  ")[2] for line in listed] == [c.name for c in chosen]
    assert listed[0].startswith("   1  cluster blazingmq bug-vote-twice register nemesis=ring-storm seed=111")
    assert analysis_main(["suite", bugs_file, "--only", "zebra"]) == 254
    err = capsys.readouterr().err.strip()
    assert "no run matches --only 'zebra'" in err and "\n" not in err


# --- judging and exit codes -----------------------------------------------------------------------


def case(index: int, expect: str = "valid", bugs: tuple[str, ...] = ()) -> Case:
    label = "raft" + (f" bug-{'+'.join(bugs)}" if bugs else "")
    return Case(index, "fake", {"mode": "raft", "bug": list(bugs)}, label, "register", ("partition",), seed=index,
                repetition=1, time_limit=10.0, expect=expect, group="t")


def outcome(c: Case, valid: object, failed: dict[str, str] | None = None, error: str | None = None,
            invalid: tuple[str, ...] | None = None) -> CaseOutcome:
    """An outcome; ``invalid`` (the checkers that found an anomaly) defaults to every failed checker of an
    invalid run."""
    run = CaseRun(run_dir=None if error else Path(f"/s/t/{c.index}"), command=f"harness run --seed {c.seed}",
                  error=error, seconds=1.5)
    if invalid is None:
        invalid = tuple(failed or {}) if valid is False else ()
    return CaseOutcome(c, run, valid, failed or {}, invalid)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("statuses", "code"),
    [
        ([("valid", True)], 0),
        ([("invalid", False)], 0),  # a known bug caught
        ([("valid", True), ("valid", UNKNOWN)], 2),
        ([("valid", False), ("valid", UNKNOWN)], 1),
        ([("invalid", True)], 1),  # a known bug missed
        ([("invalid", UNKNOWN)], 1),  # undecided is not caught
    ],
)
def test_exit_code_follows_verdicts_and_expectations(statuses: list[tuple[str, object]], code: int) -> None:
    outcomes = [outcome(case(i, expect), valid) for i, (expect, valid) in enumerate(statuses)]
    assert SuiteResult(Path("/s"), outcomes).exit_code == code


def test_entries_count_per_entry_and_label_how_many_runs_met_the_expectation() -> None:
    bug = [case(i, "invalid", ("stale-read",)) for i in range(3)]
    control = [case(i) for i in range(3, 6)]
    outcomes = [outcome(bug[0], False), outcome(bug[1], True), outcome(bug[2], UNKNOWN),
                outcome(control[0], True), outcome(control[1], True), outcome(control[2], UNKNOWN, error="gone")]
    result = SuiteResult(Path("/s"), outcomes)
    rows = result.entries()
    assert [(r["label"], r["expect"], r["runs"], r["met"], r["valid"], r["invalid"], r["unknown"]) for r in rows] == [
        ("raft bug-stale-read", "invalid", 3, 1, 1, 1, 1),  # caught once, missed once, undecided once
        ("raft", "valid", 3, 2, 2, 0, 1),  # a crashed control is not a valid one
    ]
    assert rows[0]["entry"] == "t" and rows[0]["nemesis"] == "partition" and rows[0]["workload"] == "register"
    from io import StringIO

    from rich.console import Console

    from harness.analysis.cli import print_suite

    out = StringIO()
    print_suite(result, Console(file=out, width=400))
    lines = out.getvalue().splitlines()
    cells = [[cell.strip() for cell in line.split("│")] for line in lines]
    assert ["t", "raft bug-stale-read", "register", "partition", "invalid", "1/3 (6-79%)", "1", "1"] in cells
    assert ["t", "raft", "register", "partition", "valid", "2/3 (21-94%)", "0", "1"] in cells


def test_a_target_is_read_per_entry_and_flags_an_entry_below_it() -> None:
    """``target`` in [suite] is every entry's; a [[matrix]] table's overrides it; each row's rate carries
    its 95% interval and says when the share of runs that met the expectation is below the target."""
    suite = parse(
        """
        [suite]
        target = 0.9

        [[matrix]]
        modes = ["raft"]
        bugs = ["stale-read"]
        workloads = ["register"]
        nemeses = ["partition"]
        seeds = [1, 2, 3, 4, 5]
        expect = "invalid"
        target = 0.8

        [[matrix]]
        modes = ["raft"]
        workloads = ["register"]
        nemeses = ["partition"]
        seeds = [1, 2]
        """
    )
    assert sorted({c.target for c in suite.cases}) == [0.8, 0.9]
    bug = [c for c in suite.cases if c.expect == "invalid"]
    control = [c for c in suite.cases if c.expect == "valid"]
    result = SuiteResult(Path("/s"), [*(outcome(c, False) for c in bug[:4]), outcome(bug[4], True),
                                      *(outcome(c, True) for c in control)])
    rows = {row["expect"]: row for row in result.entries()}
    assert rows["invalid"]["rate"] == {"met": 4, "runs": 5, "low": 0.3755, "high": 0.9638, "target": 0.8,
                                       "below_target": False}
    assert rows["valid"]["rate"]["target"] == 0.9 and not rows["valid"]["rate"]["below_target"]
    missed = SuiteResult(Path("/s"), [*(outcome(c, False) for c in bug[:3]), *(outcome(c, True) for c in bug[3:])])
    (row,) = missed.entries()
    assert row["rate"]["below_target"] and (row["met"], row["runs"]) == (3, 5)
    assert suite_record(suite, STARTED, Path("/s"), [None] * len(suite.cases))["runs"][0]["target"] == 0.8
    for bad in ("0", "1.5", '"high"', "true"):
        with pytest.raises(SuiteError, match=r"\[\[matrix\]\] #1.*target must be a share of runs in \(0, 1\]"):
            parse(f"[[matrix]]\nworkloads = ['register']\ntarget = {bad}")
    with pytest.raises(SuiteError, match=r"\[suite\]: target must be a share"):
        parse("[suite]\ntarget = 2\n[[matrix]]\nworkloads = ['register']")


def test_a_run_that_crashed_or_left_nothing_is_unknown() -> None:
    cases = [case(0), case(1)]
    runs = [CaseRun(None, "harness run --seed 0", error="RuntimeError: engine gone"),
            CaseRun(Path("/s/t/1"), "harness run --seed 1", error="interrupted (Ctrl-C)")]
    outcomes = judge(cases, runs, {Path("/s/t/1").resolve(): (True, {}, ())})
    assert [o.valid for o in outcomes] == [UNKNOWN, UNKNOWN]  # a run cut short is never valid
    assert outcomes[0].failed_checkers == {"harness": "RuntimeError: engine gone"}


def test_a_crashed_run_shows_its_cause_not_the_missing_history(tmp_path: Path) -> None:
    """A run that crashed before its first operation is stored without a history; the analysis can only
    say "history.jsonl: no such file". The console and JUnit name the crash first."""
    from io import StringIO

    from rich.console import Console

    from harness.analysis.cli import print_suite

    cause = "PlatformError: cannot create the network chaos-1a2b-net (pool overlaps)"
    missing = "linearizable cannot check this run: history.jsonl: no such file"
    c = case(0)
    runs = [CaseRun(Path("/s/t/0"), "harness run --seed 0", error=cause)]
    outcomes = judge([c], runs, {Path("/s/t/0").resolve(): (UNKNOWN, {"linearizable": missing}, ())})
    assert list(outcomes[0].failed_checkers.items()) == [("harness", cause), ("linearizable", missing)]
    error = ElementTree.fromstring(junit_text(outcomes).encode("utf-8")).find("./testsuite/testcase/error")
    assert error is not None and error.get("type") == "crashed"
    assert error.get("message", "").startswith(f"crashed: harness: {cause}")
    assert (error.text or "").startswith(f"harness: {cause}")
    out = StringIO()
    print_suite(SuiteResult(tmp_path, outcomes), Console(file=out, width=400))
    assert f"harness: {cause}" in out.getvalue()


# --- JUnit XML ------------------------------------------------------------------------------------


def junit_text(outcomes: list[CaseOutcome], suite_name: str = "nightly") -> str:
    suite = Suite(name=suite_name, path=Path("suites/x.toml"), cases=tuple(o.case for o in outcomes))
    root = junit_document(suite, outcomes, STARTED, Path("/s"))
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True)


def mixed_outcomes() -> list[CaseOutcome]:
    return [
        outcome(case(0), True),
        outcome(case(1), False, {"durability": "1 lost: write of key 'k0' value 101 <script>alert(1)</script>"}),
        outcome(case(2, "invalid", ("stale-read",)), False, {"linearizable": "not linearizable: key k1"}),
        outcome(case(3, "invalid", ("stale-read",)), True),
        outcome(case(4), UNKNOWN, {"linearizable": "timed out after 120 s \x00\x1b[31m"}),
        outcome(case(5), UNKNOWN, {"harness": "RuntimeError: boom"}, error="RuntimeError: boom"),
    ]


def test_junit_validates_against_what_ci_systems_accept(tmp_path: Path) -> None:
    text = junit_text(mixed_outcomes())
    SCHEMA.validate(text)  # raises on any violation
    path = tmp_path / "junit.xml"
    path.write_text(text, encoding="utf-8")
    xml = JUnitXml.fromfile(str(path))
    suites = list(xml)
    assert len(suites) == 1
    suite = suites[0]
    assert (suite.tests, suite.failures, suite.errors) == (6, 2, 2)
    results = {case.name.split(" seed=")[1]: [type(r) for r in case.result] for case in suite}
    assert results["0 rep=1"] == []
    assert results["1 rep=1"] == [Failure]  # an anomaly
    assert results["2 rep=1"] == []  # a known bug caught: passes
    assert results["3 rep=1"] == [Failure]  # a known bug missed
    assert results["4 rep=1"] == [Error]  # unknown
    assert results["5 rep=1"] == [Error]  # crashed


def test_junit_failures_carry_checker_summaries_and_the_reproduce_command() -> None:
    root = ElementTree.fromstring(junit_text(mixed_outcomes()).encode("utf-8"))
    # as GitLab reads it: testsuites/testsuite/testcase, status from the first failure/error child
    cases = root.findall("./testsuite/testcase")
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("type") == "invalid"
    assert "durability: 1 lost" in (failure.text or "")
    assert "<script>alert(1)</script>" in (failure.text or "")  # escaped in the file, intact when read
    assert "reproduce: harness run --seed 1" in (failure.text or "")
    missed = cases[3].find("failure")
    assert missed is not None and missed.get("type") == "missed-bug" and "stale-read" in missed.get("message", "")
    unknown = cases[4].find("error")
    assert unknown is not None and "\\x00" in (unknown.text or "")  # control characters made visible, not raw
    caught = cases[2].find("system-out")
    assert caught is not None and "known bug caught by: linearizable" in (caught.text or "")
    assert all(c.get("classname") == "t.raft.register" for c in cases)


def test_a_checker_that_could_not_decide_is_not_named_as_catching_the_bug() -> None:
    """A queue run with duplicates: durability found them, the linearizability search ran out of memory.
    The run is invalid and the bug caught, by durability alone."""
    failed = {"linearizable": "linearizability unknown: memory budget of 2000000 states reached",
              "durability": "2 duplicated"}
    caught = outcome(case(0, "invalid", ("no-dedup",)), False, failed, invalid=("durability",))
    control = outcome(case(1), False, failed, invalid=("durability",))
    cases = ElementTree.fromstring(junit_text([caught, control]).encode("utf-8")).findall("./testsuite/testcase")
    out = cases[0].find("system-out")
    assert out is not None and (out.text or "").endswith("known bug caught by: durability")
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("message") == "invalid: durability found an anomaly"
    assert "linearizable: linearizability unknown" in (failure.text or "")  # still shown, as what it is


def test_junit_of_an_all_valid_suite_has_no_failures() -> None:
    text = junit_text([outcome(case(0), True), outcome(case(1), True)])
    SCHEMA.validate(text)
    root = ElementTree.fromstring(text.encode("utf-8"))
    assert root.get("failures") == "0" and root.get("errors") == "0" and root.get("tests") == "2"
    assert not root.findall(".//failure") and not root.findall(".//error")


# --- a whole suite, with fake runs -----------------------------------------------------------------


def test_run_suite_continues_after_a_crash_and_records_everything(tmp_path: Path) -> None:
    from harness.analysis.discovery import SUITE_JSON, find_runs

    suite = Suite(
        name="fake",
        path=tmp_path / "fake.toml",
        cases=(case(0), case(1), case(2, "invalid", ("stale-read",))),
        store=str(tmp_path / "store"),
    )
    calls: list[int] = []

    def fake_run(c: Case, store: str) -> CaseRun:
        calls.append(c.index)
        if c.index == 1:
            return CaseRun(None, f"harness run --seed {c.seed}", error="ConfigError: no engine")
        run_dir = Path(store) / "t" / f"2026112{c.index}T020000"
        run_dir.mkdir(parents=True)
        (run_dir / "test.json").write_text("{}", encoding="utf-8")
        return CaseRun(run_dir, f"harness run --seed {c.seed}", seconds=2.0)

    def fake_analyse(selection):  # noqa: ANN001, ANN202
        assert [r.suite for r in selection.runs] == ["fake", "fake"]
        return {r.path: (False if r.run.startswith("20261122") else True, {}, ()) for r in selection.runs}

    result = run_suite(suite, analyse=fake_analyse, run=fake_run, clock=lambda: STARTED)
    assert calls == [0, 1, 2]
    assert [o.status for o in result.outcomes] == ["passed", "error", "passed"]
    assert result.exit_code == 2
    assert result.directory == tmp_path / "store" / "suites" / "fake" / "20261122T020000"
    SCHEMA.validate(str(result.directory / "junit.xml"))
    # the suite directory is a suite for discovery: its two stored runs, with the suite's night
    runs = find_runs([result.directory]).runs
    assert [(r.suite, r.night) for r in runs] == [("fake", "2026-11-22")] * 2
    assert (result.directory / SUITE_JSON).is_file()
    summary = json.loads((result.directory / "summary.json").read_text(encoding="utf-8"))
    assert [(e["label"], e["runs"], e["met"]) for e in summary["entries"]] == [("raft", 2, 1), ("raft bug-stale-read", 1, 1)]


def test_a_suite_stops_with_a_run_that_a_signal_interrupted(tmp_path: Path) -> None:
    suite = Suite(name="fake", path=tmp_path / "fake.toml", cases=(case(0), case(1)), store=str(tmp_path / "store"))
    calls: list[int] = []

    def interrupted_run(c: Case, store: str) -> CaseRun:
        calls.append(c.index)
        return CaseRun(None, "harness run", error="interrupted (SIGTERM)", interrupted=True)

    with pytest.raises(KeyboardInterrupt):
        run_suite(suite, analyse=lambda selection: {}, run=interrupted_run, clock=lambda: STARTED)
    assert calls == [0]  # the next case never started
    record = json.loads((tmp_path / "store" / "suites" / "fake" / "20261122T020000" / "suite.json").read_text())
    assert "interrupted (SIGTERM)" in json.dumps(record)


def test_an_interrupted_suite_still_publishes_what_finished_from_the_runs_own_results(tmp_path: Path) -> None:
    """A CI timeout's SIGTERM after some runs: junit.xml, summary.json and suite.html are written for the
    runs that finished (judged from each run's results.json, no Spark job), then the suite is interrupted."""
    suite = Suite(name="fake", path=tmp_path / "fake.toml", cases=(case(0), case(1), case(2)),
                  store=str(tmp_path / "store"))

    def run(c: Case, store: str) -> CaseRun:
        run_dir = Path(store) / "cluster-raft" / f"20261122T02000{c.index}"
        run_dir.mkdir(parents=True)
        (run_dir / "test.json").write_text("{}", encoding="utf-8")
        if c.index == 0:
            results = {"valid": False, "checkers": {
                "durability": {"valid": False, "summary": "2 acknowledged writes lost"},
                "linearizable": {"valid": "unknown", "summary": "memory budget"},
                "lsn-monotonicity": {"valid": True, "summary": "fine"}}}
            (run_dir / "results.json").write_text(json.dumps(results), encoding="utf-8")
            return CaseRun(run_dir, "harness run --seed 0", seconds=2.0)
        return CaseRun(run_dir, "harness run --seed 1", error="interrupted (SIGTERM)", interrupted=True)

    def analyse(selection):  # noqa: ANN001, ANN202
        raise AssertionError("no Spark job after a signal")

    with pytest.raises(KeyboardInterrupt):
        run_suite(suite, analyse=analyse, run=run, clock=lambda: STARTED)
    directory = tmp_path / "store" / "suites" / "fake" / "20261122T020000"
    assert {"junit.xml", "summary.json", "suite.html", "suite.json"} <= {p.name for p in directory.iterdir()}
    SCHEMA.validate(str(directory / "junit.xml"))
    summary = json.loads((directory / "summary.json").read_text(encoding="utf-8"))
    first, second = summary["runs"]
    assert first["valid"] is False and first["invalid_checkers"] == ["durability"]
    assert second["valid"] == UNKNOWN and len(summary["runs"]) == 2  # the third never started


class RecordingProgress(SilentProgress):
    """A Progress that keeps what the suite told it about its cases."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []
        self.finished: list[str] = []

    def case_started(self, key: int, name: str) -> None:
        self.events.append(("started", key))

    def case_finished(self, key: int, message: str) -> None:
        self.events.append(("finished", key))
        self.finished.append(message)


def _verdicts_by_seed(selection):  # noqa: ANN001, ANN202
    """An analysis stand-in: even seeds valid, odd ones invalid."""
    import json as json_

    return {
        r.path: (json_.loads((r.path / "test.json").read_text())["seed"] % 2 == 0, {}, ()) for r in selection.runs
    }


def test_jobs_run_cases_at_once_and_judge_them_as_one_at_a_time_would(tmp_path: Path) -> None:
    import json as json_

    from tests.harness.fake_cases import paired_run, quick_run

    cases = tuple(case(i, "invalid" if i % 2 else "valid") for i in range(4))
    results = {}
    for jobs, runner in ((1, quick_run), (2, paired_run)):
        suite = Suite(name="par", path=tmp_path / "p.toml", cases=cases, store=str(tmp_path / f"store{jobs}"))
        progress = RecordingProgress()
        results[jobs] = run_suite(suite, analyse=_verdicts_by_seed, run=runner, progress=progress,
                                  clock=lambda: STARTED, jobs=jobs)
        if jobs == 2:
            assert sorted(progress.events) == sorted([(k, i) for i in range(4) for k in ("started", "finished")])
            met = [json_.loads((tmp_path / "store2" / f"t{i}" / "20261122T020000" / "test.json").read_text())
                   for i in range(4)]
            assert all(m["met_partner"] for m in met), met  # each pair ran at the same time
            assert len({m["pid"] for m in met}) == 4  # each case in a process of its own
    one, two = results[1], results[2]
    assert [(o.case.name, o.valid, o.status) for o in one.outcomes] == [
        (o.case.name, o.valid, o.status) for o in two.outcomes
    ]
    assert one.exit_code == two.exit_code == 0
    record = json_.loads((two.directory / "suite.json").read_text())
    assert [r["name"] for r in record["runs"]] == [c.name for c in cases]  # case order, not finishing order
    assert [r["path"] for r in record["runs"]] == [f"t{i}/20261122T020000" for i in range(4)]


def test_a_case_whose_process_dies_is_a_crash_and_the_others_still_run(tmp_path: Path) -> None:
    from tests.harness.fake_cases import dying_run

    cases = (case(0), case(1), case(2))
    suite = Suite(name="die", path=tmp_path / "d.toml", cases=cases, store=str(tmp_path / "store"))
    progress = RecordingProgress()
    result = run_suite(suite, analyse=_verdicts_by_seed, run=dying_run, progress=progress,
                       clock=lambda: STARTED, jobs=2)
    assert [o.status for o in result.outcomes] == ["passed", "error", "passed"]
    crashed = result.outcomes[1]
    assert crashed.failed_checkers == {"harness": "the process running this case died (exit code 3)"}
    assert any("crashed" in line and "exit code 3" in line for line in progress.finished)
    assert result.exit_code == 2


@pytest.mark.spark
def test_a_suite_over_synthetic_runs_through_the_real_pipeline(spark, tmp_path: Path) -> None:  # noqa: ANN001
    from harness.analysis.pipeline import analyze
    from tests.harness.synthetic_runs import write_run

    cases = (case(0), case(1, "invalid", ("stale-read",)), case(2, "invalid", ("stale-read",)))
    suite = Suite(name="synthetic", path=tmp_path / "s.toml", cases=cases, store=str(tmp_path / "store"))

    def synthetic_run(c: Case, store: str) -> CaseRun:
        # case 1's bug shows as a lost write; case 2's bug goes unnoticed (a correct history)
        run_dir = write_run(Path(store), "t", f"2026112{c.index}T020000", seed=c.index + 1, lost_write=c.index == 1)
        return CaseRun(run_dir, f"harness run --seed {c.seed}", seconds=1.0)

    def analyse(selection):  # noqa: ANN001, ANN202
        analysis = analyze(spark, selection)
        return {o.run.path: (o.valid, o.failed_checkers(), o.invalid_checkers()) for o in analysis.outcomes}

    result = run_suite(suite, analyse=analyse, run=synthetic_run, clock=lambda: STARTED)
    assert [(o.valid, o.status) for o in result.outcomes] == [(True, "passed"), (False, "passed"), (True, "failed")]
    assert result.exit_code == 1
    assert "durability" in result.outcomes[1].failed_checkers
    assert "durability" in result.outcomes[1].invalid_checkers
    summary = json.loads((result.directory / "summary.json").read_text(encoding="utf-8"))
    assert summary["runs"][1]["invalid_checkers"] == list(result.outcomes[1].invalid_checkers)
    xml = JUnitXml.fromfile(str(result.directory / "junit.xml"))
    SCHEMA.validate(str(result.directory / "junit.xml"))
    suite_xml = next(iter(xml))
    assert (suite_xml.tests, suite_xml.failures, suite_xml.errors) == (3, 1, 0)


@pytest.mark.parametrize(
    "broken",
    [
        '<testsuites><testsuite name="s" tests="1" failures="0" errors="0"><testcase classname="c" time="1.0"/>'
        "</testsuite></testsuites>",  # a test case without a name
        '<testsuites><testsuite name="s" tests="1" failures="0" errors="0"><testcase name="n" classname="c" '
        'time="1e3"/></testsuite></testsuites>',  # an exponent Jenkins' time parser rejects
        '<testsuites><testsuite name="s" tests="1" failures="0"><testcase name="n" classname="c" time="1"/>'
        "</testsuite></testsuites>",  # no errors count
        '<testsuites><testsuite name="s" tests="1" failures="0" errors="0"><testcase name="n" classname="c" '
        'time="1" file="x.py"/></testsuite></testsuites>',  # an attribute Jenkins' schema does not know
    ],
)
def test_the_schema_rejects_what_ci_systems_reject(broken: str) -> None:
    assert not SCHEMA.is_valid(broken)


# --- node settings and the simulator platform ------------------------------------------------------


def test_db_options_reach_the_spec_and_the_simulator_and_the_command_repeats_them() -> None:
    from harness.spec import TestSpec
    from harness.suite import RUN_CHECK_TIMEOUT, case_command, test_spec

    text = """
        [[matrix]]
        modes = ["raft"]
        workloads = ["register"]
        seeds = [5]
        core = {scouting = false, leader_quorum_timeout = 0}
        [[matrix]]
        modes = ["raft"]
        workloads = ["register"]
        seeds = [5]
        platform = "sim"
        core = {leader_quorum_timeout = 0}
        """
    real, simulated = parse(text, db="cluster").cases
    assert simulated.name.endswith(" platform=sim") and real.name != simulated.name
    spec = test_spec(real, "store")
    assert isinstance(spec, TestSpec) and spec.platform == "docker"
    assert spec.db == "cluster"
    assert spec.db_options == {"mode": "raft", "core": {"leader_quorum_timeout": 0, "scouting": False}}
    assert spec.check_timeout == RUN_CHECK_TIMEOUT  # the suite's Spark analysis is the judge
    # The reproduce command carries the node settings as `harness run --core NAME=VALUE`.
    assert " --mode raft --core leader_quorum_timeout=0 --core scouting=false " in case_command(real, "store")
    sim = test_spec(simulated, "store")
    assert sim.platform == "sim" and sim.db_options == {"mode": "raft", "core": {"leader_quorum_timeout": 0}}
    assert case_command(simulated, "store").endswith(" --seed 5 --platform sim")


def test_a_suite_without_a_db_or_with_an_unknown_one_is_one_sentence() -> None:
    with pytest.raises(SuiteError, match="db is missing: name the DB plugin"):
        parse_suite("[[matrix]]\nworkloads=['register']", Path("s.toml"), VOCABULARY)
    with pytest.raises(SuiteError, match="unknown db 'nosuchdb'"):
        parse("[[matrix]]\nworkloads=['register']", db="nosuchdb")


def test_the_client_binding_reaches_both_platforms_and_the_reproduce_command() -> None:
    from harness.suite import case_command, test_spec

    text = """
        [suite]
        client_binding = "node"
        [[matrix]]
        modes = ["raft"]
        workloads = ["register"]
        seeds = [5]
        [[matrix]]
        modes = ["raft"]
        workloads = ["register"]
        seeds = [5]
        platform = "sim"
        """
    real, simulated = parse(text, db="cluster").cases
    assert test_spec(real, "store").client_binding == "node"
    assert test_spec(simulated, "store").client_binding == "node"
    assert " --seed 5 --client-binding node" in case_command(real, "store")
    assert case_command(simulated, "store").endswith(" --seed 5 --platform sim --client-binding node")


def test_a_simulated_case_is_composed_by_the_simulator() -> None:
    from harness.suite import compose_case

    text = """
        [[matrix]]
        modes = ["raft"]
        workloads = ["register"]
        nemeses = ["partition"]
        platform = "sim"
        """
    (case,) = parse(text, db="cluster").cases
    case = replace(case, db_options={**case.db_options, "core": {"no_such_setting": 1}})
    with pytest.raises(ValueError, match="no_such_setting"):
        compose_case(case, "store")
