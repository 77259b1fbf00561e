"""``harness new-db``: the names it derives, the package it writes (valid, lint-clean, complete), bad input as
one line and exit 254 with nothing written, and the written plugin loaded by ``package.module:attribute``
from a directory on the path without installing it.

The written package's own tests, run as a user runs them, are in ``test_scaffold_package.py`` (local
processes, ``slow``) and ``test_scaffold_docker.py`` (installed with pip, on containers); here, its tests
of its capabilities pass against a harness that a test has given one capability more.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from harness.cli import main
from harness.compose import compose
from harness.db import MissingCapability, capabilities, check_capabilities
from harness.scaffold import FILES, ScaffoldError, names_for, write_skeleton
from harness.spec import ConfigError, TestSpec
from tests.harness import capability_extension

HARNESS = str(Path(sys.executable).with_name("harness"))
EXPECTED = {
    ".gitignore",
    "README.md",
    "pyproject.toml",
    "demo_chaos/__init__.py",
    "demo_chaos/client.py",
    "demo_chaos/db.py",
    "demo_chaos/server.py",
    "tests/test_demo_chaos.py",
    "tests/test_demo_chaos_docker.py",
}


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(("name", "package", "distribution", "cls"), [
    ("demo", "demo_chaos", "demo-chaos", "DemoDB"),
    ("my-db", "my_db_chaos", "my-db-chaos", "MyDbDB"),
    ("redis7_sentinel", "redis7_sentinel_chaos", "redis7-sentinel-chaos", "Redis7SentinelDB"),
])
def test_the_package_distribution_and_class_names_come_from_the_db_name(name, package, distribution, cls) -> None:
    names = names_for(name)
    assert (names.name, names.package, names.distribution, names.cls) == (name, package, distribution, cls)
    assert names.package.isidentifier()


@pytest.mark.parametrize("name", ["", "Demo", "1db", "my--db", "my db", "-db", "db-", "../x", "a.b", "é", "x" * 41])
def test_a_name_that_cannot_be_a_db_name_is_refused(name) -> None:
    with pytest.raises(ScaffoldError, match="is not a DB name"):
        names_for(name)


def test_new_db_writes_a_complete_package_that_parses_and_passes_ruff(tmp_path, capsys) -> None:
    assert main(["new-db", "demo", str(tmp_path / "x")]) == 0
    root = tmp_path / "x" / "demo"
    assert _files(root) == EXPECTED
    assert len(EXPECTED) == len(FILES)
    out = capsys.readouterr().out
    assert f"wrote {root}" in out and "pip install -e" in out and "harness dbs demo" in out
    for path in root.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            assert "@@" not in text, f"{path} has a placeholder left"
            if path.suffix == ".py":
                assert ast.get_docstring(ast.parse(text)), f"{path} opens without a docstring"
    project = tomllib.loads((root / "pyproject.toml").read_text())
    assert project["project"]["name"] == "demo-chaos"
    assert project["project"]["dependencies"] == ["chaos-harness"]
    assert project["project"]["entry-points"]["chaos_harness.dbs"] == {"demo": "demo_chaos:plugin"}
    assert project["tool"]["setuptools"]["packages"] == ["demo_chaos"]
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=root,
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_the_places_to_replace_are_marked_in_every_file_a_user_changes(tmp_path) -> None:
    root, _ = write_skeleton("demo", tmp_path)
    for relative in ("demo_chaos/db.py", "demo_chaos/client.py", "demo_chaos/__init__.py",
                     "demo_chaos/server.py", "README.md"):
        assert "REPLACE" in (root / relative).read_text(), relative


def test_the_default_directory_is_the_current_one_and_an_empty_target_is_used(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo").mkdir()
    assert main(["new-db", "demo"]) == 0
    assert _files(tmp_path / "demo") == EXPECTED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]  # no staging directory left


def _refused(capsys, argv: list[str]) -> str:
    assert main(argv) == 254
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_a_bad_name_is_one_line_and_exit_254_with_nothing_written(tmp_path, capsys) -> None:
    err = _refused(capsys, ["new-db", "My DB", str(tmp_path)])
    assert err.startswith("harness new-db: 'My DB' is not a DB name")
    assert list(tmp_path.iterdir()) == []


def test_a_target_that_is_not_empty_is_refused_and_left_alone(tmp_path, capsys) -> None:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "mine.txt").write_text("keep me")
    err = _refused(capsys, ["new-db", "demo", str(tmp_path)])
    assert "exists and is not empty" in err
    assert _files(tmp_path / "demo") == {"mine.txt"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]


def test_a_target_that_is_a_file_is_refused(tmp_path, capsys) -> None:
    (tmp_path / "demo").write_text("a file")
    assert "exists and is not a directory" in _refused(capsys, ["new-db", "demo", str(tmp_path)])


def test_a_dir_that_is_a_file_is_refused(tmp_path, capsys) -> None:
    (tmp_path / "plain").write_text("a file")
    assert "is not a directory" in _refused(capsys, ["new-db", "demo", str(tmp_path / "plain")])


def test_a_dir_that_cannot_be_written_is_refused(capsys) -> None:
    # procfs takes no new directories, whoever asks (the tests may run as root, whom modes do not stop).
    assert "cannot write into /proc/self/demo-parent" in _refused(capsys, ["new-db", "demo", "/proc/self/demo-parent"])


def test_the_name_of_an_installed_db_is_refused(tmp_path, capsys) -> None:
    err = _refused(capsys, ["new-db", "cluster", str(tmp_path)])
    assert "a DB called 'cluster' is already installed (adapters.cluster:plugin)" in err
    assert list(tmp_path.iterdir()) == []


def test_the_written_plugin_loads_by_module_and_attribute_from_the_path_without_installing(tmp_path) -> None:
    root, _ = write_skeleton("path-only", tmp_path)  # a name no installed package has
    env = {**os.environ, "PYTHONPATH": str(root)}
    listed = subprocess.run([HARNESS, "dbs", "path_only_chaos:plugin"], env=env, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("path-only  path-only (a skeleton from harness new-db")
    assert "--db-opt storage (str; default disk; one of disk, memory)" in listed.stdout
    bad = subprocess.run([HARNESS, "run", "--db", "path_only_chaos:plugin", "--db-opt", "storage=tape"],
                         env=env, capture_output=True, text=True)
    assert bad.returncode == 254
    assert bad.stderr.strip() == "harness run: option storage: unknown value 'tape'; valid: disk, memory"
    unknown = subprocess.run([HARNESS, "dbs", "path-only"], env=env, capture_output=True, text=True)
    assert unknown.returncode == 254  # not installed: no entry point, only the module on the path
    assert "unknown db 'path-only'" in unknown.stderr


def test_a_test_of_the_written_plugin_composes_with_its_capabilities_and_not_applicable_checkers(
    tmp_path, monkeypatch
) -> None:
    root, _ = write_skeleton("composed", tmp_path)
    monkeypatch.syspath_prepend(str(root))
    try:
        spec = TestSpec(seed=1, db="composed_chaos:plugin", nodes=3, nemesis=("partition", "kill", "pause", "clock"),
                        db_options={"storage": "memory"})
        comp = compose(spec)
        assert comp.test_name == "composed-memory-register-partition+kill+pause+clock"
        assert comp.options == {"port": 7300, "storage": "memory"}
        assert capabilities(comp.db) == list(type(comp.db).capabilities)  # what the written adapter declares
        assert comp.db.faketime is comp.faketime is not None  # the clock nemesis: processes start under it
        assert set(comp.not_applicable) == {"lsn-monotonicity"}
        assert comp.command().startswith("harness run --db composed_chaos:plugin --db-opt storage=memory --nodes 3")
        with pytest.raises(ConfigError, match="workloads register, not 'queue'"):
            compose(TestSpec(seed=1, db="composed_chaos:plugin", workload="queue"))
    finally:
        for module in [m for m in sys.modules if m == "composed_chaos" or m.startswith("composed_chaos.")]:
            del sys.modules[module]


def test_the_written_package_passes_its_capability_tests_when_the_harness_has_one_more(tmp_path, monkeypatch) -> None:
    """The harness grows a capability (``DataFile``) and a nemesis that needs it; the written adapter, whose
    ``data_file`` is a path, does not have it, and its own tests still pass."""
    root, _ = write_skeleton("grown", tmp_path / "x")
    extension = Path(capability_extension.__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(extension), os.environ.get("PYTHONPATH"))))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "capability_extension", "-m", "not docker", "-k", "capabilities",
         "-p", "no:cacheprovider", "-q", "-rA", "--basetemp", str(tmp_path / "basetemp")],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"harness extended: capability DataFile, nemesis {capability_extension.NEMESIS}" in done.stdout
    assert "PASSED tests/test_grown_chaos.py::test_the_adapter_takes_every_nemesis" in done.stdout, done.stdout
    assert "2 passed" in done.stdout, done.stdout
    # The same here, in this process: the adapter does not have the new capability, said in one sentence.
    capability_extension.add(monkeypatch.setitem)
    monkeypatch.syspath_prepend(str(root))
    try:
        comp = compose(TestSpec(seed=1, db="grown_chaos:plugin", nodes=3, nemesis=("kill",)))
        assert "DataFile" not in capabilities(comp.db)
        with pytest.raises(MissingCapability, match="'truncate-tail' nemesis needs the DB capability DataFile"):
            check_capabilities(comp.db, [capability_extension.NEMESIS])
    finally:
        for module in [m for m in sys.modules if m == "grown_chaos" or m.startswith("grown_chaos.")]:
            del sys.modules[module]
