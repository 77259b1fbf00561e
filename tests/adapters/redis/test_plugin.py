"""The redis plugin as a user meets it: found by its entry point, listed with its options, its options
checked before anything is deployed (one line, exit 254), the mitigation naming the test, and the clock
nemesis and other workloads refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.redis.install import BUNDLE
from harness.cli import main
from harness.compose import compose
from harness.db.plugin import PluginError, load_plugin
from harness.spec import ConfigError, TestSpec


@pytest.fixture
def cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A controller whose cache holds a (fake) Redis bundle."""
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache" / "redis").mkdir(parents=True)
    (tmp_path / "cache" / "redis" / BUNDLE).write_bytes(b"not really a tarball")
    return tmp_path / "cache"


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_redis_is_found_through_its_entry_point_and_listed_with_its_options(capsys) -> None:
    assert load_plugin("redis").name == "redis"
    code, output = _run(capsys, "dbs", "redis")
    assert code == 0 and "Redis 7.0 with Sentinel" in output
    for option in ("min-replicas (int; default 0; from 0 to 8)", "max-lag (int; default 10; from 1 to 60)",
                   "wait (int; default 0; from 0 to 8)"):
        assert f"--db-opt {option}" in output


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--db-opt", "wait=two"), "option wait: 'two' is not a whole number"),
        (("--db-opt", "min-replicas=-1"), "option min-replicas: -1 is below the minimum 0"),
        (("--db-opt", "max-lag=3"), "option max-lag: only means something with min-replicas=N"),
        (("--db-opt", "wait=3", "--nodes", "3"), "option wait: 3 replicas, and 3 nodes have only 2"),
        (("--db-opt", "min-replicas=5"), "option min-replicas: 5 replicas, and 5 nodes have only 4"),
        (("--db-opt", "replicas=2"), "the redis DB has no option 'replicas'; its options: min-replicas, max-lag, wait"),
    ],
)
def test_a_bad_option_is_one_line_and_exit_254(capsys, cached, tmp_path, argv, expected) -> None:
    store = tmp_path / "store"
    code, output = _run(capsys, "run", "--db", "redis", "--store", str(store), "--seed", "1", *argv)
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 254 and len(lines) == 1, output
    assert expected in lines[0]
    assert not store.exists()


def test_a_missing_bundle_is_one_line_naming_the_command(capsys, empty_cache, tmp_path) -> None:
    code, output = _run(capsys, "run", "--db", "redis", "--store", str(tmp_path / "store"), "--seed", "1")
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 254 and len(lines) == 1, output
    assert "python -m adapters.redis" in lines[0]


def test_option_values_are_checked_before_anything_is_deployed(cached) -> None:
    plugin = load_plugin("redis")
    assert plugin.resolve({}) == {"min-replicas": 0, "max-lag": 10, "wait": 0}
    with pytest.raises(PluginError, match="above the maximum 8"):
        plugin.resolve({"wait": 9})


def test_the_mitigation_names_the_test_and_is_repeated_by_the_stored_command(cached) -> None:
    spec = TestSpec(seed=1, db="redis", nodes=5, nemesis=("partition",), time_limit=30,
                    db_options={"min-replicas": 2, "max-lag": 2, "wait": 2})
    comp = compose(spec)
    assert comp.test_name.startswith("redis-min2-wait2-register-partition")
    for given in ("--db-opt min-replicas=2", "--db-opt max-lag=2", "--db-opt wait=2"):
        assert given in comp.command()
    assert set(comp.not_applicable) == {"lsn-monotonicity"}


def test_the_clock_nemesis_and_other_workloads_are_refused(cached) -> None:
    with pytest.raises(ConfigError, match="'clock' nemesis needs the DB capability ClockSkew"):
        compose(TestSpec(seed=1, db="redis", nemesis=("partition", "clock")))
    with pytest.raises(ConfigError, match="runs the workloads register, not 'log'"):
        compose(TestSpec(seed=1, db="redis", workload="log", nemesis=("partition",)))
