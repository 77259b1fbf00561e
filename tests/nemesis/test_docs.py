"""docs/nemesis.md's list of the files a new fault touches is the true one.

The list sits between ``<!-- fault-files -->`` markers; every module of the project, tests aside, that
names a fault class of ``nemesis.faults`` (a dataclass with an ``f``) must be on it, and every file on it
must name one, so the list can neither miss a dispatch ladder nor keep a file that no longer has one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from nemesis import faults

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "nemesis", "workloads", "checkers", "adapters", "cluster")


def _fault_classes() -> set[str]:
    return {
        name for name, value in vars(faults).items()
        if isinstance(value, type) and isinstance(getattr(value, "f", None), str) and value.__module__ == faults.__name__
    }


def _names_fault_class(path: Path, classes: set[str]) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "nemesis.faults":
            if any(alias.name in classes for alias in node.names):
                return True
        if isinstance(node, ast.Attribute) and node.attr in classes and isinstance(node.value, ast.Name):
            if node.value.id in ("faults", "nemesis_faults"):
                return True
    return False


def _documented() -> set[str]:
    text = (ROOT / "docs" / "nemesis.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- fault-files -->(.*?)<!-- /fault-files -->", text, re.S)
    assert block, "docs/nemesis.md lost its <!-- fault-files --> list"
    return set(re.findall(r"^- `([^`]+)`", block.group(1), re.M))


def test_the_fault_classes_are_found() -> None:
    assert {"Partition", "Kill", "ClockBump", "Latency", "Heal"} <= _fault_classes()


def test_the_files_a_new_fault_touches_are_the_documented_ones() -> None:
    classes = _fault_classes()
    naming = {
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name != "faults.py" or path.parent.name != "nemesis"
        if _names_fault_class(path, classes)
    }
    assert naming | {"nemesis/faults.py"} == _documented()
