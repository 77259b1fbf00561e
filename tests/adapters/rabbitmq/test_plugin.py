"""The rabbitmq plugin as a user meets it: the options it declares, bad options refused in one line (exit
254, nothing stored), the unsafe options naming the test. What every shipped plugin does (found by its
entry point and listed by ``harness dbs``, a missing download, the clock nemesis or another workload
refused) is tested once for all of them in tests/adapters/test_shipped.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.compose import compose
from harness.db.debian import CachedBinary
from harness.db.plugin import load_plugin
from harness.spec import TestSpec


def test_rabbitmq_declares_its_options() -> None:
    plugin = load_plugin("rabbitmq")
    assert plugin.summary.startswith("RabbitMQ 3.10")
    assert [option.describe().partition(":")[0] for option in plugin.options] == [
        "queue_type (str; default quorum; one of quorum, classic)",
        "confirms (str; default on; one of on, off)"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--db-opt", "queue_type=stream"), "queue_type"),
        (("--db-opt", "confirms=maybe"), "confirms"),
        (("--nodes", "2"), "rabbitmq needs at least 3 nodes"),
        (("--db-opt", "durable=no"), "the rabbitmq DB has no option 'durable'"),
    ],
)
def test_a_bad_option_is_one_line_and_exit_254(
    downloads: dict[str, CachedBinary], refused: Callable[..., str], argv: tuple[str, ...], expected: str,
) -> None:
    assert expected in refused("--db", "rabbitmq", "--workload", "queue", *argv)


def test_the_unsafe_options_name_the_test_and_the_contract_is_recorded(
    downloads: dict[str, CachedBinary],
) -> None:
    spec = TestSpec(seed=1, db="rabbitmq", workload="queue", nodes=3, nemesis=("partition",), time_limit=30,
                    db_options={"queue_type": "classic", "confirms": "off"})
    comp = compose(spec)
    assert comp.test_name.startswith("rabbitmq-classic-noconfirms-queue-partition")
    assert "--db-opt confirms=off" in comp.command() and "--db-opt queue_type=classic" in comp.command()
    assert set(comp.not_applicable) == {"lsn-monotonicity", "single-leader-per-term"}
