"""harness suite --shard K/N: disjoint slices of a suite whose union is the suite, balanced by expected
run time, the same for the same file and seed base; the shards' records merged into the record one machine
would have written; the CI nightly's matrix of shards fits its jobs' time limits.

Composing every case with the controller (what makes loading the every-mode suite take seconds) is tested
by tests/harness/test_suite.py; here the files are loaded with it switched off, since slicing and listing
depend only on the cases' names, time limits and platforms.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.cli import main as analysis_main
from harness.suite import (
    Case,
    CaseRun,
    Suite,
    SuiteError,
    case_cost,
    find_shard_records,
    load_suite,
    merge_shards,
    parse_shard,
    run_suite,
    select_cases,
    shard_cases,
)
from harness.suite import file as suite_file

ROOT = Path(__file__).resolve().parents[2]
NIGHTLY = ROOT / "suites" / "bugs-all-modes.toml"


def _no_compose(case: Case, store: str) -> None:
    return None


def load(path: Path, seed_base: int | None = None) -> Suite:
    return load_suite(path, compose=_no_compose, seed_base=seed_base)


@pytest.fixture(scope="module")
def nightly() -> Suite:
    return load(NIGHTLY)


@pytest.mark.parametrize("n", [1, 2, 4, 7])
def test_the_shards_of_the_nightly_are_disjoint_and_make_the_whole_suite(nightly, n: int) -> None:
    suite = nightly
    slices = [shard_cases(suite, k, n) for k in range(1, n + 1)]
    names = [[c.name for c in s.cases] for s in slices]
    every = [name for shard in names for name in shard]
    assert sorted(every) == sorted(c.name for c in suite.cases) and len(set(every)) == len(every)
    costs = [sum(case_cost(c) for c in s.cases) for s in slices]
    assert max(costs) - min(costs) <= max(case_cost(c) for c in suite.cases)  # greedy balance
    assert [[c.name for c in shard_cases(suite, k, n).cases] for k in range(1, n + 1)] == names  # stable
    for shard in slices:  # file order kept, numbered from 0 again
        assert [c.index for c in shard.cases] == list(range(len(shard.cases)))


def test_bad_or_empty_shards_are_refused(nightly) -> None:
    for text in ("0/4", "5/4", "2", "a/b", "1/0"):
        with pytest.raises(ValueError, match="--shard"):
            parse_shard(text)
    suite = nightly
    with pytest.raises(SuiteError, match="is empty"):
        shard_cases(suite, len(suite.cases) + 1, len(suite.cases) + 1)


def test_the_balance_is_by_expected_time_not_by_count() -> None:
    """suites/bugs.toml mixes container runs with simulated ones, which cost far less each: a slice of
    simulated runs holds more of them than a slice of container runs."""
    suite = load(ROOT / "suites" / "bugs.toml")
    assert len({case_cost(c) for c in suite.cases}) > 1
    slices = [shard_cases(suite, k, 2).cases for k in (1, 2)]
    costs = [sum(case_cost(c) for c in s) for s in slices]
    assert max(costs) - min(costs) <= max(case_cost(c) for c in suite.cases)
    by_count = [suite.cases[: len(suite.cases) // 2], suite.cases[len(suite.cases) // 2:]]
    assert max(costs) - min(costs) < abs(sum(map(case_cost, by_count[0])) - sum(map(case_cost, by_count[1])))


def _listed(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert analysis_main(["suite", str(NIGHTLY), "--list", *args]) == 0
    return [line.strip().split("  ")[1] for line in capsys.readouterr().out.rstrip().splitlines()]


def test_the_cli_lists_four_disjoint_shards_whose_union_is_the_suite(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``harness suite suites/bugs-all-modes.toml --shard K/4 --list`` for K = 1..4, on four machines: the
    same seed base gives every machine the same seeds, so the slices are the whole suite's runs."""
    monkeypatch.setattr(suite_file, "compose_case", _no_compose)
    whole = _listed(capsys, "--seed-base", "20261129")
    shards = [_listed(capsys, "--shard", f"{k}/4", "--seed-base", "20261129") for k in range(1, 5)]
    every = [name for shard in shards for name in shard]
    assert len(every) == len(set(every)) == len(whole) and set(every) == set(whole)
    assert all(shards) and max(map(len, shards)) - min(map(len, shards)) <= 1  # the nightly's runs cost alike
    again = _listed(capsys, "--shard", "3/4", "--seed-base", "20261129")
    assert again == shards[2]
    assert _listed(capsys, "--shard", "3/4", "--seed-base", "1") != shards[2]  # other seeds, other names


