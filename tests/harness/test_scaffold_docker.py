"""Issue 11's proof that a DB adapter in a package outside the project runs with no change to the project:
``harness new-db`` writes a throwaway package into a temporary directory, pip installs it there (never
into the project's environment), and with only ``PYTHONPATH`` pointing at it ``harness dbs`` lists it,
``harness run --db NAME`` runs it on containers to a valid, stored verdict, and the package's own tests
pass (its Docker runs included: valid without faults, its deliberate bug caught under kills).

Needs the Docker engine and the node image (the conftest fails, never skips, when they are missing) and
the package index pip is configured with (pip builds the package with setuptools, as a user's pip does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.db.plugin import installed
from harness.platforms.docker import LABEL_RUN
from harness.scaffold import write_skeleton
from tests.harness.test_scaffold_package import package_tests

pytestmark = [pytest.mark.docker, pytest.mark.slow]

NAME = "throwaway"
HARNESS = str(Path(sys.executable).with_name("harness"))


def _no_containers_left(engine, run_dir: Path) -> None:
    run_id = json.loads((run_dir / "test.json").read_text())["platform"]["run_id"]
    label = {"label": f"{LABEL_RUN}={run_id}"}
    left = [c.name for c in engine.containers.list(all=True, filters=label)]
    left += [n.name for n in engine.networks.list(filters=label)]
    assert left == [], f"run {run_id} left {left}"


def test_an_outside_package_installed_with_pip_runs_with_no_change_to_the_project(docker_engine, tmp_path) -> None:
    root, _ = write_skeleton(NAME, tmp_path / "src")
    site = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
                          str(root)], capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert (site / "throwaway_chaos-0.1.0.dist-info" / "entry_points.txt").is_file()
    assert NAME not in installed()  # the project's environment is untouched
    env = {**os.environ, "PYTHONPATH": str(site)}

    listed = subprocess.run([HARNESS, "dbs"], env=env, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert f"\n{NAME}  {NAME} (a skeleton from harness new-db" in listed.stdout
    assert "cluster  " in listed.stdout  # the bundled adapter is found the same way, beside it

    store = tmp_path / "store"
    ran = subprocess.run(
        [HARNESS, "run", "--db", NAME, "--nodes", "3", "--nemesis", "none", "--time-limit", "5", "--seed", "1",
         "--store", str(store), "--no-live", "--analysis", "direct"],
        env=env, capture_output=True, text=True, timeout=900,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_dir = (store / "latest").resolve()
    assert run_dir.parent.name == f"{NAME}-register-none"
    test = json.loads((run_dir / "test.json").read_text())
    assert test["db"] == NAME and test["db_options"] == {"port": 7300, "storage": "disk"}
    assert test["command"].startswith(f"harness run --db {NAME} --nodes 3 --workload register --nemesis none")
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] is True
    assert {name: v["valid"] for name, v in results["checkers"].items()} == {"durability": True, "linearizable": True}
    assert set(results["not_applicable"]) == {"lsn-monotonicity", "single-leader-per-term"}
    assert sorted(p.name for p in (run_dir / "nodes").iterdir()) == ["n1", "n2", "n3"]
    assert "n1: primary" in (run_dir / "nodes" / "n1" / "server.log").read_text()
    _no_containers_left(docker_engine, run_dir)

    # The package's own tests, from outside its directory so that it is imported from where pip put it.
    basetemp = tmp_path / "package-tests"
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--basetemp", str(basetemp),
         str(root / "tests")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert f"{sum(package_tests(root).values())} passed" in tested.stdout, tested.stdout
    package_runs = {path.resolve() for path in basetemp.glob("*/store/*/*/test.json")}  # */: also *current links
    assert len(package_runs) == 2
    for test_json in package_runs:
        _no_containers_left(docker_engine, test_json.parent)
