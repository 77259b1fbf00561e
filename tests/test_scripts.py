"""scripts/test.sh's two parts against the markers pyproject.toml declares.

Every marker names tests that need something beyond the CPU (a container, Spark, a browser, real
processes), so the script runs them after the unmarked ones, one at a time: its ``SERIAL`` expression
must name exactly the declared markers, or a new marker's tests would run spread over the cores beside
each other.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _declared_markers() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {line.split(":", 1)[0].strip() for line in config["tool"]["pytest"]["ini_options"]["markers"]}


def _serial_markers() -> set[str]:
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    found = re.search(r'^SERIAL="([^"]*)"$', script, re.MULTILINE)
    assert found, "scripts/test.sh no longer sets SERIAL=\"...\" on a line of its own"
    words = found.group(1).split()
    assert words[1::2] == ["or"] * (len(words) // 2), f"SERIAL is not 'a or b or ...': {found.group(1)!r}"
    return set(words[::2])


def test_the_serial_part_runs_exactly_the_declared_markers() -> None:
    assert _serial_markers() == _declared_markers()
