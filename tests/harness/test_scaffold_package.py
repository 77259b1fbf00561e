"""The package ``harness new-db`` writes passes its own tests of the adapter's pieces, run as a user runs
them (``python -m pytest -m "not docker"`` in the package): setup, client, kill, pause, status and
teardown against real local processes; and again against a harness with one capability more. Its Docker
tests run in ``test_scaffold_docker.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.scaffold import write_skeleton
from tests.harness import capability_extension

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("extended", [False, True], ids=["as-shipped", "one-capability-more"])
def test_the_written_package_passes_its_own_tests_without_docker(tmp_path, extended: bool) -> None:
    """``one-capability-more``: against a harness that a test gave a capability and a nemesis needing it
    (``capability_extension``), which the written adapter does not have."""
    root, _ = write_skeleton("demo", tmp_path / "x")
    env, plugin = dict(os.environ), []
    if extended:
        extension = str(Path(capability_extension.__file__).parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (extension, os.environ.get("PYTHONPATH"))))
        plugin = ["-p", "capability_extension"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *plugin, "-m", "not docker", "-p", "no:cacheprovider", "-q",
         "--basetemp", str(tmp_path / "basetemp")],
        cwd=root, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("harness extended" in done.stdout) == extended, done.stdout
    counts = package_tests(root)
    assert f"{counts['other']} passed, {counts['docker']} deselected" in done.stdout, done.stdout


def package_tests(root: Path) -> dict[str, int]:
    """How many tests the written package holds, counted from its test files (``docker``: those marked
    docker, module-wide in ``test_docker.py``; ``other``: the rest), so that a test added to the template
    needs no count changed here."""
    counts = {"docker": 0, "other": 0}
    for path in sorted((root / "tests").glob("test_*.py")):
        text = path.read_text()
        found = sum(1 for line in text.splitlines() if line.startswith(("def test_", "async def test_")))
        counts["docker" if "pytest.mark.docker" in text and "pytestmark" in text else "other"] += found
    return counts
