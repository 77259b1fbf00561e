"""No import circle between two modules of the project (issue 30).

Every module under the project's packages is parsed with `ast`; its imports are collected wherever they stand,
at module level and inside functions alike (an import inside a function is a dependency all the same, only a
late one), but not those under ``if TYPE_CHECKING:``, which never run. ``from x import y`` where ``x.y`` is a
module of the project is an import of ``x.y``; otherwise it is an import of ``x``. Relative imports are resolved
against the importing module's package. Importing ``a.b.c`` counts as importing ``a.b.c`` only, not the packages
``a`` and ``a.b`` that Python runs on the way: a package's ``__init__`` importing its submodules is no circle, but
a submodule importing a name from its package's ``__init__`` while that ``__init__`` imports the submodule is one.

A circle is a strongly connected component of more than one module of that graph.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "checkers", "nemesis", "workloads", "cluster", "adapters")


def module_name(path: Path, root: Path = ROOT) -> str:
    """The dotted name of the module at `path` (a package's ``__init__.py`` is the package)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the project packages, by dotted name."""
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            modules[module_name(path, root)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement of `tree` that can run: the bodies of ``if TYPE_CHECKING:`` are skipped (their
    ``else:`` is not)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _resolve(target: str, modules: Iterable[str]) -> str | None:
    """The project module that importing `target` names: `target` itself, or its longest dotted prefix that is
    a module (``harness.sim.explore.name`` -> ``harness.sim.explore``); None outside the project."""
    known = set(modules)
    parts = target.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def imports_of(name: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The project modules that module `name` (at `path`) imports at run time."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _import_nodes(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base_parts = package.split(".") if package else []
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}" if base else alias.name
                targets.append(submodule if submodule in modules else base)
        for target in targets:
            resolved = _resolve(target, modules)
            if resolved is not None and resolved != name:
                found.add(resolved)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each project module -> the project modules it imports at run time."""
    modules = project_modules(root)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def import_circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node of `graph` (Tarjan's algorithm, iterative),
    each sorted, in sorted order."""
    edges = {node: sorted(set(targets)) for node, targets in graph.items()}
    for targets in list(edges.values()):
        for target in targets:
            edges.setdefault(target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, int]] = [(start, 0)]
        while work:
            node, position = work.pop()
            if position == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            targets = edges[node]
            if position < len(targets):
                work.append((node, position + 1))
                target = targets[position]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components)


def test_the_circle_finder_finds_circles() -> None:
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},
        "d": {"e"},
        "e": set(),
        "f": {"g"},
        "g": {"f"},
        "h": {"h"},
    }
    assert import_circles(graph) == [["a", "b", "c"], ["f", "g"]]
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_sees_late_relative_and_submodule_imports(tmp_path: Path) -> None:
    package = tmp_path / "harness"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text('"""p."""\nfrom .sub import leaf\n')
    (package / "sub" / "__init__.py").write_text('"""s."""\n')
    (package / "sub" / "leaf.py").write_text(
        '"""l."""\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness import other\n'
        "def late():\n    from .. import other\n"
    )
    (package / "other.py").write_text('"""o."""\ndef f():\n    import harness.sub.leaf\n')
    (package / "alone.py").write_text('"""a."""\nfrom harness import VALUE\n')
    graph = import_graph(tmp_path)
    assert graph["harness"] == {"harness.sub.leaf"}
    assert graph["harness.sub.leaf"] == {"harness.other"}
    assert graph["harness.other"] == {"harness.sub.leaf"}
    assert graph["harness.alone"] == {"harness"}
    assert import_circles(graph) == [["harness.other", "harness.sub.leaf"]]


def test_type_checking_imports_do_not_count(tmp_path: Path) -> None:
    package = tmp_path / "checkers"
    package.mkdir()
    (package / "__init__.py").write_text('"""p."""\n')
    (package / "a.py").write_text('"""a."""\nimport typing\nif typing.TYPE_CHECKING:\n    from checkers.b import B\n')
    (package / "b.py").write_text('"""b."""\nfrom checkers.a import A\n')
    assert import_circles(import_graph(tmp_path)) == []


def test_no_import_circle_between_project_modules() -> None:
    graph = import_graph()
    circles = import_circles(graph)
    lines = []
    for circle in circles:
        members = set(circle)
        lines.append(" <-> ".join(circle))
        for name in circle:
            inside = sorted(graph[name] & members)
            lines.append(f"    {name} imports {', '.join(inside)}")
    assert not circles, f"{len(circles)} import circle(s) between project modules:\n" + "\n".join(lines)