@pytest.mark.parametrize(
    ("shard", "message"),
    [
        ("0/4", "--shard '0/4': K must be between 1 and 4"),
        ("5/4", "--shard '5/4': K must be between 1 and 4"),
        ("x", "--shard 'x' is not K/N"),
        ("1/0", "N, the number of slices, must be at least 1"),
    ],
)
def test_a_bad_shard_is_one_line_and_254_before_the_file_is_read(
    shard: str, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unread(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the suite file was loaded for a bad --shard")

    monkeypatch.setattr(suite_file, "parse_suite", unread)
    assert analysis_main(["suite", str(NIGHTLY), "--shard", shard, "--list"]) == 254
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err and not captured.out
    assert err.startswith("harness suite: ") and "--shard" in err


# --- the shards' records merged -------------------------------------------------------------------


def _run_by_position(case: Case, store: str) -> CaseRun:
    """A stored run named by the case's place in the file, the same wherever a shard runs it."""
    run_dir = Path(store) / f"p{case.position}" / "20261129T020000"
    run_dir.mkdir(parents=True)
    (run_dir / "test.json").write_text(json.dumps({"seed": case.seed, "position": case.position}), encoding="utf-8")
    return CaseRun(run_dir, f"harness run --seed {case.seed}", seconds=1.5)


def _verdicts(met_all: bool):  # noqa: ANN202 - an analysis stand-in
    """Every third run unknown, the others as expected, or (``met_all`` false) every fifth the opposite."""

    def analyse(selection: Any) -> dict[Path, Any]:
        verdicts = {}
        for run in selection.runs:
            position = json.loads((Path(run.path) / "test.json").read_text())["position"]
            expected = None
            for line in (Path(run.path).parent.parent / ".expect").read_text().splitlines():
                number, expect = line.split()
                if int(number) == position:
                    expected = expect == "valid"
            if not met_all and position % 3 == 0:
                verdicts[run.path] = ("unknown", {"linearizable": "search budget reached"}, ())
            elif not met_all and position % 5 == 0:
                verdicts[run.path] = (not expected, {} if not expected else {"durability": "lost 1"},
                                      () if not expected else ("durability",))
            else:
                verdicts[run.path] = (expected, {} if expected else {"durability": "lost 2"},
                                      () if expected else ("durability",))
        return verdicts

    return analyse


def _run_suite(suite: Suite, store: Path, met_all: bool) -> Path:
    from datetime import UTC, datetime

    store.mkdir(parents=True)
    (store / ".expect").write_text("".join(f"{c.position} {c.expect}\n" for c in suite.cases), encoding="utf-8")
    result = run_suite(replace(suite, store=str(store)), analyse=_verdicts(met_all), run=_run_by_position,
                       clock=lambda: datetime(2026, 11, 29, 2, 0, 0, tzinfo=UTC))
    return result.directory


def _comparable(directory: Path, name: str, root: Path) -> Any:
    """A suite directory's file with what differs between stores taken out: the runs' store (``root/one``
    or ``root/night/shard-K``), and what a merge adds to say where it came from."""
    text = (directory / name).read_text(encoding="utf-8")
    text = re.sub(re.escape(str(root)) + r"/(one|night/shard-\d)/", "", text)  # absolute run paths
    text = re.sub(r"shard-\d/", "", text)  # the runs' places relative to the night's store
    if name == "junit.xml":
        return text
    data = json.loads(text)
    for key in ("shards", "missing_shards", "merged_from"):
        data.pop(key, None)
    return data


@pytest.fixture(scope="module")
def sample() -> Suite:
    """Three (bug, mode) pairs and a control entry of the nightly, 40 runs with expectations of both kinds."""
    return select_cases(load(NIGHTLY, seed_base=7), ["vote-twice", "control-nomination"])


@pytest.mark.parametrize("met_all", [False, True])
def test_the_record_of_merged_shards_equals_the_record_of_one_machine(
    sample: Suite, tmp_path: Path, met_all: bool
) -> None:
    """The same runs, on one machine or as two shards merged: the same suite.json, summary.json (counts,
    entries with their rates, every run) and junit.xml, and a suite page."""
    assert {c.expect for c in sample.cases} == {"valid", "invalid"}
    one = _run_suite(sample, tmp_path / "one", met_all)
    for k in (1, 2):
        _run_suite(shard_cases(sample, k, 2), tmp_path / "night" / f"shard-{k}", met_all)
    records = find_shard_records(sorted((tmp_path / "night").glob("shard-*")))
    assert len(records) == 2
    (merged,) = merge_shards(records, tmp_path / "night")
    assert merged.missing == () and merged.directory.parent == tmp_path / "night" / "suites" / sample.name
    for name in ("suite.json", "summary.json", "junit.xml"):
        assert _comparable(merged.directory, name, tmp_path) == _comparable(one, name, tmp_path), name
    assert (merged.directory / "suite.html").is_file()
    whole = json.loads((one / "summary.json").read_text())
    assert merged.exit_code == whole["exit_code"] == (0 if met_all else 1)
    assert whole["counts"]["runs"] == len(sample.cases)
    record = json.loads((merged.directory / "suite.json").read_text())
    assert record["shards"] == ["1/2", "2/2"]
    assert all(not Path(r["path"]).is_absolute() for r in record["runs"])  # links below the night's store


def test_a_missing_shard_is_named_and_the_night_is_not_a_pass(sample: Suite, tmp_path: Path) -> None:
    _run_suite(shard_cases(sample, 1, 3), tmp_path / "night" / "shard-1", met_all=True)
    _run_suite(shard_cases(sample, 3, 3), tmp_path / "night" / "shard-3", met_all=True)
    (merged,) = merge_shards(find_shard_records([tmp_path / "night"]), tmp_path / "night")
    assert merged.missing == (2,) and merged.result.exit_code == 0 and merged.exit_code == 2
    summary = json.loads((merged.directory / "summary.json").read_text())
    assert summary["missing_shards"] == [2] and summary["exit_code"] == 2
    assert "MISSING shard 2/3" in merged.describe()


def test_records_of_other_nights_or_whole_suites_are_not_merged_together(sample: Suite, tmp_path: Path) -> None:
    _run_suite(shard_cases(sample, 1, 2), tmp_path / "a" / "store", met_all=True)
    _run_suite(shard_cases(replace(sample, seed_base=8), 2, 2), tmp_path / "b" / "store", met_all=True)
    _run_suite(sample, tmp_path / "c" / "store", met_all=True)  # a whole suite: no shard to merge
    records = find_shard_records([tmp_path / "a" / "store", tmp_path / "b" / "store", tmp_path / "c" / "store"])
    assert len(records) == 2
    merged = merge_shards(records, tmp_path / "night")
    assert sorted(m.missing for m in merged) == [(1,), (2,)]
    assert find_shard_records([tmp_path / "a" / "store"], tmp_path / "a" / "store") == []  # its own store


# --- the CI nightly ------------------------------------------------------------------------------


SECONDS_PER_RUN = 32.3
"""Wall seconds per container run of the nightly at --jobs 3 on a 2-core machine: 520 runs in about 4 h 40
min, measured in six parts (docs/analysis.md, "The nightly on containers, in parts"). Not measured again
for a shard: the machine this was written on had no Docker engine running."""
JOBS = 3
"""The --jobs at which SECONDS_PER_RUN was measured, which every shard job must use."""
ANALYSIS_SECONDS_PER_RUN = 4.8
"""Spark seconds per run to analyse a night's runs again in the merge job: about 8 minutes for 100 runs,
the slowest part of that measurement (part 4, the no-dedup runs' linearizability searches)."""
SETUP_MINUTES = 20
"""scripts/setup.sh on a fresh machine, a Spark analysis of the slice, the uploads."""
MARGIN = 1.25
JOB_LIMIT_MINUTES = 360
"""GitHub Actions' limit for one job on a hosted runner."""


def _workflow() -> dict[str, Any]:
    import yaml

    return yaml.safe_load((ROOT / "docs" / "ci" / "nightly.yml").read_text(encoding="utf-8"))


def _commands(job: dict[str, Any]) -> str:
    return " ".join(str(step.get("run", "")) for step in job["steps"])


def test_every_job_of_the_ci_nightly_fits_its_time_limit() -> None:
    """Every shard of every suite the workflow runs, at the measured seconds a run, and the merge job at
    the measured seconds of analysis a run, fit their jobs' timeout-minutes with a quarter to spare."""
    jobs = _workflow()["jobs"]
    sharded = {name: job for name, job in jobs.items() if "shard" in job.get("strategy", {}).get("matrix", {})}
    assert set(sharded) == {"bugs", "nightly"}
    runs = 0
    for name, job in sharded.items():
        n = int(job["env"]["SHARDS"])
        assert job["strategy"]["matrix"]["shard"] == list(range(1, n + 1)), name
        command = _commands(job)
        assert "--shard ${{ matrix.shard }}/${{ env.SHARDS }}" in command
        assert "--seed-base ${{ github.run_id }}" in command  # one night's shards draw the same seeds
        assert f"--jobs {JOBS}" in command
        (path,) = re.findall(r"harness suite (\S+\.toml)", command)
        suite = load(ROOT / path)
        runs += len(suite.cases)
        timeout = job["timeout-minutes"]
        assert timeout <= JOB_LIMIT_MINUTES
        for k in range(1, n + 1):
            cases = shard_cases(suite, k, n).cases
            needed = SETUP_MINUTES + len(cases) * SECONDS_PER_RUN / 60
            assert needed * MARGIN <= timeout, f"{name} shard {k}/{n}: {len(cases)} runs need about {needed:.0f} min"
    merge = jobs["merge"]
    assert set(merge["needs"]) == set(sharded) and merge["if"] == "always()"
    assert "--summary" in _commands(merge) and "harness analyze night/store-* --store night" in _commands(merge)
    needed = SETUP_MINUTES + runs * ANALYSIS_SECONDS_PER_RUN / 60
    assert needed * MARGIN <= merge["timeout-minutes"] <= JOB_LIMIT_MINUTES, f"the merge needs about {needed:.0f} min"
    artifacts = [step["with"]["name"] for job in sharded.values() for step in job["steps"]
                 if "upload-artifact" in str(step.get("uses"))]
    downloads = [step["with"]["pattern"] for step in merge["steps"] if "download-artifact" in str(step.get("uses"))]
    assert downloads == ["store-*"] and all(a.startswith("store-") for a in artifacts)


@pytest.mark.spark
def test_harness_analyze_summary_over_shards_stores_says_what_one_store_says(tmp_path: Path) -> None:
    """``harness analyze SHARD1 SHARD2 --store NIGHT --summary``: the cross-run summary of the night equals
    the one of the same runs in one store, the shards' records become one suite directory judged by this
    analysis (each shard's own, deliberately wrong here, is not what counts), and the exit code is the
    merged suite's: its invalid runs are known bugs caught, so 0."""
    from tests.harness.synthetic_runs import write_run

    def case(position: int, expect: str) -> Case:
        bugs = ["stale-read"] if expect == "invalid" else []
        return Case(position, "cluster", {"mode": "raft", "bug": bugs}, "raft" + (" bug-stale-read" if bugs else ""),
                    "register", ("partition",), seed=position + 1, repetition=1, time_limit=10.0, expect=expect,
                    position=position)

    suite = Suite(name="night", path=Path("suites/night.toml"),
                  cases=tuple(case(p, "invalid" if p % 2 else "valid") for p in range(4)))

    def synthetic_run(c: Case, store: str) -> CaseRun:
        bugs = ("stale-read",) if c.expect == "invalid" else ()
        run_dir = write_run(Path(store), f"p{c.position}", "20261129T020000", seed=c.seed, ops=120,
                            lost_write=c.expect == "invalid", bugs=bugs)
        return CaseRun(run_dir, f"harness run --seed {c.seed}", seconds=1.0)

    def wrong(selection: Any) -> dict[Path, Any]:
        return {r.path: ("unknown", {"linearizable": "not decided"}, ()) for r in selection.runs}

    from datetime import UTC, datetime

    def run_into(piece: Suite, store: Path) -> None:
        run_suite(replace(piece, store=str(store)), analyse=wrong, run=synthetic_run,
                  clock=lambda: datetime(2026, 11, 29, 2, 0, 0, tzinfo=UTC))

    run_into(suite, tmp_path / "one")
    for k in (1, 2):
        run_into(shard_cases(suite, k, 2), tmp_path / "night" / f"shard-{k}")
    assert analysis_main(["analyze", str(tmp_path / "one"), "--summary", "--quiet"]) == 1  # invalid runs
    night = tmp_path / "night"
    code = analysis_main(["analyze", str(night / "shard-1"), str(night / "shard-2"), "--store", str(night),
                          "--summary", "--quiet"])
    assert code == 0  # every known bug caught, every control valid
    one = json.loads((tmp_path / "one" / "summary.json").read_text(encoding="utf-8"))
    merged = json.loads((night / "summary.json").read_text(encoding="utf-8"))
    assert merged["groups"] == one["groups"] and len(merged["groups"]) == 2
    (directory,) = (night / "suites" / "night").iterdir()
    record = json.loads((directory / "summary.json").read_text(encoding="utf-8"))
    assert record["counts"]["runs"] == 4 and record["counts"]["passed"] == 4 and record["exit_code"] == 0
    assert record["shards"] == ["1/2", "2/2"] and (directory / "junit.xml").is_file()
    assert (directory / "suite.html").is_file()
