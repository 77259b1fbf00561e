"""The nats plugin as a user meets it: the options it declares, its options checked before anything is
deployed (one line, exit 254, nothing stored), and the deliberately unsafe variant naming the test. What
every shipped plugin does (found by its entry point and listed by ``harness dbs``, a missing download, the
clock nemesis or another workload refused, ``--db-opt binary=``) is tested once for all of them in
tests/adapters/test_shipped.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.compose import compose
from harness.db.debian import CachedBinary
from harness.db.plugin import load_plugin
from harness.spec import TestSpec


def test_nats_declares_its_options() -> None:
    plugin = load_plugin("nats")
    assert plugin.summary.startswith("NATS JetStream 2.9 (Debian's nats-server)")
    assert [option.describe().partition(":")[0] for option in plugin.options] == [
        "replicas (int; default 3; from 1 to 5)", "storage (str; default file; one of file, memory)",
        "binary (str)"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--db-opt", "storage=disk"), "unknown value 'disk'; valid: file, memory"),
        (("--db-opt", "replicas=0"), "below the minimum 1"),
        (("--db-opt", "replicas=7"), "above the maximum 5"),
        (("--db-opt", "replicas=5", "--nodes", "3"), "replicas=5 needs at least 5 nodes, and the test has 3"),
    ],
)
def test_bad_options_are_refused_before_anything_is_deployed(
    downloads: dict[str, CachedBinary], refused: Callable[..., str], argv: tuple[str, ...], expected: str,
) -> None:
    assert expected in refused("--db", "nats", "--workload", "log", *argv)


def test_the_unsafe_variant_names_the_test_and_is_repeated_by_the_stored_command(
    downloads: dict[str, CachedBinary],
) -> None:
    spec = TestSpec(seed=1, db="nats", workload="log", nemesis=("partition", "kill"), time_limit=30,
                    db_options={"storage": "memory", "replicas": 1})
    comp = compose(spec)
    assert comp.test_name.startswith("nats-1-memory-log-")
    assert "--db-opt replicas=1" in comp.command() and "--db-opt storage=memory" in comp.command()
    assert set(comp.not_applicable) == {"single-leader-per-term"}
    assert "log" in comp.checkers
