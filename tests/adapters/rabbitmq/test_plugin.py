"""The rabbitmq plugin as a user meets it: found by its entry point, listed with its options, bad options
and a missing bundle refused in one line (exit 254), the unsafe options naming the test."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.rabbitmq.install import BUNDLE
from harness.cli import main
from harness.compose import compose
from harness.db.plugin import load_plugin
from harness.spec import ConfigError, TestSpec


@pytest.fixture
def cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A controller whose cache holds a (fake) RabbitMQ bundle."""
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache" / "rabbitmq").mkdir(parents=True)
    (tmp_path / "cache" / "rabbitmq" / BUNDLE).write_bytes(b"not really a tarball")
    return tmp_path / "cache"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_rabbitmq_is_found_through_its_entry_point_and_listed_with_its_options(capsys) -> None:
    assert load_plugin("rabbitmq").name == "rabbitmq"
    code, output = _run(capsys, "dbs", "rabbitmq")
    assert code == 0 and "RabbitMQ 3.10" in output
    assert "--db-opt queue_type (str; default quorum; one of quorum, classic)" in output
    assert "--db-opt confirms (str; default on; one of on, off)" in output


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--db-opt", "queue_type=stream"), "queue_type"),
        (("--db-opt", "confirms=maybe"), "confirms"),
        (("--nodes", "2"), "rabbitmq needs at least 3 nodes"),
        (("--db-opt", "durable=no"), "the rabbitmq DB has no option 'durable'"),
    ],
)
def test_a_bad_option_is_one_line_and_exit_254(capsys, cached, tmp_path, argv, expected) -> None:
    store = tmp_path / "store"
    code, output = _run(capsys, "run", "--db", "rabbitmq", "--workload", "queue", "--store", str(store),
                        "--seed", "1", *argv)
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 254 and len(lines) == 1, output
    assert expected in lines[0]
    assert not store.exists()


def test_a_missing_bundle_is_one_line_naming_the_command(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path / "cache"))
    code, output = _run(capsys, "run", "--db", "rabbitmq", "--workload", "queue", "--store",
                        str(tmp_path / "store"), "--seed", "1")
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 254 and len(lines) == 1, output
    assert "python -m adapters.rabbitmq" in lines[0]


def test_the_unsafe_options_name_the_test_and_the_contract_is_recorded(cached) -> None:
    spec = TestSpec(seed=1, db="rabbitmq", workload="queue", nodes=3, nemesis=("partition",), time_limit=30,
                    db_options={"queue_type": "classic", "confirms": "off"})
    comp = compose(spec)
    assert comp.test_name.startswith("rabbitmq-classic-noconfirms-queue-partition")
    assert "--db-opt confirms=off" in comp.command() and "--db-opt queue_type=classic" in comp.command()
    assert set(comp.not_applicable) == {"lsn-monotonicity", "single-leader-per-term"}


def test_other_workloads_and_the_clock_nemesis_are_refused(cached) -> None:
    with pytest.raises(ConfigError, match="runs the workloads queue, not 'register'"):
        compose(TestSpec(seed=1, db="rabbitmq", workload="register", nemesis=("partition",)))
    with pytest.raises(ConfigError, match="'clock' nemesis needs the DB capability ClockSkew"):
        compose(TestSpec(seed=1, db="rabbitmq", workload="queue", nemesis=("partition", "clock")))
