"""The nats plugin as a user meets it: found by its entry point, listed with its options by ``harness dbs``,
its options checked before anything is deployed (one line, exit 254), and a test that asks for the clock
nemesis or another workload refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.compose import compose
from harness.db.plugin import PluginError, load_plugin
from harness.spec import ConfigError, TestSpec


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A controller whose nats-server cache is empty."""
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def fake_binary(tmp_path: Path) -> Path:
    """An executable file standing for a nats-server the user gives with ``--db-opt binary=``."""
    path = tmp_path / "my-nats-server"
    path.write_bytes(b"#!/bin/sh\n")
    path.chmod(0o755)
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_nats_is_found_through_its_entry_point_and_listed_with_its_options(capsys) -> None:
    assert load_plugin("nats").name == "nats"
    code, output = _run(capsys, "dbs", "nats")
    assert code == 0 and "NATS JetStream 2.9 (Debian's nats-server)" in output
    for option in ("replicas (int; default 3; from 1 to 5)", "storage (str; default file; one of file, memory)",
                   "binary (str)"):
        assert f"--db-opt {option}" in output


def test_a_missing_binary_is_one_line_naming_the_install_script(capsys, empty_cache, tmp_path) -> None:
    store = tmp_path / "store"
    code, output = _run(capsys, "run", "--db", "nats", "--workload", "log", "--store", str(store), "--seed", "1")
    assert code == 254
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert "nats-server binary is not on the controller" in lines[0] and "scripts/install-nats.sh" in lines[0]
    assert not store.exists()


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"storage": "disk"}, "unknown value 'disk'; valid: file, memory"),
        ({"replicas": 0}, "below the minimum 1"),
        ({"replicas": 7}, "above the maximum 5"),
        ({"binary": "/nonexistent/nats-server"}, "--db-opt binary=/nonexistent/nats-server: no executable file"),
    ],
)
def test_bad_options_are_refused_before_anything_is_deployed(options, expected, fake_binary) -> None:
    with pytest.raises(PluginError) as refused:
        load_plugin("nats").resolve({"binary": str(fake_binary), **options})
    assert expected in str(refused.value)


def test_more_replicas_than_nodes_is_refused_in_one_sentence(fake_binary) -> None:
    spec = TestSpec(seed=1, db="nats", workload="log", nodes=3, nemesis=("partition",),
                    db_options={"replicas": 5, "binary": str(fake_binary)})
    with pytest.raises(ConfigError, match="replicas=5 needs at least 5 nodes, and the test has 3"):
        compose(spec)


def test_the_unsafe_variant_names_the_test_and_is_repeated_by_the_stored_command(fake_binary) -> None:
    spec = TestSpec(seed=1, db="nats", workload="log", nemesis=("partition", "kill"), time_limit=30,
                    db_options={"storage": "memory", "replicas": 1, "binary": str(fake_binary)})
    comp = compose(spec)
    assert comp.test_name.startswith("nats-1-memory-log-")
    assert "--db-opt replicas=1" in comp.command() and "--db-opt storage=memory" in comp.command()
    assert set(comp.not_applicable) == {"single-leader-per-term"}
    assert "log" in comp.checkers


def test_the_clock_nemesis_and_other_workloads_are_refused(fake_binary) -> None:
    options = {"binary": str(fake_binary)}
    with pytest.raises(ConfigError, match="'clock' nemesis needs the DB capability ClockSkew"):
        compose(TestSpec(seed=1, db="nats", workload="log", nemesis=("partition", "clock"), db_options=options))
    with pytest.raises(ConfigError, match="runs the workloads log, not 'register'"):
        compose(TestSpec(seed=1, db="nats", workload="register", nemesis=("partition",), db_options=options))
