"""The direction of imports between packages (ARCHITECTURE.md), and the node's standard-library rule.

`cluster` and `checkers` import nothing from the other packages; `workloads` and `nemesis` may import
`checkers`; `harness` names no system under test: it imports neither `cluster` nor the bundled adapters
(`adapters`), which it finds only through the entry point (``harness.db.plugin``); the adapters import
the public parts of the harness and their system; nothing else imports `adapters`. `cluster` imports only
the standard library, so that it runs in a bare container with nothing but ``python3``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ("cluster", "checkers", "workloads", "nemesis", "harness", "adapters")
ALLOWED = {
    "cluster": {"cluster"},
    "checkers": {"checkers"},
    "workloads": {"workloads", "checkers", "nemesis.remote"},
    "nemesis": {"nemesis", "checkers"},
    "harness": {"harness", "checkers", "workloads", "nemesis"},
    "adapters": set(PROJECT),
}



def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _allowed(name: str, allowed: set[str]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in allowed)


@pytest.mark.parametrize("package", PROJECT)
def test_imports_follow_the_architecture(package: str) -> None:
    wrong = []
    for path in _modules(package):
        for line, name in _imports(path):
            top = name.split(".")[0]
            if top in PROJECT and not _allowed(name, ALLOWED[package]):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not wrong, "imports against ARCHITECTURE.md:\n" + "\n".join(wrong)


def test_cluster_uses_only_the_standard_library() -> None:
    stdlib = set(sys.stdlib_module_names)
    wrong = []
    for path in _modules("cluster"):
        for line, name in _imports(path):
            top = name.split(".")[0]
            if top != "cluster" and top not in stdlib and top != "__future__":
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not wrong, "cluster must run on a bare python3:\n" + "\n".join(wrong)


def test_every_module_opens_with_a_docstring() -> None:
    missing = []
    for package in PROJECT:
        for path in _modules(package):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if not ast.get_docstring(tree):
                missing.append(str(path.relative_to(ROOT)))
    assert not missing, "modules without a docstring saying what they are for:\n" + "\n".join(missing)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_node_core_has_no_import_circle() -> None:
    """The node core reads top-down: no module of `cluster.core` reaches itself through its imports, the
    ones made only for type checking included."""
    graph: dict[str, set[str]] = {}
    for path in _modules("cluster/core"):
        graph[_module_name(path)] = {name for _, name in _imports(path) if name.startswith("cluster.core")}
    circles = []
    for start in graph:
        seen: set[str] = set()
        stack = [start]
        while stack:
            for target in graph.get(stack.pop(), ()):
                if target == start:
                    circles.append(start)
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
    assert not sorted(set(circles)), f"import circles in the node core through: {sorted(set(circles))}"
