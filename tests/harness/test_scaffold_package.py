"""The package ``harness new-db`` writes passes its own tests of the adapter's pieces, run as a user runs
them (``python -m pytest -m "not docker"`` in the package): setup, client, kill, pause, status and
teardown against real local processes. Its Docker tests run in ``test_scaffold_docker.py``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.scaffold import write_skeleton

pytestmark = pytest.mark.slow


def test_the_written_package_passes_its_own_tests_without_docker(tmp_path) -> None:
    root, _ = write_skeleton("demo", tmp_path / "x")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "not docker", "-p", "no:cacheprovider", "-q",
         "--basetemp", str(tmp_path / "basetemp")],
        cwd=root, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "9 passed, 2 deselected" in done.stdout, done.stdout
