"""The redis plugin as a user meets it: the options it declares, checked before anything is deployed (one
line, exit 254, nothing stored), and the mitigation naming the test. What every shipped plugin does (found
by its entry point and listed by ``harness dbs``, a missing download, the clock nemesis or another
workload refused) is tested once for all of them in tests/adapters/test_shipped.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.compose import compose
from harness.db.debian import CachedBinary
from harness.db.plugin import PluginError, load_plugin
from harness.spec import TestSpec


def test_redis_declares_its_options() -> None:
    plugin = load_plugin("redis")
    assert plugin.summary.startswith("Redis 7.0 with Sentinel")
    assert [option.describe().partition(":")[0] for option in plugin.options] == [
        "min-replicas (int; default 0; from 0 to 8)", "max-lag (int; default 10; from 1 to 60)",
        "wait (int; default 0; from 0 to 8)"]


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
def test_a_bad_option_is_one_line_and_exit_254(
    downloads: dict[str, CachedBinary], refused: Callable[..., str], argv: tuple[str, ...], expected: str,
) -> None:
    assert expected in refused("--db", "redis", *argv)


def test_option_values_are_checked_before_anything_is_deployed(downloads: dict[str, CachedBinary]) -> None:
    plugin = load_plugin("redis")
    assert plugin.resolve({}) == {"min-replicas": 0, "max-lag": 10, "wait": 0}
    with pytest.raises(PluginError, match="above the maximum 8"):
        plugin.resolve({"wait": 9})


def test_the_mitigation_names_the_test_and_is_repeated_by_the_stored_command(
    downloads: dict[str, CachedBinary],
) -> None:
    spec = TestSpec(seed=1, db="redis", nodes=5, nemesis=("partition",), time_limit=30,
                    db_options={"min-replicas": 2, "max-lag": 2, "wait": 2})
    comp = compose(spec)
    assert comp.test_name.startswith("redis-min2-wait2-register-partition")
    for given in ("--db-opt min-replicas=2", "--db-opt max-lag=2", "--db-opt wait=2"):
        assert given in comp.command()
    assert set(comp.not_applicable) == {"lsn-monotonicity"}
