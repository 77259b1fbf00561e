"""The etcd plugin as a user meets it: found by its entry point, listed with its options by ``harness dbs``,
its options checked before anything is deployed (one line, exit 254, nothing stored), and a test that
asks for the clock nemesis refused because etcd cannot take it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.compose import compose
from harness.db.plugin import PluginError, load_plugin
from harness.spec import ConfigError, TestSpec


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A controller whose etcd cache is empty."""
    monkeypatch.setenv("CHAOS_HARNESS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def fake_binary(tmp_path: Path) -> Path:
    """An executable file standing for an etcd binary the user gives with ``--db-opt binary=``."""
    path = tmp_path / "my-etcd"
    path.write_bytes(b"#!/bin/sh\n")
    path.chmod(0o755)
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_etcd_is_found_through_its_entry_point_and_listed_with_its_options(capsys) -> None:
    assert load_plugin("etcd").name == "etcd"
    code, output = _run(capsys, "dbs", "etcd")
    assert code == 0
    assert "etcd 3.4 (Debian's etcd-server)" in output
    assert "--db-opt reads (str; default linearizable; one of linearizable, serializable)" in output
    for option in ("binary (str)", "heartbeat_interval (int; default 100; from 10 to 10000)",
                   "election_timeout (int; default 1000; from 50 to 50000)"):
        assert f"--db-opt {option}" in output


def test_a_missing_etcd_binary_is_one_line_naming_the_install_script(capsys, empty_cache, tmp_path) -> None:
    store = tmp_path / "store"
    code, output = _run(capsys, "run", "--db", "etcd", "--nemesis", "partition", "--store", str(store), "--seed", "1")
    assert code == 254
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert "etcd-server binary is not on the controller" in lines[0] and "scripts/install-etcd.sh" in lines[0]
    assert not store.exists()


def test_without_nemesis_a_run_of_etcd_gets_the_default_it_can_take(capsys, empty_cache, tmp_path) -> None:
    # harness run's own default holds clock, which etcd refuses before anything else; etcd's plugin names
    # its own default, so the first thing a bare run meets is the next check (here: no binary cached).
    code, output = _run(capsys, "run", "--db", "etcd", "--store", str(tmp_path / "store"), "--seed", "1")
    assert code == 254
    assert "etcd-server binary is not on the controller" in output and "clock" not in output
    code, output = _run(capsys, "run", "--db", "etcd", "--help")
    assert code == 0 and "default partition,kill,pause, the etcd DB's" in " ".join(output.split())


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"reads": "stale"}, "unknown value 'stale'; valid: linearizable, serializable"),
        ({"election_timeout": 400}, "election_timeout (400 ms) must be at least 5 times heartbeat_interval (100 ms)"),
        ({"heartbeat_interval": 1}, "below the minimum 10"),
        ({"binary": "/nonexistent/etcd"}, "--db-opt binary=/nonexistent/etcd: no executable file there"),
    ],
)
def test_bad_options_are_refused_before_anything_is_deployed(options, expected, fake_binary) -> None:
    plugin = load_plugin("etcd")
    given = {"binary": str(fake_binary), **options}
    with pytest.raises(PluginError) as refused:
        plugin.resolve(given)
    assert expected in str(refused.value)


def test_the_broken_variant_names_the_test_and_is_repeated_by_the_stored_command(fake_binary) -> None:
    spec = TestSpec(seed=1, db="etcd", nemesis=("partition",), time_limit=30,
                    db_options={"reads": "serializable", "binary": str(fake_binary)})
    comp = compose(spec)
    assert comp.test_name == "etcd-serializable-register-partition"
    assert "--db-opt reads=serializable" in comp.command()
    assert comp.not_applicable == {}
    assert comp.checkers == ("single-leader-per-term", "lsn-monotonicity", "durability", "linearizable")
    assert comp.db.version() == {"binary": str(fake_binary.resolve()), "version": "given by --db-opt binary",
                                 "sha256": comp.db.binary.sha256, "reads": "serializable"}


def test_the_clock_nemesis_is_refused_because_etcd_has_no_clock_skew(fake_binary) -> None:
    spec = TestSpec(seed=1, db="etcd", nemesis=("partition", "clock"), db_options={"binary": str(fake_binary)})
    with pytest.raises(ConfigError, match="'clock' nemesis needs the DB capability ClockSkew"):
        compose(spec)
