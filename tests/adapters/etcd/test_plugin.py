"""The etcd plugin as a user meets it: the options and default nemesis it declares, its options checked
before anything is deployed (one line, exit 254, nothing stored), and the deliberately broken variant
naming the test. What every shipped plugin does (found by its entry point and listed by ``harness dbs``,
a missing download or the clock nemesis refused, ``--db-opt binary=``) is tested once for all of them in
tests/adapters/test_shipped.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.compose import compose
from harness.db.debian import CachedBinary
from harness.db.plugin import load_plugin
from harness.spec import TestSpec


def test_etcd_declares_its_options_and_a_default_nemesis_without_clock() -> None:
    plugin = load_plugin("etcd")
    assert plugin.summary.startswith("etcd 3.4 (Debian's etcd-server)")
    assert [option.describe().partition(":")[0] for option in plugin.options] == [
        "reads (str; default linearizable; one of linearizable, serializable)", "binary (str)",
        "heartbeat_interval (int; default 100; from 10 to 10000)",
        "election_timeout (int; default 1000; from 50 to 50000)"]
    assert plugin.default_nemesis == ("partition", "kill", "pause")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--db-opt", "reads=stale"), "unknown value 'stale'; valid: linearizable, serializable"),
        (("--db-opt", "election_timeout=400"),
         "election_timeout (400 ms) must be at least 5 times heartbeat_interval (100 ms)"),
        (("--db-opt", "heartbeat_interval=1"), "below the minimum 10"),
    ],
)
def test_bad_options_are_refused_before_anything_is_deployed(
    downloads: dict[str, CachedBinary], refused: Callable[..., str], argv: tuple[str, ...], expected: str,
) -> None:
    assert expected in refused("--db", "etcd", *argv)


def test_the_broken_variant_names_the_test_and_is_repeated_by_the_stored_command(
    downloads: dict[str, CachedBinary],
) -> None:
    spec = TestSpec(seed=1, db="etcd", nemesis=("partition",), time_limit=30,
                    db_options={"reads": "serializable"})
    comp = compose(spec)
    assert comp.test_name == "etcd-serializable-register-partition"
    assert "--db-opt reads=serializable" in comp.command()
    assert comp.not_applicable == {}
    assert comp.checkers == ("single-leader-per-term", "lsn-monotonicity", "durability", "linearizable")
    assert comp.db.version() == {**downloads["etcd"].to_json(), "reads": "serializable"}
