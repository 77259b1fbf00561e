"""harness suite --shard K/N: disjoint slices of a suite whose union is the suite, balanced by expected
run time, the same for the same file; the CI nightly's matrix of shards fits its jobs' time limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.suite import SuiteError, case_cost, load_suite, parse_shard, shard_cases

ROOT = Path(__file__).resolve().parents[2]
NIGHTLY = ROOT / "suites" / "bugs-all-modes.toml"


@pytest.fixture(scope="module")
def nightly():  # noqa: ANN201 - a Suite; loading composes every case, so once per module
    return load_suite(NIGHTLY)


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


SECONDS_PER_RUN = 32.3
"""Wall seconds per container run of the nightly at --jobs 3 on a 2-core machine: 520 runs in about 4 h 40
min, measured in six parts (docs/analysis.md, "The nightly on containers, in parts")."""
SETUP_MINUTES = 20
"""scripts/setup.sh on a fresh machine, a Spark analysis of the slice, the uploads."""
MARGIN = 1.25
JOB_LIMIT_MINUTES = 360
"""GitHub Actions' limit for one job on a hosted runner."""


def test_every_shard_of_the_ci_nightly_fits_its_time_limit(nightly) -> None:
    import yaml

    workflow = yaml.safe_load((ROOT / "docs" / "ci" / "nightly.yml").read_text())
    job = workflow["jobs"]["bugs"]
    shards = job["strategy"]["matrix"]["shard"]
    n = int(job["env"]["SHARDS"])
    assert shards == list(range(1, n + 1))
    assert "--shard ${{ matrix.shard }}/${{ env.SHARDS }}" in " ".join(str(s.get("run", "")) for s in job["steps"])
    timeout = job["timeout-minutes"]
    assert timeout <= JOB_LIMIT_MINUTES
    for k in shards:
        cases = shard_cases(nightly, k, n).cases
        needed = SETUP_MINUTES + len(cases) * SECONDS_PER_RUN / 60
        assert needed * MARGIN <= timeout, f"shard {k}/{n}: {len(cases)} runs need about {needed:.0f} min"
